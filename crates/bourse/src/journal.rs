//! `bourse journal verify | inspect | export | repair`: the journal tools.
//!
//! Each takes the data directory (`./data`, holding `journal/` and `snapshots/`) or a
//! journal directory itself. Only `repair` changes anything, and it keeps backups.

use std::fs;
use std::io::{self, Write};
use std::path::{Path, PathBuf};

use bourse_core::format::write_command;
use bourse_core::{AccountRef, Event, Exchange};
use bourse_engine::{recover, RecoveryError};
use bourse_journal::{decode_command, scan_journal, JournalError, ScanReport, TailPolicy};
use clap::{Args, Subcommand};

#[derive(Subcommand)]
pub enum JournalCommand {
    /// Check every record, segment and snapshot; exit 1 if the exchange would refuse to
    /// start, naming the file and offset.
    Verify(DirArgs),
    /// Print the segments and records (one JSON object per record).
    Inspect(InspectArgs),
    /// Write every command as replay-format lines (with their timestamps), so that
    /// `bourse journal export DIR | bourse replay - --digest` gives the state's digest.
    Export(DirArgs),
    /// Cut the journal where it stops being valid (keeping backups), so the exchange
    /// can start from the records before that point.
    Repair(DirArgs),
}

#[derive(Args)]
pub struct DirArgs {
    /// The data directory (with `journal/` and `snapshots/`) or a journal directory.
    #[arg(default_value = "data")]
    dir: PathBuf,
}

#[derive(Args)]
pub struct InspectArgs {
    #[command(flatten)]
    dir: DirArgs,
    /// First record to print.
    #[arg(long, default_value_t = 1)]
    from: u64,
    /// Records to print at most (0: only the segment summary).
    #[arg(long, default_value_t = 20)]
    count: u64,
}

pub fn run(command: JournalCommand) -> Result<(), String> {
    match command {
        JournalCommand::Verify(args) => verify(&args),
        JournalCommand::Inspect(args) => inspect(&args),
        JournalCommand::Export(args) => export(&args),
        JournalCommand::Repair(args) => repair(&args),
    }
}

/// (journal directory, snapshot directory) for a data or journal directory.
fn directories(dir: &Path) -> (PathBuf, PathBuf) {
    if dir.join("journal").is_dir() {
        (dir.join("journal"), dir.join("snapshots"))
    } else {
        (dir.to_path_buf(), dir.parent().unwrap_or(Path::new(".")).join("snapshots"))
    }
}

fn verify(args: &DirArgs) -> Result<(), String> {
    let (journal_dir, snapshot_dir) = directories(&args.dir);
    let recovered = recover(&journal_dir, &snapshot_dir, Default::default(), TailPolicy::ReadOnly)
        .map_err(|error| format!("refused ({}): {error}", error.code()))?;
    print_journal_summary(&recovered.journal);
    for (path, reason) in &recovered.skipped_snapshots {
        println!("snapshot {} unusable, would fall back: {reason}", path.display());
    }
    match &recovered.snapshot {
        Some((path, meta)) => {
            println!("snapshot {} covers records 1..={}", path.display(), meta.seq)
        }
        None => println!("no snapshot: recovery replays the whole journal"),
    }
    println!(
        "ok: recovery would rebuild the state after record {} ({} records replayed on top of the snapshot)",
        recovered.last_seq, recovered.replayed
    );
    Ok(())
}

fn print_journal_summary(report: &ScanReport) {
    for segment in &report.segments {
        println!(
            "segment {}: records {}..{} ({} records, {} bytes used)",
            segment.path.display(),
            segment.first_seq,
            segment.first_seq + segment.records,
            segment.records,
            segment.end_offset
        );
    }
    println!(
        "journal: {} records, next sequence number {}, journal id {}",
        report.records,
        report.next_seq,
        report.journal_id.map_or("(none)".to_string(), |id| format!("{id:016x}"))
    );
    if let Some(torn) = &report.torn_tail {
        println!(
            "torn tail: {} at byte {}, {} bytes: {} (removed at the next start)",
            torn.path.display(),
            torn.offset,
            torn.bytes,
            torn.reason
        );
    }
}

fn inspect(args: &InspectArgs) -> Result<(), String> {
    let (journal_dir, _) = directories(&args.dir.dir);
    let stdout = io::stdout();
    let mut out = stdout.lock();
    let mut printed = 0u64;
    let mut line = String::new();
    let last = args.from.saturating_add(args.count);
    let report = scan_journal(&journal_dir, TailPolicy::ReadOnly, |header, payload| {
        if header.seq.0 < args.from || header.seq.0 >= last {
            return Ok(());
        }
        line.clear();
        match decode_command(payload) {
            Ok(command) => write_command(&mut line, &command, None),
            Err(error) => line.push_str(&format!("\"undecodable: {error}\"\n")),
        }
        let _ = write!(
            out,
            "{{\"seq\":{},\"ts\":{},\"crc\":\"{:08x}\",\"batch_index\":{},\"last_in_batch\":{},\"bytes\":{},\"command\":{}",
            header.seq,
            header.ts,
            header.crc,
            header.batch_index,
            header.last_in_batch,
            header.payload_len,
            line.trim_end()
        );
        let _ = writeln!(out, "}}");
        printed += 1;
        Ok(())
    })
    .map_err(|error| format!("{} ({})", error, error.code()))?;
    drop(out);
    print_journal_summary(&report);
    Ok(())
}

