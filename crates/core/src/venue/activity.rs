//! What a running venue remembers about orders beyond the open ones: every order's
//! record (open, and the latest finished ones of each account), each account's latest
//! fills, and the indexes that find a record by order id or by (account, client id).
//!
//! Records live in a slab (no allocation per order once the pool is warm). Each
//! account threads its open records (ascending order id) through the records as a
//! doubly linked list, and keeps its finished ones (oldest finished first) as a queue of
//! slots, so finishing an order and forgetting the oldest finished one are O(1). The
//! indexes are hash tables of slots, each entry with its key's hash (the order id
//! itself for the order-id table), so growing a table reads no record; a client key is
//! confirmed against the record it finds. Open and finished
//! records have separate client-key tables: everything the events refer to (trades,
//! `done`s, amends) is an open order, found in a table as small as the open orders
//! (which stays in the caches), while the much larger table of remembered finished ids
//! is probed once per new order.
//!
//! Everything here is deterministic and depends only on the commands applied: the
//! limits are constants, not settings, because which finished client ids are still
//! remembered decides which orders the venue rejects.

use std::collections::VecDeque;
use std::hash::Hasher;

use hashbrown::hash_table::Entry;
use hashbrown::HashTable;
use rustc_hash::FxHasher;

use crate::command::{Offset, Side, StpMode, TimeInForce};
use crate::event::DoneReason;
use crate::exchange::Exchange;
use crate::ids::{
    short_bytes_equal, AccountId, AssetId, ClientOrderId, InstrumentId, OrderId, Seq, TimestampNs,
};
use crate::num::{Amount, Price, Qty};
use crate::slab::Slab;

/// Finished orders remembered per account (oldest forgotten first); a constant, not a
/// setting, because it decides which reused client ids are rejected, so it must be the
/// same on every replay.
pub const FINISHED_ORDERS_KEPT: usize = 1024;
/// Fills remembered per account (oldest forgotten first).
pub const FILLS_KEPT: usize = 1024;

/// Marks "no slot" in the list links.
const NIL: u32 = u32::MAX;

/// Where an order is in its life.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum OrderStatus {
    Open,
    Filled,
    Canceled,
    Expired,
    SelfTradePrevented,
}

impl OrderStatus {
    pub const ALL: [OrderStatus; 5] = [
        OrderStatus::Open,
        OrderStatus::Filled,
        OrderStatus::Canceled,
        OrderStatus::Expired,
        OrderStatus::SelfTradePrevented,
    ];

    /// The stable code: `open`, or the `done` reason that finished the order.
    pub fn code(self) -> &'static str {
        match self {
            OrderStatus::Open => "open",
            OrderStatus::Filled => "filled",
            OrderStatus::Canceled => "canceled",
            OrderStatus::Expired => "expired",
            OrderStatus::SelfTradePrevented => "stp",
        }
    }

    pub fn is_open(self) -> bool {
        self == OrderStatus::Open
    }
}

impl From<DoneReason> for OrderStatus {
    fn from(reason: DoneReason) -> OrderStatus {
        match reason {
            DoneReason::Filled => OrderStatus::Filled,
            DoneReason::Canceled => OrderStatus::Canceled,
            DoneReason::Expired => OrderStatus::Expired,
            DoneReason::SelfTradePrevented => OrderStatus::SelfTradePrevented,
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum OrderKind {
    Limit,
    Market,
}

impl OrderKind {
    pub fn code(self) -> &'static str {
        match self {
            OrderKind::Limit => "limit",
            OrderKind::Market => "market",
        }
    }
}

/// Which side of a trade an order was on.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Liquidity {
    /// The resting order.
    Maker,
    /// The incoming (or re-placed) order.
    Taker,
}

impl Liquidity {
    pub fn code(self) -> &'static str {
        match self {
            Liquidity::Maker => "maker",
            Liquidity::Taker => "taker",
        }
    }
}

/// One order as the venue remembers it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OrderRecord {
    /// The seq of the `order` command that created it (the exchange's order id). Orders
    /// rebuilt from an exchange's books (`Venue::new`) get stand-ins: see there.
    pub order_id: OrderId,
    pub account: AccountId,
    pub client_id: ClientOrderId,
    pub instrument: InstrumentId,
    pub side: Side,
    pub kind: OrderKind,
    /// As the exchange applies it: a market order's is `ImmediateOrCancel` (or
    /// `FillOrKill`), never `GoodTillCancel`; `GoodForDay` only on a futures contract
    /// (on spot it is `GoodTillCancel`).
    pub time_in_force: TimeInForce,
    /// Futures: what the order does to the position (`Open` on spot, which ignores it).
    pub offset: Offset,
    /// As the exchange applies it: always `false` for a market order.
    pub post_only: bool,
    pub stp: StpMode,
    /// The limit price (the current one after amends), in price units; `None` for a
    /// market order.
    pub price: Option<Price>,
    /// The quantity as submitted, in quantity units (amends change `remaining` only).
    /// A spend-amount buy (`quote_qty`) submits none: its `qty` is what it bought, once
    /// it is done (it never rests, so it is done by the end of its command).
    pub qty: Qty,
    /// A spend-amount buy's `quote_qty` as submitted, in the quote asset's smallest
    /// units (`orders.md`, "Market buys by amount to spend"); `None` for every other
    /// order.
    pub quote_qty: Option<Amount>,
    /// Open quantity now; 0 once finished.
    pub remaining: Qty,
    /// Filled over the order's whole life.
    pub filled: Qty,
    pub status: OrderStatus,
    /// `ts` of the creating command (the exchange's time after it).
    pub created_ns: TimestampNs,
    /// `ts` of the last command that changed the order.
    pub updated_ns: TimestampNs,
}

