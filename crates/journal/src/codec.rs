//! The journal's payload: one command in a compact binary form.
//!
//! A record's payload is a tag byte and the command's fields: strings as a varint
//! length and UTF-8 bytes, integers as zigzag varints, decimals as mantissa and scale.
//! Decoding borrows the strings from the record (no allocation) and never panics: a
//! payload that is not exactly one well-formed command is a `CodecError`. Encoding
//! refuses what the replay format could not express (an empty name), so every journaled
//! command of the replay format exports to a replay line that parses back to the same
//! command. The venue's own commands (`halt`, `resume`, `cancel_all`, `set_limits`:
//! tags 8 to 11) export in the same style, but the replay format does not have them.
//!
//! The futures commands (`futures.md`) have tags 12 to 15. An order's offset and its
//! size kind share one extension byte after the flags, present only when it is not 0
//! (flag bit 7 says it is there): the offset in bits 0-1 (0 open, 1 close, 2 close
//! today), what the order names in bits 2-3 (0 `qty`, 1 `quote_qty`, 2 both, 3
//! neither: `orders.md`'s spend-amount buys), the other bits 0. So an order that is
//! `open` and names `qty` alone encodes as before futures existed, and one that names
//! `qty` alone as before spend-amount buys existed (the byte was then the offset, 1 or
//! 2). After the price (limit orders), the decimals the order names: `qty`, then
//! `quote_qty`.
//!
//! ```text
//! future:        tag, symbol, settle asset, tick, lot, min_qty, max_qty, multiplier,
//!                margin, maker_fee, taker_fee (decimals), market_band_bps (integer),
//!                close_today (one byte: 0 or 1)
//! margin:        tag, symbol, margin
//! settle:        tag, symbol, price, final (one byte: 0 or 1)
//! liquidate:     tag, account, symbol
//! halt, resume:  tag, symbol
//! cancel_all:    tag, account, symbol flag (one byte: 0 none, 1 a symbol follows),
//!                [symbol]
//! set_limits:    tag, open orders per account (unsigned varint, at most 64 bits; 0 no
//!                limit)
//! ```

use std::borrow::Cow;

use bourse_core::command::{
    AmendCommand, AmendQtyKind, FutureCommand, InstrumentCommand, OrderCommand, OrderSize,
    OrderType, SizeNamed, TransferCommand,
};
use bourse_core::ids::AccountId;
use bourse_core::{AccountRef, Command, Decimal, Offset, Side, StpMode, TimeInForce};

const TAG_ASSET: u8 = 1;
const TAG_INSTRUMENT: u8 = 2;
const TAG_DEPOSIT: u8 = 3;
const TAG_WITHDRAW: u8 = 4;
const TAG_ORDER: u8 = 5;
const TAG_CANCEL: u8 = 6;
const TAG_AMEND: u8 = 7;
const TAG_HALT: u8 = 8;
const TAG_RESUME: u8 = 9;
const TAG_CANCEL_ALL: u8 = 10;
const TAG_SET_LIMITS: u8 = 11;
const TAG_FUTURE: u8 = 12;
const TAG_MARGIN: u8 = 13;
const TAG_SETTLE: u8 = 14;
const TAG_LIQUIDATE: u8 = 15;

const NO_SYMBOL: u8 = 0;
const WITH_SYMBOL: u8 = 1;

const ACCOUNT_BY_NAME: u8 = 0;
const ACCOUNT_BY_ID: u8 = 1;

// Order flag bits.
const FLAG_SELL: u8 = 1;
const FLAG_MARKET: u8 = 1 << 1;
const FLAG_POST_ONLY: u8 = 1 << 2;
const TIF_SHIFT: u32 = 3; // two bits
const STP_SHIFT: u32 = 5; // two bits
/// The extension byte follows the flags (the order is not `open` with `qty` alone).
const FLAG_EXTENSION: u8 = 1 << 7;
// Extension byte: the offset in bits 0-1, the size kind in bits 2-3.
const OFFSET_OPEN: u8 = 0;
const OFFSET_CLOSE: u8 = 1;
const OFFSET_CLOSE_TODAY: u8 = 2;
const OFFSET_BITS: u8 = 0b11;
const SIZE_SHIFT: u32 = 2;
const SIZE_QTY: u8 = 0;
const SIZE_QUOTE_QTY: u8 = 1;
const SIZE_BOTH: u8 = 2;
const SIZE_NEITHER: u8 = 3;
const EXTENSION_BITS: u8 = 0b1111;

// Amend flag bits.
const AMEND_PRICE: u8 = 1;
const AMEND_QTY: u8 = 1 << 1;
/// With `AMEND_QTY`: the quantity is the order's new whole quantity
/// (`AmendQtyKind::Total`), not what is to be left open.
const AMEND_QTY_TOTAL: u8 = 1 << 2;

/// Longest name (account, asset, symbol, client order id) a command may carry, in bytes.
pub const NAME_LEN_MAX: usize = 256;

#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum CodecError {
    #[error("payload ends inside a field at byte {offset}")]
    Truncated { offset: usize },
    #[error("unknown command tag {tag}")]
    UnknownTag { tag: u8 },
    #[error("invalid {field} at byte {offset}")]
    Invalid { field: &'static str, offset: usize },
    #[error("{extra} bytes after the command")]
    TrailingBytes { extra: usize },
    #[error("{field} is empty or longer than {NAME_LEN_MAX} bytes")]
    BadName { field: &'static str },
}

impl CodecError {
    /// A stable code for logs and tools.
    pub fn code(&self) -> &'static str {
        match self {
            CodecError::Truncated { .. } => "payload_truncated",
            CodecError::UnknownTag { .. } => "unknown_command_tag",
            CodecError::Invalid { .. } => "invalid_field",
            CodecError::TrailingBytes { .. } => "trailing_bytes",
            CodecError::BadName { .. } => "bad_name",
        }
    }
}

