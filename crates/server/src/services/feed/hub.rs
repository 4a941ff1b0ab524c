//! The hub: one task that turns the engine's tap (every command's events, once durable)
//! into channel messages and hands them to the subscribed connections.
//!
//! Each channel stream (trades of BTC-USD, alice's fills, ...) numbers its messages
//! 1, 2, 3, ...; a client that sees a gap missed something and resubscribes. Public
//! depth is conflated: every `DEPTH_TICK` the hub reads the top `DEPTH_LEVELS` of the
//! books that changed and sends the difference from what it sent last (a snapshot to a
//! new subscriber, then deltas). A connection whose queue is full is disconnected
//! (`slow_consumer`): the hub never waits for a client and never drops a message for a
//! connection it keeps. If the hub itself falls behind the engine (its queue of
//! releases fills), every connection is closed with `resync`, so nobody misses private
//! events without knowing. The `candles` channels are the candle service's, and the
//! multicast feed's (`bbo`, `l3`) its publisher's, not the hub's: the hub hands their
//! subscriptions over (`Channel::served_by`).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bourse_core::event::BookNote;
use bourse_core::ids::{AccountId, ClientOrderId, InstrumentId};
use bourse_core::{Event, Side, TimestampNs};
use bourse_engine::{Outcome, Released};
// The hub's tables are keyed by the engine's own ids and channels, never by a name a
// client chose: the fast hash is safe here, and it runs several times per event.
use rustc_hash::{FxHashMap as HashMap, FxHashSet as HashSet};
use serde_json::{json, Value};
use tokio::sync::mpsc;

use super::channel::{
    Channel, FeedBody, FeedMessage, FillMessage, ForwardTo, HubCommand, Outbound, ServedBy,
};
use super::market::{ticker_json, BookTop, DayFigures, Market, Tick, TradeRecord};
use super::quote::{tick_fields, ContractFigures, Quotes, QUOTE_LEVELS};
use crate::directory::Directory;
use crate::link::EngineLink;
use crate::metrics::{Metrics, ReasonLabels, ResultLabels};
use crate::port::error::ErrorCode;
use crate::reference::Reference;
use crate::render::{balances_json, levels_json, top_levels, Level};

/// Levels per side on the depth channel.
pub const DEPTH_LEVELS: usize = 50;
/// How often changed books are read and their deltas sent.
pub const DEPTH_TICK: Duration = Duration::from_millis(50);
/// Releases the hub takes in one round, at most.
const RELEASES_PER_ROUND: usize = 1_024;

// A round takes at most what the tap's queue holds, so a full queue is always several
// rounds behind, never one.
const _: () = assert!(RELEASES_PER_ROUND < super::tap::TAP_QUEUE_RELEASES);
// A quote's levels are read with the depth channel's.
const _: () = assert!(super::quote::QUOTE_LEVELS <= DEPTH_LEVELS);
// The depth channel's snapshot fits what REST's depth may show.
const _: () = assert!(DEPTH_LEVELS <= crate::render::DEPTH_LEVELS_MAX);

type Levels = Vec<Level>;

#[derive(Clone, Default, PartialEq, Eq)]
struct Book {
    bids: Levels,
    asks: Levels,
}

/// What the hub reads and writes besides its own state.
pub struct HubServices {
    pub link: Arc<EngineLink>,
    pub directory: Arc<Directory>,
    /// Recent trades and tickers, which the hub keeps and REST reads.
    pub market: Arc<Mutex<Market>>,
    pub metrics: Arc<Metrics>,
    /// The candle service's subscriptions.
    pub candles: ForwardTo,
    /// The multicast publisher's subscriptions, when the feed is on.
    pub market_data: Option<ForwardTo>,
}

pub struct Hub {
    services: HubServices,
    subscribers: HashMap<Channel, HashMap<u64, Outbound>>,
    seqs: HashMap<Channel, u64>,
    books: HashMap<InstrumentId, Book>,
    balances: HashMap<AccountId, Value>,
    /// The futures view last sent on each `positions` channel.
    positions: HashMap<AccountId, Value>,
    /// Every instrument's DIFF quote, from the trades and settlements seen.
    quotes: Quotes,
    books_changed: bool,
    overflowed: Arc<AtomicBool>,
    /// `/metrics` counters of accepted and rejected commands, looked up once.
    accepted: prometheus_client::metrics::counter::Counter,
    rejected: prometheus_client::metrics::counter::Counter,
}

