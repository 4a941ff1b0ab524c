//! The Raft log as one node keeps it, and raft-rs's `Storage` over it.
//!
//! Three kinds of file, on a `Disk`:
//! - `raft-state`: the vote (term, voted-for), the commit index as last written, and the
//!   membership (`ConfState`). Replaced durably whenever the term, the vote or the
//!   membership changes; a commit index alone is not worth a sync (Raft's safety does
//!   not rest on it: the leader tells it again).
//! - `raft-snapshot`: where the log was compacted: the index and term of the last entry
//!   it replaces, the membership then, the application's state at that point, and the
//!   log's *epoch*. Replaced durably on compaction and on installing a leader's snapshot.
//! - `raft-log-<epoch>-<first index>`: segments of entries in frames
//!   (`[len u32][crc32c u32][term u64][index u64][kind u8][data][context]`), appended in
//!   index order, synced before the node acknowledges them. Installing a snapshot starts
//!   a new epoch, so segments of the log it replaced are recognised and removed even if
//!   the node dies before removing them.
//!
//! Opening reads them back: the last segment may end in a torn frame (the node died
//! while appending; nothing in it was ever acknowledged, since acknowledging waits for
//! the sync), which is cut off; a damaged frame anywhere else, or a gap in the indexes,
//! refuses to open (`LogError::Corrupt`). In memory the log keeps each entry's term and
//! place, and the newest entries whole, up to `CACHE_BYTES_DEFAULT` of them (what a
//! leader sends followers that keep up); an older entry is read back from its segment
//! when a lagging follower needs it.

use std::collections::VecDeque;

use bytes::Bytes;
use raft::eraftpb::{ConfState, Entry, EntryType, HardState, Snapshot, SnapshotMetadata};
use raft::{GetEntriesContext, RaftState, StorageError};

use crate::codec::{put_bytes, put_conf_state, put_u32, put_u64, DecodeError, Reader};
use crate::disk::Disk;

const STATE_FILE: &str = "raft-state";
const SNAPSHOT_FILE: &str = "raft-snapshot";
const SEGMENT_PREFIX: &str = "raft-log-";
const STATE_MAGIC: &[u8; 8] = b"BRSRAFT1";
const SNAPSHOT_MAGIC: &[u8; 8] = b"BRSSNAP1";
/// A frame's header: body length and checksum.
const FRAME_HEADER: usize = 8;
/// An entry's fixed fields in a frame's body: term, index, kind.
const ENTRY_FIXED: usize = 8 + 8 + 1;
/// The size a segment reaches before the next entry starts a new one.
pub const SEGMENT_BYTES_DEFAULT: u64 = 64 << 20;

#[derive(Debug, thiserror::Error)]
pub enum LogError {
    #[error("the raft log's storage failed: {0}")]
    Io(#[from] std::io::Error),
    #[error("the raft log is damaged: {0}")]
    Corrupt(String),
    #[error("the raft log was asked to {0}")]
    Misuse(String),
}

/// The newest entries' data kept in memory, at most.
pub const CACHE_BYTES_DEFAULT: usize = 32 << 20;

/// What the log keeps of each entry in memory: its term, and where its frame is (its
/// segment, by the segment's first index, its offset and length).
#[derive(Clone, Copy, Debug)]
struct Place {
    term: u64,
    segment: u64,
    offset: u64,
    len: u32,
}

/// A segment of the current epoch: its first index and its length in bytes.
#[derive(Clone, Copy, Debug)]
struct Segment {
    first_index: u64,
    len: u64,
}

pub struct RaftLog<D: Disk> {
    disk: D,
    hard_state: HardState,
    conf_state: ConfState,
    /// The compaction point (index 0: none yet) and the state there.
    snapshot: Snapshot,
    epoch: u64,
    /// Every entry after the compaction point, in index order: its term and place.
    places: VecDeque<Place>,
    /// The newest entries whole (the last `cache.len()` of them), their data at most
    /// `cache_budget` bytes.
    cache: VecDeque<Entry>,
    cache_bytes: usize,
    cache_budget: usize,
    segments: Vec<Segment>,
    /// Segments written or cut since the last sync.
    dirty: Vec<u64>,
    segment_bytes: u64,
    /// What opening found and cut off: a torn frame at the end of the last segment.
    torn_tail: Option<String>,
}

impl<D: Disk> RaftLog<D> {
    /// Opens the log on `disk`. A disk with no state yet starts a node of a new cluster
    /// whose members are `initial_voters` (empty: a node that will join one, and learn
    /// the membership from its leader's snapshot).
    pub fn open(mut disk: D, initial_voters: &[u64]) -> Result<RaftLog<D>, LogError> {
        let (snapshot, epoch) = match disk.read(SNAPSHOT_FILE)? {
            Some(bytes) => decode_snapshot_file(&bytes)
                .map_err(|error| LogError::Corrupt(format!("{SNAPSHOT_FILE}: {error}")))?,
            None => (Snapshot::default(), 0),
        };
        let (hard_state, conf_state) = match disk.read(STATE_FILE)? {
            Some(bytes) => decode_state_file(&bytes)
                .map_err(|error| LogError::Corrupt(format!("{STATE_FILE}: {error}")))?,
            None => {
                let conf_state =
                    ConfState { voters: initial_voters.to_vec(), ..Default::default() };
                let hard_state = HardState::default();
                disk.replace(STATE_FILE, &encode_state_file(&hard_state, &conf_state))?;
                (hard_state, conf_state)
            }
        };
        let mut log = RaftLog {
            disk,
            hard_state,
            conf_state,
            snapshot,
            epoch,
            places: VecDeque::new(),
            cache: VecDeque::new(),
            cache_bytes: 0,
            cache_budget: CACHE_BYTES_DEFAULT,
            segments: Vec::new(),
            dirty: Vec::new(),
            segment_bytes: SEGMENT_BYTES_DEFAULT,
            torn_tail: None,
        };
        log.read_segments()?;
        // Whatever was compacted or installed was committed.
        let snapshot_index = log.snapshot_index();
        if log.hard_state.commit < snapshot_index {
            log.hard_state.commit = snapshot_index;
        }
        log.hard_state.commit = log.hard_state.commit.min(log.last_index_now());
        log.check();
        Ok(log)
    }

