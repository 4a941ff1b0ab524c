//! Who is asking: a [`Session`] is what the port hands a gateway once a client has
//! proved who it is (a signed request, a signed login, a password), and what every
//! operation of the port then takes. It says whom the policy charges
//! ([`Principal`]), at what rate, for which account the client trades, and it holds
//! the connection's place in its principal's count ([`ConnectionClaim`]) for as long
//! as the session lives.
//!
//! Two kinds, so that a request is charged once whatever it asks:
//!
//! - a **request's** session (REST and the Binance surface: every request signed on
//!   its own): charged once, when it is authenticated; what the handler asks of the
//!   port for that request is not charged again;
//! - a **connection's** session (WebSocket, binary TCP, FIX, DIFF): each request on the
//!   connection is charged when the port takes it.

use std::sync::{Arc, OnceLock};

use bourse_core::ids::AccountId;

use super::error::{ApiError, ApiResult};
use super::policy::{ConnectionClaim, Policy, Principal, Rate};
use crate::directory::Directory;
use crate::keys::{KeyRecord, Role};

/// Whether a session's requests are charged one by one.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Charging {
    /// Charged when it was authenticated: one request.
    OnceAtAuthentication,
    /// Every request the port takes of it.
    PerRequest,
}

/// An authenticated client, as the port knows it. Cheap to clone (one shared record):
/// a connection hands it to the port with every request.
#[derive(Clone, Debug)]
pub struct Session {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    principal: Principal,
    /// `None`: not rate limited (the operator's keys).
    rate: Option<Rate>,
    charging: Charging,
    /// The API key it proved it holds, if it logged in with one.
    key: Option<KeyRecord>,
    /// The account it trades for (a trader key's, or the account whose password it
    /// gave).
    account: Option<String>,
    /// Its place among its principal's connections, given back when the last clone
    /// of the session is dropped.
    claim: Option<ConnectionClaim>,
    /// The account's engine id, once the engine has it (its first deposit): looked up
    /// once per session, not per request.
    account_id: OnceLock<AccountId>,
}

impl Session {
    /// The session of a client that signed with `key`.
    pub(super) fn of_key(key: KeyRecord, default_rate: Rate, charging: Charging) -> Session {
        let rate = match (key.role, key.requests_per_second) {
            (Role::Admin, _) => None,
            (Role::Trader, Some(own)) => Some(Rate::of_key(own)),
            (Role::Trader, None) => Some(default_rate),
        };
        let account = match key.role {
            Role::Trader => key.account.clone(),
            Role::Admin => None,
        };
        Session {
            inner: Arc::new(Inner {
                principal: Principal::Key(key.id.clone()),
                rate,
                charging,
                key: Some(key),
                account,
                claim: None,
                account_id: OnceLock::new(),
            }),
        }
    }

    /// The session of a connection logged in with `account`'s password.
    pub(super) fn of_password(account: &str, rate: Rate) -> Session {
        Session {
            inner: Arc::new(Inner {
                principal: Principal::Password(account.to_string()),
                rate: Some(rate),
                charging: Charging::PerRequest,
                key: None,
                account: Some(account.to_string()),
                claim: None,
                account_id: OnceLock::new(),
            }),
        }
    }

    /// The session holding `claim` (its connection's place); made before the session
    /// is shared.
    pub(super) fn with_claim(mut self, claim: ConnectionClaim) -> Session {
        match Arc::get_mut(&mut self.inner) {
            Some(inner) => inner.claim = Some(claim),
            None => debug_assert!(false, "a session is given its claim before it is shared"),
        }
        self
    }

    pub fn principal(&self) -> &Principal {
        &self.inner.principal
    }

    /// Charges one request of the session against its principal's rate: every
    /// request of a connection's session, none more of a request's (charged when it
    /// was authenticated, `charge_once`).
    pub(super) fn charge(&self, policy: &Policy) -> ApiResult<()> {
        match self.inner.charging {
            Charging::OnceAtAuthentication => Ok(()),
            Charging::PerRequest => self.charge_once(policy),
        }
    }

    /// Charges one request, whatever the session's kind.
    pub(super) fn charge_once(&self, policy: &Policy) -> ApiResult<()> {
        match self.inner.rate {
            // The operator's own keys are not rate limited: a venue under load must
            // still be manageable.
            None => Ok(()),
            Some(rate) => policy.charge(&self.inner.principal, rate),
        }
    }

    /// The engine id of the account the session trades for (read from the directory
    /// once per session): `None` before its first deposit made it, `forbidden` for an
    /// operator's key.
    pub(super) async fn account_id(&self, directory: &Directory) -> ApiResult<Option<AccountId>> {
        let name = self.account()?;
        if let Some(id) = self.known_account_id() {
            return Ok(Some(id));
        }
        let id = directory.account_id(name).await?;
        if let Some(id) = id {
            self.learn_account_id(id);
        }
        Ok(id)
    }

    /// The account's engine id, if the session has learnt it.
    pub(super) fn known_account_id(&self) -> Option<AccountId> {
        self.inner.account_id.get().copied()
    }

    /// Keeps the account's engine id (it never changes once the engine has it).
    pub(super) fn learn_account_id(&self, id: AccountId) {
        let kept = *self.inner.account_id.get_or_init(|| id);
        debug_assert_eq!(kept, id, "an account's engine id never changes");
    }

    /// The key's id, for logs (`None` for a password login).
    pub fn key_id(&self) -> Option<&str> {
        self.inner.key.as_ref().map(|key| key.id.as_str())
    }

    /// The key it signed with, if any.
    pub fn key(&self) -> Option<&KeyRecord> {
        self.inner.key.as_ref()
    }

    /// The account it trades for: `forbidden` for an operator's key.
    pub fn account(&self) -> ApiResult<&str> {
        self.inner.account.as_deref().ok_or_else(|| {
            ApiError::forbidden("this request needs a trader key (an account's key)")
        })
    }

    /// `forbidden` unless it signed with an operator's key.
    pub fn require_admin(&self) -> ApiResult<()> {
        match self.inner.key.as_ref().map(|key| key.role) {
            Some(Role::Admin) => Ok(()),
            _ => Err(ApiError::forbidden("this request needs an admin key")),
        }
    }
}
