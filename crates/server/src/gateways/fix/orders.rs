//! FIX's application messages, both ways: NewOrderSingle (D), OrderCancelRequest (F)
//! and OrderCancelReplaceRequest (G) decoded into order entry's requests (a missing
//! or wrong field is a session Reject saying which); and the ExecutionReports (8) and
//! OrderCancelRejects (9) the account's orders get, rendered from the engine's order
//! records and fills (`docs/fix.md` has the mapping of Bourse's order states to
//! ExecType and OrdStatus).
//!
//! `Orders` follows the account's open orders as far as the reports need (cumulative
//! quantity and cost, the FIX ClOrdID a replace gave), so that every fill, cancel or
//! replace is reported once whichever way it reaches the session (its own answer, or
//! the hub, for orders entered elsewhere). It never submits anything and never reads
//! the engine.

use std::borrow::Cow;
use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::Arc;

use bourse_core::command::OrderType;
use bourse_core::ids::{AccountId, ClientOrderId, OrderId};
use bourse_core::{Decimal, Offset, OrderSize, RejectReason, Side, StpMode, TimeInForce};
use bourse_protocol::fix::{tag, Message, Writer};

use super::session::{reject_reason, Kind, Outgoing, Refused};
use crate::gateways::shared::connection::Output;
use crate::port::error::{ApiError, ErrorCode};
use crate::port::orders::answer::Stamp;
use crate::port::orders::request::{self, CheckedClientOrderId, Request, Target};
use crate::port::queries::{OrderKind, OrderRecord, OrderStatus};
use crate::reference::{InstrumentInfo, Reference};
use crate::services::feed::channel::FillMessage;

/// An application message, decoded.
#[derive(Debug)]
pub enum Application<'a> {
    NewOrder(request::NewOrder<'a>),
    /// A NewOrderSingle whose fields are all well formed but which asks for something
    /// FIX defines and Bourse does not offer (a PositionEffect other than open, close
    /// and close today): answered with an ExecutionReport Rejected, `unsupported`
    /// (OrdRejReason 11). `order` is the order as read, for the report.
    Unsupported {
        order: request::NewOrder<'a>,
        message: &'static str,
    },
    Cancel(Change<'a>),
    Replace {
        change: Change<'a>,
        /// OrderQty (38): the new whole quantity, what has filled included (the engine
        /// takes off what has filled as it applies the amend).
        qty: Option<Decimal>,
        price: Option<Decimal>,
    },
}

/// PositionEffect (77) values, futures only (ignored on spot). FIX 4.4 has O (open)
/// and C (close); Bourse adds T (close today) for contracts with the close-today rule,
/// where C closes only positions opened before the day's settlement (`docs/fix.md`).
pub mod position_effect {
    pub const OPEN: &[u8] = b"O";
    pub const CLOSE: &[u8] = b"C";
    /// Bourse's own value: FIX has none for closing today's position.
    pub const CLOSE_TODAY: &[u8] = b"T";
    /// Values FIX defines that Bourse does not take: R (rolled) and F (FIFO) of FIX 4.4,
    /// N (close but notify on open) and D (default) of FIX 5.0 SP2.
    pub const UNSUPPORTED: [&[u8]; 4] = [b"R", b"F", b"N", b"D"];
}

/// The text of `unsupported` for a PositionEffect FIX defines but Bourse does not take.
const POSITION_EFFECT_UNSUPPORTED: &str =
    "PositionEffect (77) takes O (open), C (close) or T (close today; Bourse's value)";

/// What a cancel or a replace names.
#[derive(Clone, Debug)]
pub struct Change<'a> {
    /// ClOrdID (11): the request's own id.
    pub cl_ord_id: CheckedClientOrderId<'a>,
    /// OrigClOrdID (41): the order's current ClOrdID.
    pub orig_cl_ord_id: CheckedClientOrderId<'a>,
}

/// Decodes an application message of type `msg_type` (D, F or G; anything else is
/// `Ok(None)`). Never panics, whatever the fields hold.
pub fn decode<'a>(
    msg_type: &str,
    message: &Message<'a>,
) -> Result<Option<Application<'a>>, Refused> {
    match msg_type {
        "D" => new_order(message).map(Some),
        "F" => change(message).map(|change| Some(Application::Cancel(change))),
        "G" => {
            let change = change(message)?;
            let qty = decimal(message, tag::ORDER_QTY, "OrderQty")?;
            let price = decimal(message, tag::PRICE, "Price")?;
            if qty.is_none() && price.is_none() {
                return Err(Refused::missing(tag::ORDER_QTY, "OrderQty"));
            }
            Ok(Some(Application::Replace { change, qty, price }))
        }
        _ => Ok(None),
    }
}

