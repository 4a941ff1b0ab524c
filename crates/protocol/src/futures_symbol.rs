//! The futures symbol rule: `EXCHANGE.code`, the way China's exchanges and the clients
//! traders already run (tqsdk, CTP-era terminals) name contracts: `SHFE.cu2501`,
//! `CFFEX.IF2501`, `CZCE.SR501`, `DCE.m2505`, `INE.sc2501`, `GFEX.lc2501`. tqsdk refuses
//! a symbol without an exchange it knows, and its DIFF protocol carries the two parts
//! apart (`exchange_id`, `instrument_id`), so every contract the venue declares is named
//! this way (`POST /v1/admin/futures` checks with `split`), and a gateway splits and
//! joins with `split` and `join`. Spot instruments are not named by it (`BTC-USD`).
//!
//! - the exchange: 1 to `EXCHANGE_BYTES_MAX` upper-case ASCII letters;
//! - one dot;
//! - the code: ASCII letters, digits, `-` or `_`, at least one;
//! - the whole: at most `SYMBOL_BYTES_MAX` bytes, the binary protocol's symbol field
//!   (`binary::SYMBOL_BYTES`), so a contract's symbol travels whole in it (and in the
//!   market-data feed's directory, which the server asserts is no narrower).
//!
//! Every character is one a URL path, a file name and JSON carry as it is.

use std::fmt;

/// The longest exchange part, in bytes (letters).
pub const EXCHANGE_BYTES_MAX: usize = 8;
/// The longest futures symbol, in bytes: as wide as the binary protocol's symbol field.
pub const SYMBOL_BYTES_MAX: usize = crate::binary::SYMBOL_BYTES;
/// The longest code: the whole less the shortest exchange (one letter) and the dot.
pub const CODE_BYTES_MAX: usize = SYMBOL_BYTES_MAX - 2;
/// The separator between the exchange and the code.
pub const SEPARATOR: char = '.';
/// A symbol that follows the rule, for messages.
pub const EXAMPLE: &str = "SHFE.cu2501";

// The longest exchange leaves room for a code of a contract month at least
// (`cu2501`), so no exchange the rule allows is unusable.
const _: () = assert!(EXCHANGE_BYTES_MAX + 1 + "cu2501".len() <= SYMBOL_BYTES_MAX);

/// A futures symbol's two parts, as DIFF names them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FuturesSymbol<'a> {
    /// `SHFE` of `SHFE.cu2501`.
    pub exchange_id: &'a str,
    /// `cu2501` of `SHFE.cu2501`.
    pub instrument_id: &'a str,
}

impl fmt::Display for FuturesSymbol<'_> {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(formatter, "{}{SEPARATOR}{}", self.exchange_id, self.instrument_id)
    }
}

/// Why a symbol does not follow the rule.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SymbolError {
    /// No `.`: no exchange.
    NoExchange,
    /// The exchange part is empty, too long, or not upper-case letters.
    Exchange,
    /// The code is empty or holds a character other than letters, digits, `-`, `_`.
    Code,
    /// Longer than `SYMBOL_BYTES_MAX`.
    TooLong,
}

impl SymbolError {
    /// What is wrong, in a few words.
    pub fn reason(self) -> &'static str {
        match self {
            SymbolError::NoExchange => "no exchange prefix",
            SymbolError::Exchange => "the exchange is empty, too long or not upper-case letters",
            SymbolError::Code => "the code is empty or holds other than letters, digits, - and _",
            SymbolError::TooLong => "too long",
        }
    }
}

impl fmt::Display for SymbolError {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            formatter,
            "{}: a futures symbol is EXCHANGE.code (the exchange 1 to {EXCHANGE_BYTES_MAX} \
             upper-case letters, the code letters, digits, '-' or '_', at most \
             {SYMBOL_BYTES_MAX} bytes in all), e.g. {EXAMPLE}",
            self.reason()
        )
    }
}

impl std::error::Error for SymbolError {}

fn valid_exchange(exchange: &str) -> bool {
    (1..=EXCHANGE_BYTES_MAX).contains(&exchange.len())
        && exchange.bytes().all(|byte| byte.is_ascii_uppercase())
}

fn valid_code(code: &str) -> bool {
    !code.is_empty()
        && code.bytes().all(|byte| byte.is_ascii_alphanumeric() || byte == b'-' || byte == b'_')
}

/// The exchange and the code of a futures symbol (`SHFE.cu2501`: `SHFE`, `cu2501`), if
/// it follows the rule.
pub fn split(symbol: &str) -> Result<FuturesSymbol<'_>, SymbolError> {
    let (exchange_id, instrument_id) =
        symbol.split_once(SEPARATOR).ok_or(SymbolError::NoExchange)?;
    check(exchange_id, instrument_id)?;
    Ok(FuturesSymbol { exchange_id, instrument_id })
}

/// The futures symbol of an exchange and a code (`SHFE`, `cu2501`: `SHFE.cu2501`), if
/// they make one that follows the rule.
pub fn join(exchange_id: &str, instrument_id: &str) -> Result<String, SymbolError> {
    check(exchange_id, instrument_id)?;
    Ok(FuturesSymbol { exchange_id, instrument_id }.to_string())
}

