//! The FIX 4.4 order-entry gateway (`docs/fix.md`; the codec is
//! `bourse_protocol::fix`): an acceptor on its own port. A client logs on with a Bourse
//! API key (Username = the key id, RawData = the key's signature over the Logon's
//! SendingTime), then sends NewOrderSingle, OrderCancelRequest and
//! OrderCancelReplaceRequest; ExecutionReports and OrderCancelRejects come back, for
//! its own orders and for every order of its account (from the hub, so orders entered
//! over REST or the binary protocol are reported too).
//!
//! A session (one per API key at a time) outlives its connections: its sequence
//! numbers and the application messages it sent are kept on disk (`store`), and while
//! no connection holds it, a task keeps following the account and stores the reports
//! it would have sent, so that the next Logon's ResendRequest gets them. Each
//! connection is one task, as in the binary gateway (`tcp`): it reads what the socket
//! has, handles every whole message (`session` writes the session's messages,
//! `orders` the application's), submits requests on its own lane
//! (`order_entry::in_flight`) and writes its output without waiting.
//!
//! Bad input never panics and is always answered: a wrong checksum with a Reject
//! (the message is not counted, so the client's next message shows the gap and it
//! resends), a wrong field with a Reject naming the tag, a frame that cannot be
//! followed (BeginString, BodyLength) or a MsgSeqNum too low with a Logout saying why,
//! then the connection is closed.

pub mod orders;
pub mod session;
pub mod store;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bourse_core::ids::AccountId;
use bourse_protocol::fix::{self, tag, FieldError, FrameError, Message, Writer};
use bourse_protocol::signing::{now_ms, FIX_LOGIN_PATH, LOGIN_METHOD};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{mpsc, oneshot, watch};

use crate::config::FixConfig;
use crate::gateways::shared::connection::{self, Output};
use crate::gateways::shared::http_error;
use crate::gateways::shared::socket_loop::{self, Input, SocketLoop, Wake};
use crate::port::auth::Signed;
use crate::port::error::{ApiError, ApiResult, ErrorCode};
use crate::port::orders::answer::{Answer, Detail, View};
use crate::port::orders::in_flight::InFlight;
use crate::port::orders::request::Request;
use crate::port::session::Session as Login;
use crate::port::state::Shared;
use crate::services::feed::channel::{
    follow_orders_and_fills, FeedBody, FeedMessage, HubCommand, Kill, Outbound,
};
use orders::{Application, Orders, Pending, Sink};
use session::{reject_reason, Kind, Outgoing, Refused};
use store::{SeqNum, Store};

/// Bytes read from the socket at a time, at most.
const READ_BUFFER_BYTES: usize = 64 * 1024;
const _: () = assert!(READ_BUFFER_BYTES >= fix::MESSAGE_BYTES_MAX);
/// How long a closing connection waits for the answers of its requests in flight
/// (which then go to the store, for the next connection's ResendRequest).
const DRAIN_TIMEOUT: Duration = Duration::from_secs(10);

/// The FIX gateway's own state: its settings and the sessions.
pub struct Gateway {
    comp_id: Arc<str>,
    store_root: PathBuf,
    store_messages: usize,
    heartbeat_max_s: u64,
    sessions: Mutex<HashMap<String, Slot>>,
}

/// Where a key's session is.
enum Slot {
    /// A connection holds it.
    Online,
    /// Its offline task holds it, and hands it over when asked.
    Offline(mpsc::Sender<oneshot::Sender<Session>>),
}

impl Gateway {
    pub fn new(config: &FixConfig, data_dir: &Path) -> Arc<Gateway> {
        Arc::new(Gateway {
            comp_id: Arc::from(config.comp_id.as_str()),
            store_root: data_dir.join("fix"),
            store_messages: config.store_messages,
            heartbeat_max_s: config.heartbeat_max_s.max(1),
            sessions: Mutex::new(HashMap::new()),
        })
    }

    fn sessions(&self) -> std::sync::MutexGuard<'_, HashMap<String, Slot>> {
        self.sessions.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Takes `key_id`'s session for a connection: the one kept offline (`Some`), or
    /// none yet (`None`: the caller opens it). `Err` while another connection holds it.
    async fn take_session(&self, key_id: &str) -> Result<Option<Session>, ()> {
        let takeover = {
            let mut sessions = self.sessions();
            let takeover = match sessions.get(key_id) {
                Some(Slot::Online) => return Err(()),
                Some(Slot::Offline(takeover)) => Some(takeover.clone()),
                None => None,
            };
            sessions.insert(key_id.to_string(), Slot::Online);
            takeover
        };
        let Some(takeover) = takeover else { return Ok(None) };
        let (reply, session) = oneshot::channel();
        if takeover.send(reply).await.is_err() {
            return Ok(None);
        }
        Ok(session.await.ok())
    }

