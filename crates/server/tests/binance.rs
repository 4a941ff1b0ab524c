//! The Binance-compatible REST surface (`/api/v3/`, `docs/binance.md`) over real
//! sockets: Binance's signing (the key header, `timestamp` and `recvWindow`, the
//! signature over the query string and the body, wherever the signature is), every
//! refusal with Binance's code, the same order rules as `/v1/orders` (a refused order
//! leaves nothing behind, a reused client order id names the first order), and the
//! public reads beside Bourse's own.

mod support;

use bourse_protocol::signing::sign;
use serde_json::Value;
use support::{now_ms, request, Client, TestServer};

/// A Binance request signed with `client`'s key: `params` in the query string (GET,
/// DELETE) or the form body (POST), `timestamp` added, the signature last.
fn binance(client: &Client, method: &str, path: &str, params: &str) -> (u16, Value) {
    let separator = if params.is_empty() { "" } else { "&" };
    let total = format!("{params}{separator}timestamp={}", support::unique_timestamp_ms());
    send_signed(client, method, path, &total, &client.secret)
}

fn send_signed(
    client: &Client,
    method: &str,
    path: &str,
    total: &str,
    secret: &str,
) -> (u16, Value) {
    let signed = format!("{total}&signature={}", sign(secret, total.as_bytes()));
    let headers = vec![
        ("X-MBX-APIKEY".to_string(), client.key.clone()),
        ("Content-Type".to_string(), "application/x-www-form-urlencoded".to_string()),
    ];
    if method == "POST" {
        request(client.address, method, path, &headers, signed.as_bytes())
    } else {
        request(client.address, method, &format!("{path}?{signed}"), &headers, b"")
    }
}

fn public(server: &TestServer, path: &str) -> (u16, Value) {
    request(server.address, "GET", path, &[], b"")
}

/// `(status, code)` of an error answer.
fn error_of(answer: &(u16, Value)) -> (u16, i64) {
    (answer.0, answer.1["code"].as_i64().unwrap_or(0))
}

fn buyer_and_seller(server: &TestServer) -> (Client, Client) {
    let (seller, buyer) = server.seller_and_buyer("10", "1000000");
    (buyer, seller)
}

#[test]
fn signed_requests_are_checked_as_binance_checks_them_each_with_its_code() {
    let directory = tempfile::tempdir().unwrap();
    let server = TestServer::start(directory.path(), false);
    let (buyer, _) = buyer_and_seller(&server);
    let path = "/api/v3/account";
    assert_eq!(binance(&buyer, "GET", path, "").0, 200);

    // The key: missing, unknown, or the operator's (not an account's).
    let no_key =
        request(server.address, "GET", &format!("{path}?timestamp={}", now_ms()), &[], b"");
    assert_eq!(error_of(&no_key), (400, -2014), "{no_key:?}");
    let stranger = Client { key: "bk_nobody".into(), ..buyer.clone() };
    assert_eq!(error_of(&binance(&stranger, "GET", path, "")), (401, -2015));
    assert_eq!(error_of(&binance(&server.admin, "GET", path, "")), (401, -2015));

    // The timestamp: missing, not a number, old, ahead; recvWindow too wide; a
    // timestamp in microseconds is taken.
    let sent = |total: &str| send_signed(&buyer, "GET", path, total, &buyer.secret);
    assert_eq!(error_of(&sent("omitZeroBalances=true")), (400, -1102));
    assert_eq!(error_of(&sent("timestamp=soon")), (400, -1100));
    let old = sent(&format!("timestamp={}", now_ms() - 6_000));
    assert_eq!(error_of(&old), (400, -1021), "{old:?}");
    assert_eq!(error_of(&sent(&format!("timestamp={}", now_ms() + 5_000))), (400, -1021));
    assert_eq!(sent(&format!("timestamp={}&recvWindow=20000", now_ms() - 6_000)).0, 200);
    assert_eq!(error_of(&sent(&format!("timestamp={}&recvWindow=60001", now_ms()))), (400, -1131));
    assert_eq!(sent(&format!("timestamp={}", now_ms() * 1_000 + 1)).0, 200, "microseconds");

    // The signature: wrong, missing, twice; the same request twice is a replay.
    let wrong =
        send_signed(&buyer, "GET", path, &format!("timestamp={}", now_ms()), &"0".repeat(64));
    assert_eq!(error_of(&wrong), (400, -1022), "{wrong:?}");
    let headers = [("X-MBX-APIKEY".to_string(), buyer.key.clone())];
    let unsigned =
        request(server.address, "GET", &format!("{path}?timestamp={}", now_ms()), &headers, b"");
    assert_eq!(error_of(&unsigned), (400, -1102), "{unsigned:?}");
    // Unique: the request below signs the same text, and would be this one replayed.
    let total = format!("timestamp={}", support::unique_timestamp_ms());
    let twice = format!("{total}&signature=00&signature=11");
    assert_eq!(
        error_of(&request(server.address, "GET", &format!("{path}?{twice}"), &headers, b"")).1,
        -1101
    );
    let once = format!("{path}?{total}&signature={}", sign(&buyer.secret, total.as_bytes()));
    assert_eq!(request(server.address, "GET", &once, &headers, b"").0, 200);
    assert_eq!(error_of(&request(server.address, "GET", &once, &headers, b"")), (400, -1022));

    // The signature may come first, or in the body while the rest is in the query.
    let total = format!("timestamp={}", support::unique_timestamp_ms());
    let first = format!("{path}?signature={}&{total}", sign(&buyer.secret, total.as_bytes()));
    assert_eq!(request(server.address, "GET", &first, &headers, b"").0, 200);
    let query = format!(
        "symbol=BTCUSD&side=BUY&type=LIMIT&timeInForce=GTC&quantity=0.01&price=100&timestamp={}",
        now_ms()
    );
    let body = format!("signature={}", sign(&buyer.secret, query.as_bytes()));
    let split = request(
        server.address,
        "POST",
        &format!("/api/v3/order?{query}"),
        &headers,
        body.as_bytes(),
    );
    assert_eq!(split.0, 200, "{split:?}");
}

