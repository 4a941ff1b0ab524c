//! The binary order-entry protocol over real sockets: login, pipelined requests,
//! fills to both sides, learning outcomes after a reconnect, and bad bytes.

mod support;

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

use bourse_core::RejectReason;
use bourse_protocol::binary::{code, reject_code, CLIENT_ORDER_ID_BYTES, SYMBOL_BYTES};
use bourse_protocol::signing::sign;
use support::{Client, TestServer};

const LOGIN: u8 = 0x01;
const NEW_ORDER: u8 = 0x02;
const CANCEL: u8 = 0x03;
const ORDER_STATUS: u8 = 0x05;
const HEARTBEAT: u8 = 0x06;
const LOGGED_IN: u8 = 0x81;
const ACCEPTED: u8 = 0x82;
const REJECTED: u8 = 0x83;
const FILL: u8 = 0x84;
const ORDER_UPDATE: u8 = 0x85;
const ORDER_STATE: u8 = 0x86;
const SERVER_HEARTBEAT: u8 = 0x87;
const GOODBYE: u8 = 0x8F;

/// Where fields sit in the bodies these tests read (`docs/protocol-binary.md`), after
/// the client order id's field, whose width is the id rule's.
const ID: usize = CLIENT_ORDER_ID_BYTES;
/// Accepted: request id, order id, seq, time, then the id.
const ACCEPTED_ID_AT: usize = 32;
/// Fill: the id, trade seq (8), trade index (4), side, then liquidity and the scales.
const FILL_LIQUIDITY_AT: usize = ID + 13;
const FILL_PRICE_SCALE_AT: usize = ID + 14;
const FILL_QTY_SCALE_AT: usize = ID + 15;
/// ... the fee scale and 3 reserved bytes, then the price and quantity mantissas.
const FILL_PRICE_AT: usize = ID + 20;
const FILL_QTY_AT: usize = ID + 28;
/// OrderState: request id, order id, the id, then the status.
const STATE_ID_AT: usize = 16;
const STATE_STATUS_AT: usize = STATE_ID_AT + ID;

fn padded(text: &str, width: usize) -> Vec<u8> {
    let mut bytes = text.as_bytes().to_vec();
    bytes.resize(width, 0);
    bytes
}

fn frame(kind: u8, body: &[u8]) -> Vec<u8> {
    let mut frame = ((body.len() + 1) as u16).to_le_bytes().to_vec();
    frame.push(kind);
    frame.extend_from_slice(body);
    frame
}

struct Frame {
    kind: u8,
    body: Vec<u8>,
}

impl Frame {
    fn u64(&self, at: usize) -> u64 {
        u64::from_le_bytes(self.body[at..at + 8].try_into().unwrap())
    }
    fn i64(&self, at: usize) -> i64 {
        self.u64(at) as i64
    }
    fn u16(&self, at: usize) -> u16 {
        u16::from_le_bytes(self.body[at..at + 2].try_into().unwrap())
    }
    fn text(&self, at: usize, width: usize) -> String {
        let field = &self.body[at..at + width];
        let end = field.iter().position(|b| *b == 0).unwrap_or(width);
        String::from_utf8_lossy(&field[..end]).into_owned()
    }
}

struct TcpClient {
    stream: TcpStream,
}

impl TcpClient {
    fn connect(address: SocketAddr) -> TcpClient {
        let stream = TcpStream::connect(address).unwrap();
        stream.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        TcpClient { stream }
    }

    fn send(&mut self, kind: u8, body: &[u8]) {
        self.stream.write_all(&frame(kind, body)).unwrap();
    }

    fn read(&mut self) -> Option<Frame> {
        let mut length = [0u8; 2];
        self.stream.read_exact(&mut length).ok()?;
        let mut rest = vec![0u8; u16::from_le_bytes(length) as usize];
        self.stream.read_exact(&mut rest).ok()?;
        Some(Frame { kind: rest[0], body: rest[1..].to_vec() })
    }

