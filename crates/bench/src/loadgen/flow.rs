//! Order flows and send schedules: what each connection of a run sends, and when.
//!
//! A flow is a small deterministic generator per connection (seeded by the run and the
//! connection's place), independent of the protocol: it yields `OrderRequest`s that
//! each protocol encodes. Prices are in ticks of 0.01 around 60,000.00, quantities in
//! lots of 0.0001, the units of the instruments the load generator sets up.
//!
//! - `cross`: buy and sell alternate at one price, so every sell meets the buy before
//!   it and the book stays a few orders deep: the gateway's simplest full round trip
//!   (an acknowledgement, a trade, fills and updates for both sides).
//! - `ec-mix`: exchange-core's benchmark mix per connection: 71% amend-price, 12.6% new
//!   GTC, 7.2% reduce, 7.2% cancel, 1.8% IOC, 0.06% FOK, resting orders spread over
//!   about 500 ticks either side of the middle, 1–126 lots. A connection only knows
//!   what it sent, not what other connections' IOCs filled, so some amends and cancels
//!   name orders that are gone: they come back rejected (`unknown_order`), as they
//!   would for a real client.
//! - `maker-taker`: the first half of the connections (at least one) are market makers
//!   that keep a bid and an ask on every symbol, cancelling and replacing them as their
//!   view of the middle drifts; the others are takers sending IOC orders that cross, on
//!   random symbols.
//!
//! A schedule is the open loop's clock: request `i` of a connection is due at
//! `due_ns(i)` after the start. Without bursts requests are evenly spaced at the rate;
//! with bursts, each `every` starts with `length` at `factor` times the rate.

use std::time::Duration;

use clap::ValueEnum;

use crate::bench::workload::SplitMix64;

/// 60,000.00 in ticks of 0.01.
pub const MIDDLE_TICKS: i64 = 6_000_000;
/// Resting prices of `ec-mix` spread this many ticks either side of the middle.
const HALF_SPREAD_TICKS: u64 = 250;
const SIZE_LOTS_MAX: u64 = 126;
/// Orders a connection of `ec-mix` keeps open at most: past it, it cancels.
const OPEN_ORDERS_TARGET: usize = 500;

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Profile {
    Cross,
    EcMix,
    MakerTaker,
}

impl Profile {
    pub fn name(self) -> &'static str {
        match self {
            Profile::Cross => "cross",
            Profile::EcMix => "ec-mix",
            Profile::MakerTaker => "maker-taker",
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TimeInForce {
    GoodTillCancel,
    ImmediateOrCancel,
    FillOrKill,
}

/// A new limit order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NewOrder {
    pub client_order_id: String,
    /// Index into the run's symbols.
    pub symbol: usize,
    pub buy: bool,
    pub price_ticks: i64,
    pub qty_lots: i64,
    pub time_in_force: TimeInForce,
}

impl NewOrder {
    /// The order's fields as REST's order body and WebSocket's `order` op share them
    /// (`"symbol":…,"client_order_id":…`, without braces), naming its symbol `symbol`.
    pub fn json_fields(&self, symbol: &str) -> String {
        format!(
            r#""symbol":"{symbol}","side":"{}","type":"limit","price":"{}","qty":"{}","time_in_force":"{}","stp":"none","client_order_id":"{}""#,
            if self.buy { "buy" } else { "sell" },
            price_text(self.price_ticks),
            qty_text(self.qty_lots),
            match self.time_in_force {
                TimeInForce::GoodTillCancel => "gtc",
                TimeInForce::ImmediateOrCancel => "ioc",
                TimeInForce::FillOrKill => "fok",
            },
            self.client_order_id,
        )
    }
}

/// One request of a flow.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum OrderRequest {
    New(NewOrder),
    Cancel { client_order_id: String },
    Amend { client_order_id: String, price_ticks: Option<i64>, qty_lots: Option<i64> },
}

impl OrderRequest {
    pub fn client_order_id(&self) -> &str {
        match self {
            OrderRequest::New(order) => &order.client_order_id,
            OrderRequest::Cancel { client_order_id }
            | OrderRequest::Amend { client_order_id, .. } => client_order_id,
        }
    }
}

