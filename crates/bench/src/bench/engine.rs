//! `bourse bench engine`: the core alone, in process, on one thread. Commands are
//! generated or read and parsed before timing; the timed part is `Exchange::apply`
//! (events included, printing excluded).
//!
//! Orders, cancels and amends name their account by id by default, as a gateway submits
//! them once it has resolved its client's account at login; `--accounts by-name` keeps
//! the names of the replay format, so the engine looks each one up.
//!
//! Before each command the bench gives the cache hints of `bourse_core::Lookahead` for
//! the commands after it, as the engine's batch loop does; they are timed with the
//! command they precede. `--lookahead off` applies every command cold.
//!
//! Two passes over a fresh engine each: one timed as a whole for throughput, one timing
//! every command into an HDR histogram for the latency percentiles (reading the clock
//! per command costs tens of nanoseconds, which would distort the throughput figure).

use std::path::PathBuf;
use std::time::Instant;

use bourse_core::format::{parse_line, write_command};
use bourse_core::{AccountRef, Command, Event, Exchange, ExchangeConfig, Lookahead, Seq};
use clap::{Args, ValueEnum};
use hdrhistogram::Histogram;

use super::workload::{self, Market, MixSpec, Workload};

#[derive(Clone, Copy, ValueEnum)]
pub enum WorkloadName {
    /// exchange-core's own 3M-command benchmark stream (needs --file).
    ExchangeCore,
    /// Generated exchange-core mix on one symbol.
    EcMix,
    /// Generated exchange-core mix over 100 symbols.
    EcMix100,
    /// Generated exchange-core mix on one futures contract, half the new orders closing.
    EcMixFutures,
}

/// How the measured commands name their accounts.
#[derive(Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum AccountNaming {
    /// By the id resolved at login, as the gateways submit commands.
    ById,
    /// By name, as the replay format does.
    ByName,
}

#[derive(Args)]
pub struct EngineArgs {
    #[command(flatten)]
    pub source: WorkloadArgs,
    #[arg(long, value_enum, default_value = "by-id")]
    accounts: AccountNaming,
    /// Cache hints for the commands ahead (`bourse_core::Lookahead`), as the engine
    /// gives them while it applies a batch; `off` applies each command cold.
    #[arg(long, value_enum, default_value = "on")]
    lookahead: Switch,
    /// Timed throughput passes (each on a fresh engine); the median is reported.
    #[arg(long, default_value_t = 5)]
    repeat: usize,
    /// Print the result as one JSON object.
    #[arg(long)]
    json: bool,
}

#[derive(Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Switch {
    On,
    Off,
}

/// Which workload, and its size.
#[derive(Args)]
pub struct WorkloadArgs {
    #[arg(long, value_enum, default_value = "ec-mix")]
    workload: WorkloadName,
    /// The exchange-core stream (`shared/anchors/exchange-core/workload.jsonl.gz`).
    #[arg(long, default_value = "../shared/anchors/exchange-core/workload.jsonl.gz")]
    file: PathBuf,
    /// Commands to generate for the generated workloads.
    #[arg(long, default_value_t = 3_000_000)]
    commands: usize,
    /// Seed of the generated workloads.
    #[arg(long, default_value_t = 1)]
    seed: u64,
}

/// Lines of the exchange-core stream before its 3,000,000 benchmark commands: 2 assets,
/// 1 instrument, 2,000 deposits, 1,000 prefill orders.
pub const EXCHANGE_CORE_SETUP_LINES: usize = 3_003;

pub struct EngineResult {
    pub workload: String,
    /// `by-id` or `by-name`.
    pub accounts: &'static str,
    pub lookahead: bool,
    pub commands: usize,
    /// The median of the throughput passes, and their range.
    pub commands_per_sec: f64,
    pub commands_per_sec_min: f64,
    pub commands_per_sec_max: f64,
    pub passes: usize,
    pub p50_ns: u64,
    pub p99_ns: u64,
    pub p999_ns: u64,
    pub max_ns: u64,
    pub rejected: usize,
}