    /// Opens `key_id`'s session from its store (made when new).
    async fn open_session(
        &self,
        state: &Shared,
        key_id: &str,
        account_name: String,
        their_comp_id: String,
    ) -> std::io::Result<Session> {
        let directory = store::session_directory(&self.store_root, key_id);
        let kept = self.store_messages;
        let store = tokio::task::spawn_blocking(move || Store::open(&directory, kept))
            .await
            .map_err(std::io::Error::other)??;
        let (sender, receiver) = mpsc::channel(state.limits.tcp_queue_frames.max(1));
        let out = Outgoing::new(store, Arc::clone(&self.comp_id), their_comp_id);
        Ok(Session {
            key_id: key_id.to_string(),
            account_name,
            account: None,
            hub_id: connection::next_connection_id(),
            hub: Some(receiver),
            hub_outbound: Outbound { sender, kill: Arc::new(Kill::default()) },
            out,
            orders: Orders::default(),
        })
    }

    fn set(&self, key_id: &str, slot: Option<Slot>) {
        let mut sessions = self.sessions();
        match slot {
            Some(slot) => sessions.insert(key_id.to_string(), slot),
            None => sessions.remove(key_id),
        };
    }
}

/// At start: every session the store knows whose key is still active follows its
/// account at once, offline, so that fills and order changes after a restart are
/// stored for its next Logon's ResendRequest as they would have been before.
pub async fn resume_sessions(gateway: Arc<Gateway>, state: Shared, stop: watch::Receiver<bool>) {
    let Ok(entries) = std::fs::read_dir(&gateway.store_root) else { return };
    for entry in entries.flatten() {
        let Some((key_id, their_comp_id)) = Store::identity(&entry.path()) else { continue };
        let Some(account_name) = state.keys.active_key(&key_id).and_then(|key| key.account) else {
            continue;
        };
        if gateway.sessions().contains_key(&key_id) {
            continue;
        }
        gateway.set(&key_id, Some(Slot::Online));
        let mut session = match gateway
            .open_session(&state, &key_id, account_name, their_comp_id)
            .await
        {
            Ok(session) => session,
            Err(error) => {
                tracing::error!(%error, key = %key_id, "a FIX session's store cannot be opened");
                gateway.set(&key_id, None);
                continue;
            }
        };
        if !session.follow(&state).await {
            return;
        }
        tracing::info!(key = %key_id, "fix session followed offline since the start");
        let takeover = offer(&gateway, &key_id);
        let (gateway, state) = (Arc::clone(&gateway), Arc::clone(&state));
        tokio::spawn(offline(session, takeover, gateway, state, stop.clone()));
    }
}

/// Accepts connections until `stop` turns true.
pub async fn serve(
    listener: TcpListener,
    gateway: Arc<Gateway>,
    state: Shared,
    mut stop: watch::Receiver<bool>,
) {
    loop {
        tokio::select! {
            accepted = listener.accept() => {
                if let Ok((stream, _)) = accepted {
                    let _ = stream.set_nodelay(true);
                    let connection = run(Arc::clone(&gateway), Arc::clone(&state), stream, stop.clone());
                    tokio::spawn(connection);
                }
            }
            _ = stop.changed() => return,
        }
    }
}

/// A session: what outlives its connections.
pub struct Session {
    key_id: String,
    account_name: String,
    account: Option<AccountId>,
    /// Its number at the hub, whose subscriptions follow the session, not a connection.
    hub_id: u64,
    hub: Option<mpsc::Receiver<Arc<FeedMessage>>>,
    hub_outbound: Outbound,
    out: Outgoing,
    orders: Orders,
}

impl Session {
    /// Subscribes the session to the account's orders and fills once the account
    /// exists in the engine (nothing to follow before); `false` when the hub has
    /// stopped.
    async fn follow(&mut self, state: &Shared) -> bool {
        if self.account.is_some() {
            return true;
        }
        let Ok(Some(id)) = state.directory.account_id(&self.account_name).await else {
            return true;
        };
        self.account = Some(id);
        if !follow_orders_and_fills(&state.hub, self.hub_id, id, &self.hub_outbound).await {
            return false;
        }
        // Where the hub's messages to the session start: orders made after this are
        // seen from their start (`Orders::on_record`).
        if let Ok(seq) = state.queries.applied_seq().await {
            self.orders.follow_from(seq);
        }
        true
    }

    /// A hub message (the account's order record or fill) as its reports.
    fn forward(&mut self, message: &FeedMessage, output: Option<&mut Output>) {
        let mut sink = Sink { out: &mut self.out, output };
        match &message.body {
            FeedBody::Fill { fill, reference, .. } => {
                self.orders.on_fill(fill, reference, &mut sink)
            }
            FeedBody::Order { record, reference, .. } => {
                self.orders.on_record(record, reference, &mut sink)
            }
            FeedBody::Text(_) | FeedBody::Json { .. } => {}
        }
    }

    /// Ends the session: the hub forgets it, the gateway too.
    async fn end(mut self, state: &Shared, gateway: &Gateway) {
        if let Err(error) = self.out.flush() {
            tracing::error!(key = %self.key_id, %error, "the FIX session's store cannot be written");
        }
        let _ = state.hub.send(HubCommand::Disconnected { connection: self.hub_id }).await;
        gateway.set(&self.key_id, None);
    }
}

