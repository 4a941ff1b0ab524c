//! The order flow of the no-allocation tests (`no_allocation_per_order.rs`,
//! `venue_no_allocation.rs`): one instrument, four funded accounts, and rounds in which
//! each of eight orders is placed, amended in place, moved (sometimes crossing), hit by
//! an IOC and a FOK of another account (and on spot a market buy spending an amount),
//! and cancelled; plus a feeder that applies them
//! with one reused event buffer, so that only the engine can allocate.
#![allow(dead_code)]

use std::borrow::Cow;
use std::ops::Range;

use bourse_core::command::{
    AmendCommand, AmendQtyKind, FutureCommand, InstrumentCommand, OrderCommand, OrderSize,
    OrderType, TransferCommand,
};
use bourse_core::{
    Command, Decimal, Event, Exchange, Offset, Seq, Side, StpMode, TimeInForce, Venue,
};

pub const ACCOUNTS: [&str; 4] = ["a", "b", "c", "d"];

fn number(value: i64) -> Decimal {
    Decimal::from_units(i128::from(value), 0)
}

/// BTC and USD (no decimals), BTC-USD (tick 1, lot 1, qty 1..=1000, maker 10 bps, taker
/// 20 bps), and a deposit of 10^12 of each asset for each account.
pub fn definitions() -> Vec<Command<'static>> {
    let mut commands = vec![
        Command::Asset { asset: Cow::Borrowed("BTC"), decimals: 0 },
        Command::Asset { asset: Cow::Borrowed("USD"), decimals: 0 },
        Command::Instrument(Box::new(InstrumentCommand {
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

/// CNY (no decimals), the futures contract FUT (tick 1, lot 1, qty 1..=100000,
/// multiplier 1, margin 100, maker fee 1, taker fee 2, no close-today rule), a deposit
/// of 10^12 CNY for each account, and then, from crossing orders, a long and a short
/// position of 40000 for each account (so that close orders always have something to
/// take).
pub fn futures_definitions() -> Vec<Command<'static>> {
    let mut commands = vec![
        Command::Asset { asset: Cow::Borrowed("CNY"), decimals: 0 },
        Command::Future(Box::new(FutureCommand {
            symbol: Cow::Borrowed("FUT"),
            settle: Cow::Borrowed("CNY"),
            tick: number(1),
            lot: number(1),
            min_qty: number(1),
            max_qty: number(100_000),
            multiplier: number(1),
            margin: number(100),
            maker_fee: number(1),
            taker_fee: number(2),
            market_band_bps: 500,
            close_today: false,
        })),
    ];
    for account in ACCOUNTS {
        commands.push(Command::Deposit(TransferCommand {
            account: account.into(),
            asset: Cow::Borrowed("CNY"),
            amount: number(1_000_000_000_000),
        }));
    }
    for (index, (buyer, seller)) in
        [("a", "b"), ("b", "a"), ("c", "d"), ("d", "c")].into_iter().enumerate()
    {
        for (account, side) in [(buyer, Side::Buy), (seller, Side::Sell)] {
            commands.push(Command::Order(OrderCommand {
                account: account.into(),
                id: Cow::Owned(format!("seed-{index}")),
                symbol: Cow::Borrowed("FUT"),
                side,
                order_type: OrderType::Limit { price: number(1_000) },
                size: OrderSize::of_qty(number(40_000)),
                time_in_force: TimeInForce::GoodTillCancel,
                post_only: false,
                stp: StpMode::CancelMaker,
                offset: Offset::Open,
            }));
        }
    }
    commands
}

/// The ids of one order of one round: `ids(index, round)` gives the order's own, its
/// IOC taker's and its FOK taker's.
pub type Ids = fn(usize, usize) -> [String; 3];

/// `rounds` of: each of eight orders (of the accounts in turn, buys and sells
/// alternating, at prices that vary by round) placed gtc, amended in place, moved (across
/// the book every third round), hit by an IOC and a FOK of the next account, and
/// cancelled.
pub fn stream(rounds: Range<usize>, ids: Ids) -> Vec<Command<'static>> {
    stream_on("BTC-USD", |_, _| [Offset::Open; 2], rounds, ids)
}

/// `stream` on the futures contract FUT (`futures_definitions`): the resting orders
/// open in even rounds and close in odd ones, their takers open and close in turn, and
/// each round ends with a daily settlement.
pub fn futures_stream(rounds: Range<usize>, ids: Ids) -> Vec<Command<'static>> {
    fn offset(even: bool) -> Offset {
        if even {
            Offset::Open
        } else {
            Offset::Close
        }
    }
    let offsets: fn(usize, usize) -> [Offset; 2] =
        |index, round| [offset(round % 2 == 0), offset((round + index) % 2 == 0)];
    let mut commands = Vec::new();
    for round in rounds {
        commands.extend(stream_on("FUT", offsets, round..round + 1, ids));
        // Each round is a trading day: its settlement makes every side one history
        // entry, as a venue's day does (without it today's entries only grow).
        commands.push(Command::Settle {
            symbol: Cow::Borrowed("FUT"),
            price: number(1_000 + (round % 5) as i64),
            is_final: false,
        });
    }
    commands
}

/// `stream` on `symbol`, with each order's offset from `offsets(index, round)`: the
/// resting order's, then its takers'.
fn stream_on(
    symbol: &'static str,
    offsets: fn(usize, usize) -> [Offset; 2],
    rounds: Range<usize>,
    ids: Ids,
) -> Vec<Command<'static>> {
    let mut commands = Vec::new();
    for round in rounds {
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
            let [id, ioc, fok] = ids(index, round);
            let [maker_offset, taker_offset] = offsets(index, round);
            let order = |id: String, side, price, qty, time_in_force, account: &'static str| {
                let offset = if id.starts_with('o') { maker_offset } else { taker_offset };
                Command::Order(OrderCommand {
                    account: account.into(),
                    id: Cow::Owned(id),
                    symbol: Cow::Borrowed(symbol),
                    side,
                    order_type: OrderType::Limit { price: number(price) },
                    size: OrderSize::of_qty(number(qty)),
                    time_in_force,
                    post_only: false,
                    stp: StpMode::CancelMaker,
                    offset,
                })
            };
            commands.push(order(id.clone(), side, price, 50, TimeInForce::GoodTillCancel, account));
            commands.push(Command::Amend(AmendCommand {
                account: account.into(),
                id: Cow::Owned(id.clone()),
                price: None,
                qty: Some(number(40)),
                qty_kind: AmendQtyKind::Remaining,
            }));
            commands.push(Command::Amend(AmendCommand {
                account: account.into(),
                id: Cow::Owned(id.clone()),
                price: Some(number(if round % 3 == 0 { crossing_price } else { price - 1 })),
                qty: None,
                qty_kind: AmendQtyKind::Remaining,
            }));
            let opposite = side.opposite();
            commands.push(order(
                ioc,
                opposite,
                crossing_price,
                15,
                TimeInForce::ImmediateOrCancel,
                taker,
            ));
            commands.push(order(fok, opposite, crossing_price, 5, TimeInForce::FillOrKill, taker));
            // On spot, a market buy spending an amount (`quote_qty`) too.
            if symbol == "BTC-USD" {
                commands.push(Command::Order(OrderCommand {
                    account: taker.into(),
                    id: Cow::Owned(format!("{id}-spend")),
                    symbol: Cow::Borrowed(symbol),
                    side: Side::Buy,
                    order_type: OrderType::Market,
                    size: OrderSize::of_quote_qty(number(3_500)),
                    time_in_force: TimeInForce::ImmediateOrCancel,
                    post_only: false,
                    stp: StpMode::CancelMaker,
                    offset: Offset::Open,
                }));
            }
            commands.push(Command::Cancel { account: account.into(), id: Cow::Owned(id) });
        }
    }
    commands
}

