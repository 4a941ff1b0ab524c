//! A venue: the exchange plus what a running venue remembers about orders.
//!
//! `Exchange` implements the replay format exactly and knows only open orders. A
//! running venue also answers "what became of my order?" and "what did I trade?", and
//! must never let a retried submission create a second order. `Venue` wraps the
//! exchange with an optional `Activity` (kept when `track_activity`): every order's
//! record (open, and each account's latest `FINISHED_ORDERS_KEPT` finished ones), each
//! account's latest `FILLS_KEPT` fills, and one rule the replay format does not have:
//! an `order` whose (account, client id) names a remembered finished order is rejected
//! `duplicate_id`. The activity is part of the state machine: it follows only the
//! commands and their events, so it is deterministic, and snapshots carry it
//! (`snapshot::encode_venue`).
//!
//! A venue also has commands of its own, which the replay format does not have (its
//! batch mode, `Exchange` alone, rejects them `malformed`): `halt` and `resume` an
//! instrument, `cancel_all` of an account's open orders, and `set_limits`, the most
//! open orders an account may have (see `Venue::apply`). The halted instruments and
//! the limit are part of the state machine too, and snapshots carry them.
//!
//! The exchange is untouched: `Venue::apply` calls `Exchange::apply` as it is and then
//! reads the events it appended; a cancel-all cancels each order through the one path
//! a `cancel` takes (`Exchange::cancel_open_order`). For the replay format's commands,
//! a venue without activity and without halts gives exactly the exchange's events;
//! with activity, exactly the same events except the rejections of reused finished
//! ids and, under a limit, `too_many_open_orders`; with halts, except the rejections
//! `instrument_halted`.
//!
//! Preconditions, as the engine's sequencer guarantees them: `seq`s increase (an
//! order's id is the seq of its `order` command, and an account's open orders are
//! listed in that order), and every seq is above the stand-in ids of orders rebuilt by
//! `Venue::new` (which never exceed the number of open orders it found, each of which
//! took a seq of its own).

mod activity;

pub(crate) use activity::{check_open_record, check_record, ListKind};
pub use activity::{
    Activity, Fill, Liquidity, OrderKind, OrderRecord, OrderStatus, Records, FILLS_KEPT,
    FINISHED_ORDERS_KEPT,
};

use crate::command::{AccountRef, Command, Side, TimeInForce};
use crate::event::{BookNote, Event, RejectReason};
use crate::exchange::{Applied, Exchange};
use crate::ids::{ClientOrderId, InstrumentId, OrderId, Seq, TimestampNs};
use crate::ledger::BalanceChange;
use crate::num::Qty;
use activity::NewOrder;

pub struct Venue {
    exchange: Exchange,
    activity: Option<Activity>,
    /// By instrument id; instruments beyond the end are not halted.
    halted: Vec<bool>,
    /// How many instruments are halted: when none, orders and amends skip the check.
    halted_count: usize,
    /// The most open orders an account may have (`Command::SetLimits`); 0: no limit.
    open_orders_limit: u64,
}

impl Venue {
    /// A venue over `exchange`, with no instrument halted; `track_activity` keeps the
    /// `Activity` and applies the reuse rule.
    ///
    /// With an exchange that already has open orders (restored from an exchange-only
    /// snapshot), their records are rebuilt from the books: the order id is a stand-in,
    /// the order's position (1, 2, ...) when the books are walked instrument by
    /// instrument (in id order), bids then asks, each side in priority order; kind
    /// `Limit`, time in force `GoodTillCancel`, `qty` = remaining + filled (the
    /// submitted quantity is not known), created and updated at `exchange.time_ns()`.
    /// Such an exchange has no remembered finished orders and no fills.
    pub fn new(exchange: Exchange, track_activity: bool) -> Venue {
        let activity = track_activity.then(|| rebuild_open_records(&exchange));
        Venue { exchange, activity, halted: Vec::new(), halted_count: 0, open_orders_limit: 0 }
    }

