//! Lookups by id in milliseconds however long the history: an order's latest state by
//! its id, a trade by its id, an account's most recent fills. Kept in an embedded
//! key-value store (fjall, a pure-Rust LSM tree) beside the Parquet files, written
//! from the same rows at each commit. Writing a key again with the same value is
//! harmless, so replaying commands after a crash keeps it exact.
//!
//! Keys: `orders`: the order id (8 bytes, big-endian); `trades`: seq then trade index
//! (8 + 4); `fills`: the account name's length (2), the name, seq, trade index and 0
//! for the maker's side or 1 for the taker's, so an account's fills are one prefix,
//! newest last. Values are the rows as JSON objects, as the API returns them.

use std::path::Path;

use fjall::{Database, Keyspace, KeyspaceCreateOptions, PersistMode};
use serde::Serialize;
use serde_json::Value;

use crate::derive::Pending;
use crate::rows::{OrderRow, TradeRow, SCALE};

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

#[derive(Clone)]
pub struct Index {
    database: Database,
    orders: Keyspace,
    trades: Keyspace,
    fills: Keyspace,
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

/// An order's state as the lookups return it.
#[derive(Serialize)]
struct OrderView<'a> {
    order_id: Option<u64>,
    seq: u64,
    ts: u64,
    account: &'a str,
    client_order_id: &'a str,
    symbol: &'a str,
    side: &'a str,
    #[serde(rename = "type")]
    kind: &'a str,
    time_in_force: &'a str,
    post_only: bool,
    price: Option<String>,
    qty: String,
    filled: String,
    remaining: String,
    status: &'a str,
    change: &'a str,
}

pub fn order_json(row: &OrderRow) -> String {
    let view = OrderView {
        order_id: row.order_id,
        seq: row.seq,
        ts: row.ts,
        account: &row.account,
        client_order_id: &row.client_order_id,
        symbol: &row.symbol,
        side: row.side,
        kind: row.kind,
        time_in_force: row.time_in_force,
        post_only: row.post_only,
        price: row.price.map(decimal_text),
        qty: decimal_text(row.qty),
        filled: decimal_text(row.filled),
        remaining: decimal_text(row.remaining),
        status: row.status,
        change: row.change,
    };
    serde_json::to_string(&view).unwrap_or_default()
}

/// A trade as the lookups return it.
#[derive(Serialize)]
struct TradeView<'a> {
    trade_id: String,
    seq: u64,
    trade_index: u32,
    ts: u64,
    symbol: &'a str,
    price: String,
    qty: String,
    notional: String,
    taker_side: &'a str,
    maker_order_id: Option<u64>,
    taker_order_id: Option<u64>,
    maker_account: &'a str,
    taker_account: &'a str,
    maker_client_order_id: &'a str,
    taker_client_order_id: &'a str,
    maker_fee: String,
    maker_fee_asset: &'a str,
    taker_fee: String,
    taker_fee_asset: &'a str,
}

pub fn trade_json(row: &TradeRow) -> String {
    let view = TradeView {
        trade_id: row.trade_id(),
        seq: row.seq,
        trade_index: row.trade_index,
        ts: row.ts,
        symbol: &row.symbol,
        price: decimal_text(row.price),
        qty: decimal_text(row.qty),
        notional: decimal_text(row.notional),
        taker_side: row.taker_side,
        maker_order_id: row.maker_order_id,
        taker_order_id: row.taker_order_id,
        maker_account: &row.maker_account,
        taker_account: &row.taker_account,
        maker_client_order_id: &row.maker_client_order_id,
        taker_client_order_id: &row.taker_client_order_id,
        maker_fee: decimal_text(row.maker_fee),
        maker_fee_asset: &row.maker_fee_asset,
        taker_fee: decimal_text(row.taker_fee),
        taker_fee_asset: &row.taker_fee_asset,
    };
    serde_json::to_string(&view).unwrap_or_default()
}

