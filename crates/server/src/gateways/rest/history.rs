//! The history's admin routes: its progress, lookups by id (an order's latest state, a
//! trade, an account's recent fills) from the history's index, and SQL over its files.
//! Every route needs an admin key: the history holds every account's activity.

use axum::body::Bytes;
use axum::extract::State;
use axum::http::header::CONTENT_TYPE;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Extension;
use serde::Deserialize;
use serde_json::json;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use super::extract::{ok, ApiPath, ApiQuery};
use crate::gateways::shared::json::parse_body;
use crate::port::error::{ApiError, ApiResult, ErrorCode};
use crate::port::session::Session;
use crate::port::state::Shared;
use crate::services::history_access::HistoryAccess;

/// Fills returned at most per request.
const FILLS_MAX: usize = 1_000;

fn history(state: &Shared) -> ApiResult<Arc<HistoryAccess>> {
    state.history.get().cloned().ok_or_else(|| {
        ApiError::new(ErrorCode::HistoryOff,
            "the history is not kept on this server ([history] enabled = false, or durability none)",
        )
    })
}

fn index_failed(error: bourse_history::index::IndexError) -> ApiError {
    ApiError::new(ErrorCode::HistoryUnreadable, error.to_string())
}

pub async fn status(
    State(state): State<Shared>,
    Extension(caller): Extension<Session>,
) -> ApiResult<Response> {
    caller.require_admin()?;
    let history = history(&state)?;
    let stats = &history.stats;
    Ok(ok(json!({
        "committed_seq": stats.committed_seq.load(Ordering::SeqCst),
        "applied_seq": stats.applied_seq.load(Ordering::SeqCst),
        "rows": stats.rows.load(Ordering::Relaxed),
        "files": stats.files.load(Ordering::Relaxed),
        "bytes": stats.bytes.load(Ordering::Relaxed),
        "commits": stats.commits.load(Ordering::Relaxed),
        "merges": stats.merges.load(Ordering::Relaxed),
        "files_merged": stats.files_merged.load(Ordering::Relaxed),
        "failures": stats.failures.load(Ordering::Relaxed),
        "sql": history.sql.is_some(),
    })))
}

pub async fn order(
    State(state): State<Shared>,
    Extension(caller): Extension<Session>,
    ApiPath(order_id): ApiPath<String>,
) -> ApiResult<Response> {
    caller.require_admin()?;
    let order_id: u64 = order_id
        .parse()
        .map_err(|_| ApiError::malformed(format!("order id {order_id:?} is not a number")))?;
    let history = history(&state)?;
    match history.index.order(bourse_core::OrderId(order_id)).map_err(index_failed)? {
        Some(order) => Ok(ok(order)),
        None => Err(ApiError::new(
            ErrorCode::Rejected(bourse_core::RejectReason::UnknownOrder),
            format!("no order {order_id} in the history"),
        )),
    }
}

pub async fn trade(
    State(state): State<Shared>,
    Extension(caller): Extension<Session>,
    ApiPath(trade_id): ApiPath<String>,
) -> ApiResult<Response> {
    caller.require_admin()?;
    let parsed = trade_id
        .split_once('-')
        .and_then(|(seq, index)| Some((seq.parse::<u64>().ok()?, index.parse::<u32>().ok()?)));
    let Some((seq, trade_index)) = parsed else {
        return Err(ApiError::malformed(format!("trade id {trade_id:?} is not seq-index")));
    };
    let history = history(&state)?;
    match history.index.trade(bourse_core::Seq(seq), trade_index).map_err(index_failed)? {
        Some(trade) => Ok(ok(trade)),
        None => Err(ApiError::new(
            ErrorCode::UnknownTrade,
            format!("no trade {trade_id} in the history"),
        )),
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FillsQuery {
    limit: Option<usize>,
}

pub async fn fills(
    State(state): State<Shared>,
    Extension(caller): Extension<Session>,
    ApiPath(account): ApiPath<String>,
    ApiQuery(query): ApiQuery<FillsQuery>,
) -> ApiResult<Response> {
    caller.require_admin()?;
    let limit = query.limit.unwrap_or(100);
    if limit == 0 || limit > FILLS_MAX {
        return Err(ApiError::malformed(format!("limit must be 1 to {FILLS_MAX}")));
    }
    let history = history(&state)?;
    let fills = history.index.recent_fills(&account, limit).map_err(index_failed)?;
    Ok(ok(json!({ "account": account, "fills": fills })))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SqlRequest {
    sql: String,
    format: Option<String>,
}

pub async fn sql(
    State(state): State<Shared>,
    Extension(caller): Extension<Session>,
    body: Bytes,
) -> ApiResult<Response> {
    caller.require_admin()?;
    let request: SqlRequest = parse_body(&body)?;
    let format = request.format.unwrap_or_else(|| "json".to_string());
    if !matches!(format.as_str(), "json" | "csv" | "table") {
        return Err(
            ApiError::malformed("format must be json, csv or table").with("field", json!("format"))
        );
    }
    let history = history(&state)?;
    let Some(service) = history.sql.clone() else {
        return Err(ApiError::new(
            ErrorCode::SqlUnavailable,
            "this build of the server has no query engine (bourse serve has one)",
        ));
    };
    let answer = tokio::task::spawn_blocking(move || service.query(&request.sql, &format))
        .await
        .map_err(|error| ApiError::new(ErrorCode::SqlFailed, error.to_string()))?;
    match answer {
        Ok(answer) => {
            Ok((StatusCode::OK, [(CONTENT_TYPE, answer.content_type)], answer.body).into_response())
        }
        Err(error) => {
            let code = match error.code {
                "sql_error" => ErrorCode::SqlError,
                "plan_error" => ErrorCode::PlanError,
                "io" => ErrorCode::Io,
                // (The query engine's other failures: `execution_error`.)
                _ => ErrorCode::ExecutionError,
            };
            Err(ApiError::new(code, error.message))
        }
    }
}