pub fn run(args: &EngineArgs) -> Result<(), String> {
    let workload = load(&args.source)?;
    let result = measure(&workload, args.accounts, args.lookahead == Switch::On, args.repeat)?;
    if args.json {
        println!(
            "{}",
            serde_json::json!({
                "workload": result.workload,
                "accounts": result.accounts,
                "lookahead": result.lookahead,
                "commands": result.commands,
                "commands_per_sec": result.commands_per_sec.round(),
                "commands_per_sec_min": result.commands_per_sec_min.round(),
                "commands_per_sec_max": result.commands_per_sec_max.round(),
                "passes": result.passes,
                "p50_ns": result.p50_ns,
                "p99_ns": result.p99_ns,
                "p999_ns": result.p999_ns,
                "max_ns": result.max_ns,
                "rejected": result.rejected,
                "host": crate::host::facts(),
            })
        );
    } else {
        println!("host: {}", crate::host::summary_line(&crate::host::facts()));
        println!(
            "{} (accounts {}, lookahead {}): {} commands, {:.2} M commands/s (median of {} passes, range {:.2}-{:.2}); latency p50 {} ns, p99 {} ns, p99.9 {} ns, max {} ns; {} rejected",
            result.workload,
            result.accounts,
            if result.lookahead { "on" } else { "off" },
            result.commands,
            result.commands_per_sec / 1e6,
            result.passes,
            result.commands_per_sec_min / 1e6,
            result.commands_per_sec_max / 1e6,
            result.p50_ns,
            result.p99_ns,
            result.p999_ns,
            result.max_ns,
            result.rejected
        );
    }
    Ok(())
}

pub fn load(args: &WorkloadArgs) -> Result<Workload, String> {
    let mix = |symbols, market| MixSpec {
        symbols,
        accounts: 1_000,
        resting_orders_target: 1_000,
        commands: args.commands,
        seed: args.seed,
        market,
    };
    match args.workload {
        WorkloadName::ExchangeCore => {
            workload::from_file("exchange-core", &args.file, EXCHANGE_CORE_SETUP_LINES)
        }
        WorkloadName::EcMix => Ok(workload::generate_mix("ec-mix", mix(1, Market::Spot))),
        WorkloadName::EcMix100 => Ok(workload::generate_mix("ec-mix-100", mix(100, Market::Spot))),
        WorkloadName::EcMixFutures => {
            Ok(workload::generate_mix("ec-mix-futures", mix(1, Market::Futures)))
        }
    }
}

/// A fresh engine with the workload's setup applied.
fn prepared_engine(workload: &Workload, events: &mut Vec<Event>) -> Exchange {
    let mut exchange = Exchange::new(ExchangeConfig::default());
    for (index, command) in workload.setup.iter().enumerate() {
        exchange.apply(Seq(index as u64 + 1), None, command, events);
        events.clear();
    }
    exchange
}

/// The measured commands re-parsed from one contiguous text, so that their strings lie
/// in input order the way they do in a gateway's receive buffer, rather than scattered
/// over the heap one allocation each.
fn contiguous_commands<'text>(
    commands: &[Command<'_>],
    text: &'text mut String,
) -> Result<Vec<Command<'text>>, String> {
    for command in commands {
        write_command(text, command, None);
    }
    text.lines()
        .map(|line| parse_line(line).map(|parsed| parsed.command).map_err(|error| error.0))
        .collect()
}

