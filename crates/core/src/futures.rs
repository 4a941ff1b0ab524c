//! The futures account kind (`shared/spec/futures.md`): what a futures order holds or
//! reserves, what a futures fill moves, and the positions it opens and closes.
//!
//! A sibling of `spot` with the same three duties (hold, settle a fill, release), plus
//! what only futures have: positions per account and contract, each a long and a short
//! side of lots-at-price kept as one history entry and a list of today's entries; close
//! orders' reservations on them; realised profit; daily settlement; expiry. Margin and
//! fees are fixed amounts per lot, so every amount is exact and linear in the quantity
//! and no hold depends on a price. Money stays in the ledger (position margin is part of
//! `held`); this module owns the positions and the rules, and never decides whether a
//! command is valid in the replay format's order of checks (the exchange does).
//!
//! Today's entries come from one pool per contract (`Slab`), so opening and closing
//! positions allocate nothing once the pool has grown to the contract's peak.

use crate::command::{Offset, PositionSide};
use crate::ids::{AccountId, AssetId, Seq};
use crate::num::{Amount, Price, Qty};
use crate::slab::Slab;

/// A futures contract's money rules, in engine units.
#[derive(Clone, Debug)]
pub struct FutureRules {
    /// The asset margin, fees and profit are paid in.
    pub settle: AssetId,
    /// The lot in quantity units (also the instrument's): `qty / lot` lots.
    pub lot: Qty,
    /// The multiplier in units of `10^-multiplier_decimals`.
    pub multiplier: i64,
    pub multiplier_decimals: u32,
    /// Settle-asset units per (price unit x quantity unit x multiplier unit):
    /// `10^(decimals(settle) - decimals(tick) - decimals(lot) - decimals(multiplier))`.
    pub value_scale: i64,
    /// Per lot, in settle-asset units; positive. Changed by the `margin` command.
    pub margin: Amount,
    /// Per lot; `0 <= maker_fee <= taker_fee`.
    pub maker_fee: Amount,
    pub taker_fee: Amount,
    /// SHFE-style: `close` takes only history, `close_today` only today's entries.
    pub close_today: bool,
}

/// Which entries of a side a closing order takes, oldest first.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Takes {
    /// History, then today's entries (`close` without the close-today rule, and every
    /// liquidation).
    HistoryThenToday,
    /// History only (`close` under the close-today rule).
    HistoryOnly,
    /// Today's entries only (`close_today` under the close-today rule).
    TodayOnly,
}

impl FutureRules {
    /// Whole lots in `qty` (a validated multiple of the lot).
    #[inline]
    pub fn lots(&self, qty: Qty) -> i64 {
        debug_assert!(qty.0 % self.lot.0 == 0);
        qty.0 / self.lot.0
    }

    /// What an open order of `qty` holds: `lots * (margin + taker_fee)`, or `None` when
    /// beyond the `i64` range (more than any account has). Takes a validated quantity
    /// that may not fit `i64` yet.
    pub fn open_hold(&self, qty: i128) -> Option<Amount> {
        // In 64 bits when the quantity and the per-lot hold fit (every order a gateway
        // takes): 128-bit arithmetic costs tens of instructions, and this runs for
        // every amend. The product fits `i64` exactly when the 128-bit one would.
        if let (Ok(qty), Some(per_lot)) =
            (i64::try_from(qty), self.margin.0.checked_add(self.taker_fee.0))
        {
            return (qty / self.lot.0).checked_mul(per_lot).map(Amount);
        }
        let lots = qty / i128::from(self.lot.0);
        let per_lot = i128::from(self.margin.0) + i128::from(self.taker_fee.0);
        i64::try_from(lots.checked_mul(per_lot)?).ok().map(Amount)
    }

    /// What a resting order with `remaining` holds: an open order its lots' margin and
    /// taker fee, a close order nothing. Fitted when it was taken, and the margin rate
    /// only changes through `margin`, which re-prices holds within the same bounds the
    /// ledger keeps.
    #[inline]
    pub fn resting_hold(&self, offset: Offset, remaining: Qty) -> Amount {
        match offset {
            Offset::Open => Amount(self.lots(remaining) * (self.margin.0 + self.taker_fee.0)),
            Offset::Close | Offset::CloseToday => Amount::ZERO,
        }
    }

    /// The margin of a position of `qty`.
    #[inline]
    pub fn position_margin(&self, qty: Qty) -> Amount {
        Amount(self.lots(qty) * self.margin.0)
    }

