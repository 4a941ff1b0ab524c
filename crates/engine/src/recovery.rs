//! Rebuilding the exact state after a start or a crash: the newest snapshot that reads
//! back valid, then every journal record after it, applied in order. The decisions
//! (and their tests) are the table in `docs/journal.md`.

use std::path::{Path, PathBuf};

use bourse_core::snapshot::decode_state;
use bourse_core::{Event, Exchange, ExchangeConfig};
use bourse_journal::snapshot_file::remove_temporary_snapshots;
use bourse_journal::{
    decode_command, list_snapshots, read_snapshot, remove_torn_tail, scan_journal, JournalError,
    ScanReport,
    SnapshotMeta, TailPolicy,
};

/// Why the state could not be rebuilt. The exchange must not start.
#[derive(Debug, thiserror::Error)]
pub enum RecoveryError {
    #[error(transparent)]
    Journal(#[from] JournalError),
    #[error("the journal starts at record {journal_first}, but the newest usable snapshot ({snapshot}) covers only up to record {snapshot_seq}: records in between are missing")]
    JournalGap { snapshot: String, snapshot_seq: u64, journal_first: u64 },
    #[error("the journal ends at record {journal_last}, before the snapshot {snapshot} (record {snapshot_seq}): the journal was cut or belongs elsewhere")]
    JournalBehindSnapshot { snapshot: String, snapshot_seq: u64, journal_last: u64 },
    #[error("record {seq} of the journal does not chain to the snapshot {snapshot}: they come from different histories")]
    SnapshotChainBreak { snapshot: String, seq: u64 },
    #[error("the snapshot {snapshot} belongs to journal {found:016x}, the journal here is {expected:016x}")]
    ForeignSnapshot { snapshot: String, expected: u64, found: u64 },
}

impl RecoveryError {
    pub fn code(&self) -> &'static str {
        match self {
            RecoveryError::Journal(error) => error.code(),
            RecoveryError::JournalGap { .. } => "journal_gap",
            RecoveryError::JournalBehindSnapshot { .. } => "journal_behind_snapshot",
            RecoveryError::SnapshotChainBreak { .. } => "chain_break",
            RecoveryError::ForeignSnapshot { .. } => "foreign_snapshot",
        }
    }
}

/// The rebuilt state and where the journal goes on.
pub struct Recovered {
    pub exchange: Exchange,
    /// The snapshot the state started from.
    pub snapshot: Option<(PathBuf, SnapshotMeta)>,
    /// Snapshots that were newer but did not read back (path, reason).
    pub skipped_snapshots: Vec<(PathBuf, String)>,
    pub journal: ScanReport,
    /// Records applied on top of the snapshot.
    pub replayed: u64,
    /// The last command the state includes (0: none).
    pub last_seq: u64,
    /// The crc of record `last_seq`: the chain value of the next record.
    pub last_crc: u32,
    pub last_ts: u64,
    pub removed_temporary_snapshots: usize,
}