/// `resolve_accounts` with the ids a fresh engine gives the workload's accounts.
pub fn resolve_accounts_after_setup(commands: &mut [Command<'_>], workload: &Workload) {
    let mut events = Vec::new();
    resolve_accounts(commands, &prepared_engine(workload, &mut events));
}

/// Names the accounts of orders, cancels and amends by id, as a gateway does once its
/// client has logged in. The ids are those the setup gave the accounts, the same in
/// every fresh engine; accounts the setup did not create keep their names.
fn resolve_accounts(commands: &mut [Command<'_>], exchange: &Exchange) {
    for account in commands.iter_mut().filter_map(Command::account_mut) {
        if let AccountRef::Name(name) = account {
            if let Some(id) = exchange.ledger().find_account(name) {
                *account = AccountRef::Id(id);
            }
        }
    }
}

pub fn measure(
    workload: &Workload,
    accounts: AccountNaming,
    lookahead: bool,
    repeat: usize,
) -> Result<EngineResult, String> {
    let mut events = Vec::with_capacity(1024);
    let mut text = String::new();
    let mut measured = contiguous_commands(&workload.measured, &mut text)?;
    if accounts == AccountNaming::ById {
        resolve_accounts(&mut measured, &prepared_engine(workload, &mut events));
    }

    let mut rates = Vec::with_capacity(repeat);
    let mut rejected = 0;
    for _ in 0..repeat.max(1) {
        let (rate, rejected_in_pass) = throughput_pass(workload, &measured, lookahead, &mut events);
        rates.push(rate);
        rejected = rejected_in_pass;
    }
    rates.sort_by(f64::total_cmp);
    let histogram = latency_pass(workload, &measured, lookahead, &mut events)?;

    Ok(EngineResult {
        workload: workload.name.clone(),
        accounts: match accounts {
            AccountNaming::ById => "by-id",
            AccountNaming::ByName => "by-name",
        },
        lookahead,
        commands: workload.measured.len(),
        commands_per_sec: rates[rates.len() / 2],
        commands_per_sec_min: rates[0],
        commands_per_sec_max: rates[rates.len() - 1],
        passes: rates.len(),
        p50_ns: histogram.value_at_quantile(0.50),
        p99_ns: histogram.value_at_quantile(0.99),
        p999_ns: histogram.value_at_quantile(0.999),
        max_ns: histogram.max(),
        rejected,
    })
}

/// One timed pass over a fresh engine: commands per second and rejections. Never
/// inlined, so that profilers can single it out (`valgrind --tool=callgrind
/// --toggle-collect=bourse_bench::bench::engine::throughput_pass`).
#[inline(never)]
fn throughput_pass(
    workload: &Workload,
    measured: &[Command<'_>],
    lookahead: bool,
    events: &mut Vec<Event>,
) -> (f64, usize) {
    let first_seq = Seq(workload.setup.len() as u64 + 1);
    let mut exchange = prepared_engine(workload, events);
    let mut hints = Lookahead::new();
    let mut rejected = 0usize;
    let started = Instant::now();
    for (offset, command) in measured.iter().enumerate() {
        if lookahead {
            hints.hint(&exchange, &measured[offset + 1..]);
        }
        exchange.apply(first_seq + offset as u64, None, command, events);
        // Counting rejections is a cheap look at the first event, and keeps the events
        // observed so the work cannot be optimised away.
        rejected += usize::from(matches!(events.first(), Some(Event::Rejected { .. })));
        events.clear();
    }
    (measured.len() as f64 / started.elapsed().as_secs_f64(), rejected)
}

/// One pass over a fresh engine timing every command, its share of the cache hints
/// included.
fn latency_pass(
    workload: &Workload,
    measured: &[Command<'_>],
    lookahead: bool,
    events: &mut Vec<Event>,
) -> Result<Histogram<u64>, String> {
    let first_seq = Seq(workload.setup.len() as u64 + 1);
    let mut histogram = Histogram::<u64>::new_with_bounds(1, 60_000_000_000, 3)
        .map_err(|error| format!("histogram: {error}"))?;
    let mut exchange = prepared_engine(workload, events);
    let mut hints = Lookahead::new();
    for (offset, command) in measured.iter().enumerate() {
        let started = Instant::now();
        if lookahead {
            hints.hint(&exchange, &measured[offset + 1..]);
        }
        exchange.apply(first_seq + offset as u64, None, command, events);
        let nanos = started.elapsed().as_nanos() as u64;
        events.clear();
        histogram.saturating_record(nanos.max(1));
    }
    Ok(histogram)
}
