//! Matching rules of the replay format: price-time priority, trades at the maker's
//! price, sweeping several levels, partial fills, the event order of a match, and the
//! order of the book in the final state.
//!
//! BTC-USD (see `support`): tick 1, lot 0.01, qty 0.1..=100, no fees.

mod support;

use support::*;

/// bob and carol each have 10 BTC and 10000 USD, alice has 10000 USD and 10 BTC.
fn funded() -> Exchange {
    Exchange::funded("10000")
}

#[test]
fn trade_executes_at_the_makers_price() {
    let mut exchange = funded();
    exchange.ok(sell("bob", "s1", "100", "1"));
    let fed = exchange.feed(buy("alice", "o1", "105", "1"));
    assert_events_then_any_order(
        &fed,
        &[
            r#"{"ev":"accepted","account":"alice","id":"o1"}"#,
            r#"{"ev":"trade","symbol":"BTC-USD","price":"100","qty":"1","taker_side":"buy","maker_account":"bob","maker_id":"s1","taker_account":"alice","taker_id":"o1","maker_fee":"0","taker_fee":"0"}"#,
        ],
        &[
            r#"{"ev":"done","account":"bob","id":"s1","reason":"filled","filled":"1"}"#,
            r#"{"ev":"done","account":"alice","id":"o1","reason":"filled","filled":"1"}"#,
        ],
    );
}

#[test]
fn sell_taker_trades_at_the_resting_bids_price() {
    let mut exchange = funded();
    exchange.ok(buy("bob", "b1", "105", "1"));
    let fed = exchange.feed(sell("alice", "o1", "100", "1"));
    assert_events_then_any_order(
        &fed,
        &[
            r#"{"ev":"accepted","account":"alice","id":"o1"}"#,
            r#"{"ev":"trade","symbol":"BTC-USD","price":"105","qty":"1","taker_side":"sell","maker_account":"bob","maker_id":"b1","taker_account":"alice","taker_id":"o1","maker_fee":"0","taker_fee":"0"}"#,
        ],
        &[
            r#"{"ev":"done","account":"bob","id":"b1","reason":"filled","filled":"1"}"#,
            r#"{"ev":"done","account":"alice","id":"o1","reason":"filled","filled":"1"}"#,
        ],
    );
}

#[test]
fn better_priced_order_matches_first() {
    let mut exchange = funded();
    exchange.ok(sell("bob", "s1", "101", "1"));
    exchange.ok(sell("carol", "s1", "100", "1"));
    let fed = exchange.feed(buy("alice", "o1", "101", "1"));
    assert_events_then_any_order(
        &fed,
        &[
            r#"{"ev":"accepted","account":"alice","id":"o1"}"#,
            r#"{"ev":"trade","symbol":"BTC-USD","price":"100","qty":"1","taker_side":"buy","maker_account":"carol","maker_id":"s1","taker_account":"alice","taker_id":"o1","maker_fee":"0","taker_fee":"0"}"#,
        ],
        &[
            r#"{"ev":"done","account":"carol","id":"s1","reason":"filled","filled":"1"}"#,
            r#"{"ev":"done","account":"alice","id":"o1","reason":"filled","filled":"1"}"#,
        ],
    );
    exchange.assert_book("BTC-USD", &[], &[("bob", "s1", "101", "1")]);
}

#[test]
fn earlier_order_at_the_same_price_matches_first() {
    let mut exchange = funded();
    exchange.ok(sell("bob", "s1", "100", "1"));
    exchange.ok(sell("carol", "s1", "100", "1"));
    let fed = exchange.feed(buy("alice", "o1", "100", "1"));
    assert_events_then_any_order(
        &fed,
        &[
            r#"{"ev":"accepted","account":"alice","id":"o1"}"#,
            r#"{"ev":"trade","symbol":"BTC-USD","price":"100","qty":"1","taker_side":"buy","maker_account":"bob","maker_id":"s1","taker_account":"alice","taker_id":"o1","maker_fee":"0","taker_fee":"0"}"#,
        ],
        &[
            r#"{"ev":"done","account":"bob","id":"s1","reason":"filled","filled":"1"}"#,
            r#"{"ev":"done","account":"alice","id":"o1","reason":"filled","filled":"1"}"#,
        ],
    );
    exchange.assert_book("BTC-USD", &[], &[("carol", "s1", "100", "1")]);
}