    /// The fee of a fill of `qty` for the maker or the taker.
    #[inline]
    pub fn fee(&self, qty: Qty, is_taker: bool) -> Amount {
        let per_lot = if is_taker { self.taker_fee } else { self.maker_fee };
        Amount(self.lots(qty) * per_lot.0)
    }

    /// Settle-asset units per (price unit x quantity unit): multiplier x value scale.
    #[inline]
    fn units_per_notional(&self) -> i128 {
        i128::from(self.multiplier) * i128::from(self.value_scale)
    }

    /// The value `price * qty * multiplier` in settle-asset units, in 128 bits.
    pub fn value(&self, price: Price, qty: Qty) -> i128 {
        i128::from(price.0) * i128::from(qty.0) * self.units_per_notional()
    }

    /// The profit of `qty` at `price` against entries whose `sum(p_i * q_i)` is
    /// `basis`: `qty * price - basis` (in value units) for a long side, its negation for
    /// a short one. Within `i64` for every stream `futures.md` covers; a stream beyond
    /// its range is clamped rather than wrapped.
    pub fn profit(&self, side: PositionSide, price: Price, qty: Qty, basis: i128) -> Amount {
        let difference = (i128::from(price.0) * i128::from(qty.0) - basis)
            .saturating_mul(self.units_per_notional());
        let signed = match side {
            PositionSide::Long => difference,
            PositionSide::Short => -difference,
        };
        Amount(signed.clamp(i128::from(i64::MIN), i128::from(i64::MAX)) as i64)
    }

    /// What a close order with `offset` takes; `None` for `close_today` on a contract
    /// without the close-today rule (`invalid_offset`) and for `open`.
    pub fn takes(&self, offset: Offset) -> Option<Takes> {
        match (offset, self.close_today) {
            (Offset::Open, _) | (Offset::CloseToday, false) => None,
            (Offset::Close, false) => Some(Takes::HistoryThenToday),
            (Offset::Close, true) => Some(Takes::HistoryOnly),
            (Offset::CloseToday, true) => Some(Takes::TodayOnly),
        }
    }
}

/// One of today's lots-at-price, in its side's list.
#[derive(Clone, Copy, Debug)]
struct TodayEntry {
    price: Price,
    qty: Qty,
    /// The next (newer) entry of the side, or `NIL`.
    next: u32,
}

const NIL: u32 = u32::MAX;

const VACANT_ENTRY: TodayEntry = TodayEntry { price: Price::ZERO, qty: Qty::ZERO, next: NIL };

/// One side (long or short) of one account's position in one contract.
#[derive(Clone, Copy, Debug)]
pub struct PositionSideState {
    /// The history entry: opened before the last settlement (`qty` zero: none).
    pub history_price: Price,
    pub history_qty: Qty,
    /// Today's entries, oldest first, as a list in the contract's pool.
    today_head: u32,
    today_tail: u32,
    /// The sum of today's entries.
    pub today_qty: Qty,
    /// The remaining quantity of the account's open `close` orders on this side.
    pub reserved_close: Qty,
    /// The remaining quantity of its open `close_today` orders (close-today rule only).
    pub reserved_close_today: Qty,
    /// `sum(open price * qty)` of what is open, in price units x quantity units: what
    /// opening cost, which settlement does not re-price. A close takes its share at the
    /// average (`open_cost * taken / qty`, rounded down); for the account view's open
    /// price and float profit only (no money depends on it).
    pub open_cost: i128,
}

impl Default for PositionSideState {
    fn default() -> Self {
        PositionSideState {
            history_price: Price::ZERO,
            history_qty: Qty::ZERO,
            today_head: NIL,
            today_tail: NIL,
            today_qty: Qty::ZERO,
            reserved_close: Qty::ZERO,
            reserved_close_today: Qty::ZERO,
            open_cost: 0,
        }
    }
}

impl PositionSideState {
    pub fn qty(&self) -> Qty {
        self.history_qty + self.today_qty
    }

    pub fn is_empty(&self) -> bool {
        self.qty().is_zero()
    }

    /// What an order taking `takes` may still close: what it may take minus what open
    /// close orders on the same quantity reserve.
    pub fn closable(&self, takes: Takes) -> Qty {
        match takes {
            Takes::HistoryThenToday => self.qty() - self.reserved_close,
            Takes::HistoryOnly => self.history_qty - self.reserved_close,
            Takes::TodayOnly => self.today_qty - self.reserved_close_today,
        }
    }

