//! Fail-stop on storage errors: after a failed write, a failed sync or a full disk, no
//! further result is released, every waiting producer gets a clear `Failed` outcome,
//! later submissions are refused with the reason, and nothing that was released is lost.
//! A restart on the same directory recovers every released command with the same
//! outcome, and the same state as a straight replay of the journal.
//!
//! The faults are injected with `FaultSwitch`, and (when the tests run as root) also
//! produced for real by a small tmpfs that fills up.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command as Process;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bourse_core::format::{parse_line, state_digest, write_command};
use bourse_core::{Replay, Seq, TimestampNs};
use bourse_engine::{
    recover, Durability, Engine, EngineConfig, Outcome, Released, Session, SubmitError,
};
use bourse_journal::{decode_command, encode_command, scan_journal, FaultSwitch, TailPolicy};
use crossbeam_channel::{unbounded, Receiver};

/// How long any wait for the engine may take before the test calls it a hang.
const PATIENCE: Duration = Duration::from_secs(30);

/// Command number `index` of an endless, deterministic stream: assets, an instrument,
/// deposits, then orders (crossing often) and some cancels.
fn line(index: u64) -> String {
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
        ("alice", "buy", 100 + number % 7)
    } else {
        ("bob", "sell", 98 + number % 9)
    };
    format!(
        r#"{{"cmd":"order","account":"{account}","id":"o{number}","symbol":"BTC-USD","side":"{side}","type":"limit","price":"{price}","qty":"1.5"}}"#
    )
}

/// The journal payload of command `index`.
fn payload(index: u64) -> Vec<u8> {
    let text = line(index);
    let mut out = Vec::new();
    encode_command(&parse_line(&text).unwrap().command, &mut out).unwrap();
    out
}

/// Command `index` as a replay line stamped `ts`.
fn replay_line(index: u64, ts: u64) -> String {
    let text = line(index);
    let mut out = String::new();
    write_command(&mut out, &parse_line(&text).unwrap().command, Some(TimestampNs(ts)));
    out.trim_end().to_string()
}

fn config(dir: &Path) -> EngineConfig {
    let mut config = EngineConfig::new(dir);
    config.segment_bytes = 64 << 10;
    config.snapshot_every_commands = 0;
    config.queue_capacity = 4096;
    config.batch_commands_max = 256;
    config.render_events = true;
    config
}

/// What one command got.
#[derive(Clone, Debug)]
enum Got {
    Applied { seq: Seq, ts: TimestampNs, rendered: String },
    Failed(String),
}

/// Files each outcome of `released` under its correlation; a second outcome for the
/// same command is an error.
fn absorb(released: Released, got: &mut BTreeMap<u64, Got>) {
    for outcome in &released.outcomes {
        let entry = match outcome {
            Outcome::Applied(result) => Got::Applied {
                seq: result.seq,
                ts: result.ts,
                rendered: released.rendered_of(result).to_string(),
            },
            Outcome::Failed { reason, .. } => Got::Failed(reason.clone()),
        };
        let request = outcome.correlation().request;
        let previous = got.insert(request, entry);
        assert!(previous.is_none(), "two outcomes for command {request}");
    }
}

/// Submits the stream from command 0 on until the engine refuses with `Stopped` (or
/// `limit` commands were taken). Returns the session (kept alive so that no outcome
/// is dropped), how many submissions were taken, and the refusal's reason.
fn produce(session: Session, limit: u64) -> (Session, u64, Option<String>) {
    let mut submitted = 0;
    while submitted < limit {
        let text = line(submitted);
        let parsed = parse_line(&text).unwrap();
        match session.submit(&parsed.command, submitted) {
            Ok(_) => submitted += 1,
            Err(SubmitError::Busy { .. }) => std::thread::sleep(Duration::from_micros(50)),
            Err(SubmitError::Stopped(reason)) => return (session, submitted, Some(reason)),
            Err(other) => panic!("submission {submitted} refused: {other}"),
        }
    }
    (session, submitted, None)
}

/// Receives until `got` holds `count` outcomes.
fn receive_until(receiver: &Receiver<Released>, got: &mut BTreeMap<u64, Got>, count: usize) {
    let deadline = Instant::now() + PATIENCE;
    while got.len() < count {
        let left = deadline.saturating_duration_since(Instant::now());
        match receiver.recv_timeout(left) {
            Ok(released) => absorb(released, got),
            Err(_) => panic!("only {} of {count} outcomes came back: some were lost", got.len()),
        }
    }
}

/// A command that was released as applied.
#[derive(Clone, Debug)]
struct Applied {
    seq: Seq,
    ts: TimestampNs,
    rendered: String,
}

