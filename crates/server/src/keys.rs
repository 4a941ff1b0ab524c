//! API keys and the accounts they act for: who may sign requests, as whom.
//!
//! A key is a public id (`bk_` and 24 hex digits) and a secret. The secret is never
//! stored: it is `HMAC-SHA256(master key, "bourse-api-secret:" + id)`, derived again when
//! a request is checked, so the store on disk (`keys.json`) holds ids, owners and
//! revocations only, and a copy of it gives nobody a secret. The master key is 32
//! random bytes in `master.key` (mode 0600), made on first start. The admin key is made
//! on first start too and written, secret included, to `admin.key` (mode 0600): the one
//! place a secret is on disk, so the operator can read it once and move it. Secrets
//! and the master key never appear in logs or `Debug` output.
//!
//! The account registry lives here too: an account is a name that keys can act for,
//! and that may have a password (for clients that log in with a name and a password,
//! such as tqsdk: `passwords`, `tokens`). This module stores the password's Argon2id
//! PHC string beside the account and never sees a password itself; it hands out keys
//! derived from the master key for other purposes (`token_signing_key`), never the
//! master key. Balances and orders are the engine's; this module never holds business
//! state.

use std::collections::BTreeMap;
use std::fmt;
use std::fs::{self, OpenOptions};
use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::sync::RwLock;

use hmac::{Hmac, KeyInit, Mac};
use serde::{Deserialize, Serialize};
use sha2::Sha256;

type HmacSha256 = Hmac<Sha256>;

const MASTER_FILE: &str = "master.key";
const KEYS_FILE: &str = "keys.json";
/// Where the admin key is written on first start (in the server's directory).
pub const ADMIN_KEY_FILE: &str = "admin.key";
const SECRET_CONTEXT: &[u8] = b"bourse-api-secret:";
/// What the signing key of login tokens is derived with (`token_signing_key`).
const TOKEN_KEY_CONTEXT: &[u8] = b"bourse-token-key";
/// What a cluster's admin key id is derived with (`open_for_cluster`).
const CLUSTER_ADMIN_CONTEXT: &[u8] = b"bourse-cluster-admin-key";
/// Account names: 1 to 64 of `A-Z a-z 0-9 _ - .`.
pub const ACCOUNT_NAME_BYTES_MAX: usize = 64;

/// What a key may do.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    /// Trades and reads for its one account.
    Trader,
    /// Manages assets, instruments, accounts, keys and money; trades for nobody.
    Admin,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct KeyRecord {
    pub id: String,
    pub role: Role,
    /// The account a trader key acts for; `None` for admin keys.
    pub account: Option<String>,
    pub label: String,
    pub created_ms: u64,
    pub revoked: bool,
    /// The key's own request rate (REST, TCP and WebSocket together), instead of the
    /// server's `[limits] requests_per_second`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub requests_per_second: Option<u32>,
}

/// A key's secret: shown once, when the key is made.
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(String);

impl Secret {
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        formatter.write_str("Secret(..)")
    }
}

#[derive(Debug, thiserror::Error)]
pub enum KeyError {
    #[error("{path}: {source}")]
    Io { path: PathBuf, source: std::io::Error },
    #[error("{path} is damaged: {reason}")]
    Damaged { path: PathBuf, reason: String },
    #[error("unknown account {0:?}")]
    UnknownAccount(String),
    #[error("account {0:?} exists already")]
    DuplicateAccount(String),
    #[error("account names are 1 to 64 of A-Z a-z 0-9 _ - .; {0:?} is not one")]
    InvalidAccountName(String),
    #[error("unknown key {0:?}")]
    UnknownKey(String),
    #[error("key {0:?} exists already")]
    DuplicateKey(String),
    #[error("a key store change gave another kind of record than it makes (a bug)")]
    WrongRecord,
    #[error("a node of a cluster needs the cluster's master key: set auth.master_key_file (the same file on every node)")]
    NoClusterMaster,
}

impl KeyError {
    pub fn code(&self) -> &'static str {
        match self {
            KeyError::Io { .. }
            | KeyError::Damaged { .. }
            | KeyError::DuplicateKey(_)
            | KeyError::WrongRecord
            | KeyError::NoClusterMaster => "key_store_failed",
            KeyError::UnknownAccount(_) => "unknown_account",
            KeyError::DuplicateAccount(_) => "duplicate_account",
            KeyError::InvalidAccountName(_) => "invalid_account",
            KeyError::UnknownKey(_) => "unknown_key",
        }
    }
}

