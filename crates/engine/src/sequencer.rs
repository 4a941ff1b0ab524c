//! The sequencer thread: takes commands from the intake queue in batches (all that is
//! waiting, up to `batch_commands_max`), stamps them with sequence numbers and the
//! time, appends each batch to the journal and hands it to the applier; in `sync` mode
//! it then syncs the batch and tells the applier when it is durable (the applier holds
//! its outcomes until then). Group commit needs no timer: a lone command is synced at once,
//! and under load commands pile up while a sync runs, so the next batch is larger. On a
//! storage failure it stops (fail-stop): nothing more is sequenced, and every command
//! it holds or still finds waiting is answered `Failed`.

use std::sync::Arc;
use std::time::Instant;

use bourse_cluster::batch::BatchWriter;
use bourse_cluster::Replica;
use bourse_core::{Seq, TimestampNs};
use bourse_journal::{JournalError, JournalWriter};
use crossbeam_channel::{Receiver, RecvTimeoutError, Sender};

use crate::config::{Durability, EngineConfig};
use crate::handoff::{Origin, SequencedBatch, ToApplier};
use crate::intake::{Failure, Intake, Query, Submission};
use crate::replicated::Committed;
use crate::shared::{now_ns, Shared};

pub(crate) struct Sequencer {
    pub(crate) config: EngineConfig,
    pub(crate) writer: Option<JournalWriter>,
    /// In a cluster: the Raft node batches are proposed to (the journal is written as
    /// they are committed, `replicated`), instead of `writer`.
    pub(crate) replica: Option<Replica<Committed>>,
    /// The seq the next command gets: one after the last one journaled.
    pub(crate) next_seq: Seq,
    /// The time the last batch was stamped with: a batch's is never earlier.
    pub(crate) last_ts: TimestampNs,
    pub(crate) intake: Receiver<Intake>,
    pub(crate) to_applier: Sender<ToApplier>,
    pub(crate) recycled: Receiver<SequencedBatch>,
    pub(crate) shared: Arc<Shared>,
}

impl Sequencer {
    pub(crate) fn run(mut self) {
        let mut last_sync = Instant::now();
        loop {
            let first = match self.next_intake(last_sync) {
                Some(Intake::Command(submission)) => submission,
                Some(Intake::Query(query)) => {
                    self.pass_query(query);
                    continue;
                }
                Some(Intake::Shutdown) | None => break,
            };
            let mut batch = self.recycled.try_recv().unwrap_or_default();
            batch.records.clear();
            batch.origins.clear();
            let control = self.fill_batch(&mut batch, first);
            if let Err(error) = self.commit(&mut batch, &mut last_sync) {
                self.fail_stop(batch.origins, &error.to_string());
                return;
            }
            match control {
                Some(Intake::Shutdown) => break,
                Some(Intake::Query(query)) => self.pass_query(query),
                _ => {}
            }
        }
        if let Some(replica) = self.replica.take() {
            // The node answers what it holds, syncs the journal and tells the applier
            // to stop (`Committed::stopped`).
            replica.stop();
            return;
        }
        let synced = self.writer.as_mut().map_or(Ok(()), JournalWriter::sync);
        match synced {
            Ok(()) => {}
            // The writer failed earlier (the timed sync of `next_intake`): `fail_stop`
            // has already answered every producer, taken the shutdown and stopped the
            // applier. Running it again would wait for a shutdown that never comes.
            Err(JournalError::Stopped(_)) => return,
            Err(error) => {
                self.fail_stop(Vec::new(), &error.to_string());
                return;
            }
        }
        let last_crc = self.writer.as_ref().map_or(0, JournalWriter::last_crc);
        let journal_id = self.writer.as_ref().map_or(0, JournalWriter::journal_id);
        let _ = self.to_applier.send(ToApplier::Shutdown { last_crc, journal_id });
    }

    /// Hands a query to the applier, after every command submitted before it (in a
    /// cluster: once the node has answered every proposal made before it).
    fn pass_query(&self, query: Query) {
        match &self.replica {
            Some(replica) => {
                replica.after_proposals(Box::new(move |committed: &mut Committed| {
                    committed.query(query)
                }));
            }
            None => {
                let _ = self.to_applier.send(ToApplier::Query(query));
            }
        }
    }

    /// The next intake message. In `async` mode with unsynced records it waits no
    /// longer than the sync interval, and syncs when that passes.
    fn next_intake(&mut self, last_sync: Instant) -> Option<Intake> {
        let Durability::Async { interval, .. } = self.config.durability else {
            return self.intake.recv().ok();
        };
        loop {
            let unsynced = self.writer.as_ref().is_some_and(JournalWriter::has_unsynced);
            if !unsynced {
                return self.intake.recv().ok();
            }
            match self.intake.recv_timeout(interval.saturating_sub(last_sync.elapsed())) {
                Ok(intake) => return Some(intake),
                Err(RecvTimeoutError::Timeout) => {
                    if let Err(error) = self.sync() {
                        self.fail_stop(Vec::new(), &error.to_string());
                        return None;
                    }
                }
                Err(RecvTimeoutError::Disconnected) => return None,
            }
        }
    }

    /// Adds `first` and whatever commands are waiting. A query or a shutdown ends the
    /// batch and is returned, to be handled once the batch is committed.
    fn fill_batch(&mut self, batch: &mut SequencedBatch, first: Submission) -> Option<Intake> {
        debug_assert!(batch.origins.is_empty() && batch.records.is_empty());
        let ts = now_ns().max(self.last_ts);
        self.last_ts = ts;
        self.add(batch, ts, first);
        while batch.origins.len() < self.config.batch_commands_max {
            match self.intake.try_recv() {
                Ok(Intake::Command(submission)) => self.add(batch, ts, submission),
                Ok(control) => return Some(control),
                Err(_) => break,
            }
        }
        debug_assert!(batch.origins.len() <= self.config.batch_commands_max.max(1));
        None
    }