    fn login_body(client: &Client, timestamp_ms: u64) -> Vec<u8> {
        let message = format!("{timestamp_ms}\nGET\n/v1/tcp\n");
        let signature = hex::decode(sign(&client.secret, message.as_bytes())).unwrap();
        let mut body = padded(&client.key, 32);
        body.extend_from_slice(&timestamp_ms.to_le_bytes());
        body.extend_from_slice(&signature);
        body
    }

    fn login(&mut self, client: &Client) {
        // A login signed in the same millisecond as another is a replay: wait one out.
        std::thread::sleep(Duration::from_millis(2));
        self.send(LOGIN, &TcpClient::login_body(client, support::now_ms()));
        let answer = self.read().unwrap();
        assert_eq!(answer.kind, LOGGED_IN);
    }

    #[allow(clippy::too_many_arguments)]
    fn new_order(
        &mut self,
        request_id: u64,
        id: &str,
        side: u8,
        price: i64,
        price_scale: u8,
        qty: i64,
        qty_scale: u8,
    ) {
        let mut body = request_id.to_le_bytes().to_vec();
        body.extend(padded(id, ID));
        body.extend(padded("BTC-USD", SYMBOL_BYTES));
        body.extend([side, 1, 1, 0, 1, price_scale, qty_scale, 0]);
        body.extend(price.to_le_bytes());
        body.extend(qty.to_le_bytes());
        self.send(NEW_ORDER, &body);
    }

    fn by_id(&mut self, kind: u8, request_id: u64, id: &str) {
        let mut body = request_id.to_le_bytes().to_vec();
        body.extend(padded(id, ID));
        self.send(kind, &body);
    }

    /// Reads frames until one of `kind` comes (collecting the others).
    fn until(&mut self, kind: u8, seen: &mut Vec<Frame>) -> Frame {
        loop {
            let frame = self.read().expect("a frame before the connection closed");
            if frame.kind == kind {
                return frame;
            }
            seen.push(frame);
        }
    }
}

#[test]
fn pipelined_orders_are_all_answered_and_both_sides_hear_of_their_fills() {
    let directory = tempfile::tempdir().unwrap();
    let server = TestServer::start(directory.path(), false);
    let (seller, buyer) = server.seller_and_buyer("10", "1000000");
    let mut maker = TcpClient::connect(server.tcp_address);
    maker.login(&seller);
    let mut taker = TcpClient::connect(server.tcp_address);
    taker.login(&buyer);

    // 40 sells of 0.01 at 100.00 .. 100.39, sent back to back without waiting.
    for index in 0..40u64 {
        maker.new_order(index, &format!("s{index}"), 2, 10_000 + index as i64, 2, 1, 2);
    }
    let mut answered = Vec::new();
    let mut others = Vec::new();
    while answered.len() < 40 {
        let frame = maker.read().unwrap();
        match frame.kind {
            ACCEPTED => answered.push(frame.u64(0)),
            ORDER_UPDATE | FILL => others.push(frame),
            other => panic!("unexpected frame 0x{other:02x}"),
        }
    }
    answered.sort();
    assert_eq!(answered, (0..40).collect::<Vec<_>>(), "every request answered, by its id");

    // One buy takes the ten best: the taker gets ten fills and a filled update.
    taker.new_order(1, "sweep", 1, 10_009, 2, 10, 2);
    let mut seen = Vec::new();
    let accepted = taker.until(ACCEPTED, &mut seen);
    assert_eq!(accepted.text(ACCEPTED_ID_AT, ID), "sweep");
    let mut fills = seen.iter().filter(|frame| frame.kind == FILL).count();
    while fills < 10 {
        let frame = taker.read().unwrap();
        if frame.kind == FILL {
            assert_eq!(frame.text(0, ID), "sweep");
            assert_eq!(frame.body[FILL_LIQUIDITY_AT], 2, "the taker's liquidity");
            fills += 1;
        }
    }
    // The maker hears of its ten fills too, with its own client order ids.
    let mut maker_fills = others.iter().filter(|frame| frame.kind == FILL).count();
    let mut ids = Vec::new();
    while maker_fills < 10 {
        let frame = maker.read().unwrap();
        if frame.kind == FILL {
            assert_eq!(frame.body[FILL_LIQUIDITY_AT], 1, "the maker's liquidity");
            assert_eq!((frame.i64(FILL_QTY_AT), frame.body[FILL_QTY_SCALE_AT]), (1, 2), "qty 0.01");
            let cents = frame.i64(FILL_PRICE_AT)
                * 10i64.pow(2 - u32::from(frame.body[FILL_PRICE_SCALE_AT]));
            assert!((10_000..10_010).contains(&cents), "one of the ten best prices: {cents}");
            ids.push(frame.text(0, ID));
            maker_fills += 1;
        }
    }
    ids.sort();
    let mut expected: Vec<String> = (0..10).map(|index| format!("s{index}")).collect();
    expected.sort();
    assert_eq!(ids, expected);
}

