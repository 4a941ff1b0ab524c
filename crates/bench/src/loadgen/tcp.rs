//! Order entry over the binary protocol (`docs/protocol-binary.md`): a login frame,
//! then the flow's `NewOrder`, `Cancel` and `Amend` frames, all that are due in one write (up to 60 KiB), each answered
//! `Accepted` or `Rejected` with its request id. The loops are `drive`'s, except the
//! one that follows a cluster's leader (`run_following`).

use std::collections::BTreeMap;
use std::io::{BufReader, Read, Write};
use std::net::TcpStream;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bourse_protocol::binary::{
    self, ClientMessage, NewOrder, ServerMessage, WireDecimal, FRAME_BYTES_MAX, FRAME_HEADER_BYTES,
};
use bourse_protocol::signing::{self, Signer, LOGIN_METHOD, TCP_LOGIN_PATH};

use super::admin::Credentials;
use super::drive::{Answer, Answers, ConnectionPlan, Outcome, Requests, Tally, SEND_TICK};
use super::flow::{Flow, OrderRequest, Schedule, TimeInForce};
use super::follow::ClusterMap;

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
    read_frame(stream, frame).map_err(|error| format!("read: {error}"))
}

/// `read_message`, with the I/O error's kind kept (a read timeout is not an end).
fn read_frame<'f>(
    stream: &mut impl Read,
    frame: &'f mut [u8; FRAME_BYTES_MAX],
) -> std::io::Result<ServerMessage<&'f str>> {
    let mut header = [0u8; FRAME_HEADER_BYTES];
    stream.read_exact(&mut header)?;
    let length = binary::frame_length(header).map_err(std::io::Error::other)?;
    let frame = &mut frame[..length];
    stream.read_exact(frame)?;
    binary::decode_server_borrowed(frame).map_err(std::io::Error::other)
}

/// The requests of a connection that follows the leader and has no answer to yet: each
/// one's frame (to send it again to the next leader) and whether it was sent again.
type Unanswered = Arc<Mutex<BTreeMap<u64, (Vec<u8>, bool)>>>;

/// How long a connection that waits for answers hears nothing before it takes its
/// node for gone (cut off, or stalled) and looks for the leader again.
const SILENCE_MAX: Duration = Duration::from_secs(2);

