//! The engine's replay must agree with the naive model in `model/`, event for event.
//!
//! Random command streams (a few assets, one or two instruments with odd ticks and
//! lots, four accounts, a small pool of order ids so that ids collide and get reused,
//! prices clustered around a centre so that orders cross, plus invalid values and
//! malformed lines) are fed line by line to both; every line's events are compared
//! after normalisation, the engine's invariants are checked after every line, and the
//! final states are compared at the end. The plain tests at the bottom pin the model
//! itself to the spec on small hand-written scenarios.

mod model;

use std::panic::{catch_unwind, AssertUnwindSafe};

use bourse_core::replay::Replay;
use model::Model;
use proptest::prelude::*;
use proptest::test_runner::TestCaseError;
use serde_json::{json, Map, Value};

// ----------------------------------------------------------------------------------
// Normalisation: numbers compare by value, `done`s of one step compare as a set, and
// zero balances and empty books are as good as absent.

const DECIMAL_FIELDS: [&str; 7] =
    ["price", "qty", "filled", "maker_fee", "taker_fee", "available", "held"];

/// `"1.50"` -> `"1.5"`, `"-0.0"` -> `"0"`; `None` if not a decimal string.
fn canonical_decimal(text: &str) -> Option<String> {
    let unsigned = text.strip_prefix('-').unwrap_or(text);
    let (integer, fraction) = unsigned.split_once('.').unwrap_or((unsigned, ""));
    let digits = |part: &str| part.bytes().all(|b| b.is_ascii_digit());
    if integer.is_empty()
        || !digits(integer)
        || !digits(fraction)
        || (unsigned.contains('.') && fraction.is_empty())
    {
        return None;
    }
    let integer = integer.trim_start_matches('0');
    let fraction = fraction.trim_end_matches('0');
    let integer = if integer.is_empty() { "0" } else { integer };
    let magnitude =
        if fraction.is_empty() { integer.to_string() } else { format!("{integer}.{fraction}") };
    let negative = unsigned.len() != text.len() && magnitude != "0";
    Some(if negative { format!("-{magnitude}") } else { magnitude })
}

fn canonical_value(value: &Value) -> Value {
    match value {
        Value::String(text) => {
            Value::String(canonical_decimal(text).unwrap_or_else(|| text.clone()))
        }
        other => other.clone(),
    }
}

fn normalize_numbers(value: &Value) -> Value {
    match value {
        Value::Object(fields) => Value::Object(
            fields
                .iter()
                .map(|(key, field)| {
                    let field = if DECIMAL_FIELDS.contains(&key.as_str()) {
                        canonical_value(field)
                    } else {
                        normalize_numbers(field)
                    };
                    (key.clone(), field)
                })
                .collect(),
        ),
        Value::Array(items) => Value::Array(items.iter().map(normalize_numbers).collect()),
        other => other.clone(),
    }
}

fn normalize_events(events: &[Value]) -> Vec<Value> {
    let mut normalized: Vec<Value> = events.iter().map(normalize_numbers).collect();
    let mut start = 0;
    while start < normalized.len() {
        let mut end = start;
        while end < normalized.len() && normalized[end]["ev"] == "done" {
            end += 1;
        }
        normalized[start..end].sort_by_key(|event| event.to_string());
        start = end.max(start + 1);
    }
    normalized
}

fn is_zero(value: &Value) -> bool {
    value.is_null() || *value == "0"
}

fn normalize_state(state: &Value) -> Value {
    let mut balances = Map::new();
    for (account, assets) in state["balances"].as_object().into_iter().flatten() {
        let mut kept = Map::new();
        for (asset, balance) in assets.as_object().into_iter().flatten() {
            let balance = normalize_numbers(balance);
            if !(is_zero(&balance["available"]) && is_zero(&balance["held"])) {
                kept.insert(asset.clone(), balance);
            }
        }
        if !kept.is_empty() {
            balances.insert(account.clone(), Value::Object(kept));
        }
    }
    let mut fees = Map::new();
    for (asset, amount) in state["fees"].as_object().into_iter().flatten() {
        let amount = canonical_value(amount);
        if !is_zero(&amount) {
            fees.insert(asset.clone(), amount);
        }
    }
    let mut books = Map::new();
    for (symbol, book) in state["books"].as_object().into_iter().flatten() {
        let empty = |side: &str| book[side].as_array().into_iter().all(Vec::is_empty);
        if !(empty("bids") && empty("asks")) {
            books.insert(symbol.clone(), normalize_numbers(book));
        }
    }
    json!({ "balances": balances, "fees": fees, "books": books })
}

// ----------------------------------------------------------------------------------
// Running both sides.

fn numbered(lines: &[String]) -> String {
    lines.iter().enumerate().map(|(index, line)| format!("{:>4} {line}\n", index + 1)).collect()
}

fn listed(events: &[Value]) -> String {
    events.iter().map(|event| format!("     {event}\n")).collect()
}

fn failure(lines: &[String], what: &str, expected: &str, got: &str) -> TestCaseError {
    TestCaseError::fail(format!(
        "{what}\n--- input so far:\n{}--- model (expected):\n{expected}--- engine (got):\n{got}",
        numbered(lines)
    ))
}

fn engine_events(lines: &[String], out: &str) -> Result<Vec<Value>, TestCaseError> {
    out.lines()
        .map(|text| {
            serde_json::from_str(text).map_err(|error| {
                failure(lines, &format!("engine printed bad JSON ({error})"), "", out)
            })
        })
        .collect()
}

/// Feeds `lines` to the model and the engine, comparing as it goes.
fn compare_with_engine(lines: &[String]) -> Result<(), TestCaseError> {
    let mut model = Model::new();
    let mut engine = Replay::new();
    for (index, line) in lines.iter().enumerate() {
        let so_far = &lines[..=index];
        let expected = model.feed_line(line);
        let mut out = String::new();
        let fed = catch_unwind(AssertUnwindSafe(|| engine.feed_line(line, &mut out)));
        if fed.is_err() {
            return Err(failure(so_far, "engine panicked", &listed(&expected), &out));
        }
        let got = engine_events(so_far, &out)?;
        if normalize_events(&expected) != normalize_events(&got) {
            return Err(failure(so_far, "events differ", &listed(&expected), &listed(&got)));
        }
        if let Err(broken) = engine.check_invariants() {
            return Err(failure(so_far, &format!("engine invariant broken: {broken}"), "", ""));
        }
    }
    let expected = normalize_state(&model.state());
    let state_text = engine.state_json();
    let got: Value = serde_json::from_str(&state_text).map_err(|error| {
        failure(lines, &format!("engine state is not JSON ({error})"), "", &state_text)
    })?;
    let got = normalize_state(&got);
    if expected != got {
        return Err(failure(
            lines,
            "final states differ",
            &format!("{expected:#}\n"),
            &format!("{got:#}\n"),
        ));
    }
    Ok(())
}

// ----------------------------------------------------------------------------------
// Generating streams.

