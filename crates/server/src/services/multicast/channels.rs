//! The feed's WebSocket channels, served from the publisher's thread so that each
//! subscriber's first message (the current state) and the updates after it come from
//! one point of the feed: `bbo` (the best bid and offer after each change), `l3` (every
//! order: a snapshot, then per release the changes in order) and `candles` (the current
//! candle of an interval after each trade). Each channel numbers its messages (`seq`,
//! per channel and instrument, from 1). Rendered to JSON once per message, however
//! many subscribers share it; a subscriber whose queue is full is disconnected
//! (`slow_consumer`), never waited for.

use std::collections::HashMap;
use std::sync::Arc;

use bourse_core::ids::InstrumentId;
use bourse_core::Side;
use bourse_marketdata::candles::{Candle, Candles, INTERVALS};
use bourse_marketdata::message::Message;
use bourse_marketdata::FeedBuilder;
use serde_json::{json, Value};

use crate::reference::{InstrumentInfo, Reference};
use crate::services::feed::channel::{Channel, FeedMessage, Outbound};

#[derive(Default)]
pub struct Channels {
    subscribers: HashMap<Channel, Vec<(u64, Outbound)>>,
    seqs: HashMap<Channel, u64>,
}

/// What the channels read of the publisher's state.
pub struct FeedState<'a> {
    pub builder: &'a FeedBuilder,
    pub candles: &'a Candles,
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
        if let Some(acknowledgement) = acknowledgement {
            outbound.send(&acknowledgement);
        }
        let subscribers = self.subscribers.entry(channel.clone()).or_default();
        subscribers.retain(|(known, _)| *known != connection);
        subscribers.push((connection, outbound.clone()));
        let seq = self.seqs.get(&channel).copied().unwrap_or(0);
        if let Some(first) = welcome(&channel, seq, state) {
            outbound.send(&FeedMessage::text_message(first.to_string()));
        }
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

    /// The updates one release's `messages` make, to the channels that have
    /// subscribers.
    pub fn on_messages(&mut self, messages: &[Message], state: &FeedState<'_>) {
        if self.subscribers.is_empty() {
            return;
        }
        let mut changes: Vec<(InstrumentId, Vec<Value>, u64)> = Vec::new();
        let mut traded: Vec<InstrumentId> = Vec::new();
        for message in messages {
            match message {
                Message::Bbo { instrument, .. } => {
                    let channel = Channel::Bbo(*instrument);
                    if self.subscribers.contains_key(&channel) {
                        if let Some(info) = state.reference.instrument(*instrument) {
                            let body = bbo_json(info, message);
                            self.publish(channel, body);
                        }
                    }
                }
                Message::Trade { instrument, .. } if !traded.contains(instrument) => {
                    traded.push(*instrument);
                }
                _ => {}
            }
            if let Some((instrument, change)) = l3_change(message, state) {
                if !self.subscribers.contains_key(&Channel::L3(instrument)) {
                    continue;
                }
                let seq = message.seq().unwrap_or(0);
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
            self.publish(Channel::L3(instrument), body);
        }
        for instrument in traded {
            for (index, (name, _)) in INTERVALS.iter().enumerate() {
                let channel = Channel::Candles(instrument, index as u8);
                if !self.subscribers.contains_key(&channel) {
                    continue;
                }
                let (Some(candle), Some(info)) = (
                    state.candles.current(instrument, index),
                    state.reference.instrument(instrument),
                ) else {
                    continue;
                };
                let body = json!({ "symbol": info.symbol, "interval": name, "data": candle_json(info, &candle) });
                self.publish(channel, body);
            }
        }
    }

    /// Sends `body` with the channel's name and next number to its subscribers.
    fn publish(&mut self, channel: Channel, mut body: Value) {
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

/// A new subscriber's first message: the current best bid and offer, every order, or
/// the current candle. `seq` is the channel's number so far (the next update is
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
        Channel::Candles(instrument, interval) => {
            let info = state.reference.instrument(*instrument)?;
            let candle = state.candles.current(*instrument, usize::from(*interval));
            let (name, _) = INTERVALS.get(usize::from(*interval))?;
            Some(json!({
                "channel": "candles", "symbol": info.symbol, "interval": name, "seq": seq,
                "type": "snapshot", "data": candle.map(|candle| candle_json(info, &candle)),
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

/// A candle as `[start_ns, open, high, low, close, volume, trades]` (REST's too).
pub(crate) fn candle_json(info: &InstrumentInfo, candle: &Candle) -> Value {
    json!([
        candle.start_ns,
        info.price(candle.open.0),
        info.price(candle.high.0),
        info.price(candle.low.0),
        info.price(candle.close.0),
        info.qty(candle.volume.0),
        candle.trades
    ])
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
