//! The binary order-entry protocol (`docs/protocol-binary.md`), both ways: framing,
//! every message's little-endian fixed layout, and the reason codes. It is the one
//! codec of the protocol: the server decodes client messages and encodes its own with
//! it; a client (the load generator) encodes requests and decodes answers; the load
//! generator's stand-in server (`loadgen-sink`) does what the server does.
//!
//! Messages are generic over the type of their text fields: `String` (the default,
//! what the server keeps) or `&str` borrowed from the frame, so that a client's hot
//! loop encodes and decodes without allocating. Decoding never trusts its input: a
//! frame of the wrong size, an unknown type or a bad field value is an error, never a
//! panic (`fuzz/` runs the decoders on arbitrary bytes). Encoding writes what the
//! layout says; a text longer than its field is cut to it.

use std::fmt;

use bourse_core::{Decimal, RejectReason};

/// A frame: `u16` length (of what follows), `u8` type, the body.
pub const FRAME_HEADER_BYTES: usize = 2;
/// Largest length a frame may announce.
pub const FRAME_BYTES_MAX: usize = 256;
/// A client order id's field: as wide as the longest id the rule allows.
pub const CLIENT_ORDER_ID_BYTES: usize = crate::client_order_id::CLIENT_ORDER_ID_BYTES_MAX;
pub const SYMBOL_BYTES: usize = 16;
pub const KEY_BYTES: usize = 32;
pub const ASSET_BYTES: usize = 16;
pub const TEXT_BYTES: usize = 64;
/// A login's signature: HMAC-SHA256, raw.
pub const SIGNATURE_BYTES: usize = crate::signing::SIGNATURE_BYTES;

/// Each message type's body (what follows its type byte), in bytes: the sum of its
/// fields' widths in the order `docs/protocol-binary.md` lists them, so a field that
/// widens (the client order id's, with its rule) moves every size with it.
pub mod body {
    use super::{
        ASSET_BYTES, CLIENT_ORDER_ID_BYTES, KEY_BYTES, SIGNATURE_BYTES, SYMBOL_BYTES, TEXT_BYTES,
    };

    /// A decimal's mantissa (its scale is a byte of its own).
    const MANTISSA: usize = 8;
    const U64: usize = 8;

    pub const LOGIN: usize = KEY_BYTES + U64 + SIGNATURE_BYTES;
    /// request id, id, symbol, 8 bytes (side, type, time in force, flags, stp, two
    /// scales, offset), price, qty.
    pub const NEW_ORDER: usize = U64 + CLIENT_ORDER_ID_BYTES + SYMBOL_BYTES + 8 + 2 * MANTISSA;
    pub const CANCEL: usize = U64 + CLIENT_ORDER_ID_BYTES;
    /// request id, id, flags, two scales, reserved, price, qty.
    pub const AMEND: usize = U64 + CLIENT_ORDER_ID_BYTES + 4 + 2 * MANTISSA;
    pub const ORDER_STATUS: usize = U64 + CLIENT_ORDER_ID_BYTES;
    pub const LOGGED_IN: usize = TEXT_BYTES;
    /// request id, order id, seq, time, id.
    pub const ACCEPTED: usize = 4 * U64 + CLIENT_ORDER_ID_BYTES;
    /// request id, code, id.
    pub const REJECTED: usize = U64 + 2 + CLIENT_ORDER_ID_BYTES;
    /// id, trade seq, trade index (u32), side, liquidity, three scales, reserved [3],
    /// price, qty, fee, fee asset, time.
    pub const FILL: usize =
        CLIENT_ORDER_ID_BYTES + U64 + 4 + 5 + 3 + 3 * MANTISSA + ASSET_BYTES + U64;
    /// order id, id, status, three scales, price, filled, remaining, time.
    pub const ORDER_UPDATE: usize = U64 + CLIENT_ORDER_ID_BYTES + 4 + 3 * MANTISSA + U64;
    /// request id, then an order update's body.
    pub const ORDER_STATE: usize = U64 + ORDER_UPDATE;
    pub const GOODBYE: usize = 2 + TEXT_BYTES;

    /// Every layout with a body (the heartbeats have none).
    pub const ALL: [usize; 12] = [
        LOGIN,
        NEW_ORDER,
        CANCEL,
        AMEND,
        ORDER_STATUS,
        LOGGED_IN,
        ACCEPTED,
        REJECTED,
        FILL,
        ORDER_UPDATE,
        ORDER_STATE,
        GOODBYE,
    ];
}

/// A frame's type, before its body.
const TYPE_BYTES: usize = 1;

// Every frame (its type and body) fits the length a frame may announce.
const _: () = {
    let mut index = 0;
    while index < body::ALL.len() {
        assert!(TYPE_BYTES + body::ALL[index] <= FRAME_BYTES_MAX);
        index += 1;
    }
};
// A frame's length fits its `u16` header.
const _: () = assert!(FRAME_BYTES_MAX <= u16::MAX as usize);

pub mod client {
    pub const LOGIN: u8 = 0x01;
    pub const NEW_ORDER: u8 = 0x02;
    pub const CANCEL: u8 = 0x03;
    pub const AMEND: u8 = 0x04;
    pub const ORDER_STATUS: u8 = 0x05;
    pub const HEARTBEAT: u8 = 0x06;
}

pub mod server {
    pub const LOGGED_IN: u8 = 0x81;
    pub const ACCEPTED: u8 = 0x82;
    pub const REJECTED: u8 = 0x83;
    pub const FILL: u8 = 0x84;
    pub const ORDER_UPDATE: u8 = 0x85;
    pub const ORDER_STATE: u8 = 0x86;
    pub const HEARTBEAT: u8 = 0x87;
    pub const GOODBYE: u8 = 0x8F;
}

