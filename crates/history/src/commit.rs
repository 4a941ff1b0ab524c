//! Writing one commit: the rows of commands `range` become part files (two at a time,
//! on two threads), the index's batch, the replica snapshot when one is due and, last,
//! the checkpoint that makes the commit count (see `follower` for why that order gives
//! exactly once). A commit is sealed on the follower's thread (`CommitJob`: it owns its
//! rows) and written on its own, so the follower derives the next commit's rows
//! meanwhile; it never writes the journal.

use std::fs;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use arrow_array::RecordBatch;
use arrow_schema::ArrowError;
use bourse_core::Seq;
use bourse_journal::{write_snapshot, SnapshotMeta};

use crate::checkpoint::{write_checkpoint, Checkpoint};
use crate::derive::{Partition, Pending};
use crate::error::{io_error, HistoryError};
use crate::files::{partition_dir, write_part};
use crate::index::Index;
use crate::stats::HistoryStats;
use crate::tables::{
    candle_batch, ledger_batch, order_batch, settlement_batch, trade_batch, Table,
};

/// Threads a commit's part files are written on.
const WRITERS: usize = 2;

/// A sealed commit: everything it writes, owned.
pub struct CommitJob {
    pub history_dir: PathBuf,
    /// The first and the last command it covers.
    pub range: (Seq, Seq),
    pub pending: Pending,
    /// The copy of the state after `range.1`, when this commit takes a replica.
    pub replica: Option<(SnapshotMeta, Vec<u8>)>,
    /// What the checkpoint will say once everything else is durable.
    pub checkpoint: Checkpoint,
    /// The replica snapshot the previous checkpoint named: deleted once this one names
    /// a newer one.
    pub previous_replica: Seq,
    pub index: Index,
    pub stats: Arc<HistoryStats>,
}

/// What a commit wrote.
pub struct Written {
    pub checkpoint: Checkpoint,
    /// Its rows' buffers, emptied, for the commit after next.
    pub recycled: Pending,
}

pub fn replica_dir(history_dir: &Path) -> PathBuf {
    history_dir.join("replica")
}

/// One part file to write: a table's rows of one partition.
enum Part<'a> {
    Orders(Table, &'a Partition, &'a [crate::rows::OrderRow]),
    Trades(&'a Partition, &'a [crate::rows::TradeRow]),
    Ledger(&'a Partition, &'a [crate::rows::LedgerRow]),
    Candles(&'a Partition, &'a [crate::rows::CandleRow]),
    Settlements(&'a Partition, &'a [crate::rows::SettlementRow]),
}

impl Part<'_> {
    fn rows(&self) -> usize {
        match self {
            Part::Orders(_, _, rows) => rows.len(),
            Part::Trades(_, rows) => rows.len(),
            Part::Ledger(_, rows) => rows.len(),
            Part::Candles(_, rows) => rows.len(),
            Part::Settlements(_, rows) => rows.len(),
        }
    }

    fn batch(&self) -> Result<(Table, &Partition, RecordBatch), ArrowError> {
        Ok(match self {
            Part::Orders(table, partition, rows) => (*table, *partition, order_batch(rows)?),
            Part::Trades(partition, rows) => (Table::Trades, *partition, trade_batch(rows)?),
            Part::Ledger(partition, rows) => (Table::Ledger, *partition, ledger_batch(rows)?),
            Part::Candles(partition, rows) => (Table::Candles, *partition, candle_batch(rows)?),
            Part::Settlements(partition, rows) => {
                (Table::Settlements, *partition, settlement_batch(rows)?)
            }
        })
    }
}

