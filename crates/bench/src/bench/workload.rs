//! Benchmark workloads: command streams prepared before any timing starts.
//!
//! - `exchange-core`: exchange-core's own 3-million-command benchmark stream
//!   (`shared/anchors/exchange-core/`), read from its file.
//! - `ec-mix`: a generated stream with exchange-core's mix: one symbol, 1,000 accounts,
//!   about 1,000 resting orders over about 500 levels, sizes 1–126 lots; 71% amend-price,
//!   12.6% new GTC, 7.2% reduce, 7.2% cancel, 1.8% IOC, 0.06% FOK.
//! - `ec-mix-100`: the same mix spread over 100 symbols.
//! - `ec-mix-futures`: the same mix on one futures contract (`futures.md`), half the new
//!   orders closing: every account starts with a long and a short position (opened by
//!   crossing orders in the setup), and a close order takes from it; per-lot margin and
//!   fees, realised profit and reservations all run.
//!
//! The generator drives a real `Exchange` while it generates, so it only amends, reduces
//! and cancels orders that are still open, and keeps the book near its target size.

use std::borrow::Cow;
use std::path::Path;

use bourse_core::command::{
    AmendCommand, AmendQtyKind, FutureCommand, InstrumentCommand, OrderCommand, OrderType,
    PositionSide, TransferCommand,
};
use bourse_core::format::parse_line;
use bourse_core::futures::Takes;
use bourse_core::ids::InstrumentId;
use bourse_core::{
    AccountRef, Command, Decimal, Exchange, ExchangeConfig, Offset, Seq, Side, StpMode, TimeInForce,
};

use crate::input::{self, Line, LINE_BYTES_MAX};

/// Commands to apply before timing (definitions, deposits, prefill) and the timed ones.
pub struct Workload {
    pub name: String,
    pub setup: Vec<Command<'static>>,
    pub measured: Vec<Command<'static>>,
}

/// Reads a replay-format file; the first `setup_lines` lines are setup, the rest are
/// measured. Malformed lines are an error here: a benchmark input must be clean.
pub fn from_file(name: &str, path: &Path, setup_lines: usize) -> Result<Workload, String> {
    let mut reader = input::open(path)?;
    let mut commands = Vec::new();
    let mut line_number = 0usize;
    input::for_each_line(&mut *reader, |line| {
        line_number += 1;
        let Line::Complete(line) = line else {
            return Err(format!("line {line_number}: longer than {LINE_BYTES_MAX} bytes"));
        };
        let text =
            std::str::from_utf8(line).map_err(|_| format!("line {line_number}: not UTF-8"))?;
        if text.trim_ascii().is_empty() {
            return Ok(());
        }
        let parsed = parse_line(text).map_err(|error| format!("line {line_number}: {error}"))?;
        commands.push(parsed.command.into_owned());
        Ok(())
    })?;
    let measured = commands.split_off(setup_lines.min(commands.len()));
    Ok(Workload { name: name.to_string(), setup: commands, measured })
}

/// splitmix64: a small, fixed, seedable generator, so a workload is the same on every
/// run and machine.
pub struct SplitMix64(u64);

