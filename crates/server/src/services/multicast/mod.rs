//! The market-data publisher: one thread, off the engine's, that takes every release
//! of the engine's tap (durable commands, in sequence), makes the feed's messages with
//! `bourse_marketdata::FeedBuilder`, numbers them, packs them into MoldUDP64 packets
//! sent to the multicast group, keeps the last `history_messages` for retransmission,
//! and answers the recovery services and its WebSocket channels (`Input`) between
//! releases, so every answer is consistent with one point of the feed. It
//! holds no business state of its own: all of it is derived from the events, and a
//! restart starts a new session (subscribers take a snapshot).
//!
//! In a cluster (`cluster`) every node's publisher derives and keeps the same numbered
//! messages; only the leader's sends them, and the session is the cluster's, not the
//! process's.

pub mod channels;
pub mod cluster;
pub mod listen;
pub mod services;

use std::net::{SocketAddr, UdpSocket};
use std::sync::mpsc::{Receiver, RecvTimeoutError};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bourse_core::ids::InstrumentId;
use bourse_core::{Event, Seq, TimestampNs};
use bourse_engine::{Outcome, Released};
use bourse_marketdata::message::{Message, END_OF_SESSION, START_OF_SESSION};
use bourse_marketdata::mold::{self, PacketWriter, Session};
use bourse_marketdata::FeedBuilder;
use tokio::sync::oneshot;

use crate::config::MarketDataConfig;
use crate::link::EngineLink;
use crate::metrics::FeedFigures;
use crate::reference::Reference;
use crate::services::feed::channel::HubCommand;

/// How often a node of a cluster looks whether it leads, at most.
const LEADERSHIP_LOOK: Duration = Duration::from_millis(50);

/// Messages of one retransmission answer, at most.
pub const RETRANSMIT_MESSAGES_MAX: u64 = 2_000;

// Every futures symbol the venue allows fits the feed's directory field whole (the
// feed pads a shorter one and would cut a longer one).
const _: () = assert!(
    bourse_protocol::futures_symbol::SYMBOL_BYTES_MAX <= bourse_marketdata::message::SYMBOL_BYTES
);
pub use bourse_marketdata::mold::RANGE_GONE;

/// What the publisher thread takes: the tap's releases, and requests.
pub enum Input {
    Released(Arc<Released>),
    /// Every book, framed (`services::frame`), at the feed's current point.
    Snapshot(oneshot::Sender<Vec<u8>>),
    /// Packets holding messages `first ..` (`count` at most, `RETRANSMIT_MESSAGES_MAX`
    /// at most), or one `RANGE_GONE` header.
    Retransmit {
        /// The session asked for: another one is not answered.
        session: Session,
        first: u64,
        count: u64,
        reply: oneshot::Sender<Vec<Vec<u8>>>,
    },
    /// A WebSocket connection's subscription to one of the feed's channels (`bbo`,
    /// `l3`), its unsubscription or its disconnection, from the hub; a
    /// subscription's acknowledgement goes out first.
    Channels(HubCommand),
    /// An anchor of the cluster's log (`cluster::FeedAnchor`).
    Anchor(cluster::FeedAnchor),
    Stop,
}

/// Bytes of a history slot: the longest message layout fits (checked in a test).
const SLOT_BYTES: usize = 64;

// A slot's length is kept in a byte.
const _: () = assert!(SLOT_BYTES <= u8::MAX as usize);

/// The messages kept for retransmission, encoded, by sequence number: a ring of fixed
/// slots, grown up to `capacity` and then reused, so keeping a message allocates
/// nothing.
struct History {
    /// The sequence number of the oldest message held.
    first: u64,
    slots: Vec<([u8; SLOT_BYTES], u8)>,
    /// Where the oldest message is in `slots`.
    head: usize,
    len: usize,
    capacity: usize,
}

impl History {
    fn new(first: u64, capacity: usize) -> History {
        History { first, slots: Vec::new(), head: 0, len: 0, capacity: capacity.max(1) }
    }

    /// One past the newest sequence number held.
    fn end(&self) -> u64 {
        self.first + self.len as u64
    }

