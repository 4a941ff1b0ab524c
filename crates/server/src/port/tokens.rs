//! Login tokens: what a client that logged in with an account's name and password
//! (tqsdk, through `rest::openid`) holds afterwards. It owns the token format, its
//! signing key, the lifetimes, and what a token grants; it never checks a password
//! (`passwords` does, before a token is issued) and never stores a token.
//!
//! A token is a JWT (RFC 7519) signed with HS256: `base64url(header) "."
//! base64url(claims) "." base64url(HMAC-SHA256(key, the two parts before))`, the
//! header always `{"alg":"HS256","typ":"JWT"}`. The claims ([`Claims`]) are those
//! tqsdk reads (`sub`, `grants`) and Keycloak's usual ones (`iss`, `iat`, `exp`, `typ`,
//! `preferred_username`), plus `pwd`: a keyed fingerprint of the password hash the
//! token was issued under, so that changing or removing an account's password ends
//! every token issued before. Access tokens (`typ` `Bearer`) live
//! [`ACCESS_TOKEN_SECONDS`], refresh tokens (`Refresh`) [`REFRESH_TOKEN_SECONDS`].
//!
//! The key is `HMAC-SHA256(master key, "bourse-token-key")` (`keys`), never the master
//! key itself: a new master key refuses every token signed before. Checking a token
//! checks, in this order, its shape, its signature (compared in constant time, before
//! anything in it is read), the header, the issuer, its type, its expiry and its
//! password fingerprint; each failure is a [`TokenError`].
//!
//! The signing is written here, with the `hmac`, `sha2` and `base64` crates the server
//! has anyway, rather than with the `jsonwebtoken` crate: since version 10 that crate
//! needs a crypto back-end, and its choices are `aws_lc_rs` (C code) or `rust_crypto`,
//! which brings RSA, P-256, P-384 and Ed25519 with older `hmac` and `sha2` (about 50
//! crates, `rsa` among them with an unfixed advisory) for the one algorithm used here;
//! without a back-end it panics unless a process-wide provider is installed first.
//! HS256 with one fixed header is a few lines.
//!
//! What a token grants: the features `["futr"]` (tqsdk's name for futures exchanges'
//! symbols) and the accounts `[sub]` plus those added with
//! `update-grant-accounts` ([`Tokens::add_account`]). The added accounts are kept in
//! memory only, a bounded map ([`ADDED_ACCOUNTS_MAX`] per subject,
//! [`SUBJECTS_MAX`] subjects, the least recently changed forgotten first): tqsdk adds
//! them again on every start. A grant only lets tqsdk go on to log in to that account:
//! trading on it still needs that account's own password (the DIFF gateway's
//! `req_login` checks it with `passwords`).

use std::collections::{BTreeSet, HashMap};
use std::fmt;
use std::sync::{Arc, Mutex};

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;
use hmac::{Hmac, KeyInit, Mac};
use serde::{Deserialize, Serialize};
use sha2::Sha256;

use crate::keys::KeyStore;

type HmacSha256 = Hmac<Sha256>;

/// The `iss` of every token.
pub const ISSUER: &str = "bourse";
/// An access token's life: 12 hours.
pub const ACCESS_TOKEN_SECONDS: u64 = 12 * 60 * 60;
/// A refresh token's life: 30 days.
pub const REFRESH_TOKEN_SECONDS: u64 = 30 * 24 * 60 * 60;
/// The features every token grants: tqsdk's `futr`, futures exchanges' symbols.
pub const FEATURES: [&str; 1] = ["futr"];
/// Accounts a subject may add to its grants, at most.
pub const ADDED_ACCOUNTS_MAX: usize = 64;
/// Subjects whose added accounts are remembered, at most.
pub const SUBJECTS_MAX: usize = 10_000;
/// A longer text is not a token of this server (they are well under 1 KiB).
const TOKEN_BYTES_MAX: usize = 4_096;
/// The one header this server signs and accepts.
const HEADER: &str = r#"{"alg":"HS256","typ":"JWT"}"#;
/// What the password fingerprint (`pwd`) is computed with, beside the hash.
const PASSWORD_STAMP_CONTEXT: &[u8] = b"password:";

