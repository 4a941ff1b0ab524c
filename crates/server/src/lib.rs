//! The network server: it turns the durable engine into an exchange that clients reach
//! over REST (and, as they come, WebSocket and binary TCP). It owns translation
//! (requests to engine commands, events to responses), authentication (API keys,
//! signatures, limits) and operations (health, shutdown). It never holds business
//! state: balances, orders and their history are the engine's (`bourse_core::venue`),
//! read through queries, so a restart from the journal gives every client exactly the
//! same answers.

pub mod config;
pub mod demo;
pub mod entry;
pub mod history;
pub mod http;
pub mod keys;
pub mod link;
pub mod md;
pub mod metrics;
pub mod render;
pub mod rest;
pub mod server;
pub mod tcp;
pub mod ws;

pub use config::{Overrides, ServeConfig};
pub use server::{start, start_with_sql, RunningServer, ServeError, StartNotes};

/// The server's clock, in milliseconds since the Unix epoch (request signing).
pub fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |elapsed| elapsed.as_millis() as u64)
}
