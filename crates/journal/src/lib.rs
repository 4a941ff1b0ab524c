//! Bourse's journal: the durable record of every sequenced command, and the snapshots
//! that shorten recovery.
//!
//! It owns the on-disk formats (segments of checksummed, chained records; snapshot
//! files), appending with explicit syncs, reading back with the recovery decisions of
//! `docs/journal.md`, and the binary form of a command (`codec`). It never interprets
//! commands (that is the core's job) and never decides when to sync (that is the
//! sequencer's); its only thread makes the next segment's file ahead of time.

pub mod codec;
pub mod error;
pub mod record;
pub mod retire;
pub mod scan;
pub mod segment;
pub mod snapshot_file;
pub mod tail;
pub mod writer;

pub use codec::{decode_command, encode_command, CodecError};
pub use error::JournalError;
pub use record::{RecordBatch, RecordHeader};
pub use scan::{
    remove_torn_tail, scan_journal, scan_journal_placed, MappedSegments, RecordPlace, ScanReport,
    TailPolicy, TornTail,
};
pub use snapshot_file::{
    list_snapshots, read_snapshot, write_snapshot, write_snapshot_paced, SnapshotEntry,
    SnapshotMeta,
};
pub use writer::{FaultSwitch, JournalWriter, WriterOptions};
