//! What anyone may read without a key: health, readiness, instruments and depth.

use std::sync::atomic::Ordering;

use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde::Deserialize;
use serde_json::{json, Value};

use super::extract::{ok, ApiPath, ApiQuery};
use crate::port::error::{ApiError, ApiResult, ErrorCode};
use crate::port::queries::{BookTop, RestingOrder};
use crate::port::state::Shared;
use crate::reference::InstrumentInfo;
use crate::render::{instrument_json, levels_json, DEPTH_LEVELS_MAX};
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
    let failure = state.queries.engine_failure();
    let ready = state.ready.load(Ordering::SeqCst) && failure.is_none();
    let status = if ready { StatusCode::OK } else { StatusCode::SERVICE_UNAVAILABLE };
    let body = json!({ "ready": ready, "engine_failure": failure });
    (status, Json(body)).into_response()
}

/// In a cluster, this node's view of it (`docs/cluster.md`): who leads, the term, the
/// commit index, the last command applied here, and, on the leader, how far each node's
/// log matches its own. `{"clustered": false}` on a server that is not in a cluster.
pub async fn cluster(State(state): State<Shared>) -> ApiResult<Response> {
    let Some(view) = state.queries.cluster().await? else {
        return Ok(ok(json!({ "clustered": false })));
    };
    let status = &view.status.status;
    let matched: Vec<Value> = status
        .matched
        .iter()
        .map(|(node, index)| json!({ "node": node.0, "matched": index, "lag": status.last_index.saturating_sub(*index) }))
        .collect();
    let nodes: Vec<Value> = view.nodes.iter().map(|node| node.to_json()).collect();
    Ok(ok(json!({
        "clustered": true,
        "node": status.id.0,
        "leader": status.leader.map(|leader| leader.0),
        "is_leader": status.is_leader,
        "term": status.term,
        "commit": status.commit,
        "last_index": status.last_index,
        "applied_seq": view.applied_seq,
        "voters": status.voters.iter().map(|node| node.0).collect::<Vec<_>>(),
        "learners": status.learners.iter().map(|node| node.0).collect::<Vec<_>>(),
        "matched": matched,
        "failure": view.status.failure,
        "nodes": nodes,
    })))
}

pub async fn instruments(State(state): State<Shared>) -> ApiResult<Response> {
    let reference = state.directory.refresh_reference().await?;
    let count = reference.instruments.len();
    let halted = state.queries.halted(count).await?;
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
    let (instrument, info) = instrument_of(&state, &symbol).await?;
    let BookTop { bids, asks, time_ns, .. } = state.queries.book(instrument, levels).await?;
    Ok(ok(json!({
        "symbol": symbol, "time_ns": time_ns.0,
        "bids": levels_json(&info, &bids), "asks": levels_json(&info, &asks),
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
    let now_ns =
        bourse_core::TimestampNs(bourse_protocol::signing::now_ms().saturating_mul(1_000_000));
    let figures = state.market().figures(instrument, now_ns);
    let open_interest = match info.is_future() {
        true => state.queries.open_interest(instrument).await?.map(|qty| qty.0),
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
    let ((bids, asks), seq) = state.queries.resting_orders(instrument, L3_ORDERS_MAX).await?;
    let shown = |orders: Vec<RestingOrder>| -> Vec<Value> {
        orders
            .iter()
            .map(|order| {
                json!([order.order_id.0, info.price(order.price.0), info.qty(order.remaining.0)])
            })
            .collect()
    };
    Ok(ok(json!({ "symbol": symbol, "seq": seq, "bids": shown(bids), "asks": shown(asks) })))
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
