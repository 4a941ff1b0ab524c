//! Parsing one replay-format line into a `Command`.
//!
//! The line is read once by serde_json into a flat table of the known field names, each
//! value kept as raw JSON text; unknown fields are skipped whatever their type. Each
//! command then takes the fields it needs and checks their JSON types strictly: a
//! missing field, a `null`, a wrong type, an enum value outside its set or a decimal
//! outside the grammar is `malformed`. Values are never rounded or coerced.

use std::borrow::Cow;
use std::fmt;

use serde::de::{self, Deserializer, IgnoredAny, MapAccess, Visitor};
use serde_json::value::RawValue;

use crate::command::{
    AmendCommand, AmendQtyKind, Command, FutureCommand, InstrumentCommand, Offset, OrderCommand,
    OrderSize, OrderType, Side, StpMode, TimeInForce, TransferCommand,
};
use crate::ids::TimestampNs;
use crate::num::Decimal;

/// Why a line is `malformed`; for diagnostics only (the event carries just the reason).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Malformed(pub String);

impl fmt::Display for Malformed {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        formatter.write_str(&self.0)
    }
}

/// A parsed line: the command and its optional timestamp.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ParsedLine<'a> {
    pub command: Command<'a>,
    pub ts: Option<TimestampNs>,
}

macro_rules! fields {
    ($($variant:ident => $name:literal),* $(,)?) => {
        #[derive(Clone, Copy, Debug, PartialEq, Eq)]
        #[repr(usize)]
        enum Field { $($variant),* }

        const FIELD_COUNT: usize = [$($name),*].len();

        impl Field {
            fn from_name(name: &str) -> Option<Field> {
                match name {
                    $($name => Some(Field::$variant),)*
                    _ => None,
                }
            }

            fn name(self) -> &'static str {
                match self {
                    $(Field::$variant => $name,)*
                }
            }
        }
    };
}

fields! {
    Cmd => "cmd", Asset => "asset", Decimals => "decimals", Symbol => "symbol", Base => "base",
    Quote => "quote", Tick => "tick", Lot => "lot", MinQty => "min_qty", MaxQty => "max_qty",
    MakerFeeBps => "maker_fee_bps", TakerFeeBps => "taker_fee_bps",
    MarketBandBps => "market_band_bps", Account => "account", Amount => "amount", Id => "id",
    Side => "side", Type => "type", Price => "price", Qty => "qty", Tif => "tif",
    PostOnly => "post_only", Stp => "stp", Ts => "ts", Settle => "settle",
    Multiplier => "multiplier", Margin => "margin", MakerFee => "maker_fee",
    TakerFee => "taker_fee", CloseToday => "close_today", Final => "final", Offset => "offset",
    QuoteQty => "quote_qty",
}

/// The known fields of one line, as raw JSON text.
struct RawFields<'a> {
    values: [Option<&'a RawValue>; FIELD_COUNT],
}

impl<'de> serde::Deserialize<'de> for RawFields<'de> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_map(RawFieldsVisitor)
    }
}

struct RawFieldsVisitor;

impl<'de> Visitor<'de> for RawFieldsVisitor {
    type Value = RawFields<'de>;

    fn expecting(&self, formatter: &mut fmt::Formatter) -> fmt::Result {
        formatter.write_str("a JSON object")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<RawFields<'de>, A::Error> {
        let mut fields = RawFields { values: [None; FIELD_COUNT] };
        while let Some(key) = map.next_key::<FieldKey>()? {
            match key.0 {
                Some(field) => {
                    let slot = &mut fields.values[field as usize];
                    if slot.is_some() {
                        return Err(de::Error::custom(format_args!(
                            "duplicate field `{}`",
                            field.name()
                        )));
                    }
                    *slot = Some(map.next_value::<&'de RawValue>()?);
                }
                None => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        Ok(fields)
    }
}

/// A field name, recognised without allocating (escaped names are rare and allowed).
struct FieldKey(Option<Field>);

impl<'de> serde::Deserialize<'de> for FieldKey {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct KeyVisitor;
        impl Visitor<'_> for KeyVisitor {
            type Value = FieldKey;
            fn expecting(&self, formatter: &mut fmt::Formatter) -> fmt::Result {
                formatter.write_str("a field name")
            }
            fn visit_str<E: de::Error>(self, name: &str) -> Result<FieldKey, E> {
                Ok(FieldKey(Field::from_name(name)))
            }
        }
        deserializer.deserialize_str(KeyVisitor)
    }
}

fn malformed(message: impl Into<String>) -> Malformed {
    Malformed(message.into())
}

impl<'a> RawFields<'a> {
    fn raw(&self, field: Field) -> Option<&'a str> {
        self.values[field as usize].map(RawValue::get)
    }

