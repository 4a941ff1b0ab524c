//! A running node: its `Node` on a thread of its own (`bourse-raft`), ticked by the
//! clock, fed by the transport, and handing what is committed to the application.
//!
//! Everything that touches the node goes through the thread's one queue of inputs
//! (proposals, peers' messages, how sends went), so the node needs no lock. After each
//! input, and each tick, the thread lets the node `advance`: it writes and syncs the
//! Raft log, sends, and calls the application (`Application`) with committed entries in
//! order. A storage failure stops the node for good (fail-stop), and says why.

use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crossbeam_channel::{bounded, unbounded, Receiver, RecvTimeoutError, Sender};
use raft::eraftpb::{Entry, Message, Snapshot};

use crate::disk::FsDisk;
use crate::log::RaftLog;
use crate::node::{Applied, Node, NodeConfig, NodeError, NodeId, NotLeader, Proposed, Status};
use crate::transport::{Inbound, PeerMap, Transport};

/// What the node hands the application, on the node's thread, in order.
pub trait Application: Send + 'static {
    /// The state becomes the leader's snapshot (entries after it follow).
    fn install(&mut self, snapshot: &Snapshot);
    /// A committed entry (conf changes included, already applied to the membership).
    fn apply(&mut self, entry: &Entry);
    /// The node now knows `leader` (`None`: nobody) in `term`.
    fn leadership(&mut self, leader: Option<NodeId>, term: u64);
}

/// How a replica runs.
#[derive(Clone, Debug)]
pub struct ReplicaConfig {
    pub node: NodeConfig,
    pub peers: PeerMap,
    /// One tick of the node's clock: heartbeats every `heartbeat_ticks`, elections after
    /// `election_ticks` to twice that.
    pub tick: Duration,
}

enum Input {
    Inbound(Inbound),
    Propose { data: Vec<u8>, reply: Sender<Result<Proposed, NotLeader>> },
    Compact { index: u64, state: bytes::Bytes },
    Stop,
}

/// The handle the owner keeps.
pub struct Replica {
    inputs: Sender<Input>,
    status: Arc<Mutex<ReplicaStatus>>,
    thread: Option<JoinHandle<()>>,
}

/// The node as last seen by its thread.
#[derive(Clone, Debug)]
pub struct ReplicaStatus {
    pub status: Status,
    /// Why the node stopped, if it did.
    pub failure: Option<String>,
}

impl Replica {
    /// Opens the Raft log in `raft_dir` and starts the node and its transport.
    pub fn start(
        config: ReplicaConfig,
        raft_dir: &std::path::Path,
        initial_voters: &[u64],
        application: impl Application,
    ) -> Result<Replica, NodeError> {
        let disk = FsDisk::open(raft_dir).map_err(crate::log::LogError::Io)?;
        let log = RaftLog::open(disk, initial_voters)?;
        let node = Node::new(&config.node, log)?;
        let (inputs, receiver) = unbounded();
        let (inbound, inbound_receiver) = unbounded();
        let transport =
            Transport::start(&config.peers, inbound).map_err(crate::log::LogError::Io)?;
        // Inbound traffic joins the node's one queue.
        let forward = inputs.clone();
        std::thread::Builder::new()
            .name("bourse-peer-in".into())
            .spawn(move || forward_inbound(inbound_receiver, forward))
            .map_err(crate::log::LogError::Io)?;
        let status = Arc::new(Mutex::new(ReplicaStatus { status: node.status(), failure: None }));
        let running = Running {
            node,
            transport: Some(transport),
            application,
            tick: config.tick,
            status: Arc::clone(&status),
            unreachable: Vec::new(),
        };
        let thread = std::thread::Builder::new()
            .name("bourse-raft".into())
            .spawn(move || running.run(receiver))
            .map_err(crate::log::LogError::Io)?;
        Ok(Replica { inputs, status, thread: Some(thread) })
    }

    /// Proposes `data`; answers where it went in the log, or who leads instead.
    pub fn propose(&self, data: Vec<u8>) -> Result<Proposed, NotLeader> {
        let (reply, answer) = bounded(1);
        if self.inputs.send(Input::Propose { data, reply }).is_err() {
            return Err(NotLeader { leader: None });
        }
        answer.recv().unwrap_or(Err(NotLeader { leader: None }))
    }

