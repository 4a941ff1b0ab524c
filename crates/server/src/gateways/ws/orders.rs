//! Order entry over WebSocket: the `order`, `cancel` and `amend` ops of a logged-in
//! connection, decoded here into order entry's requests (`json` has the shapes REST
//! shares). The connection submits them to its own lane (`order_entry::in_flight`), so
//! its commands are sequenced in the order it sent them, and answers them in that
//! order; no task, future or channel per request.

use std::borrow::Cow;

use serde::Deserialize;
use serde_json::{Map, Value};

use crate::gateways::shared::json::{AmendRequest, OrderRequest};
use crate::port::error::{ApiError, ApiResult};
use crate::port::orders::request::{Request, Target};

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
struct TargetFields {
    order_id: Option<u64>,
    client_order_id: Option<String>,
}

/// Takes `order_id` and `client_order_id` out of `request`: exactly one names the
/// order.
fn take_target(request: &mut Map<String, Value>) -> ApiResult<Target<'static>> {
    let mut fields = Map::new();
    for field in ["order_id", "client_order_id"] {
        if let Some(value) = request.remove(field) {
            fields.insert(field.to_string(), value);
        }
    }
    let fields: TargetFields = serde_json::from_value(Value::Object(fields)).map_err(|error| {
        ApiError::malformed(format!(
            "order_id is a whole number and client_order_id a string: {error}"
        ))
    })?;
    match (fields.order_id, fields.client_order_id) {
        (Some(order_id), None) => Ok(Target::OrderId(bourse_core::ids::OrderId(order_id))),
        (None, Some(client_order_id)) => Ok(Target::ClientOrderId(Cow::Owned(client_order_id))),
        _ => Err(ApiError::malformed("name the order by order_id or client_order_id (one)")),
    }
}

fn parse<T: serde::de::DeserializeOwned>(what: &str, request: Map<String, Value>) -> ApiResult<T> {
    serde_json::from_value(Value::Object(request))
        .map_err(|error| ApiError::malformed(format!("invalid {what}: {error}")))
}

/// A decoded order-entry message: the JSON it was read from stays beside the request
/// that borrows it.
pub enum Decoded {
    Order(OrderRequest),
    Cancel(Target<'static>),
    Amend(Target<'static>, AmendRequest),
}

impl Decoded {
    /// Reads `request` (without its `op` and `req_id`).
    pub fn read(op: EntryOp, mut request: Map<String, Value>) -> ApiResult<Decoded> {
        match op {
            EntryOp::Order => Ok(Decoded::Order(parse("order", request)?)),
            EntryOp::Cancel => {
                let target = take_target(&mut request)?;
                if let Some(field) = request.keys().next() {
                    return Err(ApiError::malformed(format!(
                        "invalid cancel: unknown field {field:?}"
                    )));
                }
                Ok(Decoded::Cancel(target))
            }
            EntryOp::Amend => {
                let target = take_target(&mut request)?;
                Ok(Decoded::Amend(target, parse("amend", request)?))
            }
        }
    }

    /// The request as order entry takes it.
    pub fn request(&self) -> ApiResult<Request<'_>> {
        match self {
            Decoded::Order(order) => order.decode(),
            Decoded::Cancel(target) => Ok(Request::Cancel(target.clone())),
            Decoded::Amend(target, amend) => amend.decode(target.clone()),
        }
    }
}