fn required<'a>(message: &Message<'a>, tag: u32, name: &str) -> Result<&'a str, Refused> {
    match message.get(tag) {
        None => Err(Refused::missing(tag, name)),
        Some(value) => std::str::from_utf8(value).map_err(|_| {
            Refused::new(
                reject_reason::INCORRECT_DATA_FORMAT,
                Some(tag),
                format!("{name} ({tag}) is not text"),
            )
        }),
    }
}

fn decimal(message: &Message<'_>, tag: u32, name: &str) -> Result<Option<Decimal>, Refused> {
    let Some(value) = message.get(tag) else { return Ok(None) };
    let parsed = std::str::from_utf8(value).ok().and_then(Decimal::parse);
    match parsed {
        Some(decimal) if decimal.mantissa() > 0 => Ok(Some(decimal)),
        _ => Err(Refused::new(
            reject_reason::INCORRECT_DATA_FORMAT,
            Some(tag),
            format!("{name} ({tag}) must be a positive decimal"),
        )),
    }
}

fn client_order_id<'a>(
    message: &Message<'a>,
    tag: u32,
    name: &str,
) -> Result<CheckedClientOrderId<'a>, Refused> {
    let id = required(message, tag, name)?;
    CheckedClientOrderId::parse(id).map_err(|_| {
        Refused::incorrect(tag, name, "1 to 64 printable ASCII characters without spaces")
    })
}

fn new_order<'a>(message: &Message<'a>) -> Result<Application<'a>, Refused> {
    let cl_ord_id = client_order_id(message, tag::CL_ORD_ID, "ClOrdID")?;
    let symbol = required(message, tag::SYMBOL, "Symbol")?;
    let side = match required(message, tag::SIDE, "Side")? {
        "1" => Side::Buy,
        "2" => Side::Sell,
        _ => return Err(Refused::incorrect(tag::SIDE, "Side", "1 (buy) or 2 (sell)")),
    };
    let qty = decimal(message, tag::ORDER_QTY, "OrderQty")?
        .ok_or_else(|| Refused::missing(tag::ORDER_QTY, "OrderQty"))?;
    let order_type = match required(message, tag::ORD_TYPE, "OrdType")? {
        "1" => OrderType::Market,
        "2" => OrderType::Limit {
            price: decimal(message, tag::PRICE, "Price")?
                .ok_or_else(|| Refused::missing(tag::PRICE, "Price"))?,
        },
        _ => return Err(Refused::incorrect(tag::ORD_TYPE, "OrdType", "1 (market) or 2 (limit)")),
    };
    let time_in_force = match message.get(tag::TIME_IN_FORCE) {
        None | Some(b"0") => TimeInForce::GoodForDay,
        Some(b"1") => TimeInForce::GoodTillCancel,
        Some(b"3") => TimeInForce::ImmediateOrCancel,
        Some(b"4") => TimeInForce::FillOrKill,
        Some(_) => {
            return Err(Refused::incorrect(tag::TIME_IN_FORCE, "TimeInForce", "0, 1, 3 or 4"))
        }
    };
    // ExecInst (18): space-separated values; 6 (participate, don't initiate) is
    // post-only, the others are refused rather than ignored.
    let mut post_only = false;
    if let Some(exec_inst) = message.get(tag::EXEC_INST) {
        for value in exec_inst.split(|&byte| byte == b' ').filter(|value| !value.is_empty()) {
            match value {
                b"6" => post_only = true,
                _ => return Err(Refused::incorrect(tag::EXEC_INST, "ExecInst", "6 (post-only)")),
            }
        }
    }
    let (offset, unsupported) = match message.get(tag::POSITION_EFFECT) {
        None => (Offset::Open, false),
        Some(position_effect::OPEN) => (Offset::Open, false),
        Some(position_effect::CLOSE) => (Offset::Close, false),
        Some(position_effect::CLOSE_TODAY) => (Offset::CloseToday, false),
        Some(value) if position_effect::UNSUPPORTED.contains(&value) => (Offset::Open, true),
        Some(_) => {
            return Err(Refused::incorrect(
                tag::POSITION_EFFECT,
                "PositionEffect",
                "O (open), C (close) or T (close today)",
            ))
        }
    };
    let order = request::NewOrder {
        client_order_id: Some(cl_ord_id),
        symbol: Cow::Borrowed(symbol),
        side,
        order_type,
        size: OrderSize::of_qty(qty),
        time_in_force,
        post_only,
        stp: StpMode::None,
        offset,
    };
    Ok(match unsupported {
        true => Application::Unsupported { order, message: POSITION_EFFECT_UNSUPPORTED },
        false => Application::NewOrder(order),
    })
}

