//! Self-trade prevention in the replay format: what each mode does when the next
//! resting order to match belongs to the taker's account, that only the taker's mode
//! counts, and that what an STP-finished order held is released.
//!
//! BTC-USD (see `support`): tick 1, lot 0.01, no fees. ETH-USD: tick 0.01, lot 1,
//! maker 10 bps, taker 25 bps; ETH has 3 decimals, USD 2.

mod support;

use support::*;

/// alice, bob and carol each have 10 BTC and 1000 USD.
fn funded() -> Exchange {
    Exchange::funded("1000")
}

#[test]
fn cancel_taker_is_the_default_and_finishes_the_incoming_order() {
    let mut exchange = funded();
    exchange.ok(sell("alice", "a1", "100", "1"));
    let fed = exchange.feed(buy("alice", "a2", "100", "1"));
    assert_events(
        &fed,
        &[
            r#"{"ev":"accepted","account":"alice","id":"a2"}"#,
            r#"{"ev":"done","account":"alice","id":"a2","reason":"stp","filled":"0"}"#,
        ],
    );
    exchange.assert_book("BTC-USD", &[], &[("alice", "a1", "100", "1")]);
    exchange.assert_balance("alice", "USD", "1000", "0");
}

#[test]
fn cancel_taker_keeps_the_fills_made_before_reaching_the_own_order() {
    let mut exchange = funded();
    exchange.ok(sell("bob", "s1", "100", "1"));
    exchange.ok(sell("alice", "a1", "100", "1"));
    let fed = exchange.feed(buy("alice", "a2", "100", "2").stp("cancel_taker"));
    assert_events(
        &fed,
        &[
            r#"{"ev":"accepted","account":"alice","id":"a2"}"#,
            r#"{"ev":"trade","symbol":"BTC-USD","price":"100","qty":"1","taker_side":"buy","maker_account":"bob","maker_id":"s1","taker_account":"alice","taker_id":"a2","maker_fee":"0","taker_fee":"0"}"#,
            r#"{"ev":"done","account":"bob","id":"s1","reason":"filled","filled":"1"}"#,
            r#"{"ev":"done","account":"alice","id":"a2","reason":"stp","filled":"1"}"#,
        ],
    );
    // the remainder of a gtc order stopped by STP does not rest
    exchange.assert_book("BTC-USD", &[], &[("alice", "a1", "100", "1")]);
    exchange.assert_balance("alice", "USD", "900", "0");
    exchange.assert_balance("alice", "BTC", "10", "1");
}

#[test]
fn ioc_stopped_by_stp_is_done_stp_not_expired() {
    let mut exchange = funded();
    exchange.ok(sell("bob", "s1", "100", "1"));
    exchange.ok(sell("alice", "a1", "100", "1"));
    let fed = exchange.feed(buy("alice", "a2", "100", "3").tif("ioc"));
    assert_events(
        &fed,
        &[
            r#"{"ev":"accepted","account":"alice","id":"a2"}"#,
            r#"{"ev":"trade","symbol":"BTC-USD","price":"100","qty":"1","taker_side":"buy","maker_account":"bob","maker_id":"s1","taker_account":"alice","taker_id":"a2","maker_fee":"0","taker_fee":"0"}"#,
            r#"{"ev":"done","account":"bob","id":"s1","reason":"filled","filled":"1"}"#,
            r#"{"ev":"done","account":"alice","id":"a2","reason":"stp","filled":"1"}"#,
        ],
    );
}

