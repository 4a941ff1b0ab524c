//! Snapshots: the complete state of an `Exchange` as bytes (`encode_state`), and the
//! exchange rebuilt from them (`decode_state`), so that a journal can write a snapshot
//! and recovery can resume from it: the rebuilt exchange gives the same events for the
//! same commands, and the same state document and digest, as the one that was saved.
//!
//! This module owns the snapshot format and its validation. It must never do I/O, and
//! it must never trust its input: decoding hostile bytes may fail, but never panics,
//! never loops without consuming input, and allocates only in proportion to what the
//! bytes describe: every count is checked against the bytes left before anything is
//! made for it, so memory stays within a small multiple of the input, plus the book
//! pools `ExchangeConfig` asks for per instrument defined (what the live engine holds
//! per instrument). Checksums and framing are the journal's business; this module
//! checks structure and meaning: every index in range, every amount one the engine
//! could hold, books in priority order and never crossed, no order key twice, each
//! account's `held` equal to what its orders hold, each asset conserved. Then it runs
//! `Exchange::check_invariants` on the result.
//!
//! What is stored is everything that can decide a future event or the state document:
//! the time, assets, instruments, accounts in id order (ids come back identical:
//! gateways address accounts by id), every balance, fee balances, net deposits, and
//! every resting order with all its fields, each book side in priority order. Derived
//! structures (the open-order index, price windows, level slabs, name tables) are
//! rebuilt, and orders get new slab slots: no event, document or digest depends on a
//! slot, a window's position or a table's size.
//!
//! # Format, version 1
//!
//! Eight bytes of magic (`BOURSNAP`), the version as a little-endian `u32`, then
//! unsigned LEB128 varints (7 bits a byte, least significant first; only the shortest
//! form is accepted, so a state has exactly one encoding) and strings (a varint length,
//! then UTF-8). Signed fields are never negative in a valid state, so all are unsigned.
//!
//! ```text
//! time_ns
//! asset count;      per asset: name, decimals
//! instrument count; per instrument: symbol, base asset, quote asset (asset indexes),
//!                   price decimals, qty decimals, tick, lot, min qty, max qty (both up
//!                   to 128 bits), maker fee bps, taker fee bps, market band bps
//! account count;    per account, in id order: name
//! per asset:        fee balance, net deposits; per account: available, held
//! open order count  (all books)
//! per instrument, per side (bids, then asks):
//!                   per level, best first: price (never 0), order count;
//!                     per order, in arrival order: account, id, remaining, filled,
//!                     flags (one byte: stp mode in bits 0-1, post_only in bit 2)
//!                   then 0 (ends the side)
//! ```
//!
//! Nothing may follow. Decoding one resting order reads about five varints and
//! re-inserts it in its book and the index, with no allocation of its own.
//!
//! # Venue snapshots (`encode_venue`, `decode_venue`), versions 1 and 2
//!
//! A `Venue` without activity, without halted instruments and without an open-orders
//! limit is stored as its exchange: exactly `encode_state`'s bytes, so an old snapshot
//! and a new one of such a venue are the same thing. A venue with activity
//! (`venue::Activity`), with halted instruments (`Command::Halt`) or with an open-orders
//! limit (`Command::SetLimits`, not 0) gets its own container, in the same varints and
//! strings:
//!
//! ```text
//! magic BOURSVEN, version (little-endian u32: 2 when an order record is a spend-amount
//!                   buy, else 1)
//! state length;     then exactly that many bytes: the exchange, as `encode_state`
//! flags             one byte: bit 0 set when the activity section follows, bit 1 set
//!                   when the limit follows; the other bits 0
//! limit             (only when flags bit 1 is set): the open orders an account may
//!                   have, never 0 (no limit is stored as bit 1 clear)
//! halted count;     per halted instrument, ascending: instrument index
//! activity          (only when flags bit 0 is set):
//!   account count   (accounts with any activity)
//!   per account, ascending account id (each listed account has something):
//!                   account id
//!                   open count;     per open order, ascending order id: order
//!                   finished count; per finished order, oldest finished first: order
//!                   fill count;     per fill, oldest first: fill
//! order:            order id (never 0), client id, instrument,
//!                   flags (one byte: side in bit 0 (1 = sell), market in bit 1, time
//!                   in force in bits 2-3 (gtc, ioc, fok), post_only in bit 4, stp mode
//!                   in bits 5-6 (as a resting order's), version 2 only: a spend-amount
//!                   buy in bit 7),
//!                   status (one byte: open, filled, canceled, expired, stp),
//!                   price (0 for a market order), qty, remaining, filled, created_ns,
//!                   updated_ns, then for a spend-amount buy its quote_qty (in the quote
//!                   asset's smallest units; `qty` is what it bought)
//! fill:             seq, trade index, order id, client id, instrument,
//!                   flags (one byte: side in bit 0 (1 = sell), taker in bit 1),
//!                   price, qty, fee, ts_ns
//! ```
//!
//! A fill's fee asset is not stored: it is what its side receives (the base for a buy,
//! the quote for a sell). Nothing may follow. Version 2 differs from version 1 only by
//! bit 7 of a record's flags and the `quote_qty` it announces; a venue none of whose
//! records is a spend-amount buy is written as version 1 (its bytes are those of every
//! earlier build), and a version 2 container without one is invalid (not canonical). A container with neither activity nor a
//! halted instrument nor a limit is invalid (that venue is stored as its exchange).
//! Decoding checks the exchange as `decode_state` does (an error inside it is reported
//! at its offset in the container), the flags, the limit (not 0), the halted
//! instruments (each an instrument of the exchange, strictly ascending), then every
//! record and fill against the exchange: instruments in range, prices and quantities
//! in ticks and lots, kinds, statuses and times consistent (market orders have no price
//! and never rest; open records are resting orders, finished ones have nothing
//! remaining; no time after the exchange's), open records ascending by order id and
//! each equal to the exchange's open order of its key, their number equal to the
//! exchange's open orders, at most `FINISHED_ORDERS_KEPT` finished orders and
//! `FILLS_KEPT` fills per account, fills in trade order, no order id and no (account,
//! client id) twice. The encoding is canonical: decoding and encoding again gives the
//! same bytes.

use std::borrow::Cow;
use std::fmt;

use compact_str::CompactString;

use crate::book::{LevelOrders, LevelSummary, NewRestingOrder, RestingOrder};
use crate::command::{Offset, PositionSide, Side, StpMode, TimeInForce};
use crate::exchange::{
    AssetSpec, Exchange, ExchangeConfig, Instrument, InstrumentKind, ASSET_DECIMALS_MAX,
    FEE_BPS_MAX, MARKET_BAND_BPS_MAX,
};
use crate::futures::{FutureRules, PositionEntry};
use crate::ids::{
    AccountId, AssetId, ClientOrderId, InstrumentId, OrderHandle, OrderId, Seq, TimestampNs,
};
use crate::ledger::Balance;
use crate::num::{pow10_saturating, Amount, Price, Qty};
use crate::spot::SpotRules;
use crate::venue::{
    check_open_record, check_record, Activity, Fill, Liquidity, ListKind, OrderKind, OrderRecord,
    OrderStatus, Venue, FILLS_KEPT, FINISHED_ORDERS_KEPT,
};

/// The first bytes of every snapshot.
pub const MAGIC: [u8; 8] = *b"BOURSNAP";
/// The format version this build writes when the state has a futures contract, and
/// the newest it reads.
pub const FORMAT_VERSION: u32 = 2;
/// The version of a state without futures (spot only), which this build writes for
/// such a state and reads: its bytes are those of every earlier build.
pub const SPOT_FORMAT_VERSION: u32 = 1;
/// The first bytes of a venue snapshot with activity, halts or an open-orders limit.
pub const VENUE_MAGIC: [u8; 8] = *b"BOURSVEN";
/// The venue container's version this build writes when no order record is a
/// spend-amount buy, and reads: its bytes are those of every earlier build.
pub const VENUE_FORMAT_VERSION: u32 = 1;
/// The venue container's version this build writes when an order record is a
/// spend-amount buy (`quote_qty`), and the newest it reads.
pub const VENUE_QUOTE_QTY_FORMAT_VERSION: u32 = 2;

const HEADER_BYTES: usize = MAGIC.len() + 4;
/// The fewest bytes an item can take, which bounds what a count may claim.
const MIN_ASSET_BYTES: usize = 2;
/// Twelve one-byte fields, plus the two side terminators of its book.
const MIN_INSTRUMENT_BYTES: usize = 14;
const MIN_ORDER_BYTES: usize = 5;
/// Ends a book side where a level's price would be (no level has price 0).
const END_OF_SIDE: u64 = 0;

/// Orders read between resting an order and indexing it: enough to hide the index's
/// cache miss behind the reading of the next orders.
const INDEX_LAG: usize = 16;

const STP_BITS: u8 = 0b11;
const POST_ONLY_BIT: u8 = 0b100;
/// Version 2, futures books only: the offset (0 open, 1 close, 2 close today).
const OFFSET_SHIFT: u8 = 3;
const OFFSET_BITS: u8 = 0b11 << OFFSET_SHIFT;
/// Version 2, futures books only: a `gfd` order.
const GOOD_FOR_DAY_BIT: u8 = 0b10_0000;

/// Version 2: an instrument's kind, before its fields.
const KIND_SPOT: u8 = 0;
const KIND_FUTURE: u8 = 1;
const KIND_EXPIRED_FUTURE: u8 = 2;

