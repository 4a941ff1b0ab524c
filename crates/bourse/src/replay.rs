//! `bourse replay`: the engine's batch mode over a file of commands.

use std::fs;
use std::io::{self, Write};
use std::path::PathBuf;

use bourse_bench::input::{self, Line};
use bourse_core::Replay;
use clap::Args;

/// Flush printed events to standard output in chunks of about this size.
const OUTPUT_CHUNK_BYTES: usize = 1 << 16;

#[derive(Args)]
pub struct ReplayArgs {
    /// The command file (replay format, one JSON object per line); `-` for standard
    /// input; a `.gz` file is decompressed.
    file: PathBuf,
    /// Write the final state document (balances, fees, books) to this file.
    #[arg(long, value_name = "STATE.json")]
    state_out: Option<PathBuf>,
    /// Print only the digest of the final state instead of the events.
    #[arg(long)]
    digest: bool,
}

pub fn run(args: &ReplayArgs) -> Result<(), String> {
    let mut reader = input::open(&args.file)?;
    let mut replay = Replay::new();
    let stdout = io::stdout();
    let mut stdout = stdout.lock();
    let mut events = String::with_capacity(OUTPUT_CHUNK_BYTES * 2);
    let print_events = !args.digest;
    input::for_each_line(&mut reader, |line| {
        match line {
            Line::Complete(bytes) => replay.feed_bytes(bytes, &mut events),
            Line::TooLong => replay.feed_unreadable_line(&mut events),
        }
        if events.len() >= OUTPUT_CHUNK_BYTES {
            if print_events {
                write_out(&mut stdout, events.as_bytes())?;
            }
            events.clear();
        }
        Ok(())
    })
    .map_err(|error| format!("{}: {error}", crate::describe(&args.file)))?;
    if print_events {
        write_out(&mut stdout, events.as_bytes())?;
    }
    if args.digest {
        write_out(&mut stdout, format!("{}\n", replay.digest()).as_bytes())?;
    }
    stdout.flush().map_err(|error| format!("cannot write events: {error}"))?;
    if let Some(path) = &args.state_out {
        fs::write(path, replay.state_json())
            .map_err(|error| format!("cannot write {}: {error}", path.display()))?;
    }
    Ok(())
}

fn write_out(stdout: &mut impl Write, bytes: &[u8]) -> Result<(), String> {
    stdout.write_all(bytes).map_err(|error| format!("cannot write events: {error}"))
}
