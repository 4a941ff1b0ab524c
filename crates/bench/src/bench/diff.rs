//! `bourse bench diff`: quote fan-out over the DIFF protocol (`docs/diff.md`) on a
//! running server. N DIFF sessions at `/ws/diff` each subscribe to the quotes of the
//! same 10 futures contracts and read them as tqsdk does: `peek_message`, one
//! `rtn_data`, peek again. Two accounts cross 1 lot at a time through REST at a steady
//! rate, round robin over the contracts (a resting `open` order and an `open` taker,
//! then a resting `close` and a `close` taker at the same price, so positions stay at
//! one lot).
//!
//! When each trade happened: one ordinary WebSocket (`/v1/ws`) follows every contract's
//! `trades` channel and keeps each trade's `released_ns` (the engine's release; its
//! clock is this host's) by contract and place among the contract's trades since the
//! bench began. Which trade a quote patch shows: its `volume` (lots traded today,
//! cumulative; every trade is one lot) less the contract's volume before trading. Each
//! trade a session reads in a patch of its own is timed from its release to the
//! arrival of that `rtn_data`, into one HDR histogram. A trade the volume jumped past
//! (merged into a later patch while the session had not peeked yet, or released in one
//! batch with the next) is counted as merged; a trade the session's volume never
//! reached, as unseen; a volume no recorded trade explains, as unexplained; sessions
//! the server closed, as closed. Nothing is hidden: every session's count of trades
//! shown is reported against the trades that happened.

use std::borrow::Cow;
use std::collections::HashMap;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use clap::Args;
use futures_util::{SinkExt, StreamExt};
use hdrhistogram::Histogram;
use serde::Deserialize;
use serde_json::Value;
use tokio_tungstenite::tungstenite::Message;

use crate::loadgen::admin::{self, Credentials};

/// Contracts every session follows.
const CONTRACTS: usize = 10;
/// The contracts' settle asset.
const SETTLE: &str = "CNY";
/// Every trade's price.
const PRICE: &str = "5000";
/// A session's request for data.
const PEEK: &str = r#"{"aid":"peek_message"}"#;
/// Close reasons kept for the report.
const REASONS_KEPT: usize = 5;

#[derive(Args)]
pub struct DiffArgs {
    /// The server's REST, WebSocket and DIFF address.
    #[arg(long, default_value = "127.0.0.1:8080")]
    http: SocketAddr,
    /// The admin key file (`DATA_DIR/server/admin.key`).
    #[arg(long, default_value = "data/server/admin.key")]
    admin_key_file: PathBuf,
    /// DIFF sessions, each subscribed to the quotes of all 10 contracts.
    #[arg(long, default_value_t = 1_000)]
    sessions: usize,
    /// Trades made per second while measuring, round robin over the contracts.
    #[arg(long, default_value_t = 20)]
    trades_per_sec: u64,
    /// Seconds of trading.
    #[arg(long, default_value_t = 10)]
    duration: u64,
    /// Seconds to wait for every session's first quotes before trading.
    #[arg(long, default_value_t = 60)]
    ready_timeout: u64,
    #[arg(long)]
    json: bool,
}

/// A quote patch with a `volume`, as a session read it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Arrival {
    /// The contract's place in the list.
    contract: usize,
    /// Lots traded today, as the patch says.
    volume: u64,
    /// When the `rtn_data` carrying it was read (ns since the epoch).
    arrival_ns: u64,
}

/// What the sessions and the trades follower saw, shared by their tasks (on one
/// runtime thread: the locks are never contended).
struct Seen {
    contracts: Vec<String>,
    /// Each session's arrivals, in the order it read them.
    arrivals: Mutex<Vec<Vec<Arrival>>>,
    /// Each contract's trades' `released_ns`, in the order the trades channel gave them.
    releases: Mutex<Vec<Vec<u64>>>,
    /// Sessions that have read a volume for every contract.
    ready: AtomicU64,
    closed: AtomicU64,
    /// The first few reasons sessions were closed for.
    reasons: Mutex<Vec<String>>,
    rtn_data: AtomicU64,
    /// Quote patches without `volume` (a book change alone, or a gateway that left it out).
    without_volume: AtomicU64,
    /// Messages that were not JSON.
    unreadable: AtomicU64,
    /// 1 once the trades follower's connection ended.
    follower_closed: AtomicU64,
}