/// Checks the fail-stop promise on the outcomes of `submitted` commands (correlations
/// `0..submitted`, one session, so sequence order is submission order): every one has
/// exactly one outcome, the applied ones are a prefix (sequence numbers from 1), and
/// every later one failed with a reason naming the storage failure. Returns the
/// applied prefix.
fn check_fail_stop(got: &BTreeMap<u64, Got>, submitted: u64, cause: &str) -> Vec<Applied> {
    assert_eq!(got.len() as u64, submitted, "one outcome per submitted command");
    assert_eq!(got.keys().next_back().copied(), submitted.checked_sub(1));
    let mut applied = Vec::new();
    let mut first_failed = None;
    for (&correlation, outcome) in got {
        match outcome {
            Got::Applied { seq, ts, rendered } => {
                assert!(
                    first_failed.is_none(),
                    "command {correlation} was released as applied after command {first_failed:?} failed"
                );
                assert_eq!(*seq, Seq(correlation + 1), "sequence numbers follow submission order");
                applied.push(Applied { seq: *seq, ts: *ts, rendered: rendered.clone() });
            }
            Got::Failed(reason) => {
                first_failed.get_or_insert(correlation);
                assert!(
                    reason.contains("journal storage failed") && reason.contains(cause),
                    "command {correlation} failed with an unclear reason: {reason}"
                );
            }
        }
    }
    assert!(!applied.is_empty(), "no command was applied before the fault");
    assert!(first_failed.is_some(), "no command was in flight when the fault came");
    applied
}

/// After a fail-stop: the journal holds every applied command with its timestamp, then
/// (when `exact` is false) possibly some of the failed ones, in submission order; the
/// recovered state is a straight replay of the journal; the applied commands' events
/// are those of a replay of exactly the applied prefix; and an engine restarted
/// without faults starts from that state and goes on.
fn check_recovery(dir: &Path, applied: &[Applied], submitted: u64, exact: bool) {
    let applied_count = applied.len() as u64;
    // A replay of exactly the applied prefix gives the events that were released.
    let mut replay = Replay::new();
    for (index, command) in applied.iter().enumerate() {
        let mut events = String::new();
        replay.feed_line(&replay_line(index as u64, command.ts.0), &mut events);
        assert_eq!(events, command.rendered, "the events released for command {index}");
    }
    // The journal: the applied commands, then possibly failed ones, nothing else.
    let mut journal = Vec::new();
    scan_journal(&config(dir).journal_dir(), TailPolicy::ReadOnly, |header, body| {
        assert!(decode_command(body).is_ok());
        journal.push((header.seq, header.ts, body.to_vec()));
        Ok(())
    })
    .unwrap();
    let last_seq = journal.len() as u64;
    if exact {
        assert_eq!(last_seq, applied_count, "the journal holds exactly the applied commands");
    } else {
        assert!(
            (applied_count..=submitted).contains(&last_seq),
            "the journal holds {last_seq} commands; {applied_count} were applied, {submitted} submitted"
        );
    }
    for (index, (seq, ts, body)) in journal.iter().enumerate() {
        assert_eq!(*seq, Seq(index as u64 + 1));
        assert_eq!(*body, payload(index as u64), "record {seq} is not command {index}");
        if let Some(command) = applied.get(index) {
            assert_eq!((*seq, *ts), (command.seq, command.ts), "record {seq} as released");
        } else {
            replay.feed_line(&replay_line(index as u64, ts.0), &mut String::new());
        }
    }
    // Recovery rebuilds exactly that state, and does so again (it changed nothing).
    let journal_dir = config(dir).journal_dir();
    let snapshot_dir = config(dir).snapshot_dir();
    for _ in 0..2 {
        let recovered =
            recover(&journal_dir, &snapshot_dir, Default::default(), TailPolicy::ReadOnly).unwrap();
        assert_eq!(recovered.last_seq, Seq(last_seq));
        assert!(recovered.snapshot.is_none(), "no snapshot is taken after a failure");
        assert_eq!(state_digest(recovered.venue.exchange()), replay.digest());
    }
    // A restarted engine starts from it and goes on where the journal ends.
    let engine = Engine::start(config(dir)).unwrap();
    assert_eq!(engine.start_report().last_seq, Seq(last_seq));
    assert_eq!(engine.query(state_digest).unwrap(), replay.digest());
    let (sink, receiver) = unbounded();
    let session = engine.open_session(Arc::new(sink));
    let more = last_seq..last_seq + 20;
    for index in more.clone() {
        let text = line(index);
        session.submit(&parse_line(&text).unwrap().command, index).unwrap();
    }
    let mut got = BTreeMap::new();
    receive_until(&receiver, &mut got, more.clone().count());
    for (index, outcome) in got {
        let Got::Applied { seq, ts, rendered } = outcome else {
            panic!("command {index} failed after the restart: {outcome:?}")
        };
        assert_eq!(seq, Seq(index + 1));
        let mut events = String::new();
        replay.feed_line(&replay_line(index, ts.0), &mut events);
        assert_eq!(events, rendered);
    }
    assert_eq!(engine.query(state_digest).unwrap(), replay.digest());
    drop(session);
    engine.shutdown().unwrap();
    let recovered =
        recover(&journal_dir, &snapshot_dir, Default::default(), TailPolicy::ReadOnly).unwrap();
    assert_eq!(state_digest(recovered.venue.exchange()), replay.digest());
}

