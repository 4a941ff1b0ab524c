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
use hashbrown::HashTable;
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
    seeded_name_hash(0, name.as_bytes())
}

/// The hash of `bytes` under `seed` (e.g. the account that owns a client order id).
/// Names of up to 16 bytes (nearly all) hash as their two `short_words` and length in
/// one folded multiply: no loop over the bytes, no branch on their content. Longer ones
/// go through `FxHasher`. Deterministic, as the engine's state must be.
#[inline]
pub fn seeded_name_hash(seed: u64, bytes: &[u8]) -> u64 {
    match short_words(bytes) {
        Some((low, high)) => {
            // The digits of pi, as arbitrary odd constants.
            let product = u128::from(low ^ seed.rotate_left(32) ^ 0x243f_6a88_85a3_08d3)
                * u128::from(high ^ (bytes.len() as u64) ^ 0x1319_8a2e_0370_7345);
            (product as u64) ^ ((product >> 64) as u64)
        }
        None => {
            let mut hasher = FxHasher::default();
            hasher.write_u64(seed);
            hasher.write(bytes);
            hasher.finish()
        }
    }
}

/// A name of up to 16 bytes as two words that, with its length, tell it apart from
/// every other name of that length, read with (overlapping) loads instead of a loop;
/// `None` for a longer name.
#[inline]
pub fn short_words(bytes: &[u8]) -> Option<(u64, u64)> {
    let length = bytes.len();
    let word = |from: usize| -> u64 {
        u64::from_le_bytes(bytes[from..from + 8].try_into().expect("eight bytes"))
    };
    let half = |from: usize| -> u64 {
        u64::from(u32::from_le_bytes(bytes[from..from + 4].try_into().expect("four bytes")))
    };
    match length {
        0 => Some((0, 0)),
        // The first, middle and last byte: all of a name this short.
        1..=3 => Some((
            u64::from(bytes[0])
                | u64::from(bytes[length / 2]) << 8
                | u64::from(bytes[length - 1]) << 16,
            0,
        )),
        4..=7 => Some((half(0), half(length - 4))),
        8..=16 => Some((word(0), word(length - 8))),
        _ => None,
    }
}

/// Byte equality that compares names of up to 16 bytes as their `short_words` instead
/// of calling `memcmp`: account names and client ids are short, and this comparison
/// runs on every order lookup.
#[inline]
pub fn short_bytes_equal(left: &[u8], right: &[u8]) -> bool {
    if left.len() != right.len() {
        return false;
    }
    match (short_words(left), short_words(right)) {
        (Some(left), Some(right)) => left == right,
        _ => left == right,
    }
}

/// A table from the engine's own names (asset names, instrument symbols) to their ids:
/// hashed with `name_hash` and compared with `short_bytes_equal`, so that a lookup of a
/// short name neither calls `memcmp` nor loops over its bytes. Every new order looks its
/// symbol up here.
#[derive(Clone)]
pub struct NameTable<Id> {
    table: HashTable<(CompactString, Id)>,
}

impl<Id> Default for NameTable<Id> {
    fn default() -> Self {
        NameTable { table: HashTable::new() }
    }
}

impl<Id: Copy> NameTable<Id> {
    #[inline]
    pub fn get(&self, name: &str) -> Option<Id> {
        let is_named = |(entry_name, _): &(CompactString, Id)| {
            short_bytes_equal(entry_name.as_bytes(), name.as_bytes())
        };
        self.table.find(name_hash(name), is_named).map(|&(_, id)| id)
    }

    pub fn contains(&self, name: &str) -> bool {
        self.get(name).is_some()
    }

    /// Names `id` `name`, which must not be in the table yet.
    pub fn insert(&mut self, name: &str, id: Id) {
        debug_assert!(!self.contains(name), "{name} named twice");
        self.table.insert_unique(name_hash(name), (CompactString::new(name), id), |(name, _)| {
            name_hash(name)
        });
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

    #[test]
    fn name_hashes_tell_apart_every_byte_the_length_and_the_seed() {
        // Names that differ in one byte, in length only (trailing zero bytes), or in
        // the seed (the account of a client order id) hash apart, short and long alike.
        let mut names: Vec<Vec<u8>> = Vec::new();
        for length in 0..40 {
            let base: Vec<u8> = (0..length as u8).map(|byte| b'a' + byte % 26).collect();
            names.push(base.clone());
            for position in 0..length {
                let mut changed = base.clone();
                changed[position] = b'#';
                names.push(changed);
            }
        }
        names.extend((1..20).map(|length| vec![0u8; length]));
        let mut seen = std::collections::HashSet::new();
        for seed in [0u64, 1, 2, u64::from(u32::MAX)] {
            for name in &names {
                assert!(
                    seen.insert(seeded_name_hash(seed, name)),
                    "{seed} {name:?} collides with an earlier name"
                );
            }
        }
    }

    #[test]
    fn a_name_table_finds_what_it_named_and_nothing_else() {
        let mut table = NameTable::default();
        let names = ["", "a", "EUR-USD", "BTC-USDT-PERPETUAL", "x".repeat(40).leak()];
        for (id, name) in names.iter().enumerate() {
            assert!(!table.contains(name));
            table.insert(name, InstrumentId(id as u32));
        }
        for (id, name) in names.iter().enumerate() {
            assert_eq!(table.get(name), Some(InstrumentId(id as u32)), "{name}");
        }
        for missing in ["b", "EUR-US", "EUR-USDT", "BTC-USDT-PERPETUAk", &"x".repeat(41)] {
            assert_eq!(table.get(missing), None, "{missing}");
        }
    }
}
