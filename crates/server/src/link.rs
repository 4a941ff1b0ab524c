//! The gateways' one way into the engine: submit a command and await its outcome, or
//! run a read on the engine's state and await its answer, from async code.
//!
//! A gateway connection (binary TCP, WebSocket, the pipelined HTTP loop) opens its own
//! `Lane` (its own engine session, its outcomes on its own channel). The router's
//! handlers share one engine session: each submission gets a request number and a
//! oneshot channel, found again by the outcome's `Correlation`; the engine's applier
//! thread delivers outcomes (once durable, in `sync` mode) to `Waiting`, which hands
//! each to its waiter without blocking. A waiter that went away (a client that
//! disconnected) simply drops its outcome: the command was still sequenced and applied,
//! and its result can be read back.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use bourse_core::venue::Venue;
use bourse_core::{Command, Event};
use bourse_engine::{
    CommandResult, Correlation, Failure, Outcome, Released, ResultSink, Session, SubmitError,
};
use tokio::sync::{mpsc, oneshot};

use crate::cluster::{NodeDirectory, NotLeader};

/// The outcome of one command, with its events.
#[derive(Clone, Debug)]
pub struct Reply {
    released: Arc<Released>,
    index: usize,
}

impl Reply {
    /// The outcome at `index` of `released` (a lane's, matched by its connection).
    pub fn of(released: Arc<Released>, index: usize) -> Reply {
        Reply { released, index }
    }

    pub fn outcome(&self) -> &Outcome {
        &self.released.outcomes[self.index]
    }

    /// `None` when the engine stopped before the command was durable.
    pub fn result(&self) -> Option<&CommandResult> {
        match self.outcome() {
            Outcome::Applied(result) => Some(result),
            Outcome::Failed { .. } => None,
        }
    }

    /// The command's events: `accepted` or `rejected` first.
    pub fn events(&self) -> &[Event] {
        match self.result() {
            Some(result) => self.released.events_of(result),
            None => &[],
        }
    }
}

/// One account's balance of one asset, in the asset's units.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AssetBalance {
    pub asset: String,
    pub decimals: u32,
    pub available: i64,
    pub held: i64,
}

/// Why a command or a read got no answer from the engine.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum LinkError {
    #[error(transparent)]
    Refused(#[from] SubmitError),
    #[error("too many requests are waiting for the engine ({0}); retry later")]
    Busy(usize),
    #[error("the engine stopped before answering: {0}")]
    Failed(String),
    /// This node of a cluster does not lead (or lost its leadership before the command
    /// was answered): where the leader is.
    #[error("{}", .0.message)]
    NotLeader(Box<NotLeader>),
}

/// Why a node that does not lead refuses a command.
const NOT_LEADER: &str = "this node is not the leader";

/// The error of a submission the engine refused, with the leader's addresses when this
/// node does not lead.
fn refused(directory: &NodeDirectory, error: SubmitError) -> LinkError {
    match error {
        SubmitError::NotLeader { leader } => {
            LinkError::NotLeader(Box::new(directory.not_leader(leader, NOT_LEADER)))
        }
        other => LinkError::Refused(other),
    }
}

/// The error of a command the engine took but never answered with a result.
fn failed(directory: &NodeDirectory, reason: &str, failure: Failure) -> LinkError {
    match failure {
        Failure::Stopped => LinkError::Failed(reason.to_string()),
        Failure::NotLeader { leader } => {
            LinkError::NotLeader(Box::new(directory.not_leader(leader, reason)))
        }
        Failure::Lost | Failure::Unknown => {
            LinkError::NotLeader(Box::new(directory.not_leader(None, reason)))
        }
    }
}

/// A submitted command's outcome, to wait for.
pub struct Pending {
    receiver: oneshot::Receiver<Reply>,
    directory: Arc<NodeDirectory>,
}

impl Pending {
    pub async fn wait(self) -> Result<Reply, LinkError> {
        let reply = self
            .receiver
            .await
            .map_err(|_| LinkError::Failed("the engine dropped the command".into()))?;
        match reply.outcome() {
            Outcome::Applied(_) => Ok(reply),
            Outcome::Failed { reason, failure, .. } => {
                Err(failed(&self.directory, reason, *failure))
            }
        }
    }
}

