//! Criterion benchmarks of the engine's basic operations on one book: add, cancel,
//! amend, match, and a sweep through 1,000 levels.
//!
//! Every operation goes through `Exchange::apply`, with its commands built before any
//! timing, on books of 10, 1,000 and 100,000 price levels a side (`DEPTHS`), so that the
//! three figures of an operation can be read side by side: each should be O(1) or
//! O(log levels), never O(levels) or O(orders).
//!
//! An operation changes the book, so each benchmark times rounds of at most `ROUND_OPS`
//! commands (`iter_custom`) and undoes them between rounds, untimed: every timed
//! command meets the same book. The clock is read twice per round, which adds a small
//! constant (a quarter of a clock read per operation) to every figure, the same at every
//! depth. Before timing, one round runs with its events checked, so a benchmark cannot
//! quietly time rejections.

use std::borrow::Cow;
use std::hint::black_box;
use std::ops::Range;
use std::time::{Duration, Instant};

use bourse_core::command::{
    AmendCommand, AmendQtyKind, InstrumentCommand, OrderCommand, OrderSize, OrderType,
    TransferCommand,
};
use bourse_core::ids::InstrumentId;
use bourse_core::{
    Command, Decimal, DoneReason, Event, Exchange, ExchangeConfig, Offset, Seq, Side, StpMode,
    TimeInForce,
};
use criterion::{criterion_group, criterion_main, BatchSize, BenchmarkId, Criterion};

/// Price levels on each side of the book.
const DEPTHS: [usize; 3] = [10, 1_000, 100_000];
const ORDERS_PER_LEVEL: usize = 4;
const ORDER_QTY_LOTS: i64 = 10;
const MID_PRICE_TICKS: i64 = 1_000_000;
/// Levels sit every other tick, so that a new level can be made between two of them.
const LEVEL_SPACING_TICKS: i64 = 2;
const MAKER_ACCOUNTS: usize = 100;
/// Timed commands between two undo phases; also the extra orders at the best ask, so
/// that a round of fills never empties that level.
const ROUND_OPS: usize = 8;
const SWEEP_LEVELS: usize = 1_000;

const SYMBOL: &str = "BTC-USD";
const BASE: &str = "BTC";
const QUOTE: &str = "USD";
const TAKER: &str = "t";
const MAKER_FUNDING_UNITS: i64 = 1_000_000_000_000_000;
/// The taker buys for every iteration of `match`, tens of millions of times.
const TAKER_FUNDING_UNITS: i64 = 4_000_000_000_000_000_000;

// ----- commands -----

fn text(value: impl Into<String>) -> Cow<'static, str> {
    Cow::Owned(value.into())
}

fn units(value: i64) -> Decimal {
    Decimal::from_units(i128::from(value), 0)
}

fn limit_order(
    account: &str,
    id: &str,
    side: Side,
    price_ticks: i64,
    qty_lots: i64,
    time_in_force: TimeInForce,
) -> Command<'static> {
    Command::Order(OrderCommand {
        account: text(account).into(),
        id: text(id),
        symbol: text(SYMBOL),
        side,
        order_type: OrderType::Limit { price: units(price_ticks) },
        size: OrderSize::of_qty(units(qty_lots)),
        time_in_force,
        post_only: false,
        stp: StpMode::CancelTaker,
        offset: Offset::Open,
    })
}

fn gtc(account: &str, id: &str, side: Side, price_ticks: i64) -> Command<'static> {
    limit_order(account, id, side, price_ticks, ORDER_QTY_LOTS, TimeInForce::GoodTillCancel)
}

fn cancel(account: &str, id: &str) -> Command<'static> {
    Command::Cancel { account: text(account).into(), id: text(id) }
}

fn amend(
    account: &str,
    id: &str,
    price_ticks: Option<i64>,
    qty_lots: Option<i64>,
) -> Command<'static> {
    Command::Amend(AmendCommand {
        account: text(account).into(),
        id: text(id),
        price: price_ticks.map(units),
        qty: qty_lots.map(units),
        qty_kind: AmendQtyKind::Remaining,
    })
}

