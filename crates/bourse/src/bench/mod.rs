//! `bourse bench`: performance measurements. Targets live here and in the criterion
//! benches, never in timed unit tests; figures go to `docs/benchmarks.md` with the
//! command that produced them.

mod engine;
mod generate;
mod memory;
mod workload;

use clap::Subcommand;

#[derive(Subcommand)]
pub enum BenchCommand {
    /// The in-process core: pre-generated commands, timing only their processing.
    Engine(engine::EngineArgs),
    /// Resident memory of the core with many orders at rest (default 1,000,000).
    Memory(memory::MemoryArgs),
    /// Write a generated workload as replay-format lines (input for `bourse replay`).
    Generate(generate::GenerateArgs),
}

pub fn run(bench: BenchCommand) -> Result<(), String> {
    match bench {
        BenchCommand::Engine(args) => engine::run(&args),
        BenchCommand::Memory(args) => memory::run(&args),
        BenchCommand::Generate(args) => generate::run(&args),
    }
}
