//! The history's tables: names, Arrow schemas, and rows turned into record batches.
//! The schemas are the files' contract with every reader (`docs/history.md`): columns
//! are only ever added at the end.

use std::fmt::Write;
use std::sync::Arc;

use arrow_array::builder::{
    BooleanBuilder, Decimal128Builder, StringBuilder, TimestampNanosecondBuilder, UInt32Builder,
    UInt64Builder,
};
use arrow_array::{ArrayRef, RecordBatch};
use arrow_schema::{ArrowError, DataType, Field, Schema, SchemaRef, TimeUnit};

use crate::rows::{CandleRow, LedgerRow, OrderRow, SettlementRow, TradeRow, SCALE};

/// Precision of every decimal column: 38 digits, 18 of them after the point.
pub const PRECISION: u8 = 38;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Table {
    OrderEvents,
    Orders,
    Trades,
    Ledger,
    Candles,
    /// Futures settlements' marks of positions (appended: `Table as usize` indexes the
    /// per-table counts).
    Settlements,
}

impl Table {
    pub const ALL: [Table; 6] = [
        Table::OrderEvents,
        Table::Orders,
        Table::Trades,
        Table::Ledger,
        Table::Candles,
        Table::Settlements,
    ];

    /// The table's directory and its name in SQL.
    pub fn name(self) -> &'static str {
        match self {
            Table::OrderEvents => "order_events",
            Table::Orders => "orders",
            Table::Trades => "trades",
            Table::Ledger => "ledger",
            Table::Candles => "candles",
            Table::Settlements => "settlements",
        }
    }

    /// The second partition column: the instrument, or for the ledger the asset.
    pub fn partition_column(self) -> &'static str {
        match self {
            Table::Ledger => "asset_partition",
            _ => "instrument",
        }
    }

    pub fn schema(self) -> SchemaRef {
        let fields = match self {
            Table::OrderEvents | Table::Orders => order_fields(),
            Table::Trades => trade_fields(),
            Table::Ledger => ledger_fields(),
            Table::Candles => candle_fields(),
            Table::Settlements => settlement_fields(),
        };
        Arc::new(Schema::new(fields))
    }
}

fn decimal(name: &str, nullable: bool) -> Field {
    Field::new(name, DataType::Decimal128(PRECISION, SCALE as i8), nullable)
}

fn timestamp(name: &str) -> Field {
    Field::new(name, DataType::Timestamp(TimeUnit::Nanosecond, Some("UTC".into())), false)
}

fn text(name: &str, nullable: bool) -> Field {
    Field::new(name, DataType::Utf8, nullable)
}

fn id(name: &str, nullable: bool) -> Field {
    Field::new(name, DataType::UInt64, nullable)
}

fn order_fields() -> Vec<Field> {
    vec![
        id("seq", false),
        timestamp("ts"),
        id("order_id", true),
        text("account", false),
        text("client_order_id", false),
        text("symbol", false),
        text("side", false),
        text("type", false),
        text("time_in_force", false),
        Field::new("post_only", DataType::Boolean, false),
        decimal("price", true),
        decimal("qty", false),
        decimal("filled", false),
        decimal("remaining", false),
        text("status", false),
        text("change", false),
        text("reason", true),
    ]
}

fn trade_fields() -> Vec<Field> {
    vec![
        id("seq", false),
        Field::new("trade_index", DataType::UInt32, false),
        text("trade_id", false),
        timestamp("ts"),
        text("symbol", false),
        decimal("price", false),
        decimal("qty", false),
        decimal("notional", false),
        text("taker_side", false),
        id("maker_order_id", true),
        id("taker_order_id", true),
        text("maker_account", false),
        text("taker_account", false),
        text("maker_client_order_id", false),
        text("taker_client_order_id", false),
        decimal("maker_fee", false),
        text("maker_fee_asset", false),
        decimal("taker_fee", false),
        text("taker_fee_asset", false),
    ]
}

