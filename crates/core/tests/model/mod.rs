//! A deliberately naive reference model of the replay format
//! (`/work/shared/spec/replay-format.md`) and of its futures extension
//! (`/work/shared/spec/futures.md`, read as `docs/futures.md` records where it is
//! silent), written from the specs alone.
//!
//! It exists to be compared with the real engine event for event, so it prefers being
//! obviously right to being fast: lines are read through `serde_json::Value`, every
//! number is an `i128` with an explicit decimal scale, each book side is a plain `Vec`
//! kept sorted by (price, arrival), positions are plain `Vec`s of (price, qty) entries
//! and every lookup is a linear scan. It shares no code with the engine and must never
//! read `crates/core/src/`.
//!
//! Units used throughout:
//! - an asset amount is counted in that asset's smallest unit (`10^-decimals`);
//! - a quantity is counted in the base asset's smallest unit on a spot instrument, and
//!   in units of `10^-decimals(lot)` on a futures contract (which has no base asset);
//! - a price is counted in units of `10^-decimals(tick)`, so a tick is a whole number.
//!
//! Event order (the engine uses the same): `accepted`/`rejected`; for an amend then
//! `amended`; then per match step the `trade` followed at once by the maker's `done` if
//! it filled, or the `done` `stp` of a maker cancelled by self-trade prevention; the
//! taker's `done` comes last. On a futures fill the maker's side is settled before the
//! taker's. A `settle` emits its `done`s (acceptance order) before its `settled`s; a
//! `liquidate` its `done canceled`s, then the long side's order, then the short side's.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::{json, Map, Value};

/// Every amount, price and hold the spec allows fits in a signed 64-bit integer.
const UNITS_MAX: i128 = i64::MAX as i128;
const BPS_PER_ONE: i128 = 10_000;
const FEE_BPS_MAX: i128 = 1_000;
const ASSET_DECIMALS_MAX: i128 = 18;

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
    /// Good for the day: a `gtc` that expires at the futures symbol's next `settle`.
    Gfd,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum SelfTrade {
    CancelTaker,
    CancelMaker,
    CancelBoth,
    /// `"none"`: the account trades with itself and pays both fees.
    Allow,
}

/// An order's `offset`. Every spot order is `Open` (a valid offset there is ignored).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Offset {
    Open,
    Close,
    CloseToday,
}

/// A side of a futures position.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Direction {
    Long,
    Short,
}

impl Direction {
    fn name(self) -> &'static str {
        match self {
            Direction::Long => "long",
            Direction::Short => "short",
        }
    }

    /// The side an order of `side` with offset `open` opens: buy opens long.
    fn opened_by(side: Side) -> Direction {
        match side {
            Side::Buy => Direction::Long,
            Side::Sell => Direction::Short,
        }
    }

    /// The side a close order of `side` closes: sell closes long.
    fn closed_by(side: Side) -> Direction {
        match side {
            Side::Sell => Direction::Long,
            Side::Buy => Direction::Short,
        }
    }
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

struct FutureCommand {
    symbol: String,
    settle: String,
    tick: Decimal,
    lot: Decimal,
    min_qty: Decimal,
    max_qty: Decimal,
    multiplier: Decimal,
    margin: Decimal,
    maker_fee: Decimal,
    taker_fee: Decimal,
    market_band_bps: i128,
    close_today: bool,
}

struct OrderCommand {
    account: String,
    id: String,
    symbol: String,
    side: Side,
    /// `None` for a market order (its `price` field is ignored).
    price: Option<Decimal>,
    /// An order names `qty`, `quote_qty` (a spot market buy's amount to spend,
    /// `orders.md`) or both; naming neither is `malformed`.
    qty: Option<Decimal>,
    quote_qty: Option<Decimal>,
    tif: TimeInForce,
    post_only: bool,
    stp: SelfTrade,
    offset: Offset,
}