    /// Segments start a new file at `bytes` (tests use small ones).
    pub fn with_segment_bytes(mut self, bytes: u64) -> RaftLog<D> {
        self.segment_bytes = bytes.max(1);
        self
    }

    /// Keeps at most `bytes` of the newest entries' data in memory (tests use little, so
    /// that entries are read back from disk).
    pub fn with_cache_bytes(mut self, bytes: usize) -> RaftLog<D> {
        self.cache_budget = bytes;
        self.trim_cache();
        self
    }

    pub fn disk(&self) -> &D {
        &self.disk
    }

    pub fn into_disk(self) -> D {
        self.disk
    }

    pub fn torn_tail(&self) -> Option<&str> {
        self.torn_tail.as_deref()
    }

    pub fn hard_state(&self) -> &HardState {
        &self.hard_state
    }

    pub fn conf_state(&self) -> &ConfState {
        &self.conf_state
    }

    /// The compaction point (`index` 0: none) and the application's state there.
    pub fn snapshot_ref(&self) -> &Snapshot {
        &self.snapshot
    }

    /// The first entry the log holds (after the compaction point; past the last when
    /// it holds none).
    pub fn first_kept(&self) -> u64 {
        self.first_index_now()
    }

    /// The last entry the log holds (the compaction point when it holds none).
    pub fn last_kept(&self) -> u64 {
        self.last_index_now()
    }

    /// The entry at `index` (one the log holds), from memory or read back from disk.
    pub fn entry(&self, index: u64) -> Result<Entry, LogError> {
        let at = index
            .checked_sub(self.first_index_now())
            .filter(|at| *at < self.places.len() as u64)
            .ok_or_else(|| LogError::Misuse(format!("read entry {index}, not in the log")))?;
        let cached_from = self.last_index_now() + 1 - self.cache.len() as u64;
        if index >= cached_from {
            return Ok(self.cache[(index - cached_from) as usize].clone());
        }
        let place = self.places[at as usize];
        let name = segment_name(self.epoch, place.segment);
        let bytes = self.disk.read_at(&name, place.offset, place.len as usize)?;
        let (entry, _) = decode_frame(&bytes).map_err(|error| {
            LogError::Corrupt(format!("{name} at byte {}: {error}", place.offset))
        })?;
        if entry.index != index {
            return Err(LogError::Corrupt(format!(
                "{name} at byte {}: entry {} where {index} should be",
                place.offset, entry.index
            )));
        }
        Ok(entry)
    }

    /// Keeps an entry just added (the newest) whole in memory, and as many before it as
    /// the budget holds.
    fn cache_newest(&mut self, entry: Entry) {
        self.cache_bytes += entry.data.len() + entry.context.len();
        self.cache.push_back(entry);
        self.trim_cache();
    }

    fn trim_cache(&mut self) {
        while self.cache_bytes > self.cache_budget {
            let Some(oldest) = self.cache.pop_front() else { break };
            self.cache_bytes -= oldest.data.len() + oldest.context.len();
        }
    }

    /// Forgets cached entries from `index` on (cut from the log).
    fn uncache_from(&mut self, index: u64) {
        while self.cache.back().is_some_and(|entry| entry.index >= index) {
            if let Some(entry) = self.cache.pop_back() {
                self.cache_bytes -= entry.data.len() + entry.context.len();
            }
        }
    }

