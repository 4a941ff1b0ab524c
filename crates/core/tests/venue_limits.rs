//! The venue's open-orders limit: `set_limits` (`Venue::apply`).
//!
//! Hand-written scenarios pin each rule: `set_limits` is always accepted and sets the
//! limit; with activity, an `order` of an account that already has as many open orders
//! as the limit is rejected `too_many_open_orders` on arrival (whatever it would do: an
//! IOC, FOK or market order too), echoing its key, with only the time moved; cancels,
//! cancel-alls and fills that finish orders free slots; 0 means no limit; the rejection
//! comes after `unknown_symbol`, `instrument_halted` and `duplicate_id`, before every
//! other check; amends and cancels are never limited; without activity the limit is
//! kept but not enforced. The exchange alone rejects `set_limits` `malformed`.
//! Snapshots carry the limit, with and without activity, a venue with nothing of its
//! own is still stored as its exchange, and hostile limit bytes never panic. Random
//! streams with set-limits mixed in are `venue_commands.rs`'s.
//!
//! The funded venue (`venue_support`): BTC-USD tick 1, lot 0.01, qty 0.1..=100, no
//! fees; ETH-USD tick 0.01, lot 1, qty 1..=1000, maker 10 bps, taker 25 bps; BTC has 8
//! decimals, USD 2, ETH 3; alice, bob and carol each hold 10 BTC, 100,000 USD and
//! 100 ETH.

mod random;
mod snapshot_bytes;
mod support;
mod venue_stream;
mod venue_support;

use bourse_core::format::{parse_line, write_command};
use bourse_core::ids::AccountId;
use bourse_core::snapshot::{decode_venue, SnapshotError, MAGIC, VENUE_MAGIC};
use bourse_core::{
    AccountRef, Command, Event, ExchangeConfig, RejectReason, Seq, TimestampNs, Venue,
};
use random::Random;
use snapshot_bytes::{state_bytes, venue_bytes};
use support::{
    amend, amend_price, amend_qty, assert_events, buy, cancel, market_buy, sell, Cmd, Fed,
};
use venue_stream::{command_of, random_venue_stream_with_limits};
use venue_support::{
    assert_every_truncation_fails, container, decodes_sanely, owned_command, venue_after, Harness,
    BTC_USD,
};

fn set_limits(open_orders_per_account: u64) -> Cmd {
    Cmd::new("set_limits").with("open_orders_per_account", open_orders_per_account)
}

fn halt(symbol: &str) -> Cmd {
    Cmd::new("halt").with("symbol", symbol)
}

fn cancel_all(account: &str) -> Cmd {
    Cmd::new("cancel_all").with("account", account)
}

const ACCEPTED: &str = r#"{"ev":"accepted"}"#;

/// The rejection of `account`'s order `id` by the limit, as the tests write it.
fn too_many(account: &str, id: &str) -> String {
    format!(
        r#"{{"ev":"rejected","reason":"too_many_open_orders","account":"{account}","id":"{id}"}}"#
    )
}

fn reason(fed: &Fed) -> &str {
    assert_eq!(fed.events[0]["ev"], "rejected", "{}: {:?}", fed.line, fed.events);
    fed.events[0]["reason"].as_str().unwrap()
}

fn open_count(harness: &Harness, account: &str) -> usize {
    harness.activity().open_order_count(harness.account(account))
}

/// A funded venue with activity and limit `limit`, where alice has `limit` open buys
/// on BTC-USD (`a1`, `a2`, ...) at 90, 89, ...
fn at_limit(limit: u64) -> Harness {
    let mut harness = Harness::funded(true);
    harness.ok(set_limits(limit));
    for index in 1..=limit {
        harness.ok(buy("alice", &format!("a{index}"), &(91 - index).to_string(), "1"));
    }
    assert_eq!(open_count(&harness, "alice"), limit as usize);
    harness
}

// ----------------------------------------------------------------------------------
// The rule

