//! Events: what the engine reports for each command. Every command yields exactly one
//! `Accepted` or `Rejected` first; accepted ones may go on with `Amended`, `Trade` and
//! `Done`. Events refer to accounts and instruments by id; the replay format resolves
//! them to names when printing.

use crate::command::{PositionSide, Side};
use crate::ids::{AccountId, ClientOrderId, InstrumentId, Seq};
use crate::num::{Amount, Price, Qty};

/// Why a command was refused. The string codes are stable: they appear in the replay
/// format and in every gateway's errors.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum RejectReason {
    Malformed,
    DuplicateAsset,
    InvalidDecimals,
    DuplicateSymbol,
    UnknownAsset,
    InvalidInstrument,
    InvalidAmount,
    InsufficientFunds,
    UnknownSymbol,
    DuplicateId,
    InvalidPrice,
    InvalidQty,
    WouldCross,
    NoLiquidity,
    UnknownOrder,
    /// A venue's: an order or amend on an instrument that is halted (`Command::Halt`).
    /// Not in the replay format, whose batch mode has no halts.
    InstrumentHalted,
    /// A venue's: an order of an account that already has as many open orders as the
    /// venue allows (`Command::SetLimits`). Not in the replay format.
    TooManyOpenOrders,
    /// A futures order with offset `close_today` on a contract without the close-today
    /// rule.
    InvalidOffset,
    /// A futures close order (or an amend raising one) beyond what the account may
    /// still close.
    InsufficientPosition,
    /// An order whose fields do not go together (`orders.md`): `quote_qty` with `qty`,
    /// on a sell, a limit order, a futures contract or with `fok`.
    InvalidOrder,
}

impl RejectReason {
    /// Every reason; positions are stable (gateways number reasons by them), so a new
    /// reason is appended.
    pub const ALL: [RejectReason; 20] = [
        RejectReason::Malformed,
        RejectReason::DuplicateAsset,
        RejectReason::InvalidDecimals,
        RejectReason::DuplicateSymbol,
        RejectReason::UnknownAsset,
        RejectReason::InvalidInstrument,
        RejectReason::InvalidAmount,
        RejectReason::InsufficientFunds,
        RejectReason::UnknownSymbol,
        RejectReason::DuplicateId,
        RejectReason::InvalidPrice,
        RejectReason::InvalidQty,
        RejectReason::WouldCross,
        RejectReason::NoLiquidity,
        RejectReason::UnknownOrder,
        RejectReason::InstrumentHalted,
        RejectReason::TooManyOpenOrders,
        RejectReason::InvalidOffset,
        RejectReason::InsufficientPosition,
        RejectReason::InvalidOrder,
    ];

    pub fn code(self) -> &'static str {
        match self {
            RejectReason::Malformed => "malformed",
            RejectReason::DuplicateAsset => "duplicate_asset",
            RejectReason::InvalidDecimals => "invalid_decimals",
            RejectReason::DuplicateSymbol => "duplicate_symbol",
            RejectReason::UnknownAsset => "unknown_asset",
            RejectReason::InvalidInstrument => "invalid_instrument",
            RejectReason::InvalidAmount => "invalid_amount",
            RejectReason::InsufficientFunds => "insufficient_funds",
            RejectReason::UnknownSymbol => "unknown_symbol",
            RejectReason::DuplicateId => "duplicate_id",
            RejectReason::InvalidPrice => "invalid_price",
            RejectReason::InvalidQty => "invalid_qty",
            RejectReason::WouldCross => "would_cross",
            RejectReason::NoLiquidity => "no_liquidity",
            RejectReason::UnknownOrder => "unknown_order",
            RejectReason::InstrumentHalted => "instrument_halted",
            RejectReason::TooManyOpenOrders => "too_many_open_orders",
            RejectReason::InvalidOffset => "invalid_offset",
            RejectReason::InsufficientPosition => "insufficient_position",
            RejectReason::InvalidOrder => "invalid_order",
        }
    }
}