    fn required(&self, field: Field) -> Result<&'a str, Malformed> {
        self.raw(field).ok_or_else(|| malformed(format!("missing field `{}`", field.name())))
    }

    fn string(&self, field: Field) -> Result<Cow<'a, str>, Malformed> {
        json_string(self.required(field)?)
            .ok_or_else(|| malformed(format!("`{}` must be a string", field.name())))
    }

    /// A name (account, id, symbol, asset): a non-empty string.
    fn name(&self, field: Field) -> Result<Cow<'a, str>, Malformed> {
        let name = self.string(field)?;
        if name.is_empty() {
            return Err(malformed(format!("`{}` must not be empty", field.name())));
        }
        Ok(name)
    }

    fn decimal(&self, field: Field) -> Result<Decimal, Malformed> {
        Decimal::parse(&self.string(field)?)
            .ok_or_else(|| malformed(format!("`{}` must be a decimal string", field.name())))
    }

    fn optional_decimal(&self, field: Field) -> Result<Option<Decimal>, Malformed> {
        match self.raw(field) {
            None => Ok(None),
            Some(_) => self.decimal(field).map(Some),
        }
    }

    fn integer(&self, field: Field) -> Result<i64, Malformed> {
        json_integer(self.required(field)?)
            .ok_or_else(|| malformed(format!("`{}` must be a JSON integer", field.name())))
    }

    /// An enum value from `choices`, or `default` when the field is absent.
    fn choice<T: Copy>(
        &self,
        field: Field,
        choices: &[(&str, T)],
        default: Option<T>,
    ) -> Result<T, Malformed> {
        let raw = match (self.raw(field), default) {
            (None, Some(default)) => return Ok(default),
            (None, None) => return Err(malformed(format!("missing field `{}`", field.name()))),
            (Some(raw), _) => raw,
        };
        let value = json_string(raw);
        choices
            .iter()
            .find(|(name, _)| value.as_deref() == Some(*name))
            .map(|(_, choice)| *choice)
            .ok_or_else(|| malformed(format!("`{}` has no such value", field.name())))
    }

    fn optional_bool(&self, field: Field) -> Result<bool, Malformed> {
        match self.raw(field) {
            None | Some("false") => Ok(false),
            Some("true") => Ok(true),
            Some(_) => Err(malformed(format!("`{}` must be true or false", field.name()))),
        }
    }
}

/// The text of a JSON string value, or `None` if `raw` is not a string. Borrowed unless
/// it has escapes.
fn json_string(raw: &str) -> Option<Cow<'_, str>> {
    let inner = raw.strip_prefix('"')?.strip_suffix('"')?;
    if !inner.contains('\\') {
        return Some(Cow::Borrowed(inner));
    }
    serde_json::from_str::<String>(raw).ok().map(Cow::Owned)
}

/// A JSON integer literal (`-?[0-9]+`; no fraction or exponent), saturating at the
/// `i64` range so that huge values read as out of range rather than malformed.
fn json_integer(raw: &str) -> Option<i64> {
    let (negative, digits) = match raw.strip_prefix('-') {
        Some(digits) => (true, digits),
        None => (false, raw),
    };
    if digits.is_empty() || !digits.bytes().all(|byte| byte.is_ascii_digit()) {
        return None;
    }
    let magnitude = digits.bytes().fold(0i64, |value, digit| {
        value.saturating_mul(10).saturating_add(i64::from(digit - b'0'))
    });
    Some(if negative { -magnitude } else { magnitude })
}

const SIDES: [(&str, Side); 2] = [("buy", Side::Buy), ("sell", Side::Sell)];
const ORDER_TYPES: [(&str, bool); 2] = [("limit", true), ("market", false)];
const TIMES_IN_FORCE: [(&str, TimeInForce); 4] = [
    ("gtc", TimeInForce::GoodTillCancel),
    ("ioc", TimeInForce::ImmediateOrCancel),
    ("fok", TimeInForce::FillOrKill),
    ("gfd", TimeInForce::GoodForDay),
];
const OFFSETS: [(&str, Offset); 3] =
    [("open", Offset::Open), ("close", Offset::Close), ("close_today", Offset::CloseToday)];