/// Appends `command`'s payload to `out`. Fails (leaving `out` as it was) only for a
/// name the replay format cannot carry: empty or longer than `NAME_LEN_MAX`.
pub fn encode_command(command: &Command<'_>, out: &mut Vec<u8>) -> Result<(), CodecError> {
    let start = out.len();
    let result = encode_fields(command, out);
    if result.is_err() {
        out.truncate(start);
    }
    // Both sides of what goes to disk: the bytes read back as the command.
    debug_assert!(
        result.is_err() || decode_command(&out[start..]).is_ok_and(|decoded| decoded == *command),
        "{command:?} does not read back from its encoding"
    );
    result
}

fn encode_fields(command: &Command<'_>, out: &mut Vec<u8>) -> Result<(), CodecError> {
    let mut writer = Writer { out };
    match command {
        Command::Asset { asset, decimals } => {
            writer.byte(TAG_ASSET);
            writer.name("asset", asset)?;
            writer.signed(i128::from(*decimals));
        }
        Command::Instrument(instrument) => {
            writer.byte(TAG_INSTRUMENT);
            writer.name("symbol", &instrument.symbol)?;
            writer.name("base", &instrument.base)?;
            writer.name("quote", &instrument.quote)?;
            for decimal in [instrument.tick, instrument.lot, instrument.min_qty, instrument.max_qty]
            {
                writer.decimal(decimal);
            }
            for integer in
                [instrument.maker_fee_bps, instrument.taker_fee_bps, instrument.market_band_bps]
            {
                writer.signed(i128::from(integer));
            }
        }
        Command::Deposit(transfer) | Command::Withdraw(transfer) => {
            let is_deposit = matches!(command, Command::Deposit(_));
            writer.byte(if is_deposit { TAG_DEPOSIT } else { TAG_WITHDRAW });
            writer.name("account", &transfer.account)?;
            writer.name("asset", &transfer.asset)?;
            writer.decimal(transfer.amount);
        }
        Command::Order(order) => encode_order(&mut writer, order)?,
        Command::Cancel { account, id } => {
            writer.byte(TAG_CANCEL);
            writer.account(account)?;
            writer.name("id", id)?;
        }
        Command::Amend(amend) => {
            writer.byte(TAG_AMEND);
            writer.account(&amend.account)?;
            writer.name("id", &amend.id)?;
            let total = amend.qty.is_some() && amend.qty_kind == AmendQtyKind::Total;
            let flags = if amend.price.is_some() { AMEND_PRICE } else { 0 }
                | if amend.qty.is_some() { AMEND_QTY } else { 0 }
                | if total { AMEND_QTY_TOTAL } else { 0 };
            writer.byte(flags);
            for decimal in [amend.price, amend.qty].into_iter().flatten() {
                writer.decimal(decimal);
            }
        }
        Command::Halt { symbol } => {
            writer.byte(TAG_HALT);
            writer.name("symbol", symbol)?;
        }
        Command::Resume { symbol } => {
            writer.byte(TAG_RESUME);
            writer.name("symbol", symbol)?;
        }
        Command::CancelAll { account, symbol } => {
            writer.byte(TAG_CANCEL_ALL);
            writer.account(account)?;
            match symbol {
                Some(symbol) => {
                    writer.byte(WITH_SYMBOL);
                    writer.name("symbol", symbol)?;
                }
                None => writer.byte(NO_SYMBOL),
            }
        }
        Command::SetLimits { open_orders_per_account } => {
            writer.byte(TAG_SET_LIMITS);
            writer.unsigned(u128::from(*open_orders_per_account));
        }
        Command::Future(future) => {
            writer.byte(TAG_FUTURE);
            writer.name("symbol", &future.symbol)?;
            writer.name("settle", &future.settle)?;
            for decimal in [
                future.tick,
                future.lot,
                future.min_qty,
                future.max_qty,
                future.multiplier,
                future.margin,
                future.maker_fee,
                future.taker_fee,
            ] {
                writer.decimal(decimal);
            }
            writer.signed(i128::from(future.market_band_bps));
            writer.byte(u8::from(future.close_today));
        }
        Command::Margin { symbol, margin } => {
            writer.byte(TAG_MARGIN);
            writer.name("symbol", symbol)?;
            writer.decimal(*margin);
        }
        Command::Settle { symbol, price, is_final } => {
            writer.byte(TAG_SETTLE);
            writer.name("symbol", symbol)?;
            writer.decimal(*price);
            writer.byte(u8::from(*is_final));
        }
        Command::Liquidate { account, symbol } => {
            writer.byte(TAG_LIQUIDATE);
            writer.account(account)?;
            writer.name("symbol", symbol)?;
        }
    }
    Ok(())
}