enum Command {
    Asset { asset: String, decimals: i128 },
    Instrument(InstrumentCommand),
    Future(FutureCommand),
    Deposit { account: String, asset: String, amount: Decimal },
    Withdraw { account: String, asset: String, amount: Decimal },
    Order(OrderCommand),
    Cancel { account: String, id: String },
    Amend { account: String, id: String, price: Option<Decimal>, qty: Option<Decimal> },
    Margin { symbol: String, margin: Decimal },
    Settle { symbol: String, price: Decimal, expiry: bool },
    Liquidate { account: String, symbol: String },
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
        "future" => Command::Future(FutureCommand {
            symbol: fields.name("symbol")?,
            settle: fields.name("settle")?,
            tick: fields.decimal("tick")?,
            lot: fields.decimal("lot")?,
            min_qty: fields.decimal("min_qty")?,
            max_qty: fields.decimal("max_qty")?,
            multiplier: fields.decimal("multiplier")?,
            margin: fields.decimal("margin")?,
            maker_fee: fields.decimal("maker_fee")?,
            taker_fee: fields.decimal("taker_fee")?,
            market_band_bps: fields.integer("market_band_bps")?,
            close_today: fields.optional_bool("close_today")?.unwrap_or(false),
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
        "margin" => {
            Command::Margin { symbol: fields.name("symbol")?, margin: fields.decimal("margin")? }
        }
        "settle" => Command::Settle {
            symbol: fields.name("symbol")?,
            price: fields.decimal("price")?,
            expiry: fields.optional_bool("final")?.unwrap_or(false),
        },
        "liquidate" => {
            Command::Liquidate { account: fields.name("account")?, symbol: fields.name("symbol")? }
        }
        _ => return Err(Malformed),
    };
    Ok(command)
}

fn parse_order(fields: &Fields) -> Result<OrderCommand, Malformed> {
    let side = [Side::Buy, Side::Sell][fields.choice("side", &["buy", "sell"])?];
    let market = fields.choice("type", &["limit", "market"])? == 1;
    let tif = fields
        .optional_choice("tif", &["gtc", "ioc", "fok", "gfd"])?
        .map_or(TimeInForce::Gtc, |i| {
            [TimeInForce::Gtc, TimeInForce::Ioc, TimeInForce::Fok, TimeInForce::Gfd][i]
        });
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
    // Checked on every order, spot ones included (where a valid value is then ignored).
    let offset = fields
        .optional_choice("offset", &["open", "close", "close_today"])?
        .map_or(Offset::Open, |i| [Offset::Open, Offset::Close, Offset::CloseToday][i]);
    // `price` and `post_only` on a market order are ignored, not even type-checked.
    let (price, post_only) = if market {
        (None, false)
    } else {
        let post_only = fields.optional_bool("post_only")?.unwrap_or(false);
        (Some(fields.decimal("price")?), post_only)
    };
    // `quote_qty` is type-checked wherever it appears, even where it is not allowed.
    let qty = fields.optional_decimal("qty")?;
    let quote_qty = fields.optional_decimal("quote_qty")?;
    if qty.is_none() && quote_qty.is_none() {
        return Err(Malformed);
    }
    Ok(OrderCommand {
        account: fields.name("account")?,
        id: fields.name("id")?,
        symbol: fields.name("symbol")?,
        side,
        price,
        qty,
        quote_qty,
        tif,
        post_only,
        stp,
        offset,
    })
}

// ----------------------------------------------------------------------------------
// State.

#[derive(Clone, Debug)]
struct Instrument {
    symbol: String,
    /// Decimal places of the tick; prices are counted in units of `10^-price_scale`.
    price_scale: u32,
    tick: i128,
    /// Quantities are counted in units of `10^-qty_scale`: the base asset's decimals on
    /// a spot instrument, the lot's decimal places on a futures contract.
    qty_scale: u32,
    lot: i128,
    min_qty: i128,
    max_qty: i128,
    market_band_bps: i128,
    terms: Terms,
}

#[derive(Clone, Debug)]
enum Terms {
    Spot(SpotTerms),
    Future(FutureTerms),
}

#[derive(Clone, Debug)]
struct SpotTerms {
    base: String,
    quote: String,
    quote_decimals: u32,
    maker_fee_bps: i128,
    taker_fee_bps: i128,
}

#[derive(Clone, Debug)]
struct FutureTerms {
    settle: String,
    settle_decimals: u32,
    /// The multiplier in units of `10^-multiplier_scale`.
    multiplier: i128,
    multiplier_scale: u32,
    /// Per lot, in the settle asset's smallest units; `margin` is the rate in force.
    margin: i128,
    maker_fee: i128,
    taker_fee: i128,
    close_today: bool,
}

/// Which entries of a position side a closing fill takes, oldest first.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Take {
    HistoryThenToday,
    HistoryOnly,
    TodayOnly,
}

impl Instrument {
    fn future(&self) -> Option<&FutureTerms> {
        match &self.terms {
            Terms::Spot(_) => None,
            Terms::Future(future) => Some(future),
        }
    }

    /// Spot: `price * qty` in the quote's smallest units; `None` beyond `i128`.
    fn notional(&self, spot: &SpotTerms, price: i128, qty: i128) -> Option<i128> {
        let product = price.checked_mul(qty)?;
        let product_scale = self.price_scale + self.qty_scale;
        if spot.quote_decimals >= product_scale {
            product.checked_mul(pow10(spot.quote_decimals - product_scale))
        } else {
            let divisor = pow10(product_scale - spot.quote_decimals);
            assert_eq!(product % divisor, 0, "notional of a lot multiple is exact");
            Some(product / divisor)
        }
    }

    /// Futures: `price * qty * multiplier` in the settle asset's smallest units (exact by
    /// the decimals rule); `price` may be a difference of prices, hence negative.
    fn value(&self, future: &FutureTerms, price: i128, qty: i128) -> i128 {
        let product_scale = self.price_scale + self.qty_scale + future.multiplier_scale;
        price
            .checked_mul(qty)
            .and_then(|product| product.checked_mul(future.multiplier))
            .and_then(|product| product.checked_mul(pow10(future.settle_decimals - product_scale)))
            .expect("futures values stay within the spec's range")
    }

    /// Futures: the number of lots in `qty`.
    fn lots(&self, qty: i128) -> i128 {
        assert_eq!(qty % self.lot, 0, "model: futures quantities are whole lots");
        qty / self.lot
    }