/// Marks `key_id`'s session as kept offline: a Logon asks for it on the channel
/// returned.
fn offer(gateway: &Gateway, key_id: &str) -> mpsc::Receiver<oneshot::Sender<Session>> {
    let (takeover_sender, takeover) = mpsc::channel(1);
    gateway.set(key_id, Some(Slot::Offline(takeover_sender)));
    takeover
}

/// While no connection holds the session: follows the account, storing the reports,
/// until a Logon takes it over (on `takeover`, which `offer` made) or the server stops.
async fn offline(
    mut session: Session,
    takeover: mpsc::Receiver<oneshot::Sender<Session>>,
    gateway: Arc<Gateway>,
    state: Shared,
    stop: watch::Receiver<bool>,
) {
    let mut hub = session.hub.take();
    let mut first = Some(takeover);
    loop {
        let mut takeover = match first.take() {
            Some(takeover) => takeover,
            None => offer(&gateway, &session.key_id),
        };
        loop {
            if *stop.borrow() || session.hub_outbound.kill.reason().is_some() {
                session.hub = hub;
                return session.end(&state, &gateway).await;
            }
            tokio::select! {
                Some(reply) = takeover.recv() => {
                    if let Err(error) = session.out.flush() {
                        tracing::error!(%error, "the FIX session's store cannot be written");
                    }
                    session.hub = hub;
                    match reply.send(session) {
                        Ok(()) => return,
                        // The new connection went away before taking it: stay offline.
                        Err(back) => {
                            session = back;
                            hub = session.hub.take();
                            break;
                        }
                    }
                }
                message = socket_loop::receive(&mut hub) => match message {
                    Some(message) => session.forward(&message, None),
                    None => hub = None,
                },
                _ = tokio::time::sleep(Duration::from_millis(250)) => {}
            }
            if let Err(error) = session.out.flush() {
                tracing::error!(%error, "the FIX session's store cannot be written");
            }
        }
    }
}

/// The requests that go to the engine, for `/metrics`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Route {
    NewOrder,
    Cancel,
    Replace,
}

impl Route {
    fn name(self) -> &'static str {
        match self {
            Route::NewOrder => "new_order",
            Route::Cancel => "cancel",
            Route::Replace => "replace",
        }
    }
}

/// What the connection keeps of a request in flight.
struct Waiting {
    pending: Pending,
    route: Route,
    started: Instant,
}

struct Connection {
    state: Shared,
    gateway: Arc<Gateway>,
    id: u64,
    kill: Arc<Kill>,
    /// Once logged on: who, holding its place among its key's connections.
    login: Option<Login>,
    session: Option<Session>,
    /// The session's hub messages, once logged on (the loop takes the receiver).
    hub_taken: Option<mpsc::Receiver<Arc<FeedMessage>>>,
    in_flight: InFlight<Waiting>,
    output: Output,
    /// False once the socket is gone: reports then go to the store only.
    online: bool,
    fields: Vec<fix::Field>,
    heartbeat_ms: u64,
    opened: Instant,
    last_received_ms: u64,
    test_request_sent_ms: Option<u64>,
    resend_requested: bool,
    logout_sent: bool,
    output_frames_max: usize,
    route_metrics: crate::metrics::RouteCache,
}

async fn run(gateway: Arc<Gateway>, state: Shared, stream: TcpStream, stop: watch::Receiver<bool>) {
    state.metrics.connection_opened("fix");
    let kill = Arc::new(Kill::default());
    let (in_flight, releases) = InFlight::open(&state.entry);
    let deadlines = [state.login_timeout, Duration::from_secs(1)];
    let mut socket = SocketLoop::new(
        stream,
        READ_BUFFER_BYTES,
        releases,
        Some(Arc::clone(&kill)),
        stop.clone(),
        &deadlines,
    );
    let mut connection = Connection {
        id: connection::next_connection_id(),
        output_frames_max: state.limits.tcp_queue_frames.max(1),
        state,
        gateway,
        kill: Arc::clone(&kill),
        login: None,
        session: None,
        hub_taken: None,
        in_flight,
        output: Output::default(),
        online: true,
        fields: Vec::new(),
        heartbeat_ms: 30_000,
        opened: Instant::now(),
        last_received_ms: now_ms(),
        test_request_sent_ms: None,
        resend_requested: false,
        logout_sent: false,
        route_metrics: crate::metrics::RouteCache::default(),
    };
    loop {
        let accepting = !connection.in_flight.is_full();
        match socket.wake(accepting, &connection.output).await {
            Wake::Killed => break,
            Wake::Stopping => {
                connection.close_with("the venue is shutting down", ErrorCode::ShuttingDown)
            }
            Wake::Released(released) => connection.take_released(&released).await,
            Wake::Read => connection.take_input(&mut socket.input).await,
            Wake::Hub(message) => connection.forward(&message),
            Wake::ReadClosed | Wake::Writable => {}
            Wake::Tick => connection.tick(),
        }
        while let Some(released) = socket.ready_released() {
            connection.take_released(&released).await;
        }
        // A Logon gives the session's hub messages to the loop.
        if let Some(hub) = connection.hub_taken.take() {
            socket.follow_hub(hub);
        }
        while let Some(message) = socket.ready_hub() {
            connection.forward(&message);
        }
        connection.flush_store();
        if !socket.flush(&mut connection.output) {
            kill.kill(ErrorCode::Closed);
        }
        let settled = connection.in_flight.is_empty() && !connection.output.pending();
        if !socket.input.open && settled {
            break;
        }
    }
    if let Some(session) = connection.session.as_mut() {
        session.hub = socket.take_hub().or_else(|| connection.hub_taken.take());
    }
    let session = connection.close(&mut socket).await;
    if let Some(session) = session {
        let gateway = Arc::clone(&connection.gateway);
        let takeover = offer(&gateway, &session.key_id);
        offline(session, takeover, gateway, Arc::clone(&connection.state), stop).await;
    }
}

