//! Public market statistics the feed keeps as trades go by: each instrument's latest
//! trades (at most `RECENT_TRADES_KEPT`) and its 24-hour ticker. The hub writes them;
//! the REST handlers of `/v1/trades` and `/v1/ticker` read them. They are derived from
//! the engine's events since the server started (durable trade history and candles are
//! the market-data work's).

use std::collections::{HashMap, VecDeque};

use bourse_core::ids::InstrumentId;
use bourse_core::Side;
use serde_json::{json, Value};

use super::ticker::{Ticker, TickerFigures};
use crate::reference::{decimal, InstrumentInfo};

/// Trades kept per instrument for `GET /v1/trades`.
pub const RECENT_TRADES_KEPT: usize = 1_000;

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TradeRecord {
    pub trade_id: String,
    pub price: i64,
    pub qty: i64,
    pub taker_side: Side,
    pub ts_ns: u64,
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

    pub fn figures(&mut self, instrument: InstrumentId, now_ns: u64) -> Option<TickerFigures> {
        self.tickers.get_mut(&instrument)?.figures(now_ns)
    }
}

/// A ticker as REST and WebSocket show it (nulls before the first trade of the day).
/// An instrument's ticker; a futures contract's also shows its open interest (the
/// long sides' total quantity, read from the engine).
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
            "quote_volume_24h": decimal(figures.notional, info.price_decimals + info.qty_decimals),
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
            ts_ns: index as u64,
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
            market.figures(instrument, last as u64).unwrap().trades,
            (RECENT_TRADES_KEPT + 5) as u64
        );
    }
}
