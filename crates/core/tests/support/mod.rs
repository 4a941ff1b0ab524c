//! Harness for the rule tests of the replay format (`/work/shared/spec/replay-format.md`).
//!
//! [`Exchange`] feeds command lines to a [`Replay`] one at a time. After every line it
//! checks the engine's own invariants and, independently, that every asset is
//! conserved in the final-state document (accounts' `available + held` plus the fee
//! balance equals accepted deposits minus withdrawals).
//!
//! Numbers compare by value: the engine may print a decimal in any exact form
//! ("1.50", "1.5"), so decimal fields are normalised on both sides first. Expected
//! events are written as JSON lines without `seq`: every event must carry the seq of
//! the line that caused it, and the harness fills it in (an expectation that spells
//! out `seq` keeps its own).
#![allow(dead_code)]

use std::collections::BTreeMap;
use std::fmt;

use bourse_core::replay::Replay;
use serde_json::{Map, Value};

/// Event and book-entry fields that hold decimal strings.
const DECIMAL_FIELDS: [&str; 7] =
    ["price", "qty", "maker_fee", "taker_fee", "filled", "available", "held"];

/// Fixed-point scale of the harness's own conservation arithmetic: 10^18, the finest
/// unit an asset may have.
const ATTO_PER_UNIT: i128 = 1_000_000_000_000_000_000;

/// What one input line produced.
pub struct Fed {
    pub seq: u64,
    pub line: String,
    pub events: Vec<Value>,
}

/// A replay under test plus what the harness needs to check conservation itself.
pub struct Exchange {
    replay: Replay,
    seq: u64,
    /// Accepted deposits minus accepted withdrawals per asset, in 10^-18 units.
    net_deposits_atto: BTreeMap<String, i128>,
}

impl Default for Exchange {
    fn default() -> Self {
        Self::new()
    }
}

impl Exchange {
    /// An exchange with nothing declared.
    pub fn new() -> Self {
        Exchange { replay: Replay::new(), seq: 0, net_deposits_atto: BTreeMap::new() }
    }

    /// An exchange with the standard definitions (seq 1 to 5), each asserted accepted:
    ///
    /// - assets BTC (8 decimals), USD (2 decimals), ETH (3 decimals);
    /// - `BTC-USD`: tick 1, lot 0.01, qty 0.1..=100, no fees, market band 10%;
    /// - `ETH-USD`: tick 0.01, lot 1, qty 1..=1000, maker 10 bps, taker 25 bps,
    ///   market band 10%.
    pub fn standard() -> Self {
        let mut exchange = Exchange::new();
        for line in standard_definitions() {
            exchange.ok(line);
        }
        exchange
    }

    /// The standard exchange with alice, bob and carol each holding 10 BTC and `usd` USD.
    pub fn funded(usd: &str) -> Self {
        let mut exchange = Exchange::standard();
        for account in ["alice", "bob", "carol"] {
            exchange.ok(deposit(account, "BTC", "10"));
            exchange.ok(deposit(account, "USD", usd));
        }
        exchange
    }

    /// Feeds one line; checks invariants and conservation afterwards.
    pub fn feed(&mut self, line: impl fmt::Display) -> Fed {
        let line = line.to_string();
        self.seq += 1;
        let mut out = String::new();
        self.replay.feed_line(&line, &mut out);
        if let Err(message) = self.replay.check_invariants() {
            panic!(
                "check_invariants failed after seq {}: {message}\n  line: {line}\n  output: {out}",
                self.seq
            );
        }
        let events = parse_events(&out, self.seq, &line);
        self.record_money_movement(&line, &events);
        self.assert_conserved();
        Fed { seq: self.seq, line, events }
    }

    /// Feeds one line and asserts that its first event is `accepted`.
    pub fn ok(&mut self, line: impl fmt::Display) -> Fed {
        let fed = self.feed(line);
        let first = fed.events.first().and_then(|event| event["ev"].as_str());
        if first != Some("accepted") {
            panic!(
                "expected seq {} to be accepted\n  line: {}\n  events:\n{}",
                fed.seq,
                fed.line,
                listing(&fed.events, "    ")
            );
        }
        fed
    }

    /// The final-state document as JSON.
    pub fn state(&self) -> Value {
        let text = self.replay.state_json();
        serde_json::from_str(&text)
            .unwrap_or_else(|error| panic!("state_json is not JSON ({error}): {text}"))
    }

