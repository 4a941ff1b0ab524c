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
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;

use crate::error::JournalError;
use crate::record::RecordBatch;
use crate::scan::ScanReport;
use crate::segment::{
    create_segment, install_spare, prepare_spare, SegmentHeader, SEGMENT_HEADER_LEN,
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
    next_seq: u64,
    last_crc: u32,
    /// Sequence numbers below this are durable.
    synced_below: u64,
    /// The first failure; once set, nothing more is written.
    failure: Option<String>,
    /// The next segment's file, being filled with zeros on its own thread.
    spare: Option<JoinHandle<io::Result<(PathBuf, File)>>>,
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
        first_seq: u64,
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
        first_seq: u64,
        prev_crc: u32,
        journal_id: Option<u64>,
    ) -> Result<JournalWriter, JournalError> {
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
                };
                writer.prepare_spare();
                Ok(writer)
            }
            _ => {
                let journal_id = report.journal_id.or(journal_id).unwrap_or_else(new_journal_id);
                let header = SegmentHeader { journal_id, first_seq, prev_crc };
                let (path, file) = prepare_spare(dir, options.segment_bytes, false)
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
    pub fn next_seq(&self) -> u64 {
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
        self.last_crc = batch.seal_in_group(self.next_seq, self.last_crc, self.synced_below);
        let written = self
            .fault(FAULT_WRITE)
            .and_then(|()| self.file.write_all_at(batch.bytes(), self.write_offset));
        self.record(written)?;
        self.write_offset += batch_bytes;
        self.next_seq += batch.len() as u64;
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
        self.synced_below = self.next_seq;
        Ok(())
    }

    /// Syncs the current segment and starts the next one.
    fn roll(&mut self) -> Result<(), JournalError> {
        self.sync()?;
        let header = SegmentHeader {
            journal_id: self.journal_id,
            first_seq: self.next_seq,
            prev_crc: self.last_crc,
        };
        // The spare is normally ready long before the segment fills; if it is not, or
        // preparing it failed, the segment is made now (with fallocate, which is quick).
        let spare = match self.spare.take() {
            Some(thread) if thread.is_finished() => thread.join().ok().and_then(Result::ok),
            // Still being written: this roll does not wait for it; the next one may use it.
            unfinished => {
                self.spare = unfinished;
                None
            }
        };
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
        if self.spare.is_none() {
            self.prepare_spare();
        }
        Ok(())
    }

    /// Starts filling the next segment's file with zeros, off the writing thread.
    fn prepare_spare(&mut self) {
        let dir = self.dir.clone();
        let bytes = self.options.segment_bytes;
        let thread = std::thread::Builder::new()
            .name("bourse-journal-spare".to_string())
            .spawn(move || prepare_spare(&dir, bytes, true));
        // Without a thread the next roll makes its segment itself.
        self.spare = thread.ok();
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
    /// Waits for the spare being prepared, so no thread writes in the directory after
    /// the writer is gone.
    fn drop(&mut self) {
        if let Some(thread) = self.spare.take() {
            let _ = thread.join();
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
