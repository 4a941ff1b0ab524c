//! Futures rules (`shared/spec/futures.md`), each on a small hand-computed scenario:
//! margin and fees per lot on opening and closing fills, realised profit, the
//! close-today rule, reservations, settlement, margin changes and negative balances,
//! expiry and liquidation; and a snapshot of a futures state restoring to the same
//! state and the same future. `check_invariants` (conservation with the positions'
//! value, held equal to orders' holds plus positions' margin, reservations) runs after
//! every line.
//!
//! The contract: CNY with 2 decimals; `CU` (SHFE-style, close-today rule) tick 10,
//! lot 1, multiplier 5, margin 25000, maker fee 1.5, taker fee 3, band 5%; `IF` (no
//! close-today rule) tick 0.2, lot 1, multiplier 300, margin 100000, fees 0 and 2.3.

mod support;

use bourse_core::format::state_digest;
use bourse_core::snapshot::{decode_state, encode_state};
use bourse_core::{ExchangeConfig, Replay};
use serde_json::{json, Value};

const DEFINITIONS: [&str; 3] = [
    r#"{"cmd":"asset","asset":"CNY","decimals":2}"#,
    r#"{"cmd":"future","symbol":"CU","settle":"CNY","tick":"10","lot":"1","min_qty":"1","max_qty":"100","multiplier":"5","margin":"25000","maker_fee":"1.5","taker_fee":"3","market_band_bps":500,"close_today":true}"#,
    r#"{"cmd":"future","symbol":"IF","settle":"CNY","tick":"0.2","lot":"1","min_qty":"1","max_qty":"100","multiplier":"300","margin":"10000","maker_fee":"0","taker_fee":"2.3","market_band_bps":500}"#,
];

struct Venue {
    replay: Replay,
    seq: u64,
}

impl Venue {
    /// The definitions, and alice, bob and carol with 200000 CNY each.
    fn new() -> Venue {
        let mut venue = Venue { replay: Replay::new(), seq: 0 };
        for line in DEFINITIONS {
            venue.ok(line);
        }
        for account in ["alice", "bob", "carol"] {
            venue.ok(&json!({"cmd":"deposit","account":account,"asset":"CNY","amount":"200000"})
                .to_string());
        }
        venue
    }

    fn feed(&mut self, line: &str) -> Vec<Value> {
        self.seq += 1;
        let mut out = String::new();
        self.replay.feed_line(line, &mut out);
        if let Err(problem) = self.replay.check_invariants() {
            panic!("invariant broken after {line}: {problem}\n{out}");
        }
        out.lines().map(|text| normalized(&serde_json::from_str(text).unwrap())).collect()
    }

    fn ok(&mut self, line: &str) -> Vec<Value> {
        let events = self.feed(line);
        assert_eq!(events[0]["ev"], "accepted", "{line}: {events:#?}");
        events
    }

    fn rejected(&mut self, line: &str, reason: &str) {
        let events = self.feed(line);
        assert_eq!(events.len(), 1, "{line}: {events:#?}");
        assert_eq!(
            (events[0]["ev"].as_str(), events[0]["reason"].as_str()),
            (Some("rejected"), Some(reason)),
            "{line}"
        );
    }

    fn state(&self) -> Value {
        normalized(&serde_json::from_str(&self.replay.state_json()).unwrap())
    }

    fn balance(&self, account: &str) -> (String, String) {
        let state = self.state();
        let balance = &state["balances"][account]["CNY"];
        let text = |field: &str| balance[field].as_str().unwrap_or("0").to_string();
        (text("available"), text("held"))
    }

    fn assert_balance(&self, account: &str, available: &str, held: &str) {
        assert_eq!(self.balance(account), (available.to_string(), held.to_string()), "{account}");
    }

    fn position(&self, account: &str, symbol: &str) -> Value {
        self.state()["positions"][account][symbol].clone()
    }
}

/// Decimal strings in canonical form ("1.50" -> "1.5"), recursively.
fn normalized(value: &Value) -> Value {
    match value {
        Value::String(text) => {
            Value::String(support::canonical_decimal(text).unwrap_or_else(|| text.clone()))
        }
        Value::Array(items) => Value::Array(items.iter().map(normalized).collect()),
        Value::Object(fields) => Value::Object(
            fields.iter().map(|(key, field)| (key.clone(), normalized(field))).collect(),
        ),
        other => other.clone(),
    }
}

