//! `bourse bench recovery`: how fast the state comes back. A journal of the workload's
//! commands is written (directly with the journal writer, one sync per 4,096-command
//! batch) and then recovered twice:
//!
//! - journal alone: every record read, checked and applied (the replay rate);
//! - snapshot + journal: a snapshot taken at the middle, then the records after it.
//!
//! Both are timed from nothing in memory to the rebuilt state (page cache warm: the
//! journal was just written; a cold start adds the disk's read time).

use std::path::{Path, PathBuf};
use std::time::Instant;

use bourse_core::format::state_digest;
use bourse_core::{Event, Exchange, Seq, TimestampNs};
use bourse_engine::retention::take_snapshot;
use bourse_engine::{recover, EngineConfig};
use bourse_journal::{
    encode_command, JournalWriter, RecordBatch, ScanReport, SnapshotMeta, TailPolicy, WriterOptions,
};
use clap::Args;

use super::engine::{load, resolve_accounts_after_setup, WorkloadArgs};

#[derive(Args)]
pub struct RecoveryArgs {
    #[command(flatten)]
    source: WorkloadArgs,
    /// Where the journal goes (a fresh directory, removed afterwards).
    #[arg(long)]
    data_dir: Option<PathBuf>,
    /// Keep the data directory afterwards (to inspect it or time the journal tools).
    #[arg(long)]
    keep: bool,
    /// Print the result as one JSON object.
    #[arg(long)]
    json: bool,
}

const BATCH: usize = 4_096;

pub fn run(args: &RecoveryArgs) -> Result<(), String> {
    let workload = load(&args.source)?;
    // Accounts by id, as the gateways submit them (and so journal them).
    let mut measured = workload.measured.clone();
    resolve_accounts_after_setup(&mut measured, &workload);
    let commands: Vec<_> = workload.setup.iter().chain(&measured).collect();
    let data_dir = args.data_dir.clone().unwrap_or_else(|| {
        std::env::temp_dir().join(format!("bourse-bench-recovery-{}", std::process::id()))
    });
    let _ = std::fs::remove_dir_all(&data_dir);
    let config = EngineConfig::new(&data_dir);

    let started = Instant::now();
    let (middle_state, middle_meta) = write_journal(&config.journal_dir(), &commands)?;
    let write_secs = started.elapsed().as_secs_f64();

    let (journal_secs, journal_digest, open_orders) = timed_recovery(&config)?;
    let middle_state = bourse_core::venue::Venue::new(middle_state, false);
    let snapshot_bytes = take_snapshot(&middle_state, middle_meta, &config.snapshot_dir())
        .map_err(|error| error.to_string())?;
    drop(middle_state);
    let (snapshot_secs, snapshot_digest, _) = timed_recovery(&config)?;
    if !args.keep {
        let _ = std::fs::remove_dir_all(&data_dir);
    }
    if journal_digest != snapshot_digest {
        return Err(format!(
            "the two recoveries disagree: {journal_digest} against {snapshot_digest}"
        ));
    }
    let records = commands.len();
    let replayed_after_snapshot = records as u64 - middle_meta.seq.0;
    if args.json {
        println!(
            "{}",
            serde_json::json!({
                "workload": workload.name,
                "records": records,
                "open_orders": open_orders,
                "write_secs": (write_secs * 1000.0).round() / 1000.0,
                "journal_only_secs": (journal_secs * 1000.0).round() / 1000.0,
                "replay_commands_per_sec": (records as f64 / journal_secs).round(),
                "snapshot_seq": middle_meta.seq,
                "snapshot_bytes": snapshot_bytes,
                "snapshot_plus_journal_secs": (snapshot_secs * 1000.0).round() / 1000.0,
                "replayed_after_snapshot": replayed_after_snapshot,
                "digest": journal_digest,
            })
        );
    } else {
        println!(
            "{}: {records} records ({:.1} s to write); recovery from the journal alone {:.2} s ({:.2} M commands/s); from the snapshot at record {} ({} bytes) plus {} records: {:.2} s; {open_orders} open orders; digest {journal_digest}",
            workload.name,
            write_secs,
            journal_secs,
            records as f64 / journal_secs / 1e6,
            middle_meta.seq,
            snapshot_bytes,
            replayed_after_snapshot,
            snapshot_secs
        );
    }
    Ok(())
}

/// Writes every command to a new journal; returns the state at the middle record (for
/// the snapshot) and what the snapshot must say.
fn write_journal(
    journal_dir: &Path,
    commands: &[&bourse_core::Command<'static>],
) -> Result<(Exchange, SnapshotMeta), String> {
    let options = WriterOptions::default();
    let mut writer = JournalWriter::open(journal_dir, &ScanReport::default(), options, Seq(1), 0)
        .map_err(|error| error.to_string())?;
    let middle = commands.len() / 2;
    let mut state = Exchange::default();
    let mut events: Vec<Event> = Vec::new();
    let mut meta = SnapshotMeta {
        journal_id: writer.journal_id(),
        seq: Seq::ZERO,
        chain_crc: 0,
        ts: TimestampNs::ZERO,
    };
    let mut batch = RecordBatch::with_capacity(BATCH, BATCH * 96);
    for (chunk_index, chunk) in commands.chunks(BATCH).enumerate() {
        batch.clear();
        for (offset, command) in chunk.iter().enumerate() {
            let seq = (chunk_index * BATCH + offset + 1) as u64;
            let ts = TimestampNs(1_700_000_000_000_000_000 + seq * 1_000);
            batch
                .push(ts, |out| encode_command(command, out))
                .map_err(|error| error.to_string())?;
            if seq as usize <= middle {
                state.apply(Seq(seq), Some(ts), command, &mut events);
                events.clear();
            }
        }
        writer.write(&mut batch).and_then(|()| writer.sync()).map_err(|error| error.to_string())?;
        if meta.seq == Seq::ZERO && writer.next_seq() > Seq(middle as u64) {
            // The snapshot goes at the end of the batch holding the middle record.
            let end = writer.next_seq().0 - 1;
            for (offset, command) in chunk.iter().enumerate() {
                let seq = (chunk_index * BATCH + offset + 1) as u64;
                if seq as usize > middle {
                    let ts = TimestampNs(1_700_000_000_000_000_000 + seq * 1_000);
                    state.apply(Seq(seq), Some(ts), command, &mut events);
                    events.clear();
                }
            }
            meta.seq = Seq(end);
            meta.chain_crc = writer.last_crc();
            meta.ts = TimestampNs(1_700_000_000_000_000_000 + end * 1_000);
        }
    }
    Ok((state, meta))
}

fn timed_recovery(config: &EngineConfig) -> Result<(f64, String, usize), String> {
    let started = Instant::now();
    let recovered = recover(
        &config.journal_dir(),
        &config.snapshot_dir(),
        config.exchange,
        TailPolicy::ReadOnly,
    )
    .map_err(|error| error.to_string())?;
    let seconds = started.elapsed().as_secs_f64();
    Ok((
        seconds,
        state_digest(recovered.venue.exchange()),
        recovered.venue.exchange().open_order_count(),
    ))
}
