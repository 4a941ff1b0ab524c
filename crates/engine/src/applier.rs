//! The applier thread: the core (`Venue`) and nothing else touches it. It decodes
//! each batch straight from the journal's bytes, applies it with the cache hints of the
//! commands ahead, and releases the outcomes to each session's sink in chunks.
//! `Venue::apply` returns what each outcome and the tap's book notes need beyond the
//! events (`bourse_core::Applied`), so nothing is looked up again. In `sync`
//! mode a batch arrives as soon as it is written and is applied while the disk syncs it;
//! its outcomes are held until the sequencer says the batch is durable (`Durable`), and
//! fail if it never does. Queries run here too, between batches, so they see every
//! command submitted before them (and, in `sync` mode, only durable ones: the sequencer
//! passes a query on after the sync of the batch before it). On a clean shutdown it
//! writes the final snapshot.

use std::collections::VecDeque;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use bourse_core::format::write_event;
use bourse_core::venue::Venue;
use bourse_core::{Lookahead, OrderId, Seq, TimestampNs};
use bourse_journal::{decode_command, SnapshotMeta};
use crossbeam_channel::{Receiver, Sender};

use crate::config::{Durability, EngineConfig, BATCH_COMMANDS_MAX_DEFAULT};
use crate::handoff::{SequencedBatch, ToApplier};
use crate::intake::{CommandResult, Correlation, Failure, Outcome, Released};
use crate::retention::{prune, take_snapshot};
use crate::shared::{now_ns, Shared, NO_TAP};

/// Outcomes released at a time while the applier works through a batch.
const RELEASE_CHUNK: usize = 256;
// A full default batch is released in several chunks, its first ones early.
const _: () = assert!(RELEASE_CHUNK > 0 && RELEASE_CHUNK < BATCH_COMMANDS_MAX_DEFAULT);

pub(crate) struct Applier {
    pub(crate) config: EngineConfig,
    pub(crate) venue: Venue,
    pub(crate) lookahead: Lookahead,
    pub(crate) batches: Receiver<ToApplier>,
    pub(crate) recycle: Sender<SequencedBatch>,
    pub(crate) shared: Arc<Shared>,
    /// Outcomes of the current batch not yet released, by session slot.
    pub(crate) per_session: Vec<Released>,
    /// The slots of `per_session` that hold something, each once.
    pub(crate) touched: Vec<u32>,
    /// `sync` mode: outcomes of applied batches whose records are not durable yet,
    /// oldest first.
    pub(crate) held: VecDeque<Held>,
}

/// Outcomes for one session's slot that may leave once the records below
/// `durable_below` are durable.
pub(crate) struct Held {
    durable_below: Seq,
    slot: u32,
    released: Released,
}

/// What a command's outcome says besides its events: the tap's copy carries the same.
#[derive(Clone, Copy)]
struct Stamp {
    correlation: Correlation,
    seq: Seq,
    ts: TimestampNs,
    order_id: Option<OrderId>,
}

impl Applier {
    pub(crate) fn run(mut self) {
        while let Ok(message) = self.batches.recv() {
            match message {
                ToApplier::Batch(batch) => {
                    if let Err(reason) = self.apply_batch(&batch) {
                        self.shared.stop(&reason);
                        eprintln!("bourse: {reason}");
                    }
                    self.release_or_hold(&batch);
                    let _ = self.recycle.try_send(batch);
                }
                ToApplier::Durable { below } => self.release_durable(below),
                ToApplier::Fail { origins, reason, failure } => {
                    if failure == Failure::Stopped {
                        self.fail_held(&reason);
                    }
                    for origin in origins {
                        let outcome = Outcome::Failed {
                            correlation: origin.correlation,
                            reason: reason.clone(),
                            failure,
                        };
                        pending(&mut self.per_session, &mut self.touched, origin.slot)
                            .outcomes
                            .push(outcome);
                    }
                    self.release();
                }
                ToApplier::Query(query) => query(&self.venue),
                ToApplier::Shutdown { last_crc, journal_id } => {
                    // After a clean stop the last `Durable` came before this; anything
                    // still held is from a batch whose sync never came back.
                    let reason = self.shared.failure();
                    self.fail_held(reason.as_deref().unwrap_or("the engine stopped"));
                    self.shutdown_snapshot(last_crc, journal_id);
                    return;
                }
            }
        }
    }