/// Reason codes of `Rejected` and `Goodbye`: the engine's reject reasons are their
/// place in `RejectReason::ALL` plus one (the replay format's 1 to 15 in the spec's
/// order, then each later one as it was added: the venue's, the futures', `orders.md`'s
/// `invalid_order`); the server's own from `SERVER_FIRST`.
pub mod code {
    /// The first of the server's own codes; below it, the engine's reasons.
    pub const SERVER_FIRST: u16 = 100;
    pub const BUSY: u16 = 100;
    pub const ENGINE_STOPPED: u16 = 101;
    pub const RATE_LIMITED: u16 = 102;
    pub const LOGIN_REQUIRED: u16 = 104;
    pub const INVALID_KEY: u16 = 105;
    pub const INVALID_SIGNATURE: u16 = 106;
    pub const EXPIRED_TIMESTAMP: u16 = 107;
    pub const REPLAYED_REQUEST: u16 = 108;
    pub const MALFORMED_FRAME: u16 = 109;
    pub const TOO_MANY_CONNECTIONS: u16 = 110;
    pub const IDLE_TIMEOUT: u16 = 111;
    pub const SLOW_CONSUMER: u16 = 112;
    pub const SHUTTING_DOWN: u16 = 113;
    pub const ALREADY_LOGGED_IN: u16 = 114;
    pub const FORBIDDEN: u16 = 115;
    /// The venue failed to do what was asked (a code of the server's that has no code
    /// of its own here).
    pub const INTERNAL: u16 = 116;
    /// A node of a cluster that does not lead: the text names the leader.
    pub const NOT_LEADER: u16 = 117;

    /// Every server code, with its name.
    pub const NAMES: &[(u16, &str)] = &[
        (BUSY, "busy"),
        (ENGINE_STOPPED, "engine_stopped"),
        (RATE_LIMITED, "rate_limited"),
        (LOGIN_REQUIRED, "login_required"),
        (INVALID_KEY, "invalid_key"),
        (INVALID_SIGNATURE, "invalid_signature"),
        (EXPIRED_TIMESTAMP, "expired_timestamp"),
        (REPLAYED_REQUEST, "replayed_request"),
        (MALFORMED_FRAME, "malformed_frame"),
        (TOO_MANY_CONNECTIONS, "too_many_connections"),
        (IDLE_TIMEOUT, "idle_timeout"),
        (SLOW_CONSUMER, "slow_consumer"),
        (SHUTTING_DOWN, "shutting_down"),
        (ALREADY_LOGGED_IN, "already_logged_in"),
        (FORBIDDEN, "forbidden"),
        (INTERNAL, "internal"),
        (NOT_LEADER, "not_leader"),
    ];
}

// The engine's reasons are numbered from 1 and must stay below the server's own codes,
// or a code would name two reasons.
const _: () = assert!(RejectReason::ALL.len() < code::SERVER_FIRST as usize);

pub fn reject_code(reason: RejectReason) -> u16 {
    RejectReason::ALL.iter().position(|known| *known == reason).map_or(0, |index| index as u16 + 1)
}

/// The engine's reject reason that `code` numbers, if it numbers one (the inverse of
/// `reject_code`).
pub fn reject_reason(code: u16) -> Option<RejectReason> {
    RejectReason::ALL.get(usize::from(code).checked_sub(1)?).copied()
}

/// The code of an error named as REST names it (`busy`, `insufficient_funds`): one of
/// the engine's reasons or of the server's own codes; `None` for a name the protocol
/// has no code of its own for (the server then sends the code its gateway chose for
/// it, `code::INTERNAL` at worst: see `docs/protocol-binary.md`).
pub fn server_code(name: &str) -> Option<u16> {
    if let Some(reason) = RejectReason::ALL.iter().find(|reason| reason.code() == name) {
        return Some(reject_code(*reason));
    }
    code::NAMES.iter().find(|(_, known)| *known == name).map(|(code, _)| *code)
}

/// The name of `code` (the inverse of `server_code` for the codes the protocol has).
pub fn code_name(code: u16) -> Option<&'static str> {
    if let Some(reason) = reject_reason(code) {
        return Some(reason.code());
    }
    code::NAMES.iter().find(|(known, _)| *known == code).map(|(_, name)| *name)
}

/// The length a frame's header announces (its type and body), if the protocol allows
/// it: 1 to `FRAME_BYTES_MAX`.
pub fn frame_length(header: [u8; FRAME_HEADER_BYTES]) -> Result<usize, FrameError> {
    let length = usize::from(u16::from_le_bytes(header));
    if length == 0 || length > FRAME_BYTES_MAX {
        return Err(FrameError(format!("a frame of {length} bytes (1 to {FRAME_BYTES_MAX})")));
    }
    Ok(length)
}

/// A decimal on the wire: `value = mantissa * 10^-scale`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WireDecimal {
    pub mantissa: i64,
    pub scale: u8,
}

impl WireDecimal {
    /// What an absent decimal (an amend's field it leaves alone) is written as.
    pub const ZERO: WireDecimal = WireDecimal { mantissa: 0, scale: 0 };

    pub fn to_decimal(self) -> Option<Decimal> {
        (self.scale <= 18)
            .then(|| Decimal::from_units(i128::from(self.mantissa), u32::from(self.scale)))
    }

    pub fn from_text(text: &str) -> Option<WireDecimal> {
        let decimal = Decimal::parse(text)?;
        Some(WireDecimal {
            mantissa: i64::try_from(decimal.mantissa()).ok()?,
            scale: u8::try_from(decimal.scale()).ok()?,
        })
    }
}

/// A message from a client. `S` is the type of its text fields (`String`, or `&str`
/// borrowed from the frame).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ClientMessage<S = String> {
    Login {
        key: S,
        timestamp_ms: u64,
        signature: [u8; SIGNATURE_BYTES],
    },
    NewOrder(NewOrder<S>),
    Cancel {
        request_id: u64,
        client_order_id: S,
    },
    Amend {
        request_id: u64,
        client_order_id: S,
        price: Option<WireDecimal>,
        qty: Option<WireDecimal>,
    },
    OrderStatus {
        request_id: u64,
        client_order_id: S,
    },
    Heartbeat,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NewOrder<S = String> {
    pub request_id: u64,
    pub client_order_id: S,
    pub symbol: S,
    /// 1 buy, 2 sell.
    pub side: u8,
    /// 1 limit, 2 market.
    pub kind: u8,
    /// 1 gtc, 2 ioc, 3 fok, 4 gfd (good for the day: futures).
    pub time_in_force: u8,
    pub post_only: bool,
    /// 1 cancel_taker, 2 cancel_maker, 3 cancel_both, 4 none.
    pub stp: u8,
    /// Futures: 0 open, 1 close, 2 close_today (ignored on spot). The byte was
    /// reserved (0) before futures, so older clients open.
    pub offset: u8,
    pub price: WireDecimal,
    pub qty: WireDecimal,
}

