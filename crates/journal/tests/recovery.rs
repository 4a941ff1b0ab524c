//! The recovery table of `docs/journal.md`, rows 1–14: one test per row, named as in the
//! table. Each test writes a real journal with `JournalWriter`, damages its files the way
//! the row describes, and checks the decision `scan_journal` takes:
//!
//! - "go on" rows: the records read back, where the journal goes on, the torn tail
//!   reported, that the damage is gone (a second scan is clean) and that a writer opened
//!   on the report appends records that read back after the kept ones;
//! - "refuse" rows: the error's code, the file and byte offset it names, and that the
//!   refused journal was not changed.

use std::collections::BTreeMap;
use std::fs::{self, OpenOptions};
use std::ops::Range;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

use bourse_core::command::TransferCommand;
use bourse_core::{Command, Decimal, Seq, TimestampNs};
use bourse_journal::record::{framed_len, read_slot, Slot, HEADER_LEN};
use bourse_journal::segment::{list_segments, segment_path, SegmentHeader, SEGMENT_HEADER_LEN};
use bourse_journal::{
    decode_command, encode_command, scan_journal, JournalError, JournalWriter, RecordBatch,
    ScanReport, TailPolicy, TornTail, WriterOptions,
};
use tempfile::TempDir;

/// Small segments, so that a few dozen records span several of them.
const SMALL_SEGMENT: u64 = 4096;
/// Timestamps: any fixed epoch, plus the command's number.
const TS_BASE: u64 = 1_750_000_000_000_000_000;

/// One record as written (and as a scan must hand it back).
#[derive(Clone, Debug, PartialEq, Eq)]
struct Written {
    seq: u64,
    ts: u64,
    payload: Vec<u8>,
}

/// Where a record sits on disk.
#[derive(Clone, Debug)]
struct OnDisk {
    path: PathBuf,
    offset: u64,
    framed_len: u64,
    crc: u32,
}

/// A journal in a temporary directory, written with the real writer.
struct Journal {
    _tmp: TempDir,
    dir: PathBuf,
    options: WriterOptions,
    writer: Option<JournalWriter>,
    /// Account names of the commands written start with this, so that two journals can
    /// hold different commands of the same sizes.
    account_prefix: &'static str,
    /// Every record written, in order.
    written: Vec<Written>,
}

impl Journal {
    /// A new journal: a writer opened on the scan of an empty directory.
    fn new(segment_bytes: u64) -> Journal {
        Journal::with_prefix(segment_bytes, "trader")
    }

    fn with_prefix(segment_bytes: u64, account_prefix: &'static str) -> Journal {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("journal");
        fs::create_dir(&dir).unwrap();
        let (empty, seen) = scan(&dir, TailPolicy::Repair).unwrap();
        assert_eq!(empty, ScanReport { next_seq: Seq(1), ..ScanReport::default() });
        assert!(seen.is_empty());
        let options = WriterOptions { segment_bytes, ..WriterOptions::default() };
        let writer = JournalWriter::open(&dir, &empty, options.clone(), Seq(1), 0).unwrap();
        Journal {
            _tmp: tmp,
            dir,
            options,
            writer: Some(writer),
            account_prefix,
            written: Vec::new(),
        }
    }

    /// Writes and syncs one batch of `records` deposits; returns their sequence numbers.
    fn batch(&mut self, records: usize) -> Range<u64> {
        let writer = self.writer.as_mut().expect("the journal is closed");
        let first_seq = writer.next_seq().0;
        let mut batch = RecordBatch::default();
        for index in 0..records as u64 {
            let number = first_seq + index;
            batch
                .push(TimestampNs(TS_BASE + number), |out| {
                    encode_command(&deposit(self.account_prefix, number), out)
                })
                .unwrap();
        }
        writer.write(&mut batch).unwrap();
        writer.sync().unwrap();
        assert_eq!(batch.first_seq(), Seq(first_seq));
        for (seq, ts, payload) in batch.records() {
            self.written.push(Written { seq: seq.0, ts: ts.0, payload: payload.to_vec() });
        }
        first_seq..first_seq + records as u64
    }

