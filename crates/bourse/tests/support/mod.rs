//! What the tests of the binary share: `bourse serve`'s listeners on free ports
//! (`FREE_PORTS`); for the interop tests (`tqsdk_interop`, `ccxt_interop`,
//! `fix_interop`, `ui_browser`), `bourse serve --demo` on them in a temporary directory (`Demo`), signed admin requests to it,
//! a Python with exactly the pinned versions of a client library (`pinned_python`), and
//! running one of `tests/interop/`'s scripts against the demo (`run_script`) with
//! `tests/interop/offline/sitecustomize.py` loaded, which refuses every connection that
//! is not to this machine and reports it (`hosts_left_for`).

#![allow(dead_code)] // Each test binary uses its own part.

use std::collections::HashMap;
use std::fs::File;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// `bourse serve`'s listeners, every one on a free port, so that tests running at once
/// never share one (FIX's and the market data's defaults included).
pub const FREE_PORTS: [&str; 10] = [
    "--http",
    "127.0.0.1:0",
    "--tcp",
    "127.0.0.1:0",
    "--fix",
    "127.0.0.1:0",
    "--md-snapshot",
    "127.0.0.1:0",
    "--md-retransmit",
    "127.0.0.1:0",
];

pub fn interop_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/interop")
}

pub fn target_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_bourse")).parent().unwrap().to_path_buf()
}

/// The version of `package` that `requirements` (in `tests/interop/`) pins.
pub fn pinned_version(requirements: &str, package: &str) -> String {
    let text = std::fs::read_to_string(interop_dir().join(requirements)).unwrap();
    text.lines()
        .find_map(|line| line.trim().strip_prefix(&format!("{package}==")))
        .unwrap_or_else(|| panic!("{requirements} pins {package}"))
        .to_string()
}

/// A python with `package` at the version `requirements` pins: the one `env_var` names
/// (`.ci/run` makes it), or a virtual environment made once beside the test binaries
/// from the requirements (every dependency pinned; needs python3 with venv and PyPI).
pub fn pinned_python(env_var: &str, requirements: &str, package: &str) -> PathBuf {
    static MADE: Mutex<Option<HashMap<String, PathBuf>>> = Mutex::new(None);
    let mut made = MADE.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
    if let Some(python) = made.as_ref().and_then(|made| made.get(requirements)) {
        return python.clone();
    }
    let pinned = pinned_version(requirements, package);
    let has_package = |python: &Path| {
        Command::new(python)
            .args([
                "-c",
                "import sys, importlib.metadata as m; sys.exit(m.version(sys.argv[1]) != sys.argv[2])",
            ])
            .args([package, pinned.as_str()])
            .env("PYTHONDONTWRITEBYTECODE", "1")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|status| status.success())
    };
    let python = match std::env::var(env_var) {
        Ok(python) => {
            let python = PathBuf::from(python);
            assert!(
                has_package(&python),
                "{env_var}={} has no {package} {pinned}",
                python.display()
            );
            python
        }
        Err(_) => {
            let venv = target_dir().join(format!("interop-venv-{package}"));
            let python = venv.join("bin").join("python");
            let requirements_path = interop_dir().join(requirements);
            let installed = venv.join(requirements);
            let current = std::fs::read(&requirements_path).unwrap();
            if !(has_package(&python)
                && std::fs::read(&installed).is_ok_and(|text| text == current))
            {
                let created = Command::new("python3")
                    .args(["-m", "venv", "--clear"])
                    .arg(&venv)
                    .status()
                    .expect("python3 is needed");
                assert!(created.success(), "python3 -m venv {} failed", venv.display());
                let output = Command::new(&python)
                    .args(["-m", "pip", "install", "--quiet", "--disable-pip-version-check", "-r"])
                    .arg(&requirements_path)
                    .output()
                    .unwrap();
                assert!(
                    output.status.success(),
                    "pip install -r {} failed (PyPI needed): {}",
                    requirements_path.display(),
                    String::from_utf8_lossy(&output.stderr)
                );
                std::fs::write(&installed, &current).unwrap();
                assert!(
                    has_package(&python),
                    "{} has no {package} {pinned} after pip",
                    python.display()
                );
            }
            python
        }
    };
    made.get_or_insert_with(HashMap::new).insert(requirements.to_string(), python.clone());
    python
}

/// `bourse serve --demo` on free ports in a temporary directory.
pub struct Demo {
    child: Child,
    pub http: String,
    /// FIX order entry's address.
    pub fix: String,
    pub directory: tempfile::TempDir,
    /// account -> (key, secret)
    pub keys: HashMap<String, (String, String)>,
}

impl Demo {
    pub fn start() -> Demo {
        Demo::start_with(&[])
    }

