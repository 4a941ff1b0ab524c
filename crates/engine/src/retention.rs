//! Taking snapshots and letting go of what they make unnecessary: older snapshots beyond
//! the number retained, and journal segments that only those needed.

use std::path::Path;

use bourse_core::snapshot::encode_venue;
use bourse_core::venue::Venue;
use bourse_core::Seq;
use bourse_journal::retire::{remove_retired, retire};
use bourse_journal::segment::{list_segments, sync_dir};
use bourse_journal::{list_snapshots, write_snapshot_paced, JournalError, SnapshotMeta};

/// Encodes `venue` and writes it as the snapshot `meta` describes (atomically).
pub fn take_snapshot(
    venue: &Venue,
    meta: SnapshotMeta,
    snapshot_dir: &Path,
) -> Result<u64, JournalError> {
    write_state(venue, meta, snapshot_dir, None)
}

/// Bytes a periodic snapshot writes between two syncs (see `write_snapshot_paced`).
pub const SNAPSHOT_PACE_BYTES: usize = 256 << 10;

/// `take_snapshot` beside a live journal: written in synced steps.
pub fn take_snapshot_paced(
    venue: &Venue,
    meta: SnapshotMeta,
    snapshot_dir: &Path,
) -> Result<u64, JournalError> {
    write_state(venue, meta, snapshot_dir, Some(SNAPSHOT_PACE_BYTES))
}

fn write_state(
    venue: &Venue,
    meta: SnapshotMeta,
    snapshot_dir: &Path,
    pace: Option<usize>,
) -> Result<u64, JournalError> {
    let mut body = Vec::new();
    encode_venue(venue, &mut body);
    write_snapshot_paced(snapshot_dir, meta, &body, pace)?;
    Ok(body.len() as u64)
}

/// What `prune` deleted.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Pruned {
    pub snapshots: usize,
    pub segments: usize,
}

/// Keeps the `retained` newest snapshots and, given the journal, deletes its segments
/// whose every record the oldest of them covers, so that each retained snapshot can
/// still be brought up to date from the journal, and every record from `needed_from` on
/// (given with the journal) stays. The last segment is never deleted.
/// Files are retired (`bourse_journal::retire`): out of the listings at once, freed a
/// step at a time afterwards, so that the discards do not stall the journal's syncs.
pub fn prune(
    snapshot_dir: &Path,
    journal: Option<(&Path, Seq)>,
    retained: usize,
) -> Result<Pruned, JournalError> {
    let mut pruned = Pruned::default();
    let snapshots = list_snapshots(snapshot_dir)?;
    // Newest first, so the ones skipped are the newest and the last kept the oldest.
    debug_assert!(snapshots.windows(2).all(|pair| pair[0].seq > pair[1].seq));
    let retained = retained.max(1);
    for old in snapshots.iter().skip(retained) {
        retire(&old.path).map_err(|error| JournalError::io(&old.path, error))?;
        pruned.snapshots += 1;
    }
    if pruned.snapshots > 0 {
        sync_dir(snapshot_dir).map_err(|error| JournalError::io(snapshot_dir, error))?;
    }
    if let (Some(oldest_kept), Some((journal_dir, needed_from))) =
        (snapshots.iter().take(retained).next_back(), journal)
    {
        let segments =
            list_segments(journal_dir).map_err(|error| JournalError::io(journal_dir, error))?;
        for pair in segments.windows(2) {
            let (first_seq, path) = &pair[0];
            let (next_first_seq, _) = pair[1];
            debug_assert!(*first_seq < next_first_seq, "segments are listed in seq order");
            let last_in_segment = next_first_seq.previous();
            if last_in_segment > oldest_kept.seq || last_in_segment >= needed_from {
                break;
            }
            retire(path).map_err(|error| JournalError::io(path, error))?;
            pruned.segments += 1;
        }
        if pruned.segments > 0 {
            sync_dir(journal_dir).map_err(|error| JournalError::io(journal_dir, error))?;
        }
        remove_retired(journal_dir).map_err(|error| JournalError::io(journal_dir, error))?;
    }
    remove_retired(snapshot_dir).map_err(|error| JournalError::io(snapshot_dir, error))?;
    Ok(pruned)
}
