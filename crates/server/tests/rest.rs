//! The REST gateway over real sockets: orders, reads, admin, idempotent retries,
//! isolation between accounts, and a restart that must give the same answers.

mod support;

use serde_json::Value;
use support::TestServer;

fn order_body(symbol: &str, side: &str, price: &str, qty: &str, client_id: &str) -> String {
    format!(
        r#"{{"symbol":"{symbol}","side":"{side}","type":"limit","price":"{price}","qty":"{qty}","client_order_id":"{client_id}"}}"#
    )
}

#[test]
fn the_demo_serves_instruments_depth_and_funded_accounts() {
    let directory = tempfile::tempdir().unwrap();
    let server = TestServer::start(directory.path(), true);
    let (status, health) = support::request(server.address, "GET", "/health", &[], b"");
    assert_eq!((status, health["status"].as_str()), (200, Some("ok")));
    let (status, ready) = support::request(server.address, "GET", "/ready", &[], b"");
    assert_eq!((status, ready["ready"].as_bool()), (200, Some(true)));
    let (status, instruments) =
        support::request(server.address, "GET", "/v1/instruments", &[], b"");
    assert_eq!(status, 200);
    let symbols: Vec<&str> = instruments["instruments"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["symbol"].as_str().unwrap())
        .collect();
    assert_eq!(symbols, ["BTC-USD", "ETH-USD", "SHFE.cu2501"]);
    let kinds: Vec<&str> = instruments["instruments"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["kind"].as_str().unwrap())
        .collect();
    assert_eq!(kinds, ["spot", "spot", "future"]);
    let (status, depth) =
        support::request(server.address, "GET", "/v1/depth/BTC-USD?levels=2", &[], b"");
    assert_eq!(status, 200, "{depth}");
    assert_eq!(depth["bids"].as_array().unwrap().len(), 2);
    assert_eq!(depth["asks"][0][0].as_str(), Some("60005"));
    assert_eq!(server.demo.len(), 2);
    let (status, balances) = server.demo[0].get("/v1/balances");
    assert_eq!(status, 200, "{balances}");
    assert_eq!(balances["account"].as_str(), Some("alice"));
    assert_eq!(balances["balances"]["USD"]["available"].as_str(), Some("1000000"));
}

#[test]
fn an_order_is_acknowledged_with_its_fills_and_reads_back_the_same() {
    let directory = tempfile::tempdir().unwrap();
    let server = TestServer::start(directory.path(), false);
    let (seller, buyer) = server.seller_and_buyer("2", "100000");
    let (status, placed) =
        seller.post("/v1/orders", &order_body("BTC-USD", "sell", "100", "1.5", "s1"));
    assert_eq!(status, 200, "{placed}");
    assert_eq!(placed["order"]["status"].as_str(), Some("open"));
    assert_eq!(placed["order"]["remaining"].as_str(), Some("1.5"));
    let sell_id = placed["order"]["order_id"].as_u64().unwrap();

    let (status, taken) = buyer.post("/v1/orders", &order_body("BTC-USD", "buy", "101", "1", "b1"));
    assert_eq!(status, 200, "{taken}");
    assert_eq!(taken["order"]["status"].as_str(), Some("filled"));
    let fills = taken["fills"].as_array().unwrap();
    assert_eq!(fills.len(), 1);
    assert_eq!(fills[0]["price"].as_str(), Some("100"), "at the maker's price");
    assert_eq!(fills[0]["qty"].as_str(), Some("1"));
    assert_eq!(fills[0]["liquidity"].as_str(), Some("taker"));
    assert_eq!(fills[0]["fee"].as_str(), Some("0.0005"), "5 bps of 1 BTC received");
    assert_eq!(fills[0]["fee_asset"].as_str(), Some("BTC"));

    let (status, order) = seller.get(&format!("/v1/orders/{sell_id}"));
    assert_eq!(status, 200, "{order}");
    assert_eq!(order["filled"].as_str(), Some("1"));
    assert_eq!(order["remaining"].as_str(), Some("0.5"));
    let (_, by_client) = seller.get("/v1/orders?client_order_id=s1");
    assert_eq!(by_client, order);
    let (_, seller_fills) = seller.get("/v1/fills");
    assert_eq!(seller_fills["fills"][0]["liquidity"].as_str(), Some("maker"));
    assert_eq!(seller_fills["fills"][0]["fee"].as_str(), Some("0.02"), "2 bps of 100 USD");
    let (_, balances) = seller.get("/v1/balances");
    assert_eq!(balances["balances"]["USD"]["available"].as_str(), Some("99.98"));
    assert_eq!(balances["balances"]["BTC"]["held"].as_str(), Some("0.5"));
    let (_, open) = seller.get("/v1/orders");
    assert_eq!(open["orders"].as_array().unwrap().len(), 1);
    let (_, finished) = buyer.get("/v1/orders?status=finished");
    assert_eq!(finished["orders"][0]["client_order_id"].as_str(), Some("b1"));
}