    /// Forgets cached entries up to `index` (compacted).
    fn uncache_to(&mut self, index: u64) {
        while self.cache.front().is_some_and(|entry| entry.index <= index) {
            if let Some(entry) = self.cache.pop_front() {
                self.cache_bytes -= entry.data.len() + entry.context.len();
            }
        }
    }

    fn snapshot_index(&self) -> u64 {
        self.snapshot.get_metadata().index
    }

    fn first_index_now(&self) -> u64 {
        self.snapshot_index() + 1
    }

    fn last_index_now(&self) -> u64 {
        self.snapshot_index() + self.places.len() as u64
    }

    /// The cached entries are the newest, one after the other, within the budget.
    fn check(&self) {
        debug_assert!(self.cache.len() <= self.places.len());
        debug_assert!(self.cache_bytes <= self.cache_budget);
        let cached_from = self.last_index_now() + 1 - self.cache.len() as u64;
        debug_assert!(self
            .cache
            .iter()
            .enumerate()
            .all(|(at, entry)| entry.index == cached_from + at as u64));
    }

    /// Appends entries from the leader (or the node's own, as leader). Entries at
    /// indexes the log already holds replace them and everything after them (raft-rs
    /// only does so for entries never committed). Not durable until `sync`.
    pub fn append(&mut self, entries: &[Entry]) -> Result<(), LogError> {
        let Some(first) = entries.first() else { return Ok(()) };
        if first.index < self.first_index_now() {
            return Err(LogError::Misuse(format!(
                "overwrite entry {} before the compaction point {}",
                first.index,
                self.snapshot_index()
            )));
        }
        if first.index > self.last_index_now() + 1 {
            return Err(LogError::Misuse(format!(
                "append entry {} after the last, {}, leaving a gap",
                first.index,
                self.last_index_now()
            )));
        }
        if first.index <= self.last_index_now() {
            self.cut_from(first.index)?;
        }
        let mut frame = Vec::new();
        for entry in entries {
            frame.clear();
            encode_frame(entry, &mut frame);
            let segment = self.segment_for(entry.index)?;
            let name = segment_name(self.epoch, segment.first_index);
            self.disk.append(&name, &frame)?;
            let place = Place {
                term: entry.term,
                segment: segment.first_index,
                offset: segment.len,
                len: frame.len() as u32,
            };
            if let Some(last) = self.segments.last_mut() {
                last.len += frame.len() as u64;
            }
            if !self.dirty.contains(&place.segment) {
                self.dirty.push(place.segment);
            }
            self.places.push_back(place);
            self.cache_newest(entry.clone());
        }
        self.check();
        Ok(())
    }

    /// The segment the entry at `index` goes to: the last, or a new one once the last is
    /// full. A full segment is synced before the next gets anything, so only the last
    /// segment with any bytes can end in a torn frame (what `open` relies on).
    fn segment_for(&mut self, index: u64) -> Result<Segment, LogError> {
        if let Some(last) = self.segments.last() {
            if last.len < self.segment_bytes {
                return Ok(*last);
            }
            let full = last.first_index;
            if self.dirty.contains(&full) {
                self.disk.sync(&segment_name(self.epoch, full))?;
                self.dirty.retain(|dirty| *dirty != full);
            }
        }
        let segment = Segment { first_index: index, len: 0 };
        self.segments.push(segment);
        Ok(segment)
    }

    /// Removes the entries from `index` on, in memory and on disk.
    fn cut_from(&mut self, index: u64) -> Result<(), LogError> {
        let keep = (index - self.first_index_now()) as usize;
        let Some(place) = self.places.get(keep).copied() else { return Ok(()) };
        self.places.truncate(keep);
        self.uncache_from(index);
        while let Some(last) = self.segments.last().copied() {
            if last.first_index == place.segment {
                break;
            }
            self.disk.remove(&segment_name(self.epoch, last.first_index))?;
            self.dirty.retain(|dirty| *dirty != last.first_index);
            self.segments.pop();
        }
        if let Some(last) = self.segments.last_mut() {
            debug_assert_eq!(last.first_index, place.segment);
            self.disk.truncate(&segment_name(self.epoch, last.first_index), place.offset)?;
            last.len = place.offset;
            if !self.dirty.contains(&last.first_index) {
                self.dirty.push(last.first_index);
            }
        }
        Ok(())
    }

    /// Makes every entry appended so far durable.
    pub fn sync(&mut self) -> Result<(), LogError> {
        for segment in self.dirty.drain(..) {
            self.disk.sync(&segment_name(self.epoch, segment))?;
        }
        Ok(())
    }

