//! Segment files: the journal is a directory of append-only files named by the sequence
//! number of their first record (`00000000000000000001.journal`), each opening with a
//! 64-byte header:
//!
//! ```text
//!  0  8  magic "BOURSEJL"
//!  8  4  format version (1)
//! 12  4  crc32c of bytes 16..64
//! 16  8  journal id: drawn when the journal is created; every segment carries it
//! 24  8  first_seq: the sequence number of the segment's first record
//! 32  4  prev_crc: the crc of the record before first_seq (0 for a new journal)
//! 36 28  zeros
//! ```
//!
//! A segment from another journal (its id), from another place (its first_seq against
//! its name and its predecessor) or from another time (its prev_crc) is refused.

use std::fs::{self, File, OpenOptions};
use std::io;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

use bourse_core::Seq;

pub const SEGMENT_HEADER_LEN: usize = 64;
// The header's fields (up to byte 36) fit, and records after it start aligned.
const _: () = assert!(36 <= SEGMENT_HEADER_LEN);
const _: () = assert!(SEGMENT_HEADER_LEN.is_multiple_of(crate::record::ALIGN));
const MAGIC: &[u8; 8] = b"BOURSEJL";
const VERSION: u32 = 1;
const EXTENSION: &str = "journal";

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SegmentHeader {
    pub journal_id: u64,
    pub first_seq: Seq,
    pub prev_crc: u32,
}

impl SegmentHeader {
    pub fn to_bytes(&self) -> [u8; SEGMENT_HEADER_LEN] {
        let mut bytes = [0u8; SEGMENT_HEADER_LEN];
        bytes[0..8].copy_from_slice(MAGIC);
        bytes[8..12].copy_from_slice(&VERSION.to_le_bytes());
        bytes[16..24].copy_from_slice(&self.journal_id.to_le_bytes());
        bytes[24..32].copy_from_slice(&self.first_seq.0.to_le_bytes());
        bytes[32..36].copy_from_slice(&self.prev_crc.to_le_bytes());
        let crc = crc32c::crc32c(&bytes[16..]);
        bytes[12..16].copy_from_slice(&crc.to_le_bytes());
        debug_assert_eq!(SegmentHeader::parse(&bytes), Ok(*self), "a header reads back");
        bytes
    }

    /// The header at the start of `bytes`, or why there is none.
    pub fn parse(bytes: &[u8]) -> Result<SegmentHeader, &'static str> {
        let Some(header) = bytes.get(..SEGMENT_HEADER_LEN) else {
            return Err("the file is shorter than a segment header");
        };
        if header.iter().all(|&byte| byte == 0) {
            return Err("the segment header was never written");
        }
        if &header[0..8] != MAGIC {
            return Err("not a Bourse journal segment (bad magic)");
        }
        let word = |range: std::ops::Range<usize>| {
            let mut value = [0u8; 8];
            value[..range.len()].copy_from_slice(&header[range]);
            u64::from_le_bytes(value)
        };
        if word(8..12) != u64::from(VERSION) {
            return Err("an unsupported segment format version");
        }
        if word(12..16) != u64::from(crc32c::crc32c(&header[16..])) {
            return Err("the segment header's checksum does not match");
        }
        Ok(SegmentHeader {
            journal_id: word(16..24),
            first_seq: Seq(word(24..32)),
            prev_crc: word(32..36) as u32,
        })
    }
}

/// The file name of the segment whose first record is `first_seq`.
pub fn segment_path(dir: &Path, first_seq: Seq) -> PathBuf {
    dir.join(format!("{:020}.{EXTENSION}", first_seq.0))
}

/// The segments of `dir`, ordered by the first sequence number in their names. Files
/// that do not look like segments are left alone.
pub fn list_segments(dir: &Path) -> io::Result<Vec<(Seq, PathBuf)>> {
    let mut segments = Vec::new();
    let entries = match fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(error) if error.kind() == io::ErrorKind::NotFound => return Ok(segments),
        Err(error) => return Err(error),
    };
    for entry in entries {
        let path = entry?.path();
        if path.extension().and_then(|extension| extension.to_str()) != Some(EXTENSION) {
            continue;
        }
        let first_seq = path.file_stem().and_then(|stem| stem.to_str()).and_then(|stem| {
            (stem.len() == 20 && stem.bytes().all(|byte| byte.is_ascii_digit()))
                .then(|| stem.parse::<u64>().ok())
                .flatten()
        });
        if let Some(first_seq) = first_seq {
            segments.push((Seq(first_seq), path));
        }
    }
    segments.sort();
    Ok(segments)
}

