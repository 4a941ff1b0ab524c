//! The network server: it turns the durable engine into an exchange that clients reach
//! over REST, WebSocket and binary TCP. It owns translation (requests to engine
//! commands, outcomes to answers), authentication (API keys, signatures, limits), the
//! fan-out of the engine's events, and operations (health, metrics, shutdown). It never
//! holds business state: balances, orders and their history are the engine's
//! (`bourse_core::venue`), read through queries, so a restart from the journal gives
//! every client exactly the same answers.
//!
//! Modules import downward only, in this order (a test checks it):
//!
//! - foundation: `config`, `files`, `keys`, `link` (the one way into the engine);
//! - shared values: `reference`, `render`, `error`, `directory`, `auth`, `metrics`,
//!   `connection`;
//! - services: `feed` (the tap, the hub, recent trades), `md` (the market-data
//!   publisher), `history`, `futures` (settlement, the risk process, the account view),
//!   `order_entry` (one order path for every gateway), `json` (order entry's JSON, for
//!   the gateways that speak it), `passwords` (accounts' passwords: setting and
//!   checking them, for every login by name and password), `tokens` (the login tokens
//!   tqsdk holds);
//! - `state`: the services put together;
//! - gateways, each a decoder, a renderer and a listener over `order_entry`: `http`
//!   (the pipelined order-entry loop), `rest`, `ws`, `diff` (the DIFF protocol's
//!   WebSocket, which tqsdk speaks), `binance` (Binance's `/api/v3/` for spot, which
//!   ccxt speaks), `tcp`, `fix` (FIX 4.4 order entry, its sessions and their store),
//!   `ui` (the web screens' files, embedded);
//! - `demo`, `server` (start-up and shutdown).

pub mod config;
pub mod files;
pub mod keys;
pub mod link;

pub mod auth;
pub mod connection;
pub mod directory;
pub mod error;
pub mod metrics;
pub mod reference;
pub mod render;

pub mod feed;
pub mod futures;
pub mod history;
pub mod json;
pub mod md;
pub mod order_entry;
pub mod passwords;
pub mod tokens;

pub mod state;

pub mod binance;
pub mod diff;
pub mod fix;
pub mod http;
pub mod rest;
pub mod tcp;
pub mod ui;
pub mod ws;

pub mod demo;
pub mod server;

pub use config::{Overrides, ServeConfig};
pub use server::{start, start_with_sql, RunningServer, ServeError, StartNotes};
