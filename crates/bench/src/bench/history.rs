//! `bourse bench history`: what the history costs and how fast it answers.
//!
//! 1. Ingest: a journal is written (exchange-core's stream, or a generated flow in which
//!    nearly every command trades: `--source takers`), then the history follower reads
//!    it from the start, applies it to its copy of the state, derives the rows and
//!    commits Parquet files and the index: commands, engine events and rows per second.
//! 2. SQL: GROUP BY queries over all the trades (`--query-runs` runs each, median).
//! 3. Lookups: orders by id, trades by id and accounts' recent fills from the index,
//!    each timed alone (p50, p99, max).

use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Instant;

use bourse_core::command::{OrderCommand, OrderType, TransferCommand};
use bourse_core::{
    AccountRef, Command, Decimal, Offset, OrderId, Seq, Side, StpMode, TimeInForce, TimestampNs,
};
use bourse_history::{Follower, HistoryConfig, HistoryStats, Index};
use bourse_journal::{
    encode_command, scan_journal, JournalWriter, RecordBatch, TailPolicy, WriterOptions,
};
use clap::{Args, ValueEnum};
use hdrhistogram::Histogram;

use super::workload;

#[derive(Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Source {
    /// exchange-core's 3M-command stream (`--file`).
    ExchangeCore,
    /// Generated: 1,000 accounts taking from makers on two instruments, nearly one
    /// trade per command (`--commands`).
    Takers,
}

#[derive(Args)]
pub struct HistoryArgs {
    #[arg(long, value_enum, default_value = "takers")]
    source: Source,
    #[arg(long, default_value = "../shared/anchors/exchange-core/workload.jsonl.gz")]
    file: PathBuf,
    /// Commands of the generated flow.
    #[arg(long, default_value_t = 10_500_000)]
    commands: usize,
    /// Where the journal and the history go (a fresh temporary directory by default;
    /// an existing one with a journal is reused).
    #[arg(long)]
    data_dir: Option<PathBuf>,
    /// Runs of each query.
    #[arg(long, default_value_t = 5)]
    query_runs: usize,
    /// Lookups of each kind.
    #[arg(long, default_value_t = 100_000)]
    lookups: usize,
    /// Cores a query may use.
    #[arg(long, default_value_t = 2)]
    threads: usize,
    /// Commit whenever this many rows wait.
    #[arg(long, default_value_t = 1_000_000)]
    commit_rows: usize,
    /// Skip the ingest (the data directory has a history already).
    #[arg(long)]
    no_ingest: bool,
}

const DAY_START: u64 = 1_795_478_400_000_000_000;
const ACCOUNTS: usize = 1_000;

fn decimal(text: &str) -> Decimal {
    Decimal::parse(text).unwrap_or(Decimal::ZERO)
}

fn order(
    account: usize,
    id: String,
    symbol: &'static str,
    side: Side,
    price: &str,
    qty: &str,
    tif: TimeInForce,
) -> Command<'static> {
    Command::Order(OrderCommand {
        account: AccountRef::Name(format!("a{account}").into()),
        id: id.into(),
        symbol: symbol.into(),
        side,
        order_type: OrderType::Limit { price: decimal(price) },
        size: bourse_core::OrderSize::of_qty(decimal(qty)),
        time_in_force: tif,
        post_only: false,
        stp: StpMode::None,
        offset: Offset::Open,
    })
}

/// The generated flow: every 50th command a maker of 5 (BTC or ETH) at 100.00 / 100.01
/// (ask above bid), every other a taker IOC of 0.01 that crosses.
fn takers(commands: usize) -> Vec<Command<'static>> {
    let mut flow: Vec<Command<'static>> = Vec::with_capacity(commands);
    for (asset, decimals) in [("USD", 6), ("BTC", 8), ("ETH", 8)] {
        flow.push(Command::Asset { asset: asset.into(), decimals });
    }
    for (symbol, base) in [("BTC-USD", "BTC"), ("ETH-USD", "ETH")] {
        flow.push(Command::Instrument(Box::new(bourse_core::command::InstrumentCommand {
            symbol: symbol.into(),
            base: base.into(),
            quote: "USD".into(),
            tick: decimal("0.01"),
            lot: decimal("0.01"),
            min_qty: decimal("0.01"),
            max_qty: decimal("1000"),
            maker_fee_bps: 1,
            taker_fee_bps: 5,
            market_band_bps: 1_000,
        })));
    }
    for account in 0..ACCOUNTS {
        for (asset, amount) in [("USD", "1000000000"), ("BTC", "10000000"), ("ETH", "10000000")] {
            flow.push(Command::Deposit(TransferCommand {
                account: format!("a{account}").into(),
                asset: asset.into(),
                amount: decimal(amount),
            }));
        }
    }
    let mut state = 0x9e37_79b9_7f4a_7c15u64;
    let mut next = move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    };
    while flow.len() < commands {
        let index = flow.len();
        let random = next();
        let account = (random % ACCOUNTS as u64) as usize;
        let symbol = if random & (1 << 20) == 0 { "BTC-USD" } else { "ETH-USD" };
        let id = format!("c{index}");
        if index % 50 < 2 {
            let side = if index.is_multiple_of(2) { Side::Sell } else { Side::Buy };
            let price = if side == Side::Sell { "100.01" } else { "100.00" };
            flow.push(order(account, id, symbol, side, price, "5", TimeInForce::GoodTillCancel));
        } else {
            let side = if random & (1 << 21) == 0 { Side::Buy } else { Side::Sell };
            let price = if side == Side::Buy { "100.02" } else { "99.99" };
            flow.push(order(
                account,
                id,
                symbol,
                side,
                price,
                "0.01",
                TimeInForce::ImmediateOrCancel,
            ));
        }
    }
    flow
}

