//! Lookups by id in milliseconds however long the history: an order's latest state by
//! its id, a trade by its id, an account's most recent fills. Kept in an embedded
//! key-value store (fjall, a pure-Rust LSM tree) beside the Parquet files, written
//! from the same rows at each commit, in compact binary values (`pack`).
//!
//! Few keys per command, so that writing it costs little next to matching:
//! - `trade_blocks`: a commit's trades in runs of `BLOCK` (seq order), keyed by the
//!   first one's `(seq, trade_index)`; a trade is in the block with the greatest key
//!   at or before its id.
//! - `order_blocks`: the orders placed in a commit, with their state at its end, in
//!   runs of `BLOCK` keyed by the first one's id; `order_updates`: by id, the latest
//!   state of an order placed in an earlier commit. An update is always newer than its
//!   order's block.
//! - `fill_chunks`: each account's fills of a commit, `CHUNK` to a value, keyed by the
//!   account (its name's length then the name), the commit's first seq and the
//!   chunk's number; an account's fills are one prefix, newest last.
//! - `meta`: `in_flight`, the range of the commit that wrote it (in the same atomic
//!   batch). A commit whose checkpoint a crash prevented is done again over exactly
//!   that range (`Follower::open`), so it writes the same keys with the same values:
//!   the index is exact too.

use std::path::Path;

use bourse_core::{OrderId, Seq, TimestampNs};
use fjall::config::CompressionPolicy;
use fjall::{CompressionType, Database, Keyspace, KeyspaceCreateOptions, PersistMode};
use rustc_hash::FxHashMap;
use serde_json::{json, Value};

use crate::derive::Pending;
use crate::pack::{Packer, Truncated, Unpacker};
use crate::rows::{OrderRow, TradeRow, SCALE};

/// Trades or orders per block.
pub const BLOCK: usize = 32;
/// Fills per chunk.
pub const CHUNK: usize = 128;

#[derive(Debug)]
pub struct IndexError(pub String);

impl std::fmt::Display for IndexError {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(formatter, "history index: {}", self.0)
    }
}

impl std::error::Error for IndexError {}

impl From<fjall::Error> for IndexError {
    fn from(error: fjall::Error) -> Self {
        IndexError(error.to_string())
    }
}

impl From<Truncated> for IndexError {
    fn from(_: Truncated) -> Self {
        IndexError("a stored value does not read back".to_string())
    }
}

#[derive(Clone)]
pub struct Index {
    database: Database,
    trade_blocks: Keyspace,
    order_blocks: Keyspace,
    order_updates: Keyspace,
    fill_chunks: Keyspace,
    meta: Keyspace,
}

/// An exact decimal of 10^-18 units as text, without trailing zeros: `12.5`, `-0.001`.
pub fn decimal_text(value: i128) -> String {
    let negative = value < 0;
    let magnitude = value.unsigned_abs();
    let unit = 10u128.pow(SCALE);
    let (whole, fraction) = (magnitude / unit, magnitude % unit);
    let mut text = if negative { format!("-{whole}") } else { whole.to_string() };
    if fraction != 0 {
        let digits = format!("{fraction:018}");
        text.push('.');
        text.push_str(digits.trim_end_matches('0'));
    }
    text
}

fn pack_order(row: &OrderRow, out: &mut Packer) {
    out.opt_u64(row.order_id.map(|id| id.0));
    out.u64(row.seq.0);
    out.u64(row.ts.0);
    out.text(&row.account);
    out.text(&row.client_order_id);
    out.text(&row.symbol);
    out.text(row.side);
    out.text(row.kind);
    out.text(row.time_in_force);
    out.bool(row.post_only);
    out.opt_i128(row.price);
    out.i128(row.qty);
    out.i128(row.filled);
    out.i128(row.remaining);
    out.text(row.status);
    out.text(row.change);
}

/// An order's state as stored, read without copying.
struct StoredOrder<'a> {
    order_id: Option<OrderId>,
    seq: Seq,
    ts: TimestampNs,
    texts: [&'a str; 6],
    post_only: bool,
    price: Option<i128>,
    amounts: [i128; 3],
    status: &'a str,
    change: &'a str,
}

fn unpack_order<'a>(input: &mut Unpacker<'a>) -> Result<StoredOrder<'a>, Truncated> {
    Ok(StoredOrder {
        order_id: input.opt_u64()?.map(OrderId),
        seq: Seq(input.u64()?),
        ts: TimestampNs(input.u64()?),
        texts: [
            input.text()?,
            input.text()?,
            input.text()?,
            input.text()?,
            input.text()?,
            input.text()?,
        ],
        post_only: input.bool()?,
        price: input.opt_i128()?,
        amounts: [input.i128()?, input.i128()?, input.i128()?],
        status: input.text()?,
        change: input.text()?,
    })
}

