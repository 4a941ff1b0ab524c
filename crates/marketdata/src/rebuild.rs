//! The subscriber's side of the feed: books rebuilt from messages taken strictly in
//! sequence. Packets may come late, twice or not at all: a message already applied is
//! dropped, one that comes early waits (up to `PENDING_MAX`) until the gap before it
//! is filled by a retransmission, and a gap that cannot be filled is closed by a
//! snapshot (`apply_snapshot`) after which the waiting messages apply. Each `Bbo`
//! message is checked against the rebuilt books: a mismatch means the books are wrong
//! and is reported, never ignored.

use std::collections::BTreeMap;

use bourse_core::ids::InstrumentId;
use bourse_core::{OrderId, Price, Qty, Seq};

use crate::book::{Bbo, BookError, Books};
use crate::message::{DecodeError, Message, END_OF_SESSION};
use crate::mold::{Packet, PacketError, Session};

/// Messages waiting for a gap before them to fill, at most; beyond that the oldest
/// reason to wait is gone and the subscriber must take a snapshot.
pub const PENDING_MAX: usize = 1 << 20;

/// Why the rebuilt books can no longer be trusted (or a packet was refused).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RebuildError {
    Packet(PacketError),
    Message {
        sequence: u64,
        error: DecodeError,
    },
    /// A message did not fit the books (an unknown order, a quantity too large).
    Book {
        sequence: u64,
        error: BookError,
    },
    /// The books' best bid and offer differ from the feed's `Bbo`.
    BboMismatch {
        sequence: u64,
        instrument: InstrumentId,
    },
    /// A packet of another session (the exchange restarted): start again from a
    /// snapshot of the new session.
    OtherSession,
    /// More than `PENDING_MAX` messages wait behind a gap.
    TooFarBehind,
    /// A snapshot that is not `SnapshotStart`, books, `SnapshotEnd`.
    BadSnapshot(&'static str),
}

impl std::fmt::Display for RebuildError {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            RebuildError::Packet(error) => write!(formatter, "bad packet: {error}"),
            RebuildError::Message { sequence, error } => {
                write!(formatter, "message {sequence}: {error}")
            }
            RebuildError::Book { sequence, error } => {
                write!(formatter, "message {sequence}: {error}")
            }
            RebuildError::BboMismatch { sequence, instrument } => {
                write!(formatter, "message {sequence}: the books' best bid and offer of instrument {} differ from the feed's", instrument.0)
            }
            RebuildError::OtherSession => write!(formatter, "a packet of another session"),
            RebuildError::TooFarBehind => write!(formatter, "too many messages wait behind a gap"),
            RebuildError::BadSnapshot(why) => write!(formatter, "bad snapshot: {why}"),
        }
    }
}

impl std::error::Error for RebuildError {}

/// An instrument as the directory announced it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Instrument {
    pub symbol: String,
    pub price_decimals: u8,
    pub qty_decimals: u8,
    /// `message::KIND_SPOT` or `KIND_FUTURE`.
    pub kind: u8,
    pub halted: bool,
}

/// What the subscriber has seen, for its reports.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Counters {
    pub applied: u64,
    pub duplicates: u64,
    pub trades: u64,
    pub snapshots: u64,
}

#[derive(Default)]
pub struct Rebuilder {
    books: Books,
    instruments: Vec<Option<Instrument>>,
    session: Option<Session>,
    /// The feed sequence number of the next message to apply (0: none yet, a snapshot
    /// or the first packet sets it).
    next: u64,
    /// The engine sequence number of the last book message applied.
    seq: Seq,
    pending: BTreeMap<u64, Message>,
    /// Messages of commands after this engine sequence number wait (`hold_after`).
    hold: Option<Seq>,
    /// One past the highest sequence number known to exist (from packets and
    /// heartbeats): messages below it that are not here are missing.
    announced: u64,
    ended: bool,
    pub counters: Counters,
}

impl Rebuilder {
    /// A subscriber that starts at feed message `first` (1 to start with the session;
    /// 0 to wait for a snapshot before applying anything).
    pub fn starting_at(first: u64) -> Rebuilder {
        Rebuilder { next: first, ..Rebuilder::default() }
    }

    pub fn books(&self) -> &Books {
        &self.books
    }

    pub fn instrument(&self, instrument: InstrumentId) -> Option<&Instrument> {
        self.instruments.get(instrument.index())?.as_ref()
    }

    /// The instruments the directory announced, by id.
    pub fn instruments(&self) -> impl Iterator<Item = (InstrumentId, &Instrument)> {
        self.instruments
            .iter()
            .enumerate()
            .filter_map(|(index, entry)| Some((InstrumentId(index as u32), entry.as_ref()?)))
    }

