//! The index's compact binary values: integers as LEB128 varints (signed ones
//! zig-zagged), text as a varint length and its bytes. Written by the follower, read
//! back by lookups; a value that does not read back is reported, never trusted.

/// Appends values to a byte buffer.
#[derive(Default)]
pub struct Packer {
    pub bytes: Vec<u8>,
}

impl Packer {
    pub fn clear(&mut self) {
        self.bytes.clear();
    }

    pub fn u64(&mut self, mut value: u64) {
        while value >= 0x80 {
            self.bytes.push((value as u8) | 0x80);
            value >>= 7;
        }
        self.bytes.push(value as u8);
    }

    pub fn u128(&mut self, mut value: u128) {
        while value >= 0x80 {
            self.bytes.push((value as u8) | 0x80);
            value >>= 7;
        }
        self.bytes.push(value as u8);
    }

    pub fn i128(&mut self, value: i128) {
        self.u128(((value << 1) ^ (value >> 127)) as u128);
    }

    pub fn bool(&mut self, value: bool) {
        self.bytes.push(u8::from(value));
    }

    pub fn text(&mut self, value: &str) {
        self.u64(value.len() as u64);
        self.bytes.extend_from_slice(value.as_bytes());
    }

    /// `None` as 0, `Some(v)` as `v + 1` (ids are never `u64::MAX`).
    pub fn opt_u64(&mut self, value: Option<u64>) {
        debug_assert!(value != Some(u64::MAX), "an id of u64::MAX would read back as another");
        self.u64(value.map_or(0, |value| value.saturating_add(1)));
    }

    pub fn opt_i128(&mut self, value: Option<i128>) {
        match value {
            None => self.bool(false),
            Some(value) => {
                self.bool(true);
                self.i128(value);
            }
        }
    }
}

/// Why a stored value did not read back.
#[derive(Debug, PartialEq, Eq)]
pub struct Truncated;

/// Reads what a `Packer` wrote, in the same order.
pub struct Unpacker<'a> {
    bytes: &'a [u8],
}

impl<'a> Unpacker<'a> {
    pub fn new(bytes: &'a [u8]) -> Unpacker<'a> {
        Unpacker { bytes }
    }

    pub fn is_empty(&self) -> bool {
        self.bytes.is_empty()
    }

    fn byte(&mut self) -> Result<u8, Truncated> {
        let (&first, rest) = self.bytes.split_first().ok_or(Truncated)?;
        self.bytes = rest;
        Ok(first)
    }

    pub fn u128(&mut self) -> Result<u128, Truncated> {
        let mut value = 0u128;
        for shift in (0..128).step_by(7) {
            let byte = self.byte()?;
            value |= u128::from(byte & 0x7f) << shift;
            if byte < 0x80 {
                return Ok(value);
            }
        }
        Err(Truncated)
    }

    pub fn u64(&mut self) -> Result<u64, Truncated> {
        u64::try_from(self.u128()?).map_err(|_| Truncated)
    }

    pub fn i128(&mut self) -> Result<i128, Truncated> {
        let zigzag = self.u128()?;
        Ok(((zigzag >> 1) as i128) ^ -((zigzag & 1) as i128))
    }

    pub fn bool(&mut self) -> Result<bool, Truncated> {
        Ok(self.byte()? != 0)
    }

    pub fn text(&mut self) -> Result<&'a str, Truncated> {
        let len = usize::try_from(self.u64()?).map_err(|_| Truncated)?;
        if len > self.bytes.len() {
            return Err(Truncated);
        }
        let (text, rest) = self.bytes.split_at(len);
        self.bytes = rest;
        std::str::from_utf8(text).map_err(|_| Truncated)
    }

    pub fn opt_u64(&mut self) -> Result<Option<u64>, Truncated> {
        Ok(self.u64()?.checked_sub(1))
    }

    pub fn opt_i128(&mut self) -> Result<Option<i128>, Truncated> {
        if self.bool()? {
            Ok(Some(self.i128()?))
        } else {
            Ok(None)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_read_back_as_written() {
        let mut packer = Packer::default();
        let numbers = [0i128, 1, -1, 63, -64, 10_000_000_000_000_000, i128::MAX, i128::MIN];
        for number in numbers {
            packer.i128(number);
        }
        packer.u64(u64::MAX);
        packer.text("alice");
        packer.opt_u64(None);
        packer.opt_u64(Some(7));
        packer.opt_i128(Some(-5));
        packer.bool(true);
        let mut unpacker = Unpacker::new(&packer.bytes);
        for number in numbers {
            assert_eq!(unpacker.i128(), Ok(number));
        }
        assert_eq!(unpacker.u64(), Ok(u64::MAX));
        assert_eq!(unpacker.text(), Ok("alice"));
        assert_eq!(unpacker.opt_u64(), Ok(None));
        assert_eq!(unpacker.opt_u64(), Ok(Some(7)));
        assert_eq!(unpacker.opt_i128(), Ok(Some(-5)));
        assert_eq!(unpacker.bool(), Ok(true));
        assert!(unpacker.is_empty());
        assert_eq!(unpacker.u64(), Err(Truncated));
    }

    #[test]
    fn damaged_values_are_errors() {
        assert_eq!(Unpacker::new(&[0x80]).u64(), Err(Truncated));
        assert_eq!(Unpacker::new(&[5, b'a']).text(), Err(Truncated));
        assert_eq!(Unpacker::new(&[0xff; 20]).u128(), Err(Truncated));
        assert_eq!(Unpacker::new(&[1, 0xff]).text(), Err(Truncated));
    }
}