/// One account's side of a trade, from the trade as stored.
fn fill_view(trade: &Value, taker: bool) -> Value {
    let role = if taker { "taker" } else { "maker" };
    let taker_side = trade["taker_side"].as_str().unwrap_or("buy");
    let side = match (taker_side, taker) {
        ("buy", true) | ("sell", false) => "buy",
        _ => "sell",
    };
    serde_json::json!({
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

fn trade_key(seq: u64, trade_index: u32) -> [u8; 12] {
    let mut key = [0u8; 12];
    key[..8].copy_from_slice(&seq.to_be_bytes());
    key[8..].copy_from_slice(&trade_index.to_be_bytes());
    key
}

fn account_prefix(account: &str) -> Vec<u8> {
    let name = &account.as_bytes()[..account.len().min(u16::MAX as usize)];
    let mut key = Vec::with_capacity(2 + name.len() + 13);
    key.extend_from_slice(&(name.len() as u16).to_be_bytes());
    key.extend_from_slice(name);
    key
}

fn fill_key(account: &str, seq: u64, trade_index: u32, taker: bool) -> Vec<u8> {
    let mut key = account_prefix(account);
    key.extend_from_slice(&trade_key(seq, trade_index));
    key.push(u8::from(taker));
    key
}

impl Index {
    /// Opens (or makes) the index in `dir`: once per process, then cloned.
    pub fn open(dir: &Path) -> Result<Index, IndexError> {
        let database = Database::builder(dir).manual_journal_persist(true).open()?;
        let orders = database.keyspace("orders", KeyspaceCreateOptions::default)?;
        let trades = database.keyspace("trades", KeyspaceCreateOptions::default)?;
        let fills = database.keyspace("fills", KeyspaceCreateOptions::default)?;
        Ok(Index { database, orders, trades, fills })
    }

    /// Writes the lookups of `pending`'s rows and makes them durable.
    pub fn write(&self, pending: &Pending) -> Result<(), IndexError> {
        let mut batch = self.database.batch();
        // Only each order's latest state of the commit: partitions are in date order and
        // rows in command order, so the last row of an order is its latest.
        let mut latest: rustc_hash::FxHashMap<u64, &OrderRow> = rustc_hash::FxHashMap::default();
        for rows in pending.order_events.values() {
            for row in rows {
                if let Some(order_id) = row.order_id {
                    latest.insert(order_id, row);
                }
            }
        }
        for (order_id, row) in latest {
            batch.insert(&self.orders, order_id.to_be_bytes(), order_json(row));
        }
        for rows in pending.trades.values() {
            for row in rows {
                batch.insert(&self.trades, trade_key(row.seq, row.trade_index), trade_json(row));
                // A fill is its key alone: the trade's value has the rest.
                let maker = fill_key(&row.maker_account, row.seq, row.trade_index, false);
                batch.insert(&self.fills, maker, []);
                let taker = fill_key(&row.taker_account, row.seq, row.trade_index, true);
                batch.insert(&self.fills, taker, []);
            }
        }
        batch.commit()?;
        self.database.persist(PersistMode::SyncAll)?;
        Ok(())
    }

    /// The latest state of order `order_id` the history holds.
    pub fn order(&self, order_id: u64) -> Result<Option<Value>, IndexError> {
        self.get(&self.orders, &order_id.to_be_bytes())
    }

    /// Trade `seq-trade_index`.
    pub fn trade(&self, seq: u64, trade_index: u32) -> Result<Option<Value>, IndexError> {
        self.get(&self.trades, &trade_key(seq, trade_index))
    }

    /// The account's most recent fills, newest first, at most `limit`: each its side
    /// of the trade (`side`, `liquidity`, its order, its fee).
    pub fn recent_fills(&self, account: &str, limit: usize) -> Result<Vec<Value>, IndexError> {
        let prefix = account_prefix(account);
        let mut fills = Vec::new();
        for guard in self.fills.prefix(&prefix).rev().take(limit) {
            let key = guard.key()?;
            let Some(rest) = key.get(prefix.len()..) else { continue };
            if rest.len() != 13 {
                return Err(IndexError(format!("a fill key of {} bytes", key.len())));
            }
            let seq = u64::from_be_bytes(rest[..8].try_into().unwrap_or_default());
            let trade_index = u32::from_be_bytes(rest[8..12].try_into().unwrap_or_default());
            let taker = rest[12] == 1;
            let Some(trade) = self.trade(seq, trade_index)? else {
                return Err(IndexError(format!("fill {seq}-{trade_index} without its trade")));
            };
            fills.push(fill_view(&trade, taker));
        }
        Ok(fills)
    }

    fn get(&self, keyspace: &Keyspace, key: &[u8]) -> Result<Option<Value>, IndexError> {
        match keyspace.get(key)? {
            Some(value) => Ok(Some(parse(&value)?)),
            None => Ok(None),
        }
    }
}

fn parse(bytes: &[u8]) -> Result<Value, IndexError> {
    serde_json::from_slice(bytes)
        .map_err(|error| IndexError(format!("a stored value does not parse: {error}")))
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
