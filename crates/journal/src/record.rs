//! Record framing: how one sequenced command sits in a segment.
//!
//! ```text
//! offset size  field
//!  0     4     crc32c of bytes 4 .. 32 + payload_len (header rest and payload)
//!  4     4     payload_len (bits 0..=29) | LAST_IN_BATCH (bit 31)
//!  8     8     seq          the command's sequence number
//! 16     8     ts           nanoseconds since the Unix epoch, stamped by the sequencer
//! 24     4     prev_crc     the previous record's crc (the chain)
//! 28     4     batch_index  how many records written since the last sync come before
//!                            this one (its position in its batch, in `sync` mode)
//! 32     n     payload      one command (`codec`), then zeros up to a multiple of 8
//! ```
//!
//! Every record checks itself (its crc) and its place (seq one more than its
//! predecessor's, `prev_crc` equal to its predecessor's crc). The batch fields let
//! recovery tell the torn tail of the last, unsynced batch from damage to data that was
//! once durable: only one batch is ever written without being synced yet.

use bourse_core::{Seq, TimestampNs};

/// Bytes before the payload.
pub const HEADER_LEN: usize = 32;
/// Records start at multiples of this.
pub const ALIGN: usize = 8;
/// Largest payload a record may carry.
pub const PAYLOAD_LEN_MAX: usize = 1 << 20;
const LAST_IN_BATCH: u32 = 1 << 31;
const LEN_MASK: u32 = (1 << 30) - 1;

// Every payload length fits the length bits, which the batch flag does not share; and a
// header keeps the records after it aligned.
const _: () = assert!(PAYLOAD_LEN_MAX as u64 <= LEN_MASK as u64);
const _: () = assert!(LAST_IN_BATCH & LEN_MASK == 0);
const _: () = assert!(HEADER_LEN.is_multiple_of(ALIGN) && ALIGN.is_power_of_two());

/// A record's header fields.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RecordHeader {
    pub crc: u32,
    pub payload_len: u32,
    pub last_in_batch: bool,
    pub seq: Seq,
    pub ts: TimestampNs,
    pub prev_crc: u32,
    pub batch_index: u32,
}

impl RecordHeader {
    /// The sequence number of the first record of this record's batch.
    pub fn batch_first_seq(&self) -> Seq {
        Seq(self.seq.0.saturating_sub(u64::from(self.batch_index)))
    }

    /// Bytes the record takes in its segment, padding included.
    pub fn framed_len(&self) -> usize {
        framed_len(self.payload_len as usize)
    }
}

/// Bytes a record with a payload of `payload_len` takes, padding included.
pub fn framed_len(payload_len: usize) -> usize {
    (HEADER_LEN + payload_len).div_ceil(ALIGN) * ALIGN
}

fn u32_at(bytes: &[u8], offset: usize) -> u32 {
    let mut word = [0; 4];
    word.copy_from_slice(&bytes[offset..offset + 4]);
    u32::from_le_bytes(word)
}

fn u64_at(bytes: &[u8], offset: usize) -> u64 {
    let mut word = [0; 8];
    word.copy_from_slice(&bytes[offset..offset + 8]);
    u64::from_le_bytes(word)
}

/// What lies at an offset of a segment.
#[derive(Debug, PartialEq, Eq)]
pub enum Slot<'a> {
    /// A header of zeros: nothing was ever written here (segments are preallocated
    /// with zeros).
    Empty,
    /// A record whose crc matches its contents.
    Record { header: RecordHeader, payload: &'a [u8] },
    /// Bytes that are not a record: a torn write or damage.
    Damaged { reason: &'static str },
}

/// Reads the record at the start of `bytes` (a segment from some offset on).
pub fn read_slot(bytes: &[u8]) -> Slot<'_> {
    if bytes.len() < HEADER_LEN {
        return if bytes.iter().all(|&byte| byte == 0) {
            Slot::Empty
        } else {
            Slot::Damaged { reason: "a partial record header" }
        };
    }
    let header_bytes = &bytes[..HEADER_LEN];
    if header_bytes.iter().all(|&byte| byte == 0) {
        return Slot::Empty;
    }
    let length_word = u32_at(bytes, 4);
    let payload_len = length_word & LEN_MASK;
    if payload_len == 0
        || payload_len as usize > PAYLOAD_LEN_MAX
        || length_word & !(LEN_MASK | LAST_IN_BATCH) != 0
    {
        return Slot::Damaged { reason: "an impossible record length" };
    }
    let end = HEADER_LEN + payload_len as usize;
    if end > bytes.len() {
        return Slot::Damaged { reason: "a record running past the end of its segment" };
    }
    let crc = u32_at(bytes, 0);
    if crc32c::crc32c(&bytes[4..end]) != crc {
        return Slot::Damaged { reason: "a record whose checksum does not match" };
    }
    let header = RecordHeader {
        crc,
        payload_len,
        last_in_batch: length_word & LAST_IN_BATCH != 0,
        seq: Seq(u64_at(bytes, 8)),
        ts: TimestampNs(u64_at(bytes, 16)),
        prev_crc: u32_at(bytes, 24),
        batch_index: u32_at(bytes, 28),
    };
    Slot::Record { header, payload: &bytes[HEADER_LEN..end] }
}