/// A token's kind, its `typ` claim (Keycloak's names).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum TokenType {
    /// An access token: `Authorization: Bearer` on the auth routes.
    #[serde(rename = "Bearer")]
    Access,
    /// A refresh token: exchanged for new tokens (`grant_type=refresh_token`).
    #[serde(rename = "Refresh")]
    Refresh,
}

impl TokenType {
    pub fn name(self) -> &'static str {
        match self {
            TokenType::Access => "Bearer",
            TokenType::Refresh => "Refresh",
        }
    }
}

/// What a token lets its holder do, as tqsdk reads it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Grants {
    pub features: Vec<String>,
    pub accounts: Vec<String>,
}

/// A token's claims.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Claims {
    /// The account that logged in.
    pub sub: String,
    pub iss: String,
    /// Issued at, seconds since the Unix epoch.
    pub iat: u64,
    /// Expires at (refused from then on), seconds since the Unix epoch.
    pub exp: u64,
    pub typ: TokenType,
    pub preferred_username: String,
    pub grants: Grants,
    /// A keyed fingerprint of the password hash the token was issued under.
    pub pwd: String,
}

/// The key tokens are signed with. `Debug` does not show it.
pub struct TokenKey([u8; 32]);

impl TokenKey {
    pub fn new(bytes: [u8; 32]) -> TokenKey {
        TokenKey(bytes)
    }

    fn mac(&self) -> HmacSha256 {
        HmacSha256::new_from_slice(&self.0).expect("HMAC takes a key of any length")
    }
}

impl fmt::Debug for TokenKey {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        formatter.write_str("TokenKey(..)")
    }
}

/// Why a token was refused, or a grant not made.
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
pub enum TokenError {
    #[error("this is not a token of this server")]
    Malformed,
    #[error("the token's signature is not this server's")]
    Signature,
    #[error("the token has expired")]
    Expired,
    #[error("this is a {found} token; a {expected} token is needed")]
    WrongType { expected: &'static str, found: &'static str },
    #[error("the account's password was changed or removed since: log in again")]
    Revoked,
    #[error("unknown account {0:?}")]
    UnknownAccount(String),
    #[error("at most {ADDED_ACCOUNTS_MAX} accounts may be added to one login's grants")]
    TooManyAccounts,
}

/// The signed token of `claims`.
pub fn encode(key: &TokenKey, claims: &Claims) -> String {
    let payload = serde_json::to_vec(claims).expect("claims are plain data");
    let mut token = URL_SAFE_NO_PAD.encode(HEADER);
    token.push('.');
    URL_SAFE_NO_PAD.encode_string(payload, &mut token);
    let mut mac = key.mac();
    mac.update(token.as_bytes());
    let signature = mac.finalize().into_bytes();
    token.push('.');
    URL_SAFE_NO_PAD.encode_string(signature, &mut token);
    token
}

/// The claims of `token` if this key signed it, it is of type `expected`, and it has
/// not expired at `now_s` (seconds since the Unix epoch).
pub fn decode(
    key: &TokenKey,
    token: &str,
    expected: TokenType,
    now_s: u64,
) -> Result<Claims, TokenError> {
    if token.len() > TOKEN_BYTES_MAX {
        return Err(TokenError::Malformed);
    }
    let (signed, signature) = token.rsplit_once('.').ok_or(TokenError::Malformed)?;
    let (header, payload) = signed.split_once('.').ok_or(TokenError::Malformed)?;
    let signature = URL_SAFE_NO_PAD.decode(signature).map_err(|_| TokenError::Malformed)?;
    let mut mac = key.mac();
    mac.update(signed.as_bytes());
    // Constant time: `verify_slice` compares every byte whatever the first difference.
    mac.verify_slice(&signature).map_err(|_| TokenError::Signature)?;
    let header = URL_SAFE_NO_PAD.decode(header).map_err(|_| TokenError::Malformed)?;
    let header: serde_json::Value =
        serde_json::from_slice(&header).map_err(|_| TokenError::Malformed)?;
    if header.get("alg").and_then(|alg| alg.as_str()) != Some("HS256") {
        return Err(TokenError::Malformed);
    }
    let payload = URL_SAFE_NO_PAD.decode(payload).map_err(|_| TokenError::Malformed)?;
    let claims: Claims = serde_json::from_slice(&payload).map_err(|_| TokenError::Malformed)?;
    if claims.iss != ISSUER {
        return Err(TokenError::Malformed);
    }
    if claims.typ != expected {
        return Err(TokenError::WrongType { expected: expected.name(), found: claims.typ.name() });
    }
    if now_s >= claims.exp {
        return Err(TokenError::Expired);
    }
    Ok(claims)
}

