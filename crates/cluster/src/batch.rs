//! What a replicated entry carries: a batch of items numbered in the log's order, and
//! the time the leader gave it. The items themselves are the application's (the
//! engine's commands in the journal's binary form); the numbering is the log's, so
//! every node numbers every item the same way, whoever led when it was proposed.
//!
//! Entry data: `[first_seq u64][ts u64][count u32]` then `count` items, each
//! `[len u32][bytes]`. The compaction snapshot's data starts with where the numbering
//! and the clock stood there: `[next_seq u64][last_ts u64]`, then the application's
//! state.

use crate::codec::{put_bytes, put_u32, put_u64, DecodeError, Reader};

/// An entry's batch header.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BatchHeader {
    /// The number of the batch's first item; the rest follow one by one.
    pub first_seq: u64,
    /// The leader's time for the batch (never before an earlier batch's).
    pub ts: u64,
    pub count: u32,
}

impl BatchHeader {
    /// The number after the batch's last item.
    pub fn next_seq(&self) -> u64 {
        self.first_seq + u64::from(self.count)
    }
}

pub const BATCH_HEADER_BYTES: usize = 8 + 8 + 4;

/// Where the numbering and the clock stand after some prefix of the log.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LogClock {
    pub next_seq: u64,
    pub last_ts: u64,
}

impl LogClock {
    /// The first numbering: item 1 comes first.
    pub const START: LogClock = LogClock { next_seq: 1, last_ts: 0 };

    pub fn after(header: &BatchHeader) -> LogClock {
        LogClock { next_seq: header.next_seq(), last_ts: header.ts }
    }
}

/// Collects items into an entry's data, the header's place kept until `finish`.
pub struct BatchWriter {
    data: Vec<u8>,
    count: u32,
}

impl Default for BatchWriter {
    fn default() -> BatchWriter {
        BatchWriter::new()
    }
}

impl BatchWriter {
    pub fn new() -> BatchWriter {
        BatchWriter { data: vec![0u8; BATCH_HEADER_BYTES], count: 0 }
    }

    pub fn push(&mut self, item: &[u8]) {
        put_bytes(&mut self.data, item);
        self.count += 1;
    }

    pub fn count(&self) -> u32 {
        self.count
    }

    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    /// The entry's data, numbered from `clock.next_seq` at `max(now, clock.last_ts)`;
    /// returns it with the clock after it.
    pub fn finish(mut self, clock: LogClock, now: u64) -> (Vec<u8>, LogClock) {
        let header = BatchHeader {
            first_seq: clock.next_seq,
            ts: now.max(clock.last_ts),
            count: self.count,
        };
        let mut head = Vec::with_capacity(BATCH_HEADER_BYTES);
        put_u64(&mut head, header.first_seq);
        put_u64(&mut head, header.ts);
        put_u32(&mut head, header.count);
        self.data[..BATCH_HEADER_BYTES].copy_from_slice(&head);
        (self.data, LogClock::after(&header))
    }
}

/// A batch read from an entry's data.
pub struct Batch<'a> {
    pub header: BatchHeader,
    items: Reader<'a>,
    left: u32,
}

impl<'a> Batch<'a> {
    /// The entry's data as a batch, checked whole (every item's length) before any is
    /// handed out.
    pub fn decode(data: &'a [u8]) -> Result<Batch<'a>, DecodeError> {
        let mut reader = Reader::new(data);
        let header =
            BatchHeader { first_seq: reader.u64()?, ts: reader.u64()?, count: reader.u32()? };
        let items = Reader::new(reader.rest());
        let mut check = Reader::new(items.remaining());
        for _ in 0..header.count {
            check.bytes()?;
        }
        if !check.is_empty() {
            return Err(DecodeError::Invalid("bytes after the batch's items"));
        }
        Ok(Batch { header, items, left: header.count })
    }
}

impl<'a> Iterator for Batch<'a> {
    type Item = &'a [u8];

    fn next(&mut self) -> Option<&'a [u8]> {
        if self.left == 0 {
            return None;
        }
        self.left -= 1;
        // Checked whole by `decode`.
        self.items.bytes().ok()
    }
}

/// The compaction snapshot's data: the clock there, then the application's state.
pub fn encode_snapshot_data(clock: LogClock, state: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(16 + state.len());
    put_u64(&mut out, clock.next_seq);
    put_u64(&mut out, clock.last_ts);
    out.extend_from_slice(state);
    out
}

pub fn decode_snapshot_data(data: &[u8]) -> Result<(LogClock, &[u8]), DecodeError> {
    let mut reader = Reader::new(data);
    let clock = LogClock { next_seq: reader.u64()?, last_ts: reader.u64()? };
    Ok((clock, reader.rest()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_batch_is_numbered_by_the_clock_and_reads_back_item_by_item() {
        let mut writer = BatchWriter::new();
        writer.push(b"first");
        writer.push(b"");
        writer.push(b"third item");
        let (data, after) = writer.finish(LogClock { next_seq: 41, last_ts: 900 }, 500);
        // The clock never goes back: the leader's time was behind the log's.
        assert_eq!(after, LogClock { next_seq: 44, last_ts: 900 });
        let batch = Batch::decode(&data).unwrap();
        assert_eq!(batch.header, BatchHeader { first_seq: 41, ts: 900, count: 3 });
        let items: Vec<&[u8]> = batch.collect();
        assert_eq!(items, vec![&b"first"[..], b"", b"third item"]);
        for cut in 0..data.len() {
            assert!(Batch::decode(&data[..cut]).is_err(), "cut at {cut}");
        }
        let data = encode_snapshot_data(after, b"state");
        let (clock, state) = decode_snapshot_data(&data).unwrap();
        assert_eq!((clock, state), (after, &b"state"[..]));
    }
}
