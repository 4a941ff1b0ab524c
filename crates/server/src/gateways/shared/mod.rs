//! What several gateways speak, so that none imports another: a connection's output
//! and deadlines (`connection`), the port's errors as HTTP statuses and JSON
//! (`http_error`), the WebSocket upgrade (`websocket`), and order entry's JSON
//! (`json`) for REST, its pipelined loop and WebSocket. Nothing here decides what a
//! request may do: that is the port's.

pub mod connection;
pub mod http_error;
pub mod json;
pub mod socket_loop;
pub mod websocket;
