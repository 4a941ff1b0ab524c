//! The final state document of the replay format, and the state digest.
//!
//! The document lists balances (non-zero only), fee balances, every book in priority
//! order and the futures positions (non-empty sides only). The digest is a SHA-256 over a canonical binary encoding of the whole state
//! (definitions, time, balances, fees, net deposits and every open order with all its
//! attributes, books in priority order, futures positions), so two engines agree on it exactly when their
//! states are the same, however their memory is laid out.

use std::collections::BTreeMap;

use serde_json::{json, Map, Value};
use sha2::{Digest, Sha256};

use crate::command::{PositionSide, Side};
use crate::exchange::{Exchange, Instrument};
use crate::format::print::write_units;
use crate::futures::{PositionEntry, Positions};
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
    json!({ "balances": balances, "fees": fees, "books": books, "positions": positions_document(exchange) })
}

/// `{account: {symbol: {"long": {"history": [[p, q]], "today": [[p, q], ...]}, ...}}}`,
/// non-empty sides only.
fn positions_document(exchange: &Exchange) -> Value {
    let mut by_account: BTreeMap<String, Map<String, Value>> = BTreeMap::new();
    for (index, instrument) in exchange.instruments().iter().enumerate() {
        let Some(positions) = exchange.positions(InstrumentId(index as u32)) else { continue };
        let entry = |entry: PositionEntry| {
            json!([
                decimal_string(entry.price.0, instrument.price_decimals),
                decimal_string(entry.qty.0, instrument.qty_decimals)
            ])
        };
        for position in positions.all().iter().filter(|position| !position.is_empty()) {
            let mut sides = Map::new();
            for side in PositionSide::BOTH {
                let state = position.side(side);
                if state.is_empty() {
                    continue;
                }
                let history: Vec<Value> = (!state.history_qty.is_zero())
                    .then(|| {
                        entry(PositionEntry { price: state.history_price, qty: state.history_qty })
                    })
                    .into_iter()
                    .collect();
                let today: Vec<Value> = positions.today_entries(state).map(entry).collect();
                sides.insert(
                    side.as_str().to_string(),
                    json!({ "history": history, "today": today }),
                );
            }
            by_account
                .entry(exchange.account_name(position.account).to_string())
                .or_default()
                .insert(instrument.symbol.to_string(), Value::Object(sides));
        }
    }
    Value::Object(
        by_account
            .into_iter()
            .map(|(account, symbols)| (account, Value::Object(symbols)))
            .collect(),
    )
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
        hash_definition(&mut hasher, exchange, instrument);
        let book = exchange.book(InstrumentId(index as u32));
        let positions = exchange.positions(InstrumentId(index as u32));
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
                if positions.is_some() {
                    hasher.bytes(order.offset.as_str().as_bytes());
                    hasher.integer(i128::from(order.good_for_day));
                    let accepted_at = exchange.accepted_at(order.account, &order.id);
                    hasher.integer(i128::from(accepted_at.map_or(0, |seq| seq.0)));
                }
            }
        }
        if let Some(positions) = positions {
            hash_positions(&mut hasher, exchange, positions);
        }
    }
    // The day's deposits and withdrawals of settle assets, by account name and asset.
    let flows: BTreeMap<(&str, &str), _> = exchange
        .all_day_flows()
        .map(|((account, asset), flows)| {
            ((exchange.account_name(account), exchange.asset(asset).name.as_str()), flows)
        })
        .collect();
    if !flows.is_empty() {
        hasher.bytes(b"day-flows");
        hasher.integer(flows.len() as i128);
        for ((account, asset), flows) in flows {
            hasher.bytes(account.as_bytes());
            hasher.bytes(asset.as_bytes());
            hasher.integer(i128::from(flows.deposited.0));
            hasher.integer(i128::from(flows.withdrawn.0));
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

/// An instrument's definition. A futures contract's opens with an empty name where a
/// spot instrument's has its base asset (never empty), so the two never encode alike.
fn hash_definition(hasher: &mut CanonicalHasher, exchange: &Exchange, instrument: &Instrument) {
    hasher.bytes(instrument.symbol.as_bytes());
    let common = [
        i128::from(instrument.price_decimals),
        i128::from(instrument.qty_decimals),
        i128::from(instrument.tick.0),
        i128::from(instrument.lot.0),
        instrument.min_qty,
        instrument.max_qty,
    ];
    if let Some(rules) = instrument.spot() {
        hasher.bytes(exchange.asset(rules.base).name.as_bytes());
        hasher.bytes(exchange.asset(rules.quote).name.as_bytes());
        for value in common {
            hasher.integer(value);
        }
        hasher.integer(i128::from(rules.maker_fee_bps));
        hasher.integer(i128::from(rules.taker_fee_bps));
        hasher.integer(i128::from(instrument.market_band_bps));
    }
    if let Some(rules) = instrument.future() {
        hasher.bytes(b"");
        hasher.bytes(exchange.asset(rules.settle).name.as_bytes());
        for value in common {
            hasher.integer(value);
        }
        for value in [
            i128::from(rules.multiplier),
            i128::from(rules.multiplier_decimals),
            i128::from(rules.margin.0),
            i128::from(rules.maker_fee.0),
            i128::from(rules.taker_fee.0),
            i128::from(rules.close_today),
            i128::from(instrument.market_band_bps),
            i128::from(instrument.expired),
        ] {
            hasher.integer(value);
        }
    }
}

/// A futures contract's positions, by account name, both sides with every entry.
fn hash_positions(hasher: &mut CanonicalHasher, exchange: &Exchange, positions: &Positions) {
    let held: BTreeMap<&str, usize> = positions
        .all()
        .iter()
        .enumerate()
        .filter(|(_, position)| !position.is_idle())
        .map(|(index, position)| (exchange.account_name(position.account), index))
        .collect();
    hasher.integer(i128::from(positions.mark_price().map_or(0, |price| price.0)));
    hasher.integer(i128::from(positions.settlement_price().map_or(0, |price| price.0)));
    hasher.integer(held.len() as i128);
    for (name, index) in held {
        hasher.bytes(name.as_bytes());
        let position = &positions.all()[index];
        hasher.integer(i128::from(position.realised_today.0));
        hasher.integer(i128::from(position.fees_today.0));
        for side in PositionSide::BOTH {
            let state = position.side(side);
            hasher.integer(i128::from(state.history_price.0));
            hasher.integer(i128::from(state.history_qty.0));
            hasher.integer(state.open_cost);
            let today: Vec<PositionEntry> = positions.today_entries(state).collect();
            hasher.integer(today.len() as i128);
            for entry in today {
                hasher.integer(i128::from(entry.price.0));
                hasher.integer(i128::from(entry.qty.0));
            }
        }
    }
}
