//! The WebSocket gateway over real sockets: public channels (depth snapshot then deltas,
//! trades, ticker), login and private channels, sequence numbers, and a client that
//! cannot keep up being disconnected with a reason.

mod support;

use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

use bourse_server::keys::sign;
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
