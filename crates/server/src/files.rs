//! Small files the server keeps beside the journal (the key store, the futures
//! settings): written whole or not at all, synced before they count.

use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

/// Replaces `path` with `bytes` so that a crash leaves the old or the new file, whole;
/// readable by its owner only. On failure, the path that failed and why.
pub fn write_atomically(path: &Path, bytes: &[u8]) -> Result<(), (PathBuf, io::Error)> {
    let temporary = path.with_extension("json.tmp");
    let mut file = OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(&temporary)
        .map_err(failed(&temporary))?;
    file.write_all(bytes).and_then(|()| file.sync_all()).map_err(failed(&temporary))?;
    fs::rename(&temporary, path).map_err(failed(path))?;
    sync_parent(path)
}

/// The error of an operation on `path`.
fn failed(path: &Path) -> impl FnOnce(io::Error) -> (PathBuf, io::Error) + '_ {
    move |source| (path.to_path_buf(), source)
}

/// Syncs the directory holding `path`, so that a new or renamed file survives a crash.
pub fn sync_parent(path: &Path) -> Result<(), (PathBuf, io::Error)> {
    let parent = path.parent().unwrap_or(Path::new("."));
    File::open(parent)
        .and_then(|directory| directory.sync_all())
        .map_err(|source| (parent.to_path_buf(), source))
}
