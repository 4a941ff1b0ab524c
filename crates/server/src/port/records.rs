//! Every change to the server's own state that every node of a cluster must hold
//! alike goes through here: the key store (accounts, keys, passwords) and the futures
//! clearing settings (ratio margins, posted settlement prices). On one node a change is
//! applied at once. In a cluster it is a record of the cluster's log
//! (`bourse_engine::Records`): the leader proposes it, every node applies it to its own
//! copy in log order, and the caller is answered with what its own node made of it. So
//! a key made on the leader signs requests on every node, and a new leader settles a
//! contract with the price posted on the old one.
//!
//! A change carries everything it needs (a new key's id, a password's hash, a ratio),
//! so each node makes the same change. Each store keeps the log index it holds
//! (`applied_index`), so a restarted node applies no change twice.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use serde::{Deserialize, Serialize};
use tokio::sync::oneshot;

use crate::keys::{KeyChange, KeyChanged, KeyError, KeyStore};
use crate::link::{EngineLink, LinkError};
use crate::port::error::{ApiError, ApiResult, ErrorCode};
use crate::services::clearing::settings::{
    ContractSettings, FuturesSettings, SettingsChange, SettingsError,
};
use crate::services::multicast::cluster::FeedAnchor;
use crate::services::multicast::Input as FeedInput;

/// How long a proposer waits for its change to come back through the log.
const COMMIT_WAIT: Duration = Duration::from_secs(10);

/// A store writes how far the log is applied (without a change of its own) once the
/// log is this many entries past what it wrote: a restart hands over at most about
/// this many entries more than the journal needs.
const STORE_APPLIED_EVERY: u64 = 10_000;

/// A change as the cluster's log carries it.
#[derive(Debug, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
enum Change {
    /// (Records of the first clustered builds named it `change`.)
    #[serde(alias = "change")]
    Keys(KeyChange),
    Futures(SettingsChange),
    /// The feed's numbering (`services::multicast::cluster`): no store holds it, the
    /// feed's publisher takes it.
    FeedAnchor(FeedAnchor),
}

/// A change and the proposer's number for it, by which the proposing node finds its
/// waiter.
#[derive(Debug, Serialize, Deserialize)]
struct Proposal {
    nonce: String,
    #[serde(flatten)]
    change: Change,
}

/// What a node's store made of a change.
enum Applied {
    Keys(Result<KeyChanged, KeyError>),
    Futures(Result<ContractSettings, SettingsError>),
}

type Waiters = HashMap<String, oneshot::Sender<Applied>>;

/// A cluster's replicated server state, as the engine's `Records`: what the log
/// commits is applied here, on every node.
pub struct ReplicatedRecords {
    keys: Arc<KeyStore>,
    futures: Arc<FuturesSettings>,
    waiting: Mutex<Waiters>,
    /// The engine's proposer and the link (to say where the leader is), once started.
    engine: OnceLock<(bourse_engine::RecordProposer, Arc<EngineLink>)>,
    /// The feed's publisher, when the feed is on.
    feed: OnceLock<std::sync::mpsc::Sender<FeedInput>>,
}

impl ReplicatedRecords {
    pub fn new(keys: Arc<KeyStore>, futures: Arc<FuturesSettings>) -> Arc<ReplicatedRecords> {
        Arc::new(ReplicatedRecords {
            keys,
            futures,
            waiting: Mutex::new(HashMap::new()),
            engine: OnceLock::new(),
            feed: OnceLock::new(),
        })
    }

    /// Connects the feed's publisher: the anchors of the log go to it.
    pub fn connect_feed(&self, publisher: std::sync::mpsc::Sender<FeedInput>) {
        let _ = self.feed.set(publisher);
    }

    /// Proposes a feed anchor, waiting for nothing (the publisher gets it back from the
    /// log like every node's); `false` when this node cannot propose.
    pub fn propose_anchor(&self, anchor: &FeedAnchor) -> bool {
        let Some((proposer, _)) = self.engine.get() else { return false };
        let proposal =
            Proposal { nonce: String::new(), change: Change::FeedAnchor(anchor.clone()) };
        match serde_json::to_vec(&proposal) {
            Ok(record) => proposer.propose(&record).is_ok(),
            Err(_) => false,
        }
    }

    /// Connects the started engine.
    pub fn connect(&self, proposer: bourse_engine::RecordProposer, link: Arc<EngineLink>) {
        let _ = self.engine.set((proposer, link));
    }

