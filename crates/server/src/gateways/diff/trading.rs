//! The trading part of a DIFF session's tree, `trade.<user>`: the account per settle
//! asset and the positions (from the futures view the hub sends, the same numbers
//! REST's `/v1/account` and `/v1/positions` show, as JSON numbers), the orders (from
//! the engine's records) and the trades (from the account's fills), named as DIFF and
//! QIFI name them. Pure rendering: what it is given, it turns into patches; it never
//! reads the engine and never decides anything about an order.

use bourse_core::{Offset, Side, TimeInForce};
use serde_json::{json, Map, Value};

use crate::port::queries::{OrderKind, OrderRecord, OrderStatus};
use crate::reference::{InstrumentInfo, Reference};
use crate::services::feed::channel::FillMessage;
use crate::services::feed::quote::{exchange_and_code, lots, number, price_number};

/// DIFF's direction of a side.
pub fn direction(side: Side) -> &'static str {
    match side {
        Side::Buy => "BUY",
        Side::Sell => "SELL",
    }
}

/// DIFF's offset.
pub fn offset_name(offset: Offset) -> &'static str {
    match offset {
        Offset::Open => "OPEN",
        Offset::Close => "CLOSE",
        Offset::CloseToday => "CLOSETODAY",
    }
}

/// An order record as DIFF's `orders.<order_id>` (the client order id).
pub fn order_json(info: &InstrumentInfo, record: &OrderRecord, user: &str) -> Value {
    let (exchange_id, instrument_id) = exchange_and_code(&info.symbol);
    let alive = record.status == OrderStatus::Open;
    let (price_type, limit_price) = match (record.kind, record.price) {
        (OrderKind::Limit, Some(price)) => ("LIMIT", price_number(info, price.0)),
        _ => ("ANY", Value::String("-".into())),
    };
    let (time_condition, volume_condition) = match record.time_in_force {
        TimeInForce::GoodTillCancel => ("GTC", "ANY"),
        TimeInForce::GoodForDay => ("GFD", "ANY"),
        TimeInForce::ImmediateOrCancel => ("IOC", "ANY"),
        TimeInForce::FillOrKill => ("IOC", "ALL"),
    };
    let last_msg = match record.status {
        OrderStatus::Open if record.filled.0 > 0 => "partially filled",
        OrderStatus::Open => "accepted",
        OrderStatus::Filled => "filled",
        OrderStatus::Canceled => "canceled",
        OrderStatus::Expired => "expired",
        OrderStatus::SelfTradePrevented => "canceled: self-trade prevention",
    };
    json!({
        "user_id": user,
        "order_id": record.client_id.as_str(),
        "exchange_order_id": record.order_id.0.to_string(),
        "exchange_id": exchange_id,
        "instrument_id": instrument_id,
        "direction": direction(record.side),
        "offset": offset_name(record.offset),
        "volume_orign": lots(info, i128::from(record.qty.0)),
        // (A finished order's remaining is zero; DIFF's volume_left is what did not
        // trade.)
        "volume_left": lots(info, i128::from(if alive { record.remaining.0 } else { record.qty.0 - record.filled.0 })),
        "price_type": price_type,
        "limit_price": limit_price,
        "volume_condition": volume_condition,
        "time_condition": time_condition,
        "insert_date_time": record.created_ns,
        "last_msg": last_msg,
        "status": if alive { "ALIVE" } else { "FINISHED" },
        "seqno": record.order_id.0,
    })
}

/// An order refused before it rested (by order entry or the engine): finished at
/// once, nothing traded, with why.
pub fn refused_order_json(
    user: &str,
    order_id: &str,
    exchange_id: &str,
    instrument_id: &str,
    volume: i64,
    why: &str,
) -> Value {
    json!({
        "user_id": user, "order_id": order_id, "exchange_order_id": "",
        "exchange_id": exchange_id, "instrument_id": instrument_id,
        "volume_orign": volume, "volume_left": volume,
        "status": "FINISHED", "last_msg": why,
    })
}

/// A fill as DIFF's `trades.<trade_id>`; `offset` is its order's (the session knows it
/// from the order's record).
pub fn trade_json(
    info: &InstrumentInfo,
    fill: &FillMessage,
    offset: &str,
    user: &str,
) -> (String, Value) {
    let (exchange_id, instrument_id) = exchange_and_code(&info.symbol);
    let trade_id =
        format!("{}-{}-{}", fill.trade_seq, fill.trade_index, if fill.maker { "m" } else { "t" });
    let trade = json!({
        "user_id": user,
        "order_id": fill.client_order_id.as_str(),
        "trade_id": trade_id,
        "exchange_trade_id": format!("{}-{}", fill.trade_seq, fill.trade_index),
        "exchange_id": exchange_id,
        "instrument_id": instrument_id,
        "direction": direction(fill.side),
        "offset": offset,
        "price": price_number(info, fill.price),
        "volume": lots(info, i128::from(fill.qty)),
        "trade_date_time": fill.ts_ns,
        "commission": fee_number(info, fill.fee),
        "seqno": fill.trade_seq,
    });
    (trade_id, trade)
}

