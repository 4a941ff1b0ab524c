//! `bourse_core::venue`: the exchange plus what a running venue remembers about orders.
//!
//! Hand-written scenarios pin each rule by which the activity follows the events (an
//! accepted order creates its record, trades fill both sides and give each account a
//! fill, `done` finishes an order, `amended` moves it), the reuse rule (a remembered
//! finished client id is rejected `duplicate_id` until `FINISHED_ORDERS_KEPT` newer
//! finishes forget it) and the limits. Random streams then check that a venue without
//! activity is exactly its exchange, that a venue with activity differs from it only by
//! rejecting reused finished ids, that every invariant holds after every command, and
//! that a venue snapshot taken anywhere restores a venue that goes on exactly like the
//! original. Hostile snapshot bytes must never panic.
//!
//! BTC-USD (see `support`): tick 1, lot 0.01, qty 0.1..=100, no fees. ETH-USD: tick
//! 0.01, lot 1, maker 10 bps, taker 25 bps; ETH has 3 decimals, USD 2.

mod random;
mod snapshot_bytes;
mod support;
mod venue_stream;
mod venue_support;

use bourse_core::format::parse_line;
use bourse_core::ids::{AccountId, AssetId, OrderId, Seq, TimestampNs};
use bourse_core::snapshot::{
    decode_venue, SnapshotError, VENUE_FORMAT_VERSION, VENUE_MAGIC, VENUE_QUOTE_QTY_FORMAT_VERSION,
};
use bourse_core::venue::{
    Fill, Liquidity, OrderKind, OrderRecord, OrderStatus, FILLS_KEPT, FINISHED_ORDERS_KEPT,
};
use bourse_core::{
    AccountRef, Amount, Command, Event, Exchange, ExchangeConfig, Offset, Price, Qty, RejectReason,
    Side, StpMode, TimeInForce, Venue,
};
use random::Random;
use snapshot_bytes::{patched, state_bytes, tiny_config, varint, venue_bytes};
use support::{
    amend, amend_price, amend_qty, assert_events, asset, buy, cancel, deposit, instrument,
    market_buy, market_sell, sell, spend,
};
use venue_stream::{deposit_line, random_stream, with_fresh_ids, DEFINITIONS};
use venue_support::{
    command_for, decodes_sanely, owned_command, split_venue_snapshot, Forks, Harness, BTC_USD,
    ETH_USD,
};

// ----------------------------------------------------------------------------------
// Harness (see `venue_support`)

fn asset_id(harness: &Harness, name: &str) -> AssetId {
    harness.venue.exchange().find_asset(name).expect("the asset exists")
}

// ----------------------------------------------------------------------------------
// Records

#[test]
fn an_accepted_limit_order_creates_an_open_record_in_engine_units() {
    let mut harness = Harness::funded(true);
    let fed = harness.ok(buy("alice", "o1", "100", "2.5").with("ts", 7_000).stp("cancel_both"));
    let record = harness.record("alice", "o1");
    assert_eq!(
        record,
        OrderRecord {
            order_id: OrderId(fed.seq),
            account: harness.account("alice"),
            client_id: "o1".into(),
            instrument: BTC_USD,
            side: Side::Buy,
            kind: OrderKind::Limit,
            time_in_force: TimeInForce::GoodTillCancel,
            offset: Offset::Open,
            post_only: false,
            stp: StpMode::CancelBoth,
            // Tick 1: price units are whole USD; lot 0.01: qty units are hundredths.
            price: Some(Price(100)),
            qty: Qty(250),
            quote_qty: None,
            remaining: Qty(250),
            filled: Qty::ZERO,
            status: OrderStatus::Open,
            created_ns: TimestampNs(7_000),
            updated_ns: TimestampNs(7_000),
        }
    );
    let activity = harness.activity();
    assert_eq!(activity.order(OrderId(fed.seq)), Some(&record));
    assert_eq!(activity.order_count(), 1);
    assert_eq!(harness.open_ids("alice"), ["o1"]);
    assert!(harness.finished_ids("alice").is_empty() && harness.fills("alice").is_empty());

    let fed = harness
        .ok(sell("bob", "s1", "101.00", "1").on("ETH-USD").post_only().with("price", "101.25"));
    let record = harness.record("bob", "s1");
    assert_eq!(record.order_id, OrderId(fed.seq));
    assert_eq!((record.instrument, record.side, record.post_only), (ETH_USD, Side::Sell, true));
    // ETH-USD: tick 0.01 (price in cents), lot 1.
    assert_eq!((record.price, record.qty), (Some(Price(10_125)), Qty(1)));
    // No ts: the previous command's time.
    assert_eq!((record.created_ns, record.updated_ns), (TimestampNs(7_000), TimestampNs(7_000)));
}

#[test]
fn a_rejected_order_never_creates_a_record() {
    let mut harness = Harness::funded(true);
    let rejected = [
        buy("alice", "o1", "100", "2").on("NOPE-USD"),
        buy("alice", "o1", "100.5", "2"),
        buy("alice", "o1", "100", "0.001"),
        buy("alice", "o1", "100000", "100"),
        buy("zed", "o1", "100", "1"),
        market_buy("alice", "o1", "1"),
        sell("alice", "o1", "1", "1").post_only(),
    ];
    harness.ok(buy("bob", "b1", "1", "1"));
    for line in rejected {
        let fed = harness.feed(line);
        assert_eq!(fed.events.len(), 1, "{:?}", fed.events);
        assert_eq!(fed.events[0]["ev"], "rejected", "{:?}", fed.events);
        assert!(harness.activity().order_by_client(harness.account("alice"), "o1").is_none());
        assert!(harness.activity().order(OrderId(fed.seq)).is_none());
    }
    assert_eq!(harness.activity().order_count(), 1);
    // Never remembered, so the id is free.
    harness.ok(buy("alice", "o1", "100", "1"));
}