fn export(args: &DirArgs) -> Result<(), String> {
    let (journal_dir, _) = directories(&args.dir);
    let stdout = io::stdout();
    let mut out = io::BufWriter::with_capacity(1 << 16, stdout.lock());
    // Commands that name their account by id are written with its name, which a copy of
    // the state tracks (an id is meaningful only to the engine that issued it).
    let mut names = Exchange::default();
    let mut events: Vec<Event> = Vec::new();
    let mut line = String::new();
    let mut write_error = None;
    let mut exported = 0u64;
    let report = scan_journal(&journal_dir, TailPolicy::ReadOnly, |header, payload| {
        if header.seq.0 != exported + 1 {
            return Err(JournalError::Damaged {
                path: journal_dir.clone(),
                offset: 0,
                reason: format!(
                    "the journal starts at record {}; the records before it are only in snapshots, so it cannot be exported as a replay",
                    header.seq
                ),
            });
        }
        let command = decode_command(payload).map_err(|source| JournalError::BadPayload {
            path: journal_dir.clone(),
            offset: 0,
            seq: header.seq,
            source,
        })?;
        line.clear();
        match command.account() {
            Some(AccountRef::Id(id)) if id.index() < names.ledger().accounts().len() => {
                let mut named = command.clone();
                if let Some(account) = named.account_mut() {
                    *account = AccountRef::Name(names.account_name(*id).to_string().into());
                }
                write_command(&mut line, &named, Some(header.ts));
            }
            _ => write_command(&mut line, &command, Some(header.ts)),
        }
        names.apply(header.seq, Some(header.ts), &command, &mut events);
        events.clear();
        exported = header.seq.0;
        if let Err(error) = out.write_all(line.as_bytes()) {
            write_error.get_or_insert(error);
        }
        Ok(())
    })
    .map_err(|error| format!("{} ({})", error, error.code()))?;
    if let Some(error) = write_error {
        return Err(format!("cannot write the export: {error}"));
    }
    out.flush().map_err(|error| format!("cannot write the export: {error}"))?;
    if let Some(torn) = report.torn_tail {
        eprintln!(
            "bourse: note: a torn tail at {} byte {} was not exported (the next start removes it)",
            torn.path.display(),
            torn.offset
        );
    }
    Ok(())
}

fn repair(args: &DirArgs) -> Result<(), String> {
    let (journal_dir, snapshot_dir) = directories(&args.dir);
    let recover_read_only =
        || recover(&journal_dir, &snapshot_dir, Default::default(), TailPolicy::ReadOnly);
    let error = match recover_read_only() {
        Ok(recovered) => {
            println!(
                "nothing to repair: recovery rebuilds the state after record {}{}",
                recovered.last_seq,
                if recovered.journal.torn_tail.is_some() {
                    " (the torn tail is removed at the next start)"
                } else {
                    ""
                }
            );
            return Ok(());
        }
        Err(RecoveryError::Journal(error)) => error,
        Err(other) => {
            return Err(format!(
                "cannot repair by cutting the journal: {other} ({}). Move the snapshot or the journal aside by hand.",
                other.code()
            ))
        }
    };
    let Some((path, offset)) = error.location() else {
        return Err(format!("cannot repair: {error} (no place in the journal to cut at)"));
    };
    let path = path.to_path_buf();
    println!("journal invalid: {error}");
    cut_journal_at(&journal_dir, &path, offset, false)?;
    match recover_read_only() {
        Ok(recovered) => {
            println!(
                "repaired: recovery now rebuilds the state after record {}",
                recovered.last_seq
            );
            Ok(())
        }
        // The snapshot holds the state beyond the cut: the journal before it is no
        // longer needed to start, and is kept only as a backup.
        Err(RecoveryError::JournalBehindSnapshot { .. }) => {
            println!("the journal now ends before the newest snapshot, which holds the state beyond the cut: moving the journal aside");
            cut_journal_at(&journal_dir, &path, 0, true)?;
            let recovered =
                recover_read_only().map_err(|error| format!("still refused: {error}"))?;
            println!(
                "repaired: the exchange starts from the snapshot, after record {}",
                recovered.last_seq
            );
            Ok(())
        }
        Err(error) => Err(format!("still refused after the cut: {error} ({})", error.code())),
    }
}

/// Copies `path` to a backup, truncates it at `offset` (or moves it aside whole at 0),
/// and moves every later segment (with `all`, every segment) aside as a backup.
fn cut_journal_at(journal_dir: &Path, path: &Path, offset: u64, all: bool) -> Result<(), String> {
    let segments = bourse_journal::segment::list_segments(journal_dir)
        .map_err(|error| format!("{}: {error}", journal_dir.display()))?;
    let mut later = all;
    for (_, segment) in segments {
        let backup = PathBuf::from(format!("{}.bak", segment.display()));
        let backup = if backup.exists() {
            PathBuf::from(format!("{}.bak2", segment.display()))
        } else {
            backup
        };
        if segment == path && !all {
            later = true;
            if offset == 0 {
                fs::rename(&segment, &backup).map_err(|e| format!("{}: {e}", segment.display()))?;
                println!("moved {} to {}", segment.display(), backup.display());
                continue;
            }
            fs::copy(&segment, &backup).map_err(|e| format!("{}: {e}", backup.display()))?;
            let file = fs::OpenOptions::new()
                .write(true)
                .open(&segment)
                .map_err(|e| format!("{}: {e}", segment.display()))?;
            file.set_len(offset)
                .and_then(|()| file.sync_all())
                .map_err(|e| format!("{}: {e}", segment.display()))?;
            println!("cut {} at byte {offset} (backup: {})", segment.display(), backup.display());
        } else if later {
            fs::rename(&segment, &backup).map_err(|e| format!("{}: {e}", segment.display()))?;
            println!("moved {} to {}", segment.display(), backup.display());
        }
    }
    bourse_journal::segment::sync_dir(journal_dir)
        .map_err(|e| format!("{}: {e}", journal_dir.display()))
}
