//! The history's follower: a copy of the state machine that reads the durable journal,
//! derives each command's rows (`derive`) and commits them as Parquet files, the
//! lookups (`index`) and a checkpoint, exactly once across crashes.
//!
//! Exactly once, by sequence number: a commit covers the commands
//! `committed_seq + 1 ..= applied_seq`. Its files are named by that range and written
//! whole (`files`), then the index, then the checkpoint (`checkpoint.json`, replaced
//! atomically), which is what makes the commit count. On open, part files of a range
//! after the checkpoint's `committed_seq` are deleted, the copy of the state is loaded
//! from the replica snapshot the checkpoint names (taken at some commit at or before
//! it) and the journal is replayed from there, rows at or before `committed_seq` being
//! derived again but not written. Derivation is deterministic, so the rows after the
//! checkpoint are those the crashed run would have written: nothing is missing and
//! nothing is written twice. The engine must keep the journal from the replica
//! snapshot on (`needed_from`). The index's batch records the commit's range: when it
//! holds a commit the checkpoint does not, the first commit after opening covers
//! exactly that range again (`commit_at`), so it rewrites the same index keys.
//!
//! A commit is sealed here and written on a thread of its own (`commit`) while the next
//! rows are derived; one commit is written at a time, in order.
//! While the engine is quiet and the follower has caught up, it merges small part
//! files (`compact`), one run at a time.
//!
//! It never writes the journal or the engine's snapshots, and never blocks the engine:
//! it only reads records the journal has made durable.

use std::fs;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use bourse_core::ledger::BalanceChange;
use bourse_core::snapshot::{decode_venue, encode_venue};
use bourse_core::venue::Venue;
use bourse_core::{Event, Exchange, ExchangeConfig, Seq, TimestampNs};
use bourse_journal::segment::{list_segments, SegmentHeader, SEGMENT_HEADER_LEN};
use bourse_journal::tail::JournalTail;
use bourse_journal::{decode_command, list_snapshots, read_snapshot, write_snapshot, SnapshotMeta};

use crate::checkpoint::{read_checkpoint, write_checkpoint, Checkpoint, CHECKPOINT_VERSION};
use crate::commit::{replica_dir, CommitJob, Written};
use crate::compact::{merge_next, remove_superseded, Merged, RowCounts};
use crate::derive::{Applied, Deriver, Pending};
use crate::error::{io_error, HistoryError};
use crate::files::{remove_uncommitted, FilesLock};
use crate::index::Index;
use crate::stats::HistoryStats;
use crate::tables::Table;

#[derive(Clone, Debug)]
pub struct HistoryConfig {
    pub history_dir: PathBuf,
    pub journal_dir: PathBuf,
    /// The engine's snapshots: where a new history starts when the journal no longer
    /// begins at record 1.
    pub snapshot_dir: PathBuf,
    /// Commit at least this often while commands arrive.
    pub commit_every: Duration,
    /// ... and as soon as this many rows wait.
    pub commit_rows: usize,
    /// Take a replica snapshot at the first commit this many commands after the last.
    pub replica_every_commands: u64,
    /// While the engine takes commands fast (`BUSY_COMMANDS_PER_S`), `run` follows at
    /// most this share of the time and sleeps the rest, so that matching keeps its
    /// cores; it follows flat out otherwise (catching up). 1.0: never gives way.
    pub busy_share: f64,
}

/// Commands per second into the journal above which the engine counts as busy.
pub const BUSY_COMMANDS_PER_S: f64 = 10_000.0;

/// Commands `run` applies between looks at the engine's pace, and `catch_up` between
/// looks at whether `commit_rows` rows wait.
const SLICE_COMMANDS: u64 = 4_096;

impl HistoryConfig {
    /// The layout of `bourse serve`: `data/history` beside `data/journal` and
    /// `data/snapshots`.
    pub fn under(data_dir: &Path) -> HistoryConfig {
        HistoryConfig {
            history_dir: data_dir.join("history"),
            journal_dir: data_dir.join("journal"),
            snapshot_dir: data_dir.join("snapshots"),
            commit_every: Duration::from_secs(2),
            commit_rows: 1_000_000,
            replica_every_commands: 5_000_000,
            busy_share: 0.1,
        }
    }
}