impl Seen {
    fn close(&self, reason: String) {
        self.closed.fetch_add(1, Ordering::Relaxed);
        if let Ok(mut reasons) = self.reasons.lock() {
            if reasons.len() < REASONS_KEPT {
                reasons.push(reason);
            }
        }
    }
}

pub fn run(args: &DiffArgs) -> Result<(), String> {
    let admin = Credentials::from_file(&args.admin_key_file)?;
    let contracts: Vec<String> = (b'a'..)
        .take(CONTRACTS)
        .map(|letter| format!("SHFE.bd{}{}", std::process::id(), letter as char))
        .collect();
    let keys = admin::set_up_futures(
        args.http,
        &admin,
        SETTLE,
        &contracts,
        &["diff-a".to_string(), "diff-b".to_string()],
    )?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .map_err(|error| error.to_string())?;
    let seen = Arc::new(Seen {
        contracts: contracts.clone(),
        arrivals: Mutex::new(Vec::with_capacity(args.sessions)),
        releases: Mutex::new(vec![Vec::new(); CONTRACTS]),
        ready: AtomicU64::new(0),
        closed: AtomicU64::new(0),
        reasons: Mutex::new(Vec::new()),
        rtn_data: AtomicU64::new(0),
        without_volume: AtomicU64::new(0),
        unreadable: AtomicU64::new(0),
        follower_closed: AtomicU64::new(0),
    });
    runtime.block_on(follow_trades(args.http, Arc::clone(&seen)))?;
    let opening = Instant::now();
    let connected = runtime.block_on(connect_all(args, Arc::clone(&seen)))?;
    // Every session's first quotes (the volumes before trading) before the first trade.
    let waited = Instant::now();
    while (seen.ready.load(Ordering::Relaxed) as usize)
        < connected - seen.closed.load(Ordering::Relaxed) as usize
        && waited.elapsed() < Duration::from_secs(args.ready_timeout)
    {
        std::thread::sleep(Duration::from_millis(50));
    }
    let ready = seen.ready.load(Ordering::Relaxed);
    let ready_ms = opening.elapsed().as_millis() as u64;
    let cpu_before = cpu_seconds();
    eprintln!(
        "bench diff: {connected} DIFF sessions ({ready} with their first quotes) on {}..{}; trading {} per second for {} s",
        contracts[0],
        contracts[CONTRACTS - 1],
        args.trades_per_sec,
        args.duration
    );
    let (made, refused, refusal) = trade(args, &contracts, &keys)?;
    // The last deliveries.
    std::thread::sleep(Duration::from_secs(2));
    let client_cpu_s = cpu_seconds() - cpu_before;
    let arrivals = std::mem::take(&mut *seen.arrivals.lock().map_err(|_| "a session panicked")?);
    let releases = seen.releases.lock().map_err(|_| "the trades follower panicked")?.clone();
    let reasons = seen.reasons.lock().map_err(|_| "a session panicked")?.clone();
    runtime.shutdown_timeout(Duration::from_secs(1));

    let base = bases(&arrivals);
    let mut latency = histogram()?;
    let mut visible = histogram()?;
    // Each trade's earliest and latest delivery over the sessions that showed it.
    let mut spread: Vec<Vec<(u64, u64)>> =
        releases.iter().map(|trades| vec![(u64::MAX, 0); trades.len()]).collect();
    let mut total = Tally::default();
    let mut shown_per_session = Vec::with_capacity(arrivals.len());
    for session in &arrivals {
        let tally = tally_session(
            session,
            &base,
            &releases,
            |contract, trade, ns| {
                let _ = latency.record(ns.max(1_000));
                if let Some((first, last)) =
                    spread.get_mut(contract).and_then(|trades| trades.get_mut(trade))
                {
                    (*first, *last) = ((*first).min(ns), (*last).max(ns));
                }
            },
            |ns| {
                let _ = visible.record(ns.max(1_000));
            },
        );
        shown_per_session.push(tally.shown);
        total.add(&tally);
    }
    shown_per_session.sort_unstable();
    let (mut first, mut last) = (histogram()?, histogram()?);
    for &(earliest, latest) in spread.iter().flatten().filter(|(earliest, _)| *earliest != u64::MAX)
    {
        let _ = first.record(earliest.max(1_000));
        let _ = last.record(latest.max(1_000));
    }
    let recorded: u64 = releases.iter().map(|trades| trades.len() as u64).sum();
    let closed = seen.closed.load(Ordering::Relaxed);
    let us = |histogram: &Histogram<u64>, quantile: f64| {
        histogram.value_at_quantile(quantile) as f64 / 1_000.0
    };
    let result = serde_json::json!({
        "sessions": connected,
        "sessions_ready": ready,
        "ready_ms": ready_ms,
        "client_cpu_s": client_cpu_s,
        "contracts": CONTRACTS,
        "trades": made,
        "trades_refused": refused,
        "trades_recorded": recorded,
        "trades_follower_closed": seen.follower_closed.load(Ordering::Relaxed) > 0,
        "rtn_data": seen.rtn_data.load(Ordering::Relaxed),
        "shown": total.shown,
        "shown_expected": recorded * connected as u64,
        "shown_per_session_min": shown_per_session.first().copied().unwrap_or(0),
        "shown_per_session_median": median(&shown_per_session),
        "shown_per_session_max": shown_per_session.last().copied().unwrap_or(0),
        "merged": total.merged,
        "unseen": total.unseen,
        "unexplained": total.unexplained,
        "patches_without_volume": seen.without_volume.load(Ordering::Relaxed),
        "messages_unreadable": seen.unreadable.load(Ordering::Relaxed),
        "sessions_closed": closed,
        "close_reasons": reasons,
        "p50_us": us(&latency, 0.5), "p90_us": us(&latency, 0.9), "p99_us": us(&latency, 0.99),
        "p999_us": us(&latency, 0.999), "max_us": latency.max() as f64 / 1_000.0,
        "visible_p50_us": us(&visible, 0.5), "visible_p99_us": us(&visible, 0.99),
        "visible_max_us": visible.max() as f64 / 1_000.0,
        "first_session_p50_us": us(&first, 0.5), "first_session_max_us": first.max() as f64 / 1_000.0,
        "last_session_p50_us": us(&last, 0.5), "last_session_max_us": last.max() as f64 / 1_000.0,
    });
    if args.json {
        println!("{result}");
    } else {
        println!(
            "bench diff: {made} trades ({recorded} on the trades channel, {refused} refused) on {CONTRACTS} contracts to {connected} DIFF sessions ({ready} ready before trading, {ready_ms} ms after the first connection); this process's CPU while trading and 2 s after: {client_cpu_s:.2} s"
        );
        println!(
            "bench diff: trades shown in a patch of their own: {} of {} (per session min {}, median {}); {} merged, {} unseen, {} unexplained; {} sessions closed, {} quote patches without volume",
            total.shown,
            recorded * connected as u64,
            result["shown_per_session_min"],
            result["shown_per_session_median"],
            total.merged,
            total.unseen,
            total.unexplained,
            closed,
            result["patches_without_volume"],
        );
        if !reasons.is_empty() {
            println!("bench diff: closed: {}", reasons.join("; "));
        }
        if let Some(refusal) = refusal {
            println!("bench diff: first refused trade: {refusal}");
        }
        println!(
            "bench diff: quote patch from release, µs: p50 {:.0} p90 {:.0} p99 {:.0} p99.9 {:.0} max {:.0}",
            us(&latency, 0.5),
            us(&latency, 0.9),
            us(&latency, 0.99),
            us(&latency, 0.999),
            latency.max() as f64 / 1_000.0
        );
        println!(
            "bench diff: every trade until a patch showed it (merged ones included), µs: p50 {:.0} p99 {:.0} max {:.0}",
            us(&visible, 0.5),
            us(&visible, 0.99),
            visible.max() as f64 / 1_000.0
        );
        println!(
            "bench diff: each trade's first session, µs: p50 {:.0} max {:.0}; its last session: p50 {:.0} max {:.0}",
            us(&first, 0.5),
            first.max() as f64 / 1_000.0,
            us(&last, 0.5),
            last.max() as f64 / 1_000.0
        );
    }
    Ok(())
}

