//! What the WebSocket gateways share (`ws`, and `diff` for tqsdk): the upgrade from
//! HTTP, with the limits of every WebSocket connection.

use axum::extract::ws::{WebSocket, WebSocketUpgrade};
use axum::response::Response;

use crate::port::error::ApiError;

/// Bytes read from a connection at a time, at most.
pub const READ_BUFFER_BYTES: usize = 8 * 1024;

/// A WebSocket upgrade request as axum hands it over (a rejection when it is none).
pub type Upgrade =
    Result<WebSocketUpgrade, axum::extract::ws::rejection::WebSocketUpgradeRejection>;

/// Upgrades to a WebSocket whose messages are at most `message_bytes_max`, run by
/// `run`; a request that is no upgrade gets `malformed` (every WebSocket gateway's).
pub fn accept<F, R>(upgrade: Upgrade, message_bytes_max: usize, run: F) -> Response
where
    F: FnOnce(WebSocket) -> R + Send + 'static,
    R: std::future::Future<Output = ()> + Send + 'static,
{
    let upgrade = match upgrade {
        Ok(upgrade) => upgrade,
        Err(rejection) => {
            let message =
                format!("{} (a WebSocket upgrade request is needed)", rejection.body_text());
            return axum::response::IntoResponse::into_response(ApiError::malformed(message));
        }
    };
    upgrade
        // (tungstenite zeroes its whole read buffer before every read attempt, and a
        // connection's loop tries one whenever it wakes to send: 128 KiB by default
        // made a fan-out to 2,000 subscribers spend 64% of its time in memset.)
        .read_buffer_size(READ_BUFFER_BYTES)
        .max_message_size(message_bytes_max)
        .max_frame_size(message_bytes_max)
        .on_upgrade(run)
}