    /// Writes one batch of `records` deposits without syncing it (as `async` mode does).
    fn unsynced_batch(&mut self, records: usize) {
        let writer = self.writer.as_mut().expect("the journal is closed");
        let first_seq = writer.next_seq().0;
        let mut batch = RecordBatch::default();
        for number in first_seq..first_seq + records as u64 {
            batch
                .push(TimestampNs(TS_BASE + number), |out| {
                    encode_command(&deposit(self.account_prefix, number), out)
                })
                .unwrap();
        }
        writer.write(&mut batch).unwrap();
        for (seq, ts, payload) in batch.records() {
            self.written.push(Written { seq: seq.0, ts: ts.0, payload: payload.to_vec() });
        }
    }

    fn batches(&mut self, sizes: &[usize]) {
        for &size in sizes {
            self.batch(size);
        }
    }

    /// Writes batches of `size` until the journal has `count` segments, the last of them
    /// holding at least one batch.
    fn fill_segments(&mut self, count: usize, size: usize) {
        while self.segments().len() < count {
            self.batch(size);
        }
    }

    /// Drops the writer (as a crash or a stop would), so the files can be damaged.
    fn close(&mut self) {
        self.writer = None;
    }

    /// Continues the journal after a scan that repaired it.
    fn reopen(&mut self, report: &ScanReport) {
        self.writer = Some(
            JournalWriter::open(&self.dir, report, self.options.clone(), report.next_seq, 0)
                .unwrap(),
        );
    }

    fn segments(&self) -> Vec<(u64, PathBuf)> {
        list_segments(&self.dir).unwrap().into_iter().map(|(seq, path)| (seq.0, path)).collect()
    }

    fn segment(&self, index: usize) -> PathBuf {
        self.segments()[index].1.clone()
    }

    /// Where record `seq` sits, read from the files as they are now.
    fn at(&self, seq: u64) -> OnDisk {
        for (_, path) in self.segments() {
            let bytes = fs::read(&path).unwrap();
            let mut offset = SEGMENT_HEADER_LEN;
            while let Slot::Record { header, .. } = read_slot(bytes.get(offset..).unwrap_or(&[])) {
                if header.seq == Seq(seq) {
                    return OnDisk {
                        path,
                        offset: offset as u64,
                        framed_len: header.framed_len() as u64,
                        crc: header.crc,
                    };
                }
                offset += header.framed_len();
            }
        }
        panic!("record {seq} is not on disk");
    }

    /// The records of segment `index`, by sequence number.
    fn seqs_in_segment(&self, index: usize) -> Range<u64> {
        let segments = self.segments();
        let first = segments[index].0;
        let end = segments.get(index + 1).map_or(self.written.last().unwrap().seq + 1, |s| s.0);
        first..end
    }
}

fn deposit(account_prefix: &str, number: u64) -> Command<'static> {
    Command::Deposit(TransferCommand {
        account: format!("{account_prefix}{number:05}").into(),
        asset: "USD".into(),
        amount: Decimal::from_units(2_50, 2),
    })
}

/// Scans `dir`, collecting the records handed to the visitor.
fn scan(dir: &Path, policy: TailPolicy) -> Result<(ScanReport, Vec<Written>), JournalError> {
    let mut seen = Vec::new();
    let report = scan_journal(dir, policy, |header, payload| {
        decode_command(payload).expect("every record visited holds a command");
        seen.push(Written { seq: header.seq.0, ts: header.ts.0, payload: payload.to_vec() });
        Ok(())
    })?;
    Ok((report, seen))
}

/// Every file of `dir` and its bytes.
fn files(dir: &Path) -> BTreeMap<PathBuf, Vec<u8>> {
    fs::read_dir(dir)
        .unwrap()
        .map(|entry| {
            let path = entry.unwrap().path();
            let bytes = fs::read(&path).unwrap();
            (path, bytes)
        })
        .collect()
}

fn write_at(path: &Path, offset: u64, bytes: &[u8]) {
    OpenOptions::new().write(true).open(path).unwrap().write_all_at(bytes, offset).unwrap();
}

fn read_at(path: &Path, offset: u64, len: u64) -> Vec<u8> {
    let bytes = fs::read(path).unwrap();
    bytes[offset as usize..(offset + len) as usize].to_vec()
}

fn flip_byte(path: &Path, offset: u64) {
    let byte = read_at(path, offset, 1)[0];
    write_at(path, offset, &[byte ^ 0x5a]);
}

