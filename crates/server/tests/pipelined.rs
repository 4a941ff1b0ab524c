//! The pipelined order-entry loop (`bourse_server::gateways::rest::pipelined`) against the router: the same
//! requests, sent once each on their own connection (`Connection: close`, which the
//! loop hands to the router) and once pipelined back to back on one keep-alive
//! connection (the loop's own path), must get the same answers. And a request the loop
//! does not take, in the middle of a pipeline, hands the connection over with every
//! request after it answered in order.

mod support;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use serde_json::Value;
use support::{Client, TestServer};

fn order_body(side: &str, price: &str, qty: &str, client_id: &str) -> String {
    format!(
        r#"{{"symbol":"BTC-USD","side":"{side}","type":"limit","price":"{price}","qty":"{qty}","client_order_id":"{client_id}"}}"#
    )
}

/// The requests both paths get: every outcome order entry has (accepted, rejected by
/// the engine, refused by the checks, unknown orders, bad signatures).
fn script() -> Vec<(&'static str, String, String)> {
    vec![
        ("POST", "/v1/orders".into(), order_body("buy", "50", "1", "c1")),
        ("POST", "/v1/orders".into(), order_body("sell", "200", "0.5", "c2")),
        ("POST", "/v1/orders".into(), order_body("buy", "48", "1", "c7")),
        ("POST", "/v1/orders".into(), order_body("buy", "48", "1", "c7")),
        ("POST", "/v1/orders".into(), "{not json".into()),
        ("POST", "/v1/orders".into(), r#"{"symbol":"BTC-USD","colour":"red"}"#.into()),
        ("POST", "/v1/orders".into(), order_body("buy", "50.001", "1", "c3")),
        ("POST", "/v1/orders".into(), order_body("buy", "5000000", "1", "c4")),
        (
            "POST",
            "/v1/orders".into(),
            r#"{"symbol":"NOPE-USD","side":"buy","type":"limit","price":"1","qty":"1"}"#.into(),
        ),
        ("PATCH", "/v1/orders?client_order_id=c1".into(), r#"{"price":"45"}"#.into()),
        ("DELETE", "/v1/orders?client_order_id=c1".into(), String::new()),
        ("POST", "/v1/orders".into(), order_body("buy", "50", "1", "c1")),
        ("PATCH", "/v1/orders?client_order_id=c1".into(), r#"{"price":"x"}"#.into()),
        ("PATCH", "/v1/orders?client_order_id=c1".into(), "{}".into()),
        ("DELETE", "/v1/orders?client_order_id=c2".into(), String::new()),
        ("DELETE", "/v1/orders?client_order_id=c2".into(), String::new()),
        ("DELETE", "/v1/orders?client_order_id=never".into(), String::new()),
        ("POST", "/v1/orders".into(), order_body("sell", "300", "0.1", "c5")),
    ]
}

/// `request` as bytes, signed by `client` (or with a wrong signature).
fn request_bytes(client: &Client, method: &str, path: &str, body: &str, forged: bool) -> Vec<u8> {
    let mut headers = client.signature_headers(method, path, body, support::unique_timestamp_ms());
    if forged {
        headers[2].1 = "00".repeat(32);
    }
    let mut text = format!("{method} {path} HTTP/1.1\r\nHost: test\r\n");
    if !body.is_empty() {
        text.push_str(&format!("Content-Length: {}\r\n", body.len()));
    }
    for (name, value) in headers {
        text.push_str(&format!("{name}: {value}\r\n"));
    }
    text.push_str("\r\n");
    text.push_str(body);
    text.into_bytes()
}

/// Reads one response of a keep-alive connection: status and JSON body.
fn read_response(stream: &mut TcpStream, pending: &mut Vec<u8>) -> (u16, Value) {
    let mut chunk = [0u8; 8192];
    let head_end = loop {
        if let Some(end) = pending.windows(4).position(|window| window == b"\r\n\r\n") {
            break end + 4;
        }
        let count = stream.read(&mut chunk).unwrap();
        assert!(count > 0, "the connection closed before a response");
        pending.extend_from_slice(&chunk[..count]);
    };
    let head = String::from_utf8_lossy(&pending[..head_end]).to_ascii_lowercase();
    let status: u16 = head.split(' ').nth(1).unwrap().parse().unwrap();
    assert!(head.contains("\r\ndate: "), "{head}");
    let length: usize = head
        .lines()
        .find_map(|line| line.strip_prefix("content-length: "))
        .map(|value| value.trim().parse().unwrap())
        .expect("a content-length");
    while pending.len() < head_end + length {
        let count = stream.read(&mut chunk).unwrap();
        assert!(count > 0, "the connection closed inside a body");
        pending.extend_from_slice(&chunk[..count]);
    }
    let body: Value = serde_json::from_slice(&pending[head_end..head_end + length]).unwrap();
    pending.drain(..head_end + length);
    (status, body)
}

/// The answer without what differs between two accounts' otherwise equal orders.
fn normalized(mut value: Value) -> Value {
    match &mut value {
        Value::Object(fields) => {
            for field in ["order_id", "created_ns", "updated_ns", "seq", "ts", "account", "message"]
            {
                if fields.contains_key(field) {
                    fields.insert(field.to_string(), Value::from("*"));
                }
            }
            for (_, inner) in fields.iter_mut() {
                *inner = normalized(inner.take());
            }
        }
        Value::Array(items) => {
            for item in items.iter_mut() {
                *item = normalized(item.take());
            }
        }
        _ => {}
    }
    value
}

fn connect(server: &TestServer) -> TcpStream {
    let stream = TcpStream::connect(server.address).unwrap();
    stream.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    stream
}

#[test]
fn pipelined_order_entry_answers_exactly_as_the_router_does() {
    let directory = tempfile::tempdir().unwrap();
    let server = TestServer::start(directory.path(), false);
    server.declare_btc_usd();
    let routed = server.trader("routed", &[("USD", "10000"), ("BTC", "10")]);
    let piped = server.trader("piped", &[("USD", "10000"), ("BTC", "10")]);
    let mut script = script();
    // And a forged signature, last.
    script.push(("POST", "/v1/orders".into(), order_body("buy", "40", "1", "c6")));
    let forged_at = script.len() - 1;

    let mut expected = Vec::new();
    for (index, (method, path, body)) in script.iter().enumerate() {
        let bytes = request_bytes(&routed, method, path, body, index == forged_at);
        let mut stream = connect(&server);
        // The router's path: a connection that asks to be closed is handed over.
        let bytes = String::from_utf8(bytes).unwrap().replacen(
            "Host: test\r\n",
            "Host: test\r\nConnection: close\r\n",
            1,
        );
        stream.write_all(bytes.as_bytes()).unwrap();
        let mut response = Vec::new();
        stream.read_to_end(&mut response).unwrap();
        let (status, body) = support::parse_response(&response);
        let body: Value = serde_json::from_slice(&body).unwrap();
        expected.push((status, normalized(body)));
    }

    let mut stream = connect(&server);
    let mut all = Vec::new();
    for (index, (method, path, body)) in script.iter().enumerate() {
        all.extend(request_bytes(&piped, method, path, body, index == forged_at));
    }
    // Every request in one write: they are taken together, answered in order.
    stream.write_all(&all).unwrap();
    let mut pending = Vec::new();
    for (index, (status, body)) in expected.iter().enumerate() {
        let (got_status, got_body) = read_response(&mut stream, &mut pending);
        assert_eq!(
            (got_status, &normalized(got_body)),
            (*status, body),
            "request {index}: {:?}",
            script[index]
        );
    }
    // A mix of outcomes, not the same one everywhere.
    let statuses: std::collections::BTreeSet<u16> =
        expected.iter().map(|(status, _)| *status).collect();
    assert!(statuses.len() >= 4, "{statuses:?}");

    // Both accounts hold the same orders now.
    let (_, routed_orders) = routed.get("/v1/orders");
    let (_, piped_orders) = piped.get("/v1/orders");
    assert_eq!(normalized(routed_orders), normalized(piped_orders));
}

#[test]
fn a_request_for_the_router_mid_pipeline_hands_the_connection_over_in_order() {
    let directory = tempfile::tempdir().unwrap();
    let server = TestServer::start(directory.path(), false);
    server.declare_btc_usd();
    let trader = server.trader("trader", &[("USD", "10000")]);
    let mut stream = connect(&server);
    let mut all = Vec::new();
    for client_id in ["p1", "p2"] {
        all.extend(request_bytes(
            &trader,
            "POST",
            "/v1/orders",
            &order_body("buy", "10", "1", client_id),
            false,
        ));
    }
    all.extend(request_bytes(&trader, "GET", "/v1/orders", "", false));
    all.extend(request_bytes(
        &trader,
        "POST",
        "/v1/orders",
        &order_body("buy", "10", "1", "p3"),
        false,
    ));
    all.extend(request_bytes(&trader, "GET", "/v1/orders", "", false));
    stream.write_all(&all).unwrap();
    let mut pending = Vec::new();
    let mut answers = Vec::new();
    for _ in 0..5 {
        answers.push(read_response(&mut stream, &mut pending));
    }
    let client_ids = |orders: &Value| -> Vec<String> {
        let mut ids: Vec<String> = orders["orders"]
            .as_array()
            .unwrap()
            .iter()
            .map(|order| order["client_order_id"].as_str().unwrap().to_string())
            .collect();
        ids.sort();
        ids
    };
    assert_eq!(answers[0].1["order"]["client_order_id"], "p1");
    assert_eq!(answers[1].1["order"]["client_order_id"], "p2");
    // The read comes after the two orders before it, and before the one after it.
    assert_eq!(answers[2].0, 200, "{}", answers[2].1);
    assert_eq!(client_ids(&answers[2].1), ["p1", "p2"]);
    assert_eq!((answers[3].0, &answers[3].1["order"]["client_order_id"]), (200, &"p3".into()));
    assert_eq!(client_ids(&answers[4].1), ["p1", "p2", "p3"]);

    // The loop's requests are counted in /metrics under the router's route names.
    let (_, metrics) = support::raw_request(server.address, "GET", "/metrics", &[], b"");
    let metrics = String::from_utf8(metrics).unwrap();
    let placed = metrics
        .lines()
        .find(|line| {
            line.starts_with("bourse_requests_total{")
                && line.contains(r#"route="POST /v1/orders""#)
                && line.contains(r#"protocol="http""#)
                && line.contains(r#"status="200""#)
        })
        .unwrap_or_else(|| panic!("no count of placed orders in:\n{metrics}"));
    let count: f64 = placed.rsplit(' ').next().unwrap().parse().unwrap();
    assert_eq!(count, 3.0, "{placed}");
}

#[test]
fn a_long_pipeline_of_orders_is_answered_in_order() {
    let directory = tempfile::tempdir().unwrap();
    let server = TestServer::start(directory.path(), false);
    server.declare_btc_usd();
    let trader = server.trader("trader", &[("USD", "1000000")]);
    let mut stream = connect(&server);
    let mut all = Vec::new();
    let count = 150; // (under the default burst of 200 requests per key)
    for index in 0..count {
        let body = order_body("buy", "1", "0.001", &format!("m{index}"));
        all.extend(request_bytes(&trader, "POST", "/v1/orders", &body, false));
    }
    let mut writer = stream.try_clone().unwrap();
    let sending = std::thread::spawn(move || writer.write_all(&all).unwrap());
    let mut pending = Vec::new();
    for index in 0..count {
        let (status, body) = read_response(&mut stream, &mut pending);
        assert_eq!(status, 200, "{body}");
        assert_eq!(body["order"]["client_order_id"], format!("m{index}"));
    }
    sending.join().unwrap();
}