fn ledger_fields() -> Vec<Field> {
    vec![
        id("seq", false),
        Field::new("move_index", DataType::UInt32, false),
        timestamp("ts"),
        text("account", false),
        text("asset", false),
        text("movement", false),
        text("cause", false),
        id("order_id", true),
        Field::new("trade_index", DataType::UInt32, true),
        decimal("available_delta", false),
        decimal("held_delta", false),
        decimal("fee", false),
        decimal("available_after", false),
        decimal("held_after", false),
    ]
}

fn candle_fields() -> Vec<Field> {
    vec![
        text("symbol", false),
        text("interval", false),
        timestamp("start"),
        decimal("open", false),
        decimal("high", false),
        decimal("low", false),
        decimal("close", false),
        decimal("volume", false),
        decimal("notional", false),
        id("trades", false),
        id("last_seq", false),
    ]
}

fn settlement_fields() -> Vec<Field> {
    vec![
        id("seq", false),
        timestamp("ts"),
        text("account", false),
        text("symbol", false),
        text("side", false),
        decimal("qty", false),
        decimal("price", false),
        decimal("pnl", false),
        text("asset", false),
    ]
}

fn decimal_builder(capacity: usize) -> Decimal128Builder {
    Decimal128Builder::with_capacity(capacity)
        .with_data_type(DataType::Decimal128(PRECISION, SCALE as i8))
}

fn text_builder(capacity: usize, bytes_per_value: usize) -> StringBuilder {
    StringBuilder::with_capacity(capacity, capacity * bytes_per_value)
}

fn timestamp_builder(capacity: usize) -> TimestampNanosecondBuilder {
    TimestampNanosecondBuilder::with_capacity(capacity).with_timezone("UTC")
}

// The batches are built in one pass over the rows, appending to every column's
// builder: a pass per column would read all the rows again for each column.

pub fn order_batch(rows: &[OrderRow]) -> Result<RecordBatch, ArrowError> {
    let n = rows.len();
    let mut seq = UInt64Builder::with_capacity(n);
    let mut ts = timestamp_builder(n);
    let mut order_id = UInt64Builder::with_capacity(n);
    let mut account = text_builder(n, 8);
    let mut client_order_id = text_builder(n, 12);
    let mut symbol = text_builder(n, 8);
    let mut side = text_builder(n, 4);
    let mut kind = text_builder(n, 6);
    let mut time_in_force = text_builder(n, 3);
    let mut post_only = BooleanBuilder::with_capacity(n);
    let mut price = decimal_builder(n);
    let mut qty = decimal_builder(n);
    let mut filled = decimal_builder(n);
    let mut remaining = decimal_builder(n);
    let mut status = text_builder(n, 6);
    let mut change = text_builder(n, 6);
    let mut reason = text_builder(n, 1);
    for row in rows {
        seq.append_value(row.seq.0);
        ts.append_value(row.ts.0 as i64);
        order_id.append_option(row.order_id.map(|id| id.0));
        account.append_value(&row.account);
        client_order_id.append_value(&row.client_order_id);
        symbol.append_value(&row.symbol);
        side.append_value(row.side);
        kind.append_value(row.kind);
        time_in_force.append_value(row.time_in_force);
        post_only.append_value(row.post_only);
        price.append_option(row.price);
        qty.append_value(row.qty);
        filled.append_value(row.filled);
        remaining.append_value(row.remaining);
        status.append_value(row.status);
        change.append_value(row.change);
        reason.append_option(row.reason);
    }
    let columns: Vec<ArrayRef> = vec![
        Arc::new(seq.finish()),
        Arc::new(ts.finish()),
        Arc::new(order_id.finish()),
        Arc::new(account.finish()),
        Arc::new(client_order_id.finish()),
        Arc::new(symbol.finish()),
        Arc::new(side.finish()),
        Arc::new(kind.finish()),
        Arc::new(time_in_force.finish()),
        Arc::new(post_only.finish()),
        Arc::new(price.finish()),
        Arc::new(qty.finish()),
        Arc::new(filled.finish()),
        Arc::new(remaining.finish()),
        Arc::new(status.finish()),
        Arc::new(change.finish()),
        Arc::new(reason.finish()),
    ];
    RecordBatch::try_new(Table::Orders.schema(), columns)
}