/// Rebuilds the state from `snapshot_dir` and `journal_dir`. With `TailPolicy::Repair`
/// a torn tail is removed (the journal can then be appended to); with `ReadOnly`
/// nothing on disk changes.
pub fn recover(
    journal_dir: &Path,
    snapshot_dir: &Path,
    exchange_config: ExchangeConfig,
    policy: TailPolicy,
) -> Result<Recovered, RecoveryError> {
    let removed_temporary_snapshots = match policy {
        TailPolicy::Repair => remove_temporary_snapshots(snapshot_dir)?,
        TailPolicy::ReadOnly => 0,
    };
    let (base, skipped_snapshots) = newest_valid_snapshot(snapshot_dir, exchange_config)?;
    let (mut exchange, snapshot) = match base {
        Some((exchange, path, meta)) => (exchange, Some((path, meta))),
        None => (Exchange::new(exchange_config), None),
    };
    let base_seq = snapshot.as_ref().map_or(0, |(_, meta)| meta.seq);
    let mut replayed = 0u64;
    let mut events: Vec<Event> = Vec::with_capacity(64);
    let mut chain_error = None;
    // Read-only first: a "torn tail" that a snapshot covers was durable once, and must
    // be refused as damage, not zeroed.
    let mut journal = scan_journal(journal_dir, TailPolicy::ReadOnly, |header, payload| {
        if let Some((path, meta)) = &snapshot {
            let chains = (header.seq != meta.seq || header.crc == meta.chain_crc)
                && (header.seq != meta.seq + 1 || header.prev_crc == meta.chain_crc);
            if !chains && chain_error.is_none() {
                chain_error = Some(RecoveryError::SnapshotChainBreak {
                    snapshot: path.display().to_string(),
                    seq: header.seq,
                });
            }
        }
        if header.seq <= base_seq || chain_error.is_some() {
            return Ok(());
        }
        let command = decode_command(payload).map_err(|source| JournalError::BadPayload {
            path: journal_dir.to_path_buf(),
            offset: 0,
            seq: header.seq,
            source,
        })?;
        exchange.apply(header.seq, Some(header.ts), &command, &mut events);
        events.clear();
        replayed += 1;
        Ok(())
    })?;
    if let Some(error) = chain_error {
        return Err(error);
    }
    if let Some(torn) = journal.torn_tail.as_mut() {
        if journal.next_seq <= base_seq {
            return Err(RecoveryError::Journal(JournalError::Damaged {
                path: torn.path.clone(),
                offset: torn.offset,
                reason: format!(
                    "{}, but the snapshot covers records up to {base_seq}, so they were durable",
                    torn.reason
                ),
            }));
        }
        if policy == TailPolicy::Repair {
            remove_torn_tail(journal_dir, torn)?;
            torn.removed = true;
        }
    }
    check_journal_meets_snapshot(&journal, snapshot.as_ref())?;
    let (last_seq, last_crc, last_ts) = match (&snapshot, journal.records) {
        (Some((_, meta)), _) if journal.next_seq <= meta.seq + 1 => (meta.seq, meta.chain_crc, meta.ts),
        _ => (journal.next_seq - 1, journal.last_crc, journal.last_ts),
    };
    Ok(Recovered {
        exchange,
        snapshot,
        skipped_snapshots,
        journal,
        replayed,
        last_seq,
        last_crc,
        last_ts,
        removed_temporary_snapshots,
    })
}

type LoadedSnapshot = (Exchange, PathBuf, SnapshotMeta);

/// The newest snapshot whose file and state both read back; the ones that did not.
fn newest_valid_snapshot(
    snapshot_dir: &Path,
    exchange_config: ExchangeConfig,
) -> Result<(Option<LoadedSnapshot>, Vec<(PathBuf, String)>), RecoveryError> {
    let mut skipped = Vec::new();
    for entry in list_snapshots(snapshot_dir)? {
        let loaded = read_snapshot(&entry.path).map_err(|error| error.to_string()).and_then(
            |(meta, body)| {
                decode_state(&body, exchange_config)
                    .map(|exchange| (exchange, meta))
                    .map_err(|error| format!("snapshot state: {error}"))
            },
        );
        match loaded {
            Ok((exchange, meta)) => return Ok((Some((exchange, entry.path, meta)), skipped)),
            Err(reason) => skipped.push((entry.path, reason)),
        }
    }
    Ok((None, skipped))
}

/// The journal must hold every record after the snapshot: it may start at or before the
/// record after it, and must not end before it.
fn check_journal_meets_snapshot(
    journal: &ScanReport,
    snapshot: Option<&(PathBuf, SnapshotMeta)>,
) -> Result<(), RecoveryError> {
    let (base_seq, name) = match snapshot {
        Some((path, meta)) => {
            if let Some(journal_id) = journal.journal_id.filter(|&id| id != meta.journal_id) {
                return Err(RecoveryError::ForeignSnapshot {
                    snapshot: path.display().to_string(),
                    expected: journal_id,
                    found: meta.journal_id,
                });
            }
            (meta.seq, path.display().to_string())
        }
        None => (0, "(none)".to_string()),
    };
    let Some(journal_first) = journal.first_seq else { return Ok(()) };
    if journal_first > base_seq + 1 {
        return Err(RecoveryError::JournalGap { snapshot: name, snapshot_seq: base_seq, journal_first });
    }
    let journal_last = journal.next_seq - 1;
    if journal_last < base_seq {
        return Err(RecoveryError::JournalBehindSnapshot {
            snapshot: name,
            snapshot_seq: base_seq,
            journal_last,
        });
    }
    Ok(())
}
