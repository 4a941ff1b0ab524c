//! ccxt, the library most crypto trading bots are written on, trading spot on a
//! self-hosted Bourse through the Binance-compatible REST surface (`/api/v3/`,
//! `docs/binance.md`): `tests/interop/ccxt_binance.py` is written as a ccxt user writes
//! a script, with ccxt's unmodified `binance` class pointed at the demo's URL and a
//! Bourse API key. The test starts `bourse serve --demo` on free ports in a temporary
//! directory, runs the script (at most 180 s) and checks that it passed, compared
//! every figure with Bourse's own REST answers, and reached no other host; once more
//! with the multicast feed off (`--no-marketdata`), which ccxt must not notice.
//!
//! The Python: `BOURSE_CCXT_PYTHON` (`.ci/run` makes one), or a virtual environment
//! made once beside the test binaries from `tests/interop/requirements-ccxt.txt` (ccxt
//! and every dependency pinned; needs python3 with venv and PyPI).

mod support;

use std::time::Duration;

use support::{hosts_left_for, pinned_python, run_script, tail, Demo};

const SCRIPT_TIMEOUT: Duration = Duration::from_secs(180);

#[test]
fn a_ccxt_script_trades_spot_on_bourse_as_on_binance() {
    passes(&[]);
}

/// The multicast feed off changes nothing ccxt sees: `fetch_ohlcv` (klines) is the
/// candle service's, which runs either way.
#[test]
fn a_ccxt_script_reads_the_same_without_the_multicast_feed() {
    passes(&["--no-marketdata"]);
}

/// Runs the script against a fresh demo started with `flags`; panics with its output
/// and the server's log when it fails or when ccxt tried to leave this machine.
fn passes(flags: &[&str]) {
    let script = "ccxt_binance.py";
    let demo = Demo::start_with(flags);
    let python = pinned_python("BOURSE_CCXT_PYTHON", "requirements-ccxt.txt", "ccxt");
    let run = run_script(&demo, &python, script, &[], SCRIPT_TIMEOUT);
    let report = || {
        format!(
            "--- {script}: stdout ---\n{}\n--- stderr ---\n{}\n{}",
            tail(&run.stdout, 60, 1000),
            tail(&run.stderr, 80, 2000),
            demo.server_log()
        )
    };
    let (guarded, left) = hosts_left_for(&run, &[]);
    assert!(guarded, "the guard was not loaded\n{}", report());
    assert!(run.passed, "{script} failed\n{}", report());
    assert!(left.is_empty(), "{script} passed, but ccxt tried to reach {left:?}\n{}", report());
    assert!(run.stdout.contains(&format!("PASSED: {script}")), "{}", report());
    println!("{}", run.stdout);
}