    fn push(&mut self, message: &[u8]) {
        debug_assert!(message.len() <= SLOT_BYTES, "every message fits a slot (a test checks)");
        let mut slot = [0u8; SLOT_BYTES];
        let length = message.len().min(SLOT_BYTES);
        slot[..length].copy_from_slice(&message[..length]);
        let entry = (slot, length as u8);
        if self.slots.len() < self.capacity {
            self.slots.push(entry);
            self.len += 1;
        } else {
            let at = (self.head + self.len) % self.capacity;
            self.slots[at] = entry;
            if self.len == self.capacity {
                self.head = (self.head + 1) % self.capacity;
                self.first += 1;
            } else {
                self.len += 1;
            }
        }
        debug_assert!(self.len <= self.capacity && self.len <= self.slots.len());
        debug_assert!(self.head < self.slots.len());
    }

    /// Moves every number by `delta` (a cluster's numbering was taken up); messages
    /// whose number would fall below 1 are dropped.
    fn renumber(&mut self, delta: i64) {
        let first = i128::from(self.first) + i128::from(delta);
        if first < 1 {
            let dropped = usize::try_from(1 - first).unwrap_or(usize::MAX).min(self.len);
            if self.slots.len() < self.capacity {
                // Still growing (`push` appends): the oldest is the first slot.
                debug_assert!(self.head == 0 && self.len == self.slots.len());
                self.slots.drain(..dropped);
            } else {
                self.head = (self.head + dropped) % self.slots.len();
            }
            self.len -= dropped;
            self.first = 1;
        } else {
            self.first = u64::try_from(first).unwrap_or(u64::MAX);
        }
    }

    fn get(&self, sequence: u64) -> Option<&[u8]> {
        if sequence < self.first || sequence >= self.end() {
            return None;
        }
        let at = (self.head + (sequence - self.first) as usize) % self.slots.len();
        let (bytes, length) = &self.slots[at];
        Some(&bytes[..usize::from(*length)])
    }
}

/// Sends one packet on the feed's socket, counting it (and a refusal).
fn send_packet(socket: &UdpSocket, destination: SocketAddr, figures: &FeedFigures, packet: &[u8]) {
    figures.packets.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    if socket.send_to(packet, destination).is_err() {
        figures.send_errors.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    }
}

pub struct Publisher {
    link: Arc<EngineLink>,
    builder: FeedBuilder,
    writer: PacketWriter,
    socket: UdpSocket,
    destination: SocketAddr,
    history: History,
    reference: Arc<Reference>,
    heartbeat: Duration,
    last_sent: Instant,
    messages: Vec<Message>,
    figures: Arc<FeedFigures>,
    /// The WebSocket channels served from here.
    channels: channels::Channels,
    /// The engine's last applied command when the books were seeded (`seed`).
    seeded_seq: Seq,
    /// Where each message is encoded on its way to the history and a packet.
    scratch: Vec<u8>,
    /// In a cluster: the node's share of the cluster's feed.
    cluster: Option<cluster::ClusterFeed>,
    /// How many of `messages`, from the first, come before the session (a cluster's
    /// numbering taken up after them): the channels get them, the feed does not.
    unnumbered: usize,
}

/// A session name: `kind` and `value` in base 36 (nine digits). One node's session is
/// `B` and its start time in milliseconds (nine digits last until the year 5100); a
/// cluster's, `C` and the cluster's id, or `D` and a time (`cluster`).
pub fn session_name(kind: u8, value: u64) -> Session {
    let mut digits = [b'0'; 9];
    let mut value = value;
    for slot in digits.iter_mut().rev() {
        *slot = b"0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZ"[(value % 36) as usize];
        value /= 36;
    }
    let mut session = [kind; mold::SESSION_BYTES];
    session[1..].copy_from_slice(&digits);
    session
}

/// The socket the feed is sent from: multicast out of `config.interface` with
/// `config.ttl`, looped back to this host's subscribers.
pub fn feed_socket(config: &MarketDataConfig) -> std::io::Result<UdpSocket> {
    let socket = socket2::Socket::new(
        socket2::Domain::IPV4,
        socket2::Type::DGRAM,
        Some(socket2::Protocol::UDP),
    )?;
    socket.set_multicast_if_v4(&config.interface)?;
    socket.set_multicast_ttl_v4(config.ttl)?;
    socket.set_multicast_loop_v4(true)?;
    socket.bind(&SocketAddr::from((config.interface, 0)).into())?;
    Ok(socket.into())
}