    /// Keeps raft-rs's hard state: durably when the term or the vote changed (before any
    /// message that depends on it leaves), in memory when only the commit index did.
    pub fn set_hard_state(&mut self, hard_state: &HardState) -> Result<(), LogError> {
        let durable =
            hard_state.term != self.hard_state.term || hard_state.vote != self.hard_state.vote;
        self.hard_state = hard_state.clone();
        if durable {
            self.write_state()?;
        }
        Ok(())
    }

    /// The commit index alone (raft-rs's light ready); in memory.
    pub fn set_commit(&mut self, commit: u64) {
        self.hard_state.commit = self.hard_state.commit.max(commit);
    }

    /// Raises the commit index to what the application has already applied (it was
    /// committed then; the state file may not say so).
    pub fn raise_commit_to_applied(&mut self, applied: u64) {
        let applied = applied.min(self.last_index_now());
        self.hard_state.commit = self.hard_state.commit.max(applied);
    }

    /// The membership after a conf change was applied; durable.
    pub fn set_conf_state(&mut self, conf_state: ConfState) -> Result<(), LogError> {
        self.conf_state = conf_state;
        self.write_state()
    }

    fn write_state(&mut self) -> Result<(), LogError> {
        let bytes = encode_state_file(&self.hard_state, &self.conf_state);
        self.disk.replace(STATE_FILE, &bytes)?;
        Ok(())
    }

    /// Compacts the log at `index` (applied by the application, whose state there is
    /// `data`): the snapshot a lagging or new node is sent, and the entries up to it
    /// dropped from memory and, a whole segment at a time, from disk.
    pub fn compact(&mut self, index: u64, data: Bytes) -> Result<(), LogError> {
        if index <= self.snapshot_index() {
            return Ok(());
        }
        if index > self.hard_state.commit {
            return Err(LogError::Misuse(format!(
                "compact at {index}, beyond the commit index {}",
                self.hard_state.commit
            )));
        }
        let term = self.term_of(index)?;
        let mut snapshot = Snapshot { data, ..Default::default() };
        snapshot.mut_metadata().index = index;
        snapshot.mut_metadata().term = term;
        snapshot.mut_metadata().set_conf_state(self.conf_state.clone());
        self.disk.replace(SNAPSHOT_FILE, &encode_snapshot_file(&snapshot, self.epoch))?;
        let dropped = (index - self.snapshot_index()) as usize;
        self.snapshot = snapshot;
        self.places.drain(..dropped);
        self.uncache_to(index);
        // A segment goes once the next one starts at or before the first entry kept.
        while self.segments.len() >= 2 && self.segments[1].first_index <= index + 1 {
            let gone = self.segments.remove(0);
            self.disk.remove(&segment_name(self.epoch, gone.first_index))?;
            self.dirty.retain(|dirty| *dirty != gone.first_index);
        }
        self.check();
        Ok(())
    }

    /// Installs a leader's snapshot: the log restarts after it, in a new epoch (the old
    /// epoch's segments are removed now, and on the next open if this node dies first).
    pub fn install_snapshot(&mut self, snapshot: &Snapshot) -> Result<(), LogError> {
        let metadata = snapshot.get_metadata();
        if metadata.index <= self.snapshot_index() {
            return Err(LogError::Misuse(format!(
                "install a snapshot at {}, not after the compaction point {}",
                metadata.index,
                self.snapshot_index()
            )));
        }
        let epoch = self.epoch + 1;
        self.disk.replace(SNAPSHOT_FILE, &encode_snapshot_file(snapshot, epoch))?;
        let old = std::mem::take(&mut self.segments);
        for segment in old {
            self.disk.remove(&segment_name(self.epoch, segment.first_index))?;
        }
        self.epoch = epoch;
        self.dirty.clear();
        self.places.clear();
        self.cache.clear();
        self.cache_bytes = 0;
        self.snapshot = snapshot.clone();
        self.hard_state.term = self.hard_state.term.max(metadata.term);
        self.hard_state.commit = metadata.index;
        self.conf_state = metadata.get_conf_state().clone();
        self.write_state()?;
        self.check();
        Ok(())
    }

    fn term_of(&self, index: u64) -> Result<u64, LogError> {
        if index == self.snapshot_index() {
            return Ok(self.snapshot.get_metadata().term);
        }
        match index.checked_sub(self.first_index_now()).and_then(|at| self.places.get(at as usize))
        {
            Some(place) => Ok(place.term),
            None => Err(LogError::Misuse(format!("read the term of {index}, not in the log"))),
        }
    }

