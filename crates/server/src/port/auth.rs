//! Request signing, the way major crypto exchanges do it. A private request carries
//!
//! - `X-Bourse-Key`: the key id,
//! - `X-Bourse-Timestamp`: milliseconds since the Unix epoch,
//! - `X-Bourse-Signature`: hex `HMAC-SHA256(secret, timestamp + "\n" + METHOD + "\n" +
//!   path-and-query + "\n" + body)`.
//!
//! The timestamp must be within the configured window of the server's clock, and a
//! signature is accepted once: a request replayed within the window is refused. The
//! checks run in a fixed order (`docs/api.md`), each with its own code; what they
//! prove is the key (`KeyRecord`). What a key may then do, and how often, is the
//! port's (`session`, `policy`).

use std::collections::HashMap;
use std::sync::Mutex;

use axum::http::HeaderMap;
use bourse_protocol::signing::{signing_message, KEY_HEADER, SIGNATURE_HEADER, TIMESTAMP_HEADER};

use crate::keys::{KeyRecord, KeyStore};
use crate::port::error::{ApiError, ErrorCode};

/// One signed request's parts.
#[derive(Clone, Copy, Debug)]
pub struct Signed<'a> {
    pub key_id: &'a str,
    pub timestamp: &'a str,
    pub signature_hex: &'a str,
    pub method: &'a str,
    pub path_and_query: &'a str,
    pub body: &'a [u8],
}

/// A message to check against a key's signature: the bytes signed, the signature in
/// hex, and when the request stops being valid (its signature is remembered until then,
/// so that a replay is refused).
#[derive(Clone, Copy, Debug)]
pub struct SignedMessage<'a> {
    pub message: &'a [u8],
    pub signature_hex: &'a str,
    pub expires_ms: u64,
}

/// The server side of signing: key lookup, time window, signature and replay.
pub struct Authenticator {
    timestamp_window_ms: u64,
    /// Signatures accepted within the window, with when they may be forgotten.
    seen: Mutex<SeenSignatures>,
}

#[derive(Default)]
struct SeenSignatures {
    expires_ms: HashMap<[u8; 32], u64>,
    next_sweep_ms: u64,
}

impl Authenticator {
    pub fn new(timestamp_window_ms: u64) -> Authenticator {
        Authenticator { timestamp_window_ms, seen: Mutex::new(SeenSignatures::default()) }
    }

    /// Checks a request's signature headers against `keys`; `now_ms` is the server's
    /// clock.
    pub fn authenticate(
        &self,
        keys: &KeyStore,
        headers: &HeaderMap,
        method: &str,
        path_and_query: &str,
        body: &[u8],
        now_ms: u64,
    ) -> Result<KeyRecord, ApiError> {
        let lookup = |name: &str| headers.get(name).map(|value| value.as_bytes());
        self.authenticate_with(keys, lookup, method, path_and_query, body, now_ms)
    }

    /// `authenticate` with the headers read through `header` (by lower-case name), for
    /// a gateway that parses HTTP itself (`http`).
    pub fn authenticate_with<'h>(
        &self,
        keys: &KeyStore,
        header: impl Fn(&str) -> Option<&'h [u8]>,
        method: &str,
        path_and_query: &str,
        body: &[u8],
        now_ms: u64,
    ) -> Result<KeyRecord, ApiError> {
        let text = |name: &'static str| -> Result<&'h str, ApiError> {
            let value = header(name).ok_or_else(|| {
                ApiError::new(ErrorCode::MissingSignature, format!("the {name} header is missing"))
            })?;
            std::str::from_utf8(value)
                .ok()
                .filter(|text| {
                    text.bytes().all(|byte| byte == b'\t' || (b' '..=b'~').contains(&byte))
                })
                .ok_or_else(|| {
                    ApiError::new(
                        ErrorCode::MissingSignature,
                        format!("the {name} header is not text"),
                    )
                })
        };
        let key_id = text(KEY_HEADER)?;
        let timestamp = text(TIMESTAMP_HEADER)?;
        let signature_hex = text(SIGNATURE_HEADER)?;
        let signed = Signed { key_id, timestamp, signature_hex, method, path_and_query, body };
        self.check(keys, &signed, now_ms)
    }

    /// The checks of `authenticate` on values taken from wherever the protocol carries
    /// them (headers for REST, a login message for WebSocket and TCP).
    pub fn check(
        &self,
        keys: &KeyStore,
        signed: &Signed<'_>,
        now_ms: u64,
    ) -> Result<KeyRecord, ApiError> {
        let Signed { key_id, timestamp, signature_hex, method, path_and_query, body } = *signed;
        let key = keys
            .active_key(key_id)
            .ok_or_else(|| ApiError::new(ErrorCode::InvalidKey, "unknown or revoked API key"))?;
        let timestamp_ms: u64 = timestamp.parse().map_err(|_| {
            ApiError::new(
                ErrorCode::InvalidTimestamp,
                "the timestamp must be milliseconds since the Unix epoch",
            )
        })?;
        if timestamp_ms.abs_diff(now_ms) > self.timestamp_window_ms {
            return Err(ApiError::new(
                ErrorCode::ExpiredTimestamp,
                format!(
                    "the timestamp is {} ms from the server's clock; at most {} ms is accepted",
                    timestamp_ms.abs_diff(now_ms),
                    self.timestamp_window_ms
                ),
            ));
        }
        let message = signing_message(timestamp, method, path_and_query, body);
        let expires_ms = timestamp_ms + self.timestamp_window_ms + 1;
        let signed = SignedMessage { message: &message, signature_hex, expires_ms };
        self.verified(keys, key, &signed, now_ms)
    }

    /// The checks after the key and the time window, for a message however a protocol
    /// builds it (Bourse's own signing, Binance's query strings): the signature over
    /// it with the key's secret, and the replay check. `key` is the active key the
    /// message names.
    pub fn verified(
        &self,
        keys: &KeyStore,
        key: KeyRecord,
        signed: &SignedMessage<'_>,
        now_ms: u64,
    ) -> Result<KeyRecord, ApiError> {
        let signature = parse_signature(signed.signature_hex)?;
        if !keys.verify(&key.id, signed.message, &signature) {
            return Err(ApiError::new(
                ErrorCode::InvalidSignature,
                "the signature does not match the request (see docs/api.md, Signing)",
            ));
        }
        self.remember(signature, signed.expires_ms, now_ms)?;
        Ok(key)
    }

    /// A signature seen before, until its request's time window closes (`expires_ms`),
    /// is a replay.
    fn remember(&self, signature: [u8; 32], expires_ms: u64, now_ms: u64) -> Result<(), ApiError> {
        let mut seen = self.seen.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        if now_ms >= seen.next_sweep_ms {
            seen.expires_ms.retain(|_, expires| *expires > now_ms);
            seen.next_sweep_ms = now_ms + self.timestamp_window_ms.max(1_000);
        }
        if seen.expires_ms.insert(signature, expires_ms).is_some() {
            return Err(ApiError::new(
                ErrorCode::ReplayedRequest,
                "this exact request was received before; sign each request anew",
            ));
        }
        Ok(())
    }
}

fn parse_signature(text: &str) -> Result<[u8; 32], ApiError> {
    let invalid =
        || ApiError::new(ErrorCode::InvalidSignature, "the signature must be 64 hex digits");
    let bytes = hex::decode(text).map_err(|_| invalid())?;
    bytes.try_into().map_err(|_| invalid())
}
