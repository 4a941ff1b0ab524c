//! Binance's public market data: server time, `exchangeInfo`, depth, recent and
//! aggregate trades, klines and tickers, read from the engine, the feed's recent trades
//! and tickers, and the candle service's candles — the same sources as
//! Bourse's own `/v1/` reads, so both answer with the same figures.

use axum::extract::State;
use axum::response::{IntoResponse, Response};
use axum::Json;
use bourse_core::ids::InstrumentId;
use bourse_core::Side;
use serde_json::{json, Value};

use super::error::{BinanceError, BinanceResult};
use super::params::{Params, Selection};
use super::shapes::{self, binance_symbol, find_spot, ms, notional, trade_id_of_text};
use super::BinanceRequest;
use crate::port::queries::BookTop;
use crate::port::state::Shared;
use crate::reference::{decimal, InstrumentInfo, Reference};
use crate::render::{Level, DEPTH_LEVELS_MAX};
use crate::services::feed::market::RECENT_TRADES_KEPT;
use crate::services::feed::ticker::TickerFigures;

/// Trades and klines a request gets when it names no `limit`, and the most it may.
const LIST_DEFAULT: usize = 500;
const LIST_MAX: usize = 1_000;
const DEPTH_DEFAULT: usize = 100;
const DAY_MS: u64 = 24 * 60 * 60 * 1_000;

fn ok(value: Value) -> Response {
    Json(value).into_response()
}

/// The spot instrument a `symbol` parameter names.
pub async fn instrument(
    state: &Shared,
    symbol: &str,
) -> BinanceResult<(InstrumentId, InstrumentInfo, std::sync::Arc<Reference>)> {
    let reference = state.directory.reference();
    if let Some((instrument, info)) = find_spot(&reference, symbol) {
        return Ok((instrument, info.clone(), reference));
    }
    // Declared since the copy was taken?
    let reference = state.directory.refresh_reference().await.map_err(BinanceError::from)?;
    let (instrument, info) =
        find_spot(&reference, symbol).ok_or_else(BinanceError::invalid_symbol)?;
    Ok((instrument, info.clone(), reference))
}

pub async fn ping() -> Response {
    ok(json!({}))
}

pub async fn time() -> Response {
    ok(json!({ "serverTime": bourse_protocol::signing::now_ms() }))
}

/// `symbol`, `symbols` (a JSON array) or neither: every spot instrument.
pub async fn exchange_info(
    State(state): State<Shared>,
    request: BinanceRequest,
) -> BinanceResult<Response> {
    let params = request.public()?;
    params.only(&["symbol", "symbols", "permissions", "showPermissionSets"])?;
    let wanted = wanted_symbols(&params)?;
    let reference = state.directory.refresh_reference().await?;
    let count = reference.instruments.len();
    let halted = state.queries.halted(count).await?;
    let mut symbols = Vec::new();
    for (info, halted) in reference.instruments.iter().zip(halted) {
        let Some(shown) = shapes::symbol_info(info, halted) else { continue };
        if wanted.as_ref().is_none_or(|wanted| {
            shown["symbol"].as_str().is_some_and(|s| wanted.iter().any(|w| w == s))
        }) {
            symbols.push(shown);
        }
    }
    if let Some(wanted) = &wanted {
        if symbols.len() < wanted.len() {
            return Err(BinanceError::invalid_symbol());
        }
    }
    let rate = state.limits.requests_per_second;
    Ok(ok(json!({
        "timezone": "UTC",
        "serverTime": bourse_protocol::signing::now_ms(),
        "rateLimits": [
            { "rateLimitType": "REQUEST_WEIGHT", "interval": "SECOND", "intervalNum": 1, "limit": rate },
        ],
        "exchangeFilters": [],
        "symbols": symbols,
    })))
}

/// `symbol=X` or `symbols=["X","Y"]`, or `None` for every symbol.
fn wanted_symbols(params: &Params<'_>) -> BinanceResult<Option<Vec<String>>> {
    match (params.get("symbol"), params.get("symbols")) {
        (Some(_), Some(_)) => Err(BinanceError::bad_request(
            -1128,
            "Combination of optional parameters invalid: symbol and symbols.",
        )),
        (Some(symbol), None) => Ok(Some(vec![symbol.to_string()])),
        (None, Some(list)) => serde_json::from_str::<Vec<String>>(list)
            .map(Some)
            .map_err(|_| BinanceError::invalid_value("symbols", list)),
        (None, None) => Ok(None),
    }
}

