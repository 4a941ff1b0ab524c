//! The history's files on disk: one directory per table, partitioned Hive-style by
//! date and instrument (the ledger by date and asset), and in each partition one
//! Parquet file per commit that had rows for it, named by the commit's range of
//! sequence numbers:
//!
//! ```text
//! history/tables/trades/date=2026-11-24/instrument=BTC-USD/part-00000000000000000001-00000000000000052311.parquet
//! ```
//!
//! A file is written to a temporary name, synced, renamed and its directory synced,
//! so a crash leaves whole files or none. Files of a commit whose checkpoint was never
//! written (their range starts after the committed seq) are removed when the history
//! opens (`remove_uncommitted`): the journal gives their rows again.

use std::fs::{self, File};
use std::io;
use std::path::{Path, PathBuf};

use arrow_array::RecordBatch;
use bourse_core::Seq;
use parquet::arrow::ArrowWriter;
use parquet::basic::{Compression, ZstdLevel};
use parquet::file::properties::{EnabledStatistics, WriterProperties};
use parquet::schema::types::ColumnPath;

use crate::civil::date_text;
use crate::derive::Partition;
use crate::tables::Table;

/// Rows per row group, at most: large enough for fast scans, small enough that a
/// lookup reads little.
pub const ROW_GROUP_ROWS: usize = 256 * 1024;

pub fn tables_dir(history_dir: &Path) -> PathBuf {
    history_dir.join("tables")
}

/// A partition value as a path segment: letters, digits, `-`, `_` and `.` as they
/// are (not leading `.`), every other byte as `%XX` (how Hive, pyarrow and DuckDB
/// write them).
pub fn escape_segment(value: &str) -> String {
    let mut escaped = String::with_capacity(value.len());
    for (index, byte) in value.bytes().enumerate() {
        let plain = byte.is_ascii_alphanumeric()
            || byte == b'-'
            || byte == b'_'
            || (byte == b'.' && index > 0);
        if plain {
            escaped.push(byte as char);
        } else {
            escaped.push_str(&format!("%{byte:02X}"));
        }
    }
    if escaped.is_empty() {
        escaped.push_str("%00");
    }
    escaped
}

pub fn partition_dir(history_dir: &Path, table: Table, partition: &Partition) -> PathBuf {
    tables_dir(history_dir)
        .join(table.name())
        .join(format!("date={}", date_text(partition.day)))
        .join(format!("{}={}", table.partition_column(), escape_segment(&partition.key)))
}

pub fn part_name(first_seq: Seq, last_seq: Seq) -> String {
    format!("part-{first_seq:020}-{last_seq:020}.parquet")
}

/// The range of a part file's name.
pub fn parse_part_name(name: &str) -> Option<(Seq, Seq)> {
    let range = name.strip_prefix("part-")?.strip_suffix(".parquet")?;
    let (first, last) = range.split_once('-')?;
    Some((Seq(first.parse().ok()?), Seq(last.parse().ok()?)))
}

/// Columns with few distinct values, dictionary-encoded; every other column (ids,
/// times, balances: mostly distinct) is written plain, without the cost of trying.
const DICTIONARY_COLUMNS: &[&str] = &[
    "account",
    "symbol",
    "side",
    "type",
    "time_in_force",
    "status",
    "change",
    "reason",
    "price",
    "qty",
    "asset",
    "movement",
    "cause",
    "taker_side",
    "maker_account",
    "taker_account",
    "maker_fee_asset",
    "taker_fee_asset",
    "interval",
];

/// Columns with min/max statistics per column chunk, for the readers' pruning: the
/// numbers queries select ranges of. Others have none (computing them per value is a
/// real share of the write, and nothing prunes on them).
const STATISTICS_COLUMNS: &[&str] =
    &["seq", "ts", "order_id", "maker_order_id", "taker_order_id", "start", "last_seq"];

pub fn writer_properties() -> WriterProperties {
    let mut builder = WriterProperties::builder()
        .set_compression(Compression::ZSTD(ZstdLevel::try_new(1).unwrap_or_default()))
        .set_dictionary_enabled(false)
        .set_statistics_enabled(EnabledStatistics::None)
        .set_max_row_group_row_count(Some(ROW_GROUP_ROWS))
        .set_created_by(format!("bourse {}", env!("CARGO_PKG_VERSION")));
    for column in DICTIONARY_COLUMNS {
        builder = builder.set_column_dictionary_enabled(ColumnPath::from(*column), true);
    }
    for column in STATISTICS_COLUMNS {
        builder = builder
            .set_column_statistics_enabled(ColumnPath::from(*column), EnabledStatistics::Chunk);
    }
    builder.build()
}

/// Writes `batch` as the part file of `range` in `dir` (created if needed): whole
/// and synced, or not at all. Returns the file's path and size.
pub fn write_part(
    dir: &Path,
    range: (Seq, Seq),
    batch: &RecordBatch,
) -> io::Result<(PathBuf, u64)> {
    let created = !dir.exists();
    fs::create_dir_all(dir)?;
    let name = part_name(range.0, range.1);
    let final_path = dir.join(&name);
    let temporary = dir.join(format!(".{name}.tmp"));
    let file = File::create(&temporary)?;
    let mut writer = ArrowWriter::try_new(file, batch.schema(), Some(writer_properties()))
        .map_err(io::Error::other)?;
    writer.write(batch).map_err(io::Error::other)?;
    let file = writer.into_inner().map_err(io::Error::other)?;
    file.sync_all()?;
    let bytes = file.metadata()?.len();
    drop(file);
    fs::rename(&temporary, &final_path)?;
    sync_dir(dir)?;
    if created {
        // New directories must survive a crash too: sync each parent up to the table's.
        let mut parent = dir.parent();
        for _ in 0..3 {
            if let Some(path) = parent {
                sync_dir(path)?;
                parent = path.parent();
            }
        }
    }
    Ok((final_path, bytes))
}