impl SplitMix64 {
    pub fn new(seed: u64) -> SplitMix64 {
        SplitMix64(seed)
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut mixed = self.0;
        mixed = (mixed ^ (mixed >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        mixed = (mixed ^ (mixed >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        mixed ^ (mixed >> 31)
    }

    /// Uniform in `0..bound`.
    pub fn below(&mut self, bound: u64) -> u64 {
        ((u128::from(self.next_u64()) * u128::from(bound)) >> 64) as u64
    }
}

/// Parameters of the generated exchange-core-like mix.
pub struct MixSpec {
    pub symbols: usize,
    pub accounts: usize,
    pub resting_orders_target: usize,
    pub commands: usize,
    pub seed: u64,
    /// Spot instruments, or futures contracts with half the new orders closing.
    pub market: Market,
}

#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Market {
    Spot,
    Futures,
}

/// Each account's long and short position before the futures mix starts, in lots:
/// far more than the closes of a run take from one account.
const FUTURES_SEED_LOTS: i64 = 1_000_000;

const MID_PRICE_TICKS: i64 = 100_000;
/// Resting prices spread this many ticks either side of the middle (about 500 levels).
const HALF_SPREAD_TICKS: u64 = 250;
const SIZE_LOTS_MAX: u64 = 126;
const FUNDING_UNITS: &str = "1000000000000000";
/// A futures account's CNY: 10^12 (10^14 units at 2 decimals), so that a thousand
/// accounts stay within the range of one asset's total (2^63 units).
const FUTURES_FUNDING: &str = "1000000000000";

/// Per-mille weights of the actions, in exchange-core's proportions.
const MIX_PER_100K: [(Action, u64); 6] = [
    (Action::AmendPrice, 71_000),
    (Action::NewGtc, 12_600),
    (Action::Reduce, 7_200),
    (Action::Cancel, 7_200),
    (Action::Ioc, 1_800),
    (Action::Fok, 60),
];

#[derive(Clone, Copy, PartialEq, Eq)]
enum Action {
    AmendPrice,
    NewGtc,
    Reduce,
    Cancel,
    Ioc,
    Fok,
}

struct Generator {
    spec: MixSpec,
    random: SplitMix64,
    exchange: Exchange,
    events: Vec<bourse_core::Event>,
    /// Orders that may still be open: (account index, order number, symbol index).
    candidates: Vec<(usize, u64, usize)>,
    next_order_number: u64,
    seq: u64,
    account_names: Vec<String>,
    symbol_names: Vec<String>,
}

pub fn generate_mix(name: &str, spec: MixSpec) -> Workload {
    let mut generator = Generator {
        account_names: (0..spec.accounts).map(|index| format!("a{index}")).collect(),
        symbol_names: (0..spec.symbols).map(|index| format!("S{index}-USD")).collect(),
        random: SplitMix64::new(spec.seed),
        exchange: Exchange::new(ExchangeConfig::default()),
        events: Vec::new(),
        candidates: Vec::new(),
        next_order_number: 1,
        seq: 0,
        spec,
    };
    let mut setup = generator.definitions();
    if generator.spec.market == Market::Futures {
        let seeds = generator.futures_seed();
        setup.extend(seeds);
    }
    let prefill = generator.spec.resting_orders_target * generator.spec.symbols;
    for _ in 0..prefill {
        let command = generator.new_order(TimeInForce::GoodTillCancel);
        setup.push(generator.apply(command));
    }
    let mut measured = Vec::with_capacity(generator.spec.commands);
    while measured.len() < generator.spec.commands {
        if let Some(command) = generator.next_command() {
            measured.push(generator.apply(command));
        }
    }
    Workload { name: name.to_string(), setup, measured }
}

fn text(value: impl ToString) -> Cow<'static, str> {
    Cow::Owned(value.to_string())
}

fn decimal(value: i64) -> Decimal {
    Decimal::from_units(i128::from(value), 0)
}

impl Generator {
    fn apply(&mut self, command: Command<'static>) -> Command<'static> {
        self.seq += 1;
        self.exchange.apply(Seq(self.seq), None, &command, &mut self.events);
        self.events.clear();
        command
    }

    fn definitions(&mut self) -> Vec<Command<'static>> {
        if self.spec.market == Market::Futures {
            return self.futures_definitions();
        }
        let mut commands = vec![Command::Asset { asset: text("USD"), decimals: 0 }];
        for symbol in 0..self.spec.symbols {
            commands.push(Command::Asset { asset: text(format!("S{symbol}")), decimals: 0 });
            commands.push(Command::Instrument(Box::new(InstrumentCommand {
                symbol: text(&self.symbol_names[symbol]),
                base: text(format!("S{symbol}")),
                quote: text("USD"),
                tick: decimal(1),
                lot: decimal(1),
                min_qty: decimal(1),
                max_qty: decimal(1_000_000),
                maker_fee_bps: 0,
                taker_fee_bps: 0,
                market_band_bps: 1_000,
            })));
        }
        for account in 0..self.spec.accounts {
            let assets = std::iter::once("USD".to_string())
                .chain((0..self.spec.symbols).map(|symbol| format!("S{symbol}")));
            for asset in assets {
                commands.push(Command::Deposit(TransferCommand {
                    account: text(&self.account_names[account]),
                    asset: text(asset),
                    amount: Decimal::parse(FUNDING_UNITS).expect("a valid constant"),
                }));
            }
        }
        commands.into_iter().map(|command| self.apply(command)).collect()
    }

    /// CNY with 2 decimals and one futures contract per symbol (tick 1, lot 1,
    /// multiplier 1, margin 100, maker fee 0.5, taker fee 1), every account funded.
    fn futures_definitions(&mut self) -> Vec<Command<'static>> {
        let mut commands = vec![Command::Asset { asset: text("CNY"), decimals: 2 }];
        for symbol in 0..self.spec.symbols {
            commands.push(Command::Future(Box::new(FutureCommand {
                symbol: text(&self.symbol_names[symbol]),
                settle: text("CNY"),
                tick: decimal(1),
                lot: decimal(1),
                min_qty: decimal(1),
                max_qty: decimal(FUTURES_SEED_LOTS),
                multiplier: decimal(1),
                margin: decimal(100),
                maker_fee: Decimal::from_units(50, 2),
                taker_fee: decimal(1),
                market_band_bps: 1_000,
                close_today: false,
            })));
        }
        for account in 0..self.spec.accounts {
            commands.push(Command::Deposit(TransferCommand {
                account: text(&self.account_names[account]),
                asset: text("CNY"),
                amount: Decimal::parse(FUTURES_FUNDING).expect("a valid constant"),
            }));
        }
        commands.into_iter().map(|command| self.apply(command)).collect()
    }

    /// Every account opens a long and a short position of `FUTURES_SEED_LOTS` on every
    /// contract, each against the next account, at the middle price.
    fn futures_seed(&mut self) -> Vec<Command<'static>> {
        let mut commands = Vec::new();
        for symbol in 0..self.spec.symbols {
            for account in 0..self.spec.accounts {
                let next = (account + 1) % self.spec.accounts;
                for (trader, side) in [(account, Side::Buy), (next, Side::Sell)] {
                    let order_number = self.next_order_number;
                    self.next_order_number += 1;
                    let command = Command::Order(OrderCommand {
                        account: text(&self.account_names[trader]).into(),
                        id: text(order_number),
                        symbol: text(&self.symbol_names[symbol]),
                        side,
                        order_type: OrderType::Limit { price: decimal(MID_PRICE_TICKS) },
                        size: bourse_core::OrderSize::of_qty(decimal(FUTURES_SEED_LOTS)),
                        time_in_force: TimeInForce::GoodTillCancel,
                        post_only: false,
                        stp: StpMode::None,
                        offset: Offset::Open,
                    });
                    commands.push(self.apply(command));
                }
            }
        }
        debug_assert_eq!(self.exchange.open_order_count(), 0, "the seeds all cross");
        commands
    }