pub async fn depth(
    State(state): State<Shared>,
    request: BinanceRequest,
) -> BinanceResult<Response> {
    let params = request.public()?;
    params.only(&["symbol", "limit"])?;
    let (instrument, info, _) = instrument(&state, params.required("symbol")?).await?;
    // Binance takes up to 5,000; Bourse's depth reads show up to `DEPTH_LEVELS_MAX`.
    let levels = Selection::read(&params, DEPTH_DEFAULT, 5_000, None)?.limit.min(DEPTH_LEVELS_MAX);
    let BookTop { bids, asks, seq, .. } = state.queries.book(instrument, levels).await?;
    let shown = |levels: &[crate::render::Level]| -> Vec<Value> {
        levels.iter().map(|(price, qty, _)| json!([info.price(*price), info.qty(*qty)])).collect()
    };
    Ok(ok(json!({ "lastUpdateId": seq, "bids": shown(&bids), "asks": shown(&asks) })))
}

/// The feed's recent trades of an instrument, oldest first, with numeric ids.
fn recent_trades(
    state: &Shared,
    instrument: InstrumentId,
) -> Vec<(u64, crate::services::feed::market::TradeRecord)> {
    state
        .market()
        .recent(instrument, RECENT_TRADES_KEPT)
        .into_iter()
        .filter_map(|trade| Some((trade_id_of_text(&trade.trade_id)?, trade)))
        .collect()
}

pub async fn trades(
    State(state): State<Shared>,
    request: BinanceRequest,
) -> BinanceResult<Response> {
    let params = request.public()?;
    params.only(&["symbol", "limit"])?;
    let (instrument, info, _) = instrument(&state, params.required("symbol")?).await?;
    let selection = Selection::read(&params, LIST_DEFAULT, LIST_MAX, None)?;
    let trades = recent_trades(&state, instrument);
    let shown: Vec<Value> = selection
        .window(&trades)
        .iter()
        .map(|(id, trade)| {
            json!({
                "id": id,
                "price": info.price(trade.price),
                "qty": info.qty(trade.qty),
                "quoteQty": notional(&info, i128::from(trade.price) * i128::from(trade.qty)),
                "time": ms(trade.ts_ns.0),
                "isBuyerMaker": trade.taker_side == Side::Sell,
                "isBestMatch": true,
            })
        })
        .collect();
    Ok(ok(Value::Array(shown)))
}

/// Each trade is its own aggregate (`a`, `f` and `l` are its id): a valid reading of
/// Binance's aggregation, which may but need not merge a taker's trades at one price.
pub async fn agg_trades(
    State(state): State<Shared>,
    request: BinanceRequest,
) -> BinanceResult<Response> {
    let params = request.public()?;
    params.only(&["symbol", "limit", "fromId", "startTime", "endTime"])?;
    let (instrument, info, _) = instrument(&state, params.required("symbol")?).await?;
    let selection = Selection::read(&params, LIST_DEFAULT, LIST_MAX, Some("fromId"))?;
    let trades: Vec<_> = recent_trades(&state, instrument)
        .into_iter()
        .filter(|(id, trade)| selection.admits(*id, ms(trade.ts_ns.0)))
        .collect();
    let shown: Vec<Value> = selection
        .window(&trades)
        .iter()
        .map(|(id, trade)| {
            json!({
                "a": id, "p": info.price(trade.price), "q": info.qty(trade.qty),
                "f": id, "l": id, "T": ms(trade.ts_ns.0),
                "m": trade.taker_side == Side::Sell, "M": true,
            })
        })
        .collect();
    Ok(ok(Value::Array(shown)))
}

