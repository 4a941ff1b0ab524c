//! The binary TCP order-entry gateway (`docs/protocol-binary.md`; the codec is
//! `bourse_protocol::binary`): length-framed, little-endian, fixed-layout messages. A
//! client logs in with an API key, then pipelines new orders, cancels, amends and
//! status requests; acknowledgements and rejects come back by request id, fills and
//! order updates as they happen (from the hub's private channels, so a maker hears of
//! its fills too).
//!
//! The gateway is a decoder, a renderer and a listener: each connection is one task
//! that reads what the socket has, decodes every whole frame into order entry's
//! requests and submits them on its own lane (`order_entry::in_flight`, which matches
//! the lane's outcomes to them); answers, fills and updates are rendered into one
//! output buffer (`connection::Output`) and written without waiting. Acknowledgements
//! carry only the command's stamp (`Detail::Stamp`), so nothing is read or allocated
//! per request beyond its frame's fields.
//!
//! A connection with its limit of requests in flight is not read until answers come
//! (TCP flow control holds the client back). A client that does not read is closed
//! (`slow_consumer`: more than `[limits] tcp_queue_frames` frames queued, or nothing
//! taken for `WRITE_TIMEOUT`); one that sends nothing for `[limits] idle_timeout_ms` is
//! closed (`idle_timeout`), one that does not log in within `[auth] login_timeout_ms`
//! too (`login_required`).

use std::borrow::Cow;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bourse_core::command::OrderType;
use bourse_core::ids::AccountId;
use bourse_core::{Offset, OrderSize, RejectReason, Side, StpMode, TimeInForce};
use bourse_protocol::binary::{
    self as wire, ClientMessage, Fill, NewOrder, OrderReport, ServerMessage, WireDecimal,
};
use bourse_protocol::signing::{now_ms, LOGIN_METHOD, TCP_LOGIN_PATH};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{mpsc, watch};

use crate::gateways::shared::connection::Output;
use crate::gateways::shared::socket_loop::{Input, SocketLoop, Wake};
use crate::port::auth::Signed;
use crate::port::error::{ApiError, ApiResult, ErrorCode};
use crate::port::orders::answer::{Answer, Detail};
use crate::port::orders::in_flight::InFlight;
use crate::port::orders::request::{self, CheckedClientOrderId, Request, Target};
use crate::port::queries::OrderRecord;
use crate::port::session::Session;
use crate::port::state::Shared;
use crate::reference::InstrumentInfo;
use crate::services::feed::channel::{
    follow_orders_and_fills, FeedBody, FeedMessage, FillMessage, HubCommand, Kill, Outbound,
};

/// Bytes read from the socket at a time, at most.
const READ_BUFFER_BYTES: usize = 64 * 1024;

const _: () = assert!(READ_BUFFER_BYTES >= wire::FRAME_HEADER_BYTES + wire::FRAME_BYTES_MAX);

/// Accepts connections until `stop` turns true.
pub async fn serve(listener: TcpListener, state: Shared, mut stop: watch::Receiver<bool>) {
    loop {
        tokio::select! {
            accepted = listener.accept() => {
                if let Ok((stream, peer)) = accepted {
                    let _ = stream.set_nodelay(true);
                    tokio::spawn(Connection::run(Arc::clone(&state), stream, peer, stop.clone()));
                }
            }
            _ = stop.changed() => return,
        }
    }
}

/// The requests that go to the engine, for `/metrics`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Route {
    NewOrder,
    Cancel,
    Amend,
}

impl Route {
    fn name(self) -> &'static str {
        match self {
            Route::NewOrder => "new_order",
            Route::Cancel => "cancel",
            Route::Amend => "amend",
        }
    }
}

/// What the connection keeps of a request in flight.
struct Waiting {
    request_id: u64,
    client_order_id: String,
    route: Route,
    started: Instant,
}

struct Connection {
    state: Shared,
    id: u64,
    kill: Arc<Kill>,
    hub_outbound: Outbound,
    /// Once logged in: who, holding its place among its key's connections.
    session: Option<Session>,
    account: Option<AccountId>,
    in_flight: InFlight<Waiting>,
    output: Output,
    /// Frames queued at most before the client counts as not reading.
    output_frames_max: usize,
    /// `/metrics` handles by route and status, looked up once.
    route_metrics: crate::metrics::RouteCache,
}

