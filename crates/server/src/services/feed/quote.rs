//! Quotes as the DIFF protocol names them (`quotes.<symbol>` of its tree): each
//! instrument's five best levels a side, last price, the trading day's open, high,
//! low, volume and turnover, open interest and settlement prices. The hub keeps one
//! `Quotes` from every trade and settlement it sees, reads the books and the contracts'
//! figures from the engine, and sends each `quote` channel the fields that changed
//! (rendered once, however many sessions follow it). Everything here is derived from
//! the released events since the server started; nothing is business state.
//!
//! A trading day ends at a settlement: the contract's `settled` events (one command's,
//! one settlement), or a change of the engine's settlement price that no event showed
//! (a settlement with no position held). The day's figures then start again: the last
//! price becomes the previous close, and the open interest at the settlement (the long
//! sides its `settled` events mark, 0 when none) the previous one. Before the first
//! settlement the server sees, the day is every trade since it started and the
//! previous open interest is 0 (a venue starts with none). Values not known yet are
//! `"-"`, which DIFF clients read as not-a-number. Volumes are in lots; prices and
//! amounts are JSON numbers (DIFF's own form).
//!
//! A tick (`tick_fields`) shows a trade with the day's figures after it, by the same
//! rules as the quote: the day's high, low, volume, turnover and average price.

use std::collections::HashMap;

use bourse_core::ids::InstrumentId;
use bourse_core::{PositionSide, Seq, TimestampNs};
use bourse_history::civil::{date_text, day_of, NS_PER_DAY};
use serde_json::{Map, Value};

use super::market::{turnover, DayFigures, Tick};
use crate::reference::{InstrumentInfo, Terms};
use crate::render::Level;

/// Levels a side a quote shows.
pub const QUOTE_LEVELS: usize = 5;
/// China's exchanges and their clients show times in Beijing time (UTC+8).
pub const DIFF_UTC_OFFSET_NS: u64 = 8 * 3_600 * 1_000_000_000;

/// One instrument's figures, in engine units.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct QuoteState {
    pub last: Option<i64>,
    pub open: Option<i64>,
    pub high: Option<i64>,
    pub low: Option<i64>,
    /// Quantity units traded today.
    pub volume: i128,
    /// Sum of price units x quantity units traded today.
    pub turnover: i128,
    pub pre_close: Option<i64>,
    pub open_interest: Option<i64>,
    /// The open interest at the last settlement (0 before the first).
    pub pre_open_interest: i64,
    /// The engine's latest settlement price: the previous day's settlement.
    pub pre_settlement: Option<i64>,
    pub bids: Vec<Level>,
    pub asks: Vec<Level>,
    /// The engine time of the latest change.
    pub updated_ns: TimestampNs,
    /// The settle command (its `seq`) whose `settled` events were seen last: its first
    /// event starts the day, each long side it marks counts in `pre_open_interest`.
    settling: Option<Seq>,
    /// Whether the engine's contract figures were read before (a settlement price
    /// that changes after that is a settlement).
    contract_seen: bool,
}

/// What the engine says of a futures contract when a quote is refreshed.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ContractFigures {
    pub open_interest: i64,
    pub settlement_price: Option<i64>,
}

/// Every instrument's quote, and what each `quote` channel was last sent.
#[derive(Default)]
pub struct Quotes {
    states: HashMap<InstrumentId, QuoteState>,
    sent: HashMap<InstrumentId, Map<String, Value>>,
}

impl Quotes {
    pub fn on_trade(&mut self, instrument: InstrumentId, price: i64, qty: i64, ts_ns: TimestampNs) {
        let state = self.states.entry(instrument).or_default();
        state.last = Some(price);
        state.open.get_or_insert(price);
        state.high = Some(state.high.map_or(price, |high| high.max(price)));
        state.low = Some(state.low.map_or(price, |low| low.min(price)));
        state.volume += i128::from(qty);
        state.turnover += i128::from(price) * i128::from(qty);
        state.updated_ns = state.updated_ns.max(ts_ns);
    }