pub struct Follower {
    config: HistoryConfig,
    venue: Venue,
    deriver: Deriver,
    tail: JournalTail,
    pending: Pending,
    index: Index,
    /// The last commit written.
    checkpoint: Checkpoint,
    /// The last commit sealed (being written, or `checkpoint`).
    sealed: Checkpoint,
    /// The thread writing the sealed commit.
    writing: Option<JoinHandle<Result<Written, HistoryError>>>,
    /// An emptied `Pending` whose buffers the next commit's rows reuse.
    spare: Option<Pending>,
    /// The last command the copy of the state includes, its crc and its time.
    applied_seq: Seq,
    applied_crc: u32,
    applied_ts: TimestampNs,
    rows_by_table: Vec<(Table, u64)>,
    last_commit: Instant,
    /// Where the next commit must end: a commit the index holds but the checkpoint
    /// does not (a crash between them) is made again over exactly its range, so that
    /// it writes the same index keys.
    commit_at: Option<Seq>,
    events: Vec<Event>,
    changes: Vec<BalanceChange>,
    stats: Arc<HistoryStats>,
    files_lock: FilesLock,
    row_counts: RowCounts,
    /// Whether a merge of small files may be due: after a commit (and on open), until
    /// a look finds none.
    merge_due: bool,
}

/// The journal's id and first record, from its first segment's header.
fn journal_start(journal_dir: &Path) -> Result<Option<(u64, Seq)>, HistoryError> {
    let segments = list_segments(journal_dir).map_err(io_error(journal_dir))?;
    let Some((_, path)) = segments.first() else { return Ok(None) };
    let mut bytes = [0u8; SEGMENT_HEADER_LEN];
    let read =
        fs::File::open(path).and_then(|mut file| io::Read::read_exact(&mut file, &mut bytes));
    match read {
        Ok(()) => {}
        Err(error) if error.kind() == io::ErrorKind::UnexpectedEof => {
            return Err(HistoryError::Damaged(format!(
                "{} is shorter than its header",
                path.display()
            )))
        }
        Err(error) => return Err(HistoryError::Io(path.clone(), error)),
    }
    let header = SegmentHeader::parse(&bytes)
        .map_err(|reason| HistoryError::Damaged(format!("{}: {reason}", path.display())))?;
    Ok(Some((header.journal_id, header.first_seq)))
}

fn new_venue() -> Venue {
    let mut venue = Venue::new(Exchange::new(ExchangeConfig::default()), true);
    venue.record_balance_changes(true);
    venue
}

fn load_venue(path: &Path) -> Result<(Venue, SnapshotMeta), HistoryError> {
    let (meta, body) = read_snapshot(path)?;
    let mut venue = decode_venue(&body, ExchangeConfig::default(), true)
        .map_err(|error| HistoryError::Damaged(format!("{}: {error}", path.display())))?;
    venue.record_balance_changes(true);
    Ok((venue, meta))
}

impl Follower {
    /// Opens the history under `config.history_dir` (made if new), ready to follow the
    /// journal from the first command it has not committed.
    pub fn open(config: HistoryConfig, stats: Arc<HistoryStats>) -> Result<Follower, HistoryError> {
        let index_dir = config.history_dir.join("index");
        fs::create_dir_all(&index_dir).map_err(io_error(&index_dir))?;
        let index = Index::open(&index_dir)?;
        Follower::open_with_index(config, stats, index)
    }

