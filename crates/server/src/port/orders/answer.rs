//! What order entry answers, before any gateway renders it: the stamp of an accepted
//! command, a new order as it stands after its command with its fills, or an order as
//! it stands right after a cancel or amend. Refusals are `ApiError`s (a reused client
//! order id carries the order it names). Each gateway renders these in its own
//! protocol (`json` for REST, the pipelined HTTP loop and WebSocket; `tcp` frames).

use std::sync::Arc;

use bourse_core::event::Event;
use bourse_core::ids::{AccountId, AssetId, OrderId, Seq, TimestampNs};
use bourse_core::venue::{Fill, Liquidity, OrderKind, OrderRecord, OrderStatus};
use bourse_core::{DoneReason, Qty};

use crate::reference::Reference;
use crate::render::Shown;

/// Where an accepted command stands in the engine: the order it acted on, its
/// sequence number and its time.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Stamp {
    /// A new order's id (its `seq`), or the order a cancel or amend named.
    pub order_id: OrderId,
    pub seq: Seq,
    pub ts_ns: TimestampNs,
}

/// A new order as it stands after its command, and its fills (all as the taker).
#[derive(Clone, Debug)]
pub struct Placed {
    pub record: OrderRecord,
    pub fills: Vec<Fill>,
    pub reference: Arc<Reference>,
}

/// How much of an answer a gateway renders, chosen per request when it is submitted
/// (what `Full` needs costs work the binary protocol does not want).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Detail {
    /// The stamp only.
    Stamp,
    /// A new order with its fills, or the order right after a cancel or amend (a read
    /// sequenced right behind the command).
    Full,
}

/// An accepted request's answer: its command's stamp, and with `Detail::Full` what it
/// shows.
#[derive(Clone, Debug)]
pub struct Answer {
    pub stamp: Stamp,
    pub view: View,
}

/// What an accepted request shows beyond its stamp.
#[derive(Clone, Debug)]
pub enum View {
    /// `Detail::Stamp`.
    Stamp,
    /// A new order, `Detail::Full`.
    Placed(Placed),
    /// The order right after a cancel or amend, `Detail::Full`.
    Order(Shown),
}

/// Builds a new order's `Placed` from the order as submitted (`record`, nothing
/// filled yet) and its command's events after the first (`accepted`).
pub fn placed_from_events(
    reference: &Arc<Reference>,
    mut record: OrderRecord,
    events: &[Event],
) -> Placed {
    let mut fills = Vec::new();
    let mut taker: Option<AccountId> = None;
    let mut trade_index = 0u32;
    for event in events {
        match event {
            Event::Trade(trade) => {
                taker = Some(trade.taker_account);
                record.account = trade.taker_account;
                record.filled += trade.qty;
                let fee_asset = reference
                    .instrument(trade.instrument)
                    .and_then(|info| reference.find_asset(info.fee_asset(trade.taker_side).0));
                fills.push(Fill {
                    seq: trade.seq,
                    trade_index,
                    order_id: record.order_id,
                    client_id: record.client_id.clone(),
                    instrument: trade.instrument,
                    side: trade.taker_side,
                    price: trade.price,
                    qty: trade.qty,
                    fee: trade.taker_fee,
                    fee_asset: fee_asset.unwrap_or(AssetId(0)),
                    liquidity: Liquidity::Taker,
                    ts_ns: record.created_ns,
                });
                trade_index += 1;
            }
            Event::Done { account, id, reason, filled, .. }
                if *id == record.client_id && taker.is_none_or(|taker| taker == *account) =>
            {
                record.account = *account;
                record.filled = *filled;
                record.status = status_of(*reason);
            }
            _ => {}
        }
    }
    if record.quote_qty.is_some() {
        // A spend-amount buy names no quantity: it bought what it filled (and it never
        // rests, so it is done by the end of its command).
        record.qty = record.filled;
    }
    debug_assert!(record.filled <= record.qty, "an order never fills beyond its quantity");
    record.remaining =
        if record.status == OrderStatus::Open { record.qty - record.filled } else { Qty(0) };
    if record.kind == OrderKind::Market {
        record.price = None;
    }
    Placed { record, fills, reference: Arc::clone(reference) }
}

pub fn status_of(reason: DoneReason) -> OrderStatus {
    match reason {
        DoneReason::Filled => OrderStatus::Filled,
        DoneReason::Canceled => OrderStatus::Canceled,
        DoneReason::Expired => OrderStatus::Expired,
        DoneReason::SelfTradePrevented => OrderStatus::SelfTradePrevented,
    }
}
