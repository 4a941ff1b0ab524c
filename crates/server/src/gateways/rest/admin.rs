//! Administration: assets, instruments, accounts (and their passwords), API keys and
//! money in and out. Every handler needs an admin key, but `own_key`, which tells any
//! key about itself. Assets, instruments, deposits and withdrawals are engine commands
//! (journaled, replayed); accounts and keys are the key store's; passwords are set and
//! removed through `passwords`, and never shown.

use std::borrow::Cow;

use axum::body::Bytes;
use axum::extract::State;
use axum::response::Response;
use axum::Extension;
use bourse_core::command::{InstrumentCommand, TransferCommand};
use bourse_core::{Command, Event};
use serde::Deserialize;
use serde_json::{json, Value};

use super::extract::{created, ok, ApiPath, ApiQuery};
use crate::gateways::shared::json::{parse_body, parse_decimal};
use crate::keys::{KeyChange, KeyRecord, Role};
use crate::port::error::{ApiError, ApiResult, ErrorCode};
use crate::port::session::Session;
use crate::port::state::Shared;
use crate::render::{balances_json, instrument_json};

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AssetRequest {
    asset: String,
    decimals: i64,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct InstrumentRequest {
    symbol: String,
    base: String,
    quote: String,
    tick: String,
    lot: String,
    min_qty: String,
    max_qty: String,
    maker_fee_bps: i64,
    taker_fee_bps: i64,
    market_band_bps: i64,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AccountRequest {
    name: String,
}

/// `PUT /v1/admin/accounts/{account}/password`. No `Debug`: it holds a password.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PasswordRequest {
    password: String,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct KeyRequest {
    account: String,
    label: Option<String>,
    /// The key's own requests per second (default: the server's limit).
    requests_per_second: Option<u32>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CancelAllQuery {
    symbol: Option<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TransferRequest {
    account: String,
    asset: String,
    amount: String,
}

/// Submits an admin command through the port's operator side; its `rejected` reason
/// becomes the error. Returns its sequence number.
async fn submit_admin(state: &Shared, caller: &Session, command: &Command<'_>) -> ApiResult<u64> {
    Ok(state.operator.submit(caller, command).await?.0)
}

pub async fn create_asset(
    State(state): State<Shared>,
    Extension(caller): Extension<Session>,
    body: Bytes,
) -> ApiResult<Response> {
    caller.require_admin()?;
    let request: AssetRequest = parse_body(&body)?;
    let command =
        Command::Asset { asset: Cow::Borrowed(&request.asset), decimals: request.decimals };
    let seq = submit_admin(&state, &caller, &command).await?;
    Ok(created(json!({ "asset": request.asset, "decimals": request.decimals, "seq": seq })))
}

pub async fn create_instrument(
    State(state): State<Shared>,
    Extension(caller): Extension<Session>,
    body: Bytes,
) -> ApiResult<Response> {
    caller.require_admin()?;
    let request: InstrumentRequest = parse_body(&body)?;
    let command = Command::Instrument(Box::new(InstrumentCommand {
        symbol: Cow::Borrowed(&request.symbol),
        base: Cow::Borrowed(&request.base),
        quote: Cow::Borrowed(&request.quote),
        tick: parse_decimal("tick", &request.tick)?,
        lot: parse_decimal("lot", &request.lot)?,
        min_qty: parse_decimal("min_qty", &request.min_qty)?,
        max_qty: parse_decimal("max_qty", &request.max_qty)?,
        maker_fee_bps: request.maker_fee_bps,
        taker_fee_bps: request.taker_fee_bps,
        market_band_bps: request.market_band_bps,
    }));
    let seq = submit_admin(&state, &caller, &command).await?;
    let reference = state.directory.refresh_reference().await?;
    let shown = reference
        .find_instrument(&request.symbol)
        .map_or(Value::Null, |(_, info)| instrument_json(info));
    Ok(created(json!({ "instrument": shown, "seq": seq })))
}

pub async fn create_account(
    State(state): State<Shared>,
    Extension(caller): Extension<Session>,
    body: Bytes,
) -> ApiResult<Response> {
    caller.require_admin()?;
    let request: AccountRequest = parse_body(&body)?;
    let change = KeyChange::CreateAccount {
        name: request.name,
        created_ms: bourse_protocol::signing::now_ms(),
    };
    let record = state.key_changes.apply(change).await?.account()?;
    Ok(created(json!({ "account": record.name, "created_ms": record.created_ms })))
}

pub async fn list_accounts(
    State(state): State<Shared>,
    Extension(caller): Extension<Session>,
) -> ApiResult<Response> {
    caller.require_admin()?;
    let accounts: Vec<Value> = state
        .keys
        .accounts()
        .into_iter()
        .map(|account| {
            json!({
                "account": account.name,
                "created_ms": account.created_ms,
                "has_password": account.has_password(),
            })
        })
        .collect();
    Ok(ok(json!({ "accounts": accounts })))
}

/// Sets an account's password (for logins by name and password: tqsdk's); replaces
/// any it had, which ends the tokens issued under that one.
pub async fn set_password(
    State(state): State<Shared>,
    Extension(caller): Extension<Session>,
    ApiPath(account): ApiPath<String>,
    body: Bytes,
) -> ApiResult<Response> {
    caller.require_admin()?;
    let request: PasswordRequest = parse_body(&body)?;
    state.passwords.set(&account, &request.password).await?;
    Ok(ok(json!({ "account": account, "has_password": true })))
}

/// Removes an account's password: it can no longer log in with one.
pub async fn remove_password(
    State(state): State<Shared>,
    Extension(caller): Extension<Session>,
    ApiPath(account): ApiPath<String>,
) -> ApiResult<Response> {
    caller.require_admin()?;
    let removed = state.passwords.remove(&account).await?;
    Ok(ok(json!({ "account": account, "has_password": false, "removed": removed })))
}

pub async fn account_balances_admin(
    state: &Shared,
    caller: &Session,
    account: &str,
) -> ApiResult<Value> {
    if state.keys.account(account).is_none() {
        return Err(ApiError::new(
            ErrorCode::UnknownAccount,
            format!("unknown account {account:?}"),
        ));
    }
    Ok(balances_json(&state.operator.balances(caller, account).await?))
}

pub async fn account_balances_route(
    State(state): State<Shared>,
    Extension(caller): Extension<Session>,
    ApiPath(account): ApiPath<String>,
) -> ApiResult<Response> {
    caller.require_admin()?;
    let balances = account_balances_admin(&state, &caller, &account).await?;
    Ok(ok(json!({ "account": account, "balances": balances })))
}

/// `GET /v1/key`: the key that signed the request, as the key list shows it (its role
/// and account), for an admin or a trader key alike: how a client such as the web
/// screens learns what it logged in as without a request that one role is refused.
pub async fn own_key(Extension(caller): Extension<Session>) -> ApiResult<Response> {
    let key = caller.key().ok_or_else(|| {
        ApiError::forbidden("this request needs a key: a password login has none")
    })?;
    Ok(ok(key_json(key)))
}

fn key_json(key: &KeyRecord) -> Value {
    json!({
        "key": key.id,
        "role": key.role,
        "account": key.account,
        "label": key.label,
        "created_ms": key.created_ms,
        "revoked": key.revoked,
        "requests_per_second": key.requests_per_second,
    })
}

pub async fn create_key(
    State(state): State<Shared>,
    Extension(caller): Extension<Session>,
    body: Bytes,
) -> ApiResult<Response> {
    caller.require_admin()?;
    let request: KeyRequest = parse_body(&body)?;
    let label = request.label.unwrap_or_default();
    let change = state.keys.new_key(
        Role::Trader,
        Some(request.account.as_str()),
        &label,
        request.requests_per_second,
        bourse_protocol::signing::now_ms(),
    )?;
    let key = state.key_changes.apply(change).await?.key()?;
    let secret = state.keys.secret_of(&key.id);
    let mut shown = key_json(&key);
    if let Some(object) = shown.as_object_mut() {
        object.insert("secret".to_string(), Value::String(secret.expose().to_string()));
    }
    Ok(created(shown))
}

pub async fn list_keys(
    State(state): State<Shared>,
    Extension(caller): Extension<Session>,
) -> ApiResult<Response> {
    caller.require_admin()?;
    let keys: Vec<Value> = state.keys.keys().iter().map(key_json).collect();
    Ok(ok(json!({ "keys": keys })))
}

pub async fn revoke_key(
    State(state): State<Shared>,
    Extension(caller): Extension<Session>,
    ApiPath(key_id): ApiPath<String>,
) -> ApiResult<Response> {
    caller.require_admin()?;
    let key = state.key_changes.apply(KeyChange::Revoke { id: key_id }).await?.key()?;
    Ok(ok(key_json(&key)))
}

async fn transfer(
    state: &Shared,
    caller: &Session,
    body: &Bytes,
    deposit: bool,
) -> ApiResult<Response> {
    let request: TransferRequest = parse_body(body)?;
    if state.keys.account(&request.account).is_none() {
        return Err(ApiError::new(
            ErrorCode::UnknownAccount,
            format!("unknown account {:?} (create it first)", request.account),
        ));
    }
    let transfer = TransferCommand {
        account: Cow::Borrowed(&request.account),
        asset: Cow::Borrowed(&request.asset),
        amount: parse_decimal("amount", &request.amount)?,
    };
    let command = if deposit { Command::Deposit(transfer) } else { Command::Withdraw(transfer) };
    let seq = submit_admin(state, caller, &command).await?;
    let balances = balances_json(&state.operator.balances(caller, &request.account).await?);
    Ok(ok(json!({ "seq": seq, "account": request.account, "balances": balances })))
}

pub async fn deposit(
    State(state): State<Shared>,
    Extension(caller): Extension<Session>,
    body: Bytes,
) -> ApiResult<Response> {
    caller.require_admin()?;
    transfer(&state, &caller, &body, true).await
}

pub async fn withdraw(
    State(state): State<Shared>,
    Extension(caller): Extension<Session>,
    body: Bytes,
) -> ApiResult<Response> {
    caller.require_admin()?;
    transfer(&state, &caller, &body, false).await
}

async fn halt_or_resume(
    state: &Shared,
    caller: &Session,
    symbol: String,
    halt: bool,
) -> ApiResult<Response> {
    let command = if halt {
        Command::Halt { symbol: Cow::Borrowed(&symbol) }
    } else {
        Command::Resume { symbol: Cow::Borrowed(&symbol) }
    };
    let seq = submit_admin(state, caller, &command).await?;
    Ok(ok(json!({ "symbol": symbol, "halted": halt, "seq": seq })))
}

/// Halts an instrument: new orders and amends on it are rejected `instrument_halted`;
/// cancels still work.
pub async fn halt(
    State(state): State<Shared>,
    Extension(caller): Extension<Session>,
    ApiPath(symbol): ApiPath<String>,
) -> ApiResult<Response> {
    caller.require_admin()?;
    halt_or_resume(&state, &caller, symbol, true).await
}

pub async fn resume(
    State(state): State<Shared>,
    Extension(caller): Extension<Session>,
    ApiPath(symbol): ApiPath<String>,
) -> ApiResult<Response> {
    caller.require_admin()?;
    halt_or_resume(&state, &caller, symbol, false).await
}

/// Cancels every open order of an account (on one instrument with `?symbol=`), in one
/// engine command.
pub async fn cancel_all(
    State(state): State<Shared>,
    Extension(caller): Extension<Session>,
    ApiPath(account): ApiPath<String>,
    ApiQuery(query): ApiQuery<CancelAllQuery>,
) -> ApiResult<Response> {
    caller.require_admin()?;
    if state.keys.account(&account).is_none() {
        return Err(ApiError::new(
            ErrorCode::UnknownAccount,
            format!("unknown account {account:?}"),
        ));
    }
    let command = Command::CancelAll {
        account: bourse_core::AccountRef::Name(Cow::Borrowed(&account)),
        symbol: query.symbol.as_deref().map(Cow::Borrowed),
    };
    let (seq, events) = state.operator.submit(&caller, &command).await?;
    let canceled: Vec<&str> = events
        .iter()
        .filter_map(|event| match event {
            Event::Done { id, .. } => Some(id.as_str()),
            _ => None,
        })
        .collect();
    Ok(ok(json!({ "account": account, "canceled": canceled, "seq": seq })))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MemberRequest {
    node: u64,
}

/// A change of the cluster's membership (`add` or `remove` the request's node), on
/// this node (the leader), or why this server makes none.
async fn change_member(
    state: &Shared,
    caller: &Session,
    body: &Bytes,
    add: bool,
) -> ApiResult<Response> {
    caller.require_admin()?;
    let request: MemberRequest = parse_body(body)?;
    let membership = state
        .membership
        .as_deref()
        .ok_or_else(|| ApiError::malformed("this server is not a node of a cluster"))?;
    let done = match add {
        true => membership.add(request.node).await?,
        false => membership.remove(request.node).await?,
    };
    Ok(ok(done))
}

/// `POST /v1/admin/cluster/add`: adds a node of the cluster's file (as a learner until
/// it has caught up, then as a voter), on the leader.
pub async fn add_node(
    State(state): State<Shared>,
    Extension(caller): Extension<Session>,
    body: Bytes,
) -> ApiResult<Response> {
    change_member(&state, &caller, &body, true).await
}

/// `POST /v1/admin/cluster/remove`: removes a node from the cluster, on the leader.
pub async fn remove_node(
    State(state): State<Shared>,
    Extension(caller): Extension<Session>,
    body: Bytes,
) -> ApiResult<Response> {
    change_member(&state, &caller, &body, false).await
}