#[test]
fn sell_taker_matches_the_highest_bid_first() {
    let mut exchange = funded();
    exchange.ok(buy("bob", "b1", "99", "1"));
    exchange.ok(buy("carol", "b1", "100", "1"));
    let fed = exchange.feed(sell("alice", "o1", "99", "2"));
    assert_events_then_any_order(
        &fed,
        &[
            r#"{"ev":"accepted","account":"alice","id":"o1"}"#,
            r#"{"ev":"trade","symbol":"BTC-USD","price":"100","qty":"1","taker_side":"sell","maker_account":"carol","maker_id":"b1","taker_account":"alice","taker_id":"o1","maker_fee":"0","taker_fee":"0"}"#,
            r#"{"ev":"done","account":"carol","id":"b1","reason":"filled","filled":"1"}"#,
            r#"{"ev":"trade","symbol":"BTC-USD","price":"99","qty":"1","taker_side":"sell","maker_account":"bob","maker_id":"b1","taker_account":"alice","taker_id":"o1","maker_fee":"0","taker_fee":"0"}"#,
        ],
        &[
            r#"{"ev":"done","account":"bob","id":"b1","reason":"filled","filled":"1"}"#,
            r#"{"ev":"done","account":"alice","id":"o1","reason":"filled","filled":"2"}"#,
        ],
    );
}

#[test]
fn taker_sweeps_levels_in_priority_order_with_each_makers_done_after_its_trade() {
    let mut exchange = funded();
    exchange.ok(sell("bob", "s1", "100", "1"));
    exchange.ok(sell("carol", "s1", "101", "0.5"));
    exchange.ok(sell("bob", "s2", "102", "1"));
    let fed = exchange.feed(buy("alice", "o1", "102", "2.5"));
    assert_events_then_any_order(
        &fed,
        &[
            r#"{"ev":"accepted","account":"alice","id":"o1"}"#,
            r#"{"ev":"trade","symbol":"BTC-USD","price":"100","qty":"1","taker_side":"buy","maker_account":"bob","maker_id":"s1","taker_account":"alice","taker_id":"o1","maker_fee":"0","taker_fee":"0"}"#,
            r#"{"ev":"done","account":"bob","id":"s1","reason":"filled","filled":"1"}"#,
            r#"{"ev":"trade","symbol":"BTC-USD","price":"101","qty":"0.5","taker_side":"buy","maker_account":"carol","maker_id":"s1","taker_account":"alice","taker_id":"o1","maker_fee":"0","taker_fee":"0"}"#,
            r#"{"ev":"done","account":"carol","id":"s1","reason":"filled","filled":"0.5"}"#,
            r#"{"ev":"trade","symbol":"BTC-USD","price":"102","qty":"1","taker_side":"buy","maker_account":"bob","maker_id":"s2","taker_account":"alice","taker_id":"o1","maker_fee":"0","taker_fee":"0"}"#,
        ],
        &[
            r#"{"ev":"done","account":"bob","id":"s2","reason":"filled","filled":"1"}"#,
            r#"{"ev":"done","account":"alice","id":"o1","reason":"filled","filled":"2.5"}"#,
        ],
    );
    exchange.assert_book("BTC-USD", &[], &[]);
    // held 102 * 2.5 = 255, paid 100 + 50.5 + 102 = 252.5
    exchange.assert_balance("alice", "USD", "9747.5", "0");
    exchange.assert_balance("alice", "BTC", "12.5", "0");
}

#[test]
fn partly_filled_maker_keeps_its_place_with_the_remaining_qty() {
    let mut exchange = funded();
    exchange.ok(sell("bob", "s1", "100", "3"));
    exchange.ok(sell("carol", "s1", "100", "1"));
    let fed = exchange.feed(buy("alice", "o1", "100", "1"));
    assert_events(
        &fed,
        &[
            r#"{"ev":"accepted","account":"alice","id":"o1"}"#,
            r#"{"ev":"trade","symbol":"BTC-USD","price":"100","qty":"1","taker_side":"buy","maker_account":"bob","maker_id":"s1","taker_account":"alice","taker_id":"o1","maker_fee":"0","taker_fee":"0"}"#,
            r#"{"ev":"done","account":"alice","id":"o1","reason":"filled","filled":"1"}"#,
        ],
    );
    exchange.assert_book("BTC-USD", &[], &[("bob", "s1", "100", "2"), ("carol", "s1", "100", "1")]);
}

#[test]
fn gtc_remainder_rests_at_its_limit_price() {
    let mut exchange = funded();
    exchange.ok(sell("bob", "s1", "100", "1"));
    let fed = exchange.feed(buy("alice", "o1", "101", "3"));
    assert_events(
        &fed,
        &[
            r#"{"ev":"accepted","account":"alice","id":"o1"}"#,
            r#"{"ev":"trade","symbol":"BTC-USD","price":"100","qty":"1","taker_side":"buy","maker_account":"bob","maker_id":"s1","taker_account":"alice","taker_id":"o1","maker_fee":"0","taker_fee":"0"}"#,
            r#"{"ev":"done","account":"bob","id":"s1","reason":"filled","filled":"1"}"#,
        ],
    );
    exchange.assert_book("BTC-USD", &[("alice", "o1", "101", "2")], &[]);
}

