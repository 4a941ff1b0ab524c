//! `bourse replay` as a user runs it: a file or standard input in, events on standard
//! output, the final state in a file, the digest, and a clear error for a bad path.

use std::io::Write;
use std::path::PathBuf;
use std::process::{Command, Stdio};

fn bourse() -> Command {
    Command::new(env!("CARGO_BIN_EXE_bourse"))
}

fn example() -> PathBuf {
    PathBuf::from(
        std::env::var("CARGO_MANIFEST_DIR")
            .unwrap_or_else(|_| env!("CARGO_MANIFEST_DIR").to_string()),
    )
    .join("../../examples/quickstart.jsonl")
}

fn events(stdout: &[u8]) -> Vec<serde_json::Value> {
    String::from_utf8_lossy(stdout)
        .lines()
        .map(|line| serde_json::from_str(line).expect("each event is a JSON line"))
        .collect()
}

#[test]
fn replays_a_file_prints_events_and_writes_the_final_state() {
    let state_path = std::env::temp_dir().join(format!("bourse-state-{}.json", std::process::id()));
    let output = bourse()
        .arg("replay")
        .arg(example())
        .arg("--state-out")
        .arg(&state_path)
        .output()
        .expect("bourse runs");
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    let events = events(&output.stdout);
    let verdicts = events
        .iter()
        .filter(|event| event["ev"] == "accepted" || event["ev"] == "rejected")
        .count();
    assert_eq!(verdicts, 17, "one verdict per command line");
    assert_eq!(events.iter().filter(|event| event["ev"] == "trade").count(), 3);
    assert!(events.iter().any(|event| event["reason"] == "malformed"));
    let state: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&state_path).expect("state written"))
            .expect("state is JSON");
    assert_eq!(state["books"]["BTC-USD"]["asks"][0]["id"], "ask-2");
    assert_eq!(state["fees"]["USD"], "60.01");
    std::fs::remove_file(&state_path).ok();
}

#[test]
fn standard_input_gives_the_same_events_and_digest_as_the_file() {
    let from_file = bourse().arg("replay").arg(example()).output().expect("bourse runs");
    let text = std::fs::read(example()).expect("example readable");
    let mut child = bourse()
        .args(["replay", "-"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("bourse runs");
    child.stdin.take().expect("stdin").write_all(&text).expect("write stdin");
    let from_stdin = child.wait_with_output().expect("bourse finishes");
    assert_eq!(from_file.stdout, from_stdin.stdout);

    let digest = |input: &str| {
        let output = bourse().args(["replay", "--digest", input]).output().expect("bourse runs");
        String::from_utf8(output.stdout).expect("utf-8")
    };
    let file_digest = digest(example().to_str().expect("utf-8 path"));
    assert!(
        file_digest.starts_with("sha256:") && file_digest.trim().len() == 7 + 64,
        "{file_digest}"
    );
    assert_eq!(file_digest, digest(example().to_str().expect("utf-8 path")), "deterministic");
}

#[test]
fn a_missing_file_is_a_clear_error_not_a_panic() {
    let output =
        bourse().args(["replay", "/nonexistent/commands.jsonl"]).output().expect("bourse runs");
    assert_eq!(output.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("cannot open /nonexistent/commands.jsonl"), "{stderr}");
    assert!(!stderr.contains("panicked"));
}

#[test]
fn replays_a_futures_stream_with_settlement_liquidation_and_positions() {
    let example = example().with_file_name("futures.jsonl");
    let state_path =
        std::env::temp_dir().join(format!("bourse-futures-state-{}.json", std::process::id()));
    let output = bourse()
        .arg("replay")
        .arg(&example)
        .arg("--state-out")
        .arg(&state_path)
        .output()
        .expect("bourse runs");
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    let events = events(&output.stdout);
    assert!(events.iter().all(|event| event["ev"] != "rejected"), "{events:#?}");
    let settled: Vec<_> = events.iter().filter(|event| event["ev"] == "settled").collect();
    // alice long 2 (a1), bob short 1 (b1), maker short 2 and long 1.
    assert_eq!(settled.len(), 4, "{settled:#?}");
    let liquidation = events
        .iter()
        .find(|event| event["ev"] == "trade" && event["taker_id"] == "liq-14-short")
        .expect("bob's short is bought back");
    assert_eq!(liquidation["price"], "75010");
    let state: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&state_path).unwrap()).unwrap();
    std::fs::remove_file(&state_path).ok();
    // alice: 2 long settled into history at 75100, then 1 closed (a3 at 74990).
    assert_eq!(
        state["positions"]["alice"]["SHFE.cu2501"]["long"],
        serde_json::json!({"history": [["75100", "1"]], "today": []})
    );
    assert!(state["positions"].get("bob").is_none(), "{}", state["positions"]);
}

#[test]
fn replays_spend_amount_market_buys() {
    let example = example().with_file_name("spend.jsonl");
    let state_path =
        std::env::temp_dir().join(format!("bourse-spend-state-{}.json", std::process::id()));
    let output = bourse()
        .arg("replay")
        .arg(&example)
        .arg("--state-out")
        .arg(&state_path)
        .output()
        .expect("bourse runs");
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    let events = events(&output.stdout);
    let done = |id: &str| {
        events
            .iter()
            .find(|event| event["ev"] == "done" && event["id"] == id)
            .unwrap_or_else(|| panic!("{id} is done: {events:#?}"))
    };
    // 1000 USDT: all of a1 (0.01 at 60000), then 66 lots of a2 (60010.5 a lot of 0.0001
    // costs 6.00105); the 3.9307 left buys less than a lot.
    assert_eq!(
        (&done("spend-1")["reason"], &done("spend-1")["filled"]),
        (&"filled".into(), &"0.0166".into())
    );
    // Less than a lot at the best ask: nothing bought.
    assert_eq!(done("spend-4")["reason"], "expired");
    let rejected: Vec<_> = events
        .iter()
        .filter(|event| event["ev"] == "rejected")
        .map(|event| (event["id"].as_str().unwrap_or(""), event["reason"].as_str().unwrap_or("")))
        .collect();
    assert_eq!(rejected, [("spend-2", "invalid_order"), ("spend-3", "invalid_order")]);
    let state: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&state_path).unwrap()).unwrap();
    std::fs::remove_file(&state_path).ok();
    assert_eq!(
        state["balances"]["alice"]["USDT"],
        serde_json::json!({"available": "503.9307", "held": "0"})
    );
}
