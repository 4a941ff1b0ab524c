//! From each applied command to the history's rows: the command, its events, the
//! balance changes the ledger recorded and the venue right after it give the order
//! states, trades, ledger moves, candles and futures settlements. Pure and deterministic: the same commands
//! give the same rows, which is what makes the history exactly-once (`follower`).
//! The rows carry the engine's identities (`Seq`, `TimestampNs`, `OrderId`) as they
//! are; they become plain numbers only in the Parquet files' columns (`tables`) and the
//! index's values (`index`).

use std::collections::BTreeMap;

use bourse_core::command::{OrderType, PositionSide};
use bourse_core::ids::{AccountId, InstrumentId};
use bourse_core::ledger::{BalanceChange, BalanceMove};
use bourse_core::venue::{OrderRecord, OrderStatus};
use bourse_core::{Command, Event, OrderId, Seq, TimeInForce, TimestampNs, Venue};
use compact_str::CompactString;
use rustc_hash::FxHashMap;
use serde::{Deserialize, Serialize};

use crate::civil::{day_of, NS_PER_MINUTE};
use crate::rows::{
    scaled, scaled_decimal, CandleRow, LedgerRow, OrderRow, SettlementRow, TradeRow,
};
use crate::tables::Table;

/// Where a row is stored: its day and its instrument's symbol (for the ledger, its
/// asset's name).
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Partition {
    pub day: u32,
    pub key: CompactString,
}

/// Rows derived and not yet written, by table and partition.
#[derive(Debug, Default)]
pub struct Pending {
    pub order_events: BTreeMap<Partition, Vec<OrderRow>>,
    pub orders: BTreeMap<Partition, Vec<OrderRow>>,
    pub trades: BTreeMap<Partition, Vec<TradeRow>>,
    pub ledger: BTreeMap<Partition, Vec<LedgerRow>>,
    pub candles: BTreeMap<Partition, Vec<CandleRow>>,
    pub settlements: BTreeMap<Partition, Vec<SettlementRow>>,
    /// Rows in all tables.
    pub rows: usize,
}

impl Pending {
    pub fn is_empty(&self) -> bool {
        self.rows == 0
    }

    /// Empties it for reuse, keeping the buffers of the partitions it used (so the
    /// next commit's rows go into memory already there) and dropping the others.
    pub fn recycle(&mut self) {
        fn recycle<Row>(table: &mut BTreeMap<Partition, Vec<Row>>) {
            table.retain(|_, rows| !rows.is_empty());
            table.values_mut().for_each(Vec::clear);
        }
        recycle(&mut self.order_events);
        recycle(&mut self.orders);
        recycle(&mut self.trades);
        recycle(&mut self.ledger);
        recycle(&mut self.candles);
        recycle(&mut self.settlements);
        self.rows = 0;
    }

    /// Rows per table, indexed by `Table as usize`.
    pub fn rows_by_table(&self) -> [u64; Table::ALL.len()] {
        fn count<Row>(table: &BTreeMap<Partition, Vec<Row>>) -> u64 {
            table.values().map(|rows| rows.len() as u64).sum()
        }
        [
            count(&self.order_events),
            count(&self.orders),
            count(&self.trades),
            count(&self.ledger),
            count(&self.candles),
            count(&self.settlements),
        ]
    }
}

fn push<Row>(table: &mut BTreeMap<Partition, Vec<Row>>, day: u32, key: &str, row: Row) {
    if let Some((partition, rows)) = table.iter_mut().next_back() {
        if partition.day == day && partition.key == key {
            rows.push(row);
            return;
        }
    }
    table.entry(Partition { day, key: CompactString::new(key) }).or_default().push(row);
}

/// An instrument's minute in progress, as a checkpoint keeps it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct OpenCandle {
    pub instrument: u32,
    pub symbol: String,
    pub start: u64,
    pub open: String,
    pub high: String,
    pub low: String,
    pub close: String,
    pub volume: String,
    pub notional: String,
    pub trades: u64,
    pub last_seq: Seq,
}