/// A price in ticks of 0.01 as decimal text ("60000.05").
pub fn price_text(ticks: i64) -> String {
    format!("{}.{:02}", ticks / 100, ticks % 100)
}

/// A quantity in lots of 0.0001 as decimal text ("0.0126").
pub fn qty_text(lots: i64) -> String {
    format!("{}.{:04}", lots / 10_000, lots % 10_000)
}

/// An order a flow placed and believes open.
#[derive(Clone, Debug)]
struct Resting {
    client_order_id: String,
    buy: bool,
    qty_lots: i64,
    price_ticks: i64,
}

/// One connection's generator.
pub struct Flow {
    profile: Profile,
    random: SplitMix64,
    /// Starts every client order id (unique to the run and the connection).
    id_prefix: String,
    symbols: usize,
    maker: bool,
    open: Vec<Resting>,
    /// `maker-taker`: the maker's view of each symbol's middle, in ticks.
    middles: Vec<i64>,
    /// `maker-taker`: the maker's live quote in each slot (symbol × side), by client
    /// order id.
    quotes: Vec<Option<String>>,
}

impl Flow {
    /// The flow of connection `index` of `connections`, over `symbols` symbols; client
    /// order ids start with `id_prefix` (unique to the run and the connection).
    pub fn new(
        profile: Profile,
        seed: u64,
        index: usize,
        connections: usize,
        symbols: usize,
        id_prefix: String,
    ) -> Flow {
        let makers = (connections / 2).max(1);
        let symbols = symbols.max(1);
        Flow {
            profile,
            random: SplitMix64::new(seed ^ (index as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15)),
            id_prefix,
            symbols,
            maker: index < makers,
            open: Vec::new(),
            middles: vec![MIDDLE_TICKS; symbols],
            quotes: vec![None; 2 * symbols],
        }
    }

    /// Request `request` (0, 1, 2, … on this connection).
    pub fn next(&mut self, request: u64) -> OrderRequest {
        match self.profile {
            Profile::Cross => OrderRequest::New(NewOrder {
                client_order_id: self.client_order_id(request),
                symbol: (request / 2) as usize % self.symbols,
                buy: request.is_multiple_of(2),
                price_ticks: MIDDLE_TICKS,
                qty_lots: 1,
                time_in_force: TimeInForce::GoodTillCancel,
            }),
            Profile::EcMix => self.ec_mix(request),
            Profile::MakerTaker if self.maker => self.make(request),
            Profile::MakerTaker => self.take(request),
        }
    }

    fn client_order_id(&self, request: u64) -> String {
        format!("{}-{request}", self.id_prefix)
    }

    fn side(&mut self) -> bool {
        self.random.below(2) == 0
    }

    fn lots(&mut self) -> i64 {
        1 + self.random.below(SIZE_LOTS_MAX) as i64
    }

    /// A resting price on `buy`'s side of the middle, 1 to 250 ticks away.
    fn resting_price(&mut self, buy: bool) -> i64 {
        let away = 1 + self.random.below(HALF_SPREAD_TICKS) as i64;
        if buy {
            MIDDLE_TICKS - away
        } else {
            MIDDLE_TICKS + away
        }
    }