    /// Reads this epoch's segments into memory; removes other epochs' and cuts a torn
    /// tail.
    fn read_segments(&mut self) -> Result<(), LogError> {
        let mut mine = Vec::new();
        for name in self.disk.list()? {
            let Some((epoch, first_index)) = parse_segment_name(&name) else { continue };
            if epoch == self.epoch {
                mine.push(first_index);
            } else {
                // A log that an installed snapshot replaced.
                self.disk.remove(&name)?;
            }
        }
        mine.sort_unstable();
        let mut contents = Vec::with_capacity(mine.len());
        for first_index in mine {
            let name = segment_name(self.epoch, first_index);
            contents.push((first_index, name.clone(), self.disk.read(&name)?.unwrap_or_default()));
        }
        // Segments made but never written to (the node died first) go; the last one
        // written to is the only one that may end torn.
        while contents.last().is_some_and(|(_, _, bytes)| bytes.is_empty()) {
            if let Some((_, name, _)) = contents.pop() {
                self.disk.remove(&name)?;
            }
        }
        let count = contents.len();
        for (at, (first_index, name, bytes)) in contents.into_iter().enumerate() {
            let mut offset = 0usize;
            while offset < bytes.len() {
                match decode_frame(&bytes[offset..]) {
                    Ok((entry, len)) => {
                        let place = Place {
                            term: entry.term,
                            segment: first_index,
                            offset: offset as u64,
                            len: len as u32,
                        };
                        self.take_read_entry(entry, place, &name)?;
                        offset += len;
                    }
                    Err(error) if at + 1 == count => {
                        self.torn_tail = Some(format!(
                            "{name} at byte {offset}: {error} ({} bytes removed)",
                            bytes.len() - offset
                        ));
                        self.disk.truncate(&name, offset as u64)?;
                        self.disk.sync(&name)?;
                        break;
                    }
                    Err(error) => {
                        return Err(LogError::Corrupt(format!("{name} at byte {offset}: {error}")))
                    }
                }
            }
            self.segments.push(Segment { first_index, len: offset as u64 });
        }
        Ok(())
    }

    /// An entry read back from a segment: kept if after the compaction point, and only
    /// if it follows the one before.
    fn take_read_entry(&mut self, entry: Entry, place: Place, name: &str) -> Result<(), LogError> {
        if entry.index <= self.snapshot_index() {
            return Ok(());
        }
        let expected = self.last_index_now() + 1;
        if entry.index != expected {
            return Err(LogError::Corrupt(format!(
                "{name} at byte {}: entry {} where {expected} should be",
                place.offset, entry.index
            )));
        }
        self.places.push_back(place);
        self.cache_newest(entry);
        Ok(())
    }
}

fn storage_error(error: StorageError) -> raft::Error {
    raft::Error::Store(error)
}

impl<D: Disk> raft::Storage for RaftLog<D> {
    fn initial_state(&self) -> raft::Result<RaftState> {
        Ok(RaftState::new(self.hard_state.clone(), self.conf_state.clone()))
    }

    fn entries(
        &self,
        low: u64,
        high: u64,
        max_size: impl Into<Option<u64>>,
        _context: GetEntriesContext,
    ) -> raft::Result<Vec<Entry>> {
        if low < self.first_index_now() {
            return Err(storage_error(StorageError::Compacted));
        }
        if high > self.last_index_now() + 1 || low > high {
            return Err(storage_error(StorageError::Unavailable));
        }
        let max_size = max_size.into();
        let mut entries = Vec::new();
        let mut size = 0u64;
        for index in low..high {
            let entry = self
                .entry(index)
                .map_err(|error| raft::Error::Store(StorageError::Other(Box::new(error))))?;
            size += u64::from(protobuf::Message::compute_size(&entry));
            // At least one entry, then no more than `max_size` (raft-rs's rule).
            if !entries.is_empty() && max_size.is_some_and(|max| size > max) {
                break;
            }
            entries.push(entry);
        }
        Ok(entries)
    }

    fn term(&self, index: u64) -> raft::Result<u64> {
        if index == self.snapshot_index() {
            return Ok(self.snapshot.get_metadata().term);
        }
        if index < self.first_index_now() {
            return Err(storage_error(StorageError::Compacted));
        }
        if index > self.last_index_now() {
            return Err(storage_error(StorageError::Unavailable));
        }
        Ok(self.places[(index - self.first_index_now()) as usize].term)
    }

    fn first_index(&self) -> raft::Result<u64> {
        Ok(self.first_index_now())
    }

    fn last_index(&self) -> raft::Result<u64> {
        Ok(self.last_index_now())
    }