fn zero_range(path: &Path, offset: u64, len: u64) {
    write_at(path, offset, &vec![0; len as usize]);
}

fn cut(path: &Path, len: u64) {
    OpenOptions::new().write(true).open(path).unwrap().set_len(len).unwrap();
}

/// One past the last non-zero byte of `path`.
fn data_end(path: &Path) -> u64 {
    let bytes = fs::read(path).unwrap();
    bytes.iter().rposition(|&byte| byte != 0).map_or(0, |index| index as u64 + 1)
}

/// The torn tail a row expects; the reason is checked by a word it must contain.
struct ExpectTorn<'a> {
    path: PathBuf,
    offset: u64,
    bytes: u64,
    whole_segment: bool,
    reason_contains: &'a str,
}

/// Checks a "go on" decision: a repairing scan hands back the first `kept` records
/// written and reports `torn`; afterwards the damage is gone (a second scan is clean and
/// finds the same journal) and a writer opened on the report appends records that a
/// third scan reads back after the kept ones.
fn assert_goes_on(journal: &mut Journal, kept: usize, torn: Option<ExpectTorn>) {
    let (report, seen) = scan(&journal.dir, TailPolicy::Repair).unwrap();
    assert_eq!(seen, journal.written[..kept], "the records read back");
    let next_seq = journal.written[kept - 1].seq + 1;
    assert_eq!(report.next_seq, Seq(next_seq));
    assert_eq!(report.records, kept as u64);
    assert_eq!(report.last_crc, journal.at(next_seq - 1).crc);
    assert_eq!(report.last_ts, TimestampNs(journal.written[kept - 1].ts));
    match (&report.torn_tail, &torn) {
        (None, None) => {}
        (Some(found), Some(expected)) => {
            let TornTail { path, offset, bytes, reason, whole_segment, removed } = found;
            assert_eq!(path, &expected.path);
            assert_eq!(*offset, expected.offset);
            assert_eq!(*bytes, expected.bytes);
            assert_eq!(*whole_segment, expected.whole_segment);
            assert!(removed);
            assert!(reason.contains(expected.reason_contains), "reason {reason:?}");
        }
        (found, _) => panic!("torn tail {found:?}, expected {}", torn.is_some()),
    }

    // The damage is gone: the torn bytes are zeros (or the torn segment is deleted), and
    // a second scan finds the same journal with nothing torn.
    if let Some(expected) = &torn {
        if expected.whole_segment {
            assert!(!expected.path.exists(), "the torn segment was not deleted");
        } else {
            let bytes = fs::read(&expected.path).unwrap();
            assert!(bytes[expected.offset as usize..].iter().all(|&byte| byte == 0));
        }
    }
    let (again, seen_again) = scan(&journal.dir, TailPolicy::Repair).unwrap();
    assert_eq!(again, ScanReport { torn_tail: None, ..report.clone() });
    assert_eq!(seen_again, seen);

    // The journal goes on from the last kept record.
    journal.written.truncate(kept);
    journal.reopen(&report);
    assert_eq!(journal.batch(2), next_seq..next_seq + 2);
    journal.batch(3);
    journal.close();
    let (after, seen_after) = scan(&journal.dir, TailPolicy::Repair).unwrap();
    assert_eq!(seen_after, journal.written);
    assert_eq!(after.next_seq, Seq(next_seq + 5));
    assert_eq!(after.torn_tail, None);
}

/// Checks a "refuse" decision: both a repairing and a read-only scan fail with `code`
/// at `path` and `offset`, and neither changes any file.
fn assert_refused(dir: &Path, code: &str, path: &Path, offset: u64) -> JournalError {
    let before = files(dir);
    let error = scan(dir, TailPolicy::Repair).unwrap_err();
    assert_eq!(error.code(), code, "{error}");
    assert_eq!(error.location(), Some((path, offset)), "{error}");
    assert!(files(dir) == before, "a refused journal was changed");
    let read_only = scan(dir, TailPolicy::ReadOnly).unwrap_err();
    assert_eq!(read_only.to_string(), error.to_string());
    assert!(files(dir) == before, "a refused journal was changed");
    error
}

