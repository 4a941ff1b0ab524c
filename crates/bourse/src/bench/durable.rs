//! `bourse bench durable`: the whole engine pipeline in process: a producer thread
//! submits commands, the sequencer journals them (group commit; `fdatasync` per batch in
//! `sync` mode), the applier runs the core, and a receiver thread takes the released
//! outcomes.
//!
//! Two measurements:
//! - throughput (closed loop): the producer submits as fast as the queue accepts
//!   (retrying on `busy`); commands per second from the first submission to the last
//!   outcome, with the number of syncs and the mean batch per sync;
//! - release latency (open loop, `--rate`): submissions are scheduled at a fixed rate
//!   and latency is measured from each command's *scheduled* send time to the release
//!   of its outcome, so a stall delays every command scheduled during it (no
//!   coordinated omission). Without `--rate`, the open-loop pass runs at half the rate
//!   the throughput pass reached.

use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bourse_core::Command;
use bourse_engine::{
    Durability, Engine, EngineConfig, Outcome, Released, StatsSnapshot, SubmitError,
};
use clap::Args;
use crossbeam_channel::{unbounded, Receiver};
use hdrhistogram::Histogram;

use super::engine::{load, resolve_accounts_after_setup, WorkloadArgs};

#[derive(Args)]
pub struct DurableArgs {
    #[command(flatten)]
    source: WorkloadArgs,
    /// `sync` (fdatasync before release), `async` (sync every 10 ms or 10,000
    /// commands) or `none` (no journal).
    #[arg(long, default_value = "sync")]
    mode: String,
    /// Rate of the open-loop latency pass, commands per second (default: half the
    /// measured throughput).
    #[arg(long)]
    rate: Option<u64>,
    /// Journal segment size in MiB.
    #[arg(long, default_value_t = 64)]
    segment_mib: u64,
    /// Where the journal goes (a fresh directory, removed afterwards).
    #[arg(long)]
    data_dir: Option<PathBuf>,
    /// Print the result as one JSON object.
    #[arg(long)]
    json: bool,
}

struct PassResult {
    commands: usize,
    seconds: f64,
    syncs: u64,
    batches: u64,
    sync_ns_total: u64,
    sync_ns_max: u64,
    /// Upper bounds (power-of-two buckets) of the sync durations' p50 and p99.
    sync_ns_p50: u64,
    sync_ns_p99: u64,
    /// Syncs that took more than about 1 ms (2^20 ns).
    sync_ns_over_1ms: u64,
    split: Option<Split>,
    latency: Histogram<u64>,
}

