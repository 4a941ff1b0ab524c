//! The trading screen and the operator console in a real browser:
//! `tests/interop/ui/trade.cjs` drives headless Chromium from the distribution's
//! packages (`/usr/bin/chromium`, or `CHROMIUM`) with Playwright's core (pinned in
//! `tests/interop/ui/package.json`; no browser is downloaded) against `bourse serve
//! --demo`: alice rests an order and sees it in the book, the depth and her open
//! orders; bob fills it from his own page with the keyboard alone; both see the fill and
//! their balances move; a page opened after that trade shows it and the ticker (a trade
//! during its held REST reads shows once); no login leaves an error in the console;
//! alice amends and cancels another order; the operator halts the
//! market (alice's ticket says so), declares an asset and an instrument, creates and
//! funds an account whose new key then logs in, cancels all of alice's orders, runs a
//! contract's margin, posted price and settlement, revokes a key and runs SQL; a bad key
//! is told so. The screenshots go to the target directory's `ui-screenshots/`
//! (`docs/ui.md` shows them).
//!
//! The packages: `BOURSE_UI_NODE_MODULES` (a `node_modules` that `.ci/run` fills with
//! `npm ci`), or the same done here once beside the test binaries (needs node, npm and
//! the npm registry).

mod support;

use std::path::Path;
use std::time::Duration;

use support::{chromium, run_script_with, tail, target_dir, ui_node_modules, Demo};

const SCRIPT_TIMEOUT: Duration = Duration::from_secs(120);

#[test]
fn a_trader_places_sees_fills_and_cancels_in_a_real_browser() {
    let demo = Demo::start();
    let screenshots = target_dir().join("ui-screenshots");
    std::fs::create_dir_all(&screenshots).unwrap();
    let (admin_key, admin_secret) = demo.admin_credentials();
    let env = [
        ("BOURSE_ADMIN_KEY", admin_key),
        ("BOURSE_ADMIN_SECRET", admin_secret),
        ("NODE_PATH", ui_node_modules().display().to_string()),
        ("CHROMIUM", chromium().display().to_string()),
        ("SCREENSHOT_DIR", screenshots.display().to_string()),
    ];
    let run = run_script_with(&demo, Path::new("node"), "ui/trade.cjs", &env, SCRIPT_TIMEOUT);
    let report = || {
        format!(
            "--- stdout ---\n{}\n--- stderr ---\n{}\n{}",
            run.stdout,
            tail(&run.stderr, 60, 1000),
            demo.server_log()
        )
    };
    assert!(run.passed, "trade.cjs failed\n{}", report());
    assert!(run.stdout.contains("PASSED: trade.cjs"), "{}", report());
    for shot in [
        "login-refused.png",
        "trading-resting.png",
        "trading-filled.png",
        "trading-amend.png",
        "trading-halted.png",
        "trading-futures.png",
        "trading-phone.png",
        "console.png",
        "console-phone.png",
    ] {
        assert!(screenshots.join(shot).is_file(), "no screenshot {shot}");
    }
    println!("{}\nscreenshots in {}", run.stdout, screenshots.display());
}
