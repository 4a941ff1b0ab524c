//! Order entry's requests as every gateway hands them in, once decoded from its own
//! bytes (JSON, a binary frame, later FIX): protocol-neutral values, not yet checked
//! against the venue's rules. `OrderEntry` checks them and makes each into its
//! engine command, in one place per kind.

use std::borrow::Cow;

use bourse_core::command::{AmendCommand, AmendQtyKind, OrderCommand, OrderType};
use bourse_core::ids::{AccountId, OrderId};
use bourse_core::{AccountRef, Command, Decimal, Offset, OrderSize, Side, StpMode, TimeInForce};

use crate::port::error::{ApiError, ApiResult};

/// Client order ids: 1 to this many printable ASCII characters, no spaces (a UUID and
/// tqsdk's 45-character ids fit); a request carries one checked.
pub use bourse_protocol::client_order_id::{CheckedClientOrderId, CLIENT_ORDER_ID_BYTES_MAX};

/// A new order, as decoded.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NewOrder<'a> {
    /// `None`: the venue makes one (`auto-` and 24 hex digits).
    pub client_order_id: Option<CheckedClientOrderId<'a>>,
    pub symbol: Cow<'a, str>,
    pub side: Side,
    /// A limit order's price, or a market order.
    pub order_type: OrderType,
    /// What it buys or sells (`qty`), or for a spot market buy what it spends
    /// (`quote_qty`, `orders.md`): the engine checks which go together.
    pub size: OrderSize,
    pub time_in_force: TimeInForce,
    pub post_only: bool,
    pub stp: StpMode,
    /// Futures: what the order does to the position (ignored on spot).
    pub offset: Offset,
}

impl NewOrder<'_> {
    /// The same order, owning its text (for a gateway that keeps it until the answer).
    pub fn into_owned(self) -> NewOrder<'static> {
        NewOrder {
            client_order_id: self.client_order_id.map(CheckedClientOrderId::into_owned),
            symbol: Cow::Owned(self.symbol.into_owned()),
            side: self.side,
            order_type: self.order_type,
            size: self.size,
            time_in_force: self.time_in_force,
            post_only: self.post_only,
            stp: self.stp,
            offset: self.offset,
        }
    }
}

/// Which of the caller's orders a cancel, an amend or a status request names.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Target<'a> {
    /// The exchange's id (read first, to learn its client order id).
    OrderId(OrderId),
    ClientOrderId(Cow<'a, str>),
}

impl Target<'_> {
    /// The same target, owning its client order id (to take into a read).
    pub fn to_static(&self) -> Target<'static> {
        match self {
            Target::OrderId(order_id) => Target::OrderId(*order_id),
            Target::ClientOrderId(id) => Target::ClientOrderId(Cow::Owned(id.to_string())),
        }
    }
}

/// One order-entry request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Request<'a> {
    Place(NewOrder<'a>),
    Cancel(Target<'a>),
    /// A new price, a new quantity or both (made by `Request::amend` or
    /// `Request::replace`).
    Amend {
        target: Target<'a>,
        price: Option<Decimal>,
        qty: Option<AmendQty>,
    },
}

/// What an amend's quantity names.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AmendQty {
    /// What is to be left open: the engine's `amend` (REST's, WebSocket's and the binary
    /// protocol's `qty`).
    Remaining(Decimal),
    /// The order's new whole quantity, what has filled included (FIX's OrderQty on an
    /// OrderCancelReplaceRequest): the engine leaves this less what has filled when the
    /// amend applies open (`AmendQtyKind::Total`), so a fill in flight is counted; a
    /// gateway never works it out from what it has been told.
    Total(Decimal),
}

