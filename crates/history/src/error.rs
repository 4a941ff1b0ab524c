//! Why the history cannot go on (`HistoryError`). Trading never stops for it: the
//! journal keeps every command, and the history catches up once the cause is fixed.

use std::io;
use std::path::{Path, PathBuf};

use bourse_core::Seq;
use bourse_journal::JournalError;

use crate::index::IndexError;

/// Why the history cannot go on. Trading goes on regardless: the journal keeps every
/// command, and the history catches up once the cause is fixed.
#[derive(Debug)]
pub enum HistoryError {
    Io(PathBuf, io::Error),
    Journal(JournalError),
    Index(IndexError),
    /// The checkpoint or the replica snapshot does not read back.
    Damaged(String),
    /// The history was made from another journal.
    ForeignJournal {
        expected: u64,
        found: u64,
    },
    /// The journal no longer holds the records the history needs next.
    JournalGone {
        needed: Seq,
        first_held: Seq,
    },
    /// A record the journal holds does not decode (a bug).
    Record(Seq, String),
}

impl HistoryError {
    pub fn code(&self) -> &'static str {
        match self {
            HistoryError::Io(..) => "io",
            HistoryError::Journal(error) => error.code(),
            HistoryError::Index(_) => "index",
            HistoryError::Damaged(_) => "damaged",
            HistoryError::ForeignJournal { .. } => "foreign_journal",
            HistoryError::JournalGone { .. } => "journal_gone",
            HistoryError::Record(..) => "bad_record",
        }
    }
}

impl std::fmt::Display for HistoryError {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            HistoryError::Io(path, error) => write!(formatter, "{}: {error}", path.display()),
            HistoryError::Journal(error) => write!(formatter, "reading the journal: {error}"),
            HistoryError::Index(error) => write!(formatter, "{error}"),
            HistoryError::Damaged(reason) => write!(formatter, "{reason}"),
            HistoryError::ForeignJournal { expected, found } => write!(
                formatter,
                "the history was made from journal {expected:016x}, the journal here is {found:016x}: move the history directory away to start a new one"
            ),
            HistoryError::JournalGone { needed, first_held } => write!(
                formatter,
                "the history needs journal records from {needed}, the journal starts at {first_held}: records in between were pruned"
            ),
            HistoryError::Record(seq, reason) => write!(formatter, "record {seq} does not decode: {reason}"),
        }
    }
}

impl std::error::Error for HistoryError {}

impl From<JournalError> for HistoryError {
    fn from(error: JournalError) -> Self {
        HistoryError::Journal(error)
    }
}

impl From<IndexError> for HistoryError {
    fn from(error: IndexError) -> Self {
        HistoryError::Index(error)
    }
}

/// Turns an I/O error about `path` into a `HistoryError`.
pub fn io_error(path: &Path) -> impl FnOnce(io::Error) -> HistoryError + '_ {
    move |error| HistoryError::Io(path.to_path_buf(), error)
}
