//! The running engine: intake queue → sequencer (batches, journal, group commit) →
//! applier (the core, on its own thread) → outcomes to each session's sink. This module
//! starts and stops the threads and owns what producers hold (`Engine`, `Session`);
//! `sequencer`, `applier` and `snapshotter` are the stages.
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
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::thread::JoinHandle;

use bourse_core::snapshot::{decode_venue, encode_venue};
use bourse_core::venue::Venue;
use bourse_core::{Command, Exchange, Lookahead, Seq, TimestampNs};
use bourse_journal::tail::JournalTail;
use bourse_journal::{JournalError, JournalWriter, TailPolicy, WriterOptions};
use crossbeam_channel::{bounded, Sender, TrySendError};

use crate::applier::Applier;
use crate::config::{Durability, EngineConfig};
use crate::intake::{
    Correlation, Intake, Payload, Query, ResultSink, SessionNumber, SharedSink, Submission,
    SubmitError,
};
use crate::recovery::{recover_venue, RecoveryError};
use crate::sequencer::Sequencer;
use crate::snapshotter::Snapshotter;

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

/// Sync durations by power of two: bucket `i` counts syncs of `2^(i-1)` to `2^i` ns, the
/// last one everything slower.
pub const SYNC_NS_BUCKETS: usize = 32;
/// Batch sizes by power of two: bucket `i` counts batches of `2^(i-1)+1` to `2^i`
/// commands, the last one everything larger.
pub const BATCH_COMMANDS_BUCKETS: usize = 24;

/// Syncs at least this slow are kept in `Engine::slow_syncs`.
pub const SLOW_SYNC_NS: u64 = 1_000_000;
/// How many slow syncs are kept (the oldest go first).
const SLOW_SYNCS_KEPT: usize = 4096;

// A slow sync is told apart in the histogram (it is below the catch-all last bucket),
// and the default batch size has a bucket of its own too.
const _: () = assert!(SLOW_SYNC_NS < 1 << (SYNC_NS_BUCKETS - 2));
const _: () =
    assert!(crate::config::BATCH_COMMANDS_MAX_DEFAULT <= 1 << (BATCH_COMMANDS_BUCKETS - 2));
const _: () = assert!(SLOW_SYNCS_KEPT > 0);

/// Counters of the running engine.
#[derive(Debug, Default)]
pub(crate) struct Stats {
    pub commands: AtomicU64,
    pub batches: AtomicU64,
    pub syncs: AtomicU64,
    /// Time spent in `fdatasync`, in total and at most once.
    pub sync_ns_total: AtomicU64,
    pub sync_ns_max: AtomicU64,
    /// Syncs by duration (`SYNC_NS_BUCKETS`).
    pub sync_ns_buckets: [AtomicU64; SYNC_NS_BUCKETS],
    /// Batches by size (`BATCH_COMMANDS_BUCKETS`).
    pub batch_commands_buckets: [AtomicU64; BATCH_COMMANDS_BUCKETS],
    /// Records below this seq are durable (in `sync` and `async` modes): read and written
    /// as a `Seq` (`durable_below`, `set_durable_below`). It only grows.
    durable_below: AtomicU64,
    /// The seq of the last command applied (`applied_seq`, `set_applied_seq`). It only
    /// grows.
    applied_seq: AtomicU64,
    pub snapshots: AtomicU64,
    pub snapshot_failures: AtomicU64,
    /// The seq of the last periodic snapshot (`last_snapshot_seq`).
    last_snapshot_seq: AtomicU64,
    pub last_snapshot_bytes: AtomicU64,
    /// How long the last periodic snapshot took to encode and write (on the
    /// snapshotter's thread; intake does not wait for it).
    pub last_snapshot_ns: AtomicU64,
    /// The most recent syncs that took `SLOW_SYNC_NS` or more, oldest first.
    slow_syncs: Mutex<VecDeque<SlowSync>>,
}

/// A journal sync that took `SLOW_SYNC_NS` or more: every command waiting for it waited
/// that long. Kept so that latency outliers can be matched with the disk's.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SlowSync {
    /// When it returned, in ns since the Unix epoch (the clock of the commands' `ts`).
    pub ended_ns: u64,
    pub took_ns: u64,
}

impl Stats {
    /// Counters at the start: the journal holds every record up to `last_seq`, durably,
    /// and the state includes them.
    pub(crate) fn starting_at(last_seq: Seq) -> Stats {
        let stats = Stats::default();
        stats.durable_below.store(last_seq.next().0, Ordering::SeqCst);
        stats.applied_seq.store(last_seq.0, Ordering::SeqCst);
        stats
    }