#[derive(Clone, Debug, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct StoredKeys {
    accounts: BTreeMap<String, AccountRecord>,
    keys: BTreeMap<String, KeyRecord>,
    /// In a cluster: the log index of the last change applied (`apply_replicated`).
    #[serde(default, skip_serializing_if = "is_zero")]
    applied_index: u64,
}

fn is_zero(value: &u64) -> bool {
    *value == 0
}

/// One change to the store, whole: everything it needs is in it (a new key's id and
/// time, a password's hash), so that every node of a cluster that applies it, in the
/// order of the cluster's log, makes the same change. Every change to the store is one
/// of these, applied in one place (`KeyStore::apply_local`, `apply_replicated`).
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "change", rename_all = "snake_case", deny_unknown_fields)]
pub enum KeyChange {
    CreateAccount {
        name: String,
        created_ms: u64,
    },
    /// Sets (`Some`: an Argon2id PHC string) or removes an account's password hash.
    SetPasswordHash {
        account: String,
        password_hash: Option<String>,
    },
    CreateKey {
        key: KeyRecord,
    },
    Revoke {
        id: String,
    },
}

/// Without a password's hash.
impl fmt::Debug for KeyChange {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            KeyChange::CreateAccount { name, .. } => write!(formatter, "CreateAccount({name})"),
            KeyChange::SetPasswordHash { account, password_hash } => {
                write!(formatter, "SetPasswordHash({account}, set: {})", password_hash.is_some())
            }
            KeyChange::CreateKey { key } => write!(formatter, "CreateKey({})", key.id),
            KeyChange::Revoke { id } => write!(formatter, "Revoke({id})"),
        }
    }
}

/// What a change did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum KeyChanged {
    /// A new account; or, for a password change, the account as it was before.
    Account(AccountRecord),
    /// A new key, or the revoked one.
    Key(KeyRecord),
}

impl KeyChanged {
    /// The account an account's change gives.
    pub fn account(self) -> Result<AccountRecord, KeyError> {
        match self {
            KeyChanged::Account(record) => Ok(record),
            KeyChanged::Key(_) => Err(KeyError::WrongRecord),
        }
    }

    /// The key a key's change gives.
    pub fn key(self) -> Result<KeyRecord, KeyError> {
        match self {
            KeyChanged::Key(record) => Ok(record),
            KeyChanged::Account(_) => Err(KeyError::WrongRecord),
        }
    }
}

/// The change to `stored` (on failure, `stored` may be half changed: apply it to a copy).
fn change(stored: &mut StoredKeys, change: &KeyChange) -> Result<KeyChanged, KeyError> {
    match change {
        KeyChange::CreateAccount { name, created_ms } => {
            if !valid_account_name(name) {
                return Err(KeyError::InvalidAccountName(name.clone()));
            }
            if stored.accounts.contains_key(name) {
                return Err(KeyError::DuplicateAccount(name.clone()));
            }
            let record =
                AccountRecord { name: name.clone(), created_ms: *created_ms, password_hash: None };
            stored.accounts.insert(name.clone(), record.clone());
            Ok(KeyChanged::Account(record))
        }
        KeyChange::SetPasswordHash { account, password_hash } => {
            let record = stored
                .accounts
                .get_mut(account)
                .ok_or_else(|| KeyError::UnknownAccount(account.clone()))?;
            let before = record.clone();
            record.password_hash = password_hash.clone();
            Ok(KeyChanged::Account(before))
        }
        KeyChange::CreateKey { key } => {
            if let Some(account) = &key.account {
                if !stored.accounts.contains_key(account) {
                    return Err(KeyError::UnknownAccount(account.clone()));
                }
            }
            if stored.keys.contains_key(&key.id) {
                return Err(KeyError::DuplicateKey(key.id.clone()));
            }
            stored.keys.insert(key.id.clone(), key.clone());
            Ok(KeyChanged::Key(key.clone()))
        }
        KeyChange::Revoke { id } => {
            let record = stored.keys.get_mut(id).ok_or_else(|| KeyError::UnknownKey(id.clone()))?;
            record.revoked = true;
            Ok(KeyChanged::Key(record.clone()))
        }
    }
}