#[test]
fn cancel_maker_finishes_the_own_resting_order_and_matching_continues() {
    let mut exchange = funded();
    exchange.ok(sell("alice", "a1", "100", "1"));
    exchange.ok(sell("bob", "s1", "100", "1"));
    let fed = exchange.feed(buy("alice", "a2", "100", "1").stp("cancel_maker"));
    assert_events_then_any_order(
        &fed,
        &[
            r#"{"ev":"accepted","account":"alice","id":"a2"}"#,
            r#"{"ev":"done","account":"alice","id":"a1","reason":"stp","filled":"0"}"#,
            r#"{"ev":"trade","symbol":"BTC-USD","price":"100","qty":"1","taker_side":"buy","maker_account":"bob","maker_id":"s1","taker_account":"alice","taker_id":"a2","maker_fee":"0","taker_fee":"0"}"#,
        ],
        &[
            r#"{"ev":"done","account":"bob","id":"s1","reason":"filled","filled":"1"}"#,
            r#"{"ev":"done","account":"alice","id":"a2","reason":"filled","filled":"1"}"#,
        ],
    );
    exchange.assert_book("BTC-USD", &[], &[]);
    // a1's BTC is released, one more is bought
    exchange.assert_balance("alice", "BTC", "11", "0");
    exchange.assert_balance("alice", "USD", "900", "0");
}

#[test]
fn cancel_maker_finishes_every_own_order_on_the_way() {
    let mut exchange = funded();
    exchange.ok(sell("alice", "a1", "100", "1"));
    exchange.ok(sell("alice", "a3", "100", "2"));
    exchange.ok(sell("bob", "s1", "101", "1"));
    let fed = exchange.feed(buy("alice", "a2", "101", "1").stp("cancel_maker"));
    assert_events_then_any_order(
        &fed,
        &[
            r#"{"ev":"accepted","account":"alice","id":"a2"}"#,
            r#"{"ev":"done","account":"alice","id":"a1","reason":"stp","filled":"0"}"#,
            r#"{"ev":"done","account":"alice","id":"a3","reason":"stp","filled":"0"}"#,
            r#"{"ev":"trade","symbol":"BTC-USD","price":"101","qty":"1","taker_side":"buy","maker_account":"bob","maker_id":"s1","taker_account":"alice","taker_id":"a2","maker_fee":"0","taker_fee":"0"}"#,
        ],
        &[
            r#"{"ev":"done","account":"bob","id":"s1","reason":"filled","filled":"1"}"#,
            r#"{"ev":"done","account":"alice","id":"a2","reason":"filled","filled":"1"}"#,
        ],
    );
    exchange.assert_book("BTC-USD", &[], &[]);
}

#[test]
fn cancel_maker_rests_the_remainder_once_own_orders_are_gone() {
    let mut exchange = funded();
    exchange.ok(sell("alice", "a1", "100", "1"));
    let fed = exchange.feed(buy("alice", "a2", "100", "1").stp("cancel_maker"));
    assert_events(
        &fed,
        &[
            r#"{"ev":"accepted","account":"alice","id":"a2"}"#,
            r#"{"ev":"done","account":"alice","id":"a1","reason":"stp","filled":"0"}"#,
        ],
    );
    exchange.assert_book("BTC-USD", &[("alice", "a2", "100", "1")], &[]);
    exchange.assert_balance("alice", "USD", "900", "100");
    exchange.assert_balance("alice", "BTC", "10", "0");
}

