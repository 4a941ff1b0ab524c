//! The WebSocket gateway over real sockets: public channels (depth snapshot then deltas,
//! trades, ticker), login and private channels, sequence numbers, and a client that
//! cannot keep up being disconnected with a reason.

mod support;

use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

use bourse_protocol::signing::sign;
use serde_json::{json, Value};
use support::{Client, TestServer};
use tungstenite::stream::MaybeTlsStream;
use tungstenite::{Message, WebSocket};

type Socket = WebSocket<MaybeTlsStream<TcpStream>>;

fn connect(address: SocketAddr) -> Socket {
    let (socket, _) = tungstenite::connect(format!("ws://{address}/v1/ws")).unwrap();
    if let MaybeTlsStream::Plain(stream) = socket.get_ref() {
        stream.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    }
    socket
}

fn send(socket: &mut Socket, message: Value) {
    socket.send(Message::Text(message.to_string().into())).unwrap();
}

/// The next JSON message (skipping pings).
fn next(socket: &mut Socket) -> Value {
    loop {
        match socket.read().unwrap() {
            Message::Text(text) => return serde_json::from_str(text.as_str()).unwrap(),
            Message::Close(frame) => {
                return json!({ "closed": frame.map(|f| f.reason.to_string()) })
            }
            _ => continue,
        }
    }
}

/// Reads until a message matches `wanted` (within 10 s).
fn until(socket: &mut Socket, wanted: impl Fn(&Value) -> bool) -> Value {
    let deadline = Instant::now() + Duration::from_secs(10);
    while Instant::now() < deadline {
        let message = next(socket);
        if wanted(&message) {
            return message;
        }
        assert!(message.get("closed").is_none(), "closed while waiting: {message}");
    }
    panic!("no such message in time");
}

fn login(socket: &mut Socket, client: &Client) {
    let timestamp = support::now_ms().to_string();
    let signature = sign(&client.secret, format!("{timestamp}\nGET\n/v1/ws\n").as_bytes());
    send(
        socket,
        json!({ "op": "login", "key": client.key, "timestamp": timestamp, "signature": signature }),
    );
    let answer = next(socket);
    assert_eq!(answer["type"], "logged_in", "{answer}");
}

fn order(client: &Client, side: &str, price: &str, qty: &str, id: &str) -> Value {
    let body = json!({ "symbol": "BTC-USD", "side": side, "type": "limit", "price": price, "qty": qty, "client_order_id": id });
    let (status, answer) = client.post("/v1/orders", &body.to_string());
    assert_eq!(status, 200, "{answer}");
    answer
}

#[test]
fn depth_is_a_snapshot_then_numbered_deltas_and_trades_and_ticker_follow_the_book() {
    let directory = tempfile::tempdir().unwrap();
    let server = TestServer::start(directory.path(), false);
    let (seller, buyer) = server.seller_and_buyer("10", "100000");
    order(&seller, "sell", "101", "1", "s1");

    let mut socket = connect(server.address);
    for channel in ["depth", "trades", "ticker"] {
        send(&mut socket, json!({ "op": "subscribe", "channel": channel, "symbol": "BTC-USD" }));
        let answer = next(&mut socket);
        assert_eq!(
            (answer["type"].as_str(), answer["channel"].as_str()),
            (Some("subscribed"), Some(channel))
        );
        if channel == "depth" {
            let snapshot = next(&mut socket);
            assert_eq!(snapshot["type"], "snapshot", "{snapshot}");
            assert_eq!(snapshot["asks"], json!([["101", "1", 1]]));
            assert_eq!(snapshot["bids"], json!([]));
        }
        if channel == "ticker" {
            // The current ticker at once: no trade yet.
            let snapshot = next(&mut socket);
            assert_eq!(
                (snapshot["type"].as_str(), snapshot["seq"].as_u64()),
                (Some("snapshot"), Some(0))
            );
            assert_eq!(snapshot["data"]["last"], Value::Null, "{snapshot}");
        }
    }
    let depth_seq = |message: &Value| message["seq"].as_u64().unwrap();
    order(&buyer, "buy", "99", "2", "b1");
    let delta = until(&mut socket, |m| m["channel"] == "depth");
    assert_eq!(
        (delta["type"].as_str(), delta["bids"].clone()),
        (Some("delta"), json!([["99", "2", 1]]))
    );
    let first_delta = depth_seq(&delta);

    order(&buyer, "buy", "101", "0.4", "b2");
    let trade = until(&mut socket, |m| m["channel"] == "trades");
    assert_eq!(trade["seq"], 1);
    assert_eq!(
        (trade["data"]["price"].as_str(), trade["data"]["qty"].as_str()),
        (Some("101"), Some("0.4"))
    );
    assert_eq!(trade["data"]["taker_side"], "buy");
    let ticker = until(&mut socket, |m| m["channel"] == "ticker");
    assert_eq!(
        (ticker["data"]["last"].as_str(), ticker["data"]["volume_24h"].as_str()),
        (Some("101"), Some("0.4"))
    );
    assert_eq!(ticker["seq"], 1, "the first update follows the snapshot's 0");
    let delta = until(&mut socket, |m| m["channel"] == "depth");
    assert_eq!(depth_seq(&delta), first_delta + 1, "deltas are numbered without gaps");
    assert_eq!(delta["asks"], json!([["101", "0.6", 1]]));

    order(&buyer, "buy", "101", "0.6", "b3");
    let trade = until(&mut socket, |m| m["channel"] == "trades");
    assert_eq!(trade["seq"], 2, "trade messages are numbered without gaps");
    let delta = until(&mut socket, |m| m["channel"] == "depth");
    assert_eq!(depth_seq(&delta), first_delta + 2);
    assert_eq!(delta["asks"], json!([["101", "0", 0]]), "a level that is gone has quantity 0");

    // After unsubscribing, trades stop (the next message is the pong).
    send(&mut socket, json!({ "op": "unsubscribe", "channel": "trades", "symbol": "BTC-USD" }));
    assert_eq!(next(&mut socket)["type"], "unsubscribed");
    send(&mut socket, json!({ "op": "unsubscribe", "channel": "ticker", "symbol": "BTC-USD" }));
    assert_eq!(next(&mut socket)["type"], "unsubscribed");
    send(&mut socket, json!({ "op": "unsubscribe", "channel": "depth", "symbol": "BTC-USD" }));
    assert_eq!(next(&mut socket)["type"], "unsubscribed");
    order(&seller, "sell", "99", "1", "s2");
    send(&mut socket, json!({ "op": "ping" }));
    assert_eq!(next(&mut socket)["type"], "pong");
}