fn encode_order(writer: &mut Writer<'_>, order: &OrderCommand<'_>) -> Result<(), CodecError> {
    writer.byte(TAG_ORDER);
    writer.account(&order.account)?;
    writer.name("id", &order.id)?;
    writer.name("symbol", &order.symbol)?;
    let tif = match order.time_in_force {
        TimeInForce::GoodTillCancel => 0u8,
        TimeInForce::ImmediateOrCancel => 1,
        TimeInForce::FillOrKill => 2,
        TimeInForce::GoodForDay => 3,
    };
    let offset = match order.offset {
        Offset::Open => OFFSET_OPEN,
        Offset::Close => OFFSET_CLOSE,
        Offset::CloseToday => OFFSET_CLOSE_TODAY,
    };
    let size = match order.size.named() {
        SizeNamed::Qty(_) => SIZE_QTY,
        SizeNamed::QuoteQty(_) => SIZE_QUOTE_QTY,
        SizeNamed::QtyAndQuoteQty { .. } => SIZE_BOTH,
        SizeNamed::Neither => SIZE_NEITHER,
    };
    let extension = offset | size << SIZE_SHIFT;
    let stp = match order.stp {
        StpMode::CancelTaker => 0u8,
        StpMode::CancelMaker => 1,
        StpMode::CancelBoth => 2,
        StpMode::None => 3,
    };
    let flags = if order.side == Side::Sell { FLAG_SELL } else { 0 }
        | if order.order_type == OrderType::Market { FLAG_MARKET } else { 0 }
        | if order.post_only { FLAG_POST_ONLY } else { 0 }
        | tif << TIF_SHIFT
        | stp << STP_SHIFT
        | if extension != 0 { FLAG_EXTENSION } else { 0 };
    writer.byte(flags);
    if extension != 0 {
        writer.byte(extension);
    }
    if let OrderType::Limit { price } = order.order_type {
        writer.decimal(price);
    }
    for decimal in [order.size.qty(), order.size.quote_qty()].into_iter().flatten() {
        writer.decimal(decimal);
    }
    Ok(())
}

/// Decodes one payload. Strings borrow from `payload`.
pub fn decode_command(payload: &[u8]) -> Result<Command<'_>, CodecError> {
    let mut reader = Reader { bytes: payload, offset: 0 };
    let command = match reader.byte("tag")? {
        TAG_ASSET => {
            let asset = reader.name("asset")?;
            Command::Asset { asset, decimals: reader.i64("decimals")? }
        }
        TAG_INSTRUMENT => decode_instrument(&mut reader)?,
        tag @ (TAG_DEPOSIT | TAG_WITHDRAW) => {
            let transfer = TransferCommand {
                account: reader.name("account")?,
                asset: reader.name("asset")?,
                amount: reader.decimal("amount")?,
            };
            if tag == TAG_DEPOSIT {
                Command::Deposit(transfer)
            } else {
                Command::Withdraw(transfer)
            }
        }
        TAG_ORDER => decode_order(&mut reader)?,
        TAG_CANCEL => Command::Cancel { account: reader.account()?, id: reader.name("id")? },
        TAG_AMEND => decode_amend(&mut reader)?,
        TAG_HALT => Command::Halt { symbol: reader.name("symbol")? },
        TAG_RESUME => Command::Resume { symbol: reader.name("symbol")? },
        TAG_CANCEL_ALL => decode_cancel_all(&mut reader)?,
        TAG_SET_LIMITS => {
            Command::SetLimits { open_orders_per_account: reader.u64("open_orders_per_account")? }
        }
        TAG_FUTURE => decode_future(&mut reader)?,
        TAG_MARGIN => {
            Command::Margin { symbol: reader.name("symbol")?, margin: reader.decimal("margin")? }
        }
        TAG_SETTLE => Command::Settle {
            symbol: reader.name("symbol")?,
            price: reader.decimal("price")?,
            is_final: reader.flag("final")?,
        },
        TAG_LIQUIDATE => {
            Command::Liquidate { account: reader.account()?, symbol: reader.name("symbol")? }
        }
        tag => return Err(CodecError::UnknownTag { tag }),
    };
    let extra = payload.len() - reader.offset;
    if extra != 0 {
        return Err(CodecError::TrailingBytes { extra });
    }
    Ok(command)
}

fn decode_instrument<'a>(reader: &mut Reader<'a>) -> Result<Command<'a>, CodecError> {
    Ok(Command::Instrument(Box::new(InstrumentCommand {
        symbol: reader.name("symbol")?,
        base: reader.name("base")?,
        quote: reader.name("quote")?,
        tick: reader.decimal("tick")?,
        lot: reader.decimal("lot")?,
        min_qty: reader.decimal("min_qty")?,
        max_qty: reader.decimal("max_qty")?,
        maker_fee_bps: reader.i64("maker_fee_bps")?,
        taker_fee_bps: reader.i64("taker_fee_bps")?,
        market_band_bps: reader.i64("market_band_bps")?,
    })))
}

fn decode_future<'a>(reader: &mut Reader<'a>) -> Result<Command<'a>, CodecError> {
    Ok(Command::Future(Box::new(FutureCommand {
        symbol: reader.name("symbol")?,
        settle: reader.name("settle")?,
        tick: reader.decimal("tick")?,
        lot: reader.decimal("lot")?,
        min_qty: reader.decimal("min_qty")?,
        max_qty: reader.decimal("max_qty")?,
        multiplier: reader.decimal("multiplier")?,
        margin: reader.decimal("margin")?,
        maker_fee: reader.decimal("maker_fee")?,
        taker_fee: reader.decimal("taker_fee")?,
        market_band_bps: reader.i64("market_band_bps")?,
        close_today: reader.flag("close_today")?,
    })))
}

