//! An account's own orders, fills and balances. Every handler acts for the account of
//! the key that signed the request, and finds only that account's orders: another
//! account's order id is `unknown_order`, exactly like one that does not exist. Order
//! entry itself is `order_entry`'s; these handlers decode the JSON (`json`) and render
//! its answers.

use std::borrow::Cow;

use axum::body::Bytes;
use axum::extract::State;
use axum::http::header::CONTENT_TYPE;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Extension;
use bourse_core::ids::InstrumentId;
use serde::Deserialize;
use serde_json::{json, Value};

use super::extract::{ok, ApiPath, ApiQuery};
use crate::gateways::shared::json::{self, parse_body, parse_order_id, AmendRequest, OrderRequest};
use crate::port::error::ApiResult;
use crate::port::orders::request::{Request, Target};
use crate::port::queries::Which;
use crate::port::session::Session;
use crate::port::state::{AppState, Shared};
use crate::reference::Reference;
use crate::render::{balances_json, fill_json, order_json};

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OrdersQuery {
    status: Option<String>,
    client_order_id: Option<String>,
    symbol: Option<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ClientIdQuery {
    client_order_id: String,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FillsQuery {
    symbol: Option<String>,
    limit: Option<usize>,
}

/// Submits `request` for the caller's account and renders its answer.
async fn enter(state: &AppState, caller: &Session, request: &Request<'_>) -> ApiResult<Response> {
    let answer = state.entry.submit_and_wait(caller, request).await?;
    let body = json::rest_body(&answer)?;
    Ok((StatusCode::OK, [(CONTENT_TYPE, "application/json")], body).into_response())
}

pub async fn place_order(
    State(state): State<Shared>,
    Extension(caller): Extension<Session>,
    body: Bytes,
) -> ApiResult<Response> {
    caller.account()?;
    let request: OrderRequest = parse_body(&body)?;
    enter(&state, &caller, &request.decode()?).await
}

pub async fn get_order(
    State(state): State<Shared>,
    Extension(caller): Extension<Session>,
    ApiPath(order_id): ApiPath<String>,
) -> ApiResult<Response> {
    let target = Target::OrderId(parse_order_id(&order_id)?);
    Ok(ok(state.queries.order(&caller, &target).await?.to_json()))
}

pub async fn cancel_order(
    State(state): State<Shared>,
    Extension(caller): Extension<Session>,
    ApiPath(order_id): ApiPath<String>,
) -> ApiResult<Response> {
    let target = Target::OrderId(parse_order_id(&order_id)?);
    enter(&state, &caller, &Request::Cancel(target)).await
}

pub async fn cancel_by_client(
    State(state): State<Shared>,
    Extension(caller): Extension<Session>,
    ApiQuery(query): ApiQuery<ClientIdQuery>,
) -> ApiResult<Response> {
    let target = Target::ClientOrderId(Cow::Owned(query.client_order_id));
    enter(&state, &caller, &Request::Cancel(target)).await
}

pub async fn amend_order(
    State(state): State<Shared>,
    Extension(caller): Extension<Session>,
    ApiPath(order_id): ApiPath<String>,
    body: Bytes,
) -> ApiResult<Response> {
    let amend: AmendRequest = parse_body(&body)?;
    let request = amend.decode(Target::OrderId(parse_order_id(&order_id)?))?;
    enter(&state, &caller, &request).await
}

/// `PATCH /v1/orders?client_order_id=`: amends the order by the id the client gave it.
pub async fn amend_by_client(
    State(state): State<Shared>,
    Extension(caller): Extension<Session>,
    ApiQuery(query): ApiQuery<ClientIdQuery>,
    body: Bytes,
) -> ApiResult<Response> {
    let amend: AmendRequest = parse_body(&body)?;
    let request = amend.decode(Target::ClientOrderId(Cow::Owned(query.client_order_id)))?;
    enter(&state, &caller, &request).await
}

pub async fn list_orders(
    State(state): State<Shared>,
    Extension(caller): Extension<Session>,
    ApiQuery(query): ApiQuery<OrdersQuery>,
) -> ApiResult<Response> {
    if let Some(client_id) = query.client_order_id {
        let target = Target::ClientOrderId(Cow::Owned(client_id));
        return Ok(ok(state.queries.order(&caller, &target).await?.to_json()));
    }
    let which = match query.status.as_deref() {
        None | Some("open") => Which::Open,
        Some("finished") => Which::Finished,
        Some(other) => {
            return Err(crate::port::error::ApiError::malformed(format!(
                "status is open or finished, not {other:?}"
            )))
        }
    };
    let records = state.queries.orders(&caller, which, None, usize::MAX).await?;
    let reference =
        state.directory.reference_for(records.iter().map(|record| record.instrument)).await?;
    let symbol = query.symbol;
    let orders: Vec<Value> = records
        .iter()
        .filter(|record| matches_symbol(&reference, record.instrument, symbol.as_deref()))
        .map(|record| order_json(&reference, record))
        .collect();
    Ok(ok(json!({ "orders": orders })))
}

fn matches_symbol(reference: &Reference, instrument: InstrumentId, symbol: Option<&str>) -> bool {
    symbol.is_none_or(|symbol| {
        reference.instrument(instrument).is_some_and(|info| info.symbol == symbol)
    })
}

pub async fn fills(
    State(state): State<Shared>,
    Extension(caller): Extension<Session>,
    ApiQuery(query): ApiQuery<FillsQuery>,
) -> ApiResult<Response> {
    let fills = state.queries.fills(&caller, None).await?;
    let reference = state.directory.reference_for(fills.iter().map(|fill| fill.instrument)).await?;
    let limit = query.limit.unwrap_or(usize::MAX);
    let mut shown: Vec<Value> = fills
        .iter()
        .rev()
        .filter(|fill| matches_symbol(&reference, fill.instrument, query.symbol.as_deref()))
        .take(limit)
        .map(|fill| fill_json(&reference, fill))
        .collect();
    shown.reverse();
    Ok(ok(json!({ "fills": shown })))
}

pub async fn balances(
    State(state): State<Shared>,
    Extension(caller): Extension<Session>,
) -> ApiResult<Response> {
    let balances = state.queries.balances(&caller).await?;
    Ok(ok(json!({ "account": caller.account()?, "balances": balances_json(&balances) })))
}
