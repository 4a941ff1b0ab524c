//! What anyone may read without a key: health, readiness, instruments and depth.

use std::sync::atomic::Ordering;

use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;
use bourse_core::Side;
use serde::Deserialize;
use serde_json::{json, Value};

use super::extract::{ok, ApiPath, ApiQuery};
use crate::port::error::{ApiError, ApiResult, ErrorCode};
use crate::port::state::Shared;
use crate::reference::InstrumentInfo;
use crate::render::{instrument_json, levels_json, top_levels, Level, DEPTH_LEVELS_MAX};
use crate::services::feed::market::{ticker_json, RECENT_TRADES_KEPT};

const DEPTH_LEVELS_DEFAULT: usize = 20;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DepthQuery {
    levels: Option<usize>,
}

/// The metrics, as Prometheus reads them.
pub async fn metrics(State(state): State<Shared>) -> Response {
    let text = state.metrics.render();
    let content_type = "application/openmetrics-text; version=1.0.0; charset=utf-8";
    ([(axum::http::header::CONTENT_TYPE, content_type)], text).into_response()
}

/// The process is up.
pub async fn health() -> Response {
    ok(json!({ "status": "ok" }))
}

/// The engine has recovered and takes commands.
pub async fn ready(State(state): State<Shared>) -> Response {
    let failure = state.link.failure();
    let ready = state.ready.load(Ordering::SeqCst) && failure.is_none();
    let status = if ready { StatusCode::OK } else { StatusCode::SERVICE_UNAVAILABLE };
    let body = json!({ "ready": ready, "engine_failure": failure });
    (status, Json(body)).into_response()
}

pub async fn instruments(State(state): State<Shared>) -> ApiResult<Response> {
    let reference = state.directory.refresh_reference().await?;
    let count = reference.instruments.len();
    let halted = state.link.halted(count).await?;
    let shown: Vec<Value> = reference
        .instruments
        .iter()
        .zip(halted)
        .map(|(info, halted)| {
            let mut shown = instrument_json(info);
            shown["halted"] = json!(halted);
            shown
        })
        .collect();
    Ok(ok(json!({ "instruments": shown })))
}