// Row 1.
#[test]
fn clean_journal_reopens_and_continues() {
    // No damage: three segments, the last one followed by preallocated zeros.
    let mut journal = Journal::new(SMALL_SEGMENT);
    journal.fill_segments(3, 7);
    journal.close();
    let before = files(&journal.dir);
    let (report, _) = scan(&journal.dir, TailPolicy::Repair).unwrap();
    assert!(files(&journal.dir) == before, "a clean scan changed the journal");
    assert_eq!(report.first_seq, Some(Seq(1)));
    assert_eq!(report.segments.len(), 3);
    let kept = journal.written.len();
    assert_goes_on(&mut journal, kept, None);
}

// Row 2.
#[test]
fn torn_tail_is_zeroed_and_the_journal_goes_on() {
    // The last batch (6, 7, 8) got only to the middle of record 7's payload: the file is
    // cut there, record 8 never reached the disk.
    let mut journal = Journal::new(SMALL_SEGMENT);
    journal.batches(&[2, 3, 3]);
    journal.close();
    let record = journal.at(7);
    cut(&record.path, record.offset + HEADER_LEN as u64 + 4);
    let torn_bytes = data_end(&record.path) - record.offset;
    assert!(torn_bytes > HEADER_LEN as u64);
    let torn = ExpectTorn {
        path: record.path,
        offset: record.offset,
        bytes: torn_bytes,
        whole_segment: false,
        reason_contains: "past the end",
    };
    assert_goes_on(&mut journal, 6, Some(torn));
}

// Row 3.
#[test]
fn torn_write_inside_the_last_batch_is_a_torn_tail() {
    // The last batch (6, 7, 8) reached the disk except for the page holding record 7's
    // header: a hole of zeros followed by record 8 of the same, unsynced batch.
    let mut journal = Journal::new(SMALL_SEGMENT);
    journal.batches(&[2, 3, 3]);
    journal.close();
    let record = journal.at(7);
    let last = journal.at(8);
    zero_range(&record.path, record.offset, HEADER_LEN as u64);
    let torn = ExpectTorn {
        path: record.path.clone(),
        offset: record.offset,
        bytes: data_end(&record.path) - record.offset,
        whole_segment: false,
        reason_contains: "zeros",
    };
    assert!(torn.bytes > last.offset + HEADER_LEN as u64 - record.offset, "record 8 is torn too");
    assert_goes_on(&mut journal, 6, Some(torn));
}

// Row 4.
#[test]
fn bad_record_before_a_later_batch_is_refused() {
    // A byte of record 4, in the middle of the synced batch (3, 4, 5), flipped; the last
    // batch (6, 7) is intact after it.
    let mut journal = Journal::new(SMALL_SEGMENT);
    journal.batches(&[2, 3, 2]);
    journal.close();
    let record = journal.at(4);
    flip_byte(&record.path, record.offset + HEADER_LEN as u64 + 2);
    let error = assert_refused(&journal.dir, "damaged_record", &record.path, record.offset);
    assert!(error.to_string().contains("record 6"), "{error}");
}

// Row 5.
#[test]
fn bad_record_in_an_earlier_segment_is_refused() {
    // The last record of the first segment damaged while a second segment follows; no
    // record comes after it in its own segment.
    let mut journal = Journal::new(SMALL_SEGMENT);
    journal.fill_segments(2, 5);
    journal.close();
    let last_of_first = journal.seqs_in_segment(0).end - 1;
    let record = journal.at(last_of_first);
    assert_eq!(record.path, journal.segment(0));
    flip_byte(&record.path, record.offset + HEADER_LEN as u64);
    let error = assert_refused(&journal.dir, "damaged_record", &record.path, record.offset);
    assert!(error.to_string().contains("successor"), "{error}");
}

// Row 6.
#[test]
fn zeroed_hole_before_later_records_is_refused() {
    // The whole synced batch (3, 4, 5) zeroed; the batch (6, 7) after it is intact.
    let mut journal = Journal::new(SMALL_SEGMENT);
    journal.batches(&[2, 3, 2]);
    journal.close();
    let first = journal.at(3);
    let last = journal.at(5);
    zero_range(&first.path, first.offset, last.offset + last.framed_len - first.offset);
    let error = assert_refused(&journal.dir, "damaged_record", &first.path, first.offset);
    assert!(error.to_string().contains("record 6"), "{error}");
}