/// Why bytes are not a snapshot this build can restore.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SnapshotError {
    /// The bytes end (or a length or count points) beyond their end; `offset` is where
    /// more was needed.
    Truncated { offset: usize },
    /// The bytes do not start with `MAGIC`.
    BadMagic,
    /// A version this build cannot read.
    UnsupportedVersion(u32),
    /// A value that no exchange state can have, starting at byte `offset`.
    Invalid { offset: usize, what: Cow<'static, str> },
}

impl SnapshotError {
    /// A stable code for logs and metrics.
    pub fn code(&self) -> &'static str {
        match self {
            SnapshotError::Truncated { .. } => "truncated",
            SnapshotError::BadMagic => "bad_magic",
            SnapshotError::UnsupportedVersion(_) => "unsupported_version",
            SnapshotError::Invalid { .. } => "invalid",
        }
    }
}

impl fmt::Display for SnapshotError {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SnapshotError::Truncated { offset } => {
                write!(formatter, "snapshot truncated: more bytes needed at offset {offset}")
            }
            SnapshotError::BadMagic => formatter.write_str("not a Bourse snapshot (bad magic)"),
            SnapshotError::UnsupportedVersion(version) => write!(
                formatter,
                "snapshot format version {version} is not supported (this build reads \
                 {FORMAT_VERSION})"
            ),
            SnapshotError::Invalid { offset, what } => {
                write!(formatter, "invalid snapshot at offset {offset}: {what}")
            }
        }
    }
}

impl std::error::Error for SnapshotError {}

fn invalid(offset: usize, what: &'static str) -> SnapshotError {
    SnapshotError::Invalid { offset, what: Cow::Borrowed(what) }
}

// ----------------------------------------------------------------------------------
// Encoding

/// Appends the full state of `exchange` to `out` (format version `FORMAT_VERSION`).
pub fn encode_state(exchange: &Exchange, out: &mut Vec<u8>) {
    out.reserve(estimated_size(exchange));
    out.extend_from_slice(&MAGIC);
    let futures = exchange.instruments().iter().any(Instrument::is_future);
    let version = if futures { FORMAT_VERSION } else { SPOT_FORMAT_VERSION };
    out.extend_from_slice(&version.to_le_bytes());
    put_varint(out, exchange.time_ns().0);
    encode_definitions(exchange, futures, out);
    encode_accounts(exchange, futures, out);
    put_varint(out, exchange.open_order_count() as u64);
    let mut lanes = Lanes::default();
    for index in 0..exchange.instruments().len() {
        let instrument = InstrumentId(index as u32);
        let book = exchange.book(instrument);
        lanes.futures = exchange.positions(instrument).map(|_| exchange);
        for side in [Side::Buy, Side::Sell] {
            book.for_each_level(side, |level, orders| {
                lanes.push(level, orders, out);
            });
            lanes.flush(out);
            put_varint(out, END_OF_SIDE);
        }
    }
    if futures {
        encode_positions(exchange, out);
        let mut flows: Vec<_> = exchange.all_day_flows().collect();
        flows.sort_unstable_by_key(|(key, _)| *key);
        put_varint(out, flows.len() as u64);
        for ((account, asset), flows) in flows {
            put_varint(out, u64::from(account.0));
            put_varint(out, u64::from(asset.0));
            put_varint(out, flows.deposited.0 as u64);
            put_varint(out, flows.withdrawn.0 as u64);
        }
    }
}

/// Version 2: per futures contract, in instrument order, its mark price and its last
/// settlement price (0: none yet), then its positions that hold or did something today, by ascending account id:
/// account, realised today (zigzag), fees today, then the long and the short side, each
/// its history price and quantity (both 0 when it has none), its open cost (up to 128
/// bits) and its today entries (a count, then price and quantity each, oldest first).
/// Then the day flows: a count, and per (account, asset) ascending: account, asset,
/// deposited, withdrawn.
fn encode_positions(exchange: &Exchange, out: &mut Vec<u8>) {
    for index in 0..exchange.instruments().len() {
        let Some(positions) = exchange.positions(InstrumentId(index as u32)) else { continue };
        put_varint(out, positions.mark_price().map_or(0, |price| price.0 as u64));
        put_varint(out, positions.settlement_price().map_or(0, |price| price.0 as u64));
        let mut held: Vec<_> = positions.all().iter().filter(|p| !p.is_idle()).collect();
        held.sort_unstable_by_key(|position| position.account);
        put_varint(out, held.len() as u64);
        for position in held {
            put_varint(out, u64::from(position.account.0));
            put_varint(out, zigzag(position.realised_today.0));
            put_varint(out, position.fees_today.0 as u64);
            for side in PositionSide::BOTH {
                let state = position.side(side);
                put_varint(out, state.history_price.0 as u64);
                put_varint(out, state.history_qty.0 as u64);
                put_varint_u128(out, state.open_cost as u128);
                put_varint(out, positions.today_entries(state).count() as u64);
                for entry in positions.today_entries(state) {
                    put_varint(out, entry.price.0 as u64);
                    put_varint(out, entry.qty.0 as u64);
                }
            }
        }
    }
}

/// Levels whose orders are encoded side by side.
const LANES: usize = 8;

/// Encodes `LANES` consecutive levels of a side at a time, one order of each in turn.
///
/// Walking a level is a chain of dependent loads (each order names the next), and in a
/// book built by live trading the orders of one level lie anywhere in memory: one
/// level at a time, every order is a cache miss waited for alone. Taking one step in
/// each of eight levels in turn keeps eight misses in flight. Each level goes to its own
/// buffer, appended to the output in priority order once the group is done; the
/// buffers are reused, so nothing is allocated per order.
#[derive(Default)]
struct Lanes<'book> {
    levels: Vec<LevelOrders<'book>>,
    buffers: [Vec<u8>; LANES],
    /// Set for a futures contract's book, whose orders carry their futures terms.
    futures: Option<&'book Exchange>,
}

impl<'book> Lanes<'book> {
    fn push(&mut self, level: LevelSummary, orders: LevelOrders<'book>, out: &mut Vec<u8>) {
        let buffer = &mut self.buffers[self.levels.len()];
        put_varint(buffer, level.price.0 as u64);
        put_varint(buffer, u64::from(level.order_count));
        self.levels.push(orders);
        if self.levels.len() == LANES {
            self.flush(out);
        }
    }

    /// Encodes the orders of the levels pushed so far and appends them.
    fn flush(&mut self, out: &mut Vec<u8>) {
        let mut active = self.levels.len();
        while active > 0 {
            active = 0;
            for (orders, buffer) in self.levels.iter_mut().zip(&mut self.buffers) {
                if let Some(order) = orders.next() {
                    put_order(buffer, order, self.futures);
                    active += 1;
                }
            }
        }
        for buffer in &mut self.buffers[..self.levels.len()] {
            out.extend_from_slice(buffer);
            buffer.clear();
        }
        self.levels.clear();
    }
}

/// One resting order; on a futures contract's book (`futures`: its exchange) with its
/// offset and `gfd` in the flags and the `seq` that placed it after them.
#[inline]
fn put_order(out: &mut Vec<u8>, order: &RestingOrder, futures: Option<&Exchange>) {
    put_varint(out, u64::from(order.account.0));
    put_str(out, &order.id);
    put_varint(out, order.remaining.0 as u64);
    put_varint(out, order.filled.0 as u64);
    let flags = order_flags(order.stp, order.post_only);
    match futures {
        None => out.push(flags),
        Some(exchange) => {
            let offset = offset_code(order.offset);
            let day = if order.good_for_day { GOOD_FOR_DAY_BIT } else { 0 };
            out.push(flags | offset << OFFSET_SHIFT | day);
            let accepted_at = exchange.accepted_at(order.account, &order.id);
            put_varint(out, accepted_at.map_or(0, |seq| seq.0));
        }
    }
}

/// A rough upper estimate of the encoding's size, so that `out` usually grows once:
/// short ids, small balances and accounts and quantities below 2^21 are the common
/// case (beyond it, `out` just grows again).
fn estimated_size(exchange: &Exchange) -> usize {
    let assets = exchange.assets().len();
    let accounts = exchange.ledger().accounts().len();
    HEADER_BYTES
        + 10
        + assets * 32
        + exchange.instruments().len() * 96
        + accounts * (24 + assets * 6)
        + 10
        + exchange.open_order_count() * 30
}

/// Assets and instruments; with `futures` (version 2) each instrument opens with its
/// kind, and a futures contract's fields follow its own layout.
fn encode_definitions(exchange: &Exchange, futures: bool, out: &mut Vec<u8>) {
    put_varint(out, exchange.assets().len() as u64);
    for asset in exchange.assets() {
        put_str(out, &asset.name);
        put_varint(out, u64::from(asset.decimals));
    }
    put_varint(out, exchange.instruments().len() as u64);
    for instrument in exchange.instruments() {
        if futures {
            out.push(match (&instrument.kind, instrument.expired) {
                (InstrumentKind::Spot(_), _) => KIND_SPOT,
                (InstrumentKind::Future(_), false) => KIND_FUTURE,
                (InstrumentKind::Future(_), true) => KIND_EXPIRED_FUTURE,
            });
        }
        put_str(out, &instrument.symbol);
        match &instrument.kind {
            InstrumentKind::Spot(rules) => {
                put_varint(out, u64::from(rules.base.0));
                put_varint(out, u64::from(rules.quote.0));
            }
            InstrumentKind::Future(rules) => put_varint(out, u64::from(rules.settle.0)),
        }
        put_varint(out, u64::from(instrument.price_decimals));
        put_varint(out, u64::from(instrument.qty_decimals));
        put_varint(out, instrument.tick.0 as u64);
        put_varint(out, instrument.lot.0 as u64);
        put_varint_u128(out, instrument.min_qty as u128);
        put_varint_u128(out, instrument.max_qty as u128);
        match &instrument.kind {
            InstrumentKind::Spot(rules) => {
                put_varint(out, rules.maker_fee_bps as u64);
                put_varint(out, rules.taker_fee_bps as u64);
            }
            InstrumentKind::Future(rules) => {
                put_varint(out, rules.multiplier as u64);
                put_varint(out, u64::from(rules.multiplier_decimals));
                put_varint(out, rules.margin.0 as u64);
                put_varint(out, rules.maker_fee.0 as u64);
                put_varint(out, rules.taker_fee.0 as u64);
                out.push(u8::from(rules.close_today));
            }
        }
        put_varint(out, instrument.market_band_bps as u64);
    }
}

