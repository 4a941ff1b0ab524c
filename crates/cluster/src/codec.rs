//! Little-endian fields in and out of byte buffers, for the log's files and the peer
//! protocol: a reader that answers `Truncated` instead of panicking at the end of what
//! arrived, and bounds every length it is given by what is left.

use raft::eraftpb::ConfState;

#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum DecodeError {
    #[error("the bytes end inside a field")]
    Truncated,
    #[error("{0}")]
    Invalid(&'static str),
}

pub(crate) struct Reader<'a> {
    bytes: &'a [u8],
}

impl<'a> Reader<'a> {
    pub(crate) fn new(bytes: &'a [u8]) -> Reader<'a> {
        Reader { bytes }
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.bytes.is_empty()
    }

    /// What is left to read, without reading it.
    pub(crate) fn remaining(&self) -> &'a [u8] {
        self.bytes
    }

    /// Everything not read yet.
    pub(crate) fn rest(&mut self) -> &'a [u8] {
        std::mem::take(&mut self.bytes)
    }

    pub(crate) fn take(&mut self, len: usize) -> Result<&'a [u8], DecodeError> {
        if len > self.bytes.len() {
            return Err(DecodeError::Truncated);
        }
        let (taken, rest) = self.bytes.split_at(len);
        self.bytes = rest;
        Ok(taken)
    }

    pub(crate) fn u8(&mut self) -> Result<u8, DecodeError> {
        Ok(self.take(1)?[0])
    }

    pub(crate) fn u32(&mut self) -> Result<u32, DecodeError> {
        let bytes = self.take(4)?;
        Ok(u32::from_le_bytes([bytes[0], bytes[1], bytes[2], bytes[3]]))
    }

    pub(crate) fn u64(&mut self) -> Result<u64, DecodeError> {
        let mut word = [0u8; 8];
        word.copy_from_slice(self.take(8)?);
        Ok(u64::from_le_bytes(word))
    }

    pub(crate) fn bool(&mut self) -> Result<bool, DecodeError> {
        match self.u8()? {
            0 => Ok(false),
            1 => Ok(true),
            _ => Err(DecodeError::Invalid("a flag is neither 0 nor 1")),
        }
    }

    /// A length-prefixed (u32) run of bytes.
    pub(crate) fn bytes(&mut self) -> Result<&'a [u8], DecodeError> {
        let len = self.u32()? as usize;
        self.take(len)
    }

    /// A count-prefixed (u32) list of u64s; the count is checked against what is left
    /// before anything is allocated.
    pub(crate) fn u64s(&mut self) -> Result<Vec<u64>, DecodeError> {
        let count = self.u32()? as usize;
        if count > self.bytes.len() / 8 {
            return Err(DecodeError::Truncated);
        }
        (0..count).map(|_| self.u64()).collect()
    }

    /// A count (u32) of items each at least `min_item_bytes` long, checked against what
    /// is left.
    pub(crate) fn count(&mut self, min_item_bytes: usize) -> Result<usize, DecodeError> {
        let count = self.u32()? as usize;
        if count > self.bytes.len() / min_item_bytes.max(1) {
            return Err(DecodeError::Truncated);
        }
        Ok(count)
    }

    pub(crate) fn conf_state(&mut self) -> Result<ConfState, DecodeError> {
        let conf_state = ConfState {
            voters: self.u64s()?,
            learners: self.u64s()?,
            voters_outgoing: self.u64s()?,
            learners_next: self.u64s()?,
            auto_leave: self.bool()?,
            ..Default::default()
        };
        Ok(conf_state)
    }
}

pub(crate) fn put_u32(out: &mut Vec<u8>, value: u32) {
    out.extend_from_slice(&value.to_le_bytes());
}

pub(crate) fn put_u64(out: &mut Vec<u8>, value: u64) {
    out.extend_from_slice(&value.to_le_bytes());
}

/// Lengths of whatever the log or a message holds fit in a u32: a frame is never near
/// 4 GiB (`wire::FRAME_BYTES_MAX`).
pub(crate) fn put_bytes(out: &mut Vec<u8>, bytes: &[u8]) {
    put_u32(out, bytes.len() as u32);
    out.extend_from_slice(bytes);
}

pub(crate) fn put_u64s(out: &mut Vec<u8>, values: &[u64]) {
    put_u32(out, values.len() as u32);
    for value in values {
        put_u64(out, *value);
    }
}

pub(crate) fn put_conf_state(out: &mut Vec<u8>, conf_state: &ConfState) {
    put_u64s(out, &conf_state.voters);
    put_u64s(out, &conf_state.learners);
    put_u64s(out, &conf_state.voters_outgoing);
    put_u64s(out, &conf_state.learners_next);
    out.push(u8::from(conf_state.auto_leave));
}
