//! The order book of one instrument and its matcher: price-time priority, nothing else.
//!
//! The book knows orders, prices, quantities and which account owns an order (for
//! self-trade prevention). It knows nothing about money: what an order holds and what a
//! fill moves between accounts is the business of the account kind (`spot`), reached
//! through the `MatchHandler` the caller passes in. It must never allocate per order on
//! the hot path: orders and price levels live in slabs, and each side's levels form an
//! intrusive treap inside the level slab (priorities are a fixed hash of the price, so
//! the shape is deterministic).
//!
//! Costs: cancel by slot is O(1) (plus O(log levels) when it empties a level); the best
//! price is cached, O(1); adding to an existing level is O(log levels); a match step is
//! O(1) per order filled.

use crate::command::{Offset, Side, StpMode};
use crate::event::DoneReason;
use crate::ids::{AccountId, ClientOrderId};
use crate::num::{Price, Qty};
use rustc_hash::FxHashMap;

use crate::prefetch::prefetch;
use crate::price_window::PriceWindow;
use crate::slab::Slab;

/// Marks "no slot" in the intrusive links.
const NIL: u32 = u32::MAX;

/// Initial sizes of a book's pools; both grow in chunks beyond them.
#[derive(Clone, Copy, Debug)]
pub struct BookCapacity {
    pub orders: usize,
    pub levels: usize,
}

impl Default for BookCapacity {
    fn default() -> Self {
        BookCapacity { orders: 4096, levels: 4096 }
    }
}

/// An order at rest on the book.
#[derive(Clone, Debug)]
pub struct RestingOrder {
    pub account: AccountId,
    pub id: ClientOrderId,
    pub side: Side,
    pub price: Price,
    pub remaining: Qty,
    /// Filled over the order's whole life, amends included.
    pub filled: Qty,
    pub stp: StpMode,
    pub post_only: bool,
    /// Futures only (`Open` on spot): what its fills do to the account's position.
    pub offset: Offset,
    /// Futures only: a `gfd` order, which expires at the next settlement.
    pub good_for_day: bool,
    previous: u32,
    next: u32,
    level: u32,
}

impl RestingOrder {
    /// What fills a slot that holds no order.
    fn vacant() -> RestingOrder {
        RestingOrder {
            account: AccountId(0),
            id: ClientOrderId::default(),
            side: Side::Buy,
            price: Price::ZERO,
            remaining: Qty::ZERO,
            filled: Qty::ZERO,
            stp: StpMode::None,
            post_only: false,
            offset: Offset::Open,
            good_for_day: false,
            previous: NIL,
            next: NIL,
            level: NIL,
        }
    }
}

/// What the caller supplies to rest an order.
#[derive(Clone, Debug)]
pub struct NewRestingOrder {
    pub account: AccountId,
    pub id: ClientOrderId,
    pub side: Side,
    pub price: Price,
    pub remaining: Qty,
    pub filled: Qty,
    pub stp: StpMode,
    pub post_only: bool,
    pub offset: Offset,
    pub good_for_day: bool,
}

/// All orders at one price on one side, in arrival order, and their treap links.
#[derive(Clone, Debug)]
struct Level {
    /// The side-normalised sort key: smaller is better (`-price` for bids).
    key: i64,
    price: Price,
    tree_priority: u64,
    left: u32,
    right: u32,
    head: u32,
    tail: u32,
    total_qty: Qty,
    order_count: u32,
}

impl Level {
    /// Hint: the fields that queueing or dequeuing an order changes.
    #[inline]
    fn prefetch_queue(&self) {
        prefetch(&self.head);
        prefetch(&self.order_count);
    }

    /// What fills a slot that holds no level.
    fn vacant() -> Level {
        Level {
            key: 0,
            price: Price::ZERO,
            tree_priority: 0,
            left: NIL,
            right: NIL,
            head: NIL,
            tail: NIL,
            total_qty: Qty::ZERO,
            order_count: 0,
        }
    }
}

/// One side's levels: those near the market in a bitmap window (created around the
/// side's first level, moved when the side empties), the others in a treap, and the
/// cached best level.
struct BookSide {
    window: Option<PriceWindow>,
    root: u32,
    best: u32,
}

impl BookSide {
    fn empty() -> BookSide {
        BookSide { window: None, root: NIL, best: NIL }
    }
}

/// The incoming order while it matches.
#[derive(Clone, Copy, Debug)]
pub struct Taker {
    pub account: AccountId,
    pub side: Side,
    /// Worst acceptable price: the limit, or a market order's protection price.
    pub limit: Price,
    pub remaining: Qty,
    pub stp: StpMode,
}

/// Why matching stopped.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MatchEnd {
    /// Nothing is left of the taker.
    Filled,
    /// No resting order crosses the taker's limit any more.
    NoMoreCrossing,
    /// Self-trade prevention stopped the taker (`cancel_taker` or `cancel_both`).
    SelfTradePrevented,
}

