//! The recovery table of `docs/journal.md`, rows 15–20 (the ones about payloads and
//! snapshots; rows 1–14 are in `crates/journal/tests/recovery.rs`): one test per row,
//! named as in the table. Each builds a real data directory by running an `Engine`,
//! damages it the way the row describes, and checks the decision of `recover` and of
//! `Engine::start`: for a refusal its code (and where it applies, the file and offset)
//! and that nothing on disk changed; for a fallback the state it rebuilds.
//!
//! Then periodic snapshots: taken while commands flow, pruned with the journal segments
//! only they needed, and a restart from them gives the same state.

use std::collections::BTreeMap;
use std::fs;
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bourse_core::format::{parse_line, state_digest};
use bourse_core::{Seq, TimestampNs};
use bourse_engine::{
    recover, Engine, EngineConfig, Outcome, Recovered, RecoveryError, StartError, SubmitError,
};
use bourse_journal::segment::list_segments;
use bourse_journal::{
    list_snapshots, read_snapshot, scan_journal, write_snapshot, JournalError, JournalWriter,
    RecordBatch, TailPolicy, WriterOptions,
};
use crossbeam_channel::unbounded;

const PATIENCE: Duration = Duration::from_secs(30);

/// Command number `index` of a deterministic stream: assets, an instrument, deposits,
/// then orders and some cancels. `variant` changes the prices, so that two streams of
/// the same length are two different histories.
fn line(index: u64, variant: u64) -> String {
    const SETUP: [&str; 7] = [
        r#"{"cmd":"asset","asset":"USD","decimals":2}"#,
        r#"{"cmd":"asset","asset":"BTC","decimals":4}"#,
        r#"{"cmd":"instrument","symbol":"BTC-USD","base":"BTC","quote":"USD","tick":"1","lot":"0.01","min_qty":"0.01","max_qty":"1000","maker_fee_bps":5,"taker_fee_bps":10,"market_band_bps":1000}"#,
        r#"{"cmd":"deposit","account":"alice","asset":"USD","amount":"1000000000"}"#,
        r#"{"cmd":"deposit","account":"alice","asset":"BTC","amount":"10000000"}"#,
        r#"{"cmd":"deposit","account":"bob","asset":"USD","amount":"1000000000"}"#,
        r#"{"cmd":"deposit","account":"bob","asset":"BTC","amount":"10000000"}"#,
    ];
    if let Some(setup) = SETUP.get(index as usize) {
        return setup.to_string();
    }
    let number = index - SETUP.len() as u64;
    if number % 6 == 5 {
        let account = if (number / 2).is_multiple_of(2) { "alice" } else { "bob" };
        return format!(r#"{{"cmd":"cancel","account":"{account}","id":"o{}"}}"#, number / 2);
    }
    let (account, side, price) = if number.is_multiple_of(2) {
        ("alice", "buy", 100 + (number + variant) % 7)
    } else {
        ("bob", "sell", 98 + (number + variant) % 9)
    };
    format!(
        r#"{{"cmd":"order","account":"{account}","id":"o{number}","symbol":"BTC-USD","side":"{side}","type":"limit","price":"{price}","qty":"1.5"}}"#
    )
}

/// Small segments, no periodic snapshot, none at shutdown unless a test asks.
fn config(dir: &Path) -> EngineConfig {
    let mut config = EngineConfig::new(dir);
    config.segment_bytes = 1 << 20;
    config.snapshot_every_commands = 0;
    config.snapshot_on_shutdown = false;
    config
}

/// Submits commands `range` of stream `variant` and waits until each is applied, as
/// the records `range.start + 1 ..= range.end` of the journal.
fn run(engine: &Engine, range: Range<u64>, variant: u64) {
    let (sink, receiver) = unbounded();
    let session = engine.open_session(Arc::new(sink));
    for index in range.clone() {
        let text = line(index, variant);
        let command = parse_line(&text).unwrap().command;
        loop {
            match session.submit(&command, index) {
                Ok(_) => break,
                Err(SubmitError::Busy { .. }) => std::thread::sleep(Duration::from_micros(50)),
                Err(other) => panic!("command {index} refused: {other}"),
            }
        }
    }
    let mut next = range.start;
    while next < range.end {
        let released = receiver.recv_timeout(PATIENCE).expect("the engine applies commands");
        for outcome in &released.outcomes {
            let Outcome::Applied(result) = outcome else { panic!("{outcome:?}") };
            assert_eq!((result.correlation.request, result.seq), (next, Seq(next + 1)));
            next += 1;
        }
    }
}

/// Starts an engine on `config`, runs `range` of stream `variant`, shuts it down and
/// returns the state digest it had.
fn session(config: EngineConfig, range: Range<u64>, variant: u64) -> String {
    let engine = Engine::start(config).unwrap();
    run(&engine, range, variant);
    let digest = engine.query(state_digest).unwrap();
    engine.shutdown().unwrap();
    digest
}

fn with_shutdown_snapshot(dir: &Path) -> EngineConfig {
    let mut config = config(dir);
    config.snapshot_on_shutdown = true;
    config
}

fn recover_read_only(dir: &Path) -> Result<Recovered, RecoveryError> {
    let config = config(dir);
    recover(&config.journal_dir(), &config.snapshot_dir(), Default::default(), TailPolicy::ReadOnly)
}

fn digest_of(recovered: &Recovered) -> String {
    state_digest(recovered.venue.exchange())
}

/// Every file of the data directory and its bytes.
fn files(dir: &Path) -> BTreeMap<PathBuf, Vec<u8>> {
    let mut files = BTreeMap::new();
    for sub in ["journal", "snapshots"] {
        let Ok(listing) = fs::read_dir(dir.join(sub)) else { continue };
        for entry in listing {
            let path = entry.unwrap().path();
            files.insert(path.clone(), fs::read(&path).unwrap());
        }
    }
    files
}

fn copy_dir(from: &Path, to: &Path) {
    fs::create_dir_all(to).unwrap();
    for entry in fs::read_dir(from).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            copy_dir(&path, &to.join(path.file_name().unwrap()));
        } else {
            fs::copy(&path, to.join(path.file_name().unwrap())).unwrap();
        }
    }
}

