//! What several gateways speak: a connection's output and deadlines (`connection`),
//! the port's errors as HTTP statuses and JSON (`http_error`), and order entry's JSON (`json`) for REST, its pipelined loop and WebSocket.

pub mod connection;
pub mod http_error;
pub mod json;