/// A message from the server. `S` is the type of its text fields (`String`, or `&str`
/// borrowed from the frame or from what the server renders).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ServerMessage<S = String> {
    LoggedIn {
        account: S,
    },
    Accepted {
        request_id: u64,
        /// The exchange's id of the order (for a cancel or amend, the order acted on).
        order_id: u64,
        /// The command's sequence number.
        seq: u64,
        ts_ns: u64,
        client_order_id: S,
    },
    Rejected {
        request_id: u64,
        code: u16,
        client_order_id: S,
    },
    Fill(Fill<S>),
    OrderUpdate(OrderReport<S>),
    OrderState {
        request_id: u64,
        order: OrderReport<S>,
    },
    Heartbeat,
    Goodbye {
        code: u16,
        /// The reason's name.
        text: S,
    },
}

/// A fill of one of the account's orders (`Fill`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Fill<S = String> {
    pub client_order_id: S,
    /// `trade_seq`-`trade_index` is REST's `trade_id`.
    pub trade_seq: u64,
    pub trade_index: u32,
    /// 1 buy, 2 sell.
    pub side: u8,
    /// 1 maker, 2 taker.
    pub liquidity: u8,
    pub price: WireDecimal,
    pub qty: WireDecimal,
    pub fee: WireDecimal,
    pub fee_asset: S,
    pub ts_ns: u64,
}

/// One of the account's orders as it stands (`OrderUpdate`, and `OrderState` after
/// its request id).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OrderReport<S = String> {
    pub order_id: u64,
    pub client_order_id: S,
    /// 1 open, 2 filled, 3 canceled, 4 expired, 5 stp.
    pub status: u8,
    /// 0 for a market order.
    pub price: WireDecimal,
    pub filled: WireDecimal,
    pub remaining: WireDecimal,
    pub updated_ns: u64,
}

/// Why a frame could not be read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FrameError(pub String);

impl fmt::Display for FrameError {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        formatter.write_str(&self.0)
    }
}

impl std::error::Error for FrameError {}

struct Reader<'a> {
    bytes: &'a [u8],
    offset: usize,
}

impl<'a> Reader<'a> {
    fn take(&mut self, count: usize) -> Result<&'a [u8], FrameError> {
        let end = self.offset.checked_add(count).filter(|end| *end <= self.bytes.len());
        let end =
            end.ok_or_else(|| FrameError("the frame is shorter than its type's layout".into()))?;
        let taken = &self.bytes[self.offset..end];
        self.offset = end;
        Ok(taken)
    }

    fn array<const N: usize>(&mut self) -> Result<[u8; N], FrameError> {
        let mut bytes = [0u8; N];
        bytes.copy_from_slice(self.take(N)?);
        Ok(bytes)
    }

    fn u8(&mut self) -> Result<u8, FrameError> {
        Ok(self.take(1)?[0])
    }

    fn u16(&mut self) -> Result<u16, FrameError> {
        Ok(u16::from_le_bytes(self.array()?))
    }

    fn u32(&mut self) -> Result<u32, FrameError> {
        Ok(u32::from_le_bytes(self.array()?))
    }

    fn u64(&mut self) -> Result<u64, FrameError> {
        Ok(u64::from_le_bytes(self.array()?))
    }

    fn i64(&mut self) -> Result<i64, FrameError> {
        Ok(self.u64()? as i64)
    }

    /// A zero-padded ASCII field: printable characters, then only zeros.
    fn text(&mut self, width: usize, what: &str) -> Result<&'a str, FrameError> {
        let field = self.take(width)?;
        let length = field.iter().position(|byte| *byte == 0).unwrap_or(width);
        let (text, padding) = field.split_at(length);
        let invalid = || FrameError(format!("{what} must be printable ASCII, zero padded"));
        if padding.iter().any(|byte| *byte != 0) || !text.iter().all(u8::is_ascii_graphic) {
            return Err(invalid());
        }
        std::str::from_utf8(text).map_err(|_| invalid())
    }

    fn end(&self) -> Result<(), FrameError> {
        if self.offset == self.bytes.len() {
            Ok(())
        } else {
            Err(FrameError("the frame is longer than its type's layout".into()))
        }
    }
}

/// Decodes one client frame's type and body (the length prefix already taken off).
pub fn decode_client(frame: &[u8]) -> Result<ClientMessage, FrameError> {
    decode_client_as(frame)
}

/// `decode_client` with the text fields borrowed from `frame`: no allocation.
pub fn decode_client_borrowed(frame: &[u8]) -> Result<ClientMessage<&str>, FrameError> {
    decode_client_as(frame)
}

