//! `cancel` and `amend` in the replay format: their events, every rejection reason in
//! the spec's order, queue priority kept or lost, an amend that crosses and trades as
//! a taker, the funds check on the increase only, and `filled` over an order's life.
//!
//! BTC-USD (see `support`): tick 1, lot 0.01, qty 0.1..=100, no fees. ETH-USD: tick
//! 0.01, lot 1, maker 10 bps, taker 25 bps; ETH has 3 decimals, USD 2.

mod support;

use support::*;

/// alice, bob and carol each have 10 BTC and 1000 USD.
fn funded() -> Exchange {
    Exchange::funded("1000")
}

// ---------------------------------------------------------------- cancel

#[test]
fn cancel_of_an_open_order_is_accepted_then_done_canceled() {
    let mut exchange = funded();
    exchange.ok(buy("alice", "o1", "100", "2"));
    let fed = exchange.feed(r#"{"cmd":"cancel","account":"alice","id":"o1"}"#);
    assert_events(
        &fed,
        &[
            r#"{"ev":"accepted","account":"alice","id":"o1"}"#,
            r#"{"ev":"done","account":"alice","id":"o1","reason":"canceled","filled":"0"}"#,
        ],
    );
    exchange.assert_book("BTC-USD", &[], &[]);
    exchange.assert_balance("alice", "USD", "1000", "0");
}

#[test]
fn cancel_of_a_partly_filled_order_reports_its_fills_and_releases_the_rest() {
    let mut exchange = funded();
    exchange.ok(buy("alice", "o1", "100", "3"));
    exchange.ok(sell("bob", "s1", "100", "1"));
    let fed = exchange.feed(cancel("alice", "o1"));
    assert_events(
        &fed,
        &[
            r#"{"ev":"accepted","account":"alice","id":"o1"}"#,
            r#"{"ev":"done","account":"alice","id":"o1","reason":"canceled","filled":"1"}"#,
        ],
    );
    exchange.assert_balance("alice", "USD", "900", "0");
    exchange.assert_balance("alice", "BTC", "11", "0");
}

#[test]
fn cancel_of_an_unknown_id_is_rejected_unknown_order() {
    let mut exchange = funded();
    let fed = exchange.feed(cancel("alice", "nope"));
    assert_events(
        &fed,
        &[r#"{"ev":"rejected","reason":"unknown_order","account":"alice","id":"nope"}"#],
    );
}

#[test]
fn cancel_of_a_filled_order_is_rejected_unknown_order() {
    let mut exchange = funded();
    exchange.ok(sell("bob", "s1", "100", "1"));
    exchange.ok(buy("alice", "o1", "100", "1"));
    let fed = exchange.feed(cancel("bob", "s1"));
    assert_events(
        &fed,
        &[r#"{"ev":"rejected","reason":"unknown_order","account":"bob","id":"s1"}"#],
    );
}

#[test]
fn cancel_of_a_canceled_order_is_rejected_unknown_order() {
    let mut exchange = funded();
    exchange.ok(buy("alice", "o1", "100", "1"));
    exchange.ok(cancel("alice", "o1"));
    let fed = exchange.feed(cancel("alice", "o1"));
    assert_events(
        &fed,
        &[r#"{"ev":"rejected","reason":"unknown_order","account":"alice","id":"o1"}"#],
    );
}

#[test]
fn cancel_of_an_expired_order_is_rejected_unknown_order() {
    let mut exchange = funded();
    exchange.ok(buy("alice", "o1", "100", "1").tif("ioc"));
    let fed = exchange.feed(cancel("alice", "o1"));
    assert_events(
        &fed,
        &[r#"{"ev":"rejected","reason":"unknown_order","account":"alice","id":"o1"}"#],
    );
}

#[test]
fn cancel_of_another_accounts_order_is_rejected_unknown_order() {
    let mut exchange = funded();
    exchange.ok(buy("alice", "o1", "100", "1"));
    let fed = exchange.feed(cancel("bob", "o1"));
    assert_events(
        &fed,
        &[r#"{"ev":"rejected","reason":"unknown_order","account":"bob","id":"o1"}"#],
    );
    exchange.assert_book("BTC-USD", &[("alice", "o1", "100", "1")], &[]);
}

#[test]
fn id_of_a_canceled_order_may_be_used_again() {
    let mut exchange = funded();
    exchange.ok(buy("alice", "o1", "100", "1"));
    exchange.ok(cancel("alice", "o1"));
    let fed = exchange.feed(sell("alice", "o1", "200", "1"));
    assert_events(&fed, &[r#"{"ev":"accepted","account":"alice","id":"o1"}"#]);
    exchange.assert_book("BTC-USD", &[], &[("alice", "o1", "200", "1")]);
}

// ---------------------------------------------------------------- amend: priority

#[test]
fn amend_lowering_qty_at_the_same_price_keeps_priority() {
    let mut exchange = funded();
    exchange.ok(sell("alice", "a1", "100", "2"));
    exchange.ok(sell("bob", "s1", "100", "1"));
    let fed = exchange.feed(r#"{"cmd":"amend","account":"alice","id":"a1","qty":"1"}"#);
    assert_events(
        &fed,
        &[
            r#"{"ev":"accepted","account":"alice","id":"a1"}"#,
            r#"{"ev":"amended","account":"alice","id":"a1","price":"100","qty":"1"}"#,
        ],
    );
    let fed = exchange.feed(buy("carol", "c1", "100", "1"));
    assert_events_then_any_order(
        &fed,
        &[
            r#"{"ev":"accepted","account":"carol","id":"c1"}"#,
            r#"{"ev":"trade","symbol":"BTC-USD","price":"100","qty":"1","taker_side":"buy","maker_account":"alice","maker_id":"a1","taker_account":"carol","taker_id":"c1","maker_fee":"0","taker_fee":"0"}"#,
        ],
        &[
            r#"{"ev":"done","account":"alice","id":"a1","reason":"filled","filled":"1"}"#,
            r#"{"ev":"done","account":"carol","id":"c1","reason":"filled","filled":"1"}"#,
        ],
    );
}

#[test]
fn amend_to_the_same_qty_at_the_same_price_keeps_priority() {
    let mut exchange = funded();
    exchange.ok(sell("alice", "a1", "100", "1"));
    exchange.ok(sell("bob", "s1", "100", "1"));
    let fed = exchange.feed(amend("alice", "a1", "100", "1"));
    assert_events(
        &fed,
        &[
            r#"{"ev":"accepted","account":"alice","id":"a1"}"#,
            r#"{"ev":"amended","account":"alice","id":"a1","price":"100","qty":"1"}"#,
        ],
    );
    exchange.assert_book("BTC-USD", &[], &[("alice", "a1", "100", "1"), ("bob", "s1", "100", "1")]);
}

#[test]
fn amend_to_the_same_price_written_differently_keeps_priority() {
    let mut exchange = funded();
    exchange.ok(sell("alice", "a1", "100", "2"));
    exchange.ok(sell("bob", "s1", "100", "1"));
    let fed = exchange.feed(amend_price("alice", "a1", "100.00"));
    assert_events(
        &fed,
        &[
            r#"{"ev":"accepted","account":"alice","id":"a1"}"#,
            r#"{"ev":"amended","account":"alice","id":"a1","price":"100","qty":"2"}"#,
        ],
    );
    exchange.assert_book("BTC-USD", &[], &[("alice", "a1", "100", "2"), ("bob", "s1", "100", "1")]);
}

#[test]
fn amend_raising_qty_loses_priority() {
    let mut exchange = funded();
    exchange.ok(sell("alice", "a1", "100", "1"));
    exchange.ok(sell("bob", "s1", "100", "1"));
    let fed = exchange.feed(amend_qty("alice", "a1", "2"));
    assert_events(
        &fed,
        &[
            r#"{"ev":"accepted","account":"alice","id":"a1"}"#,
            r#"{"ev":"amended","account":"alice","id":"a1","price":"100","qty":"2"}"#,
        ],
    );
    let fed = exchange.feed(buy("carol", "c1", "100", "1"));
    assert_events_then_any_order(
        &fed,
        &[
            r#"{"ev":"accepted","account":"carol","id":"c1"}"#,
            r#"{"ev":"trade","symbol":"BTC-USD","price":"100","qty":"1","taker_side":"buy","maker_account":"bob","maker_id":"s1","taker_account":"carol","taker_id":"c1","maker_fee":"0","taker_fee":"0"}"#,
        ],
        &[
            r#"{"ev":"done","account":"bob","id":"s1","reason":"filled","filled":"1"}"#,
            r#"{"ev":"done","account":"carol","id":"c1","reason":"filled","filled":"1"}"#,
        ],
    );
    exchange.assert_book("BTC-USD", &[], &[("alice", "a1", "100", "2")]);
}

#[test]
fn amend_changing_price_loses_priority_even_with_a_lower_qty() {
    let mut exchange = funded();
    exchange.ok(buy("alice", "a1", "100", "2"));
    exchange.ok(buy("bob", "b1", "99", "1"));
    let fed = exchange.feed(amend("alice", "a1", "99", "1"));
    assert_events(
        &fed,
        &[
            r#"{"ev":"accepted","account":"alice","id":"a1"}"#,
            r#"{"ev":"amended","account":"alice","id":"a1","price":"99","qty":"1"}"#,
        ],
    );
    exchange.assert_book("BTC-USD", &[("bob", "b1", "99", "1"), ("alice", "a1", "99", "1")], &[]);
    exchange.assert_balance("alice", "USD", "901", "99");
}

#[test]
fn amend_qty_is_the_new_remaining_qty() {
    let mut exchange = funded();
    exchange.ok(sell("alice", "a1", "100", "3"));
    exchange.ok(buy("bob", "b1", "100", "1")); // alice has 2 left
    let fed = exchange.feed(amend_qty("alice", "a1", "1.5"));
    assert_events(
        &fed,
        &[
            r#"{"ev":"accepted","account":"alice","id":"a1"}"#,
            r#"{"ev":"amended","account":"alice","id":"a1","price":"100","qty":"1.5"}"#,
        ],
    );
    exchange.assert_book("BTC-USD", &[], &[("alice", "a1", "100", "1.5")]);
    exchange.assert_balance("alice", "BTC", "7.5", "1.5");
}

#[test]
fn amended_qty_no_larger_than_the_remaining_keeps_priority_after_a_partial_fill() {
    let mut exchange = funded();
    exchange.ok(sell("alice", "a1", "100", "3"));
    exchange.ok(sell("bob", "s1", "100", "1"));
    exchange.ok(buy("carol", "c1", "100", "1")); // alice has 2 left
                                                 // 2 is less than the original 3 and equal to the remaining 2
    exchange.ok(amend_qty("alice", "a1", "2"));
    exchange.assert_book("BTC-USD", &[], &[("alice", "a1", "100", "2"), ("bob", "s1", "100", "1")]);
}

#[test]
fn amended_qty_above_the_remaining_loses_priority_after_a_partial_fill() {
    let mut exchange = funded();
    exchange.ok(sell("alice", "a1", "100", "3"));
    exchange.ok(sell("bob", "s1", "100", "1"));
    exchange.ok(buy("carol", "c1", "100", "1")); // alice has 2 left
                                                 // 2.5 is below the original 3 but above the remaining 2
    exchange.ok(amend_qty("alice", "a1", "2.5"));
    exchange.assert_book(
        "BTC-USD",
        &[],
        &[("bob", "s1", "100", "1"), ("alice", "a1", "100", "2.5")],
    );
}

// ---------------------------------------------------------------- amend: crossing

#[test]
fn amend_that_crosses_trades_as_a_taker_with_the_taker_fee() {
    let mut exchange = Exchange::standard();
    exchange.ok(deposit("bob", "ETH", "1"));
    exchange.ok(deposit("alice", "USD", "10"));
    exchange.ok(sell("bob", "b1", "10.00", "1").on("ETH-USD"));
    exchange.ok(buy("alice", "a1", "9.00", "1").on("ETH-USD"));
    let fed = exchange.feed(amend_price("alice", "a1", "10.00"));
    // bob, maker, receives 10.00 USD: ceil(10.00 * 10 / 10000) = 0.01 USD
    // alice, taker, receives 1 ETH: ceil(1 * 25 / 10000) = ceil(0.0025) = 0.003 ETH
    assert_events_then_any_order(
        &fed,
        &[
            r#"{"ev":"accepted","account":"alice","id":"a1"}"#,
            r#"{"ev":"amended","account":"alice","id":"a1","price":"10","qty":"1"}"#,
            r#"{"ev":"trade","symbol":"ETH-USD","price":"10","qty":"1","taker_side":"buy","maker_account":"bob","maker_id":"b1","taker_account":"alice","taker_id":"a1","maker_fee":"0.01","taker_fee":"0.003"}"#,
        ],
        &[
            r#"{"ev":"done","account":"bob","id":"b1","reason":"filled","filled":"1"}"#,
            r#"{"ev":"done","account":"alice","id":"a1","reason":"filled","filled":"1"}"#,
        ],
    );
    exchange.assert_balance("alice", "USD", "0", "0");
    exchange.assert_balance("alice", "ETH", "0.997", "0");
    exchange.assert_balance("bob", "USD", "9.99", "0");
    exchange.assert_balance("bob", "ETH", "0", "0");
    exchange.assert_fee("USD", "0.01");
    exchange.assert_fee("ETH", "0.003");
}

#[test]
fn amend_that_crosses_rests_its_remainder_at_the_new_price() {
    let mut exchange = funded();
    exchange.ok(sell("bob", "s1", "100", "1"));
    exchange.ok(buy("alice", "a1", "99", "3"));
    let fed = exchange.feed(amend_price("alice", "a1", "100"));
    assert_events(
        &fed,
        &[
            r#"{"ev":"accepted","account":"alice","id":"a1"}"#,
            r#"{"ev":"amended","account":"alice","id":"a1","price":"100","qty":"3"}"#,
            r#"{"ev":"trade","symbol":"BTC-USD","price":"100","qty":"1","taker_side":"buy","maker_account":"bob","maker_id":"s1","taker_account":"alice","taker_id":"a1","maker_fee":"0","taker_fee":"0"}"#,
            r#"{"ev":"done","account":"bob","id":"s1","reason":"filled","filled":"1"}"#,
        ],
    );
    exchange.assert_book("BTC-USD", &[("alice", "a1", "100", "2")], &[]);
    // holds 100 * 2 for the rest, paid 100
    exchange.assert_balance("alice", "USD", "700", "200");
    exchange.assert_balance("alice", "BTC", "11", "0");
}

#[test]
fn amend_that_crosses_uses_the_orders_own_stp_mode() {
    let mut exchange = funded();
    exchange.ok(sell("alice", "a1", "101", "1"));
    exchange.ok(buy("alice", "a2", "100", "1").stp("cancel_maker"));
    let fed = exchange.feed(amend_price("alice", "a2", "101"));
    assert_events(
        &fed,
        &[
            r#"{"ev":"accepted","account":"alice","id":"a2"}"#,
            r#"{"ev":"amended","account":"alice","id":"a2","price":"101","qty":"1"}"#,
            r#"{"ev":"done","account":"alice","id":"a1","reason":"stp","filled":"0"}"#,
        ],
    );
    exchange.assert_book("BTC-USD", &[("alice", "a2", "101", "1")], &[]);
}

#[test]
fn amend_that_crosses_its_own_order_with_the_default_stp_finishes_it() {
    let mut exchange = funded();
    exchange.ok(sell("alice", "a1", "101", "1"));
    exchange.ok(buy("alice", "a2", "100", "1"));
    let fed = exchange.feed(amend_price("alice", "a2", "101"));
    assert_events(
        &fed,
        &[
            r#"{"ev":"accepted","account":"alice","id":"a2"}"#,
            r#"{"ev":"amended","account":"alice","id":"a2","price":"101","qty":"1"}"#,
            r#"{"ev":"done","account":"alice","id":"a2","reason":"stp","filled":"0"}"#,
        ],
    );
    exchange.assert_book("BTC-USD", &[], &[("alice", "a1", "101", "1")]);
    exchange.assert_balance("alice", "USD", "1000", "0");
}

#[test]
fn post_only_amend_that_would_cross_is_rejected_and_leaves_the_order_unchanged() {
    let mut exchange = funded();
    exchange.ok(sell("bob", "s1", "101", "1"));
    exchange.ok(buy("alice", "a1", "100", "1").post_only());
    exchange.ok(buy("carol", "c1", "100", "1"));
    let fed = exchange.feed(amend_price("alice", "a1", "101"));
    assert_events(
        &fed,
        &[r#"{"ev":"rejected","reason":"would_cross","account":"alice","id":"a1"}"#],
    );
    // still first in the queue at its old price, still holding 100
    exchange.assert_book(
        "BTC-USD",
        &[("alice", "a1", "100", "1"), ("carol", "c1", "100", "1")],
        &[("bob", "s1", "101", "1")],
    );
    exchange.assert_balance("alice", "USD", "900", "100");
}

#[test]
fn post_only_amend_that_does_not_cross_is_accepted() {
    let mut exchange = funded();
    exchange.ok(sell("bob", "s1", "101", "1"));
    exchange.ok(buy("alice", "a1", "99", "1").post_only());
    let fed = exchange.feed(amend_price("alice", "a1", "100"));
    assert_events(
        &fed,
        &[
            r#"{"ev":"accepted","account":"alice","id":"a1"}"#,
            r#"{"ev":"amended","account":"alice","id":"a1","price":"100","qty":"1"}"#,
        ],
    );
    exchange.assert_book("BTC-USD", &[("alice", "a1", "100", "1")], &[("bob", "s1", "101", "1")]);
}

#[test]
fn filled_counts_an_orders_fills_across_amends() {
    let mut exchange = funded();
    exchange.ok(sell("alice", "a1", "100", "3"));
    exchange.ok(buy("bob", "b1", "100", "1")); // alice filled 1, 2 left
    exchange.ok(amend_qty("alice", "a1", "4"));
    let fed = exchange.feed(buy("bob", "b2", "100", "4"));
    assert_events_then_any_order(
        &fed,
        &[
            r#"{"ev":"accepted","account":"bob","id":"b2"}"#,
            r#"{"ev":"trade","symbol":"BTC-USD","price":"100","qty":"4","taker_side":"buy","maker_account":"alice","maker_id":"a1","taker_account":"bob","taker_id":"b2","maker_fee":"0","taker_fee":"0"}"#,
        ],
        &[
            r#"{"ev":"done","account":"alice","id":"a1","reason":"filled","filled":"5"}"#,
            r#"{"ev":"done","account":"bob","id":"b2","reason":"filled","filled":"4"}"#,
        ],
    );
}

#[test]
fn filled_counts_fills_before_an_amend_when_the_order_is_canceled() {
    let mut exchange = funded();
    exchange.ok(buy("alice", "a1", "100", "3"));
    exchange.ok(sell("bob", "s1", "100", "1")); // alice filled 1
    exchange.ok(amend("alice", "a1", "99", "5"));
    let fed = exchange.feed(cancel("alice", "a1"));
    assert_events(
        &fed,
        &[
            r#"{"ev":"accepted","account":"alice","id":"a1"}"#,
            r#"{"ev":"done","account":"alice","id":"a1","reason":"canceled","filled":"1"}"#,
        ],
    );
}

// ---------------------------------------------------------------- amend: rejections

#[test]
fn amend_of_an_unknown_id_is_rejected_unknown_order() {
    let mut exchange = funded();
    let fed = exchange.feed(amend_qty("alice", "nope", "1"));
    assert_events(
        &fed,
        &[r#"{"ev":"rejected","reason":"unknown_order","account":"alice","id":"nope"}"#],
    );
}

#[test]
fn amend_of_another_accounts_order_is_rejected_unknown_order() {
    let mut exchange = funded();
    exchange.ok(buy("alice", "o1", "100", "1"));
    let fed = exchange.feed(amend_qty("bob", "o1", "0.5"));
    assert_events(
        &fed,
        &[r#"{"ev":"rejected","reason":"unknown_order","account":"bob","id":"o1"}"#],
    );
    exchange.assert_book("BTC-USD", &[("alice", "o1", "100", "1")], &[]);
}

#[test]
fn amend_of_a_finished_order_is_rejected_unknown_order() {
    let mut exchange = funded();
    exchange.ok(buy("alice", "o1", "100", "1"));
    exchange.ok(cancel("alice", "o1"));
    let fed = exchange.feed(amend_qty("alice", "o1", "0.5"));
    assert_events(
        &fed,
        &[r#"{"ev":"rejected","reason":"unknown_order","account":"alice","id":"o1"}"#],
    );
}

#[test]
fn unknown_order_is_checked_before_invalid_price() {
    let mut exchange = funded();
    let fed = exchange.feed(amend_price("alice", "nope", "0"));
    assert_events(
        &fed,
        &[r#"{"ev":"rejected","reason":"unknown_order","account":"alice","id":"nope"}"#],
    );
}

#[test]
fn amend_to_a_price_off_the_tick_is_rejected_invalid_price() {
    let mut exchange = funded();
    exchange.ok(buy("alice", "o1", "100", "1"));
    let fed = exchange.feed(amend_price("alice", "o1", "100.5"));
    assert_events(
        &fed,
        &[r#"{"ev":"rejected","reason":"invalid_price","account":"alice","id":"o1"}"#],
    );
    exchange.assert_book("BTC-USD", &[("alice", "o1", "100", "1")], &[]);
}

#[test]
fn amend_to_a_zero_or_negative_price_is_rejected_invalid_price() {
    let mut exchange = funded();
    exchange.ok(buy("alice", "o1", "100", "1"));
    for price in ["0", "-100"] {
        let fed = exchange.feed(amend_price("alice", "o1", price));
        assert_events(
            &fed,
            &[r#"{"ev":"rejected","reason":"invalid_price","account":"alice","id":"o1"}"#],
        );
    }
}

#[test]
fn invalid_price_is_checked_before_invalid_qty_on_amend() {
    let mut exchange = funded();
    exchange.ok(buy("alice", "o1", "100", "1"));
    let fed = exchange.feed(amend("alice", "o1", "0", "0"));
    assert_events(
        &fed,
        &[r#"{"ev":"rejected","reason":"invalid_price","account":"alice","id":"o1"}"#],
    );
}

#[test]
fn amend_to_zero_qty_is_rejected_invalid_qty() {
    let mut exchange = funded();
    exchange.ok(buy("alice", "o1", "100", "1"));
    let fed = exchange.feed(amend_qty("alice", "o1", "0"));
    assert_events(
        &fed,
        &[r#"{"ev":"rejected","reason":"invalid_qty","account":"alice","id":"o1"}"#],
    );
    exchange.assert_book("BTC-USD", &[("alice", "o1", "100", "1")], &[]);
}

#[test]
fn amend_to_a_qty_off_the_lot_is_rejected_invalid_qty() {
    let mut exchange = funded();
    exchange.ok(buy("alice", "o1", "100", "1"));
    let fed = exchange.feed(amend_qty("alice", "o1", "0.555"));
    assert_events(
        &fed,
        &[r#"{"ev":"rejected","reason":"invalid_qty","account":"alice","id":"o1"}"#],
    );
}

#[test]
fn amend_to_a_qty_below_min_qty_is_rejected_invalid_qty() {
    let mut exchange = funded();
    exchange.ok(buy("alice", "o1", "100", "1"));
    let fed = exchange.feed(amend_qty("alice", "o1", "0.09"));
    assert_events(
        &fed,
        &[r#"{"ev":"rejected","reason":"invalid_qty","account":"alice","id":"o1"}"#],
    );
}

#[test]
fn amend_to_a_qty_above_max_qty_is_rejected_invalid_qty() {
    let mut exchange = funded();
    exchange.ok(deposit("alice", "USD", "100000"));
    exchange.ok(buy("alice", "o1", "100", "1"));
    let fed = exchange.feed(amend_qty("alice", "o1", "100.01"));
    assert_events(
        &fed,
        &[r#"{"ev":"rejected","reason":"invalid_qty","account":"alice","id":"o1"}"#],
    );
}

#[test]
fn invalid_qty_is_checked_before_would_cross_on_amend() {
    let mut exchange = funded();
    exchange.ok(sell("bob", "s1", "101", "1"));
    exchange.ok(buy("alice", "a1", "100", "1").post_only());
    let fed = exchange.feed(amend("alice", "a1", "101", "0"));
    assert_events(
        &fed,
        &[r#"{"ev":"rejected","reason":"invalid_qty","account":"alice","id":"a1"}"#],
    );
}

#[test]
fn would_cross_is_checked_before_insufficient_funds_on_amend() {
    let mut exchange = Exchange::standard();
    exchange.ok(deposit("bob", "BTC", "1"));
    exchange.ok(deposit("alice", "USD", "100"));
    exchange.ok(sell("bob", "s1", "101", "1"));
    exchange.ok(buy("alice", "a1", "100", "1").post_only()); // all of alice's USD held
                                                             // crossing, and 101 - 100 = 1 more than alice has
    let fed = exchange.feed(amend_price("alice", "a1", "101"));
    assert_events(
        &fed,
        &[r#"{"ev":"rejected","reason":"would_cross","account":"alice","id":"a1"}"#],
    );
}

// ---------------------------------------------------------------- amend: funds

#[test]
fn amend_raising_the_hold_by_exactly_what_is_available_is_accepted() {
    let mut exchange = Exchange::standard();
    exchange.ok(deposit("alice", "USD", "1000"));
    exchange.ok(buy("alice", "o1", "100", "5")); // holds 500 of 1000
    let fed = exchange.feed(amend_qty("alice", "o1", "10"));
    assert_events(
        &fed,
        &[
            r#"{"ev":"accepted","account":"alice","id":"o1"}"#,
            r#"{"ev":"amended","account":"alice","id":"o1","price":"100","qty":"10"}"#,
        ],
    );
    exchange.assert_balance("alice", "USD", "0", "1000");
}

#[test]
fn amend_raising_the_hold_beyond_what_is_available_is_rejected_insufficient_funds() {
    let mut exchange = Exchange::standard();
    exchange.ok(deposit("alice", "USD", "1000"));
    exchange.ok(buy("alice", "o1", "100", "5")); // holds 500 of 1000
                                                 // new hold 1001, increase 501 > 500 available
    let fed = exchange.feed(amend_qty("alice", "o1", "10.01"));
    assert_events(
        &fed,
        &[r#"{"ev":"rejected","reason":"insufficient_funds","account":"alice","id":"o1"}"#],
    );
    exchange.assert_book("BTC-USD", &[("alice", "o1", "100", "5")], &[]);
    exchange.assert_balance("alice", "USD", "500", "500");
}

#[test]
fn amend_raising_a_buys_price_raises_its_hold() {
    let mut exchange = Exchange::standard();
    exchange.ok(deposit("alice", "USD", "1000"));
    exchange.ok(buy("alice", "o1", "100", "5"));
    exchange.ok(amend_price("alice", "o1", "120"));
    exchange.assert_balance("alice", "USD", "400", "600");
    // 201 * 5 = 1005: an increase of 405 > 400
    let fed = exchange.feed(amend_price("alice", "o1", "201"));
    assert_events(
        &fed,
        &[r#"{"ev":"rejected","reason":"insufficient_funds","account":"alice","id":"o1"}"#],
    );
    exchange.assert_balance("alice", "USD", "400", "600");
}

#[test]
fn amend_that_lowers_the_hold_needs_no_available_funds() {
    let mut exchange = Exchange::standard();
    exchange.ok(deposit("alice", "USD", "500"));
    exchange.ok(buy("alice", "o1", "100", "5")); // all 500 held
                                                 // more qty at a lower price: 50 * 9 = 450 < 500
    let fed = exchange.feed(amend("alice", "o1", "50", "9"));
    assert_events(
        &fed,
        &[
            r#"{"ev":"accepted","account":"alice","id":"o1"}"#,
            r#"{"ev":"amended","account":"alice","id":"o1","price":"50","qty":"9"}"#,
        ],
    );
    exchange.assert_balance("alice", "USD", "50", "450");
}

#[test]
fn amend_whose_hold_passes_the_64_bit_range_is_rejected_insufficient_funds() {
    let mut exchange = Exchange::standard();
    // 2^63 - 1 cents, the most USD there can be
    exchange.ok(deposit("alice", "USD", "92233720368547758.07"));
    exchange.ok(buy("alice", "o1", "92233720368547758", "0.1"));
    // 92233720368547758 * 100 USD is about 9.2e20 cents
    let fed = exchange.feed(amend_qty("alice", "o1", "100"));
    assert_events(
        &fed,
        &[r#"{"ev":"rejected","reason":"insufficient_funds","account":"alice","id":"o1"}"#],
    );
    exchange.assert_book("BTC-USD", &[("alice", "o1", "92233720368547758", "0.1")], &[]);
}

#[test]
fn amend_lowering_the_hold_releases_funds() {
    let mut exchange = Exchange::standard();
    exchange.ok(deposit("alice", "USD", "1000"));
    exchange.ok(buy("alice", "o1", "100", "5"));
    exchange.ok(amend_qty("alice", "o1", "2"));
    exchange.assert_balance("alice", "USD", "800", "200");
}

#[test]
fn amend_raising_a_sells_qty_needs_base_funds_for_the_increase() {
    let mut exchange = Exchange::standard();
    exchange.ok(deposit("alice", "BTC", "2"));
    exchange.ok(sell("alice", "o1", "100", "1.5")); // 0.5 BTC left
    let fed = exchange.feed(amend_qty("alice", "o1", "2.01"));
    assert_events(
        &fed,
        &[r#"{"ev":"rejected","reason":"insufficient_funds","account":"alice","id":"o1"}"#],
    );
    let fed = exchange.feed(amend_qty("alice", "o1", "2"));
    assert_events(
        &fed,
        &[
            r#"{"ev":"accepted","account":"alice","id":"o1"}"#,
            r#"{"ev":"amended","account":"alice","id":"o1","price":"100","qty":"2"}"#,
        ],
    );
    exchange.assert_balance("alice", "BTC", "0", "2");
}

#[test]
fn amend_of_a_sells_price_does_not_change_its_hold() {
    let mut exchange = Exchange::standard();
    exchange.ok(deposit("alice", "BTC", "1"));
    exchange.ok(sell("alice", "o1", "100", "1")); // all of alice's BTC held
    let fed = exchange.feed(amend_price("alice", "o1", "500"));
    assert_events(
        &fed,
        &[
            r#"{"ev":"accepted","account":"alice","id":"o1"}"#,
            r#"{"ev":"amended","account":"alice","id":"o1","price":"500","qty":"1"}"#,
        ],
    );
    exchange.assert_balance("alice", "BTC", "0", "1");
}
