//! Account passwords: the rule for what a password may be, hashing it (Argon2id with
//! the `argon2` crate's default parameters and a random salt, kept as a PHC string in
//! the key store beside the account) and checking one. This is the one place a
//! password is handled: the operator sets and removes them (`PUT` and `DELETE
//! /v1/admin/accounts/{account}/password`), and every login by name and password goes
//! through [`Passwords::verify`] (the token endpoint tqsdk logs in with, `rest::openid`,
//! and the DIFF gateway's `req_login`).
//!
//! Argon2 is slow on purpose (tens of milliseconds and 19 MiB a hash), so it runs on
//! tokio's blocking threads, at most [`HASHING_AT_ONCE`] at a time: a flood of logins
//! cannot take every core from order entry. At most [`WAITING_MAX`] more wait for
//! their turn; beyond that a login is answered `busy` at once.
//!
//! This module never stores, logs or shows a password, and never says which of the
//! account name or the password was wrong: an unknown account, an account without a
//! password and a wrong password are one answer, `invalid_credentials`, after the same
//! work (an unknown account's password is checked against a stand-in hash).
//!
//! From another module (a gateway with the name and password a client sent):
//!
//! ```ignore
//! // state: &AppState (or the `Shared` Arc)
//! match state.passwords.verify(&account_name, &password).await {
//!     Ok(()) => { /* logged in as `account_name` */ }
//!     Err(error) => { /* error.code: ErrorCode::InvalidCredentials, or Busy (retry
//!                        after error.retry_after_s), or Internal */ }
//! }
//! ```

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use argon2::password_hash::{PasswordHasher, PasswordVerifier};
use argon2::Argon2;
use tokio::sync::Semaphore;

use crate::keys::{KeyChange, KeyError, KeyStore};
use crate::port::error::{ApiError, ApiResult, ErrorCode};
use crate::port::records::KeyChanges;

/// A password is 8 to 128 bytes (of UTF-8).
pub const PASSWORD_BYTES_MIN: usize = 8;
pub const PASSWORD_BYTES_MAX: usize = 128;
/// Argon2 hashes computed at once, at most (each takes a core while it runs).
pub const HASHING_AT_ONCE: usize = 2;
/// Hashes waiting for their turn, at most; more are refused `busy`.
pub const WAITING_MAX: usize = 256;

/// What an unknown account's password is checked against, so that its answer takes as
/// long as a wrong password's: the hash of a random password nobody knows, with the
/// default parameters (a test checks them).
const STAND_IN_HASH: &str =
    "$argon2id$v=19$m=19456,t=2,p=1$ZiUMLAfnKf3FJe3GMiHHxg$5Vi89dhlV9ppFwHex2jnV1FgR16eK2G1XLc0wIspUjw";

/// The passwords of the key store's accounts. One per server, in `AppState::passwords`.
pub struct Passwords {
    keys: Arc<KeyStore>,
    /// How a password change reaches the store (through the log, in a cluster).
    changes: Arc<KeyChanges>,
    permits: Arc<Semaphore>,
    waiting: AtomicUsize,
}

impl Passwords {
    /// One node's passwords, changed in `keys` at once.
    pub fn new(keys: Arc<KeyStore>) -> Passwords {
        Passwords::with_changes(Arc::new(KeyChanges::local(keys)))
    }

    /// The passwords of the store `changes` changes.
    pub fn with_changes(changes: Arc<KeyChanges>) -> Passwords {
        Passwords {
            keys: Arc::clone(changes.keys()),
            changes,
            permits: Arc::new(Semaphore::new(HASHING_AT_ONCE)),
            waiting: 0.into(),
        }
    }

    /// Checks `password` against `account`'s: `Ok(())` if the account exists, has a
    /// password, and this is it. Otherwise `invalid_credentials` (401), whichever of
    /// the three it was; `busy` (503) when too many checks are waiting; `internal`
    /// (500) when the check could not run.
    pub async fn verify(&self, account: &str, password: &str) -> ApiResult<()> {
        let stored = self.keys.account(account).and_then(|record| record.password_hash);
        // Too long to be anyone's password: no need to hash it (the length says nothing
        // about the account).
        if password.len() > PASSWORD_BYTES_MAX {
            return Err(invalid_credentials());
        }
        let known = stored.is_some();
        let hash = stored.unwrap_or_else(|| STAND_IN_HASH.to_string());
        let password = password.as_bytes().to_vec();
        let account_name = account.to_string();
        let matches = self
            .hashing(move || match Argon2::default().verify_password(&password, hash.as_str()) {
                Ok(()) => true,
                Err(argon2::password_hash::Error::PasswordInvalid) => false,
                Err(error) => {
                    if known {
                        tracing::error!(account = %account_name, %error,
                            "the account's stored password hash cannot be read; its logins fail");
                    }
                    false
                }
            })
            .await?;
        if matches && known {
            Ok(())
        } else {
            Err(invalid_credentials())
        }
    }

