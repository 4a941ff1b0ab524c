//! The DIFF gateway (`/ws/diff`) through a real demo server, spoken to as tqsdk speaks
//! it: `peek_message` and one `rtn_data` of merge patches each time, applied here to
//! one tree as a client does. Market data (quotes, the instrument query, charts),
//! logging in with the account's password, orders that open and close a position with
//! the same numbers as REST, cancels, and bad input: each answered with a `notify` and
//! the session kept, or a clean disconnect for a client that stops asking.

mod support;

use std::net::TcpStream;
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use support::{Client, TestServer};
use tungstenite::stream::MaybeTlsStream;
use tungstenite::{Message, WebSocket};

const SYMBOL: &str = "SHFE.cu2501";

/// RFC 7386, as a DIFF client applies each patch to its tree.
fn apply(target: &mut Value, patch: &Value) {
    let Value::Object(members) = patch else {
        *target = patch.clone();
        return;
    };
    if !target.is_object() {
        *target = json!({});
    }
    let Value::Object(fields) = target else { return };
    for (name, value) in members {
        if value.is_null() {
            fields.remove(name);
        } else {
            apply(fields.entry(name.clone()).or_insert(Value::Null), value);
        }
    }
}

struct Diff {
    socket: WebSocket<MaybeTlsStream<TcpStream>>,
    tree: Value,
}

impl Diff {
    fn connect(server: &TestServer) -> Diff {
        let url = format!("ws://{}/ws/diff", server.address);
        let (socket, _) = tungstenite::connect(url).unwrap();
        if let MaybeTlsStream::Plain(stream) = socket.get_ref() {
            stream.set_read_timeout(Some(Duration::from_millis(500))).unwrap();
        }
        Diff { socket, tree: json!({}) }
    }

    fn send(&mut self, pack: Value) {
        self.socket.send(Message::text(pack.to_string())).unwrap();
    }

    /// One `peek_message` and its `rtn_data`, applied to the tree (nothing when none
    /// comes within the read timeout: the peek then stays open at the server).
    fn peek(&mut self) -> Vec<Value> {
        self.send(json!({ "aid": "peek_message" }));
        self.read_answer()
    }

    fn read_answer(&mut self) -> Vec<Value> {
        loop {
            let message = match self.socket.read() {
                Ok(message) => message,
                Err(tungstenite::Error::Io(error))
                    if matches!(
                        error.kind(),
                        std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                    ) =>
                {
                    return Vec::new()
                }
                Err(error) => panic!("the session failed: {error}"),
            };
            match message {
                Message::Text(text) => {
                    let pack: Value = serde_json::from_str(text.as_str()).unwrap();
                    assert_eq!(pack["aid"], "rtn_data", "{pack}");
                    let data = pack["data"].as_array().unwrap().clone();
                    for patch in &data {
                        apply(&mut self.tree, patch);
                    }
                    return data;
                }
                Message::Close(frame) => panic!("closed: {frame:?}"),
                _ => {}
            }
        }
    }

    /// Peeks until `holds` is true of the tree (10 s at most).
    fn until(&mut self, what: &str, holds: impl Fn(&Value) -> bool) -> Value {
        let deadline = Instant::now() + Duration::from_secs(10);
        let mut peeked = false;
        while !holds(&self.tree) {
            assert!(Instant::now() < deadline, "never: {what}; the tree: {}", self.tree);
            // One peek at a time: an unanswered one stays open until there is news.
            if peeked {
                peeked = self.read_answer().is_empty();
            } else {
                peeked = self.peek().is_empty();
            }
        }
        self.tree.clone()
    }

    /// The notices of level ERROR seen so far, by code.
    fn errors(&self) -> Vec<String> {
        self.tree["notify"]
            .as_object()
            .into_iter()
            .flatten()
            .filter(|(_, notice)| notice["level"] == "ERROR")
            .map(|(_, notice)| notice["code"].as_str().unwrap_or("").to_string())
            .collect()
    }

    fn login(&mut self, user: &str, password: &str) {
        self.send(
            json!({ "aid": "req_login", "bid": "bourse", "user_name": user, "password": password }),
        );
        self.send(json!({ "aid": "confirm_settlement" }));
    }
}

