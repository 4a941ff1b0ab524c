//! `bourse bench crash`: kill -9 the durable engine under load, again and again, and
//! prove nothing acknowledged was lost.
//!
//! Each cycle starts a child process (`bourse bench crash-child`) on the same data
//! directory. The child recovers, then submits a deterministic command stream (the
//! exchange-core mix over several symbols, each command exactly once across all cycles)
//! and prints every outcome the engine releases: its sequence number, the stream index
//! of its command and a hash of its events. At a random moment (sometimes during
//! recovery) the parent kills the child with SIGKILL and checks, on what is on disk:
//!
//! 1. every released outcome's command is in the journal at its sequence number, and a
//!    straight replay of the journal gives that command the same events (hash);
//! 2. the journal holds exactly the stream's commands, in order (nothing half-written
//!    counts: a record is whole and checks, or it is a torn tail and not there);
//! 3. recovery (newest snapshot + journal) gives the same state digest as that straight
//!    replay, and the state passes its invariants.
//!
//! The last line is a summary; the exit status is 0 only if every check held.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Command as Process, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bourse_core::format::{state_digest, write_event};
use bourse_core::{Command, Event, Exchange};
use bourse_engine::{Engine, EngineConfig, Outcome, Released, SubmitError};
use bourse_journal::{decode_command, encode_command, scan_journal, TailPolicy};
use clap::Args;
use crossbeam_channel::unbounded;

use super::workload::{generate_mix, Market, MixSpec, SplitMix64};

#[derive(Args)]
pub struct CrashArgs {
    /// Kill-and-recover cycles.
    #[arg(long, default_value_t = 100)]
    cycles: u64,
    /// Where the exchange's data goes (a fresh directory, removed after a clean run).
    #[arg(long)]
    data_dir: Option<PathBuf>,
    /// Seed of the command stream and the kill times.
    #[arg(long, default_value_t = 7)]
    seed: u64,
    /// Longest a child lives before it is killed, in milliseconds.
    #[arg(long, default_value_t = 1500)]
    max_life_ms: u64,
}

#[derive(Args)]
pub struct CrashChildArgs {
    #[arg(long)]
    data_dir: PathBuf,
    #[arg(long)]
    seed: u64,
    #[arg(long)]
    stream_len: usize,
}

/// The child's pace, in commands per second: enough for several batches per sync and
/// for snapshots every few cycles, small enough that the stream lasts.
const CHILD_RATE: u64 = 25_000;

/// Commands in the stream: more than the cycles can use at the child's pace (they use
/// about `CHILD_RATE * mean life` each).
fn stream_len(cycles: u64, max_life_ms: u64) -> usize {
    let per_cycle = CHILD_RATE * max_life_ms / 1000 / 2 + 1_000;
    (cycles * per_cycle * 3 / 2).clamp(50_000, 8_000_000) as usize
}

/// The command stream, the same in parent and child: setup (assets, instruments,
/// deposits, resting orders) then the mix.
fn stream(seed: u64, len: usize) -> Vec<Command<'static>> {
    let workload = generate_mix(
        "crash",
        MixSpec {
            symbols: 8,
            accounts: 200,
            resting_orders_target: 2_000,
            commands: len,
            seed,
            market: Market::Spot,
        },
    );
    let mut commands = workload.setup;
    commands.extend(workload.measured);
    commands
}

fn child_config(data_dir: &Path) -> EngineConfig {
    let mut config = EngineConfig::new(data_dir);
    config.render_events = true;
    config.segment_bytes = 4 << 20;
    config.snapshot_every_commands = 25_000;
    config.keep_journal = true;
    config
}

/// A hash of an outcome's printed events (crc32c of the text, and its length).
fn events_hash(rendered: &str) -> u64 {
    (u64::from(crc32c::crc32c(rendered.as_bytes())) << 32) | rendered.len() as u64 & 0xffff_ffff
}

