//! The engine's replay must agree with the naive model in `model/`, event for event.
//!
//! Random command streams (a few assets, one or two instruments with odd ticks and
//! lots, four accounts, a small pool of order ids so that ids collide and get reused,
//! prices clustered around a centre so that orders cross, spend-amount market buys
//! (`quote_qty`, orders.md) allowed and not, plus invalid values and malformed lines)
//! are fed line by line to both; every line's events are compared
//! after normalisation, the engine's invariants are checked after every line, and the
//! final states are compared at the end. The plain tests at the bottom pin the model
//! itself to the spec on small hand-written scenarios.
//!
//! Futures (`futures.md`) have their own streams: a settle asset, one or two contracts,
//! sometimes a spot instrument quoted in the settle asset, offsets, `gfd`, `margin`,
//! `settle` (now and then `final`) and `liquidate`, with funds tight enough for
//! negative balances. `engine_agrees_with_model_on_random_futures_streams` compares the
//! engine on them; `model_keeps_its_invariants_on_random_futures_input` runs the model
//! alone (its invariants include conservation with the positions' value).

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

const DECIMAL_FIELDS: [&str; 10] = [
    "price",
    "qty",
    "filled",
    "maker_fee",
    "taker_fee",
    "available",
    "held",
    "pnl",
    "maker_pnl",
    "taker_pnl",
];

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
    // A `settle` or a `liquidate` (accepted without an id) finishes orders in the order
    // they were accepted, then runs the liquidation's orders long then short: the dones
    // that follow its `accepted` keep their order.
    if normalized
        .first()
        .is_some_and(|event| event["ev"] == "accepted" && event.get("id").is_none())
    {
        start = 1;
        while start < normalized.len() && normalized[start]["ev"] == "done" {
            start += 1;
        }
    }
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
    json!({ "balances": balances, "fees": fees, "books": books, "positions": normalize_positions(state) })
}

/// Every decimal string in `value` in canonical form (position entries are arrays).
fn canonical_strings(value: &Value) -> Value {
    match value {
        Value::Object(fields) => Value::Object(
            fields.iter().map(|(key, field)| (key.clone(), canonical_strings(field))).collect(),
        ),
        Value::Array(items) => Value::Array(items.iter().map(canonical_strings).collect()),
        other => canonical_value(other),
    }
}

