//! Rules of `orders.md`'s "Market buys by amount to spend" (with its rejections and
//! fine print): an order naming `quote_qty` in place of `qty`. Each rejection case in
//! the spec's order, the hold of `quote_qty` and its return, the walk of the asks up to
//! the protection price, lot flooring, each stop condition in the spec's order,
//! self-trade prevention, fees, and what the command looks like in the replay format.
//!
//! The standard instruments (see `support`): BTC-USD has tick 1, lot 0.01,
//! qty 0.1..=100, no fees and a 10% market band; ETH-USD tick 0.01, lot 1, maker 10 bps,
//! taker 25 bps. `check_invariants` (holds equal what open orders need, money
//! conserved) runs after every line.

mod support;

use support::*;

fn rejected(account: &str, id: &str, reason: &str) -> String {
    format!(r#"{{"ev":"rejected","reason":"{reason}","account":"{account}","id":"{id}"}}"#)
}

fn accepted(account: &str, id: &str) -> String {
    format!(r#"{{"ev":"accepted","account":"{account}","id":"{id}"}}"#)
}

/// A trade on BTC-USD of alice's order `taker_id` with bob's `maker_id`, no fees.
fn bought(maker_id: &str, taker_id: &str, price: &str, qty: &str) -> String {
    format!(
        r#"{{"ev":"trade","symbol":"BTC-USD","price":"{price}","qty":"{qty}","taker_side":"buy","maker_account":"bob","maker_id":"{maker_id}","taker_account":"alice","taker_id":"{taker_id}","maker_fee":"0","taker_fee":"0"}}"#
    )
}

fn done(account: &str, id: &str, reason: &str, filled: &str) -> String {
    format!(
        r#"{{"ev":"done","account":"{account}","id":"{id}","reason":"{reason}","filled":"{filled}"}}"#
    )
}

fn assert_lines(fed: &Fed, expected: &[String]) {
    let expected: Vec<&str> = expected.iter().map(String::as_str).collect();
    assert_events(fed, &expected);
}

/// The standard exchange, bob selling `asks` (id, price, qty) on BTC-USD from 1000 BTC,
/// and alice with `usd` USD.
fn with_asks(asks: &[(&str, &str, &str)], usd: &str) -> Exchange {
    let mut exchange = Exchange::standard();
    exchange.ok(deposit("bob", "BTC", "1000"));
    for (id, price, qty) in asks {
        exchange.ok(sell("bob", id, price, qty));
    }
    exchange.ok(deposit("alice", "USD", usd));
    exchange
}

// ---------------------------------------------------------------- rejections

#[test]
fn unknown_symbol_and_duplicate_id_come_first() {
    let mut exchange = with_asks(&[("s1", "100", "1")], "1000");
    let fed = exchange.feed(spend("alice", "m1", "10").on("DOGE-USD"));
    assert_lines(&fed, &[rejected("alice", "m1", "unknown_symbol")]);
    exchange.ok(buy("alice", "b1", "90", "1"));
    let fed = exchange.feed(spend("alice", "b1", "10"));
    assert_lines(&fed, &[rejected("alice", "b1", "duplicate_id")]);
}

#[test]
fn quote_qty_with_qty_is_rejected_invalid_order() {
    let mut exchange = with_asks(&[("s1", "100", "1")], "1000");
    let fed = exchange.feed(spend("alice", "m1", "10").with("qty", "0.1"));
    assert_lines(&fed, &[rejected("alice", "m1", "invalid_order")]);
    exchange.assert_balance("alice", "USD", "1000", "0");
}

#[test]
fn with_both_qty_and_quote_qty_qty_is_checked_first() {
    let mut exchange = with_asks(&[("s1", "100", "1")], "1000");
    for qty in ["0.001", "0", "100.01"] {
        let fed = exchange.feed(spend("alice", "m1", "10").with("qty", qty));
        assert_lines(&fed, &[rejected("alice", "m1", "invalid_qty")]);
    }
}

#[test]
fn quote_qty_on_a_sell_is_rejected_invalid_order_whatever_its_value() {
    let mut exchange = Exchange::funded("1000");
    exchange.ok(buy("bob", "b1", "100", "1"));
    for quote_qty in ["10", "0", "-1", "0.001"] {
        let order = market_sell("alice", "m1", "1").without("qty").with("quote_qty", quote_qty);
        let fed = exchange.feed(order);
        assert_lines(&fed, &[rejected("alice", "m1", "invalid_order")]);
    }
}

#[test]
fn quote_qty_on_a_limit_order_is_rejected_invalid_order_after_its_price() {
    let mut exchange = with_asks(&[("s1", "100", "1")], "1000");
    let limit = |price: &str| buy("alice", "b1", price, "1").without("qty").with("quote_qty", "10");
    let fed = exchange.feed(limit("100"));
    assert_lines(&fed, &[rejected("alice", "b1", "invalid_order")]);
    let fed = exchange.feed(limit("100.5"));
    assert_lines(&fed, &[rejected("alice", "b1", "invalid_price")]);
    // Before `would_cross` too.
    let fed = exchange.feed(limit("100").post_only());
    assert_lines(&fed, &[rejected("alice", "b1", "invalid_order")]);
}

#[test]
fn quote_qty_with_fok_is_rejected_invalid_order() {
    let mut exchange = with_asks(&[("s1", "100", "1")], "1000");
    let fed = exchange.feed(spend("alice", "m1", "10").tif("fok"));
    assert_lines(&fed, &[rejected("alice", "m1", "invalid_order")]);
    // gtc, ioc and (on spot) gfd are taken as ioc, as for any market order.
    for tif in ["gtc", "ioc", "gfd"] {
        let fed = exchange.feed(spend("alice", tif, "1").tif(tif));
        assert_lines(
            &fed,
            &[
                accepted("alice", tif),
                bought("s1", tif, "100", "0.01"),
                done("alice", tif, "filled", "0.01"),
            ],
        );
    }
}

#[test]
fn quote_qty_on_a_futures_contract_is_rejected_invalid_order_after_the_offset() {
    let mut exchange = Exchange::standard();
    exchange.ok(asset("CNY", 2));
    exchange.ok(Cmd::new("future")
        .with("symbol", "rb")
        .with("settle", "CNY")
        .with("tick", "1")
        .with("lot", "1")
        .with("min_qty", "1")
        .with("max_qty", "100")
        .with("multiplier", "10")
        .with("margin", "100")
        .with("maker_fee", "1")
        .with("taker_fee", "3")
        .with("market_band_bps", 500));
    exchange.ok(deposit("alice", "CNY", "10000"));
    exchange.ok(deposit("bob", "CNY", "10000"));
    exchange.ok(sell("bob", "s1", "100", "1").on("rb"));
    let fed = exchange.feed(spend("alice", "m1", "500").on("rb"));
    assert_lines(&fed, &[rejected("alice", "m1", "invalid_order")]);
    let fed = exchange.feed(spend("alice", "m1", "500").on("rb").with("offset", "close_today"));
    assert_lines(&fed, &[rejected("alice", "m1", "invalid_offset")]);
}

#[test]
fn quote_qty_not_positive_is_rejected_invalid_qty() {
    let mut exchange = with_asks(&[("s1", "100", "1")], "1000");
    for quote_qty in ["0", "0.00", "-5"] {
        let fed = exchange.feed(spend("alice", "m1", quote_qty));
        assert_lines(&fed, &[rejected("alice", "m1", "invalid_qty")]);
    }
}

#[test]
fn quote_qty_with_more_decimals_than_the_quote_asset_is_rejected_invalid_qty() {
    let mut exchange = with_asks(&[("s1", "100", "1")], "1000");
    let fed = exchange.feed(spend("alice", "m1", "10.001"));
    assert_lines(&fed, &[rejected("alice", "m1", "invalid_qty")]);
    // Trailing zeros are not decimal places.
    let fed = exchange.feed(spend("alice", "m1", "10.0100"));
    assert_eq!(fed.events[0]["ev"], "accepted");
}

#[test]
fn quote_qty_with_no_ask_is_rejected_no_liquidity_before_insufficient_funds() {
    let mut exchange = Exchange::standard();
    // A bid rests: only the side the buy needs is empty.
    exchange.ok(deposit("bob", "USD", "1000"));
    exchange.ok(buy("bob", "b1", "100", "1"));
    let fed = exchange.feed(spend("carol", "m1", "10"));
    assert_lines(&fed, &[rejected("carol", "m1", "no_liquidity")]);
}

#[test]
fn quote_qty_beyond_available_is_rejected_insufficient_funds() {
    let mut exchange = with_asks(&[("s1", "100", "1")], "50");
    let fed = exchange.feed(spend("alice", "m1", "50.01"));
    assert_lines(&fed, &[rejected("alice", "m1", "insufficient_funds")]);
    // An amount beyond every range is more than anyone has; an account with nothing
    // has nothing available.
    let fed = exchange.feed(spend("alice", "m1", &format!("1{}", "0".repeat(40))));
    assert_lines(&fed, &[rejected("alice", "m1", "insufficient_funds")]);
    let fed = exchange.feed(spend("nobody", "m1", "1"));
    assert_lines(&fed, &[rejected("nobody", "m1", "insufficient_funds")]);
    let fed = exchange.feed(spend("alice", "m1", "50"));
    assert_eq!(fed.events[0]["ev"], "accepted");
}

#[test]
fn an_order_naming_neither_qty_nor_quote_qty_is_malformed() {
    let mut exchange = with_asks(&[("s1", "100", "1")], "1000");
    let fed = exchange.feed(market_buy("alice", "m1", "1").without("qty"));
    assert_events(&fed, &[r#"{"ev":"rejected","reason":"malformed"}"#]);
}

#[test]
fn a_mistyped_quote_qty_is_malformed_even_where_it_is_not_allowed() {
    let mut exchange = Exchange::funded("1000");
    for order in [
        spend("alice", "m1", "10").with("quote_qty", 10),
        sell("alice", "s1", "100", "1").with("quote_qty", serde_json::Value::Null),
    ] {
        let fed = exchange.feed(order);
        assert_events(&fed, &[r#"{"ev":"rejected","reason":"malformed"}"#]);
    }
}

// ---------------------------------------------------------------- matching

#[test]
fn it_buys_the_largest_lot_multiple_that_quote_qty_pays_for() {
    let mut exchange = with_asks(&[("s1", "100", "1")], "1000");
    // 55.55 / 100 = 0.5555: 0.55 (a lot is 0.01) for 55.
    let fed = exchange.feed(spend("alice", "m1", "55.55"));
    assert_lines(
        &fed,
        &[
            accepted("alice", "m1"),
            bought("s1", "m1", "100", "0.55"),
            done("alice", "m1", "filled", "0.55"),
        ],
    );
    exchange.assert_balance("alice", "USD", "945", "0");
    exchange.assert_balance("alice", "BTC", "0.55", "0");
    exchange.assert_book("BTC-USD", &[], &[("bob", "s1", "100", "0.45")]);
}

#[test]
fn min_qty_and_max_qty_do_not_apply() {
    let mut exchange = with_asks(&[("s1", "1", "100"), ("s2", "1", "60")], "1000");
    // 0.05 is below min_qty 0.1.
    let fed = exchange.feed(spend("alice", "m1", "0.05"));
    assert_lines(
        &fed,
        &[
            accepted("alice", "m1"),
            bought("s1", "m1", "1", "0.05"),
            done("alice", "m1", "filled", "0.05"),
        ],
    );
    // 159.95 is above max_qty 100.
    let fed = exchange.feed(spend("alice", "m2", "159.95"));
    assert_lines(
        &fed,
        &[
            accepted("alice", "m2"),
            bought("s1", "m2", "1", "99.95"),
            done("bob", "s1", "filled", "100"),
            bought("s2", "m2", "1", "60"),
            done("bob", "s2", "filled", "60"),
            done("alice", "m2", "filled", "159.95"),
        ],
    );
}

#[test]
fn it_walks_the_asks_and_is_filled_when_nothing_is_left() {
    let mut exchange = with_asks(&[("s1", "100", "0.3"), ("s2", "101", "0.5")], "1000");
    // 30 for s1, then 50.5 for all of s2: 80.5 spent, nothing left, no ask left.
    let fed = exchange.feed(spend("alice", "m1", "80.5"));
    assert_lines(
        &fed,
        &[
            accepted("alice", "m1"),
            bought("s1", "m1", "100", "0.3"),
            done("bob", "s1", "filled", "0.3"),
            bought("s2", "m1", "101", "0.5"),
            done("bob", "s2", "filled", "0.5"),
            done("alice", "m1", "filled", "0.8"),
        ],
    );
    exchange.assert_balance("alice", "USD", "919.5", "0");
    exchange.assert_balance("bob", "USD", "80.5", "0");
}

#[test]
fn with_money_left_and_no_ask_left_it_expires() {
    let mut exchange = with_asks(&[("s1", "100", "0.3")], "1000");
    let fed = exchange.feed(spend("alice", "m1", "500"));
    assert_lines(
        &fed,
        &[
            accepted("alice", "m1"),
            bought("s1", "m1", "100", "0.3"),
            done("bob", "s1", "filled", "0.3"),
            done("alice", "m1", "expired", "0.3"),
        ],
    );
    // The hold of 500 came back but for the 30 spent.
    exchange.assert_balance("alice", "USD", "970", "0");
}

#[test]
fn it_stops_at_the_protection_price_and_expires() {
    // protection = ceil(100 * 1.10) = 110: s3 at 111 is out of reach.
    let asks = [("s1", "100", "0.1"), ("s2", "110", "0.1"), ("s3", "111", "0.1")];
    let mut exchange = with_asks(&asks, "1000");
    let fed = exchange.feed(spend("alice", "m1", "100"));
    assert_lines(
        &fed,
        &[
            accepted("alice", "m1"),
            bought("s1", "m1", "100", "0.1"),
            done("bob", "s1", "filled", "0.1"),
            bought("s2", "m1", "110", "0.1"),
            done("bob", "s2", "filled", "0.1"),
            done("alice", "m1", "expired", "0.2"),
        ],
    );
    exchange.assert_balance("alice", "USD", "979", "0");
    exchange.assert_book("BTC-USD", &[], &[("bob", "s3", "111", "0.1")]);
}

#[test]
fn when_what_is_left_buys_less_than_a_lot_it_is_filled_if_it_bought_anything() {
    let mut exchange = with_asks(&[("s1", "100", "0.3"), ("s2", "101", "0.5")], "1000");
    // 30 for s1, 0.19 of s2 for 19.19; 0.81 left buys less than a lot (1.01) at 101.
    let fed = exchange.feed(spend("alice", "m1", "50"));
    assert_lines(
        &fed,
        &[
            accepted("alice", "m1"),
            bought("s1", "m1", "100", "0.3"),
            done("bob", "s1", "filled", "0.3"),
            bought("s2", "m1", "101", "0.19"),
            done("alice", "m1", "filled", "0.49"),
        ],
    );
    exchange.assert_balance("alice", "USD", "950.81", "0");
    exchange.assert_book("BTC-USD", &[], &[("bob", "s2", "101", "0.31")]);
}

#[test]
fn when_quote_qty_buys_less_than_a_lot_it_expires_with_nothing_filled() {
    let mut exchange = with_asks(&[("s1", "100", "1")], "1000");
    let fed = exchange.feed(spend("alice", "m1", "0.99"));
    assert_lines(&fed, &[accepted("alice", "m1"), done("alice", "m1", "expired", "0")]);
    exchange.assert_balance("alice", "USD", "1000", "0");
    exchange.assert_book("BTC-USD", &[], &[("bob", "s1", "100", "1")]);
}

/// USDT with 6 decimals on tick 0.01 and lot 0.001: a notional unit (0.00001 USDT) is ten
/// of the quote's units, so an amount can have a remainder no fill can ever spend.
fn with_fine_quote() -> Exchange {
    let mut exchange = Exchange::standard();
    exchange.ok(asset("USDT", 6));
    exchange.ok(instrument("BTC-USDT", "BTC", "USDT")
        .with("tick", "0.01")
        .with("lot", "0.001")
        .with("min_qty", "0.001"));
    exchange.ok(deposit("bob", "BTC", "1"));
    exchange.ok(sell("bob", "s1", "10", "1").on("BTC-USDT"));
    exchange.ok(deposit("alice", "USDT", "100"));
    exchange
}

#[test]
fn nothing_left_means_exactly_zero_left() {
    let mut exchange = with_fine_quote();
    // 10.000001 buys all of s1 for 10; the 0.000001 left is not nothing, and with no ask
    // left the order expires.
    let fed = exchange.feed(spend("alice", "m1", "10.000001").on("BTC-USDT"));
    assert_eq!(fed.events.last().unwrap()["reason"], "expired", "{:?}", fed.events);
    assert_eq!(fed.events.last().unwrap()["filled"], "1");
    exchange.assert_balance("alice", "USDT", "90", "0");
    // Exactly the price of what is there: filled.
    let mut exchange = with_fine_quote();
    let fed = exchange.feed(spend("alice", "m1", "10").on("BTC-USDT"));
    assert_eq!(fed.events.last().unwrap()["reason"], "filled", "{:?}", fed.events);
}

// ---------------------------------------------------------------- self-trade prevention

/// Alice's own ask at 99 (below bob's 100), and bob's s1 100 x 1.
fn with_own_ask() -> Exchange {
    let mut exchange = with_asks(&[("s1", "100", "1")], "1000");
    exchange.ok(deposit("alice", "BTC", "1"));
    exchange.ok(sell("alice", "a1", "99", "0.1"));
    exchange
}

#[test]
fn cancel_taker_stops_it_at_its_own_ask() {
    let mut exchange = with_own_ask();
    let fed = exchange.feed(spend("alice", "m1", "50"));
    assert_lines(&fed, &[accepted("alice", "m1"), done("alice", "m1", "stp", "0")]);
    exchange.assert_balance("alice", "USD", "1000", "0");
}

#[test]
fn cancel_maker_cancels_its_own_ask_and_goes_on() {
    let mut exchange = with_own_ask();
    let fed = exchange.feed(spend("alice", "m1", "50").stp("cancel_maker"));
    assert_lines(
        &fed,
        &[
            accepted("alice", "m1"),
            done("alice", "a1", "stp", "0"),
            bought("s1", "m1", "100", "0.5"),
            done("alice", "m1", "filled", "0.5"),
        ],
    );
    exchange.assert_balance("alice", "BTC", "1.5", "0");
}

#[test]
fn cancel_both_cancels_its_own_ask_and_itself() {
    let mut exchange = with_own_ask();
    let fed = exchange.feed(spend("alice", "m1", "50").stp("cancel_both"));
    assert_events_then_any_order(
        &fed,
        &[&accepted("alice", "m1")],
        &[&done("alice", "a1", "stp", "0"), &done("alice", "m1", "stp", "0")],
    );
}

#[test]
fn stp_none_buys_from_its_own_ask() {
    let mut exchange = with_own_ask();
    let fed = exchange.feed(spend("alice", "m1", "9.9").stp("none"));
    let own = r#"{"ev":"trade","symbol":"BTC-USD","price":"99","qty":"0.1","taker_side":"buy","maker_account":"alice","maker_id":"a1","taker_account":"alice","taker_id":"m1","maker_fee":"0","taker_fee":"0"}"#;
    assert_events(
        &fed,
        &[
            &accepted("alice", "m1"),
            own,
            &done("alice", "a1", "filled", "0.1"),
            &done("alice", "m1", "filled", "0.1"),
        ],
    );
    exchange.assert_balance("alice", "USD", "1000", "0");
    exchange.assert_balance("alice", "BTC", "1", "0");
}

#[test]
fn buying_less_than_a_lot_is_checked_before_self_trade_prevention() {
    let mut exchange = with_own_ask();
    let fed = exchange.feed(spend("alice", "m1", "0.5").stp("cancel_both"));
    assert_lines(&fed, &[accepted("alice", "m1"), done("alice", "m1", "expired", "0")]);
    exchange.assert_book(
        "BTC-USD",
        &[],
        &[("alice", "a1", "99", "0.1"), ("bob", "s1", "100", "1")],
    );
}

// ---------------------------------------------------------------- fees

#[test]
fn fees_are_those_of_any_taker_fill_and_quote_qty_is_all_spent_on_the_base() {
    // ETH-USD: maker 10 bps, taker 25 bps. Alice spends all she has: the fee of a buy
    // is in what it receives (ETH), so none of it comes out of quote_qty.
    let mut exchange = Exchange::standard();
    exchange.ok(deposit("bob", "ETH", "10"));
    exchange.ok(sell("bob", "s1", "12.34", "10").on("ETH-USD"));
    exchange.ok(deposit("alice", "USD", "37.02"));
    let fed = exchange.feed(spend("alice", "m1", "37.02").on("ETH-USD"));
    // 3 ETH for 37.02: alice pays ceil(3000 * 25 / 10000) = 8 thousandths of an ETH (its
    // smallest unit), bob ceil(3702 * 10 / 10000) = 4 cents.
    assert_events(
        &fed,
        &[
            &accepted("alice", "m1"),
            r#"{"ev":"trade","symbol":"ETH-USD","price":"12.34","qty":"3","taker_side":"buy","maker_account":"bob","maker_id":"s1","taker_account":"alice","taker_id":"m1","maker_fee":"0.04","taker_fee":"0.008"}"#,
            &done("alice", "m1", "filled", "3"),
        ],
    );
    exchange.assert_balance("alice", "USD", "0", "0");
    exchange.assert_balance("alice", "ETH", "2.992", "0");
    exchange.assert_balance("bob", "USD", "36.98", "0");
    exchange.assert_fee("ETH", "0.008");
    exchange.assert_fee("USD", "0.04");
}

// ---------------------------------------------------------------- the replay format

#[test]
fn a_quote_qty_order_prints_back_as_itself() {
    use bourse_core::format::{parse_line, write_command};
    let line = spend("alice", "m1", "12.50").to_string();
    let parsed = parse_line(&line).unwrap();
    let mut printed = String::new();
    write_command(&mut printed, &parsed.command, parsed.ts);
    let again = parse_line(printed.trim_end()).unwrap();
    assert_eq!(again.command, parsed.command);
    assert!(printed.contains(r#""quote_qty":"12.5""#), "{printed}");
    assert!(!printed.contains(r#""qty""#), "{printed}");
}
