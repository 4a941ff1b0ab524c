//! The binary order-entry protocol's messages and their little-endian, fixed layouts
//! (`docs/protocol-binary.md`). Decoding never trusts its input: a frame of the wrong
//! size, an unknown type or a bad field value is an error, never a panic.

use bourse_core::{Decimal, RejectReason};

/// A frame: `u16` length (of what follows), `u8` type, the body.
pub const FRAME_HEADER_BYTES: usize = 2;
/// Largest length a frame may announce.
pub const FRAME_BYTES_MAX: usize = 256;
pub const CLIENT_ORDER_ID_BYTES: usize = 36;
pub const SYMBOL_BYTES: usize = 16;
pub const KEY_BYTES: usize = 32;
pub const ASSET_BYTES: usize = 16;
pub const TEXT_BYTES: usize = 64;

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
/// order, then the venue's); the server's own from 100.
pub mod code {
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
}

pub fn reject_code(reason: RejectReason) -> u16 {
    RejectReason::ALL.iter().position(|known| *known == reason).map_or(0, |index| index as u16 + 1)
}

/// The code for one of the server's error codes (as REST names them).
pub fn server_code(name: &str) -> u16 {
    match name {
        "busy" => code::BUSY,
        "engine_stopped" => code::ENGINE_STOPPED,
        "rate_limited" => code::RATE_LIMITED,
        "missing_signature" | "login_required" | "login_timeout" => code::LOGIN_REQUIRED,
        "idle_timeout" => code::IDLE_TIMEOUT,
        "already_logged_in" => code::ALREADY_LOGGED_IN,
        "malformed_frame" => code::MALFORMED_FRAME,
        "invalid_key" => code::INVALID_KEY,
        "invalid_signature" => code::INVALID_SIGNATURE,
        "invalid_timestamp" | "expired_timestamp" => code::EXPIRED_TIMESTAMP,
        "replayed_request" => code::REPLAYED_REQUEST,
        "too_many_connections" => code::TOO_MANY_CONNECTIONS,
        "forbidden" => code::FORBIDDEN,
        "slow_consumer" => code::SLOW_CONSUMER,
        "shutting_down" | "resync" => code::SHUTTING_DOWN,
        other => RejectReason::ALL
            .iter()
            .find(|reason| reason.code() == other)
            .map_or(code::MALFORMED_FRAME, |reason| reject_code(*reason)),
    }
}

/// A decimal on the wire: `value = mantissa * 10^-scale`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WireDecimal {
    pub mantissa: i64,
    pub scale: u8,
}

