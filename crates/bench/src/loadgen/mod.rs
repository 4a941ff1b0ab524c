//! `bourse loadgen`: load against a running `bourse serve`, measured honestly. Open loop
//! at a target rate, each request's latency taken from its scheduled send time (so a
//! server that falls behind cannot hide its queue: no coordinated omission), HDR
//! histograms, a progress line, a summary and `--json` results. It sets up its own
//! instrument, accounts, money and keys through the admin API.
//!
//! It drives order entry over the binary TCP protocol (`tcp`), REST (`rest`) or
//! WebSocket (`ws`), open or closed loop (`drive`), with an order flow and a schedule
//! (`flow`: profiles, several symbols, bursts), and steps the rate to find the knee.
//! `--html` writes a self-contained report (`report`), `--watch-pid` samples
//! the server's memory once a second (`memory`).

pub mod admin;
pub mod binance;
pub mod drive;
pub mod fix;
pub mod flow;
pub mod follow;
pub mod memory;
pub mod report;
pub mod rest;
pub mod sink;
pub mod tcp;
pub mod ws;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bourse_protocol::binary::{self, SYMBOL_BYTES};
use bourse_protocol::signing::now_ms;
use clap::Args;
use hdrhistogram::Histogram;
use serde_json::{json, Value};

use admin::Credentials;
use drive::{ConnectionPlan, Protocol, Tally};
use flow::{Burst, Profile, Schedule};

#[derive(Args, Clone, Debug)]
pub struct LoadgenArgs {
    /// The order-entry protocol: binary TCP (on `--tcp`), FIX (on `--fix`), REST,
    /// WebSocket or Binance's REST (on `--http`).
    #[arg(long, value_enum, default_value = "tcp")]
    protocol: Protocol,
    /// The server's REST and WebSocket address (also for the setup through the admin
    /// API).
    #[arg(long, default_value = "127.0.0.1:8080")]
    http: SocketAddr,
    /// The server's binary order-entry address.
    #[arg(long, default_value = "127.0.0.1:9090")]
    tcp: SocketAddr,
    /// The server's FIX 4.4 address (its CompID must be `BOURSE`, the default).
    #[arg(long, default_value = "127.0.0.1:9876")]
    fix: SocketAddr,
    /// The admin key file the server wrote on its first start.
    #[arg(long, default_value = "data/server/admin.key")]
    admin_key_file: PathBuf,
    /// Orders per second over all connections (open loop).
    #[arg(long, default_value_t = 10_000.0)]
    rate: f64,
    /// Seconds of load.
    #[arg(long, default_value_t = 10.0)]
    duration: f64,
    #[arg(long, default_value_t = 2)]
    connections: usize,
    /// The instrument to trade (declared if missing).
    #[arg(long, default_value = "LG-BTC-USD")]
    symbol: String,
    /// Print the results as one JSON document on standard output.
    #[arg(long)]
    json: bool,
    /// Use this key (with `--secret`) for every connection and set nothing up: for a
    /// market set up before, or for `bourse loadgen-sink`.
    #[arg(long, requires = "secret")]
    key: Option<String>,
    #[arg(long, requires = "key")]
    secret: Option<String>,
    /// Rate step: run at `--rate`, then `--step-factor` times more each step up to this
    /// rate, and report the knee: the highest rate answered in full, without errors,
    /// with p99 under `--p99-bound-us`. Stops at the first step past the knee.
    #[arg(long)]
    step_to: Option<f64>,
    #[arg(long, default_value_t = 1.5)]
    step_factor: f64,
    #[arg(long, default_value_t = 1_000)]
    p99_bound_us: u64,
    /// Closed loop instead: each connection keeps this many orders in flight (a new
    /// one as each answer comes) for `--duration`; `--rate` is not used.
    #[arg(long)]
    closed: Option<usize>,
    /// Also write the results as one self-contained HTML page (tables and plots) here.
    #[arg(long)]
    html: Option<PathBuf>,
    /// Sample this process's resident memory (the server's) once a second: `rss_kib`
    /// in the timeline, `server_rss_kib` (first, last, max) in the results; and its CPU
    /// time and context switches over the run (`server_cpu`), beside the tool's own
    /// (`loadgen_cpu`, always reported).
    #[arg(long)]
    watch_pid: Option<u32>,
    /// The order flow (`loadgen::flow`): `cross` (buy and sell meet at one price),
    /// `ec-mix` (exchange-core's mix of new orders, amends, cancels, IOC and FOK), or
    /// `maker-taker` (half the connections quote and cancel-replace on every symbol,
    /// the others take with IOC orders).
    #[arg(long, value_enum, default_value = "cross")]
    profile: Profile,
    /// Instruments to trade: `--symbol` alone for 1, else `SYMBOL-0` … `SYMBOL-(N-1)`.
    #[arg(long, default_value_t = 1)]
    symbols: usize,
    /// Seeds the flows (the same seed, the same orders).
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Bursts: every this many ms, `--burst-ms` at `--burst-factor` times `--rate`
    /// (open loop; the rest of each period at `--rate`).
    #[arg(long)]
    burst_every_ms: Option<u64>,
    #[arg(long, default_value_t = 100)]
    burst_ms: u64,
    #[arg(long, default_value_t = 5.0)]
    burst_factor: f64,
    /// A cluster (`docs/cluster.md`): `--http` is any node; each connection sends to
    /// the leader and, when it changes, finds the new one and sends its unanswered
    /// orders again with the same client order ids (binary TCP, open loop).
    #[arg(long)]
    follow_leader: bool,
}