impl OrderRecord {
    /// What fills a slot that holds no record.
    fn vacant() -> OrderRecord {
        OrderRecord {
            order_id: OrderId(0),
            account: AccountId(0),
            client_id: ClientOrderId::default(),
            instrument: InstrumentId(0),
            side: Side::Buy,
            kind: OrderKind::Limit,
            time_in_force: TimeInForce::GoodTillCancel,
            offset: Offset::Open,
            post_only: false,
            stp: StpMode::CancelTaker,
            price: None,
            qty: Qty::ZERO,
            quote_qty: None,
            remaining: Qty::ZERO,
            filled: Qty::ZERO,
            status: OrderStatus::Open,
            created_ns: TimestampNs::ZERO,
            updated_ns: TimestampNs::ZERO,
        }
    }
}

/// One side of one trade, as the account on that side saw it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Fill {
    /// The command whose execution produced the trade.
    pub seq: Seq,
    /// The trade's position among that command's trades: `(seq, trade_index)`
    /// identifies a trade (both sides of a self-trade share it).
    pub trade_index: u32,
    pub order_id: OrderId,
    pub client_id: ClientOrderId,
    pub instrument: InstrumentId,
    /// This account's side.
    pub side: Side,
    pub price: Price,
    pub qty: Qty,
    /// In `fee_asset`'s smallest units.
    pub fee: Amount,
    /// The asset this account received (base for the buyer, quote for the seller).
    pub fee_asset: AssetId,
    pub liquidity: Liquidity,
    pub ts_ns: TimestampNs,
}

impl Fill {
    /// The order of fills in an account's queue: by trade, the maker's side of a
    /// self-trade before the taker's.
    pub(crate) fn position(&self) -> (Seq, u32, Liquidity) {
        (self.seq, self.trade_index, self.liquidity)
    }
}

/// A record in the slab with its open-list links and the hash of its client key.
#[derive(Clone)]
struct Slot {
    record: OrderRecord,
    client_hash: u64,
    previous: u32,
    next: u32,
}

/// A doubly linked list of slots.
#[derive(Clone, Copy, Debug)]
struct List {
    head: u32,
    tail: u32,
    len: u32,
}

impl Default for List {
    fn default() -> Self {
        List { head: NIL, tail: NIL, len: 0 }
    }
}

#[derive(Default)]
struct AccountActivity {
    /// Open records, ascending order id.
    open: List,
    /// Slots of finished records, oldest finished first; at most `FINISHED_ORDERS_KEPT`.
    finished: VecDeque<u32>,
    /// Oldest first; at most `FILLS_KEPT`.
    fills: VecDeque<Fill>,
}

impl AccountActivity {
    fn is_empty(&self) -> bool {
        self.open.len == 0 && self.finished.is_empty() && self.fills.is_empty()
    }
}

/// Where a record is kept: an account's open list or its finished queue.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum ListKind {
    Open,
    Finished,
}

/// Every order's record (open, and the latest finished ones of each account), each
/// account's latest fills, and the indexes over them. Kept by a `Venue`.
pub struct Activity {
    records: Slab<Slot>,
    /// Slots by order id. Each table entry carries its key's hash (here the order id
    /// itself), so probing and growing a table read no record.
    by_id: HashTable<Keyed>,
    /// Slots of open records by (account, client id).
    open_by_client: HashTable<Keyed>,
    /// Slots of remembered finished records by (account, client id). A key is in at most
    /// one of the two tables, once (an open id is refused by the exchange, a remembered
    /// finished one by the venue).
    finished_by_client: HashTable<Keyed>,
    /// By account id; accounts beyond the end have no activity.
    accounts: Vec<AccountActivity>,
}

/// A table entry: the order id (`by_id`) or the client key's hash (the client-key
/// tables), and the record's slot.
#[derive(Clone, Copy)]
struct Keyed {
    key: u64,
    slot: u32,
}

#[inline]
fn client_hash(account: AccountId, client_id: &str) -> u64 {
    let mut hasher = FxHasher::default();
    hasher.write_u32(account.0);
    hasher.write(client_id.as_bytes());
    hasher.finish()
}

/// The hash of an order id for `by_id`. Order ids are seqs, so orders placed one after
/// another have close ids: the low bits (where the table's probe starts) are the id
/// itself, so that their entries share the table's cache lines, and the top seven bits
/// (the table's tag) a mix of the id.
#[inline]
fn id_hash(order_id: OrderId) -> u64 {
    const LOW: u64 = (1 << 57) - 1;
    let order_id = order_id.0;
    (order_id & LOW) | (order_id.wrapping_mul(0x9e37_79b9_7f4a_7c15) & !LOW)
}

#[inline]
fn has_client_key(record: &OrderRecord, account: AccountId, client_id: &str) -> bool {
    record.account == account
        && short_bytes_equal(record.client_id.as_bytes(), client_id.as_bytes())
}

/// Records of an account's open list or finished queue, in order.
pub struct Records<'a> {
    records: &'a Slab<Slot>,
    walk: Walk<'a>,
}

