//! Engine values as the JSON the gateways send: names instead of ids, decimal strings
//! instead of units. Prices and quantities stay exact: they are printed from integers,
//! never through a float.

use std::sync::Arc;

use bourse_core::venue::{Fill, OrderRecord};
use bourse_core::{OrderId, Seq, Side, StpMode, TimeInForce, TimestampNs};
use serde_json::{json, Value};

use crate::link::AssetBalance;
use crate::reference::{decimal, InstrumentInfo, Reference, Terms};

/// An instrument's definition as `GET /v1/instruments` shows it: `kind` says which
/// (`spot` or `future`), and each kind has its own terms.
pub fn instrument_json(info: &InstrumentInfo) -> Value {
    let mut json = json!({
        "symbol": info.symbol,
        "kind": info.kind(),
        "tick": info.price(info.tick),
        "lot": info.qty(info.lot),
        "min_qty": decimal(info.min_qty, info.qty_decimals),
        "max_qty": decimal(info.max_qty, info.qty_decimals),
        "market_band_bps": info.market_band_bps,
    });
    let terms = match &info.terms {
        Terms::Spot { base, quote, maker_fee_bps, taker_fee_bps, .. } => json!({
            "base": base, "quote": quote,
            "maker_fee_bps": maker_fee_bps, "taker_fee_bps": taker_fee_bps,
        }),
        Terms::Future { settle, multiplier, maker_fee, taker_fee, close_today, .. } => json!({
            "settle": settle, "multiplier": multiplier,
            "maker_fee": maker_fee, "taker_fee": taker_fee, "close_today": close_today,
        }),
    };
    if let (Value::Object(json), Value::Object(terms)) = (&mut json, terms) {
        json.extend(terms);
    }
    json
}

pub fn time_in_force_code(time_in_force: TimeInForce) -> &'static str {
    match time_in_force {
        TimeInForce::GoodTillCancel => "gtc",
        TimeInForce::ImmediateOrCancel => "ioc",
        TimeInForce::FillOrKill => "fok",
        TimeInForce::GoodForDay => "gfd",
    }
}

pub fn stp_code(stp: StpMode) -> &'static str {
    stp.as_str()
}

/// An order as REST and WebSocket show it (fields in the order JSON objects list
/// them: by name).
#[derive(serde::Serialize)]
pub struct OrderView<'a> {
    client_order_id: &'a str,
    created_ns: TimestampNs,
    filled: String,
    order_id: OrderId,
    post_only: bool,
    price: Option<String>,
    qty: String,
    /// A spend-amount buy's amount to spend (`orders.md`); absent for every other order.
    #[serde(skip_serializing_if = "Option::is_none")]
    quote_qty: Option<String>,
    remaining: String,
    side: &'static str,
    status: &'static str,
    stp: &'static str,
    symbol: &'a str,
    time_in_force: &'static str,
    #[serde(rename = "type")]
    kind: &'static str,
    updated_ns: TimestampNs,
}

impl<'a> OrderView<'a> {
    /// `None` for an instrument the reference data does not know.
    pub fn of(reference: &'a Reference, order: &'a OrderRecord) -> Option<OrderView<'a>> {
        let info = reference.instrument(order.instrument)?;
        Some(OrderView {
            client_order_id: order.client_id.as_str(),
            created_ns: order.created_ns,
            filled: info.qty(order.filled.0),
            order_id: order.order_id,
            post_only: order.post_only,
            price: order.price.map(|price| info.price(price.0)),
            qty: info.qty(order.qty.0),
            quote_qty: order
                .quote_qty
                .zip(info.quote_decimals())
                .map(|(amount, decimals)| decimal(i128::from(amount.0), decimals)),
            remaining: info.qty(order.remaining.0),
            side: order.side.as_str(),
            status: order.status.code(),
            stp: stp_code(order.stp),
            symbol: &info.symbol,
            time_in_force: time_in_force_code(order.time_in_force),
            kind: order.kind.code(),
            updated_ns: order.updated_ns,
        })
    }
}

/// A fill as REST and WebSocket show it (fields by name).
#[derive(serde::Serialize)]
pub struct FillView<'a> {
    client_order_id: &'a str,
    fee: Option<String>,
    fee_asset: Option<&'a str>,
    liquidity: &'static str,
    order_id: OrderId,
    price: String,
    qty: String,
    seq: Seq,
    side: &'static str,
    symbol: &'a str,
    trade_id: String,
    ts_ns: TimestampNs,
}

impl<'a> FillView<'a> {
    /// `None` for an instrument the reference data does not know.
    pub fn of(reference: &'a Reference, fill: &'a Fill) -> Option<FillView<'a>> {
        let info = reference.instrument(fill.instrument)?;
        let fee_asset = reference.asset(fill.fee_asset);
        Some(FillView {
            client_order_id: fill.client_id.as_str(),
            fee: fee_asset.map(|(_, decimals)| decimal(i128::from(fill.fee.0), *decimals)),
            fee_asset: fee_asset.map(|(name, _)| name.as_str()),
            liquidity: fill.liquidity.code(),
            order_id: fill.order_id,
            price: info.price(fill.price.0),
            qty: info.qty(fill.qty.0),
            seq: fill.seq,
            side: fill.side.as_str(),
            symbol: &info.symbol,
            trade_id: format!("{}-{}", fill.seq, fill.trade_index),
            ts_ns: fill.ts_ns,
        })
    }
}

pub fn order_json(reference: &Reference, order: &OrderRecord) -> Value {
    OrderView::of(reference, order).and_then(|view| serde_json::to_value(view).ok()).unwrap_or_else(
        || json!({ "order_id": order.order_id, "client_order_id": order.client_id.as_str() }),
    )
}

pub fn fill_json(reference: &Reference, fill: &Fill) -> Value {
    FillView::of(reference, fill)
        .and_then(|view| serde_json::to_value(view).ok())
        .unwrap_or_else(|| json!({ "seq": fill.seq, "trade_index": fill.trade_index }))
}

/// An order with the reference data it is printed with (an answer's, or the order a
/// reused client order id names).
#[derive(Clone, Debug)]
pub struct Shown {
    pub record: OrderRecord,
    pub reference: Arc<Reference>,
}

impl Shown {
    pub fn to_json(&self) -> Value {
        order_json(&self.reference, &self.record)
    }
}

/// An account's balances as `{asset: {available, held}}`.
pub fn balances_json(balances: &[AssetBalance]) -> Value {
    let mut shown = serde_json::Map::new();
    for balance in balances {
        shown.insert(
            balance.asset.clone(),
            json!({
                "available": decimal(i128::from(balance.available), balance.decimals),
                "held": decimal(i128::from(balance.held), balance.decimals),
            }),
        );
    }
    Value::Object(shown)
}

/// Depth levels per side a view shows, at most.
pub const DEPTH_LEVELS_MAX: usize = 1_000;

/// A price level: price and quantity in units, and the number of orders.
pub type Level = (i64, i64, u32);

/// The best `count` levels of one side of `book`.
pub fn top_levels(book: &bourse_core::book::OrderBook, side: Side, count: usize) -> Vec<Level> {
    book.top_levels(side, count)
        .into_iter()
        .map(|level| (level.price.0, level.total_qty.0, level.order_count))
        .collect()
}

/// Levels as `[[price, qty, orders], …]`.
pub fn levels_json(info: &InstrumentInfo, levels: &[Level]) -> Vec<Value> {
    levels
        .iter()
        .map(|(price, qty, count)| json!([info.price(*price), info.qty(*qty), count]))
        .collect()
}
