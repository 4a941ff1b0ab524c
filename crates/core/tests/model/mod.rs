//! A deliberately naive reference model of the replay format
//! (`/work/shared/spec/replay-format.md`), written from the spec alone.
//!
//! It exists to be compared with the real engine event for event, so it prefers being
//! obviously right to being fast: lines are read through `serde_json::Value`, every
//! number is an `i128` with an explicit decimal scale, each book side is a plain `Vec`
//! kept sorted by (price, arrival) and every lookup is a linear scan. It shares no code
//! with the engine and must never read `crates/core/src/`.
//!
//! Units used throughout:
//! - an asset amount is counted in that asset's smallest unit (`10^-decimals`);
//! - a quantity is counted in the base asset's smallest unit;
//! - a price is counted in units of `10^-decimals(tick)`, so a tick is a whole number.
//!
//! Event order (the engine uses the same): `accepted`/`rejected`; for an amend then
//! `amended`; then per match step the `trade` followed at once by the maker's `done` if
//! it filled, or the `done` `stp` of a maker cancelled by self-trade prevention; the
//! taker's `done` comes last.

use std::collections::BTreeMap;

use serde_json::{json, Map, Value};

/// Every amount, price and hold the spec allows fits in a signed 64-bit integer.
const UNITS_MAX: i128 = i64::MAX as i128;
const BPS_PER_ONE: i128 = 10_000;
const FEE_BPS_MAX: i128 = 1_000;
const ASSET_DECIMALS_MAX: i128 = 18;

// ----------------------------------------------------------------------------------
// Decimal strings.

/// A well-formed decimal string, `-?[0-9]+(\.[0-9]+)?`, kept as digits so that a value
/// of any length can still be judged (a 45-digit quantity is just "above max_qty").
#[derive(Clone, Debug)]
struct Decimal {
    negative: bool,
    /// Integer digits without leading zeros.
    integer_digits: String,
    /// Fraction digits without trailing zeros: "1.50" has one decimal place.
    fraction_digits: String,
}

/// A decimal value expressed in units of `10^-scale`.
enum Units {
    Exact(i128),
    /// More decimal places than the scale allows.
    TooPrecise,
    /// Larger in magnitude than any `i128`, hence beyond every range in the spec.
    TooLarge,
}

impl Decimal {
    fn parse(text: &str) -> Option<Decimal> {
        let unsigned = text.strip_prefix('-').unwrap_or(text);
        let (integer, fraction) = match unsigned.split_once('.') {
            Some((integer, fraction)) => (integer, Some(fraction)),
            None => (unsigned, None),
        };
        let all_digits = |part: &str| !part.is_empty() && part.bytes().all(|b| b.is_ascii_digit());
        if !all_digits(integer) || !fraction.into_iter().all(all_digits) {
            return None;
        }
        Some(Decimal {
            negative: unsigned.len() != text.len(),
            integer_digits: integer.trim_start_matches('0').to_string(),
            fraction_digits: fraction.unwrap_or("").trim_end_matches('0').to_string(),
        })
    }

    fn is_zero(&self) -> bool {
        self.integer_digits.is_empty() && self.fraction_digits.is_empty()
    }

    fn is_positive(&self) -> bool {
        !self.negative && !self.is_zero()
    }

    fn places(&self) -> u32 {
        self.fraction_digits.len() as u32
    }

    fn units(&self, scale: u32) -> Units {
        if self.places() > scale {
            return Units::TooPrecise;
        }
        let mut digits = format!("{}{}", self.integer_digits, self.fraction_digits);
        for _ in self.places()..scale {
            digits.push('0');
        }
        let digits = digits.trim_start_matches('0');
        if digits.is_empty() {
            return Units::Exact(0);
        }
        // 38 decimal digits always fit in an i128 (whose maximum has 39).
        if digits.len() > 38 {
            return Units::TooLarge;
        }
        let magnitude: i128 = digits.parse().expect("at most 38 digits fit in i128");
        Units::Exact(if self.negative { -magnitude } else { magnitude })
    }
}

/// Prints `value * 10^-scale` exactly, e.g. `format_units(1050, 2) == "10.50"`.
fn format_units(value: i128, scale: u32) -> String {
    let scale = scale as usize;
    let digits = format!("{:0>width$}", value.unsigned_abs(), width = scale + 1);
    let (integer, fraction) = digits.split_at(digits.len() - scale);
    let sign = if value < 0 { "-" } else { "" };
    if scale == 0 {
        format!("{sign}{integer}")
    } else {
        format!("{sign}{integer}.{fraction}")
    }
}

fn pow10(exponent: u32) -> i128 {
    10i128.checked_pow(exponent).expect("scales in this model stay below 10^38")
}

/// The units of a value that must be exact and within the 64-bit range.
fn in_range(units: Units) -> Option<i128> {
    match units {
        Units::Exact(value) if value <= UNITS_MAX => Some(value),
        _ => None,
    }
}

// ----------------------------------------------------------------------------------
// Commands as parsed from a line.

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Side {
    Buy,
    Sell,
}

impl Side {
    fn opposite(self) -> Side {
        match self {
            Side::Buy => Side::Sell,
            Side::Sell => Side::Buy,
        }
    }