#[test]
fn after_a_reconnect_a_client_learns_every_outcome_by_client_order_id() {
    let directory = tempfile::tempdir().unwrap();
    let server = TestServer::start(directory.path(), false);
    server.declare_btc_usd();
    let buyer = server.trader("buyer", &[("USD", "1000")]);
    let mut first = TcpClient::connect(server.tcp_address);
    first.login(&buyer);
    first.new_order(1, "lost-ack", 1, 5_000, 2, 1, 0);
    first.new_order(2, "too-big", 1, 5_000, 2, 1_000, 0);
    drop(first); // gone before reading any answer

    let mut second = TcpClient::connect(server.tcp_address);
    second.login(&buyer);
    let mut seen = Vec::new();
    // The first connection's frames may still be on their way into the engine.
    let state = (0..100)
        .find_map(|attempt| {
            second.by_id(ORDER_STATUS, 7, "lost-ack");
            let answer = second.read().unwrap();
            if answer.kind == ORDER_STATE {
                return Some(answer);
            }
            assert_eq!(answer.kind, REJECTED, "attempt {attempt}");
            std::thread::sleep(Duration::from_millis(20));
            None
        })
        .expect("the order is known");
    assert_eq!(
        (state.u64(0), state.text(STATE_ID_AT, ID).as_str(), state.body[STATE_STATUS_AT]),
        (7, "lost-ack", 1),
        "open"
    );
    second.by_id(ORDER_STATUS, 8, "too-big");
    let rejected = second.until(REJECTED, &mut seen);
    assert_eq!((rejected.u64(0), rejected.u16(8)), (8, reject_code(RejectReason::UnknownOrder)));
    // Sending it again never makes a second order: duplicate_id, then its state.
    second.new_order(9, "lost-ack", 1, 5_000, 2, 1, 0);
    let rejected = second.until(REJECTED, &mut seen);
    assert_eq!((rejected.u64(0), rejected.u16(8)), (9, reject_code(RejectReason::DuplicateId)));
    let state = second.until(ORDER_STATE, &mut seen);
    assert_eq!(state.u64(0), 9);
    // Cancel it, then its state says canceled.
    second.by_id(CANCEL, 10, "lost-ack");
    assert_eq!(second.until(ACCEPTED, &mut seen).u64(0), 10);
    second.by_id(ORDER_STATUS, 11, "lost-ack");
    let state = second.until(ORDER_STATE, &mut seen);
    assert_eq!(state.body[STATE_STATUS_AT], 3, "canceled");
    let (_, open) = buyer.get("/v1/orders");
    assert_eq!(open["orders"].as_array().unwrap().len(), 0);
}