fn decode_client_as<'a, S: From<&'a str>>(frame: &'a [u8]) -> Result<ClientMessage<S>, FrameError> {
    let (&kind, body) = frame.split_first().ok_or_else(|| FrameError("an empty frame".into()))?;
    let mut reader = Reader { bytes: body, offset: 0 };
    let message = match kind {
        client::LOGIN => {
            let key = reader.text(KEY_BYTES, "the key")?.into();
            let timestamp_ms = reader.u64()?;
            let signature = reader.array()?;
            ClientMessage::Login { key, timestamp_ms, signature }
        }
        client::NEW_ORDER => ClientMessage::NewOrder(decode_new_order(&mut reader)?),
        client::CANCEL | client::ORDER_STATUS => {
            let request_id = reader.u64()?;
            let client_order_id = client_order_id(&mut reader)?.into();
            if kind == client::CANCEL {
                ClientMessage::Cancel { request_id, client_order_id }
            } else {
                ClientMessage::OrderStatus { request_id, client_order_id }
            }
        }
        client::AMEND => {
            let request_id = reader.u64()?;
            let client_order_id = client_order_id(&mut reader)?.into();
            let flags = reader.u8()?;
            let (price_scale, qty_scale) = (reader.u8()?, reader.u8()?);
            reader.take(1)?;
            let (price, qty) = (reader.i64()?, reader.i64()?);
            if flags & 0b11 == 0 || flags & !0b11 != 0 {
                return Err(FrameError(
                    "an amend's flags must name the price, the quantity or both".into(),
                ));
            }
            let price =
                (flags & 1 != 0).then_some(WireDecimal { mantissa: price, scale: price_scale });
            let qty = (flags & 2 != 0).then_some(WireDecimal { mantissa: qty, scale: qty_scale });
            ClientMessage::Amend { request_id, client_order_id, price, qty }
        }
        client::HEARTBEAT => ClientMessage::Heartbeat,
        other => return Err(FrameError(format!("unknown message type 0x{other:02x}"))),
    };
    reader.end()?;
    Ok(message)
}

fn client_order_id<'a>(reader: &mut Reader<'a>) -> Result<&'a str, FrameError> {
    let id = reader.text(CLIENT_ORDER_ID_BYTES, "the client order id")?;
    // (The field's text is printable and no wider than the rule: only empty is left.)
    if !crate::client_order_id::is_valid(id) {
        return Err(FrameError("the client order id is empty".into()));
    }
    Ok(id)
}

fn decode_new_order<'a, S: From<&'a str>>(
    reader: &mut Reader<'a>,
) -> Result<NewOrder<S>, FrameError> {
    let request_id = reader.u64()?;
    let client_order_id = client_order_id(reader)?.into();
    let symbol = reader.text(SYMBOL_BYTES, "the symbol")?.into();
    let (side, kind, time_in_force, flags, stp) =
        (reader.u8()?, reader.u8()?, reader.u8()?, reader.u8()?, reader.u8()?);
    let (price_scale, qty_scale, offset) = (reader.u8()?, reader.u8()?, reader.u8()?);
    let (price, qty) = (reader.i64()?, reader.i64()?);
    if !in_range(side, 2)
        || !in_range(kind, 2)
        || !in_range(time_in_force, 4)
        || !in_range(stp, 4)
        || flags > 1
        || offset > 2
    {
        return Err(FrameError(
            "side, type, time in force, flags, stp or offset out of range".into(),
        ));
    }
    Ok(NewOrder {
        request_id,
        client_order_id,
        symbol,
        side,
        kind,
        time_in_force,
        post_only: flags == 1,
        stp,
        offset,
        price: WireDecimal { mantissa: price, scale: price_scale },
        qty: WireDecimal { mantissa: qty, scale: qty_scale },
    })
}

/// Whether an enumeration's value is one of its `1..=max`.
fn in_range(value: u8, max: u8) -> bool {
    (1..=max).contains(&value)
}

impl<S: AsRef<str>> ClientMessage<S> {
    /// The message's type byte.
    pub fn kind(&self) -> u8 {
        match self {
            ClientMessage::Login { .. } => client::LOGIN,
            ClientMessage::NewOrder(_) => client::NEW_ORDER,
            ClientMessage::Cancel { .. } => client::CANCEL,
            ClientMessage::Amend { .. } => client::AMEND,
            ClientMessage::OrderStatus { .. } => client::ORDER_STATUS,
            ClientMessage::Heartbeat => client::HEARTBEAT,
        }
    }

    /// Appends the message's frame to `out` (frames already there stay before it).
    pub fn encode_into(&self, out: &mut Vec<u8>) {
        let frame = FrameWriter::after(std::mem::take(out), self.kind());
        let frame = match self {
            ClientMessage::Login { key, timestamp_ms, signature } => {
                frame.text(key.as_ref(), KEY_BYTES).u64(*timestamp_ms).bytes(signature)
            }
            ClientMessage::NewOrder(order) => order.write(frame),
            ClientMessage::Cancel { request_id, client_order_id }
            | ClientMessage::OrderStatus { request_id, client_order_id } => {
                frame.u64(*request_id).text(client_order_id.as_ref(), CLIENT_ORDER_ID_BYTES)
            }
            ClientMessage::Amend { request_id, client_order_id, price, qty } => {
                let flags = u8::from(price.is_some()) | (u8::from(qty.is_some()) << 1);
                let (price, qty) =
                    (price.unwrap_or(WireDecimal::ZERO), qty.unwrap_or(WireDecimal::ZERO));
                frame
                    .u64(*request_id)
                    .text(client_order_id.as_ref(), CLIENT_ORDER_ID_BYTES)
                    .u8(flags)
                    .u8(price.scale)
                    .u8(qty.scale)
                    .u8(0)
                    .i64(price.mantissa)
                    .i64(qty.mantissa)
            }
            ClientMessage::Heartbeat => frame,
        };
        *out = frame.finish();
    }

    /// The message's frame on its own.
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(FRAME_HEADER_BYTES + FRAME_BYTES_MAX);
        self.encode_into(&mut out);
        out
    }
}

impl<S: AsRef<str>> NewOrder<S> {
    fn write(&self, frame: FrameWriter) -> FrameWriter {
        frame
            .u64(self.request_id)
            .text(self.client_order_id.as_ref(), CLIENT_ORDER_ID_BYTES)
            .text(self.symbol.as_ref(), SYMBOL_BYTES)
            .u8(self.side)
            .u8(self.kind)
            .u8(self.time_in_force)
            .u8(u8::from(self.post_only))
            .u8(self.stp)
            .u8(self.price.scale)
            .u8(self.qty.scale)
            .u8(self.offset)
            .i64(self.price.mantissa)
            .i64(self.qty.mantissa)
    }
}