pub fn trade_batch(rows: &[TradeRow]) -> Result<RecordBatch, ArrowError> {
    let n = rows.len();
    let mut seq = UInt64Builder::with_capacity(n);
    let mut trade_index = UInt32Builder::with_capacity(n);
    let mut trade_id = text_builder(n, 12);
    let mut ts = timestamp_builder(n);
    let mut symbol = text_builder(n, 8);
    let mut price = decimal_builder(n);
    let mut qty = decimal_builder(n);
    let mut notional = decimal_builder(n);
    let mut taker_side = text_builder(n, 4);
    let mut maker_order_id = UInt64Builder::with_capacity(n);
    let mut taker_order_id = UInt64Builder::with_capacity(n);
    let mut maker_account = text_builder(n, 8);
    let mut taker_account = text_builder(n, 8);
    let mut maker_client_order_id = text_builder(n, 12);
    let mut taker_client_order_id = text_builder(n, 12);
    let mut maker_fee = decimal_builder(n);
    let mut maker_fee_asset = text_builder(n, 4);
    let mut taker_fee = decimal_builder(n);
    let mut taker_fee_asset = text_builder(n, 4);
    let mut id_text = String::new();
    for row in rows {
        seq.append_value(row.seq.0);
        trade_index.append_value(row.trade_index);
        id_text.clear();
        let _ = write!(id_text, "{}-{}", row.seq, row.trade_index);
        trade_id.append_value(&id_text);
        ts.append_value(row.ts.0 as i64);
        symbol.append_value(&row.symbol);
        price.append_value(row.price);
        qty.append_value(row.qty);
        notional.append_value(row.notional);
        taker_side.append_value(row.taker_side);
        maker_order_id.append_option(row.maker_order_id.map(|id| id.0));
        taker_order_id.append_option(row.taker_order_id.map(|id| id.0));
        maker_account.append_value(&row.maker_account);
        taker_account.append_value(&row.taker_account);
        maker_client_order_id.append_value(&row.maker_client_order_id);
        taker_client_order_id.append_value(&row.taker_client_order_id);
        maker_fee.append_value(row.maker_fee);
        maker_fee_asset.append_value(&row.maker_fee_asset);
        taker_fee.append_value(row.taker_fee);
        taker_fee_asset.append_value(&row.taker_fee_asset);
    }
    let columns: Vec<ArrayRef> = vec![
        Arc::new(seq.finish()),
        Arc::new(trade_index.finish()),
        Arc::new(trade_id.finish()),
        Arc::new(ts.finish()),
        Arc::new(symbol.finish()),
        Arc::new(price.finish()),
        Arc::new(qty.finish()),
        Arc::new(notional.finish()),
        Arc::new(taker_side.finish()),
        Arc::new(maker_order_id.finish()),
        Arc::new(taker_order_id.finish()),
        Arc::new(maker_account.finish()),
        Arc::new(taker_account.finish()),
        Arc::new(maker_client_order_id.finish()),
        Arc::new(taker_client_order_id.finish()),
        Arc::new(maker_fee.finish()),
        Arc::new(maker_fee_asset.finish()),
        Arc::new(taker_fee.finish()),
        Arc::new(taker_fee_asset.finish()),
    ];
    RecordBatch::try_new(Table::Trades.schema(), columns)
}