/// Account names, then the ledger column by column (its own layout); with `futures`
/// (version 2) `available` is zigzag-encoded (a settle asset's may be below zero).
fn encode_accounts(exchange: &Exchange, futures: bool, out: &mut Vec<u8>) {
    let ledger = exchange.ledger();
    put_varint(out, ledger.accounts().len() as u64);
    for account in ledger.accounts() {
        put_str(out, &account.name);
    }
    for index in 0..exchange.assets().len() {
        let asset = AssetId(index as u32);
        put_varint(out, ledger.fee_balance(asset).0 as u64);
        put_varint(out, ledger.net_deposits(asset).0 as u64);
        for balance in ledger.balance_column(asset) {
            match futures {
                true => put_varint(out, zigzag(balance.available.0)),
                false => put_varint(out, balance.available.0 as u64),
            }
            put_varint(out, balance.held.0 as u64);
        }
    }
}

fn stp_code(stp: StpMode) -> u8 {
    match stp {
        StpMode::CancelTaker => 0,
        StpMode::CancelMaker => 1,
        StpMode::CancelBoth => 2,
        StpMode::None => 3,
    }
}

fn order_flags(stp: StpMode, post_only: bool) -> u8 {
    stp_code(stp) | if post_only { POST_ONLY_BIT } else { 0 }
}

/// Signed to unsigned, small magnitudes small: 0, -1, 1, -2, ... -> 0, 1, 2, 3, ...
fn zigzag(value: i64) -> u64 {
    ((value << 1) ^ (value >> 63)) as u64
}

fn unzigzag(value: u64) -> i64 {
    ((value >> 1) as i64) ^ -((value & 1) as i64)
}

/// LEB128: 7 bits a byte, least significant first, the high bit set on every byte
/// but the last; small values (most counts, ids, quantities) take one or two bytes.
#[inline]
fn put_varint(out: &mut Vec<u8>, mut value: u64) {
    let mut buffer = [0u8; 10];
    let mut length = 0;
    while value >= 0x80 {
        buffer[length] = value as u8 | 0x80;
        value >>= 7;
        length += 1;
    }
    buffer[length] = value as u8;
    out.extend_from_slice(&buffer[..=length]);
}

fn put_varint_u128(out: &mut Vec<u8>, mut value: u128) {
    while value >= 0x80 {
        out.push(value as u8 | 0x80);
        value >>= 7;
    }
    out.push(value as u8);
}

#[inline]
fn put_str(out: &mut Vec<u8>, text: &str) {
    put_varint(out, text.len() as u64);
    out.extend_from_slice(text.as_bytes());
}

// ----------------------------------------------------------------------------------
// Decoding

/// Rebuilds an exchange from `encode_state`'s bytes, with `config` for its pools (as
/// `Exchange::new` would). Any bytes that are not exactly one valid snapshot give an
/// error, never a panic.
pub fn decode_state(bytes: &[u8], config: ExchangeConfig) -> Result<Exchange, SnapshotError> {
    let mut reader = Reader { bytes, offset: 0 };
    let futures = read_header(&mut reader)? == FORMAT_VERSION;
    let mut exchange = Exchange::new(config);
    exchange.restore_time(TimestampNs(reader.varint()?));
    read_assets(&mut reader, &mut exchange)?;
    read_instruments(&mut reader, &mut exchange, futures)?;
    read_accounts(&mut reader, &mut exchange)?;
    let unheld = read_balances(&mut reader, &mut exchange, futures)?;
    let mut books = BookReader {
        reader,
        exchange,
        unheld,
        orders_left: 0,
        rested: 0,
        unindexed: [(OrderHandle { instrument: InstrumentId(0), slot: 0 }, 0); INDEX_LAG],
    };
    books.read_books()?;
    if futures {
        books.read_positions()?;
        books.read_day_flows()?;
    }
    let BookReader { reader, exchange, unheld, .. } = books;
    if reader.offset != bytes.len() {
        return Err(invalid(reader.offset, "bytes after the end of the snapshot"));
    }
    if unheld.iter().flatten().any(|&held| held != 0) {
        return Err(invalid(bytes.len(), "an account holds more than its open orders hold"));
    }
    exchange
        .check_invariants()
        .map_err(|problem| SnapshotError::Invalid { offset: bytes.len(), what: problem.into() })?;
    Ok(exchange)
}

/// A cursor over the input; every read checks the bytes left.
struct Reader<'a> {
    bytes: &'a [u8],
    offset: usize,
}

impl<'a> Reader<'a> {
    fn remaining(&self) -> usize {
        self.bytes.len() - self.offset
    }

    fn truncated(&self) -> SnapshotError {
        SnapshotError::Truncated { offset: self.bytes.len() }
    }

    #[inline]
    fn byte(&mut self) -> Result<u8, SnapshotError> {
        let byte = *self.bytes.get(self.offset).ok_or_else(|| self.truncated())?;
        self.offset += 1;
        Ok(byte)
    }

    fn take(&mut self, length: usize) -> Result<&'a [u8], SnapshotError> {
        if length > self.remaining() {
            return Err(self.truncated());
        }
        let taken = &self.bytes[self.offset..self.offset + length];
        self.offset += length;
        Ok(taken)
    }

    /// A LEB128 varint of at most 64 bits, in its shortest form.
    #[inline]
    fn varint(&mut self) -> Result<u64, SnapshotError> {
        let start = self.offset;
        let first = self.byte()?;
        if first < 0x80 {
            return Ok(u64::from(first));
        }
        let mut value = u64::from(first & 0x7f);
        let mut shift = 7;
        loop {
            let byte = self.byte()?;
            if shift == 63 && byte > 1 {
                return Err(invalid(start, "varint beyond 64 bits"));
            }
            value |= u64::from(byte & 0x7f) << shift;
            if byte < 0x80 {
                if byte == 0 {
                    return Err(invalid(start, "varint not in its shortest form"));
                }
                return Ok(value);
            }
            shift += 7;
        }
    }

    /// A LEB128 varint of at most 128 bits, in its shortest form.
    fn varint_u128(&mut self) -> Result<u128, SnapshotError> {
        let start = self.offset;
        let mut value = 0u128;
        let mut shift = 0;
        loop {
            let byte = self.byte()?;
            if shift == 126 && byte > 3 {
                return Err(invalid(start, "varint beyond 128 bits"));
            }
            value |= u128::from(byte & 0x7f) << shift;
            if byte < 0x80 {
                if byte == 0 && shift > 0 {
                    return Err(invalid(start, "varint not in its shortest form"));
                }
                return Ok(value);
            }
            shift += 7;
        }
    }

    /// A varint that must fit in `i64` (amounts, prices, quantities).
    #[inline]
    fn units(&mut self, what: &'static str) -> Result<i64, SnapshotError> {
        let start = self.offset;
        i64::try_from(self.varint()?).map_err(|_| invalid(start, what))
    }

    /// A small varint (decimals, fee rates, indexes) as `u32`.
    fn small(&mut self, what: &'static str) -> Result<u32, SnapshotError> {
        let start = self.offset;
        u32::try_from(self.varint()?).map_err(|_| invalid(start, what))
    }

    #[inline]
    fn str(&mut self) -> Result<&'a str, SnapshotError> {
        let length = self.varint()?;
        let start = self.offset;
        let length = usize::try_from(length).map_err(|_| self.truncated())?;
        std::str::from_utf8(self.take(length)?).map_err(|_| invalid(start, "text is not UTF-8"))
    }

    /// A count of items that take at least `min_bytes_each` bytes each: more than the
    /// bytes left can hold is a truncation, caught before anything is made for them.
    fn count(&mut self, min_bytes_each: usize) -> Result<usize, SnapshotError> {
        let count = self.varint()?;
        let fits = self.remaining() / min_bytes_each.max(1);
        match usize::try_from(count) {
            Ok(count) if count <= fits => Ok(count),
            _ => Err(self.truncated()),
        }
    }
}

/// Reads the magic and returns the version (`SPOT_FORMAT_VERSION` or `FORMAT_VERSION`).
fn read_header(reader: &mut Reader<'_>) -> Result<u32, SnapshotError> {
    let available = &reader.bytes[..reader.remaining().min(MAGIC.len())];
    if available != &MAGIC[..available.len()] {
        return Err(SnapshotError::BadMagic);
    }
    reader.take(MAGIC.len())?;
    let version = reader.take(4)?;
    let version = u32::from_le_bytes([version[0], version[1], version[2], version[3]]);
    if version != FORMAT_VERSION && version != SPOT_FORMAT_VERSION {
        return Err(SnapshotError::UnsupportedVersion(version));
    }
    Ok(version)
}

fn read_assets(reader: &mut Reader<'_>, exchange: &mut Exchange) -> Result<(), SnapshotError> {
    for _ in 0..reader.count(MIN_ASSET_BYTES)? {
        let at = reader.offset;
        let name = CompactString::new(reader.str()?);
        let decimals = reader.small("asset decimals out of range")?;
        if i64::from(decimals) > ASSET_DECIMALS_MAX {
            return Err(invalid(at, "asset decimals out of range"));
        }
        if !exchange.restore_asset(AssetSpec { name, decimals }) {
            return Err(invalid(at, "asset name declared twice"));
        }
    }
    Ok(())
}

