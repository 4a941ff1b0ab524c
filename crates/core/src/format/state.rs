//! The final state document of the replay format, and the state digest.
//!
//! The document lists balances (non-zero only), fee balances and every book in priority
//! order. The digest is a SHA-256 over a canonical binary encoding of the whole state
//! (definitions, time, balances, fees, net deposits and every open order with all its
//! attributes, books in priority order), so two engines agree on it exactly when their
//! states are the same, however their memory is laid out.

use std::collections::BTreeMap;

use serde_json::{json, Map, Value};
use sha2::{Digest, Sha256};

use crate::command::Side;
use crate::exchange::Exchange;
use crate::format::print::write_units;
use crate::ids::{AccountId, AssetId, InstrumentId};

fn decimal_string(units: i64, scale: u32) -> Value {
    let mut text = String::new();
    write_units(&mut text, units, scale);
    Value::String(text)
}

/// The replay format's final state as a JSON value (object keys sorted).
pub fn state_document(exchange: &Exchange) -> Value {
    let mut balances = Map::new();
    for (index, account) in exchange.ledger().accounts().iter().enumerate() {
        let mut by_asset = Map::new();
        for (asset, balance) in exchange.ledger().balances_of(AccountId(index as u32)) {
            let decimals = exchange.asset(asset).decimals;
            by_asset.insert(
                exchange.asset(asset).name.to_string(),
                json!({
                    "available": decimal_string(balance.available.0, decimals),
                    "held": decimal_string(balance.held.0, decimals),
                }),
            );
        }
        if !by_asset.is_empty() {
            balances.insert(account.name.to_string(), Value::Object(by_asset));
        }
    }
    let mut fees = Map::new();
    for (index, asset) in exchange.assets().iter().enumerate() {
        let fee = exchange.ledger().fee_balance(AssetId(index as u32));
        fees.insert(asset.name.to_string(), decimal_string(fee.0, asset.decimals));
    }
    let mut books = Map::new();
    for (index, instrument) in exchange.instruments().iter().enumerate() {
        let book = exchange.book(InstrumentId(index as u32));
        let side_orders = |side: Side| {
            let mut orders = Vec::new();
            book.for_each_order(side, |order| {
                orders.push(json!({
                    "account": exchange.account_name(order.account),
                    "id": order.id.as_str(),
                    "price": decimal_string(order.price.0, instrument.price_decimals),
                    "qty": decimal_string(order.remaining.0, instrument.qty_decimals),
                }));
            });
            Value::Array(orders)
        };
        books.insert(
            instrument.symbol.to_string(),
            json!({ "bids": side_orders(Side::Buy), "asks": side_orders(Side::Sell) }),
        );
    }
    json!({ "balances": balances, "fees": fees, "books": books })
}

/// Accumulates the canonical encoding: every field length-prefixed or fixed-width, so
/// no two different states encode alike.
struct CanonicalHasher(Sha256);

impl CanonicalHasher {
    fn bytes(&mut self, bytes: &[u8]) {
        self.0.update((bytes.len() as u64).to_le_bytes());
        self.0.update(bytes);
    }

    fn integer(&mut self, value: i128) {
        self.0.update(value.to_le_bytes());
    }
}

/// The state digest: `sha256:` and 64 hex digits.
pub fn state_digest(exchange: &Exchange) -> String {
    let mut hasher = CanonicalHasher(Sha256::new());
    hasher.bytes(b"bourse-state-v1");
    hasher.integer(i128::from(exchange.time_ns().0));
    hasher.integer(exchange.assets().len() as i128);
    for (index, asset) in exchange.assets().iter().enumerate() {
        let id = AssetId(index as u32);
        hasher.bytes(asset.name.as_bytes());
        hasher.integer(i128::from(asset.decimals));
        hasher.integer(i128::from(exchange.ledger().fee_balance(id).0));
        hasher.integer(i128::from(exchange.ledger().net_deposits(id).0));
    }
    // Accounts by name, so that the digest does not depend on creation order.
    let accounts: BTreeMap<&str, AccountId> = exchange
        .ledger()
        .accounts()
        .iter()
        .enumerate()
        .map(|(index, account)| (account.name.as_str(), AccountId(index as u32)))
        .collect();
    for (name, account) in accounts {
        let balances: Vec<_> = exchange.ledger().balances_of(account).collect();
        if balances.is_empty() {
            continue;
        }
        hasher.bytes(name.as_bytes());
        hasher.integer(balances.len() as i128);
        for (asset, balance) in balances {
            hasher.bytes(exchange.asset(asset).name.as_bytes());
            hasher.integer(i128::from(balance.available.0));
            hasher.integer(i128::from(balance.held.0));
        }
    }
    hasher.integer(exchange.instruments().len() as i128);
    for (index, instrument) in exchange.instruments().iter().enumerate() {
        hasher.bytes(instrument.symbol.as_bytes());
        hasher.bytes(exchange.asset(instrument.spot.base).name.as_bytes());
        hasher.bytes(exchange.asset(instrument.spot.quote).name.as_bytes());
        for value in [
            i128::from(instrument.price_decimals),
            i128::from(instrument.qty_decimals),
            i128::from(instrument.tick.0),
            i128::from(instrument.lot.0),
            instrument.min_qty,
            instrument.max_qty,
            i128::from(instrument.spot.maker_fee_bps),
            i128::from(instrument.spot.taker_fee_bps),
            i128::from(instrument.market_band_bps),
        ] {
            hasher.integer(value);
        }
        let book = exchange.book(InstrumentId(index as u32));
        for side in [Side::Buy, Side::Sell] {
            let mut orders = Vec::new();
            book.for_each_order(side, |order| orders.push(order));
            hasher.integer(orders.len() as i128);
            for order in orders {
                hasher.bytes(exchange.account_name(order.account).as_bytes());
                hasher.bytes(order.id.as_bytes());
                hasher.integer(i128::from(order.price.0));
                hasher.integer(i128::from(order.remaining.0));
                hasher.integer(i128::from(order.filled.0));
                hasher.bytes(order.stp.as_str().as_bytes());
                hasher.integer(i128::from(order.post_only));
            }
        }
    }
    let digest = hasher.0.finalize();
    let mut text = String::with_capacity(7 + 64);
    text.push_str("sha256:");
    for byte in digest.iter() {
        text.push_str(&format!("{byte:02x}"));
    }
    text
}