#[test]
fn malformed_parameters_are_refused_by_name_and_the_server_goes_on() {
    let directory = tempfile::tempdir().unwrap();
    let server = TestServer::start(directory.path(), false);
    let (buyer, _) = buyer_and_seller(&server);
    let order = "/api/v3/order";
    let cases: [(&str, i64); 14] = [
        ("symbol=BTCUSD&symbol=BTCUSD&side=BUY", -1101),
        ("symbol=&side=BUY", -1105),
        ("symbol=BTCUSD&side=BUY&type=LIMIT&timeInForce=GTC&quantity=1&price=1&colour=red", -1104),
        ("side=BUY&type=LIMIT", -1102),
        ("symbol=NOPE&side=BUY&type=LIMIT&timeInForce=GTC&quantity=1&price=1", -1121),
        ("symbol=BTCUSD&side=UP&type=LIMIT&timeInForce=GTC&quantity=1&price=1", -1117),
        ("symbol=BTCUSD&side=BUY&type=STOP_LOSS&quantity=1", -1116),
        ("symbol=BTCUSD&side=BUY&type=LIMIT&timeInForce=GTD&quantity=1&price=1", -1115),
        ("symbol=BTCUSD&side=BUY&type=LIMIT&quantity=1&price=1", -1102),
        ("symbol=BTCUSD&side=BUY&type=LIMIT&timeInForce=GTC&quantity=one&price=1", -1100),
        ("symbol=BTCUSD&side=BUY&type=LIMIT&timeInForce=GTC&quantity=1&price=-1", -1100),
        ("symbol=BTCUSD&side=BUY&type=MARKET", -1102),
        ("symbol=BTCUSD&side=BUY&type=MARKET&quantity=1&quoteOrderQty=5", -1128),
        ("symbol=BTCUSD&side=BUY&type=LIMIT_MAKER&timeInForce=GTC&quantity=1&price=1", -1106),
    ];
    for (params, code) in cases {
        let answer = binance(&buyer, "POST", order, params);
        assert_eq!(
            (answer.0, answer.1["code"].as_i64()),
            (400, Some(code)),
            "{params}: {answer:?}"
        );
        assert!(answer.1["msg"].as_str().is_some_and(|msg| !msg.is_empty()), "{answer:?}");
    }
    // Filters: a price off the tick, a quantity off the lot.
    let off_tick = binance(
        &buyer,
        "POST",
        order,
        "symbol=BTCUSD&side=BUY&type=LIMIT&timeInForce=GTC&quantity=0.01&price=100.001",
    );
    assert_eq!(off_tick.1["msg"], "Filter failure: PRICE_FILTER", "{off_tick:?}");
    let off_lot = binance(
        &buyer,
        "POST",
        order,
        "symbol=BTCUSD&side=BUY&type=LIMIT&timeInForce=GTC&quantity=0.00001&price=100",
    );
    assert_eq!(off_lot.1["msg"], "Filter failure: LOT_SIZE", "{off_lot:?}");
    // Bytes that are not text, a flood of garbage: each refused, nothing lost.
    let headers = [("X-MBX-APIKEY".to_string(), buyer.key.clone())];
    let garbage = request(server.address, "POST", order, &headers, &[0xff, 0xfe, 0x00, b'&', b'=']);
    assert_eq!(garbage.0, 400, "{garbage:?}");
    for index in 0..200u32 {
        let noise = format!("%{index:x}&&==&{}", "x".repeat(index as usize % 50));
        let answer = request(server.address, "POST", order, &headers, noise.as_bytes());
        assert_eq!(answer.0, 400, "{noise}: {answer:?}");
    }
    // None of it left an order, and the server still takes a good one.
    assert_eq!(binance(&buyer, "GET", "/api/v3/openOrders", "").1, Value::Array(vec![]));
    let good = binance(
        &buyer,
        "POST",
        order,
        "symbol=BTCUSD&side=BUY&type=LIMIT&timeInForce=GTC&quantity=0.01&price=100",
    );
    assert_eq!((good.0, good.1["status"].as_str()), (200, Some("NEW")), "{good:?}");
    let (_, orders) = buyer.get("/v1/orders");
    assert_eq!(orders["orders"].as_array().map(Vec::len), Some(1), "{orders}");
}