    /// `open`, with the lookup index already open (it is opened once per process: the
    /// API reads it while the follower writes it).
    pub fn open_with_index(
        config: HistoryConfig,
        stats: Arc<HistoryStats>,
        index: Index,
    ) -> Result<Follower, HistoryError> {
        let history_dir = config.history_dir.clone();
        fs::create_dir_all(replica_dir(&history_dir)).map_err(io_error(&history_dir))?;
        let journal = journal_start(&config.journal_dir)?;
        let (venue, checkpoint, replica_crc, replica_ts) = match read_checkpoint(&history_dir)? {
            Some(checkpoint) => {
                if let Some((journal_id, _)) = journal {
                    if journal_id != checkpoint.journal_id && checkpoint.journal_id != 0 {
                        return Err(HistoryError::ForeignJournal {
                            expected: checkpoint.journal_id,
                            found: journal_id,
                        });
                    }
                }
                let (venue, crc, ts) = if checkpoint.replica_seq == Seq::ZERO {
                    (new_venue(), 0, TimestampNs::ZERO)
                } else {
                    let path = bourse_journal::snapshot_file::snapshot_path(
                        &replica_dir(&history_dir),
                        checkpoint.replica_seq,
                    );
                    let (venue, meta) = load_venue(&path)?;
                    (venue, meta.chain_crc, meta.ts)
                };
                (venue, checkpoint, crc, ts)
            }
            None => Self::start(&config, journal)?,
        };
        if let Some((_, first_held)) = journal {
            if first_held > checkpoint.replica_seq.next() {
                return Err(HistoryError::JournalGone {
                    needed: checkpoint.replica_seq.next(),
                    first_held,
                });
            }
        }
        remove_uncommitted(&history_dir, checkpoint.committed_seq)
            .map_err(io_error(&history_dir))?;
        remove_superseded(&history_dir).map_err(io_error(&history_dir))?;
        let rows_by_table = Table::ALL
            .iter()
            .map(|table| {
                let rows = checkpoint
                    .rows
                    .iter()
                    .find(|(name, _)| name == table.name())
                    .map_or(0, |(_, rows)| *rows);
                (*table, rows)
            })
            .collect();
        let commit_at = match index.in_flight()? {
            Some((first, last)) if first == checkpoint.committed_seq.next() => Some(last),
            _ => None,
        };
        // The replica is a commit's state: never ahead of what is committed.
        debug_assert!(checkpoint.replica_seq <= checkpoint.committed_seq);
        stats.committed_seq.store(checkpoint.committed_seq.0, Ordering::SeqCst);
        stats.applied_seq.store(checkpoint.replica_seq.0, Ordering::SeqCst);
        stats.needed_from.store(checkpoint.replica_seq.next().0, Ordering::SeqCst);
        Ok(Follower {
            tail: JournalTail::new(&config.journal_dir, checkpoint.replica_seq.next(), replica_crc),
            deriver: Deriver::new(checkpoint.committed_seq, &checkpoint.open_candles),
            venue,
            pending: Pending::default(),
            index,
            applied_seq: checkpoint.replica_seq,
            applied_crc: replica_crc,
            applied_ts: replica_ts,
            sealed: checkpoint.clone(),
            writing: None,
            spare: None,
            checkpoint,
            rows_by_table,
            last_commit: Instant::now(),
            commit_at,
            events: Vec::with_capacity(64),
            changes: Vec::with_capacity(64),
            stats,
            files_lock: FilesLock::new(&history_dir),
            row_counts: RowCounts::default(),
            merge_due: true,
            config,
        })
    }

    /// Where a new history starts: at record 1 when the journal holds it (or is empty),
    /// otherwise at the engine's newest snapshot.
    fn start(
        config: &HistoryConfig,
        journal: Option<(u64, Seq)>,
    ) -> Result<(Venue, Checkpoint, u32, TimestampNs), HistoryError> {
        let journal_id = journal.map_or(0, |(id, _)| id);
        let fresh = Checkpoint {
            version: CHECKPOINT_VERSION,
            journal_id,
            first_seq: Seq(1),
            ..Checkpoint::default()
        };
        match journal {
            None | Some((_, Seq(1))) => Ok((new_venue(), fresh, 0, TimestampNs::ZERO)),
            Some((_, first_held)) => {
                let snapshots = list_snapshots(&config.snapshot_dir)?;
                let usable = snapshots.iter().find(|entry| entry.seq.next() >= first_held);
                let Some(entry) = usable else {
                    return Err(HistoryError::JournalGone { needed: Seq(1), first_held });
                };
                let (venue, meta) = load_venue(&entry.path)?;
                // The engine's snapshot becomes the history's first replica snapshot.
                let mut body = Vec::new();
                encode_venue(&venue, &mut body);
                write_snapshot(&replica_dir(&config.history_dir), meta, &body)?;
                let checkpoint = Checkpoint {
                    committed_seq: meta.seq,
                    first_seq: meta.seq.next(),
                    replica_seq: meta.seq,
                    ..fresh
                };
                write_checkpoint(&config.history_dir, &checkpoint)?;
                Ok((venue, checkpoint, meta.chain_crc, meta.ts))
            }
        }
    }

    pub fn committed_seq(&self) -> Seq {
        self.checkpoint.committed_seq
    }

    pub fn applied_seq(&self) -> Seq {
        self.applied_seq
    }

