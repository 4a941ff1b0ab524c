//! The DIFF gateway (`/ws/diff`): TianQin's "Differential Information Flow for
//! Finance", the protocol tqsdk and the TianQin terminals speak, so that their users
//! trade on Bourse unchanged (`docs/diff.md`). Like every gateway it is a decoder
//! (`request`: a client's packs, checked), a renderer (`trading` for the trade tree;
//! the quotes are the hub's `quote` channel; `symbols` answers the instrument query;
//! `patch` keeps what waits for the client as JSON merge patches) and a listener
//! (`session`), over the one order path. It holds no business state: orders go
//! through order entry, and what it shows comes from the hub and the engine.

pub mod patch;
pub mod request;
pub mod session;
pub mod symbols;
pub mod trading;
