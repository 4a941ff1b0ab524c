//! The feed's recovery services, on tokio, each asking the publisher thread (so their
//! answers are consistent with one point of the feed):
//!
//! - **Snapshot** (TCP): a client connects; the server writes every book as framed
//!   messages (`frame`: a u16 big-endian length, then the message) from
//!   `SnapshotStart { feed_seq }` to `SnapshotEnd`, and closes. The books are those
//!   after feed message `feed_seq`: apply the feed's messages after it.
//! - **Retransmission** (UDP, MoldUDP64 requests): a request is a packet header (the
//!   session, the first sequence number wanted, how many); the answer is packets of
//!   those messages, at most `RETRANSMIT_MESSAGES_MAX`, sent back to the requester; a
//!   range older than the history is answered with one header whose count is
//!   `RANGE_GONE` and whose sequence number is the oldest held. A request for another
//!   session, or that is not 20 bytes, is ignored (as every request is by a node of a
//!   cluster that does not know the feed's numbering yet).

use std::sync::mpsc::Sender;

use bourse_marketdata::mold;
use tokio::io::AsyncWriteExt;
use tokio::net::{TcpListener, UdpSocket};
use tokio::sync::{oneshot, watch};

use super::{Input, RETRANSMIT_MESSAGES_MAX};

/// Appends `message` with its u16 big-endian length in front.
pub fn frame(message: &[u8], out: &mut Vec<u8>) {
    let length = u16::try_from(message.len()).unwrap_or(u16::MAX);
    out.extend_from_slice(&length.to_be_bytes());
    out.extend_from_slice(&message[..usize::from(length)]);
}

/// Serves snapshots until `stop` turns true.
pub async fn serve_snapshots(
    listener: TcpListener,
    publisher: Sender<Input>,
    mut stop: watch::Receiver<bool>,
) {
    loop {
        tokio::select! {
            accepted = listener.accept() => {
                let Ok((mut stream, _)) = accepted else { continue };
                let publisher = publisher.clone();
                tokio::spawn(async move {
                    let (reply, snapshot) = oneshot::channel();
                    if publisher.send(Input::Snapshot(reply)).is_err() {
                        return;
                    }
                    if let Ok(bytes) = snapshot.await {
                        let _ = tokio::time::timeout(std::time::Duration::from_secs(30), stream.write_all(&bytes)).await;
                        let _ = stream.shutdown().await;
                    }
                });
            }
            _ = stop.changed() => return,
        }
    }
}

/// Serves retransmission requests until `stop` turns true.
pub async fn serve_retransmissions(
    socket: UdpSocket,
    publisher: Sender<Input>,
    mut stop: watch::Receiver<bool>,
) {
    let mut request = [0u8; 64];
    loop {
        tokio::select! {
            received = socket.recv_from(&mut request) => {
                let Ok((length, from)) = received else { continue };
                let Some((session, first, count)) = mold::parse_request(&request[..length]) else { continue };
                if count == 0 {
                    continue;
                }
                let (reply, answer) = oneshot::channel();
                let count = u64::from(count).min(RETRANSMIT_MESSAGES_MAX);
                if publisher.send(Input::Retransmit { session, first, count, reply }).is_err() {
                    return;
                }
                if let Ok(packets) = answer.await {
                    for packet in packets {
                        let _ = socket.send_to(&packet, from).await;
                    }
                }
            }
            _ = stop.changed() => return,
        }
    }
}
