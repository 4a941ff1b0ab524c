//! The market-data feed of a real server, over real multicast on loopback: a
//! subscriber that joins after the session started (snapshot, then the feed), one that
//! loses a third of the packets (retransmission), and one whose gaps are older than the
//! server's history (range gone, snapshot) all end with the engine's own order-level
//! book (`/v1/l3`) at the same sequence number. Candles and the feed's end of session
//! too.

mod support;

use std::time::{Duration, Instant};

use bourse_core::ids::InstrumentId;
use bourse_core::{Seq, Side};
use bourse_server::services::multicast::listen::{FeedAddresses, Listener};
use serde_json::Value;
use support::{Client, TestServer};

/// One side's orders: (order id, price, qty) in the instrument's units.
type Orders = Vec<(u64, i64, i64)>;

fn order(side: &str, price: &str, qty: &str, id: &str) -> String {
    format!(
        r#"{{"symbol":"BTC-USD","side":"{side}","type":"limit","price":"{price}","qty":"{qty}","client_order_id":"{id}"}}"#
    )
}

fn addresses(server: &TestServer) -> FeedAddresses {
    let notes = server.server.as_ref().unwrap().notes.market_data.clone().expect("the feed is on");
    FeedAddresses {
        multicast: notes.multicast,
        interface: notes.interface,
        snapshot: vec![notes.snapshot],
        retransmit: vec![notes.retransmit],
    }
}