    /// A `settled` event of the settle command `seq`: the mark of one side of one
    /// account's position (`qty`, the side's whole quantity) at `price`. The command's
    /// first starts a new trading day; its long sides add up to the open interest at
    /// the settlement.
    pub fn on_settled(
        &mut self,
        instrument: InstrumentId,
        seq: Seq,
        price: i64,
        side: PositionSide,
        qty: i64,
    ) {
        let state = self.states.entry(instrument).or_default();
        if state.settling != Some(seq) {
            state.settling = Some(seq);
            state.start_day(0);
            state.pre_settlement = Some(price);
        }
        if side == PositionSide::Long {
            state.pre_open_interest = state.pre_open_interest.saturating_add(qty);
        }
    }

    /// The contract's figures as the engine has them now. A settlement price that
    /// changed since the last read, with no `settled` event for it, is a settlement of
    /// a contract nobody held: a new day, with no open interest at its start. Whether
    /// a day started.
    pub fn on_contract(&mut self, instrument: InstrumentId, figures: ContractFigures) -> bool {
        let state = self.states.entry(instrument).or_default();
        let settled = state.contract_seen && state.pre_settlement != figures.settlement_price;
        if settled {
            state.start_day(0);
        }
        state.contract_seen = true;
        state.pre_settlement = figures.settlement_price;
        state.open_interest = Some(figures.open_interest);
        settled
    }

    /// The day's figures of `instrument` (after its latest trade); `None` before the
    /// day's first trade.
    pub fn day(&self, instrument: InstrumentId) -> Option<DayFigures> {
        let state = self.states.get(&instrument)?;
        Some(DayFigures {
            high: state.high?,
            low: state.low?,
            volume: state.volume,
            turnover: state.turnover,
        })
    }

    /// The open interest at the contract's last settlement (0 before the first).
    pub fn pre_open_interest(&self, instrument: InstrumentId) -> i64 {
        self.states.get(&instrument).map_or(0, |state| state.pre_open_interest)
    }

    /// The book's best levels; whether they changed.
    pub fn on_book(
        &mut self,
        instrument: InstrumentId,
        bids: &[Level],
        asks: &[Level],
        now_ns: TimestampNs,
    ) -> bool {
        let state = self.states.entry(instrument).or_default();
        let bids = &bids[..bids.len().min(QUOTE_LEVELS)];
        let asks = &asks[..asks.len().min(QUOTE_LEVELS)];
        if state.bids == bids && state.asks == asks {
            return false;
        }
        state.bids = bids.to_vec();
        state.asks = asks.to_vec();
        state.updated_ns = state.updated_ns.max(now_ns);
        true
    }

    /// Every field of the quote of `instrument`, static ones included (a new
    /// follower's first message).
    pub fn full_of(&self, instrument: InstrumentId, info: &InstrumentInfo) -> Map<String, Value> {
        let mut fields = static_fields(info);
        let state = self.states.get(&instrument).cloned().unwrap_or_default();
        fields.extend(dynamic_fields(info, &state));
        fields
    }

    /// The fields that changed since the channel's last message, if any; remembered as
    /// sent.
    pub fn changes(
        &mut self,
        instrument: InstrumentId,
        info: &InstrumentInfo,
    ) -> Option<Map<String, Value>> {
        let state = self.states.get(&instrument).cloned().unwrap_or_default();
        let now = dynamic_fields(info, &state);
        let sent = self.sent.entry(instrument).or_default();
        let changed: Map<String, Value> = now
            .iter()
            .filter(|(name, value)| sent.get(*name) != Some(*value))
            .map(|(name, value)| (name.clone(), value.clone()))
            .collect();
        *sent = now;
        if changed.is_empty() {
            None
        } else {
            Some(changed)
        }
    }
}

impl QuoteState {
    /// A settlement: a new trading day, with `open_interest` at its start.
    fn start_day(&mut self, open_interest: i64) {
        self.pre_close = self.last.or(self.pre_close);
        self.pre_open_interest = open_interest;
        self.open = None;
        self.high = None;
        self.low = None;
        self.volume = 0;
        self.turnover = 0;
    }
}