/// What one release touched that private channels may need to show.
#[derive(Default)]
struct Touched {
    orders: HashSet<(AccountId, ClientOrderId)>,
    accounts: HashSet<AccountId>,
    every_balance: bool,
    traded: HashSet<InstrumentId>,
    latest_ns: TimestampNs,
    /// The trades' ticks, in order, until the book and open interest after them are read.
    ticks: Vec<PendingTick>,
}

/// A trade's tick before the book and the open interest after its round are known.
struct PendingTick {
    instrument: InstrumentId,
    ts_ns: TimestampNs,
    price: i64,
    day: DayFigures,
}

/// What the engine has of an instrument after a round: its book's best levels, and a
/// futures contract's figures.
type AfterRound = (InstrumentId, Arc<BookTop>, Option<ContractFigures>);

impl Hub {
    pub fn new(services: HubServices, overflowed: Arc<AtomicBool>) -> Hub {
        let commands_counter = |result: &'static str| {
            services.metrics.commands.get_or_create(&ResultLabels { result }).clone()
        };
        Hub {
            subscribers: HashMap::default(),
            seqs: HashMap::default(),
            books: HashMap::default(),
            balances: HashMap::default(),
            positions: HashMap::default(),
            quotes: Quotes::default(),
            books_changed: false,
            overflowed,
            accepted: commands_counter("accepted"),
            rejected: commands_counter("rejected"),
            services,
        }
    }

    fn market(&self) -> std::sync::MutexGuard<'_, Market> {
        self.services.market.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    pub async fn run(
        mut self,
        mut tap: mpsc::Receiver<Arc<Released>>,
        mut commands: mpsc::Receiver<HubCommand>,
    ) {
        let mut tick = tokio::time::interval(DEPTH_TICK);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                command = commands.recv() => match command {
                    Some(command) => self.on_command(command).await,
                    None => break,
                },
                released = tap.recv() => match released {
                    Some(released) => {
                        // Everything already waiting is taken together, so that the reads
                        // private channels need (records, balances) are one engine query
                        // per round, not one per release: the feed keeps up by batching,
                        // like the engine.
                        let mut releases = vec![released];
                        while releases.len() < RELEASES_PER_ROUND {
                            match tap.try_recv() {
                                Ok(released) => releases.push(released),
                                Err(_) => break,
                            }
                        }
                        self.on_releases(releases).await
                    }
                    None => break,
                },
                _ = tick.tick() => self.publish_depth().await,
            }
            if self.overflowed.swap(false, Ordering::SeqCst) {
                self.resync();
            }
        }
        for connections in self.subscribers.values() {
            for outbound in connections.values() {
                outbound.kill.kill(ErrorCode::ShuttingDown);
            }
        }
    }

    /// The hub fell behind the engine: close every connection (they resubscribe and get
    /// fresh snapshots) rather than let anyone miss events silently.
    fn resync(&mut self) {
        tracing::warn!("the feed fell behind the engine: closing every connection (resync)");
        for connections in self.subscribers.values() {
            for outbound in connections.values() {
                outbound.kill.kill(ErrorCode::Resync);
            }
        }
        self.subscribers.clear();
        self.books.clear();
        self.balances.clear();
    }

    async fn on_command(&mut self, command: HubCommand) {
        let command = match self.hand_over(command) {
            Some(command) => command,
            None => return,
        };
        match command {
            HubCommand::Subscribe { connection, channel, outbound, acknowledgement } => {
                let first = self.subscribers.get(&channel).is_none_or(HashMap::is_empty);
                self.subscribers
                    .entry(channel.clone())
                    .or_default()
                    .insert(connection, outbound.clone());
                if let Some(acknowledgement) = acknowledgement {
                    outbound.send(&acknowledgement);
                }
                self.welcome(&channel, &outbound, first).await;
            }
            HubCommand::Unsubscribe { connection, channel } => {
                if let Some(connections) = self.subscribers.get_mut(&channel) {
                    connections.remove(&connection);
                }
            }
            HubCommand::Barrier(reply) => {
                let _ = reply.send(());
            }
            HubCommand::Disconnected { connection } => {
                for connections in self.subscribers.values_mut() {
                    connections.remove(&connection);
                }
            }
        }
        self.subscribers.retain(|_, connections| !connections.is_empty());
    }

    /// Hands the subscriptions of the channels a service serves to it (and every
    /// disconnection, so that it forgets the connection too); the rest stays here.
    fn hand_over(&mut self, command: HubCommand) -> Option<HubCommand> {
        let services = &self.services;
        match command {
            HubCommand::Subscribe { ref channel, .. }
            | HubCommand::Unsubscribe { ref channel, .. } => match channel.served_by() {
                ServedBy::Hub => Some(command),
                ServedBy::Candles => {
                    (services.candles)(command);
                    None
                }
                // (Without the feed the gateways refuse its channels: nothing to hand.)
                ServedBy::Publisher => match &services.market_data {
                    Some(publisher) => {
                        publisher(command);
                        None
                    }
                    None => Some(command),
                },
            },
            HubCommand::Disconnected { connection } => {
                (services.candles)(HubCommand::Disconnected { connection });
                if let Some(publisher) = &services.market_data {
                    publisher(HubCommand::Disconnected { connection });
                }
                Some(HubCommand::Disconnected { connection })
            }
            other => Some(other),
        }
    }

    /// What a new subscriber gets first: a depth snapshot, the current ticker, quote,
    /// balances or futures view.
    async fn welcome(&mut self, channel: &Channel, outbound: &Outbound, first: bool) {
        match channel {
            Channel::Depth(instrument) => {
                if first || !self.books.contains_key(instrument) {
                    if let Some(book) = self.read_books(vec![*instrument]).await.pop() {
                        self.books.insert(*instrument, book.1);
                    }
                }
                let reference = self.services.directory.reference();
                let (Some(book), Some(info)) =
                    (self.books.get(instrument), reference.instrument(*instrument))
                else {
                    return;
                };
                let seq = self.seqs.get(channel).copied().unwrap_or(0);
                let message = json!({
                    "channel": "depth", "symbol": info.symbol, "seq": seq, "type": "snapshot",
                    "bids": levels_json(info, &book.bids), "asks": levels_json(info, &book.asks),
                });
                outbound.send(&FeedMessage::text_message(message.to_string()));
            }
            Channel::Quote(instrument) => {
                if let Some((_, book)) = self.read_books(vec![*instrument]).await.pop() {
                    self.quotes.on_book(*instrument, &book.bids, &book.asks, now_ns());
                }
                for (_, figures) in self.read_contract_figures(vec![*instrument]).await {
                    self.quotes.on_contract(*instrument, figures);
                }
                let reference = self.services.directory.reference();
                let Some(info) = reference.instrument(*instrument) else { return };
                let seq = self.seqs.get(channel).copied().unwrap_or(0);
                let message = json!({
                    "channel": "quote", "symbol": info.symbol, "seq": seq, "type": "snapshot",
                    "data": self.quotes.full_of(*instrument, info),
                });
                outbound.send(&FeedMessage::new(FeedBody::Json { channel: "quote", seq, message }));
            }
            Channel::Ticker(instrument) => {
                let reference = self.services.directory.reference();
                let Some(info) = reference.instrument(*instrument) else { return };
                let contract = if info.is_future() {
                    self.read_contract_figures(vec![*instrument]).await.pop()
                } else {
                    None
                };
                let open_interest = contract.map(|(_, figures)| figures.open_interest);
                let figures = self.market().figures(*instrument, now_ns());
                let seq = self.seqs.get(channel).copied().unwrap_or(0);
                let message = json!({
                    "symbol": info.symbol, "type": "snapshot",
                    "data": ticker_json(info, figures, open_interest),
                });
                outbound.send(&FeedMessage::new(FeedBody::Json {
                    channel: "ticker",
                    seq,
                    message,
                }));
            }
            Channel::Balances(account) => {
                self.balances.remove(account);
                self.publish_balances(vec![*account]).await;
            }
            Channel::Positions(account) => {
                self.positions.remove(account);
                self.publish_positions(vec![*account]).await;
            }
            _ => {}
        }
    }

    fn has(&self, channel: &Channel) -> bool {
        self.subscribers.contains_key(channel)
    }

    /// Notes that `account`'s order `id` changed, when someone follows the account's
    /// orders (`publish_orders` reads only those): no copy of the id otherwise.
    fn touch_order(&self, touched: &mut Touched, account: AccountId, id: &ClientOrderId) {
        if self.has(&Channel::Orders(account)) {
            touched.orders.insert((account, id.clone()));
        }
    }

    /// Sends JSON `message` on `channel` with the channel's next number.
    fn publish(&mut self, channel: Channel, message: Value) {
        let name = channel.name();
        self.publish_body(channel, |seq| FeedBody::Json { channel: name, seq, message });
    }

    /// Sends the body `make` builds for the channel's next number.
    fn publish_body(&mut self, channel: Channel, make: impl FnOnce(u64) -> FeedBody) {
        let Some(connections) = self.subscribers.get(&channel) else { return };
        let seq = self.seqs.entry(channel.clone()).or_insert(0);
        *seq += 1;
        debug_assert!(*seq > 0, "a channel's messages are numbered from 1");
        let message = FeedMessage::new(make(*seq));
        let mut gone = Vec::new();
        for (connection, outbound) in connections {
            if !outbound.send(&message) {
                gone.push(*connection);
            }
        }
        if let Some(connections) = self.subscribers.get_mut(&channel) {
            for connection in gone {
                connections.remove(&connection);
            }
        }
    }

    async fn on_releases(&mut self, releases: Vec<Arc<Released>>) {
        let mut touched = Touched::default();
        let highest = releases
            .iter()
            .flat_map(|released| released.events.iter())
            .filter_map(|event| match event {
                Event::Trade(trade) => Some(trade.instrument.index() + 1),
                Event::Done { instrument, .. } | Event::Amended { instrument, .. } => {
                    Some(instrument.index() + 1)
                }
                _ => None,
            })
            .max()
            .unwrap_or(0);
        let reference = match self.services.directory.reference_knowing(highest).await {
            Ok(reference) => reference,
            Err(_) => self.services.directory.reference(),
        };
        for released in &releases {
            for outcome in &released.outcomes {
                let Outcome::Applied(result) = outcome else { continue };
                let mut trade_index = 0u32;
                let events = released.events_of(result);
                for event in events {
                    self.books_changed = true;
                    let times = (result.ts, released.released_ns);
                    self.on_event(&reference, event, times, &mut trade_index, &mut touched);
                }
                // An operator's command (a deposit, a margin, a settlement, ...): a
                // settlement of a contract nobody held has no `settled` event, so the
                // contracts are read now, and a new day starts before a later trade.
                if matches!(events.first(), Some(Event::Accepted { account: None, .. }))
                    && !events.iter().any(|event| matches!(event, Event::Settled(_)))
                {
                    self.refresh_contracts(&reference, &mut touched).await;
                }
            }
            // A new order that rests is named by its note (its events name it only if it
            // traded).
            for note in &released.notes {
                if let BookNote::Rested { account, id, .. } = note {
                    self.touch_order(&mut touched, *account, id);
                }
            }
        }
        // One read of what the round's trades and settlements changed: the books' best
        // levels and the contracts' open interest, for the quotes, the tickers and the
        // round's ticks.
        let traded: Vec<InstrumentId> = touched.traded.drain().collect();
        let after = self.read_after_round(traded).await;
        for (instrument, book, contract) in &after {
            self.quotes.on_book(*instrument, &book.bids, &book.asks, touched.latest_ns);
            if let Some(contract) = contract {
                self.quotes.on_contract(*instrument, *contract);
            }
            let open_interest = contract.map(|contract| contract.open_interest);
            self.publish_ticker(&reference, *instrument, touched.latest_ns, open_interest);
            self.publish_quote(&reference, *instrument);
        }
        let ticks = std::mem::take(&mut touched.ticks);
        self.record_ticks(&reference, ticks, &after);
        self.publish_orders(&reference, &touched).await;
        // Any trade or settlement may move every futures account (positions are valued
        // at the mark price): each subscriber's view is read again, sent when it changed.
        let positions: Vec<AccountId> = self
            .subscribers
            .keys()
            .filter_map(|channel| match channel {
                Channel::Positions(account) => Some(*account),
                _ => None,
            })
            .collect();
        self.publish_positions(positions).await;
        self.publish_touched_balances(touched).await;
    }

    /// Each account's futures view, sent when it differs from what was sent last.
    async fn publish_positions(&mut self, mut accounts: Vec<AccountId>) {
        if accounts.is_empty() {
            return;
        }
        accounts.sort();
        let read = accounts.clone();
        let views = self
            .services
            .link
            .read(move |venue| {
                read.iter()
                    .map(|account| {
                        crate::services::clearing::view::futures_json(venue, Some(*account))
                    })
                    .collect::<Vec<Value>>()
            })
            .await
            .unwrap_or_default();
        for (account, shown) in accounts.into_iter().zip(views) {
            if self.positions.get(&account) == Some(&shown) {
                continue;
            }
            self.positions.insert(account, shown.clone());
            self.publish(Channel::Positions(account), json!({ "data": shown }));
        }
    }

    fn on_event(
        &mut self,
        reference: &Arc<Reference>,
        event: &Event,
        (ts, released_ns): (TimestampNs, TimestampNs),
        trade_index: &mut u32,
        touched: &mut Touched,
    ) {
        self.count(event);
        match event {
            Event::Trade(trade) => {
                let Some(info) = reference.instrument(trade.instrument) else { return };
                let trade_id = format!("{}-{}", trade.seq, trade_index);
                *trade_index += 1;
                let record = TradeRecord {
                    trade_id: trade_id.clone(),
                    price: trade.price.0,
                    qty: trade.qty.0,
                    taker_side: trade.taker_side,
                    ts_ns: ts,
                };
                self.market().record(trade.instrument, record);
                self.quotes.on_trade(trade.instrument, trade.price.0, trade.qty.0, ts);
                if let Some(day) = self.quotes.day(trade.instrument) {
                    touched.ticks.push(PendingTick {
                        instrument: trade.instrument,
                        ts_ns: ts,
                        price: trade.price.0,
                        day,
                    });
                }
                touched.traded.insert(trade.instrument);
                touched.latest_ns = touched.latest_ns.max(ts);
                if self.has(&Channel::Trades(trade.instrument)) {
                    self.publish(
                        Channel::Trades(trade.instrument),
                        json!({ "symbol": info.symbol, "data": {
                            "trade_id": trade_id, "price": info.price(trade.price.0), "qty": info.qty(trade.qty.0),
                            "taker_side": trade.taker_side.as_str(), "ts_ns": ts,
                            "released_ns": released_ns } }),
                    );
                }
                let trade_index_now = *trade_index - 1;
                for (account, client_id, side, fee, maker) in [
                    (
                        trade.maker_account,
                        &trade.maker_id,
                        trade.taker_side.opposite(),
                        trade.maker_fee,
                        true,
                    ),
                    (
                        trade.taker_account,
                        &trade.taker_id,
                        trade.taker_side,
                        trade.taker_fee,
                        false,
                    ),
                ] {
                    self.touch_order(touched, account, client_id);
                    touched.accounts.insert(account);
                    if self.has(&Channel::Fills(account)) {
                        let fill = FillMessage {
                            trade_seq: trade.seq,
                            trade_index: trade_index_now,
                            client_order_id: client_id.clone(),
                            instrument: trade.instrument,
                            side,
                            maker,
                            price: trade.price.0,
                            qty: trade.qty.0,
                            fee: fee.0,
                            ts_ns: ts,
                        };
                        let reference = Arc::clone(reference);
                        self.publish_body(Channel::Fills(account), |seq| FeedBody::Fill {
                            seq,
                            fill,
                            reference,
                        });
                    }
                }
            }
            Event::Done { account, id, .. } | Event::Amended { account, id, .. } => {
                self.touch_order(touched, *account, id);
                touched.accounts.insert(*account);
            }
            // An order, cancel, amend or liquidation: its account's balances moved (its
            // orders are named by their `done`, `amended` and trades, or by the book's
            // note when a new one rests).
            Event::Accepted { account: Some(account), .. } => {
                touched.accounts.insert(*account);
            }
            Event::Accepted { account: None, .. } => touched.every_balance = true,
            Event::Settled(settled) => {
                touched.accounts.insert(settled.account);
                self.quotes.on_settled(
                    settled.instrument,
                    settled.seq,
                    settled.price.0,
                    settled.side,
                    settled.qty.0,
                );
                touched.traded.insert(settled.instrument);
            }
            Event::Rejected { .. } => {}
        }
    }

    fn count(&self, event: &Event) {
        match event {
            Event::Accepted { .. } => self.accepted.inc(),
            Event::Rejected { reason, .. } => {
                self.rejected.inc();
                let rejects = &self.services.metrics.rejects;
                rejects.get_or_create(&ReasonLabels { reason: reason.code() }).inc()
            }
            Event::Trade(_) => self.services.metrics.trades.inc(),
            _ => 0,
        };
    }

    fn publish_ticker(
        &mut self,
        reference: &Reference,
        instrument: InstrumentId,
        now_ns: TimestampNs,
        open_interest: Option<i64>,
    ) {
        if !self.has(&Channel::Ticker(instrument)) {
            return;
        }
        let Some(info) = reference.instrument(instrument) else { return };
        let figures = self.market().figures(instrument, now_ns);
        let data = ticker_json(info, figures, open_interest);
        let message = json!({ "symbol": info.symbol, "data": data });
        self.publish(Channel::Ticker(instrument), message);
    }

    /// Every futures contract's figures, read now (after an operator's command):
    /// those whose day started are published with the round.
    async fn refresh_contracts(&mut self, reference: &Reference, touched: &mut Touched) {
        let contracts: Vec<InstrumentId> = (0..reference.instruments.len())
            .map(|index| InstrumentId(index as u32))
            .filter(|instrument| {
                reference.instrument(*instrument).is_some_and(|info| info.is_future())
            })
            .collect();
        for (instrument, figures) in self.read_contract_figures(contracts).await {
            if self.quotes.on_contract(instrument, figures) {
                touched.traded.insert(instrument);
            }
        }
    }

    async fn read_contract_figures(
        &self,
        instruments: Vec<InstrumentId>,
    ) -> Vec<(InstrumentId, ContractFigures)> {
        if instruments.is_empty() {
            return Vec::new();
        }
        self.services
            .link
            .read(move |venue| {
                instruments
                    .iter()
                    .filter_map(|instrument| {
                        Some((*instrument, contract_figures(venue.exchange(), *instrument)?))
                    })
                    .collect()
            })
            .await
            .unwrap_or_default()
    }

    /// The best levels of the books of `instruments`, and the futures contracts'
    /// figures, read from the engine in one query.
    async fn read_after_round(&self, instruments: Vec<InstrumentId>) -> Vec<AfterRound> {
        if instruments.is_empty() {
            return Vec::new();
        }
        self.services
            .link
            .read(move |venue| {
                let exchange = venue.exchange();
                instruments
                    .into_iter()
                    .filter(|instrument| instrument.index() < exchange.instruments().len())
                    .map(|instrument| {
                        let book = exchange.book(instrument);
                        let top = BookTop {
                            bids: top_levels(book, Side::Buy, QUOTE_LEVELS),
                            asks: top_levels(book, Side::Sell, QUOTE_LEVELS),
                        };
                        (instrument, Arc::new(top), contract_figures(exchange, instrument))
                    })
                    .collect()
            })
            .await
            .unwrap_or_default()
    }

    /// Keeps the round's ticks, in order, with the book and open interest read after
    /// it, and sends each instrument's new ones to its tick followers. Keeps the open
    /// interest at each contract's last settlement for the readers outside the hub.
    fn record_ticks(
        &mut self,
        reference: &Reference,
        ticks: Vec<PendingTick>,
        after: &[AfterRound],
    ) {
        if ticks.is_empty() && after.is_empty() {
            return;
        }
        let read: HashMap<InstrumentId, (&Arc<BookTop>, i64)> = after
            .iter()
            .map(|(instrument, book, contract)| {
                (*instrument, (book, contract.map_or(0, |contract| contract.open_interest)))
            })
            .collect();
        let mut followed: Vec<(InstrumentId, Vec<Tick>)> = Vec::new();
        {
            let mut market = self.market();
            for (instrument, _, contract) in after {
                if contract.is_some() {
                    market.set_pre_open_interest(
                        *instrument,
                        self.quotes.pre_open_interest(*instrument),
                    );
                }
            }
            for pending in ticks {
                let (book, open_interest) = read
                    .get(&pending.instrument)
                    .map(|(book, open_interest)| (Arc::clone(book), *open_interest))
                    .unwrap_or_default();
                let tick = market.record_tick(
                    pending.instrument,
                    (pending.ts_ns, pending.price),
                    pending.day,
                    book,
                    open_interest,
                );
                if self.has(&Channel::Ticks(pending.instrument)) {
                    match followed.iter_mut().find(|(known, _)| *known == pending.instrument) {
                        Some((_, ticks)) => ticks.push(tick),
                        None => followed.push((pending.instrument, vec![tick])),
                    }
                }
            }
        }
        for (instrument, ticks) in followed {
            let Some(info) = reference.instrument(instrument) else { continue };
            let data: serde_json::Map<String, Value> = ticks
                .iter()
                .map(|tick| (tick.id.to_string(), Value::Object(tick_fields(info, tick))))
                .collect();
            let message = json!({ "symbol": info.symbol, "data": data });
            self.publish(Channel::Ticks(instrument), message);
        }
    }

    /// Sends the instrument's quote fields that changed to its followers.
    fn publish_quote(&mut self, reference: &Reference, instrument: InstrumentId) {
        if !self.has(&Channel::Quote(instrument)) {
            return;
        }
        let Some(info) = reference.instrument(instrument) else { return };
        let Some(changed) = self.quotes.changes(instrument, info) else { return };
        let message = json!({ "symbol": info.symbol, "data": changed });
        self.publish(Channel::Quote(instrument), message);
    }

    /// The records of the orders this release changed, for accounts that follow them.
    async fn publish_orders(&mut self, reference: &Arc<Reference>, touched: &Touched) {
        // Only followed accounts' orders are touched (`touch_order`).
        let wanted: Vec<(AccountId, ClientOrderId)> = touched.orders.iter().cloned().collect();
        if wanted.is_empty() {
            return;
        }
        let records = self
            .services
            .link
            .read(move |venue| {
                let Some(activity) = venue.activity() else { return Vec::new() };
                wanted
                    .iter()
                    .filter_map(|(account, id)| activity.order_by_client(*account, id).cloned())
                    .collect::<Vec<_>>()
            })
            .await
            .unwrap_or_default();
        let mut records = records;
        records.sort_by_key(|record| (record.updated_ns, record.order_id));
        for record in records {
            let reference = Arc::clone(reference);
            self.publish_body(Channel::Orders(record.account), |seq| FeedBody::Order {
                seq,
                record,
                reference,
            });
        }
    }

    async fn publish_touched_balances(&mut self, touched: Touched) {
        let mut accounts: Vec<AccountId> = self
            .subscribers
            .keys()
            .filter_map(|channel| match channel {
                Channel::Balances(account)
                    if touched.every_balance || touched.accounts.contains(account) =>
                {
                    Some(*account)
                }
                _ => None,
            })
            .collect();
        accounts.sort();
        self.publish_balances(accounts).await;
    }

    /// Each account's balances, sent when they differ from what was sent last.
    async fn publish_balances(&mut self, accounts: Vec<AccountId>) {
        if accounts.is_empty() {
            return;
        }
        let balances = self
            .services
            .link
            .balances(accounts.iter().copied().map(Some).collect())
            .await
            .unwrap_or_default();
        for (account, assets) in accounts.into_iter().zip(balances) {
            let shown = balances_json(&assets);
            if self.balances.get(&account) == Some(&shown) {
                continue;
            }
            self.balances.insert(account, shown.clone());
            self.publish(Channel::Balances(account), json!({ "data": shown }));
        }
    }

    async fn read_books(&self, instruments: Vec<InstrumentId>) -> Vec<(InstrumentId, Book)> {
        self.services
            .link
            .read(move |venue| {
                let exchange = venue.exchange();
                instruments
                    .into_iter()
                    .filter(|instrument| instrument.index() < exchange.instruments().len())
                    .map(|instrument| {
                        let book = exchange.book(instrument);
                        let bids = top_levels(book, Side::Buy, DEPTH_LEVELS);
                        let asks = top_levels(book, Side::Sell, DEPTH_LEVELS);
                        (instrument, Book { bids, asks })
                    })
                    .collect()
            })
            .await
            .unwrap_or_default()
    }

    /// Reads the followed books that may have changed and sends their deltas.
    async fn publish_depth(&mut self) {
        if !self.books_changed {
            return;
        }
        self.books_changed = false;
        let mut followed: Vec<InstrumentId> = self
            .subscribers
            .keys()
            .filter_map(|channel| match channel {
                Channel::Depth(instrument) | Channel::Quote(instrument) => Some(*instrument),
                _ => None,
            })
            .collect();
        followed.sort();
        followed.dedup();
        if followed.is_empty() {
            return;
        }
        let reference = self.services.directory.reference();
        let now = now_ns();
        for (instrument, book) in self.read_books(followed).await {
            if self.has(&Channel::Quote(instrument))
                && self.quotes.on_book(instrument, &book.bids, &book.asks, now)
            {
                self.publish_quote(&reference, instrument);
            }
            if !self.has(&Channel::Depth(instrument)) {
                continue;
            }
            let previous = self.books.insert(instrument, book.clone()).unwrap_or_default();
            if previous == book {
                continue;
            }
            let Some(info) = reference.instrument(instrument) else { continue };
            let message = json!({
                "symbol": info.symbol, "type": "delta",
                "bids": levels_json(info, &changed_levels(&previous.bids, &book.bids)),
                "asks": levels_json(info, &changed_levels(&previous.asks, &book.asks)),
            });
            self.publish(Channel::Depth(instrument), message);
        }
    }
}