fn demo() -> (tempfile::TempDir, TestServer) {
    let directory = tempfile::tempdir().unwrap();
    let server = TestServer::start(directory.path(), true);
    (directory, server)
}

fn alice(server: &TestServer) -> &Client {
    &server.demo[0]
}

fn number(value: &Value) -> f64 {
    value
        .as_f64()
        .unwrap_or_else(|| value.as_str().and_then(|text| text.parse().ok()).unwrap_or(f64::NAN))
}

#[test]
fn quotes_the_instrument_query_and_charts_reach_a_client_that_peeks() {
    let (_directory, server) = demo();
    let mut diff = Diff::connect(&server);
    let first = diff.peek();
    assert!(first.iter().any(|patch| patch["mdhis_more_data"] == false), "{first:?}");

    diff.send(json!({ "aid": "subscribe_quote", "ins_list": SYMBOL }));
    let tree = diff.until("the quote", |tree| tree["quotes"][SYMBOL]["ask_price1"].is_number());
    let quote = &tree["quotes"][SYMBOL];
    assert_eq!(tree["ins_list"], SYMBOL);
    assert_eq!(quote["price_tick"], 10.0);
    assert_eq!(quote["volume_multiple"], 5.0);
    assert_eq!(quote["exchange_id"], "SHFE");
    assert_eq!(quote["ins_class"], "FUTURE");
    let (bid, ask) = (number(&quote["bid_price1"]), number(&quote["ask_price1"]));
    assert!(bid < ask && (74_900.0..=75_100.0).contains(&bid), "{quote}");
    assert!(quote["bid_volume1"].as_i64().unwrap() > 0);

    let query = r#"query ($instrument_id: [String]) { multi_symbol_info(instrument_id: $instrument_id) { __typename ...on basic { instrument_id exchange_id class price_tick price_decs } ...on future { volume_multiple } } }"#;
    diff.send(json!({
        "aid": "ins_query", "query_id": "PYSDK_quote_1", "query": query,
        "variables": { "instrument_id": [SYMBOL] },
    }));
    let tree = diff.until("the query's answer", |tree| {
        tree["symbols"]["PYSDK_quote_1"]["result"]["multi_symbol_info"].is_array()
    });
    let found = &tree["symbols"]["PYSDK_quote_1"]["result"]["multi_symbol_info"];
    assert_eq!(found.as_array().unwrap().len(), 1, "{found}");
    assert_eq!(found[0]["instrument_id"], SYMBOL);
    assert_eq!(number(&found[0]["price_tick"]), 10.0);
    assert_eq!(number(&found[0]["volume_multiple"]), 5.0);

    diff.send(json!({
        "aid": "set_chart", "chart_id": "PYSDK_realtime_1", "ins_list": SYMBOL,
        "duration": 60_000_000_000u64, "view_width": 100,
    }));
    let tree = diff.until("the chart", |tree| tree["charts"]["PYSDK_realtime_1"]["ready"] == true);
    assert_eq!(tree["charts"]["PYSDK_realtime_1"]["state"]["ins_list"], SYMBOL);
}

