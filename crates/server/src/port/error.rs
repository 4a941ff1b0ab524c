//! The port's errors, for every gateway: one exhaustive code a client can match (the
//! engine's reject reasons among them), a message, and what more there is to say (the
//! field a request got wrong, the order a reused client order id names, when to try
//! again). Nothing here knows a protocol: each gateway turns an [`ErrorCode`] into its
//! own in one `match` with no default arm (an HTTP status, a binary reason code, a FIX
//! reject, a Binance code, a DIFF notice), so a new code does not compile until every
//! gateway says what it means. `docs/api.md` ("Error codes") has the table.

use bourse_core::RejectReason;
use serde_json::Value;

use crate::keys::KeyError;
use crate::link::LinkError;
use crate::render::Shown;

/// Defines `ErrorCode` (the engine's reasons as `Rejected`, and the port's own codes),
/// `PORT_CODES` (every one of the latter) and `as_str`, from one table, so that the
/// list and the names cannot drift from the enum.
macro_rules! error_codes {
    ($($(#[$doc:meta])* $variant:ident => $name:literal,)*) => {
        /// Every reason the port (or a gateway, for its own protocol) refuses something
        /// or ends a connection. `as_str` is the code clients see.
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
        pub enum ErrorCode {
            /// The engine refused the command: the replay spec's reason.
            Rejected(RejectReason),
            $($(#[$doc])* $variant,)*
        }

        /// The port's own codes: every variant but `Rejected` (whose reasons
        /// `RejectReason::ALL` lists).
        pub const PORT_CODES: &[ErrorCode] = &[$(ErrorCode::$variant,)*];

        impl ErrorCode {
            /// The code as clients see it (`snake_case`, stable).
            pub fn as_str(self) -> &'static str {
                match self {
                    ErrorCode::Rejected(reason) => reason.code(),
                    $(ErrorCode::$variant => $name,)*
                }
            }
        }
    };
}

error_codes! {

    // A request the port cannot take as it is.
    /// The engine refused a command before sequencing it (out of its bounds).
    InvalidCommand => "invalid_command",
    /// No such endpoint.
    NotFound => "not_found",
    /// The endpoint does not take that method.
    MethodNotAllowed => "method_not_allowed",
    /// The request's body is over the limit.
    BodyTooLarge => "body_too_large",
    /// A feature of the protocol the venue does not offer.
    Unsupported => "unsupported",
    UnknownAccount => "unknown_account",
    UnknownKey => "unknown_key",
    UnknownTrade => "unknown_trade",
    UnknownChannel => "unknown_channel",
    DuplicateAccount => "duplicate_account",
    /// An account name that breaks the rule for names.
    InvalidAccount => "invalid_account",
    /// A password that breaks the rule for passwords.
    InvalidPassword => "invalid_password",
    /// A futures contract's symbol that breaks the rule for symbols.
    InvalidSymbol => "invalid_symbol",
    /// A contract has no settlement price yet.
    NoSettlementPrice => "no_settlement_price",
    TooManySubscriptions => "too_many_subscriptions",
    TooManyCharts => "too_many_charts",
    TooManySymbols => "too_many_symbols",
    /// A DIFF pack of a kind the protocol does not have (its `aid`).
    UnknownAid => "unknown_aid",

    // Who is asking.
    MissingSignature => "missing_signature",
    InvalidKey => "invalid_key",
    InvalidTimestamp => "invalid_timestamp",
    ExpiredTimestamp => "expired_timestamp",
    InvalidSignature => "invalid_signature",
    ReplayedRequest => "replayed_request",
    /// A password login with a wrong name or password (never says which).
    InvalidCredentials => "invalid_credentials",
    /// Too many failed password logins in a row: the account's password logins wait.
    LoginLocked => "login_locked",
    /// The key may not do this (a trader key on an admin route, or the reverse).
    Forbidden => "forbidden",
    LoginRequired => "login_required",
    AlreadyLoggedIn => "already_logged_in",

    // Limits.
    RateLimited => "rate_limited",
    TooManyConnections => "too_many_connections",
    /// Too much waits already (the engine's queue, a connection's requests, logins):
    /// try again shortly.
    Busy => "busy",

    // Why a connection ended.
    /// The client did not read what it was sent in time.
    SlowConsumer => "slow_consumer",
    IdleTimeout => "idle_timeout",
    LoginTimeout => "login_timeout",
    MalformedFrame => "malformed_frame",
    /// The WebSocket or FIX session broke the protocol.
    ProtocolError => "protocol_error",
    /// The connection's data fell behind the engine and must be fetched anew.
    Resync => "resync",
    ShuttingDown => "shutting_down",
    /// The connection closed (the client, or its socket).
    Closed => "closed",

    // The venue's own parts.
    EngineStopped => "engine_stopped",
    /// A node of a cluster that does not lead takes no order (`docs/cluster.md`): the
    /// message names the leader.
    NotLeader => "not_leader",
    FeedOff => "feed_off",
    HistoryOff => "history_off",
    HistoryUnreadable => "history_unreadable",
    SqlUnavailable => "sql_unavailable",
    /// The SQL does not parse.
    SqlError => "sql_error",
    /// The SQL names an unknown table or column, or mixes types.
    PlanError => "plan_error",
    /// The query failed while it ran.
    ExecutionError => "execution_error",
    /// The history's files could not be read.
    Io => "io",
    /// The query could not be run at all.
    SqlFailed => "sql_failed",
    SettingsFailed => "settings_failed",
    KeyStoreFailed => "key_store_failed",
    /// A FIX session's message store failed.
    StoreFailed => "store_failed",
    Internal => "internal",
}

impl ErrorCode {
    /// Not a request of the protocol, or a field wrong (the message says which): the
    /// engine's `malformed`, whether the engine or the port found it, so that one code
    /// means one thing.
    pub const MALFORMED: ErrorCode = ErrorCode::Rejected(RejectReason::Malformed);

    /// Every code: the engine's reasons, then the port's.
    pub fn all() -> impl Iterator<Item = ErrorCode> {
        RejectReason::ALL
            .iter()
            .map(|reason| ErrorCode::Rejected(*reason))
            .chain(PORT_CODES.iter().copied())
    }

    /// The code whose `as_str` is `text`.
    pub fn parse(text: &str) -> Option<ErrorCode> {
        ErrorCode::all().find(|code| code.as_str() == text)
    }
}

impl std::fmt::Display for ErrorCode {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter.write_str(self.as_str())
    }
}

#[derive(Debug)]
pub struct ApiError {
    pub code: ErrorCode,
    pub message: String,
    /// More to say (the field a bad request got wrong, say).
    pub detail: Option<(&'static str, Value)>,
    /// The order a reused client order id names (`duplicate_id`).
    pub order: Option<Box<Shown>>,
    pub retry_after_s: Option<u64>,
}

pub type ApiResult<T> = Result<T, ApiError>;

impl From<bourse_protocol::client_order_id::InvalidClientOrderId> for ApiError {
    /// `malformed`, saying the rule and the id given.
    fn from(invalid: bourse_protocol::client_order_id::InvalidClientOrderId) -> ApiError {
        ApiError::malformed(invalid.to_string())
    }
}

impl ApiError {
    pub fn new(code: ErrorCode, message: impl Into<String>) -> ApiError {
        ApiError { code, message: message.into(), detail: None, order: None, retry_after_s: None }
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

    /// The error with when to try again.
    /// The leader's REST address, on a `not_leader` error that knows it.
    pub fn leader_http(&self) -> Option<&str> {
        match &self.detail {
            Some(("leader", leader)) => leader["http"].as_str(),
            _ => None,
        }
    }

    pub fn retry_after(mut self, seconds: u64) -> ApiError {
        self.retry_after_s = Some(seconds);
        self
    }

    /// The fields beyond `code` and `message` that JSON shows: `detail`, and the order
    /// as `order`.
    pub fn details(&self) -> impl Iterator<Item = (&'static str, Value)> + '_ {
        let order = self.order.as_ref().map(|order| ("order", order.to_json()));
        self.detail.clone().into_iter().chain(order)
    }

    pub fn malformed(message: impl Into<String>) -> ApiError {
        ApiError::new(ErrorCode::MALFORMED, message)
    }

    pub fn forbidden(message: impl Into<String>) -> ApiError {
        ApiError::new(ErrorCode::Forbidden, message)
    }

    pub fn internal(message: impl Into<String>) -> ApiError {
        ApiError::new(ErrorCode::Internal, message)
    }

    pub fn unknown_order() -> ApiError {
        ApiError::new(
            ErrorCode::Rejected(RejectReason::UnknownOrder),
            "no such order of this account",
        )
    }

    /// The engine refused a command: the spec's reason is the code.
    pub fn rejected(reason: RejectReason) -> ApiError {
        ApiError::new(ErrorCode::Rejected(reason), rejection_message(reason))
    }

    /// `busy`, to be tried again in a second.
    pub fn busy(message: impl Into<String>) -> ApiError {
        ApiError::new(ErrorCode::Busy, message).retry_after(1)
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
        if let LinkError::NotLeader(not_leader) = error {
            let api = ApiError::new(ErrorCode::NotLeader, not_leader.message).retry_after(1);
            return match not_leader.leader {
                Some(leader) => api.with("leader", leader.to_json()),
                None => api,
            };
        }
        let code = match &error {
            LinkError::Busy(_) | LinkError::Refused(bourse_engine::SubmitError::Busy { .. }) => {
                ErrorCode::Busy
            }
            LinkError::Refused(bourse_engine::SubmitError::Invalid(_)) => ErrorCode::InvalidCommand,
            LinkError::Refused(bourse_engine::SubmitError::Stopped(_)) | LinkError::Failed(_) => {
                ErrorCode::EngineStopped
            }
            LinkError::Refused(bourse_engine::SubmitError::NotLeader { .. })
            | LinkError::NotLeader(_) => ErrorCode::NotLeader,
        };
        let api = ApiError::new(code, error.to_string());
        match code {
            ErrorCode::Busy => api.retry_after(1),
            _ => api,
        }
    }
}

impl From<KeyError> for ApiError {
    fn from(error: KeyError) -> ApiError {
        let code = match &error {
            KeyError::Io { .. }
            | KeyError::Damaged { .. }
            | KeyError::DuplicateKey(_)
            | KeyError::WrongRecord
            | KeyError::NoClusterMaster => ErrorCode::KeyStoreFailed,
            KeyError::UnknownAccount(_) => ErrorCode::UnknownAccount,
            KeyError::UnknownKey(_) => ErrorCode::UnknownKey,
            KeyError::DuplicateAccount(_) => ErrorCode::DuplicateAccount,
            KeyError::InvalidAccountName(_) => ErrorCode::InvalidAccount,
        };
        ApiError::new(code, error.to_string())
    }
}

impl From<crate::services::clearing::settings::SettingsError> for ApiError {
    fn from(error: crate::services::clearing::settings::SettingsError) -> ApiError {
        ApiError::new(ErrorCode::SettingsFailed, error.to_string())
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashSet;

    use super::*;

    #[test]
    fn every_code_has_its_own_name_and_is_found_by_it() {
        let mut seen = HashSet::new();
        for code in ErrorCode::all() {
            assert!(seen.insert(code.as_str()), "{} is named twice", code.as_str());
            assert_eq!(ErrorCode::parse(code.as_str()), Some(code));
            assert!(code.as_str().bytes().all(|byte| byte.is_ascii_lowercase() || byte == b'_'));
        }
        assert_eq!(seen.len(), RejectReason::ALL.len() + PORT_CODES.len());
    }
}
