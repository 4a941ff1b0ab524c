//! `bourse bench memory`: what resting orders cost in resident memory. One instrument
//! (spot, or with `--market futures` a futures contract whose orders open positions and
//! hold margin), `ACCOUNTS` funded accounts, then `--orders` GTC orders that never
//! cross, spread over `--levels` price levels (half bids, half asks); the process's
//! resident memory is read from `/proc/self/status` before and after the orders.
//!
//! Each order command is built, applied and dropped in turn, so the figure after is the
//! engine's (its books, open-order index and ledger), not a command list's. The
//! invariants are checked after the reading, since the check itself allocates.

use std::borrow::Cow;

use bourse_core::book::BookCapacity;
use bourse_core::command::{
    FutureCommand, InstrumentCommand, OrderCommand, OrderType, TransferCommand,
};
use bourse_core::ids::InstrumentId;
use bourse_core::{
    Command, Decimal, Event, Exchange, ExchangeConfig, Offset, Seq, Side, StpMode, TimeInForce,
};
use clap::Args;

use super::workload::SplitMix64;

#[derive(Args)]
pub struct MemoryArgs {
    /// Resting orders to place.
    #[arg(long, default_value_t = 1_000_000)]
    orders: usize,
    /// Price levels to spread them over, half a side.
    #[arg(long, default_value_t = 10_000)]
    levels: usize,
    /// `spot` or `futures`.
    #[arg(long, value_enum, default_value = "spot")]
    market: MarketName,
    /// Print the result as one JSON object.
    #[arg(long)]
    json: bool,
}

#[derive(Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum MarketName {
    Spot,
    Futures,
}

/// The target this measurement checks: the whole process resident in at most
/// `RESIDENT_MB_TARGET` with `TARGET_ORDERS` orders at rest (other counts: no verdict).
const RESIDENT_MB_TARGET: f64 = 200.0;
const TARGET_ORDERS: usize = 1_000_000;
const ACCOUNTS: usize = 1_000;
const SYMBOL: &str = "BTC-USD";
const MID_PRICE_TICKS: i64 = 1_000_000;
const SIZE_LOTS_MAX: u64 = 100;
/// Per account and asset; enough for every order whatever the account's share.
const FUNDING_UNITS: i64 = 1_000_000_000_000_000;
const SEED: u64 = 1;

/// Resident memory, in kB, as `/proc/self/status` reports it.
#[derive(Clone, Copy)]
struct Resident {
    rss_kb: Option<u64>,
    hwm_kb: Option<u64>,
}

impl Resident {
    /// Both figures `None` where `/proc` is unavailable (not Linux, or not mounted).
    fn read() -> Resident {
        let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
        Resident {
            rss_kb: status_field_kb(&status, "VmRSS:"),
            hwm_kb: status_field_kb(&status, "VmHWM:"),
        }
    }
}

/// The value of a line like `VmRSS:     1234 kB`.
fn status_field_kb(status: &str, field: &str) -> Option<u64> {
    let line = status.lines().find(|line| line.starts_with(field))?;
    let mut words = line[field.len()..].split_whitespace();
    let value = words.next()?.parse().ok()?;
    (words.next() == Some("kB")).then_some(value)
}

/// `/proc`'s kB (units of 1,024 bytes) as MB of 2^20 bytes.
fn megabytes(kb: Option<u64>) -> Option<f64> {
    kb.map(|kb| kb as f64 / 1024.0)
}

fn show_mb(kb: Option<u64>) -> String {
    megabytes(kb).map_or_else(|| "unavailable".to_string(), |mb| format!("{mb:.1} MB"))
}

fn text(value: impl Into<String>) -> Cow<'static, str> {
    Cow::Owned(value.into())
}

fn units(value: i64) -> Decimal {
    Decimal::from_units(i128::from(value), 0)
}