    /// The asset an order of `qty` at limit `price` holds and how much; `None` when that
    /// is beyond the range. Spot: `None` also when `qty` itself is (a quantity is an
    /// amount of the base asset, and no account can ever hold or receive more than
    /// `i64::MAX` units of it). Futures: an open order holds `lots * (margin +
    /// taker_fee)` at the rates in force, whatever its price; a close order holds nothing.
    fn hold(&self, side: Side, offset: Offset, price: i128, qty: i128) -> Option<(String, i128)> {
        match &self.terms {
            Terms::Spot(spot) => {
                if qty > UNITS_MAX {
                    return None;
                }
                match side {
                    Side::Buy => Some((spot.quote.clone(), self.notional(spot, price, qty)?)),
                    Side::Sell => Some((spot.base.clone(), qty)),
                }
            }
            Terms::Future(future) => match offset {
                Offset::Open => Some((
                    future.settle.clone(),
                    self.lots(qty).checked_mul(future.margin + future.taker_fee)?,
                )),
                Offset::Close | Offset::CloseToday => Some((future.settle.clone(), 0)),
            },
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
        let Units::Exact(units) = qty.units(self.qty_scale) else {
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
        format_units(qty, self.qty_scale)
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
    /// Always `Open` on a spot instrument.
    offset: Offset,
    /// A futures `gfd` order: expires at the symbol's next `settle`.
    gfd: bool,
    /// A liquidation's market order: closes history then today whatever `close_today`.
    liquidation: bool,
    /// The `seq` of the command that accepted it; a settle or a liquidation finishes
    /// orders in this order (an amend does not change it).
    accepted: u64,
}

impl Order {
    fn closes(&self) -> bool {
        self.offset != Offset::Open
    }

    /// Which entries a closing fill of this futures order takes.
    fn take(&self, future: &FutureTerms) -> Take {
        if self.liquidation || !future.close_today {
            return Take::HistoryThenToday;
        }
        match self.offset {
            Offset::Close => Take::HistoryOnly,
            Offset::CloseToday => Take::TodayOnly,
            Offset::Open => unreachable!("an open order takes nothing"),
        }
    }
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

    fn orders(&self) -> impl Iterator<Item = &Order> {
        self.bids.iter().chain(self.asks.iter())
    }
}

/// One side (long or short) of a position: lots-at-price `(price, qty)` entries.
#[derive(Clone, Debug, Default)]
struct Holding {
    /// Opened before the last settlement: empty, or one entry at that settlement price.
    history: Vec<(i128, i128)>,
    /// Opened since, in opening order.
    today: Vec<(i128, i128)>,
}

impl Holding {
    fn history_qty(&self) -> i128 {
        self.history.iter().map(|entry| entry.1).sum()
    }

    fn today_qty(&self) -> i128 {
        self.today.iter().map(|entry| entry.1).sum()
    }

    fn total(&self) -> i128 {
        self.history_qty() + self.today_qty()
    }

    fn is_empty(&self) -> bool {
        self.history.is_empty() && self.today.is_empty()
    }

    /// History first, then today's entries oldest first.
    fn entries(&self) -> impl Iterator<Item = &(i128, i128)> {
        self.history.iter().chain(self.today.iter())
    }

    /// An opening fill: adds to the newest today entry at the same price, else appends.
    fn open(&mut self, price: i128, qty: i128) {
        match self.today.last_mut() {
            Some(newest) if newest.0 == price => newest.1 += qty,
            _ => self.today.push((price, qty)),
        }
    }

    /// A closing fill: removes `qty` from the entries `take` allows, oldest first;
    /// returns the `(price, qty)` taken from each.
    fn close(&mut self, qty: i128, take: Take) -> Vec<(i128, i128)> {
        fn take_from(
            entries: &mut Vec<(i128, i128)>,
            left: &mut i128,
            taken: &mut Vec<(i128, i128)>,
        ) {
            while *left > 0 && !entries.is_empty() {
                let (price, available) = entries[0];
                let part = available.min(*left);
                taken.push((price, part));
                *left -= part;
                if part == available {
                    entries.remove(0);
                } else {
                    entries[0].1 -= part;
                }
            }
        }
        let mut left = qty;
        let mut taken = Vec::new();
        if take != Take::TodayOnly {
            take_from(&mut self.history, &mut left, &mut taken);
        }
        if take != Take::HistoryOnly {
            take_from(&mut self.today, &mut left, &mut taken);
        }
        assert_eq!(left, 0, "model: a close never reaches past what it reserved");
        taken
    }
}

/// An account's position in one futures symbol. Kept only while a side is non-empty.
#[derive(Clone, Debug, Default)]
struct Position {
    long: Holding,
    short: Holding,
}

impl Position {
    fn holding(&self, direction: Direction) -> &Holding {
        match direction {
            Direction::Long => &self.long,
            Direction::Short => &self.short,
        }
    }

    fn holding_mut(&mut self, direction: Direction) -> &mut Holding {
        match direction {
            Direction::Long => &mut self.long,
            Direction::Short => &mut self.short,
        }
    }

    fn is_empty(&self) -> bool {
        self.long.is_empty() && self.short.is_empty()
    }
}

/// `sum(q_i * (price - p_i) * multiplier)` for a long side, `sum(q_i * (p_i - price) *
/// multiplier)` for a short one, over `entries` `(p_i, q_i)`.
fn profit(
    instrument: &Instrument,
    future: &FutureTerms,
    direction: Direction,
    entries: &[(i128, i128)],
    price: i128,
) -> i128 {
    entries
        .iter()
        .map(|&(entry_price, qty)| match direction {
            Direction::Long => instrument.value(future, price - entry_price, qty),
            Direction::Short => instrument.value(future, entry_price - price, qty),
        })
        .sum()
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

/// The money and realised profit of one fill, as the trade event shows them.
struct FillReport {
    maker_fee: String,
    taker_fee: String,
    /// Futures only: (maker, taker).
    pnl: Option<(String, String)>,
}

#[derive(Default)]
pub struct Model {
    /// Number of lines fed so far; the current line's `seq`.
    seq: u64,
    asset_decimals: BTreeMap<String, u32>,
    /// Per asset: all deposits minus all withdrawals.
    net_deposits: BTreeMap<String, i128>,
    /// Spot instruments and live futures contracts.
    instruments: BTreeMap<String, Instrument>,
    /// Futures symbols after their final settlement: unknown, but their names taken.
    expired_symbols: BTreeSet<String>,
    /// Assets that settle a futures contract (live or expired): their `available` may
    /// be below zero.
    settle_assets: BTreeSet<String>,
    books: BTreeMap<String, Book>,
    /// Keyed by (account, asset).
    balances: BTreeMap<(String, String), Balance>,
    /// Keyed by (account, symbol); iteration is in account name order (UTF-8 bytes).
    positions: BTreeMap<(String, String), Position>,
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

    /// The final state document: balances, fees, books and positions.
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
        let mut positions = Map::new();
        for ((account, symbol), position) in &self.positions {
            let instrument = &self.instruments[symbol];
            let entries_json = |entries: &Vec<(i128, i128)>| -> Value {
                entries
                    .iter()
                    .map(|&(price, qty)| {
                        json!([instrument.price_text(price), instrument.qty_text(qty)])
                    })
                    .collect()
            };
            let mut sides = Map::new();
            for direction in [Direction::Long, Direction::Short] {
                let holding = position.holding(direction);
                if !holding.is_empty() {
                    sides.insert(
                        direction.name().to_string(),
                        json!({
                            "history": entries_json(&holding.history),
                            "today": entries_json(&holding.today),
                        }),
                    );
                }
            }
            let symbols = positions.entry(account.clone()).or_insert_with(|| json!({}));
            symbols[symbol] = Value::Object(sides);
        }
        json!({ "balances": balances, "fees": fees, "books": books, "positions": positions })
    }

    fn execute(&mut self, command: Command, events: &mut Vec<Value>) {
        let key = command.order_key();
        let outcome = match command {
            Command::Asset { asset, decimals } => self.declare_asset(asset, decimals, events),
            Command::Instrument(definition) => self.declare_instrument(definition, events),
            Command::Future(definition) => self.declare_future(definition, events),
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
            Command::Margin { symbol, margin } => self.set_margin(&symbol, &margin, events),
            Command::Settle { symbol, price, expiry } => {
                self.settle(&symbol, &price, expiry, events)
            }
            Command::Liquidate { account, symbol } => self.liquidate(&account, &symbol, events),
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

    /// A symbol is unique across spot and futures, expired contracts included.
    fn symbol_taken(&self, symbol: &str) -> bool {
        self.instruments.contains_key(symbol) || self.expired_symbols.contains(symbol)
    }

    fn declare_instrument(
        &mut self,
        definition: InstrumentCommand,
        events: &mut Vec<Value>,
    ) -> Outcome {
        if self.symbol_taken(&definition.symbol) {
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

    fn declare_future(&mut self, definition: FutureCommand, events: &mut Vec<Value>) -> Outcome {
        if self.symbol_taken(&definition.symbol) {
            return Err("duplicate_symbol");
        }
        let Some(&settle_decimals) = self.asset_decimals.get(&definition.settle) else {
            return Err("unknown_asset");
        };
        let instrument = build_future(definition, settle_decimals).ok_or("invalid_instrument")?;
        let future = instrument.future().expect("built as a future");
        self.settle_assets.insert(future.settle.clone());
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
        // Also refuses every withdrawal while `available` is below zero.
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
        assert!(balance.held >= 0, "holds stay covered");
        assert!(amount <= 0 || balance.available >= 0, "a hold comes out of what is available");
    }

    // ---- futures: positions, margin, settlement, liquidation ------------------------

    /// A live futures contract; a spot symbol, an unknown or an expired one is
    /// `unknown_symbol`.
    fn future_instrument(&self, symbol: &str) -> Result<Instrument, &'static str> {
        self.instruments
            .get(symbol)
            .filter(|instrument| instrument.future().is_some())
            .cloned()
            .ok_or("unknown_symbol")
    }

    fn holding(&self, account: &str, symbol: &str, direction: Direction) -> Holding {
        self.positions
            .get(&(account.to_string(), symbol.to_string()))
            .map(|position| position.holding(direction).clone())
            .unwrap_or_default()
    }

    /// What a close order of `side` and `offset` may still take: what the offset may take
    /// minus what the account's open close orders on the same quantity reserve.
    fn closable(&self, account: &str, instrument: &Instrument, side: Side, offset: Offset) -> i128 {
        let future = instrument.future().expect("only futures orders close");
        let direction = Direction::closed_by(side);
        let holding = self.holding(account, &instrument.symbol, direction);
        let may_take = match (future.close_today, offset) {
            (false, _) => holding.total(),
            (true, Offset::Close) => holding.history_qty(),
            (true, Offset::CloseToday) => holding.today_qty(),
            (true, Offset::Open) => unreachable!("an open order closes nothing"),
        };
        let reserved: i128 = self.books[&instrument.symbol]
            .orders()
            .filter(|order| {
                order.account == account
                    && order.closes()
                    && Direction::closed_by(order.side) == direction
                    && (!future.close_today || order.offset == offset)
            })
            .map(|order| order.remaining)
            .sum();
        may_take - reserved
    }

    /// The open orders on `symbol` that `keep` selects, in the order they were accepted.
    fn orders_by_acceptance(&self, symbol: &str, keep: impl Fn(&Order) -> bool) -> Vec<Order> {
        let mut orders: Vec<Order> =
            self.books[symbol].orders().filter(|order| keep(order)).cloned().collect();
        orders.sort_by_key(|order| order.accepted);
        orders
    }

    /// One party's side of a futures fill of `qty` at `price` with `fee_per_lot`;
    /// returns its fee and its realised profit.
    fn fill_future(
        &mut self,
        instrument: &Instrument,
        future: &FutureTerms,
        order: &Order,
        price: i128,
        qty: i128,
        fee_per_lot: i128,
    ) -> (i128, i128) {
        let lots = instrument.lots(qty);
        let fee = lots * fee_per_lot;
        let key = (order.account.clone(), instrument.symbol.clone());
        let pnl = match order.offset {
            Offset::Open => {
                let balance = self.balance_mut(&order.account, &future.settle);
                // The order's hold falls; the position's margin rises and stays held; the
                // fee goes to the fee balance; the rest comes back.
                balance.held -= lots * (future.margin + future.taker_fee);
                balance.held += lots * future.margin;
                balance.available += lots * (future.taker_fee - fee_per_lot);
                let position = self.positions.entry(key).or_default();
                position.holding_mut(Direction::opened_by(order.side)).open(price, qty);
                0
            }
            Offset::Close | Offset::CloseToday => {
                let direction = Direction::closed_by(order.side);
                let position =
                    self.positions.get_mut(&key).expect("a close order reserved this position");
                let taken = position.holding_mut(direction).close(qty, order.take(future));
                if position.is_empty() {
                    self.positions.remove(&key);
                }
                let pnl = profit(instrument, future, direction, &taken, price);
                let balance = self.balance_mut(&order.account, &future.settle);
                balance.available += pnl;
                balance.held -= lots * future.margin;
                balance.available += lots * future.margin;
                balance.available -= fee;
                pnl
            }
        };
        *self.fees.entry(future.settle.clone()).or_default() += fee;
        (fee, pnl)
    }

    fn set_margin(&mut self, symbol: &str, margin: &Decimal, events: &mut Vec<Value>) -> Outcome {
        let instrument = self.future_instrument(symbol)?;
        let future = instrument.future().expect("a future");
        let margin = match margin.units(future.settle_decimals) {
            Units::Exact(units) if units > 0 && units <= UNITS_MAX => units,
            _ => return Err("invalid_amount"),
        };
        events.push(self.accepted(None));
        let before = self.futures_held(symbol);
        if let Some(Terms::Future(terms)) =
            self.instruments.get_mut(symbol).map(|instrument| &mut instrument.terms)
        {
            terms.margin = margin;
        }
        let after = self.futures_held(symbol);
        let accounts: BTreeSet<&String> = before.keys().chain(after.keys()).collect();
        for account in accounts {
            let change = after.get(account).copied().unwrap_or(0)
                - before.get(account).copied().unwrap_or(0);
            // May take `available` below zero: nothing is cancelled.
            let balance = self.balance_mut(account, &future.settle);
            balance.held += change;
            balance.available -= change;
        }
        Ok(())
    }

    /// Per account: what its open orders and its position on the futures `symbol` hold,
    /// at the rates in force.
    fn futures_held(&self, symbol: &str) -> BTreeMap<String, i128> {
        let instrument = &self.instruments[symbol];
        let future = instrument.future().expect("a future");
        let mut held: BTreeMap<String, i128> = BTreeMap::new();
        for order in self.books[symbol].orders() {
            let (_, hold) = instrument
                .hold(order.side, order.offset, order.price, order.remaining)
                .expect("an open order's hold fits");
            *held.entry(order.account.clone()).or_default() += hold;
        }
        for ((account, position_symbol), position) in &self.positions {
            if position_symbol == symbol {
                let lots = instrument.lots(position.long.total() + position.short.total());
                *held.entry(account.clone()).or_default() += lots * future.margin;
            }
        }
        held
    }

    fn settle(
        &mut self,
        symbol: &str,
        price: &Decimal,
        expiry: bool,
        events: &mut Vec<Value>,
    ) -> Outcome {
        let instrument = self.future_instrument(symbol)?;
        let future = instrument.future().expect("a future").clone();
        let price = instrument.limit_price(price).ok_or("invalid_price")?;
        events.push(self.accepted(None));

        // Daily: gfd and close_today orders expire; expiry: every order does.
        let expiring = self.orders_by_acceptance(symbol, |order| {
            expiry || order.gfd || order.offset == Offset::CloseToday
        });
        for order in expiring {
            self.remove_open(&order.account, &order.id).expect("listed as open");
            self.finish(&instrument, &order, "expired", events);
        }

        // Mark every position to `price`, accounts in name order, long then short.
        let keys: Vec<(String, String)> = self
            .positions
            .keys()
            .filter(|(_, held_symbol)| held_symbol == symbol)
            .cloned()
            .collect();
        for key in &keys {
            for direction in [Direction::Long, Direction::Short] {
                let holding = self.positions[key].holding(direction).clone();
                if holding.is_empty() {
                    continue;
                }
                let entries: Vec<(i128, i128)> = holding.entries().copied().collect();
                let pnl = profit(&instrument, &future, direction, &entries, price);
                let qty = holding.total();
                *self.positions.get_mut(key).expect("listed").holding_mut(direction) =
                    Holding { history: vec![(price, qty)], today: Vec::new() };
                self.balance_mut(&key.0, &future.settle).available += pnl;
                events.push(json!({
                    "ev": "settled",
                    "seq": self.seq,
                    "account": key.0,
                    "symbol": symbol,
                    "side": direction.name(),
                    "qty": instrument.qty_text(qty),
                    "price": instrument.price_text(price),
                    "pnl": format_units(pnl, future.settle_decimals),
                }));
            }
        }

        if expiry {
            // Close every position at `price`, no fee, no event: its margin comes back.
            for key in &keys {
                let position = self.positions.remove(key).expect("listed");
                let mut pnl = 0;
                let mut lots = 0;
                for direction in [Direction::Long, Direction::Short] {
                    let holding = position.holding(direction);
                    let entries: Vec<(i128, i128)> = holding.entries().copied().collect();
                    pnl += profit(&instrument, &future, direction, &entries, price);
                    lots += instrument.lots(holding.total());
                }
                assert_eq!(pnl, 0, "model: marked to the price it closes at");
                let balance = self.balance_mut(&key.0, &future.settle);
                balance.held -= lots * future.margin;
                balance.available += lots * future.margin;
            }
            assert!(self.books[symbol].orders().next().is_none(), "model: all expired");
            self.books.remove(symbol);
            self.instruments.remove(symbol);
            self.expired_symbols.insert(symbol.to_string());
        }
        Ok(())
    }

    fn liquidate(&mut self, account: &str, symbol: &str, events: &mut Vec<Value>) -> Outcome {
        let instrument = self.future_instrument(symbol)?;
        let orders = self.orders_by_acceptance(symbol, |order| order.account == account);
        let has_position = self.positions.contains_key(&(account.to_string(), symbol.to_string()));
        if orders.is_empty() && !has_position {
            return Err("unknown_order");
        }
        events.push(json!({ "ev": "accepted", "seq": self.seq, "account": account }));
        for order in orders {
            self.remove_open(&order.account, &order.id).expect("listed as open");
            self.finish(&instrument, &order, "canceled", events);
        }
        for (direction, side) in [(Direction::Long, Side::Sell), (Direction::Short, Side::Buy)] {
            let qty = self.holding(account, symbol, direction).total();
            if qty == 0 {
                continue;
            }
            let mut order = Order {
                account: account.to_string(),
                id: format!("liq-{}-{}", self.seq, direction.name()),
                symbol: symbol.to_string(),
                side,
                price: 0,
                remaining: qty,
                filled: 0,
                post_only: false,
                stp: SelfTrade::CancelTaker,
                arrival: 0,
                offset: Offset::Close,
                gfd: false,
                liquidation: true,
                accepted: self.seq,
            };
            // A market order; with the opposite side empty it expires at once.
            match self.best_price(symbol, side.opposite()) {
                None => self.finish(&instrument, &order, "expired", events),
                Some(best) => {
                    order.price = instrument.protection_price(side, best);
                    self.run_new_order(&instrument, order, TimeInForce::Ioc, events);
                }
            }
        }
        Ok(())
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
        // With both `qty` and `quote_qty`, `qty` is checked first, as usual.
        let qty = match &command.qty {
            Some(qty) => Some(instrument.quantity(qty).ok_or("invalid_qty")?),
            None => None,
        };
        // A valid offset on a spot order is ignored.
        let offset = match instrument.future() {
            None => Offset::Open,
            Some(future) => {
                if command.offset == Offset::CloseToday && !future.close_today {
                    return Err("invalid_offset");
                }
                command.offset
            }
        };
        if let Some(quote_qty) = command.quote_qty.clone() {
            // orders.md: only a spot market buy, without `qty` and not `fok`, may name
            // what it spends; anywhere else `quote_qty` is `invalid_order` whatever its
            // value.
            let allowed = qty.is_none()
                && command.side == Side::Buy
                && limit.is_none()
                && instrument.future().is_none()
                && command.tif != TimeInForce::Fok;
            if !allowed {
                return Err("invalid_order");
            }
            return self.submit_spending_buy(&instrument, command, &quote_qty, events);
        }
        let qty = qty.expect("model: an order names qty or quote_qty (else malformed)");
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
                    TimeInForce::Gtc | TimeInForce::Gfd | TimeInForce::Ioc => TimeInForce::Ioc,
                };
                (instrument.protection_price(command.side, best), tif)
            }
        };
        // gfd rests like gtc; only a futures symbol has a settle to expire it at.
        let gfd = tif == TimeInForce::Gfd && instrument.future().is_some();
        if offset != Offset::Open
            && qty > self.closable(&command.account, &instrument, command.side, offset)
        {
            return Err("insufficient_position");
        }
        let (asset, hold) = instrument
            .hold(command.side, offset, price, qty)
            // A close order holds nothing and is never `insufficient_funds`.
            .filter(|(asset, hold)| {
                offset != Offset::Open || *hold <= self.available(&command.account, asset)
            })
            .ok_or("insufficient_funds")?;
        self.take_hold(&command.account, &asset, hold);
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
            offset,
            gfd,
            liquidation: false,
            accepted: self.seq,
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
                TimeInForce::Gtc | TimeInForce::Gfd => self.rest(order),
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
                TimeInForce::Gtc | TimeInForce::Gfd => self.rest(order),
                TimeInForce::Ioc | TimeInForce::Fok => {
                    self.finish(instrument, &order, "expired", events)
                }
            },
        }
    }

    /// A spot market buy that names what it spends (`quote_qty`, orders.md "Market buys
    /// by amount to spend"), already checked up to `invalid_order`: the value check
    /// (`invalid_qty`), `no_liquidity`, `insufficient_funds`; then it holds `quote_qty`
    /// and buys, maker by maker, the largest lot multiple that what is left pays for.
    fn submit_spending_buy(
        &mut self,
        instrument: &Instrument,
        command: OrderCommand,
        quote_qty: &Decimal,
        events: &mut Vec<Value>,
    ) -> Outcome {
        let Terms::Spot(spot) = &instrument.terms else {
            unreachable!("model: quote_qty on a futures contract is invalid_order")
        };
        if !quote_qty.is_positive() {
            return Err("invalid_qty");
        }
        // `None`: a positive amount beyond every range, more than any account has.
        let spend = match quote_qty.units(spot.quote_decimals) {
            Units::TooPrecise => return Err("invalid_qty"),
            Units::Exact(units) if units <= UNITS_MAX => Some(units),
            Units::Exact(_) | Units::TooLarge => None,
        };
        let best = self.best_price(&instrument.symbol, Side::Sell).ok_or("no_liquidity")?;
        let protection = instrument.protection_price(Side::Buy, best);
        let spend = spend
            .filter(|&spend| spend <= self.available(&command.account, &spot.quote))
            .ok_or("insufficient_funds")?;
        self.take_hold(&command.account, &spot.quote, spend);
        events.push(self.accepted(Some((&command.account, &command.id))));
        let mut buyer = Order {
            account: command.account,
            id: command.id,
            symbol: command.symbol,
            side: Side::Buy,
            price: protection,
            remaining: 0,
            filled: 0,
            post_only: false,
            stp: command.stp,
            arrival: 0,
            offset: Offset::Open,
            gfd: false,
            liquidation: false,
            accepted: self.seq,
        };
        let mut left = spend;
        let reason = loop {
            if left == 0 {
                break "filled";
            }
            let Some(maker) = self.books[&instrument.symbol].asks.first().cloned() else {
                break "expired";
            };
            if maker.price > protection {
                break "expired";
            }
            // Every lot multiple's notional is a whole number of quote units (the
            // decimals rule), so the largest affordable lot multiple is this many lots.
            let lot_cost =
                instrument.notional(spot, maker.price, instrument.lot).expect("a lot's notional");
            let affordable_lots = left / lot_cost;
            if affordable_lots == 0 {
                break if buyer.filled > 0 { "filled" } else { "expired" };
            }
            if maker.account == buyer.account && buyer.stp != SelfTrade::Allow {
                if buyer.stp == SelfTrade::CancelTaker {
                    break "stp";
                }
                self.remove_open(&maker.account, &maker.id);
                self.finish(instrument, &maker, "stp", events);
                if buyer.stp == SelfTrade::CancelBoth {
                    break "stp";
                }
                continue;
            }
            let qty = maker.remaining.min(affordable_lots * instrument.lot);
            let paid = instrument.notional(spot, maker.price, qty).expect("within the hold");
            // Each fill costs `p * q`, taken from the hold: as a buy limited at the fill's
            // own price, which gives nothing back.
            let paying = Order { price: maker.price, ..buyer.clone() };
            self.trade(instrument, &paying, &maker, qty, events);
            left -= paid;
            buyer.filled += qty;
        };
        self.take_hold(&buyer.account, &spot.quote, -left);
        events.push(json!({
            "ev": "done",
            "seq": self.seq,
            "account": buyer.account,
            "id": buyer.id,
            "reason": reason,
            "filled": instrument.qty_text(buyer.filled),
        }));
        Ok(())
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
            self.trade(instrument, taker, &maker, qty, events);
            taker.remaining -= qty;
            taker.filled += qty;
        }
    }

