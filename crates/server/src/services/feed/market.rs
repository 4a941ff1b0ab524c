//! Public market statistics the feed keeps as trades go by: each instrument's latest
//! trades (at most `RECENT_TRADES_KEPT`), its 24-hour ticker, its latest ticks (DIFF's:
//! each trade with the day's figures after it, at most `TICKS_KEPT`) and the open
//! interest at its last settlement. The hub writes them; the REST handlers of
//! `/v1/trades` and `/v1/ticker` and the DIFF sessions read them. They are derived from
//! the engine's events since the server started (durable trade history and candles are
//! the market-data work's).

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;

use bourse_core::ids::InstrumentId;
use bourse_core::{Decimal, Side, TimestampNs};
use serde_json::{json, Value};

use super::ticker::{Ticker, TickerFigures};
use crate::reference::{decimal, InstrumentInfo, Terms};
use crate::render::Level;

/// Trades kept per instrument for `GET /v1/trades`.
pub const RECENT_TRADES_KEPT: usize = 1_000;
/// Ticks kept per instrument: as many as a DIFF chart shows at most.
pub const TICKS_KEPT: usize = bourse_marketdata::candles::HISTORY_MAX;

/// The trading day's figures after a trade (what a tick shows of the day), in engine
/// units.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DayFigures {
    pub high: i64,
    pub low: i64,
    /// Quantity units traded today.
    pub volume: i128,
    /// Sum of price units x quantity units traded today.
    pub turnover: i128,
}

/// The book's best levels a side (`quote::QUOTE_LEVELS`), read once after a round of
/// trades and shared by the round's ticks.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct BookTop {
    pub bids: Vec<Level>,
    pub asks: Vec<Level>,
}

/// A trade as DIFF's tick, in engine units.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Tick {
    /// The instrument's trades since the server started, numbered from 0: one id per
    /// trade, without gaps.
    pub id: i64,
    pub ts_ns: TimestampNs,
    pub price: i64,
    /// The trading day's figures after this trade.
    pub day: DayFigures,
    /// The book, and the contract's open interest (0 on spot), as the engine had them
    /// once the hub took the trade's round of events (`hub`): after the trade, and
    /// after any command taken with it (or that the engine applied meanwhile).
    pub book: Arc<BookTop>,
    pub open_interest: i64,
}

#[derive(Default)]
struct Ticks {
    next_id: i64,
    kept: VecDeque<Tick>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TradeRecord {
    pub trade_id: String,
    pub price: i64,
    pub qty: i64,
    pub taker_side: Side,
    pub ts_ns: TimestampNs,
}

impl TradeRecord {
    pub fn to_json(&self, info: &InstrumentInfo) -> Value {
        json!({
            "trade_id": self.trade_id, "price": info.price(self.price), "qty": info.qty(self.qty),
            "taker_side": self.taker_side.as_str(), "ts_ns": self.ts_ns,
        })
    }
}

#[derive(Default)]
pub struct Market {
    tickers: HashMap<InstrumentId, Ticker>,
    trades: HashMap<InstrumentId, VecDeque<TradeRecord>>,
    ticks: HashMap<InstrumentId, Ticks>,
    /// The open interest at each contract's last settlement, as the hub's quotes count
    /// it (`quote::Quotes::pre_open_interest`), for the readers outside the hub.
    pre_open_interest: HashMap<InstrumentId, i64>,
}

impl Market {
    pub fn record(&mut self, instrument: InstrumentId, trade: TradeRecord) {
        self.tickers.entry(instrument).or_default().record(trade.ts_ns, trade.price, trade.qty);
        let trades = self.trades.entry(instrument).or_default();
        if trades.len() == RECENT_TRADES_KEPT {
            trades.pop_front();
        }
        trades.push_back(trade);
    }

    /// The latest `limit` trades, oldest first.
    pub fn recent(&self, instrument: InstrumentId, limit: usize) -> Vec<TradeRecord> {
        let Some(trades) = self.trades.get(&instrument) else { return Vec::new() };
        trades.iter().skip(trades.len().saturating_sub(limit)).cloned().collect()
    }