fn definitions() -> Vec<Command<'static>> {
    let mut commands = vec![
        Command::Asset { asset: text(BASE), decimals: 0 },
        Command::Asset { asset: text(QUOTE), decimals: 0 },
        Command::Instrument(Box::new(InstrumentCommand {
            symbol: text(SYMBOL),
            base: text(BASE),
            quote: text(QUOTE),
            tick: units(1),
            lot: units(1),
            min_qty: units(1),
            max_qty: units(1_000_000),
            maker_fee_bps: 0,
            taker_fee_bps: 0,
            market_band_bps: 1_000,
        })),
    ];
    let deposit = |account: &str, asset: &str, amount: i64| {
        Command::Deposit(TransferCommand {
            account: text(account),
            asset: text(asset),
            amount: units(amount),
        })
    };
    for maker in 0..MAKER_ACCOUNTS {
        for asset in [BASE, QUOTE] {
            commands.push(deposit(&maker_name(maker), asset, MAKER_FUNDING_UNITS));
        }
    }
    commands.push(deposit(TAKER, BASE, MAKER_FUNDING_UNITS));
    commands.push(deposit(TAKER, QUOTE, TAKER_FUNDING_UNITS));
    commands
}

// ----- the book's layout -----

fn maker_name(maker: usize) -> String {
    format!("m{}", maker % MAKER_ACCOUNTS)
}

/// Price of the bid level `level` places behind the best (0 is the best).
fn bid_price(level: usize) -> i64 {
    MID_PRICE_TICKS - LEVEL_SPACING_TICKS * (level as i64 + 1)
}

fn ask_price(level: usize) -> i64 {
    MID_PRICE_TICKS + LEVEL_SPACING_TICKS * (level as i64 + 1)
}

/// The resting order `index` of a bid level: its account and id.
fn bid_order(level: usize, index: usize) -> (String, String) {
    (maker_name(level * ORDERS_PER_LEVEL + index), format!("b{level}.{index}"))
}

fn ask_order(level: usize, index: usize) -> (String, String) {
    (maker_name(level * ORDERS_PER_LEVEL + index + 1), format!("a{level}.{index}"))
}

/// The extra order `index` at the best ask.
fn extra_best_ask_order(index: usize) -> (String, String) {
    (maker_name(index + 7), format!("x{index}"))
}

/// `ROUND_OPS` bid levels around the middle of the book, each with a deeper level
/// behind it (at depth 10: levels 1 to 8).
fn middle_bid_levels(depth: usize) -> Range<usize> {
    let start = (depth / 2).saturating_sub(ROUND_OPS / 2).max(1);
    assert!(start + ROUND_OPS < depth, "depth {depth} too small for a round");
    start..start + ROUND_OPS
}

// ----- the engine under test -----

struct BenchBook {
    exchange: Exchange,
    events: Vec<Event>,
    seq: u64,
}

impl BenchBook {
    fn empty() -> BenchBook {
        let mut book = BenchBook {
            exchange: Exchange::new(ExchangeConfig::default()),
            events: Vec::with_capacity(4 * SWEEP_LEVELS),
            seq: 0,
        };
        for command in &definitions() {
            book.apply_checked(command);
        }
        book
    }

    /// `depth` levels a side of `ORDERS_PER_LEVEL` orders each, plus `ROUND_OPS` more
    /// at the best ask.
    fn with_depth(depth: usize) -> BenchBook {
        let mut book = BenchBook::empty();
        for level in 0..depth {
            for index in 0..ORDERS_PER_LEVEL {
                let (account, id) = bid_order(level, index);
                book.apply_checked(&gtc(&account, &id, Side::Buy, bid_price(level)));
                let (account, id) = ask_order(level, index);
                book.apply_checked(&gtc(&account, &id, Side::Sell, ask_price(level)));
            }
        }
        for index in 0..ROUND_OPS {
            let (account, id) = extra_best_ask_order(index);
            book.apply_checked(&gtc(&account, &id, Side::Sell, ask_price(0)));
        }
        assert_eq!(book.shape(), (2 * depth * ORDERS_PER_LEVEL + ROUND_OPS, 2 * depth));
        book
    }

    /// Resting orders and price levels (both sides).
    fn shape(&self) -> (usize, usize) {
        let book = self.exchange.book(InstrumentId(0));
        (book.order_count(), book.level_count())
    }

    #[inline]
    fn apply(&mut self, command: &Command<'_>) {
        self.seq += 1;
        self.exchange.apply(Seq(self.seq), None, command, &mut self.events);
        black_box(self.events.len());
        self.events.clear();
    }