/// The instruments; with `futures` (version 2) each opens with its kind.
fn read_instruments(
    reader: &mut Reader<'_>,
    exchange: &mut Exchange,
    futures: bool,
) -> Result<(), SnapshotError> {
    for _ in 0..reader.count(MIN_INSTRUMENT_BYTES)? {
        let at = reader.offset;
        let kind = if futures { reader.byte()? } else { KIND_SPOT };
        let instrument = match kind {
            KIND_SPOT => read_instrument(reader, exchange)?,
            KIND_FUTURE | KIND_EXPIRED_FUTURE => {
                let mut future = read_future(reader, exchange)?;
                future.expired = kind == KIND_EXPIRED_FUTURE;
                future
            }
            _ => return Err(invalid(at, "unknown instrument kind")),
        };
        if !exchange.restore_instrument(instrument) {
            return Err(invalid(at, "instrument symbol declared twice"));
        }
    }
    Ok(())
}

/// One instrument, checked as `Exchange` checks a definition (the replay format's
/// `invalid_instrument` rules), in engine units.
fn read_instrument(
    reader: &mut Reader<'_>,
    exchange: &Exchange,
) -> Result<Instrument, SnapshotError> {
    let symbol = CompactString::new(reader.str()?);
    let at = reader.offset;
    let base = read_asset_index(reader, exchange)?;
    let quote = read_asset_index(reader, exchange)?;
    if base == quote {
        return Err(invalid(at, "instrument base equals its quote"));
    }
    let at = reader.offset;
    let price_decimals = reader.small("price decimals out of range")?;
    let qty_decimals = reader.small("qty decimals out of range")?;
    let base_decimals = exchange.asset(base).decimals;
    let quote_decimals = exchange.asset(quote).decimals;
    if qty_decimals > base_decimals
        || u64::from(price_decimals) + u64::from(qty_decimals) > u64::from(quote_decimals)
    {
        return Err(invalid(at, "instrument decimals break the decimals constraint"));
    }
    let (tick, lot, min_qty, max_qty) = read_sizes(reader, price_decimals, qty_decimals)?;
    let maker_fee_bps = read_rate(reader, FEE_BPS_MAX, "maker fee out of range")?;
    let taker_fee_bps = read_rate(reader, FEE_BPS_MAX, "taker fee out of range")?;
    let market_band_bps = read_rate(reader, MARKET_BAND_BPS_MAX, "market band out of range")?;
    Ok(Instrument {
        symbol,
        price_decimals,
        qty_decimals,
        tick: Price(tick),
        lot: Qty(lot),
        min_qty,
        max_qty,
        market_band_bps,
        kind: InstrumentKind::Spot(SpotRules {
            base,
            quote,
            // Decimals are at most 18 and checked above, so these powers fit in i64.
            quote_units_per_notional_unit: pow10_saturating(
                quote_decimals - price_decimals - qty_decimals,
            ) as i64,
            base_units_per_qty_unit: pow10_saturating(base_decimals - qty_decimals) as i64,
            maker_fee_bps,
            taker_fee_bps,
        }),
        expired: false,
    })
}

/// One futures contract, checked as `Exchange` checks a `future` definition.
fn read_future(reader: &mut Reader<'_>, exchange: &Exchange) -> Result<Instrument, SnapshotError> {
    let symbol = CompactString::new(reader.str()?);
    let settle = read_asset_index(reader, exchange)?;
    let at = reader.offset;
    let price_decimals = reader.small("price decimals out of range")?;
    let qty_decimals = reader.small("qty decimals out of range")?;
    let (tick, lot, min_qty, max_qty) = read_sizes(reader, price_decimals, qty_decimals)?;
    let multiplier_at = reader.offset;
    let multiplier = reader.units("multiplier out of range")?;
    let multiplier_decimals = reader.small("multiplier decimals out of range")?;
    if multiplier <= 0 || (multiplier_decimals > 0 && multiplier % 10 == 0) {
        return Err(invalid(multiplier_at, "multiplier"));
    }
    let settle_decimals = exchange.asset(settle).decimals;
    if u64::from(price_decimals) + u64::from(qty_decimals) + u64::from(multiplier_decimals)
        > u64::from(settle_decimals)
    {
        return Err(invalid(at, "contract decimals break the decimals constraint"));
    }
    let fees_at = reader.offset;
    let margin = Amount(reader.units("margin out of range")?);
    let maker_fee = Amount(reader.units("fee out of range")?);
    let taker_fee = Amount(reader.units("fee out of range")?);
    if margin.0 <= 0 || maker_fee > taker_fee || margin.checked_add(taker_fee).is_none() {
        return Err(invalid(fees_at, "margin or fees"));
    }
    let flag_at = reader.offset;
    let close_today = match reader.byte()? {
        0 => false,
        1 => true,
        _ => return Err(invalid(flag_at, "close-today flag")),
    };
    let market_band_bps = read_rate(reader, MARKET_BAND_BPS_MAX, "market band out of range")?;
    Ok(Instrument {
        symbol,
        price_decimals,
        qty_decimals,
        tick: Price(tick),
        lot: Qty(lot),
        min_qty,
        max_qty,
        market_band_bps,
        kind: InstrumentKind::Future(FutureRules {
            settle,
            lot: Qty(lot),
            multiplier,
            multiplier_decimals,
            // Checked above: the exponent is within 0..=18.
            value_scale: pow10_saturating(
                settle_decimals - price_decimals - qty_decimals - multiplier_decimals,
            ) as i64,
            margin,
            maker_fee,
            taker_fee,
            close_today,
        }),
        expired: false,
    })
}

/// An instrument's tick, lot and quantity bounds (spot and futures alike).
fn read_sizes(
    reader: &mut Reader<'_>,
    price_decimals: u32,
    qty_decimals: u32,
) -> Result<(i64, i64, i128, i128), SnapshotError> {
    let tick = read_step(reader, price_decimals, "tick")?;
    let lot = read_step(reader, qty_decimals, "lot")?;
    let at = reader.offset;
    let min_qty = read_qty_bound(reader, lot)?;
    let max_qty = read_qty_bound(reader, lot)?;
    if min_qty > max_qty {
        return Err(invalid(at, "min qty above max qty"));
    }
    Ok((tick, lot, min_qty, max_qty))
}

fn read_asset_index(
    reader: &mut Reader<'_>,
    exchange: &Exchange,
) -> Result<AssetId, SnapshotError> {
    let at = reader.offset;
    let index = reader.small("unknown asset")?;
    if index as usize >= exchange.assets().len() {
        return Err(invalid(at, "unknown asset"));
    }
    Ok(AssetId(index))
}

/// A tick or lot: positive, and in its own decimals (which are those of the decimal
/// literal it came from, trailing zeros removed: so it ends in a non-zero digit when it
/// has decimals at all).
fn read_step(
    reader: &mut Reader<'_>,
    decimals: u32,
    what: &'static str,
) -> Result<i64, SnapshotError> {
    let at = reader.offset;
    let step = reader.units(what)?;
    if step <= 0 || (decimals > 0 && step % 10 == 0) {
        return Err(invalid(at, what));
    }
    Ok(step)
}

fn read_qty_bound(reader: &mut Reader<'_>, lot: i64) -> Result<i128, SnapshotError> {
    let at = reader.offset;
    let bound = i128::try_from(reader.varint_u128()?).map_err(|_| invalid(at, "qty bound"))?;
    if bound <= 0 || bound % i128::from(lot) != 0 {
        return Err(invalid(at, "qty bound not a positive multiple of the lot"));
    }
    Ok(bound)
}

fn read_rate(reader: &mut Reader<'_>, max: i64, what: &'static str) -> Result<i64, SnapshotError> {
    let at = reader.offset;
    let rate = i64::from(reader.small(what)?);
    if rate > max {
        return Err(invalid(at, what));
    }
    Ok(rate)
}

fn read_accounts(reader: &mut Reader<'_>, exchange: &mut Exchange) -> Result<(), SnapshotError> {
    // An account takes a name length and its two balances of every asset.
    let per_account = 1 + 2 * exchange.assets().len();
    for _ in 0..reader.count(per_account)? {
        let at = reader.offset;
        let name = reader.str()?;
        if exchange.ledger_mut().restore_account(name).is_none() {
            return Err(invalid(at, "account name taken twice"));
        }
    }
    Ok(())
}

/// Reads every balance, checks each asset is conserved, and returns what every
/// account holds per asset (`[asset][account]`), for the orders to account for.
fn read_balances(
    reader: &mut Reader<'_>,
    exchange: &mut Exchange,
    futures: bool,
) -> Result<Vec<Vec<i64>>, SnapshotError> {
    let accounts = exchange.ledger().accounts().len();
    let mut unheld = Vec::with_capacity(exchange.assets().len());
    for index in 0..exchange.assets().len() {
        let asset = AssetId(index as u32);
        let at = reader.offset;
        let fees = reader.units("fee balance out of range")?;
        let net_deposits = reader.units("net deposits out of range")?;
        exchange.ledger_mut().restore_asset_totals(asset, Amount(fees), Amount(net_deposits));
        let mut held_column = Vec::with_capacity(accounts);
        let mut total = i128::from(fees);
        for account in 0..accounts {
            let available = match futures {
                true => unzigzag(reader.varint()?),
                false => reader.units("balance out of range")?,
            };
            let held = reader.units("balance out of range")?;
            total += i128::from(available) + i128::from(held);
            held_column.push(held);
            let balance = Balance { available: Amount(available), held: Amount(held) };
            exchange.ledger_mut().restore_balance(AccountId(account as u32), asset, balance);
        }
        // With futures, positions' value also counts: `check_invariants` checks it.
        if !futures && total != i128::from(net_deposits) {
            return Err(invalid(at, "asset not conserved: balances and fees != net deposits"));
        }
        unheld.push(held_column);
    }
    Ok(unheld)
}