#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AccountRecord {
    pub name: String,
    pub created_ms: u64,
    /// The account's password as an Argon2id PHC string (`passwords` makes and checks
    /// it); `None`: the account cannot log in with a password. Absent from stores
    /// written before passwords existed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub password_hash: Option<String>,
}

impl AccountRecord {
    pub fn has_password(&self) -> bool {
        self.password_hash.is_some()
    }
}

/// Without the password's hash: it is nobody's business in a log.
impl fmt::Debug for AccountRecord {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        formatter
            .debug_struct("AccountRecord")
            .field("name", &self.name)
            .field("created_ms", &self.created_ms)
            .field("has_password", &self.has_password())
            .finish()
    }
}

/// A key made on first start: the admin key, with its secret (which `Debug` hides).
#[derive(Debug)]
pub struct FirstStart {
    pub admin_key: KeyRecord,
    pub admin_secret: Secret,
    pub admin_key_file: PathBuf,
}

pub struct KeyStore {
    directory: PathBuf,
    master: [u8; 32],
    stored: RwLock<StoredKeys>,
}

impl fmt::Debug for KeyStore {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        formatter.debug_struct("KeyStore").field("directory", &self.directory).finish()
    }
}

impl KeyStore {
    /// Opens the store in `directory`, making the master key and the admin key on
    /// first start (then `FirstStart` says where the admin key went).
    pub fn open(directory: &Path, now_ms: u64) -> Result<(KeyStore, Option<FirstStart>), KeyError> {
        KeyStore::open_with_master(directory, None, now_ms)
    }

    /// `open`, with the master key read from `master_file` when given (kept off the
    /// data directory: on another volume, a secrets mount); it must exist then.
    /// Without it the master key is `directory/master.key`, made on first start.
    pub fn open_with_master(
        directory: &Path,
        master_file: Option<&Path>,
        now_ms: u64,
    ) -> Result<(KeyStore, Option<FirstStart>), KeyError> {
        KeyStore::open_as(directory, master_file, now_ms, false)
    }

    /// `open_with_master` for a node of a cluster: the master key is the cluster's
    /// (`master_file`, the same on every node), and the admin key is derived from it, so
    /// that every node has the same admin key without any change replicated. Later
    /// changes are replicated (`apply_replicated`).
    pub fn open_for_cluster(
        directory: &Path,
        master_file: Option<&Path>,
    ) -> Result<(KeyStore, Option<FirstStart>), KeyError> {
        let master_file = master_file.ok_or(KeyError::NoClusterMaster)?;
        KeyStore::open_as(directory, Some(master_file), 0, true)
    }

    fn open_as(
        directory: &Path,
        master_file: Option<&Path>,
        now_ms: u64,
        cluster: bool,
    ) -> Result<(KeyStore, Option<FirstStart>), KeyError> {
        fs::create_dir_all(directory).map_err(|source| io(directory, source))?;
        let master = match master_file {
            Some(path) => read_master(path)?,
            None => load_or_make_master(&directory.join(MASTER_FILE))?,
        };
        let keys_path = directory.join(KEYS_FILE);
        let stored = match fs::read(&keys_path) {
            Ok(bytes) => serde_json::from_slice(&bytes).map_err(|error| KeyError::Damaged {
                path: keys_path.clone(),
                reason: error.to_string(),
            })?,
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => StoredKeys::default(),
            Err(source) => return Err(io(&keys_path, source)),
        };
        let store =
            KeyStore { directory: directory.to_path_buf(), master, stored: RwLock::new(stored) };
        let has_admin = store.read().keys.values().any(|key| key.role == Role::Admin);
        if has_admin {
            return Ok((store, None));
        }
        let (admin_key, admin_secret) = if cluster {
            let id = cluster_admin_id(&store.master);
            let key = KeyRecord {
                id: id.clone(),
                role: Role::Admin,
                account: None,
                label: "admin".to_string(),
                created_ms: now_ms,
                revoked: false,
                requests_per_second: None,
            };
            // Every node makes it alike; it is not a replicated change (the log's
            // changes may revoke it like any key).
            let mut next = store.read().clone();
            next.keys.insert(id.clone(), key.clone());
            store.save(&next)?;
            *store.write() = next;
            (key, store.secret_of(&id))
        } else {
            store.create_key(Role::Admin, None, "admin", now_ms)?
        };
        let admin_key_file = directory.join(ADMIN_KEY_FILE);
        let text = format!(
            "# Bourse admin API key, made on first start. Keep it secret; move it off this machine.\n\
             key = \"{}\"\nsecret = \"{}\"\n",
            admin_key.id,
            admin_secret.expose()
        );
        write_private(&admin_key_file, text.as_bytes())?;
        Ok((store, Some(FirstStart { admin_key, admin_secret, admin_key_file })))
    }

