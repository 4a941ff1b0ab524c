//! The history's files read by independent readers: pyarrow and DuckDB (installed from
//! PyPI into a virtual environment under the target directory, once) count the rows
//! of every table and sum the trades and the ledger, and must find exactly what
//! `bourse query` answers. Needs python3 with venv and access to PyPI (or
//! `BOURSE_PYTHON` naming a python that has pyarrow and duckdb).

use std::path::{Path, PathBuf};
use std::process::Command;

use bourse_history::sample::{trading, write_journal};
use serde_json::Value;

fn bourse() -> Command {
    Command::new(env!("CARGO_BIN_EXE_bourse"))
}

fn query_json(data: &Path, sql: &str) -> Vec<Value> {
    let output = bourse()
        .args(["query", "--format", "json", "--data-dir"])
        .arg(data)
        .arg(sql)
        .output()
        .unwrap();
    assert!(output.status.success(), "{sql}: {}", String::from_utf8_lossy(&output.stderr));
    serde_json::from_slice::<Value>(&output.stdout).unwrap().as_array().unwrap().clone()
}

/// A python with pyarrow and duckdb: `BOURSE_PYTHON`, or a virtual environment made
/// once beside the test binaries.
fn python() -> PathBuf {
    if let Ok(python) = std::env::var("BOURSE_PYTHON") {
        return PathBuf::from(python);
    }
    let target = PathBuf::from(env!("CARGO_BIN_EXE_bourse")).parent().unwrap().to_path_buf();
    let venv = target.join("interop-venv");
    let python = venv.join("bin").join("python");
    let ready = |python: &Path| {
        Command::new(python)
            .args(["-c", "import pyarrow, duckdb"])
            .status()
            .is_ok_and(|status| status.success())
    };
    if ready(&python) {
        return python;
    }
    let made = Command::new("python3")
        .arg("-m")
        .arg("venv")
        .arg(&venv)
        .status()
        .expect("python3 is needed");
    assert!(made.success(), "python3 -m venv failed");
    let installed = Command::new(&python)
        .args([
            "-m",
            "pip",
            "install",
            "--quiet",
            "--disable-pip-version-check",
            "pyarrow",
            "duckdb",
        ])
        .status()
        .unwrap();
    assert!(installed.success(), "pip install pyarrow duckdb failed (PyPI needed)");
    assert!(ready(&python));
    python
}

/// A decimal as JSON gives it (string or number), without trailing zeros.
fn decimal(value: &Value) -> String {
    let text = match value {
        Value::String(text) => text.clone(),
        Value::Number(number) => number.to_string(),
        Value::Null => "0".to_string(),
        other => panic!("not a decimal: {other}"),
    };
    if text.contains('.') {
        let trimmed = text.trim_end_matches('0').trim_end_matches('.');
        if trimmed == "-0" {
            "0".to_string()
        } else {
            trimmed.to_string()
        }
    } else {
        text
    }
}

#[test]
fn pyarrow_and_duckdb_read_what_bourse_query_answers() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path();
    write_journal(&data.join("journal"), &trading(31, 6_000)).unwrap();
    let synced = bourse()
        .args(["history", "sync", "--commit-rows", "5000", "--data-dir"])
        .arg(data)
        .output()
        .unwrap();
    assert!(synced.status.success(), "{}", String::from_utf8_lossy(&synced.stderr));

    // Bourse's own answers.
    let mut rows = serde_json::Map::new();
    for table in ["order_events", "orders", "trades", "ledger", "candles"] {
        let answer = query_json(data, &format!("SELECT count(*) AS n FROM {table}"));
        let count = answer[0]["n"].as_u64().unwrap();
        assert!(count > 0, "{table} is empty");
        rows.insert(table.to_string(), Value::from(count));
    }
    let mut trades = serde_json::Map::new();
    for row in query_json(
        data,
        "SELECT symbol, sum(qty) AS qty, sum(notional) AS notional FROM trades GROUP BY symbol",
    ) {
        let symbol = row["symbol"].as_str().unwrap().to_string();
        trades.insert(symbol, Value::from(vec![decimal(&row["qty"]), decimal(&row["notional"])]));
    }
    let mut ledger = serde_json::Map::new();
    for row in query_json(
        data,
        "SELECT asset, sum(available_delta + held_delta + fee) AS net FROM ledger GROUP BY asset",
    ) {
        ledger
            .insert(row["asset"].as_str().unwrap().to_string(), Value::from(decimal(&row["net"])));
    }
    let finished = query_json(data, "SELECT count(DISTINCT order_id) AS n FROM orders")[0]["n"]
        .as_u64()
        .unwrap();
    let ours = serde_json::json!({
        "rows": rows,
        "trades": trades,
        "ledger": ledger,
        "finished_orders": finished,
    });

    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/interop/read_history.py");
    let output = Command::new(python())
        .arg(script)
        .arg(data.join("history").join("tables"))
        .output()
        .unwrap();
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    let theirs: Value = serde_json::from_slice(&output.stdout).unwrap();
    for reader in ["pyarrow", "duckdb"] {
        assert_eq!(theirs[reader], ours, "{reader} reads other figures than bourse query");
    }
}