impl<'a> Request<'a> {
    /// An amend, which must change the price, the quantity or both.
    pub fn amend(
        target: Target<'a>,
        price: Option<Decimal>,
        qty: Option<Decimal>,
    ) -> ApiResult<Request<'a>> {
        let qty = qty.map(AmendQty::Remaining);
        Request::changing(target, price, qty, "an amend needs price, qty or both")
    }

    /// An amend whose quantity is the order's new whole quantity (`AmendQty::Total`), as
    /// FIX's replace names it; it must change the price, the quantity or both.
    pub fn replace(
        target: Target<'a>,
        price: Option<Decimal>,
        total_qty: Option<Decimal>,
    ) -> ApiResult<Request<'a>> {
        let qty = total_qty.map(AmendQty::Total);
        Request::changing(target, price, qty, "a replace needs a price, a quantity or both")
    }

    /// An amend of `target`, or `malformed` (saying `empty`) when it changes nothing.
    fn changing(
        target: Target<'a>,
        price: Option<Decimal>,
        qty: Option<AmendQty>,
        empty: &'static str,
    ) -> ApiResult<Request<'a>> {
        if price.is_none() && qty.is_none() {
            return Err(ApiError::malformed(empty));
        }
        Ok(Request::Amend { target, price, qty })
    }

    /// As the metrics and logs name the request's kind.
    pub fn kind(&self) -> RequestKind {
        match self {
            Request::Place(_) => RequestKind::Place,
            Request::Cancel(_) => RequestKind::Cancel,
            Request::Amend { .. } => RequestKind::Amend,
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RequestKind {
    Place,
    Cancel,
    Amend,
}

/// The client order id a new order gets: the one requested, or a new one.
pub fn client_order_id<'a>(
    requested: Option<&'a CheckedClientOrderId<'_>>,
) -> ApiResult<CheckedClientOrderId<'a>> {
    match requested {
        Some(id) => Ok(id.borrowed()),
        None => made_client_order_id(),
    }
}

/// A new client order id, for an order that names none: `auto-` and 24 hex digits.
pub fn made_client_order_id() -> ApiResult<CheckedClientOrderId<'static>> {
    let mut bytes = [0u8; 12];
    getrandom::fill(&mut bytes)
        .map_err(|_| ApiError::malformed("no client_order_id given and none could be made"))?;
    let made = CheckedClientOrderId::parse(format!("auto-{}", hex::encode(bytes)));
    made.map_err(|_| ApiError::internal("a made client order id breaks the rule"))
}

/// The engine command of a new order whose client order id is `client_order_id` for `account` (by id once the engine knows it, which spares it the name
/// lookup; by name before its first deposit).
pub fn order_command<'a>(
    account: AccountRef<'a>,
    client_order_id: &'a CheckedClientOrderId<'_>,
    order: &'a NewOrder<'_>,
) -> Command<'a> {
    Command::Order(OrderCommand {
        account,
        id: Cow::Borrowed(client_order_id.as_str()),
        symbol: Cow::Borrowed(order.symbol.as_ref()),
        side: order.side,
        order_type: order.order_type,
        size: order.size.clone(),
        time_in_force: order.time_in_force,
        post_only: order.post_only,
        stp: order.stp,
        offset: order.offset,
    })
}

/// The engine command of a cancel of `account`'s order `client_order_id`.
pub fn cancel_command(account: AccountId, client_order_id: &str) -> Command<'_> {
    Command::Cancel { account: AccountRef::Id(account), id: Cow::Borrowed(client_order_id) }
}

/// The engine command of an amend (`Request::amend` has checked that it changes
/// something).
pub fn amend_command(
    account: AccountId,
    client_order_id: &str,
    price: Option<Decimal>,
    qty: Option<AmendQty>,
) -> Command<'_> {
    debug_assert!(price.is_some() || qty.is_some());
    let (qty, qty_kind) = match qty {
        None => (None, AmendQtyKind::Remaining),
        Some(AmendQty::Remaining(remaining)) => (Some(remaining), AmendQtyKind::Remaining),
        Some(AmendQty::Total(total)) => (Some(total), AmendQtyKind::Total),
    };
    Command::Amend(AmendCommand {
        account: AccountRef::Id(account),
        id: Cow::Borrowed(client_order_id),
        price,
        qty,
        qty_kind,
    })
}