/// Reads the books section into the exchange being rebuilt.
struct BookReader<'a> {
    reader: Reader<'a>,
    exchange: Exchange,
    /// `[asset][account]`: held balance that no order read so far accounts for.
    unheld: Vec<Vec<i64>>,
    /// Orders the snapshot announced and has not yet given.
    orders_left: usize,
    /// Orders rested so far.
    rested: usize,
    /// The last `INDEX_LAG` orders rested but not yet indexed, with their offsets, by
    /// `rested % INDEX_LAG`.
    unindexed: [(OrderHandle, usize); INDEX_LAG],
}

/// What reading one book side needs to know about its instrument.
struct SideContext {
    instrument: InstrumentId,
    side: Side,
    rules: InstrumentKind,
    hold_asset: usize,
    tick: i64,
    lot: i64,
    max_qty: i128,
}

impl BookReader<'_> {
    fn read_books(&mut self) -> Result<(), SnapshotError> {
        self.orders_left = self.reader.count(MIN_ORDER_BYTES)?;
        self.exchange.reserve_open_orders(self.orders_left);
        for index in 0..self.exchange.instruments().len() {
            let instrument = InstrumentId(index as u32);
            let best_bid = self.read_side(self.side_context(instrument, Side::Buy), None)?;
            self.read_side(self.side_context(instrument, Side::Sell), best_bid)?;
        }
        self.index_the_rest()?;
        if self.orders_left != 0 {
            return Err(invalid(self.reader.offset, "fewer orders than announced"));
        }
        Ok(())
    }

    fn side_context(&self, instrument: InstrumentId, side: Side) -> SideContext {
        let definition = self.exchange.instrument(instrument);
        SideContext {
            instrument,
            side,
            rules: definition.kind.clone(),
            hold_asset: definition.hold_asset(side).index(),
            tick: definition.tick.0,
            lot: definition.lot.0,
            max_qty: definition.max_qty,
        }
    }

    /// Reads one side's levels, best first, and returns the best price. Asks must all
    /// be above `best_bid`, so that the book is not crossed.
    fn read_side(
        &mut self,
        context: SideContext,
        best_bid: Option<i64>,
    ) -> Result<Option<i64>, SnapshotError> {
        let mut best = None;
        let mut previous: Option<i64> = best_bid;
        loop {
            let at = self.reader.offset;
            let price = self.reader.units("price out of range")?;
            if price == END_OF_SIDE as i64 {
                return Ok(best);
            }
            if context.tick != 1 && price % context.tick != 0 {
                return Err(invalid(at, "price not a multiple of the tick"));
            }
            let in_order = match (context.side, previous) {
                (_, None) => true,
                (Side::Buy, Some(previous)) => price < previous,
                (Side::Sell, Some(previous)) => price > previous,
            };
            if !in_order {
                return Err(invalid(at, "levels out of priority order, or the book crossed"));
            }
            previous = Some(price);
            best = best.or(Some(price));
            self.read_level(&context, Price(price))?;
        }
    }

    fn read_level(&mut self, context: &SideContext, price: Price) -> Result<(), SnapshotError> {
        let at = self.reader.offset;
        let count = self.reader.count(MIN_ORDER_BYTES)?;
        if count == 0 {
            return Err(invalid(at, "empty price level"));
        }
        if count > self.orders_left {
            return Err(invalid(at, "more orders than announced"));
        }
        self.orders_left -= count;
        for _ in 0..count {
            self.read_order(context, price)?;
        }
        Ok(())
    }

    /// Reads one resting order, checks it against its instrument and its account's
    /// held balance, and rests it at the back of its level.
    #[inline]
    fn read_order(&mut self, context: &SideContext, price: Price) -> Result<(), SnapshotError> {
        let at = self.reader.offset;
        let account = self.reader.small("unknown account")?;
        if account as usize >= self.exchange.ledger().accounts().len() {
            return Err(invalid(at, "unknown account"));
        }
        let id = ClientOrderId::new(self.reader.str()?);
        let remaining = self.read_order_qty(context, "remaining qty")?;
        if remaining == 0 || i128::from(remaining) > context.max_qty {
            return Err(invalid(at, "remaining qty out of range"));
        }
        let filled = self.read_order_qty(context, "filled qty")?;
        let flags_at = self.reader.offset;
        let flags = self.reader.byte()?;
        let stp = stp_from_code(flags);
        let is_future = matches!(context.rules, InstrumentKind::Future(_));
        let known = match is_future {
            true => STP_BITS | POST_ONLY_BIT | OFFSET_BITS | GOOD_FOR_DAY_BIT,
            false => STP_BITS | POST_ONLY_BIT,
        };
        if flags & !known != 0 {
            return Err(invalid(flags_at, "unknown order flags"));
        }
        let offset = match (flags & OFFSET_BITS) >> OFFSET_SHIFT {
            0 => Offset::Open,
            1 => Offset::Close,
            2 => Offset::CloseToday,
            _ => return Err(invalid(flags_at, "unknown offset")),
        };
        let accepted_at = match is_future {
            true => Some(Seq(self.reader.varint()?)),
            false => None,
        };
        self.account_for_hold(context, account as usize, price, offset, Qty(remaining), at)?;
        let order = NewRestingOrder {
            account: AccountId(account),
            id,
            side: context.side,
            price,
            remaining: Qty(remaining),
            filled: Qty(filled),
            stp,
            post_only: flags & POST_ONLY_BIT != 0,
            offset,
            good_for_day: flags & GOOD_FOR_DAY_BIT != 0,
        };
        let handle = self.exchange.rest_restored_order(context.instrument, order);
        if let (Some(seq), Some(positions)) =
            (accepted_at, self.exchange.positions_mut(context.instrument))
        {
            positions.note_resting(handle.slot, seq);
            if offset.is_close() {
                let side = PositionSide::of_order(context.side, offset);
                positions.reserve(AccountId(account), side, offset, Qty(remaining));
            }
        }
        self.index_later(handle, at)
    }

    /// Version 2: every futures contract's positions (`encode_positions`), their
    /// margin taken off the accounts' held balances still unexplained.
    fn read_positions(&mut self) -> Result<(), SnapshotError> {
        for index in 0..self.exchange.instruments().len() {
            let instrument = InstrumentId(index as u32);
            let Some(rules) = self.exchange.instrument(instrument).future().cloned() else {
                continue;
            };
            let (tick, max_qty) = {
                let definition = self.exchange.instrument(instrument);
                (definition.tick.0, definition.max_qty)
            };
            let accounts = self.exchange.ledger().accounts().len();
            let mark_at = self.reader.offset;
            let mark = self.reader.units("mark price out of range")?;
            if mark < 0 || mark % tick != 0 {
                return Err(invalid(mark_at, "mark price not a multiple of the tick"));
            }
            let settled_at = self.reader.offset;
            let settled = self.reader.units("settlement price out of range")?;
            if settled < 0 || settled % tick != 0 {
                return Err(invalid(settled_at, "settlement price not a multiple of the tick"));
            }
            if let Some(positions) = self.exchange.positions_mut(instrument) {
                positions.set_settlement_price(Price(settled));
                positions.set_mark_price(Price(mark));
            }
            let mut previous: Option<u32> = None;
            // An account and two empty sides take at least five bytes.
            for _ in 0..self.reader.count(5)? {
                let at = self.reader.offset;
                let account = self.reader.small("unknown account")?;
                if account as usize >= accounts || previous.is_some_and(|p| p >= account) {
                    return Err(invalid(at, "positions not by ascending known account"));
                }
                previous = Some(account);
                let realised = Amount(unzigzag(self.reader.varint()?));
                let fees = Amount(self.reader.units("fees out of range")?);
                let mut total_margin = 0i128;
                let mut empty = true;
                for side in PositionSide::BOTH {
                    let history = self.read_position_entry(tick, rules.lot.0, true)?;
                    let cost_at = self.reader.offset;
                    let open_cost = i128::try_from(self.reader.varint_u128()?)
                        .map_err(|_| invalid(cost_at, "open cost out of range"))?;
                    let mut today = Vec::new();
                    for _ in 0..self.reader.count(2)? {
                        today.push(self.read_position_entry(tick, rules.lot.0, false)?);
                    }
                    let qty = today.iter().map(|entry| i128::from(entry.qty.0)).sum::<i128>()
                        + i128::from(history.qty.0);
                    if qty > i128::from(i64::MAX) || qty > max_qty.saturating_mul(1 << 20) {
                        return Err(invalid(at, "position beyond range"));
                    }
                    empty &= qty == 0;
                    total_margin += qty / i128::from(rules.lot.0) * i128::from(rules.margin.0);
                    let positions = self
                        .exchange
                        .positions_mut(instrument)
                        .ok_or_else(|| invalid(at, "positions of a spot instrument"))?;
                    positions.restore_side(AccountId(account), side, history, &today, open_cost);
                }
                if empty && realised.is_zero() && fees.is_zero() {
                    return Err(invalid(at, "an idle position listed"));
                }
                if let Some(positions) = self.exchange.positions_mut(instrument) {
                    positions.restore_day(AccountId(account), realised, fees);
                }
                let unheld = &mut self.unheld[rules.settle.index()][account as usize];
                *unheld = i64::try_from(i128::from(*unheld) - total_margin).unwrap_or(-1);
                if *unheld < 0 {
                    return Err(invalid(
                        at,
                        "positions hold more than their account's held balance",
                    ));
                }
            }
        }
        Ok(())
    }

    /// Version 2: the day flows (`encode_state`), each of a settle asset and a known
    /// account, ascending.
    fn read_day_flows(&mut self) -> Result<(), SnapshotError> {
        let mut previous: Option<(u32, u32)> = None;
        for _ in 0..self.reader.count(4)? {
            let at = self.reader.offset;
            let account = self.reader.small("unknown account")?;
            let asset = self.reader.small("unknown asset")?;
            let deposited = Amount(self.reader.units("deposits out of range")?);
            let withdrawn = Amount(self.reader.units("withdrawals out of range")?);
            let known = (account as usize) < self.exchange.ledger().accounts().len()
                && (asset as usize) < self.exchange.assets().len()
                && self.exchange.is_settle_asset(AssetId(asset));
            if !known || previous.is_some_and(|previous| previous >= (account, asset)) {
                return Err(invalid(
                    at,
                    "day flows not of known accounts and settle assets, ascending",
                ));
            }
            previous = Some((account, asset));
            let flows = crate::exchange::DayFlows { deposited, withdrawn };
            self.exchange.restore_day_flows(AccountId(account), AssetId(asset), flows);
        }
        Ok(())
    }

    /// A position entry: a price (a tick multiple) and a quantity (a lot multiple),
    /// both positive; a history entry may be `0, 0` (none).
    fn read_position_entry(
        &mut self,
        tick: i64,
        lot: i64,
        may_be_none: bool,
    ) -> Result<PositionEntry, SnapshotError> {
        let at = self.reader.offset;
        let price = self.reader.units("position price out of range")?;
        let qty = self.reader.units("position qty out of range")?;
        let none = price == 0 && qty == 0;
        if (none && !may_be_none)
            || (!none && (price <= 0 || qty <= 0 || price % tick != 0 || qty % lot != 0))
        {
            return Err(invalid(at, "position entry"));
        }
        Ok(PositionEntry { price: Price(price), qty: Qty(qty) })
    }

    /// Indexes the order rested `INDEX_LAG` orders ago and queues `handle`: the index
    /// entry of an order (a cache miss in a table of millions) is loaded while the next
    /// orders are read, instead of stalling the read.
    #[inline]
    fn index_later(&mut self, handle: OrderHandle, at: usize) -> Result<(), SnapshotError> {
        let lane = self.rested % INDEX_LAG;
        if self.rested >= INDEX_LAG {
            let (due, due_at) = self.unindexed[lane];
            self.index(due, due_at)?;
        }
        self.unindexed[lane] = (handle, at);
        self.rested += 1;
        Ok(())
    }

    /// Indexes the orders still queued, oldest first.
    fn index_the_rest(&mut self) -> Result<(), SnapshotError> {
        for number in self.rested.saturating_sub(INDEX_LAG)..self.rested {
            let (handle, at) = self.unindexed[number % INDEX_LAG];
            self.index(handle, at)?;
        }
        Ok(())
    }

    fn index(&mut self, handle: OrderHandle, at: usize) -> Result<(), SnapshotError> {
        if !self.exchange.index_restored_order(handle) {
            return Err(invalid(at, "an account has two open orders with one id"));
        }
        Ok(())
    }

    /// A quantity of an order: within `i64` and a multiple of the lot (every fill and
    /// every accepted quantity is).
    #[inline]
    fn read_order_qty(
        &mut self,
        context: &SideContext,
        what: &'static str,
    ) -> Result<i64, SnapshotError> {
        let at = self.reader.offset;
        let qty = self.reader.units(what)?;
        if context.lot != 1 && qty % context.lot != 0 {
            return Err(invalid(at, "order qty not a multiple of the lot"));
        }
        Ok(qty)
    }

    /// Takes what the order holds off its account's held balance still unexplained:
    /// an order may not hold more than the account holds.
    #[inline]
    fn account_for_hold(
        &mut self,
        context: &SideContext,
        account: usize,
        price: Price,
        offset: Offset,
        remaining: Qty,
        at: usize,
    ) -> Result<(), SnapshotError> {
        let hold = match &context.rules {
            InstrumentKind::Spot(rules) => {
                rules.hold_amount(context.side, i128::from(price.0), i128::from(remaining.0))
            }
            InstrumentKind::Future(rules) => match offset {
                Offset::Open => rules.open_hold(i128::from(remaining.0)),
                Offset::Close | Offset::CloseToday => Some(Amount::ZERO),
            },
        }
        .ok_or_else(|| invalid(at, "order holds more than any balance can"))?;
        let unheld = &mut self.unheld[context.hold_asset][account];
        *unheld -= hold.0;
        if *unheld < 0 {
            return Err(invalid(at, "orders hold more than their account's held balance"));
        }
        Ok(())
    }
}

