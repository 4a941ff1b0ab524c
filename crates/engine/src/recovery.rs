//! Rebuilding the exact state after a start or a crash: the newest snapshot that reads
//! back valid, then every journal record after it, applied in order. The decisions
//! (and their tests) are the table in `docs/journal.md`.

use std::path::{Path, PathBuf};

use bourse_core::snapshot::decode_venue;
use bourse_core::venue::Venue;
use bourse_core::{Command, Event, Exchange, ExchangeConfig, Lookahead, Seq, TimestampNs};
use bourse_journal::snapshot_file::remove_temporary_snapshots;
use bourse_journal::{
    decode_command, list_snapshots, read_snapshot, remove_torn_tail, JournalError, MappedSegments,
    ScanReport, SnapshotMeta, TailPolicy,
};

/// Why the state could not be rebuilt. The exchange must not start.
#[derive(Debug, thiserror::Error)]
pub enum RecoveryError {
    #[error(transparent)]
    Journal(#[from] JournalError),
    #[error("the journal starts at record {journal_first}, but the newest usable snapshot ({snapshot}) covers only up to record {snapshot_seq}: records in between are missing")]
    JournalGap { snapshot: String, snapshot_seq: Seq, journal_first: Seq },
    #[error("the journal ends at record {journal_last}, before the snapshot {snapshot} (record {snapshot_seq}): the journal was cut or belongs elsewhere")]
    JournalBehindSnapshot { snapshot: String, snapshot_seq: Seq, journal_last: Seq },
    #[error("record {seq} of the journal does not chain to the snapshot {snapshot}: they come from different histories")]
    SnapshotChainBreak { snapshot: String, seq: Seq },
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
    /// The exchange, with the order activity when recovery was asked to keep it.
    pub venue: Venue,
    /// The snapshot the state started from.
    pub snapshot: Option<(PathBuf, SnapshotMeta)>,
    /// Snapshots that were newer but did not read back (path, reason).
    pub skipped_snapshots: Vec<(PathBuf, String)>,
    pub journal: ScanReport,
    /// Records applied on top of the snapshot.
    pub replayed: u64,
    /// The last command the state includes (`Seq::ZERO`: none).
    pub last_seq: Seq,
    /// The crc of record `last_seq`: the chain value of the next record.
    pub last_crc: u32,
    /// The time of record `last_seq`.
    pub last_ts: TimestampNs,
    pub removed_temporary_snapshots: usize,
}

/// Rebuilds the state from `snapshot_dir` and `journal_dir`. With `TailPolicy::Repair`
/// a torn tail is removed (the journal can then be appended to); with `ReadOnly`
/// nothing on disk changes. The order activity is not kept (`recover_venue` keeps it).
pub fn recover(
    journal_dir: &Path,
    snapshot_dir: &Path,
    exchange_config: ExchangeConfig,
    policy: TailPolicy,
) -> Result<Recovered, RecoveryError> {
    recover_venue(journal_dir, snapshot_dir, exchange_config, false, policy)
}

/// `recover`, keeping the order activity (`bourse_core::venue`) when `track_activity`:
/// restored from the snapshot (or rebuilt from its open orders, for a snapshot written
/// without it) and brought up to date by the journal.
pub fn recover_venue(
    journal_dir: &Path,
    snapshot_dir: &Path,
    exchange_config: ExchangeConfig,
    track_activity: bool,
    policy: TailPolicy,
) -> Result<Recovered, RecoveryError> {
    let removed_temporary_snapshots = match policy {
        TailPolicy::Repair => remove_temporary_snapshots(snapshot_dir)?,
        TailPolicy::ReadOnly => 0,
    };
    let (base, skipped_snapshots) =
        newest_valid_snapshot(snapshot_dir, exchange_config, track_activity)?;
    let (mut venue, snapshot) = match base {
        Some((venue, path, meta)) => (venue, Some((path, meta))),
        None => (Venue::new(Exchange::new(exchange_config), track_activity), None),
    };
    let base_seq = snapshot.as_ref().map_or(Seq::ZERO, |(_, meta)| meta.seq);
    let snapshot_chain = snapshot.as_ref().map(|(path, meta)| (path.as_path(), meta));
    // Read-only first: a "torn tail" that a snapshot covers was durable once, and must
    // be refused as damage, not zeroed.
    let (mut journal, replayed, chain_error) =
        replay_journal(journal_dir, base_seq, snapshot_chain, &mut venue)?;
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
        (Some((_, meta)), _) if journal.next_seq <= meta.seq.next() => {
            (meta.seq, meta.chain_crc, meta.ts)
        }
        _ => (journal.next_seq.previous(), journal.last_crc, journal.last_ts),
    };
    // The state includes everything the snapshot did and the journal added after it.
    debug_assert!(last_seq >= base_seq);
    Ok(Recovered {
        venue,
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

/// Records per chunk handed from the reading thread to the applying one.
const CHUNK_RECORDS: usize = 4_096;

/// Decoded commands on their way to the applying thread, borrowing the mapped journal,
/// with their (seq, ts).
#[derive(Default)]
struct Chunk<'m> {
    commands: Vec<Command<'m>>,
    stamps: Vec<(Seq, TimestampNs)>,
}

impl Chunk<'_> {
    fn with_capacity(records: usize) -> Self {
        Chunk { commands: Vec::with_capacity(records), stamps: Vec::with_capacity(records) }
    }

    fn clear(&mut self) {
        self.commands.clear();
        self.stamps.clear();
    }
}

type Replayed = (ScanReport, u64, Option<RecoveryError>);

/// Reads the journal (mapped; every record checked) and decodes its commands on one
/// thread while applying the records after `base_seq` to `venue` on another, so the
/// checksums, the reading and the decoding overlap with the core's work. Returns the
/// scan, the records applied and a snapshot chain break, if any.
fn replay_journal(
    journal_dir: &Path,
    base_seq: Seq,
    snapshot: Option<(&Path, &SnapshotMeta)>,
    venue: &mut Venue,
) -> Result<Replayed, RecoveryError> {
    let mapped = MappedSegments::map(journal_dir)?;
    let (full, filled) = crossbeam_channel::bounded::<Chunk<'_>>(4);
    let (recycle, recycled) = crossbeam_channel::bounded::<Chunk<'_>>(6);
    std::thread::scope(|scope| {
        let applier = scope.spawn(move || apply_chunks(venue, &filled, &recycle));
        let mut chain_error = None;
        let mut chunk = Chunk::with_capacity(CHUNK_RECORDS);
        let scanned = mapped.scan(|header, payload, _| {
            if let Some((path, meta)) = snapshot {
                let chains = (header.seq != meta.seq || header.crc == meta.chain_crc)
                    && (header.seq != meta.seq.next() || header.prev_crc == meta.chain_crc);
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
            // The scan fills in the file and offset of a record that does not decode.
            let command = decode_command(payload).map_err(|source| JournalError::BadPayload {
                path: PathBuf::new(),
                offset: 0,
                seq: header.seq,
                source,
            })?;
            // The scan checked that seqs follow one another; only those after the base
            // are applied.
            debug_assert!(chunk.stamps.last().is_none_or(|&(last, _)| header.seq == last.next()));
            chunk.commands.push(command);
            chunk.stamps.push((header.seq, header.ts));
            debug_assert!(chunk.commands.len() <= CHUNK_RECORDS);
            if chunk.commands.len() == CHUNK_RECORDS {
                let next =
                    recycled.try_recv().unwrap_or_else(|_| Chunk::with_capacity(CHUNK_RECORDS));
                send_chunk(&full, std::mem::replace(&mut chunk, next))?;
            }
            Ok(())
        });
        let sent = scanned.is_ok().then(|| send_chunk(&full, chunk));
        drop(full);
        let applied = applier.join().unwrap_or_else(|_| {
            Err(JournalError::Stopped("the replay thread panicked".to_string()))
        });
        // An error of the applying side explains a failed send on the reading side.
        let replayed = applied?;
        let report = scanned?;
        if let Some(Err(error)) = sent {
            return Err(error.into());
        }
        Ok((report, replayed, chain_error))
    })
}

fn send_chunk<'m>(
    full: &crossbeam_channel::Sender<Chunk<'m>>,
    chunk: Chunk<'m>,
) -> Result<(), JournalError> {
    if chunk.commands.is_empty() {
        return Ok(());
    }
    full.send(chunk).map_err(|_| JournalError::Stopped("the replay stopped".to_string()))
}

/// The applying side of `replay_journal`, with the cache hints of the commands ahead.
fn apply_chunks<'m>(
    venue: &mut Venue,
    filled: &crossbeam_channel::Receiver<Chunk<'m>>,
    recycle: &crossbeam_channel::Sender<Chunk<'m>>,
) -> Result<u64, JournalError> {
    let mut events: Vec<Event> = Vec::with_capacity(64);
    let mut lookahead = Lookahead::new();
    let mut replayed = 0u64;
    for mut chunk in filled {
        debug_assert_eq!(chunk.commands.len(), chunk.stamps.len(), "one stamp per command");
        for (index, command) in chunk.commands.iter().enumerate() {
            lookahead.hint(venue.exchange(), &chunk.commands[index + 1..]);
            let (seq, ts) = chunk.stamps[index];
            venue.apply(seq, Some(ts), command, &mut events);
            events.clear();
        }
        replayed += chunk.commands.len() as u64;
        chunk.clear();
        let _ = recycle.try_send(chunk);
    }
    Ok(replayed)
}