    /// A venue from parts that the caller has checked (`snapshot::decode_venue`):
    /// `halted` are instruments of `exchange`, ascending, each once.
    pub(crate) fn from_parts(
        exchange: Exchange,
        activity: Option<Activity>,
        halted: &[InstrumentId],
        open_orders_limit: u64,
    ) -> Venue {
        let mut venue =
            Venue { exchange, activity, halted: Vec::new(), halted_count: 0, open_orders_limit };
        for &instrument in halted {
            venue.set_halted(instrument, true);
        }
        venue
    }

    pub fn exchange(&self) -> &Exchange {
        &self.exchange
    }

    /// The activity, when the venue tracks it.
    pub fn activity(&self) -> Option<&Activity> {
        self.activity.as_ref()
    }

    pub fn tracks_activity(&self) -> bool {
        self.activity.is_some()
    }

    /// Whether trading on `instrument` is halted (`Command::Halt`); `false` for an
    /// instrument that does not exist.
    #[inline]
    pub fn is_halted(&self, instrument: InstrumentId) -> bool {
        self.halted.get(instrument.index()).copied().unwrap_or(false)
    }

    /// The halted instruments, ascending id.
    pub fn halted_instruments(&self) -> impl Iterator<Item = InstrumentId> + '_ {
        self.halted
            .iter()
            .enumerate()
            .filter(|(_, halted)| **halted)
            .map(|(index, _)| InstrumentId(index as u32))
    }

    /// The symbols of the halted instruments, in instrument id order.
    pub fn halted_symbols(&self) -> impl Iterator<Item = &str> + '_ {
        self.halted_instruments().map(|instrument| &*self.exchange.instrument(instrument).symbol)
    }

    /// The most open orders an account may have (`Command::SetLimits`); 0 means no
    /// limit. A venue without activity keeps it (and its snapshots carry it) but does
    /// not enforce it: see `apply`.
    pub fn open_orders_limit(&self) -> u64 {
        self.open_orders_limit
    }

    /// What a market-data consumer needs to know of the command just applied as `seq`
    /// (`applied` is what `apply` returned for it) beyond its events: where its new
    /// order rests, or a halt. Reads the resting order at the handle `apply` gave: no
    /// lookup by account and client id. Call it before the next `apply`.
    pub fn book_note(&self, seq: Seq, applied: &Applied) -> Option<BookNote> {
        if let Some((instrument, halted)) = applied.halted {
            return Some(BookNote::Halted { seq, instrument, halted });
        }
        if let Some(instrument) = applied.declared {
            return Some(BookNote::Declared { seq, instrument });
        }
        let handle = applied.rested?;
        let resting = self.exchange.book(handle.instrument).order(handle.slot);
        debug_assert!(!resting.remaining.is_zero(), "a resting order has something left");
        Some(BookNote::Rested {
            seq,
            instrument: handle.instrument,
            account: resting.account,
            id: resting.id.clone(),
            side: resting.side,
            price: resting.price,
            qty: resting.remaining,
        })
    }

    /// Starts (`true`) or stops recording every balance change (`Ledger::record_changes`),
    /// for the history; the state and the events are the same either way.
    pub fn record_balance_changes(&mut self, on: bool) {
        self.exchange.ledger_mut().record_changes(on);
    }

    /// The balance changes recorded since the last call (see `record_balance_changes`),
    /// appended to `into` in the order they happened.
    pub fn take_balance_changes(&mut self, into: &mut Vec<BalanceChange>) {
        self.exchange.ledger_mut().take_changes(into);
    }

    /// The exchange and the activity; the halts and the limit are dropped (read them
    /// first with `halted_instruments` and `open_orders_limit`).
    pub fn into_parts(self) -> (Exchange, Option<Activity>) {
        (self.exchange, self.activity)
    }

    /// Applies one command: exactly `Exchange::apply`, plus the venue's own rules.
    /// Returns what the command did beyond its events (`Applied`): the order it acted
    /// on (with activity), where its new order rests, or the halt it made.
    ///
    /// With activity: an `order` whose (account, id) names a remembered finished order
    /// is rejected `duplicate_id` without reaching the exchange (only its time moves, to
    /// `ts`); then the command's events update the activity. The reuse check comes where
    /// the replay format puts `duplicate_id`: after `unknown_symbol` (an order on an
    /// unknown symbol reaches the exchange and is rejected `unknown_symbol`), before
    /// everything else.
    ///
    /// The open-orders limit (`set_limits`, when not 0), with activity only: an `order`
    /// of an account that already has that many open orders is rejected
    /// `too_many_open_orders`, echoing its key, with only the time moved. It is checked
    /// on arrival, whatever the order would do: an IOC, FOK or market order of an
    /// account at the limit is rejected too, though it would never rest. It comes after
    /// `unknown_symbol`, `instrument_halted` and `duplicate_id` (the reuse rule, and the
    /// exchange's for an id that is open), before everything else (prices, quantities,
    /// `would_cross`, `no_liquidity`, `insufficient_funds`). Amends, cancels and
    /// cancel-alls are never limited. Without activity the limit is kept (and
    /// snapshotted) but not enforced: only the activity knows an account's open orders
    /// without a walk of the books.
    ///
    /// Halts: while an instrument is halted, an `order` on it is rejected
    /// `instrument_halted` (after `unknown_symbol`, before the reuse rule and
    /// `duplicate_id`), and an `amend` of an open order on it is rejected
    /// `instrument_halted` (after `unknown_order`), each echoing its key as the
    /// exchange's rejections do, with only the time moved; `cancel` and `cancel_all`
    /// work as usual.
    ///
    /// The venue's own commands (each moves the time to `ts` like any command):
    /// - `halt`, `resume`: `rejected` `unknown_symbol` for an unknown symbol; otherwise
    ///   `accepted` (no order key) and the instrument is halted, or trades again.
    ///   Halting a halted instrument, or resuming one that trades, is accepted and
    ///   changes nothing.
    /// - `cancel_all`: `rejected` `unknown_symbol` when it names a symbol that does not
    ///   exist; otherwise `accepted` (no order key), then a `done` (`canceled`, with its
    ///   `filled`) for each open order of the account (on that instrument only, when it
    ///   names one), each exactly as a `cancel` of it would release its hold and emit
    ///   its `done`. An account that does not exist has nothing to cancel. The `done`s
    ///   come in a deterministic order: with activity, ascending order id (the
    ///   account's open records); without, instrument by instrument in id order, bids
    ///   then asks, each side in priority order. The activity follows them like any
    ///   other `done`s.
    /// - `set_limits`: always `accepted` (no order key); sets the open-orders limit to
    ///   its value, whatever it is (0 removes the limit). Orders already open stay open
    ///   when a lower limit leaves an account above it; its next orders are rejected
    ///   until it is below again.
    pub fn apply(
        &mut self,
        seq: Seq,
        ts: Option<TimestampNs>,
        command: &Command<'_>,
        events: &mut Vec<Event>,
    ) -> Applied {
        match command {
            Command::Halt { symbol } => return self.halt(seq, ts, symbol, true, events),
            Command::Resume { symbol } => return self.halt(seq, ts, symbol, false, events),
            Command::CancelAll { account, symbol } => {
                self.cancel_all(seq, ts, account, symbol.as_deref(), events);
                return Applied::default();
            }
            Command::SetLimits { open_orders_per_account } => {
                self.exchange.advance_time(ts);
                self.open_orders_limit = *open_orders_per_account;
                events.push(Event::Accepted { seq, account: None });
                return Applied::default();
            }
            // `reject_if_halted` has emitted the rejection when it says so.
            Command::Order(_) | Command::Amend(_) | Command::Liquidate { .. }
                if self.halted_count > 0 && self.reject_if_halted(seq, ts, command, events) =>
            {
                return Applied::default();
            }
            _ => {}
        }
        let Some(activity) = &mut self.activity else {
            return self.exchange.apply(seq, ts, command, events);
        };
        let order = match command {
            Command::Order(order) => {
                let account = self.exchange.resolve(&order.account);
                if let Some(account) = account {
                    let limit = self.open_orders_limit;
                    let reason = if activity.is_finished_id(account, &order.id) {
                        Some(RejectReason::DuplicateId)
                    } else if limit > 0 && activity.open_order_count(account) as u64 >= limit {
                        // An open id is the exchange's to reject `duplicate_id`.
                        self.exchange
                            .open_order(account, &order.id)
                            .is_none()
                            .then_some(RejectReason::TooManyOpenOrders)
                    } else {
                        None
                    };
                    // An unknown symbol is the exchange's to reject, first.
                    if let Some(reason) =
                        reason.filter(|_| self.exchange.find_instrument(&order.symbol).is_some())
                    {
                        self.exchange.advance_time(ts);
                        events.push(Event::Rejected { seq, reason });
                        return Applied::default();
                    }
                }
                Some(NewOrder { command: order, account })
            }
            _ => None,
        };
        let start = events.len();
        let mut applied = self.exchange.apply(seq, ts, command, events);
        let is_liquidation = matches!(command, Command::Liquidate { .. });
        applied.order_id =
            activity.follow(&self.exchange, seq, order, is_liquidation, &events[start..]);
        debug_assert!(
            applied.order_id.is_none_or(|order_id| {
                !matches!(command, Command::Order(_)) || order_id == OrderId::of(seq)
            }),
            "a new order's id is the seq of its command"
        );
        applied
    }

    /// An `order` on a halted instrument, or an `amend` of an open order on one, is
    /// rejected `instrument_halted` (only the time moves); `true` if it was.
    fn reject_if_halted(
        &mut self,
        seq: Seq,
        ts: Option<TimestampNs>,
        command: &Command<'_>,
        events: &mut Vec<Event>,
    ) -> bool {
        let instrument = match command {
            // An unknown symbol is the exchange's to reject.
            Command::Order(order) => self.exchange.find_instrument(&order.symbol),
            // No such open order: the exchange rejects it `unknown_order`.
            Command::Amend(amend) => self
                .exchange
                .resolve(&amend.account)
                .and_then(|account| self.exchange.open_order(account, &amend.id))
                .map(|(instrument, _)| instrument),
            // A liquidation trades, so it waits for the market to resume; unknown
            // symbols are the exchange's to reject. Its rejection names no order.
            Command::Liquidate { symbol, .. } => {
                let instrument = self.exchange.find_instrument(symbol);
                if !instrument.is_some_and(|instrument| self.is_halted(instrument)) {
                    return false;
                }
                self.exchange.advance_time(ts);
                let reason = RejectReason::InstrumentHalted;
                events.push(Event::Rejected { seq, reason });
                return true;
            }
            _ => return false,
        };
        if !instrument.is_some_and(|instrument| self.is_halted(instrument)) {
            return false;
        }
        self.exchange.advance_time(ts);
        events.push(Event::Rejected { seq, reason: RejectReason::InstrumentHalted });
        true
    }

    /// `halt` (`halted`) or `resume` (`!halted`) of `symbol`.
    fn halt(
        &mut self,
        seq: Seq,
        ts: Option<TimestampNs>,
        symbol: &str,
        halted: bool,
        events: &mut Vec<Event>,
    ) -> Applied {
        self.exchange.advance_time(ts);
        match self.exchange.find_instrument(symbol) {
            Some(instrument) => {
                self.set_halted(instrument, halted);
                events.push(Event::Accepted { seq, account: None });
                Applied { halted: Some((instrument, halted)), ..Applied::default() }
            }
            None => {
                events.push(Event::Rejected { seq, reason: RejectReason::UnknownSymbol });
                Applied::default()
            }
        }
    }

    fn set_halted(&mut self, instrument: InstrumentId, halted: bool) {
        let index = instrument.index();
        if index >= self.halted.len() {
            if !halted {
                return;
            }
            self.halted.resize(index + 1, false);
        }
        if self.halted[index] != halted {
            self.halted[index] = halted;
            if halted {
                self.halted_count += 1;
            } else {
                self.halted_count -= 1;
            }
        }
    }

    /// `cancel_all` (see `apply`).
    fn cancel_all(
        &mut self,
        seq: Seq,
        ts: Option<TimestampNs>,
        account: &AccountRef<'_>,
        symbol: Option<&str>,
        events: &mut Vec<Event>,
    ) {
        self.exchange.advance_time(ts);
        let instrument = match symbol {
            Some(symbol) => match self.exchange.find_instrument(symbol) {
                Some(instrument) => Some(instrument),
                None => {
                    events.push(Event::Rejected { seq, reason: RejectReason::UnknownSymbol });
                    return;
                }
            },
            None => None,
        };
        events.push(Event::Accepted { seq, account: None });
        let Some(account) = self.exchange.resolve(account) else { return };
        let on = |candidate: InstrumentId| instrument.is_none_or(|only| only == candidate);
        // The ids first: cancelling changes what the walks read.
        let ids: Vec<ClientOrderId> = match &self.activity {
            Some(activity) => activity
                .open_orders(account)
                .filter(|record| on(record.instrument))
                .map(|record| record.client_id.clone())
                .collect(),
            None => {
                let mut ids = Vec::new();
                for index in 0..self.exchange.instruments().len() {
                    let candidate = InstrumentId(index as u32);
                    if !on(candidate) {
                        continue;
                    }
                    for side in [Side::Buy, Side::Sell] {
                        self.exchange.book(candidate).for_each_order(side, |order| {
                            if order.account == account {
                                ids.push(order.id.clone());
                            }
                        });
                    }
                }
                ids
            }
        };
        let start = events.len();
        for id in &ids {
            let canceled = self.exchange.cancel_open_order(seq, account, id, events);
            debug_assert!(canceled, "an open order listed for cancel-all is not open");
        }
        if let Some(activity) = &mut self.activity {
            // A cancel-all names no one order: it acted on none.
            let _ = activity.follow(&self.exchange, seq, None, false, &events[start..]);
        }
    }

    /// `Exchange::check_invariants`, plus, with activity: the open records are exactly
    /// the exchange's open orders (account, id, instrument, side, price, remaining,
    /// filled, stp, post_only), each account keeps at most `FINISHED_ORDERS_KEPT`
    /// finished orders and `FILLS_KEPT` fills, lists and indexes agree. O(state).
    pub fn check_invariants(&self) -> Result<(), String> {
        self.exchange.check_invariants()?;
        self.check_halts()?;
        self.check_activity()
    }

    /// The halted instruments exist and are counted right.
    pub(crate) fn check_halts(&self) -> Result<(), String> {
        let instruments = self.exchange.instruments().len();
        if let Some(index) = self.halted.iter().rposition(|&halted| halted) {
            if index >= instruments {
                return Err(format!("instrument {index} is halted but does not exist"));
            }
        }
        let counted = self.halted.iter().filter(|&&halted| halted).count();
        if counted != self.halted_count {
            return Err(format!(
                "{counted} instruments are halted but {} are counted",
                self.halted_count
            ));
        }
        Ok(())
    }

    /// The activity's part of `check_invariants` alone (for a decoder that has just
    /// checked the exchange).
    pub(crate) fn check_activity(&self) -> Result<(), String> {
        match &self.activity {
            Some(activity) => activity.check(&self.exchange),
            None => Ok(()),
        }
    }
}

