//! What runs beside the engine and below the port: the fan-out of the engine's events
//! to connections (`feed`), the market-data publisher (`multicast`), the history's
//! lookups and SQL (`history_access`) and the futures desk's schedule and risk
//! (`clearing`). A service never decodes or renders a gateway's protocol.

pub mod clearing;
pub mod feed;
pub mod history_access;
pub mod multicast;
