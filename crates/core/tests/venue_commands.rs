//! The venue's own commands: `halt`, `resume` and `cancel_all` (`Venue::apply`).
//!
//! Hand-written scenarios pin each rule: a halt rejects new orders and amends on its
//! instrument (`instrument_halted`, after `unknown_symbol` and `unknown_order`, before
//! everything else) but lets cancels and cancel-alls through; a resume restores
//! trading; unknown symbols are rejected; halting twice changes nothing; a cancel-all
//! cancels every open order of its account (or those on one instrument), each as a
//! `cancel` would, releasing its hold, in ascending order id with activity and in book
//! order without; the activity's records become `canceled`. The exchange alone rejects
//! these commands `malformed` and changes nothing. Snapshots carry the halts, with and
//! without activity, and hostile snapshot bytes never panic. Random streams with halts,
//! resumes and cancel-alls (and, in some, set-limits) mixed in check every rule
//! against a model, the invariants after every command, and that a venue restored from
//! a snapshot taken anywhere goes on exactly like the original. The open-orders limit's
//! own scenarios are `venue_limits.rs`'s.
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

use std::collections::BTreeSet;

use bourse_core::ids::{AccountId, ClientOrderId, InstrumentId, OrderId, Seq, TimestampNs};
use bourse_core::snapshot::{decode_venue, SnapshotError, MAGIC, VENUE_MAGIC};
use bourse_core::venue::OrderStatus;
use bourse_core::{
    AccountRef, BookNote, Command, DoneReason, Event, Exchange, ExchangeConfig, Qty, RejectReason,
    Side, Venue,
};
use random::Random;
use snapshot_bytes::{state_bytes, venue_bytes};
use support::{amend_price, amend_qty, assert_events, buy, cancel, sell, Cmd, Fed};
use venue_stream::{
    command_of, random_venue_stream, random_venue_stream_with_limits, with_fresh_ids, DEFINITIONS,
    MARKETS,
};
use venue_support::{
    assert_every_truncation_fails, command_for, container, decodes_sanely, owned_command,
    venue_after, Forks, Harness, BTC_USD, ETH_USD,
};

// ----------------------------------------------------------------------------------
// Commands and expectations (the harness is `venue_support`'s)

fn halt(symbol: &str) -> Cmd {
    Cmd::new("halt").with("symbol", symbol)
}

fn resume(symbol: &str) -> Cmd {
    Cmd::new("resume").with("symbol", symbol)
}

fn cancel_all(account: &str) -> Cmd {
    Cmd::new("cancel_all").with("account", account)
}

/// A canceled order's `done` as the tests write it.
fn canceled(account: &str, id: &str, filled: &str) -> String {
    format!(
        r#"{{"ev":"done","account":"{account}","id":"{id}","reason":"canceled","filled":"{filled}"}}"#
    )
}

const ACCEPTED: &str = r#"{"ev":"accepted"}"#;

/// The deposits of the funded venue, in smallest units: 10 BTC, 100,000 USD, 100 ETH.
const FUNDED: [(&str, i64); 3] = [("BTC", 1_000_000_000), ("USD", 10_000_000), ("ETH", 100_000)];

// ----------------------------------------------------------------------------------
// Halt and resume

