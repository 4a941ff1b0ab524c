//! The one port every gateway goes through: order entry (`orders`), every read of the
//! venue (`queries`), what only an operator does (`operator`), the error codes
//! (`error`), who is asking (`auth` checks signatures, `passwords` and `tokens` the
//! logins by password; `login` makes a `session` of them) and the limits every client
//! meets (`policy`), every change to the server's own state, the key store and the
//! futures settings (`records`: through the log, in a cluster), and the services put
//! together (`state`). A gateway reaches the
//! engine only through these.

pub mod auth;
pub mod error;
pub mod login;
pub mod membership;
pub mod operator;
pub mod orders;
pub mod passwords;
pub mod policy;
pub mod queries;
pub mod records;
pub mod session;
pub mod state;
pub mod tokens;