fn change<'a>(message: &Message<'a>) -> Result<Change<'a>, Refused> {
    let orig_cl_ord_id = client_order_id(message, tag::ORIG_CL_ORD_ID, "OrigClOrdID")?;
    let cl_ord_id = client_order_id(message, tag::CL_ORD_ID, "ClOrdID")?;
    Ok(Change { cl_ord_id, orig_cl_ord_id })
}

/// What the session keeps of a request in flight, to answer it.
pub enum Pending {
    /// A new order, as the client sent it.
    Place {
        cl_ord_id: String,
        order: Box<request::NewOrder<'static>>,
    },
    Change {
        cancel: bool,
        cl_ord_id: String,
        orig_cl_ord_id: String,
        order: ClientOrderId,
    },
}

/// An order the session follows.
struct Tracked {
    order_id: OrderId,
    /// Its FIX ClOrdID now (the last replace's).
    cl_ord_id: String,
    order_qty: i64,
    cum_qty: i64,
    /// Sum of price × quantity of its fills, in price units × quantity units.
    cost: i128,
    leaves: i64,
    price: Option<i64>,
    /// A record of the order that counts fills whose messages have not come yet (the
    /// hub reads an order's record after its release, when later releases may have
    /// filled it more): handled once they have.
    ahead: Option<OrderRecord>,
}

/// The account's open orders as its reports need them.
#[derive(Default)]
pub struct Orders {
    tracked: HashMap<ClientOrderId, Tracked>,
    /// A replace's new ClOrdID to the order's id in Bourse (which never changes).
    aliases: HashMap<String, ClientOrderId>,
    /// Fills of orders not yet followed, until their order record comes (in the same
    /// release: fills come before the records).
    early_fills: HashMap<ClientOrderId, Vec<FillMessage>>,
    /// Cancels and replaces in flight per order: their answers report them.
    changing: HashMap<ClientOrderId, u32>,
    /// Orders reported finished lately, oldest first (at most `FINISHED_KEPT`): a hub
    /// record of theirs that comes after their answer reported them is not news (a
    /// client order id is never used twice).
    finished: VecDeque<ClientOrderId>,
    finished_set: HashSet<ClientOrderId>,
    /// Orders created after this (their ids are the seq that made them) are followed
    /// from their start: every fill of theirs comes as a fill message.
    followed_after: Option<OrderId>,
}

/// Finished orders remembered, at most.
const FINISHED_KEPT: usize = 16_384;

/// Where reports go: the session's sending side and, when connected, the output.
pub struct Sink<'a> {
    pub out: &'a mut Outgoing,
    pub output: Option<&'a mut Output>,
}

impl Sink<'_> {
    fn send(&mut self) {
        self.out.send(Kind::Application, self.output.as_deref_mut());
    }
}

/// ExecType (150) and OrdStatus (39) values.
mod exec {
    pub const NEW: u8 = b'0';
    pub const PARTIAL: u8 = b'1';
    pub const FILLED: u8 = b'2';
    pub const CANCELED: u8 = b'4';
    pub const REPLACED: u8 = b'5';
    pub const REJECTED: u8 = b'8';
    pub const EXPIRED: u8 = b'C';
    pub const TRADE: u8 = b'F';
}

impl Orders {
    /// The order in Bourse a FIX ClOrdID names (its own id, or a replace's).
    pub fn resolve(&self, cl_ord_id: &str) -> ClientOrderId {
        self.aliases.get(cl_ord_id).cloned().unwrap_or_else(|| ClientOrderId::from(cl_ord_id))
    }

    /// A cancel or replace of `order` went to the engine: its answer reports it.
    pub fn changing(&mut self, order: &ClientOrderId) {
        *self.changing.entry(order.clone()).or_default() += 1;
    }