    fn name(self) -> &'static str {
        match self {
            Side::Buy => "buy",
            Side::Sell => "sell",
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum TimeInForce {
    Gtc,
    Ioc,
    Fok,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum SelfTrade {
    CancelTaker,
    CancelMaker,
    CancelBoth,
    /// `"none"`: the account trades with itself and pays both fees.
    Allow,
}

struct InstrumentCommand {
    symbol: String,
    base: String,
    quote: String,
    tick: Decimal,
    lot: Decimal,
    min_qty: Decimal,
    max_qty: Decimal,
    maker_fee_bps: i128,
    taker_fee_bps: i128,
    market_band_bps: i128,
}

struct OrderCommand {
    account: String,
    id: String,
    symbol: String,
    side: Side,
    /// `None` for a market order (its `price` field is ignored).
    price: Option<Decimal>,
    qty: Decimal,
    tif: TimeInForce,
    post_only: bool,
    stp: SelfTrade,
}

enum Command {
    Asset { asset: String, decimals: i128 },
    Instrument(InstrumentCommand),
    Deposit { account: String, asset: String, amount: Decimal },
    Withdraw { account: String, asset: String, amount: Decimal },
    Order(OrderCommand),
    Cancel { account: String, id: String },
    Amend { account: String, id: String, price: Option<Decimal>, qty: Option<Decimal> },
}

impl Command {
    /// `(account, id)` for the commands whose `accepted`/`rejected` events carry them.
    fn order_key(&self) -> Option<(String, String)> {
        match self {
            Command::Order(order) => Some((order.account.clone(), order.id.clone())),
            Command::Cancel { account, id } | Command::Amend { account, id, .. } => {
                Some((account.clone(), id.clone()))
            }
            _ => None,
        }
    }
}

/// The line is not a well-formed command.
struct Malformed;

/// Typed access to a command's fields; any missing, `null` or mistyped field is
/// `Malformed`.
struct Fields<'a>(&'a Map<String, Value>);

impl Fields<'_> {
    fn has(&self, key: &str) -> bool {
        self.0.contains_key(key)
    }

    /// A non-empty string: account, id, symbol, asset name.
    fn name(&self, key: &str) -> Result<String, Malformed> {
        match self.0.get(key) {
            Some(Value::String(text)) if !text.is_empty() => Ok(text.clone()),
            _ => Err(Malformed),
        }
    }

    fn decimal(&self, key: &str) -> Result<Decimal, Malformed> {
        match self.0.get(key) {
            Some(Value::String(text)) => Decimal::parse(text).ok_or(Malformed),
            _ => Err(Malformed),
        }
    }

    fn optional_decimal(&self, key: &str) -> Result<Option<Decimal>, Malformed> {
        if self.has(key) {
            self.decimal(key).map(Some)
        } else {
            Ok(None)
        }
    }

    /// A JSON integer (not a float, not a string).
    fn integer(&self, key: &str) -> Result<i128, Malformed> {
        match self.0.get(key) {
            Some(Value::Number(number)) => number
                .as_i64()
                .map(i128::from)
                .or_else(|| number.as_u64().map(i128::from))
                .ok_or(Malformed),
            _ => Err(Malformed),
        }
    }

    /// The index of the field's value in `choices` (values are lower case).
    fn choice(&self, key: &str, choices: &[&str]) -> Result<usize, Malformed> {
        match self.0.get(key) {
            Some(Value::String(text)) => choices.iter().position(|c| c == text).ok_or(Malformed),
            _ => Err(Malformed),
        }
    }

    fn optional_choice(&self, key: &str, choices: &[&str]) -> Result<Option<usize>, Malformed> {
        if self.has(key) {
            self.choice(key, choices).map(Some)
        } else {
            Ok(None)
        }
    }

    fn optional_bool(&self, key: &str) -> Result<Option<bool>, Malformed> {
        match self.0.get(key) {
            None => Ok(None),
            Some(Value::Bool(flag)) => Ok(Some(*flag)),
            Some(_) => Err(Malformed),
        }
    }
}

fn parse_command(line: &str) -> Result<Command, Malformed> {
    let value: Value = serde_json::from_str(line).map_err(|_| Malformed)?;
    let fields = Fields(value.as_object().ok_or(Malformed)?);
    if fields.has("ts") {
        fields.integer("ts")?;
    }
    let command = match fields.name("cmd")?.as_str() {
        "asset" => {
            Command::Asset { asset: fields.name("asset")?, decimals: fields.integer("decimals")? }
        }
        "instrument" => Command::Instrument(InstrumentCommand {
            symbol: fields.name("symbol")?,
            base: fields.name("base")?,
            quote: fields.name("quote")?,
            tick: fields.decimal("tick")?,
            lot: fields.decimal("lot")?,
            min_qty: fields.decimal("min_qty")?,
            max_qty: fields.decimal("max_qty")?,
            maker_fee_bps: fields.integer("maker_fee_bps")?,
            taker_fee_bps: fields.integer("taker_fee_bps")?,
            market_band_bps: fields.integer("market_band_bps")?,
        }),
        "deposit" => Command::Deposit {
            account: fields.name("account")?,
            asset: fields.name("asset")?,
            amount: fields.decimal("amount")?,
        },
        "withdraw" => Command::Withdraw {
            account: fields.name("account")?,
            asset: fields.name("asset")?,
            amount: fields.decimal("amount")?,
        },
        "order" => Command::Order(parse_order(&fields)?),
        "cancel" => Command::Cancel { account: fields.name("account")?, id: fields.name("id")? },
        "amend" => {
            let price = fields.optional_decimal("price")?;
            let qty = fields.optional_decimal("qty")?;
            if price.is_none() && qty.is_none() {
                return Err(Malformed);
            }
            Command::Amend { account: fields.name("account")?, id: fields.name("id")?, price, qty }
        }
        _ => return Err(Malformed),
    };
    Ok(command)
}

fn parse_order(fields: &Fields) -> Result<OrderCommand, Malformed> {
    let side = [Side::Buy, Side::Sell][fields.choice("side", &["buy", "sell"])?];
    let market = fields.choice("type", &["limit", "market"])? == 1;
    let tif = fields
        .optional_choice("tif", &["gtc", "ioc", "fok"])?
        .map_or(TimeInForce::Gtc, |i| [TimeInForce::Gtc, TimeInForce::Ioc, TimeInForce::Fok][i]);
    let stp = fields
        .optional_choice("stp", &["cancel_taker", "cancel_maker", "cancel_both", "none"])?
        .map_or(SelfTrade::CancelTaker, |i| {
            [
                SelfTrade::CancelTaker,
                SelfTrade::CancelMaker,
                SelfTrade::CancelBoth,
                SelfTrade::Allow,
            ][i]
        });
    // `price` and `post_only` on a market order are ignored, not even type-checked.
    let (price, post_only) = if market {
        (None, false)
    } else {
        let post_only = fields.optional_bool("post_only")?.unwrap_or(false);
        (Some(fields.decimal("price")?), post_only)
    };
    Ok(OrderCommand {
        account: fields.name("account")?,
        id: fields.name("id")?,
        symbol: fields.name("symbol")?,
        side,
        price,
        qty: fields.decimal("qty")?,
        tif,
        post_only,
        stp,
    })
}

// ----------------------------------------------------------------------------------
// State.

#[derive(Clone, Debug)]
struct Instrument {
    symbol: String,
    base: String,
    quote: String,
    base_decimals: u32,
    quote_decimals: u32,
    /// Decimal places of the tick; prices are counted in units of `10^-price_scale`.
    price_scale: u32,
    tick: i128,
    lot: i128,
    min_qty: i128,
    max_qty: i128,
    maker_fee_bps: i128,
    taker_fee_bps: i128,
    market_band_bps: i128,
}

impl Instrument {
    /// `price * qty` in the quote's smallest units; `None` beyond `i128`.
    fn notional(&self, price: i128, qty: i128) -> Option<i128> {
        let product = price.checked_mul(qty)?;
        let product_scale = self.price_scale + self.base_decimals;
        if self.quote_decimals >= product_scale {
            product.checked_mul(pow10(self.quote_decimals - product_scale))
        } else {
            let divisor = pow10(product_scale - self.quote_decimals);
            assert_eq!(product % divisor, 0, "notional of a lot multiple is exact");
            Some(product / divisor)
        }
    }

