//! The running engine: intake queue → sequencer (batches, journal, group commit) →
//! applier (the core, on its own thread) → outcomes to each session's sink. This module
//! starts and stops the threads and owns what producers hold (`Engine`, `Session`);
//! `sequencer`, `applier` and `snapshotter` are the stages, and what they share
//! (`shared`: the sessions' sinks, the tap, the flags, the clock; `stats`) lies below
//! them, so every module imports only modules below it.
//!
//! ```text
//! sessions ──submit──▶ [bounded intake] ──▶ sequencer ──batch──▶ applier ──▶ sinks
//!                       full: `busy`        seq + ts, write,      Venue::apply,
//!                                           fdatasync (sync)      release outcomes
//!                                                   └─durable──▶  (held until durable)
//! ```
//!
//! In `sync` mode the applier applies batch k while the sequencer syncs it, and
//! releases its outcomes when the sequencer says it is durable.

use std::collections::VecDeque;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::thread::JoinHandle;

use bourse_cluster::{Noter, Replica, ReplicaStatus, StatusReader};
use bourse_core::snapshot::{decode_venue, encode_venue};
use bourse_core::venue::Venue;
use bourse_core::{Command, Exchange, Lookahead, Seq};
use bourse_journal::tail::JournalTail;
use bourse_journal::{JournalError, JournalWriter, TailPolicy, WriterOptions};
use crossbeam_channel::{bounded, Sender, TrySendError};

use crate::applier::Applier;
use crate::config::{ClusterSettings, Durability, EngineConfig};
use crate::digests::NOTE_KIND_RECORD;
use crate::handoff::{SequencedBatch, ToApplier};
use crate::intake::{
    Correlation, Intake, Payload, Query, ResultSink, SessionNumber, Submission, SubmitError,
};
use crate::priority::run_in_background;
use crate::recovery::{recover_venue, RecoveryError};
use crate::replicated::{Committed, Discard};
use crate::sequencer::Sequencer;
use crate::shared::{Shared, NO_TAP};
use crate::snapshotter::{DigestPoints, Snapshotter};
use crate::stats::{SlowSync, Stats, StatsSnapshot};

/// Batches in flight between the sequencer and the applier.
const BATCHES_IN_FLIGHT: usize = 4;
// The recycling queue holds every batch in flight and the one being filled, so no
// batch is dropped (and reallocated) on its way back.
const BATCHES_RECYCLED: usize = BATCHES_IN_FLIGHT + 1;
const _: () = assert!(BATCHES_IN_FLIGHT >= 1);