impl Connection {
    async fn run(state: Shared, stream: TcpStream, _peer: SocketAddr, stop: watch::Receiver<bool>) {
        state.metrics.connection_opened("tcp");
        let queue = state.limits.tcp_queue_frames.max(1);
        let kill = Arc::new(Kill::default());
        let (hub_sender, hub_receiver) = mpsc::channel(queue);
        let (in_flight, releases) = InFlight::open(&state.entry);
        let idle_timeout = Duration::from_millis(state.limits.idle_timeout_ms.max(1));
        let login_timeout = state.login_timeout;
        let mut connection = Connection {
            hub_outbound: Outbound { sender: hub_sender, kill: Arc::clone(&kill) },
            id: crate::gateways::shared::connection::next_connection_id(),
            state,
            kill: Arc::clone(&kill),
            session: None,
            account: None,
            in_flight,
            output: Output::default(),
            output_frames_max: queue,
            route_metrics: crate::metrics::RouteCache::default(),
        };
        let opened = Instant::now();
        let deadlines = [idle_timeout, login_timeout];
        let mut socket = SocketLoop::new(
            stream,
            READ_BUFFER_BYTES,
            releases,
            Some(Arc::clone(&kill)),
            stop,
            &deadlines,
        );
        socket.follow_hub(hub_receiver);
        loop {
            let accepting = !connection.in_flight.is_full();
            match socket.wake(accepting, &connection.output).await {
                Wake::Killed => break,
                Wake::Stopping => kill.kill(ErrorCode::ShuttingDown),
                Wake::Released(released) => connection.take_released(&released).await,
                Wake::Read => connection.take_input(&mut socket.input).await,
                Wake::Hub(message) => connection.forward(&message),
                Wake::ReadClosed | Wake::Writable => {}
                Wake::Tick => {
                    let now = Instant::now();
                    if connection.session.is_none() && now - opened >= login_timeout {
                        kill.kill(ErrorCode::LoginTimeout);
                    } else if socket.input.open && now - socket.input.last_read >= idle_timeout {
                        kill.kill(ErrorCode::IdleTimeout);
                    } else if connection.output.stalled(now) {
                        kill.kill(ErrorCode::SlowConsumer);
                    }
                }
            }
            // Whatever else is ready goes out in the same write.
            while let Some(released) = socket.ready_released() {
                connection.take_released(&released).await;
            }
            while let Some(message) = socket.ready_hub() {
                connection.forward(&message);
            }
            if !socket.flush(&mut connection.output) {
                kill.kill(ErrorCode::Closed);
            }
            let settled = connection.in_flight.is_empty() && !connection.output.pending();
            if !socket.input.open && settled {
                break;
            }
        }
        connection.close(&kill, &mut socket).await;
    }

    /// Says goodbye (with the reason it was closed for), writes what is left and lets
    /// the hub and the key's connection count know.
    async fn close(mut self, kill: &Kill, socket: &mut SocketLoop) {
        let reason = kill.reason().unwrap_or(ErrorCode::Closed);
        tracing::debug!(connection = self.id, reason = reason.as_str(), "tcp connection closed");
        if reason != ErrorCode::Closed {
            self.goodbye(reason);
        }
        if reason != ErrorCode::SlowConsumer {
            socket.drain(&mut self.output).await;
        }
        let _ = self.state.hub.send(HubCommand::Disconnected { connection: self.id }).await;
        self.state.metrics.connection_closed("tcp");
    }

    /// Handles every whole frame in the input, keeping a partial one for the next read.
    /// A bad frame closes the connection (`malformed_frame`).
    async fn take_input(&mut self, input: &mut Input) {
        let mut at = 0;
        while input.filled - at >= wire::FRAME_HEADER_BYTES {
            let length = usize::from(u16::from_le_bytes([input.buffer[at], input.buffer[at + 1]]));
            if length == 0 || length > wire::FRAME_BYTES_MAX {
                input.open = false;
                return self.kill.kill(ErrorCode::MalformedFrame);
            }
            let end = at + wire::FRAME_HEADER_BYTES + length;
            if end > input.filled {
                break;
            }
            match wire::decode_client(&input.buffer[at + wire::FRAME_HEADER_BYTES..end]) {
                Ok(message) => self.handle(message).await,
                Err(_) => {
                    input.open = false;
                    return self.kill.kill(ErrorCode::MalformedFrame);
                }
            }
            at = end;
            if self.kill.reason().is_some() {
                input.open = false;
                return;
            }
        }
        input.take(at);
    }

