//! The binary TCP order-entry gateway (`docs/protocol-binary.md`): length-framed,
//! little-endian, fixed-layout messages. A client logs in with an API key, then
//! pipelines new orders, cancels, amends and status requests; acknowledgements and
//! rejects come back by request id, fills and order updates as they happen (from the
//! hub's private channels, so a maker hears of its fills too).
//!
//! Each connection is one task with its own engine lane (`link::Lane`): it reads what
//! the socket has, decodes every whole frame in it and submits the commands; the
//! engine hands the lane's outcomes back in submission order, in releases of many,
//! which the task matches to its waiting requests oldest first. Answers, fills and
//! updates are built into one output buffer and written without waiting: whatever the
//! socket does not take stays queued. No task, channel or allocation per request.
//!
//! A connection with `IN_FLIGHT_PER_CONNECTION_MAX` requests waiting is not read until
//! answers come (TCP flow control holds the client back). A client that does not read
//! is closed (`slow_consumer`: more than `[limits] tcp_queue_frames` frames queued, or
//! nothing taken for `WRITE_TIMEOUT`); one that sends nothing for
//! `[limits] idle_timeout_ms` is closed (`idle_timeout`), one that does not log in
//! within `[auth] login_timeout_ms` too (`login_required`).

pub mod wire;

use std::borrow::Cow;
use std::collections::VecDeque;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bourse_core::command::{AmendCommand, OrderCommand, OrderType};
use bourse_core::ids::AccountId;
use bourse_core::venue::OrderRecord;
use bourse_core::{AccountRef, Command, Event, RejectReason, Side, StpMode, TimeInForce};
use bourse_engine::{Outcome, Released};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::tcp::OwnedWriteHalf;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{mpsc, watch};

use crate::link::Lane;
use crate::render::InstrumentInfo;
use crate::rest::auth::{Caller, Signed};
use crate::rest::Shared;
use crate::ws::hub::{Channel, FeedBody, FeedMessage, FillMessage, HubCommand, Kill, Outbound};
use wire::{server, ClientMessage, FrameWriter, NewOrder, WireDecimal};

/// Requests of one connection waiting for the engine, at most: at this many the
/// connection is not read until answers come.
pub const IN_FLIGHT_PER_CONNECTION_MAX: usize = 4_096;
/// Queued output the client does not take within this long closes the connection.
pub const WRITE_TIMEOUT: Duration = Duration::from_secs(5);
/// The path a login signs (method `GET`, empty body), as for WebSocket.
pub const LOGIN_PATH: &str = "/v1/tcp";
/// Bytes read from the socket at a time, at most.
const READ_BUFFER_BYTES: usize = 64 * 1024;

static NEXT_CONNECTION: AtomicU64 = AtomicU64::new(1_000_000_000);

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

/// A request submitted to the engine, waiting for its outcome.
struct Waiting {
    correlation: bourse_engine::Correlation,
    request_id: u64,
    client_order_id: String,
    route: Route,
    started: Instant,
}

/// The connection's answers, fills and updates not yet taken by the socket.
#[derive(Default)]
struct Output {
    bytes: Vec<u8>,
    /// `bytes[..written]` went out already.
    written: usize,
    /// Frames added since the buffer was last empty.
    frames: usize,
    /// When the socket last took something while bytes were waiting (or they began to).
    waiting_since: Option<Instant>,
}

impl Output {
    fn pending(&self) -> bool {
        self.written < self.bytes.len()
    }

    /// Writes what the socket takes now, without waiting. `false` if the socket failed.
    fn flush(&mut self, socket: &OwnedWriteHalf) -> bool {
        while self.pending() {
            match socket.try_write(&self.bytes[self.written..]) {
                Ok(0) => return false,
                Ok(count) => {
                    self.written += count;
                    self.waiting_since = Some(Instant::now());
                }
                Err(error) if error.kind() == std::io::ErrorKind::WouldBlock => break,
                Err(_) => return false,
            }
        }
        if self.pending() {
            self.waiting_since.get_or_insert_with(Instant::now);
            if self.written >= READ_BUFFER_BYTES {
                self.bytes.drain(..self.written);
                self.written = 0;
            }
        } else {
            self.bytes.clear();
            self.written = 0;
            self.frames = 0;
            self.waiting_since = None;
        }
        true
    }