fn definitions(market: MarketName) -> Vec<Command<'static>> {
    if market == MarketName::Futures {
        return futures_definitions();
    }
    let mut commands = vec![
        Command::Asset { asset: text("BTC"), decimals: 0 },
        Command::Asset { asset: text("USD"), decimals: 0 },
        Command::Instrument(Box::new(InstrumentCommand {
            symbol: text(SYMBOL),
            base: text("BTC"),
            quote: text("USD"),
            tick: units(1),
            lot: units(1),
            min_qty: units(1),
            max_qty: units(1_000_000),
            maker_fee_bps: 0,
            taker_fee_bps: 0,
            market_band_bps: 1_000,
        })),
    ];
    for account in 0..ACCOUNTS {
        for asset in ["BTC", "USD"] {
            commands.push(Command::Deposit(TransferCommand {
                account: text(format!("a{account}")),
                asset: text(asset),
                amount: units(FUNDING_UNITS),
            }));
        }
    }
    commands
}

/// CNY (no decimals) and the contract (tick 1, lot 1, multiplier 1, margin 1 a lot, no
/// fees), every account funded.
fn futures_definitions() -> Vec<Command<'static>> {
    let mut commands = vec![
        Command::Asset { asset: text("CNY"), decimals: 0 },
        Command::Future(Box::new(FutureCommand {
            symbol: text(SYMBOL),
            settle: text("CNY"),
            tick: units(1),
            lot: units(1),
            min_qty: units(1),
            max_qty: units(1_000_000),
            multiplier: units(1),
            margin: units(1),
            maker_fee: units(0),
            taker_fee: units(0),
            market_band_bps: 1_000,
            close_today: false,
        })),
    ];
    for account in 0..ACCOUNTS {
        commands.push(Command::Deposit(TransferCommand {
            account: text(format!("a{account}")),
            asset: text("CNY"),
            amount: units(FUNDING_UNITS),
        }));
    }
    commands
}

/// Order `number`: a random account, side and size; its level chosen at random among
/// those of its side, so that levels fill evenly and orders of one account scatter.
fn resting_order(
    number: usize,
    levels_per_side: usize,
    random: &mut SplitMix64,
) -> Command<'static> {
    let account = random.below(ACCOUNTS as u64);
    let side = [Side::Buy, Side::Sell][number % 2];
    let behind = 1 + random.below(levels_per_side as u64) as i64;
    let price = match side {
        Side::Buy => MID_PRICE_TICKS - behind,
        Side::Sell => MID_PRICE_TICKS + behind,
    };
    Command::Order(OrderCommand {
        account: text(format!("a{account}")).into(),
        id: text(format!("o{number}")),
        symbol: text(SYMBOL),
        side,
        order_type: OrderType::Limit { price: units(price) },
        size: bourse_core::OrderSize::of_qty(units(1 + random.below(SIZE_LOTS_MAX) as i64)),
        time_in_force: TimeInForce::GoodTillCancel,
        post_only: false,
        stp: StpMode::CancelTaker,
        offset: Offset::Open,
    })
}

fn apply_accepted(
    exchange: &mut Exchange,
    seq: u64,
    command: &Command<'_>,
    events: &mut Vec<Event>,
) -> Result<(), String> {
    exchange.apply(Seq(seq), None, command, events);
    let accepted = matches!(events.first(), Some(Event::Accepted { .. }));
    let traded = events.iter().any(|event| matches!(event, Event::Trade(_)));
    if !accepted || traded {
        return Err(format!("command {seq} ({command:?}) gave {events:?}"));
    }
    events.clear();
    Ok(())
}

pub fn run(args: &MemoryArgs) -> Result<(), String> {
    let levels_per_side = args.levels / 2;
    if levels_per_side == 0 || levels_per_side as i64 >= MID_PRICE_TICKS {
        return Err(format!("--levels must be in 2..{}", 2 * MID_PRICE_TICKS));
    }
    // Sized up front, as a venue would configure it: no pool or index grows mid-run.
    let mut exchange = Exchange::new(ExchangeConfig {
        book_capacity: BookCapacity { orders: args.orders, levels: args.levels },
        open_orders_capacity: args.orders,
    });
    let mut events = Vec::with_capacity(16);
    let mut seq = 0u64;
    for command in &definitions(args.market) {
        seq += 1;
        apply_accepted(&mut exchange, seq, command, &mut events)?;
    }
    let before = Resident::read();

    let mut random = SplitMix64::new(SEED);
    for number in 0..args.orders {
        seq += 1;
        let command = resting_order(number, levels_per_side, &mut random);
        apply_accepted(&mut exchange, seq, &command, &mut events)?;
    }
    let after = Resident::read();

    let book = exchange.book(InstrumentId(0));
    let (orders, levels) = (book.order_count(), book.level_count());
    if orders != args.orders || exchange.open_order_count() != args.orders {
        return Err(format!("{orders} orders rest, {} expected", args.orders));
    }
    exchange.check_invariants().map_err(|error| format!("invariants: {error}"))?;
    report(args, &before, &after, orders, levels);
    Ok(())
}

