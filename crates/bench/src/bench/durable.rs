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
//!   of its outcome (`Released::released_ns`, stamped when the engine hands it to the
//!   sink), so a stall delays every command scheduled during it (no coordinated
//!   omission), the producer's own lateness included. Beside it, the same latency to
//!   when the producer thread read the outcome, which adds that thread's reading lag
//!   (it reads between sends). Late commands (`--late-us`) are sorted by what they met:
//!   a slow sync (`Engine::slow_syncs`), a wait before the sequencer, or neither.
//!   Without `--rate`, the open-loop pass runs at half the rate the throughput pass
//!   reached.

use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bourse_cluster::{NodeConfig, NodeId, PeerMap, ReplicaConfig};
use bourse_core::Command;
use bourse_engine::{
    ClusterSettings, Durability, Engine, EngineConfig, Outcome, Released, StatsSnapshot,
    SubmitError, DIGEST_EVERY_DEFAULT, SLOW_SYNC_NS,
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
    /// Take a periodic snapshot every this many commands (0: none, the default), to see
    /// what the snapshotter's second copy of the state costs.
    #[arg(long, default_value_t = 0)]
    snapshot_every: u64,
    /// Release latency above which an open-loop command counts as late; late commands
    /// are sorted by what they met (a slow sync, a wait before the sequencer, or
    /// neither).
    #[arg(long, default_value_t = 1500)]
    late_us: u64,
    /// Where the journal goes (a fresh directory, removed afterwards).
    #[arg(long)]
    data_dir: Option<PathBuf>,
    /// Run a cluster of this many engines on loopback (3 or 5; `docs/cluster.md`) and
    /// submit to its leader: an outcome is released once a majority of nodes hold its
    /// command durably. 0: one engine.
    #[arg(long, default_value_t = 0)]
    cluster: u64,
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
    late: Option<LateBreakdown>,
    /// Periodic snapshots taken during the pass.
    snapshots: u64,
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

    let engine_options = EngineOptions {
        durability,
        segment_bytes: args.segment_mib << 20,
        snapshot_every: args.snapshot_every,
        cluster: args.cluster,
    };
    let throughput =
        pass(&base_dir.join("throughput"), engine_options, &workload.setup, &measured, None, 0)?;
    let max_rate = throughput.commands as f64 / throughput.seconds;
    let rate = args.rate.unwrap_or((max_rate / 2.0) as u64).max(1);
    let open_loop = pass(
        &base_dir.join("open-loop"),
        engine_options,
        &workload.setup,
        &measured,
        Some(rate),
        args.late_us,
    )?;
    let _ = std::fs::remove_dir_all(&base_dir);

    let mean_batch = throughput.commands as f64 / throughput.batches.max(1) as f64;
    let latency = &open_loop.latency;
    let split = open_loop.split.as_ref();
    let open_loop_batch =
        (open_loop.commands as f64 / open_loop.batches.max(1) as f64 * 10.0).round() / 10.0;
    let late = open_loop.late.as_ref();
    if args.json {
        println!(
            "{}",
            serde_json::json!({
                "workload": workload.name,
                "host": crate::host::facts(),
                "mode": durability.name(),
                "cluster_nodes": args.cluster,
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
                "observed_p50_ns": split.map(|split| split.observed.value_at_quantile(0.50)),
                "observed_p99_ns": split.map(|split| split.observed.value_at_quantile(0.99)),
                "observed_p999_ns": split.map(|split| split.observed.value_at_quantile(0.999)),
                "observed_max_ns": split.map(|split| split.observed.max()),
                "closed_loop_p50_ns": throughput.latency.value_at_quantile(0.50),
                "closed_loop_p99_ns": throughput.latency.value_at_quantile(0.99),
                "late_us": args.late_us,
                "late_commands": late.map(|late| late.late),
                "late_with_slow_sync": late.map(|late| late.with_slow_sync),
                "late_queued": late.map(|late| late.queued),
                "late_other": late.map(|late| late.other),
                "open_loop_slow_syncs": late.map(|late| late.slow_syncs),
                "snapshot_every": args.snapshot_every,
                "snapshots": throughput.snapshots,
                "open_loop_snapshots": open_loop.snapshots,
            })
        );
    } else {
        if args.cluster > 0 {
            println!(
                "a cluster of {} engines on loopback: released once a majority holds each \
                 command (the syncs below are the leader's journal's, in the background)",
                args.cluster
            );
        }
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
        if args.snapshot_every > 0 {
            println!(
                "  a snapshot every {} commands: {} during the throughput pass, {} during the open loop",
                args.snapshot_every, throughput.snapshots, open_loop.snapshots
            );
        }
        if let Some(split) = split {
            println!(
                "  as the producer thread read them: p50 {} us, p99 {} us, p99.9 {} us, max {} us",
                split.observed.value_at_quantile(0.50) / 1000,
                split.observed.value_at_quantile(0.99) / 1000,
                split.observed.value_at_quantile(0.999) / 1000,
                split.observed.max() / 1000
            );
        }
        if let Some(late) = late {
            println!(
                "  {} commands released later than {} us: {} with a sync of 1 ms or more in flight ({} such syncs, the slowest {} us), {} waited 1 ms or more before the sequencer, {} neither",
                late.late,
                args.late_us,
                late.with_slow_sync,
                late.slow_syncs,
                late.slowest_sync_ns / 1000,
                late.queued,
                late.other
            );
        }
    }
    Ok(())
}