pub fn run(args: &DurableArgs) -> Result<(), String> {
    let durability = Durability::parse(&args.mode)
        .ok_or_else(|| format!("unknown mode {:?} (sync, async or none)", args.mode))?;
    let workload = load(&args.source)?;
    let mut measured = workload.measured.clone();
    resolve_accounts_after_setup(&mut measured, &workload);
    let base_dir = args.data_dir.clone().unwrap_or_else(|| {
        std::env::temp_dir().join(format!("bourse-bench-durable-{}", std::process::id()))
    });

    let segment_bytes = args.segment_mib << 20;
    let throughput = pass(
        &base_dir.join("throughput"),
        durability,
        segment_bytes,
        &workload.setup,
        &measured,
        None,
    )?;
    let max_rate = throughput.commands as f64 / throughput.seconds;
    let rate = args.rate.unwrap_or((max_rate / 2.0) as u64).max(1);
    let open_loop = pass(
        &base_dir.join("open-loop"),
        durability,
        segment_bytes,
        &workload.setup,
        &measured,
        Some(rate),
    )?;
    let _ = std::fs::remove_dir_all(&base_dir);

    let mean_batch = throughput.commands as f64 / throughput.batches.max(1) as f64;
    let latency = &open_loop.latency;
    let split = open_loop.split.as_ref();
    let open_loop_batch =
        (open_loop.commands as f64 / open_loop.batches.max(1) as f64 * 10.0).round() / 10.0;
    if args.json {
        println!(
            "{}",
            serde_json::json!({
                "workload": workload.name,
                "mode": durability.name(),
                "commands": throughput.commands,
                "commands_per_sec": max_rate.round(),
                "syncs": throughput.syncs,
                "batches": throughput.batches,
                "mean_batch": (mean_batch * 10.0).round() / 10.0,
                "open_loop_rate": rate,
                "open_loop_syncs": open_loop.syncs,
                "open_loop_mean_batch": open_loop_batch,
                "open_loop_mean_sync_ns": open_loop.sync_ns_total / open_loop.syncs.max(1),
                "open_loop_max_sync_ns": open_loop.sync_ns_max,
                "open_loop_sync_p50_ns_below": open_loop.sync_ns_p50,
                "open_loop_sync_p99_ns_below": open_loop.sync_ns_p99,
                "open_loop_syncs_over_1ms": open_loop.sync_ns_over_1ms,
                "open_loop_late_p99_ns": split.map(|split| split.late.value_at_quantile(0.99)),
                "open_loop_to_sequenced_p99_ns": split.map(|split| split.to_sequenced.value_at_quantile(0.99)),
                "p50_ns": latency.value_at_quantile(0.50),
                "p90_ns": latency.value_at_quantile(0.90),
                "p99_ns": latency.value_at_quantile(0.99),
                "p999_ns": latency.value_at_quantile(0.999),
                "max_ns": latency.max(),
                "closed_loop_p50_ns": throughput.latency.value_at_quantile(0.50),
                "closed_loop_p99_ns": throughput.latency.value_at_quantile(0.99),
            })
        );
    } else {
        println!(
            "{} mode {}: {} commands, {:.3} M commands/s, {} syncs, mean batch {:.1}; open loop at {} commands/s (mean batch {}, sync mean {} us, p99 < {} us, max {} us, {} over 1 ms; producer late p99 {} us; to the sequencer p99 {} us): release latency p50 {} us, p90 {} us, p99 {} us, p99.9 {} us, max {} us",
            workload.name,
            durability.name(),
            throughput.commands,
            max_rate / 1e6,
            throughput.syncs,
            mean_batch,
            rate,
            open_loop_batch,
            open_loop.sync_ns_total / open_loop.syncs.max(1) / 1000,
            open_loop.sync_ns_p99 / 1000,
            open_loop.sync_ns_max / 1000,
            open_loop.sync_ns_over_1ms,
            split.map_or(0, |split| split.late.value_at_quantile(0.99) / 1000),
            split.map_or(0, |split| split.to_sequenced.value_at_quantile(0.99) / 1000),
            latency.value_at_quantile(0.50) / 1000,
            latency.value_at_quantile(0.90) / 1000,
            latency.value_at_quantile(0.99) / 1000,
            latency.value_at_quantile(0.999) / 1000,
            latency.max() / 1000
        );
    }
    Ok(())
}