    pub fn figures(
        &mut self,
        instrument: InstrumentId,
        now_ns: TimestampNs,
    ) -> Option<TickerFigures> {
        self.tickers.get_mut(&instrument)?.figures(now_ns)
    }

    /// Keeps the instrument's next tick (its id the next number) and returns it.
    pub fn record_tick(
        &mut self,
        instrument: InstrumentId,
        (ts_ns, price): (TimestampNs, i64),
        day: DayFigures,
        book: Arc<BookTop>,
        open_interest: i64,
    ) -> Tick {
        let ticks = self.ticks.entry(instrument).or_default();
        let tick = Tick { id: ticks.next_id, ts_ns, price, day, book, open_interest };
        ticks.next_id += 1;
        if ticks.kept.len() == TICKS_KEPT {
            ticks.kept.pop_front();
        }
        ticks.kept.push_back(tick.clone());
        tick
    }

    /// The latest `limit` ticks, oldest first.
    pub fn ticks(&self, instrument: InstrumentId, limit: usize) -> Vec<Tick> {
        let Some(ticks) = self.ticks.get(&instrument) else { return Vec::new() };
        ticks.kept.iter().skip(ticks.kept.len().saturating_sub(limit)).cloned().collect()
    }

    pub fn set_pre_open_interest(&mut self, instrument: InstrumentId, open_interest: i64) {
        self.pre_open_interest.insert(instrument, open_interest);
    }

