//! The feed's making: each applied command's events (and the engine's `BookNote` for
//! what events do not spell out, a new order resting or a halt) become book changes
//! and the messages that announce them, in the order they happened. The builder keeps
//! the public books (`Books`) and, privately, which account's client order id each
//! resting order is: events name orders that way, the feed by exchange order id.
//!
//! The engine's identities arrive typed (`Seq`, `TimestampNs`, `OrderId`) and stay so,
//! in the messages and the public books.
//!
//! Per command: trades first (`Executed` for the resting order, `Trade`), cancels and
//! other finishes (`Deleted`), amends (`Reduced` when the order keeps its place,
//! `Replaced` when it loses it), then a new order's rest (`AddOrder`), then `Bbo` for
//! each instrument whose best bid or offer moved.

use bourse_core::event::TradeEvent;
use bourse_core::ids::{AccountId, ClientOrderId, InstrumentId};
use bourse_core::{BookNote, Event, OrderId, Price, Qty, Seq, TimestampNs};
use rustc_hash::FxHashMap;

use crate::book::{Bbo, Books};
use crate::message::Message;

/// A resting order the builder starts with (`FeedBuilder::seed`).
pub struct SeedOrder {
    pub order: OrderId,
    pub instrument: InstrumentId,
    pub account: AccountId,
    pub id: ClientOrderId,
    pub side: bourse_core::Side,
    pub price: Price,
    pub qty: Qty,
}

#[derive(Default)]
pub struct FeedBuilder {
    books: Books,
    /// Resting orders by account and client order id: the exchange's order id.
    owners: FxHashMap<AccountId, FxHashMap<ClientOrderId, OrderId>>,
    /// The directory entry of each instrument announced, by id.
    directory: Vec<Option<Message>>,
    halted: Vec<bool>,
    /// The best bid and offer last announced, by instrument.
    announced: Vec<Bbo>,
    /// The last command applied.
    seq: Seq,
    /// Events that named an order the books do not have: 0 unless the feed and the
    /// engine disagree (counted for `/metrics`, asserted in debug builds).
    inconsistencies: u64,
}

impl FeedBuilder {
    pub fn books(&self) -> &Books {
        &self.books
    }

    /// The engine sequence number of the last command applied.
    pub fn seq(&self) -> Seq {
        self.seq
    }

    pub fn inconsistencies(&self) -> u64 {
        self.inconsistencies
    }

    /// Whether `instrument` was announced (`announce`).
    pub fn knows(&self, instrument: InstrumentId) -> bool {
        self.directory.get(instrument.index()).is_some_and(Option::is_some)
    }

    /// The exchange's id of `account`'s resting order `id`, if it rests.
    pub fn order_of(&self, account: AccountId, id: &ClientOrderId) -> Option<OrderId> {
        self.owners.get(&account)?.get(id).copied()
    }

    /// Announces an instrument (before its first book message): its `Directory` message.
    pub fn announce(
        &mut self,
        instrument: InstrumentId,
        symbol: &str,
        price_decimals: u8,
        qty_decimals: u8,
        kind: u8,
        out: &mut Vec<Message>,
    ) {
        let index = instrument.index();
        if index >= self.directory.len() {
            self.directory.resize(index + 1, None);
            self.halted.resize(index + 1, false);
        }
        let message = Message::Directory {
            instrument,
            symbol: symbol.to_string(),
            price_decimals,
            qty_decimals,
            kind,
        };
        self.directory[index] = Some(message.clone());
        out.push(message);
    }

    /// Starts from the books as the engine has them after command `seq` (a server that
    /// recovered state from its journal): `orders` in priority order per instrument and
    /// side, each with its owner and its exchange order id, and the halted instruments.
    /// Nothing is announced: subscribers of a new session start from a snapshot.
    pub fn seed(
        &mut self,
        seq: Seq,
        orders: impl IntoIterator<Item = SeedOrder>,
        halted: &[InstrumentId],
    ) -> Result<(), crate::book::BookError> {
        for order in orders {
            self.books.add(order.order, order.instrument, order.side, order.price, order.qty)?;
            self.owners.entry(order.account).or_default().insert(order.id, order.order);
        }
        for instrument in halted {
            let index = instrument.index();
            if index >= self.halted.len() {
                self.halted.resize(index + 1, false);
                self.directory.resize(index + 1, None);
            }
            self.halted[index] = true;
        }
        let instruments = self.books.instrument_count();
        if self.announced.len() < instruments {
            self.announced.resize(instruments, Bbo::default());
        }
        for index in 0..instruments {
            self.announced[index] = self.books.bbo(InstrumentId(index as u32));
        }
        self.seq = seq;
        Ok(())
    }