    pub fn create_account(&self, name: &str, now_ms: u64) -> Result<AccountRecord, KeyError> {
        let created = KeyChange::CreateAccount { name: name.to_string(), created_ms: now_ms };
        self.apply_local(&created)?.account()
    }

    pub fn account(&self, name: &str) -> Option<AccountRecord> {
        self.read().accounts.get(name).cloned()
    }

    pub fn accounts(&self) -> Vec<AccountRecord> {
        self.read().accounts.values().cloned().collect()
    }

    /// Sets (`Some`: an Argon2id PHC string, made by `passwords`) or removes (`None`)
    /// `account`'s password hash, durably. The account as it was before.
    pub fn set_password_hash(
        &self,
        account: &str,
        password_hash: Option<String>,
    ) -> Result<AccountRecord, KeyError> {
        let set = KeyChange::SetPasswordHash { account: account.to_string(), password_hash };
        self.apply_local(&set)?.account()
    }

    /// Makes a key for `account` (a trader key) or an admin key (`account` `None`).
    pub fn create_key(
        &self,
        role: Role,
        account: Option<&str>,
        label: &str,
        now_ms: u64,
    ) -> Result<(KeyRecord, Secret), KeyError> {
        let created = self.new_key(role, account, label, None, now_ms)?;
        let record = self.apply_local(&created)?.key()?;
        let secret = self.secret_of(&record.id);
        Ok((record, secret))
    }

    /// The change that makes a new key (a fresh random id), to apply.
    pub fn new_key(
        &self,
        role: Role,
        account: Option<&str>,
        label: &str,
        requests_per_second: Option<u32>,
        now_ms: u64,
    ) -> Result<KeyChange, KeyError> {
        let id = loop {
            let candidate = format!("bk_{}", hex::encode(random_bytes::<12>()?));
            if !self.read().keys.contains_key(&candidate) {
                break candidate;
            }
        };
        let key = KeyRecord {
            id,
            role,
            account: account.map(str::to_string),
            label: label.chars().take(128).collect(),
            created_ms: now_ms,
            revoked: false,
            requests_per_second,
        };
        Ok(KeyChange::CreateKey { key })
    }

    pub fn revoke(&self, id: &str) -> Result<KeyRecord, KeyError> {
        self.apply_local(&KeyChange::Revoke { id: id.to_string() })?.key()
    }

    /// Applies `change` and stores the result durably (one node).
    pub fn apply_local(&self, change: &KeyChange) -> Result<KeyChanged, KeyError> {
        let mut stored = self.write();
        let mut next = stored.clone();
        let changed = self::change(&mut next, change)?;
        self.save(&next)?;
        *stored = next;
        Ok(changed)
    }

    /// Applies `change`, committed at log `index` of the cluster's log, and stores the
    /// result with the index durably. `None`: the store holds that index already (the
    /// log is handed over again after a restart). A change refused here is refused on
    /// every node alike, and stores nothing.
    pub fn apply_replicated(
        &self,
        index: u64,
        change: &KeyChange,
    ) -> Option<Result<KeyChanged, KeyError>> {
        let mut stored = self.write();
        if index <= stored.applied_index {
            return None;
        }
        let mut next = stored.clone();
        let changed = match self::change(&mut next, change) {
            Ok(changed) => changed,
            Err(error) => {
                stored.applied_index = index;
                return Some(Err(error));
            }
        };
        next.applied_index = index;
        if let Err(error) = self.save(&next) {
            return Some(Err(error));
        }
        *stored = next;
        Some(Ok(changed))
    }

    /// The last log index of the cluster's log the store is known to hold.
    pub fn applied_index(&self) -> u64 {
        self.read().applied_index
    }

    /// Stores `index` as the log index the store holds: every record up to it is
    /// applied (`port::records` decides when; an older index is ignored).
    pub fn store_applied_index(&self, index: u64) -> Result<(), KeyError> {
        let mut stored = self.write();
        if index <= stored.applied_index {
            return Ok(());
        }
        let mut next = stored.clone();
        next.applied_index = index;
        self.save(&next)?;
        *stored = next;
        Ok(())
    }

