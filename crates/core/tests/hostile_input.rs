//! Nothing in the input can crash or hang the engine: random bytes, and valid lines with
//! fields replaced by hostile JSON values (wrong types, nulls, huge numbers and
//! decimals, long and odd strings, nesting), each give exactly one `accepted` or
//! `rejected`, and every invariant still holds afterwards.

use bourse_core::Replay;
use proptest::prelude::*;

const SETUP: [&str; 5] = [
    r#"{"cmd":"asset","asset":"BTC","decimals":8}"#,
    r#"{"cmd":"asset","asset":"USD","decimals":2}"#,
    r#"{"cmd":"instrument","symbol":"BTC-USD","base":"BTC","quote":"USD","tick":"0.5","lot":"0.01","min_qty":"0.01","max_qty":"1000","maker_fee_bps":10,"taker_fee_bps":20,"market_band_bps":500}"#,
    r#"{"cmd":"deposit","account":"a","asset":"USD","amount":"1000000"}"#,
    r#"{"cmd":"deposit","account":"b","asset":"BTC","amount":"100"}"#,
];

/// Templates of every command with one field to replace (`@` marks the value).
const TEMPLATES: [&str; 12] = [
    r#"{"cmd":"asset","asset":@,"decimals":2}"#,
    r#"{"cmd":"asset","asset":"X","decimals":@}"#,
    r#"{"cmd":"instrument","symbol":"S","base":"BTC","quote":"USD","tick":@,"lot":"1","min_qty":"1","max_qty":"10","maker_fee_bps":0,"taker_fee_bps":0,"market_band_bps":0}"#,
    r#"{"cmd":"instrument","symbol":"S","base":"BTC","quote":"USD","tick":"1","lot":"1","min_qty":"1","max_qty":@,"maker_fee_bps":0,"taker_fee_bps":@,"market_band_bps":0}"#,
    r#"{"cmd":"deposit","account":"a","asset":"USD","amount":@}"#,
    r#"{"cmd":"withdraw","account":@,"asset":"BTC","amount":"1"}"#,
    r#"{"cmd":"order","account":"a","id":"1","symbol":"BTC-USD","side":"buy","type":"limit","price":@,"qty":"1"}"#,
    r#"{"cmd":"order","account":"b","id":"2","symbol":"BTC-USD","side":"sell","type":"limit","price":"100","qty":@,"tif":"gtc"}"#,
    r#"{"cmd":"order","account":"a","id":@,"symbol":"BTC-USD","side":"buy","type":"market","qty":"1","stp":@}"#,
    r#"{"cmd":"cancel","account":"a","id":@}"#,
    r#"{"cmd":"amend","account":"b","id":"2","price":@,"qty":@}"#,
    r#"{"cmd":@,"account":"a","id":"1","ts":@}"#,
];

fn hostile_value() -> impl Strategy<Value = String> {
    prop_oneof![
        Just("null".to_string()),
        Just("true".to_string()),
        Just("[]".to_string()),
        Just(r#"{"a":[1,{"b":null}]}"#.to_string()),
        any::<i64>().prop_map(|value| value.to_string()),
        any::<f64>().prop_map(|value| format!("{value:?}")),
        "[0-9]{1,60}".prop_map(|digits| digits),
        "-?[0-9]{1,40}(\\.[0-9]{1,40})?".prop_map(|decimal| format!("\"{decimal}\"")),
        Just("\"1e3\"".to_string()),
        Just("\"\"".to_string()),
        Just("\"\\u0000\\n\\\"\"".to_string()),
        "\\PC{0,40}".prop_map(|text| serde_json::Value::String(text).to_string()),
        "[a-z_]{1,12}".prop_map(|word| format!("\"{word}\"")),
        Just(format!("\"{}\"", "x".repeat(10_000))),
    ]
}

fn hostile_line() -> impl Strategy<Value = String> {
    prop_oneof![
        proptest::collection::vec(any::<u8>(), 0..200)
            .prop_map(|bytes| String::from_utf8_lossy(&bytes).replace('\n', " ")),
        (0..TEMPLATES.len(), hostile_value(), hostile_value()).prop_map(
            |(index, first, second)| {
                TEMPLATES[index].replacen('@', &first, 1).replacen('@', &second, 1)
            }
        ),
    ]
}

fn first_events_of_each_line(output: &str) -> Vec<serde_json::Value> {
    output
        .lines()
        .map(|line| serde_json::from_str(line).expect("every event line is JSON"))
        .collect()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn hostile_lines_get_one_verdict_each_and_break_nothing(lines in proptest::collection::vec(hostile_line(), 1..30)) {
        let mut replay = Replay::new();
        let mut output = String::new();
        for line in SETUP {
            replay.feed_line(line, &mut output);
        }
        for (index, line) in lines.iter().enumerate() {
            output.clear();
            replay.feed_line(line, &mut output);
            let seq = (SETUP.len() + index + 1) as u64;
            let events = first_events_of_each_line(&output);
            if line.trim_ascii().is_empty() {
                prop_assert!(events.is_empty());
                continue;
            }
            prop_assert!(!events.is_empty(), "no verdict for {line:?}");
            let verdict = events[0]["ev"].as_str().unwrap_or_default().to_string();
            prop_assert!(verdict == "accepted" || verdict == "rejected", "{line:?} gave {verdict}");
            let verdicts = events.iter().filter(|event| event["ev"] == "accepted" || event["ev"] == "rejected").count();
            prop_assert_eq!(verdicts, 1);
            prop_assert!(events.iter().all(|event| event["seq"] == seq));
            if let Err(problem) = replay.check_invariants() {
                return Err(TestCaseError::fail(format!("after {line:?}: {problem}")));
            }
        }
    }
}

#[test]
fn invalid_utf8_is_malformed_and_counts_as_a_line() {
    let mut replay = Replay::new();
    let mut output = String::new();
    replay.feed_bytes(&[0xff, 0xfe, b'{', b'}'], &mut output);
    assert_eq!(output, "{\"ev\":\"rejected\",\"seq\":1,\"reason\":\"malformed\"}\n");
}

#[test]
fn deeply_nested_json_is_malformed_not_a_stack_overflow() {
    let mut replay = Replay::new();
    let mut output = String::new();
    let nested =
        format!("{{\"cmd\":\"cancel\",\"x\":{}{}}}", "[".repeat(100_000), "]".repeat(100_000));
    replay.feed_line(&nested, &mut output);
    assert!(output.contains("\"malformed\""), "{output}");
}