/// One run on a fresh engine: the setup (not timed), then the measured commands, either
/// as fast as possible (`rate` None) or on an open-loop schedule.
fn pass(
    data_dir: &std::path::Path,
    durability: Durability,
    segment_bytes: u64,
    setup: &[Command<'static>],
    measured: &[Command<'static>],
    rate: Option<u64>,
) -> Result<PassResult, String> {
    let _ = std::fs::remove_dir_all(data_dir);
    let mut config = EngineConfig::new(data_dir);
    config.durability = durability;
    config.segment_bytes = segment_bytes;
    config.snapshot_every_commands = 0;
    config.snapshot_on_shutdown = false;
    let engine = Engine::start(config).map_err(|error| error.to_string())?;
    run_setup(&engine, setup)?;

    let (sink, outcomes) = unbounded();
    let session = engine.open_session(Arc::new(sink));
    if rate.is_some() {
        fine_timer_slack();
    }
    let clock = Instant::now();
    let before = engine.stats();
    let timed = match rate {
        Some(rate) => open_loop(&session, &outcomes, measured, rate, clock)?,
        None => closed_loop(&session, outcomes, measured, clock)?,
    };
    let after = engine.stats();
    drop(session);
    engine.shutdown()?;
    Ok(PassResult {
        commands: measured.len(),
        seconds: timed.last_ns as f64 / 1e9,
        syncs: after.syncs - before.syncs,
        batches: after.batches - before.batches,
        sync_ns_total: after.sync_ns_total - before.sync_ns_total,
        sync_ns_max: after.sync_ns_max,
        sync_ns_p50: sync_quantile(&before, &after, 0.5),
        sync_ns_p99: sync_quantile(&before, &after, 0.99),
        sync_ns_over_1ms: sync_count_over(&before, &after, 1 << 20),
        latency: timed.latency,
        split: timed.split,
    })
}

/// As fast as the queue takes commands; a receiver thread times the outcomes.
fn closed_loop(
    session: &bourse_engine::Session,
    outcomes: Receiver<Released>,
    measured: &[Command<'static>],
    clock: Instant,
) -> Result<Timed, String> {
    let sent_at: Arc<Vec<AtomicU64>> =
        Arc::new((0..measured.len()).map(|_| AtomicU64::new(0)).collect());
    let receiver = {
        let sent_at = Arc::clone(&sent_at);
        let expected = measured.len();
        std::thread::spawn(move || receive(outcomes, expected, &sent_at, clock))
    };
    for (index, command) in measured.iter().enumerate() {
        sent_at[index].store(clock.elapsed().as_nanos() as u64, Ordering::Relaxed);
        submit_retrying(session, command, index as u64)?;
    }
    let (latency, last_ns) = receiver.join().map_err(|_| "the receiver thread panicked")??;
    Ok(Timed { latency, last_ns, split: None })
}

/// Release latencies of a pass, when the last outcome came, and (open loop) where the
/// time went.
struct Timed {
    latency: Histogram<u64>,
    last_ns: u64,
    split: Option<Split>,
}

/// Open loop: how late the producer submitted (its own lag, which counts in the
/// latency), and scheduled time to the sequencer's stamp (queueing and the sync before).
struct Split {
    late: Histogram<u64>,
    to_sequenced: Histogram<u64>,
}

/// The open loop on one thread (on two cores a separate receiver would compete with
/// the engine's threads): commands go out when due; between sends the thread waits for
/// outcomes, so their release is timed when it happens. Latency counts from each
/// command's scheduled time.
fn open_loop(
    session: &bourse_engine::Session,
    outcomes: &Receiver<Released>,
    measured: &[Command<'static>],
    rate: u64,
    clock: Instant,
) -> Result<Timed, String> {
    let scheduled = |index: usize| index as u64 * 1_000_000_000 / rate;
    let mut histogram = Histogram::<u64>::new_with_bounds(1, 60_000_000_000, 3)
        .map_err(|error| error.to_string())?;
    // Where the time goes: scheduled -> stamped by the sequencer (queueing, the sync
    // before) and stamped -> released (own write and sync, apply, release).
    let mut to_sequenced = histogram.clone();
    let mut late = histogram.clone();
    let wall_at_clock = wall_ns().saturating_sub(clock.elapsed().as_nanos() as u64);
    let (mut next, mut received, mut last_ns) = (0usize, 0usize, 0u64);
    while received < measured.len() {
        let now = clock.elapsed().as_nanos() as u64;
        while next < measured.len() && scheduled(next) <= now {
            submit_retrying(session, &measured[next], next as u64)?;
            late.saturating_record(
                (clock.elapsed().as_nanos() as u64).saturating_sub(scheduled(next)).max(1),
            );
            next += 1;
        }
        let until_next = match next < measured.len() {
            true => scheduled(next).saturating_sub(now),
            false => 100_000_000,
        };
        let wait = Duration::from_nanos(until_next).max(Duration::from_micros(20));
        match outcomes.recv_timeout(wait) {
            Ok(released) => {
                last_ns = clock.elapsed().as_nanos() as u64;
                for outcome in released.outcomes {
                    let Outcome::Applied(result) = outcome else {
                        return Err(format!("a command failed: {outcome:?}"));
                    };
                    let sent = scheduled(result.correlation as usize);
                    histogram.saturating_record(last_ns.saturating_sub(sent).max(1));
                    let sequenced = result.ts.saturating_sub(wall_at_clock);
                    to_sequenced.saturating_record(sequenced.saturating_sub(sent).max(1));
                    received += 1;
                }
            }
            Err(crossbeam_channel::RecvTimeoutError::Timeout) => {}
            Err(crossbeam_channel::RecvTimeoutError::Disconnected) => {
                return Err("the engine stopped before every outcome came".to_string())
            }
        }
    }
    Ok(Timed { latency: histogram, last_ns, split: Some(Split { late, to_sequenced }) })
}

fn wall_ns() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |since| since.as_nanos() as u64)
}

/// Syncs longer than `ns` (rounded to a power of two) between two readings.
fn sync_count_over(before: &StatsSnapshot, after: &StatsSnapshot, ns: u64) -> u64 {
    let first_bucket = 64 - ns.leading_zeros() as usize + 1;
    (first_bucket..after.sync_ns_buckets.len())
        .map(|bucket| after.sync_ns_buckets[bucket] - before.sync_ns_buckets[bucket])
        .sum()
}

/// A quantile of the sync durations between two readings of the engine's counters.
fn sync_quantile(before: &StatsSnapshot, after: &StatsSnapshot, quantile: f64) -> u64 {
    let mut between = *after;
    for (bucket, earlier) in between.sync_ns_buckets.iter_mut().zip(before.sync_ns_buckets) {
        *bucket -= earlier;
    }
    between.sync_ns_quantile(quantile)
}

fn run_setup(engine: &Engine, setup: &[Command<'static>]) -> Result<(), String> {
    let (sink, outcomes) = unbounded();
    let session = engine.open_session(Arc::new(sink));
    for (index, command) in setup.iter().enumerate() {
        submit_retrying(&session, command, index as u64)?;
    }
    let mut received = 0;
    while received < setup.len() {
        let released: Released = outcomes.recv().map_err(|_| "the engine stopped")?;
        received += released.outcomes.len();
    }
    Ok(())
}

fn submit_retrying(
    session: &bourse_engine::Session,
    command: &Command<'_>,
    correlation: u64,
) -> Result<(), String> {
    loop {
        match session.submit(command, correlation) {
            Ok(()) => return Ok(()),
            // Back off without spinning, which would take a core from the engine.
            Err(SubmitError::Busy { .. }) => std::thread::sleep(Duration::from_micros(50)),
            Err(error) => return Err(error.to_string()),
        }
    }
}

/// Asks the kernel to wake this thread's sleeps on time (its default slack of 50 us
/// would add that much to every pause of the open-loop schedule).
fn fine_timer_slack() {
    // SAFETY: PR_SET_TIMERSLACK takes one integer and only changes this thread's slack.
    unsafe {
        libc::prctl(libc::PR_SET_TIMERSLACK, 1 as libc::c_ulong);
    }
}

/// Takes every outcome; latency from each command's send time (scheduled in the open
/// loop) to its release. Returns the histogram and when the last outcome came.
fn receive(
    outcomes: Receiver<Released>,
    expected: usize,
    sent_at: &[AtomicU64],
    clock: Instant,
) -> Result<(Histogram<u64>, u64), String> {
    let mut histogram = Histogram::<u64>::new_with_bounds(1, 60_000_000_000, 3)
        .map_err(|error| error.to_string())?;
    let mut received = 0;
    let mut last_ns = 0;
    while received < expected {
        let released =
            outcomes.recv().map_err(|_| "the engine stopped before every outcome came")?;
        last_ns = clock.elapsed().as_nanos() as u64;
        for outcome in released.outcomes {
            let Outcome::Applied(result) = outcome else {
                return Err(format!("a command failed: {outcome:?}"));
            };
            let sent = sent_at[result.correlation as usize].load(Ordering::Relaxed);
            histogram.saturating_record(last_ns.saturating_sub(sent).max(1));
            received += 1;
        }
    }
    Ok((histogram, last_ns))
}