/// The child: recover, then submit the rest of the stream and print released outcomes
/// as `seq index hash` lines, flushed after each release, until killed.
pub fn run_child(args: &CrashChildArgs) -> Result<(), String> {
    let commands = stream(args.seed, args.stream_len);
    let engine = Engine::start(child_config(&args.data_dir)).map_err(|error| error.to_string())?;
    let start = engine.start_report().last_seq.0 as usize;
    let stdout = std::io::stdout();
    let mut out = stdout.lock();
    writeln!(out, "ready {start}").map_err(|error| error.to_string())?;
    out.flush().map_err(|error| error.to_string())?;
    let (sink, outcomes) = unbounded::<Released>();
    let session = engine.open_session(Arc::new(sink));
    let mut next = start;
    let mut in_flight = 0usize;
    let started = Instant::now();
    while next < commands.len() || in_flight > 0 {
        let due = start + (started.elapsed().as_micros() as u64 * CHILD_RATE / 1_000_000) as usize;
        while next < commands.len().min(due) && in_flight < 20_000 {
            match session.submit(&commands[next], next as u64) {
                Ok(_) => {
                    next += 1;
                    in_flight += 1;
                }
                Err(SubmitError::Busy { .. }) => break,
                Err(error) => return Err(error.to_string()),
            }
        }
        let Ok(released) = outcomes.recv_timeout(Duration::from_millis(1)) else { continue };
        for outcome in &released.outcomes {
            let Outcome::Applied(result) = outcome else {
                return Err(format!("a command failed: {outcome:?}"));
            };
            let hash = events_hash(released.rendered_of(result));
            writeln!(out, "{} {} {hash}", result.seq, result.correlation.request)
                .map_err(|error| error.to_string())?;
            in_flight -= 1;
        }
        out.flush().map_err(|error| error.to_string())?;
    }
    Ok(())
}

/// Released outcomes seen by the parent: seq -> (stream index, events hash).
type Seen = BTreeMap<u64, (u64, u64)>;

pub fn run(args: &CrashArgs) -> Result<(), String> {
    let data_dir = args.data_dir.clone().unwrap_or_else(|| {
        std::env::temp_dir().join(format!("bourse-crash-{}", std::process::id()))
    });
    let _ = std::fs::remove_dir_all(&data_dir);
    std::fs::create_dir_all(&data_dir)
        .map_err(|error| format!("{}: {error}", data_dir.display()))?;
    let len = stream_len(args.cycles, args.max_life_ms);
    let commands = stream(args.seed, len);
    let mut random = SplitMix64::new(args.seed ^ 0x5eed);
    let mut seen = Seen::new();
    let mut verified_total = 0u64;
    let mut records = 0u64;
    for cycle in 1..=args.cycles {
        // One cycle in five dies at a random moment from its start (often while it
        // recovers); the others a random time after they are ready.
        let life = Duration::from_millis(20 + random.below(args.max_life_ms.max(21) - 20));
        let kill =
            if random.below(5) == 0 { Kill::AfterStart(life / 4) } else { Kill::AfterReady(life) };
        let printed = run_cycle(&data_dir, args.seed, len, kill, &mut seen)?;
        let check = verify(&data_dir, &commands, &seen)
            .map_err(|failure| format!("cycle {cycle}: LOST OR WRONG: {failure}"))?;
        verified_total += check.verified;
        records = check.records;
        eprintln!(
            "cycle {cycle}: killed {kill:?}, {printed} outcomes released, journal {} records, {} released outcomes verified, digest {}",
            check.records,
            check.verified,
            &check.digest[..19]
        );
        if records as usize >= commands.len() {
            eprintln!("the stream is used up; stopping early");
            break;
        }
    }
    let _ = std::fs::remove_dir_all(&data_dir);
    println!(
        "crash: {} cycles, {} commands verified (every released outcome, re-checked after each later kill: {} checks), {} journal records, nothing lost",
        args.cycles,
        seen.len(),
        verified_total,
        records
    );
    Ok(())
}

#[derive(Clone, Copy, Debug)]
enum Kill {
    AfterStart(Duration),
    AfterReady(Duration),
}

/// Starts a child, kills it as `kill` says; records what it released.
fn run_cycle(
    data_dir: &Path,
    seed: u64,
    len: usize,
    kill: Kill,
    seen: &mut Seen,
) -> Result<u64, String> {
    let exe = std::env::current_exe().map_err(|error| error.to_string())?;
    let mut child = Process::new(exe)
        .args([
            "bench",
            "crash-child",
            "--seed",
            &seed.to_string(),
            "--stream-len",
            &len.to_string(),
        ])
        .arg("--data-dir")
        .arg(data_dir)
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .map_err(|error| format!("cannot start the child: {error}"))?;
    let stdout = child.stdout.take().ok_or("the child has no stdout")?;
    let (ready_sender, ready) = crossbeam_channel::bounded(1);
    let reader = std::thread::spawn(move || read_outcomes(stdout, ready_sender));
    let (mut started, life) = match kill {
        Kill::AfterStart(life) => (Some(Instant::now()), life),
        Kill::AfterReady(life) => (None, life),
    };
    while started.is_none_or(|started| started.elapsed() < life) {
        if let Ok(Some(status)) = child.try_wait() {
            return Err(format!("the child exited by itself ({status}) before it was killed"));
        }
        if started.is_none() && ready.try_recv().is_ok() {
            started = Some(Instant::now());
        }
        std::thread::sleep(Duration::from_millis(2));
    }
    child.kill().map_err(|error| format!("cannot kill the child: {error}"))?; // SIGKILL
    let _ = child.wait();
    let lines = reader.join().map_err(|_| "the reader thread panicked")??;
    let printed = lines.len() as u64;
    for (seq, index, hash) in lines {
        if let Some(previous) = seen.insert(seq, (index, hash)) {
            if previous != (index, hash) {
                return Err(format!("record {seq} was released twice with different outcomes"));
            }
        }
    }
    Ok(printed)
}