impl Connection {
    /// Says goodbye when it has not, writes what is left, answers what is in flight
    /// into the store, and hands the session back (to go offline) unless it must end.
    async fn close(&mut self, socket: &mut SocketLoop) -> Option<Session> {
        let reason = self.kill.reason().unwrap_or(ErrorCode::Closed);
        tracing::debug!(connection = self.id, reason = reason.as_str(), "fix connection closed");
        if reason != ErrorCode::Closed && !self.logout_sent {
            self.logout(reason.as_str());
        }
        self.flush_store();
        if reason != ErrorCode::SlowConsumer {
            socket.drain(&mut self.output).await;
        }
        self.online = false;
        let deadline = tokio::time::Instant::now() + DRAIN_TIMEOUT;
        while !self.in_flight.is_empty() {
            match socket.released_within(deadline).await {
                Some(released) => self.take_released(&released).await,
                None => break,
            }
        }
        self.flush_store();
        self.state.metrics.connection_closed("fix");
        let session = self.session.take()?;
        if session.hub_outbound.kill.reason().is_some() {
            // Its queue overflowed: reports were lost, so it starts again from its store.
            session.end(&self.state, &self.gateway).await;
            return None;
        }
        Some(session)
    }

    fn flush_store(&mut self) {
        let Some(session) = self.session.as_mut() else { return };
        if let Err(error) = session.out.flush() {
            tracing::error!(%error, "the FIX session's store cannot be written");
            self.kill.kill(ErrorCode::StoreFailed);
        }
    }

    /// Sends a Logout saying `text` (before the Logon, numbered 1 and not kept).
    fn logout(&mut self, text: &str) {
        self.logout_sent = true;
        match self.session.as_mut() {
            Some(session) => session.out.logout(text, &mut self.output),
            None => {
                let mut writer = Writer::default();
                writer
                    .start("5")
                    .str(tag::SENDER_COMP_ID, &self.gateway.comp_id)
                    .str(tag::TARGET_COMP_ID, "UNKNOWN")
                    .number(tag::MSG_SEQ_NUM, 1)
                    .timestamp(tag::SENDING_TIME, now_ms())
                    .str(tag::TEXT, text);
                self.output.push(|bytes| {
                    writer.finish(bytes);
                });
            }
        }
    }

    /// A Logout saying `text`, then the connection closes (`reason`).
    fn close_with(&mut self, text: &str, reason: ErrorCode) {
        if !self.logout_sent {
            self.logout(text);
        }
        self.kill.kill(reason);
    }

    fn tick(&mut self) {
        let now = now_ms();
        let Some(session) = self.session.as_mut() else {
            if self.opened.elapsed() >= self.state.login_timeout {
                self.close_with("no Logon in time", ErrorCode::LoginTimeout);
            }
            return;
        };
        if session.hub_outbound.kill.reason().is_some() || self.output.stalled(Instant::now()) {
            return self.kill.kill(ErrorCode::SlowConsumer);
        }
        if now.saturating_sub(session.out.last_sent_ms) >= self.heartbeat_ms {
            session.out.heartbeat(None, &mut self.output);
        }
        let silent = now.saturating_sub(self.last_received_ms);
        match self.test_request_sent_ms {
            None if silent >= self.heartbeat_ms + self.heartbeat_ms / 5 => {
                session.out.test_request(&mut self.output);
                self.test_request_sent_ms = Some(now);
            }
            Some(sent) if now.saturating_sub(sent) >= self.heartbeat_ms => {
                self.close_with("no answer to a TestRequest", ErrorCode::IdleTimeout);
            }
            _ => {}
        }
    }