/// The open loop of `drive`, following a cluster's leader (`follow`): requests go to
/// the leader; when its connection ends, or a node answers `not_leader`, the loop
/// finds the leader again, logs in there and sends every unanswered request again (the
/// same frame: the same request id and client order id) before the next ones. Latency
/// still runs from each request's due time, so a failover shows in it.
pub fn run_following(
    plan: &ConnectionPlan,
    tally: &Arc<Tally>,
    start: Instant,
    cluster: &ClusterMap,
) -> Result<(), String> {
    let unanswered: Unanswered = Arc::new(Mutex::new(BTreeMap::new()));
    let mut flow = plan.flow();
    let mut next = 0u64;
    let mut connections = 0u64;
    std::thread::sleep(start.saturating_duration_since(Instant::now()));
    loop {
        let pending = unanswered.lock().map_or(0, |pending| pending.len());
        if next >= plan.requests && pending == 0 {
            return Ok(());
        }
        let leader = cluster.leader()?;
        let Ok(mut stream) = TcpStream::connect(leader.tcp)
            .map_err(|error| error.to_string())
            .and_then(|mut stream| log_in(&mut stream, &plan.credentials).map(|()| stream))
        else {
            std::thread::sleep(Duration::from_millis(20));
            continue;
        };
        if connections > 0 {
            tally.reconnects.fetch_add(1, Ordering::Relaxed);
        }
        connections += 1;
        stream.set_nodelay(true).map_err(|error| error.to_string())?;
        let moved = Arc::new(AtomicBool::new(false));
        let reader = {
            let stream = stream.try_clone().map_err(|error| error.to_string())?;
            let (unanswered, tally, moved) =
                (Arc::clone(&unanswered), Arc::clone(tally), Arc::clone(&moved));
            let schedule = plan.schedule;
            std::thread::Builder::new()
                .name(format!("loadgen-follow-{}", plan.index))
                .spawn(move || read_following(stream, &unanswered, &tally, start, schedule, &moved))
                .map_err(|error| error.to_string())?
        };
        // What the last leader left unanswered, first, in order.
        let mut batch = Vec::new();
        if let Ok(mut pending) = unanswered.lock() {
            for (frame, resent) in pending.values_mut() {
                batch.extend_from_slice(frame);
                *resent = true;
            }
            tally.resent.fetch_add(pending.len() as u64, Ordering::Relaxed);
        }
        let mut healthy = stream.write_all(&batch).is_ok();
        while healthy && !moved.load(Ordering::SeqCst) {
            if next >= plan.requests {
                if unanswered.lock().map_or(true, |pending| pending.is_empty()) {
                    break;
                }
                std::thread::sleep(SEND_TICK);
                continue;
            }
            let elapsed_ns = start.elapsed().as_nanos() as f64;
            let due = plan.schedule.due_count(elapsed_ns).min(plan.requests);
            if due <= next {
                let until_due =
                    Duration::from_nanos((plan.schedule.due_ns(next) - elapsed_ns) as u64);
                std::thread::sleep(until_due.clamp(SEND_TICK, Duration::from_millis(10)));
                continue;
            }
            batch.clear();
            let mut one = Vec::new();
            while next < due && batch.len() < 60 * 1024 {
                one.clear();
                frame(plan, &flow.next(next), next, &mut one);
                if let Ok(mut pending) = unanswered.lock() {
                    pending.insert(next, (one.clone(), false));
                }
                batch.extend_from_slice(&one);
                next += 1;
            }
            tally.sent.store(next, Ordering::Relaxed);
            healthy = stream.write_all(&batch).is_ok();
        }
        let _ = stream.shutdown(std::net::Shutdown::Both);
        reader.join().map_err(|_| "a reader thread panicked".to_string())?;
    }
}

/// Reads one connection's answers for `run_following` until it ends, a node answers
/// `not_leader`, or it is silent for `SILENCE_MAX` while answers are awaited; then
/// sets `moved`.
fn read_following(
    stream: TcpStream,
    unanswered: &Unanswered,
    tally: &Tally,
    start: Instant,
    schedule: Schedule,
    moved: &AtomicBool,
) {
    let not_leader = bourse_protocol::binary::code::NOT_LEADER;
    let duplicate = bourse_protocol::binary::reject_code(bourse_core::RejectReason::DuplicateId);
    let _ = stream.set_read_timeout(Some(SILENCE_MAX));
    let mut reader = BufReader::with_capacity(256 * 1024, stream);
    let mut frame = [0u8; FRAME_BYTES_MAX];
    loop {
        let (request, outcome) = match read_frame(&mut reader, &mut frame) {
            Ok(ServerMessage::Accepted { request_id, .. }) => (request_id, Outcome::Ok),
            Ok(ServerMessage::Rejected { code, .. }) if code == not_leader => break,
            Ok(ServerMessage::Rejected { request_id, code, .. }) => {
                (request_id, Outcome::Rejected(code))
            }
            Ok(ServerMessage::Goodbye { .. }) => break,
            Ok(_) => continue, // fills, order updates
            Err(error)
                if matches!(
                    error.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) && unanswered.lock().is_ok_and(|pending| pending.is_empty()) =>
            {
                continue; // Silent with nothing awaited: not a sign of trouble.
            }
            Err(_) => break,
        };
        let Some((_, resent)) =
            unanswered.lock().ok().and_then(|mut pending| pending.remove(&request))
        else {
            continue; // (An answer to a request another connection was answered for.)
        };
        let outcome = match outcome {
            Outcome::Rejected(code) if resent && code == duplicate => {
                tally.placed_before.fetch_add(1, Ordering::Relaxed);
                Outcome::Ok
            }
            other => other,
        };
        tally.count(outcome);
        let latency_us =
            ((start.elapsed().as_nanos() as f64 - schedule.due_ns(request)) / 1_000.0).max(1.0);
        tally.record(latency_us as u64);
    }
    moved.store(true, Ordering::SeqCst);
}
