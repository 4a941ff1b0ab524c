//! Order entry over the binary protocol (`docs/protocol-binary.md`): a login frame,
//! then the flow's `NewOrder`, `Cancel` and `Amend` frames, all that are due in one write (up to 60 KiB), each answered
//! `Accepted` or `Rejected` with its request id. The loops are `drive`'s.

use std::io::{BufReader, Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use bourse_protocol::binary::{
    self, ClientMessage, NewOrder, ServerMessage, WireDecimal, FRAME_BYTES_MAX, FRAME_HEADER_BYTES,
};
use bourse_protocol::signing::{self, Signer, LOGIN_METHOD, TCP_LOGIN_PATH};

use super::admin::Credentials;
use super::drive::{Answer, Answers, ConnectionPlan, Outcome, Requests};
use super::flow::{Flow, OrderRequest, TimeInForce};

/// Prices go out in ticks of 0.01, quantities in lots of 0.0001 (`flow`'s units).
const PRICE_SCALE: u8 = 2;
const QTY_SCALE: u8 = 4;

/// Connects and logs in: the connection's sending and reading halves.
pub fn connect(plan: &ConnectionPlan) -> Result<(TcpRequests, TcpAnswers), String> {
    let mut stream =
        TcpStream::connect(plan.address).map_err(|error| format!("connect: {error}"))?;
    stream.set_nodelay(true).map_err(|error| error.to_string())?;
    log_in(&mut stream, &plan.credentials)?;
    let reader = stream.try_clone().map_err(|error| error.to_string())?;
    // Nothing for 10 s while answers are awaited ends the connection.
    reader.set_read_timeout(Some(Duration::from_secs(10))).map_err(|error| error.to_string())?;
    Ok((
        TcpRequests { stream, batch: Vec::with_capacity(64 * 1024), flow: plan.flow() },
        TcpAnswers {
            reader: BufReader::with_capacity(256 * 1024, reader),
            frame: [0; FRAME_BYTES_MAX],
        },
    ))
}

fn log_in(stream: &mut TcpStream, credentials: &Credentials) -> Result<(), String> {
    let timestamp_ms = signing::now_ms();
    let message =
        signing::signing_message(&timestamp_ms.to_string(), LOGIN_METHOD, TCP_LOGIN_PATH, b"");
    let signature = Signer::new(&credentials.secret).signature(&message);
    let login = ClientMessage::Login { key: credentials.key.as_str(), timestamp_ms, signature };
    stream.write_all(&login.encode()).map_err(|error| format!("login: {error}"))?;
    stream.set_read_timeout(Some(Duration::from_secs(10))).map_err(|error| error.to_string())?;
    let mut frame = [0; FRAME_BYTES_MAX];
    let answer = read_message(stream, &mut frame)?;
    stream.set_read_timeout(None).map_err(|error| error.to_string())?;
    match answer {
        ServerMessage::LoggedIn { .. } => Ok(()),
        ServerMessage::Goodbye { text, .. } => Err(format!("login refused: {text}")),
        other => Err(format!("login answered with frame 0x{:02x}", other.kind())),
    }
}

/// Appends request `request_id` of the flow to `out` as its frame: `NewOrder`, `Cancel`
/// or `Amend` (prices at scale 2, quantities at scale 4, `stp` none).
fn frame(plan: &ConnectionPlan, request: &OrderRequest, request_id: u64, out: &mut Vec<u8>) {
    let client_order_id = request.client_order_id();
    let message = match request {
        OrderRequest::New(order) => ClientMessage::NewOrder(NewOrder {
            request_id,
            client_order_id,
            symbol: plan.symbol(order.symbol),
            side: if order.buy { 1 } else { 2 },
            kind: 1, // limit
            time_in_force: match order.time_in_force {
                TimeInForce::GoodTillCancel => 1,
                TimeInForce::ImmediateOrCancel => 2,
                TimeInForce::FillOrKill => 3,
            },
            post_only: false,
            stp: 4,    // none
            offset: 0, // open
            price: WireDecimal { mantissa: order.price_ticks, scale: PRICE_SCALE },
            qty: WireDecimal { mantissa: order.qty_lots, scale: QTY_SCALE },
        }),
        OrderRequest::Cancel { .. } => ClientMessage::Cancel { request_id, client_order_id },
        OrderRequest::Amend { price_ticks, qty_lots, .. } => ClientMessage::Amend {
            request_id,
            client_order_id,
            price: price_ticks.map(|mantissa| WireDecimal { mantissa, scale: PRICE_SCALE }),
            qty: qty_lots.map(|mantissa| WireDecimal { mantissa, scale: QTY_SCALE }),
        },
    };
    message.encode_into(out);
}

pub struct TcpRequests {
    stream: TcpStream,
    batch: Vec<u8>,
    flow: Flow,
}

impl Requests for TcpRequests {
    fn send(&mut self, plan: &ConnectionPlan, first: u64, end: u64) -> Result<u64, String> {
        self.batch.clear();
        let mut next = first;
        while next < end && self.batch.len() < 60 * 1024 {
            let request = self.flow.next(next);
            frame(plan, &request, next, &mut self.batch);
            next += 1;
        }
        self.stream.write_all(&self.batch).map_err(|error| format!("send: {error}"))?;
        Ok(next)
    }
}

pub struct TcpAnswers {
    reader: BufReader<TcpStream>,
    /// The frame being read (its type and body), kept for the next.
    frame: [u8; FRAME_BYTES_MAX],
}

impl Answers for TcpAnswers {
    fn next(&mut self) -> Result<Option<Answer>, String> {
        let answer = match read_message(&mut self.reader, &mut self.frame)? {
            ServerMessage::Accepted { request_id, .. } => {
                Answer { request: request_id, outcome: Outcome::Ok }
            }
            ServerMessage::Rejected { request_id, code, .. } => {
                Answer { request: request_id, outcome: Outcome::Rejected(code) }
            }
            ServerMessage::Goodbye { text, .. } => {
                return Err(format!("the server closed the connection: {text}"));
            }
            _ => return Ok(None), // fills, order updates
        };
        Ok(Some(answer))
    }
}

/// Reads one frame into `frame` and decodes it (its text borrowed from `frame`).
fn read_message<'f>(
    stream: &mut impl Read,
    frame: &'f mut [u8; FRAME_BYTES_MAX],
) -> Result<ServerMessage<&'f str>, String> {
    let mut header = [0u8; FRAME_HEADER_BYTES];
    stream.read_exact(&mut header).map_err(|error| format!("read: {error}"))?;
    let length = binary::frame_length(header).map_err(|error| format!("read: {error}"))?;
    let frame = &mut frame[..length];
    stream.read_exact(frame).map_err(|error| format!("read: {error}"))?;
    binary::decode_server_borrowed(frame).map_err(|error| format!("read: {error}"))
}
