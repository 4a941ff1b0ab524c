//! The one port every gateway goes through: order entry (`orders`), the error codes
//! (`error`), who is asking (`auth` checks signatures, `passwords` and `tokens` the
//! logins by password; `login` makes a `session` of them) and the limits every client
//! meets (`policy`), and the services put together (`state`).

pub mod auth;
pub mod error;
pub mod login;
pub mod orders;
pub mod passwords;
pub mod policy;
pub mod session;
pub mod state;
pub mod tokens;