    fn hold_asset(&self, side: Side) -> &str {
        match side {
            Side::Buy => &self.quote,
            Side::Sell => &self.base,
        }
    }

    /// What an order of `qty` at limit `price` holds; `None` when that is beyond the
    /// range, or when `qty` itself is (a quantity is an amount of the base asset, and
    /// no account can ever hold or receive more than `i64::MAX` units of it).
    fn hold_amount(&self, side: Side, price: i128, qty: i128) -> Option<i128> {
        if qty > UNITS_MAX {
            return None;
        }
        match side {
            Side::Buy => self.notional(price, qty),
            Side::Sell => Some(qty),
        }
    }

    /// A valid limit price: positive, a multiple of the tick and (a documented limit
    /// of the engine) at most `i64::MAX` in units of the tick's decimals.
    fn limit_price(&self, price: &Decimal) -> Option<i128> {
        let units = in_range(price.units(self.price_scale))?;
        (units > 0 && units % self.tick == 0).then_some(units)
    }

    /// A valid quantity: a multiple of the lot within `min_qty..=max_qty`. It may be
    /// beyond the 64-bit range if `max_qty` is; the funds check then refuses it.
    fn quantity(&self, qty: &Decimal) -> Option<i128> {
        // Beyond i128 is beyond max_qty, which fits in i128.
        let Units::Exact(units) = qty.units(self.base_decimals) else {
            return None;
        };
        (units % self.lot == 0 && self.min_qty <= units && units <= self.max_qty).then_some(units)
    }

    /// The limit a market order gets from the best opposite price `best`.
    fn protection_price(&self, side: Side, best: i128) -> i128 {
        let per_tick = BPS_PER_ONE * self.tick;
        match side {
            Side::Buy => {
                let scaled = best * (BPS_PER_ONE + self.market_band_bps);
                (scaled + per_tick - 1) / per_tick * self.tick
            }
            Side::Sell => {
                let scaled = best * (BPS_PER_ONE - self.market_band_bps);
                (scaled / per_tick).max(1) * self.tick
            }
        }
    }

    fn price_text(&self, price: i128) -> String {
        format_units(price, self.price_scale)
    }