    /// Writes everything left, waiting up to `WRITE_TIMEOUT` (when the connection ends).
    async fn drain(&mut self, socket: &mut OwnedWriteHalf) {
        let rest = &self.bytes[self.written..];
        let _ = tokio::time::timeout(WRITE_TIMEOUT, socket.write_all(rest)).await;
        let _ = socket.shutdown().await;
    }
}

struct Connection {
    state: Shared,
    id: u64,
    kill: Arc<Kill>,
    hub_outbound: Outbound,
    caller: Option<Caller>,
    account: Option<AccountId>,
    lane: Lane,
    /// Submitted requests in submission order: the order their outcomes come in.
    waiting: VecDeque<Waiting>,
    output: Output,
    /// Frames queued at most before the client counts as not reading.
    output_frames_max: usize,
    /// `/metrics` handles by route and status, looked up once.
    route_metrics: crate::metrics::RouteCache,
}

/// What the connection's loop keeps of the socket's input.
struct Input {
    buffer: Vec<u8>,
    filled: usize,
    /// False once the peer closed its side (or reading failed).
    open: bool,
    last_read: Instant,
}

impl Connection {
    async fn run(
        state: Shared,
        stream: TcpStream,
        _peer: SocketAddr,
        mut stop: watch::Receiver<bool>,
    ) {
        state.metrics.connection_opened("tcp");
        let (mut read_half, mut write_half) = stream.into_split();
        let queue = state.limits.tcp_queue_frames.max(1);
        let kill = Arc::new(Kill::default());
        let (hub_sender, mut hub_receiver) = mpsc::channel(queue);
        let (lane, mut releases) = state.link.open_lane();
        let idle_timeout = Duration::from_millis(state.limits.idle_timeout_ms.max(1));
        let login_timeout = state.login_timeout;
        let mut connection = Connection {
            hub_outbound: Outbound { sender: hub_sender, kill: Arc::clone(&kill) },
            id: NEXT_CONNECTION.fetch_add(1, Ordering::Relaxed),
            state,
            kill: Arc::clone(&kill),
            caller: None,
            account: None,
            lane,
            waiting: VecDeque::new(),
            output: Output::default(),
            output_frames_max: queue,
            route_metrics: crate::metrics::RouteCache::default(),
        };
        let opened = Instant::now();
        let mut input =
            Input { buffer: vec![0; READ_BUFFER_BYTES], filled: 0, open: true, last_read: opened };
        // Checks the deadlines (login, idle, a client not reading) a few times each.
        let tick = (idle_timeout.min(login_timeout).min(WRITE_TIMEOUT) / 4)
            .clamp(Duration::from_millis(5), Duration::from_millis(250));
        let mut watchdog = tokio::time::interval(tick);
        watchdog.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            let readable = input.open && connection.waiting.len() < IN_FLIGHT_PER_CONNECTION_MAX;
            let writing = connection.output.pending();
            tokio::select! {
                biased;
                _ = kill.notify.notified() => break,
                _ = stop.changed() => kill.kill("shutting_down"),
                Some(released) = releases.recv() => connection.take_released(&released).await,
                read = read_half.read(&mut input.buffer[input.filled..]), if readable => {
                    match read {
                        Ok(0) | Err(_) => input.open = false,
                        Ok(count) => {
                            input.filled += count;
                            input.last_read = Instant::now();
                            connection.take_input(&mut input).await;
                        }
                    }
                }
                Some(message) = hub_receiver.recv() => connection.forward(&message),
                written = write_half.writable(), if writing => {
                    if written.is_err() {
                        kill.kill("closed");
                    }
                }
                _ = watchdog.tick() => {
                    let now = Instant::now();
                    if connection.caller.is_none() && now - opened >= login_timeout {
                        kill.kill("login_timeout");
                    } else if input.open && now - input.last_read >= idle_timeout {
                        kill.kill("idle_timeout");
                    } else if connection
                        .output
                        .waiting_since
                        .is_some_and(|since| now - since >= WRITE_TIMEOUT)
                    {
                        kill.kill("slow_consumer");
                    }
                }
            }
            // Whatever else is ready goes out in the same write.
            while let Ok(released) = releases.try_recv() {
                connection.take_released(&released).await;
            }
            while let Ok(message) = hub_receiver.try_recv() {
                connection.forward(&message);
            }
            if !connection.output.flush(&write_half) {
                kill.kill("closed");
            }
            if !input.open && connection.waiting.is_empty() && !connection.output.pending() {
                break;
            }
        }
        let reason = kill.reason().unwrap_or("closed");
        tracing::debug!(connection = connection.id, reason, "tcp connection closed");
        if reason != "closed" {
            connection.goodbye(reason);
        }
        if reason != "slow_consumer" {
            connection.output.drain(&mut write_half).await;
        }
        let _ =
            connection.state.hub.send(HubCommand::Disconnected { connection: connection.id }).await;
        if let Some(caller) = &connection.caller {
            connection.state.release_connection(&caller.key.id);
        }
        connection.state.metrics.connection_closed("tcp");
    }

    /// Handles every whole frame in the input, keeping a partial one for the next read.
    /// A bad frame closes the connection (`malformed_frame`).
    async fn take_input(&mut self, input: &mut Input) {
        let mut at = 0;
        while input.filled - at >= wire::FRAME_HEADER_BYTES {
            let length = usize::from(u16::from_le_bytes([input.buffer[at], input.buffer[at + 1]]));
            if length == 0 || length > wire::FRAME_BYTES_MAX {
                input.open = false;
                return self.kill.kill("malformed_frame");
            }
            let end = at + wire::FRAME_HEADER_BYTES + length;
            if end > input.filled {
                break;
            }
            match wire::decode_client(&input.buffer[at + wire::FRAME_HEADER_BYTES..end]) {
                Ok(message) => self.handle(message).await,
                Err(_) => {
                    input.open = false;
                    return self.kill.kill("malformed_frame");
                }
            }
            at = end;
            if self.kill.reason().is_some() {
                input.open = false;
                return;
            }
        }
        input.buffer.copy_within(at..input.filled, 0);
        input.filled -= at;
    }

    /// Appends one frame to the output; too many queued closes the connection.
    fn emit(&mut self, kind: u8, build: impl FnOnce(FrameWriter) -> FrameWriter) {
        let frame = FrameWriter::after(std::mem::take(&mut self.output.bytes), kind);
        self.output.bytes = build(frame).finish();
        self.output.frames += 1;
        if self.output.frames > self.output_frames_max {
            self.kill.kill("slow_consumer");
        }
    }

    fn goodbye(&mut self, reason: &str) {
        let frame = FrameWriter::after(std::mem::take(&mut self.output.bytes), server::GOODBYE);
        self.output.bytes =
            frame.u16(wire::server_code(reason)).text(reason, wire::TEXT_BYTES).finish();
    }

    fn reject(&mut self, request_id: u64, code: u16, client_order_id: &str) {
        self.emit(server::REJECTED, |frame| {
            frame.u64(request_id).u16(code).text(client_order_id, wire::CLIENT_ORDER_ID_BYTES)
        });
    }

    async fn handle(&mut self, message: ClientMessage) {
        match message {
            ClientMessage::Heartbeat => self.emit(server::HEARTBEAT, |frame| frame),
            ClientMessage::Login { key, timestamp_ms, signature } => {
                self.login(&key, timestamp_ms, &signature).await
            }
            _ if self.caller.is_none() => self.kill.kill("login_required"),
            other => {
                let Some(caller) = &self.caller else { return };
                if let Err(error) = self.state.auth.take_token(&caller.key) {
                    let (request_id, client_order_id) = request_of(&other);
                    return self.reject(request_id, wire::server_code(error.code), client_order_id);
                }
                self.request(other).await;
            }
        }
    }

    async fn login(&mut self, key: &str, timestamp_ms: u64, signature: &[u8; 32]) {
        if self.caller.is_some() {
            return self.kill.kill("already_logged_in");
        }
        let timestamp = timestamp_ms.to_string();
        let signature_hex = hex::encode(signature);
        let signed = Signed {
            key_id: key,
            timestamp: &timestamp,
            signature_hex: &signature_hex,
            method: "GET",
            path_and_query: LOGIN_PATH,
            body: b"",
        };
        let caller = match self.state.auth.check(&self.state.keys, &signed, crate::now_ms()) {
            Ok(caller) => caller,
            Err(error) => return self.kill.kill(error.code),
        };
        let Ok(account) = caller.account().map(str::to_string) else {
            return self.kill.kill("forbidden");
        };
        if let Err((code, _)) = self.state.claim_connection(&caller.key.id) {
            return self.kill.kill(code);
        }
        tracing::info!(connection = self.id, key = %caller.key.id, "tcp login");
        self.caller = Some(caller);
        self.emit(server::LOGGED_IN, |frame| frame.text(&account, wire::TEXT_BYTES));
        self.follow_account().await;
    }

    /// Subscribes to the account's orders and fills once the account exists in the
    /// engine (its first deposit); tried again before each request until then.
    async fn follow_account(&mut self) {
        if self.account.is_some() {
            return;
        }
        let Some(account) = self.caller.as_ref().and_then(|caller| caller.key.account.clone())
        else {
            return;
        };
        let Ok(Some(id)) = self.state.account_id(&account).await else { return };
        self.account = Some(id);
        for channel in [Channel::Orders(id), Channel::Fills(id)] {
            let command = HubCommand::Subscribe {
                connection: self.id,
                channel,
                outbound: self.hub_outbound.clone(),
                acknowledgement: None,
            };
            if self.state.hub.send(command).await.is_err() {
                return self.kill.kill("shutting_down");
            }
        }
        // Requests go to the engine only once the subscriptions are in place, so that no
        // fill or update they cause can pass the hub before it knows this connection.
        let (reply, in_place) = tokio::sync::oneshot::channel();
        if self.state.hub.send(HubCommand::Barrier(reply)).await.is_err() || in_place.await.is_err()
        {
            self.kill.kill("shutting_down");
        }
    }

    async fn request(&mut self, message: ClientMessage) {
        self.follow_account().await;
        let Some(account_name) = self.caller.as_ref().and_then(|caller| caller.key.account.clone())
        else {
            return;
        };
        // Once the account is known the command names it by id (no lookup by name).
        let account = match self.account {
            Some(id) => AccountRef::Id(id),
            None => AccountRef::Name(Cow::Borrowed(account_name.as_str())),
        };
        let (request_id, client_order_id) = request_of(&message);
        let (route, command) = match &message {
            ClientMessage::NewOrder(order) => match order_command(order, account) {
                Some(command) => (Route::NewOrder, command),
                None => return self.reject_malformed(request_id, client_order_id),
            },
            ClientMessage::Cancel { client_order_id, .. } => (
                Route::Cancel,
                Command::Cancel { account, id: Cow::Borrowed(client_order_id.as_str()) },
            ),
            ClientMessage::Amend { price, qty, client_order_id, .. } => {
                let price = price.map(WireDecimal::to_decimal);
                let qty = qty.map(WireDecimal::to_decimal);
                if price.is_some_and(|price| price.is_none())
                    || qty.is_some_and(|qty| qty.is_none())
                {
                    return self.reject_malformed(request_id, &client_order_id.clone());
                }
                let amend = AmendCommand {
                    account,
                    id: Cow::Borrowed(client_order_id.as_str()),
                    price: price.flatten(),
                    qty: qty.flatten(),
                };
                (Route::Amend, Command::Amend(amend))
            }
            ClientMessage::OrderStatus { client_order_id, .. } => {
                let client_order_id = client_order_id.clone();
                return self.status(request_id, &client_order_id).await;
            }
            ClientMessage::Login { .. } | ClientMessage::Heartbeat => return,
        };
        let submitted = self.lane.submit(&command);
        drop(command);
        let client_order_id = into_client_order_id(message);
        match submitted {
            Ok(correlation) => self.waiting.push_back(Waiting {
                correlation,
                request_id,
                client_order_id,
                route,
                started: Instant::now(),
            }),
            Err(error) => {
                self.observe(route, wire::server_code(error.code()), Duration::ZERO);
                self.reject(request_id, wire::server_code(error.code()), &client_order_id)
            }
        }
    }

    fn reject_malformed(&mut self, request_id: u64, client_order_id: &str) {
        self.reject(request_id, wire::reject_code(RejectReason::Malformed), client_order_id)
    }

    /// Answers the waiting requests whose outcomes `released` carries (the oldest
    /// waiting ones: a lane's outcomes come in submission order).
    async fn take_released(&mut self, released: &Released) {
        let mut taken = 0;
        for outcome in &released.outcomes {
            let Some(position) = self.position_of(outcome.correlation()) else { continue };
            let Some(request) = self.waiting.remove(position) else { continue };
            taken += 1;
            self.answer(request, outcome, released).await;
        }
        self.lane.taken(taken);
    }

    fn position_of(&self, correlation: bourse_engine::Correlation) -> Option<usize> {
        match self.waiting.front() {
            Some(front) if front.correlation == correlation => Some(0),
            _ => self.waiting.iter().position(|request| request.correlation == correlation),
        }
    }

    async fn answer(&mut self, request: Waiting, outcome: &Outcome, released: &Released) {
        let Waiting { request_id, client_order_id, route, started, .. } = request;
        let result = match outcome {
            Outcome::Applied(result) => result,
            Outcome::Failed { .. } => {
                let code = wire::server_code("engine_stopped");
                self.observe(route, code, started.elapsed());
                return self.reject(request_id, code, &client_order_id);
            }
        };
        match released.events_of(result).first() {
            Some(Event::Rejected { reason, .. }) => {
                self.observe(route, wire::reject_code(*reason), started.elapsed());
                self.reject(request_id, wire::reject_code(*reason), &client_order_id);
                if *reason == RejectReason::DuplicateId {
                    // The retried order: its state, so the client learns its outcome.
                    self.status(request_id, &client_order_id).await;
                }
            }
            _ => {
                self.observe(route, 0, started.elapsed());
                let order_id = result.order_id.map_or(result.seq.0, |order_id| order_id.0);
                self.emit(server::ACCEPTED, |frame| {
                    frame
                        .u64(request_id)
                        .u64(order_id)
                        .u64(result.seq.0)
                        .u64(result.ts.0)
                        .text(&client_order_id, wire::CLIENT_ORDER_ID_BYTES)
                });
            }
        }
    }

    /// Counts an answered request in `/metrics`.
    fn observe(&mut self, route: Route, status: u16, took: Duration) {
        let route = ("tcp", route.name());
        self.route_metrics.observe(&self.state.metrics, route, status, took.as_secs_f64());
    }

    async fn status(&mut self, request_id: u64, client_order_id: &str) {
        self.follow_account().await;
        let Some(account) = self.account else {
            return self.reject(
                request_id,
                wire::reject_code(RejectReason::UnknownOrder),
                client_order_id,
            );
        };
        match self.state.link.order_by_client(account, client_order_id).await {
            Ok(Some(record)) => {
                let reference = self.state.reference();
                if let Some(info) = reference.instrument(record.instrument) {
                    self.emit(server::ORDER_STATE, |frame| {
                        order_fields(frame.u64(request_id), info, &record)
                    });
                }
            }
            Ok(None) => self.reject(
                request_id,
                wire::reject_code(RejectReason::UnknownOrder),
                client_order_id,
            ),
            Err(error) => self.reject(request_id, wire::server_code(error.code()), client_order_id),
        }
    }

    /// A hub message (the account's order update or fill) as a binary frame, straight
    /// from its typed form.
    fn forward(&mut self, message: &FeedMessage) {
        match &message.body {
            FeedBody::Fill { fill, reference, .. } => {
                if let Some(info) = reference.instrument(fill.instrument) {
                    self.emit(server::FILL, |frame| fill_fields(frame, info, fill));
                }
            }
            FeedBody::Order { record, reference, .. } => {
                if let Some(info) = reference.instrument(record.instrument) {
                    self.emit(server::ORDER_UPDATE, |frame| order_fields(frame, info, record));
                }
            }
            FeedBody::Text(_) | FeedBody::Json { .. } => {}
        }
    }
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

