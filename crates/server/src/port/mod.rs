//! The one port every gateway goes through: order entry (`orders`), the error codes
//! (`error`), authentication (`auth`, `passwords`, `tokens`) and the services put
//! together (`state`).

pub mod auth;
pub mod error;
pub mod orders;
pub mod passwords;
pub mod state;
pub mod tokens;