    pub fn index(&self) -> &Index {
        &self.index
    }

    pub fn checkpoint(&self) -> &Checkpoint {
        &self.checkpoint
    }

    /// Rows derived and not yet committed.
    pub fn pending_rows(&self) -> usize {
        self.pending.rows
    }

    /// Applies the journal's records up to `until` (which must be durable), deriving
    /// their rows; starts a commit (`start_commit`) whenever `commit_rows` rows wait, and
    /// at the end of an unfinished commit's range (`commit_at`). Returns the last applied.
    pub fn catch_up(&mut self, until: Seq) -> Result<Seq, HistoryError> {
        while self.applied_seq < until {
            let mut chunk_end = until.min(self.applied_seq + SLICE_COMMANDS);
            if let Some(commit_at) = self.commit_at {
                chunk_end = chunk_end.min(commit_at);
            }
            self.apply_until(chunk_end)?;
            // The tail reads every record up to its bound, or fails.
            debug_assert_eq!(self.applied_seq, chunk_end);
            let due = match self.commit_at {
                Some(commit_at) => self.applied_seq >= commit_at,
                None => self.pending.rows >= self.config.commit_rows,
            };
            if due {
                self.start_commit()?;
            }
        }
        Ok(self.applied_seq)
    }

    fn apply_until(&mut self, until: Seq) -> Result<(), HistoryError> {
        let Follower { tail, venue, deriver, pending, events, changes, .. } = self;
        let (mut applied_seq, mut applied_crc, mut applied_ts) =
            (self.applied_seq, self.applied_crc, self.applied_ts);
        let mut failure = None;
        let mut event_count = 0u64;
        tail.read_until(until, |header, payload| {
            if failure.is_some() {
                return;
            }
            let command = match decode_command(payload) {
                Ok(command) => command,
                Err(error) => {
                    failure = Some(HistoryError::Record(header.seq, error.to_string()));
                    return;
                }
            };
            events.clear();
            changes.clear();
            // The tail hands out each record once, in order, after the copy's last.
            debug_assert_eq!(header.seq, applied_seq.next());
            let acted = venue.apply(header.seq, Some(header.ts), &command, events);
            venue.take_balance_changes(changes);
            event_count += events.len() as u64;
            let ts = venue.exchange().time_ns();
            let applied = Applied {
                seq: header.seq,
                ts,
                command: &command,
                events,
                changes,
                order_id: acted.order_id,
            };
            deriver.derive(&applied, venue, pending);
            (applied_seq, applied_crc, applied_ts) = (header.seq, header.crc, header.ts);
        })?;
        (self.applied_seq, self.applied_crc, self.applied_ts) =
            (applied_seq, applied_crc, applied_ts);
        self.stats.applied_seq.store(applied_seq.0, Ordering::Relaxed);
        self.stats.events.fetch_add(event_count, Ordering::Relaxed);
        failure.map_or(Ok(()), Err)
    }

    /// Whether a commit is due: rows or commands wait and `commit_every` has passed.
    pub fn commit_due(&self) -> bool {
        self.applied_seq > self.sealed.committed_seq
            && self.last_commit.elapsed() >= self.config.commit_every
    }

    /// Makes everything applied so far durable: the part files, the index, a replica
    /// snapshot when due, then the checkpoint. Returns once it is (or once it failed).
    /// While an unfinished commit is being made again (`commit_at`), it does nothing
    /// until the follower has applied up to that commit's end.
    pub fn commit(&mut self) -> Result<(), HistoryError> {
        self.start_commit()?;
        self.finish_commit()
    }