pub async fn klines(
    State(state): State<Shared>,
    request: BinanceRequest,
) -> BinanceResult<Response> {
    let params = request.public()?;
    params.only(&["symbol", "interval", "startTime", "endTime", "limit"])?;
    let (instrument, info, _) = instrument(&state, params.required("symbol")?).await?;
    let interval = params.required("interval")?;
    let interval_ns = bourse_marketdata::candles::interval(interval).ok_or_else(|| {
        BinanceError::bad_request(
            -1120,
            format!("Invalid interval {interval:?}: Bourse keeps 1s, 1m, 5m, 15m, 1h and 1d."),
        )
    })?;
    let selection = Selection::read(&params, LIST_DEFAULT, LIST_MAX, None)?;
    let from_ns = selection.start_ms.unwrap_or(0).saturating_mul(1_000_000);
    // From a start time: the first ones after it, so ask for all up to the clock.
    let asked = if selection.start_ms.is_some() { usize::MAX } else { selection.limit };
    let series =
        state.candles.series(instrument, interval_ns, from_ns, asked).await.ok_or_else(|| {
            BinanceError::new(
                axum::http::StatusCode::SERVICE_UNAVAILABLE,
                -1004,
                "Server is busy, please wait and try again",
            )
        })?;
    let interval_ms = interval_ns / 1_000_000;
    let shown: Vec<Value> = series
        .iter()
        .filter(|candle| selection.admits(0, ms(candle.start_ns)))
        .take(selection.limit)
        .map(|candle| {
            json!([
                ms(candle.start_ns),
                info.price(candle.open.0),
                info.price(candle.high.0),
                info.price(candle.low.0),
                info.price(candle.close.0),
                info.qty(candle.volume.0),
                ms(candle.start_ns) + interval_ms - 1,
                notional(&info, candle.notional),
                candle.trades,
                info.qty(candle.taker_buy_volume.0),
                notional(&info, candle.taker_buy_notional),
                "0",
            ])
        })
        .collect();
    Ok(ok(Value::Array(shown)))
}

/// The best bid and ask with their quantities, in units.
type Top = (Option<(i64, i64)>, Option<(i64, i64)>);

async fn tops(state: &Shared, instruments: Vec<InstrumentId>) -> BinanceResult<Vec<Top>> {
    let price_and_qty = |level: Option<Level>| level.map(|(price, qty, _)| (price, qty));
    let best = state.queries.best_levels(instruments).await?;
    Ok(best.into_iter().map(|(bid, ask)| (price_and_qty(bid), price_and_qty(ask))).collect())
}

/// The spot instruments a ticker request names (`symbol`, `symbols` or every one).
async fn ticker_instruments(
    state: &Shared,
    params: &Params<'_>,
) -> BinanceResult<Vec<(InstrumentId, InstrumentInfo)>> {
    let reference = state.directory.refresh_reference().await?;
    match wanted_symbols(params)? {
        Some(wanted) => wanted
            .iter()
            .map(|symbol| {
                find_spot(&reference, symbol)
                    .map(|(id, info)| (id, info.clone()))
                    .ok_or_else(BinanceError::invalid_symbol)
            })
            .collect(),
        None => Ok(reference
            .instruments
            .iter()
            .enumerate()
            .filter(|(_, info)| binance_symbol(info).is_some())
            .map(|(index, info)| (InstrumentId(index as u32), info.clone()))
            .collect()),
    }
}

/// One ticker, or a list of them when the request named `symbols` or none.
fn one_or_list(params: &Params<'_>, mut shown: Vec<Value>) -> Response {
    match (params.get("symbol"), shown.len()) {
        (Some(_), 1) => ok(shown.remove(0)),
        _ => ok(Value::Array(shown)),
    }
}

fn level(info: &InstrumentInfo, level: Option<(i64, i64)>) -> (Value, Value) {
    match level {
        Some((price, qty)) => (json!(info.price(price)), json!(info.qty(qty))),
        None => (Value::Null, Value::Null),
    }
}