/// Runs the stream against an engine on `dir` and calls `trigger` once `applied_before`
/// commands were applied, while more are in flight; checks fail-stop; returns the
/// applied prefix and how many commands were submitted.
fn run_into_failure(
    config: EngineConfig,
    applied_before: usize,
    trigger: impl FnOnce(),
    cause: &str,
    limit: u64,
) -> (Vec<Applied>, u64) {
    let engine = Engine::start(config).unwrap();
    let (sink, receiver) = unbounded();
    let session = engine.open_session(Arc::new(sink));
    let producer = std::thread::spawn(move || produce(session, limit));
    let mut got = BTreeMap::new();
    let deadline = Instant::now() + PATIENCE;
    while got.values().filter(|got| matches!(got, Got::Applied { .. })).count() < applied_before {
        let left = deadline.saturating_duration_since(Instant::now());
        let released = receiver.recv_timeout(left).expect("the engine applies commands");
        absorb(released, &mut got);
    }
    trigger();
    let (session, submitted, refusal) = producer.join().unwrap();
    let refusal = refusal.expect("intake stops after the storage failure");
    assert!(refusal.contains("journal storage failed") && refusal.contains(cause), "{refusal}");
    receive_until(&receiver, &mut got, submitted as usize);
    let applied = check_fail_stop(&got, submitted, cause);
    // Later submissions are refused with the reason; the engine says why it stopped.
    let text = line(submitted);
    let refused = session.submit(&parse_line(&text).unwrap().command, submitted);
    assert_eq!(refused, Err(SubmitError::Stopped(refusal.clone())));
    assert_eq!(refused.unwrap_err().code(), "engine_stopped");
    assert_eq!(engine.failure(), Some(refusal.clone()));
    // The state can still be read; it is not released as results.
    assert!(engine.query(state_digest).is_some());
    assert_eq!(engine.shutdown(), Err(refusal));
    // Nothing else was released, even at shutdown.
    drop(session);
    while let Ok(released) = receiver.try_recv() {
        absorb(released, &mut got);
    }
    assert_eq!(got.len() as u64, submitted, "no outcome after the failure was reported");
    (applied, submitted)
}

fn fault_injection_case(inject: fn(&FaultSwitch), cause: &str, exact: bool) {
    let dir = tempfile::tempdir().unwrap();
    let faults = FaultSwitch::new();
    let mut faulty = config(dir.path());
    faulty.faults = Some(Arc::clone(&faults));
    let (applied, submitted) =
        run_into_failure(faulty, 2_000, || inject(&faults), cause, 10_000_000);
    eprintln!(
        "{cause}: {} applied, {} in flight failed",
        applied.len(),
        submitted - applied.len() as u64
    );
    check_recovery(dir.path(), &applied, submitted, exact);
}

#[test]
fn sync_failure_stops_intake_and_loses_nothing_released() {
    // The batch whose sync failed was written: after the restart it may be in the
    // state, though its commands were reported failed.
    fault_injection_case(FaultSwitch::fail_syncs, "injected fault", false);
}

#[test]
fn write_failure_stops_intake_and_loses_nothing_released() {
    fault_injection_case(FaultSwitch::fail_writes, "injected fault", true);
}

#[test]
fn full_disk_stops_intake_and_loses_nothing_released() {
    fault_injection_case(FaultSwitch::fill_disk, "No space left on device", true);
}

