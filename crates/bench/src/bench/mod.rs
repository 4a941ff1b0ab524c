//! `bourse bench`: performance measurements. Targets live here and in the criterion
//! benches, never in timed unit tests; figures go to `docs/benchmarks.md` with the
//! command that produced them.

mod compare;
mod crash;
mod diff;
mod durable;
mod engine;
mod fanout;
mod generate;
mod history;
mod md;
mod memory;
mod recovery;
mod snapshot;
pub(crate) mod workload;

use clap::Subcommand;

#[derive(Subcommand)]
pub enum BenchCommand {
    /// The machine: CPU model and count, caches, memory, kernel, and the disk's
    /// `fdatasync` latency (p50, p99), as every figure in docs/benchmarks.md names it.
    Host(crate::host::HostArgs),
    /// The in-process core: pre-generated commands, timing only their processing.
    Engine(engine::EngineArgs),
    /// Kill -9 the durable engine under load again and again; check nothing released
    /// was lost (exit 0 only then).
    Crash(crash::CrashArgs),
    /// The child process of `bench crash` (not for direct use).
    #[command(hide = true)]
    CrashChild(crash::CrashChildArgs),
    /// The whole pipeline: producers, journal with group commit, core, released
    /// outcomes; throughput and open-loop release latency per durability mode.
    Durable(durable::DurableArgs),
    /// How fast the state comes back: a journal of the workload recovered alone and
    /// from a snapshot at its middle.
    Recovery(recovery::RecoveryArgs),
    /// Whether a periodic snapshot of a big book pauses intake: release latency while it
    /// is written against the rest.
    Snapshot(snapshot::SnapshotArgs),
    /// Resident memory of the core with many orders at rest (default 1,000,000).
    Memory(memory::MemoryArgs),
    /// Write a generated workload as replay-format lines (input for `bourse replay`).
    Generate(generate::GenerateArgs),
    /// Many WebSocket subscribers to one instrument's trades on a running server:
    /// delivery latency from each trade's release.
    Fanout(fanout::FanoutArgs),
    /// Many DIFF sessions (tqsdk's protocol) following 10 futures quotes on a running
    /// server: latency from each trade's release to the quote patch that shows it.
    Diff(diff::DiffArgs),
    /// The market-data feed on exchange-core's stream: deriving it, publishing it,
    /// rebuilding books from it.
    Md(md::MdArgs),
    /// The history: ingest from a journal (commands, events and rows per second), SQL
    /// GROUP BYs over the trades, lookups by id.
    History(history::HistoryArgs),
    /// Compare a run's JSON results with a baseline: exit 1 if a figure got worse
    /// than the threshold (default 5%).
    Compare(compare::CompareArgs),
}

pub fn run(bench: BenchCommand) -> Result<(), String> {
    match bench {
        BenchCommand::Host(args) => crate::host::run(&args),
        BenchCommand::Engine(args) => engine::run(&args),
        BenchCommand::Md(args) => md::run(&args),
        BenchCommand::History(args) => history::run(&args),
        BenchCommand::Fanout(args) => fanout::run(&args),
        BenchCommand::Diff(args) => diff::run(&args),
        BenchCommand::Crash(args) => crash::run(&args),
        BenchCommand::CrashChild(args) => crash::run_child(&args),
        BenchCommand::Durable(args) => durable::run(&args),
        BenchCommand::Memory(args) => memory::run(&args),
        BenchCommand::Recovery(args) => recovery::run(&args),
        BenchCommand::Snapshot(args) => snapshot::run(&args),
        BenchCommand::Generate(args) => generate::run(&args),
        BenchCommand::Compare(args) => match compare::run(&args)? {
            true => Ok(()),
            false => std::process::exit(1),
        },
    }
}