/// The rolling 24-hour statistics (nulls for prices before the first trade in the
/// window; no `prevClosePrice`, `firstId`, `lastId`: Bourse does not keep them).
pub async fn ticker_24hr(
    State(state): State<Shared>,
    request: BinanceRequest,
) -> BinanceResult<Response> {
    let params = request.public()?;
    params.only(&["symbol", "symbols", "type"])?;
    let mini = match params.get("type") {
        None | Some("FULL") => false,
        Some("MINI") => true,
        Some(other) => return Err(BinanceError::invalid_value("type", other)),
    };
    let instruments = ticker_instruments(&state, &params).await?;
    let tops = tops(&state, instruments.iter().map(|(id, _)| *id).collect()).await?;
    let now_ms = bourse_protocol::signing::now_ms();
    let mut shown = Vec::with_capacity(instruments.len());
    for ((instrument, info), (bid, ask)) in instruments.iter().zip(tops) {
        let (figures, last_trade) = {
            let mut market = state.market();
            (
                market.figures(
                    *instrument,
                    bourse_core::TimestampNs(now_ms.saturating_mul(1_000_000)),
                ),
                market.recent(*instrument, 1).pop(),
            )
        };
        let mut ticker = ticker_fields(info, figures);
        ticker.insert("symbol".into(), json!(binance_symbol(info)));
        ticker.insert("openTime".into(), json!(now_ms.saturating_sub(DAY_MS)));
        ticker.insert("closeTime".into(), json!(now_ms));
        if !mini {
            let ((bid_price, bid_qty), (ask_price, ask_qty)) = (level(info, bid), level(info, ask));
            ticker.insert("bidPrice".into(), bid_price);
            ticker.insert("bidQty".into(), bid_qty);
            ticker.insert("askPrice".into(), ask_price);
            ticker.insert("askQty".into(), ask_qty);
            ticker.insert(
                "lastQty".into(),
                last_trade.map_or(Value::Null, |trade| json!(info.qty(trade.qty))),
            );
        } else {
            for field in ["priceChange", "priceChangePercent", "weightedAvgPrice"] {
                ticker.remove(field);
            }
        }
        shown.push(Value::Object(ticker));
    }
    Ok(one_or_list(&params, shown))
}

/// The 24-hour figures in Binance's names. The change in percent has 3 decimals and
/// the weighted average the price's decimals, both rounded toward zero; every other
/// figure is exact.
fn ticker_fields(
    info: &InstrumentInfo,
    figures: Option<TickerFigures>,
) -> serde_json::Map<String, Value> {
    let mut fields = serde_json::Map::new();
    let mut put = |name: &str, value: Value| {
        fields.insert(name.to_string(), value);
    };
    match figures {
        Some(figures) => {
            let change = figures.last - figures.open;
            put("priceChange", json!(info.price(change)));
            let percent = i128::from(change) * 100_000 / i128::from(figures.open.max(1));
            put("priceChangePercent", json!(decimal(percent, 3)));
            let average = figures.notional / figures.volume.max(1);
            put("weightedAvgPrice", json!(decimal(average, info.price_decimals)));
            put("lastPrice", json!(info.price(figures.last)));
            put("openPrice", json!(info.price(figures.open)));
            put("highPrice", json!(info.price(figures.high)));
            put("lowPrice", json!(info.price(figures.low)));
            put("volume", json!(decimal(figures.volume, info.qty_decimals)));
            put("quoteVolume", json!(notional(info, figures.notional)));
            put("count", json!(figures.trades));
        }
        None => {
            for name in [
                "priceChange",
                "priceChangePercent",
                "weightedAvgPrice",
                "lastPrice",
                "openPrice",
                "highPrice",
                "lowPrice",
            ] {
                put(name, Value::Null);
            }
            put("volume", json!("0"));
            put("quoteVolume", json!("0"));
            put("count", json!(0));
        }
    }
    fields
}

pub async fn ticker_price(
    State(state): State<Shared>,
    request: BinanceRequest,
) -> BinanceResult<Response> {
    let params = request.public()?;
    params.only(&["symbol", "symbols"])?;
    let instruments = ticker_instruments(&state, &params).await?;
    let now_ns =
        bourse_core::TimestampNs(bourse_protocol::signing::now_ms().saturating_mul(1_000_000));
    let shown = instruments
        .iter()
        .map(|(instrument, info)| {
            let figures = state.market().figures(*instrument, now_ns);
            json!({
                "symbol": binance_symbol(info),
                "price": figures.map_or(Value::Null, |figures| json!(info.price(figures.last))),
            })
        })
        .collect();
    Ok(one_or_list(&params, shown))
}

pub async fn book_ticker(
    State(state): State<Shared>,
    request: BinanceRequest,
) -> BinanceResult<Response> {
    let params = request.public()?;
    params.only(&["symbol", "symbols"])?;
    let instruments = ticker_instruments(&state, &params).await?;
    let tops = tops(&state, instruments.iter().map(|(id, _)| *id).collect()).await?;
    let shown = instruments
        .iter()
        .zip(tops)
        .map(|((_, info), (bid, ask))| {
            let ((bid_price, bid_qty), (ask_price, ask_qty)) = (level(info, bid), level(info, ask));
            json!({
                "symbol": binance_symbol(info),
                "bidPrice": bid_price, "bidQty": bid_qty, "askPrice": ask_price, "askQty": ask_qty,
            })
        })
        .collect();
    Ok(one_or_list(&params, shown))
}