    /// Applies `command`, panicking unless it is accepted; its events stay until the
    /// next command.
    fn apply_checked(&mut self, command: &Command<'_>) -> &[Event] {
        self.events.clear();
        self.seq += 1;
        self.exchange.apply(Seq(self.seq), None, command, &mut self.events);
        assert!(
            matches!(self.events.first(), Some(Event::Accepted { .. })),
            "{command:?} gave {:?}",
            self.events
        );
        &self.events
    }
}

fn trade_count(events: &[Event]) -> usize {
    events.iter().filter(|event| matches!(event, Event::Trade(_))).count()
}

/// Commands timed as a round, with what comes before and after them untimed; `prepare`
/// and `restore` are empty or as long as `timed`, element `i` going with `timed[i]`.
struct Round {
    prepare: Vec<Command<'static>>,
    timed: Vec<Command<'static>>,
    restore: Vec<Command<'static>>,
    /// Price levels a whole round adds: after `prepare`, and after `timed`.
    levels_added: (usize, usize),
}

impl Round {
    fn timed_then_restore(
        timed: Vec<Command<'static>>,
        restore: Vec<Command<'static>>,
        levels_added: usize,
    ) -> Round {
        assert_eq!(timed.len(), restore.len());
        Round { prepare: Vec::new(), timed, restore, levels_added: (0, levels_added) }
    }

    /// One round with every event checked: all accepted, no trades, the levels
    /// expected at each step, and the book as it was at the end.
    fn check(&self, book: &mut BenchBook) {
        let shape = book.shape();
        let mut apply_all = |commands: &[Command<'static>]| {
            for command in commands {
                let events = book.apply_checked(command);
                assert_eq!(trade_count(events), 0, "{command:?} traded: {events:?}");
            }
            book.shape().1
        };
        assert_eq!(apply_all(&self.prepare), shape.1 + self.levels_added.0);
        assert_eq!(apply_all(&self.timed), shape.1 + self.levels_added.1);
        apply_all(&self.restore);
        assert_eq!(book.shape(), shape, "a round must leave the book as it found it");
    }

    /// `iters` timed commands, in rounds of at most `timed.len()`.
    fn time(&self, book: &mut BenchBook, iters: u64) -> Duration {
        let mut elapsed = Duration::ZERO;
        let mut left = iters;
        while left > 0 {
            let ops = left.min(self.timed.len() as u64) as usize;
            for command in self.prepare.iter().take(ops) {
                book.apply(command);
            }
            let started = Instant::now();
            for command in &self.timed[..ops] {
                book.apply(command);
            }
            elapsed += started.elapsed();
            for command in self.restore.iter().take(ops) {
                book.apply(command);
            }
            left -= ops as u64;
        }
        elapsed
    }
}

// ----- the benchmarks -----

type Group<'a> = criterion::BenchmarkGroup<'a, criterion::measurement::WallTime>;

/// The book of one depth, built on first use: a run filtered to a few benchmarks does
/// not build the 100,000-level books of the others. Shared by the benchmarks of a
/// group at that depth, each of which leaves it as it found it.
struct LazyBook {
    depth: usize,
    book: Option<BenchBook>,
}

impl LazyBook {
    fn new(depth: usize) -> LazyBook {
        LazyBook { depth, book: None }
    }

    fn get(&mut self) -> &mut BenchBook {
        let depth = self.depth;
        self.book.get_or_insert_with(|| BenchBook::with_depth(depth))
    }
}

impl Drop for LazyBook {
    fn drop(&mut self) {
        if let Some(book) = &self.book {
            assert_eq!(book.exchange.check_invariants(), Ok(()));
        }
    }
}

fn bench_round(group: &mut Group<'_>, name: &str, book: &mut LazyBook, round: &Round) {
    let mut checked = false;
    group.bench_function(BenchmarkId::new(name, book.depth), |bencher| {
        let book = book.get();
        if !checked {
            round.check(book);
            checked = true;
        }
        bencher.iter_custom(|iters| round.time(book, iters));
    });
}