#[derive(Default)]
struct Waiting {
    waiters: Mutex<HashMap<Correlation, oneshot::Sender<Reply>>>,
}

impl ResultSink for Waiting {
    fn deliver(&self, released: Released) {
        let released = Arc::new(released);
        let mut waiters = self.waiters.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        for (index, outcome) in released.outcomes.iter().enumerate() {
            if let Some(waiter) = waiters.remove(&outcome.correlation()) {
                let _ = waiter.send(Reply { released: Arc::clone(&released), index });
            }
        }
    }
}

pub struct EngineLink {
    session: Arc<Session>,
    waiting: Arc<Waiting>,
    next_request: AtomicU64,
    in_flight_max: usize,
    /// Commands submitted through lanes whose outcomes their lane has not taken yet.
    lanes_in_flight: Arc<AtomicUsize>,
    /// The cluster's nodes, to name the leader to a client this node cannot serve.
    directory: Arc<NodeDirectory>,
    /// In a cluster: the Raft node's view.
    cluster_status: Option<bourse_engine::StatusReader>,
}

/// What a lane's sink hands its connection: a release of outcomes, in sequence order.
pub type LaneReleases = mpsc::UnboundedReceiver<Arc<Released>>;

struct LaneSink(mpsc::UnboundedSender<Arc<Released>>);

impl ResultSink for LaneSink {
    fn deliver(&self, released: Released) {
        // A connection that is gone has nothing to answer.
        let _ = self.0.send(Arc::new(released));
    }
}

/// One connection's own session on the engine. Its commands' outcomes come back on
/// its own channel (`LaneReleases`), in the order the commands were submitted, as the
/// engine releases them: no shared table of waiters, no task per request. The
/// connection matches them to its requests by their whole `Correlation`, oldest first,
/// and calls `taken` for each: a lane's session has a number of its own, so outcomes of
/// a closed lane whose session slot this lane took over (released late) never match.
pub struct Lane {
    session: Session,
    next_request: u64,
    /// This lane's commands not yet `taken`.
    in_flight: usize,
    /// Over all lanes, shared with the link for `in_flight_max` and `/metrics`.
    lanes_in_flight: Arc<AtomicUsize>,
    in_flight_max: usize,
    directory: Arc<NodeDirectory>,
}

impl Lane {
    /// Submits `command`: its correlation, to find its outcome by. `Busy` when the
    /// gateways already have `in_flight_max` commands waiting, or the engine's queue is
    /// full.
    pub fn submit(&mut self, command: &Command<'_>) -> Result<Correlation, LinkError> {
        if self.lanes_in_flight.load(Ordering::Relaxed) >= self.in_flight_max {
            return Err(LinkError::Busy(self.in_flight_max));
        }
        let correlation = self
            .session
            .submit(command, self.next_request)
            .map_err(|error| refused(&self.directory, error))?;
        self.next_request = self.next_request.wrapping_add(1);
        self.in_flight += 1;
        self.lanes_in_flight.fetch_add(1, Ordering::Relaxed);
        Ok(correlation)
    }

    /// The lane's engine session, for reads sequenced behind its commands
    /// (`read_order_behind`).
    pub fn session(&self) -> &Session {
        &self.session
    }

    /// Notes that `count` outcomes were taken from the lane's releases.
    pub fn taken(&mut self, count: usize) {
        debug_assert!(count <= self.in_flight, "a lane takes only the outcomes it waits for");
        let count = count.min(self.in_flight);
        self.in_flight -= count;
        self.lanes_in_flight.fetch_sub(count, Ordering::Relaxed);
    }

    pub fn in_flight(&self) -> usize {
        self.in_flight
    }
}