const ACCOUNTS: [&str; 4] = ["alice", "bob", "carol", "dave"];
const IDS: [&str; 4] = ["1", "2", "x", "id-4"];

#[derive(Clone, Debug)]
struct AssetDefinition {
    name: &'static str,
    decimals: u32,
}

#[derive(Clone, Debug)]
struct MarketDefinition {
    symbol: String,
    base: usize,
    quote: usize,
    tick_mantissa: i128,
    /// Decimal places of the tick.
    price_scale: u32,
    lot_mantissa: i128,
    /// Decimal places of the lot.
    lot_scale: u32,
    min_lots: i128,
    max_lots: i128,
    maker_fee_bps: i64,
    taker_fee_bps: i64,
    market_band_bps: i64,
    /// Prices cluster around this many ticks.
    centre_ticks: i128,
}

#[derive(Clone, Debug)]
struct World {
    assets: Vec<AssetDefinition>,
    markets: Vec<MarketDefinition>,
}

/// Raw draws for one market: decimals, mantissas, bounds, fee rates, band, centre.
type MarketDraw = ((u32, u32, i128, i128), (i128, i128), (i64, i64, i64), i128);

/// `units * 10^-scale` as a decimal string.
fn units_text(units: i128, scale: u32) -> String {
    let scale = scale as usize;
    let digits = format!("{:0>width$}", units.unsigned_abs(), width = scale + 1);
    let (integer, fraction) = digits.split_at(digits.len() - scale);
    let sign = if units < 0 { "-" } else { "" };
    if scale == 0 {
        format!("{sign}{integer}")
    } else {
        format!("{sign}{integer}.{fraction}")
    }
}

/// The same value with a redundant trailing zero: "25" -> "25.0", "0.05" -> "0.050".
fn padded(text: String) -> String {
    if text.contains('.') {
        text + "0"
    } else {
        text + ".0"
    }
}

impl MarketDefinition {
    fn build(
        draw: MarketDraw,
        symbol: &str,
        (base, base_decimals): (usize, u32),
        (quote, quote_decimals): (usize, u32),
    ) -> Self {
        let (
            (price_draw, lot_draw, tick_mantissa, lot_mantissa),
            (min_lots, max_lots),
            fees,
            centre_ticks,
        ) = draw;
        let price_scale = price_draw % (quote_decimals + 1);
        let lot_scale = lot_draw % (base_decimals.min(quote_decimals - price_scale) + 1);
        MarketDefinition {
            symbol: symbol.to_string(),
            base,
            quote,
            tick_mantissa,
            price_scale,
            lot_mantissa,
            lot_scale,
            min_lots,
            max_lots,
            maker_fee_bps: fees.0,
            taker_fee_bps: fees.1,
            market_band_bps: fees.2,
            centre_ticks,
        }
    }

    fn tick_text(&self) -> String {
        units_text(self.tick_mantissa, self.price_scale)
    }

    fn price_text(&self, ticks: i128) -> String {
        units_text(self.tick_mantissa * ticks, self.price_scale)
    }

    /// A price near the centre, never below one tick.
    fn near_price(&self, offset: i128, pad: bool) -> String {
        let text = self.price_text((self.centre_ticks + offset).max(1));
        if pad {
            padded(text)
        } else {
            text
        }
    }

    fn qty_text(&self, lots: i128) -> String {
        units_text(self.lot_mantissa * lots, self.lot_scale)
    }

    fn instrument_json(&self, world: &World) -> Value {
        json!({
            "cmd": "instrument",
            "symbol": self.symbol,
            "base": world.assets[self.base].name,
            "quote": world.assets[self.quote].name,
            "tick": self.tick_text(),
            "lot": self.qty_text(1),
            "min_qty": self.qty_text(self.min_lots),
            "max_qty": self.qty_text(self.max_lots),
            "maker_fee_bps": self.maker_fee_bps,
            "taker_fee_bps": self.taker_fee_bps,
            "market_band_bps": self.market_band_bps,
        })
    }

    /// Quote units that buy `lots` at `ticks`.
    fn quote_units(&self, world: &World, lots: i128, ticks: i128) -> i128 {
        let spare_places = world.assets[self.quote].decimals - self.price_scale - self.lot_scale;
        self.tick_mantissa * ticks * self.lot_mantissa * lots * 10i128.pow(spare_places)
    }

    fn base_units(&self, world: &World, lots: i128) -> i128 {
        self.lot_mantissa * lots * 10i128.pow(world.assets[self.base].decimals - self.lot_scale)
    }
}

impl World {
    /// Assets, instruments, and funds for every account but the last (which only gets
    /// what random deposits give it, so that holds fail now and then).
    fn setup_lines(&self) -> Vec<String> {
        let assets = self.assets.iter().map(|asset| {
            json!({ "cmd": "asset", "asset": asset.name, "decimals": asset.decimals }).to_string()
        });
        let markets = self.markets.iter().map(|market| market.instrument_json(self).to_string());
        let mut lines: Vec<String> = assets.chain(markets).collect();
        for account in &ACCOUNTS[..ACCOUNTS.len() - 1] {
            for market in &self.markets {
                let funds = [
                    (market.base, market.base_units(self, 40)),
                    (market.quote, market.quote_units(self, 40, market.centre_ticks + 3)),
                ];
                for (asset, units) in funds {
                    let asset = &self.assets[asset];
                    let amount = units_text(units, asset.decimals);
                    let deposit = json!({ "cmd": "deposit", "account": account, "asset": asset.name, "amount": amount });
                    lines.push(deposit.to_string());
                }
            }
        }
        lines
    }

    fn market(&self, index: usize) -> &MarketDefinition {
        &self.markets[index % self.markets.len()]
    }

    fn order_json(&self, account: usize, id: usize, market: usize, side: bool) -> Value {
        let market = self.market(market);
        json!({
            "cmd": "order",
            "account": ACCOUNTS[account],
            "id": IDS[id],
            "symbol": market.symbol,
            "side": if side { "buy" } else { "sell" },
            "type": "limit",
            "price": market.near_price(0, false),
            "qty": market.qty_text(market.min_lots),
        })
    }
}

fn market_draw() -> impl Strategy<Value = MarketDraw> {
    (
        (
            0..10u32,
            0..10u32,
            prop::sample::select(vec![1i128, 2, 5, 25]),
            prop::sample::select(vec![1i128, 5, 25]),
        ),
        (prop::sample::select(vec![1i128, 1, 1, 2]), prop::sample::select(vec![8i128, 1000])),
        (
            prop::sample::select(vec![0i64, 1, 10, 25, 1000]),
            prop::sample::select(vec![0i64, 5, 30, 1000]),
            prop::sample::select(vec![0i64, 50, 500, 10_000]),
        ),
        prop::sample::select(vec![1i128, 3, 40, 1000]),
    )
}