    /// Seals what was applied since the last commit and has it written on a thread of
    /// its own (after the previous one is done: one at a time), so that following goes
    /// on meanwhile. `finish_commit` waits for it.
    pub fn start_commit(&mut self) -> Result<(), HistoryError> {
        let sealed = self.sealed.committed_seq;
        if self.applied_seq <= sealed {
            return Ok(());
        }
        if self.commit_at.is_some_and(|commit_at| self.applied_seq != commit_at) {
            // Not at the unfinished commit's end yet (`catch_up` stops there).
            return Ok(());
        }
        self.finish_commit()?;
        let range = (sealed.next(), self.applied_seq);
        // A commit covers what was applied since the last one, nothing twice.
        debug_assert!(range.0 <= range.1);
        let spare = self.spare.take().unwrap_or_default();
        let pending = std::mem::replace(&mut self.pending, spare);
        let mut checkpoint = self.sealed.clone();
        let replica_due = self.applied_seq
            >= checkpoint.replica_seq + self.config.replica_every_commands
            || checkpoint.replica_seq == Seq::ZERO;
        let replica = if replica_due {
            let mut body = Vec::new();
            encode_venue(&self.venue, &mut body);
            let meta = SnapshotMeta {
                journal_id: checkpoint.journal_id,
                seq: self.applied_seq,
                chain_crc: self.applied_crc,
                ts: self.applied_ts,
            };
            checkpoint.replica_seq = self.applied_seq;
            checkpoint.open_candles = self.deriver.open_candles();
            Some((meta, body))
        } else {
            None
        };
        checkpoint.committed_seq = self.applied_seq;
        let counted = pending.rows_by_table();
        for (table, rows) in self.rows_by_table.iter_mut() {
            *rows += counted[*table as usize];
        }
        checkpoint.rows = self
            .rows_by_table
            .iter()
            .map(|(table, rows)| (table.name().to_string(), *rows))
            .collect();
        let job = CommitJob {
            history_dir: self.config.history_dir.clone(),
            range,
            pending,
            replica,
            previous_replica: self.sealed.replica_seq,
            checkpoint: checkpoint.clone(),
            index: self.index.clone(),
            stats: Arc::clone(&self.stats),
        };
        let writer = std::thread::Builder::new()
            .name("history-commit".into())
            .spawn(move || job.write())
            .map_err(|error| HistoryError::Io(self.config.history_dir.clone(), error))?;
        self.writing = Some(writer);
        self.sealed = checkpoint;
        self.commit_at = None;
        self.last_commit = Instant::now();
        Ok(())
    }

    /// Waits for the commit being written, if any.
    pub fn finish_commit(&mut self) -> Result<(), HistoryError> {
        let Some(writer) = self.writing.take() else { return Ok(()) };
        let written = writer.join().map_err(|_| {
            HistoryError::Damaged("the commit's writer thread panicked".to_string())
        })??;
        // Commits are written one at a time, in order: the one written is the last sealed.
        debug_assert_eq!(written.checkpoint, self.sealed);
        self.checkpoint = written.checkpoint;
        self.spare = Some(written.recycled);
        self.merge_due = true;
        Ok(())
    }

    /// Merges small committed files until no run is due (what `run` does one merge at a
    /// time while the engine is quiet); returns the merges, the files they replaced and
    /// the rows they rewrote.
    pub fn merge_all_small_files(&mut self) -> Result<(usize, usize, u64), HistoryError> {
        let (mut merges, mut replaced, mut rows) = (0, 0, 0);
        while let Some(merged) = self.merge_small_files()? {
            merges += 1;
            replaced += merged.files_replaced;
            rows += merged.rows;
        }
        Ok((merges, replaced, rows))
    }

    /// Merges one run of small committed files if one is due (`compact`); `None` when
    /// none is (and none will be until the next commit).
    pub fn merge_small_files(&mut self) -> Result<Option<Merged>, HistoryError> {
        let history_dir = &self.config.history_dir;
        let merged = merge_next(
            history_dir,
            self.checkpoint.committed_seq,
            &self.files_lock,
            &mut self.row_counts,
        )
        .map_err(io_error(history_dir))?;
        match &merged {
            Some(merged) => {
                self.stats.merges.fetch_add(1, Ordering::Relaxed);
                self.stats.files_merged.fetch_add(merged.files_replaced as u64, Ordering::Relaxed);
            }
            None => self.merge_due = false,
        }
        Ok(merged)
    }

