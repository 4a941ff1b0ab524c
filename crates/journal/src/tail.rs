//! Following a live journal: reading, in order, the records up to a sequence number the
//! writer has already made durable, picking up where the last read stopped. Used by the
//! snapshotter, which keeps a second copy of the state a little behind the engine.
//!
//! Unlike `scan`, the tail reader never meets a torn tail: everything up to the bound
//! it is given was written and synced before the bound was published, so any record
//! that does not check is an error. A read may take in bytes past the bound that the
//! writer is still writing; they are never parsed in that call, and are read again from
//! the file in the next.

use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

use bourse_core::Seq;

use crate::error::JournalError;
use crate::record::{read_slot, RecordHeader, Slot, HEADER_LEN, PAYLOAD_LEN_MAX};
use crate::segment::{list_segments, segment_path, SegmentHeader, SEGMENT_HEADER_LEN};

const CHUNK_BYTES: usize = 1 << 20;

pub struct JournalTail {
    dir: PathBuf,
    /// The segment being read, and the file offset of `buffer[0]`.
    file: Option<(PathBuf, File)>,
    buffer: Vec<u8>,
    buffer_offset: u64,
    /// Where in `buffer` the next record starts.
    position: usize,
    /// The next record to hand out.
    next_seq: Seq,
    /// The sequence number and crc of the last record read (handed out or skipped).
    read_seq: Seq,
    last_crc: u32,
    /// When starting inside a segment: the record whose crc must be the one given.
    expected_crc_at: Option<(Seq, u32)>,
}

impl JournalTail {
    /// A reader whose first record will be `next_seq`, whose predecessor's crc is
    /// `last_crc` (checked when the journal still holds that record).
    pub fn new(dir: &Path, next_seq: Seq, last_crc: u32) -> JournalTail {
        assert!(next_seq > Seq::ZERO, "records are numbered from 1");
        JournalTail {
            dir: dir.to_path_buf(),
            file: None,
            buffer: Vec::new(),
            buffer_offset: 0,
            position: 0,
            next_seq,
            read_seq: next_seq.previous(),
            last_crc,
            expected_crc_at: None,
        }
    }

    pub fn next_seq(&self) -> Seq {
        self.next_seq
    }

    /// Hands every record from `next_seq` up to and including `until` to `visit`.
    pub fn read_until(
        &mut self,
        until: Seq,
        mut visit: impl FnMut(&RecordHeader, &[u8]),
    ) -> Result<(), JournalError> {
        // Bytes read before, past the last record handed out, may be a record the
        // writer was still writing then (past that call's bound): they are read again.
        self.buffer.truncate(self.position);
        while self.next_seq <= until {
            if self.file.is_none() {
                self.open_segment_holding(self.read_seq.next())?;
            }
            match self.next_record()? {
                Some((header, start, end)) => {
                    // `next_record` refuses any record but the one after the last read.
                    debug_assert_eq!(header.seq, self.read_seq.next());
                    self.read_seq = header.seq;
                    self.last_crc = header.crc;
                    if header.seq >= self.next_seq {
                        debug_assert_eq!(
                            header.seq, self.next_seq,
                            "records are handed out in order"
                        );
                        visit(&header, &self.buffer[start..end]);
                        self.next_seq = self.next_seq.next();
                    }
                }
                // The segment ends before `until`: the next record opens a segment.
                None => self.file = None,
            }
        }
        Ok(())
    }