fn world_strategy() -> impl Strategy<Value = World> {
    (
        prop::sample::select(vec![0u32, 1, 3, 8]),
        prop::sample::select(vec![0u32, 2, 4]),
        prop::sample::select(vec![0u32, 2, 4, 6]),
        market_draw(),
        market_draw(),
        0..3u8,
    )
        .prop_map(|(btc, eth, usd, first, second, layout)| {
            let assets = vec![
                AssetDefinition { name: "BTC", decimals: btc },
                AssetDefinition { name: "ETH", decimals: eth },
                AssetDefinition { name: "USD", decimals: usd },
            ];
            let mut markets = vec![MarketDefinition::build(first, "BTC-USD", (0, btc), (2, usd))];
            match layout {
                1 => markets.push(MarketDefinition::build(second, "ETH-USD", (1, eth), (2, usd))),
                2 => markets.push(MarketDefinition::build(second, "ETH-BTC", (1, eth), (0, btc))),
                _ => {}
            }
            World { assets, markets }
        })
}

fn with_ts(mut command: Value, ts: Option<u64>) -> String {
    if let Some(ts) = ts {
        command["ts"] = json!(ts);
    }
    command.to_string()
}

fn deposit_strategy(world: World) -> impl Strategy<Value = String> {
    (
        0..4usize,
        0..2usize,
        any::<bool>(),
        1..6i128,
        0..4u8,
        prop::option::weighted(0.2, 0..1_000_000u64),
    )
        .prop_map(move |(account, market, base, factor, size, ts)| {
            let market = world.market(market);
            let (asset, units) = if base {
                (market.base, market.base_units(&world, 10 * factor))
            } else {
                (market.quote, market.quote_units(&world, 10 * factor, market.centre_ticks + 3))
            };
            // Now and then a small deposit, so that holds sometimes fail.
            let units = if size == 0 { units / 7 + 1 } else { units };
            let asset = &world.assets[asset];
            let command = json!({
                "cmd": "deposit", "account": ACCOUNTS[account], "asset": asset.name,
                "amount": units_text(units, asset.decimals),
            });
            with_ts(command, ts)
        })
}

fn withdraw_strategy(world: World) -> impl Strategy<Value = String> {
    (0..4usize, 0..3usize, 0..3u8).prop_map(move |(account, asset, size)| {
        let asset = &world.assets[asset];
        let amount = match size {
            0 => units_text(1, asset.decimals),
            1 => "10".to_string(),
            _ => format!("1{}", "0".repeat(40)),
        };
        json!({ "cmd": "withdraw", "account": ACCOUNTS[account], "asset": asset.name, "amount": amount })
            .to_string()
    })
}

/// Mostly valid quantities in lots; now and then zero or above a small `max_qty`.
fn lots_strategy() -> impl Strategy<Value = i128> {
    prop_oneof![1 => Just(0i128), 24 => 1..=6i128, 3 => 7..=12i128]
}

/// Order shape: type (0 = market), tif (0..=2 absent), post_only (0..=3 absent), stp
/// (0 = absent), whether a market order also carries a price.
type OrderShape = (u8, u8, u8, u8, bool);

fn order_strategy(world: World) -> impl Strategy<Value = String> {
    (
        (0..4usize, 0..IDS.len(), 0..2usize, any::<bool>()),
        (-3..=3i128, lots_strategy(), any::<bool>()),
        (0..5u8, 0..7u8, 0..6u8, 0..5u8, any::<bool>()),
        prop::option::weighted(0.2, 0..1_000_000u64),
    )
        .prop_map(
            move |((account, id, market, buy), (offset, lots, pad), shape, ts): (
                _,
                _,
                OrderShape,
                _,
            )| {
                let (kind, tif, post_only, stp, market_price) = shape;
                let definition = world.market(market);
                let mut command = world.order_json(account, id, market, buy);
                command["qty"] = json!(definition.qty_text(lots));
                if kind == 0 {
                    command["type"] = json!("market");
                    if market_price {
                        command["post_only"] = json!(true);
                    } else {
                        command.as_object_mut().expect("object").remove("price");
                    }
                } else {
                    // Bids a little below the centre, asks a little above: books build up
                    // depth and still cross often.
                    let skew = if buy { -1 } else { 1 };
                    command["price"] = json!(definition.near_price(offset + skew, pad));
                }
                if tif > 2 {
                    command["tif"] = json!(["gtc", "gtc", "ioc", "fok"][usize::from(tif) - 3]);
                }
                if post_only >= 4 {
                    command["post_only"] = json!(post_only == 5);
                }
                if stp > 0 {
                    command["stp"] = json!(
                        ["cancel_taker", "cancel_maker", "cancel_both", "none"]
                            [usize::from(stp) - 1]
                    );
                }
                with_ts(command, ts)
            },
        )
}

fn cancel_strategy() -> impl Strategy<Value = String> {
    (0..4usize, 0..IDS.len(), prop::option::weighted(0.2, 0..1_000_000u64)).prop_map(
        |(account, id, ts)| {
            with_ts(json!({ "cmd": "cancel", "account": ACCOUNTS[account], "id": IDS[id] }), ts)
        },
    )
}

fn amend_strategy(world: World) -> impl Strategy<Value = String> {
    ((0..4usize, 0..IDS.len(), 0..2usize), (0..20u8, -3..=3i128, lots_strategy(), any::<bool>()))
        .prop_map(move |((account, id, market), (what, offset, lots, pad))| {
            let definition = world.market(market);
            let mut command =
                json!({ "cmd": "amend", "account": ACCOUNTS[account], "id": IDS[id] });
            // 0: neither field (malformed); 1..=7 price; 8..=13 qty; the rest both.
            if (1..=7).contains(&what) || what >= 14 {
                command["price"] = json!(definition.near_price(offset, pad));
            }
            if what >= 8 {
                command["qty"] = json!(definition.qty_text(lots));
            }
            command.to_string()
        })
}

