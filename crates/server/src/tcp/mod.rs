//! The binary TCP order-entry gateway (`docs/protocol-binary.md`): length-framed,
//! little-endian, fixed-layout messages. A client logs in with an API key, then
//! pipelines new orders, cancels, amends and status requests; acknowledgements and
//! rejects come back by request id, fills and order updates as they happen (from the
//! hub's private channels, so a maker hears of its fills too).
//!
//! Each connection is three tasks: a reader that turns bytes into messages (and closes
//! on a bad frame), the connection's own loop, and a writer with a bounded queue. A
//! client that does not read is closed (`slow_consumer`); a client that sends nothing
//! for `[limits] idle_timeout_ms` is closed (`idle_timeout`), one that does not log in
//! within `[auth] login_timeout_ms` too (`login_required`).

pub mod wire;

use std::borrow::Cow;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use bourse_core::command::{AmendCommand, OrderCommand, OrderType};
use bourse_core::ids::AccountId;
use bourse_core::venue::OrderRecord;
use bourse_core::{AccountRef, Command, Event, RejectReason, Side, StpMode, TimeInForce};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{mpsc, watch};

use crate::link::{LinkError, Reply};
use crate::rest::auth::{Caller, Signed};
use crate::rest::Shared;
use crate::ws::hub::{Channel, FeedBody, FeedMessage, FillMessage, HubCommand, Kill, Outbound};
use wire::{code, server, ClientMessage, FrameWriter, NewOrder, WireDecimal};

/// Requests of one connection waiting for the engine, at most; beyond it `busy`.
pub const IN_FLIGHT_PER_CONNECTION_MAX: usize = 4_096;
/// A frame the client does not take within this long closes the connection.
pub const WRITE_TIMEOUT: Duration = Duration::from_secs(5);
/// The path a login signs (method `GET`, empty body), as for WebSocket.
pub const LOGIN_PATH: &str = "/v1/tcp";

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

/// What a finished request answers.
struct Completion {
    request_id: u64,
    client_order_id: String,
    result: Result<Reply, LinkError>,
    /// The request's name and when it arrived (for `/metrics`).
    route: &'static str,
    started: std::time::Instant,
    /// The exchange's id of the order acted on (a new order's is its command's seq).
    order_id: u64,
}

struct Connection {
    state: Shared,
    id: u64,
    frames: mpsc::Sender<Vec<u8>>,
    kill: Arc<Kill>,
    hub_outbound: Outbound,
    caller: Option<Caller>,
    account: Option<AccountId>,
    completions: mpsc::Sender<Completion>,
    in_flight: usize,
}

impl Connection {
    async fn run(
        state: Shared,
        stream: TcpStream,
        _peer: SocketAddr,
        mut stop: watch::Receiver<bool>,
    ) {
        state.metrics.connection_opened("tcp");
        let (read_half, write_half) = stream.into_split();
        let queue = state.limits.tcp_queue_frames.max(1);
        let (frames, frame_receiver) = mpsc::channel(queue);
        let kill = Arc::new(Kill::default());
        let (hub_sender, mut hub_receiver) = mpsc::channel(queue);
        let (messages_sender, mut messages) = mpsc::channel(64);
        let (completions, mut completed) = mpsc::channel(IN_FLIGHT_PER_CONNECTION_MAX);
        let writer = tokio::spawn(write_frames(write_half, frame_receiver, Arc::clone(&kill)));
        let idle_timeout = Duration::from_millis(state.limits.idle_timeout_ms.max(1));
        let reader =
            tokio::spawn(read_frames(read_half, messages_sender, Arc::clone(&kill), idle_timeout));
        let mut connection = Connection {
            hub_outbound: Outbound { sender: hub_sender, kill: Arc::clone(&kill) },
            id: NEXT_CONNECTION.fetch_add(1, Ordering::Relaxed),
            state,
            frames,
            kill: Arc::clone(&kill),
            caller: None,
            account: None,
            completions,
            in_flight: 0,
        };
        let login_deadline = tokio::time::sleep(connection.state.login_timeout);
        tokio::pin!(login_deadline);
        loop {
            tokio::select! {
                message = messages.recv() => match message {
                    Some(message) => connection.handle(message).await,
                    None => break,
                },
                Some(done) = completed.recv() => connection.complete(done).await,
                Some(message) = hub_receiver.recv() => connection.forward(&message),
                _ = &mut login_deadline, if connection.caller.is_none() => {
                    kill.kill("login_timeout");
                }
                _ = kill.notify.notified() => break,
                _ = stop.changed() => kill.kill("shutting_down"),
            }
        }
        let reason = kill.reason().unwrap_or("closed");
        tracing::debug!(connection = connection.id, reason, "tcp connection closed");
        if reason != "closed" {
            connection.goodbye(reason);
        }
        drop(connection.frames);
        let _ = tokio::time::timeout(WRITE_TIMEOUT, writer).await;
        reader.abort();
        let _ =
            connection.state.hub.send(HubCommand::Disconnected { connection: connection.id }).await;
        if let Some(caller) = &connection.caller {
            connection.state.release_connection(&caller.key.id);
        }
        connection.state.metrics.connection_closed("tcp");
    }