    /// One trade of `taker` with `maker` (the best resting order) for `qty` at the
    /// maker's price: the money, the maker's fills, the `trade` event and, if it
    /// filled, the maker's `done`.
    fn trade(
        &mut self,
        instrument: &Instrument,
        taker: &Order,
        maker: &Order,
        qty: i128,
        events: &mut Vec<Value>,
    ) {
        let report = self.fill(instrument, taker, maker, qty);
        let maker_after = {
            let resting =
                self.open_mut(&maker.account, &maker.id).expect("the maker is on the book");
            resting.remaining -= qty;
            resting.filled += qty;
            resting.clone()
        };
        let mut trade = json!({
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
            "maker_fee": report.maker_fee,
            "taker_fee": report.taker_fee,
        });
        if let Some((maker_pnl, taker_pnl)) = report.pnl {
            trade["maker_pnl"] = json!(maker_pnl);
            trade["taker_pnl"] = json!(taker_pnl);
        }
        events.push(trade);
        if maker_after.remaining == 0 {
            self.remove_open(&maker.account, &maker.id);
            self.finish(instrument, &maker_after, "filled", events);
        }
    }

    /// Moves the money (and on a futures contract the positions) of one fill at the
    /// maker's price.
    fn fill(
        &mut self,
        instrument: &Instrument,
        taker: &Order,
        maker: &Order,
        qty: i128,
    ) -> FillReport {
        match &instrument.terms {
            Terms::Spot(spot) => {
                let (maker_fee, taker_fee) = self.settle_spot(instrument, spot, taker, maker, qty);
                FillReport { maker_fee, taker_fee, pnl: None }
            }
            Terms::Future(future) => {
                // The maker's side first (docs/futures.md).
                let (maker_fee, maker_pnl) =
                    self.fill_future(instrument, future, maker, maker.price, qty, future.maker_fee);
                let (taker_fee, taker_pnl) =
                    self.fill_future(instrument, future, taker, maker.price, qty, future.taker_fee);
                let text = |units: i128| format_units(units, future.settle_decimals);
                FillReport {
                    maker_fee: text(maker_fee),
                    taker_fee: text(taker_fee),
                    pnl: Some((text(maker_pnl), text(taker_pnl))),
                }
            }
        }
    }

