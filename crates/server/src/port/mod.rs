//! The one port every gateway goes through: order entry (`orders`), every read of the
//! venue (`queries`), what only an operator does (`operator`), the error codes
//! (`error`), who is asking (`auth` checks signatures, `passwords` and `tokens` the
//! logins by password; `login` makes a `session` of them) and the limits every client
//! meets (`policy`), every change to the key store (`key_changes`: through the log, in
//! a cluster), and the services put together (`state`). A gateway reaches the
//! engine only through these.

pub mod auth;
pub mod error;
pub mod key_changes;
pub mod login;
pub mod operator;
pub mod orders;
pub mod passwords;
pub mod policy;
pub mod queries;
pub mod session;
pub mod state;
pub mod tokens;