    fn changed(&mut self, order: &ClientOrderId) {
        if let Some(count) = self.changing.get_mut(order) {
            *count -= 1;
            if *count == 0 {
                self.changing.remove(order);
            }
        }
    }

    /// The session follows the account's orders and fills from the engine's command
    /// `seq` on: orders made after it are seen whole.
    pub fn follow_from(&mut self, seq: u64) {
        self.followed_after = Some(OrderId(seq));
    }

    /// A fill of the account's, from the hub.
    pub fn on_fill(&mut self, fill: &FillMessage, reference: &Arc<Reference>, sink: &mut Sink<'_>) {
        let Some(tracked) = self.tracked.get_mut(&fill.client_order_id) else {
            self.early_fills.entry(fill.client_order_id.clone()).or_default().push(fill.clone());
            return;
        };
        if let Some(info) = reference.instrument(fill.instrument) {
            report_fill(tracked, info, fill, sink);
        }
        // A record that was ahead of its fills is due once they have all come.
        let caught_up =
            tracked.ahead.as_ref().is_some_and(|ahead| tracked.cum_qty >= ahead.filled.0);
        if caught_up {
            if let Some(ahead) = tracked.ahead.take() {
                self.on_record(&ahead, reference, sink);
            }
        } else if tracked.leaves == 0 && tracked.ahead.is_none() {
            // Filled: its Trade report said so; its record may never come.
            self.forget(&fill.client_order_id);
        }
    }

    /// An order record of the account's, from the hub: a new order, or its state after
    /// fills, a cancel, an amend or its end.
    pub fn on_record(&mut self, record: &OrderRecord, reference: &Reference, sink: &mut Sink<'_>) {
        let Some(info) = reference.instrument(record.instrument) else { return };
        let id = &record.client_id;
        if self.finished_set.contains(id) {
            self.early_fills.remove(id);
            return;
        }
        let fills = self.early_fills.remove(id).unwrap_or_default();
        if !self.tracked.contains_key(id) {
            // An order followed from its start has every fill still to report (some as
            // early fills); one made before counts the fills it had then as done.
            let whole = self.followed_after.is_some_and(|after| record.order_id > after);
            let early: i64 = fills.iter().map(|fill| fill.qty).sum();
            let cum_qty = if whole { 0 } else { (record.filled.0 - early).max(0) };
            let order_qty = match record.status {
                OrderStatus::Open => record.remaining.0 + record.filled.0,
                _ => record.qty.0,
            };
            let tracked = Tracked {
                order_id: record.order_id,
                cl_ord_id: id.to_string(),
                order_qty,
                cum_qty,
                cost: i128::from(cum_qty) * i128::from(record.price.map_or(0, |price| price.0)),
                leaves: order_qty - cum_qty,
                price: record.price.map(|price| price.0),
                ahead: None,
            };
            if cum_qty == 0 {
                report(&tracked, info, record, exec::NEW, exec::NEW, sink, None);
            }
            self.tracked.insert(id.clone(), tracked);
        }
        let Some(tracked) = self.tracked.get_mut(id) else { return };
        for fill in &fills {
            report_fill(tracked, info, fill, sink);
        }
        if record.filled.0 > tracked.cum_qty {
            tracked.ahead = Some(record.clone());
            return;
        }
        tracked.ahead = None;
        if self.changing.contains_key(id) {
            return;
        }
        let price = record.price.map(|price| price.0);
        match record.status {
            OrderStatus::Open if price != tracked.price || record.remaining.0 != tracked.leaves => {
                // An amend made elsewhere (REST, the binary protocol).
                tracked.price = price;
                tracked.leaves = record.remaining.0;
                tracked.order_qty = tracked.cum_qty + tracked.leaves;
                let status = if tracked.cum_qty > 0 { exec::PARTIAL } else { exec::NEW };
                report(tracked, info, record, exec::REPLACED, status, sink, None);
            }
            OrderStatus::Open | OrderStatus::Filled => {}
            OrderStatus::Canceled | OrderStatus::SelfTradePrevented => {
                tracked.leaves = 0;
                report(tracked, info, record, exec::CANCELED, exec::CANCELED, sink, None);
            }
            OrderStatus::Expired => {
                tracked.leaves = 0;
                report(tracked, info, record, exec::EXPIRED, exec::EXPIRED, sink, None);
            }
        }
        if record.status != OrderStatus::Open {
            self.forget(id);
        }
    }

