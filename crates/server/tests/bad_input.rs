//! Bad input over a real socket: each gets a clear error (or a clean disconnect), the
//! server keeps serving, and nothing accepted is lost.

mod support;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use support::{request, Client, TestServer};

fn codes(result: (u16, serde_json::Value)) -> (u16, String) {
    (result.0, result.1["code"].as_str().unwrap_or("").to_string())
}

fn expect(result: (u16, serde_json::Value), status: u16, code: &str) {
    assert_eq!(codes(result.clone()), (status, code.to_string()), "{}", result.1);
    assert!(result.1["message"].as_str().is_some_and(|message| !message.is_empty()));
}

#[test]
fn unsigned_badly_signed_expired_replayed_and_revoked_requests_are_refused() {
    let directory = tempfile::tempdir().unwrap();
    let server = TestServer::start(directory.path(), false);
    let trader = server.trader("alice", &[]);
    let address = server.address;
    expect(request(address, "GET", "/v1/balances", &[], b""), 401, "missing_signature");
    let stranger = Client { key: "bk_000000000000000000000000".into(), ..trader.clone() };
    expect(stranger.get("/v1/balances"), 401, "invalid_key");
    let wrong_secret = Client { secret: "0".repeat(64), ..trader.clone() };
    expect(wrong_secret.get("/v1/balances"), 401, "invalid_signature");

    let now = support::now_ms();
    let mut headers = trader.signature_headers("GET", "/v1/balances", "", now);
    headers[2].1 = "zz".into();
    expect(request(address, "GET", "/v1/balances", &headers, b""), 401, "invalid_signature");
    let mut headers = trader.signature_headers("GET", "/v1/balances", "", now);
    headers[1].1 = "yesterday".into();
    expect(request(address, "GET", "/v1/balances", &headers, b""), 401, "invalid_timestamp");
    let stale = trader.signature_headers("GET", "/v1/balances", "", now - 60_000);
    expect(request(address, "GET", "/v1/balances", &stale, b""), 401, "expired_timestamp");
    let future = trader.signature_headers("GET", "/v1/balances", "", now + 60_000);
    expect(request(address, "GET", "/v1/balances", &future, b""), 401, "expired_timestamp");

    // A body changed after signing, a path changed after signing.
    let body = r#"{"symbol":"X","side":"buy","type":"market","qty":"1"}"#;
    let headers = trader.signature_headers("POST", "/v1/orders", body, now);
    let tampered = body.replace("\"1\"", "\"9\"");
    expect(
        request(address, "POST", "/v1/orders", &headers, tampered.as_bytes()),
        401,
        "invalid_signature",
    );
    let headers = trader.signature_headers("GET", "/v1/orders", "", now);
    expect(request(address, "GET", "/v1/fills", &headers, b""), 401, "invalid_signature");

    // The same signed request twice: the second is a replay.
    let headers = trader.signature_headers("GET", "/v1/balances", "", support::now_ms());
    assert_eq!(request(address, "GET", "/v1/balances", &headers, b"").0, 200);
    expect(request(address, "GET", "/v1/balances", &headers, b""), 401, "replayed_request");

    let (status, _) = server.admin.delete(&format!("/v1/admin/keys/{}", trader.key));
    assert_eq!(status, 200);
    expect(trader.get("/v1/balances"), 401, "invalid_key");
}

