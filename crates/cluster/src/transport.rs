//! Peer connections over TCP: one outgoing connection to each other node, written by a
//! thread of its own, and the incoming ones, each read by a thread of its own. Messages
//! are `wire` frames; a connection opens with a `Hello`.
//!
//! What arrives goes to the replica's inputs (`Inbound`); how sending went comes back
//! the same way (a snapshot's sending finished or failed; a peer could not be reached),
//! because raft-rs must be told. A message that finds its peer's queue full or its
//! connection down is dropped: Raft sends again what matters. Nothing here blocks the
//! replica's thread.

use std::collections::{BTreeMap, HashMap};
use std::io::{BufReader, BufWriter, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
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

/// How often a peer refused for its incarnation is said again in the log.
const INCARNATION_WARN_EVERY: Duration = Duration::from_secs(10);

/// Each peer's incarnation as first seen, kept while it is a member. A voter that lost
/// its data forgot its votes and its log; if it came back under its old id, it could
/// vote twice in one term. Its new incarnation gives it away: its connections are
/// refused (so it neither votes nor counts towards a majority) until the cluster's
/// membership changes for it (it is removed and added back: `forget`).
struct Incarnations {
    /// This node's.
    mine: u64,
    seen: Mutex<HashMap<NodeId, (u64, Option<Instant>)>>,
    /// When a peer's expectation of another incarnation of this node was last said.
    expectation_said: Mutex<Option<Instant>>,
    /// Each peer's generation: how often it was forgotten (`forget`). Read for every
    /// message sent, so an atomic per peer of the file, not a lock.
    generations: BTreeMap<NodeId, AtomicU64>,
}

impl Incarnations {
    fn new(mine: u64, peers: impl IntoIterator<Item = NodeId>) -> Incarnations {
        Incarnations {
            mine,
            seen: Mutex::default(),
            expectation_said: Mutex::default(),
            generations: peers.into_iter().map(|node| (node, AtomicU64::new(0))).collect(),
        }
    }

    /// `node`'s incarnation as seen (0: not yet).
    fn known(&self, node: NodeId) -> u64 {
        let seen = self.seen.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        seen.get(&node).map_or(0, |(incarnation, _)| *incarnation)
    }

    /// Whether a peer that `expects` this node with that incarnation (0: any) may
    /// speak to it. A peer that knew another incarnation of this node means this node
    /// lost its data: it must not take that peer's messages (a leader's commit beyond
    /// its empty log would stop it), until the cluster removed and added it back.
    fn check_expected(&self, from: NodeId, expects: u64) -> Result<(), Option<String>> {
        if expects == 0 || expects == self.mine {
            return Ok(());
        }
        let mut said =
            self.expectation_said.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        if said.is_some_and(|at| at.elapsed() < INCARNATION_WARN_EVERY) {
            return Err(None);
        }
        *said = Some(Instant::now());
        Err(Some(format!(
            "{from} knew this node with other data (incarnation {expects:x}; this node's is {:x}): \
             this node lost its data, and takes no part until it is removed and added back \
             (bourse cluster remove, then bourse cluster add)",
            self.mine
        )))
    }

    /// Whether `node` may speak with `incarnation`; a refusal says why (once every
    /// `INCARNATION_WARN_EVERY`; `None` when it was said lately).
    fn check(&self, node: NodeId, incarnation: u64) -> Result<(), Option<String>> {
        let mut seen = self.seen.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        let (known, warned) = seen.entry(node).or_insert((incarnation, None));
        if *known == incarnation {
            return Ok(());
        }
        if warned.is_some_and(|at| at.elapsed() < INCARNATION_WARN_EVERY) {
            return Err(None);
        }
        *warned = Some(Instant::now());
        Err(Some(format!(
            "{node} came back with other data (incarnation {incarnation:x}, was {known:x}): \
             a node whose data was lost must be removed and added back (bourse cluster \
             remove {id}, then bourse cluster add {id}); until then it takes no part",
            id = node.0
        )))
    }

    fn forget(&self, node: NodeId) {
        self.seen.lock().unwrap_or_else(|poisoned| poisoned.into_inner()).remove(&node);
        if let Some(generation) = self.generations.get(&node) {
            generation.fetch_add(1, Ordering::SeqCst);
        }
    }

    /// How often `node` was forgotten: a message queued for it under an earlier
    /// generation was meant for an incarnation that may be gone (`Writer`).
    fn generation(&self, node: NodeId) -> u64 {
        self.generations.get(&node).map_or(0, |generation| generation.load(Ordering::SeqCst))
    }
}

pub struct Transport {
    /// Each peer's queue: messages with the peer's generation when they were queued.
    outgoing: BTreeMap<NodeId, Sender<(u64, Message)>>,
    incarnations: Arc<Incarnations>,
    inbound: Sender<Inbound>,
    stopping: Arc<AtomicBool>,
    threads: Vec<JoinHandle<()>>,
    local: SocketAddr,
}

impl Transport {
    /// Listens on this node's peer address and starts a writer for every other node;
    /// this node speaks as `incarnation` (`Hello`).
    pub fn start(
        peers: &PeerMap,
        incarnation: u64,
        inbound: Sender<Inbound>,
    ) -> std::io::Result<Transport> {
        let address =
            peers.addresses.get(&peers.me).copied().ok_or_else(|| {
                std::io::Error::other(format!("{} has no peer address", peers.me))
            })?;
        let listener = TcpListener::bind(address)?;
        let local = listener.local_addr()?;
        listener.set_nonblocking(true)?;
        let stopping = Arc::new(AtomicBool::new(false));
        let incarnations =
            Arc::new(Incarnations::new(incarnation, peers.addresses.keys().copied()));
        let mut threads = Vec::new();
        let accepting = Accepting {
            listener,
            peers: peers.clone(),
            incarnations: Arc::clone(&incarnations),
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
                hello: Hello { cluster: peers.cluster, from: peers.me.0, incarnation, expects: 0 },
                incarnations: Arc::clone(&incarnations),
                messages: receiver,
                inbound: inbound.clone(),
                stopping: Arc::clone(&stopping),
            };
            threads.push(spawn("bourse-peer-send", move || writer.run())?);
            outgoing.insert(node, sender);
        }
        Ok(Transport { outgoing, incarnations, inbound, stopping, threads, local })
    }

    /// The cluster's membership changed for `node` (removed, or added): the next
    /// incarnation it speaks with is taken as its own.
    pub fn forget(&self, node: NodeId) {
        self.incarnations.forget(node);
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
        let generation = self.incarnations.generation(to);
        let queued = match self.outgoing.get(&to) {
            Some(sender) => match sender.try_send((generation, message)) {
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
    incarnations: Arc<Incarnations>,
    messages: Receiver<(u64, Message)>,
    inbound: Sender<Inbound>,
    stopping: Arc<AtomicBool>,
}

impl Writer {
    fn run(self) {
        // The connection, and the peer's generation when it was made.
        let mut connection: Option<(BufWriter<TcpStream>, u64)> = None;
        let mut frame = Vec::new();
        while let Ok(first) = self.messages.recv() {
            if self.stopping.load(Ordering::SeqCst) {
                return;
            }
            let mut queued = vec![first];
            while let Ok(more) = self.messages.try_recv() {
                queued.push(more);
                if queued.len() >= 256 {
                    break;
                }
            }
            // The peer was forgotten (removed from the cluster) since these were
            // queued: they were meant for an incarnation that may be gone (a node that
            // lost its data would take a commit beyond its empty log), so they are
            // dropped, and the connection is made again with what is known now.
            let generation = self.incarnations.generation(self.to);
            let mut batch = Vec::with_capacity(queued.len());
            for (queued_in, message) in queued {
                if queued_in == generation {
                    batch.push(message);
                } else if message.msg_type == MessageType::MsgSnapshot {
                    let _ = self
                        .inbound
                        .try_send(Inbound::SnapshotSent { to: self.to, delivered: false });
                }
            }
            if batch.is_empty() {
                continue;
            }
            if connection.as_ref().is_some_and(|(_, made_in)| *made_in != generation) {
                connection = None;
            }
            if connection.is_none() {
                connection = self.connect().map(|stream| (stream, generation));
            }
            let written = match &mut connection {
                Some((stream, _)) => write_batch(stream, &batch, &mut frame),
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
        let expects = self.incarnations.known(self.to);
        Hello { expects, ..self.hello }.encode(&mut hello);
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
    incarnations: Arc<Incarnations>,
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
                        incarnations: Arc::clone(&self.incarnations),
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
    incarnations: Arc<Incarnations>,
    inbound: Sender<Inbound>,
    stopping: Arc<AtomicBool>,
}

#[derive(Debug)]
enum ReadError {
    /// The connection broke or closed (what it was does not matter: the peer
    /// connects again).
    Closed,
    Refused(String),
    /// Refused for a reason said lately.
    RefusedQuietly,
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
            Err(ReadError::Closed | ReadError::Stopping | ReadError::RefusedQuietly) | Ok(()) => {}
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
        let refused = |said: Option<String>| match said {
            Some(reason) => ReadError::Refused(reason),
            None => ReadError::RefusedQuietly,
        };
        self.incarnations.check_expected(from, hello.expects).map_err(refused)?;
        self.incarnations.check(from, hello.incarnation).map_err(refused)?;
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
            // Taken again if the membership changed for the peer meanwhile (`forget`):
            // a connection speaks for one incarnation.
            self.incarnations.check(from, hello.incarnation).map_err(refused)?;
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
