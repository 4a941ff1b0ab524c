//! The loop of every gateway that speaks over a raw TCP socket (binary TCP, FIX, the
//! pipelined HTTP loop): one place that waits for whatever wakes a connection (its
//! kill switch, the server stopping, its lane's released outcomes, bytes from the
//! client, a hub message, room in the socket, the watchdog), reads into its input, and
//! after each wake writes what is ready without waiting. A gateway owns only what its
//! protocol means: it takes the `Wake`, decodes the input, renders into its `Output`.
//!
//! Nothing here decides what a request may do (the port's), nor what a protocol's
//! bytes mean (the gateway's).

use std::io;
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::net::TcpStream;
use tokio::sync::{mpsc, watch};

use crate::gateways::shared::connection::{self, Output};
use crate::link::LaneReleases;
use crate::services::feed::channel::{FeedMessage, Kill};

/// What the socket has given and the gateway has not yet taken.
pub struct Input {
    pub buffer: Vec<u8>,
    /// `buffer[..filled]` holds bytes read.
    pub filled: usize,
    /// False once the peer closed its side, reading failed, or the gateway stopped
    /// reading (a bad frame, a hand-off).
    pub open: bool,
    /// When bytes last came.
    pub last_read: Instant,
}

impl Input {
    fn new(bytes: usize) -> Input {
        Input { buffer: vec![0; bytes], filled: 0, open: true, last_read: Instant::now() }
    }

    /// The bytes read and not yet taken.
    pub fn unread(&self) -> &[u8] {
        &self.buffer[..self.filled]
    }

    /// Drops the first `taken` bytes (whole messages handled), keeping the rest (a
    /// partial message) at the front for the next read.
    pub fn take(&mut self, taken: usize) {
        debug_assert!(taken <= self.filled, "{taken} bytes taken of {}", self.filled);
        self.buffer.copy_within(taken..self.filled, 0);
        self.filled -= taken;
        debug_assert!(self.filled < self.buffer.len(), "a whole message always fits the buffer");
    }
}

/// What woke the connection.
pub enum Wake {
    /// Its kill switch was thrown (`Kill::reason` says why): the loop ends.
    Killed,
    /// The server is stopping.
    Stopping,
    /// Its lane released the outcomes of some of its requests.
    Released(Arc<bourse_engine::Released>),
    /// Bytes came: they are at the end of `input`.
    Read,
    /// The peer closed its side, or reading failed: `input.open` is now false.
    ReadClosed,
    /// The hub sent it a message (an account's order, a fill).
    Hub(Arc<FeedMessage>),
    /// The socket can take more output (or failed: the next flush says so).
    Writable,
    /// Time to check its deadlines.
    Tick,
}

/// A connection's socket and what wakes it.
pub struct SocketLoop {
    stream: TcpStream,
    pub input: Input,
    releases: LaneReleases,
    /// The hub's messages for it: from the start (binary TCP), once logged on (FIX), or
    /// never (HTTP).
    hub: Option<mpsc::Receiver<Arc<FeedMessage>>>,
    /// `None`: the gateway ends itself (HTTP).
    kill: Option<Arc<Kill>>,
    stop: watch::Receiver<bool>,
    stopping: bool,
    watchdog: tokio::time::Interval,
    /// The socket failed to take output.
    failed: bool,
}

impl SocketLoop {
    /// The loop of `stream`, reading at most `read_bytes` at a time, woken for
    /// `releases`, by `kill` and `stop`, and often enough to check `deadlines`.
    pub fn new(
        stream: TcpStream,
        read_bytes: usize,
        releases: LaneReleases,
        kill: Option<Arc<Kill>>,
        stop: watch::Receiver<bool>,
        deadlines: &[Duration],
    ) -> SocketLoop {
        SocketLoop {
            stream,
            input: Input::new(read_bytes),
            releases,
            hub: None,
            kill,
            stop,
            stopping: false,
            watchdog: connection::watchdog(deadlines),
            failed: false,
        }
    }

    /// From now on the loop wakes for the hub's messages on `hub`.
    pub fn follow_hub(&mut self, hub: mpsc::Receiver<Arc<FeedMessage>>) {
        self.hub = Some(hub);
    }