    fn add(&self, batch: &mut SequencedBatch, ts: TimestampNs, submission: Submission) {
        let pushed = batch.records.push(ts, |out| {
            out.extend_from_slice(submission.payload.bytes());
            Ok::<(), std::convert::Infallible>(())
        });
        // Payloads were encoded by `Payload::encode`, which never yields an empty or
        // oversized one; a failure here is a bug, and the command must not be lost.
        debug_assert!(pushed.is_ok(), "payload refused by the batch");
        batch.origins.push(Origin::of(&submission));
        debug_assert_eq!(batch.origins.len(), batch.records.len(), "one origin per record");
    }

    /// Writes the batch and hands it to the applier. In `sync` mode the applier gets it
    /// before the sync and applies it while the disk syncs, holding its outcomes until
    /// `Durable` says the batch is on disk: the sync and the applying overlap, and
    /// neither waits for the other.
    fn commit(
        &mut self,
        batch: &mut SequencedBatch,
        last_sync: &mut Instant,
    ) -> Result<(), JournalError> {
        if let Some(replica) = &self.replica {
            // The log numbers and times the batch; its outcomes come back committed.
            let mut proposal = BatchWriter::new();
            for (_, _, payload) in batch.records.records() {
                proposal.push(payload);
            }
            replica.propose(proposal, std::mem::take(&mut batch.origins));
            return Ok(());
        }
        let stats = &self.shared.stats;
        match &mut self.writer {
            Some(writer) => {
                debug_assert_eq!(writer.next_seq(), self.next_seq, "the journal is where we are");
                writer.write(&mut batch.records)?
            }
            None => {
                batch.records.seal(self.next_seq, 0);
            }
        }
        // The batch got the seqs from `next_seq` on, in order.
        debug_assert_eq!(batch.records.first_seq(), self.next_seq);
        self.next_seq += batch.records.len() as u64;
        debug_assert!(self.writer.as_ref().is_none_or(|writer| writer.next_seq() == self.next_seq));
        stats.record_batch(batch.records.len() as u64);
        match self.config.durability {
            Durability::Sync => {
                let _ = self.to_applier.send(ToApplier::Batch(std::mem::take(batch)));
                // A failed sync leaves the batch's origins with the applier, which
                // fails its held outcomes when `fail_stop` tells it.
                self.sync()?;
                let _ = self.to_applier.send(ToApplier::Durable { below: self.next_seq });
                return Ok(());
            }
            Durability::Async { interval, commands } => {
                let unsynced = self.next_seq - stats.durable_below();
                if unsynced >= commands || last_sync.elapsed() >= interval {
                    self.sync()?;
                    *last_sync = Instant::now();
                }
            }
            Durability::None => {}
        }
        let _ = self.to_applier.send(ToApplier::Batch(std::mem::take(batch)));
        Ok(())
    }

    fn sync(&mut self) -> Result<(), JournalError> {
        if let Some(writer) = &mut self.writer {
            if writer.has_unsynced() {
                let started = Instant::now();
                writer.sync()?;
                let took_ns = started.elapsed().as_nanos() as u64;
                self.shared.stats.record_sync(took_ns, now_ns());
            }
            // Everything written is durable now, and nothing is written but what was
            // sequenced.
            debug_assert!(writer.next_seq() <= self.next_seq);
            self.shared.stats.set_durable_below(writer.next_seq());
        }
        Ok(())
    }

    /// Fail-stop: nothing more is sequenced or released. The commands of the failed
    /// batch and every command still waiting get a `Failed` outcome; later submissions
    /// are refused.
    fn fail_stop(&mut self, origins: Vec<Origin>, reason: &str) {
        let reason = format!("journal storage failed, intake stopped: {reason}");
        eprintln!("bourse: {reason}");
        self.shared.stop(&reason);
        // At once, even with no origins: the applier also fails the outcomes it holds
        // for a batch whose sync never completed.
        let _ = self.to_applier.send(ToApplier::Fail {
            origins,
            reason: reason.clone(),
            failure: Failure::Stopped,
        });
        let mut origins = Vec::new();
        loop {
            while let Ok(intake) = self.intake.try_recv() {
                match intake {
                    Intake::Command(submission) => origins.push(Origin::of(&submission)),
                    // The state is still there to read (it includes commands that were
                    // never released; a reader after a failure should know that).
                    Intake::Query(query) => {
                        let _ = self.to_applier.send(ToApplier::Query(query));
                    }
                    Intake::Shutdown => {
                        let _ = self.to_applier.send(ToApplier::Fail {
                            origins,
                            reason,
                            failure: Failure::Stopped,
                        });
                        let _ = self
                            .to_applier
                            .send(ToApplier::Shutdown { last_crc: 0, journal_id: 0 });
                        return;
                    }
                }
            }
            let failed = std::mem::take(&mut origins);
            if !failed.is_empty() {
                let _ = self.to_applier.send(ToApplier::Fail {
                    origins: failed,
                    reason: reason.clone(),
                    failure: Failure::Stopped,
                });
            }
            // Keep answering producers that raced the stop flag until shutdown.
            match self.intake.recv() {
                Ok(Intake::Command(submission)) => origins.push(Origin::of(&submission)),
                Ok(Intake::Query(query)) => {
                    let _ = self.to_applier.send(ToApplier::Query(query));
                }
                Ok(Intake::Shutdown) | Err(_) => {
                    let _ =
                        self.to_applier.send(ToApplier::Shutdown { last_crc: 0, journal_id: 0 });
                    return;
                }
            }
        }
    }
}
