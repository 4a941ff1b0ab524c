//! FIX 4.4 order entry over real sockets (`docs/fix.md`): the Logon with an API key,
//! orders and their ExecutionReports, fills of orders entered over REST, the session's
//! store across a restart (a ResendRequest answered with the same reports, PossDupFlag
//! and GapFills), and bad input: a wrong checksum, a wrong BodyLength, a missing tag,
//! MsgSeqNum too high and too low, a bad signature, a second Logon with the same key,
//! an unsupported message and a flood, each answered with a Reject, a Logout or a
//! BusinessMessageReject, nothing lost and the server still serving.

mod support;

use std::collections::HashMap;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

use bourse_protocol::fix::{self, tag, Message, Writer};
use bourse_protocol::signing::{now_ms, sign, FIX_LOGIN_PATH, LOGIN_METHOD};
use support::{Client, TestServer};

/// A message as tag -> value (the first of each tag).
type Fields = HashMap<u32, String>;

struct FixClient {
    stream: TcpStream,
    buffer: Vec<u8>,
    next_seq: u64,
    comp_id: String,
}

impl FixClient {
    fn connect(address: SocketAddr, comp_id: &str) -> FixClient {
        let stream = TcpStream::connect(address).unwrap();
        stream.set_read_timeout(Some(Duration::from_millis(200))).unwrap();
        FixClient { stream, buffer: Vec::new(), next_seq: 1, comp_id: comp_id.to_string() }
    }

    /// A message numbered `seq` with `fields` after the header, as bytes.
    fn message(&self, msg_type: &str, seq: u64, fields: &[(u32, &str)]) -> Vec<u8> {
        let mut writer = Writer::default();
        writer
            .start(msg_type)
            .str(tag::SENDER_COMP_ID, &self.comp_id)
            .str(tag::TARGET_COMP_ID, "BOURSE")
            .number(tag::MSG_SEQ_NUM, seq)
            .timestamp(tag::SENDING_TIME, now_ms());
        for (tag, value) in fields {
            writer.str(*tag, value);
        }
        let mut out = Vec::new();
        writer.finish(&mut out);
        out
    }

    fn send(&mut self, msg_type: &str, fields: &[(u32, &str)]) -> u64 {
        let seq = self.next_seq;
        let bytes = self.message(msg_type, seq, fields);
        self.next_seq += 1;
        self.stream.write_all(&bytes).unwrap();
        seq
    }

    fn logon_fields(client: &Client, sent_ms: u64) -> Vec<(u32, String)> {
        let message = format!("{sent_ms}\n{LOGIN_METHOD}\n{FIX_LOGIN_PATH}\n");
        let signature = sign(&client.secret, message.as_bytes());
        vec![
            (tag::ENCRYPT_METHOD, "0".to_string()),
            (tag::HEART_BT_INT, "30".to_string()),
            (tag::USERNAME, client.key.clone()),
            (tag::RAW_DATA_LENGTH, signature.len().to_string()),
            (tag::RAW_DATA, signature),
        ]
    }

    /// A Logon signed with `client`'s key (SendingTime is the signed timestamp: the
    /// writer stamps it with the same clock, so it is taken just before).
    fn send_logon(&mut self, client: &Client, extra: &[(u32, &str)]) {
        let sent_ms = now_ms();
        let mut writer = Writer::default();
        writer
            .start("A")
            .str(tag::SENDER_COMP_ID, &self.comp_id)
            .str(tag::TARGET_COMP_ID, "BOURSE")
            .number(tag::MSG_SEQ_NUM, self.next_seq)
            .timestamp(tag::SENDING_TIME, sent_ms);
        for (tag, value) in FixClient::logon_fields(client, sent_ms) {
            writer.str(tag, &value);
        }
        for (tag, value) in extra {
            writer.str(*tag, value);
        }
        let mut out = Vec::new();
        writer.finish(&mut out);
        self.next_seq += 1;
        self.stream.write_all(&out).unwrap();
    }

    fn logon(&mut self, client: &Client) -> Fields {
        self.send_logon(client, &[]);
        let answer = self.next("A");
        assert_eq!(answer[&tag::HEART_BT_INT], "30");
        answer
    }

    /// The next message, or `None` after `timeout` or once the server closed.
    fn receive(&mut self, timeout: Duration) -> Option<Fields> {
        let deadline = Instant::now() + timeout;
        loop {
            match fix::frame(&self.buffer) {
                Ok(Some(length)) => {
                    let bytes: Vec<u8> = self.buffer.drain(..length).collect();
                    let mut fields = Vec::new();
                    let message = Message::parse(&bytes, &mut fields).unwrap();
                    let mut map = Fields::new();
                    for (tag, value) in message.fields() {
                        map.entry(tag)
                            .or_insert_with(|| String::from_utf8_lossy(value).into_owned());
                    }
                    return Some(map);
                }
                Ok(None) => {}
                Err(error) => panic!("the server sent a bad frame: {error:?}"),
            }
            if Instant::now() >= deadline {
                return None;
            }
            let mut chunk = [0u8; 65536];
            match self.stream.read(&mut chunk) {
                Ok(0) => return None,
                Ok(count) => self.buffer.extend_from_slice(&chunk[..count]),
                Err(error)
                    if matches!(
                        error.kind(),
                        std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                    ) => {}
                Err(_) => return None,
            }
        }
    }

    /// The next message of type `msg_type` (others skipped), within 10 s.
    fn next(&mut self, msg_type: &str) -> Fields {
        let deadline = Instant::now() + Duration::from_secs(10);
        let mut skipped = Vec::new();
        while Instant::now() < deadline {
            if let Some(message) = self.receive(Duration::from_millis(200)) {
                if message[&tag::MSG_TYPE] == msg_type {
                    return message;
                }
                skipped.push(message);
            }
        }
        panic!("no {msg_type} within 10 s; got {skipped:?}")
    }

