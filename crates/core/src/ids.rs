//! Identifiers. Names from the outside world (accounts, assets, symbols, client order
//! ids) are strings; inside the engine assets, accounts and instruments are dense
//! indexes handed out in order of first appearance, which keeps the state
//! deterministic and the hot path free of string comparisons.

use compact_str::CompactString;

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