#[test]
fn orders_follow_bourse_rules_and_both_apis_show_the_same_orders() {
    let directory = tempfile::tempdir().unwrap();
    let server = TestServer::start(directory.path(), false);
    let (buyer, seller) = buyer_and_seller(&server);
    let placed = binance(
        &buyer,
        "POST",
        "/api/v3/order",
        "symbol=BTCUSD&side=BUY&type=LIMIT&timeInForce=GTC&quantity=0.5&price=100&newClientOrderId=first",
    );
    assert_eq!(placed.0, 200, "{placed:?}");
    let order_id = placed.1["orderId"].as_u64().unwrap();
    assert_eq!(placed.1["fills"], Value::Array(vec![]));
    // The same client order id again: Binance's duplicate, and the first order stays.
    let again = binance(
        &buyer,
        "POST",
        "/api/v3/order",
        "symbol=BTCUSD&side=BUY&type=LIMIT&timeInForce=GTC&quantity=0.7&price=101&newClientOrderId=first",
    );
    assert_eq!(error_of(&again), (400, -2010));
    assert_eq!(again.1["msg"], "Duplicate order sent.");
    // Too little money: refused, nothing left.
    let too_much = binance(
        &buyer,
        "POST",
        "/api/v3/order",
        "symbol=BTCUSD&side=BUY&type=LIMIT&timeInForce=GTC&quantity=900&price=50000",
    );
    assert_eq!(
        too_much.1["msg"], "Account has insufficient balance for requested action.",
        "{too_much:?}"
    );
    let (_, rest) = buyer.get(&format!("/v1/orders/{order_id}"));
    assert_eq!(
        (rest["qty"].as_str(), rest["price"].as_str()),
        (Some("0.5"), Some("100")),
        "{rest}"
    );
    let open = binance(&buyer, "GET", "/api/v3/openOrders", "symbol=BTCUSD").1;
    assert_eq!(open.as_array().map(Vec::len), Some(1), "{open}");
    assert_eq!(open[0]["orderId"].as_u64(), Some(order_id));

    // The seller takes 0.2 with a market order (FULL: its fills), then the buyer's
    // order shows it, in both APIs, with the quote amount.
    let sold = binance(
        &seller,
        "POST",
        "/api/v3/order",
        "symbol=BTCUSD&side=SELL&type=MARKET&quantity=0.2",
    );
    assert_eq!(
        (sold.1["status"].as_str(), sold.1["executedQty"].as_str()),
        (Some("FILLED"), Some("0.2")),
        "{sold:?}"
    );
    assert_eq!(sold.1["fills"][0]["price"], "100");
    assert_eq!(sold.1["cummulativeQuoteQty"], "20");
    let status =
        binance(&buyer, "GET", "/api/v3/order", &format!("symbol=BTCUSD&orderId={order_id}")).1;
    assert_eq!(
        (
            status["status"].as_str(),
            status["executedQty"].as_str(),
            status["cummulativeQuoteQty"].as_str()
        ),
        (Some("PARTIALLY_FILLED"), Some("0.2"), Some("20")),
        "{status}"
    );
    let by_client =
        binance(&buyer, "GET", "/api/v3/order", "symbol=BTCUSD&origClientOrderId=first").1;
    assert_eq!(by_client["orderId"].as_u64(), Some(order_id));
    let trades = binance(&buyer, "GET", "/api/v3/myTrades", "symbol=BTCUSD").1;
    let (_, fills) = buyer.get("/v1/fills");
    assert_eq!(trades[0]["qty"], fills["fills"][0]["qty"]);
    assert_eq!(trades[0]["commission"], fills["fills"][0]["fee"]);
    assert_eq!(trades[0]["isMaker"], true);

    // Cancel by client order id; again: unknown order.
    let canceled =
        binance(&buyer, "DELETE", "/api/v3/order", "symbol=BTCUSD&origClientOrderId=first");
    assert_eq!(
        (canceled.0, canceled.1["status"].as_str()),
        (200, Some("CANCELED")),
        "{canceled:?}"
    );
    assert_eq!(buyer.get(&format!("/v1/orders/{order_id}")).1["status"], "canceled");
    let twice = binance(&buyer, "DELETE", "/api/v3/order", "symbol=BTCUSD&origClientOrderId=first");
    assert_eq!(error_of(&twice), (400, -2011));
    // Another account cannot see or cancel it.
    let other =
        binance(&seller, "GET", "/api/v3/order", &format!("symbol=BTCUSD&orderId={order_id}"));
    assert_eq!(error_of(&other), (400, -2013));
    let all = binance(&buyer, "GET", "/api/v3/allOrders", "symbol=BTCUSD").1;
    assert_eq!(all.as_array().map(Vec::len), Some(1), "{all}");
    assert_eq!(all[0]["status"], "CANCELED");
}