/// Subscribes `socket` to `channel` of `symbol` and returns what follows the
/// acknowledgement.
fn subscribe_and_read(socket: &mut Socket, channel: &str, symbol: &str) -> Value {
    send(socket, json!({ "op": "subscribe", "channel": channel, "symbol": symbol }));
    let answer = next(socket);
    assert_eq!(
        (answer["type"].as_str(), answer["channel"].as_str()),
        (Some("subscribed"), Some(channel))
    );
    next(socket)
}

#[test]
fn a_ticker_subscription_gets_the_current_ticker_at_once_then_numbered_updates() {
    let directory = tempfile::tempdir().unwrap();
    let server = TestServer::start(directory.path(), false);
    let (seller, buyer) = server.seller_and_buyer("10", "100000");
    // Trades before anyone follows the ticker.
    order(&seller, "sell", "101", "1", "s1");
    order(&buyer, "buy", "101", "0.25", "b1");
    order(&seller, "sell", "100", "1", "s2");
    order(&buyer, "buy", "100", "0.5", "b2");
    // The hub sees a trade a moment after its acknowledgement: wait for REST's ticker.
    let deadline = Instant::now() + Duration::from_secs(10);
    while support::request(server.address, "GET", "/v1/ticker/BTC-USD", &[], b"").1["data"]
        ["trades_24h"]
        != 2
    {
        assert!(Instant::now() < deadline, "the trades never reached the ticker");
        std::thread::sleep(Duration::from_millis(20));
    }

    let mut socket = connect(server.address);
    let snapshot = subscribe_and_read(&mut socket, "ticker", "BTC-USD");
    assert_eq!(
        (snapshot["channel"].as_str(), snapshot["symbol"].as_str(), snapshot["type"].as_str()),
        (Some("ticker"), Some("BTC-USD"), Some("snapshot")),
        "the ticker comes at once, before any new trade: {snapshot}"
    );
    assert_eq!(snapshot["seq"], 0, "no update was sent before it");
    let data = &snapshot["data"];
    assert_eq!(
        (data["last"].as_str(), data["open_24h"].as_str(), data["high_24h"].as_str()),
        (Some("100"), Some("101"), Some("101"))
    );
    assert_eq!(
        (data["low_24h"].as_str(), data["volume_24h"].as_str(), data["trades_24h"].as_u64()),
        (Some("100"), Some("0.75"), Some(2))
    );
    assert_eq!(data["quote_volume_24h"], "75.25");
    assert!(data.get("open_interest").is_none(), "a spot ticker has no open interest: {data}");

    // Then an update per batch of trades, numbered from 1.
    order(&buyer, "buy", "100", "0.1", "b3");
    let update = next(&mut socket);
    assert_eq!((update["channel"].as_str(), update["seq"].as_u64()), (Some("ticker"), Some(1)));
    assert!(update.get("type").is_none(), "{update}");
    assert_eq!(
        (update["data"]["last"].as_str(), update["data"]["trades_24h"].as_u64()),
        (Some("100"), Some(3))
    );

    // A later subscriber's snapshot is numbered after the update already sent.
    let mut late = connect(server.address);
    let snapshot = subscribe_and_read(&mut late, "ticker", "BTC-USD");
    assert_eq!((snapshot["type"].as_str(), snapshot["seq"].as_u64()), (Some("snapshot"), Some(1)));
    assert_eq!(snapshot["data"]["volume_24h"], "0.85");
    // The first subscriber got nothing for it.
    send(&mut socket, json!({ "op": "ping" }));
    assert_eq!(next(&mut socket)["type"], "pong");
}

