//! Reading a journal back: every segment in order, every record checked (checksum,
//! sequence, chain), and the decision of what the end of the journal means. The table
//! of cases is in `docs/journal.md`; each row has a test in `tests/recovery.rs`.
//!
//! The rule that tells a torn tail from damage: the writer puts a batch on disk only
//! after the batch before it is synced, and starts a new segment only after the old one
//! is synced. So after a crash only the last batch of the last segment can be partly on
//! disk. Bad bytes whose later records (if any) all belong to that batch are a torn
//! tail, which recovery removes; bad bytes followed by a record of a later batch, or in
//! a segment that has a successor, are damage to data that was once durable, and the
//! journal is refused until `bourse journal repair` is run.

use std::fs::{self, File, OpenOptions};
use std::io::Read;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

use bourse_core::{Seq, TimestampNs};

use crate::error::JournalError;
use crate::record::{read_slot, RecordHeader, Slot, ALIGN};
use crate::segment::{list_segments, sync_dir, SegmentHeader, SEGMENT_HEADER_LEN};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TailPolicy {
    /// Zero a torn tail (or delete a segment whose creation was torn) and go on.
    Repair,
    /// Report a torn tail without touching anything (verify, inspect, export).
    ReadOnly,
}

/// A torn tail: bytes of the last, unsynced batch after the last complete record.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TornTail {
    pub path: PathBuf,
    pub offset: u64,
    pub bytes: u64,
    pub reason: String,
    /// The whole segment was a torn creation (no valid header, no record).
    pub whole_segment: bool,
    /// Whether it was removed (zeroed, or the segment deleted).
    pub removed: bool,
}

/// One segment as found.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SegmentSummary {
    pub path: PathBuf,
    pub first_seq: Seq,
    pub records: u64,
    /// Where the next record goes: the end of the last valid record.
    pub end_offset: u64,
}

/// What a scan found: where the journal ends and how to go on writing it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ScanReport {
    pub journal_id: Option<u64>,
    /// The first record the journal holds (earlier ones were deleted under a snapshot).
    pub first_seq: Option<Seq>,
    /// The sequence number the next record gets.
    pub next_seq: Seq,
    /// The crc of the last record (the chain value the next record carries).
    pub last_crc: u32,
    /// The timestamp of the last record.
    pub last_ts: TimestampNs,
    pub records: u64,
    pub segments: Vec<SegmentSummary>,
    pub torn_tail: Option<TornTail>,
}

/// Reads every segment of `dir` in order and hands each valid record to `visit`,
/// stopping at the first error `visit` returns. A torn tail is handled per `policy`;
/// anything else wrong is an error naming the file and offset.
pub fn scan_journal(
    dir: &Path,
    policy: TailPolicy,
    mut visit: impl FnMut(&RecordHeader, &[u8]) -> Result<(), JournalError>,
) -> Result<ScanReport, JournalError> {
    scan_journal_placed(dir, policy, |header, payload, _| visit(header, payload))
}

/// Where a record lies: its segment file and byte offset.
#[derive(Clone, Copy, Debug)]
pub struct RecordPlace<'a> {
    pub path: &'a Path,
    pub offset: u64,
}