    fn qty_text(&self, qty: i128) -> String {
        format_units(qty, self.base_decimals)
    }
}

#[derive(Clone, Debug)]
struct Order {
    account: String,
    id: String,
    symbol: String,
    side: Side,
    /// The limit; for a market order, its protection price.
    price: i128,
    remaining: i128,
    /// Cumulative over the order's whole life.
    filled: i128,
    post_only: bool,
    stp: SelfTrade,
    arrival: u64,
}

#[derive(Clone, Debug, Default)]
struct Book {
    bids: Vec<Order>,
    asks: Vec<Order>,
}

impl Book {
    fn side(&self, side: Side) -> &Vec<Order> {
        match side {
            Side::Buy => &self.bids,
            Side::Sell => &self.asks,
        }
    }

    fn side_mut(&mut self, side: Side) -> &mut Vec<Order> {
        match side {
            Side::Buy => &mut self.bids,
            Side::Sell => &mut self.asks,
        }
    }

    /// Priority order: best price first, then arrival.
    fn sort(&mut self) {
        self.bids.sort_by_key(|order| (-order.price, order.arrival));
        self.asks.sort_by_key(|order| (order.price, order.arrival));
    }
}

#[derive(Clone, Copy, Debug, Default)]
struct Balance {
    available: i128,
    held: i128,
}

/// How matching an incoming order ended.
enum MatchEnd {
    Filled,
    NothingCrosses,
    /// Self-trade prevention finished the taker (`cancel_taker`, `cancel_both`).
    SelfTradeStop,
}

fn crosses(taker_side: Side, limit: i128, maker_price: i128) -> bool {
    match taker_side {
        Side::Buy => maker_price <= limit,
        Side::Sell => maker_price >= limit,
    }
}

/// `ceil(received * bps / 10000)`, in the received asset's smallest units.
fn fee(received: i128, bps: i128) -> i128 {
    (received * bps + BPS_PER_ONE - 1) / BPS_PER_ONE
}

type Outcome = Result<(), &'static str>;

#[derive(Default)]
pub struct Model {
    /// Number of lines fed so far; the current line's `seq`.
    seq: u64,
    asset_decimals: BTreeMap<String, u32>,
    /// Per asset: all deposits minus all withdrawals.
    net_deposits: BTreeMap<String, i128>,
    instruments: BTreeMap<String, Instrument>,
    books: BTreeMap<String, Book>,
    /// Keyed by (account, asset).
    balances: BTreeMap<(String, String), Balance>,
    fees: BTreeMap<String, i128>,
    arrivals: u64,
}

impl Model {
    pub fn new() -> Model {
        Model::default()
    }

    /// One input line; returns its events.
    pub fn feed_line(&mut self, line: &str) -> Vec<Value> {
        self.seq += 1;
        let mut events = Vec::new();
        // The spec does not say which white space; ASCII white space is what a
        // byte-oriented line format means (and what the engine does).
        if line.trim_matches(|c: char| c.is_ascii_whitespace()).is_empty() {
            return events;
        }
        match parse_command(line) {
            Ok(command) => self.execute(command, &mut events),
            Err(Malformed) => events.push(json!({
                "ev": "rejected", "seq": self.seq, "reason": "malformed"
            })),
        }
        self.assert_invariants();
        events
    }

    /// The final state document: balances, fees and books.
    pub fn state(&self) -> Value {
        let mut balances = Map::new();
        for ((account, asset), balance) in &self.balances {
            let decimals = self.asset_decimals[asset];
            let assets = balances.entry(account.clone()).or_insert_with(|| json!({}));
            assets[asset] = json!({
                "available": format_units(balance.available, decimals),
                "held": format_units(balance.held, decimals),
            });
        }
        let mut fees = Map::new();
        for (asset, amount) in &self.fees {
            fees.insert(asset.clone(), json!(format_units(*amount, self.asset_decimals[asset])));
        }
        let mut books = Map::new();
        for (symbol, book) in &self.books {
            let instrument = &self.instruments[symbol];
            let side_json = |orders: &Vec<Order>| -> Value {
                orders
                    .iter()
                    .map(|order| {
                        json!({
                            "account": order.account,
                            "id": order.id,
                            "price": instrument.price_text(order.price),
                            "qty": instrument.qty_text(order.remaining),
                        })
                    })
                    .collect()
            };
            books.insert(
                symbol.clone(),
                json!({ "bids": side_json(&book.bids), "asks": side_json(&book.asks) }),
            );
        }
        json!({ "balances": balances, "fees": fees, "books": books })
    }

    fn execute(&mut self, command: Command, events: &mut Vec<Value>) {
        let key = command.order_key();
        let outcome = match command {
            Command::Asset { asset, decimals } => self.declare_asset(asset, decimals, events),
            Command::Instrument(definition) => self.declare_instrument(definition, events),
            Command::Deposit { account, asset, amount } => {
                self.deposit(&account, &asset, &amount, events)
            }
            Command::Withdraw { account, asset, amount } => {
                self.withdraw(&account, &asset, &amount, events)
            }
            Command::Order(order) => self.submit(order, events),
            Command::Cancel { account, id } => self.cancel(&account, &id, events),
            Command::Amend { account, id, price, qty } => {
                self.amend(&account, &id, price.as_ref(), qty.as_ref(), events)
            }
        };
        if let Err(reason) = outcome {
            assert!(events.is_empty(), "a rejected command produces nothing else");
            let mut rejected = json!({ "ev": "rejected", "seq": self.seq, "reason": reason });
            if let Some((account, id)) = key {
                rejected["account"] = json!(account);
                rejected["id"] = json!(id);
            }
            events.push(rejected);
        }
    }