#[test]
fn ids_as_long_as_the_rule_allows_travel_whole_both_ways() {
    let directory = tempfile::tempdir().unwrap();
    let server = TestServer::start(directory.path(), false);
    server.declare_btc_usd();
    let buyer = server.trader("buyer", &[("USD", "1000")]);
    let mut client = TcpClient::connect(server.tcp_address);
    client.login(&buyer);
    let longest = "L".repeat(bourse_protocol::client_order_id::CLIENT_ORDER_ID_BYTES_MAX);
    let tqsdk = "PYSDK_insert_0123456789abcdef0123456789abcdef";
    let mut seen = Vec::new();
    for (request, id) in [(1u64, tqsdk), (10, longest.as_str())] {
        client.new_order(request, id, 1, 5_000, 2, 1, 0);
        let accepted = client.until(ACCEPTED, &mut seen);
        assert_eq!((accepted.u64(0), accepted.text(ACCEPTED_ID_AT, ID)), (request, id.to_string()));
        client.by_id(ORDER_STATUS, request + 1, id);
        let state = client.until(ORDER_STATE, &mut seen);
        assert_eq!(
            (state.u64(0), state.text(STATE_ID_AT, ID).as_str(), state.body[STATE_STATUS_AT]),
            (request + 1, id, 1),
            "open"
        );
        client.by_id(CANCEL, request + 2, id);
        let canceled = client.until(ACCEPTED, &mut seen);
        assert_eq!(canceled.text(ACCEPTED_ID_AT, ID), id);
        let (status, order) = buyer.get(&format!("/v1/orders?client_order_id={id}"));
        assert_eq!(status, 200, "{order}");
        assert_eq!(
            (order["client_order_id"].as_str(), order["status"].as_str()),
            (Some(id), Some("canceled"))
        );
    }
}

#[test]
fn rejects_carry_the_specs_reason_codes() {
    let directory = tempfile::tempdir().unwrap();
    let server = TestServer::start(directory.path(), false);
    server.declare_btc_usd();
    let buyer = server.trader("buyer", &[("USD", "10")]);
    let mut client = TcpClient::connect(server.tcp_address);
    client.login(&buyer);
    client.new_order(1, "a", 1, 100_001, 3, 1, 0); // 100.001: not a tick multiple
    client.new_order(2, "b", 1, 100, 0, 1, 0); // 100 USD with 10 available
    client.by_id(CANCEL, 3, "nope");
    let mut codes = Vec::new();
    let mut seen = Vec::new();
    for _ in 0..3 {
        let rejected = client.until(REJECTED, &mut seen);
        codes.push((rejected.u64(0), rejected.u16(8)));
    }
    codes.sort();
    assert_eq!(
        codes,
        vec![
            (1, reject_code(RejectReason::InvalidPrice)),
            (2, reject_code(RejectReason::InsufficientFunds)),
            (3, reject_code(RejectReason::UnknownOrder)),
        ]
    );
    client.send(HEARTBEAT, &[]);
    assert_eq!(client.until(SERVER_HEARTBEAT, &mut seen).kind, SERVER_HEARTBEAT);
}

#[test]
fn garbage_truncated_frames_and_bad_logins_close_only_that_connection() {
    let directory = tempfile::tempdir().unwrap();
    let server = TestServer::start(directory.path(), true);
    let alice = server.demo[0].clone();
    let goodbye = |client: &mut TcpClient| -> u16 {
        let frame = client.read().expect("a goodbye");
        assert_eq!(frame.kind, GOODBYE);
        let code = frame.u16(0);
        assert!(client.read().is_none(), "then the connection closes");
        code
    };
    // Garbage: a length over the limit.
    let mut garbage = TcpClient::connect(server.tcp_address);
    garbage.stream.write_all(&[0xff, 0xff, 0x13, 0x37, 0x00]).unwrap();
    assert_eq!(goodbye(&mut garbage), code::MALFORMED_FRAME);
    // An unknown message type.
    let mut unknown = TcpClient::connect(server.tcp_address);
    unknown.send(0x77, &[1, 2, 3]);
    assert_eq!(goodbye(&mut unknown), code::MALFORMED_FRAME);
    // A request before logging in.
    let mut early = TcpClient::connect(server.tcp_address);
    early.by_id(ORDER_STATUS, 1, "x");
    assert_eq!(goodbye(&mut early), code::LOGIN_REQUIRED);
    // A wrong signature; an old timestamp.
    let mut forged = TcpClient::connect(server.tcp_address);
    let wrong = Client { secret: "0".repeat(64), ..alice.clone() };
    forged.send(LOGIN, &TcpClient::login_body(&wrong, support::now_ms()));
    assert_eq!(goodbye(&mut forged), code::INVALID_SIGNATURE);
    let mut stale = TcpClient::connect(server.tcp_address);
    stale.send(LOGIN, &TcpClient::login_body(&alice, support::now_ms() - 3_600_000));
    assert_eq!(goodbye(&mut stale), code::EXPIRED_TIMESTAMP);
    // Half a frame, then the client vanishes; many connections dropped at once.
    let mut half = TcpClient::connect(server.tcp_address);
    half.stream.write_all(&[60, 0, NEW_ORDER, 1, 2]).unwrap();
    drop(half);
    for _ in 0..20 {
        drop(TcpStream::connect(server.tcp_address).unwrap());
    }
    // Everyone else is served.
    let mut fine = TcpClient::connect(server.tcp_address);
    fine.login(&alice);
    fine.new_order(1, "after", 1, 5_000_000, 2, 1, 2);
    let mut seen = Vec::new();
    assert_eq!(fine.until(ACCEPTED, &mut seen).u64(0), 1);
}

