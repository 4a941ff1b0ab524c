//! The gateways: each decodes its protocol's bytes into the port's requests, renders
//! the port's answers and listens on its socket. None holds business state or reaches
//! the engine but through the port.

pub mod binance;
pub mod diff;
pub mod fix;
pub mod rest;
pub mod router;
pub mod shared;
pub mod tcp;
pub mod ui;
pub mod ws;

/// `docs/api.md`'s table of error codes is the gateways' own maps, rendered: this
/// fails when they drift apart, and prints the table as it should be.
#[cfg(test)]
mod error_table {
    use crate::port::error::{ApiError, ErrorCode};

    const BEGIN: &str = "<!-- error codes: begin (generated from the gateways' maps by a test) -->";
    const END: &str = "<!-- error codes: end -->";

    fn table() -> String {
        let mut table = String::from(
            "| code | REST, WebSocket (HTTP status) | binary TCP | FIX (OrdRejReason) | Binance (status, code) | DIFF (`notify` level) |\n|---|---|---|---|---|---|\n",
        );
        for code in ErrorCode::all() {
            let binance = super::binance::error::BinanceError::from(ApiError::new(code, "-"));
            table.push_str(&format!(
                "| `{}` | {} | {} | {} | {} {} | {} |\n",
                code.as_str(),
                super::shared::http_error::status(code).as_u16(),
                super::tcp::wire_code(code),
                super::fix::orders::ord_rej_reason(code),
                binance.status.as_u16(),
                binance.code,
                super::diff::session::notify_level(code),
            ));
        }
        table
    }

    #[test]
    fn the_docs_table_of_error_codes_is_the_gateways_maps() {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/api.md");
        let docs = std::fs::read_to_string(path).expect("docs/api.md");
        let inside = docs
            .split_once(BEGIN)
            .and_then(|(_, after)| after.split_once(END))
            .map(|(inside, _)| inside.trim().to_string());
        let expected = table();
        assert_eq!(
            inside.as_deref(),
            Some(expected.trim()),
            "docs/api.md's error codes should read, between its markers:\n{expected}"
        );
    }
}
