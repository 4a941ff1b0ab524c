//! The feed's messages: an ITCH-like set of fixed layouts, big-endian (network order),
//! each starting with its type byte. `docs/protocol-marketdata.md` gives the byte
//! layouts; `encode` and `decode` are their one implementation.
//!
//! Book messages carry the engine's sequence number of the command that caused them
//! (`seq`) and its time (`ts`, ns since the Unix epoch), so a subscriber can line its
//! books up with the exchange's state at any command. Prices and quantities are the
//! instrument's integer units; the instrument directory gives their decimals.

use bourse_core::ids::InstrumentId;
use bourse_core::{OrderId, Price, Qty, Seq, Side, TimestampNs};

/// The longest symbol the directory carries (bytes, ASCII, padded with spaces).
pub const SYMBOL_BYTES: usize = 16;

/// System event codes.
pub const START_OF_SESSION: u8 = b'O';
pub const END_OF_SESSION: u8 = b'C';
/// A directory entry's kind: a spot instrument.
pub const KIND_SPOT: u8 = b'S';
/// A directory entry's kind: a futures contract.
pub const KIND_FUTURE: u8 = b'F';

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Message {
    /// `S`: the session starts (`O`) or ends (`C`).
    SystemEvent { ts: TimestampNs, code: u8 },
    /// `R`: an instrument, before its first book message.
    /// `kind`: `KIND_SPOT` or `KIND_FUTURE`.
    Directory {
        instrument: InstrumentId,
        symbol: String,
        price_decimals: u8,
        qty_decimals: u8,
        kind: u8,
    },
    /// `H`: trading on the instrument halted or resumed.
    TradingState { seq: Seq, ts: TimestampNs, instrument: InstrumentId, halted: bool },
    /// `A`: a new order rests at the back of its price level.
    AddOrder {
        seq: Seq,
        ts: TimestampNs,
        order: OrderId,
        instrument: InstrumentId,
        side: Side,
        price: Price,
        qty: Qty,
    },
    /// `E`: a resting order traded `qty` (at its own price); at zero it leaves the book.
    Executed {
        seq: Seq,
        ts: TimestampNs,
        order: OrderId,
        instrument: InstrumentId,
        qty: Qty,
        trade_index: u32,
    },
    /// `X`: a resting order's quantity was reduced by `qty`, keeping its place.
    Reduced { seq: Seq, ts: TimestampNs, order: OrderId, instrument: InstrumentId, qty: Qty },
    /// `D`: a resting order left the book (canceled, expired, self-trade prevention).
    Deleted { seq: Seq, ts: TimestampNs, order: OrderId, instrument: InstrumentId },
    /// `U`: a resting order moved to the back of the level at `price` with `qty` left
    /// (an amend that lost its priority).
    Replaced {
        seq: Seq,
        ts: TimestampNs,
        order: OrderId,
        instrument: InstrumentId,
        price: Price,
        qty: Qty,
    },
    /// `P`: a trade: price, quantity, the incoming (taker) order's side. Its resting
    /// side is told by `Executed`; `trade_index` numbers the command's trades.
    Trade {
        seq: Seq,
        ts: TimestampNs,
        instrument: InstrumentId,
        price: Price,
        qty: Qty,
        taker_side: Side,
        trade_index: u32,
    },
    /// `Q`: the best bid and offer after a command changed them (0 quantity: no level).
    Bbo {
        seq: Seq,
        ts: TimestampNs,
        instrument: InstrumentId,
        bid_price: Price,
        bid_qty: Qty,
        ask_price: Price,
        ask_qty: Qty,
    },
    /// `G`: a snapshot begins: the books as they stand after feed message `feed_seq`
    /// (and engine command `seq`) follow as `Directory`, `TradingState` and `AddOrder`
    /// messages, in priority order, then `SnapshotEnd`.
    SnapshotStart { feed_seq: u64, seq: Seq },
    /// `Z`: the snapshot is complete.
    SnapshotEnd { feed_seq: u64 },
}

/// Why bytes are not a message.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum DecodeError {
    Empty,
    UnknownType(u8),
    /// Shorter or longer than its type's layout.
    Length {
        kind: u8,
        expected: usize,
        got: usize,
    },
    BadField(&'static str),
}