    /// Applies one command: `seq`, `ts`, its events and its note; appends its messages
    /// to `out`.
    pub fn apply(
        &mut self,
        seq: Seq,
        ts: TimestampNs,
        events: &[Event],
        note: Option<&BookNote>,
        out: &mut Vec<Message>,
    ) {
        // Commands come in seq order, each once.
        debug_assert!(seq > self.seq, "command {seq} after {}", self.seq);
        debug_assert!(note.is_none_or(|note| note.seq() == seq), "another command's note");
        self.seq = seq;
        let order_id = OrderId::of(seq);
        let mut touched: Vec<InstrumentId> = Vec::new();
        let mut touch = |instrument: InstrumentId| {
            if !touched.contains(&instrument) {
                touched.push(instrument);
            }
        };
        let mut trade_index = 0u32;
        for event in events {
            match event {
                Event::Trade(trade) => {
                    touch(trade.instrument);
                    self.trade(seq, ts, trade, trade_index, out);
                    trade_index += 1;
                }
                Event::Done { instrument, account, id, .. } => {
                    touch(*instrument);
                    // An order that never rested, or one executed to zero, is not here.
                    if let Some(order) = self.take_owner(*account, id) {
                        if let Ok(entry) = self.books.delete(order) {
                            let instrument = entry.instrument;
                            out.push(Message::Deleted { seq, ts, order, instrument });
                        }
                    }
                }
                Event::Amended { instrument, account, id, price, qty, .. } => {
                    touch(*instrument);
                    self.amend(seq, ts, (*account, id), *price, *qty, out);
                }
                // A settlement moves money and positions, not the book (its expired
                // orders come as `done`s).
                Event::Accepted { .. } | Event::Rejected { .. } | Event::Settled(_) => {}
            }
        }
        match note {
            Some(BookNote::Rested { instrument, account, id, side, price, qty, .. }) => {
                touch(*instrument);
                match self.books.add(order_id, *instrument, *side, *price, *qty) {
                    Ok(()) => {
                        self.owners.entry(*account).or_default().insert(id.clone(), order_id);
                        out.push(Message::AddOrder {
                            seq,
                            ts,
                            order: order_id,
                            instrument: *instrument,
                            side: *side,
                            price: *price,
                            qty: *qty,
                        });
                    }
                    Err(_) => self.inconsistent(),
                }
            }
            Some(BookNote::Halted { instrument, halted, .. }) => {
                let index = instrument.index();
                if index >= self.halted.len() {
                    self.halted.resize(index + 1, false);
                    self.directory.resize(index + 1, None);
                }
                self.halted[index] = *halted;
                out.push(Message::TradingState {
                    seq,
                    ts,
                    instrument: *instrument,
                    halted: *halted,
                });
            }
            // Its directory entry is the publisher's to announce (it knows the symbol).
            Some(BookNote::Declared { .. }) | None => {}
        }
        for instrument in touched {
            self.announce_bbo(seq, ts, instrument, out);
        }
    }