/// A new GTC bid joins an existing level in the middle of the book; or makes a new
/// level there, between two existing ones.
fn bench_add(criterion: &mut Criterion) {
    let mut group = criterion.benchmark_group("add");
    for depth in DEPTHS {
        let mut book = LazyBook::new(depth);
        let levels = middle_bid_levels(depth);
        let ids: Vec<String> = (0..ROUND_OPS).map(|index| format!("n{index}")).collect();
        let cancels: Vec<_> = ids.iter().map(|id| cancel(TAKER, id)).collect();

        let existing_level = bid_price(levels.start);
        let adds = ids.iter().map(|id| gtc(TAKER, id, Side::Buy, existing_level)).collect();
        let round = Round::timed_then_restore(adds, cancels.clone(), 0);
        bench_round(&mut group, "existing_level", &mut book, &round);

        // Each between level `l` and the one behind it.
        let adds = ids
            .iter()
            .zip(levels)
            .map(|(id, level)| gtc(TAKER, id, Side::Buy, bid_price(level) - 1))
            .collect();
        let round = Round::timed_then_restore(adds, cancels, ROUND_OPS);
        bench_round(&mut group, "new_level", &mut book, &round);
    }
    group.finish();
}

/// Cancels of resting bids in the middle of the book: one of several at its level; or
/// the only one, so that the level goes too.
fn bench_cancel(criterion: &mut Criterion) {
    let mut group = criterion.benchmark_group("cancel");
    for depth in DEPTHS {
        let mut book = LazyBook::new(depth);
        let levels = middle_bid_levels(depth);

        let victims: Vec<(String, String, i64)> = levels
            .clone()
            .map(|level| {
                let (account, id) = bid_order(level, 0);
                (account, id, bid_price(level))
            })
            .collect();
        let cancels = victims.iter().map(|(account, id, _)| cancel(account, id)).collect();
        let adds = victims
            .iter()
            .map(|(account, id, price)| gtc(account, id, Side::Buy, *price))
            .collect();
        let round = Round::timed_then_restore(cancels, adds, 0);
        bench_round(&mut group, "in_level", &mut book, &round);

        let ids: Vec<String> = (0..ROUND_OPS).map(|index| format!("n{index}")).collect();
        let round = Round {
            prepare: ids
                .iter()
                .zip(levels)
                .map(|(id, level)| gtc(TAKER, id, Side::Buy, bid_price(level) - 1))
                .collect(),
            timed: ids.iter().map(|id| cancel(TAKER, id)).collect(),
            restore: Vec::new(),
            levels_added: (ROUND_OPS, 0),
        };
        bench_round(&mut group, "last_at_level", &mut book, &round);
    }
    group.finish();
}

/// Amends of resting bids in the middle of the book: a smaller quantity (keeps its
/// place); or a price one level deeper (loses it: off one level, onto the back of
/// another).
fn bench_amend(criterion: &mut Criterion) {
    let mut group = criterion.benchmark_group("amend");
    for depth in DEPTHS {
        let mut book = LazyBook::new(depth);
        let victims: Vec<(String, String, usize)> = middle_bid_levels(depth)
            .map(|level| {
                let (account, id) = bid_order(level, 0);
                (account, id, level)
            })
            .collect();

        let reduces = victims
            .iter()
            .map(|(account, id, _)| amend(account, id, None, Some(ORDER_QTY_LOTS - 1)))
            .collect();
        let restores = victims
            .iter()
            .map(|(account, id, _)| amend(account, id, None, Some(ORDER_QTY_LOTS)))
            .collect();
        let round = Round::timed_then_restore(reduces, restores, 0);
        bench_round(&mut group, "reduce_qty", &mut book, &round);

        let moves = victims
            .iter()
            .map(|(account, id, level)| amend(account, id, Some(bid_price(level + 1)), None))
            .collect();
        let restores = victims
            .iter()
            .map(|(account, id, level)| amend(account, id, Some(bid_price(*level)), None))
            .collect();
        let round = Round::timed_then_restore(moves, restores, 0);
        bench_round(&mut group, "move_price", &mut book, &round);
    }
    group.finish();
}

/// An IOC buy that takes exactly the first order at the best ask. Untimed, after each
/// round, the orders taken are placed again at the back of that level, so its queue
/// turns like a ring and never empties: the order taken next is always known.
struct Matching {
    ioc: Command<'static>,
    /// The best ask level's queue as first built, as orders to place again.
    refills: Vec<Command<'static>>,
    taken: usize,
}

