//! The order book of one instrument and its matcher: price-time priority, nothing else.
//!
//! The book knows orders, prices, quantities and which account owns an order (for
//! self-trade prevention). It knows nothing about money: what an order holds and what a
//! fill moves between accounts is the business of the account kind (`spot`), reached
//! through the `MatchHandler` the caller passes in. It must never allocate per order on
//! the hot path: orders live in a slab; each side's levels near the market are held in
//! place in a price window (a level there is an array entry and a bit: creating or
//! dropping one allocates nothing and walks nothing), and the rare levels beyond it live
//! in a slab as an intrusive treap (priorities are a fixed hash of the price, so the
//! shape is deterministic).
//!
//! Costs: cancel by slot is O(1) (plus a bitmap scan, or O(log levels) beyond the
//! window, when it empties the best level); the best price is cached, O(1); adding to a
//! level in the window is O(1); a match step is O(1) per order filled.

use crate::command::{Offset, Side, StpMode};
use crate::event::DoneReason;
use crate::ids::{AccountId, ClientOrderId};
use crate::num::{Price, Qty};
use rustc_hash::FxHashMap;
use std::hint::select_unpredictable;

use crate::prefetch::prefetch;
use crate::price_window::{LevelQueue, PriceWindow, WINDOW_KEYS};
use crate::slab::Slab;

/// Marks "no slot" in the intrusive links.
const NIL: u32 = u32::MAX;

/// Where a level's queue is: an offset in its side's window, or a slot of the level
/// slab (a level beyond the window). Orders carry one, so that taking an order off its
/// level finds the level without a search.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct LevelRef(u32);

/// Where a `LevelRef` points, decoded.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum LevelPlace {
    Nowhere,
    Window(u32),
    Pool(u32),
}

impl LevelRef {
    const NONE: LevelRef = LevelRef(NIL);
    /// Set on a window offset; level slab slots stay below it.
    const IN_WINDOW: u32 = 1 << 31;

    #[inline]
    fn window(offset: u32) -> LevelRef {
        debug_assert!(offset < Self::IN_WINDOW);
        LevelRef(offset | Self::IN_WINDOW)
    }

    #[inline]
    fn pool(slot: u32) -> LevelRef {
        assert!(slot < Self::IN_WINDOW, "level slab slots stay below 2^31");
        LevelRef(slot)
    }

    #[inline]
    fn is_none(self) -> bool {
        self == LevelRef::NONE
    }

    #[inline]
    fn place(self) -> LevelPlace {
        if self.is_none() {
            LevelPlace::Nowhere
        } else if self.0 & Self::IN_WINDOW != 0 {
            LevelPlace::Window(self.0 & !Self::IN_WINDOW)
        } else {
            LevelPlace::Pool(self.0)
        }
    }
}

// A window offset with its tag is never `NONE`.
const _: () = assert!((crate::price_window::WINDOW_KEYS as u32 - 1) | LevelRef::IN_WINDOW != NIL);

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
    level: LevelRef,
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
            level: LevelRef::NONE,
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

/// A level beyond the window: its queue, its key and its treap links.
#[derive(Clone, Debug)]
struct PooledLevel {
    /// The side-normalised sort key: smaller is better (`-price` for bids).
    key: i64,
    tree_priority: u64,
    left: u32,
    right: u32,
    queue: LevelQueue,
}

impl PooledLevel {
    /// What fills a slot that holds no level.
    fn vacant() -> PooledLevel {
        PooledLevel {
            key: 0,
            tree_priority: 0,
            left: NIL,
            right: NIL,
            queue: LevelQueue::default(),
        }
    }
}

/// One side's levels: those near the market held in a window (placed around the side's
/// first level, moved when the side empties), the others in a treap, and the cached
/// best level.
struct BookSide {
    window: PriceWindow,
    root: u32,
    best: LevelRef,
    /// The side key of `best` (meaningless while `best` is `NONE`).
    best_key: i64,
}

impl BookSide {
    fn empty() -> BookSide {
        BookSide {
            window: PriceWindow::centered_on(0),
            root: NIL,
            best: LevelRef::NONE,
            best_key: 0,
        }
    }

