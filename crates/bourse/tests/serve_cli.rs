//! `bourse serve` as the README runs it: the demo starts, answers over HTTP, stops
//! cleanly on SIGTERM with a snapshot, starts again from it, and refuses a taken port
//! with a message and a non-zero exit.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

fn bourse() -> Command {
    Command::new(env!("CARGO_BIN_EXE_bourse"))
}

struct Served {
    child: Child,
    http: String,
    lines: Vec<String>,
}

/// Starts `bourse serve` on free ports; returns once it printed its banner.
fn serve(data_dir: &Path, demo: bool) -> Served {
    let mut command = bourse();
    command
        .args(["serve", "--http", "127.0.0.1:0", "--tcp", "127.0.0.1:0", "--data-dir"])
        .arg(data_dir)
        .stdout(Stdio::piped())
        .stderr(Stdio::null());
    if demo {
        command.arg("--demo");
    }
    let mut child = command.spawn().unwrap();
    let stdout = BufReader::new(child.stdout.take().unwrap());
    let mut lines = Vec::new();
    let mut http = String::new();
    for line in stdout.lines() {
        let line = line.unwrap();
        if let Some(rest) = line.strip_prefix("bourse: serving REST and WebSocket on http://") {
            http = rest.split_whitespace().next().unwrap().to_string();
        }
        let done = line.contains("admin API key");
        lines.push(line);
        if done && !demo {
            break;
        }
        if line_is_last_demo_line(&lines) {
            break;
        }
    }
    Served { child, http, lines }
}

fn line_is_last_demo_line(lines: &[String]) -> bool {
    lines.last().is_some_and(|line| line.contains("try the examples"))
}

fn get(address: &str, path: &str) -> (u16, String) {
    let mut stream = TcpStream::connect(address).unwrap();
    stream.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    write!(stream, "GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n").unwrap();
    let mut response = String::new();
    stream.read_to_string(&mut response).unwrap();
    let status = response.split(' ').nth(1).unwrap().parse().unwrap();
    (status, response)
}

fn terminate(mut served: Served) -> std::process::ExitStatus {
    // SAFETY: kill sends a signal to the child we started; no memory is involved.
    unsafe { libc::kill(served.child.id() as i32, libc::SIGTERM) };
    served.child.wait().unwrap()
}

#[test]
fn the_demo_serves_stops_cleanly_on_sigterm_and_starts_again_from_its_snapshot() {
    let directory = tempfile::tempdir().unwrap();
    let served = serve(directory.path(), true);
    assert!(
        served.lines.iter().any(|line| line.contains("demo account alice: key bk_")),
        "{:?}",
        served.lines
    );
    assert!(directory.path().join("server/admin.key").exists());
    let (status, body) = get(&served.http, "/v1/depth/BTC-USD?levels=1");
    assert_eq!(status, 200, "{body}");
    assert!(body.contains("\"asks\":[[\"60005\""), "{body}");
    let exit = terminate(served);
    assert!(exit.success(), "{exit:?}");
    let snapshots = std::fs::read_dir(directory.path().join("snapshots")).unwrap().count();
    assert!(snapshots >= 1, "the shutdown wrote a snapshot");

    let again = serve(directory.path(), true);
    assert!(
        again.lines.iter().any(|line| line.contains("recovered up to command")),
        "{:?}",
        again.lines
    );
    let (status, body) = get(&again.http, "/v1/depth/BTC-USD?levels=1");
    assert_eq!(status, 200);
    assert!(
        body.contains("\"asks\":[[\"60005\",\"0.05\",1]]"),
        "the demo is not declared twice: {body}"
    );
    assert!(terminate(again).success());
}

#[test]
fn a_taken_port_is_a_clear_error_and_a_non_zero_exit() {
    let directory = tempfile::tempdir().unwrap();
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let address = taken.local_addr().unwrap().to_string();
    let output = bourse()
        .args(["serve", "--tcp", "127.0.0.1:0", "--http", &address, "--data-dir"])
        .arg(directory.path())
        .output()
        .unwrap();
    assert!(!output.status.success());
    let message = String::from_utf8_lossy(&output.stderr);
    assert!(message.contains("cannot listen on") && message.contains(&address), "{message}");
    let output = bourse().args(["serve", "--durability", "sometimes"]).output().unwrap();
    assert!(!output.status.success());
    assert!(String::from_utf8_lossy(&output.stderr).contains("durability"));
}