    /// Compacts the log at `index`, whose state the application gives.
    pub fn compact(&self, index: u64, state: bytes::Bytes) {
        let _ = self.inputs.send(Input::Compact { index, state });
    }

    pub fn status(&self) -> ReplicaStatus {
        self.status.lock().unwrap_or_else(|poisoned| poisoned.into_inner()).clone()
    }

    /// Stops the node and its transport.
    pub fn stop(mut self) {
        self.stop_thread();
    }

    fn stop_thread(&mut self) {
        let _ = self.inputs.send(Input::Stop);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

impl Drop for Replica {
    fn drop(&mut self) {
        self.stop_thread();
    }
}

fn forward_inbound(inbound: Receiver<Inbound>, inputs: Sender<Input>) {
    while let Ok(message) = inbound.recv() {
        if inputs.send(Input::Inbound(message)).is_err() {
            return;
        }
    }
}

struct Running<A: Application> {
    node: Node<FsDisk>,
    transport: Option<Transport>,
    application: A,
    tick: Duration,
    status: Arc<Mutex<ReplicaStatus>>,
    /// Peers a send to failed since the last step, to tell the node.
    unreachable: Vec<NodeId>,
}

/// What `advance` calls, routed: messages to the transport, the rest to the application.
struct Route<'a, A: Application> {
    transport: &'a Transport,
    application: &'a mut A,
}

impl<A: Application> Applied for Route<'_, A> {
    fn send(&mut self, message: Message) {
        self.transport.send(message);
    }

    fn install(&mut self, snapshot: &Snapshot) {
        self.application.install(snapshot);
    }

    fn apply(&mut self, entry: &Entry) {
        self.application.apply(entry);
    }

    fn leadership(&mut self, leader: Option<NodeId>, term: u64) {
        self.application.leadership(leader, term);
    }
}

impl<A: Application> Running<A> {
    fn run(mut self, inputs: Receiver<Input>) {
        let mut next_tick = Instant::now() + self.tick;
        loop {
            let wait = next_tick.saturating_duration_since(Instant::now());
            match inputs.recv_timeout(wait) {
                Ok(Input::Stop) | Err(RecvTimeoutError::Disconnected) => break,
                Ok(input) => {
                    if !self.take(input) {
                        break;
                    }
                    // Whatever else is waiting, before the node steps.
                    let mut stop = false;
                    while let Ok(input) = inputs.try_recv() {
                        if matches!(input, Input::Stop) || !self.take(input) {
                            stop = true;
                            break;
                        }
                    }
                    if stop {
                        break;
                    }
                }
                Err(RecvTimeoutError::Timeout) => {}
            }
            while Instant::now() >= next_tick {
                self.node.tick();
                next_tick += self.tick;
            }
            if let Err(error) = self.step() {
                self.fail(&error.to_string());
                break;
            }
        }
        if let Some(transport) = self.transport.take() {
            transport.stop();
        }
    }

    /// Takes one input; `false` if the node must stop.
    fn take(&mut self, input: Input) -> bool {
        match input {
            Input::Inbound(Inbound::Message(message)) => {
                // A stale or misdirected message is raft-rs's to ignore.
                let _ = self.node.receive(message);
            }
            Input::Inbound(Inbound::SnapshotSent { to, delivered }) => {
                self.node.report_snapshot(to, delivered)
            }
            Input::Inbound(Inbound::Unreachable(to)) => self.unreachable.push(to),
            Input::Propose { data, reply } => {
                let _ = reply.send(self.node.propose(data));
            }
            Input::Compact { index, state } => {
                if let Err(error) = self.node.compact(index, state) {
                    self.fail(&error.to_string());
                    return false;
                }
            }
            Input::Stop => return false,
        }
        true
    }

    fn step(&mut self) -> Result<(), NodeError> {
        for to in self.unreachable.drain(..) {
            self.node.report_unreachable(to);
        }
        if let Some(transport) = &self.transport {
            let mut route = Route { transport, application: &mut self.application };
            self.node.advance(&mut route)?;
        }
        self.publish(None);
        Ok(())
    }

    fn fail(&mut self, reason: &str) {
        let reason = format!("the raft node stopped: {reason}");
        eprintln!("bourse: {reason}");
        self.publish(Some(reason));
    }

    fn publish(&self, failure: Option<String>) {
        let mut status = self.status.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        status.status = self.node.status();
        if failure.is_some() {
            status.failure = failure;
        }
    }
}
