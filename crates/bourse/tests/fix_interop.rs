//! QuickFIX/J 3.0.0, the FIX engine trading firms run, as an initiator against a real
//! `bourse serve --demo` (`docs/fix.md`): `tests/interop/quickfixj/BourseInitiator.java`
//! is written as a QuickFIX/J user writes one (an Application, a SessionSettings with a
//! FileStore, a SocketInitiator). It logs on with alice's API key, places, replaces and
//! cancels orders, is refused a cancel of an order that does not exist, trades against
//! an order bob placed over REST, opens a position in the demo's SHFE.cu2501 (the
//! close-today rule) and closes it the same day with PositionEffect T (Bourse's value;
//! a plain C is refused), has a resting order filled in part by bob over REST,
//! then drops the connection mid-stream. While it is gone bob fills the rest; a second
//! run with the same FileStore logs on again and must get that fill's report by resend
//! (PossDupFlag). Every report is checked against Bourse's REST view of the same order
//! and fills.
//!
//! The jars: `BOURSE_QUICKFIXJ_CLASSPATH` (a directory of jars; `.ci/run` fills one
//! with `mvn dependency:copy-dependencies` from `tests/interop/quickfixj/pom.xml`), or
//! the same done here, once, beside the test binaries. Needs `javac` and `java` 17.

mod support;

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use serde_json::Value;
use support::{signed, target_dir, Demo};

/// How long one step of the Java program may take.
const STEP_TIMEOUT: Duration = Duration::from_secs(60);

fn quickfixj_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/interop/quickfixj")
}

/// The directory of QuickFIX/J's jars and their dependencies.
fn jars() -> PathBuf {
    if let Ok(directory) = std::env::var("BOURSE_QUICKFIXJ_CLASSPATH") {
        return PathBuf::from(directory);
    }
    let directory = target_dir().join("quickfixj-jars");
    let pom = std::fs::read(quickfixj_dir().join("pom.xml")).unwrap();
    let copied = directory.join("pom.xml");
    if std::fs::read(&copied).ok().as_ref() != Some(&pom) {
        let output = Command::new("mvn")
            .args(["-q", "-f"])
            .arg(quickfixj_dir().join("pom.xml"))
            .arg("dependency:copy-dependencies")
            .arg(format!("-DoutputDirectory={}", directory.display()))
            .output()
            .expect("mvn is needed to fetch QuickFIX/J (or set BOURSE_QUICKFIXJ_CLASSPATH)");
        assert!(
            output.status.success(),
            "mvn dependency:copy-dependencies failed (Maven Central needed): {}",
            String::from_utf8_lossy(&output.stdout)
        );
        std::fs::write(&copied, &pom).unwrap();
    }
    directory
}

/// Compiles the initiator; its class path.
fn compile(work: &Path) -> String {
    let classpath = format!("{}/*", jars().display());
    let classes = work.join("classes");
    std::fs::create_dir_all(&classes).unwrap();
    let output = Command::new("javac")
        .arg("-d")
        .arg(&classes)
        .args(["-cp", &classpath])
        .arg(quickfixj_dir().join("BourseInitiator.java"))
        .output()
        .expect("javac (Java 17) is needed");
    assert!(output.status.success(), "javac failed: {}", String::from_utf8_lossy(&output.stderr));
    format!("{}:{classpath}", classes.display())
}

/// One run of the initiator, its stdout read line by line.
struct Initiator {
    child: Child,
    lines: mpsc::Receiver<String>,
    /// Every application message it printed, as tag -> value.
    reports: Vec<HashMap<String, String>>,
    log: Vec<String>,
}

impl Initiator {
    fn start(classpath: &str, phase: &str, demo: &Demo, store: &Path) -> Initiator {
        let (host, port) = demo.fix.rsplit_once(':').unwrap();
        let (key, secret) = &demo.keys["alice"];
        let mut child = Command::new("java")
            .args(["-cp", classpath, "BourseInitiator", phase, host, port, key, secret])
            .arg(store)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("java (17) is needed");
        let (sender, lines) = mpsc::channel();
        for output in [
            Box::new(child.stdout.take().unwrap()) as Box<dyn std::io::Read + Send>,
            Box::new(child.stderr.take().unwrap()),
        ] {
            let sender = sender.clone();
            std::thread::spawn(move || {
                for line in BufReader::new(output).lines().map_while(Result::ok) {
                    let _ = sender.send(line);
                }
            });
        }
        Initiator { child, lines, reports: Vec::new(), log: Vec::new() }
    }