fn order(
    account: &str,
    id: &str,
    symbol: &str,
    side: &str,
    price: &str,
    qty: &str,
    offset: &str,
) -> String {
    json!({"cmd":"order","account":account,"id":id,"symbol":symbol,"side":side,"type":"limit",
           "price":price,"qty":qty,"offset":offset})
    .to_string()
}

fn with(line: &str, key: &str, value: Value) -> String {
    let mut command: Value = serde_json::from_str(line).unwrap();
    command[key] = value;
    command.to_string()
}

/// alice long 1 CU and bob short 1 CU, both today at 50000 (alice the maker).
fn opened() -> Venue {
    let mut venue = Venue::new();
    venue.ok(&order("alice", "a1", "CU", "buy", "50000", "1", "open"));
    venue.ok(&order("bob", "b1", "CU", "sell", "50000", "1", "open"));
    venue
}

#[test]
fn an_open_order_holds_margin_and_taker_fee_per_lot_whatever_its_price() {
    let mut venue = Venue::new();
    venue.ok(&order("alice", "a1", "CU", "buy", "50000", "2", "open"));
    venue.assert_balance("alice", "149994", "50006");
    venue.ok(&order("alice", "a2", "CU", "buy", "10", "2", "open"));
    venue.assert_balance("alice", "99988", "100012");
    venue.ok(r#"{"cmd":"cancel","account":"alice","id":"a2"}"#);
    venue.assert_balance("alice", "149994", "50006");
}

#[test]
fn an_opening_fill_keeps_the_margin_held_and_pays_each_side_its_fee() {
    let mut venue = Venue::new();
    venue.ok(&order("alice", "a1", "CU", "buy", "50000", "2", "open"));
    let events = venue.ok(&order("bob", "b1", "CU", "sell", "49990", "1", "open"));
    assert_eq!(
        events[1],
        json!({"ev":"trade","seq":8,"symbol":"CU","price":"50000","qty":"1","taker_side":"sell",
               "maker_account":"alice","maker_id":"a1","taker_account":"bob","taker_id":"b1",
               "maker_fee":"1.5","taker_fee":"3","maker_pnl":"0","taker_pnl":"0"})
    );
    // alice: 25003 of her hold used, 25000 of it stays as margin, 1.5 of the taker fee
    // back (she paid the maker's 1.5).
    venue.assert_balance("alice", "149995.5", "50003");
    venue.assert_balance("bob", "174997", "25000");
    assert_eq!(venue.state()["fees"]["CNY"], "4.5");
    assert_eq!(
        venue.position("alice", "CU"),
        json!({"long":{"history":[],"today":[["50000","1"]]}})
    );
    assert_eq!(
        venue.position("bob", "CU"),
        json!({"short":{"history":[],"today":[["50000","1"]]}})
    );
}

#[test]
fn a_closing_fill_realises_profit_and_returns_the_margin() {
    let mut venue = opened();
    venue.ok(&order("alice", "a2", "CU", "sell", "50200", "1", "close_today"));
    // A close order holds nothing.
    venue.assert_balance("alice", "174998.5", "25000");
    let events = venue.ok(&order("bob", "b2", "CU", "buy", "50200", "1", "close_today"));
    assert_eq!(events[1]["maker_pnl"], "1000"); // 1 * (50200 - 50000) * 5
    assert_eq!(events[1]["taker_pnl"], "-1000");
    venue.assert_balance("alice", "200997", "0"); // 200000 - 1.5 - 1.5 + 1000
    venue.assert_balance("bob", "198994", "0"); // 200000 - 3 - 3 - 1000
    assert_eq!(venue.state()["positions"], json!({}));
}

#[test]
fn the_close_today_rule_keeps_history_and_today_apart() {
    let mut venue = opened();
    // Today's position only: `close` (history) has nothing to take.
    venue.rejected(
        &order("alice", "a2", "CU", "sell", "50000", "1", "close"),
        "insufficient_position",
    );
    venue.ok(r#"{"cmd":"settle","symbol":"CU","price":"50000"}"#);
    // Now it is history: `close_today` has nothing, `close` has 1.
    venue.rejected(
        &order("alice", "a2", "CU", "sell", "50000", "1", "close_today"),
        "insufficient_position",
    );
    venue.ok(&order("alice", "a2", "CU", "sell", "50000", "1", "close"));
    // Reserved by a2: nothing more to close.
    venue.rejected(
        &order("alice", "a3", "CU", "sell", "50000", "1", "close"),
        "insufficient_position",
    );
    // Without the rule, `close_today` is not an offset the contract knows.
    venue.rejected(
        &order("alice", "a4", "IF", "sell", "4000", "1", "close_today"),
        "invalid_offset",
    );
}

#[test]
fn a_close_without_the_rule_takes_history_first_then_today_oldest_first() {
    let mut venue = Venue::new();
    venue.ok(&order("alice", "a1", "IF", "buy", "4000", "1", "open"));
    venue.ok(&order("bob", "b1", "IF", "sell", "4000", "1", "open"));
    venue.ok(r#"{"cmd":"settle","symbol":"IF","price":"4010"}"#);
    venue.ok(&order("alice", "a2", "IF", "buy", "4020", "1", "open"));
    venue.ok(&order("bob", "b2", "IF", "sell", "4020", "1", "open"));
    venue.ok(&order("alice", "a3", "IF", "buy", "4030", "1", "open"));
    venue.ok(&order("bob", "b3", "IF", "sell", "4030", "1", "open"));
    assert_eq!(
        venue.position("alice", "IF"),
        json!({"long":{"history":[["4010","1"]],"today":[["4020","1"],["4030","1"]]}})
    );
    venue.ok(&order("alice", "a4", "IF", "sell", "4040", "2", "close"));
    let events = venue.ok(&order("carol", "c1", "IF", "buy", "4040", "2", "open"));
    // History at 4010 then today's oldest at 4020: (30 + 20) * 300.
    assert_eq!(events[1]["maker_pnl"], "15000");
    assert_eq!(
        venue.position("alice", "IF"),
        json!({"long":{"history":[],"today":[["4030","1"]]}})
    );
}

#[test]
fn an_amend_raising_a_close_beyond_the_position_is_refused() {
    let mut venue = Venue::new();
    venue.ok(&order("alice", "a1", "IF", "buy", "4000", "2", "open"));
    venue.ok(&order("bob", "b1", "IF", "sell", "4000", "2", "open"));
    venue.ok(&order("alice", "a2", "IF", "sell", "4100", "1", "close"));
    venue.rejected(
        r#"{"cmd":"amend","account":"alice","id":"a2","qty":"3"}"#,
        "insufficient_position",
    );
    venue.ok(r#"{"cmd":"amend","account":"alice","id":"a2","qty":"2"}"#);
    venue.rejected(
        &order("alice", "a3", "IF", "sell", "4100", "1", "close"),
        "insufficient_position",
    );
}

#[test]
fn settlement_expires_day_orders_marks_positions_and_makes_them_history() {
    let mut venue = opened();
    venue.ok(&order("alice", "a2", "CU", "sell", "50500", "1", "close_today"));
    venue.ok(&with(&order("carol", "c1", "CU", "buy", "40000", "1", "open"), "tif", json!("gfd")));
    venue.ok(&order("carol", "c2", "CU", "buy", "40000", "1", "open"));
    let events = venue.ok(r#"{"cmd":"settle","symbol":"CU","price":"50100"}"#);
    assert_eq!(
        events,
        vec![
            json!({"ev":"accepted","seq":12}),
            json!({"ev":"done","seq":12,"account":"alice","id":"a2","reason":"expired","filled":"0"}),
            json!({"ev":"done","seq":12,"account":"carol","id":"c1","reason":"expired","filled":"0"}),
            json!({"ev":"settled","seq":12,"account":"alice","symbol":"CU","side":"long","qty":"1","price":"50100","pnl":"500"}),
            json!({"ev":"settled","seq":12,"account":"bob","symbol":"CU","side":"short","qty":"1","price":"50100","pnl":"-500"}),
        ]
    );
    assert_eq!(
        venue.position("alice", "CU"),
        json!({"long":{"history":[["50100","1"]],"today":[]}})
    );
    venue.assert_balance("alice", "175498.5", "25000");
    venue.assert_balance("bob", "174497", "25000");
    // The gtc order stays.
    assert_eq!(venue.state()["books"]["CU"]["bids"][0]["id"], "c2");
    // Positions are valued at the settlement price until the next trade.
    let cu = bourse_core::ids::InstrumentId(0);
    let mark = |venue: &Venue| venue.replay.exchange().positions(cu).unwrap().mark_price();
    assert_eq!(mark(&venue), Some(bourse_core::Price(50100)));
    venue.ok(&order("bob", "b3", "CU", "sell", "40000", "1", "open"));
    assert_eq!(mark(&venue), Some(bourse_core::Price(40000)));
}

#[test]
fn a_higher_margin_may_leave_available_below_zero_and_then_only_closes_pass() {
    let mut venue = Venue::new();
    venue.ok(r#"{"cmd":"deposit","account":"dave","asset":"CNY","amount":"30000"}"#);
    venue.ok(&order("dave", "d1", "CU", "buy", "50000", "1", "open"));
    venue.ok(&order("bob", "b1", "CU", "sell", "50000", "1", "open"));
    venue.assert_balance("dave", "4998.5", "25000");
    venue.ok(r#"{"cmd":"margin","symbol":"CU","margin":"40000"}"#);
    venue.assert_balance("dave", "-10001.5", "40000");
    venue.rejected(&order("dave", "d2", "CU", "buy", "10", "1", "open"), "insufficient_funds");
    venue.rejected(
        r#"{"cmd":"withdraw","account":"dave","asset":"CNY","amount":"1"}"#,
        "insufficient_funds",
    );
    venue.ok(&order("dave", "d3", "CU", "sell", "49000", "1", "close_today"));
    venue.rejected(r#"{"cmd":"margin","symbol":"CU","margin":"0"}"#, "invalid_amount");
    venue.rejected(r#"{"cmd":"margin","symbol":"CU","margin":"1.001"}"#, "invalid_amount");
    venue.rejected(r#"{"cmd":"margin","symbol":"NOPE","margin":"1"}"#, "unknown_symbol");
}

#[test]
fn expiry_closes_everything_and_the_symbol_is_gone_but_taken() {
    let mut venue = opened();
    venue.ok(&order("carol", "c1", "CU", "buy", "40000", "1", "open"));
    let events = venue.ok(r#"{"cmd":"settle","symbol":"CU","price":"50300","final":true}"#);
    let kinds: Vec<&str> = events.iter().map(|event| event["ev"].as_str().unwrap()).collect();
    assert_eq!(kinds, ["accepted", "done", "settled", "settled"]);
    venue.assert_balance("alice", "201498.5", "0"); // + 300 * 5
    venue.assert_balance("bob", "198497", "0");
    venue.assert_balance("carol", "200000", "0");
    assert_eq!(venue.state()["positions"], json!({}));
    venue.rejected(&order("alice", "a9", "CU", "buy", "50000", "1", "open"), "unknown_symbol");
    venue.rejected(r#"{"cmd":"settle","symbol":"CU","price":"50000"}"#, "unknown_symbol");
    venue.rejected(DEFINITIONS[1], "duplicate_symbol");
}

#[test]
fn liquidation_cancels_the_accounts_orders_then_closes_at_market() {
    let mut venue = opened();
    venue.ok(&order("bob", "b2", "CU", "sell", "60000", "1", "open"));
    venue.ok(&order("carol", "c1", "CU", "sell", "50100", "1", "open"));
    let events = venue.ok(r#"{"cmd":"liquidate","account":"bob","symbol":"CU"}"#);
    assert_eq!(events[0], json!({"ev":"accepted","seq":11,"account":"bob"}));
    assert_eq!(
        events[1],
        json!({"ev":"done","seq":11,"account":"bob","id":"b2","reason":"canceled","filled":"0"})
    );
    assert_eq!(events[2]["taker_id"], "liq-11-short");
    assert_eq!(events[2]["taker_pnl"], "-500"); // (50000 - 50100) * 5
    assert_eq!(events[2]["maker_pnl"], "0");
    let done: Vec<&Value> = events.iter().filter(|event| event["ev"] == "done").collect();
    assert!(done.iter().any(|event| event["id"] == "liq-11-short" && event["reason"] == "filled"));
    assert_eq!(venue.position("bob", "CU"), Value::Null);
    // Nothing left to liquidate.
    venue.rejected(r#"{"cmd":"liquidate","account":"bob","symbol":"CU"}"#, "unknown_order");
    venue.rejected(r#"{"cmd":"liquidate","account":"nobody","symbol":"CU"}"#, "unknown_order");
    venue.rejected(r#"{"cmd":"liquidate","account":"bob","symbol":"NOPE"}"#, "unknown_symbol");
}

#[test]
fn liquidation_against_an_empty_book_expires_and_keeps_the_position() {
    let mut venue = opened();
    let events = venue.ok(r#"{"cmd":"liquidate","account":"alice","symbol":"CU"}"#);
    assert_eq!(
        events,
        vec![
            json!({"ev":"accepted","seq":9,"account":"alice"}),
            json!({"ev":"done","seq":9,"account":"alice","id":"liq-9-long","reason":"expired","filled":"0"}),
        ]
    );
    assert_eq!(
        venue.position("alice", "CU"),
        json!({"long":{"history":[],"today":[["50000","1"]]}})
    );
}

#[test]
fn rejections_come_in_the_contracts_order() {
    let mut venue = Venue::new();
    venue.rejected(&order("alice", "x", "NOPE", "buy", "1", "1", "close"), "unknown_symbol");
    venue.rejected(&order("alice", "x", "CU", "buy", "5", "1", "close_today"), "invalid_price");
    venue.rejected(&order("alice", "x", "CU", "buy", "10", "0", "close"), "invalid_qty");
    venue.rejected(&order("alice", "x", "IF", "buy", "4000", "1", "close_today"), "invalid_offset");
    venue.rejected(&order("nobody", "x", "CU", "buy", "10", "1", "close"), "insufficient_position");
    venue.rejected(&order("nobody", "x", "CU", "buy", "10", "1", "open"), "insufficient_funds");
    venue.rejected(&order("alice", "x", "CU", "buy", "10", "9", "open"), "insufficient_funds");
    let malformed = venue.feed(&order("alice", "x", "CU", "buy", "10", "1", "later"));
    assert_eq!(malformed[0], json!({"ev":"rejected","seq":14,"reason":"malformed"}));
    // A valid offset on a spot order is ignored; an invalid one is malformed there too.
    venue.ok(r#"{"cmd":"asset","asset":"BTC","decimals":8}"#);
    venue.ok(r#"{"cmd":"instrument","symbol":"BTC-CNY","base":"BTC","quote":"CNY","tick":"1","lot":"0.01","min_qty":"0.01","max_qty":"10","maker_fee_bps":0,"taker_fee_bps":0,"market_band_bps":100}"#);
    venue.ok(&with(
        &order("alice", "s1", "BTC-CNY", "buy", "100", "1", "close_today"),
        "tif",
        json!("gfd"),
    ));
    venue.assert_balance("alice", "199900", "100");
    venue.rejected(r#"{"cmd":"future","symbol":"BTC-CNY","settle":"CNY","tick":"1","lot":"1","min_qty":"1","max_qty":"1","multiplier":"1","margin":"1","maker_fee":"0","taker_fee":"0","market_band_bps":0}"#, "duplicate_symbol");
    venue.rejected(r#"{"cmd":"future","symbol":"F","settle":"XYZ","tick":"1","lot":"1","min_qty":"1","max_qty":"1","multiplier":"1","margin":"1","maker_fee":"0","taker_fee":"0","market_band_bps":0}"#, "unknown_asset");
    for bad in [
        r#""margin":"0""#,
        r#""maker_fee":"2""#,
        r#""multiplier":"0.001""#,
        r#""margin":"0.001""#,
        r#""maker_fee":"-1""#,
    ] {
        let line = format!(
            r#"{{"cmd":"future","symbol":"F","settle":"CNY","tick":"1","lot":"1","min_qty":"1","max_qty":"1","multiplier":"1","margin":"1","maker_fee":"0","taker_fee":"1","market_band_bps":0,{bad}}}"#
        );
        // A later duplicate key is malformed in the replay format, so rebuild the line.
        let mut command: Value =
            serde_json::from_str(&line.replace(&format!(",{bad}"), "")).unwrap();
        let (key, value) = bad.split_once(':').unwrap();
        command[key.trim_matches('"')] = serde_json::from_str(value).unwrap();
        venue.rejected(&command.to_string(), "invalid_instrument");
    }
    venue.rejected(r#"{"cmd":"settle","symbol":"BTC-CNY","price":"100"}"#, "unknown_symbol");
    venue.rejected(r#"{"cmd":"settle","symbol":"CU","price":"15"}"#, "invalid_price");
}

#[test]
fn a_snapshot_of_a_futures_state_restores_the_same_state_and_the_same_future() {
    let mut venue = opened();
    venue.ok(&order("alice", "a2", "CU", "sell", "50500", "1", "close_today"));
    venue.ok(&with(&order("carol", "c1", "CU", "buy", "40000", "1", "open"), "tif", json!("gfd")));
    venue.ok(&order("carol", "c2", "IF", "buy", "4000", "1", "open"));
    let mut bytes = Vec::new();
    encode_state(venue.replay.exchange(), &mut bytes);
    let restored = decode_state(&bytes, ExchangeConfig::default()).expect("a valid snapshot");
    assert_eq!(state_digest(&restored), state_digest(venue.replay.exchange()));
    let mut again = Vec::new();
    encode_state(&restored, &mut again);
    assert_eq!(again, bytes, "the encoding is canonical");
    let mut continued = Replay::from_exchange(restored, venue.seq);
    let mut out_restored = String::new();
    let mut out_live = String::new();
    for line in [
        r#"{"cmd":"settle","symbol":"CU","price":"50100"}"#,
        r#"{"cmd":"margin","symbol":"CU","margin":"30000"}"#,
        r#"{"cmd":"liquidate","account":"bob","symbol":"CU"}"#,
    ] {
        continued.feed_line(line, &mut out_restored);
        venue.replay.feed_line(line, &mut out_live);
    }
    assert_eq!(out_restored, out_live);
    assert_eq!(continued.state_json(), venue.replay.state_json());
}

#[test]
fn a_venue_keeps_futures_orders_and_liquidation_fills_and_snapshots_them() {
    use bourse_core::format::parse_line;
    use bourse_core::snapshot::{decode_venue, encode_venue};
    use bourse_core::{Exchange, Seq, Venue};

    let mut venue = Venue::new(Exchange::default(), true);
    let mut events = Vec::new();
    let mut lines: Vec<String> = DEFINITIONS.iter().map(|line| line.to_string()).collect();
    for account in ["alice", "bob", "carol"] {
        lines.push(
            json!({"cmd":"deposit","account":account,"asset":"CNY","amount":"200000"}).to_string(),
        );
    }
    lines.extend([
        order("alice", "a1", "CU", "buy", "50000", "1", "open"),
        order("bob", "b1", "CU", "sell", "50000", "1", "open"),
        with(&order("alice", "a2", "CU", "sell", "50500", "1", "close_today"), "tif", json!("gfd")),
        order("carol", "c1", "CU", "sell", "50100", "1", "open"),
        order("bob", "b2", "CU", "sell", "60000", "1", "open"),
        r#"{"cmd":"liquidate","account":"bob","symbol":"CU"}"#.to_string(),
    ]);
    for (index, line) in lines.iter().enumerate() {
        let parsed = parse_line(line).unwrap();
        venue.apply(Seq(index as u64 + 1), parsed.ts, &parsed.command, &mut events);
        venue.check_invariants().unwrap();
    }
    let activity = venue.activity().unwrap();
    let bob = venue.exchange().ledger().find_account("bob").unwrap();
    // b1 filled, b2 canceled by the liquidation; the liquidation's fill is kept under
    // the command's seq.
    assert_eq!(activity.open_order_count(bob), 0);
    let liquidation_seq = lines.len() as u64;
    assert!(activity
        .fills(bob)
        .any(|fill| fill.order_id.0 == liquidation_seq && fill.client_id == "liq-12-short"));
    let alice = venue.exchange().ledger().find_account("alice").unwrap();
    let a2 = activity.order_by_client(alice, "a2").unwrap();
    assert_eq!(
        (a2.offset, a2.time_in_force),
        (bourse_core::Offset::CloseToday, bourse_core::TimeInForce::GoodForDay)
    );

    let mut bytes = Vec::new();
    encode_venue(&venue, &mut bytes);
    let restored = decode_venue(&bytes, ExchangeConfig::default(), true).unwrap();
    restored.check_invariants().unwrap();
    let mut again = Vec::new();
    encode_venue(&restored, &mut again);
    assert_eq!(again, bytes);
}

#[test]
fn the_account_view_values_positions_at_the_mark_and_starts_a_new_day_at_settlement() {
    use bourse_core::account_view::account_view;
    use bourse_core::ids::AssetId;

    let mut venue = opened();
    fn exchange(venue: &Venue) -> &bourse_core::Exchange {
        venue.replay.exchange()
    }
    let alice = exchange(&venue).ledger().find_account("alice").unwrap();
    let cny = AssetId(0);
    let (view, positions) = account_view(exchange(&venue), alice, cny).unwrap();
    // Units of 0.01 CNY.
    assert_eq!(view.balance, 19_999_850); // 200000 - 1.5 of maker fee
    assert_eq!((view.deposit, view.commission, view.close_profit), (20_000_000, 150, 0));
    assert_eq!((view.static_balance, view.pre_balance), (20_000_000, 0));
    assert_eq!((view.margin, view.frozen_margin, view.position_profit), (2_500_000, 0, 0));
    assert_eq!((view.available, view.withdrawable), (17_499_850, 17_499_850));
    assert_eq!(positions[0].long.volume_today, bourse_core::Qty(1));

    // A trade at 50200 moves the mark: +200 * 5 unrealised for the long.
    venue.ok(&order("carol", "c1", "CU", "sell", "50200", "1", "open"));
    venue.ok(&order("bob", "b2", "CU", "buy", "50200", "1", "open"));
    let (view, positions) = account_view(exchange(&venue), alice, cny).unwrap();
    assert_eq!((view.position_profit, view.float_profit), (100_000, 100_000));
    assert_eq!(view.balance, 20_099_850);
    assert_eq!(view.withdrawable, 17_499_850, "unrealised profit is not spendable");
    assert_eq!(positions[0].long.position_cost, 25_000_000); // 50000 * 5 in 0.01 units

    // Settlement at 50100: the mark is paid, the day starts again.
    venue.ok(r#"{"cmd":"settle","symbol":"CU","price":"50100"}"#);
    let (view, positions) = account_view(exchange(&venue), alice, cny).unwrap();
    assert_eq!((view.position_profit, view.float_profit), (0, 50_000));
    assert_eq!((view.deposit, view.commission, view.close_profit), (0, 0, 0));
    assert_eq!(view.balance, 20_049_850);
    assert_eq!((view.pre_balance, view.static_balance), (20_049_850, 20_049_850));
    assert_eq!(
        (positions[0].long.volume_his, positions[0].long.volume_today),
        (bourse_core::Qty(1), bourse_core::Qty(0))
    );
    // The open price stays what opening cost; the position price is the settlement's.
    assert_eq!(positions[0].long.open_cost, 25_000_000);
    assert_eq!(positions[0].long.position_cost, 25_050_000);

    // A close_today order freezes today's volume only under the close-today rule.
    venue.ok(&order("alice", "a9", "CU", "sell", "60000", "1", "close"));
    let (_, positions) = account_view(exchange(&venue), alice, cny).unwrap();
    assert_eq!(
        (positions[0].long.frozen_his, positions[0].long.frozen_today),
        (bourse_core::Qty(1), bourse_core::Qty(0))
    );
    assert!(account_view(exchange(&venue), alice, AssetId(7)).is_none());
}
