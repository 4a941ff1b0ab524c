//! The exchange state machine: assets, instruments with their books, accounts, and the
//! index of open orders. `Exchange::apply` takes one command, appends its events and
//! returns what its handler knew beyond them (`Applied`: where a new order rests); it
//! is the only way the state changes.
//!
//! Every handler first validates (returning the first rejection reason, in the order
//! the replay format specifies, with nothing changed) and only then emits `accepted`
//! and acts; acting cannot fail. No I/O, clock or randomness: the same commands give
//! the same events and state everywhere.

use compact_str::CompactString;
use rustc_hash::FxHashMap;

use crate::book::{
    BookCapacity, MatchEnd, MatchHandler, NewRestingOrder, OrderBook, RestingOrder, SpendingBuyer,
    Taker,
};
use crate::command::{
    AccountRef, AmendCommand, AmendQtyKind, Command, FutureCommand, InstrumentCommand, Offset,
    OrderCommand, OrderType, PositionSide, Side, SizeNamed, StpMode, TimeInForce, TransferCommand,
};
use crate::event::{DoneReason, Event, RejectReason, SettledEvent, TradeEvent};
use crate::futures::{FutureRules, Positions, Takes};
use crate::ids::{
    AccountId, AssetId, ClientOrderId, InstrumentId, NameTable, OrderHandle, OrderId, Seq,
    TimestampNs,
};
use crate::ledger::{BalanceMove, Ledger};
use crate::num::{pow10_saturating, Amount, Decimal, Price, Qty};
use crate::order_index::OrderIndex;
use crate::spot::{FillParty, SpotRules};

/// Largest number of decimals an asset may have.
pub const ASSET_DECIMALS_MAX: i64 = 18;
/// Largest maker or taker fee rate, in basis points.
pub const FEE_BPS_MAX: i64 = 1_000;
/// Largest market protection band, in basis points.
pub const MARKET_BAND_BPS_MAX: i64 = 10_000;
const BPS_PER_UNIT: i128 = 10_000;
/// Orders `check_invariants` reads ahead of the one it checks (see there).
const CHECK_LAG: usize = 16;

#[derive(Clone, Copy, Debug)]
pub struct ExchangeConfig {
    /// Initial pool sizes of every new book.
    pub book_capacity: BookCapacity,
    /// Open orders (all books) the order index holds before it must grow. Growing
    /// doubles the table and rehashes it inside one command, so a venue sizes this to
    /// its expected peak; oversizing it costs cache misses (the live entries spread over
    /// a larger table), so the default is small.
    pub open_orders_capacity: usize,
}

impl Default for ExchangeConfig {
    fn default() -> Self {
        ExchangeConfig { book_capacity: BookCapacity::default(), open_orders_capacity: 4096 }
    }
}

#[derive(Clone, Debug)]
pub struct AssetSpec {
    pub name: CompactString,
    pub decimals: u32,
}

/// What kind of market an instrument is, with its money rules: the seam between the
/// money-blind matcher and the account kinds (`spot`, `futures`).
#[derive(Clone, Debug)]
pub enum InstrumentKind {
    Spot(SpotRules),
    Future(FutureRules),
}

/// An instrument's definition (spot or futures), in engine units.
#[derive(Clone, Debug)]
pub struct Instrument {
    pub symbol: CompactString,
    /// Decimal places of prices (those of the tick).
    pub price_decimals: u32,
    /// Decimal places of quantities (those of the lot).
    pub qty_decimals: u32,
    pub tick: Price,
    pub lot: Qty,
    /// In quantity units; may exceed `i64` (then funds are the binding limit).
    pub min_qty: i128,
    pub max_qty: i128,
    pub market_band_bps: i64,
    pub kind: InstrumentKind,
    /// A futures contract after its final settlement: unknown to every command, its
    /// symbol still taken.
    pub expired: bool,
}

impl Instrument {
    pub fn spot(&self) -> Option<&SpotRules> {
        match &self.kind {
            InstrumentKind::Spot(rules) => Some(rules),
            InstrumentKind::Future(_) => None,
        }
    }

    pub fn future(&self) -> Option<&FutureRules> {
        match &self.kind {
            InstrumentKind::Future(rules) => Some(rules),
            InstrumentKind::Spot(_) => None,
        }
    }

    pub fn is_future(&self) -> bool {
        matches!(self.kind, InstrumentKind::Future(_))
    }

    /// The asset an order on `side` holds (a futures order: the settle asset).
    #[inline]
    pub fn hold_asset(&self, side: Side) -> AssetId {
        match &self.kind {
            InstrumentKind::Spot(rules) => rules.hold_asset(side),
            InstrumentKind::Future(rules) => rules.settle,
        }
    }

    /// The asset an order on `side` receives in a fill, in which its fee is paid (a
    /// futures order: the settle asset).
    #[inline]
    pub fn fee_asset(&self, side: Side) -> AssetId {
        match &self.kind {
            InstrumentKind::Spot(rules) => match side {
                Side::Buy => rules.base,
                Side::Sell => rules.quote,
            },
            InstrumentKind::Future(rules) => rules.settle,
        }
    }

    /// The assets a fill on this instrument moves: spot's base and quote, a futures
    /// contract's settle asset (twice).
    #[inline]
    pub fn fill_assets(&self) -> [AssetId; 2] {
        match &self.kind {
            InstrumentKind::Spot(rules) => [rules.base, rules.quote],
            InstrumentKind::Future(rules) => [rules.settle, rules.settle],
        }
    }

    /// The asset an order on `side` with `offset` holds and what it holds with
    /// `remaining` left (a futures close order holds nothing: it reserves position).
    #[inline]
    pub fn resting_hold(
        &self,
        side: Side,
        price: Price,
        offset: Offset,
        remaining: Qty,
    ) -> (AssetId, Amount) {
        match &self.kind {
            InstrumentKind::Spot(rules) => {
                (rules.hold_asset(side), rules.resting_hold(side, price, remaining))
            }
            InstrumentKind::Future(rules) => (rules.settle, rules.resting_hold(offset, remaining)),
        }
    }

    /// A limit price in price units: positive, a multiple of the tick, within `i64`.
    pub(crate) fn validate_price(&self, price: Decimal) -> Result<Price, RejectReason> {
        let units = price.to_units(self.price_decimals).ok_or(RejectReason::InvalidPrice)?;
        // Within i64 the tick check is a 64-bit division, much cheaper than a 128-bit one.
        let units = i64::try_from(units).map_err(|_| RejectReason::InvalidPrice)?;
        if units <= 0 || (self.tick.0 != 1 && units % self.tick.0 != 0) {
            return Err(RejectReason::InvalidPrice);
        }
        Ok(Price(units))
    }

    /// A quantity in quantity units: a multiple of the lot within `min_qty..=max_qty`.
    /// What an amend to the new whole quantity `total` leaves open of an order that has
    /// filled `filled`: `total` validated as any quantity, less `filled`; `invalid_qty`
    /// when that leaves nothing.
    #[cold]
    fn left_of_total(&self, total: Decimal, filled: Qty) -> Result<i128, RejectReason> {
        let left = self.validate_qty(total)? - i128::from(filled.0);
        if left <= 0 {
            return Err(RejectReason::InvalidQty);
        }
        Ok(left)
    }

    fn validate_qty(&self, qty: Decimal) -> Result<i128, RejectReason> {
        let units = qty.to_units(self.qty_decimals).ok_or(RejectReason::InvalidQty)?;
        let lot_multiple = match i64::try_from(units) {
            Ok(small) => self.lot.0 == 1 || small % self.lot.0 == 0,
            Err(_) => units % i128::from(self.lot.0) == 0,
        };
        if !lot_multiple || units < self.min_qty || units > self.max_qty {
            return Err(RejectReason::InvalidQty);
        }
        Ok(units)
    }

    /// `price` as a `Price`; beyond `i64` (a market buy's protection price far up), the
    /// highest tick multiple that fits, which still crosses every resting order.
    fn price_within_range(&self, price: i128) -> Price {
        Price(i64::try_from(price).unwrap_or(i64::MAX / self.tick.0 * self.tick.0))
    }

    /// A market order's protection price from the best opposite price: buy
    /// `best * (1 + band)` rounded up to the tick; sell `best * (1 - band)` rounded down,
    /// at least one tick.
    fn protection_price(&self, side: Side, best_opposite: Price) -> i128 {
        let tick = i128::from(self.tick.0);
        let band = i128::from(self.market_band_bps);
        let best = i128::from(best_opposite.0);
        let ticks_denominator = BPS_PER_UNIT * tick;
        match side {
            Side::Buy => {
                let numerator = best * (BPS_PER_UNIT + band);
                (numerator + ticks_denominator - 1) / ticks_denominator * tick
            }
            Side::Sell => {
                let ticks = best * (BPS_PER_UNIT - band) / ticks_denominator;
                ticks.max(1) * tick
            }
        }
    }
}

/// Where an order being executed comes from, which decides how it rests or leaves.
#[derive(Clone, Copy)]
enum Placement {
    /// A new order: not on the book, not indexed.
    New,
    /// An amended order taken off its level: it keeps its slot and its index entry.
    Detached { slot: u32 },
}

/// An order about to match, with what `execute` needs to finish or rest it.
struct Execution {
    instrument: InstrumentId,
    taker: Taker,
    id: ClientOrderId,
    time_in_force: TimeInForce,
    post_only: bool,
    /// Filled before this execution (an amended order's earlier fills).
    filled_before: Qty,
    placement: Placement,
    /// Futures: what its fills do to the position (`Open` on spot).
    offset: Offset,
    /// Futures: a `gfd` order, which rests until the next settlement.
    good_for_day: bool,
    /// Futures: a liquidation's market order, which closes history then today and
    /// reserves nothing.
    liquidation: bool,
}

/// A new order that has passed its own checks (`Exchange::check_new_order`), as it
/// will trade: the time in force applied, a day order's mark split out, post-only kept
/// only on a limit order. Funds and positions are not yet checked.
#[derive(Clone, Copy, Debug)]
struct CheckedOrder {
    instrument: InstrumentId,
    /// `None`: the account does not exist yet (it has no funds and no positions).
    account: Option<AccountId>,
    side: Side,
    /// `None`: a market order.
    limit: Option<Price>,
    /// Validated against the instrument's lot and bounds.
    qty: i128,
    /// `Open` on spot, whatever the command said.
    offset: Offset,
    /// A futures close order: which of the position it takes.
    takes: Option<Takes>,
    /// Never `GoodForDay` (that is `good_for_day`).
    time_in_force: TimeInForce,
    good_for_day: bool,
    post_only: bool,
    stp: StpMode,
}

/// What backs an order while it is open.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Backing {
    /// Funds held from the account's available balance of the asset.
    Hold(AssetId, Amount),
    /// A futures close order: the part of the position it closes, reserved.
    Reservation,
}

/// A new order past every check, with what backs it: acting on it cannot fail.
struct AcceptedOrder {
    account: AccountId,
    id: ClientOrderId,
    /// Its limit, or a market order's protection price, within the price range.
    price: Price,
    qty: Qty,
    backing: Backing,
    checked: CheckedOrder,
}