    fn send(&self, frame: Vec<u8>) {
        if let Err(mpsc::error::TrySendError::Full(_)) = self.frames.try_send(frame) {
            self.kill.kill("slow_consumer");
        }
    }

    fn goodbye(&self, reason: &str) {
        let frame = FrameWriter::new(server::GOODBYE)
            .u16(wire::server_code(reason))
            .text(reason, wire::TEXT_BYTES)
            .finish();
        let _ = self.frames.try_send(frame);
    }

    fn reject(&self, request_id: u64, code: u16, client_order_id: &str) {
        let frame = FrameWriter::new(server::REJECTED)
            .u64(request_id)
            .u16(code)
            .text(client_order_id, wire::CLIENT_ORDER_ID_BYTES)
            .finish();
        self.send(frame);
    }

    async fn handle(&mut self, message: ClientMessage) {
        match message {
            ClientMessage::Heartbeat => self.send(FrameWriter::new(server::HEARTBEAT).finish()),
            ClientMessage::Login { key, timestamp_ms, signature } => {
                self.login(&key, timestamp_ms, &signature).await
            }
            _ if self.caller.is_none() => self.kill.kill("login_required"),
            other => {
                let Some(caller) = &self.caller else { return };
                if let Err(error) = self.state.auth.take_token(&caller.key) {
                    let (request_id, client_order_id) = request_of(&other);
                    return self.reject(
                        request_id,
                        wire::server_code(error.code),
                        &client_order_id,
                    );
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
        self.send(FrameWriter::new(server::LOGGED_IN).text(&account, wire::TEXT_BYTES).finish());
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
        let Some(account) = self.caller.as_ref().and_then(|caller| caller.key.account.clone())
        else {
            return;
        };
        let (request_id, client_order_id) = request_of(&message);
        if self.in_flight >= IN_FLIGHT_PER_CONNECTION_MAX {
            return self.reject(request_id, code::BUSY, &client_order_id);
        }
        let route = match &message {
            ClientMessage::NewOrder(_) => "new_order",
            ClientMessage::Cancel { .. } => "cancel",
            ClientMessage::Amend { .. } => "amend",
            _ => "other",
        };
        let started = std::time::Instant::now();
        let command = match message {
            ClientMessage::NewOrder(order) => match order_command(&order, &account) {
                Some(command) => command,
                None => {
                    return self.reject(
                        request_id,
                        wire::reject_code(RejectReason::Malformed),
                        &client_order_id,
                    )
                }
            },
            ClientMessage::Cancel { .. } => Command::Cancel {
                account: AccountRef::Name(Cow::Owned(account)),
                id: Cow::Owned(client_order_id.clone()),
            },
            ClientMessage::Amend { price, qty, .. } => {
                let price = price.map(WireDecimal::to_decimal);
                let qty = qty.map(WireDecimal::to_decimal);
                if price.is_some_and(|price| price.is_none())
                    || qty.is_some_and(|qty| qty.is_none())
                {
                    return self.reject(
                        request_id,
                        wire::reject_code(RejectReason::Malformed),
                        &client_order_id,
                    );
                }
                Command::Amend(AmendCommand {
                    account: AccountRef::Name(Cow::Owned(account)),
                    id: Cow::Owned(client_order_id.clone()),
                    price: price.flatten(),
                    qty: qty.flatten(),
                })
            }
            ClientMessage::OrderStatus { .. } => {
                return self.status(request_id, &client_order_id).await
            }
            ClientMessage::Login { .. } | ClientMessage::Heartbeat => return,
        };
        match self.state.link.enqueue(&command) {
            Ok(pending) => {
                self.in_flight += 1;
                let completions = self.completions.clone();
                let (state, account) = (Arc::clone(&self.state), self.account);
                tokio::spawn(async move {
                    let result = pending.wait().await;
                    let seq =
                        result.as_ref().ok().and_then(Reply::result).map_or(0, |result| result.seq);
                    // A cancel or amend names its order by client id: its exchange id is
                    // looked up here, off the connection's loop.
                    let order_id = match (route, account) {
                        ("new_order", _) | (_, None) => seq,
                        (_, Some(account)) => state
                            .link
                            .order_by_client(account, &client_order_id)
                            .await
                            .ok()
                            .flatten()
                            .map_or(seq, |record| record.order_id),
                    };
                    let done = Completion {
                        request_id,
                        client_order_id,
                        result,
                        route,
                        started,
                        order_id,
                    };
                    let _ = completions.send(done).await;
                });
            }
            Err(error) => {
                self.reject(request_id, wire::server_code(error.code()), &client_order_id)
            }
        }
    }

    async fn complete(&mut self, done: Completion) {
        self.in_flight = self.in_flight.saturating_sub(1);
        let Completion { request_id, client_order_id, result, route, started, order_id } = done;
        let status = match &result {
            Ok(reply) => match reply.events().first() {
                Some(Event::Rejected { reason, .. }) => wire::reject_code(*reason),
                _ => 0,
            },
            Err(error) => wire::server_code(error.code()),
        };
        self.state.metrics.request("tcp", route, status, started.elapsed().as_secs_f64());
        let reply = match result {
            Ok(reply) => reply,
            Err(error) => {
                return self.reject(request_id, wire::server_code(error.code()), &client_order_id)
            }
        };
        match reply.events().first() {
            Some(Event::Rejected { reason, .. }) => {
                self.reject(request_id, wire::reject_code(*reason), &client_order_id);
                if *reason == RejectReason::DuplicateId {
                    // The retried order: its state, so the client learns its outcome.
                    self.status(request_id, &client_order_id).await;
                }
            }
            _ => {
                let (seq, ts) = reply.result().map_or((0, 0), |result| (result.seq, result.ts));
                let frame = FrameWriter::new(server::ACCEPTED)
                    .u64(request_id)
                    .u64(order_id)
                    .u64(seq)
                    .u64(ts)
                    .text(&client_order_id, wire::CLIENT_ORDER_ID_BYTES)
                    .finish();
                self.send(frame);
            }
        }
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
                self.send(order_state_frame(request_id, &self.state.reference(), &record))
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
    fn forward(&self, message: &FeedMessage) {
        let frame = match &message.body {
            FeedBody::Fill { fill, reference, .. } => fill_frame(reference, fill),
            FeedBody::Order { record, reference, .. } => {
                order_fields(FrameWriter::new(server::ORDER_UPDATE), reference, record)
                    .map(FrameWriter::finish)
            }
            FeedBody::Text(_) | FeedBody::Json { .. } => None,
        };
        if let Some(frame) = frame {
            self.send(frame);
        }
    }
}

fn request_of(message: &ClientMessage) -> (u64, String) {
    match message {
        ClientMessage::NewOrder(order) => (order.request_id, order.client_order_id.clone()),
        ClientMessage::Cancel { request_id, client_order_id }
        | ClientMessage::Amend { request_id, client_order_id, .. }
        | ClientMessage::OrderStatus { request_id, client_order_id } => {
            (*request_id, client_order_id.clone())
        }
        ClientMessage::Login { .. } | ClientMessage::Heartbeat => (0, String::new()),
    }
}

fn order_command(order: &NewOrder, account: &str) -> Option<Command<'static>> {
    let order_type = match order.kind {
        1 => OrderType::Limit { price: order.price.to_decimal()? },
        _ => OrderType::Market,
    };
    Some(Command::Order(OrderCommand {
        account: AccountRef::Name(Cow::Owned(account.to_string())),
        id: Cow::Owned(order.client_order_id.clone()),
        symbol: Cow::Owned(order.symbol.clone()),
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

/// ORDER_STATE (the answer to ORDER_STATUS, with its request id) from a record.
fn order_state_frame(
    request_id: u64,
    reference: &crate::render::Reference,
    record: &OrderRecord,
) -> Vec<u8> {
    let frame = FrameWriter::new(server::ORDER_STATE).u64(request_id);
    order_fields(frame, reference, record).map_or_else(Vec::new, FrameWriter::finish)
}

/// A count of `10^-scale` units as the wire's decimal, in its shortest form.
fn wire_units(units: i64, scale: u32) -> WireDecimal {
    let decimal = bourse_core::Decimal::from_units(i128::from(units), scale);
    WireDecimal {
        mantissa: i64::try_from(decimal.mantissa()).unwrap_or(units),
        scale: u8::try_from(decimal.scale()).unwrap_or(0),
    }
}

/// The fields ORDER_UPDATE and ORDER_STATE share; `None` for an instrument the
/// reference data does not know.
fn order_fields(
    frame: FrameWriter,
    reference: &crate::render::Reference,
    record: &OrderRecord,
) -> Option<FrameWriter> {
    let info = reference.instrument(record.instrument)?;
    let price = record.price.map_or(WireDecimal { mantissa: 0, scale: 0 }, |price| {
        wire_units(price.0, info.price_decimals)
    });
    let filled = wire_units(record.filled.0, info.qty_decimals);
    let remaining = wire_units(record.remaining.0, info.qty_decimals);
    Some(
        frame
            .u64(record.order_id)
            .text(record.client_id.as_str(), wire::CLIENT_ORDER_ID_BYTES)
            .u8(status_code(record.status.code()))
            .u8(price.scale)
            .u8(filled.scale)
            .u8(remaining.scale)
            .i64(price.mantissa)
            .i64(filled.mantissa)
            .i64(remaining.mantissa)
            .u64(record.updated_ns),
    )
}

/// FILL from a typed fill.
fn fill_frame(reference: &crate::render::Reference, fill: &FillMessage) -> Option<Vec<u8>> {
    let info = reference.instrument(fill.instrument)?;
    let (fee_asset, fee_decimals) = if fill.side == Side::Buy {
        (&info.base, info.base_decimals)
    } else {
        (&info.quote, info.quote_decimals)
    };
    let price = wire_units(fill.price, info.price_decimals);
    let qty = wire_units(fill.qty, info.qty_decimals);
    let fee = wire_units(fill.fee, fee_decimals);
    Some(
        FrameWriter::new(server::FILL)
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
            .finish(),
    )
}

/// Reads frames until the peer closes (then every frame read is still handled: the
/// connection ends when they are), a frame is bad (the connection is closed with
/// `malformed_frame`) or nothing comes for `idle_timeout`.
async fn read_frames(
    mut read_half: OwnedReadHalf,
    messages: mpsc::Sender<ClientMessage>,
    kill: Arc<Kill>,
    idle_timeout: Duration,
) {
    let mut buffer = [0u8; wire::FRAME_BYTES_MAX];
    loop {
        let mut length = [0u8; 2];
        match tokio::time::timeout(idle_timeout, read_half.read_exact(&mut length)).await {
            Err(_) => return kill.kill("idle_timeout"),
            Ok(Err(_)) => return,
            Ok(Ok(_)) => {}
        }
        let length = usize::from(u16::from_le_bytes(length));
        if length == 0 || length > wire::FRAME_BYTES_MAX {
            return kill.kill("malformed_frame");
        }
        match tokio::time::timeout(idle_timeout, read_half.read_exact(&mut buffer[..length])).await
        {
            Err(_) => return kill.kill("idle_timeout"),
            Ok(Err(_)) => return,
            Ok(Ok(_)) => {}
        }
        match wire::decode_client(&buffer[..length]) {
            Ok(message) => {
                if messages.send(message).await.is_err() {
                    return;
                }
            }
            Err(_) => return kill.kill("malformed_frame"),
        }
    }
}

/// Bytes gathered from queued frames into one write, at most.
const WRITE_BATCH_BYTES: usize = 64 * 1024;

/// Writes the queued frames, as many as are waiting (up to `WRITE_BATCH_BYTES`) in one
/// system call: under load a connection's acknowledgements, fills and updates go out
/// together instead of a `send` each.
async fn write_frames(
    mut write_half: OwnedWriteHalf,
    mut frames: mpsc::Receiver<Vec<u8>>,
    kill: Arc<Kill>,
) {
    let mut batch = Vec::with_capacity(WRITE_BATCH_BYTES);
    while let Some(frame) = frames.recv().await {
        batch.clear();
        batch.extend_from_slice(&frame);
        while batch.len() < WRITE_BATCH_BYTES {
            match frames.try_recv() {
                Ok(frame) => batch.extend_from_slice(&frame),
                Err(_) => break,
            }
        }
        match tokio::time::timeout(WRITE_TIMEOUT, write_half.write_all(&batch)).await {
            Ok(Ok(())) => {}
            _ => return kill.kill("slow_consumer"),
        }
    }
    let _ = write_half.shutdown().await;
}
