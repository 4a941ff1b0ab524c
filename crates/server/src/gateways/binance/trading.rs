//! Binance's signed endpoints: the account's balances, orders (new, status, cancel,
//! open, all) and trades. Every one acts for the account of the key that signed it
//! and finds only that account's orders. New orders and cancels go through the one
//! order path (`order_entry`): answered once durable, a reused client order id refused
//! with the order it names, the same rules as `/v1/orders`.

use std::borrow::Cow;

use axum::extract::State;
use axum::response::{IntoResponse, Response};
use axum::Json;
use bourse_core::command::OrderType;
use bourse_core::ids::{InstrumentId, OrderId};
use bourse_core::{Decimal, Offset, OrderSize, RejectReason, Side, StpMode, TimeInForce};
use serde_json::{json, Value};

use super::error::{BinanceError, BinanceResult};
use super::market::instrument;
use super::params::{Params, Selection};
use super::shapes::{self, ms, order_json, trade_id};
use super::BinanceRequest;
use crate::port::error::{ApiError, ErrorCode};
use crate::port::orders::answer::View;
use crate::port::orders::request::{CheckedClientOrderId, NewOrder, Request, Target};
use crate::port::queries::{Fill, OrderRecord, OrdersAndFills, Which};
use crate::port::session::Session;
use crate::port::state::Shared;
use crate::reference::decimal;

const LIST_DEFAULT: usize = 500;
const LIST_MAX: usize = 1_000;

fn ok(value: Value) -> Response {
    Json(value).into_response()
}

fn decimal_param(params: &Params<'_>, name: &str) -> BinanceResult<Option<Decimal>> {
    params
        .get(name)
        .map(|text| {
            Decimal::parse(text).filter(|value| value.is_positive()).ok_or_else(|| {
                BinanceError::bad_request(-1100, format!("Illegal characters found in parameter '{name}'; legal range is '^([0-9]{{1,20}})(\\.[0-9]{{1,20}})?$'."))
            })
        })
        .transpose()
}

fn not_required(name: &str) -> BinanceError {
    BinanceError::bad_request(-1106, format!("Parameter '{name}' sent when not required."))
}

/// The account's engine id, or `None` before its first deposit (nothing to show).
/// `GET /api/v3/account`: every asset's `free` (available) and `locked` (held).
pub async fn account(
    State(state): State<Shared>,
    request: BinanceRequest,
) -> BinanceResult<Response> {
    let (caller, params) = request.signed(&state)?;
    params.only(&["omitZeroBalances"])?;
    let omit_zero = match params.get("omitZeroBalances") {
        None | Some("false") => false,
        Some("true") => true,
        Some(other) => return Err(BinanceError::invalid_value("omitZeroBalances", other)),
    };
    let balances = state.queries.balances(&caller).await?;
    let shown: Vec<Value> = balances
        .iter()
        .filter(|balance| !omit_zero || balance.available != 0 || balance.held != 0)
        .map(|balance| {
            json!({
                "asset": balance.asset,
                "free": decimal(i128::from(balance.available), balance.decimals),
                "locked": decimal(i128::from(balance.held), balance.decimals),
            })
        })
        .collect();
    Ok(ok(json!({
        "canTrade": true,
        "canWithdraw": false,
        "canDeposit": false,
        "brokered": false,
        "requireSelfTradePrevention": false,
        "preventSor": false,
        "updateTime": bourse_protocol::signing::now_ms(),
        "accountType": "SPOT",
        "balances": shown,
        "permissions": ["SPOT"],
    })))
}

/// The order a request names by `orderId` or `origClientOrderId`.
fn target<'a>(params: &'a Params<'_>) -> BinanceResult<Target<'a>> {
    if let Some(order_id) = params.number("orderId")? {
        return Ok(Target::OrderId(OrderId(order_id)));
    }
    match params.get("origClientOrderId") {
        Some(client_order_id) => Ok(Target::ClientOrderId(Cow::Borrowed(client_order_id))),
        None => Err(BinanceError::bad_request(
            -1102,
            "Param 'origClientOrderId' or 'orderId' must be sent, but both were empty/null!",
        )),
    }
}

/// The account's order `target` on `instrument` with what its fills add up to, read
/// at once; `None` when the account has no such order there.
async fn read_order(
    state: &Shared,
    caller: &Session,
    instrument: InstrumentId,
    target: &Target<'_>,
) -> BinanceResult<Option<(OrderRecord, Option<i128>)>> {
    let found = state.queries.order_with_fills(caller, instrument, target).await?;
    Ok(found.and_then(|found| with_notionals(found).into_iter().next()))
}

