//! The running engine's counters: what every stage adds to and `/metrics`, the benches
//! and the tools read (`StatsSnapshot`). Plain atomics, written with relaxed ordering
//! except the watermarks that other threads act on (`durable_below`, `applied_seq`,
//! `last_snapshot_seq`), which are `SeqCst`. Nothing here decides anything.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

use bourse_core::{Seq, TimestampNs};

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