    /// Reads until the line `wanted`; panics with the run's output if it does not come.
    fn wait_for(&mut self, wanted: &str, demo: &Demo) {
        loop {
            match self.lines.recv_timeout(STEP_TIMEOUT) {
                Ok(line) => {
                    if let Some(json) = line.strip_prefix("FIXJSON ") {
                        let report: HashMap<String, String> = serde_json::from_str(json).unwrap();
                        self.reports.push(report);
                    }
                    let done = line == wanted;
                    self.log.push(line);
                    if done {
                        return;
                    }
                }
                Err(_) => panic!(
                    "the initiator did not say {wanted}:\n{}\n{}",
                    support::tail(&self.log.join("\n"), 60, 400),
                    demo.server_log()
                ),
            }
        }
    }

    fn say(&mut self, line: &str) {
        let stdin = self.child.stdin.as_mut().unwrap();
        writeln!(stdin, "{line}").unwrap();
        stdin.flush().unwrap();
    }

    fn finish(mut self) -> Vec<HashMap<String, String>> {
        let status = self.child.wait().unwrap();
        assert!(status.success(), "the initiator failed:\n{}", self.log.join("\n"));
        self.reports
    }
}

/// One REST request signed with `account`'s key; its JSON.
fn rest(demo: &Demo, account: &str, method: &str, path: &str, body: &str) -> Value {
    // (Each request signs its own timestamp: the same request twice in a millisecond
    // would be a replay.)
    std::thread::sleep(Duration::from_millis(2));
    let (status, response) = signed(&demo.http, &demo.keys[account], method, path, body);
    let body = response.split("\r\n\r\n").nth(1).unwrap_or("");
    assert!(status < 300, "{method} {path}: {response}");
    serde_json::from_str(body).unwrap_or_else(|_| panic!("{method} {path}: {response}"))
}

fn sell_over_rest(demo: &Demo, id: &str, price: &str, qty: &str) {
    let body = format!(
        r#"{{"symbol":"BTC-USD","side":"sell","type":"limit","price":"{price}","qty":"{qty}","client_order_id":"{id}"}}"#
    );
    rest(demo, "bob", "POST", "/v1/orders", &body);
}

/// alice's order as REST shows it.
fn order(demo: &Demo, client_order_id: &str) -> Value {
    let answer =
        rest(demo, "alice", "GET", &format!("/v1/orders?client_order_id={client_order_id}"), "");
    match answer {
        Value::Array(mut orders) => orders.remove(0),
        Value::Object(ref object) if object.contains_key("orders") => answer["orders"][0].clone(),
        other => other,
    }
}

fn number(text: &str) -> f64 {
    text.parse().unwrap_or_else(|_| panic!("{text:?} is not a number"))
}

fn value(json: &Value) -> f64 {
    match json {
        Value::String(text) => number(text),
        Value::Number(number) => number.as_f64().unwrap(),
        other => panic!("{other} is not a number"),
    }
}

/// The reports for `cl_ord_id` of ExecType `exec_type`.
fn reports<'a>(
    all: &'a [HashMap<String, String>],
    cl_ord_id: &str,
    exec_type: &str,
) -> Vec<&'a HashMap<String, String>> {
    all.iter()
        .filter(|report| {
            report["35"] == "8" && report["11"] == cl_ord_id && report["150"] == exec_type
        })
        .collect()
}