/// What an accepted amend changes (`Exchange::check_amend`), with what acting on it
/// needs of the order as it was (so that nothing reads it from its book again).
#[derive(Clone, Debug)]
struct AmendChange {
    id: ClientOrderId,
    side: Side,
    offset: Offset,
    old_remaining: Qty,
    new_price: Price,
    new_qty: Qty,
    /// Same price and no more quantity: reduced in place, its place in the queue kept.
    keeps_priority: bool,
    /// It moves onto the other side: it is matched at its new price.
    matches: bool,
    hold: HoldChange,
}

/// An order's hold before and after a change (both zero for a futures close order,
/// which reserves its position instead).
#[derive(Clone, Copy, Debug)]
struct HoldChange {
    asset: AssetId,
    old: Amount,
    new: Amount,
}

pub struct Exchange {
    config: ExchangeConfig,
    assets: Vec<AssetSpec>,
    asset_by_name: NameTable<AssetId>,
    instruments: Vec<Instrument>,
    instrument_by_symbol: NameTable<InstrumentId>,
    books: Vec<OrderBook>,
    /// Per instrument: a futures contract's positions, `None` for spot.
    positions: Vec<Option<Box<Positions>>>,
    ledger: Ledger,
    open_orders: OrderIndex,
    time_ns: TimestampNs,
    /// Reused by settlement and liquidation to order orders by acceptance, so that
    /// neither allocates once warm.
    by_acceptance: Vec<(Seq, u32)>,
    /// Deposits and withdrawals of futures settle assets since the asset's last
    /// settlement, for the account view (`DayFlows`). Decides no event.
    day_flows: FxHashMap<(AccountId, AssetId), DayFlows>,
}

/// An account's deposits and withdrawals of a settle asset since the last settlement
/// of a contract settled in it: the QIFI view's `deposit` and `withdraw`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DayFlows {
    pub deposited: Amount,
    pub withdrawn: Amount,
}

impl Default for Exchange {
    fn default() -> Self {
        Exchange::new(ExchangeConfig::default())
    }
}

impl Exchange {
    pub fn new(config: ExchangeConfig) -> Exchange {
        Exchange {
            config,
            assets: Vec::new(),
            asset_by_name: NameTable::default(),
            instruments: Vec::new(),
            instrument_by_symbol: NameTable::default(),
            books: Vec::new(),
            positions: Vec::new(),
            ledger: Ledger::default(),
            open_orders: OrderIndex::with_capacity(config.open_orders_capacity),
            time_ns: TimestampNs::ZERO,
            by_acceptance: Vec::new(),
            day_flows: FxHashMap::default(),
        }
    }

    // ----- queries -----

    pub fn assets(&self) -> &[AssetSpec] {
        &self.assets
    }

    pub fn asset(&self, asset: AssetId) -> &AssetSpec {
        &self.assets[asset.index()]
    }

    pub fn find_asset(&self, name: &str) -> Option<AssetId> {
        self.asset_by_name.get(name)
    }

    pub fn instruments(&self) -> &[Instrument] {
        &self.instruments
    }

    pub fn instrument(&self, instrument: InstrumentId) -> &Instrument {
        &self.instruments[instrument.index()]
    }

    /// The instrument named `symbol`; an expired futures contract is not found.
    pub fn find_instrument(&self, symbol: &str) -> Option<InstrumentId> {
        let instrument = self.instrument_by_symbol.get(symbol)?;
        (!self.instruments[instrument.index()].expired).then_some(instrument)
    }

    /// A futures contract's positions (`None` for a spot instrument).
    pub fn positions(&self, instrument: InstrumentId) -> Option<&Positions> {
        self.positions[instrument.index()].as_deref()
    }

    pub fn book(&self, instrument: InstrumentId) -> &OrderBook {
        &self.books[instrument.index()]
    }

    pub(crate) fn books(&self) -> &[OrderBook] {
        &self.books
    }

    pub(crate) fn open_orders(&self) -> &OrderIndex {
        &self.open_orders
    }

    pub fn ledger(&self) -> &Ledger {
        &self.ledger
    }

    pub fn account_name(&self, account: AccountId) -> &str {
        &self.ledger.account(account).name
    }

    pub fn open_order_count(&self) -> usize {
        self.open_orders.len()
    }

    /// The open order `id` of `account`, if any.
    pub fn open_order(
        &self,
        account: AccountId,
        id: &str,
    ) -> Option<(InstrumentId, &RestingOrder)> {
        let handle = self.open_orders.find(&self.books, account, id)?;
        Some((handle.instrument, self.books[handle.instrument.index()].order(handle.slot)))
    }

    /// Whether a futures contract (live or expired) settles in `asset`.
    pub fn is_settle_asset(&self, asset: AssetId) -> bool {
        self.instruments
            .iter()
            .any(|instrument| instrument.future().is_some_and(|rules| rules.settle == asset))
    }

    /// `account`'s deposits and withdrawals of the settle asset `asset` since its last
    /// settlement.
    pub fn day_flows(&self, account: AccountId, asset: AssetId) -> DayFlows {
        self.day_flows.get(&(account, asset)).copied().unwrap_or_default()
    }