/// Replaces `dir` with a copy of `backup`.
fn restore(backup: &Path, dir: &Path) {
    fs::remove_dir_all(dir).unwrap();
    copy_dir(backup, dir);
}

/// Checks that both `recover` and `Engine::start` refuse `dir` with `code`, change
/// nothing on disk, and returns the recovery error.
fn assert_refused(dir: &Path, code: &str) -> RecoveryError {
    let before = files(dir);
    let error = match recover_read_only(dir) {
        Ok(recovered) => panic!("recovered up to {} instead of refusing", recovered.last_seq),
        Err(error) => error,
    };
    assert_eq!(error.code(), code, "{error}");
    let started = Engine::start(with_shutdown_snapshot(dir));
    let Err(start_error) = started else { panic!("the engine started on a refused journal") };
    assert_eq!(start_error.code(), code, "{start_error}");
    assert!(matches!(start_error, StartError::Recovery(_)), "{start_error}");
    assert_eq!(files(dir), before, "a refused journal was changed");
    error
}

/// Row 15: a record whose checksum and chain are right but whose payload is not a
/// command is refused, naming the segment and the record's offset.
#[test]
fn record_without_a_command_is_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    session(config(dir), 0..40, 0);
    let journal_dir = config(dir).journal_dir();
    let report = scan_journal(&journal_dir, TailPolicy::Repair, |_, _| Ok(())).unwrap();
    assert_eq!(report.next_seq, Seq(41));
    let segment = report.segments.last().unwrap().clone();
    let options = WriterOptions { segment_bytes: 1 << 20, faults: None };
    let mut writer =
        JournalWriter::open(&journal_dir, &report, options, report.next_seq, report.last_crc)
            .unwrap();
    let mut batch = RecordBatch::default();
    batch
        .push(TimestampNs(report.last_ts.0 + 1), |out| {
            out.extend_from_slice(b"\xeenot a command");
            Ok::<(), ()>(())
        })
        .unwrap();
    writer.write(&mut batch).unwrap();
    writer.sync().unwrap();
    drop(writer);

    let error = assert_refused(dir, "bad_payload");
    let RecoveryError::Journal(journal_error) = &error else { panic!("{error:?}") };
    assert!(matches!(journal_error, JournalError::BadPayload { seq: Seq(41), .. }), "{error}");
    assert_eq!(journal_error.location(), Some((segment.path.as_path(), segment.end_offset)));
    let message = error.to_string();
    assert!(message.contains(&segment.path.display().to_string()), "{message}");
    assert!(message.contains(&format!("at byte {}", segment.end_offset)), "{message}");
    // The same through the engine.
    let Err(StartError::Recovery(RecoveryError::Journal(start_error))) = Engine::start(config(dir))
    else {
        panic!("the engine did not refuse the record")
    };
    assert_eq!(start_error.location(), journal_error.location());
}

