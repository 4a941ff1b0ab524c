//! The server-wide fan-out of the engine's events: the tap (`tap`) takes every durable
//! command's events; the hub (`hub`) turns them into channel messages (`channel`) for
//! the connections subscribed to them, whatever their protocol (WebSocket channels, the
//! binary protocol's fills and order updates), and keeps the recent trades and tickers
//! REST reads (`market`, `ticker`), and the DIFF protocol's quotes (`quote`). It never waits for a client: a connection that
//! does not keep up is closed.

pub mod channel;
pub mod hub;
pub mod market;
pub mod quote;
pub mod tap;
pub mod ticker;
