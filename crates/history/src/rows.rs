//! The rows of the history's tables, as plain values, before they become Arrow columns
//! (`tables`). Every amount is exact: a decimal with 18 places (`SCALE`), enough for
//! any asset (at most 18 decimals), as an `i128` of 10^-18 units.

use bourse_core::{OrderId, Seq, TimestampNs};
use compact_str::CompactString;

/// Decimal places of every price, quantity and amount column.
pub const SCALE: u32 = 18;

/// `units` of something with `decimals` places, in 10^-18 units.
pub fn scaled(units: i128, decimals: u32) -> i128 {
    units * 10i128.pow(SCALE.saturating_sub(decimals))
}

/// A decimal as the command wrote it, in 10^-18 units; `None` beyond 18 places or
/// beyond `i128` (a command the engine rejected anyway).
pub fn scaled_decimal(mantissa: i128, scale: u32) -> Option<i128> {
    if scale > SCALE {
        return None;
    }
    mantissa.checked_mul(10i128.pow(SCALE - scale))
}

/// One state of one order: after each command that changed it (`order_events`), and
/// its last when it left the book (`orders`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OrderRow {
    /// The command that made this state.
    pub seq: Seq,
    pub ts: TimestampNs,
    /// The exchange's id (the seq of the order's command); `None` for a rejected order.
    pub order_id: Option<OrderId>,
    pub account: CompactString,
    pub client_order_id: CompactString,
    pub symbol: CompactString,
    pub side: &'static str,
    pub kind: &'static str,
    pub time_in_force: &'static str,
    pub post_only: bool,
    /// The limit price (current, after amends); `None` for a market order.
    pub price: Option<i128>,
    /// As submitted.
    pub qty: i128,
    pub filled: i128,
    pub remaining: i128,
    /// `open`, `filled`, `canceled`, `expired`, `stp` or `rejected`.
    pub status: &'static str,
    /// What this command did to it: `placed`, `rejected`, `traded`, `amended`, or why it
    /// left the book (`filled`, `canceled`, `expired`, `stp`).
    pub change: &'static str,
    /// A rejection's reason code.
    pub reason: Option<&'static str>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TradeRow {
    pub seq: Seq,
    /// Its position among its command's trades (from 0): `(seq, trade_index)` is the
    /// trade's id, written `seq-trade_index` (`trade_id`), as the API writes it.
    pub trade_index: u32,
    pub ts: TimestampNs,
    pub symbol: CompactString,
    pub price: i128,
    pub qty: i128,
    /// What the buyer paid, in the quote asset; on a futures contract its value
    /// (`price * qty * multiplier`), in the settle asset.
    pub notional: i128,
    pub taker_side: &'static str,
    pub maker_order_id: Option<OrderId>,
    pub taker_order_id: Option<OrderId>,
    pub maker_account: CompactString,
    pub taker_account: CompactString,
    pub maker_client_order_id: CompactString,
    pub taker_client_order_id: CompactString,
    pub maker_fee: i128,
    pub maker_fee_asset: CompactString,
    pub taker_fee: i128,
    pub taker_fee_asset: CompactString,
}

/// One move of one account's balance of one asset, with its cause.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LedgerRow {
    pub seq: Seq,
    /// The change's position among its command's changes (from 0): `(seq,
    /// move_index)` orders an account's changes, the last one giving its balance.
    pub move_index: u32,
    pub ts: TimestampNs,
    pub account: CompactString,
    pub asset: CompactString,
    /// `deposit`, `withdrawal`, `hold`, `release`, `pay` or `receive`; for a futures
    /// contract's settle asset also `fee` (a fill's fee, from available),
    /// `realised_profit` (what a closing fill realised), `settlement` (a settlement's
    /// mark of a position) and `margin` (a new margin rate re-pricing what is open).
    pub movement: &'static str,
    /// Why: `deposit`, `withdrawal`, `trade`, the command that held or released
    /// (`order`, `amend`, `cancel`, `cancel_all`), or a futures contract's `settlement`
    /// (every change of a `settle`: its marks, the holds of the orders it expired and,
    /// at expiry, the margin it returned), `margin` (of a `margin` command) or
    /// `liquidation` (every change of a `liquidate`, its trades' included).
    pub cause: &'static str,
    /// The order it concerns, when one order does (a liquidation's own market orders:
    /// the `liquidate` command's seq, as the API's fills have it).
    pub order_id: Option<OrderId>,
    /// The trade it settles: the command's trade of this index (its id is
    /// `seq-trade_index`).
    pub trade_index: Option<u32>,
    pub available_delta: i128,
    pub held_delta: i128,
    /// What the exchange kept of a `receive`, or the fee a `fee` paid.
    pub fee: i128,
    pub available_after: i128,
    pub held_after: i128,
}

/// One side (long or short) of one account's position in a futures contract, as a
/// settlement marked it (`Event::Settled`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SettlementRow {
    /// The `settle` command.
    pub seq: Seq,
    pub ts: TimestampNs,
    pub account: CompactString,
    pub symbol: CompactString,
    /// `long` or `short`.
    pub side: &'static str,
    /// The side's whole quantity.
    pub qty: i128,
    /// The settlement price.
    pub price: i128,
    /// What the mark paid the account (negative: took from it), in `asset`.
    pub pnl: i128,
    /// The contract's settle asset.
    pub asset: CompactString,
}

/// One minute of one instrument's trades (minutes without trades have no row).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CandleRow {
    pub symbol: CompactString,
    /// The minute's start, ns since the Unix epoch.
    pub start: u64,
    pub open: i128,
    pub high: i128,
    pub low: i128,
    pub close: i128,
    pub volume: i128,
    pub notional: i128,
    pub trades: u64,
    /// The command of its last trade.
    pub last_seq: Seq,
}