    /// Sets `account`'s password (replacing any it had): checked against the rule,
    /// hashed, stored durably. `invalid_password` (400) if it breaks the rule,
    /// `unknown_account` (404).
    pub async fn set(&self, account: &str, password: &str) -> ApiResult<()> {
        check_rule(password)?;
        if self.keys.account(account).is_none() {
            return Err(KeyError::UnknownAccount(account.to_string()).into());
        }
        let password = password.as_bytes().to_vec();
        let hash = self
            .hashing(move || {
                Argon2::default().hash_password(&password).map(|hash| hash.to_string())
            })
            .await?
            .map_err(|error| internal(format!("the password could not be hashed: {error}")))?;
        let set =
            KeyChange::SetPasswordHash { account: account.to_string(), password_hash: Some(hash) };
        self.changes.apply(set).await?;
        Ok(())
    }

    /// Removes `account`'s password: it can no longer log in with one (tokens issued
    /// under it are refused from then on, `tokens`). Whether it had one;
    /// `unknown_account` (404).
    pub async fn remove(&self, account: &str) -> ApiResult<bool> {
        let remove =
            KeyChange::SetPasswordHash { account: account.to_string(), password_hash: None };
        Ok(self.changes.apply(remove).await?.account()?.has_password())
    }

    /// Runs `work` (an Argon2 hash) on a blocking thread once a permit is free. The
    /// permit goes with the work, so a caller that gives up does not free it early.
    async fn hashing<T: Send + 'static>(
        &self,
        work: impl FnOnce() -> T + Send + 'static,
    ) -> ApiResult<T> {
        let permit = {
            let _waiting = Waiting::enter(&self.waiting)?;
            Arc::clone(&self.permits)
                .acquire_owned()
                .await
                .map_err(|_| internal("the password checks have stopped"))?
        };
        blocking(move || {
            let result = work();
            drop(permit);
            result
        })
        .await
    }
}

/// The rule for a new password.
fn check_rule(password: &str) -> ApiResult<()> {
    let length = password.len();
    if (PASSWORD_BYTES_MIN..=PASSWORD_BYTES_MAX).contains(&length) {
        return Ok(());
    }
    Err(ApiError::new(
        ErrorCode::InvalidPassword,
        format!(
            "a password is {PASSWORD_BYTES_MIN} to {PASSWORD_BYTES_MAX} bytes; this one is \
             {length}"
        ),
    ))
}

fn invalid_credentials() -> ApiError {
    ApiError::new(ErrorCode::InvalidCredentials, "the account name or the password is wrong")
}

fn internal(message: impl Into<String>) -> ApiError {
    ApiError::new(ErrorCode::Internal, message)
}

async fn blocking<T: Send + 'static>(work: impl FnOnce() -> T + Send + 'static) -> ApiResult<T> {
    tokio::task::spawn_blocking(work)
        .await
        .map_err(|error| internal(format!("the password work did not finish: {error}")))
}

/// One caller waiting for a permit, counted while it waits (also when it gives up).
struct Waiting<'a>(&'a AtomicUsize);

impl<'a> Waiting<'a> {
    fn enter(count: &'a AtomicUsize) -> ApiResult<Waiting<'a>> {
        let waiting = Waiting(count);
        if count.fetch_add(1, Ordering::SeqCst) >= WAITING_MAX {
            let mut error = ApiError::new(
                ErrorCode::Busy,
                "too many logins are being checked; try again in a moment",
            );
            error.retry_after_s = Some(1);
            return Err(error);
        }
        Ok(waiting)
    }
}

impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn store(directory: &std::path::Path) -> Arc<KeyStore> {
        let (store, _) = KeyStore::open(directory, 1).unwrap();
        store.create_account("alice", 1).unwrap();
        store.create_account("bob", 1).unwrap();
        Arc::new(store)
    }

    fn runtime() -> tokio::runtime::Runtime {
        tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap()
    }

    #[test]
    fn a_set_password_verifies_and_nothing_else_does_all_with_one_answer() {
        let directory = tempfile::tempdir().unwrap();
        let keys = store(directory.path());
        let passwords = Passwords::new(Arc::clone(&keys));
        runtime().block_on(async {
            passwords.set("alice", "correct horse").await.unwrap();
            assert!(passwords.verify("alice", "correct horse").await.is_ok());
            let wrong = passwords.verify("alice", "correct horsE").await.unwrap_err();
            let no_password = passwords.verify("bob", "correct horse").await.unwrap_err();
            let unknown = passwords.verify("carol", "correct horse").await.unwrap_err();
            let too_long = passwords.verify("alice", &"x".repeat(129)).await.unwrap_err();
            for error in [&wrong, &no_password, &unknown, &too_long] {
                assert_eq!(error.code, ErrorCode::InvalidCredentials);
                assert_eq!(error.message, wrong.message, "no hint which part was wrong");
            }
        });
        // Stored as an Argon2id PHC string, never the password itself.
        let on_disk = std::fs::read_to_string(directory.path().join("keys.json")).unwrap();
        assert!(on_disk.contains("$argon2id$v=19$m=19456,t=2,p=1$"), "{on_disk}");
        assert!(!on_disk.contains("correct horse"));
        // And durable: a store opened again checks the same password.
        let (reopened, _) = KeyStore::open(directory.path(), 2).unwrap();
        let again = Passwords::new(Arc::new(reopened));
        runtime().block_on(async {
            assert!(again.verify("alice", "correct horse").await.is_ok());
        });
    }