    /// Whether the server closed the connection (within 5 s).
    fn closed(&mut self) -> bool {
        let deadline = Instant::now() + Duration::from_secs(5);
        while Instant::now() < deadline {
            let mut chunk = [0u8; 4096];
            match self.stream.read(&mut chunk) {
                Ok(0) => return true,
                Ok(_) => {}
                Err(error)
                    if matches!(
                        error.kind(),
                        std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                    ) => {}
                Err(_) => return true,
            }
        }
        false
    }
}

fn new_order<'a>(id: &'a str, side: &'a str, qty: &'a str, price: &'a str) -> Vec<(u32, &'a str)> {
    vec![
        (tag::CL_ORD_ID, id),
        (tag::SYMBOL, "BTC-USD"),
        (tag::SIDE, side),
        (tag::ORDER_QTY, qty),
        (tag::ORD_TYPE, "2"),
        (tag::PRICE, price),
        (tag::TIME_IN_FORCE, "1"),
        (tag::TRANSACT_TIME, "20240101-00:00:00"),
    ]
}

#[test]
fn orders_are_reported_and_a_restarted_server_resends_what_it_sent() {
    let directory = tempfile::tempdir().unwrap();
    let server = TestServer::start(directory.path(), false);
    let (seller, buyer) = server.seller_and_buyer("10", "1000000");
    let mut fix = FixClient::connect(server.fix_address, "BUYER");
    fix.logon(&buyer);
    fix.send("D", &new_order("b1", "1", "0.5", "100"));
    let new = fix.next("8");
    assert_eq!((new[&tag::CL_ORD_ID].as_str(), new[&tag::EXEC_TYPE].as_str()), ("b1", "0"));
    assert_eq!((new[&tag::ORD_STATUS].as_str(), new[&tag::LEAVES_QTY].as_str()), ("0", "0.5"));
    // A fill of an order entered over REST reaches the session of the other side.
    let (status, body) = seller.post(
        "/v1/orders",
        r#"{"symbol":"BTC-USD","side":"sell","type":"limit","price":"100","qty":"0.2","client_order_id":"s1"}"#,
    );
    assert_eq!(status, 200, "{body}");
    let trade = fix.next("8");
    assert_eq!((trade[&tag::EXEC_TYPE].as_str(), trade[&tag::ORD_STATUS].as_str()), ("F", "1"));
    assert_eq!((trade[&tag::LAST_PX].as_str(), trade[&tag::LAST_QTY].as_str()), ("100", "0.2"));
    assert_eq!((trade[&tag::CUM_QTY].as_str(), trade[&tag::LEAVES_QTY].as_str()), ("0.2", "0.3"));
    assert_eq!(trade[&tag::ORDER_ID], new[&tag::ORDER_ID]);
    let (_, fills) = buyer.get("/v1/fills");
    let fills =
        fills.as_array().cloned().unwrap_or_else(|| fills["fills"].as_array().unwrap().clone());
    assert_eq!(fills[0]["trade_id"], trade[&tag::SECONDARY_EXEC_ID].as_str());
    let (new_seq, trade_seq) = (new[&tag::MSG_SEQ_NUM].clone(), trade[&tag::MSG_SEQ_NUM].clone());
    drop(fix);

    // The server restarts; the client logs on again as if it had missed everything
    // after its Logon, and asks for it.
    server.stop();
    let server = TestServer::start(directory.path(), false);
    let buyer = server.client(&buyer.key, &buyer.secret);
    let mut fix = FixClient::connect(server.fix_address, "BUYER");
    fix.next_seq = 3;
    let logon = fix.logon(&buyer);
    let next_out: u64 = logon[&tag::MSG_SEQ_NUM].parse().unwrap();
    assert!(next_out > trade_seq.parse().unwrap(), "numbers go on after a restart: {logon:?}");
    fix.send("2", &[(tag::BEGIN_SEQ_NO, "2"), (tag::END_SEQ_NO, "0")]);
    let mut resent = Vec::new();
    while let Some(message) = fix.receive(Duration::from_secs(2)) {
        resent.push(message);
    }
    let reports: Vec<&Fields> =
        resent.iter().filter(|message| message[&tag::MSG_TYPE] == "8").collect();
    assert_eq!(reports.len(), 2, "{resent:?}");
    assert_eq!(
        (reports[0][&tag::MSG_SEQ_NUM].as_str(), reports[1][&tag::MSG_SEQ_NUM].as_str()),
        (new_seq.as_str(), trade_seq.as_str())
    );
    for report in &reports {
        assert_eq!(report[&tag::POSS_DUP_FLAG], "Y");
        assert!(report.contains_key(&tag::ORIG_SENDING_TIME));
    }
    assert_eq!(reports[1][&tag::SECONDARY_EXEC_ID], trade[&tag::SECONDARY_EXEC_ID]);
    // Everything else up to the Logon is gap-filled: the numbers 2.. are all covered.
    let mut covered: Vec<(u64, u64)> = resent
        .iter()
        .map(|message| {
            let seq: u64 = message[&tag::MSG_SEQ_NUM].parse().unwrap();
            match message[&tag::MSG_TYPE].as_str() {
                "4" => {
                    assert_eq!(message[&tag::GAP_FILL_FLAG], "Y");
                    (seq, message[&tag::NEW_SEQ_NO].parse().unwrap())
                }
                _ => (seq, seq + 1),
            }
        })
        .collect();
    covered.sort();
    let mut next = 2;
    for (from, to) in covered {
        assert_eq!(from, next, "{resent:?}");
        next = to;
    }
    assert!(next >= next_out, "{resent:?}");
}

