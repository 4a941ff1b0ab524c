//! The WebSocket gateway at `/v1/ws`: subscribe and unsubscribe to public channels
//! (depth, trades, ticker) and, after logging in with an API key, to the account's
//! private ones (orders, fills, balances), and enter orders (`orders`: place, cancel,
//! amend, pipelined). `docs/websocket.md` is the protocol.
//!
//! A connection owns nothing but its subscriptions; the hub (`hub`) makes the messages.
//! Every connection has a bounded queue; a client that does not keep up is closed with
//! a reason (`slow_consumer`), never waited for.

pub mod orders;

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Instant;

use axum::extract::ws::{Message, WebSocket};
use axum::extract::State;
use axum::response::Response;
use bourse_protocol::signing::{LOGIN_METHOD, WS_LOGIN_PATH};
use futures_util::SinkExt;
use serde::Deserialize;
use serde_json::{json, Map, Value};
use tokio::sync::mpsc;

use crate::gateways::shared::connection::WRITE_TIMEOUT;
use crate::gateways::shared::websocket::{self, accept, send, Upgrade, Wake};
use crate::gateways::shared::{http_error, json};
use crate::link::LaneReleases;
use crate::port::auth::Signed;
use crate::port::error::{ApiError, ApiResult, ErrorCode};
use crate::port::orders::answer::Detail;
use crate::port::orders::in_flight::{InFlight, Submitted};
use crate::port::session::Session;
use crate::port::state::Shared;
use crate::services::feed::channel::{Channel, FeedMessage, HubCommand, Kill, Outbound};
use orders::{Decoded, EntryOp};

/// Largest message a client may send.
pub const INBOUND_MESSAGE_BYTES_MAX: usize = 4_096;
/// Subscriptions per connection, at most.
pub const SUBSCRIPTIONS_MAX: usize = 64;
/// Answers to order entry that are ready together go out in one write, up to this many.
const ANSWERS_PER_WRITE_MAX: usize = 256;

const _: () =
    assert!(ANSWERS_PER_WRITE_MAX <= crate::port::orders::in_flight::IN_FLIGHT_PER_CONNECTION_MAX);
// A whole message fits what one read takes.
const _: () = assert!(INBOUND_MESSAGE_BYTES_MAX <= websocket::READ_BUFFER_BYTES);

#[derive(Deserialize)]
#[serde(tag = "op", rename_all = "lowercase", deny_unknown_fields)]
enum Request {
    Login { key: String, timestamp: String, signature: String },
    Subscribe { channel: String, symbol: Option<String>, interval: Option<String> },
    Unsubscribe { channel: String, symbol: Option<String>, interval: Option<String> },
    Ping,
}

pub async fn upgrade(upgrade: Upgrade, State(state): State<Shared>) -> Response {
    accept(upgrade, INBOUND_MESSAGE_BYTES_MAX, move |socket| async move {
        Connection::new(state).run(socket).await
    })
}

struct Connection {
    id: u64,
    /// The connection's order-entry requests in flight, on its own lane.
    in_flight: Option<InFlight<Meta>>,
    /// The lane's outcomes (kept out of `Connection` by `run`, which must be `Sync`).
    releases: Option<LaneReleases>,
    state: Shared,
    outbound: Outbound,
    receiver: mpsc::Receiver<Arc<FeedMessage>>,
    /// Once logged in: who, holding its place among its key's connections.
    session: Option<Session>,
    subscriptions: HashSet<Channel>,
}

/// What a connection keeps of an order-entry request in flight.
struct Meta {
    op: EntryOp,
    req_id: Value,
    started: Instant,
}

impl Connection {
    fn new(state: Shared) -> Connection {
        let (sender, receiver) = mpsc::channel(state.limits.ws_queue_messages.max(1));
        let outbound = Outbound { sender, kill: Arc::new(Kill::default()) };
        let (in_flight, releases) = InFlight::open(&state.entry);
        Connection {
            id: crate::gateways::shared::connection::next_connection_id(),
            in_flight: Some(in_flight),
            releases: Some(releases),
            state,
            outbound,
            receiver,
            session: None,
            subscriptions: HashSet::new(),
        }
    }