/// Decodes one server frame's type and body (the length prefix already taken off).
pub fn decode_server(frame: &[u8]) -> Result<ServerMessage, FrameError> {
    decode_server_as(frame)
}

/// `decode_server` with the text fields borrowed from `frame`: no allocation.
pub fn decode_server_borrowed(frame: &[u8]) -> Result<ServerMessage<&str>, FrameError> {
    decode_server_as(frame)
}

fn decode_server_as<'a, S: From<&'a str>>(frame: &'a [u8]) -> Result<ServerMessage<S>, FrameError> {
    let (&kind, body) = frame.split_first().ok_or_else(|| FrameError("an empty frame".into()))?;
    let mut reader = Reader { bytes: body, offset: 0 };
    let message = match kind {
        server::LOGGED_IN => {
            ServerMessage::LoggedIn { account: reader.text(TEXT_BYTES, "the account")?.into() }
        }
        server::ACCEPTED => {
            let (request_id, order_id, seq, ts_ns) =
                (reader.u64()?, reader.u64()?, reader.u64()?, reader.u64()?);
            let client_order_id = reader.text(CLIENT_ORDER_ID_BYTES, "the client order id")?.into();
            ServerMessage::Accepted { request_id, order_id, seq, ts_ns, client_order_id }
        }
        server::REJECTED => {
            let (request_id, code) = (reader.u64()?, reader.u16()?);
            let client_order_id = reader.text(CLIENT_ORDER_ID_BYTES, "the client order id")?.into();
            ServerMessage::Rejected { request_id, code, client_order_id }
        }
        server::FILL => ServerMessage::Fill(decode_fill(&mut reader)?),
        server::ORDER_UPDATE => ServerMessage::OrderUpdate(decode_order_report(&mut reader)?),
        server::ORDER_STATE => {
            let request_id = reader.u64()?;
            ServerMessage::OrderState { request_id, order: decode_order_report(&mut reader)? }
        }
        server::HEARTBEAT => ServerMessage::Heartbeat,
        server::GOODBYE => {
            let code = reader.u16()?;
            ServerMessage::Goodbye { code, text: reader.text(TEXT_BYTES, "the text")?.into() }
        }
        other => return Err(FrameError(format!("unknown message type 0x{other:02x}"))),
    };
    reader.end()?;
    Ok(message)
}

fn decode_fill<'a, S: From<&'a str>>(reader: &mut Reader<'a>) -> Result<Fill<S>, FrameError> {
    let client_order_id = reader.text(CLIENT_ORDER_ID_BYTES, "the client order id")?.into();
    let (trade_seq, trade_index) = (reader.u64()?, reader.u32()?);
    let (side, liquidity) = (reader.u8()?, reader.u8()?);
    let (price_scale, qty_scale, fee_scale) = (reader.u8()?, reader.u8()?, reader.u8()?);
    reader.take(3)?;
    let (price, qty, fee) = (reader.i64()?, reader.i64()?, reader.i64()?);
    let fee_asset = reader.text(ASSET_BYTES, "the fee asset")?.into();
    let ts_ns = reader.u64()?;
    if !in_range(side, 2) || !in_range(liquidity, 2) {
        return Err(FrameError("a fill's side or liquidity out of range".into()));
    }
    Ok(Fill {
        client_order_id,
        trade_seq,
        trade_index,
        side,
        liquidity,
        price: WireDecimal { mantissa: price, scale: price_scale },
        qty: WireDecimal { mantissa: qty, scale: qty_scale },
        fee: WireDecimal { mantissa: fee, scale: fee_scale },
        fee_asset,
        ts_ns,
    })
}

fn decode_order_report<'a, S: From<&'a str>>(
    reader: &mut Reader<'a>,
) -> Result<OrderReport<S>, FrameError> {
    let order_id = reader.u64()?;
    let client_order_id = reader.text(CLIENT_ORDER_ID_BYTES, "the client order id")?.into();
    let status = reader.u8()?;
    let (price_scale, filled_scale, remaining_scale) = (reader.u8()?, reader.u8()?, reader.u8()?);
    let (price, filled, remaining) = (reader.i64()?, reader.i64()?, reader.i64()?);
    let updated_ns = reader.u64()?;
    if !in_range(status, 5) {
        return Err(FrameError("an order's status out of range".into()));
    }
    Ok(OrderReport {
        order_id,
        client_order_id,
        status,
        price: WireDecimal { mantissa: price, scale: price_scale },
        filled: WireDecimal { mantissa: filled, scale: filled_scale },
        remaining: WireDecimal { mantissa: remaining, scale: remaining_scale },
        updated_ns,
    })
}

impl<S: AsRef<str>> ServerMessage<S> {
    /// The message's type byte.
    pub fn kind(&self) -> u8 {
        match self {
            ServerMessage::LoggedIn { .. } => server::LOGGED_IN,
            ServerMessage::Accepted { .. } => server::ACCEPTED,
            ServerMessage::Rejected { .. } => server::REJECTED,
            ServerMessage::Fill(_) => server::FILL,
            ServerMessage::OrderUpdate(_) => server::ORDER_UPDATE,
            ServerMessage::OrderState { .. } => server::ORDER_STATE,
            ServerMessage::Heartbeat => server::HEARTBEAT,
            ServerMessage::Goodbye { .. } => server::GOODBYE,
        }
    }

    /// Appends the message's frame to `out` (frames already there stay before it), so
    /// that a connection builds its output without an allocation per frame.
    pub fn encode_into(&self, out: &mut Vec<u8>) {
        let frame = FrameWriter::after(std::mem::take(out), self.kind());
        let frame = match self {
            ServerMessage::LoggedIn { account } => frame.text(account.as_ref(), TEXT_BYTES),
            ServerMessage::Accepted { request_id, order_id, seq, ts_ns, client_order_id } => frame
                .u64(*request_id)
                .u64(*order_id)
                .u64(*seq)
                .u64(*ts_ns)
                .text(client_order_id.as_ref(), CLIENT_ORDER_ID_BYTES),
            ServerMessage::Rejected { request_id, code, client_order_id } => frame
                .u64(*request_id)
                .u16(*code)
                .text(client_order_id.as_ref(), CLIENT_ORDER_ID_BYTES),
            ServerMessage::Fill(fill) => fill.write(frame),
            ServerMessage::OrderUpdate(order) => order.write(frame),
            ServerMessage::OrderState { request_id, order } => order.write(frame.u64(*request_id)),
            ServerMessage::Heartbeat => frame,
            ServerMessage::Goodbye { code, text } => {
                frame.u16(*code).text(text.as_ref(), TEXT_BYTES)
            }
        };
        *out = frame.finish();
    }