impl LoadgenArgs {
    /// The instruments of the run.
    fn symbol_names(&self) -> Vec<String> {
        match self.symbols {
            0 | 1 => vec![self.symbol.clone()],
            count => (0..count).map(|index| format!("{}-{index}", self.symbol)).collect(),
        }
    }

    /// The open loop's clock for one connection sending `rate` a second.
    fn schedule(&self, rate: f64) -> Result<Schedule, String> {
        let burst = match self.burst_every_ms {
            None => None,
            Some(every_ms) => {
                if !(self.burst_factor >= 1.0 && self.burst_ms > 0 && self.burst_ms < every_ms) {
                    return Err("bursts need --burst-ms below --burst-every-ms and a --burst-factor of 1 or more"
                        .to_string());
                }
                Some(Burst {
                    every: Duration::from_millis(every_ms),
                    length: Duration::from_millis(self.burst_ms),
                    factor: self.burst_factor,
                })
            }
        };
        Ok(Schedule { rate, burst })
    }
}

pub fn run(args: &LoadgenArgs) -> Result<(), String> {
    if !(args.rate > 0.0 && args.duration > 0.0 && args.connections > 0) {
        return Err("--rate, --duration and --connections must be positive".to_string());
    }
    let longest = args.symbol_names().iter().map(String::len).max().unwrap_or(0);
    if args.protocol == Protocol::Tcp && longest > SYMBOL_BYTES {
        return Err(format!(
            "the binary protocol carries symbols of up to {SYMBOL_BYTES} bytes; --symbol (with \
             its -N suffix for --symbols) is {longest}"
        ));
    }
    if args.protocol == Protocol::Binance && args.profile != Profile::Cross {
        return Err(format!(
            "--protocol binance drives the cross flow only: --profile {} amends orders, which \
             Binance's spot API cannot do",
            args.profile.name()
        ));
    }
    if let Some(pid) = args.watch_pid {
        memory::rss_kib(pid)?;
    }
    let cluster = match args.follow_leader {
        false => None,
        true => {
            if args.protocol != Protocol::Tcp || args.closed.is_some() {
                return Err("--follow-leader drives binary TCP (--protocol tcp) in the open loop"
                    .to_string());
            }
            Some(Arc::new(follow::ClusterMap::discover(args.http)?))
        }
    };
    // In a cluster the market is set up on the leader.
    let setup_http = match &cluster {
        Some(cluster) => cluster.leader()?.http,
        None => args.http,
    };
    let keys = match (&args.key, &args.secret) {
        (Some(key), Some(secret)) => {
            vec![Credentials { key: key.clone(), secret: secret.clone() }; args.connections]
        }
        _ => {
            let admin = Credentials::from_file(&args.admin_key_file)?;
            let run_id = now_ms() % 1_000_000_000;
            let accounts: Vec<String> =
                (0..args.connections).map(|index| format!("lg{run_id}-{index}")).collect();
            admin::set_up(setup_http, &admin, &args.symbol_names(), &accounts)?
        }
    };
    if args.closed.is_some_and(|window| window == 0)
        || (args.closed.is_some() && args.step_to.is_some())
    {
        return Err("--closed needs a window of 1 or more, and no --step-to".to_string());
    }
    match args.step_to {
        None => {
            let (results, failures) =
                run_once(args, &keys, args.rate, &id_prefix(0), cluster.as_ref())?;
            write_report(args, &results)?;
            if args.json {
                println!("{}", pretty(&results)?);
            } else {
                print_summary(&results);
            }
            match failures.first() {
                Some(failure) => {
                    Err(format!("{} connection(s) failed; the first: {failure}", failures.len()))
                }
                None => Ok(()),
            }
        }
        Some(step_to) => step(args, &keys, step_to),
    }
}