/// Whether `symbol` follows the rule.
pub fn is_valid(symbol: &str) -> bool {
    split(symbol).is_ok()
}

fn check(exchange_id: &str, instrument_id: &str) -> Result<(), SymbolError> {
    if !valid_exchange(exchange_id) {
        return Err(SymbolError::Exchange);
    }
    if !valid_code(instrument_id) {
        return Err(SymbolError::Code);
    }
    if exchange_id.len() + SEPARATOR.len_utf8() + instrument_id.len() > SYMBOL_BYTES_MAX {
        return Err(SymbolError::TooLong);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_symbols_of_chinas_exchanges_split_into_exchange_and_code_and_join_back() {
        for (symbol, exchange_id, instrument_id) in [
            ("SHFE.cu2501", "SHFE", "cu2501"),
            ("CFFEX.IF2501", "CFFEX", "IF2501"),
            ("CZCE.SR501", "CZCE", "SR501"),
            ("DCE.m2505", "DCE", "m2505"),
            ("INE.sc2501", "INE", "sc2501"),
            ("GFEX.lc2501", "GFEX", "lc2501"),
        ] {
            let parts = split(symbol).unwrap();
            assert_eq!(parts, FuturesSymbol { exchange_id, instrument_id });
            assert_eq!(parts.to_string(), symbol);
            assert_eq!(join(exchange_id, instrument_id).as_deref(), Ok(symbol));
            assert!(is_valid(symbol));
        }
    }

    #[test]
    fn every_part_of_the_rule_refuses_with_its_reason() {
        for (symbol, error) in [
            ("cu2501", SymbolError::NoExchange),
            ("BTC-USD", SymbolError::NoExchange),
            ("", SymbolError::NoExchange),
            (".cu2501", SymbolError::Exchange),
            ("shfe.cu2501", SymbolError::Exchange),
            ("SHFe.cu2501", SymbolError::Exchange),
            ("SH1.cu2501", SymbolError::Exchange),
            ("ABCDEFGHI.cu", SymbolError::Exchange),
            ("SHFE.", SymbolError::Code),
            ("SHFE.cu.2501", SymbolError::Code),
            ("SHFE.cu 2501", SymbolError::Code),
            ("SHFE.cu/2501", SymbolError::Code),
            ("SHFE.cué", SymbolError::Code),
            ("SHFE.cu2501C72000", SymbolError::TooLong),
            ("CFFEX.IO2501-C-4000", SymbolError::TooLong),
        ] {
            assert_eq!(split(symbol), Err(error), "{symbol:?}");
            let message = error.to_string();
            assert!(message.contains(error.reason()) && message.contains(EXAMPLE), "{message}");
        }
        assert_eq!(join("shfe", "cu2501"), Err(SymbolError::Exchange));
        assert_eq!(join("SHFE", "cu.2501"), Err(SymbolError::Code));
        assert_eq!(join("SHFE", ""), Err(SymbolError::Code));
    }

    #[test]
    fn the_longest_symbol_is_as_wide_as_the_binary_protocols_field() {
        let longest_exchange = "E".repeat(EXCHANGE_BYTES_MAX);
        let code = "c".repeat(SYMBOL_BYTES_MAX - EXCHANGE_BYTES_MAX - 1);
        let longest = join(&longest_exchange, &code).unwrap();
        assert_eq!(longest.len(), crate::binary::SYMBOL_BYTES);
        assert_eq!(join(&longest_exchange, &format!("{code}c")), Err(SymbolError::TooLong));
        let longest_code = "c".repeat(CODE_BYTES_MAX);
        assert_eq!(join("E", &longest_code).map(|symbol| symbol.len()), Ok(SYMBOL_BYTES_MAX));
        assert_eq!(join("E", &format!("{longest_code}c")), Err(SymbolError::TooLong));
        assert_eq!(
            join(&"E".repeat(EXCHANGE_BYTES_MAX + 1), "c"),
            Err(SymbolError::Exchange),
            "an exchange of 9 letters, though the whole would fit"
        );
    }

    #[test]
    fn a_symbol_that_follows_the_rule_travels_whole_in_a_new_order_frame() {
        use crate::binary::{decode_client_borrowed, ClientMessage, NewOrder, WireDecimal};
        let symbol = "CFFEX.IF2501-x_";
        assert!(is_valid(symbol));
        let order = ClientMessage::NewOrder(NewOrder {
            request_id: 1,
            client_order_id: "PYSDK_insert_0123456789abcdef0123456789abcdef",
            symbol,
            side: 1,
            kind: 1,
            time_in_force: 4,
            post_only: false,
            stp: 4,
            offset: 0,
            price: WireDecimal { mantissa: 40_002, scale: 1 },
            qty: WireDecimal { mantissa: 1, scale: 0 },
        });
        let frame = order.encode();
        assert_eq!(decode_client_borrowed(&frame[2..]), Ok(order));
    }
}