/// Receives what matching does to resting orders, in execution order.
pub trait MatchHandler {
    /// A trade of `qty` at `price` with the maker at `slot`; `maker` already shows its
    /// reduced remaining quantity and increased filled quantity.
    fn on_trade(&mut self, slot: u32, maker: &RestingOrder, price: Price, qty: Qty);
    /// `maker` has left the book (filled, or cancelled by self-trade prevention); `slot`
    /// was its place, already free.
    fn on_maker_done(&mut self, slot: u32, maker: &RestingOrder, reason: DoneReason);
}

/// Aggregated depth at one price.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LevelSummary {
    pub price: Price,
    pub total_qty: Qty,
    pub order_count: u32,
}

/// The orders of one level in arrival order (see `OrderBook::for_each_level`).
pub struct LevelOrders<'book> {
    book: &'book OrderBook,
    next: u32,
}

impl<'book> Iterator for LevelOrders<'book> {
    type Item = &'book RestingOrder;

    #[inline]
    fn next(&mut self) -> Option<&'book RestingOrder> {
        if self.next == NIL {
            return None;
        }
        let order = self.book.orders.get(self.next);
        self.next = order.next;
        // Hint: the order after this one, which the caller will ask for next (a
        // caller walking several levels in turn has that load in flight meanwhile).
        self.book.prefetch_order(self.next);
        Some(order)
    }
}

pub struct OrderBook {
    orders: Slab<RestingOrder>,
    levels: Slab<Level>,
    /// The levels beyond the windows, by side key (bid keys are negative, ask keys
    /// positive, so one map serves both sides): finding one is O(1); the treaps are only
    /// walked to create or drop one.
    level_by_key: FxHashMap<i64, u32>,
    bids: BookSide,
    asks: BookSide,
}

/// Would an order on `side` at `limit` trade with a resting order at `resting`?
#[inline]
pub fn crosses(side: Side, limit: Price, resting: Price) -> bool {
    match side {
        Side::Buy => limit >= resting,
        Side::Sell => limit <= resting,
    }
}

#[inline]
fn side_key(side: Side, price: Price) -> i64 {
    match side {
        Side::Buy => -price.0,
        Side::Sell => price.0,
    }
}