/// A login's tokens, as the token endpoint answers them.
#[derive(Clone, Debug)]
pub struct Issued {
    pub access_token: String,
    pub refresh_token: String,
    /// Seconds the access token lives.
    pub expires_in: u64,
    /// Seconds the refresh token lives.
    pub refresh_expires_in: u64,
}

/// Issues and checks tokens, and keeps the accounts added to logins' grants. One per
/// server, in `AppState::tokens`.
pub struct Tokens {
    key: TokenKey,
    keys: Arc<KeyStore>,
    added: Mutex<AddedAccounts>,
}

impl Tokens {
    pub fn new(keys: Arc<KeyStore>) -> Tokens {
        let key = TokenKey::new(keys.token_signing_key());
        Tokens { key, keys, added: Mutex::new(AddedAccounts::new(SUBJECTS_MAX)) }
    }

    /// A new access and refresh token for `account`, whose password the caller has just
    /// checked (`passwords::Passwords::verify`). `Revoked` if it has no password (any
    /// more).
    pub fn issue(&self, account: &str, now_s: u64) -> Result<Issued, TokenError> {
        let pwd = self.password_stamp(account)?;
        let grants = self.grants(account);
        let claims = |typ, lifetime| Claims {
            sub: account.to_string(),
            iss: ISSUER.to_string(),
            iat: now_s,
            exp: now_s.saturating_add(lifetime),
            typ,
            preferred_username: account.to_string(),
            grants: grants.clone(),
            pwd: pwd.clone(),
        };
        Ok(Issued {
            access_token: encode(&self.key, &claims(TokenType::Access, ACCESS_TOKEN_SECONDS)),
            refresh_token: encode(&self.key, &claims(TokenType::Refresh, REFRESH_TOKEN_SECONDS)),
            expires_in: ACCESS_TOKEN_SECONDS,
            refresh_expires_in: REFRESH_TOKEN_SECONDS,
        })
    }

    /// New tokens for the holder of `refresh_token`, with the grants as they are now.
    pub fn refresh(&self, refresh_token: &str, now_s: u64) -> Result<Issued, TokenError> {
        let claims = self.check(refresh_token, TokenType::Refresh, now_s)?;
        self.issue(&claims.sub, now_s)
    }

    /// The claims of a valid access token (`Authorization: Bearer`).
    pub fn check_access(&self, access_token: &str, now_s: u64) -> Result<Claims, TokenError> {
        self.check(access_token, TokenType::Access, now_s)
    }

    /// Adds `account` to the grants of `subject`'s next tokens (a subject's own account
    /// is always there). `UnknownAccount` if there is no such account;
    /// `TooManyAccounts` beyond [`ADDED_ACCOUNTS_MAX`].
    pub fn add_account(&self, subject: &str, account: &str) -> Result<(), TokenError> {
        if self.keys.account(account).is_none() {
            return Err(TokenError::UnknownAccount(account.to_string()));
        }
        if account == subject {
            return Ok(());
        }
        self.added_accounts().add(subject, account)
    }

    /// What `subject`'s tokens grant now.
    pub fn grants(&self, subject: &str) -> Grants {
        let mut accounts = vec![subject.to_string()];
        accounts.extend(self.added_accounts().of(subject));
        Grants { features: FEATURES.iter().map(|feature| feature.to_string()).collect(), accounts }
    }

    fn check(&self, token: &str, expected: TokenType, now_s: u64) -> Result<Claims, TokenError> {
        let claims = decode(&self.key, token, expected, now_s)?;
        if self.password_stamp(&claims.sub)? != claims.pwd {
            return Err(TokenError::Revoked);
        }
        Ok(claims)
    }