#[test]
fn a_halt_rejects_new_orders_and_amends_on_its_instrument_but_not_cancels() {
    let mut harness = Harness::funded(true);
    harness.ok(buy("alice", "b1", "99", "1"));
    harness.ok(sell("bob", "s1", "101", "1"));
    harness.ok(buy("alice", "e1", "20", "2").on("ETH-USD"));
    let fed = harness.ok(halt("BTC-USD").with("ts", 50));
    assert_events(&fed, &[ACCEPTED]);
    assert!(harness.venue.is_halted(BTC_USD) && !harness.venue.is_halted(ETH_USD));
    assert_eq!(harness.halted(), ["BTC-USD"]);
    assert_eq!(harness.venue.exchange().time_ns(), TimestampNs(50));

    // Rejections change nothing but the time.
    let before = harness.encoded();
    let fed = harness.feed(buy("carol", "c1", "101", "1"));
    assert_events(
        &fed,
        &[r#"{"ev":"rejected","reason":"instrument_halted","account":"carol","id":"c1"}"#],
    );
    let fed = harness.feed(amend_price("alice", "b1", "100"));
    assert_events(
        &fed,
        &[r#"{"ev":"rejected","reason":"instrument_halted","account":"alice","id":"b1"}"#],
    );
    let fed = harness.feed(amend_qty("alice", "b1", "0.5"));
    assert_eq!(fed.events[0]["reason"], "instrument_halted");
    // Market orders and post-only orders alike.
    let market = Cmd::new("order")
        .with("account", "carol")
        .with("id", "m1")
        .with("symbol", "BTC-USD")
        .with("side", "buy")
        .with("type", "market")
        .with("qty", "1");
    assert_eq!(harness.feed(market).events[0]["reason"], "instrument_halted");
    assert_eq!(
        harness.feed(buy("carol", "p1", "50", "1").post_only()).events[0]["reason"],
        "instrument_halted"
    );
    assert!(harness.encoded() == before);

    // The other instrument trades.
    harness.ok(sell("carol", "e2", "20", "1").on("ETH-USD"));
    harness.ok(amend_price("alice", "e1", "19"));
    // Cancels work.
    let fed = harness.ok(cancel("alice", "b1"));
    assert_events(
        &fed,
        &[r#"{"ev":"accepted","account":"alice","id":"b1"}"#, &canceled("alice", "b1", "0")],
    );
    let fed = harness.ok(cancel_all("bob"));
    assert_events(&fed, &[ACCEPTED, &canceled("bob", "s1", "0")]);
    assert_eq!(harness.venue.exchange().open_order_count(), 1);
}

#[test]
fn a_resume_restores_trading() {
    let mut harness = Harness::funded(true);
    harness.ok(sell("bob", "s1", "101", "1"));
    harness.ok(buy("alice", "b1", "99", "1"));
    harness.ok(halt("BTC-USD"));
    assert_eq!(
        harness.feed(buy("carol", "c1", "101", "1")).events[0]["reason"],
        "instrument_halted"
    );
    let fed = harness.ok(resume("BTC-USD"));
    assert_events(&fed, &[ACCEPTED]);
    assert!(!harness.venue.is_halted(BTC_USD));
    assert!(harness.halted().is_empty());
    // The rejected id was never an order: it is free, and it trades now.
    let fed = harness.ok(buy("carol", "c1", "101", "1"));
    assert_eq!(fed.events[1]["ev"], "trade");
    harness.ok(amend_price("alice", "b1", "98"));
    // A venue that halted and resumed is stored as its exchange again.
    let mut plain = Harness::funded(false);
    plain.ok(halt("ETH-USD"));
    assert!(plain.encoded().starts_with(&VENUE_MAGIC));
    plain.ok(resume("ETH-USD"));
    assert!(plain.encoded() == state_bytes(plain.venue.exchange()));
}

#[test]
fn halting_twice_or_resuming_what_trades_is_accepted_and_changes_nothing() {
    let mut harness = Harness::funded(true);
    harness.ok(resume("BTC-USD"));
    assert!(harness.halted().is_empty());
    harness.ok(halt("ETH-USD"));
    let once = harness.encoded();
    assert_events(&harness.ok(halt("ETH-USD")), &[ACCEPTED]);
    assert!(harness.encoded() == once);
    harness.ok(halt("BTC-USD"));
    assert_eq!(harness.halted(), ["BTC-USD", "ETH-USD"]);
    assert_eq!(harness.venue.halted_instruments().collect::<Vec<_>>(), [BTC_USD, ETH_USD]);
    harness.ok(resume("ETH-USD"));
    harness.ok(resume("ETH-USD"));
    assert_eq!(harness.halted(), ["BTC-USD"]);
    // An instrument that does not exist is never halted.
    assert!(!harness.venue.is_halted(InstrumentId(7)));
}

#[test]
fn unknown_symbols_are_rejected_without_an_order_key() {
    let mut harness = Harness::funded(true);
    harness.ok(buy("alice", "b1", "99", "1"));
    let before = harness.encoded();
    for line in [halt("NOPE"), resume("NOPE"), cancel_all("alice").with("symbol", "NOPE")] {
        let fed = harness.feed(line);
        assert_events(&fed, &[r#"{"ev":"rejected","reason":"unknown_symbol"}"#]);
    }
    assert!(harness.encoded() == before);
    // Symbols are exact.
    assert_eq!(harness.feed(halt("btc-usd")).events[0]["reason"], "unknown_symbol");
}

#[test]
fn an_order_on_a_halted_instrument_meets_instrument_halted_after_unknown_symbol_only() {
    let mut harness = Harness::funded(true);
    harness.ok(buy("alice", "open", "99", "1"));
    harness.ok(buy("alice", "gone", "99", "1"));
    harness.ok(cancel("alice", "gone"));
    harness.ok(halt("BTC-USD"));
    harness.ok(halt("ETH-USD"));
    // An unknown symbol comes first.
    let fed = harness.feed(buy("alice", "x", "99", "1").on("NOPE"));
    assert_eq!(fed.events[0]["reason"], "unknown_symbol");
    // Then the halt: before duplicate_id (open or remembered finished), invalid price
    // or quantity, and funds, and for accounts that do not exist.
    for (account, id, price, qty) in [
        ("alice", "open", "99", "1"),
        ("alice", "gone", "99", "1"),
        ("alice", "x", "99.5", "1"),
        ("alice", "x", "99", "0.001"),
        ("alice", "x", "5000", "100"),
        ("nobody", "x", "99", "1"),
    ] {
        let fed = harness.feed(buy(account, id, price, qty));
        let expected = format!(
            r#"{{"ev":"rejected","reason":"instrument_halted","account":"{account}","id":"{id}"}}"#
        );
        assert_events(&fed, &[&expected]);
    }
    // An amend: unknown_order first, then the halt, before price and quantity checks.
    assert_eq!(
        harness.feed(amend_price("alice", "gone", "98")).events[0]["reason"],
        "unknown_order"
    );
    assert_eq!(
        harness.feed(amend_price("nobody", "open", "98")).events[0]["reason"],
        "unknown_order"
    );
    assert_eq!(
        harness.feed(amend_price("alice", "open", "98.5")).events[0]["reason"],
        "instrument_halted"
    );
    assert_eq!(
        harness.feed(amend_qty("alice", "open", "0")).events[0]["reason"],
        "instrument_halted"
    );
    // Without activity, the same (but the finished id is the exchange's to judge).
    let mut plain = Harness::funded(false);
    plain.ok(buy("alice", "open", "99", "1"));
    plain.ok(halt("BTC-USD"));
    assert_eq!(
        plain.feed(buy("alice", "open", "99", "1")).events[0]["reason"],
        "instrument_halted"
    );
    assert_eq!(
        plain.feed(amend_price("alice", "open", "98")).events[0]["reason"],
        "instrument_halted"
    );
    assert_eq!(plain.feed(amend_price("alice", "nope", "98")).events[0]["reason"], "unknown_order");
}

#[test]
fn a_halt_by_account_id_echoes_the_accounts_name() {
    let mut harness = Harness::funded(true);
    harness.ok(buy("alice", "b1", "99", "1"));
    harness.ok(halt("BTC-USD"));
    let alice = harness.account("alice");
    for line in [buy("alice", "b2", "99", "1"), amend_price("alice", "b1", "98")] {
        let (mut command, _) = owned_command(&line);
        *command.account_mut().unwrap() = AccountRef::Id(alice);
        let events = harness.apply(&command, None);
        assert_eq!(events[0]["reason"], "instrument_halted");
        assert_eq!(events[0]["account"], "alice");
    }
    // An id that names no account is echoed as the exchange echoes it.
    let (mut command, _) = owned_command(buy("alice", "b3", "99", "1"));
    *command.account_mut().unwrap() = AccountRef::Id(AccountId(77));
    let events = harness.apply(&command, None);
    assert_eq!(
        (events[0]["reason"].as_str(), events[0]["account"].as_str()),
        (Some("instrument_halted"), Some("#77"))
    );
}

// ----------------------------------------------------------------------------------
// Cancel-all

/// alice's orders, interleaved on both instruments and with bob's, so that ascending
/// order id differs from the books' order.
fn with_orders(track_activity: bool) -> Harness {
    let mut harness = Harness::funded(track_activity);
    harness.ok(buy("alice", "a1", "90", "1")); // seq 15
    harness.ok(sell("alice", "a2", "30", "1").on("ETH-USD"));
    harness.ok(buy("alice", "a3", "95", "1"));
    harness.ok(buy("bob", "b1", "96", "1"));
    harness.ok(sell("alice", "a4", "120", "0.5"));
    harness.ok(buy("alice", "a5", "20", "2").on("ETH-USD"));
    harness.ok(sell("bob", "b2", "121", "2"));
    harness
}

/// Asserts that a cancel-all was accepted and canceled `account`'s unfilled orders
/// `ids`, in that order.
fn assert_all_canceled(fed: &Fed, account: &str, ids: &[&str]) {
    let dones: Vec<String> = ids.iter().map(|id| canceled(account, id, "0")).collect();
    let mut expected = vec![ACCEPTED];
    expected.extend(dones.iter().map(String::as_str));
    assert_events(fed, &expected);
}

/// Asserts that `account` holds nothing and has exactly what it deposited, available.
fn assert_holds_nothing(harness: &Harness, account: &str) {
    for (asset, units) in FUNDED {
        assert_eq!(harness.balance(account, asset), (units, 0), "{asset}");
    }
}

#[test]
fn cancel_all_cancels_every_open_order_in_ascending_order_id_with_activity() {
    let mut harness = with_orders(true);
    let fed = harness.ok(cancel_all("alice"));
    assert_all_canceled(&fed, "alice", &["a1", "a2", "a3", "a4", "a5"]);
    // Every hold released: alice has exactly what she deposited, available.
    assert_holds_nothing(&harness, "alice");
    // bob's orders are untouched.
    assert_eq!(harness.venue.exchange().open_order_count(), 2);
    let activity = harness.venue.activity().unwrap();
    assert_eq!(activity.open_order_count(harness.account("alice")), 0);
    assert_eq!(activity.open_order_count(harness.account("bob")), 2);
    // Again: accepted, nothing to cancel.
    assert_events(&harness.ok(cancel_all("alice")), &[ACCEPTED]);
}

#[test]
fn cancel_all_without_activity_walks_the_books_in_instrument_then_priority_order() {
    let mut harness = with_orders(false);
    let fed = harness.ok(cancel_all("alice"));
    // BTC-USD bids (95 before 90), BTC-USD asks, ETH-USD bids, ETH-USD asks.
    assert_all_canceled(&fed, "alice", &["a3", "a1", "a4", "a5", "a2"]);
    assert_holds_nothing(&harness, "alice");
    assert_eq!(harness.venue.exchange().open_order_count(), 2);
    // Same time, same price: arrival order.
    let mut harness = Harness::funded(false);
    for id in ["q1", "q2", "q3"] {
        harness.ok(buy("carol", id, "90", "1"));
    }
    harness.ok(amend_qty("carol", "q1", "2")); // loses priority: now last
    let fed = harness.ok(cancel_all("carol"));
    let ids: Vec<&str> =
        fed.events[1..].iter().map(|event| event["id"].as_str().unwrap()).collect();
    assert_eq!(ids, ["q2", "q3", "q1"]);
}

#[test]
fn cancel_all_on_one_instrument_leaves_the_others() {
    for track_activity in [true, false] {
        let mut harness = with_orders(track_activity);
        let usd_before = harness.balance("alice", "USD");
        let btc_before = harness.balance("alice", "BTC");
        let fed = harness.ok(cancel_all("alice").with("symbol", "ETH-USD"));
        let (a2, a5) = (canceled("alice", "a2", "0"), canceled("alice", "a5", "0"));
        let expected = if track_activity { [ACCEPTED, &a2, &a5] } else { [ACCEPTED, &a5, &a2] };
        assert_events(&fed, &expected);
        // a5 held 20 * 2 = 40 USD; a2 held 1 ETH.
        assert_eq!(harness.balance("alice", "USD"), (usd_before.0 + 4_000, usd_before.1 - 4_000));
        assert_eq!(harness.balance("alice", "ETH"), (100_000, 0));
        assert_eq!(harness.balance("alice", "BTC"), btc_before);
        assert_eq!(harness.venue.exchange().open_order_count(), 5);
        // BTC-USD now, halted: cancel-all works through a halt.
        harness.ok(halt("BTC-USD"));
        let fed = harness.ok(cancel_all("alice").with("symbol", "BTC-USD"));
        assert_eq!(fed.events.len(), 4);
        assert_eq!(harness.venue.exchange().open_order_count(), 2);
    }
}

#[test]
fn cancel_all_of_an_account_with_nothing_open_or_that_does_not_exist_is_accepted() {
    let mut harness = with_orders(true);
    let before = harness.encoded();
    for line in [
        cancel_all("carol"),
        cancel_all("nobody"),
        cancel_all("nobody").with("symbol", "BTC-USD"),
        cancel_all("bob").with("symbol", "ETH-USD"),
    ] {
        assert_events(&harness.ok(line), &[ACCEPTED]);
    }
    let (mut command, _) = owned_command(cancel_all("x"));
    *command.account_mut().unwrap() = AccountRef::Id(AccountId(99));
    assert_eq!(
        harness.apply(&command, None),
        vec![serde_json::json!({"ev":"accepted","seq":harness.seq})]
    );
    assert!(harness.encoded() == before);
    // An unknown symbol is rejected even for an account that does not exist.
    assert_eq!(
        harness.feed(cancel_all("nobody").with("symbol", "NOPE")).events[0]["reason"],
        "unknown_symbol"
    );
}

#[test]
fn cancel_all_reports_what_each_order_filled_and_releases_what_it_still_holds() {
    let mut harness = Harness::funded(true);
    harness.ok(buy("alice", "a1", "100", "2"));
    harness.ok(sell("alice", "a2", "30", "5").on("ETH-USD"));
    harness.ok(sell("bob", "s1", "100", "0.75"));
    harness.ok(buy("carol", "c1", "30", "2").on("ETH-USD"));
    let fed = harness.ok(cancel_all("alice").with("ts", 99));
    assert_events(
        &fed,
        &[ACCEPTED, &canceled("alice", "a1", "0.75"), &canceled("alice", "a2", "2")],
    );
    assert_eq!(harness.balance("alice", "USD").1, 0);
    assert_eq!(harness.balance("alice", "ETH").1, 0);
    assert_eq!(harness.balance("alice", "BTC").1, 0);
    // A cancel of each would have given the same events and state.
    let mut one_by_one = Harness::funded(true);
    one_by_one.ok(buy("alice", "a1", "100", "2"));
    one_by_one.ok(sell("alice", "a2", "30", "5").on("ETH-USD"));
    one_by_one.ok(sell("bob", "s1", "100", "0.75"));
    one_by_one.ok(buy("carol", "c1", "30", "2").on("ETH-USD"));
    one_by_one.ok(cancel("alice", "a1").with("ts", 99));
    one_by_one.ok(cancel("alice", "a2"));
    assert!(state_bytes(one_by_one.venue.exchange()) == state_bytes(harness.venue.exchange()));
}

#[test]
fn cancel_all_turns_the_records_canceled_and_their_ids_stay_remembered() {
    let mut harness = with_orders(true);
    let fed = harness.ok(cancel_all("alice").with("ts", 1_234));
    let activity = harness.venue.activity().unwrap();
    let alice = harness.account("alice");
    let finished: Vec<(String, OrderStatus, u64)> = activity
        .finished_orders(alice)
        .map(|record| (record.client_id.to_string(), record.status, record.updated_ns.0))
        .collect();
    let expected: Vec<(String, OrderStatus, u64)> = ["a1", "a2", "a3", "a4", "a5"]
        .iter()
        .map(|id| (id.to_string(), OrderStatus::Canceled, 1_234))
        .collect();
    assert_eq!(finished, expected);
    assert_eq!(activity.order_by_client(alice, "a4").unwrap().remaining, Qty::ZERO);
    assert_eq!(fed.events.len(), 6);
    // The reuse rule applies to them.
    assert_eq!(harness.feed(buy("alice", "a1", "90", "1")).events[0]["reason"], "duplicate_id");
}

#[test]
fn cancel_all_by_account_id_gives_what_by_name_gives() {
    let mut by_name = with_orders(true);
    let mut by_id = with_orders(true);
    let named = by_name.feed(cancel_all("alice").with("symbol", "BTC-USD"));
    let (mut command, ts) = command_of(&named.line);
    let alice = by_id.account("alice");
    *command.account_mut().unwrap() = AccountRef::Id(alice);
    assert_eq!(command.account(), Some(&AccountRef::Id(alice)));
    assert_eq!(command.order_key(), None);
    assert_eq!(by_id.apply(&command, ts), named.events);
    assert!(by_id.encoded() == by_name.encoded());
}

// ----------------------------------------------------------------------------------
// The exchange alone

#[test]
fn the_exchange_alone_rejects_venue_commands_malformed_and_changes_nothing() {
    let mut harness = with_orders(false);
    harness.ok(halt("BTC-USD"));
    let (mut exchange, _) =
        std::mem::replace(&mut harness.venue, Venue::new(Exchange::default(), false)).into_parts();
    let before = state_bytes(&exchange);
    let commands = [
        Command::Halt { symbol: "ETH-USD".into() },
        Command::Resume { symbol: "BTC-USD".into() },
        Command::CancelAll { account: "alice".into(), symbol: None },
        Command::CancelAll {
            account: AccountRef::Id(AccountId(0)),
            symbol: Some("BTC-USD".into()),
        },
        Command::Halt { symbol: "NOPE".into() },
        Command::SetLimits { open_orders_per_account: 1 },
        Command::SetLimits { open_orders_per_account: 0 },
    ];
    for (index, command) in commands.iter().enumerate() {
        assert!(command.is_venue_command());
        let seq = Seq(100 + index as u64);
        let mut events = Vec::new();
        exchange.apply(seq, Some(TimestampNs(u64::MAX)), command, &mut events);
        assert_eq!(events, [Event::Rejected { seq, reason: RejectReason::Malformed }]);
    }
    // Not even the time moved.
    assert!(state_bytes(&exchange) == before);
    // And the replay format has no such commands (`bourse replay` is the reference).
    let mut replay = bourse_core::Replay::new();
    let mut out = String::new();
    replay.feed_line(r#"{"cmd":"halt","symbol":"BTC-USD"}"#, &mut out);
    assert_eq!(out.trim_end(), r#"{"ev":"rejected","seq":1,"reason":"malformed"}"#);
    out.clear();
    replay.feed_line(r#"{"cmd":"set_limits","open_orders_per_account":1}"#, &mut out);
    assert_eq!(out.trim_end(), r#"{"ev":"rejected","seq":2,"reason":"malformed"}"#);
}

#[test]
fn the_new_reasons_are_appended() {
    assert_eq!(RejectReason::ALL.len(), 20);
    assert_eq!(RejectReason::ALL[14], RejectReason::UnknownOrder);
    assert_eq!(RejectReason::ALL[15], RejectReason::InstrumentHalted);
    assert_eq!(RejectReason::InstrumentHalted.code(), "instrument_halted");
    assert_eq!(RejectReason::ALL[16], RejectReason::TooManyOpenOrders);
    assert_eq!(RejectReason::TooManyOpenOrders.code(), "too_many_open_orders");
    assert_eq!(RejectReason::ALL[17], RejectReason::InvalidOffset);
    assert_eq!(RejectReason::ALL[18], RejectReason::InsufficientPosition);
    assert_eq!(RejectReason::ALL[19], RejectReason::InvalidOrder);
    assert_eq!(RejectReason::InvalidOrder.code(), "invalid_order");
    let codes: BTreeSet<&str> = RejectReason::ALL.iter().map(|reason| reason.code()).collect();
    assert_eq!(codes.len(), RejectReason::ALL.len());
}

// ----------------------------------------------------------------------------------
// Snapshots

#[test]
fn halts_survive_a_snapshot_with_activity() {
    let mut harness = with_orders(true);
    harness.ok(halt("ETH-USD"));
    harness.ok(cancel("alice", "a1"));
    let bytes = harness.encoded();
    assert!(bytes.starts_with(&VENUE_MAGIC));
    let mut restored = decode_venue(&bytes, ExchangeConfig::default(), true).unwrap();
    restored.check_invariants().unwrap();
    assert!(venue_bytes(&restored) == bytes);
    assert!(restored.is_halted(ETH_USD) && !restored.is_halted(BTC_USD));
    assert_eq!(
        restored.activity().unwrap().order_count(),
        harness.venue.activity().unwrap().order_count()
    );
    // The restored venue goes on exactly like the original.
    harness.go_on_in_step(
        &mut restored,
        [
            buy("carol", "c1", "20", "2").on("ETH-USD"),
            resume("ETH-USD"),
            buy("carol", "c1", "30", "1").on("ETH-USD"),
            cancel_all("alice"),
            buy("alice", "a1", "1", "1"),
        ],
    );
    // Decoded without activity: the activity is dropped, the halt kept.
    let plain = decode_venue(&bytes, ExchangeConfig::default(), false).unwrap();
    assert!(plain.activity().is_none() && plain.is_halted(ETH_USD));
    let plain_bytes = venue_bytes(&plain);
    let state = state_bytes(plain.exchange());
    assert!(plain_bytes == container(&state, &[0, 1, 1]));
}

#[test]
fn halts_survive_a_snapshot_without_activity() {
    let mut harness = with_orders(false);
    // No halts: the exchange's snapshot, as before.
    assert!(harness.encoded() == state_bytes(harness.venue.exchange()));
    assert!(harness.encoded().starts_with(&MAGIC));
    harness.ok(halt("BTC-USD"));
    harness.ok(halt("ETH-USD"));
    let bytes = harness.encoded();
    let state = state_bytes(harness.venue.exchange());
    // flags 0 (no activity), two halted instruments: 0 and 1.
    assert!(bytes == container(&state, &[0, 2, 0, 1]));
    let restored = decode_venue(&bytes, ExchangeConfig::default(), false).unwrap();
    restored.check_invariants().unwrap();
    assert_eq!(restored.halted_symbols().collect::<Vec<_>>(), ["BTC-USD", "ETH-USD"]);
    assert!(venue_bytes(&restored) == bytes);
    // Decoded with activity: the open orders' records are rebuilt, the halts kept.
    let tracking = decode_venue(&bytes, ExchangeConfig::default(), true).unwrap();
    tracking.check_invariants().unwrap();
    assert!(tracking.is_halted(BTC_USD) && tracking.is_halted(ETH_USD));
    assert_eq!(tracking.activity().unwrap().order_count(), 7);
    let rebuilt = Venue::new(
        decode_venue(&state, ExchangeConfig::default(), false).unwrap().into_parts().0,
        true,
    );
    let mut expected = venue_bytes(&rebuilt);
    // The same activity, with the halts in front of it.
    let activity_at = container(&state, &[]).len();
    expected.splice(activity_at..activity_at + 2, [1, 2, 0, 1]);
    assert!(venue_bytes(&tracking) == expected);
}

#[test]
fn each_kind_of_bad_halt_list_has_its_error() {
    let harness = with_orders(false);
    let state = state_bytes(harness.venue.exchange());
    let decode = |rest: &[u8]| {
        decode_venue(&container(&state, rest), ExchangeConfig::default(), true).map(|_| ())
    };
    let state_end = container(&state, &[]).len();
    assert!(decode(&[0, 1, 1]).is_ok());
    let invalid = |what: &str, at: usize| {
        Err(SnapshotError::Invalid { offset: state_end + at, what: what.to_string().into() })
    };
    assert_eq!(decode(&[0, 1, 2]), invalid("unknown instrument", 2));
    assert_eq!(
        decode(&[0, 2, 1, 0]),
        invalid("halted instruments out of order or listed twice", 3)
    );
    assert_eq!(
        decode(&[0, 2, 1, 1]),
        invalid("halted instruments out of order or listed twice", 3)
    );
    assert_eq!(decode(&[4, 1, 0]), invalid("unknown venue flags", 0));
    assert_eq!(decode(&[0x80, 1, 0]), invalid("unknown venue flags", 0));
    assert_eq!(
        decode(&[0, 0]),
        invalid(
            "a venue container with neither activity nor halts nor a limit (stored as its \
             exchange)",
            0
        )
    );
    assert_eq!(decode(&[0, 1, 0, 0]), invalid("bytes after the end of the snapshot", 3));
    assert!(matches!(decode(&[0, 3, 0, 1]), Err(SnapshotError::Truncated { .. })));
    assert!(matches!(decode(&[0]), Err(SnapshotError::Truncated { .. })));
    assert!(matches!(decode(&[]), Err(SnapshotError::Truncated { .. })));
    // The activity flag with no activity section.
    assert!(matches!(decode(&[1, 1, 0]), Err(SnapshotError::Truncated { .. })));
    // A huge count is a truncation, found before anything is allocated for it.
    assert!(matches!(
        decode(&[0, 0xff, 0xff, 0xff, 0xff, 0x0f]),
        Err(SnapshotError::Truncated { .. })
    ));
}

/// A venue of a random stream with halts (and activity when `track_activity`).
fn venue_of_stream(seed: u64, commands: usize, track_activity: bool) -> Venue {
    let last = Command::Halt { symbol: MARKETS[1].symbol.into() };
    venue_after(&random_venue_stream(seed, commands), &last, track_activity)
}

#[test]
fn every_truncation_of_a_snapshot_with_halts_is_an_error_and_flipped_bytes_never_panic() {
    let mut random = Random(0x4a17_5eed);
    for track_activity in [false, true] {
        let venue = venue_of_stream(11, 150, track_activity);
        assert!(venue.halted_instruments().count() >= 1);
        let bytes = venue_bytes(&venue);
        assert!(bytes.starts_with(&VENUE_MAGIC));
        assert_every_truncation_fails(&bytes, track_activity);
        // Mostly in what follows the state: the flags, the halts and the activity.
        let tail_at = container(&state_bytes(venue.exchange()), &[]).len();
        for _ in 0..800 {
            let mut flipped = bytes.clone();
            let position = if random.below(3) == 0 {
                random.below(flipped.len() as u64) as usize
            } else {
                tail_at + random.below((flipped.len() - tail_at) as u64) as usize
            };
            flipped[position] ^= 1 + random.below(255) as u8;
            decodes_sanely(&flipped, track_activity, true);
            decodes_sanely(&flipped, !track_activity, false);
        }
    }
}

// ----------------------------------------------------------------------------------
// Random streams

/// What the random streams showed, to check that they reach what they must.
#[derive(Default, Debug)]
struct Seen {
    halts: usize,
    resumes: usize,
    halted_rejections: usize,
    cancel_alls: usize,
    cancel_all_dones: usize,
    unknown_symbols: usize,
    trades: usize,
    limit_sets: usize,
    too_many_rejections: usize,
    /// Orders accepted while a limit was in force (with activity).
    accepted_under_limit: usize,
}

/// The open orders a cancel-all of `account` (on `only`, if given) must cancel, as
/// (id, filled), in the order the venue documents.
fn expected_cancels(
    venue: &Venue,
    account: AccountId,
    only: Option<InstrumentId>,
) -> Vec<(ClientOrderId, Qty, InstrumentId)> {
    let on = |instrument: InstrumentId| only.is_none_or(|only| only == instrument);
    match venue.activity() {
        Some(activity) => activity
            .open_orders(account)
            .filter(|record| on(record.instrument))
            .map(|record| (record.client_id.clone(), record.filled, record.instrument))
            .collect(),
        None => {
            let exchange = venue.exchange();
            let mut orders = Vec::new();
            for index in 0..exchange.instruments().len() {
                let instrument = InstrumentId(index as u32);
                if !on(instrument) {
                    continue;
                }
                for side in [Side::Buy, Side::Sell] {
                    exchange.book(instrument).for_each_order(side, |order| {
                        if order.account == account {
                            orders.push((order.id.clone(), order.filled, instrument));
                        }
                    });
                }
            }
            orders
        }
    }
}

/// Runs one stream through a venue (with activity when `track_activity`), checking
/// every rule of the venue's commands against a model of the halts and the open-orders
/// limit, the invariants after every command, and that venues restored from snapshots
/// taken at `cuts` give exactly the same events afterwards and end in exactly the same
/// venue.
fn run_stream(
    lines: &[String],
    track_activity: bool,
    by_id: bool,
    cuts: &[usize],
    seen: &mut Seen,
) {
    let mut venue = Venue::new(Exchange::default(), track_activity);
    let mut halted: BTreeSet<String> = BTreeSet::new();
    let mut limit = 0u64;
    let mut forks = Forks::new(cuts, track_activity, false);
    for index in 0..=lines.len() {
        forks.cut(index, &venue);
        let Some(line) = lines.get(index) else { break };
        let seq = Seq(index as u64 + 1);
        let (command, ts) = command_for(line, venue.exchange(), by_id);
        let exchange = venue.exchange();
        let known = |symbol: &str| exchange.find_instrument(symbol).is_some();
        // What the model expects, worked out before the command is applied.
        let resolve = |account: &AccountRef<'_>| match account {
            AccountRef::Name(name) => exchange.ledger().find_account(name),
            AccountRef::Id(id) => Some(*id),
        };
        // An order's account's open orders before it, when the venue counts them.
        let open_before = match &command {
            Command::Order(order) => {
                venue.activity().zip(resolve(&order.account)).map(|(activity, account)| {
                    let remembered = activity.order_by_client(account, &order.id).is_some();
                    (account, activity.open_order_count(account) as u64, remembered)
                })
            }
            _ => None,
        };
        let expected: Option<Vec<Event>> = match &command {
            Command::Order(order) if halted.contains(&*order.symbol) => {
                Some(vec![Event::Rejected { seq, reason: RejectReason::InstrumentHalted }])
            }
            // The limit: after unknown_symbol, the halt and duplicate_id (a remembered
            // id, open or finished), with activity only.
            Command::Order(order) => {
                let at_limit = limit > 0
                    && known(&order.symbol)
                    && open_before
                        .is_some_and(|(_, open, remembered)| !remembered && open >= limit);
                at_limit
                    .then(|| vec![Event::Rejected { seq, reason: RejectReason::TooManyOpenOrders }])
            }
            Command::SetLimits { .. } => Some(vec![Event::Accepted { seq, account: None }]),
            Command::Amend(amend) => {
                let on_halted = resolve(&amend.account)
                    .and_then(|account| exchange.open_order(account, &amend.id))
                    .is_some_and(|(instrument, _)| {
                        halted.contains(&*exchange.instrument(instrument).symbol)
                    });
                on_halted
                    .then(|| vec![Event::Rejected { seq, reason: RejectReason::InstrumentHalted }])
            }
            Command::Halt { symbol } | Command::Resume { symbol } => Some(vec![if known(symbol) {
                Event::Accepted { seq, account: None }
            } else {
                Event::Rejected { seq, reason: RejectReason::UnknownSymbol }
            }]),
            Command::CancelAll { account, symbol } => {
                let only = symbol.as_deref().map(|symbol| exchange.find_instrument(symbol));
                Some(match only {
                    Some(None) => {
                        vec![Event::Rejected { seq, reason: RejectReason::UnknownSymbol }]
                    }
                    only => {
                        let mut events = vec![Event::Accepted { seq, account: None }];
                        if let Some(account) = resolve(account)
                            .filter(|id| id.index() < exchange.ledger().accounts().len())
                        {
                            for (id, filled, instrument) in
                                expected_cancels(&venue, account, only.flatten())
                            {
                                events.push(Event::Done {
                                    seq,
                                    instrument,
                                    account,
                                    id,
                                    reason: DoneReason::Canceled,
                                    filled,
                                });
                            }
                        }
                        events
                    }
                })
            }
            _ => None,
        };
        let mut got = Vec::new();
        venue.apply(seq, ts, &command, &mut got);
        if let Some(expected) = &expected {
            assert_eq!(&got, expected, "seq {seq}: {line}");
        }
        if let Err(problem) = venue.check_invariants() {
            panic!("seq {seq}: {line}: {problem}");
        }
        // The model follows; the venue must agree with it.
        match (&command, &got[0]) {
            (Command::Halt { symbol }, Event::Accepted { .. }) => {
                halted.insert(symbol.to_string());
                seen.halts += 1;
            }
            (Command::Resume { symbol }, Event::Accepted { .. }) => {
                halted.remove(&**symbol);
                seen.resumes += 1;
            }
            (Command::CancelAll { account, symbol }, Event::Accepted { .. }) => {
                seen.cancel_alls += 1;
                seen.cancel_all_dones += got.len() - 1;
                // Nothing of the account is left open there.
                if let Some(account) = resolve_after(&venue, account) {
                    let only = symbol
                        .as_deref()
                        .and_then(|symbol| venue.exchange().find_instrument(symbol));
                    assert!(
                        expected_cancels(&venue, account, only).is_empty(),
                        "seq {seq}: {line}"
                    );
                }
            }
            (Command::SetLimits { open_orders_per_account }, Event::Accepted { .. }) => {
                limit = *open_orders_per_account;
                seen.limit_sets += 1;
            }
            (Command::Order(_), Event::Accepted { .. }) => {
                // An account below the limit, or no limit: never above it by an order.
                if let Some((account, open, _)) = open_before.filter(|_| limit > 0) {
                    assert!(open < limit, "seq {seq}: accepted at {open} open of {limit}");
                    let after = venue.activity().unwrap().open_order_count(account) as u64;
                    assert!(after <= limit, "seq {seq}: {after} open of {limit}");
                    seen.accepted_under_limit += 1;
                }
            }
            (_, Event::Rejected { reason: RejectReason::TooManyOpenOrders, .. }) => {
                assert!(
                    expected.is_some() && track_activity && limit > 0,
                    "seq {seq}: {line}: too_many_open_orders the model did not expect"
                );
                seen.too_many_rejections += 1;
            }
            (_, Event::Rejected { reason: RejectReason::InstrumentHalted, .. }) => {
                seen.halted_rejections += 1
            }
            (_, Event::Rejected { reason: RejectReason::UnknownSymbol, .. }) => {
                seen.unknown_symbols += 1
            }
            _ => {}
        }
        assert_eq!(venue.open_orders_limit(), limit, "seq {seq}");
        let symbols: Vec<&str> = venue.halted_symbols().collect();
        assert!(
            symbols.iter().copied().eq(halted.iter().map(String::as_str)),
            "seq {seq}: {symbols:?} != {halted:?}"
        );
        for event in &got {
            if let Event::Trade(trade) = event {
                assert!(
                    !venue.is_halted(trade.instrument),
                    "seq {seq}: a trade on a halted instrument"
                );
                seen.trades += 1;
            }
        }
        forks.follow(seq, ts, &command, &got, line);
    }
    forks.finish(&venue);
}

fn resolve_after(venue: &Venue, account: &AccountRef<'_>) -> Option<AccountId> {
    match account {
        AccountRef::Name(name) => venue.exchange().ledger().find_account(name),
        AccountRef::Id(id) => {
            (id.index() < venue.exchange().ledger().accounts().len()).then_some(*id)
        }
    }
}

#[test]
fn random_streams_with_halts_and_cancel_alls_keep_every_rule_and_restore_anywhere() {
    let mut seen = Seen::default();
    for seed in 1..=6u64 {
        let lines = random_venue_stream(seed * 6_151, 6_000);
        let mut random = Random(seed * 97 + 3);
        let mut cuts = vec![0, 9, lines.len()];
        cuts.extend((0..4).map(|_| DEFINITIONS.len() + random.below(lines.len() as u64) as usize));
        run_stream(&lines, seed % 3 != 0, seed % 2 == 0, &cuts, &mut seen);
    }
    eprintln!("{seen:?}");
    assert!(seen.halts > 100 && seen.resumes > 100, "{seen:?}");
    assert!(seen.halted_rejections > 1_000, "{seen:?}");
    assert!(seen.cancel_alls > 100 && seen.cancel_all_dones > 300, "{seen:?}");
    assert!(seen.unknown_symbols > 50, "{seen:?}");
    assert!(seen.trades > 1_000, "{seen:?}");
}

#[test]
fn random_streams_with_limits_keep_every_rule_and_restore_anywhere() {
    let mut seen = Seen::default();
    for seed in 1..=6u64 {
        let lines = random_venue_stream_with_limits(seed * 4_099, 5_000);
        let mut random = Random(seed * 131 + 7);
        let mut cuts = vec![0, 9, lines.len()];
        cuts.extend((0..5).map(|_| DEFINITIONS.len() + random.below(lines.len() as u64) as usize));
        run_stream(&lines, seed % 3 != 0, seed % 2 == 0, &cuts, &mut seen);
    }
    eprintln!("{seen:?}");
    assert!(seen.limit_sets > 60, "{seen:?}");
    assert!(seen.too_many_rejections > 500, "{seen:?}");
    assert!(seen.accepted_under_limit > 500, "{seen:?}");
    assert!(seen.halted_rejections > 500 && seen.cancel_all_dones > 100, "{seen:?}");
    // Fewer than without limits: small limits keep the books thin.
    assert!(seen.trades > 400, "{seen:?}");
}

#[test]
fn with_fresh_ids_venues_with_and_without_activity_differ_only_in_the_order_of_cancel_all_dones() {
    for seed in 1..=3u64 {
        // Every order id fresh: the reuse rule never applies.
        let lines = with_fresh_ids(random_venue_stream(seed * 7_727, 3_000));
        let mut tracking = Venue::new(Exchange::default(), true);
        let mut plain = Venue::new(Exchange::default(), false);
        let mut reordered = 0;
        for (index, line) in lines.iter().enumerate() {
            let seq = index as u64 + 1;
            let (command, ts) = command_of(line);
            let mut with = Vec::new();
            tracking.apply(Seq(seq), ts, &command, &mut with);
            let mut without = Vec::new();
            plain.apply(Seq(seq), ts, &command, &mut without);
            if matches!(command, Command::CancelAll { .. }) && with != without {
                let key = |event: &Event| format!("{event:?}");
                let mut with: Vec<String> = with.iter().map(key).collect();
                let mut without: Vec<String> = without.iter().map(key).collect();
                with.sort();
                without.sort();
                assert_eq!(with, without, "seed {seed}, seq {seq}: {line}");
                reordered += 1;
            } else {
                assert_eq!(with, without, "seed {seed}, seq {seq}: {line}");
            }
        }
        tracking.check_invariants().unwrap();
        plain.check_invariants().unwrap();
        assert!(state_bytes(tracking.exchange()) == state_bytes(plain.exchange()));
        assert!(tracking.halted_instruments().eq(plain.halted_instruments()));
        assert!(reordered > 0, "seed {seed}: no cancel-all met orders in different orders");
    }
}

/// What `Venue::book_note` and the engine's order id once found by looking the command's
/// order up again after applying it; `Venue::apply` now returns them (`Applied`).
fn looked_up(venue: &Venue, seq: Seq, command: &Command<'_>, events: &[Event]) -> Looked {
    if !matches!(events.first(), Some(Event::Accepted { .. })) {
        return (None, None);
    }
    let exchange = venue.exchange();
    let note = match command {
        Command::Order(order) => exchange.resolve(&order.account).and_then(|account| {
            let (instrument, resting) = exchange.open_order(account, &order.id)?;
            Some(BookNote::Rested {
                seq,
                instrument,
                account,
                id: resting.id.clone(),
                side: resting.side,
                price: resting.price,
                qty: resting.remaining,
            })
        }),
        Command::Halt { symbol } | Command::Resume { symbol } => {
            exchange.find_instrument(symbol).map(|instrument| BookNote::Halted {
                seq,
                instrument,
                halted: matches!(command, Command::Halt { .. }),
            })
        }
        Command::Instrument(instrument) => exchange
            .find_instrument(&instrument.symbol)
            .map(|instrument| BookNote::Declared { seq, instrument }),
        Command::Future(future) => exchange
            .find_instrument(&future.symbol)
            .map(|instrument| BookNote::Declared { seq, instrument }),
        _ => None,
    };
    let order_id = venue.activity().and_then(|activity| {
        let (account, id) = match command {
            Command::Order(_) => return Some(OrderId::of(seq)),
            Command::Cancel { account, id } => (account, id),
            Command::Amend(amend) => (&amend.account, &amend.id),
            _ => return None,
        };
        let account = exchange.resolve(account)?;
        activity.order_by_client(account, id).map(|record| record.order_id)
    });
    (note, order_id)
}

type Looked = (Option<BookNote>, Option<OrderId>);

#[test]
fn what_apply_returns_is_what_looking_the_order_up_again_finds() {
    for seed in 1..=4u64 {
        for track_activity in [true, false] {
            let lines = random_venue_stream_with_limits(seed * 131, 3_000);
            let mut venue = Venue::new(Exchange::default(), track_activity);
            let (mut rested, mut halts, mut named) = (0usize, 0usize, 0usize);
            for (index, line) in lines.iter().enumerate() {
                let seq = Seq(index as u64 + 1);
                let (command, ts) = command_of(line);
                let mut events = Vec::new();
                let applied = venue.apply(seq, ts, &command, &mut events);
                let note = venue.book_note(seq, &applied);
                let (expected_note, expected_order_id) = looked_up(&venue, seq, &command, &events);
                assert_eq!(note, expected_note, "seed {seed}, seq {seq}: {line}");
                assert_eq!(applied.order_id, expected_order_id, "seed {seed}, seq {seq}: {line}");
                rested += usize::from(matches!(note, Some(BookNote::Rested { .. })));
                halts += usize::from(matches!(note, Some(BookNote::Halted { .. })));
                named += usize::from(applied.order_id.is_some());
            }
            assert!(rested > 100 && halts > 5, "seed {seed}: {rested} rested, {halts} halts");
            assert_eq!(named > 100, track_activity, "seed {seed}: {named} orders named");
        }
    }
}