/// The records of an exchange's open orders (see `Venue::new`).
fn rebuild_open_records(exchange: &Exchange) -> Activity {
    let mut activity = Activity::new();
    let now = exchange.time_ns();
    let mut position = 0u64;
    for index in 0..exchange.instruments().len() {
        let instrument = InstrumentId(index as u32);
        for side in [Side::Buy, Side::Sell] {
            exchange.book(instrument).for_each_order(side, |order| {
                position += 1;
                let record = OrderRecord {
                    order_id: OrderId(position),
                    account: order.account,
                    client_id: order.id.clone(),
                    instrument,
                    side: order.side,
                    kind: OrderKind::Limit,
                    time_in_force: if order.good_for_day {
                        TimeInForce::GoodForDay
                    } else {
                        TimeInForce::GoodTillCancel
                    },
                    offset: order.offset,
                    post_only: order.post_only,
                    stp: order.stp,
                    price: Some(order.price),
                    qty: Qty(order.remaining.0.saturating_add(order.filled.0)),
                    quote_qty: None,
                    remaining: order.remaining,
                    filled: order.filled,
                    status: OrderStatus::Open,
                    created_ns: now,
                    updated_ns: now,
                };
                // The exchange's index keeps open keys distinct, and positions are.
                let inserted = activity.insert(record, ListKind::Open);
                debug_assert!(inserted.is_ok(), "an exchange's open orders have distinct keys");
            });
        }
    }
    activity
}