    /// Handles every whole message in the input, keeping a partial one for the next
    /// read.
    async fn take_input(&mut self, input: &mut Input) {
        let mut at = 0;
        while at < input.filled {
            match fix::frame(&input.buffer[at..input.filled]) {
                Ok(None) => break,
                Ok(Some(length)) => {
                    self.take_message(&input.buffer[at..at + length]).await;
                    at += length;
                }
                Err(error @ FrameError::CheckSum { skip, .. }) => {
                    self.garbled(&input.buffer[at..at + skip], error);
                    at += skip;
                }
                Err(error) => {
                    input.open = false;
                    return self.close_with(error.text(), ErrorCode::ProtocolError);
                }
            }
            if self.kill.reason().is_some() {
                input.open = false;
                return;
            }
        }
        input.take(at);
    }

    /// A message whose checksum is wrong: a Reject, and it is not counted (the
    /// client's next message shows the gap, and it sends it again).
    fn garbled(&mut self, bytes: &[u8], error: FrameError) {
        let Some(session) = self.session.as_mut() else {
            return self.close_with(error.text(), ErrorCode::ProtocolError);
        };
        let refused = Refused {
            ref_seq: seq_of(bytes).unwrap_or(0),
            tag: Some(tag::CHECK_SUM),
            msg_type: None,
            reason: reject_reason::OTHER,
            text: error.text().to_string(),
        };
        session.out.reject(&refused, &mut self.output);
    }

    async fn take_message(&mut self, bytes: &[u8]) {
        self.last_received_ms = now_ms();
        self.test_request_sent_ms = None;
        let mut fields = std::mem::take(&mut self.fields);
        match Message::parse(bytes, &mut fields) {
            Ok(message) => self.take_parsed(&message).await,
            Err(error) => self.field_error(bytes, error),
        }
        self.fields = fields;
    }

    /// A message whose fields cannot be read: a Reject naming what is wrong (it counts,
    /// when it came in order), or a Logout when not even its MsgSeqNum can be read.
    fn field_error(&mut self, bytes: &[u8], error: FieldError) {
        let (Some(session), Some(seq)) = (self.session.as_mut(), seq_of(bytes)) else {
            return self
                .close_with("the message's fields cannot be read", ErrorCode::ProtocolError);
        };
        let (reason, tag, text) = match error {
            FieldError::InvalidTag => {
                (reject_reason::INVALID_TAG_NUMBER, None, "a tag is not a number followed by =")
            }
            FieldError::NoValue { tag } => {
                (reject_reason::TAG_WITHOUT_VALUE, Some(tag), "tag specified without a value")
            }
            FieldError::DataLength { tag } => (
                reject_reason::INCORRECT_DATA_FORMAT,
                Some(tag),
                "a data field's length does not match",
            ),
            FieldError::TooManyFields => (reject_reason::OTHER, None, "too many fields"),
        };
        if seq == session.out.store.expected_in {
            session.out.store.expected_in += 1;
        }
        let refused = Refused { ref_seq: seq, tag, msg_type: None, reason, text: text.to_string() };
        session.out.reject(&refused, &mut self.output);
    }

