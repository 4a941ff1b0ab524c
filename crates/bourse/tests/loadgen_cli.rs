//! `bourse loadgen` against a real `bourse serve`: it sets up its market through the
//! admin API, sends on schedule, and reports what it measured, as text or JSON.

mod support;

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};

fn bourse() -> Command {
    Command::new(env!("CARGO_BIN_EXE_bourse"))
}

struct Served {
    child: Child,
    http: String,
    tcp: String,
    /// The market-data feed: multicast group, snapshot and retransmission addresses.
    feed: (String, String, String),
}

fn serve(data_dir: &std::path::Path) -> Served {
    // A group and port of its own, so that parallel tests' feeds do not mix.
    let port = std::net::UdpSocket::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let multicast = format!("239.255.78.{}:{port}", 1 + port % 250);
    let mut child = bourse()
        .arg("serve")
        .args(support::FREE_PORTS)
        .args(["--md-multicast", &multicast])
        .arg("--data-dir")
        .arg(data_dir)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let (mut http, mut tcp, mut feed) = (String::new(), String::new(), Default::default());
    for line in lines.by_ref() {
        let line = line.unwrap();
        // "... to udp://G:P via I; snapshots on tcp://S, retransmissions on udp://R"
        if line.starts_with("bourse: market data") {
            let after = |marker: &str| {
                let rest = &line[line.find(marker).unwrap() + marker.len()..];
                rest.split([' ', ',', ';']).next().unwrap().to_string()
            };
            feed = (
                after("to udp://"),
                after("snapshots on tcp://"),
                after("retransmissions on udp://"),
            );
        }
        if let Some(rest) = line.strip_prefix("bourse: serving REST and WebSocket on http://") {
            http = rest.split_whitespace().next().unwrap().to_string();
        }
        if let Some(rest) = line.strip_prefix("bourse: serving binary order entry on tcp://") {
            tcp = rest.trim().to_string();
        }
        if line.contains("admin API key") {
            break;
        }
    }
    Served { child, http, tcp, feed }
}

#[test]
fn an_open_loop_run_reports_every_order_answered_with_its_latency() {
    let directory = tempfile::tempdir().unwrap();
    let data_dir = directory.path().join("data");
    let mut served = serve(&data_dir);
    let output = bourse()
        .args(["loadgen", "--http", &served.http, "--tcp", &served.tcp, "--admin-key-file"])
        .arg(data_dir.join("server/admin.key"))
        .args(["--rate", "1000", "--duration", "1", "--connections", "2", "--json"])
        .output()
        .unwrap();
    served.child.kill().unwrap();
    let _ = served.child.wait();
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(output.status.success(), "{}\n{stdout}", String::from_utf8_lossy(&output.stderr));
    let results: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    assert_all_ok(&results, "tcp", 1000);
    assert!(results["throughput_per_sec"].as_f64().unwrap() > 500.0, "{results}");
    assert_eq!(results["latency_from"], "scheduled send time");
}

#[test]
fn bad_arguments_and_a_missing_admin_key_are_errors() {
    let directory = tempfile::tempdir().unwrap();
    let output = bourse().args(["loadgen", "--rate", "0"]).output().unwrap();
    assert!(!output.status.success());
    assert!(String::from_utf8_lossy(&output.stderr).contains("must be positive"));
    let output = bourse()
        .args(["loadgen", "--admin-key-file"])
        .arg(directory.path().join("nope.key"))
        .output()
        .unwrap();
    assert!(!output.status.success());
    assert!(String::from_utf8_lossy(&output.stderr).contains("cannot read"));
}