/// Client order ids unique to this process's run and step, so that runs and steps
/// with the same accounts never reuse one (the venue would refuse it).
fn id_prefix(step: usize) -> String {
    format!("{:x}s{step}", now_ms() % 0xff_ffff)
}

fn pretty(value: &Value) -> Result<String, String> {
    serde_json::to_string_pretty(value).map_err(|error| error.to_string())
}

/// `--html`: the report of `results` (a run's or a rate step's).
fn write_report(args: &LoadgenArgs, results: &Value) -> Result<(), String> {
    let Some(path) = &args.html else { return Ok(()) };
    report::write(path, results)?;
    if !args.json {
        eprintln!("loadgen: report written to {}", path.display());
    }
    Ok(())
}

/// The rate step: see `LoadgenArgs::step_to`.
fn step(args: &LoadgenArgs, keys: &[Credentials], step_to: f64) -> Result<(), String> {
    if !(args.step_factor > 1.0 && step_to >= args.rate) {
        return Err("--step-factor must be above 1 and --step-to at least --rate".to_string());
    }
    let mut steps = Vec::new();
    let mut knee: Option<f64> = None;
    let mut rate = args.rate;
    for index in 0.. {
        let (results, failures) = run_once(args, keys, rate, &id_prefix(index), None)?;
        let answered =
            results["ok"].as_u64().unwrap_or(0) + results["rejected"].as_u64().unwrap_or(0);
        let p99 = results["p99_us"].as_u64().unwrap_or(u64::MAX);
        let holds = failures.is_empty()
            && results["errors"].as_u64() == Some(0)
            && answered == results["sent"].as_u64().unwrap_or(0)
            && p99 <= args.p99_bound_us;
        if !args.json {
            println!(
                "loadgen: step {rate:>10.0}/s  answered {answered:>9}  errors {}  p50 {} µs  p99 {p99} µs  {}",
                results["errors"],
                results["p50_us"],
                if holds { "holds" } else { "past the knee" }
            );
        }
        steps.push(results);
        if !holds {
            break;
        }
        knee = Some(rate);
        if rate >= step_to {
            break;
        }
        rate = (rate * args.step_factor).min(step_to);
    }
    let summary = json!({
        "mode": "step",
        "p99_bound_us": args.p99_bound_us,
        "knee_rate_per_sec": knee,
        "steps": steps,
    });
    write_report(args, &summary)?;
    if args.json {
        println!("{}", pretty(&summary)?);
    } else {
        match knee {
            Some(knee) => println!(
                "loadgen: knee: {knee:.0} orders/s with p99 under {} µs",
                args.p99_bound_us
            ),
            None => println!("loadgen: no step held p99 under {} µs", args.p99_bound_us),
        }
    }
    Ok(())
}