    /// `start`, with more of `bourse serve`'s flags (`--no-marketdata`).
    pub fn start_with(flags: &[&str]) -> Demo {
        let directory = tempfile::tempdir().unwrap();
        let log = File::create(directory.path().join("server.log")).unwrap();
        let mut child = Command::new(env!("CARGO_BIN_EXE_bourse"))
            .args(["serve", "--demo"])
            .args(FREE_PORTS)
            .args(flags)
            .arg("--data-dir")
            .arg(directory.path().join("data"))
            .env("BOURSE_REQUESTS_PER_SECOND", "1000000")
            .stdout(Stdio::piped())
            .stderr(log)
            .spawn()
            .unwrap();
        let DemoBanner { http, fix, keys, seen } = read_demo_banner(child.stdout.take().unwrap());
        let mut demo = Demo { child, http, fix, directory, keys };
        assert!(
            !demo.http.is_empty()
                && demo.keys.contains_key("alice")
                && demo.keys.contains_key("bob"),
            "the demo did not start as expected: {seen:?}\n{}",
            demo.server_log()
        );
        // maker's key, from the admin key.
        let admin = demo.admin_credentials();
        let (status, response) =
            signed(&demo.http, &admin, "POST", "/v1/admin/keys", r#"{"account":"maker"}"#);
        assert!(status == 200 || status == 201, "making maker's key: {response}");
        demo.keys.insert(
            "maker".to_string(),
            (json_field(&response, "key"), json_field(&response, "secret")),
        );
        demo
    }

    pub fn admin_credentials(&self) -> (String, String) {
        let text =
            std::fs::read_to_string(self.directory.path().join("data/server/admin.key")).unwrap();
        let field = |name: &str| {
            text.lines()
                .find_map(|line| line.strip_prefix(&format!("{name} = \"")))
                .and_then(|rest| rest.strip_suffix('"'))
                .unwrap()
                .to_string()
        };
        (field("key"), field("secret"))
    }

    pub fn server_log(&self) -> String {
        let text =
            std::fs::read_to_string(self.directory.path().join("server.log")).unwrap_or_default();
        format!("--- the server's log (last 40 lines) ---\n{}", tail(&text, 40, 400))
    }
}

impl Drop for Demo {
    fn drop(&mut self) {
        // SAFETY: kill sends a signal to the child we started; no memory is involved.
        unsafe { libc::kill(self.child.id() as i32, libc::SIGTERM) };
        let deadline = Instant::now() + Duration::from_secs(20);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// What `bourse serve --demo` prints at start: its REST and FIX addresses, the demo's
/// keys (account -> (key, secret)), and every line up to the last of the banner.
pub struct DemoBanner {
    pub http: String,
    pub fix: String,
    pub keys: HashMap<String, (String, String)>,
    pub seen: Vec<String>,
}

/// Reads the banner from a starting server's standard output, then keeps reading it
/// (so that the server never writes into a closed pipe).
pub fn read_demo_banner(stdout: impl Read + Send + 'static) -> DemoBanner {
    let mut lines = BufReader::new(stdout).lines();
    let mut banner = DemoBanner {
        http: String::new(),
        fix: String::new(),
        keys: HashMap::new(),
        seen: Vec::new(),
    };
    for line in lines.by_ref() {
        let Ok(line) = line else { break };
        if let Some(rest) = line.strip_prefix("bourse: serving REST and WebSocket on http://") {
            banner.http = rest.split_whitespace().next().unwrap_or_default().to_string();
        }
        if let Some(rest) = line.strip_prefix("bourse: serving FIX 4.4 order entry on tcp://") {
            banner.fix = rest.split_whitespace().next().unwrap_or_default().to_string();
        }
        // "bourse: demo account alice: key bk_... secret ... password ..."
        if let Some(rest) = line.strip_prefix("bourse: demo account ") {
            let words: Vec<&str> = rest.split_whitespace().collect();
            if let [account, "key", key, "secret", secret, ..] = words[..] {
                let account = account.trim_end_matches(':').to_string();
                banner.keys.insert(account, (key.to_string(), secret.to_string()));
            }
        }
        let last = line.contains("try the examples");
        banner.seen.push(line);
        if last {
            break;
        }
    }
    std::thread::spawn(move || lines.for_each(drop));
    banner
}

/// One signed request (the admin's); (status, whole response).
pub fn signed(
    address: &str,
    credentials: &(String, String),
    method: &str,
    path: &str,
    body: &str,
) -> (u16, String) {
    let timestamp = bourse_protocol::signing::now_ms();
    let message = format!("{timestamp}\n{method}\n{path}\n{body}");
    let signature = bourse_protocol::signing::sign(&credentials.1, message.as_bytes());
    let mut stream = TcpStream::connect(address).unwrap();
    stream.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    write!(
        stream,
        "{method} {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\nContent-Type: application/json\r\n\
         Content-Length: {}\r\nX-Bourse-Key: {}\r\nX-Bourse-Timestamp: {timestamp}\r\nX-Bourse-Signature: {signature}\r\n\r\n{body}",
        body.len(),
        credentials.0
    )
    .unwrap();
    let mut response = String::new();
    stream.read_to_string(&mut response).unwrap();
    let status = response.split(' ').nth(1).and_then(|code| code.parse().ok()).unwrap_or(0);
    (status, response)
}

pub fn json_field(response: &str, field: &str) -> String {
    let start = response.find(&format!("\"{field}\":\"")).unwrap() + field.len() + 4;
    response[start..].split('"').next().unwrap().to_string()
}

/// The last `lines` lines of `text`, each cut to `width` characters.
pub fn tail(text: &str, lines: usize, width: usize) -> String {
    let all: Vec<&str> = text.lines().collect();
    all[all.len().saturating_sub(lines)..]
        .iter()
        .map(|line| match line.char_indices().nth(width) {
            Some((cut, _)) => format!("{}...", &line[..cut]),
            None => line.to_string(),
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// A script's run: whether it exited 0, its output, and the directory it ran in (its
/// HOME is `home/` there), kept until the run is dropped.
pub struct Run {
    pub passed: bool,
    pub stdout: String,
    pub stderr: String,
    pub work: tempfile::TempDir,
}

/// Runs `tests/interop/{script}` with `python` against `demo` (at most `timeout`), with
/// `BOURSE_URL`, every demo account's `BOURSE_<ACCOUNT>_KEY` and `_SECRET`, `env`, HOME
/// in a temporary directory, no proxies, and the offline guard loaded.
pub fn run_script(
    demo: &Demo,
    python: &Path,
    script: &str,
    env: &[(&str, String)],
    timeout: Duration,
) -> Run {
    let mut with_guard: Vec<(&str, String)> = vec![
        ("PYTHONPATH", interop_dir().join("offline").display().to_string()),
        ("PYTHONDONTWRITEBYTECODE", "1".to_string()),
        ("PYTHONUNBUFFERED", "1".to_string()),
    ];
    with_guard.extend(env.iter().cloned());
    run_script_with(demo, python, script, &with_guard, timeout)
}

/// `run_script` for any interpreter (`node`, ...): `tests/interop/{script}` run by
/// `program` with `BOURSE_URL`, the demo accounts' keys and `env`, HOME in a temporary
/// directory and no proxies.
pub fn run_script_with(
    demo: &Demo,
    program: &Path,
    script: &str,
    env: &[(&str, String)],
    timeout: Duration,
) -> Run {
    let work = tempfile::tempdir().unwrap();
    let home = work.path().join("home");
    std::fs::create_dir_all(&home).unwrap();
    let (stdout_path, stderr_path) = (work.path().join("stdout"), work.path().join("stderr"));
    let mut command = Command::new(program);
    command
        .arg(interop_dir().join(script))
        .current_dir(work.path())
        .env("BOURSE_URL", format!("http://{}", demo.http))
        .env("HOME", &home)
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
    for (name, value) in env {
        command.env(name, value);
    }
    let mut child = command.spawn().unwrap();
    let started = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break Some(status);
        }
        if started.elapsed() > timeout {
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    let mut stderr = std::fs::read_to_string(&stderr_path).unwrap_or_default();
    if status.is_none() {
        stderr.push_str(&format!("\n(killed after {} s)", timeout.as_secs()));
    }
    Run {
        passed: status.is_some_and(|status| status.success()),
        stdout: std::fs::read_to_string(&stdout_path).unwrap_or_default(),
        stderr,
        work,
    }
}

/// Whether the offline guard was loaded, and the hosts the script tried to reach that
/// are not in `tolerated`.
pub fn hosts_left_for(run: &Run, tolerated: &[&str]) -> (bool, Vec<String>) {
    let loaded = run.stderr.contains("bourse-offline-guard: active");
    let left = run
        .stderr
        .lines()
        .filter_map(|line| line.strip_prefix("bourse-offline-guard: blocked "))
        .filter(|host| !tolerated.iter().any(|tolerated| host.starts_with(tolerated)))
        .map(str::to_string)
        .collect();
    (loaded, left)
}

/// A `node_modules` with the browser tests' pinned packages (`interop/ui/package.json`):
/// `BOURSE_UI_NODE_MODULES` (a `node_modules` that `.ci/run` fills with `npm ci`), or
/// the same done once beside the test binaries (needs node, npm and the npm registry).
pub fn ui_node_modules() -> PathBuf {
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

pub fn chromium() -> PathBuf {
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