    fn accepted(&self, key: Option<(&str, &str)>) -> Value {
        let mut accepted = json!({ "ev": "accepted", "seq": self.seq });
        if let Some((account, id)) = key {
            accepted["account"] = json!(account);
            accepted["id"] = json!(id);
        }
        accepted
    }

    // ---- definitions and money movements ---------------------------------------

    fn declare_asset(&mut self, asset: String, decimals: i128, events: &mut Vec<Value>) -> Outcome {
        if self.asset_decimals.contains_key(&asset) {
            return Err("duplicate_asset");
        }
        if !(0..=ASSET_DECIMALS_MAX).contains(&decimals) {
            return Err("invalid_decimals");
        }
        self.asset_decimals.insert(asset, decimals as u32);
        events.push(self.accepted(None));
        Ok(())
    }

    fn declare_instrument(
        &mut self,
        definition: InstrumentCommand,
        events: &mut Vec<Value>,
    ) -> Outcome {
        if self.instruments.contains_key(&definition.symbol) {
            return Err("duplicate_symbol");
        }
        let (Some(&base_decimals), Some(&quote_decimals)) =
            (self.asset_decimals.get(&definition.base), self.asset_decimals.get(&definition.quote))
        else {
            return Err("unknown_asset");
        };
        let instrument = build_instrument(definition, base_decimals, quote_decimals)
            .ok_or("invalid_instrument")?;
        self.books.insert(instrument.symbol.clone(), Book::default());
        self.instruments.insert(instrument.symbol.clone(), instrument);
        events.push(self.accepted(None));
        Ok(())
    }

    fn deposit(
        &mut self,
        account: &str,
        asset: &str,
        amount: &Decimal,
        events: &mut Vec<Value>,
    ) -> Outcome {
        let decimals = *self.asset_decimals.get(asset).ok_or("unknown_asset")?;
        if !amount.is_positive() {
            return Err("invalid_amount");
        }
        let Units::Exact(units) = amount.units(decimals) else {
            return Err("invalid_amount");
        };
        let net = self.net_deposits.get(asset).copied().unwrap_or(0);
        if net + units > UNITS_MAX {
            return Err("invalid_amount");
        }
        self.net_deposits.insert(asset.to_string(), net + units);
        self.balance_mut(account, asset).available += units;
        events.push(self.accepted(None));
        Ok(())
    }

    fn withdraw(
        &mut self,
        account: &str,
        asset: &str,
        amount: &Decimal,
        events: &mut Vec<Value>,
    ) -> Outcome {
        let decimals = *self.asset_decimals.get(asset).ok_or("unknown_asset")?;
        if !amount.is_positive() {
            return Err("invalid_amount");
        }
        let units = match amount.units(decimals) {
            Units::Exact(units) => units,
            Units::TooPrecise => return Err("invalid_amount"),
            Units::TooLarge => return Err("insufficient_funds"),
        };
        if units > self.available(account, asset) {
            return Err("insufficient_funds");
        }
        *self.net_deposits.get_mut(asset).expect("funds come from deposits") -= units;
        self.balance_mut(account, asset).available -= units;
        events.push(self.accepted(None));
        Ok(())
    }

    fn available(&self, account: &str, asset: &str) -> i128 {
        self.balances
            .get(&(account.to_string(), asset.to_string()))
            .map_or(0, |balance| balance.available)
    }

    fn balance_mut(&mut self, account: &str, asset: &str) -> &mut Balance {
        self.balances.entry((account.to_string(), asset.to_string())).or_default()
    }

    /// Moves `amount` from available to held (a negative amount moves it back).
    fn take_hold(&mut self, account: &str, asset: &str, amount: i128) {
        let balance = self.balance_mut(account, asset);
        balance.available -= amount;
        balance.held += amount;
        assert!(balance.available >= 0 && balance.held >= 0, "holds stay covered");
    }

    // ---- orders --------------------------------------------------------------------

    fn submit(&mut self, command: OrderCommand, events: &mut Vec<Value>) -> Outcome {
        let instrument = self.instruments.get(&command.symbol).ok_or("unknown_symbol")?.clone();
        if self.find_open(&command.account, &command.id).is_some() {
            return Err("duplicate_id");
        }
        let limit = match &command.price {
            Some(price) => Some(instrument.limit_price(price).ok_or("invalid_price")?),
            None => None,
        };
        let qty = instrument.quantity(&command.qty).ok_or("invalid_qty")?;
        if let Some(limit) = limit {
            if command.post_only && self.would_cross(&instrument, command.side, limit) {
                return Err("would_cross");
            }
        }
        let (price, tif) = match limit {
            Some(limit) => (limit, command.tif),
            None => {
                let best = self
                    .best_price(&instrument.symbol, command.side.opposite())
                    .ok_or("no_liquidity")?;
                let tif = match command.tif {
                    TimeInForce::Fok => TimeInForce::Fok,
                    TimeInForce::Gtc | TimeInForce::Ioc => TimeInForce::Ioc,
                };
                (instrument.protection_price(command.side, best), tif)
            }
        };
        let asset = instrument.hold_asset(command.side);
        let hold = instrument
            .hold_amount(command.side, price, qty)
            .filter(|hold| *hold <= self.available(&command.account, asset))
            .ok_or("insufficient_funds")?;
        self.take_hold(&command.account, asset, hold);
        events.push(self.accepted(Some((&command.account, &command.id))));
        let order = Order {
            account: command.account,
            id: command.id,
            symbol: command.symbol,
            side: command.side,
            price,
            remaining: qty,
            filled: 0,
            post_only: command.post_only,
            stp: command.stp,
            arrival: 0,
        };
        self.run_new_order(&instrument, order, tif, events);
        Ok(())
    }