/// Well-formed commands with invalid values, definitions, odd but valid lines, and
/// malformed lines.
fn odd_line(
    world: &World,
    template: usize,
    account: usize,
    id: usize,
    market: usize,
    buy: bool,
) -> String {
    let definition = world.market(market);
    let quote = &world.assets[definition.quote];
    let asset = &world.assets[market % world.assets.len()];
    let order = world.order_json(account, id, market, buy);
    let tick_top = i128::from(i64::MAX) / definition.tick_mantissa;
    let mut instrument = definition.instrument_json(world);
    instrument["symbol"] = json!("NEW-1");
    let deposit = |amount: String| json!({ "cmd": "deposit", "account": ACCOUNTS[account], "asset": asset.name, "amount": amount });
    let changed = |mut value: Value, key: &str, field: Value| {
        value[key] = field;
        value.to_string()
    };
    let without = |mut value: Value, key: &str| {
        value.as_object_mut().expect("commands are objects").remove(key);
        value.to_string()
    };
    match template {
        0 => changed(order, "price", json!("0")),
        1 => changed(order, "price", json!(format!("-{}", definition.near_price(0, false)))),
        2 => changed(
            order,
            "price",
            json!(units_text(
                definition.tick_mantissa * definition.centre_ticks * 10 + 1,
                definition.price_scale + 1
            )),
        ),
        3 => changed(
            order,
            "price",
            json!(units_text(
                definition.tick_mantissa * definition.centre_ticks + 1,
                definition.price_scale
            )),
        ),
        // The largest and the first too large multiple of the tick (in units of its
        // decimals, the engine's prices stop at i64::MAX).
        4 => changed(
            order,
            "price",
            json!(units_text(definition.tick_mantissa * tick_top, definition.price_scale)),
        ),
        5 => changed(
            order,
            "price",
            json!(units_text(definition.tick_mantissa * (tick_top + 1), definition.price_scale)),
        ),
        6 => changed(order, "qty", json!("0")),
        7 => changed(order, "qty", json!(format!("-{}", definition.qty_text(2)))),
        8 => changed(
            order,
            "qty",
            json!(units_text(definition.lot_mantissa * 30 + 1, definition.lot_scale + 1)),
        ),
        9 => changed(order, "qty", json!(format!("1{}", "0".repeat(45)))),
        10 => changed(order, "symbol", json!("NOPE")),
        11 => deposit("0.00".to_string()).to_string(),
        12 => deposit("-5".to_string()).to_string(),
        13 => deposit(units_text(1, asset.decimals + 1)).to_string(),
        14 => changed(deposit("1".to_string()), "asset", json!("DOGE")),
        15 => deposit(units_text(i128::from(i64::MAX), asset.decimals)).to_string(),
        16 => deposit(units_text(i128::from(i64::MAX) + 1, asset.decimals)).to_string(),
        17 => changed(deposit("0".to_string()), "cmd", json!("withdraw")),
        18 => json!({ "cmd": "asset", "asset": "USD", "decimals": 2 }).to_string(),
        19 => json!({ "cmd": "asset", "asset": "ZZZ", "decimals": 19 }).to_string(),
        20 => json!({ "cmd": "asset", "asset": "ZZZ", "decimals": 5 }).to_string(),
        21 => json!({ "cmd": "asset", "asset": "QQQ", "decimals": -1 }).to_string(),
        22 => definition.instrument_json(world).to_string(),
        23 => changed(instrument, "base", json!("DOGE")),
        24 => changed(instrument, "base", json!(quote.name)),
        25 => changed(instrument, "tick", json!("0")),
        26 => changed(instrument, "min_qty", json!(definition.qty_text(definition.max_lots + 1))),
        27 => changed(instrument, "maker_fee_bps", json!(1001)),
        28 => changed(instrument, "market_band_bps", json!(10_001)),
        29 => changed(instrument, "taker_fee_bps", json!(-1)),
        30 => changed(instrument, "tick", json!(units_text(1, quote.decimals + 1))),
        31 => changed(
            instrument,
            "min_qty",
            json!(units_text(definition.lot_mantissa * 10 + 1, definition.lot_scale + 1)),
        ),
        32 => {
            instrument["symbol"] = json!("ZZZ-USD");
            changed(instrument, "base", json!("ZZZ"))
        }
        33 => changed(
            deposit("1".to_string()),
            "note",
            json!({ "unknown": ["fields", "are", "ignored"] }),
        ),
        34 => String::new(),
        35 => "  \t ".to_string(),
        36 => format!("  {}\r", deposit("1".to_string())),
        37 => changed(order, "ts", json!("5")),
        38 => changed(order, "ts", json!(1.5)),
        39 => changed(order, "ts", Value::Null),
        40 => "not json".to_string(),
        41 => "{".to_string(),
        42 => "[]".to_string(),
        43 => "null".to_string(),
        44 => "{}".to_string(),
        45 => json!({ "cmd": "fly" }).to_string(),
        46 => changed(order, "cmd", json!("ORDER")),
        47 => changed(order, "cmd", json!(5)),
        48 => changed(order, "qty", json!(1)),
        49 => changed(order, "qty", json!("1e3")),
        50 => changed(order, "qty", json!(".5")),
        51 => changed(order, "qty", json!(" 1")),
        52 => changed(order, "qty", json!("+1")),
        53 => changed(order, "qty", json!("1.")),
        54 => changed(order, "price", Value::Null),
        55 => changed(order, "side", json!("BUY")),
        56 => changed(order, "type", json!("stop")),
        57 => changed(order, "tif", json!("GTC")),
        58 => changed(order, "stp", json!("maybe")),
        59 => changed(order, "post_only", json!("true")),
        60 => changed(order, "account", json!("")),
        61 => changed(order, "id", json!(7)),
        62 => without(order, "qty"),
        63 => without(order, "price"),
        64 => json!({ "cmd": "cancel", "account": ACCOUNTS[account] }).to_string(),
        65 => json!({ "cmd": "amend", "account": ACCOUNTS[account], "id": IDS[id], "price": null })
            .to_string(),
        66 => json!({ "cmd": "amend", "account": ACCOUNTS[account], "id": IDS[id], "qty": 5 })
            .to_string(),
        67 => changed(deposit("1".to_string()), "amount", json!(100)),
        68 => changed(deposit("1".to_string()), "amount", Value::Null),
        69 => json!({ "cmd": "asset", "asset": "ZZZ", "decimals": "8" }).to_string(),
        70 => json!({ "cmd": "asset", "asset": "ZZZ", "decimals": 8.0 }).to_string(),
        71 => json!({ "cmd": "asset", "asset": "", "decimals": 8 }).to_string(),
        72 => changed(instrument, "maker_fee_bps", json!(1.5)),
        73 => changed(instrument, "tick", json!(0.05)),
        74 => json!({ "cmd": "withdraw", "account": ACCOUNTS[account], "asset": asset.name })
            .to_string(),
        _ => changed(deposit("1".to_string()), "account", json!(["alice"])),
    }
}

const ODD_TEMPLATES: usize = 76;

fn odd_line_strategy(world: World) -> impl Strategy<Value = String> {
    (0..ODD_TEMPLATES, 0..4usize, 0..IDS.len(), 0..2usize, any::<bool>()).prop_map(
        move |(template, account, id, market, buy)| {
            odd_line(&world, template, account, id, market, buy)
        },
    )
}

/// An order, then a cancel or an amend of the same account and id, so that those hit
/// open orders more often than blind picks do.
fn order_and_follow_up_strategy(world: World) -> impl Strategy<Value = Vec<String>> {
    let follow_up = prop_oneof![cancel_strategy(), amend_strategy(world.clone())];
    (order_strategy(world), follow_up).prop_map(|(order, follow_up)| {
        let placed: Value = serde_json::from_str(&order).expect("generated orders are JSON");
        let mut follow_up: Value =
            serde_json::from_str(&follow_up).expect("generated commands are JSON");
        follow_up["account"] = placed["account"].clone();
        follow_up["id"] = placed["id"].clone();
        vec![order, follow_up.to_string()]
    })
}