    /// A new order's answer (its command accepted): its New report, at once (the hub's
    /// record of it may come later, or never once the venue has forgotten a finished
    /// order), then any fills of it that came first. Nothing when the hub's record came
    /// first and reported it.
    pub fn on_placed(
        &mut self,
        pending: &Pending,
        stamp: &Stamp,
        account: AccountId,
        reference: &Reference,
        sink: &mut Sink<'_>,
    ) {
        let Pending::Place { cl_ord_id, order, .. } = pending else { return };
        let id = ClientOrderId::from(cl_ord_id.as_str());
        if self.tracked.contains_key(&id) || self.finished_set.contains(&id) {
            return;
        }
        let Some((instrument, info)) = reference.find_instrument(&order.symbol) else { return };
        let units = |value: Decimal, scale: u32| {
            value.to_units(scale).and_then(|units| i64::try_from(units).ok())
        };
        let (kind, price) = match order.order_type {
            OrderType::Limit { price } => (OrderKind::Limit, units(price, info.price_decimals)),
            OrderType::Market => (OrderKind::Market, None),
        };
        let Some(qty) = order.size.qty().and_then(|qty| units(qty, info.qty_decimals)) else {
            return;
        };
        let time_in_force = order.time_in_force.applied(order.order_type, info.is_future());
        let record = OrderRecord {
            order_id: stamp.order_id,
            account,
            client_id: id.clone(),
            instrument,
            side: order.side,
            kind,
            time_in_force,
            offset: order.offset,
            post_only: order.post_only && kind == OrderKind::Limit,
            stp: order.stp,
            price: price.map(bourse_core::Price),
            qty: bourse_core::Qty(qty),
            quote_qty: None,
            remaining: bourse_core::Qty(qty),
            filled: bourse_core::Qty(0),
            status: OrderStatus::Open,
            created_ns: stamp.ts_ns,
            updated_ns: stamp.ts_ns,
        };
        let mut tracked = Tracked {
            order_id: stamp.order_id,
            cl_ord_id: cl_ord_id.clone(),
            order_qty: qty,
            cum_qty: 0,
            cost: 0,
            leaves: qty,
            price,
            ahead: None,
        };
        report(&tracked, info, &record, exec::NEW, exec::NEW, sink, None);
        for fill in self.early_fills.remove(&id).unwrap_or_default() {
            report_fill(&mut tracked, info, &fill, sink);
        }
        let filled = tracked.leaves == 0;
        self.tracked.insert(id.clone(), tracked);
        if filled {
            self.forget(&id);
        }
    }

    /// A cancel's or replace's answer: the order right after it.
    pub fn on_changed(
        &mut self,
        pending: &Pending,
        record: &OrderRecord,
        reference: &Reference,
        sink: &mut Sink<'_>,
    ) {
        let Pending::Change { cancel, cl_ord_id, orig_cl_ord_id, order } = pending else { return };
        self.changed(order);
        let Some(info) = reference.instrument(record.instrument) else { return };
        // A change answered before the hub's record of the order came (a cancel sent
        // right behind its order): the order's own report goes first, as a client
        // expects a New before a report that names the order as OrigClOrdID.
        let unreported = !self.tracked.contains_key(order) && !self.finished_set.contains(order);
        let order_qty = match record.status {
            OrderStatus::Open => record.remaining.0 + record.filled.0,
            _ => record.qty.0,
        };
        let tracked = self.tracked.entry(order.clone()).or_insert_with(|| Tracked {
            order_id: record.order_id,
            cl_ord_id: orig_cl_ord_id.clone(),
            order_qty,
            cum_qty: record.filled.0,
            cost: i128::from(record.filled.0) * i128::from(record.price.map_or(0, |price| price.0)),
            leaves: order_qty - record.filled.0,
            price: record.price.map(|price| price.0),
            ahead: None,
        });
        if unreported {
            let status = if tracked.cum_qty > 0 { exec::PARTIAL } else { exec::NEW };
            let mut before = record.clone();
            before.status = OrderStatus::Open;
            report(tracked, info, &before, exec::NEW, status, sink, None);
        }
        let ids = Some((cl_ord_id.as_str(), orig_cl_ord_id.as_str()));
        tracked.cl_ord_id = cl_ord_id.clone();
        if *cancel || record.status != OrderStatus::Open {
            tracked.leaves = 0;
            let status = match record.status {
                OrderStatus::Filled => exec::FILLED,
                OrderStatus::Expired => exec::EXPIRED,
                _ => exec::CANCELED,
            };
            report(tracked, info, record, exec::CANCELED, status, sink, ids);
            self.forget(order);
        } else {
            // The order's whole quantity is the venue's (filled and open, which fills
            // do not change); fills the session has not reported yet are reported next,
            // each taking its quantity from what is left.
            tracked.price = record.price.map(|price| price.0);
            tracked.order_qty = record.filled.0 + record.remaining.0;
            tracked.leaves = (tracked.order_qty - tracked.cum_qty).max(0);
            let status = if tracked.cum_qty > 0 { exec::PARTIAL } else { exec::NEW };
            report(tracked, info, record, exec::REPLACED, status, sink, ids);
            self.aliases.insert(cl_ord_id.clone(), order.clone());
        }
    }

