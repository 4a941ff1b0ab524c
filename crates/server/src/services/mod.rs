//! What runs beside the engine and below the port: the fan-out of the engine's events
//! to connections (`feed`), the candles (`candles`, whether or not the multicast feed
//! runs), the multicast feed's publisher (`multicast`), the history's lookups and SQL
//! (`history_access`) and the futures desk's schedule and risk (`clearing`). A service
//! never decodes or renders a gateway's protocol.

pub mod candles;
pub mod clearing;
pub mod feed;
pub mod history_access;
pub mod multicast;