/// Queues a read of `account`'s order `client_id` on `session`, behind every command
/// the session submitted so far (before any it submits next): what a cancel or amend
/// answers, exact however many requests follow it.
pub fn read_order_behind(
    session: &Session,
    account: bourse_core::ids::AccountId,
    client_id: &str,
) -> Result<OrderRead, LinkError> {
    let (sender, receiver) = oneshot::channel();
    let client_id = client_id.to_string();
    session.query(move |venue| {
        let record = venue
            .activity()
            .and_then(|activity| activity.order_by_client(account, &client_id).cloned());
        let _ = sender.send(record);
    })?;
    Ok(OrderRead { receiver })
}

/// An order read by `read_order`, to wait for.
pub struct OrderRead {
    receiver: oneshot::Receiver<Option<bourse_core::venue::OrderRecord>>,
}

impl OrderRead {
    pub async fn wait(self) -> Result<Option<bourse_core::venue::OrderRecord>, LinkError> {
        self.receiver.await.map_err(|_| LinkError::Failed("the engine stopped".into()))
    }
}

impl Drop for Lane {
    fn drop(&mut self) {
        self.lanes_in_flight.fetch_sub(self.in_flight, Ordering::Relaxed);
    }
}

impl EngineLink {
    /// Opens the gateways' session on `engine`; at most `in_flight_max` submissions wait
    /// for their outcome at a time. `directory`: the cluster's nodes (empty: none).
    pub fn open(
        engine: &bourse_engine::Engine,
        in_flight_max: usize,
        directory: NodeDirectory,
    ) -> EngineLink {
        let waiting = Arc::new(Waiting::default());
        let session = Arc::new(engine.open_session(Arc::clone(&waiting) as Arc<dyn ResultSink>));
        EngineLink {
            session,
            waiting,
            next_request: AtomicU64::new(1),
            in_flight_max,
            lanes_in_flight: Arc::new(AtomicUsize::new(0)),
            directory: Arc::new(directory),
            cluster_status: engine.cluster_status_reader(),
        }
    }

    /// In a cluster: the Raft node's view (leader, term, commit index, each node's
    /// progress as the leader sees it), and why it stopped if it did.
    pub fn cluster_status(&self) -> Option<bourse_engine::ReplicaStatus> {
        self.cluster_status.as_ref().map(bourse_engine::StatusReader::read)
    }

    /// The cluster's nodes (none when this server is not in one).
    pub fn directory(&self) -> &NodeDirectory {
        &self.directory
    }

    /// Whether this node takes commands now: `Ok` when it leads its cluster or is not
    /// in one; otherwise where the leader is.
    pub fn leads(&self) -> Result<(), Box<NotLeader>> {
        self.session
            .leads()
            .map_err(|leader| Box::new(self.directory.not_leader(leader, NOT_LEADER)))
    }

    /// The error of a submission the engine refused (`SubmitError`), naming the leader
    /// when this node does not lead.
    pub fn refused(&self, error: SubmitError) -> LinkError {
        refused(&self.directory, error)
    }

    /// The error of an outcome that is not a result (`Outcome::Failed`).
    pub fn outcome_failed(&self, reason: &str, failure: Failure) -> LinkError {
        failed(&self.directory, reason, failure)
    }

    /// Opens a connection's own lane into the engine, and the channel its outcomes
    /// come back on.
    pub fn open_lane(&self) -> (Lane, LaneReleases) {
        let (sender, releases) = mpsc::unbounded_channel();
        let session = self.session.open_sibling(Arc::new(LaneSink(sender)));
        let lane = Lane {
            session,
            next_request: 1,
            in_flight: 0,
            lanes_in_flight: Arc::clone(&self.lanes_in_flight),
            in_flight_max: self.in_flight_max,
            directory: Arc::clone(&self.directory),
        };
        (lane, releases)
    }

    /// Submits `command` and waits until its outcome is released (durable, in `sync`
    /// mode).
    pub async fn submit(&self, command: &Command<'_>) -> Result<Reply, LinkError> {
        self.enqueue(command)?.wait().await
    }