enum Walk<'a> {
    /// The open list: the next slot, and the records left (which bounds the walk).
    List {
        next: u32,
        left: u32,
    },
    Queue(std::collections::vec_deque::Iter<'a, u32>),
}

impl<'a> Iterator for Records<'a> {
    type Item = &'a OrderRecord;

    #[inline]
    fn next(&mut self) -> Option<&'a OrderRecord> {
        match &mut self.walk {
            Walk::List { next, left } => {
                if *left == 0 || *next == NIL {
                    return None;
                }
                let slot = self.records.get(*next);
                *next = slot.next;
                *left -= 1;
                Some(&slot.record)
            }
            Walk::Queue(slots) => slots.next().map(|&slot| &self.records.get(slot).record),
        }
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        match &self.walk {
            Walk::List { left, .. } => (0, Some(*left as usize)),
            Walk::Queue(slots) => slots.size_hint(),
        }
    }
}

impl Activity {
    /// An empty activity (a `Venue` makes its own: `Venue::new`).
    pub(crate) fn new() -> Activity {
        Activity {
            records: Slab::with_capacity(
                1,
                Slot { record: OrderRecord::vacant(), client_hash: 0, previous: NIL, next: NIL },
            ),
            by_id: HashTable::new(),
            open_by_client: HashTable::new(),
            finished_by_client: HashTable::new(),
            accounts: Vec::new(),
        }
    }

    // ----- queries -----

    /// The record of order `order_id`, open or remembered.
    pub fn order(&self, order_id: OrderId) -> Option<&OrderRecord> {
        self.slot_by_id(order_id).map(|slot| &self.records.get(slot).record)
    }

    /// The record of `account`'s order `client_id`: its open order, or the remembered
    /// finished one (a key names at most one of them).
    pub fn order_by_client(&self, account: AccountId, client_id: &str) -> Option<&OrderRecord> {
        self.slot_by_client(account, client_id).map(|slot| &self.records.get(slot).record)
    }