    fn apply_batch(&mut self, batch: &SequencedBatch) -> Result<(), String> {
        let tap = self.shared.tap.load(Ordering::Acquire);
        debug_assert_eq!(batch.records.len(), batch.origins.len(), "one origin per record");
        let mut commands = Vec::with_capacity(batch.records.len());
        let mut stamps = Vec::with_capacity(batch.records.len());
        for (seq, ts, payload) in batch.records.records() {
            let command = decode_command(payload).map_err(|error| {
                format!("record {seq} does not decode ({error}); a bug: stopping")
            })?;
            commands.push(command);
            stamps.push((seq, ts));
        }
        for (index, command) in commands.iter().enumerate() {
            self.lookahead.hint(self.venue.exchange(), &commands[index + 1..]);
            let (seq, ts) = stamps[index];
            let origin = batch.origins[index];
            let released = pending(&mut self.per_session, &mut self.touched, origin.slot);
            let events_start = released.events.len();
            let applied = self.venue.apply(seq, Some(ts), command, &mut released.events);
            let rendered_start = released.rendered.len();
            if self.config.render_events {
                for event in &released.events[events_start..] {
                    write_event(
                        &mut released.rendered,
                        self.venue.exchange(),
                        Some(command),
                        event,
                    );
                }
            }
            let stamp =
                Stamp { correlation: origin.correlation, seq, ts, order_id: applied.order_id };
            released.outcomes.push(Outcome::Applied(CommandResult {
                correlation: stamp.correlation,
                seq,
                ts,
                order_id: stamp.order_id,
                events: events_start..released.events.len(),
                rendered: rendered_start..released.rendered.len(),
            }));
            if tap != NO_TAP && tap != origin.slot {
                self.copy_to_tap(tap, origin.slot, events_start, stamp);
            }
            if tap != NO_TAP {
                if let Some(note) = self.venue.book_note(seq, &applied) {
                    pending(&mut self.per_session, &mut self.touched, tap).notes.push(note);
                }
            }
            // Releasing (or holding) in chunks rather than at the batch's end keeps a
            // large batch from delaying its first outcomes, and each release small.
            if (index + 1) % RELEASE_CHUNK == 0 {
                self.release_or_hold(batch);
            }
        }
        if let Some(&(last_seq, _)) = stamps.last() {
            // The batch's seqs follow one another from its first.
            debug_assert_eq!(last_seq, batch.records.first_seq() + (stamps.len() as u64 - 1));
            self.shared.stats.set_applied_seq(last_seq);
        }
        Ok(())
    }

    /// Gives the tap session the outcome just gathered for `origin` (its events from
    /// `events_start`), so that the tap sees every command, released like any session's.
    fn copy_to_tap(&mut self, tap: u32, origin: u32, events_start: usize, stamp: Stamp) {
        debug_assert_ne!(tap, origin, "the tap gets its own outcomes once");
        pending(&mut self.per_session, &mut self.touched, tap);
        let (origin_index, tap_index) = (origin as usize, tap as usize);
        let (from, to) = if origin_index < tap_index {
            let (low, high) = self.per_session.split_at_mut(tap_index);
            (&low[origin_index], &mut high[0])
        } else {
            let (low, high) = self.per_session.split_at_mut(origin_index);
            (&high[0], &mut low[tap_index])
        };
        let start = to.events.len();
        to.events.extend_from_slice(&from.events[events_start..]);
        to.outcomes.push(Outcome::Applied(CommandResult {
            correlation: stamp.correlation,
            seq: stamp.seq,
            ts: stamp.ts,
            order_id: stamp.order_id,
            events: start..to.events.len(),
            rendered: 0..0,
        }));
    }

