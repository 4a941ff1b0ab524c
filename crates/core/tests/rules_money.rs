//! Money rules of the replay format: holds, what a fill takes from and gives back to
//! each side, releases when an order finishes, fees (maker vs taker rate, paid in the
//! asset received, rounded up per trade) and the fee balance. The harness checks
//! conservation after every line; the last test walks a mixed session explicitly.
//!
//! BTC-USD (see `support`): tick 1, lot 0.01, no fees. ETH-USD: tick 0.01, lot 1,
//! qty 1..=1000, maker 10 bps, taker 25 bps; ETH has 3 decimals, USD 2.

mod support;

use support::*;

// ---------------------------------------------------------------- holds

#[test]
fn resting_buy_holds_price_times_qty_of_quote() {
    let mut exchange = Exchange::standard();
    exchange.ok(deposit("alice", "USD", "1000"));
    exchange.ok(buy("alice", "o1", "100", "2.5"));
    exchange.assert_balance("alice", "USD", "750", "250");
}

#[test]
fn resting_sell_holds_its_qty_of_base() {
    let mut exchange = Exchange::standard();
    exchange.ok(deposit("alice", "BTC", "3"));
    exchange.ok(sell("alice", "o1", "100", "2.5"));
    exchange.assert_balance("alice", "BTC", "0.5", "2.5");
    exchange.assert_balance("alice", "USD", "0", "0");
}

#[test]
fn buyer_filled_below_its_limit_gets_the_difference_back() {
    let mut exchange = Exchange::standard();
    exchange.ok(deposit("alice", "USD", "1000"));
    exchange.ok(deposit("bob", "BTC", "2"));
    exchange.ok(sell("bob", "s1", "100", "2"));
    exchange.ok(buy("alice", "o1", "105", "2")); // holds 210, pays 200
    exchange.assert_balance("alice", "USD", "800", "0");
    exchange.assert_balance("alice", "BTC", "2", "0");
    exchange.assert_balance("bob", "USD", "200", "0");
    exchange.assert_balance("bob", "BTC", "0", "0");
}

#[test]
fn fill_lowers_the_buy_hold_by_limit_times_qty() {
    let mut exchange = Exchange::standard();
    exchange.ok(deposit("alice", "USD", "1000"));
    exchange.ok(deposit("bob", "BTC", "1"));
    exchange.ok(sell("bob", "s1", "100", "1"));
    // holds 105 * 3 = 315; the fill of 1 at 100 takes 105 off the hold, 5 of it back
    exchange.ok(buy("alice", "o1", "105", "3"));
    exchange.assert_balance("alice", "USD", "690", "210");
    exchange.assert_book("BTC-USD", &[("alice", "o1", "105", "2")], &[]);
}

#[test]
fn fill_lowers_the_sell_hold_by_the_filled_qty() {
    let mut exchange = Exchange::standard();
    exchange.ok(deposit("alice", "BTC", "3"));
    exchange.ok(deposit("bob", "USD", "1000"));
    exchange.ok(sell("alice", "o1", "100", "3"));
    exchange.ok(buy("bob", "b1", "100", "1"));
    exchange.assert_balance("alice", "BTC", "0", "2");
    exchange.assert_balance("alice", "USD", "100", "0");
}

#[test]
fn expiring_ioc_releases_what_it_still_holds() {
    let mut exchange = Exchange::standard();
    exchange.ok(deposit("alice", "USD", "1000"));
    exchange.ok(deposit("bob", "BTC", "1"));
    exchange.ok(sell("bob", "s1", "100", "1"));
    exchange.ok(buy("alice", "o1", "100", "2").tif("ioc"));
    exchange.assert_balance("alice", "USD", "900", "0");
    exchange.assert_balance("alice", "BTC", "1", "0");
}

#[test]
fn cancel_releases_what_the_order_still_holds() {
    let mut exchange = Exchange::standard();
    exchange.ok(deposit("alice", "BTC", "3"));
    exchange.ok(sell("alice", "o1", "100", "2"));
    exchange.ok(cancel("alice", "o1"));
    exchange.assert_balance("alice", "BTC", "3", "0");
}

