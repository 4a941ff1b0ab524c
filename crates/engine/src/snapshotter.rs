//! Periodic snapshots without pausing intake: a second copy of the state, kept a little
//! behind the engine by reading the durable journal, is what gets written.
//!
//! Because the core is deterministic, applying the journaled commands to a copy of the
//! state gives exactly the engine's state at the same sequence number. So the engine's
//! thread never stops to serialise a million orders; the snapshotter thread catches up
//! from the journal every `POLL` and, every `snapshot_every_commands` commands, writes
//! its state, then prunes old snapshots and the journal segments they alone needed.
//! The cost is a second copy of the state in memory and the CPU to apply every command
//! twice.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bourse_core::venue::Venue;
use bourse_core::{Event, Seq, TimestampNs};
use bourse_journal::tail::JournalTail;
use bourse_journal::{decode_command, JournalError, SnapshotMeta};
use crossbeam_channel::{Receiver, RecvTimeoutError};

use bourse_cluster::Noter;
use bourse_core::format::state_digest;

use crate::config::EngineConfig;
use crate::digests::encode_note;
use crate::replicated::Committed;
use crate::retention::{prune, take_snapshot_paced};
use crate::shared::Shared;

/// How often the copy catches up with the journal.
const POLL: Duration = Duration::from_millis(50);

pub(crate) struct Snapshotter {
    pub(crate) config: EngineConfig,
    pub(crate) shared: Arc<Shared>,
    pub(crate) venue: Venue,
    pub(crate) tail: JournalTail,
    pub(crate) journal_id: u64,
    /// The last command the copy includes, its crc and its timestamp.
    pub(crate) last_seq: Seq,
    pub(crate) last_crc: u32,
    pub(crate) last_ts: TimestampNs,
    pub(crate) last_snapshot_seq: Seq,
    pub(crate) stop: Receiver<()>,
    /// In a cluster: where the next digest is due, how often, and where the leader's
    /// goes (`digests`).
    pub(crate) digests: Option<DigestPoints>,
}

pub(crate) struct DigestPoints {
    pub(crate) every: u64,
    pub(crate) next: Seq,
    pub(crate) noter: Noter<Committed>,
}

impl DigestPoints {
    /// The first point after `seq`.
    pub(crate) fn after(seq: Seq, every: u64, noter: Noter<Committed>) -> DigestPoints {
        let every = every.max(1);
        DigestPoints { every, next: Seq((seq.0 / every + 1) * every), noter }
    }
}

impl Snapshotter {
    pub(crate) fn run(mut self) {
        loop {
            match self.stop.recv_timeout(POLL) {
                Err(RecvTimeoutError::Timeout) => {}
                Ok(()) | Err(RecvTimeoutError::Disconnected) => return,
            }
            if let Err(error) = self.catch_up().and_then(|()| self.snapshot_if_due()) {
                // A snapshot that cannot be taken is not a reason to stop trading: the
                // journal still holds everything. It is reported and tried again.
                eprintln!("bourse: snapshot failed (the journal is intact): {error}");
                self.shared.stats.snapshot_failures.fetch_add(1, Ordering::Relaxed);
            }
        }
    }

    /// Catches up with the durable journal, stopping at each digest point on the way.
    fn catch_up(&mut self) -> Result<(), JournalError> {
        let durable_until = self.shared.stats.durable_below().previous();
        while let Some(point) = self.digests.as_ref().map(|points| points.next) {
            if point > durable_until {
                break;
            }
            self.catch_up_to(point)?;
            self.digest_here();
        }
        self.catch_up_to(durable_until)
    }

    /// The copy's digest at a digest point: recorded, and proposed by the leader.
    fn digest_here(&mut self) {
        let Some(points) = &mut self.digests else { return };
        debug_assert_eq!(self.last_seq, points.next, "at the point");
        let seq = points.next;
        points.next = Seq(seq.0 + points.every);
        let digest = state_digest(self.venue.exchange());
        if self.shared.check_leader().is_ok() {
            points.noter.propose_note(encode_note(seq, &digest));
        }
        self.shared.check_digest(|book| book.record_own(seq, digest));
    }

    fn catch_up_to(&mut self, durable_until: Seq) -> Result<(), JournalError> {
        // The journal's durable records; the copy is never ahead of them.
        debug_assert!(self.last_seq <= durable_until, "the copy is ahead of the journal");
        if durable_until <= self.last_seq {
            return Ok(());
        }
        let mut events: Vec<Event> = Vec::with_capacity(64);
        let mut decode_error = None;
        let venue = &mut self.venue;
        let (last_seq, last_crc, last_ts) =
            (&mut self.last_seq, &mut self.last_crc, &mut self.last_ts);
        self.tail.read_until(durable_until, |header, payload| {
            if decode_error.is_some() {
                return;
            }
            match decode_command(payload) {
                Ok(command) => {
                    // The tail hands records out in order, from the one after the copy's.
                    debug_assert_eq!(header.seq, last_seq.next());
                    venue.apply(header.seq, Some(header.ts), &command, &mut events);
                    events.clear();
                    (*last_seq, *last_crc, *last_ts) = (header.seq, header.crc, header.ts);
                }
                Err(source) => {
                    decode_error = Some(JournalError::BadPayload {
                        path: Default::default(),
                        offset: 0,
                        seq: header.seq,
                        source,
                    })
                }
            }
        })?;
        decode_error.map_or(Ok(()), Err)
    }

    fn snapshot_if_due(&mut self) -> Result<(), JournalError> {
        let every = self.config.snapshot_every_commands;
        debug_assert!(self.last_snapshot_seq <= self.last_seq, "a snapshot ahead of its copy");
        if every == 0 || self.last_seq < self.last_snapshot_seq + every {
            return Ok(());
        }
        let started = Instant::now();
        let meta = SnapshotMeta {
            journal_id: self.journal_id,
            seq: self.last_seq,
            chain_crc: self.last_crc,
            ts: self.last_ts,
        };
        let bytes = take_snapshot_paced(&self.venue, meta, &self.config.snapshot_dir())?;
        prune(
            &self.config.snapshot_dir(),
            self.config.prunable_journal_dir().as_ref().map(|(dir, from)| (dir.as_path(), *from)),
            self.config.snapshots_retained,
        )?;
        self.last_snapshot_seq = self.last_seq;
        let stats = &self.shared.stats;
        stats.snapshots.fetch_add(1, Ordering::Relaxed);
        stats.set_last_snapshot_seq(self.last_seq);
        stats.last_snapshot_bytes.store(bytes, Ordering::Relaxed);
        stats.last_snapshot_ns.store(started.elapsed().as_nanos() as u64, Ordering::Relaxed);
        Ok(())
    }
}