    /// `account`'s open orders, ascending order id.
    pub fn open_orders(&self, account: AccountId) -> Records<'_> {
        let list = self.accounts.get(account.index()).map(|activity| activity.open);
        let list = list.unwrap_or_default();
        Records { records: &self.records, walk: Walk::List { next: list.head, left: list.len } }
    }

    /// `account`'s remembered finished orders, oldest finished first.
    pub fn finished_orders(&self, account: AccountId) -> Records<'_> {
        const NONE: &VecDeque<u32> = &VecDeque::new();
        let queue = self.accounts.get(account.index()).map_or(NONE, |activity| &activity.finished);
        Records { records: &self.records, walk: Walk::Queue(queue.iter()) }
    }

    /// `account`'s remembered fills, oldest first.
    pub fn fills(&self, account: AccountId) -> impl Iterator<Item = &Fill> + '_ {
        self.accounts.get(account.index()).into_iter().flat_map(|activity| activity.fills.iter())
    }

    pub fn open_order_count(&self, account: AccountId) -> usize {
        self.accounts.get(account.index()).map_or(0, |activity| activity.open.len as usize)
    }

    pub fn finished_order_count(&self, account: AccountId) -> usize {
        self.accounts.get(account.index()).map_or(0, |activity| activity.finished.len())
    }

    pub fn fill_count(&self, account: AccountId) -> usize {
        self.accounts.get(account.index()).map_or(0, |activity| activity.fills.len())
    }

    /// Records held: open and remembered finished, all accounts.
    pub fn order_count(&self) -> usize {
        self.records.len()
    }

    /// One more than the highest account id with any activity (0 if none): the
    /// accounts a snapshot must visit.
    pub(crate) fn account_bound(&self) -> usize {
        self.accounts.iter().rposition(|activity| !activity.is_empty()).map_or(0, |last| last + 1)
    }

    pub(crate) fn has_activity(&self, account: AccountId) -> bool {
        self.accounts.get(account.index()).is_some_and(|activity| !activity.is_empty())
    }

    #[inline]
    fn slot_by_id(&self, order_id: OrderId) -> Option<u32> {
        self.by_id.find(id_hash(order_id), |entry| entry.key == order_id.0).map(|entry| entry.slot)
    }

    /// The slot of (`account`, `client_id`) in one client-key table.
    #[inline]
    fn slot_in(
        &self,
        table: &HashTable<Keyed>,
        hash: u64,
        account: AccountId,
        client_id: &str,
    ) -> Option<u32> {
        let records = &self.records;
        table
            .find(hash, |entry| {
                entry.key == hash
                    && has_client_key(&records.get(entry.slot).record, account, client_id)
            })
            .map(|entry| entry.slot)
    }

    /// The slot of (`account`, `client_id`), open or remembered finished.
    #[inline]
    fn slot_by_client(&self, account: AccountId, client_id: &str) -> Option<u32> {
        let hash = client_hash(account, client_id);
        self.slot_in(&self.open_by_client, hash, account, client_id)
            .or_else(|| self.slot_in(&self.finished_by_client, hash, account, client_id))
    }

    /// Whether `account`'s client id names a remembered finished order (which the venue
    /// refuses to reuse).
    #[inline]
    pub(crate) fn is_finished_id(&self, account: AccountId, client_id: &str) -> bool {
        let hash = client_hash(account, client_id);
        self.slot_in(&self.finished_by_client, hash, account, client_id).is_some()
    }

    // ----- changes -----

    /// Adds `record` at the back of its account's open list or finished queue and
    /// indexes it; refuses (and changes nothing) when its order id or its client key is
    /// taken. Restoring a finished record forgets nothing: the caller keeps within
    /// `FINISHED_ORDERS_KEPT`.
    pub(crate) fn insert(
        &mut self,
        record: OrderRecord,
        list: ListKind,
    ) -> Result<u32, &'static str> {
        let hash = client_hash(record.account, &record.client_id);
        let (table, other) = match list {
            ListKind::Open => (&self.open_by_client, &self.finished_by_client),
            ListKind::Finished => (&self.finished_by_client, &self.open_by_client),
        };
        if self.slot_in(other, hash, record.account, &record.client_id).is_some()
            || self.slot_in(table, hash, record.account, &record.client_id).is_some()
        {
            return Err("an account has two orders with one client id");
        }
        let Activity { records, by_id, open_by_client, finished_by_client, accounts } = self;
        let order_id = record.order_id;
        let id_entry = by_id.entry(
            id_hash(order_id),
            |entry| entry.key == order_id.0,
            |entry| id_hash(OrderId(entry.key)),
        );
        let Entry::Vacant(id_entry) = id_entry else {
            return Err("two orders with one order id");
        };
        let account = record.account;
        let slot = records.insert(Slot { record, client_hash: hash, previous: NIL, next: NIL });
        id_entry.insert(Keyed { key: order_id.0, slot });
        let keyed = Keyed { key: hash, slot };
        let activity = account_mut(accounts, account);
        match list {
            ListKind::Open => {
                open_by_client.insert_unique(hash, keyed, |entry| entry.key);
                push_back(records, &mut activity.open, slot);
            }
            ListKind::Finished => {
                finished_by_client.insert_unique(hash, keyed, |entry| entry.key);
                activity.finished.push_back(slot);
            }
        }
        Ok(slot)
    }

    /// Appends a fill to `account`'s queue, forgetting the oldest beyond `FILLS_KEPT`.
    pub(crate) fn push_fill(&mut self, account: AccountId, fill: Fill) {
        let fills = &mut account_mut(&mut self.accounts, account).fills;
        if fills.len() >= FILLS_KEPT {
            fills.pop_front();
        }
        fills.push_back(fill);
    }

    /// The open record of (`account`, `client_id`): first among `cached` slots (the
    /// orders the command in progress touched last), then by the index.
    #[inline]
    fn find_open(&self, cached: [u32; 2], account: AccountId, client_id: &str) -> Option<u32> {
        for slot in cached {
            if slot != NIL {
                let record = &self.records.get(slot).record;
                if record.status.is_open() && has_client_key(record, account, client_id) {
                    return Some(slot);
                }
            }
        }
        self.slot_in(&self.open_by_client, client_hash(account, client_id), account, client_id)
    }

    /// Records a trade's quantity against an open order; returns what its fill needs.
    #[inline]
    fn fill_order(&mut self, slot: u32, qty: Qty, now: TimestampNs) -> (OrderId, AccountId) {
        let record = &mut self.records.get_mut(slot).record;
        record.filled = Qty(record.filled.0.saturating_add(qty.0));
        // (A spend-amount buy starts with nothing remaining: it stays at zero.)
        record.remaining = Qty(record.remaining.0.saturating_sub(qty.0).max(0));
        record.updated_ns = now;
        (record.order_id, record.account)
    }

    /// Moves an open order to its account's finished records, forgetting the oldest
    /// finished one beyond `FINISHED_ORDERS_KEPT`.
    fn finish(&mut self, slot: u32, reason: DoneReason, filled: Qty, now: TimestampNs) {
        let entry = self.records.get_mut(slot);
        let record = &mut entry.record;
        record.status = reason.into();
        record.remaining = Qty::ZERO;
        record.filled = filled;
        if record.quote_qty.is_some() {
            record.qty = filled;
        }
        record.updated_ns = now;
        let (account, hash) = (record.account, entry.client_hash);
        if let Ok(entry) = self.open_by_client.find_entry(hash, |entry| entry.slot == slot) {
            entry.remove();
        }
        let activity = &mut self.accounts[account.index()];
        unlink(&mut self.records, &mut activity.open, slot);
        if activity.finished.len() >= FINISHED_ORDERS_KEPT {
            if let Some(oldest) = activity.finished.pop_front() {
                self.forget(oldest);
            }
        }
        self.finished_by_client.insert_unique(hash, Keyed { key: hash, slot }, |entry| entry.key);
        self.accounts[account.index()].finished.push_back(slot);
    }

    /// Drops a finished record that is no longer queued: its index entries, then its
    /// slot.
    fn forget(&mut self, slot: u32) {
        let Slot { record, client_hash, .. } = self.records.get(slot);
        let order_id = record.order_id;
        if let Ok(entry) =
            self.finished_by_client.find_entry(*client_hash, |entry| entry.slot == slot)
        {
            entry.remove();
        }
        if let Ok(entry) = self.by_id.find_entry(id_hash(order_id), |entry| entry.slot == slot) {
            entry.remove();
        }
        // A long client id's heap copy is released now, not when the slot is reused.
        self.records.get_mut(slot).record.client_id = ClientOrderId::default();
        self.records.remove(slot);
    }

    /// Follows one applied command's events: `seq` as applied, `order` the `order`
    /// command with the account it resolved to (if it was one), `is_liquidation` whether
    /// it was a `liquidate`, `events` the events the exchange appended for it. Returns
    /// the id of the order the command acted on: an accepted `order`'s own, or the order
    /// an accepted `cancel` or `amend` named (the first its events name after its
    /// `accepted`).
    pub(crate) fn follow(
        &mut self,
        exchange: &Exchange,
        seq: Seq,
        order: Option<NewOrder<'_, '_>>,
        is_liquidation: bool,
        events: &[crate::event::Event],
    ) -> Option<OrderId> {
        use crate::event::Event;
        let now = exchange.time_ns();
        // The order the command placed or amended, and the last maker met.
        let mut taker = NIL;
        let mut maker = NIL;
        let mut trade_index = 0u32;
        // Whether the command was accepted naming one order (`order`, `cancel`,
        // `amend`), and that order's id once known.
        let mut names_order = false;
        let mut acted_on = None;
        // A `liquidate` (its `accepted` names an account and no order): its market
        // orders have no records (they never rest, and two share the command's seq), but
        // their fills are kept, under the command's seq as order id.
        let liquidation = is_liquidation;
        for event in events {
            match event {
                Event::Accepted { account: Some(_), .. } if !liquidation => {
                    names_order = true;
                    if let Some(order) = &order {
                        let client_id = ClientOrderId::new(&order.command.id);
                        taker = self.open_new(exchange, seq, order, client_id, now);
                        acted_on = Some(OrderId::of(seq));
                    }
                }
                Event::Trade(trade) => {
                    let instrument = exchange.instrument(trade.instrument);
                    let maker_side = trade.taker_side.opposite();
                    let sides = [
                        (Liquidity::Maker, trade.maker_account, &trade.maker_id, maker_side),
                        (Liquidity::Taker, trade.taker_account, &trade.taker_id, trade.taker_side),
                    ];
                    for (liquidity, account, client_id, side) in sides {
                        let order_id = match self.find_open([taker, maker], account, client_id) {
                            Some(slot) => {
                                match liquidity {
                                    Liquidity::Maker => maker = slot,
                                    Liquidity::Taker => taker = slot,
                                }
                                self.fill_order(slot, trade.qty, now).0
                            }
                            None if liquidation && liquidity == Liquidity::Taker => {
                                OrderId::of(seq)
                            }
                            None => {
                                debug_assert!(false, "a trade of an order without a record");
                                continue;
                            }
                        };
                        let fee = match liquidity {
                            Liquidity::Maker => trade.maker_fee,
                            Liquidity::Taker => trade.taker_fee,
                        };
                        let fee_asset = instrument.fee_asset(side);
                        self.push_fill(
                            account,
                            Fill {
                                seq,
                                trade_index,
                                order_id,
                                client_id: client_id.clone(),
                                instrument: trade.instrument,
                                side,
                                price: trade.price,
                                qty: trade.qty,
                                fee,
                                fee_asset,
                                liquidity,
                                ts_ns: now,
                            },
                        );
                    }
                    trade_index = trade_index.wrapping_add(1);
                }
                Event::Done { account, id, reason, filled, .. } => {
                    match self.find_open([taker, maker], *account, id) {
                        Some(slot) => {
                            if names_order && acted_on.is_none() {
                                acted_on = Some(self.records.get(slot).record.order_id);
                            }
                            self.finish(slot, *reason, *filled, now)
                        }
                        None => debug_assert!(liquidation, "a done order without an open record"),
                    }
                }
                Event::Amended { account, id, price, qty, .. } => {
                    match self.find_open([taker, maker], *account, id) {
                        Some(slot) => {
                            let record = &mut self.records.get_mut(slot).record;
                            if names_order && acted_on.is_none() {
                                acted_on = Some(record.order_id);
                            }
                            record.price = Some(*price);
                            record.remaining = *qty;
                            record.updated_ns = now;
                            taker = slot;
                        }
                        None => debug_assert!(false, "an amended order without an open record"),
                    }
                }
                Event::Accepted { .. } | Event::Rejected { .. } | Event::Settled(_) => {}
            }
        }
        acted_on
    }

    /// Creates the record of an accepted `order` command; returns its slot (`NIL` if it
    /// could not be made, which a consistent venue never sees).
    fn open_new(
        &mut self,
        exchange: &Exchange,
        seq: Seq,
        order: &NewOrder<'_, '_>,
        client_id: ClientOrderId,
        now: TimestampNs,
    ) -> u32 {
        use crate::command::OrderType;
        let command = order.command;
        let (Some(account), Some(instrument_id)) = (
            order.account.or_else(|| exchange.resolve(&command.account)),
            exchange.find_instrument(&command.symbol),
        ) else {
            debug_assert!(false, "an accepted order names no account or instrument");
            return NIL;
        };
        let instrument = exchange.instrument(instrument_id);
        // The exchange accepted the order, so these conversions succeeded there.
        let (kind, price, post_only) = match command.order_type {
            OrderType::Limit { price } => {
                (OrderKind::Limit, instrument.validate_price(price).ok(), command.post_only)
            }
            OrderType::Market => (OrderKind::Market, None, false),
        };
        let time_in_force =
            command.time_in_force.applied(command.order_type, instrument.is_future());
        // An accepted order names `qty` alone, or (a spend-amount buy: a spot buy whose
        // amount fits the quote asset) `quote_qty` alone.
        let (qty, quote_qty) = match command.size.qty_alone() {
            Some(qty) => (qty.to_units(instrument.qty_decimals), None),
            None => {
                let quote_qty = command.size.quote_qty().zip(instrument.spot()).and_then(
                    |(quote_qty, rules)| quote_qty.to_units(exchange.asset(rules.quote).decimals),
                );
                (Some(0), quote_qty.and_then(|units| i64::try_from(units).ok()).map(Amount))
            }
        };
        let qty = qty.and_then(|units| i64::try_from(units).ok()).map_or(Qty::ZERO, Qty);
        debug_assert!(
            self.accounts.get(account.index()).is_none_or(|activity| activity.open.tail == NIL
                || self.records.get(activity.open.tail).record.order_id < OrderId::of(seq)),
            "order seqs must increase"
        );
        let record = OrderRecord {
            order_id: OrderId::of(seq),
            account,
            client_id,
            instrument: instrument_id,
            side: command.side,
            kind,
            time_in_force,
            offset: if instrument.is_future() { command.offset } else { Offset::Open },
            post_only,
            stp: command.stp,
            price,
            qty,
            quote_qty,
            remaining: qty,
            filled: Qty::ZERO,
            status: OrderStatus::Open,
            created_ns: now,
            updated_ns: now,
        };
        match self.insert(record, ListKind::Open) {
            Ok(slot) => slot,
            Err(_) => {
                debug_assert!(false, "an accepted order's id or client key is taken");
                NIL
            }
        }
    }

    // ----- invariants -----

    /// Checks the activity against itself and `exchange`: links and lengths, every
    /// record indexed once under its own keys (in the client-key table of its state),
    /// limits, statuses, and the open records exactly the exchange's open orders.
    /// O(records + fills).
    pub(crate) fn check(&self, exchange: &Exchange) -> Result<(), String> {
        let live = self.records.len();
        let (open_keys, finished_keys) = (self.open_by_client.len(), self.finished_by_client.len());
        if self.by_id.len() != live || open_keys + finished_keys != live {
            return Err(format!(
                "{live} records but {} indexed by order id and {open_keys} + {finished_keys} \
                 by client id",
                self.by_id.len()
            ));
        }
        let accounts = exchange.ledger().accounts().len();
        let (mut open_records, mut finished_records) = (0usize, 0usize);
        for (index, activity) in self.accounts.iter().enumerate() {
            let account = AccountId(index as u32);
            if !activity.is_empty() && index >= accounts {
                return Err(format!("activity of account {index}, which does not exist"));
            }
            self.check_open_list(exchange, account, activity.open)?;
            open_records += activity.open.len as usize;
            if activity.finished.len() > FINISHED_ORDERS_KEPT {
                return Err(format!(
                    "account {index} keeps {} finished orders",
                    activity.finished.len()
                ));
            }
            for &slot in &activity.finished {
                let record = self.check_indexed(account, slot, ListKind::Finished)?;
                if record.status.is_open() || !record.remaining.is_zero() {
                    return Err(format!("finished order {} is open", record.order_id));
                }
            }
            finished_records += activity.finished.len();
            if activity.fills.len() > FILLS_KEPT {
                return Err(format!("account {index} keeps {} fills", activity.fills.len()));
            }
            let mut previous: Option<(Seq, u32, Liquidity)> = None;
            for fill in &activity.fills {
                if previous.is_some_and(|previous| previous >= fill.position()) {
                    return Err(format!("fills of account {index} out of order"));
                }
                previous = Some(fill.position());
                let received = exchange
                    .instruments()
                    .get(fill.instrument.index())
                    .ok_or_else(|| format!("a fill of account {index} on an unknown instrument"))?
                    .fee_asset(fill.side);
                if fill.fee_asset != received || fill.qty.0 <= 0 || fill.price.0 <= 0 {
                    return Err(format!("a fill of account {index} is malformed: {fill:?}"));
                }
            }
        }
        if open_records != open_keys || finished_records != finished_keys {
            return Err(format!(
                "{open_records} open and {finished_records} finished records listed, but \
                 {open_keys} and {finished_keys} indexed"
            ));
        }
        if open_records != exchange.open_order_count() {
            return Err(format!(
                "{open_records} open records but the exchange has {} open orders",
                exchange.open_order_count()
            ));
        }
        Ok(())
    }

    /// The record at `slot`, checked: its account's, well formed, and indexed at `slot`
    /// by order id and by client key in the table of `kind`.
    fn check_indexed(
        &self,
        account: AccountId,
        slot: u32,
        kind: ListKind,
    ) -> Result<&OrderRecord, String> {
        let entry = self.records.get(slot);
        let record = &entry.record;
        if record.account != account {
            return Err(format!("order {} is on another account's list", record.order_id));
        }
        let hash = client_hash(account, &record.client_id);
        let table = match kind {
            ListKind::Open => &self.open_by_client,
            ListKind::Finished => &self.finished_by_client,
        };
        if self.slot_by_id(record.order_id) != Some(slot)
            || self.slot_in(table, hash, account, &record.client_id) != Some(slot)
            || entry.client_hash != hash
        {
            return Err(format!("order {} is not indexed where it is", record.order_id));
        }
        check_record(record)?;
        Ok(record)
    }

    fn check_open_list(
        &self,
        exchange: &Exchange,
        account: AccountId,
        list: List,
    ) -> Result<(), String> {
        let mut previous = NIL;
        let mut slot = list.head;
        let mut walked = 0u32;
        let mut previous_order_id = OrderId(0);
        while slot != NIL {
            if walked >= list.len {
                return Err(format!("a list of account {} is longer than it says", account.0));
            }
            if self.records.get(slot).previous != previous {
                return Err(format!("the open list of account {} is linked badly", account.0));
            }
            let record = self.check_indexed(account, slot, ListKind::Open)?;
            if record.order_id <= previous_order_id {
                return Err(format!("open orders of account {} out of order id order", account.0));
            }
            previous_order_id = record.order_id;
            check_open_record(exchange, record)?;
            previous = slot;
            slot = self.records.get(slot).next;
            walked += 1;
        }
        if walked != list.len || list.tail != previous {
            return Err(format!("the open list of account {} is not what it says", account.0));
        }
        Ok(())
    }
}