    /// Every account's day flows, for snapshots and the digest.
    pub fn all_day_flows(&self) -> impl Iterator<Item = ((AccountId, AssetId), DayFlows)> + '_ {
        self.day_flows.iter().map(|(key, flows)| (*key, *flows))
    }

    pub(crate) fn restore_day_flows(
        &mut self,
        account: AccountId,
        asset: AssetId,
        flows: DayFlows,
    ) {
        self.day_flows.insert((account, asset), flows);
    }

    /// The `seq` of the command that placed `account`'s open futures order `id`, which
    /// orders settlement's and liquidation's `done`s (`None` for a spot order or none).
    pub fn accepted_at(&self, account: AccountId, id: &str) -> Option<Seq> {
        let handle = self.open_orders.find(&self.books, account, id)?;
        let positions = self.positions[handle.instrument.index()].as_deref()?;
        Some(positions.accepted_at(handle.slot))
    }

    /// The time of the latest command, in nanoseconds since the Unix epoch.
    pub fn time_ns(&self) -> TimestampNs {
        self.time_ns
    }

    // ----- rebuilding from a snapshot (`snapshot`) -----
    // The decoder validates what it passes in; these only refuse what would corrupt
    // the name tables or the index (a name or order key taken twice).

    /// Declares a restored asset; `false` (nothing changed) if its name is taken.
    pub(crate) fn restore_asset(&mut self, spec: AssetSpec) -> bool {
        if self.asset_by_name.contains(&spec.name) {
            return false;
        }
        let asset = AssetId(self.assets.len() as u32);
        self.asset_by_name.insert(&spec.name, asset);
        self.assets.push(spec);
        self.ledger.add_asset();
        true
    }

    /// Declares a restored instrument with an empty book; `false` (nothing changed) if
    /// its symbol is taken.
    pub(crate) fn restore_instrument(&mut self, instrument: Instrument) -> bool {
        if self.instrument_by_symbol.contains(&instrument.symbol) {
            return false;
        }
        self.add_instrument(instrument);
        true
    }

    /// A restored futures contract's positions, to set.
    pub(crate) fn positions_mut(&mut self, instrument: InstrumentId) -> Option<&mut Positions> {
        self.positions[instrument.index()].as_deref_mut()
    }

    pub(crate) fn ledger_mut(&mut self) -> &mut Ledger {
        &mut self.ledger
    }

    pub(crate) fn restore_time(&mut self, time_ns: TimestampNs) {
        self.time_ns = time_ns;
    }

    /// Sizes the open-order index for `orders` orders, so restoring them rehashes
    /// nothing.
    pub(crate) fn reserve_open_orders(&mut self, orders: usize) {
        self.open_orders.reserve(orders);
    }

    /// Rests a restored order at the back of its level on `instrument`'s book, not yet
    /// indexed (`index_restored_order` does that), and starts loading the index entry
    /// its key will probe: indexing a few orders later then finds it in the cache,
    /// which matters when a million orders are restored. The order must not cross.
    pub(crate) fn rest_restored_order(
        &mut self,
        instrument: InstrumentId,
        order: NewRestingOrder,
    ) -> OrderHandle {
        self.open_orders.prefetch_home(order.account, &order.id);
        let slot = self.books[instrument.index()].insert(order);
        OrderHandle { instrument, slot }
    }

    /// Indexes an order rested by `rest_restored_order`; `false` if its account already
    /// has an indexed open order with its id (the state is then invalid, and the caller
    /// discards it).
    pub(crate) fn index_restored_order(&mut self, handle: OrderHandle) -> bool {
        self.open_orders.insert_if_absent(&self.books, handle)
    }

    // ----- the state machine -----

    /// Applies one command stamped `seq` (and `ts`, when it carries one) and appends
    /// its events: first `accepted` or `rejected`, then any others. Returns what the
    /// handlers know beyond the events (`Applied`: where a new order rests), so that
    /// nobody has to look it up again.
    ///
    /// Venue commands (`Halt`, `Resume`, `CancelAll`, `SetLimits`:
    /// `Command::is_venue_command`) are rejected `malformed` and change nothing, not
    /// even the time: only a `Venue` applies them, and the exchange alone is the replay
    /// format's reference (`bourse replay`), which has no halts, no cancel-all and no
    /// limits.
    #[inline]
    pub fn apply(
        &mut self,
        seq: Seq,
        ts: Option<TimestampNs>,
        command: &Command<'_>,
        events: &mut Vec<Event>,
    ) -> Applied {
        // A thin wrapper, inlined: where the command's new order rests is written by
        // `place_order` alone, so every other command pays nothing for it.
        let mut applied = Applied::default();
        let instruments_before = self.instruments.len();
        self.apply_command(seq, ts, command, events, &mut applied.rested);
        if self.instruments.len() > instruments_before {
            debug_assert!(matches!(command, Command::Instrument(_) | Command::Future(_)));
            applied.declared = Some(InstrumentId(instruments_before as u32));
        }
        applied
    }

    /// `apply`; `rested` is set where the command's new order rests (if it does).
    fn apply_command(
        &mut self,
        seq: Seq,
        ts: Option<TimestampNs>,
        command: &Command<'_>,
        events: &mut Vec<Event>,
        rested: &mut Option<OrderHandle>,
    ) {
        if command.is_venue_command() {
            events.push(Event::Rejected { seq, reason: RejectReason::Malformed });
            return;
        }
        let events_before = events.len();
        self.advance_time(ts);
        let result = match command {
            Command::Asset { asset, decimals } => self.declare_asset(asset, *decimals),
            Command::Instrument(instrument) => self.declare_instrument(instrument),
            Command::Deposit(transfer) => self.deposit(transfer),
            Command::Withdraw(transfer) => self.withdraw(transfer),
            Command::Order(order) => self.place_order(seq, order, events, rested),
            Command::Cancel { account, id } => self.cancel(seq, account, id, events),
            Command::Amend(amend) => self.amend(seq, amend, events),
            Command::Future(future) => self.declare_future(future),
            Command::Margin { symbol, margin } => self.set_margin(symbol, *margin),
            Command::Settle { symbol, price, is_final } => {
                self.settle(seq, symbol, *price, *is_final, events)
            }
            Command::Liquidate { account, symbol } => self.liquidate(seq, account, symbol, events),
            Command::Halt { .. }
            | Command::Resume { .. }
            | Command::CancelAll { .. }
            | Command::SetLimits { .. } => Err(RejectReason::Malformed),
        };
        match result {
            Ok(Accepted::Emitted) => {}
            Ok(Accepted::Silently) => events.push(Event::Accepted { seq, account: None }),
            Err(reason) => events.push(Event::Rejected { seq, reason }),
        }
        // Every command's events open with its one `accepted` or `rejected`.
        debug_assert!(
            matches!(
                events.get(events_before),
                Some(Event::Accepted { seq: first, .. } | Event::Rejected { seq: first, .. })
                    if *first == seq
            ),
            "command {seq} did not open its events with accepted or rejected"
        );
    }

    /// The account a command names, if it exists.
    #[inline]
    pub fn resolve(&self, account: &AccountRef<'_>) -> Option<AccountId> {
        match account {
            AccountRef::Name(name) => self.ledger.find_account(name),
            AccountRef::Id(account) => {
                (account.index() < self.ledger.accounts().len()).then_some(*account)
            }
        }
    }

    /// Moves the time to `ts` when it is later (a command's time never goes back).
    #[inline]
    pub(crate) fn advance_time(&mut self, ts: Option<TimestampNs>) {
        if let Some(ts) = ts {
            self.time_ns = self.time_ns.max(ts);
        }
    }

    /// The account name as a command gave it, to echo (the replay format's `accepted`
    /// and `rejected`): a name as it is, an id as its account's name (`#` and the
    /// number when no account has it).
    pub fn echoed_name(&self, account: &AccountRef<'_>) -> CompactString {
        match (account, self.resolve(account)) {
            (AccountRef::Name(name), _) => CompactString::new(name),
            (AccountRef::Id(_), Some(account)) => self.ledger.account(account).name.clone(),
            (AccountRef::Id(_), None) => CompactString::new(account.to_string()),
        }
    }

    fn declare_asset(&mut self, name: &str, decimals: i64) -> Result<Accepted, RejectReason> {
        if self.asset_by_name.contains(name) {
            return Err(RejectReason::DuplicateAsset);
        }
        if !(0..=ASSET_DECIMALS_MAX).contains(&decimals) {
            return Err(RejectReason::InvalidDecimals);
        }
        let asset = AssetId(self.assets.len() as u32);
        self.assets.push(AssetSpec { name: CompactString::new(name), decimals: decimals as u32 });
        self.asset_by_name.insert(name, asset);
        self.ledger.add_asset();
        Ok(Accepted::Silently)
    }

    fn declare_instrument(
        &mut self,
        definition: &InstrumentCommand<'_>,
    ) -> Result<Accepted, RejectReason> {
        if self.instrument_by_symbol.contains(&definition.symbol) {
            return Err(RejectReason::DuplicateSymbol);
        }
        let base = self.find_asset(&definition.base).ok_or(RejectReason::UnknownAsset)?;
        let quote = self.find_asset(&definition.quote).ok_or(RejectReason::UnknownAsset)?;
        let instrument = self
            .build_instrument(definition, base, quote)
            .ok_or(RejectReason::InvalidInstrument)?;
        self.add_instrument(instrument);
        Ok(Accepted::Silently)
    }

    /// Adds an instrument (its symbol free) with an empty book and, for a futures
    /// contract, no positions.
    fn add_instrument(&mut self, instrument: Instrument) -> InstrumentId {
        let id = InstrumentId(self.instruments.len() as u32);
        self.instrument_by_symbol.insert(&instrument.symbol, id);
        self.positions.push(instrument.is_future().then(Box::default));
        self.instruments.push(instrument);
        self.books.push(OrderBook::new(self.config.book_capacity));
        id
    }

    fn declare_future(&mut self, definition: &FutureCommand<'_>) -> Result<Accepted, RejectReason> {
        if self.instrument_by_symbol.contains(&definition.symbol) {
            return Err(RejectReason::DuplicateSymbol);
        }
        let settle = self.find_asset(&definition.settle).ok_or(RejectReason::UnknownAsset)?;
        let instrument =
            self.build_future(definition, settle).ok_or(RejectReason::InvalidInstrument)?;
        self.add_instrument(instrument);
        Ok(Accepted::Silently)
    }

    /// The futures contract in engine units, or `None` when the definition is invalid.
    fn build_future(&self, definition: &FutureCommand<'_>, settle: AssetId) -> Option<Instrument> {
        let terms = ContractTerms::build(
            [definition.tick, definition.lot, definition.min_qty, definition.max_qty],
            definition.market_band_bps,
        )?;
        let settle_decimals = self.asset(settle).decimals;
        let multiplier_decimals = definition.multiplier.scale();
        if !definition.multiplier.is_positive()
            || terms.price_decimals + terms.qty_decimals + multiplier_decimals > settle_decimals
        {
            return None;
        }
        let multiplier =
            i64::try_from(definition.multiplier.to_units(multiplier_decimals)?).ok()?;
        let per_lot = |amount: Decimal| -> Option<Amount> {
            i64::try_from(amount.to_units(settle_decimals)?).ok().map(Amount)
        };
        let margin = per_lot(definition.margin)?;
        let maker_fee = per_lot(definition.maker_fee)?;
        let taker_fee = per_lot(definition.taker_fee)?;
        if margin.0 <= 0 || maker_fee.0 < 0 || maker_fee > taker_fee {
            return None;
        }
        // An open order's hold per lot must fit, so that every hold is a product of two
        // factors that fit.
        margin.checked_add(taker_fee)?;
        let value_scale = pow10_saturating(
            settle_decimals - terms.price_decimals - terms.qty_decimals - multiplier_decimals,
        ) as i64;
        Some(Instrument {
            symbol: CompactString::new(&*definition.symbol),
            price_decimals: terms.price_decimals,
            qty_decimals: terms.qty_decimals,
            tick: terms.tick,
            lot: terms.lot,
            min_qty: terms.min_qty,
            max_qty: terms.max_qty,
            market_band_bps: definition.market_band_bps,
            kind: InstrumentKind::Future(FutureRules {
                settle,
                lot: terms.lot,
                multiplier,
                multiplier_decimals,
                value_scale,
                margin,
                maker_fee,
                taker_fee,
                close_today: definition.close_today,
            }),
            expired: false,
        })
    }

    /// The instrument in engine units, or `None` when the definition is invalid.
    fn build_instrument(
        &self,
        definition: &InstrumentCommand<'_>,
        base: AssetId,
        quote: AssetId,
    ) -> Option<Instrument> {
        if base == quote
            || !(0..=FEE_BPS_MAX).contains(&definition.maker_fee_bps)
            || !(0..=FEE_BPS_MAX).contains(&definition.taker_fee_bps)
        {
            return None;
        }
        let terms = ContractTerms::build(
            [definition.tick, definition.lot, definition.min_qty, definition.max_qty],
            definition.market_band_bps,
        )?;
        let ContractTerms { price_decimals, qty_decimals, tick, lot, min_qty, max_qty } = terms;
        let base_decimals = self.asset(base).decimals;
        let quote_decimals = self.asset(quote).decimals;
        if qty_decimals > base_decimals || price_decimals + qty_decimals > quote_decimals {
            return None;
        }
        Some(Instrument {
            symbol: CompactString::new(&*definition.symbol),
            price_decimals,
            qty_decimals,
            tick,
            lot,
            min_qty,
            max_qty,
            market_band_bps: definition.market_band_bps,
            kind: InstrumentKind::Spot(SpotRules {
                base,
                quote,
                // Decimals are at most 18, so these powers fit in i64.
                quote_units_per_notional_unit: pow10_saturating(
                    quote_decimals - price_decimals - qty_decimals,
                ) as i64,
                base_units_per_qty_unit: pow10_saturating(base_decimals - qty_decimals) as i64,
                maker_fee_bps: definition.maker_fee_bps,
                taker_fee_bps: definition.taker_fee_bps,
            }),
            expired: false,
        })
    }

    /// The asset and amount of a deposit or withdrawal, checked as both require.
    fn transfer_amount(
        &self,
        transfer: &TransferCommand<'_>,
    ) -> Result<(AssetId, i128), RejectReason> {
        let asset = self.find_asset(&transfer.asset).ok_or(RejectReason::UnknownAsset)?;
        let units = transfer
            .amount
            .to_units(self.asset(asset).decimals)
            .ok_or(RejectReason::InvalidAmount)?;
        if units <= 0 {
            return Err(RejectReason::InvalidAmount);
        }
        Ok((asset, units))
    }

    fn deposit(&mut self, transfer: &TransferCommand<'_>) -> Result<Accepted, RejectReason> {
        let (asset, units) = self.transfer_amount(transfer)?;
        let amount = i64::try_from(units)
            .map(Amount)
            .ok()
            .filter(|&amount| self.ledger.deposit_fits(asset, amount))
            .ok_or(RejectReason::InvalidAmount)?;
        self.ledger.deposit(&transfer.account, asset, amount);
        if self.is_settle_asset(asset) {
            if let Some(account) = self.ledger.find_account(&transfer.account) {
                self.day_flows.entry((account, asset)).or_default().deposited += amount;
            }
        }
        Ok(Accepted::Silently)
    }

    fn withdraw(&mut self, transfer: &TransferCommand<'_>) -> Result<Accepted, RejectReason> {
        let (asset, units) = self.transfer_amount(transfer)?;
        let account =
            self.ledger.find_account(&transfer.account).ok_or(RejectReason::InsufficientFunds)?;
        let available = self.ledger.available(account, asset);
        if units > i128::from(available.0) {
            return Err(RejectReason::InsufficientFunds);
        }
        self.ledger.withdraw(account, asset, Amount(units as i64));
        if self.is_settle_asset(asset) {
            self.day_flows.entry((account, asset)).or_default().withdrawn += Amount(units as i64);
        }
        Ok(Accepted::Silently)
    }

    /// An `order`; `rested` is set where it rests, if it does. In the replay format's
    /// order of checks: the order's own (`check_new_order`), the price it may trade to
    /// (`trade_bound`), what backs it (`backing`); then it is accepted, backed and rested
    /// or matched (`accept_new_order`).
    fn place_order(
        &mut self,
        seq: Seq,
        order: &OrderCommand<'_>,
        events: &mut Vec<Event>,
        rested: &mut Option<OrderHandle>,
    ) -> Result<Accepted, RejectReason> {
        // Nearly every order names its quantity alone: one predictable branch sends the
        // others (a spend-amount buy, a command naming both sizes or neither) away.
        let Some(qty) = order.size.qty_alone() else {
            return self.place_order_of_another_size(seq, order, events);
        };
        let checked = self.check_new_order(order, qty)?;
        let bound = self.trade_bound(&checked)?;
        let (account, backing) = self.backing(&checked, bound)?;
        // The quantity fits in i64 (it is within a hold or a position), and so does the
        // price: a limit was validated, a spot market buy's protection price is within
        // its hold, and a futures one is kept within range.
        let instrument = &self.instruments[checked.instrument.index()];
        let accepted = AcceptedOrder {
            account,
            id: ClientOrderId::new(&order.id),
            price: instrument.price_within_range(bound),
            qty: Qty(checked.qty as i64),
            backing,
            checked,
        };
        self.accept_new_order(seq, accepted, events, rested);
        Ok(Accepted::Emitted)
    }

    /// A new order's own checks, in the replay format's order: its instrument and id
    /// (`locate_new_order`), its price, its quantity, its offset; and the time in force
    /// it trades under (a day order rests as good-till-cancel, marked to expire at the
    /// settlement).
    #[inline(always)]
    fn check_new_order(
        &self,
        order: &OrderCommand<'_>,
        qty: Decimal,
    ) -> Result<CheckedOrder, RejectReason> {
        let (instrument_id, account) = self.locate_new_order(order)?;
        let instrument = &self.instruments[instrument_id.index()];
        let limit = match order.order_type {
            OrderType::Limit { price } => Some(instrument.validate_price(price)?),
            OrderType::Market => None,
        };
        let qty = instrument.validate_qty(qty)?;
        let future = instrument.future();
        let (offset, takes) = match future {
            Some(rules) if order.offset.is_close() => {
                (order.offset, Some(rules.takes(order.offset).ok_or(RejectReason::InvalidOffset)?))
            }
            // A valid offset on a spot order is ignored.
            _ => (Offset::Open, None),
        };
        let (time_in_force, good_for_day) =
            match order.time_in_force.applied(order.order_type, future.is_some()) {
                TimeInForce::GoodForDay => (TimeInForce::GoodTillCancel, true),
                time_in_force => (time_in_force, false),
            };
        Ok(CheckedOrder {
            instrument: instrument_id,
            account,
            side: order.side,
            limit,
            qty,
            offset,
            takes,
            time_in_force,
            good_for_day,
            post_only: order.post_only && limit.is_some(),
            stp: order.stp,
        })
    }

    /// The furthest price a checked order may trade at: its limit (a post-only one that
    /// would cross is `would_cross`), or a market order's protection price from the best
    /// opposite price (`no_liquidity` when there is none). Not yet within the price
    /// range: a spot market buy's may exceed it until its hold is checked.
    #[inline(always)]
    fn trade_bound(&self, order: &CheckedOrder) -> Result<i128, RejectReason> {
        let book = &self.books[order.instrument.index()];
        match order.limit {
            Some(limit) if order.post_only && book.would_cross(order.side, limit) => {
                Err(RejectReason::WouldCross)
            }
            Some(limit) => Ok(i128::from(limit.0)),
            None => {
                let best =
                    book.best_price(order.side.opposite()).ok_or(RejectReason::NoLiquidity)?;
                Ok(self.instruments[order.instrument.index()].protection_price(order.side, best))
            }
        }
    }

    /// What backs a checked order trading to `bound`, and the account it is placed for:
    /// a close order the position it closes (`insufficient_position` beyond what is
    /// closable), any other order funds held (`insufficient_funds` beyond what is
    /// available). An account that does not exist has neither.
    #[inline(always)]
    fn backing(
        &self,
        order: &CheckedOrder,
        bound: i128,
    ) -> Result<(AccountId, Backing), RejectReason> {
        let instrument = &self.instruments[order.instrument.index()];
        match (instrument.future(), order.takes) {
            (Some(_), Some(takes)) => {
                let account = order.account.ok_or(RejectReason::InsufficientPosition)?;
                let closable = self.positions[order.instrument.index()]
                    .as_deref()
                    .and_then(|positions| {
                        positions.side(account, PositionSide::of_order(order.side, order.offset))
                    })
                    .map_or(Qty::ZERO, |state| state.closable(takes));
                if order.qty > i128::from(closable.0) {
                    return Err(RejectReason::InsufficientPosition);
                }
                Ok((account, Backing::Reservation))
            }
            (Some(rules), None) => {
                let account = order.account.ok_or(RejectReason::InsufficientFunds)?;
                let hold = rules
                    .open_hold(order.qty)
                    .filter(|&hold| hold <= self.ledger.available(account, rules.settle))
                    .ok_or(RejectReason::InsufficientFunds)?;
                Ok((account, Backing::Hold(rules.settle, hold)))
            }
            (None, _) => {
                let account = order.account.ok_or(RejectReason::InsufficientFunds)?;
                let rules = instrument.spot().expect("an instrument is spot or a future");
                let hold_asset = rules.hold_asset(order.side);
                let hold = rules
                    .hold_amount(order.side, bound, order.qty)
                    .filter(|&hold| hold <= self.ledger.available(account, hold_asset))
                    .ok_or(RejectReason::InsufficientFunds)?;
                Ok((account, Backing::Hold(hold_asset, hold)))
            }
        }
    }

    /// An accepted new order: `accepted`, then a post-only order that may not rest
    /// expires untouched; any other takes its backing (the hold, or the position's
    /// reservation) and rests, when it meets nothing, or is matched.
    #[inline(always)]
    fn accept_new_order(
        &mut self,
        seq: Seq,
        order: AcceptedOrder,
        events: &mut Vec<Event>,
        rested: &mut Option<OrderHandle>,
    ) {
        let AcceptedOrder { account, id, price, qty, backing, checked } = order;
        let instrument = checked.instrument;
        events.push(Event::Accepted { seq, account: Some(account) });
        if checked.post_only && checked.time_in_force != TimeInForce::GoodTillCancel {
            let reason = DoneReason::Expired;
            events.push(Event::Done { seq, instrument, account, id, reason, filled: Qty::ZERO });
            return;
        }
        match backing {
            Backing::Hold(asset, hold) => self.ledger.hold(account, asset, hold),
            Backing::Reservation => {
                let positions = self.positions[instrument.index()]
                    .as_deref_mut()
                    .expect("a futures contract has positions");
                let position_side = PositionSide::of_order(checked.side, checked.offset);
                positions.reserve(account, position_side, checked.offset, qty);
            }
        }
        if checked.time_in_force == TimeInForce::GoodTillCancel
            && !self.books[instrument.index()].would_cross(checked.side, price)
        {
            // Most new orders rest without meeting the other side: nothing to match.
            let resting = NewRestingOrder {
                account,
                id,
                side: checked.side,
                price,
                remaining: qty,
                filled: Qty::ZERO,
                stp: checked.stp,
                post_only: checked.post_only,
                offset: checked.offset,
                good_for_day: checked.good_for_day,
            };
            *rested = Some(self.rest_new(seq, instrument, resting));
            return;
        }
        let taker =
            Taker { account, side: checked.side, limit: price, remaining: qty, stp: checked.stp };
        let execution = Execution {
            instrument,
            taker,
            id,
            time_in_force: checked.time_in_force,
            post_only: checked.post_only,
            filled_before: Qty::ZERO,
            placement: Placement::New,
            offset: checked.offset,
            good_for_day: checked.good_for_day,
            liquidation: false,
        };
        self.execute(seq, execution, events, rested);
    }

    /// The first two checks of every `order`: its instrument (`unknown_symbol`) and its
    /// id among the account's open orders (`duplicate_id`). Returns the instrument and
    /// the account, if it exists.
    #[inline(always)]
    fn locate_new_order(
        &self,
        order: &OrderCommand<'_>,
    ) -> Result<(InstrumentId, Option<AccountId>), RejectReason> {
        let instrument = self.find_instrument(&order.symbol).ok_or(RejectReason::UnknownSymbol)?;
        let account = self.resolve(&order.account);
        // An account that does not exist yet has no open orders.
        if account
            .is_some_and(|account| self.open_orders.find(&self.books, account, &order.id).is_some())
        {
            return Err(RejectReason::DuplicateId);
        }
        Ok((instrument, account))
    }

    /// An `order` that does not name a quantity alone (`orders.md`, "Market buys by
    /// amount to spend"): one naming neither is `malformed` (the replay format's parser
    /// says so of such a line first); then the checks of any order in the spec's order
    /// (`qty`, when named too, checked as usual), `invalid_order` unless it is a spot
    /// market buy naming only `quote_qty` and not `fok`, then the value of `quote_qty`
    /// (`invalid_qty`: not positive, or more decimals than the quote asset; `min_qty`
    /// and `max_qty` do not apply), `no_liquidity`, `insufficient_funds`. An accepted
    /// one spends: `place_spending_buy`.
    #[cold]
    #[inline(never)]
    fn place_order_of_another_size(
        &mut self,
        seq: Seq,
        order: &OrderCommand<'_>,
        events: &mut Vec<Event>,
    ) -> Result<Accepted, RejectReason> {
        let named = order.size.named();
        debug_assert!(!matches!(named, SizeNamed::Qty(_)), "plain orders go the hot path");
        if named == SizeNamed::Neither {
            return Err(RejectReason::Malformed);
        }
        let (instrument_id, account) = self.locate_new_order(order)?;
        let instrument = &self.instruments[instrument_id.index()];
        if let OrderType::Limit { price } = order.order_type {
            instrument.validate_price(price)?;
        }
        if let Some(qty) = order.size.qty() {
            instrument.validate_qty(qty)?;
        }
        if let (Some(rules), true) = (instrument.future(), order.offset.is_close()) {
            rules.takes(order.offset).ok_or(RejectReason::InvalidOffset)?;
        }
        // `quote_qty` anywhere else is `invalid_order` whatever its value.
        let (rules, quote_qty) = match (&instrument.kind, named) {
            (InstrumentKind::Spot(rules), SizeNamed::QuoteQty(quote_qty))
                if order.side == Side::Buy
                    && order.order_type == OrderType::Market
                    && order.time_in_force != TimeInForce::FillOrKill =>
            {
                (rules, quote_qty)
            }
            _ => return Err(RejectReason::InvalidOrder),
        };
        let spend = quote_qty
            .to_units(self.assets[rules.quote.index()].decimals)
            .filter(|&units| units > 0)
            .ok_or(RejectReason::InvalidQty)?;
        let best_ask = self.books[instrument_id.index()]
            .best_price(Side::Sell)
            .ok_or(RejectReason::NoLiquidity)?;
        let account = account.ok_or(RejectReason::InsufficientFunds)?;
        // Beyond i64 is more than any account has.
        let hold = i64::try_from(spend)
            .ok()
            .map(Amount)
            .filter(|&hold| hold <= self.ledger.available(account, rules.quote))
            .ok_or(RejectReason::InsufficientFunds)?;
        let limit = instrument.price_within_range(instrument.protection_price(Side::Buy, best_ask));
        let id = ClientOrderId::new(&order.id);
        events.push(Event::Accepted { seq, account: Some(account) });
        let buyer = SpendingBuyer {
            account,
            limit,
            stp: order.stp,
            lot: instrument.lot,
            units_per_notional: rules.quote_units_per_notional_unit,
            left: hold.0,
            bought: Qty::ZERO,
        };
        self.place_spending_buy(seq, (instrument_id, id), buyer, events);
        Ok(Accepted::Emitted)
    }

    /// An accepted spend-amount buy: holds what it may spend, buys from the asks
    /// (`OrderBook::match_spending_buyer`), each fill paying its price times its quantity
    /// from the hold, then gives back what is left of the hold and reports its `done`:
    /// `filled` with the base it bought, `expired` or `stp` as matching ended.
    fn place_spending_buy(
        &mut self,
        seq: Seq,
        (instrument, id): (InstrumentId, ClientOrderId),
        mut buyer: SpendingBuyer,
        events: &mut Vec<Event>,
    ) {
        let Exchange { instruments, books, ledger, open_orders, .. } = self;
        let Some(rules) = instruments[instrument.index()].spot() else {
            unreachable!("only a spot instrument takes spend-amount buys")
        };
        let account = buyer.account;
        let held_before = ledger.balance(account, rules.quote).held;
        ledger.hold(account, rules.quote, Amount(buyer.left));
        // The trades name the buyer as any taker; its fills pay from the hold at their
        // own price (`SpotFills::<true>`).
        let taker = Taker {
            account,
            side: Side::Buy,
            limit: buyer.limit,
            remaining: Qty::ZERO,
            stp: buyer.stp,
        };
        let mut fills = SpotFills::<true> {
            rules,
            ledger,
            open_orders,
            events,
            seq,
            instrument,
            taker: &taker,
            taker_id: &id,
        };
        let end = books[instrument.index()].match_spending_buyer(&mut buyer, &mut fills);
        let reason = match end {
            MatchEnd::Filled => DoneReason::Filled,
            MatchEnd::NoMoreCrossing => DoneReason::Expired,
            MatchEnd::SelfTradePrevented => DoneReason::SelfTradePrevented,
        };
        ledger.release(account, rules.quote, Amount(buyer.left));
        debug_assert_eq!(
            ledger.balance(account, rules.quote).held,
            held_before,
            "a spend-amount buy's hold is paid out or given back in full"
        );
        events.push(Event::Done { seq, instrument, account, id, reason, filled: buyer.bought });
    }

    /// Matches an incoming (or re-placed) order whose hold (or reservation) is taken,
    /// then rests what is left of a GTC order or finishes it, releasing what it still
    /// holds. Sets `rested` where a new order rests (`Placement::New` only: a re-placed
    /// order keeps its slot).
    fn execute(
        &mut self,
        seq: Seq,
        execution: Execution,
        events: &mut Vec<Event>,
        rested: &mut Option<OrderHandle>,
    ) {
        let Execution { instrument, mut taker, id, time_in_force, .. } = execution;
        let Exchange { instruments, books, positions, ledger, open_orders, .. } = self;
        let definition = &instruments[instrument.index()];
        let book = &mut books[instrument.index()];
        let positions = positions[instrument.index()].as_deref_mut();
        let qty = taker.remaining;
        let end = if !book.would_cross(taker.side, taker.limit)
            || (time_in_force == TimeInForce::FillOrKill && !book.can_fill_completely(&taker))
        {
            // Most orders rest without touching the other side: no matching to set up.
            MatchEnd::NoMoreCrossing
        } else {
            let mut matching = taker;
            let end = match (&definition.kind, positions) {
                (InstrumentKind::Spot(rules), _) => {
                    let mut fills = SpotFills::<false> {
                        rules,
                        ledger,
                        open_orders,
                        events,
                        seq,
                        instrument,
                        taker: &taker,
                        taker_id: &id,
                    };
                    book.match_taker(&mut matching, &mut fills)
                }
                (InstrumentKind::Future(rules), Some(positions)) => {
                    let takes = match execution.liquidation {
                        true => Some(Takes::HistoryThenToday),
                        false => rules.takes(execution.offset),
                    };
                    let mut fills = FuturesFills {
                        rules,
                        positions,
                        ledger,
                        open_orders,
                        events,
                        seq,
                        instrument,
                        taker: &taker,
                        taker_id: &id,
                        taker_offset: execution.offset,
                        taker_takes: takes,
                        taker_reserved: !execution.liquidation,
                    };
                    book.match_taker(&mut matching, &mut fills)
                }
                (InstrumentKind::Future(_), None) => {
                    unreachable!("a futures contract has positions")
                }
            };
            taker.remaining = matching.remaining;
            end
        };
        let positions = self.positions[instrument.index()].as_deref_mut();
        let book = &mut self.books[instrument.index()];
        let filled = execution.filled_before + (qty - taker.remaining);
        let done_reason = match end {
            MatchEnd::Filled => DoneReason::Filled,
            MatchEnd::SelfTradePrevented => DoneReason::SelfTradePrevented,
            MatchEnd::NoMoreCrossing if time_in_force == TimeInForce::GoodTillCancel => {
                debug_assert!(!taker.remaining.is_zero(), "a filled order does not rest");
                match execution.placement {
                    Placement::New => {
                        let resting = NewRestingOrder {
                            account: taker.account,
                            id,
                            side: taker.side,
                            price: taker.limit,
                            remaining: taker.remaining,
                            filled,
                            stp: taker.stp,
                            post_only: execution.post_only,
                            offset: execution.offset,
                            good_for_day: execution.good_for_day,
                        };
                        *rested = Some(self.rest_new(seq, instrument, resting));
                    }
                    Placement::Detached { slot } => {
                        book.attach(slot, taker.limit, taker.remaining, filled)
                    }
                }
                return;
            }
            MatchEnd::NoMoreCrossing => DoneReason::Expired,
        };
        if let Placement::Detached { slot } = execution.placement {
            book.free_detached(slot);
            self.open_orders.remove(taker.account, &id, OrderHandle { instrument, slot });
        }
        if !taker.remaining.is_zero() {
            let remains = Remains {
                account: taker.account,
                side: taker.side,
                price: taker.limit,
                offset: execution.offset,
                remaining: taker.remaining,
            };
            match execution.liquidation {
                // A liquidation reserved nothing: what it did not fill stays a position.
                true => {}
                false => release_remaining(
                    &self.instruments[instrument.index()],
                    positions,
                    &mut self.ledger,
                    remains,
                ),
            }
        }
        events.push(Event::Done {
            seq,
            instrument,
            account: taker.account,
            id,
            reason: done_reason,
            filled,
        });
    }

    /// Rests a new order on `instrument`'s book and indexes it; returns where it rests.
    fn rest_new(
        &mut self,
        seq: Seq,
        instrument: InstrumentId,
        order: NewRestingOrder,
    ) -> OrderHandle {
        let slot = self.books[instrument.index()].insert(order);
        if let Some(positions) = self.positions[instrument.index()].as_deref_mut() {
            positions.note_resting(slot, seq);
        }
        let handle = OrderHandle { instrument, slot };
        self.open_orders.insert(&self.books, handle);
        handle
    }

    fn cancel(
        &mut self,
        seq: Seq,
        account: &AccountRef<'_>,
        id: &str,
        events: &mut Vec<Event>,
    ) -> Result<Accepted, RejectReason> {
        let account = self.resolve(account).ok_or(RejectReason::UnknownOrder)?;
        let handle =
            self.open_orders.take(&self.books, account, id).ok_or(RejectReason::UnknownOrder)?;
        events.push(Event::Accepted { seq, account: Some(account) });
        self.finish_canceled(seq, handle, events);
        Ok(Accepted::Emitted)
    }

    /// Cancels `account`'s open order `id` as a `cancel` of it does, but emits only its
    /// `done` (reason `canceled`, with its `filled`): takes it off its book and out of
    /// the index and releases what it holds. `false` (nothing changed, nothing emitted)
    /// when the account has no such open order. For the venue's cancel-all.
    pub(crate) fn cancel_open_order(
        &mut self,
        seq: Seq,
        account: AccountId,
        id: &str,
        events: &mut Vec<Event>,
    ) -> bool {
        match self.open_orders.take(&self.books, account, id) {
            Some(handle) => {
                self.finish_canceled(seq, handle, events);
                true
            }
            None => false,
        }
    }

    /// The end of every cancel: the order at `handle`, already out of the index, leaves
    /// its book, its hold (or reservation) is released, and its `done` is emitted.
    fn finish_canceled(&mut self, seq: Seq, handle: OrderHandle, events: &mut Vec<Event>) {
        self.finish_resting(seq, handle, DoneReason::Canceled, events);
    }

    /// Takes the resting order at `handle` (already out of the index) off its book,
    /// releases what it holds or reserves and emits its `done` with `reason`.
    fn finish_resting(
        &mut self,
        seq: Seq,
        handle: OrderHandle,
        reason: DoneReason,
        events: &mut Vec<Event>,
    ) {
        let instrument = &self.instruments[handle.instrument.index()];
        let positions = self.positions[handle.instrument.index()].as_deref_mut();
        let order = self.books[handle.instrument.index()].remove(handle.slot);
        let remains = Remains {
            account: order.account,
            side: order.side,
            price: order.price,
            offset: order.offset,
            remaining: order.remaining,
        };
        release_remaining(instrument, positions, &mut self.ledger, remains);
        events.push(Event::Done {
            seq,
            instrument: handle.instrument,
            account: order.account,
            id: order.id.clone(),
            reason,
            filled: order.filled,
        });
    }

    /// An `amend`, in the replay format's order of checks: the open order it names
    /// (`unknown_order`), then what it changes (`check_amend`: price, quantity,
    /// post-only, funds or position); then it is accepted, its backing follows
    /// (`rebacked`), and the order is reduced in place, moved to the back of its new
    /// level, or matched at its new price (`move_amended`).
    fn amend(
        &mut self,
        seq: Seq,
        amend: &AmendCommand<'_>,
        events: &mut Vec<Event>,
    ) -> Result<Accepted, RejectReason> {
        let account = self.resolve(&amend.account).ok_or(RejectReason::UnknownOrder)?;
        let handle = self
            .open_orders
            .find(&self.books, account, &amend.id)
            .ok_or(RejectReason::UnknownOrder)?;
        let change = self.check_amend(account, handle, amend)?;
        events.push(Event::Accepted { seq, account: Some(account) });
        self.rebacked(account, handle, &change);
        self.move_amended(seq, (account, handle), change, events);
        Ok(Accepted::Emitted)
    }

    /// What an amend of `account`'s open order at `handle` changes, checked: the new
    /// price and quantity (each validated; one not named stays), whether the order
    /// keeps its place (same price, no more quantity), `would_cross` for a post-only
    /// order that would move onto the other side, and its backing: a spot or futures
    /// open order's hold, whose growth must be available (`insufficient_funds`); a
    /// futures close order's raised quantity, which must be closable
    /// (`insufficient_position`; a move to a new price looks no position up,
    /// futures.md).
    #[inline(always)]
    fn check_amend(
        &self,
        account: AccountId,
        handle: OrderHandle,
        amend: &AmendCommand<'_>,
    ) -> Result<AmendChange, RejectReason> {
        let instrument = &self.instruments[handle.instrument.index()];
        let book = &self.books[handle.instrument.index()];
        let order = book.order(handle.slot);
        let new_price = match amend.price {
            Some(price) => instrument.validate_price(price)?,
            None => order.price,
        };
        let new_qty = match (amend.qty, amend.qty_kind) {
            (Some(qty), AmendQtyKind::Remaining) => instrument.validate_qty(qty)?,
            (Some(total), AmendQtyKind::Total) => instrument.left_of_total(total, order.filled)?,
            (None, _) => i128::from(order.remaining.0),
        };
        let keeps_priority = new_price == order.price && new_qty <= i128::from(order.remaining.0);
        if !keeps_priority && order.post_only && book.would_cross(order.side, new_price) {
            return Err(RejectReason::WouldCross);
        }
        let hold = match &instrument.kind {
            InstrumentKind::Spot(rules) => {
                let asset = rules.hold_asset(order.side);
                let old = rules.resting_hold(order.side, order.price, order.remaining);
                // The balance is read only when the hold grows (a sell moved to a new
                // price holds what it held).
                let new = rules
                    .hold_amount(order.side, i128::from(new_price.0), new_qty)
                    .filter(|&new| new <= old || new - old <= self.ledger.available(account, asset))
                    .ok_or(RejectReason::InsufficientFunds)?;
                HoldChange { asset, old, new }
            }
            InstrumentKind::Future(rules) if order.offset.is_close() => {
                let increase = new_qty - i128::from(order.remaining.0);
                let takes = rules.takes(order.offset).ok_or(RejectReason::InvalidOffset)?;
                if increase > 0 {
                    let closable = self.positions[handle.instrument.index()]
                        .as_deref()
                        .and_then(|positions| {
                            let side = PositionSide::of_order(order.side, order.offset);
                            positions.side(account, side)
                        })
                        .map_or(Qty::ZERO, |state| state.closable(takes));
                    if increase > i128::from(closable.0) {
                        return Err(RejectReason::InsufficientPosition);
                    }
                }
                HoldChange { asset: rules.settle, old: Amount::ZERO, new: Amount::ZERO }
            }
            InstrumentKind::Future(rules) => {
                let old = rules.resting_hold(Offset::Open, order.remaining);
                let new = rules
                    .open_hold(new_qty)
                    .filter(|&new| {
                        new <= old || new - old <= self.ledger.available(account, rules.settle)
                    })
                    .ok_or(RejectReason::InsufficientFunds)?;
                HoldChange { asset: rules.settle, old, new }
            }
        };
        Ok(AmendChange {
            id: order.id.clone(),
            side: order.side,
            offset: order.offset,
            old_remaining: order.remaining,
            new_price,
            // Within the instrument's bounds, and so within i64.
            new_qty: Qty(new_qty as i64),
            keeps_priority,
            // Whether the order meets the other side at its new price: a keeper of
            // priority does not move, and taking an order off its own side leaves the
            // other alone.
            matches: !keeps_priority && book.would_cross(order.side, new_price),
            hold,
        })
    }

    /// An accepted amend's backing: the hold moves by its change (an amend that keeps
    /// its hold, a move of a sell or of a futures order, moves no money), and a close
    /// order's reservation follows its quantity (a move to a new price leaves it as it
    /// is).
    #[inline(always)]
    fn rebacked(&mut self, account: AccountId, handle: OrderHandle, change: &AmendChange) {
        let HoldChange { asset, old, new } = change.hold;
        if new < old {
            self.ledger.release(account, asset, old - new);
        } else if new > old {
            self.ledger.hold(account, asset, new - old);
        }
        let AmendChange { side, offset, old_remaining, new_qty, .. } = *change;
        if offset.is_close() && new_qty != old_remaining {
            if let Some(positions) = self.positions[handle.instrument.index()].as_deref_mut() {
                let position_side = PositionSide::of_order(side, offset);
                positions.change_reservation(
                    account,
                    position_side,
                    offset,
                    (old_remaining, new_qty),
                );
            }
        }
    }

    /// An accepted amend's `amended`, and the order's move: a keeper of priority is
    /// reduced in place; one that meets nothing goes to the back of its new level; one
    /// that meets the other side is taken off its book and matched as a good-till-cancel
    /// taker, keeping its slot for what rests again.
    #[inline(always)]
    fn move_amended(
        &mut self,
        seq: Seq,
        (account, handle): (AccountId, OrderHandle),
        change: AmendChange,
        events: &mut Vec<Event>,
    ) {
        let AmendChange { id, new_price, new_qty, .. } = change;
        let book = &mut self.books[handle.instrument.index()];
        if !change.matches {
            events.push(Event::Amended {
                seq,
                instrument: handle.instrument,
                account,
                id,
                price: new_price,
                qty: new_qty,
            });
            match change.keeps_priority {
                true => book.reduce(handle.slot, new_qty),
                // Most amends move an order without reaching the other side: it goes to
                // the back of its new level, with nothing to match.
                false => book.requeue(handle.slot, new_price, new_qty),
            }
            return;
        }
        let instrument = handle.instrument;
        let amended = Event::Amended {
            seq,
            instrument,
            account,
            id: id.clone(),
            price: new_price,
            qty: new_qty,
        };
        events.push(amended);
        let order = book.detach(handle.slot);
        let execution = Execution {
            instrument: handle.instrument,
            taker: Taker {
                account,
                side: order.side,
                limit: new_price,
                remaining: new_qty,
                stp: order.stp,
            },
            id,
            time_in_force: TimeInForce::GoodTillCancel,
            post_only: order.post_only,
            filled_before: order.filled,
            placement: Placement::Detached { slot: handle.slot },
            offset: order.offset,
            good_for_day: order.good_for_day,
            liquidation: false,
        };
        let mut rested = None;
        self.execute(seq, execution, events, &mut rested);
        debug_assert!(rested.is_none(), "an amended order keeps its slot");
    }

    // ----- futures: margin, settlement, expiry, liquidation -----

    /// The futures contract named `symbol` (not expired), with its rules.
    fn find_future(&self, symbol: &str) -> Result<(InstrumentId, &FutureRules), RejectReason> {
        let instrument = self.find_instrument(symbol).ok_or(RejectReason::UnknownSymbol)?;
        let rules =
            self.instruments[instrument.index()].future().ok_or(RejectReason::UnknownSymbol)?;
        Ok((instrument, rules))
    }

    /// `margin`: every open position and open order's hold of the contract re-priced at
    /// the new rate per lot, the difference moved between available and held.
    fn set_margin(&mut self, symbol: &str, margin: Decimal) -> Result<Accepted, RejectReason> {
        let (instrument, rules) = self.find_future(symbol)?;
        let settle_decimals = self.asset(rules.settle).decimals;
        let margin = margin
            .to_units(settle_decimals)
            .and_then(|units| i64::try_from(units).ok())
            .filter(|&units| units > 0 && units.checked_add(rules.taker_fee.0).is_some())
            .map(Amount)
            .ok_or(RejectReason::InvalidAmount)?;
        let (settle, old_margin) = (rules.settle, rules.margin);
        let lot = rules.lot;
        let change = i128::from(margin.0) - i128::from(old_margin.0);
        // Lots per account: its open orders' (offset open) and its positions'.
        let mut lots: FxHashMap<AccountId, i128> = FxHashMap::default();
        for side in [Side::Buy, Side::Sell] {
            self.books[instrument.index()].for_each_order(side, |order| {
                if order.offset == Offset::Open {
                    *lots.entry(order.account).or_default() +=
                        i128::from(order.remaining.0 / lot.0);
                }
            });
        }
        if let Some(positions) = self.positions[instrument.index()].as_deref() {
            for position in positions.all() {
                *lots.entry(position.account).or_default() +=
                    i128::from((position.long.qty().0 + position.short.qty().0) / lot.0);
            }
        }
        let mut accounts: Vec<(AccountId, i128)> = lots.into_iter().collect();
        accounts.sort_unstable_by_key(|(account, _)| *account);
        for (account, lots) in accounts {
            let delta = (lots * change).clamp(i128::from(i64::MIN), i128::from(i64::MAX));
            if delta != 0 {
                self.ledger.reprice_margin(account, settle, Amount(delta as i64));
            }
        }
        if let InstrumentKind::Future(rules) = &mut self.instruments[instrument.index()].kind {
            rules.margin = margin;
        }
        Ok(Accepted::Silently)
    }

    /// `settle`: daily settlement at `price`, or the contract's expiry when `is_final`.
    fn settle(
        &mut self,
        seq: Seq,
        symbol: &str,
        price: Decimal,
        is_final: bool,
        events: &mut Vec<Event>,
    ) -> Result<Accepted, RejectReason> {
        let (instrument, _) = self.find_future(symbol)?;
        let price = self.instruments[instrument.index()].validate_price(price)?;
        events.push(Event::Accepted { seq, account: None });
        // Orders that end with the day (every order, at expiry), in acceptance order.
        let ending = self.resting_orders_in_acceptance_order(instrument, |order| {
            is_final || order.good_for_day || order.offset == Offset::CloseToday
        });
        for &(_, slot) in &ending {
            self.expire_resting(seq, OrderHandle { instrument, slot }, DoneReason::Expired, events);
        }
        self.by_acceptance = ending;
        let Exchange { instruments, positions, ledger, day_flows, .. } = self;
        let Some(rules) = instruments[instrument.index()].future() else {
            unreachable!("find_future found a futures contract")
        };
        let Some(positions) = positions[instrument.index()].as_deref_mut() else {
            unreachable!("a futures contract has positions")
        };
        positions.set_settlement_price(price);
        positions.start_day();
        // A new day for the settle asset's deposits and withdrawals too.
        let settle = rules.settle;
        day_flows.retain(|(_, asset), _| *asset != settle);
        let marked = positions.take_held_by_name(|account| ledger.account(account).name.as_str());
        for &index in &marked {
            let account = positions.all()[index].account;
            for side in PositionSide::BOTH {
                if let Some((qty, basis)) = positions.mark(index, side, price) {
                    let pnl = rules.profit(side, price, qty, basis);
                    ledger.credit_profit(account, rules.settle, pnl, BalanceMove::Settlement);
                    events.push(Event::Settled(SettledEvent {
                        seq,
                        account,
                        instrument,
                        side,
                        qty,
                        price,
                        pnl,
                    }));
                }
            }
        }
        if is_final {
            // Every position closes at the settlement price: nothing more to realise,
            // its margin comes back.
            for &index in &marked {
                let account = positions.all()[index].account;
                for side in PositionSide::BOTH {
                    let qty = positions.clear(index, side);
                    if !qty.is_zero() {
                        ledger.release(account, rules.settle, rules.position_margin(qty));
                    }
                }
            }
            instruments[instrument.index()].expired = true;
        }
        positions.return_held_by_name(marked);
        Ok(Accepted::Emitted)
    }

    /// The resting orders on `instrument` that `selected` picks, as `(seq that placed
    /// it, slot)` in the order they were accepted (a futures contract knows each order's
    /// `seq`). The vector is `by_acceptance`, lent: the caller puts it back.
    fn resting_orders_in_acceptance_order(
        &mut self,
        instrument: InstrumentId,
        selected: impl Fn(&RestingOrder) -> bool,
    ) -> Vec<(Seq, u32)> {
        let mut picked = std::mem::take(&mut self.by_acceptance);
        picked.clear();
        let Some(positions) = self.positions[instrument.index()].as_deref() else {
            return picked;
        };
        let book = &self.books[instrument.index()];
        for side in [Side::Buy, Side::Sell] {
            book.for_each_order(side, |order| {
                if selected(order) {
                    let handle = self
                        .open_orders
                        .find(&self.books, order.account, &order.id)
                        .expect("every resting order is indexed");
                    picked.push((positions.accepted_at(handle.slot), handle.slot));
                }
            });
        }
        picked.sort_unstable();
        picked
    }

    /// Finishes the resting order at `handle` with `reason` (out of the index and the
    /// book, its hold or reservation released, its `done` emitted).
    fn expire_resting(
        &mut self,
        seq: Seq,
        handle: OrderHandle,
        reason: DoneReason,
        events: &mut Vec<Event>,
    ) {
        let order = self.books[handle.instrument.index()].order(handle.slot);
        let (account, id) = (order.account, order.id.clone());
        self.open_orders.remove(account, &id, handle);
        self.finish_resting(seq, handle, reason, events);
    }

    /// `liquidate`: the account's orders on the contract canceled, then each side of its
    /// position closed by a market order.
    fn liquidate(
        &mut self,
        seq: Seq,
        account: &AccountRef<'_>,
        symbol: &str,
        events: &mut Vec<Event>,
    ) -> Result<Accepted, RejectReason> {
        let (instrument, _) = self.find_future(symbol)?;
        let account = self.resolve(account).ok_or(RejectReason::UnknownOrder)?;
        let orders =
            self.resting_orders_in_acceptance_order(instrument, |order| order.account == account);
        let has_position = self.positions[instrument.index()]
            .as_deref()
            .and_then(|positions| positions.position(account))
            .is_some_and(|position| !position.is_empty());
        if orders.is_empty() && !has_position {
            self.by_acceptance = orders;
            return Err(RejectReason::UnknownOrder);
        }
        events.push(Event::Accepted { seq, account: Some(account) });
        for &(_, slot) in &orders {
            self.expire_resting(
                seq,
                OrderHandle { instrument, slot },
                DoneReason::Canceled,
                events,
            );
        }
        self.by_acceptance = orders;
        for side in PositionSide::BOTH {
            let qty = self.positions[instrument.index()]
                .as_deref()
                .and_then(|positions| positions.side(account, side))
                .map_or(Qty::ZERO, |state| state.qty());
            if qty.is_zero() {
                continue;
            }
            let order_side = side.closing_side();
            let id = ClientOrderId::from(format!("liq-{}-{}", seq.0, side.as_str()));
            let definition = &self.instruments[instrument.index()];
            let Some(best) = self.books[instrument.index()].best_price(order_side.opposite())
            else {
                events.push(Event::Done {
                    seq,
                    instrument,
                    account,
                    id,
                    reason: DoneReason::Expired,
                    filled: Qty::ZERO,
                });
                continue;
            };
            let limit =
                definition.price_within_range(definition.protection_price(order_side, best));
            let execution = Execution {
                instrument,
                taker: Taker {
                    account,
                    side: order_side,
                    limit,
                    remaining: qty,
                    stp: StpMode::CancelTaker,
                },
                id,
                time_in_force: TimeInForce::ImmediateOrCancel,
                post_only: false,
                filled_before: Qty::ZERO,
                placement: Placement::New,
                offset: Offset::Close,
                good_for_day: false,
                liquidation: true,
            };
            let mut rested = None;
            self.execute(seq, execution, events, &mut rested);
            debug_assert!(rested.is_none(), "a liquidation never rests");
        }
        Ok(Accepted::Emitted)
    }

    // ----- invariants -----

    /// Checks every invariant of the whole state: books consistent and uncrossed, the
    /// open-order index matching the books, each account's held equal to what its open
    /// orders hold plus its positions' margin, close orders' reservations equal to what
    /// they have left and within the positions, no negative balance but a settle
    /// asset's available, and per asset `sum(available + held) + fees + (short value -
    /// long value of the positions settled in it) == net deposits`. O(state); for tests
    /// and debugging.
    pub fn check_invariants(&self) -> Result<(), String> {
        let mut expected_held = self.check_books_and_index()?;
        let mut asset_totals = vec![0i128; self.assets.len()];
        let mut settles = vec![false; self.assets.len()];
        for (index, instrument) in self.instruments.iter().enumerate() {
            if let Some(rules) = instrument.future() {
                settles[rules.settle.index()] = true;
                let positions =
                    self.positions[index].as_deref().ok_or("a future without positions")?;
                let value = self.check_positions(index, rules, positions, &mut expected_held)?;
                asset_totals[rules.settle.index()] += value;
            }
        }
        for (account_index, account) in self.ledger.accounts().iter().enumerate() {
            for (asset_index, total) in asset_totals.iter_mut().enumerate() {
                let asset = AssetId(asset_index as u32);
                let asset_name = &self.asset(asset).name;
                let balance = self.ledger.balance(AccountId(account_index as u32), asset);
                if (balance.available.0 < 0 && !settles[asset_index]) || balance.held.0 < 0 {
                    return Err(format!(
                        "account {} has a negative {asset_name} balance",
                        account.name
                    ));
                }
                let expected = expected_held
                    .get(&(AccountId(account_index as u32), asset))
                    .copied()
                    .unwrap_or(0);
                if i128::from(balance.held.0) != expected {
                    return Err(format!(
                        "account {} holds {} {asset_name} but its open orders and positions hold {expected}",
                        account.name, balance.held.0
                    ));
                }
                *total += i128::from(balance.available.0) + i128::from(balance.held.0);
            }
        }
        for (asset_index, total) in asset_totals.iter().enumerate() {
            let asset = AssetId(asset_index as u32);
            let fees = i128::from(self.ledger.fee_balance(asset).0);
            let net = i128::from(self.ledger.net_deposits(asset).0);
            if total + fees != net {
                return Err(format!(
                    "{} not conserved: balances and positions {total} + fees {fees} != deposits - withdrawals {net}",
                    self.asset(asset).name
                ));
            }
        }
        Ok(())
    }

    /// Checks a futures contract's positions against its open orders: each side's
    /// entries, reservations equal to the close orders' remaining quantities and within
    /// what they may take; adds the positions' margin to `expected_held` and returns
    /// the short sides' value minus the long sides'.
    fn check_positions(
        &self,
        index: usize,
        rules: &FutureRules,
        positions: &Positions,
        expected_held: &mut FxHashMap<(AccountId, AssetId), i128>,
    ) -> Result<i128, String> {
        let symbol = &self.instruments[index].symbol;
        positions.check_consistency().map_err(|problem| format!("{symbol}: {problem}"))?;
        let mut reserved: FxHashMap<(AccountId, PositionSide, bool), i64> = FxHashMap::default();
        for side in [Side::Buy, Side::Sell] {
            self.books[index].for_each_order(side, |order| {
                if order.offset.is_close() {
                    let key = (
                        order.account,
                        PositionSide::of_order(order.side, order.offset),
                        order.offset == Offset::CloseToday,
                    );
                    *reserved.entry(key).or_default() += order.remaining.0;
                }
            });
        }
        let mut value = 0i128;
        for position in positions.all() {
            for side in PositionSide::BOTH {
                let state = position.side(side);
                let close = reserved.get(&(position.account, side, false)).copied().unwrap_or(0);
                let close_today =
                    reserved.get(&(position.account, side, true)).copied().unwrap_or(0);
                if state.reserved_close.0 != close || state.reserved_close_today.0 != close_today {
                    return Err(format!(
                        "{symbol}: account {} {} reserves {}+{} but its close orders have {close}+{close_today} left",
                        position.account.0,
                        side.as_str(),
                        state.reserved_close.0,
                        state.reserved_close_today.0
                    ));
                }
                let within = [Takes::HistoryThenToday, Takes::HistoryOnly, Takes::TodayOnly]
                    .into_iter()
                    .filter(|takes| match takes {
                        Takes::HistoryThenToday => !rules.close_today,
                        Takes::HistoryOnly | Takes::TodayOnly => rules.close_today,
                    })
                    .all(|takes| state.closable(takes).0 >= 0);
                if !within {
                    return Err(format!(
                        "{symbol}: account {} {} reserves more than it holds",
                        position.account.0,
                        side.as_str()
                    ));
                }
                *expected_held.entry((position.account, rules.settle)).or_default() +=
                    i128::from(rules.position_margin(state.qty()).0);
                let side_value =
                    positions.basis(state) * rules.multiplier as i128 * rules.value_scale as i128;
                value += match side {
                    PositionSide::Long => -side_value,
                    PositionSide::Short => side_value,
                };
            }
        }
        if self.instruments[index].expired
            && (self.books[index].order_count() != 0
                || positions.all().iter().any(|p| !p.is_empty()))
        {
            return Err(format!("{symbol} expired with orders or positions left"));
        }
        Ok(value)
    }

    /// Checks each book and that the open-order index points at exactly the resting
    /// orders; returns what the open orders hold, per account and asset.
    fn check_books_and_index(&self) -> Result<FxHashMap<(AccountId, AssetId), i128>, String> {
        let mut expected_held: FxHashMap<(AccountId, AssetId), i128> = FxHashMap::default();
        let mut resting_orders = 0usize;
        for (index, book) in self.books.iter().enumerate() {
            let instrument = &self.instruments[index];
            book.check_consistency()
                .map_err(|problem| format!("{}: {problem}", instrument.symbol))?;
            let mut problem = None;
            let mut check = |order: &RestingOrder| {
                resting_orders += 1;
                let (asset, hold) =
                    instrument.resting_hold(order.side, order.price, order.offset, order.remaining);
                *expected_held.entry((order.account, asset)).or_default() += i128::from(hold.0);
                let found = self.open_orders.find(&self.books, order.account, &order.id);
                let indexed_here = found.is_some_and(|handle| {
                    handle.instrument.index() == index
                        && std::ptr::eq(book.order(handle.slot), order)
                });
                if !indexed_here {
                    problem = Some(format!("order {} is not indexed where it rests", order.id));
                }
                if !instrument.is_future() && (order.offset != Offset::Open || order.good_for_day) {
                    problem = Some(format!("spot order {} has futures terms", order.id));
                }
            };
            for side in [Side::Buy, Side::Sell] {
                // Each order's index entry is a cache miss once the index outgrows the
                // caches (a restored snapshot checks a million orders): its probe is
                // hinted `CHECK_LAG` orders before the order is checked.
                let mut due: [Option<&RestingOrder>; CHECK_LAG] = [None; CHECK_LAG];
                let mut visited = 0usize;
                book.for_each_order(side, |order| {
                    self.open_orders.prefetch_home(order.account, &order.id);
                    if let Some(order) = due[visited % CHECK_LAG].replace(order) {
                        check(order);
                    }
                    visited += 1;
                });
                for lane in visited..visited + CHECK_LAG {
                    if let Some(order) = due[lane % CHECK_LAG].take() {
                        check(order);
                    }
                }
            }
            if let Some(problem) = problem {
                return Err(problem);
            }
        }
        if resting_orders != self.open_orders.len() {
            return Err(format!(
                "{resting_orders} orders rest on the books but {} are indexed",
                self.open_orders.len()
            ));
        }
        Ok(expected_held)
    }
}