    /// Submits `command` now (so commands enqueued one after another are sequenced in
    /// that order) and returns what to wait on for its outcome.
    pub fn enqueue(&self, command: &Command<'_>) -> Result<Pending, LinkError> {
        let request = self.next_request.fetch_add(1, Ordering::Relaxed);
        // Known before the submission, so that the waiter is in place before the outcome.
        let correlation = Correlation { session: self.session.number(), request };
        let (sender, receiver) = oneshot::channel();
        {
            let mut waiters = self.waiters();
            if waiters.len() + self.lanes_in_flight.load(Ordering::Relaxed) >= self.in_flight_max {
                return Err(LinkError::Busy(self.in_flight_max));
            }
            waiters.insert(correlation, sender);
        }
        if let Err(error) = self.session.submit(command, request) {
            self.waiters().remove(&correlation);
            return Err(refused(&self.directory, error));
        }
        Ok(Pending { receiver, directory: Arc::clone(&self.directory) })
    }

    /// Runs `read` on the engine's state after every command submitted before it (and,
    /// in `sync` mode, only once those are durable).
    pub async fn read<T: Send + 'static>(
        &self,
        read: impl FnOnce(&Venue) -> T + Send + 'static,
    ) -> Result<T, LinkError> {
        let (sender, receiver) = oneshot::channel();
        self.session.query(move |venue| {
            let _ = sender.send(read(venue));
        })?;
        receiver.await.map_err(|_| LinkError::Failed("the engine stopped".into()))
    }

    /// `read`, waited for on a thread that is not async (the market-data publisher's).
    pub fn read_blocking<T: Send + 'static>(
        &self,
        read: impl FnOnce(&Venue) -> T + Send + 'static,
    ) -> Result<T, LinkError> {
        let (sender, receiver) = std::sync::mpsc::sync_channel(1);
        self.session.query(move |venue| {
            let _ = sender.send(read(venue));
        })?;
        receiver.recv().map_err(|_| LinkError::Failed("the engine stopped".into()))
    }

    /// `read_at_seq`, waited for on a thread that is not async.
    pub fn read_at_seq_blocking<T: Send + 'static>(
        &self,
        read: impl FnOnce(&Venue) -> T + Send + 'static,
    ) -> Result<(T, u64), LinkError> {
        let session = Arc::clone(&self.session);
        self.read_blocking(move |venue| {
            let seq = session.stats().applied_seq.0;
            (read(venue), seq)
        })
    }

    /// Runs `read` and tells the engine sequence number of the state it read (the last
    /// command applied then).
    pub async fn read_at_seq<T: Send + 'static>(
        &self,
        read: impl FnOnce(&Venue) -> T + Send + 'static,
    ) -> Result<(T, u64), LinkError> {
        let session = Arc::clone(&self.session);
        let (sender, receiver) = oneshot::channel();
        self.session.query(move |venue| {
            // (Queries run on the applier between batches: this is that state's seq.)
            let seq = session.stats().applied_seq.0;
            let _ = sender.send((read(venue), seq));
        })?;
        receiver.await.map_err(|_| LinkError::Failed("the engine stopped".into()))
    }

    /// The record of `account`'s order `client_id` (open, or finished and remembered).
    pub async fn order_by_client(
        &self,
        account: bourse_core::ids::AccountId,
        client_id: &str,
    ) -> Result<Option<bourse_core::venue::OrderRecord>, LinkError> {
        let client_id = client_id.to_string();
        self.read(move |venue| {
            venue
                .activity()
                .and_then(|activity| activity.order_by_client(account, &client_id).cloned())
        })
        .await
    }

    /// Whether each of the first `count` instruments is halted, in id order.
    pub async fn halted(&self, count: usize) -> Result<Vec<bool>, LinkError> {
        self.read(move |venue| {
            (0..count)
                .map(|index| venue.is_halted(bourse_core::ids::InstrumentId(index as u32)))
                .collect()
        })
        .await
    }

    /// Every asset's balance of each of `accounts` (zeros for an account the engine
    /// does not have, `None`), in the engine's asset order.
    pub async fn balances(
        &self,
        accounts: Vec<Option<bourse_core::ids::AccountId>>,
    ) -> Result<Vec<Vec<AssetBalance>>, LinkError> {
        self.read(move |venue| {
            let exchange = venue.exchange();
            let ledger = exchange.ledger();
            accounts
                .iter()
                .map(|account| {
                    exchange
                        .assets()
                        .iter()
                        .enumerate()
                        .map(|(index, spec)| {
                            let asset = bourse_core::ids::AssetId(index as u32);
                            let balance = account.map(|account| ledger.balance(account, asset));
                            AssetBalance {
                                asset: spec.name.to_string(),
                                decimals: spec.decimals,
                                available: balance.map_or(0, |balance| balance.available.0),
                                held: balance.map_or(0, |balance| balance.held.0),
                            }
                        })
                        .collect()
                })
                .collect()
        })
        .await
    }

    /// The engine's counters (for `/metrics`).
    pub fn stats(&self) -> bourse_engine::StatsSnapshot {
        self.session.stats()
    }

    /// Commands and queries waiting in the engine's intake queue, and its capacity.
    pub fn queue(&self) -> (usize, usize) {
        (self.session.queue_len(), self.session.queue_capacity())
    }

    /// Why the engine stopped taking commands, if it did.
    pub fn failure(&self) -> Option<String> {
        self.session.failure()
    }

    /// The shared session, for reads sequenced behind its commands
    /// (`read_order_behind`).
    pub fn session(&self) -> &Session {
        &self.session
    }

    pub fn in_flight(&self) -> usize {
        self.waiters().len() + self.lanes_in_flight.load(Ordering::Relaxed)
    }

    fn waiters(&self) -> std::sync::MutexGuard<'_, HashMap<Correlation, oneshot::Sender<Reply>>> {
        self.waiting.waiters.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

