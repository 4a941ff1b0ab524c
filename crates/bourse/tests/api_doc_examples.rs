//! The examples of `docs/api.md`, run as written (bash, curl, openssl) against
//! `bourse serve --demo`: the README's promise that they work.

mod support;

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Command, Stdio};

/// The ```sh blocks of docs/api.md, as one script for this server and these keys.
fn script(http: &str, alice_key: &str, alice_secret: &str) -> String {
    let doc = std::fs::read_to_string(
        Path::new(
            &std::env::var("CARGO_MANIFEST_DIR")
                .unwrap_or_else(|_| env!("CARGO_MANIFEST_DIR").to_string()),
        )
        .join("../../docs/api.md"),
    )
    .unwrap();
    let mut lines = vec!["set -u".to_string(), format!("export BOURSE_URL=http://{http}")];
    let mut in_block = false;
    for line in doc.lines() {
        if line == "```sh" {
            in_block = true;
            continue;
        }
        if line == "```" {
            in_block = false;
            continue;
        }
        if !in_block || line.contains("cargo run") {
            continue;
        }
        let line = if line.starts_with("export BOURSE_KEY=bk_...") {
            format!("export BOURSE_KEY={alice_key} BOURSE_SECRET={alice_secret}")
        } else if line.starts_with("bourse_api DELETE /v1/admin/keys/bk_...") {
            "bourse_api DELETE /v1/admin/keys/$(bourse_api GET /v1/admin/keys | python3 -c \
             \"import sys, json; print([k['key'] for k in json.load(sys.stdin)['keys'] if k['account'] == 'carol'][0])\")"
                .to_string()
        } else {
            line.replace("http://127.0.0.1:8080", &format!("http://{http}"))
        };
        let is_curl = line.starts_with("curl ");
        lines.push(line);
        if is_curl {
            lines.push("echo".to_string());
        }
    }
    lines.join("\n")
}

#[test]
fn every_example_of_the_api_document_works_against_the_demo() {
    let directory = tempfile::tempdir().unwrap();
    let mut server = Command::new(env!("CARGO_BIN_EXE_bourse"))
        .args(["serve", "--demo"])
        .args(support::FREE_PORTS)
        .current_dir(directory.path())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut banner = BufReader::new(server.stdout.take().unwrap()).lines();
    let (mut http, mut key, mut secret) = (String::new(), String::new(), String::new());
    for line in banner.by_ref() {
        let line = line.unwrap();
        if let Some(rest) = line.strip_prefix("bourse: serving REST and WebSocket on http://") {
            http = rest.split_whitespace().next().unwrap().to_string();
        }
        if line.starts_with("bourse: demo account alice:") {
            let words: Vec<&str> = line.split_whitespace().collect();
            (key, secret) = (words[5].to_string(), words[7].to_string());
        }
        if line.contains("try the examples") {
            break;
        }
    }
    let output = Command::new("bash")
        .arg("-c")
        .arg(script(&http, &key, &secret))
        .current_dir(directory.path())
        .output()
        .expect("bash, curl and openssl run the examples");
    // SAFETY: kill sends a signal to the child we started.
    unsafe { libc::kill(server.id() as i32, libc::SIGTERM) };
    assert!(server.wait().unwrap().success());
    let out = String::from_utf8_lossy(&output.stdout);
    let errors = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{errors}\n{out}");
    for expected in [
        "\"status\":\"ok\"",
        "\"asks\":[[\"60005\"",
        "\"status\":\"filled\"",
        "\"code\":\"duplicate_id\"",
        "\"price\":\"69000\"",
        "\"status\":\"canceled\"",
        "\"account\":\"alice\",\"balances\"",
        "\"asset\":\"SOL\"",
        "\"symbol\":\"SOL-USD\"",
        "\"available\":\"4900\"",
        "\"secret\":",
        "\"revoked\":true",
        "\"halted\":true",
        "\"halted\":false",
        "\"canceled\":[]",
        "\"trades\":[",
        "\"committed_seq\":",
        "\"sql\":true",
        "[{\"moves\":",
        "\"fills\":[",
        "\"volume_long_today\":\"1\"",
        "\"withdrawable\":",
        "\"open_interest\":",
        "\"margin\":\"37500\"",
        "\"posted_price\":\"75120\"",
        "\"price\":\"75120\"",
        "\"final\":true",
        "\"orders_canceled\":1",
        "\"has_password\":true",
        "\"removed\":true",
        "\"token_type\":\"Bearer\"",
        "\"error\":\"invalid_grant\"",
        "\"daysleft\":3650",
        "\"accounts\":[\"alice\",\"bob\"]",
    ] {
        assert!(out.contains(expected), "{expected} is not in what the examples printed:\n{out}");
    }
    for unexpected in [
        "missing_signature",
        "invalid_signature",
        "expired_timestamp",
        "\"not_found\"",
        "\"malformed\"",
        "forbidden",
    ] {
        assert!(!out.contains(unexpected), "{unexpected} in what the examples printed:\n{out}");
    }
}
