//! Cache hints ahead of a batch: while one command is applied, the processor is asked
//! to start loading what the next few commands will read, so that their cache misses
//! overlap instead of following one another.
//!
//! A command reads a chain of records, each found through the one before: an amend to
//! a new price reads the order index entry, then the order, then its level and the
//! level for the new price, then that level's last order. A `Trail` follows the chain
//! of one upcoming command, one step every `SPACING` applied commands, so each step
//! reads only what the previous step has already brought in. A trail knows its command
//! by address, so a caller that reuses a buffer for other commands only wastes the
//! trails laid for the old ones. Trails hint;
//! they decide nothing. They read the state through checked accessors and never change
//! it: a stale trail (the state moved on since it was laid) costs a useless hint, never
//! a wrong result or a panic, and `Exchange::apply` gives the same events with or
//! without them.
//!
//! Hints pay only when the state outgrows the caches, and cost instructions always;
//! below `MIN_OPEN_ORDERS` open orders `Lookahead::hint` does nothing.

use crate::book::LevelRef;
use crate::command::{
    AccountRef, AmendCommand, Command, OrderCommand, OrderType, Side, TimeInForce,
};
use crate::exchange::Exchange;
use crate::ids::{AccountId, InstrumentId, OrderHandle};
use crate::num::{Decimal, Price};

/// Dependent steps of the longest chain a trail follows.
const STEPS: usize = 5;
/// Applied commands between two steps of a trail: the time each step's loads get to
/// arrive.
const SPACING: usize = 2;
/// Step `s` is taken for the command `(STEPS - 1 - s) * SPACING` places after the next
/// one, so this many upcoming commands have a trail.
const TRAILS: usize = (STEPS - 1) * SPACING + 1;
/// Trails kept: the next power of two, so that finding one is a mask.
const RING: usize = TRAILS.next_power_of_two();
/// Below this many open orders the state fits the caches and hints are not given.
pub const MIN_OPEN_ORDERS: usize = 16_384;

/// Gives cache hints for the commands about to be applied. Owned by whoever applies a
/// batch; call `hint` before each `Exchange::apply`.
pub struct Lookahead {
    /// Trail `i` follows the command `upcoming[(i - next) mod RING]`.
    trails: [Trail; RING],
    next: usize,
    min_open_orders: usize,
}

/// What the hints for one upcoming command have found so far.
#[derive(Clone, Copy)]
struct Trail {
    /// The command's address, to tell whether the trail is the command's own.
    command: usize,
    /// Steps taken.
    steps: usize,
    found: Found,
}

/// Where a trail stands: what the last step found, which the next step reads.
#[derive(Clone, Copy)]
enum Found {
    /// Nothing (more) to hint.
    Nothing,
    /// A cancel or an amend: the tag of its key, whose index entry is on its way.
    IndexEntry { account: AccountId, tag: u32 },
    /// ... then the order the entry most likely points at.
    Order { account: AccountId, handle: OrderHandle },
    /// ... then, for an amend to a new price, where the level for that price is found.
    NewPrice { instrument: InstrumentId, side: Side, price: Price },
    /// ... then that level.
    Level { instrument: InstrumentId, side: Side, level: LevelRef },
    /// A new order: its book and limit, its level if it may rest, and the next maker
    /// it would trade with.
    Taker {
        instrument: InstrumentId,
        side: Side,
        limit: Price,
        /// A GTC limit order: it may rest at `limit`.
        rests: bool,
        level: Option<LevelRef>,
        maker: Option<u32>,
    },
}

const NO_TRAIL: Trail = Trail { command: 0, steps: 0, found: Found::Nothing };

impl Default for Lookahead {
    fn default() -> Self {
        Lookahead { trails: [NO_TRAIL; RING], next: 0, min_open_orders: MIN_OPEN_ORDERS }
    }
}

impl Lookahead {
    /// Hints once the exchange has `MIN_OPEN_ORDERS` open orders.
    pub fn new() -> Lookahead {
        Lookahead::default()
    }