impl Matching {
    fn new() -> Matching {
        let best_ask = ask_price(0);
        let queue = (0..ORDERS_PER_LEVEL)
            .map(|index| ask_order(0, index))
            .chain((0..ROUND_OPS).map(extra_best_ask_order));
        Matching {
            ioc: limit_order(
                TAKER,
                "ioc",
                Side::Buy,
                best_ask,
                ORDER_QTY_LOTS,
                TimeInForce::ImmediateOrCancel,
            ),
            refills: queue.map(|(account, id)| gtc(&account, &id, Side::Sell, best_ask)).collect(),
            taken: 0,
        }
    }

    fn refill(&mut self, book: &mut BenchBook, checked: bool) {
        let command = &self.refills[self.taken % self.refills.len()];
        if checked {
            book.apply_checked(command);
        } else {
            book.apply(command);
        }
        self.taken += 1;
    }

    fn check(&mut self, book: &mut BenchBook) {
        let shape = book.shape();
        for _ in 0..ROUND_OPS {
            let events = book.apply_checked(&self.ioc);
            assert_eq!(trade_count(events), 1, "{events:?}");
            assert!(
                matches!(events.last(), Some(Event::Done { reason: DoneReason::Filled, .. })),
                "{events:?}"
            );
        }
        for _ in 0..ROUND_OPS {
            self.refill(book, true);
        }
        assert_eq!(book.shape(), shape);
    }

    fn time(&mut self, book: &mut BenchBook, iters: u64) -> Duration {
        let mut elapsed = Duration::ZERO;
        let mut left = iters;
        while left > 0 {
            let ops = left.min(ROUND_OPS as u64) as usize;
            let started = Instant::now();
            for _ in 0..ops {
                book.apply(&self.ioc);
            }
            elapsed += started.elapsed();
            for _ in 0..ops {
                self.refill(book, false);
            }
            left -= ops as u64;
        }
        elapsed
    }
}

fn bench_match(criterion: &mut Criterion) {
    let mut group = criterion.benchmark_group("match");
    for depth in DEPTHS {
        let mut book = LazyBook::new(depth);
        let mut matching = Matching::new();
        let mut checked = false;
        group.bench_function(BenchmarkId::new("ioc_one_order", depth), |bencher| {
            let book = book.get();
            if !checked {
                matching.check(book);
                checked = true;
            }
            bencher.iter_custom(|iters| matching.time(book, iters));
        });
    }
    group.finish();
}

/// One IOC buy through 1,000 ask levels of one order each: 1,000 trades, 1,001 `done`s.
/// Each iteration gets a freshly built book, outside the timing.
fn bench_sweep(criterion: &mut Criterion) {
    let asks: Vec<Command<'static>> = (0..SWEEP_LEVELS)
        .map(|level| {
            let (account, id) = ask_order(level, 0);
            gtc(&account, &id, Side::Sell, ask_price(level))
        })
        .collect();
    let setup = || {
        let mut book = BenchBook::empty();
        for command in &asks {
            book.apply(command);
        }
        // Fault the event buffer's pages in here, not in the timed sweep: a running
        // engine reuses one warm buffer.
        book.events.resize(book.events.capacity(), Event::Accepted { seq: Seq(0), account: None });
        book.events.clear();
        book
    };
    let sweep = limit_order(
        TAKER,
        "sweep",
        Side::Buy,
        ask_price(SWEEP_LEVELS - 1),
        ORDER_QTY_LOTS * SWEEP_LEVELS as i64,
        TimeInForce::ImmediateOrCancel,
    );

    let mut book = setup();
    assert_eq!(book.shape(), (SWEEP_LEVELS, SWEEP_LEVELS));
    let events = book.apply_checked(&sweep);
    assert_eq!(trade_count(events), SWEEP_LEVELS);
    assert!(matches!(events.last(), Some(Event::Done { reason: DoneReason::Filled, .. })));
    assert_eq!(book.shape(), (0, 0));

    criterion.bench_function("sweep_1000_levels", |bencher| {
        bencher.iter_batched(
            setup,
            |mut book| {
                book.apply(&sweep);
                book
            },
            BatchSize::LargeInput,
        );
    });
}

fn config() -> Criterion {
    Criterion::default()
        .sample_size(20)
        .measurement_time(Duration::from_secs(2))
        .warm_up_time(Duration::from_millis(500))
}

criterion_group! {
    name = benches;
    config = config();
    targets = bench_add, bench_cancel, bench_amend, bench_match, bench_sweep
}
criterion_main!(benches);