    fn trade(
        &mut self,
        seq: Seq,
        ts: TimestampNs,
        trade: &TradeEvent,
        trade_index: u32,
        out: &mut Vec<Message>,
    ) {
        match self.order_of(trade.maker_account, &trade.maker_id) {
            Some(order) => self.execute(
                seq,
                ts,
                order,
                trade.qty,
                trade_index,
                (trade.maker_account, &trade.maker_id),
                out,
            ),
            None => self.inconsistent(),
        }
        out.push(Message::Trade {
            seq,
            ts,
            instrument: trade.instrument,
            price: trade.price,
            qty: trade.qty,
            taker_side: trade.taker_side,
            trade_index,
        });
        // A resting order that trades as the taker: one whose amend lost its place and
        // crossed (it went to the back of its new level first).
        if let Some(order) = self.order_of(trade.taker_account, &trade.taker_id) {
            self.execute(
                seq,
                ts,
                order,
                trade.qty,
                trade_index,
                (trade.taker_account, &trade.taker_id),
                out,
            );
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn execute(
        &mut self,
        seq: Seq,
        ts: TimestampNs,
        order: OrderId,
        qty: Qty,
        trade_index: u32,
        owner: (AccountId, &ClientOrderId),
        out: &mut Vec<Message>,
    ) {
        let Some(instrument) = self.books.order(order).map(|entry| entry.instrument) else {
            return self.inconsistent();
        };
        match self.books.reduce(order, qty) {
            Ok(left) => {
                out.push(Message::Executed { seq, ts, order, instrument, qty, trade_index });
                if left.0 == 0 {
                    self.take_owner(owner.0, owner.1);
                }
            }
            Err(_) => self.inconsistent(),
        }
    }

    fn amend(
        &mut self,
        seq: Seq,
        ts: TimestampNs,
        owner: (AccountId, &ClientOrderId),
        price: Price,
        qty: Qty,
        out: &mut Vec<Message>,
    ) {
        let Some(order) = self.order_of(owner.0, owner.1) else {
            return self.inconsistent();
        };
        let Some(entry) = self.books.order(order).copied() else {
            return self.inconsistent();
        };
        if entry.price == price && qty.0 <= entry.qty.0 {
            if qty.0 < entry.qty.0 && self.books.set_qty(order, qty).is_ok() {
                let instrument = entry.instrument;
                out.push(Message::Reduced {
                    seq,
                    ts,
                    order,
                    instrument,
                    qty: Qty(entry.qty.0 - qty.0),
                });
            }
        } else if self.books.replace(order, price, qty).is_ok() {
            let instrument = entry.instrument;
            out.push(Message::Replaced { seq, ts, order, instrument, price, qty });
        } else {
            self.inconsistent();
        }
    }

    fn take_owner(&mut self, account: AccountId, id: &ClientOrderId) -> Option<OrderId> {
        let orders = self.owners.get_mut(&account)?;
        let order = orders.remove(id);
        if orders.is_empty() {
            self.owners.remove(&account);
        }
        order
    }

    fn announce_bbo(
        &mut self,
        seq: Seq,
        ts: TimestampNs,
        instrument: InstrumentId,
        out: &mut Vec<Message>,
    ) {
        let bbo = self.books.bbo(instrument);
        // Between commands no book is crossed (within one, an amended order that lost
        // its place may cross until it has traded).
        debug_assert!(
            !matches!((bbo.bid, bbo.ask), (Some((bid, _)), Some((ask, _))) if bid >= ask),
            "instrument {instrument:?} crossed: {bbo:?}"
        );
        let index = instrument.index();
        if index >= self.announced.len() {
            self.announced.resize(index + 1, Bbo::default());
        }
        if self.announced[index] == bbo {
            return;
        }
        self.announced[index] = bbo;
        let (bid_price, bid_qty) = bbo.bid.unwrap_or((Price(0), Qty(0)));
        let (ask_price, ask_qty) = bbo.ask.unwrap_or((Price(0), Qty(0)));
        out.push(Message::Bbo { seq, ts, instrument, bid_price, bid_qty, ask_price, ask_qty });
    }

    fn inconsistent(&mut self) {
        self.inconsistencies += 1;
        debug_assert!(false, "the feed's books and the engine's events disagree");
    }

    /// Every book as messages, after feed message `feed_seq` (command `self.seq()`):
    /// `SnapshotStart`, each instrument's `Directory` and `TradingState`, every resting
    /// order as `AddOrder` in priority order, `SnapshotEnd`. A subscriber that applies
    /// them to empty books has these books.
    pub fn snapshot(&self, feed_seq: u64) -> Vec<Message> {
        let seq = self.seq;
        let mut messages = vec![Message::SnapshotStart { feed_seq, seq }];
        for (index, entry) in self.directory.iter().enumerate() {
            let instrument = InstrumentId(index as u32);
            if let Some(directory) = entry {
                messages.push(directory.clone());
            }
            if self.halted.get(index).copied().unwrap_or(false) {
                messages.push(Message::TradingState {
                    seq,
                    ts: TimestampNs::ZERO,
                    instrument,
                    halted: true,
                });
            }
        }
        for index in 0..self.books.instrument_count() {
            let instrument = InstrumentId(index as u32);
            for side in [bourse_core::Side::Buy, bourse_core::Side::Sell] {
                for (order, price, qty) in self.books.orders(instrument, side) {
                    messages.push(Message::AddOrder {
                        seq,
                        ts: TimestampNs::ZERO,
                        order,
                        instrument,
                        side,
                        price,
                        qty,
                    });
                }
            }
        }
        messages.push(Message::SnapshotEnd { feed_seq });
        messages
    }
}