    async fn run(mut self, mut socket: WebSocket) {
        self.state.metrics.connection_opened("websocket");
        let kill = Arc::clone(&self.outbound.kill);
        let (Some(mut in_flight), Some(mut releases)) =
            (self.in_flight.take(), self.releases.take())
        else {
            return;
        };
        let entry = Arc::clone(&self.state.entry);
        let reason = loop {
            let accepting = !in_flight.is_full();
            let wake =
                websocket::wake(&mut socket, &mut releases, &mut self.receiver, &kill, accepting);
            match wake.await {
                Wake::Released(released) => {
                    in_flight.take_released_and_waiting(&entry, &released, &mut releases).await;
                }
                Wake::Text(text) => {
                    let answer = self.handle(text.as_str(), &mut in_flight).await;
                    if let Some(answer) = answer {
                        if !send(&mut socket, answer.to_string()).await {
                            break None;
                        }
                    }
                }
                Wake::Binary => {
                    let answer = error_message(ErrorCode::MALFORMED, "messages are JSON text");
                    if !send(&mut socket, answer.to_string()).await {
                        break None;
                    }
                }
                Wake::Feed(message) => {
                    if !send(&mut socket, message.text().to_string()).await {
                        break Some(ErrorCode::SlowConsumer);
                    }
                }
                Wake::End(reason) => break reason,
            }
            // Answers ready (and errors found at once, if nothing is ahead of them).
            if !self.send_answered(&mut socket, &mut in_flight).await {
                break Some(ErrorCode::SlowConsumer);
            }
        };
        websocket::close(socket, reason, (&self.state, self.id, "websocket")).await;
    }

    async fn handle(&mut self, text: &str, in_flight: &mut InFlight<Meta>) -> Option<Value> {
        let request = match serde_json::from_str::<Value>(text) {
            Ok(Value::Object(request)) => request,
            Ok(_) => {
                return Some(error_message(
                    ErrorCode::MALFORMED,
                    "not a request: not a JSON object",
                ))
            }
            Err(problem) => {
                return Some(error_message(
                    ErrorCode::MALFORMED,
                    &format!("not a request: {problem}"),
                ))
            }
        };
        if let Some(op) = EntryOp::of(&request) {
            return self.order_entry(op, request, in_flight).await;
        }
        let request: Request = match serde_json::from_value(Value::Object(request)) {
            Ok(request) => request,
            Err(problem) => {
                return Some(error_message(
                    ErrorCode::MALFORMED,
                    &format!("not a request: {problem}"),
                ))
            }
        };
        // A logged-in connection's requests count against its key's rate, as REST's do.
        if let Some(session) = &self.session {
            if let Err(error) = self.state.count_request(session) {
                return Some(error_message(error.code, &error.message));
            }
        }
        let answer = match request {
            Request::Ping => Ok(Some(json!({ "type": "pong" }))),
            Request::Login { key, timestamp, signature } => {
                self.login(&key, &timestamp, &signature).map(Some)
            }
            Request::Subscribe { channel, symbol, interval } => {
                self.subscribe(&channel, symbol, interval).await
            }
            Request::Unsubscribe { channel, symbol, interval } => {
                self.unsubscribe(&channel, symbol, interval).await.map(Some)
            }
        };
        answer.unwrap_or_else(|error| Some(error_message(error.code, &error.message)))
    }

    /// An `order`, `cancel` or `amend`: its answer joins the requests in flight (even an
    /// error found at once, so that answers keep the requests' order).
    async fn order_entry(
        &mut self,
        op: EntryOp,
        mut request: Map<String, Value>,
        in_flight: &mut InFlight<Meta>,
    ) -> Option<Value> {
        let started = Instant::now();
        request.remove("op");
        let req_id = request.remove("req_id").unwrap_or(Value::Null);
        let meta = Meta { op, req_id, started };
        if in_flight.is_full() {
            in_flight.refused(meta, InFlight::<Meta>::busy_error());
            return None;
        }
        match self.submit_entry(&meta, request, in_flight).await {
            Ok(submitted) => in_flight.push(meta, submitted),
            Err(error) => in_flight.refused(meta, error),
        }
        None
    }

