//! The server's errors, for every gateway: a stable code a client can match (the
//! engine's reject reasons among them), a message, the HTTP status REST answers with,
//! and what more there is to say (the order a reused client order id names). REST and
//! WebSocket show them as `{ "code": ..., "message": ... }`; the binary protocol as its
//! reason codes.

use axum::http::{HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use bourse_core::RejectReason;
use serde_json::{json, Value};

use crate::keys::KeyError;
use crate::link::LinkError;
use crate::render::Shown;

#[derive(Debug)]
pub struct ApiError {
    pub status: StatusCode,
    pub code: &'static str,
    pub message: String,
    /// More to say (the field a bad request got wrong, say).
    pub detail: Option<(&'static str, Value)>,
    /// The order a reused client order id names (`duplicate_id`).
    pub order: Option<Box<Shown>>,
    pub retry_after_s: Option<u64>,
}

pub type ApiResult<T> = Result<T, ApiError>;

impl ApiError {
    pub fn new(status: StatusCode, code: &'static str, message: impl Into<String>) -> ApiError {
        ApiError {
            status,
            code,
            message: message.into(),
            detail: None,
            order: None,
            retry_after_s: None,
        }
    }

    pub fn with(mut self, field: &'static str, value: Value) -> ApiError {
        self.detail = Some((field, value));
        self
    }

    /// The error with the order it is about (a reused client order id's).
    pub fn with_order(mut self, order: Shown) -> ApiError {
        self.order = Some(Box::new(order));
        self
    }

    /// The fields beyond `code` and `message` that JSON shows: `detail`, and the order
    /// as `order`.
    pub fn details(&self) -> impl Iterator<Item = (&'static str, Value)> + '_ {
        let order = self.order.as_ref().map(|order| ("order", order.to_json()));
        self.detail.clone().into_iter().chain(order)
    }

    pub fn malformed(message: impl Into<String>) -> ApiError {
        ApiError::new(StatusCode::BAD_REQUEST, "malformed", message)
    }

    pub fn unauthenticated(code: &'static str, message: impl Into<String>) -> ApiError {
        ApiError::new(StatusCode::UNAUTHORIZED, code, message)
    }

    pub fn forbidden(message: impl Into<String>) -> ApiError {
        ApiError::new(StatusCode::FORBIDDEN, "forbidden", message)
    }

    pub fn not_found(code: &'static str, message: impl Into<String>) -> ApiError {
        ApiError::new(StatusCode::NOT_FOUND, code, message)
    }

    pub fn unknown_order() -> ApiError {
        ApiError::not_found(RejectReason::UnknownOrder.code(), "no such order of this account")
    }

    /// The engine refused a command: the spec's reason is the code.
    pub fn rejected(reason: RejectReason) -> ApiError {
        let status = match reason {
            RejectReason::Malformed => StatusCode::BAD_REQUEST,
            RejectReason::UnknownSymbol
            | RejectReason::UnknownOrder
            | RejectReason::UnknownAsset => StatusCode::NOT_FOUND,
            RejectReason::DuplicateId
            | RejectReason::DuplicateAsset
            | RejectReason::DuplicateSymbol => StatusCode::CONFLICT,
            _ => StatusCode::UNPROCESSABLE_ENTITY,
        };
        ApiError::new(status, reason.code(), rejection_message(reason))
    }
}

fn rejection_message(reason: RejectReason) -> &'static str {
    match reason {
        RejectReason::Malformed => "the command is malformed",
        RejectReason::DuplicateAsset => "an asset of this name exists",
        RejectReason::InvalidDecimals => "decimals must be 0 to 18",
        RejectReason::DuplicateSymbol => "an instrument of this symbol exists",
        RejectReason::UnknownAsset => "no such asset",
        RejectReason::InvalidInstrument => {
            "the instrument's tick, lot, bounds, fees or decimals are not valid"
        }
        RejectReason::InvalidAmount => {
            "the amount must be positive, within the asset's decimals and range"
        }
        RejectReason::InsufficientFunds => "the account's available balance does not cover this",
        RejectReason::UnknownSymbol => "no such instrument",
        RejectReason::DuplicateId => "this account used this client order id before",
        RejectReason::InvalidPrice => "the price must be positive and a multiple of the tick",
        RejectReason::InvalidQty => {
            "the quantity must be a multiple of the lot within the instrument's bounds"
        }
        RejectReason::WouldCross => "a post-only order would cross the book",
        RejectReason::NoLiquidity => "a market order found nothing on the other side",
        RejectReason::UnknownOrder => "no such open order of this account",
        RejectReason::InstrumentHalted => "the instrument is halted: cancels only until it resumes",
        RejectReason::TooManyOpenOrders => {
            "the account has as many open orders as the venue allows"
        }
        RejectReason::InvalidOffset => {
            "close_today is for contracts with the close-today rule: use close"
        }
        RejectReason::InsufficientPosition => {
            "the position (less what open close orders reserve) does not cover this close"
        }
        RejectReason::InvalidOrder => {
            "these fields do not go together on one order (quote_qty: a spot market buy, without qty, not fok)"
        }
    }
}

impl From<LinkError> for ApiError {
    fn from(error: LinkError) -> ApiError {
        let status = match &error {
            LinkError::Busy(_) | LinkError::Refused(bourse_engine::SubmitError::Busy { .. }) => {
                StatusCode::SERVICE_UNAVAILABLE
            }
            LinkError::Refused(bourse_engine::SubmitError::Invalid(_)) => StatusCode::BAD_REQUEST,
            _ => StatusCode::SERVICE_UNAVAILABLE,
        };
        let mut api = ApiError::new(status, error.code(), error.to_string());
        if status == StatusCode::SERVICE_UNAVAILABLE && error.code() == "busy" {
            api.retry_after_s = Some(1);
        }
        api
    }
}

impl From<KeyError> for ApiError {
    fn from(error: KeyError) -> ApiError {
        let status = match &error {
            KeyError::Io { .. } | KeyError::Damaged { .. } => StatusCode::INTERNAL_SERVER_ERROR,
            KeyError::UnknownAccount(_) | KeyError::UnknownKey(_) => StatusCode::NOT_FOUND,
            KeyError::DuplicateAccount(_) => StatusCode::CONFLICT,
            KeyError::InvalidAccountName(_) => StatusCode::BAD_REQUEST,
        };
        ApiError::new(status, error.code(), error.to_string())
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let details: Vec<(&'static str, Value)> = self.details().collect();
        let mut body = json!({ "code": self.code, "message": self.message });
        if let Some(object) = body.as_object_mut() {
            for (field, value) in details {
                object.insert(field.to_string(), value);
            }
        }
        let mut response = (self.status, Json(body)).into_response();
        if let Some(seconds) = self.retry_after_s {
            response.headers_mut().insert("retry-after", HeaderValue::from(seconds));
        }
        response
    }
}
