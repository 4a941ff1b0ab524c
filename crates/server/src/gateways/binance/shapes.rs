//! Bourse's values in Binance's shapes: symbols without a separator, orders, fills,
//! trades and instruments as `/api/v3/` shows them. Numbers stay exact decimal strings
//! printed from integers; only the names and the layout are Binance's.

use bourse_core::ids::Seq;
use bourse_core::{Side, StpMode, TimeInForce};
use serde_json::{json, Map, Value};

use crate::port::queries::{Fill, Liquidity, OrderKind, OrderRecord, OrderStatus};
use crate::reference::{decimal, InstrumentInfo, Reference, Terms};

/// Trades one command may make and still have a numeric trade id of its own (ids are
/// `seq * TRADES_PER_COMMAND + index`); a command's trades beyond this share ids.
pub const TRADES_PER_COMMAND: u64 = 1_000_000;

/// The symbol Binance's clients use for a spot instrument: Bourse's without its dashes
/// (`BTCUSD` for `BTC-USD`). Futures contracts have none (they are not listed).
pub fn binance_symbol(info: &InstrumentInfo) -> Option<String> {
    match &info.terms {
        Terms::Spot { .. } => Some(info.symbol.replace('-', "")),
        Terms::Future { .. } => None,
    }
}

/// The spot instrument whose Binance symbol is `symbol` (the first declared, should
/// two symbols differ only in their dashes).
pub fn find_spot<'r>(
    reference: &'r Reference,
    symbol: &str,
) -> Option<(bourse_core::ids::InstrumentId, &'r InstrumentInfo)> {
    reference.instruments.iter().enumerate().find_map(|(index, info)| {
        let same = matches!(info.terms, Terms::Spot { .. })
            && info.symbol.len() >= symbol.len()
            && info.symbol.bytes().filter(|byte| *byte != b'-').eq(symbol.bytes());
        same.then_some((bourse_core::ids::InstrumentId(index as u32), info))
    })
}

/// A trade's numeric id (Binance's are numbers): its command's seq and its index
/// among that command's trades.
pub fn trade_id(seq: Seq, index: u32) -> u64 {
    seq.0.saturating_mul(TRADES_PER_COMMAND).saturating_add(u64::from(index))
}

/// A trade id of the feed's recent trades (`"seq-index"`) as a number.
pub fn trade_id_of_text(text: &str) -> Option<u64> {
    let (seq, index) = text.split_once('-')?;
    Some(trade_id(Seq(seq.parse().ok()?), index.parse().ok()?))
}

pub fn ms(ns: u64) -> u64 {
    ns / 1_000_000
}

/// A notional (price units times quantity units) as a decimal in the quote asset.
pub fn notional(info: &InstrumentInfo, units: i128) -> String {
    decimal(units, info.price_decimals + info.qty_decimals)
}

/// An instrument as `exchangeInfo` lists it.
pub fn symbol_info(info: &InstrumentInfo, halted: bool) -> Option<Value> {
    let Terms::Spot { base, quote, base_decimals, quote_decimals, .. } = &info.terms else {
        return None;
    };
    let tick = info.price(info.tick);
    let min_qty = decimal(info.min_qty, info.qty_decimals);
    let max_qty = decimal(info.max_qty, info.qty_decimals);
    let lot = info.qty(info.lot);
    Some(json!({
        "symbol": binance_symbol(info)?,
        "status": if halted { "HALT" } else { "TRADING" },
        "baseAsset": base,
        "baseAssetPrecision": base_decimals,
        "quoteAsset": quote,
        "quotePrecision": quote_decimals,
        "quoteAssetPrecision": quote_decimals,
        "baseCommissionPrecision": base_decimals,
        "quoteCommissionPrecision": quote_decimals,
        "orderTypes": ["LIMIT", "LIMIT_MAKER", "MARKET"],
        "icebergAllowed": false,
        "ocoAllowed": false,
        "otoAllowed": false,
        "quoteOrderQtyMarketAllowed": true,
        "allowTrailingStop": false,
        "cancelReplaceAllowed": false,
        "amendAllowed": false,
        "isSpotTradingAllowed": true,
        "isMarginTradingAllowed": false,
        "filters": [
            { "filterType": "PRICE_FILTER", "minPrice": tick, "maxPrice": "0", "tickSize": tick },
            { "filterType": "LOT_SIZE", "minQty": min_qty, "maxQty": max_qty, "stepSize": lot },
            { "filterType": "MARKET_LOT_SIZE", "minQty": min_qty, "maxQty": max_qty, "stepSize": lot },
            { "filterType": "NOTIONAL", "minNotional": "0", "applyMinToMarket": false },
        ],
        "permissions": [],
        "permissionSets": [["SPOT"]],
        "defaultSelfTradePreventionMode": "EXPIRE_TAKER",
        "allowedSelfTradePreventionModes": ["NONE", "EXPIRE_TAKER", "EXPIRE_MAKER", "EXPIRE_BOTH"],
    }))
}

pub fn side_code(side: Side) -> &'static str {
    match side {
        Side::Buy => "BUY",
        Side::Sell => "SELL",
    }
}

pub fn stp_code(stp: StpMode) -> &'static str {
    match stp {
        StpMode::CancelTaker => "EXPIRE_TAKER",
        StpMode::CancelMaker => "EXPIRE_MAKER",
        StpMode::CancelBoth => "EXPIRE_BOTH",
        StpMode::None => "NONE",
    }
}