    /// The key `id` if it exists and is not revoked.
    pub fn active_key(&self, id: &str) -> Option<KeyRecord> {
        self.read().keys.get(id).filter(|key| !key.revoked).cloned()
    }

    pub fn keys(&self) -> Vec<KeyRecord> {
        self.read().keys.values().cloned().collect()
    }

    /// Checks `signature` of `message` under key `id`'s secret, in constant time.
    pub fn verify(&self, id: &str, message: &[u8], signature: &[u8; 32]) -> bool {
        bourse_protocol::signing::verify(self.secret_of(id).expose(), message, signature)
    }

    /// The secret of key `id` (derived, never stored): for showing a demo's keys again.
    pub(crate) fn secret_of(&self, id: &str) -> Secret {
        secret_of(&self.master, id)
    }

    /// The key login tokens are signed with (`tokens`): `HMAC-SHA256(master key,
    /// "bourse-token-key")`. Another master key, another token key: every token signed
    /// before is then refused.
    pub fn token_signing_key(&self) -> [u8; 32] {
        self.derive(&[TOKEN_KEY_CONTEXT])
    }

    fn derive(&self, parts: &[&[u8]]) -> [u8; 32] {
        derive(&self.master, parts)
    }

    fn save(&self, stored: &StoredKeys) -> Result<(), KeyError> {
        let path = self.directory.join(KEYS_FILE);
        let bytes = serde_json::to_vec_pretty(stored)
            .map_err(|error| KeyError::Damaged { path: path.clone(), reason: error.to_string() })?;
        write_atomically(&path, &bytes)
    }

    fn read(&self) -> std::sync::RwLockReadGuard<'_, StoredKeys> {
        self.stored.read().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    fn write(&self) -> std::sync::RwLockWriteGuard<'_, StoredKeys> {
        self.stored.write().unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

/// Makes a master key file at `path` (mode 0600) unless one is there: for a cluster's
/// nodes, which share one (`auth.master_key_file`). Whether it made one.
pub fn ensure_master_key_file(path: &Path) -> Result<bool, KeyError> {
    let existed = path.exists();
    load_or_make_master(path)?;
    Ok(!existed)
}

pub fn valid_account_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= ACCOUNT_NAME_BYTES_MAX
        && name.bytes().all(|byte| byte.is_ascii_alphanumeric() || b"_-.".contains(&byte))
}

/// A master key file: 64 hex digits (32 bytes).
/// `HMAC-SHA256(master key, parts concatenated)`: every key made from the master.
fn derive(master: &[u8; 32], parts: &[&[u8]]) -> [u8; 32] {
    let mut mac = HmacSha256::new_from_slice(master).expect("HMAC takes a key of any length");
    for part in parts {
        mac.update(part);
    }
    mac.finalize().into_bytes().into()
}

/// A key's secret: derived from the master key and the key's id, never stored.
fn secret_of(master: &[u8; 32], id: &str) -> Secret {
    Secret(hex::encode(derive(master, &[SECRET_CONTEXT, id.as_bytes()])))
}

/// The id of a cluster's admin key: `bk_` and the first 12 bytes of
/// `HMAC(master, "bourse-cluster-admin-key")`, the same on every node.
fn cluster_admin_id(master: &[u8; 32]) -> String {
    format!("bk_{}", hex::encode(&derive(master, &[CLUSTER_ADMIN_CONTEXT])[..12]))
}

/// A cluster's admin key (its id and secret), from the cluster's master key file: what
/// tools such as `bourse cluster add` sign with.
pub fn cluster_admin_key(master_key_file: &Path) -> Result<(String, Secret), KeyError> {
    let master = read_master(master_key_file)?;
    let id = cluster_admin_id(&master);
    let secret = secret_of(&master, &id);
    Ok((id, secret))
}

fn read_master(path: &Path) -> Result<[u8; 32], KeyError> {
    let text = fs::read_to_string(path).map_err(|source| io(path, source))?;
    parse_master(path, &text)
}