    /// `(available, held)` of one account in one asset, normalised; absent is zero.
    pub fn balance(&self, account: &str, asset: &str) -> (String, String) {
        let state = self.state();
        let entry = &state["balances"][account][asset];
        (decimal_value(&entry["available"]), decimal_value(&entry["held"]))
    }

    pub fn assert_balance(&self, account: &str, asset: &str, available: &str, held: &str) {
        let actual = self.balance(account, asset);
        let expected = (normalized(available), normalized(held));
        assert_eq!(
            actual,
            expected,
            "balance of {account} in {asset} as (available, held)\n  state: {}",
            self.state()
        );
    }

    pub fn assert_fee(&self, asset: &str, amount: &str) {
        let state = self.state();
        let actual = decimal_value(&state["fees"][asset]);
        assert_eq!(actual, normalized(amount), "fee balance in {asset}\n  state: {state}");
    }

    /// Asserts both sides of a book, each entry `(account, id, price, qty)` in
    /// priority order.
    pub fn assert_book(&self, symbol: &str, bids: &[BookEntry], asks: &[BookEntry]) {
        let state = self.state();
        let book = &state["books"][symbol];
        let expected = (normalized_entries(bids), normalized_entries(asks));
        let actual = (book_side(&book["bids"]), book_side(&book["asks"]));
        assert_eq!(
            actual, expected,
            "book {symbol} as (bids, asks), each (account, id, price, qty)\n  state: {state}"
        );
    }

    /// For every asset: the sum over accounts of `available + held`, plus the fee
    /// balance, equals accepted deposits minus accepted withdrawals.
    pub fn assert_conserved(&self) {
        let state = self.state();
        let mut totals_atto: BTreeMap<String, i128> = BTreeMap::new();
        if let Some(accounts) = state["balances"].as_object() {
            for (account, assets) in accounts {
                for (asset, entry) in assets.as_object().into_iter().flatten() {
                    for field in ["available", "held"] {
                        let amount = atto(&decimal_value(&entry[field]));
                        assert!(
                            amount >= 0,
                            "negative {field} for {account} in {asset}\n  state: {state}"
                        );
                        add_atto(&mut totals_atto, asset, amount);
                    }
                }
            }
        }
        if let Some(fees) = state["fees"].as_object() {
            for (asset, amount) in fees {
                add_atto(&mut totals_atto, asset, atto(&decimal_value(amount)));
            }
        }
        let mut assets: Vec<&String> = totals_atto.keys().collect();
        assets.extend(self.net_deposits_atto.keys());
        for asset in assets {
            let held_everywhere = totals_atto.get(asset).copied().unwrap_or(0);
            let deposited = self.net_deposits_atto.get(asset).copied().unwrap_or(0);
            assert_eq!(
                held_everywhere, deposited,
                "{asset} not conserved after seq {} (10^-18 units: accounts + fees vs \
                 deposits - withdrawals)\n  state: {state}",
                self.seq
            );
        }
    }

    fn record_money_movement(&mut self, line: &str, events: &[Value]) {
        let accepted = events.first().and_then(|event| event["ev"].as_str()) == Some("accepted");
        let Ok(command) = serde_json::from_str::<Value>(line) else {
            return;
        };
        let sign = match command["cmd"].as_str() {
            Some("deposit") => 1,
            Some("withdraw") => -1,
            _ => return,
        };
        if !accepted {
            return;
        }
        let asset = command["asset"].as_str().expect("accepted deposit has an asset");
        let amount = command["amount"].as_str().expect("accepted deposit has an amount");
        add_atto(&mut self.net_deposits_atto, asset, sign * atto(amount));
    }
}

/// A book entry as the tests write it: `(account, id, price, qty)`.
pub type BookEntry<'a> = (&'a str, &'a str, &'a str, &'a str);

/// Asserts the events of one line exactly and in order.
pub fn assert_events(fed: &Fed, expected: &[&str]) {
    assert_events_then_any_order(fed, expected, &[]);
}

