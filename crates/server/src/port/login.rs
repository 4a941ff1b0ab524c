//! How a client becomes a [`Session`], and how the port charges a session's requests:
//! the one place where the signature checks (`auth`), the password checks
//! (`passwords`) and the limits (`policy`) meet, whatever gateway the client came
//! through.
//!
//! - A signed request (REST, its pipelined loop, the Binance surface) is authenticated
//!   on its own and charged once, then (`Charging::OnceAtAuthentication`).
//! - A signed login (WebSocket, binary TCP, FIX) or a password login (DIFF) opens a
//!   connection's session: it takes a place among its principal's connections, and
//!   each request on it is charged when the port takes it.
//! - A password is tried only while its account's run of failures does not lock it
//!   (`policy`), by DIFF's `req_login` and by tqsdk's token endpoint alike.

use axum::http::HeaderMap;

use super::auth::{Signed, SignedMessage};
use super::error::{ApiError, ApiResult, ErrorCode};
use super::policy::PolicyEvents;
use super::session::{Charging, Session};
use super::state::AppState;
use crate::keys::KeyRecord;
use crate::metrics::Metrics;

impl PolicyEvents for Metrics {
    fn login_locked(&self) {
        self.login_locks.inc();
    }
}

impl AppState {
    /// A request signed in its headers (REST): its session, charged for this request.
    pub fn authenticate_request(
        &self,
        headers: &HeaderMap,
        method: &str,
        path_and_query: &str,
        body: &[u8],
        now_ms: u64,
    ) -> ApiResult<Session> {
        let key =
            self.auth.authenticate(&self.keys, headers, method, path_and_query, body, now_ms)?;
        self.request_session(key)
    }

    /// `authenticate_request` with the headers read through `header` (by lower-case
    /// name), for a gateway that parses HTTP itself (REST's pipelined loop).
    pub fn authenticate_request_with<'h>(
        &self,
        header: impl Fn(&str) -> Option<&'h [u8]>,
        method: &str,
        path_and_query: &str,
        body: &[u8],
        now_ms: u64,
    ) -> ApiResult<Session> {
        let key = self.auth.authenticate_with(
            &self.keys,
            header,
            method,
            path_and_query,
            body,
            now_ms,
        )?;
        self.request_session(key)
    }

    /// The active key `key_id` names, before its message is checked (a protocol that
    /// checks the key first, as Binance's does): `invalid_key` when there is none.
    pub fn active_key(&self, key_id: &str) -> ApiResult<KeyRecord> {
        self.keys
            .active_key(key_id)
            .ok_or_else(|| ApiError::new(ErrorCode::InvalidKey, "unknown or revoked API key"))
    }

    /// A request whose message a protocol built itself (Binance's query strings),
    /// signed with `key`: its session, charged for this request.
    pub fn authenticate_message(
        &self,
        key: KeyRecord,
        signed: &SignedMessage<'_>,
        now_ms: u64,
    ) -> ApiResult<Session> {
        let key = self.auth.verified(&self.keys, key, signed, now_ms)?;
        self.request_session(key)
    }

    fn request_session(&self, key: KeyRecord) -> ApiResult<Session> {
        let session =
            Session::of_key(key, self.policy.default_rate(), Charging::OnceAtAuthentication);
        session.charge_once(&self.policy)?;
        Ok(session)
    }

    /// A connection's login signed with an API key (WebSocket, binary TCP, FIX): its
    /// session, holding its place among the key's connections. A trader key only:
    /// `forbidden` for an operator's.
    pub fn login_with_key(&self, signed: &Signed<'_>, now_ms: u64) -> ApiResult<Session> {
        let key = self.auth.check(&self.keys, signed, now_ms)?;
        let session = Session::of_key(key, self.policy.default_rate(), Charging::PerRequest);
        session.account()?;
        let claim = self.policy.claim_connection(session.principal())?;
        Ok(session.with_claim(claim))
    }

    /// A connection's login with `account`'s password (DIFF): its session, holding its
    /// place among the account's connections. The password is tried only while the
    /// account's failures do not lock it.
    pub async fn login_with_password(&self, account: &str, password: &str) -> ApiResult<Session> {
        self.check_password(account, password).await?;
        let session = Session::of_password(account, self.policy.default_rate());
        let claim = self.policy.claim_connection(session.principal())?;
        Ok(session.with_claim(claim))
    }

    /// Checks `account`'s password (tqsdk's token endpoint, and every password login):
    /// `login_locked` while the account's failures lock it, else the check's answer,
    /// which then counts for or against the account.
    pub async fn check_password(&self, account: &str, password: &str) -> ApiResult<()> {
        self.policy.may_try_password(account)?;
        let checked = self.passwords.verify(account, password).await;
        match &checked {
            Ok(()) => self.policy.password_tried(account, true),
            Err(error) if error.code == ErrorCode::InvalidCredentials => {
                self.policy.password_tried(account, false)
            }
            // (The check did not run: busy, or the store failed. It says nothing of
            // the password.)
            Err(_) => {}
        }
        checked
    }

    /// Counts a request of `session` that asks the port for nothing else (a WebSocket
    /// ping or subscription): `rate_limited` beyond the session's rate.
    pub fn count_request(&self, session: &Session) -> ApiResult<()> {
        session.charge(&self.policy)
    }
}