    /// The message's frame on its own.
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(FRAME_HEADER_BYTES + FRAME_BYTES_MAX);
        self.encode_into(&mut out);
        out
    }
}

impl<S: AsRef<str>> Fill<S> {
    fn write(&self, frame: FrameWriter) -> FrameWriter {
        frame
            .text(self.client_order_id.as_ref(), CLIENT_ORDER_ID_BYTES)
            .u64(self.trade_seq)
            .u32(self.trade_index)
            .u8(self.side)
            .u8(self.liquidity)
            .u8(self.price.scale)
            .u8(self.qty.scale)
            .u8(self.fee.scale)
            .bytes(&[0, 0, 0])
            .i64(self.price.mantissa)
            .i64(self.qty.mantissa)
            .i64(self.fee.mantissa)
            .text(self.fee_asset.as_ref(), ASSET_BYTES)
            .u64(self.ts_ns)
    }
}

impl<S: AsRef<str>> OrderReport<S> {
    fn write(&self, frame: FrameWriter) -> FrameWriter {
        frame
            .u64(self.order_id)
            .text(self.client_order_id.as_ref(), CLIENT_ORDER_ID_BYTES)
            .u8(self.status)
            .u8(self.price.scale)
            .u8(self.filled.scale)
            .u8(self.remaining.scale)
            .i64(self.price.mantissa)
            .i64(self.filled.mantissa)
            .i64(self.remaining.mantissa)
            .u64(self.updated_ns)
    }
}

/// Builds one frame: reserves the length, writes the type, lets `body` write, fills in
/// the length.
pub struct FrameWriter {
    bytes: Vec<u8>,
    /// Where this frame starts in `bytes`.
    start: usize,
}

impl FrameWriter {
    pub fn new(kind: u8) -> FrameWriter {
        FrameWriter::after(Vec::with_capacity(FRAME_HEADER_BYTES + FRAME_BYTES_MAX), kind)
    }

    /// A frame appended to `bytes` (frames already written stay before it): `finish`
    /// gives the buffer back, so a connection builds its output without an allocation
    /// per frame.
    pub fn after(mut bytes: Vec<u8>, kind: u8) -> FrameWriter {
        let start = bytes.len();
        bytes.extend_from_slice(&[0, 0, kind]);
        FrameWriter { bytes, start }
    }

    pub fn u8(mut self, value: u8) -> Self {
        self.bytes.push(value);
        self
    }

    pub fn u16(mut self, value: u16) -> Self {
        self.bytes.extend_from_slice(&value.to_le_bytes());
        self
    }

    pub fn u32(mut self, value: u32) -> Self {
        self.bytes.extend_from_slice(&value.to_le_bytes());
        self
    }

    pub fn u64(mut self, value: u64) -> Self {
        self.bytes.extend_from_slice(&value.to_le_bytes());
        self
    }

    pub fn i64(self, value: i64) -> Self {
        self.u64(value as u64)
    }

    /// `text` cut to `width` bytes, zero padded.
    pub fn text(mut self, text: &str, width: usize) -> Self {
        let bytes = text.as_bytes();
        let length = bytes.len().min(width);
        self.bytes.extend_from_slice(&bytes[..length]);
        self.bytes.resize(self.bytes.len() + width - length, 0);
        self
    }

    pub fn bytes(mut self, bytes: &[u8]) -> Self {
        self.bytes.extend_from_slice(bytes);
        self
    }

