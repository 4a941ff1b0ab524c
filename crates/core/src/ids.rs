//! Identifiers. Names from the outside world (accounts, assets, symbols, client order
//! ids) are strings; inside the engine assets, accounts and instruments are dense
//! indexes handed out in order of first appearance, which keeps the state
//! deterministic and the hot path free of string comparisons.

use std::hash::Hasher;

use compact_str::CompactString;
use rustc_hash::FxHasher;

macro_rules! index_type {
    ($(#[$doc:meta])* $name:ident) => {
        $(#[$doc])*
        #[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
        pub struct $name(pub u32);

        impl $name {
            pub fn index(self) -> usize {
                self.0 as usize
            }
        }
    };
}

index_type!(
    /// An asset, numbered in order of declaration.
    AssetId
);
index_type!(
    /// An account, numbered in order of creation (first deposit).
    AccountId
);
index_type!(
    /// An instrument, numbered in order of declaration.
    InstrumentId
);

/// The client's order id: unique per account among that account's open orders. Ids of
/// up to 24 bytes are stored inline (no allocation per order).
pub type ClientOrderId = CompactString;

/// Where an open order lives: its instrument's book and its slot there.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct OrderHandle {
    pub instrument: InstrumentId,
    pub slot: u32,
}

/// The hash of a name, for the engine's own name tables.
#[inline]
pub fn name_hash(name: &str) -> u64 {
    let mut hasher = FxHasher::default();
    hasher.write(name.as_bytes());
    hasher.finish()
}

/// Byte equality that compares names of up to 16 bytes with two (overlapping) word
/// loads instead of a call to `memcmp`: account names and client ids are short, and
/// this comparison runs on every order lookup.
#[inline]
pub fn short_bytes_equal(left: &[u8], right: &[u8]) -> bool {
    let length = left.len();
    if length != right.len() {
        return false;
    }
    let word = |bytes: &[u8], from: usize| -> u64 {
        u64::from_ne_bytes(bytes[from..from + 8].try_into().expect("eight bytes"))
    };
    let half = |bytes: &[u8], from: usize| -> u32 {
        u32::from_ne_bytes(bytes[from..from + 4].try_into().expect("four bytes"))
    };
    match length {
        0..=3 => left == right,
        4..=7 => {
            half(left, 0) == half(right, 0) && half(left, length - 4) == half(right, length - 4)
        }
        8..=16 => {
            word(left, 0) == word(right, 0) && word(left, length - 8) == word(right, length - 8)
        }
        _ => left == right,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_byte_equality_agrees_with_slice_equality() {
        let samples: Vec<String> = (0..40)
            .flat_map(|length| {
                let base = "abcdefghijklmnopqrstuvwxyz0123456789ABCDEFGH"[..length].to_string();
                let mut variants = vec![base.clone()];
                for position in 0..length {
                    let mut bytes = base.clone().into_bytes();
                    bytes[position] = b'#';
                    variants.push(String::from_utf8(bytes).unwrap());
                }
                variants
            })
            .collect();
        for left in &samples {
            for right in &samples {
                assert_eq!(
                    short_bytes_equal(left.as_bytes(), right.as_bytes()),
                    left == right,
                    "{left:?} {right:?}"
                );
            }
        }
    }
}
