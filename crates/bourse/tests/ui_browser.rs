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

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use support::{interop_dir, run_script_with, tail, target_dir, Demo};

const SCRIPT_TIMEOUT: Duration = Duration::from_secs(120);

/// A `node_modules` with the pinned packages.
fn node_modules() -> PathBuf {
    if let Ok(modules) = std::env::var("BOURSE_UI_NODE_MODULES") {
        let modules = PathBuf::from(modules);
        assert!(
            modules.join("playwright-core").is_dir(),
            "BOURSE_UI_NODE_MODULES={} has no playwright-core",
            modules.display()
        );
        return modules;
    }
    let work = target_dir().join("interop-ui-node");
    let lock = interop_dir().join("ui/package-lock.json");
    let installed = work.join("package-lock.json");
    let current = std::fs::read(&lock).unwrap();
    if !(work.join("node_modules/playwright-core").is_dir()
        && std::fs::read(&installed).is_ok_and(|text| text == current))
    {
        std::fs::create_dir_all(&work).unwrap();
        std::fs::copy(interop_dir().join("ui/package.json"), work.join("package.json")).unwrap();
        std::fs::copy(&lock, &installed).unwrap();
        let status = Command::new("npm")
            .args(["ci", "--silent", "--no-audit", "--no-fund"])
            .current_dir(&work)
            .status()
            .expect("npm is needed");
        assert!(
            status.success(),
            "npm ci in {} failed (the npm registry is needed)",
            work.display()
        );
    }
    work.join("node_modules")
}

fn chromium() -> PathBuf {
    let path = std::env::var("CHROMIUM")
        .map(PathBuf::from)
        .unwrap_or_else(|_| PathBuf::from("/usr/bin/chromium"));
    assert!(
        Path::new(&path).exists(),
        "no Chromium at {} (Debian's package chromium; .ci/run installs it)",
        path.display()
    );
    path
}

#[test]
fn a_trader_places_sees_fills_and_cancels_in_a_real_browser() {
    let demo = Demo::start();
    let screenshots = target_dir().join("ui-screenshots");
    std::fs::create_dir_all(&screenshots).unwrap();
    let (admin_key, admin_secret) = demo.admin_credentials();
    let env = [
        ("BOURSE_ADMIN_KEY", admin_key),
        ("BOURSE_ADMIN_SECRET", admin_secret),
        ("NODE_PATH", node_modules().display().to_string()),
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