    fn run_new_order(
        &mut self,
        instrument: &Instrument,
        mut order: Order,
        tif: TimeInForce,
        events: &mut Vec<Value>,
    ) {
        if order.post_only {
            // It does not cross (checked before acceptance): a gtc one rests, an ioc or
            // fok one has nothing to take.
            match tif {
                TimeInForce::Gtc => self.rest(order),
                TimeInForce::Ioc | TimeInForce::Fok => {
                    self.finish(instrument, &order, "expired", events)
                }
            }
            return;
        }
        if tif == TimeInForce::Fok && self.fok_executable_qty(&order) < order.remaining {
            self.finish(instrument, &order, "expired", events);
            return;
        }
        match self.match_as_taker(instrument, &mut order, events) {
            MatchEnd::Filled => self.finish(instrument, &order, "filled", events),
            MatchEnd::SelfTradeStop => self.finish(instrument, &order, "stp", events),
            MatchEnd::NothingCrosses => match tif {
                TimeInForce::Gtc => self.rest(order),
                TimeInForce::Ioc | TimeInForce::Fok => {
                    self.finish(instrument, &order, "expired", events)
                }
            },
        }
    }

    /// What a fok order could execute, counted in priority order before any trade.
    fn fok_executable_qty(&self, taker: &Order) -> i128 {
        let mut counted = 0;
        for maker in self.books[&taker.symbol].side(taker.side.opposite()) {
            if !crosses(taker.side, taker.price, maker.price) {
                break;
            }
            if maker.account == taker.account {
                match taker.stp {
                    SelfTrade::Allow => {}
                    SelfTrade::CancelMaker => continue,
                    SelfTrade::CancelTaker | SelfTrade::CancelBoth => break,
                }
            }
            counted += maker.remaining;
        }
        counted
    }

    fn match_as_taker(
        &mut self,
        instrument: &Instrument,
        taker: &mut Order,
        events: &mut Vec<Value>,
    ) -> MatchEnd {
        loop {
            if taker.remaining == 0 {
                return MatchEnd::Filled;
            }
            let book = &self.books[&instrument.symbol];
            let Some(maker) = book.side(taker.side.opposite()).first().cloned() else {
                return MatchEnd::NothingCrosses;
            };
            if !crosses(taker.side, taker.price, maker.price) {
                return MatchEnd::NothingCrosses;
            }
            if maker.account == taker.account && taker.stp != SelfTrade::Allow {
                match taker.stp {
                    SelfTrade::CancelTaker => return MatchEnd::SelfTradeStop,
                    SelfTrade::CancelMaker | SelfTrade::CancelBoth => {
                        self.remove_open(&maker.account, &maker.id);
                        self.finish(instrument, &maker, "stp", events);
                        if taker.stp == SelfTrade::CancelBoth {
                            return MatchEnd::SelfTradeStop;
                        }
                        continue;
                    }
                    SelfTrade::Allow => unreachable!("handled by the condition above"),
                }
            }
            let qty = taker.remaining.min(maker.remaining);
            let (maker_fee, taker_fee) = self.settle(instrument, taker, &maker, qty);
            taker.remaining -= qty;
            taker.filled += qty;
            let maker_after = {
                let resting =
                    self.open_mut(&maker.account, &maker.id).expect("the maker is on the book");
                resting.remaining -= qty;
                resting.filled += qty;
                resting.clone()
            };
            events.push(json!({
                "ev": "trade",
                "seq": self.seq,
                "symbol": instrument.symbol,
                "price": instrument.price_text(maker.price),
                "qty": instrument.qty_text(qty),
                "taker_side": taker.side.name(),
                "maker_account": maker.account,
                "maker_id": maker.id,
                "taker_account": taker.account,
                "taker_id": taker.id,
                "maker_fee": maker_fee,
                "taker_fee": taker_fee,
            }));
            if maker_after.remaining == 0 {
                self.remove_open(&maker.account, &maker.id);
                self.finish(instrument, &maker_after, "filled", events);
            }
        }
    }