// Row 7.
#[test]
fn record_out_of_sequence_is_refused() {
    // Record 5 replaced by a valid record that claims to be 6 and chains to record 4, as
    // if record 5 had been skipped.
    let mut journal = Journal::new(SMALL_SEGMENT);
    journal.batches(&[3, 3, 3]);
    journal.close();
    let previous = journal.at(4);
    let record = journal.at(5);
    let mut forged = RecordBatch::default();
    let payload = journal.written[5].payload.clone();
    forged
        .push(TimestampNs(TS_BASE + 6), |out| {
            out.extend_from_slice(&payload);
            Ok::<(), ()>(())
        })
        .unwrap();
    forged.seal(Seq(6), previous.crc);
    assert_eq!(forged.byte_len() as u64, record.framed_len);
    write_at(&record.path, record.offset, forged.bytes());
    let error = assert_refused(&journal.dir, "sequence_gap", &record.path, record.offset);
    assert!(
        matches!(error, JournalError::SequenceGap { expected: Seq(5), found: Seq(6), .. }),
        "{error:?}"
    );
}

// Row 8.
#[test]
fn record_from_another_chain_is_refused() {
    // Record 5 replaced by record 5 of another journal with the same batches but other
    // commands: its checksum and sequence number are fine, its chain is not.
    let mut journal = Journal::new(SMALL_SEGMENT);
    let mut other = Journal::with_prefix(SMALL_SEGMENT, "dealer");
    for sizes in [3, 3, 3] {
        journal.batch(sizes);
        other.batch(sizes);
    }
    journal.close();
    other.close();
    let record = journal.at(5);
    let stranger = other.at(5);
    assert_eq!((stranger.offset, stranger.framed_len), (record.offset, record.framed_len));
    let bytes = read_at(&stranger.path, stranger.offset, stranger.framed_len);
    write_at(&record.path, record.offset, &bytes);
    let error = assert_refused(&journal.dir, "chain_break", &record.path, record.offset);
    assert!(matches!(error, JournalError::ChainBreak { seq: Seq(5), .. }), "{error:?}");
}

// Row 9.
#[test]
fn missing_segment_is_refused() {
    // The middle one of three segments deleted.
    let mut journal = Journal::new(SMALL_SEGMENT);
    journal.fill_segments(3, 6);
    journal.close();
    let segments = journal.segments();
    fs::remove_file(&segments[1].1).unwrap();
    let error = assert_refused(&journal.dir, "sequence_gap", &segments[2].1, 0);
    let (expected, found) = (segments[1].0, segments[2].0);
    assert!(
        matches!(error, JournalError::SequenceGap { expected: e, found: f, .. } if e == Seq(expected) && f == Seq(found)),
        "{error:?}"
    );
}

// Row 10.
#[test]
fn foreign_segment_is_refused() {
    // The second segment's header rewritten (validly) with another journal's id.
    let mut journal = Journal::new(SMALL_SEGMENT);
    journal.fill_segments(2, 6);
    journal.close();
    let path = journal.segment(1);
    let header = SegmentHeader::parse(&fs::read(&path).unwrap()).unwrap();
    let foreign_id = header.journal_id ^ 0x0123_4567_89ab_cdef;
    write_at(&path, 0, &SegmentHeader { journal_id: foreign_id, ..header }.to_bytes());
    let error = assert_refused(&journal.dir, "foreign_segment", &path, 0);
    assert!(
        matches!(error, JournalError::ForeignSegment { expected, found, .. }
            if expected == header.journal_id && found == foreign_id),
        "{error:?}"
    );
}

// Row 11.
#[test]
fn renamed_segment_is_refused() {
    // The middle one of three segments renamed as if it started one record later.
    let mut journal = Journal::new(SMALL_SEGMENT);
    journal.fill_segments(3, 6);
    journal.close();
    let (first_seq, path) = journal.segments()[1].clone();
    let renamed = segment_path(&journal.dir, Seq(first_seq + 1));
    fs::rename(&path, &renamed).unwrap();
    assert_refused(&journal.dir, "misplaced_segment", &renamed, 0);
}