/// An engine for the server's unit tests: in `directory`, without syncs.
#[cfg(test)]
pub(crate) fn start_test_engine(directory: &std::path::Path) -> bourse_engine::Engine {
    let mut config = bourse_engine::EngineConfig::new(directory);
    config.durability = bourse_engine::Durability::None;
    bourse_engine::Engine::start(config).unwrap()
}

#[cfg(test)]
mod tests {
    use super::*;
    use bourse_core::command::TransferCommand;
    use bourse_core::Decimal;

    fn deposit() -> Command<'static> {
        Command::Deposit(TransferCommand {
            account: "nobody".into(),
            asset: "USD".into(),
            amount: Decimal::from_units(1, 0),
        })
    }

    /// A lane's outcomes reach only that lane, and a lane opened after another closed
    /// (and may get its engine session's slot) never shares a correlation with it.
    #[test]
    fn lanes_number_their_commands_apart_and_hear_only_their_own() {
        let directory = tempfile::tempdir().unwrap();
        let engine = start_test_engine(directory.path());
        let link = EngineLink::open(&engine, 100, Default::default());
        let (mut first, mut first_releases) = link.open_lane();
        let first_correlation = first.submit(&deposit()).unwrap();
        drop(first);
        let (mut second, mut second_releases) = link.open_lane();
        let second_correlation = second.submit(&deposit()).unwrap();
        assert_ne!(first_correlation, second_correlation);
        // Both lanes number their requests from 1: the sessions tell them apart.
        assert_eq!(first_correlation.request, second_correlation.request);
        assert_ne!(first_correlation.session, second_correlation.session);
        // The second lane may take over the first's engine session slot, and so get the
        // first's outcome if it was released late: it is told apart by its session.
        let mut seen = Vec::new();
        while !seen.contains(&second_correlation) {
            let released = second_releases.blocking_recv().unwrap();
            seen.extend(released.outcomes.iter().map(Outcome::correlation));
        }
        assert!(seen.iter().all(|c| [first_correlation, second_correlation].contains(c)));
        second.taken(1);
        assert_eq!((second.in_flight(), link.in_flight()), (0, 0));
        // The closed lane's channel got nothing of the second's.
        while let Ok(released) = first_releases.try_recv() {
            assert!(released.outcomes.iter().all(|o| o.correlation() == first_correlation));
        }
        drop(second);
        drop(link);
        engine.shutdown().unwrap();
    }
}