/// One command as applied: its seq, the exchange's time after it, its events, the
/// ledger's moves it made and the order it acted on (`bourse_core::Applied::order_id`).
#[derive(Clone, Copy)]
pub struct Applied<'a> {
    pub seq: Seq,
    pub ts: TimestampNs,
    pub command: &'a Command<'a>,
    pub events: &'a [Event],
    pub changes: &'a [BalanceChange],
    pub order_id: Option<OrderId>,
}

/// Turns commands into rows. Rows of commands at or below `emit_after` are not
/// emitted (they are already stored): a deriver resumed from an earlier state replays
/// them only to rebuild its candles.
pub struct Deriver {
    emit_after: Seq,
    candles: FxHashMap<u32, CandleRow>,
    /// The earliest end of an open candle: a command at or after it closes candles.
    next_close: u64,
    /// Orders the command touched, reused.
    touched: Vec<(AccountId, CompactString, &'static str)>,
    /// Orders the activity no longer had when their rows were due (a bug if not 0).
    pub missing_records: u64,
}

impl Deriver {
    pub fn new(emit_after: Seq, open_candles: &[OpenCandle]) -> Deriver {
        let mut deriver = Deriver {
            emit_after,
            candles: FxHashMap::default(),
            next_close: u64::MAX,
            touched: Vec::new(),
            missing_records: 0,
        };
        for open in open_candles {
            let amount = |text: &str| text.parse::<i128>().unwrap_or(0);
            let candle = CandleRow {
                symbol: CompactString::new(&open.symbol),
                start: open.start,
                open: amount(&open.open),
                high: amount(&open.high),
                low: amount(&open.low),
                close: amount(&open.close),
                volume: amount(&open.volume),
                notional: amount(&open.notional),
                trades: open.trades,
                last_seq: open.last_seq,
            };
            deriver.next_close = deriver.next_close.min(candle.start + NS_PER_MINUTE);
            deriver.candles.insert(open.instrument, candle);
        }
        deriver
    }

    /// The candles in progress, for a checkpoint.
    pub fn open_candles(&self) -> Vec<OpenCandle> {
        let mut open: Vec<OpenCandle> = self
            .candles
            .iter()
            .map(|(instrument, candle)| OpenCandle {
                instrument: *instrument,
                symbol: candle.symbol.to_string(),
                start: candle.start,
                open: candle.open.to_string(),
                high: candle.high.to_string(),
                low: candle.low.to_string(),
                close: candle.close.to_string(),
                volume: candle.volume.to_string(),
                notional: candle.notional.to_string(),
                trades: candle.trades,
                last_seq: candle.last_seq,
            })
            .collect();
        open.sort_by_key(|candle| candle.instrument);
        open
    }

    /// Derives the rows of `applied`; `venue` is the state right after it.
    pub fn derive(&mut self, applied: &Applied<'_>, venue: &Venue, out: &mut Pending) {
        let Applied { seq, ts, command, events, .. } = *applied;
        debug_assert!(
            matches!(events.first(), Some(Event::Accepted { .. } | Event::Rejected { .. })),
            "command {seq}'s events open with accepted or rejected"
        );
        let emit = seq > self.emit_after;
        self.close_candles_before(ts, seq, out);
        let accepted = matches!(events.first(), Some(Event::Accepted { .. }));
        if emit {
            match (command, accepted) {
                (Command::Order(order), false) => {
                    rejected_order(seq, ts, order, events, venue, out)
                }
                (Command::Order(_) | Command::Cancel { .. } | Command::Amend(_), true)
                | (Command::CancelAll { .. } | Command::Settle { .. }, true)
                | (Command::Liquidate { .. }, true) => {
                    self.order_states(seq, ts, command, events, venue, out)
                }
                _ => {}
            }
            self.ledger_rows(applied, venue, out);
        }
        // A liquidation's trades are all its own market orders' (they take liquidity;
        // nothing else does in that command), whose id is the command's seq.
        let liquidation = matches!(command, Command::Liquidate { .. });
        let mut trade_index = 0u32;
        for event in events {
            match event {
                Event::Trade(trade) => {
                    let row = trade_row(seq, trade_index, ts, trade, liquidation, venue);
                    self.add_to_candle(trade.instrument, &row, out);
                    if emit {
                        let day = day_of(ts.0);
                        out.rows += 1;
                        push(&mut out.trades, day, &row.symbol.clone(), row);
                    }
                    trade_index += 1;
                }
                Event::Settled(settled) if emit => {
                    let row = settlement_row(seq, ts, settled, venue);
                    out.rows += 1;
                    push(&mut out.settlements, day_of(ts.0), &row.symbol.clone(), row);
                }
                _ => {}
            }
        }
    }

