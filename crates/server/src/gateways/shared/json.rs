//! Order entry in JSON, shared by the three gateways that speak it (REST, the
//! pipelined HTTP loop and WebSocket): the request shapes and their decoding into
//! `order_entry::Request`, and the rendering of answers and errors. The shapes are
//! `docs/api.md`'s; decoding is strict (unknown fields are `malformed`, with the
//! reason), and every number is a decimal string printed from integers.

use std::borrow::Cow;

use bourse_core::command::OrderType;
use bourse_core::ids::OrderId;
use bourse_core::{Decimal, Offset, OrderSize, Side, StpMode, TimeInForce};
use serde::de::DeserializeOwned;
use serde::Deserialize;
use serde_json::{Map, Value};

use crate::port::error::{ApiError, ApiResult};
use crate::port::orders::answer::{Answer, Placed, View};
use crate::port::orders::request::{self, CheckedClientOrderId, NewOrder, Request, Target};
use crate::render::{FillView, OrderView};

/// A new order's JSON (`POST /v1/orders`, WebSocket's `order`).
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OrderRequest {
    symbol: String,
    side: SideText,
    #[serde(rename = "type")]
    kind: KindText,
    price: Option<String>,
    /// What to buy or sell; or, for a spot market buy, `quote_qty`: what to spend
    /// (`orders.md`). The engine checks which go together.
    qty: Option<String>,
    quote_qty: Option<String>,
    time_in_force: Option<TimeInForceText>,
    post_only: Option<bool>,
    stp: Option<StpText>,
    client_order_id: Option<String>,
    /// Futures: `open` (the default), `close` or `close_today`; ignored on spot.
    offset: Option<OffsetText>,
}

#[derive(Clone, Copy, Deserialize)]
#[serde(rename_all = "snake_case")]
enum OffsetText {
    Open,
    Close,
    CloseToday,
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
    Gfd,
}

#[derive(Clone, Copy, Deserialize)]
#[serde(rename_all = "snake_case")]
enum StpText {
    CancelTaker,
    CancelMaker,
    CancelBoth,
    None,
}

/// An amend's JSON: a new price, a new quantity or both.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AmendRequest {
    price: Option<String>,
    qty: Option<String>,
}

impl OrderRequest {
    /// The request as order entry takes it. The client order id is checked first (or
    /// made, when the request has none).
    pub fn decode(&self) -> ApiResult<Request<'_>> {
        let client_order_id = match self.client_order_id.as_deref() {
            Some(id) => CheckedClientOrderId::parse(id)?,
            None => request::made_client_order_id()?,
        };
        let order_type = match (self.kind, &self.price) {
            (KindText::Limit, Some(price)) => {
                OrderType::Limit { price: parse_decimal("price", price)? }
            }
            (KindText::Limit, None) => {
                return Err(ApiError::malformed("a limit order needs a price"))
            }
            (KindText::Market, _) => OrderType::Market,
        };
        Ok(Request::Place(NewOrder {
            client_order_id: Some(client_order_id),
            symbol: Cow::Borrowed(&self.symbol),
            side: match self.side {
                SideText::Buy => Side::Buy,
                SideText::Sell => Side::Sell,
            },
            order_type,
            size: OrderSize::of(
                self.qty.as_deref().map(|qty| parse_decimal("qty", qty)).transpose()?,
                self.quote_qty
                    .as_deref()
                    .map(|amount| parse_decimal("quote_qty", amount))
                    .transpose()?,
            ),
            time_in_force: match self.time_in_force.unwrap_or(TimeInForceText::Gtc) {
                TimeInForceText::Gtc => TimeInForce::GoodTillCancel,
                TimeInForceText::Ioc => TimeInForce::ImmediateOrCancel,
                TimeInForceText::Fok => TimeInForce::FillOrKill,
                TimeInForceText::Gfd => TimeInForce::GoodForDay,
            },
            post_only: self.post_only.unwrap_or(false),
            stp: match self.stp.unwrap_or(StpText::CancelTaker) {
                StpText::CancelTaker => StpMode::CancelTaker,
                StpText::CancelMaker => StpMode::CancelMaker,
                StpText::CancelBoth => StpMode::CancelBoth,
                StpText::None => StpMode::None,
            },
            offset: match self.offset.unwrap_or(OffsetText::Open) {
                OffsetText::Open => Offset::Open,
                OffsetText::Close => Offset::Close,
                OffsetText::CloseToday => Offset::CloseToday,
            },
        }))
    }
}

impl AmendRequest {
    /// The amend of the order `target` names, as order entry takes it.
    pub fn decode<'a>(&self, target: Target<'a>) -> ApiResult<Request<'a>> {
        let price = self.price.as_deref().map(|price| parse_decimal("price", price)).transpose()?;
        let qty = self.qty.as_deref().map(|qty| parse_decimal("qty", qty)).transpose()?;
        Request::amend(target, price, qty)
    }
}