#[derive(Debug, thiserror::Error)]
pub enum StartError {
    #[error("recovery failed: {0}")]
    Recovery(#[from] RecoveryError),
    #[error("the journal cannot be opened: {0}")]
    Journal(#[from] JournalError),
    #[error("cannot start a thread: {0}")]
    Thread(std::io::Error),
    #[error("{0}")]
    Settings(String),
}

impl StartError {
    pub fn code(&self) -> &'static str {
        match self {
            StartError::Recovery(error) => error.code(),
            StartError::Journal(error) => error.code(),
            StartError::Thread(_) => "thread",
            StartError::Settings(_) => "settings",
        }
    }
}

/// What start-up found on disk.
#[derive(Clone, Debug, Default)]
pub struct StartReport {
    /// The snapshot the state started from.
    pub snapshot_seq: Option<Seq>,
    pub skipped_snapshots: Vec<String>,
    /// Records applied on top of the snapshot.
    pub replayed: u64,
    /// The last command the state includes (`Seq::ZERO`: none).
    pub last_seq: Seq,
    pub torn_tail: Option<String>,
}

pub struct Engine {
    intake: Sender<Intake>,
    shared: Arc<Shared>,
    threads: Vec<JoinHandle<()>>,
    snapshotter: Option<(Sender<()>, JoinHandle<()>)>,
    report: StartReport,
    /// In a cluster: the Raft node's view (leader, term, commit, each node's progress).
    cluster_status: Option<StatusReader>,
    /// In a cluster: proposes notes to the log (the server's records).
    noter: Option<Noter<Committed>>,
}

/// A producer's handle: submit commands, get outcomes through the sink given at
/// `Engine::open_session`.
///
/// Each session has a number the engine never gives again (`SessionNumber`), which
/// every outcome of its commands carries in its `Correlation`. Its sink occupies a slot
/// that is given to the next session opened once it closes: see `open_sibling`.
pub struct Session {
    /// Where its sink is (`Shared::sessions`); reused after it closes.
    slot: u32,
    number: SessionNumber,
    intake: Sender<Intake>,
    shared: Arc<Shared>,
}

/// How far the journal is durable (`Engine::durable_watermark`); valid after the
/// engine stops too.
#[derive(Clone)]
pub struct DurableWatermark(Arc<Shared>);

impl DurableWatermark {
    /// The last record the journal holds durably (`Seq::ZERO`: none).
    pub fn last_durable_seq(&self) -> Seq {
        self.0.stats.durable_below().previous()
    }
}

impl Engine {
    /// Recovers the state from `config.data_dir` (unless durability is `none`) and
    /// starts the sequencer and the applier.
    pub fn start(config: EngineConfig) -> Result<Engine, StartError> {
        let (venue, writer, report, last_crc) = match config.durability {
            Durability::None => {
                let venue = Venue::new(Exchange::new(config.exchange), config.track_activity);
                (venue, None, StartReport::default(), 0)
            }
            _ => open_durable(&config)?,
        };
        let node = config.cluster.as_ref().map(|cluster| cluster.replica.node.id.0);
        let shared =
            Arc::new(Shared::new(config.queue_capacity, Stats::starting_at(report.last_seq), node));
        let journal_id = writer.as_ref().map(JournalWriter::journal_id);
        // 1. intake: a bounded queue from every session to the sequencer.
        let (intake, intake_receiver) = bounded(config.queue_capacity);
        // 2. sequencer → applier: written batches (and, in `sync` mode, "durable up to"),
        //    and the batches' buffers back for reuse.
        let (to_applier, applier_receiver) = bounded(BATCHES_IN_FLIGHT);
        let (recycle, recycled) = bounded(BATCHES_RECYCLED);
        // 3. the sequencer: seq + ts, batch, write, sync (group commit); in a cluster,
        //    batch and propose to the Raft node, whose committed entries are written to
        //    the journal and handed to the applier (`replicated`).
        let (writer, replica, cluster_status) = match (&config.cluster, writer) {
            (Some(cluster), Some(writer)) => {
                let replica =
                    start_replica(&config, cluster, writer, &report, &shared, &to_applier)?;
                let status = replica.status_reader();
                (None, Some(replica), Some(status))
            }
            (Some(_), None) => {
                return Err(StartError::Settings(
                    "a node of a cluster keeps a journal (durability none is for one process)"
                        .to_string(),
                ))
            }
            (None, writer) => (writer, None, None),
        };
        // Beside the pipeline: the snapshotter, on its own copy of the state, reading the
        // durable journal (in a cluster also computing the digests compared with the
        // leader's, whether or not it takes snapshots).
        let noter = replica.as_ref().map(Replica::noter);
        let digests = match (&config.cluster, &replica) {
            (Some(cluster), Some(replica)) if cluster.digest_every > 0 => {
                Some(DigestPoints::after(report.last_seq, cluster.digest_every, replica.noter()))
            }
            _ => None,
        };
        let snapshotter = match journal_id {
            Some(journal_id) if config.snapshot_every_commands > 0 || digests.is_some() => {
                Some(start_snapshotter(
                    &config, &shared, &venue, journal_id, &report, last_crc, digests,
                )?)
            }
            _ => None,
        };
        let sequencer = Sequencer {
            config: config.clone(),
            writer,
            replica,
            next_seq: report.last_seq.next(),
            last_ts: bourse_core::TimestampNs::ZERO,
            intake: intake_receiver,
            to_applier,
            recycled,
            shared: Arc::clone(&shared),
        };
        // 4. the applier: `Venue::apply`, outcomes released to each session's sink once
        //    durable.
        let applier = Applier {
            config,
            venue,
            lookahead: Lookahead::new(),
            batches: applier_receiver,
            recycle,
            shared: Arc::clone(&shared),
            per_session: Vec::new(),
            touched: Vec::new(),
            held: VecDeque::new(),
        };
        let threads = vec![
            spawn("bourse-sequencer", move || sequencer.run())?,
            spawn("bourse-applier", move || applier.run())?,
        ];
        Ok(Engine { intake, shared, threads, snapshotter, report, cluster_status, noter })
    }

