//! What flows from the feed to a connection: the channels a client may follow, the
//! messages on them (private ones typed, so a binary connection never goes through
//! JSON; JSON rendered once however many WebSocket connections share it), each
//! connection's bounded queue (`Outbound`) and the signal that closes a connection
//! (`Kill`). The hub, the candle service and the multicast publisher make these; the
//! gateways take them.

use std::sync::{Arc, Mutex};

use bourse_core::ids::{AccountId, ClientOrderId, InstrumentId};
use bourse_core::venue::OrderRecord;
use bourse_core::{Seq, Side, TimestampNs};
use serde_json::{json, Value};
use tokio::sync::{mpsc, Notify};

use crate::port::error::ErrorCode;
use crate::reference::{decimal, Reference};
use crate::render::order_json;

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Channel {
    Trades(InstrumentId),
    Ticker(InstrumentId),
    Depth(InstrumentId),
    /// The instrument's quote as the DIFF protocol names it (`quote`): the fields
    /// that changed, the whole quote first.
    Quote(InstrumentId),
    /// The instrument's ticks as the DIFF protocol shows them (`ticks`): each round's
    /// new ticks (`market::Tick`), by id.
    Ticks(InstrumentId),
    Orders(AccountId),
    Fills(AccountId),
    Balances(AccountId),
    /// The account's futures view: its account per settle asset and its positions
    /// (`futures::view`), sent when it changes.
    Positions(AccountId),
    /// The multicast feed's channels (served by its publisher): the best bid and
    /// offer, every order (L3).
    Bbo(InstrumentId),
    L3(InstrumentId),
    /// Candles at one interval (`bourse_marketdata::candles::INTERVALS` index), served
    /// by the candle service whether or not the multicast feed runs.
    Candles(InstrumentId, u8),
}

/// Who serves a channel's subscriptions: the hub itself, or a service it hands them to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ServedBy {
    Hub,
    /// The candle service (`services::candles`).
    Candles,
    /// The multicast feed's publisher (`services::multicast`), when the feed is on.
    Publisher,
}

impl Channel {
    pub fn name(&self) -> &'static str {
        match self {
            Channel::Trades(_) => "trades",
            Channel::Ticker(_) => "ticker",
            Channel::Depth(_) => "depth",
            Channel::Quote(_) => "quote",
            Channel::Ticks(_) => "ticks",
            Channel::Orders(_) => "orders",
            Channel::Fills(_) => "fills",
            Channel::Balances(_) => "balances",
            Channel::Positions(_) => "positions",
            Channel::Bbo(_) => "bbo",
            Channel::L3(_) => "l3",
            Channel::Candles(..) => "candles",
        }
    }

    pub fn served_by(&self) -> ServedBy {
        match self {
            Channel::Bbo(_) | Channel::L3(_) => ServedBy::Publisher,
            Channel::Candles(..) => ServedBy::Candles,
            Channel::Trades(_)
            | Channel::Ticker(_)
            | Channel::Depth(_)
            | Channel::Quote(_)
            | Channel::Ticks(_)
            | Channel::Orders(_)
            | Channel::Fills(_)
            | Channel::Balances(_)
            | Channel::Positions(_) => ServedBy::Hub,
        }
    }
}

/// Why a connection is being closed, and the signal to close it.
#[derive(Default)]
pub struct Kill {
    pub notify: Notify,
    pub reason: Mutex<Option<ErrorCode>>,
}

impl Kill {
    /// Ends the connection for `reason` (the first reason given is kept).
    pub fn kill(&self, reason: ErrorCode) {
        self.reason.lock().unwrap_or_else(|poisoned| poisoned.into_inner()).get_or_insert(reason);
        self.notify.notify_one();
    }

