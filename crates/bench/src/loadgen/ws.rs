//! Order entry over WebSocket (`docs/websocket.md`): a `login`, then `order` requests
//! with `req_id` = the request's number, all that are due in one write, each answered
//! `ack` or `error` with its `req_id`. The loops are `drive`'s.
//!
//! The socket is split by cloning the TCP stream: the sender writes its frames through
//! one `tungstenite` socket, the reader reads through another over the same stream.
//! The server never pings, so the reader never writes (a ping's pong would be written
//! from the reader's side).

use std::net::TcpStream;
use std::time::Duration;

use bourse_protocol::signing::{self, LOGIN_METHOD, WS_LOGIN_PATH};
use serde::Deserialize;
use tungstenite::protocol::Role;
use tungstenite::{Message, WebSocket};

use super::drive::{code_of, Answer, Answers, ConnectionPlan, Outcome, Requests, UNKNOWN_CODE};
use super::flow::{price_text, qty_text, Flow, OrderRequest};

/// A batch of requests stops growing past this many bytes.
const BATCH_BYTES: usize = 60 * 1024;

/// Connects (the upgrade on `/v1/ws`) and logs in: the connection's sending and
/// reading halves.
pub fn connect(plan: &ConnectionPlan) -> Result<(WsRequests, WsAnswers), String> {
    let stream = TcpStream::connect(plan.address).map_err(|error| format!("connect: {error}"))?;
    stream.set_nodelay(true).map_err(|error| error.to_string())?;
    stream.set_read_timeout(Some(Duration::from_secs(10))).map_err(|error| error.to_string())?;
    let writer = stream.try_clone().map_err(|error| error.to_string())?;
    let url = format!("ws://{}/v1/ws", plan.address);
    let (mut socket, _) = tungstenite::client::client(url.as_str(), stream)
        .map_err(|error| format!("the WebSocket upgrade: {error}"))?;
    log_in(&mut socket, plan)?;
    Ok((
        WsRequests {
            socket: WebSocket::from_raw_socket(writer, Role::Client, None),
            flow: plan.flow(),
        },
        WsAnswers { socket },
    ))
}

fn log_in(socket: &mut WebSocket<TcpStream>, plan: &ConnectionPlan) -> Result<(), String> {
    let timestamp = signing::now_ms().to_string();
    let message = signing::signing_message(&timestamp, LOGIN_METHOD, WS_LOGIN_PATH, b"");
    let signature = signing::sign(&plan.credentials.secret, &message);
    let login = serde_json::json!({
        "op": "login", "key": plan.credentials.key, "timestamp": timestamp, "signature": signature,
    });
    socket.send(Message::text(login.to_string())).map_err(|error| format!("login: {error}"))?;
    loop {
        match socket.read().map_err(|error| format!("login: {error}"))? {
            Message::Text(text) => {
                let answer: Reply<'_> = serde_json::from_str(text.as_str())
                    .map_err(|error| format!("login answered {text}: {error}"))?;
                return match answer.kind {
                    Some("logged_in") => Ok(()),
                    _ => Err(format!("login refused: {text}")),
                };
            }
            Message::Close(frame) => return Err(format!("login: the server closed: {frame:?}")),
            _ => continue,
        }
    }
}

pub struct WsRequests {
    socket: WebSocket<TcpStream>,
    flow: Flow,
}

/// Request `request` of the flow as its op: `order`, `cancel` or `amend`.
fn op(plan: &ConnectionPlan, request: &OrderRequest, req_id: u64) -> String {
    match request {
        OrderRequest::New(order) => format!(
            r#"{{"op":"order","req_id":{req_id},{}}}"#,
            order.json_fields(plan.symbol(order.symbol))
        ),
        OrderRequest::Cancel { client_order_id } => {
            format!(r#"{{"op":"cancel","req_id":{req_id},"client_order_id":"{client_order_id}"}}"#)
        }
        OrderRequest::Amend { client_order_id, price_ticks, qty_lots } => {
            let price = price_ticks.map(|ticks| format!(r#","price":"{}""#, price_text(ticks)));
            let qty = qty_lots.map(|lots| format!(r#","qty":"{}""#, qty_text(lots)));
            format!(
                r#"{{"op":"amend","req_id":{req_id},"client_order_id":"{client_order_id}"{}{}}}"#,
                price.unwrap_or_default(),
                qty.unwrap_or_default()
            )
        }
    }
}

impl Requests for WsRequests {
    fn send(&mut self, plan: &ConnectionPlan, first: u64, end: u64) -> Result<u64, String> {
        let mut next = first;
        let mut bytes = 0;
        while next < end && bytes < BATCH_BYTES {
            let request = self.flow.next(next);
            let text = op(plan, &request, next);
            bytes += text.len() + 14;
            self.socket.write(Message::text(text)).map_err(|error| format!("send: {error}"))?;
            next += 1;
        }
        self.socket.flush().map_err(|error| format!("send: {error}"))?;
        Ok(next)
    }
}

pub struct WsAnswers {
    socket: WebSocket<TcpStream>,
}

/// The fields of an answer the run looks at (the order itself is skipped).
#[derive(Deserialize)]
struct Reply<'a> {
    op: Option<&'a str>,
    #[serde(rename = "type")]
    kind: Option<&'a str>,
    req_id: Option<u64>,
    code: Option<&'a str>,
}

impl Answers for WsAnswers {
    fn next(&mut self) -> Result<Option<Answer>, String> {
        let text = match self.socket.read().map_err(|error| format!("read: {error}"))? {
            Message::Text(text) => text,
            Message::Close(frame) => {
                let reason = frame.map_or_else(String::new, |frame| frame.reason.to_string());
                return Err(format!("the server closed the connection: {reason}"));
            }
            _ => return Ok(None),
        };
        let reply: Reply<'_> = serde_json::from_str(text.as_str())
            .map_err(|error| format!("an answer that is not JSON ({error}): {text}"))?;
        let outcome = match (reply.op, reply.kind) {
            (Some("ack"), _) => Outcome::Ok,
            (Some("error"), _) => Outcome::Rejected(reply.code.map_or(UNKNOWN_CODE, code_of)),
            (_, Some("error")) => return Err(format!("the server answered {text}")),
            _ => return Ok(None), // a channel's message
        };
        let request = reply.req_id.ok_or_else(|| format!("an answer without req_id: {text}"))?;
        Ok(Some(Answer { request, outcome }))
    }
}