/// A fixed mix of the key (splitmix64), used as the treap priority: deterministic, and
/// as good as random for any order flow that does not target the hash.
fn tree_priority(key: i64) -> u64 {
    let mut mixed = (key as u64).wrapping_add(0x9e37_79b9_7f4a_7c15);
    mixed = (mixed ^ (mixed >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    mixed = (mixed ^ (mixed >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    mixed ^ (mixed >> 31)
}

impl OrderBook {
    pub fn new(capacity: BookCapacity) -> OrderBook {
        OrderBook {
            orders: Slab::with_capacity(capacity.orders, RestingOrder::vacant()),
            levels: Slab::with_capacity(capacity.levels, Level::vacant()),
            level_by_key: FxHashMap::with_capacity_and_hasher(capacity.levels, Default::default()),
            bids: BookSide::empty(),
            asks: BookSide::empty(),
        }
    }

    fn book_side(&self, side: Side) -> &BookSide {
        match side {
            Side::Buy => &self.bids,
            Side::Sell => &self.asks,
        }
    }

    fn book_side_mut(&mut self, side: Side) -> &mut BookSide {
        match side {
            Side::Buy => &mut self.bids,
            Side::Sell => &mut self.asks,
        }
    }

    pub fn order_count(&self) -> usize {
        self.orders.len()
    }

    pub fn level_count(&self) -> usize {
        self.levels.len()
    }

    /// The best price resting on `side`, O(1).
    #[inline]
    pub fn best_price(&self, side: Side) -> Option<Price> {
        let best = self.book_side(side).best;
        (best != NIL).then(|| self.levels.get(best).price)
    }

    /// Would an order on `side` at `limit` trade on arrival with anything resting?
    pub fn would_cross(&self, side: Side, limit: Price) -> bool {
        self.best_price(side.opposite()).is_some_and(|best| crosses(side, limit, best))
    }

    /// The record at `slot`, live or not, or `None` beyond the pool.
    #[inline]
    pub(crate) fn try_order(&self, slot: u32) -> Option<&RestingOrder> {
        self.orders.try_get(slot)
    }

    #[inline]
    pub fn order(&self, slot: u32) -> &RestingOrder {
        self.orders.get(slot)
    }

    // ----- cache hints for `lookahead`: read-only, and no panic on a stale slot -----

    /// Hint: the record of the order at `slot`.
    #[inline]
    pub(crate) fn prefetch_order(&self, slot: u32) {
        if let Some(order) = self.orders.try_get(slot) {
            prefetch(order);
        }
    }

    /// Hint: what taking the order at `slot` off its level changes: its level and the
    /// links of its neighbours. Reads the order; returns its side.
    #[inline]
    pub(crate) fn prefetch_order_surroundings(&self, slot: u32) -> Option<Side> {
        let order = self.orders.try_get(slot)?;
        if let Some(previous) = self.orders.try_get(order.previous) {
            prefetch(&previous.next);
        }
        if let Some(next) = self.orders.try_get(order.next) {
            prefetch(&next.previous);
        }
        if let Some(level) = self.levels.try_get(order.level) {
            level.prefetch_queue();
        }
        Some(order.side)
    }

    /// Hint: the window entry that locates the level for `price` on `side`, and the
    /// best level of the other side, which an order at `price` is checked against.
    #[inline]
    pub(crate) fn prefetch_level_lookup(&self, side: Side, price: Option<Price>) {
        let window = self.book_side(side).window.as_ref();
        let entry =
            window.zip(price).and_then(|(window, price)| window.entry(side_key(side, price)));
        if let Some(entry) = entry {
            prefetch(entry);
        }
        if let Some(best) = self.levels.try_get(self.book_side(side.opposite()).best) {
            prefetch(best);
        }
    }

    /// Hint: the level for `price` on `side`, or the slot a new level would take.
    /// Reads the window entry; returns the level's slot if it exists.
    #[inline]
    pub(crate) fn prefetch_level(&self, side: Side, price: Price) -> Option<u32> {
        let found = self.find_level(side, side_key(side, price));
        match found.and_then(|slot| self.levels.try_get(slot)) {
            Some(level) => level.prefetch_queue(),
            None => {
                let vacant = self.levels.next_slot().and_then(|slot| self.levels.try_get(slot));
                if let Some(vacant) = vacant {
                    prefetch(vacant);
                }
            }
        }
        found
    }

    /// Hint: the link of the last order of level `level_slot`, which a new order there
    /// is linked behind. Reads the level.
    #[inline]
    pub(crate) fn prefetch_tail_link(&self, level_slot: u32) {
        let tail =
            self.levels.try_get(level_slot).and_then(|level| self.orders.try_get(level.tail));
        if let Some(tail) = tail {
            prefetch(&tail.next);
        }
    }

    /// Hint: the slot the next new order will take.
    #[inline]
    pub(crate) fn prefetch_new_order_slot(&self) {
        if let Some(slot) = self.orders.next_slot() {
            self.prefetch_order(slot);
        }
    }

    /// The first order an order on `taker_side` limited at `limit` would trade with, if
    /// any. Reads the other side's best level.
    #[inline]
    pub(crate) fn first_maker(&self, taker_side: Side, limit: Price) -> Option<u32> {
        let level = self.levels.try_get(self.book_side(taker_side.opposite()).best)?;
        crosses(taker_side, limit, level.price).then_some(level.head)
    }

    /// The order such a taker would trade with after the one at `maker`, if any. Reads
    /// that maker, and the next level when it is the last of its own.
    pub(crate) fn next_maker(&self, maker: u32, taker_side: Side, limit: Price) -> Option<u32> {
        let maker = self.orders.try_get(maker)?;
        if maker.next != NIL {
            return Some(maker.next);
        }
        let level = self.levels.try_get(maker.level)?;
        let next_level = self.levels.try_get(self.next_level(taker_side.opposite(), level.key))?;
        crosses(taker_side, limit, next_level.price).then_some(next_level.head)
    }

    /// Rests an order at the back of its price level and returns its slot.
    pub fn insert(&mut self, new_order: NewRestingOrder) -> u32 {
        let slot = self.orders.insert(RestingOrder {
            account: new_order.account,
            id: new_order.id,
            side: new_order.side,
            price: new_order.price,
            remaining: Qty::ZERO,
            filled: Qty::ZERO,
            stp: new_order.stp,
            post_only: new_order.post_only,
            offset: new_order.offset,
            good_for_day: new_order.good_for_day,
            previous: NIL,
            next: NIL,
            level: NIL,
        });
        self.attach(slot, new_order.price, new_order.remaining, new_order.filled);
        slot
    }

    /// Puts a detached order back on the book at the back of the level for `price`.
    pub fn attach(&mut self, slot: u32, price: Price, remaining: Qty, filled: Qty) {
        let side = self.orders.get(slot).side;
        debug_assert!(remaining.0 > 0 && price.0 > 0);
        debug_assert!(!self.would_cross(side, price));
        let level_slot = self.level_for_insert(side, price);
        // Each record is looked up once: the level, the previous tail, the order.
        let level = self.levels.get_mut(level_slot);
        let previous_tail = level.tail;
        level.tail = slot;
        if previous_tail == NIL {
            level.head = slot;
        }
        level.total_qty += remaining;
        level.order_count += 1;
        if previous_tail != NIL {
            self.orders.get_mut(previous_tail).next = slot;
        }
        let order = self.orders.get_mut(slot);
        debug_assert!(order.level == NIL, "attach of an order already on the book");
        order.price = price;
        order.remaining = remaining;
        order.filled = filled;
        order.previous = previous_tail;
        order.next = NIL;
        order.level = level_slot;
    }

    /// Takes an order off the book and frees its slot. The returned view stays valid
    /// until the next insert.
    pub fn remove(&mut self, slot: u32) -> &RestingOrder {
        self.detach(slot);
        self.orders.remove(slot);
        self.orders.get(slot)
    }

    /// Takes an order off its level but keeps its slot, so that it can be attached
    /// again (an amend that loses priority) without a new slot or a new index entry.
    pub fn detach(&mut self, slot: u32) -> &RestingOrder {
        // Each record is looked up once: the order, its neighbours, its level.
        let order = self.orders.get_mut(slot);
        let (previous, next, level_slot, remaining, side) =
            (order.previous, order.next, order.level, order.remaining, order.side);
        debug_assert!(level_slot != NIL, "detach of an order not on the book");
        order.level = NIL;
        if previous != NIL {
            self.orders.get_mut(previous).next = next;
        }
        if next != NIL {
            self.orders.get_mut(next).previous = previous;
        }
        let level = self.levels.get_mut(level_slot);
        if previous == NIL {
            level.head = next;
        }
        if next == NIL {
            level.tail = previous;
        }
        level.total_qty -= remaining;
        level.order_count -= 1;
        if level.order_count == 0 {
            debug_assert!(level.total_qty.is_zero());
            self.remove_level(side, level_slot);
        }
        self.orders.get(slot)
    }

    /// Moves a resting order to `price` with `remaining` left, at the back of that
    /// level's queue (an amend that loses its priority), keeping what it has filled.
    /// The price must not cross the other side.
    pub fn requeue(&mut self, slot: u32, price: Price, remaining: Qty) {
        let filled = self.detach(slot).filled;
        self.attach(slot, price, remaining, filled);
    }

    /// Frees the slot of a detached order that will not come back.
    pub fn free_detached(&mut self, slot: u32) {
        debug_assert!(self.orders.get(slot).level == NIL);
        self.orders.remove(slot);
    }

    /// Lowers an order's remaining quantity in place, keeping its queue position.
    pub fn reduce(&mut self, slot: u32, new_remaining: Qty) {
        let order = self.orders.get_mut(slot);
        debug_assert!(new_remaining.0 > 0 && new_remaining <= order.remaining);
        let decrease = order.remaining - new_remaining;
        order.remaining = new_remaining;
        let level_slot = order.level;
        self.levels.get_mut(level_slot).total_qty -= decrease;
    }

    /// Fill-or-kill pre-check: could `taker` execute its whole quantity now? Counts
    /// resting orders at acceptable prices in priority order; own orders stop the count
    /// (`cancel_taker`, `cancel_both`), are skipped (`cancel_maker`) or count (`none`).
    pub fn can_fill_completely(&self, taker: &Taker) -> bool {
        let mut needed = taker.remaining;
        let mut level_slot = self.book_side(taker.side.opposite()).best;
        while level_slot != NIL {
            let level = self.levels.get(level_slot);
            if !crosses(taker.side, taker.limit, level.price) {
                return false;
            }
            let mut order_slot = level.head;
            while order_slot != NIL {
                let order = self.orders.get(order_slot);
                let own = order.account == taker.account;
                match taker.stp {
                    StpMode::CancelTaker | StpMode::CancelBoth if own => return false,
                    StpMode::CancelMaker if own => {}
                    _ => {
                        if order.remaining >= needed {
                            return true;
                        }
                        needed -= order.remaining;
                    }
                }
                order_slot = order.next;
            }
            level_slot = self.next_level(taker.side.opposite(), level.key);
        }
        false
    }

    /// Matches `taker` against the opposite side until it is filled, stops crossing or
    /// is stopped by self-trade prevention. Fully filled and STP-cancelled makers leave
    /// the book; the handler hears of each step in order.
    pub fn match_taker(&mut self, taker: &mut Taker, handler: &mut impl MatchHandler) -> MatchEnd {
        let maker_side = taker.side.opposite();
        loop {
            if taker.remaining.is_zero() {
                return MatchEnd::Filled;
            }
            let level_slot = self.book_side(maker_side).best;
            if level_slot == NIL {
                return MatchEnd::NoMoreCrossing;
            }
            let level = self.levels.get(level_slot);
            let price = level.price;
            if !crosses(taker.side, taker.limit, price) {
                return MatchEnd::NoMoreCrossing;
            }
            let maker_slot = level.head;
            let maker = self.orders.get(maker_slot);
            if maker.account == taker.account {
                match taker.stp {
                    // Trades with itself like with anyone else.
                    StpMode::None => {}
                    StpMode::CancelTaker => return MatchEnd::SelfTradePrevented,
                    StpMode::CancelMaker => {
                        let maker = self.remove(maker_slot);
                        handler.on_maker_done(maker_slot, maker, DoneReason::SelfTradePrevented);
                        continue;
                    }
                    StpMode::CancelBoth => {
                        let maker = self.remove(maker_slot);
                        handler.on_maker_done(maker_slot, maker, DoneReason::SelfTradePrevented);
                        return MatchEnd::SelfTradePrevented;
                    }
                }
            }
            let qty = taker.remaining.min(maker.remaining);
            taker.remaining -= qty;
            self.levels.get_mut(level_slot).total_qty -= qty;
            let maker = self.orders.get_mut(maker_slot);
            maker.remaining -= qty;
            maker.filled += qty;
            handler.on_trade(maker_slot, maker, price, qty);
            if maker.remaining.is_zero() {
                let maker = self.remove(maker_slot);
                handler.on_maker_done(maker_slot, maker, DoneReason::Filled);
            }
        }
    }

    /// Calls `visit` for every order on `side` in priority order: best price first,
    /// then arrival.
    pub fn for_each_order<'book>(
        &'book self,
        side: Side,
        mut visit: impl FnMut(&'book RestingOrder),
    ) {
        self.for_each_level_slot(side, |book, level_slot| {
            let mut order_slot = book.levels.get(level_slot).head;
            while order_slot != NIL {
                let order = book.orders.get(order_slot);
                visit(order);
                order_slot = order.next;
            }
        });
    }

    /// Calls `visit` for every level of `side` in priority order with its summary and
    /// its orders in arrival order: the book as levels, which is how a snapshot stores
    /// it (one price per level, not per order).
    pub fn for_each_level<'book>(
        &'book self,
        side: Side,
        mut visit: impl FnMut(LevelSummary, LevelOrders<'book>),
    ) {
        self.for_each_level_slot(side, |book, level_slot| {
            let level = book.levels.get(level_slot);
            let summary = LevelSummary {
                price: level.price,
                total_qty: level.total_qty,
                order_count: level.order_count,
            };
            visit(summary, LevelOrders { book, next: level.head });
        });
    }

    /// The best `max_levels` levels of `side`, best first: what a depth feed reads, in
    /// time proportional to what it returns, however deep the book.
    pub fn top_levels(&self, side: Side, max_levels: usize) -> Vec<LevelSummary> {
        let mut summaries = Vec::with_capacity(max_levels.min(1024));
        let mut level_slot = self.book_side(side).best;
        while level_slot != NIL && summaries.len() < max_levels {
            let level = self.levels.get(level_slot);
            summaries.push(LevelSummary {
                price: level.price,
                total_qty: level.total_qty,
                order_count: level.order_count,
            });
            level_slot = self.next_level(side, level.key);
        }
        summaries
    }

    /// Aggregated depth of `side`, best first.
    pub fn levels(&self, side: Side) -> Vec<LevelSummary> {
        let mut summaries = Vec::new();
        self.for_each_level_slot(side, |book, level_slot| {
            let level = book.levels.get(level_slot);
            summaries.push(LevelSummary {
                price: level.price,
                total_qty: level.total_qty,
                order_count: level.order_count,
            });
        });
        summaries
    }

    fn for_each_level_slot<'book>(
        &'book self,
        side: Side,
        mut visit: impl FnMut(&'book OrderBook, u32),
    ) {
        let mut level_slot = self.book_side(side).best;
        while level_slot != NIL {
            visit(self, level_slot);
            level_slot = self.next_level(side, self.levels.get(level_slot).key);
        }
    }

    /// Checks the book's internal consistency; for tests and debug assertions.
    pub fn check_consistency(&self) -> Result<(), String> {
        if let (Some(bid), Some(ask)) = (self.best_price(Side::Buy), self.best_price(Side::Sell)) {
            if bid >= ask {
                return Err(format!("book crossed: best bid {} >= best ask {}", bid.0, ask.0));
            }
        }
        let mut orders_seen = 0usize;
        let mut levels_seen = 0usize;
        for side in [Side::Buy, Side::Sell] {
            let mut previous_key = None;
            let mut problem = None;
            self.for_each_level_slot(side, |book, level_slot| {
                levels_seen += 1;
                let level = book.levels.get(level_slot);
                if previous_key.is_some_and(|key| key >= level.key) {
                    problem = Some(format!("levels out of order at price {}", level.price.0));
                }
                previous_key = Some(level.key);
                let (mut total, mut count, mut slot, mut previous) =
                    (Qty::ZERO, 0u32, level.head, NIL);
                while slot != NIL {
                    let order = book.orders.get(slot);
                    if order.level != level_slot
                        || order.previous != previous
                        || order.price != level.price
                        || order.side != side
                        || order.remaining.0 <= 0
                    {
                        problem = Some(format!(
                            "order {} misplaced at price {}",
                            order.id, level.price.0
                        ));
                    }
                    total += order.remaining;
                    count += 1;
                    previous = slot;
                    slot = order.next;
                }
                if level.tail != previous
                    || total != level.total_qty
                    || count != level.order_count
                    || count == 0
                {
                    problem =
                        Some(format!("level {} totals disagree with its orders", level.price.0));
                }
                orders_seen += count as usize;
            });
            if let Some(problem) = problem {
                return Err(problem);
            }
            let book_side = self.book_side(side);
            let window_first =
                book_side.window.as_ref().and_then(|window| window.first_at_or_after(i64::MIN));
            let tree_first = self.leftmost(book_side.root);
            let window_first = window_first.map_or(NIL, |key| self.level_at(side, key));
            let first = self.better_level(window_first, tree_first);
            if first != book_side.best {
                return Err("cached best level is not the best".to_string());
            }
        }
        if orders_seen != self.orders.len()
            || levels_seen != self.levels.len()
            || levels_seen != self.level_by_key.len() + self.window_levels()
        {
            return Err("slab counts disagree with the book".to_string());
        }
        Ok(())
    }

    // ----- price levels: a bitmap window near the market, a treap beyond it -----

    fn level_for_insert(&mut self, side: Side, price: Price) -> u32 {
        let key = side_key(side, price);
        if let Some(level_slot) = self.find_level(side, key) {
            return level_slot;
        }
        let level_slot = self.levels.insert(Level {
            key,
            price,
            tree_priority: tree_priority(key),
            left: NIL,
            right: NIL,
            head: NIL,
            tail: NIL,
            total_qty: Qty::ZERO,
            order_count: 0,
        });
        if !self.window_insert(side, key, level_slot) {
            self.level_by_key.insert(key, level_slot);
            let root = self.book_side(side).root;
            let new_root = self.tree_insert(root, level_slot);
            self.book_side_mut(side).root = new_root;
        }
        let best = self.book_side(side).best;
        if best == NIL || key < self.levels.get(best).key {
            self.book_side_mut(side).best = level_slot;
        }
        level_slot
    }

    /// Levels recorded in the two windows.
    fn window_levels(&self) -> usize {
        [&self.bids, &self.asks]
            .iter()
            .filter_map(|book_side| book_side.window.as_ref())
            .map(|window| window.len())
            .sum()
    }

    /// The existing level at `key`: in the window if it covers `key`, else in the map.
    #[inline]
    fn find_level(&self, side: Side, key: i64) -> Option<u32> {
        match &self.book_side(side).window {
            Some(window) if window.covers(key) => window.get(key),
            _ => self.level_by_key.get(&key).copied(),
        }
    }

    /// Records a new level in the side's window if the window covers its key (placing
    /// the window around it if the side has no levels); `false` if it does not.
    fn window_insert(&mut self, side: Side, key: i64, level_slot: u32) -> bool {
        let book_side = self.book_side_mut(side);
        let side_is_empty = book_side.best == NIL;
        let window = book_side.window.get_or_insert_with(|| PriceWindow::centered_on(key));
        if side_is_empty && !window.covers(key) {
            window.recenter(key);
        }
        if !window.covers(key) {
            return false;
        }
        window.insert(key, level_slot);
        true
    }

    /// The level slot of an existing key.
    fn level_at(&self, side: Side, key: i64) -> u32 {
        self.find_level(side, key).expect("every level is indexed by its key")
    }

    /// Of two level slots (either may be `NIL`), the one with the better (smaller) key.
    fn better_level(&self, first: u32, second: u32) -> u32 {
        match (first, second) {
            (NIL, other) | (other, NIL) => other,
            _ if self.levels.get(first).key <= self.levels.get(second).key => first,
            _ => second,
        }
    }

    fn remove_level(&mut self, side: Side, level_slot: u32) {
        let key = self.levels.get(level_slot).key;
        let window = self.book_side_mut(side).window.as_mut().filter(|window| window.covers(key));
        match window {
            Some(window) => window.remove(key),
            None => {
                self.level_by_key.remove(&key);
                let root = self.book_side(side).root;
                let new_root = self.tree_remove(root, key);
                self.book_side_mut(side).root = new_root;
            }
        }
        if self.book_side(side).best == level_slot {
            let best = self.next_level(side, key);
            self.book_side_mut(side).best = best;
        }
        self.levels.remove(level_slot);
    }

    fn leftmost(&self, mut node: u32) -> u32 {
        if node == NIL {
            return NIL;
        }
        loop {
            let left = self.levels.get(node).left;
            if left == NIL {
                return node;
            }
            node = left;
        }
    }

    /// The level after `key` in priority order (the smallest larger key), or `NIL`.
    fn next_level(&self, side: Side, key: i64) -> u32 {
        let book_side = self.book_side(side);
        let in_window = book_side
            .window
            .as_ref()
            .zip(key.checked_add(1))
            .and_then(|(window, next_key)| window.first_at_or_after(next_key))
            .map_or(NIL, |next_key| self.level_at(side, next_key));
        self.better_level(in_window, self.tree_successor(side, key))
    }

    /// The treap's smallest key larger than `key`.
    fn tree_successor(&self, side: Side, key: i64) -> u32 {
        let mut node = self.book_side(side).root;
        let mut successor = NIL;
        while node != NIL {
            let level = self.levels.get(node);
            if level.key > key {
                successor = node;
                node = level.left;
            } else {
                node = level.right;
            }
        }
        successor
    }

    fn tree_insert(&mut self, root: u32, new_node: u32) -> u32 {
        if root == NIL {
            return new_node;
        }
        let (new_key, new_priority) = {
            let level = self.levels.get(new_node);
            (level.key, level.tree_priority)
        };
        let root_level = self.levels.get(root);
        if new_priority > root_level.tree_priority {
            let (smaller, larger) = self.tree_split(root, new_key);
            let level = self.levels.get_mut(new_node);
            level.left = smaller;
            level.right = larger;
            return new_node;
        }
        if new_key < root_level.key {
            let left = root_level.left;
            let new_left = self.tree_insert(left, new_node);
            self.levels.get_mut(root).left = new_left;
        } else {
            let right = root_level.right;
            let new_right = self.tree_insert(right, new_node);
            self.levels.get_mut(root).right = new_right;
        }
        root
    }

    /// Splits the tree at `root` into keys `< key` and keys `> key` (`key` is absent).
    fn tree_split(&mut self, root: u32, key: i64) -> (u32, u32) {
        if root == NIL {
            return (NIL, NIL);
        }
        let level = self.levels.get(root);
        if level.key < key {
            let right = level.right;
            let (smaller, larger) = self.tree_split(right, key);
            self.levels.get_mut(root).right = smaller;
            (root, larger)
        } else {
            let left = level.left;
            let (smaller, larger) = self.tree_split(left, key);
            self.levels.get_mut(root).left = larger;
            (smaller, root)
        }
    }

    fn tree_remove(&mut self, root: u32, key: i64) -> u32 {
        debug_assert!(root != NIL, "removing a level that is not in the tree");
        if root == NIL {
            return NIL;
        }
        let level = self.levels.get(root);
        if key == level.key {
            let (left, right) = (level.left, level.right);
            return self.tree_merge(left, right);
        }
        if key < level.key {
            let left = level.left;
            let new_left = self.tree_remove(left, key);
            self.levels.get_mut(root).left = new_left;
        } else {
            let right = level.right;
            let new_right = self.tree_remove(right, key);
            self.levels.get_mut(root).right = new_right;
        }
        root
    }

    /// Joins two trees where every key of `smaller` is below every key of `larger`.
    fn tree_merge(&mut self, smaller: u32, larger: u32) -> u32 {
        if smaller == NIL {
            return larger;
        }
        if larger == NIL {
            return smaller;
        }
        if self.levels.get(smaller).tree_priority > self.levels.get(larger).tree_priority {
            let right = self.levels.get(smaller).right;
            let merged = self.tree_merge(right, larger);
            self.levels.get_mut(smaller).right = merged;
            smaller
        } else {
            let left = self.levels.get(larger).left;
            let merged = self.tree_merge(smaller, left);
            self.levels.get_mut(larger).left = merged;
            larger
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    struct NoMoney;

    impl MatchHandler for NoMoney {
        fn on_trade(&mut self, _slot: u32, _maker: &RestingOrder, _price: Price, _qty: Qty) {}
        fn on_maker_done(&mut self, _slot: u32, _maker: &RestingOrder, _reason: DoneReason) {}
    }

    use crate::test_random::xorshift64 as next;

    /// Prices near 1,000,000 ticks (inside the window) and far from it (in the treap).
    fn random_price(state: &mut u64, side: Side) -> Price {
        let spread = match next(state) % 4 {
            0 => next(state) % 1_000_000_000,
            1 => next(state) % 200_000,
            _ => next(state) % 2_000,
        } as i64;
        Price(match side {
            Side::Buy => (1_000_000 - 1 - spread).max(1),
            Side::Sell => 1_000_000 + spread,
        })
    }

    fn model_levels(model: &BTreeMap<u32, (Side, Price, Qty)>, side: Side) -> Vec<(i64, i64, u32)> {
        let mut levels: BTreeMap<i64, (i64, u32)> = BTreeMap::new();
        for (order_side, price, qty) in model.values() {
            if *order_side == side {
                let level = levels.entry(side_key(side, *price)).or_default();
                level.0 += qty.0;
                level.1 += 1;
            }
        }
        levels.into_iter().map(|(key, (qty, count))| (key.abs(), qty, count)).collect()
    }

    #[test]
    fn levels_inside_and_outside_the_window_stay_ordered_and_consistent() {
        let mut book = OrderBook::new(BookCapacity { orders: 16, levels: 16 });
        let mut model: BTreeMap<u32, (Side, Price, Qty)> = BTreeMap::new();
        let mut state = 0x9e37_79b9_7f4a_7c15u64;
        for step in 0..20_000u32 {
            let side = if next(&mut state).is_multiple_of(2) { Side::Buy } else { Side::Sell };
            let action = next(&mut state) % 6;
            if model.is_empty() || action < 3 {
                let price = random_price(&mut state, side);
                let remaining = Qty(1 + (next(&mut state) % 9) as i64);
                let slot = book.insert(NewRestingOrder {
                    account: AccountId(0),
                    id: ClientOrderId::new(step.to_string()),
                    side,
                    price,
                    remaining,
                    filled: Qty(i64::from(step % 5)),
                    stp: StpMode::None,
                    post_only: false,
                    offset: Offset::Open,
                    good_for_day: false,
                });
                model.insert(slot, (side, price, remaining));
            } else if action < 5 {
                // An amend that loses priority: the order moves, keeping what it filled.
                let index = (next(&mut state) % model.len() as u64) as usize;
                let slot = *model.keys().nth(index).unwrap();
                let (side, _, _) = model[&slot];
                let filled = book.order(slot).filled;
                let price = random_price(&mut state, side);
                let remaining = Qty(1 + (next(&mut state) % 9) as i64);
                book.requeue(slot, price, remaining);
                let order = book.order(slot);
                assert_eq!(
                    (order.price, order.remaining, order.filled),
                    (price, remaining, filled)
                );
                model.insert(slot, (side, price, remaining));
            } else {
                let index = (next(&mut state) % model.len() as u64) as usize;
                let slot = *model.keys().nth(index).unwrap();
                book.remove(slot);
                model.remove(&slot);
            }
            if step % 97 == 0 {
                book.check_consistency().unwrap();
                for side in [Side::Buy, Side::Sell] {
                    let actual: Vec<_> = book
                        .levels(side)
                        .iter()
                        .map(|level| (level.price.0, level.total_qty.0, level.order_count))
                        .collect();
                    assert_eq!(actual, model_levels(&model, side), "step {step}");
                }
            }
        }
    }

    /// Records the slots of the makers that leave the book, in order.
    struct MakersDone(Vec<u32>);

    impl MatchHandler for MakersDone {
        fn on_trade(&mut self, _slot: u32, _maker: &RestingOrder, _price: Price, _qty: Qty) {}
        fn on_maker_done(&mut self, slot: u32, _maker: &RestingOrder, _reason: DoneReason) {
            self.0.push(slot);
        }
    }

    fn rest(book: &mut OrderBook, id: &str, side: Side, price: i64, remaining: i64) -> u32 {
        book.insert(NewRestingOrder {
            account: AccountId(0),
            id: ClientOrderId::new(id),
            side,
            price: Price(price),
            remaining: Qty(remaining),
            filled: Qty::ZERO,
            stp: StpMode::None,
            post_only: false,
            offset: Offset::Open,
            good_for_day: false,
        })
    }

    #[test]
    fn a_requeued_order_goes_to_the_back_of_its_new_level_and_leaves_its_old_one() {
        let mut book = OrderBook::new(BookCapacity { orders: 16, levels: 16 });
        let moved = rest(&mut book, "moved", Side::Sell, 101, 2);
        let stays = rest(&mut book, "stays", Side::Sell, 101, 3);
        let first = rest(&mut book, "first", Side::Sell, 102, 4);
        book.requeue(moved, Price(102), Qty(5));
        book.check_consistency().unwrap();
        let levels: Vec<_> = book
            .levels(Side::Sell)
            .iter()
            .map(|level| (level.price.0, level.total_qty.0, level.order_count))
            .collect();
        assert_eq!(levels, [(101, 3, 1), (102, 9, 2)]);
        // A buyer of everything meets 101 first, then 102 in time order: `first`, then
        // the requeued order behind it.
        let mut taker = Taker {
            account: AccountId(1),
            side: Side::Buy,
            limit: Price(102),
            remaining: Qty(12),
            stp: StpMode::None,
        };
        let mut done = MakersDone(Vec::new());
        assert_eq!(book.match_taker(&mut taker, &mut done), MatchEnd::Filled);
        assert_eq!(done.0, [stays, first, moved]);
    }

    #[test]
    fn the_hint_walks_find_the_makers_a_taker_meets_and_the_level_of_a_price() {
        let mut state = 0x5851_f42d_4c95_7f2du64;
        for round in 0..200 {
            let mut book = OrderBook::new(BookCapacity { orders: 16, levels: 16 });
            let mut level_of_price = BTreeMap::new();
            for number in 0..(1 + next(&mut state) % 60) {
                let price = random_price(&mut state, Side::Sell);
                let slot = book.insert(NewRestingOrder {
                    account: AccountId(1),
                    id: ClientOrderId::new(number.to_string()),
                    side: Side::Sell,
                    price,
                    remaining: Qty(1),
                    filled: Qty::ZERO,
                    stp: StpMode::None,
                    post_only: false,
                    offset: Offset::Open,
                    good_for_day: false,
                });
                level_of_price.insert(price, book.order(slot).level);
            }
            for (price, level) in &level_of_price {
                assert_eq!(book.prefetch_level(Side::Sell, *price), Some(*level));
            }
            assert_eq!(book.prefetch_level(Side::Sell, Price(999_999)), None);

            let limit = random_price(&mut state, Side::Sell);
            let mut walked = Vec::new();
            let mut maker = book.first_maker(Side::Buy, limit);
            while let Some(slot) = maker {
                walked.push(slot);
                maker = book.next_maker(slot, Side::Buy, limit);
            }
            let mut taker = Taker {
                account: AccountId(2),
                side: Side::Buy,
                limit,
                remaining: Qty(1_000),
                stp: StpMode::None,
            };
            let mut met = MakersDone(Vec::new());
            book.match_taker(&mut taker, &mut met);
            assert_eq!(walked, met.0, "round {round}");
        }
    }

    #[test]
    fn a_sweep_crosses_from_the_window_into_the_treap() {
        let mut book = OrderBook::new(BookCapacity::default());
        for (index, price) in [100_000i64, 100_001, 5_000_000, 90_000_000].into_iter().enumerate() {
            book.insert(NewRestingOrder {
                account: AccountId(1),
                id: ClientOrderId::new(index.to_string()),
                side: Side::Sell,
                price: Price(price),
                remaining: Qty(1),
                filled: Qty::ZERO,
                stp: StpMode::None,
                post_only: false,
                offset: Offset::Open,
                good_for_day: false,
            });
        }
        let mut taker = Taker {
            account: AccountId(2),
            side: Side::Buy,
            limit: Price(6_000_000),
            remaining: Qty(10),
            stp: StpMode::CancelTaker,
        };
        assert!(book.can_fill_completely(&Taker { remaining: Qty(3), ..taker }));
        assert!(!book.can_fill_completely(&Taker { remaining: Qty(4), ..taker }));
        assert_eq!(book.match_taker(&mut taker, &mut NoMoney), MatchEnd::NoMoreCrossing);
        assert_eq!(taker.remaining, Qty(7));
        assert_eq!(book.best_price(Side::Sell), Some(Price(90_000_000)));
        book.check_consistency().unwrap();
    }
}