#[test]
fn cancel_both_finishes_the_resting_and_the_incoming_order() {
    let mut exchange = funded();
    exchange.ok(sell("alice", "a1", "100", "2"));
    let fed = exchange.feed(buy("alice", "a2", "100", "1").stp("cancel_both"));
    assert_events_then_any_order(
        &fed,
        &[r#"{"ev":"accepted","account":"alice","id":"a2"}"#],
        &[
            r#"{"ev":"done","account":"alice","id":"a1","reason":"stp","filled":"0"}"#,
            r#"{"ev":"done","account":"alice","id":"a2","reason":"stp","filled":"0"}"#,
        ],
    );
    exchange.assert_book("BTC-USD", &[], &[]);
    exchange.assert_balance("alice", "BTC", "10", "0");
    exchange.assert_balance("alice", "USD", "1000", "0");
}

#[test]
fn cancel_both_keeps_earlier_fills_and_leaves_later_orders() {
    let mut exchange = funded();
    exchange.ok(sell("bob", "s1", "100", "1"));
    exchange.ok(sell("alice", "a1", "100", "1"));
    exchange.ok(sell("carol", "s1", "100", "1"));
    let fed = exchange.feed(buy("alice", "a2", "100", "2").stp("cancel_both"));
    assert_events_then_any_order(
        &fed,
        &[
            r#"{"ev":"accepted","account":"alice","id":"a2"}"#,
            r#"{"ev":"trade","symbol":"BTC-USD","price":"100","qty":"1","taker_side":"buy","maker_account":"bob","maker_id":"s1","taker_account":"alice","taker_id":"a2","maker_fee":"0","taker_fee":"0"}"#,
            r#"{"ev":"done","account":"bob","id":"s1","reason":"filled","filled":"1"}"#,
        ],
        &[
            r#"{"ev":"done","account":"alice","id":"a1","reason":"stp","filled":"0"}"#,
            r#"{"ev":"done","account":"alice","id":"a2","reason":"stp","filled":"1"}"#,
        ],
    );
    exchange.assert_book("BTC-USD", &[], &[("carol", "s1", "100", "1")]);
    exchange.assert_balance("alice", "USD", "900", "0");
    exchange.assert_balance("alice", "BTC", "11", "0");
}

#[test]
fn stp_none_trades_with_the_accounts_own_order() {
    let mut exchange = funded();
    exchange.ok(sell("alice", "a1", "100", "1"));
    let fed = exchange.feed(buy("alice", "a2", "100", "1").stp("none"));
    assert_events_then_any_order(
        &fed,
        &[
            r#"{"ev":"accepted","account":"alice","id":"a2"}"#,
            r#"{"ev":"trade","symbol":"BTC-USD","price":"100","qty":"1","taker_side":"buy","maker_account":"alice","maker_id":"a1","taker_account":"alice","taker_id":"a2","maker_fee":"0","taker_fee":"0"}"#,
        ],
        &[
            r#"{"ev":"done","account":"alice","id":"a1","reason":"filled","filled":"1"}"#,
            r#"{"ev":"done","account":"alice","id":"a2","reason":"filled","filled":"1"}"#,
        ],
    );
    exchange.assert_book("BTC-USD", &[], &[]);
    exchange.assert_balance("alice", "BTC", "10", "0");
    exchange.assert_balance("alice", "USD", "1000", "0");
}

#[test]
fn stp_none_self_trade_pays_both_fees() {
    let mut exchange = Exchange::standard();
    exchange.ok(deposit("alice", "USD", "10"));
    exchange.ok(deposit("alice", "ETH", "1"));
    exchange.ok(sell("alice", "e1", "10.00", "1").on("ETH-USD"));
    let fed = exchange.feed(buy("alice", "e2", "10.00", "1").on("ETH-USD").stp("none"));
    // maker (seller) receives 10.00 USD: ceil(10.00 * 10 / 10000) = 0.01 USD
    // taker (buyer) receives 1 ETH: ceil(1 * 25 / 10000) = ceil(0.0025) = 0.003 ETH
    assert_events_then_any_order(
        &fed,
        &[
            r#"{"ev":"accepted","account":"alice","id":"e2"}"#,
            r#"{"ev":"trade","symbol":"ETH-USD","price":"10","qty":"1","taker_side":"buy","maker_account":"alice","maker_id":"e1","taker_account":"alice","taker_id":"e2","maker_fee":"0.01","taker_fee":"0.003"}"#,
        ],
        &[
            r#"{"ev":"done","account":"alice","id":"e1","reason":"filled","filled":"1"}"#,
            r#"{"ev":"done","account":"alice","id":"e2","reason":"filled","filled":"1"}"#,
        ],
    );
    exchange.assert_balance("alice", "USD", "9.99", "0");
    exchange.assert_balance("alice", "ETH", "0.997", "0");
    exchange.assert_fee("USD", "0.01");
    exchange.assert_fee("ETH", "0.003");
}

#[test]
fn only_the_takers_stp_mode_applies() {
    let mut exchange = funded();
    exchange.ok(sell("alice", "a1", "100", "1").stp("cancel_maker"));
    let fed = exchange.feed(buy("alice", "a2", "100", "1"));
    assert_events(
        &fed,
        &[
            r#"{"ev":"accepted","account":"alice","id":"a2"}"#,
            r#"{"ev":"done","account":"alice","id":"a2","reason":"stp","filled":"0"}"#,
        ],
    );
    exchange.assert_book("BTC-USD", &[], &[("alice", "a1", "100", "1")]);
}

#[test]
fn stp_does_not_apply_between_different_accounts() {
    let mut exchange = funded();
    exchange.ok(sell("bob", "s1", "100", "1"));
    let fed = exchange.feed(buy("alice", "a1", "100", "1").stp("cancel_both"));
    assert_events_then_any_order(
        &fed,
        &[
            r#"{"ev":"accepted","account":"alice","id":"a1"}"#,
            r#"{"ev":"trade","symbol":"BTC-USD","price":"100","qty":"1","taker_side":"buy","maker_account":"bob","maker_id":"s1","taker_account":"alice","taker_id":"a1","maker_fee":"0","taker_fee":"0"}"#,
        ],
        &[
            r#"{"ev":"done","account":"bob","id":"s1","reason":"filled","filled":"1"}"#,
            r#"{"ev":"done","account":"alice","id":"a1","reason":"filled","filled":"1"}"#,
        ],
    );
}

#[test]
fn stp_applies_to_market_orders() {
    let mut exchange = funded();
    exchange.ok(sell("alice", "a1", "100", "1"));
    exchange.ok(sell("bob", "s1", "101", "1"));
    // P = 100, protection 110; holds 110
    let fed = exchange.feed(market_buy("alice", "m1", "1").stp("cancel_maker"));
    assert_events_then_any_order(
        &fed,
        &[
            r#"{"ev":"accepted","account":"alice","id":"m1"}"#,
            r#"{"ev":"done","account":"alice","id":"a1","reason":"stp","filled":"0"}"#,
            r#"{"ev":"trade","symbol":"BTC-USD","price":"101","qty":"1","taker_side":"buy","maker_account":"bob","maker_id":"s1","taker_account":"alice","taker_id":"m1","maker_fee":"0","taker_fee":"0"}"#,
        ],
        &[
            r#"{"ev":"done","account":"bob","id":"s1","reason":"filled","filled":"1"}"#,
            r#"{"ev":"done","account":"alice","id":"m1","reason":"filled","filled":"1"}"#,
        ],
    );
    exchange.assert_balance("alice", "USD", "899", "0");
    exchange.assert_balance("alice", "BTC", "11", "0");
}

#[test]
fn stp_applies_to_a_sell_taker() {
    let mut exchange = funded();
    exchange.ok(buy("alice", "a1", "100", "1"));
    exchange.ok(buy("bob", "b1", "99", "1"));
    let fed = exchange.feed(sell("alice", "a2", "99", "1").stp("cancel_maker"));
    assert_events_then_any_order(
        &fed,
        &[
            r#"{"ev":"accepted","account":"alice","id":"a2"}"#,
            r#"{"ev":"done","account":"alice","id":"a1","reason":"stp","filled":"0"}"#,
            r#"{"ev":"trade","symbol":"BTC-USD","price":"99","qty":"1","taker_side":"sell","maker_account":"bob","maker_id":"b1","taker_account":"alice","taker_id":"a2","maker_fee":"0","taker_fee":"0"}"#,
        ],
        &[
            r#"{"ev":"done","account":"bob","id":"b1","reason":"filled","filled":"1"}"#,
            r#"{"ev":"done","account":"alice","id":"a2","reason":"filled","filled":"1"}"#,
        ],
    );
    exchange.assert_balance("alice", "USD", "1099", "0");
    exchange.assert_balance("alice", "BTC", "9", "0");
}