/// Row 16: a damaged newest snapshot is skipped for the one before it (then for none);
/// the state is the same as without the damaged snapshot.
#[test]
fn damaged_newest_snapshot_falls_back() {
    let tmp = tempfile::tempdir().unwrap();
    let pristine = tmp.path().join("pristine");
    session(with_shutdown_snapshot(&pristine), 0..100, 0);
    let expected = session(with_shutdown_snapshot(&pristine), 100..200, 0);
    let snapshots = list_snapshots(&config(&pristine).snapshot_dir()).unwrap();
    let seqs: Vec<u64> = snapshots.iter().map(|snapshot| snapshot.seq.0).collect();
    assert_eq!(seqs, vec![200, 100]);
    let newest_name = snapshots[0].path.file_name().unwrap().to_owned();
    let older_name = snapshots[1].path.file_name().unwrap().to_owned();

    // The state without the newest snapshot: the older one and the journal after it.
    let without = tmp.path().join("without");
    copy_dir(&pristine, &without);
    fs::remove_file(config(&without).snapshot_dir().join(&newest_name)).unwrap();
    let reference = recover_read_only(&without).unwrap();
    assert_eq!(reference.snapshot.as_ref().map(|(_, meta)| meta.seq), Some(Seq(100)));
    assert_eq!(digest_of(&reference), expected);

    type Damage = fn(&Path);
    let damages: [(&str, Damage, &str); 3] = [
        ("a flipped byte in the body", flip_last_byte, "body's checksum"),
        ("a cut file", cut_in_half, "not as long as the header says"),
        ("a state that does not decode", garbage_state, "snapshot state"),
    ];
    for (what, damage, reason) in damages {
        let dir = tmp.path().join(format!("damaged {what}"));
        copy_dir(&pristine, &dir);
        let snapshot_dir = config(&dir).snapshot_dir();
        let newest = snapshot_dir.join(&newest_name);
        damage(&newest);
        let recovered = recover_read_only(&dir).unwrap();
        let (used, meta) = recovered.snapshot.as_ref().unwrap();
        assert_eq!((used, meta.seq), (&snapshot_dir.join(&older_name), Seq(100)), "{what}");
        assert_eq!(recovered.skipped_snapshots.len(), 1, "{what}");
        assert_eq!(recovered.skipped_snapshots[0].0, newest, "{what}");
        assert!(
            recovered.skipped_snapshots[0].1.contains(reason),
            "{what}: {:?}",
            recovered.skipped_snapshots
        );
        assert_eq!((recovered.replayed, recovered.last_seq), (100, Seq(200)), "{what}");
        assert_eq!(digest_of(&recovered), digest_of(&reference), "{what}");
        // The engine does the same, and says which snapshot it skipped.
        let engine = Engine::start(config(&dir)).unwrap();
        let report = engine.start_report().clone();
        assert_eq!(report.snapshot_seq, Some(Seq(100)), "{what}");
        assert_eq!(report.skipped_snapshots.len(), 1, "{what}");
        assert!(report.skipped_snapshots[0].contains(&newest.display().to_string()), "{what}");
        assert_eq!(engine.query(state_digest).unwrap(), expected, "{what}");
        engine.shutdown().unwrap();
        // With the older one damaged too, the journal alone rebuilds the state.
        damage(&snapshot_dir.join(&older_name));
        let recovered = recover_read_only(&dir).unwrap();
        assert!(recovered.snapshot.is_none(), "{what}");
        let skipped: Vec<&PathBuf> = recovered.skipped_snapshots.iter().map(|(p, _)| p).collect();
        assert_eq!(skipped, vec![&newest, &snapshot_dir.join(&older_name)], "{what}");
        assert_eq!((recovered.replayed, recovered.last_seq), (200, Seq(200)), "{what}");
        assert_eq!(digest_of(&recovered), expected, "{what}");
    }
}

fn flip_last_byte(path: &Path) {
    let mut bytes = fs::read(path).unwrap();
    *bytes.last_mut().unwrap() ^= 0x40;
    fs::write(path, bytes).unwrap();
}