/// `SHFE.cu2501` as DIFF splits it: (`SHFE`, `cu2501`), by the futures symbol rule
/// (`bourse_protocol::futures_symbol`); a spot symbol has no exchange.
pub fn exchange_and_code(symbol: &str) -> (&str, &str) {
    match bourse_protocol::futures_symbol::split(symbol) {
        Ok(split) => (split.exchange_id, split.instrument_id),
        Err(_) => ("", symbol),
    }
}

/// The instrument's contract multiplier (1 for spot).
pub fn multiplier(info: &InstrumentInfo) -> f64 {
    match &info.terms {
        Terms::Future { multiplier, .. } => multiplier.parse().unwrap_or(1.0),
        Terms::Spot { .. } => 1.0,
    }
}

/// A price in units as DIFF's number.
pub fn price_number(info: &InstrumentInfo, units: i64) -> Value {
    number(info.price(units))
}

/// A quantity in units as DIFF's volume: whole lots.
pub fn lots(info: &InstrumentInfo, units: i128) -> i64 {
    let lot = i128::from(info.lot.max(1));
    i64::try_from(units / lot).unwrap_or(i64::MAX)
}

/// A decimal string as a JSON number (the nearest double); `"-"` when it is none.
pub fn number(text: String) -> Value {
    text.parse::<f64>()
        .ok()
        .and_then(serde_json::Number::from_f64)
        .map_or_else(|| Value::String("-".into()), Value::Number)
}

fn unknown() -> Value {
    Value::String("-".into())
}

/// `YYYY-MM-DD HH:MM:SS.ffffff` in Beijing time, as DIFF shows times.
pub fn diff_datetime(time: TimestampNs) -> String {
    let local = time.0 + DIFF_UTC_OFFSET_NS;
    let in_day = local % NS_PER_DAY;
    let seconds = in_day / 1_000_000_000;
    format!(
        "{} {:02}:{:02}:{:02}.{:06}",
        date_text(day_of(local)),
        seconds / 3_600,
        seconds / 60 % 60,
        seconds % 60,
        in_day % 1_000_000_000 / 1_000
    )
}

fn static_fields(info: &InstrumentInfo) -> Map<String, Value> {
    let (exchange, _) = exchange_and_code(&info.symbol);
    let mut fields = Map::new();
    fields.insert("instrument_id".into(), Value::String(info.symbol.clone()));
    fields.insert("exchange_id".into(), Value::String(exchange.to_string()));
    let class = if info.is_future() { "FUTURE" } else { "SPOT" };
    fields.insert("ins_class".into(), Value::String(class.into()));
    fields.insert("price_tick".into(), price_number(info, info.tick));
    fields.insert("price_decs".into(), Value::from(info.price_decimals));
    fields.insert(
        "volume_multiple".into(),
        serde_json::Number::from_f64(multiplier(info)).map_or_else(unknown, Value::Number),
    );
    fields
}

fn dynamic_fields(info: &InstrumentInfo, state: &QuoteState) -> Map<String, Value> {
    let price = |units: Option<i64>| units.map_or_else(unknown, |units| price_number(info, units));
    let mut fields = Map::new();
    fields.insert(
        "datetime".into(),
        if state.updated_ns == TimestampNs::ZERO {
            Value::String(String::new())
        } else {
            Value::String(diff_datetime(state.updated_ns))
        },
    );
    level_fields(info, &state.bids, &state.asks, &mut fields);
    fields.insert("last_price".into(), price(state.last));
    fields.insert("open".into(), price(state.open));
    // The day's close is known at its settlement; until then it is the last price.
    fields.insert("close".into(), price(state.last));
    let day = DayFigures {
        high: state.high.unwrap_or(0),
        low: state.low.unwrap_or(0),
        volume: state.volume,
        turnover: state.turnover,
    };
    day_fields(info, state.high.and(state.low).map(|_| day), &mut fields);
    fields.insert("open_interest".into(), interest(info, state.open_interest.unwrap_or(0)));
    fields.insert("pre_open_interest".into(), interest(info, state.pre_open_interest));
    fields.insert("pre_settlement".into(), price(state.pre_settlement));
    fields.insert("pre_close".into(), price(state.pre_close));
    // Today's settlement is made at the day's end (and then a new day starts).
    fields.insert("settlement".into(), unknown());
    // Bourse sets no daily price limits.
    fields.insert("upper_limit".into(), unknown());
    fields.insert("lower_limit".into(), unknown());
    fields
}

