//! `bourse serve --demo` for the interop tests (`tqsdk_interop.rs`, `fix_interop.rs`):
//! started on free ports in a temporary directory, its demo keys read from what it
//! prints (and a key for `maker` made with the admin key), stopped with SIGTERM when
//! dropped; and signed REST requests to it. Each test includes it with `#[path]`.

#![allow(dead_code)]

use std::collections::HashMap;
use std::fs::File;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

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
        let directory = tempfile::tempdir().unwrap();
        let log = File::create(directory.path().join("server.log")).unwrap();
        let mut child = Command::new(env!("CARGO_BIN_EXE_bourse"))
            .args(["serve", "--demo", "--http", "127.0.0.1:0", "--tcp", "127.0.0.1:0"])
            .args(["--fix", "127.0.0.1:0"])
            .args(["--md-snapshot", "127.0.0.1:0", "--md-retransmit", "127.0.0.1:0"])
            .arg("--data-dir")
            .arg(directory.path().join("data"))
            .env("BOURSE_REQUESTS_PER_SECOND", "1000000")
            .stdout(Stdio::piped())
            .stderr(log)
            .spawn()
            .unwrap();
        let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
        let mut http = String::new();
        let mut fix = String::new();
        let mut keys = HashMap::new();
        let mut seen = Vec::new();
        for line in lines.by_ref() {
            let line = line.unwrap();
            if let Some(rest) = line.strip_prefix("bourse: serving REST and WebSocket on http://") {
                http = rest.split_whitespace().next().unwrap().to_string();
            }
            if let Some(rest) = line.strip_prefix("bourse: serving FIX 4.4 order entry on tcp://") {
                fix = rest.split_whitespace().next().unwrap().to_string();
            }
            // "bourse: demo account alice: key bk_... secret ... password ..."
            if let Some(rest) = line.strip_prefix("bourse: demo account ") {
                let words: Vec<&str> = rest.split_whitespace().collect();
                if let [account, "key", key, "secret", secret, ..] = words[..] {
                    let account = account.trim_end_matches(':').to_string();
                    keys.insert(account, (key.to_string(), secret.to_string()));
                }
            }
            let last = line.contains("try the examples");
            seen.push(line);
            if last {
                break;
            }
        }
        // Keep reading stdout so that the server never writes into a closed pipe.
        std::thread::spawn(move || lines.for_each(drop));
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