fn cut_in_half(path: &Path) {
    let bytes = fs::read(path).unwrap();
    fs::write(path, &bytes[..bytes.len() / 2]).unwrap();
}

/// A snapshot file that checks (header, checksums, name) but whose body is no state.
fn garbage_state(path: &Path) {
    let (meta, _) = read_snapshot(path).unwrap();
    let written = write_snapshot(path.parent().unwrap(), meta, b"not a state at all").unwrap();
    assert_eq!(written, path);
}

/// Row 17: a `*.snapshot.tmp` left by a snapshot cut short is deleted at start, and is
/// never taken for a snapshot.
#[test]
fn leftover_snapshot_temp_file_is_removed() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let expected = session(with_shutdown_snapshot(dir), 0..100, 0);
    let snapshot_dir = config(dir).snapshot_dir();
    let snapshot = fs::read(snapshot_dir.join(format!("{:020}.snapshot", 100))).unwrap();
    // A newer snapshot cut short while it was written, and one that was complete but
    // not yet renamed.
    let cut = snapshot_dir.join(format!("{:020}.snapshot.tmp", 150));
    let unrenamed = snapshot_dir.join(format!("{:020}.snapshot.tmp", 160));
    let place_leftovers = || {
        fs::write(&cut, &snapshot[..snapshot.len() / 2]).unwrap();
        fs::write(&unrenamed, &snapshot).unwrap();
    };
    place_leftovers();

    // A read-only recovery leaves them, and does not use them.
    let recovered = recover_read_only(dir).unwrap();
    assert_eq!(recovered.removed_temporary_snapshots, 0);
    assert!(cut.exists() && unrenamed.exists());
    assert_eq!(recovered.snapshot.as_ref().map(|(_, meta)| meta.seq), Some(Seq(100)));
    assert!(recovered.skipped_snapshots.is_empty());
    assert_eq!(digest_of(&recovered), expected);

    // A repairing one deletes them.
    let config = config(dir);
    let recovered =
        recover(&config.journal_dir(), &snapshot_dir, Default::default(), TailPolicy::Repair)
            .unwrap();
    assert_eq!(recovered.removed_temporary_snapshots, 2);
    assert!(!cut.exists() && !unrenamed.exists());
    assert_eq!(digest_of(&recovered), expected);

    // So does the engine's start, which then goes on.
    place_leftovers();
    let engine = Engine::start(config).unwrap();
    assert!(!cut.exists() && !unrenamed.exists());
    assert_eq!(engine.start_report().snapshot_seq, Some(Seq(100)));
    assert_eq!(engine.query(state_digest).unwrap(), expected);
    run(&engine, 100..120, 0);
    engine.shutdown().unwrap();
    let names: Vec<String> = fs::read_dir(&snapshot_dir)
        .unwrap()
        .map(|entry| entry.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(names, vec![format!("{:020}.snapshot", 100)]);
}

/// Row 18: the journal's first record comes after the one following the snapshot (the
/// segments in between are gone).
#[test]
fn journal_starting_after_the_snapshot_is_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let mut small = with_shutdown_snapshot(dir);
    // Small segments and batches (a batch larger than a segment gets one of its own).
    small.segment_bytes = 4096;
    small.batch_commands_max = 16;
    session(small.clone(), 0..50, 0);
    small.snapshot_on_shutdown = false;
    session(small, 50..400, 0);
    let journal_dir = config(dir).journal_dir();
    let segments = list_segments(&journal_dir).unwrap();
    // Delete the segment holding record 51 (the first after the snapshot) and those
    // before it.
    let holding = segments.iter().rposition(|&(first_seq, _)| first_seq <= Seq(51)).unwrap();
    assert!(holding + 2 < segments.len(), "too few segments: {segments:?}");
    for (_, path) in &segments[..=holding] {
        fs::remove_file(path).unwrap();
    }
    let journal_first = segments[holding + 1].0;
    assert!(journal_first > Seq(51));

    let error = assert_refused(dir, "journal_gap");
    let RecoveryError::JournalGap { snapshot_seq, journal_first: found, .. } = error else {
        panic!("{error:?}")
    };
    assert_eq!((snapshot_seq, found), (Seq(50), journal_first));
}

