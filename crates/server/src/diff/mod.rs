//! The DIFF protocol (tqsdk's WebSocket): the connection, its tree and its pure parts.

pub mod patch;
pub mod request;