/// What spot instruments and futures contracts define alike: tick, lot and quantity
/// bounds in engine units, checked as the replay format's instrument rules say.
struct ContractTerms {
    price_decimals: u32,
    qty_decimals: u32,
    tick: Price,
    lot: Qty,
    min_qty: i128,
    max_qty: i128,
}

impl ContractTerms {
    /// `[tick, lot, min_qty, max_qty]` and the market band, or `None` when one of them
    /// is invalid: not positive, bounds not lot multiples or reversed, band out of range.
    fn build(values: [Decimal; 4], market_band_bps: i64) -> Option<ContractTerms> {
        if !values.iter().all(|value| value.is_positive())
            || !(0..=MARKET_BAND_BPS_MAX).contains(&market_band_bps)
        {
            return None;
        }
        let [tick, lot, min_qty, max_qty] = values;
        let price_decimals = tick.scale();
        let qty_decimals = lot.scale();
        let tick = i64::try_from(tick.to_units(price_decimals)?).ok()?;
        let lot = i64::try_from(lot.to_units(qty_decimals)?).ok()?;
        let min_qty = min_qty.to_units(qty_decimals)?;
        let max_qty = max_qty.to_units(qty_decimals)?;
        let lot_units = i128::from(lot);
        if min_qty % lot_units != 0 || max_qty % lot_units != 0 || min_qty > max_qty {
            return None;
        }
        Some(ContractTerms {
            price_decimals,
            qty_decimals,
            tick: Price(tick),
            lot: Qty(lot),
            min_qty,
            max_qty,
        })
    }
}