impl Publisher {
    pub fn new(
        link: Arc<EngineLink>,
        reference: Arc<Reference>,
        config: &MarketDataConfig,
        session: Session,
        figures: Arc<FeedFigures>,
        cluster: Option<cluster::ClusterFeed>,
    ) -> std::io::Result<Publisher> {
        Ok(Publisher {
            reference,
            link,
            builder: FeedBuilder::default(),
            writer: PacketWriter::new(session, 1),
            socket: feed_socket(config)?,
            destination: config.multicast,
            history: History::new(1, config.history_messages),
            heartbeat: Duration::from_millis(config.heartbeat_ms.max(1)),
            last_sent: Instant::now(),
            messages: Vec::new(),
            figures,
            channels: channels::Channels::default(),
            seeded_seq: Seq::ZERO,
            scratch: Vec::with_capacity(SLOT_BYTES),
            cluster,
            unnumbered: 0,
        })
    }

    /// Starts the books from the engine's (what it recovered, or what the demo set up):
    /// every resting order and halt, as of the engine's last applied command. Releases
    /// of commands up to that one are then skipped.
    fn seed(&mut self) -> std::io::Result<()> {
        let read = |venue: &bourse_core::Venue| {
            let exchange = venue.exchange();
            let activity = venue.activity();
            let mut orders = Vec::new();
            let mut halted = Vec::new();
            for index in 0..exchange.instruments().len() {
                let instrument = InstrumentId(index as u32);
                if venue.is_halted(instrument) {
                    halted.push(instrument);
                }
                for side in [bourse_core::Side::Buy, bourse_core::Side::Sell] {
                    exchange.book(instrument).for_each_order(side, |order| {
                        let order_id = activity
                            .and_then(|activity| activity.order_by_client(order.account, &order.id))
                            .map(|record| record.order_id);
                        orders.push((
                            order_id,
                            instrument,
                            order.account,
                            order.id.clone(),
                            side,
                            order.price,
                            order.remaining,
                        ));
                    });
                }
            }
            (orders, halted, Reference::read(exchange))
        };
        let ((orders, halted, reference), seq) = self
            .link
            .read_at_seq_blocking(read)
            .map_err(|error| std::io::Error::other(format!("the engine's books: {error}")))?;
        let seq = Seq(seq);
        let mut seeds = Vec::with_capacity(orders.len());
        for (order_id, instrument, account, id, side, price, qty) in orders {
            let order = order_id.ok_or_else(|| {
                std::io::Error::other(format!(
                    "a resting order of account {} has no record",
                    account.0
                ))
            })?;
            seeds.push(bourse_marketdata::derive::SeedOrder {
                order,
                instrument,
                account,
                id,
                side,
                price,
                qty,
            });
        }
        self.builder
            .seed(seq, seeds, &halted)
            .map_err(|error| std::io::Error::other(format!("the engine's books: {error}")))?;
        self.reference = Arc::new(reference);
        // Every instrument is in the directory from the start (snapshots carry it).
        let instruments: Vec<(InstrumentId, String, u8, u8, u8)> = self
            .reference
            .instruments
            .iter()
            .enumerate()
            .map(|(index, info)| {
                let decimals = |value: u32| u8::try_from(value).unwrap_or(u8::MAX);
                (
                    InstrumentId(index as u32),
                    info.symbol.clone(),
                    decimals(info.price_decimals),
                    decimals(info.qty_decimals),
                    directory_kind(info),
                )
            })
            .collect();
        for (instrument, symbol, price_decimals, qty_decimals, kind) in instruments {
            self.builder.announce(
                instrument,
                &symbol,
                price_decimals,
                qty_decimals,
                kind,
                &mut Vec::new(),
            );
        }
        self.seeded_seq = seq;
        self.figures.applied_seq.fetch_max(seq.0, std::sync::atomic::Ordering::Relaxed);
        if let Some(cluster) = &mut self.cluster {
            // The cluster's session goes on: a node that starts at the log's beginning
            // numbers as every node did; one that restarted waits for an anchor.
            cluster.anchored = seq == Seq::ZERO;
            cluster.mark(seq, self.history.end());
            return Ok(());
        }
        // The session opens with the books as they stand (directory, halts, every
        // resting order, the best bids and offers): a subscriber that follows it from
        // its first message needs no snapshot.
        let snapshot = self.builder.snapshot(0);
        self.messages.extend(snapshot[1..snapshot.len() - 1].iter().cloned());
        for index in 0..self.builder.books().instrument_count() {
            let instrument = InstrumentId(index as u32);
            let bbo = self.builder.books().bbo(instrument);
            if bbo != Default::default() {
                let (bid_price, bid_qty) = bbo.bid.unwrap_or_default();
                let (ask_price, ask_qty) = bbo.ask.unwrap_or_default();
                self.messages.push(Message::Bbo {
                    seq,
                    ts: TimestampNs::ZERO,
                    instrument,
                    bid_price,
                    bid_qty,
                    ask_price,
                    ask_qty,
                });
            }
        }
        Ok(())
    }

