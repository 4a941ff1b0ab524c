//! Printing events as replay-format JSON lines, straight into a reused `String`:
//! numbers are written from their integer units and scale, strings are escaped only
//! when they need it.

use std::fmt::Write as _;

use crate::command::{AmendQtyKind, Command, Offset, OrderType, Side};
use crate::event::{Event, SettledEvent, TradeEvent};
use crate::exchange::Exchange;
use crate::ids::{AccountId, Seq, TimestampNs};
use crate::num::Decimal;

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
    fn start(out: &'a mut String, kind: &str, seq: Seq) -> Line<'a> {
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
/// `exchange`. `command` is the command the event is of (`None` for a line that did not
/// parse): `accepted` and `rejected` echo the account and client order id it named.
pub fn write_event(
    out: &mut String,
    exchange: &Exchange,
    command: Option<&Command<'_>>,
    event: &Event,
) {
    let echo = |line: &mut Line<'_>| {
        if let Some((account, id)) = command.and_then(Command::order_key) {
            line.string("account", &exchange.echoed_name(account));
            line.string("id", id);
        }
    };
    match event {
        Event::Accepted { seq, .. } => {
            let mut line = Line::start(out, "accepted", *seq);
            match command {
                // A liquidation names an account and no order.
                Some(Command::Liquidate { account, .. }) => {
                    line.string("account", &exchange.echoed_name(account))
                }
                _ => echo(&mut line),
            }
            line.finish();
        }
        Event::Rejected { seq, reason } => {
            let mut line = Line::start(out, "rejected", *seq);
            line.string("reason", reason.code());
            echo(&mut line);
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
        Event::Settled(settled) => write_settled(out, exchange, settled),
    }
}

fn write_settled(out: &mut String, exchange: &Exchange, settled: &SettledEvent) {
    let instrument = exchange.instrument(settled.instrument);
    let settle_decimals =
        instrument.future().map_or(0, |rules| exchange.asset(rules.settle).decimals);
    let mut line = Line::start(out, "settled", settled.seq);
    line.string("account", exchange.account_name(settled.account));
    line.string("symbol", &instrument.symbol);
    line.string("side", settled.side.as_str());
    line.number("qty", settled.qty.0, instrument.qty_decimals);
    line.number("price", settled.price.0, instrument.price_decimals);
    line.number("pnl", settled.pnl.0, settle_decimals);
    line.finish();
}

fn order_ref(line: &mut Line<'_>, exchange: &Exchange, account: AccountId, id: &str) {
    line.string("account", exchange.account_name(account));
    line.string("id", id);
}

fn write_trade(out: &mut String, exchange: &Exchange, trade: &TradeEvent) {
    let instrument = exchange.instrument(trade.instrument);
    let (maker_fee_decimals, taker_fee_decimals, settle_decimals) = match instrument.spot() {
        Some(rules) => {
            let base_decimals = exchange.asset(rules.base).decimals;
            let quote_decimals = exchange.asset(rules.quote).decimals;
            // Each side's fee is in the asset it receives: the buyer's in base, the
            // seller's in quote.
            match trade.taker_side {
                Side::Buy => (quote_decimals, base_decimals, None),
                Side::Sell => (base_decimals, quote_decimals, None),
            }
        }
        None => {
            // A futures contract pays everything in its settle asset.
            let decimals =
                instrument.future().map_or(0, |rules| exchange.asset(rules.settle).decimals);
            (decimals, decimals, Some(decimals))
        }
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
    if let Some(decimals) = settle_decimals {
        line.number("maker_pnl", trade.maker_pnl.0, decimals);
        line.number("taker_pnl", trade.taker_pnl.0, decimals);
    }
    line.finish();
}

/// Appends `command` as one replay-format line (with its newline), with `ts` when
/// given. Parsing the line gives back the same command, except for the venue's own
/// commands (`Command::is_venue_command`), which are printed in the same style
/// (`{"cmd":"halt","symbol":...}`, `{"cmd":"resume","symbol":...}`,
/// `{"cmd":"cancel_all","account":...,"symbol":...}`, `symbol` only when given,
/// `{"cmd":"set_limits","open_orders_per_account":N}`) but are not replay-format
/// commands: parsing them gives `malformed`, as the spec says of an unknown `cmd`.
pub fn write_command(out: &mut String, command: &Command<'_>, ts: Option<TimestampNs>) {
    let mut line = CommandLine { out, first: true };
    match command {
        Command::Asset { asset, decimals } => {
            line.string("cmd", "asset");
            line.string("asset", asset);
            line.integer("decimals", *decimals);
        }
        Command::Instrument(instrument) => {
            line.string("cmd", "instrument");
            line.string("symbol", &instrument.symbol);
            line.string("base", &instrument.base);
            line.string("quote", &instrument.quote);
            line.decimal("tick", instrument.tick);
            line.decimal("lot", instrument.lot);
            line.decimal("min_qty", instrument.min_qty);
            line.decimal("max_qty", instrument.max_qty);
            line.integer("maker_fee_bps", instrument.maker_fee_bps);
            line.integer("taker_fee_bps", instrument.taker_fee_bps);
            line.integer("market_band_bps", instrument.market_band_bps);
        }
        Command::Deposit(transfer) | Command::Withdraw(transfer) => {
            let cmd = if matches!(command, Command::Deposit(_)) { "deposit" } else { "withdraw" };
            line.string("cmd", cmd);
            line.string("account", &transfer.account);
            line.string("asset", &transfer.asset);
            line.decimal("amount", transfer.amount);
        }
        Command::Order(order) => {
            line.string("cmd", "order");
            line.string("account", &order.account.to_string());
            line.string("id", &order.id);
            line.string("symbol", &order.symbol);
            line.string("side", order.side.as_str());
            match order.order_type {
                OrderType::Limit { price } => {
                    line.string("type", "limit");
                    line.decimal("price", price);
                }
                OrderType::Market => line.string("type", "market"),
            }
            // A command naming neither prints as a line naming neither: `malformed`, as
            // the engine rejects it.
            if let Some(qty) = order.size.qty() {
                line.decimal("qty", qty);
            }
            if let Some(quote_qty) = order.size.quote_qty() {
                line.decimal("quote_qty", quote_qty);
            }
            line.string("tif", order.time_in_force.as_str());
            if order.post_only {
                line.key("post_only").push_str("true");
            }
            line.string("stp", order.stp.as_str());
            if order.offset != Offset::Open {
                line.string("offset", order.offset.as_str());
            }
        }
        Command::Cancel { account, id } => {
            line.string("cmd", "cancel");
            line.string("account", &account.to_string());
            line.string("id", id);
        }
        Command::Amend(amend) => {
            // The replay format has no amend to a new whole quantity: `replace` (which
            // `bourse replay` refuses as an unknown `cmd`, as it does the venue's
            // commands), so that no replay takes it for a smaller amend.
            let cmd = match (amend.qty, amend.qty_kind) {
                (Some(_), AmendQtyKind::Total) => "replace",
                _ => "amend",
            };
            line.string("cmd", cmd);
            line.string("account", &amend.account.to_string());
            line.string("id", &amend.id);
            if let Some(price) = amend.price {
                line.decimal("price", price);
            }
            if let Some(qty) = amend.qty {
                line.decimal("qty", qty);
            }
        }
        Command::Future(future) => {
            line.string("cmd", "future");
            line.string("symbol", &future.symbol);
            line.string("settle", &future.settle);
            line.decimal("tick", future.tick);
            line.decimal("lot", future.lot);
            line.decimal("min_qty", future.min_qty);
            line.decimal("max_qty", future.max_qty);
            line.decimal("multiplier", future.multiplier);
            line.decimal("margin", future.margin);
            line.decimal("maker_fee", future.maker_fee);
            line.decimal("taker_fee", future.taker_fee);
            line.integer("market_band_bps", future.market_band_bps);
            if future.close_today {
                line.key("close_today").push_str("true");
            }
        }
        Command::Margin { symbol, margin } => {
            line.string("cmd", "margin");
            line.string("symbol", symbol);
            line.decimal("margin", *margin);
        }
        Command::Settle { symbol, price, is_final } => {
            line.string("cmd", "settle");
            line.string("symbol", symbol);
            line.decimal("price", *price);
            if *is_final {
                line.key("final").push_str("true");
            }
        }
        Command::Liquidate { account, symbol } => {
            line.string("cmd", "liquidate");
            line.string("account", &account.to_string());
            line.string("symbol", symbol);
        }
        Command::Halt { symbol } => {
            line.string("cmd", "halt");
            line.string("symbol", symbol);
        }
        Command::Resume { symbol } => {
            line.string("cmd", "resume");
            line.string("symbol", symbol);
        }
        Command::CancelAll { account, symbol } => {
            line.string("cmd", "cancel_all");
            line.string("account", &account.to_string());
            if let Some(symbol) = symbol {
                line.string("symbol", symbol);
            }
        }
        Command::SetLimits { open_orders_per_account } => {
            line.string("cmd", "set_limits");
            let _ = write!(line.key("open_orders_per_account"), "{open_orders_per_account}");
        }
    }
    if let Some(ts) = ts {
        let _ = write!(line.key("ts"), "{ts}");
    }
    line.out.push_str("}\n");
}

struct CommandLine<'a> {
    out: &'a mut String,
    first: bool,
}

impl CommandLine<'_> {
    fn key(&mut self, key: &str) -> &mut String {
        self.out.push_str(if self.first { "{\"" } else { ",\"" });
        self.first = false;
        self.out.push_str(key);
        self.out.push_str("\":");
        self.out
    }

    fn string(&mut self, key: &str, value: &str) {
        write_json_string(self.key(key), value);
    }

    fn integer(&mut self, key: &str, value: i64) {
        let _ = write!(self.key(key), "{value}");
    }

    fn decimal(&mut self, key: &str, value: Decimal) {
        let _ = write!(self.key(key), "\"{value}\"");
    }
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
    fn a_printed_command_parses_back_to_itself() {
        let lines = [
            r#"{"cmd":"asset","asset":"B\"TC","decimals":8}"#,
            r#"{"cmd":"instrument","symbol":"BTC-USD","base":"BTC","quote":"USD","tick":"0.05","lot":"25","min_qty":"25","max_qty":"1000","maker_fee_bps":1,"taker_fee_bps":2,"market_band_bps":3}"#,
            r#"{"cmd":"withdraw","account":"a","asset":"USD","amount":"-1.5"}"#,
            r#"{"cmd":"order","account":"a","id":"1","symbol":"S","side":"sell","type":"market","qty":"2","tif":"fok","stp":"none","ts":7}"#,
            r#"{"cmd":"order","account":"a","id":"2","symbol":"S","side":"buy","type":"limit","price":"10.5","qty":"2","post_only":true}"#,
            r#"{"cmd":"cancel","account":"a","id":"x"}"#,
            r#"{"cmd":"amend","account":"a","id":"x","qty":"3"}"#,
            r#"{"cmd":"future","symbol":"SHFE.cu2501","settle":"CNY","tick":"10","lot":"1","min_qty":"1","max_qty":"1000","multiplier":"5","margin":"25000","maker_fee":"1.5","taker_fee":"3","market_band_bps":500,"close_today":true}"#,
            r#"{"cmd":"future","symbol":"F","settle":"USDT","tick":"0.5","lot":"0.1","min_qty":"0.1","max_qty":"10","multiplier":"0.01","margin":"2","maker_fee":"0","taker_fee":"0","market_band_bps":0}"#,
            r#"{"cmd":"margin","symbol":"F","margin":"2.5"}"#,
            r#"{"cmd":"settle","symbol":"F","price":"100.5"}"#,
            r#"{"cmd":"settle","symbol":"F","price":"100","final":true,"ts":9}"#,
            r#"{"cmd":"liquidate","account":"a","symbol":"F"}"#,
            r#"{"cmd":"order","account":"a","id":"3","symbol":"F","side":"sell","type":"limit","price":"10","qty":"1","tif":"gfd","offset":"close_today"}"#,
        ];
        for line in lines {
            let parsed = crate::format::parse_line(line).unwrap();
            let mut printed = String::new();
            write_command(&mut printed, &parsed.command, parsed.ts);
            let reparsed = crate::format::parse_line(printed.trim_end()).unwrap();
            assert_eq!(reparsed, parsed, "{printed}");
        }
    }

    #[test]
    fn venue_commands_print_in_the_same_style_but_do_not_parse() {
        use crate::command::AccountRef;
        use crate::ids::AccountId;
        let cases = [
            (
                Command::Halt { symbol: "BTC-USD".into() },
                Some(5),
                r#"{"cmd":"halt","symbol":"BTC-USD","ts":5}"#,
            ),
            (
                Command::Resume { symbol: "B\"S".into() },
                None,
                r#"{"cmd":"resume","symbol":"B\"S"}"#,
            ),
            (
                Command::CancelAll { account: "alice".into(), symbol: Some("ETH-USD".into()) },
                None,
                r#"{"cmd":"cancel_all","account":"alice","symbol":"ETH-USD"}"#,
            ),
            (
                Command::CancelAll { account: AccountRef::Id(AccountId(3)), symbol: None },
                Some(9),
                r##"{"cmd":"cancel_all","account":"#3","ts":9}"##,
            ),
            (
                Command::Amend(crate::command::AmendCommand {
                    account: AccountRef::Id(AccountId(3)),
                    id: "a1".into(),
                    price: Some(crate::num::Decimal::parse("101").unwrap()),
                    qty: Some(crate::num::Decimal::parse("2.5").unwrap()),
                    qty_kind: AmendQtyKind::Total,
                }),
                None,
                r##"{"cmd":"replace","account":"#3","id":"a1","price":"101","qty":"2.5"}"##,
            ),
            (
                Command::SetLimits { open_orders_per_account: 25 },
                None,
                r#"{"cmd":"set_limits","open_orders_per_account":25}"#,
            ),
            (
                Command::SetLimits { open_orders_per_account: u64::MAX },
                Some(3),
                r#"{"cmd":"set_limits","open_orders_per_account":18446744073709551615,"ts":3}"#,
            ),
            (
                Command::SetLimits { open_orders_per_account: 0 },
                None,
                r#"{"cmd":"set_limits","open_orders_per_account":0}"#,
            ),
        ];
        for (command, ts, expected) in cases {
            let mut printed = String::new();
            write_command(&mut printed, &command, ts.map(TimestampNs));
            assert_eq!(printed, format!("{expected}\n"));
            let parsed: serde_json::Value = serde_json::from_str(&printed).unwrap();
            assert!(parsed.is_object());
            // Not replay-format commands: `malformed`, like any unknown `cmd`.
            assert!(crate::format::parse_line(printed.trim_end()).is_err(), "{printed}");
        }
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