/// How each pass's engine is configured.
#[derive(Clone, Copy)]
struct EngineOptions {
    durability: Durability,
    segment_bytes: u64,
    snapshot_every: u64,
    /// Nodes of a cluster on loopback (0: one engine).
    cluster: u64,
}

/// The engines of a pass: the one commands go to (the cluster's leader), and the others.
struct Engines {
    serving: Engine,
    others: Vec<Engine>,
}

impl Engines {
    fn start(data_dir: &std::path::Path, options: EngineOptions) -> Result<Engines, String> {
        let config = |dir: std::path::PathBuf| {
            let mut config = EngineConfig::new(dir);
            config.durability = options.durability;
            config.segment_bytes = options.segment_bytes;
            config.snapshot_every_commands = options.snapshot_every;
            config.snapshot_on_shutdown = false;
            config
        };
        if options.cluster == 0 {
            let engine =
                Engine::start(config(data_dir.to_path_buf())).map_err(|e| e.to_string())?;
            return Ok(Engines { serving: engine, others: Vec::new() });
        }
        let addresses: std::collections::BTreeMap<NodeId, std::net::SocketAddr> = (1..=options
            .cluster)
            .map(|id| {
                let address = std::net::TcpListener::bind("127.0.0.1:0")
                    .and_then(|listener| listener.local_addr())
                    .map_err(|error| error.to_string())?;
                Ok((NodeId(id), address))
            })
            .collect::<Result<_, String>>()?;
        let mut engines = Vec::new();
        for id in 1..=options.cluster {
            let mut config = config(data_dir.join(format!("node-{id}")));
            config.cluster = Some(ClusterSettings {
                replica: ReplicaConfig {
                    node: NodeConfig::new(NodeId(id)),
                    peers: PeerMap { cluster: 1, me: NodeId(id), addresses: addresses.clone() },
                    tick: Duration::from_millis(50),
                },
                initial_voters: (1..=options.cluster).collect(),
                digest_every: DIGEST_EVERY_DEFAULT,
                records: None,
            });
            engines.push(Engine::start(config).map_err(|error| error.to_string())?);
        }
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let leader = engines.iter().position(|engine| {
                engine.cluster_status().is_some_and(|status| status.status.is_leader)
            });
            if let Some(leader) = leader {
                let serving = engines.swap_remove(leader);
                return Ok(Engines { serving, others: engines });
            }
            if Instant::now() > deadline {
                return Err("the cluster elected no leader within 10 s".to_string());
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    fn shutdown(self) -> Result<(), String> {
        let serving = self.serving.shutdown();
        for other in self.others {
            other.shutdown()?;
        }
        serving
    }
}

/// One run on a fresh engine: the setup (not timed), then the measured commands, either
/// as fast as possible (`rate` None) or on an open-loop schedule (late commands: over
/// `late_us`).
fn pass(
    data_dir: &std::path::Path,
    options: EngineOptions,
    setup: &[Command<'static>],
    measured: &[Command<'static>],
    rate: Option<u64>,
    late_us: u64,
) -> Result<PassResult, String> {
    let _ = std::fs::remove_dir_all(data_dir);
    let engines = Engines::start(data_dir, options)?;
    let engine = &engines.serving;
    run_setup(engine, setup)?;

    let (sink, outcomes) = unbounded();
    let session = engine.open_session(Arc::new(sink));
    if rate.is_some() {
        fine_timer_slack();
    }
    let clock = Instant::now();
    let before = engine.stats();
    let timed = match rate {
        Some(rate) => open_loop(&session, &outcomes, measured, rate, clock, late_us * 1000)?,
        None => closed_loop(&session, outcomes, measured, clock)?,
    };
    let after = engine.stats();
    let snapshots = after.snapshots - before.snapshots;
    let late = timed.split.as_ref().map(|split| split.late_breakdown(&engine.slow_syncs()));
    drop(session);
    engines.shutdown()?;
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
        late,
        snapshots,
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
/// latency), scheduled time to the sequencer's stamp (queueing and the sync before), and
/// the commands released later than the bound, to be matched with the slow syncs.
struct Split {
    late: Histogram<u64>,
    to_sequenced: Histogram<u64>,
    /// Scheduled time to when the producer read the outcome (its own reading lag in).
    observed: Histogram<u64>,
    late_commands: Vec<LateCommand>,
    /// The wall clock (ns since the epoch, the clock of `ts` and of slow syncs) when the
    /// pass's clock read 0.
    wall_at_clock: u64,
}

/// A command released later than the bound: when it was scheduled, stamped by the
/// sequencer and released, in ns of the pass's clock.
struct LateCommand {
    scheduled: u64,
    sequenced: u64,
    released: u64,
}

/// What the late commands of an open-loop pass met: a journal sync of 1 ms or more in
/// flight between their schedule and their release (the disk's tail), else a wait of
/// 1 ms or more before the sequencer stamped them (the producer or the intake behind),
/// else neither (the write, a normal sync, the applying and the release took that long:
/// the machine was short of CPU).
struct LateBreakdown {
    late: u64,
    with_slow_sync: u64,
    queued: u64,
    other: u64,
    slow_syncs: u64,
    slowest_sync_ns: u64,
}

impl Split {
    fn late_breakdown(&self, slow_syncs: &[bourse_engine::SlowSync]) -> LateBreakdown {
        // Slow syncs in the pass's clock, as [start, end), by start.
        let mut syncs: Vec<(u64, u64)> = slow_syncs
            .iter()
            .filter_map(|sync| {
                let ended = sync.ended_ns.checked_sub(self.wall_at_clock)?;
                Some((ended.saturating_sub(sync.took_ns), ended))
            })
            .collect();
        syncs.sort_unstable();
        // The latest end among the syncs that started up to each one: a command met a
        // slow sync if one started before its release and ended after its schedule.
        let latest_end: Vec<u64> = syncs
            .iter()
            .scan(0, |latest, &(_, end)| {
                *latest = end.max(*latest);
                Some(*latest)
            })
            .collect();
        let mut breakdown = LateBreakdown {
            late: self.late_commands.len() as u64,
            with_slow_sync: 0,
            queued: 0,
            other: 0,
            slow_syncs: syncs.len() as u64,
            slowest_sync_ns: syncs.iter().map(|(start, end)| end - start).max().unwrap_or(0),
        };
        for command in &self.late_commands {
            let started_before = syncs.partition_point(|&(start, _)| start < command.released);
            let met_slow_sync =
                started_before > 0 && latest_end[started_before - 1] > command.scheduled;
            if met_slow_sync {
                breakdown.with_slow_sync += 1;
            } else if command.sequenced.saturating_sub(command.scheduled) >= SLOW_SYNC_NS {
                breakdown.queued += 1;
            } else {
                breakdown.other += 1;
            }
        }
        breakdown
    }
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
    late_bound_ns: u64,
) -> Result<Timed, String> {
    let scheduled = |index: usize| index as u64 * 1_000_000_000 / rate;
    let mut late_commands = Vec::new();
    let mut histogram = Histogram::<u64>::new_with_bounds(1, 60_000_000_000, 3)
        .map_err(|error| error.to_string())?;
    // Where the time goes: scheduled -> stamped by the sequencer (queueing, the sync
    // before) and stamped -> released (own write and sync, apply, release); and when
    // this thread got to read each release (it reads between its sends, so a backlog
    // of sends delays its reading).
    let mut to_sequenced = histogram.clone();
    let mut late = histogram.clone();
    let mut observed = histogram.clone();
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
                let released_at = released.released_ns.0.saturating_sub(wall_at_clock);
                for outcome in released.outcomes {
                    let Outcome::Applied(result) = outcome else {
                        return Err(format!("a command failed: {outcome:?}"));
                    };
                    let sent = scheduled(result.correlation.request as usize);
                    let latency = released_at.saturating_sub(sent);
                    histogram.saturating_record(latency.max(1));
                    observed.saturating_record(last_ns.saturating_sub(sent).max(1));
                    let sequenced = result.ts.0.saturating_sub(wall_at_clock);
                    to_sequenced.saturating_record(sequenced.saturating_sub(sent).max(1));
                    if latency > late_bound_ns {
                        late_commands.push(LateCommand {
                            scheduled: sent,
                            sequenced,
                            released: released_at,
                        });
                    }
                    received += 1;
                }
            }
            Err(crossbeam_channel::RecvTimeoutError::Timeout) => {}
            Err(crossbeam_channel::RecvTimeoutError::Disconnected) => {
                return Err("the engine stopped before every outcome came".to_string())
            }
        }
    }
    let split = Split { late, to_sequenced, observed, late_commands, wall_at_clock };
    Ok(Timed { latency: histogram, last_ns, split: Some(split) })
}

fn wall_ns() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |since| since.as_nanos() as u64)
}