    async fn take_parsed(&mut self, message: &Message<'_>) {
        let seq = match message.number(tag::MSG_SEQ_NUM) {
            Ok(Some(seq)) if seq > 0 => seq,
            _ => {
                return self.close_with(
                    "MsgSeqNum (34) is missing or not a number",
                    ErrorCode::ProtocolError,
                )
            }
        };
        let Some(msg_type) = message.msg_type() else {
            return self.close_with("MsgType (35) is missing", ErrorCode::ProtocolError);
        };
        if self.session.is_none() {
            if msg_type != "A" {
                return self.close_with(
                    "the first message must be a Logon (35=A)",
                    ErrorCode::LoginRequired,
                );
            }
            return self.logon(message, seq).await;
        }
        if msg_type == "A" {
            return self.close_with("already logged on", ErrorCode::AlreadyLoggedIn);
        }
        let Some(session) = self.session.as_mut() else { return };
        let expected = session.out.store.expected_in;
        let poss_dup = message.flag(tag::POSS_DUP_FLAG) == Ok(true);
        let gap_fill = message.flag(tag::GAP_FILL_FLAG) == Ok(true);
        if msg_type == "4" && !gap_fill {
            return self.sequence_reset(message, seq, false);
        }
        if seq > expected {
            match msg_type {
                "5" => return self.close_with("", ErrorCode::Closed),
                "2" => self.answer_resend(message),
                _ => {}
            }
            if let Some(session) = self.session.as_mut() {
                if !self.resend_requested {
                    session.out.resend_request(expected, &mut self.output);
                    self.resend_requested = true;
                }
            }
            return;
        }
        if seq < expected {
            if poss_dup {
                return;
            }
            let text = format!("MsgSeqNum too low, expecting {expected} but received {seq}");
            return self.close_with(&text, ErrorCode::ProtocolError);
        }
        session.out.store.expected_in = seq + 1;
        if !poss_dup {
            self.resend_requested = false;
        }
        let refuse = |tag, reason, text: &str| Refused {
            ref_seq: seq,
            tag: Some(tag),
            msg_type: Some(msg_type.to_string()),
            reason,
            text: text.to_string(),
        };
        if message.text(tag::SENDER_COMP_ID) != Some(session.out.their_comp_id.as_str())
            || message.text(tag::TARGET_COMP_ID) != Some(&*self.gateway.comp_id)
        {
            let text = "SenderCompID or TargetCompID differ from the Logon's";
            session.out.reject(
                &refuse(tag::SENDER_COMP_ID, reject_reason::COMP_ID_PROBLEM, text),
                &mut self.output,
            );
            return self.close_with(text, ErrorCode::ProtocolError);
        }
        if message.get(tag::SENDING_TIME).and_then(fix::parse_timestamp).is_none() {
            let refused = refuse(
                tag::SENDING_TIME,
                reject_reason::REQUIRED_TAG_MISSING,
                "SendingTime (52) missing or not a UTCTimestamp",
            );
            return session.out.reject(&refused, &mut self.output);
        }
        if poss_dup && message.get(tag::ORIG_SENDING_TIME).is_none() {
            let refused = refuse(
                tag::ORIG_SENDING_TIME,
                reject_reason::REQUIRED_TAG_MISSING,
                "OrigSendingTime (122) is required with PossDupFlag",
            );
            return session.out.reject(&refused, &mut self.output);
        }
        match msg_type {
            "0" | "3" => {}
            "1" => match message.get(tag::TEST_REQ_ID) {
                Some(id) => session.out.heartbeat(Some(id), &mut self.output),
                None => {
                    let refused = refuse(
                        tag::TEST_REQ_ID,
                        reject_reason::REQUIRED_TAG_MISSING,
                        "TestReqID (112) missing",
                    );
                    session.out.reject(&refused, &mut self.output)
                }
            },
            "2" => self.answer_resend(message),
            "4" => self.sequence_reset(message, seq, true),
            "5" => self.close_with("", ErrorCode::Closed),
            "D" | "F" | "G" => self.application(msg_type, message, seq).await,
            _ => {
                let writer = session.out.begin("j");
                writer
                    .number(tag::REF_SEQ_NUM, seq)
                    .str(tag::REF_MSG_TYPE, msg_type)
                    .number(tag::BUSINESS_REJECT_REASON, 3)
                    .str(tag::TEXT, "unsupported message type");
                session.out.send(Kind::Application, Some(&mut self.output));
            }
        }
    }

    /// SequenceReset: GapFill (in order) or Reset (whatever its MsgSeqNum).
    fn sequence_reset(&mut self, message: &Message<'_>, seq: SeqNum, gap_fill: bool) {
        let Some(session) = self.session.as_mut() else { return };
        let expected = session.out.store.expected_in;
        let refused = |text: &str| Refused {
            ref_seq: seq,
            tag: Some(tag::NEW_SEQ_NO),
            msg_type: Some("4".to_string()),
            reason: reject_reason::VALUE_INCORRECT,
            text: text.to_string(),
        };
        match message.number(tag::NEW_SEQ_NO) {
            Ok(Some(new_seq)) if new_seq >= expected => session.out.store.expected_in = new_seq,
            Ok(Some(_)) if gap_fill => session.out.reject(
                &refused("NewSeqNo (36) is below the next expected MsgSeqNum"),
                &mut self.output,
            ),
            Ok(Some(_)) => session.out.reject(
                &refused("NewSeqNo (36) may not lower the next expected MsgSeqNum"),
                &mut self.output,
            ),
            _ => session
                .out
                .reject(&refused("NewSeqNo (36) missing or not a number"), &mut self.output),
        }
    }

    fn answer_resend(&mut self, message: &Message<'_>) {
        let Some(session) = self.session.as_mut() else { return };
        let (Ok(Some(from)), Ok(Some(to))) =
            (message.number(tag::BEGIN_SEQ_NO), message.number(tag::END_SEQ_NO))
        else {
            let refused = Refused::missing(tag::BEGIN_SEQ_NO, "BeginSeqNo and EndSeqNo");
            return session.out.reject(&refused, &mut self.output);
        };
        if let Err(error) = session.out.resend(from, to, &mut self.output) {
            tracing::error!(%error, "the FIX session's store cannot be read");
            self.kill.kill(ErrorCode::StoreFailed);
        }
    }