impl StoredOrder<'_> {
    /// The order as the lookups return it.
    fn json(&self) -> Value {
        let [account, client_order_id, symbol, side, kind, time_in_force] = self.texts;
        let [qty, filled, remaining] = self.amounts;
        json!({
            "order_id": self.order_id,
            "seq": self.seq,
            "ts": self.ts,
            "account": account,
            "client_order_id": client_order_id,
            "symbol": symbol,
            "side": side,
            "type": kind,
            "time_in_force": time_in_force,
            "post_only": self.post_only,
            "price": self.price.map(decimal_text),
            "qty": decimal_text(qty),
            "filled": decimal_text(filled),
            "remaining": decimal_text(remaining),
            "status": self.status,
            "change": self.change,
        })
    }
}

fn pack_trade(row: &TradeRow, out: &mut Packer) {
    out.u64(row.seq.0);
    out.u64(u64::from(row.trade_index));
    out.u64(row.ts.0);
    out.text(&row.symbol);
    out.i128(row.price);
    out.i128(row.qty);
    out.i128(row.notional);
    out.text(row.taker_side);
    out.opt_u64(row.maker_order_id.map(|id| id.0));
    out.opt_u64(row.taker_order_id.map(|id| id.0));
    out.text(&row.maker_account);
    out.text(&row.taker_account);
    out.text(&row.maker_client_order_id);
    out.text(&row.taker_client_order_id);
    out.i128(row.maker_fee);
    out.text(&row.maker_fee_asset);
    out.i128(row.taker_fee);
    out.text(&row.taker_fee_asset);
}

/// A trade as stored, read without copying.
struct StoredTrade<'a> {
    seq: Seq,
    trade_index: u32,
    ts: TimestampNs,
    symbol: &'a str,
    price: i128,
    qty: i128,
    notional: i128,
    taker_side: &'a str,
    order_ids: [Option<OrderId>; 2],
    texts: [&'a str; 4],
    maker_fee: (i128, &'a str),
    taker_fee: (i128, &'a str),
}

fn unpack_trade<'a>(input: &mut Unpacker<'a>) -> Result<StoredTrade<'a>, Truncated> {
    Ok(StoredTrade {
        seq: Seq(input.u64()?),
        trade_index: u32::try_from(input.u64()?).map_err(|_| Truncated)?,
        ts: TimestampNs(input.u64()?),
        symbol: input.text()?,
        price: input.i128()?,
        qty: input.i128()?,
        notional: input.i128()?,
        taker_side: input.text()?,
        order_ids: [input.opt_u64()?.map(OrderId), input.opt_u64()?.map(OrderId)],
        texts: [input.text()?, input.text()?, input.text()?, input.text()?],
        maker_fee: (input.i128()?, input.text()?),
        taker_fee: (input.i128()?, input.text()?),
    })
}

impl StoredTrade<'_> {
    /// The trade as the lookups return it.
    fn json(&self) -> Value {
        let [maker_account, taker_account, maker_client_order_id, taker_client_order_id] =
            self.texts;
        json!({
            "trade_id": format!("{}-{}", self.seq, self.trade_index),
            "seq": self.seq,
            "trade_index": self.trade_index,
            "ts": self.ts,
            "symbol": self.symbol,
            "price": decimal_text(self.price),
            "qty": decimal_text(self.qty),
            "notional": decimal_text(self.notional),
            "taker_side": self.taker_side,
            "maker_order_id": self.order_ids[0],
            "taker_order_id": self.order_ids[1],
            "maker_account": maker_account,
            "taker_account": taker_account,
            "maker_client_order_id": maker_client_order_id,
            "taker_client_order_id": taker_client_order_id,
            "maker_fee": decimal_text(self.maker_fee.0),
            "maker_fee_asset": self.maker_fee.1,
            "taker_fee": decimal_text(self.taker_fee.0),
            "taker_fee_asset": self.taker_fee.1,
        })
    }
}

/// One account's side of a trade, from the trade as stored.
fn fill_view(trade: &Value, taker: bool) -> Value {
    let role = if taker { "taker" } else { "maker" };
    let taker_side = trade["taker_side"].as_str().unwrap_or("buy");
    let side = match (taker_side, taker) {
        ("buy", true) | ("sell", false) => "buy",
        _ => "sell",
    };
    json!({
        "trade_id": trade["trade_id"],
        "seq": trade["seq"],
        "ts": trade["ts"],
        "symbol": trade["symbol"],
        "side": side,
        "liquidity": role,
        "order_id": trade[format!("{role}_order_id")],
        "client_order_id": trade[format!("{role}_client_order_id")],
        "price": trade["price"],
        "qty": trade["qty"],
        "notional": trade["notional"],
        "fee": trade[format!("{role}_fee")],
        "fee_asset": trade[format!("{role}_fee_asset")],
    })
}

