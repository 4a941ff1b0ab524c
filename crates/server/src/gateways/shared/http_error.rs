//! The port's errors as HTTP says them, for every surface that answers with Bourse's
//! own JSON (REST, its pipelined loop, WebSocket's answers and the web screens'
//! routes): a status per code, in one `match` with no default arm, and the body
//! `{ "code": ..., "message": ... }` with what more the error says, and `Retry-After`
//! when it says when to try again. (The Binance surface has its own table,
//! `gateways::binance::error`; tqsdk's login routes theirs, `gateways::rest::openid`.)

use axum::http::{HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use bourse_core::RejectReason;
use serde_json::{json, Value};

use crate::port::error::{ApiError, ErrorCode};

/// The header that names the leader's REST address (`host:port`) on a `not_leader`
/// answer of a node of a cluster that does not lead.
pub const LEADER_HEADER: &str = "bourse-leader";

/// `LEADER_HEADER` on `response`, when `error` names the leader.
pub fn add_leader_header(response: &mut Response, error: &ApiError) {
    if let Some(value) = error.leader_http().and_then(|http| HeaderValue::from_str(http).ok()) {
        response.headers_mut().insert(LEADER_HEADER, value);
    }
}

/// The HTTP status an error code answers with.
pub fn status(code: ErrorCode) -> StatusCode {
    match code {
        ErrorCode::Rejected(reason) => match reason {
            RejectReason::Malformed => StatusCode::BAD_REQUEST,
            RejectReason::UnknownSymbol
            | RejectReason::UnknownOrder
            | RejectReason::UnknownAsset => StatusCode::NOT_FOUND,
            RejectReason::DuplicateId
            | RejectReason::DuplicateAsset
            | RejectReason::DuplicateSymbol => StatusCode::CONFLICT,
            RejectReason::InvalidDecimals
            | RejectReason::InvalidInstrument
            | RejectReason::InvalidAmount
            | RejectReason::InsufficientFunds
            | RejectReason::InvalidPrice
            | RejectReason::InvalidQty
            | RejectReason::WouldCross
            | RejectReason::NoLiquidity
            | RejectReason::InstrumentHalted
            | RejectReason::TooManyOpenOrders
            | RejectReason::InvalidOffset
            | RejectReason::InsufficientPosition
            | RejectReason::InvalidOrder => StatusCode::UNPROCESSABLE_ENTITY,
        },
        ErrorCode::InvalidCommand
        | ErrorCode::Unsupported
        | ErrorCode::InvalidAccount
        | ErrorCode::InvalidPassword
        | ErrorCode::InvalidSymbol
        | ErrorCode::UnknownChannel
        | ErrorCode::TooManySubscriptions
        | ErrorCode::TooManyCharts
        | ErrorCode::TooManySymbols
        | ErrorCode::UnknownAid
        | ErrorCode::AlreadyLoggedIn
        | ErrorCode::MalformedFrame
        | ErrorCode::ProtocolError
        | ErrorCode::SqlError
        | ErrorCode::PlanError => StatusCode::BAD_REQUEST,
        ErrorCode::NotFound
        | ErrorCode::UnknownAccount
        | ErrorCode::UnknownKey
        | ErrorCode::UnknownTrade
        | ErrorCode::FeedOff => StatusCode::NOT_FOUND,
        ErrorCode::MethodNotAllowed => StatusCode::METHOD_NOT_ALLOWED,
        ErrorCode::BodyTooLarge => StatusCode::PAYLOAD_TOO_LARGE,
        ErrorCode::DuplicateAccount | ErrorCode::NoSettlementPrice => StatusCode::CONFLICT,
        ErrorCode::MissingSignature
        | ErrorCode::InvalidKey
        | ErrorCode::InvalidTimestamp
        | ErrorCode::ExpiredTimestamp
        | ErrorCode::InvalidSignature
        | ErrorCode::ReplayedRequest
        | ErrorCode::InvalidCredentials
        | ErrorCode::LoginRequired
        | ErrorCode::LoginTimeout => StatusCode::UNAUTHORIZED,
        ErrorCode::Forbidden => StatusCode::FORBIDDEN,
        ErrorCode::RateLimited | ErrorCode::TooManyConnections | ErrorCode::LoginLocked => {
            StatusCode::TOO_MANY_REQUESTS
        }
        ErrorCode::IdleTimeout => StatusCode::REQUEST_TIMEOUT,
        ErrorCode::Busy
        | ErrorCode::SlowConsumer
        | ErrorCode::Resync
        | ErrorCode::ShuttingDown
        | ErrorCode::Closed
        | ErrorCode::EngineStopped
        | ErrorCode::NotLeader
        | ErrorCode::HistoryOff => StatusCode::SERVICE_UNAVAILABLE,
        ErrorCode::SqlUnavailable => StatusCode::NOT_IMPLEMENTED,
        ErrorCode::HistoryUnreadable
        | ErrorCode::SqlFailed
        | ErrorCode::ExecutionError
        | ErrorCode::Io
        | ErrorCode::SettingsFailed
        | ErrorCode::KeyStoreFailed
        | ErrorCode::StoreFailed
        | ErrorCode::Internal => StatusCode::INTERNAL_SERVER_ERROR,
    }
}

/// The JSON body of an error: `code`, `message`, and the fields it adds.
pub fn body(error: &ApiError) -> Value {
    let mut body = json!({ "code": error.code.as_str(), "message": error.message });
    if let Some(object) = body.as_object_mut() {
        for (field, value) in error.details() {
            object.insert(field.to_string(), value);
        }
    }
    body
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let mut response = (status(self.code), Json(body(&self))).into_response();
        if let Some(seconds) = self.retry_after_s {
            response.headers_mut().insert("retry-after", HeaderValue::from(seconds));
        }
        add_leader_header(&mut response, &self);
        response
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_code_has_a_status_and_the_venues_faults_are_server_errors() {
        for code in ErrorCode::all() {
            let status = status(code);
            assert!(status.is_client_error() || status.is_server_error(), "{code}: {status}");
        }
        for code in [ErrorCode::Busy, ErrorCode::EngineStopped, ErrorCode::Internal] {
            assert!(status(code).is_server_error(), "{code} is the venue's fault");
        }
    }
}