/// Whether a handler already emitted its `accepted` event (it must come before the
/// events of acting) or leaves it to `apply`.
enum Accepted {
    Silently,
    Emitted,
}

/// What applying one command did beyond its events, from what its handler held: so
/// that whoever applies commands (the engine's applier, market data) never looks the
/// command's order up again. Small and `Copy`: no allocation per command.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Applied {
    /// The exchange's id of the order the command acted on, for the gateways'
    /// acknowledgements: an accepted `order`'s (its `OrderId::of(seq)`), or the order
    /// an accepted `cancel` or `amend` named. Only a `Venue` that keeps the order
    /// activity knows it (`Venue::apply`); `Exchange::apply` leaves it `None`, as does
    /// every rejected command and every other command.
    pub order_id: Option<OrderId>,
    /// Where an accepted `order` rests after its command (after any trades it made);
    /// `None` when it did not rest, and for every other command.
    pub rested: Option<OrderHandle>,
    /// An accepted `halt` (`true`) or `resume` (`false`) of this instrument: set only
    /// by `Venue::apply` (the exchange rejects venue commands).
    pub halted: Option<(InstrumentId, bool)>,
    /// The instrument an accepted `instrument` or `future` declared; `None` for every
    /// other command.
    pub declared: Option<InstrumentId>,
}