#[test]
fn set_limits_is_accepted_without_a_key_and_sets_the_limit() {
    let mut harness = Harness::funded(true);
    assert_eq!(harness.venue.open_orders_limit(), 0);
    for limit in [3, 0, 1, u64::MAX, 1, 1, 7] {
        let fed = harness.ok(set_limits(limit));
        assert_events(&fed, &[ACCEPTED]);
        assert_eq!(harness.venue.open_orders_limit(), limit);
    }
    // It moves the time like any command, and nothing else.
    let before = harness.encoded();
    let fed = harness.ok(set_limits(7).with("ts", 1_000));
    assert_events(&fed, &[ACCEPTED]);
    assert_eq!(harness.venue.exchange().time_ns(), TimestampNs(1_000));
    let mut same = Harness::funded(true);
    same.ok(set_limits(7));
    same.ok(Cmd::new("cancel_all").with("account", "nobody").with("ts", 1_000));
    assert!(same.encoded() == harness.encoded() && before != harness.encoded());
    // The command as the tests feed it is the one `write_command` prints.
    let (command, ts) = owned_command(set_limits(7).with("ts", 5));
    assert_eq!(command, Command::SetLimits { open_orders_per_account: 7 });
    let mut printed = String::new();
    write_command(&mut printed, &command, ts);
    assert_eq!(printed, "{\"cmd\":\"set_limits\",\"open_orders_per_account\":7,\"ts\":5}\n");
    assert_eq!(command_of(printed.trim_end()), (command, Some(TimestampNs(5))));
}

#[test]
fn the_limit_rejects_an_order_of_an_account_at_it_and_changes_nothing_but_the_time() {
    let mut harness = at_limit(2);
    let before = harness.encoded();
    let fed = harness.feed(buy("alice", "a3", "88", "1"));
    assert_events(&fed, &[&too_many("alice", "a3")]);
    // Nothing changed: no record, no hold.
    assert!(harness.encoded() == before);
    assert!(harness.activity().order_by_client(harness.account("alice"), "a3").is_none());
    assert_eq!(harness.balance("alice", "USD"), (10_000_000 - 9_000 - 8_900, 17_900));
    // Only the time moves.
    let fed = harness.feed(sell("alice", "s1", "120", "1").on("ETH-USD").with("ts", 77));
    assert_events(&fed, &[&too_many("alice", "s1")]);
    assert_eq!(harness.venue.exchange().time_ns(), TimestampNs(77));
    // The rejected id was never an order: it is free once there is room.
    harness.ok(cancel("alice", "a1"));
    harness.ok(buy("alice", "a3", "88", "1"));
    // The limit is per account: bob and carol have their own.
    for account in ["bob", "carol"] {
        harness.ok(buy(account, "x1", "80", "1"));
        harness.ok(sell(account, "x2", "130", "1"));
        assert_eq!(reason(&harness.feed(buy(account, "x3", "80", "1"))), "too_many_open_orders");
    }
}

#[test]
fn an_order_that_would_not_rest_is_rejected_at_the_limit_too() {
    let mut harness = at_limit(1);
    harness.ok(sell("bob", "s1", "100", "5"));
    // Each would trade at once against bob's ask and never rest: the check is on
    // arrival, so each is rejected all the same.
    for line in [
        buy("alice", "t1", "100", "1").tif("ioc"),
        buy("alice", "t2", "100", "1").tif("fok"),
        market_buy("alice", "t3", "1"),
        buy("alice", "t4", "100", "1"),
    ] {
        let id = line.to_string();
        let fed = harness.feed(line);
        assert_eq!(reason(&fed), "too_many_open_orders", "{id}");
        assert_eq!(fed.events.len(), 1);
    }
    // Below the limit, the same IOC trades and leaves the count where it was.
    harness.ok(cancel("alice", "a1"));
    let fed = harness.ok(buy("alice", "t1", "100", "1").tif("ioc"));
    assert_eq!(fed.events[1]["ev"], "trade");
    assert_eq!(open_count(&harness, "alice"), 0);
    // An IOC that does not fill at all expires: it never takes a slot either.
    harness.ok(buy("alice", "t5", "50", "1").tif("ioc"));
    assert_eq!(open_count(&harness, "alice"), 0);
    harness.ok(buy("alice", "t6", "50", "1"));
    assert_eq!(
        reason(&harness.feed(buy("alice", "t7", "50", "1").tif("ioc"))),
        "too_many_open_orders"
    );
}