    pub fn instrument_by_symbol(&self, symbol: &str) -> Option<InstrumentId> {
        self.instruments
            .iter()
            .position(|entry| entry.as_ref().is_some_and(|instrument| instrument.symbol == symbol))
            .map(|index| InstrumentId(index as u32))
    }

    /// The next feed sequence number the books wait for.
    pub fn next(&self) -> u64 {
        self.next
    }

    /// The engine sequence number of the last command whose messages were applied.
    pub fn seq(&self) -> Seq {
        self.seq
    }

    pub fn session(&self) -> Option<Session> {
        self.session
    }

    pub fn ended(&self) -> bool {
        self.ended
    }

    /// The messages missing: `(first, count)`, before the first waiting one, or up to
    /// the last one a packet or heartbeat announced. `None` when nothing is missing, or
    /// before the first snapshot of a late start.
    pub fn gap(&self) -> Option<(u64, u64)> {
        if self.next == 0 {
            return None;
        }
        let end = match self.pending.first_key_value() {
            Some((&first_waiting, _)) => first_waiting,
            None => self.announced,
        };
        (end > self.next).then(|| (self.next, end - self.next))
    }

    /// Whether the subscriber needs a snapshot before it can apply anything.
    pub fn needs_snapshot(&self) -> bool {
        self.next == 0
    }

    /// Takes one packet of the feed (or of a retransmission).
    pub fn on_packet(&mut self, bytes: &[u8]) -> Result<(), RebuildError> {
        let packet = Packet::parse(bytes).map_err(RebuildError::Packet)?;
        match self.session {
            Some(session) if session != packet.session => return Err(RebuildError::OtherSession),
            Some(_) => {}
            None => self.session = Some(packet.session),
        }
        if packet.is_range_gone() {
            // (A retransmission answer: the caller takes a snapshot.)
            return Ok(());
        }
        if packet.is_end_of_session() {
            self.ended = true;
            self.announced = self.announced.max(packet.sequence);
            return Ok(());
        }
        let end = packet.sequence + u64::from(packet.count);
        self.announced = self.announced.max(end);
        for (offset, bytes) in packet.messages.iter().enumerate() {
            let sequence = packet.sequence + offset as u64;
            let message = Message::decode(bytes)
                .map_err(|error| RebuildError::Message { sequence, error })?;
            self.on_message(sequence, message)?;
        }
        Ok(())
    }

    /// Takes one message of the feed with its sequence number.
    pub fn on_message(&mut self, sequence: u64, message: Message) -> Result<(), RebuildError> {
        if self.next > 0 && sequence < self.next {
            self.counters.duplicates += 1;
            return Ok(());
        }
        if self.next == 0 || sequence > self.next {
            if self.pending.len() >= PENDING_MAX {
                return Err(RebuildError::TooFarBehind);
            }
            if self.pending.insert(sequence, message).is_some() {
                self.counters.duplicates += 1;
            }
            return Ok(());
        }
        if self.held_back(&message) {
            self.pending.insert(sequence, message);
            return Ok(());
        }
        self.apply(sequence, &message)?;
        self.next += 1;
        self.drain()
    }

    /// Holds the books at engine command `seq`: messages of later commands wait until
    /// `hold_after(None)`. For comparing the books with the exchange's at one point
    /// while the feed goes on.
    pub fn hold_after(&mut self, seq: Option<Seq>) -> Result<(), RebuildError> {
        self.hold = seq;
        self.drain()
    }

    /// Whether the books stand exactly at the held command: every message up to it is
    /// applied and one of a later command waits.
    pub fn held(&self) -> bool {
        self.pending.get(&self.next).is_some_and(|message| self.held_back(message))
    }

    fn held_back(&self, message: &Message) -> bool {
        matches!((self.hold, message.seq()), (Some(hold), Some(seq)) if seq > hold)
    }

    /// Applies the waiting messages that are next in line.
    fn drain(&mut self) -> Result<(), RebuildError> {
        while let Some(entry) = self.pending.first_entry() {
            if *entry.key() < self.next {
                entry.remove();
                self.counters.duplicates += 1;
                continue;
            }
            let held =
                matches!((self.hold, entry.get().seq()), (Some(hold), Some(seq)) if seq > hold);
            if *entry.key() != self.next || held {
                break;
            }
            let message = entry.remove();
            self.apply(self.next, &message)?;
            self.next += 1;
        }
        Ok(())
    }