    fn snapshot(&self, request_index: u64, _to: u64) -> raft::Result<Snapshot> {
        if self.snapshot_index() == 0 || self.snapshot_index() < request_index {
            return Err(storage_error(StorageError::SnapshotTemporarilyUnavailable));
        }
        Ok(self.snapshot.clone())
    }
}

fn segment_name(epoch: u64, first_index: u64) -> String {
    format!("{SEGMENT_PREFIX}{epoch:010}-{first_index:020}")
}

fn parse_segment_name(name: &str) -> Option<(u64, u64)> {
    let rest = name.strip_prefix(SEGMENT_PREFIX)?;
    let (epoch, first_index) = rest.split_once('-')?;
    if epoch.len() != 10 || first_index.len() != 20 {
        return None;
    }
    Some((epoch.parse().ok()?, first_index.parse().ok()?))
}

fn entry_kind(entry_type: EntryType) -> u8 {
    match entry_type {
        EntryType::EntryNormal => 0,
        EntryType::EntryConfChange => 1,
        EntryType::EntryConfChangeV2 => 2,
    }
}

pub(crate) fn entry_type(kind: u8) -> Result<EntryType, DecodeError> {
    match kind {
        0 => Ok(EntryType::EntryNormal),
        1 => Ok(EntryType::EntryConfChange),
        2 => Ok(EntryType::EntryConfChangeV2),
        _ => Err(DecodeError::Invalid("unknown entry kind")),
    }
}

/// An entry's fields (term, index, kind, data, context), as the log's frames and the
/// peer protocol both write them.
pub(crate) fn put_entry(out: &mut Vec<u8>, entry: &Entry) {
    put_u64(out, entry.term);
    put_u64(out, entry.index);
    out.push(entry_kind(entry.entry_type));
    put_bytes(out, &entry.data);
    put_bytes(out, &entry.context);
}

pub(crate) fn read_entry(reader: &mut Reader<'_>) -> Result<Entry, DecodeError> {
    let mut entry = Entry {
        term: reader.u64()?,
        index: reader.u64()?,
        entry_type: entry_type(reader.u8()?)?,
        ..Default::default()
    };
    entry.data = Bytes::copy_from_slice(reader.bytes()?);
    entry.context = Bytes::copy_from_slice(reader.bytes()?);
    Ok(entry)
}

/// The smallest entry `put_entry` writes.
pub(crate) const ENTRY_BYTES_MIN: usize = ENTRY_FIXED + 4 + 4;

fn encode_frame(entry: &Entry, out: &mut Vec<u8>) {
    let start = out.len();
    out.extend_from_slice(&[0u8; FRAME_HEADER]);
    put_entry(out, entry);
    let body = &out[start + FRAME_HEADER..];
    let len = body.len() as u32;
    let crc = crc32c::crc32c(body);
    out[start..start + 4].copy_from_slice(&len.to_le_bytes());
    out[start + 4..start + 8].copy_from_slice(&crc.to_le_bytes());
}

/// A frame at the start of `bytes`: its entry and its length.
fn decode_frame(bytes: &[u8]) -> Result<(Entry, usize), DecodeError> {
    let mut reader = Reader::new(bytes);
    let len = reader.u32()? as usize;
    let crc = reader.u32()?;
    let body = reader.take(len)?;
    if crc32c::crc32c(body) != crc {
        return Err(DecodeError::Invalid("checksum mismatch"));
    }
    let mut body_reader = Reader::new(body);
    let entry = read_entry(&mut body_reader)?;
    if !body_reader.is_empty() {
        return Err(DecodeError::Invalid("bytes after the entry"));
    }
    Ok((entry, FRAME_HEADER + len))
}

/// A small file: magic, checksum of the body, body.
fn seal_file(magic: &[u8; 8], body: Vec<u8>) -> Vec<u8> {
    let mut out = Vec::with_capacity(body.len() + 12);
    out.extend_from_slice(magic);
    put_u32(&mut out, crc32c::crc32c(&body));
    out.extend_from_slice(&body);
    out
}

fn open_file<'a>(magic: &[u8; 8], bytes: &'a [u8]) -> Result<Reader<'a>, DecodeError> {
    let mut reader = Reader::new(bytes);
    if reader.take(8)? != magic {
        return Err(DecodeError::Invalid("not this kind of file"));
    }
    let crc = reader.u32()?;
    let body = reader.rest();
    if crc32c::crc32c(body) != crc {
        return Err(DecodeError::Invalid("checksum mismatch"));
    }
    Ok(Reader::new(body))
}

fn encode_state_file(hard_state: &HardState, conf_state: &ConfState) -> Vec<u8> {
    let mut body = Vec::new();
    put_u64(&mut body, hard_state.term);
    put_u64(&mut body, hard_state.vote);
    put_u64(&mut body, hard_state.commit);
    put_conf_state(&mut body, conf_state);
    seal_file(STATE_MAGIC, body)
}

fn decode_state_file(bytes: &[u8]) -> Result<(HardState, ConfState), DecodeError> {
    let mut reader = open_file(STATE_MAGIC, bytes)?;
    let hard_state = HardState {
        term: reader.u64()?,
        vote: reader.u64()?,
        commit: reader.u64()?,
        ..Default::default()
    };
    let conf_state = reader.conf_state()?;
    Ok((hard_state, conf_state))
}

