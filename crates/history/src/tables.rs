//! The history's tables: names, Arrow schemas, and rows turned into record batches.
//! The schemas are the files' contract with every reader (`docs/history.md`): columns
//! are only ever added at the end.

use std::sync::Arc;

use arrow_array::builder::{
    BooleanBuilder, Decimal128Builder, StringBuilder, TimestampNanosecondBuilder, UInt32Builder,
    UInt64Builder,
};
use arrow_array::{ArrayRef, RecordBatch};
use arrow_schema::{ArrowError, DataType, Field, Schema, SchemaRef, TimeUnit};

use crate::rows::{CandleRow, LedgerRow, OrderRow, TradeRow, SCALE};

/// Precision of every decimal column: 38 digits, 18 of them after the point.
pub const PRECISION: u8 = 38;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Table {
    OrderEvents,
    Orders,
    Trades,
    Ledger,
    Candles,
}

impl Table {
    pub const ALL: [Table; 5] =
        [Table::OrderEvents, Table::Orders, Table::Trades, Table::Ledger, Table::Candles];

    /// The table's directory and its name in SQL.
    pub fn name(self) -> &'static str {
        match self {
            Table::OrderEvents => "order_events",
            Table::Orders => "orders",
            Table::Trades => "trades",
            Table::Ledger => "ledger",
            Table::Candles => "candles",
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
        text("trade_id", true),
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

fn decimals(
    values: impl Iterator<Item = Option<i128>>,
    capacity: usize,
) -> Result<ArrayRef, ArrowError> {
    let mut builder = Decimal128Builder::with_capacity(capacity);
    for value in values {
        builder.append_option(value);
    }
    Ok(Arc::new(builder.finish().with_precision_and_scale(PRECISION, SCALE as i8)?))
}

fn texts<'a>(values: impl Iterator<Item = Option<&'a str>>, capacity: usize) -> ArrayRef {
    let mut builder = StringBuilder::with_capacity(capacity, capacity * 8);
    for value in values {
        builder.append_option(value);
    }
    Arc::new(builder.finish())
}

fn ids(values: impl Iterator<Item = Option<u64>>, capacity: usize) -> ArrayRef {
    let mut builder = UInt64Builder::with_capacity(capacity);
    for value in values {
        builder.append_option(value);
    }
    Arc::new(builder.finish())
}

fn timestamps(values: impl Iterator<Item = u64>, capacity: usize) -> ArrayRef {
    let mut builder = TimestampNanosecondBuilder::with_capacity(capacity).with_timezone("UTC");
    for value in values {
        builder.append_value(value as i64);
    }
    Arc::new(builder.finish())
}

pub fn order_batch(rows: &[OrderRow]) -> Result<RecordBatch, ArrowError> {
    let n = rows.len();
    let mut post_only = BooleanBuilder::with_capacity(n);
    rows.iter().for_each(|row| post_only.append_value(row.post_only));
    let columns: Vec<ArrayRef> = vec![
        ids(rows.iter().map(|row| Some(row.seq)), n),
        timestamps(rows.iter().map(|row| row.ts), n),
        ids(rows.iter().map(|row| row.order_id), n),
        texts(rows.iter().map(|row| Some(row.account.as_str())), n),
        texts(rows.iter().map(|row| Some(row.client_order_id.as_str())), n),
        texts(rows.iter().map(|row| Some(row.symbol.as_str())), n),
        texts(rows.iter().map(|row| Some(row.side)), n),
        texts(rows.iter().map(|row| Some(row.kind)), n),
        texts(rows.iter().map(|row| Some(row.time_in_force)), n),
        Arc::new(post_only.finish()),
        decimals(rows.iter().map(|row| row.price), n)?,
        decimals(rows.iter().map(|row| Some(row.qty)), n)?,
        decimals(rows.iter().map(|row| Some(row.filled)), n)?,
        decimals(rows.iter().map(|row| Some(row.remaining)), n)?,
        texts(rows.iter().map(|row| Some(row.status)), n),
        texts(rows.iter().map(|row| Some(row.change)), n),
        texts(rows.iter().map(|row| row.reason), n),
    ];
    RecordBatch::try_new(Table::Orders.schema(), columns)
}

pub fn trade_batch(rows: &[TradeRow]) -> Result<RecordBatch, ArrowError> {
    let n = rows.len();
    let mut trade_index = UInt32Builder::with_capacity(n);
    rows.iter().for_each(|row| trade_index.append_value(row.trade_index));
    let trade_ids: Vec<String> = rows.iter().map(TradeRow::trade_id).collect();
    let columns: Vec<ArrayRef> = vec![
        ids(rows.iter().map(|row| Some(row.seq)), n),
        Arc::new(trade_index.finish()),
        texts(trade_ids.iter().map(|id| Some(id.as_str())), n),
        timestamps(rows.iter().map(|row| row.ts), n),
        texts(rows.iter().map(|row| Some(row.symbol.as_str())), n),
        decimals(rows.iter().map(|row| Some(row.price)), n)?,
        decimals(rows.iter().map(|row| Some(row.qty)), n)?,
        decimals(rows.iter().map(|row| Some(row.notional)), n)?,
        texts(rows.iter().map(|row| Some(row.taker_side)), n),
        ids(rows.iter().map(|row| row.maker_order_id), n),
        ids(rows.iter().map(|row| row.taker_order_id), n),
        texts(rows.iter().map(|row| Some(row.maker_account.as_str())), n),
        texts(rows.iter().map(|row| Some(row.taker_account.as_str())), n),
        texts(rows.iter().map(|row| Some(row.maker_client_order_id.as_str())), n),
        texts(rows.iter().map(|row| Some(row.taker_client_order_id.as_str())), n),
        decimals(rows.iter().map(|row| Some(row.maker_fee)), n)?,
        texts(rows.iter().map(|row| Some(row.maker_fee_asset.as_str())), n),
        decimals(rows.iter().map(|row| Some(row.taker_fee)), n)?,
        texts(rows.iter().map(|row| Some(row.taker_fee_asset.as_str())), n),
    ];
    RecordBatch::try_new(Table::Trades.schema(), columns)
}

pub fn ledger_batch(rows: &[LedgerRow]) -> Result<RecordBatch, ArrowError> {
    let n = rows.len();
    let mut move_index = UInt32Builder::with_capacity(n);
    rows.iter().for_each(|row| move_index.append_value(row.move_index));
    let columns: Vec<ArrayRef> = vec![
        ids(rows.iter().map(|row| Some(row.seq)), n),
        Arc::new(move_index.finish()),
        timestamps(rows.iter().map(|row| row.ts), n),
        texts(rows.iter().map(|row| Some(row.account.as_str())), n),
        texts(rows.iter().map(|row| Some(row.asset.as_str())), n),
        texts(rows.iter().map(|row| Some(row.movement)), n),
        texts(rows.iter().map(|row| Some(row.cause)), n),
        ids(rows.iter().map(|row| row.order_id), n),
        texts(rows.iter().map(|row| row.trade_id.as_deref()), n),
        decimals(rows.iter().map(|row| Some(row.available_delta)), n)?,
        decimals(rows.iter().map(|row| Some(row.held_delta)), n)?,
        decimals(rows.iter().map(|row| Some(row.fee)), n)?,
        decimals(rows.iter().map(|row| Some(row.available_after)), n)?,
        decimals(rows.iter().map(|row| Some(row.held_after)), n)?,
    ];
    RecordBatch::try_new(Table::Ledger.schema(), columns)
}

pub fn candle_batch(rows: &[CandleRow]) -> Result<RecordBatch, ArrowError> {
    let n = rows.len();
    let columns: Vec<ArrayRef> = vec![
        texts(rows.iter().map(|row| Some(row.symbol.as_str())), n),
        texts(rows.iter().map(|_| Some("1m")), n),
        timestamps(rows.iter().map(|row| row.start), n),
        decimals(rows.iter().map(|row| Some(row.open)), n)?,
        decimals(rows.iter().map(|row| Some(row.high)), n)?,
        decimals(rows.iter().map(|row| Some(row.low)), n)?,
        decimals(rows.iter().map(|row| Some(row.close)), n)?,
        decimals(rows.iter().map(|row| Some(row.volume)), n)?,
        decimals(rows.iter().map(|row| Some(row.notional)), n)?,
        ids(rows.iter().map(|row| Some(row.trades)), n),
        ids(rows.iter().map(|row| Some(row.last_seq)), n),
    ];
    RecordBatch::try_new(Table::Candles.schema(), columns)
}