    pub fn reason(&self) -> Option<ErrorCode> {
        *self.reason.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

/// A fill on a private channel, in engine units: each protocol renders it.
#[derive(Clone, Debug)]
pub struct FillMessage {
    pub trade_seq: Seq,
    pub trade_index: u32,
    pub client_order_id: ClientOrderId,
    pub instrument: InstrumentId,
    pub side: Side,
    pub maker: bool,
    pub price: i64,
    pub qty: i64,
    /// In the asset this side received (base for a buyer, quote for a seller).
    pub fee: i64,
    pub ts_ns: TimestampNs,
}

/// What a channel message holds. Private messages stay typed, so that a binary
/// connection never goes through JSON; `FeedMessage::text` renders JSON once, for
/// WebSocket connections, however many share it.
pub enum FeedBody {
    /// Already JSON (acknowledgements, depth snapshots).
    Text(Arc<str>),
    /// JSON to which the channel's name and number are added.
    Json {
        channel: &'static str,
        seq: u64,
        message: Value,
    },
    Order {
        seq: u64,
        record: OrderRecord,
        reference: Arc<Reference>,
    },
    Fill {
        seq: u64,
        fill: FillMessage,
        reference: Arc<Reference>,
    },
}

pub struct FeedMessage {
    pub body: FeedBody,
    text: std::sync::OnceLock<Arc<str>>,
}

impl FeedMessage {
    pub fn new(body: FeedBody) -> Arc<FeedMessage> {
        Arc::new(FeedMessage { body, text: std::sync::OnceLock::new() })
    }

    pub fn text_message(text: String) -> Arc<FeedMessage> {
        FeedMessage::new(FeedBody::Text(Arc::from(text)))
    }

    /// The message as WebSocket JSON (rendered on first use).
    pub fn text(&self) -> Arc<str> {
        Arc::clone(self.text.get_or_init(|| match &self.body {
            FeedBody::Text(text) => Arc::clone(text),
            FeedBody::Json { channel, seq, message } => {
                let mut message = message.clone();
                message["channel"] = json!(channel);
                message["seq"] = json!(seq);
                Arc::from(message.to_string())
            }
            FeedBody::Order { seq, record, reference } => Arc::from(
                json!({ "channel": "orders", "seq": seq, "data": order_json(reference, record) })
                    .to_string(),
            ),
            FeedBody::Fill { seq, fill, reference } => {
                Arc::from(json!({ "channel": "fills", "seq": seq, "data": fill_json(reference, fill) }).to_string())
            }
        }))
    }
}

fn fill_json(reference: &Reference, fill: &FillMessage) -> Value {
    let Some(info) = reference.instrument(fill.instrument) else { return Value::Null };
    let (fee_asset, fee_decimals) = info.fee_asset(fill.side);
    json!({
        "trade_id": format!("{}-{}", fill.trade_seq, fill.trade_index),
        "client_order_id": fill.client_order_id.as_str(), "symbol": info.symbol,
        "side": fill.side.as_str(), "price": info.price(fill.price), "qty": info.qty(fill.qty),
        "fee": decimal(i128::from(fill.fee), fee_decimals), "fee_asset": fee_asset,
        "liquidity": if fill.maker { "maker" } else { "taker" }, "ts_ns": fill.ts_ns,
    })
}

/// Where a connection's messages go: its bounded queue.
#[derive(Clone)]
pub struct Outbound {
    pub sender: mpsc::Sender<Arc<FeedMessage>>,
    pub kill: Arc<Kill>,
}

impl Outbound {
    /// Queues `message`; a full queue kills the connection (`slow_consumer`).
    pub fn send(&self, message: &Arc<FeedMessage>) -> bool {
        match self.sender.try_send(Arc::clone(message)) {
            Ok(()) => true,
            Err(mpsc::error::TrySendError::Full(_)) => {
                tracing::info!("a client's queue is full: disconnecting it (slow_consumer)");
                self.kill.kill(ErrorCode::SlowConsumer);
                false
            }
            Err(mpsc::error::TrySendError::Closed(_)) => false,
        }
    }
}

/// What a connection asks of the hub (and of the service that serves a channel,
/// `ServedBy`, through it).
pub enum HubCommand {
    /// `acknowledgement` goes to the connection once the subscription is in place, so
    /// that every event the client causes after reading it finds the subscription.
    Subscribe {
        connection: u64,
        channel: Channel,
        outbound: Outbound,
        acknowledgement: Option<Arc<FeedMessage>>,
    },
    Unsubscribe {
        connection: u64,
        channel: Channel,
    },
    /// Answered once every command sent before it is in effect.
    Barrier(tokio::sync::oneshot::Sender<()>),
    Disconnected {
        connection: u64,
    },
}

/// Where the hub hands what a service serves (`ServedBy`): subscriptions to its
/// channels, and every disconnection.
pub type ForwardTo = Box<dyn Fn(HubCommand) + Send + Sync>;

/// The subscribers of the channels a service thread serves (the candle service, the
/// multicast publisher), and each channel's numbering: messages rendered to JSON once
/// however many subscribers share them; a subscriber whose queue is full is
/// disconnected (`slow_consumer`), never waited for.
#[derive(Default)]
pub struct Subscribers {
    subscribers: std::collections::HashMap<Channel, Vec<(u64, Outbound)>>,
    seqs: std::collections::HashMap<Channel, u64>,
}

impl Subscribers {
    pub fn is_empty(&self) -> bool {
        self.subscribers.is_empty()
    }

    pub fn has(&self, channel: &Channel) -> bool {
        self.subscribers.contains_key(channel)
    }

    /// Adds a subscriber: its acknowledgement, then the channel's current state, which
    /// `welcome` makes from the channel's number so far (the next update is one more).
    pub fn subscribe(
        &mut self,
        connection: u64,
        channel: Channel,
        outbound: Outbound,
        acknowledgement: Option<Arc<FeedMessage>>,
        welcome: impl FnOnce(&Channel, u64) -> Option<Value>,
    ) {
        if let Some(acknowledgement) = acknowledgement {
            outbound.send(&acknowledgement);
        }
        let seq = self.seqs.get(&channel).copied().unwrap_or(0);
        if let Some(first) = welcome(&channel, seq) {
            outbound.send(&FeedMessage::text_message(first.to_string()));
        }
        let subscribers = self.subscribers.entry(channel).or_default();
        subscribers.retain(|(known, _)| *known != connection);
        subscribers.push((connection, outbound));
    }

    pub fn unsubscribe(&mut self, connection: u64, channel: &Channel) {
        if let Some(subscribers) = self.subscribers.get_mut(channel) {
            subscribers.retain(|(known, _)| *known != connection);
        }
        self.subscribers.retain(|_, subscribers| !subscribers.is_empty());
    }

    pub fn disconnected(&mut self, connection: u64) {
        for subscribers in self.subscribers.values_mut() {
            subscribers.retain(|(known, _)| *known != connection);
        }
        self.subscribers.retain(|_, subscribers| !subscribers.is_empty());
    }

    /// Sends `body` with the channel's name and next number to its subscribers.
    pub fn publish(&mut self, channel: Channel, mut body: Value) {
        let seq = self.seqs.entry(channel.clone()).or_insert(0);
        *seq += 1;
        body["channel"] = json!(channel.name());
        body["seq"] = json!(*seq);
        let message = FeedMessage::text_message(body.to_string());
        if let Some(subscribers) = self.subscribers.get_mut(&channel) {
            // A subscriber gone, or too slow (its connection is being closed): dropped.
            subscribers.retain(|(_, outbound)| outbound.send(&message));
        }
        self.subscribers.retain(|_, subscribers| !subscribers.is_empty());
    }
}

/// Subscribes `connection` to `account`'s orders and fills (what an order-entry
/// connection follows, so that it hears of fills of orders entered elsewhere) and waits
/// until the subscriptions are in place, so that no fill or update of a request sent
/// afterwards can pass the hub before it knows the connection. `false` when the hub is
/// gone (the server is stopping).
pub async fn follow_orders_and_fills(
    hub: &mpsc::Sender<HubCommand>,
    connection: u64,
    account: AccountId,
    outbound: &Outbound,
) -> bool {
    for channel in [Channel::Orders(account), Channel::Fills(account)] {
        let command = HubCommand::Subscribe {
            connection,
            channel,
            outbound: outbound.clone(),
            acknowledgement: None,
        };
        if hub.send(command).await.is_err() {
            return false;
        }
    }
    let (reply, in_place) = tokio::sync::oneshot::channel();
    hub.send(HubCommand::Barrier(reply)).await.is_ok() && in_place.await.is_ok()
}