fn parts(pending: &Pending) -> Vec<Part<'_>> {
    let mut parts = Vec::new();
    for (partition, rows) in &pending.order_events {
        parts.push(Part::Orders(Table::OrderEvents, partition, rows));
    }
    for (partition, rows) in &pending.orders {
        parts.push(Part::Orders(Table::Orders, partition, rows));
    }
    for (partition, rows) in &pending.trades {
        parts.push(Part::Trades(partition, rows));
    }
    for (partition, rows) in &pending.ledger {
        parts.push(Part::Ledger(partition, rows));
    }
    for (partition, rows) in &pending.candles {
        parts.push(Part::Candles(partition, rows));
    }
    for (partition, rows) in &pending.settlements {
        parts.push(Part::Settlements(partition, rows));
    }
    // A partition kept from an earlier commit may have no rows in this one.
    parts.retain(|part| part.rows() > 0);
    debug_assert_eq!(
        parts.iter().map(Part::rows).sum::<usize>(),
        pending.rows,
        "every row pending is in a part"
    );
    // The largest first, so that the two writers finish together.
    parts.sort_by_key(|part| std::cmp::Reverse(part.rows()));
    parts
}

impl CommitJob {
    /// Writes the commit; once this returns `Ok`, it counts.
    pub fn write(mut self) -> Result<Written, HistoryError> {
        let started = Instant::now();
        // Files and the index name a commit by its range of seqs.
        let range = self.range;
        assert!(range.0 <= range.1 && range.1 == self.checkpoint.committed_seq);
        let parts = parts(&self.pending);
        let rows = self.pending.rows as u64;
        let next = AtomicUsize::new(0);
        let outcome: Mutex<(u64, u64, Option<HistoryError>)> = Mutex::new((0, 0, None));
        let write_parts = || loop {
            let Some(part) = parts.get(next.fetch_add(1, Ordering::Relaxed)) else { return };
            let written = part
                .batch()
                .map_err(|error| HistoryError::Damaged(format!("building a batch: {error}")))
                .and_then(|(table, partition, batch)| {
                    let dir = partition_dir(&self.history_dir, table, partition);
                    write_part(&dir, range, &batch).map_err(io_error(&dir))
                });
            let mut outcome = outcome.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
            match written {
                Ok((_, bytes)) => {
                    outcome.0 += 1;
                    outcome.1 += bytes;
                }
                Err(error) => {
                    outcome.2.get_or_insert(error);
                    return;
                }
            }
        };
        let index_written = std::thread::scope(|scope| {
            for _ in 1..WRITERS {
                scope.spawn(write_parts);
            }
            // This thread writes the index's batch, then helps with the files.
            let index_written = self.index.write(&self.pending, range);
            write_parts();
            index_written
        });
        let (files, bytes, failed) =
            outcome.into_inner().unwrap_or_else(|poisoned| poisoned.into_inner());
        if let Some(error) = failed {
            return Err(error);
        }
        index_written?;
        if let Some((meta, body)) = &self.replica {
            write_snapshot(&replica_dir(&self.history_dir), *meta, body)?;
        }
        write_checkpoint(&self.history_dir, &self.checkpoint)?;
        if self.previous_replica != self.checkpoint.replica_seq {
            self.remove_replica(self.previous_replica);
        }
        let stats = &self.stats;
        stats.committed_seq.store(self.checkpoint.committed_seq.0, Ordering::SeqCst);
        stats.needed_from.store(self.checkpoint.replica_seq.next().0, Ordering::SeqCst);
        stats.commits.fetch_add(1, Ordering::Relaxed);
        stats.rows.fetch_add(rows, Ordering::Relaxed);
        stats.files.fetch_add(files, Ordering::Relaxed);
        stats.bytes.fetch_add(bytes, Ordering::Relaxed);
        stats.last_commit_ns.store(started.elapsed().as_nanos() as u64, Ordering::Relaxed);
        self.pending.recycle();
        Ok(Written { checkpoint: self.checkpoint, recycled: self.pending })
    }

    /// Deletes an older replica snapshot once a checkpoint names a newer one. Failing
    /// to costs only disk space.
    fn remove_replica(&self, seq: Seq) {
        if seq == Seq::ZERO {
            return;
        }
        let path =
            bourse_journal::snapshot_file::snapshot_path(&replica_dir(&self.history_dir), seq);
        let _ = fs::remove_file(path);
    }
}