/// Why an order left the book (or never reached it).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum DoneReason {
    Filled,
    Canceled,
    Expired,
    SelfTradePrevented,
}

impl DoneReason {
    pub fn code(self) -> &'static str {
        match self {
            DoneReason::Filled => "filled",
            DoneReason::Canceled => "canceled",
            DoneReason::Expired => "expired",
            DoneReason::SelfTradePrevented => "stp",
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TradeEvent {
    pub seq: Seq,
    pub instrument: InstrumentId,
    pub price: Price,
    pub qty: Qty,
    pub taker_side: Side,
    pub maker_account: AccountId,
    pub maker_id: ClientOrderId,
    pub taker_account: AccountId,
    pub taker_id: ClientOrderId,
    /// In the asset the maker receives (quote when the maker sells, base when it buys).
    pub maker_fee: Amount,
    /// In the asset the taker receives. On a futures contract both fees are in the
    /// settle asset.
    pub taker_fee: Amount,
    /// Futures only (zero on spot): what this fill realised for the maker and the
    /// taker, in the settle asset (zero for an opening fill).
    pub maker_pnl: Amount,
    pub taker_pnl: Amount,
}

/// A futures settlement's mark of one side of one account's position.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SettledEvent {
    pub seq: Seq,
    pub account: AccountId,
    pub instrument: InstrumentId,
    pub side: PositionSide,
    /// The side's whole quantity.
    pub qty: Qty,
    pub price: Price,
    /// What the mark paid the account (negative: took from it), in the settle asset.
    pub pnl: Amount,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Event {
    /// `account`: the account an order, cancel, amend or liquidation acted for; `None`
    /// for every other command. What the command named (the account's name or id, the
    /// client order id) is in the command: the replay format's printer echoes it from
    /// there (`format::write_event`), so no event copies a name.
    Accepted {
        seq: Seq,
        account: Option<AccountId>,
    },
    /// What the command named is in the command, as for `Accepted`.
    Rejected {
        seq: Seq,
        reason: RejectReason,
    },
    Trade(TradeEvent),
    Done {
        seq: Seq,
        instrument: InstrumentId,
        account: AccountId,
        id: ClientOrderId,
        reason: DoneReason,
        /// Cumulative filled quantity over the order's whole life.
        filled: Qty,
    },
    Amended {
        seq: Seq,
        instrument: InstrumentId,
        account: AccountId,
        id: ClientOrderId,
        price: Price,
        qty: Qty,
    },
    Settled(SettledEvent),
}

impl Event {
    pub fn seq(&self) -> Seq {
        match self {
            Event::Accepted { seq, .. }
            | Event::Rejected { seq, .. }
            | Event::Done { seq, .. }
            | Event::Amended { seq, .. } => *seq,
            Event::Trade(trade) => trade.seq,
            Event::Settled(settled) => settled.seq,
        }
    }
}

/// What the tap's consumers (market data) need of a command beyond its events: the
/// changes of the books that events do not spell out. The engine's tap carries them
/// (`bourse_engine::Released::notes`), made by `Venue::book_note` from what
/// `Venue::apply` returned (`Applied`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum BookNote {
    /// A new order rests on the book after its command (after any trades it made):
    /// the exchange's order id (the command's `seq`), where, and what is left of it.
    Rested {
        seq: Seq,
        instrument: InstrumentId,
        account: AccountId,
        id: ClientOrderId,
        side: Side,
        price: Price,
        qty: Qty,
    },
    /// Trading on `instrument` was halted (`true`) or resumed (`Command::Halt`,
    /// `Resume`).
    Halted { seq: Seq, instrument: InstrumentId, halted: bool },
    /// `instrument` was declared (`Command::Instrument`, `Future`): its book exists,
    /// empty, from this command on.
    Declared { seq: Seq, instrument: InstrumentId },
}

impl BookNote {
    pub fn seq(&self) -> Seq {
        match self {
            BookNote::Rested { seq, .. }
            | BookNote::Halted { seq, .. }
            | BookNote::Declared { seq, .. } => *seq,
        }
    }
}