#[test]
fn a_logged_in_client_opens_and_closes_a_position_with_the_numbers_rest_shows() {
    let (_directory, server) = demo();
    let mut diff = Diff::connect(&server);
    diff.login("alice", "wrong password");
    diff.until("the refusal", |tree| tree["notify"].is_object());
    assert!(diff.errors().contains(&"invalid_credentials".to_string()), "{}", diff.tree);
    assert!(diff.tree["trade"]["alice"].is_null(), "{}", diff.tree);

    diff.login("alice", "alice-demo-password");
    diff.until("the trading tree", |tree| tree["trade"]["alice"]["trade_more_data"] == false);
    diff.send(json!({ "aid": "subscribe_quote", "ins_list": SYMBOL }));
    let tree = diff.until("the quote", |tree| tree["quotes"][SYMBOL]["ask_price1"].is_number());
    let ask = number(&tree["quotes"][SYMBOL]["ask_price1"]);

    diff.send(json!({
        "aid": "insert_order", "user_id": "alice", "order_id": "PYSDK_insert_0123456789abcdef0123456789abcdef",
        "exchange_id": "SHFE", "instrument_id": "cu2501", "direction": "BUY", "offset": "OPEN",
        "volume": 1, "price_type": "LIMIT", "limit_price": ask, "volume_condition": "ANY",
        "time_condition": "GFD",
    }));
    let tree = diff.until("the fill", |tree| {
        tree["trade"]["alice"]["positions"][SYMBOL]["volume_long_today"] == 1
            && tree["trade"]["alice"]["orders"]["PYSDK_insert_0123456789abcdef0123456789abcdef"]
                ["status"]
                == "FINISHED"
    });
    let trade = &tree["trade"]["alice"];
    assert_eq!(trade["positions"][SYMBOL]["pos_long_today"], 1);
    assert_eq!(trade["trades"].as_object().unwrap().len(), 1, "{trade}");
    let (status, account) = alice(&server).get("/v1/account");
    assert_eq!(status, 200, "{account}");
    let shown = &account["accounts"]["CNY"];
    let tree = diff.until("the account as REST shows it", |tree| {
        let diff_account = &tree["trade"]["alice"]["accounts"]["CNY"];
        ["balance", "margin", "available"]
            .iter()
            .all(|field| number(&diff_account[*field]) == number(&shown[*field]))
    });
    assert!(number(&tree["trade"]["alice"]["accounts"]["CNY"]["margin"]) > 0.0);

    let bid = number(&tree["quotes"][SYMBOL]["bid_price1"]);
    diff.send(json!({
        "aid": "insert_order", "user_id": "alice", "order_id": "close-1", "exchange_id": "SHFE",
        "instrument_id": "cu2501", "direction": "SELL", "offset": "CLOSETODAY", "volume": 1,
        "price_type": "LIMIT", "limit_price": bid, "volume_condition": "ANY", "time_condition": "GFD",
    }));
    let tree = diff.until("the flat position", |tree| {
        let position = &tree["trade"]["alice"]["positions"][SYMBOL];
        position["volume_long"] == 0
            && tree["trade"]["alice"]["orders"]["close-1"]["status"] == "FINISHED"
    });
    // A flat position stays, with no average price (a client keeps the object).
    let flat = &tree["trade"]["alice"]["positions"][SYMBOL];
    assert_eq!(
        (&flat["pos_long_today"], &flat["margin"], &flat["open_price_long"]),
        (&json!(0), &json!(0.0), &json!("-")),
        "{flat}"
    );
    let trades = tree["trade"]["alice"]["trades"].as_object().unwrap();
    assert!(
        trades
            .values()
            .any(|trade| trade["order_id"] == "close-1" && trade["offset"] == "CLOSETODAY"),
        "{trades:?}"
    );

    diff.send(json!({
        "aid": "insert_order", "user_id": "alice", "order_id": "far-1", "exchange_id": "SHFE",
        "instrument_id": "cu2501", "direction": "BUY", "offset": "OPEN", "volume": 2,
        "price_type": "LIMIT", "limit_price": 70000.0, "volume_condition": "ANY", "time_condition": "GFD",
    }));
    diff.until("the resting order", |tree| {
        tree["trade"]["alice"]["orders"]["far-1"]["status"] == "ALIVE"
    });
    diff.send(json!({ "aid": "cancel_order", "user_id": "alice", "order_id": "far-1" }));
    let tree = diff.until("the cancel", |tree| {
        tree["trade"]["alice"]["orders"]["far-1"]["status"] == "FINISHED"
    });
    assert_eq!(tree["trade"]["alice"]["orders"]["far-1"]["volume_left"], 2);
    assert!(diff.errors().iter().all(|code| code == "invalid_credentials"), "{:?}", diff.errors());
}