    /// Registers a producer whose outcomes go to `sink`.
    pub fn open_session(&self, sink: Arc<dyn ResultSink>) -> Session {
        let (slot, number) = self.shared.register(sink);
        Session { slot, number, intake: self.intake.clone(), shared: Arc::clone(&self.shared) }
    }

    /// Opens the tap: a session whose sink gets, besides its own outcomes, every applied
    /// command of every session, with its events, in sequence order and released like
    /// any session's (in `sync` mode: once durable). Market data and private feeds
    /// are built on it. One tap at a time: `None` while another is open; closing the
    /// session closes the tap.
    pub fn open_tap(&self, sink: Arc<dyn ResultSink>) -> Option<Session> {
        let session = self.open_session(sink);
        debug_assert_ne!(session.slot, NO_TAP, "no session has the empty tap's slot");
        self.shared
            .tap
            .compare_exchange(NO_TAP, session.slot, Ordering::AcqRel, Ordering::Acquire)
            .ok()
            .map(|_| session)
    }

    /// Runs `read` on the state after every command submitted before this call, on the
    /// applier's thread, and returns its result. `None` if the engine is gone.
    pub fn query<T: Send + 'static>(
        &self,
        read: impl FnOnce(&Exchange) -> T + Send + 'static,
    ) -> Option<T> {
        self.query_venue(move |venue| read(venue.exchange()))
    }

    /// `query` on the whole venue: the exchange and the order activity (when kept).
    pub fn query_venue<T: Send + 'static>(
        &self,
        read: impl FnOnce(&Venue) -> T + Send + 'static,
    ) -> Option<T> {
        let (reply, answer) = bounded(1);
        let query: Query = Box::new(move |venue| {
            let _ = reply.send(read(venue));
        });
        self.intake.send(Intake::Query(query)).ok()?;
        answer.recv().ok()
    }

    pub fn start_report(&self) -> &StartReport {
        &self.report
    }

    /// In a cluster: how many of this node's state digests matched the leader's, and
    /// the last command one was taken after (`docs/cluster.md`).
    pub fn digests_compared(&self) -> (u64, Seq) {
        let digests = self.shared.digests.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        (digests.compared, digests.last_compared)
    }

    /// In a cluster: the Raft node's view (leader, term, commit index, each node's
    /// progress as the leader sees it), and why it stopped if it did.
    pub fn cluster_status(&self) -> Option<ReplicaStatus> {
        self.cluster_status.as_ref().map(StatusReader::read)
    }

    /// In a cluster: what proposes the server's records (`Records`).
    pub fn record_proposer(&self) -> Option<RecordProposer> {
        self.noter.clone().map(|noter| RecordProposer { noter, shared: Arc::clone(&self.shared) })
    }

    /// What `cluster_status` reads, to keep (it outlives the engine).
    pub fn cluster_status_reader(&self) -> Option<StatusReader> {
        self.cluster_status.clone()
    }

    /// The most recent journal syncs that took `SLOW_SYNC_NS` (1 ms) or more, up to
    /// 4,096 of them, oldest first.
    pub fn slow_syncs(&self) -> Vec<SlowSync> {
        self.shared.stats.slow_syncs()
    }

    pub fn stats(&self) -> StatsSnapshot {
        self.shared.stats.snapshot()
    }

    /// How far the journal is durable, for readers that follow it (the history).
    pub fn durable_watermark(&self) -> DurableWatermark {
        DurableWatermark(Arc::clone(&self.shared))
    }

    /// Why the engine stopped taking commands, if it did.
    pub fn failure(&self) -> Option<String> {
        self.shared.failure()
    }

    /// Stops intake, sequences and applies everything already submitted, syncs, takes
    /// the shutdown snapshot (if configured) and waits for the threads. Returns the
    /// failure that stopped the engine earlier, if any.
    pub fn shutdown(mut self) -> Result<(), String> {
        self.stop_threads();
        match self.shared.failure() {
            Some(failure) => Err(failure),
            None => Ok(()),
        }
    }

    fn stop_threads(&mut self) {
        // The snapshotter stops first, so that it and the shutdown snapshot never
        // write or prune at the same time.
        if let Some((stop, thread)) = self.snapshotter.take() {
            let _ = stop.send(());
            let _ = thread.join();
        }
        self.shared.closing.store(true, Ordering::SeqCst);
        while self.shared.submitting.load(Ordering::SeqCst) > 0 {
            std::thread::yield_now();
        }
        let _ = self.intake.send(Intake::Shutdown);
        for thread in self.threads.drain(..) {
            let _ = thread.join();
        }
    }
}

