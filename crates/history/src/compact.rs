//! Compaction: merging a partition's small part files into larger ones. Every commit
//! writes one file per partition it has rows for, so a quiet venue committing every
//! couple of seconds would leave tens of thousands of tiny files (and row groups of a
//! few rows) a day; compaction keeps a partition at a few files with full row groups.
//!
//! A merge takes a run of consecutive small files of one partition (no other file of
//! the partition between them), writes their rows in order into one file named by the
//! run's whole range (`part-<first of the first>-<last of the last>.parquet`), synced,
//! then, holding the files lock exclusively (`FilesLock`), renames it into place and
//! removes the files it replaces. A crash after the rename and before the removals
//! leaves a file whose range contains theirs: opening the history removes those
//! (`remove_superseded`), the merged file being whole (it is renamed only once synced).
//! Readers inside Bourse hold the lock shared while they read, so they never see a
//! partition with both; another program reading the directory during a merge may.
//!
//! It only touches committed files (their range ends at or before the checkpoint), never
//! the files of a commit being written, and never changes a row: the tables and the
//! index read the same before and after.

use std::collections::HashMap;
use std::fs::{self, File};
use std::io;
use std::path::{Path, PathBuf};

use bourse_core::Seq;
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use parquet::arrow::ArrowWriter;
use parquet::file::reader::{FileReader, SerializedFileReader};

use crate::files::{
    parse_part_name, part_name, sync_dir, tables_dir, writer_properties, FilesLock, ROW_GROUP_ROWS,
};

/// A file with fewer rows than this is small: a merge candidate.
pub const SMALL_FILE_ROWS: u64 = ROW_GROUP_ROWS as u64;
/// A run of this many small files is merged even while its day goes on.
pub const MERGE_FILES: usize = 16;
/// A merge writes at most about this many rows (it stops adding files once past it).
pub const MERGED_ROWS_MAX: u64 = 4 * ROW_GROUP_ROWS as u64;
// A merged file is not small itself (or merges would merge it again), and a run of the
// files a day makes is worth a merge.
const _: () = assert!(SMALL_FILE_ROWS <= MERGED_ROWS_MAX && MERGE_FILES >= 2);

/// What one merge did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Merged {
    pub path: PathBuf,
    pub files_replaced: usize,
    pub rows: u64,
    pub bytes: u64,
}

/// One part file of a partition, with its range and row count.
#[derive(Clone, Debug)]
struct PartFile {
    path: PathBuf,
    range: (Seq, Seq),
    rows: u64,
}

/// Merges the first run of small files that is due, in any partition; `None` when no
/// run is. `committed_seq`: files ending after it are left alone. A partition of a date
/// before the newest date in the history is closed (the engine's clock has passed it):
/// any two or more small files in a row of its are merged, whereas a partition of the
/// newest date waits for `MERGE_FILES`.
pub fn merge_next(
    history_dir: &Path,
    committed_seq: Seq,
    lock: &FilesLock,
    row_counts: &mut RowCounts,
) -> io::Result<Option<Merged>> {
    let dirs = partition_dirs(history_dir)?;
    let newest = dirs.iter().filter_map(|dir| partition_date(dir)).max().map(str::to_string);
    for dir in &dirs {
        let closed =
            partition_date(dir).zip(newest.as_deref()).is_some_and(|(date, newest)| date < newest);
        let needed = if closed { 2 } else { MERGE_FILES };
        let files: Vec<(PathBuf, (Seq, Seq))> =
            part_files_in(dir)?.into_iter().filter(|(_, range)| range.1 <= committed_seq).collect();
        if files.len() < needed {
            continue;
        }
        let files = row_counts.of(files)?;
        if let Some(run) = due_run(&files, needed) {
            let merged = merge_run(dir, run, lock)?;
            for file in run {
                row_counts.rows.remove(&file.path);
            }
            return Ok(Some(merged));
        }
    }
    Ok(None)
}

/// The row counts of the part files looked at so far (a file never changes, so its
/// footer is read once), so that each look reads only the new files' footers.
#[derive(Debug, Default)]
pub struct RowCounts {
    rows: HashMap<PathBuf, u64>,
}

