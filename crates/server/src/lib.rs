//! The network server: it turns the durable engine into an exchange that clients reach
//! over REST, WebSocket, binary TCP, FIX, DIFF (tqsdk) and a Binance-compatible REST
//! (ccxt), with a web screen. It owns translation (requests to engine commands,
//! outcomes to answers), authentication and limits (API keys, signatures, passwords,
//! rates), the fan-out of the engine's events, and operations (health, metrics,
//! shutdown). It never holds business state: balances, orders and their history are
//! the engine's (`bourse_core::venue`), read through queries, so a restart from the
//! journal gives every client exactly the same answers.
//!
//! Modules import downward only, in this order (a test checks it,
//! `crates/bourse/tests/module_layers.rs`):
//!
//! - foundation: `config`, `cluster` (the nodes of a cluster, as clients reach them), `files`, `keys`, `link` (the one way into the engine),
//!   `metrics`, `reference` and `directory` (the engine's definitions, cached),
//!   `render` (the JSON shapes of Bourse's own API);
//! - `services`: what runs beside the engine: `feed` (the tap, the hub, recent
//!   trades), `multicast` (the market-data publisher and its listener),
//!   `history_access` (the history's lookups and SQL), `clearing` (futures:
//!   settlement, the risk process, the account view);
//! - `port`: the one port every gateway goes through: orders, queries, the error
//!   codes, authentication and the limits of every key and login;
//! - `gateways`: each a decoder, a renderer and a listener over the port: `rest` (with
//!   its pipelined order-entry loop), `ws`, `tcp`, `fix`, `diff`, `binance`, `ui`;
//!   `shared` holds what several of them speak, `router` the HTTP routes;
//! - `demo`, `server` (start-up and shutdown).

pub mod cluster;
pub mod config;
pub mod directory;
pub mod files;
pub mod keys;
pub mod link;
pub mod metrics;
pub mod reference;
pub mod render;

pub mod services;

pub mod port;

pub mod gateways;

pub mod demo;
pub mod server;

pub use config::{Overrides, ServeConfig};
pub use server::{start, start_with_sql, RunningServer, ServeError, StartNotes};
