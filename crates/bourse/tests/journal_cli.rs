//! The journal tools as an operator runs them against a real data directory, the crash
//! harness for a few cycles (`bourse bench crash --cycles 100` is the full run), and the
//! durable pipeline bench on a small workload.

use std::io::Write;
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::Arc;

use bourse_core::format::{parse_line, state_digest};
use bourse_engine::{Engine, EngineConfig, Released};

fn bourse() -> Command {
    Command::new(env!("CARGO_BIN_EXE_bourse"))
}

fn example_lines() -> Vec<String> {
    let path = Path::new(
        &std::env::var("CARGO_MANIFEST_DIR")
            .unwrap_or_else(|_| env!("CARGO_MANIFEST_DIR").to_string()),
    )
    .join("../../examples/quickstart.jsonl");
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        // A gateway never submits a line that does not parse.
        .filter(|line| parse_line(line).is_ok())
        .map(str::to_string)
        .collect()
}

/// Runs the example through a durable engine in `dir`; returns the live state digest.
fn run_engine(dir: &Path, lines: &[String]) -> String {
    let mut config = EngineConfig::new(dir);
    config.segment_bytes = 1 << 16;
    let engine = Engine::start(config).unwrap();
    let (sink, outcomes) = crossbeam_channel::unbounded::<Released>();
    let session = engine.open_session(Arc::new(sink));
    for (index, line) in lines.iter().enumerate() {
        session.submit(&parse_line(line).unwrap().command, index as u64).unwrap();
    }
    let mut received = 0;
    while received < lines.len() {
        received += outcomes.recv().unwrap().outcomes.len();
    }
    let digest = engine.query(state_digest).unwrap();
    engine.shutdown().unwrap();
    digest
}

