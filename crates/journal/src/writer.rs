//! Appending to the journal: sealed batches written at the end of the current segment,
//! `sync` to make them durable, a new preallocated segment when one fills up.
//!
//! The writer is fail-stop: after any failed write, sync or segment creation it
//! refuses every later call with the first error, because after a failed `fsync` the
//! kernel may have dropped the dirty pages and nothing about the file can be trusted.
//! The process must restart and recover from what is on disk.

use std::fs::{File, OpenOptions};
use std::io;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicU8, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;

use bourse_core::Seq;

use crate::error::JournalError;
use crate::record::RecordBatch;
use crate::scan::ScanReport;
use crate::segment::{
    create_segment, install_spare, prepare_spare, SegmentHeader, ZeroStep, SEGMENT_HEADER_LEN,
};

/// Default segment size: large enough that rolling is rare, small enough that deleting
/// a segment under a snapshot frees space soon.
pub const SEGMENT_BYTES_DEFAULT: u64 = 64 << 20;

#[derive(Clone, Debug)]
pub struct WriterOptions {
    /// Bytes reserved for each new segment; a batch that does not fit in what is left
    /// starts a new one (a batch larger than a whole segment gets a segment of its own).
    pub segment_bytes: u64,
    /// Fault injection for tests: a switch that makes writes or syncs fail on demand.
    pub faults: Option<Arc<FaultSwitch>>,
}

impl Default for WriterOptions {
    fn default() -> Self {
        WriterOptions { segment_bytes: SEGMENT_BYTES_DEFAULT, faults: None }
    }
}

/// Makes the writer's next operations fail, the way a dying disk or a full file system
/// would: for fault-injection tests of fail-stop.
#[derive(Debug, Default)]
pub struct FaultSwitch {
    mode: AtomicU8,
}

const FAULT_NONE: u8 = 0;
const FAULT_WRITE: u8 = 1;
const FAULT_SYNC: u8 = 2;
const FAULT_NO_SPACE: u8 = 3;

impl FaultSwitch {
    pub fn new() -> Arc<FaultSwitch> {
        Arc::new(FaultSwitch::default())
    }

    /// Every later write fails with an I/O error.
    pub fn fail_writes(&self) {
        self.mode.store(FAULT_WRITE, Ordering::SeqCst);
    }

    /// Every later sync fails with an I/O error (writes still succeed).
    pub fn fail_syncs(&self) {
        self.mode.store(FAULT_SYNC, Ordering::SeqCst);
    }

    /// Every later write fails as on a full disk.
    pub fn fill_disk(&self) {
        self.mode.store(FAULT_NO_SPACE, Ordering::SeqCst);
    }

    fn check(&self, operation: u8) -> io::Result<()> {
        match self.mode.load(Ordering::SeqCst) {
            FAULT_NONE => Ok(()),
            FAULT_NO_SPACE if operation == FAULT_WRITE => {
                Err(io::Error::from_raw_os_error(libc::ENOSPC))
            }
            mode if mode == operation => Err(io::Error::other("injected fault")),
            _ => Ok(()),
        }
    }
}

pub struct JournalWriter {
    dir: PathBuf,
    options: WriterOptions,
    journal_id: u64,
    file: File,
    path: PathBuf,
    /// Where the next batch goes in the current segment.
    write_offset: u64,
    next_seq: Seq,
    last_crc: u32,
    /// Sequence numbers below this are durable.
    synced_below: Seq,
    /// The first failure; once set, nothing more is written.
    failure: Option<String>,
    /// The next segment's file, being made on its own thread.
    spare: Option<SpareThread>,
    /// What the spare's thread reads to tell when the journal is quiet.
    activity: Arc<Activity>,
}

/// The journal's activity as the spare's thread sees it.
#[derive(Default)]
struct Activity {
    /// Counts writes and syncs.
    events: AtomicU64,
    /// Records were written and are not synced yet (a sync may be running: a sync that
    /// takes long is not a quiet journal).
    unsynced: AtomicBool,
}

impl Activity {
    fn wrote(&self) {
        self.unsynced.store(true, Ordering::Relaxed);
        self.events.fetch_add(1, Ordering::Relaxed);
    }

    fn synced(&self) {
        self.unsynced.store(false, Ordering::Relaxed);
        self.events.fetch_add(1, Ordering::Relaxed);
    }
}