#[test]
fn taker_does_not_match_beyond_its_limit_price() {
    let mut exchange = funded();
    exchange.ok(sell("bob", "s1", "100", "1"));
    exchange.ok(sell("bob", "s2", "102", "1"));
    let fed = exchange.feed(buy("alice", "o1", "101", "2"));
    assert_events(
        &fed,
        &[
            r#"{"ev":"accepted","account":"alice","id":"o1"}"#,
            r#"{"ev":"trade","symbol":"BTC-USD","price":"100","qty":"1","taker_side":"buy","maker_account":"bob","maker_id":"s1","taker_account":"alice","taker_id":"o1","maker_fee":"0","taker_fee":"0"}"#,
            r#"{"ev":"done","account":"bob","id":"s1","reason":"filled","filled":"1"}"#,
        ],
    );
    exchange.assert_book("BTC-USD", &[("alice", "o1", "101", "1")], &[("bob", "s2", "102", "1")]);
}

#[test]
fn maker_filled_over_several_takers_reports_its_cumulative_fill() {
    let mut exchange = funded();
    exchange.ok(sell("bob", "s1", "100", "3"));
    exchange.ok(buy("alice", "o1", "100", "1"));
    let fed = exchange.feed(buy("carol", "o1", "100", "2"));
    assert_events_then_any_order(
        &fed,
        &[
            r#"{"ev":"accepted","account":"carol","id":"o1"}"#,
            r#"{"ev":"trade","symbol":"BTC-USD","price":"100","qty":"2","taker_side":"buy","maker_account":"bob","maker_id":"s1","taker_account":"carol","taker_id":"o1","maker_fee":"0","taker_fee":"0"}"#,
        ],
        &[
            r#"{"ev":"done","account":"bob","id":"s1","reason":"filled","filled":"3"}"#,
            r#"{"ev":"done","account":"carol","id":"o1","reason":"filled","filled":"2"}"#,
        ],
    );
}

#[test]
fn orders_on_different_instruments_do_not_match() {
    let mut exchange = funded();
    exchange.ok(deposit("bob", "ETH", "5"));
    exchange.ok(sell("bob", "e1", "1.00", "5").on("ETH-USD"));
    let fed = exchange.feed(buy("alice", "o1", "100", "1"));
    assert_events(&fed, &[r#"{"ev":"accepted","account":"alice","id":"o1"}"#]);
    exchange.assert_book("BTC-USD", &[("alice", "o1", "100", "1")], &[]);
    exchange.assert_book("ETH-USD", &[], &[("bob", "e1", "1", "5")]);
}

#[test]
fn book_sides_are_listed_best_price_first_then_by_arrival() {
    let mut exchange = funded();
    exchange.ok(buy("alice", "b1", "99", "1"));
    exchange.ok(buy("bob", "b2", "100", "1"));
    exchange.ok(buy("carol", "b3", "100", "2"));
    exchange.ok(buy("alice", "b4", "98", "1"));
    exchange.ok(sell("bob", "s1", "105", "1"));
    exchange.ok(sell("carol", "s2", "103", "1.5"));
    exchange.ok(sell("alice", "s3", "103", "1"));
    exchange.ok(sell("bob", "s4", "104", "1"));
    exchange.assert_book(
        "BTC-USD",
        &[
            ("bob", "b2", "100", "1"),
            ("carol", "b3", "100", "2"),
            ("alice", "b1", "99", "1"),
            ("alice", "b4", "98", "1"),
        ],
        &[
            ("carol", "s2", "103", "1.5"),
            ("alice", "s3", "103", "1"),
            ("bob", "s4", "104", "1"),
            ("bob", "s1", "105", "1"),
        ],
    );
}

#[test]
fn orders_trade_on_a_tick_and_lot_that_are_not_powers_of_ten() {
    let mut exchange = Exchange::standard();
    exchange.ok(asset("GLD", 0));
    exchange.ok(instrument("GLD-USD", "GLD", "USD")
        .with("tick", "0.05")
        .with("lot", "25")
        .with("min_qty", "25")
        .with("max_qty", "1000"));
    exchange.ok(deposit("bob", "GLD", "50"));
    exchange.ok(deposit("alice", "USD", "100"));
    exchange.ok(sell("bob", "s1", "1.05", "50").on("GLD-USD"));
    let fed = exchange.feed(buy("alice", "o1", "1.10", "75").on("GLD-USD"));
    assert_events(
        &fed,
        &[
            r#"{"ev":"accepted","account":"alice","id":"o1"}"#,
            r#"{"ev":"trade","symbol":"GLD-USD","price":"1.05","qty":"50","taker_side":"buy","maker_account":"bob","maker_id":"s1","taker_account":"alice","taker_id":"o1","maker_fee":"0","taker_fee":"0"}"#,
            r#"{"ev":"done","account":"bob","id":"s1","reason":"filled","filled":"50"}"#,
        ],
    );
    exchange.assert_book("GLD-USD", &[("alice", "o1", "1.1", "25")], &[]);
    // held 1.10 * 75 = 82.50; paid 1.05 * 50 = 52.50; 2.50 back; 27.50 still held
    exchange.assert_balance("alice", "USD", "20", "27.5");
    exchange.assert_balance("alice", "GLD", "50", "0");
    exchange.assert_balance("bob", "USD", "52.5", "0");
}