#[test]
fn export_replays_to_the_live_digest() {
    let dir = tempfile::tempdir().unwrap();
    let lines = example_lines();
    let live = run_engine(dir.path(), &lines);
    let export = bourse().args(["journal", "export"]).arg(dir.path()).output().unwrap();
    assert!(export.status.success(), "{}", String::from_utf8_lossy(&export.stderr));
    let exported = String::from_utf8(export.stdout).unwrap();
    assert_eq!(exported.lines().count(), lines.len());
    assert!(exported.lines().all(|line| line.contains("\"ts\":")), "timestamps are exported");
    let mut replay = bourse()
        .args(["replay", "-", "--digest"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    replay.stdin.take().unwrap().write_all(exported.as_bytes()).unwrap();
    let output = replay.wait_with_output().unwrap();
    assert!(output.status.success());
    assert_eq!(String::from_utf8(output.stdout).unwrap().trim(), live);
}

#[test]
fn verify_names_the_damage_and_repair_cuts_there_with_a_backup() {
    let dir = tempfile::tempdir().unwrap();
    let lines = example_lines();
    run_engine(dir.path(), &lines);
    let verify = bourse().args(["journal", "verify"]).arg(dir.path()).output().unwrap();
    assert!(verify.status.success(), "{}", String::from_utf8_lossy(&verify.stderr));
    assert!(String::from_utf8_lossy(&verify.stdout).contains("ok: recovery would rebuild"));

    // Damage the payload of the fifth record, with records after it. (All sixteen were
    // one batch, so without the shutdown snapshot this would pass for a torn tail; the
    // snapshot shows they were durable.)
    let segment = std::fs::read_dir(dir.path().join("journal"))
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .find(|path| path.extension().is_some_and(|extension| extension == "journal"))
        .unwrap();
    let mut bytes = std::fs::read(&segment).unwrap();
    let mut offset = 64;
    for _ in 0..4 {
        let length =
            u32::from_le_bytes(bytes[offset + 4..offset + 8].try_into().unwrap()) & 0x3fff_ffff;
        offset += (32 + length as usize).div_ceil(8) * 8;
    }
    bytes[offset + 33] ^= 0xff;
    std::fs::write(&segment, &bytes).unwrap();

    let verify = bourse().args(["journal", "verify"]).arg(dir.path()).output().unwrap();
    assert!(!verify.status.success());
    let message = String::from_utf8_lossy(&verify.stderr);
    assert!(message.contains("damaged_record"), "{message}");
    assert!(message.contains(&format!("at byte {offset}")), "{message}");
    assert!(message.contains(&segment.display().to_string()), "{message}");

    let repair = bourse().args(["journal", "repair"]).arg(dir.path()).output().unwrap();
    assert!(repair.status.success(), "{}", String::from_utf8_lossy(&repair.stderr));
    assert!(Path::new(&format!("{}.bak", segment.display())).exists(), "a backup is kept");
    // The snapshot taken at shutdown holds the state beyond the cut, so the journal is
    // moved aside and the exchange starts from the snapshot.
    let verify = bourse().args(["journal", "verify"]).arg(dir.path()).output().unwrap();
    assert!(verify.status.success(), "{}", String::from_utf8_lossy(&verify.stderr));
    let message = String::from_utf8_lossy(&verify.stdout);
    assert!(message.contains(&format!("after record {}", lines.len())), "{message}");
    // And it does start there, and goes on.
    run_engine(dir.path(), &lines[..0]);
    let verify = bourse().args(["journal", "verify"]).arg(dir.path()).output().unwrap();
    assert!(verify.status.success(), "{}", String::from_utf8_lossy(&verify.stderr));
}

#[test]
fn crash_harness_loses_nothing_over_a_few_kill_cycles() {
    let output = bourse()
        .args(["bench", "crash", "--cycles", "4", "--max-life-ms", "500"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stderr}");
    let summary = String::from_utf8(output.stdout).unwrap();
    assert!(summary.starts_with("crash: 4 cycles"), "{summary}");
    assert!(summary.contains("nothing lost"), "{summary}");
}

#[test]
fn inspect_prints_each_record_with_its_command() {
    let dir = tempfile::tempdir().unwrap();
    let lines = example_lines();
    run_engine(dir.path(), &lines);
    let output = bourse()
        .args(["journal", "inspect", "--from", "2", "--count", "3"])
        .arg(dir.path())
        .output()
        .unwrap();
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    let text = String::from_utf8(output.stdout).unwrap();
    let records: Vec<serde_json::Value> = text
        .lines()
        .filter(|line| line.starts_with('{'))
        .map(|line| serde_json::from_str(line).unwrap())
        .collect();
    assert_eq!(
        records.iter().map(|record| record["seq"].as_u64().unwrap()).collect::<Vec<_>>(),
        vec![2, 3, 4]
    );
    let second = parse_line(&lines[1]).unwrap().command;
    let printed_line = records[0]["command"].to_string();
    assert_eq!(parse_line(&printed_line).unwrap().command, second);
    assert!(text.contains(&format!("journal: {} records", lines.len())), "{text}");
}

/// `bourse bench durable` (the instrument of the durability targets) runs end to end in
/// each mode on a small workload and reports consistent figures.
#[test]
fn bench_durable_reports_throughput_latency_and_what_late_commands_met() {
    for mode in ["sync", "async", "none"] {
        let output = bourse()
            .args(["bench", "durable", "--mode", mode, "--commands", "20000", "--json"])
            .output()
            .unwrap();
        assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
        let report: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
        let number =
            |key: &str| report[key].as_f64().unwrap_or_else(|| panic!("{key} missing in {report}"));
        assert_eq!(report["mode"], mode);
        assert_eq!(number("commands"), 20_000.0);
        assert!(number("commands_per_sec") > 0.0);
        assert!(number("open_loop_rate") > 0.0);
        assert!(number("p50_ns") <= number("p99_ns") && number("p99_ns") <= number("max_ns"));
        assert_eq!(
            number("late_commands"),
            number("late_with_slow_sync") + number("late_queued") + number("late_other")
        );
        match mode {
            "sync" => assert!(number("syncs") > 0.0 && number("mean_batch") > 0.0),
            "none" => assert_eq!(number("syncs"), 0.0),
            _ => {}
        }
    }
}