    fn ec_mix(&mut self, request: u64) -> OrderRequest {
        let roll = self.random.below(100_000);
        let has_open = !self.open.is_empty();
        if self.open.len() >= OPEN_ORDERS_TARGET || (has_open && (roll < 7_200)) {
            return self.cancel_one();
        }
        if has_open && roll < 7_200 + 7_200 {
            return self.reduce_one();
        }
        if has_open && roll < 7_200 + 7_200 + 71_000 {
            let at = self.random.below(self.open.len() as u64) as usize;
            let buy = self.open[at].buy;
            // Always a move: an amend to where the order is would be a no-op (and the
            // same signed REST amend twice in a millisecond, a replay).
            let mut price = self.resting_price(buy);
            while price == self.open[at].price_ticks {
                price = self.resting_price(buy);
            }
            self.open[at].price_ticks = price;
            return OrderRequest::Amend {
                client_order_id: self.open[at].client_order_id.clone(),
                price_ticks: Some(price),
                qty_lots: None,
            };
        }
        let client_order_id = self.client_order_id(request);
        let buy = self.side();
        let qty_lots = self.lots();
        // Of the new orders: 12.6 GTC for every 1.8 IOC and 0.06 FOK.
        let kind = self.random.below(14_460);
        if kind < 12_600 {
            let price_ticks = self.resting_price(buy);
            let resting =
                Resting { client_order_id: client_order_id.clone(), buy, qty_lots, price_ticks };
            self.open.push(resting);
            return OrderRequest::New(NewOrder {
                client_order_id,
                symbol: 0,
                buy,
                price_ticks,
                qty_lots,
                time_in_force: TimeInForce::GoodTillCancel,
            });
        }
        // Crossing orders reach across the whole spread.
        let reach = HALF_SPREAD_TICKS as i64;
        OrderRequest::New(NewOrder {
            client_order_id,
            symbol: 0,
            buy,
            price_ticks: if buy { MIDDLE_TICKS + reach } else { MIDDLE_TICKS - reach },
            qty_lots,
            time_in_force: if kind < 12_600 + 1_800 {
                TimeInForce::ImmediateOrCancel
            } else {
                TimeInForce::FillOrKill
            },
        })
    }

    fn cancel_one(&mut self) -> OrderRequest {
        let at = self.random.below(self.open.len() as u64) as usize;
        let gone = self.open.swap_remove(at);
        OrderRequest::Cancel { client_order_id: gone.client_order_id }
    }

    fn reduce_one(&mut self) -> OrderRequest {
        let at = self.random.below(self.open.len() as u64) as usize;
        if self.open[at].qty_lots <= 1 {
            return self.cancel_one();
        }
        let order = &mut self.open[at];
        order.qty_lots -= 1;
        OrderRequest::Amend {
            client_order_id: order.client_order_id.clone(),
            price_ticks: None,
            qty_lots: Some(order.qty_lots),
        }
    }

    /// A maker's request. Its quotes are slots (a bid and an ask on each symbol),
    /// taken in turn: a slot with a live quote is cancelled, an empty one gets a new
    /// quote (a fresh client order id) a tick from the maker's middle, which drifts.
    /// Cancel and replace, as market makers do; a quote a taker filled meanwhile makes
    /// its cancel come back `unknown_order`, and the slot is quoted again next time.
    fn make(&mut self, request: u64) -> OrderRequest {
        let slot = request as usize % (2 * self.symbols);
        let (symbol, buy) = (slot / 2, slot.is_multiple_of(2));
        if let Some(at) = self.quotes[slot].take() {
            return OrderRequest::Cancel { client_order_id: at };
        }
        if buy {
            self.middles[symbol] += self.random.below(5) as i64 - 2;
        }
        let middle = self.middles[symbol];
        let client_order_id = self.client_order_id(request);
        self.quotes[slot] = Some(client_order_id.clone());
        OrderRequest::New(NewOrder {
            client_order_id,
            symbol,
            buy,
            price_ticks: if buy { middle - 1 } else { middle + 1 },
            qty_lots: 10 + self.random.below(20) as i64,
            time_in_force: TimeInForce::GoodTillCancel,
        })
    }

    /// A taker's request: an IOC of 1–10 lots that reaches 5 ticks past the middle.
    fn take(&mut self, request: u64) -> OrderRequest {
        let symbol = self.random.below(self.symbols as u64) as usize;
        let buy = self.side();
        OrderRequest::New(NewOrder {
            client_order_id: self.client_order_id(request),
            symbol,
            buy,
            price_ticks: if buy { MIDDLE_TICKS + 5 } else { MIDDLE_TICKS - 5 },
            qty_lots: 1 + self.random.below(10) as i64,
            time_in_force: TimeInForce::ImmediateOrCancel,
        })
    }
}

/// Bursts on top of a steady rate: each `every` begins with `length` at `factor` times
/// the rate.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Burst {
    pub every: Duration,
    pub length: Duration,
    pub factor: f64,
}

/// When each request of a connection is due, after the run's start.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Schedule {
    /// Requests per second outside bursts.
    pub rate: f64,
    pub burst: Option<Burst>,
}