impl RowCounts {
    fn of(&mut self, files: Vec<(PathBuf, (Seq, Seq))>) -> io::Result<Vec<PartFile>> {
        let mut parts = Vec::with_capacity(files.len());
        for (path, range) in files {
            let rows = match self.rows.get(&path) {
                Some(rows) => *rows,
                None => {
                    let rows = footer_rows(&path)?;
                    self.rows.insert(path.clone(), rows);
                    rows
                }
            };
            parts.push(PartFile { path, range, rows });
        }
        Ok(parts)
    }
}

fn footer_rows(path: &Path) -> io::Result<u64> {
    let reader = SerializedFileReader::new(File::open(path)?).map_err(io::Error::other)?;
    Ok(reader.metadata().file_metadata().num_rows().max(0) as u64)
}

/// Every partition directory: `tables/<table>/date=<date>/<column>=<value>`.
fn partition_dirs(history_dir: &Path) -> io::Result<Vec<PathBuf>> {
    let mut dirs = Vec::new();
    let root = tables_dir(history_dir);
    if !root.exists() {
        return Ok(dirs);
    }
    for table in subdirs(&root)? {
        for date in subdirs(&table)? {
            dirs.extend(subdirs(&date)?);
        }
    }
    Ok(dirs)
}

fn subdirs(dir: &Path) -> io::Result<Vec<PathBuf>> {
    let mut found = Vec::new();
    for entry in fs::read_dir(dir)? {
        let entry = entry?;
        if entry.file_type()?.is_dir() {
            found.push(entry.path());
        }
    }
    found.sort();
    Ok(found)
}

/// `2026-11-24` of `.../date=2026-11-24/instrument=BTC-USD`.
fn partition_date(dir: &Path) -> Option<&str> {
    dir.parent()?.file_name()?.to_str()?.strip_prefix("date=")
}

/// A partition's part files (`parse_part_name`), sorted by range.
fn part_files_in(dir: &Path) -> io::Result<Vec<(PathBuf, (Seq, Seq))>> {
    let mut found = Vec::new();
    for entry in fs::read_dir(dir)? {
        let entry = entry?;
        let name = entry.file_name();
        if let Some(range) = name.to_str().and_then(parse_part_name) {
            found.push((entry.path(), range));
        }
    }
    found.sort_by_key(|(_, range)| *range);
    Ok(found)
}

/// The first run of `needed` or more consecutive small files, at most about
/// `MERGED_ROWS_MAX` rows of them.
fn due_run(files: &[PartFile], needed: usize) -> Option<&[PartFile]> {
    let mut start = 0;
    while start < files.len() {
        if files[start].rows >= SMALL_FILE_ROWS {
            start += 1;
            continue;
        }
        let mut end = start;
        let mut rows = 0;
        while end < files.len() && files[end].rows < SMALL_FILE_ROWS && rows < MERGED_ROWS_MAX {
            rows += files[end].rows;
            end += 1;
        }
        if end - start >= needed {
            let run = &files[start..end];
            debug_assert!(run.iter().all(|file| file.rows < SMALL_FILE_ROWS));
            return Some(run);
        }
        start = end;
    }
    None
}

/// Writes the run's rows as one file and puts it in their place.
fn merge_run(dir: &Path, run: &[PartFile], lock: &FilesLock) -> io::Result<Merged> {
    let (Some(first), Some(last)) = (run.first(), run.last()) else {
        return Err(io::Error::other("an empty run to merge"));
    };
    // The run's files follow one another (sorted by range, none overlapping), so the
    // merged file's name covers exactly their commands.
    debug_assert!(run.windows(2).all(|pair| pair[0].range.1 < pair[1].range.0));
    let name = part_name(first.range.0, last.range.1);
    let final_path = dir.join(&name);
    let temporary = dir.join(format!(".{name}.tmp"));
    let rows = write_merged(&temporary, run)?;
    let bytes = fs::metadata(&temporary)?.len();
    {
        let _exclusive = lock.exclusive()?;
        fs::rename(&temporary, &final_path)?;
        for file in run {
            fs::remove_file(&file.path)?;
        }
        sync_dir(dir)?;
    }
    Ok(Merged { path: final_path, files_replaced: run.len(), rows, bytes })
}

