//! What every protocol's connection shares: the plan, the tally, and the two loops.
//!
//! Open loop: request `i` of a connection is due at `start + i / rate`; the sender (the
//! connection's thread) sends all that are due in one write, and a reader thread takes
//! each answer's latency from its request's due time, not from when it was actually
//! sent. A server (or a client) that falls behind therefore shows as latency, however
//! long the queue: coordinated omission cannot hide it. The sender sleeps at least
//! `SEND_TICK` between writes, so at high rates it wakes at most every `SEND_TICK`, and
//! what that holds back is counted in the latency too.
//!
//! Closed loop: `window` requests in flight, a new one as each answer comes; latency
//! from each request's actual send.
//!
//! A protocol (`tcp`, `rest`, `ws`) only connects, logs in, writes requests
//! (`Requests`) and reads answers (`Answers`).

use std::collections::VecDeque;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use clap::ValueEnum;
use hdrhistogram::Histogram;

use super::admin::Credentials;
use super::flow::{Flow, Profile, Schedule};

/// The order-entry protocol a run drives.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Protocol {
    /// The binary protocol (`docs/protocol-binary.md`), on `--tcp`.
    Tcp,
    /// Signed `POST /v1/orders`, HTTP/1.1 keep-alive and pipelined, on `--http`.
    Rest,
    /// The WebSocket `order` op (`docs/websocket.md`), on `--http`.
    Ws,
    /// Binance's signed `POST /api/v3/order` (`docs/binance.md`), pipelined, on
    /// `--http`; the `cross` flow only.
    Binance,
    /// FIX 4.4 NewOrderSingle, OrderCancelRequest and OrderCancelReplaceRequest
    /// (`docs/fix.md`), on `--fix`.
    Fix,
}

impl Protocol {
    pub fn name(self) -> &'static str {
        match self {
            Protocol::Tcp => "tcp",
            Protocol::Rest => "rest",
            Protocol::Ws => "ws",
            Protocol::Binance => "binance",
            Protocol::Fix => "fix",
        }
    }
}

/// What one connection does.
#[derive(Clone, Debug)]
pub struct ConnectionPlan {
    pub address: SocketAddr,
    pub credentials: Credentials,
    /// The instruments the run trades (a flow's `symbol` indexes them).
    pub symbols: Vec<String>,
    /// When each request is due (open loop).
    pub schedule: Schedule,
    pub requests: u64,
    /// The connection's place among all, to keep client order ids apart.
    pub index: usize,
    pub connections: usize,
    /// Starts every client order id: unique to the run (see `loadgen::id_prefix`).
    pub id_prefix: String,
    pub profile: Profile,
    pub seed: u64,
}

impl ConnectionPlan {
    /// The connection's order flow.
    pub fn flow(&self) -> Flow {
        Flow::new(
            self.profile,
            self.seed,
            self.index,
            self.connections,
            self.symbols.len(),
            self.client_order_id_prefix(),
        )
    }

    /// What the connection's client order ids start with (`{prefix}-{request}`).
    pub fn client_order_id_prefix(&self) -> String {
        format!("{}c{}", self.id_prefix, self.index)
    }

    /// The symbol a flow's request names.
    pub fn symbol(&self, index: usize) -> &str {
        self.symbols.get(index).or(self.symbols.first()).map_or("", String::as_str)
    }
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
    /// Following a cluster's leader (`follow`): connections made again to a new leader,
    /// requests sent again after a failover, and those of them answered `duplicate_id`
    /// (applied the first time; their answer was lost), which count as `ok`.
    pub reconnects: AtomicU64,
    pub resent: AtomicU64,
    pub placed_before: AtomicU64,
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
            reconnects: AtomicU64::new(0),
            resent: AtomicU64::new(0),
            placed_before: AtomicU64::new(0),
        })
    }

    pub fn fail(&self, reason: String) {
        self.failure.lock().unwrap_or_else(|poisoned| poisoned.into_inner()).get_or_insert(reason);
        self.errors.fetch_add(1, Ordering::Relaxed);
    }

    pub(super) fn count(&self, outcome: Outcome) {
        match outcome {
            Outcome::Ok => {
                self.ok.fetch_add(1, Ordering::Relaxed);
            }
            Outcome::Rejected(code) => {
                self.rejected.fetch_add(1, Ordering::Relaxed);
                let mut reasons =
                    self.reasons.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
                reasons[usize::from(code).min(255)] += 1;
            }
        }
    }

    pub(super) fn record(&self, latency_us: u64) {
        let mut latency = self.latency.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        let _ = latency.0.record(latency_us);
        let _ = latency.1.record(latency_us);
    }
}

/// How a request was answered.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    Ok,
    /// Refused, with its code as the binary protocol numbers them (the engine's reasons
    /// 1 to 99, the server's from 100; `bourse_protocol::binary::code`).
    Rejected(u16),
}

