//! Rules of the replay format for `asset`, `instrument`, `deposit` and `withdraw`:
//! acceptance, each rejection reason in the spec's order, the decimals constraints
//! and the 64-bit range of an asset's total.

mod support;

use support::*;

const ACCEPTED: &str = r#"{"ev":"accepted"}"#;

fn rejected(reason: &str) -> String {
    format!(r#"{{"ev":"rejected","reason":"{reason}"}}"#)
}

/// Assets BTC (8 decimals) and USD (2 decimals), nothing else.
fn with_btc_and_usd() -> Exchange {
    let mut exchange = Exchange::new();
    exchange.ok(asset("BTC", 8));
    exchange.ok(asset("USD", 2));
    exchange
}

// ---------------------------------------------------------------- asset

#[test]
fn asset_declaration_is_accepted() {
    let mut exchange = Exchange::new();
    let fed = exchange.feed(r#"{"cmd":"asset","asset":"BTC","decimals":8}"#);
    assert_events(&fed, &[ACCEPTED]);
}

#[test]
fn asset_decimals_of_0_and_18_are_accepted() {
    let mut exchange = Exchange::new();
    assert_events(&exchange.feed(asset("PTS", 0)), &[ACCEPTED]);
    assert_events(&exchange.feed(asset("WEI", 18)), &[ACCEPTED]);
}

#[test]
fn asset_declared_twice_is_rejected_duplicate_asset() {
    let mut exchange = Exchange::new();
    exchange.ok(asset("BTC", 8));
    let fed = exchange.feed(asset("BTC", 6));
    assert_events(&fed, &[&rejected("duplicate_asset")]);
}

#[test]
fn asset_with_more_than_18_decimals_is_rejected_invalid_decimals() {
    let mut exchange = Exchange::new();
    let fed = exchange.feed(asset("BTC", 19));
    assert_events(&fed, &[&rejected("invalid_decimals")]);
}

#[test]
fn asset_with_negative_decimals_is_rejected_invalid_decimals() {
    let mut exchange = Exchange::new();
    let fed = exchange.feed(asset("BTC", -1));
    assert_events(&fed, &[&rejected("invalid_decimals")]);
}

#[test]
fn rejected_asset_is_not_declared() {
    let mut exchange = Exchange::new();
    exchange.feed(asset("BTC", 19));
    assert_events(&exchange.feed(asset("BTC", 8)), &[ACCEPTED]);
}

#[test]
fn duplicate_asset_is_checked_before_invalid_decimals() {
    let mut exchange = Exchange::new();
    exchange.ok(asset("BTC", 8));
    let fed = exchange.feed(asset("BTC", 19));
    assert_events(&fed, &[&rejected("duplicate_asset")]);
}

// ---------------------------------------------------------------- instrument

#[test]
fn instrument_declaration_is_accepted() {
    let mut exchange = with_btc_and_usd();
    let fed = exchange.feed(
        r#"{"cmd":"instrument","symbol":"BTC-USD","base":"BTC","quote":"USD","tick":"1","lot":"0.01","min_qty":"0.1","max_qty":"100","maker_fee_bps":10,"taker_fee_bps":20,"market_band_bps":500}"#,
    );
    assert_events(&fed, &[ACCEPTED]);
}

#[test]
fn instrument_declared_twice_is_rejected_duplicate_symbol() {
    let mut exchange = with_btc_and_usd();
    exchange.ok(instrument("BTC-USD", "BTC", "USD"));
    let fed = exchange.feed(instrument("BTC-USD", "BTC", "USD"));
    assert_events(&fed, &[&rejected("duplicate_symbol")]);
}

#[test]
fn duplicate_symbol_is_checked_before_unknown_asset() {
    let mut exchange = with_btc_and_usd();
    exchange.ok(instrument("BTC-USD", "BTC", "USD"));
    let fed = exchange.feed(instrument("BTC-USD", "DOGE", "USD"));
    assert_events(&fed, &[&rejected("duplicate_symbol")]);
}

#[test]
fn instrument_with_unknown_base_is_rejected_unknown_asset() {
    let mut exchange = with_btc_and_usd();
    let fed = exchange.feed(instrument("DOGE-USD", "DOGE", "USD"));
    assert_events(&fed, &[&rejected("unknown_asset")]);
}

#[test]
fn instrument_with_unknown_quote_is_rejected_unknown_asset() {
    let mut exchange = with_btc_and_usd();
    let fed = exchange.feed(instrument("BTC-EUR", "BTC", "EUR"));
    assert_events(&fed, &[&rejected("unknown_asset")]);
}

#[test]
fn unknown_asset_is_checked_before_invalid_instrument() {
    let mut exchange = with_btc_and_usd();
    let fed = exchange.feed(instrument("DOGE-USD", "DOGE", "USD").with("tick", "0"));
    assert_events(&fed, &[&rejected("unknown_asset")]);
}

#[test]
fn rejected_instrument_is_not_declared() {
    let mut exchange = with_btc_and_usd();
    exchange.feed(instrument("BTC-USD", "BTC", "USD").with("tick", "0"));
    assert_events(&exchange.feed(instrument("BTC-USD", "BTC", "USD")), &[ACCEPTED]);
}

#[test]
fn instrument_with_base_equal_to_quote_is_invalid_instrument() {
    let mut exchange = with_btc_and_usd();
    let fed = exchange.feed(instrument("USD-USD", "USD", "USD"));
    assert_events(&fed, &[&rejected("invalid_instrument")]);
}

#[test]
fn instrument_with_zero_or_negative_tick_is_invalid_instrument() {
    let mut exchange = with_btc_and_usd();
    for tick in ["0", "-1"] {
        let fed = exchange.feed(instrument("BTC-USD", "BTC", "USD").with("tick", tick));
        assert_events(&fed, &[&rejected("invalid_instrument")]);
    }
}

#[test]
fn instrument_with_zero_or_negative_lot_is_invalid_instrument() {
    let mut exchange = with_btc_and_usd();
    for lot in ["0", "-0.01"] {
        let fed = exchange.feed(instrument("BTC-USD", "BTC", "USD").with("lot", lot));
        assert_events(&fed, &[&rejected("invalid_instrument")]);
    }
}

#[test]
fn instrument_with_zero_min_qty_is_invalid_instrument() {
    let mut exchange = with_btc_and_usd();
    let fed = exchange.feed(instrument("BTC-USD", "BTC", "USD").with("min_qty", "0"));
    assert_events(&fed, &[&rejected("invalid_instrument")]);
}

#[test]
fn instrument_with_non_positive_max_qty_is_invalid_instrument() {
    let mut exchange = with_btc_and_usd();
    for max_qty in ["0", "-1"] {
        let fed = exchange.feed(instrument("BTC-USD", "BTC", "USD").with("max_qty", max_qty));
        assert_events(&fed, &[&rejected("invalid_instrument")]);
    }
}

#[test]
fn instrument_with_min_qty_off_the_lot_is_invalid_instrument() {
    let mut exchange = with_btc_and_usd();
    let fed = exchange.feed(
        instrument("BTC-USD", "BTC", "USD")
            .with("lot", "0.02")
            .with("min_qty", "0.03")
            .with("max_qty", "100"),
    );
    assert_events(&fed, &[&rejected("invalid_instrument")]);
}

#[test]
fn instrument_with_max_qty_off_the_lot_is_invalid_instrument() {
    let mut exchange = with_btc_and_usd();
    let fed = exchange.feed(
        instrument("BTC-USD", "BTC", "USD")
            .with("lot", "0.02")
            .with("min_qty", "0.02")
            .with("max_qty", "99.99"),
    );
    assert_events(&fed, &[&rejected("invalid_instrument")]);
}

#[test]
fn instrument_with_min_qty_above_max_qty_is_invalid_instrument() {
    let mut exchange = with_btc_and_usd();
    let fed = exchange
        .feed(instrument("BTC-USD", "BTC", "USD").with("min_qty", "2").with("max_qty", "1"));
    assert_events(&fed, &[&rejected("invalid_instrument")]);
}

#[test]
fn instrument_with_min_qty_equal_to_max_qty_is_accepted() {
    let mut exchange = with_btc_and_usd();
    let fed = exchange
        .feed(instrument("BTC-USD", "BTC", "USD").with("min_qty", "1").with("max_qty", "1"));
    assert_events(&fed, &[ACCEPTED]);
}

#[test]
fn instrument_with_maker_fee_above_1000_bps_is_invalid_instrument() {
    let mut exchange = with_btc_and_usd();
    let fed = exchange.feed(instrument("BTC-USD", "BTC", "USD").with("maker_fee_bps", 1001));
    assert_events(&fed, &[&rejected("invalid_instrument")]);
}

#[test]
fn instrument_with_taker_fee_above_1000_bps_is_invalid_instrument() {
    let mut exchange = with_btc_and_usd();
    let fed = exchange.feed(instrument("BTC-USD", "BTC", "USD").with("taker_fee_bps", 1001));
    assert_events(&fed, &[&rejected("invalid_instrument")]);
}

#[test]
fn instrument_with_negative_fee_is_invalid_instrument() {
    let mut exchange = with_btc_and_usd();
    for field in ["maker_fee_bps", "taker_fee_bps"] {
        let fed = exchange.feed(instrument("BTC-USD", "BTC", "USD").with(field, -1));
        assert_events(&fed, &[&rejected("invalid_instrument")]);
    }
}

#[test]
fn instrument_with_fees_of_0_and_1000_bps_is_accepted() {
    let mut exchange = with_btc_and_usd();
    let fed = exchange.feed(
        instrument("BTC-USD", "BTC", "USD").with("maker_fee_bps", 0).with("taker_fee_bps", 1000),
    );
    assert_events(&fed, &[ACCEPTED]);
}

#[test]
fn instrument_with_market_band_above_10000_bps_is_invalid_instrument() {
    let mut exchange = with_btc_and_usd();
    let fed = exchange.feed(instrument("BTC-USD", "BTC", "USD").with("market_band_bps", 10001));
    assert_events(&fed, &[&rejected("invalid_instrument")]);
}

#[test]
fn instrument_with_negative_market_band_is_invalid_instrument() {
    let mut exchange = with_btc_and_usd();
    let fed = exchange.feed(instrument("BTC-USD", "BTC", "USD").with("market_band_bps", -1));
    assert_events(&fed, &[&rejected("invalid_instrument")]);
}

#[test]
fn instrument_with_market_band_of_0_and_10000_bps_is_accepted() {
    let mut exchange = with_btc_and_usd();
    let fed = exchange.feed(instrument("BTC-USD", "BTC", "USD").with("market_band_bps", 0));
    assert_events(&fed, &[ACCEPTED]);
    let fed = exchange.feed(instrument("BTC-USD-2", "BTC", "USD").with("market_band_bps", 10000));
    assert_events(&fed, &[ACCEPTED]);
}

#[test]
fn instrument_whose_tick_and_lot_decimals_exceed_the_quote_decimals_is_invalid() {
    let mut exchange = with_btc_and_usd();
    // decimals(0.01) + decimals(0.01) = 4 > decimals(USD) = 2
    let fed = exchange.feed(
        instrument("BTC-USD", "BTC", "USD")
            .with("tick", "0.01")
            .with("lot", "0.01")
            .with("min_qty", "0.01"),
    );
    assert_events(&fed, &[&rejected("invalid_instrument")]);
}

#[test]
fn instrument_whose_tick_decimals_alone_exceed_the_quote_decimals_is_invalid() {
    let mut exchange = with_btc_and_usd();
    // decimals(0.001) + decimals(1) = 3 > decimals(USD) = 2
    let fed = exchange.feed(
        instrument("BTC-USD", "BTC", "USD")
            .with("tick", "0.001")
            .with("lot", "1")
            .with("min_qty", "1"),
    );
    assert_events(&fed, &[&rejected("invalid_instrument")]);
}

#[test]
fn instrument_whose_lot_decimals_exceed_the_base_decimals_is_invalid() {
    let mut exchange = with_btc_and_usd();
    exchange.ok(asset("GLD", 1));
    // decimals(0.01) = 2 > decimals(GLD) = 1, while 0 + 2 <= decimals(USD) = 2
    let fed = exchange.feed(instrument("GLD-USD", "GLD", "USD"));
    assert_events(&fed, &[&rejected("invalid_instrument")]);
}

#[test]
fn instrument_at_the_limit_of_the_decimals_constraints_is_accepted() {
    let mut exchange = with_btc_and_usd();
    exchange.ok(asset("GLD", 1));
    // decimals(0.1) + decimals(0.1) = 2 = decimals(USD); decimals(0.1) = 1 = decimals(GLD)
    let fed = exchange.feed(
        instrument("GLD-USD", "GLD", "USD")
            .with("tick", "0.1")
            .with("lot", "0.1")
            .with("min_qty", "0.1"),
    );
    assert_events(&fed, &[ACCEPTED]);
}

#[test]
fn trailing_zeros_do_not_count_as_decimal_places_of_tick_and_lot() {
    let mut exchange = with_btc_and_usd();
    // "0.10" has one decimal place, so 1 + 1 <= decimals(USD) = 2
    let fed = exchange.feed(
        instrument("BTC-USD", "BTC", "USD")
            .with("tick", "0.10")
            .with("lot", "0.10")
            .with("min_qty", "0.10")
            .with("max_qty", "100.00"),
    );
    assert_events(&fed, &[ACCEPTED]);
}

#[test]
fn instrument_with_a_tick_and_lot_that_are_not_powers_of_ten_is_accepted() {
    let mut exchange = with_btc_and_usd();
    let fed = exchange.feed(
        instrument("BTC-USD", "BTC", "USD")
            .with("tick", "0.05")
            .with("lot", "25")
            .with("min_qty", "25")
            .with("max_qty", "1000"),
    );
    assert_events(&fed, &[ACCEPTED]);
}

// ---------------------------------------------------------------- deposit

#[test]
fn deposit_creates_the_account_and_credits_available() {
    let mut exchange = with_btc_and_usd();
    let fed =
        exchange.feed(r#"{"cmd":"deposit","account":"alice","asset":"USD","amount":"100.25"}"#);
    assert_events(&fed, &[ACCEPTED]);
    exchange.assert_balance("alice", "USD", "100.25", "0");
}

#[test]
fn deposits_add_up() {
    let mut exchange = with_btc_and_usd();
    exchange.ok(deposit("alice", "USD", "100"));
    exchange.ok(deposit("alice", "USD", "50.5"));
    exchange.assert_balance("alice", "USD", "150.5", "0");
}

#[test]
fn deposit_of_an_unknown_asset_is_rejected_unknown_asset() {
    let mut exchange = with_btc_and_usd();
    let fed = exchange.feed(deposit("alice", "EUR", "100"));
    assert_events(&fed, &[&rejected("unknown_asset")]);
}

#[test]
fn deposit_of_zero_is_rejected_invalid_amount() {
    let mut exchange = with_btc_and_usd();
    let fed = exchange.feed(deposit("alice", "USD", "0"));
    assert_events(&fed, &[&rejected("invalid_amount")]);
}

#[test]
fn deposit_of_a_negative_amount_is_rejected_invalid_amount() {
    let mut exchange = with_btc_and_usd();
    exchange.ok(deposit("alice", "USD", "100"));
    let fed = exchange.feed(deposit("alice", "USD", "-10"));
    assert_events(&fed, &[&rejected("invalid_amount")]);
    exchange.assert_balance("alice", "USD", "100", "0");
}

#[test]
fn deposit_with_more_decimals_than_the_asset_is_rejected_invalid_amount() {
    let mut exchange = with_btc_and_usd();
    let fed = exchange.feed(deposit("alice", "USD", "1.001"));
    assert_events(&fed, &[&rejected("invalid_amount")]);
}

#[test]
fn deposit_with_trailing_zeros_past_the_asset_decimals_is_accepted() {
    let mut exchange = with_btc_and_usd();
    let fed = exchange.feed(deposit("alice", "USD", "1.500"));
    assert_events(&fed, &[ACCEPTED]);
    exchange.assert_balance("alice", "USD", "1.5", "0");
}

#[test]
fn unknown_asset_is_checked_before_invalid_amount_on_deposit() {
    let mut exchange = with_btc_and_usd();
    let fed = exchange.feed(deposit("alice", "EUR", "0"));
    assert_events(&fed, &[&rejected("unknown_asset")]);
}

#[test]
fn deposit_reaching_exactly_2_pow_63_minus_1_units_is_accepted() {
    let mut exchange = Exchange::new();
    exchange.ok(asset("PTS", 0));
    let fed = exchange.feed(deposit("alice", "PTS", "9223372036854775807"));
    assert_events(&fed, &[ACCEPTED]);
    exchange.assert_balance("alice", "PTS", "9223372036854775807", "0");
}

#[test]
fn deposit_taking_the_asset_total_past_2_pow_63_minus_1_units_is_invalid_amount() {
    let mut exchange = Exchange::new();
    exchange.ok(asset("PTS", 0));
    exchange.ok(deposit("alice", "PTS", "9223372036854775807"));
    // The limit is on the asset's total over all accounts, not on one balance.
    let fed = exchange.feed(deposit("bob", "PTS", "1"));
    assert_events(&fed, &[&rejected("invalid_amount")]);
    exchange.assert_balance("bob", "PTS", "0", "0");
}

#[test]
fn asset_total_limit_counts_smallest_units() {
    let mut exchange = with_btc_and_usd();
    // 2^63 - 1 cents
    exchange.ok(deposit("alice", "USD", "92233720368547758.07"));
    let fed = exchange.feed(deposit("alice", "USD", "0.01"));
    assert_events(&fed, &[&rejected("invalid_amount")]);
    exchange.assert_balance("alice", "USD", "92233720368547758.07", "0");
}

#[test]
fn deposit_of_one_smallest_unit_of_an_18_decimal_asset_is_accepted() {
    let mut exchange = Exchange::new();
    exchange.ok(asset("WEI", 18));
    let fed = exchange.feed(deposit("alice", "WEI", "0.000000000000000001"));
    assert_events(&fed, &[ACCEPTED]);
    exchange.assert_balance("alice", "WEI", "0.000000000000000001", "0");
}

#[test]
fn asset_total_limit_of_an_18_decimal_asset_is_2_pow_63_minus_1_smallest_units() {
    let mut exchange = Exchange::new();
    exchange.ok(asset("WEI", 18));
    exchange.ok(deposit("alice", "WEI", "9.223372036854775807"));
    let fed = exchange.feed(deposit("alice", "WEI", "0.000000000000000001"));
    assert_events(&fed, &[&rejected("invalid_amount")]);
    exchange.assert_balance("alice", "WEI", "9.223372036854775807", "0");
}

#[test]
fn single_deposit_beyond_64_bits_is_invalid_amount() {
    let mut exchange = Exchange::new();
    exchange.ok(asset("PTS", 0));
    for amount in [
        "9223372036854775808",
        "18446744073709551616",
        "100000000000000000000000000000000000000000",
    ] {
        let fed = exchange.feed(deposit("alice", "PTS", amount));
        assert_events(&fed, &[&rejected("invalid_amount")]);
    }
}

#[test]
fn withdrawal_makes_room_under_the_asset_total_limit() {
    let mut exchange = Exchange::new();
    exchange.ok(asset("PTS", 0));
    exchange.ok(deposit("alice", "PTS", "9223372036854775807"));
    exchange.ok(withdraw("alice", "PTS", "1"));
    let fed = exchange.feed(deposit("bob", "PTS", "1"));
    assert_events(&fed, &[ACCEPTED]);
    exchange.assert_balance("alice", "PTS", "9223372036854775806", "0");
    exchange.assert_balance("bob", "PTS", "1", "0");
}

// ---------------------------------------------------------------- withdraw

#[test]
fn withdraw_debits_available() {
    let mut exchange = with_btc_and_usd();
    exchange.ok(deposit("alice", "USD", "100"));
    let fed =
        exchange.feed(r#"{"cmd":"withdraw","account":"alice","asset":"USD","amount":"30.5"}"#);
    assert_events(&fed, &[ACCEPTED]);
    exchange.assert_balance("alice", "USD", "69.5", "0");
}

#[test]
fn withdraw_of_everything_available_is_accepted() {
    let mut exchange = with_btc_and_usd();
    exchange.ok(deposit("alice", "USD", "100"));
    let fed = exchange.feed(withdraw("alice", "USD", "100"));
    assert_events(&fed, &[ACCEPTED]);
    exchange.assert_balance("alice", "USD", "0", "0");
}

#[test]
fn withdraw_of_more_than_available_is_rejected_insufficient_funds() {
    let mut exchange = with_btc_and_usd();
    exchange.ok(deposit("alice", "USD", "100"));
    let fed = exchange.feed(withdraw("alice", "USD", "100.01"));
    assert_events(&fed, &[&rejected("insufficient_funds")]);
    exchange.assert_balance("alice", "USD", "100", "0");
}

#[test]
fn withdraw_from_an_account_with_nothing_is_rejected_insufficient_funds() {
    let mut exchange = with_btc_and_usd();
    let fed = exchange.feed(withdraw("nobody", "USD", "1"));
    assert_events(&fed, &[&rejected("insufficient_funds")]);
}

#[test]
fn withdraw_of_an_unknown_asset_is_rejected_unknown_asset() {
    let mut exchange = with_btc_and_usd();
    exchange.ok(deposit("alice", "USD", "100"));
    let fed = exchange.feed(withdraw("alice", "EUR", "1"));
    assert_events(&fed, &[&rejected("unknown_asset")]);
}

#[test]
fn unknown_asset_is_checked_before_invalid_amount_on_withdraw() {
    let mut exchange = with_btc_and_usd();
    let fed = exchange.feed(withdraw("alice", "EUR", "-1"));
    assert_events(&fed, &[&rejected("unknown_asset")]);
}

#[test]
fn withdraw_of_zero_or_negative_is_rejected_invalid_amount() {
    let mut exchange = with_btc_and_usd();
    exchange.ok(deposit("alice", "USD", "100"));
    for amount in ["0", "-1"] {
        let fed = exchange.feed(withdraw("alice", "USD", amount));
        assert_events(&fed, &[&rejected("invalid_amount")]);
    }
    exchange.assert_balance("alice", "USD", "100", "0");
}

#[test]
fn withdraw_with_more_decimals_than_the_asset_is_rejected_invalid_amount() {
    let mut exchange = with_btc_and_usd();
    exchange.ok(deposit("alice", "USD", "100"));
    let fed = exchange.feed(withdraw("alice", "USD", "0.005"));
    assert_events(&fed, &[&rejected("invalid_amount")]);
}

#[test]
fn invalid_amount_is_checked_before_insufficient_funds() {
    let mut exchange = with_btc_and_usd();
    let fed = exchange.feed(withdraw("nobody", "USD", "0"));
    assert_events(&fed, &[&rejected("invalid_amount")]);
    let fed = exchange.feed(withdraw("nobody", "USD", "1.001"));
    assert_events(&fed, &[&rejected("invalid_amount")]);
}

#[test]
fn withdraw_cannot_take_funds_held_by_open_orders() {
    let mut exchange = Exchange::standard();
    exchange.ok(deposit("alice", "USD", "1000"));
    exchange.ok(buy("alice", "b1", "100", "5")); // holds 500
    let fed = exchange.feed(withdraw("alice", "USD", "500.01"));
    assert_events(&fed, &[&rejected("insufficient_funds")]);
    let fed = exchange.feed(withdraw("alice", "USD", "500"));
    assert_events(&fed, &[ACCEPTED]);
    exchange.assert_balance("alice", "USD", "0", "500");
}

// ---------------------------------------------------------------- ts

#[test]
fn command_with_ts_is_processed_like_any_other() {
    let mut exchange = Exchange::new();
    let fed =
        exchange.feed(r#"{"cmd":"asset","asset":"USD","decimals":2,"ts":1700000000000000000}"#);
    assert_events(&fed, &[ACCEPTED]);
}

#[test]
fn ts_smaller_than_the_previous_one_is_accepted() {
    let mut exchange = Exchange::new();
    exchange.ok(r#"{"cmd":"asset","asset":"USD","decimals":2,"ts":2000}"#);
    let fed = exchange
        .feed(r#"{"cmd":"deposit","account":"alice","asset":"USD","amount":"5","ts":1000}"#);
    assert_events(&fed, &[ACCEPTED]);
    exchange.assert_balance("alice", "USD", "5", "0");
}