/// Positions with numbers by value; empty sides, symbols and accounts left out.
fn normalize_positions(state: &Value) -> Value {
    let mut positions = Map::new();
    for (account, symbols) in state["positions"].as_object().into_iter().flatten() {
        let mut kept_symbols = Map::new();
        for (symbol, sides) in symbols.as_object().into_iter().flatten() {
            let mut kept_sides = Map::new();
            for (side, holding) in sides.as_object().into_iter().flatten() {
                let empty = |part: &str| holding[part].as_array().into_iter().all(Vec::is_empty);
                if !(empty("history") && empty("today")) {
                    kept_sides.insert(side.clone(), canonical_strings(holding));
                }
            }
            if !kept_sides.is_empty() {
                kept_symbols.insert(symbol.clone(), Value::Object(kept_sides));
            }
        }
        if !kept_symbols.is_empty() {
            positions.insert(account.clone(), Value::Object(kept_symbols));
        }
    }
    Value::Object(positions)
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

/// Spend-amount market buys (`quote_qty`, orders.md): mostly allowed ones, of amounts
/// that end between lots (and, where a notional unit is several quote units, between
/// notional units), now and then zero, negative, too precise or beyond any balance,
/// and now and then where `quote_qty` is not allowed (a sell, a limit order, with `qty`,
/// with `fok`) or mistyped.
fn spend_strategy(world: World) -> impl Strategy<Value = String> {
    (
        (0..4usize, 0..IDS.len(), 0..2usize),
        (0..=12i128, -2..=5i128, 0..10_000i128),
        (0..24u8, 0..6u8, 0..5u8),
        prop::option::weighted(0.2, 0..1_000_000u64),
    )
        .prop_map(
            move |((account, id, market), (lots, ticks, spare), (variant, tif, stp), ts)| {
                let definition = world.market(market);
                let decimals = world.assets[definition.quote].decimals;
                let centre = (definition.centre_ticks + ticks).max(1);
                // Whole lots at a price near the centre, plus a part of one more lot.
                let lot_cost = definition.quote_units(&world, 1, centre).max(1);
                let units = definition.quote_units(&world, lots, centre) + spare % lot_cost;
                let mut command = world.order_json(account, id, market, true);
                let fields = command.as_object_mut().expect("orders are objects");
                fields.remove("qty");
                fields.remove("price");
                command["type"] = json!("market");
                command["quote_qty"] = json!(units_text(units, decimals));
                match variant {
                    0 => command["quote_qty"] = json!("0"),
                    1 => command["quote_qty"] = json!(units_text(-units - 1, decimals)),
                    2 => command["quote_qty"] = json!(units_text(units * 10 + 1, decimals + 1)),
                    3 => command["quote_qty"] = json!(format!("1{}", "0".repeat(40))),
                    4 => command["side"] = json!("sell"),
                    5 => {
                        command["type"] = json!("limit");
                        command["price"] = json!(definition.near_price(ticks, false));
                    }
                    6 => command["qty"] = json!(definition.qty_text(lots)),
                    7 => command["quote_qty"] = json!(units as i64),
                    _ => {}
                }
                if tif > 1 {
                    command["tif"] = json!(["gtc", "ioc", "fok", "gfd"][usize::from(tif) - 2]);
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
        10 => one(spend_strategy(world.clone()).boxed()),
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

// ----------------------------------------------------------------------------------
// Generating futures streams.
//
// One settle asset (CNY, 2 decimals, sometimes 0 or 4), one or two futures contracts
// with varied tick, lot, multiplier, margin and fees, `close_today` true or false, and
// sometimes a spot BTC-CNY instrument quoted in the settle asset. Three accounts are
// funded well and one barely, so that `insufficient_funds` and negative balances
// happen. Prices cluster around a centre so that orders cross; offsets lean to
// `close` so that positions open and close often; `settle` (now and then `final`),
// `margin` and `liquidate` come in between, along with invalid values and malformed
// futures lines.

/// In UTF-8 byte order "Zoe" comes first and "émile" last: settlements list them so.
const FUTURES_ACCOUNTS: [&str; 4] = ["bob", "alice", "Zoe", "émile"];
const SETTLE_ASSET: &str = "CNY";
const SPOT_SYMBOL: &str = "BTC-CNY";
const CONTRACT_SYMBOLS: [&str; 2] = ["rb2410", "IF2406"];
/// More ids than the spot streams use: resting gfd and close orders would otherwise
/// leave most new orders `duplicate_id`.
const FUTURES_IDS: [&str; 7] = ["1", "2", "x", "id-4", "5", "6", "7"];

/// A decimal as (mantissa, scale): `(5, 1)` is "0.5".
type Fixed = (i128, u32);

const TICKS: [Fixed; 5] = [(10, 0), (5, 1), (1, 0), (2, 1), (5, 0)];
const LOTS: [Fixed; 4] = [(1, 0), (1, 1), (2, 0), (5, 1)];
const MULTIPLIERS: [Fixed; 5] = [(5, 0), (1, 1), (300, 0), (10, 0), (25, 2)];

fn fixed_text(value: Fixed) -> String {
    units_text(value.0, value.1)
}

#[derive(Clone, Debug)]
struct ContractDefinition {
    symbol: &'static str,
    tick: Fixed,
    lot: Fixed,
    multiplier: Fixed,
    min_lots: i128,
    max_lots: i128,
    /// Per lot, in the settle asset's smallest units.
    margin: i128,
    maker_fee: i128,
    taker_fee: i128,
    market_band_bps: i64,
    close_today: bool,
    centre_ticks: i128,
}

/// Raw draws for one contract: (tick, lot, multiplier), (min, max lots), (margin, half
/// a unit more, taker fee, maker fee), (band, close_today, centre).
type ContractDraw =
    ((usize, usize, usize), (i128, i128), (usize, bool, usize, usize), (i64, bool, i128));

impl ContractDefinition {
    fn build(draw: ContractDraw, symbol: &'static str, decimals: u32) -> Self {
        let ((tick, lot, multiplier), (min_lots, max_lots), money, (band, close_today, centre)) =
            draw;
        let (mut tick, mut lot, mut multiplier) = (TICKS[tick], LOTS[lot], MULTIPLIERS[multiplier]);
        // decimals(tick) + decimals(lot) + decimals(multiplier) <= decimals(settle).
        while tick.1 + lot.1 + multiplier.1 > decimals {
            if multiplier.1 > 0 {
                multiplier = (5, 0);
            } else if lot.1 > 0 {
                lot = (1, 0);
            } else {
                tick = (10, 0);
            }
        }
        let one = 10i128.pow(decimals);
        let half = if decimals > 0 { one / 2 } else { 0 };
        let (margin, fractional, taker, maker) = money;
        let margin = [1, 8, 50, 700][margin] * one + if fractional { half } else { 0 };
        let taker_fee = [0, 1, 3, 25][taker] * one + if fractional { half } else { 0 };
        let maker_fee = match maker {
            0 => taker_fee,
            1 => taker_fee / 2,
            _ => 0,
        };
        ContractDefinition {
            symbol,
            tick,
            lot,
            multiplier,
            min_lots,
            max_lots,
            margin,
            maker_fee,
            taker_fee,
            market_band_bps: band,
            close_today,
            centre_ticks: centre,
        }
    }

    fn price_text(&self, ticks: i128) -> String {
        units_text(self.tick.0 * ticks, self.tick.1)
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
        units_text(self.lot.0 * lots, self.lot.1)
    }

    /// What one open lot holds: margin plus the taker fee.
    fn lot_cost(&self) -> i128 {
        self.margin + self.taker_fee
    }

    /// What one tick's move is worth on one lot, in the settle asset's smallest units.
    fn tick_value(&self, decimals: u32) -> i128 {
        let places = self.tick.1 + self.lot.1 + self.multiplier.1;
        self.tick.0 * self.lot.0 * self.multiplier.0 * 10i128.pow(decimals - places)
    }

    fn future_json(&self, decimals: u32) -> Value {
        json!({
            "cmd": "future",
            "symbol": self.symbol,
            "settle": SETTLE_ASSET,
            "tick": fixed_text(self.tick),
            "lot": self.qty_text(1),
            "min_qty": self.qty_text(self.min_lots),
            "max_qty": self.qty_text(self.max_lots),
            "multiplier": fixed_text(self.multiplier),
            "margin": units_text(self.margin, decimals),
            "maker_fee": units_text(self.maker_fee, decimals),
            "taker_fee": units_text(self.taker_fee, decimals),
            "market_band_bps": self.market_band_bps,
            "close_today": self.close_today,
        })
    }
}

#[derive(Clone, Debug)]
struct FuturesWorld {
    settle_decimals: u32,
    contracts: Vec<ContractDefinition>,
    /// A spot BTC-CNY instrument alongside (tick 1, lot `10^-spot_lot_scale` BTC).
    spot: bool,
    spot_lot_scale: u32,
}

/// What a command names: a contract, the spot instrument, or nothing known.
enum Target<'a> {
    Contract(&'a ContractDefinition),
    Spot,
    Unknown,
}

impl FuturesWorld {
    fn amount(&self, units: i128) -> String {
        units_text(units, self.settle_decimals)
    }

    /// Picks 0..=9: mostly the contracts, now and then the spot instrument.
    fn target(&self, pick: usize) -> Target<'_> {
        match pick {
            0..=3 => Target::Contract(&self.contracts[0]),
            4..=7 => Target::Contract(&self.contracts[1 % self.contracts.len()]),
            _ if self.spot => Target::Spot,
            _ => Target::Contract(&self.contracts[0]),
        }
    }

    /// Picks 0..=9 for `margin`, `settle` and `liquidate`: now and then a symbol that is
    /// not a live contract.
    fn symbol_target(&self, pick: usize) -> Target<'_> {
        match pick {
            9 => Target::Unknown,
            8 if self.spot => Target::Spot,
            _ => self.target(pick % 8),
        }
    }

    fn symbol(target: &Target) -> &'static str {
        match target {
            Target::Contract(contract) => contract.symbol,
            Target::Spot => SPOT_SYMBOL,
            Target::Unknown => "NOPE",
        }
    }

    /// The deposit that funds a well-funded account: margin for dozens of lots on every
    /// contract and a cushion against price moves.
    fn rich_units(&self) -> i128 {
        self.contracts
            .iter()
            .map(|c| 40 * c.lot_cost() + 60 * c.tick_value(self.settle_decimals))
            .sum()
    }

    fn spot_qty(&self, lots: i128) -> String {
        units_text(lots, self.spot_lot_scale)
    }

    fn setup_lines(&self) -> Vec<String> {
        let d = self.settle_decimals;
        let mut lines =
            vec![json!({ "cmd": "asset", "asset": SETTLE_ASSET, "decimals": d }).to_string()];
        if self.spot {
            lines.push(json!({ "cmd": "asset", "asset": "BTC", "decimals": 8 }).to_string());
            lines.push(
                json!({
                    "cmd": "instrument", "symbol": SPOT_SYMBOL, "base": "BTC", "quote": SETTLE_ASSET,
                    "tick": "1", "lot": self.spot_qty(1), "min_qty": self.spot_qty(1),
                    "max_qty": "100", "maker_fee_bps": 10, "taker_fee_bps": 20, "market_band_bps": 500,
                })
                .to_string(),
            );
        }
        for contract in &self.contracts {
            lines.push(contract.future_json(d).to_string());
        }
        let poor = 2 * self.contracts[0].lot_cost() + 1;
        for (index, account) in FUTURES_ACCOUNTS.iter().enumerate() {
            let units = if index == FUTURES_ACCOUNTS.len() - 1 { poor } else { self.rich_units() };
            lines.push(
                json!({ "cmd": "deposit", "account": account, "asset": SETTLE_ASSET, "amount": self.amount(units) })
                    .to_string(),
            );
            if self.spot && index < 3 {
                lines.push(
                    json!({ "cmd": "deposit", "account": account, "asset": "BTC", "amount": "5" })
                        .to_string(),
                );
            }
        }
        lines
    }

    /// A limit buy or sell near the centre of what `pick` names, one minimal quantity.
    fn order_json(&self, account: usize, id: usize, pick: usize, buy: bool) -> Value {
        let (symbol, price, qty) = match self.target(pick) {
            Target::Contract(contract) => (
                contract.symbol,
                contract.near_price(0, false),
                contract.qty_text(contract.min_lots),
            ),
            _ => (SPOT_SYMBOL, "100".to_string(), self.spot_qty(1)),
        };
        json!({
            "cmd": "order", "account": FUTURES_ACCOUNTS[account], "id": FUTURES_IDS[id], "symbol": symbol,
            "side": if buy { "buy" } else { "sell" }, "type": "limit", "price": price, "qty": qty,
        })
    }
}

fn contract_draw() -> impl Strategy<Value = ContractDraw> {
    (
        (0..TICKS.len(), 0..LOTS.len(), 0..MULTIPLIERS.len()),
        (prop::sample::select(vec![1i128, 1, 1, 2]), prop::sample::select(vec![8i128, 1000])),
        (0..4usize, any::<bool>(), 0..4usize, 0..3usize),
        (
            prop::sample::select(vec![0i64, 50, 500, 10_000]),
            any::<bool>(),
            prop::sample::select(vec![3i128, 40, 1000]),
        ),
    )
}

fn futures_world_strategy() -> impl Strategy<Value = FuturesWorld> {
    (
        prop::sample::select(vec![2u32, 2, 0, 4]),
        contract_draw(),
        contract_draw(),
        any::<bool>(),
        0..3u8,
    )
        .prop_map(|(decimals, first, second, two, spot)| {
            let mut contracts =
                vec![ContractDefinition::build(first, CONTRACT_SYMBOLS[0], decimals)];
            if two {
                contracts.push(ContractDefinition::build(second, CONTRACT_SYMBOLS[1], decimals));
            }
            FuturesWorld {
                settle_decimals: decimals,
                contracts,
                spot: spot == 0,
                spot_lot_scale: decimals.min(2),
            }
        })
}

/// Mostly a few lots; now and then zero or above a small `max_qty`.
fn futures_lots_strategy() -> impl Strategy<Value = i128> {
    prop_oneof![1 => Just(0i128), 24 => 1..=4i128, 3 => 5..=12i128]
}

type Ts = Option<u64>;

fn ts_strategy() -> impl Strategy<Value = Ts> {
    prop::option::weighted(0.2, 0..1_000_000u64)
}

fn futures_deposit_strategy(world: FuturesWorld) -> impl Strategy<Value = String> {
    (0..4usize, 1..6i128, 0..4u8, ts_strategy()).prop_map(move |(account, factor, what, ts)| {
        let command = match what {
            0 if world.spot => json!({
                "cmd": "deposit", "account": FUTURES_ACCOUNTS[account], "asset": "BTC", "amount": "1",
            }),
            1 => json!({
                "cmd": "deposit", "account": FUTURES_ACCOUNTS[account], "asset": SETTLE_ASSET,
                "amount": world.amount(world.contracts[0].lot_cost() * factor + 1),
            }),
            _ => json!({
                "cmd": "deposit", "account": FUTURES_ACCOUNTS[account], "asset": SETTLE_ASSET,
                "amount": world.amount(world.rich_units() * factor / 10 + 1),
            }),
        };
        with_ts(command, ts)
    })
}

fn futures_withdraw_strategy(world: FuturesWorld) -> impl Strategy<Value = String> {
    (0..4usize, 0..4u8).prop_map(move |(account, size)| {
        let (asset, amount) = match size {
            0 => (SETTLE_ASSET, world.amount(1)),
            1 => (SETTLE_ASSET, world.amount(world.rich_units() / 10)),
            2 if world.spot => ("BTC", "0.5".to_string()),
            _ => (SETTLE_ASSET, format!("1{}", "0".repeat(30))),
        };
        json!({ "cmd": "withdraw", "account": FUTURES_ACCOUNTS[account], "asset": asset, "amount": amount })
            .to_string()
    })
}

/// Order shape: type (0..=2 market), tif, post_only, stp, offset (each 0..20, weighted
/// below), whether a market order also carries a price.
type FuturesOrderShape = (u8, u8, u8, u8, u8, bool);

fn futures_order_strategy(world: FuturesWorld) -> impl Strategy<Value = String> {
    (
        (0..4usize, 0..FUTURES_IDS.len(), 0..10usize, any::<bool>()),
        (-3..=3i128, futures_lots_strategy(), any::<bool>()),
        (0..20u8, 0..20u8, 0..20u8, 0..20u8, 0..20u8, any::<bool>()),
        ts_strategy(),
    )
        .prop_map(
            move |((account, id, pick, buy), (offset, lots, pad), shape, ts): (
                _,
                _,
                FuturesOrderShape,
                _,
            )| {
                let (kind, tif, post_only, stp, position_offset, market_price) = shape;
                let mut command = world.order_json(account, id, pick, buy);
                // Bids and asks spread alike around the centre: most orders cross, so
                // that positions open and close often, and the rest build up depth.
                let skew = 0;
                match world.target(pick) {
                    Target::Contract(contract) => {
                        command["qty"] = json!(contract.qty_text(lots));
                        command["price"] = json!(contract.near_price(offset + skew, pad));
                    }
                    _ => {
                        command["qty"] = json!(world.spot_qty(lots));
                        command["price"] = json!((100 + offset + skew).to_string());
                    }
                }
                if kind <= 2 {
                    command["type"] = json!("market");
                    if market_price {
                        command["post_only"] = json!(true);
                    } else {
                        command.as_object_mut().expect("object").remove("price");
                    }
                }
                let tif = match tif {
                    0..=5 => None,
                    6..=7 => Some("gtc"),
                    8..=14 => Some("gfd"),
                    15..=17 => Some("ioc"),
                    _ => Some("fok"),
                };
                if let Some(tif) = tif {
                    command["tif"] = json!(tif);
                }
                if post_only >= 18 {
                    command["post_only"] = json!(post_only == 19);
                }
                if stp >= 14 {
                    command["stp"] = json!(
                        [
                            "cancel_taker",
                            "cancel_maker",
                            "cancel_both",
                            "none",
                            "none",
                            "cancel_maker"
                        ][usize::from(stp) - 14]
                    );
                }
                let position_offset = match position_offset {
                    0..=6 => None,
                    7..=9 => Some("open"),
                    10..=16 => Some("close"),
                    _ => Some("close_today"),
                };
                if let Some(position_offset) = position_offset {
                    command["offset"] = json!(position_offset);
                }
                with_ts(command, ts)
            },
        )
}

/// Spend-amount market buys (`quote_qty`) in the futures streams: on a contract
/// (`invalid_order`, or `invalid_offset` first), and on the spot instrument beside
/// the contracts when there is one, of amounts between lots of BTC at about 100 CNY.
fn futures_spend_strategy(world: FuturesWorld) -> impl Strategy<Value = String> {
    (
        (0..4usize, 0..FUTURES_IDS.len(), 0..10usize),
        (0..=20i128, 0..10_000i128, 0..8u8, 0..5u8),
        ts_strategy(),
    )
        .prop_map(move |((account, id, pick), (lots, spare, variant, stp), ts)| {
            let mut command = world.order_json(account, id, pick, true);
            let fields = command.as_object_mut().expect("orders are objects");
            fields.remove("qty");
            fields.remove("price");
            command["type"] = json!("market");
            // A lot of BTC at 100 CNY, in CNY units.
            let lot_cost = 100 * 10i128.pow(world.settle_decimals - world.spot_lot_scale);
            command["quote_qty"] = json!(world.amount(lots * lot_cost + spare % lot_cost));
            match variant {
                0 => command["offset"] = json!("close_today"),
                1 => command["tif"] = json!("fok"),
                2 => command["qty"] = json!(world.spot_qty(1)),
                _ => {}
            }
            if stp > 0 {
                command["stp"] = json!(
                    ["cancel_taker", "cancel_maker", "cancel_both", "none"][usize::from(stp) - 1]
                );
            }
            with_ts(command, ts)
        })
}

fn futures_cancel_strategy() -> impl Strategy<Value = String> {
    (0..4usize, 0..FUTURES_IDS.len(), ts_strategy()).prop_map(|(account, id, ts)| {
        with_ts(
            json!({ "cmd": "cancel", "account": FUTURES_ACCOUNTS[account], "id": FUTURES_IDS[id] }),
            ts,
        )
    })
}

fn futures_amend_strategy(world: FuturesWorld) -> impl Strategy<Value = String> {
    ((0..4usize, 0..FUTURES_IDS.len(), 0..10usize), (0..20u8, -3..=3i128, futures_lots_strategy()))
        .prop_map(move |((account, id, pick), (what, offset, lots))| {
            let (price, qty) = match world.target(pick) {
                Target::Contract(contract) => {
                    (contract.near_price(offset, false), contract.qty_text(lots))
                }
                _ => ((100 + offset).to_string(), world.spot_qty(lots)),
            };
            let mut command =
                json!({ "cmd": "amend", "account": FUTURES_ACCOUNTS[account], "id": FUTURES_IDS[id] });
            // 0: neither field (malformed); 1..=7 price; 8..=13 qty; the rest both.
            if (1..=7).contains(&what) || what >= 14 {
                command["price"] = json!(price);
            }
            if what >= 8 {
                command["qty"] = json!(qty);
            }
            command.to_string()
        })
}

fn margin_strategy(world: FuturesWorld) -> impl Strategy<Value = String> {
    (0..10usize, 0..14u8, ts_strategy()).prop_map(move |(pick, what, ts)| {
        let target = world.symbol_target(pick);
        let current = match &target {
            Target::Contract(contract) => contract.margin,
            _ => world.contracts[0].margin,
        };
        let d = world.settle_decimals;
        let mut command = json!({ "cmd": "margin", "symbol": FuturesWorld::symbol(&target) });
        command["margin"] = match what {
            0 => json!("0"),
            1 => json!(format!("-{}", world.amount(current))),
            2 => json!(units_text(current * 10 + 1, d + 1)),
            3 => json!(5),
            4 => json!(world.amount(1)),
            5 | 6 => json!(world.amount((current / 2).max(1))),
            7..=9 => json!(world.amount(current * 2)),
            10 => json!(world.amount(current * 5)),
            11 => json!(padded(world.amount(current))),
            12 => Value::Null,
            _ => json!(world.amount(current + 1)),
        };
        with_ts(command, ts)
    })
}

fn settle_strategy(world: FuturesWorld) -> impl Strategy<Value = String> {
    (0..10usize, -4..=4i128, 0..80u8, ts_strategy()).prop_map(move |(pick, offset, what, ts)| {
        let target = world.symbol_target(pick);
        let contract = match &target {
            Target::Contract(contract) => contract,
            _ => &world.contracts[0],
        };
        let mut command = json!({
            "cmd": "settle", "symbol": FuturesWorld::symbol(&target),
            "price": contract.near_price(offset, what == 8),
        });
        match what {
            0 => command["price"] = json!("0"),
            1 => command["price"] = json!(format!("-{}", contract.near_price(0, false))),
            2 => {
                command["price"] = json!(units_text(
                    contract.tick.0 * contract.centre_ticks * 10 + 1,
                    contract.tick.1 + 1
                ))
            }
            3 => command["final"] = json!(true),
            4 | 5 => command["final"] = json!(false),
            6 => command["final"] = json!("yes"),
            7 => command["price"] = json!(100),
            _ => {}
        }
        with_ts(command, ts)
    })
}

fn liquidate_strategy(world: FuturesWorld) -> impl Strategy<Value = String> {
    (0..4usize, 0..10usize, 0..16u8).prop_map(move |(account, pick, what)| {
        let symbol = FuturesWorld::symbol(&world.symbol_target(pick));
        match what {
            0 => json!({ "cmd": "liquidate", "symbol": symbol }),
            1 => json!({ "cmd": "liquidate", "account": "", "symbol": symbol }),
            2 => json!({ "cmd": "liquidate", "account": FUTURES_ACCOUNTS[account], "symbol": 7 }),
            3 => json!({ "cmd": "liquidate", "account": "nobody", "symbol": symbol }),
            _ => json!({ "cmd": "liquidate", "account": FUTURES_ACCOUNTS[account], "symbol": symbol }),
        }
        .to_string()
    })
}

/// Futures definitions (valid, duplicate, invalid), odd but valid values, and malformed
/// futures lines.
fn odd_futures_line(
    world: &FuturesWorld,
    template: usize,
    account: usize,
    id: usize,
    pick: usize,
) -> String {
    let d = world.settle_decimals;
    let contract = match world.target(pick) {
        Target::Contract(contract) => contract,
        _ => &world.contracts[0],
    };
    let order = {
        let mut order = world.order_json(account, id, pick % 8, true);
        order["offset"] = json!("close");
        order
    };
    let spot_order = world.order_json(account, id, 9, false);
    let mut future = contract.future_json(d);
    future["symbol"] = json!("NEW-F");
    let changed = |mut value: Value, key: &str, field: Value| {
        value[key] = field;
        value.to_string()
    };
    let without = |mut value: Value, key: &str| {
        value.as_object_mut().expect("commands are objects").remove(key);
        value.to_string()
    };
    match template {
        0 => changed(order, "offset", json!("CLOSE")),
        1 => changed(order, "offset", json!("")),
        2 => changed(order, "offset", json!(1)),
        3 => changed(order, "offset", Value::Null),
        4 => changed(order, "tif", json!("GFD")),
        5 => changed(order, "tif", json!("day")),
        6 => changed(spot_order, "offset", json!("closed")),
        7 => changed(spot_order, "offset", json!("close_today")),
        8 => changed(spot_order, "tif", json!("gfd")),
        9 => without(future, "multiplier"),
        10 => changed(future, "close_today", json!("true")),
        11 => changed(future, "margin", json!(5)),
        12 => contract.future_json(d).to_string(),
        13 => changed(future, "settle", json!("DOGE")),
        14 => changed(future, "maker_fee", json!(world.amount(contract.taker_fee + 1))),
        15 => changed(future, "margin", json!("0")),
        16 => changed(future, "multiplier", json!("0")),
        17 => changed(future, "multiplier", json!("-5")),
        18 => changed(future, "tick", json!(units_text(1, d + 1))),
        19 => changed(future, "margin", json!(units_text(1, d + 1))),
        20 => changed(future, "maker_fee", json!("-1")),
        21 => changed(future, "market_band_bps", json!(10_001)),
        22 => changed(future, "min_qty", json!(contract.qty_text(contract.max_lots + 1))),
        23 => future.to_string(),
        24 => json!({
            "cmd": "instrument", "symbol": contract.symbol, "base": SETTLE_ASSET, "quote": "BTC",
            "tick": "1", "lot": "1", "min_qty": "1", "max_qty": "10",
            "maker_fee_bps": 0, "taker_fee_bps": 0, "market_band_bps": 0,
        })
        .to_string(),
        25 => json!({ "cmd": "settle", "symbol": contract.symbol }).to_string(),
        26 => json!({ "cmd": "margin", "symbol": contract.symbol }).to_string(),
        27 => json!({ "cmd": "future" }).to_string(),
        28 => changed(future, "settle", json!(5)),
        29 => changed(future, "taker_fee", json!(units_text(1, d + 1))),
        30 => changed(order, "qty", json!(1)),
        31 => changed(future, "lot", json!(units_text(1, d + 1))),
        32 => changed(future, "multiplier", json!(units_text(1, d + 1))),
        33 => changed(future, "taker_fee", json!("-0")),
        34 => changed(future, "tick", json!("0")),
        35 => changed(order, "type", json!("market")),
        36 => json!({ "cmd": "settle", "symbol": "NEW-F", "price": contract.near_price(0, false) })
            .to_string(),
        37 => json!({ "cmd": "liquidate", "account": FUTURES_ACCOUNTS[account] }).to_string(),
        _ => changed(order, "offset", json!("close_today")),
    }
}

const ODD_FUTURES_TEMPLATES: usize = 39;

fn odd_futures_line_strategy(world: FuturesWorld) -> impl Strategy<Value = String> {
    (0..ODD_FUTURES_TEMPLATES, 0..4usize, 0..FUTURES_IDS.len(), 0..10usize).prop_map(
        move |(template, account, id, pick)| odd_futures_line(&world, template, account, id, pick),
    )
}

/// An order, then a cancel or an amend of the same account and id.
fn futures_order_and_follow_up_strategy(world: FuturesWorld) -> impl Strategy<Value = Vec<String>> {
    let follow_up = prop_oneof![futures_cancel_strategy(), futures_amend_strategy(world.clone())];
    (futures_order_strategy(world), follow_up).prop_map(|(order, follow_up)| {
        let placed: Value = serde_json::from_str(&order).expect("generated orders are JSON");
        let mut follow_up: Value =
            serde_json::from_str(&follow_up).expect("generated commands are JSON");
        follow_up["account"] = placed["account"].clone();
        follow_up["id"] = placed["id"].clone();
        vec![order, follow_up.to_string()]
    })
}

fn futures_lines_strategy(world: FuturesWorld) -> BoxedStrategy<Vec<String>> {
    let one = |strategy: BoxedStrategy<String>| strategy.prop_map(|line| vec![line]);
    prop_oneof![
        7 => one(futures_deposit_strategy(world.clone()).boxed()),
        3 => one(futures_withdraw_strategy(world.clone()).boxed()),
        55 => one(futures_order_strategy(world.clone()).boxed()),
        5 => one(futures_spend_strategy(world.clone()).boxed()),
        12 => futures_order_and_follow_up_strategy(world.clone()),
        4 => one(futures_cancel_strategy().boxed()),
        6 => one(futures_amend_strategy(world.clone()).boxed()),
        5 => one(settle_strategy(world.clone()).boxed()),
        3 => one(margin_strategy(world.clone()).boxed()),
        3 => one(liquidate_strategy(world.clone()).boxed()),
        5 => one(odd_futures_line_strategy(world).boxed()),
    ]
    .boxed()
}

fn futures_stream_strategy() -> impl Strategy<Value = Vec<String>> {
    futures_world_strategy().prop_flat_map(|world| {
        let setup = world.setup_lines();
        prop::collection::vec(futures_lines_strategy(world), 1..200).prop_map(move |commands| {
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

    /// Fails until the engine implements `futures.md`: it then must agree with the model.
    #[test]
    fn engine_agrees_with_model_on_random_futures_streams(lines in futures_stream_strategy()) {
        compare_with_engine(&lines)?;
    }

    /// The model alone on the same streams: its own invariants (conservation with the
    /// positions' value, held = holds + margin, reservations within what they may close)
    /// hold after every line, whatever the engine does.
    #[test]
    fn model_keeps_its_invariants_on_random_futures_input(lines in futures_stream_strategy()) {
        let mut model = Model::new();
        for line in &lines {
            model.feed_line(line);
        }
        let state = normalize_state(&model.state());
        prop_assert!(state["positions"].is_object());
    }
}

/// Streams at the edges random ones rarely reach: amounts at the 64-bit limit, fees
/// on huge notionals, 18-decimal assets, amends to extreme values.
/// The spot streams reach every outcome of a spend-amount buy (each stop condition,
/// each rejection), so that the comparison above covers them.
#[test]
fn random_streams_reach_every_outcome_of_a_spend_amount_buy() {
    use proptest::strategy::ValueTree;
    use proptest::test_runner::{Config, TestRunner};
    use std::collections::BTreeMap;

    let mut runner = TestRunner::new_with_rng(
        Config::default(),
        proptest::test_runner::TestRng::deterministic_rng(
            proptest::test_runner::RngAlgorithm::ChaCha,
        ),
    );
    let mut outcomes: BTreeMap<String, usize> = BTreeMap::new();
    for _ in 0..300 {
        let lines = stream_strategy().new_tree(&mut runner).expect("a stream").current();
        let mut model = Model::new();
        for line in &lines {
            let events = model.feed_line(line);
            if !line.contains("quote_qty") {
                continue;
            }
            let outcome = match (events.first(), events.last()) {
                (Some(first), _) if first["ev"] == "rejected" => {
                    format!("rejected {}", first["reason"].as_str().unwrap_or(""))
                }
                (_, Some(last)) => {
                    let traded = events.iter().any(|event| event["ev"] == "trade");
                    format!("{} traded {traded}", last["reason"].as_str().unwrap_or(""))
                }
                _ => "nothing".to_string(),
            };
            *outcomes.entry(outcome).or_default() += 1;
        }
    }
    for expected in [
        "filled traded true",
        "expired traded true",
        "expired traded false",
        "stp traded false",
        "rejected invalid_order",
        "rejected invalid_qty",
        "rejected no_liquidity",
        "rejected insufficient_funds",
        "rejected malformed",
        "rejected duplicate_id",
    ] {
        assert!(
            outcomes.get(expected).is_some_and(|&count| count > 0),
            "{expected}: {outcomes:#?}"
        );
    }
}

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
    let spend = |account: &str, id: &str, quote_qty: &str| {
        format!(
            r#"{{"cmd":"order","account":"{account}","id":"{id}","symbol":"B-Q","side":"buy","type":"market","quote_qty":"{quote_qty}"}}"#
        )
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
            spend("bob", "q1", "0.000000000000000001"),
            spend("bob", "q2", "1.5"),
            spend("alice", "q3", "0.6"),
        ],
        // Spend-amount buys of i64::MAX quote units: one lot at the top price costs
        // exactly that (the protection price is beyond 64 bits).
        vec![
            asset("B", 8),
            asset("Q", 2),
            instrument("1", "0.01", "100", (10, 1000, 10_000)),
            deposit("alice", "B", "1"),
            order("alice", "s1", "sell", Some(top), "0.01", ""),
            order("alice", "s2", "sell", Some(top), "0.02", ""),
            deposit("bob", "Q", "92233720368547758.07"),
            spend("bob", "q1", "92233720368547758.07"),
            spend("bob", "q2", "0.01"),
            spend("alice", "q3", "1"),
            spend("alice", "q4", "92233720368547758.08"),
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

// ----------------------------------------------------------------------------------
// The model against `orders.md`'s "Market buys by amount to spend", on hand-written
// scenarios (BTC-USD of `BTC_USD`: tick 1, lot 0.01, maker 15 bps, taker 20 bps, band
// 5%).

/// A market buy of alice spending `quote_qty` (`extra` adds fields).
fn spend(id: &str, quote_qty: &str, extra: &str) -> String {
    format!(
        r#"{{"cmd":"order","account":"alice","id":"{id}","symbol":"BTC-USD","side":"buy","type":"market","quote_qty":"{quote_qty}"{extra}}}"#
    )
}

/// Bob's asks: s1 100 x 0.3, s2 101 x 0.5 (seqs 4 to 7), and alice's 100 USD (seq 8).
fn spending_scenario(extra: &[&str]) -> (Vec<Vec<Value>>, Value) {
    let mut lines = vec![
        r#"{"cmd":"deposit","account":"bob","asset":"BTC","amount":"1"}"#,
        r#"{"cmd":"order","account":"bob","id":"s1","symbol":"BTC-USD","side":"sell","type":"limit","price":"100","qty":"0.3"}"#,
        r#"{"cmd":"order","account":"bob","id":"s2","symbol":"BTC-USD","side":"sell","type":"limit","price":"101","qty":"0.5"}"#,
        r#"{"cmd":"deposit","account":"carol","asset":"BTC","amount":"1"}"#,
        r#"{"cmd":"deposit","account":"alice","asset":"USD","amount":"100"}"#,
    ];
    lines.extend_from_slice(extra);
    scenario(&lines)
}

#[test]
fn model_spending_buy_takes_what_is_left_pays_for_from_each_maker() {
    let line = spend("m1", "50.75", "");
    let (events, state) = spending_scenario(&[&line]);
    // 50.75 buys all of s1 (0.3 for 30), then floor_to_lot(20.75 / 101) = 0.2 of s2 for
    // 20.20; the 0.55 left buys less than a lot at 101: filled, and 0.55 comes back.
    // Fees as for any taker: 0.3 and 0.2 BTC at 20 bps; bob's 15 bps of 30 and 20.20,
    // rounded up to the cent.
    assert_events(
        &events[8],
        &[
            accepted(9, "alice", "m1"),
            trade(9, "100", "0.3", "buy", ("bob", "s1"), ("alice", "m1"), ("0.05", "0.0006")),
            done(9, "bob", "s1", "filled", "0.3"),
            trade(9, "101", "0.2", "buy", ("bob", "s2"), ("alice", "m1"), ("0.04", "0.0004")),
            done(9, "alice", "m1", "filled", "0.5"),
        ],
    );
    let expected = json!({
        "balances": {
            "alice": { "USD": { "available": "49.8", "held": "0" }, "BTC": { "available": "0.499", "held": "0" } },
            "bob": { "USD": { "available": "50.11", "held": "0" }, "BTC": { "available": "0.2", "held": "0.3" } },
            "carol": { "BTC": { "available": "1", "held": "0" } },
        },
        "fees": { "USD": "0.09", "BTC": "0.001" },
        "books": { "BTC-USD": { "bids": [], "asks": [ { "account": "bob", "id": "s2", "price": "101", "qty": "0.3" } ] } },
    });
    assert_eq!(state, normalize_state(&expected));
}

#[test]
fn model_spending_buy_ends_filled_with_nothing_left_and_expired_with_no_maker_left() {
    let (exact, cent, bought_nothing) =
        (spend("m1", "80.5", ""), spend("m2", "0.5", ""), spend("m3", "100", ""));
    let (events, state) = spending_scenario(&[&exact, &cent, &bought_nothing]);
    // 30 + 50.50 = 80.50: nothing left after s2, so filled, though no ask is left.
    assert_events(
        &events[8],
        &[
            accepted(9, "alice", "m1"),
            trade(9, "100", "0.3", "buy", ("bob", "s1"), ("alice", "m1"), ("0.05", "0.0006")),
            done(9, "bob", "s1", "filled", "0.3"),
            trade(9, "101", "0.5", "buy", ("bob", "s2"), ("alice", "m1"), ("0.08", "0.001")),
            done(9, "bob", "s2", "filled", "0.5"),
            done(9, "alice", "m1", "filled", "0.8"),
        ],
    );
    // An empty other side: `no_liquidity`, as for any market order.
    let rejected = |seq: u64, id: &str, reason: &str| json!({ "ev": "rejected", "seq": seq, "reason": reason, "account": "alice", "id": id });
    assert_events(&events[9], &[rejected(10, "m2", "no_liquidity")]);
    assert_events(&events[10], &[rejected(11, "m3", "no_liquidity")]);
    assert_eq!(state["balances"]["alice"]["USD"], json!({ "available": "19.5", "held": "0" }));

    // Money left but no maker within the protection price (100 * 1.05 = 105): expired.
    let ask_at_106 = r#"{"cmd":"order","account":"carol","id":"c1","symbol":"BTC-USD","side":"sell","type":"limit","price":"106","qty":"0.1"}"#;
    let more = spend("m4", "85", "");
    let (events, state) = spending_scenario(&[ask_at_106, &more]);
    assert_events(
        &events[9],
        &[
            accepted(10, "alice", "m4"),
            trade(10, "100", "0.3", "buy", ("bob", "s1"), ("alice", "m4"), ("0.05", "0.0006")),
            done(10, "bob", "s1", "filled", "0.3"),
            trade(10, "101", "0.5", "buy", ("bob", "s2"), ("alice", "m4"), ("0.08", "0.001")),
            done(10, "bob", "s2", "filled", "0.5"),
            done(10, "alice", "m4", "expired", "0.8"),
        ],
    );
    assert_eq!(state["balances"]["alice"]["USD"], json!({ "available": "19.5", "held": "0" }));
}

#[test]
fn model_spending_buy_that_buys_less_than_a_lot_expires_and_returns_its_hold() {
    let (less_than_a_lot, a_lot_and_a_half) = (spend("m1", "0.99", ""), spend("m2", "1.5", ""));
    let (events, state) = spending_scenario(&[&less_than_a_lot, &a_lot_and_a_half]);
    // A lot at 100 costs 1.00: 0.99 buys nothing.
    assert_events(
        &events[8],
        &[accepted(9, "alice", "m1"), done(9, "alice", "m1", "expired", "0")],
    );
    // 1.5 buys one lot; the 0.5 left buys less than another at 100: filled.
    assert_events(
        &events[9],
        &[
            accepted(10, "alice", "m2"),
            trade(10, "100", "0.01", "buy", ("bob", "s1"), ("alice", "m2"), ("0.01", "0.00002")),
            done(10, "alice", "m2", "filled", "0.01"),
        ],
    );
    assert_eq!(state["balances"]["alice"]["USD"], json!({ "available": "99", "held": "0" }));
}

#[test]
fn model_spending_buy_rejections_follow_the_spec_order() {
    let lines = [
        // Not allowed, whatever the value: with qty, a sell, a limit order, fok.
        spend("r1", "10", r#","qty":"0.1""#),
        r#"{"cmd":"order","account":"carol","id":"r2","symbol":"BTC-USD","side":"sell","type":"market","quote_qty":"0"}"#.to_string(),
        r#"{"cmd":"order","account":"alice","id":"r3","symbol":"BTC-USD","side":"buy","type":"limit","price":"100","quote_qty":"-5"}"#.to_string(),
        spend("r4", "10", r#","tif":"fok""#),
        // qty is checked first; a limit price before both.
        spend("r5", "10", r#","qty":"0.001""#),
        r#"{"cmd":"order","account":"alice","id":"r6","symbol":"BTC-USD","side":"buy","type":"limit","price":"100.5","quote_qty":"10"}"#.to_string(),
        // The value where it is allowed: positive, within the quote's decimals.
        spend("r7", "0", ""),
        spend("r8", "-1", ""),
        spend("r9", "0.001", ""),
        // Funds: available must cover quote_qty (min_qty and max_qty do not apply).
        spend("r10", "100.01", ""),
        spend("r11", &format!("1{}", "0".repeat(40)), ""),
        // Neither qty nor quote_qty, or a mistyped quote_qty even where it is not
        // allowed: malformed.
        r#"{"cmd":"order","account":"alice","id":"r12","symbol":"BTC-USD","side":"buy","type":"market"}"#.to_string(),
        r#"{"cmd":"order","account":"alice","id":"r13","symbol":"BTC-USD","side":"buy","type":"limit","price":"100","qty":"1","quote_qty":5}"#.to_string(),
        spend("r14", "100", ""),
    ];
    let lines: Vec<&str> = lines.iter().map(String::as_str).collect();
    let (events, _) = spending_scenario(&lines);
    let rejected = |seq: u64, account: &str, id: &str, reason: &str| json!({ "ev": "rejected", "seq": seq, "reason": reason, "account": account, "id": id });
    let reasons = [
        ("alice", "r1", "invalid_order"),
        ("carol", "r2", "invalid_order"),
        ("alice", "r3", "invalid_order"),
        ("alice", "r4", "invalid_order"),
        ("alice", "r5", "invalid_qty"),
        ("alice", "r6", "invalid_price"),
        ("alice", "r7", "invalid_qty"),
        ("alice", "r8", "invalid_qty"),
        ("alice", "r9", "invalid_qty"),
        ("alice", "r10", "insufficient_funds"),
        ("alice", "r11", "insufficient_funds"),
    ];
    for (index, (account, id, reason)) in reasons.into_iter().enumerate() {
        let seq = 9 + index as u64;
        assert_events(&events[8 + index], &[rejected(seq, account, id, reason)]);
    }
    assert_events(&events[19], &[json!({ "ev": "rejected", "seq": 20, "reason": "malformed" })]);
    assert_events(&events[20], &[json!({ "ev": "rejected", "seq": 21, "reason": "malformed" })]);
    assert_eq!(events[21][0]["ev"], "accepted");
}

#[test]
fn model_spending_buy_meets_its_own_asks_with_self_trade_prevention() {
    let own_ask = r#"{"cmd":"order","account":"alice","id":"a1","symbol":"BTC-USD","side":"sell","type":"limit","price":"99","qty":"0.1"}"#;
    let alice_btc = r#"{"cmd":"deposit","account":"alice","asset":"BTC","amount":"1"}"#;
    let (taker, maker, small) = (
        spend("m1", "50", ""),
        spend("m2", "50", r#","stp":"cancel_maker""#),
        spend("m3", "0.5", r#","stp":"cancel_both""#),
    );
    let (events, _) = spending_scenario(&[alice_btc, own_ask, &taker, &maker]);
    assert_events(&events[10], &[accepted(11, "alice", "m1"), done(11, "alice", "m1", "stp", "0")]);
    assert_events(
        &events[11],
        &[
            accepted(12, "alice", "m2"),
            done(12, "alice", "a1", "stp", "0"),
            trade(12, "100", "0.3", "buy", ("bob", "s1"), ("alice", "m2"), ("0.05", "0.0006")),
            done(12, "bob", "s1", "filled", "0.3"),
            trade(12, "101", "0.19", "buy", ("bob", "s2"), ("alice", "m2"), ("0.03", "0.00038")),
            done(12, "alice", "m2", "filled", "0.49"),
        ],
    );
    // What is left buys less than a lot at the own ask's price: that check comes
    // before self-trade prevention, so the order expires and the ask stays.
    let (events, state) = spending_scenario(&[alice_btc, own_ask, &small]);
    assert_events(
        &events[10],
        &[accepted(11, "alice", "m3"), done(11, "alice", "m3", "expired", "0")],
    );
    assert_eq!(state["books"]["BTC-USD"]["asks"][0]["id"], "a1");
}

// ----------------------------------------------------------------------------------
// The model against `futures.md`, on hand-written scenarios. Two contracts settled in
// CNY (2 decimals), tick 1, lot 1, multiplier 10, margin 100, fees 1 (maker) and 3
// (taker) per lot: `rb` with `close_today: false`, `cu` with `close_today: true`.

const FUTURES: [&str; 3] = [
    r#"{"cmd":"asset","asset":"CNY","decimals":2}"#,
    r#"{"cmd":"future","symbol":"rb","settle":"CNY","tick":"1","lot":"1","min_qty":"1","max_qty":"100","multiplier":"10","margin":"100","maker_fee":"1","taker_fee":"3","market_band_bps":500}"#,
    r#"{"cmd":"future","symbol":"cu","settle":"CNY","tick":"1","lot":"1","min_qty":"1","max_qty":"100","multiplier":"10","margin":"100","maker_fee":"1","taker_fee":"3","market_band_bps":500,"close_today":true}"#,
];

/// `FUTURES` then `extra` (whose first line is seq 4).
fn futures_scenario(extra: &[String]) -> (Vec<Vec<Value>>, Value) {
    let lines: Vec<&str> =
        FUTURES.iter().copied().chain(extra.iter().map(String::as_str)).collect();
    run_model(&lines)
}

fn fund(account: &str, amount: &str) -> String {
    json!({ "cmd": "deposit", "account": account, "asset": "CNY", "amount": amount }).to_string()
}

/// A limit order; `extra` adds fields, e.g. `r#","offset":"close""#`.
fn put(
    account: &str,
    id: &str,
    symbol: &str,
    side: &str,
    price: &str,
    qty: &str,
    extra: &str,
) -> String {
    format!(
        r#"{{"cmd":"order","account":"{account}","id":"{id}","symbol":"{symbol}","side":"{side}","type":"limit","price":"{price}","qty":"{qty}"{extra}}}"#
    )
}

fn settle_line(symbol: &str, price: &str, extra: &str) -> String {
    format!(r#"{{"cmd":"settle","symbol":"{symbol}","price":"{price}"{extra}}}"#)
}

#[allow(clippy::too_many_arguments)]
fn ftrade(
    seq: u64,
    symbol: &str,
    price: &str,
    qty: &str,
    taker_side: &str,
    maker: (&str, &str),
    taker: (&str, &str),
    fees: (&str, &str),
    pnl: (&str, &str),
) -> Value {
    json!({
        "ev": "trade", "seq": seq, "symbol": symbol, "price": price, "qty": qty, "taker_side": taker_side,
        "maker_account": maker.0, "maker_id": maker.1, "taker_account": taker.0, "taker_id": taker.1,
        "maker_fee": fees.0, "taker_fee": fees.1, "maker_pnl": pnl.0, "taker_pnl": pnl.1,
    })
}

fn settled(
    seq: u64,
    account: &str,
    symbol: &str,
    side: &str,
    qty: &str,
    price: &str,
    pnl: &str,
) -> Value {
    json!({ "ev": "settled", "seq": seq, "account": account, "symbol": symbol, "side": side, "qty": qty, "price": price, "pnl": pnl })
}

fn order_rejected(seq: u64, account: &str, id: &str, reason: &str) -> Value {
    json!({ "ev": "rejected", "seq": seq, "reason": reason, "account": account, "id": id })
}

fn rejected(seq: u64, reason: &str) -> Value {
    json!({ "ev": "rejected", "seq": seq, "reason": reason })
}

fn amended(seq: u64, account: &str, id: &str, price: &str, qty: &str) -> Value {
    json!({ "ev": "amended", "seq": seq, "account": account, "id": id, "price": price, "qty": qty })
}

/// Alice and bob get 1000 CNY; bob offers 2 rb at 100 and alice takes them with a
/// higher limit.
fn rb_opened() -> Vec<String> {
    vec![
        fund("alice", "1000"),
        fund("bob", "1000"),
        put("bob", "b1", "rb", "sell", "100", "2", ""),
        put("alice", "a1", "rb", "buy", "101", "2", r#","offset":"open","tif":"gfd""#),
    ]
}

#[test]
fn model_futures_opening_fill_holds_margin_and_refunds_the_fee_difference() {
    let (events, state) = futures_scenario(&rb_opened());
    // Bob's open order holds 2 * (100 + 3) whatever its price.
    assert_events(&events[5], &[accepted(6, "bob", "b1")]);
    // At the maker's price: bob pays 2 * 1 as maker, alice 2 * 3 as taker.
    assert_events(
        &events[6],
        &[
            accepted(7, "alice", "a1"),
            ftrade(
                7,
                "rb",
                "100",
                "2",
                "buy",
                ("bob", "b1"),
                ("alice", "a1"),
                ("2", "6"),
                ("0", "0"),
            ),
            done(7, "bob", "b1", "filled", "2"),
            done(7, "alice", "a1", "filled", "2"),
        ],
    );
    // Each keeps 2 * 100 of margin held; bob gets 2 * (3 - 1) of his hold back.
    let expected = json!({
        "balances": {
            "alice": { "CNY": { "available": "794", "held": "200" } },
            "bob": { "CNY": { "available": "798", "held": "200" } },
        },
        "fees": { "CNY": "8" },
        "books": {},
        "positions": {
            "alice": { "rb": { "long": { "history": [], "today": [["100", "2"]] } } },
            "bob": { "rb": { "short": { "history": [], "today": [["100.0", "2"]] } } },
        },
    });
    assert_eq!(state, normalize_state(&expected));
}

#[test]
fn model_futures_closing_fills_realise_profit_long_and_short() {
    let mut lines = rb_opened();
    lines.extend([
        put("alice", "c1", "rb", "sell", "105", "1", r#","offset":"close""#),
        put("bob", "c2", "rb", "buy", "106", "1", r#","offset":"close""#),
        put("bob", "c3", "rb", "buy", "98", "1", r#","offset":"close""#),
        put("alice", "c4", "rb", "sell", "97", "1", r#","offset":"close""#),
        put("bob", "c5", "rb", "buy", "98", "1", r#","offset":"close""#),
    ]);
    let (events, state) = futures_scenario(&lines);
    // Alice's long from 100 closes at 105: 1 * 5 * 10 = 50; bob's short loses as much.
    assert_events(
        &events[8],
        &[
            accepted(9, "bob", "c2"),
            ftrade(
                9,
                "rb",
                "105",
                "1",
                "buy",
                ("alice", "c1"),
                ("bob", "c2"),
                ("1", "3"),
                ("50", "-50"),
            ),
            done(9, "alice", "c1", "filled", "1"),
            done(9, "bob", "c2", "filled", "1"),
        ],
    );
    // Bob's short from 100 closes at 98: 1 * 2 * 10 = 20.
    assert_events(
        &events[10],
        &[
            accepted(11, "alice", "c4"),
            ftrade(
                11,
                "rb",
                "98",
                "1",
                "sell",
                ("bob", "c3"),
                ("alice", "c4"),
                ("1", "3"),
                ("20", "-20"),
            ),
            done(11, "bob", "c3", "filled", "1"),
            done(11, "alice", "c4", "filled", "1"),
        ],
    );
    // Nothing is left to close.
    assert_events(&events[11], &[order_rejected(12, "bob", "c5", "insufficient_position")]);
    // Alice: 794 + (50 + 100 - 1) + (-20 + 100 - 3); bob: 798 + (-50 + 100 - 3) + (20 + 100 - 1).
    let expected = json!({
        "balances": {
            "alice": { "CNY": { "available": "1020", "held": "0" } },
            "bob": { "CNY": { "available": "964", "held": "0" } },
        },
        "fees": { "CNY": "16" },
        "books": {},
        "positions": {},
    });
    assert_eq!(state, normalize_state(&expected));
}

#[test]
fn model_futures_close_today_contract_keeps_history_and_today_apart() {
    let (events, state) = futures_scenario(&[
        fund("alice", "10000"),
        fund("bob", "10000"),
        put("bob", "b1", "cu", "sell", "100", "2", ""),
        put("alice", "a1", "cu", "buy", "100", "2", ""),
        settle_line("cu", "100", ""),
        put("bob", "b2", "cu", "sell", "102", "1", ""),
        put("alice", "a2", "cu", "buy", "102", "1", ""),
        // History 2, today 1.
        put("alice", "c", "cu", "sell", "110", "3", r#","offset":"close""#),
        put("alice", "c", "cu", "sell", "110", "2", r#","offset":"close""#),
        put("alice", "c3", "cu", "sell", "110", "1", r#","offset":"close""#),
        put("alice", "t1", "cu", "sell", "111", "1", r#","offset":"close_today""#),
        put("alice", "t2", "cu", "sell", "111", "1", r#","offset":"close_today""#),
        put("alice", "r1", "rb", "sell", "111", "1", r#","offset":"close_today""#),
        fund("carol", "10000"),
        put("carol", "k1", "cu", "buy", "111", "3", ""),
    ]);
    assert_events(
        &events[7],
        &[
            json!({ "ev": "accepted", "seq": 8 }),
            settled(8, "alice", "cu", "long", "2", "100", "0"),
            settled(8, "bob", "cu", "short", "2", "100", "0"),
        ],
    );
    // `close` takes only history (2), whatever today holds.
    assert_events(&events[10], &[order_rejected(11, "alice", "c", "insufficient_position")]);
    assert_events(&events[11], &[accepted(12, "alice", "c")]);
    assert_events(&events[12], &[order_rejected(13, "alice", "c3", "insufficient_position")]);
    // `close_today` takes only today (1).
    assert_events(&events[13], &[accepted(14, "alice", "t1")]);
    assert_events(&events[14], &[order_rejected(15, "alice", "t2", "insufficient_position")]);
    // On a contract with `close_today: false` the offset is invalid.
    assert_events(&events[15], &[order_rejected(16, "alice", "r1", "invalid_offset")]);
    // The close takes history at 100: 2 * 10 * 10; the close_today today's 102: 9 * 10.
    assert_events(
        &events[17],
        &[
            accepted(18, "carol", "k1"),
            ftrade(
                18,
                "cu",
                "110",
                "2",
                "buy",
                ("alice", "c"),
                ("carol", "k1"),
                ("2", "6"),
                ("200", "0"),
            ),
            done(18, "alice", "c", "filled", "2"),
            ftrade(
                18,
                "cu",
                "111",
                "1",
                "buy",
                ("alice", "t1"),
                ("carol", "k1"),
                ("1", "3"),
                ("90", "0"),
            ),
            done(18, "alice", "t1", "filled", "1"),
            done(18, "carol", "k1", "filled", "3"),
        ],
    );
    let expected = json!({
        "balances": {
            "alice": { "CNY": { "available": "10278", "held": "0" } },
            "bob": { "CNY": { "available": "9697", "held": "300" } },
            "carol": { "CNY": { "available": "9691", "held": "300" } },
        },
        "fees": { "CNY": "24" },
        "books": {},
        "positions": {
            "bob": { "cu": { "short": { "history": [["100", "2"]], "today": [["102", "1"]] } } },
            "carol": { "cu": { "long": { "history": [], "today": [["110", "2"], ["111", "1"]] } } },
        },
    });
    assert_eq!(state, normalize_state(&expected));
}

#[test]
fn model_futures_close_orders_reserve_position_and_amends_are_checked() {
    let (events, state) = futures_scenario(&[
        fund("alice", "10000"),
        fund("bob", "10000"),
        put("bob", "b1", "rb", "sell", "100", "3", ""),
        put("alice", "a1", "rb", "buy", "100", "3", ""),
        put("alice", "c1", "rb", "sell", "120", "2", r#","offset":"close""#),
        put("alice", "c2", "rb", "sell", "121", "2", r#","offset":"close""#),
        put("alice", "c2", "rb", "sell", "121", "1", r#","offset":"close""#),
        r#"{"cmd":"amend","account":"alice","id":"c2","qty":"2"}"#.to_string(),
        r#"{"cmd":"amend","account":"alice","id":"c1","qty":"1"}"#.to_string(),
        r#"{"cmd":"amend","account":"alice","id":"c2","qty":"2"}"#.to_string(),
        put("alice", "c3", "rb", "sell", "122", "1", r#","offset":"close""#),
        r#"{"cmd":"cancel","account":"alice","id":"c1"}"#.to_string(),
        put("alice", "c3", "rb", "sell", "122", "1", r#","offset":"close","tif":"gfd""#),
        r#"{"cmd":"amend","account":"alice","id":"c3","qty":"2","price":"119"}"#.to_string(),
    ]);
    // Long 3: c1 reserves 2, so 1 is closable.
    assert_events(&events[8], &[order_rejected(9, "alice", "c2", "insufficient_position")]);
    assert_events(&events[9], &[accepted(10, "alice", "c2")]);
    // Raising c2 by 1 needs 1 closable: none is left.
    assert_events(&events[10], &[order_rejected(11, "alice", "c2", "insufficient_position")]);
    assert_events(
        &events[11],
        &[accepted(12, "alice", "c1"), amended(12, "alice", "c1", "120", "1")],
    );
    assert_events(
        &events[12],
        &[accepted(13, "alice", "c2"), amended(13, "alice", "c2", "121", "2")],
    );
    assert_events(&events[13], &[order_rejected(14, "alice", "c3", "insufficient_position")]);
    assert_events(
        &events[14],
        &[accepted(15, "alice", "c1"), done(15, "alice", "c1", "canceled", "0")],
    );
    assert_events(&events[15], &[accepted(16, "alice", "c3")]);
    assert_events(&events[16], &[order_rejected(17, "alice", "c3", "insufficient_position")]);
    // Close orders hold nothing: alice's held is her margin only.
    assert_eq!(state["balances"]["alice"]["CNY"], json!({ "available": "9691", "held": "300" }));
    assert_eq!(
        state["books"]["rb"]["asks"],
        json!([
            { "account": "alice", "id": "c2", "price": "121", "qty": "2" },
            { "account": "alice", "id": "c3", "price": "122", "qty": "1" },
        ])
    );
}

/// Zed (first in byte order) sells to alice four times: at 100, 100, 101 and 100.
fn cu_day() -> Vec<String> {
    let mut lines = vec![fund("alice", "10000"), fund("Zed", "10000"), fund("carol", "10000")];
    for (index, price) in ["100", "100", "101", "100"].iter().enumerate() {
        let n = index + 1;
        lines.push(put("Zed", &format!("z{n}"), "cu", "sell", price, "1", ""));
        lines.push(put("alice", &format!("a{n}"), "cu", "buy", price, "1", r#","tif":"gfd""#));
    }
    lines
}

#[test]
fn model_futures_opening_fills_merge_into_the_newest_entry_at_the_same_price() {
    let (_, state) = futures_scenario(&cu_day());
    let today = json!([["100", "2"], ["101", "1"], ["100", "1"]]);
    let expected = normalize_state(&json!({ "positions": {
        "alice": { "cu": { "long": { "history": [], "today": today } } },
        "Zed": { "cu": { "short": { "history": [], "today": today } } },
    } }));
    assert_eq!(state["positions"], expected["positions"]);
}

#[test]
fn model_futures_settle_expires_day_orders_then_marks_and_merges_positions() {
    let mut lines = cu_day();
    lines.extend([
        put("carol", "g1", "cu", "buy", "90", "1", r#","tif":"gfd""#),
        put("Zed", "t1", "cu", "buy", "95", "1", r#","offset":"close_today""#),
        put("carol", "k1", "cu", "buy", "91", "1", ""),
        put("alice", "t2", "cu", "sell", "120", "1", r#","offset":"close_today","tif":"gfd""#),
        put("alice", "h1", "cu", "sell", "121", "1", r#","offset":"close""#),
        settle_line("cu", "104", ""),
        put("alice", "h1", "cu", "sell", "121", "1", r#","offset":"close""#),
        settle_line("cu", "104.0", r#","final":false"#),
    ]);
    let (events, state) = futures_scenario(&lines);
    // Nothing in history yet.
    assert_events(&events[18], &[order_rejected(19, "alice", "h1", "insufficient_position")]);
    // gfd and close_today orders expire in acceptance order; then "Zed" < "alice" in
    // bytes: short 4 from 100, 100, 101, 100 loses 4 * 2 + 3 + 4 = 15 ticks of 10.
    assert_events(
        &events[19],
        &[
            json!({ "ev": "accepted", "seq": 20 }),
            done(20, "carol", "g1", "expired", "0"),
            done(20, "Zed", "t1", "expired", "0"),
            done(20, "alice", "t2", "expired", "0"),
            settled(20, "Zed", "cu", "short", "4", "104", "-150"),
            settled(20, "alice", "cu", "long", "4", "104", "150"),
        ],
    );
    assert_events(&events[20], &[accepted(21, "alice", "h1")]);
    // A gtc close keeps its reservation through a settle; marks at an unchanged price.
    assert_events(
        &events[21],
        &[
            json!({ "ev": "accepted", "seq": 22 }),
            settled(22, "Zed", "cu", "short", "4", "104", "0"),
            settled(22, "alice", "cu", "long", "4", "104", "0"),
        ],
    );
    let expected = json!({
        "balances": {
            "alice": { "CNY": { "available": "9738", "held": "400" } },
            "Zed": { "CNY": { "available": "9446", "held": "400" } },
            "carol": { "CNY": { "available": "9897", "held": "103" } },
        },
        "fees": { "CNY": "16" },
        "books": { "cu": {
            "bids": [ { "account": "carol", "id": "k1", "price": "91", "qty": "1" } ],
            "asks": [ { "account": "alice", "id": "h1", "price": "121", "qty": "1" } ],
        } },
        "positions": {
            "alice": { "cu": { "long": { "history": [["104", "4"]], "today": [] } } },
            "Zed": { "cu": { "short": { "history": [["104", "4"]], "today": [] } } },
        },
    });
    assert_eq!(state, normalize_state(&expected));
}

#[test]
fn model_futures_margin_raise_leaves_available_negative() {
    let lines = vec![
        fund("alice", "309"),
        fund("bob", "10000"),
        put("bob", "b1", "rb", "sell", "100", "2", ""),
        put("alice", "a1", "rb", "buy", "100", "2", ""),
        put("alice", "g", "rb", "buy", "90", "1", r#","tif":"gfd""#),
        r#"{"cmd":"margin","symbol":"rb","margin":"150"}"#.to_string(),
        put("alice", "n", "rb", "buy", "90", "1", ""),
        r#"{"cmd":"withdraw","account":"alice","asset":"CNY","amount":"1"}"#.to_string(),
        r#"{"cmd":"amend","account":"alice","id":"g","price":"89"}"#.to_string(),
        r#"{"cmd":"amend","account":"alice","id":"g","qty":"2"}"#.to_string(),
        put("alice", "c", "rb", "sell", "120", "1", r#","offset":"close""#),
        r#"{"cmd":"amend","account":"alice","id":"c","qty":"2"}"#.to_string(),
        r#"{"cmd":"cancel","account":"alice","id":"g"}"#.to_string(),
        r#"{"cmd":"margin","symbol":"rb","margin":"0"}"#.to_string(),
        r#"{"cmd":"margin","symbol":"rb","margin":"1.001"}"#.to_string(),
        r#"{"cmd":"margin","symbol":"NOPE","margin":"1"}"#.to_string(),
        r#"{"cmd":"margin","symbol":"rb","margin":1}"#.to_string(),
    ];
    let (_, after_margin) = futures_scenario(&lines[..6]);
    // Alice's 2 lots now hold 2 * 150 and her order 1 * (150 + 3): 309 - 6 - 453.
    assert_eq!(
        after_margin["balances"],
        normalize_state(&json!({ "balances": {
            "alice": { "CNY": { "available": "-150", "held": "453" } },
            "bob": { "CNY": { "available": "9698", "held": "300" } },
        } }))["balances"]
    );
    let (events, state) = futures_scenario(&lines);
    assert_events(&events[8], &[json!({ "ev": "accepted", "seq": 9 })]);
    assert_events(&events[9], &[order_rejected(10, "alice", "n", "insufficient_funds")]);
    assert_events(&events[10], &[rejected(11, "insufficient_funds")]);
    // An amend that raises no hold works; one that does is refused.
    assert_events(&events[11], &[accepted(12, "alice", "g"), amended(12, "alice", "g", "89", "1")]);
    assert_events(&events[12], &[order_rejected(13, "alice", "g", "insufficient_funds")]);
    // Close orders need no funds.
    assert_events(&events[13], &[accepted(14, "alice", "c")]);
    assert_events(
        &events[14],
        &[accepted(15, "alice", "c"), amended(15, "alice", "c", "120", "2")],
    );
    assert_events(
        &events[15],
        &[accepted(16, "alice", "g"), done(16, "alice", "g", "canceled", "0")],
    );
    assert_events(&events[16], &[rejected(17, "invalid_amount")]);
    assert_events(&events[17], &[rejected(18, "invalid_amount")]);
    assert_events(&events[18], &[rejected(19, "unknown_symbol")]);
    assert_events(&events[19], &[rejected(20, "malformed")]);
    assert_eq!(state["balances"]["alice"]["CNY"], json!({ "available": "3", "held": "300" }));
}

#[test]
fn model_futures_final_settle_closes_everything_and_retires_the_symbol() {
    let (events, state) = futures_scenario(&[
        fund("alice", "1000"),
        fund("bob", "1000"),
        fund("carol", "1000"),
        put("bob", "b1", "rb", "sell", "100", "1", ""),
        put("alice", "a1", "rb", "buy", "100", "1", ""),
        put("carol", "k1", "rb", "buy", "90", "1", ""),
        put("alice", "c1", "rb", "sell", "130", "1", r#","offset":"close""#),
        settle_line("rb", "110", r#","final":true"#),
        put("alice", "a2", "rb", "buy", "100", "1", ""),
        r#"{"cmd":"margin","symbol":"rb","margin":"50"}"#.to_string(),
        settle_line("rb", "100", ""),
        r#"{"cmd":"liquidate","account":"alice","symbol":"rb"}"#.to_string(),
        FUTURES[1].to_string(),
        r#"{"cmd":"instrument","symbol":"rb","base":"CNY","quote":"USD","tick":"1","lot":"1","min_qty":"1","max_qty":"10","maker_fee_bps":0,"taker_fee_bps":0,"market_band_bps":0}"#.to_string(),
        r#"{"cmd":"cancel","account":"carol","id":"k1"}"#.to_string(),
        put("alice", "a3", "cu", "buy", "100", "1", ""),
    ]);
    // Every order expires, in acceptance order; positions are marked to 110; then they
    // close at 110 with no fee and no event, their margin back to available.
    assert_events(
        &events[10],
        &[
            json!({ "ev": "accepted", "seq": 11 }),
            done(11, "carol", "k1", "expired", "0"),
            done(11, "alice", "c1", "expired", "0"),
            settled(11, "alice", "rb", "long", "1", "110", "100"),
            settled(11, "bob", "rb", "short", "1", "110", "-100"),
        ],
    );
    assert_events(&events[11], &[order_rejected(12, "alice", "a2", "unknown_symbol")]);
    assert_events(&events[12], &[rejected(13, "unknown_symbol")]);
    assert_events(&events[13], &[rejected(14, "unknown_symbol")]);
    assert_events(&events[14], &[rejected(15, "unknown_symbol")]);
    assert_events(&events[15], &[rejected(16, "duplicate_symbol")]);
    assert_events(&events[16], &[rejected(17, "duplicate_symbol")]);
    assert_events(&events[17], &[order_rejected(18, "carol", "k1", "unknown_order")]);
    // Other contracts go on.
    assert_events(&events[18], &[accepted(19, "alice", "a3")]);
    let expected = json!({
        "balances": {
            "alice": { "CNY": { "available": "994", "held": "103" } },
            "bob": { "CNY": { "available": "899", "held": "0" } },
            "carol": { "CNY": { "available": "1000", "held": "0" } },
        },
        "fees": { "CNY": "4" },
        "books": { "cu": { "bids": [ { "account": "alice", "id": "a3", "price": "100", "qty": "1" } ], "asks": [] } },
        "positions": {},
    });
    assert_eq!(state, normalize_state(&expected));
}

#[test]
fn model_futures_liquidation_cancels_then_closes_long_then_short() {
    let (events, state) = futures_scenario(&[
        fund("alice", "1000"),
        fund("bob", "1000"),
        fund("carol", "1000"),
        fund("dave", "1000"),
        put("bob", "b1", "rb", "sell", "100", "2", ""),
        put("alice", "a1", "rb", "buy", "100", "2", ""),
        put("carol", "c1", "rb", "buy", "100", "1", ""),
        put("alice", "a2", "rb", "sell", "100", "1", ""),
        put("alice", "a3", "rb", "buy", "80", "1", ""),
        put("alice", "a4", "rb", "sell", "150", "1", r#","offset":"close""#),
        put("dave", "d1", "rb", "buy", "95", "1", ""),
        r#"{"cmd":"liquidate","account":"alice","symbol":"rb"}"#.to_string(),
        r#"{"cmd":"liquidate","account":"carol","symbol":"rb"}"#.to_string(),
        r#"{"cmd":"liquidate","account":"erin","symbol":"rb"}"#.to_string(),
        r#"{"cmd":"liquidate","account":"bob","symbol":"cu"}"#.to_string(),
        r#"{"cmd":"liquidate","account":"bob","symbol":"NOPE"}"#.to_string(),
        r#"{"cmd":"liquidate","account":"bob"}"#.to_string(),
    ]);
    // Long 2 and short 1. The long's market sell reaches down to 95 * 0.95 = 90.25, to
    // the tick 90: it sells 1 to dave at 95 (1 * -5 * 10) and expires; the short's buy
    // finds no asks and expires at once.
    assert_events(
        &events[14],
        &[
            json!({ "ev": "accepted", "seq": 15, "account": "alice" }),
            done(15, "alice", "a3", "canceled", "0"),
            done(15, "alice", "a4", "canceled", "0"),
            ftrade(
                15,
                "rb",
                "95",
                "1",
                "sell",
                ("dave", "d1"),
                ("alice", "liq-15-long"),
                ("1", "3"),
                ("0", "-50"),
            ),
            done(15, "dave", "d1", "filled", "1"),
            done(15, "alice", "liq-15-long", "expired", "1"),
            done(15, "alice", "liq-15-short", "expired", "0"),
        ],
    );
    assert_events(
        &events[15],
        &[
            json!({ "ev": "accepted", "seq": 16, "account": "carol" }),
            done(16, "carol", "liq-16-long", "expired", "0"),
        ],
    );
    assert_events(&events[16], &[rejected(17, "unknown_order")]);
    assert_events(&events[17], &[rejected(18, "unknown_order")]);
    assert_events(&events[18], &[rejected(19, "unknown_symbol")]);
    assert_events(&events[19], &[rejected(20, "malformed")]);
    let expected = json!({
        "balances": {
            "alice": { "CNY": { "available": "738", "held": "200" } },
            "bob": { "CNY": { "available": "798", "held": "200" } },
            "carol": { "CNY": { "available": "899", "held": "100" } },
            "dave": { "CNY": { "available": "899", "held": "100" } },
        },
        "fees": { "CNY": "16" },
        "books": {},
        "positions": {
            "alice": { "rb": {
                "long": { "history": [], "today": [["100", "1"]] },
                "short": { "history": [], "today": [["100", "1"]] },
            } },
            "bob": { "rb": { "short": { "history": [], "today": [["100", "2"]] } } },
            "carol": { "rb": { "long": { "history": [], "today": [["100", "1"]] } } },
            "dave": { "rb": { "long": { "history": [], "today": [["95", "1"]] } } },
        },
    });
    assert_eq!(state, normalize_state(&expected));
}

/// `value * 10^scale` of a decimal string, exactly.
fn scaled(text: &str, scale: u32) -> i128 {
    let (integer, fraction) = text.split_once('.').unwrap_or((text, ""));
    assert!(fraction.len() as u32 <= scale, "{text} has more than {scale} places");
    let digits = format!("{integer}{fraction:0<width$}", width = scale as usize);
    digits.parse().expect("a decimal")
}

/// From a state document alone: accounts' `available + held`, plus fees, plus the
/// short sides' value minus the long sides' value, in units of 10^-4 CNY.
fn money_in_state(state: &Value, multipliers: &[(&str, &str)]) -> i128 {
    let mut total = 0;
    for assets in state["balances"].as_object().into_iter().flatten().map(|(_, assets)| assets) {
        let balance = &assets["CNY"];
        for part in ["available", "held"] {
            total += balance[part].as_str().map_or(0, |text| scaled(text, 4));
        }
    }
    total += state["fees"]["CNY"].as_str().map_or(0, |text| scaled(text, 4));
    for symbols in state["positions"].as_object().into_iter().flatten().map(|(_, s)| s) {
        for (symbol, sides) in symbols.as_object().into_iter().flatten() {
            let multiplier = multipliers.iter().find(|(name, _)| name == symbol).expect("known").1;
            for (side, holding) in sides.as_object().into_iter().flatten() {
                let sign = if side == "short" { 1 } else { -1 };
                for part in ["history", "today"] {
                    for entry in holding[part].as_array().into_iter().flatten() {
                        let price = scaled(entry[0].as_str().expect("price"), 2);
                        let qty = scaled(entry[1].as_str().expect("qty"), 2);
                        // 10^-2 * 10^-2 * 10^-2 units, to 10^-4.
                        let value = price * qty * scaled(multiplier, 2);
                        assert_eq!(value % 100, 0);
                        total += sign * value / 100;
                    }
                }
            }
        }
    }
    total
}

#[test]
fn model_futures_conserve_money_with_the_positions_value() {
    let contract = r#"{"cmd":"future","symbol":"ag","settle":"CNY","tick":"0.5","lot":"0.1","min_qty":"0.1","max_qty":"10","multiplier":"15","margin":"12.34","maker_fee":"0.25","taker_fee":"0.5","market_band_bps":100}"#;
    let lines: Vec<String> = vec![
        r#"{"cmd":"asset","asset":"CNY","decimals":2}"#.to_string(),
        contract.to_string(),
        fund("alice", "100"),
        fund("bob", "100"),
        fund("carol", "100"),
        put("bob", "b1", "ag", "sell", "50.5", "0.3", ""),
        put("alice", "a1", "ag", "buy", "51", "0.2", r#","tif":"gfd""#),
        put("carol", "c1", "ag", "buy", "50.5", "0.2", ""),
        settle_line("ag", "49", ""),
        r#"{"cmd":"margin","symbol":"ag","margin":"30"}"#.to_string(),
        put("alice", "a2", "ag", "sell", "48", "0.1", r#","offset":"close""#),
        put("carol", "c2", "ag", "sell", "47.5", "0.1", r#","offset":"close""#),
        r#"{"cmd":"order","account":"bob","id":"m","symbol":"ag","side":"buy","type":"market","qty":"0.2","offset":"close","tif":"gfd"}"#.to_string(),
        r#"{"cmd":"withdraw","account":"carol","asset":"CNY","amount":"10"}"#.to_string(),
        settle_line("ag", "52.5", ""),
        r#"{"cmd":"liquidate","account":"alice","symbol":"ag"}"#.to_string(),
    ];
    let mut model = Model::new();
    let mut net = 0;
    for line in &lines {
        let events = model.feed_line(line);
        let command: Value = serde_json::from_str(line).expect("JSON");
        if events[0]["ev"] == "accepted"
            && (command["cmd"] == "deposit" || command["cmd"] == "withdraw")
        {
            let amount = scaled(command["amount"].as_str().expect("amount"), 4);
            net += if command["cmd"] == "deposit" { amount } else { -amount };
        }
        let state = normalize_state(&model.state());
        assert_eq!(money_in_state(&state, &[("ag", "15")]), net, "after {line}");
    }
    // Bob sells 0.3 at 50.5: 0.2 to alice, 0.1 to carol, whose bid for 0.1 more rests.
    // Alice's close at 48 meets that bid at 50.5 (carol opens 0.1 more); bob's market
    // close takes carol's 0.1 at 47.5 and expires; everything is marked to 52.5; alice's
    // liquidation finds no bid and leaves her long.
    let state = normalize_state(&model.state());
    assert_eq!(
        state["positions"],
        normalize_state(&json!({ "positions": {
            "alice": { "ag": { "long": { "history": [["52.5", "0.1"]], "today": [] } } },
            "bob": { "ag": { "short": { "history": [["52.5", "0.2"]], "today": [] } } },
            "carol": { "ag": { "long": { "history": [["52.5", "0.1"]], "today": [] } } },
        } }))["positions"]
    );
    assert_eq!(money_in_state(&state, &[("ag", "15")]), scaled("290", 4));
}

#[test]
fn model_futures_offsets_and_gfd_on_spot_and_market_orders() {
    let (events, state) = futures_scenario(&[
        r#"{"cmd":"asset","asset":"BTC","decimals":8}"#.to_string(),
        r#"{"cmd":"instrument","symbol":"BTC-CNY","base":"BTC","quote":"CNY","tick":"1","lot":"0.01","min_qty":"0.01","max_qty":"10","maker_fee_bps":0,"taker_fee_bps":0,"market_band_bps":100}"#.to_string(),
        fund("alice", "1000"),
        // A valid offset on a spot order is ignored, gfd is gtc; a bad offset is malformed.
        put("alice", "s1", "BTC-CNY", "buy", "100", "1", r#","offset":"close","tif":"gfd""#),
        put("alice", "s2", "BTC-CNY", "buy", "100", "1", r#","offset":"shut""#),
        put("alice", "s3", "rb", "buy", "100", "1", r#","tif":"day""#),
        settle_line("BTC-CNY", "100", ""),
        r#"{"cmd":"margin","symbol":"BTC-CNY","margin":"1"}"#.to_string(),
        r#"{"cmd":"liquidate","account":"alice","symbol":"BTC-CNY"}"#.to_string(),
        // Futures: a gfd market order is an ioc; post-only ioc checks funds first.
        fund("bob", "1000"),
        put("bob", "b1", "rb", "sell", "100", "1", ""),
        r#"{"cmd":"order","account":"alice","id":"m1","symbol":"rb","side":"buy","type":"market","qty":"3","tif":"gfd"}"#.to_string(),
        put("carol", "p1", "rb", "buy", "90", "1", r#","post_only":true,"tif":"ioc""#),
        put("bob", "p2", "rb", "buy", "90", "1", r#","post_only":true,"tif":"ioc","offset":"open""#),
        put("bob", "p3", "rb", "buy", "90", "2", r#","post_only":true,"tif":"ioc","offset":"close""#),
    ]);
    assert_events(&events[6], &[accepted(7, "alice", "s1")]);
    assert_events(&events[7], &[rejected(8, "malformed")]);
    assert_events(&events[8], &[rejected(9, "malformed")]);
    assert_events(&events[9], &[rejected(10, "unknown_symbol")]);
    assert_events(&events[10], &[rejected(11, "unknown_symbol")]);
    assert_events(&events[11], &[rejected(12, "unknown_symbol")]);
    assert_events(
        &events[14],
        &[
            accepted(15, "alice", "m1"),
            ftrade(
                15,
                "rb",
                "100",
                "1",
                "buy",
                ("bob", "b1"),
                ("alice", "m1"),
                ("1", "3"),
                ("0", "0"),
            ),
            done(15, "bob", "b1", "filled", "1"),
            done(15, "alice", "m1", "expired", "1"),
        ],
    );
    assert_events(&events[15], &[order_rejected(16, "carol", "p1", "insufficient_funds")]);
    assert_events(&events[16], &[accepted(17, "bob", "p2"), done(17, "bob", "p2", "expired", "0")]);
    assert_events(&events[17], &[order_rejected(18, "bob", "p3", "insufficient_position")]);
    assert_eq!(
        state["books"]["BTC-CNY"]["bids"],
        json!([{ "account": "alice", "id": "s1", "price": "100", "qty": "1" }])
    );
    // Alice: 1000 - 100 (spot bid) - 3 (taker fee); 100 of margin held for rb.
    assert_eq!(state["balances"]["alice"]["CNY"], json!({ "available": "797", "held": "200" }));
}

#[test]
fn model_futures_definitions_are_checked_in_order() {
    let future = |changes: &[(&str, Value)]| {
        let mut definition: Value = serde_json::from_str(FUTURES[1]).expect("JSON");
        definition["symbol"] = json!("new");
        for (key, value) in changes {
            definition[*key] = value.clone();
        }
        definition.to_string()
    };
    let (events, _) = futures_scenario(&[
        FUTURES[2].to_string(),
        future(&[("symbol", json!("cu")), ("settle", json!("USD"))]),
        future(&[("settle", json!("USD")), ("margin", json!("0"))]),
        future(&[("margin", json!("0"))]),
        future(&[("maker_fee", json!("3.01"))]),
        future(&[("taker_fee", json!("-1"))]),
        future(&[("multiplier", json!("0.1")), ("tick", json!("0.1")), ("lot", json!("0.1"))]),
        future(&[("margin", json!("0.001"))]),
        future(&[("multiplier", json!("0"))]),
        future(&[("min_qty", json!("1.5"))]),
        future(&[("market_band_bps", json!(10_001))]),
        future(&[("close_today", json!(1))]),
        future(&[("multiplier", json!(10))]),
        future(&[("multiplier", json!("0.1")), ("tick", json!("0.1"))]),
        future(&[("symbol", json!("new"))]),
    ]);
    let reasons: Vec<Value> =
        events[3..].iter().map(|events| events[0]["reason"].clone()).collect();
    assert_eq!(
        reasons,
        [
            "duplicate_symbol",
            "duplicate_symbol",
            "unknown_asset",
            "invalid_instrument",
            "invalid_instrument",
            "invalid_instrument",
            "invalid_instrument",
            "invalid_instrument",
            "invalid_instrument",
            "invalid_instrument",
            "invalid_instrument",
            "malformed",
            "malformed",
        ]
        .iter()
        .map(|reason| json!(reason))
        .chain([Value::Null, json!("duplicate_symbol")])
        .collect::<Vec<_>>()
    );
}