    /// The Logon: the key's signature checked, the session taken (one per key), its
    /// sequence numbers checked (a gap asks for a resend), the Logon answered.
    async fn logon(&mut self, message: &Message<'_>, seq: SeqNum) {
        let login = match self.authenticate(message) {
            Ok(login) => login,
            Err(error) => {
                let text = format!("{}: {}", error.code, error.message);
                return self.close_with(&text, error.code);
            }
        };
        // A node of a cluster that does not lead takes no session: the Logout says
        // where the leader is (`docs/cluster.md`).
        if let Err(not_leader) = self.state.queries.leads() {
            let text = format!("{}: {}", ErrorCode::NotLeader.as_str(), not_leader.message);
            return self.close_with(&text, ErrorCode::NotLeader);
        }
        let heartbeat_s = match message.number(tag::HEART_BT_INT) {
            Ok(Some(seconds)) if (1..=self.gateway.heartbeat_max_s).contains(&seconds) => seconds,
            _ => {
                let text = format!(
                    "HeartBtInt (108) must be 1 to {} seconds",
                    self.gateway.heartbeat_max_s
                );
                return self.close_with(&text, ErrorCode::ProtocolError);
            }
        };
        let Ok(account_name) = login.account().map(str::to_string) else {
            return self.close_with("the key has no account to trade for", ErrorCode::Forbidden);
        };
        let key_id = login.key_id().unwrap_or_default().to_string();
        self.login = Some(login);
        let Ok(resumed) = self.gateway.take_session(&key_id).await else {
            return self.close_with(
                "a session with this key is already logged on",
                ErrorCode::AlreadyLoggedIn,
            );
        };
        let their_comp_id = message.text(tag::SENDER_COMP_ID).unwrap_or("").to_string();
        let mut session = match resumed {
            Some(mut session) => {
                session.out.their_comp_id = their_comp_id;
                session
            }
            None => match self
                .gateway
                .open_session(&self.state, &key_id, account_name, their_comp_id)
                .await
            {
                Ok(session) => session,
                Err(error) => {
                    tracing::error!(%error, "a FIX session's store cannot be opened");
                    self.gateway.set(&key_id, None);
                    return self.close_with(
                        "the session's store cannot be opened",
                        ErrorCode::StoreFailed,
                    );
                }
            },
        };
        self.hub_taken = session.hub.take();
        let reset = message.flag(tag::RESET_SEQ_NUM_FLAG) == Ok(true);
        if reset {
            if let Err(error) = session.out.store.reset() {
                tracing::error!(%error, "a FIX session's store cannot be reset");
            }
        }
        if let Err(error) = session.out.store.remember_identity(&key_id, &session.out.their_comp_id)
        {
            tracing::error!(%error, "a FIX session's identity cannot be stored");
        }
        let expected = session.out.store.expected_in;
        self.heartbeat_ms = heartbeat_s * 1000;
        self.session = Some(session);
        if seq < expected && !reset {
            let text = format!("MsgSeqNum too low, expecting {expected} but received {seq}");
            return self.close_with(&text, ErrorCode::ProtocolError);
        }
        tracing::info!(connection = self.id, key = %key_id, "fix logon");
        let Some(session) = self.session.as_mut() else { return };
        session.out.logon(heartbeat_s, reset, &mut self.output);
        if seq > expected && !reset {
            session.out.resend_request(expected, &mut self.output);
            self.resend_requested = true;
        } else {
            session.out.store.expected_in = seq + 1;
        }
        self.follow_account().await;
    }

    /// Checks the Logon's key and signature: Username (553) the key id, RawData (96)
    /// the hex HMAC-SHA256 over SendingTime (as milliseconds), `GET` and
    /// `FIX_LOGIN_PATH`. `Err` is the Logout's text.
    /// The Logon's key and signature checked, and its place among the key's
    /// connections taken.
    fn authenticate(&self, message: &Message<'_>) -> ApiResult<Login> {
        let missing = |text: &str| ApiError::new(ErrorCode::MissingSignature, text);
        let key_id = message
            .text(tag::USERNAME)
            .ok_or_else(|| missing("Username (553) must be the API key id"))?;
        let signature = message.text(tag::RAW_DATA).ok_or_else(|| {
            missing(
                "RawData (96) must be the hex signature of the Logon's SendingTime (docs/fix.md)",
            )
        })?;
        let sent_ms = message
            .get(tag::SENDING_TIME)
            .and_then(fix::parse_timestamp)
            .ok_or_else(|| missing("SendingTime (52) missing or not a UTCTimestamp"))?;
        if message.text(tag::TARGET_COMP_ID) != Some(&*self.gateway.comp_id) {
            return Err(ApiError::malformed(format!(
                "TargetCompID (56) must be {}",
                self.gateway.comp_id
            )));
        }
        if message.text(tag::SENDER_COMP_ID).is_none_or(str::is_empty) {
            return Err(ApiError::malformed("SenderCompID (49) missing"));
        }
        let timestamp = sent_ms.to_string();
        let signed = Signed {
            key_id,
            timestamp: &timestamp,
            signature_hex: signature,
            method: LOGIN_METHOD,
            path_and_query: FIX_LOGIN_PATH,
            body: b"",
        };
        self.state.login_with_key(&signed, now_ms())
    }

    /// Subscribes the session to the account's orders and fills once the account exists
    /// in the engine; tried again before each request until then.
    async fn follow_account(&mut self) {
        let Some(session) = self.session.as_mut() else { return };
        if !session.follow(&self.state).await {
            self.kill.kill(ErrorCode::ShuttingDown);
        }
    }