type LoadedSnapshot = (Venue, PathBuf, SnapshotMeta);
/// Snapshots that did not read back: (path, reason).
type SkippedSnapshots = Vec<(PathBuf, String)>;

/// The newest snapshot whose file and state both read back; the ones that did not.
fn newest_valid_snapshot(
    snapshot_dir: &Path,
    exchange_config: ExchangeConfig,
    track_activity: bool,
) -> Result<(Option<LoadedSnapshot>, SkippedSnapshots), RecoveryError> {
    let mut skipped = Vec::new();
    let entries = list_snapshots(snapshot_dir)?;
    // Newest first: the first that reads back is the newest usable.
    debug_assert!(entries.windows(2).all(|pair| pair[0].seq > pair[1].seq));
    for entry in entries {
        let loaded = read_snapshot(&entry.path).map_err(|error| error.to_string()).and_then(
            |(meta, body)| {
                decode_venue(&body, exchange_config, track_activity)
                    .map(|venue| (venue, meta))
                    .map_err(|error| format!("snapshot state: {error}"))
            },
        );
        match loaded {
            Ok((venue, meta)) => return Ok((Some((venue, entry.path, meta)), skipped)),
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
        None => (Seq::ZERO, "(none)".to_string()),
    };
    let Some(journal_first) = journal.first_seq else { return Ok(()) };
    if journal_first > base_seq.next() {
        return Err(RecoveryError::JournalGap {
            snapshot: name,
            snapshot_seq: base_seq,
            journal_first,
        });
    }
    let journal_last = journal.next_seq.previous();
    if journal_last < base_seq {
        return Err(RecoveryError::JournalBehindSnapshot {
            snapshot: name,
            snapshot_seq: base_seq,
            journal_last,
        });
    }
    Ok(())
}