fn fee_number(info: &InstrumentInfo, fee: i64) -> Value {
    let (_, decimals) = info.fee_asset(Side::Buy);
    number(crate::reference::decimal(i128::from(fee), decimals))
}

/// The futures view (`futures::view::futures_json`: decimal strings) as DIFF's
/// `accounts` and `positions`: numbers, volumes in lots, positions keyed by the full
/// symbol, and the fields tqsdk derives its own from (`pos_long_today`, ...).
pub fn accounts_and_positions(view: &Value, reference: &Reference, user: &str) -> Value {
    let mut accounts = Map::new();
    if let Some(shown) = view.get("accounts").and_then(Value::as_object) {
        for (currency, fields) in shown {
            let mut account = numbers(fields);
            account.insert("user_id".into(), json!(user));
            account.insert("currency".into(), json!(currency));
            for absent in ["premium", "frozen_premium", "market_value"] {
                account.insert(absent.into(), json!(0.0));
            }
            accounts.insert(currency.clone(), Value::Object(account));
        }
    }
    let mut positions = Map::new();
    if let Some(shown) = view.get("positions").and_then(Value::as_object) {
        for (symbol, fields) in shown {
            let Some((_, info)) = reference.find_instrument(symbol) else { continue };
            let mut position = numbers(fields);
            let (exchange_id, instrument_id) = exchange_and_code(symbol);
            position.insert("user_id".into(), json!(user));
            position.insert("exchange_id".into(), json!(exchange_id));
            position.insert("instrument_id".into(), json!(instrument_id));
            for (name, value) in fields.as_object().into_iter().flatten() {
                if name.starts_with("volume_") {
                    let units = value
                        .as_str()
                        .and_then(bourse_core::Decimal::parse)
                        .and_then(|decimal| decimal.to_units(info.qty_decimals))
                        .unwrap_or(0);
                    position.insert(name.clone(), json!(lots(info, units)));
                }
            }
            for (derived, from) in [
                ("pos_long_today", "volume_long_today"),
                ("pos_long_his", "volume_long_his"),
                ("pos_short_today", "volume_short_today"),
                ("pos_short_his", "volume_short_his"),
            ] {
                let value = position.get(from).cloned().unwrap_or(json!(0));
                position.insert(derived.into(), value);
            }
            positions.insert(symbol.clone(), Value::Object(position));
        }
    }
    json!({ "accounts": accounts, "positions": positions })
}

/// Positions sent before and no longer held stay, flat: DIFF clients keep the position
/// objects they were given and read their volumes going to zero (a removed one would
/// never change again). Their volumes and amounts become 0, their average prices
/// not-a-number (`"-"`, as an empty side's are); their names and last price stay.
pub fn keep_flat_positions(sent: &Value, now: &mut Value) {
    let Some(sent) = sent.get("positions").and_then(Value::as_object) else { return };
    let Some(held) = now.get_mut("positions").and_then(Value::as_object_mut) else { return };
    for (symbol, position) in sent {
        if held.contains_key(symbol) {
            continue;
        }
        let flat: Map<String, Value> = position
            .as_object()
            .into_iter()
            .flatten()
            .map(|(name, value)| {
                let value = match value {
                    // An empty side has no average price (as REST's null shows it).
                    _ if name.starts_with("open_price_") || name.starts_with("position_price_") => {
                        json!("-")
                    }
                    // The contract's price is still the contract's.
                    _ if name == "last_price" => value.clone(),
                    Value::Number(number) if number.is_i64() || number.is_u64() => json!(0),
                    Value::Number(_) => json!(0.0),
                    other => other.clone(),
                };
                (name.clone(), value)
            })
            .collect();
        held.insert(symbol.clone(), Value::Object(flat));
    }
}

/// Every decimal-string member of `fields` as a JSON number (`"-"` for a null: DIFF
/// clients read it as not-a-number); other members as they are.
fn numbers(fields: &Value) -> Map<String, Value> {
    let mut out = Map::new();
    for (name, value) in fields.as_object().into_iter().flatten() {
        let converted = match value {
            Value::String(text) if name != "instrument_id" && name != "exchange_id" => {
                number(text.clone())
            }
            Value::Null => Value::String("-".into()),
            other => other.clone(),
        };
        out.insert(name.clone(), converted);
    }
    out
}
