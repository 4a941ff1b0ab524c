//! `bourse bench generate`: a workload as replay-format lines on standard output, so
//! that `bourse replay` can be measured end to end (parse, process, print).

use std::io::{self, Write};

use bourse_core::format::write_command;
use clap::Args;

use super::engine::{load, WorkloadArgs};

#[derive(Args)]
pub struct GenerateArgs {
    #[command(flatten)]
    source: WorkloadArgs,
}

pub fn run(args: &GenerateArgs) -> Result<(), String> {
    let workload = load(&args.source)?;
    let stdout = io::stdout();
    let mut stdout = stdout.lock();
    let mut lines = String::with_capacity(1 << 17);
    for command in workload.setup.iter().chain(&workload.measured) {
        write_command(&mut lines, command, None);
        if lines.len() >= 1 << 16 {
            stdout.write_all(lines.as_bytes()).map_err(|error| format!("cannot write: {error}"))?;
            lines.clear();
        }
    }
    stdout.write_all(lines.as_bytes()).map_err(|error| format!("cannot write: {error}"))?;
    stdout.flush().map_err(|error| format!("cannot write: {error}"))
}