/// A batch of records being framed in memory, before and after it is sealed (given its
/// sequence numbers and chain) and written. The engine applies commands straight from
/// these bytes, so a batch is built once and never copied.
#[derive(Default)]
pub struct RecordBatch {
    bytes: Vec<u8>,
    /// Offset of each record in `bytes`.
    offsets: Vec<u32>,
    first_seq: Seq,
    sealed: bool,
}

impl RecordBatch {
    pub fn with_capacity(records: usize, bytes: usize) -> RecordBatch {
        RecordBatch {
            bytes: Vec::with_capacity(bytes),
            offsets: Vec::with_capacity(records),
            first_seq: Seq::ZERO,
            sealed: false,
        }
    }

    pub fn clear(&mut self) {
        self.bytes.clear();
        self.offsets.clear();
        self.first_seq = Seq::ZERO;
        self.sealed = false;
    }

    pub fn len(&self) -> usize {
        self.offsets.len()
    }

    pub fn is_empty(&self) -> bool {
        self.offsets.is_empty()
    }

    pub fn byte_len(&self) -> usize {
        self.bytes.len()
    }

    /// The framed records, as they go to disk.
    pub fn bytes(&self) -> &[u8] {
        &self.bytes
    }

    /// Appends a record stamped `ts` whose payload `write_payload` appends to the
    /// buffer it is given. A payload writer that fails leaves the batch unchanged.
    pub fn push<E>(
        &mut self,
        ts: TimestampNs,
        write_payload: impl FnOnce(&mut Vec<u8>) -> Result<(), E>,
    ) -> Result<(), PushError<E>> {
        debug_assert!(!self.sealed, "a sealed batch takes no more records");
        let start = self.bytes.len();
        debug_assert!(start.is_multiple_of(ALIGN), "records start aligned");
        self.bytes.resize(start + HEADER_LEN, 0);
        self.bytes[start + 16..start + 24].copy_from_slice(&ts.0.to_le_bytes());
        if let Err(error) = write_payload(&mut self.bytes) {
            self.bytes.truncate(start);
            return Err(PushError::Payload(error));
        }
        let payload_len = self.bytes.len() - start - HEADER_LEN;
        if payload_len == 0 || payload_len > PAYLOAD_LEN_MAX {
            self.bytes.truncate(start);
            return Err(PushError::PayloadLength(payload_len));
        }
        self.bytes[start + 4..start + 8].copy_from_slice(&(payload_len as u32).to_le_bytes());
        self.bytes.resize(start + framed_len(payload_len), 0);
        self.offsets.push(start as u32);
        Ok(())
    }

    /// Gives the records their sequence numbers (from `first_seq`), batch positions and
    /// chain (from `prev_crc`), and computes their checksums. Returns the last record's
    /// crc, the chain value the next batch starts from.
    pub fn seal(&mut self, first_seq: Seq, prev_crc: u32) -> u32 {
        self.seal_in_group(first_seq, prev_crc, first_seq)
    }

    /// Like `seal`, for a batch written after others that are not synced yet: record
    /// positions count from `group_first_seq`, the first record written since the last
    /// sync, so that recovery knows every record that may be torn together.
    pub fn seal_in_group(&mut self, first_seq: Seq, prev_crc: u32, group_first_seq: Seq) -> u32 {
        // Seq 0 is no record's; the group of unsynced records starts at or before this
        // batch.
        assert!(first_seq > Seq::ZERO, "records are numbered from 1");
        assert!(group_first_seq <= first_seq, "the unsynced group starts after its batch");
        let group_offset = (first_seq - group_first_seq) as usize;
        let mut chain = prev_crc;
        let count = self.offsets.len();
        for (index, &offset) in self.offsets.iter().enumerate() {
            let start = offset as usize;
            let header = &mut self.bytes[start..start + HEADER_LEN];
            let mut length_word = u32_at(header, 4) & LEN_MASK;
            let payload_len = length_word as usize;
            if index + 1 == count {
                length_word |= LAST_IN_BATCH;
            }
            header[4..8].copy_from_slice(&length_word.to_le_bytes());
            header[8..16].copy_from_slice(&(first_seq + index as u64).0.to_le_bytes());
            header[24..28].copy_from_slice(&chain.to_le_bytes());
            header[28..32].copy_from_slice(&((group_offset + index) as u32).to_le_bytes());
            let crc = crc32c::crc32c(&self.bytes[start + 4..start + HEADER_LEN + payload_len]);
            self.bytes[start..start + 4].copy_from_slice(&crc.to_le_bytes());
            chain = crc;
        }
        self.first_seq = first_seq;
        self.sealed = true;
        chain
    }