#[test]
fn a_tqsdk_order_id_is_kept_whole_and_one_longer_than_the_rule_is_refused() {
    let directory = tempfile::tempdir().unwrap();
    let server = TestServer::start(directory.path(), true);
    let alice = &server.demo[0];
    // tqsdk's ids: `PYSDK_insert_` and 32 hex digits; it keys its orders by them.
    let id = "PYSDK_insert_0123456789abcdef0123456789abcdef";
    assert_eq!(id.len(), 45);
    let order = format!(
        r#"{{"symbol":"SHFE.cu2501","side":"buy","type":"limit","price":"74000","qty":"1","offset":"open","time_in_force":"gfd","client_order_id":"{id}"}}"#
    );
    let (status, placed) = alice.post("/v1/orders", &order);
    assert_eq!(status, 200, "{placed}");
    assert_eq!(
        (placed["order"]["client_order_id"].as_str(), placed["order"]["status"].as_str()),
        (Some(id), Some("open"))
    );
    let (status, shown) = alice.get(&format!("/v1/orders?client_order_id={id}"));
    assert_eq!((status, shown["client_order_id"].as_str()), (200, Some(id)), "{shown}");
    let (_, open) = alice.get("/v1/orders");
    let open_ids: Vec<&str> = open["orders"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|order| order["client_order_id"].as_str())
        .collect();
    assert!(open_ids.contains(&id), "{open}");
    let (status, canceled) = alice.delete(&format!("/v1/orders?client_order_id={id}"));
    assert_eq!(status, 200, "{canceled}");
    assert_eq!(
        (canceled["client_order_id"].as_str(), canceled["status"].as_str()),
        (Some(id), Some("canceled"))
    );
    let (_, finished) = alice.get("/v1/orders?status=finished");
    assert_eq!(finished["orders"][0]["client_order_id"].as_str(), Some(id), "{finished}");

    // The longest id the rule allows is taken; one character more is refused.
    let max = bourse_protocol::client_order_id::CLIENT_ORDER_ID_BYTES_MAX;
    let spot = |client_id: &str| order_body("BTC-USD", "buy", "50000", "0.001", client_id);
    let (status, placed) = alice.post("/v1/orders", &spot(&"L".repeat(max)));
    assert_eq!(status, 200, "{placed}");
    assert_eq!(placed["order"]["client_order_id"].as_str().map(str::len), Some(max));
    let (status, refused) = alice.post("/v1/orders", &spot(&"L".repeat(max + 1)));
    assert_eq!((status, refused["code"].as_str()), (400, Some("malformed")), "{refused}");
    let message = refused["message"].as_str().unwrap();
    assert!(message.contains(&format!("1 to {max} printable ASCII")), "{message}");

    // Both ids come back whole after a restart (the snapshot and the journal keep them).
    let alice = alice.clone();
    server.stop();
    let server = TestServer::start(directory.path(), false);
    let alice = server.client(&alice.key, &alice.secret);
    let (status, longest) = alice.get(&format!("/v1/orders?client_order_id={}", "L".repeat(max)));
    assert_eq!((status, longest["status"].as_str()), (200, Some("open")), "{longest}");
    let (status, shown) = alice.get(&format!("/v1/orders?client_order_id={id}"));
    assert_eq!((status, shown["status"].as_str()), (200, Some("canceled")), "{shown}");
}

