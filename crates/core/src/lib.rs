//! Bourse's exchange core: one deterministic state machine of order books, accounts and
//! instruments, driven by commands and reporting events.
//!
//! It owns the rules of the replay format (`shared/spec/replay-format.md`): matching,
//! money, rejections. It must never do I/O, start threads, read a clock or draw random
//! numbers, and floats never touch money: the same commands give the same events and
//! the same state on every run and every machine. Journals, gateways and market data
//! are built around it, never inside it.
//!
//! The layers, bottom up: `num` (fixed-point units), `ids` and `civil` (calendar
//! dates of day counts, for whoever prints them); `book` (price-time
//! priority matcher, money-blind) on `slab` pools; `ledger` (balances), `spot` (what
//! spot orders hold and fills move) and `futures` (positions, margin, realised profit:
//! what futures orders hold or reserve and fills move); `order_index` (open orders by account and client
//! id); `exchange` (the state machine); `lookahead` (cache hints for the commands
//! about to be applied, which change no result); `format` (the replay format's text)
//! and `replay` (batch mode); `snapshot` (the whole state as bytes and back, for the
//! journal and recovery); `venue` (the exchange plus what a running venue remembers
//! about orders: records of open and recently finished orders, recent fills, and the
//! rule that a remembered client order id is never accepted again; and its own
//! commands, which the replay format does not have: halting and resuming an
//! instrument, cancelling all of an account's orders); `account_view` (a futures
//! account and its positions as futures traders read them, computed from the state).

pub mod account_view;
pub mod book;
pub mod civil;
pub mod command;
pub mod event;
pub mod exchange;
pub mod format;
pub mod futures;
pub mod ids;
pub mod ledger;
pub mod lookahead;
pub mod num;
pub mod order_index;
mod prefetch;
pub mod price_window;
pub mod replay;
pub mod slab;
pub mod snapshot;
pub mod spot;
#[cfg(test)]
mod test_random;
pub mod venue;

pub use command::{
    AccountRef, Command, Offset, OrderSize, PositionSide, Side, SizeNamed, StpMode, TimeInForce,
};
pub use event::{BookNote, DoneReason, Event, RejectReason};
pub use exchange::{Applied, Exchange, ExchangeConfig};
pub use ids::{OrderId, Seq, TimestampNs};
pub use lookahead::Lookahead;
pub use num::{Amount, Decimal, Price, Qty};
pub use replay::Replay;
pub use venue::{Activity, Venue};