/// `scan_journal`, telling `visit` where each record lies.
pub fn scan_journal_placed(
    dir: &Path,
    policy: TailPolicy,
    mut visit: impl FnMut(&RecordHeader, &[u8], RecordPlace<'_>) -> Result<(), JournalError>,
) -> Result<ScanReport, JournalError> {
    let segments = list_segments(dir).map_err(|error| JournalError::io(dir, error))?;
    let mut scan =
        Scan { report: ScanReport { next_seq: Seq(1), ..ScanReport::default() }, last: None };
    let mut bytes = Vec::new();
    for (index, (name_seq, path)) in segments.iter().enumerate() {
        read_whole(path, &mut bytes)?;
        let place = SegmentPlace { dir, path, name_seq: *name_seq, index, count: segments.len() };
        if !scan.segment(place, &bytes, policy, &mut visit)? {
            break;
        }
    }
    Ok(scan.report)
}

/// The segments of a journal mapped into memory (read-only), so that a scan can hand
/// out records that stay valid as long as the mapping: a reader thread can decode them
/// and another apply them without copying.
pub struct MappedSegments {
    dir: PathBuf,
    segments: Vec<(Seq, PathBuf, memmap2::Mmap)>,
}

impl MappedSegments {
    /// Maps every segment of `dir`. Nothing may write to them while they are mapped
    /// (recovery maps before anything is appended, and repairs only after).
    pub fn map(dir: &Path) -> Result<MappedSegments, JournalError> {
        let mut segments = Vec::new();
        for (name_seq, path) in list_segments(dir).map_err(|error| JournalError::io(dir, error))? {
            let file = File::open(&path).map_err(|error| JournalError::io(&path, error))?;
            // SAFETY: the mapping is read-only and the files are not written while it
            // lives (see above); a file changed underneath by another process could
            // only make the scan see damage, which every record's checksum catches.
            let map = unsafe { memmap2::Mmap::map(&file) }
                .map_err(|error| JournalError::io(&path, error))?;
            segments.push((name_seq, path, map));
        }
        Ok(MappedSegments { dir: dir.to_path_buf(), segments })
    }

    /// `scan_journal_placed` (read-only) over the mapped segments; payloads borrow the
    /// mapping.
    pub fn scan<'m>(
        &'m self,
        mut visit: impl FnMut(&RecordHeader, &'m [u8], RecordPlace<'_>) -> Result<(), JournalError>,
    ) -> Result<ScanReport, JournalError> {
        let mut scan =
            Scan { report: ScanReport { next_seq: Seq(1), ..ScanReport::default() }, last: None };
        let count = self.segments.len();
        for (index, (name_seq, path, map)) in self.segments.iter().enumerate() {
            let place = SegmentPlace { dir: &self.dir, path, name_seq: *name_seq, index, count };
            if !scan.segment(place, map, TailPolicy::ReadOnly, &mut visit)? {
                break;
            }
        }
        Ok(scan.report)
    }
}

/// Which segment of how many a scan is at.
#[derive(Clone, Copy)]
struct SegmentPlace<'a> {
    dir: &'a Path,
    path: &'a Path,
    name_seq: Seq,
    index: usize,
    count: usize,
}

struct Scan {
    report: ScanReport,
    /// The last valid record's header.
    last: Option<RecordHeader>,
}