// ----------------------------------------------------------------------------------
// Venues

/// Fewest bytes of an account's entry: its id and three counts.
const MIN_ACCOUNT_ACTIVITY_BYTES: usize = 4;
/// Eleven one-byte fields.
const MIN_RECORD_BYTES: usize = 11;
/// Ten one-byte fields.
const MIN_FILL_BYTES: usize = 10;

const SIDE_BIT: u8 = 0b1;
const MARKET_BIT: u8 = 0b10;
const TIF_SHIFT: u8 = 2;
const RECORD_POST_ONLY_BIT: u8 = 0b1_0000;
const RECORD_STP_SHIFT: u8 = 5;
const RECORD_FLAGS: u8 = 0b111_1111;
/// Venue version 2: a spend-amount buy, whose `quote_qty` follows `updated_ns`.
const RECORD_QUOTE_QTY_BIT: u8 = 0b1000_0000;
const TAKER_BIT: u8 = 0b10;
const FILL_FLAGS: u8 = 0b11;

/// Set in the venue container's flags when the activity section follows.
const VENUE_HAS_ACTIVITY: u8 = 0b1;
/// Set in the venue container's flags when the open-orders limit follows them.
const VENUE_HAS_LIMIT: u8 = 0b10;
const VENUE_FLAGS: u8 = VENUE_HAS_ACTIVITY | VENUE_HAS_LIMIT;

/// Appends `venue`: without activity, halts and limit exactly `encode_state` of its
/// exchange (the old format); otherwise the venue container (see the module
/// documentation).
pub fn encode_venue(venue: &Venue, out: &mut Vec<u8>) {
    let activity = venue.activity();
    let halted_count = venue.halted_instruments().count();
    let limit = venue.open_orders_limit();
    if activity.is_none() && halted_count == 0 && limit == 0 {
        encode_state(venue.exchange(), out);
        return;
    }
    out.extend_from_slice(&VENUE_MAGIC);
    let version_at = out.len();
    out.extend_from_slice(&VENUE_FORMAT_VERSION.to_le_bytes());
    let start = out.len();
    encode_state(venue.exchange(), out);
    let mut length = Vec::with_capacity(10);
    put_varint(&mut length, (out.len() - start) as u64);
    out.splice(start..start, length);
    let flags = if activity.is_some() { VENUE_HAS_ACTIVITY } else { 0 }
        | if limit != 0 { VENUE_HAS_LIMIT } else { 0 };
    out.push(flags);
    if limit != 0 {
        put_varint(out, limit);
    }
    put_varint(out, halted_count as u64);
    for instrument in venue.halted_instruments() {
        put_varint(out, u64::from(instrument.0));
    }
    if let Some(activity) = activity {
        // Version 2 only when a record needs it: other venues' bytes stay version 1's.
        if encode_activity(activity, venue.exchange(), out) {
            out[version_at..version_at + 4]
                .copy_from_slice(&VENUE_QUOTE_QTY_FORMAT_VERSION.to_le_bytes());
        }
    }
}

/// The activity section; `true` when a record is a spend-amount buy (version 2).
fn encode_activity(activity: &Activity, exchange: &Exchange, out: &mut Vec<u8>) -> bool {
    let mut spends = false;
    let accounts =
        (0..activity.account_bound() as u32).map(AccountId).filter(|&a| activity.has_activity(a));
    out.reserve(activity.order_count() * 40 + accounts.clone().count() * 4);
    put_varint(out, accounts.clone().count() as u64);
    for account in accounts {
        put_varint(out, u64::from(account.0));
        put_varint(out, activity.open_order_count(account) as u64);
        for record in activity.open_orders(account) {
            spends |= record.quote_qty.is_some();
            put_record(out, record, exchange);
        }
        put_varint(out, activity.finished_order_count(account) as u64);
        for record in activity.finished_orders(account) {
            spends |= record.quote_qty.is_some();
            put_record(out, record, exchange);
        }
        put_varint(out, activity.fill_count(account) as u64);
        for fill in activity.fills(account) {
            put_fill(out, fill);
        }
    }
    spends
}

fn tif_code(time_in_force: TimeInForce) -> u8 {
    match time_in_force {
        TimeInForce::GoodTillCancel => 0,
        TimeInForce::ImmediateOrCancel => 1,
        TimeInForce::FillOrKill => 2,
        TimeInForce::GoodForDay => 3,
    }
}

fn status_code(status: OrderStatus) -> u8 {
    match status {
        OrderStatus::Open => 0,
        OrderStatus::Filled => 1,
        OrderStatus::Canceled => 2,
        OrderStatus::Expired => 3,
        OrderStatus::SelfTradePrevented => 4,
    }
}

fn side_bit(side: Side) -> u8 {
    match side {
        Side::Buy => 0,
        Side::Sell => SIDE_BIT,
    }
}

