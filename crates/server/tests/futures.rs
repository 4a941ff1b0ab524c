//! Futures through a real server: declaring a contract over the admin REST (a fixed
//! margin or a ratio of the settlement price), trading with offsets, the positions and
//! the QIFI account view, settlement on demand restating a ratio margin, a restart that
//! gives the same view, every rejection of `futures.md` over REST, and the risk process
//! liquidating an account that falls below the maintenance level, exactly once.

mod support;

use serde_json::Value;
use support::{Client, TestServer};

fn order(symbol: &str, side: &str, price: &str, qty: &str, offset: &str, id: &str) -> String {
    format!(
        r#"{{"symbol":"{symbol}","side":"{side}","type":"limit","price":"{price}","qty":"{qty}","offset":"{offset}","client_order_id":"{id}"}}"#
    )
}

fn ok(result: (u16, Value)) -> Value {
    assert!(result.0 == 200 || result.0 == 201, "{} {}", result.0, result.1);
    result.1
}

fn refused(result: (u16, Value), status: u16, code: &str) {
    assert_eq!((result.0, result.1["code"].as_str()), (status, Some(code)), "{}", result.1);
}

/// CNY (2 decimals) and `SHFE.cu2501`: tick 10, lot 1, multiplier 5, margin 10% of the
/// settlement price (first at 50000: 25000 a lot), fees 1.5 and 3, the close-today rule.
fn declare(server: &TestServer) {
    ok(server.admin.post("/v1/admin/assets", r#"{"asset":"CNY","decimals":2}"#));
    let declared = ok(server.admin.post(
        "/v1/admin/futures",
        r#"{"symbol":"SHFE.cu2501","settle":"CNY","tick":"10","lot":"1","min_qty":"1","max_qty":"100",
            "multiplier":"5","margin_ratio":"0.1","settlement_price":"50000","maker_fee":"1.5",
            "taker_fee":"3","market_band_bps":500,"close_today":true}"#,
    ));
    assert_eq!(declared["margin"], "25000");
    assert_eq!(declared["instrument"]["kind"], "future");
    assert_eq!(declared["instrument"]["settle"], "CNY");
}

fn traders(server: &TestServer) -> (Client, Client) {
    let alice = server.trader("alice", &[("CNY", "200000")]);
    let bob = server.trader("bob", &[("CNY", "200000")]);
    (alice, bob)
}

#[test]
fn a_contract_is_traded_with_offsets_and_shown_as_futures_traders_read_it() {
    let directory = tempfile::tempdir().unwrap();
    let server = TestServer::start(directory.path(), false);
    declare(&server);
    let (alice, bob) = traders(&server);
    let placed =
        ok(alice.post("/v1/orders", &order("SHFE.cu2501", "buy", "50000", "1", "open", "a1")));
    assert_eq!(placed["order"]["status"], "open");
    let taken =
        ok(bob.post("/v1/orders", &order("SHFE.cu2501", "sell", "50000", "1", "open", "b1")));
    assert_eq!(taken["order"]["status"], "filled");
    assert_eq!(taken["fills"][0]["fee_asset"], "CNY");

    let positions = ok(alice.get("/v1/positions"));
    let cu = &positions["positions"]["SHFE.cu2501"];
    assert_eq!(
        (cu["volume_long_today"].as_str(), cu["volume_long_his"].as_str()),
        (Some("1"), Some("0"))
    );
    assert_eq!(
        (cu["open_price_long"].as_str(), cu["margin_long"].as_str()),
        (Some("50000"), Some("25000"))
    );
    assert_eq!(
        (cu["exchange_id"].as_str(), cu["instrument_id"].as_str()),
        (Some("SHFE"), Some("SHFE.cu2501"))
    );
    let (status, ticker) =
        support::request(server.address, "GET", "/v1/ticker/SHFE.cu2501", &[], b"");
    assert_eq!((status, ticker["data"]["open_interest"].as_str()), (200, Some("1")), "{ticker}");
    assert_eq!(ticker["data"]["last"], "50000");
    let account = ok(alice.get("/v1/account"));
    let cny = &account["accounts"]["CNY"];
    assert_eq!(cny["balance"], "199998.5");
    assert_eq!(cny["margin"], "25000");
    assert_eq!(cny["available"], "174998.5");
    assert_eq!(cny["commission"], "1.5");
    assert_eq!(cny["deposit"], "200000");
    assert_eq!(cny["pre_balance"], "0");
    assert_eq!(cny["risk_ratio"], "0.125001");

    // A close order freezes the position; the account view shows it.
    ok(alice.post("/v1/orders", &order("SHFE.cu2501", "sell", "50500", "1", "close_today", "a2")));
    let positions = ok(alice.get("/v1/positions"));
    assert_eq!(positions["positions"]["SHFE.cu2501"]["volume_long_frozen_today"], "1");
    // The contract's book is market data like any other.
    let get = |path: &str| support::request(server.address, "GET", path, &[], b"");
    let (status, depth) = get("/v1/depth/SHFE.cu2501");
    assert_eq!((status, depth["asks"][0][0].as_str()), (200, Some("50500")), "{depth}");
    let (status, l3) = get("/v1/l3/SHFE.cu2501");
    assert_eq!((status, l3["asks"].as_array().map(Vec::len)), (200, Some(1)), "{l3}");

    // Settlement on demand at 50100: marked, history, and the ratio margin restated
    // (10% of 50100 * 5 = 25050). The close_today order ends with the day.
    let settled =
        ok(server.admin.post("/v1/admin/futures/SHFE.cu2501/settle", r#"{"price":"50100"}"#));
    assert_eq!(
        (settled["sides_settled"].as_u64(), settled["orders_expired"].as_u64()),
        (Some(2), Some(1))
    );
    assert_eq!(settled["margin"], "25050");
    let account = ok(alice.get("/v1/account"));
    let cny = &account["accounts"]["CNY"];
    assert_eq!(
        (cny["balance"].as_str(), cny["margin"].as_str()),
        (Some("200498.5"), Some("25050"))
    );
    assert_eq!(
        (cny["pre_balance"].as_str(), cny["deposit"].as_str()),
        (Some("200498.5"), Some("0"))
    );
    let cu = &account["positions"]["SHFE.cu2501"];
    assert_eq!(
        (cu["volume_long_his"].as_str(), cu["position_price_long"].as_str()),
        (Some("1"), Some("50100"))
    );
    assert_eq!(cu["float_profit_long"], "500");

    // A restart gives the same view.
    let before = ok(alice.get("/v1/account"));
    server.stop();
    let server = TestServer::start(directory.path(), false);
    let alice = server.client(&alice.key, &alice.secret);
    assert_eq!(ok(alice.get("/v1/account")), before);
    // And the ratio margin still applies after the next settlement (posted price).
    ok(server.admin.post("/v1/admin/futures/SHFE.cu2501/settlement-price", r#"{"price":"50000"}"#));
    // The operator's listing shows the contract as it is run: the margin the ratio gave
    // at the last settlement (50100), the posted price, the mark and settlement prices.
    let listed = ok(server.admin.get("/v1/admin/futures"));
    let cu = &listed["futures"][0];
    assert_eq!(
        (cu["symbol"].as_str(), cu["margin"].as_str(), cu["margin_ratio"].as_str()),
        (Some("SHFE.cu2501"), Some("25050"), Some("0.1")),
        "{listed}"
    );
    assert_eq!(
        (cu["posted_price"].as_str(), cu["mark_price"].as_str(), cu["settlement_price"].as_str()),
        (Some("50000"), Some("50100"), Some("50100")),
        "{listed}"
    );
    refused(alice.get("/v1/admin/futures"), 403, "forbidden");
    let settled = ok(server.admin.post("/v1/admin/futures/SHFE.cu2501/settle", ""));
    assert_eq!(
        (settled["price"].as_str(), settled["margin"].as_str()),
        (Some("50000"), Some("25000"))
    );
    // The posted price served once; a final settlement expires the contract, which
    // leaves the listing.
    let listed = ok(server.admin.get("/v1/admin/futures"));
    assert_eq!(listed["futures"][0]["posted_price"], Value::Null, "{listed}");
    assert_eq!(listed["futures"][0]["margin"], "25000", "{listed}");
    ok(server
        .admin
        .post("/v1/admin/futures/SHFE.cu2501/settle", r#"{"price":"50000","final":true}"#));
    let listed = ok(server.admin.get("/v1/admin/futures"));
    assert_eq!(listed["futures"], serde_json::json!([]), "{listed}");
}

#[test]
fn every_futures_rejection_is_a_clear_error_over_rest_and_changes_nothing() {
    let directory = tempfile::tempdir().unwrap();
    let server = TestServer::start(directory.path(), false);
    declare(&server);
    let (alice, bob) = traders(&server);
    ok(server.admin.post(
        "/v1/admin/futures",
        r#"{"symbol":"CFFEX.IF2501","settle":"CNY","tick":"0.2","lot":"1","min_qty":"1","max_qty":"100",
            "multiplier":"300","margin":"10000","maker_fee":"0","taker_fee":"2.3","market_band_bps":500}"#,
    ));
    let balances_before = ok(alice.get("/v1/balances"));
    // Orders.
    refused(
        alice.post("/v1/orders", &order("CFFEX.IF2501", "sell", "4000", "1", "close_today", "x")),
        422,
        "invalid_offset",
    );
    refused(
        alice.post("/v1/orders", &order("SHFE.cu2501", "sell", "50000", "1", "close", "x")),
        422,
        "insufficient_position",
    );
    refused(
        alice.post("/v1/orders", &order("SHFE.cu2501", "buy", "50000", "9", "open", "x")),
        422,
        "insufficient_funds",
    );
    refused(
        alice.post("/v1/orders", &order("SHFE.cu2501", "buy", "50000", "1", "later", "x")),
        400,
        "malformed",
    );
    refused(
        alice.post("/v1/orders", &order("NOPE", "buy", "1", "1", "open", "x")),
        404,
        "unknown_symbol",
    );
    assert_eq!(ok(alice.get("/v1/balances")), balances_before);
    // An amend raising a close beyond the position.
    ok(alice.post("/v1/orders", &order("SHFE.cu2501", "buy", "50000", "1", "open", "a1")));
    ok(bob.post("/v1/orders", &order("SHFE.cu2501", "sell", "50000", "1", "open", "b1")));
    ok(alice.post("/v1/orders", &order("SHFE.cu2501", "sell", "60000", "1", "close_today", "a2")));
    refused(
        alice.patch("/v1/orders?client_order_id=a2", r#"{"qty":"2"}"#),
        422,
        "insufficient_position",
    );
    // Definitions and administration. A contract's symbol is EXCHANGE.code, checked
    // before anything else (here the settle asset is unknown too).
    for symbol in [
        "cu2501",
        "shfe.cu2501",
        ".cu2501",
        "SHFE.",
        "SHFE.cu.2501",
        "SHFE.cu 2501",
        "ABCDEFGHI.cu2501",
        "SHFE.cu2501C72000",
        "BTC-USD",
    ] {
        let declared = server.admin.post(
            "/v1/admin/futures",
            &format!(
                r#"{{"symbol":"{symbol}","settle":"XYZ","tick":"10","lot":"1","min_qty":"1","max_qty":"100","multiplier":"5","margin":"1","maker_fee":"0","taker_fee":"0","market_band_bps":0}}"#
            ),
        );
        let message = declared.1["message"].as_str().unwrap_or_default().to_string();
        refused(declared, 400, "invalid_symbol");
        assert!(
            message.contains("EXCHANGE.code") && message.contains("e.g. SHFE.cu2501"),
            "{message}"
        );
        assert!(message.contains(symbol), "{message}");
    }
    refused(server.admin.post(
        "/v1/admin/futures",
        r#"{"symbol":"SHFE.cu2501","settle":"CNY","tick":"10","lot":"1","min_qty":"1","max_qty":"100","multiplier":"5","margin":"1","maker_fee":"0","taker_fee":"0","market_band_bps":0}"#,
    ), 409, "duplicate_symbol");
    refused(server.admin.post(
        "/v1/admin/futures",
        r#"{"symbol":"SHFE.al2501","settle":"XYZ","tick":"10","lot":"1","min_qty":"1","max_qty":"100","multiplier":"5","margin":"1","maker_fee":"0","taker_fee":"0","market_band_bps":0}"#,
    ), 404, "unknown_asset");
    refused(server.admin.post(
        "/v1/admin/futures",
        r#"{"symbol":"SHFE.al2501","settle":"CNY","tick":"10","lot":"1","min_qty":"1","max_qty":"100","multiplier":"5","margin":"1","maker_fee":"2","taker_fee":"1","market_band_bps":0}"#,
    ), 422, "invalid_instrument");
    refused(server.admin.post(
        "/v1/admin/futures",
        r#"{"symbol":"SHFE.al2501","settle":"CNY","tick":"10","lot":"1","min_qty":"1","max_qty":"100","multiplier":"5","maker_fee":"0","taker_fee":"0","market_band_bps":0}"#,
    ), 400, "malformed");
    refused(
        server.admin.post("/v1/admin/futures/SHFE.cu2501/margin", r#"{"margin":"0"}"#),
        422,
        "invalid_amount",
    );
    refused(
        server.admin.post("/v1/admin/futures/NOPE/margin", r#"{"margin":"1"}"#),
        404,
        "unknown_symbol",
    );
    refused(
        server.admin.post("/v1/admin/futures/CFFEX.IF2501/margin", r#"{"margin_ratio":"0.1"}"#),
        409,
        "no_settlement_price",
    );
    refused(
        server.admin.post("/v1/admin/futures/SHFE.cu2501/settle", r#"{"price":"15"}"#),
        422,
        "invalid_price",
    );
    refused(
        server.admin.post("/v1/admin/futures/NOPE/settle", r#"{"price":"10"}"#),
        404,
        "unknown_symbol",
    );
    refused(
        server.admin.post("/v1/admin/futures/CFFEX.IF2501/settle", ""),
        409,
        "no_settlement_price",
    );
    refused(
        server.admin.post("/v1/admin/futures/SHFE.cu2501/liquidate", r#"{"account":"nobody"}"#),
        404,
        "unknown_order",
    );
    refused(alice.post("/v1/admin/futures/SHFE.cu2501/settle", ""), 403, "forbidden");
    // Expiry: the contract is gone, its name taken.
    ok(server
        .admin
        .post("/v1/admin/futures/SHFE.cu2501/settle", r#"{"price":"50000","final":true}"#));
    refused(
        alice.post("/v1/orders", &order("SHFE.cu2501", "buy", "50000", "1", "open", "z")),
        404,
        "unknown_symbol",
    );
    refused(
        server.admin.post("/v1/admin/futures/SHFE.cu2501/settle", r#"{"price":"50000"}"#),
        404,
        "unknown_symbol",
    );
    assert_eq!(ok(alice.get("/v1/positions"))["positions"], serde_json::json!({}));
}

/// Waits until the history has committed `seq`.
fn history_committed(server: &TestServer, seq: u64) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    loop {
        let history = ok(server.admin.get("/v1/admin/history"));
        if history["committed_seq"].as_u64().unwrap_or(0) >= seq {
            return;
        }
        assert!(std::time::Instant::now() < deadline, "the history stays at {history}");
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

#[test]
fn a_dotted_symbol_works_in_every_path_and_query_that_names_one() {
    let directory = tempfile::tempdir().unwrap();
    let mut config = support::config(directory.path());
    config.history.commit_every_ms = 50;
    let server = TestServer::start_with(config, true);
    let alice = &server.demo[0];
    let symbol = "SHFE.cu2501";
    let get = |path: &str| support::request(server.address, "GET", path, &[], b"");

    // The demo's book, then alice takes its best ask with an id as tqsdk makes them.
    let depth = ok(get(&format!("/v1/depth/{symbol}?levels=1")));
    assert_eq!(
        (depth["symbol"].as_str(), depth["asks"][0][0].as_str()),
        (Some(symbol), Some("75010"))
    );
    let id = "PYSDK_insert_0123456789abcdef0123456789abcdef";
    let taken = ok(alice.post("/v1/orders", &order(symbol, "buy", "75010", "1", "open", id)));
    assert_eq!(taken["order"]["status"], "filled", "{taken}");
    let order_id = taken["order"]["order_id"].as_u64().unwrap();

    // Public reads by path.
    let ticker = ok(get(&format!("/v1/ticker/{symbol}")));
    assert_eq!(
        (ticker["symbol"].as_str(), ticker["data"]["last"].as_str()),
        (Some(symbol), Some("75010"))
    );
    let trades = ok(get(&format!("/v1/trades/{symbol}?limit=10")));
    assert_eq!(trades["trades"][0]["price"], "75010", "{trades}");
    let l3 = ok(get(&format!("/v1/l3/{symbol}")));
    let best_ask = (l3["asks"][0][1].as_str(), l3["asks"][0][2].as_str());
    assert_eq!(
        (l3["symbol"].as_str(), best_ask),
        (Some(symbol), (Some("75010"), Some("1"))),
        "{l3}"
    );
    // Candles come from the feed, which follows the engine: wait for the trade.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    loop {
        let candles = ok(get(&format!("/v1/candles/{symbol}?interval=1m")));
        assert_eq!(candles["symbol"], symbol);
        if candles["candles"]
            .as_array()
            .and_then(|all| all.last())
            .is_some_and(|last| last[4] == "75010")
        {
            break;
        }
        assert!(std::time::Instant::now() < deadline, "no candle of the trade: {candles}");
        std::thread::sleep(std::time::Duration::from_millis(20));
    }

    // Private reads by query.
    let fills = ok(alice.get(&format!("/v1/fills?symbol={symbol}")));
    assert_eq!(
        (fills["fills"][0]["symbol"].as_str(), fills["fills"][0]["client_order_id"].as_str()),
        (Some(symbol), Some(id)),
        "{fills}"
    );
    ok(alice.post("/v1/orders", &order(symbol, "sell", "76000", "1", "close_today", "close-1")));
    let open = ok(alice.get(&format!("/v1/orders?symbol={symbol}")));
    assert_eq!(open["orders"][0]["client_order_id"], "close-1", "{open}");
    let positions = ok(alice.get("/v1/positions"));
    assert_eq!(positions["positions"][symbol]["exchange_id"], "SHFE");

    // Administration by path and query.
    ok(server.admin.post(&format!("/v1/admin/instruments/{symbol}/halt"), ""));
    refused(
        alice.post("/v1/orders", &order(symbol, "buy", "74000", "1", "open", "halted")),
        422,
        "instrument_halted",
    );
    ok(server.admin.post(&format!("/v1/admin/instruments/{symbol}/resume"), ""));
    let canceled =
        ok(server.admin.post(&format!("/v1/admin/accounts/alice/cancel-all?symbol={symbol}"), ""));
    assert_eq!(canceled["canceled"], serde_json::json!(["close-1"]), "{canceled}");
    ok(server.admin.post(&format!("/v1/admin/futures/{symbol}/margin"), r#"{"margin":"40000"}"#));
    ok(server
        .admin
        .post(&format!("/v1/admin/futures/{symbol}/settlement-price"), r#"{"price":"75100"}"#));
    let settled = ok(server.admin.post(&format!("/v1/admin/futures/{symbol}/settle"), "{}"));
    assert_eq!(settled["price"], "75100", "{settled}");
    let liquidated = ok(server
        .admin
        .post(&format!("/v1/admin/futures/{symbol}/liquidate"), r#"{"account":"alice"}"#));
    assert_eq!(liquidated["account"], "alice", "{liquidated}");

    // The history keeps the symbol and the id (its partitions are named by the symbol).
    history_committed(&server, order_id);
    let kept = ok(server.admin.get(&format!("/v1/admin/history/orders/{order_id}")));
    assert_eq!(
        (kept["symbol"].as_str(), kept["client_order_id"].as_str()),
        (Some(symbol), Some(id)),
        "{kept}"
    );
    let history_fills = ok(server.admin.get("/v1/admin/history/accounts/alice/fills?limit=5"));
    let fill = history_fills["fills"]
        .as_array()
        .unwrap()
        .iter()
        .find(|fill| fill["client_order_id"] == id);
    assert_eq!(fill.map(|fill| &fill["symbol"]), Some(&Value::from(symbol)), "{history_fills}");
}

#[test]
fn the_risk_process_liquidates_an_account_below_the_maintenance_level_exactly_once() {
    let directory = tempfile::tempdir().unwrap();
    let mut config = support::config(directory.path());
    config.futures.risk_interval_ms = 20;
    config.futures.maintenance_share = "0.5".into();
    let server = TestServer::start_with(config, false);
    ok(server.admin.post("/v1/admin/assets", r#"{"asset":"CNY","decimals":2}"#));
    // INE.sc2501: multiplier 100, margin 1000 a lot (10% at 100), no fees.
    ok(server.admin.post(
        "/v1/admin/futures",
        r#"{"symbol":"INE.sc2501","settle":"CNY","tick":"1","lot":"1","min_qty":"1","max_qty":"100",
            "multiplier":"100","margin":"1000","maker_fee":"0","taker_fee":"0","market_band_bps":5000}"#,
    ));
    let dave = server.trader("dave", &[("CNY", "1500")]);
    let bob = server.trader("bob", &[("CNY", "1000000")]);
    let carol = server.trader("carol", &[("CNY", "1000000")]);
    ok(dave.post("/v1/orders", &order("INE.sc2501", "buy", "100", "1", "open", "d1")));
    ok(bob.post("/v1/orders", &order("INE.sc2501", "sell", "100", "1", "open", "b1")));
    // Bids to liquidate into, then the price falls to 90: dave's equity is 1500 - 1000
    // = 500, exactly half his margin: not below.
    ok(carol.post("/v1/orders", &order("INE.sc2501", "buy", "85", "5", "open", "c-bid")));
    ok(carol.post("/v1/orders", &order("INE.sc2501", "buy", "90", "1", "open", "c1")));
    ok(bob.post("/v1/orders", &order("INE.sc2501", "sell", "90", "1", "open", "b2")));
    std::thread::sleep(std::time::Duration::from_millis(300));
    assert_eq!(ok(dave.get("/v1/positions"))["positions"]["INE.sc2501"]["volume_long"], "1");
    // 89: equity 400 < 500. The risk process sells dave's long into carol's bid at 85.
    ok(carol.post("/v1/orders", &order("INE.sc2501", "buy", "89", "1", "open", "c2")));
    ok(bob.post("/v1/orders", &order("INE.sc2501", "sell", "89", "1", "open", "b3")));
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    loop {
        let positions = ok(dave.get("/v1/positions"));
        if positions["positions"].get("INE.sc2501").is_none() {
            break;
        }
        assert!(std::time::Instant::now() < deadline, "not liquidated: {positions}");
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    std::thread::sleep(std::time::Duration::from_millis(300));
    let fills = ok(dave.get("/v1/fills"));
    let liquidations: Vec<&Value> = fills["fills"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|fill| fill["client_order_id"].as_str().is_some_and(|id| id.starts_with("liq-")))
        .collect();
    assert_eq!(liquidations.len(), 1, "{fills}");
    assert_eq!(liquidations[0]["price"], "85");
    // (85 - 100) * 100 = -1500: nothing left, nothing owed.
    let cny = &ok(dave.get("/v1/account"))["accounts"]["CNY"];
    assert_eq!((cny["balance"].as_str(), cny["margin"].as_str()), (Some("0"), Some("0")));
}