/// The thread making the next segment's file (`segment::prepare_spare`): the file is
/// reserved at once, then filled with zeros one step at a time, each step only after
/// the journal was quiet (everything synced, nothing written) for `QUIET`. Under steady
/// load no step is written (a step that meets a journal sync delays it), and the
/// segment keeps `fallocate`'s unwritten extents: measured at 1.5 M commands/s, zeros
/// written beside the journal cost more (slower syncs while they were written) than the
/// unwritten extents they spared.
struct SpareThread {
    thread: JoinHandle<io::Result<(PathBuf, File)>>,
    stop: Arc<AtomicBool>,
}

/// How long the journal must have been quiet before the spare's thread writes a step
/// of zeros.
const QUIET: std::time::Duration = std::time::Duration::from_millis(1);

/// Lets a step of zeros through only once the journal has been quiet for `QUIET`:
/// nothing unsynced and no write or sync since the last look.
struct QuietGate {
    seen_events: u64,
    quiet_since: std::time::Instant,
}

impl QuietGate {
    fn new(now: std::time::Instant) -> QuietGate {
        QuietGate { seen_events: u64::MAX, quiet_since: now }
    }

    fn decide(&mut self, events: u64, unsynced: bool, now: std::time::Instant) -> ZeroStep {
        if events != self.seen_events || unsynced {
            self.seen_events = events;
            self.quiet_since = now;
            return ZeroStep::Wait;
        }
        match now.duration_since(self.quiet_since) >= QUIET {
            true => ZeroStep::Write,
            false => ZeroStep::Wait,
        }
    }
}

impl SpareThread {
    fn start(dir: PathBuf, bytes: u64, activity: Arc<Activity>) -> io::Result<SpareThread> {
        let stop = Arc::new(AtomicBool::new(false));
        let stopped = Arc::clone(&stop);
        let thread = std::thread::Builder::new().name("bourse-journal-spare".to_string()).spawn(
            move || {
                let mut quiet = QuietGate::new(std::time::Instant::now());
                let mut gate = || match stopped.load(Ordering::Relaxed) {
                    true => ZeroStep::Stop,
                    false => quiet.decide(
                        activity.events.load(Ordering::Relaxed),
                        activity.unsynced.load(Ordering::Relaxed),
                        std::time::Instant::now(),
                    ),
                };
                prepare_spare(&dir, bytes, Some(&mut gate))
            },
        )?;
        Ok(SpareThread { thread, stop })
    }

    /// The spare file as far as it got (its thread stops after the step it is writing).
    fn finish(self) -> Option<(PathBuf, File)> {
        self.stop.store(true, Ordering::Relaxed);
        self.thread.join().ok().and_then(Result::ok)
    }
}

impl JournalWriter {
    /// Continues the journal `report` describes (a scan that repaired its torn tail), or
    /// creates a new one in `dir` when it has no segment yet, with its first record at
    /// `first_seq` chained from `prev_crc` (1 and 0 for a new exchange; after a snapshot
    /// whose journal was lost, the snapshot's).
    ///
    /// A report with a torn tail that was not removed (a `TailPolicy::ReadOnly` scan) is
    /// refused: records appended before the torn bytes would leave records of the old
    /// batch after them, and the next start would refuse the journal.
    pub fn open(
        dir: &Path,
        report: &ScanReport,
        options: WriterOptions,
        first_seq: Seq,
        prev_crc: u32,
    ) -> Result<JournalWriter, JournalError> {
        JournalWriter::open_with_id(dir, report, options, first_seq, prev_crc, None)
    }

    /// Like `open`; a journal created anew takes `journal_id` when given (the id of the
    /// snapshot it continues), so that snapshot and journal still belong together.
    pub fn open_with_id(
        dir: &Path,
        report: &ScanReport,
        options: WriterOptions,
        first_seq: Seq,
        prev_crc: u32,
        journal_id: Option<u64>,
    ) -> Result<JournalWriter, JournalError> {
        assert!(first_seq > Seq::ZERO, "records are numbered from 1");
        if let Some(torn) = report.torn_tail.as_ref().filter(|torn| !torn.removed) {
            return Err(JournalError::Damaged {
                path: torn.path.clone(),
                offset: torn.offset,
                reason: format!(
                    "{}, a torn tail not removed (scan with TailPolicy::Repair before writing)",
                    torn.reason
                ),
            });
        }
        std::fs::create_dir_all(dir).map_err(|error| JournalError::io(dir, error))?;
        match (report.journal_id, report.segments.last()) {
            (Some(journal_id), Some(segment)) => {
                let file = OpenOptions::new()
                    .read(true)
                    .write(true)
                    .open(&segment.path)
                    .map_err(|error| JournalError::io(&segment.path, error))?;
                let mut writer = JournalWriter {
                    dir: dir.to_path_buf(),
                    options,
                    journal_id,
                    file,
                    path: segment.path.clone(),
                    write_offset: segment.end_offset,
                    next_seq: report.next_seq,
                    last_crc: report.last_crc,
                    synced_below: report.next_seq,
                    failure: None,
                    spare: None,
                    activity: Arc::default(),
                };
                writer.prepare_spare();
                Ok(writer)
            }
            _ => {
                let journal_id = report.journal_id.or(journal_id).unwrap_or_else(new_journal_id);
                let header = SegmentHeader { journal_id, first_seq, prev_crc };
                let (path, file) = prepare_spare(dir, options.segment_bytes, None)
                    .and_then(|spare| install_spare(dir, spare, header))
                    .map_err(|error| JournalError::io(dir, error))?;
                let mut writer = JournalWriter {
                    dir: dir.to_path_buf(),
                    options,
                    journal_id,
                    file,
                    path,
                    write_offset: SEGMENT_HEADER_LEN as u64,
                    next_seq: first_seq,
                    last_crc: prev_crc,
                    synced_below: first_seq,
                    failure: None,
                    spare: None,
                    activity: Arc::default(),
                };
                writer.prepare_spare();
                Ok(writer)
            }
        }
    }