    /// One row per order the command changed, with its state after the command; a row
    /// in `orders` too for each that left the book.
    fn order_states(
        &mut self,
        seq: Seq,
        ts: TimestampNs,
        command: &Command<'_>,
        events: &[Event],
        venue: &Venue,
        out: &mut Pending,
    ) {
        let Some(activity) = venue.activity() else { return };
        let exchange = venue.exchange();
        self.touched.clear();
        let mut touch = |account: AccountId, id: &str, change: &'static str| match self
            .touched
            .iter_mut()
            .find(|(known, known_id, _)| *known == account && known_id == id)
        {
            Some(entry) => entry.2 = stronger(entry.2, change),
            None => self.touched.push((account, CompactString::new(id), change)),
        };
        for event in events {
            match event {
                Event::Trade(trade) => {
                    touch(trade.taker_account, &trade.taker_id, "traded");
                    touch(trade.maker_account, &trade.maker_id, "traded");
                }
                Event::Amended { account, id, .. } => touch(*account, id, "amended"),
                Event::Done { account, id, reason, .. } => touch(*account, id, reason.code()),
                Event::Accepted { .. } | Event::Rejected { .. } | Event::Settled(_) => {}
            }
        }
        if let Command::Order(order) = command {
            if let Some(account) = exchange.resolve(&order.account) {
                touch(account, &order.id, "placed");
            }
        }
        // A liquidation's own market orders have no records (they never rest, and both
        // carry the command's seq): their trades and ledger moves say what they did.
        let liquidation_orders = match command {
            Command::Liquidate { account, .. } => exchange.resolve(account).map(|account| {
                let ids = PositionSide::BOTH.map(|side| format!("liq-{seq}-{}", side.as_str()));
                (account, ids)
            }),
            _ => None,
        };
        let day = day_of(ts.0);
        for (account, id, change) in &self.touched {
            let is_liquidation_order =
                liquidation_orders.as_ref().is_some_and(|(liquidated, ids)| {
                    liquidated == account && ids.iter().any(|known| known == id)
                });
            if is_liquidation_order {
                continue;
            }
            let record = match (command, *change) {
                (Command::Order(_), "placed") => activity.order(OrderId::of(seq)),
                _ => activity.order_by_client(*account, id),
            };
            let Some(record) = record else {
                self.missing_records += 1;
                continue;
            };
            let row = order_row(seq, ts, record, change, venue);
            let symbol = row.symbol.clone();
            if record.status != OrderStatus::Open {
                out.rows += 1;
                push(&mut out.orders, day, &symbol, row.clone());
            }
            out.rows += 1;
            push(&mut out.order_events, day, &symbol, row);
        }
    }