#[test]
fn private_channels_need_a_login_and_carry_only_the_accounts_own_events() {
    let directory = tempfile::tempdir().unwrap();
    let server = TestServer::start(directory.path(), false);
    let (seller, buyer) = server.seller_and_buyer("10", "100000");

    let mut socket = connect(server.address);
    send(&mut socket, json!({ "op": "subscribe", "channel": "fills" }));
    assert_eq!(next(&mut socket)["code"], "login_required");
    let wrong = Client { secret: "0".repeat(64), ..seller.clone() };
    let timestamp = support::now_ms().to_string();
    let signature = sign(&wrong.secret, format!("{timestamp}\nGET\n/v1/ws\n").as_bytes());
    send(
        &mut socket,
        json!({ "op": "login", "key": seller.key, "timestamp": timestamp, "signature": signature }),
    );
    assert_eq!(next(&mut socket)["code"], "invalid_signature");
    login(&mut socket, &seller);
    for channel in ["orders", "fills", "balances"] {
        send(&mut socket, json!({ "op": "subscribe", "channel": channel }));
        assert_eq!(next(&mut socket)["type"], "subscribed");
    }
    let balances = until(&mut socket, |m| m["channel"] == "balances");
    assert_eq!(balances["data"]["BTC"]["available"], "10", "the current balances come first");

    order(&seller, "sell", "100", "1", "s1");
    let update = until(&mut socket, |m| m["channel"] == "orders");
    assert_eq!(
        (update["seq"].as_u64(), update["data"]["status"].as_str()),
        (Some(1), Some("open"))
    );
    let balances = until(&mut socket, |m| m["channel"] == "balances");
    assert_eq!(balances["data"]["BTC"]["held"], "1");

    order(&buyer, "buy", "100", "0.25", "b1");
    let fill = until(&mut socket, |m| m["channel"] == "fills");
    assert_eq!(
        (fill["seq"].as_u64(), fill["data"]["liquidity"].as_str()),
        (Some(1), Some("maker"))
    );
    assert_eq!(
        (fill["data"]["client_order_id"].as_str(), fill["data"]["qty"].as_str()),
        (Some("s1"), Some("0.25"))
    );
    let update = until(&mut socket, |m| m["channel"] == "orders");
    assert_eq!(
        (update["seq"].as_u64(), update["data"]["remaining"].as_str()),
        (Some(2), Some("0.75"))
    );
    let balances = until(&mut socket, |m| m["channel"] == "balances");
    assert_eq!(balances["data"]["USD"]["available"], "24.995", "25 USD less the 2 bps maker fee");

    // The buyer's own order, placed by another account, never shows here.
    order(&buyer, "buy", "90", "1", "b2");
    send(&mut socket, json!({ "op": "ping" }));
    assert_eq!(next(&mut socket)["type"], "pong", "nothing of the buyer's came first");
}

