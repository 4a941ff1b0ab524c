//! What the pipeline's threads share: the sessions' sinks (by slot), the tap's slot,
//! the stop and shutdown flags, the first failure, the counters (`stats`), and the
//! clock the sequencer stamps commands with. Below the stages: `sequencer`, `applier`
//! and `snapshotter` import it, and `pipeline`, which starts them, creates it; it
//! imports none of them.

use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Mutex, RwLock};
use std::time::{SystemTime, UNIX_EPOCH};

use bourse_core::TimestampNs;

use crate::digests::DigestBook;
use crate::intake::{SessionNumber, SharedSink};
use crate::stats::Stats;

/// `Shared::tap` when no session taps the engine. No session's slot is ever this
/// (`Shared::register` refuses to give it).
pub(crate) const NO_TAP: u32 = u32::MAX;

/// `Shared::leader` when no leader is known (a node's id is never 0).
pub(crate) const NO_LEADER: u64 = 0;

/// Wall-clock time now (0 if the clock is before the Unix epoch). The one clock of the
/// pipeline: commands' `ts`, releases' `released_ns`, slow syncs' ends.
pub(crate) fn now_ns() -> TimestampNs {
    TimestampNs(
        SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |since| since.as_nanos() as u64),
    )
}

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
    /// In a cluster: this node's id, and the leader it knows of (`NO_LEADER`: none).
    /// Commands are taken only while this node leads.
    pub(crate) node: Option<u64>,
    pub(crate) leader: AtomicU64,
    /// In a cluster: this node's digests and the leader's, until compared.
    pub(crate) digests: Mutex<DigestBook>,
    /// The number the next session opened gets: numbers are never given twice.
    next_session_number: AtomicU64,
    pub(crate) stats: Stats,
}

impl Shared {
    pub(crate) fn new(queue_capacity: usize, stats: Stats, node: Option<u64>) -> Shared {
        Shared {
            sessions: RwLock::new(Vec::new()),
            tap: AtomicU32::new(NO_TAP),
            stopped: AtomicBool::new(false),
            closing: AtomicBool::new(false),
            submitting: AtomicUsize::new(0),
            failure: Mutex::new(None),
            queue_capacity,
            node,
            leader: AtomicU64::new(NO_LEADER),
            digests: Mutex::new(DigestBook::default()),
            next_session_number: AtomicU64::new(1),
            stats,
        }
    }

    pub(crate) fn stop(&self, reason: &str) {
        let mut failure = self.failure.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        failure.get_or_insert_with(|| reason.to_string());
        self.stopped.store(true, Ordering::SeqCst);
    }

    /// In a cluster, when this node does not lead: the leader it knows of (`None`:
    /// none). `Ok` when this node takes commands (it leads, or it is not in a cluster).
    pub(crate) fn check_leader(&self) -> Result<(), Option<u64>> {
        let Some(me) = self.node else { return Ok(()) };
        match self.leader.load(Ordering::SeqCst) {
            leader if leader == me => Ok(()),
            NO_LEADER => Err(None),
            leader => Err(Some(leader)),
        }
    }

    /// Records a digest with `record` (this node's, or the leader's from the log); a
    /// difference stops the node, loudly.
    pub(crate) fn check_digest(&self, record: impl FnOnce(&mut DigestBook) -> Result<(), String>) {
        let mut digests = self.digests.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        if let Err(differs) = record(&mut digests) {
            drop(digests);
            eprintln!("bourse: STATE DIVERGED: {differs}");
            self.stop(&differs);
        }
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