impl WireDecimal {
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

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ClientMessage {
    Login {
        key: String,
        timestamp_ms: u64,
        signature: [u8; 32],
    },
    NewOrder(NewOrder),
    Cancel {
        request_id: u64,
        client_order_id: String,
    },
    Amend {
        request_id: u64,
        client_order_id: String,
        price: Option<WireDecimal>,
        qty: Option<WireDecimal>,
    },
    OrderStatus {
        request_id: u64,
        client_order_id: String,
    },
    Heartbeat,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NewOrder {
    pub request_id: u64,
    pub client_order_id: String,
    pub symbol: String,
    /// 1 buy, 2 sell.
    pub side: u8,
    /// 1 limit, 2 market.
    pub kind: u8,
    /// 1 gtc, 2 ioc, 3 fok.
    pub time_in_force: u8,
    pub post_only: bool,
    /// 1 cancel_taker, 2 cancel_maker, 3 cancel_both, 4 none.
    pub stp: u8,
    pub price: WireDecimal,
    pub qty: WireDecimal,
}

/// Why a frame could not be read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FrameError(pub String);

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

    fn u8(&mut self) -> Result<u8, FrameError> {
        Ok(self.take(1)?[0])
    }

    fn u64(&mut self) -> Result<u64, FrameError> {
        let mut bytes = [0u8; 8];
        bytes.copy_from_slice(self.take(8)?);
        Ok(u64::from_le_bytes(bytes))
    }

    fn i64(&mut self) -> Result<i64, FrameError> {
        Ok(self.u64()? as i64)
    }

    /// A zero-padded ASCII field: printable characters, then only zeros.
    fn text(&mut self, width: usize, what: &str) -> Result<String, FrameError> {
        let field = self.take(width)?;
        let length = field.iter().position(|byte| *byte == 0).unwrap_or(width);
        if field[length..].iter().any(|byte| *byte != 0)
            || !field[..length].iter().all(u8::is_ascii_graphic)
        {
            return Err(FrameError(format!("{what} must be printable ASCII, zero padded")));
        }
        Ok(String::from_utf8_lossy(&field[..length]).into_owned())
    }

    fn end(&self) -> Result<(), FrameError> {
        if self.offset == self.bytes.len() {
            Ok(())
        } else {
            Err(FrameError("the frame is longer than its type's layout".into()))
        }
    }
}

/// Decodes one frame's type and body (the length prefix already taken off).
pub fn decode_client(frame: &[u8]) -> Result<ClientMessage, FrameError> {
    let (&kind, body) = frame.split_first().ok_or_else(|| FrameError("an empty frame".into()))?;
    let mut reader = Reader { bytes: body, offset: 0 };
    let message = match kind {
        client::LOGIN => {
            let key = reader.text(KEY_BYTES, "the key")?;
            let timestamp_ms = reader.u64()?;
            let mut signature = [0u8; 32];
            signature.copy_from_slice(reader.take(32)?);
            ClientMessage::Login { key, timestamp_ms, signature }
        }
        client::NEW_ORDER => ClientMessage::NewOrder(decode_new_order(&mut reader)?),
        client::CANCEL | client::ORDER_STATUS => {
            let request_id = reader.u64()?;
            let client_order_id = client_order_id(&mut reader)?;
            if kind == client::CANCEL {
                ClientMessage::Cancel { request_id, client_order_id }
            } else {
                ClientMessage::OrderStatus { request_id, client_order_id }
            }
        }
        client::AMEND => {
            let request_id = reader.u64()?;
            let client_order_id = client_order_id(&mut reader)?;
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

fn client_order_id(reader: &mut Reader<'_>) -> Result<String, FrameError> {
    let id = reader.text(CLIENT_ORDER_ID_BYTES, "the client order id")?;
    if id.is_empty() {
        return Err(FrameError("the client order id is empty".into()));
    }
    Ok(id)
}

fn decode_new_order(reader: &mut Reader<'_>) -> Result<NewOrder, FrameError> {
    let request_id = reader.u64()?;
    let client_order_id = client_order_id(reader)?;
    let symbol = reader.text(SYMBOL_BYTES, "the symbol")?;
    let (side, kind, time_in_force, flags, stp) =
        (reader.u8()?, reader.u8()?, reader.u8()?, reader.u8()?, reader.u8()?);
    let (price_scale, qty_scale) = (reader.u8()?, reader.u8()?);
    reader.take(1)?;
    let (price, qty) = (reader.i64()?, reader.i64()?);
    let in_range = |value: u8, max: u8| (1..=max).contains(&value);
    if !in_range(side, 2)
        || !in_range(kind, 2)
        || !in_range(time_in_force, 3)
        || !in_range(stp, 4)
        || flags > 1
    {
        return Err(FrameError("side, type, time in force, flags or stp out of range".into()));
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
        price: WireDecimal { mantissa: price, scale: price_scale },
        qty: WireDecimal { mantissa: qty, scale: qty_scale },
    })
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
        FrameWriter::after(Vec::with_capacity(128), kind)
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
        assert_eq!(server_code("insufficient_funds"), reject_code(RejectReason::InsufficientFunds));
        assert_eq!(server_code("rate_limited"), code::RATE_LIMITED);
        let decimal = WireDecimal::from_text("12.50").unwrap();
        assert_eq!(decimal, WireDecimal { mantissa: 125, scale: 1 });
    }
}