/// One order record; a spend-amount buy's followed by its `quote_qty` (version 2), one
/// on a futures contract by its offset (one byte: 0 open, 1 close, 2 close today).
fn put_record(out: &mut Vec<u8>, record: &OrderRecord, exchange: &Exchange) {
    put_varint(out, record.order_id.0);
    put_str(out, &record.client_id);
    put_varint(out, u64::from(record.instrument.0));
    let flags = side_bit(record.side)
        | if record.kind == OrderKind::Market { MARKET_BIT } else { 0 }
        | tif_code(record.time_in_force) << TIF_SHIFT
        | if record.post_only { RECORD_POST_ONLY_BIT } else { 0 }
        | stp_code(record.stp) << RECORD_STP_SHIFT
        | if record.quote_qty.is_some() { RECORD_QUOTE_QTY_BIT } else { 0 };
    out.push(flags);
    out.push(status_code(record.status));
    put_varint(out, record.price.map_or(0, |price| price.0 as u64));
    put_varint(out, record.qty.0 as u64);
    put_varint(out, record.remaining.0 as u64);
    put_varint(out, record.filled.0 as u64);
    put_varint(out, record.created_ns.0);
    put_varint(out, record.updated_ns.0);
    if let Some(quote_qty) = record.quote_qty {
        put_varint(out, quote_qty.0 as u64);
    }
    if exchange.instrument(record.instrument).is_future() {
        out.push(offset_code(record.offset));
    }
}

fn offset_code(offset: Offset) -> u8 {
    match offset {
        Offset::Open => 0,
        Offset::Close => 1,
        Offset::CloseToday => 2,
    }
}

fn put_fill(out: &mut Vec<u8>, fill: &Fill) {
    put_varint(out, fill.seq.0);
    put_varint(out, u64::from(fill.trade_index));
    put_varint(out, fill.order_id.0);
    put_str(out, &fill.client_id);
    put_varint(out, u64::from(fill.instrument.0));
    out.push(side_bit(fill.side) | if fill.liquidity == Liquidity::Taker { TAKER_BIT } else { 0 });
    put_varint(out, fill.price.0 as u64);
    put_varint(out, fill.qty.0 as u64);
    put_varint(out, fill.fee.0 as u64);
    put_varint(out, fill.ts_ns.0);
}

/// Rebuilds a venue from `encode_venue`'s bytes, or from `encode_state`'s (an
/// exchange-only snapshot), with `config` for the exchange's pools.
///
/// - `BOURSNAP`, or `BOURSVEN` without activity, with `track_activity`: the records of
///   the open orders are rebuilt from the books, as `Venue::new` does (stand-in order
///   ids, no finished orders, no fills).
/// - `BOURSVEN` with activity without `track_activity`: the activity is checked, then
///   dropped.
///
/// The halted instruments and the open-orders limit are always kept. Any bytes that
/// are not exactly one valid snapshot give an error, never a panic.
pub fn decode_venue(
    bytes: &[u8],
    config: ExchangeConfig,
    track_activity: bool,
) -> Result<Venue, SnapshotError> {
    if !bytes.starts_with(&VENUE_MAGIC) {
        if bytes.len() < VENUE_MAGIC.len() && VENUE_MAGIC.starts_with(bytes) {
            return Err(SnapshotError::Truncated { offset: bytes.len() });
        }
        return Ok(Venue::new(decode_state(bytes, config)?, track_activity));
    }
    let mut reader = Reader { bytes, offset: VENUE_MAGIC.len() };
    let version = reader.take(4)?;
    let version = u32::from_le_bytes([version[0], version[1], version[2], version[3]]);
    if version != VENUE_FORMAT_VERSION && version != VENUE_QUOTE_QTY_FORMAT_VERSION {
        return Err(SnapshotError::UnsupportedVersion(version));
    }
    let spends_allowed = version == VENUE_QUOTE_QTY_FORMAT_VERSION;
    let length = reader.varint()?;
    let length = usize::try_from(length).map_err(|_| reader.truncated())?;
    let state_at = reader.offset;
    let state = reader.take(length)?;
    let exchange = decode_state(state, config).map_err(|error| within(error, state_at))?;
    let flags_at = reader.offset;
    let flags = reader.byte()?;
    if flags & !VENUE_FLAGS != 0 {
        return Err(invalid(flags_at, "unknown venue flags"));
    }
    let limit = match flags & VENUE_HAS_LIMIT {
        0 => 0,
        _ => {
            let at = reader.offset;
            match reader.varint()? {
                0 => return Err(invalid(at, "an open-orders limit of 0 (stored as none)")),
                limit => limit,
            }
        }
    };
    let halted = read_halted(&mut reader, &exchange)?;
    if flags & VENUE_HAS_ACTIVITY == 0 && halted.is_empty() && limit == 0 {
        return Err(invalid(
            flags_at,
            "a venue container with neither activity nor halts nor a limit (stored as its \
             exchange)",
        ));
    }
    let activity = match flags & VENUE_HAS_ACTIVITY {
        0 => None,
        _ => Some(read_activity(&mut reader, &exchange, spends_allowed)?),
    };
    // Canonical: version 2 only when a record needs it.
    let spends = activity.as_ref().is_some_and(|(_, spends)| *spends);
    if spends_allowed && !spends {
        return Err(invalid(
            VENUE_MAGIC.len(),
            "a version 2 venue snapshot without a spend-amount buy (stored as version 1)",
        ));
    }
    let activity = activity.map(|(activity, _)| activity);
    if reader.offset != bytes.len() {
        return Err(invalid(reader.offset, "bytes after the end of the snapshot"));
    }
    let Some(activity) = activity else {
        let (exchange, activity) = Venue::new(exchange, track_activity).into_parts();
        return Ok(Venue::from_parts(exchange, activity, &halted, limit));
    };
    let venue = Venue::from_parts(exchange, Some(activity), &halted, limit);
    // `decode_state` has checked the exchange's invariants: the activity's remain.
    venue
        .check_activity()
        .map_err(|problem| SnapshotError::Invalid { offset: bytes.len(), what: problem.into() })?;
    if track_activity {
        Ok(venue)
    } else {
        let (exchange, _) = venue.into_parts();
        Ok(Venue::from_parts(exchange, None, &halted, limit))
    }
}

/// The halted instruments: each an instrument of `exchange`, strictly ascending.
fn read_halted(
    reader: &mut Reader<'_>,
    exchange: &Exchange,
) -> Result<Vec<InstrumentId>, SnapshotError> {
    let count = reader.count(1)?;
    let mut halted: Vec<InstrumentId> = Vec::with_capacity(count);
    for _ in 0..count {
        let at = reader.offset;
        let instrument = read_instrument_index(reader, exchange)?;
        if halted.last().is_some_and(|last| last.0 >= instrument.0) {
            return Err(invalid(at, "halted instruments out of order or listed twice"));
        }
        halted.push(instrument);
    }
    Ok(halted)
}

/// An error of the exchange state that starts at `start` in the venue container, with
/// container offsets.
fn within(error: SnapshotError, start: usize) -> SnapshotError {
    match error {
        SnapshotError::Truncated { offset } => SnapshotError::Truncated { offset: start + offset },
        SnapshotError::Invalid { offset, what } => {
            SnapshotError::Invalid { offset: start + offset, what }
        }
        SnapshotError::BadMagic => invalid(start, "the venue's exchange state is not a snapshot"),
        SnapshotError::UnsupportedVersion(version) => SnapshotError::UnsupportedVersion(version),
    }
}

/// The activity section, with whether a record is a spend-amount buy (which only
/// version 2, `spends_allowed`, may have).
fn read_activity(
    reader: &mut Reader<'_>,
    exchange: &Exchange,
    spends_allowed: bool,
) -> Result<(Activity, bool), SnapshotError> {
    let mut activity = Activity::new();
    let mut spends = false;
    let mut previous_account: Option<u32> = None;
    let mut open_records = 0usize;
    for _ in 0..reader.count(MIN_ACCOUNT_ACTIVITY_BYTES)? {
        let at = reader.offset;
        let account = reader.small("unknown account")?;
        if account as usize >= exchange.ledger().accounts().len() {
            return Err(invalid(at, "activity of an unknown account"));
        }
        if previous_account.is_some_and(|previous| previous >= account) {
            return Err(invalid(at, "accounts' activity out of account order"));
        }
        previous_account = Some(account);
        let account = AccountId(account);
        let open = reader.count(MIN_RECORD_BYTES)?;
        let mut previous_order_id = OrderId(0);
        for _ in 0..open {
            let at = reader.offset;
            let record = read_record(reader, exchange, account, ListKind::Open, spends_allowed)?;
            if record.order_id <= previous_order_id {
                return Err(invalid(at, "open orders out of order id order"));
            }
            previous_order_id = record.order_id;
            activity.insert(record, ListKind::Open).map_err(|what| invalid(at, what))?;
        }
        open_records += open;
        let at = reader.offset;
        let finished = reader.count(MIN_RECORD_BYTES)?;
        if finished > FINISHED_ORDERS_KEPT {
            return Err(invalid(at, "more finished orders than an account keeps"));
        }
        for _ in 0..finished {
            let at = reader.offset;
            let record =
                read_record(reader, exchange, account, ListKind::Finished, spends_allowed)?;
            spends |= record.quote_qty.is_some();
            activity.insert(record, ListKind::Finished).map_err(|what| invalid(at, what))?;
        }
        let at = reader.offset;
        let fills = reader.count(MIN_FILL_BYTES)?;
        if fills > FILLS_KEPT {
            return Err(invalid(at, "more fills than an account keeps"));
        }
        let mut previous_fill = None;
        for _ in 0..fills {
            let at = reader.offset;
            let fill = read_fill(reader, exchange)?;
            if previous_fill.is_some_and(|previous| previous >= fill.position()) {
                return Err(invalid(at, "fills out of trade order"));
            }
            previous_fill = Some(fill.position());
            activity.push_fill(account, fill);
        }
        if open + finished + fills == 0 {
            return Err(invalid(at, "an account listed without activity"));
        }
    }
    if open_records != exchange.open_order_count() {
        return Err(invalid(reader.offset, "open records are not the exchange's open orders"));
    }
    Ok((activity, spends))
}