    /// Moves the money of one fill; returns the (maker, taker) fees as text in the
    /// asset each receives.
    fn settle(
        &mut self,
        instrument: &Instrument,
        taker: &Order,
        maker: &Order,
        qty: i128,
    ) -> (String, String) {
        let (buyer, seller) = match taker.side {
            Side::Buy => (taker, maker),
            Side::Sell => (maker, taker),
        };
        let (buyer_fee_bps, seller_fee_bps) = match taker.side {
            Side::Buy => (instrument.taker_fee_bps, instrument.maker_fee_bps),
            Side::Sell => (instrument.maker_fee_bps, instrument.taker_fee_bps),
        };
        let paid = instrument
            .notional(maker.price, qty)
            .expect("a fill's notional is within what the buyer held");
        let released = instrument.notional(buyer.price, qty).expect("the buyer held this much");
        let buyer_fee = fee(qty, buyer_fee_bps);
        let seller_fee = fee(paid, seller_fee_bps);

        let buyer_quote = self.balance_mut(&buyer.account, &instrument.quote);
        buyer_quote.held -= released;
        buyer_quote.available += released - paid;
        self.balance_mut(&buyer.account, &instrument.base).available += qty - buyer_fee;
        self.balance_mut(&seller.account, &instrument.base).held -= qty;
        self.balance_mut(&seller.account, &instrument.quote).available += paid - seller_fee;
        *self.fees.entry(instrument.base.clone()).or_default() += buyer_fee;
        *self.fees.entry(instrument.quote.clone()).or_default() += seller_fee;

        let buyer_fee_text = format_units(buyer_fee, instrument.base_decimals);
        let seller_fee_text = format_units(seller_fee, instrument.quote_decimals);
        match taker.side {
            Side::Buy => (seller_fee_text, buyer_fee_text),
            Side::Sell => (buyer_fee_text, seller_fee_text),
        }
    }

    /// Releases what a finished order (not on the book) still holds and reports it.
    fn finish(
        &mut self,
        instrument: &Instrument,
        order: &Order,
        reason: &str,
        events: &mut Vec<Value>,
    ) {
        let hold = instrument
            .hold_amount(order.side, order.price, order.remaining)
            .expect("an accepted order's hold fits");
        self.take_hold(&order.account, instrument.hold_asset(order.side), -hold);
        events.push(json!({
            "ev": "done",
            "seq": self.seq,
            "account": order.account,
            "id": order.id,
            "reason": reason,
            "filled": instrument.qty_text(order.filled),
        }));
    }

    fn rest(&mut self, mut order: Order) {
        order.arrival = self.arrivals;
        self.arrivals += 1;
        let book = self.books.get_mut(&order.symbol).expect("instrument exists");
        book.side_mut(order.side).push(order);
        book.sort();
    }

    fn best_price(&self, symbol: &str, side: Side) -> Option<i128> {
        self.books[symbol].side(side).first().map(|order| order.price)
    }

    /// Counts every resting order, the account's own included.
    fn would_cross(&self, instrument: &Instrument, side: Side, limit: i128) -> bool {
        self.best_price(&instrument.symbol, side.opposite())
            .is_some_and(|best| crosses(side, limit, best))
    }

    fn find_open(&self, account: &str, id: &str) -> Option<Order> {
        self.books
            .values()
            .flat_map(|book| book.bids.iter().chain(book.asks.iter()))
            .find(|order| order.account == account && order.id == id)
            .cloned()
    }

    fn open_mut(&mut self, account: &str, id: &str) -> Option<&mut Order> {
        self.books
            .values_mut()
            .flat_map(|book| book.bids.iter_mut().chain(book.asks.iter_mut()))
            .find(|order| order.account == account && order.id == id)
    }

    fn remove_open(&mut self, account: &str, id: &str) -> Option<Order> {
        for book in self.books.values_mut() {
            for orders in [&mut book.bids, &mut book.asks] {
                if let Some(index) =
                    orders.iter().position(|order| order.account == account && order.id == id)
                {
                    return Some(orders.remove(index));
                }
            }
        }
        None
    }

    fn cancel(&mut self, account: &str, id: &str, events: &mut Vec<Value>) -> Outcome {
        let order = self.remove_open(account, id).ok_or("unknown_order")?;
        events.push(self.accepted(Some((account, id))));
        let instrument = self.instruments[&order.symbol].clone();
        self.finish(&instrument, &order, "canceled", events);
        Ok(())
    }

    fn amend(
        &mut self,
        account: &str,
        id: &str,
        price: Option<&Decimal>,
        qty: Option<&Decimal>,
        events: &mut Vec<Value>,
    ) -> Outcome {
        let order = self.find_open(account, id).ok_or("unknown_order")?;
        let instrument = self.instruments[&order.symbol].clone();
        let new_price = match price {
            Some(price) => instrument.limit_price(price).ok_or("invalid_price")?,
            None => order.price,
        };
        let new_qty = match qty {
            Some(qty) => instrument.quantity(qty).ok_or("invalid_qty")?,
            None => order.remaining,
        };
        let keeps_priority = new_price == order.price && new_qty <= order.remaining;
        if !keeps_priority
            && order.post_only
            && self.would_cross(&instrument, order.side, new_price)
        {
            return Err("would_cross");
        }
        let asset = instrument.hold_asset(order.side);
        let old_hold = instrument
            .hold_amount(order.side, order.price, order.remaining)
            .expect("an open order's hold fits");
        let increase = instrument
            .hold_amount(order.side, new_price, new_qty)
            .map(|new_hold| new_hold - old_hold)
            .filter(|increase| *increase <= self.available(account, asset))
            .ok_or("insufficient_funds")?;

        events.push(self.accepted(Some((account, id))));
        events.push(json!({
            "ev": "amended",
            "seq": self.seq,
            "account": account,
            "id": id,
            "price": instrument.price_text(new_price),
            "qty": instrument.qty_text(new_qty),
        }));
        self.take_hold(account, asset, increase);
        if keeps_priority {
            self.open_mut(account, id).expect("found above").remaining = new_qty;
            return Ok(());
        }
        let mut order = self.remove_open(account, id).expect("found above");
        order.price = new_price;
        order.remaining = new_qty;
        match self.match_as_taker(&instrument, &mut order, events) {
            MatchEnd::Filled => self.finish(&instrument, &order, "filled", events),
            MatchEnd::SelfTradeStop => self.finish(&instrument, &order, "stp", events),
            MatchEnd::NothingCrosses => self.rest(order),
        }
        Ok(())
    }