    pub fn journal_id(&self) -> u64 {
        self.journal_id
    }

    /// The sequence number the next record gets.
    pub fn next_seq(&self) -> Seq {
        self.next_seq
    }

    /// The crc of the last record written.
    pub fn last_crc(&self) -> u32 {
        self.last_crc
    }

    /// Whether records were written since the last sync.
    pub fn has_unsynced(&self) -> bool {
        self.synced_below < self.next_seq
    }

    /// Seals `batch` (its sequence numbers follow the last record's) and writes it at
    /// the end of the journal. Not durable until `sync`.
    pub fn write(&mut self, batch: &mut RecordBatch) -> Result<(), JournalError> {
        self.check_healthy()?;
        if batch.is_empty() {
            return Ok(());
        }
        let batch_bytes = batch.byte_len() as u64;
        if self.write_offset + batch_bytes > self.options.segment_bytes
            && self.write_offset > SEGMENT_HEADER_LEN as u64
        {
            self.roll()?;
        }
        debug_assert!(self.synced_below <= self.next_seq, "nothing is synced before it is written");
        debug_assert!(
            self.write_offset.is_multiple_of(crate::record::ALIGN as u64),
            "records start aligned"
        );
        self.last_crc = batch.seal_in_group(self.next_seq, self.last_crc, self.synced_below);
        let written = self
            .fault(FAULT_WRITE)
            .and_then(|()| self.file.write_all_at(batch.bytes(), self.write_offset));
        self.activity.wrote();
        self.record(written)?;
        self.write_offset += batch_bytes;
        self.next_seq += batch.len() as u64;
        debug_assert!(
            self.write_offset <= self.options.segment_bytes
                || self.write_offset == SEGMENT_HEADER_LEN as u64 + batch_bytes,
            "a batch fits in its segment, or has a segment of its own"
        );
        Ok(())
    }

    /// Makes everything written so far durable (fdatasync).
    pub fn sync(&mut self) -> Result<(), JournalError> {
        self.check_healthy()?;
        if !self.has_unsynced() {
            return Ok(());
        }
        let synced = self.fault(FAULT_SYNC).and_then(|()| self.file.sync_data());
        self.record(synced)?;
        self.activity.synced();
        self.synced_below = self.next_seq;
        debug_assert!(!self.has_unsynced());
        Ok(())
    }

    /// Syncs the current segment and starts the next one.
    fn roll(&mut self) -> Result<(), JournalError> {
        self.sync()?;
        // Only the last batch of the last segment may be torn by a crash (`scan`): a
        // segment is whole and durable before the next one starts.
        debug_assert!(!self.has_unsynced(), "a segment rolls over only once synced");
        let header = SegmentHeader {
            journal_id: self.journal_id,
            first_seq: self.next_seq,
            prev_crc: self.last_crc,
        };
        // The spare is taken as far as its zeros got; without one (its thread could not
        // start or failed), the segment is made now (with fallocate, which is quick).
        let spare = self.spare.take().and_then(SpareThread::finish);
        let created = self.fault(FAULT_WRITE).and_then(|()| match spare {
            Some(spare) => install_spare(&self.dir, spare, header),
            None => create_segment(&self.dir, header, self.options.segment_bytes),
        });
        let (path, file) = match created {
            Ok(created) => created,
            Err(error) => return Err(self.fail(&self.dir.clone(), error)),
        };
        self.path = path;
        self.file = file;
        self.write_offset = SEGMENT_HEADER_LEN as u64;
        self.prepare_spare();
        Ok(())
    }