    fn waiters(&self) -> std::sync::MutexGuard<'_, Waiters> {
        self.waiting.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    async fn propose(&self, change: Change) -> ApiResult<Applied> {
        let Some((proposer, link)) = self.engine.get() else {
            return Err(ApiError::new(ErrorCode::EngineStopped, "the cluster's node is starting"));
        };
        link.leads().map_err(|not_leader| ApiError::from(LinkError::NotLeader(not_leader)))?;
        let mut nonce = [0u8; 16];
        getrandom::fill(&mut nonce)
            .map_err(|error| ApiError::internal(format!("no random source: {error}")))?;
        let nonce = hex::encode(nonce);
        let record = serde_json::to_vec(&Proposal { nonce: nonce.clone(), change })
            .map_err(|error| ApiError::internal(error.to_string()))?;
        let (sender, receiver) = oneshot::channel();
        self.waiters().insert(nonce.clone(), sender);
        if let Err(error) = proposer.propose(&record) {
            self.waiters().remove(&nonce);
            return Err(ApiError::from(link.refused(error)));
        }
        match tokio::time::timeout(COMMIT_WAIT, receiver).await {
            Ok(Ok(applied)) => Ok(applied),
            _ => {
                self.waiters().remove(&nonce);
                let reason = "the change was not known to be applied in time (the leader may \
                              have changed): it may or may not be; look before trying again";
                Err(ApiError::from(LinkError::NotLeader(Box::new(
                    link.directory().not_leader(None, reason),
                ))))
            }
        }
    }
}

impl bourse_engine::Records for ReplicatedRecords {
    fn applied_index(&self) -> u64 {
        self.keys.applied_index().min(self.futures.applied_index())
    }

    fn apply(&self, index: u64, record: &[u8]) {
        let proposal: Proposal = match serde_json::from_slice(record) {
            Ok(proposal) => proposal,
            Err(error) => {
                // Only this server proposes records: one it cannot read is a bug.
                tracing::error!(index, %error, "a record of the cluster's log that does not decode");
                return;
            }
        };
        let applied = match proposal.change {
            Change::Keys(ref change) => {
                self.keys.apply_replicated(index, change).map(Applied::Keys)
            }
            Change::Futures(ref change) => {
                self.futures.apply_replicated(index, change).map(Applied::Futures)
            }
            Change::FeedAnchor(anchor) => {
                if let Some(publisher) = self.feed.get() {
                    let _ = publisher.send(FeedInput::Anchor(anchor));
                }
                return;
            }
        };
        let Some(applied) = applied else { return };
        let failed = match &applied {
            Applied::Keys(Err(KeyError::Io { path, source })) => {
                Some(format!("{}: {source}", path.display()))
            }
            Applied::Futures(Err(error)) => Some(error.to_string()),
            _ => None,
        };
        if let Some(failed) = failed {
            tracing::error!(index, change = ?proposal.change, %failed, "a change of the cluster's log could not be stored");
        }
        if let Some(waiter) = self.waiters().remove(&proposal.nonce) {
            let _ = waiter.send(applied);
        }
    }

    fn applied_through(&self, index: u64) {
        // Each store writes its file only when the log is far enough past what it holds.
        let due = |held: u64| index >= held.saturating_add(STORE_APPLIED_EVERY);
        if due(self.keys.applied_index()) {
            if let Err(error) = self.keys.store_applied_index(index) {
                tracing::warn!(index, %error, "the key store could not store how far the log is applied");
            }
        }
        if due(self.futures.applied_index()) {
            if let Err(error) = self.futures.store_applied_index(index) {
                tracing::warn!(index, %error, "the futures settings could not store how far the log is applied");
            }
        }
    }
}

/// Runs a local change to a store off the async workers.
async fn apply_blocking<T: Send + 'static, E: Into<ApiError> + Send + 'static>(
    change: impl FnOnce() -> Result<T, E> + Send + 'static,
    failed: ErrorCode,
) -> ApiResult<T> {
    tokio::task::spawn_blocking(change)
        .await
        .map_err(|error| ApiError::new(failed, format!("the change did not finish: {error}")))?
        .map_err(Into::into)
}

/// A reply to a change of one store that came back as another's: a bug.
fn wrong_store() -> ApiError {
    ApiError::internal("a change came back applied to another store")
}

/// The way changes reach the key store: at once, or through the cluster's log.
pub struct KeyChanges {
    keys: Arc<KeyStore>,
    replicated: Option<Arc<ReplicatedRecords>>,
}