    /// Replaces the books with a snapshot (`FeedBuilder::snapshot`'s messages), then
    /// applies the waiting messages after it.
    pub fn apply_snapshot(&mut self, messages: &[Message]) -> Result<(), RebuildError> {
        let Some(Message::SnapshotStart { feed_seq, seq }) = messages.first() else {
            return Err(RebuildError::BadSnapshot("it does not start with SnapshotStart"));
        };
        match messages.last() {
            Some(Message::SnapshotEnd { feed_seq: end }) if end == feed_seq => {}
            _ => return Err(RebuildError::BadSnapshot("it does not end with its SnapshotEnd")),
        }
        let mut fresh = Rebuilder { session: self.session, ..Rebuilder::default() };
        for message in &messages[1..messages.len() - 1] {
            match message {
                Message::Directory { .. }
                | Message::TradingState { .. }
                | Message::AddOrder { .. } => fresh.apply(*feed_seq, message)?,
                _ => return Err(RebuildError::BadSnapshot("a message a snapshot does not hold")),
            }
        }
        self.books = fresh.books;
        self.instruments = fresh.instruments;
        self.seq = *seq;
        self.next = feed_seq + 1;
        self.counters.snapshots += 1;
        self.drain()
    }

    fn apply(&mut self, sequence: u64, message: &Message) -> Result<(), RebuildError> {
        let book = |error| RebuildError::Book { sequence, error };
        if let Some(seq) = message.seq() {
            self.seq = seq;
        }
        match message {
            Message::SystemEvent { code, .. } => self.ended |= *code == END_OF_SESSION,
            Message::Directory { instrument, symbol, price_decimals, qty_decimals, kind } => {
                let entry = self.instrument_entry(*instrument);
                let halted = entry.as_ref().is_some_and(|known| known.halted);
                *entry = Some(Instrument {
                    symbol: symbol.clone(),
                    price_decimals: *price_decimals,
                    qty_decimals: *qty_decimals,
                    kind: *kind,
                    halted,
                });
            }
            Message::TradingState { instrument, halted, .. } => {
                let entry = self.instrument_entry(*instrument);
                match entry {
                    Some(known) => known.halted = *halted,
                    None => {
                        *entry = Some(Instrument {
                            symbol: String::new(),
                            price_decimals: 0,
                            qty_decimals: 0,
                            kind: crate::message::KIND_SPOT,
                            halted: *halted,
                        })
                    }
                }
            }
            Message::AddOrder { order, instrument, side, price, qty, .. } => {
                self.books.add(*order, *instrument, *side, *price, *qty).map_err(book)?
            }
            Message::Executed { order, instrument, qty, .. }
            | Message::Reduced { order, instrument, qty, .. } => {
                self.check_instrument(sequence, *order, *instrument)?;
                self.books.reduce(*order, *qty).map(drop).map_err(book)?
            }
            Message::Deleted { order, instrument, .. } => {
                self.check_instrument(sequence, *order, *instrument)?;
                self.books.delete(*order).map(drop).map_err(book)?
            }
            Message::Replaced { order, instrument, price, qty, .. } => {
                self.check_instrument(sequence, *order, *instrument)?;
                self.books.replace(*order, *price, *qty).map_err(book)?
            }
            Message::Trade { .. } => self.counters.trades += 1,
            Message::Bbo { instrument, bid_price, bid_qty, ask_price, ask_qty, .. } => {
                let side = |price: Price, qty: Qty| (qty.0 > 0).then_some((price, qty));
                let announced =
                    Bbo { bid: side(*bid_price, *bid_qty), ask: side(*ask_price, *ask_qty) };
                if self.books.bbo(*instrument) != announced {
                    return Err(RebuildError::BboMismatch { sequence, instrument: *instrument });
                }
            }
            Message::SnapshotStart { .. } | Message::SnapshotEnd { .. } => {}
        }
        self.counters.applied += 1;
        Ok(())
    }

    /// A message about `order` names the instrument the order rests on.
    fn check_instrument(
        &self,
        sequence: u64,
        order: OrderId,
        instrument: InstrumentId,
    ) -> Result<(), RebuildError> {
        match self.books.order(order) {
            Some(entry) if entry.instrument != instrument => {
                Err(RebuildError::Book { sequence, error: BookError::UnknownOrder(order) })
            }
            _ => Ok(()),
        }
    }

    fn instrument_entry(&mut self, instrument: InstrumentId) -> &mut Option<Instrument> {
        let index = instrument.index();
        if index >= self.instruments.len() {
            self.instruments.resize(index + 1, None);
        }
        &mut self.instruments[index]
    }
}
