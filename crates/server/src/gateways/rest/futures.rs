//! Futures over REST: a trader's positions and account view (QIFI's fields), and the
//! operator's contract administration: declare (margin per lot, or as a ratio of the
//! settlement price), change the margin, post a settlement price, settle (daily or
//! final), liquidate. Each administration is an engine command (journaled, replayed);
//! the settings the engine does not keep are `futures::settings`'.

use std::borrow::Cow;

use axum::body::Bytes;
use axum::extract::State;
use axum::response::Response;
use axum::Extension;
use bourse_core::command::FutureCommand;
use bourse_core::{AccountRef, Command, Decimal, Event};
use bourse_protocol::futures_symbol;
use serde::Deserialize;
use serde_json::{json, Value};

use super::extract::{created, ok, ApiPath};
use crate::gateways::shared::json::{parse_body, parse_decimal};
use crate::port::error::{ApiError, ApiResult, ErrorCode};
use crate::port::session::Session;
use crate::port::state::Shared;
use crate::render::instrument_json;
use crate::services::clearing::settings::{ratio_margin, SettingsChange};

/// `GET /v1/positions`: the caller's futures positions, by symbol.
pub async fn positions(
    State(state): State<Shared>,
    Extension(caller): Extension<Session>,
) -> ApiResult<Response> {
    let view = state.queries.futures(&caller).await?;
    Ok(ok(json!({ "account": caller.account()?, "positions": view["positions"] })))
}