impl Schedule {
    /// Requests in one burst period (`None` without bursts): (in the burst, in all).
    fn period_counts(&self) -> Option<(f64, f64, Burst)> {
        let burst = self.burst?;
        let in_burst = self.rate * burst.factor * burst.length.as_secs_f64();
        let after = self.rate * (burst.every.as_secs_f64() - burst.length.as_secs_f64());
        Some((in_burst, in_burst + after, burst))
    }

    /// When request `request` is due, in ns after the start.
    pub fn due_ns(&self, request: u64) -> f64 {
        let Some((in_burst, per_period, burst)) = self.period_counts() else {
            return request as f64 * 1e9 / self.rate;
        };
        let periods = (request as f64 / per_period).floor();
        let within = request as f64 - periods * per_period;
        let period_ns = burst.every.as_nanos() as f64;
        let offset_ns = if within < in_burst {
            within * 1e9 / (self.rate * burst.factor)
        } else {
            burst.length.as_nanos() as f64 + (within - in_burst) * 1e9 / self.rate
        };
        periods * period_ns + offset_ns
    }

    /// How many requests are due `elapsed_ns` after the start (those with
    /// `due_ns <= elapsed_ns`).
    pub fn due_count(&self, elapsed_ns: f64) -> u64 {
        let Some((in_burst, per_period, burst)) = self.period_counts() else {
            return (elapsed_ns * self.rate / 1e9).floor() as u64 + 1;
        };
        let period_ns = burst.every.as_nanos() as f64;
        let periods = (elapsed_ns / period_ns).floor();
        let into_ns = elapsed_ns - periods * period_ns;
        let burst_ns = burst.length.as_nanos() as f64;
        let within = if into_ns < burst_ns {
            (into_ns * self.rate * burst.factor / 1e9).floor() + 1.0
        } else {
            (in_burst.ceil()).max(0.0) + ((into_ns - burst_ns) * self.rate / 1e9).floor() + 1.0
        };
        (periods * per_period.round() + within.min(per_period.round())) as u64
    }