    /// Runs until `Stop` (or every sender is gone): the session's start, every
    /// release, heartbeats when idle, the session's end.
    pub fn run(mut self, inputs: Receiver<Input>) {
        // (A cluster's session neither starts nor ends with one node.)
        if self.cluster.is_none() {
            self.messages.insert(0, Message::SystemEvent { ts: now_ns(), code: START_OF_SESSION });
        }
        self.publish();
        // A node of a cluster looks often whether it leads.
        let wait = match self.cluster {
            Some(_) => self.heartbeat.min(LEADERSHIP_LOOK),
            None => self.heartbeat,
        };
        loop {
            match inputs.recv_timeout(wait) {
                Ok(Input::Released(released)) => {
                    self.on_release(&released);
                    // Whatever else waits goes into the same packets.
                    while let Ok(input) = inputs.try_recv() {
                        match input {
                            Input::Released(released) => self.on_release(&released),
                            other => {
                                self.publish();
                                if !self.answer(other) {
                                    return self.end();
                                }
                            }
                        }
                    }
                    self.publish();
                }
                Ok(other) => {
                    if !self.answer(other) {
                        return self.end();
                    }
                }
                Err(RecvTimeoutError::Timeout) => {}
                Err(RecvTimeoutError::Disconnected) => return self.end(),
            }
            self.lead();
            if self.sends() && self.last_sent.elapsed() >= self.heartbeat {
                let heartbeat =
                    mold::header(&self.writer.session(), self.writer.next_sequence(), 0);
                self.send(&heartbeat);
            }
        }
    }

    fn end(mut self) {
        if self.cluster.is_some() {
            return;
        }
        self.messages.push(Message::SystemEvent { ts: now_ns(), code: END_OF_SESSION });
        self.publish();
        let end =
            mold::header(&self.writer.session(), self.writer.next_sequence(), mold::END_OF_SESSION);
        self.send(&end);
    }

    /// Answers a request; `false` for `Stop`.
    fn answer(&mut self, input: Input) -> bool {
        match input {
            Input::Released(released) => {
                self.on_release(&released);
                self.publish();
            }
            Input::Snapshot(reply) => {
                if !self.numbers() {
                    // (Closed empty: the subscriber asks another node.)
                    return true;
                }
                let covered = self.writer.next_sequence() - 1;
                let mut bytes = Vec::new();
                for message in self.builder.snapshot(covered) {
                    services::frame(&message.to_bytes(), &mut bytes);
                }
                let _ = reply.send(bytes);
                self.figures.snapshots.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            }
            Input::Retransmit { session, first, count, reply } => {
                if session != self.writer.session() || !self.numbers() {
                    return true;
                }
                self.figures.retransmit_requests.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                let _ = reply.send(self.retransmit(first, count));
            }
            Input::Anchor(anchor) => self.take_anchor(anchor),
            Input::Channels(HubCommand::Subscribe {
                connection,
                channel,
                outbound,
                acknowledgement,
            }) => {
                let state =
                    channels::FeedState { builder: &self.builder, reference: &self.reference };
                self.channels.subscribe(connection, channel, outbound, acknowledgement, &state);
            }
            Input::Channels(HubCommand::Unsubscribe { connection, channel }) => {
                self.channels.unsubscribe(connection, &channel)
            }
            Input::Channels(HubCommand::Disconnected { connection }) => {
                self.channels.disconnected(connection)
            }
            Input::Channels(HubCommand::Barrier(reply)) => {
                let _ = reply.send(());
            }
            Input::Stop => return false,
        }
        true
    }