fn decode_order<'a>(reader: &mut Reader<'a>) -> Result<Command<'a>, CodecError> {
    let account = reader.account()?;
    let id = reader.name("id")?;
    let symbol = reader.name("symbol")?;
    let flags = reader.byte("order flags")?;
    let time_in_force = match (flags >> TIF_SHIFT) & 0b11 {
        0 => TimeInForce::GoodTillCancel,
        1 => TimeInForce::ImmediateOrCancel,
        2 => TimeInForce::FillOrKill,
        _ => TimeInForce::GoodForDay,
    };
    let stp = match (flags >> STP_SHIFT) & 0b11 {
        0 => StpMode::CancelTaker,
        1 => StpMode::CancelMaker,
        2 => StpMode::CancelBoth,
        _ => StpMode::None,
    };
    let extension_at = reader.offset;
    let extension = match flags & FLAG_EXTENSION {
        0 => 0,
        _ => {
            match reader.byte("order extension")? {
                // 0 is written as no extension byte at all: one encoding per command.
                extension if extension != 0 && extension & !EXTENSION_BITS == 0 => extension,
                _ => {
                    return Err(CodecError::Invalid {
                        field: "order extension",
                        offset: extension_at,
                    })
                }
            }
        }
    };
    let offset = match extension & OFFSET_BITS {
        OFFSET_OPEN => Offset::Open,
        OFFSET_CLOSE => Offset::Close,
        OFFSET_CLOSE_TODAY => Offset::CloseToday,
        _ => return Err(CodecError::Invalid { field: "offset", offset: extension_at }),
    };
    let order_type = if flags & FLAG_MARKET != 0 {
        OrderType::Market
    } else {
        OrderType::Limit { price: reader.decimal("price")? }
    };
    let size = match extension >> SIZE_SHIFT {
        SIZE_QTY => OrderSize::of_qty(reader.decimal("qty")?),
        SIZE_QUOTE_QTY => OrderSize::of_quote_qty(reader.decimal("quote_qty")?),
        SIZE_BOTH => {
            let qty = reader.decimal("qty")?;
            OrderSize::of(Some(qty), Some(reader.decimal("quote_qty")?))
        }
        // SIZE_NEITHER, the last of the two bits' values.
        _ => OrderSize::of(None, None),
    };
    Ok(Command::Order(OrderCommand {
        account,
        id,
        symbol,
        side: if flags & FLAG_SELL != 0 { Side::Sell } else { Side::Buy },
        order_type,
        size,
        time_in_force,
        post_only: flags & FLAG_POST_ONLY != 0,
        stp,
        offset,
    }))
}

fn decode_amend<'a>(reader: &mut Reader<'a>) -> Result<Command<'a>, CodecError> {
    let account = reader.account()?;
    let id = reader.name("id")?;
    let flags_offset = reader.offset;
    let flags = reader.byte("amend flags")?;
    let known = AMEND_PRICE | AMEND_QTY | AMEND_QTY_TOTAL;
    let total_without_qty = flags & AMEND_QTY_TOTAL != 0 && flags & AMEND_QTY == 0;
    if flags & (AMEND_PRICE | AMEND_QTY) == 0 || flags & !known != 0 || total_without_qty {
        return Err(CodecError::Invalid { field: "amend flags", offset: flags_offset });
    }
    let qty_kind = match flags & AMEND_QTY_TOTAL {
        0 => AmendQtyKind::Remaining,
        _ => AmendQtyKind::Total,
    };
    let price = if flags & AMEND_PRICE != 0 { Some(reader.decimal("price")?) } else { None };
    let qty = if flags & AMEND_QTY != 0 { Some(reader.decimal("qty")?) } else { None };
    Ok(Command::Amend(AmendCommand { account, id, price, qty, qty_kind }))
}

fn decode_cancel_all<'a>(reader: &mut Reader<'a>) -> Result<Command<'a>, CodecError> {
    let account = reader.account()?;
    let flag_offset = reader.offset;
    let symbol = match reader.byte("symbol flag")? {
        NO_SYMBOL => None,
        WITH_SYMBOL => Some(reader.name("symbol")?),
        _ => return Err(CodecError::Invalid { field: "symbol flag", offset: flag_offset }),
    };
    Ok(Command::CancelAll { account, symbol })
}

struct Writer<'a> {
    out: &'a mut Vec<u8>,
}

impl Writer<'_> {
    fn byte(&mut self, byte: u8) {
        self.out.push(byte);
    }

    fn unsigned(&mut self, mut value: u128) {
        while value >= 0x80 {
            self.out.push((value as u8) | 0x80);
            value >>= 7;
        }
        self.out.push(value as u8);
    }

    fn signed(&mut self, value: i128) {
        self.unsigned(((value << 1) ^ (value >> 127)) as u128);
    }

    fn decimal(&mut self, decimal: Decimal) {
        self.signed(decimal.mantissa());
        self.unsigned(u128::from(decimal.scale()));
    }

    fn name(&mut self, field: &'static str, name: &str) -> Result<(), CodecError> {
        if name.is_empty() || name.len() > NAME_LEN_MAX {
            return Err(CodecError::BadName { field });
        }
        self.unsigned(name.len() as u128);
        self.out.extend_from_slice(name.as_bytes());
        Ok(())
    }

    fn account(&mut self, account: &AccountRef<'_>) -> Result<(), CodecError> {
        match account {
            AccountRef::Name(name) => {
                self.byte(ACCOUNT_BY_NAME);
                self.name("account", name)
            }
            AccountRef::Id(id) => {
                self.byte(ACCOUNT_BY_ID);
                self.unsigned(u128::from(id.0));
                Ok(())
            }
        }
    }
}

struct Reader<'a> {
    bytes: &'a [u8],
    offset: usize,
}

impl<'a> Reader<'a> {
    fn byte(&mut self, _field: &'static str) -> Result<u8, CodecError> {
        let byte =
            *self.bytes.get(self.offset).ok_or(CodecError::Truncated { offset: self.offset })?;
        self.offset += 1;
        Ok(byte)
    }

    /// A boolean: one byte, 0 or 1.
    fn flag(&mut self, field: &'static str) -> Result<bool, CodecError> {
        let offset = self.offset;
        match self.byte(field)? {
            0 => Ok(false),
            1 => Ok(true),
            _ => Err(CodecError::Invalid { field, offset }),
        }
    }

    /// A varint of at most 19 bytes (enough for 128 bits), minimal or not.
    #[inline]
    fn unsigned(&mut self, field: &'static str) -> Result<u128, CodecError> {
        // Most values (lengths, scales, prices and quantities in units) take one or two
        // bytes: decode those without the 128-bit loop.
        if let Some(&first) = self.bytes.get(self.offset) {
            if first < 0x80 {
                self.offset += 1;
                return Ok(u128::from(first));
            }
            if let Some(&second) = self.bytes.get(self.offset + 1) {
                if second < 0x80 {
                    self.offset += 2;
                    return Ok(u128::from(first & 0x7f) | (u128::from(second) << 7));
                }
            }
        }
        self.unsigned_long(field)
    }