/// The spot account kind's side of matching: settles each fill, releases what
/// finished makers still hold, and reports trades and finished makers as events.
/// `SPENDS_AMOUNT`: the taker is a spend-amount buy, whose hold falls by exactly what
/// each fill pays (as a buy limited at the fill's price); otherwise by its limit times
/// the quantity, the difference going back to available. A constant, so that ordinary
/// takers pay nothing for the other kind.
struct SpotFills<'a, const SPENDS_AMOUNT: bool> {
    rules: &'a SpotRules,
    ledger: &'a mut Ledger,
    open_orders: &'a mut OrderIndex,
    events: &'a mut Vec<Event>,
    seq: Seq,
    instrument: InstrumentId,
    taker: &'a Taker,
    taker_id: &'a ClientOrderId,
}

impl<const SPENDS_AMOUNT: bool> MatchHandler for SpotFills<'_, SPENDS_AMOUNT> {
    fn on_trade(&mut self, _slot: u32, maker: &RestingOrder, price: Price, qty: Qty) {
        let maker_party = FillParty { account: maker.account, limit: maker.price, is_taker: false };
        let taker_limit = if SPENDS_AMOUNT { price } else { self.taker.limit };
        let taker_party =
            FillParty { account: self.taker.account, limit: taker_limit, is_taker: true };
        let (maker_fee, taker_fee) = match self.taker.side {
            Side::Buy => {
                let (buyer_fee, seller_fee) =
                    self.rules.settle_fill(self.ledger, taker_party, maker_party, price, qty);
                (seller_fee, buyer_fee)
            }
            Side::Sell => self.rules.settle_fill(self.ledger, maker_party, taker_party, price, qty),
        };
        let parties = (maker, self.taker, self.taker_id);
        let money = [(maker_fee, taker_fee), (Amount::ZERO, Amount::ZERO)];
        self.events.push(trade_event((self.seq, self.instrument), parties, price, qty, money));
    }

    fn on_maker_done(&mut self, slot: u32, maker: &RestingOrder, reason: DoneReason) {
        if !maker.remaining.is_zero() {
            let hold = self.rules.resting_hold(maker.side, maker.price, maker.remaining);
            self.ledger.release(maker.account, self.rules.hold_asset(maker.side), hold);
        }
        maker_left(self.open_orders, self.events, (self.seq, self.instrument), slot, maker, reason);
    }
}