#[test]
fn bad_input_gets_a_notice_and_the_session_goes_on() {
    let (_directory, server) = demo();
    let mut diff = Diff::connect(&server);
    diff.send(json!({ "aid": "req_login", "bid": "bourse", "user_name": "alice", "password": "alice-demo-password" }));
    diff.until("the login", |tree| tree["trade"]["alice"]["trade_more_data"] == false);
    diff.socket.send(Message::text("{not json")).unwrap();
    diff.send(json!({ "aid": "no_such_thing" }));
    diff.send(json!({ "aid": "subscribe_quote", "ins_list": 42 }));
    let order = |order_id: &str, instrument: &str, offset: &str| {
        json!({
            "aid": "insert_order", "user_id": "alice", "order_id": order_id, "exchange_id": "SHFE",
            "instrument_id": instrument, "direction": "SELL", "offset": offset, "volume": 1,
            "price_type": "LIMIT", "limit_price": 75000.0, "volume_condition": "ANY",
            "time_condition": "GFD",
        })
    };
    diff.send(order("unknown-1", "zz9999", "OPEN"));
    diff.send(order("offset-1", "cu2501", "CLOSE"));
    diff.send(order("offset-2", "cu2501", "SIDEWAYS"));
    diff.send(json!({
        "aid": "insert_order", "user_id": "alice", "order_id": "best-1", "exchange_id": "SHFE",
        "instrument_id": "cu2501", "direction": "BUY", "offset": "OPEN", "volume": 1,
        "price_type": "BEST", "volume_condition": "ANY", "time_condition": "IOC",
    }));
    diff.send(json!({ "aid": "cancel_order", "user_id": "alice", "order_id": "never-placed" }));
    diff.send(json!({ "aid": "insert_order", "user_id": "bob", "order_id": "not-mine", "exchange_id": "SHFE",
        "instrument_id": "cu2501", "direction": "BUY", "offset": "OPEN", "volume": 1,
        "price_type": "LIMIT", "limit_price": 75000.0 }));
    let tree = diff.until("every refusal", |tree| {
        ["unknown-1", "offset-1"]
            .iter()
            .all(|id| tree["trade"]["alice"]["orders"][*id]["status"] == "FINISHED")
            && tree["notify"].as_object().is_some_and(|notices| notices.len() >= 9)
    });
    let errors = diff.errors();
    for code in [
        "malformed",
        "unknown_aid",
        "unknown_symbol",
        "insufficient_position",
        "unsupported",
        "unknown_order",
        "forbidden",
    ] {
        assert!(errors.iter().any(|seen| seen == code), "no {code} among {errors:?}");
    }
    assert_eq!(tree["trade"]["alice"]["orders"]["unknown-1"]["volume_left"], 1);
    assert!(tree["trade"]["alice"]["orders"]["offset-1"]["last_msg"]
        .as_str()
        .unwrap()
        .contains("insufficient_position"));
    // The session still answers.
    diff.send(json!({ "aid": "subscribe_quote", "ins_list": SYMBOL }));
    diff.until("the quote after it all", |tree| tree["quotes"][SYMBOL]["price_tick"] == 10.0);
}