/// A tick as DIFF's `ticks.<symbol>.data.<id>` shows it: the trade's time (nanoseconds
/// since the epoch, as tqsdk reads a tick's) and price, the day's figures after it,
/// the book's five best levels a side and the contract's open interest (0 on spot).
pub fn tick_fields(info: &InstrumentInfo, tick: &Tick) -> Map<String, Value> {
    let mut fields = Map::new();
    fields.insert("datetime".into(), Value::from(tick.ts_ns.0));
    fields.insert("last_price".into(), price_number(info, tick.price));
    day_fields(info, Some(tick.day), &mut fields);
    level_fields(info, &tick.book.bids, &tick.book.asks, &mut fields);
    fields.insert("open_interest".into(), interest(info, tick.open_interest));
    fields
}

/// `bid_price1..5`, `bid_volume1..5`, `ask_...`: not-a-number and 0 beyond the book.
fn level_fields(
    info: &InstrumentInfo,
    bids: &[Level],
    asks: &[Level],
    fields: &mut Map<String, Value>,
) {
    for (side, levels) in [("bid", bids), ("ask", asks)] {
        for position in 0..QUOTE_LEVELS {
            let level = levels.get(position);
            fields.insert(
                format!("{side}_price{}", position + 1),
                level.map_or_else(unknown, |level| price_number(info, level.0)),
            );
            fields.insert(
                format!("{side}_volume{}", position + 1),
                Value::from(level.map_or(0, |level| lots(info, i128::from(level.1)))),
            );
        }
    }
}

/// The day's `highest`, `lowest`, `volume` (lots), `amount` (the turnover in the quote
/// or settle asset, with the contract multiplier: `market::turnover`) and `average`
/// (the day's volume-weighted price: amount / volume / multiplier); `None` before the
/// day's first trade.
fn day_fields(info: &InstrumentInfo, day: Option<DayFigures>, fields: &mut Map<String, Value>) {
    let price = |units: Option<i64>| units.map_or_else(unknown, |units| price_number(info, units));
    fields.insert("highest".into(), price(day.map(|day| day.high)));
    fields.insert("lowest".into(), price(day.map(|day| day.low)));
    let (volume, turnover_units) = day.map_or((0, 0), |day| (day.volume, day.turnover));
    fields.insert("volume".into(), Value::from(lots(info, volume)));
    fields.insert("amount".into(), number(turnover(info, turnover_units)));
    let average = if volume > 0 {
        let average =
            turnover_units as f64 / volume as f64 / 10f64.powi(info.price_decimals as i32);
        serde_json::Number::from_f64(average).map_or_else(unknown, Value::Number)
    } else {
        unknown()
    };
    fields.insert("average".into(), average);
}