#[test]
fn bench_compare_exits_one_on_a_regression_and_zero_otherwise() {
    let directory = tempfile::tempdir().unwrap();
    let baseline = std::path::Path::new(
        &std::env::var("CARGO_MANIFEST_DIR")
            .unwrap_or_else(|_| env!("CARGO_MANIFEST_DIR").to_string()),
    )
    .join("../../benchmarks/baseline/loadgen-tcp-50k.json");
    let kept: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&baseline).unwrap()).unwrap();
    let mut worse = kept.clone();
    worse["p99_us"] = serde_json::json!(kept["p99_us"].as_u64().unwrap() * 2);
    let worse_path = directory.path().join("worse.json");
    std::fs::write(&worse_path, worse.to_string()).unwrap();
    let same = bourse().args(["bench", "compare"]).arg(&baseline).arg(&baseline).output().unwrap();
    assert_eq!(same.status.code(), Some(0), "{}", String::from_utf8_lossy(&same.stdout));
    let regressed =
        bourse().args(["bench", "compare"]).arg(&baseline).arg(&worse_path).output().unwrap();
    assert_eq!(regressed.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&regressed.stdout).contains("p99_us"));
    let lenient = bourse()
        .args(["bench", "compare", "--threshold-percent", "150"])
        .arg(&baseline)
        .arg(&worse_path)
        .output()
        .unwrap();
    assert_eq!(lenient.status.code(), Some(0));
    let missing = bourse()
        .args(["bench", "compare"])
        .arg(&baseline)
        .arg(directory.path().join("nope.json"))
        .output()
        .unwrap();
    assert_eq!(missing.status.code(), Some(2));
}

/// `bourse loadgen-sink` on a free port, once it says where it listens.
fn start_sink() -> (Child, String) {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let address = listener.local_addr().unwrap().to_string();
    drop(listener);
    let mut sink = bourse()
        .args(["loadgen-sink", "--tcp", &address])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut banner = String::new();
    BufReader::new(sink.stdout.take().unwrap()).read_line(&mut banner).unwrap();
    assert!(banner.contains(&address), "{banner}");
    (sink, address)
}

/// `bourse loadgen --json` against the sink at `address` with `args`; its results.
fn against_sink(address: &str, args: &[&str]) -> serde_json::Value {
    let output = bourse()
        .args(["loadgen", "--tcp", address, "--key", "k", "--secret", "s", "--json"])
        .args(args)
        .output()
        .unwrap();
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    serde_json::from_slice(&output.stdout).unwrap()
}

#[test]
fn against_the_sink_every_order_is_answered_without_any_setup() {
    let (mut sink, address) = start_sink();
    let results =
        against_sink(&address, &["--rate", "20000", "--duration", "1", "--connections", "2"]);
    sink.kill().unwrap();
    let _ = sink.wait();
    assert_eq!(
        (results["ok"].as_u64(), results["errors"].as_u64()),
        (Some(20_000), Some(0)),
        "{results}"
    );
}

#[test]
fn a_rate_step_reports_the_knee_and_stops_past_it() {
    let (mut sink, address) = start_sink();
    let step = |bound_us: &str| {
        let steps = ["--rate", "2000", "--step-to", "8000", "--step-factor", "2"];
        let rest = ["--duration", "0.5", "--p99-bound-us", bound_us];
        against_sink(&address, &[&steps[..], &rest[..]].concat())
    };
    let generous = step("10000000");
    assert_eq!(generous["knee_rate_per_sec"], 8000.0, "{generous}");
    let rates: Vec<f64> = generous["steps"]
        .as_array()
        .unwrap()
        .iter()
        .map(|step| step["target_rate_per_sec"].as_f64().unwrap())
        .collect();
    assert_eq!(rates, [2000.0, 4000.0, 8000.0]);
    let impossible = step("1");
    assert!(impossible["knee_rate_per_sec"].is_null(), "{impossible}");
    assert_eq!(impossible["steps"].as_array().unwrap().len(), 1, "it stops past the knee");
    sink.kill().unwrap();
    let _ = sink.wait();
}

#[test]
fn a_closed_loop_keeps_its_window_in_flight_and_says_where_latency_is_from() {
    let (mut sink, address) = start_sink();
    let results =
        against_sink(&address, &["--closed", "8", "--duration", "0.5", "--connections", "2"]);
    sink.kill().unwrap();
    let _ = sink.wait();
    assert_eq!(
        (results["mode"].as_str(), results["latency_from"].as_str()),
        (Some("closed"), Some("actual send time"))
    );
    assert_eq!(results["ok"], results["sent"], "every order answered: {results}");
    assert!(results["ok"].as_u64().unwrap() > 1_000, "{results}");
    assert_eq!(results["errors"], 0);
    let refused = bourse().args(["loadgen", "--closed", "0"]).output().unwrap();
    assert!(!refused.status.success());
}