/// Row 19: the journal ends before the snapshot's last record (an older copy of the
/// journal beside a newer snapshot).
#[test]
fn journal_ending_before_the_snapshot_is_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("data");
    session(config(&dir), 0..100, 0);
    let old_journal = tmp.path().join("old journal");
    copy_dir(&config(&dir).journal_dir(), &old_journal);
    session(with_shutdown_snapshot(&dir), 100..200, 0);
    restore(&old_journal, &config(&dir).journal_dir());

    let error = assert_refused(&dir, "journal_behind_snapshot");
    let RecoveryError::JournalBehindSnapshot { snapshot_seq, journal_last, .. } = error else {
        panic!("{error:?}")
    };
    assert_eq!((snapshot_seq, journal_last), (Seq(200), Seq(100)));
}

/// Row 20: the journal holds the snapshot's sequence numbers, with other records: the
/// snapshot was taken in another history of the same journal.
#[test]
fn snapshot_of_another_history_is_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("data");
    let journal_dir = config(&dir).journal_dir();
    let snapshot_dir = config(&dir).snapshot_dir();
    let snapshot_path = snapshot_dir.join(format!("{:020}.snapshot", 250));
    // The common past: records 1..=100.
    session(config(&dir), 0..100, 0);
    let common = tmp.path().join("common journal");
    copy_dir(&journal_dir, &common);
    // History A goes on to 250, where its snapshot is taken.
    session(with_shutdown_snapshot(&dir), 100..250, 0);
    let snapshot_a = fs::read(&snapshot_path).unwrap();
    let (meta_a, _) = read_snapshot(&snapshot_path).unwrap();
    fs::remove_file(&snapshot_path).unwrap();
    // History B: the same journal from record 100 on, with other commands, to 250.
    restore(&common, &journal_dir);
    session(config(&dir), 100..250, 7);
    // Same journal (id), same sequence numbers: only the chain tells them apart.
    fs::write(&snapshot_path, &snapshot_a).unwrap();
    let report = scan_journal(&journal_dir, TailPolicy::ReadOnly, |_, _| Ok(())).unwrap();
    assert_eq!((report.journal_id, report.next_seq), (Some(meta_a.journal_id), Seq(251)));
    assert_ne!(report.last_crc, meta_a.chain_crc);
    let error = assert_refused(&dir, "chain_break");
    assert!(matches!(error, RecoveryError::SnapshotChainBreak { seq: Seq(250), .. }), "{error:?}");

    // The same when the journal starts right after the snapshot: history B's own
    // snapshot at 250, its journal lost, a new journal from record 251 on...
    fs::remove_file(&snapshot_path).unwrap();
    session(with_shutdown_snapshot(&dir), 250..250, 7);
    assert!(snapshot_path.exists());
    fs::remove_dir_all(&journal_dir).unwrap();
    let expected = session(config(&dir), 250..270, 7);
    let recovered = recover_read_only(&dir).unwrap();
    assert_eq!((recovered.journal.first_seq, recovered.last_seq), (Some(Seq(251)), Seq(270)));
    assert_eq!(digest_of(&recovered), expected);
    // ... and history A's snapshot in place of B's.
    fs::write(&snapshot_path, &snapshot_a).unwrap();
    let error = assert_refused(&dir, "chain_break");
    assert!(matches!(error, RecoveryError::SnapshotChainBreak { seq: Seq(251), .. }), "{error:?}");
}

/// A journal lost (deleted) beside a snapshot: the engine starts from the snapshot and
/// a new journal chained to it, which the next start accepts with that snapshot.
#[test]
fn journal_lost_after_a_snapshot_goes_on_from_the_snapshot() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    session(with_shutdown_snapshot(dir), 0..100, 0);
    fs::remove_dir_all(config(dir).journal_dir()).unwrap();
    // No snapshot at this shutdown: the next start needs the old one and the new journal.
    let engine = Engine::start(config(dir)).unwrap();
    assert_eq!(engine.start_report().snapshot_seq, Some(Seq(100)));
    assert_eq!(engine.start_report().last_seq, Seq(100));
    run(&engine, 100..150, 0);
    let expected = engine.query(state_digest).unwrap();
    engine.shutdown().unwrap();
    let recovered = recover_read_only(dir).unwrap();
    assert_eq!(recovered.snapshot.as_ref().map(|(_, meta)| meta.seq), Some(Seq(100)));
    assert_eq!((recovered.journal.first_seq, recovered.last_seq), (Some(Seq(101)), Seq(150)));
    assert_eq!(digest_of(&recovered), expected);
    let engine = Engine::start(config(dir)).unwrap();
    assert_eq!(engine.query(state_digest).unwrap(), expected);
    engine.shutdown().unwrap();
}

