//! `bourse bench snapshot`: does taking a snapshot pause intake? A durable engine
//! (`sync`) is filled with resting orders (1,000,000 by default); then an open-loop
//! stream of cancels and new orders runs while the periodic snapshot of that state is
//! taken. The snapshot is written by the snapshotter thread from its own copy of the
//! state, so the engine's thread never stops; this bench measures what intake sees:
//! release latency of the commands scheduled while the snapshot was being written,
//! against the others.

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bourse_core::command::{OrderCommand, OrderType, TransferCommand};
use bourse_core::{AccountRef, Command, Decimal, Offset, Side, StpMode, TimeInForce};
use bourse_engine::{Engine, EngineConfig, Outcome, Released, SubmitError};
use clap::Args;
use crossbeam_channel::unbounded;
use hdrhistogram::Histogram;

#[derive(Args)]
pub struct SnapshotArgs {
    /// Resting orders in the book when the snapshot is taken.
    #[arg(long, default_value_t = 1_000_000)]
    orders: usize,
    /// Rate of the measured stream, commands per second.
    #[arg(long, default_value_t = 100_000)]
    rate: u64,
    /// Length of the measured stream, in seconds.
    #[arg(long, default_value_t = 4)]
    seconds: u64,
    /// Where the data goes (a fresh directory, removed afterwards).
    #[arg(long)]
    data_dir: Option<PathBuf>,
    #[arg(long)]
    json: bool,
}

const ACCOUNTS: usize = 100;
const LEVELS_PER_SIDE: usize = 20_000;
const MID: usize = 100_000;

fn decimal(units: usize) -> Decimal {
    Decimal::from_units(units as i128, 0)
}

fn setup() -> Vec<Command<'static>> {
    let mut commands = vec![
        Command::Asset { asset: "USD".into(), decimals: 0 },
        Command::Asset { asset: "X".into(), decimals: 0 },
    ];
    let definition = r#"{"cmd":"instrument","symbol":"X-USD","base":"X","quote":"USD","tick":"1","lot":"1","min_qty":"1","max_qty":"1000000","maker_fee_bps":0,"taker_fee_bps":0,"market_band_bps":100}"#;
    if let Ok(parsed) = bourse_core::format::parse_line(definition) {
        commands.push(parsed.command.into_owned());
    }
    for account in 0..ACCOUNTS {
        for (asset, amount) in [("USD", 1_000_000_000_000usize), ("X", 1_000_000_000)] {
            commands.push(Command::Deposit(TransferCommand {
                account: format!("a{account}").into(),
                asset: asset.into(),
                amount: decimal(amount),
            }));
        }
    }
    commands
}

/// Resting order number `number`: buys below the middle, sells above, spread over
/// `LEVELS_PER_SIDE` prices a side.
fn resting_order(number: usize, variant: usize) -> Command<'static> {
    let side = if number.is_multiple_of(2) { Side::Buy } else { Side::Sell };
    let offset = 1 + (number / 2 + variant * 7) % LEVELS_PER_SIDE;
    let price = match side {
        Side::Buy => MID - offset,
        Side::Sell => MID + offset,
    };
    Command::Order(OrderCommand {
        account: AccountRef::Name(format!("a{}", number % ACCOUNTS).into()),
        id: format!("o{number}").into(),
        symbol: "X-USD".into(),
        side,
        order_type: OrderType::Limit { price: decimal(price) },
        size: bourse_core::OrderSize::of_qty(decimal(1 + number % 5)),
        time_in_force: TimeInForce::GoodTillCancel,
        post_only: false,
        stp: StpMode::None,
        offset: Offset::Open,
    })
}

fn cancel(number: usize) -> Command<'static> {
    Command::Cancel {
        account: AccountRef::Name(format!("a{}", number % ACCOUNTS).into()),
        id: format!("o{number}").into(),
    }
}