    /// Appends one frame to the output; too many queued closes the connection.
    fn emit(&mut self, message: &ServerMessage<&str>) {
        self.output.push(|bytes| message.encode_into(bytes));
        if self.output.messages() > self.output_frames_max {
            self.kill.kill(ErrorCode::SlowConsumer);
        }
    }

    fn goodbye(&mut self, reason: ErrorCode) {
        let goodbye = ServerMessage::Goodbye { code: wire_code(reason), text: reason.as_str() };
        self.output.push(|bytes| goodbye.encode_into(bytes));
    }

    fn reject(&mut self, request_id: u64, code: u16, client_order_id: &str) {
        self.emit(&ServerMessage::Rejected { request_id, code, client_order_id });
    }

    async fn handle(&mut self, message: ClientMessage) {
        match message {
            ClientMessage::Heartbeat => self.emit(&ServerMessage::Heartbeat),
            ClientMessage::Login { key, timestamp_ms, signature } => {
                self.login(&key, timestamp_ms, &signature).await
            }
            _ if self.session.is_none() => self.kill.kill(ErrorCode::LoginRequired),
            other => self.request(other).await,
        }
    }

    async fn login(&mut self, key: &str, timestamp_ms: u64, signature: &[u8; 32]) {
        if self.session.is_some() {
            return self.kill.kill(ErrorCode::AlreadyLoggedIn);
        }
        let timestamp = timestamp_ms.to_string();
        let signature_hex = hex::encode(signature);
        let signed = Signed {
            key_id: key,
            timestamp: &timestamp,
            signature_hex: &signature_hex,
            method: LOGIN_METHOD,
            path_and_query: TCP_LOGIN_PATH,
            body: b"",
        };
        let session = match self.state.login_with_key(&signed, now_ms()) {
            Ok(session) => session,
            Err(error) => return self.kill.kill(error.code),
        };
        let Ok(account) = session.account().map(str::to_string) else {
            return self.kill.kill(ErrorCode::Forbidden);
        };
        tracing::info!(connection = self.id, key = session.key_id(), "tcp login");
        self.session = Some(session);
        self.emit(&ServerMessage::LoggedIn { account: &account });
        self.follow_account().await;
    }

    /// Subscribes to the account's orders and fills once the account exists in the
    /// engine (its first deposit); tried again before each request until then.
    async fn follow_account(&mut self) {
        if self.account.is_some() {
            return;
        }
        let Some(session) = &self.session else { return };
        let Ok(Some(id)) = self.state.queries.account_id(session).await else { return };
        self.account = Some(id);
        let (hub, connection) = (&self.state.hub, self.id);
        if !follow_orders_and_fills(hub, connection, id, &self.hub_outbound).await {
            self.kill.kill(ErrorCode::ShuttingDown);
        }
    }

    async fn request(&mut self, message: ClientMessage) {
        self.follow_account().await;
        let Some(session) = self.session.clone() else { return };
        let (request_id, client_order_id) = request_of(&message);
        let (route, request) = match decode(&message) {
            Ok(Some(decoded)) => decoded,
            Ok(None) => {
                let client_order_id = client_order_id.to_string();
                return self.status(&session, request_id, &client_order_id).await;
            }
            Err(error) => {
                let client_order_id = client_order_id.to_string();
                return self.refuse(route_of(&message), request_id, &client_order_id, &error);
            }
        };
        let entry = Arc::clone(&self.state.entry);
        let submitted = self.in_flight.submit(&entry, &session, &request, Detail::Stamp).await;
        drop(request);
        let client_order_id = into_client_order_id(message);
        match submitted {
            Ok(submitted) => {
                let started = Instant::now();
                let waiting = Waiting { request_id, client_order_id, route, started };
                self.in_flight.push(waiting, submitted);
            }
            Err(error) => self.refuse(route, request_id, &client_order_id, &error),
        }
    }

    /// Answers a request refused before the engine, at once (answers go by request id).
    fn refuse(&mut self, route: Route, request_id: u64, client_order_id: &str, error: &ApiError) {
        let code = wire_code(error.code);
        self.observe(route, code, Duration::ZERO);
        self.reject(request_id, code, client_order_id);
    }