/// After a restart of the server, a session that has not logged on again still
/// follows its account: a fill meanwhile of an order it placed before the restart is
/// stored as its report, and the next Logon's resend delivers it.
#[test]
fn fills_after_a_restart_reach_a_session_that_has_not_logged_on_yet() {
    let directory = tempfile::tempdir().unwrap();
    let server = TestServer::start(directory.path(), false);
    let (seller, buyer) = server.seller_and_buyer("10", "1000000");
    let mut fix = FixClient::connect(server.fix_address, "BUYER");
    fix.logon(&buyer);
    fix.send("D", &new_order("rest-1", "1", "0.5", "100"));
    assert_eq!(fix.next("8")[&tag::EXEC_TYPE], "0");
    drop(fix);
    server.stop();

    let server = TestServer::start(directory.path(), false);
    let (buyer, seller) =
        (server.client(&buyer.key, &buyer.secret), server.client(&seller.key, &seller.secret));
    // The session is followed from the start: the fill is its report before any Logon.
    let (status, body) = seller.post(
        "/v1/orders",
        r#"{"symbol":"BTC-USD","side":"sell","type":"limit","price":"100","qty":"0.5","client_order_id":"s-after"}"#,
    );
    assert_eq!(status, 200, "{body}");
    std::thread::sleep(Duration::from_millis(500));
    let mut fix = FixClient::connect(server.fix_address, "BUYER");
    fix.next_seq = 3;
    let logon = fix.logon(&buyer);
    let next_out: u64 = logon[&tag::MSG_SEQ_NUM].parse().unwrap();
    fix.send("2", &[(tag::BEGIN_SEQ_NO, "1"), (tag::END_SEQ_NO, "0")]);
    let mut resent = Vec::new();
    while let Some(message) = fix.receive(Duration::from_secs(2)) {
        resent.push(message);
    }
    let fill = resent
        .iter()
        .find(|message| {
            message[&tag::MSG_TYPE] == "8"
                && message[&tag::CL_ORD_ID] == "rest-1"
                && message[&tag::EXEC_TYPE] == "F"
        })
        .unwrap_or_else(|| panic!("no fill report of rest-1 resent: {resent:?}"));
    assert_eq!((fill[&tag::LAST_QTY].as_str(), fill[&tag::ORD_STATUS].as_str()), ("0.5", "2"));
    let fill_seq: u64 = fill[&tag::MSG_SEQ_NUM].parse().unwrap();
    assert!(fill_seq < next_out, "stored before the Logon: {fill_seq} < {next_out}");
}