fn parse_master(path: &Path, text: &str) -> Result<[u8; 32], KeyError> {
    let damaged = |reason: String| KeyError::Damaged { path: path.to_path_buf(), reason };
    let bytes = hex::decode(text.trim()).map_err(|error| damaged(error.to_string()))?;
    bytes
        .try_into()
        .map_err(|_| damaged("the master key is not 32 bytes (64 hex digits)".to_string()))
}

fn load_or_make_master(path: &Path) -> Result<[u8; 32], KeyError> {
    match fs::read_to_string(path) {
        Ok(text) => parse_master(path, &text),
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => {
            let master = random_bytes::<32>()?;
            write_private(path, hex::encode(master).as_bytes())?;
            Ok(master)
        }
        Err(source) => Err(io(path, source)),
    }
}

fn random_bytes<const N: usize>() -> Result<[u8; N], KeyError> {
    let mut bytes = [0u8; N];
    getrandom::fill(&mut bytes).map_err(|error| {
        io(Path::new("the system's random source"), std::io::Error::other(error.to_string()))
    })?;
    Ok(bytes)
}

/// Writes a new file readable by its owner only; an existing one is an error (so a
/// secret is never overwritten).
fn write_private(path: &Path, bytes: &[u8]) -> Result<(), KeyError> {
    let mut file = OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)
        .map_err(|source| io(path, source))?;
    file.write_all(bytes).and_then(|()| file.sync_all()).map_err(|source| io(path, source))?;
    sync_parent(path)
}

/// Replaces `path` with `bytes` so that a crash leaves the old or the new file, whole.
fn write_atomically(path: &Path, bytes: &[u8]) -> Result<(), KeyError> {
    crate::files::write_atomically(path, bytes).map_err(|(path, source)| io(&path, source))
}

fn sync_parent(path: &Path) -> Result<(), KeyError> {
    crate::files::sync_parent(path).map_err(|(path, source)| io(&path, source))
}