    /// Hands each session its outcomes so far, or in `sync` mode sets them aside until
    /// the batch is durable.
    fn release_or_hold(&mut self, batch: &SequencedBatch) {
        // In a cluster a batch arrives committed: held durably by a majority already.
        if self.config.durability != Durability::Sync || self.config.cluster.is_some() {
            return self.release();
        }
        let durable_below = batch.records.first_seq() + batch.records.len() as u64;
        // Held outcomes stay oldest first: batches come in seq order.
        debug_assert!(self.held.back().is_none_or(|last| last.durable_below <= durable_below));
        for slot in self.touched.drain(..) {
            let released = std::mem::take(&mut self.per_session[slot as usize]);
            self.held.push_back(Held { durable_below, slot, released });
        }
    }

    /// Releases the held outcomes whose records are below `below`, now durable.
    fn release_durable(&mut self, below: Seq) {
        debug_assert!(below <= self.shared.stats.durable_below(), "released before durable");
        let sessions = self.shared.sessions.read().unwrap_or_else(|p| p.into_inner());
        while self.held.front().is_some_and(|held| held.durable_below <= below) {
            let Some(held) = self.held.pop_front() else { break };
            if let Some(Some(sink)) = sessions.get(held.slot as usize) {
                let mut released = held.released;
                released.released_ns = now_ns();
                sink.deliver(released);
            }
        }
    }

    /// The engine stopped before the held outcomes' records were known to be durable:
    /// each becomes `Failed` (its command may or may not be on disk; the client learns
    /// which after the restart).
    fn fail_held(&mut self, reason: &str) {
        for held in std::mem::take(&mut self.held) {
            let released = pending(&mut self.per_session, &mut self.touched, held.slot);
            released.outcomes.extend(held.released.outcomes.iter().map(|outcome| {
                Outcome::Failed {
                    correlation: outcome.correlation(),
                    reason: reason.to_string(),
                    failure: Failure::Stopped,
                }
            }));
        }
        self.release();
    }

    /// Hands each session its outcomes gathered so far.
    fn release(&mut self) {
        let sessions = self.shared.sessions.read().unwrap_or_else(|p| p.into_inner());
        for slot in self.touched.drain(..) {
            let mut released = std::mem::take(&mut self.per_session[slot as usize]);
            debug_assert!(!released.is_empty(), "a touched slot holds something");
            if let Some(Some(sink)) = sessions.get(slot as usize) {
                released.released_ns = now_ns();
                sink.deliver(released);
            }
        }
    }

    /// On a clean shutdown (everything journaled is synced and applied), the state is
    /// written as a snapshot so the next start replays nothing.
    fn shutdown_snapshot(&mut self, last_crc: u32, journal_id: u64) {
        if !self.config.snapshot_on_shutdown
            || self.config.durability == Durability::None
            || self.shared.stopped.load(Ordering::SeqCst)
        {
            return;
        }
        let seq = self.shared.stats.applied_seq();
        if seq == Seq::ZERO {
            return;
        }
        let meta = SnapshotMeta {
            journal_id,
            seq,
            chain_crc: last_crc,
            ts: self.venue.exchange().time_ns(),
        };
        let snapshot_dir = self.config.snapshot_dir();
        let taken = take_snapshot(&self.venue, meta, &snapshot_dir).and_then(|_| {
            prune(
                &snapshot_dir,
                self.config
                    .prunable_journal_dir()
                    .as_ref()
                    .map(|(dir, from)| (dir.as_path(), *from)),
                self.config.snapshots_retained,
            )
        });
        if let Err(error) = taken {
            eprintln!("bourse: shutdown snapshot failed (the journal is intact): {error}");
        }
    }
}

/// The release being gathered for `slot` (noted in `touched` when it starts).
fn pending<'a>(
    per_session: &'a mut Vec<Released>,
    touched: &mut Vec<u32>,
    slot: u32,
) -> &'a mut Released {
    debug_assert_ne!(slot, NO_TAP, "no session has the tap's empty slot");
    let index = slot as usize;
    if index >= per_session.len() {
        per_session.resize_with(index + 1, Released::default);
    }
    if per_session[index].is_empty() {
        touched.push(slot);
    }
    &mut per_session[index]
}