/// What a record must satisfy whatever its list.
pub(crate) fn check_record(record: &OrderRecord) -> Result<(), String> {
    let shaped = match record.kind {
        OrderKind::Limit => record.price.is_some_and(|price| price.0 > 0),
        OrderKind::Market => {
            record.price.is_none()
                && !record.post_only
                && matches!(
                    record.time_in_force,
                    TimeInForce::ImmediateOrCancel | TimeInForce::FillOrKill
                )
        }
    };
    let resting_kind =
        matches!(record.time_in_force, TimeInForce::GoodTillCancel | TimeInForce::GoodForDay);
    // A spend-amount buy is a market buy, done by the end of its command, whose `qty`
    // is what it bought (nothing, perhaps).
    let sized = match record.quote_qty {
        None => record.qty.0 > 0,
        Some(quote_qty) => {
            quote_qty.0 > 0
                && record.kind == OrderKind::Market
                && record.side == Side::Buy
                && record.offset == Offset::Open
                && !record.status.is_open()
                && record.qty == record.filled
        }
    };
    if !shaped
        || !sized
        || record.order_id == OrderId(0)
        || record.remaining.0 < 0
        || record.filled.0 < 0
        || record.created_ns > record.updated_ns
        || (record.status.is_open() && (!resting_kind || record.remaining.is_zero()))
    {
        return Err(format!("order {} is malformed: {record:?}", record.order_id));
    }
    Ok(())
}