/// In `async` mode the journal is synced on a timer while intake is idle; a failure of
/// that sync stops the engine too, and shutting it down must not hang.
#[test]
fn failed_background_sync_in_async_mode_stops_and_shuts_down() {
    let dir = tempfile::tempdir().unwrap();
    let faults = FaultSwitch::new();
    let mut faulty = config(dir.path());
    // The first sync is due a second after the start: the commands below are written
    // and released before it, and the sync the timer then runs fails.
    faulty.durability = Durability::Async { interval: Duration::from_secs(1), commands: 1 << 40 };
    faulty.faults = Some(Arc::clone(&faults));
    let engine = Engine::start(faulty).unwrap();
    let (sink, receiver) = unbounded();
    let session = engine.open_session(Arc::new(sink));
    for index in 0..10 {
        let text = line(index);
        session.submit(&parse_line(&text).unwrap().command, index).unwrap();
    }
    let mut got = BTreeMap::new();
    receive_until(&receiver, &mut got, 10);
    assert!(got.values().all(|got| matches!(got, Got::Applied { .. })));
    assert_eq!(engine.stats().syncs, 0, "a sync ran before the fault was set: too slow a start");
    faults.fail_syncs();
    let deadline = Instant::now() + PATIENCE;
    while engine.failure().is_none() {
        assert!(Instant::now() < deadline, "the failed sync did not stop the engine");
        std::thread::sleep(Duration::from_millis(5));
    }
    let failure = engine.failure().unwrap();
    assert!(failure.contains("journal storage failed"), "{failure}");
    let text = line(10);
    assert_eq!(
        session.submit(&parse_line(&text).unwrap().command, 10),
        Err(SubmitError::Stopped(failure.clone()))
    );
    let (done, finished) = crossbeam_channel::bounded(1);
    std::thread::spawn(move || {
        let _ = done.send(engine.shutdown());
    });
    let shut_down = finished.recv_timeout(PATIENCE).expect("shutdown hangs after a failed sync");
    assert_eq!(shut_down, Err(failure));
}

/// A tmpfs mounted for one test, unmounted when it ends (also when it fails).
struct Tmpfs {
    dir: PathBuf,
}

impl Tmpfs {
    /// Mounts a tmpfs of `size` (as `mount` spells it) on `dir`; `Err` says why not.
    fn mount(dir: &Path, size: &str) -> Result<Tmpfs, String> {
        let uid = Process::new("id").arg("-u").output().map_err(|e| format!("`id -u`: {e}"))?;
        let uid = String::from_utf8_lossy(&uid.stdout).trim().to_string();
        if uid != "0" {
            return Err(format!("not running as root (uid {uid})"));
        }
        let status = Process::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"])
            .arg(dir)
            .output()
            .map_err(|error| format!("cannot run mount: {error}"))?;
        if !status.status.success() {
            return Err(format!(
                "mount -t tmpfs failed: {}",
                String::from_utf8_lossy(&status.stderr).trim()
            ));
        }
        Ok(Tmpfs { dir: dir.to_path_buf() })
    }

    fn resize(&self, size: &str) {
        let status = Process::new("mount")
            .args(["-o", &format!("remount,size={size}")])
            .arg(&self.dir)
            .status()
            .unwrap();
        assert!(status.success(), "remounting the tmpfs with size {size} failed");
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let unmounted = Process::new("umount").arg(&self.dir).status();
        if !unmounted.is_ok_and(|status| status.success()) {
            let _ = Process::new("umount").arg("-l").arg(&self.dir).status();
        }
    }
}

/// A real full file system: a 4 MiB tmpfs that the journal fills.
#[test]
fn real_full_filesystem_stops_intake_and_loses_nothing_released() {
    let tmp = tempfile::tempdir().unwrap();
    let mount_point = tmp.path().join("tmpfs");
    std::fs::create_dir(&mount_point).unwrap();
    let tmpfs = match Tmpfs::mount(&mount_point, "4m") {
        Ok(tmpfs) => tmpfs,
        Err(reason) => {
            eprintln!("skipped: real_full_filesystem_stops_intake_and_loses_nothing_released needs a tmpfs mount: {reason}");
            return;
        }
    };
    let dir = mount_point.join("data");
    let mut small = config(&dir);
    small.segment_bytes = 256 << 10;
    // The disk fills on its own, after some tens of thousands of commands.
    let (applied, submitted) =
        run_into_failure(small, 100, || {}, "No space left on device", 10_000_000);
    assert!(applied.len() > 1_000, "the disk filled after only {} commands", applied.len());
    eprintln!(
        "tmpfs full after {} applied commands; {} in flight failed",
        applied.len(),
        submitted - applied.len() as u64
    );
    // The full file system can still be read: recovery changes nothing.
    let recovered = recover(
        &config(&dir).journal_dir(),
        &config(&dir).snapshot_dir(),
        Default::default(),
        TailPolicy::ReadOnly,
    )
    .unwrap();
    assert!(recovered.last_seq >= Seq(applied.len() as u64));
    // With room again, the engine recovers every applied command and goes on.
    tmpfs.resize("64m");
    check_recovery(&dir, &applied, submitted, false);
    drop(tmpfs);
}
