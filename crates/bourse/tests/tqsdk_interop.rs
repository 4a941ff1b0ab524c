//! tqsdk, TianQin's Python library, trading futures on a self-hosted Bourse through the
//! DIFF gateway (`/ws/diff`) and the OpenID-Connect token endpoint, as its users would
//! point it at another server: the scripts in `tests/interop/` are written as tqsdk
//! strategies and get the endpoints from tqsdk's own environment variables (`TQ_AUTH_URL`,
//! `TQ_MD_URL`, `TQ_TD_URL`). Each test starts `bourse serve --demo` on free ports in a
//! temporary directory, runs one script (at most 180 s) and checks that it passed.
//!
//! The Python: `BOURSE_TQSDK_PYTHON` (`.ci/run` makes one), or a virtual environment
//! made once beside the test binaries from `tests/interop/requirements-tqsdk.txt`
//! (tqsdk and every dependency pinned; needs python3 with venv and PyPI).
//!
//! The scripts run with HOME in a temporary directory (tqsdk writes `~/.tqsdk`) and
//! with `tests/interop/offline/sitecustomize.py` loaded, which refuses every connection
//! that is not to this machine and reports it: the test fails if tqsdk tried to reach
//! any host except the one it asks for release notes when it is imported (which no
//! setting turns off, and whose failure it ignores). On a failure the message has the
//! script's output, the end of tqsdk's log of every pack it sent and received (kept
//! whole under the target directory, `tqsdk-interop/`) and the end of the server's log.

mod support;

use std::path::PathBuf;
use std::time::Duration;

use support::{hosts_left_for, pinned_python, run_script, tail, target_dir, Demo};

/// How long one script may run.
const SCRIPT_TIMEOUT: Duration = Duration::from_secs(180);
/// The one host tqsdk may try (and fail) to reach: its release notes, fetched when it is
/// imported, in `tqsdk/changelog_notification.py`; errors are ignored there.
const TOLERATED_HOSTS: [&str; 1] = ["shinny-tqsdk.oss-cn-shanghai.aliyuncs.com"];

/// Runs `script` against a fresh demo; panics with everything needed to see why when
/// it fails or when tqsdk tried to leave this machine.
fn passes(script: &str) {
    passes_with(script, false, &[])
}

/// `passes`, with the operator's key in `BOURSE_ADMIN_KEY` and `BOURSE_ADMIN_SECRET`
/// when `admin` (for a script that settles the contract), and the demo started with
/// `flags`.
fn passes_with(script: &str, admin: bool, flags: &[&str]) {
    let demo = Demo::start_with(flags);
    let python = pinned_python("BOURSE_TQSDK_PYTHON", "requirements-tqsdk.txt", "tqsdk");
    // tqsdk logs every pack to TQSDK_DEBUG_LOG (one file per TqApi, numbered after it).
    let debug_dir = tempfile::tempdir().unwrap();
    let debug_log = debug_dir.path().join("tqsdk-debug.log");
    let mut env = vec![
        ("TQ_AUTH_URL", format!("http://{}", demo.http)),
        ("TQ_MD_URL", format!("ws://{}/ws/diff", demo.http)),
        ("TQ_TD_URL", format!("ws://{}/ws/diff", demo.http)),
        ("TQSDK_DEBUG_LOG", debug_log.display().to_string()),
    ];
    if admin {
        let (key, secret) = demo.admin_credentials();
        env.extend([("BOURSE_ADMIN_KEY", key), ("BOURSE_ADMIN_SECRET", secret)]);
    }
    let run = run_script(&demo, &python, script, &env, SCRIPT_TIMEOUT);
    let mut debug_logs: Vec<(PathBuf, String)> = Vec::new();
    for entry in std::fs::read_dir(debug_dir.path()).unwrap().flatten() {
        let name = entry.file_name().to_string_lossy().to_string();
        if name.starts_with("tqsdk-debug.log") {
            let kept = target_dir()
                .join("tqsdk-interop")
                .join(format!("{script}{}.{name}", flags.concat()));
            std::fs::create_dir_all(kept.parent().unwrap()).unwrap();
            let text = std::fs::read_to_string(entry.path()).unwrap_or_default();
            std::fs::write(&kept, &text).unwrap();
            debug_logs.push((kept, text));
        }
    }
    let report = || {
        let mut text = format!(
            "--- {script}: stdout ---\n{}\n--- stderr ---\n{}\n",
            run.stdout,
            tail(&run.stderr, 80, 2000)
        );
        for (path, log) in &debug_logs {
            text.push_str(&format!(
                "--- tqsdk's log of packs, last 30 lines (whole: {}) ---\n{}\n",
                path.display(),
                tail(log, 30, 1500)
            ));
        }
        text.push_str(&demo.server_log());
        text
    };
    let (guarded, left) = hosts_left_for(&run, &TOLERATED_HOSTS);
    assert!(guarded, "the guard was not loaded\n{}", report());
    assert!(run.passed, "{script} failed\n{}", report());
    assert!(
        left.is_empty(),
        "{script} passed, but tqsdk tried to reach {left:?} (an endpoint missing from its environment?)\n{}",
        report()
    );
    assert!(run.stdout.contains(&format!("PASSED: {script}")), "{}", report());
    // What the script checked (shown with --nocapture).
    println!("{}", run.stdout);
}

#[test]
fn a_tqsdk_strategy_trades_futures_on_bourse() {
    passes("tqsdk_trade.py");
}

#[test]
fn two_tqsdk_users_trade_with_each_other() {
    passes("tqsdk_two_accounts.py");
}

#[test]
fn a_tqsdk_user_reads_the_quote_and_ticks_across_a_settlement() {
    passes_with("tqsdk_market_data.py", true, &[]);
}

/// The multicast feed off changes nothing tqsdk sees: its klines (`get_kline_serial`,
/// followed as the trade comes) are the candle service's, which runs either way.
#[test]
fn a_tqsdk_strategy_trades_and_reads_klines_without_the_multicast_feed() {
    passes_with("tqsdk_trade.py", false, &["--no-marketdata"]);
}