    /// Answers the requests whose outcomes `released` carries, in the order they came.
    async fn take_released(&mut self, released: &Arc<bourse_engine::Released>) {
        let entry = Arc::clone(&self.state.entry);
        self.in_flight.take_released(&entry, released).await;
        while let Some((waiting, answer)) = self.in_flight.pop_answered() {
            self.answer(waiting, answer);
        }
    }

    fn answer(&mut self, waiting: Waiting, answer: ApiResult<Answer>) {
        let Waiting { request_id, client_order_id, route, started } = waiting;
        let stamp = match answer {
            Ok(answer) => answer.stamp,
            Err(error) => {
                let code = wire_code(error.code);
                self.observe(route, code, started.elapsed());
                self.reject(request_id, code, &client_order_id);
                if error.code == ErrorCode::Rejected(RejectReason::DuplicateId) {
                    // The retried order: its state, so the client learns its outcome.
                    match error.order.as_deref() {
                        Some(shown) => {
                            self.order_state(request_id, &shown.reference, &shown.record)
                        }
                        None => {
                            let unknown = wire::reject_code(RejectReason::UnknownOrder);
                            self.reject(request_id, unknown, &client_order_id)
                        }
                    }
                }
                return;
            }
        };
        self.observe(route, 0, started.elapsed());
        self.emit(&ServerMessage::Accepted {
            request_id,
            order_id: stamp.order_id.0,
            seq: stamp.seq.0,
            ts_ns: stamp.ts_ns.0,
            client_order_id: &client_order_id,
        });
    }

    /// Counts an answered request in `/metrics`.
    fn observe(&mut self, route: Route, status: u16, took: Duration) {
        let route = ("tcp", route.name());
        self.route_metrics.observe(&self.state.metrics, route, status, took.as_secs_f64());
    }

    /// ORDER_STATUS: the order as it stands now, or why not.
    async fn status(&mut self, session: &Session, request_id: u64, client_order_id: &str) {
        let target = Target::ClientOrderId(Cow::Borrowed(client_order_id));
        let queries = Arc::clone(&self.state.queries);
        match queries.order(session, &target).await {
            Ok(shown) => self.order_state(request_id, &shown.reference, &shown.record),
            Err(error) => self.reject(request_id, wire_code(error.code), client_order_id),
        }
    }

    fn order_state(
        &mut self,
        request_id: u64,
        reference: &crate::reference::Reference,
        record: &OrderRecord,
    ) {
        if let Some(info) = reference.instrument(record.instrument) {
            let order = order_report(info, record);
            self.emit(&ServerMessage::OrderState { request_id, order });
        }
    }

    /// A hub message (the account's order update or fill) as a binary frame, straight
    /// from its typed form.
    fn forward(&mut self, message: &FeedMessage) {
        match &message.body {
            FeedBody::Fill { fill, reference, .. } => {
                if let Some(info) = reference.instrument(fill.instrument) {
                    self.emit(&ServerMessage::Fill(fill_fields(info, fill)));
                }
            }
            FeedBody::Order { record, reference, .. } => {
                if let Some(info) = reference.instrument(record.instrument) {
                    self.emit(&ServerMessage::OrderUpdate(order_report(info, record)));
                }
            }
            FeedBody::Text(_) | FeedBody::Json { .. } => {}
        }
    }
}

