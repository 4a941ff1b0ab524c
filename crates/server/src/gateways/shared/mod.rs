//! What several gateways speak: a connection's output and deadlines (`connection`),
//! and order entry's JSON (`json`) for REST, its pipelined loop and WebSocket.

pub mod connection;
pub mod json;