    /// Hints once the exchange has `min_open_orders` open orders (0: always).
    pub fn with_min_open_orders(min_open_orders: usize) -> Lookahead {
        Lookahead { min_open_orders, ..Lookahead::default() }
    }

    /// Hints for `upcoming`, the commands that will be applied after the one about to
    /// be (in order; the first `TRAILS` are used). Each call moves the trails one command
    /// on, so call it once per applied command, with the same stream.
    #[inline]
    pub fn hint(&mut self, exchange: &Exchange, upcoming: &[Command<'_>]) {
        if exchange.open_order_count() >= self.min_open_orders {
            self.follow_trails(exchange, upcoming);
        }
    }

    #[inline(never)]
    fn follow_trails(&mut self, exchange: &Exchange, upcoming: &[Command<'_>]) {
        self.next = (self.next + 1) % RING;
        // Near the end of a batch some trails have no command.
        let upcoming = &upcoming[..upcoming.len().min(TRAILS)];
        for step in 0..STEPS {
            let distance = (STEPS - 1 - step) * SPACING;
            let Some(command) = upcoming.get(distance) else { continue };
            let trail = &mut self.trails[(self.next + distance) % RING];
            let address = command as *const Command<'_> as usize;
            if step == 0 {
                *trail = Trail { command: address, steps: 0, found: Found::Nothing };
            } else if trail.command != address || trail.steps != step {
                continue;
            }
            trail.take_step(exchange, command);
        }
    }
}

// The step functions are kept out of line: inlined into the trail loop they made it
// 20% more instructions (callgrind: 153 M against 127 M for `ec-mix-100`'s hints).

impl Trail {
    fn take_step(&mut self, exchange: &Exchange, command: &Command<'_>) {
        self.found = match self.steps {
            0 => start(exchange, command),
            steps => follow(exchange, self.found, steps, command),
        };
        self.steps += 1;
    }
}

/// Step 0: what the command alone locates.
#[inline(never)]
fn start(exchange: &Exchange, command: &Command<'_>) -> Found {
    match command {
        Command::Order(order) => start_new_order(exchange, order),
        Command::Cancel { account, id } => start_open_order(exchange, account, id),
        Command::Amend(AmendCommand { account, id, .. }) => start_open_order(exchange, account, id),
        _ => Found::Nothing,
    }
}

/// Step `steps`: what the previous step's records locate.
#[inline(never)]
fn follow(exchange: &Exchange, found: Found, steps: usize, command: &Command<'_>) -> Found {
    match found {
        Found::Nothing => Found::Nothing,
        Found::IndexEntry { account, tag } => find_order(exchange, account, tag),
        Found::Order { account, handle } => {
            let new_price = match command {
                Command::Amend(amend) => amend.price,
                _ => None,
            };
            unlink_order(exchange, account, handle, new_price)
        }
        Found::NewPrice { instrument, side, price } => {
            match exchange.book(instrument).prefetch_level(side, price) {
                Some(level) => Found::Level { instrument, side, level },
                None => Found::Nothing,
            }
        }
        Found::Level { instrument, side, level } => {
            exchange.book(instrument).prefetch_tail_link(side, level);
            Found::Nothing
        }
        Found::Taker { .. } => follow_taker(exchange, found, steps),
    }
}

/// Step 0 of a cancel or an amend: the index entry of its key.
#[inline(never)]
fn start_open_order(exchange: &Exchange, account: &AccountRef<'_>, id: &str) -> Found {
    match exchange.resolve(account) {
        Some(account) => {
            Found::IndexEntry { account, tag: exchange.open_orders().prefetch_home(account, id) }
        }
        None => Found::Nothing,
    }
}

/// Step 1: the order the index entry points at.
#[inline(never)]
fn find_order(exchange: &Exchange, account: AccountId, tag: u32) -> Found {
    let Some(handle) = exchange.open_orders().likely_handle(tag) else { return Found::Nothing };
    let Some(book) = exchange.books().get(handle.instrument.index()) else { return Found::Nothing };
    book.prefetch_order(handle.slot);
    Found::Order { account, handle }
}

/// Step 2: what taking the order off its level changes, the balance its hold is in,
/// and, for an amend to a new price, where that price's level is found.
#[inline(never)]
fn unlink_order(
    exchange: &Exchange,
    account: AccountId,
    handle: OrderHandle,
    new_price: Option<Decimal>,
) -> Found {
    let instrument = exchange.instrument(handle.instrument);
    let book = exchange.book(handle.instrument);
    let Some(side) = book.prefetch_order_surroundings(handle.slot) else { return Found::Nothing };
    exchange.ledger().prefetch_balance(account, instrument.hold_asset(side));
    let Some(price) = new_price.and_then(|price| instrument.validate_price(price).ok()) else {
        return Found::Nothing;
    };
    book.prefetch_level_lookup(side, Some(price));
    Found::NewPrice { instrument: handle.instrument, side, price }
}

/// Step 0 of a new order: its index entry, its balances, where its level is found and
/// the other side's best level.
#[inline(never)]
fn start_new_order(exchange: &Exchange, order: &OrderCommand<'_>) -> Found {
    let (Some(account), Some(instrument)) =
        (exchange.resolve(&order.account), exchange.find_instrument(&order.symbol))
    else {
        return Found::Nothing;
    };
    let [base, quote] = exchange.instrument(instrument).fill_assets();
    let limit = match order.order_type {
        OrderType::Limit { price } => match exchange.instrument(instrument).validate_price(price) {
            Ok(price) => Some(price),
            Err(_) => return Found::Nothing,
        },
        OrderType::Market => None,
    };
    exchange.open_orders().prefetch_home(account, &order.id);
    exchange.ledger().prefetch_balance(account, base);
    exchange.ledger().prefetch_balance(account, quote);
    let rests_at = limit.filter(|_| {
        matches!(order.time_in_force, TimeInForce::GoodTillCancel | TimeInForce::GoodForDay)
    });
    exchange.book(instrument).prefetch_level_lookup(order.side, rests_at);
    let rests = rests_at.is_some();
    Found::Taker {
        instrument,
        side: order.side,
        // A market order is bounded by its protection price, which is no tighter.
        limit: limit.unwrap_or(match order.side {
            Side::Buy => Price(i64::MAX),
            Side::Sell => Price(1),
        }),
        rests,
        level: None,
        maker: None,
    }
}

/// Later steps of a new order: its level, then that level's last order; and along
/// the way the makers it would trade with, one further per step, with the balances
/// and index entry each fill touches.
#[inline(never)]
fn follow_taker(exchange: &Exchange, taker: Found, steps: usize) -> Found {
    let Found::Taker { instrument, side, limit, rests, level, maker } = taker else {
        return Found::Nothing;
    };
    let book = exchange.book(instrument);
    let mut level = level;
    if rests {
        match steps {
            1 => {
                level = book.prefetch_level(side, limit);
                book.prefetch_new_order_slot();
            }
            2 => {
                if let Some(level) = level {
                    book.prefetch_tail_link(side, level);
                }
            }
            _ => {}
        }
    }
    let next_maker = match maker {
        None if steps == 1 => book.first_maker(side, limit),
        None => None,
        Some(maker) => {
            if let Some(order) = book.try_order(maker) {
                let [base, quote] = exchange.instrument(instrument).fill_assets();
                exchange.ledger().prefetch_balance(order.account, base);
                exchange.ledger().prefetch_balance(order.account, quote);
                exchange.open_orders().prefetch_home(order.account, &order.id);
            }
            book.next_maker(maker, side, limit)
        }
    };
    if let Some(next_maker) = next_maker {
        book.prefetch_order(next_maker);
    }
    Found::Taker { instrument, side, limit, rests, level, maker: next_maker }
}
