//! The checkpoint (`checkpoint.json` in the history's directory): what the last commit
//! made durable, and where to resume from (the replica snapshot, the candles then in
//! progress). Written last in a commit, replaced atomically: it is what makes the
//! commit count (`follower`).

use std::fs;
use std::io;
use std::path::{Path, PathBuf};

use bourse_core::Seq;
use serde::{Deserialize, Serialize};

use crate::derive::OpenCandle;
use crate::error::{io_error, HistoryError};
use crate::files::sync_dir;

/// What a commit made durable; the checkpoint file's contents.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Checkpoint {
    pub version: u32,
    pub journal_id: u64,
    /// Every command up to here has its rows in the files.
    pub committed_seq: Seq,
    /// The first command the history holds (later than 1 when it started from an
    /// engine snapshot, the journal before it being gone).
    pub first_seq: Seq,
    /// The replica snapshot to resume from: the state after `replica_seq` ...
    pub replica_seq: Seq,
    /// ... and the candles in progress then.
    pub open_candles: Vec<OpenCandle>,
    /// Rows written so far, per table (`Table::name`).
    pub rows: Vec<(String, u64)>,
}

/// 2: the index's compact layout (`index`); a version 1 history is rebuilt by
/// deleting `history/` (the journal and snapshots give it again).
pub const CHECKPOINT_VERSION: u32 = 2;

pub fn checkpoint_path(history_dir: &Path) -> PathBuf {
    history_dir.join("checkpoint.json")
}

/// The checkpoint of `history_dir`; `None` for a history that has none yet.
pub fn read_checkpoint(history_dir: &Path) -> Result<Option<Checkpoint>, HistoryError> {
    let path = checkpoint_path(history_dir);
    let bytes = match fs::read(&path) {
        Ok(bytes) => bytes,
        Err(error) if error.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(error) => return Err(HistoryError::Io(path, error)),
    };
    let checkpoint: Checkpoint = serde_json::from_slice(&bytes).map_err(|error| {
        HistoryError::Damaged(format!("{} does not read back: {error}", path.display()))
    })?;
    if checkpoint.version != CHECKPOINT_VERSION {
        return Err(HistoryError::Damaged(format!(
            "{} has version {}, this build reads {CHECKPOINT_VERSION}",
            path.display(),
            checkpoint.version
        )));
    }
    Ok(Some(checkpoint))
}

/// Replaces the checkpoint of `history_dir` with `checkpoint`, atomically and durably.
pub fn write_checkpoint(history_dir: &Path, checkpoint: &Checkpoint) -> Result<(), HistoryError> {
    // What this build writes, resuming from a replica no later than what it commits.
    assert!(checkpoint.version == CHECKPOINT_VERSION);
    assert!(checkpoint.replica_seq <= checkpoint.committed_seq);
    let path = checkpoint_path(history_dir);
    let temporary = history_dir.join(".checkpoint.json.tmp");
    let bytes = serde_json::to_vec_pretty(checkpoint)
        .map_err(|error| HistoryError::Damaged(format!("encoding the checkpoint: {error}")))?;
    debug_assert!(
        serde_json::from_slice::<Checkpoint>(&bytes).is_ok_and(|read| read == *checkpoint),
        "a checkpoint reads back as written"
    );
    let write = || -> io::Result<()> {
        let file = fs::File::create(&temporary)?;
        io::Write::write_all(&mut &file, &bytes)?;
        file.sync_all()?;
        fs::rename(&temporary, &path)?;
        sync_dir(history_dir)
    };
    write().map_err(io_error(&path))
}