    /// Starts making the next segment's file, off the writing thread.
    fn prepare_spare(&mut self) {
        let dir = self.dir.clone();
        let bytes = self.options.segment_bytes;
        // Without a thread the next roll makes its segment itself.
        self.spare = SpareThread::start(dir, bytes, Arc::clone(&self.activity)).ok();
    }

    fn fault(&self, operation: u8) -> io::Result<()> {
        match &self.options.faults {
            Some(faults) => faults.check(operation),
            None => Ok(()),
        }
    }

    fn record(&mut self, result: io::Result<()>) -> Result<(), JournalError> {
        result.map_err(|error| self.fail(&self.path.clone(), error))
    }

    fn fail(&mut self, path: &Path, error: io::Error) -> JournalError {
        let error = JournalError::io(path, error);
        self.failure.get_or_insert_with(|| error.to_string());
        error
    }

    fn check_healthy(&self) -> Result<(), JournalError> {
        match &self.failure {
            Some(failure) => Err(JournalError::Stopped(failure.clone())),
            None => Ok(()),
        }
    }
}

impl Drop for JournalWriter {
    /// Stops the spare's thread and waits for it, so no thread writes in the directory
    /// after the writer is gone.
    fn drop(&mut self) {
        if let Some(spare) = self.spare.take() {
            let _ = spare.finish();
        }
    }
}

/// A journal id unlikely to repeat: std's per-process random hash keys mixed with the
/// time and the process id.
fn new_journal_id() -> u64 {
    use std::hash::{BuildHasher, Hasher};
    let mut hasher = std::collections::hash_map::RandomState::new().build_hasher();
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|elapsed| elapsed.as_nanos())
        .unwrap_or(0);
    hasher.write_u128(now);
    hasher.write_u32(std::process::id());
    hasher.finish()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::{Duration, Instant};

    #[test]
    fn the_spare_waits_for_a_quiet_journal() {
        let start = Instant::now();
        let at = |micros: u64| start + Duration::from_micros(micros);
        let mut gate = QuietGate::new(start);
        // First look: nothing seen yet, so the quiet time starts now.
        assert_eq!(gate.decide(7, false, at(0)), ZeroStep::Wait);
        assert_eq!(gate.decide(7, false, at(500)), ZeroStep::Wait);
        assert_eq!(gate.decide(7, false, at(1_000)), ZeroStep::Write);
        assert_eq!(gate.decide(7, false, at(1_600)), ZeroStep::Write);
        // A write: quiet again only a full `QUIET` after it was seen.
        assert_eq!(gate.decide(8, true, at(1_700)), ZeroStep::Wait);
        // Its sync runs long: unsynced records are not a quiet journal.
        assert_eq!(gate.decide(8, true, at(4_000)), ZeroStep::Wait);
        assert_eq!(gate.decide(9, false, at(4_100)), ZeroStep::Wait);
        assert_eq!(gate.decide(9, false, at(5_000)), ZeroStep::Wait);
        assert_eq!(gate.decide(9, false, at(5_100)), ZeroStep::Write);
    }

    #[test]
    fn a_busy_journal_rolls_into_spares_whose_zeros_never_started() {
        let dir = tempfile::tempdir().unwrap();
        let read = |dir: &Path| {
            crate::scan::scan_journal(dir, crate::scan::TailPolicy::ReadOnly, |_, _| Ok(()))
                .unwrap()
        };
        let report = read(dir.path());
        let options = WriterOptions { segment_bytes: 4096, faults: None };
        let mut writer = JournalWriter::open(dir.path(), &report, options, Seq(1), 0).unwrap();
        // Never synced, so the journal never looks quiet to the spare's thread; every
        // roll still finds a spare to install.
        let mut batch = RecordBatch::default();
        for round in 0..40u64 {
            batch.clear();
            for index in 0..50u64 {
                let payload = (round * 100 + index).to_le_bytes();
                batch
                    .push(bourse_core::TimestampNs(round), |out| {
                        out.extend_from_slice(&payload);
                        Ok::<(), std::convert::Infallible>(())
                    })
                    .unwrap();
            }
            writer.write(&mut batch).unwrap();
        }
        writer.sync().unwrap();
        drop(writer);
        let report = read(dir.path());
        assert_eq!(report.next_seq, Seq(2_001));
        assert!(report.segments.len() > 10, "{} segments", report.segments.len());
        assert!(report.torn_tail.is_none());
    }
}