    #[test]
    fn the_same_password_hashes_differently_each_time() {
        let directory = tempfile::tempdir().unwrap();
        let keys = store(directory.path());
        let passwords = Passwords::new(Arc::clone(&keys));
        runtime().block_on(async {
            passwords.set("alice", "same password").await.unwrap();
            passwords.set("bob", "same password").await.unwrap();
        });
        let (alice, bob) = (keys.account("alice").unwrap(), keys.account("bob").unwrap());
        assert_ne!(alice.password_hash, bob.password_hash, "a random salt each");
    }

    #[test]
    fn the_rule_is_8_to_128_bytes_and_unknown_accounts_are_refused() {
        let directory = tempfile::tempdir().unwrap();
        let passwords = Passwords::new(store(directory.path()));
        runtime().block_on(async {
            for bad in ["", "7 bytes", &"y".repeat(129)] {
                let error = passwords.set("alice", bad).await.unwrap_err();
                assert_eq!(error.code, ErrorCode::InvalidPassword);
            }
            passwords.set("alice", "8 bytes!").await.unwrap();
            passwords.set("alice", &"z".repeat(128)).await.unwrap();
            assert!(passwords.verify("alice", &"z".repeat(128)).await.is_ok());
            let error = passwords.set("carol", "long enough").await.unwrap_err();
            assert_eq!(error.code, ErrorCode::UnknownAccount);
            let error = passwords.remove("carol").await.unwrap_err();
            assert_eq!(error.code, ErrorCode::UnknownAccount);
        });
    }

    #[test]
    fn a_removed_password_no_longer_verifies() {
        let directory = tempfile::tempdir().unwrap();
        let keys = store(directory.path());
        let passwords = Passwords::new(Arc::clone(&keys));
        runtime().block_on(async {
            passwords.set("alice", "temporary one").await.unwrap();
            assert!(passwords.remove("alice").await.unwrap(), "it had one");
            assert!(!passwords.remove("alice").await.unwrap(), "and now has none");
            let error = passwords.verify("alice", "temporary one").await.unwrap_err();
            assert_eq!(error.code, ErrorCode::InvalidCredentials);
        });
        assert!(!keys.account("alice").unwrap().has_password());
    }

    #[test]
    fn the_stand_in_hash_costs_what_a_real_one_costs() {
        let parsed = argon2::password_hash::phc::PasswordHash::new(STAND_IN_HASH).unwrap();
        let params = argon2::Params::try_from(&parsed).unwrap();
        let default = argon2::Params::default();
        assert_eq!(parsed.algorithm.as_str(), "argon2id");
        assert_eq!(
            (params.m_cost(), params.t_cost(), params.p_cost()),
            (default.m_cost(), default.t_cost(), default.p_cost())
        );
    }

    #[test]
    fn callers_beyond_the_waiting_limit_are_refused_busy() {
        let count = AtomicUsize::new(WAITING_MAX);
        let error = Waiting::enter(&count).err().unwrap();
        assert_eq!((error.code, error.retry_after_s), (ErrorCode::Busy, Some(1)));
        assert_eq!(count.load(Ordering::SeqCst), WAITING_MAX, "the refused one is not counted");
        count.store(WAITING_MAX - 1, Ordering::SeqCst);
        let waiting = Waiting::enter(&count).unwrap();
        assert_eq!(count.load(Ordering::SeqCst), WAITING_MAX);
        drop(waiting);
        assert_eq!(count.load(Ordering::SeqCst), WAITING_MAX - 1);
    }

    #[test]
    fn at_most_two_hashes_run_at_once() {
        let directory = tempfile::tempdir().unwrap();
        let passwords = Arc::new(Passwords::new(store(directory.path())));
        let running = Arc::new(AtomicUsize::new(0));
        let most = Arc::new(AtomicUsize::new(0));
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap();
        runtime.block_on(async {
            let mut tasks = Vec::new();
            for _ in 0..8 {
                let (passwords, running, most) =
                    (Arc::clone(&passwords), Arc::clone(&running), Arc::clone(&most));
                tasks.push(tokio::spawn(async move {
                    passwords
                        .hashing(move || {
                            let now = running.fetch_add(1, Ordering::SeqCst) + 1;
                            most.fetch_max(now, Ordering::SeqCst);
                            std::thread::sleep(std::time::Duration::from_millis(20));
                            running.fetch_sub(1, Ordering::SeqCst);
                        })
                        .await
                        .unwrap();
                }));
            }
            for task in tasks {
                task.await.unwrap();
            }
        });
        let most = most.load(Ordering::SeqCst);
        assert!((1..=HASHING_AT_ONCE).contains(&most), "{most} ran at once");
    }
}