const STP_MODES: [(&str, StpMode); 4] = [
    ("cancel_taker", StpMode::CancelTaker),
    ("cancel_maker", StpMode::CancelMaker),
    ("cancel_both", StpMode::CancelBoth),
    ("none", StpMode::None),
];

/// Parses one non-blank line of the replay format. Only the replay format's commands:
/// the venue's own (`halt`, `resume`, `cancel_all`, which `write_command` prints for
/// journal exports) are an unknown `cmd` here, so `malformed`.
pub fn parse_line(line: &str) -> Result<ParsedLine<'_>, Malformed> {
    let fields: RawFields<'_> = serde_json::from_str(line)
        .map_err(|error| malformed(format!("not a JSON object: {error}")))?;
    let ts = match fields.raw(Field::Ts) {
        None => None,
        Some(raw) => {
            let ts = json_integer(raw).ok_or_else(|| malformed("`ts` must be a JSON integer"))?;
            Some(TimestampNs(ts.max(0) as u64))
        }
    };
    let command = match &*fields.string(Field::Cmd)? {
        "asset" => Command::Asset {
            asset: fields.name(Field::Asset)?,
            decimals: fields.integer(Field::Decimals)?,
        },
        "instrument" => Command::Instrument(Box::new(InstrumentCommand {
            symbol: fields.name(Field::Symbol)?,
            base: fields.name(Field::Base)?,
            quote: fields.name(Field::Quote)?,
            tick: fields.decimal(Field::Tick)?,
            lot: fields.decimal(Field::Lot)?,
            min_qty: fields.decimal(Field::MinQty)?,
            max_qty: fields.decimal(Field::MaxQty)?,
            maker_fee_bps: fields.integer(Field::MakerFeeBps)?,
            taker_fee_bps: fields.integer(Field::TakerFeeBps)?,
            market_band_bps: fields.integer(Field::MarketBandBps)?,
        })),
        "future" => Command::Future(Box::new(FutureCommand {
            symbol: fields.name(Field::Symbol)?,
            settle: fields.name(Field::Settle)?,
            tick: fields.decimal(Field::Tick)?,
            lot: fields.decimal(Field::Lot)?,
            min_qty: fields.decimal(Field::MinQty)?,
            max_qty: fields.decimal(Field::MaxQty)?,
            multiplier: fields.decimal(Field::Multiplier)?,
            margin: fields.decimal(Field::Margin)?,
            maker_fee: fields.decimal(Field::MakerFee)?,
            taker_fee: fields.decimal(Field::TakerFee)?,
            market_band_bps: fields.integer(Field::MarketBandBps)?,
            close_today: fields.optional_bool(Field::CloseToday)?,
        })),
        "margin" => Command::Margin {
            symbol: fields.name(Field::Symbol)?,
            margin: fields.decimal(Field::Margin)?,
        },
        "settle" => Command::Settle {
            symbol: fields.name(Field::Symbol)?,
            price: fields.decimal(Field::Price)?,
            is_final: fields.optional_bool(Field::Final)?,
        },
        "liquidate" => Command::Liquidate {
            account: fields.name(Field::Account)?.into(),
            symbol: fields.name(Field::Symbol)?,
        },
        "deposit" => Command::Deposit(parse_transfer(&fields)?),
        "withdraw" => Command::Withdraw(parse_transfer(&fields)?),
        "order" => Command::Order(parse_order(&fields)?),
        "cancel" => {
            let account = fields.name(Field::Account)?.into();
            Command::Cancel { account, id: fields.name(Field::Id)? }
        }
        "amend" => {
            let amend = AmendCommand {
                account: fields.name(Field::Account)?.into(),
                id: fields.name(Field::Id)?,
                price: fields.optional_decimal(Field::Price)?,
                qty: fields.optional_decimal(Field::Qty)?,
                qty_kind: AmendQtyKind::Remaining,
            };
            if amend.price.is_none() && amend.qty.is_none() {
                return Err(malformed("an amend needs `price` or `qty`"));
            }
            Command::Amend(amend)
        }
        other => return Err(malformed(format!("unknown cmd `{other}`"))),
    };
    Ok(ParsedLine { command, ts })
}