/// Asserts the events of one line: first `in_order` exactly and in order, then the
/// `any_order` events in some order (the `done`s of one step that finishes several
/// orders, which the spec lets come in either order).
pub fn assert_events_then_any_order(fed: &Fed, in_order: &[&str], any_order: &[&str]) {
    let expected_in_order: Vec<Value> =
        in_order.iter().map(|text| expected_event(text, fed.seq)).collect();
    let expected_any_order: Vec<Value> =
        any_order.iter().map(|text| expected_event(text, fed.seq)).collect();
    let actual: Vec<Value> = fed.events.iter().map(normalized_event).collect();

    let matches = actual.len() == expected_in_order.len() + expected_any_order.len()
        && actual[..expected_in_order.len()] == expected_in_order[..]
        && is_permutation(&actual[expected_in_order.len()..], &expected_any_order);
    if !matches {
        let mut expected_text = listing(&expected_in_order, "    ");
        if !expected_any_order.is_empty() {
            expected_text.push_str("    then, in any order:\n");
            expected_text.push_str(&listing(&expected_any_order, "    ~ "));
        }
        panic!(
            "events of seq {} differ\n  line: {}\n  expected:\n{}  actual:\n{}",
            fed.seq,
            fed.line,
            expected_text,
            listing(&actual, "    ")
        );
    }
}

/// Asserts that a line produced no events at all (a blank line).
pub fn assert_no_events(fed: &Fed) {
    assert!(
        fed.events.is_empty(),
        "expected no events for seq {} ({:?}), got:\n{}",
        fed.seq,
        fed.line,
        listing(&fed.events, "    ")
    );
}

/// The decimal string in canonical form ("007.50" -> "7.5", "-0" -> "0"); `None` if
/// `text` is not a decimal string of the spec (`-?[0-9]+(\.[0-9]+)?`).
pub fn canonical_decimal(text: &str) -> Option<String> {
    let (negative, body) = match text.strip_prefix('-') {
        Some(rest) => (true, rest),
        None => (false, text),
    };
    let (integer, fraction) = match body.split_once('.') {
        Some((integer, fraction)) => (integer, Some(fraction)),
        None => (body, None),
    };
    let all_digits = |part: &str| !part.is_empty() && part.bytes().all(|b| b.is_ascii_digit());
    let fraction_ok = match fraction {
        Some(fraction) => all_digits(fraction),
        None => true,
    };
    if !all_digits(integer) || !fraction_ok {
        return None;
    }
    let integer = match integer.trim_start_matches('0') {
        "" => "0",
        trimmed => trimmed,
    };
    let fraction = fraction.unwrap_or("").trim_end_matches('0');
    let mut canonical = String::new();
    if negative && !(integer == "0" && fraction.is_empty()) {
        canonical.push('-');
    }
    canonical.push_str(integer);
    if !fraction.is_empty() {
        canonical.push('.');
        canonical.push_str(fraction);
    }
    Some(canonical)
}

fn normalized(text: &str) -> String {
    canonical_decimal(text).unwrap_or_else(|| panic!("not a decimal string: {text:?}"))
}

/// A decimal field of the state; absent (null) is zero. Quantities must be decimal
/// strings.
fn decimal_value(value: &Value) -> String {
    match value {
        Value::Null => "0".to_string(),
        Value::String(text) => canonical_decimal(text)
            .unwrap_or_else(|| panic!("state holds a non-decimal string: {text:?}")),
        other => panic!("state holds a decimal as {other}, not as a decimal string"),
    }
}

fn normalized_event(event: &Value) -> Value {
    let mut event = event.clone();
    if let Some(fields) = event.as_object_mut() {
        for field in DECIMAL_FIELDS {
            if let Some(Value::String(text)) = fields.get(field) {
                if let Some(canonical) = canonical_decimal(text) {
                    fields.insert(field.to_string(), Value::String(canonical));
                }
            }
        }
    }
    event
}

fn expected_event(text: &str, seq: u64) -> Value {
    let mut event: Value = serde_json::from_str(text)
        .unwrap_or_else(|error| panic!("expected event is not JSON ({error}): {text}"));
    let fields =
        event.as_object_mut().unwrap_or_else(|| panic!("expected event is not an object: {text}"));
    fields.entry("seq").or_insert(Value::from(seq));
    normalized_event(&event)
}

