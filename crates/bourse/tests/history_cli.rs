//! The history as an operator meets it: `bourse history sync` killed with SIGKILL again
//! and again while it commits, then run to the end, writes exactly the rows of one
//! uninterrupted run, nothing duplicated or missing (compared table by table with
//! `bourse query`); the lookups answer from the index; `bourse query` reports bad SQL
//! with its code.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use bourse_history::sample::{trading, write_journal};

fn bourse() -> Command {
    Command::new(env!("CARGO_BIN_EXE_bourse"))
}

fn sync(data: &Path, commit_rows: usize) {
    let output = bourse()
        .args(["history", "sync", "--commit-rows", &commit_rows.to_string(), "--data-dir"])
        .arg(data)
        .output()
        .unwrap();
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
}

fn query(data: &Path, sql: &str, format: &str) -> String {
    let output = bourse()
        .args(["query", "--format", format, "--data-dir"])
        .arg(data)
        .arg(sql)
        .output()
        .unwrap();
    assert!(output.status.success(), "{sql}: {}", String::from_utf8_lossy(&output.stderr));
    String::from_utf8(output.stdout).unwrap()
}

/// Every table in a total order, as CSV.
fn dump(data: &Path) -> Vec<(String, String)> {
    [
        ("order_events", "seq, order_id, client_order_id"),
        ("orders", "order_id"),
        ("trades", "seq, trade_index"),
        ("ledger", "seq, move_index"),
        ("candles", "symbol, start"),
    ]
    .iter()
    .map(|(table, order)| {
        let csv = query(data, &format!("SELECT * FROM {table} ORDER BY {order}"), "csv");
        (table.to_string(), csv)
    })
    .collect()
}

#[test]
fn a_sync_killed_again_and_again_writes_every_row_exactly_once() {
    let lines = trading(23, 30_000);
    let whole = tempfile::tempdir().unwrap();
    write_journal(&whole.path().join("journal"), &lines).unwrap();
    sync(whole.path(), 2_000);

    let killed = tempfile::tempdir().unwrap();
    let data = killed.path();
    write_journal(&data.join("journal"), &lines).unwrap();
    let mut kills = 0;
    for delay_ms in [150u64, 90, 260, 40, 180, 120] {
        let mut child = bourse()
            .args(["history", "sync", "--commit-rows", "2000", "--data-dir"])
            .arg(data)
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        std::thread::sleep(Duration::from_millis(delay_ms));
        if child.try_wait().unwrap().is_none() {
            child.kill().unwrap(); // SIGKILL
            kills += 1;
        }
        child.wait().unwrap();
    }
    assert!(kills >= 3, "the sync finished before most kills ({kills}): make the journal longer");
    sync(data, 2_000);

    let (expected, actual) = (dump(whole.path()), dump(data));
    for ((table, left), (_, right)) in expected.iter().zip(&actual) {
        assert!(left.lines().count() > 10, "{table} has {} rows", left.lines().count());
        assert_eq!(left.lines().count(), right.lines().count(), "{table}: rows");
        assert!(left == right, "{table} differs after the kills");
    }
    let status = bourse().args(["history", "status", "--data-dir"]).arg(data).output().unwrap();
    let status = String::from_utf8(status.stdout).unwrap();
    assert!(status.contains(&format!("committed_seq {}", lines.len())), "{status}");
}

#[test]
fn lookups_and_query_errors() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path();
    write_journal(&data.join("journal"), &trading(5, 3_000)).unwrap();
    sync(data, 1_000_000);

    // An order with fills: its latest state by id, and the fills of its account.
    let found = query(
        data,
        "SELECT maker_order_id, maker_account, trade_id FROM trades ORDER BY seq DESC LIMIT 1",
        "csv",
    );
    let row: Vec<&str> = found.lines().nth(1).unwrap().split(',').collect();
    let (order_id, account, trade_id) = (row[0], row[1], row[2]);
    let order =
        bourse().args(["history", "order", order_id, "--data-dir"]).arg(data).output().unwrap();
    assert!(order.status.success());
    let order: serde_json::Value = serde_json::from_slice(&order.stdout).unwrap();
    assert_eq!(order["order_id"].to_string(), order_id);
    assert_eq!(order["account"], account);
    let trade =
        bourse().args(["history", "trade", trade_id, "--data-dir"]).arg(data).output().unwrap();
    let trade: serde_json::Value = serde_json::from_slice(&trade.stdout).unwrap();
    assert_eq!(trade["trade_id"], trade_id);
    let fills = bourse()
        .args(["history", "fills", account, "--limit", "3", "--data-dir"])
        .arg(data)
        .output()
        .unwrap();
    let fills: Vec<serde_json::Value> = String::from_utf8(fills.stdout)
        .unwrap()
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect();
    assert_eq!(fills.len(), 3);
    assert_eq!(fills[0]["trade_id"], trade_id, "the newest fill first");

    let missing =
        bourse().args(["history", "order", "999999999", "--data-dir"]).arg(data).output().unwrap();
    assert_eq!(missing.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&missing.stderr).contains("no such order"));

    let bad = bourse()
        .args(["query", "--data-dir"])
        .arg(data)
        .arg("SELEC count(*) FROM trades")
        .output()
        .unwrap();
    assert_eq!(bad.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&bad.stderr).contains("sql_error"),
        "{}",
        String::from_utf8_lossy(&bad.stderr)
    );
    let table = query(data, "SELECT count(*) AS trades FROM trades", "table");
    assert!(table.contains("| trades |"), "{table}");
}