pub fn run(args: &SnapshotArgs) -> Result<(), String> {
    let data_dir = args.data_dir.clone().unwrap_or_else(|| {
        std::env::temp_dir().join(format!("bourse-bench-snapshot-{}", std::process::id()))
    });
    let _ = std::fs::remove_dir_all(&data_dir);
    let setup = setup();
    let mut config = EngineConfig::new(&data_dir);
    config.snapshot_on_shutdown = false;
    // Due once the book is full and the measured stream has run for about a second.
    config.snapshot_every_commands = (setup.len() + args.orders) as u64 + args.rate;
    let engine = Engine::start(config).map_err(|error| error.to_string())?;
    let (sink, outcomes) = unbounded::<Released>();
    let session = engine.open_session(Arc::new(sink));

    let fill_started = Instant::now();
    let filling: Vec<Command<'static>> =
        setup.into_iter().chain((0..args.orders).map(|number| resting_order(number, 0))).collect();
    submit_all(&session, &filling, &outcomes)?;
    let fill_secs = fill_started.elapsed().as_secs_f64();
    let resting = engine.query(|exchange| exchange.open_order_count()).unwrap_or(0);

    let measured: Vec<Command<'static>> = (0..(args.rate * args.seconds) as usize)
        .map(|index| {
            let number = (index / 2 * 7919) % args.orders;
            if index % 2 == 0 {
                cancel(number)
            } else {
                resting_order(number, 1 + index)
            }
        })
        .collect();
    let before = engine.stats().snapshots;
    let stop = AtomicBool::new(false);
    let (samples, (window_start_ns, window_end_ns)) = std::thread::scope(|scope| {
        let watcher = scope.spawn(|| watch_snapshot(&engine, before, &stop));
        let samples = open_loop(&session, &measured, &outcomes, args.rate);
        stop.store(true, Ordering::Relaxed);
        (samples, watcher.join().unwrap_or((u64::MAX, u64::MAX)))
    });
    let samples = samples?;
    let stats = engine.stats();
    drop(session);
    engine.shutdown()?;
    let _ = std::fs::remove_dir_all(&data_dir);

    let mut during = Histogram::<u64>::new_with_bounds(1, 60_000_000_000, 3)
        .map_err(|error| error.to_string())?;
    let mut outside = Histogram::<u64>::new_with_bounds(1, 60_000_000_000, 3)
        .map_err(|error| error.to_string())?;
    for (scheduled_ns, latency_ns) in samples {
        let histogram = if (window_start_ns..=window_end_ns).contains(&scheduled_ns) {
            &mut during
        } else {
            &mut outside
        };
        histogram.saturating_record(latency_ns.max(1));
    }
    if stats.snapshots == 0 {
        return Err("no snapshot was taken during the measured stream".to_string());
    }
    let report = serde_json::json!({
        "resting_orders": resting,
        "fill_secs": (fill_secs * 100.0).round() / 100.0,
        "snapshot_seq": stats.last_snapshot_seq,
        "snapshot_bytes": stats.last_snapshot_bytes,
        "snapshot_ms": stats.last_snapshot_ns / 1_000_000,
        "rate": args.rate,
        "during_snapshot": { "commands": during.len(), "p50_us": during.value_at_quantile(0.5) / 1000, "p99_us": during.value_at_quantile(0.99) / 1000, "max_us": during.max() / 1000 },
        "outside_snapshot": { "commands": outside.len(), "p50_us": outside.value_at_quantile(0.5) / 1000, "p99_us": outside.value_at_quantile(0.99) / 1000, "max_us": outside.max() / 1000 },
    });
    if args.json {
        println!("{report}");
    } else {
        println!(
            "snapshot of {resting} resting orders at record {} ({} bytes) took {} ms on the snapshotter thread; open loop at {}/s: during it release latency p50 {} us, p99 {} us, max {} us ({} commands); outside it p50 {} us, p99 {} us, max {} us",
            stats.last_snapshot_seq,
            stats.last_snapshot_bytes,
            stats.last_snapshot_ns / 1_000_000,
            args.rate,
            during.value_at_quantile(0.5) / 1000,
            during.value_at_quantile(0.99) / 1000,
            during.max() / 1000,
            during.len(),
            outside.value_at_quantile(0.5) / 1000,
            outside.value_at_quantile(0.99) / 1000,
            outside.max() / 1000
        );
    }
    Ok(())
}

