//! Snapshot bytes for the snapshot tests (`snapshot.rs`, `venue.rs`,
//! `venue_commands.rs`): encoding an exchange or a venue, the small pools that make a
//! restored one grow, and the byte surgery that breaks a snapshot on purpose.
#![allow(dead_code)]

use bourse_core::book::BookCapacity;
use bourse_core::snapshot::{encode_state, encode_venue};
use bourse_core::{Exchange, ExchangeConfig, Venue};

/// The exchange's state snapshot.
pub fn state_bytes(exchange: &Exchange) -> Vec<u8> {
    let mut bytes = Vec::new();
    encode_state(exchange, &mut bytes);
    bytes
}

/// The venue's snapshot (its exchange's, when it has no activity, no halts and no
/// open-orders limit).
pub fn venue_bytes(venue: &Venue) -> Vec<u8> {
    let mut bytes = Vec::new();
    encode_venue(venue, &mut bytes);
    bytes
}

/// Pools that start tiny, so that a restored exchange must grow its books and index
/// (and decoding many snapshots stays cheap).
pub fn tiny_config() -> ExchangeConfig {
    ExchangeConfig { book_capacity: BookCapacity { orders: 1, levels: 1 }, open_orders_capacity: 0 }
}

/// `value` as a LEB128 varint, as snapshots store lengths and counts.
pub fn varint(mut value: u64) -> Vec<u8> {
    let mut bytes = Vec::new();
    while value >= 0x80 {
        bytes.push(value as u8 | 0x80);
        value >>= 7;
    }
    bytes.push(value as u8);
    bytes
}

/// `bytes` with the first occurrence of `from` at or after `start` replaced by `to`.
pub fn patched(bytes: &[u8], start: usize, from: &[u8], to: &[u8]) -> Vec<u8> {
    let at = start
        + bytes[start..]
            .windows(from.len())
            .position(|window| window == from)
            .expect("pattern found");
    let mut patched = bytes[..at].to_vec();
    patched.extend_from_slice(to);
    patched.extend_from_slice(&bytes[at + from.len()..]);
    patched
}