    fn ledger_rows(&mut self, applied: &Applied<'_>, venue: &Venue, out: &mut Pending) {
        let Applied { seq, ts, command, events, changes, order_id: acted_on } = *applied;
        if changes.is_empty() {
            return;
        }
        let exchange = venue.exchange();
        let activity = venue.activity();
        let trades: Vec<_> = events
            .iter()
            .filter_map(|event| match event {
                Event::Trade(trade) => Some(trade),
                _ => None,
            })
            .collect();
        let other_done = events.iter().any(|event| match (event, command) {
            (Event::Done { id, .. }, Command::Order(order)) => **id != *order.id,
            _ => false,
        });
        // Every change of a liquidation is its cause, its trades' included.
        let liquidation = matches!(command, Command::Liquidate { .. });
        // The order an accepted cancel or amend named (only accepted commands move
        // balances).
        let named_order = || acted_on;
        let day = day_of(ts.0);
        for (move_index, change) in changes.iter().enumerate() {
            let asset = exchange.asset(change.asset);
            let decimals = asset.decimals;
            let (cause, order_id, trade_index) = if change.trade > 0 {
                let index = change.trade - 1;
                let trade = trades.get(index as usize);
                let order_id = trade.and_then(|trade| {
                    let (account, id) = if change.account == trade.taker_account {
                        // A liquidation's market order: the command's seq (no record).
                        if liquidation {
                            return Some(OrderId::of(seq));
                        }
                        (trade.taker_account, &trade.taker_id)
                    } else {
                        (trade.maker_account, &trade.maker_id)
                    };
                    Some(activity?.order_by_client(account, id)?.order_id)
                });
                (if liquidation { "liquidation" } else { "trade" }, order_id, Some(index))
            } else {
                match command {
                    Command::Deposit(_) => ("deposit", None, None),
                    Command::Withdraw(_) => ("withdrawal", None, None),
                    Command::Order(_) => ("order", (!other_done).then_some(OrderId::of(seq)), None),
                    Command::Amend(_) => ("amend", named_order(), None),
                    Command::Cancel { .. } => ("cancel", named_order(), None),
                    Command::CancelAll { .. } => ("cancel_all", None, None),
                    Command::Settle { .. } => ("settlement", None, None),
                    Command::Margin { .. } => ("margin", None, None),
                    Command::Liquidate { .. } => ("liquidation", None, None),
                    _ => ("other", None, None),
                }
            };
            let row = LedgerRow {
                seq,
                move_index: move_index as u32,
                ts,
                account: CompactString::new(exchange.account_name(change.account)),
                asset: asset.name.clone(),
                movement: change.movement.code(),
                cause,
                order_id,
                trade_index,
                available_delta: scaled(i128::from(change.available_delta.0), decimals),
                held_delta: scaled(i128::from(change.held_delta.0), decimals),
                fee: scaled(i128::from(change.fee.0), decimals),
                available_after: scaled(i128::from(change.after.available.0), decimals),
                held_after: scaled(i128::from(change.after.held.0), decimals),
            };
            debug_assert!(change.movement != BalanceMove::Receive || change.trade > 0);
            out.rows += 1;
            push(&mut out.ledger, day, &asset.name, row);
        }
    }

    fn add_to_candle(&mut self, instrument: InstrumentId, trade: &TradeRow, out: &mut Pending) {
        let start = trade.ts.0 - trade.ts.0 % NS_PER_MINUTE;
        let opening = || CandleRow {
            symbol: trade.symbol.clone(),
            start,
            open: trade.price,
            high: trade.price,
            low: trade.price,
            close: trade.price,
            volume: 0,
            notional: 0,
            trades: 0,
            last_seq: trade.seq,
        };
        let candle = self.candles.entry(instrument.0).or_insert_with(opening);
        if candle.start != start {
            // The clock only moves forward, so a trade in a later minute closes this one
            // (close_candles_before has done it, unless the minute is the same).
            debug_assert!(candle.start < start, "a trade before its candle's minute");
            let closed = std::mem::replace(candle, opening());
            emit_candle(self.emit_after, trade.seq, closed, out);
        }
        candle.high = candle.high.max(trade.price);
        candle.low = candle.low.min(trade.price);
        candle.close = trade.price;
        candle.volume += trade.qty;
        candle.notional += trade.notional;
        candle.trades += 1;
        candle.last_seq = trade.seq;
        self.next_close = self.next_close.min(start + NS_PER_MINUTE);
    }