    /// Moves the money of one spot fill; returns the (maker, taker) fees as text in the
    /// asset each receives.
    fn settle_spot(
        &mut self,
        instrument: &Instrument,
        spot: &SpotTerms,
        taker: &Order,
        maker: &Order,
        qty: i128,
    ) -> (String, String) {
        let (buyer, seller) = match taker.side {
            Side::Buy => (taker, maker),
            Side::Sell => (maker, taker),
        };
        let (buyer_fee_bps, seller_fee_bps) = match taker.side {
            Side::Buy => (spot.taker_fee_bps, spot.maker_fee_bps),
            Side::Sell => (spot.maker_fee_bps, spot.taker_fee_bps),
        };
        let paid = instrument
            .notional(spot, maker.price, qty)
            .expect("a fill's notional is within what the buyer held");
        let released =
            instrument.notional(spot, buyer.price, qty).expect("the buyer held this much");
        let buyer_fee = fee(qty, buyer_fee_bps);
        let seller_fee = fee(paid, seller_fee_bps);

        let buyer_quote = self.balance_mut(&buyer.account, &spot.quote);
        buyer_quote.held -= released;
        buyer_quote.available += released - paid;
        self.balance_mut(&buyer.account, &spot.base).available += qty - buyer_fee;
        self.balance_mut(&seller.account, &spot.base).held -= qty;
        self.balance_mut(&seller.account, &spot.quote).available += paid - seller_fee;
        *self.fees.entry(spot.base.clone()).or_default() += buyer_fee;
        *self.fees.entry(spot.quote.clone()).or_default() += seller_fee;

        let buyer_fee_text = format_units(buyer_fee, instrument.qty_scale);
        let seller_fee_text = format_units(seller_fee, spot.quote_decimals);
        match taker.side {
            Side::Buy => (seller_fee_text, buyer_fee_text),
            Side::Sell => (buyer_fee_text, seller_fee_text),
        }
    }