impl Scan {
    /// Checks one segment's header and reads its records. False when the scan ends here
    /// (a last segment whose creation was cut).
    fn segment<'b>(
        &mut self,
        place: SegmentPlace<'_>,
        bytes: &'b [u8],
        policy: TailPolicy,
        visit: &mut impl FnMut(&RecordHeader, &'b [u8], RecordPlace<'_>) -> Result<(), JournalError>,
    ) -> Result<bool, JournalError> {
        let is_last = place.index + 1 == place.count;
        let path = place.path;
        let header = match SegmentHeader::parse(bytes) {
            Ok(header) => header,
            Err(reason) if is_last && bytes.get(SEGMENT_HEADER_LEN..).is_none_or(all_zero) => {
                self.torn_creation(place.dir, path, reason, bytes, policy)?;
                return Ok(false);
            }
            Err(reason) => return Err(damaged(path, 0, reason)),
        };
        self.check_segment_header(path, place.name_seq, header, place.index == 0)?;
        let summary = self.read_records(path, bytes, is_last, policy, visit)?;
        self.report.segments.push(summary);
        Ok(true)
    }

    fn check_segment_header(
        &mut self,
        path: &Path,
        name_seq: Seq,
        header: SegmentHeader,
        is_first: bool,
    ) -> Result<(), JournalError> {
        let expected_id = *self.report.journal_id.get_or_insert(header.journal_id);
        if header.journal_id != expected_id {
            return Err(JournalError::ForeignSegment {
                path: path.to_path_buf(),
                expected: expected_id,
                found: header.journal_id,
            });
        }
        if header.first_seq != name_seq || header.first_seq == Seq::ZERO {
            return Err(JournalError::MisplacedSegment {
                path: path.to_path_buf(),
                reason: format!("its header says it starts at record {}", header.first_seq),
            });
        }
        if is_first {
            self.report.first_seq = Some(header.first_seq);
            self.report.next_seq = header.first_seq;
            self.report.last_crc = header.prev_crc;
            return Ok(());
        }
        if header.first_seq != self.report.next_seq {
            return Err(JournalError::SequenceGap {
                path: path.to_path_buf(),
                offset: 0,
                expected: self.report.next_seq,
                found: header.first_seq,
            });
        }
        if header.prev_crc != self.report.last_crc {
            return Err(JournalError::ChainBreak {
                path: path.to_path_buf(),
                offset: 0,
                seq: header.first_seq,
            });
        }
        Ok(())
    }

    fn read_records<'b>(
        &mut self,
        path: &Path,
        bytes: &'b [u8],
        is_last: bool,
        policy: TailPolicy,
        visit: &mut impl FnMut(&RecordHeader, &'b [u8], RecordPlace<'_>) -> Result<(), JournalError>,
    ) -> Result<SegmentSummary, JournalError> {
        let first_seq = self.report.next_seq;
        let mut offset = SEGMENT_HEADER_LEN;
        let reason = loop {
            // A file cut inside the padding of its last record ends before `offset`.
            match read_slot(bytes.get(offset..).unwrap_or_default()) {
                Slot::Record { header, payload } => {
                    self.accept(path, offset, &header)?;
                    let place = RecordPlace { path, offset: offset as u64 };
                    visit(&header, payload, place).map_err(|error| error.located(path, offset))?;
                    offset += header.framed_len();
                }
                Slot::Empty => break "a hole of zeros",
                Slot::Damaged { reason } => break reason,
            }
        };
        let summary = SegmentSummary {
            path: path.to_path_buf(),
            first_seq,
            records: self.report.next_seq - first_seq,
            end_offset: offset as u64,
        };
        let Some(data_end) = last_nonzero(bytes, offset) else {
            return Ok(summary); // clean end: only zeros follow
        };
        self.check_torn_tail(path, bytes, offset, reason, is_last)?;
        let torn = TornTail {
            path: path.to_path_buf(),
            offset: offset as u64,
            bytes: (data_end - offset) as u64,
            reason: reason.to_string(),
            whole_segment: false,
            removed: policy == TailPolicy::Repair,
        };
        if policy == TailPolicy::Repair {
            zero_range(path, offset, data_end)?;
        }
        self.report.torn_tail = Some(torn);
        Ok(summary)
    }

    /// A record that checks itself must also be the next one of the chain.
    fn accept(
        &mut self,
        path: &Path,
        offset: usize,
        header: &RecordHeader,
    ) -> Result<(), JournalError> {
        if header.seq != self.report.next_seq {
            return Err(JournalError::SequenceGap {
                path: path.to_path_buf(),
                offset: offset as u64,
                expected: self.report.next_seq,
                found: header.seq,
            });
        }
        if header.prev_crc != self.report.last_crc {
            return Err(JournalError::ChainBreak {
                path: path.to_path_buf(),
                offset: offset as u64,
                seq: header.seq,
            });
        }
        debug_assert!(
            self.report.first_seq.is_some_and(|first| header.seq >= first),
            "a record before its journal's first segment"
        );
        self.report.next_seq = self.report.next_seq.next();
        self.report.last_crc = header.crc;
        self.report.last_ts = header.ts;
        self.report.records += 1;
        self.last = Some(*header);
        Ok(())
    }

    /// Bad bytes at `offset` are a torn tail only in the last segment and only if no
    /// record of a later batch follows them.
    fn check_torn_tail(
        &self,
        path: &Path,
        bytes: &[u8],
        offset: usize,
        reason: &str,
        is_last: bool,
    ) -> Result<(), JournalError> {
        if !is_last {
            return Err(damaged(
                path,
                offset,
                &format!("{reason}, in a segment that has a successor"),
            ));
        }
        // A later record written after a sync that came after the bad record's own
        // write proves the bad record was once durable.
        let expected = self.report.next_seq;
        if let Some((later_offset, later)) = later_records(bytes, offset + ALIGN)
            .find(|(_, header)| header.batch_first_seq() > expected)
        {
            return Err(damaged(
                path,
                offset,
                &format!(
                    "{reason}, followed by record {} (at byte {later_offset}) of a later batch",
                    later.seq
                ),
            ));
        }
        Ok(())
    }

    fn torn_creation(
        &mut self,
        dir: &Path,
        path: &Path,
        reason: &str,
        bytes: &[u8],
        policy: TailPolicy,
    ) -> Result<(), JournalError> {
        if policy == TailPolicy::Repair {
            fs::remove_file(path).map_err(|error| JournalError::io(path, error))?;
            sync_dir(dir).map_err(|error| JournalError::io(dir, error))?;
        }
        self.report.torn_tail = Some(TornTail {
            path: path.to_path_buf(),
            offset: 0,
            bytes: bytes.len() as u64,
            reason: format!("{reason} (a segment whose creation did not finish)"),
            whole_segment: true,
            removed: policy == TailPolicy::Repair,
        });
        Ok(())
    }
}