#[test]
fn a_trade_fills_maker_and_taker_and_gives_each_account_a_fill() {
    let mut harness = Harness::funded(true);
    let maker = harness.ok(sell("bob", "s1", "100", "10").on("ETH-USD").with("ts", 100));
    let taker = harness.ok(buy("alice", "b1", "100.5", "4").on("ETH-USD").with("ts", 200));
    assert_events(
        &taker,
        &[
            r#"{"ev":"accepted","account":"alice","id":"b1"}"#,
            r#"{"ev":"trade","symbol":"ETH-USD","price":"100","qty":"4","taker_side":"buy","maker_account":"bob","maker_id":"s1","taker_account":"alice","taker_id":"b1","maker_fee":"0.4","taker_fee":"0.01"}"#,
            r#"{"ev":"done","account":"alice","id":"b1","reason":"filled","filled":"4"}"#,
        ],
    );
    let s1 = harness.record("bob", "s1");
    assert_eq!((s1.remaining, s1.filled, s1.status), (Qty(6), Qty(4), OrderStatus::Open));
    assert_eq!((s1.created_ns, s1.updated_ns), (TimestampNs(100), TimestampNs(200)));
    let b1 = harness.record("alice", "b1");
    assert_eq!(
        (b1.qty, b1.remaining, b1.filled, b1.status),
        (Qty(4), Qty(0), Qty(4), OrderStatus::Filled)
    );
    assert_eq!(harness.finished_ids("alice"), ["b1"]);
    assert_eq!(harness.open_ids("bob"), ["s1"]);

    let usd = asset_id(&harness, "USD");
    let eth = asset_id(&harness, "ETH");
    // The maker sold: it received 400 USD and paid 10 bps of it, 0.40 USD (40 cents).
    assert_eq!(
        harness.fills("bob"),
        [Fill {
            seq: Seq(taker.seq),
            trade_index: 0,
            order_id: OrderId(maker.seq),
            client_id: "s1".into(),
            instrument: ETH_USD,
            side: Side::Sell,
            price: Price(10_000),
            qty: Qty(4),
            fee: Amount(40),
            fee_asset: usd,
            liquidity: Liquidity::Maker,
            ts_ns: TimestampNs(200),
        }]
    );
    // The taker bought: it received 4 ETH and paid 25 bps of it, 0.010 ETH.
    assert_eq!(
        harness.fills("alice"),
        [Fill {
            seq: Seq(taker.seq),
            trade_index: 0,
            order_id: OrderId(taker.seq),
            client_id: "b1".into(),
            instrument: ETH_USD,
            side: Side::Buy,
            price: Price(10_000),
            qty: Qty(4),
            fee: Amount(10),
            fee_asset: eth,
            liquidity: Liquidity::Taker,
            ts_ns: TimestampNs(200),
        }]
    );
}

#[test]
fn a_sell_taker_receives_quote_and_a_buy_maker_receives_base() {
    let mut harness = Harness::funded(true);
    harness.ok(buy("bob", "b1", "100", "10").on("ETH-USD"));
    harness.ok(sell("alice", "s1", "99", "3").on("ETH-USD"));
    let bob = harness.fills("bob");
    let alice = harness.fills("alice");
    // Bob receives 3 ETH (3,000 units), 10 bps: 3. Alice receives 300 USD, 25 bps: 75 cents.
    assert_eq!(
        (bob[0].side, bob[0].liquidity, bob[0].fee),
        (Side::Buy, Liquidity::Maker, Amount(3))
    );
    assert_eq!(bob[0].fee_asset, asset_id(&harness, "ETH"));
    assert_eq!(
        (alice[0].side, alice[0].liquidity, alice[0].fee),
        (Side::Sell, Liquidity::Taker, Amount(75))
    );
    assert_eq!(alice[0].fee_asset, asset_id(&harness, "USD"));
}

#[test]
fn trade_index_counts_the_trades_of_one_command() {
    let mut harness = Harness::funded(true);
    harness.ok(sell("bob", "s1", "100", "1"));
    harness.ok(sell("carol", "s2", "101", "1"));
    harness.ok(sell("bob", "s3", "102", "0.5"));
    let taker = harness.ok(buy("alice", "b1", "102", "2.5"));
    let positions: Vec<(Seq, u32, String)> = harness
        .fills("alice")
        .iter()
        .map(|fill| (fill.seq, fill.trade_index, fill.client_id.to_string()))
        .collect();
    assert_eq!(
        positions,
        [
            (Seq(taker.seq), 0, "b1".into()),
            (Seq(taker.seq), 1, "b1".into()),
            (Seq(taker.seq), 2, "b1".into())
        ]
    );
    let bob: Vec<(u32, String)> =
        harness.fills("bob").iter().map(|f| (f.trade_index, f.client_id.to_string())).collect();
    assert_eq!(bob, [(0, "s1".into()), (2, "s3".into())]);
    assert_eq!(harness.fills("carol")[0].trade_index, 1);
    let b1 = harness.record("alice", "b1");
    assert_eq!((b1.filled, b1.remaining, b1.status), (Qty(250), Qty(0), OrderStatus::Filled));
    assert_eq!(harness.finished_ids("bob"), ["s1", "s3"]);
}

#[test]
fn a_self_trade_gives_the_account_both_fills_maker_first() {
    let mut harness = Harness::funded(true);
    harness.ok(sell("alice", "s1", "100", "1").stp("none"));
    let taker = harness.ok(buy("alice", "b1", "100", "1").stp("none"));
    let fills = harness.fills("alice");
    let sides: Vec<_> = fills.iter().map(|f| (f.seq, f.trade_index, f.liquidity, f.side)).collect();
    assert_eq!(
        sides,
        [
            (Seq(taker.seq), 0, Liquidity::Maker, Side::Sell),
            (Seq(taker.seq), 0, Liquidity::Taker, Side::Buy)
        ]
    );
    assert_eq!(harness.finished_ids("alice"), ["s1", "b1"]);
}

#[test]
fn done_sets_the_status_and_moves_the_order_to_the_finished_ones() {
    let mut harness = Harness::funded(true);
    // filled (maker), canceled, expired (ioc remainder), stp (taker and maker).
    harness.ok(sell("bob", "s1", "100", "1"));
    harness.ok(buy("alice", "b1", "100", "1"));
    harness.ok(buy("bob", "b2", "90", "1").with("ts", 50));
    let canceled = harness.ok(cancel("bob", "b2").with("ts", 60));
    harness.ok(sell("carol", "s3", "101", "1"));
    harness.ok(buy("alice", "b3", "101", "2").tif("ioc"));
    harness.ok(sell("alice", "s4", "120", "1"));
    harness.ok(buy("alice", "b4", "120", "1").stp("cancel_taker"));
    harness.ok(sell("carol", "s5", "110", "1"));
    harness.ok(buy("carol", "b5", "110", "1").stp("cancel_maker"));

    let status = |account: &str, id: &str| {
        let record = harness.record(account, id);
        (record.status, record.remaining, record.filled)
    };
    assert_eq!(status("bob", "s1"), (OrderStatus::Filled, Qty(0), Qty(100)));
    assert_eq!(status("bob", "b2"), (OrderStatus::Canceled, Qty(0), Qty(0)));
    assert_eq!(status("alice", "b3"), (OrderStatus::Expired, Qty(0), Qty(100)));
    assert_eq!(status("alice", "b4"), (OrderStatus::SelfTradePrevented, Qty(0), Qty(0)));
    assert_eq!(status("carol", "s5"), (OrderStatus::SelfTradePrevented, Qty(0), Qty(0)));
    assert_eq!(status("alice", "s4").0, OrderStatus::Open);
    assert_eq!(status("carol", "b5").0, OrderStatus::Open);
    let b2 = harness.record("bob", "b2");
    assert_eq!(
        (b2.created_ns, b2.updated_ns, b2.order_id.0 + 1),
        (TimestampNs(50), TimestampNs(60), canceled.seq)
    );
    assert_eq!(harness.finished_ids("alice"), ["b1", "b3", "b4"]);
    assert_eq!(harness.open_ids("alice"), ["s4"]);
    assert_eq!(harness.finished_ids("carol"), ["s3", "s5"]);
    assert_eq!(harness.open_ids("carol"), ["b5"]);
    let codes: Vec<&str> = OrderStatus::ALL.iter().map(|status| status.code()).collect();
    assert_eq!(codes, ["open", "filled", "canceled", "expired", "stp"]);
}