fn histogram() -> Result<Histogram<u64>, String> {
    Histogram::new_with_bounds(1_000, 60_000_000_000, 3).map_err(|error| error.to_string())
}

/// Makes the trades from this thread, each a resting order by one account and a taker
/// by the other through REST: on each contract in turn `sell open` then `buy open`, the
/// next time `buy close` then `sell close`. Returns the trades made, how many were
/// refused or did not fill, and the first such answer.
fn trade(
    args: &DiffArgs,
    contracts: &[String],
    keys: &[Credentials],
) -> Result<(u64, u64, Option<String>), String> {
    let [maker, taker] = keys else { return Err("two accounts' keys expected".into()) };
    let period = Duration::from_secs_f64(1.0 / args.trades_per_sec.max(1) as f64);
    let started = Instant::now();
    let (mut made, mut refused, mut refusal) = (0u64, 0u64, None);
    while started.elapsed() < Duration::from_secs(args.duration) {
        let due = started + period.mul_f64(made as f64);
        if let Some(wait) = due.checked_duration_since(Instant::now()) {
            std::thread::sleep(wait);
        }
        let symbol = &contracts[made as usize % CONTRACTS];
        let opening = (made / CONTRACTS as u64).is_multiple_of(2);
        let (resting, taking, offset) =
            if opening { ("sell", "buy", "open") } else { ("buy", "sell", "close") };
        let body = |side: &str| {
            format!(
                r#"{{"symbol":"{symbol}","side":"{side}","type":"limit","price":"{PRICE}","qty":"1","offset":"{offset}","stp":"none"}}"#
            )
        };
        let rests = admin::request(args.http, maker, "POST", "/v1/orders", &body(resting))?;
        let takes = admin::request(args.http, taker, "POST", "/v1/orders", &body(taking))?;
        if rests.0 != 200 || takes.0 != 200 || takes.1["order"]["status"] != "filled" {
            refused += 1;
            refusal.get_or_insert_with(|| {
                format!("{symbol}: resting {} {}, taking {} {}", rests.0, rests.1, takes.0, takes.1)
            });
        }
        made += 1;
    }
    Ok((made, refused, refusal))
}