    /// A refused request's answer: an ExecutionReport Rejected for a new order, an
    /// OrderCancelReject for a cancel or replace.
    pub fn on_refused(&mut self, pending: &Pending, error: &ApiError, sink: &mut Sink<'_>) {
        let text = format!("{}: {}", error.code, error.message);
        match pending {
            Pending::Place { cl_ord_id, order } => {
                let exec_id = format!("R{}", sink.out.seq());
                let writer = sink.out.begin("8");
                writer
                    .str(tag::ORDER_ID, "NONE")
                    .str(tag::CL_ORD_ID, cl_ord_id)
                    .str(tag::EXEC_ID, &exec_id)
                    .char(tag::EXEC_TYPE, exec::REJECTED)
                    .char(tag::ORD_STATUS, exec::REJECTED)
                    .str(tag::SYMBOL, &order.symbol)
                    .char(tag::SIDE, side_char(order.side))
                    .number(tag::LEAVES_QTY, 0)
                    .number(tag::CUM_QTY, 0)
                    .number(tag::AVG_PX, 0)
                    .number(tag::ORD_REJ_REASON, ord_rej_reason(error.code))
                    .str(tag::TEXT, &text)
                    .timestamp(tag::TRANSACT_TIME, bourse_protocol::signing::now_ms());
                sink.send();
            }
            Pending::Change { cancel, cl_ord_id, orig_cl_ord_id, order } => {
                self.changed(order);
                let tracked = self.tracked.get(order);
                let order_id = tracked.map(|tracked| tracked.order_id.0.to_string());
                let status = match tracked {
                    Some(tracked) if tracked.cum_qty > 0 => exec::PARTIAL,
                    Some(_) => exec::NEW,
                    None => exec::REJECTED,
                };
                let writer = sink.out.begin("9");
                writer
                    .str(tag::ORDER_ID, order_id.as_deref().unwrap_or("NONE"))
                    .str(tag::CL_ORD_ID, cl_ord_id)
                    .str(tag::ORIG_CL_ORD_ID, orig_cl_ord_id)
                    .char(tag::ORD_STATUS, status)
                    .char(tag::CXL_REJ_RESPONSE_TO, if *cancel { b'1' } else { b'2' })
                    .number(tag::CXL_REJ_REASON, cxl_rej_reason(error.code))
                    .str(tag::TEXT, &text);
                sink.send();
            }
        }
    }

    fn forget(&mut self, order: &ClientOrderId) {
        if self.finished_set.insert(order.clone()) {
            self.finished.push_back(order.clone());
            if self.finished.len() > FINISHED_KEPT {
                if let Some(oldest) = self.finished.pop_front() {
                    self.finished_set.remove(&oldest);
                }
            }
        }
        if let Some(tracked) = self.tracked.remove(order) {
            if tracked.cl_ord_id != order.as_str() {
                self.aliases.retain(|_, aliased| aliased != order);
            }
        }
    }
}

/// The order a cancel or replace targets in order entry's terms.
pub fn target(order: &ClientOrderId) -> Target<'_> {
    Target::ClientOrderId(Cow::Borrowed(order.as_str()))
}

/// A replace as order entry's request: the new price, and OrderQty as the order's new
/// whole quantity (the engine takes off what has filled as it applies it, never what
/// the reports this session has sent say).
pub fn replace(
    order: &ClientOrderId,
    qty: Option<Decimal>,
    price: Option<Decimal>,
) -> Result<Request<'_>, ApiError> {
    Request::replace(target(order), price, qty)
}