    /// The hub's receiver, if it has one (a FIX session keeps it across connections).
    pub fn take_hub(&mut self) -> Option<mpsc::Receiver<Arc<FeedMessage>>> {
        self.hub.take()
    }

    /// Waits for what wakes the connection next. Input is read only while it is open
    /// and `accepting` (a connection with its limit of requests in flight is not read,
    /// so TCP flow control holds the client back); room in the socket is waited for
    /// only while `output` has bytes waiting. The kill switch comes first, then the
    /// server stopping, then answers, before more input.
    pub async fn wake(&mut self, accepting: bool, output: &Output) -> Wake {
        let writing = output.pending();
        loop {
            let readable = self.input.open && accepting;
            let SocketLoop { stream, input, releases, hub, kill, stop, stopping, watchdog, failed } =
                self;
            tokio::select! {
                biased;
                _ = killed(kill.as_deref()) => return Wake::Killed,
                changed = stop.changed(), if !*stopping => {
                    // A stop sent, or the sender gone: stopping either way, once.
                    let _ = changed;
                    *stopping = true;
                    return Wake::Stopping;
                }
                Some(released) = releases.recv() => return Wake::Released(released),
                ready = stream.readable(), if readable => {
                    if ready.is_err() {
                        input.open = false;
                        return Wake::ReadClosed;
                    }
                    match stream.try_read(&mut input.buffer[input.filled..]) {
                        Ok(0) => {
                            input.open = false;
                            return Wake::ReadClosed;
                        }
                        Ok(count) => {
                            input.filled += count;
                            input.last_read = Instant::now();
                            return Wake::Read;
                        }
                        // Readiness was spurious: wait again.
                        Err(error) if error.kind() == io::ErrorKind::WouldBlock => {}
                        Err(_) => {
                            input.open = false;
                            return Wake::ReadClosed;
                        }
                    }
                }
                Some(message) = receive(hub), if hub.is_some() => return Wake::Hub(message),
                ready = stream.writable(), if writing => {
                    *failed |= ready.is_err();
                    return Wake::Writable;
                }
                _ = watchdog.tick() => return Wake::Tick,
            }
        }
    }

    /// Released outcomes already waiting (taken after a wake, so that they go out in
    /// the same write).
    pub fn ready_released(&mut self) -> Option<Arc<bourse_engine::Released>> {
        self.releases.try_recv().ok()
    }

    /// Hub messages already waiting.
    pub fn ready_hub(&mut self) -> Option<Arc<FeedMessage>> {
        self.hub.as_mut()?.try_recv().ok()
    }

    /// Writes what the socket takes of `output` now, without waiting. `false` once the
    /// socket has failed: the connection is over.
    pub fn flush(&mut self, output: &mut Output) -> bool {
        let stream = &self.stream;
        self.failed |= !output.flush(|bytes| stream.try_write(bytes));
        !self.failed
    }

    /// Writes everything left of `output`, waiting up to `WRITE_TIMEOUT`, then shuts
    /// the socket's sending side (when the connection ends).
    pub async fn drain(&mut self, output: &mut Output) {
        output.drain(&mut self.stream).await;
    }

    /// Waits until `deadline` for released outcomes (answering what is in flight as
    /// the connection closes); `None` once the time is up or the lane is gone.
    pub async fn released_within(
        &mut self,
        deadline: tokio::time::Instant,
    ) -> Option<Arc<bourse_engine::Released>> {
        tokio::time::timeout_at(deadline, self.releases.recv()).await.ok().flatten()
    }

    /// The socket and what was read from it but not taken (for a hand-off to hyper).
    pub fn into_parts(self) -> (TcpStream, Input) {
        (self.stream, self.input)
    }
}

/// Completes once `kill` is thrown; never without one.
async fn killed(kill: Option<&Kill>) {
    match kill {
        Some(kill) => kill.notify.notified().await,
        None => std::future::pending().await,
    }
}

/// The next hub message (the branch is disabled while there is no receiver).
pub async fn receive(
    hub: &mut Option<mpsc::Receiver<Arc<FeedMessage>>>,
) -> Option<Arc<FeedMessage>> {
    match hub {
        Some(hub) => hub.recv().await,
        None => std::future::pending().await,
    }
}