/// Subscribes one WebSocket to every contract's trades and leaves it recording their
/// `released_ns` in its own task.
async fn follow_trades(http: SocketAddr, seen: Arc<Seen>) -> Result<(), String> {
    let url = format!("ws://{http}/v1/ws");
    let (mut socket, _) =
        tokio_tungstenite::connect_async(&url).await.map_err(|error| error.to_string())?;
    for symbol in &seen.contracts {
        let subscribe =
            serde_json::json!({ "op": "subscribe", "channel": "trades", "symbol": symbol });
        socket
            .send(Message::Text(subscribe.to_string().into()))
            .await
            .map_err(|error| error.to_string())?;
    }
    let mut acknowledged = 0;
    while acknowledged < CONTRACTS {
        match socket.next().await {
            Some(Ok(Message::Text(text))) if text.contains("\"subscribed\"") => acknowledged += 1,
            Some(Ok(Message::Text(text))) => return Err(format!("trades subscription: {text}")),
            Some(Ok(_)) => {}
            other => return Err(format!("trades subscription: {other:?}")),
        }
    }
    tokio::spawn(async move {
        while let Some(Ok(message)) = socket.next().await {
            let Message::Text(text) = message else { continue };
            let Ok(message) = serde_json::from_str::<Value>(text.as_str()) else {
                seen.unreadable.fetch_add(1, Ordering::Relaxed);
                continue;
            };
            if message["channel"] != "trades" {
                continue;
            }
            let contract = message["symbol"]
                .as_str()
                .and_then(|symbol| seen.contracts.iter().position(|known| known == symbol));
            let released = message["data"]["released_ns"].as_u64();
            if let (Some(contract), Some(released), Ok(mut releases)) =
                (contract, released, seen.releases.lock())
            {
                releases[contract].push(released);
            }
        }
        seen.follower_closed.store(1, Ordering::Relaxed);
    });
    Ok(())
}

/// Opens the sessions (a few hundred handshakes at a time), each subscribed to every
/// contract's quotes with its first peek sent, and leaves each reading in its own task;
/// returns how many there are.
async fn connect_all(args: &DiffArgs, seen: Arc<Seen>) -> Result<usize, String> {
    let url = format!("ws://{}/ws/diff", args.http);
    let subscribe =
        serde_json::json!({ "aid": "subscribe_quote", "ins_list": seen.contracts.join(",") })
            .to_string();
    let open = |_| {
        let (url, subscribe) = (url.clone(), subscribe.clone());
        async move {
            // (No Nagle: a session writes a peek after every answer, and tqsdk's asyncio
            // sets TCP_NODELAY on its connections too.)
            let mut socket = super::fanout::open_websocket(&url, true).await?;
            for pack in [subscribe, PEEK.to_string()] {
                socket.send(Message::Text(pack.into())).await.map_err(|error| error.to_string())?;
            }
            Ok(socket)
        }
    };
    super::fanout::connect_many(args.sessions, open, |socket| {
        let session = {
            let mut arrivals = seen.arrivals.lock().map_err(|_| "a session panicked")?;
            arrivals.push(Vec::new());
            arrivals.len() - 1
        };
        tokio::spawn(read_quotes(socket, session, Arc::clone(&seen)));
        Ok(())
    })
    .await
}