    fn retransmit(&self, first: u64, count: u64) -> Vec<Vec<u8>> {
        let session = self.writer.session();
        if first < self.history.first {
            return vec![mold::header(&session, self.history.first, RANGE_GONE).to_vec()];
        }
        let end = first.saturating_add(count.min(RETRANSMIT_MESSAGES_MAX)).min(self.history.end());
        let mut packets = Vec::new();
        let mut writer = PacketWriter::new(session, first);
        for sequence in first..end {
            if let Some(message) = self.history.get(sequence) {
                writer.push(message, |packet| packets.push(packet.to_vec()));
            }
        }
        writer.flush(|packet| packets.push(packet.to_vec()));
        packets
    }

    /// Adds a release's messages to those waiting to be published (`publish`).
    fn on_release(&mut self, released: &Released) {
        let mut notes = released.notes.iter().peekable();
        for outcome in &released.outcomes {
            let Outcome::Applied(result) = outcome else { continue };
            let events = released.events_of(result);
            let note = notes.next_if(|note| note.seq() == result.seq);
            if result.seq <= self.seeded_seq {
                continue; // (In the books the feed started from.)
            }
            self.announce_instruments(events, note);
            self.builder.apply(result.seq, result.ts, events, note, &mut self.messages);
            let next = self.next_number();
            if let Some(cluster) = &mut self.cluster {
                cluster.mark(result.seq, next);
                while let Some(anchor) = self.cluster.as_mut().and_then(|feed| feed.due(result.seq))
                {
                    self.take_anchor(anchor);
                }
            }
        }
        if let Some(last) = released.outcomes.iter().rev().find_map(|outcome| match outcome {
            Outcome::Applied(result) => Some(result.seq.0),
            _ => None,
        }) {
            self.figures.applied_seq.fetch_max(last, std::sync::atomic::Ordering::Relaxed);
        }
        self.figures
            .inconsistencies
            .store(self.builder.inconsistencies(), std::sync::atomic::Ordering::Relaxed);
    }

    /// Directory messages for instruments the feed has not announced yet.
    fn announce_instruments(&mut self, events: &[Event], note: Option<&bourse_core::BookNote>) {
        let mut instruments: Vec<InstrumentId> = events
            .iter()
            .filter_map(|event| match event {
                Event::Trade(trade) => Some(trade.instrument),
                Event::Done { instrument, .. } | Event::Amended { instrument, .. } => {
                    Some(*instrument)
                }
                _ => None,
            })
            .collect();
        match note {
            Some(bourse_core::BookNote::Rested { instrument, .. })
            | Some(bourse_core::BookNote::Halted { instrument, .. })
            | Some(bourse_core::BookNote::Declared { instrument, .. }) => {
                instruments.push(*instrument)
            }
            None => {}
        }
        for instrument in instruments {
            if self.builder.knows(instrument) {
                continue;
            }
            if self.reference.instrument(instrument).is_none() {
                self.reference = self.read_reference();
            }
            if let Some(info) = self.reference.instrument(instrument) {
                let price_decimals = u8::try_from(info.price_decimals).unwrap_or(u8::MAX);
                let symbol = info.symbol.clone();
                let qty_decimals = u8::try_from(info.qty_decimals).unwrap_or(u8::MAX);
                let kind = directory_kind(info);
                self.builder.announce(
                    instrument,
                    &symbol,
                    price_decimals,
                    qty_decimals,
                    kind,
                    &mut self.messages,
                );
            }
        }
    }

    /// The instruments as the engine has them now (a new one was declared).
    fn read_reference(&self) -> Arc<Reference> {
        match self.link.read_blocking(|venue| Reference::read(venue.exchange())) {
            Ok(reference) => Arc::new(reference),
            Err(_) => Arc::clone(&self.reference),
        }
    }

