//! Engine values as the JSON the gateways send: names instead of ids, decimal strings
//! instead of units. Prices and quantities stay exact: they are printed from integers,
//! never through a float.

use bourse_core::event::Event;
use bourse_core::exchange::Exchange;
use bourse_core::ids::{AccountId, AssetId, InstrumentId};
use bourse_core::venue::{Fill, Liquidity, OrderKind, OrderRecord, OrderStatus};
use bourse_core::{Decimal, DoneReason, Side, StpMode, TimeInForce};
use serde_json::{json, Value};

/// What the gateways need to print an instrument's numbers. Assets and instruments
/// never change once declared, so a copy taken once stays right.
#[derive(Clone, Debug)]
pub struct InstrumentInfo {
    pub symbol: String,
    pub base: String,
    pub quote: String,
    pub base_decimals: u32,
    pub quote_decimals: u32,
    pub price_decimals: u32,
    pub qty_decimals: u32,
    pub tick: i64,
    pub lot: i64,
    pub min_qty: i128,
    pub max_qty: i128,
    pub maker_fee_bps: i64,
    pub taker_fee_bps: i64,
    pub market_band_bps: i64,
}

#[derive(Clone, Debug, Default)]
pub struct Reference {
    pub assets: Vec<(String, u32)>,
    pub instruments: Vec<InstrumentInfo>,
}

impl Reference {
    pub fn read(exchange: &Exchange) -> Reference {
        let assets: Vec<(String, u32)> =
            exchange.assets().iter().map(|spec| (spec.name.to_string(), spec.decimals)).collect();
        let instruments = exchange
            .instruments()
            .iter()
            .map(|instrument| InstrumentInfo {
                symbol: instrument.symbol.to_string(),
                base: assets[instrument.spot.base.index()].0.clone(),
                quote: assets[instrument.spot.quote.index()].0.clone(),
                base_decimals: assets[instrument.spot.base.index()].1,
                quote_decimals: assets[instrument.spot.quote.index()].1,
                price_decimals: instrument.price_decimals,
                qty_decimals: instrument.qty_decimals,
                tick: instrument.tick.0,
                lot: instrument.lot.0,
                min_qty: instrument.min_qty,
                max_qty: instrument.max_qty,
                maker_fee_bps: instrument.spot.maker_fee_bps,
                taker_fee_bps: instrument.spot.taker_fee_bps,
                market_band_bps: instrument.market_band_bps,
            })
            .collect();
        Reference { assets, instruments }
    }

    pub fn instrument(&self, instrument: InstrumentId) -> Option<&InstrumentInfo> {
        self.instruments.get(instrument.index())
    }

    pub fn find_instrument(&self, symbol: &str) -> Option<(InstrumentId, &InstrumentInfo)> {
        self.instruments
            .iter()
            .position(|info| info.symbol == symbol)
            .map(|index| (InstrumentId(index as u32), &self.instruments[index]))
    }

    pub fn asset(&self, asset: AssetId) -> Option<&(String, u32)> {
        self.assets.get(asset.index())
    }
}

pub fn decimal(units: i128, scale: u32) -> String {
    Decimal::from_units(units, scale).to_string()
}

impl InstrumentInfo {
    pub fn price(&self, units: i64) -> String {
        decimal(i128::from(units), self.price_decimals)
    }

    pub fn qty(&self, units: i64) -> String {
        decimal(i128::from(units), self.qty_decimals)
    }

    pub fn to_json(&self) -> Value {
        json!({
            "symbol": self.symbol,
            "base": self.base,
            "quote": self.quote,
            "tick": self.price(self.tick),
            "lot": self.qty(self.lot),
            "min_qty": decimal(self.min_qty, self.qty_decimals),
            "max_qty": decimal(self.max_qty, self.qty_decimals),
            "maker_fee_bps": self.maker_fee_bps,
            "taker_fee_bps": self.taker_fee_bps,
            "market_band_bps": self.market_band_bps,
        })
    }
}

