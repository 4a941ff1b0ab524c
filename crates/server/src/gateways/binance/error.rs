//! Errors as Binance gives them: `{"code": -1121, "msg": "Invalid symbol."}` with its
//! HTTP status, and the one table that turns Bourse's reasons (`ApiError`'s codes)
//! into Binance's codes and messages. The messages a client library matches on (ccxt
//! maps several exact messages to its exceptions) are Binance's own words.

use std::borrow::Cow;

use axum::http::{HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use serde_json::json;

use bourse_core::RejectReason;

use crate::port::error::{ApiError, ErrorCode};

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BinanceError {
    pub status: StatusCode,
    /// Binance's error code (negative).
    pub code: i32,
    pub msg: Cow<'static, str>,
    /// Seconds a rate-limited client should wait (`Retry-After`).
    pub retry_after_s: Option<u64>,
    /// A node of a cluster that does not lead: the leader's REST address
    /// (`http_error::LEADER_HEADER`).
    pub leader_http: Option<String>,
}

pub type BinanceResult<T> = Result<T, BinanceError>;

impl BinanceError {
    pub fn new(status: StatusCode, code: i32, msg: impl Into<Cow<'static, str>>) -> BinanceError {
        BinanceError { status, code, msg: msg.into(), retry_after_s: None, leader_http: None }
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
    /// One arm per code: a new code does not compile until it has Binance's words here.
    fn from(error: ApiError) -> BinanceError {
        let bad = |code: i32, msg: &'static str| BinanceError::bad_request(code, msg);
        // Order refusals are -2010 (NEW_ORDER_REJECTED) with Binance's words where
        // Binance has them, else Bourse's reason.
        let rejected = |msg: &'static str| BinanceError::bad_request(-2010, msg);
        let bourse_words = || format!("{}: {}", error.code, error.message);
        let unknown = || {
            BinanceError::new(
                StatusCode::INTERNAL_SERVER_ERROR,
                -1000,
                format!(
                    "An unknown error occurred while processing the request: {}",
                    error.message
                ),
            )
        };
        let busy = || {
            BinanceError::new(
                StatusCode::SERVICE_UNAVAILABLE,
                -1004,
                "Server is busy, please wait and try again",
            )
        };
        let mut mapped = match error.code {
            ErrorCode::Rejected(reason) => match reason {
                RejectReason::UnknownSymbol => BinanceError::invalid_symbol(),
                RejectReason::UnknownOrder => bad(-2013, "Order does not exist."),
                RejectReason::InsufficientFunds => {
                    rejected("Account has insufficient balance for requested action.")
                }
                RejectReason::WouldCross => rejected("Order would immediately match and take."),
                RejectReason::DuplicateId => rejected("Duplicate order sent."),
                RejectReason::InstrumentHalted => rejected("Market is closed."),
                RejectReason::NoLiquidity => {
                    rejected("No orders on book for symbol: the market order cannot trade.")
                }
                RejectReason::TooManyOpenOrders => {
                    rejected("Too many open orders for this account.")
                }
                RejectReason::InvalidPrice => bad(-1013, "Filter failure: PRICE_FILTER"),
                RejectReason::InvalidQty => bad(-1013, "Filter failure: LOT_SIZE"),
                RejectReason::Malformed => BinanceError::bad_request(-1100, error.message.clone()),
                RejectReason::InvalidOrder => BinanceError::bad_request(
                    -1106,
                    format!("Parameter combination is not valid: {}", error.message),
                ),
                // Not met on this surface (spot orders only, no administration).
                RejectReason::DuplicateAsset
                | RejectReason::InvalidDecimals
                | RejectReason::DuplicateSymbol
                | RejectReason::UnknownAsset
                | RejectReason::InvalidInstrument
                | RejectReason::InvalidAmount
                | RejectReason::InvalidOffset
                | RejectReason::InsufficientPosition => {
                    BinanceError::bad_request(-2010, bourse_words())
                }
            },
            ErrorCode::InvalidKey | ErrorCode::Forbidden => BinanceError::new(
                StatusCode::UNAUTHORIZED,
                -2015,
                "Invalid API-key, IP, or permissions for action.",
            ),
            ErrorCode::InvalidSignature | ErrorCode::MissingSignature => {
                bad(-1022, "Signature for this request is not valid.")
            }
            ErrorCode::ExpiredTimestamp | ErrorCode::InvalidTimestamp => {
                bad(-1021, "Timestamp for this request is outside of the recvWindow.")
            }
            ErrorCode::ReplayedRequest => {
                bad(-1022, "Signature for this request was already used.")
            }
            ErrorCode::RateLimited => BinanceError::new(
                StatusCode::TOO_MANY_REQUESTS,
                -1003,
                "Too many requests; the key's rate limit is reached.",
            ),
            ErrorCode::InvalidCommand => BinanceError::bad_request(-1100, error.message.clone()),
            ErrorCode::Busy | ErrorCode::EngineStopped | ErrorCode::ShuttingDown => busy(),
            // Binance's busy code, with where the leader is.
            ErrorCode::NotLeader => BinanceError::new(
                StatusCode::SERVICE_UNAVAILABLE,
                -1004,
                format!("Server is busy, please wait and try again: {}", error.message),
            ),
            // Not met on this surface: its requests are signed one by one (no login,
            // connection or subscription), and it has no administration or history.
            ErrorCode::NotFound
            | ErrorCode::MethodNotAllowed
            | ErrorCode::BodyTooLarge
            | ErrorCode::Unsupported
            | ErrorCode::UnknownAccount
            | ErrorCode::UnknownKey
            | ErrorCode::UnknownTrade
            | ErrorCode::UnknownChannel
            | ErrorCode::DuplicateAccount
            | ErrorCode::InvalidAccount
            | ErrorCode::InvalidPassword
            | ErrorCode::InvalidSymbol
            | ErrorCode::NoSettlementPrice
            | ErrorCode::TooManySubscriptions
            | ErrorCode::TooManyCharts
            | ErrorCode::TooManySymbols
            | ErrorCode::UnknownAid
            | ErrorCode::InvalidCredentials
            | ErrorCode::LoginLocked
            | ErrorCode::LoginRequired
            | ErrorCode::AlreadyLoggedIn
            | ErrorCode::TooManyConnections
            | ErrorCode::SlowConsumer
            | ErrorCode::IdleTimeout
            | ErrorCode::LoginTimeout
            | ErrorCode::MalformedFrame
            | ErrorCode::ProtocolError
            | ErrorCode::Resync
            | ErrorCode::Closed
            | ErrorCode::FeedOff
            | ErrorCode::HistoryOff
            | ErrorCode::SqlUnavailable
            | ErrorCode::SqlError
            | ErrorCode::PlanError => BinanceError::bad_request(-1000, bourse_words()),
            ErrorCode::HistoryUnreadable
            | ErrorCode::ExecutionError
            | ErrorCode::Io
            | ErrorCode::SqlFailed
            | ErrorCode::SettingsFailed
            | ErrorCode::KeyStoreFailed
            | ErrorCode::StoreFailed
            | ErrorCode::Internal => unknown(),
        };
        mapped.retry_after_s = error.retry_after_s;
        mapped.leader_http = error.leader_http().map(str::to_string);
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
        if let Some(value) = self.leader_http.and_then(|http| HeaderValue::from_str(&http).ok()) {
            let name = crate::gateways::shared::http_error::LEADER_HEADER;
            response.headers_mut().insert(name, value);
        }
        response
    }
}