#[test]
fn a_market_buy_for_a_quote_amount_spends_at_most_that_amount() {
    let directory = tempfile::tempdir().unwrap();
    let server = TestServer::start(directory.path(), false);
    let (buyer, seller) = buyer_and_seller(&server);
    // (Within the instrument's 5% band of the best ask, as any market order.)
    for (price, qty) in [("100", "1"), ("102", "1"), ("104", "5")] {
        let body = format!(
            r#"{{"symbol":"BTC-USD","side":"sell","type":"limit","price":"{price}","qty":"{qty}"}}"#
        );
        assert_eq!(seller.post("/v1/orders", &body).0, 200);
    }
    // 250 USD: all of 100 (100), all of 102 (102), and 48 / 104 = 0.4615 of 104.
    let bought = binance(
        &buyer,
        "POST",
        "/api/v3/order",
        "symbol=BTCUSD&side=BUY&type=MARKET&quoteOrderQty=250",
    );
    assert_eq!(bought.0, 200, "{bought:?}");
    assert_eq!(bought.1["executedQty"], "2.4615");
    assert_eq!(bought.1["cummulativeQuoteQty"], "249.996");
    assert_eq!(bought.1["origQuoteOrderQty"], "250");
    assert_eq!(bought.1["fills"].as_array().map(Vec::len), Some(3));
    // Too little for one lot at the best price: the engine's spend-amount buy takes
    // it and buys nothing (`orders.md`: expired), as Binance's market orders expire.
    let tiny = binance(
        &buyer,
        "POST",
        "/api/v3/order",
        "symbol=BTCUSD&side=BUY&type=MARKET&quoteOrderQty=0.001",
    );
    assert_eq!(tiny.0, 200, "{tiny:?}");
    assert_eq!(
        (tiny.1["status"].as_str(), tiny.1["executedQty"].as_str()),
        (Some("EXPIRED"), Some("0"))
    );
    assert_eq!(tiny.1["origQuoteOrderQty"], "0.001");
    // The journal and the venue keep the order as it was sent: Bourse's own API shows
    // what it spends, and a spend-amount sell is refused by the engine's rule.
    let sell = binance(
        &buyer,
        "POST",
        "/api/v3/order",
        "symbol=BTCUSD&side=SELL&type=MARKET&quoteOrderQty=100",
    );
    assert_eq!(error_of(&sell), (400, -1106), "{sell:?}");
}