fn submit_all(
    session: &bourse_engine::Session,
    commands: &[Command<'static>],
    outcomes: &crossbeam_channel::Receiver<Released>,
) -> Result<(), String> {
    let mut received = 0;
    for (index, command) in commands.iter().enumerate() {
        loop {
            match session.submit(command, index as u64) {
                Ok(_) => break,
                Err(SubmitError::Busy { .. }) => {
                    while let Ok(released) = outcomes.try_recv() {
                        received += released.outcomes.len();
                    }
                    std::thread::sleep(Duration::from_micros(100));
                }
                Err(error) => return Err(error.to_string()),
            }
        }
    }
    while received < commands.len() {
        received += outcomes.recv().map_err(|_| "the engine stopped")?.outcomes.len();
    }
    Ok(())
}

/// Sends `commands` on an open-loop schedule; returns (scheduled ns, latency ns) per
/// command, latency from the scheduled time.
fn open_loop(
    session: &bourse_engine::Session,
    commands: &[Command<'static>],
    outcomes: &crossbeam_channel::Receiver<Released>,
    rate: u64,
) -> Result<Vec<(u64, u64)>, String> {
    let clock = *CLOCK;
    let offset_ns = clock.elapsed().as_nanos() as u64;
    let scheduled: Vec<u64> =
        (0..commands.len() as u64).map(|index| offset_ns + index * 1_000_000_000 / rate).collect();
    let mut samples = Vec::with_capacity(commands.len());
    for (index, command) in commands.iter().enumerate() {
        while let Some(left) = Duration::from_nanos(scheduled[index]).checked_sub(clock.elapsed()) {
            if left.is_zero() {
                break;
            }
            std::thread::sleep(left.max(Duration::from_micros(50)));
            take(outcomes, &scheduled, clock, &mut samples)?;
        }
        session.submit(command, index as u64).map_err(|error| error.to_string())?;
    }
    while samples.len() < commands.len() {
        let released = outcomes.recv().map_err(|_| "the engine stopped")?;
        record(&released, &scheduled, clock, &mut samples)?;
    }
    Ok(samples)
}

fn take(
    outcomes: &crossbeam_channel::Receiver<Released>,
    scheduled: &[u64],
    clock: Instant,
    samples: &mut Vec<(u64, u64)>,
) -> Result<(), String> {
    while let Ok(released) = outcomes.try_recv() {
        record(&released, scheduled, clock, samples)?;
    }
    Ok(())
}

fn record(
    released: &Released,
    scheduled: &[u64],
    clock: Instant,
    samples: &mut Vec<(u64, u64)>,
) -> Result<(), String> {
    let now = clock.elapsed().as_nanos() as u64;
    for outcome in &released.outcomes {
        let Outcome::Applied(result) = outcome else { return Err(format!("failed: {outcome:?}")) };
        let at = scheduled[result.correlation.request as usize];
        samples.push((at, now.saturating_sub(at)));
    }
    Ok(())
}

static CLOCK: std::sync::LazyLock<Instant> = std::sync::LazyLock::new(Instant::now);

/// Watches the engine's snapshot counter; returns when the snapshot was written (its
/// end minus its duration), in ns of `CLOCK`.
fn watch_snapshot(engine: &Engine, before: u64, stop: &AtomicBool) -> (u64, u64) {
    let clock = *CLOCK;
    while !stop.load(Ordering::Relaxed) {
        let stats = engine.stats();
        if stats.snapshots > before {
            let end = clock.elapsed().as_nanos() as u64;
            return (end.saturating_sub(stats.last_snapshot_ns), end);
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    (u64::MAX, u64::MAX)
}