    /// The number the next message made will have (after those made and not yet
    /// published).
    fn next_number(&self) -> u64 {
        let waiting = self.messages.len().saturating_sub(self.unnumbered);
        self.history.end() + waiting as u64
    }

    /// Whether this node sends the feed to the group: alone, always; in a cluster, when
    /// it leads and knows the numbering.
    fn sends(&self) -> bool {
        self.cluster.as_ref().is_none_or(|cluster| cluster.sending)
    }

    /// Whether this node's messages have their numbers (it answers retransmission and
    /// snapshot requests only then).
    fn numbers(&self) -> bool {
        self.cluster.as_ref().is_none_or(|cluster| cluster.anchored && cluster.broken.is_none())
    }

    /// A cluster's anchor: checked against this node's numbering, or taken up.
    fn take_anchor(&mut self, anchor: cluster::FeedAnchor) {
        let current = self.writer.session();
        let Some(feed) = &mut self.cluster else { return };
        if feed.broken.is_some() {
            return;
        }
        let Some(session) = anchor.session() else {
            tracing::error!(?anchor, "a feed anchor of the log names no session");
            return;
        };
        if anchor.after_seq > self.builder.seq().0 {
            return feed.wait_for(anchor);
        }
        match feed.check(&anchor, session, current) {
            cluster::Anchoring::Agrees => {
                self.figures.anchors_checked.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            }
            cluster::Anchoring::Unknown => {}
            cluster::Anchoring::Differs { ours } => {
                let reason = format!(
                    "the feed's message after command {} is {} on the leader and {ours} here:                      a bug of the feed's making; this node's feed stops (its orders go on)",
                    anchor.after_seq, anchor.next_message
                );
                tracing::error!("{reason}");
                feed.broken = Some(reason);
                feed.sending = false;
                self.figures.anchor_mismatches.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            }
            cluster::Anchoring::Renumber { session, delta } => {
                feed.renumber(delta);
                // The messages made since the last publication (an anchor taken up in
                // the middle of a release) follow those kept; any that fall before the
                // session's first message are not numbered.
                let end = i128::from(self.history.end()) + i128::from(delta);
                self.history.renumber(delta);
                if end < 1 {
                    self.unnumbered =
                        usize::try_from(1 - end).unwrap_or(usize::MAX).min(self.messages.len());
                }
                self.writer = PacketWriter::new(session, self.history.end());
                tracing::info!(session = %anchor.session, after_seq = anchor.after_seq, next_message = anchor.next_message, "the feed takes up the cluster's numbering");
            }
        }
    }

    /// A node of a cluster: sends when it leads (re-sending what the old leader may not
    /// have), proposes anchors.
    fn lead(&mut self) {
        let next = self.next_number();
        let leads = self.cluster.is_some() && self.link.leads().is_ok();
        let session = self.writer.session();
        let started = self
            .cluster
            .as_mut()
            .is_some_and(|feed| feed.lead(leads, self.builder.seq(), next, session));
        if started {
            let first = self.history.end().saturating_sub(cluster::RESEND_ON_TAKEOVER);
            let packets =
                self.retransmit(first.max(self.history.first), cluster::RESEND_ON_TAKEOVER);
            tracing::info!(first, packets = packets.len(), "this node leads: it sends the feed");
            for packet in packets {
                send_packet(&self.socket, self.destination, &self.figures, &packet);
            }
            self.last_sent = Instant::now();
        }
        self.figures.sending.store(u64::from(self.sends()), std::sync::atomic::Ordering::Relaxed);
    }

    /// Numbers, keeps and sends the messages made so far.
    fn publish(&mut self) {
        let messages = std::mem::take(&mut self.messages);
        let sends = self.sends();
        let unnumbered = std::mem::take(&mut self.unnumbered);
        let Publisher { writer, socket, destination, history, figures, scratch, .. } = self;
        let mut sent = 0usize;
        for message in &messages[unnumbered.min(messages.len())..] {
            scratch.clear();
            message.encode(scratch);
            history.push(scratch);
            writer.push(scratch, |packet| {
                if sends {
                    send_packet(socket, *destination, figures, packet);
                    sent += 1;
                }
            });
        }
        writer.flush(|packet| {
            if sends {
                send_packet(socket, *destination, figures, packet);
                sent += 1;
            }
        });
        if sent > 0 {
            self.last_sent = Instant::now();
        }
        self.figures
            .messages
            .fetch_add(messages.len() as u64, std::sync::atomic::Ordering::Relaxed);
        if !self.channels.is_empty() {
            let state = channels::FeedState { builder: &self.builder, reference: &self.reference };
            self.channels.on_messages(&messages, &state);
        }
        self.messages = messages;
        self.messages.clear();
    }