fn encode_snapshot_file(snapshot: &Snapshot, epoch: u64) -> Vec<u8> {
    let metadata = snapshot.get_metadata();
    let mut body = Vec::with_capacity(snapshot.data.len() + 64);
    put_u64(&mut body, epoch);
    put_u64(&mut body, metadata.index);
    put_u64(&mut body, metadata.term);
    put_conf_state(&mut body, metadata.get_conf_state());
    body.extend_from_slice(&snapshot.data);
    seal_file(SNAPSHOT_MAGIC, body)
}

fn decode_snapshot_file(bytes: &[u8]) -> Result<(Snapshot, u64), DecodeError> {
    let mut reader = open_file(SNAPSHOT_MAGIC, bytes)?;
    let epoch = reader.u64()?;
    let mut metadata =
        SnapshotMetadata { index: reader.u64()?, term: reader.u64()?, ..Default::default() };
    metadata.set_conf_state(reader.conf_state()?);
    let mut snapshot =
        Snapshot { data: Bytes::copy_from_slice(reader.rest()), ..Default::default() };
    snapshot.set_metadata(metadata);
    Ok((snapshot, epoch))
}

#[cfg(test)]
mod tests {
    use raft::Storage;

    use super::*;
    use crate::disk::FsDisk;

    fn entry(term: u64, index: u64) -> Entry {
        Entry { term, index, data: Bytes::from(format!("entry {index}")), ..Default::default() }
    }

    fn open(dir: &std::path::Path) -> RaftLog<FsDisk> {
        RaftLog::open(FsDisk::open(dir).unwrap(), &[1, 2, 3]).unwrap().with_segment_bytes(100)
    }

    fn terms(log: &RaftLog<FsDisk>) -> Vec<(u64, u64)> {
        let (first, last) = (log.first_index().unwrap(), log.last_index().unwrap());
        let entries = log.entries(first, last + 1, None, GetEntriesContext::empty(false)).unwrap();
        entries.iter().map(|entry| (entry.index, entry.term)).collect()
    }

    #[test]
    fn entries_the_vote_and_the_membership_read_back_after_a_restart() {
        let dir = tempfile::tempdir().unwrap();
        let mut log = open(dir.path());
        assert_eq!(log.initial_state().unwrap().conf_state.voters, vec![1, 2, 3]);
        let entries: Vec<Entry> = (1..=10).map(|index| entry(1, index)).collect();
        log.append(&entries).unwrap();
        log.sync().unwrap();
        let hard_state = HardState { term: 2, vote: 3, commit: 4, ..Default::default() };
        log.set_hard_state(&hard_state).unwrap();
        drop(log);
        let log = open(dir.path());
        assert_eq!(terms(&log), (1..=10).map(|index| (index, 1)).collect::<Vec<_>>());
        assert_eq!(log.hard_state(), &hard_state);
        assert!(log.torn_tail().is_none());
        // Several segments were written (100 bytes each).
        assert!(FsDisk::open(dir.path()).unwrap().list().unwrap().len() > 3);
    }

    #[test]
    fn entries_beyond_the_memory_budget_are_read_back_from_disk() {
        let dir = tempfile::tempdir().unwrap();
        let mut log = open(dir.path()).with_cache_bytes(30);
        log.append(&(1..=10).map(|index| entry(1, index)).collect::<Vec<_>>()).unwrap();
        // Four entries' data fit in 30 bytes ("entry 7" to "entry 10": 7+7+7+8).
        assert_eq!(log.cache.len(), 4);
        let all = log.entries(1, 11, None, GetEntriesContext::empty(false)).unwrap();
        assert_eq!(
            all.iter().map(|entry| entry.index).collect::<Vec<_>>(),
            (1..=10).collect::<Vec<_>>()
        );
        assert_eq!(all[0].data, Bytes::from("entry 1"));
        // raft-rs's size limit: at least one entry, then within the limit.
        let limited = log.entries(1, 11, Some(1), GetEntriesContext::empty(false)).unwrap();
        assert_eq!(limited.len(), 1);
        // After a restart too, and after the tail is replaced.
        log.sync().unwrap();
        drop(log);
        let mut log = open(dir.path()).with_cache_bytes(30);
        log.append(&[entry(2, 9)]).unwrap();
        assert_eq!(log.entry(8).unwrap().data, Bytes::from("entry 8"));
        assert_eq!(log.entry(9).unwrap().term, 2);
        assert!(log.entry(10).is_err());
    }