fn io(path: &Path, source: std::io::Error) -> KeyError {
    KeyError::Io { path: path.to_path_buf(), source }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bourse_protocol::signing::sign;
    use std::os::unix::fs::PermissionsExt;

    fn signature(hex_text: &str) -> [u8; 32] {
        hex::decode(hex_text).unwrap().try_into().unwrap()
    }

    #[test]
    fn a_clusters_nodes_derive_one_admin_key_and_apply_each_change_of_the_log_once() {
        let (one, two) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
        let master = one.path().join("cluster-master.key");
        assert!(ensure_master_key_file(&master).unwrap());
        assert!(!ensure_master_key_file(&master).unwrap(), "an existing master key is kept");
        let (first, made) = KeyStore::open_for_cluster(one.path(), Some(&master)).unwrap();
        let (second, _) = KeyStore::open_for_cluster(two.path(), Some(&master)).unwrap();
        let made = made.expect("the first start writes admin.key");
        assert_eq!(first.keys(), second.keys(), "every node has the same admin key");
        assert_eq!(second.secret_of(&made.admin_key.id), made.admin_secret);
        // Tools derive the same key from the master key file alone.
        let (id, secret) = cluster_admin_key(&master).unwrap();
        assert_eq!((id, secret), (made.admin_key.id.clone(), made.admin_secret.clone()));
        assert!(matches!(
            KeyStore::open_for_cluster(tempfile::tempdir().unwrap().path(), None),
            Err(KeyError::NoClusterMaster)
        ));
        let account = KeyChange::CreateAccount { name: "alice".to_string(), created_ms: 5 };
        let key = first.new_key(Role::Trader, Some("alice"), "bot", None, 6).unwrap();
        for store in [&first, &second] {
            assert!(matches!(store.apply_replicated(3, &account), Some(Ok(_))));
            assert!(matches!(store.apply_replicated(4, &key), Some(Ok(KeyChanged::Key(_)))));
            // Handed over again after a restart: not applied twice.
            assert!(store.apply_replicated(3, &account).is_none());
            assert!(store.apply_replicated(4, &key).is_none());
            // Refused alike on every node, and the index still moves on.
            assert!(matches!(
                store.apply_replicated(5, &account),
                Some(Err(KeyError::DuplicateAccount(_)))
            ));
            assert_eq!(store.applied_index(), 5);
        }
        assert_eq!(first.keys(), second.keys());
        drop(first);
        let (reopened, _) = KeyStore::open_for_cluster(one.path(), Some(&master)).unwrap();
        assert_eq!(reopened.applied_index(), 4, "the last change stored durably");
        assert_eq!(reopened.keys(), second.keys());
    }

    #[test]
    fn first_start_makes_an_admin_key_written_owner_only_and_later_starts_keep_it() {
        let directory = tempfile::tempdir().unwrap();
        let (store, first) = KeyStore::open(directory.path(), 1).unwrap();
        let first = first.expect("first start makes the admin key");
        let mode = fs::metadata(&first.admin_key_file).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
        let text = fs::read_to_string(&first.admin_key_file).unwrap();
        assert!(text.contains(&first.admin_key.id) && text.contains(first.admin_secret.expose()));
        let message = b"1700000000000GET/v1/accounts";
        let good = signature(&sign(first.admin_secret.expose(), message));
        assert!(store.verify(&first.admin_key.id, message, &good));
        drop(store);
        let (again, first_again) = KeyStore::open(directory.path(), 2).unwrap();
        assert!(first_again.is_none());
        assert!(again.verify(&first.admin_key.id, message, &good), "same master, same secret");
    }

    #[test]
    fn secrets_are_not_stored_and_never_printed() {
        let directory = tempfile::tempdir().unwrap();
        let (store, _) = KeyStore::open(directory.path(), 1).unwrap();
        store.create_account("alice", 1).unwrap();
        let (key, secret) = store.create_key(Role::Trader, Some("alice"), "bot", 1).unwrap();
        let on_disk = fs::read_to_string(directory.path().join(KEYS_FILE)).unwrap();
        assert!(on_disk.contains(&key.id));
        assert!(!on_disk.contains(secret.expose()));
        assert_eq!(format!("{secret:?}"), "Secret(..)");
        assert!(!format!("{store:?}").contains(secret.expose()));
    }

    #[test]
    fn wrong_signature_other_key_and_revoked_key_do_not_verify() {
        let directory = tempfile::tempdir().unwrap();
        let (store, _) = KeyStore::open(directory.path(), 1).unwrap();
        store.create_account("alice", 1).unwrap();
        let (alice, alice_secret) = store.create_key(Role::Trader, Some("alice"), "", 1).unwrap();
        let (other, _) = store.create_key(Role::Trader, Some("alice"), "", 1).unwrap();
        let message = b"payload";
        let good = signature(&sign(alice_secret.expose(), message));
        assert!(store.verify(&alice.id, message, &good));
        assert!(!store.verify(&other.id, message, &good));
        assert!(!store.verify(&alice.id, b"payload2", &good));
        assert!(store.active_key(&alice.id).is_some());
        store.revoke(&alice.id).unwrap();
        assert!(store.active_key(&alice.id).is_none());
        let (reopened, _) = KeyStore::open(directory.path(), 2).unwrap();
        assert!(reopened.active_key(&alice.id).is_none(), "revocation is durable");
    }

    #[test]
    fn accounts_are_validated_unique_and_keys_need_one() {
        let directory = tempfile::tempdir().unwrap();
        let (store, _) = KeyStore::open(directory.path(), 1).unwrap();
        assert!(matches!(store.create_account("", 1), Err(KeyError::InvalidAccountName(_))));
        assert!(matches!(store.create_account("a b", 1), Err(KeyError::InvalidAccountName(_))));
        assert!(matches!(
            store.create_account(&"x".repeat(65), 1),
            Err(KeyError::InvalidAccountName(_))
        ));
        store.create_account("alice", 1).unwrap();
        assert!(matches!(store.create_account("alice", 1), Err(KeyError::DuplicateAccount(_))));
        assert!(matches!(
            store.create_key(Role::Trader, Some("bob"), "", 1),
            Err(KeyError::UnknownAccount(_))
        ));
    }

    #[test]
    fn a_master_key_kept_elsewhere_is_used_and_none_is_written_beside_the_keys() {
        let directory = tempfile::tempdir().unwrap();
        let elsewhere = tempfile::tempdir().unwrap();
        let master_file = elsewhere.path().join("bourse-master");
        fs::write(&master_file, format!("{}\n", "ab".repeat(32))).unwrap();
        let (store, first) =
            KeyStore::open_with_master(directory.path(), Some(&master_file), 1).unwrap();
        let first = first.unwrap();
        assert!(!directory.path().join(MASTER_FILE).exists());
        let message = b"hello";
        let signature = signature(&sign(first.admin_secret.expose(), message));
        assert!(store.verify(&first.admin_key.id, message, &signature));
        drop(store);
        // Without it, the same keys are not valid: the secrets come from that master.
        fs::write(directory.path().join(MASTER_FILE), "cd".repeat(32)).unwrap();
        let (other, _) = KeyStore::open(directory.path(), 2).unwrap();
        assert!(!other.verify(&first.admin_key.id, message, &signature));
        let missing = elsewhere.path().join("missing");
        assert!(KeyStore::open_with_master(directory.path(), Some(&missing), 3).is_err());
        fs::write(&master_file, "short").unwrap();
        assert!(KeyStore::open_with_master(directory.path(), Some(&master_file), 3).is_err());
    }

    #[test]
    fn a_password_hash_is_kept_beside_its_account_durably_and_removed() {
        let directory = tempfile::tempdir().unwrap();
        let (store, _) = KeyStore::open(directory.path(), 1).unwrap();
        store.create_account("alice", 1).unwrap();
        assert!(!store.account("alice").unwrap().has_password());
        let before = store.set_password_hash("alice", Some("$argon2id$v=19$x".into())).unwrap();
        assert!(!before.has_password(), "the record as it was");
        let (reopened, _) = KeyStore::open(directory.path(), 2).unwrap();
        let record = reopened.account("alice").unwrap();
        assert_eq!(record.password_hash.as_deref(), Some("$argon2id$v=19$x"));
        assert!(!format!("{record:?}").contains("argon2"), "Debug hides the hash");
        assert!(reopened.set_password_hash("alice", None).unwrap().has_password());
        assert!(!reopened.account("alice").unwrap().has_password());
        let on_disk = fs::read_to_string(directory.path().join(KEYS_FILE)).unwrap();
        assert!(!on_disk.contains("password_hash"), "no field without a password: {on_disk}");
        assert!(matches!(
            reopened.set_password_hash("bob", None),
            Err(KeyError::UnknownAccount(_))
        ));
    }

    #[test]
    fn a_store_written_before_passwords_existed_still_loads() {
        let directory = tempfile::tempdir().unwrap();
        KeyStore::open(directory.path(), 1).unwrap();
        let path = directory.path().join(KEYS_FILE);
        let mut stored: serde_json::Value =
            serde_json::from_slice(&fs::read(&path).unwrap()).unwrap();
        stored["accounts"]["alice"] = serde_json::json!({ "name": "alice", "created_ms": 5 });
        fs::write(&path, serde_json::to_vec(&stored).unwrap()).unwrap();
        let (store, _) = KeyStore::open(directory.path(), 2).unwrap();
        let alice = store.account("alice").unwrap();
        assert_eq!((alice.created_ms, alice.password_hash), (5, None));
    }

    #[test]
    fn the_token_key_is_derived_from_the_master_key_and_is_not_it() {
        let directory = tempfile::tempdir().unwrap();
        let (store, _) = KeyStore::open(directory.path(), 1).unwrap();
        let master = fs::read_to_string(directory.path().join(MASTER_FILE)).unwrap();
        let master: [u8; 32] = hex::decode(master.trim()).unwrap().try_into().unwrap();
        let mut mac = HmacSha256::new_from_slice(&master).unwrap();
        mac.update(b"bourse-token-key");
        let expected: [u8; 32] = mac.finalize().into_bytes().into();
        assert_eq!(store.token_signing_key(), expected);
        assert_ne!(store.token_signing_key(), master);
        drop(store);
        fs::write(directory.path().join(MASTER_FILE), "cd".repeat(32)).unwrap();
        let (rotated, _) = KeyStore::open(directory.path(), 2).unwrap();
        assert_ne!(rotated.token_signing_key(), expected, "a new master, a new token key");
    }

    #[test]
    fn a_damaged_store_is_an_error_not_a_fresh_start() {
        let directory = tempfile::tempdir().unwrap();
        KeyStore::open(directory.path(), 1).unwrap();
        fs::write(directory.path().join(KEYS_FILE), b"{ not json").unwrap();
        let error = KeyStore::open(directory.path(), 2).unwrap_err();
        assert!(matches!(error, KeyError::Damaged { .. }), "{error}");
        fs::write(directory.path().join(MASTER_FILE), b"abcd").unwrap();
        assert!(KeyStore::open(directory.path(), 2).is_err());
    }
}