fn parse_events(out: &str, seq: u64, line: &str) -> Vec<Value> {
    assert!(
        out.is_empty() || out.ends_with('\n'),
        "output of seq {seq} does not end in a newline: {out:?}\n  line: {line}"
    );
    out.lines()
        .map(|text| {
            let event: Value = serde_json::from_str(text).unwrap_or_else(|error| {
                panic!(
                    "seq {seq} emitted a line that is not JSON ({error}): {text:?}\n  line: {line}"
                )
            });
            assert!(
                event["ev"].is_string(),
                "event without \"ev\" from seq {seq}: {text}\n  line: {line}"
            );
            assert_eq!(
                event["seq"].as_u64(),
                Some(seq),
                "every event carries the seq of the line that caused it: {text}\n  line: {line}"
            );
            event
        })
        .collect()
}

fn is_permutation(actual: &[Value], expected: &[Value]) -> bool {
    let mut unmatched: Vec<&Value> = expected.iter().collect();
    for event in actual {
        match unmatched.iter().position(|candidate| *candidate == event) {
            Some(index) => {
                unmatched.swap_remove(index);
            }
            None => return false,
        }
    }
    unmatched.is_empty()
}

fn listing(events: &[Value], prefix: &str) -> String {
    if events.is_empty() {
        return format!("{prefix}(none)\n");
    }
    events.iter().map(|event| format!("{prefix}{}\n", render(event))).collect()
}

/// One event as JSON with `ev` and `seq` first, the other fields in name order.
fn render(event: &Value) -> String {
    let Some(fields) = event.as_object() else {
        return event.to_string();
    };
    let leading = ["ev", "seq"];
    let ordered = leading
        .iter()
        .filter_map(|key| fields.get_key_value(*key))
        .chain(fields.iter().filter(|(key, _)| !leading.contains(&key.as_str())));
    let parts: Vec<String> =
        ordered.map(|(key, value)| format!("{}:{value}", Value::from(key.as_str()))).collect();
    format!("{{{}}}", parts.join(","))
}

fn book_side(side: &Value) -> Vec<(String, String, String, String)> {
    let Some(entries) = side.as_array() else {
        assert!(side.is_null(), "book side is not an array: {side}");
        return Vec::new();
    };
    entries
        .iter()
        .map(|entry| {
            let text = |field: &str| {
                entry[field]
                    .as_str()
                    .unwrap_or_else(|| panic!("book entry without string {field}: {entry}"))
                    .to_string()
            };
            (text("account"), text("id"), normalized(&text("price")), normalized(&text("qty")))
        })
        .collect()
}

fn normalized_entries(entries: &[BookEntry]) -> Vec<(String, String, String, String)> {
    entries
        .iter()
        .map(|(account, id, price, qty)| {
            (account.to_string(), id.to_string(), normalized(price), normalized(qty))
        })
        .collect()
}

/// A decimal string in 10^-18 units.
fn atto(text: &str) -> i128 {
    let canonical = normalized(text);
    let (negative, body) = match canonical.strip_prefix('-') {
        Some(rest) => (true, rest),
        None => (false, canonical.as_str()),
    };
    let (integer, fraction) = body.split_once('.').unwrap_or((body, ""));
    assert!(fraction.len() <= 18, "more than 18 decimals: {text}");
    let integer: i128 =
        integer.parse().unwrap_or_else(|_| panic!("amount out of the harness's range: {text}"));
    let fraction: i128 = format!("{fraction:0<18}").parse().expect("18 digits");
    let magnitude = integer
        .checked_mul(ATTO_PER_UNIT)
        .and_then(|units| units.checked_add(fraction))
        .unwrap_or_else(|| panic!("amount out of the harness's range: {text}"));
    if negative {
        -magnitude
    } else {
        magnitude
    }
}

fn add_atto(totals: &mut BTreeMap<String, i128>, asset: &str, amount: i128) {
    let total = totals.entry(asset.to_string()).or_insert(0);
    *total = total
        .checked_add(amount)
        .unwrap_or_else(|| panic!("{asset} total out of the harness's range"));
}

/// A command line under construction; renders as one JSON object.
#[derive(Clone, Debug)]
pub struct Cmd(Map<String, Value>);

impl Cmd {
    pub fn new(cmd: &str) -> Self {
        Cmd(Map::new()).with("cmd", cmd)
    }

    /// Sets (or replaces) a field.
    pub fn with(mut self, key: &str, value: impl Into<Value>) -> Self {
        self.0.insert(key.to_string(), value.into());
        self
    }