/// The `trade` event of a fill of `taker` against `maker` at `price` for `qty`, with
/// `[(maker_fee, taker_fee), (maker_pnl, taker_pnl)]`: what both account kinds report.
fn trade_event(
    (seq, instrument): (Seq, InstrumentId),
    (maker, taker, taker_id): (&RestingOrder, &Taker, &ClientOrderId),
    price: Price,
    qty: Qty,
    [(maker_fee, taker_fee), (maker_pnl, taker_pnl)]: [(Amount, Amount); 2],
) -> Event {
    Event::Trade(TradeEvent {
        seq,
        instrument,
        price,
        qty,
        taker_side: taker.side,
        maker_account: maker.account,
        maker_id: maker.id.clone(),
        taker_account: taker.account,
        taker_id: taker_id.clone(),
        maker_fee,
        taker_fee,
        maker_pnl,
        taker_pnl,
    })
}

/// A maker that left the book while matching (filled, or stp) after its release: out of
/// the index, and its `done`.
fn maker_left(
    open_orders: &mut OrderIndex,
    events: &mut Vec<Event>,
    (seq, instrument): (Seq, InstrumentId),
    slot: u32,
    maker: &RestingOrder,
    reason: DoneReason,
) {
    open_orders.remove(maker.account, &maker.id, OrderHandle { instrument, slot });
    events.push(Event::Done {
        seq,
        instrument,
        account: maker.account,
        id: maker.id.clone(),
        reason,
        filled: maker.filled,
    });
}