#[test]
fn bad_messages_get_errors_and_the_connection_stays_usable() {
    let directory = tempfile::tempdir().unwrap();
    let server = TestServer::start(directory.path(), true);
    let mut socket = connect(server.address);
    for (message, code) in [
        ("not json", "malformed"),
        (r#"{"op":"dance"}"#, "malformed"),
        (r#"{"op":"subscribe","channel":"gossip","symbol":"BTC-USD"}"#, "unknown_channel"),
        (r#"{"op":"subscribe","channel":"trades"}"#, "malformed"),
        (r#"{"op":"subscribe","channel":"trades","symbol":"NOPE"}"#, "unknown_symbol"),
        (r#"{"op":"login","key":"bk_nope","timestamp":"1","signature":"00"}"#, "invalid_key"),
    ] {
        socket.send(Message::Text(message.into())).unwrap();
        let answer = next(&mut socket);
        assert_eq!(
            (answer["type"].as_str(), answer["code"].as_str()),
            (Some("error"), Some(code)),
            "{message}"
        );
    }
    socket.send(Message::Binary(vec![1, 2, 3].into())).unwrap();
    assert_eq!(next(&mut socket)["code"], "malformed");
    send(&mut socket, json!({ "op": "ping" }));
    assert_eq!(next(&mut socket)["type"], "pong");
    // An oversized message closes the connection; the server goes on.
    let _ = socket.send(Message::Text("x".repeat(100_000).into()));
    let closed = (0..3)
        .map(|_| socket.read())
        .any(|read| read.is_err() || matches!(read, Ok(Message::Close(_))));
    assert!(closed, "an oversized message ends the connection");
    let mut again = connect(server.address);
    send(&mut again, json!({ "op": "ping" }));
    assert_eq!(next(&mut again)["type"], "pong");
}

#[test]
fn a_client_that_does_not_read_is_disconnected_as_slow_and_others_go_on() {
    let directory = tempfile::tempdir().unwrap();
    let mut config = support::config(directory.path());
    config.limits.ws_queue_messages = 16;
    config.limits.requests_per_second = 100_000;
    config.limits.requests_burst = 100_000;
    let server = TestServer::start_with(config, false);
    let (seller, buyer) = server.seller_and_buyer("100", "10000000");

    let mut slow = connect(server.address);
    send(&mut slow, json!({ "op": "subscribe", "channel": "trades", "symbol": "BTC-USD" }));
    assert_eq!(next(&mut slow)["type"], "subscribed");
    let mut watcher = connect(server.address);
    login(&mut watcher, &buyer);
    send(&mut watcher, json!({ "op": "subscribe", "channel": "orders" }));
    assert_eq!(next(&mut watcher)["type"], "subscribed");

    // 400 resting orders, then one order that takes them all: 400 trades at once,
    // far more than the slow client's queue of 16 (it reads nothing meanwhile).
    for index in 0..400 {
        order(&seller, "sell", "100", "0.01", &format!("s{index}"));
    }
    let sweep = order(&buyer, "buy", "100", "4", "sweep");
    assert_eq!(sweep["order"]["status"], "filled");
    let update = until(&mut watcher, |m| {
        m["channel"] == "orders" && m["data"]["client_order_id"] == "sweep"
    });
    assert_eq!(update["data"]["status"], "filled");

    let deadline = Instant::now() + Duration::from_secs(10);
    let mut reason = None;
    while Instant::now() < deadline {
        let message = next(&mut slow);
        if let Some(closed) = message.get("closed") {
            reason = closed.as_str().map(str::to_string);
            break;
        }
    }
    assert_eq!(reason.as_deref(), Some("slow_consumer"));
    send(&mut watcher, json!({ "op": "ping" }));
    assert_eq!(until(&mut watcher, |m| m["type"] == "pong")["type"], "pong");
}

#[test]
fn a_logged_in_connection_shares_its_keys_request_rate() {
    let directory = tempfile::tempdir().unwrap();
    let mut config = support::config(directory.path());
    config.limits.requests_per_second = 1;
    config.limits.requests_burst = 5;
    let server = TestServer::start_with(config, false);
    let trader = server.trader("alice", &[]);
    let mut socket = connect(server.address);
    login(&mut socket, &trader);
    let answers: Vec<Value> = (0..10)
        .map(|_| {
            send(&mut socket, json!({ "op": "ping" }));
            next(&mut socket)
        })
        .collect();
    let limited = answers.iter().filter(|answer| answer["code"] == "rate_limited").count();
    let pongs = answers.iter().filter(|answer| answer["type"] == "pong").count();
    assert!(limited >= 4 && pongs >= 4, "{answers:?}");
    assert_eq!(limited + pongs, 10);
}

// Order entry over WebSocket: `order`, `cancel` and `amend` with a `req_id`.

fn entry(socket: &mut Socket, request: Value) -> Value {
    send(socket, request);
    next(socket)
}

fn limit(req_id: u64, side: &str, price: &str, qty: &str, id: &str) -> Value {
    json!({ "op": "order", "req_id": req_id, "symbol": "BTC-USD", "side": side, "type": "limit",
            "price": price, "qty": qty, "client_order_id": id })
}

#[test]
fn orders_are_placed_cancelled_and_amended_with_their_req_id_echoed() {
    let directory = tempfile::tempdir().unwrap();
    let server = TestServer::start(directory.path(), false);
    let (seller, buyer) = server.seller_and_buyer("10", "100000");
    let mut socket = connect(server.address);
    login(&mut socket, &seller);

    let placed = entry(&mut socket, limit(1, "sell", "101", "1", "w1"));
    assert_eq!((placed["op"].as_str(), placed["req_id"].as_u64()), (Some("ack"), Some(1)));
    let order = &placed["order"];
    assert_eq!(
        (order["client_order_id"].as_str(), order["status"].as_str(), order["price"].as_str()),
        (Some("w1"), Some("open"), Some("101")),
        "{placed}"
    );
    assert_eq!(placed["fills"], json!([]));
    // The same order object as REST's.
    let order_id = order["order_id"].as_u64().unwrap();
    let (status, rest) = seller.get(&format!("/v1/orders/{order_id}"));
    assert_eq!(status, 200);
    assert_eq!(&rest, order);

    // A reused client order id: duplicate_id with the original order, like REST's 409.
    let again = entry(&mut socket, limit(2, "sell", "105", "2", "w1"));
    assert_eq!(
        (again["op"].as_str(), again["req_id"].as_u64(), again["code"].as_str()),
        (Some("error"), Some(2), Some("duplicate_id")),
        "{again}"
    );
    assert_eq!(again["order"]["order_id"].as_u64(), Some(order_id));
    assert_eq!(again["order"]["price"], "101");

    // A string req_id is echoed too; amend by the exchange's id.
    let amended = entry(
        &mut socket,
        json!({ "op": "amend", "req_id": "a-3", "order_id": order_id, "price": "102" }),
    );
    assert_eq!((amended["op"].as_str(), amended["req_id"].as_str()), (Some("ack"), Some("a-3")));
    assert_eq!(amended["order"]["price"], "102", "{amended}");
    let amended = entry(
        &mut socket,
        json!({ "op": "amend", "req_id": 4, "client_order_id": "w1", "qty": "0.5" }),
    );
    assert_eq!(amended["order"]["remaining"], "0.5", "{amended}");

    // Another account's trade shows in the order the next answer carries.
    let (status, _) = buyer.post(
        "/v1/orders",
        r#"{"symbol":"BTC-USD","side":"buy","type":"limit","price":"102","qty":"0.2","client_order_id":"b1"}"#,
    );
    assert_eq!(status, 200);
    let cancelled =
        entry(&mut socket, json!({ "op": "cancel", "req_id": 5, "client_order_id": "w1" }));
    assert_eq!((cancelled["op"].as_str(), cancelled["req_id"].as_u64()), (Some("ack"), Some(5)));
    assert_eq!(
        (cancelled["order"]["status"].as_str(), cancelled["order"]["filled"].as_str()),
        (Some("canceled"), Some("0.2")),
        "{cancelled}"
    );
    // Cancelling it again, or an order that is not there: the engine's reason.
    let gone = entry(&mut socket, json!({ "op": "cancel", "req_id": 6, "order_id": order_id }));
    assert_eq!((gone["req_id"].as_u64(), gone["code"].as_str()), (Some(6), Some("unknown_order")));
    let gone = entry(&mut socket, json!({ "op": "cancel", "req_id": 7, "order_id": 999_999 }));
    assert_eq!(gone["code"], "unknown_order");

    // A taker order's fills come with its answer, like REST's.
    entry(&mut socket, limit(8, "sell", "100", "1", "w2"));
    let mut taker = connect(server.address);
    login(&mut taker, &buyer);
    let taken = entry(&mut taker, limit(9, "buy", "100", "0.25", "b2"));
    assert_eq!(taken["order"]["status"], "filled", "{taken}");
    assert_eq!(
        (taken["fills"][0]["qty"].as_str(), taken["fills"][0]["liquidity"].as_str()),
        (Some("0.25"), Some("taker"))
    );
    // Cancel by the exchange's id.
    let w2 = seller.get("/v1/orders?client_order_id=w2").1["order_id"].as_u64().unwrap();
    let cancelled = entry(&mut socket, json!({ "op": "cancel", "req_id": 10, "order_id": w2 }));
    assert_eq!(cancelled["order"]["status"], "canceled", "{cancelled}");
}

#[test]
fn order_entry_errors_carry_the_req_id_and_rests_codes() {
    let directory = tempfile::tempdir().unwrap();
    let server = TestServer::start(directory.path(), false);
    let (seller, _) = server.seller_and_buyer("10", "100000");
    let mut socket = connect(server.address);
    let before = entry(&mut socket, limit(1, "sell", "101", "1", "e1"));
    assert_eq!(
        (before["op"].as_str(), before["req_id"].as_u64(), before["code"].as_str()),
        (Some("error"), Some(1), Some("login_required")),
        "{before}"
    );
    login(&mut socket, &seller);
    let order = |fields: Value| {
        let mut request = limit(2, "sell", "101", "1", "e2");
        for (field, value) in fields.as_object().unwrap() {
            if value.is_null() {
                request.as_object_mut().unwrap().remove(field);
            } else {
                request[field] = value.clone();
            }
        }
        request
    };
    for (request, code) in [
        (order(json!({ "price": "abc" })), "malformed"),
        (order(json!({ "price": 101 })), "malformed"),
        (order(json!({ "side": "sideways" })), "malformed"),
        (order(json!({ "colour": "blue" })), "malformed"),
        (order(json!({ "price": null })), "malformed"),
        (order(json!({ "client_order_id": "has space" })), "malformed"),
        (order(json!({ "req_id": null })), "malformed"),
        (order(json!({ "req_id": [1] })), "malformed"),
        (order(json!({ "symbol": "NOPE" })), "unknown_symbol"),
        (order(json!({ "price": "101.001" })), "invalid_price"),
        (order(json!({ "qty": "100" })), "insufficient_funds"),
        (json!({ "op": "cancel", "req_id": 2 }), "malformed"),
        (json!({ "op": "cancel", "req_id": 2, "order_id": "x" }), "malformed"),
        (
            json!({ "op": "cancel", "req_id": 2, "order_id": 1, "client_order_id": "a" }),
            "malformed",
        ),
        (json!({ "op": "cancel", "req_id": 2, "client_order_id": "a", "extra": 1 }), "malformed"),
        (json!({ "op": "amend", "req_id": 2, "client_order_id": "nope" }), "malformed"),
        (
            json!({ "op": "amend", "req_id": 2, "client_order_id": "nope", "price": "1" }),
            "unknown_order",
        ),
    ] {
        let answer = entry(&mut socket, request.clone());
        assert_eq!(
            (answer["op"].as_str(), answer["code"].as_str()),
            (Some("error"), Some(code)),
            "{request} answered {answer}"
        );
        if request["req_id"].is_u64() {
            assert_eq!(answer["req_id"], 2, "{answer}");
        }
    }
    send(&mut socket, json!({ "op": "ping" }));
    assert_eq!(next(&mut socket)["type"], "pong", "the connection stays usable");
}

#[test]
fn order_entry_counts_against_the_keys_request_rate() {
    let directory = tempfile::tempdir().unwrap();
    let mut config = support::config(directory.path());
    config.limits.requests_per_second = 1;
    config.limits.requests_burst = 5;
    let server = TestServer::start_with(config, false);
    server.declare_btc_usd();
    let trader = server.trader("alice", &[("BTC", "10")]);
    let mut socket = connect(server.address);
    login(&mut socket, &trader);
    for index in 0..10 {
        send(&mut socket, limit(index, "sell", "101", "0.1", &format!("r{index}")));
    }
    let answers: Vec<Value> = (0..10).map(|_| next(&mut socket)).collect();
    let req_ids: Vec<u64> =
        answers.iter().map(|answer| answer["req_id"].as_u64().unwrap()).collect();
    assert_eq!(req_ids, (0..10).collect::<Vec<_>>(), "answers in the order of the requests");
    let limited = answers.iter().filter(|answer| answer["code"] == "rate_limited").count();
    let acked = answers.iter().filter(|answer| answer["op"] == "ack").count();
    assert!(limited >= 4 && acked >= 4, "{answers:?}");
    assert_eq!(limited + acked, 10, "{answers:?}");
}

#[test]
fn five_hundred_pipelined_orders_are_all_acknowledged_in_order() {
    let directory = tempfile::tempdir().unwrap();
    let mut config = support::config(directory.path());
    config.limits.requests_per_second = 100_000;
    config.limits.requests_burst = 100_000;
    let server = TestServer::start_with(config, false);
    let (seller, _) = server.seller_and_buyer("100", "100000");
    let mut socket = connect(server.address);
    login(&mut socket, &seller);
    // All 500 go out before any answer is read.
    for index in 0..500u64 {
        let price = format!("{}", 200 + index);
        let request = limit(index, "sell", &price, "0.01", &format!("p{index}"));
        socket.write(Message::Text(request.to_string().into())).unwrap();
    }
    socket.flush().unwrap();
    for index in 0..500u64 {
        let answer = next(&mut socket);
        assert_eq!(
            (answer["op"].as_str(), answer["req_id"].as_u64()),
            (Some("ack"), Some(index)),
            "{answer}"
        );
        assert_eq!(answer["order"]["client_order_id"], format!("p{index}"));
    }
    let (status, open) = seller.get("/v1/orders");
    assert_eq!(status, 200);
    assert_eq!(open["orders"].as_array().unwrap().len(), 500);
}

/// Pipelined back to back, an amend and then a cancel of the same order: the amend's
/// answer is the order right after the amend (open, at its new price), not as the
/// cancel behind it left it; by client id and by exchange id alike.
#[test]
fn each_pipelined_answer_shows_the_order_right_after_its_own_request() {
    let directory = tempfile::tempdir().unwrap();
    let server = TestServer::start(directory.path(), false);
    server.declare_btc_usd();
    let trader = server.trader("trader", &[("USD", "10000")]);
    let mut socket = connect(server.address);
    login(&mut socket, &trader);
    let placed = entry(&mut socket, limit(1, "buy", "50", "1", "first"));
    let order_id = placed["order"]["order_id"].as_u64().unwrap();
    entry(&mut socket, limit(2, "buy", "50", "1", "second"));
    let requests = [
        json!({"op": "amend", "req_id": 3, "client_order_id": "first", "price": "45"}),
        json!({"op": "cancel", "req_id": 4, "client_order_id": "first"}),
        json!({"op": "amend", "req_id": 5, "order_id": order_id + 1, "qty": "2"}),
        json!({"op": "cancel", "req_id": 6, "order_id": order_id + 1}),
    ];
    for request in &requests {
        socket.write(Message::Text(request.to_string().into())).unwrap();
    }
    socket.flush().unwrap();
    let answers: Vec<Value> = (0..requests.len()).map(|_| next(&mut socket)).collect();
    let shown = |answer: &Value| {
        (
            answer["req_id"].as_u64(),
            answer["order"]["status"].as_str().map(str::to_string),
            answer["order"]["price"].as_str().map(str::to_string),
            answer["order"]["remaining"].as_str().map(str::to_string),
        )
    };
    let own = |req_id, status: &str, price: &str, remaining: &str| {
        (
            Some(req_id),
            Some(status.to_string()),
            Some(price.to_string()),
            Some(remaining.to_string()),
        )
    };
    assert_eq!(shown(&answers[0]), own(3, "open", "45", "1"), "{}", answers[0]);
    assert_eq!(shown(&answers[1]), own(4, "canceled", "45", "0"), "{}", answers[1]);
    assert_eq!(shown(&answers[2]), own(5, "open", "50", "2"), "{}", answers[2]);
    assert_eq!(shown(&answers[3]), own(6, "canceled", "50", "0"), "{}", answers[3]);
}

// The market-data feed's channels: bbo, l3, candles.

/// One side of an L3 book: `(order id, price, qty)` in priority order.
type L3Side = Vec<(u64, f64, f64)>;

/// An `l3` subscriber's book: the snapshot, then every change applied in order.
#[derive(Default)]
struct L3Book {
    /// order id -> (side, price, qty), and each side's queue in priority order.
    orders: std::collections::HashMap<u64, (String, String, String)>,
    queue: Vec<u64>,
}

impl L3Book {
    fn apply(&mut self, message: &Value) {
        if message["type"] == "snapshot" {
            for (name, side) in [("bids", "buy"), ("asks", "sell")] {
                for order in message[name].as_array().unwrap() {
                    let id = order[0].as_u64().unwrap();
                    self.orders.insert(
                        id,
                        (
                            side.into(),
                            order[1].as_str().unwrap().into(),
                            order[2].as_str().unwrap().into(),
                        ),
                    );
                    self.queue.push(id);
                }
            }
            return;
        }
        for change in message["changes"].as_array().unwrap() {
            let id = change[1].as_u64().unwrap();
            let text = |index: usize| change[index].as_str().unwrap().to_string();
            match change[0].as_str().unwrap() {
                "add" => {
                    self.orders.insert(id, (text(2), text(3), text(4)));
                    self.queue.push(id);
                }
                "executed" | "reduced" => {
                    let entry = self.orders.get_mut(&id).unwrap();
                    let left: f64 =
                        entry.2.parse::<f64>().unwrap() - text(2).parse::<f64>().unwrap();
                    if left.abs() < 1e-12 {
                        self.orders.remove(&id);
                        self.queue.retain(|known| *known != id);
                    } else {
                        entry.2 = format!("{}", (left * 1e8).round() / 1e8);
                    }
                }
                "deleted" => {
                    self.orders.remove(&id);
                    self.queue.retain(|known| *known != id);
                }
                "replaced" => {
                    let entry = self.orders.get_mut(&id).unwrap();
                    entry.1 = text(2);
                    entry.2 = text(3);
                    self.queue.retain(|known| *known != id);
                    self.queue.push(id);
                }
                other => panic!("unknown change {other}"),
            }
        }
    }

    /// Each side as `[id, price, qty]` in priority order, like `/v1/l3`.
    fn sides(&self) -> (L3Side, L3Side) {
        let mut bids = Vec::new();
        let mut asks = Vec::new();
        for id in &self.queue {
            let (side, price, qty) = &self.orders[id];
            let entry = (*id, price.parse::<f64>().unwrap(), qty.parse::<f64>().unwrap());
            if side == "buy" {
                bids.push(entry)
            } else {
                asks.push(entry)
            }
        }
        // Priority: best price first, then arrival (a stable sort keeps arrival).
        bids.sort_by(|a, b| b.1.partial_cmp(&a.1).unwrap());
        asks.sort_by(|a, b| a.1.partial_cmp(&b.1).unwrap());
        (bids, asks)
    }
}

fn l3_sides(server: &TestServer) -> (u64, L3Side, L3Side) {
    let (status, l3) = support::request(server.address, "GET", "/v1/l3/BTC-USD", &[], b"");
    assert_eq!(status, 200, "{l3}");
    let side = |name: &str| {
        l3[name]
            .as_array()
            .unwrap()
            .iter()
            .map(|order| {
                let number = |value: &Value| value.as_str().unwrap().parse::<f64>().unwrap();
                (order[0].as_u64().unwrap(), number(&order[1]), number(&order[2]))
            })
            .collect::<Vec<_>>()
    };
    (l3["seq"].as_u64().unwrap(), side("bids"), side("asks"))
}

#[test]
fn the_feeds_channels_give_the_books_best_prices_and_candles_with_numbered_updates() {
    let directory = tempfile::tempdir().unwrap();
    let server = TestServer::start(directory.path(), false);
    let (seller, buyer) = server.seller_and_buyer("10", "100000");
    order(&seller, "sell", "101", "1", "early"); // before the subscription: in the snapshot
    let mut socket = connect(server.address);
    let mut book = L3Book::default();
    for (channel, interval) in [("l3", None), ("bbo", None), ("candles", Some("1s"))] {
        let mut request = json!({ "op": "subscribe", "channel": channel, "symbol": "BTC-USD" });
        if let Some(interval) = interval {
            request["interval"] = json!(interval);
        }
        send(&mut socket, request);
        let answer = next(&mut socket);
        assert_eq!(answer["type"], "subscribed", "{answer}");
        let first = next(&mut socket);
        assert_eq!(
            (first["channel"].as_str(), first["type"].as_str()),
            (Some(channel), Some("snapshot")),
            "{first}"
        );
        assert_eq!(first["seq"], 0, "{first}");
        if channel == "l3" {
            assert_eq!(first["asks"].as_array().unwrap().len(), 1, "{first}");
            book.apply(&first);
        }
    }
    // Trading: rests, trades, an amend that keeps its place, one that loses it, a cancel.
    order(&seller, "sell", "102", "2", "s2");
    order(&seller, "sell", "102", "1", "s3");
    order(&buyer, "buy", "99", "1", "b1");
    order(&buyer, "buy", "101.5", "1.5", "b2"); // takes "early", rests 0.5
    assert_eq!(seller.patch("/v1/orders?client_order_id=s2", r#"{"qty":"1.5"}"#).0, 200);
    assert_eq!(seller.patch("/v1/orders?client_order_id=s3", r#"{"price":"103"}"#).0, 200);
    assert_eq!(buyer.delete("/v1/orders?client_order_id=b1").0, 200);
    let (expected_seq, bids, asks) = l3_sides(&server);

    let mut seqs: std::collections::HashMap<String, u64> = std::collections::HashMap::new();
    let (mut last_bbo, mut candle, mut engine_seq) = (Value::Null, Value::Null, 0);
    let deadline = Instant::now() + Duration::from_secs(10);
    while engine_seq < expected_seq || last_bbo.is_null() || candle.is_null() {
        assert!(Instant::now() < deadline, "updates missing");
        let message = next(&mut socket);
        let channel =
            message["channel"].as_str().unwrap_or_else(|| panic!("{message}")).to_string();
        let seq = message["seq"].as_u64().unwrap();
        let previous = seqs.insert(channel.clone(), seq).unwrap_or(0);
        assert_eq!(seq, previous + 1, "{channel} numbers its messages one by one: {message}");
        match channel.as_str() {
            "l3" => {
                engine_seq = message["engine_seq"].as_u64().unwrap();
                book.apply(&message);
            }
            "bbo" => last_bbo = message.clone(),
            "candles" => candle = message.clone(),
            other => panic!("a message of {other}"),
        }
    }
    // The snapshot and the updates after it are the engine's book.
    assert_eq!(book.sides(), (bids.clone(), asks.clone()));
    // So is a late subscriber's snapshot.
    let mut late_socket = connect(server.address);
    send(&mut late_socket, json!({ "op": "subscribe", "channel": "l3", "symbol": "BTC-USD" }));
    assert_eq!(next(&mut late_socket)["type"], "subscribed");
    let snapshot = next(&mut late_socket);
    assert_eq!(snapshot["seq"], seqs["l3"], "{snapshot}");
    let mut late = L3Book::default();
    late.apply(&snapshot);
    assert_eq!(late.sides(), (bids.clone(), asks.clone()));
    // The best bid and offer as the book has them.
    assert_eq!(last_bbo["bid"][0].as_str().unwrap().parse::<f64>().unwrap(), bids[0].1);
    assert_eq!(last_bbo["ask"][0].as_str().unwrap().parse::<f64>().unwrap(), asks[0].1);
    // The candle counts the trade: 1 BTC at 101.
    assert_eq!(candle["interval"], "1s");
    assert_eq!(
        (candle["data"][4].as_str(), candle["data"][5].as_str()),
        (Some("101"), Some("1")),
        "{candle}"
    );
    // A bad interval: a clear error.
    send(
        &mut socket,
        json!({ "op": "subscribe", "channel": "candles", "symbol": "BTC-USD", "interval": "7m" }),
    );
    let error = until(&mut socket, |message| message["type"] == "error");
    assert_eq!(error["code"], "malformed", "{error}");
}

/// With the multicast feed off (`--no-marketdata`), the channels made from the feed's
/// books (`bbo`, `l3`) are refused with `feed_off`, and `candles`, the candle
/// service's, is served as with the feed on: the current candle, then each update.
#[test]
fn without_the_multicast_feed_bbo_and_l3_are_off_and_candles_still_follow_the_trades() {
    let directory = tempfile::tempdir().unwrap();
    let mut config = support::config(directory.path());
    config.marketdata.enabled = false;
    let server = TestServer::start_with(config, false);
    assert!(server.server.as_ref().unwrap().notes.market_data.is_none(), "the feed is off");
    let (seller, buyer) = server.seller_and_buyer("10", "100000");
    let mut socket = connect(server.address);
    for channel in ["bbo", "l3"] {
        send(&mut socket, json!({ "op": "subscribe", "channel": channel, "symbol": "BTC-USD" }));
        let refused = next(&mut socket);
        assert_eq!((&refused["type"], &refused["code"]), (&json!("error"), &json!("feed_off")));
    }
    send(
        &mut socket,
        json!({ "op": "subscribe", "channel": "candles", "symbol": "BTC-USD", "interval": "1m" }),
    );
    assert_eq!(next(&mut socket)["type"], "subscribed");
    let snapshot = next(&mut socket);
    assert_eq!(
        (&snapshot["channel"], &snapshot["type"], &snapshot["seq"], &snapshot["data"]),
        (&json!("candles"), &json!("snapshot"), &json!(0), &Value::Null),
        "no trade yet: {snapshot}"
    );
    order(&seller, "sell", "101", "1", "s1");
    order(&buyer, "buy", "101", "0.25", "b1");
    let update = until(&mut socket, |message| message["channel"] == "candles");
    assert_eq!((&update["seq"], &update["interval"]), (&json!(1), &json!("1m")), "{update}");
    assert_eq!(
        (update["data"][4].as_str(), update["data"][5].as_str(), update["data"][6].as_u64()),
        (Some("101"), Some("0.25"), Some(1)),
        "{update}"
    );
}

#[test]
fn futures_orders_carry_an_offset_and_the_positions_channel_follows_the_mark() {
    let directory = tempfile::tempdir().unwrap();
    let server = TestServer::start(directory.path(), false);
    let created = server.admin.post("/v1/admin/assets", r#"{"asset":"CNY","decimals":2}"#);
    assert_eq!(created.0, 201, "{}", created.1);
    let declared = server.admin.post(
        "/v1/admin/futures",
        r#"{"symbol":"SHFE.cu2501","settle":"CNY","tick":"10","lot":"1","min_qty":"1","max_qty":"100",
            "multiplier":"5","margin":"25000","maker_fee":"0","taker_fee":"0","market_band_bps":500,
            "close_today":true}"#,
    );
    assert_eq!(declared.0, 201, "{}", declared.1);
    let alice = server.trader("alice", &[("CNY", "100000")]);
    let bob = server.trader("bob", &[("CNY", "100000")]);
    let mut socket = connect(server.address);
    login(&mut socket, &alice);
    send(&mut socket, json!({ "op": "subscribe", "channel": "positions" }));
    assert_eq!(next(&mut socket)["type"], "subscribed");
    let first = until(&mut socket, |m| m["channel"] == "positions");
    assert_eq!(first["data"]["accounts"]["CNY"]["balance"], "100000");

    let future = |req_id: u64, side: &str, price: &str, offset: &str, id: &str| {
        json!({ "op": "order", "req_id": req_id, "symbol": "SHFE.cu2501", "side": side, "type": "limit",
                "price": price, "qty": "1", "time_in_force": "gfd", "offset": offset,
                "client_order_id": id })
    };
    // The positions channel may push between a request and its answer: read past it.
    let mut answer = |request: Value| {
        send(&mut socket, request);
        until(&mut socket, |m| m.get("op").is_some())
    };
    let placed = answer(future(1, "buy", "50000", "open", "a1"));
    assert_eq!(placed["order"]["status"], "open", "{placed}");
    let refused = answer(future(2, "sell", "50000", "close", "a2"));
    assert_eq!(refused["code"], "insufficient_position", "{refused}");
    let (status, taken) = bob.post(
        "/v1/orders",
        r#"{"symbol":"SHFE.cu2501","side":"sell","type":"limit","price":"50000","qty":"1","offset":"open"}"#,
    );
    assert_eq!(status, 200, "{taken}");
    let update = until(&mut socket, |m| {
        m["channel"] == "positions"
            && m["data"]["positions"]["SHFE.cu2501"]["volume_long_today"] == "1"
    });
    assert_eq!(update["data"]["accounts"]["CNY"]["margin"], "25000");
    // Another trade moves the mark: alice's view is sent again.
    let carol = server.trader("carol", &[("CNY", "100000")]);
    for (trader, side) in [(&carol, "buy"), (&bob, "sell")] {
        let (status, body) = trader.post(
            "/v1/orders",
            &format!(
                r#"{{"symbol":"SHFE.cu2501","side":"{side}","type":"limit","price":"50100","qty":"1"}}"#
            ),
        );
        assert_eq!(status, 200, "{body}");
    }
    let moved = until(&mut socket, |m| {
        m["channel"] == "positions"
            && m["data"]["positions"]["SHFE.cu2501"]["last_price"] == "50100"
    });
    assert_eq!(moved["data"]["positions"]["SHFE.cu2501"]["position_profit"], "500");
    // A contract's ticker snapshot has its open interest (alice's long and carol's).
    let mut watcher = connect(server.address);
    let ticker = subscribe_and_read(&mut watcher, "ticker", "SHFE.cu2501");
    assert_eq!(ticker["type"], "snapshot", "{ticker}");
    assert_eq!(
        (ticker["data"]["last"].as_str(), ticker["data"]["open_interest"].as_str()),
        (Some("50100"), Some("2")),
        "{ticker}"
    );
}

#[test]
fn a_key_has_at_most_its_connections_logged_in_at_once() {
    let directory = tempfile::tempdir().unwrap();
    let mut config = support::config(directory.path());
    config.limits.connections_per_key = 2;
    let server = TestServer::start_with(config, false);
    let trader = server.trader("alice", &[]);
    let mut first = connect(server.address);
    login(&mut first, &trader);
    let mut second = connect(server.address);
    std::thread::sleep(Duration::from_millis(2)); // (another timestamp: not a replay)
    login(&mut second, &trader);
    let mut third = connect(server.address);
    std::thread::sleep(Duration::from_millis(2));
    let timestamp = support::now_ms().to_string();
    let signature = sign(&trader.secret, format!("{timestamp}\nGET\n/v1/ws\n").as_bytes());
    send(
        &mut third,
        json!({ "op": "login", "key": trader.key, "timestamp": timestamp, "signature": signature }),
    );
    let refused = next(&mut third);
    assert_eq!(refused["code"], "too_many_connections", "{refused}");
    // The refused connection stays open, not logged in: once a place is free, it logs in.
    drop(first);
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        std::thread::sleep(Duration::from_millis(20));
        let timestamp = support::now_ms().to_string();
        let signature = sign(&trader.secret, format!("{timestamp}\nGET\n/v1/ws\n").as_bytes());
        send(
            &mut third,
            json!({ "op": "login", "key": trader.key, "timestamp": timestamp, "signature": signature }),
        );
        let answer = next(&mut third);
        if answer["type"] == "logged_in" {
            break;
        }
        assert_eq!(answer["code"], "too_many_connections", "{answer}");
        assert!(Instant::now() < deadline, "the closed connection's place stays taken");
    }
}
