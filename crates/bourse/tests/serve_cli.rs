//! `bourse serve` as the README runs it: the demo starts, answers over HTTP, stops
//! cleanly on SIGTERM with a snapshot, starts again from it, and refuses a taken port
//! with a message and a non-zero exit.

mod support;

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
        .arg("serve")
        .args(support::FREE_PORTS)
        .arg("--data-dir")
        .arg(data_dir)
        .stdout(Stdio::piped())
        .stderr(Stdio::null());
    if demo {
        command.arg("--demo");
    }
    // Tests send faster than a trader key's default rate.
    command.env("BOURSE_REQUESTS_PER_SECOND", "1000000");
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
        .args([
            "serve",
            "--tcp",
            "127.0.0.1:0",
            "--fix",
            "127.0.0.1:0",
            "--http",
            &address,
            "--md-snapshot",
        ])
        .args(["127.0.0.1:0", "--md-retransmit", "127.0.0.1:0", "--data-dir"])
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

/// One signed request with the key in `key_file` (`key = "..."`, `secret = "..."`);
/// `None` when the server is gone.
fn signed(
    address: &str,
    credentials: &(String, String),
    method: &str,
    path: &str,
    body: &str,
) -> Option<(u16, String)> {
    use std::sync::atomic::{AtomicU64, Ordering};
    static LAST: AtomicU64 = AtomicU64::new(0);
    let now = bourse_protocol::signing::now_ms();
    let timestamp = LAST.fetch_max(now, Ordering::SeqCst).max(now - 1) + 1;
    LAST.fetch_max(timestamp, Ordering::SeqCst);
    let message = format!("{timestamp}\n{method}\n{path}\n{body}");
    let signature = bourse_protocol::signing::sign(&credentials.1, message.as_bytes());
    let mut stream = TcpStream::connect(address).ok()?;
    stream.set_read_timeout(Some(Duration::from_secs(10))).ok()?;
    write!(
        stream,
        "{method} {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\nContent-Type: application/json\r\n\
         Content-Length: {}\r\nX-Bourse-Key: {}\r\nX-Bourse-Timestamp: {timestamp}\r\nX-Bourse-Signature: {signature}\r\n\r\n{body}",
        body.len(),
        credentials.0
    )
    .ok()?;
    let mut response = String::new();
    stream.read_to_string(&mut response).ok()?;
    let status = response.split(' ').nth(1)?.parse().ok()?;
    Some((status, response))
}

fn admin_credentials(data_dir: &Path) -> (String, String) {
    let text = std::fs::read_to_string(data_dir.join("server/admin.key")).unwrap();
    let field = |name: &str| {
        text.lines()
            .find_map(|line| line.strip_prefix(&format!("{name} = \"")))
            .and_then(|rest| rest.strip_suffix('"'))
            .unwrap()
            .to_string()
    };
    (field("key"), field("secret"))
}

fn json_field(response: &str, field: &str) -> String {
    let start = response.find(&format!("\"{field}\":\"")).unwrap() + field.len() + 4;
    response[start..].split('"').next().unwrap().to_string()
}

#[test]
fn every_acknowledged_order_survives_a_kill_9_of_the_server() {
    let directory = tempfile::tempdir().unwrap();
    let data_dir = directory.path().join("data");
    let served = serve(&data_dir, false);
    let http = served.http.clone();
    let admin = admin_credentials(&data_dir);
    for (path, body) in [
        ("/v1/admin/assets", r#"{"asset":"USD","decimals":2}"#),
        ("/v1/admin/assets", r#"{"asset":"BTC","decimals":4}"#),
        (
            "/v1/admin/instruments",
            r#"{"symbol":"BTC-USD","base":"BTC","quote":"USD","tick":"1","lot":"0.01","min_qty":"0.01","max_qty":"1000","maker_fee_bps":0,"taker_fee_bps":0,"market_band_bps":500}"#,
        ),
        ("/v1/admin/accounts", r#"{"name":"alice"}"#),
        ("/v1/admin/deposits", r#"{"account":"alice","asset":"USD","amount":"100000000"}"#),
    ] {
        let (status, response) = signed(&http, &admin, "POST", path, body).unwrap();
        assert!(status == 200 || status == 201, "{response}");
    }
    let (_, response) =
        signed(&http, &admin, "POST", "/v1/admin/keys", r#"{"account":"alice"}"#).unwrap();
    let alice = (json_field(&response, "key"), json_field(&response, "secret"));

    // Orders one after another; each acknowledged one is noted; kill -9 in the middle.
    let acknowledged = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let sender = {
        let (acknowledged, http, alice) = (acknowledged.clone(), http.clone(), alice.clone());
        std::thread::spawn(move || {
            for index in 0..100_000 {
                let body = format!(
                    r#"{{"symbol":"BTC-USD","side":"buy","type":"limit","price":"1","qty":"1","client_order_id":"o{index}"}}"#
                );
                match signed(&http, &alice, "POST", "/v1/orders", &body) {
                    Some((200, _)) => acknowledged.lock().unwrap().push(format!("o{index}")),
                    _ => return,
                }
            }
        })
    };
    while acknowledged.lock().unwrap().len() < 200 {
        std::thread::sleep(Duration::from_millis(5));
    }
    let mut child = served.child;
    child.kill().unwrap(); // SIGKILL: no shutdown, no snapshot
    child.wait().unwrap();
    sender.join().unwrap();
    let acknowledged = acknowledged.lock().unwrap().clone();

    let again = serve(&data_dir, false);
    for id in &acknowledged {
        let (status, response) =
            signed(&again.http, &alice, "GET", &format!("/v1/orders?client_order_id={id}"), "")
                .unwrap();
        assert_eq!(status, 200, "acknowledged order {id} was lost: {response}");
        assert!(response.contains("\"status\":\"open\""), "{response}");
    }
    assert!(terminate(again).success());
}
