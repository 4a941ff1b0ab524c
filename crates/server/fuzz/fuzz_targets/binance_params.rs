//! Arbitrary bytes as a Binance request's query string and form body (split at the
//! first NUL byte): what the Binance gateway decodes from anyone on the network.
//! Parsing must never panic; an error has one of Binance's parameter codes; what
//! parses answers every lookup; the signed payload never holds the signature and is
//! never longer than what came.

#![no_main]

use bourse_server::gateways::binance::params::{signed_payload, Params};
use libfuzzer_sys::fuzz_target;

/// The codes a malformed parameter list may get.
const CODES: [i32; 5] = [-1100, -1101, -1102, -1104, -1105];

fuzz_target!(|bytes: &[u8]| {
    let (query, body) = match bytes.iter().position(|byte| *byte == 0) {
        Some(split) => (&bytes[..split], &bytes[split + 1..]),
        None => (bytes, &[][..]),
    };
    let Ok(query) = std::str::from_utf8(query) else { return };
    if let Some((payload, signature)) = signed_payload(query, body) {
        assert!(payload.len() + signature.len() <= query.len() + body.len());
        assert!(!signature.contains('&'));
    }
    match Params::parse(query, body) {
        Err(error) => assert!(CODES.contains(&error.code), "unexpected code {}", error.code),
        Ok(params) => {
            for name in ["symbol", "timestamp", "limit", "signature", ""] {
                let value = params.get(name);
                assert_eq!(params.required(name).ok(), value);
                if let Err(error) = params.number(name) {
                    assert_eq!(error.code, -1100);
                }
            }
            if let Err(error) = params.only(&["symbol", "limit"]) {
                assert_eq!(error.code, -1104);
            }
        }
    }
});