    /// The fingerprint of `account`'s current password hash: `Revoked` without one.
    fn password_stamp(&self, account: &str) -> Result<String, TokenError> {
        let hash = self
            .keys
            .account(account)
            .and_then(|record| record.password_hash)
            .ok_or(TokenError::Revoked)?;
        let mut mac = self.key.mac();
        mac.update(PASSWORD_STAMP_CONTEXT);
        mac.update(hash.as_bytes());
        Ok(hex::encode(&mac.finalize().into_bytes()[..16]))
    }

    fn added_accounts(&self) -> std::sync::MutexGuard<'_, AddedAccounts> {
        self.added.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

/// The accounts each subject added to its grants: at most `subjects_max` subjects (the
/// least recently changed forgotten first), [`ADDED_ACCOUNTS_MAX`] accounts each.
struct AddedAccounts {
    subjects_max: usize,
    by_subject: HashMap<String, Added>,
    /// Counts changes: `Added::changed` orders the subjects.
    changes: u64,
}

struct Added {
    accounts: BTreeSet<String>,
    changed: u64,
}

impl AddedAccounts {
    fn new(subjects_max: usize) -> AddedAccounts {
        AddedAccounts { subjects_max: subjects_max.max(1), by_subject: HashMap::new(), changes: 0 }
    }

    fn add(&mut self, subject: &str, account: &str) -> Result<(), TokenError> {
        self.changes += 1;
        let changed = self.changes;
        if let Some(added) = self.by_subject.get_mut(subject) {
            if !added.accounts.contains(account) && added.accounts.len() >= ADDED_ACCOUNTS_MAX {
                return Err(TokenError::TooManyAccounts);
            }
            added.accounts.insert(account.to_string());
            added.changed = changed;
            return Ok(());
        }
        if self.by_subject.len() >= self.subjects_max {
            let oldest = self
                .by_subject
                .iter()
                .min_by_key(|(_, added)| added.changed)
                .map(|(subject, _)| subject.clone());
            if let Some(oldest) = oldest {
                self.by_subject.remove(&oldest);
            }
        }
        let accounts = BTreeSet::from([account.to_string()]);
        self.by_subject.insert(subject.to_string(), Added { accounts, changed });
        Ok(())
    }

