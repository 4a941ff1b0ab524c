//! Identifiers. Names from the outside world (accounts, assets, symbols, client order
//! ids) are strings; inside the engine assets, accounts and instruments are dense
//! indexes handed out in order of first appearance, which keeps the state
//! deterministic and the hot path free of string comparisons.
//!
//! The pipeline's identities are one-field types too, so that one can never be passed
//! where another is expected: `Seq` (a command's place in the journal), `OrderId` (the
//! exchange's id of an order: the `Seq` of the command that placed it) and
//! `TimestampNs` (a time, in nanoseconds since the Unix epoch). Each prints as its bare
//! number, and serialises as one, so every text and byte format stays what it was.

use std::fmt;
use std::hash::Hasher;
use std::ops::{Add, AddAssign, Sub};

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

macro_rules! number_type {
    ($(#[$doc:meta])* $name:ident) => {
        $(#[$doc])*
        #[derive(
            Clone,
            Copy,
            Debug,
            PartialEq,
            Eq,
            PartialOrd,
            Ord,
            Hash,
            Default,
            serde::Serialize,
            serde::Deserialize,
        )]
        #[serde(transparent)]
        pub struct $name(pub u64);

        impl fmt::Display for $name {
            /// The bare number (padding and width apply to it).
            fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
                fmt::Display::fmt(&self.0, formatter)
            }
        }
    };
}

number_type!(
    /// A command's sequence number: its place in the journal, 1, 2, 3, ..., stamped by
    /// the sequencer (in `bourse replay`, the command's line number). `Seq::ZERO` is
    /// "none": the place before the first command.
    ///
    /// Arithmetic is that of places: a place plus or minus a count of records is a
    /// place (`seq + 1`, `seq - 1`), and the records from one place to a later one are
    /// a count (`later - earlier`).
    Seq
);
number_type!(
    /// The exchange's id of an order: the `Seq` of the command that placed it
    /// (`OrderId::of`). Orders rebuilt from an exchange-only snapshot get stand-ins
    /// (`bourse_core::venue::Venue::new`).
    OrderId
);
number_type!(
    /// A time: nanoseconds since the Unix epoch. The sequencer stamps each command
    /// with one; the core only carries them (it never reads a clock).
    TimestampNs
);

impl Seq {
    pub const ZERO: Seq = Seq(0);

    /// The place right after this one.
    #[inline]
    pub fn next(self) -> Seq {
        Seq(self.0 + 1)
    }

    /// The place right before this one; `Seq::ZERO` stays `Seq::ZERO`.
    #[inline]
    pub fn previous(self) -> Seq {
        Seq(self.0.saturating_sub(1))
    }
}

impl Add<u64> for Seq {
    type Output = Seq;

    /// The place `records` after this one.
    #[inline]
    fn add(self, records: u64) -> Seq {
        Seq(self.0 + records)
    }
}

impl AddAssign<u64> for Seq {
    #[inline]
    fn add_assign(&mut self, records: u64) {
        self.0 += records;
    }
}

impl Sub<u64> for Seq {
    type Output = Seq;

    /// The place `records` before this one.
    #[inline]
    fn sub(self, records: u64) -> Seq {
        debug_assert!(records <= self.0, "{records} records before {self}");
        Seq(self.0 - records)
    }
}

impl Sub<Seq> for Seq {
    type Output = u64;

    /// The records from `earlier` (included) to this place (excluded).
    #[inline]
    fn sub(self, earlier: Seq) -> u64 {
        debug_assert!(earlier <= self, "{earlier} is after {self}");
        self.0 - earlier.0
    }
}

impl OrderId {
    /// The id of the order placed by the command stamped `seq`.
    #[inline]
    pub fn of(seq: Seq) -> OrderId {
        OrderId(seq.0)
    }
}

impl From<Seq> for OrderId {
    #[inline]
    fn from(seq: Seq) -> OrderId {
        OrderId::of(seq)
    }
}

impl TimestampNs {
    pub const ZERO: TimestampNs = TimestampNs(0);

    /// Nanoseconds from `earlier` to this time; 0 when `earlier` is not earlier.
    #[inline]
    pub fn since(self, earlier: TimestampNs) -> u64 {
        self.0.saturating_sub(earlier.0)
    }
}

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
    fn identities_print_and_serialise_as_their_bare_numbers() {
        assert_eq!(Seq(42).to_string(), "42");
        assert_eq!(format!("{:020}", Seq(12_345)), "00000000000000012345");
        assert_eq!(OrderId(7).to_string(), "7");
        assert_eq!(TimestampNs(1_700_000_000_000_000_000).to_string(), "1700000000000000000");
        assert_eq!(serde_json::to_string(&Seq(9)).unwrap(), "9");
        assert_eq!(serde_json::from_str::<TimestampNs>("5").unwrap(), TimestampNs(5));
    }

    #[test]
    fn places_and_counts_of_records() {
        assert_eq!(Seq(3) + 2, Seq(5));
        assert_eq!(Seq(5) - Seq(3), 2);
        assert_eq!(Seq(5) - 2, Seq(3));
        assert_eq!(
            (Seq(1).next(), Seq(1).previous(), Seq::ZERO.previous()),
            (Seq(2), Seq::ZERO, Seq::ZERO)
        );
        assert_eq!(OrderId::of(Seq(11)), OrderId::from(Seq(11)));
        assert_eq!(TimestampNs(10).since(TimestampNs(4)), 6);
        assert_eq!(TimestampNs(4).since(TimestampNs(10)), 0);
    }

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