    /// The open interest at the contract's last settlement the server saw (0 before).
    pub fn pre_open_interest(&self, instrument: InstrumentId) -> i64 {
        self.pre_open_interest.get(&instrument).copied().unwrap_or(0)
    }
}

/// A turnover (price units x quantity units) as a decimal in the quote asset, or on a
/// futures contract in the settle asset: times the contract multiplier, as a futures
/// venue counts it (2 lots at 74,995 with multiplier 5: 749,950). Exact. REST's and
/// WebSocket's `quote_volume_24h` and DIFF's `amount` are this.
pub fn turnover(info: &InstrumentInfo, notional: i128) -> String {
    let scale = info.price_decimals + info.qty_decimals;
    let multiplier = match &info.terms {
        Terms::Future { multiplier, .. } => Decimal::parse(multiplier),
        Terms::Spot { .. } => None,
    };
    match multiplier {
        Some(multiplier) => {
            decimal(notional.saturating_mul(multiplier.mantissa()), scale + multiplier.scale())
        }
        None => decimal(notional, scale),
    }
}

/// A ticker as REST and WebSocket show it: `last`, `open_24h`, `high_24h`, `low_24h`
/// (nulls without a trade in the last 24 hours), `volume_24h` (quantity),
/// `quote_volume_24h` (`turnover`: with the multiplier on a futures contract) and
/// `trades_24h`; a futures contract's also shows its open interest (the long sides'
/// total quantity, read from the engine).
pub fn ticker_json(
    info: &InstrumentInfo,
    figures: Option<TickerFigures>,
    open_interest: Option<i64>,
) -> Value {
    let mut ticker = ticker_figures_json(info, figures);
    if let (Some(open_interest), Value::Object(fields)) = (open_interest, &mut ticker) {
        fields.insert("open_interest".into(), Value::String(info.qty(open_interest)));
    }
    ticker
}

fn ticker_figures_json(info: &InstrumentInfo, figures: Option<TickerFigures>) -> Value {
    match figures {
        Some(figures) => json!({
            "last": info.price(figures.last), "open_24h": info.price(figures.open),
            "high_24h": info.price(figures.high), "low_24h": info.price(figures.low),
            "volume_24h": decimal(figures.volume, info.qty_decimals),
            "quote_volume_24h": turnover(info, figures.notional),
            "trades_24h": figures.trades }),
        None => json!({
            "last": null, "open_24h": null, "high_24h": null, "low_24h": null,
            "volume_24h": "0", "quote_volume_24h": "0", "trades_24h": 0 }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn trade(index: usize) -> TradeRecord {
        TradeRecord {
            trade_id: format!("{index}-0"),
            price: 100,
            qty: 1,
            taker_side: Side::Buy,
            ts_ns: TimestampNs(index as u64),
        }
    }

    #[test]
    fn recent_trades_are_the_latest_ones_oldest_first_and_bounded() {
        let mut market = Market::default();
        let instrument = InstrumentId(0);
        assert!(market.recent(instrument, 10).is_empty());
        for index in 0..RECENT_TRADES_KEPT + 5 {
            market.record(instrument, trade(index));
        }
        let recent = market.recent(instrument, 3);
        let ids: Vec<&str> = recent.iter().map(|trade| trade.trade_id.as_str()).collect();
        let last = RECENT_TRADES_KEPT + 4;
        assert_eq!(
            ids,
            [format!("{}-0", last - 2), format!("{}-0", last - 1), format!("{last}-0")]
        );
        assert_eq!(market.recent(instrument, usize::MAX).len(), RECENT_TRADES_KEPT);
        assert_eq!(
            market.figures(instrument, TimestampNs(last as u64)).unwrap().trades,
            (RECENT_TRADES_KEPT + 5) as u64
        );
    }

    #[test]
    fn ticks_are_numbered_without_gaps_per_instrument_and_the_latest_are_kept() {
        let mut market = Market::default();
        let (cu, btc) = (InstrumentId(0), InstrumentId(1));
        let day = DayFigures { high: 100, low: 100, volume: 1, turnover: 100 };
        let book = Arc::new(BookTop::default());
        for index in 0..TICKS_KEPT + 3 {
            market.record_tick(cu, (TimestampNs(index as u64), 100), day, Arc::clone(&book), 2);
        }
        let tick = market.record_tick(btc, (TimestampNs(7), 100), day, Arc::clone(&book), 0);
        assert_eq!(tick.id, 0);
        let ticks = market.ticks(cu, 3);
        let ids: Vec<i64> = ticks.iter().map(|tick| tick.id).collect();
        let last = (TICKS_KEPT + 2) as i64;
        assert_eq!(ids, [last - 2, last - 1, last]);
        assert_eq!(market.ticks(cu, usize::MAX).len(), TICKS_KEPT);
        assert_eq!(market.ticks(btc, 20).len(), 1);
        assert!(market.ticks(InstrumentId(2), 20).is_empty());
    }

    fn future(multiplier: &str, price_decimals: u32, qty_decimals: u32) -> InstrumentInfo {
        InstrumentInfo {
            symbol: "SHFE.cu2501".into(),
            price_decimals,
            qty_decimals,
            tick: 10,
            lot: 1,
            min_qty: 1,
            max_qty: 100,
            market_band_bps: 500,
            terms: Terms::Future {
                settle: "CNY".into(),
                settle_decimals: 2,
                multiplier: multiplier.into(),
                maker_fee: "1.5".into(),
                taker_fee: "3".into(),
                close_today: true,
            },
        }
    }

    #[test]
    fn a_futures_turnover_counts_the_multiplier_exactly() {
        // 2 lots at 74,995, multiplier 5.
        assert_eq!(turnover(&future("5", 0, 0), 149_990), "749950");
        // 0.3 lots at 12.5 (price and quantity with one decimal), multiplier 0.25.
        assert_eq!(turnover(&future("0.25", 1, 1), 125 * 3), "0.9375");
        let mut spot = future("5", 0, 0);
        spot.terms = Terms::Spot {
            base: "BTC".into(),
            quote: "USD".into(),
            base_decimals: 8,
            quote_decimals: 2,
            maker_fee_bps: 1,
            taker_fee_bps: 2,
        };
        assert_eq!(turnover(&spot, 149_990), "149990");
        let ticker = ticker_json(
            &future("5", 0, 0),
            Some(TickerFigures {
                last: 74_990,
                open: 75_000,
                high: 75_000,
                low: 74_990,
                volume: 2,
                notional: 149_990,
                trades: 2,
            }),
            Some(2),
        );
        assert_eq!(
            (&ticker["volume_24h"], &ticker["quote_volume_24h"], &ticker["open_interest"]),
            (&json!("2"), &json!("749950"), &json!("2"))
        );
    }
}
