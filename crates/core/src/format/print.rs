//! Printing events as replay-format JSON lines, straight into a reused `String`:
//! numbers are written from their integer units and scale, strings are escaped only
//! when they need it.

use std::fmt::Write as _;

use crate::command::Side;
use crate::event::{Event, TradeEvent};
use crate::exchange::Exchange;
use crate::ids::AccountId;

/// Appends `units * 10^-scale` in plain decimal notation, without trailing zeros.
pub fn write_units(out: &mut String, units: i64, scale: u32) {
    let mut digits = [0u8; 40];
    let mut magnitude = units.unsigned_abs();
    let mut length = 0;
    loop {
        digits[length] = b'0' + (magnitude % 10) as u8;
        magnitude /= 10;
        length += 1;
        if magnitude == 0 {
            break;
        }
    }
    let scale = scale as usize;
    // Leading zeros so that there is at least one integer digit.
    while length <= scale {
        digits[length] = b'0';
        length += 1;
    }
    // digits[..length] is reversed: the fraction is digits[..scale].
    let trailing_zeros = digits[..scale].iter().take_while(|&&digit| digit == b'0').count();
    if units < 0 {
        out.push('-');
    }
    for &digit in digits[scale..length].iter().rev() {
        out.push(digit as char);
    }
    if trailing_zeros < scale {
        out.push('.');
        for &digit in digits[trailing_zeros..scale].iter().rev() {
            out.push(digit as char);
        }
    }
}

/// Appends `text` as a JSON string literal.
pub fn write_json_string(out: &mut String, text: &str) {
    let plain = text.bytes().all(|byte| byte >= 0x20 && byte != b'"' && byte != b'\\');
    if plain {
        out.push('"');
        out.push_str(text);
        out.push('"');
    } else {
        out.push_str(&serde_json::Value::String(text.to_owned()).to_string());
    }
}

struct Line<'a> {
    out: &'a mut String,
}

impl<'a> Line<'a> {
    fn start(out: &'a mut String, kind: &str, seq: u64) -> Line<'a> {
        out.push_str("{\"ev\":\"");
        out.push_str(kind);
        out.push_str("\",\"seq\":");
        let _ = write!(out, "{seq}");
        Line { out }
    }

    fn key(&mut self, key: &str) -> &mut String {
        self.out.push_str(",\"");
        self.out.push_str(key);
        self.out.push_str("\":");
        self.out
    }

    fn string(&mut self, key: &str, value: &str) {
        write_json_string(self.key(key), value);
    }

    fn number(&mut self, key: &str, units: i64, scale: u32) {
        let out = self.key(key);
        out.push('"');
        write_units(out, units, scale);
        out.push('"');
    }

    fn finish(self) {
        self.out.push_str("}\n");
    }
}

/// Appends `event` as one JSON line (with its newline), resolving ids through
/// `exchange`.
pub fn write_event(out: &mut String, exchange: &Exchange, event: &Event) {
    match event {
        Event::Accepted { seq, order } => {
            let mut line = Line::start(out, "accepted", *seq);
            if let Some(order) = order {
                line.string("account", &order.account);
                line.string("id", &order.id);
            }
            line.finish();
        }
        Event::Rejected { seq, reason, order } => {
            let mut line = Line::start(out, "rejected", *seq);
            line.string("reason", reason.code());
            if let Some(order) = order {
                line.string("account", &order.account);
                line.string("id", &order.id);
            }
            line.finish();
        }
        Event::Trade(trade) => write_trade(out, exchange, trade),
        Event::Done { seq, instrument, account, id, reason, filled } => {
            let mut line = Line::start(out, "done", *seq);
            order_ref(&mut line, exchange, *account, id);
            line.string("reason", reason.code());
            line.number("filled", filled.0, exchange.instrument(*instrument).qty_decimals);
            line.finish();
        }
        Event::Amended { seq, instrument, account, id, price, qty } => {
            let instrument = exchange.instrument(*instrument);
            let mut line = Line::start(out, "amended", *seq);
            order_ref(&mut line, exchange, *account, id);
            line.number("price", price.0, instrument.price_decimals);
            line.number("qty", qty.0, instrument.qty_decimals);
            line.finish();
        }
    }
}

fn order_ref(line: &mut Line<'_>, exchange: &Exchange, account: AccountId, id: &str) {
    line.string("account", exchange.account_name(account));
    line.string("id", id);
}

fn write_trade(out: &mut String, exchange: &Exchange, trade: &TradeEvent) {
    let instrument = exchange.instrument(trade.instrument);
    let base_decimals = exchange.asset(instrument.spot.base).decimals;
    let quote_decimals = exchange.asset(instrument.spot.quote).decimals;
    // Each side's fee is in the asset it receives: the buyer's in base, the seller's
    // in quote.
    let (maker_fee_decimals, taker_fee_decimals) = match trade.taker_side {
        Side::Buy => (quote_decimals, base_decimals),
        Side::Sell => (base_decimals, quote_decimals),
    };
    let mut line = Line::start(out, "trade", trade.seq);
    line.string("symbol", &instrument.symbol);
    line.number("price", trade.price.0, instrument.price_decimals);
    line.number("qty", trade.qty.0, instrument.qty_decimals);
    line.string("taker_side", trade.taker_side.as_str());
    line.string("maker_account", exchange.account_name(trade.maker_account));
    line.string("maker_id", &trade.maker_id);
    line.string("taker_account", exchange.account_name(trade.taker_account));
    line.string("taker_id", &trade.taker_id);
    line.number("maker_fee", trade.maker_fee.0, maker_fee_decimals);
    line.number("taker_fee", trade.taker_fee.0, taker_fee_decimals);
    line.finish();
}

#[cfg(test)]
mod tests {
    use super::*;

    fn units(units: i64, scale: u32) -> String {
        let mut out = String::new();
        write_units(&mut out, units, scale);
        out
    }

    #[test]
    fn writes_exact_plain_decimals() {
        assert_eq!(units(0, 0), "0");
        assert_eq!(units(0, 8), "0");
        assert_eq!(units(150, 2), "1.5");
        assert_eq!(units(5, 3), "0.005");
        assert_eq!(units(-5, 3), "-0.005");
        assert_eq!(units(1200, 0), "1200");
        assert_eq!(units(i64::MAX, 18), "9.223372036854775807");
        assert_eq!(units(i64::MIN, 0), "-9223372036854775808");
        assert_eq!(units(100_000, 2), "1000");
    }

    #[test]
    fn escapes_strings_that_need_it() {
        let mut out = String::new();
        write_json_string(&mut out, "a\"b\\c\n");
        assert_eq!(out, r#""a\"b\\c\n""#);
        out.clear();
        write_json_string(&mut out, "plain-1");
        assert_eq!(out, "\"plain-1\"");
    }
}
