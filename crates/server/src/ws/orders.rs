//! Order entry over WebSocket: the `order`, `cancel` and `amend` ops of a logged-in
//! connection. Each request is checked and made into its engine command by the same
//! code as REST's (`rest::trading`) and submitted at once to the connection's own lane
//! (`link::Lane`), so a connection's commands are sequenced in the order it sent them;
//! their outcomes come back on the lane and are matched oldest first (`entry`). A
//! client may pipeline up to `IN_FLIGHT_PER_CONNECTION_MAX` requests, answered in the
//! order it sent them; no task, future or channel per request (but one read for a
//! cancel's or amend's answer).

use std::borrow::Cow;
use std::time::Instant;

use bourse_core::command::AmendCommand;
use bourse_core::ids::AccountId;
use bourse_core::{AccountRef, Command};
use serde::Deserialize;
use serde_json::{Map, Value};

use crate::entry::{Answer, Work};
use crate::link::Lane;
use crate::rest::auth::Caller;
use crate::rest::error::{ApiError, ApiResult};
use crate::rest::trading::{
    amend_values, order_from_request, own_order, AmendRequest, OrderRequest,
};
use crate::rest::Shared;

/// Order-entry requests of one connection waiting for their answers, at most: at this
/// many the connection is not read until answers go out (`busy` only if one arrives
/// regardless).
pub const IN_FLIGHT_PER_CONNECTION_MAX: usize = 4_096;

/// The order-entry ops.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EntryOp {
    Order,
    Cancel,
    Amend,
}

impl EntryOp {
    /// The op of a request, if it is one of order entry's.
    pub fn of(request: &Map<String, Value>) -> Option<EntryOp> {
        match request.get("op").and_then(Value::as_str) {
            Some("order") => Some(EntryOp::Order),
            Some("cancel") => Some(EntryOp::Cancel),
            Some("amend") => Some(EntryOp::Amend),
            _ => None,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            EntryOp::Order => "order",
            EntryOp::Cancel => "cancel",
            EntryOp::Amend => "amend",
        }
    }
}

/// Which order a cancel or amend acts on: the exchange's id or the client's.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Target {
    order_id: Option<u64>,
    client_order_id: Option<String>,
}

enum Which {
    OrderId(u64),
    ClientOrderId(String),
}

impl Target {
    fn which(self) -> ApiResult<Which> {
        match (self.order_id, self.client_order_id) {
            (Some(order_id), None) => Ok(Which::OrderId(order_id)),
            (None, Some(client_order_id)) => Ok(Which::ClientOrderId(client_order_id)),
            _ => Err(ApiError::malformed("name the order by order_id or client_order_id (one)")),
        }
    }
}

/// Takes `order_id` and `client_order_id` out of `request`.
fn take_target(request: &mut Map<String, Value>) -> ApiResult<Which> {
    let mut target = Map::new();
    for field in ["order_id", "client_order_id"] {
        if let Some(value) = request.remove(field) {
            target.insert(field.to_string(), value);
        }
    }
    let target: Target = serde_json::from_value(Value::Object(target)).map_err(|error| {
        ApiError::malformed(format!(
            "order_id is a whole number and client_order_id a string: {error}"
        ))
    })?;
    target.which()
}

fn parse<T: serde::de::DeserializeOwned>(what: &str, request: Map<String, Value>) -> ApiResult<T> {
    serde_json::from_value(Value::Object(request))
        .map_err(|error| ApiError::malformed(format!("invalid {what}: {error}")))
}

/// Checks `request` (without its `op` and `req_id`) and submits its command to the
/// connection's lane: its correlation and what its answer needs. A cancel or
/// amend by `order_id` looks the order up first (the connection waits for that read).
pub async fn submit(
    state: &Shared,
    lane: &mut Lane,
    caller: &Caller,
    op: EntryOp,
    mut request: Map<String, Value>,
) -> ApiResult<(bourse_engine::Correlation, Work)> {
    let account = caller.account()?;
    match op {
        EntryOp::Order => {
            let request: OrderRequest = parse("order", request)?;
            let (client_id, order) = order_from_request(&request, account)?;
            let command = Command::Order(order);
            let correlation = lane.submit(&command)?;
            let Command::Order(order) = command else {
                return Err(ApiError::malformed("not an order"));
            };
            Ok((correlation, Work::Place { account: account.to_string(), client_id, order }))
        }
        EntryOp::Cancel => {
            let which = take_target(&mut request)?;
            if let Some(field) = request.keys().next() {
                return Err(ApiError::malformed(format!(
                    "invalid cancel: unknown field {field:?}"
                )));
            }
            let (account_id, client_id) = target_order(state, caller, which).await?;
            let command = Command::Cancel {
                account: AccountRef::Id(account_id),
                id: Cow::Borrowed(&client_id),
            };
            let correlation = lane.submit(&command)?;
            Ok((correlation, Work::Show { read: lane.read_order(account_id, &client_id)? }))
        }
        EntryOp::Amend => {
            let which = take_target(&mut request)?;
            let amend: AmendRequest = parse("amend", request)?;
            let (price, qty) = amend_values(&amend)?;
            let (account_id, client_id) = target_order(state, caller, which).await?;
            let command = Command::Amend(AmendCommand {
                account: AccountRef::Id(account_id),
                id: Cow::Borrowed(&client_id),
                price,
                qty,
            });
            let correlation = lane.submit(&command)?;
            Ok((correlation, Work::Show { read: lane.read_order(account_id, &client_id)? }))
        }
    }
}

/// The caller's account id and the client order id of the order `which` names
/// (`unknown_order` when the account has none such; by `order_id` it is read first).
async fn target_order(
    state: &Shared,
    caller: &Caller,
    which: Which,
) -> ApiResult<(AccountId, String)> {
    match which {
        Which::ClientOrderId(client_id) => {
            let account = caller.account()?;
            let account_id =
                state.account_id(account).await?.ok_or_else(ApiError::unknown_order)?;
            Ok((account_id, client_id))
        }
        Which::OrderId(order_id) => {
            let (account_id, record) = own_order(state, caller, order_id).await?;
            Ok((account_id, record.client_id.to_string()))
        }
    }
}

/// The answer's text: `{"op":"ack","req_id":...,"order":...}` (a new order's also has
/// `fills`) or `{"op":"error","req_id":...,"code":...,"message":...}`; counted in the
/// metrics with the HTTP status REST would have answered.
pub fn finish(
    state: &Shared,
    op: EntryOp,
    started: Instant,
    req_id: Value,
    result: ApiResult<Answer>,
) -> String {
    let status = result.as_ref().map_or_else(|error| error.status.as_u16(), |_| 200);
    state.metrics.request("websocket", op.name(), status, started.elapsed().as_secs_f64());
    match result {
        Ok(Answer::Placed(fields)) => format!(r#"{{"op":"ack","req_id":{req_id},{fields}}}"#),
        Ok(Answer::Order(order)) => format!(r#"{{"op":"ack","req_id":{req_id},"order":{order}}}"#),
        Err(error) => error_answer(req_id, error).to_string(),
    }
}

/// `{"op":"error","req_id":...,"code":...,"message":...}` (plus `order` for a
/// `duplicate_id`).
pub fn error_answer(req_id: Value, error: ApiError) -> Value {
    let mut answer = Map::new();
    answer.insert("op".into(), Value::from("error"));
    answer.insert("req_id".into(), req_id);
    answer.insert("code".into(), Value::from(error.code));
    answer.insert("message".into(), Value::from(error.message));
    if let Some((field, value)) = error.detail {
        answer.insert(field.into(), value);
    }
    Value::Object(answer)
}