#[test]
fn received_funds_can_be_used_at_once() {
    let mut exchange = Exchange::standard();
    exchange.ok(deposit("alice", "BTC", "1"));
    exchange.ok(deposit("bob", "USD", "100"));
    exchange.ok(buy("bob", "b1", "100", "1"));
    exchange.ok(sell("alice", "o1", "100", "1"));
    // alice came into USD only through the trade
    let fed = exchange.feed(withdraw("alice", "USD", "100"));
    assert_events(&fed, &[r#"{"ev":"accepted"}"#]);
    exchange.assert_balance("alice", "USD", "0", "0");
}

// ---------------------------------------------------------------- fees

#[test]
fn zero_fee_instrument_charges_nothing() {
    let mut exchange = Exchange::standard();
    exchange.ok(deposit("alice", "USD", "1000"));
    exchange.ok(deposit("bob", "BTC", "1"));
    exchange.ok(sell("bob", "s1", "100", "1"));
    exchange.ok(buy("alice", "o1", "100", "1"));
    exchange.assert_fee("USD", "0");
    exchange.assert_fee("BTC", "0");
    exchange.assert_balance("alice", "BTC", "1", "0");
    exchange.assert_balance("bob", "USD", "100", "0");
}

#[test]
fn buying_taker_pays_the_taker_rate_in_base_and_selling_maker_the_maker_rate_in_quote() {
    let mut exchange = Exchange::standard();
    exchange.ok(deposit("alice", "ETH", "3"));
    exchange.ok(deposit("bob", "USD", "100"));
    exchange.ok(sell("alice", "a1", "10.01", "3").on("ETH-USD"));
    let fed = exchange.feed(buy("bob", "b1", "10.01", "3").on("ETH-USD"));
    // alice, maker, receives 30.03 USD: ceil(30.03 * 10 / 10000) = ceil(0.03003) = 0.04
    // bob, taker, receives 3 ETH: ceil(3 * 25 / 10000) = ceil(0.0075) = 0.008
    assert_events_then_any_order(
        &fed,
        &[
            r#"{"ev":"accepted","account":"bob","id":"b1"}"#,
            r#"{"ev":"trade","symbol":"ETH-USD","price":"10.01","qty":"3","taker_side":"buy","maker_account":"alice","maker_id":"a1","taker_account":"bob","taker_id":"b1","maker_fee":"0.04","taker_fee":"0.008"}"#,
        ],
        &[
            r#"{"ev":"done","account":"alice","id":"a1","reason":"filled","filled":"3"}"#,
            r#"{"ev":"done","account":"bob","id":"b1","reason":"filled","filled":"3"}"#,
        ],
    );
    exchange.assert_balance("alice", "USD", "29.99", "0");
    exchange.assert_balance("alice", "ETH", "0", "0");
    exchange.assert_balance("bob", "USD", "69.97", "0");
    exchange.assert_balance("bob", "ETH", "2.992", "0");
    exchange.assert_fee("USD", "0.04");
    exchange.assert_fee("ETH", "0.008");
}

#[test]
fn selling_taker_pays_the_taker_rate_in_quote_and_buying_maker_the_maker_rate_in_base() {
    let mut exchange = Exchange::standard();
    exchange.ok(deposit("alice", "ETH", "3"));
    exchange.ok(deposit("bob", "USD", "100"));
    exchange.ok(buy("bob", "b1", "10.01", "3").on("ETH-USD"));
    let fed = exchange.feed(sell("alice", "a1", "10.00", "3").on("ETH-USD"));
    // trade at the maker's 10.01; alice, taker, receives 30.03 USD:
    //   ceil(30.03 * 25 / 10000) = ceil(0.075075) = 0.08
    // bob, maker, receives 3 ETH: 3 * 10 / 10000 = 0.003 exactly
    assert_events_then_any_order(
        &fed,
        &[
            r#"{"ev":"accepted","account":"alice","id":"a1"}"#,
            r#"{"ev":"trade","symbol":"ETH-USD","price":"10.01","qty":"3","taker_side":"sell","maker_account":"bob","maker_id":"b1","taker_account":"alice","taker_id":"a1","maker_fee":"0.003","taker_fee":"0.08"}"#,
        ],
        &[
            r#"{"ev":"done","account":"bob","id":"b1","reason":"filled","filled":"3"}"#,
            r#"{"ev":"done","account":"alice","id":"a1","reason":"filled","filled":"3"}"#,
        ],
    );
    exchange.assert_balance("alice", "USD", "29.95", "0");
    exchange.assert_balance("alice", "ETH", "0", "0");
    exchange.assert_balance("bob", "USD", "69.97", "0");
    exchange.assert_balance("bob", "ETH", "2.997", "0");
    exchange.assert_fee("USD", "0.08");
    exchange.assert_fee("ETH", "0.003");
}

#[test]
fn fee_rounds_up_to_at_least_one_smallest_unit() {
    let mut exchange = Exchange::standard();
    exchange.ok(deposit("alice", "ETH", "1"));
    exchange.ok(deposit("bob", "USD", "1"));
    exchange.ok(sell("alice", "a1", "0.01", "1").on("ETH-USD"));
    let fed = exchange.feed(buy("bob", "b1", "0.01", "1").on("ETH-USD"));
    // alice receives 0.01 USD: ceil(0.01 * 10 / 10000) = ceil(0.00001) = 0.01
    // bob receives 1 ETH: ceil(1 * 25 / 10000) = ceil(0.0025) = 0.003
    assert_events_then_any_order(
        &fed,
        &[
            r#"{"ev":"accepted","account":"bob","id":"b1"}"#,
            r#"{"ev":"trade","symbol":"ETH-USD","price":"0.01","qty":"1","taker_side":"buy","maker_account":"alice","maker_id":"a1","taker_account":"bob","taker_id":"b1","maker_fee":"0.01","taker_fee":"0.003"}"#,
        ],
        &[
            r#"{"ev":"done","account":"alice","id":"a1","reason":"filled","filled":"1"}"#,
            r#"{"ev":"done","account":"bob","id":"b1","reason":"filled","filled":"1"}"#,
        ],
    );
    exchange.assert_balance("alice", "USD", "0", "0");
    exchange.assert_balance("bob", "USD", "0.99", "0");
    exchange.assert_balance("bob", "ETH", "0.997", "0");
}

#[test]
fn exact_fee_is_not_rounded_further() {
    let mut exchange = Exchange::standard();
    exchange.ok(deposit("alice", "ETH", "4"));
    exchange.ok(deposit("bob", "USD", "40"));
    exchange.ok(sell("alice", "a1", "10.00", "4").on("ETH-USD"));
    let fed = exchange.feed(buy("bob", "b1", "10.00", "4").on("ETH-USD"));
    // alice receives 40.00 USD: 40 * 10 / 10000 = 0.04; bob receives 4 ETH: 4 * 25 / 10000 = 0.01
    assert_events_then_any_order(
        &fed,
        &[
            r#"{"ev":"accepted","account":"bob","id":"b1"}"#,
            r#"{"ev":"trade","symbol":"ETH-USD","price":"10","qty":"4","taker_side":"buy","maker_account":"alice","maker_id":"a1","taker_account":"bob","taker_id":"b1","maker_fee":"0.04","taker_fee":"0.01"}"#,
        ],
        &[
            r#"{"ev":"done","account":"alice","id":"a1","reason":"filled","filled":"4"}"#,
            r#"{"ev":"done","account":"bob","id":"b1","reason":"filled","filled":"4"}"#,
        ],
    );
    exchange.assert_balance("alice", "USD", "39.96", "0");
    exchange.assert_balance("bob", "ETH", "3.99", "0");
}

#[test]
fn fees_are_rounded_per_trade_and_add_up_in_the_fee_balance() {
    let mut exchange = Exchange::standard();
    exchange.ok(deposit("bob", "ETH", "1"));
    exchange.ok(deposit("carol", "ETH", "1"));
    exchange.ok(deposit("alice", "USD", "30"));
    exchange.ok(sell("bob", "s1", "10.00", "1").on("ETH-USD"));
    exchange.ok(sell("carol", "s1", "10.01", "1").on("ETH-USD"));
    let fed = exchange.feed(buy("alice", "a1", "10.01", "2").on("ETH-USD"));
    // bob receives 10.00: 0.01; carol receives 10.01: ceil(0.01001) = 0.02;
    // alice receives 1 ETH twice: 0.003 each, not ceil(2 * 0.0025) = 0.005 once
    assert_events_then_any_order(
        &fed,
        &[
            r#"{"ev":"accepted","account":"alice","id":"a1"}"#,
            r#"{"ev":"trade","symbol":"ETH-USD","price":"10","qty":"1","taker_side":"buy","maker_account":"bob","maker_id":"s1","taker_account":"alice","taker_id":"a1","maker_fee":"0.01","taker_fee":"0.003"}"#,
            r#"{"ev":"done","account":"bob","id":"s1","reason":"filled","filled":"1"}"#,
            r#"{"ev":"trade","symbol":"ETH-USD","price":"10.01","qty":"1","taker_side":"buy","maker_account":"carol","maker_id":"s1","taker_account":"alice","taker_id":"a1","maker_fee":"0.02","taker_fee":"0.003"}"#,
        ],
        &[
            r#"{"ev":"done","account":"carol","id":"s1","reason":"filled","filled":"1"}"#,
            r#"{"ev":"done","account":"alice","id":"a1","reason":"filled","filled":"2"}"#,
        ],
    );
    // alice held 20.02, paid 10.00 + 10.01, got 0.01 back
    exchange.assert_balance("alice", "USD", "9.99", "0");
    exchange.assert_balance("alice", "ETH", "1.994", "0");
    exchange.assert_balance("bob", "USD", "9.99", "0");
    exchange.assert_balance("carol", "USD", "9.99", "0");
    exchange.assert_fee("USD", "0.03");
    exchange.assert_fee("ETH", "0.006");
}

#[test]
fn resting_buy_on_a_fee_instrument_holds_only_price_times_qty() {
    let mut exchange = Exchange::standard();
    exchange.ok(deposit("alice", "USD", "10"));
    // the buyer's fee is taken from the ETH received, so 10.00 * 1 is enough
    let fed = exchange.feed(buy("alice", "a1", "10.00", "1").on("ETH-USD"));
    assert_events(&fed, &[r#"{"ev":"accepted","account":"alice","id":"a1"}"#]);
    exchange.assert_balance("alice", "USD", "0", "10");
}

// ---------------------------------------------------------------- conservation

#[test]
fn every_asset_is_conserved_through_a_mixed_session() {
    let mut exchange = Exchange::standard();
    exchange.ok(deposit("alice", "USD", "500"));
    exchange.ok(deposit("alice", "ETH", "10"));
    exchange.ok(deposit("bob", "USD", "300"));
    exchange.ok(deposit("bob", "ETH", "5"));
    exchange.ok(sell("alice", "a1", "10.05", "4").on("ETH-USD"));
    exchange.ok(sell("alice", "a2", "10.10", "3").on("ETH-USD"));
    // 4 at 10.05: alice pays ceil(0.0402) = 0.05 USD, bob 0.01 ETH
    // 1 at 10.10: alice pays ceil(0.0101) = 0.02 USD, bob ceil(0.0025) = 0.003 ETH
    exchange.ok(buy("bob", "b1", "10.10", "5").on("ETH-USD"));
    exchange.ok(buy("bob", "b2", "9.50", "7").on("ETH-USD"));
    // a2's remaining 2 sell to b2 at 9.50: alice, taker, pays ceil(0.0475) = 0.05 USD;
    // bob, maker, 0.002 ETH
    exchange.ok(amend_price("alice", "a2", "9.50"));
    exchange.ok(withdraw("alice", "USD", "100"));
    exchange.ok(cancel("bob", "b2"));

    // USD: 500 + 300 - 100 = 700 = 469.18 + 230.70 + 0.12
    exchange.assert_balance("alice", "USD", "469.18", "0");
    exchange.assert_balance("bob", "USD", "230.70", "0");
    exchange.assert_fee("USD", "0.12");
    // ETH: 10 + 5 = 15 = 3 + 11.985 + 0.015
    exchange.assert_balance("alice", "ETH", "3", "0");
    exchange.assert_balance("bob", "ETH", "11.985", "0");
    exchange.assert_fee("ETH", "0.015");
    exchange.assert_conserved();
}