/// One or two lines.
fn lines_strategy(world: World) -> BoxedStrategy<Vec<String>> {
    let one = |strategy: BoxedStrategy<String>| strategy.prop_map(|line| vec![line]);
    prop_oneof![
        12 => one(deposit_strategy(world.clone()).boxed()),
        3 => one(withdraw_strategy(world.clone()).boxed()),
        45 => one(order_strategy(world.clone()).boxed()),
        14 => order_and_follow_up_strategy(world.clone()),
        6 => one(cancel_strategy().boxed()),
        8 => one(amend_strategy(world.clone()).boxed()),
        8 => one(odd_line_strategy(world).boxed()),
    ]
    .boxed()
}

fn stream_strategy() -> impl Strategy<Value = Vec<String>> {
    world_strategy().prop_flat_map(|world| {
        let setup = world.setup_lines();
        prop::collection::vec(lines_strategy(world), 1..170).prop_map(move |commands| {
            let mut lines = setup.clone();
            lines.extend(commands.into_iter().flatten());
            lines
        })
    })
}

/// 256 cases by default; `PROPTEST_CASES=20000` searches deeper.
fn cases() -> u32 {
    std::env::var("PROPTEST_CASES").ok().and_then(|cases| cases.parse().ok()).unwrap_or(256)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: cases(), max_shrink_iters: 4096, ..ProptestConfig::default() })]

    #[test]
    fn engine_agrees_with_model_on_random_streams(lines in stream_strategy()) {
        compare_with_engine(&lines)?;
    }
}