use super::fanout::Socket;

/// A session as tqsdk runs one: reads an `rtn_data`, records the quote volumes in it,
/// peeks again.
async fn read_quotes(mut socket: Socket, session: usize, seen: Arc<Seen>) {
    let mut has_volume = [false; CONTRACTS];
    let mut ready = false;
    while let Some(message) = socket.next().await {
        let text = match message {
            Ok(Message::Text(text)) => text,
            Ok(Message::Close(frame)) => {
                seen.close(frame.map_or("closed".into(), |frame| frame.reason.to_string()));
                return;
            }
            Ok(_) => continue,
            Err(error) => {
                seen.close(error.to_string());
                return;
            }
        };
        let arrival_ns = now_ns();
        let (volumes, without) = match read_pack(text.as_str(), &seen.contracts) {
            Read::Data { volumes, without } => (volumes, without),
            // (A notify: not an answer to the peek.)
            Read::Other => continue,
            Read::Unreadable => {
                // Counted; and a peek, so that the session goes on (one peek more than
                // needed is harmless: the server only notes that the client waits).
                seen.unreadable.fetch_add(1, Ordering::Relaxed);
                if let Err(error) = socket.send(Message::Text(PEEK.into())).await {
                    seen.close(error.to_string());
                    return;
                }
                continue;
            }
        };
        seen.rtn_data.fetch_add(1, Ordering::Relaxed);
        seen.without_volume.fetch_add(without, Ordering::Relaxed);
        if let Ok(mut arrivals) = seen.arrivals.lock() {
            arrivals[session].extend(volumes.iter().map(|&(contract, volume)| Arrival {
                contract,
                volume,
                arrival_ns,
            }));
        }
        for (contract, _) in volumes {
            has_volume[contract] = true;
        }
        if !ready && has_volume.iter().all(|&has| has) {
            ready = true;
            seen.ready.fetch_add(1, Ordering::Relaxed);
        }
        if let Err(error) = socket.send(Message::Text(PEEK.into())).await {
            seen.close(error.to_string());
            return;
        }
    }
    seen.close("the connection ended".into());
}

/// The parts of a DIFF pack a session reads; serde skips the rest without building it.
#[derive(Deserialize)]
struct Pack<'a> {
    #[serde(borrow, default)]
    aid: Cow<'a, str>,
    #[serde(borrow, default)]
    data: Vec<Option<Patch<'a>>>,
}

#[derive(Deserialize)]
struct Patch<'a> {
    #[serde(borrow, default)]
    quotes: Option<HashMap<Cow<'a, str>, Option<QuotePatch>>>,
}

#[derive(Deserialize)]
struct QuotePatch {
    #[serde(default)]
    volume: Option<Value>,
}

/// What a session made of a message.
#[derive(Debug, PartialEq, Eq)]
enum Read {
    /// An `rtn_data`: the `volume` of each followed contract's quote in its patches, in
    /// the order they come, as (place in `contracts`, volume); and how many followed
    /// quotes' patches had no volume.
    Data { volumes: Vec<(usize, u64)>, without: u64 },
    /// Another pack (a `notify`).
    Other,
    /// Not a DIFF pack.
    Unreadable,
}

fn read_pack(text: &str, contracts: &[String]) -> Read {
    let Ok(pack) = serde_json::from_str::<Pack<'_>>(text) else { return Read::Unreadable };
    if pack.aid != "rtn_data" {
        return Read::Other;
    }
    let (mut volumes, mut without) = (Vec::new(), 0);
    for quotes in pack.data.iter().flatten().filter_map(|patch| patch.quotes.as_ref()) {
        for (symbol, quote) in quotes {
            let Some(contract) = contracts.iter().position(|known| known == symbol) else {
                continue;
            };
            let volume = quote.as_ref().and_then(|quote| quote.volume.as_ref());
            let lots = volume.and_then(|volume| {
                volume.as_u64().or_else(|| {
                    volume
                        .as_f64()
                        .filter(|lots| *lots >= 0.0 && lots.fract() == 0.0)
                        .map(|lots| lots as u64)
                })
            });
            match lots {
                Some(lots) => volumes.push((contract, lots)),
                None => without += 1,
            }
        }
    }
    Read::Data { volumes, without }
}