/// Some trading: resting orders on both sides, trades, an amend that keeps its place
/// and one that loses it, cancels, a sweep. Returns the last command's seq.
fn trade(seller: &Client, buyer: &Client, round: u32) -> u64 {
    for step in 0..10u32 {
        let id = format!("s{round}-{step}");
        let (status, placed) =
            seller.post("/v1/orders", &order("sell", &format!("{}", 100 + step % 5), "0.5", &id));
        assert_eq!(status, 200, "{placed}");
        let id = format!("b{round}-{step}");
        let (status, placed) =
            buyer.post("/v1/orders", &order("buy", &format!("{}", 95 + step % 7), "0.3", &id));
        assert_eq!(status, 200, "{placed}");
    }
    let (status, _) =
        seller.patch(&format!("/v1/orders?client_order_id=s{round}-1"), r#"{"qty":"0.2"}"#);
    assert_eq!(status, 200);
    let (status, _) =
        seller.patch(&format!("/v1/orders?client_order_id=s{round}-2"), r#"{"price":"104"}"#);
    assert_eq!(status, 200);
    let (status, _) = buyer.delete(&format!("/v1/orders?client_order_id=b{round}-3"));
    assert!(status == 200 || status == 404);
    // A taker sweeping some asks.
    let (status, placed) =
        buyer.post("/v1/orders", &order("buy", "102", "1.7", &format!("t{round}")));
    assert_eq!(status, 200, "{placed}");
    // (The last command: its order id is its seq.)
    placed["order"]["order_id"].as_u64().unwrap()
}

/// The engine's book as `(order_id, price, qty)` per side, in the instrument's units.
fn engine_book(server: &TestServer) -> (u64, Orders, Orders) {
    let (status, l3) = support::request(server.address, "GET", "/v1/l3/BTC-USD", &[], b"");
    assert_eq!(status, 200, "{l3}");
    // BTC-USD: tick 0.01 (price in cents), lot 0.0001.
    let side = |orders: &Value| -> Orders {
        orders
            .as_array()
            .unwrap()
            .iter()
            .map(|order| {
                let units = |text: &Value, scale: f64| {
                    (text.as_str().unwrap().parse::<f64>().unwrap() * scale).round() as i64
                };
                (order[0].as_u64().unwrap(), units(&order[1], 100.0), units(&order[2], 10_000.0))
            })
            .collect()
    };
    (l3["seq"].as_u64().unwrap(), side(&l3["bids"]), side(&l3["asks"]))
}

fn listener_book(listener: &Listener) -> (Orders, Orders) {
    let instrument = listener.rebuilder.instrument_by_symbol("BTC-USD").unwrap_or(InstrumentId(0));
    let side = |side| {
        listener
            .rebuilder
            .books()
            .orders(instrument, side)
            .into_iter()
            .map(|(id, price, qty)| (id.0, price.0, qty.0))
            .collect()
    };
    (side(Side::Buy), side(Side::Sell))
}

/// Listens until the subscriber has applied command `seq`, then compares with the
/// engine's L3 (no trading goes on meanwhile, so the L3's seq is that point).
fn catch_up_and_compare(server: &TestServer, listener: &mut Listener, seq: u64) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while listener.rebuilder.seq() < Seq(seq) || listener.rebuilder.gap().is_some() {
        assert!(
            Instant::now() < deadline,
            "stuck at {} (gap {:?})",
            listener.rebuilder.seq(),
            listener.rebuilder.gap()
        );
        listener.poll(Duration::from_millis(100)).unwrap();
    }
    let (l3_seq, bids, asks) = engine_book(server);
    assert!(l3_seq >= seq);
    assert_eq!(listener_book(listener), (bids, asks), "at seq {seq}");
    listener.rebuilder.books().check().unwrap();
}

#[test]
fn late_lossy_and_too_late_subscribers_all_rebuild_the_engines_book() {
    let directory = tempfile::tempdir().unwrap();
    let mut config = support::config(directory.path());
    config.marketdata.history_messages = 60;
    config.limits.requests_per_second = 10_000;
    config.limits.requests_burst = 10_000;
    let server = TestServer::start_with(config, false);
    server.declare_btc_usd();
    let seller = server.trader("seller", &[("BTC", "100")]);
    let buyer = server.trader("buyer", &[("USD", "1000000")]);
    let seq = trade(&seller, &buyer, 0);

    // Joins late: starts from a snapshot, then follows the feed.
    let mut late = Listener::join(addresses(&server)).unwrap();
    late.poll(Duration::from_millis(50)).unwrap();
    assert_eq!(late.recoveries.snapshots, 1);
    catch_up_and_compare(&server, &mut late, seq);

    // Loses a third of the packets: retransmission fills the gaps.
    let mut lossy = Listener::join(addresses(&server)).unwrap();
    lossy.poll(Duration::from_millis(50)).unwrap();
    lossy.drop_percent = 33;
    let seq = trade(&seller, &buyer, 1);
    catch_up_and_compare(&server, &mut late, seq);
    catch_up_and_compare(&server, &mut lossy, seq);
    assert!(lossy.recoveries.retransmit_requests > 0, "{:?}", lossy.recoveries);
    assert!(lossy.recoveries.retransmitted_packets > 0, "{:?}", lossy.recoveries);

    // Misses everything of a round longer than the history: the range is gone, and a
    // snapshot brings it back.
    let mut deaf = Listener::join(addresses(&server)).unwrap();
    deaf.poll(Duration::from_millis(50)).unwrap();
    deaf.drop_percent = 100;
    let mut seq = 0;
    for round in 2..6 {
        seq = trade(&seller, &buyer, round);
    }
    deaf.poll(Duration::from_millis(300)).unwrap(); // (all of it dropped)
    deaf.drop_percent = 0;
    // The next packet (a heartbeat, at the latest) shows the gap.
    catch_up_and_compare(&server, &mut deaf, seq);
    assert!(
        deaf.recoveries.ranges_gone > 0 || deaf.recoveries.snapshots > 1,
        "{:?}",
        deaf.recoveries
    );
    catch_up_and_compare(&server, &mut late, seq);

    // Candles: the trades are in this minute's candle.
    let (status, candles) =
        support::request(server.address, "GET", "/v1/candles/BTC-USD?interval=1m", &[], b"");
    assert_eq!(status, 200, "{candles}");
    let candles = candles["candles"].as_array().unwrap();
    let traded: f64 =
        candles.iter().map(|candle| candle[5].as_str().unwrap().parse::<f64>().unwrap()).sum();
    assert!(traded > 0.0, "{candles:?}");
    let (status, bad) =
        support::request(server.address, "GET", "/v1/candles/BTC-USD?interval=2m", &[], b"");
    assert_eq!((status, bad["code"].as_str()), (400, Some("malformed")));

    // `/metrics` counts what the feed did.
    let (_, metrics) = support::raw_request(server.address, "GET", "/metrics", &[], b"");
    let metrics = String::from_utf8(metrics).unwrap();
    let value = |name: &str| -> f64 {
        let line = metrics
            .lines()
            .find(|line| line.starts_with(name))
            .unwrap_or_else(|| panic!("no {name} in:\n{metrics}"));
        line.rsplit(' ').next().unwrap().parse().unwrap()
    };
    assert!(value("bourse_md_messages_total") > 100.0);
    assert!(value("bourse_md_packets_total") > 10.0);
    assert_eq!(value("bourse_md_inconsistencies_total"), 0.0);
    assert_eq!(value("bourse_md_send_errors_total"), 0.0);
    assert!(value("bourse_md_retransmit_requests_total") > 0.0);
    assert!(value("bourse_md_snapshots_total") >= 4.0);

    // Stopping the server ends the session on the feed.
    server.stop();
    let deadline = Instant::now() + Duration::from_secs(10);
    while !late.rebuilder.ended() {
        assert!(Instant::now() < deadline, "no end of session");
        late.poll(Duration::from_millis(100)).unwrap();
    }
}

/// A restarted server recovers its books from the journal; its new feed session starts
/// from them: a subscriber's snapshot holds the orders resting from before, and trades
/// against them after the restart follow without a gap in the feed's books.
#[test]
fn after_a_restart_the_feed_starts_from_the_recovered_books() {
    let directory = tempfile::tempdir().unwrap();
    let mut config = support::config(directory.path());
    config.limits.requests_per_second = 10_000;
    config.limits.requests_burst = 10_000;
    let server = TestServer::start_with(config.clone(), false);
    server.declare_btc_usd();
    let seller = server.trader("seller", &[("BTC", "100")]);
    let buyer = server.trader("buyer", &[("USD", "1000000")]);
    trade(&seller, &buyer, 0);
    let (_, bids_before, asks_before) = engine_book(&server);
    assert!(!bids_before.is_empty() && !asks_before.is_empty());
    server.stop();

    let server = TestServer::start_with(config, false);
    let mut listener = Listener::join(addresses(&server)).unwrap();
    listener.poll(Duration::from_millis(50)).unwrap();
    let (seq, bids, asks) = engine_book(&server);
    assert_eq!((&bids, &asks), (&bids_before, &asks_before), "the engine recovered its books");
    catch_up_and_compare(&server, &mut listener, seq);
    // Trading on against the orders from before the restart.
    let seller = server.client(&seller.key, &seller.secret);
    let buyer = server.client(&buyer.key, &buyer.secret);
    let seq = trade(&seller, &buyer, 1);
    catch_up_and_compare(&server, &mut listener, seq);
    let (_, metrics) = support::raw_request(server.address, "GET", "/metrics", &[], b"");
    let metrics = String::from_utf8(metrics).unwrap();
    assert!(metrics.lines().any(|line| line == "bourse_md_inconsistencies_total 0"), "{metrics}");
}

/// The retransmission service ignores what is not a request of its session (wrong
/// length, another session, a count of 0) and goes on answering real ones; the
/// snapshot service answers a client that sends nothing.
#[test]
fn the_recovery_services_ignore_bad_requests_and_keep_answering() {
    let directory = tempfile::tempdir().unwrap();
    let server = TestServer::start(directory.path(), false);
    server.declare_btc_usd();
    let seller = server.trader("seller", &[("BTC", "100")]);
    let (status, _) = seller.post("/v1/orders", &order("sell", "100", "1", "x1"));
    assert_eq!(status, 200);
    let feed = addresses(&server);
    let session = bourse_marketdata::mold::session(
        &server.server.as_ref().unwrap().notes.market_data.clone().unwrap().session,
    );
    let socket = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    socket.set_read_timeout(Some(Duration::from_millis(300))).unwrap();
    let mut buffer = [0u8; 2048];
    for bad in [
        b"hello".to_vec(),
        bourse_marketdata::mold::header(&bourse_marketdata::mold::session("OTHER"), 1, 5).to_vec(),
        bourse_marketdata::mold::header(&session, 1, 0).to_vec(),
        [bourse_marketdata::mold::header(&session, 1, 5).as_slice(), b"extra"].concat(),
    ] {
        socket.send_to(&bad, feed.retransmit[0]).unwrap();
        assert!(socket.recv_from(&mut buffer).is_err(), "an answer to {bad:?}");
    }
    socket.send_to(&bourse_marketdata::mold::header(&session, 1, 3), feed.retransmit[0]).unwrap();
    let (length, _) = socket.recv_from(&mut buffer).unwrap();
    let packet = bourse_marketdata::mold::Packet::parse(&buffer[..length]).unwrap();
    assert_eq!((packet.sequence, packet.messages.len()), (1, 3));
    let snapshot =
        bourse_server::services::multicast::listen::fetch_snapshot(feed.snapshot[0]).unwrap();
    assert!(snapshot
        .iter()
        .any(|message| matches!(message, bourse_marketdata::message::Message::AddOrder { .. })));
}
