//! The engine as a node of a cluster (`EngineConfig::cluster`): what the Raft node
//! commits becomes the journal and the applier's batches.
//!
//! On the leader the sequencer proposes its batches to the node (`Replica`) instead of
//! writing them; every node, leader and followers alike, gets the committed entries here,
//! on the node's thread (`Committed`), in log order. Each entry's commands are written
//! to the journal with the numbers the log gave them, then handed to the applier as any
//! batch is: the entries committed in one step of the node together, in one write and
//! one hand-over (a step commits many small entries under load, and a hand-over each
//! kept the Raft thread waiting for room in the applier's queue). Their outcomes may leave at once: a committed entry is held durably by a
//! majority of nodes (each syncs its Raft log before saying it holds an entry), which is
//! the acknowledgement rule of a cluster. The journal is synced every
//! `JOURNAL_SYNC_EVERY` while entries come, and at the node's next tick once they stop,
//! for the readers that follow it (the snapshotter, the history) and so that a restart
//! replays little of the Raft log.
//!
//! A leader's own commands come back with their origins (the proposal's tag) and are
//! answered to their sessions; commands another node proposed have no session here and
//! go to the tap only. A proposal that will not be applied, or whose fate this node
//! cannot learn, is answered `Failed` with the reason (`Unanswered`).

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bourse_cluster::batch::{Batch, LogClock};
use bourse_cluster::{Application, Entry, NodeId, Unanswered};
use bourse_core::TimestampNs;
use bourse_journal::JournalWriter;
use crossbeam_channel::Sender;

use crate::config::SharedRecords;
use crate::digests::{decode_note, NOTE_KIND_RECORD};
use crate::handoff::{Origin, SequencedBatch, ToApplier};
use crate::intake::{Correlation, Failure, Released, ResultSink, SessionNumber};
use crate::shared::{now_ns, Shared, NO_LEADER};

/// Commands gathered from one step's entries before they are handed over anyway.
pub(crate) const HAND_OVER_AT: usize = 1_024;

/// How often the journal is synced while entries are committed.
pub(crate) const JOURNAL_SYNC_EVERY: Duration = Duration::from_millis(20);

/// The sink of the `foreign` slot: outcomes of commands no session here sent.
pub(crate) struct Discard;

impl ResultSink for Discard {
    fn deliver(&self, _released: Released) {}
}

/// The node's application: the journal and the applier.
pub(crate) struct Committed {
    pub(crate) writer: JournalWriter,
    pub(crate) to_applier: Sender<ToApplier>,
    pub(crate) shared: Arc<Shared>,
    /// The slot whose sink drops what it gets: where the outcomes of other nodes'
    /// commands go (the tap still gets each).
    pub(crate) foreign: u32,
    pub(crate) last_sync: Instant,
    /// The commands of the entries committed in the current step, not yet handed over.
    pub(crate) gathered: SequencedBatch,
    /// Where the server's records go (`Records`).
    pub(crate) records: Option<SharedRecords>,
    /// The last log index handed over (told to `records` at each journal sync).
    pub(crate) last_index: u64,
}

impl Committed {
    /// Syncs the journal if it has unsynced records; says how far it is durable.
    fn sync(&mut self) -> Result<(), String> {
        if self.writer.has_unsynced() {
            let started = Instant::now();
            self.writer.sync().map_err(|error| error.to_string())?;
            let took_ns = started.elapsed().as_nanos() as u64;
            self.shared.stats.record_sync(took_ns, now_ns());
        }
        self.shared.stats.set_durable_below(self.writer.next_seq());
        self.last_sync = Instant::now();
        if let Some(records) = &self.records {
            records.0.applied_through(self.last_index);
        }
        Ok(())
    }

    fn stop(&mut self, reason: &str) {
        let reason = format!("journal storage failed, the node stopped: {reason}");
        eprintln!("bourse: {reason}");
        self.shared.stop(&reason);
    }

    /// Runs `query` on the applier after every batch committed so far.
    pub(crate) fn query(&mut self, query: crate::intake::Query) {
        self.hand_over();
        let _ = self.to_applier.send(ToApplier::Query(query));
    }

    /// Writes the commands gathered since the last hand-over to the journal and hands
    /// them to the applier, as one batch.
    fn hand_over(&mut self) {
        if self.gathered.records.is_empty() {
            return;
        }
        let mut batch = std::mem::take(&mut self.gathered);
        if let Err(error) = self.writer.write(&mut batch.records) {
            self.stop(&error.to_string());
            let reason = self.shared.failure().unwrap_or_default();
            let _ = self.to_applier.send(ToApplier::Fail {
                origins: batch.origins,
                reason,
                failure: Failure::Stopped,
            });
            return;
        }
        self.shared.stats.record_batch(batch.records.len() as u64);
        let _ = self.to_applier.send(ToApplier::Batch(batch));
    }
}

impl Application for Committed {
    type Tag = Vec<Origin>;

    fn applied_at_most(&self) -> Option<u64> {
        self.records.as_ref().map(|records| records.0.applied_index())
    }

    fn install(&mut self, clock: LogClock, _state: &[u8]) {
        // Compaction is not done yet in a cluster, so no leader sends a snapshot; one
        // that arrives anyway cannot be taken up, and the node stops rather than
        // diverge.
        self.stop(&format!(
            "a leader's snapshot (items up to {}) arrived; taking one up is not supported yet",
            clock.next_seq.saturating_sub(1)
        ));
    }