/// Periodic snapshots: taken while commands flow, the older ones pruned to
/// `snapshots_retained` with the journal segments only they needed, and a restart from
/// the newest (or, without it, from the oldest retained) and the journal after it gives
/// the state the engine had.
#[test]
fn periodic_snapshots_are_taken_pruned_and_restarted_from() {
    const EVERY: u64 = 50;
    const ROUNDS: u64 = 6;
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let mut periodic = config(dir);
    periodic.segment_bytes = 8192;
    periodic.batch_commands_max = 16;
    periodic.snapshot_every_commands = EVERY;
    periodic.snapshots_retained = 2;
    let snapshot_dir = periodic.snapshot_dir();
    let journal_dir = periodic.journal_dir();
    let engine = Engine::start(periodic.clone()).unwrap();
    for round in 1..=ROUNDS {
        // A snapshot is due every EVERY commands; the next round waits for it, so
        // snapshots fall exactly on multiples of EVERY.
        run(&engine, (round - 1) * EVERY..round * EVERY, 0);
        let deadline = Instant::now() + PATIENCE;
        while engine.stats().snapshots < round {
            assert!(Instant::now() < deadline, "no snapshot after {} commands", round * EVERY);
            std::thread::sleep(Duration::from_millis(5));
        }
        let stats = engine.stats();
        assert_eq!((stats.snapshots, stats.last_snapshot_seq), (round, Seq(round * EVERY)));
        assert_eq!(stats.snapshot_failures, 0);
        let kept: Vec<u64> =
            list_snapshots(&snapshot_dir).unwrap().iter().map(|s| s.seq.0).collect();
        let expected: Vec<u64> = (1..=round).rev().take(2).map(|r| r * EVERY).collect();
        assert_eq!(kept, expected, "snapshots kept after round {round}");
        // No segment that the oldest kept snapshot covers entirely is left, and the
        // journal still holds every record after it.
        let oldest = *kept.last().unwrap();
        let segments = list_segments(&journal_dir).unwrap();
        assert!(segments[0].0 <= Seq(oldest + 1), "records after {oldest} deleted: {segments:?}");
        if let Some(second) = segments.get(1) {
            assert!(second.0 - 1 > Seq(oldest), "segment covered by {oldest} kept: {segments:?}");
        }
        // What was pruned is gone from the disk too, not only from the listings.
        for pruned_dir in [&journal_dir, &snapshot_dir] {
            let retired: Vec<_> = fs::read_dir(pruned_dir)
                .unwrap()
                .map(|entry| entry.unwrap().path())
                .filter(|path| path.to_string_lossy().ends_with(".retired"))
                .collect();
            assert!(retired.is_empty(), "left behind: {retired:?}");
        }
    }
    let segments = list_segments(&journal_dir).unwrap();
    assert!(segments[0].0 > Seq(1), "no segment was ever deleted: {segments:?}");
    // Some commands after the last snapshot (fewer than make one due).
    let last = ROUNDS * EVERY + 20;
    run(&engine, ROUNDS * EVERY..last, 0);
    let expected = engine.query(state_digest).unwrap();
    engine.shutdown().unwrap();
    assert_eq!(
        list_snapshots(&snapshot_dir).unwrap().iter().map(|s| s.seq.0).collect::<Vec<_>>(),
        vec![ROUNDS * EVERY, (ROUNDS - 1) * EVERY]
    );

    // The restart: the newest snapshot and the journal after it.
    let engine = Engine::start(periodic.clone()).unwrap();
    let report = engine.start_report().clone();
    assert_eq!(report.snapshot_seq, Some(Seq(ROUNDS * EVERY)));
    assert_eq!((report.replayed, report.last_seq), (20, Seq(last)));
    assert_eq!(engine.query(state_digest).unwrap(), expected);
    engine.shutdown().unwrap();

    // Without the newest, the oldest retained snapshot and the journal give it too.
    fs::remove_file(snapshot_dir.join(format!("{:020}.snapshot", ROUNDS * EVERY))).unwrap();
    let recovered = recover_read_only(dir).unwrap();
    assert_eq!(
        recovered.snapshot.as_ref().map(|(_, meta)| meta.seq),
        Some(Seq((ROUNDS - 1) * EVERY))
    );
    assert_eq!((recovered.replayed, recovered.last_seq), (EVERY + 20, Seq(last)));
    assert_eq!(digest_of(&recovered), expected);
}