    // ---- self-check ----------------------------------------------------------------

    /// Holds equal the open orders' holds, money is conserved, books are sorted and
    /// uncrossed. A failure here is a bug in the model, not in the engine.
    fn assert_invariants(&self) {
        let mut expected_held: BTreeMap<(String, String), i128> = BTreeMap::new();
        for (symbol, book) in &self.books {
            let instrument = &self.instruments[symbol];
            for order in book.bids.iter().chain(book.asks.iter()) {
                assert!(order.remaining > 0, "model: empty order on the book");
                let hold = instrument
                    .hold_amount(order.side, order.price, order.remaining)
                    .expect("model: hold fits");
                let key = (order.account.clone(), instrument.hold_asset(order.side).to_string());
                *expected_held.entry(key).or_default() += hold;
            }
            let mut sorted = book.clone();
            sorted.sort();
            let same = |a: &Vec<Order>, b: &Vec<Order>| {
                a.iter().map(|o| o.arrival).eq(b.iter().map(|o| o.arrival))
            };
            assert!(same(&sorted.bids, &book.bids) && same(&sorted.asks, &book.asks));
            if let (Some(bid), Some(ask)) = (book.bids.first(), book.asks.first()) {
                assert!(bid.price < ask.price, "model: crossed book {symbol}");
            }
        }
        for (key, balance) in &self.balances {
            assert!(balance.available >= 0, "model: negative available {key:?}");
            let expected = expected_held.get(key).copied().unwrap_or(0);
            assert_eq!(balance.held, expected, "model: held of {key:?}");
        }
        for (key, held) in &expected_held {
            assert!(self.balances.contains_key(key) || *held == 0);
        }
        for asset in self.asset_decimals.keys() {
            let in_accounts: i128 = self
                .balances
                .iter()
                .filter(|((_, balance_asset), _)| balance_asset == asset)
                .map(|(_, balance)| balance.available + balance.held)
                .sum();
            let fees = self.fees.get(asset).copied().unwrap_or(0);
            let net = self.net_deposits.get(asset).copied().unwrap_or(0);
            assert_eq!(in_accounts + fees, net, "model: conservation of {asset}");
            assert!(net <= UNITS_MAX);
        }
    }
}

fn build_instrument(
    definition: InstrumentCommand,
    base_decimals: u32,
    quote_decimals: u32,
) -> Option<Instrument> {
    let InstrumentCommand {
        symbol,
        base,
        quote,
        tick,
        lot,
        min_qty,
        max_qty,
        maker_fee_bps,
        taker_fee_bps,
        market_band_bps,
    } = definition;
    if base == quote {
        return None;
    }
    if ![&tick, &lot, &min_qty, &max_qty].iter().all(|d| d.is_positive()) {
        return None;
    }
    let fee_range = 0..=FEE_BPS_MAX;
    if !fee_range.contains(&maker_fee_bps)
        || !fee_range.contains(&taker_fee_bps)
        || !(0..=BPS_PER_ONE).contains(&market_band_bps)
    {
        return None;
    }
    if tick.places() + lot.places() > quote_decimals || lot.places() > base_decimals {
        return None;
    }
    let price_scale = tick.places();
    // A tick beyond i64::MAX units would leave no valid limit price (prices stop at
    // i64::MAX units, the engine's documented limit); the engine refuses it too.
    let tick = in_range(tick.units(price_scale))?;
    // The spec's list of invalid instruments has no range clause: a lot or bounds
    // beyond i64 units are valid (orders that large then fail the funds check). Beyond
    // i128 is outside this model (never generated).
    let exact = |units: Units| match units {
        Units::Exact(value) => Some(value),
        Units::TooPrecise | Units::TooLarge => None,
    };
    let lot = exact(lot.units(base_decimals))?;
    // A bound with more places than the base has is not a multiple of the lot.
    let min_qty = exact(min_qty.units(base_decimals))?;
    let max_qty = exact(max_qty.units(base_decimals))?;
    if min_qty % lot != 0 || max_qty % lot != 0 || min_qty > max_qty {
        return None;
    }
    Some(Instrument {
        symbol,
        base,
        quote,
        base_decimals,
        quote_decimals,
        price_scale,
        tick,
        lot,
        min_qty,
        max_qty,
        maker_fee_bps,
        taker_fee_bps,
        market_band_bps,
    })
}