    fn send(&mut self, packet: &[u8]) {
        self.last_sent = Instant::now();
        send_packet(&self.socket, self.destination, &self.figures, packet);
    }
}

fn now_ns() -> TimestampNs {
    TimestampNs(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |elapsed| elapsed.as_nanos() as u64),
    )
}

/// Starts the publisher thread on `inputs` (whose sender the tap sink holds).
pub fn spawn(
    link: Arc<EngineLink>,
    reference: Arc<Reference>,
    config: &MarketDataConfig,
    inputs: Receiver<Input>,
    (session, figures, cluster): (Session, Arc<FeedFigures>, Option<cluster::ClusterFeed>),
) -> std::io::Result<std::thread::JoinHandle<()>> {
    let mut publisher = Publisher::new(link, reference, config, session, figures, cluster)?;
    publisher.seed()?;
    std::thread::Builder::new().name("bourse-md".into()).spawn(move || {
        // Market data follows the order path; it never goes ahead of it.
        bourse_engine::run_in_background();
        publisher.run(inputs)
    })
}

/// The feed directory's kind of an instrument.
fn directory_kind(info: &crate::reference::InstrumentInfo) -> u8 {
    match info.is_future() {
        true => bourse_marketdata::message::KIND_FUTURE,
        false => bourse_marketdata::message::KIND_SPOT,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_message_fits_a_history_slot() {
        for kind in 0..=255u8 {
            if let Some(length) = bourse_marketdata::message::layout_len(kind) {
                assert!(length <= SLOT_BYTES, "{:?} is {length} bytes", kind as char);
            }
        }
    }

    #[test]
    fn the_history_keeps_the_newest_messages_in_order_and_forgets_the_oldest() {
        let mut history = History::new(1, 3);
        for value in 1..=5u8 {
            history.push(&[value; 3]);
        }
        assert_eq!((history.first, history.end()), (3, 6));
        assert_eq!(history.get(2), None);
        assert_eq!(history.get(3), Some(&[3u8; 3][..]));
        assert_eq!(history.get(5), Some(&[5u8; 3][..]));
        assert_eq!(history.get(6), None);
    }

    #[test]
    fn renumbering_the_history_moves_every_number_and_drops_those_below_one() {
        let mut history = History::new(1, 8);
        for value in 1..=5u8 {
            history.push(&[value; 2]);
        }
        history.renumber(100);
        assert_eq!((history.first, history.end()), (101, 106));
        assert_eq!(history.get(103), Some(&[3u8; 2][..]));
        history.renumber(-102);
        assert_eq!((history.first, history.end()), (1, 4));
        assert_eq!(history.get(1), Some(&[3u8; 2][..]));
        history.push(&[6; 2]);
        assert_eq!(history.get(4), Some(&[6u8; 2][..]));
        history.renumber(-10);
        assert_eq!((history.first, history.end()), (1, 1));
        history.push(&[7; 2]);
        assert_eq!(history.get(1), Some(&[7u8; 2][..]));
        // Once full, the ring drops from its head.
        let mut full = History::new(1, 3);
        for value in 1..=4u8 {
            full.push(&[value; 2]);
        }
        full.renumber(-2);
        assert_eq!((full.first, full.end()), (1, 3));
        assert_eq!(full.get(1), Some(&[3u8; 2][..]));
        full.push(&[5; 2]);
        full.push(&[6; 2]);
        full.push(&[8; 2]);
        assert_eq!((full.first, full.end()), (3, 6));
        assert_eq!(full.get(3), Some(&[5u8; 2][..]));
        assert_eq!(full.get(5), Some(&[8u8; 2][..]));
    }
}
