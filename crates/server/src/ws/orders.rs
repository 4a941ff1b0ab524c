//! Order entry over WebSocket: the `order`, `cancel` and `amend` ops of a logged-in
//! connection. Each request is checked and made into its engine command by the same
//! code as REST's (`rest::trading`), submitted at once (`EngineLink::enqueue`, so a
//! connection's commands are sequenced in the order it sent them), and its answer is
//! awaited off the connection's loop: a client may pipeline up to
//! `IN_FLIGHT_PER_CONNECTION_MAX` requests, answered in the order it sent them.

use std::borrow::Cow;
use std::future::Future;
use std::pin::Pin;
use std::time::Instant;

use bourse_core::command::AmendCommand;
use bourse_core::{AccountRef, Command};
use serde::Deserialize;
use serde_json::{json, Map, Value};

use crate::rest::auth::Caller;
use crate::rest::error::{ApiError, ApiResult};
use crate::rest::trading::{
    amend_values, order_from_request, own_order, placed_answer_fields, shown_after, AmendRequest,
    OrderRequest,
};
use crate::rest::Shared;

/// Order-entry requests of one connection waiting for their answers, at most: at this
/// many the connection is not read until answers go out (`busy` only if one arrives
/// regardless).
pub const IN_FLIGHT_PER_CONNECTION_MAX: usize = 4_096;

/// A request's answer to come, rendered as the message's text.
pub type Answer = Pin<Box<dyn Future<Output = String> + Send>>;

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

/// Checks `request` (without its `op` and `req_id`), submits its command when it names
/// its order by client order id (or is a new order), and returns the work that answers
/// it. A cancel or amend by `order_id` looks the order up first, so its command is
/// submitted once that read is done (possibly after requests sent after it).
pub fn start(
    state: &Shared,
    caller: &Caller,
    op: EntryOp,
    mut request: Map<String, Value>,
) -> ApiResult<Work> {
    let account = caller.account()?.to_string();
    let state = std::sync::Arc::clone(state);
    match op {
        EntryOp::Order => {
            let request: OrderRequest = parse("order", request)?;
            let (client_id, order) = order_from_request(&request, &account)?;
            let pending = state.link.enqueue(&Command::Order(order.clone()))?;
            Ok(Box::pin(async move {
                let reply = pending.wait().await?;
                placed_answer_fields(&state, &account, &client_id, &order, &reply)
                    .await
                    .map(Ack::Fields)
            }))
        }
        EntryOp::Cancel => {
            let which = take_target(&mut request)?;
            if let Some(field) = request.keys().next() {
                return Err(ApiError::malformed(format!(
                    "invalid cancel: unknown field {field:?}"
                )));
            }
            let caller = caller.clone();
            let make = |account: AccountRef<'static>, client_id: String| Command::Cancel {
                account,
                id: Cow::Owned(client_id),
            };
            submit_for(state, caller, account, which, make)
        }
        EntryOp::Amend => {
            let which = take_target(&mut request)?;
            let amend: AmendRequest = parse("amend", request)?;
            let (price, qty) = amend_values(&amend)?;
            let caller = caller.clone();
            let make = move |account: AccountRef<'static>, client_id: String| {
                Command::Amend(AmendCommand { account, id: Cow::Owned(client_id), price, qty })
            };
            submit_for(state, caller, account, which, make)
        }
    }
}

/// A cancel or amend (`make` builds its command) of the order `which`, answered with
/// the order as it stands after it.
fn submit_for(
    state: Shared,
    caller: Caller,
    account: String,
    which: Which,
    make: impl FnOnce(AccountRef<'static>, String) -> Command<'static> + Send + 'static,
) -> ApiResult<Work> {
    match which {
        Which::ClientOrderId(client_id) => {
            // Named by the account's name, the command needs no read before it.
            let command = make(AccountRef::Name(Cow::Owned(account.clone())), client_id.clone());
            let pending = state.link.enqueue(&command)?;
            Ok(Box::pin(async move {
                let reply = pending.wait().await?;
                let account_id =
                    state.account_id(&account).await?.ok_or_else(ApiError::unknown_order)?;
                let order = shown_after(&state, &reply, account_id, &client_id).await?;
                Ok(Ack::Object(json!({ "order": order })))
            }))
        }
        Which::OrderId(order_id) => Ok(Box::pin(async move {
            let (account_id, record) = own_order(&state, &caller, order_id).await?;
            let client_id = record.client_id.to_string();
            let command = make(AccountRef::Id(account_id), client_id.clone());
            let reply = state.link.submit(&command).await?;
            let order = shown_after(&state, &reply, account_id, &client_id).await?;
            Ok(Ack::Object(json!({ "order": order })))
        })),
    }
}

/// What an acknowledged request answers besides `op` and `req_id`: a JSON object, or
/// its fields already written as text (a new order's `fills` and `order`).
pub enum Ack {
    Object(Value),
    Fields(String),
}

/// A request's work: its answer, once the engine has answered.
pub type Work = Pin<Box<dyn Future<Output = ApiResult<Ack>> + Send>>;

/// The answer's text: `{"op":"ack","req_id":...,"order":...}` (a new order's also has
/// `fills`) or `{"op":"error","req_id":...,"code":...,"message":...}`; counted in the
/// metrics with the HTTP status REST would have answered.
pub fn finish(
    state: &Shared,
    op: EntryOp,
    started: Instant,
    req_id: Value,
    result: ApiResult<Ack>,
) -> String {
    let status = result.as_ref().map_or_else(|error| error.status.as_u16(), |_| 200);
    state.metrics.request("websocket", op.name(), status, started.elapsed().as_secs_f64());
    match result {
        Ok(Ack::Fields(fields)) => format!(r#"{{"op":"ack","req_id":{req_id},{fields}}}"#),
        Ok(Ack::Object(Value::Object(mut answer))) => {
            answer.insert("op".into(), Value::from("ack"));
            answer.insert("req_id".into(), req_id);
            Value::Object(answer).to_string()
        }
        Ok(Ack::Object(other)) => {
            error_answer(req_id, ApiError::malformed(format!("no answer: {other}"))).to_string()
        }
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