    fn unsigned_long(&mut self, field: &'static str) -> Result<u128, CodecError> {
        let start = self.offset;
        let mut value: u128 = 0;
        for shift in (0..133).step_by(7) {
            let byte = self.byte(field)?;
            let bits = u128::from(byte & 0x7f);
            if shift > 0 && (shift >= 128 || bits >> (128 - shift) != 0) {
                return Err(CodecError::Invalid { field, offset: start });
            }
            value |= bits << shift;
            if byte & 0x80 == 0 {
                return Ok(value);
            }
        }
        Err(CodecError::Invalid { field, offset: start })
    }

    fn signed(&mut self, field: &'static str) -> Result<i128, CodecError> {
        let zigzag = self.unsigned(field)?;
        Ok(((zigzag >> 1) as i128) ^ -((zigzag & 1) as i128))
    }

    fn u64(&mut self, field: &'static str) -> Result<u64, CodecError> {
        let offset = self.offset;
        u64::try_from(self.unsigned(field)?).map_err(|_| CodecError::Invalid { field, offset })
    }

    fn i64(&mut self, field: &'static str) -> Result<i64, CodecError> {
        let offset = self.offset;
        i64::try_from(self.signed(field)?).map_err(|_| CodecError::Invalid { field, offset })
    }

    fn decimal(&mut self, field: &'static str) -> Result<Decimal, CodecError> {
        let offset = self.offset;
        let mantissa = self.signed(field)?;
        let scale = u32::try_from(self.unsigned(field)?).unwrap_or(u32::MAX);
        // Only the normalised form is ever written, so anything else is damage.
        Decimal::from_normalised(mantissa, scale).ok_or(CodecError::Invalid { field, offset })
    }

