//! An account's own orders, fills and balances. Every handler acts for the account of
//! the key that signed the request, and finds only that account's orders: another
//! account's order id is `unknown_order`, exactly like one that does not exist.

use std::borrow::Cow;

use axum::body::Bytes;
use axum::extract::State;
use axum::response::{IntoResponse, Response};
use axum::Extension;
use bourse_core::command::{AmendCommand, OrderCommand, OrderType};
use bourse_core::ids::{AccountId, ClientOrderId};
use bourse_core::venue::{OrderKind, OrderRecord, OrderStatus};
use bourse_core::{
    AccountRef, Command, Decimal, Event, Price, Qty, RejectReason, Side, StpMode, TimeInForce,
};
use serde::Deserialize;
use serde_json::{json, Value};

use super::auth::Caller;
use super::error::{ApiError, ApiResult};
use super::{ok, parse_body, parse_decimal, ApiPath, ApiQuery, Shared};
use crate::link::Reply;
use crate::render::{
    decimal, fill_json, order_json, placed_from_events, FillView, OrderView, Placed, Reference,
};

/// Client order ids: 1 to 36 printable ASCII characters, no spaces (a UUID fits).
pub const CLIENT_ORDER_ID_BYTES_MAX: usize = 36;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OrderRequest {
    symbol: String,
    side: SideText,
    #[serde(rename = "type")]
    kind: KindText,
    price: Option<String>,
    qty: String,
    time_in_force: Option<TimeInForceText>,
    post_only: Option<bool>,
    stp: Option<StpText>,
    client_order_id: Option<String>,
}

#[derive(Clone, Copy, Deserialize)]
#[serde(rename_all = "lowercase")]
enum SideText {
    Buy,
    Sell,
}

#[derive(Clone, Copy, Deserialize)]
#[serde(rename_all = "lowercase")]
enum KindText {
    Limit,
    Market,
}

#[derive(Clone, Copy, Deserialize)]
#[serde(rename_all = "lowercase")]
enum TimeInForceText {
    Gtc,
    Ioc,
    Fok,
}