#[test]
fn cancel_and_amend_act_on_the_callers_order_by_exchange_or_client_id() {
    let directory = tempfile::tempdir().unwrap();
    let server = TestServer::start(directory.path(), false);
    server.declare_btc_usd();
    let trader = server.trader("trader", &[("USD", "10000")]);
    let (_, placed) = trader.post("/v1/orders", &order_body("BTC-USD", "buy", "50", "1", "c1"));
    let order_id = placed["order"]["order_id"].as_u64().unwrap();
    let (status, amended) =
        trader.patch(&format!("/v1/orders/{order_id}"), r#"{"price":"55","qty":"2"}"#);
    assert_eq!(status, 200, "{amended}");
    assert_eq!((amended["price"].as_str(), amended["remaining"].as_str()), (Some("55"), Some("2")));
    let (_, balances) = trader.get("/v1/balances");
    assert_eq!(balances["balances"]["USD"]["held"].as_str(), Some("110"));
    let (status, canceled) = trader.delete(&format!("/v1/orders/{order_id}"));
    assert_eq!(status, 200, "{canceled}");
    assert_eq!(canceled["status"].as_str(), Some("canceled"));
    let (status, again) = trader.delete(&format!("/v1/orders/{order_id}"));
    assert_eq!((status, again["code"].as_str()), (404, Some("unknown_order")));
    trader.post("/v1/orders", &order_body("BTC-USD", "buy", "50", "1", "c2"));
    // Amended by the client's id too; without the id, or a bad body: clear errors.
    let (status, amended) = trader.patch("/v1/orders?client_order_id=c2", r#"{"price":"45"}"#);
    assert_eq!((status, amended["price"].as_str()), (200, Some("45")), "{amended}");
    let (status, no_id) = trader.patch("/v1/orders", r#"{"price":"45"}"#);
    assert_eq!((status, no_id["code"].as_str()), (400, Some("malformed")), "{no_id}");
    let (status, bad) = trader.patch("/v1/orders?client_order_id=c2", r#"{"price":"x"}"#);
    assert_eq!((status, bad["code"].as_str()), (400, Some("malformed")), "{bad}");
    let (status, canceled) = trader.delete("/v1/orders?client_order_id=c2");
    assert_eq!((status, canceled["status"].as_str()), (200, Some("canceled")), "{canceled}");
    let (_, balances) = trader.get("/v1/balances");
    assert_eq!(balances["balances"]["USD"]["held"].as_str(), Some("0"));
    let (status, empty_amend) = trader.patch(&format!("/v1/orders/{order_id}"), "{}");
    assert_eq!((status, empty_amend["code"].as_str()), (400, Some("malformed")));
}

#[test]
fn an_account_never_sees_or_touches_another_accounts_orders() {
    let directory = tempfile::tempdir().unwrap();
    let server = TestServer::start(directory.path(), false);
    server.declare_btc_usd();
    let owner = server.trader("owner", &[("USD", "1000")]);
    let other = server.trader("other", &[("USD", "1000")]);
    let (_, placed) = owner.post("/v1/orders", &order_body("BTC-USD", "buy", "10", "1", "mine"));
    let order_id = placed["order"]["order_id"].as_u64().unwrap();
    for (status, body) in [
        other.get(&format!("/v1/orders/{order_id}")),
        other.delete(&format!("/v1/orders/{order_id}")),
        other.patch(&format!("/v1/orders/{order_id}"), r#"{"qty":"2"}"#),
        other.get("/v1/orders?client_order_id=mine"),
        other.delete("/v1/orders?client_order_id=mine"),
        other.patch("/v1/orders?client_order_id=mine", r#"{"qty":"2"}"#),
    ] {
        assert_eq!((status, body["code"].as_str()), (404, Some("unknown_order")), "{body}");
    }
    let (_, still) = owner.get(&format!("/v1/orders/{order_id}"));
    assert_eq!((still["status"].as_str(), still["remaining"].as_str()), (Some("open"), Some("1")));
    let (_, open) = other.get("/v1/orders");
    assert_eq!(open["orders"].as_array().unwrap().len(), 0);
    let (status, body) =
        other.post("/v1/admin/deposits", r#"{"account":"other","asset":"USD","amount":"1"}"#);
    assert_eq!((status, body["code"].as_str()), (403, Some("forbidden")));
    let (status, body) =
        server.admin.post("/v1/orders", &order_body("BTC-USD", "buy", "10", "1", "x"));
    assert_eq!(
        (status, body["code"].as_str()),
        (403, Some("forbidden")),
        "admin keys trade for nobody"
    );
}

#[test]
fn retrying_a_submission_never_creates_a_second_order() {
    let directory = tempfile::tempdir().unwrap();
    let server = TestServer::start(directory.path(), false);
    server.declare_btc_usd();
    let trader = server.trader("trader", &[("USD", "100000")]);
    let body = order_body("BTC-USD", "buy", "10", "1", "retry-me");
    // Eight clients send the same submission at once, as a client retrying on timeouts
    // over several connections would (each signed anew, so none is a replay).
    let now = support::now_ms();
    let results: Vec<(u16, Value)> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..8)
            .map(|index| {
                let (trader, body) = (&trader, &body);
                scope.spawn(move || {
                    let headers =
                        trader.signature_headers("POST", "/v1/orders", body, now - 1_000 - index);
                    support::request(
                        trader.address,
                        "POST",
                        "/v1/orders",
                        &headers,
                        body.as_bytes(),
                    )
                })
            })
            .collect();
        handles.into_iter().map(|handle| handle.join().unwrap()).collect()
    });
    let accepted: Vec<_> = results.iter().filter(|(status, _)| *status == 200).collect();
    assert_eq!(accepted.len(), 1, "{results:?}");
    let order_id = accepted[0].1["order"]["order_id"].as_u64();
    for (status, answer) in results.iter().filter(|(status, _)| *status != 200) {
        assert_eq!((*status, answer["code"].as_str()), (409, Some("duplicate_id")));
        assert_eq!(answer["order"]["order_id"].as_u64(), order_id, "the retry names the original");
    }
    let (_, open) = trader.get("/v1/orders");
    assert_eq!(open["orders"].as_array().unwrap().len(), 1);
    // Once the order is finished, its id still cannot make a new one.
    trader.delete("/v1/orders?client_order_id=retry-me");
    let (status, answer) = trader.post("/v1/orders", &body);
    assert_eq!((status, answer["code"].as_str()), (409, Some("duplicate_id")), "{answer}");
    assert_eq!(answer["order"]["status"].as_str(), Some("canceled"));
    let (_, balances) = trader.get("/v1/balances");
    assert_eq!(balances["balances"]["USD"]["held"].as_str(), Some("0"));
}

#[test]
fn after_a_restart_orders_fills_balances_keys_and_retries_answer_the_same() {
    let directory = tempfile::tempdir().unwrap();
    let server = TestServer::start(directory.path(), false);
    let (seller, buyer) = server.seller_and_buyer("1", "1000");
    seller.post("/v1/orders", &order_body("BTC-USD", "sell", "100", "0.5", "s"));
    let (_, taken) = buyer.post("/v1/orders", &order_body("BTC-USD", "buy", "100", "0.2", "b"));
    let before: Vec<(u16, Value)> = vec![
        seller.get("/v1/orders"),
        seller.get("/v1/fills"),
        seller.get("/v1/balances"),
        buyer.get("/v1/fills"),
    ];
    let (seller_key, buyer_key) = (seller.clone(), buyer.clone());
    server.stop();

    let server = TestServer::start(directory.path(), false);
    let seller = server.client(&seller_key.key, &seller_key.secret);
    let buyer = server.client(&buyer_key.key, &buyer_key.secret);
    let after: Vec<(u16, Value)> = vec![
        seller.get("/v1/orders"),
        seller.get("/v1/fills"),
        seller.get("/v1/balances"),
        buyer.get("/v1/fills"),
    ];
    assert_eq!(before, after);
    let (status, retry) =
        buyer.post("/v1/orders", &order_body("BTC-USD", "buy", "100", "0.2", "b"));
    assert_eq!(status, 409, "{retry}");
    assert_eq!(retry["order"]["order_id"], taken["order"]["order_id"]);
}

#[test]
fn openapi_describes_exactly_the_routes_the_server_serves() {
    let directory = tempfile::tempdir().unwrap();
    let server = TestServer::start(directory.path(), false);
    let (status, document) = support::request(server.address, "GET", "/openapi.json", &[], b"");
    assert_eq!(status, 200);
    assert_eq!(document["openapi"].as_str(), Some("3.1.0"));
    let mut described = 0;
    for (path, operations) in document["paths"].as_object().unwrap() {
        for (method, operation) in operations.as_object().unwrap() {
            described += 1;
            let concrete = path
                .replace("{symbol}", "NOPE")
                .replace("{order_id}", "1")
                .replace("{account}", "nobody")
                .replace("{key_id}", "bk_x");
            let (status, body) =
                support::request(server.address, &method.to_uppercase(), &concrete, &[], b"");
            assert_ne!(status, 405, "{method} {path}");
            assert_ne!(body["code"].as_str(), Some("not_found"), "{method} {path} is not routed");
            let signed = operation.get("security").is_some();
            assert_eq!(status == 401, signed, "{method} {path}: {status} {body}");
        }
    }
    assert_eq!(described, bourse_server::gateways::rest::openapi::ROUTES.len());
}

#[test]
fn any_key_reads_its_own_role_and_account_and_an_unsigned_request_is_refused() {
    let directory = tempfile::tempdir().unwrap();
    let server = TestServer::start(directory.path(), false);
    let alice = server.trader("alice", &[]);
    let (status, trader) = alice.get("/v1/key");
    assert_eq!(status, 200, "{trader}");
    assert_eq!(
        (trader["key"].as_str(), trader["role"].as_str(), trader["account"].as_str()),
        (Some(alice.key.as_str()), Some("trader"), Some("alice")),
        "{trader}"
    );
    assert_eq!(trader["revoked"], false);
    assert!(trader.get("secret").is_none(), "no secret: {trader}");
    // The admin key answers 200 too (no role is refused this read).
    let (status, admin) = server.admin.get("/v1/key");
    assert_eq!(status, 200, "{admin}");
    assert_eq!(
        (admin["key"].as_str(), admin["role"].as_str(), admin["account"].clone()),
        (Some(server.admin.key.as_str()), Some("admin"), Value::Null),
        "{admin}"
    );
    let (status, refused) = support::request(server.address, "GET", "/v1/key", &[], b"");
    assert_eq!((status, refused["code"].as_str()), (401, Some("missing_signature")));
    let (status, _) = server.admin.delete(&format!("/v1/admin/keys/{}", alice.key));
    assert_eq!(status, 200);
    let (status, revoked) = alice.get("/v1/key");
    assert_eq!((status, revoked["code"].as_str()), (401, Some("invalid_key")), "{revoked}");
}

#[test]
fn metrics_count_requests_commands_rejects_trades_connections_and_journal_syncs() {
    let directory = tempfile::tempdir().unwrap();
    let server = TestServer::start(directory.path(), false);
    let (seller, buyer) = server.seller_and_buyer("1", "1000");
    seller.post("/v1/orders", &order_body("BTC-USD", "sell", "100", "0.5", "s"));
    buyer.post("/v1/orders", &order_body("BTC-USD", "buy", "100", "0.2", "b"));
    let (status, _) =
        buyer.post("/v1/orders", &order_body("BTC-USD", "buy", "100", "50", "too-much"));
    assert_eq!(status, 422);
    // The feed counts trades and rejects as it sees them: give it a moment.
    let mut text = String::new();
    for _ in 0..100 {
        let (status, body) = support::raw_request(server.address, "GET", "/metrics", &[], b"");
        assert_eq!(status, 200);
        text = String::from_utf8(body).unwrap();
        if text.contains("bourse_trades_total 1") && text.contains("reason=\"insufficient_funds\"")
        {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    for expected in [
        "bourse_requests_total{protocol=\"http\",route=\"POST /v1/orders\",status=\"200\"} 2",
        "bourse_requests_total{protocol=\"http\",route=\"POST /v1/orders\",status=\"422\"} 1",
        "bourse_request_seconds_bucket{le=",
        "bourse_trades_total 1",
        "bourse_rejects_total{reason=\"insufficient_funds\"} 1",
        "bourse_commands_total{result=\"accepted\"}",
        "bourse_journal_sync_seconds_count",
        "bourse_journal_batches_total",
        "bourse_journal_batch_commands_bucket{le=\"1.0\"}",
        "bourse_intake_queue_commands",
        "bourse_connections{protocol=\"http\"}",
    ] {
        assert!(text.contains(expected), "{expected} missing from:\n{text}");
    }
    // Histogram buckets are cumulative: the last one (+Inf) counts everything.
    let value = |prefix: &str| {
        text.lines()
            .find(|line| line.starts_with(prefix))
            .and_then(|line| line.rsplit(' ').next())
            .map(str::to_string)
            .unwrap_or_else(|| panic!("{prefix} missing from:\n{text}"))
    };
    for histogram in ["bourse_journal_batch_commands", "bourse_journal_sync_seconds"] {
        assert_eq!(
            value(&format!("{histogram}_bucket{{le=\"+Inf\"}}")),
            value(&format!("{histogram}_count ")),
            "{histogram}:\n{text}"
        );
    }
}

#[test]
fn a_halted_instrument_takes_cancels_but_no_new_orders_until_resumed() {
    let directory = tempfile::tempdir().unwrap();
    let server = TestServer::start(directory.path(), false);
    server.declare_btc_usd();
    let trader = server.trader("trader", &[("USD", "1000")]);
    let (_, resting) =
        trader.post("/v1/orders", &order_body("BTC-USD", "buy", "10", "1", "before"));
    let resting_id = resting["order"]["order_id"].as_u64().unwrap();
    let (status, halted) = server.admin.post("/v1/admin/instruments/BTC-USD/halt", "");
    assert_eq!((status, halted["halted"].as_bool()), (200, Some(true)), "{halted}");
    let (_, instruments) = support::request(server.address, "GET", "/v1/instruments", &[], b"");
    assert_eq!(instruments["instruments"][0]["halted"], true);
    let (status, refused) =
        trader.post("/v1/orders", &order_body("BTC-USD", "buy", "10", "1", "during"));
    assert_eq!((status, refused["code"].as_str()), (422, Some("instrument_halted")));
    let (status, refused) = trader.patch(&format!("/v1/orders/{resting_id}"), r#"{"qty":"2"}"#);
    assert_eq!((status, refused["code"].as_str()), (422, Some("instrument_halted")));
    let (status, canceled) = trader.delete(&format!("/v1/orders/{resting_id}"));
    assert_eq!(
        (status, canceled["status"].as_str()),
        (200, Some("canceled")),
        "cancels work in a halt"
    );
    let (status, _) = server.admin.post("/v1/admin/instruments/BTC-USD/resume", "");
    assert_eq!(status, 200);
    let (status, _) = trader.post("/v1/orders", &order_body("BTC-USD", "buy", "10", "1", "after"));
    assert_eq!(status, 200);
    let (status, body) = server.admin.post("/v1/admin/instruments/NOPE/halt", "");
    assert_eq!((status, body["code"].as_str()), (404, Some("unknown_symbol")));
    let (status, body) = trader.post("/v1/admin/instruments/BTC-USD/halt", "");
    assert_eq!((status, body["code"].as_str()), (403, Some("forbidden")));
}

#[test]
fn cancel_all_cancels_every_open_order_of_the_account_and_releases_its_holds() {
    let directory = tempfile::tempdir().unwrap();
    let server = TestServer::start(directory.path(), false);
    server.declare_btc_usd();
    let trader = server.trader("trader", &[("USD", "1000")]);
    let other = server.trader("other", &[("USD", "1000")]);
    for index in 0..3 {
        trader.post("/v1/orders", &order_body("BTC-USD", "buy", "10", "1", &format!("t{index}")));
    }
    other.post("/v1/orders", &order_body("BTC-USD", "buy", "10", "1", "keep"));
    let (status, answer) = server.admin.post("/v1/admin/accounts/trader/cancel-all", "");
    assert_eq!(status, 200, "{answer}");
    let mut canceled: Vec<&str> =
        answer["canceled"].as_array().unwrap().iter().map(|id| id.as_str().unwrap()).collect();
    canceled.sort();
    assert_eq!(canceled, ["t0", "t1", "t2"]);
    let (_, open) = trader.get("/v1/orders");
    assert_eq!(open["orders"].as_array().unwrap().len(), 0);
    let (_, balances) = trader.get("/v1/balances");
    assert_eq!(balances["balances"]["USD"]["held"], "0");
    let (_, open) = other.get("/v1/orders");
    assert_eq!(open["orders"].as_array().unwrap().len(), 1, "another account's orders stay");
    let (status, body) = server.admin.post("/v1/admin/accounts/nobody/cancel-all", "");
    assert_eq!((status, body["code"].as_str()), (404, Some("unknown_account")));
}

#[test]
fn recent_trades_and_the_ticker_follow_the_trades() {
    let directory = tempfile::tempdir().unwrap();
    let server = TestServer::start(directory.path(), false);
    let (seller, buyer) = server.seller_and_buyer("1", "1000");
    let (_, empty) = support::request(server.address, "GET", "/v1/ticker/BTC-USD", &[], b"");
    assert_eq!(
        (empty["data"]["last"].clone(), empty["data"]["trades_24h"].clone()),
        (Value::Null, 0.into())
    );
    seller.post("/v1/orders", &order_body("BTC-USD", "sell", "100", "0.5", "s1"));
    seller.post("/v1/orders", &order_body("BTC-USD", "sell", "101", "0.5", "s2"));
    buyer.post("/v1/orders", &order_body("BTC-USD", "buy", "101", "0.7", "b1"));
    let mut trades = Value::Null;
    for _ in 0..100 {
        trades = support::request(server.address, "GET", "/v1/trades/BTC-USD", &[], b"").1;
        if trades["trades"].as_array().is_some_and(|list| list.len() == 2) {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let prices: Vec<&str> = trades["trades"]
        .as_array()
        .unwrap()
        .iter()
        .map(|trade| trade["price"].as_str().unwrap())
        .collect();
    assert_eq!(prices, ["100", "101"], "oldest first");
    let (_, last) = support::request(server.address, "GET", "/v1/trades/BTC-USD?limit=1", &[], b"");
    assert_eq!(last["trades"][0]["qty"], "0.2");
    let (_, ticker) = support::request(server.address, "GET", "/v1/ticker/BTC-USD", &[], b"");
    let data = &ticker["data"];
    assert_eq!(
        (data["last"].as_str(), data["high_24h"].as_str(), data["low_24h"].as_str()),
        (Some("101"), Some("101"), Some("100"))
    );
    assert_eq!((data["volume_24h"].as_str(), data["trades_24h"].as_u64()), (Some("0.7"), Some(2)));
    let (status, _) = support::request(server.address, "GET", "/v1/trades/NOPE", &[], b"");
    assert_eq!(status, 404);
    let (status, _) =
        support::request(server.address, "GET", "/v1/trades/BTC-USD?limit=0", &[], b"");
    assert_eq!(status, 400);
}

/// With the multicast feed off (`--no-marketdata`) the candles are still kept: they
/// are the candle service's, which follows every trade whether or not the feed runs.
#[test]
fn candles_follow_the_trades_with_the_multicast_feed_off() {
    let directory = tempfile::tempdir().unwrap();
    let mut config = support::config(directory.path());
    config.marketdata.enabled = false;
    let server = TestServer::start_with(config, false);
    assert!(server.server.as_ref().unwrap().notes.market_data.is_none(), "the feed is off");
    let (seller, buyer) = server.seller_and_buyer("1", "1000");
    seller.post("/v1/orders", &order_body("BTC-USD", "sell", "100", "0.5", "s1"));
    seller.post("/v1/orders", &order_body("BTC-USD", "sell", "101", "0.5", "s2"));
    buyer.post("/v1/orders", &order_body("BTC-USD", "buy", "101", "0.7", "b1"));
    let path = "/v1/candles/BTC-USD?interval=1m";
    let mut candles = Vec::new();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while candles.iter().map(|candle: &Value| candle[6].as_u64().unwrap()).sum::<u64>() < 2 {
        assert!(std::time::Instant::now() < deadline, "the trades never showed: {candles:?}");
        std::thread::sleep(std::time::Duration::from_millis(20));
        let (status, answer) = support::request(server.address, "GET", path, &[], b"");
        assert_eq!(status, 200, "{answer}");
        assert_eq!((&answer["symbol"], &answer["interval"]), (&"BTC-USD".into(), &"1m".into()));
        candles = answer["candles"].as_array().unwrap().clone();
    }
    // [start_ns, open, high, low, close, volume, trades]: 0.5 at 100, then 0.2 at 101
    // (in one minute, or across two with the first's close carried).
    let number = |value: &Value| value.as_str().unwrap().parse::<f64>().unwrap();
    let (first, last) = (&candles[0], &candles[candles.len() - 1]);
    assert_eq!((first[1].as_str(), last[4].as_str()), (Some("100"), Some("101")), "{candles:?}");
    let high = candles.iter().map(|candle| number(&candle[2])).fold(f64::MIN, f64::max);
    let low = candles.iter().map(|candle| number(&candle[3])).fold(f64::MAX, f64::min);
    let volume: f64 = candles.iter().map(|candle| number(&candle[5])).sum();
    assert_eq!((high, low), (101.0, 100.0), "{candles:?}");
    assert!((volume - 0.7).abs() < 1e-9, "{candles:?}");
    let start = first[0].as_u64().unwrap();
    assert_eq!(start % 60_000_000_000, 0, "a minute's start: {start}");
}

#[test]
fn the_open_orders_limit_is_the_engines_and_follows_the_configuration_across_restarts() {
    let directory = tempfile::tempdir().unwrap();
    let limited = |limit: u64| {
        let mut config = support::config(directory.path());
        config.limits.open_orders_per_account = limit;
        TestServer::start_with(config, false)
    };
    let server = limited(2);
    server.declare_btc_usd();
    let trader = server.trader("trader", &[("USD", "1000")]);
    let place = |client: &support::Client, id: &str| {
        client.post("/v1/orders", &order_body("BTC-USD", "buy", "1", "1", id))
    };
    assert_eq!(place(&trader, "a").0, 200);
    assert_eq!(place(&trader, "b").0, 200);
    let (status, refused) = place(&trader, "c");
    assert_eq!((status, refused["code"].as_str()), (422, Some("too_many_open_orders")));
    // A retry of the refused order after a cancel frees a slot is a new order.
    trader.delete("/v1/orders?client_order_id=a");
    assert_eq!(place(&trader, "c").0, 200);
    let key = trader.clone();
    server.stop();

    let server = limited(3);
    let trader = server.client(&key.key, &key.secret);
    assert_eq!(place(&trader, "d").0, 200, "the new limit is in force after the restart");
    let (status, refused) = place(&trader, "e");
    assert_eq!((status, refused["code"].as_str()), (422, Some("too_many_open_orders")));
}

#[test]
fn a_market_buy_names_what_it_spends_and_reads_back_with_it() {
    let directory = tempfile::tempdir().unwrap();
    let server = TestServer::start(directory.path(), false);
    let (seller, buyer) = server.seller_and_buyer("10", "1000");
    // (Both within the instrument's 5% band of the best ask, as any market order.)
    for (price, qty, id) in [("100", "1", "a1"), ("104", "1", "a2")] {
        assert_eq!(
            seller.post("/v1/orders", &order_body("BTC-USD", "sell", price, qty, id)).0,
            200
        );
    }
    // 150 USD: all of the ask at 100, and 50 / 104 = 0.4807 of the next.
    let body = r#"{"symbol":"BTC-USD","side":"buy","type":"market","quote_qty":"150","client_order_id":"spend-1"}"#;
    let (status, placed) = buyer.post("/v1/orders", body);
    assert_eq!(status, 200, "{placed}");
    let order = &placed["order"];
    assert_eq!(
        (order["status"].as_str(), order["filled"].as_str()),
        (Some("filled"), Some("1.4807"))
    );
    assert_eq!((order["qty"].as_str(), order["quote_qty"].as_str()), (Some("1.4807"), Some("150")));
    let (_, read) = buyer.get(&format!("/v1/orders/{}", order["order_id"]));
    assert_eq!(read["quote_qty"], "150", "{read}");
    let (_, balances) = buyer.get("/v1/balances");
    assert_eq!(balances["balances"]["USD"]["held"], "0", "nothing of the amount stays held");
    // What does not go together is the engine's `invalid_order`; neither is malformed.
    let both = r#"{"symbol":"BTC-USD","side":"buy","type":"market","qty":"1","quote_qty":"150"}"#;
    let (status, refused) = buyer.post("/v1/orders", both);
    assert_eq!((status, refused["code"].as_str()), (422, Some("invalid_order")), "{refused}");
    let neither = r#"{"symbol":"BTC-USD","side":"buy","type":"market"}"#;
    let (status, refused) = buyer.post("/v1/orders", neither);
    assert_eq!((status, refused["code"].as_str()), (400, Some("malformed")), "{refused}");
}