/// Submits `lines` in order and waits until each is applied.
fn run_lines(engine: &Engine, lines: &[String]) {
    let commands: Vec<_> = lines.iter().map(|text| parse_line(text).unwrap().command).collect();
    run_commands(engine, &commands);
}

fn run_commands(engine: &Engine, commands: &[bourse_core::Command<'_>]) {
    let (sink, receiver) = unbounded();
    let session = engine.open_session(Arc::new(sink));
    for (index, command) in commands.iter().enumerate() {
        session.submit(command, index as u64).unwrap();
    }
    let mut applied = 0;
    while applied < commands.len() {
        let released = receiver.recv_timeout(PATIENCE).expect("the engine applies commands");
        applied += released.outcomes.len();
    }
}

/// An amend naming the order's new whole quantity (FIX's replace; the replay format has
/// no such command) is journaled as it came and recovers to the same state, from the
/// journal and from a snapshot: what it left open is worked out again on replay from
/// the same fills.
#[test]
fn an_amend_to_a_whole_quantity_recovers_to_the_same_state() {
    use bourse_core::command::{AmendCommand, AmendQtyKind};
    use bourse_core::{Command, Decimal};
    let mut commands: Vec<Command<'static>> =
        (0..7).map(|index| parse_line(&line(index, 0)).unwrap().command.into_owned()).collect();
    for text in [
        r#"{"cmd":"order","account":"alice","id":"a1","symbol":"BTC-USD","side":"sell","type":"limit","price":"100","qty":"3"}"#,
        r#"{"cmd":"order","account":"bob","id":"b1","symbol":"BTC-USD","side":"buy","type":"limit","price":"100","qty":"1.25"}"#,
    ] {
        commands.push(parse_line(text).unwrap().command.into_owned());
    }
    // 2.5 in all, 1.25 filled: 1.25 left open.
    commands.push(Command::Amend(AmendCommand {
        account: "alice".into(),
        id: "a1".into(),
        price: None,
        qty: Some(Decimal::parse("2.5").unwrap()),
        qty_kind: AmendQtyKind::Total,
    }));
    for snapshot in [false, true] {
        let dir = tempfile::tempdir().unwrap();
        let mut config = config(dir.path());
        config.snapshot_on_shutdown = snapshot;
        let engine = Engine::start(config).unwrap();
        run_commands(&engine, &commands);
        let live = engine.query(state_digest).unwrap();
        let asks = engine
            .query(|exchange| {
                bourse_core::format::state_document(exchange)["books"]["BTC-USD"]["asks"].clone()
            })
            .unwrap();
        let ask = &asks[0];
        assert_eq!(asks.as_array().map(Vec::len), Some(1), "{asks}");
        assert_eq!((&ask["id"], &ask["price"]), (&"a1".into(), &"100".into()), "{asks}");
        assert_eq!(ask["qty"], "1.25", "2.5 in all less 1.25 filled: {asks}");
        engine.shutdown().unwrap();
        let recovered = recover_read_only(dir.path()).unwrap();
        assert_eq!(digest_of(&recovered), live, "snapshot at shutdown: {snapshot}");
    }
}

#[test]
fn a_futures_stream_recovers_to_the_same_state_from_the_journal_and_from_a_snapshot() {
    let example = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/futures.jsonl");
    let lines: Vec<String> =
        fs::read_to_string(example).unwrap().lines().map(str::to_string).collect();
    for snapshot in [false, true] {
        let dir = tempfile::tempdir().unwrap();
        let mut config = config(dir.path());
        config.snapshot_on_shutdown = snapshot;
        let engine = Engine::start(config).unwrap();
        run_lines(&engine, &lines);
        let live = engine.query(state_digest).unwrap();
        let positions = engine
            .query(|exchange| bourse_core::format::state_document(exchange)["positions"].clone())
            .unwrap();
        assert!(positions["alice"]["SHFE.cu2501"]["long"].is_object(), "{positions}");
        engine.shutdown().unwrap();
        let recovered = recover_read_only(dir.path()).unwrap();
        assert_eq!(digest_of(&recovered), live, "snapshot at shutdown: {snapshot}");
    }
}