/// Creates a segment: the file with its space reserved (`preallocate_bytes`, zeros),
/// its header written and synced, and the directory synced so the file survives a
/// crash. Fails if the file exists.
pub fn create_segment(
    dir: &Path,
    header: SegmentHeader,
    preallocate_bytes: u64,
) -> io::Result<(PathBuf, File)> {
    let path = segment_path(dir, header.first_seq);
    let file = OpenOptions::new().read(true).write(true).create_new(true).open(&path)?;
    let created = preallocate(&file, preallocate_bytes)
        .and_then(|()| file.write_all_at(&header.to_bytes(), 0))
        .and_then(|()| file.sync_all())
        .and_then(|()| sync_dir(dir));
    match created {
        Ok(()) => Ok((path, file)),
        Err(error) => {
            // A segment that could not be set up holds no record; leaving it would only
            // make the next start refuse a headerless file in the middle.
            let _ = fs::remove_file(&path);
            Err(error)
        }
    }
}

/// The file name of the spare segment: the next segment's file, made ahead of time and
/// renamed into place when the journal rolls.
pub const SPARE_NAME: &str = "spare-segment.prealloc";

/// What the spare's zero-filling does next (asked before each step).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ZeroStep {
    /// Write the next step now.
    Write,
    /// Not now: ask again after a short pause.
    Wait,
    /// Stop: the file is used as it is.
    Stop,
}

/// Zero-filling while the journal runs: 256 KiB steps, each synced, each written only
/// when `gate` says so. A journal sync that meets a step waits for it (the disk's cache
/// flush persists both), so steps are small and the gate lets one through only while
/// the journal is quiet (`writer`).
const PACED_STEP: usize = 256 << 10;
const PACED_WAIT: std::time::Duration = std::time::Duration::from_micros(500);
/// Zero-filling with nothing else running (a new journal's first segment).
const UNPACED_STEP: usize = 1 << 20;

/// Makes the spare segment file: `bytes` reserved at once (`fallocate`, so it can be
/// installed whenever the journal rolls, and a full disk shows here), then overwritten
/// with zeros from the front. Written zeros (rather than `fallocate`'s unwritten
/// extents) spare each later `fdatasync` the conversion of extents, which measured
/// about 40% of its median here. `gate` paces the zeros (see `ZeroStep`); `None`
/// writes them all at once, for a journal that is not running yet. The file is synced
/// (data, size and directory entry) however far the zeros got.
pub fn prepare_spare(
    dir: &Path,
    bytes: u64,
    mut gate: Option<&mut dyn FnMut() -> ZeroStep>,
) -> io::Result<(PathBuf, File)> {
    let path = dir.join(SPARE_NAME);
    let file = OpenOptions::new().read(true).write(true).create(true).truncate(true).open(&path)?;
    preallocate(&file, bytes)?;
    file.sync_all()?;
    sync_dir(dir)?;
    let step = if gate.is_some() { PACED_STEP } else { UNPACED_STEP };
    let zeros = vec![0u8; step];
    let mut offset = 0u64;
    // Each step writes at least one byte (`bytes > offset`), so the loop ends.
    while offset < bytes {
        match gate.as_mut().map_or(ZeroStep::Write, |gate| gate()) {
            ZeroStep::Stop => break,
            ZeroStep::Wait => {
                std::thread::sleep(PACED_WAIT);
                continue;
            }
            ZeroStep::Write => {}
        }
        let length = (bytes - offset).min(step as u64) as usize;
        debug_assert!(length > 0 && length <= zeros.len());
        file.write_all_at(&zeros[..length], offset)?;
        offset += length as u64;
        if gate.is_some() {
            file.sync_data()?;
        }
    }
    file.sync_data()?;
    Ok((path, file))
}