    /// Closes every candle whose minute ended at or before `ts` (the clock of command
    /// `seq`): written as part of that command.
    fn close_candles_before(&mut self, ts: TimestampNs, seq: Seq, out: &mut Pending) {
        if ts.0 < self.next_close {
            return;
        }
        let mut next_close = u64::MAX;
        let mut closed = Vec::new();
        self.candles.retain(|_, candle| {
            if candle.start + NS_PER_MINUTE <= ts.0 {
                closed.push(candle.clone());
                false
            } else {
                next_close = next_close.min(candle.start + NS_PER_MINUTE);
                true
            }
        });
        closed.sort_by(|left, right| left.symbol.cmp(&right.symbol));
        for candle in closed {
            emit_candle(self.emit_after, seq, candle, out);
        }
        self.next_close = next_close;
    }
}

fn emit_candle(emit_after: Seq, closing_seq: Seq, candle: CandleRow, out: &mut Pending) {
    if closing_seq > emit_after {
        out.rows += 1;
        push(&mut out.candles, day_of(candle.start), &candle.symbol.clone(), candle);
    }
}

/// Which of two changes of one order in one command its row names: leaving the book
/// over an amend over a trade; `placed` for the command's own order, whatever else.
fn stronger(known: &'static str, new: &'static str) -> &'static str {
    let rank = |change: &str| match change {
        "traded" => 0,
        "amended" => 1,
        "placed" => 3,
        _ => 2,
    };
    if rank(new) > rank(known) {
        new
    } else {
        known
    }
}

fn order_row(
    seq: Seq,
    ts: TimestampNs,
    record: &OrderRecord,
    change: &'static str,
    venue: &Venue,
) -> OrderRow {
    let exchange = venue.exchange();
    let instrument = exchange.instrument(record.instrument);
    let price_decimals = instrument.price_decimals;
    let qty_decimals = instrument.qty_decimals;
    OrderRow {
        seq,
        ts,
        order_id: Some(record.order_id),
        account: CompactString::new(exchange.account_name(record.account)),
        client_order_id: CompactString::new(&*record.client_id),
        symbol: instrument.symbol.clone(),
        side: record.side.as_str(),
        kind: record.kind.code(),
        time_in_force: tif_code(record.time_in_force),
        post_only: record.post_only,
        price: record.price.map(|price| scaled(i128::from(price.0), price_decimals)),
        qty: scaled(i128::from(record.qty.0), qty_decimals),
        filled: scaled(i128::from(record.filled.0), qty_decimals),
        remaining: scaled(i128::from(record.remaining.0), qty_decimals),
        status: record.status.code(),
        change,
        reason: None,
    }
}

fn rejected_order(
    seq: Seq,
    ts: TimestampNs,
    order: &bourse_core::command::OrderCommand<'_>,
    events: &[Event],
    venue: &Venue,
    out: &mut Pending,
) {
    let Some(Event::Rejected { reason, .. }) = events.first() else { return };
    let exchange = venue.exchange();
    let known = exchange.find_instrument(&order.symbol);
    // Rows of unknown symbols share one partition, so junk names make no directories.
    let symbol = match known {
        Some(instrument) => exchange.instrument(instrument).symbol.clone(),
        None => CompactString::new(UNKNOWN_SYMBOL),
    };
    let account = exchange.echoed_name(&order.account);
    let (kind, price) = match order.order_type {
        OrderType::Limit { price } => ("limit", scaled_decimal(price.mantissa(), price.scale())),
        OrderType::Market => ("market", None),
    };
    let qty =
        order.size.qty().and_then(|qty| scaled_decimal(qty.mantissa(), qty.scale())).unwrap_or(0);
    let row = OrderRow {
        seq,
        ts,
        order_id: None,
        account,
        client_order_id: CompactString::new(&*order.id),
        symbol: symbol.clone(),
        side: order.side.as_str(),
        kind,
        time_in_force: tif_code(order.time_in_force),
        post_only: order.post_only,
        price,
        qty,
        filled: 0,
        remaining: 0,
        status: "rejected",
        change: "rejected",
        reason: Some(reason.code()),
    };
    out.rows += 1;
    push(&mut out.order_events, day_of(ts.0), &symbol, row);
}

/// The partition of rejected orders on symbols that do not exist.
pub const UNKNOWN_SYMBOL: &str = "_unknown";

fn tif_code(time_in_force: TimeInForce) -> &'static str {
    match time_in_force {
        TimeInForce::GoodTillCancel => "gtc",
        TimeInForce::ImmediateOrCancel => "ioc",
        TimeInForce::FillOrKill => "fok",
        TimeInForce::GoodForDay => "gfd",
    }
}