/// An answer to request `request` (the connection's requests are numbered from 0).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Answer {
    pub request: u64,
    pub outcome: Outcome,
}

/// The code of a server's error named as REST names it (`busy`, `insufficient_funds`),
/// as the binary protocol numbers it; `UNKNOWN_CODE` for a name it has no code for.
pub fn code_of(name: &str) -> u16 {
    bourse_protocol::binary::server_code(name).unwrap_or(UNKNOWN_CODE)
}

/// What the tally counts an answer under whose code it cannot tell.
pub const UNKNOWN_CODE: u16 = 255;

/// The sending half of a connection.
pub trait Requests: Send {
    /// Sends requests `first`, `first + 1`, ... (fewer than `end`) in one write, as
    /// many as fit its batch; returns the next request to send.
    fn send(&mut self, plan: &ConnectionPlan, first: u64, end: u64) -> Result<u64, String>;
}

/// The reading half of a connection.
pub trait Answers: Send {
    /// The next answer; `None` for a message that answers no request (a fill, an order
    /// update). An error ends the connection (the server closed it, say).
    fn next(&mut self) -> Result<Option<Answer>, String>;
}

/// Runs `plan` (open loop, or closed with `closed: Some(window)`) on a connection that
/// `connect` makes; records a failure in the tally, and marks it done.
pub fn run<S, R>(
    plan: ConnectionPlan,
    tally: Arc<Tally>,
    closed: Option<usize>,
    start: Instant,
    duration: Duration,
    connect: impl FnOnce(&ConnectionPlan) -> Result<(S, R), String>,
) where
    S: Requests,
    R: Answers + 'static,
{
    let outcome = connect(&plan).and_then(|(requests, answers)| match closed {
        Some(window) => run_closed(&plan, &tally, window, start, duration, requests, answers),
        None => run_open(&plan, &tally, start, requests, answers),
    });
    if let Err(error) = outcome {
        tally.fail(error);
    }
    tally.done.store(true, Ordering::SeqCst);
}

fn run_open<S: Requests, R: Answers + 'static>(
    plan: &ConnectionPlan,
    tally: &Arc<Tally>,
    start: Instant,
    mut requests: S,
    answers: R,
) -> Result<(), String> {
    let reader = {
        let (tally, count, schedule) = (Arc::clone(tally), plan.requests, plan.schedule);
        std::thread::Builder::new()
            .name(format!("loadgen-read-{}", plan.index))
            .spawn(move || read_answers(answers, &tally, count, start, schedule))
            .map_err(|error| error.to_string())?
    };
    let sent = send_on_schedule(&mut requests, plan, tally, start);
    let read = reader.join().map_err(|_| "the reader thread panicked".to_string())?;
    sent.and(read)
}

/// The sender's shortest sleep: requests that fall due within it go out in one write.
/// On a machine the server shares, each wake-up of a sender costs a context switch that
/// the server pays for in CPU (at 200,000 orders/s on 2 vCPUs, sleeping 10 µs took
/// 0.51 of a CPU for the load generator and this 0.43, with a lower p99:
/// `docs/benchmarks-history.md`, issue 25's sixth session). It adds at most this much to a
/// request's latency, and that is measured: latency runs from the due time.
pub const SEND_TICK: Duration = Duration::from_micros(100);

fn send_on_schedule(
    requests: &mut impl Requests,
    plan: &ConnectionPlan,
    tally: &Tally,
    start: Instant,
) -> Result<(), String> {
    let mut next = 0u64;
    while next < plan.requests {
        let elapsed_ns = start.elapsed().as_nanos() as f64;
        let due = plan.schedule.due_count(elapsed_ns).min(plan.requests);
        if due <= next {
            // Sleep, never spin: on a machine the server shares, a spinning sender would
            // take the CPU the server needs. Waking late only makes the next write carry
            // more requests; their latency still counts from when each was due.
            let until_due = Duration::from_nanos((plan.schedule.due_ns(next) - elapsed_ns) as u64);
            std::thread::sleep(until_due.max(SEND_TICK));
            continue;
        }
        next = requests.send(plan, next, due)?;
        tally.sent.store(next, Ordering::Relaxed);
    }
    Ok(())
}

/// Reads until every request is answered (or the connection fails: each request left
/// unanswered is an error).
fn read_answers(
    mut answers: impl Answers,
    tally: &Tally,
    requests: u64,
    start: Instant,
    schedule: Schedule,
) -> Result<(), String> {
    let mut answered = 0u64;
    while answered < requests {
        let answer = match answers.next() {
            Ok(Some(answer)) => answer,
            Ok(None) => continue,
            Err(error) => {
                let missing = requests - answered;
                tally.errors.fetch_add(missing, Ordering::Relaxed);
                return Err(format!("{missing} requests unanswered: {error}"));
            }
        };
        tally.count(answer.outcome);
        answered += 1;
        let scheduled_ns = schedule.due_ns(answer.request);
        let latency_us =
            ((start.elapsed().as_nanos() as f64 - scheduled_ns) / 1_000.0).max(1.0) as u64;
        tally.record(latency_us);
    }
    Ok(())
}