    /// NewOrderSingle, OrderCancelRequest, OrderCancelReplaceRequest: decoded, checked,
    /// submitted on the lane; a refusal is answered at once.
    async fn application(&mut self, msg_type: &str, message: &Message<'_>, seq: SeqNum) {
        let decoded = match orders::decode(msg_type, message) {
            Ok(Some(decoded)) => decoded,
            Ok(None) => return,
            Err(mut refused) => {
                refused.ref_seq = seq;
                refused.msg_type = Some(msg_type.to_string());
                if let Some(session) = self.session.as_mut() {
                    session.out.reject(&refused, &mut self.output);
                }
                return;
            }
        };
        self.follow_account().await;
        let Some(session) = self.session.as_mut() else { return };
        let (route, pending, order) = match &decoded {
            Application::NewOrder(order) | Application::Unsupported { order, .. } => {
                let pending = Pending::Place {
                    cl_ord_id: order
                        .client_order_id
                        .as_ref()
                        .map_or("", |id| id.as_str())
                        .to_string(),
                    order: Box::new(order.clone().into_owned()),
                };
                (Route::NewOrder, pending, None)
            }
            Application::Cancel(change) | Application::Replace { change, .. } => {
                let order = session.orders.resolve(change.orig_cl_ord_id.as_str());
                let pending = Pending::Change {
                    cancel: matches!(decoded, Application::Cancel(_)),
                    cl_ord_id: change.cl_ord_id.to_string(),
                    orig_cl_ord_id: change.orig_cl_ord_id.to_string(),
                    order: order.clone(),
                };
                let route = if matches!(decoded, Application::Cancel(_)) {
                    Route::Cancel
                } else {
                    Route::Replace
                };
                (route, pending, Some(order))
            }
        };
        let request: ApiResult<Request<'_>> = match (&decoded, &order) {
            (Application::NewOrder(order), _) => Ok(Request::Place(order.clone())),
            (Application::Unsupported { message, .. }, _) => {
                Err(ApiError::new(ErrorCode::Unsupported, *message))
            }
            (Application::Cancel(_), Some(order)) => Ok(Request::Cancel(orders::target(order))),
            (Application::Replace { qty, price, .. }, Some(order)) => {
                orders::replace(order, *qty, *price)
            }
            _ => return,
        };
        let Some(login) = self.login.clone() else { return };
        let submitted = match request {
            Ok(request) => {
                let detail = if route == Route::NewOrder { Detail::Stamp } else { Detail::Full };
                let entry = Arc::clone(&self.state.entry);
                self.in_flight.submit(&entry, &login, &request, detail).await
            }
            Err(error) => Err(error),
        };
        match submitted {
            Ok(submitted) => {
                if let Some(order) = &order {
                    session.orders.changing(order);
                }
                self.in_flight.push(Waiting { pending, route, started: Instant::now() }, submitted);
            }
            Err(error) => {
                let route_name = ("fix", route.name());
                let status = http_error::status(error.code).as_u16();
                self.route_metrics.observe(&self.state.metrics, route_name, status, 0.0);
                let mut sink = Sink { out: &mut session.out, output: Some(&mut self.output) };
                session.orders.on_refused(&pending, &error, &mut sink);
            }
        }
        if self.output.messages() > self.output_frames_max {
            self.kill.kill(ErrorCode::SlowConsumer);
        }
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
        let Waiting { pending, route, started } = waiting;
        let status =
            answer.as_ref().err().map_or(0, |error| http_error::status(error.code).as_u16());
        self.observe(route, status, started.elapsed());
        let Connection { session, output, online, .. } = self;
        let Some(session) = session.as_mut() else { return };
        let mut sink = Sink { out: &mut session.out, output: online.then_some(output) };
        match answer {
            Err(error) => session.orders.on_refused(&pending, &error, &mut sink),
            Ok(Answer { view: View::Order(shown), .. }) => {
                session.orders.on_changed(&pending, &shown.record, &shown.reference, &mut sink)
            }
            Ok(Answer { stamp, .. }) => {
                if let Some(account) = session.account {
                    let reference = self.state.directory.reference();
                    session.orders.on_placed(&pending, &stamp, account, &reference, &mut sink);
                }
            }
        }
    }

    fn forward(&mut self, message: &FeedMessage) {
        let Connection { session, output, online, .. } = self;
        if let Some(session) = session.as_mut() {
            session.forward(message, online.then_some(output));
        }
    }

    /// Counts an answered request in `/metrics`.
    fn observe(&mut self, route: Route, status: u16, took: Duration) {
        let route = ("fix", route.name());
        self.route_metrics.observe(&self.state.metrics, route, status, took.as_secs_f64());
    }
}

/// MsgSeqNum (34) found in a message's bytes without reading its other fields (for a
/// message whose fields cannot be read).
fn seq_of(bytes: &[u8]) -> Option<SeqNum> {
    let at = bytes.windows(4).position(|window| window == b"\x0134=")? + 4;
    let end = bytes[at..].iter().position(|&byte| byte == fix::SOH)? + at;
    fix::parse_u64(&bytes[at..end])
}