/// A futures contract's open interest and settlement price (`None` on spot).
fn contract_figures(
    exchange: &bourse_core::Exchange,
    instrument: InstrumentId,
) -> Option<ContractFigures> {
    let positions = exchange.positions(instrument)?;
    Some(ContractFigures {
        open_interest: positions.open_interest().0,
        settlement_price: positions.settlement_price().map(|price| price.0),
    })
}

/// The wall clock, for quote times that no event stamps (a book read on the tick).
fn now_ns() -> TimestampNs {
    TimestampNs(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |since| u64::try_from(since.as_nanos()).unwrap_or(u64::MAX)),
    )
}

/// The levels of `now` that differ from `before`, and `before`'s levels that are gone
/// (with quantity 0 and no orders).
fn changed_levels(before: &Levels, now: &Levels) -> Levels {
    let old: HashMap<i64, (i64, u32)> =
        before.iter().map(|(price, qty, count)| (*price, (*qty, *count))).collect();
    let new: HashSet<i64> = now.iter().map(|(price, _, _)| *price).collect();
    let mut changed: Levels = now
        .iter()
        .filter(|(price, qty, count)| old.get(price) != Some(&(*qty, *count)))
        .copied()
        .collect();
    changed.extend(
        before
            .iter()
            .filter(|(price, _, _)| !new.contains(price))
            .map(|(price, _, _)| (*price, 0, 0)),
    );
    changed
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_delta_holds_changed_and_new_levels_and_removes_the_gone_ones() {
        let before = vec![(100, 5, 1), (99, 3, 2), (98, 1, 1)];
        let now = vec![(101, 2, 1), (100, 5, 1), (99, 4, 3)];
        let mut changed = changed_levels(&before, &now);
        changed.sort();
        assert_eq!(changed, vec![(98, 0, 0), (99, 4, 3), (101, 2, 1)]);
        assert!(changed_levels(&now, &now).is_empty());
    }
}