#[test]
fn an_order_done_in_its_own_command_is_created_then_finished() {
    let mut harness = Harness::funded(true);
    harness.ok(sell("bob", "s1", "100", "1"));
    harness.ok(buy("carol", "c1", "90", "1"));
    // ioc, fok that cannot fill, post-only ioc, market (gtc taken as ioc), market fok.
    let ioc = harness.ok(buy("alice", "ioc", "99", "1").tif("ioc"));
    harness.ok(buy("alice", "fok", "100", "2").tif("fok"));
    harness.ok(buy("alice", "po", "99", "1").tif("ioc").post_only());
    let market = harness.ok(market_buy("alice", "mkt", "0.5").tif("gtc").post_only());
    harness.ok(market_sell("alice", "mfok", "5").tif("fok"));
    assert!(harness.open_ids("alice").is_empty());
    assert_eq!(harness.finished_ids("alice"), ["ioc", "fok", "po", "mkt", "mfok"]);

    let record = harness.record("alice", "ioc");
    assert_eq!(record.order_id, OrderId(ioc.seq));
    assert_eq!(
        (record.status, record.filled, record.qty),
        (OrderStatus::Expired, Qty(0), Qty(100))
    );
    let record = harness.record("alice", "po");
    assert_eq!((record.status, record.post_only), (OrderStatus::Expired, true));
    let record = harness.record("alice", "mkt");
    assert_eq!(record.order_id, OrderId(market.seq));
    assert_eq!(
        (record.kind, record.price, record.time_in_force, record.post_only),
        (OrderKind::Market, None, TimeInForce::ImmediateOrCancel, false)
    );
    assert_eq!((record.status, record.qty, record.filled), (OrderStatus::Filled, Qty(50), Qty(50)));
    let record = harness.record("alice", "mfok");
    assert_eq!((record.kind, record.time_in_force), (OrderKind::Market, TimeInForce::FillOrKill));
    assert_eq!((record.status, record.filled), (OrderStatus::Expired, Qty(0)));
    assert_eq!((OrderKind::Limit.code(), OrderKind::Market.code()), ("limit", "market"));
    assert_eq!((Liquidity::Maker.code(), Liquidity::Taker.code()), ("maker", "taker"));
}

#[test]
fn amend_sets_price_and_remaining_but_keeps_the_submitted_qty() {
    let mut harness = Harness::funded(true);
    harness.ok(buy("alice", "b1", "100", "5").with("ts", 10));
    harness.ok(amend_qty("alice", "b1", "3").with("ts", 20));
    let record = harness.record("alice", "b1");
    assert_eq!(
        (record.price, record.qty, record.remaining),
        (Some(Price(100)), Qty(500), Qty(300))
    );
    assert_eq!((record.created_ns, record.updated_ns), (TimestampNs(10), TimestampNs(20)));
    harness.ok(sell("bob", "s1", "105", "1"));
    harness.ok(sell("bob", "s2", "104", "1"));
    // Moves to 105 and trades as a taker with both asks (104 first), then rests 1.
    let moved = harness.ok(amend("alice", "b1", "105", "3").with("ts", 30));
    let record = harness.record("alice", "b1");
    assert_eq!(
        (record.price, record.qty, record.remaining, record.filled, record.status),
        (Some(Price(105)), Qty(500), Qty(100), Qty(200), OrderStatus::Open)
    );
    assert_eq!(record.updated_ns, TimestampNs(30));
    let fills: Vec<_> = harness
        .fills("alice")
        .iter()
        .map(|f| (f.seq, f.trade_index, f.liquidity, f.price, f.order_id))
        .collect();
    assert_eq!(
        fills,
        [
            (Seq(moved.seq), 0, Liquidity::Taker, Price(104), record.order_id),
            (Seq(moved.seq), 1, Liquidity::Taker, Price(105), record.order_id)
        ]
    );
    // Amended to nothing left but what was filled, then filled by a taker.
    harness.ok(amend_price("alice", "b1", "99"));
    harness.ok(sell("carol", "s3", "99", "1"));
    let record = harness.record("alice", "b1");
    assert_eq!(
        (record.status, record.filled, record.qty),
        (OrderStatus::Filled, Qty(300), Qty(500))
    );
    assert_eq!(record.price, Some(Price(99)));
}

#[test]
fn open_orders_ascend_by_order_id_and_finished_ones_are_oldest_finished_first() {
    let mut harness = Harness::funded(true);
    for id in ["a", "b", "c", "d"] {
        harness.ok(buy("alice", id, "90", "1"));
    }
    harness.ok(cancel("alice", "c"));
    harness.ok(cancel("alice", "a"));
    // Losing priority does not change an order's id or its place among the open ones.
    harness.ok(amend_price("alice", "b", "91"));
    harness.ok(buy("alice", "e", "90", "1"));
    assert_eq!(harness.open_ids("alice"), ["b", "d", "e"]);
    assert_eq!(harness.finished_ids("alice"), ["c", "a"]);
    let ids: Vec<u64> =
        harness.activity().open_orders(harness.account("alice")).map(|r| r.order_id.0).collect();
    assert!(ids.windows(2).all(|pair| pair[0] < pair[1]), "{ids:?}");
    assert_eq!(harness.activity().open_order_count(harness.account("alice")), 3);
    assert_eq!(harness.activity().finished_order_count(harness.account("alice")), 2);
    assert!(harness.activity().open_orders(AccountId(999)).next().is_none());
    assert!(harness.activity().fills(AccountId(999)).next().is_none());
}

// ----------------------------------------------------------------------------------
// The reuse rule