#[test]
fn half_open_and_silent_connections_are_closed_with_a_reason() {
    let directory = tempfile::tempdir().unwrap();
    let mut config = support::config(directory.path());
    config.auth.login_timeout_ms = 300;
    config.limits.idle_timeout_ms = 500;
    let server = TestServer::start_with(config, true);
    let alice = server.demo[0].clone();
    // Connects and never says a word: closed for not logging in.
    let mut silent = TcpClient::connect(server.tcp_address);
    let goodbye = silent.read().expect("a goodbye");
    assert_eq!((goodbye.kind, goodbye.u16(0)), (GOODBYE, code::LOGIN_REQUIRED));
    assert!(silent.read().is_none());
    // Logs in, then goes quiet: closed as idle.
    let mut quiet = TcpClient::connect(server.tcp_address);
    quiet.login(&alice);
    let mut seen = Vec::new();
    let goodbye = quiet.until(GOODBYE, &mut seen);
    assert_eq!(goodbye.u16(0), code::IDLE_TIMEOUT);
    // One that keeps sending heartbeats stays.
    let mut alive = TcpClient::connect(server.tcp_address);
    alive.login(&alice);
    for _ in 0..4 {
        std::thread::sleep(Duration::from_millis(200));
        alive.send(HEARTBEAT, &[]);
        assert_eq!(alive.until(SERVER_HEARTBEAT, &mut seen).kind, SERVER_HEARTBEAT);
    }
}