/// Orders that trade or are canceled while the hub is still behind: every order gets
/// its own report first, and every fill its Trade report, however the order's record
/// and fills interleave (the hub reads a record after its release, when later
/// releases may have filled the order more; a cancel's answer can come before the
/// hub's record of the order).
#[test]
fn every_order_is_reported_before_what_follows_it_even_in_a_burst() {
    let directory = tempfile::tempdir().unwrap();
    let mut config = support::config(directory.path());
    config.limits.requests_per_second = 1_000_000;
    config.limits.requests_burst = 1_000_000;
    let server = TestServer::start_with(config, false);
    let (_, buyer) = server.seller_and_buyer("10", "1000000");
    // The buyer's account also sells (BTC): its orders cross one another.
    let (status, body) = server
        .admin
        .post("/v1/admin/deposits", r#"{"account":"buyer","asset":"BTC","amount":"10"}"#);
    assert_eq!(status, 200, "{body}");
    let mut fix = FixClient::connect(server.fix_address, "BURST");
    fix.logon(&buyer);
    const PAIRS: usize = 300;
    let mut burst = Vec::new();
    for pair in 0..PAIRS {
        let (buy, sell, cancel) = (format!("b{pair}"), format!("s{pair}"), format!("c{pair}"));
        burst.extend(fix.message("D", fix.next_seq, &new_order(&buy, "1", "0.01", "100")));
        fix.next_seq += 1;
        burst.extend(fix.message("D", fix.next_seq, &new_order(&sell, "2", "0.01", "100")));
        fix.next_seq += 1;
        // And an order canceled right behind itself.
        let rest = format!("r{pair}");
        burst.extend(fix.message("D", fix.next_seq, &new_order(&rest, "1", "0.01", "50")));
        fix.next_seq += 1;
        let fields = [
            (tag::ORIG_CL_ORD_ID, rest.as_str()),
            (tag::CL_ORD_ID, cancel.as_str()),
            (tag::SIDE, "1"),
            (tag::SYMBOL, "BTC-USD"),
            (tag::TRANSACT_TIME, "20240101-00:00:00"),
        ];
        burst.extend(fix.message("F", fix.next_seq, &fields));
        fix.next_seq += 1;
    }
    fix.stream.write_all(&burst).unwrap();
    // Per ClOrdID: its reports' ExecTypes, in order.
    let mut reports: HashMap<String, Vec<String>> = HashMap::new();
    let deadline = Instant::now() + Duration::from_secs(60);
    let done = |reports: &HashMap<String, Vec<String>>| {
        (0..PAIRS).all(|pair| {
            let traded = |id: String| {
                reports.get(&id).is_some_and(|types| types.iter().any(|kind| kind == "F"))
            };
            traded(format!("b{pair}"))
                && traded(format!("s{pair}"))
                && reports.get(&format!("c{pair}")).is_some_and(|types| types == &["4"])
        })
    };
    while !done(&reports) && Instant::now() < deadline {
        let Some(message) = fix.receive(Duration::from_millis(200)) else { continue };
        if message[&tag::MSG_TYPE] != "8" {
            continue;
        }
        let id = message[&tag::CL_ORD_ID].clone();
        if let Some(orig) = message.get(&tag::ORIG_CL_ORD_ID) {
            assert!(reports.contains_key(orig), "a report naming {orig} came before {orig}'s own");
        }
        reports.entry(id).or_default().push(message[&tag::EXEC_TYPE].clone());
    }
    assert!(done(&reports), "reports missing after 60 s: {reports:?}");
    for pair in 0..PAIRS {
        assert_eq!(reports[&format!("r{pair}")].first().map(String::as_str), Some("0"));
    }
}

#[test]
fn bad_input_gets_a_reject_or_a_logout_and_nothing_is_lost() {
    let directory = tempfile::tempdir().unwrap();
    let server = TestServer::start(directory.path(), false);
    let (_seller, buyer) = server.seller_and_buyer("10", "1000000");

    // A wrong signature: Logout saying why, then closed.
    let mut fix = FixClient::connect(server.fix_address, "BUYER");
    let wrong = Client { secret: "0".repeat(64), ..buyer.clone() };
    fix.send_logon(&wrong, &[]);
    let logout = fix.next("5");
    assert!(logout[&tag::TEXT].contains("invalid_signature"), "{logout:?}");
    assert!(fix.closed());
    // Anything before a Logon: Logout.
    let mut fix = FixClient::connect(server.fix_address, "BUYER");
    fix.send("D", &new_order("x1", "1", "1", "1"));
    assert!(fix.next("5")[&tag::TEXT].contains("Logon"));

    let mut fix = FixClient::connect(server.fix_address, "BUYER");
    fix.logon(&buyer);
    // A second Logon with the same key while the first holds the session.
    let mut second = FixClient::connect(server.fix_address, "BUYER");
    std::thread::sleep(Duration::from_millis(5)); // (another timestamp: not a replay)
    second.send_logon(&buyer, &[]);
    assert!(second.next("5")[&tag::TEXT].contains("already logged on"));
    assert!(second.closed());

    // A wrong checksum: Reject, and the message does not count.
    let mut bytes = fix.message("1", fix.next_seq, &[(tag::TEST_REQ_ID, "t1")]);
    let at = bytes.len() - 2;
    bytes[at] = if bytes[at] == b'0' { b'1' } else { b'0' };
    fix.stream.write_all(&bytes).unwrap();
    let reject = fix.next("3");
    assert_eq!(reject[&tag::REF_SEQ_NUM], fix.next_seq.to_string());
    assert_eq!(reject[&tag::REF_TAG_ID], "10");
    fix.send("1", &[(tag::TEST_REQ_ID, "t2")]);
    assert_eq!(fix.next("0")[&tag::TEST_REQ_ID], "t2", "the same number is taken again");

    // A missing required tag: Reject naming it; the next message is in order.
    let mut order = new_order("m1", "1", "0.1", "100");
    order.retain(|(tag, _)| *tag != tag::SYMBOL);
    let seq = fix.send("D", &order);
    let reject = fix.next("3");
    assert_eq!(
        (reject[&tag::REF_SEQ_NUM].clone(), reject[&tag::REF_TAG_ID].as_str()),
        (seq.to_string(), "55")
    );
    assert_eq!(reject[&tag::SESSION_REJECT_REASON], "1");
    // A wrong value: Reject.
    let seq = fix.send("D", &new_order("m2", "7", "0.1", "100"));
    let reject = fix.next("3");
    assert_eq!(
        (reject[&tag::REF_SEQ_NUM].clone(), reject[&tag::REF_TAG_ID].as_str()),
        (seq.to_string(), "54")
    );
    // An unsupported message: BusinessMessageReject.
    fix.send("H", &[(tag::CL_ORD_ID, "m1")]);
    let business = fix.next("j");
    assert_eq!(
        (business[&tag::REF_MSG_TYPE].as_str(), business[&tag::BUSINESS_REJECT_REASON].as_str()),
        ("H", "3")
    );
    // An order the engine refuses: ExecutionReport Rejected with the reason.
    fix.send(
        "D",
        &[
            (tag::CL_ORD_ID, "m3"),
            (tag::SYMBOL, "NOPE-USD"),
            (tag::SIDE, "1"),
            (tag::ORDER_QTY, "1"),
            (tag::ORD_TYPE, "2"),
            (tag::PRICE, "1"),
        ],
    );
    let rejected = fix.next("8");
    assert_eq!(
        (rejected[&tag::EXEC_TYPE].as_str(), rejected[&tag::ORD_STATUS].as_str()),
        ("8", "8")
    );
    assert!(rejected[&tag::TEXT].starts_with("unknown_symbol"), "{rejected:?}");

    // MsgSeqNum too high: a ResendRequest from the expected number; the client fills
    // the gap and goes on.
    let expected = fix.next_seq;
    fix.next_seq += 3;
    fix.send("0", &[]);
    let request = fix.next("2");
    assert_eq!(request[&tag::BEGIN_SEQ_NO], expected.to_string());
    let gap = fix.message(
        "4",
        expected,
        &[
            (tag::POSS_DUP_FLAG, "Y"),
            (tag::ORIG_SENDING_TIME, "20240101-00:00:00"),
            (tag::GAP_FILL_FLAG, "Y"),
            (tag::NEW_SEQ_NO, &(expected + 4).to_string()),
        ],
    );
    fix.stream.write_all(&gap).unwrap();
    fix.send("1", &[(tag::TEST_REQ_ID, "after-gap")]);
    assert_eq!(fix.next("0")[&tag::TEST_REQ_ID], "after-gap");

    // A flood of orders: every one answered (accepted or refused by the rate limit),
    // none lost.
    let count = 2_000;
    let mut bytes = Vec::new();
    for index in 0..count {
        let id = format!("f{index}");
        bytes.extend(fix.message("D", fix.next_seq, &new_order(&id, "1", "0.0001", "1")));
        fix.next_seq += 1;
    }
    fix.stream.write_all(&bytes).unwrap();
    let mut answered = std::collections::HashSet::new();
    let deadline = Instant::now() + Duration::from_secs(30);
    while answered.len() < count && Instant::now() < deadline {
        if let Some(message) = fix.receive(Duration::from_millis(500)) {
            if message[&tag::MSG_TYPE] == "8" && message[&tag::CL_ORD_ID].starts_with('f') {
                answered.insert(message[&tag::CL_ORD_ID].clone());
            }
        }
    }
    assert_eq!(answered.len(), count, "every order of the flood answered");

    // MsgSeqNum too low: Logout saying so, then closed.
    fix.next_seq -= 5;
    fix.send("0", &[]);
    assert!(fix.next("5")[&tag::TEXT].contains("MsgSeqNum too low"));
    assert!(fix.closed());

    // A BodyLength that does not match: Logout, closed; the server still serves.
    let mut fix = FixClient::connect(server.fix_address, "BUYER");
    let text = String::from_utf8(fix.message("0", 1, &[])).unwrap();
    let body_length: usize = text.split('\x01').nth(1).unwrap()[2..].parse().unwrap();
    let broken = text.replacen(&format!("9={body_length}"), &format!("9={}", body_length - 3), 1);
    fix.stream.write_all(broken.as_bytes()).unwrap();
    assert!(fix.next("5")[&tag::TEXT].contains("BodyLength"));
    assert!(fix.closed());
    // Garbage: Logout, closed.
    let mut fix = FixClient::connect(server.fix_address, "BUYER");
    fix.stream.write_all(&[0xff; 10_000]).unwrap();
    assert!(fix.next("5")[&tag::TEXT].contains("8=FIX.4.4"));
    assert!(fix.closed());
    // (The flood used up the key's rate limit, which a Logon takes from too.)
    std::thread::sleep(Duration::from_millis(2_500));
    let mut fix = FixClient::connect(server.fix_address, "BUYER");
    fix.next_seq = 100_000;
    fix.logon(&buyer);
}

/// The short run of the decoders' fuzz target (`crates/server/fuzz`, `fix_decode`, for
/// the long runs): arbitrary bytes, and valid orders with a byte changed, framed, read
/// and decoded without a panic.
mod decoding {
    use bourse_protocol::fix::{frame, Message, Writer, MESSAGE_BYTES_MAX};
    use bourse_server::gateways::fix::orders::{decode, Application};
    use proptest::prelude::*;

    fn check(bytes: &[u8]) {
        let mut fields = Vec::new();
        if let Ok(Some(length)) = frame(bytes) {
            assert!(length <= MESSAGE_BYTES_MAX && length <= bytes.len());
        }
        let Ok(message) = Message::parse(bytes, &mut fields) else { return };
        for msg_type in ["D", "F", "G"] {
            match decode(msg_type, &message) {
                Ok(Some(Application::NewOrder(order) | Application::Unsupported { order, .. })) => {
                    assert!(order.size.qty().is_some_and(|qty| qty.mantissa() > 0))
                }
                Ok(_) => {}
                Err(refused) => assert!(refused.tag.is_some() && !refused.text.is_empty()),
            }
        }
    }

    fn order() -> Vec<u8> {
        let mut writer = Writer::default();
        writer.start("D");
        for (tag, value) in [
            (11, "a1"),
            (55, "BTC-USD"),
            (54, "1"),
            (38, "0.5"),
            (40, "2"),
            (44, "100"),
            (59, "3"),
            (18, "6"),
            (77, "C"),
            (95, "3"),
            (96, "a\x01b"),
        ] {
            writer.str(tag, value);
        }
        let mut out = Vec::new();
        writer.finish(&mut out);
        out
    }

    #[test]
    fn the_untouched_order_decodes() {
        let bytes = order();
        let mut fields = Vec::new();
        let message = Message::parse(&bytes, &mut fields).unwrap();
        let Ok(Some(Application::NewOrder(order))) = decode("D", &message) else { panic!() };
        assert!(order.post_only && order.offset == bourse_core::Offset::Close);
    }

    /// PositionEffect (77): O, C and Bourse's T; the values FIX defines that Bourse
    /// does not take are read (to be rejected `unsupported`); any other is refused.
    #[test]
    fn position_effect_values() {
        use bourse_core::Offset;
        let decoded = |effect: Option<&str>| {
            let mut writer = Writer::default();
            writer.start("D");
            for (tag, value) in [(11, "a1"), (55, "SHFE.cu2501"), (54, "2"), (38, "1"), (40, "1")] {
                writer.str(tag, value);
            }
            if let Some(effect) = effect {
                writer.str(77, effect);
            }
            let mut out = Vec::new();
            writer.finish(&mut out);
            let mut fields = Vec::new();
            let message = Message::parse(&out, &mut fields).unwrap();
            match decode("D", &message) {
                Ok(Some(Application::NewOrder(order))) => Ok(Some(order.offset)),
                Ok(Some(Application::Unsupported { order, message })) => {
                    assert_eq!(order.client_order_id.as_ref().map(|id| id.as_str()), Some("a1"));
                    assert!(message.contains("T (close today"), "{message}");
                    Ok(None)
                }
                Ok(other) => panic!("{other:?}"),
                Err(refused) => Err((refused.tag, refused.text)),
            }
        };
        assert_eq!(decoded(None), Ok(Some(Offset::Open)));
        assert_eq!(decoded(Some("O")), Ok(Some(Offset::Open)));
        assert_eq!(decoded(Some("C")), Ok(Some(Offset::Close)));
        assert_eq!(decoded(Some("T")), Ok(Some(Offset::CloseToday)));
        for unsupported in ["R", "F", "N", "D"] {
            assert_eq!(decoded(Some(unsupported)), Ok(None), "{unsupported}");
        }
        for wrong in ["X", "t", "OC"] {
            let Err((tag, text)) = decoded(Some(wrong)) else { panic!("{wrong:?} taken") };
            assert_eq!(tag, Some(77));
            assert!(text.contains("O (open), C (close) or T (close today)"), "{text}");
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(4_000))]

        #[test]
        fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..400)) {
            check(&bytes);
        }

        #[test]
        fn a_valid_order_with_a_byte_changed_never_panics(at in 0usize..200, byte in any::<u8>()) {
            let mut bytes = order();
            let at = at % bytes.len();
            bytes[at] = byte;
            check(&bytes);
            check(&bytes[20.min(bytes.len())..]);
        }
    }
}