/// Syncs of `ns` (a power of two) or longer between two readings.
fn sync_count_over(before: &StatsSnapshot, after: &StatsSnapshot, ns: u64) -> u64 {
    // Bucket `b` counts syncs of 2^(b-1) to 2^b ns.
    let first_bucket = 64 - ns.leading_zeros() as usize;
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
            Ok(_) => return Ok(()),
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
            let sent = sent_at[result.correlation.request as usize].load(Ordering::Relaxed);
            histogram.saturating_record(last_ns.saturating_sub(sent).max(1));
            received += 1;
        }
    }
    Ok((histogram, last_ns))
}

#[cfg(test)]
mod tests {
    use bourse_engine::SlowSync;

    use super::*;

    fn histogram() -> Histogram<u64> {
        Histogram::new_with_bounds(1, 60_000_000_000, 3).unwrap()
    }

    #[test]
    fn late_commands_are_sorted_by_what_they_met() {
        const MS: u64 = 1_000_000;
        let wall_at_clock = 1_000_000 * MS;
        let late = |scheduled: u64, sequenced: u64, released: u64| LateCommand {
            scheduled: scheduled * MS,
            sequenced: sequenced * MS,
            released: released * MS,
        };
        let split = Split {
            late: histogram(),
            to_sequenced: histogram(),
            observed: histogram(),
            late_commands: vec![
                late(10, 10, 13), // in flight while the 11-14 ms sync ran
                late(14, 14, 16), // after it ended, stamped at once: neither
                late(20, 22, 24), // waited 2 ms before the sequencer
                late(30, 30, 32), // neither
                late(40, 41, 43), // a sync from 39.5 to 40.5 ms was in flight
            ],
            wall_at_clock,
        };
        // Slow syncs as the engine keeps them: when they ended, on the wall clock; one
        // ended before the pass began and is left out.
        let slow_syncs = [
            SlowSync { ended_ns: wall_at_clock - MS, took_ns: 2 * MS },
            SlowSync { ended_ns: wall_at_clock + 14 * MS, took_ns: 3 * MS },
            SlowSync { ended_ns: wall_at_clock + 40 * MS + MS / 2, took_ns: MS },
        ];
        let breakdown = split.late_breakdown(&slow_syncs);
        assert_eq!(breakdown.late, 5);
        assert_eq!(
            (breakdown.with_slow_sync, breakdown.queued, breakdown.other),
            (2, 1, 2),
            "slow sync / queued / neither"
        );
        assert_eq!((breakdown.slow_syncs, breakdown.slowest_sync_ns), (2, 3 * MS));
    }
}