/// What is left of an order that finishes, as its release needs it.
#[derive(Clone, Copy)]
struct Remains {
    account: AccountId,
    side: Side,
    price: Price,
    offset: Offset,
    remaining: Qty,
}

/// Releases what a finishing order still holds (spot, futures open) or reserves
/// (futures close).
fn release_remaining(
    instrument: &Instrument,
    positions: Option<&mut Positions>,
    ledger: &mut Ledger,
    remains: Remains,
) {
    let Remains { account, side, price, offset, remaining } = remains;
    match positions {
        Some(positions) if offset.is_close() => {
            positions.unreserve(account, PositionSide::of_order(side, offset), offset, remaining);
        }
        _ => {
            let (asset, hold) = instrument.resting_hold(side, price, offset, remaining);
            ledger.release(account, asset, hold);
        }
    }
}

/// The futures account kind's side of matching: settles each fill against the two
/// parties' positions and balances, releases what finished makers still hold or
/// reserve, and reports trades (with each side's realised profit) and finished makers.
struct FuturesFills<'a> {
    rules: &'a FutureRules,
    positions: &'a mut Positions,
    ledger: &'a mut Ledger,
    open_orders: &'a mut OrderIndex,
    events: &'a mut Vec<Event>,
    seq: Seq,
    instrument: InstrumentId,
    taker: &'a Taker,
    taker_id: &'a ClientOrderId,
    taker_offset: Offset,
    /// What the taker closes (`None`: it opens).
    taker_takes: Option<Takes>,
    /// Whether the taker reserved what it closes (a liquidation does not).
    taker_reserved: bool,
}

/// One party of a futures fill.
#[derive(Clone, Copy)]
struct FuturesParty {
    account: AccountId,
    side: Side,
    offset: Offset,
    /// What it closes (`None`: it opens).
    takes: Option<Takes>,
    reserved: bool,
    is_taker: bool,
}

impl FuturesFills<'_> {
    /// Moves one party's money and position for a fill of `qty` at `price`; returns
    /// its fee and realised profit.
    fn settle_party(&mut self, party: FuturesParty, price: Price, qty: Qty) -> (Amount, Amount) {
        let rules = self.rules;
        let lots = rules.lots(qty);
        let fee_per_lot = if party.is_taker { rules.taker_fee } else { rules.maker_fee };
        let fee = Amount(lots * fee_per_lot.0);
        let margin = Amount(lots * rules.margin.0);
        let position_side = PositionSide::of_order(party.side, party.offset);
        // One lookup of the account's position for the whole fill.
        let position = self.positions.index(party.account);
        match party.takes {
            None => {
                // The hold of these lots falls by margin + taker fee; the margin stays
                // held as the position's, the rest (the taker fee) comes back less the
                // fee paid.
                let fee_hold = Amount(lots * rules.taker_fee.0);
                self.ledger.release(party.account, rules.settle, fee_hold);
                self.ledger.pay_fee(party.account, rules.settle, fee);
                self.positions.open_at(position, position_side, price, qty);
                self.positions.record_fill_at(position, Amount::ZERO, fee);
                (fee, Amount::ZERO)
            }
            Some(takes) => {
                let basis = self.positions.close_at(position, position_side, takes, qty);
                if party.reserved {
                    self.positions.unreserve_at(position, position_side, party.offset, qty);
                }
                let profit = rules.profit(position_side, price, qty, basis);
                self.ledger.release(party.account, rules.settle, margin);
                self.ledger.credit_profit(
                    party.account,
                    rules.settle,
                    profit,
                    BalanceMove::RealisedProfit,
                );
                self.ledger.pay_fee(party.account, rules.settle, fee);
                self.positions.record_fill_at(position, profit, fee);
                (fee, profit)
            }
        }
    }
}

impl MatchHandler for FuturesFills<'_> {
    fn on_trade(&mut self, _slot: u32, maker: &RestingOrder, price: Price, qty: Qty) {
        let maker_party = FuturesParty {
            account: maker.account,
            side: maker.side,
            offset: maker.offset,
            takes: self.rules.takes(maker.offset),
            reserved: true,
            is_taker: false,
        };
        let taker_party = FuturesParty {
            account: self.taker.account,
            side: self.taker.side,
            offset: self.taker_offset,
            takes: self.taker_takes,
            reserved: self.taker_reserved,
            is_taker: true,
        };
        self.positions.set_mark_price(price);
        self.ledger.begin_fill();
        let (maker_fee, maker_pnl) = self.settle_party(maker_party, price, qty);
        let (taker_fee, taker_pnl) = self.settle_party(taker_party, price, qty);
        self.ledger.end_fill();
        let parties = (maker, self.taker, self.taker_id);
        let money = [(maker_fee, taker_fee), (maker_pnl, taker_pnl)];
        self.events.push(trade_event((self.seq, self.instrument), parties, price, qty, money));
    }

    fn on_maker_done(&mut self, slot: u32, maker: &RestingOrder, reason: DoneReason) {
        if !maker.remaining.is_zero() {
            let position_side = PositionSide::of_order(maker.side, maker.offset);
            match maker.offset {
                Offset::Open => {
                    let hold = self.rules.resting_hold(Offset::Open, maker.remaining);
                    self.ledger.release(maker.account, self.rules.settle, hold);
                }
                Offset::Close | Offset::CloseToday => self.positions.unreserve(
                    maker.account,
                    position_side,
                    maker.offset,
                    maker.remaining,
                ),
            }
        }
        maker_left(self.open_orders, self.events, (self.seq, self.instrument), slot, maker, reason);
    }
}