#[test]
fn futures_orders_carry_their_offset_and_its_rejections_in_a_byte() {
    let directory = tempfile::tempdir().unwrap();
    let server = TestServer::start(directory.path(), false);
    let created = server.admin.post("/v1/admin/assets", r#"{"asset":"CNY","decimals":2}"#);
    assert_eq!(created.0, 201, "{}", created.1);
    for (symbol, close_today) in [("SHFE.cu2501", true), ("CFFEX.IF2501", false)] {
        let declared = server.admin.post(
            "/v1/admin/futures",
            &format!(
                r#"{{"symbol":"{symbol}","settle":"CNY","tick":"10","lot":"1","min_qty":"1","max_qty":"100",
                    "multiplier":"5","margin":"25000","maker_fee":"0","taker_fee":"0",
                    "market_band_bps":500,"close_today":{close_today}}}"#
            ),
        );
        assert_eq!(declared.0, 201, "{}", declared.1);
    }
    let trader = server.trader("trader", &[("CNY", "30000")]);
    let mut client = TcpClient::connect(server.tcp_address);
    client.login(&trader);
    // request id, symbol, side (1 buy, 2 sell), time in force (1 gtc ... 4 gfd), offset.
    let send =
        |client: &mut TcpClient, request_id: u64, symbol: &str, side: u8, tif: u8, offset: u8| {
            let mut body = request_id.to_le_bytes().to_vec();
            body.extend(padded(&format!("f{request_id}"), ID));
            body.extend(padded(symbol, SYMBOL_BYTES));
            body.extend([side, 1, tif, 0, 1, 0, 0, offset]);
            body.extend(50_000i64.to_le_bytes());
            body.extend(1i64.to_le_bytes());
            client.send(NEW_ORDER, &body);
        };
    send(&mut client, 1, "CFFEX.IF2501", 2, 4, 2); // close_today without the rule
    send(&mut client, 2, "SHFE.cu2501", 2, 4, 1); // close with nothing held
    send(&mut client, 3, "SHFE.cu2501", 1, 4, 0); // open: 25000 of 30000
    send(&mut client, 4, "SHFE.cu2501", 1, 4, 0); // open: 25000 more than is left
    let mut seen = Vec::new();
    let mut rejected = Vec::new();
    for _ in 0..3 {
        let frame = client.until(REJECTED, &mut seen);
        rejected.push((frame.u64(0), frame.u16(8)));
    }
    rejected.sort();
    assert_eq!(
        rejected,
        vec![
            (1, reject_code(RejectReason::InvalidOffset)),
            (2, reject_code(RejectReason::InsufficientPosition)),
            (4, reject_code(RejectReason::InsufficientFunds)),
        ]
    );
    assert!(seen.iter().any(|frame| frame.kind == ACCEPTED && frame.u64(0) == 3));
    // An offset beyond 2 is a malformed frame: goodbye.
    send(&mut client, 5, "SHFE.cu2501", 1, 4, 3);
    let frame = client.until(GOODBYE, &mut seen);
    assert_eq!(frame.u16(0), code::MALFORMED_FRAME);
}

#[test]
fn the_keys_rate_and_connection_limits_hold_on_the_binary_gateway() {
    let directory = tempfile::tempdir().unwrap();
    let mut config = support::config(directory.path());
    config.limits.requests_per_second = 1;
    config.limits.requests_burst = 5;
    config.limits.connections_per_key = 2;
    let server = TestServer::start_with(config, false);
    server.declare_btc_usd();
    let trader = server.trader("alice", &[("BTC", "10")]);
    // Past the key's rate: refused with its code, the connection goes on.
    let mut first = TcpClient::connect(server.tcp_address);
    first.login(&trader);
    for request in 0..10u64 {
        first.by_id(ORDER_STATUS, request, &format!("none-{request}"));
    }
    let mut codes = Vec::new();
    while codes.len() < 10 {
        let frame = first.read().expect("an answer to every request");
        if frame.kind == REJECTED {
            codes.push(frame.u16(8));
        }
    }
    let limited = codes.iter().filter(|code| **code == code::RATE_LIMITED).count();
    let unknown =
        codes.iter().filter(|code| **code == reject_code(RejectReason::UnknownOrder)).count();
    assert!(limited >= 4 && unknown >= 4, "{codes:?}");
    assert_eq!(limited + unknown, 10, "{codes:?}");
    // Past the key's connections: the third login is refused, and a place freed by a
    // closed connection is taken again.
    let mut second = TcpClient::connect(server.tcp_address);
    second.login(&trader);
    let mut third = TcpClient::connect(server.tcp_address);
    std::thread::sleep(Duration::from_millis(2));
    third.send(LOGIN, &TcpClient::login_body(&trader, support::now_ms()));
    let goodbye = third.read().expect("a goodbye");
    assert_eq!((goodbye.kind, goodbye.u16(0)), (GOODBYE, code::TOO_MANY_CONNECTIONS));
    drop(second);
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    loop {
        let mut again = TcpClient::connect(server.tcp_address);
        std::thread::sleep(Duration::from_millis(2));
        again.send(LOGIN, &TcpClient::login_body(&trader, support::now_ms()));
        let answer = again.read().expect("an answer to the login");
        if answer.kind == LOGGED_IN {
            break;
        }
        assert!(std::time::Instant::now() < deadline, "the closed connection's place stays taken");
        std::thread::sleep(Duration::from_millis(50));
    }
    drop(first);
}