    pub fn finish(mut self) -> Vec<u8> {
        let length = (self.bytes.len() - self.start - FRAME_HEADER_BYTES) as u16;
        self.bytes[self.start..self.start + 2].copy_from_slice(&length.to_le_bytes());
        self.bytes
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn new_order_frame() -> Vec<u8> {
        FrameWriter::new(client::NEW_ORDER)
            .u64(7)
            .text("c1", CLIENT_ORDER_ID_BYTES)
            .text("BTC-USD", SYMBOL_BYTES)
            .u8(1)
            .u8(1)
            .u8(1)
            .u8(0)
            .u8(1)
            .u8(2)
            .u8(4)
            .u8(0)
            .i64(6000050)
            .i64(5)
            .finish()
    }

    #[test]
    fn a_new_order_frame_decodes_to_its_fields() {
        let frame = new_order_frame();
        assert_eq!(u16::from_le_bytes([frame[0], frame[1]]) as usize, frame.len() - 2);
        let ClientMessage::NewOrder(order) = decode_client(&frame[2..]).unwrap() else { panic!() };
        assert_eq!(
            (order.request_id, order.client_order_id.as_str(), order.symbol.as_str()),
            (7, "c1", "BTC-USD")
        );
        assert_eq!(order.price.to_decimal().unwrap().to_string(), "60000.5");
        assert_eq!(order.qty.to_decimal().unwrap().to_string(), "0.0005");
    }

    #[test]
    fn every_truncation_and_every_byte_flip_is_an_error_or_a_message_never_a_panic() {
        let frame = new_order_frame();
        for cut in 0..frame.len() - 2 {
            assert!(decode_client(&frame[2..2 + cut]).is_err(), "cut at {cut}");
        }
        let mut longer = frame[2..].to_vec();
        longer.push(0);
        assert!(decode_client(&longer).is_err());
        for index in 2..frame.len() {
            for flip in [0x01, 0x80, 0xff] {
                let mut bent = frame[2..].to_vec();
                bent[index - 2] ^= flip;
                let _ = decode_client(&bent);
            }
        }
        assert!(decode_client(&[0x77]).is_err(), "unknown type");
        assert!(decode_client(&[]).is_err(), "empty frame");
    }

    #[test]
    fn reason_codes_are_the_specs_order_then_the_servers() {
        assert_eq!(reject_code(RejectReason::Malformed), 1);
        assert_eq!(reject_code(RejectReason::UnknownOrder), 15);
        // Later reasons are appended: the venue's, the futures', orders.md's.
        assert_eq!(reject_code(RejectReason::InstrumentHalted), 16);
        assert_eq!(reject_code(RejectReason::InsufficientPosition), 19);
        assert_eq!(reject_code(RejectReason::InvalidOrder), 20);
        assert_eq!(server_code("invalid_order"), Some(20));
        assert_eq!(
            server_code("insufficient_funds"),
            Some(reject_code(RejectReason::InsufficientFunds))
        );
        assert_eq!(server_code("rate_limited"), Some(code::RATE_LIMITED));
        assert_eq!(server_code("no_such_code"), None, "no default: an unknown name has none");
        for (code, name) in code::NAMES {
            assert_eq!((server_code(name), code_name(*code)), (Some(*code), Some(*name)));
            assert!(*code >= code::SERVER_FIRST);
        }
        let decimal = WireDecimal::from_text("12.50").unwrap();
        assert_eq!(decimal, WireDecimal { mantissa: 125, scale: 1 });
    }

    #[test]
    fn reject_reason_reads_back_every_engine_code_and_nothing_else() {
        for reason in RejectReason::ALL {
            assert_eq!(reject_reason(reject_code(reason)), Some(reason));
            assert!(reject_code(reason) < code::SERVER_FIRST);
        }
        assert_eq!(reject_reason(0), None);
        assert_eq!(reject_reason(RejectReason::ALL.len() as u16 + 1), None);
        assert_eq!(reject_reason(code::BUSY), None);
        assert_eq!(reject_reason(u16::MAX), None);
    }

    #[test]
    fn a_frame_announces_1_to_256_bytes() {
        assert!(frame_length(0u16.to_le_bytes()).is_err());
        assert_eq!(frame_length(1u16.to_le_bytes()), Ok(1));
        assert_eq!(frame_length(256u16.to_le_bytes()), Ok(FRAME_BYTES_MAX));
        assert!(frame_length(257u16.to_le_bytes()).is_err());
        assert!(frame_length(u16::MAX.to_le_bytes()).is_err());
    }

    fn decimal(mantissa: i64, scale: u8) -> WireDecimal {
        WireDecimal { mantissa, scale }
    }

    /// One of each client message, with the body size `docs/protocol-binary.md` gives.
    fn client_messages() -> Vec<(ClientMessage<&'static str>, usize)> {
        let order = NewOrder {
            request_id: 7,
            client_order_id: "c-1",
            symbol: "BTC-USD",
            side: 2,
            kind: 1,
            time_in_force: 3,
            post_only: true,
            stp: 4,
            offset: 2,
            price: decimal(6_000_050, 1),
            qty: decimal(-5, 18),
        };
        vec![
            (ClientMessage::Login { key: "bk_1", timestamp_ms: 1, signature: [7; 32] }, 72),
            (ClientMessage::NewOrder(order), 112),
            (ClientMessage::Cancel { request_id: 1, client_order_id: "x" }, 72),
            (
                ClientMessage::Amend {
                    request_id: u64::MAX,
                    client_order_id: "a",
                    price: Some(decimal(1, 2)),
                    qty: Some(decimal(i64::MIN, 255)),
                },
                92,
            ),
            (
                ClientMessage::Amend {
                    request_id: 2,
                    client_order_id: "a",
                    price: None,
                    qty: Some(decimal(3, 4)),
                },
                92,
            ),
            (ClientMessage::OrderStatus { request_id: 3, client_order_id: "y" }, 72),
            (ClientMessage::Heartbeat, 0),
        ]
    }

    /// One of each server message, with the body size `docs/protocol-binary.md` gives.
    fn server_messages() -> Vec<(ServerMessage<&'static str>, usize)> {
        let order = OrderReport {
            order_id: 9,
            client_order_id: "c-1",
            status: 5,
            price: decimal(6_000_050, 1),
            filled: decimal(0, 0),
            remaining: decimal(5, 4),
            updated_ns: 11,
        };
        let fill = Fill {
            client_order_id: "c-1",
            trade_seq: 12,
            trade_index: u32::MAX,
            side: 2,
            liquidity: 1,
            price: decimal(6_000_050, 1),
            qty: decimal(5, 4),
            fee: decimal(-3, 6),
            fee_asset: "USD",
            ts_ns: 13,
        };
        vec![
            (ServerMessage::LoggedIn { account: "alice" }, 64),
            (
                ServerMessage::Accepted {
                    request_id: 1,
                    order_id: 2,
                    seq: 3,
                    ts_ns: 4,
                    client_order_id: "c-1",
                },
                96,
            ),
            (ServerMessage::Rejected { request_id: 5, code: 8, client_order_id: "" }, 74),
            (ServerMessage::Fill(fill), 132),
            (ServerMessage::OrderUpdate(order.clone()), 108),
            (ServerMessage::OrderState { request_id: 6, order }, 116),
            (ServerMessage::Heartbeat, 0),
            (ServerMessage::Goodbye { code: code::SLOW_CONSUMER, text: "slow_consumer" }, 66),
        ]
    }

    /// `body::`'s size of a message type.
    fn layout_bytes(kind: u8) -> usize {
        match kind {
            client::LOGIN => body::LOGIN,
            client::NEW_ORDER => body::NEW_ORDER,
            client::CANCEL => body::CANCEL,
            client::AMEND => body::AMEND,
            client::ORDER_STATUS => body::ORDER_STATUS,
            server::LOGGED_IN => body::LOGGED_IN,
            server::ACCEPTED => body::ACCEPTED,
            server::REJECTED => body::REJECTED,
            server::FILL => body::FILL,
            server::ORDER_UPDATE => body::ORDER_UPDATE,
            server::ORDER_STATE => body::ORDER_STATE,
            server::GOODBYE => body::GOODBYE,
            _ => 0,
        }
    }

    #[test]
    fn every_client_message_has_its_documented_size_and_decodes_to_itself() {
        for (message, body_bytes) in client_messages() {
            let frame = message.encode();
            assert_eq!(frame.len(), FRAME_HEADER_BYTES + 1 + body_bytes, "{message:?}");
            assert_eq!(frame_length([frame[0], frame[1]]), Ok(1 + body_bytes));
            assert_eq!(frame[2], message.kind());
            assert_eq!(layout_bytes(message.kind()), body_bytes, "body::'s size, {message:?}");
            assert_eq!(decode_client_borrowed(&frame[2..]).as_ref(), Ok(&message));
            let owned = decode_client(&frame[2..]).unwrap();
            assert_eq!(owned.encode(), frame, "the owned form encodes the same bytes");
        }
    }

    #[test]
    fn every_server_message_has_its_documented_size_and_decodes_to_itself() {
        for (message, body_bytes) in server_messages() {
            let frame = message.encode();
            assert_eq!(frame.len(), FRAME_HEADER_BYTES + 1 + body_bytes, "{message:?}");
            assert_eq!(frame_length([frame[0], frame[1]]), Ok(1 + body_bytes));
            assert_eq!(frame[2], message.kind());
            assert_eq!(layout_bytes(message.kind()), body_bytes, "body::'s size, {message:?}");
            assert_eq!(decode_server_borrowed(&frame[2..]).as_ref(), Ok(&message));
            let owned = decode_server(&frame[2..]).unwrap();
            assert_eq!(owned.encode(), frame, "the owned form encodes the same bytes");
        }
    }

    #[test]
    fn the_longest_id_the_rule_allows_travels_whole_in_every_message_that_carries_one() {
        let longest = "x".repeat(crate::client_order_id::CLIENT_ORDER_ID_BYTES_MAX);
        let tqsdk = "PYSDK_insert_0123456789abcdef0123456789abcdef";
        for id in [longest.as_str(), tqsdk] {
            assert!(crate::client_order_id::is_valid(id));
            for (mut message, body_bytes) in client_messages() {
                match &mut message {
                    ClientMessage::NewOrder(order) => order.client_order_id = id,
                    ClientMessage::Cancel { client_order_id, .. }
                    | ClientMessage::Amend { client_order_id, .. }
                    | ClientMessage::OrderStatus { client_order_id, .. } => *client_order_id = id,
                    ClientMessage::Login { .. } | ClientMessage::Heartbeat => continue,
                }
                let frame = message.encode();
                assert_eq!(frame.len(), FRAME_HEADER_BYTES + 1 + body_bytes);
                assert_eq!(decode_client_borrowed(&frame[2..]), Ok(message));
            }
            for (mut message, body_bytes) in server_messages() {
                match &mut message {
                    ServerMessage::Accepted { client_order_id, .. }
                    | ServerMessage::Rejected { client_order_id, .. } => *client_order_id = id,
                    ServerMessage::Fill(fill) => fill.client_order_id = id,
                    ServerMessage::OrderUpdate(order) | ServerMessage::OrderState { order, .. } => {
                        order.client_order_id = id
                    }
                    _ => continue,
                }
                let frame = message.encode();
                assert_eq!(frame.len(), FRAME_HEADER_BYTES + 1 + body_bytes);
                assert_eq!(decode_server_borrowed(&frame[2..]), Ok(message));
            }
        }
    }

    #[test]
    fn frames_append_to_what_is_already_written() {
        let mut out = Vec::new();
        ServerMessage::<&str>::Heartbeat.encode_into(&mut out);
        let goodbye = ServerMessage::Goodbye { code: code::SHUTTING_DOWN, text: "shutting_down" };
        goodbye.encode_into(&mut out);
        assert_eq!(&out[..3], &[1, 0, server::HEARTBEAT]);
        assert_eq!(decode_server_borrowed(&out[5..]), Ok(goodbye));
    }

    #[test]
    fn an_amend_writes_zeros_for_the_field_it_leaves_alone() {
        let amend = ClientMessage::Amend {
            request_id: 2,
            client_order_id: "a",
            price: None,
            qty: Some(decimal(3, 4)),
        };
        let frame = amend.encode();
        let body = &frame[3..];
        let flags = 8 + CLIENT_ORDER_ID_BYTES;
        assert_eq!(
            &body[flags..flags + 4],
            &[2, 0, 4, 0],
            "flags, price scale, qty scale, reserved"
        );
        assert_eq!(&body[flags + 4..flags + 12], &[0; 8], "price");
    }

    #[test]
    fn server_frames_out_of_range_or_cut_or_bent_are_errors_never_panics() {
        for (message, _) in server_messages() {
            let frame = message.encode();
            let body = &frame[2..];
            for cut in 0..body.len() {
                assert!(decode_server_borrowed(&body[..cut]).is_err(), "{message:?} cut at {cut}");
            }
            let mut longer = body.to_vec();
            longer.push(0);
            assert!(decode_server_borrowed(&longer).is_err());
            for index in 0..body.len() {
                for flip in [0x01, 0x80, 0xff] {
                    let mut bent = body.to_vec();
                    bent[index] ^= flip;
                    let _ = decode_server_borrowed(&bent);
                }
            }
        }
        let mut fill = server_messages()[3].0.encode();
        fill[2 + 1 + CLIENT_ORDER_ID_BYTES + 8 + 4] = 3; // side
        assert!(decode_server_borrowed(&fill[2..]).is_err());
        let mut update = server_messages()[4].0.encode();
        update[2 + 1 + 8 + CLIENT_ORDER_ID_BYTES] = 6; // status
        assert!(decode_server_borrowed(&update[2..]).is_err());
        assert!(decode_server_borrowed(&[client::HEARTBEAT]).is_err(), "a client's type");
    }
}