    /// Removes a field.
    pub fn without(mut self, key: &str) -> Self {
        self.0.remove(key);
        self
    }

    pub fn tif(self, tif: &str) -> Self {
        self.with("tif", tif)
    }

    pub fn stp(self, stp: &str) -> Self {
        self.with("stp", stp)
    }

    pub fn post_only(self) -> Self {
        self.with("post_only", true)
    }

    /// Moves an order to another instrument.
    pub fn on(self, symbol: &str) -> Self {
        self.with("symbol", symbol)
    }
}

impl fmt::Display for Cmd {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(formatter, "{}", Value::Object(self.0.clone()))
    }
}

/// The standard definitions, in order (see [`Exchange::standard`]).
pub fn standard_definitions() -> [Cmd; 5] {
    [
        asset("BTC", 8),
        asset("USD", 2),
        asset("ETH", 3),
        instrument("BTC-USD", "BTC", "USD"),
        instrument("ETH-USD", "ETH", "USD")
            .with("tick", "0.01")
            .with("lot", "1")
            .with("min_qty", "1")
            .with("max_qty", "1000")
            .with("maker_fee_bps", 10)
            .with("taker_fee_bps", 25),
    ]
}

pub fn asset(name: &str, decimals: i64) -> Cmd {
    Cmd::new("asset").with("asset", name).with("decimals", decimals)
}

/// An instrument with tick 1, lot 0.01, qty 0.1..=100, no fees and a 10% market band;
/// override fields with [`Cmd::with`].
pub fn instrument(symbol: &str, base: &str, quote: &str) -> Cmd {
    Cmd::new("instrument")
        .with("symbol", symbol)
        .with("base", base)
        .with("quote", quote)
        .with("tick", "1")
        .with("lot", "0.01")
        .with("min_qty", "0.1")
        .with("max_qty", "100")
        .with("maker_fee_bps", 0)
        .with("taker_fee_bps", 0)
        .with("market_band_bps", 1000)
}

pub fn deposit(account: &str, asset: &str, amount: &str) -> Cmd {
    Cmd::new("deposit").with("account", account).with("asset", asset).with("amount", amount)
}

pub fn withdraw(account: &str, asset: &str, amount: &str) -> Cmd {
    Cmd::new("withdraw").with("account", account).with("asset", asset).with("amount", amount)
}

fn order(account: &str, id: &str, side: &str) -> Cmd {
    Cmd::new("order")
        .with("account", account)
        .with("id", id)
        .with("symbol", "BTC-USD")
        .with("side", side)
}

/// A limit buy on BTC-USD (gtc unless changed).
pub fn buy(account: &str, id: &str, price: &str, qty: &str) -> Cmd {
    order(account, id, "buy").with("type", "limit").with("price", price).with("qty", qty)
}

/// A limit sell on BTC-USD (gtc unless changed).
pub fn sell(account: &str, id: &str, price: &str, qty: &str) -> Cmd {
    order(account, id, "sell").with("type", "limit").with("price", price).with("qty", qty)
}

pub fn market_buy(account: &str, id: &str, qty: &str) -> Cmd {
    order(account, id, "buy").with("type", "market").with("qty", qty)
}

/// A market buy on BTC-USD that names what it spends (`quote_qty`, orders.md) instead
/// of a quantity.
pub fn spend(account: &str, id: &str, quote_qty: &str) -> Cmd {
    order(account, id, "buy").with("type", "market").with("quote_qty", quote_qty)
}

pub fn market_sell(account: &str, id: &str, qty: &str) -> Cmd {
    order(account, id, "sell").with("type", "market").with("qty", qty)
}

pub fn cancel(account: &str, id: &str) -> Cmd {
    Cmd::new("cancel").with("account", account).with("id", id)
}

pub fn amend_price(account: &str, id: &str, price: &str) -> Cmd {
    Cmd::new("amend").with("account", account).with("id", id).with("price", price)
}

pub fn amend_qty(account: &str, id: &str, qty: &str) -> Cmd {
    Cmd::new("amend").with("account", account).with("id", id).with("qty", qty)
}

pub fn amend(account: &str, id: &str, price: &str, qty: &str) -> Cmd {
    amend_price(account, id, price).with("qty", qty)
}
