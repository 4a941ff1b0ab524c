//! Candles (open, high, low, close, volume) of each instrument at 1 s, 1 m, 5 m, 15 m,
//! 1 h and 1 d, from the trades, on the engine's clock (each trade's command time).
//! Intervals are aligned to the Unix epoch (a day is 00:00 to 24:00 UTC). An interval
//! without trades is an empty candle: open, high, low and close at the last price
//! before it, volume 0; none exists before an instrument's first trade. Only candles
//! with trades are stored (up to `HISTORY_MAX` per instrument and interval); `series`
//! fills the empty ones in between when read.

use std::collections::VecDeque;

use bourse_core::ids::InstrumentId;
use bourse_core::{Price, Qty, Side, TimestampNs};

/// The intervals: name and length in nanoseconds.
pub const INTERVALS: [(&str, u64); 6] = [
    ("1s", 1_000_000_000),
    ("1m", 60_000_000_000),
    ("5m", 300_000_000_000),
    ("15m", 900_000_000_000),
    ("1h", 3_600_000_000_000),
    ("1d", 86_400_000_000_000),
];

/// Candles with trades kept per instrument and interval, at most.
pub const HISTORY_MAX: usize = 2_000;

/// The interval named `name` (`1s` ... `1d`): its length in ns.
pub fn interval(name: &str) -> Option<u64> {
    INTERVALS.iter().find(|(known, _)| *known == name).map(|(_, length)| *length)
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Candle {
    /// When the interval starts, ns since the Unix epoch.
    pub start_ns: u64,
    pub open: Price,
    pub high: Price,
    pub low: Price,
    pub close: Price,
    /// Base quantity traded.
    pub volume: Qty,
    /// Quote amount traded: price units times quantity units.
    pub notional: i128,
    /// What buyers took (trades whose taker bought): base quantity and quote amount.
    pub taker_buy_volume: Qty,
    pub taker_buy_notional: i128,
    pub trades: u32,
}

impl Candle {
    fn opening(start_ns: u64, price: Price, qty: Qty, taker: Side) -> Candle {
        let mut candle = Candle::empty(start_ns, price);
        candle.add(price, qty, taker);
        candle
    }

    fn empty(start_ns: u64, price: Price) -> Candle {
        Candle {
            start_ns,
            open: price,
            high: price,
            low: price,
            close: price,
            volume: Qty(0),
            notional: 0,
            taker_buy_volume: Qty(0),
            taker_buy_notional: 0,
            trades: 0,
        }
    }

    fn add(&mut self, price: Price, qty: Qty, taker: Side) {
        self.high = self.high.max(price);
        self.low = self.low.min(price);
        self.close = price;
        self.volume = Qty(self.volume.0 + qty.0);
        let notional = i128::from(price.0) * i128::from(qty.0);
        self.notional += notional;
        if taker == Side::Buy {
            self.taker_buy_volume = Qty(self.taker_buy_volume.0 + qty.0);
            self.taker_buy_notional += notional;
        }
        self.trades += 1;
    }
}

/// One instrument's candles at one interval.
#[derive(Clone, Debug, Default)]
struct Series {
    /// Candles with trades, oldest first; the last is the current interval's if it
    /// has trades.
    candles: VecDeque<Candle>,
}

/// Every instrument's candles at every interval.
#[derive(Clone, Debug, Default)]
pub struct Candles {
    /// By instrument, then by `INTERVALS` index.
    series: Vec<[Series; INTERVALS.len()]>,
}

impl Candles {
    /// Counts a trade at `ts` (its command's time): the candles it updates, one per
    /// interval (for live channels), in `INTERVALS` order.
    pub fn on_trade(
        &mut self,
        instrument: InstrumentId,
        ts: TimestampNs,
        price: Price,
        qty: Qty,
        taker: Side,
    ) -> [Candle; INTERVALS.len()] {
        let index = instrument.index();
        if index >= self.series.len() {
            self.series.resize_with(index + 1, Default::default);
        }
        let mut updated = [Candle::empty(0, price); INTERVALS.len()];
        for (position, (_, length)) in INTERVALS.iter().enumerate() {
            let start_ns = ts.0 - ts.0 % length;
            let candles = &mut self.series[index][position].candles;
            match candles.back_mut() {
                Some(current) if current.start_ns == start_ns => current.add(price, qty, taker),
                // (A trade stamped before the current candle cannot happen: the engine's
                // clock never goes back. It counts in the current one.)
                Some(current) if current.start_ns > start_ns => current.add(price, qty, taker),
                _ => {
                    candles.push_back(Candle::opening(start_ns, price, qty, taker));
                    if candles.len() > HISTORY_MAX {
                        candles.pop_front();
                    }
                }
            }
            updated[position] = candles.back().copied().unwrap_or(updated[position]);
        }
        updated
    }

    /// The latest candle with trades of `instrument` at the interval `INTERVALS[index]`.
    pub fn current(&self, instrument: InstrumentId, index: usize) -> Option<Candle> {
        self.series.get(instrument.index())?.get(index)?.candles.back().copied()
    }

    /// The candles of `instrument` at `interval_ns` whose intervals start in
    /// `from_ns..to_ns`, oldest first, empty ones included (from the first trade on;
    /// `to_ns` past the clock gives the current interval as it stands), at most
    /// `limit` (the newest).
    pub fn series(
        &self,
        instrument: InstrumentId,
        interval_ns: u64,
        from_ns: u64,
        to_ns: u64,
        limit: usize,
    ) -> Vec<Candle> {
        let Some(position) = INTERVALS.iter().position(|(_, length)| *length == interval_ns) else {
            return Vec::new();
        };
        let Some(series) = self.series.get(instrument.index()) else { return Vec::new() };
        let candles = &series[position].candles;
        let mut out: Vec<Candle> = Vec::new();
        let mut last_close: Option<(u64, Price)> = None;
        for candle in candles {
            if let Some((previous_start, close)) = last_close {
                let mut start = previous_start + interval_ns;
                while start < candle.start_ns && start < to_ns {
                    if start >= from_ns {
                        out.push(Candle::empty(start, close));
                    }
                    start += interval_ns;
                }
            }
            if candle.start_ns >= to_ns {
                break;
            }
            if candle.start_ns >= from_ns {
                out.push(*candle);
            }
            last_close = Some((candle.start_ns, candle.close));
        }
        if out.len() > limit {
            out.drain(..out.len() - limit);
        }
        out
    }

    /// Like `series`, and the empty intervals after the last trade up to `now` (the
    /// engine's clock) too.
    pub fn series_until(
        &self,
        instrument: InstrumentId,
        interval_ns: u64,
        from_ns: u64,
        now: TimestampNs,
        limit: usize,
    ) -> Vec<Candle> {
        let to_ns = now.0 - now.0 % interval_ns.max(1) + interval_ns;
        let mut out = self.series(instrument, interval_ns, from_ns, to_ns, usize::MAX);
        if let Some(last) = out.last().copied() {
            let mut start = last.start_ns + interval_ns;
            while start < to_ns {
                out.push(Candle::empty(start, last.close));
                start += interval_ns;
            }
        }
        if out.len() > limit {
            out.drain(..out.len() - limit);
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const BTC: InstrumentId = InstrumentId(0);
    const SECOND: u64 = 1_000_000_000;

    #[test]
    fn trades_make_candles_on_interval_boundaries_and_gaps_are_empty_candles() {
        let mut candles = Candles::default();
        let base = 1_764_000_000 * SECOND; // a whole minute
        candles.on_trade(BTC, TimestampNs(base + 100), Price(10), Qty(1), Side::Buy);
        candles.on_trade(BTC, TimestampNs(base + SECOND - 1), Price(12), Qty(2), Side::Buy); // the same second
        candles.on_trade(BTC, TimestampNs(base + SECOND), Price(9), Qty(1), Side::Sell); // the next one
        let updated =
            candles.on_trade(BTC, TimestampNs(base + 4 * SECOND + 5), Price(11), Qty(3), Side::Buy);
        assert_eq!(updated[0].start_ns, base + 4 * SECOND);
        assert_eq!(
            (updated[1].open, updated[1].high, updated[1].low, updated[1].close),
            (Price(10), Price(12), Price(9), Price(11))
        );
        assert_eq!((updated[1].volume, updated[1].trades), (Qty(7), 4));
        // Quote amounts, and what buyers took (all but the sell at 9).
        assert_eq!(updated[1].notional, 10 + 24 + 9 + 33);
        assert_eq!(
            (updated[1].taker_buy_volume, updated[1].taker_buy_notional),
            (Qty(6), 10 + 24 + 33)
        );
        let seconds = candles.series(BTC, SECOND, 0, u64::MAX, 100);
        let shown: Vec<(u64, i64, i64, i64, i64, i64)> = seconds
            .iter()
            .map(|c| {
                ((c.start_ns - base) / SECOND, c.open.0, c.high.0, c.low.0, c.close.0, c.volume.0)
            })
            .collect();
        assert_eq!(
            shown,
            vec![
                (0, 10, 12, 10, 12, 3),
                (1, 9, 9, 9, 9, 1),
                (2, 9, 9, 9, 9, 0), // empty: at the last close
                (3, 9, 9, 9, 9, 0),
                (4, 11, 11, 11, 11, 3),
            ]
        );
        // Up to the clock: two more empty seconds; a window and a limit.
        let until = candles.series_until(BTC, SECOND, 0, TimestampNs(base + 6 * SECOND + 1), 100);
        assert_eq!(until.len(), 7);
        assert_eq!(
            (until[6].start_ns, until[6].close, until[6].volume),
            (base + 6 * SECOND, Price(11), Qty(0))
        );
        let window = candles.series(BTC, SECOND, base + 2 * SECOND, base + 4 * SECOND, 100);
        assert_eq!(window.iter().map(|c| c.volume.0).collect::<Vec<_>>(), vec![0, 0]);
        assert_eq!(candles.series(BTC, SECOND, 0, u64::MAX, 2).len(), 2);
        // Days are aligned to midnight UTC; an unknown interval or instrument: nothing.
        let day = candles.series(BTC, 86_400 * SECOND, 0, u64::MAX, 10);
        assert_eq!(day.len(), 1);
        assert_eq!(day[0].start_ns % (86_400 * SECOND), 0);
        assert!(candles.series(BTC, 7, 0, u64::MAX, 10).is_empty());
        assert!(candles.series(InstrumentId(5), SECOND, 0, u64::MAX, 10).is_empty());
        assert_eq!(interval("15m"), Some(900 * SECOND));
        assert_eq!(interval("2m"), None);
    }
}