    fn reservation_mut(&mut self, offset: Offset) -> &mut Qty {
        match offset {
            Offset::CloseToday => &mut self.reserved_close_today,
            Offset::Open | Offset::Close => &mut self.reserved_close,
        }
    }
}

/// One account's position in one contract.
#[derive(Clone, Debug)]
pub struct Position {
    pub account: AccountId,
    pub long: PositionSideState,
    pub short: PositionSideState,
    /// Realised by closing fills since the contract's last settlement (settle asset).
    pub realised_today: Amount,
    /// Fees paid on fills since the contract's last settlement.
    pub fees_today: Amount,
}

impl Position {
    pub fn side(&self, side: PositionSide) -> &PositionSideState {
        match side {
            PositionSide::Long => &self.long,
            PositionSide::Short => &self.short,
        }
    }

    fn side_mut(&mut self, side: PositionSide) -> &mut PositionSideState {
        match side {
            PositionSide::Long => &mut self.long,
            PositionSide::Short => &mut self.short,
        }
    }

    pub fn is_empty(&self) -> bool {
        self.long.is_empty() && self.short.is_empty()
    }

    /// Nothing open and nothing realised or paid today: nothing to show or keep.
    pub fn is_idle(&self) -> bool {
        self.is_empty() && self.realised_today.is_zero() && self.fees_today.is_zero()
    }
}

/// A lot-at-price of a position side, as reported (`Positions::entries`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PositionEntry {
    pub price: Price,
    pub qty: Qty,
}

/// Every position in one futures contract, and the acceptance order of its resting
/// orders (settlement and liquidation finish orders in the order they were accepted).
pub struct Positions {
    /// One per account that ever had an order on the contract; never removed (an empty
    /// position costs a few words and keeps indices stable).
    positions: Vec<Position>,
    by_account: AccountSlots,
    today_entries: Slab<TodayEntry>,
    /// The `seq` of the command that placed each resting order, by book slot.
    accepted_at: Vec<Seq>,
    /// Reused by `take_held_by_name`, so that a settlement allocates nothing once warm.
    by_name: Vec<usize>,
    /// The price positions are valued at between settlements: the last trade's, or the
    /// last settlement's when it came after the last trade (zero before either). Decides
    /// no event; the gateways' account view and the risk process read it.
    mark_price: Price,
    /// The long sides' total quantity, which equals the short sides' (every fill opens
    /// or closes as much on each).
    open_interest: Qty,
    /// The price of the last settlement (zero before the first).
    settlement_price: Price,
}

impl Default for Positions {
    fn default() -> Self {
        Positions {
            positions: Vec::new(),
            by_account: AccountSlots::default(),
            today_entries: Slab::with_capacity(0, VACANT_ENTRY),
            accepted_at: Vec::new(),
            by_name: Vec::new(),
            mark_price: Price::ZERO,
            open_interest: Qty::ZERO,
            settlement_price: Price::ZERO,
        }
    }
}

impl Positions {
    /// Every position (empty ones included), in the order accounts first traded.
    pub fn all(&self) -> &[Position] {
        &self.positions
    }

    pub fn position(&self, account: AccountId) -> Option<&Position> {
        self.by_account.get(account).map(|index| &self.positions[index as usize])
    }

    pub fn side(&self, account: AccountId, side: PositionSide) -> Option<&PositionSideState> {
        self.position(account).map(|position| position.side(side))
    }

    /// `account`'s position, created empty if it has none.
    fn position_mut(&mut self, account: AccountId) -> &mut Position {
        let index = index_of(&mut self.positions, &mut self.by_account, account);
        &mut self.positions[index]
    }

