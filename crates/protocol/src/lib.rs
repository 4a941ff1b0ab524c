//! What Bourse's clients and its server must agree on byte for byte, in one place, so
//! that the server (`bourse-server`) and every client (the load generator, tests,
//! anyone's own) compute it with the same code:
//!
//! - `binary`: the binary order-entry protocol's codec (`docs/protocol-binary.md`):
//!   framing, every message's layout, reason codes.
//! - `fix`: FIX 4.4's tag=value codec (framing, checksum, fields read in place, a
//!   writer), for the FIX acceptor and its clients (`docs/fix.md`).
//! - `client_order_id`: the rule every protocol checks a client order id by.
//! - `futures_symbol`: the rule a futures contract's symbol follows (`SHFE.cu2501`),
//!   and its split into exchange and code and join back, as tqsdk's DIFF carries them.
//! - `signing`: the request-signing scheme (`docs/api.md`, Signing): the message a
//!   client signs, HMAC-SHA256, the header names, the paths a login signs and the clock
//!   of signed timestamps.
//!
//! It must never do I/O, start threads or depend on a runtime (no tokio, no axum), and
//! never hold a server's state (which keys exist, what was seen): verifying a request
//! against a key store is the server's. Decoding never trusts its input: bad bytes are
//! an error, never a panic (`fuzz/` checks it).

pub mod binary;
pub mod client_order_id;
pub mod fix;
pub mod futures_symbol;
pub mod signing;
