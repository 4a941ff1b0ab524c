//! Open-loop order entry over the binary protocol: each connection sends request `i`
//! at its scheduled time `start + i / rate` (all that are due go out in one write), and
//! a reader thread takes each answer's latency from that scheduled time, not from when
//! it was actually sent. A server (or a client) that falls behind therefore shows as
//! latency, however long the queue: coordinated omission cannot hide it.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bourse_server::keys::sign;
use bourse_server::tcp::wire::{self, client, server, FrameWriter};
use hdrhistogram::Histogram;

use super::admin::Credentials;

/// What one connection does.
#[derive(Clone, Debug)]
pub struct ConnectionPlan {
    pub address: SocketAddr,
    pub credentials: Credentials,
    pub symbol: String,
    /// Requests per second on this connection.
    pub rate: f64,
    pub requests: u64,
    /// The connection's place among all, to keep client order ids apart.
    pub index: usize,
    /// Starts every client order id: unique to the run (see `loadgen::id_prefix`).
    pub id_prefix: String,
}

/// Counts and latencies of one connection, shared with the progress line.
pub struct Tally {
    pub sent: AtomicU64,
    pub ok: AtomicU64,
    pub rejected: AtomicU64,
    pub errors: AtomicU64,
    /// Rejections by reason code (index = code, up to 255).
    pub reasons: Mutex<Vec<u64>>,
    /// Latency from the scheduled send time, in µs: the whole run, and since the
    /// progress line last took it.
    pub latency: Mutex<(Histogram<u64>, Histogram<u64>)>,
    pub done: AtomicBool,
    pub failure: Mutex<Option<String>>,
}

impl Tally {
    pub fn new() -> Result<Tally, String> {
        let histogram = || {
            Histogram::<u64>::new_with_bounds(1, 3_600_000_000, 3)
                .map_err(|error| error.to_string())
        };
        Ok(Tally {
            sent: AtomicU64::new(0),
            ok: AtomicU64::new(0),
            rejected: AtomicU64::new(0),
            errors: AtomicU64::new(0),
            reasons: Mutex::new(vec![0; 256]),
            latency: Mutex::new((histogram()?, histogram()?)),
            done: AtomicBool::new(false),
            failure: Mutex::new(None),
        })
    }

    fn fail(&self, reason: String) {
        self.failure.lock().unwrap_or_else(|poisoned| poisoned.into_inner()).get_or_insert(reason);
        self.errors.fetch_add(1, Ordering::Relaxed);
    }
}

/// Connects, logs in, and runs the plan: a sender (this thread) and a reader.
pub fn run(plan: ConnectionPlan, tally: Arc<Tally>, start: Instant) {
    if let Err(error) = drive(&plan, &tally, start) {
        tally.fail(error);
    }
    tally.done.store(true, Ordering::SeqCst);
}

fn drive(plan: &ConnectionPlan, tally: &Arc<Tally>, start: Instant) -> Result<(), String> {
    let mut stream =
        TcpStream::connect(plan.address).map_err(|error| format!("connect: {error}"))?;
    stream.set_nodelay(true).map_err(|error| error.to_string())?;
    log_in(&mut stream, &plan.credentials)?;
    let reader = stream.try_clone().map_err(|error| error.to_string())?;
    let period_ns = 1e9 / plan.rate;
    let answers = {
        let (tally, requests) = (Arc::clone(tally), plan.requests);
        std::thread::Builder::new()
            .name(format!("loadgen-read-{}", plan.index))
            .spawn(move || read_answers(reader, &tally, requests, start, period_ns))
            .map_err(|error| error.to_string())?
    };
    send_on_schedule(&mut stream, plan, tally, start, period_ns)?;
    answers.join().map_err(|_| "the reader thread panicked".to_string())?
}