/// An open record must be the exchange's open order of its key, field for field.
pub(crate) fn check_open_record(exchange: &Exchange, record: &OrderRecord) -> Result<(), String> {
    let matches = exchange.open_order(record.account, &record.client_id).is_some_and(
        |(instrument, order)| {
            instrument == record.instrument
                && order.side == record.side
                && Some(order.price) == record.price
                && order.remaining == record.remaining
                && order.filled == record.filled
                && order.stp == record.stp
                && order.post_only == record.post_only
                && order.offset == record.offset
                && order.good_for_day == (record.time_in_force == TimeInForce::GoodForDay)
        },
    );
    if !matches {
        return Err(format!(
            "open order {} ({} of account {}) differs from the exchange's",
            record.order_id, record.client_id, record.account.0
        ));
    }
    Ok(())
}

/// An `order` command being applied, with the account it resolved to beforehand
/// (orders never create accounts, so it is the same afterwards).
pub(crate) struct NewOrder<'a, 'command> {
    pub command: &'a crate::command::OrderCommand<'command>,
    pub account: Option<AccountId>,
}

fn account_mut(accounts: &mut Vec<AccountActivity>, account: AccountId) -> &mut AccountActivity {
    let index = account.index();
    if index >= accounts.len() {
        accounts.resize_with(index + 1, AccountActivity::default);
    }
    &mut accounts[index]
}

