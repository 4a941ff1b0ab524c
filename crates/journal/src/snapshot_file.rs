//! Snapshot files: the core's state at a sequence number, written atomically.
//!
//! A snapshot is written to a temporary file, synced, renamed to its final name
//! (`00000000000000012345.snapshot`, the last sequence number it covers) and the
//! directory synced, so a crash leaves either the whole new snapshot or none. Its
//! 64-byte header:
//!
//! ```text
//!  0  8  magic "BOURSESN"
//!  8  4  format version (1)
//! 12  4  crc32c of bytes 16..64
//! 16  8  journal id
//! 24  8  seq: the last command the state includes
//! 32  4  chain crc: the crc of record `seq` (the first record after it must carry it)
//! 36  4  crc32c of the body
//! 40  8  body length
//! 48  8  ts of record `seq`
//! 56  8  zeros
//! ```

use std::fs::{self, File};
use std::io::{Read, Write};
use std::path::{Path, PathBuf};

use bourse_core::{Seq, TimestampNs};

use crate::error::JournalError;
use crate::segment::sync_dir;

const MAGIC: &[u8; 8] = b"BOURSESN";
const VERSION: u32 = 1;
const HEADER_LEN: usize = 64;
const EXTENSION: &str = "snapshot";
/// Digits of the seq in a snapshot's name: every u64 fits, so names sort as seqs do.
const NAME_DIGITS: usize = 20;
const _: () = assert!(u64::MAX.ilog10() + 1 == NAME_DIGITS as u32);

/// What a snapshot covers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SnapshotMeta {
    pub journal_id: u64,
    /// The last command the state includes (`Seq::ZERO`: none).
    pub seq: Seq,
    /// The crc of record `seq`, the chain value of the record after it.
    pub chain_crc: u32,
    /// The time of record `seq` (the state's time).
    pub ts: TimestampNs,
}

/// A snapshot file that was found.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SnapshotEntry {
    pub seq: Seq,
    pub path: PathBuf,
}

pub fn snapshot_path(dir: &Path, seq: Seq) -> PathBuf {
    dir.join(format!("{:0width$}.{EXTENSION}", seq.0, width = NAME_DIGITS))
}

/// Writes `body` as the snapshot `meta` describes, atomically.
pub fn write_snapshot(
    dir: &Path,
    meta: SnapshotMeta,
    body: &[u8],
) -> Result<PathBuf, JournalError> {
    write_snapshot_paced(dir, meta, body, None)
}

/// `write_snapshot`, syncing every `pace` bytes as it goes. A snapshot written beside a
/// live journal would otherwise reach the disk in one flush of many megabytes at its
/// final sync, and every journal sync queued behind that flush would wait for it.
pub fn write_snapshot_paced(
    dir: &Path,
    meta: SnapshotMeta,
    body: &[u8],
    pace: Option<usize>,
) -> Result<PathBuf, JournalError> {
    fs::create_dir_all(dir).map_err(|error| JournalError::io(dir, error))?;
    let final_path = snapshot_path(dir, meta.seq);
    let temp_path =
        dir.join(format!("{:0width$}.{EXTENSION}.tmp", meta.seq.0, width = NAME_DIGITS));
    let header = header_bytes(meta, body);
    debug_assert_eq!(parse_header(&header), Ok((meta, body.len() as u64, crc32c::crc32c(body))));
    let written = File::create(&temp_path).and_then(|mut file| {
        file.write_all(&header)?;
        for chunk in body.chunks(pace.unwrap_or(body.len()).max(1)) {
            file.write_all(chunk)?;
            if pace.is_some() {
                file.sync_data()?;
            }
        }
        file.sync_all()
    });
    if let Err(error) = written {
        let _ = fs::remove_file(&temp_path);
        return Err(JournalError::io(&temp_path, error));
    }
    fs::rename(&temp_path, &final_path).map_err(|error| JournalError::io(&final_path, error))?;
    sync_dir(dir).map_err(|error| JournalError::io(dir, error))?;
    Ok(final_path)
}

fn header_bytes(meta: SnapshotMeta, body: &[u8]) -> [u8; HEADER_LEN] {
    let mut header = [0u8; HEADER_LEN];
    header[0..8].copy_from_slice(MAGIC);
    header[8..12].copy_from_slice(&VERSION.to_le_bytes());
    header[16..24].copy_from_slice(&meta.journal_id.to_le_bytes());
    header[24..32].copy_from_slice(&meta.seq.0.to_le_bytes());
    header[32..36].copy_from_slice(&meta.chain_crc.to_le_bytes());
    header[36..40].copy_from_slice(&crc32c::crc32c(body).to_le_bytes());
    header[40..48].copy_from_slice(&(body.len() as u64).to_le_bytes());
    header[48..56].copy_from_slice(&meta.ts.0.to_le_bytes());
    let crc = crc32c::crc32c(&header[16..]);
    header[12..16].copy_from_slice(&crc.to_le_bytes());
    header
}