fn report(args: &MemoryArgs, before: &Resident, after: &Resident, orders: usize, levels: usize) {
    // All-in: the pools are sized up front, so most of the memory is resident before
    // the first order; growth alone would understate the cost of an order.
    let bytes_per_order =
        after.rss_kb.filter(|_| orders > 0).map(|kb| (kb * 1024) as f64 / orders as f64);
    let target_met = megabytes(after.rss_kb)
        .filter(|_| orders == TARGET_ORDERS)
        .map(|mb| mb <= RESIDENT_MB_TARGET);
    if args.json {
        println!(
            "{}",
            serde_json::json!({
                "orders": orders,
                "levels": levels,
                "accounts": ACCOUNTS,
                "market": match args.market { MarketName::Spot => "spot", MarketName::Futures => "futures" },
                "rss_before_mb": megabytes(before.rss_kb),
                "hwm_before_mb": megabytes(before.hwm_kb),
                "rss_after_mb": megabytes(after.rss_kb),
                "hwm_after_mb": megabytes(after.hwm_kb),
                "bytes_per_order": bytes_per_order.map(f64::round),
                "target_mb": RESIDENT_MB_TARGET,
                "target_orders": TARGET_ORDERS,
                "target_met": target_met,
            })
        );
        return;
    }
    println!("{orders} resting orders over {levels} price levels, {ACCOUNTS} accounts");
    println!("resident before: VmRSS {}, VmHWM {}", show_mb(before.rss_kb), show_mb(before.hwm_kb));
    println!("resident after:  VmRSS {}, VmHWM {}", show_mb(after.rss_kb), show_mb(after.hwm_kb));
    match bytes_per_order {
        Some(bytes) => println!("per order: {bytes:.0} bytes (whole-process VmRSS / orders)"),
        None => println!("per order: unavailable"),
    }
    let verdict = match target_met {
        Some(true) => "met",
        Some(false) => "NOT met",
        None if orders != TARGET_ORDERS => "not applicable to this order count",
        None => "unavailable",
    };
    println!("target: {TARGET_ORDERS} orders in VmRSS <= {RESIDENT_MB_TARGET:.0} MB: {verdict}");
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_status_field_is_read_in_kb() {
        let status = "Name:\tbourse\nVmHWM:\t  20480 kB\nVmRSS:\t   10240 kB\n";
        assert_eq!(status_field_kb(status, "VmRSS:"), Some(10_240));
        assert_eq!(status_field_kb(status, "VmHWM:"), Some(20_480));
    }

    #[test]
    fn a_missing_or_odd_status_field_is_unavailable() {
        assert_eq!(status_field_kb("", "VmRSS:"), None);
        assert_eq!(status_field_kb("VmRSS:\tlots kB\n", "VmRSS:"), None);
        assert_eq!(status_field_kb("VmRSS:\t12 MB\n", "VmRSS:"), None);
        assert_eq!(show_mb(None), "unavailable");
    }

    #[test]
    fn a_small_run_rests_every_order_and_keeps_the_invariants() {
        let args = MemoryArgs { orders: 2_000, levels: 100, market: MarketName::Spot, json: true };
        assert_eq!(run(&args), Ok(()));
    }

    #[test]
    fn a_small_futures_run_rests_every_order_and_keeps_the_invariants() {
        let args =
            MemoryArgs { orders: 2_000, levels: 100, market: MarketName::Futures, json: true };
        assert_eq!(run(&args), Ok(()));
    }
}