impl std::fmt::Display for DecodeError {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            DecodeError::Empty => write!(formatter, "an empty message"),
            DecodeError::UnknownType(kind) => write!(formatter, "unknown message type {kind:#04x}"),
            DecodeError::Length { kind, expected, got } => {
                write!(formatter, "message {:?} is {got} bytes, not {expected}", *kind as char)
            }
            DecodeError::BadField(field) => write!(formatter, "bad field {field}"),
        }
    }
}

impl std::error::Error for DecodeError {}

/// The length of each type's layout, type byte included.
pub fn layout_len(kind: u8) -> Option<usize> {
    Some(match kind {
        b'S' => 1 + 8 + 1,
        b'R' => 1 + 4 + SYMBOL_BYTES + 1 + 1 + 1,
        b'H' => 1 + 8 + 8 + 4 + 1,
        b'A' => 1 + 8 + 8 + 8 + 4 + 1 + 8 + 8,
        b'E' => 1 + 8 + 8 + 8 + 4 + 8 + 4,
        b'X' => 1 + 8 + 8 + 8 + 4 + 8,
        b'D' => 1 + 8 + 8 + 8 + 4,
        b'U' => 1 + 8 + 8 + 8 + 4 + 8 + 8,
        b'P' => 1 + 8 + 8 + 4 + 8 + 8 + 1 + 4,
        b'Q' => 1 + 8 + 8 + 4 + 8 + 8 + 8 + 8,
        b'G' => 1 + 8 + 8,
        b'Z' => 1 + 8,
        _ => return None,
    })
}

fn side_byte(side: Side) -> u8 {
    match side {
        Side::Buy => b'B',
        Side::Sell => b'S',
    }
}

impl Message {
    pub fn kind(&self) -> u8 {
        match self {
            Message::SystemEvent { .. } => b'S',
            Message::Directory { .. } => b'R',
            Message::TradingState { .. } => b'H',
            Message::AddOrder { .. } => b'A',
            Message::Executed { .. } => b'E',
            Message::Reduced { .. } => b'X',
            Message::Deleted { .. } => b'D',
            Message::Replaced { .. } => b'U',
            Message::Trade { .. } => b'P',
            Message::Bbo { .. } => b'Q',
            Message::SnapshotStart { .. } => b'G',
            Message::SnapshotEnd { .. } => b'Z',
        }
    }

    /// The engine sequence number of the command behind a book message.
    pub fn seq(&self) -> Option<Seq> {
        match self {
            Message::TradingState { seq, .. }
            | Message::AddOrder { seq, .. }
            | Message::Executed { seq, .. }
            | Message::Reduced { seq, .. }
            | Message::Deleted { seq, .. }
            | Message::Replaced { seq, .. }
            | Message::Trade { seq, .. }
            | Message::Bbo { seq, .. }
            | Message::SnapshotStart { seq, .. } => Some(*seq),
            _ => None,
        }
    }