/// One open-loop run at `rate` over all connections: its results and the connections'
/// failures.
fn run_once(
    args: &LoadgenArgs,
    keys: &[Credentials],
    rate: f64,
    id_prefix: &str,
    cluster: Option<&Arc<follow::ClusterMap>>,
) -> Result<(Value, Vec<String>), String> {
    let schedule = args.schedule(rate / args.connections as f64)?;
    let requests = schedule.requests_in(Duration::from_secs_f64(args.duration));
    let symbols = args.symbol_names();
    let tallies: Vec<Arc<Tally>> =
        (0..args.connections).map(|_| Tally::new().map(Arc::new)).collect::<Result<_, _>>()?;
    let rss_before = args.watch_pid.map(memory::rss_kib).transpose()?;
    let own_before = crate::host::Usage::own();
    let server_before = args.watch_pid.and_then(|pid| crate::host::Usage::of_process(pid).ok());
    let measured_from = Instant::now();
    let start = measured_from + Duration::from_millis(200);
    let threads: Vec<_> = keys
        .iter()
        .cloned()
        .enumerate()
        .map(|(index, credentials)| {
            let plan = ConnectionPlan {
                address: match args.protocol {
                    // (Following a leader, each connection finds its address.)
                    Protocol::Tcp => args.tcp,
                    Protocol::Fix => args.fix,
                    Protocol::Rest | Protocol::Ws | Protocol::Binance => args.http,
                },
                credentials,
                symbols: symbols.clone(),
                schedule,
                requests,
                index,
                connections: args.connections,
                id_prefix: id_prefix.to_string(),
                profile: args.profile,
                seed: args.seed,
            };
            let tally = Arc::clone(&tallies[index]);
            let (closed, protocol) = (args.closed, args.protocol);
            let cluster = cluster.cloned();
            let duration = Duration::from_secs_f64(args.duration);
            std::thread::Builder::new()
                .name(format!("loadgen-send-{index}"))
                .spawn(move || match (protocol, cluster) {
                    (_, Some(cluster)) => {
                        if let Err(error) = tcp::run_following(&plan, &tally, start, &cluster) {
                            tally.fail(error);
                        }
                        tally.done.store(true, Ordering::SeqCst);
                    }
                    (Protocol::Tcp, None) => {
                        drive::run(plan, tally, closed, start, duration, tcp::connect)
                    }
                    (Protocol::Rest, None) => {
                        drive::run(plan, tally, closed, start, duration, rest::connect)
                    }
                    (Protocol::Ws, None) => {
                        drive::run(plan, tally, closed, start, duration, ws::connect)
                    }
                    (Protocol::Binance, None) => {
                        drive::run(plan, tally, closed, start, duration, binance::connect)
                    }
                    (Protocol::Fix, None) => {
                        drive::run(plan, tally, closed, start, duration, fix::connect)
                    }
                })
                .map_err(|error| error.to_string())
        })
        .collect::<Result<_, _>>()?;
    let timeline = watch(&tallies, start, args.json, args.watch_pid);
    for thread in threads {
        let _ = thread.join();
    }
    let elapsed = start.elapsed().as_secs_f64();
    // The CPU this tool used (and, with --watch-pid, the server), over the whole run:
    // a reader can tell the server's limit from the tool's.
    let cpus = std::thread::available_parallelism().map_or(1, usize::from);
    let wall = measured_from.elapsed();
    let loadgen_cpu = own_before.since(&crate::host::Usage::own(), wall, cpus);
    let server_cpu = args.watch_pid.zip(server_before).and_then(|(pid, before)| {
        Some(before.since(&crate::host::Usage::of_process(pid).ok()?, wall, cpus))
    });
    let rss = args.watch_pid.map(|pid| {
        let after = memory::rss_kib(pid).ok();
        memory::summary(pid, rss_before, &timeline, after)
    });
    let mut results = summarise(args, rate, &tallies, elapsed, timeline)?;
    if let Some(rss) = rss {
        results["server_rss_kib"] = rss;
    }
    results["loadgen_cpu"] = loadgen_cpu;
    if let Some(server_cpu) = server_cpu {
        results["server_cpu"] = server_cpu;
    }
    let failures: Vec<String> = tallies
        .iter()
        .filter_map(|tally| tally.failure.lock().unwrap_or_else(|p| p.into_inner()).clone())
        .collect();
    Ok((results, failures))
}