    /// On a futures mix, half the new orders close (when the account may still close
    /// that much on that side), the rest open.
    fn offset(&mut self, account: usize, symbol: usize, side: Side, qty: i64) -> Offset {
        if self.spec.market == Market::Spot || self.random.below(2) == 0 {
            return Offset::Open;
        }
        let Some(account) = self.exchange.ledger().find_account(&self.account_names[account])
        else {
            return Offset::Open;
        };
        let closable = self
            .exchange
            .positions(InstrumentId(symbol as u32))
            .and_then(|positions| {
                positions.side(account, PositionSide::of_order(side, Offset::Close))
            })
            .map_or(0, |state| state.closable(Takes::HistoryThenToday).0);
        if qty <= closable {
            Offset::Close
        } else {
            Offset::Open
        }
    }

    fn pick_action(&mut self) -> Action {
        let mut roll = self.random.below(MIX_PER_100K.iter().map(|(_, weight)| weight).sum());
        for (action, weight) in MIX_PER_100K {
            if roll < weight {
                return action;
            }
            roll -= weight;
        }
        Action::AmendPrice
    }

    fn next_command(&mut self) -> Option<Command<'static>> {
        let open = self.exchange.open_order_count();
        let target = self.spec.resting_orders_target * self.spec.symbols;
        let action = match self.pick_action() {
            // Keep the book near its target size, as exchange-core's generator does.
            Action::NewGtc if open > target + target / 10 => Action::Cancel,
            Action::Cancel if open < target - target / 10 => Action::NewGtc,
            action => action,
        };
        match action {
            Action::NewGtc => Some(self.new_order(TimeInForce::GoodTillCancel)),
            Action::Ioc => Some(self.new_order(TimeInForce::ImmediateOrCancel)),
            Action::Fok => Some(self.new_order(TimeInForce::FillOrKill)),
            Action::AmendPrice | Action::Reduce | Action::Cancel => self.touch_open_order(action),
        }
    }

    fn random_side(&mut self) -> Side {
        if self.random.below(2) == 0 {
            Side::Buy
        } else {
            Side::Sell
        }
    }

    /// A resting price on `side`: mostly behind the middle, a few ticks past it now and
    /// then, so that about one new or moved order in ten trades.
    fn resting_price(&mut self, side: Side) -> i64 {
        let behind = self.random.below(HALF_SPREAD_TICKS + 4) as i64 - 3;
        match side {
            Side::Buy => MID_PRICE_TICKS - behind,
            Side::Sell => MID_PRICE_TICKS + behind,
        }
    }

    fn new_order(&mut self, time_in_force: TimeInForce) -> Command<'static> {
        let account = self.random.below(self.spec.accounts as u64) as usize;
        let symbol = self.random.below(self.spec.symbols as u64) as usize;
        let side = self.random_side();
        let order_number = self.next_order_number;
        self.next_order_number += 1;
        let price = match time_in_force {
            TimeInForce::GoodTillCancel => self.resting_price(side),
            // Takers priced at a far cap, like exchange-core's IOC and FOK orders.
            _ => match side {
                Side::Buy => MID_PRICE_TICKS + 2 * HALF_SPREAD_TICKS as i64,
                Side::Sell => MID_PRICE_TICKS - 2 * HALF_SPREAD_TICKS as i64,
            },
        };
        let qty = 1 + self.random.below(SIZE_LOTS_MAX) as i64;
        let offset = self.offset(account, symbol, side, qty);
        if time_in_force == TimeInForce::GoodTillCancel {
            self.candidates.push((account, order_number, symbol));
        }
        Command::Order(OrderCommand {
            account: text(&self.account_names[account]).into(),
            id: text(order_number),
            symbol: text(&self.symbol_names[symbol]),
            side,
            order_type: OrderType::Limit { price: decimal(price) },
            size: bourse_core::OrderSize::of_qty(decimal(qty)),
            time_in_force,
            post_only: false,
            stp: StpMode::None,
            offset,
        })
    }

    /// Amends or cancels a random order that is still open; `None` if there is none.
    fn touch_open_order(&mut self, action: Action) -> Option<Command<'static>> {
        loop {
            if self.candidates.is_empty() {
                return None;
            }
            let index = self.random.below(self.candidates.len() as u64) as usize;
            let (account, order_number, _) = self.candidates[index];
            let account_name = &self.account_names[account];
            let Some(account_id) = self.exchange.ledger().find_account(account_name) else {
                self.candidates.swap_remove(index);
                continue;
            };
            let id = order_number.to_string();
            let Some((_, order)) = self.exchange.open_order(account_id, &id) else {
                self.candidates.swap_remove(index);
                continue;
            };
            let (side, price, remaining) = (order.side, order.price.0, order.remaining.0);
            let account: AccountRef = text(account_name).into();
            let command = match action {
                Action::Cancel => Command::Cancel { account, id: text(id) },
                Action::Reduce if remaining > 1 => Command::Amend(AmendCommand {
                    account,
                    id: text(id),
                    price: None,
                    qty: Some(decimal(
                        remaining - 1 - self.random.below(remaining as u64 - 1) as i64,
                    )),
                    qty_kind: AmendQtyKind::Remaining,
                }),
                Action::Reduce => Command::Cancel { account, id: text(id) },
                _ => {
                    let mut new_price = self.resting_price(side);
                    if new_price == price {
                        new_price += 1;
                    }
                    Command::Amend(AmendCommand {
                        account,
                        id: text(id),
                        price: Some(decimal(new_price)),
                        qty: None,
                        qty_kind: AmendQtyKind::Remaining,
                    })
                }
            };
            return Some(command);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_generated_mix_is_accepted_and_keeps_the_book_near_its_target() {
        let workload = generate_mix(
            "ec-mix",
            MixSpec {
                symbols: 1,
                accounts: 100,
                resting_orders_target: 1_000,
                commands: 20_000,
                seed: 1,
                market: Market::Spot,
            },
        );
        let mut exchange = Exchange::new(ExchangeConfig::default());
        let mut events = Vec::new();
        let mut rejected = 0;
        for (seq, command) in workload.setup.iter().chain(&workload.measured).enumerate() {
            exchange.apply(Seq(seq as u64 + 1), None, command, &mut events);
            rejected += events
                .iter()
                .filter(|event| matches!(event, bourse_core::Event::Rejected { .. }))
                .count();
            events.clear();
        }
        assert_eq!(rejected, 0);
        let open = exchange.open_order_count();
        assert!((800..=1_200).contains(&open), "{open} open orders");
        let book = exchange.book(bourse_core::ids::InstrumentId(0));
        let levels = book.levels(Side::Buy).len() + book.levels(Side::Sell).len();
        assert!((300..=600).contains(&levels), "{levels} levels");
        exchange.check_invariants().unwrap();
    }
}

