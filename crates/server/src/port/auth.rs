//! Request signing, the way major crypto exchanges do it. A private request carries
//!
//! - `X-Bourse-Key`: the key id,
//! - `X-Bourse-Timestamp`: milliseconds since the Unix epoch,
//! - `X-Bourse-Signature`: hex `HMAC-SHA256(secret, timestamp + "\n" + METHOD + "\n" +
//!   path-and-query + "\n" + body)`.
//!
//! The timestamp must be within the configured window of the server's clock, and a
//! signature is accepted once: a request replayed within the window is refused. Each
//! trader key has a token bucket of requests per second (admin keys have none). The checks run in a fixed order
//! (`docs/api.md`), each with its own code. A key's logged-in connections (WebSocket,
//! TCP) are counted against its limit here too (`LoggedIn`).

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Instant;

use axum::http::HeaderMap;
use bourse_protocol::signing::{signing_message, KEY_HEADER, SIGNATURE_HEADER, TIMESTAMP_HEADER};
use rustc_hash::FxHashMap;

use crate::keys::{KeyRecord, KeyStore, Role};
use crate::port::error::{ApiError, ErrorCode};

/// Who made an authenticated request.
#[derive(Clone, Debug)]
pub struct Caller {
    pub key: KeyRecord,
}

impl Caller {
    /// The account a trader key acts for.
    pub fn account(&self) -> Result<&str, ApiError> {
        match (&self.key.role, &self.key.account) {
            (Role::Trader, Some(account)) => Ok(account),
            _ => Err(ApiError::forbidden("this request needs a trader key (an account's key)")),
        }
    }

    pub fn require_admin(&self) -> Result<(), ApiError> {
        match self.key.role {
            Role::Admin => Ok(()),
            Role::Trader => Err(ApiError::forbidden("this request needs an admin key")),
        }
    }
}

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

/// The server side of signing: key lookup, time window, signature, replay and rate.
pub struct Authenticator {
    timestamp_window_ms: u64,
    requests_per_second: f64,
    requests_burst: f64,
    /// Signatures accepted within the window, with when they may be forgotten.
    seen: Mutex<SeenSignatures>,
    /// By key id: only ids of keys that exist get a bucket, so the fast hash is safe (it
    /// runs for every request).
    buckets: Mutex<FxHashMap<String, Bucket>>,
}

#[derive(Default)]
struct SeenSignatures {
    expires_ms: HashMap<[u8; 32], u64>,
    next_sweep_ms: u64,
}

struct Bucket {
    tokens: f64,
    refilled: Instant,
}

impl Authenticator {
    pub fn new(
        timestamp_window_ms: u64,
        requests_per_second: u32,
        requests_burst: u32,
    ) -> Authenticator {
        Authenticator {
            timestamp_window_ms,
            requests_per_second: f64::from(requests_per_second.max(1)),
            requests_burst: f64::from(requests_burst.max(1)),
            seen: Mutex::new(SeenSignatures::default()),
            buckets: Mutex::new(FxHashMap::default()),
        }
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
    ) -> Result<Caller, ApiError> {
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
    ) -> Result<Caller, ApiError> {
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
    ) -> Result<Caller, ApiError> {
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
    /// it with the key's secret, the replay check, and the key's rate. `key` is the
    /// active key the message names.
    pub fn verified(
        &self,
        keys: &KeyStore,
        key: KeyRecord,
        signed: &SignedMessage<'_>,
        now_ms: u64,
    ) -> Result<Caller, ApiError> {
        let signature = parse_signature(signed.signature_hex)?;
        if !keys.verify(&key.id, signed.message, &signature) {
            return Err(ApiError::new(
                ErrorCode::InvalidSignature,
                "the signature does not match the request (see docs/api.md, Signing)",
            ));
        }
        self.remember(signature, signed.expires_ms, now_ms)?;
        // The operator's own keys are not rate limited: a venue under load must still be
        // manageable.
        if key.role != Role::Admin {
            self.take_token(&key)?;
        }
        Ok(Caller { key })
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

    /// Takes one request from `key`'s bucket; `rate_limited` when it is empty. A key
    /// made with its own rate (`KeyRecord::requests_per_second`) has that rate and a
    /// burst of twice it; the others the server's.
    pub fn take_token(&self, key: &KeyRecord) -> Result<(), ApiError> {
        let (rate, burst) = match key.requests_per_second {
            Some(rate) => (f64::from(rate.max(1)), 2.0 * f64::from(rate.max(1))),
            None => (self.requests_per_second, self.requests_burst),
        };
        let mut buckets = self.buckets.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        let now = Instant::now();
        // Looked up before inserting, so that a known key costs no allocation.
        if !buckets.contains_key(&key.id) {
            buckets.insert(key.id.clone(), Bucket { tokens: burst, refilled: now });
        }
        let Some(bucket) = buckets.get_mut(&key.id) else { return Ok(()) };
        let elapsed = now.duration_since(bucket.refilled).as_secs_f64();
        bucket.tokens = (bucket.tokens + elapsed * rate).min(burst);
        bucket.refilled = now;
        if bucket.tokens < 1.0 {
            let mut error = ApiError::new(
                ErrorCode::RateLimited,
                format!("more than {rate} requests per second for this key"),
            );
            error.retry_after_s = Some(1);
            return Err(error);
        }
        bucket.tokens -= 1.0;
        Ok(())
    }
}

fn parse_signature(text: &str) -> Result<[u8; 32], ApiError> {
    let invalid =
        || ApiError::new(ErrorCode::InvalidSignature, "the signature must be 64 hex digits");
    let bytes = hex::decode(text).map_err(|_| invalid())?;
    bytes.try_into().map_err(|_| invalid())
}

/// The connections logged in with each key (WebSocket and binary TCP), at most
/// `per_key_max` per key.
pub struct LoggedIn {
    per_key_max: usize,
    connections: Mutex<HashMap<String, usize>>,
}

impl LoggedIn {
    pub fn new(per_key_max: usize) -> LoggedIn {
        LoggedIn { per_key_max, connections: Mutex::new(HashMap::new()) }
    }

    /// Counts a logged-in connection of `key`; refused beyond the limit per key.
    pub fn claim(&self, key: &str) -> Result<(), (&'static str, String)> {
        let mut connections =
            self.connections.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        let count = connections.entry(key.to_string()).or_insert(0);
        if *count >= self.per_key_max {
            return Err((
                "too_many_connections",
                format!(
                    "this key has {count} connections; at most {} are allowed",
                    self.per_key_max
                ),
            ));
        }
        *count += 1;
        Ok(())
    }

    /// A connection of `key` that `claim` counted has closed.
    pub fn release(&self, key: &str) {
        let mut connections =
            self.connections.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        if let Some(count) = connections.get_mut(key) {
            debug_assert!(*count > 0, "a key's count is removed when it reaches zero");
            *count = count.saturating_sub(1);
            if *count == 0 {
                connections.remove(key);
            }
        }
    }
}