impl Drop for Engine {
    fn drop(&mut self) {
        self.stop_threads();
    }
}

/// Proposes records of the server above the engine (`Records`) to the cluster's log.
#[derive(Clone)]
pub struct RecordProposer {
    noter: Noter<Committed>,
    shared: Arc<Shared>,
}

impl RecordProposer {
    /// Proposes `record`. It is committed, and handed to every node's `Records`, unless
    /// this node loses its leadership first: the proposer learns which from its own
    /// `Records` (or not at all).
    pub fn propose(&self, record: &[u8]) -> Result<(), SubmitError> {
        self.shared.check_leader().map_err(|leader| SubmitError::NotLeader { leader })?;
        let mut note = Vec::with_capacity(1 + record.len());
        note.push(NOTE_KIND_RECORD);
        note.extend_from_slice(record);
        if self.noter.propose_note(note) {
            Ok(())
        } else {
            Err(SubmitError::Stopped("the cluster's node has stopped".to_string()))
        }
    }

    /// Proposes a change of the cluster's membership. It is made unless this node loses
    /// its leadership first or another change is in flight: the cluster's status
    /// (`Engine::cluster_status_reader`) shows whether it was.
    pub fn propose_membership(
        &self,
        change: bourse_cluster::MembershipChange,
    ) -> Result<(), SubmitError> {
        self.shared.check_leader().map_err(|leader| SubmitError::NotLeader { leader })?;
        if self.noter.propose_membership(change) {
            Ok(())
        } else {
            Err(SubmitError::Stopped("the cluster's node has stopped".to_string()))
        }
    }
}

impl Session {
    /// This session's number, which every outcome of its commands carries.
    pub fn number(&self) -> SessionNumber {
        self.number
    }

    /// Whether this engine takes commands now: `Ok` when it leads its cluster or is not
    /// in one; otherwise the leader it knows of (`None`: none).
    pub fn leads(&self) -> Result<(), Option<u64>> {
        self.shared.check_leader()
    }

    /// Queues `command`; its outcome comes through the session's sink, tagged with the
    /// returned correlation (this session's number and `request`, the producer's own
    /// number for it). Refused at once when the queue is full (`busy`) or the engine has
    /// stopped.
    pub fn submit(&self, command: &Command<'_>, request: u64) -> Result<Correlation, SubmitError> {
        self.shared.check_leader().map_err(|leader| SubmitError::NotLeader { leader })?;
        let payload = Payload::encode(command)?;
        let correlation = Correlation { session: self.number, request };
        let submission = Submission { slot: self.slot, correlation, payload };
        let shared = &self.shared;
        shared.submitting.fetch_add(1, Ordering::SeqCst);
        let sent = if shared.closing.load(Ordering::SeqCst) || shared.stopped.load(Ordering::SeqCst)
        {
            Err(TrySendError::Disconnected(Intake::Shutdown))
        } else {
            self.intake.try_send(Intake::Command(submission))
        };
        shared.submitting.fetch_sub(1, Ordering::SeqCst);
        match sent {
            Ok(()) => Ok(correlation),
            Err(TrySendError::Full(_)) => {
                Err(SubmitError::Busy { capacity: self.shared.queue_capacity })
            }
            Err(TrySendError::Disconnected(_)) => Err(self.stopped_error()),
        }
    }