    /// Today's entries of a side, oldest first.
    pub fn today_entries<'a>(
        &'a self,
        side: &PositionSideState,
    ) -> impl Iterator<Item = PositionEntry> + 'a {
        let mut next = side.today_head;
        std::iter::from_fn(move || {
            if next == NIL {
                return None;
            }
            let entry = self.today_entries.get(next);
            next = entry.next;
            Some(PositionEntry { price: entry.price, qty: entry.qty })
        })
    }

    /// `sum(p_i * q_i)` over every entry of a side (price units x quantity units).
    pub fn basis(&self, side: &PositionSideState) -> i128 {
        let history = i128::from(side.history_price.0) * i128::from(side.history_qty.0);
        history
            + self
                .today_entries(side)
                .map(|entry| i128::from(entry.price.0) * i128::from(entry.qty.0))
                .sum::<i128>()
    }

    /// The price positions are valued at: the last trade's, or the last settlement's
    /// when it is more recent; `None` before either.
    pub fn mark_price(&self) -> Option<Price> {
        (self.mark_price.0 > 0).then_some(self.mark_price)
    }

    /// The price of the last settlement; `None` before the first.
    pub fn settlement_price(&self) -> Option<Price> {
        (self.settlement_price.0 > 0).then_some(self.settlement_price)
    }

    /// A settlement at `price`: the mark price and the settlement price.
    pub fn set_settlement_price(&mut self, price: Price) {
        self.settlement_price = price;
        self.mark_price = price;
    }

    /// The long sides' total quantity (equal to the short sides').
    pub fn open_interest(&self) -> Qty {
        self.open_interest
    }

    /// The index of `account`'s position, created empty if it has none: what the
    /// `_at` methods take, so that a fill looks the account up once.
    #[inline]
    pub fn index(&mut self, account: AccountId) -> usize {
        index_of(&mut self.positions, &mut self.by_account, account)
    }

    /// What a fill realised and paid for the position at `index` (today's totals).
    #[inline]
    pub fn record_fill_at(&mut self, index: usize, realised: Amount, fee: Amount) {
        let position = &mut self.positions[index];
        position.realised_today += realised;
        position.fees_today += fee;
    }

    /// A new trading day for the contract (its settlement): today's totals start again.
    pub fn start_day(&mut self) {
        for position in &mut self.positions {
            position.realised_today = Amount::ZERO;
            position.fees_today = Amount::ZERO;
        }
    }

    /// A trade or a settlement at `price` (the new mark price).
    pub fn set_mark_price(&mut self, price: Price) {
        self.mark_price = price;
    }

    // ----- orders -----

    /// Records the `seq` that placed the order now resting at `slot`.
    pub fn note_resting(&mut self, slot: u32, seq: Seq) {
        let index = slot as usize;
        if index >= self.accepted_at.len() {
            // Grows with the book's pool of slots, never per order once grown.
            self.accepted_at.resize((index + 1).next_power_of_two().max(64), Seq::ZERO);
        }
        self.accepted_at[index] = seq;
    }

    /// The `seq` that placed the order resting at `slot`.
    pub fn accepted_at(&self, slot: u32) -> Seq {
        self.accepted_at.get(slot as usize).copied().unwrap_or(Seq::ZERO)
    }

    /// Reserves `qty` of `account`'s `side` for a close order with `offset`.
    pub fn reserve(&mut self, account: AccountId, side: PositionSide, offset: Offset, qty: Qty) {
        let reservation = self.position_mut(account).side_mut(side).reservation_mut(offset);
        *reservation += qty;
    }

    /// Gives back what a close order with `offset` reserved of `qty`.
    pub fn unreserve(&mut self, account: AccountId, side: PositionSide, offset: Offset, qty: Qty) {
        let index = self.index(account);
        self.unreserve_at(index, side, offset, qty);
    }

    /// An amended close order's reservation: `old` given back and `new` reserved, with
    /// one lookup of the account.
    pub fn change_reservation(
        &mut self,
        account: AccountId,
        side: PositionSide,
        offset: Offset,
        (old, new): (Qty, Qty),
    ) {
        let reservation = self.position_mut(account).side_mut(side).reservation_mut(offset);
        debug_assert!(*reservation >= old, "unreserve more than reserved");
        *reservation = *reservation - old + new;
    }

    /// `unreserve` for the position at `index`.
    #[inline]
    pub fn unreserve_at(&mut self, index: usize, side: PositionSide, offset: Offset, qty: Qty) {
        let reservation = self.positions[index].side_mut(side).reservation_mut(offset);
        debug_assert!(*reservation >= qty, "unreserve more than reserved");
        *reservation -= qty;
    }

    // ----- fills -----

    /// An opening fill of `qty` at `price` for the position at `index`: the side gains
    /// `(price, qty)` today (added to the newest entry when it has that price).
    #[inline]
    pub fn open_at(&mut self, index: usize, side: PositionSide, price: Price, qty: Qty) {
        let Positions { positions, today_entries, open_interest, .. } = self;
        if side == PositionSide::Long {
            *open_interest += qty;
        }
        let state = positions[index].side_mut(side);
        state.today_qty += qty;
        state.open_cost += i128::from(price.0) * i128::from(qty.0);
        if state.today_tail != NIL {
            let newest = today_entries.get_mut(state.today_tail);
            if newest.price == price {
                newest.qty += qty;
                return;
            }
        }
        let slot = today_entries.insert(TodayEntry { price, qty, next: NIL });
        if state.today_tail == NIL {
            state.today_head = slot;
        } else {
            today_entries.get_mut(state.today_tail).next = slot;
        }
        state.today_tail = slot;
    }

    /// A closing fill of `qty` taking `takes` from the `side` of the position at
    /// `index`, oldest first; returns `sum(q_i * p_i)` of what it took. The quantity is
    /// there: a close order never takes more than it reserved, a liquidation more than
    /// the side holds.
    pub fn close_at(&mut self, index: usize, side: PositionSide, takes: Takes, qty: Qty) -> i128 {
        let Positions { positions, today_entries, open_interest, .. } = self;
        if side == PositionSide::Long {
            *open_interest -= qty;
        }
        let state = positions[index].side_mut(side);
        state.open_cost -= open_cost_share(state.open_cost, qty, state.qty());
        let mut left = qty;
        let mut basis = 0i128;
        if takes != Takes::TodayOnly {
            let taken = left.min(state.history_qty);
            basis += i128::from(taken.0) * i128::from(state.history_price.0);
            state.history_qty -= taken;
            left -= taken;
            if state.history_qty.is_zero() {
                state.history_price = Price::ZERO;
            }
        }
        if takes != Takes::HistoryOnly {
            while !left.is_zero() && state.today_head != NIL {
                let head = state.today_head;
                let entry = today_entries.get_mut(head);
                let taken = left.min(entry.qty);
                basis += i128::from(taken.0) * i128::from(entry.price.0);
                entry.qty -= taken;
                state.today_qty -= taken;
                left -= taken;
                if entry.qty.is_zero() {
                    state.today_head = entry.next;
                    if state.today_head == NIL {
                        state.today_tail = NIL;
                    }
                    today_entries.remove(head);
                }
            }
        }
        debug_assert!(left.is_zero(), "a close took more than the side holds");
        basis
    }

    /// Makes `account`'s `side` one history entry `(price, qty)` and returns the
    /// quantity and `sum(q_i * p_i)` it had (the settlement's mark), or `None` when the
    /// side is empty.
    pub fn mark(&mut self, index: usize, side: PositionSide, price: Price) -> Option<(Qty, i128)> {
        let state = *self.positions[index].side(side);
        if state.is_empty() {
            return None;
        }
        let basis = self.basis(&state);
        self.free_today(index, side);
        let state = self.positions[index].side_mut(side);
        let qty = state.history_qty + state.today_qty;
        state.history_price = price;
        state.history_qty = qty;
        state.today_qty = Qty::ZERO;
        Some((qty, basis))
    }

    /// Empties `positions[index]`'s `side` (an expiry's close at the settlement price,
    /// which realises nothing after the mark); returns the quantity it had.
    pub fn clear(&mut self, index: usize, side: PositionSide) -> Qty {
        let qty = self.positions[index].side(side).qty();
        if side == PositionSide::Long {
            self.open_interest -= qty;
        }
        self.free_today(index, side);
        let state = self.positions[index].side_mut(side);
        *state = PositionSideState::default();
        qty
    }

    fn free_today(&mut self, index: usize, side: PositionSide) {
        let state = self.positions[index].side_mut(side);
        let mut next = state.today_head;
        state.today_head = NIL;
        state.today_tail = NIL;
        while next != NIL {
            let entry = *self.today_entries.get(next);
            self.today_entries.remove(next);
            next = entry.next;
        }
    }

    /// Indices of the positions with a non-empty side, ordered by the account names
    /// `name_of` gives (as UTF-8 bytes): the settlement's order. The vector is lent:
    /// give it back with `return_held_by_name` (so that it is reused).
    pub fn take_held_by_name<'n>(&mut self, name_of: impl Fn(AccountId) -> &'n str) -> Vec<usize> {
        let mut held = std::mem::take(&mut self.by_name);
        held.clear();
        held.extend((0..self.positions.len()).filter(|&index| !self.positions[index].is_empty()));
        // Each account has one position: names are distinct, so unstable is exact.
        held.sort_unstable_by(|&a, &b| {
            name_of(self.positions[a].account)
                .as_bytes()
                .cmp(name_of(self.positions[b].account).as_bytes())
        });
        held
    }

    /// Gives back what `take_held_by_name` lent.
    pub fn return_held_by_name(&mut self, held: Vec<usize>) {
        self.by_name = held;
    }

    // ----- restoring from a snapshot -----

    /// Sets `account`'s `side` outright: a history entry (`qty` zero: none) and today's
    /// entries in order. Its reservations stay (they are rebuilt from the restored
    /// close orders).
    pub(crate) fn restore_side(
        &mut self,
        account: AccountId,
        side: PositionSide,
        history: PositionEntry,
        today: &[PositionEntry],
        open_cost: i128,
    ) {
        let index = index_of(&mut self.positions, &mut self.by_account, account);
        let reserved = *self.positions[index].side(side);
        self.clear(index, side);
        let state = self.positions[index].side_mut(side);
        state.reserved_close = reserved.reserved_close;
        state.reserved_close_today = reserved.reserved_close_today;
        state.history_price = if history.qty.is_zero() { Price::ZERO } else { history.price };
        state.history_qty = history.qty;
        state.open_cost = open_cost;
        for entry in today {
            let slot = self.today_entries.insert(TodayEntry {
                price: entry.price,
                qty: entry.qty,
                next: NIL,
            });
            let state = self.positions[index].side_mut(side);
            if state.today_tail == NIL {
                state.today_head = slot;
            } else {
                self.today_entries.get_mut(state.today_tail).next = slot;
            }
            state.today_tail = slot;
            state.today_qty += entry.qty;
        }
        if side == PositionSide::Long {
            self.open_interest += self.positions[index].long.qty();
        }
    }

    /// Sets `account`'s totals of today (a snapshot's).
    pub(crate) fn restore_day(&mut self, account: AccountId, realised: Amount, fees: Amount) {
        let position = self.position_mut(account);
        position.realised_today = realised;
        position.fees_today = fees;
    }

    /// Checks each side's sums and entries, the open interest and the open costs; the
    /// exchange checks reservations and money.
    pub fn check_consistency(&self) -> Result<(), String> {
        let long: i64 = self.positions.iter().map(|position| position.long.qty().0).sum();
        let short: i64 = self.positions.iter().map(|position| position.short.qty().0).sum();
        if long != self.open_interest.0 || short != self.open_interest.0 {
            return Err(format!(
                "open interest {} but long sides {long} and short sides {short}",
                self.open_interest.0
            ));
        }
        for position in &self.positions {
            for side in PositionSide::BOTH {
                let state = position.side(side);
                if state.open_cost < 0 || (state.is_empty() && state.open_cost != 0) {
                    return Err(format!(
                        "account {} {}: open cost {}",
                        position.account.0,
                        side.as_str(),
                        state.open_cost
                    ));
                }
            }
        }
        for position in &self.positions {
            for side in PositionSide::BOTH {
                let state = position.side(side);
                let entries: Vec<PositionEntry> = self.today_entries(state).collect();
                let sum: i64 = entries.iter().map(|entry| entry.qty.0).sum();
                if sum != state.today_qty.0 || entries.iter().any(|entry| entry.qty.0 <= 0) {
                    return Err(format!(
                        "account {} {}: today's entries",
                        position.account.0,
                        side.as_str()
                    ));
                }
                if state.history_qty.0 < 0
                    || (state.history_qty.0 > 0) != (state.history_price.0 > 0)
                {
                    return Err(format!(
                        "account {} {}: history entry",
                        position.account.0,
                        side.as_str()
                    ));
                }
            }
        }
        Ok(())
    }
}

