//! Every change to the key store (accounts, keys, passwords) goes through here, so that
//! it is made alike on one node and in a cluster. On one node a change is applied to
//! the store at once. In a cluster it is a record of the cluster's log
//! (`bourse_engine::Records`): the leader proposes it, every node applies it to its own
//! store in log order, and the caller is answered with what its own store made of it.
//! So a key made on the leader signs requests on every node, and after a failover.
//!
//! A change carries everything it needs (a new key's id, a password's hash), so each
//! node makes the same change; the store's `applied_index` keeps a restarted node from
//! applying one twice.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use serde::{Deserialize, Serialize};
use tokio::sync::oneshot;

use crate::keys::{KeyChange, KeyChanged, KeyError, KeyStore};
use crate::link::{EngineLink, LinkError};
use crate::port::error::{ApiError, ApiResult, ErrorCode};

/// How long a proposer waits for its change to come back through the log.
const COMMIT_WAIT: Duration = Duration::from_secs(10);

/// A change as the cluster's log carries it: the change, and the proposer's number for
/// it, by which the proposing node finds its waiter.
#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct Proposal {
    nonce: String,
    change: KeyChange,
}

type Waiters = HashMap<String, oneshot::Sender<Result<KeyChanged, KeyError>>>;

/// A cluster's key store, as the engine's `Records`: what the log commits is applied
/// here, on every node.
pub struct ReplicatedKeys {
    keys: Arc<KeyStore>,
    waiting: Mutex<Waiters>,
    /// The engine's proposer and the link (to say where the leader is), once started.
    engine: OnceLock<(bourse_engine::RecordProposer, Arc<EngineLink>)>,
}

impl ReplicatedKeys {
    pub fn new(keys: Arc<KeyStore>) -> Arc<ReplicatedKeys> {
        Arc::new(ReplicatedKeys {
            keys,
            waiting: Mutex::new(HashMap::new()),
            engine: OnceLock::new(),
        })
    }

    /// Connects the started engine.
    pub fn connect(&self, proposer: bourse_engine::RecordProposer, link: Arc<EngineLink>) {
        let _ = self.engine.set((proposer, link));
    }

    fn waiters(&self) -> std::sync::MutexGuard<'_, Waiters> {
        self.waiting.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    async fn propose(&self, change: KeyChange) -> ApiResult<KeyChanged> {
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
            Ok(Ok(outcome)) => outcome.map_err(ApiError::from),
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

impl bourse_engine::Records for ReplicatedKeys {
    fn applied_index(&self) -> u64 {
        self.keys.applied_index()
    }

    fn apply(&self, index: u64, record: &[u8]) {
        let proposal: Proposal = match serde_json::from_slice(record) {
            Ok(proposal) => proposal,
            Err(error) => {
                // Only this server proposes records: one it cannot read is a bug.
                tracing::error!(index, %error, "a key store record that does not decode");
                return;
            }
        };
        let Some(outcome) = self.keys.apply_replicated(index, &proposal.change) else { return };
        if let Err(KeyError::Io { path, source }) = &outcome {
            tracing::error!(index, path = %path.display(), %source, "the key store could not store a change of the cluster's log");
        }
        if let Some(waiter) = self.waiters().remove(&proposal.nonce) {
            let _ = waiter.send(outcome);
        }
    }
}

/// The way changes reach the key store: at once, or through the cluster's log.
pub struct KeyChanges {
    keys: Arc<KeyStore>,
    replicated: Option<Arc<ReplicatedKeys>>,
}

impl KeyChanges {
    /// One node: changes are applied to `keys` at once.
    pub fn local(keys: Arc<KeyStore>) -> KeyChanges {
        KeyChanges { keys, replicated: None }
    }

    /// A node of a cluster: changes go through the log (`replicated`).
    pub fn replicated(replicated: Arc<ReplicatedKeys>) -> KeyChanges {
        KeyChanges { keys: Arc::clone(&replicated.keys), replicated: Some(replicated) }
    }

    pub fn keys(&self) -> &Arc<KeyStore> {
        &self.keys
    }

    /// Makes `change` (on every node, in a cluster) and says what it did.
    pub async fn apply(&self, change: KeyChange) -> ApiResult<KeyChanged> {
        match &self.replicated {
            Some(replicated) => replicated.propose(change).await,
            None => {
                let keys = Arc::clone(&self.keys);
                tokio::task::spawn_blocking(move || keys.apply_local(&change))
                    .await
                    .map_err(|error| {
                        ApiError::new(
                            ErrorCode::KeyStoreFailed,
                            format!("the key store change did not finish: {error}"),
                        )
                    })?
                    .map_err(ApiError::from)
            }
        }
    }
}