#[derive(Clone, Copy, Deserialize)]
#[serde(rename_all = "snake_case")]
enum StpText {
    CancelTaker,
    CancelMaker,
    CancelBoth,
    None,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AmendRequest {
    price: Option<String>,
    qty: Option<String>,
}

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

fn valid_client_order_id(id: &str) -> bool {
    !id.is_empty()
        && id.len() <= CLIENT_ORDER_ID_BYTES_MAX
        && id.bytes().all(|byte| byte.is_ascii_graphic())
}

fn client_order_id(requested: Option<String>) -> ApiResult<String> {
    match requested {
        Some(id) if valid_client_order_id(&id) => Ok(id),
        Some(id) => Err(ApiError::malformed(format!(
            "client_order_id must be 1 to {CLIENT_ORDER_ID_BYTES_MAX} printable ASCII characters without spaces, not {id:?}"
        ))),
        None => {
            let mut bytes = [0u8; 12];
            getrandom::fill(&mut bytes)
                .map_err(|_| ApiError::malformed("no client_order_id given and none could be made"))?;
            Ok(format!("auto-{}", hex::encode(bytes)))
        }
    }
}

pub async fn place_order(
    State(state): State<Shared>,
    Extension(caller): Extension<Caller>,
    body: Bytes,
) -> ApiResult<Response> {
    let account = caller.account()?.to_string();
    let request: OrderRequest = parse_body(&body)?;
    let (client_id, order) = order_from_request(&request, &account)?;
    let reply = state.link.submit(&Command::Order(order.clone())).await?;
    let fields = placed_answer_fields(&state, &account, &client_id, &order, &reply).await?;
    let body = crate::entry::Answer::Placed(fields).into_rest_body();
    Ok((axum::http::StatusCode::OK, [(axum::http::header::CONTENT_TYPE, "application/json")], body)
        .into_response())
}

/// An order request checked and made into its command for `account`, with its client
/// order id (one is made when the request has none). Shared by REST and WebSocket.
pub(crate) fn order_from_request(
    request: &OrderRequest,
    account: &str,
) -> ApiResult<(String, OrderCommand<'static>)> {
    let client_id = client_order_id(request.client_order_id.clone())?;
    let order = order_command(request, account, &client_id)?;
    Ok((client_id, order))
}

/// What a placed order answers, from the engine's reply to `order`, as text without
/// its braces (`"fills":[…],"order":{…}`), written straight from the order and fills:
/// REST wraps it in braces, WebSocket's `ack` adds its own fields; or the rejection
/// (`duplicate_id` with the order the id names).
pub(crate) async fn placed_answer_fields(
    state: &Shared,
    account: &str,
    client_id: &str,
    order: &OrderCommand<'_>,
    reply: &Reply,
) -> ApiResult<String> {
    let (reference, placed) = placed(state, account, client_id, order, reply).await?;
    let unknown = || ApiError::malformed("the instrument vanished");
    let order = OrderView::of(&reference, &placed.record).ok_or_else(unknown)?;
    let fills: Vec<FillView> = placed
        .fills
        .iter()
        .map(|fill| FillView::of(&reference, fill).ok_or_else(unknown))
        .collect::<ApiResult<_>>()?;
    let mut text = String::with_capacity(512);
    text.push_str(r#""fills":"#);
    text.push_str(&serde_json::to_string(&fills).map_err(|_| unknown())?);
    text.push_str(r#","order":"#);
    text.push_str(&serde_json::to_string(&order).map_err(|_| unknown())?);
    Ok(text)
}

/// The new order as it stands after its command, and its fills (with the reference
/// data they are printed with); or the rejection (`duplicate_id` with the order the id
/// names).
async fn placed(
    state: &Shared,
    account: &str,
    client_id: &str,
    order: &OrderCommand<'_>,
    reply: &Reply,
) -> ApiResult<(std::sync::Arc<Reference>, Placed)> {
    let result = reply.result().ok_or_else(|| ApiError::malformed("no result"))?.clone();
    let events = reply.events();
    match events.first() {
        Some(Event::Rejected { reason: RejectReason::DuplicateId, .. }) => {
            Err(duplicate(state, account, client_id).await)
        }
        Some(Event::Rejected { reason, .. }) => Err(ApiError::rejected(*reason)),
        _ => {
            let symbol = order.symbol.as_ref();
            // (The events name the account too: this only fills in an order that
            // neither traded nor finished.)
            let account_id = state.account_id(account).await.ok().flatten();
            let reference = state.reference_with_symbol(symbol).await;
            let reference = match reference {
                Ok(reference) => reference,
                Err(_) => state.reference(),
            };
            let Some((instrument, info)) = reference.find_instrument(symbol) else {
                return Err(ApiError::malformed("the instrument vanished"));
            };
            let price = match order.order_type {
                OrderType::Limit { price } => price
                    .to_units(info.price_decimals)
                    .and_then(|units| i64::try_from(units).ok())
                    .map(Price),
                OrderType::Market => None,
            };
            let qty = order
                .qty
                .to_units(info.qty_decimals)
                .and_then(|units| i64::try_from(units).ok())
                .map_or(Qty(0), Qty);
            let submitted = OrderRecord {
                order_id: bourse_core::OrderId::of(result.seq),
                account: account_id.unwrap_or(AccountId(u32::MAX)),
                client_id: ClientOrderId::from(client_id),
                instrument,
                side: order.side,
                kind: if price.is_some() { OrderKind::Limit } else { OrderKind::Market },
                time_in_force: applied_time_in_force(order),
                post_only: order.post_only && price.is_some(),
                stp: order.stp,
                price,
                qty,
                remaining: qty,
                filled: Qty(0),
                status: OrderStatus::Open,
                created_ns: result.ts,
                updated_ns: result.ts,
            };
            let placed = placed_from_events(&reference, submitted, &events[1..]);
            Ok((reference, placed))
        }
    }
}

/// What the exchange makes of a market order's time in force (see the replay spec).
fn applied_time_in_force(order: &OrderCommand<'_>) -> TimeInForce {
    match (order.order_type, order.time_in_force) {
        (OrderType::Market, TimeInForce::FillOrKill) => TimeInForce::FillOrKill,
        (OrderType::Market, _) => TimeInForce::ImmediateOrCancel,
        (_, time_in_force) => time_in_force,
    }
}

fn order_command(
    request: &OrderRequest,
    account: &str,
    client_id: &str,
) -> ApiResult<OrderCommand<'static>> {
    let order_type = match (request.kind, &request.price) {
        (KindText::Limit, Some(price)) => {
            OrderType::Limit { price: parse_decimal("price", price)? }
        }
        (KindText::Limit, None) => return Err(ApiError::malformed("a limit order needs a price")),
        (KindText::Market, _) => OrderType::Market,
    };
    Ok(OrderCommand {
        account: AccountRef::Name(Cow::Owned(account.to_string())),
        id: Cow::Owned(client_id.to_string()),
        symbol: Cow::Owned(request.symbol.clone()),
        side: match request.side {
            SideText::Buy => Side::Buy,
            SideText::Sell => Side::Sell,
        },
        order_type,
        qty: parse_decimal("qty", &request.qty)?,
        time_in_force: match request.time_in_force.unwrap_or(TimeInForceText::Gtc) {
            TimeInForceText::Gtc => TimeInForce::GoodTillCancel,
            TimeInForceText::Ioc => TimeInForce::ImmediateOrCancel,
            TimeInForceText::Fok => TimeInForce::FillOrKill,
        },
        post_only: request.post_only.unwrap_or(false),
        stp: match request.stp.unwrap_or(StpText::CancelTaker) {
            StpText::CancelTaker => StpMode::CancelTaker,
            StpText::CancelMaker => StpMode::CancelMaker,
            StpText::CancelBoth => StpMode::CancelBoth,
            StpText::None => StpMode::None,
        },
    })
}

/// The answer to a reused client order id: the order it names, which is the one a
/// retried submission created.
async fn duplicate(state: &Shared, account: &str, client_id: &str) -> ApiError {
    let error = ApiError::rejected(RejectReason::DuplicateId);
    let Ok(Some(account_id)) = state.account_id(account).await else { return error };
    let Ok(Some(record)) = state.link.order_by_client(account_id, client_id).await else {
        return error;
    };
    match state.reference_knowing(record.instrument.index() + 1).await {
        Ok(reference) => error.with("order", order_json(&reference, &record)),
        Err(_) => error,
    }
}

/// The caller's order `order_id`, or `unknown_order` (also for another account's).
pub(crate) async fn own_order(
    state: &Shared,
    caller: &Caller,
    order_id: u64,
) -> ApiResult<(AccountId, OrderRecord)> {
    let account = caller.account()?;
    let account_id = state.account_id(account).await?.ok_or_else(ApiError::unknown_order)?;
    match state.link.order(order_id).await? {
        Some(record) if record.account == account_id => Ok((account_id, record)),
        _ => Err(ApiError::unknown_order()),
    }
}

fn parse_order_id(text: &str) -> ApiResult<u64> {
    text.parse()
        .map_err(|_| ApiError::malformed(format!("an order id is a whole number, not {text:?}")))
}

pub async fn get_order(
    State(state): State<Shared>,
    Extension(caller): Extension<Caller>,
    ApiPath(order_id): ApiPath<String>,
) -> ApiResult<Response> {
    let (_, record) = own_order(&state, &caller, parse_order_id(&order_id)?).await?;
    let reference = state.reference_knowing(record.instrument.index() + 1).await?;
    Ok(ok(order_json(&reference, &record)))
}

pub async fn cancel_order(
    State(state): State<Shared>,
    Extension(caller): Extension<Caller>,
    ApiPath(order_id): ApiPath<String>,
) -> ApiResult<Response> {
    let order_id = parse_order_id(&order_id)?;
    let (account_id, record) = own_order(&state, &caller, order_id).await?;
    let command = Command::Cancel {
        account: AccountRef::Id(account_id),
        id: Cow::Owned(record.client_id.to_string()),
    };
    submit_and_show(&state, &command, account_id, record.client_id.as_str()).await
}

pub async fn cancel_by_client(
    State(state): State<Shared>,
    Extension(caller): Extension<Caller>,
    ApiQuery(query): ApiQuery<ClientIdQuery>,
) -> ApiResult<Response> {
    let account = caller.account()?;
    let account_id = state.account_id(account).await?.ok_or_else(ApiError::unknown_order)?;
    let command = Command::Cancel {
        account: AccountRef::Id(account_id),
        id: Cow::Owned(query.client_order_id.clone()),
    };
    submit_and_show(&state, &command, account_id, &query.client_order_id).await
}

pub async fn amend_order(
    State(state): State<Shared>,
    Extension(caller): Extension<Caller>,
    ApiPath(order_id): ApiPath<String>,
    body: Bytes,
) -> ApiResult<Response> {
    let request: AmendRequest = parse_body(&body)?;
    let (price, qty) = amend_values(&request)?;
    let (account_id, record) = own_order(&state, &caller, parse_order_id(&order_id)?).await?;
    let command = Command::Amend(AmendCommand {
        account: AccountRef::Id(account_id),
        id: Cow::Owned(record.client_id.to_string()),
        price,
        qty,
    });
    submit_and_show(&state, &command, account_id, record.client_id.as_str()).await
}

/// `PATCH /v1/orders?client_order_id=`: amends the order by the id the client gave it.
pub async fn amend_by_client(
    State(state): State<Shared>,
    Extension(caller): Extension<Caller>,
    ApiQuery(query): ApiQuery<ClientIdQuery>,
    body: Bytes,
) -> ApiResult<Response> {
    let request: AmendRequest = parse_body(&body)?;
    let (price, qty) = amend_values(&request)?;
    let account = caller.account()?;
    let account_id = state.account_id(account).await?.ok_or_else(ApiError::unknown_order)?;
    let command = Command::Amend(AmendCommand {
        account: AccountRef::Id(account_id),
        id: Cow::Owned(query.client_order_id.clone()),
        price,
        qty,
    });
    submit_and_show(&state, &command, account_id, &query.client_order_id).await
}

/// An amend's new price and quantity (at least one), checked.
pub(crate) fn amend_values(
    request: &AmendRequest,
) -> ApiResult<(Option<Decimal>, Option<Decimal>)> {
    if request.price.is_none() && request.qty.is_none() {
        return Err(ApiError::malformed("an amend needs price, qty or both"));
    }
    let price = request.price.as_deref().map(|price| parse_decimal("price", price)).transpose()?;
    let qty = request.qty.as_deref().map(|qty| parse_decimal("qty", qty)).transpose()?;
    Ok((price, qty))
}

/// Submits a cancel or amend and answers with the order as it stands after it.
async fn submit_and_show(
    state: &Shared,
    command: &Command<'_>,
    account_id: AccountId,
    client_id: &str,
) -> ApiResult<Response> {
    let reply = state.link.submit(command).await?;
    Ok(ok(shown_after(state, &reply, account_id, client_id).await?))
}

/// What a cancel or amend answers once the engine replied: the order as it stands after
/// it, or the rejection. Shared by REST and WebSocket.
pub(crate) async fn shown_after(
    state: &Shared,
    reply: &Reply,
    account_id: AccountId,
    client_id: &str,
) -> ApiResult<Value> {
    if let Some(Event::Rejected { reason, .. }) = reply.events().first() {
        return Err(ApiError::rejected(*reason));
    }
    order_by_client_json(state, account_id, client_id).await
}

/// `shown_after` with the order read already (`Lane::read_order`, sequenced right
/// behind the command): `None` is `unknown_order`.
pub(crate) async fn shown_record(
    state: &Shared,
    reply: &Reply,
    record: Option<OrderRecord>,
) -> ApiResult<Value> {
    if let Some(Event::Rejected { reason, .. }) = reply.events().first() {
        return Err(ApiError::rejected(*reason));
    }
    let record = record.ok_or_else(ApiError::unknown_order)?;
    let reference = state.reference_knowing(record.instrument.index() + 1).await?;
    Ok(order_json(&reference, &record))
}

/// The caller's order `client_id` as JSON, or `unknown_order`.
async fn show_order_by_client(
    state: &Shared,
    account_id: AccountId,
    client_id: &str,
) -> ApiResult<Response> {
    Ok(ok(order_by_client_json(state, account_id, client_id).await?))
}

async fn order_by_client_json(
    state: &Shared,
    account_id: AccountId,
    client_id: &str,
) -> ApiResult<Value> {
    let record = state
        .link
        .order_by_client(account_id, client_id)
        .await?
        .ok_or_else(ApiError::unknown_order)?;
    let reference = state.reference_knowing(record.instrument.index() + 1).await?;
    Ok(order_json(&reference, &record))
}

pub async fn list_orders(
    State(state): State<Shared>,
    Extension(caller): Extension<Caller>,
    ApiQuery(query): ApiQuery<OrdersQuery>,
) -> ApiResult<Response> {
    let account = caller.account()?;
    let Some(account_id) = state.account_id(account).await? else {
        return Ok(ok(json!({ "orders": [] })));
    };
    if let Some(client_id) = query.client_order_id {
        return show_order_by_client(&state, account_id, &client_id).await;
    }
    let finished = match query.status.as_deref() {
        None | Some("open") => false,
        Some("finished") => true,
        Some(other) => {
            return Err(ApiError::malformed(format!("status is open or finished, not {other:?}")))
        }
    };
    let records: Vec<OrderRecord> = state
        .link
        .read(move |venue| {
            let Some(activity) = venue.activity() else { return Vec::new() };
            if finished {
                activity.finished_orders(account_id).cloned().collect()
            } else {
                activity.open_orders(account_id).cloned().collect()
            }
        })
        .await?;
    let reference = state.reference_for(records.iter().map(|record| record.instrument)).await?;
    let symbol = query.symbol;
    let orders: Vec<Value> = records
        .iter()
        .filter(|record| matches_symbol(&reference, record.instrument, symbol.as_deref()))
        .map(|record| order_json(&reference, record))
        .collect();
    Ok(ok(json!({ "orders": orders })))
}

fn matches_symbol(
    reference: &Reference,
    instrument: bourse_core::ids::InstrumentId,
    symbol: Option<&str>,
) -> bool {
    symbol.is_none_or(|symbol| {
        reference.instrument(instrument).is_some_and(|info| info.symbol == symbol)
    })
}

pub async fn fills(
    State(state): State<Shared>,
    Extension(caller): Extension<Caller>,
    ApiQuery(query): ApiQuery<FillsQuery>,
) -> ApiResult<Response> {
    let account = caller.account()?;
    let Some(account_id) = state.account_id(account).await? else {
        return Ok(ok(json!({ "fills": [] })));
    };
    let fills = state
        .link
        .read(move |venue| {
            venue.activity().map_or_else(Vec::new, |activity| {
                activity.fills(account_id).cloned().collect::<Vec<_>>()
            })
        })
        .await?;
    let reference = state.reference_for(fills.iter().map(|fill| fill.instrument)).await?;
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
    Extension(caller): Extension<Caller>,
) -> ApiResult<Response> {
    let account = caller.account()?.to_string();
    Ok(ok(json!({ "account": account, "balances": account_balances(&state, &account).await? })))
}

/// Every asset's `available` and `held` for `account` (zeros for one with nothing yet).
pub async fn account_balances(state: &Shared, account: &str) -> ApiResult<Value> {
    let name = account.to_string();
    let balances = state
        .link
        .read(move |venue| {
            let exchange = venue.exchange();
            let account = exchange.ledger().find_account(&name);
            exchange
                .assets()
                .iter()
                .enumerate()
                .map(|(index, spec)| {
                    let asset = bourse_core::ids::AssetId(index as u32);
                    let balance = account.map(|account| exchange.ledger().balance(account, asset));
                    let (available, held) =
                        balance.map_or((0, 0), |balance| (balance.available.0, balance.held.0));
                    (spec.name.to_string(), spec.decimals, available, held)
                })
                .collect::<Vec<_>>()
        })
        .await?;
    let mut shown = serde_json::Map::new();
    for (asset, decimals, available, held) in balances {
        shown.insert(
            asset,
            json!({ "available": decimal(i128::from(available), decimals), "held": decimal(i128::from(held), decimals) }),
        );
    }
    Ok(Value::Object(shown))
}