#[test]
fn a_finished_id_is_rejected_duplicate_id_while_remembered() {
    let mut harness = Harness::funded(true);
    let first = harness.ok(buy("alice", "o1", "100", "1"));
    harness.ok(cancel("alice", "o1"));
    let before = harness.encoded();
    let fed = harness.feed(buy("alice", "o1", "100", "1").with("ts", 5_000));
    assert_events(
        &fed,
        &[r#"{"ev":"rejected","reason":"duplicate_id","account":"alice","id":"o1"}"#],
    );
    let record = harness.record("alice", "o1");
    assert_eq!((record.order_id, record.status), (OrderId(first.seq), OrderStatus::Canceled));
    // Nothing changed but the exchange's time: the activity is the same, and the
    // exchange is the one before with its time moved (by a command that changes
    // nothing else).
    let after = harness.encoded();
    let (state_before, activity_before) = split_venue_snapshot(&before);
    let (state_after, activity_after) = split_venue_snapshot(&after);
    assert!(activity_before == activity_after);
    let mut moved = decode_venue(state_before, ExchangeConfig::default(), false).unwrap();
    let nothing = cancel("nobody", "none").to_string();
    let nothing = parse_line(&nothing).unwrap().command;
    moved.apply(Seq(fed.seq), Some(TimestampNs(5_000)), &nothing, &mut Vec::new());
    assert!(state_bytes(moved.exchange()) == state_after);
    assert_eq!(harness.venue.exchange().time_ns(), TimestampNs(5_000));
    // Other accounts and other ids are not affected.
    harness.ok(buy("bob", "o1", "100", "1"));
    harness.ok(buy("alice", "o2", "100", "1"));
}

#[test]
fn without_activity_a_finished_id_is_accepted_again_as_the_spec_says() {
    let mut harness = Harness::funded(true);
    let mut plain = Harness::new(false);
    let lines = [
        buy("alice", "o1", "100", "1").to_string(),
        cancel("alice", "o1").to_string(),
        buy("alice", "o1", "100", "1").to_string(),
    ];
    // Bring the plain venue to the same definitions and funds.
    let setup: Vec<String> = {
        let mut lines = vec![
            asset("BTC", 8).to_string(),
            asset("USD", 2).to_string(),
            asset("ETH", 3).to_string(),
            instrument("BTC-USD", "BTC", "USD").to_string(),
            instrument("ETH-USD", "ETH", "USD").to_string(),
        ];
        for account in ["alice", "bob", "carol"] {
            for (asset, amount) in [("BTC", "10"), ("USD", "100000"), ("ETH", "100")] {
                lines.push(deposit(account, asset, amount).to_string());
            }
        }
        lines
    };
    for line in &setup {
        plain.ok(line);
    }
    for line in &lines[..2] {
        harness.ok(line);
        plain.ok(line);
    }
    assert_eq!(harness.feed(&lines[2]).events[0]["reason"], "duplicate_id");
    plain.ok(&lines[2]);
    assert!(plain.venue.activity().is_none());
}

#[test]
fn a_finished_id_is_accepted_again_once_newer_finishes_forget_it() {
    let mut harness = Harness::funded(true);
    harness.ok(buy("alice", "o1", "100", "1"));
    harness.ok(cancel("alice", "o1"));
    // FINISHED_ORDERS_KEPT - 1 newer finishes: o1 is still remembered.
    for number in 0..FINISHED_ORDERS_KEPT - 1 {
        harness.ok(buy("alice", &format!("f{number}"), "1", "0.1").tif("ioc"));
    }
    assert_eq!(
        harness.activity().finished_order_count(harness.account("alice")),
        FINISHED_ORDERS_KEPT
    );
    assert_eq!(harness.finished_ids("alice")[0], "o1");
    assert_eq!(harness.feed(buy("alice", "o1", "100", "1")).events[0]["reason"], "duplicate_id");
    // One more: o1 is forgotten, its id and order id with it.
    let order_id = harness.record("alice", "o1").order_id;
    harness.ok(buy("alice", "last", "1", "0.1").tif("ioc"));
    assert_eq!(
        harness.activity().finished_order_count(harness.account("alice")),
        FINISHED_ORDERS_KEPT
    );
    assert_eq!(harness.finished_ids("alice")[0], "f0");
    assert!(harness.activity().order(order_id).is_none());
    assert!(harness.activity().order_by_client(harness.account("alice"), "o1").is_none());
    let again = harness.ok(buy("alice", "o1", "100", "1"));
    assert_eq!(harness.record("alice", "o1").order_id, OrderId(again.seq));
    assert_eq!(harness.record("alice", "o1").status, OrderStatus::Open);
    // f0 is next to go: still rejected now.
    assert_eq!(harness.feed(buy("alice", "f0", "100", "1")).events[0]["reason"], "duplicate_id");
}

#[test]
fn an_open_id_is_rejected_by_the_exchange_as_before() {
    let mut harness = Harness::funded(true);
    let first = harness.ok(buy("alice", "o1", "100", "1"));
    let fed = harness.feed(sell("alice", "o1", "200", "1").on("ETH-USD"));
    assert_events(
        &fed,
        &[r#"{"ev":"rejected","reason":"duplicate_id","account":"alice","id":"o1"}"#],
    );
    let record = harness.record("alice", "o1");
    assert_eq!(
        (record.order_id, record.status, record.instrument),
        (OrderId(first.seq), OrderStatus::Open, BTC_USD)
    );
    assert_eq!(harness.activity().order_count(), 1);
}

#[test]
fn an_unknown_symbol_comes_before_the_reuse_rule() {
    let mut harness = Harness::funded(true);
    harness.ok(buy("alice", "o1", "100", "1").tif("ioc"));
    let fed = harness.feed(buy("alice", "o1", "100", "1").on("DOGE-USD"));
    assert_events(
        &fed,
        &[r#"{"ev":"rejected","reason":"unknown_symbol","account":"alice","id":"o1"}"#],
    );
    // Cancels and amends of a finished order: unknown_order, as before.
    let fed = harness.feed(cancel("alice", "o1"));
    assert_events(
        &fed,
        &[r#"{"ev":"rejected","reason":"unknown_order","account":"alice","id":"o1"}"#],
    );
    let fed = harness.feed(amend_price("alice", "o1", "101"));
    assert_events(
        &fed,
        &[r#"{"ev":"rejected","reason":"unknown_order","account":"alice","id":"o1"}"#],
    );
}

#[test]
fn the_reuse_rule_holds_for_accounts_named_by_id_and_echoes_the_name() {
    let mut harness = Harness::funded(true);
    harness.ok(buy("alice", "o1", "100", "1").tif("ioc"));
    let alice = harness.account("alice");
    let line = buy("alice", "o1", "100", "1").with("ts", 9_000).to_string();
    let mut command = parse_line(&line).unwrap().command;
    *command.account_mut().unwrap() = AccountRef::Id(alice);
    let events = harness.apply(&command, Some(TimestampNs(9_000)));
    assert_eq!(
        events,
        [
            serde_json::json!({"ev":"rejected","seq":harness.seq,"reason":"duplicate_id","account":"alice","id":"o1"})
        ]
    );
    assert_eq!(harness.venue.exchange().time_ns(), TimestampNs(9_000));
    // An id that names nobody reaches the exchange (insufficient funds).
    *command.account_mut().unwrap() = AccountRef::Id(AccountId(50));
    let events = harness.apply(&command, None);
    assert_eq!(events[0]["reason"], "insufficient_funds");
}

// ----------------------------------------------------------------------------------
// Limits

#[test]
fn an_account_keeps_its_latest_fills() {
    let mut harness = Harness::funded(true);
    harness.ok(instrument("BIG-USD", "ETH", "USD")
        .with("lot", "1")
        .with("min_qty", "1")
        .with("max_qty", "100000"));
    harness.ok(deposit("bob", "ETH", "10000"));
    harness.ok(sell("bob", "s1", "1", "2000").on("BIG-USD"));
    let extra = 5;
    let mut last = 0;
    for number in 0..FILLS_KEPT + extra {
        last = harness.ok(buy("alice", &format!("b{number}"), "1", "1").on("BIG-USD")).seq;
    }
    let fills = harness.fills("bob");
    assert_eq!(fills.len(), FILLS_KEPT);
    assert_eq!(harness.activity().fill_count(harness.account("bob")), FILLS_KEPT);
    // The oldest `extra` are forgotten; the newest is last.
    assert!(fills.iter().all(|fill| fill.client_id == "s1" && fill.liquidity == Liquidity::Maker));
    assert_eq!(fills[FILLS_KEPT - 1].seq, Seq(last));
    assert_eq!(fills[0].seq, Seq(last - FILLS_KEPT as u64 + 1));
    assert_eq!(harness.record("bob", "s1").filled, Qty((FILLS_KEPT + extra) as i64));
    assert_eq!(harness.fills("alice").len(), FILLS_KEPT);
    // Alice's finished orders are capped too, and her records with them.
    let alice = harness.account("alice");
    assert_eq!(harness.activity().finished_order_count(alice), FINISHED_ORDERS_KEPT);
    assert_eq!(harness.finished_ids("alice")[0], format!("b{extra}"));
    assert_eq!(harness.activity().order_count(), FINISHED_ORDERS_KEPT + 1);
}

// ----------------------------------------------------------------------------------
// Venue::new over an exchange with open orders

#[test]
fn a_venue_over_an_exchange_with_open_orders_rebuilds_their_records() {
    let mut setup = Harness::funded(true);
    setup.ok(sell("bob", "s1", "101", "2").stp("none"));
    setup.ok(buy("alice", "b1", "99", "1"));
    setup.ok(buy("carol", "b2", "100", "3").post_only());
    setup.ok(sell("alice", "s2", "101", "1"));
    setup.ok(buy("alice", "b3", "101", "0.5").with("ts", 4_242));
    setup.ok(buy("bob", "e1", "10", "1").on("ETH-USD"));
    let (exchange, _) =
        std::mem::replace(&mut setup.venue, Venue::new(Exchange::default(), false)).into_parts();
    let venue = Venue::new(exchange, true);
    venue.check_invariants().expect("rebuilt records match the books");
    let activity = venue.activity().unwrap();
    let ledger = venue.exchange().ledger();
    let id = |name: &str| ledger.find_account(name).unwrap();
    // Walk: BTC-USD bids (b2 at 100, b1 at 99), asks (s1 at 101, then s2), ETH-USD bids.
    let expected = [
        ("carol", "b2", 1),
        ("alice", "b1", 2),
        ("bob", "s1", 3),
        ("alice", "s2", 4),
        ("bob", "e1", 5),
    ];
    for (account, client_id, order_id) in expected {
        let record = activity.order_by_client(id(account), client_id).unwrap();
        assert_eq!(record.order_id, OrderId(order_id), "{account} {client_id}");
        assert_eq!(activity.order(OrderId(order_id)), Some(record));
        assert_eq!(
            (record.kind, record.time_in_force),
            (OrderKind::Limit, TimeInForce::GoodTillCancel)
        );
        assert_eq!(
            (record.created_ns, record.updated_ns),
            (TimestampNs(4_242), TimestampNs(4_242))
        );
        assert_eq!(record.qty, Qty(record.remaining.0 + record.filled.0));
    }
    let s1 = activity.order_by_client(id("bob"), "s1").unwrap();
    assert_eq!(
        (s1.qty, s1.remaining, s1.filled, s1.stp),
        (Qty(200), Qty(150), Qty(50), StpMode::None)
    );
    assert!(activity.order_by_client(id("carol"), "b2").unwrap().post_only);
    assert_eq!(activity.order_count(), 5);
    assert_eq!(activity.fill_count(id("alice")), 0);
    let mut harness = Harness { venue, seq: 100 };
    harness.ok(cancel("alice", "b1"));
    assert_eq!(harness.feed(buy("alice", "b1", "99", "1")).events[0]["reason"], "duplicate_id");
    let fed = harness.ok(buy("alice", "b4", "98", "1"));
    assert_eq!(harness.open_ids("alice"), ["s2", "b4"]);
    assert_eq!(harness.record("alice", "b4").order_id, OrderId(fed.seq));
}

// ----------------------------------------------------------------------------------
// Snapshots

#[test]
fn a_venue_without_activity_snapshots_as_its_exchange() {
    let mut harness = Harness::funded(true);
    harness.ok(buy("alice", "b1", "99", "1"));
    let (exchange, _) =
        std::mem::replace(&mut harness.venue, Venue::new(Exchange::default(), false)).into_parts();
    let venue = Venue::new(exchange, false);
    let state = state_bytes(venue.exchange());
    assert!(venue_bytes(&venue) == state);
    // An exchange snapshot decodes into a venue with or without activity.
    let plain = decode_venue(&state, ExchangeConfig::default(), false).unwrap();
    assert!(plain.activity().is_none());
    let tracking = decode_venue(&state, ExchangeConfig::default(), true).unwrap();
    let rebuilt = Venue::new(
        decode_venue(&state, ExchangeConfig::default(), false).unwrap().into_parts().0,
        true,
    );
    assert!(venue_bytes(&tracking) == venue_bytes(&rebuilt));
    assert_eq!(tracking.activity().unwrap().order_count(), 1);
    assert!(venue_bytes(&tracking).starts_with(&VENUE_MAGIC));
}

#[test]
fn a_venue_snapshot_round_trips_and_decodes_without_activity_too() {
    let mut harness = Harness::funded(true);
    harness.ok(sell("bob", "s1", "100", "3").with("ts", 10));
    harness.ok(buy("alice", "b1", "100", "1").with("ts", 20));
    harness.ok(buy("alice", "b2", "90", "1").tif("ioc"));
    harness.ok(market_buy("carol", "m1", "0.5"));
    harness.ok(buy("carol", "long-client-order-id-beyond-24-bytes", "95", "1"));
    let bytes = harness.encoded();
    assert!(bytes.starts_with(&VENUE_MAGIC));
    let restored = decode_venue(&bytes, ExchangeConfig::default(), true).unwrap();
    restored.check_invariants().unwrap();
    assert!(venue_bytes(&restored) == bytes);
    let activity = restored.activity().unwrap();
    let alice = restored.exchange().ledger().find_account("alice").unwrap();
    let original = harness.activity();
    assert!(activity.finished_orders(alice).eq(original.finished_orders(alice)));
    assert!(activity.fills(alice).eq(original.fills(alice)));
    let without = decode_venue(&bytes, ExchangeConfig::default(), false).unwrap();
    assert!(without.activity().is_none());
    assert!(state_bytes(without.exchange()) == state_bytes(harness.venue.exchange()));
}

/// Bob's ask s1 100 x 1 on BTC-USD; alice spends `quote_qty` on it.
fn spent(quote_qty: &str) -> (Harness, OrderRecord) {
    let mut harness = Harness::funded(true);
    harness.ok(sell("bob", "s1", "100", "1"));
    harness.ok(spend("alice", "m1", quote_qty).with("ts", 5_000));
    let record = harness.record("alice", "m1");
    (harness, record)
}

#[test]
fn a_spend_amount_buy_is_remembered_with_its_quote_qty_and_what_it_bought() {
    let (harness, record) = spent("55.55");
    assert_eq!(
        record,
        OrderRecord {
            order_id: OrderId(harness.seq),
            account: harness.account("alice"),
            client_id: "m1".into(),
            instrument: BTC_USD,
            side: Side::Buy,
            kind: OrderKind::Market,
            time_in_force: TimeInForce::ImmediateOrCancel,
            offset: Offset::Open,
            post_only: false,
            stp: StpMode::CancelTaker,
            price: None,
            // What it bought: 0.55 BTC in hundredths; 55.55 USD in cents.
            qty: Qty(55),
            quote_qty: Some(Amount(5_555)),
            remaining: Qty::ZERO,
            filled: Qty(55),
            status: OrderStatus::Filled,
            created_ns: TimestampNs(5_000),
            updated_ns: TimestampNs(5_000),
        }
    );
    let fills = harness.fills("alice");
    assert_eq!(fills.len(), 1);
    assert_eq!((fills[0].price, fills[0].qty), (Price(100), Qty(55)));
}

#[test]
fn a_spend_amount_buy_that_bought_nothing_is_remembered_with_nothing_bought() {
    let (_, record) = spent("0.99");
    assert_eq!(record.status, OrderStatus::Expired);
    assert_eq!(
        (record.qty, record.filled, record.quote_qty),
        (Qty::ZERO, Qty::ZERO, Some(Amount(99)))
    );
}

#[test]
fn a_venue_with_a_spend_amount_buy_snapshots_as_version_2_and_round_trips() {
    let (harness, _) = spent("55.55");
    let bytes = harness.encoded();
    assert_eq!(bytes[8..12], VENUE_QUOTE_QTY_FORMAT_VERSION.to_le_bytes());
    let restored = decode_venue(&bytes, ExchangeConfig::default(), true).unwrap();
    restored.check_invariants().unwrap();
    assert!(venue_bytes(&restored) == bytes);
    let alice = restored.exchange().ledger().find_account("alice").unwrap();
    let record = restored.activity().unwrap().order_by_client(alice, "m1").unwrap();
    assert_eq!(*record, harness.record("alice", "m1"));
    // Under version 1, the record's flag is unknown.
    let mut as_version_1 = bytes.clone();
    as_version_1[8] = 1;
    match decode_venue(&as_version_1, ExchangeConfig::default(), true) {
        Err(SnapshotError::Invalid { what, .. }) => assert_eq!(what, "unknown order flags"),
        other => panic!("{:?}", other.map(|_| ())),
    }
    // A venue whose records hold none (rebuilt from the same exchange): version 1.
    let (mut plain, _) = spent("55.55");
    plain.venue = Venue::new(plain.venue.into_parts().0, true);
    assert_eq!(plain.encoded()[8..12], VENUE_FORMAT_VERSION.to_le_bytes());
}

#[test]
fn each_kind_of_bad_venue_snapshot_has_its_error() {
    let mut harness = Harness::funded(true);
    harness.ok(buy("alice", "opA", "90", "1"));
    harness.ok(buy("alice", "fiA", "90", "1").tif("ioc"));
    harness.ok(buy("alice", "fiB", "90", "1").tif("ioc"));
    let bytes = harness.encoded();
    let decode = |bytes: &[u8]| decode_venue(bytes, ExchangeConfig::default(), true).map(|_| ());
    assert!(decode(&bytes).is_ok());
    // Where the activity starts: after the magic, the version, the length and the state.
    let (state, activity) = split_venue_snapshot(&bytes);
    let state_at = bytes.len() - activity.len() - state.len();
    let activity_at = bytes.len() - activity.len();

    assert_eq!(decode(&bytes[..4]), Err(SnapshotError::Truncated { offset: 4 }));
    assert_eq!(decode(b"BOURSV"), Err(SnapshotError::Truncated { offset: 6 }));
    assert_eq!(decode(b"BOURSVEX and more"), Err(SnapshotError::BadMagic));
    let mut version = bytes.clone();
    version[8] = 3;
    assert_eq!(decode(&version), Err(SnapshotError::UnsupportedVersion(3)));
    assert_eq!((VENUE_FORMAT_VERSION, VENUE_QUOTE_QTY_FORMAT_VERSION), (1, 2));
    // Version 2 only for a venue with a spend-amount buy among its records.
    version[8] = 2;
    assert_eq!(
        decode(&version),
        Err(SnapshotError::Invalid {
            offset: 8,
            what: "a version 2 venue snapshot without a spend-amount buy (stored as version 1)"
                .into()
        })
    );
    let mut trailing = bytes.clone();
    trailing.push(0);
    assert_eq!(
        decode(&trailing),
        Err(SnapshotError::Invalid {
            offset: bytes.len(),
            what: "bytes after the end of the snapshot".into()
        })
    );
    // The state's own magic broken: reported inside the container.
    let error = decode(&patched(&bytes, 0, b"BOURSNAP", b"BOURSNAX")).unwrap_err();
    assert_eq!(
        error,
        SnapshotError::Invalid {
            offset: 14,
            what: "the venue's exchange state is not a snapshot".into()
        }
    );
    // A state length beyond the bytes.
    let mut long = bytes[..12].to_vec();
    long.extend_from_slice(&[0xff, 0xff, 0x03]);
    long.extend_from_slice(&bytes[state_at..]);
    assert!(matches!(decode(&long), Err(SnapshotError::Truncated { .. })));
    // Two finished orders with one client id.
    let error = decode(&patched(&bytes, activity_at, b"fiB", b"fiA")).unwrap_err();
    assert!(error.to_string().contains("two orders with one client id"), "{error}");
    // An open record that is not the exchange's open order.
    let error = decode(&patched(&bytes, activity_at, b"opA", b"opB")).unwrap_err();
    assert!(error.to_string().contains("differs from the exchange's open order"), "{error}");
    // An unknown status.
    let error =
        decode(&patched(&bytes, activity_at, b"fiA\x00\x04\x03", b"fiA\x00\x04\x09")).unwrap_err();
    assert!(error.to_string().contains("unknown order status"), "{error}");
    // A finished record that claims to be open.
    let error =
        decode(&patched(&bytes, activity_at, b"fiA\x00\x04\x03", b"fiA\x00\x04\x00")).unwrap_err();
    assert_eq!(error.code(), "invalid", "{error}");
    // A gtc flag on an order finished at once is fine; a day order (time in force 3)
    // on a spot instrument is not.
    let error = decode(&patched(&bytes, activity_at, b"fiA\x00\x04", b"fiA\x00\x0c")).unwrap_err();
    assert!(error.to_string().contains("a day order on a spot instrument"), "{error}");
}

// ----------------------------------------------------------------------------------
// Random streams

fn events_of<R>(apply: impl FnOnce(&mut Vec<Event>) -> R) -> Vec<Event> {
    let mut events = Vec::new();
    apply(&mut events);
    events
}

/// What one random stream showed, to check the streams reach what they must.
#[derive(Default, Debug)]
struct Seen {
    reuse_rejections: usize,
    reaccepted_after_forgetting: usize,
    accounts_at_the_finished_limit: usize,
    fills: usize,
}

/// Runs one stream through an `Exchange`, a `Venue` without activity and a `Venue` with
/// it, in lockstep, plus venues restored from the tracking venue's snapshots at `cuts`.
///
/// The plain venue must give exactly the exchange's events. The tracking venue must
/// give the exchange's events except where the order's key names a remembered finished
/// order: it must reject exactly those, `duplicate_id`, echoing the key as the exchange
/// would; the exchange and the plain venue then get a command that changes nothing but
/// the time (a cancel of an id nobody uses), and all three must end in the same
/// exchange state.
fn run_stream(lines: &[String], by_id: bool, cuts: &[usize], seen: &mut Seen) {
    let mut exchange = Exchange::default();
    let mut plain = Venue::new(Exchange::default(), false);
    let mut venue = Venue::new(Exchange::default(), true);
    // Every other fork restored into tiny pools.
    let mut forks = Forks::new(cuts, true, true);
    let mut ever_finished = std::collections::HashSet::new();
    let nothing = parse_line(r#"{"cmd":"cancel","account":"nobody","id":"none"}"#).unwrap().command;
    for index in 0..=lines.len() {
        forks.cut(index, &venue);
        let Some(line) = lines.get(index) else { break };
        let seq = index as u64 + 1;
        let (command, ts) = command_for(line, venue.exchange(), by_id);

        // Does this order's key name a remembered finished order (on a known symbol)?
        let reused = match &command {
            Command::Order(order) => {
                let ledger = venue.exchange().ledger();
                let account = match &order.account {
                    AccountRef::Name(name) => ledger.find_account(name),
                    AccountRef::Id(id) => Some(*id),
                };
                let record = account.and_then(|account| {
                    venue.activity().unwrap().order_by_client(account, &order.id)
                });
                let known_symbol = venue.exchange().find_instrument(&order.symbol).is_some();
                match record {
                    Some(record) if !record.status.is_open() && known_symbol => Some(()),
                    _ => None,
                }
            }
            _ => None,
        };
        let expected = match reused {
            Some(()) => {
                seen.reuse_rejections += 1;
                exchange.apply(Seq(seq), ts, &nothing, &mut Vec::new());
                plain.apply(Seq(seq), ts, &nothing, &mut Vec::new());
                vec![Event::Rejected { seq: Seq(seq), reason: RejectReason::DuplicateId }]
            }
            None => {
                let expected = events_of(|events| exchange.apply(Seq(seq), ts, &command, events));
                let got = events_of(|events| plain.apply(Seq(seq), ts, &command, events));
                assert_eq!(got, expected, "plain venue, seq {seq}: {line}");
                expected
            }
        };
        let got = events_of(|events| venue.apply(Seq(seq), ts, &command, events));
        assert_eq!(got, expected, "seq {seq}: {line}");
        if let Err(problem) = venue.check_invariants() {
            panic!("seq {seq}: {line}: {problem}");
        }
        for event in &got {
            match event {
                Event::Accepted { account: Some(account), .. } => {
                    let Command::Order(order) = &command else { continue };
                    if ever_finished.contains(&(*account, order.id.as_ref().into())) {
                        seen.reaccepted_after_forgetting += 1;
                    }
                }
                Event::Done { account, id, .. } => {
                    ever_finished.insert((*account, id.clone()));
                }
                Event::Trade(_) => seen.fills += 2,
                _ => {}
            }
        }
        forks.follow(Seq(seq), ts, &command, &got, line);
    }
    forks.finish(&venue);
    let final_state = state_bytes(venue.exchange());
    assert!(state_bytes(&exchange) == final_state, "the exchanges differ at the end");
    assert!(state_bytes(plain.exchange()) == final_state);
    let activity = venue.activity().unwrap();
    seen.accounts_at_the_finished_limit += (0..8)
        .filter(|&index| activity.finished_order_count(AccountId(index)) == FINISHED_ORDERS_KEPT)
        .count();
}

#[test]
fn random_streams_give_the_exchanges_events_but_for_reused_finished_ids() {
    let mut seen = Seen::default();
    for seed in 1..=6u64 {
        let lines = random_stream(seed * 7_919, 10_000);
        let mut random = Random(seed * 31 + 1);
        let mut cuts = vec![0, 9, lines.len()];
        cuts.extend((0..4).map(|_| DEFINITIONS.len() + random.below(lines.len() as u64) as usize));
        run_stream(&lines, seed % 2 == 0, &cuts, &mut seen);
    }
    eprintln!("{seen:?}");
    assert!(seen.reuse_rejections > 500, "{seen:?}");
    assert!(seen.reaccepted_after_forgetting > 20, "{seen:?}");
    assert!(seen.accounts_at_the_finished_limit >= 3, "{seen:?}");
    assert!(seen.fills > 5_000, "{seen:?}");
}

/// Runs `lines` of stream `seed` through an `Exchange` and `venue` in lockstep (accounts
/// named by id for seed 2); each command must give exactly the same events, and the
/// venue's invariants must hold at the end. Returns the exchange.
fn run_in_lockstep(lines: &[String], venue: &mut Venue, seed: u64) -> Exchange {
    let mut exchange = Exchange::default();
    for (index, line) in lines.iter().enumerate() {
        let seq = index as u64 + 1;
        let (command, ts) = command_for(line, &exchange, seed == 2);
        let expected = events_of(|events| exchange.apply(Seq(seq), ts, &command, events));
        let got = events_of(|events| venue.apply(Seq(seq), ts, &command, events));
        assert_eq!(got, expected, "seed {seed}, seq {seq}: {line}");
    }
    venue.check_invariants().unwrap();
    exchange
}

#[test]
fn a_venue_without_activity_gives_exactly_the_exchanges_events() {
    for seed in 1..=3u64 {
        let lines = random_stream(seed * 15_485_863, 3_000);
        let mut venue = Venue::new(Exchange::default(), false);
        let exchange = run_in_lockstep(&lines, &mut venue, seed);
        assert!(venue.activity().is_none());
        assert!(venue_bytes(&venue) == state_bytes(&exchange));
    }
}

#[test]
fn with_fresh_ids_a_tracking_venue_gives_exactly_the_exchanges_events() {
    for seed in 1..=3u64 {
        // Every order id fresh: no finished id is ever reused.
        let lines = with_fresh_ids(random_stream(seed * 104_729, 3_000));
        let mut venue = Venue::new(Exchange::default(), true);
        let exchange = run_in_lockstep(&lines, &mut venue, seed);
        assert!(state_bytes(&exchange) == state_bytes(venue.exchange()));
    }
}

// ----------------------------------------------------------------------------------
// Hostile bytes

/// A small venue with every kind of content.
fn small_venue_snapshot(seed: u64, commands: usize) -> Vec<u8> {
    let lines = random_stream(seed, commands);
    let mut venue = Venue::new(Exchange::default(), true);
    let mut events = Vec::new();
    for (index, line) in lines.iter().enumerate() {
        let (command, ts) = command_for(line, venue.exchange(), false);
        venue.apply(Seq(index as u64 + 1), ts, &command, &mut events);
    }
    let activity = venue.activity().unwrap();
    let alice = venue.exchange().ledger().find_account("alice").unwrap();
    assert!(venue.exchange().open_order_count() > 10);
    assert!(activity.finished_order_count(alice) > 10 && activity.fill_count(alice) > 10);
    venue_bytes(&venue)
}

#[test]
fn every_truncation_of_a_venue_snapshot_is_an_error() {
    let bytes = small_venue_snapshot(3, 300);
    for length in 0..bytes.len() {
        let result = decode_venue(&bytes[..length], tiny_config(), true);
        assert!(result.is_err(), "a snapshot cut to {length} of {} bytes decoded", bytes.len());
    }
    assert!(matches!(
        decode_venue(&bytes[..bytes.len() - 1], tiny_config(), true),
        Err(SnapshotError::Truncated { .. })
    ));
}

#[test]
fn flipped_bytes_give_an_error_or_a_consistent_venue() {
    let mut random = Random(0x5eed_f11b);
    let mut accepted = 0;
    for seed in [5u64, 6, 7] {
        let bytes = small_venue_snapshot(seed, 500);
        for _ in 0..1_500 {
            let mut flipped = bytes.clone();
            // Mostly in the activity section, which follows the exchange's state.
            let position = if random.below(4) == 0 {
                random.below(flipped.len() as u64) as usize
            } else {
                flipped.len() - 1 - random.below((flipped.len() / 2) as u64) as usize
            };
            flipped[position] ^= 1 + random.below(255) as u8;
            accepted += usize::from(decodes_sanely(&flipped, true, true));
        }
    }
    assert!(accepted < 2_000, "{accepted} of 4,500 flipped snapshots accepted");
}

#[test]
fn random_bytes_behind_a_venue_header_are_an_error_or_a_consistent_venue() {
    let mut random = Random(0xbad_5eed);
    let state = {
        let mut venue = Venue::new(Exchange::default(), true);
        let mut events = Vec::new();
        for (index, line) in DEFINITIONS.iter().enumerate() {
            let parsed = parse_line(line).unwrap();
            venue.apply(Seq(index as u64 + 1), parsed.ts, &parsed.command, &mut events);
        }
        venue.apply(
            Seq(8),
            None,
            &parse_line(&deposit_line("alice", "USD", 5)).unwrap().command,
            &mut events,
        );
        state_bytes(venue.exchange())
    };
    for round in 0..3_000 {
        let length = random.below(200) as usize;
        let mut tail: Vec<u8> = (0..length).map(|_| random.below(256) as u8).collect();
        assert!(
            decode_venue(&tail, tiny_config(), true).is_err() || tail.is_empty(),
            "round {round}"
        );
        let mut framed = VENUE_MAGIC.to_vec();
        framed.extend_from_slice(&VENUE_FORMAT_VERSION.to_le_bytes());
        if round % 2 == 0 {
            // A valid state, then garbage as the activity.
            framed.extend_from_slice(&varint(state.len() as u64));
            framed.extend_from_slice(&state);
            match round % 8 {
                // The activity flag, no halts, then small counts, so that the garbage
                // reaches the records.
                0 | 4 => framed.extend_from_slice(&[1, 0, 1, 0, 0, 1]),
                // Either flag and a small halted count, so that the garbage reaches
                // the halted instruments.
                2 => framed.extend_from_slice(&[0, 2]),
                6 => framed.extend_from_slice(&[1, 1]),
                _ => {}
            }
        }
        framed.append(&mut tail);
        decodes_sanely(&framed, true, true);
    }
}

// ----------------------------------------------------------------------------------
// Cost

/// How much a tracking venue costs over the bare exchange, on exchange-core's
/// 3,003,003-command stream (parsed up front, so only `apply` is timed; best of three
/// runs each). Run it with
/// `cargo test --release -p bourse-core --test venue -- --ignored --nocapture measure`.
#[test]
#[ignore]
fn measure_the_cost_of_tracking_activity() {
    use std::io::{BufRead, BufReader};
    use std::time::Instant;
    let path = std::path::Path::new(
        &std::env::var("CARGO_MANIFEST_DIR")
            .unwrap_or_else(|_| env!("CARGO_MANIFEST_DIR").to_string()),
    )
    .join("../../../shared/anchors/exchange-core/workload.jsonl.gz");
    let file = std::fs::File::open(&path).expect("the exchange-core stream");
    let reader = BufReader::with_capacity(1 << 20, flate2::read::MultiGzDecoder::new(file));
    let commands: Vec<(Command<'static>, Option<TimestampNs>)> = reader
        .lines()
        .map(|line| {
            let line = line.expect("readable");
            let parsed = parse_line(&line).expect("well-formed");
            (parsed.command.into_owned(), parsed.ts)
        })
        .collect();
    let mut best = [f64::MAX; 3];
    let mut outcome = [(0usize, 0usize); 3];
    for _ in 0..3 {
        for (kind, best) in best.iter_mut().enumerate() {
            let mut exchange = Exchange::default();
            let mut venue = Venue::new(Exchange::default(), kind == 2);
            let mut events = Vec::with_capacity(1_024);
            let (mut trades, mut rejected) = (0usize, 0usize);
            let start = Instant::now();
            for (index, (command, ts)) in commands.iter().enumerate() {
                let seq = index as u64 + 1;
                if kind == 0 {
                    exchange.apply(Seq(seq), *ts, command, &mut events);
                } else {
                    venue.apply(Seq(seq), *ts, command, &mut events);
                }
                trades += events.iter().filter(|event| matches!(event, Event::Trade(_))).count();
                rejected += usize::from(matches!(events[0], Event::Rejected { .. }));
                events.clear();
            }
            let seconds = start.elapsed().as_secs_f64();
            *best = best.min(seconds);
            outcome[kind] = (trades, rejected);
            if kind == 2 {
                let activity = venue.activity().unwrap();
                eprintln!("records kept at the end: {}", activity.order_count());
            }
        }
    }
    let per_command = |seconds: f64| seconds * 1e9 / commands.len() as f64;
    for (name, (seconds, (trades, rejected))) in
        ["exchange", "venue without activity", "venue with activity"]
            .iter()
            .zip(best.iter().zip(outcome))
    {
        eprintln!(
            "{name:>24}: {seconds:.3} s, {:.1} ns/command, {trades} trades, {rejected} rejected",
            per_command(*seconds)
        );
    }
    eprintln!("tracking activity: {:.2}x the exchange's time", best[2] / best[0]);
    assert_eq!(outcome[0], outcome[2], "the stream reuses no finished id");
}

#[test]
fn apply_names_the_order_each_accepted_order_command_acted_on() {
    let mut harness = Harness::funded(true);
    let acted_on = |harness: &mut Harness, line: String| {
        let (command, ts) = owned_command(line);
        harness.seq += 1;
        let mut events = Vec::new();
        harness.venue.apply(Seq(harness.seq), ts, &command, &mut events).order_id
    };
    let placed = Some(OrderId(harness.seq + 1));
    assert_eq!(acted_on(&mut harness, buy("alice", "b1", "100", "5").to_string()), placed);
    let amended = acted_on(&mut harness, amend_qty("alice", "b1", "3").to_string());
    assert_eq!(amended, placed);
    // An amend that loses its place and trades still names the amended order.
    harness.ok(sell("bob", "s1", "101", "1"));
    let crossed = acted_on(&mut harness, amend_price("alice", "b1", "101").to_string());
    assert_eq!(crossed, placed);
    assert_eq!(acted_on(&mut harness, cancel("alice", "b1").to_string()), placed);
    // Rejected: an unknown order, a reused id; and a command that names no order.
    assert_eq!(acted_on(&mut harness, cancel("alice", "nope").to_string()), None);
    assert_eq!(acted_on(&mut harness, buy("alice", "b1", "100", "5").to_string()), None);
    assert_eq!(acted_on(&mut harness, deposit("alice", "BTC", "1").to_string()), None);
}

#[test]
fn apply_names_no_order_without_activity() {
    let mut harness = Harness::funded(false);
    let (command, ts) = owned_command(buy("alice", "b1", "100", "5").to_string());
    let mut events = Vec::new();
    let applied = harness.venue.apply(Seq(harness.seq + 1), ts, &command, &mut events);
    assert_eq!(applied.order_id, None);
    // Where the order rests is known all the same.
    assert!(applied.rested.is_some());
}