    fn name(&mut self, field: &'static str) -> Result<Cow<'a, str>, CodecError> {
        let offset = self.offset;
        let length = usize::try_from(self.unsigned(field)?).unwrap_or(usize::MAX);
        if length == 0 || length > NAME_LEN_MAX {
            return Err(CodecError::BadName { field });
        }
        let end = self.offset.checked_add(length).filter(|&end| end <= self.bytes.len());
        let end = end.ok_or(CodecError::Truncated { offset: self.offset })?;
        let text = std::str::from_utf8(&self.bytes[self.offset..end])
            .map_err(|_| CodecError::Invalid { field, offset })?;
        self.offset = end;
        Ok(Cow::Borrowed(text))
    }

    fn account(&mut self) -> Result<AccountRef<'a>, CodecError> {
        let offset = self.offset;
        match self.byte("account kind")? {
            ACCOUNT_BY_NAME => Ok(AccountRef::Name(self.name("account")?)),
            ACCOUNT_BY_ID => {
                let id = u32::try_from(self.unsigned("account id")?)
                    .map_err(|_| CodecError::Invalid { field: "account id", offset })?;
                Ok(AccountRef::Id(AccountId(id)))
            }
            _ => Err(CodecError::Invalid { field: "account kind", offset }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn decimal(text: &str) -> Decimal {
        Decimal::parse(text).unwrap()
    }

    fn samples() -> Vec<Command<'static>> {
        vec![
            Command::Asset { asset: "BTC".into(), decimals: 8 },
            Command::Instrument(Box::new(InstrumentCommand {
                symbol: "BTC-USD".into(),
                base: "BTC".into(),
                quote: "USD".into(),
                tick: decimal("0.05"),
                lot: decimal("0.001"),
                min_qty: decimal("0.001"),
                max_qty: decimal("1000"),
                maker_fee_bps: -0,
                taker_fee_bps: 10,
                market_band_bps: 500,
            })),
            Command::Deposit(TransferCommand {
                account: "alice".into(),
                asset: "USD".into(),
                amount: decimal("-12345678901234567890123.5"),
            }),
            Command::Withdraw(TransferCommand {
                account: "bob".into(),
                asset: "USD".into(),
                amount: decimal("0"),
            }),
            Command::Order(OrderCommand {
                account: AccountRef::Id(AccountId(u32::MAX)),
                id: "c-1".into(),
                symbol: "BTC-USD".into(),
                side: Side::Sell,
                order_type: OrderType::Limit { price: decimal("50000.25") },
                size: OrderSize::of_qty(decimal("0.5")),
                time_in_force: TimeInForce::FillOrKill,
                post_only: true,
                stp: StpMode::None,
                offset: Offset::Open,
            }),
            Command::Order(OrderCommand {
                account: "ünïcode".into(),
                id: "x".into(),
                symbol: "S".into(),
                side: Side::Buy,
                order_type: OrderType::Market,
                size: OrderSize::of_qty(decimal("3")),
                time_in_force: TimeInForce::ImmediateOrCancel,
                post_only: false,
                stp: StpMode::CancelBoth,
                offset: Offset::Open,
            }),
            Command::Cancel { account: "alice".into(), id: "c-1".into() },
            Command::Amend(AmendCommand {
                account: AccountRef::Id(AccountId(7)),
                id: "c-1".into(),
                price: None,
                qty: Some(decimal("1.25")),
                qty_kind: AmendQtyKind::Remaining,
            }),
            Command::Amend(AmendCommand {
                account: "alice".into(),
                id: "c-1".into(),
                price: Some(decimal("1")),
                qty: Some(decimal("2")),
                qty_kind: AmendQtyKind::Remaining,
            }),
            Command::Amend(AmendCommand {
                account: AccountRef::Id(AccountId(3)),
                id: "fix-7".into(),
                price: None,
                qty: Some(decimal("2.5")),
                qty_kind: AmendQtyKind::Total,
            }),
            Command::Halt { symbol: "BTC-USD".into() },
            Command::Resume { symbol: "ünïcode-S".into() },
            Command::CancelAll { account: "alice".into(), symbol: None },
            Command::CancelAll { account: "bob".into(), symbol: Some("BTC-USD".into()) },
            Command::CancelAll { account: AccountRef::Id(AccountId(u32::MAX)), symbol: None },
            Command::CancelAll {
                account: AccountRef::Id(AccountId(0)),
                symbol: Some("ETH-USD".into()),
            },
            Command::SetLimits { open_orders_per_account: 0 },
            Command::SetLimits { open_orders_per_account: 127 },
            Command::SetLimits { open_orders_per_account: 10_000 },
            Command::SetLimits { open_orders_per_account: u64::MAX },
            Command::Future(Box::new(FutureCommand {
                symbol: "SHFE.cu2501".into(),
                settle: "CNY".into(),
                tick: decimal("10"),
                lot: decimal("1"),
                min_qty: decimal("1"),
                max_qty: decimal("1000"),
                multiplier: decimal("5"),
                margin: decimal("25000.5"),
                maker_fee: decimal("0"),
                taker_fee: decimal("3.25"),
                market_band_bps: 500,
                close_today: true,
            })),
            Command::Margin { symbol: "SHFE.cu2501".into(), margin: decimal("-1") },
            Command::Settle { symbol: "S".into(), price: decimal("50010"), is_final: false },
            Command::Settle { symbol: "S".into(), price: decimal("0.5"), is_final: true },
            Command::Liquidate { account: AccountRef::Id(AccountId(3)), symbol: "S".into() },
            Command::Liquidate { account: "alice".into(), symbol: "S".into() },
            Command::Order(OrderCommand {
                account: "alice".into(),
                id: "f-1".into(),
                symbol: "SHFE.cu2501".into(),
                side: Side::Sell,
                order_type: OrderType::Limit { price: decimal("50010") },
                size: OrderSize::of_qty(decimal("2")),
                time_in_force: TimeInForce::GoodForDay,
                post_only: false,
                stp: StpMode::CancelTaker,
                offset: Offset::CloseToday,
            }),
            Command::Order(OrderCommand {
                account: "bob".into(),
                id: "f-2".into(),
                symbol: "SHFE.cu2501".into(),
                side: Side::Buy,
                order_type: OrderType::Market,
                size: OrderSize::of_qty(decimal("1")),
                time_in_force: TimeInForce::ImmediateOrCancel,
                post_only: false,
                stp: StpMode::None,
                offset: Offset::Close,
            }),
            // Spend-amount buys (orders.md), and commands naming both sizes or neither.
            Command::Order(OrderCommand {
                account: AccountRef::Id(AccountId(2)),
                id: "q-1".into(),
                symbol: "BTC-USD".into(),
                side: Side::Buy,
                order_type: OrderType::Market,
                size: OrderSize::of_quote_qty(decimal("1234.56")),
                time_in_force: TimeInForce::GoodTillCancel,
                post_only: false,
                stp: StpMode::CancelMaker,
                offset: Offset::Open,
            }),
            Command::Order(OrderCommand {
                account: "alice".into(),
                id: "q-2".into(),
                symbol: "SHFE.cu2501".into(),
                side: Side::Sell,
                order_type: OrderType::Limit { price: decimal("7") },
                size: OrderSize::of(Some(decimal("2")), Some(decimal("-3.5"))),
                time_in_force: TimeInForce::FillOrKill,
                post_only: true,
                stp: StpMode::CancelTaker,
                offset: Offset::CloseToday,
            }),
            Command::Order(OrderCommand {
                account: "bob".into(),
                id: "q-3".into(),
                symbol: "S".into(),
                side: Side::Buy,
                order_type: OrderType::Market,
                size: OrderSize::of(None, None),
                time_in_force: TimeInForce::ImmediateOrCancel,
                post_only: false,
                stp: StpMode::None,
                offset: Offset::Close,
            }),
        ]
    }

    #[test]
    fn an_order_without_an_offset_encodes_as_before_futures() {
        // The bytes of an open order are those journals held before futures existed:
        // no offset flag, no offset byte.
        let order = |offset| {
            Command::Order(OrderCommand {
                account: "a".into(),
                id: "1".into(),
                symbol: "S".into(),
                side: Side::Buy,
                order_type: OrderType::Limit { price: decimal("1") },
                size: OrderSize::of_qty(decimal("1")),
                time_in_force: TimeInForce::GoodTillCancel,
                post_only: false,
                stp: StpMode::CancelTaker,
                offset,
            })
        };
        let mut open = Vec::new();
        encode_command(&order(Offset::Open), &mut open).unwrap();
        let before_futures = [TAG_ORDER, ACCOUNT_BY_NAME, 1, b'a', 1, b'1', 1, b'S', 0, 2, 0, 2, 0];
        assert_eq!(open, before_futures);
        let mut close_today = Vec::new();
        encode_command(&order(Offset::CloseToday), &mut close_today).unwrap();
        let flags_at = 8;
        assert_eq!(close_today[flags_at], FLAG_EXTENSION);
        assert_eq!(close_today[flags_at + 1], OFFSET_CLOSE_TODAY);
        let mut unknown = close_today.clone();
        unknown[flags_at + 1] = 3;
        assert_eq!(
            decode_command(&unknown),
            Err(CodecError::Invalid { field: "offset", offset: flags_at + 1 })
        );
        // An extension byte of 0 (written as none) or with bits beyond the four: damage.
        for extension in [0, 0b1_0000, 0b1000_0001] {
            let mut damaged = close_today.clone();
            damaged[flags_at + 1] = extension;
            assert_eq!(
                decode_command(&damaged),
                Err(CodecError::Invalid { field: "order extension", offset: flags_at + 1 })
            );
        }
    }

    /// Journals written before spend-amount buys existed hold orders whose byte after
    /// the flags (when flag bit 7 is set) is the offset alone, 1 or 2: they decode to the
    /// same commands as then, which encode to the same bytes again.
    #[test]
    fn orders_journaled_before_spend_amount_buys_decode_exactly() {
        let old_payloads: [(&[u8], Command<'static>); 3] = [
            // A limit sell, close today: flags 0x81 (sell, extension), offset byte 2,
            // price 1 (zigzag 2, scale 0), qty 1.
            (
                &[5, 0, 1, b'a', 1, b'1', 1, b'S', 0x81, 2, 2, 0, 2, 0],
                Command::Order(OrderCommand {
                    account: "a".into(),
                    id: "1".into(),
                    symbol: "S".into(),
                    side: Side::Sell,
                    order_type: OrderType::Limit { price: decimal("1") },
                    size: OrderSize::of_qty(decimal("1")),
                    time_in_force: TimeInForce::GoodTillCancel,
                    post_only: false,
                    stp: StpMode::CancelTaker,
                    offset: Offset::CloseToday,
                }),
            ),
            // A market buy by account id 3, ioc, stp none, close: flags 0xea, offset byte
            // 1, qty 0.5 (zigzag 10, scale 1).
            (
                &[5, 1, 3, 1, b'2', 1, b'S', 0xea, 1, 10, 1],
                Command::Order(OrderCommand {
                    account: AccountRef::Id(AccountId(3)),
                    id: "2".into(),
                    symbol: "S".into(),
                    side: Side::Buy,
                    order_type: OrderType::Market,
                    size: OrderSize::of_qty(decimal("0.5")),
                    time_in_force: TimeInForce::ImmediateOrCancel,
                    post_only: false,
                    stp: StpMode::None,
                    offset: Offset::Close,
                }),
            ),
            // A post-only fok limit buy, open: flags 0x34 (post-only, fok, stp cancel
            // maker), no extension byte, price 100.25 (zigzag 20050, scale 2), qty 3.
            (
                &[5, 0, 1, b'b', 1, b'3', 1, b'S', 0x34, 0xd2, 0x9c, 0x01, 2, 6, 0],
                Command::Order(OrderCommand {
                    account: "b".into(),
                    id: "3".into(),
                    symbol: "S".into(),
                    side: Side::Buy,
                    order_type: OrderType::Limit { price: decimal("100.25") },
                    size: OrderSize::of_qty(decimal("3")),
                    time_in_force: TimeInForce::FillOrKill,
                    post_only: true,
                    stp: StpMode::CancelMaker,
                    offset: Offset::Open,
                }),
            ),
        ];
        for (payload, command) in old_payloads {
            assert_eq!(decode_command(payload).as_ref(), Ok(&command), "{payload:?}");
            let mut again = Vec::new();
            encode_command(&command, &mut again).unwrap();
            assert_eq!(again, payload);
        }
    }

    #[test]
    fn a_spend_amount_buy_has_its_size_kind_in_the_extension_byte() {
        let mut payload = Vec::new();
        let order = OrderCommand {
            account: "a".into(),
            id: "1".into(),
            symbol: "S".into(),
            side: Side::Buy,
            order_type: OrderType::Market,
            size: OrderSize::of_quote_qty(decimal("25")),
            time_in_force: TimeInForce::GoodTillCancel,
            post_only: false,
            stp: StpMode::CancelTaker,
            offset: Offset::Open,
        };
        encode_command(&Command::Order(order.clone()), &mut payload).unwrap();
        // Flags: market, extension; the extension: open, quote_qty; then 25 (zigzag 50).
        assert_eq!(payload, [5, 0, 1, b'a', 1, b'1', 1, b'S', 0x82, 0b0100, 50, 0]);
        let both = OrderCommand {
            size: OrderSize::of(Some(decimal("1")), Some(decimal("25"))),
            offset: Offset::Close,
            ..order
        };
        payload.clear();
        encode_command(&Command::Order(both), &mut payload).unwrap();
        assert_eq!(payload, [5, 0, 1, b'a', 1, b'1', 1, b'S', 0x82, 0b1001, 2, 0, 50, 0]);
    }

    #[test]
    fn every_kind_of_command_decodes_to_itself() {
        for command in samples() {
            let mut payload = Vec::new();
            encode_command(&command, &mut payload).unwrap();
            assert_eq!(decode_command(&payload).unwrap(), command);
        }
    }

    #[test]
    fn extreme_decimals_round_trip() {
        for mantissa in [i128::MIN, i128::MAX, 0, -1, 1] {
            let amount = Decimal::from_units(mantissa, 0);
            let command = Command::Deposit(TransferCommand {
                account: "a".into(),
                asset: "b".into(),
                amount,
            });
            let mut payload = Vec::new();
            encode_command(&command, &mut payload).unwrap();
            assert_eq!(decode_command(&payload).unwrap(), command);
        }
    }

    #[test]
    fn an_empty_name_is_refused_and_leaves_the_buffer_alone() {
        let command = Command::Cancel { account: "alice".into(), id: "".into() };
        let mut payload = vec![9];
        let error = encode_command(&command, &mut payload).unwrap_err();
        assert_eq!(error, CodecError::BadName { field: "id" });
        assert_eq!(payload, vec![9]);
    }

    #[test]
    fn every_truncation_and_extension_is_an_error() {
        for command in samples() {
            let mut payload = Vec::new();
            encode_command(&command, &mut payload).unwrap();
            for length in 0..payload.len() {
                assert!(decode_command(&payload[..length]).is_err(), "{command:?} at {length}");
            }
            payload.push(0);
            assert_eq!(decode_command(&payload), Err(CodecError::TrailingBytes { extra: 1 }));
        }
    }

    #[test]
    fn flipped_bits_never_panic() {
        for command in samples() {
            let mut payload = Vec::new();
            encode_command(&command, &mut payload).unwrap();
            for index in 0..payload.len() {
                for bit in 0..8 {
                    let mut damaged = payload.clone();
                    damaged[index] ^= 1 << bit;
                    let _ = decode_command(&damaged);
                }
            }
        }
    }

    #[test]
    fn venue_commands_have_their_tags_and_layout() {
        let encode = |command: &Command<'_>| {
            let mut payload = Vec::new();
            encode_command(command, &mut payload).unwrap();
            payload
        };
        assert_eq!(encode(&Command::Halt { symbol: "S".into() }), [TAG_HALT, 1, b'S']);
        assert_eq!(encode(&Command::Resume { symbol: "S".into() }), [TAG_RESUME, 1, b'S']);
        assert_eq!(
            encode(&Command::CancelAll { account: "a".into(), symbol: None }),
            [TAG_CANCEL_ALL, ACCOUNT_BY_NAME, 1, b'a', NO_SYMBOL]
        );
        assert_eq!(
            encode(&Command::CancelAll {
                account: AccountRef::Id(AccountId(3)),
                symbol: Some("S".into())
            }),
            [TAG_CANCEL_ALL, ACCOUNT_BY_ID, 3, WITH_SYMBOL, 1, b'S']
        );
        // A symbol flag other than 0 or 1 is damage.
        assert_eq!(
            decode_command(&[TAG_CANCEL_ALL, ACCOUNT_BY_NAME, 1, b'a', 2]),
            Err(CodecError::Invalid { field: "symbol flag", offset: 4 })
        );
        // Empty names are refused both ways.
        let mut payload = Vec::new();
        assert_eq!(
            encode_command(&Command::Halt { symbol: "".into() }, &mut payload),
            Err(CodecError::BadName { field: "symbol" })
        );
        assert_eq!(
            encode_command(
                &Command::CancelAll { account: "a".into(), symbol: Some("".into()) },
                &mut payload
            ),
            Err(CodecError::BadName { field: "symbol" })
        );
        assert!(payload.is_empty());
        assert_eq!(decode_command(&[TAG_HALT, 0]), Err(CodecError::BadName { field: "symbol" }));
        assert_eq!(decode_command(&[16]), Err(CodecError::UnknownTag { tag: 16 }));
    }

    #[test]
    fn random_payloads_after_a_venue_tag_never_panic() {
        let mut state = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state
        };
        for round in 0..20_000 {
            let tag = [TAG_HALT, TAG_RESUME, TAG_CANCEL_ALL, TAG_SET_LIMITS][round % 4];
            let length = (next() % 12) as usize;
            let mut payload = vec![tag];
            payload.extend((0..length).map(|_| match next() % 4 {
                0 => 0,
                1 => 1,
                _ => next() as u8,
            }));
            if let Ok(command) = decode_command(&payload) {
                // What decodes is a command that encodes and decodes to itself (varints
                // need not be minimal, so the bytes may differ).
                let mut again = Vec::new();
                encode_command(&command, &mut again).unwrap();
                assert_eq!(decode_command(&again).unwrap(), command, "{payload:?}");
            }
        }
    }

    #[test]
    fn set_limits_has_its_tag_and_a_varint() {
        let encode = |limit: u64| {
            let mut payload = Vec::new();
            encode_command(&Command::SetLimits { open_orders_per_account: limit }, &mut payload)
                .unwrap();
            payload
        };
        assert_eq!(encode(0), [TAG_SET_LIMITS, 0]);
        assert_eq!(encode(5), [TAG_SET_LIMITS, 5]);
        assert_eq!(encode(300), [TAG_SET_LIMITS, 0xac, 0x02]);
        let max = encode(u64::MAX);
        assert_eq!(max.len(), 11);
        assert_eq!(
            decode_command(&max),
            Ok(Command::SetLimits { open_orders_per_account: u64::MAX })
        );
        // Nothing after the tag is a truncation; 2^64 does not fit.
        assert_eq!(decode_command(&[TAG_SET_LIMITS]), Err(CodecError::Truncated { offset: 1 }));
        let mut beyond = vec![TAG_SET_LIMITS];
        beyond.extend([0x80; 9]);
        beyond.push(0x02);
        assert_eq!(
            decode_command(&beyond),
            Err(CodecError::Invalid { field: "open_orders_per_account", offset: 1 })
        );
        // Beyond 128 bits, or a varint that never ends, is damage too.
        let mut endless = vec![TAG_SET_LIMITS];
        endless.extend([0xff; 20]);
        assert!(matches!(decode_command(&endless), Err(CodecError::Invalid { .. })));
        let mut unfinished = vec![TAG_SET_LIMITS];
        unfinished.extend([0xff; 5]);
        assert!(matches!(decode_command(&unfinished), Err(CodecError::Truncated { .. })));
        // A longer form of a value decodes (varints need not be minimal), to the value.
        assert_eq!(
            decode_command(&[TAG_SET_LIMITS, 0x85, 0x00]),
            Ok(Command::SetLimits { open_orders_per_account: 5 })
        );
        // Trailing bytes are refused.
        assert_eq!(
            decode_command(&[TAG_SET_LIMITS, 5, 0]),
            Err(CodecError::TrailingBytes { extra: 1 })
        );
    }

    #[test]
    fn an_overlong_varint_is_invalid() {
        let mut payload = vec![TAG_ASSET, 1, b'A'];
        payload.extend([0xff; 20]);
        assert!(matches!(decode_command(&payload), Err(CodecError::Invalid { .. })));
    }
}