#[test]
fn a_peek_flood_is_answered_once_per_peek_and_a_client_that_never_reads_is_dropped() {
    let (_directory, server) = demo();
    let mut diff = Diff::connect(&server);
    diff.send(json!({ "aid": "subscribe_quote", "ins_list": SYMBOL }));
    for _ in 0..1_000 {
        diff.send(json!({ "aid": "peek_message" }));
    }
    // Each rtn_data answers one peek; with nothing new there is nothing to send.
    let mut answers = 0;
    let deadline = Instant::now() + Duration::from_secs(2);
    if let MaybeTlsStream::Plain(stream) = diff.socket.get_ref() {
        stream.set_read_timeout(Some(Duration::from_millis(300))).unwrap();
    }
    while Instant::now() < deadline {
        match diff.socket.read() {
            Ok(Message::Text(text)) => {
                let pack: Value = serde_json::from_str(text.as_str()).unwrap();
                assert_eq!(pack["aid"], "rtn_data");
                answers += 1;
            }
            Ok(_) => {}
            Err(_) => break,
        }
    }
    assert!((1..=3).contains(&answers), "{answers} answers to 1,000 peeks with little news");

    // A client that asks and never reads: the server stops writing to it in time and
    // lets it go, and serves others meanwhile.
    let url = format!("ws://{}/ws/diff", server.address);
    let (mut silent, _) = tungstenite::connect(url).unwrap();
    // Each answer echoes its query: a long comment makes every answer long.
    let query = json!({
        "aid": "ins_query", "query_id": "q",
        "query": format!("query {{ multi_symbol_info(instrument_id: [\"{SYMBOL}\"]) {{ instrument_id }} }} # {}", "x".repeat(60_000)),
    })
    .to_string();
    let started = Instant::now();
    let mut closed = false;
    while started.elapsed() < Duration::from_secs(60) {
        let sent = silent
            .send(Message::text(query.clone()))
            .and_then(|_| silent.send(Message::text(r#"{"aid":"peek_message"}"#)));
        if sent.is_err() {
            closed = true;
            break;
        }
    }
    assert!(closed, "the server kept a client that never reads");
    let mut other = Diff::connect(&server);
    other.send(json!({ "aid": "subscribe_quote", "ins_list": SYMBOL }));
    other.until("a quote for another client", |tree| tree["quotes"][SYMBOL]["price_tick"] == 10.0);
}

/// The notices of `code` seen so far.
fn notices(tree: &Value, code: &str) -> usize {
    tree["notify"]
        .as_object()
        .into_iter()
        .flatten()
        .filter(|(_, notice)| notice["code"] == code)
        .count()
}

fn demo_with(
    change: impl FnOnce(&mut bourse_server::ServeConfig),
) -> (tempfile::TempDir, TestServer) {
    let directory = tempfile::tempdir().unwrap();
    let mut config = support::config(directory.path());
    change(&mut config);
    let server = TestServer::start_with(config, true);
    (directory, server)
}

#[test]
fn a_diff_session_is_held_to_its_accounts_rate_and_connections() {
    let (_directory, server) = demo_with(|config| {
        config.limits.requests_per_second = 1;
        config.limits.requests_burst = 5;
        config.limits.connections_per_key = 1;
    });
    let mut diff = Diff::connect(&server);
    diff.login("alice", "alice-demo-password");
    diff.until("the login", |tree| tree["trade"]["alice"]["trade_more_data"] == false);
    // Past the rate: each refused with a `notify` saying so, and the session goes on.
    for index in 0..10 {
        diff.send(json!({ "aid": "cancel_order", "user_id": "alice", "order_id": format!("none-{index}") }));
    }
    let tree = diff.until("an answer to every cancel", |tree| {
        notices(tree, "rate_limited") + notices(tree, "unknown_order") >= 10
    });
    let (limited, unknown) = (notices(&tree, "rate_limited"), notices(&tree, "unknown_order"));
    assert!(
        limited >= 4 && unknown >= 4,
        "{limited} limited, {unknown} unknown: {}",
        tree["notify"]
    );
    let level = tree["notify"]
        .as_object()
        .into_iter()
        .flatten()
        .find(|(_, notice)| notice["code"] == "rate_limited")
        .map(|(_, notice)| notice["level"].clone());
    assert_eq!(level, Some(json!("WARNING")), "wait and try again: not an error of the request");
    // Past the account's connections: a second session's login is refused; the first
    // goes on.
    let mut second = Diff::connect(&server);
    second.login("alice", "alice-demo-password");
    let refused = second.until("the refusal", |tree| notices(tree, "too_many_connections") == 1);
    assert!(refused["trade"]["alice"].is_null(), "not logged in: {}", refused["trade"]);
    diff.send(json!({ "aid": "subscribe_quote", "ins_list": SYMBOL }));
    diff.until("the quote", |tree| tree["quotes"][SYMBOL]["price_tick"] == 10.0);
}

#[test]
fn a_password_guessed_again_and_again_is_slowed_then_locked_and_the_lock_is_counted() {
    let (_directory, server) = demo_with(|config| {
        config.auth.login_failures_free = 1;
        config.auth.login_failures_lock = 3;
        config.auth.login_lock_s = 60;
    });
    let mut diff = Diff::connect(&server);
    let guess = |diff: &mut Diff, password: &str, code: &str| {
        let seen = notices(&diff.tree, code);
        diff.send(json!({ "aid": "req_login", "bid": "bourse", "user_name": "alice", "password": password }));
        diff.until(code, |tree| notices(tree, code) == seen + 1);
    };
    // The first failure is free; the second locks the account's password logins for a
    // second: a guess within it is refused without being checked.
    guess(&mut diff, "wrong-1", "invalid_credentials");
    guess(&mut diff, "wrong-2", "invalid_credentials");
    guess(&mut diff, "alice-demo-password", "login_locked");
    std::thread::sleep(Duration::from_millis(1_100));
    // The third failure in a row locks them for the configured minute: even the right
    // password is refused, and `/metrics` counts the lock.
    guess(&mut diff, "wrong-3", "invalid_credentials");
    guess(&mut diff, "alice-demo-password", "login_locked");
    let (_, metrics) = support::raw_request(server.address, "GET", "/metrics", &[], b"");
    let metrics = String::from_utf8(metrics).unwrap();
    assert!(metrics.contains("bourse_login_locks_total 1"), "{metrics}");
    // Another account is not locked.
    diff.send(json!({ "aid": "req_login", "bid": "bourse", "user_name": "bob", "password": "bob-demo-password" }));
    diff.until("bob's login", |tree| tree["trade"]["bob"]["trade_more_data"] == false);
}

/// alice buys `qty` lots of the demo contract at up to `price` (immediate or cancel),
/// over REST; the answer's order.
fn alice_buys(server: &TestServer, price: &str, qty: &str, id: &str) -> Value {
    let body = json!({
        "symbol": SYMBOL, "side": "buy", "type": "limit", "price": price, "qty": qty,
        "offset": "open", "time_in_force": "ioc", "client_order_id": id,
    });
    let (status, answer) = alice(server).post("/v1/orders", &body.to_string());
    assert!(status == 200 || status == 201, "{status} {answer}");
    assert_eq!(answer["order"]["status"], "filled", "{answer}");
    answer
}

/// The chart's ticks (`ticks.<symbol>.data`) by id.
fn ticks_of(tree: &Value) -> Vec<(i64, Value)> {
    let mut ticks: Vec<(i64, Value)> = tree["ticks"][SYMBOL]["data"]
        .as_object()
        .into_iter()
        .flatten()
        .map(|(id, tick)| (id.parse().unwrap(), tick.clone()))
        .collect();
    ticks.sort_by_key(|(id, _)| *id);
    ticks
}

#[test]
fn ticks_are_one_per_trade_without_gaps_with_the_days_figures_the_quote_shows() {
    let (_directory, server) = demo();
    // Five trades before the chart: alice takes the best ask five times (the demo's
    // maker offers 2 lots at each of 75,010, 75,020, 75,030, ...), each seen in the
    // quote before the next (so that each is the only trade the feed takes at once,
    // and the open interest after it is its own).
    let mut diff = Diff::connect(&server);
    diff.send(json!({ "aid": "subscribe_quote", "ins_list": SYMBOL }));
    for index in 0..5 {
        alice_buys(&server, "75050", "1", &format!("t{index}"));
        diff.until("the trade in the quote", |tree| {
            tree["quotes"][SYMBOL]["volume"] == index + 1
                && tree["quotes"][SYMBOL]["open_interest"] == index + 1
        });
    }
    diff.send(json!({
        "aid": "set_chart", "chart_id": "PYSDK_realtime_ticks", "ins_list": SYMBOL,
        "duration": 0, "view_width": 20,
    }));
    let tree = diff.until("five ticks and the quote after them", |tree| {
        ticks_of(tree).len() == 5 && tree["quotes"][SYMBOL]["volume"] == 5
    });
    let chart = &tree["charts"]["PYSDK_realtime_ticks"];
    assert_eq!(
        (&chart["ready"], &chart["left_id"], &chart["right_id"]),
        (&json!(true), &json!(0), &json!(4)),
        "{chart}"
    );
    assert_eq!(tree["ticks"][SYMBOL]["last_id"], 4);
    let ticks = ticks_of(&tree);
    assert_eq!(ticks.iter().map(|(id, _)| *id).collect::<Vec<_>>(), [0, 1, 2, 3, 4]);
    let prices = [75_010.0, 75_010.0, 75_020.0, 75_020.0, 75_030.0];
    let mut turnover = 0.0;
    for ((id, tick), price) in ticks.iter().zip(prices) {
        turnover += price * 5.0;
        let lots = id + 1;
        assert_eq!(tick["last_price"], price, "tick {id}: {tick}");
        // The day's cumulative volume and turnover (with the multiplier 5) after it.
        assert_eq!(tick["volume"], lots, "tick {id}: {tick}");
        assert_eq!(tick["amount"], turnover, "tick {id}: {tick}");
        assert_eq!(number(&tick["average"]), turnover / 5.0 / lots as f64, "tick {id}: {tick}");
        assert_eq!(
            (&tick["highest"], &tick["lowest"]),
            (&json!(price), &json!(75_010.0)),
            "{tick}"
        );
        // Each bought lot opened a position on both sides.
        assert_eq!(tick["open_interest"], lots, "tick {id}: {tick}");
        for field in ["bid_price1", "ask_price1", "average", "highest", "lowest", "amount"] {
            assert!(number(&tick[field]).is_finite(), "tick {id}: {field} in {tick}");
        }
        assert!(tick["datetime"].as_u64().is_some_and(|ns| ns > 1_600_000_000_000_000_000));
        assert!(
            tick["bid_volume1"].as_i64().unwrap() > 0 && tick["ask_volume1"].as_i64().unwrap() > 0
        );
    }
    // The last tick's figures are the quote's.
    let (_, last) = &ticks[4];
    let quote = &tree["quotes"][SYMBOL];
    for field in [
        "last_price",
        "volume",
        "amount",
        "average",
        "highest",
        "lowest",
        "open_interest",
        "bid_price1",
        "bid_volume1",
        "ask_price1",
        "ask_volume1",
        "ask_price5",
        "bid_price5",
    ] {
        assert_eq!(last[field], quote[field], "{field}: the tick {last}, the quote {quote}");
    }
    // REST's ticker counts the turnover as DIFF's amount does: with the multiplier.
    let (status, ticker) = alice(&server).get(&format!("/v1/ticker/{SYMBOL}"));
    assert_eq!(status, 200, "{ticker}");
    assert_eq!(number(&ticker["data"]["quote_volume_24h"]), number(&quote["amount"]), "{ticker}");
    // Nothing but the 74,990 bid under the asks left at 75,030 (1 lot) and above.
    assert_eq!(
        (&last["bid_price1"], &last["ask_price1"], &last["ask_volume1"]),
        (&json!(74_990.0), &json!(75_030.0), &json!(1))
    );

    // A sixth trade comes live, as the next id; a chart opened after it shows the same
    // tick from the history.
    alice_buys(&server, "75050", "1", "t5");
    let tree = diff.until("the live tick", |tree| ticks_of(tree).len() == 6);
    assert_eq!(tree["charts"]["PYSDK_realtime_ticks"]["right_id"], 5);
    let live = ticks_of(&tree)[5].1.clone();
    assert_eq!(
        (&live["volume"], &live["open_interest"], &live["last_price"]),
        (&json!(6), &json!(6), &json!(75_030.0))
    );
    let mut other = Diff::connect(&server);
    other.send(json!({
        "aid": "set_chart", "chart_id": "PYSDK_realtime_other", "ins_list": SYMBOL,
        "duration": 0, "view_width": 3,
    }));
    let tree =
        other.until("the history", |tree| tree["charts"]["PYSDK_realtime_other"]["ready"] == true);
    let history = ticks_of(&tree);
    assert_eq!(history.iter().map(|(id, _)| *id).collect::<Vec<_>>(), [3, 4, 5]);
    assert_eq!(history[2].1, live);
    assert_eq!(history[0].1, ticks[3].1);
}

#[test]
fn the_previous_open_interest_is_none_before_a_settlement_and_the_one_at_it_after() {
    let (_directory, server) = demo();
    // A trade before anyone subscribes: the venue started with no open interest.
    alice_buys(&server, "75010", "1", "before");
    let mut diff = Diff::connect(&server);
    diff.send(json!({ "aid": "subscribe_quote", "ins_list": SYMBOL }));
    let tree = diff
        .until("the quote after the trade", |tree| tree["quotes"][SYMBOL]["open_interest"] == 1);
    let quote = &tree["quotes"][SYMBOL];
    assert_eq!((&quote["pre_open_interest"], &quote["volume"]), (&json!(0), &json!(1)), "{quote}");
    alice_buys(&server, "75020", "2", "more");
    let tree = diff.until("three lots open", |tree| tree["quotes"][SYMBOL]["open_interest"] == 3);
    assert_eq!(tree["quotes"][SYMBOL]["pre_open_interest"], 0);

    // The day's settlement: the open interest then (3) is the next day's previous one.
    let (status, settled) =
        server.admin.post(&format!("/v1/admin/futures/{SYMBOL}/settle"), r#"{"price":"75000"}"#);
    assert_eq!(status, 200, "{settled}");
    let tree =
        diff.until("the new day", |tree| tree["quotes"][SYMBOL]["pre_settlement"] == 75_000.0);
    let quote = &tree["quotes"][SYMBOL];
    assert_eq!(
        (&quote["pre_open_interest"], &quote["open_interest"], &quote["volume"]),
        (&json!(3), &json!(3), &json!(0)),
        "{quote}"
    );
    // It stays while the day trades.
    alice_buys(&server, "75030", "1", "after");
    let tree = diff.until("the next day's trade", |tree| tree["quotes"][SYMBOL]["volume"] == 1);
    let quote = &tree["quotes"][SYMBOL];
    assert_eq!(
        (&quote["pre_open_interest"], &quote["open_interest"]),
        (&json!(3), &json!(4)),
        "{quote}"
    );
    // The instrument query says the same.
    let query = r#"query ($instrument_id: [String]) { multi_symbol_info(instrument_id: $instrument_id) { ...on future { pre_open_interest } } }"#;
    diff.send(json!({
        "aid": "ins_query", "query_id": "PYSDK_quote_pre", "query": query,
        "variables": { "instrument_id": [SYMBOL] },
    }));
    let tree = diff.until("the query's answer", |tree| {
        tree["symbols"]["PYSDK_quote_pre"]["result"]["multi_symbol_info"].is_array()
    });
    let found = &tree["symbols"]["PYSDK_quote_pre"]["result"]["multi_symbol_info"][0];
    assert_eq!(number(&found["pre_open_interest"]), 3.0, "{found}");
}

/// The klines (`klines.<symbol>.<duration>.data`): each kline's volume and close by id.
fn klines_of(tree: &Value, duration_ns: u64) -> Vec<(i64, f64, f64)> {
    let mut klines: Vec<(i64, f64, f64)> = tree["klines"][SYMBOL][duration_ns.to_string()]["data"]
        .as_object()
        .into_iter()
        .flatten()
        .map(|(id, kline)| (id.parse().unwrap(), number(&kline["volume"]), number(&kline["close"])))
        .collect();
    klines.sort_by_key(|(id, _, _)| *id);
    klines
}

/// With the multicast feed off (`--no-marketdata`), charts still show klines (tqsdk's
/// `get_kline_serial`): a chart set before the trades follows them as they come, and
/// one set after them reads them from the candle service's history.
#[test]
fn klines_follow_the_trades_with_the_multicast_feed_off() {
    let (_directory, server) = demo_with(|config| config.marketdata.enabled = false);
    assert!(server.server.as_ref().unwrap().notes.market_data.is_none(), "the feed is off");
    let mut diff = Diff::connect(&server);
    const MINUTE: u64 = 60_000_000_000;
    const SECOND: u64 = 1_000_000_000;
    diff.send(json!({
        "aid": "set_chart", "chart_id": "before", "ins_list": SYMBOL,
        "duration": MINUTE, "view_width": 10,
    }));
    diff.until("the chart", |tree| tree["charts"]["before"]["ready"] == true);
    // Two lots from the demo's maker at 75,010 (it offers 2 lots a level).
    alice_buys(&server, "75010", "1", "k1");
    alice_buys(&server, "75010", "1", "k2");
    let volume = |klines: &[(i64, f64, f64)]| -> f64 { klines.iter().map(|(_, v, _)| v).sum() };
    let tree = diff.until("both trades in the followed klines", |tree| {
        volume(&klines_of(tree, MINUTE)) == 2.0
    });
    let klines = klines_of(&tree, MINUTE);
    assert_eq!(klines.last().unwrap().2, 75_010.0, "{klines:?}");
    let chart = &tree["charts"]["before"];
    assert_eq!(chart["right_id"], json!(klines.last().unwrap().0), "{chart}");
    diff.send(json!({
        "aid": "set_chart", "chart_id": "after", "ins_list": SYMBOL,
        "duration": SECOND, "view_width": 100,
    }));
    let tree = diff.until("both trades in the history's klines", |tree| {
        tree["charts"]["after"]["ready"] == true && volume(&klines_of(tree, SECOND)) == 2.0
    });
    let klines = klines_of(&tree, SECOND);
    assert_eq!(klines.last().unwrap().2, 75_010.0, "{klines:?}");
    // Ids run on without gaps (empty seconds included).
    let ids: Vec<i64> = klines.iter().map(|(id, _, _)| *id).collect();
    assert_eq!(ids, (ids[0]..ids[0] + ids.len() as i64).collect::<Vec<_>>(), "{klines:?}");
}