fn side_char(side: Side) -> u8 {
    match side {
        Side::Buy => b'1',
        Side::Sell => b'2',
    }
}

fn report_fill(
    tracked: &mut Tracked,
    info: &InstrumentInfo,
    fill: &FillMessage,
    sink: &mut Sink<'_>,
) {
    tracked.cum_qty += fill.qty;
    tracked.cost += i128::from(fill.price) * i128::from(fill.qty);
    tracked.leaves = (tracked.order_qty - tracked.cum_qty).max(0);
    let status = if tracked.leaves == 0 { exec::FILLED } else { exec::PARTIAL };
    let trade_id = format!("{}-{}", fill.trade_seq, fill.trade_index);
    let exec_id = format!("{trade_id}-{}", if fill.side == Side::Buy { 'B' } else { 'S' });
    let writer = sink.out.begin("8");
    writer
        .number(tag::ORDER_ID, tracked.order_id.0)
        .str(tag::CL_ORD_ID, &tracked.cl_ord_id)
        .str(tag::EXEC_ID, &exec_id)
        .str(tag::SECONDARY_EXEC_ID, &trade_id)
        .char(tag::EXEC_TYPE, exec::TRADE)
        .char(tag::ORD_STATUS, status)
        .str(tag::SYMBOL, &info.symbol)
        .char(tag::SIDE, side_char(fill.side))
        .decimal(tag::ORDER_QTY, i128::from(tracked.order_qty), info.qty_decimals)
        .decimal(tag::LAST_PX, i128::from(fill.price), info.price_decimals)
        .decimal(tag::LAST_QTY, i128::from(fill.qty), info.qty_decimals);
    quantities(writer, tracked, info);
    writer.timestamp(tag::TRANSACT_TIME, fill.ts_ns.0 / 1_000_000);
    sink.send();
}

/// LeavesQty, CumQty and AvgPx.
fn quantities(writer: &mut Writer, tracked: &Tracked, info: &InstrumentInfo) {
    const AVG_EXTRA_PLACES: u32 = 4;
    let avg = match tracked.cum_qty {
        0 => 0,
        cum => tracked.cost * 10i128.pow(AVG_EXTRA_PLACES) / i128::from(cum),
    };
    writer
        .decimal(tag::LEAVES_QTY, i128::from(tracked.leaves), info.qty_decimals)
        .decimal(tag::CUM_QTY, i128::from(tracked.cum_qty), info.qty_decimals)
        .decimal(tag::AVG_PX, avg, info.price_decimals + AVG_EXTRA_PLACES);
}

/// An ExecutionReport of `record`'s state (not a fill).
fn report(
    tracked: &Tracked,
    info: &InstrumentInfo,
    record: &OrderRecord,
    exec_type: u8,
    status: u8,
    sink: &mut Sink<'_>,
    ids: Option<(&str, &str)>,
) {
    let exec_id = format!("{}-{}-{}", record.order_id.0, exec_type as char, sink.out.seq());
    let writer = sink.out.begin("8");
    writer.number(tag::ORDER_ID, record.order_id.0);
    match ids {
        Some((cl_ord_id, orig_cl_ord_id)) => {
            writer.str(tag::CL_ORD_ID, cl_ord_id).str(tag::ORIG_CL_ORD_ID, orig_cl_ord_id)
        }
        None => writer.str(tag::CL_ORD_ID, &tracked.cl_ord_id),
    };
    writer
        .str(tag::EXEC_ID, &exec_id)
        .char(tag::EXEC_TYPE, exec_type)
        .char(tag::ORD_STATUS, status)
        .str(tag::SYMBOL, &info.symbol)
        .char(tag::SIDE, side_char(record.side))
        .decimal(tag::ORDER_QTY, i128::from(tracked.order_qty), info.qty_decimals)
        .char(tag::ORD_TYPE, if record.kind == OrderKind::Market { b'1' } else { b'2' });
    if let Some(price) = tracked.price {
        writer.decimal(tag::PRICE, i128::from(price), info.price_decimals);
    }
    writer.char(
        tag::TIME_IN_FORCE,
        match record.time_in_force {
            TimeInForce::GoodForDay => b'0',
            TimeInForce::GoodTillCancel => b'1',
            TimeInForce::ImmediateOrCancel => b'3',
            TimeInForce::FillOrKill => b'4',
        },
    );
    if record.post_only {
        writer.char(tag::EXEC_INST, b'6');
    }
    quantities(writer, tracked, info);
    if record.status == OrderStatus::SelfTradePrevented {
        writer.str(tag::TEXT, "self_trade_prevented");
    }
    writer.timestamp(tag::TRANSACT_TIME, record.updated_ns.0 / 1_000_000);
    sink.send();
}