/// The progress line, once a second, until every connection is done; returns the
/// per-second timeline (completed answers and their p99, and the resident memory of
/// process `watch_pid`).
fn watch(
    tallies: &[Arc<Tally>],
    start: Instant,
    quiet: bool,
    watch_pid: Option<u32>,
) -> Vec<Value> {
    let mut timeline: Vec<Value> = Vec::new();
    let mut completed_before = 0u64;
    let mut second = 0u64;
    while !tallies.iter().all(|tally| tally.done.load(Ordering::SeqCst)) {
        std::thread::sleep(Duration::from_millis(100));
        if start.elapsed() < Duration::from_secs(second + 1) {
            continue;
        }
        second += 1;
        let mut interval = Histogram::<u64>::new_with_bounds(1, 3_600_000_000, 3).ok();
        let (mut completed, mut errors, mut worst_p99) = (0u64, 0u64, 0u64);
        for tally in tallies {
            completed += tally.ok.load(Ordering::Relaxed) + tally.rejected.load(Ordering::Relaxed);
            errors += tally.errors.load(Ordering::Relaxed);
            let mut latency = tally.latency.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
            worst_p99 = worst_p99.max(latency.0.value_at_quantile(0.99));
            if let Some(interval) = interval.as_mut() {
                let _ = interval.add(&latency.1);
            }
            latency.1.reset();
        }
        let interval_p99 = interval.map_or(0, |interval| interval.value_at_quantile(0.99));
        let mut entry = json!({
            "second": second, "completed": completed - completed_before, "p99_us": interval_p99,
        });
        let mut rss = String::new();
        if let Some(pid) = watch_pid {
            match memory::rss_kib(pid) {
                Ok(kib) => {
                    rss = format!("  rss {:.1} MiB", kib as f64 / 1024.0);
                    entry["rss_kib"] = json!(kib);
                }
                Err(error) => {
                    // Said once, when the process goes away; its seconds get null.
                    if !matches!(timeline.last(), Some(last) if last["rss_kib"].is_null()) {
                        eprintln!("loadgen: {error}");
                    }
                    entry["rss_kib"] = Value::Null;
                }
            }
        }
        timeline.push(entry);
        if !quiet {
            eprintln!(
                "loadgen: {second:>4} s  {:>9} answers/s  errors {errors}  p99 so far {worst_p99} µs{rss}",
                completed - completed_before
            );
        }
        completed_before = completed;
    }
    timeline
}

fn summarise(
    args: &LoadgenArgs,
    rate: f64,
    tallies: &[Arc<Tally>],
    elapsed_s: f64,
    timeline: Vec<Value>,
) -> Result<Value, String> {
    let mut latency =
        Histogram::<u64>::new_with_bounds(1, 3_600_000_000, 3).map_err(|e| e.to_string())?;
    let (mut ok, mut rejected, mut errors, mut sent) = (0u64, 0u64, 0u64, 0u64);
    let (mut reconnects, mut resent, mut placed_before) = (0u64, 0u64, 0u64);
    let mut reasons = vec![0u64; 256];
    for tally in tallies {
        reconnects += tally.reconnects.load(Ordering::Relaxed);
        resent += tally.resent.load(Ordering::Relaxed);
        placed_before += tally.placed_before.load(Ordering::Relaxed);
        ok += tally.ok.load(Ordering::Relaxed);
        rejected += tally.rejected.load(Ordering::Relaxed);
        errors += tally.errors.load(Ordering::Relaxed);
        sent += tally.sent.load(Ordering::Relaxed);
        let whole = tally.latency.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        latency.add(&whole.0).map_err(|error| error.to_string())?;
        for (code, count) in
            tally.reasons.lock().unwrap_or_else(|p| p.into_inner()).iter().enumerate()
        {
            reasons[code] += count;
        }
    }
    let by_reason: serde_json::Map<String, Value> = reasons
        .iter()
        .enumerate()
        .filter(|(_, count)| **count > 0)
        .map(|(code, count)| (reason_name(code as u16), json!(count)))
        .collect();
    let quantile = |q: f64| latency.value_at_quantile(q);
    Ok(json!({
        "protocol": args.protocol.name(),
        "mode": if args.closed.is_some() { "closed" } else { "open" },
        "window_per_connection": args.closed,
        "target_rate_per_sec": if args.closed.is_some() { Value::Null } else { json!(rate) },
        "connections": args.connections,
        "profile": args.profile.name(),
        "symbols": args.symbol_names(),
        "seed": args.seed,
        "burst": args.burst_every_ms.map(|every_ms| json!({
            "every_ms": every_ms, "length_ms": args.burst_ms, "factor": args.burst_factor,
        })),
        "duration_s": args.duration,
        "elapsed_s": elapsed_s,
        "sent": sent,
        "ok": ok,
        "rejected": rejected,
        "rejected_by_reason": by_reason,
        "errors": errors,
        "throughput_per_sec": (ok + rejected) as f64 / elapsed_s,
        "p50_us": quantile(0.5),
        "p90_us": quantile(0.9),
        "p99_us": quantile(0.99),
        "p99_9_us": quantile(0.999),
        "p99_99_us": quantile(0.9999),
        "max_us": latency.max(),
        "percentiles": report::percentiles(&latency),
        "latency_from": if args.closed.is_some() { "actual send time" } else { "scheduled send time" },
        // Requests due within this go out in one write (open loop).
        "send_tick_us": args.closed.is_none().then(|| drive::SEND_TICK.as_micros() as u64),
        "timeline": timeline,
        "machine": crate::host::facts(),
        // Following a cluster's leader: connections made again to a new leader,
        // requests sent again, and those answered `duplicate_id` (placed the first
        // time; counted in `ok`).
        "follow_leader": args.follow_leader.then(|| json!({
            "reconnects": reconnects, "resent": resent, "placed_before": placed_before,
        })),
    }))
}

