//! Order entry over the binary protocol (`docs/protocol-binary.md`): a login frame,
//! then the flow's `NewOrder`, `Cancel` and `Amend` frames, all that are due in one write (up to 60 KiB), each answered
//! `Accepted` or `Rejected` with its request id. The loops are `drive`'s.

use std::io::{BufReader, Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use bourse_protocol::binary::{self as wire, client, server, FrameWriter};
use bourse_protocol::signing::{self, LOGIN_METHOD, TCP_LOGIN_PATH};

use super::admin::Credentials;
use super::drive::{Answer, Answers, ConnectionPlan, Outcome, Requests};
use super::flow::{Flow, OrderRequest, TimeInForce};

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
        TcpAnswers { reader: BufReader::with_capacity(256 * 1024, reader) },
    ))
}

fn log_in(stream: &mut TcpStream, credentials: &Credentials) -> Result<(), String> {
    let timestamp_ms = signing::now_ms();
    let message =
        signing::signing_message(&timestamp_ms.to_string(), LOGIN_METHOD, TCP_LOGIN_PATH, b"");
    let signature = signing::Signer::new(&credentials.secret).signature(&message);
    let frame = FrameWriter::new(client::LOGIN)
        .text(&credentials.key, wire::KEY_BYTES)
        .u64(timestamp_ms)
        .bytes(&signature)
        .finish();
    stream.write_all(&frame).map_err(|error| format!("login: {error}"))?;
    stream.set_read_timeout(Some(Duration::from_secs(10))).map_err(|error| error.to_string())?;
    let (kind, body) = read_frame(stream)?;
    stream.set_read_timeout(None).map_err(|error| error.to_string())?;
    match kind {
        server::LOGGED_IN => Ok(()),
        server::GOODBYE => Err(format!("login refused: {}", text_of(body.get(2..).unwrap_or(&[])))),
        other => Err(format!("login answered with frame 0x{other:02x}")),
    }
}

/// Request `request_id` of the flow as its frame: `NewOrder`, `Cancel` or `Amend`
/// (prices at scale 2, quantities at scale 4, `stp` none).
fn frame(plan: &ConnectionPlan, request: &OrderRequest, request_id: u64, out: Vec<u8>) -> Vec<u8> {
    let client_order_id = request.client_order_id();
    match request {
        OrderRequest::New(order) => FrameWriter::after(out, client::NEW_ORDER)
            .u64(request_id)
            .text(client_order_id, wire::CLIENT_ORDER_ID_BYTES)
            .text(plan.symbol(order.symbol), wire::SYMBOL_BYTES)
            .u8(if order.buy { 1 } else { 2 })
            .u8(1) // limit
            .u8(match order.time_in_force {
                TimeInForce::GoodTillCancel => 1,
                TimeInForce::ImmediateOrCancel => 2,
                TimeInForce::FillOrKill => 3,
            })
            .u8(0)
            .u8(4) // stp none
            .u8(2) // price scale
            .u8(4) // qty scale
            .u8(0)
            .i64(order.price_ticks)
            .i64(order.qty_lots)
            .finish(),
        OrderRequest::Cancel { .. } => FrameWriter::after(out, client::CANCEL)
            .u64(request_id)
            .text(client_order_id, wire::CLIENT_ORDER_ID_BYTES)
            .finish(),
        OrderRequest::Amend { price_ticks, qty_lots, .. } => {
            let flags = u8::from(price_ticks.is_some()) | (u8::from(qty_lots.is_some()) << 1);
            FrameWriter::after(out, client::AMEND)
                .u64(request_id)
                .text(client_order_id, wire::CLIENT_ORDER_ID_BYTES)
                .u8(flags)
                .u8(2)
                .u8(4)
                .u8(0)
                .i64(price_ticks.unwrap_or(0))
                .i64(qty_lots.unwrap_or(0))
                .finish()
        }
    }
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
            self.batch = frame(plan, &request, next, std::mem::take(&mut self.batch));
            next += 1;
        }
        self.stream.write_all(&self.batch).map_err(|error| format!("send: {error}"))?;
        Ok(next)
    }
}

pub struct TcpAnswers {
    reader: BufReader<TcpStream>,
}

impl Answers for TcpAnswers {
    fn next(&mut self) -> Result<Option<Answer>, String> {
        let (kind, body) = read_frame(&mut self.reader)?;
        let outcome = match kind {
            server::ACCEPTED => Outcome::Ok,
            server::REJECTED => Outcome::Rejected(
                body.get(8..10).map_or(0, |code| u16::from_le_bytes([code[0], code[1]])),
            ),
            server::GOODBYE => {
                let reason = text_of(body.get(2..).unwrap_or(&[]));
                return Err(format!("the server closed the connection: {reason}"));
            }
            _ => return Ok(None), // fills and order updates
        };
        Ok(Some(Answer { request: u64_at(&body, 0), outcome }))
    }
}

fn u64_at(body: &[u8], at: usize) -> u64 {
    body.get(at..at + 8).map_or(0, |bytes| u64::from_le_bytes(bytes.try_into().unwrap_or([0; 8])))
}

fn text_of(bytes: &[u8]) -> String {
    let end = bytes.iter().position(|byte| *byte == 0).unwrap_or(bytes.len());
    String::from_utf8_lossy(&bytes[..end]).into_owned()
}

/// One frame: its type and body.
fn read_frame(stream: &mut impl Read) -> Result<(u8, Vec<u8>), String> {
    let mut length = [0u8; 2];
    stream.read_exact(&mut length).map_err(|error| format!("read: {error}"))?;
    let length = usize::from(u16::from_le_bytes(length));
    if length == 0 {
        return Err("an empty frame".to_string());
    }
    let mut frame = vec![0u8; length];
    stream.read_exact(&mut frame).map_err(|error| format!("read: {error}"))?;
    let body = frame.split_off(1);
    Ok((frame[0], body))
}