fn trade_key(seq: Seq, trade_index: u32) -> [u8; 12] {
    let mut key = [0u8; 12];
    key[..8].copy_from_slice(&seq.0.to_be_bytes());
    key[8..].copy_from_slice(&trade_index.to_be_bytes());
    key
}

fn account_prefix(account: &str) -> Vec<u8> {
    let name = &account.as_bytes()[..account.len().min(u16::MAX as usize)];
    let mut key = Vec::with_capacity(2 + name.len() + 12);
    key.extend_from_slice(&(name.len() as u16).to_be_bytes());
    key.extend_from_slice(name);
    key
}

/// One fill as a chunk stores it: the trade's id and which side the account was.
const FILL_BYTES: usize = 13;

fn pack_fill(seq: Seq, trade_index: u32, taker: bool, out: &mut Vec<u8>) {
    out.extend_from_slice(&trade_key(seq, trade_index));
    out.push(u8::from(taker));
}

fn unpack_fill(bytes: &[u8]) -> Option<(Seq, u32, bool)> {
    let seq = Seq(u64::from_be_bytes(bytes.get(..8)?.try_into().ok()?));
    let trade_index = u32::from_be_bytes(bytes.get(8..12)?.try_into().ok()?);
    Some((seq, trade_index, *bytes.get(12)? == 1))
}

const IN_FLIGHT: &[u8] = b"in_flight";

/// Every level's blocks compressed with LZ4 (fjall leaves the first two levels, where
/// most of an index that only grows lies, uncompressed). Applies to keyspaces made from
/// now on: fjall keeps a keyspace's options from its creation.
fn keyspace_options() -> KeyspaceCreateOptions {
    KeyspaceCreateOptions::default()
        .data_block_compression_policy(CompressionPolicy::all(CompressionType::Lz4))
}

impl Index {
    /// Opens (or makes) the index in `dir`: once per process, then cloned.
    pub fn open(dir: &Path) -> Result<Index, IndexError> {
        let database = Database::builder(dir).manual_journal_persist(true).open()?;
        let keyspace = |name: &str| database.keyspace(name, keyspace_options);
        Ok(Index {
            trade_blocks: keyspace("trade_blocks")?,
            order_blocks: keyspace("order_blocks")?,
            order_updates: keyspace("order_updates")?,
            fill_chunks: keyspace("fill_chunks")?,
            meta: keyspace("meta")?,
            database,
        })
    }

    /// Writes the lookups of `pending`, the rows of commands `range`, and makes them
    /// durable, in one atomic batch.
    pub fn write(&self, pending: &Pending, range: (Seq, Seq)) -> Result<(), IndexError> {
        let (first, last) = range;
        let mut batch = self.database.batch();
        let mut packer = Packer::default();

        // Each order's latest state of the commit: partitions are in date order and
        // rows in command order, so the last row of an order is its latest.
        let mut latest: FxHashMap<OrderId, &OrderRow> = FxHashMap::default();
        for rows in pending.order_events.values() {
            for row in rows {
                if let Some(order_id) = row.order_id {
                    latest.insert(order_id, row);
                }
            }
        }
        let mut placed: Vec<(OrderId, &OrderRow)> = Vec::with_capacity(latest.len());
        for (order_id, row) in latest {
            if order_id >= OrderId::of(first) {
                placed.push((order_id, row));
            } else {
                packer.clear();
                pack_order(row, &mut packer);
                batch.insert(
                    &self.order_updates,
                    order_id.0.to_be_bytes(),
                    packer.bytes.as_slice(),
                );
            }
        }
        placed.sort_unstable_by_key(|(order_id, _)| *order_id);
        for block in placed.chunks(BLOCK) {
            packer.clear();
            block.iter().for_each(|(_, row)| pack_order(row, &mut packer));
            let first = block[0].0;
            batch.insert(&self.order_blocks, first.0.to_be_bytes(), packer.bytes.as_slice());
        }

        let mut trades: Vec<&TradeRow> = pending.trades.values().flatten().collect();
        trades.sort_unstable_by_key(|row| (row.seq, row.trade_index));
        let mut fills: FxHashMap<&str, Vec<u8>> = FxHashMap::default();
        for block in trades.chunks(BLOCK) {
            packer.clear();
            for row in block {
                pack_trade(row, &mut packer);
                let maker = fills.entry(row.maker_account.as_str()).or_default();
                pack_fill(row.seq, row.trade_index, false, maker);
                let taker = fills.entry(row.taker_account.as_str()).or_default();
                pack_fill(row.seq, row.trade_index, true, taker);
            }
            let key = trade_key(block[0].seq, block[0].trade_index);
            batch.insert(&self.trade_blocks, key, packer.bytes.as_slice());
        }
        for (account, packed) in &fills {
            for (number, chunk) in packed.chunks(CHUNK * FILL_BYTES).enumerate() {
                let mut key = account_prefix(account);
                key.extend_from_slice(&first.0.to_be_bytes());
                key.extend_from_slice(&(number as u32).to_be_bytes());
                batch.insert(&self.fill_chunks, key, chunk);
            }
        }

        let mut in_flight = [0u8; 16];
        in_flight[..8].copy_from_slice(&first.0.to_be_bytes());
        in_flight[8..].copy_from_slice(&last.0.to_be_bytes());
        batch.insert(&self.meta, IN_FLIGHT, in_flight);
        batch.commit()?;
        self.database.persist(PersistMode::SyncAll)?;
        Ok(())
    }

