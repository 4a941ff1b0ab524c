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

#[path = "interop/demo.rs"]
mod demo;

use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use demo::{tail, Demo};

/// How long one script may run.
const SCRIPT_TIMEOUT: Duration = Duration::from_secs(180);
/// The one host tqsdk may try (and fail) to reach: its release notes, fetched when it is
/// imported, in `tqsdk/changelog_notification.py`; errors are ignored there.
const TOLERATED_HOSTS: [&str; 1] = ["shinny-tqsdk.oss-cn-shanghai.aliyuncs.com"];

fn interop_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/interop")
}

fn target_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_bourse")).parent().unwrap().to_path_buf()
}

/// The tqsdk version the requirements pin.
fn pinned_tqsdk() -> String {
    let requirements =
        std::fs::read_to_string(interop_dir().join("requirements-tqsdk.txt")).unwrap();
    requirements
        .lines()
        .find_map(|line| line.trim().strip_prefix("tqsdk=="))
        .expect("requirements-tqsdk.txt pins tqsdk")
        .to_string()
}

/// A python with tqsdk: `BOURSE_TQSDK_PYTHON`, or a virtual environment made once beside
/// the test binaries from the pinned requirements.
fn python() -> PathBuf {
    static MADE: Mutex<Option<PathBuf>> = Mutex::new(None);
    let mut made = MADE.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
    if let Some(python) = made.as_ref() {
        return python.clone();
    }
    let pinned = pinned_tqsdk();
    let has_tqsdk = |python: &Path| {
        Command::new(python)
            .args(["-c", "import sys, tqsdk; sys.exit(tqsdk.__version__ != sys.argv[1])"])
            .arg(&pinned)
            .env("PYTHONDONTWRITEBYTECODE", "1")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|status| status.success())
    };
    if let Ok(python) = std::env::var("BOURSE_TQSDK_PYTHON") {
        let python = PathBuf::from(python);
        assert!(
            has_tqsdk(&python),
            "BOURSE_TQSDK_PYTHON={} has no tqsdk {pinned}",
            python.display()
        );
        *made = Some(python.clone());
        return python;
    }
    let venv = target_dir().join("interop-venv-tqsdk");
    let python = venv.join("bin").join("python");
    let requirements = interop_dir().join("requirements-tqsdk.txt");
    let installed = venv.join("requirements-tqsdk.txt");
    let current = std::fs::read(&requirements).unwrap();
    if !(has_tqsdk(&python) && std::fs::read(&installed).is_ok_and(|text| text == current)) {
        let created = Command::new("python3")
            .args(["-m", "venv", "--clear"])
            .arg(&venv)
            .status()
            .expect("python3 is needed");
        assert!(created.success(), "python3 -m venv {} failed", venv.display());
        let output = Command::new(&python)
            .args(["-m", "pip", "install", "--quiet", "--disable-pip-version-check", "-r"])
            .arg(&requirements)
            .output()
            .unwrap();
        assert!(
            output.status.success(),
            "pip install -r {} failed (PyPI needed): {}",
            requirements.display(),
            String::from_utf8_lossy(&output.stderr)
        );
        std::fs::write(&installed, &current).unwrap();
        assert!(has_tqsdk(&python), "{} has no tqsdk {pinned} after pip", python.display());
    }
    *made = Some(python.clone());
    python
}

struct Run {
    passed: bool,
    stdout: String,
    stderr: String,
    /// tqsdk's logs of every pack (one per TqApi), whole.
    debug_logs: Vec<(PathBuf, String)>,
}

/// Runs one script against the demo with tqsdk's endpoints in its environment.
fn run_script(demo: &Demo, script: &str) -> Run {
    let python = python();
    let work = tempfile::tempdir().unwrap();
    let home = work.path().join("home");
    std::fs::create_dir_all(&home).unwrap();
    let debug_log = work.path().join("tqsdk-debug.log");
    let (stdout_path, stderr_path) = (work.path().join("stdout"), work.path().join("stderr"));
    let mut command = Command::new(&python);
    command
        .arg(interop_dir().join(script))
        .current_dir(work.path())
        .env("TQ_AUTH_URL", format!("http://{}", demo.http))
        .env("TQ_MD_URL", format!("ws://{}/ws/diff", demo.http))
        .env("TQ_TD_URL", format!("ws://{}/ws/diff", demo.http))
        .env("BOURSE_URL", format!("http://{}", demo.http))
        .env("TQSDK_DEBUG_LOG", &debug_log)
        .env("HOME", &home)
        .env("PYTHONPATH", interop_dir().join("offline"))
        .env("PYTHONDONTWRITEBYTECODE", "1")
        .env("PYTHONUNBUFFERED", "1")
        .env("NO_PROXY", "127.0.0.1,localhost")
        .stdin(Stdio::null())
        .stdout(File::create(&stdout_path).unwrap())
        .stderr(File::create(&stderr_path).unwrap());
    for variable in ["HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy"] {
        command.env_remove(variable);
    }
    for (account, (key, secret)) in &demo.keys {
        let prefix = format!("BOURSE_{}_", account.to_uppercase());
        command.env(format!("{prefix}KEY"), key).env(format!("{prefix}SECRET"), secret);
    }
    let mut child = command.spawn().unwrap();
    let started = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break Some(status);
        }
        if started.elapsed() > SCRIPT_TIMEOUT {
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    let mut stderr = std::fs::read_to_string(&stderr_path).unwrap_or_default();
    if status.is_none() {
        stderr.push_str(&format!("\n(killed after {} s)", SCRIPT_TIMEOUT.as_secs()));
    }
    let mut debug_logs = Vec::new();
    for entry in std::fs::read_dir(work.path()).unwrap().flatten() {
        let name = entry.file_name().to_string_lossy().to_string();
        if name.starts_with("tqsdk-debug.log") {
            let kept = target_dir().join("tqsdk-interop").join(format!("{script}.{name}"));
            std::fs::create_dir_all(kept.parent().unwrap()).unwrap();
            let text = std::fs::read_to_string(entry.path()).unwrap_or_default();
            std::fs::write(&kept, &text).unwrap();
            debug_logs.push((kept, text));
        }
    }
    Run {
        passed: status.is_some_and(|status| status.success()),
        stdout: std::fs::read_to_string(&stdout_path).unwrap_or_default(),
        stderr,
        debug_logs,
    }
}

/// Runs `script` against a fresh demo; panics with everything needed to see why when
/// it fails or when tqsdk tried to leave this machine.
fn passes(script: &str) {
    let demo = Demo::start();
    let run = run_script(&demo, script);
    let report = || {
        let mut text = format!(
            "--- {script}: stdout ---\n{}\n--- stderr ---\n{}\n",
            run.stdout,
            tail(&run.stderr, 80, 2000)
        );
        for (path, log) in &run.debug_logs {
            text.push_str(&format!(
                "--- tqsdk's log of packs, last 30 lines (whole: {}) ---\n{}\n",
                path.display(),
                tail(log, 30, 1500)
            ));
        }
        text.push_str(&demo.server_log());
        text
    };
    assert!(
        run.stderr.contains("bourse-offline-guard: active"),
        "the guard was not loaded\n{}",
        report()
    );
    let left: Vec<&str> = run
        .stderr
        .lines()
        .filter_map(|line| line.strip_prefix("bourse-offline-guard: blocked "))
        .filter(|host| !TOLERATED_HOSTS.iter().any(|tolerated| host.starts_with(tolerated)))
        .collect();
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
