use std::io;
use std::path::{Path, PathBuf};

use bourse_core::Seq;

use crate::codec::CodecError;

/// Why a journal or snapshot cannot be read or written. Every variant about the
/// journal's contents names the file and the byte offset, which `bourse journal repair`
/// takes as the place to truncate.
#[derive(Debug, thiserror::Error)]
pub enum JournalError {
    #[error("{path}: {source}")]
    Io { path: PathBuf, source: io::Error },
    #[error("{path} at byte {offset}: {reason}")]
    Damaged { path: PathBuf, offset: u64, reason: String },
    #[error("{path} at byte {offset}: sequence gap: expected record {expected}, found {found}")]
    SequenceGap { path: PathBuf, offset: u64, expected: Seq, found: Seq },
    #[error(
        "{path} at byte {offset}: chain break: record {seq} does not follow the record before it"
    )]
    ChainBreak { path: PathBuf, offset: u64, seq: Seq },
    #[error(
        "{path}: a segment of another journal (id {found:016x}, this journal is {expected:016x})"
    )]
    ForeignSegment { path: PathBuf, expected: u64, found: u64 },
    #[error("{path}: misplaced segment: {reason}")]
    MisplacedSegment { path: PathBuf, reason: String },
    #[error("{path} at byte {offset}: record {seq} holds no valid command: {source}")]
    BadPayload { path: PathBuf, offset: u64, seq: Seq, source: CodecError },
    #[error("storage failed earlier ({0}); the journal takes no more writes")]
    Stopped(String),
}

impl JournalError {
    /// A stable code for logs, tools and tests.
    pub fn code(&self) -> &'static str {
        match self {
            JournalError::Io { .. } => "io",
            JournalError::Damaged { .. } => "damaged_record",
            JournalError::SequenceGap { .. } => "sequence_gap",
            JournalError::ChainBreak { .. } => "chain_break",
            JournalError::ForeignSegment { .. } => "foreign_segment",
            JournalError::MisplacedSegment { .. } => "misplaced_segment",
            JournalError::BadPayload { .. } => "bad_payload",
            JournalError::Stopped(_) => "storage_stopped",
        }
    }

    /// The file and offset where the journal stops being valid, for errors about its
    /// contents.
    pub fn location(&self) -> Option<(&Path, u64)> {
        match self {
            JournalError::Damaged { path, offset, .. }
            | JournalError::SequenceGap { path, offset, .. }
            | JournalError::ChainBreak { path, offset, .. }
            | JournalError::BadPayload { path, offset, .. } => Some((path, *offset)),
            JournalError::ForeignSegment { path, .. }
            | JournalError::MisplacedSegment { path, .. } => Some((path, 0)),
            JournalError::Io { .. } | JournalError::Stopped(_) => None,
        }
    }

    /// Fills in where a record that does not decode lies, for errors raised by a scan's
    /// visitor, which sees only the record.
    pub fn located(self, path: &Path, offset: usize) -> JournalError {
        match self {
            JournalError::BadPayload { seq, source, .. } => JournalError::BadPayload {
                path: path.to_path_buf(),
                offset: offset as u64,
                seq,
                source,
            },
            other => other,
        }
    }

    pub fn io(path: &Path, source: io::Error) -> JournalError {
        JournalError::Io { path: path.to_path_buf(), source }
    }
}