/// Each order with what its fills add up to (`None` when older fills were forgotten).
fn with_notionals(found: OrdersAndFills) -> Vec<(OrderRecord, Option<i128>)> {
    let notionals = found.filled_notionals();
    found
        .orders
        .into_iter()
        .map(|record| {
            let notional = notionals.get(&record.order_id).copied();
            (record, notional)
        })
        .collect()
}

/// `GET /api/v3/order`.
pub async fn get_order(
    State(state): State<Shared>,
    request: BinanceRequest,
) -> BinanceResult<Response> {
    let (caller, params) = request.signed(&state)?;
    params.only(&["symbol", "orderId", "origClientOrderId"])?;
    let (instrument, info, _) = instrument(&state, params.required("symbol")?).await?;
    let target = target(&params)?;
    let (record, notional) = read_order(&state, &caller, instrument, &target)
        .await?
        .ok_or_else(|| BinanceError::bad_request(-2013, "Order does not exist."))?;
    Ok(ok(Value::Object(order_json(&info, &record, notional))))
}

/// `DELETE /api/v3/order`: the order as it stands after the cancel.
pub async fn cancel_order(
    State(state): State<Shared>,
    request: BinanceRequest,
) -> BinanceResult<Response> {
    let (caller, params) = request.signed(&state)?;
    params.only(&[
        "symbol",
        "orderId",
        "origClientOrderId",
        "newClientOrderId",
        "cancelRestrictions",
    ])?;
    if params.get("cancelRestrictions").is_some() {
        return Err(not_required("cancelRestrictions"));
    }
    let (instrument, info, _) = instrument(&state, params.required("symbol")?).await?;
    let target = target(&params)?;
    // The order must be the account's and on this symbol (else: Binance's unknown order).
    let (record, _) = read_order(&state, &caller, instrument, &target)
        .await?
        .ok_or_else(BinanceError::unknown_order_sent)?;
    let client_order_id = record.client_id.as_str().to_string();
    let by_client = Target::ClientOrderId(Cow::Borrowed(client_order_id.as_str()));
    let answer =
        match state.entry.submit_and_wait(&caller, &Request::Cancel(by_client.clone())).await {
            Ok(answer) => answer,
            Err(error) if error.code == ErrorCode::Rejected(RejectReason::UnknownOrder) => {
                return Err(BinanceError::unknown_order_sent())
            }
            Err(error) => return Err(error.into()),
        };
    let (record, notional) = read_order(&state, &caller, instrument, &by_client)
        .await?
        .ok_or_else(BinanceError::unknown_order_sent)?;
    let mut shown = order_json(&info, &record, notional);
    shown.insert("origClientOrderId".into(), json!(client_order_id));
    shown.insert("transactTime".into(), json!(ms(answer.stamp.ts_ns.0)));
    Ok(ok(Value::Object(shown)))
}