/// The index of `account`'s position, created empty if it has none.
#[inline]
fn index_of(
    positions: &mut Vec<Position>,
    by_account: &mut AccountSlots,
    account: AccountId,
) -> usize {
    if let Some(index) = by_account.get(account) {
        return index as usize;
    }
    let index = positions.len() as u32;
    by_account.insert(account, index);
    positions.push(Position {
        account,
        long: PositionSideState::default(),
        short: PositionSideState::default(),
        realised_today: Amount::ZERO,
        fees_today: Amount::ZERO,
    });
    index as usize
}

/// Which position each account has in a contract: account ids are dense (`0..n`), so
/// a table indexed by the id, in pages of `PAGE` accounts made on first use, finds one
/// with two loads where a hash map hashed and probed on every fill, amend and close. A
/// page costs 4 KiB, made only for the ranges of accounts that trade the contract.
#[derive(Default)]
struct AccountSlots {
    pages: Vec<Option<Box<[u32; AccountSlots::PAGE]>>>,
}

impl AccountSlots {
    const PAGE: usize = 1024;
    const NONE: u32 = u32::MAX;

    #[inline]
    fn get(&self, account: AccountId) -> Option<u32> {
        let index = account.0 as usize;
        let page = self.pages.get(index / Self::PAGE)?.as_deref()?;
        let slot = page[index % Self::PAGE];
        (slot != Self::NONE).then_some(slot)
    }