    /// Records below this are durable.
    pub(crate) fn durable_below(&self) -> Seq {
        Seq(self.durable_below.load(Ordering::SeqCst))
    }

    pub(crate) fn set_durable_below(&self, below: Seq) {
        let previous = self.durable_below.swap(below.0, Ordering::SeqCst);
        debug_assert!(previous <= below.0, "durability went back from {previous} to {below}");
    }

    /// The last command applied.
    pub(crate) fn applied_seq(&self) -> Seq {
        Seq(self.applied_seq.load(Ordering::SeqCst))
    }

    pub(crate) fn set_applied_seq(&self, seq: Seq) {
        let previous = self.applied_seq.swap(seq.0, Ordering::SeqCst);
        debug_assert!(previous < seq.0, "applied {seq} after {previous}");
    }

    pub(crate) fn set_last_snapshot_seq(&self, seq: Seq) {
        self.last_snapshot_seq.store(seq.0, Ordering::SeqCst);
    }

    pub(crate) fn record_batch(&self, commands: u64) {
        debug_assert!(commands > 0, "a batch holds at least one command");
        self.commands.fetch_add(commands, Ordering::Relaxed);
        self.batches.fetch_add(1, Ordering::Relaxed);
        let bucket = (64 - commands.saturating_sub(1).leading_zeros() as usize)
            .min(BATCH_COMMANDS_BUCKETS - 1);
        self.batch_commands_buckets[bucket].fetch_add(1, Ordering::Relaxed);
    }

    pub(crate) fn record_sync(&self, took_ns: u64, ended: TimestampNs) {
        self.syncs.fetch_add(1, Ordering::Relaxed);
        self.sync_ns_total.fetch_add(took_ns, Ordering::Relaxed);
        self.sync_ns_max.fetch_max(took_ns, Ordering::Relaxed);
        let bucket = (64 - took_ns.leading_zeros() as usize).min(SYNC_NS_BUCKETS - 1);
        self.sync_ns_buckets[bucket].fetch_add(1, Ordering::Relaxed);
        if took_ns >= SLOW_SYNC_NS {
            let mut slow = self.slow_syncs.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
            if slow.len() == SLOW_SYNCS_KEPT {
                slow.pop_front();
            }
            slow.push_back(SlowSync { ended_ns: ended.0, took_ns });
            debug_assert!(slow.len() <= SLOW_SYNCS_KEPT);
        }
    }

    /// The slow syncs kept, oldest first.
    pub(crate) fn slow_syncs(&self) -> Vec<SlowSync> {
        let slow = self.slow_syncs.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        slow.iter().copied().collect()
    }