/// Reads and checks a snapshot file: its header, its name and its body's checksum.
pub fn read_snapshot(path: &Path) -> Result<(SnapshotMeta, Vec<u8>), JournalError> {
    let mut bytes = Vec::new();
    File::open(path)
        .and_then(|mut file| file.read_to_end(&mut bytes))
        .map_err(|error| JournalError::io(path, error))?;
    let bad = |reason: &str| JournalError::Damaged {
        path: path.to_path_buf(),
        offset: 0,
        reason: format!("snapshot: {reason}"),
    };
    let header = bytes.get(..HEADER_LEN).ok_or_else(|| bad("shorter than its header"))?;
    let (meta, body_len, body_crc) = parse_header(header).map_err(bad)?;
    let body = &bytes[HEADER_LEN..];
    if body_len != body.len() as u64 {
        return Err(bad("the body is not as long as the header says"));
    }
    if body_crc != crc32c::crc32c(body) {
        return Err(bad("the body's checksum does not match"));
    }
    if snapshot_path(path.parent().unwrap_or(Path::new("")), meta.seq).file_name()
        != path.file_name()
    {
        return Err(bad("its name does not match the sequence number it covers"));
    }
    bytes.drain(..HEADER_LEN);
    Ok((meta, bytes))
}

/// A header's fields (what it covers, the body's length and crc), or why it is none.
fn parse_header(header: &[u8]) -> Result<(SnapshotMeta, u64, u32), &'static str> {
    let word = |start: usize, len: usize| {
        let mut value = [0u8; 8];
        value[..len].copy_from_slice(&header[start..start + len]);
        u64::from_le_bytes(value)
    };
    if header.len() != HEADER_LEN || &header[0..8] != MAGIC || word(8, 4) != u64::from(VERSION) {
        return Err("not a Bourse snapshot of format version 1");
    }
    if word(12, 4) != u64::from(crc32c::crc32c(&header[16..])) {
        return Err("the header's checksum does not match");
    }
    let meta = SnapshotMeta {
        journal_id: word(16, 8),
        seq: Seq(word(24, 8)),
        chain_crc: word(32, 4) as u32,
        ts: TimestampNs(word(48, 8)),
    };
    Ok((meta, word(40, 8), word(36, 4) as u32))
}

/// The snapshots of `dir`, newest (highest seq) first. Leftover temporary files are
/// not snapshots.
pub fn list_snapshots(dir: &Path) -> Result<Vec<SnapshotEntry>, JournalError> {
    let mut entries = Vec::new();
    let listing = match fs::read_dir(dir) {
        Ok(listing) => listing,
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => return Ok(entries),
        Err(error) => return Err(JournalError::io(dir, error)),
    };
    for entry in listing {
        let path = entry.map_err(|error| JournalError::io(dir, error))?.path();
        if path.extension().and_then(|extension| extension.to_str()) != Some(EXTENSION) {
            continue;
        }
        let seq = path.file_stem().and_then(|stem| stem.to_str()).and_then(|stem| {
            (stem.len() == NAME_DIGITS).then(|| stem.parse::<u64>().ok()).flatten()
        });
        if let Some(seq) = seq {
            entries.push(SnapshotEntry { seq: Seq(seq), path });
        }
    }
    entries.sort_by_key(|entry| std::cmp::Reverse(entry.seq));
    Ok(entries)
}

/// Removes leftover temporary files of snapshots whose writing was cut short.
pub fn remove_temporary_snapshots(dir: &Path) -> Result<usize, JournalError> {
    let mut removed = 0;
    let Ok(listing) = fs::read_dir(dir) else { return Ok(0) };
    for entry in listing {
        let path = entry.map_err(|error| JournalError::io(dir, error))?.path();
        if path.to_str().is_some_and(|name| name.ends_with(".snapshot.tmp")) {
            fs::remove_file(&path).map_err(|error| JournalError::io(&path, error))?;
            removed += 1;
        }
    }
    Ok(removed)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn meta(seq: u64) -> SnapshotMeta {
        SnapshotMeta { journal_id: 5, seq: Seq(seq), chain_crc: 99, ts: TimestampNs(1_700_000_000) }
    }

    #[test]
    fn a_snapshot_reads_back_and_lists_newest_first() {
        let dir = tempfile::tempdir().unwrap();
        write_snapshot(dir.path(), meta(10), b"ten").unwrap();
        let path = write_snapshot(dir.path(), meta(200), b"two hundred").unwrap();
        let (read_meta, body) = read_snapshot(&path).unwrap();
        assert_eq!((read_meta, body.as_slice()), (meta(200), &b"two hundred"[..]));
        let seqs: Vec<u64> = list_snapshots(dir.path()).unwrap().iter().map(|s| s.seq.0).collect();
        assert_eq!(seqs, vec![200, 10]);
    }

    #[test]
    fn any_damaged_byte_or_a_renamed_file_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let path = write_snapshot(dir.path(), meta(7), b"state bytes").unwrap();
        let good = fs::read(&path).unwrap();
        for index in 0..good.len() {
            let mut damaged = good.clone();
            damaged[index] ^= 0x01;
            fs::write(&path, &damaged).unwrap();
            assert!(read_snapshot(&path).is_err(), "flip at byte {index} went unnoticed");
        }
        fs::write(&path, &good[..good.len() - 1]).unwrap();
        assert!(read_snapshot(&path).is_err());
        let renamed = snapshot_path(dir.path(), Seq(8));
        fs::write(&renamed, &good).unwrap();
        assert!(read_snapshot(&renamed).is_err());
    }
}
