//! Figures the follower publishes while it runs (`HistoryStats`), for `/metrics` and
//! the CLI. Atomics, shared with the commit's writer thread and with the engine (which
//! keeps the journal from `needed_from` on); nothing here decides anything.

use std::sync::atomic::AtomicU64;
use std::sync::Arc;

/// Figures the follower publishes (for `/metrics` and the CLI).
#[derive(Debug, Default)]
pub struct HistoryStats {
    pub applied_seq: AtomicU64,
    /// The engine's events the follower's copy of the state produced (every command's
    /// `accepted` or `rejected`, trades, dones, amends).
    pub events: AtomicU64,
    pub committed_seq: AtomicU64,
    pub commits: AtomicU64,
    pub rows: AtomicU64,
    pub files: AtomicU64,
    pub bytes: AtomicU64,
    pub last_commit_ns: AtomicU64,
    /// Merges of small files (`compact`), and the files they replaced.
    pub merges: AtomicU64,
    pub files_merged: AtomicU64,
    pub failures: AtomicU64,
    /// The oldest journal record the history still needs (the engine keeps segments
    /// from it on: `EngineConfig::journal_needed_from` shares it).
    pub needed_from: Arc<AtomicU64>,
}