    /// The range of the last commit that wrote the index (whether or not its
    /// checkpoint followed).
    pub fn in_flight(&self) -> Result<Option<(Seq, Seq)>, IndexError> {
        let Some(value) = self.meta.get(IN_FLIGHT)? else { return Ok(None) };
        let first = value.get(..8).and_then(|bytes| bytes.try_into().ok());
        let last = value.get(8..16).and_then(|bytes| bytes.try_into().ok());
        match (first, last) {
            (Some(first), Some(last)) => {
                Ok(Some((Seq(u64::from_be_bytes(first)), Seq(u64::from_be_bytes(last)))))
            }
            _ => Err(IndexError(format!("in_flight has {} bytes", value.len()))),
        }
    }

    /// The latest state of order `order_id` the history holds.
    pub fn order(&self, order_id: OrderId) -> Result<Option<Value>, IndexError> {
        let key = order_id.0.to_be_bytes();
        if let Some(value) = self.order_updates.get(key)? {
            return Ok(Some(unpack_order(&mut Unpacker::new(&value))?.json()));
        }
        let Some(guard) = self.order_blocks.range(..=key).next_back() else {
            return Ok(None);
        };
        let value = guard.value()?;
        let mut input = Unpacker::new(&value);
        while !input.is_empty() {
            let order = unpack_order(&mut input)?;
            if order.order_id == Some(order_id) {
                return Ok(Some(order.json()));
            }
        }
        Ok(None)
    }

    /// Trade `seq-trade_index`.
    pub fn trade(&self, seq: Seq, trade_index: u32) -> Result<Option<Value>, IndexError> {
        let wanted = trade_key(seq, trade_index);
        let Some(guard) = self.trade_blocks.range(..=wanted).next_back() else {
            return Ok(None);
        };
        let value = guard.value()?;
        let mut input = Unpacker::new(&value);
        while !input.is_empty() {
            let trade = unpack_trade(&mut input)?;
            if (trade.seq, trade.trade_index) == (seq, trade_index) {
                return Ok(Some(trade.json()));
            }
        }
        Ok(None)
    }

    /// The account's most recent fills, newest first, at most `limit`: each its side
    /// of the trade (`side`, `liquidity`, its order, its fee).
    pub fn recent_fills(&self, account: &str, limit: usize) -> Result<Vec<Value>, IndexError> {
        let prefix = account_prefix(account);
        let mut fills = Vec::new();
        for guard in self.fill_chunks.prefix(&prefix).rev() {
            if fills.len() >= limit {
                break;
            }
            let chunk = guard.value()?;
            if chunk.len() % FILL_BYTES != 0 {
                return Err(IndexError(format!("a fill chunk of {} bytes", chunk.len())));
            }
            for packed in chunk.chunks(FILL_BYTES).rev() {
                if fills.len() >= limit {
                    break;
                }
                let Some((seq, trade_index, taker)) = unpack_fill(packed) else { continue };
                let Some(trade) = self.trade(seq, trade_index)? else {
                    return Err(IndexError(format!("fill {seq}-{trade_index} without its trade")));
                };
                fills.push(fill_view(&trade, taker));
            }
        }
        Ok(fills)
    }
}

#[cfg(test)]
mod tests {
    use super::decimal_text;

    #[test]
    fn decimals_print_exactly_without_trailing_zeros() {
        assert_eq!(decimal_text(12_500_000_000_000_000_000), "12.5");
        assert_eq!(decimal_text(-1_000_000_000_000_000), "-0.001");
        assert_eq!(decimal_text(0), "0");
        assert_eq!(decimal_text(1), "0.000000000000000001");
        assert_eq!(decimal_text(i128::MAX), "170141183460469231731.687303715884105727");
    }
}