#[test]
fn public_reads_match_bourse_own_and_refuse_bad_parameters() {
    let directory = tempfile::tempdir().unwrap();
    let server = TestServer::start(directory.path(), true);
    let (status, info) = public(&server, "/api/v3/exchangeInfo");
    assert_eq!(status, 200);
    let symbols: Vec<&str> =
        info["symbols"].as_array().unwrap().iter().filter_map(|s| s["symbol"].as_str()).collect();
    assert_eq!(symbols, ["BTCUSD", "ETHUSD"], "spot only, without a separator");
    let one = public(&server, "/api/v3/exchangeInfo?symbol=ETHUSD").1;
    assert_eq!(one["symbols"][0]["baseAsset"], "ETH");
    assert_eq!(error_of(&public(&server, "/api/v3/exchangeInfo?symbol=SHFE.cu2501")), (400, -1121));
    // Nor do the tickers show the futures contract (whose turnover counts its multiplier,
    // which Binance's spot quoteVolume has no room for).
    assert_eq!(error_of(&public(&server, "/api/v3/ticker/24hr?symbol=SHFE.cu2501")), (400, -1121));
    let tickers = public(&server, "/api/v3/ticker/24hr").1;
    let ticker_symbols: Vec<&str> =
        tickers.as_array().unwrap().iter().filter_map(|t| t["symbol"].as_str()).collect();
    assert_eq!(ticker_symbols, ["BTCUSD", "ETHUSD"]);

    let depth = public(&server, "/api/v3/depth?symbol=BTCUSD&limit=3").1;
    let rest = public(&server, "/v1/depth/BTC-USD?levels=3").1;
    for side in ["bids", "asks"] {
        let binance_levels: Vec<(&Value, &Value)> =
            depth[side].as_array().unwrap().iter().map(|l| (&l[0], &l[1])).collect();
        let rest_levels: Vec<(&Value, &Value)> =
            rest[side].as_array().unwrap().iter().map(|l| (&l[0], &l[1])).collect();
        assert_eq!(binance_levels, rest_levels, "{side}");
    }
    let book = public(&server, "/api/v3/ticker/bookTicker?symbol=BTCUSD").1;
    assert_eq!((&book["bidPrice"], &book["askPrice"]), (&rest["bids"][0][0], &rest["asks"][0][0]));
    assert_eq!(public(&server, "/api/v3/ticker/price").1.as_array().map(Vec::len), Some(2));

    for (path, code) in [
        ("/api/v3/depth?symbol=NOPE", -1121),
        ("/api/v3/depth", -1102),
        ("/api/v3/depth?symbol=BTCUSD&limit=0", -1100),
        ("/api/v3/depth?symbol=BTCUSD&limit=x", -1100),
        ("/api/v3/depth?symbol=BTCUSD&depth=5", -1104),
        ("/api/v3/klines?symbol=BTCUSD&interval=7m", -1120),
        ("/api/v3/klines?symbol=BTCUSD", -1102),
        ("/api/v3/trades?symbol=BTCUSD&limit=1001", -1100),
        ("/api/v3/ticker/24hr?symbol=BTCUSD&symbols=%5B%22BTCUSD%22%5D", -1128),
        ("/api/v3/ticker/24hr?symbols=notjson", -1130),
        ("/api/v3/ticker/24hr?symbol=BTCUSD&type=HUGE", -1130),
    ] {
        assert_eq!(error_of(&public(&server, path)), (400, code), "{path}");
    }
    let (status, time) = public(&server, "/api/v3/time");
    assert_eq!(status, 200);
    assert!(time["serverTime"].as_u64().unwrap().abs_diff(now_ms()) < 5_000);
}

