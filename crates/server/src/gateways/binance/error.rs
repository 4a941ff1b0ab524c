//! Errors as Binance gives them: `{"code": -1121, "msg": "Invalid symbol."}` with its
//! HTTP status, and the one table that turns Bourse's reasons (`ApiError`'s codes)
//! into Binance's codes and messages. The messages a client library matches on (ccxt
//! maps several exact messages to its exceptions) are Binance's own words.

use std::borrow::Cow;

use axum::http::{HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use serde_json::json;

use crate::port::error::ApiError;

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BinanceError {
    pub status: StatusCode,
    /// Binance's error code (negative).
    pub code: i32,
    pub msg: Cow<'static, str>,
    /// Seconds a rate-limited client should wait (`Retry-After`).
    pub retry_after_s: Option<u64>,
}

pub type BinanceResult<T> = Result<T, BinanceError>;

impl BinanceError {
    pub fn new(status: StatusCode, code: i32, msg: impl Into<Cow<'static, str>>) -> BinanceError {
        BinanceError { status, code, msg: msg.into(), retry_after_s: None }
    }

    pub fn bad_request(code: i32, msg: impl Into<Cow<'static, str>>) -> BinanceError {
        BinanceError::new(StatusCode::BAD_REQUEST, code, msg)
    }

    pub fn invalid_symbol() -> BinanceError {
        BinanceError::bad_request(-1121, "Invalid symbol.")
    }

    /// A parameter whose value the endpoint cannot take.
    pub fn invalid_value(name: &str, value: &str) -> BinanceError {
        BinanceError::bad_request(
            -1130,
            format!("Data sent for parameter '{name}' is not valid: {value:?}."),
        )
    }

    /// An order a cancel names that does not exist (an order that a read names is
    /// `From<ApiError>`'s -2013).
    pub fn unknown_order_sent() -> BinanceError {
        BinanceError::bad_request(-2011, "Unknown order sent.")
    }
}

impl From<ApiError> for BinanceError {
    fn from(error: ApiError) -> BinanceError {
        let bad = |code: i32, msg: &'static str| BinanceError::bad_request(code, msg);
        // Order refusals are -2010 (NEW_ORDER_REJECTED) with Binance's words where
        // Binance has them, else Bourse's reason.
        let rejected = |msg: String| BinanceError::bad_request(-2010, msg);
        let mut mapped = match error.code {
            "invalid_key" | "forbidden" => BinanceError::new(
                StatusCode::UNAUTHORIZED,
                -2015,
                "Invalid API-key, IP, or permissions for action.",
            ),
            "invalid_signature" | "missing_signature" => {
                bad(-1022, "Signature for this request is not valid.")
            }
            "expired_timestamp" | "invalid_timestamp" => {
                bad(-1021, "Timestamp for this request is outside of the recvWindow.")
            }
            "replayed_request" => bad(-1022, "Signature for this request was already used."),
            "rate_limited" => BinanceError::new(
                StatusCode::TOO_MANY_REQUESTS,
                -1003,
                "Too many requests; the key's rate limit is reached.",
            ),
            "unknown_symbol" => BinanceError::invalid_symbol(),
            "unknown_order" => bad(-2013, "Order does not exist."),
            "insufficient_funds" => {
                rejected("Account has insufficient balance for requested action.".into())
            }
            "would_cross" => rejected("Order would immediately match and take.".into()),
            "duplicate_id" => rejected("Duplicate order sent.".into()),
            "instrument_halted" => rejected("Market is closed.".into()),
            "no_liquidity" => {
                rejected("No orders on book for symbol: the market order cannot trade.".into())
            }
            "too_many_open_orders" => rejected("Too many open orders for this account.".into()),
            "invalid_price" => bad(-1013, "Filter failure: PRICE_FILTER"),
            "invalid_qty" => bad(-1013, "Filter failure: LOT_SIZE"),
            "malformed" => BinanceError::bad_request(-1100, error.message.clone()),
            "busy" | "engine_stopped" | "shutting_down" => BinanceError::new(
                StatusCode::SERVICE_UNAVAILABLE,
                -1004,
                "Server is busy, please wait and try again",
            ),
            _ if error.status.is_server_error() => BinanceError::new(
                error.status,
                -1000,
                format!(
                    "An unknown error occurred while processing the request: {}",
                    error.message
                ),
            ),
            _ => BinanceError::bad_request(-1000, format!("{}: {}", error.code, error.message)),
        };
        mapped.retry_after_s = error.retry_after_s;
        mapped
    }
}

impl IntoResponse for BinanceError {
    fn into_response(self) -> Response {
        let body = json!({ "code": self.code, "msg": self.msg });
        let mut response = (self.status, axum::Json(body)).into_response();
        if let Some(seconds) = self.retry_after_s {
            if let Ok(value) = HeaderValue::from_str(&seconds.to_string()) {
                response.headers_mut().insert(axum::http::header::RETRY_AFTER, value);
            }
        }
        response
    }
}
