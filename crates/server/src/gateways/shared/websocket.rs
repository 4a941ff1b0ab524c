//! What the WebSocket gateways share (`ws`, and `diff` for tqsdk): the upgrade from
//! HTTP, with the limits of every WebSocket connection; what wakes a connection
//! (`wake`), sending within the write deadline (`send`), and its end (`close`). Each
//! gateway owns only what its messages mean.

use std::sync::Arc;

use axum::extract::ws::{CloseFrame, Message, Utf8Bytes, WebSocket, WebSocketUpgrade};
use axum::response::Response;
use tokio::sync::mpsc;

use crate::gateways::shared::connection::WRITE_TIMEOUT;
use crate::link::LaneReleases;
use crate::port::error::{ApiError, ErrorCode};
use crate::port::state::Shared;
use crate::services::feed::channel::{FeedMessage, HubCommand, Kill};

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

/// What woke a WebSocket connection (`wake`).
pub enum Wake {
    /// Its lane released the outcomes of some of its requests.
    Released(Arc<bourse_engine::Released>),
    /// A text message from the client.
    Text(Utf8Bytes),
    /// A binary message, which neither WebSocket protocol speaks.
    Binary,
    /// A message from the hub for it.
    Feed(Arc<FeedMessage>),
    /// The connection is over: the client closed it (`None`), or for the reason given.
    End(Option<ErrorCode>),
}

/// Waits for what wakes a WebSocket connection next: its lane's outcomes, a message
/// from the client (only while `accepting`: a connection with its limit of requests in
/// flight is not read, so TCP flow control holds the client back), one from the hub,
/// or its kill switch. Pings and pongs are the socket's own and wake nothing.
pub async fn wake(
    socket: &mut WebSocket,
    releases: &mut LaneReleases,
    feed: &mut mpsc::Receiver<Arc<FeedMessage>>,
    kill: &Kill,
    accepting: bool,
) -> Wake {
    loop {
        tokio::select! {
            Some(released) = releases.recv() => return Wake::Released(released),
            incoming = socket.recv(), if accepting => match incoming {
                Some(Ok(Message::Text(text))) => return Wake::Text(text),
                Some(Ok(Message::Binary(_))) => return Wake::Binary,
                Some(Ok(Message::Close(_))) | None => return Wake::End(None),
                Some(Ok(Message::Ping(_) | Message::Pong(_))) => {}
                Some(Err(_)) => return Wake::End(Some(ErrorCode::ProtocolError)),
            },
            queued = feed.recv() => match queued {
                Some(message) => return Wake::Feed(message),
                None => return Wake::End(None),
            },
            _ = kill.notify.notified() => return Wake::End(kill.reason()),
        }
    }
}

/// Sends one message, within `WRITE_TIMEOUT`; `false` if it could not be (the
/// connection is over: a slow consumer, or gone).
pub async fn send(socket: &mut WebSocket, text: String) -> bool {
    matches!(
        tokio::time::timeout(WRITE_TIMEOUT, socket.send(Message::Text(text.into()))).await,
        Ok(Ok(()))
    )
}

/// The end of every WebSocket connection: a close frame saying `reason` (none when the
/// client closed it), then the hub forgets connection `id` and `/metrics` counts the
/// `gateway`'s connection closed.
pub async fn close(
    mut socket: WebSocket,
    reason: Option<ErrorCode>,
    (state, id, gateway): (&Shared, u64, &'static str),
) {
    let said = reason.unwrap_or(ErrorCode::Closed).as_str();
    tracing::debug!(connection = id, reason = said, gateway, "websocket closed");
    if let Some(reason) = reason {
        let frame = CloseFrame { code: 1008, reason: reason.as_str().into() };
        let _ = tokio::time::timeout(WRITE_TIMEOUT, socket.send(Message::Close(Some(frame)))).await;
    }
    let _ = state.hub.send(HubCommand::Disconnected { connection: id }).await;
    state.metrics.connection_closed(gateway);
}