#[test]
fn an_order_by_account_id_is_limited_and_echoes_the_accounts_name() {
    let mut harness = at_limit(2);
    let alice = harness.account("alice");
    let (mut command, _) = owned_command(buy("alice", "a3", "88", "1"));
    *command.account_mut().unwrap() = AccountRef::Id(alice);
    let events = harness.apply(&command, None);
    assert_eq!(
        events,
        [serde_json::json!({
            "ev": "rejected", "seq": harness.seq, "reason": "too_many_open_orders",
            "account": "alice", "id": "a3"
        })]
    );
    // An id that names no account has no open orders.
    *command.account_mut().unwrap() = AccountRef::Id(AccountId(77));
    let events = harness.apply(&command, None);
    assert_eq!(events[0]["reason"], "insufficient_funds");
    assert_eq!(events[0]["account"], "#77");
}

#[test]
fn cancels_and_cancel_alls_free_slots() {
    let mut harness = at_limit(3);
    assert_eq!(reason(&harness.feed(buy("alice", "b1", "80", "1"))), "too_many_open_orders");
    harness.ok(cancel("alice", "a2"));
    harness.ok(buy("alice", "b1", "80", "1"));
    assert_eq!(reason(&harness.feed(buy("alice", "b2", "80", "1"))), "too_many_open_orders");
    // A cancel-all frees them all; one on an instrument only, its orders there.
    harness.ok(sell("bob", "s1", "30", "1").on("ETH-USD"));
    harness.ok(cancel("alice", "b1"));
    harness.ok(sell("alice", "e1", "30", "1").on("ETH-USD"));
    assert_eq!(open_count(&harness, "alice"), 3);
    let fed = harness.ok(cancel_all("alice").with("symbol", "ETH-USD"));
    assert_eq!(fed.events.len(), 2);
    harness.ok(buy("alice", "b2", "80", "1"));
    assert_eq!(reason(&harness.feed(buy("alice", "b3", "80", "1"))), "too_many_open_orders");
    let fed = harness.ok(cancel_all("alice"));
    assert_eq!(fed.events.len(), 4);
    for id in ["b3", "b4", "b5"] {
        harness.ok(buy("alice", id, "80", "1"));
    }
    assert_eq!(reason(&harness.feed(buy("alice", "b6", "80", "1"))), "too_many_open_orders");
}

#[test]
fn fills_that_finish_orders_free_slots_and_partial_fills_do_not() {
    let mut harness = Harness::funded(true);
    harness.ok(set_limits(2));
    harness.ok(sell("alice", "s1", "100", "1"));
    harness.ok(sell("alice", "s2", "101", "2"));
    assert_eq!(reason(&harness.feed(sell("alice", "s3", "102", "1"))), "too_many_open_orders");
    // bob takes all of s1 and part of s2: s1 finishes, s2 stays open.
    let fed = harness.ok(buy("bob", "b1", "101", "1.5"));
    assert_eq!(fed.events.iter().filter(|event| event["ev"] == "trade").count(), 2);
    assert_eq!(harness.open_ids("alice"), ["s2"]);
    harness.ok(sell("alice", "s3", "102", "1"));
    assert_eq!(reason(&harness.feed(sell("alice", "s4", "103", "1"))), "too_many_open_orders");
    // A partial fill frees nothing.
    harness.ok(buy("carol", "c1", "101", "0.25"));
    assert_eq!(harness.open_ids("alice"), ["s2", "s3"]);
    assert_eq!(reason(&harness.feed(sell("alice", "s4", "103", "1"))), "too_many_open_orders");
    // The rest of s2 fills: a slot is free again.
    harness.ok(buy("carol", "c2", "101", "1.25"));
    assert_eq!(harness.open_ids("alice"), ["s3"]);
    harness.ok(sell("alice", "s4", "103", "1"));
    // An order of an account at the limit that would have finished a resting order of
    // its own is rejected before it meets the book: s3 stays.
    assert_eq!(
        reason(&harness.feed(buy("alice", "x", "102", "1").stp("cancel_maker"))),
        "too_many_open_orders"
    );
    assert_eq!(harness.open_ids("alice"), ["s3", "s4"]);
}