/// Streams at the edges random ones rarely reach: amounts at the 64-bit limit, fees
/// on huge notionals, 18-decimal assets, amends to extreme values.
#[test]
fn engine_agrees_with_model_on_edge_streams() {
    let asset = |name: &str, decimals: u32| {
        format!(r#"{{"cmd":"asset","asset":"{name}","decimals":{decimals}}}"#)
    };
    let instrument = |tick: &str, lot: &str, max_qty: &str, fees: (u32, u32, u32)| {
        format!(
            r#"{{"cmd":"instrument","symbol":"B-Q","base":"B","quote":"Q","tick":"{tick}","lot":"{lot}","min_qty":"{lot}","max_qty":"{max_qty}","maker_fee_bps":{},"taker_fee_bps":{},"market_band_bps":{}}}"#,
            fees.0, fees.1, fees.2
        )
    };
    let deposit = |account: &str, asset: &str, amount: &str| {
        format!(
            r#"{{"cmd":"deposit","account":"{account}","asset":"{asset}","amount":"{amount}"}}"#
        )
    };
    let order = |account: &str,
                 id: &str,
                 side: &str,
                 price: Option<&str>,
                 qty: &str,
                 extra: &str| {
        let kind = match price {
            Some(price) => format!(r#""type":"limit","price":"{price}""#),
            None => r#""type":"market""#.to_string(),
        };
        format!(
            r#"{{"cmd":"order","account":"{account}","id":"{id}","symbol":"B-Q","side":"{side}",{kind},"qty":"{qty}"{extra}}}"#
        )
    };
    let amend = |account: &str, id: &str, fields: &str| {
        format!(r#"{{"cmd":"amend","account":"{account}","id":"{id}",{fields}}}"#)
    };
    let top = "9223372036854775807";
    let streams: Vec<Vec<String>> = vec![
        // A buy holding exactly i64::MAX quote units meets a sell at the top price;
        // fees are taken on a notional of i64::MAX units.
        vec![
            asset("B", 8),
            asset("Q", 2),
            instrument("1", "0.01", "100", (10, 1000, 10_000)),
            deposit("alice", "B", "1"),
            order("alice", "s1", "sell", Some(top), "0.01", ""),
            deposit("bob", "Q", "92233720368547758.07"),
            deposit("bob", "Q", "0.01"),
            order("bob", "m1", "buy", None, "0.01", ""),
            order("bob", "b1", "buy", Some(top), "0.02", ""),
            order("bob", "b1", "buy", Some(top), "0.01", ""),
            deposit("carol", "B", "0.00000001"),
            r#"{"cmd":"withdraw","account":"bob","asset":"B","amount":"0.0099"}"#.to_string(),
            r#"{"cmd":"withdraw","account":"alice","asset":"Q","amount":"92233720368547758.07"}"#
                .to_string(),
            deposit("carol", "Q", "1"),
        ],
        // Prices one tick either side of the 64-bit limit, on a tick of 25.
        vec![
            asset("B", 0),
            asset("Q", 0),
            instrument("25", "25", "1000", (1000, 1000, 10_000)),
            deposit("alice", "B", "1000"),
            deposit("bob", "Q", "1000000"),
            order("alice", "s1", "sell", Some("9223372036854775800"), "25", ""),
            order("alice", "s2", "sell", Some("9223372036854775825"), "25", ""),
            order("bob", "m1", "buy", None, "25", r#","tif":"fok""#),
            order("alice", "s3", "sell", Some("100"), "50", r#","post_only":true"#),
            amend("alice", "s3", r#""price":"9223372036854775825""#),
            amend("alice", "s3", r#""price":"9223372036854775800""#),
            amend("alice", "s1", r#""qty":"1000000000000000000000000000000000000000000000""#),
            amend("alice", "s1", r#""price":"125","qty":"50""#),
            order("bob", "b1", "buy", Some("125"), "75", r#","tif":"ioc""#),
            order("bob", "m2", "buy", None, "25", ""),
            order("alice", "m3", "sell", None, "25", ""),
        ],
        // An 18-decimal quote, tick and lot sharing its decimals.
        vec![
            asset("B", 9),
            asset("Q", 18),
            instrument("0.000000001", "0.000000001", "1", (7, 3, 1)),
            deposit("alice", "B", "0.5"),
            deposit("bob", "Q", "9.223372036854775807"),
            order("alice", "s1", "sell", Some("3.000000007"), "0.333333333", ""),
            order("bob", "b1", "buy", Some("3.000000007"), "0.000000001", ""),
            order("bob", "m1", "buy", None, "0.1", ""),
            order("bob", "b2", "buy", Some("3"), "0.5", r#","stp":"none""#),
            order("alice", "m2", "sell", None, "0.2", r#","tif":"fok","stp":"cancel_both""#),
        ],
    ];
    for stream in streams {
        if let Err(error) = compare_with_engine(&stream) {
            panic!("{error}");
        }
    }
}

/// With a `max_qty` beyond 64 bits (the spec's list of invalid instruments has no
/// range clause), a buy of 10^19 base units whose hold (10^11 quote units) fits must
/// still be refused `insufficient_funds`: the spec's Range rule says every amount in an
/// asset's smallest units fits in i64, and this one could never be delivered.
#[test]
fn engine_refuses_a_quantity_beyond_64_bits() {
    let stream: Vec<String> = [
        r#"{"cmd":"asset","asset":"BTC","decimals":8}"#,
        r#"{"cmd":"asset","asset":"USD","decimals":2}"#,
        r#"{"cmd":"instrument","symbol":"Z","base":"BTC","quote":"USD","tick":"0.01","lot":"1","min_qty":"1","max_qty":"1000000000000","maker_fee_bps":0,"taker_fee_bps":0,"market_band_bps":0}"#,
        r#"{"cmd":"deposit","account":"alice","asset":"USD","amount":"1000000000"}"#,
        r#"{"cmd":"order","account":"alice","id":"a","symbol":"Z","side":"buy","type":"limit","price":"0.01","qty":"100000000000"}"#,
    ]
    .iter()
    .map(|line| line.to_string())
    .collect();
    if let Err(error) = compare_with_engine(&stream) {
        panic!("{error}");
    }
}

// ----------------------------------------------------------------------------------
// The model against the spec, on hand-written scenarios.

/// Feeds `lines` to the model; returns every line's events (normalised) and the state.
fn run_model(lines: &[&str]) -> (Vec<Vec<Value>>, Value) {
    let mut model = Model::new();
    let events = lines.iter().map(|line| normalize_events(&model.feed_line(line))).collect();
    (events, normalize_state(&model.state()))
}

fn assert_events(actual: &[Value], expected: &[Value]) {
    let expected = normalize_events(expected);
    assert_eq!(
        actual,
        expected.as_slice(),
        "\nmodel:\n{}expected:\n{}",
        listed(actual),
        listed(&expected)
    );
}

const BTC_USD: [&str; 3] = [
    r#"{"cmd":"asset","asset":"BTC","decimals":8}"#,
    r#"{"cmd":"asset","asset":"USD","decimals":2}"#,
    r#"{"cmd":"instrument","symbol":"BTC-USD","base":"BTC","quote":"USD","tick":"1","lot":"0.01","min_qty":"0.01","max_qty":"100","maker_fee_bps":15,"taker_fee_bps":20,"market_band_bps":500}"#,
];

fn scenario(extra: &[&str]) -> (Vec<Vec<Value>>, Value) {
    let lines: Vec<&str> = BTC_USD.iter().copied().chain(extra.iter().copied()).collect();
    run_model(&lines)
}

fn trade(
    seq: u64,
    price: &str,
    qty: &str,
    taker_side: &str,
    maker: (&str, &str),
    taker: (&str, &str),
    fees: (&str, &str),
) -> Value {
    json!({
        "ev": "trade", "seq": seq, "symbol": "BTC-USD", "price": price, "qty": qty, "taker_side": taker_side,
        "maker_account": maker.0, "maker_id": maker.1, "taker_account": taker.0, "taker_id": taker.1,
        "maker_fee": fees.0, "taker_fee": fees.1,
    })
}

fn done(seq: u64, account: &str, id: &str, reason: &str, filled: &str) -> Value {
    json!({ "ev": "done", "seq": seq, "account": account, "id": id, "reason": reason, "filled": filled })
}

fn accepted(seq: u64, account: &str, id: &str) -> Value {
    json!({ "ev": "accepted", "seq": seq, "account": account, "id": id })
}

#[test]
fn model_cross_with_fees_leaves_a_partial_maker() {
    let (events, state) = scenario(&[
        r#"{"cmd":"deposit","account":"alice","asset":"USD","amount":"1000"}"#,
        r#"{"cmd":"deposit","account":"bob","asset":"BTC","amount":"1"}"#,
        r#"{"cmd":"order","account":"bob","id":"s1","symbol":"BTC-USD","side":"sell","type":"limit","price":"100","qty":"0.5"}"#,
        r#"{"cmd":"order","account":"alice","id":"b1","symbol":"BTC-USD","side":"buy","type":"limit","price":"101","qty":"0.3"}"#,
    ]);
    assert_events(&events[0], &[json!({ "ev": "accepted", "seq": 1 })]);
    assert_events(&events[5], &[accepted(6, "bob", "s1")]);
    // Bob receives 30 USD and pays ceil(3000 * 15 / 10000) = 5 cents; alice receives
    // 0.3 BTC and pays 0.3 * 20 / 10000 = 0.0006 BTC.
    assert_events(
        &events[6],
        &[
            accepted(7, "alice", "b1"),
            trade(7, "100", "0.3", "buy", ("bob", "s1"), ("alice", "b1"), ("0.05", "0.0006")),
            done(7, "alice", "b1", "filled", "0.3"),
        ],
    );
    let expected = json!({
        "balances": {
            "alice": { "USD": { "available": "970", "held": "0" }, "BTC": { "available": "0.2994", "held": "0" } },
            "bob": { "USD": { "available": "29.95", "held": "0" }, "BTC": { "available": "0.5", "held": "0.2" } },
        },
        "fees": { "USD": "0.05", "BTC": "0.0006" },
        "books": { "BTC-USD": { "bids": [], "asks": [ { "account": "bob", "id": "s1", "price": "100", "qty": "0.2" } ] } },
    });
    assert_eq!(state, normalize_state(&expected));
}

#[test]
fn model_market_buy_holds_protection_price_rounded_up_to_the_tick() {
    let (events, state) = run_model(&[
        r#"{"cmd":"asset","asset":"BTC","decimals":8}"#,
        r#"{"cmd":"asset","asset":"USD","decimals":4}"#,
        r#"{"cmd":"instrument","symbol":"BTC-USD","base":"BTC","quote":"USD","tick":"0.05","lot":"0.1","min_qty":"0.1","max_qty":"100","maker_fee_bps":0,"taker_fee_bps":0,"market_band_bps":150}"#,
        r#"{"cmd":"deposit","account":"bob","asset":"BTC","amount":"1"}"#,
        r#"{"cmd":"order","account":"bob","id":"s1","symbol":"BTC-USD","side":"sell","type":"limit","price":"10.05","qty":"1"}"#,
        r#"{"cmd":"deposit","account":"alice","asset":"USD","amount":"10.2499"}"#,
        r#"{"cmd":"order","account":"alice","id":"m1","symbol":"BTC-USD","side":"buy","type":"market","qty":"1"}"#,
        r#"{"cmd":"deposit","account":"alice","asset":"USD","amount":"0.0001"}"#,
        r#"{"cmd":"order","account":"alice","id":"m1","symbol":"BTC-USD","side":"buy","type":"market","qty":"1"}"#,
    ]);
    // 10.05 * 1.015 = 10.20075, up to the tick: 10.25; 10.2499 does not cover it.
    assert_events(
        &events[6],
        &[
            json!({ "ev": "rejected", "seq": 7, "reason": "insufficient_funds", "account": "alice", "id": "m1" }),
        ],
    );
    assert_events(
        &events[8],
        &[
            accepted(9, "alice", "m1"),
            trade(9, "10.05", "1", "buy", ("bob", "s1"), ("alice", "m1"), ("0", "0")),
            done(9, "bob", "s1", "filled", "1"),
            done(9, "alice", "m1", "filled", "1"),
        ],
    );
    let expected = json!({
        "balances": {
            "alice": { "USD": { "available": "0.2", "held": "0" }, "BTC": { "available": "1", "held": "0" } },
            "bob": { "USD": { "available": "10.05", "held": "0" } },
        },
        "fees": {}, "books": {},
    });
    assert_eq!(state, normalize_state(&expected));
}

#[test]
fn model_market_sell_protection_price_rounds_down_to_the_tick() {
    let (events, _) = run_model(&[
        r#"{"cmd":"asset","asset":"BTC","decimals":8}"#,
        r#"{"cmd":"asset","asset":"USD","decimals":4}"#,
        r#"{"cmd":"instrument","symbol":"BTC-USD","base":"BTC","quote":"USD","tick":"0.05","lot":"0.1","min_qty":"0.1","max_qty":"100","maker_fee_bps":0,"taker_fee_bps":0,"market_band_bps":400}"#,
        r#"{"cmd":"deposit","account":"bob","asset":"USD","amount":"100"}"#,
        r#"{"cmd":"order","account":"bob","id":"b1","symbol":"BTC-USD","side":"buy","type":"limit","price":"1","qty":"0.1"}"#,
        r#"{"cmd":"order","account":"bob","id":"b2","symbol":"BTC-USD","side":"buy","type":"limit","price":"0.95","qty":"0.1"}"#,
        r#"{"cmd":"order","account":"bob","id":"b3","symbol":"BTC-USD","side":"buy","type":"limit","price":"0.9","qty":"0.1"}"#,
        r#"{"cmd":"deposit","account":"alice","asset":"BTC","amount":"1"}"#,
        r#"{"cmd":"order","account":"alice","id":"m1","symbol":"BTC-USD","side":"sell","type":"market","qty":"0.3"}"#,
    ]);
    // 1.00 * 0.96 = 0.96, down to the tick: 0.95, so b3 at 0.90 is out of reach.
    assert_events(
        &events[8],
        &[
            accepted(9, "alice", "m1"),
            trade(9, "1", "0.1", "sell", ("bob", "b1"), ("alice", "m1"), ("0", "0")),
            done(9, "bob", "b1", "filled", "0.1"),
            trade(9, "0.95", "0.1", "sell", ("bob", "b2"), ("alice", "m1"), ("0", "0")),
            done(9, "bob", "b2", "filled", "0.1"),
            done(9, "alice", "m1", "expired", "0.2"),
        ],
    );
}

#[test]
fn model_fok_that_cannot_fill_expires_without_trading() {
    let (events, state) = scenario(&[
        r#"{"cmd":"deposit","account":"alice","asset":"USD","amount":"1000"}"#,
        r#"{"cmd":"deposit","account":"bob","asset":"BTC","amount":"1"}"#,
        r#"{"cmd":"order","account":"bob","id":"s1","symbol":"BTC-USD","side":"sell","type":"limit","price":"100","qty":"0.2"}"#,
        r#"{"cmd":"order","account":"alice","id":"f1","symbol":"BTC-USD","side":"buy","type":"limit","price":"100","qty":"0.5","tif":"fok"}"#,
    ]);
    assert_events(
        &events[6],
        &[accepted(7, "alice", "f1"), done(7, "alice", "f1", "expired", "0")],
    );
    let expected = json!({
        "balances": {
            "alice": { "USD": { "available": "1000", "held": "0" } },
            "bob": { "BTC": { "available": "0.8", "held": "0.2" } },
        },
        "fees": {},
        "books": { "BTC-USD": { "bids": [], "asks": [ { "account": "bob", "id": "s1", "price": "100", "qty": "0.2" } ] } },
    });
    assert_eq!(state, normalize_state(&expected));
}

/// Bob sells 1 at 100, alice sells 1 at 101; then alice buys 2 at 101 with `stp`.
fn self_trade(stp: &str) -> Vec<Value> {
    let buy = format!(
        r#"{{"cmd":"order","account":"alice","id":"t","symbol":"BTC-USD","side":"buy","type":"limit","price":"101","qty":"2","stp":"{stp}"}}"#
    );
    let (events, _) = scenario(&[
        r#"{"cmd":"deposit","account":"alice","asset":"USD","amount":"1000"}"#,
        r#"{"cmd":"deposit","account":"alice","asset":"BTC","amount":"1"}"#,
        r#"{"cmd":"deposit","account":"bob","asset":"BTC","amount":"1"}"#,
        r#"{"cmd":"order","account":"bob","id":"b1","symbol":"BTC-USD","side":"sell","type":"limit","price":"100","qty":"1"}"#,
        r#"{"cmd":"order","account":"alice","id":"a1","symbol":"BTC-USD","side":"sell","type":"limit","price":"101","qty":"1"}"#,
        &buy,
    ]);
    events[8].clone()
}

fn first_fill() -> [Value; 3] {
    [
        accepted(9, "alice", "t"),
        // Maker bob receives 100 USD (fee 15 bps = 0.15); alice receives 1 BTC (20 bps).
        trade(9, "100", "1", "buy", ("bob", "b1"), ("alice", "t"), ("0.15", "0.002")),
        done(9, "bob", "b1", "filled", "1"),
    ]
}

#[test]
fn model_stp_cancel_taker_stops_the_incoming_order() {
    let mut expected = first_fill().to_vec();
    expected.push(done(9, "alice", "t", "stp", "1"));
    assert_events(&self_trade("cancel_taker"), &expected);
}

#[test]
fn model_stp_cancel_maker_cancels_the_resting_order_and_goes_on() {
    let mut expected = first_fill().to_vec();
    expected.push(done(9, "alice", "a1", "stp", "0"));
    assert_events(&self_trade("cancel_maker"), &expected);
}

#[test]
fn model_stp_cancel_both_cancels_both() {
    let mut expected = first_fill().to_vec();
    expected.push(done(9, "alice", "a1", "stp", "0"));
    expected.push(done(9, "alice", "t", "stp", "1"));
    assert_events(&self_trade("cancel_both"), &expected);
}

#[test]
fn model_stp_none_trades_with_itself_and_pays_both_fees() {
    let mut expected = first_fill().to_vec();
    // Alice as maker receives 101 USD (fee ceil(10100 * 15 / 10000) = 16 cents) and as
    // taker 1 BTC (fee 0.002).
    expected.push(trade(9, "101", "1", "buy", ("alice", "a1"), ("alice", "t"), ("0.16", "0.002")));
    expected.push(done(9, "alice", "a1", "filled", "1"));
    expected.push(done(9, "alice", "t", "filled", "2"));
    assert_events(&self_trade("none"), &expected);
}

#[test]
fn model_fok_counting_skips_own_orders_only_for_cancel_maker() {
    let fok = |stp: &str| {
        format!(
            r#"{{"cmd":"order","account":"alice","id":"f","symbol":"BTC-USD","side":"buy","type":"limit","price":"101","qty":"1","tif":"fok","stp":"{stp}"}}"#
        )
    };
    let setup = [
        r#"{"cmd":"deposit","account":"alice","asset":"USD","amount":"1000"}"#,
        r#"{"cmd":"deposit","account":"alice","asset":"BTC","amount":"1"}"#,
        r#"{"cmd":"deposit","account":"bob","asset":"BTC","amount":"1"}"#,
        r#"{"cmd":"order","account":"alice","id":"a1","symbol":"BTC-USD","side":"sell","type":"limit","price":"100","qty":"1"}"#,
        r#"{"cmd":"order","account":"bob","id":"b1","symbol":"BTC-USD","side":"sell","type":"limit","price":"101","qty":"1"}"#,
    ];
    let taker = fok("cancel_taker");
    let (events, _) = scenario(&[&setup[..], &[taker.as_str()]].concat());
    assert_events(&events[8], &[accepted(9, "alice", "f"), done(9, "alice", "f", "expired", "0")]);

    let maker = fok("cancel_maker");
    let (events, _) = scenario(&[&setup[..], &[maker.as_str()]].concat());
    assert_events(
        &events[8],
        &[
            accepted(9, "alice", "f"),
            done(9, "alice", "a1", "stp", "0"),
            trade(9, "101", "1", "buy", ("bob", "b1"), ("alice", "f"), ("0.16", "0.002")),
            done(9, "bob", "b1", "filled", "1"),
            done(9, "alice", "f", "filled", "1"),
        ],
    );
}

/// Bob then carol sell 1 at 100; bob amends with `amend`; alice buys 0.5 at 100.
fn amend_then_buy(amend: &str) -> Vec<Vec<Value>> {
    scenario(&[
        r#"{"cmd":"deposit","account":"alice","asset":"USD","amount":"1000"}"#,
        r#"{"cmd":"deposit","account":"bob","asset":"BTC","amount":"5"}"#,
        r#"{"cmd":"deposit","account":"carol","asset":"BTC","amount":"5"}"#,
        r#"{"cmd":"order","account":"bob","id":"s1","symbol":"BTC-USD","side":"sell","type":"limit","price":"100","qty":"1"}"#,
        r#"{"cmd":"order","account":"carol","id":"c1","symbol":"BTC-USD","side":"sell","type":"limit","price":"100","qty":"1"}"#,
        amend,
        r#"{"cmd":"order","account":"alice","id":"b1","symbol":"BTC-USD","side":"buy","type":"limit","price":"100","qty":"0.5"}"#,
    ])
    .0
}

#[test]
fn model_amend_that_lowers_qty_keeps_priority() {
    let events = amend_then_buy(r#"{"cmd":"amend","account":"bob","id":"s1","qty":"0.5"}"#);
    assert_events(
        &events[8],
        &[
            accepted(9, "bob", "s1"),
            json!({ "ev": "amended", "seq": 9, "account": "bob", "id": "s1", "price": "100", "qty": "0.5" }),
        ],
    );
    assert_events(
        &events[9],
        &[
            accepted(10, "alice", "b1"),
            trade(10, "100", "0.5", "buy", ("bob", "s1"), ("alice", "b1"), ("0.08", "0.001")),
            done(10, "bob", "s1", "filled", "0.5"),
            done(10, "alice", "b1", "filled", "0.5"),
        ],
    );
}

#[test]
fn model_amend_that_raises_qty_loses_priority() {
    let events =
        amend_then_buy(r#"{"cmd":"amend","account":"bob","id":"s1","qty":"2","price":"100.0"}"#);
    assert_events(
        &events[8],
        &[
            accepted(9, "bob", "s1"),
            json!({ "ev": "amended", "seq": 9, "account": "bob", "id": "s1", "price": "100", "qty": "2" }),
        ],
    );
    assert_events(
        &events[9],
        &[
            accepted(10, "alice", "b1"),
            trade(10, "100", "0.5", "buy", ("carol", "c1"), ("alice", "b1"), ("0.08", "0.001")),
            done(10, "alice", "b1", "filled", "0.5"),
        ],
    );
}

#[test]
fn model_amend_to_a_crossing_price_trades_as_taker() {
    let (events, _) = scenario(&[
        r#"{"cmd":"deposit","account":"bob","asset":"USD","amount":"1000"}"#,
        r#"{"cmd":"deposit","account":"carol","asset":"BTC","amount":"5"}"#,
        r#"{"cmd":"order","account":"bob","id":"b1","symbol":"BTC-USD","side":"buy","type":"limit","price":"99","qty":"1"}"#,
        r#"{"cmd":"order","account":"carol","id":"c1","symbol":"BTC-USD","side":"sell","type":"limit","price":"100","qty":"0.4"}"#,
        r#"{"cmd":"amend","account":"bob","id":"b1","price":"100"}"#,
    ]);
    assert_events(
        &events[7],
        &[
            accepted(8, "bob", "b1"),
            json!({ "ev": "amended", "seq": 8, "account": "bob", "id": "b1", "price": "100", "qty": "1" }),
            // Bob is the taker now: 20 bps of 0.4 BTC; carol the maker: 15 bps of 40 USD.
            trade(8, "100", "0.4", "buy", ("carol", "c1"), ("bob", "b1"), ("0.06", "0.0008")),
            done(8, "carol", "c1", "filled", "0.4"),
        ],
    );
}

#[test]
fn model_rejections_carry_account_and_id_except_when_malformed() {
    let (events, _) = scenario(&[
        "",
        "   \r",
        r#"{"cmd":"order","account":"bob","id":"s1","symbol":"BTC-USD","side":"sell","type":"limit","price":"100","qty":1}"#,
        r#"{"cmd":"order","account":"bob","id":"s1","symbol":"BTC-USD","side":"sell","type":"limit","price":"100.5","qty":"1"}"#,
        r#"{"cmd":"order","account":"bob","id":"s1","symbol":"BTC-USD","side":"sell","type":"limit","price":"100","qty":"1"}"#,
        r#"{"cmd":"cancel","account":"bob","id":"s1"}"#,
        r#"{"cmd":"amend","account":"bob","id":"s1"}"#,
        r#"{"cmd":"deposit","account":"bob","asset":"USD","amount":"1.001"}"#,
    ]);
    assert!(events[3].is_empty() && events[4].is_empty());
    assert_events(&events[5], &[json!({ "ev": "rejected", "seq": 6, "reason": "malformed" })]);
    let rejected = |seq: u64, reason: &str| json!({ "ev": "rejected", "seq": seq, "reason": reason, "account": "bob", "id": "s1" });
    assert_events(&events[6], &[rejected(7, "invalid_price")]);
    assert_events(&events[7], &[rejected(8, "insufficient_funds")]);
    assert_events(&events[8], &[rejected(9, "unknown_order")]);
    assert_events(&events[9], &[json!({ "ev": "rejected", "seq": 10, "reason": "malformed" })]);
    assert_events(
        &events[10],
        &[json!({ "ev": "rejected", "seq": 11, "reason": "invalid_amount" })],
    );
}