// Row 12.
#[test]
fn stale_segment_is_refused() {
    // A copy of the second segment is kept; the journal is then cut back into its first
    // segment (as `bourse journal repair` does) and written again with other commands of
    // the same sizes, so a second segment of the same name is created. The old copy,
    // put back over it, has the right name and journal id but another history.
    let mut journal = Journal::new(SMALL_SEGMENT);
    journal.fill_segments(2, 6);
    journal.close();
    let (second_seq, second_path) = journal.segments()[1].clone();
    let stale = fs::read(&second_path).unwrap();

    let cut_seq = second_seq - 6; // the first record of the first segment's last batch
    let cut_at = journal.at(cut_seq);
    zero_range(&cut_at.path, cut_at.offset, SMALL_SEGMENT - cut_at.offset);
    fs::remove_file(&second_path).unwrap();
    journal.written.truncate(cut_seq as usize - 1);
    let (report, _) = scan(&journal.dir, TailPolicy::Repair).unwrap();
    assert_eq!((report.next_seq, report.torn_tail.clone()), (Seq(cut_seq), None));
    journal.account_prefix = "dealer";
    journal.reopen(&report);
    journal.fill_segments(2, 6);
    journal.close();
    assert_eq!(journal.segments()[1].0, second_seq);
    assert_ne!(fs::read(&second_path).unwrap(), stale);

    fs::write(&second_path, &stale).unwrap();
    let error = assert_refused(&journal.dir, "chain_break", &second_path, 0);
    assert!(
        matches!(error, JournalError::ChainBreak { seq, .. } if seq == Seq(second_seq)),
        "{error:?}"
    );
}

// Row 13.
#[test]
fn torn_segment_creation_is_removed() {
    // The creation of a third segment was cut after the file was preallocated and
    // before its header was written: a segment of zeros named like the next one.
    let mut journal = Journal::new(SMALL_SEGMENT);
    journal.fill_segments(2, 6);
    journal.close();
    let next_seq = journal.written.last().unwrap().seq + 1;
    let torn_path = segment_path(&journal.dir, Seq(next_seq));
    fs::write(&torn_path, vec![0u8; SMALL_SEGMENT as usize]).unwrap();
    let torn = ExpectTorn {
        path: torn_path,
        offset: 0,
        bytes: SMALL_SEGMENT,
        whole_segment: true,
        reason_contains: "creation",
    };
    let kept = journal.written.len();
    assert_goes_on(&mut journal, kept, Some(torn));
    // The writer can create the segment of that name again when it rolls.
    journal.reopen(&scan(&journal.dir, TailPolicy::Repair).unwrap().0);
    journal.fill_segments(3, 6);
    journal.close();
    let (report, seen) = scan(&journal.dir, TailPolicy::Repair).unwrap();
    assert_eq!(seen, journal.written);
    assert_eq!(report.torn_tail, None);
}

#[test]
fn torn_segment_creation_with_a_partial_header_is_removed() {
    // The creation of the next segment was cut inside its header: a file holding the
    // first 40 bytes of a valid header and nothing else.
    let mut journal = Journal::new(SMALL_SEGMENT);
    journal.fill_segments(2, 6);
    journal.close();
    let next_seq = journal.written.last().unwrap().seq + 1;
    let header = SegmentHeader::parse(&fs::read(journal.segment(1)).unwrap()).unwrap();
    let torn_path = segment_path(&journal.dir, Seq(next_seq));
    let full = SegmentHeader {
        first_seq: Seq(next_seq),
        prev_crc: journal.at(next_seq - 1).crc,
        ..header
    };
    fs::write(&torn_path, &full.to_bytes()[..40]).unwrap();
    let torn = ExpectTorn {
        path: torn_path,
        offset: 0,
        bytes: 40,
        whole_segment: true,
        reason_contains: "shorter",
    };
    let kept = journal.written.len();
    assert_goes_on(&mut journal, kept, Some(torn));
}

// Row 14.
#[test]
fn damaged_segment_header_is_refused() {
    // A byte of the first segment's header (its journal id) flipped; a second segment
    // follows it.
    let mut journal = Journal::new(SMALL_SEGMENT);
    journal.fill_segments(2, 6);
    journal.close();
    let path = journal.segment(0);
    flip_byte(&path, 20);
    assert_refused(&journal.dir, "damaged_record", &path, 0);
}