/// Removes a torn tail that a read-only scan reported: zeroes its bytes, or deletes the
/// segment whose creation was cut.
pub fn remove_torn_tail(dir: &Path, torn: &TornTail) -> Result<(), JournalError> {
    if torn.whole_segment {
        fs::remove_file(&torn.path).map_err(|error| JournalError::io(&torn.path, error))?;
        return sync_dir(dir).map_err(|error| JournalError::io(dir, error));
    }
    zero_range(&torn.path, torn.offset as usize, (torn.offset + torn.bytes) as usize)
}

fn damaged(path: &Path, offset: usize, reason: &str) -> JournalError {
    JournalError::Damaged {
        path: path.to_path_buf(),
        offset: offset as u64,
        reason: reason.to_string(),
    }
}

fn read_whole(path: &Path, bytes: &mut Vec<u8>) -> Result<(), JournalError> {
    bytes.clear();
    File::open(path)
        .and_then(|mut file| file.read_to_end(bytes))
        .map_err(|error| JournalError::io(path, error))?;
    Ok(())
}

fn all_zero(bytes: &[u8]) -> bool {
    first_nonzero(bytes, 0).is_none()
}

/// The index of the first non-zero byte at or after `from`.
fn first_nonzero(bytes: &[u8], from: usize) -> Option<usize> {
    let tail = bytes.get(from..)?;
    let mut chunks = tail.chunks_exact(64);
    let mut base = from;
    for chunk in chunks.by_ref() {
        if chunk.iter().fold(0u8, |acc, &byte| acc | byte) != 0 {
            return chunk.iter().position(|&byte| byte != 0).map(|index| base + index);
        }
        base += 64;
    }
    chunks.remainder().iter().position(|&byte| byte != 0).map(|index| base + index)
}

/// One past the last non-zero byte at or after `from`, if there is any.
fn last_nonzero(bytes: &[u8], from: usize) -> Option<usize> {
    first_nonzero(bytes, from)?;
    bytes.iter().rposition(|&byte| byte != 0).map(|index| index + 1)
}

/// The records that check themselves anywhere at or after `from` (at record alignment),
/// found by skipping zeros quickly.
fn later_records(bytes: &[u8], from: usize) -> impl Iterator<Item = (usize, RecordHeader)> + '_ {
    let mut position = from.next_multiple_of(ALIGN);
    std::iter::from_fn(move || loop {
        let nonzero = first_nonzero(bytes, position)?;
        let candidate = nonzero / ALIGN * ALIGN;
        // Records start aligned, and the search goes forward.
        debug_assert!(candidate >= position && position.is_multiple_of(ALIGN));
        position = candidate + ALIGN;
        if let Slot::Record { header, .. } = read_slot(&bytes[candidate..]) {
            return Some((candidate, header));
        }
    })
}

fn zero_range(path: &Path, start: usize, end: usize) -> Result<(), JournalError> {
    debug_assert!(start <= end, "zeroing {start}..{end}");
    let file = OpenOptions::new().write(true).open(path).map_err(|e| JournalError::io(path, e))?;
    let zeros = vec![0u8; end - start];
    file.write_all_at(&zeros, start as u64)
        .and_then(|()| file.sync_data())
        .map_err(|error| JournalError::io(path, error))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nonzero_search_finds_the_first_and_the_last_byte() {
        let mut bytes = vec![0u8; 300];
        assert_eq!(first_nonzero(&bytes, 0), None);
        bytes[130] = 1;
        bytes[257] = 2;
        assert_eq!(first_nonzero(&bytes, 0), Some(130));
        assert_eq!(first_nonzero(&bytes, 131), Some(257));
        assert_eq!(first_nonzero(&bytes, 258), None);
        assert_eq!(last_nonzero(&bytes, 0), Some(258));
        assert_eq!(last_nonzero(&bytes, 258), None);
        assert_eq!(first_nonzero(&bytes, 1000), None);
    }
}