/// The binary protocol's code for an error (`docs/protocol-binary.md`, "Codes"): one
/// arm per code, so a new one does not compile until it has its code here. A code that
/// the binary gateway never meets (another protocol's) is `INTERNAL`, said as such.
pub(crate) fn wire_code(code: ErrorCode) -> u16 {
    use wire::code;
    match code {
        ErrorCode::Rejected(reason) => wire::reject_code(reason),
        ErrorCode::InvalidCommand => wire::reject_code(RejectReason::Malformed),
        ErrorCode::MalformedFrame | ErrorCode::ProtocolError => code::MALFORMED_FRAME,
        ErrorCode::Busy => code::BUSY,
        ErrorCode::EngineStopped => code::ENGINE_STOPPED,
        ErrorCode::NotLeader => code::NOT_LEADER,
        ErrorCode::RateLimited => code::RATE_LIMITED,
        ErrorCode::MissingSignature | ErrorCode::LoginRequired | ErrorCode::LoginTimeout => {
            code::LOGIN_REQUIRED
        }
        ErrorCode::InvalidKey => code::INVALID_KEY,
        ErrorCode::InvalidSignature => code::INVALID_SIGNATURE,
        ErrorCode::InvalidTimestamp | ErrorCode::ExpiredTimestamp => code::EXPIRED_TIMESTAMP,
        ErrorCode::ReplayedRequest => code::REPLAYED_REQUEST,
        ErrorCode::TooManyConnections => code::TOO_MANY_CONNECTIONS,
        ErrorCode::IdleTimeout => code::IDLE_TIMEOUT,
        ErrorCode::SlowConsumer => code::SLOW_CONSUMER,
        ErrorCode::ShuttingDown | ErrorCode::Resync | ErrorCode::Closed => code::SHUTTING_DOWN,
        ErrorCode::AlreadyLoggedIn => code::ALREADY_LOGGED_IN,
        ErrorCode::Forbidden => code::FORBIDDEN,
        // Not of this protocol: password logins, HTTP, subscriptions, history, futures
        // administration, FIX's store; and the venue's own failures.
        ErrorCode::NotFound
        | ErrorCode::MethodNotAllowed
        | ErrorCode::BodyTooLarge
        | ErrorCode::Unsupported
        | ErrorCode::UnknownAccount
        | ErrorCode::UnknownKey
        | ErrorCode::UnknownTrade
        | ErrorCode::UnknownChannel
        | ErrorCode::DuplicateAccount
        | ErrorCode::InvalidAccount
        | ErrorCode::InvalidPassword
        | ErrorCode::InvalidSymbol
        | ErrorCode::NoSettlementPrice
        | ErrorCode::TooManySubscriptions
        | ErrorCode::TooManyCharts
        | ErrorCode::TooManySymbols
        | ErrorCode::UnknownAid
        | ErrorCode::InvalidCredentials
        | ErrorCode::LoginLocked
        | ErrorCode::FeedOff
        | ErrorCode::HistoryOff
        | ErrorCode::HistoryUnreadable
        | ErrorCode::SqlUnavailable
        | ErrorCode::SqlError
        | ErrorCode::PlanError
        | ErrorCode::ExecutionError
        | ErrorCode::Io
        | ErrorCode::SqlFailed
        | ErrorCode::SettingsFailed
        | ErrorCode::KeyStoreFailed
        | ErrorCode::StoreFailed
        | ErrorCode::Internal => code::INTERNAL,
    }
}

/// The request a frame asks for, with its route; `None` for ORDER_STATUS (a read).
fn decode(message: &ClientMessage) -> ApiResult<Option<(Route, Request<'_>)>> {
    let malformed = || ApiError::malformed("a decimal beyond 18 places");
    match message {
        ClientMessage::NewOrder(order) => {
            Ok(Some((Route::NewOrder, Request::Place(new_order(order)?))))
        }
        ClientMessage::Cancel { client_order_id, .. } => {
            let target = Target::ClientOrderId(Cow::Borrowed(client_order_id.as_str()));
            Ok(Some((Route::Cancel, Request::Cancel(target))))
        }
        ClientMessage::Amend { price, qty, client_order_id, .. } => {
            let price = price.map(WireDecimal::to_decimal);
            let qty = qty.map(WireDecimal::to_decimal);
            if price.is_some_and(|price| price.is_none()) || qty.is_some_and(|qty| qty.is_none()) {
                return Err(malformed());
            }
            let target = Target::ClientOrderId(Cow::Borrowed(client_order_id.as_str()));
            Ok(Some((Route::Amend, Request::amend(target, price.flatten(), qty.flatten())?)))
        }
        ClientMessage::OrderStatus { .. } => Ok(None),
        ClientMessage::Login { .. } | ClientMessage::Heartbeat => {
            Err(ApiError::malformed("not a request"))
        }
    }
}

/// The route `/metrics` counts a request under.
fn route_of(message: &ClientMessage) -> Route {
    match message {
        ClientMessage::Cancel { .. } => Route::Cancel,
        ClientMessage::Amend { .. } => Route::Amend,
        _ => Route::NewOrder,
    }
}