/// A reason code's name in the results: the engine's reason (`insufficient_funds`), or
/// `server_` and the server's code.
fn reason_name(code: u16) -> String {
    match binary::reject_reason(code) {
        Some(reason) => reason.code().to_string(),
        // An engine's code this build does not know.
        None if (1..binary::code::SERVER_FIRST).contains(&code) => code.to_string(),
        None => format!("server_{code}"),
    }
}

fn print_summary(results: &Value) {
    println!(
        "loadgen: {} orders/s over {:.1} s ({} ok, {} rejected, {} errors) on {} connection(s)",
        results["throughput_per_sec"].as_f64().map_or(0, |rate| rate.round() as u64),
        results["elapsed_s"].as_f64().unwrap_or(0.0),
        results["ok"],
        results["rejected"],
        results["errors"],
        results["connections"],
    );
    println!(
        "loadgen: latency from the {}, µs: p50 {} p90 {} p99 {} p99.9 {} p99.99 {} max {}",
        results["latency_from"].as_str().unwrap_or("send"),
        results["p50_us"],
        results["p90_us"],
        results["p99_us"],
        results["p99_9_us"],
        results["p99_99_us"],
        results["max_us"],
    );
    let follow = &results["follow_leader"];
    if follow.is_object() {
        println!(
            "loadgen: following the leader: {} reconnections, {} orders sent again, {} of them placed before (duplicate_id)",
            follow["reconnects"], follow["resent"], follow["placed_before"]
        );
    }
    if let Some(reasons) =
        results["rejected_by_reason"].as_object().filter(|reasons| !reasons.is_empty())
    {
        println!("loadgen: rejected by reason: {}", Value::Object(reasons.clone()));
    }
    for (who, key) in [("its own", "loadgen_cpu"), ("the server's (--watch-pid)", "server_cpu")] {
        let cpu = &results[key];
        if cpu.is_object() {
            let switches = &cpu["context_switches_per_sec"];
            println!(
                "loadgen: {who} CPU: {} s user + {} s system, {:.0}% of one CPU, {:.0}% of the machine's {}; context switches/s: {} voluntary, {} involuntary",
                cpu["user_s"],
                cpu["system_s"],
                cpu["share_of_one_cpu"].as_f64().unwrap_or(0.0) * 100.0,
                cpu["share_of_machine"].as_f64().unwrap_or(0.0) * 100.0,
                results["machine"]["cpus"],
                switches["voluntary"],
                switches["involuntary"],
            );
        }
    }
    let rss = &results["server_rss_kib"];
    if rss.is_object() {
        println!(
            "loadgen: resident memory of process {}, KiB: first {} last {} max {}",
            rss["pid"], rss["first"], rss["last"], rss["max"]
        );
    }
}
