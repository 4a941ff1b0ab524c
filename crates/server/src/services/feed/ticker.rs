//! A rolling 24-hour ticker per instrument, from its trades: last price, open, high,
//! low, volume and trade count over the last 24 hours, in one-minute buckets (at most
//! 1,440 per instrument, whatever the trade rate).

use std::collections::VecDeque;

use bourse_core::TimestampNs;

const BUCKET_NS: u64 = 60 * 1_000_000_000;
const WINDOW_BUCKETS: u64 = 24 * 60;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Bucket {
    minute: u64,
    open: i64,
    high: i64,
    low: i64,
    close: i64,
    volume: i128,
    /// Price units times quantity units.
    notional: i128,
    trades: u64,
}

#[derive(Clone, Debug, Default)]
pub struct Ticker {
    buckets: VecDeque<Bucket>,
}

/// The 24-hour figures, in price and quantity units.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TickerFigures {
    pub last: i64,
    pub open: i64,
    pub high: i64,
    pub low: i64,
    pub volume: i128,
    /// The quote amount traded: price units times quantity units.
    pub notional: i128,
    pub trades: u64,
}

impl Ticker {
    /// Adds a trade at `ts_ns` (trades come in time order).
    pub fn record(&mut self, ts_ns: TimestampNs, price: i64, qty: i64) {
        let minute = ts_ns.0 / BUCKET_NS;
        match self.buckets.back_mut() {
            Some(bucket) if bucket.minute == minute => {
                bucket.high = bucket.high.max(price);
                bucket.low = bucket.low.min(price);
                bucket.close = price;
                bucket.volume += i128::from(qty);
                bucket.notional += i128::from(price) * i128::from(qty);
                bucket.trades += 1;
            }
            _ => self.buckets.push_back(Bucket {
                minute,
                open: price,
                high: price,
                low: price,
                close: price,
                volume: i128::from(qty),
                notional: i128::from(price) * i128::from(qty),
                trades: 1,
            }),
        }
        self.forget_before(minute);
    }

    fn forget_before(&mut self, minute: u64) {
        let oldest_kept = minute.saturating_sub(WINDOW_BUCKETS - 1);
        while self.buckets.front().is_some_and(|bucket| bucket.minute < oldest_kept) {
            self.buckets.pop_front();
        }
    }

    /// The figures over the 24 hours up to `now_ns`; `None` without a trade in them.
    pub fn figures(&mut self, now_ns: TimestampNs) -> Option<TickerFigures> {
        self.forget_before(now_ns.0 / BUCKET_NS);
        let first = self.buckets.front()?;
        let last = self.buckets.back()?;
        Some(TickerFigures {
            last: last.close,
            open: first.open,
            high: self.buckets.iter().map(|bucket| bucket.high).max()?,
            low: self.buckets.iter().map(|bucket| bucket.low).min()?,
            volume: self.buckets.iter().map(|bucket| bucket.volume).sum(),
            notional: self.buckets.iter().map(|bucket| bucket.notional).sum(),
            trades: self.buckets.iter().map(|bucket| bucket.trades).sum(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MINUTE: u64 = BUCKET_NS;
    const DAY: u64 = 24 * 60 * MINUTE;

    #[test]
    fn figures_cover_the_last_24_hours_only() {
        let mut ticker = Ticker::default();
        assert_eq!(ticker.figures(TimestampNs(0)), None);
        ticker.record(TimestampNs(0), 100, 1);
        ticker.record(TimestampNs(MINUTE / 2), 90, 2);
        ticker.record(TimestampNs(10 * MINUTE), 120, 3);
        let figures = ticker.figures(TimestampNs(10 * MINUTE)).unwrap();
        assert_eq!(
            figures,
            TickerFigures {
                last: 120,
                open: 100,
                high: 120,
                low: 90,
                volume: 6,
                notional: 100 + 180 + 360,
                trades: 3
            }
        );
        // A day after the first minute it is gone; the trade of minute 10 remains.
        let figures = ticker.figures(TimestampNs(DAY + 5 * MINUTE)).unwrap();
        assert_eq!((figures.open, figures.low, figures.volume, figures.trades), (120, 120, 3, 1));
        assert_eq!(ticker.figures(TimestampNs(2 * DAY)), None);
    }

    #[test]
    fn memory_is_bounded_by_the_minutes_of_a_day() {
        let mut ticker = Ticker::default();
        for minute in 0..3 * WINDOW_BUCKETS {
            ticker.record(TimestampNs(minute * MINUTE), 1, 1);
            ticker.record(TimestampNs(minute * MINUTE + 1), 2, 1);
        }
        assert_eq!(ticker.buckets.len() as u64, WINDOW_BUCKETS);
    }
}