#[test]
fn zero_means_no_limit() {
    let mut harness = Harness::funded(true);
    // No limit by default.
    for index in 0..40 {
        harness.ok(buy("alice", &format!("d{index}"), "50", "0.1"));
    }
    harness.ok(set_limits(1));
    assert_eq!(reason(&harness.feed(buy("alice", "x", "50", "0.1"))), "too_many_open_orders");
    harness.ok(set_limits(0));
    for index in 0..10 {
        harness.ok(buy("alice", &format!("e{index}"), "50", "0.1"));
    }
    assert_eq!(open_count(&harness, "alice"), 50);
    // The largest limit is as good as none.
    harness.ok(set_limits(u64::MAX));
    harness.ok(buy("alice", "f", "50", "0.1"));
}

#[test]
fn a_lower_limit_leaves_open_orders_open_and_rejects_new_ones_until_below() {
    let mut harness = at_limit(5);
    harness.ok(set_limits(2));
    // All five stay open, and amends and cancels of them work.
    assert_eq!(open_count(&harness, "alice"), 5);
    for line in [
        amend_price("alice", "a1", "70"),
        amend_qty("alice", "a2", "3"),
        amend("alice", "a3", "71", "0.5"),
        amend_qty("alice", "a4", "0.2"),
    ] {
        let fed = harness.ok(line);
        assert_eq!(fed.events.len(), 2, "{}", fed.line);
    }
    for cancelled in 1..=3 {
        harness.ok(cancel("alice", &format!("a{cancelled}")));
        assert_eq!(reason(&harness.feed(buy("alice", "n", "60", "1"))), "too_many_open_orders");
    }
    // Two left: at the limit. One more cancel and there is room.
    harness.ok(cancel("alice", "a4"));
    harness.ok(buy("alice", "n", "60", "1"));
    assert_eq!(reason(&harness.feed(buy("alice", "m", "60", "1"))), "too_many_open_orders");
}

#[test]
fn amends_and_cancels_are_never_limited() {
    let mut harness = at_limit(1);
    harness.ok(sell("bob", "s1", "100", "1"));
    // An amend that makes alice's order trade, one that loses priority, a cancel.
    harness.ok(amend_qty("alice", "a1", "2"));
    let fed = harness.ok(amend_price("alice", "a1", "100"));
    assert_eq!(fed.events.iter().filter(|event| event["ev"] == "trade").count(), 1);
    assert_eq!(harness.open_ids("alice"), ["a1"]);
    let fed = harness.ok(cancel("alice", "a1"));
    assert_events(
        &fed,
        &[
            r#"{"ev":"accepted","account":"alice","id":"a1"}"#,
            r#"{"ev":"done","account":"alice","id":"a1","reason":"canceled","filled":"1"}"#,
        ],
    );
    // An amend or cancel of what is not open is the exchange's usual unknown_order.
    assert_eq!(reason(&harness.feed(amend_price("alice", "a1", "99"))), "unknown_order");
    assert_eq!(reason(&harness.feed(cancel("alice", "zz"))), "unknown_order");
}

// ----------------------------------------------------------------------------------
// The order of the checks