pub fn time_in_force_code(time_in_force: TimeInForce) -> &'static str {
    match time_in_force {
        TimeInForce::GoodTillCancel => "gtc",
        TimeInForce::ImmediateOrCancel => "ioc",
        TimeInForce::FillOrKill => "fok",
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
    created_ns: u64,
    filled: String,
    order_id: u64,
    post_only: bool,
    price: Option<String>,
    qty: String,
    remaining: String,
    side: &'static str,
    status: &'static str,
    stp: &'static str,
    symbol: &'a str,
    time_in_force: &'static str,
    #[serde(rename = "type")]
    kind: &'static str,
    updated_ns: u64,
}

impl<'a> OrderView<'a> {
    /// `None` for an instrument the reference data does not know.
    pub fn of(reference: &'a Reference, order: &'a OrderRecord) -> Option<OrderView<'a>> {
        let info = reference.instrument(order.instrument)?;
        Some(OrderView {
            client_order_id: order.client_id.as_str(),
            created_ns: order.created_ns.0,
            filled: info.qty(order.filled.0),
            order_id: order.order_id.0,
            post_only: order.post_only,
            price: order.price.map(|price| info.price(price.0)),
            qty: info.qty(order.qty.0),
            remaining: info.qty(order.remaining.0),
            side: order.side.as_str(),
            status: order.status.code(),
            stp: stp_code(order.stp),
            symbol: &info.symbol,
            time_in_force: time_in_force_code(order.time_in_force),
            kind: order.kind.code(),
            updated_ns: order.updated_ns.0,
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
    order_id: u64,
    price: String,
    qty: String,
    seq: u64,
    side: &'static str,
    symbol: &'a str,
    trade_id: String,
    ts_ns: u64,
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
            order_id: fill.order_id.0,
            price: info.price(fill.price.0),
            qty: info.qty(fill.qty.0),
            seq: fill.seq.0,
            side: fill.side.as_str(),
            symbol: &info.symbol,
            trade_id: format!("{}-{}", fill.seq, fill.trade_index),
            ts_ns: fill.ts_ns.0,
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

/// What one accepted `order` command did to the new order, read from its events: the
/// order's record as it stands after the command, and its fills (all as the taker).
pub struct Placed {
    pub record: OrderRecord,
    pub fills: Vec<Fill>,
}

/// Builds `Placed` from the order as submitted (`record` with nothing filled yet) and
/// the command's events.
pub fn placed_from_events(
    reference: &Reference,
    mut record: OrderRecord,
    events: &[Event],
) -> Placed {
    let mut fills = Vec::new();
    let mut taker: Option<AccountId> = None;
    let mut trade_index = 0u32;
    for event in events {
        match event {
            Event::Trade(trade) => {
                taker = Some(trade.taker_account);
                record.account = trade.taker_account;
                record.filled += trade.qty;
                let fee_asset = reference.instrument(trade.instrument).map(|info| {
                    let received =
                        if trade.taker_side == Side::Buy { &info.base } else { &info.quote };
                    reference.assets.iter().position(|(name, _)| name == received).unwrap_or(0)
                });
                fills.push(Fill {
                    seq: trade.seq,
                    trade_index,
                    order_id: record.order_id,
                    client_id: record.client_id.clone(),
                    instrument: trade.instrument,
                    side: trade.taker_side,
                    price: trade.price,
                    qty: trade.qty,
                    fee: trade.taker_fee,
                    fee_asset: AssetId(fee_asset.unwrap_or(0) as u32),
                    liquidity: Liquidity::Taker,
                    ts_ns: record.created_ns,
                });
                trade_index += 1;
            }
            Event::Done { account, id, reason, filled, .. }
                if *id == record.client_id && taker.is_none_or(|taker| taker == *account) =>
            {
                record.account = *account;
                record.filled = *filled;
                record.status = status_of(*reason);
            }
            _ => {}
        }
    }
    record.remaining = if record.status == OrderStatus::Open {
        record.qty - record.filled
    } else {
        bourse_core::Qty(0)
    };
    if record.kind == OrderKind::Market {
        record.price = None;
    }
    Placed { record, fills }
}

pub fn status_of(reason: DoneReason) -> OrderStatus {
    match reason {
        DoneReason::Filled => OrderStatus::Filled,
        DoneReason::Canceled => OrderStatus::Canceled,
        DoneReason::Expired => OrderStatus::Expired,
        DoneReason::SelfTradePrevented => OrderStatus::SelfTradePrevented,
    }
}