    /// Queues `read`, to run on the applier's thread after every command submitted
    /// before it (in `sync` mode: once those are durable); it answers through whatever
    /// it captures. Refused like `submit` when the queue is full or the engine stopped
    /// (then `read` never runs).
    pub fn query(&self, read: impl FnOnce(&Venue) + Send + 'static) -> Result<(), SubmitError> {
        let shared = &self.shared;
        if shared.closing.load(Ordering::SeqCst) || shared.stopped.load(Ordering::SeqCst) {
            return Err(self.stopped_error());
        }
        match self.intake.try_send(Intake::Query(Box::new(read))) {
            Ok(()) => Ok(()),
            Err(TrySendError::Full(_)) => {
                Err(SubmitError::Busy { capacity: shared.queue_capacity })
            }
            Err(TrySendError::Disconnected(_)) => Err(self.stopped_error()),
        }
    }

    /// Opens another session on the same engine, whose outcomes go to `sink`: a
    /// gateway gives each connection its own, so that outcomes come back to the
    /// connection that sent the command without a shared table of waiters.
    ///
    /// The new session gets a number of its own, never given before, but perhaps the
    /// slot of a session that closed: outcomes of the closed session's commands still
    /// waiting for their sync then go to the new session's sink, carrying the closed
    /// session's number. A producer that opens sessions as it goes tells them apart by
    /// the whole `Correlation` (as `bourse_server::link::Lane` does), never by the
    /// request number alone.
    pub fn open_sibling(&self, sink: Arc<dyn ResultSink>) -> Session {
        let (slot, number) = self.shared.register(sink);
        Session { slot, number, intake: self.intake.clone(), shared: Arc::clone(&self.shared) }
    }

    /// Why the engine stopped taking commands, if it did.
    pub fn failure(&self) -> Option<String> {
        self.shared.failure()
    }

    /// The engine's counters (as `Engine::stats`).
    pub fn stats(&self) -> StatsSnapshot {
        self.shared.stats.snapshot()
    }

    /// Commands and queries waiting in the intake queue now.
    pub fn queue_len(&self) -> usize {
        self.intake.len()
    }

    /// The intake queue's capacity.
    pub fn queue_capacity(&self) -> usize {
        self.shared.queue_capacity
    }

    fn stopped_error(&self) -> SubmitError {
        SubmitError::Stopped(self.shared.failure().unwrap_or_else(|| "shut down".to_string()))
    }
}

impl Drop for Session {
    fn drop(&mut self) {
        self.shared.unregister(self.slot);
    }
}

fn spawn(name: &str, run: impl FnOnce() + Send + 'static) -> Result<JoinHandle<()>, StartError> {
    std::thread::Builder::new().name(name.to_string()).spawn(run).map_err(StartError::Thread)
}

type Opened = (Venue, Option<JournalWriter>, StartReport, u32);

fn open_durable(config: &EngineConfig) -> Result<Opened, StartError> {
    let recovered = recover_venue(
        &config.journal_dir(),
        &config.snapshot_dir(),
        config.exchange,
        config.track_activity,
        TailPolicy::Repair,
    )?;
    check_activity_setting(
        config,
        recovered.last_seq == Seq::ZERO && recovered.snapshot.is_none(),
    )?;
    let options =
        WriterOptions { segment_bytes: config.segment_bytes, faults: config.faults.clone() };
    let writer = JournalWriter::open_with_id(
        &config.journal_dir(),
        &recovered.journal,
        options,
        recovered.last_seq.next(),
        recovered.last_crc,
        recovered.snapshot.as_ref().map(|(_, meta)| meta.journal_id),
    )?;
    let report = StartReport {
        snapshot_seq: recovered.snapshot.as_ref().map(|(_, meta)| meta.seq),
        skipped_snapshots: recovered
            .skipped_snapshots
            .iter()
            .map(|(path, reason)| format!("{}: {reason}", path.display()))
            .collect(),
        replayed: recovered.replayed,
        last_seq: recovered.last_seq,
        torn_tail: recovered.journal.torn_tail.as_ref().map(|torn| {
            format!(
                "{} at byte {}: {} ({} bytes removed)",
                torn.path.display(),
                torn.offset,
                torn.reason,
                torn.bytes
            )
        }),
    };
    Ok((recovered.venue, Some(writer), report, recovered.last_crc))
}