#[test]
fn damaged_header_of_a_last_segment_holding_records_is_refused() {
    // The last segment's header (its magic) overwritten; records follow it, so this is
    // not a torn creation.
    let mut journal = Journal::new(SMALL_SEGMENT);
    journal.fill_segments(2, 6);
    journal.close();
    let path = journal.segment(1);
    write_at(&path, 0, b"garbage!");
    assert_refused(&journal.dir, "damaged_record", &path, 0);
}

#[test]
fn read_only_scan_reports_a_torn_tail_without_changing_the_file() {
    // The last batch (3, 4) cut inside record 4; a read-only scan reports it and leaves
    // it, a repairing scan then removes it.
    let mut journal = Journal::new(SMALL_SEGMENT);
    journal.batches(&[2, 2]);
    journal.close();
    let record = journal.at(4);
    cut(&record.path, record.offset + 20);
    let before = files(&journal.dir);
    let (report, seen) = scan(&journal.dir, TailPolicy::ReadOnly).unwrap();
    assert!(files(&journal.dir) == before, "a read-only scan changed the journal");
    assert_eq!(seen, journal.written[..3]);
    assert_eq!(report.next_seq, Seq(4));
    let torn = report.torn_tail.expect("the torn tail is reported");
    assert_eq!((torn.path.as_path(), torn.offset), (record.path.as_path(), record.offset));
    assert_eq!(torn.bytes, data_end(&record.path) - record.offset);
    assert!(!torn.removed && !torn.whole_segment);

    let (repaired, _) = scan(&journal.dir, TailPolicy::Repair).unwrap();
    assert_eq!(repaired.torn_tail, Some(TornTail { removed: true, ..torn }));
    assert_eq!(scan(&journal.dir, TailPolicy::ReadOnly).unwrap().0.torn_tail, None);
}

#[test]
fn read_only_scan_leaves_a_torn_segment_creation_in_place() {
    let mut journal = Journal::new(SMALL_SEGMENT);
    journal.batches(&[2, 2]);
    journal.close();
    let torn_path = segment_path(&journal.dir, Seq(5));
    fs::write(&torn_path, vec![0u8; 100]).unwrap();
    let before = files(&journal.dir);
    let (report, seen) = scan(&journal.dir, TailPolicy::ReadOnly).unwrap();
    assert!(files(&journal.dir) == before, "a read-only scan changed the journal");
    assert_eq!(seen, journal.written);
    let torn = report.torn_tail.expect("the torn creation is reported");
    assert_eq!((torn.path, torn.whole_segment, torn.removed), (torn_path, true, false));
}

#[test]
fn batch_too_large_for_the_space_left_rolls_to_a_new_segment() {
    // Batches of 10 records fill the first segment until the next one does not fit in
    // what is left; that batch starts the second segment, whole.
    let mut journal = Journal::new(SMALL_SEGMENT);
    journal.batch(10);
    let batch_bytes = journal.at(10).offset + journal.at(10).framed_len - SEGMENT_HEADER_LEN as u64;
    let fitting = (SMALL_SEGMENT - SEGMENT_HEADER_LEN as u64) / batch_bytes;
    assert!(
        fitting >= 2 && !(SMALL_SEGMENT - SEGMENT_HEADER_LEN as u64).is_multiple_of(batch_bytes)
    );
    for _ in 1..fitting {
        journal.batch(10);
    }
    assert_eq!(journal.segments().len(), 1);
    let rolled = journal.batch(10);
    journal.batch(10);
    journal.close();

    let segments = journal.segments();
    assert_eq!(segments.iter().map(|(seq, _)| *seq).collect::<Vec<_>>(), [1, rolled.start]);
    assert_eq!(journal.at(rolled.start).path, segments[1].1);
    assert_eq!(journal.at(rolled.start).offset, SEGMENT_HEADER_LEN as u64);
    let (report, seen) = scan(&journal.dir, TailPolicy::Repair).unwrap();
    assert_eq!(seen, journal.written);
    assert_eq!(report.segments.len(), 2);
    assert_eq!(report.segments[0].records, fitting * 10);
    assert_eq!(report.segments[0].end_offset, SEGMENT_HEADER_LEN as u64 + fitting * batch_bytes);
    assert_eq!(report.segments[1].first_seq, Seq(rolled.start));
    assert_eq!(report.segments[1].records, 20);
    assert_eq!(report.torn_tail, None);
}

