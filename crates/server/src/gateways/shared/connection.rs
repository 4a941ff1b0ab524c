//! What every gateway's connection shares, in one place: its number (one sequence for
//! every gateway, so the hub tells connections apart whatever their protocol), its limits (how long the client may leave answers unread), how often its deadlines are
//! checked, and the output buffer of the gateways that write a raw socket themselves
//! (the pipelined HTTP loop and binary TCP): answers and updates are appended and
//! written without waiting, and whatever the socket does not take stays queued.

use std::io;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use tokio::io::{AsyncWrite, AsyncWriteExt};

static NEXT_CONNECTION: AtomicU64 = AtomicU64::new(1);

/// A new connection's number, unique among this process's connections of every
/// gateway (the hub's subscriptions are keyed by it).
pub fn next_connection_id() -> u64 {
    NEXT_CONNECTION.fetch_add(1, Ordering::Relaxed)
}

/// Output the client does not take within this long closes the connection.
pub const WRITE_TIMEOUT: Duration = Duration::from_secs(5);
/// Deadlines are checked at least this often...
const WATCHDOG_TICK_MIN: Duration = Duration::from_millis(5);
/// ...and at most this rarely.
const WATCHDOG_TICK_MAX: Duration = Duration::from_millis(250);
/// Written bytes are dropped from the front of the output once this many have gone
/// while more wait (so a client that reads slowly does not make the buffer grow
/// without end; the frame limit bounds the rest).
const OUTPUT_COMPACT_BYTES: usize = 64 * 1024;

const _: () = assert!(WATCHDOG_TICK_MIN.as_millis() < WATCHDOG_TICK_MAX.as_millis());
const _: () = assert!(WATCHDOG_TICK_MAX.as_millis() * 4 <= WRITE_TIMEOUT.as_millis());

/// How often a connection checks `deadlines` (each is then checked a few times within
/// its length).
pub fn watchdog(deadlines: &[Duration]) -> tokio::time::Interval {
    let shortest = deadlines.iter().copied().fold(WRITE_TIMEOUT, Duration::min);
    let tick = (shortest / 4).clamp(WATCHDOG_TICK_MIN, WATCHDOG_TICK_MAX);
    let mut watchdog = tokio::time::interval(tick);
    watchdog.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    watchdog
}

/// A connection's output not yet taken by the socket.
#[derive(Default)]
pub struct Output {
    bytes: Vec<u8>,
    /// `bytes[..written]` went out already.
    written: usize,
    /// Messages appended since the buffer was last empty.
    messages: usize,
    /// When the socket last took something while bytes were waiting (or they began
    /// to).
    waiting_since: Option<Instant>,
}

impl Output {
    /// Whether bytes wait for the socket.
    pub fn pending(&self) -> bool {
        self.written < self.bytes.len()
    }

    /// Messages waiting (appended since the buffer was last empty).
    pub fn messages(&self) -> usize {
        self.messages
    }

    /// Appends one message, written by `write` onto the buffer's end.
    pub fn push(&mut self, write: impl FnOnce(&mut Vec<u8>)) {
        write(&mut self.bytes);
        self.messages += 1;
    }

    /// The buffer itself, for a writer that builds messages in place and gives it back
    /// (`finish_push`): no allocation per message.
    pub fn take_bytes(&mut self) -> Vec<u8> {
        std::mem::take(&mut self.bytes)
    }

    pub fn finish_push(&mut self, bytes: Vec<u8>) {
        debug_assert!(bytes.len() >= self.written, "a message never takes back written bytes");
        self.bytes = bytes;
        self.messages += 1;
    }

    /// Whether the client has left output unread for `WRITE_TIMEOUT`.
    pub fn stalled(&self, now: Instant) -> bool {
        self.waiting_since.is_some_and(|since| now - since >= WRITE_TIMEOUT)
    }

    /// Writes what the socket takes now, without waiting (`try_write` is the socket's).
    /// `false` if the socket failed.
    pub fn flush(&mut self, mut try_write: impl FnMut(&[u8]) -> io::Result<usize>) -> bool {
        while self.pending() {
            match try_write(&self.bytes[self.written..]) {
                Ok(0) => return false,
                Ok(count) => {
                    self.written += count;
                    self.waiting_since = Some(Instant::now());
                }
                Err(error) if error.kind() == io::ErrorKind::WouldBlock => break,
                Err(_) => return false,
            }
        }
        if self.pending() {
            self.waiting_since.get_or_insert_with(Instant::now);
            if self.written >= OUTPUT_COMPACT_BYTES {
                self.bytes.drain(..self.written);
                self.written = 0;
            }
        } else {
            self.bytes.clear();
            self.written = 0;
            self.messages = 0;
            self.waiting_since = None;
        }
        debug_assert!(self.written <= self.bytes.len());
        true
    }

    /// Writes everything left, waiting up to `WRITE_TIMEOUT`, then shuts the socket's
    /// sending side (when the connection ends).
    pub async fn drain(&mut self, socket: &mut (impl AsyncWrite + Unpin)) {
        let rest = &self.bytes[self.written..];
        let _ = tokio::time::timeout(WRITE_TIMEOUT, socket.write_all(rest)).await;
        let _ = socket.shutdown().await;
        self.bytes.clear();
        self.written = 0;
        self.messages = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn output_keeps_what_the_socket_did_not_take_and_empties_once_all_went() {
        let mut output = Output::default();
        output.push(|bytes| bytes.extend_from_slice(b"hello"));
        output.push(|bytes| bytes.extend_from_slice(b" world"));
        assert_eq!(output.messages(), 2);
        let mut sent = Vec::new();
        assert!(output.flush(|bytes| {
            let count = bytes.len().min(4);
            sent.extend_from_slice(&bytes[..count]);
            Ok(count)
        }));
        assert_eq!(sent, b"hello world");
        assert!(!output.pending());
        assert_eq!(output.messages(), 0);
        output.push(|bytes| bytes.extend_from_slice(b"again"));
        assert!(output.flush(|_| Err(io::ErrorKind::WouldBlock.into())));
        assert!(output.pending());
        assert!(!output.stalled(Instant::now()));
        assert!(output.stalled(Instant::now() + WRITE_TIMEOUT));
        assert!(!output.flush(|_| Ok(0)), "a socket that takes nothing has closed");
    }

    #[test]
    fn the_watchdog_checks_the_shortest_deadline_a_few_times() {
        let runtime = tokio::runtime::Builder::new_current_thread().enable_time().build().unwrap();
        runtime.block_on(async {
            let tick = |deadlines: &[Duration]| watchdog(deadlines).period();
            assert_eq!(tick(&[Duration::from_millis(400)]), Duration::from_millis(100));
            assert_eq!(tick(&[Duration::from_millis(1)]), WATCHDOG_TICK_MIN);
            assert_eq!(tick(&[Duration::from_secs(60)]), WATCHDOG_TICK_MAX);
        });
    }
}