    /// Follows the journal until `stop` says so: applies what `durable_until` says is
    /// durable, in slices of `SLICE_COMMANDS`, pausing between slices while the engine
    /// is busy (`next_pause`) and for `IDLE_POLL` once caught up, and commits when due;
    /// commits what it applied once more at the end. An error is reported through
    /// `on_error`, and the follower starts over from its last commit after a pause
    /// (trading goes on; the journal keeps everything).
    pub fn run(
        self,
        durable_until: impl Fn() -> Seq,
        stop: &Stop,
        on_error: impl Fn(&HistoryError),
    ) {
        let (config, stats, index) = (self.config.clone(), self.stats.clone(), self.index.clone());
        let mut follower = Some(self);
        let mut pause = IDLE_POLL;
        loop {
            let Some(current) = follower.as_mut() else {
                if stop.wait(Duration::from_secs(1)) {
                    return;
                }
                match Follower::open_with_index(config.clone(), stats.clone(), index.clone()) {
                    Ok(reopened) => follower = Some(reopened),
                    Err(error) => {
                        stats.failures.fetch_add(1, Ordering::Relaxed);
                        on_error(&error);
                    }
                }
                continue;
            };
            let stopping = stop.wait(pause);
            let started = Instant::now();
            let durable_before = durable_until();
            let slice_end = durable_before.min(current.applied_seq + SLICE_COMMANDS);
            let step = current.catch_up(slice_end).and_then(|_| {
                if stopping {
                    current.commit()
                } else if current.commit_due() {
                    current.start_commit()
                } else {
                    Ok(())
                }
            });
            let arrived = durable_until().0.saturating_sub(durable_before.0);
            pause = next_pause(&config, started.elapsed(), arrived);
            let caught_up = current.applied_seq >= durable_until();
            if caught_up {
                pause = pause.max(IDLE_POLL);
            }
            // Small files are merged only while the engine is quiet and the follower has
            // nothing to follow: one merge per look, so that stopping stays prompt.
            let quiet = caught_up
                && arrived as f64 / started.elapsed().as_secs_f64().max(1e-6) < BUSY_COMMANDS_PER_S;
            let step = step.and_then(|()| {
                if quiet && !stopping && current.merge_due {
                    current.merge_small_files().map(|_| ())
                } else {
                    Ok(())
                }
            });
            if let Err(error) = step {
                stats.failures.fetch_add(1, Ordering::Relaxed);
                on_error(&error);
                // The state in memory may be partway through a commit: start over from
                // the last one (the index's files are closed first).
                follower = None;
            }
            if stopping {
                return;
            }
        }
    }
}

/// How often `run` looks for new commands once it has caught up.
const IDLE_POLL: Duration = Duration::from_millis(50);

/// The pause after a slice of following that took `busy`, during which `arrived`
/// commands became durable: none while the engine is quiet (catch up), and while it is
/// busy long enough that following takes `busy_share` of the time.
fn next_pause(config: &HistoryConfig, busy: Duration, arrived: u64) -> Duration {
    let seconds = busy.as_secs_f64().max(1e-6);
    let share = config.busy_share;
    if arrived as f64 / seconds < BUSY_COMMANDS_PER_S || !(share > 0.0 && share < 1.0) {
        return Duration::ZERO;
    }
    busy.mul_f64((1.0 - share) / share).min(Duration::from_secs(1))
}

/// A stop signal a follower thread waits on.
#[derive(Debug, Default)]
pub struct Stop {
    stopped: Mutex<bool>,
    wake: Condvar,
}

impl Stop {
    pub fn stop(&self) {
        let mut stopped = self.stopped.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        *stopped = true;
        self.wake.notify_all();
    }

    /// Waits up to `timeout`; `true` once stopped.
    pub fn wait(&self, timeout: Duration) -> bool {
        let stopped = self.stopped.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        let (stopped, _) = self
            .wake
            .wait_timeout_while(stopped, timeout, |stopped| !*stopped)
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        *stopped
    }
}

impl Drop for Follower {
    /// A commit being written is finished, not abandoned: the next follower on this
    /// directory must not race with it.
    fn drop(&mut self) {
        let _ = self.finish_commit();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_follower_gives_way_only_while_the_engine_is_busy() {
        let config = HistoryConfig { busy_share: 0.2, ..HistoryConfig::under(Path::new("d")) };
        let slice = Duration::from_millis(10);
        // 100,000 commands/s arriving: follow a fifth of the time.
        assert_eq!(next_pause(&config, slice, 1_000), Duration::from_millis(40));
        // 1,000 commands/s: the engine is not busy, catch up flat out.
        assert_eq!(next_pause(&config, slice, 10), Duration::ZERO);
        let never = HistoryConfig { busy_share: 1.0, ..config.clone() };
        assert_eq!(next_pause(&never, slice, 1_000), Duration::ZERO);
        // A long slice never makes a pause of more than a second.
        assert_eq!(next_pause(&config, Duration::from_secs(5), 1_000_000), Duration::from_secs(1));
    }
}