/// Marks a data directory whose journal keeps the order activity: it decides which
/// orders are rejected (a remembered client id used again), so every start must agree.
pub const ACTIVITY_MARKER: &str = "order-activity";

/// A new data directory records `track_activity`; an existing one must have been made
/// with the same setting, or replaying its journal could decide differently.
fn check_activity_setting(config: &EngineConfig, fresh: bool) -> Result<(), StartError> {
    let marker = config.data_dir.join(ACTIVITY_MARKER);
    let marked = marker.exists();
    if fresh && config.track_activity && !marked {
        let note = "This data directory keeps order activity (records, fills, the client id \
                    rule); start it with order activity on.\n";
        std::fs::write(&marker, note)
            .and_then(|()| bourse_journal::segment::sync_dir(&config.data_dir))
            .map_err(|error| {
                StartError::Settings(format!("cannot write {}: {error}", marker.display()))
            })?;
        return Ok(());
    }
    if fresh && !config.track_activity && marked {
        std::fs::remove_file(&marker).map_err(|error| {
            StartError::Settings(format!("cannot remove {}: {error}", marker.display()))
        })?;
        return Ok(());
    }
    match (marked, config.track_activity) {
        (true, false) => Err(StartError::Settings(format!(
            "{} was made with order activity on (bourse serve); start it with order activity on",
            config.data_dir.display()
        ))),
        (false, true) => Err(StartError::Settings(format!(
            "{} was made without order activity (a bench or tool); bourse serve needs a data \
             directory of its own",
            config.data_dir.display()
        ))),
        _ => Ok(()),
    }
}

/// Starts this node's Raft replica over `raft/`, its committed entries going to the
/// journal (`writer`) and the applier; commands other nodes sent go to a slot of their
/// own, whose outcomes only the tap sees.
fn start_replica(
    config: &EngineConfig,
    cluster: &ClusterSettings,
    writer: JournalWriter,
    report: &StartReport,
    shared: &Arc<Shared>,
    to_applier: &Sender<ToApplier>,
) -> Result<Replica<Committed>, StartError> {
    let (foreign, _) = shared.register(Arc::new(Discard));
    let committed = Committed {
        writer,
        to_applier: to_applier.clone(),
        shared: Arc::clone(shared),
        foreign,
        last_sync: std::time::Instant::now(),
        gathered: SequencedBatch::default(),
        records: cluster.records.clone(),
        last_index: 0,
    };
    Replica::start(
        cluster.replica.clone(),
        &config.raft_dir(),
        &cluster.initial_voters,
        report.last_seq.0,
        committed,
    )
    .map_err(|error| StartError::Settings(format!("the raft node does not start: {error}")))
}

/// Starts the snapshotter on a copy of the recovered state.
fn start_snapshotter(
    config: &EngineConfig,
    shared: &Arc<Shared>,
    venue: &Venue,
    journal_id: u64,
    report: &StartReport,
    last_crc: u32,
    digests: Option<DigestPoints>,
) -> Result<(Sender<()>, JoinHandle<()>), StartError> {
    let mut state = Vec::new();
    encode_venue(venue, &mut state);
    let copy = decode_venue(&state, config.exchange, config.track_activity).map_err(|error| {
        StartError::Thread(std::io::Error::other(format!("copying the state: {error}")))
    })?;
    let (stop, stop_receiver) = bounded(1);
    let snapshotter = Snapshotter {
        config: config.clone(),
        shared: Arc::clone(shared),
        venue: copy,
        tail: JournalTail::new(&config.journal_dir(), report.last_seq.next(), last_crc),
        journal_id,
        last_seq: report.last_seq,
        last_crc,
        last_ts: venue.exchange().time_ns(),
        last_snapshot_seq: report.snapshot_seq.unwrap_or(Seq::ZERO),
        stop: stop_receiver,
        digests,
    };
    let thread = spawn("bourse-snapshotter", move || {
        run_in_background();
        snapshotter.run()
    })?;
    Ok((stop, thread))
}