    fn insert(&mut self, account: AccountId, slot: u32) {
        debug_assert!(slot != Self::NONE);
        let index = account.0 as usize;
        let page_index = index / Self::PAGE;
        if page_index >= self.pages.len() {
            self.pages.resize_with(page_index + 1, || None);
        }
        let page = self.pages[page_index].get_or_insert_with(|| Box::new([Self::NONE; Self::PAGE]));
        page[index % Self::PAGE] = slot;
    }
}

const _: () = assert!(AccountSlots::PAGE.is_power_of_two());

/// The share of `open_cost` that closing `qty` of `held` takes: `open_cost * qty / held`
/// rounded down (all of it when the side closes), in 64 bits when it fits.
#[inline]
fn open_cost_share(open_cost: i128, qty: Qty, held: Qty) -> i128 {
    debug_assert!(qty <= held && held.0 > 0);
    if qty >= held {
        return open_cost;
    }
    match i64::try_from(open_cost).ok().and_then(|cost| cost.checked_mul(qty.0)) {
        Some(scaled) => i128::from(scaled / held.0),
        None => open_cost * i128::from(qty.0) / i128::from(held.0),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn account_slots_find_what_was_put_on_any_page_and_nothing_else() {
        let mut slots = AccountSlots::default();
        assert_eq!(slots.get(AccountId(0)), None);
        let accounts = [0, 1, 1023, 1024, 5_000, 70_000];
        for (slot, account) in accounts.iter().enumerate() {
            slots.insert(AccountId(*account), slot as u32);
        }
        for (slot, account) in accounts.iter().enumerate() {
            assert_eq!(slots.get(AccountId(*account)), Some(slot as u32));
        }
        for absent in [2, 1025, 4_999, 69_999, 70_001, 1_000_000] {
            assert_eq!(slots.get(AccountId(absent)), None, "{absent}");
        }
        // Pages only where accounts are: 0, 1, 4 and 68 of 69.
        assert_eq!(slots.pages.iter().filter(|page| page.is_some()).count(), 4);
    }

    #[test]
    fn an_open_hold_is_the_same_in_64_and_128_bits() {
        let rules = FutureRules {
            settle: AssetId(0),
            lot: Qty(10),
            multiplier: 1,
            multiplier_decimals: 0,
            value_scale: 1,
            margin: Amount(2_500),
            maker_fee: Amount(1),
            taker_fee: Amount(3),
            close_today: false,
        };
        assert_eq!(rules.open_hold(30), Some(Amount(3 * 2_503)));
        assert_eq!(rules.open_hold(0), Some(Amount(0)));
        // Beyond i64 in the product, and in the quantity: refused both ways.
        assert_eq!(rules.open_hold(i128::from(i64::MAX / 100)), None);
        assert_eq!(rules.open_hold(i128::from(i64::MAX) + 10), None);
        // A quantity beyond i64 whose hold still fits (a huge lot) takes the 128-bit path.
        let huge_lot = FutureRules {
            lot: Qty(i64::MAX / 4),
            margin: Amount(1),
            taker_fee: Amount(0),
            ..rules.clone()
        };
        let qty = i128::from(i64::MAX / 4) * 8;
        assert_eq!(huge_lot.open_hold(qty), Some(Amount(8)));
        // A per-lot hold beyond i64 takes it too, and is refused there.
        let dear = FutureRules { margin: Amount(i64::MAX), taker_fee: Amount(1), ..rules };
        assert_eq!(dear.open_hold(10), None);
    }
}