/// OrdRejReason (103) of an error: FIX's own numbers where FIX has one (1 unknown
/// symbol, 2 exchange closed, 3 order exceeds limit, 5 unknown order, 6 duplicate
/// order, 11 unsupported order characteristic), else 99 (other; Text (58) says which).
/// One arm per code: a new code does not compile until it is given its number here.
pub(crate) fn ord_rej_reason(code: ErrorCode) -> u64 {
    match code {
        ErrorCode::Rejected(reason) => match reason {
            RejectReason::UnknownSymbol => 1,
            RejectReason::InstrumentHalted => 2,
            RejectReason::TooManyOpenOrders => 3,
            RejectReason::UnknownOrder => 5,
            RejectReason::DuplicateId => 6,
            RejectReason::WouldCross
            | RejectReason::InvalidPrice
            | RejectReason::InvalidQty
            | RejectReason::InvalidOffset
            | RejectReason::InvalidOrder => 11,
            RejectReason::Malformed
            | RejectReason::DuplicateAsset
            | RejectReason::InvalidDecimals
            | RejectReason::DuplicateSymbol
            | RejectReason::UnknownAsset
            | RejectReason::InvalidInstrument
            | RejectReason::InvalidAmount
            | RejectReason::InsufficientFunds
            | RejectReason::NoLiquidity
            | RejectReason::InsufficientPosition => 99,
        },
        ErrorCode::Unsupported => 11,
        ErrorCode::InvalidCommand
        | ErrorCode::NotFound
        | ErrorCode::MethodNotAllowed
        | ErrorCode::BodyTooLarge
        | ErrorCode::UnknownAccount
        | ErrorCode::UnknownKey
        | ErrorCode::UnknownTrade
        | ErrorCode::UnknownChannel
        | ErrorCode::DuplicateAccount
        | ErrorCode::InvalidAccount
        | ErrorCode::InvalidPassword
        | ErrorCode::InvalidSymbol
        | ErrorCode::NoSettlementPrice
        | ErrorCode::TooManySubscriptions
        | ErrorCode::TooManyCharts
        | ErrorCode::TooManySymbols
        | ErrorCode::UnknownAid
        | ErrorCode::MissingSignature
        | ErrorCode::InvalidKey
        | ErrorCode::InvalidTimestamp
        | ErrorCode::ExpiredTimestamp
        | ErrorCode::InvalidSignature
        | ErrorCode::ReplayedRequest
        | ErrorCode::InvalidCredentials
        | ErrorCode::LoginLocked
        | ErrorCode::Forbidden
        | ErrorCode::LoginRequired
        | ErrorCode::AlreadyLoggedIn
        | ErrorCode::RateLimited
        | ErrorCode::TooManyConnections
        | ErrorCode::Busy
        | ErrorCode::SlowConsumer
        | ErrorCode::IdleTimeout
        | ErrorCode::LoginTimeout
        | ErrorCode::MalformedFrame
        | ErrorCode::ProtocolError
        | ErrorCode::Resync
        | ErrorCode::ShuttingDown
        | ErrorCode::Closed
        | ErrorCode::EngineStopped
        | ErrorCode::NotLeader
        | ErrorCode::FeedOff
        | ErrorCode::HistoryOff
        | ErrorCode::HistoryUnreadable
        | ErrorCode::SqlUnavailable
        | ErrorCode::SqlError
        | ErrorCode::PlanError
        | ErrorCode::ExecutionError
        | ErrorCode::Io
        | ErrorCode::SqlFailed
        | ErrorCode::SettingsFailed
        | ErrorCode::KeyStoreFailed
        | ErrorCode::StoreFailed
        | ErrorCode::Internal => 99,
    }
}

/// CxlRejReason (102) of an error: 1 (unknown order) for an order the account does
/// not have, else 99 (other; Text (58) says which).
fn cxl_rej_reason(code: ErrorCode) -> u64 {
    // OrdRejReason's table says which code is an unknown order; its other numbers are
    // for new orders only.
    match ord_rej_reason(code) {
        5 => 1,
        _ => 99,
    }
}