    async fn submit_entry(
        &self,
        meta: &Meta,
        request: Map<String, Value>,
        in_flight: &mut InFlight<Meta>,
    ) -> ApiResult<Submitted> {
        let op = meta.op;
        if !(meta.req_id.is_number() || meta.req_id.is_string()) {
            return Err(ApiError::malformed(format!(
                "{} needs a req_id (a number or a string), echoed in its answer",
                op.name()
            )));
        }
        let Some(session) = &self.session else {
            return Err(ApiError::new(
                ErrorCode::LoginRequired,
                format!("log in before {}", op.name()),
            ));
        };
        let decoded = Decoded::read(op, request)?;
        let request = decoded.request()?;
        in_flight.submit(&self.state.entry, session, &request, Detail::Full).await
    }

    /// Sends the answers at the front of `in_flight` that are known, in order, in one
    /// write; `false` when the client is gone or does not take them in time.
    async fn send_answered(&self, socket: &mut WebSocket, in_flight: &mut InFlight<Meta>) -> bool {
        loop {
            let mut answers = Vec::new();
            while answers.len() < ANSWERS_PER_WRITE_MAX {
                let Some((meta, answer)) = in_flight.pop_answered() else { break };
                let status = answer
                    .as_ref()
                    .err()
                    .map_or(200, |error| http_error::status(error.code).as_u16());
                let took = meta.started.elapsed().as_secs_f64();
                self.state.metrics.request("websocket", meta.op.name(), status, took);
                answers.push(json::ws_answer(&meta.req_id, answer));
            }
            if answers.is_empty() {
                return true;
            }
            if !send_all(socket, answers).await {
                return false;
            }
        }
    }

    fn login(&mut self, key: &str, timestamp: &str, signature: &str) -> ApiResult<Value> {
        if self.session.is_some() {
            return Err(ApiError::new(
                ErrorCode::AlreadyLoggedIn,
                "this connection is logged in already",
            ));
        }
        let signed = Signed {
            key_id: key,
            timestamp,
            signature_hex: signature,
            method: LOGIN_METHOD,
            path_and_query: WS_LOGIN_PATH,
            body: b"",
        };
        let session = self.state.login_with_key(&signed, bourse_protocol::signing::now_ms())?;
        let account = session.account()?.to_string();
        tracing::info!(connection = self.id, key = session.key_id(), "websocket login");
        self.session = Some(session);
        Ok(json!({ "type": "logged_in", "account": account }))
    }