    fn of(&self, subject: &str) -> Vec<String> {
        self.by_subject
            .get(subject)
            .map(|added| added.accounts.iter().cloned().collect())
            .unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const NOW: u64 = 1_700_000_000;

    fn claims(typ: TokenType) -> Claims {
        Claims {
            sub: "alice".to_string(),
            iss: ISSUER.to_string(),
            iat: NOW,
            exp: NOW + 60,
            typ,
            preferred_username: "alice".to_string(),
            grants: Grants { features: vec!["futr".to_string()], accounts: vec!["alice".into()] },
            pwd: "00".repeat(16),
        }
    }

    fn key() -> TokenKey {
        TokenKey::new([7; 32])
    }

    fn part(token: &str, index: usize) -> Vec<u8> {
        URL_SAFE_NO_PAD.decode(token.split('.').nth(index).unwrap()).unwrap()
    }

    #[test]
    fn a_token_decodes_to_its_claims_and_is_a_standard_hs256_jwt() {
        let token = encode(&key(), &claims(TokenType::Access));
        assert_eq!(decode(&key(), &token, TokenType::Access, NOW), Ok(claims(TokenType::Access)));
        assert_eq!(part(&token, 0), HEADER.as_bytes());
        let payload: serde_json::Value = serde_json::from_slice(&part(&token, 1)).unwrap();
        assert_eq!(payload["typ"], "Bearer");
        assert_eq!(payload["grants"]["features"], serde_json::json!(["futr"]));
        // The signature is HMAC-SHA256 over the first two parts, as any JWT library
        // computes it.
        let (signed, _) = token.rsplit_once('.').unwrap();
        let mut mac = HmacSha256::new_from_slice(&[7; 32]).unwrap();
        mac.update(signed.as_bytes());
        assert_eq!(part(&token, 2), mac.finalize().into_bytes().to_vec());
    }

    #[test]
    fn a_changed_payload_or_signature_is_refused() {
        let token = encode(&key(), &claims(TokenType::Access));
        let parts: Vec<&str> = token.split('.').collect();
        let mut richer = claims(TokenType::Access);
        richer.grants.accounts.push("bob".to_string());
        richer.exp += 1_000_000;
        let forged_payload = URL_SAFE_NO_PAD.encode(serde_json::to_vec(&richer).unwrap());
        let forged = format!("{}.{}.{}", parts[0], forged_payload, parts[2]);
        assert_eq!(decode(&key(), &forged, TokenType::Access, NOW), Err(TokenError::Signature));
        let mut signature = part(&token, 2);
        signature[31] ^= 1;
        let flipped = format!("{}.{}.{}", parts[0], parts[1], URL_SAFE_NO_PAD.encode(signature));
        assert_eq!(decode(&key(), &flipped, TokenType::Access, NOW), Err(TokenError::Signature));
        let other_key = TokenKey::new([8; 32]);
        assert_eq!(decode(&other_key, &token, TokenType::Access, NOW), Err(TokenError::Signature));
        // "alg":"none" with no signature is not a token either.
        let none =
            format!("{}.{}.", URL_SAFE_NO_PAD.encode(r#"{"alg":"none","typ":"JWT"}"#), parts[1]);
        assert!(decode(&key(), &none, TokenType::Access, NOW).is_err());
    }

    #[test]
    fn an_expired_token_is_refused_from_its_exp_on() {
        let token = encode(&key(), &claims(TokenType::Access));
        assert!(decode(&key(), &token, TokenType::Access, NOW + 59).is_ok());
        assert_eq!(decode(&key(), &token, TokenType::Access, NOW + 60), Err(TokenError::Expired));
    }

    #[test]
    fn a_token_of_the_other_type_is_refused() {
        let refresh = encode(&key(), &claims(TokenType::Refresh));
        assert_eq!(
            decode(&key(), &refresh, TokenType::Access, NOW),
            Err(TokenError::WrongType { expected: "Bearer", found: "Refresh" })
        );
        let access = encode(&key(), &claims(TokenType::Access));
        assert!(matches!(
            decode(&key(), &access, TokenType::Refresh, NOW),
            Err(TokenError::WrongType { .. })
        ));
    }

    #[test]
    fn garbage_is_malformed_and_never_panics() {
        let long = "a.".repeat(3_000);
        for text in ["", ".", "..", "a.b.c", "a.b", "ä.ö.ü", "x.y.z.w", long.as_str()] {
            assert!(decode(&key(), text, TokenType::Access, NOW).is_err(), "{text:?}");
        }
        // Signed by us, but not our claims: refused too.
        let signed = |payload: &str| {
            let mut token = URL_SAFE_NO_PAD.encode(HEADER);
            token.push('.');
            token.push_str(&URL_SAFE_NO_PAD.encode(payload));
            let mut mac = key().mac();
            mac.update(token.as_bytes());
            format!("{token}.{}", URL_SAFE_NO_PAD.encode(mac.finalize().into_bytes()))
        };
        assert_eq!(
            decode(&key(), &signed("{}"), TokenType::Access, NOW),
            Err(TokenError::Malformed)
        );
        let mut foreign = claims(TokenType::Access);
        foreign.iss = "someone-else".to_string();
        let foreign = signed(&serde_json::to_string(&foreign).unwrap());
        assert_eq!(decode(&key(), &foreign, TokenType::Access, NOW), Err(TokenError::Malformed));
    }

    #[test]
    fn the_key_is_hidden_in_debug_output() {
        assert_eq!(format!("{:?}", key()), "TokenKey(..)");
    }

    fn service() -> (tempfile::TempDir, Arc<KeyStore>, Tokens) {
        let directory = tempfile::tempdir().unwrap();
        let (store, _) = KeyStore::open(directory.path(), 1).unwrap();
        for account in ["alice", "bob", "carol"] {
            store.create_account(account, 1).unwrap();
        }
        store.set_password_hash("alice", Some("$argon2id$stand-in-1".to_string())).unwrap();
        let store = Arc::new(store);
        let tokens = Tokens::new(Arc::clone(&store));
        (directory, store, tokens)
    }

    #[test]
    fn issued_tokens_hold_the_account_and_its_added_accounts() {
        let (_directory, _store, tokens) = service();
        let issued = tokens.issue("alice", NOW).unwrap();
        assert_eq!((issued.expires_in, issued.refresh_expires_in), (43_200, 2_592_000));
        let access = tokens.check_access(&issued.access_token, NOW).unwrap();
        assert_eq!((access.sub.as_str(), access.exp), ("alice", NOW + ACCESS_TOKEN_SECONDS));
        assert_eq!(access.grants.accounts, ["alice"]);
        assert_eq!(access.grants.features, ["futr"]);
        assert!(tokens.check_access(&issued.refresh_token, NOW).is_err(), "not an access token");
        tokens.add_account("alice", "bob").unwrap();
        tokens.add_account("alice", "alice").unwrap();
        assert_eq!(
            tokens.add_account("alice", "dave"),
            Err(TokenError::UnknownAccount("dave".to_string()))
        );
        let refreshed = tokens.refresh(&issued.refresh_token, NOW + 10).unwrap();
        let access = tokens.check_access(&refreshed.access_token, NOW + 10).unwrap();
        assert_eq!(access.grants.accounts, ["alice", "bob"]);
        assert_eq!(access.iat, NOW + 10);
        assert_eq!(
            tokens.refresh(&issued.refresh_token, NOW + REFRESH_TOKEN_SECONDS).err(),
            Some(TokenError::Expired)
        );
    }

    #[test]
    fn a_changed_or_removed_password_ends_the_tokens_issued_under_it() {
        let (_directory, store, tokens) = service();
        assert_eq!(tokens.issue("bob", NOW).err(), Some(TokenError::Revoked), "no password");
        let issued = tokens.issue("alice", NOW).unwrap();
        store.set_password_hash("alice", Some("$argon2id$stand-in-2".to_string())).unwrap();
        assert_eq!(tokens.check_access(&issued.access_token, NOW).err(), Some(TokenError::Revoked));
        assert_eq!(tokens.refresh(&issued.refresh_token, NOW).err(), Some(TokenError::Revoked));
        let again = tokens.issue("alice", NOW).unwrap();
        assert!(tokens.check_access(&again.access_token, NOW).is_ok());
        store.set_password_hash("alice", None).unwrap();
        assert_eq!(tokens.check_access(&again.access_token, NOW).err(), Some(TokenError::Revoked));
    }

    #[test]
    fn tokens_are_signed_with_the_derived_key_not_the_master_key() {
        let (directory, store, tokens) = service();
        let issued = tokens.issue("alice", NOW).unwrap();
        let master_text = std::fs::read_to_string(directory.path().join("master.key")).unwrap();
        let master: [u8; 32] = hex::decode(master_text.trim()).unwrap().try_into().unwrap();
        let derived = store.token_signing_key();
        assert_ne!(derived, master);
        assert!(
            decode(&TokenKey::new(derived), &issued.access_token, TokenType::Access, NOW).is_ok()
        );
        assert_eq!(
            decode(&TokenKey::new(master), &issued.access_token, TokenType::Access, NOW),
            Err(TokenError::Signature)
        );
    }

    #[test]
    fn added_accounts_are_bounded_per_subject_and_in_subjects() {
        let mut added = AddedAccounts::new(2);
        for index in 0..ADDED_ACCOUNTS_MAX {
            added.add("alice", &format!("account-{index}")).unwrap();
        }
        assert_eq!(added.add("alice", "one-too-many"), Err(TokenError::TooManyAccounts));
        assert_eq!(added.add("alice", "account-0"), Ok(()), "one it has is no new one");
        added.add("bob", "x").unwrap();
        added.add("alice", "account-1").unwrap();
        // A third subject: bob changed least recently, so bob is forgotten.
        added.add("carol", "y").unwrap();
        assert_eq!(added.by_subject.len(), 2);
        assert!(added.of("bob").is_empty());
        assert_eq!(added.of("alice").len(), ADDED_ACCOUNTS_MAX);
        assert_eq!(added.of("carol"), ["y"]);
    }
}