/// A trade's row; `liquidation`: a `liquidate` command's, whose taker is a liquidation
/// market order (no record; its id is the command's seq, as the API's fills have it).
fn trade_row(
    seq: Seq,
    trade_index: u32,
    ts: TimestampNs,
    trade: &bourse_core::event::TradeEvent,
    liquidation: bool,
    venue: &Venue,
) -> TradeRow {
    let exchange = venue.exchange();
    let instrument = exchange.instrument(trade.instrument);
    // The notional is in the quote asset (a futures contract's: its value, in the
    // settle asset); each fee is in the asset its side receives.
    let (notional, notional_asset) = match (instrument.spot(), instrument.future()) {
        (Some(rules), _) => {
            (i128::from(rules.notional(trade.price, trade.qty).unwrap_or(0)), rules.quote)
        }
        (None, Some(rules)) => (rules.value(trade.price, trade.qty), rules.settle),
        (None, None) => unreachable!("an instrument is spot or a future"),
    };
    let quote = exchange.asset(notional_asset);
    let order_id = |account: AccountId, id: &str| {
        venue
            .activity()
            .and_then(|activity| activity.order_by_client(account, id))
            .map(|record| record.order_id)
    };
    // The taker's order is the command's own (its id is `seq`) unless it is forgotten.
    let taker_order_id = if liquidation {
        Some(OrderId::of(seq))
    } else {
        order_id(trade.taker_account, &trade.taker_id)
    };
    let maker_fee_asset = exchange.asset(instrument.fee_asset(trade.taker_side.opposite()));
    let taker_fee_asset = exchange.asset(instrument.fee_asset(trade.taker_side));
    let (maker_decimals, taker_decimals) = (maker_fee_asset.decimals, taker_fee_asset.decimals);
    let (maker_fee_asset, taker_fee_asset) = (&maker_fee_asset.name, &taker_fee_asset.name);
    TradeRow {
        seq,
        trade_index,
        ts,
        symbol: instrument.symbol.clone(),
        price: scaled(i128::from(trade.price.0), instrument.price_decimals),
        qty: scaled(i128::from(trade.qty.0), instrument.qty_decimals),
        notional: scaled(notional, quote.decimals),
        taker_side: trade.taker_side.as_str(),
        maker_order_id: order_id(trade.maker_account, &trade.maker_id),
        taker_order_id,
        maker_account: CompactString::new(exchange.account_name(trade.maker_account)),
        taker_account: CompactString::new(exchange.account_name(trade.taker_account)),
        maker_client_order_id: CompactString::new(&*trade.maker_id),
        taker_client_order_id: CompactString::new(&*trade.taker_id),
        maker_fee: scaled(i128::from(trade.maker_fee.0), maker_decimals),
        maker_fee_asset: maker_fee_asset.clone(),
        taker_fee: scaled(i128::from(trade.taker_fee.0), taker_decimals),
        taker_fee_asset: taker_fee_asset.clone(),
    }
}

/// The row of one side of one account's position that a settlement marked.
fn settlement_row(
    seq: Seq,
    ts: TimestampNs,
    settled: &bourse_core::event::SettledEvent,
    venue: &Venue,
) -> SettlementRow {
    let exchange = venue.exchange();
    // Found even once expired (a final settlement's own rows).
    let instrument = exchange.instrument(settled.instrument);
    let Some(rules) = instrument.future() else {
        unreachable!("only a futures contract is settled")
    };
    let asset = exchange.asset(rules.settle);
    SettlementRow {
        seq,
        ts,
        account: CompactString::new(exchange.account_name(settled.account)),
        symbol: instrument.symbol.clone(),
        side: settled.side.as_str(),
        qty: scaled(i128::from(settled.qty.0), instrument.qty_decimals),
        price: scaled(i128::from(settled.price.0), instrument.price_decimals),
        pnl: scaled(i128::from(settled.pnl.0), asset.decimals),
        asset: asset.name.clone(),
    }
}