fn status_code(record: &OrderRecord) -> &'static str {
    match record.status {
        OrderStatus::Open if record.filled.0 == 0 => "NEW",
        OrderStatus::Open => "PARTIALLY_FILLED",
        OrderStatus::Filled => "FILLED",
        OrderStatus::Canceled => "CANCELED",
        OrderStatus::Expired => "EXPIRED",
        OrderStatus::SelfTradePrevented => "EXPIRED_IN_MATCH",
    }
}

fn type_code(record: &OrderRecord) -> &'static str {
    match (record.kind, record.post_only) {
        (OrderKind::Market, _) => "MARKET",
        (OrderKind::Limit, true) => "LIMIT_MAKER",
        (OrderKind::Limit, false) => "LIMIT",
    }
}

fn time_in_force_code(time_in_force: TimeInForce) -> &'static str {
    match time_in_force {
        // A day order on spot is good till canceled (spot is never settled).
        TimeInForce::GoodTillCancel | TimeInForce::GoodForDay => "GTC",
        TimeInForce::ImmediateOrCancel => "IOC",
        TimeInForce::FillOrKill => "FOK",
    }
}

/// An order as `GET /api/v3/order` shows it.
pub fn order_json(
    info: &InstrumentInfo,
    record: &OrderRecord,
    notional_units: Option<i128>,
) -> Map<String, Value> {
    let mut order = Map::new();
    let mut put = |name: &str, value: Value| {
        order.insert(name.to_string(), value);
    };
    put("symbol", json!(binance_symbol(info).unwrap_or_else(|| info.symbol.clone())));
    put("orderId", json!(record.order_id.0));
    put("orderListId", json!(-1));
    put("clientOrderId", json!(record.client_id.as_str()));
    put("price", json!(record.price.map_or_else(|| "0".to_string(), |price| info.price(price.0))));
    put("origQty", json!(info.qty(record.qty.0)));
    put("executedQty", json!(info.qty(record.filled.0)));
    put(
        "cummulativeQuoteQty",
        json!(notional_units.map_or_else(|| "-1".to_string(), |units| notional(info, units))),
    );
    put("status", json!(status_code(record)));
    put("timeInForce", json!(time_in_force_code(record.time_in_force)));
    put("type", json!(type_code(record)));
    put("side", json!(side_code(record.side)));
    put("stopPrice", json!("0"));
    put("icebergQty", json!("0"));
    put("time", json!(ms(record.created_ns.0)));
    put("updateTime", json!(ms(record.updated_ns.0)));
    put("isWorking", json!(record.status == OrderStatus::Open));
    put("workingTime", json!(ms(record.created_ns.0)));
    put(
        "origQuoteOrderQty",
        json!(match (record.quote_qty, info.quote_decimals()) {
            (Some(amount), Some(decimals)) => decimal(i128::from(amount.0), decimals),
            _ => "0".to_string(),
        }),
    );
    put("selfTradePreventionMode", json!(stp_code(record.stp)));
    order
}

/// A fill of a new order as `newOrderRespType=FULL` lists it.
pub fn new_order_fill_json(reference: &Reference, info: &InstrumentInfo, fill: &Fill) -> Value {
    let (fee, fee_asset) = fee_of(reference, fill);
    json!({
        "price": info.price(fill.price.0),
        "qty": info.qty(fill.qty.0),
        "commission": fee,
        "commissionAsset": fee_asset,
        "tradeId": trade_id(fill.seq, fill.trade_index),
    })
}

fn fee_of(reference: &Reference, fill: &Fill) -> (String, String) {
    match reference.asset(fill.fee_asset) {
        Some((name, decimals)) => (decimal(i128::from(fill.fee.0), *decimals), name.clone()),
        None => ("0".to_string(), String::new()),
    }
}

/// An account's fill as `GET /api/v3/myTrades` shows it.
pub fn my_trade_json(reference: &Reference, info: &InstrumentInfo, fill: &Fill) -> Value {
    let (fee, fee_asset) = fee_of(reference, fill);
    json!({
        "symbol": binance_symbol(info).unwrap_or_else(|| info.symbol.clone()),
        "id": trade_id(fill.seq, fill.trade_index),
        "orderId": fill.order_id.0,
        "orderListId": -1,
        "price": info.price(fill.price.0),
        "qty": info.qty(fill.qty.0),
        "quoteQty": notional(info, i128::from(fill.price.0) * i128::from(fill.qty.0)),
        "commission": fee,
        "commissionAsset": fee_asset,
        "time": ms(fill.ts_ns.0),
        "isBuyer": fill.side == Side::Buy,
        "isMaker": fill.liquidity == Liquidity::Maker,
        "isBestMatch": true,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn trade_ids_are_numbers_that_keep_the_order_of_trades() {
        assert_eq!(trade_id(Seq(7), 0), 7_000_000);
        assert_eq!(trade_id(Seq(7), 3), 7_000_003);
        assert!(trade_id(Seq(7), 999_999) < trade_id(Seq(8), 0));
        assert_eq!(trade_id_of_text("7-3"), Some(7_000_003));
        assert_eq!(trade_id_of_text("7"), None);
        assert_eq!(trade_id_of_text("x-1"), None);
    }
}