pub fn sync_dir(dir: &Path) -> io::Result<()> {
    File::open(dir)?.sync_all()
}

/// The lock between the history's readers and compaction (`compact`), which replaces
/// files: a reader holds it shared while it lists and reads the files, a merge holds it
/// exclusively while it renames its file into place and removes those it replaces. It
/// is an OS file lock (`history/files.lock`), so it holds between processes too (`bourse
/// query` beside a running `bourse serve`).
#[derive(Clone, Debug)]
pub struct FilesLock {
    path: PathBuf,
}

/// A held lock (or, for a reader of a history it cannot lock, none); released when
/// dropped.
#[derive(Debug)]
pub struct FilesGuard {
    _file: Option<File>,
}

impl FilesLock {
    pub fn new(history_dir: &Path) -> FilesLock {
        FilesLock { path: history_dir.join("files.lock") }
    }

    /// Shared: the files stay as they are while it is held. A history without the lock
    /// file that cannot get one (not made yet, or on a read-only copy) has no writer to
    /// wait for: the guard then holds nothing.
    pub fn shared(&self) -> io::Result<FilesGuard> {
        let file = match self.open().or_else(|_| File::open(&self.path)) {
            Ok(file) => file,
            Err(error) => {
                let no_writer = self.path.parent().is_some_and(|dir| !dir.exists())
                    || matches!(
                        error.kind(),
                        io::ErrorKind::PermissionDenied | io::ErrorKind::ReadOnlyFilesystem
                    );
                return if no_writer { Ok(FilesGuard { _file: None }) } else { Err(error) };
            }
        };
        file.lock_shared()?;
        Ok(FilesGuard { _file: Some(file) })
    }

    /// Exclusive: no reader is reading.
    pub fn exclusive(&self) -> io::Result<FilesGuard> {
        let file = self.open()?;
        file.lock()?;
        Ok(FilesGuard { _file: Some(file) })
    }

    /// Each holder opens the file itself: a lock belongs to an open file, and two
    /// holders sharing one would not exclude each other.
    fn open(&self) -> io::Result<File> {
        fs::OpenOptions::new().read(true).write(true).create(true).truncate(false).open(&self.path)
    }
}

/// Every part file under the tables, with its range.
pub fn part_files(history_dir: &Path) -> io::Result<Vec<(PathBuf, (Seq, Seq))>> {
    let mut found = Vec::new();
    let root = tables_dir(history_dir);
    if !root.exists() {
        return Ok(found);
    }
    let mut stack = vec![root];
    while let Some(dir) = stack.pop() {
        for entry in fs::read_dir(&dir)? {
            let entry = entry?;
            let path = entry.path();
            if entry.file_type()?.is_dir() {
                stack.push(path);
            } else if let Some(range) =
                path.file_name().and_then(|name| name.to_str()).and_then(parse_part_name)
            {
                found.push((path, range));
            }
        }
    }
    found.sort();
    Ok(found)
}

/// Removes the part files of commits after `committed_seq`, and temporary files:
/// what a crash left between writing a commit's files and its checkpoint. Returns
/// how many files went.
pub fn remove_uncommitted(history_dir: &Path, committed_seq: Seq) -> io::Result<usize> {
    let mut removed = 0;
    let root = tables_dir(history_dir);
    if !root.exists() {
        return Ok(0);
    }
    let mut stack = vec![root];
    while let Some(dir) = stack.pop() {
        let mut changed = false;
        for entry in fs::read_dir(&dir)? {
            let entry = entry?;
            let path = entry.path();
            if entry.file_type()?.is_dir() {
                stack.push(path);
                continue;
            }
            let name = entry.file_name();
            let name = name.to_string_lossy();
            let uncommitted = match parse_part_name(&name) {
                Some((first, _)) => first > committed_seq,
                None => name.starts_with(".part-") && name.ends_with(".tmp"),
            };
            if uncommitted {
                fs::remove_file(&path)?;
                removed += 1;
                changed = true;
            }
        }
        if changed {
            sync_dir(&dir)?;
        }
    }
    Ok(removed)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn segments_escape_what_paths_and_hive_cannot_hold() {
        assert_eq!(escape_segment("BTC-USD"), "BTC-USD");
        assert_eq!(escape_segment("SHFE.cu2501"), "SHFE.cu2501", "a futures symbol");
        assert_eq!(escape_segment("BTC/USD"), "BTC%2FUSD");
        assert_eq!(escape_segment("a=b c"), "a%3Db%20c");
        assert_eq!(escape_segment(".."), "%2E.");
        assert_eq!(escape_segment(""), "%00");
    }

    #[test]
    fn part_names_round_trip() {
        let name = part_name(Seq(1), Seq(52_311));
        assert_eq!(name, "part-00000000000000000001-00000000000000052311.parquet");
        assert_eq!(parse_part_name(&name), Some((Seq(1), Seq(52_311))));
        assert_eq!(parse_part_name("part-1.parquet"), None);
    }
}