/// Turns the prepared spare into the segment `header` describes: the header written,
/// the file renamed to its segment name, the directory synced. The header reaches the
/// disk with the first batch's sync (the same file); a crash before that leaves a last
/// segment without a valid header and without records, which recovery deletes.
pub fn install_spare(
    dir: &Path,
    spare: (PathBuf, File),
    header: SegmentHeader,
) -> io::Result<(PathBuf, File)> {
    let (spare_path, file) = spare;
    let path = segment_path(dir, header.first_seq);
    file.write_all_at(&header.to_bytes(), 0)?;
    fs::rename(&spare_path, &path)?;
    sync_dir(dir)?;
    Ok((path, file))
}

/// Reserves `bytes` for `file` so that appends need no allocation (and a full disk shows
/// at segment creation, not in the middle of a batch). File systems without fallocate
/// get a plain file.
pub fn preallocate(file: &File, bytes: u64) -> io::Result<()> {
    use std::os::fd::AsRawFd;
    if bytes == 0 {
        return Ok(());
    }
    let length = libc::off_t::try_from(bytes)
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "segment size too large"))?;
    // SAFETY: posix_fallocate only reads the descriptor and the two integers.
    let status = unsafe { libc::posix_fallocate(file.as_raw_fd(), 0, length) };
    match status {
        0 => Ok(()),
        libc::EOPNOTSUPP | libc::EINVAL => Ok(()),
        code => Err(io::Error::from_raw_os_error(code)),
    }
}

/// Makes a directory's entries (created, renamed or removed files) durable.
pub fn sync_dir(dir: &Path) -> io::Result<()> {
    File::open(dir)?.sync_all()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_header_reads_back_and_any_damage_is_seen() {
        let header = SegmentHeader { journal_id: 77, first_seq: Seq(1234), prev_crc: 0xabcd };
        let bytes = header.to_bytes();
        assert_eq!(SegmentHeader::parse(&bytes), Ok(header));
        for index in 0..SEGMENT_HEADER_LEN {
            let mut damaged = bytes;
            damaged[index] ^= 0x10;
            assert!(SegmentHeader::parse(&damaged).is_err(), "byte {index}");
        }
        assert!(SegmentHeader::parse(&[0; SEGMENT_HEADER_LEN]).is_err());
        assert!(SegmentHeader::parse(&bytes[..10]).is_err());
    }

    #[test]
    fn segments_are_listed_in_sequence_order_and_strangers_ignored() {
        let dir = tempfile::tempdir().unwrap();
        for first_seq in [100, 2, 30] {
            fs::write(segment_path(dir.path(), Seq(first_seq)), b"").unwrap();
        }
        fs::write(dir.path().join("notes.txt"), b"").unwrap();
        fs::write(dir.path().join("12.journal"), b"").unwrap();
        let listed: Vec<u64> =
            list_segments(dir.path()).unwrap().into_iter().map(|(seq, _)| seq.0).collect();
        assert_eq!(listed, vec![2, 30, 100]);
    }

    #[test]
    fn a_spare_is_reserved_whole_however_far_its_zeros_got() {
        let dir = tempfile::tempdir().unwrap();
        let bytes = 3 * PACED_STEP as u64 + 4096;
        let mut steps = 0;
        let mut gate = || {
            steps += 1;
            match steps {
                1 => ZeroStep::Wait,
                2 => ZeroStep::Write,
                _ => ZeroStep::Stop,
            }
        };
        let (path, file) = prepare_spare(dir.path(), bytes, Some(&mut gate)).unwrap();
        assert_eq!(path, dir.path().join(SPARE_NAME));
        assert_eq!(file.metadata().unwrap().len(), bytes);
        assert!(fs::read(&path).unwrap().iter().all(|&byte| byte == 0));
        assert_eq!(steps, 3);

        let (_, file) = prepare_spare(dir.path(), bytes, None).unwrap();
        assert_eq!(file.metadata().unwrap().len(), bytes);
        assert!(fs::read(&path).unwrap().iter().all(|&byte| byte == 0));
    }
}
