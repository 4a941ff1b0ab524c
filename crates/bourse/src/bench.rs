//! `bourse bench`: performance measurements (filled in below).

use clap::Subcommand;

#[derive(Subcommand)]
pub enum BenchCommand {}

pub fn run(bench: BenchCommand) -> Result<(), String> {
    match bench {}
}