/// Complete `seq index hash` lines from the child (a line cut by the kill is ignored).
fn read_outcomes(
    stdout: std::process::ChildStdout,
    ready: crossbeam_channel::Sender<()>,
) -> Result<Vec<(u64, u64, u64)>, String> {
    let mut lines = Vec::new();
    let mut reader = BufReader::new(stdout);
    let mut line = String::new();
    loop {
        line.clear();
        match reader.read_line(&mut line) {
            Ok(0) | Err(_) => return Ok(lines),
            Ok(_) if !line.ends_with('\n') => return Ok(lines),
            Ok(_) => {}
        }
        if line.starts_with("ready") {
            let _ = ready.try_send(());
            continue;
        }
        let fields: Vec<u64> =
            line.split_whitespace().filter_map(|field| field.parse().ok()).collect();
        let [seq, index, hash] = fields[..] else {
            return Err(format!("unreadable line from the child: {line:?}"));
        };
        lines.push((seq, index, hash));
    }
}

struct Verified {
    verified: u64,
    records: u64,
    digest: String,
}

/// The checks of the module comment, on the data directory as the kill left it.
fn verify(data_dir: &Path, commands: &[Command<'static>], seen: &Seen) -> Result<Verified, String> {
    let config = child_config(data_dir);
    let mut reference = Exchange::default();
    let mut events: Vec<Event> = Vec::new();
    let mut rendered = String::new();
    let mut encoded = Vec::new();
    let mut verified = 0u64;
    let mut mismatch = None;
    let report = scan_journal(&config.journal_dir(), TailPolicy::ReadOnly, |header, payload| {
        let seq = header.seq.0;
        let Some(expected) = commands.get(seq as usize - 1) else {
            mismatch.get_or_insert(format!("record {seq} is beyond the stream"));
            return Ok(());
        };
        encoded.clear();
        let _ = encode_command(expected, &mut encoded);
        if encoded != payload {
            mismatch.get_or_insert(format!("record {seq} is not the stream's command {}", seq - 1));
        }
        let Ok(command) = decode_command(payload) else {
            mismatch.get_or_insert(format!("record {seq} does not decode"));
            return Ok(());
        };
        reference.apply(header.seq, Some(header.ts), &command, &mut events);
        rendered.clear();
        for event in &events {
            write_event(&mut rendered, &reference, Some(&command), event);
        }
        events.clear();
        if let Some(&(index, hash)) = seen.get(&seq) {
            if index + 1 != seq {
                mismatch
                    .get_or_insert(format!("record {seq} was released for stream index {index}"));
            } else if hash != events_hash(&rendered) {
                mismatch.get_or_insert(format!(
                    "record {seq}: replayed events differ from the released ones"
                ));
            } else {
                verified += 1;
            }
        }
        Ok(())
    })
    .map_err(|error| format!("the journal does not read back: {error}"))?;
    if let Some(mismatch) = mismatch {
        return Err(mismatch);
    }
    let records = report.next_seq.0 - 1;
    if let Some((&seq, _)) = seen.range(records + 1..).next() {
        return Err(format!(
            "record {seq} was released but is not in the journal (it ends at {records})"
        ));
    }
    let recovered = bourse_engine::recover(
        &config.journal_dir(),
        &config.snapshot_dir(),
        config.exchange,
        TailPolicy::ReadOnly,
    )
    .map_err(|error| format!("recovery refused: {error}"))?;
    recovered
        .venue
        .exchange()
        .check_invariants()
        .map_err(|error| format!("recovered state: {error}"))?;
    let digest = state_digest(recovered.venue.exchange());
    let expected = state_digest(&reference);
    if digest != expected {
        return Err(format!(
            "recovered digest {digest} differs from the journal's replay {expected}"
        ));
    }
    Ok(Verified { verified, records, digest })
}