#[test]
fn malformed_mistyped_unknown_and_oversized_bodies_get_clear_errors() {
    let directory = tempfile::tempdir().unwrap();
    let server = TestServer::start(directory.path(), false);
    server.declare_btc_usd();
    let trader = server.trader("alice", &[("USD", "1000")]);
    expect(trader.post("/v1/orders", "{\"symbol\":"), 400, "malformed");
    expect(trader.post("/v1/orders", "[]"), 400, "malformed");
    expect(trader.post("/v1/orders", ""), 400, "malformed");
    let mistyped = r#"{"symbol":"BTC-USD","side":"buy","type":"limit","price":100,"qty":"1"}"#;
    expect(trader.post("/v1/orders", mistyped), 400, "malformed");
    let bad_enum = r#"{"symbol":"BTC-USD","side":"BUY","type":"limit","price":"100","qty":"1"}"#;
    expect(trader.post("/v1/orders", bad_enum), 400, "malformed");
    let unknown_field = r#"{"symbol":"BTC-USD","side":"buy","type":"limit","price":"100","qty":"1","leverage":"10"}"#;
    let (status, body) = trader.post("/v1/orders", unknown_field);
    assert_eq!((status, body["code"].as_str()), (400, Some("malformed")));
    assert!(body["message"].as_str().unwrap().contains("leverage"), "{body}");
    let bad_decimal = r#"{"symbol":"BTC-USD","side":"buy","type":"limit","price":"1e3","qty":"1"}"#;
    expect(trader.post("/v1/orders", bad_decimal), 400, "malformed");
    let no_price = r#"{"symbol":"BTC-USD","side":"buy","type":"limit","qty":"1"}"#;
    expect(trader.post("/v1/orders", no_price), 400, "malformed");
    let long_id = format!(
        r#"{{"symbol":"BTC-USD","side":"buy","type":"limit","price":"1","qty":"1","client_order_id":"{}"}}"#,
        "x".repeat(bourse_protocol::client_order_id::CLIENT_ORDER_ID_BYTES_MAX + 1)
    );
    expect(trader.post("/v1/orders", &long_id), 400, "malformed");
    let huge = format!(r#"{{"pad":"{}"}}"#, "x".repeat(100_000));
    expect(trader.post("/v1/orders", &huge), 413, "body_too_large");

    // The engine's reasons, with their statuses.
    let order = |symbol: &str, price: &str, qty: &str| {
        format!(
            r#"{{"symbol":"{symbol}","side":"buy","type":"limit","price":"{price}","qty":"{qty}"}}"#
        )
    };
    expect(trader.post("/v1/orders", &order("DOGE-USD", "1", "1")), 404, "unknown_symbol");
    expect(trader.post("/v1/orders", &order("BTC-USD", "1.001", "1")), 422, "invalid_price");
    expect(trader.post("/v1/orders", &order("BTC-USD", "1", "0.00001")), 422, "invalid_qty");
    expect(trader.post("/v1/orders", &order("BTC-USD", "1000", "2")), 422, "insufficient_funds");
    let market = r#"{"symbol":"BTC-USD","side":"buy","type":"market","qty":"1"}"#;
    expect(trader.post("/v1/orders", market), 422, "no_liquidity");

    // Paths and methods.
    expect(trader.get("/v1/orders/not-a-number"), 400, "malformed");
    expect(trader.get("/v1/orders/999999"), 404, "unknown_order");
    expect(trader.get("/v1/nowhere"), 404, "not_found");
    expect(request(server.address, "PUT", "/v1/instruments", &[], b""), 405, "method_not_allowed");
    expect(request(server.address, "GET", "/v1/depth/NOPE", &[], b""), 404, "unknown_symbol");
    expect(
        request(server.address, "GET", "/v1/depth/BTC-USD?levels=0", &[], b""),
        400,
        "malformed",
    );
    expect(trader.get("/v1/orders?status=sideways"), 400, "malformed");
    expect(trader.get("/v1/fills?limit=many"), 400, "malformed");
    expect(trader.get("/v1/orders?colour=red"), 400, "malformed");
    expect(
        request(server.address, "GET", "/v1/depth/BTC-USD?levels=abc", &[], b""),
        400,
        "malformed",
    );
    expect(
        request(server.address, "GET", "/v1/trades/BTC-USD?bogus=1", &[], b""),
        400,
        "malformed",
    );

    // The admin's inputs too.
    let admin = &server.admin;
    expect(
        admin.post("/v1/admin/accounts", r#"{"name":"no spaces allowed"}"#),
        400,
        "invalid_account",
    );
    expect(admin.post("/v1/admin/accounts", r#"{"name":"alice"}"#), 409, "duplicate_account");
    expect(admin.post("/v1/admin/keys", r#"{"account":"nobody"}"#), 404, "unknown_account");
    expect(
        admin.post("/v1/admin/deposits", r#"{"account":"nobody","asset":"USD","amount":"1"}"#),
        404,
        "unknown_account",
    );
    expect(
        admin.post("/v1/admin/deposits", r#"{"account":"alice","asset":"USD","amount":"-1"}"#),
        422,
        "invalid_amount",
    );
    expect(
        admin.post("/v1/admin/withdrawals", r#"{"account":"alice","asset":"USD","amount":"5000"}"#),
        422,
        "insufficient_funds",
    );
    expect(
        admin.post("/v1/admin/assets", r#"{"asset":"USD","decimals":2}"#),
        409,
        "duplicate_asset",
    );
    expect(admin.delete("/v1/admin/keys/bk_nope"), 404, "unknown_key");

    // And after all of it the server still trades.
    let (status, placed) = trader.post("/v1/orders", &order("BTC-USD", "10", "1"));
    assert_eq!(status, 200, "{placed}");
}

#[test]
fn too_many_requests_and_too_many_open_orders_are_limits_with_their_own_codes() {
    let directory = tempfile::tempdir().unwrap();
    let mut config = support::config(directory.path());
    config.limits.requests_per_second = 1;
    config.limits.requests_burst = 3;
    config.limits.open_orders_per_account = 2;
    let server = TestServer::start_with(config, false);
    server.declare_btc_usd();
    let trader = server.trader("alice", &[("USD", "1000")]);
    let order = |id: &str| {
        format!(
            r#"{{"symbol":"BTC-USD","side":"buy","type":"limit","price":"1","qty":"1","client_order_id":"{id}"}}"#
        )
    };
    assert_eq!(trader.post("/v1/orders", &order("1")).0, 200);
    assert_eq!(trader.post("/v1/orders", &order("2")).0, 200);
    expect(trader.post("/v1/orders", &order("3")), 422, "too_many_open_orders");
    let limited = trader.get("/v1/balances");
    expect(limited, 429, "rate_limited");
    // A key made with its own rate has that rate instead of the server's.
    let (status, fast) =
        server.admin.post("/v1/admin/keys", r#"{"account":"alice","requests_per_second":1000000}"#);
    assert_eq!((status, fast["requests_per_second"].as_u64()), (201, Some(1_000_000)));
    let fast = server.client(fast["key"].as_str().unwrap(), fast["secret"].as_str().unwrap());
    for _ in 0..20 {
        assert_eq!(fast.get("/v1/balances").0, 200);
    }
}

#[test]
fn truncated_slow_and_abruptly_closed_connections_leave_the_server_serving() {
    let directory = tempfile::tempdir().unwrap();
    let server = TestServer::start(directory.path(), true);
    let address = server.address;
    // Half a request, then the client vanishes.
    let mut half = TcpStream::connect(address).unwrap();
    half.write_all(b"POST /v1/orders HTTP/1.1\r\nHost: x\r\nContent-Length: 500\r\n\r\n{\"sym")
        .unwrap();
    drop(half);
    // Garbage instead of HTTP: a 400 or a close, never a hang.
    let mut garbage = TcpStream::connect(address).unwrap();
    garbage.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    garbage.write_all(&[0xff, 0x00, 0x13, 0x37, b'\r', b'\n', b'\r', b'\n']).unwrap();
    let mut answer = Vec::new();
    let _ = garbage.read_to_end(&mut answer);
    assert!(
        answer.is_empty() || answer.starts_with(b"HTTP/1.1 400"),
        "{:?}",
        String::from_utf8_lossy(&answer)
    );
    // A client that sends its request a byte at a time still gets its answer.
    let mut slow = TcpStream::connect(address).unwrap();
    slow.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    for byte in b"GET /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n" {
        slow.write_all(&[*byte]).unwrap();
    }
    let mut answer = Vec::new();
    slow.read_to_end(&mut answer).unwrap();
    assert!(answer.starts_with(b"HTTP/1.1 200"));
    // Many connections opened and dropped without a word.
    for _ in 0..50 {
        drop(TcpStream::connect(address).unwrap());
    }
    let (status, balances) = server.demo[0].get("/v1/balances");
    assert_eq!(status, 200, "{balances}");
}

#[test]
fn a_taken_port_or_an_unusable_data_directory_fails_the_start_with_a_reason() {
    let directory = tempfile::tempdir().unwrap();
    let server = TestServer::start(&directory.path().join("first"), false);
    let mut config = support::config(&directory.path().join("second"));
    config.http.listen = server.address;
    let runtime =
        tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build().unwrap();
    let error = runtime.block_on(bourse_server::start(config, false)).err().expect("port taken");
    assert!(error.to_string().contains("cannot listen on"), "{error}");
    let file = directory.path().join("a-file");
    std::fs::write(&file, b"not a directory").unwrap();
    let error = runtime
        .block_on(bourse_server::start(support::config(&file), false))
        .err()
        .expect("bad dir");
    assert!(error.to_string().contains("is not usable"), "{error}");
}

#[test]
fn a_client_that_never_reads_its_responses_does_not_stop_the_others() {
    let directory = tempfile::tempdir().unwrap();
    let server = TestServer::start(directory.path(), true);
    // Pipelines thousands of requests on one connection and reads nothing back.
    let mut hog = TcpStream::connect(server.address).unwrap();
    hog.set_write_timeout(Some(Duration::from_secs(2))).unwrap();
    let pipelined = b"GET /v1/depth/BTC-USD?levels=1000 HTTP/1.1\r\nHost: x\r\n\r\n";
    for _ in 0..5_000 {
        if hog.write_all(pipelined).is_err() {
            break; // the server stopped reading from it: that is the point
        }
    }
    let (status, balances) = server.demo[1].get("/v1/balances");
    assert_eq!(status, 200, "{balances}");
    let (status, _) = request(server.address, "GET", "/v1/depth/BTC-USD", &[], b"");
    assert_eq!(status, 200);
}