fn log_in(stream: &mut TcpStream, credentials: &Credentials) -> Result<(), String> {
    let timestamp_ms = bourse_server::now_ms();
    let message = format!("{timestamp_ms}\nGET\n{}\n", bourse_server::tcp::LOGIN_PATH);
    let signature = hex::decode(sign(&credentials.secret, message.as_bytes()))
        .map_err(|error| error.to_string())?;
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

/// A new order: buy and sell alternate at one price with `stp` none, so every sell
/// meets the buy before it and the book stays a handful of orders deep.
fn new_order(plan: &ConnectionPlan, request_id: u64, out: &mut Vec<u8>) {
    let side = if request_id.is_multiple_of(2) { 1 } else { 2 };
    let client_order_id = format!("{}c{}-{request_id}", plan.id_prefix, plan.index);
    let frame = FrameWriter::new(client::NEW_ORDER)
        .u64(request_id)
        .text(&client_order_id, wire::CLIENT_ORDER_ID_BYTES)
        .text(&plan.symbol, wire::SYMBOL_BYTES)
        .u8(side)
        .u8(1) // limit
        .u8(1) // gtc
        .u8(0)
        .u8(4) // stp none
        .u8(2) // price scale
        .u8(4) // qty scale
        .u8(0)
        .i64(6_000_000) // 60,000.00
        .i64(1) // 0.0001
        .finish();
    out.extend_from_slice(&frame);
}

fn send_on_schedule(
    stream: &mut TcpStream,
    plan: &ConnectionPlan,
    tally: &Tally,
    start: Instant,
    period_ns: f64,
) -> Result<(), String> {
    let mut next = 0u64;
    let mut batch = Vec::with_capacity(64 * 1024);
    while next < plan.requests {
        let elapsed_ns = start.elapsed().as_nanos() as f64;
        let due = ((elapsed_ns / period_ns).floor() as u64 + 1).min(plan.requests);
        if due <= next {
            // Sleep, never spin: on a machine the server shares, a spinning sender would
            // take the CPU the server needs. Waking late only makes the next write carry
            // more orders; their latency still counts from when each was due.
            let wait_ns = (next as f64 * period_ns - elapsed_ns).max(10_000.0);
            std::thread::sleep(Duration::from_nanos(wait_ns as u64));
            continue;
        }
        batch.clear();
        while next < due && batch.len() < 60 * 1024 {
            new_order(plan, next, &mut batch);
            next += 1;
        }
        stream.write_all(&batch).map_err(|error| format!("send: {error}"))?;
        tally.sent.store(next, Ordering::Relaxed);
    }
    Ok(())
}

/// Reads until every request is answered (or the server closes, or 10 s pass with
/// nothing after the last send).
fn read_answers(
    stream: TcpStream,
    tally: &Tally,
    requests: u64,
    start: Instant,
    period_ns: f64,
) -> Result<(), String> {
    stream.set_read_timeout(Some(Duration::from_secs(10))).map_err(|error| error.to_string())?;
    let mut answered = 0u64;
    let mut reader = std::io::BufReader::with_capacity(256 * 1024, stream);
    while answered < requests {
        let (kind, body) = match read_frame(&mut reader) {
            Ok(frame) => frame,
            Err(error) => {
                let missing = requests - answered;
                tally.errors.fetch_add(missing, Ordering::Relaxed);
                return Err(format!("{missing} requests unanswered: {error}"));
            }
        };
        let request_id = match kind {
            server::ACCEPTED => {
                tally.ok.fetch_add(1, Ordering::Relaxed);
                u64_at(&body, 0)
            }
            server::REJECTED => {
                tally.rejected.fetch_add(1, Ordering::Relaxed);
                let code = body.get(8..10).map_or(0, |code| u16::from_le_bytes([code[0], code[1]]));
                let code = usize::from(code);
                let mut reasons =
                    tally.reasons.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
                reasons[code.min(255)] += 1;
                u64_at(&body, 0)
            }
            server::GOODBYE => {
                let missing = requests - answered;
                tally.errors.fetch_add(missing, Ordering::Relaxed);
                let reason = text_of(body.get(2..).unwrap_or(&[]));
                return Err(format!("the server closed the connection: {reason}"));
            }
            _ => continue, // fills and order updates
        };
        answered += 1;
        let scheduled_ns = request_id as f64 * period_ns;
        let latency_us =
            ((start.elapsed().as_nanos() as f64 - scheduled_ns) / 1_000.0).max(1.0) as u64;
        let mut latency = tally.latency.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        let _ = latency.0.record(latency_us);
        let _ = latency.1.record(latency_us);
    }
    Ok(())
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

/// Closed loop: keeps `window` orders in flight on the connection (a new one as each
/// answer comes) for `duration`, then waits for the last answers. Latency is from each
/// order's actual send: in a closed loop the client waits, so this shows what one
/// client sees, not what an open stream of orders would meet (use the open loop for
/// that).
pub fn run_closed(
    plan: ConnectionPlan,
    tally: Arc<Tally>,
    window: usize,
    start: Instant,
    duration: Duration,
) {
    if let Err(error) = drive_closed(&plan, &tally, window, start, duration) {
        tally.fail(error);
    }
    tally.done.store(true, Ordering::SeqCst);
}

fn drive_closed(
    plan: &ConnectionPlan,
    tally: &Tally,
    window: usize,
    start: Instant,
    duration: Duration,
) -> Result<(), String> {
    let mut stream =
        TcpStream::connect(plan.address).map_err(|error| format!("connect: {error}"))?;
    stream.set_nodelay(true).map_err(|error| error.to_string())?;
    log_in(&mut stream, &plan.credentials)?;
    stream.set_read_timeout(Some(Duration::from_secs(10))).map_err(|error| error.to_string())?;
    let mut reader = std::io::BufReader::with_capacity(
        256 * 1024,
        stream.try_clone().map_err(|e| e.to_string())?,
    );
    std::thread::sleep(start.saturating_duration_since(Instant::now()));
    let started = start;
    let mut in_flight: std::collections::VecDeque<Instant> =
        std::collections::VecDeque::with_capacity(window);
    let mut next = 0u64;
    let mut batch = Vec::with_capacity(window * 90);
    let mut send =
        |count: usize, next: &mut u64, in_flight: &mut std::collections::VecDeque<Instant>| {
            batch.clear();
            for _ in 0..count {
                new_order(plan, *next, &mut batch);
                *next += 1;
                in_flight.push_back(Instant::now());
            }
            stream.write_all(&batch).map_err(|error| format!("send: {error}"))
        };
    send(window.max(1), &mut next, &mut in_flight)?;
    tally.sent.store(next, Ordering::Relaxed);
    while let Some(&sent_at) = in_flight.front() {
        let (kind, body) = read_frame(&mut reader)?;
        match kind {
            server::ACCEPTED => tally.ok.fetch_add(1, Ordering::Relaxed),
            server::REJECTED => {
                let code = body.get(8..10).map_or(0, |code| u16::from_le_bytes([code[0], code[1]]));
                let mut reasons =
                    tally.reasons.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
                reasons[usize::from(code).min(255)] += 1;
                tally.rejected.fetch_add(1, Ordering::Relaxed)
            }
            server::GOODBYE => {
                let reason = text_of(body.get(2..).unwrap_or(&[]));
                tally.errors.fetch_add(in_flight.len() as u64, Ordering::Relaxed);
                return Err(format!("the server closed the connection: {reason}"));
            }
            _ => continue,
        };
        in_flight.pop_front();
        let latency_us = (sent_at.elapsed().as_micros() as u64).max(1);
        {
            let mut latency = tally.latency.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
            let _ = latency.0.record(latency_us);
            let _ = latency.1.record(latency_us);
        }
        if started.elapsed() < duration {
            send(1, &mut next, &mut in_flight)?;
            tally.sent.store(next, Ordering::Relaxed);
        }
    }
    Ok(())
}