#[test]
fn an_html_report_is_one_self_contained_page_for_a_run_and_for_a_step() {
    let (mut sink, address) = start_sink();
    let directory = tempfile::tempdir().unwrap();
    let page_of = |args: &[&str], name: &str| {
        let path = directory.path().join(name);
        let path_text = path.to_str().unwrap();
        let results = against_sink(&address, &[args, &["--html", path_text]].concat());
        (results, std::fs::read_to_string(&path).unwrap())
    };
    let (results, page) =
        page_of(&["--rate", "4000", "--duration", "1.5", "--connections", "2"], "run.html");
    let percentiles = results["percentiles"].as_array().unwrap();
    assert_eq!(percentiles.last().unwrap(), &serde_json::json!([100.0, results["max_us"]]));
    assert!(page.starts_with("<!DOCTYPE html>"), "{page}");
    assert!(page.contains("<svg") && page.contains("Latency by percentile"));
    for parameter in ["target_rate_per_sec", "connections", "duration_s", "cpu_model"] {
        assert!(page.contains(parameter), "{parameter} missing");
    }
    for external in ["<script src", "http://", "https://", "<link", "url("] {
        assert!(!page.contains(external), "{external} in the page");
    }
    let steps = ["--rate", "2000", "--step-to", "4000", "--step-factor", "2"];
    let rest = ["--duration", "0.5", "--p99-bound-us", "10000000"];
    let (_, page) = page_of(&[&steps[..], &rest[..]].concat(), "step.html");
    assert!(page.starts_with("<!DOCTYPE html>") && page.contains("Knee: 4,000 orders/s"), "{page}");
    assert!(page.contains("Step 1: 2,000 orders/s") && page.contains("Step 2: 4,000 orders/s"));
    let (_, page) = page_of(&["--closed", "4", "--duration", "0.5"], "closed.html");
    assert!(page.contains("closed loop") && page.contains("actual send time"));
    sink.kill().unwrap();
    let _ = sink.wait();
}