    fn apply(&mut self, entry: &Entry, batch: Option<Batch<'_>>, tag: Option<Vec<Origin>>) {
        self.last_index = entry.index;
        let Some(batch) = batch else {
            // A note: the leader's digest at a point every node computes its own, or a
            // record of the server's.
            if let Some((seq, digest)) = decode_note(&entry.context) {
                self.shared.check_digest(|book| book.record_leaders(seq, digest));
            } else if let Some((&NOTE_KIND_RECORD, record)) = entry.context.split_first() {
                if let Some(records) = self.records.clone() {
                    // Commands of earlier entries first: a record follows them.
                    self.hand_over();
                    records.0.apply(entry.index, record);
                }
            }
            return;
        };
        if self.shared.stopped.load(Ordering::SeqCst) {
            self.hand_over();
            if let Some(origins) = tag {
                let reason = self.shared.failure().unwrap_or_default();
                let failure = Failure::Stopped;
                let _ = self.to_applier.send(ToApplier::Fail { origins, reason, failure });
            }
            return;
        }
        let header = batch.header;
        let ts = TimestampNs(header.ts);
        // The entries committed in one step of the node go to the journal and the
        // applier together (`advanced`): one write and one hand-over for all of them.
        let next = self.writer.next_seq().0 + self.gathered.records.len() as u64;
        let mut taken = 0usize;
        let mut skipped = 0u64;
        for (at, payload) in batch.enumerate() {
            // After a restart the journal may already hold the first of them.
            if header.first_seq + (at as u64) < next {
                skipped += 1;
                continue;
            }
            let pushed = self.gathered.records.push(ts, |out| {
                out.extend_from_slice(payload);
                Ok::<(), std::convert::Infallible>(())
            });
            if let Err(error) = pushed {
                self.stop(&format!(
                    "entry {}: a command the journal refuses: {error:?}",
                    entry.index
                ));
                return;
            }
            taken += 1;
        }
        if taken == 0 {
            return;
        }
        if header.first_seq + skipped != next {
            self.stop(&format!(
                "entry {} numbers its commands from {}, the journal is at {next}",
                entry.index, header.first_seq
            ));
            return;
        }
        match tag {
            Some(origins) if skipped == 0 && origins.len() == taken => {
                self.gathered.origins.extend(origins)
            }
            _ => {
                let foreign = Origin {
                    slot: self.foreign,
                    correlation: Correlation { session: SessionNumber(0), request: 0 },
                };
                self.gathered.origins.extend(std::iter::repeat_n(foreign, taken));
            }
        }
        debug_assert_eq!(self.gathered.origins.len(), self.gathered.records.len());
        // A step that commits a backlog hands it over in parts, so that the applier
        // works on the first while the rest is written.
        if self.gathered.records.len() >= HAND_OVER_AT {
            self.hand_over();
        }
    }

    /// The end of a step of the node: what it committed goes to the journal and the
    /// applier as one batch; the journal is synced if it is due.
    fn advanced(&mut self) {
        self.hand_over();
        if self.last_sync.elapsed() >= JOURNAL_SYNC_EVERY && self.writer.has_unsynced() {
            if let Err(error) = self.sync() {
                self.stop(&error);
            }
        }
    }

    fn unanswered(&mut self, origins: Vec<Origin>, why: Unanswered) {
        // Outcomes gathered before this one go first, so that a session's answers keep
        // their order.
        self.hand_over();
        let (reason, failure) = match why {
            Unanswered::NotLeader(Some(leader)) => (
                format!("not the leader: node {} leads", leader.0),
                Failure::NotLeader { leader: Some(leader.0) },
            ),
            Unanswered::NotLeader(None) => (
                "not the leader: no leader is known".to_string(),
                Failure::NotLeader { leader: None },
            ),
            Unanswered::Lost => (
                "lost in a change of leader: not applied; send it again".to_string(),
                Failure::Lost,
            ),
            Unanswered::Unknown => (
                "the leader changed before the outcome was known: it may or may not be \
                 applied; send it again with the same client order id"
                    .to_string(),
                Failure::Unknown,
            ),
        };
        let _ = self.to_applier.send(ToApplier::Fail { origins, reason, failure });
    }

    fn leadership(&mut self, leader: Option<NodeId>, _term: u64) {
        let leader_id = leader.map_or(NO_LEADER, |leader| leader.0);
        self.shared.leader.store(leader_id, Ordering::SeqCst);
    }

    /// A journal with unsynced records is synced at the next tick at the latest, so that
    /// its readers (the snapshotter, the history) are not left behind when commands stop.
    fn tick(&mut self) {
        if self.writer.has_unsynced() && self.last_sync.elapsed() >= JOURNAL_SYNC_EVERY {
            if let Err(error) = self.sync() {
                self.stop(&error);
            }
        }
    }

    fn stopped(&mut self, failure: Option<&str>) {
        self.hand_over();
        if let Some(failure) = failure {
            self.shared.stop(failure);
        }
        if let Err(error) = self.sync() {
            self.stop(&error);
        }
        let (last_crc, journal_id) = match self.shared.failure() {
            Some(_) => (0, 0),
            None => (self.writer.last_crc(), self.writer.journal_id()),
        };
        let _ = self.to_applier.send(ToApplier::Shutdown { last_crc, journal_id });
    }
}