fn push_back(records: &mut Slab<Slot>, list: &mut List, slot: u32) {
    {
        let entry = records.get_mut(slot);
        entry.previous = list.tail;
        entry.next = NIL;
    }
    if list.tail == NIL {
        list.head = slot;
    } else {
        records.get_mut(list.tail).next = slot;
    }
    list.tail = slot;
    list.len += 1;
}

fn unlink(records: &mut Slab<Slot>, list: &mut List, slot: u32) {
    let (previous, next) = {
        let entry = records.get(slot);
        (entry.previous, entry.next)
    };
    if previous == NIL {
        list.head = next;
    } else {
        records.get_mut(previous).next = next;
    }
    if next == NIL {
        list.tail = previous;
    } else {
        records.get_mut(next).previous = previous;
    }
    let entry = records.get_mut(slot);
    entry.previous = NIL;
    entry.next = NIL;
    list.len -= 1;
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(order_id: u64, account: u32, client_id: &str) -> OrderRecord {
        OrderRecord {
            order_id: OrderId(order_id),
            account: AccountId(account),
            client_id: client_id.into(),
            price: Some(Price(10)),
            qty: Qty(5),
            remaining: Qty(5),
            ..OrderRecord::vacant()
        }
    }

    fn open_ids(activity: &Activity, account: u32) -> Vec<u64> {
        activity.open_orders(AccountId(account)).map(|record| record.order_id.0).collect()
    }

    fn finished_ids(activity: &Activity, account: u32) -> Vec<u64> {
        activity.finished_orders(AccountId(account)).map(|record| record.order_id.0).collect()
    }

    #[test]
    fn insert_refuses_a_taken_order_id_or_client_key_and_changes_nothing() {
        let mut activity = Activity::new();
        activity.insert(record(1, 0, "a"), ListKind::Open).unwrap();
        assert!(activity.insert(record(2, 0, "a"), ListKind::Open).is_err());
        assert!(activity.insert(record(1, 0, "b"), ListKind::Finished).is_err());
        // The same client id of another account is another key.
        activity.insert(record(3, 1, "a"), ListKind::Open).unwrap();
        assert_eq!(activity.order_count(), 2);
        assert_eq!(activity.order(OrderId(2)), None);
        assert_eq!(activity.order_by_client(AccountId(0), "b"), None);
        assert_eq!(
            activity.order_by_client(AccountId(1), "a").map(|r| r.order_id),
            Some(OrderId(3))
        );
        assert_eq!(open_ids(&activity, 0), [1]);
        assert!(finished_ids(&activity, 0).is_empty());
    }

    #[test]
    fn finishing_moves_an_order_from_any_place_of_its_list() {
        let mut activity = Activity::new();
        let slots: Vec<u32> = (1..=5)
            .map(|id| activity.insert(record(id, 0, &format!("c{id}")), ListKind::Open).unwrap())
            .collect();
        // Middle, head, tail, then the rest.
        for (slot, open_after) in [
            (slots[2], vec![1, 2, 4, 5]),
            (slots[0], vec![2, 4, 5]),
            (slots[4], vec![2, 4]),
            (slots[1], vec![4]),
            (slots[3], vec![]),
        ] {
            activity.finish(slot, DoneReason::Canceled, Qty(1), TimestampNs(9));
            assert_eq!(open_ids(&activity, 0), open_after);
        }
        assert_eq!(finished_ids(&activity, 0), [3, 1, 5, 2, 4]);
        let record = activity.order(OrderId(3)).unwrap();
        assert_eq!(
            (record.status, record.remaining, record.filled),
            (OrderStatus::Canceled, Qty(0), Qty(1))
        );
        assert_eq!(record.updated_ns, TimestampNs(9));
        assert!(!activity.is_finished_id(AccountId(0), "nope"));
        assert!(activity.is_finished_id(AccountId(0), "c3"));
    }

    #[test]
    fn the_oldest_finished_order_is_forgotten_with_its_indexes_and_its_slot_reused() {
        let mut activity = Activity::new();
        for id in 1..=FINISHED_ORDERS_KEPT as u64 + 3 {
            let slot = activity.insert(record(id, 2, &format!("c{id}")), ListKind::Open).unwrap();
            activity.finish(slot, DoneReason::Expired, Qty::ZERO, TimestampNs(id));
        }
        assert_eq!(activity.finished_order_count(AccountId(2)), FINISHED_ORDERS_KEPT);
        assert_eq!(activity.order_count(), FINISHED_ORDERS_KEPT);
        for forgotten in 1..=3 {
            assert_eq!(activity.order(OrderId(forgotten)), None);
            assert_eq!(activity.order_by_client(AccountId(2), &format!("c{forgotten}")), None);
        }
        assert_eq!(finished_ids(&activity, 2)[0], 4);
        assert_eq!(activity.by_id.len(), FINISHED_ORDERS_KEPT);
        assert_eq!(activity.finished_by_client.len(), FINISHED_ORDERS_KEPT);
        assert!(activity.open_by_client.is_empty());
        // Freed slots are reused before the pool grows.
        let capacity = activity.records.capacity();
        activity.insert(record(10_000, 2, "c1"), ListKind::Open).unwrap();
        assert_eq!(activity.records.capacity(), capacity);
        assert_eq!(activity.open_order_count(AccountId(2)), 1);
    }

    #[test]
    fn fills_are_a_bounded_queue() {
        let mut activity = Activity::new();
        for seq in 1..=FILLS_KEPT as u64 + 2 {
            let fill = Fill {
                seq: Seq(seq),
                trade_index: 0,
                order_id: OrderId(1),
                client_id: "c".into(),
                instrument: InstrumentId(0),
                side: Side::Buy,
                price: Price(1),
                qty: Qty(1),
                fee: Amount::ZERO,
                fee_asset: AssetId(0),
                liquidity: Liquidity::Taker,
                ts_ns: TimestampNs::ZERO,
            };
            activity.push_fill(AccountId(3), fill);
        }
        let seqs: Vec<u64> = activity.fills(AccountId(3)).map(|fill| fill.seq.0).collect();
        assert_eq!(seqs.len(), FILLS_KEPT);
        assert_eq!((seqs[0], seqs[FILLS_KEPT - 1]), (3, FILLS_KEPT as u64 + 2));
        assert_eq!(activity.account_bound(), 4);
        assert!(!activity.has_activity(AccountId(0)) && activity.has_activity(AccountId(3)));
    }

    #[test]
    fn codes_are_stable() {
        let statuses: Vec<&str> = OrderStatus::ALL.iter().map(|status| status.code()).collect();
        assert_eq!(statuses, ["open", "filled", "canceled", "expired", "stp"]);
        for reason in [
            DoneReason::Filled,
            DoneReason::Canceled,
            DoneReason::Expired,
            DoneReason::SelfTradePrevented,
        ] {
            assert_eq!(OrderStatus::from(reason).code(), reason.code());
        }
    }
}