    /// Appends the message's bytes to `out`.
    pub fn encode(&self, out: &mut Vec<u8>) {
        out.push(self.kind());
        match self {
            Message::SystemEvent { ts, code } => {
                out.extend_from_slice(&ts.0.to_be_bytes());
                out.push(*code);
            }
            Message::Directory { instrument, symbol, price_decimals, qty_decimals, kind } => {
                out.extend_from_slice(&instrument.0.to_be_bytes());
                let mut padded = [b' '; SYMBOL_BYTES];
                for (slot, byte) in padded.iter_mut().zip(symbol.bytes()) {
                    *slot = byte;
                }
                out.extend_from_slice(&padded);
                out.push(*price_decimals);
                out.push(*qty_decimals);
                out.push(*kind);
            }
            Message::TradingState { seq, ts, instrument, halted } => {
                stamp(out, *seq, *ts);
                out.extend_from_slice(&instrument.0.to_be_bytes());
                out.push(if *halted { b'H' } else { b'T' });
            }
            Message::AddOrder { seq, ts, order, instrument, side, price, qty } => {
                stamp(out, *seq, *ts);
                out.extend_from_slice(&order.0.to_be_bytes());
                out.extend_from_slice(&instrument.0.to_be_bytes());
                out.push(side_byte(*side));
                out.extend_from_slice(&price.0.to_be_bytes());
                out.extend_from_slice(&qty.0.to_be_bytes());
            }
            Message::Executed { seq, ts, order, instrument, qty, trade_index } => {
                stamp(out, *seq, *ts);
                out.extend_from_slice(&order.0.to_be_bytes());
                out.extend_from_slice(&instrument.0.to_be_bytes());
                out.extend_from_slice(&qty.0.to_be_bytes());
                out.extend_from_slice(&trade_index.to_be_bytes());
            }
            Message::Reduced { seq, ts, order, instrument, qty } => {
                stamp(out, *seq, *ts);
                out.extend_from_slice(&order.0.to_be_bytes());
                out.extend_from_slice(&instrument.0.to_be_bytes());
                out.extend_from_slice(&qty.0.to_be_bytes());
            }
            Message::Deleted { seq, ts, order, instrument } => {
                stamp(out, *seq, *ts);
                out.extend_from_slice(&order.0.to_be_bytes());
                out.extend_from_slice(&instrument.0.to_be_bytes());
            }
            Message::Replaced { seq, ts, order, instrument, price, qty } => {
                stamp(out, *seq, *ts);
                out.extend_from_slice(&order.0.to_be_bytes());
                out.extend_from_slice(&instrument.0.to_be_bytes());
                out.extend_from_slice(&price.0.to_be_bytes());
                out.extend_from_slice(&qty.0.to_be_bytes());
            }
            Message::Trade { seq, ts, instrument, price, qty, taker_side, trade_index } => {
                stamp(out, *seq, *ts);
                out.extend_from_slice(&instrument.0.to_be_bytes());
                out.extend_from_slice(&price.0.to_be_bytes());
                out.extend_from_slice(&qty.0.to_be_bytes());
                out.push(side_byte(*taker_side));
                out.extend_from_slice(&trade_index.to_be_bytes());
            }
            Message::Bbo { seq, ts, instrument, bid_price, bid_qty, ask_price, ask_qty } => {
                stamp(out, *seq, *ts);
                out.extend_from_slice(&instrument.0.to_be_bytes());
                for value in [bid_price.0, bid_qty.0, ask_price.0, ask_qty.0] {
                    out.extend_from_slice(&value.to_be_bytes());
                }
            }
            Message::SnapshotStart { feed_seq, seq } => {
                out.extend_from_slice(&feed_seq.to_be_bytes());
                out.extend_from_slice(&seq.0.to_be_bytes());
            }
            Message::SnapshotEnd { feed_seq } => out.extend_from_slice(&feed_seq.to_be_bytes()),
        }
    }

    pub fn to_bytes(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(64);
        self.encode(&mut out);
        out
    }