/// Each contract's volume before trading: the lowest first volume any session read
/// (every session's first, when all were ready before the first trade).
fn bases(sessions: &[Vec<Arrival>]) -> Vec<u64> {
    let mut base = [u64::MAX; CONTRACTS];
    for session in sessions {
        let mut first = [true; CONTRACTS];
        for arrival in session {
            if std::mem::take(&mut first[arrival.contract]) {
                base[arrival.contract] = base[arrival.contract].min(arrival.volume);
            }
        }
    }
    base.iter().map(|&volume| if volume == u64::MAX { 0 } else { volume }).collect()
}

/// What one session saw of the trades.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
struct Tally {
    /// Trades shown in a patch of their own (the volume reached exactly them).
    shown: u64,
    /// Trades the volume jumped past to a later one.
    merged: u64,
    /// Trades past the last volume the session read.
    unseen: u64,
    /// Volumes no recorded trade explains (beyond the trades recorded, or lower than
    /// the session's previous one).
    unexplained: u64,
}

impl Tally {
    fn add(&mut self, other: &Tally) {
        self.shown += other.shown;
        self.merged += other.merged;
        self.unseen += other.unseen;
        self.unexplained += other.unexplained;
    }
}

/// Goes through one session's arrivals in order: a volume `v` of contract `c` shows
/// the trade `v - base[c]` (counted from 1) of `releases[c]`. Calls `shown` with each
/// trade shown on its own (contract, place from 0 in `releases[c]`, latency: arrival
/// less release, ns), and `visible` with the latency of every trade a patch revealed,
/// merged ones included.
fn tally_session(
    arrivals: &[Arrival],
    base: &[u64],
    releases: &[Vec<u64>],
    mut shown: impl FnMut(usize, usize, u64),
    mut visible: impl FnMut(u64),
) -> Tally {
    let mut tally = Tally::default();
    let mut level: Vec<u64> = base.to_vec();
    for arrival in arrivals {
        let (contract, volume) = (arrival.contract, arrival.volume);
        let (Some(&reached), Some(&from), Some(trades)) =
            (level.get(contract), base.get(contract), releases.get(contract))
        else {
            tally.unexplained += 1;
            continue;
        };
        if volume == reached {
            continue;
        }
        if volume < reached || volume - from > trades.len() as u64 {
            tally.unexplained += 1;
            continue;
        }
        let place = |volume: u64| (volume - from - 1) as usize;
        let release_of = |volume: u64| trades[place(volume)];
        shown(contract, place(volume), arrival.arrival_ns.saturating_sub(release_of(volume)));
        for passed in reached + 1..=volume {
            visible(arrival.arrival_ns.saturating_sub(release_of(passed)));
        }
        tally.shown += 1;
        tally.merged += volume - reached - 1;
        level[contract] = volume;
    }
    for ((reached, from), trades) in level.iter().zip(base).zip(releases) {
        tally.unseen += (trades.len() as u64).saturating_sub(reached - from);
    }
    tally
}

/// This process's CPU time so far (user and system, all threads), in seconds.
fn cpu_seconds() -> f64 {
    // SAFETY: `getrusage` only writes the zeroed struct it is given.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: as above; RUSAGE_SELF is always valid.
    if unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut usage) } != 0 {
        return 0.0;
    }
    let seconds = |time: libc::timeval| time.tv_sec as f64 + time.tv_usec as f64 / 1e6;
    seconds(usage.ru_utime) + seconds(usage.ru_stime)
}

fn median(sorted: &[u64]) -> u64 {
    sorted.get(sorted.len() / 2).copied().unwrap_or(0)
}