/// The run's rows, file after file, into `path` (synced). Returns the row count.
fn write_merged(path: &Path, run: &[PartFile]) -> io::Result<u64> {
    let mut writer: Option<ArrowWriter<File>> = None;
    let mut rows = 0u64;
    for file in run {
        let reader = ParquetRecordBatchReaderBuilder::try_new(File::open(&file.path)?)
            .map_err(io::Error::other)?
            .with_batch_size(64 * 1024)
            .build()
            .map_err(io::Error::other)?;
        for batch in reader {
            let batch = batch.map_err(io::Error::other)?;
            if writer.is_none() {
                writer = Some(
                    ArrowWriter::try_new(
                        File::create(path)?,
                        batch.schema(),
                        Some(writer_properties()),
                    )
                    .map_err(io::Error::other)?,
                );
            }
            if let Some(writer) = writer.as_mut() {
                writer.write(&batch).map_err(io::Error::other)?;
            }
            rows += batch.num_rows() as u64;
        }
    }
    let Some(writer) = writer else {
        return Err(io::Error::other(format!("no rows to merge into {}", path.display())));
    };
    let file = writer.into_inner().map_err(io::Error::other)?;
    file.sync_all()?;
    Ok(rows)
}

/// Removes the part files a merge replaced but a crash left (their range lies within
/// another file's of the same partition). Returns how many went.
pub fn remove_superseded(history_dir: &Path) -> io::Result<usize> {
    let mut removed = 0;
    for dir in partition_dirs(history_dir)? {
        let mut files = part_files_in(&dir)?;
        // The widest first among equal starts: a merged file before the files it holds.
        files.sort_by_key(|(_, (first, last))| (*first, std::cmp::Reverse(*last)));
        let mut covered_until = Seq::ZERO;
        let mut changed = false;
        for (path, (first, last)) in files {
            if first <= covered_until && last <= covered_until {
                fs::remove_file(&path)?;
                removed += 1;
                changed = true;
            } else {
                covered_until = covered_until.max(last);
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

    fn part(first: u64, last: u64, rows: u64) -> PartFile {
        let range = (Seq(first), Seq(last));
        PartFile { path: PathBuf::from(part_name(range.0, range.1)), range, rows }
    }

    /// A range as plain numbers, for the assertions.
    fn plain((first, last): (Seq, Seq)) -> (u64, u64) {
        (first.0, last.0)
    }

    fn ranges(run: Option<&[PartFile]>) -> Vec<(u64, u64)> {
        run.map(|run| run.iter().map(|file| plain(file.range)).collect()).unwrap_or_default()
    }

    #[test]
    fn an_open_day_waits_for_enough_small_files_and_a_large_file_breaks_a_run() {
        let mut files: Vec<PartFile> = (0..15).map(|i| part(i * 10 + 1, i * 10 + 10, 5)).collect();
        assert!(due_run(&files, MERGE_FILES).is_none(), "15 small files wait");
        files.push(part(151, 160, 5));
        assert_eq!(ranges(due_run(&files, MERGE_FILES)).len(), MERGE_FILES);

        let mut broken: Vec<PartFile> = (0..8).map(|i| part(i * 10 + 1, i * 10 + 10, 5)).collect();
        broken.push(part(81, 90, SMALL_FILE_ROWS));
        broken.extend((9..17).map(|i| part(i * 10 + 1, i * 10 + 10, 5)));
        assert!(due_run(&broken, MERGE_FILES).is_none(), "two runs of 8, not one of 16");
        // A closed day merges each run of two or more.
        assert_eq!(ranges(due_run(&broken, 2)).first(), Some(&(1, 10)));
        assert_eq!(ranges(due_run(&broken, 2)).last(), Some(&(71, 80)));
        assert!(due_run(&[part(1, 10, 5)], 2).is_none(), "one file is already merged");
    }

    #[test]
    fn a_merge_stops_adding_files_past_its_size() {
        let files: Vec<PartFile> =
            (0..40).map(|i| part(i * 10 + 1, i * 10 + 10, SMALL_FILE_ROWS - 1)).collect();
        let run = due_run(&files, 2).unwrap();
        let rows: u64 = run.iter().map(|file| file.rows).sum();
        assert_eq!(run.len(), 5);
        assert!((MERGED_ROWS_MAX..MERGED_ROWS_MAX + SMALL_FILE_ROWS).contains(&rows));
    }

    fn candle(minute: u64) -> crate::rows::CandleRow {
        crate::rows::CandleRow {
            symbol: "BTC-USD".into(),
            start: 1_764_000_000_000_000_000 + minute * 60_000_000_000,
            open: 1,
            high: 2,
            low: 1,
            close: 2,
            volume: 3,
            notional: 5,
            trades: 2,
            last_seq: Seq(minute),
        }
    }

    #[test]
    fn a_merge_waits_for_the_readers_and_keeps_the_rows_in_order() {
        let history = tempfile::tempdir().unwrap();
        let dir = tables_dir(history.path()).join("candles/date=2025-11-24/instrument=BTC-USD");
        for minute in 1..=3u64 {
            let batch = crate::tables::candle_batch(&[candle(minute)]).unwrap();
            let range = (Seq(minute * 10 + 1), Seq(minute * 10 + 10));
            crate::files::write_part(&dir, range, &batch).unwrap();
        }
        // A newer day, so that this one is closed.
        let later = tables_dir(history.path()).join("candles/date=2025-11-25/instrument=BTC-USD");
        let batch = crate::tables::candle_batch(&[candle(2_000)]).unwrap();
        crate::files::write_part(&later, (Seq(41), Seq(50)), &batch).unwrap();

        let lock = FilesLock::new(history.path());
        let reading = lock.shared().unwrap();
        let merging = {
            let (history, lock) = (history.path().to_path_buf(), lock.clone());
            std::thread::spawn(move || {
                merge_next(&history, Seq(50), &lock, &mut RowCounts::default())
            })
        };
        // The merged file is written, then the merge waits for the reader to finish.
        let temporary = dir.join(format!(".{}.tmp", part_name(Seq(11), Seq(40))));
        while !temporary.exists() {
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
        assert_eq!(part_files_in(&dir).unwrap().len(), 3, "the reader sees the same files");
        drop(reading);
        let merged = merging.join().unwrap().unwrap().unwrap();
        assert_eq!((merged.files_replaced, merged.rows), (3, 3));
        let left: Vec<(u64, u64)> =
            part_files_in(&dir).unwrap().into_iter().map(|(_, range)| plain(range)).collect();
        assert_eq!(left, [(11, 40)]);
        let rows: Vec<u64> =
            ParquetRecordBatchReaderBuilder::try_new(File::open(&merged.path).unwrap())
                .unwrap()
                .build()
                .unwrap()
                .flat_map(|batch| {
                    let batch = batch.unwrap();
                    let column = batch.column_by_name("last_seq").unwrap().clone();
                    let values = arrow_array::cast::AsArray::as_primitive::<
                        arrow_array::types::UInt64Type,
                    >(&column)
                    .clone();
                    values.values().to_vec()
                })
                .collect();
        assert_eq!(rows, [1, 2, 3]);
        // The newest day's single file is not touched; nothing else is due.
        assert_eq!(
            merge_next(history.path(), Seq(50), &lock, &mut RowCounts::default()).unwrap(),
            None
        );
    }

    #[test]
    fn files_inside_a_merged_files_range_are_superseded() {
        let history = tempfile::tempdir().unwrap();
        let dir = tables_dir(history.path()).join("trades/date=2026-11-24/instrument=BTC-USD");
        fs::create_dir_all(&dir).unwrap();
        for (first, last) in [(1, 10), (11, 20), (21, 30), (1, 20), (31, 40)] {
            fs::write(dir.join(part_name(Seq(first), Seq(last))), b"x").unwrap();
        }
        assert_eq!(remove_superseded(history.path()).unwrap(), 2);
        let left: Vec<(u64, u64)> =
            part_files_in(&dir).unwrap().into_iter().map(|(_, range)| plain(range)).collect();
        assert_eq!(left, [(1, 20), (21, 30), (31, 40)]);
        assert_eq!(remove_superseded(history.path()).unwrap(), 0);
    }
}