#[test]
fn unknown_symbol_instrument_halted_and_duplicate_id_come_before_the_limit() {
    let mut harness = Harness::funded(true);
    harness.ok(set_limits(2));
    harness.ok(buy("alice", "gone", "50", "1").tif("ioc")); // expires: a finished id
    harness.ok(buy("alice", "a1", "90", "1"));
    harness.ok(buy("alice", "a2", "89", "1"));
    harness.ok(halt("ETH-USD"));
    assert_eq!(reason(&harness.feed(buy("alice", "x", "99", "1"))), "too_many_open_orders");
    let cases = [
        (buy("alice", "x", "99", "1").on("NOPE"), "unknown_symbol"),
        (buy("alice", "x", "20", "1").on("ETH-USD"), "instrument_halted"),
        // A remembered finished id (the venue's reuse rule), then an open one (the
        // exchange's).
        (buy("alice", "gone", "99", "1"), "duplicate_id"),
        (buy("alice", "a1", "99", "1"), "duplicate_id"),
    ];
    for (line, expected) in cases {
        let fed = harness.feed(line);
        assert_eq!(reason(&fed), expected, "{}", fed.line);
        assert_eq!(fed.events[0]["account"], "alice");
    }
}

#[test]
fn the_limit_comes_before_everything_else_the_exchange_checks() {
    let mut harness = at_limit(2);
    harness.ok(sell("bob", "s1", "100", "1").on("ETH-USD"));
    // Each is rejected by the exchange for its own reason below the limit, and
    // `too_many_open_orders` at it.
    let cases = [
        (buy("alice", "x", "99.5", "1"), "invalid_price"),
        (buy("alice", "x", "99", "0.001"), "invalid_qty"),
        (buy("alice", "x", "99", "1000"), "invalid_qty"),
        (buy("alice", "x", "5000", "100"), "insufficient_funds"),
        (buy("alice", "x", "101", "1").on("ETH-USD").post_only(), "would_cross"),
        (market_buy("alice", "x", "1"), "no_liquidity"),
    ];
    let mut below = Harness::funded(true);
    below.ok(sell("bob", "s1", "100", "1").on("ETH-USD"));
    for (line, expected) in cases {
        let fed = below.feed(line.clone());
        assert_eq!(reason(&fed), expected, "{}", fed.line);
        let fed = harness.feed(line);
        assert_events(&fed, &[&too_many("alice", "x")]);
    }
    // An account that does not exist has no open orders: the exchange judges.
    harness.ok(set_limits(1));
    assert_eq!(reason(&harness.feed(buy("nobody", "x", "99", "1"))), "insufficient_funds");
}

// ----------------------------------------------------------------------------------
// Without activity, and the exchange alone