impl KeyChanges {
    /// One node: changes are applied to `keys` at once.
    pub fn local(keys: Arc<KeyStore>) -> KeyChanges {
        KeyChanges { keys, replicated: None }
    }

    /// A node of a cluster: changes go through the log (`replicated`).
    pub fn replicated(replicated: Arc<ReplicatedRecords>) -> KeyChanges {
        KeyChanges { keys: Arc::clone(&replicated.keys), replicated: Some(replicated) }
    }

    pub fn keys(&self) -> &Arc<KeyStore> {
        &self.keys
    }

    /// Makes `change` (on every node, in a cluster) and says what it did.
    pub async fn apply(&self, change: KeyChange) -> ApiResult<KeyChanged> {
        match &self.replicated {
            Some(replicated) => match replicated.propose(Change::Keys(change)).await? {
                Applied::Keys(outcome) => outcome.map_err(ApiError::from),
                Applied::Futures(_) => Err(wrong_store()),
            },
            None => {
                let keys = Arc::clone(&self.keys);
                apply_blocking(move || keys.apply_local(&change), ErrorCode::KeyStoreFailed).await
            }
        }
    }
}

/// The way changes reach the futures clearing settings: at once, or through the
/// cluster's log.
pub struct SettingsChanges {
    settings: Arc<FuturesSettings>,
    replicated: Option<Arc<ReplicatedRecords>>,
}

impl SettingsChanges {
    /// One node: changes are applied to `settings` at once.
    pub fn local(settings: Arc<FuturesSettings>) -> SettingsChanges {
        SettingsChanges { settings, replicated: None }
    }

    /// A node of a cluster: changes go through the log (`replicated`).
    pub fn replicated(replicated: Arc<ReplicatedRecords>) -> SettingsChanges {
        SettingsChanges { settings: Arc::clone(&replicated.futures), replicated: Some(replicated) }
    }

    /// The settings as this node holds them.
    pub fn settings(&self) -> &FuturesSettings {
        &self.settings
    }

    /// Makes `change` (on every node, in a cluster); the contract's settings after it.
    pub async fn apply(&self, change: SettingsChange) -> ApiResult<ContractSettings> {
        match &self.replicated {
            Some(replicated) => match replicated.propose(Change::Futures(change)).await? {
                Applied::Futures(outcome) => outcome.map_err(ApiError::from),
                Applied::Keys(_) => Err(wrong_store()),
            },
            None => {
                let settings = Arc::clone(&self.settings);
                apply_blocking(move || settings.apply_local(&change), ErrorCode::SettingsFailed)
                    .await
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_record_names_its_store_and_reads_back() {
        let change = SettingsChange::PostedPrice { symbol: "SHFE.cu2612".into(), price: None };
        let proposal = Proposal { nonce: "n1".into(), change: Change::Futures(change.clone()) };
        let bytes = serde_json::to_vec(&proposal).unwrap();
        let text = String::from_utf8(bytes.clone()).unwrap();
        assert!(text.contains(r#""futures":{"set":"posted_price""#), "{text}");
        let read: Proposal = serde_json::from_slice(&bytes).unwrap();
        assert!(matches!(read.change, Change::Futures(read) if read == change));
    }

    #[test]
    fn how_far_the_log_is_applied_is_stored_once_it_is_far_enough_ahead() {
        use bourse_engine::Records;
        let directory = tempfile::tempdir().unwrap();
        let master = directory.path().join("master.key");
        crate::keys::ensure_master_key_file(&master).unwrap();
        let (keys, _) = KeyStore::open_for_cluster(directory.path(), Some(&master)).unwrap();
        let futures = FuturesSettings::open(directory.path()).unwrap();
        let records = ReplicatedRecords::new(Arc::new(keys), Arc::new(futures));
        records.applied_through(STORE_APPLIED_EVERY - 1);
        assert_eq!(records.applied_index(), 0, "not far enough ahead: nothing written");
        records.applied_through(STORE_APPLIED_EVERY);
        assert_eq!(records.applied_index(), STORE_APPLIED_EVERY);
        let reopened = FuturesSettings::open(directory.path()).unwrap();
        assert_eq!(reopened.applied_index(), STORE_APPLIED_EVERY, "written durably");
    }

    #[test]
    fn a_key_record_of_the_first_clustered_builds_still_reads() {
        let record = br#"{"nonce":"n2","change":{"change":"revoke","id":"bk_1"}}"#;
        let read: Proposal = serde_json::from_slice(record).unwrap();
        assert!(matches!(read.change, Change::Keys(KeyChange::Revoke { id }) if id == "bk_1"));
    }
}
