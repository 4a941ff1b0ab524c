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

// The server's clock (`crate::now_ms()`) is the one signed timestamps are read by.
use bourse_protocol::signing::now_ms;