#[test]
fn the_keys_rate_and_connection_limits_hold_on_fix_as_on_every_gateway() {
    let directory = tempfile::tempdir().unwrap();
    let mut config = support::config(directory.path());
    config.limits.requests_per_second = 1;
    config.limits.requests_burst = 5;
    config.limits.connections_per_key = 1;
    let server = TestServer::start_with(config, false);
    let (_seller, buyer) = server.seller_and_buyer("10", "1000000");
    // The key's one connection is a WebSocket's: the FIX Logon is refused, whatever
    // gateway holds the place.
    let url = format!("ws://{}/v1/ws", server.address);
    let (mut websocket, _) = tungstenite::connect(url).unwrap();
    let timestamp = now_ms().to_string();
    let signature = sign(&buyer.secret, format!("{timestamp}\nGET\n/v1/ws\n").as_bytes());
    let login = serde_json::json!({
        "op": "login", "key": buyer.key, "timestamp": timestamp, "signature": signature,
    });
    websocket.send(tungstenite::Message::text(login.to_string())).unwrap();
    let answer = websocket.read().unwrap();
    assert!(answer.to_text().unwrap().contains("logged_in"), "{answer:?}");
    let mut refused = FixClient::connect(server.fix_address, "BUYER");
    std::thread::sleep(Duration::from_millis(5)); // (another timestamp: not a replay)
    refused.send_logon(&buyer, &[]);
    let logout = refused.next("5");
    assert!(logout[&tag::TEXT].contains("connections"), "{logout:?}");
    assert!(refused.closed());
    drop(websocket);
    // Once the WebSocket is gone, the Logon is taken; past the key's rate, orders are
    // rejected with the reason and the session goes on.
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut fix = loop {
        let mut fix = FixClient::connect(server.fix_address, "BUYER");
        std::thread::sleep(Duration::from_millis(5));
        fix.send_logon(&buyer, &[]);
        match fix.receive(Duration::from_secs(5)) {
            Some(answer) if answer[&tag::MSG_TYPE] == "A" => break fix,
            answer => assert!(Instant::now() < deadline, "never logged on: {answer:?}"),
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    for index in 0..10 {
        let id = format!("r{index}");
        fix.send("D", &new_order(&id, "1", "0.1", "100"));
    }
    let mut limited = 0;
    let mut accepted = 0;
    while limited + accepted < 10 {
        let report = fix.next("8");
        match (report[&tag::EXEC_TYPE].as_str(), report.get(&tag::TEXT)) {
            ("8", Some(text)) if text.starts_with("rate_limited") => limited += 1,
            ("0", _) => accepted += 1,
            other => panic!("an unexpected report: {other:?} {report:?}"),
        }
    }
    assert!(limited >= 4 && accepted >= 4, "{limited} limited, {accepted} accepted");
    fix.send("1", &[(tag::TEST_REQ_ID, "still-there")]);
    assert_eq!(fix.next("0")[&tag::TEST_REQ_ID], "still-there", "the session goes on");
}

/// alice's order `client_order_id` as REST shows it.
fn rest_order(client: &Client, client_order_id: &str) -> serde_json::Value {
    let (status, answer) = client.get(&format!("/v1/orders?client_order_id={client_order_id}"));
    assert_eq!(status, 200, "{answer}");
    match answer {
        serde_json::Value::Array(mut orders) => orders.remove(0),
        serde_json::Value::Object(ref object) if object.contains_key("orders") => {
            answer["orders"][0].clone()
        }
        other => other,
    }
}

fn replace<'a>(orig: &'a str, id: &'a str, qty: &'a str, price: &'a str) -> Vec<(u32, &'a str)> {
    vec![
        (tag::ORIG_CL_ORD_ID, orig),
        (tag::CL_ORD_ID, id),
        (tag::SIDE, "1"),
        (tag::SYMBOL, "BTC-USD"),
        (tag::TRANSACT_TIME, "20240101-00:00:00"),
        (tag::ORD_TYPE, "2"),
        (tag::ORDER_QTY, qty),
        (tag::PRICE, price),
    ]
}

/// A cancel of `orig` (sent as `id`), answered with its Canceled report.
fn cancel(fix: &mut FixClient, orig: &str, id: &str) {
    let fields = [
        (tag::ORIG_CL_ORD_ID, orig),
        (tag::CL_ORD_ID, id),
        (tag::SIDE, "1"),
        (tag::SYMBOL, "BTC-USD"),
        (tag::TRANSACT_TIME, "20240101-00:00:00"),
    ];
    fix.send("F", &fields);
    let canceled = fix.next("8");
    assert_eq!(
        (canceled[&tag::CL_ORD_ID].as_str(), canceled[&tag::EXEC_TYPE].as_str()),
        (id, "4"),
        "{canceled:?}"
    );
}

/// OrderQty (38) on an OrderCancelReplaceRequest is the order's new whole quantity,
/// what has filled included: Bourse takes what has filled from the venue's record of
/// the order, not from the reports the session has sent. An order the session has
/// never reported (placed over REST and filled in part before the Logon), and a fill
/// the client has not been told of when its replace arrives, both count; a quantity
/// that does not exceed what has filled is refused.
#[test]
fn a_replace_takes_what_has_filled_from_the_venue() {
    let directory = tempfile::tempdir().unwrap();
    let server = TestServer::start(directory.path(), false);
    let (seller, buyer) = server.seller_and_buyer("10", "1000000");
    let sell = |id: &str, qty: &str| {
        let body = format!(
            r#"{{"symbol":"BTC-USD","side":"sell","type":"limit","price":"100","qty":"{qty}","client_order_id":"{id}"}}"#
        );
        let (status, answer) = seller.post("/v1/orders", &body);
        assert_eq!(status, 200, "{answer}");
        assert_eq!(answer["order"]["status"], "filled", "{answer}");
    };

    // An order placed over REST, filled 0.2 of 0.5 before the session logs on: the
    // session has reported nothing of it.
    let (status, answer) = buyer.post(
        "/v1/orders",
        r#"{"symbol":"BTC-USD","side":"buy","type":"limit","price":"100","qty":"0.5","client_order_id":"r1"}"#,
    );
    assert_eq!(status, 200, "{answer}");
    sell("s1", "0.2");
    let mut fix = FixClient::connect(server.fix_address, "BUYER");
    fix.logon(&buyer);
    // A new whole quantity of 0.4 leaves 0.2 open (not 0.4).
    fix.send("G", &replace("r1", "r1-x", "0.4", "100"));
    let replaced = fix.next("8");
    let replaced = match replaced[&tag::EXEC_TYPE].as_str() {
        // (The order's own report first: the session had not reported it.)
        "0" => {
            assert_eq!(replaced[&tag::CL_ORD_ID], "r1");
            fix.next("8")
        }
        _ => replaced,
    };
    assert_eq!(
        (replaced[&tag::EXEC_TYPE].as_str(), replaced[&tag::CL_ORD_ID].as_str()),
        ("5", "r1-x"),
        "{replaced:?}"
    );
    assert_eq!(
        (
            replaced[&tag::ORDER_QTY].as_str(),
            replaced[&tag::CUM_QTY].as_str(),
            replaced[&tag::LEAVES_QTY].as_str(),
            replaced[&tag::ORD_STATUS].as_str()
        ),
        ("0.4", "0.2", "0.2", "1"),
        "{replaced:?}"
    );
    let r1 = rest_order(&buyer, "r1");
    assert_eq!((r1["remaining"].as_str(), r1["filled"].as_str()), (Some("0.2"), Some("0.2")));
    cancel(&mut fix, "r1-x", "r1-c");

    // An order of the session's, filled in part over REST; its replace is sent at once,
    // without waiting for the fill's report.
    fix.send("D", &new_order("b1", "1", "0.5", "100"));
    let new = fix.next("8");
    assert_eq!((new[&tag::CL_ORD_ID].as_str(), new[&tag::EXEC_TYPE].as_str()), ("b1", "0"));
    sell("s2", "0.2");
    fix.send("G", &replace("b1", "b1-x", "0.4", "100"));
    let mut reports = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(10);
    while Instant::now() < deadline {
        let Some(message) = fix.receive(Duration::from_millis(200)) else { continue };
        reports.push(message);
        let replaced = reports.iter().any(|report| report[&tag::EXEC_TYPE] == "5");
        let traded = reports.iter().any(|report| report[&tag::EXEC_TYPE] == "F");
        if replaced && traded {
            break;
        }
    }
    let replaced = reports
        .iter()
        .find(|report| report[&tag::EXEC_TYPE] == "5")
        .unwrap_or_else(|| panic!("no Replaced report: {reports:?}"));
    assert_eq!(
        (replaced[&tag::CL_ORD_ID].as_str(), replaced[&tag::ORDER_QTY].as_str()),
        ("b1-x", "0.4")
    );
    // Whichever came first, the last report says 0.2 filled and 0.2 open.
    let last = reports.last().unwrap();
    assert_eq!(
        (
            last[&tag::CUM_QTY].as_str(),
            last[&tag::LEAVES_QTY].as_str(),
            last[&tag::ORD_STATUS].as_str()
        ),
        ("0.2", "0.2", "1"),
        "{reports:?}"
    );
    let b1 = rest_order(&buyer, "b1");
    assert_eq!((b1["remaining"].as_str(), b1["filled"].as_str()), (Some("0.2"), Some("0.2")));

    // A whole quantity that does not exceed what has filled: OrderCancelReject, the
    // order as it was.
    fix.send("G", &replace("b1-x", "b1-y", "0.2", "100"));
    let reject = fix.next("9");
    assert_eq!(
        (
            reject[&tag::CL_ORD_ID].as_str(),
            reject[&tag::ORIG_CL_ORD_ID].as_str(),
            reject[&tag::CXL_REJ_RESPONSE_TO].as_str(),
            reject[&tag::ORD_STATUS].as_str()
        ),
        ("b1-y", "b1-x", "2", "1"),
        "{reject:?}"
    );
    assert!(reject[&tag::TEXT].starts_with("invalid_qty"), "{reject:?}");
    assert_eq!(rest_order(&buyer, "b1")["remaining"], "0.2");

    // The rest fills it: OrderQty 0.4, all of it filled.
    sell("s3", "0.2");
    let filled = fix.next("8");
    assert_eq!(
        (
            filled[&tag::CL_ORD_ID].as_str(),
            filled[&tag::EXEC_TYPE].as_str(),
            filled[&tag::ORD_STATUS].as_str(),
            filled[&tag::LAST_QTY].as_str()
        ),
        ("b1-x", "F", "2", "0.2"),
        "{filled:?}"
    );
    assert_eq!(
        (
            filled[&tag::ORDER_QTY].as_str(),
            filled[&tag::CUM_QTY].as_str(),
            filled[&tag::LEAVES_QTY].as_str()
        ),
        ("0.4", "0.4", "0"),
        "{filled:?}"
    );
}

/// A futures order of `side` for 1 lot at `price`, with PositionEffect `effect` (none
/// when empty).
fn futures_order<'a>(
    id: &'a str,
    symbol: &'a str,
    side: &'a str,
    price: &'a str,
    effect: &'a str,
) -> Vec<(u32, &'a str)> {
    let mut fields = vec![
        (tag::CL_ORD_ID, id),
        (tag::SYMBOL, symbol),
        (tag::SIDE, side),
        (tag::ORDER_QTY, "1"),
        (tag::ORD_TYPE, "2"),
        (tag::PRICE, price),
        (tag::TIME_IN_FORCE, "3"),
        (tag::TRANSACT_TIME, "20240101-00:00:00"),
    ];
    if !effect.is_empty() {
        fields.push((tag::POSITION_EFFECT, effect));
    }
    fields
}