/// A NEW_ORDER frame's order (`malformed` when a decimal has more than 18 places).
fn new_order(order: &NewOrder) -> ApiResult<request::NewOrder<'_>> {
    let malformed = || ApiError::malformed("a decimal beyond 18 places");
    let order_type = match order.kind {
        1 => OrderType::Limit { price: order.price.to_decimal().ok_or_else(malformed)? },
        _ => OrderType::Market,
    };
    Ok(request::NewOrder {
        client_order_id: Some(CheckedClientOrderId::parse(order.client_order_id.as_str())?),
        symbol: Cow::Borrowed(order.symbol.as_str()),
        side: if order.side == 1 { Side::Buy } else { Side::Sell },
        order_type,
        size: OrderSize::of_qty(order.qty.to_decimal().ok_or_else(malformed)?),
        time_in_force: match order.time_in_force {
            1 => TimeInForce::GoodTillCancel,
            2 => TimeInForce::ImmediateOrCancel,
            3 => TimeInForce::FillOrKill,
            _ => TimeInForce::GoodForDay,
        },
        post_only: order.post_only,
        stp: match order.stp {
            1 => StpMode::CancelTaker,
            2 => StpMode::CancelMaker,
            3 => StpMode::CancelBoth,
            _ => StpMode::None,
        },
        offset: match order.offset {
            0 => Offset::Open,
            1 => Offset::Close,
            _ => Offset::CloseToday,
        },
    })
}

/// The client order id a request carries (moved out of it).
fn into_client_order_id(message: ClientMessage) -> String {
    match message {
        ClientMessage::NewOrder(order) => order.client_order_id,
        ClientMessage::Cancel { client_order_id, .. }
        | ClientMessage::Amend { client_order_id, .. }
        | ClientMessage::OrderStatus { client_order_id, .. } => client_order_id,
        ClientMessage::Login { .. } | ClientMessage::Heartbeat => String::new(),
    }
}

fn request_of(message: &ClientMessage) -> (u64, &str) {
    match message {
        ClientMessage::NewOrder(order) => (order.request_id, &order.client_order_id),
        ClientMessage::Cancel { request_id, client_order_id }
        | ClientMessage::Amend { request_id, client_order_id, .. }
        | ClientMessage::OrderStatus { request_id, client_order_id } => {
            (*request_id, client_order_id)
        }
        ClientMessage::Login { .. } | ClientMessage::Heartbeat => (0, ""),
    }
}

fn status_code(status: &str) -> u8 {
    match status {
        "open" => 1,
        "filled" => 2,
        "canceled" => 3,
        "expired" => 4,
        _ => 5,
    }
}

/// A count of `10^-scale` units as the wire's decimal, in its shortest form.
fn wire_units(units: i64, scale: u32) -> WireDecimal {
    let decimal = bourse_core::Decimal::from_units(i128::from(units), scale);
    WireDecimal {
        mantissa: i64::try_from(decimal.mantissa()).unwrap_or(units),
        scale: u8::try_from(decimal.scale()).unwrap_or(0),
    }
}

/// The fields ORDER_UPDATE and ORDER_STATE share.
fn order_report<'a>(info: &InstrumentInfo, record: &'a OrderRecord) -> OrderReport<&'a str> {
    OrderReport {
        order_id: record.order_id.0,
        client_order_id: record.client_id.as_str(),
        status: status_code(record.status.code()),
        price: record
            .price
            .map_or(WireDecimal::ZERO, |price| wire_units(price.0, info.price_decimals)),
        filled: wire_units(record.filled.0, info.qty_decimals),
        remaining: wire_units(record.remaining.0, info.qty_decimals),
        updated_ns: record.updated_ns.0,
    }
}

/// FILL's fields from a typed fill.
fn fill_fields<'a>(info: &'a InstrumentInfo, fill: &'a FillMessage) -> Fill<&'a str> {
    let (fee_asset, fee_decimals) = info.fee_asset(fill.side);
    Fill {
        client_order_id: fill.client_order_id.as_str(),
        trade_seq: fill.trade_seq.0,
        trade_index: fill.trade_index,
        side: if fill.side == Side::Buy { 1 } else { 2 },
        liquidity: if fill.maker { 1 } else { 2 },
        price: wire_units(fill.price, info.price_decimals),
        qty: wire_units(fill.qty, info.qty_decimals),
        fee: wire_units(fill.fee, fee_decimals),
        fee_asset,
        ts_ns: fill.ts_ns.0,
    }
}