#[test]
fn a_quickfixj_initiator_trades_and_recovers_the_reports_it_missed_by_resend() {
    let demo = Demo::start();
    let work = tempfile::tempdir().unwrap();
    let classpath = compile(work.path());
    let store = work.path().join("quickfixj-store");
    // bob's order over REST, which alice's IOC order takes (inside the demo's quotes).
    sell_over_rest(&demo, "bob-1", "60001", "0.01");

    let mut trade = Initiator::start(&classpath, "trade", &demo, &store);
    trade.wait_for("READY", &demo);
    sell_over_rest(&demo, "bob-2", "60002", "0.01");
    trade.say("go");
    trade.wait_for("DROP", &demo);
    let first = trade.finish();
    // While alice is disconnected, bob fills the rest of her order.
    sell_over_rest(&demo, "bob-3", "60002", "0.02");

    let mut recover = Initiator::start(&classpath, "recover", &demo, &store);
    recover.wait_for("DONE", &demo);
    let second = recover.finish();

    // Placed, replaced, canceled.
    let new = reports(&first, "q1", "0");
    assert_eq!(new.len(), 1, "{first:?}");
    let q1 = order(&demo, "q1");
    assert_eq!(new[0]["37"], q1["order_id"].to_string());
    assert_eq!(new[0]["39"], "0");
    let replaced = reports(&first, "q1r", "5");
    assert_eq!(replaced.len(), 1, "{first:?}");
    assert_eq!(
        (replaced[0]["41"].as_str(), replaced[0]["37"].as_str()),
        ("q1", new[0]["37"].as_str())
    );
    assert_eq!(number(&replaced[0]["44"]), 50001.0);
    assert_eq!(number(&replaced[0]["38"]), 0.02);
    assert_eq!(number(&replaced[0]["151"]), 0.02);
    let canceled = reports(&first, "q1c", "4");
    assert_eq!(canceled.len(), 1, "{first:?}");
    assert_eq!((canceled[0]["41"].as_str(), canceled[0]["39"].as_str()), ("q1r", "4"));
    assert_eq!(q1["status"], "canceled");
    assert_eq!(value(&q1["price"]), 50001.0);
    // The cancel of an order that does not exist.
    let reject = first.iter().find(|report| report["35"] == "9").expect("an OrderCancelReject");
    assert_eq!(
        (reject["11"].as_str(), reject["41"].as_str(), reject["434"].as_str()),
        ("q9c", "nope", "1")
    );
    assert_eq!(reject["102"], "1", "unknown order");

    // The IOC order that took bob's REST order.
    let fills = rest(&demo, "alice", "GET", "/v1/fills?limit=100", "");
    let fills =
        fills.as_array().cloned().unwrap_or_else(|| fills["fills"].as_array().unwrap().clone());
    let t1 = order(&demo, "t1");
    let t1_trades = reports(&first, "t1", "F");
    assert_eq!(t1_trades.len(), 1, "{first:?}");
    assert_eq!(t1_trades[0]["37"], t1["order_id"].to_string());
    assert_eq!((number(&t1_trades[0]["31"]), number(&t1_trades[0]["32"])), (60001.0, 0.01));
    assert_eq!((t1_trades[0]["39"].as_str(), number(&t1_trades[0]["151"])), ("2", 0.0));
    assert_eq!(value(&t1["filled"]), number(&t1_trades[0]["14"]));

    // Futures: f1 opened 1 lot today; C (f2) is refused, as it closes only positions
    // from before the day's settlement; T (f3) closes today's, and the position is zero.
    let f1 = reports(&first, "f1", "F");
    assert_eq!(f1.len(), 1, "{first:?}");
    assert_eq!((f1[0]["39"].as_str(), number(&f1[0]["32"])), ("2", 1.0));
    let f2 = reports(&first, "f2", "8");
    assert_eq!(f2.len(), 1, "{first:?}");
    assert!(f2[0]["58"].starts_with("insufficient_position"), "{:?}", f2[0]);
    let f3 = reports(&first, "f3", "F");
    assert_eq!(f3.len(), 1, "{first:?}");
    assert_eq!(
        (f3[0]["39"].as_str(), number(&f3[0]["32"]), number(&f3[0]["31"])),
        ("2", 1.0, 74990.0)
    );
    assert_eq!(order(&demo, "f3")["status"], "filled");
    let positions = rest(&demo, "alice", "GET", "/v1/positions", "");
    let cu = &positions["positions"]["SHFE.cu2501"];
    for field in ["volume_long_today", "volume_long_his", "volume_short"] {
        assert_eq!(value(cu.get(field).unwrap_or(&Value::from("0"))), 0.0, "{positions}");
    }

    // q2: filled in part while connected, the rest while not; that report came again
    // after the Logon, as a resend.
    let q2 = order(&demo, "q2");
    assert_eq!(q2["status"], "filled");
    let mut q2_trades: Vec<&HashMap<String, String>> = reports(&first, "q2", "F");
    q2_trades.extend(reports(&second, "q2", "F"));
    // A report resent because the first run halted before QuickFIX/J stored its
    // sequence number is the same report (same ExecID): counted once.
    let mut exec_ids = std::collections::HashSet::new();
    q2_trades.retain(|report| exec_ids.insert(report["17"].clone()));
    assert_eq!(q2_trades.len(), 2, "{first:?}\n{second:?}");
    let (partial, last) = (q2_trades[0], q2_trades[1]);
    assert_eq!(
        (partial["39"].as_str(), number(&partial["14"]), number(&partial["151"])),
        ("1", 0.01, 0.02)
    );
    assert_eq!(last.get("43").map(String::as_str), Some("Y"), "a resend: {last:?}");
    assert!(last.contains_key("122"), "OrigSendingTime: {last:?}");
    assert_eq!((last["39"].as_str(), number(&last["14"]), number(&last["151"])), ("2", 0.03, 0.0));
    assert_eq!(
        (number(&last["31"]), number(&last["32"]), number(&last["6"])),
        (60002.0, 0.02, 60002.0)
    );
    assert_eq!(value(&q2["filled"]), number(&last["14"]));
    for report in q2_trades.iter().chain(&t1_trades) {
        assert_eq!(report["37"], order(&demo, &report["11"])["order_id"].to_string());
        let fill = fills
            .iter()
            .find(|fill| fill["trade_id"] == report["527"].as_str())
            .unwrap_or_else(|| panic!("no REST fill {} in {fills:?}", report["527"]));
        assert_eq!(value(&fill["price"]), number(&report["31"]));
        assert_eq!(value(&fill["qty"]), number(&report["32"]));
        assert_eq!(fill["client_order_id"], report["11"].as_str());
    }
}