    /// The message in `bytes` (exactly one, whole).
    pub fn decode(bytes: &[u8]) -> Result<Message, DecodeError> {
        let kind = *bytes.first().ok_or(DecodeError::Empty)?;
        let expected = layout_len(kind).ok_or(DecodeError::UnknownType(kind))?;
        if bytes.len() != expected {
            return Err(DecodeError::Length { kind, expected, got: bytes.len() });
        }
        let mut reader = Reader { bytes, at: 1 };
        let message = match kind {
            b'S' => Message::SystemEvent { ts: reader.ts(), code: reader.u8() },
            b'R' => {
                let instrument = InstrumentId(reader.u32());
                let symbol = reader.take(SYMBOL_BYTES);
                let symbol = std::str::from_utf8(symbol)
                    .ok()
                    .filter(|text| text.is_ascii())
                    .ok_or(DecodeError::BadField("symbol"))?
                    .trim_end_matches(' ')
                    .to_string();
                let (price_decimals, qty_decimals, kind) = (reader.u8(), reader.u8(), reader.u8());
                if kind != KIND_SPOT && kind != KIND_FUTURE {
                    return Err(DecodeError::BadField("kind"));
                }
                Message::Directory { instrument, symbol, price_decimals, qty_decimals, kind }
            }
            b'H' => {
                let (seq, ts, instrument) = (reader.seq(), reader.ts(), InstrumentId(reader.u32()));
                let halted = match reader.u8() {
                    b'H' => true,
                    b'T' => false,
                    _ => return Err(DecodeError::BadField("trading state")),
                };
                Message::TradingState { seq, ts, instrument, halted }
            }
            b'A' => {
                let (seq, ts, order, instrument) =
                    (reader.seq(), reader.ts(), reader.order(), InstrumentId(reader.u32()));
                let side = reader.side()?;
                Message::AddOrder {
                    seq,
                    ts,
                    order,
                    instrument,
                    side,
                    price: Price(reader.i64()),
                    qty: Qty(reader.i64()),
                }
            }
            b'E' => Message::Executed {
                seq: reader.seq(),
                ts: reader.ts(),
                order: reader.order(),
                instrument: InstrumentId(reader.u32()),
                qty: Qty(reader.i64()),
                trade_index: reader.u32(),
            },
            b'X' => Message::Reduced {
                seq: reader.seq(),
                ts: reader.ts(),
                order: reader.order(),
                instrument: InstrumentId(reader.u32()),
                qty: Qty(reader.i64()),
            },
            b'D' => Message::Deleted {
                seq: reader.seq(),
                ts: reader.ts(),
                order: reader.order(),
                instrument: InstrumentId(reader.u32()),
            },
            b'U' => Message::Replaced {
                seq: reader.seq(),
                ts: reader.ts(),
                order: reader.order(),
                instrument: InstrumentId(reader.u32()),
                price: Price(reader.i64()),
                qty: Qty(reader.i64()),
            },
            b'P' => {
                let (seq, ts, instrument) = (reader.seq(), reader.ts(), InstrumentId(reader.u32()));
                let (price, qty) = (Price(reader.i64()), Qty(reader.i64()));
                let taker_side = reader.side()?;
                Message::Trade {
                    seq,
                    ts,
                    instrument,
                    price,
                    qty,
                    taker_side,
                    trade_index: reader.u32(),
                }
            }
            b'Q' => Message::Bbo {
                seq: reader.seq(),
                ts: reader.ts(),
                instrument: InstrumentId(reader.u32()),
                bid_price: Price(reader.i64()),
                bid_qty: Qty(reader.i64()),
                ask_price: Price(reader.i64()),
                ask_qty: Qty(reader.i64()),
            },
            b'G' => Message::SnapshotStart { feed_seq: reader.u64(), seq: reader.seq() },
            b'Z' => Message::SnapshotEnd { feed_seq: reader.u64() },
            other => return Err(DecodeError::UnknownType(other)),
        };
        Ok(message)
    }
}

fn stamp(out: &mut Vec<u8>, seq: Seq, ts: TimestampNs) {
    out.extend_from_slice(&seq.0.to_be_bytes());
    out.extend_from_slice(&ts.0.to_be_bytes());
}

