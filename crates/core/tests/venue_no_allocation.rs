//! A venue that tracks activity allocates nothing per order once warm: records reuse
//! the slots of forgotten ones, the indexes stay within their size, and each account's
//! finished orders and fills are bounded queues. A counting global allocator (this test
//! binary's own) checks it, over a stream whose accounts are already at their limits of
//! finished orders and fills. Only the allocations of the thread that applies the
//! commands are counted (the test harness's own threads may allocate meanwhile).

use std::alloc::{GlobalAlloc, Layout, System};
use std::borrow::Cow;
use std::cell::Cell;
use std::sync::atomic::{AtomicUsize, Ordering};

use bourse_core::command::{AmendCommand, OrderCommand, OrderType, TransferCommand};
use bourse_core::venue::{FILLS_KEPT, FINISHED_ORDERS_KEPT};
use bourse_core::{
    Command, Decimal, Event, Exchange, ExchangeConfig, Side, StpMode, TimeInForce, Venue,
};

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

const ACCOUNTS: [&str; 4] = ["a", "b", "c", "d"];

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
    for account in ACCOUNTS {
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

/// Rounds of: each of eight orders placed, amended in place, moved (sometimes
/// crossing), hit by an IOC and a FOK of another account, and cancelled; every order id
/// is new (a finished one would be rejected while remembered).
fn stream(first_round: usize, rounds: usize) -> Vec<Command<'static>> {
    let mut commands = Vec::new();
    for round in first_round..first_round + rounds {
        for index in 0..8 {
            let account = ACCOUNTS[index % 4];
            let taker = ACCOUNTS[(index + 1) % 4];
            let side = if index % 2 == 0 { Side::Buy } else { Side::Sell };
            let offset = ((round * 7 + index * 3) % 20) as i64;
            let price = match side {
                Side::Buy => 1_000 - offset,
                Side::Sell => 1_001 + offset,
            };
            let crossing_price = match side {
                Side::Buy => 1_010,
                Side::Sell => 990,
            };
            let id = format!("o{index}-{round}");
            let order = |id: String, side, price, qty, time_in_force, account: &'static str| {
                Command::Order(OrderCommand {
                    account: account.into(),
                    id: Cow::Owned(id),
                    symbol: Cow::Borrowed("BTC-USD"),
                    side,
                    order_type: OrderType::Limit { price: number(price) },
                    qty: number(qty),
                    time_in_force,
                    post_only: false,
                    stp: StpMode::CancelMaker,
                })
            };
            commands.push(order(id.clone(), side, price, 50, TimeInForce::GoodTillCancel, account));
            commands.push(Command::Amend(AmendCommand {
                account: account.into(),
                id: Cow::Owned(id.clone()),
                price: None,
                qty: Some(number(40)),
            }));
            commands.push(Command::Amend(AmendCommand {
                account: account.into(),
                id: Cow::Owned(id.clone()),
                price: Some(number(if round % 3 == 0 { crossing_price } else { price - 1 })),
                qty: None,
            }));
            let opposite = side.opposite();
            let ioc = format!("i{index}-{round}");
            commands.push(order(
                ioc,
                opposite,
                crossing_price,
                15,
                TimeInForce::ImmediateOrCancel,
                taker,
            ));
            let fok = format!("f{index}-{round}");
            commands.push(order(fok, opposite, crossing_price, 5, TimeInForce::FillOrKill, taker));
            commands.push(Command::Cancel { account: account.into(), id: Cow::Owned(id) });
        }
    }
    commands
}

#[test]
fn a_tracking_venue_allocates_nothing_per_order_once_warm() {
    let mut venue = Venue::new(Exchange::new(ExchangeConfig::default()), true);
    let mut events: Vec<Event> = Vec::with_capacity(1_024);
    let mut seq = 0u64;
    let warm_up = stream(0, 1_000);
    let measured = stream(1_000, 500);
    let mut apply_all = |venue: &mut Venue, commands: &[Command<'_>]| {
        let (mut trades, mut rejections) = (0usize, 0usize);
        for command in commands {
            seq += 1;
            venue.apply(seq, None, command, &mut events);
            trades += events.iter().filter(|event| matches!(event, Event::Trade(_))).count();
            rejections += usize::from(matches!(events.first(), Some(Event::Rejected { .. })));
            events.clear();
        }
        (trades, rejections)
    };
    apply_all(&mut venue, &definitions());
    apply_all(&mut venue, &warm_up);
    let activity = venue.activity().unwrap();
    for account in 0..4 {
        let account = bourse_core::ids::AccountId(account);
        assert_eq!(activity.finished_order_count(account), FINISHED_ORDERS_KEPT);
        assert_eq!(activity.fill_count(account), FILLS_KEPT);
    }

    COUNTED.with(|counted| counted.set(true));
    let (trades, rejections) = apply_all(&mut venue, &measured);
    COUNTED.with(|counted| counted.set(false));
    let allocations = ALLOCATIONS.load(Ordering::Relaxed);

    assert!(trades > 1_000, "the stream must match a lot, not only rest: {trades} trades");
    assert!(rejections < measured.len() / 4, "{rejections} rejections");
    assert_eq!(allocations, 0, "{allocations} allocations in {} commands", measured.len());
    venue.check_invariants().unwrap();
}