/// `POST /api/v3/order`: `LIMIT` (with `timeInForce` GTC, IOC or FOK), `LIMIT_MAKER`
/// (post-only) and `MARKET` (by `quantity`, or a buy by `quoteOrderQty`: the engine's
/// spend-amount buy); answered as `newOrderRespType` asks (`FULL` by default, with the
/// order's fills).
pub async fn new_order(
    State(state): State<Shared>,
    request: BinanceRequest,
) -> BinanceResult<Response> {
    let (caller, params) = request.signed(&state)?;
    params.only(&[
        "symbol",
        "side",
        "type",
        "timeInForce",
        "quantity",
        "quoteOrderQty",
        "price",
        "newClientOrderId",
        "newOrderRespType",
        "selfTradePreventionMode",
    ])?;
    let (_, info, _) = instrument(&state, params.required("symbol")?).await?;
    let side = match params.required("side")? {
        "BUY" => Side::Buy,
        "SELL" => Side::Sell,
        _ => return Err(BinanceError::bad_request(-1117, "Invalid side.")),
    };
    let kind = params.required("type")?;
    let (price, qty, amount) = (
        decimal_param(&params, "price")?,
        decimal_param(&params, "quantity")?,
        decimal_param(&params, "quoteOrderQty")?,
    );
    let time_in_force = params.get("timeInForce");
    let (order_type, time_in_force, post_only, size) = match kind {
        "LIMIT" | "LIMIT_MAKER" => {
            let price = price.ok_or_else(|| super::params::missing("price"))?;
            let qty = qty.ok_or_else(|| super::params::missing("quantity"))?;
            if amount.is_some() {
                return Err(not_required("quoteOrderQty"));
            }
            let time_in_force = match (kind, time_in_force) {
                ("LIMIT", None) => return Err(super::params::missing("timeInForce")),
                ("LIMIT", Some("GTC")) => TimeInForce::GoodTillCancel,
                ("LIMIT", Some("IOC")) => TimeInForce::ImmediateOrCancel,
                ("LIMIT", Some("FOK")) => TimeInForce::FillOrKill,
                ("LIMIT", Some(_)) => {
                    return Err(BinanceError::bad_request(-1115, "Invalid timeInForce."))
                }
                (_, Some(_)) => return Err(not_required("timeInForce")),
                (_, None) => TimeInForce::GoodTillCancel,
            };
            let size = OrderSize::of_qty(qty);
            (OrderType::Limit { price }, time_in_force, kind == "LIMIT_MAKER", size)
        }
        "MARKET" => {
            if price.is_some() {
                return Err(not_required("price"));
            }
            if time_in_force.is_some() {
                return Err(not_required("timeInForce"));
            }
            let size = match (qty, amount) {
                (Some(qty), None) => OrderSize::of_qty(qty),
                // The engine's spend-amount buy (`orders.md`): the journal records the
                // order as sent, and the engine decides what it buys (and refuses it
                // on a sell, `invalid_order`).
                (None, Some(amount)) => OrderSize::of_quote_qty(amount),
                (None, None) => return Err(BinanceError::bad_request(
                    -1102,
                    "Param 'quantity' or 'quoteOrderQty' must be sent, but both were empty/null!",
                )),
                (Some(_), Some(_)) => {
                    return Err(BinanceError::bad_request(
                        -1128,
                        "Combination of optional parameters invalid: quantity and quoteOrderQty.",
                    ))
                }
            };
            (OrderType::Market, TimeInForce::ImmediateOrCancel, false, size)
        }
        _ => return Err(BinanceError::bad_request(-1116, "Invalid orderType.")),
    };
    let stp = match params.get("selfTradePreventionMode") {
        None | Some("EXPIRE_TAKER") => StpMode::CancelTaker,
        Some("EXPIRE_MAKER") => StpMode::CancelMaker,
        Some("EXPIRE_BOTH") => StpMode::CancelBoth,
        Some("NONE") => StpMode::None,
        Some(other) => return Err(BinanceError::invalid_value("selfTradePreventionMode", other)),
    };
    let response_type = match params.get("newOrderRespType") {
        None | Some("FULL") => ResponseType::Full,
        Some("RESULT") => ResponseType::Result,
        Some("ACK") => ResponseType::Ack,
        Some(other) => return Err(BinanceError::invalid_value("newOrderRespType", other)),
    };
    let order = NewOrder {
        client_order_id: params
            .get("newClientOrderId")
            .map(CheckedClientOrderId::parse)
            .transpose()
            .map_err(|invalid| BinanceError::from(ApiError::from(invalid)))?,
        symbol: Cow::Borrowed(info.symbol.as_str()),
        side,
        order_type,
        size,
        time_in_force,
        post_only,
        stp,
        offset: Offset::Open,
    };
    let answer = state.entry.submit_and_wait(&caller, &Request::Place(order)).await?;
    let View::Placed(placed) = &answer.view else {
        return Err(ApiError::malformed("a new order's answer shows the order").into());
    };
    let record = &placed.record;
    let mut shown = serde_json::Map::new();
    shown.insert("symbol".into(), json!(params.required("symbol")?));
    shown.insert("orderId".into(), json!(record.order_id.0));
    shown.insert("orderListId".into(), json!(-1));
    shown.insert("clientOrderId".into(), json!(record.client_id.as_str()));
    shown.insert("transactTime".into(), json!(ms(answer.stamp.ts_ns.0)));
    if response_type == ResponseType::Ack {
        return Ok(ok(Value::Object(shown)));
    }
    // Every fill of a new order is in its answer: the sum is exact.
    let filled: i128 =
        placed.fills.iter().map(|fill| i128::from(fill.price.0) * i128::from(fill.qty.0)).sum();
    for (name, value) in order_json(&info, record, Some(filled)) {
        if !matches!(
            name.as_str(),
            "time" | "updateTime" | "isWorking" | "stopPrice" | "icebergQty"
        ) {
            shown.entry(name).or_insert(value);
        }
    }
    if let Some(amount) = amount {
        shown.insert("origQuoteOrderQty".into(), json!(amount.to_string()));
    }
    if response_type == ResponseType::Full {
        let fills: Vec<Value> = placed
            .fills
            .iter()
            .map(|fill| shapes::new_order_fill_json(&placed.reference, &info, fill))
            .collect();
        shown.insert("fills".into(), Value::Array(fills));
    }
    Ok(ok(Value::Object(shown)))
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum ResponseType {
    Ack,
    Result,
    Full,
}

/// The account's orders on `instrument` (open ones, or also the finished ones it
/// remembers), oldest first, each with what its fills add up to.
async fn orders(
    state: &Shared,
    caller: &Session,
    instrument: Option<InstrumentId>,
    finished_too: bool,
) -> BinanceResult<Vec<(OrderRecord, Option<i128>)>> {
    let which = if finished_too { Which::OpenThenFinished } else { Which::Open };
    let mut found =
        with_notionals(state.queries.orders_with_fills(caller, which, instrument).await?);
    found.sort_by_key(|(record, _)| record.order_id);
    Ok(found)
}

/// `GET /api/v3/openOrders`: of one symbol, or of every symbol.
pub async fn open_orders(
    State(state): State<Shared>,
    request: BinanceRequest,
) -> BinanceResult<Response> {
    let (caller, params) = request.signed(&state)?;
    params.only(&["symbol"])?;
    let instrument = match params.get("symbol") {
        Some(symbol) => Some(instrument(&state, symbol).await?.0),
        None => None,
    };
    let found = orders(&state, &caller, instrument, false).await?;
    let reference =
        state.directory.reference_for(found.iter().map(|(record, _)| record.instrument)).await?;
    let shown: Vec<Value> = found
        .iter()
        .filter_map(|(record, notional)| {
            let info = reference.instrument(record.instrument)?;
            shapes::binance_symbol(info)?;
            Some(Value::Object(order_json(info, record, *notional)))
        })
        .collect();
    Ok(ok(Value::Array(shown)))
}

/// `GET /api/v3/allOrders`: open and finished orders of a symbol (the finished ones
/// the venue remembers: the latest 1,024 per account).
pub async fn all_orders(
    State(state): State<Shared>,
    request: BinanceRequest,
) -> BinanceResult<Response> {
    let (caller, params) = request.signed(&state)?;
    params.only(&["symbol", "orderId", "startTime", "endTime", "limit"])?;
    let (instrument, info, _) = instrument(&state, params.required("symbol")?).await?;
    let selection = Selection::read(&params, LIST_DEFAULT, LIST_MAX, Some("orderId"))?;
    let found: Vec<_> = orders(&state, &caller, Some(instrument), true)
        .await?
        .into_iter()
        .filter(|(record, _)| selection.admits(record.order_id.0, ms(record.created_ns.0)))
        .collect();
    let shown: Vec<Value> = selection
        .window(&found)
        .iter()
        .map(|(record, notional)| Value::Object(order_json(&info, record, *notional)))
        .collect();
    Ok(ok(Value::Array(shown)))
}

/// `GET /api/v3/myTrades`: the account's fills on a symbol (the latest 1,024 per
/// account are remembered).
pub async fn my_trades(
    State(state): State<Shared>,
    request: BinanceRequest,
) -> BinanceResult<Response> {
    let (caller, params) = request.signed(&state)?;
    params.only(&["symbol", "orderId", "startTime", "endTime", "fromId", "limit"])?;
    let (instrument, info, reference) = instrument(&state, params.required("symbol")?).await?;
    let selection = Selection::read(&params, LIST_DEFAULT, LIST_MAX, Some("fromId"))?;
    let order = params.number("orderId")?;
    let fills = state.queries.fills(&caller, Some(instrument)).await?;
    let fills: Vec<&Fill> = fills
        .iter()
        .filter(|fill| {
            order.is_none_or(|order| fill.order_id.0 == order)
                && selection.admits(trade_id(fill.seq, fill.trade_index), ms(fill.ts_ns.0))
        })
        .collect();
    let shown: Vec<Value> = selection
        .window(&fills)
        .iter()
        .map(|fill| shapes::my_trade_json(&reference, &info, fill))
        .collect();
    Ok(ok(Value::Array(shown)))
}
