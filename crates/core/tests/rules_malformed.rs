//! The Fine print of the replay format on parsing: what is `malformed` (not JSON,
//! unknown `cmd`, a missing, mistyped or null field, an enum value outside its set, a
//! decimal that is not a decimal string), what is well formed and gets a semantic
//! reason instead, blank lines and `\r`, and that the run goes on after a malformed
//! line. A malformed line's `rejected` carries only `seq` and `reason`.

mod support;

use support::*;

const MALFORMED: &str = r#"{"ev":"rejected","reason":"malformed"}"#;

fn assert_malformed(exchange: &mut Exchange, line: impl std::fmt::Display) {
    let fed = exchange.feed(line);
    assert_events(&fed, &[MALFORMED]);
}

/// Standard definitions; alice has 1000 USD and 10 BTC and an open buy "o1" at 100.
fn with_open_order() -> Exchange {
    let mut exchange = Exchange::standard();
    exchange.ok(deposit("alice", "USD", "1000"));
    exchange.ok(deposit("alice", "BTC", "10"));
    exchange.ok(buy("alice", "o1", "100", "1"));
    exchange
}

// ---------------------------------------------------------------- lines and JSON

#[test]
fn line_that_is_not_json_is_malformed() {
    let mut exchange = Exchange::new();
    assert_malformed(&mut exchange, "hello");
    assert_malformed(&mut exchange, r#"{"cmd":"asset","asset":"BTC","decimals":8"#);
    assert_malformed(&mut exchange, r#"{"cmd":"asset","asset":"BTC","decimals":8} x"#);
    assert_malformed(&mut exchange, r#"{'cmd':'asset'}"#);
}

#[test]
fn json_that_is_not_an_object_is_malformed() {
    let mut exchange = Exchange::new();
    for line in
        [r#"[{"cmd":"asset","asset":"BTC","decimals":8}]"#, r#""asset""#, "42", "null", "true"]
    {
        assert_malformed(&mut exchange, line);
    }
}

#[test]
fn unknown_cmd_is_malformed() {
    let mut exchange = Exchange::standard();
    assert_malformed(
        &mut exchange,
        r#"{"cmd":"transfer","account":"alice","asset":"USD","amount":"1"}"#,
    );
}

#[test]
fn cmd_in_upper_case_is_malformed() {
    let mut exchange = Exchange::new();
    assert_malformed(&mut exchange, r#"{"cmd":"ASSET","asset":"BTC","decimals":8}"#);
    assert_malformed(&mut exchange, r#"{"cmd":"Asset","asset":"BTC","decimals":8}"#);
}

#[test]
fn missing_cmd_is_malformed() {
    let mut exchange = Exchange::new();
    assert_malformed(&mut exchange, r#"{"asset":"BTC","decimals":8}"#);
}

#[test]
fn cmd_that_is_not_a_string_is_malformed() {
    let mut exchange = Exchange::new();
    assert_malformed(&mut exchange, r#"{"cmd":1,"asset":"BTC","decimals":8}"#);
    assert_malformed(&mut exchange, r#"{"cmd":null,"asset":"BTC","decimals":8}"#);
}

#[test]
fn run_goes_on_after_a_malformed_line() {
    let mut exchange = Exchange::new();
    assert_malformed(&mut exchange, "not json at all");
    let fed = exchange.feed(asset("USD", 2));
    assert_events(&fed, &[r#"{"ev":"accepted","seq":2}"#]);
    let fed = exchange.feed(deposit("alice", "USD", "5"));
    assert_events(&fed, &[r#"{"ev":"accepted","seq":3}"#]);
    exchange.assert_balance("alice", "USD", "5", "0");
}

#[test]
fn malformed_line_changes_nothing() {
    let mut exchange = with_open_order();
    assert_malformed(
        &mut exchange,
        r#"{"cmd":"withdraw","account":"alice","asset":"USD","amount":900}"#,
    );
    assert_malformed(&mut exchange, r#"{"cmd":"cancel","account":"alice","id":1}"#);
    exchange.assert_balance("alice", "USD", "900", "100");
    exchange.assert_book("BTC-USD", &[("alice", "o1", "100", "1")], &[]);
}

#[test]
fn blank_lines_count_as_seq_and_emit_nothing() {
    let mut exchange = Exchange::new();
    exchange.ok(asset("USD", 2));
    assert_no_events(&exchange.feed(""));
    assert_no_events(&exchange.feed("   \t "));
    let fed = exchange.feed(asset("BTC", 8));
    assert_events(&fed, &[r#"{"ev":"accepted","seq":4}"#]);
}

#[test]
fn trailing_carriage_return_is_white_space() {
    let mut exchange = Exchange::new();
    let fed = exchange.feed("{\"cmd\":\"asset\",\"asset\":\"USD\",\"decimals\":2}\r");
    assert_events(&fed, &[r#"{"ev":"accepted","seq":1}"#]);
}

#[test]
fn line_of_only_a_carriage_return_is_blank() {
    let mut exchange = Exchange::new();
    assert_no_events(&exchange.feed("\r"));
    assert_no_events(&exchange.feed(" \r"));
    let fed = exchange.feed(asset("USD", 2));
    assert_events(&fed, &[r#"{"ev":"accepted","seq":3}"#]);
}

#[test]
fn unknown_extra_fields_are_ignored() {
    let mut exchange = Exchange::standard();
    let fed = exchange.feed(
        r#"{"cmd":"deposit","account":"alice","asset":"USD","amount":"1000","note":"hi","extra":{"a":[1,2]}}"#,
    );
    assert_events(&fed, &[r#"{"ev":"accepted"}"#]);
    let fed = exchange.feed(
        r#"{"cmd":"order","account":"alice","id":"o1","symbol":"BTC-USD","side":"buy","type":"limit","price":"100","qty":"1","client":7,"flags":[]}"#,
    );
    assert_events(&fed, &[r#"{"ev":"accepted","account":"alice","id":"o1"}"#]);
    exchange.assert_book("BTC-USD", &[("alice", "o1", "100", "1")], &[]);
}

// ---------------------------------------------------------------- parsing comes first

#[test]
fn malformed_order_is_rejected_with_only_seq_and_reason() {
    let mut exchange = with_open_order();
    // account and id parse fine, qty is a JSON number
    let fed = exchange.feed(
        r#"{"cmd":"order","account":"alice","id":"o2","symbol":"BTC-USD","side":"buy","type":"limit","price":"100","qty":1}"#,
    );
    assert_events(&fed, &[MALFORMED]);
}

#[test]
fn malformed_cancel_and_amend_are_rejected_with_only_seq_and_reason() {
    let mut exchange = with_open_order();
    assert_malformed(&mut exchange, r#"{"cmd":"cancel","account":"alice","id":"o1","ts":"now"}"#);
    assert_malformed(&mut exchange, r#"{"cmd":"amend","account":"alice","id":"o1","qty":2}"#);
}

#[test]
fn malformed_beats_every_semantic_reason() {
    let mut exchange = with_open_order();
    // unknown symbol and duplicate id, but the side is not lower case
    assert_malformed(
        &mut exchange,
        r#"{"cmd":"order","account":"alice","id":"o1","symbol":"NOPE","side":"BUY","type":"limit","price":"100","qty":"1"}"#,
    );
    // unknown asset and zero amount, but the amount is a JSON number
    assert_malformed(
        &mut exchange,
        r#"{"cmd":"deposit","account":"alice","asset":"EUR","amount":0}"#,
    );
    // duplicate asset and decimals out of range, but decimals is a string
    assert_malformed(&mut exchange, r#"{"cmd":"asset","asset":"USD","decimals":"99"}"#);
    // unknown order, but a price field is null
    assert_malformed(
        &mut exchange,
        r#"{"cmd":"amend","account":"alice","id":"nope","price":null,"qty":"1"}"#,
    );
}

// ---------------------------------------------------------------- decimal strings

#[test]
fn decimal_given_as_a_json_number_is_malformed() {
    let mut exchange = Exchange::standard();
    assert_malformed(
        &mut exchange,
        r#"{"cmd":"deposit","account":"alice","asset":"USD","amount":100}"#,
    );
}

#[test]
fn decimal_given_as_a_json_float_is_malformed() {
    let mut exchange = Exchange::standard();
    assert_malformed(
        &mut exchange,
        r#"{"cmd":"deposit","account":"alice","asset":"USD","amount":1.5}"#,
    );
}

#[test]
fn decimal_given_as_null_is_malformed() {
    let mut exchange = Exchange::standard();
    assert_malformed(
        &mut exchange,
        r#"{"cmd":"deposit","account":"alice","asset":"USD","amount":null}"#,
    );
}

#[test]
fn decimal_given_as_a_boolean_is_malformed() {
    let mut exchange = Exchange::standard();
    assert_malformed(
        &mut exchange,
        r#"{"cmd":"deposit","account":"alice","asset":"USD","amount":true}"#,
    );
}

#[test]
fn decimal_in_exponent_notation_is_malformed() {
    let mut exchange = Exchange::standard();
    assert_malformed(&mut exchange, deposit("alice", "USD", "1e3"));
    assert_malformed(&mut exchange, deposit("alice", "USD", "1E3"));
}

#[test]
fn decimal_without_an_integer_part_is_malformed() {
    let mut exchange = Exchange::standard();
    assert_malformed(&mut exchange, deposit("alice", "USD", ".5"));
}

#[test]
fn decimal_with_white_space_is_malformed() {
    let mut exchange = Exchange::standard();
    assert_malformed(&mut exchange, deposit("alice", "USD", " 1"));
    assert_malformed(&mut exchange, deposit("alice", "USD", "1 "));
}

#[test]
fn other_strings_that_are_not_decimals_are_malformed() {
    let mut exchange = Exchange::standard();
    for amount in ["", "1.", "+1", "1,5", "0x10", "1.2.3", "--1", "abc", "NaN", "Infinity"] {
        assert_malformed(&mut exchange, deposit("alice", "USD", amount));
    }
}

#[test]
fn decimal_with_leading_zeros_is_well_formed() {
    let mut exchange = Exchange::standard();
    let fed = exchange.feed(deposit("alice", "USD", "007.50"));
    assert_events(&fed, &[r#"{"ev":"accepted"}"#]);
    exchange.assert_balance("alice", "USD", "7.5", "0");
}

#[test]
fn zero_and_negative_decimals_are_well_formed_and_get_the_semantic_reason() {
    let mut exchange = Exchange::standard();
    for amount in ["0", "0.00", "-0", "-1.5"] {
        let fed = exchange.feed(deposit("alice", "USD", amount));
        assert_events(&fed, &[r#"{"ev":"rejected","reason":"invalid_amount"}"#]);
    }
}

#[test]
fn malformed_price_on_an_order_is_malformed() {
    let mut exchange = with_open_order();
    assert_malformed(&mut exchange, buy("alice", "o2", "1e2", "1"));
    assert_malformed(&mut exchange, buy("alice", "o2", "100", "1").with("price", 100));
}

#[test]
fn malformed_qty_on_an_order_is_malformed() {
    let mut exchange = with_open_order();
    assert_malformed(&mut exchange, buy("alice", "o2", "100", ".5"));
    assert_malformed(&mut exchange, market_buy("alice", "m1", "1").with("qty", 1.0));
}

#[test]
fn malformed_decimals_in_an_instrument_are_malformed() {
    let mut exchange = Exchange::standard();
    assert_malformed(&mut exchange, instrument("X", "BTC", "USD").with("tick", 1));
    assert_malformed(&mut exchange, instrument("X", "BTC", "USD").with("lot", "1e-2"));
    assert_malformed(&mut exchange, instrument("X", "BTC", "USD").with("min_qty", " 0.1"));
    assert_malformed(&mut exchange, instrument("X", "BTC", "USD").with("max_qty", 100.0));
}

#[test]
fn malformed_decimals_in_an_amend_are_malformed() {
    let mut exchange = with_open_order();
    assert_malformed(&mut exchange, amend_price("alice", "o1", "1e2"));
    assert_malformed(&mut exchange, amend_qty("alice", "o1", ".5"));
    exchange.assert_book("BTC-USD", &[("alice", "o1", "100", "1")], &[]);
}

// ---------------------------------------------------------------- JSON integers

#[test]
fn decimals_given_as_a_float_is_malformed() {
    let mut exchange = Exchange::new();
    assert_malformed(&mut exchange, r#"{"cmd":"asset","asset":"BTC","decimals":8.5}"#);
    assert_malformed(&mut exchange, r#"{"cmd":"asset","asset":"BTC","decimals":8.0}"#);
}

#[test]
fn decimals_given_as_a_string_is_malformed() {
    let mut exchange = Exchange::new();
    assert_malformed(&mut exchange, r#"{"cmd":"asset","asset":"BTC","decimals":"8"}"#);
}

#[test]
fn decimals_given_as_null_is_malformed() {
    let mut exchange = Exchange::new();
    assert_malformed(&mut exchange, r#"{"cmd":"asset","asset":"BTC","decimals":null}"#);
}

#[test]
fn fee_rate_given_as_a_string_is_malformed() {
    let mut exchange = Exchange::standard();
    assert_malformed(&mut exchange, instrument("X", "BTC", "USD").with("maker_fee_bps", "10"));
}

#[test]
fn fee_rate_given_as_a_float_is_malformed() {
    let mut exchange = Exchange::standard();
    assert_malformed(&mut exchange, instrument("X", "BTC", "USD").with("taker_fee_bps", 2.5));
}

#[test]
fn fee_rate_given_as_null_is_malformed() {
    let mut exchange = Exchange::standard();
    assert_malformed(
        &mut exchange,
        instrument("X", "BTC", "USD").with("maker_fee_bps", serde_json::Value::Null),
    );
}

#[test]
fn market_band_given_as_a_float_string_or_null_is_malformed() {
    let mut exchange = Exchange::standard();
    assert_malformed(&mut exchange, instrument("X", "BTC", "USD").with("market_band_bps", 10.5));
    assert_malformed(&mut exchange, instrument("X", "BTC", "USD").with("market_band_bps", "1000"));
    assert_malformed(
        &mut exchange,
        instrument("X", "BTC", "USD").with("market_band_bps", serde_json::Value::Null),
    );
}

#[test]
fn ts_that_is_not_a_json_integer_is_malformed() {
    let mut exchange = Exchange::new();
    assert_malformed(&mut exchange, asset("USD", 2).with("ts", "5"));
    assert_malformed(&mut exchange, asset("USD", 2).with("ts", 1.5));
    assert_malformed(&mut exchange, asset("USD", 2).with("ts", serde_json::Value::Null));
}

// ---------------------------------------------------------------- enums

#[test]
fn side_outside_its_set_is_malformed() {
    let mut exchange = with_open_order();
    for side in ["BUY", "Buy", "bid", ""] {
        assert_malformed(&mut exchange, buy("alice", "o2", "100", "1").with("side", side));
    }
}

#[test]
fn type_outside_its_set_is_malformed() {
    let mut exchange = with_open_order();
    for order_type in ["LIMIT", "Market", "stop"] {
        assert_malformed(&mut exchange, buy("alice", "o2", "100", "1").with("type", order_type));
    }
}

#[test]
fn tif_outside_its_set_is_malformed() {
    let mut exchange = with_open_order();
    for tif in ["GTC", "Ioc", "day"] {
        assert_malformed(&mut exchange, buy("alice", "o2", "100", "1").tif(tif));
    }
}

#[test]
fn stp_outside_its_set_is_malformed() {
    let mut exchange = with_open_order();
    for stp in ["Cancel_Taker", "CANCEL_MAKER", "decrement", "None"] {
        assert_malformed(&mut exchange, buy("alice", "o2", "100", "1").stp(stp));
    }
}

#[test]
fn post_only_that_is_not_a_boolean_is_malformed() {
    let mut exchange = with_open_order();
    assert_malformed(&mut exchange, buy("alice", "o2", "90", "1").with("post_only", "true"));
    assert_malformed(&mut exchange, buy("alice", "o2", "90", "1").with("post_only", 1));
}

// ---------------------------------------------------------------- missing and null fields

#[test]
fn order_without_qty_is_malformed() {
    let mut exchange = with_open_order();
    assert_malformed(&mut exchange, buy("alice", "o2", "100", "1").without("qty"));
}

#[test]
fn limit_order_without_price_is_malformed() {
    let mut exchange = with_open_order();
    assert_malformed(&mut exchange, buy("alice", "o2", "100", "1").without("price"));
}

#[test]
fn order_without_side_type_symbol_account_or_id_is_malformed() {
    let mut exchange = with_open_order();
    for field in ["side", "type", "symbol", "account", "id"] {
        assert_malformed(&mut exchange, buy("alice", "o2", "90", "1").without(field));
    }
}

#[test]
fn market_order_without_price_is_well_formed() {
    let mut exchange = with_open_order();
    exchange.ok(sell("alice", "s1", "101", "1"));
    exchange.ok(deposit("bob", "USD", "1000"));
    let fed = exchange.feed(
        r#"{"cmd":"order","account":"bob","id":"m1","symbol":"BTC-USD","side":"buy","type":"market","qty":"1"}"#,
    );
    assert_events_then_any_order(
        &fed,
        &[
            r#"{"ev":"accepted","account":"bob","id":"m1"}"#,
            r#"{"ev":"trade","symbol":"BTC-USD","price":"101","qty":"1","taker_side":"buy","maker_account":"alice","maker_id":"s1","taker_account":"bob","taker_id":"m1","maker_fee":"0","taker_fee":"0"}"#,
        ],
        &[
            r#"{"ev":"done","account":"alice","id":"s1","reason":"filled","filled":"1"}"#,
            r#"{"ev":"done","account":"bob","id":"m1","reason":"filled","filled":"1"}"#,
        ],
    );
}

#[test]
fn definition_without_a_required_field_is_malformed() {
    let mut exchange = Exchange::standard();
    assert_malformed(&mut exchange, r#"{"cmd":"asset","asset":"DOGE"}"#);
    assert_malformed(&mut exchange, r#"{"cmd":"asset","decimals":8}"#);
    for field in [
        "symbol",
        "base",
        "quote",
        "tick",
        "lot",
        "min_qty",
        "max_qty",
        "maker_fee_bps",
        "taker_fee_bps",
        "market_band_bps",
    ] {
        assert_malformed(&mut exchange, instrument("X", "BTC", "USD").without(field));
    }
}

#[test]
fn deposit_or_withdraw_without_a_required_field_is_malformed() {
    let mut exchange = Exchange::standard();
    for field in ["account", "asset", "amount"] {
        assert_malformed(&mut exchange, deposit("alice", "USD", "1").without(field));
        assert_malformed(&mut exchange, withdraw("alice", "USD", "1").without(field));
    }
}

#[test]
fn cancel_or_amend_without_account_or_id_is_malformed() {
    let mut exchange = with_open_order();
    for field in ["account", "id"] {
        assert_malformed(&mut exchange, cancel("alice", "o1").without(field));
        assert_malformed(&mut exchange, amend_qty("alice", "o1", "0.5").without(field));
    }
    exchange.assert_book("BTC-USD", &[("alice", "o1", "100", "1")], &[]);
}

#[test]
fn amend_with_neither_price_nor_qty_is_malformed() {
    let mut exchange = with_open_order();
    assert_malformed(&mut exchange, r#"{"cmd":"amend","account":"alice","id":"o1"}"#);
}

#[test]
fn optional_field_given_as_null_is_malformed() {
    let mut exchange = with_open_order();
    for field in ["tif", "post_only", "stp"] {
        assert_malformed(
            &mut exchange,
            buy("alice", "o2", "90", "1").with(field, serde_json::Value::Null),
        );
    }
    assert_malformed(
        &mut exchange,
        amend_qty("alice", "o1", "0.5").with("price", serde_json::Value::Null),
    );
}

#[test]
fn required_field_given_as_null_is_malformed() {
    let mut exchange = with_open_order();
    for field in ["account", "id", "symbol", "side", "type", "price", "qty"] {
        assert_malformed(
            &mut exchange,
            buy("alice", "o2", "90", "1").with(field, serde_json::Value::Null),
        );
    }
}

// ---------------------------------------------------------------- names

#[test]
fn account_that_is_not_a_string_is_malformed() {
    let mut exchange = Exchange::standard();
    assert_malformed(&mut exchange, r#"{"cmd":"deposit","account":7,"asset":"USD","amount":"1"}"#);
    assert_malformed(
        &mut exchange,
        r#"{"cmd":"deposit","account":["alice"],"asset":"USD","amount":"1"}"#,
    );
}

#[test]
fn id_that_is_not_a_string_is_malformed() {
    let mut exchange = with_open_order();
    assert_malformed(&mut exchange, buy("alice", "o2", "90", "1").with("id", 2));
    assert_malformed(&mut exchange, r#"{"cmd":"cancel","account":"alice","id":1}"#);
}

#[test]
fn symbol_or_asset_name_that_is_not_a_string_is_malformed() {
    let mut exchange = with_open_order();
    assert_malformed(&mut exchange, buy("alice", "o2", "90", "1").with("symbol", 1));
    assert_malformed(&mut exchange, r#"{"cmd":"asset","asset":1,"decimals":8}"#);
    assert_malformed(&mut exchange, instrument("X", "BTC", "USD").with("base", 1));
}

#[test]
fn empty_names_are_malformed() {
    let mut exchange = with_open_order();
    assert_malformed(&mut exchange, deposit("", "USD", "1"));
    assert_malformed(&mut exchange, buy("alice", "", "90", "1"));
    assert_malformed(&mut exchange, buy("alice", "o2", "90", "1").on(""));
    assert_malformed(&mut exchange, asset("", 2));
    assert_malformed(&mut exchange, cancel("alice", ""));
}