/// Parses a JSON body into `T`, with a `malformed` error that says what is wrong.
pub fn parse_body<T: DeserializeOwned>(body: &[u8]) -> ApiResult<T> {
    if body.is_empty() {
        return Err(ApiError::malformed("a JSON body is required"));
    }
    serde_json::from_slice(body)
        .map_err(|error| ApiError::malformed(format!("invalid JSON body: {error}")))
}

/// A decimal string field, exactly as the replay format takes it.
pub fn parse_decimal(field: &'static str, text: &str) -> ApiResult<Decimal> {
    Decimal::parse(text).ok_or_else(|| {
        ApiError::malformed(format!("{field} must be a decimal string like \"12.5\", not {text:?}"))
    })
}

/// An order id in a path or message: a whole number.
pub fn parse_order_id(text: &str) -> ApiResult<OrderId> {
    text.parse()
        .map(OrderId)
        .map_err(|_| ApiError::malformed(format!("an order id is a whole number, not {text:?}")))
}

/// A new order's answer as JSON fields without the braces, `"fills":[…],"order":{…}`,
/// written straight from the order and fills: REST wraps them in braces, WebSocket's
/// `ack` adds its own fields.
fn placed_fields(placed: &Placed) -> ApiResult<String> {
    let unknown = || ApiError::malformed("the instrument vanished");
    let order = OrderView::of(&placed.reference, &placed.record).ok_or_else(unknown)?;
    let fills: Vec<FillView> = placed
        .fills
        .iter()
        .map(|fill| FillView::of(&placed.reference, fill).ok_or_else(unknown))
        .collect::<ApiResult<_>>()?;
    let mut text = String::with_capacity(512);
    text.push_str(r#""fills":"#);
    text.push_str(&serde_json::to_string(&fills).map_err(|_| unknown())?);
    text.push_str(r#","order":"#);
    text.push_str(&serde_json::to_string(&order).map_err(|_| unknown())?);
    Ok(text)
}

/// What an accepted request shows: a new order's fields (`"fills":…,"order":…`) or the
/// order after a cancel or amend; an answer with its stamp only (`Detail::Stamp`, the
/// binary protocol's) shows the order's id and the stamp.
enum Shown {
    PlacedFields(String),
    Order(Value),
}

fn shown(answer: &Answer) -> ApiResult<Shown> {
    Ok(match &answer.view {
        View::Placed(placed) => Shown::PlacedFields(placed_fields(placed)?),
        View::Order(order) => Shown::Order(order.to_json()),
        View::Stamp => {
            let stamp = &answer.stamp;
            Shown::Order(serde_json::json!({
                "order_id": stamp.order_id, "seq": stamp.seq, "ts_ns": stamp.ts_ns,
            }))
        }
    })
}

/// The REST body of an answer: `{"fills":…,"order":…}` for a new order, the order
/// itself after a cancel or amend.
pub fn rest_body(answer: &Answer) -> ApiResult<Vec<u8>> {
    Ok(match shown(answer)? {
        Shown::PlacedFields(fields) => {
            let mut body = Vec::with_capacity(fields.len() + 2);
            body.push(b'{');
            body.extend_from_slice(fields.as_bytes());
            body.push(b'}');
            body
        }
        Shown::Order(order) => order.to_string().into_bytes(),
    })
}

/// WebSocket's answer to an order-entry request: `{"op":"ack","req_id":…,…}` (a new
/// order's fills and order, or the order) or its error.
pub fn ws_answer(req_id: &Value, result: ApiResult<Answer>) -> String {
    match result.and_then(|answer| shown(&answer)) {
        Ok(Shown::PlacedFields(fields)) => format!(r#"{{"op":"ack","req_id":{req_id},{fields}}}"#),
        Ok(Shown::Order(order)) => format!(r#"{{"op":"ack","req_id":{req_id},"order":{order}}}"#),
        Err(error) => ws_error(req_id.clone(), error).to_string(),
    }
}

/// `{"op":"error","req_id":…,"code":…,"message":…}` (plus `order` for a
/// `duplicate_id`).
pub fn ws_error(req_id: Value, error: ApiError) -> Value {
    let mut answer = Map::new();
    answer.insert("op".into(), Value::from("error"));
    answer.insert("req_id".into(), req_id);
    answer.insert("code".into(), Value::from(error.code.as_str()));
    answer.insert("message".into(), Value::from(error.message.clone()));
    for (field, value) in error.details() {
        answer.insert(field.into(), value);
    }
    Value::Object(answer)
}