fn parse_transfer<'a>(fields: &RawFields<'a>) -> Result<TransferCommand<'a>, Malformed> {
    Ok(TransferCommand {
        account: fields.name(Field::Account)?,
        asset: fields.name(Field::Asset)?,
        amount: fields.decimal(Field::Amount)?,
    })
}

fn parse_order<'a>(fields: &RawFields<'a>) -> Result<OrderCommand<'a>, Malformed> {
    let account = fields.name(Field::Account)?.into();
    let id = fields.name(Field::Id)?;
    let symbol = fields.name(Field::Symbol)?;
    let side = fields.choice(Field::Side, &SIDES, None)?;
    let is_limit = fields.choice(Field::Type, &ORDER_TYPES, None)?;
    // `price` and `post_only` mean nothing to a market order and are ignored there.
    let (order_type, post_only) = if is_limit {
        let price = fields.decimal(Field::Price)?;
        (OrderType::Limit { price }, fields.optional_bool(Field::PostOnly)?)
    } else {
        (OrderType::Market, false)
    };
    // `quote_qty` (orders.md) is type-checked wherever it appears; which orders may
    // carry it is the engine's to judge (`invalid_order`).
    let (qty, quote_qty) =
        (fields.optional_decimal(Field::Qty)?, fields.optional_decimal(Field::QuoteQty)?);
    if qty.is_none() && quote_qty.is_none() {
        return Err(malformed("an order needs `qty` or `quote_qty`"));
    }
    let size = OrderSize::of(qty, quote_qty);
    Ok(OrderCommand {
        account,
        id,
        symbol,
        side,
        order_type,
        size,
        time_in_force: fields.choice(
            Field::Tif,
            &TIMES_IN_FORCE,
            Some(TimeInForce::GoodTillCancel),
        )?,
        post_only,
        stp: fields.choice(Field::Stp, &STP_MODES, Some(StpMode::CancelTaker))?,
        offset: fields.choice(Field::Offset, &OFFSETS, Some(Offset::Open))?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(line: &str) -> Result<Command<'_>, Malformed> {
        parse_line(line).map(|parsed| parsed.command)
    }

    #[test]
    fn unknown_fields_of_any_type_are_ignored() {
        let line = r#"{"cmd":"cancel","account":"a","id":"1","price":5,"extra":{"x":[1,null]}}"#;
        assert!(matches!(parse(line), Ok(Command::Cancel { .. })));
    }

    #[test]
    fn null_in_an_optional_field_is_malformed() {
        let line = r#"{"cmd":"order","account":"a","id":"1","symbol":"S","side":"buy","type":"limit","price":"1","qty":"1","tif":null}"#;
        assert!(parse(line).is_err());
    }

    #[test]
    fn escaped_strings_are_unescaped() {
        let line = r#"{"cmd":"cancel","account":"\u0061b","id":"x\"y"}"#;
        match parse(line) {
            Ok(Command::Cancel { account, id }) => {
                assert_eq!(account, "ab".into());
                assert_eq!(id, "x\"y");
            }
            other => panic!("unexpected {other:?}"),
        }
    }

    #[test]
    fn integers_must_be_integer_literals() {
        assert_eq!(json_integer("18"), Some(18));
        assert_eq!(json_integer("-3"), Some(-3));
        assert_eq!(json_integer("99999999999999999999999"), Some(i64::MAX));
        for bad in ["1.0", "1e3", "\"1\"", "null", "true", ""] {
            assert_eq!(json_integer(bad), None, "{bad}");
        }
    }

    #[test]
    fn venue_commands_are_not_replay_format_commands() {
        // Well formed as venue commands, but the spec has no such `cmd`: `malformed`.
        for line in [
            r#"{"cmd":"halt","symbol":"BTC-USD"}"#,
            r#"{"cmd":"resume","symbol":"BTC-USD"}"#,
            r#"{"cmd":"cancel_all","account":"alice"}"#,
            r#"{"cmd":"cancel_all","account":"alice","symbol":"BTC-USD","ts":3}"#,
            // An amend to a new whole quantity, as a journal export prints it.
            r#"{"cmd":"replace","account":"alice","id":"a1","qty":"2.5"}"#,
        ] {
            let error = parse(line).unwrap_err();
            assert!(error.0.contains("unknown cmd"), "{line}: {error}");
        }
    }

    #[test]
    fn duplicate_fields_are_malformed() {
        assert!(parse(r#"{"cmd":"cancel","account":"a","account":"b","id":"1"}"#).is_err());
    }
}
