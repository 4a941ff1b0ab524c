//! Arbitrary bytes as a DIFF client's WebSocket message: what the DIFF gateway decodes
//! from anyone on the network. Decoding must never panic; what decodes must hold
//! together (an error has a known code; an order's terms either map onto Bourse's or
//! are refused with a code; an instrument query's text is read, or refused, without a
//! panic, and its answer is written).

#![no_main]

use std::borrow::Cow;

use bourse_server::gateways::diff::request::{decode, order_terms, to_new_order, Pack, SYMBOLS_MAX};
use bourse_server::gateways::diff::symbols;
use bourse_server::port::error::ErrorCode;
use libfuzzer_sys::fuzz_target;

const CODES: [ErrorCode; 4] =
    [ErrorCode::MALFORMED, ErrorCode::UnknownAid, ErrorCode::TooManySymbols, ErrorCode::Unsupported];

fuzz_target!(|bytes: &[u8]| {
    let Ok(text) = std::str::from_utf8(bytes) else { return };
    match decode(text) {
        Err(error) => assert!(CODES.contains(&error.code), "unknown code {}", error.code),
        Ok(Pack::SubscribeQuote { symbols }) => assert!(symbols.len() <= SYMBOLS_MAX),
        Ok(Pack::SetChart(chart)) => {
            assert!(chart.symbols.len() <= SYMBOLS_MAX);
            assert!(chart.duration_ns >= 0 && chart.view_width >= 1);
        }
        Ok(Pack::InsertOrder(order)) => {
            assert!(order.volume > 0);
            let terms = order_terms(&order);
            if let Err(error) = &terms {
                assert!(CODES.contains(&error.code), "unknown code {}", error.code);
            }
            let new_order = to_new_order(&order, Cow::Owned(order.symbol()), 2, None);
            assert_eq!(terms.is_ok(), new_order.is_ok());
        }
        Ok(Pack::InsQuery(query)) => match symbols::parse(&query.query, query.variables.as_ref()) {
            Ok(read) => {
                let answer = symbols::answer(&read, &[]);
                assert!(answer["result"][read.result_key.as_str()].is_array());
            }
            Err(error) => {
                assert!(CODES.contains(&error.code), "unknown code {}", error.code);
                let _ = symbols::error_answer(&query.query, query.variables.as_ref(), &error);
            }
        },
        Ok(_) => {}
    }
});