fn order_command<'a>(order: &'a NewOrder, account: AccountRef<'a>) -> Option<Command<'a>> {
    let order_type = match order.kind {
        1 => OrderType::Limit { price: order.price.to_decimal()? },
        _ => OrderType::Market,
    };
    Some(Command::Order(OrderCommand {
        account,
        id: Cow::Borrowed(order.client_order_id.as_str()),
        symbol: Cow::Borrowed(order.symbol.as_str()),
        side: if order.side == 1 { Side::Buy } else { Side::Sell },
        order_type,
        qty: order.qty.to_decimal()?,
        time_in_force: match order.time_in_force {
            1 => TimeInForce::GoodTillCancel,
            2 => TimeInForce::ImmediateOrCancel,
            _ => TimeInForce::FillOrKill,
        },
        post_only: order.post_only,
        stp: match order.stp {
            1 => StpMode::CancelTaker,
            2 => StpMode::CancelMaker,
            3 => StpMode::CancelBoth,
            _ => StpMode::None,
        },
    }))
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
fn order_fields(frame: FrameWriter, info: &InstrumentInfo, record: &OrderRecord) -> FrameWriter {
    let price = record.price.map_or(WireDecimal { mantissa: 0, scale: 0 }, |price| {
        wire_units(price.0, info.price_decimals)
    });
    let filled = wire_units(record.filled.0, info.qty_decimals);
    let remaining = wire_units(record.remaining.0, info.qty_decimals);
    frame
        .u64(record.order_id.0)
        .text(record.client_id.as_str(), wire::CLIENT_ORDER_ID_BYTES)
        .u8(status_code(record.status.code()))
        .u8(price.scale)
        .u8(filled.scale)
        .u8(remaining.scale)
        .i64(price.mantissa)
        .i64(filled.mantissa)
        .i64(remaining.mantissa)
        .u64(record.updated_ns.0)
}

/// FILL's fields from a typed fill.
fn fill_fields(frame: FrameWriter, info: &InstrumentInfo, fill: &FillMessage) -> FrameWriter {
    let (fee_asset, fee_decimals) = if fill.side == Side::Buy {
        (&info.base, info.base_decimals)
    } else {
        (&info.quote, info.quote_decimals)
    };
    let price = wire_units(fill.price, info.price_decimals);
    let qty = wire_units(fill.qty, info.qty_decimals);
    let fee = wire_units(fill.fee, fee_decimals);
    frame
        .text(fill.client_order_id.as_str(), wire::CLIENT_ORDER_ID_BYTES)
        .u64(fill.trade_seq)
        .u32(fill.trade_index)
        .u8(if fill.side == Side::Buy { 1 } else { 2 })
        .u8(if fill.maker { 1 } else { 2 })
        .u8(price.scale)
        .u8(qty.scale)
        .u8(fee.scale)
        .bytes(&[0, 0, 0])
        .i64(price.mantissa)
        .i64(qty.mantissa)
        .i64(fee.mantissa)
        .text(fee_asset, wire::ASSET_BYTES)
        .u64(fill.ts_ns)
}