#[test]
fn watching_the_sinks_pid_samples_its_resident_memory_and_cpu() {
    let (mut sink, address) = start_sink();
    let pid = sink.id().to_string();
    let results =
        against_sink(&address, &["--rate", "4000", "--duration", "1.5", "--watch-pid", &pid]);
    sink.kill().unwrap();
    let _ = sink.wait();
    let rss = &results["server_rss_kib"];
    assert!(rss["max"].as_u64().unwrap() > 0, "{results}");
    assert!(rss["first"].as_u64().unwrap() > 0 && rss["last"].as_u64().unwrap() > 0);
    assert_eq!(rss["pid"].to_string(), pid);
    let timeline = results["timeline"].as_array().unwrap();
    assert!(!timeline.is_empty());
    assert!(timeline.iter().all(|second| second["rss_kib"].as_u64().unwrap() > 0), "{results}");
    // The CPU each side used: the tool's always, the watched process's with --watch-pid.
    for side in ["loadgen_cpu", "server_cpu"] {
        let cpu = &results[side];
        let share = cpu["share_of_one_cpu"].as_f64().unwrap_or(-1.0);
        assert!(share > 0.0 && share < 4.0, "{side}: {results}");
        assert!(cpu["share_of_machine"].as_f64().unwrap() <= share, "{results}");
        assert!(cpu["context_switches_per_sec"]["voluntary"].as_f64().is_some(), "{results}");
    }
    assert!(results["machine"]["cpu_model"].is_string(), "{results}");
    let missing = bourse()
        .args(["loadgen", "--key", "k", "--secret", "s", "--watch-pid", "4294967295"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&missing.stderr);
    assert!(!missing.status.success());
    assert!(stderr.contains("cannot read /proc/4294967295/status"), "{stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");
}

/// `bourse loadgen-sink` answering binary order entry and REST and WebSocket: its
/// process and the two addresses (`tcp`, `http`).
fn start_sink_with_http() -> (Child, String, String) {
    let free = || {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.local_addr().unwrap().to_string()
    };
    let (tcp, http) = (free(), free());
    let mut sink = bourse()
        .args(["loadgen-sink", "--tcp", &tcp, "--http", &http])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(sink.stdout.take().unwrap()).lines();
    let banners = [lines.next().unwrap().unwrap(), lines.next().unwrap().unwrap()];
    assert!(banners[0].contains(&tcp) && banners[1].contains(&http), "{banners:?}");
    (sink, tcp, http)
}

/// Every order of a run answered `ok`, nothing else, and the run's JSON fields.
fn assert_all_ok(results: &serde_json::Value, protocol: &str, sent: u64) {
    assert_eq!(results["protocol"], protocol, "{results}");
    assert_eq!(results["sent"], sent, "{results}");
    assert_eq!(results["ok"], sent, "every order accepted: {results}");
    assert_eq!((results["rejected"].as_u64(), results["errors"].as_u64()), (Some(0), Some(0)));
    let (p50, p99, max) = (
        results["p50_us"].as_u64().unwrap(),
        results["p99_us"].as_u64().unwrap(),
        results["max_us"].as_u64().unwrap(),
    );
    assert!(0 < p50 && p50 <= p99 && p99 <= max, "{results}");
    assert!(!results["timeline"].as_array().unwrap().is_empty(), "{results}");
}

#[test]
fn rest_and_websocket_runs_against_the_sink_answer_every_order() {
    let (mut sink, _, http) = start_sink_with_http();
    let run = |protocol: &str, args: &[&str]| {
        let output = bourse()
            .args(["loadgen", "--protocol", protocol, "--http", &http])
            .args(["--key", "k", "--secret", "s", "--json", "--connections", "2"])
            .args(args)
            .output()
            .unwrap();
        assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
        serde_json::from_slice::<serde_json::Value>(&output.stdout).unwrap()
    };
    for protocol in ["rest", "ws"] {
        let results = run(protocol, &["--rate", "20000", "--duration", "1"]);
        assert_all_ok(&results, protocol, 20_000);
        assert_eq!(results["latency_from"], "scheduled send time");
        let closed = run(protocol, &["--closed", "8", "--duration", "0.5"]);
        assert_eq!(
            (closed["mode"].as_str(), closed["protocol"].as_str()),
            (Some("closed"), Some(protocol))
        );
        assert_eq!(closed["ok"], closed["sent"], "every order answered: {closed}");
        assert!(closed["ok"].as_u64().unwrap() > 1_000, "{closed}");
        assert_eq!(closed["errors"], 0);
    }
    sink.kill().unwrap();
    let _ = sink.wait();
}

#[test]
fn rest_and_websocket_runs_against_bourse_serve_have_every_order_accepted() {
    let directory = tempfile::tempdir().unwrap();
    let data_dir = directory.path().join("data");
    let mut served = serve(&data_dir);
    let run = |protocol: &str, symbol: &str| {
        bourse()
            .args(["loadgen", "--protocol", protocol, "--http", &served.http, "--tcp", &served.tcp])
            .arg("--admin-key-file")
            .arg(data_dir.join("server/admin.key"))
            .args(["--symbol", symbol])
            .args(["--rate", "400", "--duration", "1", "--connections", "2", "--json"])
            .output()
            .unwrap()
    };
    let outputs = [("rest", run("rest", "LG-REST")), ("ws", run("ws", "LG-WS"))];
    served.child.kill().unwrap();
    let _ = served.child.wait();
    for (protocol, output) in outputs {
        let stdout = String::from_utf8_lossy(&output.stdout);
        assert!(output.status.success(), "{}\n{stdout}", String::from_utf8_lossy(&output.stderr));
        let results: serde_json::Value = serde_json::from_str(&stdout).unwrap();
        assert_all_ok(&results, protocol, 400);
    }
}

/// The text of `GET path` on `http` (the server's `/metrics`, say).
fn http_get(http: &str, path: &str) -> String {
    use std::io::{Read, Write};
    let mut stream = std::net::TcpStream::connect(http).unwrap();
    write!(stream, "GET {path} HTTP/1.1\r\nHost: bourse\r\nConnection: close\r\n\r\n").unwrap();
    let mut text = String::new();
    stream.read_to_string(&mut text).unwrap();
    text
}

/// The value of the `/metrics` line that starts with `prefix`, 0 if there is none.
fn metric(metrics: &str, prefix: &str) -> f64 {
    metrics
        .lines()
        .find(|line| line.starts_with(prefix))
        .and_then(|line| line.rsplit(' ').next())
        .and_then(|value| value.parse().ok())
        .unwrap_or(0.0)
}

#[test]
fn order_flow_profiles_send_amends_cancels_and_takers_over_every_protocol() {
    let directory = tempfile::tempdir().unwrap();
    let data_dir = directory.path().join("data");
    let mut served = serve(&data_dir);
    let mut runs = Vec::new();
    for protocol in ["tcp", "rest", "ws"] {
        for (profile, connections, symbols) in [("ec-mix", "2", "1"), ("maker-taker", "4", "3")] {
            let output = bourse()
                .args(["loadgen", "--protocol", protocol, "--http", &served.http])
                .args(["--tcp", &served.tcp, "--admin-key-file"])
                .arg(data_dir.join("server/admin.key"))
                .args(["--symbol", &format!("{}-{protocol}", &profile[..2]), "--symbols", symbols])
                .args(["--profile", profile, "--connections", connections])
                .args(["--rate", "2000", "--duration", "1", "--json"])
                .output()
                .unwrap();
            let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
            assert!(
                output.status.success(),
                "{}\n{stdout}",
                String::from_utf8_lossy(&output.stderr)
            );
            runs.push((
                protocol,
                profile,
                serde_json::from_str::<serde_json::Value>(&stdout).unwrap(),
            ));
        }
    }
    let metrics = http_get(&served.http, "/metrics");
    served.child.kill().unwrap();
    let _ = served.child.wait();
    for (protocol, profile, results) in runs {
        let (sent, ok, rejected) = (
            results["sent"].as_u64().unwrap(),
            results["ok"].as_u64().unwrap(),
            results["rejected"].as_u64().unwrap(),
        );
        assert_eq!(
            (results["profile"].as_str(), results["errors"].as_u64()),
            (Some(profile), Some(0))
        );
        assert_eq!((sent, ok + rejected), (2_000, 2_000), "{protocol} {profile}: {results}");
        // Only orders a connection believed open and another's IOC filled are refused.
        let reasons = results["rejected_by_reason"].as_object().unwrap();
        assert!(
            reasons.keys().all(|reason| reason == "unknown_order"),
            "{protocol} {profile}: {results}"
        );
        assert!(ok > sent * 3 / 4, "{protocol} {profile}: {results}");
    }
    // The binary gateway answered amends and cancels, accepted (status 0).
    for route in ["new_order", "amend", "cancel"] {
        let prefix =
            format!(r#"bourse_requests_total{{protocol="tcp",route="{route}",status="0"}}"#);
        assert!(metric(&metrics, &prefix) > 10.0, "{route}:\n{metrics}");
    }
}

#[test]
fn bursts_send_faster_at_the_start_of_each_period() {
    let (mut sink, address) = start_sink();
    // 1,000/s, the first 100 ms of each 500 ms at 5,000/s: 500 + 400 each period.
    let results = against_sink(
        &address,
        &["--rate", "1000", "--duration", "1", "--connections", "1", "--burst-every-ms", "500"],
    );
    sink.kill().unwrap();
    let _ = sink.wait();
    assert_eq!((results["sent"].as_u64(), results["ok"].as_u64()), (Some(1_800), Some(1_800)));
    assert_eq!(results["burst"]["factor"], 5.0, "{results}");
}

#[test]
fn the_reference_subscriber_rebuilds_the_books_through_a_load_run_and_verifies_them() {
    let directory = tempfile::tempdir().unwrap();
    let data_dir = directory.path().join("data");
    let mut served = serve(&data_dir);
    let (multicast, snapshot, retransmit) = served.feed.clone();
    let listener = bourse()
        .args(["md", "listen", "--multicast", &multicast, "--snapshot", &snapshot])
        .args(["--retransmit", &retransmit, "--duration", "4", "--drop-percent", "10"])
        .args(["--quiet", "--verify", &served.http])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let load = bourse()
        .args(["loadgen", "--http", &served.http, "--tcp", &served.tcp, "--admin-key-file"])
        .arg(data_dir.join("server/admin.key"))
        .args(["--rate", "2000", "--duration", "2", "--connections", "2"])
        .args(["--profile", "maker-taker", "--symbols", "2"])
        .output()
        .unwrap();
    assert!(load.status.success(), "{}", String::from_utf8_lossy(&load.stderr));
    let listener = listener.wait_with_output().unwrap();
    served.child.kill().unwrap();
    let _ = served.child.wait();
    let stdout = String::from_utf8_lossy(&listener.stdout);
    assert!(listener.status.success(), "{stdout}\n{}", String::from_utf8_lossy(&listener.stderr));
    assert!(stdout.contains("equal") && !stdout.contains("DIFFERENT"), "{stdout}");
    assert!(stdout.lines().filter(|line| line.contains("verify LG-")).count() >= 4, "{stdout}");
    assert!(stdout.contains("retransmission requests"), "{stdout}");
}