/// Closed loop: keeps `window` requests in flight on the connection (a new one as each
/// answer comes) for `duration`, then waits for the last answers. Latency is from each
/// request's actual send: in a closed loop the client waits, so this shows what one
/// client sees, not what an open stream of orders would meet (use the open loop for
/// that).
fn run_closed(
    plan: &ConnectionPlan,
    tally: &Tally,
    window: usize,
    start: Instant,
    duration: Duration,
    mut requests: impl Requests,
    mut answers: impl Answers,
) -> Result<(), String> {
    std::thread::sleep(start.saturating_duration_since(Instant::now()));
    let mut flight = Flight::default();
    flight.send(&mut requests, plan, tally, window.max(1) as u64)?;
    while flight.count > 0 {
        let answer = match answers.next() {
            Ok(Some(answer)) => answer,
            Ok(None) => continue,
            Err(error) => {
                tally.errors.fetch_add(flight.count as u64, Ordering::Relaxed);
                return Err(error);
            }
        };
        let sent = flight.answered(answer.request)?;
        tally.count(answer.outcome);
        tally.record((sent.elapsed().as_micros() as u64).max(1));
        if start.elapsed() < duration {
            flight.send(&mut requests, plan, tally, 1)?;
        }
    }
    Ok(())
}

/// The closed loop's requests in flight.
#[derive(Default)]
struct Flight {
    /// When each request from `first` on was sent (`None` once answered: answers may
    /// come out of order).
    sent_at: VecDeque<Option<Instant>>,
    first: u64,
    next: u64,
    count: usize,
}

impl Flight {
    /// Sends `count` more requests.
    fn send(
        &mut self,
        requests: &mut impl Requests,
        plan: &ConnectionPlan,
        tally: &Tally,
        count: u64,
    ) -> Result<(), String> {
        let end = self.next + count;
        while self.next < end {
            let now = Instant::now();
            let after = requests.send(plan, self.next, end)?;
            self.sent_at.extend((self.next..after).map(|_| Some(now)));
            self.count += (after - self.next) as usize;
            self.next = after;
        }
        tally.sent.store(self.next, Ordering::Relaxed);
        Ok(())
    }

    /// Request `request` is answered: when it was sent.
    fn answered(&mut self, request: u64) -> Result<Instant, String> {
        let sent = request
            .checked_sub(self.first)
            .and_then(|offset| self.sent_at.get_mut(usize::try_from(offset).ok()?))
            .and_then(Option::take)
            .ok_or_else(|| format!("an answer to request {request}, which is not in flight"))?;
        while let Some(None) = self.sent_at.front() {
            self.sent_at.pop_front();
            self.first += 1;
        }
        self.count -= 1;
        Ok(sent)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Records each write as the range of requests it carried.
    struct Writes(Vec<(u64, u64)>);

    impl Requests for Writes {
        fn send(&mut self, _plan: &ConnectionPlan, first: u64, end: u64) -> Result<u64, String> {
            self.0.push((first, end));
            Ok(end)
        }
    }

    fn plan(rate: f64, requests: u64) -> ConnectionPlan {
        ConnectionPlan {
            address: SocketAddr::from(([127, 0, 0, 1], 9)),
            credentials: Credentials { key: "key".into(), secret: "secret".into() },
            symbols: vec!["BTC-USD".into()],
            schedule: Schedule { rate, burst: None },
            requests,
            index: 0,
            connections: 1,
            id_prefix: "t".into(),
            profile: Profile::Cross,
            seed: 1,
        }
    }

    #[test]
    fn the_open_loop_sends_every_request_once_in_order_waking_at_most_once_a_tick() {
        // 4,000 requests due over 4 ms: one a microsecond, far finer than the tick.
        let plan = plan(1_000_000.0, 4_000);
        let tally = Tally::new().unwrap();
        let mut writes = Writes(Vec::new());
        let start = Instant::now();
        send_on_schedule(&mut writes, &plan, &tally, start).unwrap();
        let elapsed = start.elapsed();

        let mut next = 0;
        for &(first, end) in &writes.0 {
            assert_eq!(first, next, "each write starts where the last one ended");
            assert!(end > first, "no empty write");
            next = end;
        }
        assert_eq!(next, 4_000, "every request sent");
        assert_eq!(tally.sent.load(Ordering::Relaxed), 4_000);
        // Every write after the first follows a sleep of at least a tick.
        let ticks = (elapsed.as_nanos() / SEND_TICK.as_nanos()) as usize;
        assert!(writes.0.len() <= ticks + 1, "{} writes in {elapsed:?}", writes.0.len());
    }
}