/// What commands are applied to: an exchange or a venue.
pub trait Applies {
    fn apply_command(&mut self, seq: u64, command: &Command<'_>, events: &mut Vec<Event>);
}

impl Applies for Exchange {
    fn apply_command(&mut self, seq: u64, command: &Command<'_>, events: &mut Vec<Event>) {
        self.apply(Seq(seq), None, command, events);
    }
}

impl Applies for Venue {
    fn apply_command(&mut self, seq: u64, command: &Command<'_>, events: &mut Vec<Event>) {
        self.apply(Seq(seq), None, command, events);
    }
}

/// Applies commands at consecutive seqs into one event buffer, allocated up front and
/// cleared after each command.
pub struct Feeder {
    seq: u64,
    events: Vec<Event>,
}

impl Default for Feeder {
    fn default() -> Self {
        Feeder { seq: 0, events: Vec::with_capacity(1_024) }
    }
}

impl Feeder {
    /// Applies `commands` to `target`; returns how many trades they made and how many of
    /// them were rejected.
    pub fn feed(&mut self, target: &mut impl Applies, commands: &[Command<'_>]) -> (usize, usize) {
        let (mut trades, mut rejections) = (0usize, 0usize);
        for command in commands {
            self.seq += 1;
            target.apply_command(self.seq, command, &mut self.events);
            trades += self.events.iter().filter(|event| matches!(event, Event::Trade(_))).count();
            rejections += usize::from(matches!(self.events.first(), Some(Event::Rejected { .. })));
            self.events.clear();
        }
        (trades, rejections)
    }
}