/// Reads fields of a message whose length was checked against its layout.
struct Reader<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl<'a> Reader<'a> {
    fn take(&mut self, count: usize) -> &'a [u8] {
        let taken = &self.bytes[self.at..self.at + count];
        self.at += count;
        taken
    }

    fn u8(&mut self) -> u8 {
        self.take(1)[0]
    }

    fn u32(&mut self) -> u32 {
        let mut bytes = [0u8; 4];
        bytes.copy_from_slice(self.take(4));
        u32::from_be_bytes(bytes)
    }

    fn u64(&mut self) -> u64 {
        let mut bytes = [0u8; 8];
        bytes.copy_from_slice(self.take(8));
        u64::from_be_bytes(bytes)
    }

    fn seq(&mut self) -> Seq {
        Seq(self.u64())
    }

    fn ts(&mut self) -> TimestampNs {
        TimestampNs(self.u64())
    }

    fn order(&mut self) -> OrderId {
        OrderId(self.u64())
    }

    fn i64(&mut self) -> i64 {
        self.u64() as i64
    }

    fn side(&mut self) -> Result<Side, DecodeError> {
        match self.u8() {
            b'B' => Ok(Side::Buy),
            b'S' => Ok(Side::Sell),
            _ => Err(DecodeError::BadField("side")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    pub(crate) fn every_kind() -> Vec<Message> {
        let instrument = InstrumentId(3);
        vec![
            Message::SystemEvent { ts: TimestampNs(1), code: START_OF_SESSION },
            Message::Directory {
                instrument,
                symbol: "BTC-USD".into(),
                price_decimals: 2,
                qty_decimals: 4,
                kind: KIND_SPOT,
            },
            Message::TradingState { seq: Seq(7), ts: TimestampNs(8), instrument, halted: true },
            Message::AddOrder {
                seq: Seq(9),
                ts: TimestampNs(10),
                order: OrderId(9),
                instrument,
                side: Side::Sell,
                price: Price(6_000_000),
                qty: Qty(5),
            },
            Message::Executed {
                seq: Seq(11),
                ts: TimestampNs(12),
                order: OrderId(9),
                instrument,
                qty: Qty(2),
                trade_index: 1,
            },
            Message::Reduced {
                seq: Seq(13),
                ts: TimestampNs(14),
                order: OrderId(9),
                instrument,
                qty: Qty(1),
            },
            Message::Deleted { seq: Seq(15), ts: TimestampNs(16), order: OrderId(9), instrument },
            Message::Replaced {
                seq: Seq(17),
                ts: TimestampNs(18),
                order: OrderId(9),
                instrument,
                price: Price(-1),
                qty: Qty(i64::MAX),
            },
            Message::Trade {
                seq: Seq(19),
                ts: TimestampNs(20),
                instrument,
                price: Price(1),
                qty: Qty(2),
                taker_side: Side::Buy,
                trade_index: 0,
            },
            Message::Bbo {
                seq: Seq(21),
                ts: TimestampNs(22),
                instrument,
                bid_price: Price(1),
                bid_qty: Qty(2),
                ask_price: Price(0),
                ask_qty: Qty(0),
            },
            Message::SnapshotStart { feed_seq: 23, seq: Seq(24) },
            Message::SnapshotEnd { feed_seq: 23 },
        ]
    }

    #[test]
    fn every_message_round_trips_at_its_layouts_length() {
        for message in every_kind() {
            let bytes = message.to_bytes();
            assert_eq!(Some(bytes.len()), layout_len(message.kind()), "{message:?}");
            assert_eq!(Message::decode(&bytes), Ok(message));
        }
    }

    #[test]
    fn identities_go_on_the_wire_as_their_bare_big_endian_numbers() {
        let message = Message::AddOrder {
            seq: Seq(0x0102_0304_0506_0708),
            ts: TimestampNs(1_700_000_000_000_000_123),
            order: OrderId(0x1122_3344_5566_7788),
            instrument: InstrumentId(3),
            side: Side::Sell,
            price: Price(6_000_000),
            qty: Qty(5),
        };
        let mut expected = vec![b'A'];
        expected.extend_from_slice(&0x0102_0304_0506_0708u64.to_be_bytes());
        expected.extend_from_slice(&1_700_000_000_000_000_123u64.to_be_bytes());
        expected.extend_from_slice(&0x1122_3344_5566_7788u64.to_be_bytes());
        expected.extend_from_slice(&3u32.to_be_bytes());
        expected.push(b'S');
        expected.extend_from_slice(&6_000_000i64.to_be_bytes());
        expected.extend_from_slice(&5i64.to_be_bytes());
        assert_eq!(message.to_bytes(), expected);
        let start = Message::SnapshotStart { feed_seq: 23, seq: Seq(24) };
        assert_eq!(
            start.to_bytes(),
            [&[b'G'][..], &23u64.to_be_bytes(), &24u64.to_be_bytes()].concat()
        );
    }

    #[test]
    fn every_truncation_extension_and_bad_byte_is_an_error_never_a_panic() {
        for message in every_kind() {
            let bytes = message.to_bytes();
            for cut in 0..bytes.len() {
                assert!(Message::decode(&bytes[..cut]).is_err());
            }
            let mut longer = bytes.clone();
            longer.push(0);
            assert!(Message::decode(&longer).is_err());
            for index in 0..bytes.len() {
                for value in [0u8, 0xff, b'?'] {
                    let mut changed = bytes.clone();
                    changed[index] = value;
                    let _ = Message::decode(&changed);
                }
            }
        }
        assert_eq!(Message::decode(b"?"), Err(DecodeError::UnknownType(b'?')));
    }
}