    /// Requests due within `duration` (at least 1).
    pub fn requests_in(&self, duration: Duration) -> u64 {
        let elapsed_ns = duration.as_nanos() as f64;
        match self.period_counts() {
            None => (self.rate * duration.as_secs_f64()).round().max(1.0) as u64,
            Some(_) => self.due_count(elapsed_ns - 1.0).max(1),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn flow(profile: Profile, index: usize, connections: usize) -> Flow {
        Flow::new(profile, 7, index, connections, 3, format!("t{index}"))
    }

    #[test]
    fn prices_and_quantities_read_as_decimals() {
        assert_eq!(
            (price_text(6_000_005), price_text(MIDDLE_TICKS)),
            ("60000.05".into(), "60000.00".into())
        );
        assert_eq!(
            (qty_text(1), qty_text(126), qty_text(12_345)),
            ("0.0001".into(), "0.0126".into(), "1.2345".into())
        );
    }

    #[test]
    fn cross_alternates_buy_and_sell_at_the_middle() {
        let mut flow = flow(Profile::Cross, 0, 1);
        let sides: Vec<bool> = (0..4)
            .map(|request| match flow.next(request) {
                OrderRequest::New(order) => {
                    assert_eq!((order.price_ticks, order.qty_lots), (MIDDLE_TICKS, 1));
                    order.buy
                }
                other => panic!("{other:?}"),
            })
            .collect();
        assert_eq!(sides, [true, false, true, false]);
    }

    #[test]
    fn ec_mix_keeps_exchange_cores_proportions_and_only_touches_its_own_orders() {
        let mut flow = flow(Profile::EcMix, 0, 2);
        let (mut amends, mut news, mut cancels, mut placed) = (0, 0, 0, Vec::new());
        for request in 0..100_000 {
            match flow.next(request) {
                OrderRequest::New(order) => {
                    news += 1;
                    assert!((1..=126).contains(&order.qty_lots));
                    assert!((order.price_ticks - MIDDLE_TICKS).abs() <= 250);
                    placed.push(order.client_order_id);
                }
                OrderRequest::Amend { client_order_id, .. } => {
                    amends += 1;
                    assert!(placed.contains(&client_order_id), "{client_order_id}");
                }
                OrderRequest::Cancel { client_order_id } => {
                    cancels += 1;
                    assert!(placed.contains(&client_order_id), "{client_order_id}");
                }
            }
        }
        // Amends (price and reduce) about 75%, new orders about 14%, cancels about 12%.
        assert!((74_000..82_000).contains(&amends), "{amends}");
        assert!((12_000..17_000).contains(&news), "{news}");
        // Cancels 7.2%, and a reduce of a 1-lot order cancels it.
        assert!((6_000..13_000).contains(&cancels), "{cancels}");
        assert!(flow.open.len() <= OPEN_ORDERS_TARGET);
    }

    #[test]
    fn the_same_seed_and_connection_give_the_same_flow() {
        let requests =
            |index| (0..1_000).map(|r| flow(Profile::EcMix, index, 2).next(r)).collect::<Vec<_>>();
        assert_eq!(requests(1), requests(1));
        assert_ne!(requests(0), requests(1));
    }

    #[test]
    fn makers_cancel_and_replace_their_quotes_and_takers_send_iocs() {
        let mut maker = flow(Profile::MakerTaker, 0, 4);
        let quotes: Vec<(usize, bool, String)> = (0..6)
            .map(|request| match maker.next(request) {
                OrderRequest::New(order) => (order.symbol, order.buy, order.client_order_id),
                other => panic!("a maker quotes first, not {other:?}"),
            })
            .collect();
        let slots: Vec<(usize, bool)> = quotes.iter().map(|(s, b, _)| (*s, *b)).collect();
        assert_eq!(slots, [(0, true), (0, false), (1, true), (1, false), (2, true), (2, false)]);
        for (request, (_, _, quoted)) in (6..12).zip(&quotes) {
            match maker.next(request) {
                OrderRequest::Cancel { client_order_id } => assert_eq!(&client_order_id, quoted),
                other => panic!("then cancels each quote, not {other:?}"),
            }
        }
        match maker.next(12) {
            OrderRequest::New(order) => {
                assert!(!quotes.iter().any(|q| q.2 == order.client_order_id))
            }
            other => panic!("then quotes again with a fresh id, not {other:?}"),
        }
        let mut taker = flow(Profile::MakerTaker, 3, 4);
        for request in 0..100 {
            match taker.next(request) {
                OrderRequest::New(order) => {
                    assert_eq!(order.time_in_force, TimeInForce::ImmediateOrCancel)
                }
                other => panic!("{other:?}"),
            }
        }
    }

    #[test]
    fn a_steady_schedule_spaces_requests_evenly() {
        let schedule = Schedule { rate: 1_000.0, burst: None };
        assert_eq!(schedule.due_ns(0), 0.0);
        assert_eq!(schedule.due_ns(10), 10_000_000.0);
        assert_eq!(schedule.due_count(0.0), 1);
        assert_eq!(schedule.due_count(9_999_999.0), 10);
        assert_eq!(schedule.due_count(10_000_000.0), 11);
        assert_eq!(schedule.requests_in(Duration::from_secs(2)), 2_000);
    }

    #[test]
    fn a_burst_schedule_sends_faster_at_the_start_of_each_period() {
        // 1,000/s, with the first 100 ms of each second at 5,000/s: 500 + 900 a second.
        let burst = Burst {
            every: Duration::from_secs(1),
            length: Duration::from_millis(100),
            factor: 5.0,
        };
        let schedule = Schedule { rate: 1_000.0, burst: Some(burst) };
        assert_eq!(schedule.due_ns(1), 200_000.0);
        assert_eq!(schedule.due_ns(500), 100_000_000.0);
        assert_eq!(schedule.due_ns(501), 101_000_000.0);
        assert_eq!(schedule.due_ns(1_400), 1_000_000_000.0);
        assert_eq!(schedule.requests_in(Duration::from_secs(2)), 2_800);
        // due_count and due_ns agree: every request is due exactly when counted.
        for request in [0u64, 1, 499, 500, 501, 1_399, 1_400, 1_401, 2_000] {
            let due = schedule.due_ns(request);
            assert_eq!(schedule.due_count(due), request + 1, "request {request}");
            if due > 0.0 {
                assert_eq!(schedule.due_count(due - 1.0), request, "request {request}");
            }
        }
    }
}