/// `GET /v1/account`: the caller's futures account per settle asset, and positions.
pub async fn account(
    State(state): State<Shared>,
    Extension(caller): Extension<Session>,
) -> ApiResult<Response> {
    let view = state.queries.futures(&caller).await?;
    Ok(ok(json!({
        "account": caller.account()?, "accounts": view["accounts"], "positions": view["positions"],
    })))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FutureRequest {
    symbol: String,
    settle: String,
    tick: String,
    lot: String,
    min_qty: String,
    max_qty: String,
    multiplier: String,
    /// A fixed margin per lot, or:
    margin: Option<String>,
    /// ... a share of a lot's value at the settlement price, restated after each
    /// settlement; the first margin is taken at `settlement_price`.
    margin_ratio: Option<String>,
    settlement_price: Option<String>,
    maker_fee: String,
    taker_fee: String,
    market_band_bps: i64,
    #[serde(default)]
    close_today: bool,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MarginRequest {
    margin: Option<String>,
    margin_ratio: Option<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SettleRequest {
    price: Option<String>,
    #[serde(default, rename = "final")]
    is_final: bool,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PriceRequest {
    price: String,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LiquidateRequest {
    account: String,
}

/// A margin ratio: a positive decimal of at most 1.
fn parse_ratio(text: &str) -> ApiResult<Decimal> {
    let ratio = parse_decimal("margin_ratio", text)?;
    if ratio.mantissa() <= 0 || ratio.mantissa() > 10i128.pow(ratio.scale()) {
        return Err(ApiError::malformed("margin_ratio must be more than 0 and at most 1"));
    }
    Ok(ratio)
}

/// A contract's symbol must follow the futures rule (`EXCHANGE.code`, as China's
/// exchanges and tqsdk name contracts): `400 invalid_symbol` with the form and an
/// example otherwise.
fn check_symbol(symbol: &str) -> ApiResult<()> {
    futures_symbol::split(symbol).map(|_| ()).map_err(|error| {
        ApiError::new(ErrorCode::InvalidSymbol, format!("symbol {symbol:?}: {error}"))
    })
}

/// `POST /v1/admin/futures`: declares a contract.
pub async fn create_future(
    State(state): State<Shared>,
    Extension(caller): Extension<Session>,
    body: Bytes,
) -> ApiResult<Response> {
    caller.require_admin()?;
    let request: FutureRequest = parse_body(&body)?;
    check_symbol(&request.symbol)?;
    let lot = parse_decimal("lot", &request.lot)?;
    let multiplier = parse_decimal("multiplier", &request.multiplier)?;
    let (margin, ratio) = match (&request.margin, &request.margin_ratio, &request.settlement_price)
    {
        (Some(margin), None, _) => (parse_decimal("margin", margin)?, None),
        (None, Some(ratio), Some(price)) => {
            let ratio_value = parse_ratio(ratio)?;
            let price = parse_decimal("settlement_price", price)?;
            let reference = state.directory.refresh_reference().await?;
            let decimals = reference
                .find_asset(&request.settle)
                .and_then(|asset| reference.asset(asset))
                .map(|(_, decimals)| *decimals)
                .ok_or_else(|| ApiError::rejected(bourse_core::RejectReason::UnknownAsset))?;
            let units = ratio_margin(ratio_value, price, lot, multiplier, decimals)
                .ok_or_else(|| ApiError::malformed("the margin ratio gives no valid margin"))?;
            (Decimal::from_units(i128::from(units), decimals), Some(ratio.clone()))
        }
        _ => {
            return Err(ApiError::malformed(
                "give margin (per lot), or margin_ratio with a settlement_price",
            ))
        }
    };
    let command = Command::Future(Box::new(FutureCommand {
        symbol: Cow::Borrowed(&request.symbol),
        settle: Cow::Borrowed(&request.settle),
        tick: parse_decimal("tick", &request.tick)?,
        lot,
        min_qty: parse_decimal("min_qty", &request.min_qty)?,
        max_qty: parse_decimal("max_qty", &request.max_qty)?,
        multiplier,
        margin,
        maker_fee: parse_decimal("maker_fee", &request.maker_fee)?,
        taker_fee: parse_decimal("taker_fee", &request.taker_fee)?,
        market_band_bps: request.market_band_bps,
        close_today: request.close_today,
    }));
    let (seq, _) = state.operator.submit(&caller, &command).await?;
    let symbol = request.symbol.clone();
    state.futures.apply(SettingsChange::MarginRatio { symbol, ratio }).await?;
    let reference = state.directory.refresh_reference().await?;
    let shown = reference
        .find_instrument(&request.symbol)
        .map_or(Value::Null, |(_, info)| instrument_json(info));
    Ok(created(json!({ "instrument": shown, "margin": margin.to_string(), "seq": seq })))
}

/// `GET /v1/admin/futures`: every live contract as the operator runs it: the margin
/// per lot now (and the ratio it follows, if any), the price posted for the next
/// settlement, the mark price and the last settlement price. An expired contract is
/// not listed (it stays in `GET /v1/instruments`).
pub async fn list_futures(
    State(state): State<Shared>,
    Extension(caller): Extension<Session>,
) -> ApiResult<Response> {
    caller.require_admin()?;
    let contracts = state.operator.live_contracts(&caller).await?;
    let shown: Vec<Value> = contracts
        .iter()
        .map(|contract| {
            let settings = state.futures.settings().get(&contract.symbol);
            let margin =
                Decimal::from_units(i128::from(contract.margin_units), contract.settle_decimals);
            json!({
                "symbol": contract.symbol,
                "margin": margin.to_string(),
                "margin_ratio": settings.margin_ratio,
                "posted_price": settings.posted_price,
                "mark_price": contract.mark_price.map(|price| price.to_string()),
                "settlement_price": contract.settlement_price.map(|price| price.to_string()),
            })
        })
        .collect();
    Ok(ok(json!({ "futures": shown })))
}

/// `POST /v1/admin/futures/{symbol}/margin`: a new fixed margin per lot, or a ratio
/// (applied at the last settlement price, and after every settlement).
pub async fn set_margin(
    State(state): State<Shared>,
    Extension(caller): Extension<Session>,
    ApiPath(symbol): ApiPath<String>,
    body: Bytes,
) -> ApiResult<Response> {
    caller.require_admin()?;
    let request: MarginRequest = parse_body(&body)?;
    match (&request.margin, &request.margin_ratio) {
        (Some(margin), None) => {
            let margin = parse_decimal("margin", margin)?;
            let command = Command::Margin { symbol: Cow::Borrowed(&symbol), margin };
            let (seq, _) = state.operator.submit(&caller, &command).await?;
            let change = SettingsChange::MarginRatio { symbol: symbol.clone(), ratio: None };
            state.futures.apply(change).await?;
            Ok(ok(json!({ "symbol": symbol, "margin": margin.to_string(), "seq": seq })))
        }
        (None, Some(ratio)) => {
            parse_ratio(ratio)?;
            let facts = state.operator.contract(&caller, &symbol).await?;
            if facts.settlement_price.is_none() {
                return Err(ApiError::new(
                    ErrorCode::NoSettlementPrice,
                    format!("{symbol} has no settlement price yet to apply a ratio to"),
                ));
            }
            let ratio = Some(ratio.clone());
            state
                .futures
                .apply(SettingsChange::MarginRatio { symbol: symbol.clone(), ratio })
                .await?;
            let margin = state.operator.restate_ratio_margin(&caller, &symbol).await?;
            Ok(ok(
                json!({ "symbol": symbol, "margin_ratio": request.margin_ratio, "margin": margin }),
            ))
        }
        _ => Err(ApiError::malformed("give margin or margin_ratio")),
    }
}

/// `POST /v1/admin/futures/{symbol}/settlement-price`: the price of the next settlement.
pub async fn post_price(
    State(state): State<Shared>,
    Extension(caller): Extension<Session>,
    ApiPath(symbol): ApiPath<String>,
    body: Bytes,
) -> ApiResult<Response> {
    caller.require_admin()?;
    let request: PriceRequest = parse_body(&body)?;
    let price = parse_decimal("price", &request.price)?;
    state.operator.contract(&caller, &symbol).await?;
    let posted = price.to_string();
    let price = Some(posted.clone());
    state.futures.apply(SettingsChange::PostedPrice { symbol: symbol.clone(), price }).await?;
    Ok(ok(json!({ "symbol": symbol, "posted_price": posted })))
}

/// `POST /v1/admin/futures/{symbol}/settle`: settles now (`final`: expiry).
pub async fn settle(
    State(state): State<Shared>,
    Extension(caller): Extension<Session>,
    ApiPath(symbol): ApiPath<String>,
    body: Bytes,
) -> ApiResult<Response> {
    caller.require_admin()?;
    let request: SettleRequest = if body.is_empty() {
        SettleRequest { price: None, is_final: false }
    } else {
        parse_body(&body)?
    };
    let price = request.price.as_deref().map(|price| parse_decimal("price", price)).transpose()?;
    let done = state.operator.settle(&caller, &symbol, price, request.is_final).await?;
    Ok(ok(done))
}

/// `POST /v1/admin/futures/{symbol}/liquidate`: force-closes an account's position.
pub async fn liquidate(
    State(state): State<Shared>,
    Extension(caller): Extension<Session>,
    ApiPath(symbol): ApiPath<String>,
    body: Bytes,
) -> ApiResult<Response> {
    caller.require_admin()?;
    let request: LiquidateRequest = parse_body(&body)?;
    let command = Command::Liquidate {
        account: AccountRef::Name(Cow::Borrowed(&request.account)),
        symbol: Cow::Borrowed(&symbol),
    };
    let (seq, events) = state.operator.submit(&caller, &command).await?;
    let trades = events.iter().filter(|event| matches!(event, Event::Trade(_))).count();
    let canceled = events
        .iter()
        .filter(|event| {
            matches!(event, Event::Done { reason: bourse_core::DoneReason::Canceled, .. })
        })
        .count();
    Ok(ok(json!({
        "symbol": symbol, "account": request.account, "seq": seq,
        "orders_canceled": canceled, "trades": trades,
    })))
}