    pub(crate) fn snapshot(&self) -> StatsSnapshot {
        StatsSnapshot {
            commands: self.commands.load(Ordering::Relaxed),
            batches: self.batches.load(Ordering::Relaxed),
            syncs: self.syncs.load(Ordering::Relaxed),
            sync_ns_total: self.sync_ns_total.load(Ordering::Relaxed),
            sync_ns_max: self.sync_ns_max.load(Ordering::Relaxed),
            sync_ns_buckets: std::array::from_fn(|index| {
                self.sync_ns_buckets[index].load(Ordering::Relaxed)
            }),
            batch_commands_buckets: std::array::from_fn(|index| {
                self.batch_commands_buckets[index].load(Ordering::Relaxed)
            }),
            applied_seq: self.applied_seq(),
            snapshots: self.snapshots.load(Ordering::Relaxed),
            snapshot_failures: self.snapshot_failures.load(Ordering::Relaxed),
            last_snapshot_seq: Seq(self.last_snapshot_seq.load(Ordering::SeqCst)),
            last_snapshot_bytes: self.last_snapshot_bytes.load(Ordering::Relaxed),
            last_snapshot_ns: self.last_snapshot_ns.load(Ordering::Relaxed),
        }
    }
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct StatsSnapshot {
    pub commands: u64,
    pub batches: u64,
    pub syncs: u64,
    pub sync_ns_total: u64,
    pub sync_ns_max: u64,
    /// Syncs by duration: bucket `i` counts syncs of `2^(i-1)` to `2^i` ns.
    pub sync_ns_buckets: [u64; SYNC_NS_BUCKETS],
    /// Batches by size: bucket `i` counts batches of `2^(i-1)+1` to `2^i` commands.
    pub batch_commands_buckets: [u64; BATCH_COMMANDS_BUCKETS],
    pub applied_seq: Seq,
    pub snapshots: u64,
    pub snapshot_failures: u64,
    pub last_snapshot_seq: Seq,
    pub last_snapshot_bytes: u64,
    pub last_snapshot_ns: u64,
}

impl StatsSnapshot {
    /// The sync duration below which `quantile` of the syncs fell (an upper bound: the
    /// top of its power-of-two bucket), in ns.
    pub fn sync_ns_quantile(&self, quantile: f64) -> u64 {
        let total: u64 = self.sync_ns_buckets.iter().sum();
        let wanted = (total as f64 * quantile).ceil() as u64;
        let mut seen = 0;
        for (bucket, count) in self.sync_ns_buckets.iter().enumerate() {
            seen += count;
            if seen >= wanted && *count > 0 {
                return 1u64 << bucket;
            }
        }
        0
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

/// `Shared::tap` when no session taps the engine. No session's slot is ever this
/// (`Shared::register` refuses to give it).
pub(crate) const NO_TAP: u32 = u32::MAX;

pub(crate) struct Shared {
    /// Each open session's sink, by slot. A closed session's slot is `None` and is given
    /// to the next session opened (`register`).
    pub(crate) sessions: RwLock<Vec<Option<SharedSink>>>,
    /// The slot of the session that also gets every other session's applied outcomes
    /// (`Engine::open_tap`), or `NO_TAP`.
    pub(crate) tap: AtomicU32,
    pub(crate) stopped: AtomicBool,
    /// Set when shutdown begins: no new submission is taken.
    pub(crate) closing: AtomicBool,
    /// Submissions between their check of `closing` and their send. Shutdown waits for
    /// this to reach zero before it queues its own message, so that every submission
    /// taken is sequenced (or answered) before the engine stops.
    pub(crate) submitting: AtomicUsize,
    failure: Mutex<Option<String>>,
    pub(crate) queue_capacity: usize,
    /// The number the next session opened gets: numbers are never given twice.
    next_session_number: AtomicU64,
    pub(crate) stats: Stats,
}

impl Shared {
    pub(crate) fn new(queue_capacity: usize, stats: Stats) -> Shared {
        Shared {
            sessions: RwLock::new(Vec::new()),
            tap: AtomicU32::new(NO_TAP),
            stopped: AtomicBool::new(false),
            closing: AtomicBool::new(false),
            submitting: AtomicUsize::new(0),
            failure: Mutex::new(None),
            queue_capacity,
            next_session_number: AtomicU64::new(1),
            stats,
        }
    }

    pub(crate) fn stop(&self, reason: &str) {
        let mut failure = self.failure.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        failure.get_or_insert_with(|| reason.to_string());
        self.stopped.store(true, Ordering::SeqCst);
    }

    pub(crate) fn failure(&self) -> Option<String> {
        self.failure.lock().unwrap_or_else(|poisoned| poisoned.into_inner()).clone()
    }

    /// Gives `sink` a slot (reusing a closed session's) and a session number (never
    /// reused).
    pub(crate) fn register(&self, sink: SharedSink) -> (u32, SessionNumber) {
        let number = SessionNumber(self.next_session_number.fetch_add(1, Ordering::Relaxed));
        let mut sessions = self.sessions.write().unwrap_or_else(|p| p.into_inner());
        let slot = match sessions.iter().position(Option::is_none) {
            Some(free) => {
                sessions[free] = Some(sink);
                free
            }
            None => {
                // A slot is a u32, and `NO_TAP` is no session's.
                assert!(sessions.len() < NO_TAP as usize, "more sessions than slots");
                sessions.push(Some(sink));
                sessions.len() - 1
            }
        };
        (slot as u32, number)
    }

    /// Frees `slot` (its session closed): it no longer taps, and its sink gets nothing
    /// more.
    pub(crate) fn unregister(&self, slot: u32) {
        let _ = self.tap.compare_exchange(slot, NO_TAP, Ordering::AcqRel, Ordering::Acquire);
        let mut sessions = self.sessions.write().unwrap_or_else(|p| p.into_inner());
        if let Some(entry) = sessions.get_mut(slot as usize) {
            debug_assert!(entry.is_some(), "slot {slot} freed twice");
            *entry = None;
        }
    }
}

pub struct Engine {
    intake: Sender<Intake>,
    shared: Arc<Shared>,
    threads: Vec<JoinHandle<()>>,
    snapshotter: Option<(Sender<()>, JoinHandle<()>)>,
    report: StartReport,
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
        let shared =
            Arc::new(Shared::new(config.queue_capacity, Stats::starting_at(report.last_seq)));
        // Beside the pipeline: the snapshotter, on its own copy of the state, reading the
        // durable journal.
        let snapshotter = match &writer {
            Some(writer) if config.snapshot_every_commands > 0 => Some(start_snapshotter(
                &config,
                &shared,
                &venue,
                writer.journal_id(),
                &report,
                last_crc,
            )?),
            _ => None,
        };
        // 1. intake: a bounded queue from every session to the sequencer.
        let (intake, intake_receiver) = bounded(config.queue_capacity);
        // 2. sequencer → applier: written batches (and, in `sync` mode, "durable up to"),
        //    and the batches' buffers back for reuse.
        let (to_applier, applier_receiver) = bounded(BATCHES_IN_FLIGHT);
        let (recycle, recycled) = bounded(BATCHES_RECYCLED);
        // 3. the sequencer: seq + ts, batch, write, sync (group commit).
        let sequencer = Sequencer {
            config: config.clone(),
            writer,
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
        Ok(Engine { intake, shared, threads, snapshotter, report })
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

impl Session {
    /// This session's number, which every outcome of its commands carries.
    pub fn number(&self) -> SessionNumber {
        self.number
    }

    /// Queues `command`; its outcome comes through the session's sink, tagged with the
    /// returned correlation (this session's number and `request`, the producer's own
    /// number for it). Refused at once when the queue is full (`busy`) or the engine has
    /// stopped.
    pub fn submit(&self, command: &Command<'_>, request: u64) -> Result<Correlation, SubmitError> {
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

/// Starts the snapshotter on a copy of the recovered state.
fn start_snapshotter(
    config: &EngineConfig,
    shared: &Arc<Shared>,
    venue: &Venue,
    journal_id: u64,
    report: &StartReport,
    last_crc: u32,
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
    };
    let thread = spawn("bourse-snapshotter", move || snapshotter.run())?;
    Ok((stop, thread))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn batches_are_counted_by_size_in_power_of_two_buckets() {
        let stats = Stats::default();
        for size in [1, 2, 3, 4, 5, 16_384] {
            stats.record_batch(size);
        }
        let bucket = |index: usize| stats.batch_commands_buckets[index].load(Ordering::Relaxed);
        // 1 | 2 | 3-4 | 5-8 | ... | 8,193-16,384
        assert_eq!([bucket(0), bucket(1), bucket(2), bucket(3), bucket(14)], [1, 1, 2, 1, 1]);
        assert_eq!(stats.commands.load(Ordering::Relaxed), 1 + 2 + 3 + 4 + 5 + 16_384);
        assert_eq!(stats.batches.load(Ordering::Relaxed), 6);
    }

    #[test]
    fn only_slow_syncs_are_kept_and_only_the_latest() {
        let stats = Stats::default();
        stats.record_sync(SLOW_SYNC_NS - 1, TimestampNs(10));
        stats.record_sync(SLOW_SYNC_NS, TimestampNs(20));
        let slow = stats.slow_syncs();
        assert_eq!(slow, vec![SlowSync { ended_ns: 20, took_ns: SLOW_SYNC_NS }]);
        assert_eq!(stats.syncs.load(Ordering::Relaxed), 2);
        for index in 0..SLOW_SYNCS_KEPT as u64 {
            stats.record_sync(2 * SLOW_SYNC_NS, TimestampNs(100 + index));
        }
        let slow = stats.slow_syncs();
        assert_eq!(slow.len(), SLOW_SYNCS_KEPT);
        assert_eq!(slow[0].ended_ns, 100);
        assert_eq!(slow[SLOW_SYNCS_KEPT - 1].ended_ns, 100 + SLOW_SYNCS_KEPT as u64 - 1);
    }

    #[test]
    fn watermarks_start_at_the_recovered_seq() {
        let stats = Stats::starting_at(Seq(41));
        assert_eq!((stats.durable_below(), stats.applied_seq()), (Seq(42), Seq(41)));
        stats.set_durable_below(Seq(50));
        stats.set_applied_seq(Seq(49));
        assert_eq!(stats.snapshot().applied_seq, Seq(49));
    }
}