#[test]
fn without_activity_the_limit_is_kept_but_not_enforced() {
    let mut plain = Harness::funded(false);
    let mut tracking = Harness::funded(true);
    for harness in [&mut plain, &mut tracking] {
        harness.ok(set_limits(1));
        harness.ok(buy("alice", "a1", "90", "1"));
    }
    assert_eq!(plain.venue.open_orders_limit(), 1);
    // Without activity the venue does not count open orders per account: accepted.
    let fed = plain.ok(buy("alice", "a2", "90", "1"));
    assert_events(&fed, &[r#"{"ev":"accepted","account":"alice","id":"a2"}"#]);
    assert_eq!(reason(&tracking.feed(buy("alice", "a2", "90", "1"))), "too_many_open_orders");
    // A venue restored with activity from its snapshot enforces it.
    let mut restored = decode_venue(&plain.encoded(), ExchangeConfig::default(), true).unwrap();
    assert_eq!(restored.open_orders_limit(), 1);
    let (command, ts) = owned_command(buy("alice", "a3", "90", "1"));
    let mut events = Vec::new();
    restored.apply(Seq(plain.seq + 1), ts, &command, &mut events);
    assert_eq!(
        events,
        [Event::Rejected { seq: Seq(plain.seq + 1), reason: RejectReason::TooManyOpenOrders }]
    );
}

#[test]
fn the_exchange_alone_rejects_set_limits_malformed_and_the_replay_format_has_none() {
    let harness = at_limit(1);
    let seq = harness.seq;
    let (mut exchange, _) = harness.venue.into_parts();
    let before = state_bytes(&exchange);
    for limit in [0, 1, u64::MAX] {
        let command = Command::SetLimits { open_orders_per_account: limit };
        assert!(command.is_venue_command());
        assert_eq!(command.order_key(), None);
        assert_eq!(command.account(), None);
        let mut events = Vec::new();
        exchange.apply(Seq(seq + 1), Some(TimestampNs(u64::MAX)), &command, &mut events);
        let malformed = Event::Rejected { seq: Seq(seq + 1), reason: RejectReason::Malformed };
        assert_eq!(events, [malformed]);
        // What it prints does not parse as a replay-format line.
        let mut printed = String::new();
        write_command(&mut printed, &command, None);
        assert!(parse_line(printed.trim_end()).is_err(), "{printed}");
    }
    assert!(state_bytes(&exchange) == before);
    // The exchange has no limit: alice, at the venue's, places more.
    let mut events = Vec::new();
    let (command, _) = owned_command(buy("alice", "more", "50", "1"));
    exchange.apply(Seq(seq + 2), None, &command, &mut events);
    assert!(matches!(events[0], Event::Accepted { .. }));
}

// ----------------------------------------------------------------------------------
// Snapshots

#[test]
fn the_limit_survives_a_snapshot_with_activity() {
    let mut harness = at_limit(3);
    harness.ok(halt("ETH-USD"));
    harness.ok(cancel("alice", "a1"));
    let bytes = harness.encoded();
    assert!(bytes.starts_with(&VENUE_MAGIC));
    let mut restored = decode_venue(&bytes, ExchangeConfig::default(), true).unwrap();
    restored.check_invariants().unwrap();
    assert_eq!(restored.open_orders_limit(), 3);
    assert!(venue_bytes(&restored) == bytes);
    // The restored venue goes on exactly like the original.
    harness.go_on_in_step(
        &mut restored,
        [
            buy("alice", "b1", "80", "1"),
            buy("alice", "b2", "80", "1"),
            set_limits(4),
            buy("alice", "b2", "80", "1"),
            cancel_all("alice"),
            set_limits(0),
            buy("alice", "b3", "80", "1"),
        ],
    );
    // Decoded without activity: the activity dropped, the limit and the halt kept,
    // right after the flags (bit 1: a limit follows).
    let plain = decode_venue(&bytes, ExchangeConfig::default(), false).unwrap();
    assert!(plain.activity().is_none());
    assert_eq!(plain.open_orders_limit(), 3);
    let state = state_bytes(plain.exchange());
    assert!(venue_bytes(&plain) == container(&state, &[2, 3, 1, 1]));
}

#[test]
fn the_limit_survives_a_snapshot_without_activity() {
    let mut harness = Harness::funded(false);
    harness.ok(buy("alice", "a1", "90", "1"));
    assert!(harness.encoded() == state_bytes(harness.venue.exchange()));
    harness.ok(set_limits(300));
    let bytes = harness.encoded();
    let state = state_bytes(harness.venue.exchange());
    // flags 2 (a limit), 300 as a varint, no halts.
    assert!(bytes == container(&state, &[2, 0xac, 0x02, 0]));
    for track_activity in [false, true] {
        let restored = decode_venue(&bytes, ExchangeConfig::default(), track_activity).unwrap();
        restored.check_invariants().unwrap();
        assert_eq!(restored.open_orders_limit(), 300);
        assert_eq!(restored.tracks_activity(), track_activity);
        if !track_activity {
            assert!(venue_bytes(&restored) == bytes);
        }
    }
    // With a halt too.
    harness.ok(halt("BTC-USD"));
    let bytes = harness.encoded();
    assert!(bytes == container(&state, &[2, 0xac, 0x02, 1, 0]));
    let restored = decode_venue(&bytes, ExchangeConfig::default(), false).unwrap();
    assert!(restored.is_halted(BTC_USD) && restored.open_orders_limit() == 300);
    // Limit 0 and no halts: the exchange's snapshot again, exactly.
    harness.ok(Cmd::new("resume").with("symbol", "BTC-USD"));
    harness.ok(set_limits(0));
    assert!(harness.encoded() == state_bytes(harness.venue.exchange()));
    assert!(harness.encoded().starts_with(&MAGIC));
    let restored = decode_venue(&harness.encoded(), ExchangeConfig::default(), false).unwrap();
    assert_eq!(restored.open_orders_limit(), 0);
    // The largest limit takes ten bytes.
    harness.ok(set_limits(u64::MAX));
    let mut rest = vec![2];
    rest.extend([0xff; 9]);
    rest.extend([0x01, 0]);
    assert!(harness.encoded() == container(&state, &rest));
    let restored = decode_venue(&harness.encoded(), ExchangeConfig::default(), true).unwrap();
    assert_eq!(restored.open_orders_limit(), u64::MAX);
}

#[test]
fn each_kind_of_bad_limit_has_its_error() {
    let harness = at_limit(2);
    let (exchange, _) = harness.venue.into_parts();
    let state = state_bytes(&exchange);
    let decode = |rest: &[u8]| {
        decode_venue(&container(&state, rest), ExchangeConfig::default(), true).map(|venue| {
            venue.check_invariants().unwrap();
            venue.open_orders_limit()
        })
    };
    let state_end = container(&state, &[]).len();
    let invalid = |what: &str, at: usize| {
        Err(SnapshotError::Invalid { offset: state_end + at, what: what.to_string().into() })
    };
    assert_eq!(decode(&[2, 5, 0]), Ok(5));
    assert_eq!(decode(&[2, 5, 1, 0]), Ok(5));
    assert_eq!(decode(&[2, 0, 0]), invalid("an open-orders limit of 0 (stored as none)", 1));
    assert_eq!(decode(&[2, 0x85, 0x00, 0]), invalid("varint not in its shortest form", 1));
    let mut beyond = vec![2];
    beyond.extend([0xff; 9]);
    beyond.extend([0x02, 0]);
    assert_eq!(decode(&beyond), invalid("varint beyond 64 bits", 1));
    assert_eq!(decode(&[4, 5, 0]), invalid("unknown venue flags", 0));
    assert_eq!(decode(&[2, 5, 0, 0]), invalid("bytes after the end of the snapshot", 3));
    for truncated in [&[2][..], &[2, 5], &[2, 0x85], &[3, 5, 0]] {
        assert!(matches!(decode(truncated), Err(SnapshotError::Truncated { .. })), "{truncated:?}");
    }
}

/// A venue of a random stream with limits, ending with a limit in force.
fn venue_of_stream(seed: u64, commands: usize, track_activity: bool) -> Venue {
    let last = Command::SetLimits { open_orders_per_account: 200 };
    venue_after(&random_venue_stream_with_limits(seed, commands), &last, track_activity)
}

#[test]
fn every_truncation_of_a_snapshot_with_a_limit_is_an_error_and_flipped_bytes_never_panic() {
    let mut random = Random(0x11_3175);
    for track_activity in [false, true] {
        let venue = venue_of_stream(23, 150, track_activity);
        assert_eq!(venue.open_orders_limit(), 200);
        let bytes = venue_bytes(&venue);
        assert!(bytes.starts_with(&VENUE_MAGIC));
        assert_every_truncation_fails(&bytes, track_activity);
        // Mostly in what follows the state: the flags, the limit, the halts and the
        // activity.
        let tail_at = container(&state_bytes(venue.exchange()), &[]).len();
        let mut accepted = 0;
        for round in 0..1_000 {
            let mut flipped = bytes.clone();
            let position = match round % 4 {
                0 => random.below(flipped.len() as u64) as usize,
                1 => tail_at + random.below(3) as usize,
                _ => tail_at + random.below((flipped.len() - tail_at) as u64) as usize,
            };
            flipped[position] ^= 1 + random.below(255) as u8;
            accepted += usize::from(decodes_sanely(&flipped, track_activity, true));
            decodes_sanely(&flipped, !track_activity, false);
        }
        // Some flips of the limit itself give another valid limit.
        assert!(accepted > 0);
    }
}
