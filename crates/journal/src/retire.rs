//! Deleting large files (journal segments, snapshots) without stalling the journal.
//!
//! On a file system mounted with `discard` (ext4 on this machine), freeing a file's
//! blocks sends the device a discard for all of them at once, and the device serves
//! nothing else meanwhile: unlinking a 64 MiB segment took 17 ms, and a journal sync
//! that came during it took 14 ms. So a file is *retired* instead of removed: renamed
//! out of the way (`NAME.retired`, which no listing of segments or snapshots reads, so
//! a crash halfway leaves nothing that looks like journal or snapshot), then cut from
//! its end in 1 MiB steps with a pause after each, and only then removed. Retired files
//! a crash left behind are finished by the next `remove_retired` of their directory.

use std::fs::{self, OpenOptions};
use std::io;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// What a retired file's name ends with.
pub const RETIRED_SUFFIX: &str = ".retired";
/// Bytes freed at a time (a discard of 1 MiB takes about 0.3 ms here).
const STEP_BYTES: u64 = 1 << 20;
/// The pause after each step, so the journal's syncs get the device in between.
const PAUSE: Duration = Duration::from_millis(1);

/// Renames `path` to `NAME.retired` beside it. Durable once the caller syncs the
/// directory.
pub fn retire(path: &Path) -> io::Result<PathBuf> {
    let mut name = path.as_os_str().to_owned();
    name.push(RETIRED_SUFFIX);
    let retired = PathBuf::from(name);
    fs::rename(path, &retired)?;
    Ok(retired)
}

/// Removes every retired file of `dir`, each freed a step at a time. Returns how many.
pub fn remove_retired(dir: &Path) -> io::Result<usize> {
    let mut retired = Vec::new();
    let entries = match fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(error) if error.kind() == io::ErrorKind::NotFound => return Ok(0),
        Err(error) => return Err(error),
    };
    for entry in entries {
        let path = entry?.path();
        if path.to_str().is_some_and(|name| name.ends_with(RETIRED_SUFFIX)) {
            retired.push(path);
        }
    }
    for path in &retired {
        shrink_and_remove(path)?;
    }
    Ok(retired.len())
}

/// Cuts the file from its end, a step at a time, then removes it.
fn shrink_and_remove(path: &Path) -> io::Result<()> {
    let file = OpenOptions::new().write(true).open(path)?;
    let mut length = file.metadata()?.len();
    while length > STEP_BYTES {
        length -= STEP_BYTES;
        file.set_len(length)?;
        std::thread::sleep(PAUSE);
    }
    drop(file);
    fs::remove_file(path)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_retired_file_leaves_its_listing_at_once_and_the_disk_later() {
        let dir = tempfile::tempdir().unwrap();
        let big = dir.path().join("00000000000000000001.journal");
        fs::write(&big, vec![7u8; 3 * STEP_BYTES as usize + 12_345]).unwrap();
        let small = dir.path().join("00000000000000000009.snapshot");
        fs::write(&small, b"state").unwrap();
        let kept = dir.path().join("00000000000000000042.journal");
        fs::write(&kept, b"records").unwrap();

        let retired = retire(&big).unwrap();
        assert_eq!(retired, dir.path().join("00000000000000000001.journal.retired"));
        assert!(!big.exists());
        assert_eq!(fs::metadata(&retired).unwrap().len(), 3 * STEP_BYTES + 12_345);
        retire(&small).unwrap();

        assert_eq!(remove_retired(dir.path()).unwrap(), 2);
        let mut left: Vec<PathBuf> =
            fs::read_dir(dir.path()).unwrap().map(|entry| entry.unwrap().path()).collect();
        left.sort();
        assert_eq!(left, vec![kept]);
        assert_eq!(remove_retired(dir.path()).unwrap(), 0);
        assert_eq!(remove_retired(&dir.path().join("missing")).unwrap(), 0);
    }
}
