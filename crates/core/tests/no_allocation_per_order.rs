//! The hot path allocates nothing per order: once the pools are warm, placing, resting,
//! amending (keeping or losing priority), matching and cancelling orders makes no heap
//! allocation at all. A counting global allocator (this test binary's own) checks it,
//! counting only the measuring thread (the test harness's own threads allocate too).

use std::alloc::{GlobalAlloc, Layout, System};
use std::borrow::Cow;
use std::cell::Cell;
use std::sync::atomic::{AtomicUsize, Ordering};

use bourse_core::command::{AmendCommand, OrderCommand, OrderType, TransferCommand};
use bourse_core::{Command, Decimal, Event, Exchange, ExchangeConfig, Side, StpMode, TimeInForce};

struct CountingAllocator;

static ALLOCATIONS: AtomicUsize = AtomicUsize::new(0);

thread_local! {
    /// Whether this thread's allocations are counted.
    static COUNTED: Cell<bool> = const { Cell::new(false) };
}

fn count() {
    if COUNTED.try_with(Cell::get).unwrap_or(false) {
        ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
    }
}

unsafe impl GlobalAlloc for CountingAllocator {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        count();
        unsafe { System.alloc(layout) }
    }

    unsafe fn dealloc(&self, pointer: *mut u8, layout: Layout) {
        unsafe { System.dealloc(pointer, layout) }
    }

    unsafe fn realloc(&self, pointer: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        count();
        unsafe { System.realloc(pointer, layout, new_size) }
    }
}

#[global_allocator]
static GLOBAL: CountingAllocator = CountingAllocator;

fn number(value: i64) -> Decimal {
    Decimal::from_units(i128::from(value), 0)
}

fn definitions() -> Vec<Command<'static>> {
    let mut commands = vec![
        Command::Asset { asset: Cow::Borrowed("BTC"), decimals: 0 },
        Command::Asset { asset: Cow::Borrowed("USD"), decimals: 0 },
        Command::Instrument(Box::new(bourse_core::command::InstrumentCommand {
            symbol: Cow::Borrowed("BTC-USD"),
            base: Cow::Borrowed("BTC"),
            quote: Cow::Borrowed("USD"),
            tick: number(1),
            lot: number(1),
            min_qty: number(1),
            max_qty: number(1_000),
            maker_fee_bps: 10,
            taker_fee_bps: 20,
            market_band_bps: 500,
        })),
    ];
    for account in ["a", "b", "c", "d"] {
        for asset in ["BTC", "USD"] {
            commands.push(Command::Deposit(TransferCommand {
                account: account.into(),
                asset: Cow::Borrowed(asset),
                amount: number(1_000_000_000_000),
            }));
        }
    }
    commands
}

/// A deterministic stream over a fixed set of order ids: each id is placed, amended in
/// place, moved (possibly crossing), hit by IOCs from other accounts, and cancelled,
/// over and over, so every path runs many times with the pools already warm.
fn stream(rounds: usize) -> Vec<Command<'static>> {
    const IDS: [&str; 8] = ["o0", "o1", "o2", "o3", "o4", "o5", "o6", "o7"];
    const ACCOUNTS: [&str; 4] = ["a", "b", "c", "d"];
    let mut commands = Vec::new();
    for round in 0..rounds {
        for (index, id) in IDS.iter().enumerate() {
            let account = ACCOUNTS[index % 4];
            let side = if index % 2 == 0 { Side::Buy } else { Side::Sell };
            let offset = ((round * 7 + index * 3) % 20) as i64;
            let price = match side {
                Side::Buy => 1_000 - offset,
                Side::Sell => 1_001 + offset,
            };
            let order =
                |id: &'static str, side, price, qty, time_in_force, account: &'static str| {
                    Command::Order(OrderCommand {
                        account: account.into(),
                        id: Cow::Borrowed(id),
                        symbol: Cow::Borrowed("BTC-USD"),
                        side,
                        order_type: OrderType::Limit { price: number(price) },
                        qty: number(qty),
                        time_in_force,
                        post_only: false,
                        stp: StpMode::CancelMaker,
                    })
                };
            commands.push(order(id, side, price, 50, TimeInForce::GoodTillCancel, account));
            commands.push(Command::Amend(AmendCommand {
                account: account.into(),
                id: Cow::Borrowed(id),
                price: None,
                qty: Some(number(40)),
            }));
            let crossing_price = match side {
                Side::Buy => 1_010,
                Side::Sell => 990,
            };
            commands.push(Command::Amend(AmendCommand {
                account: account.into(),
                id: Cow::Borrowed(id),
                price: Some(number(if round % 3 == 0 { crossing_price } else { price - 1 })),
                qty: None,
            }));
            let taker = ACCOUNTS[(index + 1) % 4];
            commands.push(order(
                "ioc",
                side.opposite(),
                crossing_price,
                15,
                TimeInForce::ImmediateOrCancel,
                taker,
            ));
            commands.push(order(
                "fok",
                side.opposite(),
                crossing_price,
                5,
                TimeInForce::FillOrKill,
                taker,
            ));
            commands.push(Command::Cancel { account: account.into(), id: Cow::Borrowed(id) });
        }
    }
    commands
}

#[test]
fn orders_placed_amended_matched_and_cancelled_allocate_nothing_once_warm() {
    let mut exchange = Exchange::new(ExchangeConfig::default());
    let mut events: Vec<Event> = Vec::with_capacity(1_024);
    let mut seq = 0u64;
    let warm_up = stream(50);
    let measured = stream(500);
    let mut apply_all = |exchange: &mut Exchange, commands: &[Command<'_>]| {
        let (mut trades, mut rejections) = (0usize, 0usize);
        for command in commands {
            seq += 1;
            exchange.apply(seq, None, command, &mut events);
            trades += events.iter().filter(|event| matches!(event, Event::Trade(_))).count();
            rejections += usize::from(matches!(events.first(), Some(Event::Rejected { .. })));
            events.clear();
        }
        (trades, rejections)
    };
    apply_all(&mut exchange, &definitions());
    apply_all(&mut exchange, &warm_up);

    let before = ALLOCATIONS.load(Ordering::Relaxed);
    COUNTED.with(|counted| counted.set(true));
    let (trades, _) = apply_all(&mut exchange, &measured);
    COUNTED.with(|counted| counted.set(false));
    let allocations = ALLOCATIONS.load(Ordering::Relaxed) - before;

    assert!(trades > 1_000, "the stream must match a lot, not only rest: {trades} trades");
    assert_eq!(allocations, 0, "{allocations} allocations in {} commands", measured.len());
    exchange.check_invariants().unwrap();
}
