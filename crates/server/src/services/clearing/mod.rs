//! The futures services around the engine: what a futures venue runs beside matching.
//! The engine (`bourse_core::futures`) owns positions, margin and settlement; these
//! decide *when* and *at what price* to send its commands, and show its state:
//!
//! - `settings`: what the engine does not keep about a contract (margin as a ratio of
//!   the settlement price, the price the operator posted for the next settlement, the
//!   last settlement price the venue used), in a small file beside the key store;
//! - `settlement`: settling a contract (on demand or on the daily schedule) at the
//!   posted price or the mark price, then restating a ratio margin (`margin`), so the
//!   core stays exact;
//! - `risk`: the risk process, which watches every account's equity against a
//!   maintenance level and sends `liquidate` through the engine like any command;
//! - `view`: the QIFI account and positions as JSON, from `bourse_core::account_view`.
//!
//! None of them holds a balance or a position: every decision is read from the engine,
//! and every change goes through it as a journaled command.

pub mod risk;
pub mod settings;
pub mod settlement;
pub mod view;