    /// Opens the segment holding record `seq`: the one that starts there, or (the
    /// first time) the last one that starts before it, whose earlier records are read
    /// and skipped.
    fn open_segment_holding(&mut self, seq: Seq) -> Result<(), JournalError> {
        let segments =
            list_segments(&self.dir).map_err(|error| JournalError::io(&self.dir, error))?;
        let Some((first_seq, path)) = segments.into_iter().rev().find(|(first, _)| *first <= seq)
        else {
            let path = segment_path(&self.dir, seq);
            return Err(JournalError::io(&path, std::io::ErrorKind::NotFound.into()));
        };
        let file = File::open(&path).map_err(|error| JournalError::io(&path, error))?;
        let mut header = [0u8; SEGMENT_HEADER_LEN];
        file.read_exact_at(&mut header, 0).map_err(|error| JournalError::io(&path, error))?;
        let header =
            SegmentHeader::parse(&header).map_err(|reason| self.damaged(&path, 0, reason))?;
        if header.first_seq != first_seq || (first_seq == seq && header.prev_crc != self.last_crc) {
            return Err(JournalError::ChainBreak { path, offset: 0, seq: first_seq });
        }
        if first_seq < seq {
            // Skipping into the segment: the chain restarts from its header and is
            // checked against `last_crc` when record `seq - 1` goes by.
            self.read_seq = first_seq.previous();
            self.expected_crc_at = Some((seq.previous(), self.last_crc));
            self.last_crc = header.prev_crc;
        }
        self.file = Some((path, file));
        self.buffer.clear();
        self.buffer_offset = SEGMENT_HEADER_LEN as u64;
        self.position = 0;
        Ok(())
    }

    /// The next record of the current segment (header, payload range in `buffer`), or
    /// `None` at the end of its records.
    fn next_record(&mut self) -> Result<Option<(RecordHeader, usize, usize)>, JournalError> {
        loop {
            let available = &self.buffer[self.position..];
            let enough = available.len() >= HEADER_LEN && {
                let length =
                    u32::from_le_bytes([available[4], available[5], available[6], available[7]]);
                let payload_len = (length & ((1 << 30) - 1)) as usize;
                available.len() >= HEADER_LEN + payload_len.min(PAYLOAD_LEN_MAX)
            };
            if !enough {
                if !self.refill()? {
                    return Ok(None);
                }
                continue;
            }
            let offset = self.buffer_offset + self.position as u64;
            let path = self.file.as_ref().map(|(path, _)| path.clone()).unwrap_or_default();
            return match read_slot(&self.buffer[self.position..]) {
                Slot::Empty => Ok(None),
                Slot::Damaged { reason } => Err(self.damaged(&path, offset, reason)),
                Slot::Record { header, .. } => {
                    if header.seq != self.read_seq.next() {
                        return Err(JournalError::SequenceGap {
                            path,
                            offset,
                            expected: self.read_seq.next(),
                            found: header.seq,
                        });
                    }
                    let expected_crc = match self.expected_crc_at {
                        Some((seq, crc)) if seq == header.seq => Some(crc),
                        _ => None,
                    };
                    if header.prev_crc != self.last_crc
                        || expected_crc.is_some_and(|crc| crc != header.crc)
                    {
                        return Err(JournalError::ChainBreak { path, offset, seq: header.seq });
                    }
                    let start = self.position + HEADER_LEN;
                    let end = start + header.payload_len as usize;
                    self.position += header.framed_len();
                    Ok(Some((header, start, end)))
                }
            };
        }
    }

    /// Reads the next chunk of the segment, keeping the unread bytes. False at the end
    /// of the file.
    fn refill(&mut self) -> Result<bool, JournalError> {
        let Some((path, file)) = &self.file else { return Ok(false) };
        debug_assert!(self.position <= self.buffer.len(), "read past the bytes held");
        self.buffer.drain(..self.position);
        self.buffer_offset += self.position as u64;
        self.position = 0;
        let kept = self.buffer.len();
        self.buffer.resize(kept + CHUNK_BYTES, 0);
        let read = file
            .read_at(&mut self.buffer[kept..], self.buffer_offset + kept as u64)
            .map_err(|error| JournalError::io(path, error))?;
        self.buffer.truncate(kept + read);
        Ok(read > 0)
    }

    fn damaged(&self, path: &Path, offset: u64, reason: &str) -> JournalError {
        JournalError::Damaged { path: path.to_path_buf(), offset, reason: reason.to_string() }
    }
}