#[test]
fn batch_larger_than_a_segment_gets_a_segment_of_its_own() {
    // A batch of more bytes than a whole segment goes, whole, into a segment of its own
    // (which grows past the preallocated size); the batch after it starts another.
    let mut journal = Journal::new(SMALL_SEGMENT);
    journal.batch(3);
    let big = journal.batch(100);
    let after = journal.batch(3);
    journal.close();
    let framed = framed_len(journal.written[0].payload.len()) as u64;
    assert!(100 * framed > SMALL_SEGMENT);
    let segments = journal.segments();
    assert_eq!(
        segments.iter().map(|(seq, _)| *seq).collect::<Vec<_>>(),
        [1, big.start, after.start]
    );
    let (report, seen) = scan(&journal.dir, TailPolicy::Repair).unwrap();
    assert_eq!(seen, journal.written);
    assert_eq!(report.segments[1].records, 100);
    assert_eq!(report.segments[1].end_offset, SEGMENT_HEADER_LEN as u64 + 100 * framed);
    assert_eq!(report.next_seq, Seq(after.end));
}

#[test]
fn record_cut_inside_its_padding_is_kept() {
    // The file ends inside the zero padding of the last record: the record itself
    // (header and payload) is whole and checks, so it is kept.
    let mut journal = Journal::new(SMALL_SEGMENT);
    journal.batches(&[2, 2]);
    journal.close();
    let record = journal.at(4);
    let payload_end = record.offset + (HEADER_LEN + journal.written[3].payload.len()) as u64;
    assert!(payload_end < record.offset + record.framed_len, "the record has padding");
    cut(&record.path, payload_end);
    assert_goes_on(&mut journal, 4, None);
}

#[test]
fn writer_refuses_a_torn_tail_that_was_not_removed() {
    // Record 7's header zeroed inside the last batch (6, 7, 8): a read-only scan leaves
    // record 8 on disk, and records appended at 7 would be followed by it.
    let mut journal = Journal::new(SMALL_SEGMENT);
    journal.batches(&[2, 3, 3]);
    journal.close();
    let record = journal.at(7);
    zero_range(&record.path, record.offset, HEADER_LEN as u64);
    let (report, _) = scan(&journal.dir, TailPolicy::ReadOnly).unwrap();
    assert!(report.torn_tail.as_ref().is_some_and(|torn| !torn.removed));
    let before = files(&journal.dir);
    let error = JournalWriter::open(&journal.dir, &report, journal.options.clone(), Seq(7), 0)
        .err()
        .expect("a writer on an unrepaired torn tail");
    assert_eq!(error.location(), Some((record.path.as_path(), record.offset)));
    assert!(files(&journal.dir) == before);
}

// Row 3, in `async` mode: several batches are written between two syncs, and any of
// them may be torn.
#[test]
fn torn_write_among_unsynced_batches_is_a_torn_tail() {
    // Synced: 1-2. Written without a sync since: batches 3-4, 5-6, 7-8. Record 4 is
    // lost, the later unsynced batches reached the disk.
    let mut journal = Journal::new(SMALL_SEGMENT);
    journal.batches(&[2]);
    journal.unsynced_batch(2);
    journal.unsynced_batch(2);
    journal.unsynced_batch(2);
    journal.close();
    let record = journal.at(4);
    zero_range(&record.path, record.offset, HEADER_LEN as u64);
    let torn = ExpectTorn {
        path: record.path.clone(),
        offset: record.offset,
        bytes: data_end(&record.path) - record.offset,
        whole_segment: false,
        reason_contains: "zeros",
    };
    assert_goes_on(&mut journal, 3, Some(torn));
}

// Row 4, in `async` mode: a record of a batch written after a sync proves the damaged
// record before that sync was durable.
#[test]
fn bad_record_before_a_sync_is_refused_in_async_mode() {
    let mut journal = Journal::new(SMALL_SEGMENT);
    journal.batches(&[2]);
    journal.unsynced_batch(2);
    journal.batches(&[2]); // writes 5-6 and syncs 3-6
    journal.unsynced_batch(2);
    journal.close();
    let record = journal.at(4);
    flip_byte(&record.path, record.offset + HEADER_LEN as u64);
    let error = assert_refused(&journal.dir, "damaged_record", &record.path, record.offset);
    assert!(error.to_string().contains("record 7"), "{error}");
}