/// With the multicast feed off (`--no-marketdata`), klines (ccxt's `fetch_ohlcv`) still
/// follow the trades: they are the candle service's, as `/v1/candles` is.
#[test]
fn klines_follow_the_trades_with_the_multicast_feed_off() {
    let directory = tempfile::tempdir().unwrap();
    let mut config = support::config(directory.path());
    config.marketdata.enabled = false;
    let server = TestServer::start_with(config, false);
    assert!(server.server.as_ref().unwrap().notes.market_data.is_none(), "the feed is off");
    let (buyer, seller) = buyer_and_seller(&server);
    for (client, params) in [
        (&seller, "symbol=BTCUSD&side=SELL&type=LIMIT&timeInForce=GTC&price=100&quantity=0.5"),
        (&seller, "symbol=BTCUSD&side=SELL&type=LIMIT&timeInForce=GTC&price=101&quantity=0.5"),
        (&buyer, "symbol=BTCUSD&side=BUY&type=LIMIT&timeInForce=GTC&price=101&quantity=0.7"),
    ] {
        let (status, answer) = binance(client, "POST", "/api/v3/order", params);
        assert_eq!(status, 200, "{answer}");
    }
    let mut klines = Vec::new();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while klines.iter().map(|kline: &Value| kline[8].as_u64().unwrap()).sum::<u64>() < 2 {
        assert!(std::time::Instant::now() < deadline, "the trades never showed: {klines:?}");
        std::thread::sleep(std::time::Duration::from_millis(20));
        let (status, answer) = public(&server, "/api/v3/klines?symbol=BTCUSD&interval=1m");
        assert_eq!(status, 200, "{answer}");
        klines = answer.as_array().unwrap().clone();
    }
    // [open time, open, high, low, close, volume, close time, quote volume, trades,
    // taker buy volume, taker buy quote volume, "0"]: both trades were the buyer's take.
    let number = |value: &Value| value.as_str().unwrap().parse::<f64>().unwrap();
    let sum = |field: usize| klines.iter().map(|kline| number(&kline[field])).sum::<f64>();
    let (first, last) = (&klines[0], &klines[klines.len() - 1]);
    assert_eq!((first[1].as_str(), last[4].as_str()), (Some("100"), Some("101")), "{klines:?}");
    assert!((sum(5) - 0.7).abs() < 1e-9, "{klines:?}");
    assert!((sum(7) - (50.0 + 20.2)).abs() < 1e-9, "{klines:?}");
    assert!((sum(9) - 0.7).abs() < 1e-9, "{klines:?}");
    assert_eq!(
        first[6].as_u64().unwrap() - first[0].as_u64().unwrap(),
        59_999,
        "a minute: {first}"
    );
    // The same candles with trades as Bourse's own.
    let rest = public(&server, "/v1/candles/BTC-USD?interval=1m").1;
    let rest_traded: Vec<(u64, u64)> = rest["candles"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|candle| candle[6] != 0)
        .map(|candle| (candle[0].as_u64().unwrap() / 1_000_000, candle[6].as_u64().unwrap()))
        .collect();
    let traded: Vec<(u64, u64)> = klines
        .iter()
        .filter(|kline| kline[8] != 0)
        .map(|kline| (kline[0].as_u64().unwrap(), kline[8].as_u64().unwrap()))
        .collect();
    assert_eq!(traded, rest_traded);
}

#[test]
fn a_key_over_its_rate_gets_429_and_binance_code() {
    let directory = tempfile::tempdir().unwrap();
    let mut config = support::config(directory.path());
    config.limits.requests_per_second = 5;
    config.limits.requests_burst = 5;
    let server = TestServer::start_with(config, false);
    let (buyer, _) = buyer_and_seller(&server);
    let answers: Vec<(u16, Value)> =
        (0..20).map(|_| binance(&buyer, "GET", "/api/v3/account", "")).collect();
    let limited =
        answers.iter().find(|answer| answer.0 == 429).expect("some requests are over the rate");
    assert_eq!(limited.1["code"], -1003, "{limited:?}");
}
