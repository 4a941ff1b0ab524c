//! Bourse's history: every order state, trade, balance change, candle and futures
//! settlement, long after it left the book, as Parquet files any tool reads, plus
//! lookups by id.
//!
//! It owns the `history/` directory: the tables (`files`: Hive-style partitions by
//! date and instrument, one file per commit and partition), the lookup index
//! (`index`), a copy of the state machine's state (`replica/`) and the checkpoint
//! that says which commands are in. The rows are derived (`derive`) from the durable
//! journal by a copy of the state machine (`follower`), exactly once across crashes;
//! small files are merged while the engine is quiet (`compact`), readers and merges
//! kept apart by a file lock (`files::FilesLock`).
//! It never writes the journal or the engine's snapshots and never holds up the
//! engine; SQL over the files lives in `bourse-query`, so that this crate builds
//! without a query engine.
//!
//! Modules, bottom up (each imports only modules above it in this list): `civil`,
//! `pack`, `rows`, `sample`; `tables`, `derive`, `files`, `compact`, `index`; `error`,
//! `stats`, `checkpoint`; `commit`; `follower`.

pub mod checkpoint;
pub mod civil;
pub mod commit;
pub mod compact;
pub mod derive;
pub mod error;
pub mod files;
pub mod follower;
pub mod index;
pub mod pack;
pub mod rows;
pub mod sample;
pub mod stats;
pub mod tables;

pub use checkpoint::Checkpoint;
pub use error::HistoryError;
pub use follower::{Follower, HistoryConfig, Stop};
pub use index::Index;
pub use stats::HistoryStats;
pub use tables::Table;
