use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use bourse_core::{ExchangeConfig, Seq};
use bourse_journal::writer::SEGMENT_BYTES_DEFAULT;
use bourse_journal::FaultSwitch;

/// `EngineConfig::queue_capacity` unless set: commands waiting to be sequenced.
pub const QUEUE_CAPACITY_DEFAULT: usize = 65_536;
/// `EngineConfig::batch_commands_max` unless set: commands per batch.
pub const BATCH_COMMANDS_MAX_DEFAULT: usize = 16_384;

// A full queue drains in a few batches, and a batch can be filled from the queue alone.
const _: () = assert!(BATCH_COMMANDS_MAX_DEFAULT <= QUEUE_CAPACITY_DEFAULT);
const _: () = assert!(BATCH_COMMANDS_MAX_DEFAULT > 0);

/// When a command's result may leave the process, against when its record is durable.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Durability {
    /// Results are released only after the batch holding their commands is synced
    /// (`fdatasync`). Nothing released is ever lost. The default.
    Sync,
    /// Results are released once the batch is written; the journal is synced every
    /// `interval` or every `commands` commands, whichever comes first. A crash of the
    /// machine (not of the process: written data is in the page cache) can lose the
    /// commands of the last `interval` whose results were already released.
    Async { interval: Duration, commands: u64 },
    /// No journal: simulations and backtests. A crash loses everything.
    None,
}

impl Durability {
    pub fn name(&self) -> &'static str {
        match self {
            Durability::Sync => "sync",
            Durability::Async { .. } => "async",
            Durability::None => "none",
        }
    }

    /// `sync`, `async` (10 ms or 10,000 commands) or `none`.
    pub fn parse(text: &str) -> Option<Durability> {
        match text {
            "sync" => Some(Durability::Sync),
            "async" => {
                Some(Durability::Async { interval: Duration::from_millis(10), commands: 10_000 })
            }
            "none" => Some(Durability::None),
            _ => None,
        }
    }
}

#[derive(Clone, Debug)]
pub struct EngineConfig {
    /// The journal goes to `data_dir/journal`, snapshots to `data_dir/snapshots`.
    pub data_dir: PathBuf,
    pub durability: Durability,
    /// Commands waiting to be sequenced, at most; a submission beyond it is refused
    /// `busy`.
    pub queue_capacity: usize,
    /// Commands per batch, at most (a batch is one write and one sync).
    pub batch_commands_max: usize,
    pub segment_bytes: u64,
    /// Take a snapshot whenever this many commands were journaled since the last one
    /// (0: never, except on shutdown).
    pub snapshot_every_commands: u64,
    /// Snapshots kept; journal segments that only the deleted ones needed are deleted.
    pub snapshots_retained: usize,
    /// Keep every journal segment, even those the retained snapshots cover (for audit,
    /// `bourse journal export` of the whole history, and the crash harness).
    pub keep_journal: bool,
    /// A reader that follows the journal on its own (the history): the first record it
    /// still needs. Segments holding that record or later ones are kept whatever the
    /// snapshots cover; 0 keeps every segment. `None`: no such reader.
    pub journal_needed_from: Option<Arc<AtomicU64>>,
    pub snapshot_on_shutdown: bool,
    pub exchange: ExchangeConfig,
    /// Also print each result's events in the replay format (for tools and tests).
    pub render_events: bool,
    /// Keep the order activity (`bourse_core::venue`): every order's record, recent
    /// fills, and the rule that a remembered client order id is not used again. A data
    /// directory is made with or without it, and keeps that (`ACTIVITY_MARKER`).
    pub track_activity: bool,
    /// Fault injection for tests: makes journal writes or syncs fail on demand.
    pub faults: Option<Arc<FaultSwitch>>,
    /// A node of a cluster (`docs/cluster.md`): commands are replicated through Raft,
    /// and an outcome leaves once a majority of nodes hold its command durably
    /// (`durability` then only says the journal exists: it is written as entries are
    /// committed, and synced in the background). `None`: one process on one disk.
    pub cluster: Option<ClusterSettings>,
}

/// How this engine takes part in a cluster.
#[derive(Clone, Debug)]
pub struct ClusterSettings {
    /// This node, its peers' addresses, the clock of its elections.
    pub replica: bourse_cluster::ReplicaConfig,
    /// The members of a new cluster (every node of the cluster file), for a node whose
    /// Raft log is still empty.
    pub initial_voters: Vec<u64>,
    /// Every this many commands, each node's state digest is compared with the
    /// leader's (`docs/cluster.md`); 0: never.
    pub digest_every: u64,
    /// The records of the server above the engine, replicated through the log beside
    /// the commands (`Records`); `None`: it has none.
    pub records: Option<SharedRecords>,
}

/// State of the server above the engine that every node must hold alike (a cluster's
/// key store), changed by records replicated through the Raft log beside the commands
/// (`Engine::record_proposer`). The engine never reads a record: it hands each
/// committed one over, in log order, on every node.
pub trait Records: Send + Sync {
    /// The last log index whose record this holds durably (0: none). After a restart,
    /// the log is handed over again from there at the latest (commands the journal
    /// already holds are skipped), so a record committed just before a crash is not
    /// lost; a record at or below this index may come again, and is to be ignored.
    fn applied_index(&self) -> u64;
    /// The record committed at log `index`.
    fn apply(&self, index: u64, record: &[u8]);
    /// Every entry up to log `index` is committed and handed over (its records
    /// applied). The owner may store `index` as its applied index now and then, so a
    /// restart need not hand the log over from an old record.
    fn applied_through(&self, index: u64);
}

/// `Records`, shared (and shown as such in `Debug`).
#[derive(Clone)]
pub struct SharedRecords(pub std::sync::Arc<dyn Records>);

impl std::fmt::Debug for SharedRecords {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(formatter, "SharedRecords(applied_index {})", self.0.applied_index())
    }
}

/// `ClusterSettings::digest_every` unless set.
pub const DIGEST_EVERY_DEFAULT: u64 = 1_000_000;

impl EngineConfig {
    pub fn new(data_dir: impl Into<PathBuf>) -> EngineConfig {
        EngineConfig {
            data_dir: data_dir.into(),
            durability: Durability::Sync,
            queue_capacity: QUEUE_CAPACITY_DEFAULT,
            batch_commands_max: BATCH_COMMANDS_MAX_DEFAULT,
            segment_bytes: SEGMENT_BYTES_DEFAULT,
            snapshot_every_commands: 10_000_000,
            snapshots_retained: 2,
            keep_journal: false,
            journal_needed_from: None,
            snapshot_on_shutdown: true,
            exchange: ExchangeConfig::default(),
            render_events: false,
            track_activity: false,
            faults: None,
            cluster: None,
        }
    }

    pub fn journal_dir(&self) -> PathBuf {
        self.data_dir.join("journal")
    }

    pub fn snapshot_dir(&self) -> PathBuf {
        self.data_dir.join("snapshots")
    }

    /// A node's Raft log (`bourse_cluster::log`).
    pub fn raft_dir(&self) -> PathBuf {
        self.data_dir.join("raft")
    }

    /// The journal directory when its covered segments may be deleted, and the first
    /// record that must stay whatever the snapshots cover (`journal_needed_from`).
    pub(crate) fn prunable_journal_dir(&self) -> Option<(PathBuf, Seq)> {
        let needed_from = match &self.journal_needed_from {
            Some(needed) => Seq(needed.load(Ordering::SeqCst)),
            None => Seq(u64::MAX),
        };
        (!self.keep_journal).then(|| (self.journal_dir(), needed_from))
    }
}
