//! Peer connections over TCP: one outgoing connection to each other node, written by a
//! thread of its own, and the incoming ones, each read by a thread of its own. Messages
//! are `wire` frames; a connection opens with a `Hello`.
//!
//! What arrives goes to the replica's inputs (`Inbound`); how sending went comes back
//! the same way (a snapshot's sending finished or failed; a peer could not be reached),
//! because raft-rs must be told. A message that finds its peer's queue full or its
//! connection down is dropped: Raft sends again what matters. Nothing here blocks the
//! replica's thread.

use std::collections::BTreeMap;
use std::io::{BufReader, BufWriter, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crossbeam_channel::{bounded, Receiver, Sender, TrySendError};
use raft::eraftpb::{Message, MessageType};

use crate::node::NodeId;
use crate::wire::{
    decode_message, encode_message, frame_len, Hello, FRAME_BYTES_MAX, HELLO_BYTES_MAX,
};

/// Messages waiting for one peer's connection before more are dropped.
const PEER_QUEUE: usize = 4096;
/// How long a new connection has to say hello, and between reconnection attempts.
const HELLO_WAIT: Duration = Duration::from_secs(5);
const RECONNECT_WAIT: Duration = Duration::from_millis(100);
/// How often blocked threads look whether the transport is stopping.
const STOP_POLL: Duration = Duration::from_millis(100);

/// What the transport hands the replica's thread.
#[derive(Debug)]
pub enum Inbound {
    /// A peer's message (its sender checked against the connection's hello).
    Message(Message),
    /// A snapshot sent to `to` was written to its connection (`true`) or was not.
    SnapshotSent { to: NodeId, delivered: bool },
    /// A message to `to` could not be sent.
    Unreachable(NodeId),
}

/// The cluster's identity and each node's peer address.
#[derive(Clone, Debug)]
pub struct PeerMap {
    pub cluster: u64,
    pub me: NodeId,
    pub addresses: BTreeMap<NodeId, SocketAddr>,
}

pub struct Transport {
    outgoing: BTreeMap<NodeId, Sender<Message>>,
    inbound: Sender<Inbound>,
    stopping: Arc<AtomicBool>,
    threads: Vec<JoinHandle<()>>,
    local: SocketAddr,
}

impl Transport {
    /// Listens on this node's peer address and starts a writer for every other node.
    pub fn start(peers: &PeerMap, inbound: Sender<Inbound>) -> std::io::Result<Transport> {
        let address =
            peers.addresses.get(&peers.me).copied().ok_or_else(|| {
                std::io::Error::other(format!("{} has no peer address", peers.me))
            })?;
        let listener = TcpListener::bind(address)?;
        let local = listener.local_addr()?;
        listener.set_nonblocking(true)?;
        let stopping = Arc::new(AtomicBool::new(false));
        let mut threads = Vec::new();
        let accepting = Accepting {
            listener,
            peers: peers.clone(),
            inbound: inbound.clone(),
            stopping: Arc::clone(&stopping),
        };
        threads.push(spawn("bourse-peer-accept", move || accepting.run())?);
        let mut outgoing = BTreeMap::new();
        for (&node, &address) in &peers.addresses {
            if node == peers.me {
                continue;
            }
            let (sender, receiver) = bounded(PEER_QUEUE);
            let writer = Writer {
                to: node,
                address,
                hello: Hello { cluster: peers.cluster, from: peers.me.0 },
                messages: receiver,
                inbound: inbound.clone(),
                stopping: Arc::clone(&stopping),
            };
            threads.push(spawn("bourse-peer-send", move || writer.run())?);
            outgoing.insert(node, sender);
        }
        Ok(Transport { outgoing, inbound, stopping, threads, local })
    }

    /// The address it listens on (the configured one, with its port if that was 0).
    pub fn local_address(&self) -> SocketAddr {
        self.local
    }

    /// Queues `message` for its node; a full queue or an unknown node drops it and says
    /// so as the writer would.
    pub fn send(&self, message: Message) {
        let to = NodeId(message.to);
        let is_snapshot = message.msg_type == MessageType::MsgSnapshot;
        let queued = match self.outgoing.get(&to) {
            Some(sender) => match sender.try_send(message) {
                Ok(()) => true,
                Err(TrySendError::Full(_) | TrySendError::Disconnected(_)) => false,
            },
            None => false,
        };
        if !queued {
            let _ = self.inbound.try_send(dropped(to, is_snapshot));
        }
    }

    /// Stops every thread: writers once their queues close, readers and the listener at
    /// their next look (within `STOP_POLL`).
    pub fn stop(mut self) {
        self.stopping.store(true, Ordering::SeqCst);
        self.outgoing.clear();
        for thread in self.threads.drain(..) {
            let _ = thread.join();
        }
    }
}

fn dropped(to: NodeId, is_snapshot: bool) -> Inbound {
    if is_snapshot {
        Inbound::SnapshotSent { to, delivered: false }
    } else {
        Inbound::Unreachable(to)
    }
}

fn spawn(name: &str, run: impl FnOnce() + Send + 'static) -> std::io::Result<JoinHandle<()>> {
    std::thread::Builder::new().name(name.to_string()).spawn(run)
}

/// The outgoing connection to one peer: connects (again) when needed, says hello, writes
/// every queued message, as many per write as are waiting.
struct Writer {
    to: NodeId,
    address: SocketAddr,
    hello: Hello,
    messages: Receiver<Message>,
    inbound: Sender<Inbound>,
    stopping: Arc<AtomicBool>,
}

impl Writer {
    fn run(self) {
        let mut connection: Option<BufWriter<TcpStream>> = None;
        let mut frame = Vec::new();
        while let Ok(first) = self.messages.recv() {
            if self.stopping.load(Ordering::SeqCst) {
                return;
            }
            let mut batch = vec![first];
            while let Ok(more) = self.messages.try_recv() {
                batch.push(more);
                if batch.len() >= 256 {
                    break;
                }
            }
            if connection.is_none() {
                connection = self.connect();
            }
            let written = match &mut connection {
                Some(stream) => write_batch(stream, &batch, &mut frame),
                None => Err(std::io::Error::other("not connected")),
            };
            if written.is_err() {
                connection = None;
            }
            let delivered = written.is_ok();
            for message in &batch {
                if message.msg_type == MessageType::MsgSnapshot {
                    let _ = self.inbound.try_send(Inbound::SnapshotSent { to: self.to, delivered });
                }
            }
            if !delivered {
                let _ = self.inbound.try_send(Inbound::Unreachable(self.to));
                // Not more often than this: a peer that is down costs one attempt a wait.
                std::thread::sleep(RECONNECT_WAIT);
            }
        }
    }

    fn connect(&self) -> Option<BufWriter<TcpStream>> {
        let stream = TcpStream::connect_timeout(&self.address, HELLO_WAIT).ok()?;
        let _ = stream.set_nodelay(true);
        let mut stream = BufWriter::with_capacity(1 << 16, stream);
        let mut hello = Vec::new();
        self.hello.encode(&mut hello);
        stream.write_all(&hello).ok()?;
        Some(stream)
    }
}

fn write_batch(
    stream: &mut BufWriter<TcpStream>,
    batch: &[Message],
    frame: &mut Vec<u8>,
) -> std::io::Result<()> {
    for message in batch {
        frame.clear();
        encode_message(message, frame);
        stream.write_all(frame)?;
    }
    stream.flush()
}

struct Accepting {
    listener: TcpListener,
    peers: PeerMap,
    inbound: Sender<Inbound>,
    stopping: Arc<AtomicBool>,
}

impl Accepting {
    fn run(self) {
        let mut readers: Vec<JoinHandle<()>> = Vec::new();
        while !self.stopping.load(Ordering::SeqCst) {
            match self.listener.accept() {
                Ok((stream, _)) => {
                    let reader = Reading {
                        peers: self.peers.clone(),
                        inbound: self.inbound.clone(),
                        stopping: Arc::clone(&self.stopping),
                    };
                    if let Ok(thread) = spawn("bourse-peer-read", move || reader.run(stream)) {
                        readers.push(thread);
                    }
                    readers.retain(|thread| !thread.is_finished());
                }
                Err(error) if error.kind() == std::io::ErrorKind::WouldBlock => {
                    std::thread::sleep(STOP_POLL.min(Duration::from_millis(20)));
                }
                Err(_) => std::thread::sleep(STOP_POLL),
            }
        }
        for reader in readers {
            let _ = reader.join();
        }
    }
}

/// An incoming connection: its hello, then messages until it closes or lies.
struct Reading {
    peers: PeerMap,
    inbound: Sender<Inbound>,
    stopping: Arc<AtomicBool>,
}

#[derive(Debug)]
enum ReadError {
    /// The connection broke or closed (what it was does not matter: the peer
    /// connects again).
    Closed,
    Refused(String),
    Stopping,
}

impl From<std::io::Error> for ReadError {
    fn from(_: std::io::Error) -> ReadError {
        ReadError::Closed
    }
}

impl Reading {
    fn run(self, stream: TcpStream) {
        // The connection ends on any error; the peer connects again. A connection
        // broken or closed is ordinary; one that broke the protocol is said.
        let peer = stream.peer_addr().ok();
        match self.read(stream) {
            Err(ReadError::Refused(reason)) => {
                eprintln!("bourse: a peer connection from {peer:?} was refused: {reason}");
            }
            Err(ReadError::Closed | ReadError::Stopping) | Ok(()) => {}
        }
    }

    fn read(&self, stream: TcpStream) -> Result<(), ReadError> {
        stream.set_nonblocking(false)?;
        stream.set_read_timeout(Some(HELLO_WAIT))?;
        let mut stream = BufReader::with_capacity(1 << 16, stream);
        // A stranger gets a few bytes and a few seconds, not a gigabyte.
        let deadline = Instant::now() + HELLO_WAIT;
        let body = self.frame(&mut stream, HELLO_BYTES_MAX, Some(deadline))?;
        let hello = Hello::decode(&body).map_err(|error| ReadError::Refused(error.to_string()))?;
        let from = NodeId(hello.from);
        if hello.cluster != self.peers.cluster {
            return Err(ReadError::Refused(format!("a node of cluster {}", hello.cluster)));
        }
        if from == self.peers.me || !self.peers.addresses.contains_key(&from) {
            return Err(ReadError::Refused(format!("{from} is not a member")));
        }
        stream.get_ref().set_read_timeout(Some(STOP_POLL))?;
        loop {
            let body = self.frame(&mut stream, FRAME_BYTES_MAX, None)?;
            let message =
                decode_message(&body).map_err(|error| ReadError::Refused(error.to_string()))?;
            if message.from != from.0 || message.to != self.peers.me.0 {
                return Err(ReadError::Refused(format!(
                    "a message from {} to {} on {from}'s connection",
                    message.from, message.to
                )));
            }
            if self.inbound.send(Inbound::Message(message)).is_err() {
                return Err(ReadError::Stopping);
            }
        }
    }

    /// The next frame's body, at most `max` bytes; waits out read timeouts unless the
    /// transport stops or `deadline` passes.
    fn frame(
        &self,
        stream: &mut BufReader<TcpStream>,
        max: usize,
        deadline: Option<Instant>,
    ) -> Result<Vec<u8>, ReadError> {
        let mut prefix = [0u8; 4];
        self.read_exact(stream, &mut prefix, deadline)?;
        let len = match frame_len(&prefix) {
            Ok(Some(len)) if len <= max => len,
            Ok(_) => return Err(ReadError::Refused(format!("a frame over {max} bytes"))),
            Err(error) => return Err(ReadError::Refused(error.to_string())),
        };
        let mut body = vec![0u8; len];
        self.read_exact(stream, &mut body, deadline)?;
        Ok(body)
    }

    fn read_exact(
        &self,
        stream: &mut BufReader<TcpStream>,
        out: &mut [u8],
        deadline: Option<Instant>,
    ) -> Result<(), ReadError> {
        let mut filled = 0;
        while filled < out.len() {
            if self.stopping.load(Ordering::SeqCst) {
                return Err(ReadError::Stopping);
            }
            if deadline.is_some_and(|deadline| Instant::now() >= deadline) {
                return Err(ReadError::Refused("too slow".into()));
            }
            match stream.read(&mut out[filled..]) {
                Ok(0) => return Err(ReadError::Closed),
                Ok(read) => filled += read,
                Err(error)
                    if matches!(
                        error.kind(),
                        std::io::ErrorKind::WouldBlock
                            | std::io::ErrorKind::TimedOut
                            | std::io::ErrorKind::Interrupted
                    ) => {}
                Err(_) => return Err(ReadError::Closed),
            }
        }
        Ok(())
    }
}