/// An open interest in quantity units as DIFF's: lots.
fn interest(info: &InstrumentInfo, units: i64) -> Value {
    Value::from(lots(info, i128::from(units)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn contract() -> InstrumentInfo {
        InstrumentInfo {
            symbol: "SHFE.cu2501".into(),
            price_decimals: 0,
            qty_decimals: 0,
            tick: 10,
            lot: 1,
            min_qty: 1,
            max_qty: 100,
            market_band_bps: 500,
            terms: Terms::Future {
                settle: "CNY".into(),
                settle_decimals: 2,
                multiplier: "5".into(),
                maker_fee: "1.5".into(),
                taker_fee: "3".into(),
                close_today: true,
            },
        }
    }

    #[test]
    fn a_trading_day_counts_its_trades_until_a_settlement_starts_the_next() {
        let info = contract();
        let cu = InstrumentId(0);
        let mut quotes = Quotes::default();
        quotes
            .on_contract(cu, ContractFigures { open_interest: 0, settlement_price: Some(75_000) });
        quotes.on_trade(cu, 75_010, 2, TimestampNs(1));
        quotes.on_trade(cu, 74_990, 1, TimestampNs(2));
        assert!(!quotes
            .on_contract(cu, ContractFigures { open_interest: 3, settlement_price: Some(75_000) }));
        let full = quotes.full_of(cu, &info);
        assert_eq!(full["instrument_id"], "SHFE.cu2501");
        assert_eq!(full["exchange_id"], "SHFE");
        assert_eq!(full["price_tick"], 10.0);
        assert_eq!(full["volume_multiple"], 5.0);
        assert_eq!(
            (&full["open"], &full["highest"], &full["lowest"], &full["last_price"]),
            (
                &Value::from(75_010.0),
                &Value::from(75_010.0),
                &Value::from(74_990.0),
                &Value::from(74_990.0)
            )
        );
        assert_eq!(full["volume"], 3);
        // Turnover: (75010 x 2 + 74990) x 5.
        assert_eq!(full["amount"], 1_125_050.0);
        assert_eq!(full["open_interest"], 3);
        assert_eq!(full["pre_settlement"], 75_000.0);
        assert_eq!(full["upper_limit"], "-");

        // The first changes are everything; then only what moved.
        assert!(quotes.changes(cu, &info).is_some_and(|changed| changed.len() > 20));
        assert_eq!(quotes.changes(cu, &info), None);
        quotes.on_trade(cu, 75_000, 1, TimestampNs(3));
        let changed = quotes.changes(cu, &info).unwrap();
        assert_eq!(changed["last_price"], 75_000.0);
        assert_eq!(changed["volume"], 4);
        assert!(!changed.contains_key("open") && !changed.contains_key("pre_settlement"));

        // Before any settlement the previous open interest is none (the venue started
        // with none), whatever trades came before.
        assert_eq!(quotes.full_of(cu, &info)["pre_open_interest"], 0);

        // The day settles at 75,020 (command 40): its events mark two long sides (2 and
        // 1 lots) and one short (3): a new day, the old close and the open interest at
        // the settlement are "pre".
        quotes.on_settled(cu, Seq(40), 75_020, PositionSide::Long, 2);
        quotes.on_settled(cu, Seq(40), 75_020, PositionSide::Short, 3);
        quotes.on_settled(cu, Seq(40), 75_020, PositionSide::Long, 1);
        let full = quotes.full_of(cu, &info);
        assert_eq!((&full["volume"], &full["open"]), (&Value::from(0), &Value::from("-")));
        assert_eq!((&full["amount"], &full["average"]), (&Value::from(0.0), &Value::from("-")));
        assert_eq!(full["pre_close"], 75_000.0);
        assert_eq!(full["pre_settlement"], 75_020.0);
        assert_eq!(full["pre_open_interest"], 3);
        // A trade of the new day, then the engine's figures after it: the same
        // settlement, no second new day.
        quotes.on_trade(cu, 75_030, 1, TimestampNs(4));
        assert!(!quotes
            .on_contract(cu, ContractFigures { open_interest: 3, settlement_price: Some(75_020) }));
        let full = quotes.full_of(cu, &info);
        assert_eq!(
            (&full["volume"], &full["pre_open_interest"]),
            (&Value::from(1), &Value::from(3))
        );
        assert_eq!(quotes.day(cu).map(|day| day.turnover), Some(75_030));

        // Everyone closes; the next settlement (75,040) marks nobody, so no event shows
        // it: the engine's settlement price does, and the open interest at it is 0.
        quotes.on_trade(cu, 75_040, 3, TimestampNs(5));
        assert!(quotes
            .on_contract(cu, ContractFigures { open_interest: 0, settlement_price: Some(75_040) }));
        let full = quotes.full_of(cu, &info);
        assert_eq!(
            (&full["volume"], &full["pre_open_interest"]),
            (&Value::from(0), &Value::from(0))
        );
        assert_eq!(
            (&full["pre_close"], &full["pre_settlement"]),
            (&Value::from(75_040.0), &Value::from(75_040.0))
        );
        assert_eq!(quotes.day(cu), None);
    }

    #[test]
    fn the_first_read_of_a_settled_contract_is_not_a_settlement() {
        // A server that restarts after a settlement: the settlement price is there at
        // the first read, which starts no day and says nothing of the open interest then.
        let info = contract();
        let cu = InstrumentId(0);
        let mut quotes = Quotes::default();
        quotes.on_trade(cu, 75_010, 1, TimestampNs(1));
        assert!(!quotes
            .on_contract(cu, ContractFigures { open_interest: 1, settlement_price: Some(75_000) }));
        let full = quotes.full_of(cu, &info);
        assert_eq!(
            (&full["volume"], &full["open_interest"], &full["pre_open_interest"]),
            (&Value::from(1), &Value::from(1), &Value::from(0))
        );
    }

    #[test]
    fn a_tick_shows_the_trade_with_the_days_figures_by_the_quotes_rules() {
        let info = contract();
        let cu = InstrumentId(0);
        let mut quotes = Quotes::default();
        quotes.on_trade(cu, 75_010, 2, TimestampNs(1_735_662_600_000_000_000));
        quotes.on_trade(cu, 74_990, 1, TimestampNs(1_735_662_601_000_000_000));
        let bids: Vec<Level> = vec![(74_980, 4, 1), (74_970, 2, 1)];
        let asks: Vec<Level> = vec![(75_020, 3, 2)];
        quotes.on_book(cu, &bids, &asks, TimestampNs(1_735_662_601_000_000_000));
        quotes.on_contract(cu, ContractFigures { open_interest: 3, settlement_price: None });
        let day = quotes.day(cu).unwrap();
        let tick = Tick {
            id: 1,
            ts_ns: TimestampNs(1_735_662_601_000_000_000),
            price: 74_990,
            day,
            book: std::sync::Arc::new(super::super::market::BookTop { bids, asks }),
            open_interest: 3,
        };
        let fields = tick_fields(&info, &tick);
        let quote = quotes.full_of(cu, &info);
        assert_eq!(fields["datetime"], 1_735_662_601_000_000_000u64);
        assert_eq!(fields["last_price"], 74_990.0);
        // The day's volume and turnover (with the multiplier: (75,010 x 2 + 74,990) x 5),
        // its average price per unit, high and low: the quote's.
        assert_eq!(fields["volume"], 3);
        assert_eq!(fields["amount"], 1_125_050.0);
        assert_eq!(fields["average"], 225_010.0 / 3.0);
        assert_eq!(
            (&fields["highest"], &fields["lowest"]),
            (&Value::from(75_010.0), &Value::from(74_990.0))
        );
        for field in
            ["volume", "amount", "average", "highest", "lowest", "open_interest", "last_price"]
        {
            assert_eq!(fields[field], quote[field], "{field}");
        }
        for field in (1..=QUOTE_LEVELS).flat_map(|level| {
            ["bid_price", "bid_volume", "ask_price", "ask_volume"]
                .map(|name| format!("{name}{level}"))
        }) {
            assert_eq!(fields[&field], quote[&field], "{field}");
        }
        assert_eq!(
            (&fields["bid_price1"], &fields["bid_volume1"]),
            (&Value::from(74_980.0), &Value::from(4))
        );
        assert_eq!(
            (&fields["ask_price2"], &fields["ask_volume2"]),
            (&Value::from("-"), &Value::from(0))
        );
        assert_eq!(fields["open_interest"], 3);
    }

    #[test]
    fn the_book_shows_five_levels_and_only_a_change_counts() {
        let info = contract();
        let cu = InstrumentId(0);
        let mut quotes = Quotes::default();
        let bids: Vec<Level> = (0..7).map(|step| (74_990 - 10 * step, 2, 1)).collect();
        let asks: Vec<Level> = vec![(75_010, 3, 2)];
        assert!(quotes.on_book(cu, &bids, &asks, TimestampNs(5)));
        assert!(!quotes.on_book(cu, &bids, &asks, TimestampNs(6)));
        let full = quotes.full_of(cu, &info);
        assert_eq!(full["bid_price5"], 74_950.0);
        assert_eq!(full["bid_volume5"], 2);
        assert_eq!(full["ask_price1"], 75_010.0);
        assert_eq!(full["ask_price2"], "-");
        assert_eq!(full["ask_volume2"], 0);
    }

    #[test]
    fn times_are_shown_in_beijing_time_to_the_microsecond() {
        // 2024-12-31 16:30:00.123456789 UTC.
        let ns = 1_735_662_600_123_456_789;
        assert_eq!(diff_datetime(TimestampNs(ns)), "2025-01-01 00:30:00.123456");
    }
}