    /// The sequence number of the first record (once sealed).
    pub fn first_seq(&self) -> Seq {
        debug_assert!(self.sealed || self.is_empty(), "an unsealed batch has no seqs yet");
        self.first_seq
    }

    /// The records: (seq, ts, payload). Before `seal` the sequence numbers are not set.
    pub fn records(&self) -> impl ExactSizeIterator<Item = (Seq, TimestampNs, &[u8])> + '_ {
        self.offsets.iter().enumerate().map(move |(index, &offset)| {
            let start = offset as usize;
            let payload_len = (u32_at(&self.bytes, start + 4) & LEN_MASK) as usize;
            let ts = TimestampNs(u64_at(&self.bytes, start + 16));
            let payload = &self.bytes[start + HEADER_LEN..start + HEADER_LEN + payload_len];
            (self.first_seq + index as u64, ts, payload)
        })
    }
}

#[derive(Debug, PartialEq, Eq, thiserror::Error)]
pub enum PushError<E> {
    #[error("{0}")]
    Payload(E),
    #[error("a payload of {0} bytes (1 to {PAYLOAD_LEN_MAX} allowed)")]
    PayloadLength(usize),
}

#[cfg(test)]
mod tests {
    use super::*;

    fn batch_of(payloads: &[&[u8]]) -> RecordBatch {
        let mut batch = RecordBatch::default();
        for (ts, payload) in payloads.iter().enumerate() {
            batch
                .push(TimestampNs(ts as u64 * 10), |out| {
                    out.extend_from_slice(payload);
                    Ok::<(), ()>(())
                })
                .unwrap();
        }
        batch
    }

    #[test]
    fn sealed_records_read_back_with_their_chain_and_batch_positions() {
        let mut batch = batch_of(&[b"a", b"bcdefghij", b"k"]);
        let last_crc = batch.seal(Seq(41), 0xdead_beef);
        let mut offset = 0;
        let mut chain = 0xdead_beef;
        for index in 0..3u32 {
            let Slot::Record { header, payload } = read_slot(&batch.bytes()[offset..]) else {
                panic!("record {index} unreadable");
            };
            assert_eq!(header.seq, Seq(41 + u64::from(index)));
            assert_eq!(header.ts, TimestampNs(u64::from(index) * 10));
            assert_eq!(header.prev_crc, chain);
            assert_eq!(header.batch_index, index);
            assert_eq!(header.batch_first_seq(), Seq(41));
            assert_eq!(header.last_in_batch, index == 2);
            assert_eq!(payload, batch.records().nth(index as usize).unwrap().2);
            assert_eq!(offset % ALIGN, 0);
            chain = header.crc;
            offset += header.framed_len();
        }
        assert_eq!(chain, last_crc);
        assert_eq!(offset, batch.byte_len());
        assert_eq!(read_slot(&[0; 64]), Slot::Empty);
    }

    #[test]
    fn any_flipped_bit_makes_a_record_damaged() {
        let mut batch = batch_of(&[b"payload!"]);
        batch.seal(Seq(1), 0);
        let framed = batch.bytes().to_vec();
        for index in 0..HEADER_LEN + 8 {
            for bit in 0..8 {
                let mut damaged = framed.clone();
                damaged[index] ^= 1 << bit;
                assert!(
                    !matches!(read_slot(&damaged), Slot::Record { .. }),
                    "flip of bit {bit} in byte {index} went unnoticed"
                );
            }
        }
    }

    #[test]
    fn a_failed_or_empty_payload_leaves_the_batch_unchanged() {
        let mut batch = batch_of(&[b"x"]);
        let before = batch.bytes().to_vec();
        assert_eq!(
            batch.push(TimestampNs::ZERO, |out| {
                out.push(1);
                Err("no")
            }),
            Err(PushError::Payload("no"))
        );
        assert_eq!(
            batch.push(TimestampNs::ZERO, |_| Ok::<(), ()>(())),
            Err(PushError::PayloadLength(0))
        );
        assert_eq!(batch.bytes(), &before[..]);
        assert_eq!(batch.len(), 1);
    }
}