fn now_ns() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |elapsed| elapsed.as_nanos() as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(contract: usize, volume: u64, arrival_ns: u64) -> Arrival {
        Arrival { contract, volume, arrival_ns }
    }

    fn run(
        arrivals: &[Arrival],
        base: &[u64],
        releases: &[Vec<u64>],
    ) -> (Tally, Vec<(usize, usize, u64)>, Vec<u64>) {
        let (mut shown, mut visible) = (Vec::new(), Vec::new());
        let tally = tally_session(
            arrivals,
            base,
            releases,
            |contract, place, ns| shown.push((contract, place, ns)),
            |ns| visible.push(ns),
        );
        (tally, shown, visible)
    }

    #[test]
    fn a_volume_names_its_trade_after_the_base() {
        // Contract 0 had traded 7 lots before the bench; its trades released at 100, 200, 300.
        let releases = vec![vec![100, 200, 300], vec![]];
        let arrivals = [at(0, 7, 50), at(1, 0, 50), at(0, 8, 150), at(0, 9, 260), at(0, 10, 390)];
        let (tally, shown, visible) = run(&arrivals, &[7, 0], &releases);
        assert_eq!(tally, Tally { shown: 3, merged: 0, unseen: 0, unexplained: 0 });
        assert_eq!(shown, vec![(0, 0, 50), (0, 1, 60), (0, 2, 90)]);
        assert_eq!(visible, vec![50, 60, 90]);
    }

    #[test]
    fn a_jump_counts_the_trades_passed_over_as_merged() {
        let releases = vec![vec![100, 200, 300, 400, 500]];
        // The session reads trade 1, then trade 4 (2 and 3 merged into it), never 5.
        let arrivals = [at(0, 0, 10), at(0, 1, 110), at(0, 4, 450)];
        let (tally, shown, visible) = run(&arrivals, &[0], &releases);
        assert_eq!(tally, Tally { shown: 2, merged: 2, unseen: 1, unexplained: 0 });
        assert_eq!(shown, vec![(0, 0, 10), (0, 3, 50)]);
        assert_eq!(visible, vec![10, 250, 150, 50]);
        assert_eq!(tally.shown + tally.merged + tally.unseen, 5);
    }

    #[test]
    fn volumes_no_trade_explains_are_counted_not_timed() {
        let releases = vec![vec![100]];
        // A repeat changes nothing; beyond the trades recorded, or backwards, is unexplained.
        let arrivals = [at(0, 1, 150), at(0, 1, 160), at(0, 3, 170), at(0, 0, 180)];
        let (tally, shown, _) = run(&arrivals, &[0], &releases);
        assert_eq!(tally, Tally { shown: 1, merged: 0, unseen: 0, unexplained: 2 });
        assert_eq!(shown, vec![(0, 0, 50)]);
        // An arrival before its trade's release (clocks apart) is timed as 0, not a wrap.
        let (_, shown, _) = run(&[at(0, 1, 90)], &[0], &releases);
        assert_eq!(shown, vec![(0, 0, 0)]);
    }

    #[test]
    fn the_base_is_the_lowest_first_volume() {
        let sessions =
            vec![vec![at(0, 5, 1), at(1, 2, 1), at(0, 6, 2)], vec![at(0, 6, 3), at(0, 4, 4)]];
        let base = bases(&sessions);
        assert_eq!(&base[..3], &[5, 2, 0]);
    }

    #[test]
    fn a_pack_gives_its_quote_volumes_in_order() {
        let contracts = vec!["SHFE.a".to_string(), "SHFE.b".to_string()];
        let pack = r#"{"aid":"rtn_data","data":[
            {"quotes":{"SHFE.a":{"last_price":5000.0,"volume":3},"SHFE.x":{"volume":9}}},
            {"ins_list":"SHFE.a,SHFE.b"},
            {"quotes":{"SHFE.b":{"ask_price1":5001.0,"ask_volume1":2}}},
            {"quotes":{"SHFE.a":{"volume":4.0}}}]}"#;
        let read = read_pack(pack, &contracts);
        assert_eq!(read, Read::Data { volumes: vec![(0, 3), (0, 4)], without: 1 });
        assert_eq!(
            read_pack(r#"{"aid":"rtn_data"}"#, &contracts),
            Read::Data { volumes: vec![], without: 0 }
        );
        // A volume not yet known ("-": not-a-number for DIFF clients) is no volume.
        assert_eq!(
            read_pack(
                r#"{"aid":"rtn_data","data":[{"quotes":{"SHFE.b":{"volume":"-"}}}]}"#,
                &contracts
            ),
            Read::Data { volumes: vec![], without: 1 }
        );
        assert_eq!(read_pack(r#"{"aid":"notify","notify":{}}"#, &contracts), Read::Other);
        assert_eq!(read_pack("not json", &contracts), Read::Unreadable);
    }
}
