//! The feed's WebSocket channels, served from the publisher's thread so that each
//! subscriber's first message (the current state) and the updates after it come from
//! one point of the feed: `bbo` (the best bid and offer after each change) and `l3`
//! (every order: a snapshot, then per release the changes in order). Each channel
//! numbers its messages (`seq`, per channel and instrument, from 1). (The `candles`
//! channel is the candle service's, `services::candles`.)

use std::sync::Arc;

use bourse_core::ids::InstrumentId;
use bourse_core::{Seq, Side};
use bourse_marketdata::message::Message;
use bourse_marketdata::FeedBuilder;
use serde_json::{json, Value};

use crate::reference::{InstrumentInfo, Reference};
use crate::services::feed::channel::{Channel, FeedMessage, Outbound, Subscribers};

#[derive(Default)]
pub struct Channels {
    subscribers: Subscribers,
}

/// What the channels read of the publisher's state.
pub struct FeedState<'a> {
    pub builder: &'a FeedBuilder,
    pub reference: &'a Reference,
}

impl Channels {
    pub fn is_empty(&self) -> bool {
        self.subscribers.is_empty()
    }

    /// Adds a subscriber: its acknowledgement, then the channel's current state.
    pub fn subscribe(
        &mut self,
        connection: u64,
        channel: Channel,
        outbound: Outbound,
        acknowledgement: Option<Arc<FeedMessage>>,
        state: &FeedState<'_>,
    ) {
        self.subscribers.subscribe(
            connection,
            channel,
            outbound,
            acknowledgement,
            |channel, seq| welcome(channel, seq, state),
        );
    }

    pub fn unsubscribe(&mut self, connection: u64, channel: &Channel) {
        self.subscribers.unsubscribe(connection, channel);
    }

    pub fn disconnected(&mut self, connection: u64) {
        self.subscribers.disconnected(connection);
    }

    /// The updates one release's `messages` make, to the channels that have
    /// subscribers.
    pub fn on_messages(&mut self, messages: &[Message], state: &FeedState<'_>) {
        if self.subscribers.is_empty() {
            return;
        }
        let mut changes: Vec<(InstrumentId, Vec<Value>, Seq)> = Vec::new();
        for message in messages {
            if let Message::Bbo { instrument, .. } = message {
                let channel = Channel::Bbo(*instrument);
                if self.subscribers.has(&channel) {
                    if let Some(info) = state.reference.instrument(*instrument) {
                        let body = bbo_json(info, message);
                        self.subscribers.publish(channel, body);
                    }
                }
            }
            if let Some((instrument, change)) = l3_change(message, state) {
                if !self.subscribers.has(&Channel::L3(instrument)) {
                    continue;
                }
                let seq = message.seq().unwrap_or(Seq::ZERO);
                match changes.iter_mut().find(|(known, _, _)| *known == instrument) {
                    Some((_, list, last)) => {
                        list.push(change);
                        *last = seq;
                    }
                    None => changes.push((instrument, vec![change], seq)),
                }
            }
        }
        for (instrument, list, engine_seq) in changes {
            let symbol = state.reference.instrument(instrument).map(|info| info.symbol.clone());
            let body = json!({ "symbol": symbol, "type": "update", "engine_seq": engine_seq, "changes": list });
            self.subscribers.publish(Channel::L3(instrument), body);
        }
    }
}

/// A new subscriber's first message: the current best bid and offer, or every order.
/// `seq` is the channel's number so far (the next update is
/// `seq + 1`).
fn welcome(channel: &Channel, seq: u64, state: &FeedState<'_>) -> Option<Value> {
    let books = state.builder.books();
    let engine_seq = state.builder.seq();
    match channel {
        Channel::Bbo(instrument) => {
            let info = state.reference.instrument(*instrument)?;
            let bbo = books.bbo(*instrument);
            let side = |level: Option<(bourse_core::Price, bourse_core::Qty)>| {
                level.map(|(price, qty)| json!([info.price(price.0), info.qty(qty.0)]))
            };
            Some(json!({
                "channel": "bbo", "symbol": info.symbol, "seq": seq, "type": "snapshot",
                "engine_seq": engine_seq, "bid": side(bbo.bid), "ask": side(bbo.ask),
            }))
        }
        Channel::L3(instrument) => {
            let info = state.reference.instrument(*instrument)?;
            let side = |side| -> Vec<Value> {
                books
                    .orders(*instrument, side)
                    .into_iter()
                    .map(|(order, price, qty)| json!([order, info.price(price.0), info.qty(qty.0)]))
                    .collect()
            };
            Some(json!({
                "channel": "l3", "symbol": info.symbol, "seq": seq, "type": "snapshot",
                "engine_seq": engine_seq, "bids": side(Side::Buy), "asks": side(Side::Sell),
            }))
        }
        _ => None,
    }
}

fn bbo_json(info: &InstrumentInfo, message: &Message) -> Value {
    let Message::Bbo { seq, ts, bid_price, bid_qty, ask_price, ask_qty, .. } = message else {
        return Value::Null;
    };
    let side = |price: i64, qty: i64| (qty > 0).then(|| json!([info.price(price), info.qty(qty)]));
    json!({
        "symbol": info.symbol, "engine_seq": seq, "ts_ns": ts,
        "bid": side(bid_price.0, bid_qty.0), "ask": side(ask_price.0, ask_qty.0),
    })
}

/// A book message as an `l3` change, with its instrument: `["add", id, side, price,
/// qty]`, `["executed", id, qty]`, `["reduced", id, qty]`, `["deleted", id]`,
/// `["replaced", id, price, qty]`.
fn l3_change(message: &Message, state: &FeedState<'_>) -> Option<(InstrumentId, Value)> {
    let info = |instrument: &InstrumentId| state.reference.instrument(*instrument);
    Some(match message {
        Message::AddOrder { order, instrument, side, price, qty, .. } => {
            let info = info(instrument)?;
            (
                *instrument,
                json!(["add", order, side.as_str(), info.price(price.0), info.qty(qty.0)]),
            )
        }
        Message::Executed { order, instrument, qty, .. } => {
            (*instrument, json!(["executed", order, info(instrument)?.qty(qty.0)]))
        }
        Message::Reduced { order, instrument, qty, .. } => {
            (*instrument, json!(["reduced", order, info(instrument)?.qty(qty.0)]))
        }
        Message::Deleted { order, instrument, .. } => (*instrument, json!(["deleted", order])),
        Message::Replaced { order, instrument, price, qty, .. } => {
            let info = info(instrument)?;
            (*instrument, json!(["replaced", order, info.price(price.0), info.qty(qty.0)]))
        }
        _ => return None,
    })
}