    /// Releases what a finished order (not on the book) still holds and reports it. (A
    /// close order's reservation ends with it: reservations are read off the book.)
    fn finish(
        &mut self,
        instrument: &Instrument,
        order: &Order,
        reason: &str,
        events: &mut Vec<Value>,
    ) {
        let (asset, hold) = instrument
            .hold(order.side, order.offset, order.price, order.remaining)
            .expect("an accepted order's hold fits");
        self.take_hold(&order.account, &asset, -hold);
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
        assert!(!order.liquidation, "model: a liquidation never rests");
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
            .flat_map(|book| book.orders())
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
        let (asset, old_hold) = instrument
            .hold(order.side, order.offset, order.price, order.remaining)
            .expect("an open order's hold fits");
        let increase = if order.closes() {
            // A close order's increase of quantity must be closable; it holds no money.
            if new_qty - order.remaining
                > self.closable(account, &instrument, order.side, order.offset)
            {
                return Err("insufficient_position");
            }
            0
        } else {
            instrument
                .hold(order.side, order.offset, new_price, new_qty)
                .map(|(_, new_hold)| new_hold - old_hold)
                // Only a raised hold needs covering: an amend that does not raise one
                // works even while `available` is below zero.
                .filter(|increase| *increase <= 0 || *increase <= self.available(account, &asset))
                .ok_or("insufficient_funds")?
        };

        events.push(self.accepted(Some((account, id))));
        events.push(json!({
            "ev": "amended",
            "seq": self.seq,
            "account": account,
            "id": id,
            "price": instrument.price_text(new_price),
            "qty": instrument.qty_text(new_qty),
        }));
        self.take_hold(account, &asset, increase);
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

    /// Holds equal the open orders' holds plus the positions' margin, money (positions'
    /// value included) is conserved, reservations stay within what they may close,
    /// books are sorted and uncrossed. A failure here is a bug in the model, not in the
    /// engine.
    fn assert_invariants(&self) {
        let mut expected_held: BTreeMap<(String, String), i128> = BTreeMap::new();
        // Per asset: the short sides' value minus the long sides' value.
        let mut positions_value: BTreeMap<String, i128> = BTreeMap::new();
        for (symbol, book) in &self.books {
            let instrument = &self.instruments[symbol];
            for order in book.orders() {
                assert!(order.remaining > 0, "model: empty order on the book");
                assert!(!order.liquidation, "model: a liquidation order rests");
                assert!(
                    instrument.future().is_some() || (order.offset == Offset::Open && !order.gfd),
                    "model: a spot order with futures attributes"
                );
                let (asset, hold) = instrument
                    .hold(order.side, order.offset, order.price, order.remaining)
                    .expect("model: hold fits");
                *expected_held.entry((order.account.clone(), asset)).or_default() += hold;
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
        for ((account, symbol), position) in &self.positions {
            assert!(!position.is_empty(), "model: empty position kept");
            let instrument = &self.instruments[symbol];
            let future = instrument.future().expect("model: positions are in futures");
            let mut lots = 0;
            for direction in [Direction::Long, Direction::Short] {
                let holding = position.holding(direction);
                assert!(holding.history.len() <= 1, "model: history is one entry");
                for &(price, qty) in holding.entries() {
                    assert!(price > 0 && qty > 0, "model: empty or unpriced entry");
                    let value = instrument.value(future, price, qty);
                    let sign = match direction {
                        Direction::Long => -1,
                        Direction::Short => 1,
                    };
                    *positions_value.entry(future.settle.clone()).or_default() += sign * value;
                }
                lots += instrument.lots(holding.total());
                // Reservations: the account's open close orders on each quantity.
                let book = &self.books[symbol];
                let reserved = |offsets: &[Offset]| -> i128 {
                    book.orders()
                        .filter(|order| {
                            &order.account == account
                                && offsets.contains(&order.offset)
                                && order.closes()
                                && Direction::closed_by(order.side) == direction
                        })
                        .map(|order| order.remaining)
                        .sum()
                };
                if future.close_today {
                    assert!(reserved(&[Offset::Close]) <= holding.history_qty());
                    assert!(reserved(&[Offset::CloseToday]) <= holding.today_qty());
                } else {
                    assert_eq!(reserved(&[Offset::CloseToday]), 0, "model: close_today accepted");
                    assert!(reserved(&[Offset::Close]) <= holding.total());
                }
            }
            *expected_held.entry((account.clone(), future.settle.clone())).or_default() +=
                lots * future.margin;
        }
        // A close order without any position behind it.
        for (symbol, book) in &self.books {
            for order in book.orders().filter(|order| order.closes()) {
                assert!(
                    self.positions.contains_key(&(order.account.clone(), symbol.clone())),
                    "model: close order {} of {} reserves nothing",
                    order.id,
                    order.account
                );
            }
        }
        for (key, balance) in &self.balances {
            assert!(
                balance.available >= 0 || self.settle_assets.contains(&key.1),
                "model: negative available {key:?}"
            );
            assert!(balance.held >= 0, "model: negative held {key:?}");
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
            let value = positions_value.get(asset).copied().unwrap_or(0);
            let net = self.net_deposits.get(asset).copied().unwrap_or(0);
            assert_eq!(in_accounts + fees + value, net, "model: conservation of {asset}");
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
    let lot = exact(lot.units(base_decimals))?;
    // A bound with more places than the base has is not a multiple of the lot.
    let min_qty = exact(min_qty.units(base_decimals))?;
    let max_qty = exact(max_qty.units(base_decimals))?;
    if min_qty % lot != 0 || max_qty % lot != 0 || min_qty > max_qty {
        return None;
    }
    Some(Instrument {
        symbol,
        price_scale,
        tick,
        qty_scale: base_decimals,
        lot,
        min_qty,
        max_qty,
        market_band_bps,
        terms: Terms::Spot(SpotTerms { base, quote, quote_decimals, maker_fee_bps, taker_fee_bps }),
    })
}

fn exact(units: Units) -> Option<i128> {
    match units {
        Units::Exact(value) => Some(value),
        Units::TooPrecise | Units::TooLarge => None,
    }
}

/// A futures contract, or `None` when it is `invalid_instrument`.
fn build_future(definition: FutureCommand, settle_decimals: u32) -> Option<Instrument> {
    let FutureCommand {
        symbol,
        settle,
        tick,
        lot,
        min_qty,
        max_qty,
        multiplier,
        margin,
        maker_fee,
        taker_fee,
        market_band_bps,
        close_today,
    } = definition;
    // The replay format's instrument rules: tick, lot, bounds, band.
    if ![&tick, &lot, &min_qty, &max_qty].iter().all(|d| d.is_positive()) {
        return None;
    }
    if !(0..=BPS_PER_ONE).contains(&market_band_bps) {
        return None;
    }
    // Every value `price * qty * multiplier` exact in the settle asset.
    if tick.places() + lot.places() + multiplier.places() > settle_decimals {
        return None;
    }
    if !multiplier.is_positive() {
        return None;
    }
    // Margin and fees fit the settle asset's decimals (and, outside the spec otherwise,
    // its 64-bit range).
    let margin = in_range(margin.units(settle_decimals))?;
    let maker_fee = in_range(maker_fee.units(settle_decimals))?;
    let taker_fee = in_range(taker_fee.units(settle_decimals))?;
    if margin <= 0 || maker_fee < 0 || taker_fee < 0 || maker_fee > taker_fee {
        return None;
    }
    let price_scale = tick.places();
    let tick = in_range(tick.units(price_scale))?;
    // Quantities in units of the lot's decimals: a bound with more places is not a
    // multiple of the lot.
    let qty_scale = lot.places();
    let lot = exact(lot.units(qty_scale))?;
    let min_qty = exact(min_qty.units(qty_scale))?;
    let max_qty = exact(max_qty.units(qty_scale))?;
    if min_qty % lot != 0 || max_qty % lot != 0 || min_qty > max_qty {
        return None;
    }
    let multiplier_scale = multiplier.places();
    let multiplier = in_range(multiplier.units(multiplier_scale))?;
    Some(Instrument {
        symbol,
        price_scale,
        tick,
        qty_scale,
        lot,
        min_qty,
        max_qty,
        market_band_bps,
        terms: Terms::Future(FutureTerms {
            settle,
            settle_decimals,
            multiplier,
            multiplier_scale,
            margin,
            maker_fee,
            taker_fee,
            close_today,
        }),
    })
}