    #[test]
    fn a_conflicting_append_replaces_the_tail_across_segments() {
        let dir = tempfile::tempdir().unwrap();
        let mut log = open(dir.path());
        log.append(&(1..=10).map(|index| entry(1, index)).collect::<Vec<_>>()).unwrap();
        log.append(&[entry(2, 4), entry(2, 5)]).unwrap();
        log.sync().unwrap();
        let expected: Vec<(u64, u64)> =
            (1..=3).map(|index| (index, 1)).chain([(4, 2), (5, 2)]).collect();
        assert_eq!(terms(&log), expected);
        drop(log);
        assert_eq!(terms(&open(dir.path())), expected);
        // A gap or an entry before the compaction point is refused.
        let mut log = open(dir.path());
        assert!(matches!(log.append(&[entry(2, 9)]), Err(LogError::Misuse(_))));
    }

    #[test]
    fn a_torn_last_frame_is_cut_and_damage_before_it_refuses_to_open() {
        let dir = tempfile::tempdir().unwrap();
        let mut log = open(dir.path());
        log.append(&(1..=10).map(|index| entry(1, index)).collect::<Vec<_>>()).unwrap();
        log.sync().unwrap();
        drop(log);
        let mut names = FsDisk::open(dir.path()).unwrap().list().unwrap();
        names.retain(|name| name.starts_with(SEGMENT_PREFIX));
        let last = dir.path().join(names.last().unwrap());
        let bytes = std::fs::read(&last).unwrap();
        std::fs::write(&last, &bytes[..bytes.len() - 3]).unwrap();
        let log = open(dir.path());
        assert!(log.torn_tail().is_some());
        assert_eq!(log.last_index().unwrap(), 9);
        drop(log);
        // A damaged byte in an earlier segment is not a torn tail.
        let first = dir.path().join(&names[0]);
        let mut bytes = std::fs::read(&first).unwrap();
        bytes[12] ^= 0xff;
        std::fs::write(&first, &bytes).unwrap();
        let opened = RaftLog::open(FsDisk::open(dir.path()).unwrap(), &[1, 2, 3]);
        assert!(matches!(opened, Err(LogError::Corrupt(_))));
    }

    #[test]
    fn compaction_keeps_the_state_and_drops_whole_segments() {
        let dir = tempfile::tempdir().unwrap();
        let mut log = open(dir.path());
        log.append(&(1..=20).map(|index| entry(1, index)).collect::<Vec<_>>()).unwrap();
        log.sync().unwrap();
        assert!(matches!(log.compact(12, Bytes::new()), Err(LogError::Misuse(_))));
        log.set_commit(15);
        let segments_before = FsDisk::open(dir.path()).unwrap().list().unwrap().len();
        log.compact(12, Bytes::from_static(b"state at 12")).unwrap();
        assert_eq!(log.first_index().unwrap(), 13);
        assert_eq!(log.term(12).unwrap(), 1);
        assert!(log.term(11).is_err());
        assert_eq!(log.snapshot(12, 2).unwrap().data, Bytes::from_static(b"state at 12"));
        assert!(FsDisk::open(dir.path()).unwrap().list().unwrap().len() < segments_before);
        drop(log);
        let log = open(dir.path());
        assert_eq!(log.first_index().unwrap(), 13);
        assert_eq!(log.last_index().unwrap(), 20);
        assert_eq!(log.snapshot_ref().data, Bytes::from_static(b"state at 12"));
        assert_eq!(log.hard_state().commit, 12, "what was compacted was committed");
    }

    #[test]
    fn an_installed_snapshot_replaces_the_log_even_across_a_restart() {
        let dir = tempfile::tempdir().unwrap();
        let mut log = open(dir.path());
        log.append(&(1..=5).map(|index| entry(1, index)).collect::<Vec<_>>()).unwrap();
        log.sync().unwrap();
        let mut snapshot =
            Snapshot { data: Bytes::from_static(b"leader's state"), ..Default::default() };
        snapshot.mut_metadata().index = 30;
        snapshot.mut_metadata().term = 4;
        snapshot.mut_metadata().mut_conf_state().voters = vec![1, 2, 3, 4];
        log.install_snapshot(&snapshot).unwrap();
        assert_eq!((log.first_index().unwrap(), log.last_index().unwrap()), (31, 30));
        log.append(&[entry(4, 31)]).unwrap();
        log.sync().unwrap();
        drop(log);
        let log = open(dir.path());
        assert_eq!(terms(&log), vec![(31, 4)]);
        assert_eq!(log.conf_state().voters, vec![1, 2, 3, 4]);
        assert_eq!(log.hard_state().term, 4);
        // Nothing of the replaced log is left on disk.
        let names = FsDisk::open(dir.path()).unwrap().list().unwrap();
        assert!(names.iter().all(|name| !name.starts_with("raft-log-0000000000-")), "{names:?}");
    }
}