pub async fn depth(
    State(state): State<Shared>,
    ApiPath(symbol): ApiPath<String>,
    ApiQuery(query): ApiQuery<DepthQuery>,
) -> ApiResult<Response> {
    let levels = query.levels.unwrap_or(DEPTH_LEVELS_DEFAULT);
    if levels == 0 || levels > DEPTH_LEVELS_MAX {
        return Err(ApiError::malformed(format!("levels is 1 to {DEPTH_LEVELS_MAX}")));
    }
    let wanted = symbol.clone();
    let book = state
        .link
        .read(move |venue| {
            let exchange = venue.exchange();
            let instrument = exchange.find_instrument(&wanted)?;
            let book = exchange.book(instrument);
            let (bids, asks) =
                (top_levels(book, Side::Buy, levels), top_levels(book, Side::Sell, levels));
            Some((instrument, bids, asks, exchange.time_ns()))
        })
        .await?;
    let Some((instrument, bids, asks, time_ns)) = book else {
        return Err(ApiError::rejected(bourse_core::RejectReason::UnknownSymbol));
    };
    let reference = state.directory.reference_knowing(instrument.index() + 1).await?;
    let info = reference
        .instrument(instrument)
        .ok_or_else(|| ApiError::rejected(bourse_core::RejectReason::UnknownSymbol))?;
    let (bids, asks): (Vec<Level>, Vec<Level>) = (bids, asks);
    Ok(ok(json!({
        "symbol": symbol, "time_ns": time_ns,
        "bids": levels_json(info, &bids), "asks": levels_json(info, &asks),
    })))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TradesQuery {
    limit: Option<usize>,
}

async fn instrument_of(
    state: &Shared,
    symbol: &str,
) -> ApiResult<(bourse_core::ids::InstrumentId, InstrumentInfo)> {
    let reference = state.directory.reference_with_symbol(symbol).await?;
    let (instrument, info) = reference
        .find_instrument(symbol)
        .ok_or_else(|| ApiError::rejected(bourse_core::RejectReason::UnknownSymbol))?;
    Ok((instrument, info.clone()))
}

pub async fn trades(
    State(state): State<Shared>,
    ApiPath(symbol): ApiPath<String>,
    ApiQuery(query): ApiQuery<TradesQuery>,
) -> ApiResult<Response> {
    let limit = query.limit.unwrap_or(100);
    if limit == 0 || limit > RECENT_TRADES_KEPT {
        return Err(ApiError::malformed(format!("limit is 1 to {}", RECENT_TRADES_KEPT)));
    }
    let (instrument, info) = instrument_of(&state, &symbol).await?;
    let trades: Vec<Value> =
        state.market().recent(instrument, limit).iter().map(|trade| trade.to_json(&info)).collect();
    Ok(ok(json!({ "symbol": symbol, "trades": trades })))
}

pub async fn ticker(
    State(state): State<Shared>,
    ApiPath(symbol): ApiPath<String>,
) -> ApiResult<Response> {
    let (instrument, info) = instrument_of(&state, &symbol).await?;
    let now_ns = bourse_protocol::signing::now_ms().saturating_mul(1_000_000);
    let figures = state.market().figures(instrument, now_ns);
    let open_interest = match info.is_future() {
        true => {
            state
                .link
                .read(move |venue| {
                    venue
                        .exchange()
                        .positions(instrument)
                        .map(|positions| positions.open_interest().0)
                })
                .await?
        }
        false => None,
    };
    Ok(ok(json!({ "symbol": symbol, "data": ticker_json(&info, figures, open_interest) })))
}

/// Orders per side an L3 snapshot shows, at most.
pub const L3_ORDERS_MAX: usize = 100_000;

/// Every resting order of an instrument, in priority order, as the engine has it, with
/// the engine sequence number of that state (`seq`): `[order_id, price, qty]` per
/// order. Owners are not shown.
pub async fn l3(
    State(state): State<Shared>,
    ApiPath(symbol): ApiPath<String>,
) -> ApiResult<Response> {
    let (instrument, info) = instrument_of(&state, &symbol).await?;
    let (sides, seq) = state
        .link
        .read_at_seq(move |venue| {
            let exchange = venue.exchange();
            let activity = venue.activity();
            let side = |side| -> Vec<(u64, i64, i64)> {
                let mut orders = Vec::new();
                exchange.book(instrument).for_each_order(side, |order| {
                    if orders.len() < L3_ORDERS_MAX {
                        let order_id = activity
                            .and_then(|activity| activity.order_by_client(order.account, &order.id))
                            .map_or(0, |record| record.order_id.0);
                        orders.push((order_id, order.price.0, order.remaining.0));
                    }
                });
                orders
            };
            (side(Side::Buy), side(Side::Sell))
        })
        .await?;
    let shown = |orders: Vec<(u64, i64, i64)>| -> Vec<Value> {
        orders
            .into_iter()
            .map(|(order_id, price, qty)| json!([order_id, info.price(price), info.qty(qty)]))
            .collect()
    };
    Ok(ok(json!({ "symbol": symbol, "seq": seq, "bids": shown(sides.0), "asks": shown(sides.1) })))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CandlesQuery {
    interval: Option<String>,
    from_ns: Option<u64>,
    limit: Option<usize>,
}

/// Candles per request, at most.
pub const CANDLES_MAX: usize = 1_000;

/// An instrument's candles at an interval (`1s`, `1m`, `5m`, `15m`, `1h`, `1d`; default
/// `1m`), oldest first, empty intervals included, up to the engine's clock: `[start_ns,
/// open, high, low, close, volume, trades]` each. From the candle service (since this
/// start of the server), whether or not the multicast feed runs.
pub async fn candles(
    State(state): State<Shared>,
    ApiPath(symbol): ApiPath<String>,
    ApiQuery(query): ApiQuery<CandlesQuery>,
) -> ApiResult<Response> {
    let interval = query.interval.unwrap_or_else(|| "1m".to_string());
    let interval_ns = bourse_marketdata::candles::interval(&interval).ok_or_else(|| {
        ApiError::malformed(format!("interval {interval:?} is not one of 1s, 1m, 5m, 15m, 1h, 1d"))
    })?;
    let limit = query.limit.unwrap_or(100);
    if limit == 0 || limit > CANDLES_MAX {
        return Err(ApiError::malformed(format!("limit is 1 to {CANDLES_MAX}")));
    }
    let (instrument, info) = instrument_of(&state, &symbol).await?;
    let from_ns = query.from_ns.unwrap_or(0);
    let series =
        state.candles.series(instrument, interval_ns, from_ns, limit).await.ok_or_else(|| {
            ApiError::new(ErrorCode::ShuttingDown, "the candle service is stopping")
        })?;
    let shown: Vec<Value> =
        series.iter().map(|candle| crate::services::candles::candle_json(&info, candle)).collect();
    Ok(ok(json!({ "symbol": symbol, "interval": interval, "candles": shown })))
}