fn write_journal(dir: &Path, commands: &[Command<'static>]) -> Result<(), String> {
    std::fs::create_dir_all(dir).map_err(|error| format!("{}: {error}", dir.display()))?;
    let report =
        scan_journal(dir, TailPolicy::Repair, |_, _| Ok(())).map_err(|error| error.to_string())?;
    if report.next_seq > Seq(1) {
        return Err(format!("{} has a journal already", dir.display()));
    }
    let mut writer = JournalWriter::open(dir, &report, WriterOptions::default(), Seq(1), 0)
        .map_err(|error| error.to_string())?;
    let mut batch = RecordBatch::with_capacity(4_096, 1 << 20);
    for (index, chunk) in commands.chunks(4_096).enumerate() {
        batch.clear();
        for (offset, command) in chunk.iter().enumerate() {
            // 1 ms apart on the engine's clock.
            let ts = DAY_START + (index * 4_096 + offset) as u64 * 1_000_000;
            batch
                .push(TimestampNs(ts), |out| encode_command(command, out))
                .map_err(|error| error.to_string())?;
        }
        writer.write(&mut batch).map_err(|error| error.to_string())?;
    }
    writer.sync().map_err(|error| error.to_string())
}

pub fn run(args: &HistoryArgs) -> Result<(), String> {
    let temporary =
        std::env::temp_dir().join(format!("bourse-bench-history-{}", std::process::id()));
    let data_dir = args.data_dir.clone().unwrap_or(temporary);
    if !args.no_ingest {
        ingest(args, &data_dir)?;
    }
    queries(args, &data_dir)?;
    lookups(args, &data_dir)?;
    if args.data_dir.is_none() {
        let _ = std::fs::remove_dir_all(&data_dir);
    }
    Ok(())
}

fn ingest(args: &HistoryArgs, data_dir: &Path) -> Result<(), String> {
    let commands = match args.source {
        Source::Takers => takers(args.commands),
        Source::ExchangeCore => {
            let stream = workload::from_file(
                "exchange-core",
                &args.file,
                super::engine::EXCHANGE_CORE_SETUP_LINES,
            )?;
            stream.setup.into_iter().chain(stream.measured).collect()
        }
    };
    let journal_dir = data_dir.join("journal");
    let started = Instant::now();
    write_journal(&journal_dir, &commands)?;
    eprintln!(
        "journal: {} commands written in {:.1} s",
        commands.len(),
        started.elapsed().as_secs_f64()
    );
    drop(commands);

    let stats = Arc::new(HistoryStats::default());
    let started = Instant::now();
    let mut config = HistoryConfig::under(data_dir);
    config.commit_rows = args.commit_rows.max(1);
    let mut follower =
        Follower::open(config, Arc::clone(&stats)).map_err(|error| error.to_string())?;
    let end = scan_journal(&journal_dir, TailPolicy::ReadOnly, |_, _| Ok(()))
        .map_err(|error| error.to_string())?
        .next_seq
        .previous();
    follower.catch_up(end).map_err(|error| error.to_string())?;
    let end = end.0;
    let applied = started.elapsed().as_secs_f64();
    follower.commit().map_err(|error| error.to_string())?;
    let seconds = started.elapsed().as_secs_f64();
    println!(
        "ingest: caught up (and committed every {} rows) in {applied:.2} s, last commit {:.2} s",
        args.commit_rows,
        seconds - applied
    );
    let events = stats.events.load(Ordering::Relaxed);
    let rows = stats.rows.load(Ordering::Relaxed);
    println!(
        "ingest: {end} commands, {events} events, {rows} rows, {} files, {:.1} MB in {seconds:.2} s: {:.0} commands/s, {:.0} events/s, {:.0} rows/s",
        stats.files.load(Ordering::Relaxed),
        stats.bytes.load(Ordering::Relaxed) as f64 / 1e6,
        end as f64 / seconds,
        events as f64 / seconds,
        rows as f64 / seconds,
    );
    for (table, count) in &follower.checkpoint().rows {
        println!("ingest: {table} {count} rows");
    }
    // What a quiet server does next: merge the small files (one per commit).
    let started = Instant::now();
    let (merges, replaced, merged_rows) =
        follower.merge_all_small_files().map_err(|error| error.to_string())?;
    let seconds = started.elapsed().as_secs_f64();
    let files = bourse_history::files::part_files(&data_dir.join("history"))
        .map_err(|error| error.to_string())?
        .len();
    println!(
        "merge: {replaced} small files into {merges} in {seconds:.2} s ({merged_rows} rows, {:.0} rows/s); {files} files now",
        merged_rows as f64 / seconds.max(1e-9)
    );
    Ok(())
}

#[cfg(feature = "sql")]
fn queries(args: &HistoryArgs, data_dir: &Path) -> Result<(), String> {
    let sql = bourse_query::HistorySql::open(&data_dir.join("history"), args.threads)
        .map_err(|error| error.to_string())?;
    let count = sql
        .query_rendered("SELECT count(*) AS trades FROM trades", bourse_query::Format::Csv)
        .map_err(|error| error.to_string())?;
    println!("sql: {} trades", count.lines().nth(1).unwrap_or("?"));
    let cases = [
        ("volume per taker account", "SELECT taker_account, count(*) AS trades, sum(qty) AS volume, sum(notional) AS notional FROM trades GROUP BY taker_account"),
        ("vwap per symbol and minute", "SELECT symbol, date_trunc('minute', ts) AS minute, CAST(sum(notional) AS DOUBLE) / CAST(sum(qty) AS DOUBLE) AS vwap, sum(qty) AS volume FROM trades GROUP BY symbol, date_trunc('minute', ts)"),
        ("fees per symbol", "SELECT symbol, sum(maker_fee) AS maker_fees, sum(taker_fee) AS taker_fees FROM trades GROUP BY symbol"),
    ];
    for (name, query) in cases {
        let mut times = Vec::new();
        let mut groups = 0;
        for _ in 0..args.query_runs.max(1) {
            let started = Instant::now();
            let batches = sql.query(query).map_err(|error| error.to_string())?;
            times.push(started.elapsed().as_secs_f64());
            groups = batches.iter().map(|batch| batch.num_rows()).sum::<usize>();
        }
        times.sort_by(f64::total_cmp);
        println!(
            "sql: {name}: {groups} groups, median {:.3} s (min {:.3}, max {:.3}, {} runs)",
            times[times.len() / 2],
            times[0],
            times[times.len() - 1],
            times.len()
        );
    }
    Ok(())
}

#[cfg(not(feature = "sql"))]
fn queries(_: &HistoryArgs, _: &Path) -> Result<(), String> {
    println!("sql: not in this build (feature `sql`)");
    Ok(())
}

fn lookups(args: &HistoryArgs, data_dir: &Path) -> Result<(), String> {
    let index =
        Index::open(&data_dir.join("history").join("index")).map_err(|error| error.to_string())?;
    let checkpoint: bourse_history::Checkpoint = serde_json::from_slice(
        &std::fs::read(data_dir.join("history").join("checkpoint.json"))
            .map_err(|error| error.to_string())?,
    )
    .map_err(|error| error.to_string())?;
    let last = checkpoint.committed_seq.0.max(1);
    let mut state = 0x2545_f491_4f6c_dd1du64;
    let mut next = move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    };
    let mut report = |name: &str,
                      mut lookup: Box<dyn FnMut(u64) -> Result<bool, String> + '_>|
     -> Result<(), String> {
        let mut histogram = Histogram::<u64>::new(3).map_err(|error| error.to_string())?;
        let mut found = 0usize;
        let started = Instant::now();
        for _ in 0..args.lookups {
            let key = next();
            let one = Instant::now();
            found += usize::from(lookup(key)?);
            histogram.record(one.elapsed().as_nanos() as u64).map_err(|error| error.to_string())?;
        }
        println!(
            "lookup: {name}: {} of {} found, p50 {:.1} µs, p99 {:.1} µs, max {:.1} µs ({:.0}/s)",
            found,
            args.lookups,
            histogram.value_at_quantile(0.5) as f64 / 1e3,
            histogram.value_at_quantile(0.99) as f64 / 1e3,
            histogram.max() as f64 / 1e3,
            args.lookups as f64 / started.elapsed().as_secs_f64()
        );
        Ok(())
    };
    report(
        "order by id",
        Box::new(|key| {
            Ok(index.order(OrderId(1 + key % last)).map_err(|error| error.to_string())?.is_some())
        }),
    )?;
    report(
        "trade by id",
        Box::new(|key| {
            Ok(index.trade(Seq(1 + key % last), 0).map_err(|error| error.to_string())?.is_some())
        }),
    )?;
    report(
        "an account's 20 most recent fills",
        Box::new(|key| {
            let account = match args.source {
                Source::Takers => format!("a{}", key % ACCOUNTS as u64),
                // exchange-core's users are `u1` .. `u1000` in the replay format.
                Source::ExchangeCore => format!("u{}", 1 + key % 1_000),
            };
            Ok(!index.recent_fills(&account, 20).map_err(|error| error.to_string())?.is_empty())
        }),
    )?;
    Ok(())
}