fn read_instrument_index(
    reader: &mut Reader<'_>,
    exchange: &Exchange,
) -> Result<InstrumentId, SnapshotError> {
    let at = reader.offset;
    let index = reader.small("unknown instrument")?;
    if index as usize >= exchange.instruments().len() {
        return Err(invalid(at, "unknown instrument"));
    }
    Ok(InstrumentId(index))
}

/// A quantity in lots: within `i64`, a multiple of the lot.
fn read_lots(reader: &mut Reader<'_>, lot: i64, what: &'static str) -> Result<Qty, SnapshotError> {
    let at = reader.offset;
    let qty = reader.units(what)?;
    if lot != 1 && qty % lot != 0 {
        return Err(invalid(at, "quantity not a multiple of the lot"));
    }
    Ok(Qty(qty))
}

/// A price of `instrument`: `None` for 0, else a multiple of the tick.
fn read_tick_price(reader: &mut Reader<'_>, tick: i64) -> Result<Option<Price>, SnapshotError> {
    let at = reader.offset;
    let price = reader.units("price out of range")?;
    if price == 0 {
        return Ok(None);
    }
    if tick != 1 && price % tick != 0 {
        return Err(invalid(at, "price not a multiple of the tick"));
    }
    Ok(Some(Price(price)))
}

fn read_record(
    reader: &mut Reader<'_>,
    exchange: &Exchange,
    account: AccountId,
    list: ListKind,
    spends_allowed: bool,
) -> Result<OrderRecord, SnapshotError> {
    let at = reader.offset;
    let order_id = OrderId(reader.varint()?);
    let client_id = ClientOrderId::new(reader.str()?);
    let instrument = read_instrument_index(reader, exchange)?;
    let definition = exchange.instrument(instrument);
    let flags_at = reader.offset;
    let flags = reader.byte()?;
    let time_in_force = match (flags >> TIF_SHIFT) & 0b11 {
        0 => TimeInForce::GoodTillCancel,
        1 => TimeInForce::ImmediateOrCancel,
        2 => TimeInForce::FillOrKill,
        _ => TimeInForce::GoodForDay,
    };
    let known_flags = match spends_allowed {
        true => RECORD_FLAGS | RECORD_QUOTE_QTY_BIT,
        false => RECORD_FLAGS,
    };
    if flags & !known_flags != 0 {
        return Err(invalid(flags_at, "unknown order flags"));
    }
    let status_at = reader.offset;
    let status = *OrderStatus::ALL
        .get(usize::from(reader.byte()?))
        .ok_or_else(|| invalid(status_at, "unknown order status"))?;
    let price = read_tick_price(reader, definition.tick.0)?;
    let lot = definition.lot.0;
    let qty = read_lots(reader, lot, "qty out of range")?;
    let remaining = read_lots(reader, lot, "remaining qty out of range")?;
    let filled = read_lots(reader, lot, "filled qty out of range")?;
    let created_ns = TimestampNs(reader.varint()?);
    let updated_ns = TimestampNs(reader.varint()?);
    let quote_qty = match flags & RECORD_QUOTE_QTY_BIT {
        0 => None,
        _ if definition.is_future() => {
            return Err(invalid(flags_at, "a spend-amount buy on a futures contract"))
        }
        _ => Some(Amount(reader.units("quote_qty out of range")?)),
    };
    let offset = match definition.is_future() {
        false => Offset::Open,
        true => {
            let offset_at = reader.offset;
            match reader.byte()? {
                0 => Offset::Open,
                1 => Offset::Close,
                2 => Offset::CloseToday,
                _ => return Err(invalid(offset_at, "unknown offset")),
            }
        }
    };
    if time_in_force == TimeInForce::GoodForDay && !definition.is_future() {
        return Err(invalid(flags_at, "a day order on a spot instrument"));
    }
    let record = OrderRecord {
        order_id,
        account,
        client_id,
        instrument,
        side: if flags & SIDE_BIT != 0 { Side::Sell } else { Side::Buy },
        kind: if flags & MARKET_BIT != 0 { OrderKind::Market } else { OrderKind::Limit },
        time_in_force,
        offset,
        post_only: flags & RECORD_POST_ONLY_BIT != 0,
        stp: stp_from_code(flags >> RECORD_STP_SHIFT),
        price,
        qty,
        quote_qty,
        remaining,
        filled,
        status,
        created_ns,
        updated_ns,
    };
    check_record(&record).map_err(|_| invalid(at, "an order record no venue can hold"))?;
    if updated_ns > exchange.time_ns() {
        return Err(invalid(at, "an order updated after the exchange's time"));
    }
    match list {
        ListKind::Open => {
            if !status.is_open() {
                return Err(invalid(at, "a finished order among the open ones"));
            }
            check_open_record(exchange, &record).map_err(|_| {
                invalid(at, "an open record differs from the exchange's open order")
            })?;
        }
        ListKind::Finished => {
            if status.is_open() || !remaining.is_zero() {
                return Err(invalid(at, "an open order among the finished ones"));
            }
        }
    }
    Ok(record)
}

fn read_fill(reader: &mut Reader<'_>, exchange: &Exchange) -> Result<Fill, SnapshotError> {
    let at = reader.offset;
    let seq = Seq(reader.varint()?);
    let trade_index = reader.small("trade index out of range")?;
    let order_id = OrderId(reader.varint()?);
    if seq == Seq::ZERO || order_id == OrderId(0) || order_id > OrderId::of(seq) {
        return Err(invalid(at, "a fill's seq or order id no venue can have"));
    }
    let client_id = ClientOrderId::new(reader.str()?);
    let instrument = read_instrument_index(reader, exchange)?;
    let definition = exchange.instrument(instrument);
    let flags_at = reader.offset;
    let flags = reader.byte()?;
    if flags & !FILL_FLAGS != 0 {
        return Err(invalid(flags_at, "unknown fill flags"));
    }
    let price_at = reader.offset;
    let price = read_tick_price(reader, definition.tick.0)?
        .ok_or_else(|| invalid(price_at, "a fill at price 0"))?;
    let qty_at = reader.offset;
    let qty = read_lots(reader, definition.lot.0, "fill qty out of range")?;
    if qty.is_zero() {
        return Err(invalid(qty_at, "a fill of nothing"));
    }
    let fee = Amount(reader.units("fee out of range")?);
    let ts_at = reader.offset;
    let ts_ns = TimestampNs(reader.varint()?);
    if ts_ns > exchange.time_ns() {
        return Err(invalid(ts_at, "a fill after the exchange's time"));
    }
    let side = if flags & SIDE_BIT != 0 { Side::Sell } else { Side::Buy };
    Ok(Fill {
        seq,
        trade_index,
        order_id,
        client_id,
        instrument,
        side,
        price,
        qty,
        fee,
        fee_asset: definition.fee_asset(side),
        liquidity: if flags & TAKER_BIT != 0 { Liquidity::Taker } else { Liquidity::Maker },
        ts_ns,
    })
}

fn stp_from_code(code: u8) -> StpMode {
    match code & STP_BITS {
        0 => StpMode::CancelTaker,
        1 => StpMode::CancelMaker,
        2 => StpMode::CancelBoth,
        _ => StpMode::None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reader(bytes: &[u8]) -> Reader<'_> {
        Reader { bytes, offset: 0 }
    }

    #[test]
    fn varints_round_trip_at_every_length_and_the_extremes() {
        let mut values: Vec<u64> = (0..64).flat_map(|bit| [1u64 << bit, (1 << bit) - 1]).collect();
        values.push(u64::MAX);
        for value in values {
            let mut bytes = Vec::new();
            put_varint(&mut bytes, value);
            let mut reader = reader(&bytes);
            assert_eq!(reader.varint(), Ok(value));
            assert_eq!(reader.offset, bytes.len());
            let mut wide = Vec::new();
            put_varint_u128(&mut wide, u128::from(value));
            assert_eq!(wide, bytes, "both widths encode alike");
        }
        for value in [u128::MAX, u128::MAX >> 1, 1 << 64, i128::MAX as u128 + 1] {
            let mut bytes = Vec::new();
            put_varint_u128(&mut bytes, value);
            assert_eq!(reader(&bytes).varint_u128(), Ok(value));
        }
    }

    #[test]
    fn varints_that_are_too_long_or_not_shortest_are_invalid() {
        let invalid_codes = [
            &[0x80, 0x00][..],
            &[0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x02],
            &[0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x81, 0x01],
        ];
        for bytes in invalid_codes {
            assert_eq!(reader(bytes).varint().map_err(|error| error.code()), Err("invalid"));
        }
        assert_eq!(reader(&[0x80, 0x80]).varint(), Err(SnapshotError::Truncated { offset: 2 }));
        let mut too_wide = vec![0xff; 18];
        too_wide.push(0x04);
        assert_eq!(reader(&too_wide).varint_u128().map_err(|error| error.code()), Err("invalid"));
        assert_eq!(
            reader(&[0x80, 0x00]).varint_u128().map_err(|error| error.code()),
            Err("invalid")
        );
    }
}