    /// Makes the level at `key` the best if it is better than the best.
    #[inline]
    fn offer_best(&mut self, level: LevelRef, key: i64) {
        if self.best.is_none() || key < self.best_key {
            self.best = level;
            self.best_key = key;
        }
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

/// A market buy that spends an amount instead of buying a quantity (`quote_qty`), while
/// it matches. The book stays money-blind: `left` counts in units of the caller's
/// choosing, of which a notional unit (one price unit times one quantity unit) is
/// `units_per_notional` (the spot account kind's quote units per notional unit).
#[derive(Clone, Copy, Debug)]
pub struct SpendingBuyer {
    pub account: AccountId,
    /// The protection price.
    pub limit: Price,
    pub stp: StpMode,
    pub lot: Qty,
    pub units_per_notional: i64,
    /// What it may still spend.
    pub left: i64,
    /// What it has bought so far.
    pub bought: Qty,
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
    /// The levels beyond the windows.
    levels: Slab<PooledLevel>,
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

/// The price of side key `key` (the inverse of `side_key`).
#[inline]
fn key_price(side: Side, key: i64) -> Price {
    match side {
        Side::Buy => Price(-key),
        Side::Sell => Price(key),
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
            levels: Slab::with_capacity(capacity.levels, PooledLevel::vacant()),
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
        self.levels.len() + self.bids.window.len() + self.asks.window.len()
    }

    // ----- levels by reference: in the window or in the slab -----

    /// The queue of the level at `level` on `side`, which must exist.
    #[inline]
    fn queue(&self, side: Side, level: LevelRef) -> LevelQueue {
        match level.place() {
            LevelPlace::Window(offset) => self.book_side(side).window.queue(offset),
            LevelPlace::Pool(slot) => self.levels.get(slot).queue,
            LevelPlace::Nowhere => unreachable!("the queue of no level"),
        }
    }

    /// Changes the queue of the level at `level` on `side`, which must exist.
    #[inline(always)]
    fn update_queue<R>(
        &mut self,
        side: Side,
        level: LevelRef,
        change: impl FnOnce(&mut LevelQueue) -> R,
    ) -> R {
        match level.place() {
            LevelPlace::Window(offset) => {
                let window = &mut self.book_side_mut(side).window;
                let mut queue = window.queue(offset);
                let result = change(&mut queue);
                window.set_queue(offset, queue);
                result
            }
            LevelPlace::Pool(slot) => change(&mut self.levels.get_mut(slot).queue),
            LevelPlace::Nowhere => unreachable!("the queue of no level"),
        }
    }

    /// The side key of the level at `level` on `side`, which must exist.
    #[inline]
    fn level_key(&self, side: Side, level: LevelRef) -> i64 {
        match level.place() {
            LevelPlace::Window(offset) => self.book_side(side).window.key_at_offset(offset),
            LevelPlace::Pool(slot) => self.levels.get(slot).key,
            LevelPlace::Nowhere => unreachable!("the key of no level"),
        }
    }

    #[inline]
    fn level_price(&self, side: Side, level: LevelRef) -> Price {
        key_price(side, self.level_key(side, level))
    }

    /// The queue of `level` on `side` if it names a place that exists: for cache hints,
    /// which may hold a stale reference.
    #[inline]
    fn try_queue(&self, side: Side, level: LevelRef) -> Option<(i64, LevelQueue)> {
        match level.place() {
            LevelPlace::Window(offset) if (offset as usize) < WINDOW_KEYS => {
                let window = &self.book_side(side).window;
                Some((window.key_at_offset(offset), window.queue(offset)))
            }
            LevelPlace::Pool(slot) => {
                self.levels.try_get(slot).map(|level| (level.key, level.queue))
            }
            _ => None,
        }
    }

    /// Hint: the queue of `level` on `side`. Never panics.
    #[inline]
    fn prefetch_queue(&self, side: Side, level: LevelRef) {
        match level.place() {
            LevelPlace::Window(offset) => self.book_side(side).window.prefetch_queue(offset),
            LevelPlace::Pool(slot) => {
                if let Some(level) = self.levels.try_get(slot) {
                    prefetch(&level.queue);
                }
            }
            LevelPlace::Nowhere => {}
        }
    }

    /// The best price resting on `side`, O(1).
    #[inline]
    pub fn best_price(&self, side: Side) -> Option<Price> {
        let book_side = self.book_side(side);
        (!book_side.best.is_none()).then(|| key_price(side, book_side.best_key))
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
        self.prefetch_queue(order.side, order.level);
        Some(order.side)
    }

    /// Hint: the window entry that holds the level for `price` on `side`, and the best
    /// level of the other side, which an order at `price` is checked against.
    #[inline]
    pub(crate) fn prefetch_level_lookup(&self, side: Side, price: Option<Price>) {
        let window = &self.book_side(side).window;
        if let Some(offset) = price.and_then(|price| window.offset(side_key(side, price))) {
            window.prefetch_queue(offset);
        }
        self.prefetch_queue(side.opposite(), self.book_side(side.opposite()).best);
    }

    /// Hint: the level for `price` on `side`, or where a new one would go. Returns the
    /// level if it exists.
    #[inline]
    pub(crate) fn prefetch_level(&self, side: Side, price: Price) -> Option<LevelRef> {
        let key = side_key(side, price);
        let window = &self.book_side(side).window;
        match window.offset(key) {
            Some(offset) => {
                window.prefetch_queue(offset);
                window.is_occupied(offset).then_some(LevelRef::window(offset))
            }
            None => {
                let slot = self.level_by_key.get(&key).copied()?;
                let level = LevelRef::pool(slot);
                self.prefetch_queue(side, level);
                Some(level)
            }
        }
    }

    /// Hint: the link of the last order of `level` on `side`, which a new order there is
    /// linked behind. Reads the level.
    #[inline]
    pub(crate) fn prefetch_tail_link(&self, side: Side, level: LevelRef) {
        let tail = self
            .try_queue(side, level)
            .filter(|(_, queue)| queue.order_count > 0)
            .and_then(|(_, queue)| self.orders.try_get(queue.tail));
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
        let maker_side = taker_side.opposite();
        let (key, queue) = self.try_queue(maker_side, self.book_side(maker_side).best)?;
        crosses(taker_side, limit, key_price(maker_side, key)).then_some(queue.head)
    }

    /// The order such a taker would trade with after the one at `maker`, if any. Reads
    /// that maker, and the next level when it is the last of its own.
    pub(crate) fn next_maker(&self, maker: u32, taker_side: Side, limit: Price) -> Option<u32> {
        let maker = self.orders.try_get(maker)?;
        if maker.next != NIL {
            return Some(maker.next);
        }
        let maker_side = taker_side.opposite();
        let (key, _) = self.try_queue(maker_side, maker.level)?;
        let (next_key, next_queue) =
            self.try_queue(maker_side, self.next_level(maker_side, key))?;
        crosses(taker_side, limit, key_price(maker_side, next_key)).then_some(next_queue.head)
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
            level: LevelRef::NONE,
        });
        self.attach(slot, new_order.price, new_order.remaining, new_order.filled);
        slot
    }

    /// Puts a detached order back on the book at the back of the level for `price`.
    pub fn attach(&mut self, slot: u32, price: Price, remaining: Qty, filled: Qty) {
        let side = self.orders.get(slot).side;
        self.attach_on(side, slot, price, remaining, filled);
    }

    /// `attach`, for a caller that knows the order's side.
    #[inline(always)]
    fn attach_on(&mut self, side: Side, slot: u32, price: Price, remaining: Qty, filled: Qty) {
        debug_assert!(remaining.0 > 0 && price.0 > 0);
        debug_assert!(!self.would_cross(side, price));
        let key = side_key(side, price);
        let book_side = self.book_side_mut(side);
        if book_side.best.is_none() && !book_side.window.covers(key) {
            book_side.window.recenter(key);
        }
        let join = |queue: &mut LevelQueue| {
            let previous_tail = select_unpredictable(queue.order_count == 0, NIL, queue.tail);
            queue.head = select_unpredictable(previous_tail == NIL, slot, queue.head);
            queue.tail = slot;
            queue.total_qty += remaining;
            queue.order_count += 1;
            previous_tail
        };
        // Near the market (nearly always) the level is the window entry itself: it is
        // read, created if empty, and written back in one place.
        let (level, previous_tail) = match book_side.window.offset(key) {
            Some(offset) => {
                let level = LevelRef::window(offset);
                let mut queue = book_side.window.queue(offset);
                if queue.order_count == 0 {
                    book_side.window.occupy(offset);
                    book_side.offer_best(level, key);
                }
                let previous_tail = join(&mut queue);
                book_side.window.set_queue(offset, queue);
                (level, previous_tail)
            }
            None => {
                let level = self.pooled_level_for_insert(side, key);
                (level, self.update_queue(side, level, join))
            }
        };
        // As in `detach`: with no order before it, the link is written to the order
        // itself, and overwritten just below.
        let before = select_unpredictable(previous_tail != NIL, previous_tail, slot);
        self.orders.get_mut(before).next = slot;
        let order = self.orders.get_mut(slot);
        debug_assert!(order.level.is_none(), "attach of an order already on the book");
        order.price = price;
        order.remaining = remaining;
        order.filled = filled;
        order.previous = previous_tail;
        order.next = NIL;
        order.level = level;
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
        self.unlink(slot);
        self.orders.get(slot)
    }

    /// `detach`; returns the order's side and what it has filled, which attaching it
    /// again needs.
    #[inline(always)]
    fn unlink(&mut self, slot: u32) -> (Side, Qty) {
        // Each record is looked up once: the order, its neighbours, its level.
        let order = self.orders.get_mut(slot);
        let (previous, next, level, remaining, side, filled) =
            (order.previous, order.next, order.level, order.remaining, order.side, order.filled);
        debug_assert!(!level.is_none(), "detach of an order not on the book");
        order.level = LevelRef::NONE;
        // Whether the order has neighbours is data the branch predictor cannot learn, so
        // the links are mended without branching on it: a missing neighbour's write goes
        // to the order itself, which is off its level now and whose links are written
        // afresh when it is attached again.
        let before = select_unpredictable(previous != NIL, previous, slot);
        let after = select_unpredictable(next != NIL, next, slot);
        self.orders.get_mut(before).next = next;
        self.orders.get_mut(after).previous = previous;
        let level_is_empty = self.update_queue(side, level, |queue| {
            queue.head = select_unpredictable(previous == NIL, next, queue.head);
            queue.tail = select_unpredictable(next == NIL, previous, queue.tail);
            queue.total_qty -= remaining;
            queue.order_count -= 1;
            debug_assert!(queue.order_count > 0 || queue.total_qty.is_zero());
            queue.order_count == 0
        });
        if level_is_empty {
            self.remove_level(side, level);
        }
        (side, filled)
    }

    /// Moves a resting order to `price` with `remaining` left, at the back of that
    /// level's queue (an amend that loses its priority), keeping what it has filled.
    /// The price must not cross the other side.
    pub fn requeue(&mut self, slot: u32, price: Price, remaining: Qty) {
        let (side, filled) = self.unlink(slot);
        self.attach_on(side, slot, price, remaining, filled);
    }

    /// Frees the slot of a detached order that will not come back.
    pub fn free_detached(&mut self, slot: u32) {
        debug_assert!(self.orders.get(slot).level.is_none());
        self.orders.remove(slot);
    }

    /// Lowers an order's remaining quantity in place, keeping its queue position.
    pub fn reduce(&mut self, slot: u32, new_remaining: Qty) {
        let order = self.orders.get_mut(slot);
        debug_assert!(new_remaining.0 > 0 && new_remaining <= order.remaining);
        let decrease = order.remaining - new_remaining;
        order.remaining = new_remaining;
        let (side, level) = (order.side, order.level);
        self.update_queue(side, level, |queue| queue.total_qty -= decrease);
    }

    /// Fill-or-kill pre-check: could `taker` execute its whole quantity now? Counts
    /// resting orders at acceptable prices in priority order; own orders stop the count
    /// (`cancel_taker`, `cancel_both`), are skipped (`cancel_maker`) or count (`none`).
    pub fn can_fill_completely(&self, taker: &Taker) -> bool {
        let maker_side = taker.side.opposite();
        let mut needed = taker.remaining;
        let mut level = self.book_side(maker_side).best;
        while !level.is_none() {
            let key = self.level_key(maker_side, level);
            if !crosses(taker.side, taker.limit, key_price(maker_side, key)) {
                return false;
            }
            let mut order_slot = self.queue(maker_side, level).head;
            for _ in 0..self.queue(maker_side, level).order_count {
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
            level = self.next_level(maker_side, key);
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
            let best = self.book_side(maker_side);
            let (level, price) = (best.best, key_price(maker_side, best.best_key));
            if level.is_none() {
                return MatchEnd::NoMoreCrossing;
            }
            if !crosses(taker.side, taker.limit, price) {
                return MatchEnd::NoMoreCrossing;
            }
            let maker_slot = self.queue(maker_side, level).head;
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
            self.update_queue(maker_side, level, |queue| queue.total_qty -= qty);
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

    /// Matches a spending buyer against the asks (`orders.md`, "Market buys by amount
    /// to spend"). Before each maker, in this order: nothing left to spend: `Filled`;
    /// no ask at or below the protection price: `NoMoreCrossing`; what is left buys
    /// less than a lot at the best ask's price: `Filled` if it bought anything, else
    /// `NoMoreCrossing`; then self-trade prevention as in `match_taker`. Each trade takes
    /// the largest lot multiple that `left` pays for, at most the maker's quantity, and
    /// takes its price times its quantity from `left`.
    pub fn match_spending_buyer(
        &mut self,
        buyer: &mut SpendingBuyer,
        handler: &mut impl MatchHandler,
    ) -> MatchEnd {
        debug_assert!(buyer.lot.0 > 0 && buyer.units_per_notional > 0 && buyer.left >= 0);
        loop {
            if buyer.left == 0 {
                return MatchEnd::Filled;
            }
            let asks = &self.asks;
            let (level, price) = (asks.best, key_price(Side::Sell, asks.best_key));
            if level.is_none() || price > buyer.limit {
                return MatchEnd::NoMoreCrossing;
            }
            // Prices and lots are positive and within i64, the factor at most 10^18: the
            // product fits in i128.
            let lot_cost = i128::from(price.0)
                * i128::from(buyer.lot.0)
                * i128::from(buyer.units_per_notional);
            let affordable_lots = i128::from(buyer.left) / lot_cost;
            if affordable_lots == 0 {
                return match buyer.bought.is_zero() {
                    true => MatchEnd::NoMoreCrossing,
                    false => MatchEnd::Filled,
                };
            }
            let maker_slot = self.queue(Side::Sell, level).head;
            let maker = self.orders.get(maker_slot);
            if maker.account == buyer.account {
                match buyer.stp {
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
            // At most the maker's quantity, so within i64.
            let affordable = affordable_lots.saturating_mul(i128::from(buyer.lot.0));
            let qty = Qty(affordable.min(i128::from(maker.remaining.0)) as i64);
            let cost =
                i128::from(price.0) * i128::from(qty.0) * i128::from(buyer.units_per_notional);
            debug_assert!(qty.0 > 0 && qty.0 % buyer.lot.0 == 0 && cost <= i128::from(buyer.left));
            buyer.left -= cost as i64;
            buyer.bought += qty;
            self.update_queue(Side::Sell, level, |queue| queue.total_qty -= qty);
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
        self.for_each_level_ref(side, |book, level| {
            let queue = book.queue(side, level);
            let mut order_slot = queue.head;
            for _ in 0..queue.order_count {
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
        self.for_each_level_ref(side, |book, level| {
            let summary = book.level_summary(side, level);
            visit(summary, LevelOrders { book, next: book.queue(side, level).head });
        });
    }

    fn level_summary(&self, side: Side, level: LevelRef) -> LevelSummary {
        let queue = self.queue(side, level);
        LevelSummary {
            price: self.level_price(side, level),
            total_qty: queue.total_qty,
            order_count: queue.order_count,
        }
    }

    /// The best `max_levels` levels of `side`, best first: what a depth feed reads, in
    /// time proportional to what it returns, however deep the book.
    pub fn top_levels(&self, side: Side, max_levels: usize) -> Vec<LevelSummary> {
        let mut summaries = Vec::with_capacity(max_levels.min(1024));
        let mut level = self.book_side(side).best;
        while !level.is_none() && summaries.len() < max_levels {
            summaries.push(self.level_summary(side, level));
            level = self.next_level(side, self.level_key(side, level));
        }
        summaries
    }

    /// Aggregated depth of `side`, best first.
    pub fn levels(&self, side: Side) -> Vec<LevelSummary> {
        let mut summaries = Vec::new();
        self.for_each_level_ref(side, |book, level| {
            summaries.push(book.level_summary(side, level));
        });
        summaries
    }

    fn for_each_level_ref<'book>(
        &'book self,
        side: Side,
        mut visit: impl FnMut(&'book OrderBook, LevelRef),
    ) {
        let mut level = self.book_side(side).best;
        while !level.is_none() {
            visit(self, level);
            level = self.next_level(side, self.level_key(side, level));
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
            self.for_each_level_ref(side, |book, level| {
                levels_seen += 1;
                let key = book.level_key(side, level);
                let price = key_price(side, key);
                if previous_key.is_some_and(|previous| previous >= key) {
                    problem = Some(format!("levels out of order at price {}", price.0));
                }
                previous_key = Some(key);
                let queue = book.queue(side, level);
                let (mut total, mut count, mut slot, mut previous) =
                    (Qty::ZERO, 0u32, queue.head, NIL);
                while count < queue.order_count {
                    let Some(order) = book.orders.try_get(slot) else {
                        problem = Some(format!("level {} links past the pool", price.0));
                        break;
                    };
                    if order.level != level
                        || order.previous != previous
                        || order.price != price
                        || order.side != side
                        || order.remaining.0 <= 0
                    {
                        problem =
                            Some(format!("order {} misplaced at price {}", order.id, price.0));
                    }
                    total += order.remaining;
                    count += 1;
                    previous = slot;
                    slot = order.next;
                }
                if slot != NIL || queue.tail != previous || total != queue.total_qty || count == 0 {
                    problem = Some(format!("level {} totals disagree with its orders", price.0));
                }
                orders_seen += count as usize;
            });
            if let Some(problem) = problem {
                return Err(problem);
            }
            let book_side = self.book_side(side);
            let window_first =
                book_side.window.first_offset_at_or_after(i64::MIN).map(LevelRef::window);
            let tree_first = self.leftmost(book_side.root);
            let tree_first = (tree_first != NIL).then(|| LevelRef::pool(tree_first));
            let first = match (window_first, tree_first) {
                (Some(window), Some(tree)) => self.better_level(side, window, tree),
                (first, None) | (None, first) => first.unwrap_or(LevelRef::NONE),
            };
            if first != book_side.best
                || (!first.is_none() && self.level_key(side, first) != book_side.best_key)
            {
                return Err("cached best level is not the best".to_string());
            }
        }
        if orders_seen != self.orders.len()
            || levels_seen != self.level_count()
            || self.levels.len() != self.level_by_key.len()
        {
            return Err("slab counts disagree with the book".to_string());
        }
        Ok(())
    }

    // ----- price levels: held in a window near the market, a treap beyond it -----

    /// The level beyond the window at `key` on `side`, created empty (and made the best
    /// if it is) when there is none.
    fn pooled_level_for_insert(&mut self, side: Side, key: i64) -> LevelRef {
        if let Some(&slot) = self.level_by_key.get(&key) {
            return LevelRef::pool(slot);
        }
        let level = self.pooled_level_insert(side, key);
        self.book_side_mut(side).offer_best(level, key);
        level
    }

    /// Creates an empty level beyond the window at `key`.
    fn pooled_level_insert(&mut self, side: Side, key: i64) -> LevelRef {
        let slot = self.levels.insert(PooledLevel {
            key,
            tree_priority: tree_priority(key),
            left: NIL,
            right: NIL,
            queue: LevelQueue::default(),
        });
        self.level_by_key.insert(key, slot);
        let root = self.book_side(side).root;
        let new_root = self.tree_insert(root, slot);
        self.book_side_mut(side).root = new_root;
        LevelRef::pool(slot)
    }

    /// Of two levels of `side`, the one with the better (smaller) key.
    fn better_level(&self, side: Side, first: LevelRef, second: LevelRef) -> LevelRef {
        if self.level_key(side, first) <= self.level_key(side, second) {
            first
        } else {
            second
        }
    }

    /// Drops the empty level at `level` on `side`.
    fn remove_level(&mut self, side: Side, level: LevelRef) {
        let key = self.level_key(side, level);
        match level.place() {
            LevelPlace::Window(offset) => self.book_side_mut(side).window.vacate(offset),
            LevelPlace::Pool(slot) => {
                self.level_by_key.remove(&key);
                let root = self.book_side(side).root;
                let new_root = self.tree_remove(root, key);
                self.book_side_mut(side).root = new_root;
                self.levels.remove(slot);
            }
            LevelPlace::Nowhere => unreachable!("removing no level"),
        }
        if self.book_side(side).best == level {
            let best = self.next_level(side, key);
            let best_key = if best.is_none() { 0 } else { self.level_key(side, best) };
            let book_side = self.book_side_mut(side);
            book_side.best = best;
            book_side.best_key = best_key;
        }
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

    /// The level after `key` on `side` in priority order (the smallest larger key), or
    /// `NONE`.
    fn next_level(&self, side: Side, key: i64) -> LevelRef {
        let book_side = self.book_side(side);
        let in_window = key
            .checked_add(1)
            .and_then(|next_key| book_side.window.first_offset_at_or_after(next_key))
            .map(LevelRef::window);
        let successor = self.tree_successor(side, key);
        let in_tree = (successor != NIL).then(|| LevelRef::pool(successor));
        match (in_window, in_tree) {
            (Some(window), Some(tree)) => self.better_level(side, window, tree),
            (next, None) | (None, next) => next.unwrap_or(LevelRef::NONE),
        }
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
