//! Times `snapshot::encode_state` and `snapshot::decode_state` on a large state:
//! `ORDERS` resting orders (default 1,000,000; the first argument overrides it) over
//! four books of `ACCOUNTS` accounts, prices spread over a few thousand levels a side
//! near the market and some far from it (in the books' treaps).
//!
//! ```sh
//! cargo run --release -p bourse-core --example snapshot_bench [ORDERS]
//! ```
//!
//! Each step is timed `ROUNDS` times and the best is reported, beside the snapshot's
//! size. "encode (as built)" walks books whose orders sit in slab slots in arrival
//! order, not in priority order (cache misses along each level); "encode (decoded)"
//! walks a restored exchange, whose slots follow priority order. Decoding includes the
//! final `check_invariants`, which is timed alone too.

use std::borrow::Cow;
use std::time::{Duration, Instant};

use bourse_core::command::{
    InstrumentCommand, OrderCommand, OrderSize, OrderType, TransferCommand,
};
use bourse_core::format::state_digest;
use bourse_core::ids::AccountId;
use bourse_core::snapshot::{decode_state, encode_state};
use bourse_core::{
    AccountRef, Command, Decimal, Event, Exchange, ExchangeConfig, Offset, Seq, Side, StpMode,
    TimeInForce,
};

const DEFAULT_ORDERS: usize = 1_000_000;
const INSTRUMENTS: usize = 4;
const ACCOUNTS: u64 = 1_000;
const MID_PRICE_TICKS: i64 = 1_000_000;
const ROUNDS: usize = 5;

fn text(value: impl Into<String>) -> Cow<'static, str> {
    Cow::Owned(value.into())
}

fn units(value: i64) -> Decimal {
    Decimal::from_units(i128::from(value), 0)
}

struct XorShift(u64);

impl XorShift {
    fn below(&mut self, bound: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % bound
    }
}

fn apply_accepted(exchange: &mut Exchange, seq: &mut u64, command: &Command<'_>) {
    let mut events: Vec<Event> = Vec::new();
    *seq += 1;
    exchange.apply(Seq(*seq), None, command, &mut events);
    let accepted = matches!(events.first(), Some(Event::Accepted { .. }));
    assert!(accepted && events.len() == 1, "{command:?} gave {events:?}");
}

fn definitions(exchange: &mut Exchange, seq: &mut u64) {
    apply_accepted(exchange, seq, &Command::Asset { asset: text("USD"), decimals: 0 });
    for index in 0..INSTRUMENTS {
        let base = format!("C{index}");
        apply_accepted(exchange, seq, &Command::Asset { asset: text(&base), decimals: 0 });
        let instrument = InstrumentCommand {
            symbol: text(format!("{base}-USD")),
            base: text(base),
            quote: text("USD"),
            tick: units(1),
            lot: units(1),
            min_qty: units(1),
            max_qty: units(1_000_000),
            maker_fee_bps: 5,
            taker_fee_bps: 10,
            market_band_bps: 1_000,
        };
        apply_accepted(exchange, seq, &Command::Instrument(Box::new(instrument)));
    }
    for account in 0..ACCOUNTS {
        for asset in (0..INSTRUMENTS).map(|index| format!("C{index}")).chain(["USD".into()]) {
            let deposit = TransferCommand {
                account: text(format!("account-{account}")),
                asset: text(asset),
                amount: units(1_000_000_000_000_000),
            };
            apply_accepted(exchange, seq, &Command::Deposit(deposit));
        }
    }
}

/// Resting order `number`: never crosses (bids below the mid, asks above).
fn resting_order(number: usize, random: &mut XorShift) -> Command<'static> {
    let side = [Side::Buy, Side::Sell][number % 2];
    let behind = match random.below(20) {
        0 => 40_000 + random.below(900_000) as i64,
        _ => 1 + random.below(5_000) as i64,
    };
    let price = match side {
        Side::Buy => MID_PRICE_TICKS - behind,
        Side::Sell => MID_PRICE_TICKS + behind,
    };
    Command::Order(OrderCommand {
        account: AccountRef::Id(AccountId(random.below(ACCOUNTS) as u32)),
        id: text(format!("order-{number}")),
        symbol: text(format!("C{}-USD", random.below(INSTRUMENTS as u64))),
        side,
        order_type: OrderType::Limit { price: units(price) },
        size: OrderSize::of_qty(units(1 + random.below(100) as i64)),
        time_in_force: TimeInForce::GoodTillCancel,
        post_only: false,
        stp: StpMode::CancelTaker,
        offset: Offset::Open,
    })
}

/// The best of `ROUNDS` runs of `step`, and its last result.
fn best_of<T>(mut step: impl FnMut() -> T) -> (Duration, T) {
    let mut best = Duration::MAX;
    let mut result = None;
    for _ in 0..ROUNDS {
        let started = Instant::now();
        let value = step();
        best = best.min(started.elapsed());
        result = Some(value);
    }
    (best, result.expect("at least one round"))
}

fn report(step: &str, elapsed: Duration, orders: usize) {
    let per_order = elapsed.as_nanos() as f64 / orders.max(1) as f64;
    println!("{step:<28} {:>9.1} ms  {per_order:>6.1} ns/order", elapsed.as_secs_f64() * 1e3);
}

fn main() {
    let orders = std::env::args()
        .nth(1)
        .map(|argument| argument.parse().expect("ORDERS is a number"))
        .unwrap_or(DEFAULT_ORDERS);
    let mut exchange = Exchange::default();
    let mut seq = 0;
    definitions(&mut exchange, &mut seq);
    let mut random = XorShift(0x9e37_79b9_7f4a_7c15);
    let started = Instant::now();
    for number in 0..orders {
        apply_accepted(&mut exchange, &mut seq, &resting_order(number, &mut random));
    }
    println!(
        "{orders} resting orders on {INSTRUMENTS} books, {ACCOUNTS} accounts (built in {:.2} s)",
        started.elapsed().as_secs_f64()
    );

    let (encode_time, bytes) = best_of(|| {
        let mut bytes = Vec::new();
        encode_state(&exchange, &mut bytes);
        bytes
    });
    let (decode_time, restored) =
        best_of(|| decode_state(&bytes, ExchangeConfig::default()).expect("the snapshot decodes"));
    let (reencode_time, again) = best_of(|| {
        let mut again = Vec::new();
        encode_state(&restored, &mut again);
        again
    });
    let (invariants_time, checked) = best_of(|| restored.check_invariants());
    checked.expect("invariants hold");
    assert!(again == bytes, "encode(decode(bytes)) == bytes");
    assert_eq!(state_digest(&restored), state_digest(&exchange));

    println!(
        "snapshot: {} bytes ({:.1} bytes/order)",
        bytes.len(),
        bytes.len() as f64 / orders.max(1) as f64
    );
    report("encode (as built)", encode_time, orders);
    report("decode (with invariants)", decode_time, orders);
    report("  of which check_invariants", invariants_time, orders);
    report("encode (decoded)", reencode_time, orders);
}