pub fn ledger_batch(rows: &[LedgerRow]) -> Result<RecordBatch, ArrowError> {
    let n = rows.len();
    let mut seq = UInt64Builder::with_capacity(n);
    let mut move_index = UInt32Builder::with_capacity(n);
    let mut ts = timestamp_builder(n);
    let mut account = text_builder(n, 8);
    let mut asset = text_builder(n, 4);
    let mut movement = text_builder(n, 6);
    let mut cause = text_builder(n, 5);
    let mut order_id = UInt64Builder::with_capacity(n);
    let mut trade_index = UInt32Builder::with_capacity(n);
    let mut available_delta = decimal_builder(n);
    let mut held_delta = decimal_builder(n);
    let mut fee = decimal_builder(n);
    let mut available_after = decimal_builder(n);
    let mut held_after = decimal_builder(n);
    for row in rows {
        seq.append_value(row.seq.0);
        move_index.append_value(row.move_index);
        ts.append_value(row.ts.0 as i64);
        account.append_value(&row.account);
        asset.append_value(&row.asset);
        movement.append_value(row.movement);
        cause.append_value(row.cause);
        order_id.append_option(row.order_id.map(|id| id.0));
        trade_index.append_option(row.trade_index);
        available_delta.append_value(row.available_delta);
        held_delta.append_value(row.held_delta);
        fee.append_value(row.fee);
        available_after.append_value(row.available_after);
        held_after.append_value(row.held_after);
    }
    let columns: Vec<ArrayRef> = vec![
        Arc::new(seq.finish()),
        Arc::new(move_index.finish()),
        Arc::new(ts.finish()),
        Arc::new(account.finish()),
        Arc::new(asset.finish()),
        Arc::new(movement.finish()),
        Arc::new(cause.finish()),
        Arc::new(order_id.finish()),
        Arc::new(trade_index.finish()),
        Arc::new(available_delta.finish()),
        Arc::new(held_delta.finish()),
        Arc::new(fee.finish()),
        Arc::new(available_after.finish()),
        Arc::new(held_after.finish()),
    ];
    RecordBatch::try_new(Table::Ledger.schema(), columns)
}

pub fn candle_batch(rows: &[CandleRow]) -> Result<RecordBatch, ArrowError> {
    let n = rows.len();
    let mut symbol = text_builder(n, 8);
    let mut interval = text_builder(n, 2);
    let mut start = timestamp_builder(n);
    let mut prices =
        [decimal_builder(n), decimal_builder(n), decimal_builder(n), decimal_builder(n)];
    let mut volume = decimal_builder(n);
    let mut notional = decimal_builder(n);
    let mut trades = UInt64Builder::with_capacity(n);
    let mut last_seq = UInt64Builder::with_capacity(n);
    for row in rows {
        symbol.append_value(&row.symbol);
        interval.append_value("1m");
        start.append_value(row.start as i64);
        for (builder, value) in prices.iter_mut().zip([row.open, row.high, row.low, row.close]) {
            builder.append_value(value);
        }
        volume.append_value(row.volume);
        notional.append_value(row.notional);
        trades.append_value(row.trades);
        last_seq.append_value(row.last_seq.0);
    }
    let [mut open, mut high, mut low, mut close] = prices;
    let columns: Vec<ArrayRef> = vec![
        Arc::new(symbol.finish()),
        Arc::new(interval.finish()),
        Arc::new(start.finish()),
        Arc::new(open.finish()),
        Arc::new(high.finish()),
        Arc::new(low.finish()),
        Arc::new(close.finish()),
        Arc::new(volume.finish()),
        Arc::new(notional.finish()),
        Arc::new(trades.finish()),
        Arc::new(last_seq.finish()),
    ];
    RecordBatch::try_new(Table::Candles.schema(), columns)
}

pub fn settlement_batch(rows: &[SettlementRow]) -> Result<RecordBatch, ArrowError> {
    let n = rows.len();
    let mut seq = UInt64Builder::with_capacity(n);
    let mut ts = timestamp_builder(n);
    let mut account = text_builder(n, 8);
    let mut symbol = text_builder(n, 8);
    let mut side = text_builder(n, 5);
    let mut qty = decimal_builder(n);
    let mut price = decimal_builder(n);
    let mut pnl = decimal_builder(n);
    let mut asset = text_builder(n, 4);
    for row in rows {
        seq.append_value(row.seq.0);
        ts.append_value(row.ts.0 as i64);
        account.append_value(&row.account);
        symbol.append_value(&row.symbol);
        side.append_value(row.side);
        qty.append_value(row.qty);
        price.append_value(row.price);
        pnl.append_value(row.pnl);
        asset.append_value(&row.asset);
    }
    let columns: Vec<ArrayRef> = vec![
        Arc::new(seq.finish()),
        Arc::new(ts.finish()),
        Arc::new(account.finish()),
        Arc::new(symbol.finish()),
        Arc::new(side.finish()),
        Arc::new(qty.finish()),
        Arc::new(price.finish()),
        Arc::new(pnl.finish()),
        Arc::new(asset.finish()),
    ];
    RecordBatch::try_new(Table::Settlements.schema(), columns)
}
