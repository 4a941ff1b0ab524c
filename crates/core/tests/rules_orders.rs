//! Rules of the replay format for `order`: each rejection reason in the spec's order,
//! ids, the time-in-force values, fill-or-kill counting under each STP mode, market
//! orders and their protection price, and post-only.
//!
//! The standard instruments (see `support`): BTC-USD has tick 1, lot 0.01,
//! qty 0.1..=100, no fees and a 10% market band.

mod support;

use support::*;

// ---------------------------------------------------------------- rejections

#[test]
fn order_on_an_unknown_symbol_is_rejected_unknown_symbol() {
    let mut exchange = Exchange::standard();
    exchange.ok(deposit("alice", "USD", "1000"));
    let fed = exchange.feed(buy("alice", "o1", "100", "1").on("DOGE-USD"));
    assert_events(
        &fed,
        &[r#"{"ev":"rejected","reason":"unknown_symbol","account":"alice","id":"o1"}"#],
    );
}

#[test]
fn unknown_symbol_is_checked_before_duplicate_id() {
    let mut exchange = Exchange::standard();
    exchange.ok(deposit("alice", "USD", "1000"));
    exchange.ok(buy("alice", "o1", "100", "1"));
    let fed = exchange.feed(buy("alice", "o1", "100", "1").on("DOGE-USD"));
    assert_events(
        &fed,
        &[r#"{"ev":"rejected","reason":"unknown_symbol","account":"alice","id":"o1"}"#],
    );
}

#[test]
fn order_reusing_the_id_of_an_open_order_is_rejected_duplicate_id() {
    let mut exchange = Exchange::standard();
    exchange.ok(deposit("alice", "USD", "1000"));
    exchange.ok(deposit("alice", "BTC", "1"));
    exchange.ok(buy("alice", "o1", "100", "1"));
    let fed = exchange.feed(sell("alice", "o1", "200", "1"));
    assert_events(
        &fed,
        &[r#"{"ev":"rejected","reason":"duplicate_id","account":"alice","id":"o1"}"#],
    );
    exchange.assert_book("BTC-USD", &[("alice", "o1", "100", "1")], &[]);
    exchange.assert_balance("alice", "BTC", "1", "0");
}

#[test]
fn order_ids_are_per_account_across_instruments() {
    let mut exchange = Exchange::standard();
    exchange.ok(deposit("alice", "USD", "1000"));
    exchange.ok(buy("alice", "o1", "100", "1"));
    let fed = exchange.feed(buy("alice", "o1", "10.00", "1").on("ETH-USD"));
    assert_events(
        &fed,
        &[r#"{"ev":"rejected","reason":"duplicate_id","account":"alice","id":"o1"}"#],
    );
}

#[test]
fn the_same_id_in_another_account_is_accepted() {
    let mut exchange = Exchange::standard();
    exchange.ok(deposit("alice", "USD", "1000"));
    exchange.ok(deposit("bob", "USD", "1000"));
    exchange.ok(buy("alice", "o1", "100", "1"));
    let fed = exchange.feed(buy("bob", "o1", "99", "1"));
    assert_events(&fed, &[r#"{"ev":"accepted","account":"bob","id":"o1"}"#]);
    exchange.assert_book("BTC-USD", &[("alice", "o1", "100", "1"), ("bob", "o1", "99", "1")], &[]);
}

#[test]
fn id_of_a_filled_order_may_be_used_again() {
    let mut exchange = Exchange::standard();
    exchange.ok(deposit("alice", "USD", "1000"));
    exchange.ok(deposit("bob", "BTC", "1"));
    exchange.ok(sell("bob", "s1", "100", "1"));
    exchange.ok(buy("alice", "o1", "100", "1")); // fills completely
    let fed = exchange.feed(buy("alice", "o1", "90", "1"));
    assert_events(&fed, &[r#"{"ev":"accepted","account":"alice","id":"o1"}"#]);
    exchange.assert_book("BTC-USD", &[("alice", "o1", "90", "1")], &[]);
}

#[test]
fn id_of_an_expired_order_may_be_used_again() {
    let mut exchange = Exchange::standard();
    exchange.ok(deposit("alice", "USD", "1000"));
    exchange.ok(buy("alice", "o1", "100", "1").tif("ioc")); // nothing to match: expires
    let fed = exchange.feed(buy("alice", "o1", "100", "1"));
    assert_events(&fed, &[r#"{"ev":"accepted","account":"alice","id":"o1"}"#]);
}

#[test]
fn duplicate_id_is_checked_before_invalid_price() {
    let mut exchange = Exchange::standard();
    exchange.ok(deposit("alice", "USD", "1000"));
    exchange.ok(buy("alice", "o1", "100", "1"));
    let fed = exchange.feed(buy("alice", "o1", "0", "1"));
    assert_events(
        &fed,
        &[r#"{"ev":"rejected","reason":"duplicate_id","account":"alice","id":"o1"}"#],
    );
}

#[test]
fn limit_price_of_zero_is_rejected_invalid_price() {
    let mut exchange = Exchange::standard();
    exchange.ok(deposit("alice", "USD", "1000"));
    let fed = exchange.feed(buy("alice", "o1", "0", "1"));
    assert_events(
        &fed,
        &[r#"{"ev":"rejected","reason":"invalid_price","account":"alice","id":"o1"}"#],
    );
}

#[test]
fn negative_limit_price_is_rejected_invalid_price() {
    let mut exchange = Exchange::standard();
    exchange.ok(deposit("alice", "BTC", "1"));
    let fed = exchange.feed(sell("alice", "o1", "-100", "1"));
    assert_events(
        &fed,
        &[r#"{"ev":"rejected","reason":"invalid_price","account":"alice","id":"o1"}"#],
    );
}

#[test]
fn limit_price_off_the_tick_is_rejected_invalid_price() {
    let mut exchange = Exchange::standard();
    exchange.ok(deposit("alice", "USD", "1000"));
    let fed = exchange.feed(buy("alice", "o1", "100.5", "1"));
    assert_events(
        &fed,
        &[r#"{"ev":"rejected","reason":"invalid_price","account":"alice","id":"o1"}"#],
    );
    exchange.assert_balance("alice", "USD", "1000", "0");
}

#[test]
fn limit_price_with_trailing_zeros_on_the_tick_is_accepted() {
    let mut exchange = Exchange::standard();
    exchange.ok(deposit("alice", "USD", "1000"));
    let fed = exchange.feed(buy("alice", "o1", "100.000", "1.0"));
    assert_events(&fed, &[r#"{"ev":"accepted","account":"alice","id":"o1"}"#]);
    exchange.assert_book("BTC-USD", &[("alice", "o1", "100", "1")], &[]);
}

#[test]
fn invalid_price_is_checked_before_invalid_qty() {
    let mut exchange = Exchange::standard();
    exchange.ok(deposit("alice", "USD", "1000"));
    let fed = exchange.feed(buy("alice", "o1", "0", "0"));
    assert_events(
        &fed,
        &[r#"{"ev":"rejected","reason":"invalid_price","account":"alice","id":"o1"}"#],
    );
}

#[test]
fn qty_off_the_lot_is_rejected_invalid_qty() {
    let mut exchange = Exchange::standard();
    exchange.ok(deposit("alice", "USD", "1000"));
    let fed = exchange.feed(buy("alice", "o1", "100", "1.005"));
    assert_events(
        &fed,
        &[r#"{"ev":"rejected","reason":"invalid_qty","account":"alice","id":"o1"}"#],
    );
}

#[test]
fn qty_with_more_decimals_than_the_base_is_rejected_invalid_qty() {
    let mut exchange = Exchange::standard();
    exchange.ok(deposit("alice", "USD", "1000"));
    let fed = exchange.feed(buy("alice", "o1", "100", "1.000000001"));
    assert_events(
        &fed,
        &[r#"{"ev":"rejected","reason":"invalid_qty","account":"alice","id":"o1"}"#],
    );
}

#[test]
fn qty_below_min_qty_is_rejected_invalid_qty() {
    let mut exchange = Exchange::standard();
    exchange.ok(deposit("alice", "USD", "1000"));
    let fed = exchange.feed(buy("alice", "o1", "100", "0.09"));
    assert_events(
        &fed,
        &[r#"{"ev":"rejected","reason":"invalid_qty","account":"alice","id":"o1"}"#],
    );
}

#[test]
fn qty_above_max_qty_is_rejected_invalid_qty() {
    let mut exchange = Exchange::standard();
    exchange.ok(deposit("alice", "USD", "100000"));
    let fed = exchange.feed(buy("alice", "o1", "100", "100.01"));
    assert_events(
        &fed,
        &[r#"{"ev":"rejected","reason":"invalid_qty","account":"alice","id":"o1"}"#],
    );
}

#[test]
fn qty_of_zero_or_negative_is_rejected_invalid_qty() {
    let mut exchange = Exchange::standard();
    exchange.ok(deposit("alice", "USD", "1000"));
    for qty in ["0", "-1"] {
        let fed = exchange.feed(buy("alice", "o1", "100", qty));
        assert_events(
            &fed,
            &[r#"{"ev":"rejected","reason":"invalid_qty","account":"alice","id":"o1"}"#],
        );
    }
}

#[test]
fn qty_equal_to_min_qty_or_max_qty_is_accepted() {
    let mut exchange = Exchange::standard();
    exchange.ok(deposit("alice", "USD", "100000"));
    let fed = exchange.feed(buy("alice", "o1", "100", "0.1"));
    assert_events(&fed, &[r#"{"ev":"accepted","account":"alice","id":"o1"}"#]);
    let fed = exchange.feed(buy("alice", "o2", "100", "100"));
    assert_events(&fed, &[r#"{"ev":"accepted","account":"alice","id":"o2"}"#]);
}

#[test]
fn invalid_qty_is_checked_before_would_cross() {
    let mut exchange = Exchange::standard();
    exchange.ok(deposit("bob", "BTC", "1"));
    exchange.ok(sell("bob", "s1", "100", "1"));
    exchange.ok(deposit("alice", "USD", "1000"));
    let fed = exchange.feed(buy("alice", "o1", "100", "0.05").post_only());
    assert_events(
        &fed,
        &[r#"{"ev":"rejected","reason":"invalid_qty","account":"alice","id":"o1"}"#],
    );
}

#[test]
fn would_cross_is_checked_before_insufficient_funds() {
    let mut exchange = Exchange::standard();
    exchange.ok(deposit("bob", "BTC", "1"));
    exchange.ok(sell("bob", "s1", "100", "1"));
    // carol has nothing at all
    let fed = exchange.feed(buy("carol", "o1", "100", "1").post_only());
    assert_events(
        &fed,
        &[r#"{"ev":"rejected","reason":"would_cross","account":"carol","id":"o1"}"#],
    );
}

#[test]
fn invalid_qty_is_checked_before_no_liquidity() {
    let mut exchange = Exchange::standard();
    exchange.ok(deposit("alice", "USD", "1000"));
    let fed = exchange.feed(market_buy("alice", "m1", "0.05"));
    assert_events(
        &fed,
        &[r#"{"ev":"rejected","reason":"invalid_qty","account":"alice","id":"m1"}"#],
    );
}

#[test]
fn no_liquidity_is_checked_before_insufficient_funds() {
    let mut exchange = Exchange::standard();
    let fed = exchange.feed(market_buy("carol", "m1", "1"));
    assert_events(
        &fed,
        &[r#"{"ev":"rejected","reason":"no_liquidity","account":"carol","id":"m1"}"#],
    );
}

#[test]
fn buy_needing_more_quote_than_available_is_rejected_insufficient_funds() {
    let mut exchange = Exchange::standard();
    exchange.ok(deposit("alice", "USD", "100"));
    let fed = exchange.feed(buy("alice", "o1", "100", "1.01"));
    assert_events(
        &fed,
        &[r#"{"ev":"rejected","reason":"insufficient_funds","account":"alice","id":"o1"}"#],
    );
    exchange.assert_balance("alice", "USD", "100", "0");
    exchange.assert_book("BTC-USD", &[], &[]);
}

#[test]
fn buy_holding_exactly_the_available_quote_is_accepted() {
    let mut exchange = Exchange::standard();
    exchange.ok(deposit("alice", "USD", "100"));
    let fed = exchange.feed(buy("alice", "o1", "100", "1"));
    assert_events(&fed, &[r#"{"ev":"accepted","account":"alice","id":"o1"}"#]);
    exchange.assert_balance("alice", "USD", "0", "100");
}

#[test]
fn sell_needing_more_base_than_available_is_rejected_insufficient_funds() {
    let mut exchange = Exchange::standard();
    exchange.ok(deposit("alice", "BTC", "1"));
    exchange.ok(deposit("alice", "USD", "1000000"));
    let fed = exchange.feed(sell("alice", "o1", "100", "1.01"));
    assert_events(
        &fed,
        &[r#"{"ev":"rejected","reason":"insufficient_funds","account":"alice","id":"o1"}"#],
    );
    exchange.assert_balance("alice", "BTC", "1", "0");
}

#[test]
fn order_from_an_account_with_nothing_is_rejected_insufficient_funds() {
    let mut exchange = Exchange::standard();
    let fed = exchange.feed(buy("nobody", "o1", "100", "1"));
    assert_events(
        &fed,
        &[r#"{"ev":"rejected","reason":"insufficient_funds","account":"nobody","id":"o1"}"#],
    );
}

#[test]
fn hold_beyond_the_64_bit_range_is_rejected_insufficient_funds() {
    let mut exchange = Exchange::standard();
    // 2^63 - 1 cents, the most USD there can be
    exchange.ok(deposit("alice", "USD", "92233720368547758.07"));
    // 92233720368547758 * 100 = 9223372036854775800 USD, about 9.2e20 cents
    let fed = exchange.feed(buy("alice", "o1", "92233720368547758", "100"));
    assert_events(
        &fed,
        &[r#"{"ev":"rejected","reason":"insufficient_funds","account":"alice","id":"o1"}"#],
    );
    exchange.assert_balance("alice", "USD", "92233720368547758.07", "0");
}

// ---------------------------------------------------------------- time in force

#[test]
fn gtc_limit_that_does_not_cross_rests_on_the_book() {
    let mut exchange = Exchange::standard();
    exchange.ok(deposit("alice", "USD", "1000"));
    let fed = exchange.feed(buy("alice", "o1", "100", "2").tif("gtc"));
    assert_events(&fed, &[r#"{"ev":"accepted","account":"alice","id":"o1"}"#]);
    exchange.assert_book("BTC-USD", &[("alice", "o1", "100", "2")], &[]);
}

#[test]
fn limit_without_tif_is_gtc() {
    let mut exchange = Exchange::standard();
    exchange.ok(deposit("bob", "BTC", "1"));
    exchange.ok(deposit("alice", "USD", "1000"));
    exchange.ok(sell("bob", "s1", "100", "1"));
    let fed = exchange.feed(buy("alice", "o1", "100", "3"));
    assert_events(
        &fed,
        &[
            r#"{"ev":"accepted","account":"alice","id":"o1"}"#,
            r#"{"ev":"trade","symbol":"BTC-USD","price":"100","qty":"1","taker_side":"buy","maker_account":"bob","maker_id":"s1","taker_account":"alice","taker_id":"o1","maker_fee":"0","taker_fee":"0"}"#,
            r#"{"ev":"done","account":"bob","id":"s1","reason":"filled","filled":"1"}"#,
        ],
    );
    exchange.assert_book("BTC-USD", &[("alice", "o1", "100", "2")], &[]);
}

#[test]
fn ioc_with_nothing_to_match_expires_unfilled() {
    let mut exchange = Exchange::standard();
    exchange.ok(deposit("alice", "USD", "1000"));
    let fed = exchange.feed(buy("alice", "o1", "100", "1").tif("ioc"));
    assert_events(
        &fed,
        &[
            r#"{"ev":"accepted","account":"alice","id":"o1"}"#,
            r#"{"ev":"done","account":"alice","id":"o1","reason":"expired","filled":"0"}"#,
        ],
    );
    exchange.assert_book("BTC-USD", &[], &[]);
    exchange.assert_balance("alice", "USD", "1000", "0");
}

#[test]
fn ioc_partly_filled_expires_with_what_it_filled() {
    let mut exchange = Exchange::standard();
    exchange.ok(deposit("bob", "BTC", "1"));
    exchange.ok(deposit("alice", "USD", "1000"));
    exchange.ok(sell("bob", "s1", "100", "1"));
    let fed = exchange.feed(buy("alice", "o1", "100", "3").tif("ioc"));
    assert_events(
        &fed,
        &[
            r#"{"ev":"accepted","account":"alice","id":"o1"}"#,
            r#"{"ev":"trade","symbol":"BTC-USD","price":"100","qty":"1","taker_side":"buy","maker_account":"bob","maker_id":"s1","taker_account":"alice","taker_id":"o1","maker_fee":"0","taker_fee":"0"}"#,
            r#"{"ev":"done","account":"bob","id":"s1","reason":"filled","filled":"1"}"#,
            r#"{"ev":"done","account":"alice","id":"o1","reason":"expired","filled":"1"}"#,
        ],
    );
    exchange.assert_book("BTC-USD", &[], &[]);
    exchange.assert_balance("alice", "USD", "900", "0");
    exchange.assert_balance("alice", "BTC", "1", "0");
}

#[test]
fn ioc_filled_completely_is_done_filled() {
    let mut exchange = Exchange::standard();
    exchange.ok(deposit("bob", "BTC", "2"));
    exchange.ok(deposit("alice", "USD", "1000"));
    exchange.ok(sell("bob", "s1", "100", "2"));
    let fed = exchange.feed(buy("alice", "o1", "100", "2").tif("ioc"));
    assert_events_then_any_order(
        &fed,
        &[
            r#"{"ev":"accepted","account":"alice","id":"o1"}"#,
            r#"{"ev":"trade","symbol":"BTC-USD","price":"100","qty":"2","taker_side":"buy","maker_account":"bob","maker_id":"s1","taker_account":"alice","taker_id":"o1","maker_fee":"0","taker_fee":"0"}"#,
        ],
        &[
            r#"{"ev":"done","account":"bob","id":"s1","reason":"filled","filled":"2"}"#,
            r#"{"ev":"done","account":"alice","id":"o1","reason":"filled","filled":"2"}"#,
        ],
    );
}

#[test]
fn fok_with_enough_liquidity_fills_completely() {
    let mut exchange = Exchange::standard();
    exchange.ok(deposit("bob", "BTC", "1"));
    exchange.ok(deposit("carol", "BTC", "1"));
    exchange.ok(deposit("alice", "USD", "1000"));
    exchange.ok(sell("bob", "s1", "100", "1"));
    exchange.ok(sell("carol", "s1", "101", "1"));
    let fed = exchange.feed(buy("alice", "o1", "101", "2").tif("fok"));
    assert_events_then_any_order(
        &fed,
        &[
            r#"{"ev":"accepted","account":"alice","id":"o1"}"#,
            r#"{"ev":"trade","symbol":"BTC-USD","price":"100","qty":"1","taker_side":"buy","maker_account":"bob","maker_id":"s1","taker_account":"alice","taker_id":"o1","maker_fee":"0","taker_fee":"0"}"#,
            r#"{"ev":"done","account":"bob","id":"s1","reason":"filled","filled":"1"}"#,
            r#"{"ev":"trade","symbol":"BTC-USD","price":"101","qty":"1","taker_side":"buy","maker_account":"carol","maker_id":"s1","taker_account":"alice","taker_id":"o1","maker_fee":"0","taker_fee":"0"}"#,
        ],
        &[
            r#"{"ev":"done","account":"carol","id":"s1","reason":"filled","filled":"1"}"#,
            r#"{"ev":"done","account":"alice","id":"o1","reason":"filled","filled":"2"}"#,
        ],
    );
    // held 202, paid 201, 1 back
    exchange.assert_balance("alice", "USD", "799", "0");
}

#[test]
fn fok_without_enough_liquidity_expires_without_trading() {
    let mut exchange = Exchange::standard();
    exchange.ok(deposit("bob", "BTC", "1"));
    exchange.ok(deposit("alice", "USD", "1000"));
    exchange.ok(sell("bob", "s1", "100", "1"));
    let fed = exchange.feed(buy("alice", "o1", "100", "2").tif("fok"));
    assert_events(
        &fed,
        &[
            r#"{"ev":"accepted","account":"alice","id":"o1"}"#,
            r#"{"ev":"done","account":"alice","id":"o1","reason":"expired","filled":"0"}"#,
        ],
    );
    exchange.assert_book("BTC-USD", &[], &[("bob", "s1", "100", "1")]);
    exchange.assert_balance("alice", "USD", "1000", "0");
}

#[test]
fn fok_counts_only_orders_at_acceptable_prices() {
    let mut exchange = Exchange::standard();
    exchange.ok(deposit("bob", "BTC", "2"));
    exchange.ok(deposit("alice", "USD", "1000"));
    exchange.ok(sell("bob", "s1", "100", "1"));
    exchange.ok(sell("bob", "s2", "102", "1"));
    let fed = exchange.feed(buy("alice", "o1", "101", "2").tif("fok"));
    assert_events(
        &fed,
        &[
            r#"{"ev":"accepted","account":"alice","id":"o1"}"#,
            r#"{"ev":"done","account":"alice","id":"o1","reason":"expired","filled":"0"}"#,
        ],
    );
    exchange.assert_book("BTC-USD", &[], &[("bob", "s1", "100", "1"), ("bob", "s2", "102", "1")]);
}

// ---------------------------------------------------------------- fok counting and STP

/// Asks in priority order: bob s1 100 x1, alice a1 100 x1, carol s1 101 x1.
/// alice can buy 2 at 101 (holds 202).
fn asks_with_alices_own_order_second() -> Exchange {
    let mut exchange = Exchange::standard();
    exchange.ok(deposit("bob", "BTC", "1"));
    exchange.ok(deposit("carol", "BTC", "1"));
    exchange.ok(deposit("alice", "BTC", "1"));
    exchange.ok(deposit("alice", "USD", "1000"));
    exchange.ok(sell("bob", "s1", "100", "1"));
    exchange.ok(sell("alice", "a1", "100", "1"));
    exchange.ok(sell("carol", "s1", "101", "1"));
    exchange
}

#[test]
fn fok_with_cancel_taker_stops_counting_at_its_own_order() {
    let mut exchange = asks_with_alices_own_order_second();
    let fed = exchange.feed(buy("alice", "f1", "101", "2").tif("fok").stp("cancel_taker"));
    assert_events(
        &fed,
        &[
            r#"{"ev":"accepted","account":"alice","id":"f1"}"#,
            r#"{"ev":"done","account":"alice","id":"f1","reason":"expired","filled":"0"}"#,
        ],
    );
    exchange.assert_book(
        "BTC-USD",
        &[],
        &[("bob", "s1", "100", "1"), ("alice", "a1", "100", "1"), ("carol", "s1", "101", "1")],
    );
}

#[test]
fn fok_with_default_stp_stops_counting_at_its_own_order() {
    let mut exchange = asks_with_alices_own_order_second();
    let fed = exchange.feed(buy("alice", "f1", "101", "2").tif("fok"));
    assert_events(
        &fed,
        &[
            r#"{"ev":"accepted","account":"alice","id":"f1"}"#,
            r#"{"ev":"done","account":"alice","id":"f1","reason":"expired","filled":"0"}"#,
        ],
    );
}

#[test]
fn fok_with_cancel_both_stops_counting_at_its_own_order() {
    let mut exchange = asks_with_alices_own_order_second();
    let fed = exchange.feed(buy("alice", "f1", "101", "2").tif("fok").stp("cancel_both"));
    assert_events(
        &fed,
        &[
            r#"{"ev":"accepted","account":"alice","id":"f1"}"#,
            r#"{"ev":"done","account":"alice","id":"f1","reason":"expired","filled":"0"}"#,
        ],
    );
    exchange.assert_book(
        "BTC-USD",
        &[],
        &[("bob", "s1", "100", "1"), ("alice", "a1", "100", "1"), ("carol", "s1", "101", "1")],
    );
}

#[test]
fn fok_with_cancel_taker_fills_when_orders_before_its_own_cover_it() {
    let mut exchange = asks_with_alices_own_order_second();
    let fed = exchange.feed(buy("alice", "f1", "101", "1").tif("fok"));
    assert_events_then_any_order(
        &fed,
        &[
            r#"{"ev":"accepted","account":"alice","id":"f1"}"#,
            r#"{"ev":"trade","symbol":"BTC-USD","price":"100","qty":"1","taker_side":"buy","maker_account":"bob","maker_id":"s1","taker_account":"alice","taker_id":"f1","maker_fee":"0","taker_fee":"0"}"#,
        ],
        &[
            r#"{"ev":"done","account":"bob","id":"s1","reason":"filled","filled":"1"}"#,
            r#"{"ev":"done","account":"alice","id":"f1","reason":"filled","filled":"1"}"#,
        ],
    );
    exchange.assert_book(
        "BTC-USD",
        &[],
        &[("alice", "a1", "100", "1"), ("carol", "s1", "101", "1")],
    );
}

#[test]
fn fok_with_cancel_maker_counts_past_its_own_orders_and_cancels_them_on_execution() {
    let mut exchange = asks_with_alices_own_order_second();
    let fed = exchange.feed(buy("alice", "f1", "101", "2").tif("fok").stp("cancel_maker"));
    assert_events_then_any_order(
        &fed,
        &[
            r#"{"ev":"accepted","account":"alice","id":"f1"}"#,
            r#"{"ev":"trade","symbol":"BTC-USD","price":"100","qty":"1","taker_side":"buy","maker_account":"bob","maker_id":"s1","taker_account":"alice","taker_id":"f1","maker_fee":"0","taker_fee":"0"}"#,
            r#"{"ev":"done","account":"bob","id":"s1","reason":"filled","filled":"1"}"#,
            r#"{"ev":"done","account":"alice","id":"a1","reason":"stp","filled":"0"}"#,
            r#"{"ev":"trade","symbol":"BTC-USD","price":"101","qty":"1","taker_side":"buy","maker_account":"carol","maker_id":"s1","taker_account":"alice","taker_id":"f1","maker_fee":"0","taker_fee":"0"}"#,
        ],
        &[
            r#"{"ev":"done","account":"carol","id":"s1","reason":"filled","filled":"1"}"#,
            r#"{"ev":"done","account":"alice","id":"f1","reason":"filled","filled":"2"}"#,
        ],
    );
    exchange.assert_book("BTC-USD", &[], &[]);
    // a1's 1 BTC is released, 2 bought; 201 paid of the 202 held
    exchange.assert_balance("alice", "BTC", "3", "0");
    exchange.assert_balance("alice", "USD", "799", "0");
}

#[test]
fn fok_with_cancel_maker_that_cannot_fill_cancels_nothing() {
    let mut exchange = Exchange::standard();
    exchange.ok(deposit("bob", "BTC", "1"));
    exchange.ok(deposit("alice", "BTC", "1"));
    exchange.ok(deposit("alice", "USD", "1000"));
    exchange.ok(sell("alice", "a1", "100", "1"));
    exchange.ok(sell("bob", "s1", "100", "1"));
    let fed = exchange.feed(buy("alice", "f1", "100", "2").tif("fok").stp("cancel_maker"));
    assert_events(
        &fed,
        &[
            r#"{"ev":"accepted","account":"alice","id":"f1"}"#,
            r#"{"ev":"done","account":"alice","id":"f1","reason":"expired","filled":"0"}"#,
        ],
    );
    exchange.assert_book("BTC-USD", &[], &[("alice", "a1", "100", "1"), ("bob", "s1", "100", "1")]);
}

#[test]
fn fok_with_stp_none_counts_its_own_orders_and_trades_with_them() {
    let mut exchange = asks_with_alices_own_order_second();
    let fed = exchange.feed(buy("alice", "f1", "101", "2").tif("fok").stp("none"));
    assert_events_then_any_order(
        &fed,
        &[
            r#"{"ev":"accepted","account":"alice","id":"f1"}"#,
            r#"{"ev":"trade","symbol":"BTC-USD","price":"100","qty":"1","taker_side":"buy","maker_account":"bob","maker_id":"s1","taker_account":"alice","taker_id":"f1","maker_fee":"0","taker_fee":"0"}"#,
            r#"{"ev":"done","account":"bob","id":"s1","reason":"filled","filled":"1"}"#,
            r#"{"ev":"trade","symbol":"BTC-USD","price":"100","qty":"1","taker_side":"buy","maker_account":"alice","maker_id":"a1","taker_account":"alice","taker_id":"f1","maker_fee":"0","taker_fee":"0"}"#,
        ],
        &[
            r#"{"ev":"done","account":"alice","id":"a1","reason":"filled","filled":"1"}"#,
            r#"{"ev":"done","account":"alice","id":"f1","reason":"filled","filled":"2"}"#,
        ],
    );
    exchange.assert_book("BTC-USD", &[], &[("carol", "s1", "101", "1")]);
}

// ---------------------------------------------------------------- market

#[test]
fn market_order_against_an_empty_side_is_rejected_no_liquidity() {
    let mut exchange = Exchange::standard();
    exchange.ok(deposit("alice", "USD", "1000"));
    exchange.ok(buy("alice", "b1", "100", "1")); // bids exist, asks do not
    let fed = exchange.feed(market_buy("alice", "m1", "1"));
    assert_events(
        &fed,
        &[r#"{"ev":"rejected","reason":"no_liquidity","account":"alice","id":"m1"}"#],
    );
    exchange.assert_balance("alice", "USD", "900", "100");
}

#[test]
fn market_buy_protection_price_is_rounded_up_to_the_tick() {
    let mut exchange = Exchange::standard();
    exchange.ok(deposit("bob", "BTC", "4"));
    for (id, price) in [("s1", "101"), ("s2", "111"), ("s3", "112"), ("s4", "113")] {
        exchange.ok(sell("bob", id, price, "1"));
    }
    // protection = ceil(101 * 1.10) = ceil(111.1) = 112; holds 112 * 4
    exchange.ok(deposit("alice", "USD", "448"));
    let fed = exchange.feed(market_buy("alice", "m1", "4"));
    assert_events(
        &fed,
        &[
            r#"{"ev":"accepted","account":"alice","id":"m1"}"#,
            r#"{"ev":"trade","symbol":"BTC-USD","price":"101","qty":"1","taker_side":"buy","maker_account":"bob","maker_id":"s1","taker_account":"alice","taker_id":"m1","maker_fee":"0","taker_fee":"0"}"#,
            r#"{"ev":"done","account":"bob","id":"s1","reason":"filled","filled":"1"}"#,
            r#"{"ev":"trade","symbol":"BTC-USD","price":"111","qty":"1","taker_side":"buy","maker_account":"bob","maker_id":"s2","taker_account":"alice","taker_id":"m1","maker_fee":"0","taker_fee":"0"}"#,
            r#"{"ev":"done","account":"bob","id":"s2","reason":"filled","filled":"1"}"#,
            r#"{"ev":"trade","symbol":"BTC-USD","price":"112","qty":"1","taker_side":"buy","maker_account":"bob","maker_id":"s3","taker_account":"alice","taker_id":"m1","maker_fee":"0","taker_fee":"0"}"#,
            r#"{"ev":"done","account":"bob","id":"s3","reason":"filled","filled":"1"}"#,
            r#"{"ev":"done","account":"alice","id":"m1","reason":"expired","filled":"3"}"#,
        ],
    );
    exchange.assert_book("BTC-USD", &[], &[("bob", "s4", "113", "1")]);
    // paid 101 + 111 + 112 = 324 of the 448 held
    exchange.assert_balance("alice", "USD", "124", "0");
    exchange.assert_balance("alice", "BTC", "3", "0");
}

#[test]
fn market_sell_protection_price_is_rounded_down_to_the_tick() {
    let mut exchange = Exchange::standard();
    exchange.ok(deposit("bob", "USD", "280"));
    for (id, price) in [("b1", "101"), ("b2", "90"), ("b3", "89")] {
        exchange.ok(buy("bob", id, price, "1"));
    }
    exchange.ok(deposit("alice", "BTC", "3"));
    // protection = floor(101 * 0.90) = floor(90.9) = 90
    let fed = exchange.feed(market_sell("alice", "m1", "3"));
    assert_events(
        &fed,
        &[
            r#"{"ev":"accepted","account":"alice","id":"m1"}"#,
            r#"{"ev":"trade","symbol":"BTC-USD","price":"101","qty":"1","taker_side":"sell","maker_account":"bob","maker_id":"b1","taker_account":"alice","taker_id":"m1","maker_fee":"0","taker_fee":"0"}"#,
            r#"{"ev":"done","account":"bob","id":"b1","reason":"filled","filled":"1"}"#,
            r#"{"ev":"trade","symbol":"BTC-USD","price":"90","qty":"1","taker_side":"sell","maker_account":"bob","maker_id":"b2","taker_account":"alice","taker_id":"m1","maker_fee":"0","taker_fee":"0"}"#,
            r#"{"ev":"done","account":"bob","id":"b2","reason":"filled","filled":"1"}"#,
            r#"{"ev":"done","account":"alice","id":"m1","reason":"expired","filled":"2"}"#,
        ],
    );
    exchange.assert_book("BTC-USD", &[("bob", "b3", "89", "1")], &[]);
    exchange.assert_balance("alice", "BTC", "1", "0");
    exchange.assert_balance("alice", "USD", "191", "0");
}

#[test]
fn market_sell_protection_price_is_never_below_one_tick() {
    let mut exchange = Exchange::standard();
    // a band of 100%: P * (1 - 1) = 0, so the protection price is one tick
    exchange.ok(instrument("BTC-USD-WIDE", "BTC", "USD").with("market_band_bps", 10000));
    exchange.ok(deposit("bob", "USD", "6"));
    exchange.ok(buy("bob", "b1", "5", "1").on("BTC-USD-WIDE"));
    exchange.ok(buy("bob", "b2", "1", "1").on("BTC-USD-WIDE"));
    exchange.ok(deposit("alice", "BTC", "2"));
    let fed = exchange.feed(market_sell("alice", "m1", "2").on("BTC-USD-WIDE"));
    assert_events_then_any_order(
        &fed,
        &[
            r#"{"ev":"accepted","account":"alice","id":"m1"}"#,
            r#"{"ev":"trade","symbol":"BTC-USD-WIDE","price":"5","qty":"1","taker_side":"sell","maker_account":"bob","maker_id":"b1","taker_account":"alice","taker_id":"m1","maker_fee":"0","taker_fee":"0"}"#,
            r#"{"ev":"done","account":"bob","id":"b1","reason":"filled","filled":"1"}"#,
            r#"{"ev":"trade","symbol":"BTC-USD-WIDE","price":"1","qty":"1","taker_side":"sell","maker_account":"bob","maker_id":"b2","taker_account":"alice","taker_id":"m1","maker_fee":"0","taker_fee":"0"}"#,
        ],
        &[
            r#"{"ev":"done","account":"bob","id":"b2","reason":"filled","filled":"1"}"#,
            r#"{"ev":"done","account":"alice","id":"m1","reason":"filled","filled":"2"}"#,
        ],
    );
    exchange.assert_balance("alice", "USD", "6", "0");
}

#[test]
fn market_buy_without_funds_for_protection_price_times_qty_is_insufficient_funds() {
    let mut exchange = Exchange::standard();
    exchange.ok(deposit("bob", "BTC", "1"));
    exchange.ok(sell("bob", "s1", "100", "1"));
    // protection = 100 * 1.10 = 110 > 109.99, although the trade would cost 100
    exchange.ok(deposit("alice", "USD", "109.99"));
    let fed = exchange.feed(market_buy("alice", "m1", "1"));
    assert_events(
        &fed,
        &[r#"{"ev":"rejected","reason":"insufficient_funds","account":"alice","id":"m1"}"#],
    );
    exchange.assert_book("BTC-USD", &[], &[("bob", "s1", "100", "1")]);
}

#[test]
fn market_buy_refunds_what_it_held_beyond_the_trade_price() {
    let mut exchange = Exchange::standard();
    exchange.ok(deposit("bob", "BTC", "1"));
    exchange.ok(sell("bob", "s1", "100", "1"));
    exchange.ok(deposit("alice", "USD", "110"));
    let fed = exchange.feed(market_buy("alice", "m1", "1"));
    assert_events_then_any_order(
        &fed,
        &[
            r#"{"ev":"accepted","account":"alice","id":"m1"}"#,
            r#"{"ev":"trade","symbol":"BTC-USD","price":"100","qty":"1","taker_side":"buy","maker_account":"bob","maker_id":"s1","taker_account":"alice","taker_id":"m1","maker_fee":"0","taker_fee":"0"}"#,
        ],
        &[
            r#"{"ev":"done","account":"bob","id":"s1","reason":"filled","filled":"1"}"#,
            r#"{"ev":"done","account":"alice","id":"m1","reason":"filled","filled":"1"}"#,
        ],
    );
    exchange.assert_balance("alice", "USD", "10", "0");
    exchange.assert_balance("alice", "BTC", "1", "0");
    exchange.assert_balance("bob", "USD", "100", "0");
}

#[test]
fn market_gtc_is_taken_as_ioc() {
    let mut exchange = Exchange::standard();
    exchange.ok(deposit("bob", "BTC", "1"));
    exchange.ok(sell("bob", "s1", "100", "1"));
    exchange.ok(deposit("alice", "USD", "220")); // 110 * 2
    let fed = exchange.feed(market_buy("alice", "m1", "2").tif("gtc"));
    assert_events(
        &fed,
        &[
            r#"{"ev":"accepted","account":"alice","id":"m1"}"#,
            r#"{"ev":"trade","symbol":"BTC-USD","price":"100","qty":"1","taker_side":"buy","maker_account":"bob","maker_id":"s1","taker_account":"alice","taker_id":"m1","maker_fee":"0","taker_fee":"0"}"#,
            r#"{"ev":"done","account":"bob","id":"s1","reason":"filled","filled":"1"}"#,
            r#"{"ev":"done","account":"alice","id":"m1","reason":"expired","filled":"1"}"#,
        ],
    );
    exchange.assert_book("BTC-USD", &[], &[]);
    exchange.assert_balance("alice", "USD", "120", "0");
}

#[test]
fn market_fok_without_enough_liquidity_expires_without_trading() {
    let mut exchange = Exchange::standard();
    exchange.ok(deposit("bob", "BTC", "1"));
    exchange.ok(sell("bob", "s1", "100", "1"));
    exchange.ok(deposit("alice", "USD", "220"));
    let fed = exchange.feed(market_buy("alice", "m1", "2").tif("fok"));
    assert_events(
        &fed,
        &[
            r#"{"ev":"accepted","account":"alice","id":"m1"}"#,
            r#"{"ev":"done","account":"alice","id":"m1","reason":"expired","filled":"0"}"#,
        ],
    );
    exchange.assert_book("BTC-USD", &[], &[("bob", "s1", "100", "1")]);
    exchange.assert_balance("alice", "USD", "220", "0");
}

#[test]
fn price_on_a_market_order_is_ignored() {
    let mut exchange = Exchange::standard();
    exchange.ok(deposit("bob", "BTC", "1"));
    exchange.ok(sell("bob", "s1", "100", "1"));
    exchange.ok(deposit("alice", "USD", "110"));
    // "0.5" would be invalid_price on a limit order
    let fed = exchange.feed(market_buy("alice", "m1", "1").with("price", "0.5"));
    assert_events_then_any_order(
        &fed,
        &[
            r#"{"ev":"accepted","account":"alice","id":"m1"}"#,
            r#"{"ev":"trade","symbol":"BTC-USD","price":"100","qty":"1","taker_side":"buy","maker_account":"bob","maker_id":"s1","taker_account":"alice","taker_id":"m1","maker_fee":"0","taker_fee":"0"}"#,
        ],
        &[
            r#"{"ev":"done","account":"bob","id":"s1","reason":"filled","filled":"1"}"#,
            r#"{"ev":"done","account":"alice","id":"m1","reason":"filled","filled":"1"}"#,
        ],
    );
}

#[test]
fn post_only_on_a_market_order_is_ignored() {
    let mut exchange = Exchange::standard();
    exchange.ok(deposit("bob", "BTC", "1"));
    exchange.ok(sell("bob", "s1", "100", "1"));
    exchange.ok(deposit("alice", "USD", "110"));
    let fed = exchange.feed(market_buy("alice", "m1", "1").post_only());
    assert_events_then_any_order(
        &fed,
        &[
            r#"{"ev":"accepted","account":"alice","id":"m1"}"#,
            r#"{"ev":"trade","symbol":"BTC-USD","price":"100","qty":"1","taker_side":"buy","maker_account":"bob","maker_id":"s1","taker_account":"alice","taker_id":"m1","maker_fee":"0","taker_fee":"0"}"#,
        ],
        &[
            r#"{"ev":"done","account":"bob","id":"s1","reason":"filled","filled":"1"}"#,
            r#"{"ev":"done","account":"alice","id":"m1","reason":"filled","filled":"1"}"#,
        ],
    );
}

#[test]
fn market_protection_price_counts_the_takers_own_orders() {
    let mut exchange = Exchange::standard();
    exchange.ok(deposit("alice", "BTC", "1"));
    exchange.ok(deposit("alice", "USD", "110"));
    exchange.ok(deposit("bob", "BTC", "1"));
    exchange.ok(sell("alice", "a1", "100", "1"));
    exchange.ok(sell("bob", "s1", "111", "1"));
    // P = 100 (alice's own ask), protection 110: bob's 111 is out of reach
    let fed = exchange.feed(market_buy("alice", "m1", "1").stp("cancel_maker"));
    assert_events(
        &fed,
        &[
            r#"{"ev":"accepted","account":"alice","id":"m1"}"#,
            r#"{"ev":"done","account":"alice","id":"a1","reason":"stp","filled":"0"}"#,
            r#"{"ev":"done","account":"alice","id":"m1","reason":"expired","filled":"0"}"#,
        ],
    );
    exchange.assert_book("BTC-USD", &[], &[("bob", "s1", "111", "1")]);
    exchange.assert_balance("alice", "USD", "110", "0");
    exchange.assert_balance("alice", "BTC", "1", "0");
}

#[test]
fn market_order_against_only_its_own_orders_is_stopped_by_stp() {
    let mut exchange = Exchange::standard();
    exchange.ok(deposit("alice", "BTC", "1"));
    exchange.ok(deposit("alice", "USD", "110"));
    exchange.ok(sell("alice", "a1", "100", "1"));
    let fed = exchange.feed(market_buy("alice", "m1", "1"));
    assert_events(
        &fed,
        &[
            r#"{"ev":"accepted","account":"alice","id":"m1"}"#,
            r#"{"ev":"done","account":"alice","id":"m1","reason":"stp","filled":"0"}"#,
        ],
    );
    exchange.assert_book("BTC-USD", &[], &[("alice", "a1", "100", "1")]);
    exchange.assert_balance("alice", "USD", "110", "0");
}

// ---------------------------------------------------------------- post-only

#[test]
fn post_only_that_does_not_cross_rests() {
    let mut exchange = Exchange::standard();
    exchange.ok(deposit("bob", "BTC", "1"));
    exchange.ok(sell("bob", "s1", "101", "1"));
    exchange.ok(deposit("alice", "USD", "1000"));
    let fed = exchange.feed(buy("alice", "o1", "100", "1").post_only());
    assert_events(&fed, &[r#"{"ev":"accepted","account":"alice","id":"o1"}"#]);
    exchange.assert_book("BTC-USD", &[("alice", "o1", "100", "1")], &[("bob", "s1", "101", "1")]);
}

#[test]
fn post_only_that_would_cross_is_rejected_would_cross() {
    let mut exchange = Exchange::standard();
    exchange.ok(deposit("bob", "BTC", "1"));
    exchange.ok(sell("bob", "s1", "100", "1"));
    exchange.ok(deposit("alice", "USD", "1000"));
    let fed = exchange.feed(buy("alice", "o1", "101", "1").post_only());
    assert_events(
        &fed,
        &[r#"{"ev":"rejected","reason":"would_cross","account":"alice","id":"o1"}"#],
    );
    exchange.assert_book("BTC-USD", &[], &[("bob", "s1", "100", "1")]);
    exchange.assert_balance("alice", "USD", "1000", "0");
}

#[test]
fn post_only_at_the_best_opposite_price_would_cross() {
    let mut exchange = Exchange::standard();
    exchange.ok(deposit("bob", "USD", "1000"));
    exchange.ok(buy("bob", "b1", "100", "1"));
    exchange.ok(deposit("alice", "BTC", "1"));
    let fed = exchange.feed(sell("alice", "o1", "100", "1").post_only());
    assert_events(
        &fed,
        &[r#"{"ev":"rejected","reason":"would_cross","account":"alice","id":"o1"}"#],
    );
}

#[test]
fn post_only_would_cross_counts_the_accounts_own_orders() {
    let mut exchange = Exchange::standard();
    exchange.ok(deposit("alice", "BTC", "1"));
    exchange.ok(deposit("alice", "USD", "1000"));
    exchange.ok(sell("alice", "a1", "100", "1"));
    let fed = exchange.feed(buy("alice", "o1", "100", "1").post_only().stp("none"));
    assert_events(
        &fed,
        &[r#"{"ev":"rejected","reason":"would_cross","account":"alice","id":"o1"}"#],
    );
    exchange.assert_book("BTC-USD", &[], &[("alice", "a1", "100", "1")]);
}

#[test]
fn post_only_ioc_that_does_not_cross_is_accepted_then_expired() {
    let mut exchange = Exchange::standard();
    exchange.ok(deposit("bob", "BTC", "1"));
    exchange.ok(sell("bob", "s1", "101", "1"));
    exchange.ok(deposit("alice", "USD", "1000"));
    let fed = exchange.feed(buy("alice", "o1", "100", "1").post_only().tif("ioc"));
    assert_events(
        &fed,
        &[
            r#"{"ev":"accepted","account":"alice","id":"o1"}"#,
            r#"{"ev":"done","account":"alice","id":"o1","reason":"expired","filled":"0"}"#,
        ],
    );
    exchange.assert_book("BTC-USD", &[], &[("bob", "s1", "101", "1")]);
    exchange.assert_balance("alice", "USD", "1000", "0");
}

#[test]
fn post_only_fok_that_does_not_cross_is_accepted_then_expired() {
    let mut exchange = Exchange::standard();
    exchange.ok(deposit("alice", "USD", "1000"));
    let fed = exchange.feed(buy("alice", "o1", "100", "1").post_only().tif("fok"));
    assert_events(
        &fed,
        &[
            r#"{"ev":"accepted","account":"alice","id":"o1"}"#,
            r#"{"ev":"done","account":"alice","id":"o1","reason":"expired","filled":"0"}"#,
        ],
    );
    exchange.assert_book("BTC-USD", &[], &[]);
}

#[test]
fn post_only_ioc_that_would_cross_is_rejected_would_cross() {
    let mut exchange = Exchange::standard();
    exchange.ok(deposit("bob", "BTC", "1"));
    exchange.ok(sell("bob", "s1", "100", "1"));
    exchange.ok(deposit("alice", "USD", "1000"));
    let fed = exchange.feed(buy("alice", "o1", "100", "1").post_only().tif("ioc"));
    assert_events(
        &fed,
        &[r#"{"ev":"rejected","reason":"would_cross","account":"alice","id":"o1"}"#],
    );
}

#[test]
fn post_only_fok_that_would_cross_is_rejected_would_cross() {
    let mut exchange = Exchange::standard();
    exchange.ok(deposit("bob", "BTC", "1"));
    exchange.ok(sell("bob", "s1", "100", "1"));
    exchange.ok(deposit("alice", "USD", "1000"));
    let fed = exchange.feed(buy("alice", "o1", "100", "1").post_only().tif("fok"));
    assert_events(
        &fed,
        &[r#"{"ev":"rejected","reason":"would_cross","account":"alice","id":"o1"}"#],
    );
    exchange.assert_book("BTC-USD", &[], &[("bob", "s1", "100", "1")]);
}

// ---------------------------------------------------------------- tick and lot that are not powers of ten

/// GLD (0 decimals) against USD with tick 0.05 and lot 25.
fn gold_exchange() -> Exchange {
    let mut exchange = Exchange::standard();
    exchange.ok(asset("GLD", 0));
    exchange.ok(instrument("GLD-USD", "GLD", "USD")
        .with("tick", "0.05")
        .with("lot", "25")
        .with("min_qty", "25")
        .with("max_qty", "1000"));
    exchange.ok(deposit("alice", "USD", "1000"));
    exchange
}

#[test]
fn price_must_be_a_whole_number_of_a_0_05_tick() {
    let mut exchange = gold_exchange();
    let fed = exchange.feed(buy("alice", "o1", "1.07", "25").on("GLD-USD"));
    assert_events(
        &fed,
        &[r#"{"ev":"rejected","reason":"invalid_price","account":"alice","id":"o1"}"#],
    );
    let fed = exchange.feed(buy("alice", "o1", "1.10", "25").on("GLD-USD"));
    assert_events(&fed, &[r#"{"ev":"accepted","account":"alice","id":"o1"}"#]);
}

#[test]
fn qty_must_be_a_whole_number_of_a_25_lot() {
    let mut exchange = gold_exchange();
    let fed = exchange.feed(buy("alice", "o1", "1", "30").on("GLD-USD"));
    assert_events(
        &fed,
        &[r#"{"ev":"rejected","reason":"invalid_qty","account":"alice","id":"o1"}"#],
    );
    let fed = exchange.feed(buy("alice", "o1", "1", "75").on("GLD-USD"));
    assert_events(&fed, &[r#"{"ev":"accepted","account":"alice","id":"o1"}"#]);
}

#[test]
fn market_buy_protection_price_is_rounded_up_to_a_whole_0_05_tick() {
    let mut exchange = gold_exchange();
    exchange.ok(deposit("bob", "GLD", "75"));
    for (id, price) in [("s1", "1.05"), ("s2", "1.20"), ("s3", "1.25")] {
        exchange.ok(sell("bob", id, price, "25").on("GLD-USD"));
    }
    // protection = 1.05 * 1.10 = 1.155, rounded up to 24 ticks of 0.05 = 1.20
    let fed = exchange.feed(market_buy("alice", "m1", "75").on("GLD-USD"));
    assert_events(
        &fed,
        &[
            r#"{"ev":"accepted","account":"alice","id":"m1"}"#,
            r#"{"ev":"trade","symbol":"GLD-USD","price":"1.05","qty":"25","taker_side":"buy","maker_account":"bob","maker_id":"s1","taker_account":"alice","taker_id":"m1","maker_fee":"0","taker_fee":"0"}"#,
            r#"{"ev":"done","account":"bob","id":"s1","reason":"filled","filled":"25"}"#,
            r#"{"ev":"trade","symbol":"GLD-USD","price":"1.20","qty":"25","taker_side":"buy","maker_account":"bob","maker_id":"s2","taker_account":"alice","taker_id":"m1","maker_fee":"0","taker_fee":"0"}"#,
            r#"{"ev":"done","account":"bob","id":"s2","reason":"filled","filled":"25"}"#,
            r#"{"ev":"done","account":"alice","id":"m1","reason":"expired","filled":"50"}"#,
        ],
    );
    exchange.assert_book("GLD-USD", &[], &[("bob", "s3", "1.25", "25")]);
    // paid 26.25 + 30.00
    exchange.assert_balance("alice", "USD", "943.75", "0");
    exchange.assert_balance("alice", "GLD", "50", "0");
}

#[test]
fn market_sell_protection_price_is_rounded_down_to_a_whole_0_05_tick() {
    let mut exchange = gold_exchange();
    for (id, price) in [("b1", "1.05"), ("b2", "0.90"), ("b3", "0.85")] {
        exchange.ok(buy("alice", id, price, "25").on("GLD-USD"));
    }
    exchange.ok(deposit("bob", "GLD", "75"));
    // protection = 1.05 * 0.90 = 0.945, rounded down to 18 ticks of 0.05 = 0.90
    let fed = exchange.feed(market_sell("bob", "m1", "75").on("GLD-USD"));
    assert_events(
        &fed,
        &[
            r#"{"ev":"accepted","account":"bob","id":"m1"}"#,
            r#"{"ev":"trade","symbol":"GLD-USD","price":"1.05","qty":"25","taker_side":"sell","maker_account":"alice","maker_id":"b1","taker_account":"bob","taker_id":"m1","maker_fee":"0","taker_fee":"0"}"#,
            r#"{"ev":"done","account":"alice","id":"b1","reason":"filled","filled":"25"}"#,
            r#"{"ev":"trade","symbol":"GLD-USD","price":"0.90","qty":"25","taker_side":"sell","maker_account":"alice","maker_id":"b2","taker_account":"bob","taker_id":"m1","maker_fee":"0","taker_fee":"0"}"#,
            r#"{"ev":"done","account":"alice","id":"b2","reason":"filled","filled":"25"}"#,
            r#"{"ev":"done","account":"bob","id":"m1","reason":"expired","filled":"50"}"#,
        ],
    );
    exchange.assert_book("GLD-USD", &[("alice", "b3", "0.85", "25")], &[]);
    exchange.assert_balance("bob", "USD", "48.75", "0");
    exchange.assert_balance("bob", "GLD", "25", "0");
}

#[test]
fn market_band_of_zero_limits_a_market_order_to_the_best_price() {
    let mut exchange = Exchange::standard();
    exchange.ok(instrument("BTC-USD-TIGHT", "BTC", "USD").with("market_band_bps", 0));
    exchange.ok(deposit("bob", "BTC", "2"));
    exchange.ok(sell("bob", "s1", "100", "1").on("BTC-USD-TIGHT"));
    exchange.ok(sell("bob", "s2", "101", "1").on("BTC-USD-TIGHT"));
    exchange.ok(deposit("alice", "USD", "200")); // protection 100, times 2
    let fed = exchange.feed(market_buy("alice", "m1", "2").on("BTC-USD-TIGHT"));
    assert_events(
        &fed,
        &[
            r#"{"ev":"accepted","account":"alice","id":"m1"}"#,
            r#"{"ev":"trade","symbol":"BTC-USD-TIGHT","price":"100","qty":"1","taker_side":"buy","maker_account":"bob","maker_id":"s1","taker_account":"alice","taker_id":"m1","maker_fee":"0","taker_fee":"0"}"#,
            r#"{"ev":"done","account":"bob","id":"s1","reason":"filled","filled":"1"}"#,
            r#"{"ev":"done","account":"alice","id":"m1","reason":"expired","filled":"1"}"#,
        ],
    );
    exchange.assert_balance("alice", "USD", "100", "0");
}

#[test]
fn market_sell_without_enough_base_is_rejected_insufficient_funds() {
    let mut exchange = Exchange::standard();
    exchange.ok(deposit("bob", "USD", "1000"));
    exchange.ok(buy("bob", "b1", "100", "1"));
    exchange.ok(deposit("alice", "BTC", "0.5"));
    let fed = exchange.feed(market_sell("alice", "m1", "1"));
    assert_events(
        &fed,
        &[r#"{"ev":"rejected","reason":"insufficient_funds","account":"alice","id":"m1"}"#],
    );
    exchange.assert_book("BTC-USD", &[("bob", "b1", "100", "1")], &[]);
}