/// `client`'s long position in `symbol` as REST shows it: (today, before today).
fn long_position(client: &Client, symbol: &str) -> (String, String) {
    let (status, positions) = client.get("/v1/positions");
    assert_eq!(status, 200, "{positions}");
    let position = &positions["positions"][symbol];
    let volume = |field: &str| position[field].as_str().unwrap_or("0").to_string();
    (volume("volume_long_today"), volume("volume_long_his"))
}

/// On a contract with the close-today rule (SHFE's), PositionEffect C closes only
/// positions opened before the day's settlement, and Bourse's T closes today's: a FIX
/// client opens a position and closes it the same day. T on a contract without the
/// rule, a PositionEffect FIX defines that Bourse does not take, and one FIX does not
/// define are each refused, saying why.
#[test]
fn position_effect_t_closes_a_position_opened_the_same_day() {
    let directory = tempfile::tempdir().unwrap();
    let server = TestServer::start(directory.path(), false);
    let admin = |path: &str, body: &str| {
        let (status, answer) = server.admin.post(path, body);
        assert!(status == 200 || status == 201, "{path}: {status} {answer}");
    };
    admin("/v1/admin/assets", r#"{"asset":"CNY","decimals":2}"#);
    admin(
        "/v1/admin/futures",
        r#"{"symbol":"SHFE.cu2501","settle":"CNY","tick":"10","lot":"1","min_qty":"1","max_qty":"100",
            "multiplier":"5","margin":"25000","maker_fee":"1.5","taker_fee":"3",
            "market_band_bps":500,"close_today":true}"#,
    );
    admin(
        "/v1/admin/futures",
        r#"{"symbol":"CFFEX.IF2501","settle":"CNY","tick":"0.2","lot":"1","min_qty":"1","max_qty":"100",
            "multiplier":"300","margin":"10000","maker_fee":"0","taker_fee":"2.3","market_band_bps":500}"#,
    );
    let alice = server.trader("alice", &[("CNY", "1000000")]);
    let bob = server.trader("bob", &[("CNY", "1000000")]);
    let rest_order = |side: &str, id: &str| {
        let body = format!(
            r#"{{"symbol":"SHFE.cu2501","side":"{side}","type":"limit","price":"50000","qty":"1","offset":"open","client_order_id":"{id}"}}"#
        );
        let (status, answer) = bob.post("/v1/orders", &body);
        assert_eq!(status, 200, "{answer}");
    };
    let mut fix = FixClient::connect(server.fix_address, "ALICE");
    fix.logon(&alice);
    // The report of `id` that ends it (a Trade report filling it, or a Rejected).
    fn ended(fix: &mut FixClient, id: &str) -> Fields {
        loop {
            let report = fix.next("8");
            assert_eq!(report[&tag::CL_ORD_ID], id, "{report:?}");
            if report[&tag::ORD_STATUS] == "2" || report[&tag::ORD_STATUS] == "8" {
                return report;
            }
        }
    }

    // alice buys 1 lot to open against bob's resting sell.
    rest_order("sell", "bob-1");
    fix.send("D", &futures_order("open-1", "SHFE.cu2501", "1", "50000", "O"));
    assert_eq!(ended(&mut fix, "open-1")[&tag::EXEC_TYPE], "F");
    assert_eq!(long_position(&alice, "SHFE.cu2501"), ("1".into(), "0".into()));

    // C takes only earlier positions: alice has none.
    rest_order("buy", "bob-2");
    fix.send("D", &futures_order("close-1", "SHFE.cu2501", "2", "50000", "C"));
    let refused = ended(&mut fix, "close-1");
    assert_eq!(refused[&tag::EXEC_TYPE], "8");
    assert!(refused[&tag::TEXT].starts_with("insufficient_position"), "{refused:?}");
    // T closes today's position: it goes to zero.
    fix.send("D", &futures_order("close-2", "SHFE.cu2501", "2", "50000", "T"));
    let closed = ended(&mut fix, "close-2");
    assert_eq!((closed[&tag::EXEC_TYPE].as_str(), closed[&tag::LAST_QTY].as_str()), ("F", "1"));
    assert_eq!(long_position(&alice, "SHFE.cu2501"), ("0".into(), "0".into()));

    // After a settlement, yesterday's position is closed with C (T finds none today).
    rest_order("sell", "bob-3");
    fix.send("D", &futures_order("open-2", "SHFE.cu2501", "1", "50000", ""));
    assert_eq!(ended(&mut fix, "open-2")[&tag::EXEC_TYPE], "F");
    admin("/v1/admin/futures/SHFE.cu2501/settle", r#"{"price":"50000"}"#);
    assert_eq!(long_position(&alice, "SHFE.cu2501"), ("0".into(), "1".into()));
    rest_order("buy", "bob-4");
    fix.send("D", &futures_order("close-3", "SHFE.cu2501", "2", "50000", "T"));
    let refused = ended(&mut fix, "close-3");
    assert!(refused[&tag::TEXT].starts_with("insufficient_position"), "{refused:?}");
    fix.send("D", &futures_order("close-4", "SHFE.cu2501", "2", "50000", "C"));
    assert_eq!(ended(&mut fix, "close-4")[&tag::EXEC_TYPE], "F");
    assert_eq!(long_position(&alice, "SHFE.cu2501"), ("0".into(), "0".into()));

    // T on a contract without the close-today rule: rejected, invalid_offset (11).
    fix.send("D", &futures_order("if-1", "CFFEX.IF2501", "2", "4000", "T"));
    let refused = ended(&mut fix, "if-1");
    assert_eq!(refused[&tag::ORD_REJ_REASON], "11");
    assert!(refused[&tag::TEXT].starts_with("invalid_offset"), "{refused:?}");
    // A value FIX defines that Bourse does not take: rejected, unsupported (11).
    fix.send("D", &futures_order("fifo-1", "SHFE.cu2501", "2", "50000", "F"));
    let refused = ended(&mut fix, "fifo-1");
    assert_eq!(
        (refused[&tag::EXEC_TYPE].as_str(), refused[&tag::ORD_REJ_REASON].as_str()),
        ("8", "11")
    );
    assert!(refused[&tag::TEXT].starts_with("unsupported: PositionEffect (77)"), "{refused:?}");
    // A value FIX does not define: a session Reject naming the tag.
    let seq = fix.send("D", &futures_order("bad-1", "SHFE.cu2501", "2", "50000", "X"));
    let reject = fix.next("3");
    assert_eq!(
        (
            reject[&tag::REF_SEQ_NUM].clone(),
            reject[&tag::REF_TAG_ID].as_str(),
            reject[&tag::SESSION_REJECT_REASON].as_str()
        ),
        (seq.to_string(), "77", "5")
    );
    assert!(reject[&tag::TEXT].contains("T (close today)"), "{reject:?}");
    // None of those changed alice's position.
    assert_eq!(long_position(&alice, "SHFE.cu2501"), ("0".into(), "0".into()));
}
