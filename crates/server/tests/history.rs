//! The history inside a running server: the follower commits what the engine
//! journaled; the admin API answers an order's latest state, a trade and an account's
//! fills from it and shows its progress; `/metrics` has its figures; non-admins are
//! refused; SQL needs a binary with a query engine (`bourse serve` has one; this
//! crate's server answers `sql_unavailable`). After a restart the history goes on
//! from its checkpoint without writing a row twice.

mod support;

use std::time::{Duration, Instant};

use serde_json::Value;
use support::TestServer;

fn order_body(symbol: &str, side: &str, price: &str, qty: &str, id: &str) -> String {
    format!(
        r#"{{"symbol":"{symbol}","side":"{side}","type":"limit","price":"{price}","qty":"{qty}","client_order_id":"{id}"}}"#
    )
}

fn config(dir: &std::path::Path) -> bourse_server::ServeConfig {
    let mut config = support::config(dir);
    config.history.commit_every_ms = 50;
    config
}

/// Waits until the history has committed `seq`.
fn committed(server: &TestServer, seq: u64) -> Value {
    let started = Instant::now();
    loop {
        let (status, history) = server.admin.get("/v1/admin/history");
        assert_eq!(status, 200, "{history}");
        if history["committed_seq"].as_u64().unwrap() >= seq {
            return history;
        }
        assert!(started.elapsed() < Duration::from_secs(20), "the history stays at {history}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn the_history_follows_a_running_server_and_answers_lookups() {
    let directory = tempfile::tempdir().unwrap();
    let server = TestServer::start_with(config(directory.path()), false);
    let (seller, buyer) = server.seller_and_buyer("2", "100000");
    let (_, placed) = seller.post("/v1/orders", &order_body("BTC-USD", "sell", "100", "1.5", "s1"));
    let sell_id = placed["order"]["order_id"].as_u64().unwrap();
    let (_, taken) = buyer.post("/v1/orders", &order_body("BTC-USD", "buy", "101", "1", "b1"));
    let buy_id = taken["order"]["order_id"].as_u64().unwrap();
    let trade_id = taken["fills"][0]["trade_id"].as_str().unwrap().to_string();
    let history = committed(&server, buy_id);
    assert!(history["rows"].as_u64().unwrap() >= 8, "{history}");
    assert_eq!(history["sql"], false);

    let (status, order) = server.admin.get(&format!("/v1/admin/history/orders/{sell_id}"));
    assert_eq!(status, 200, "{order}");
    assert_eq!(order["status"], "open");
    assert_eq!(order["filled"], "1");
    assert_eq!(order["remaining"], "0.5");
    assert_eq!(order["change"], "traded");
    let (_, order) = server.admin.get(&format!("/v1/admin/history/orders/{buy_id}"));
    assert_eq!(order["status"], "filled");
    assert_eq!(order["account"], "buyer");

    let (status, trade) = server.admin.get(&format!("/v1/admin/history/trades/{trade_id}"));
    assert_eq!(status, 200, "{trade}");
    assert_eq!(trade["price"], "100");
    assert_eq!(trade["maker_order_id"], sell_id);
    assert_eq!(trade["taker_order_id"], buy_id);
    let (_, fills) = server.admin.get("/v1/admin/history/accounts/seller/fills?limit=5");
    assert_eq!(fills["fills"][0]["trade_id"].as_str(), Some(trade_id.as_str()));
    assert_eq!(fills["fills"][0]["liquidity"], "maker");

    let (status, missing) = server.admin.get("/v1/admin/history/orders/999999");
    assert_eq!((status, missing["code"].as_str()), (404, Some("unknown_order")));
    let (status, bad) = server.admin.get("/v1/admin/history/trades/abc");
    assert_eq!((status, bad["code"].as_str()), (400, Some("malformed")));
    let (status, bad) = server.admin.get("/v1/admin/history/accounts/seller/fills?limit=0");
    assert_eq!(status, 400, "{bad}");
    let (status, refused) = seller.get(&format!("/v1/admin/history/orders/{sell_id}"));
    assert_eq!(status, 403, "{refused}");
    let (status, no_sql) = server.admin.post("/v1/admin/sql", r#"{"sql":"SELECT 1"}"#);
    assert_eq!((status, no_sql["code"].as_str()), (501, Some("sql_unavailable")));

    let (_, metrics) = support::raw_request(server.address, "GET", "/metrics", &[], b"");
    let metrics = String::from_utf8(metrics).unwrap();
    assert!(metrics.contains("bourse_history_committed_seq"), "{metrics}");

    // A restart: the history goes on from its checkpoint.
    let rows_before = history["rows"].as_u64().unwrap();
    server.stop();
    let server = TestServer::start_with(config(directory.path()), false);
    let buyer = server.client(&buyer.key, &buyer.secret);
    let (_, again) = buyer.post("/v1/orders", &order_body("BTC-USD", "buy", "100", "0.5", "b2"));
    let again_id = again["order"]["order_id"].as_u64().unwrap();
    committed(&server, again_id);
    let (_, order) = server.admin.get(&format!("/v1/admin/history/orders/{sell_id}"));
    assert_eq!(order["status"], "filled", "the seller's order filled after the restart");
    let (_, fills) = server.admin.get("/v1/admin/history/accounts/seller/fills?limit=5");
    assert_eq!(fills["fills"].as_array().unwrap().len(), 2, "one fill each, none twice");
    let checkpoint: Value = serde_json::from_slice(
        &std::fs::read(directory.path().join("history").join("checkpoint.json")).unwrap(),
    )
    .unwrap();
    let trades =
        checkpoint["rows"].as_array().unwrap().iter().find(|entry| entry[0] == "trades").unwrap()
            [1]
        .as_u64()
        .unwrap();
    assert_eq!(trades, 2, "rows before the restart: {rows_before}");
    server.stop();
}