    async fn channel(
        &self,
        name: &str,
        symbol: Option<String>,
        interval: Option<String>,
    ) -> ApiResult<Channel> {
        if matches!(name, "bbo" | "l3") && self.state.market_data.is_none() {
            return Err(ApiError::new(
                ErrorCode::FeedOff,
                format!("the {name} channel needs the market-data feed, which is off"),
            ));
        }
        let interval = match (name, interval) {
            ("candles", Some(interval)) => Some(
                bourse_marketdata::candles::INTERVALS
                    .iter()
                    .position(|(known, _)| *known == interval)
                    .ok_or_else(|| {
                        ApiError::new(
                            ErrorCode::MALFORMED,
                            format!("interval {interval:?} is not one of 1s, 1m, 5m, 15m, 1h, 1d"),
                        )
                    })? as u8,
            ),
            ("candles", None) => Some(1),
            (_, Some(_)) => {
                return Err(ApiError::new(
                    ErrorCode::MALFORMED,
                    format!("the {name} channel takes no interval"),
                ))
            }
            (_, None) => None,
        };
        let public = |make: fn(bourse_core::ids::InstrumentId) -> Channel| async move {
            let symbol = symbol.ok_or_else(|| {
                ApiError::new(ErrorCode::MALFORMED, format!("the {name} channel needs a symbol"))
            })?;
            let reference = self.state.directory.reference_with_symbol(&symbol).await?;
            let (instrument, _) = reference.find_instrument(&symbol).ok_or_else(|| {
                ApiError::new(
                    ErrorCode::Rejected(bourse_core::RejectReason::UnknownSymbol),
                    format!("no instrument {symbol:?}"),
                )
            })?;
            Ok(make(instrument))
        };
        match name {
            "trades" => public(Channel::Trades).await,
            "ticker" => public(Channel::Ticker).await,
            "depth" => public(Channel::Depth).await,
            "bbo" => public(Channel::Bbo).await,
            "l3" => public(Channel::L3).await,
            "candles" => {
                let channel = public(Channel::Trades).await?;
                match (channel, interval) {
                    (Channel::Trades(instrument), Some(interval)) => Ok(Channel::Candles(instrument, interval)),
                    _ => Err(ApiError::new(ErrorCode::MALFORMED, "the candles channel needs an interval")),
                }
            }
            "orders" | "fills" | "balances" | "positions" => {
                let caller = self
                    .session
                    .as_ref()
                    .ok_or_else(|| ApiError::new(ErrorCode::LoginRequired, format!("log in before subscribing to {name}")))?;
                let account = caller.account()?;
                let id = self
                    .state
                    .directory
                    .account_id(account)
                    .await
                    ?
                    .ok_or_else(|| ApiError::new(ErrorCode::UnknownAccount,
                        "the account has no balance yet; subscribe after its first deposit",
                    ))?;
                Ok(match name {
                    "orders" => Channel::Orders(id),
                    "fills" => Channel::Fills(id),
                    "positions" => Channel::Positions(id),
                    _ => Channel::Balances(id),
                })
            }
            other => Err(ApiError::new(ErrorCode::UnknownChannel,
                format!(
                    "no channel {other:?}: depth, trades, ticker, bbo, l3, candles, orders, fills, balances, positions"
                ),
            )),
        }
    }

    /// The hub answers (through the connection's queue) once the subscription is in
    /// place, before the channel's first message; `Ok(None)` then.
    async fn subscribe(
        &mut self,
        name: &str,
        symbol: Option<String>,
        interval: Option<String>,
    ) -> ApiResult<Option<Value>> {
        let channel = self.channel(name, symbol.clone(), interval).await?;
        if self.subscriptions.len() >= SUBSCRIPTIONS_MAX && !self.subscriptions.contains(&channel) {
            return Err(ApiError::new(
                ErrorCode::TooManySubscriptions,
                format!("at most {SUBSCRIPTIONS_MAX} per connection"),
            ));
        }
        self.subscriptions.insert(channel.clone());
        let answer = json!({ "type": "subscribed", "channel": name, "symbol": symbol });
        let command = HubCommand::Subscribe {
            connection: self.id,
            channel,
            outbound: self.outbound.clone(),
            acknowledgement: Some(FeedMessage::text_message(answer.to_string())),
        };
        self.state.hub.send(command).await.map_err(|_| {
            ApiError::new(ErrorCode::ShuttingDown, "the server is stopping".to_string())
        })?;
        Ok(None)
    }

    async fn unsubscribe(
        &mut self,
        name: &str,
        symbol: Option<String>,
        interval: Option<String>,
    ) -> ApiResult<Value> {
        let channel = self.channel(name, symbol.clone(), interval).await?;
        self.subscriptions.remove(&channel);
        let command = HubCommand::Unsubscribe { connection: self.id, channel };
        self.state.hub.send(command).await.map_err(|_| {
            ApiError::new(ErrorCode::ShuttingDown, "the server is stopping".to_string())
        })?;
        Ok(json!({ "type": "unsubscribed", "channel": name, "symbol": symbol }))
    }
}

fn error_message(code: ErrorCode, message: &str) -> Value {
    json!({ "type": "error", "code": code.as_str(), "message": message })
}

/// Sends `texts` in one write; `false` when the client is gone or does not take them
/// in time.
async fn send_all(socket: &mut WebSocket, texts: Vec<String>) -> bool {
    let sending = async {
        for text in texts {
            socket.feed(Message::Text(text.into())).await?;
        }
        socket.flush().await
    };
    matches!(tokio::time::timeout(WRITE_TIMEOUT, sending).await, Ok(Ok(())))
}