#[cfg(test)]
mod futures_tests {
    use super::*;

    #[test]
    fn the_futures_mix_is_accepted_and_closes_about_half_its_new_orders() {
        let workload = generate_mix(
            "ec-mix-futures",
            MixSpec {
                symbols: 1,
                accounts: 100,
                resting_orders_target: 1_000,
                commands: 20_000,
                seed: 1,
                market: Market::Futures,
            },
        );
        let mut exchange = Exchange::new(ExchangeConfig::default());
        let mut events = Vec::new();
        let (mut rejected, mut closing_fills, mut fills) = (0, 0, 0);
        for (seq, command) in workload.setup.iter().chain(&workload.measured).enumerate() {
            exchange.apply(Seq(seq as u64 + 1), None, command, &mut events);
            for event in &events {
                match event {
                    bourse_core::Event::Rejected { .. } => rejected += 1,
                    bourse_core::Event::Trade(trade) => {
                        fills += 1;
                        closing_fills +=
                            usize::from(trade.taker_pnl.0 != 0 || trade.maker_pnl.0 != 0);
                    }
                    _ => {}
                }
            }
            events.clear();
        }
        assert_eq!(rejected, 0);
        let new_orders =
            workload.measured.iter().filter(|c| matches!(c, Command::Order(_))).count();
        let closing = workload
            .measured
            .iter()
            .filter(|c| matches!(c, Command::Order(order) if order.offset == Offset::Close))
            .count();
        assert!(closing * 100 > new_orders * 40, "{closing} of {new_orders} orders close");
        assert!(closing_fills * 10 > fills, "{closing_fills} of {fills} fills realised profit");
        exchange.check_invariants().unwrap();
    }
}
