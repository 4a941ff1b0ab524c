//! A running node: its `Node` on a thread of its own (`bourse-raft`), ticked by the
//! clock, fed by the transport, and handing what is committed to the application.
//!
//! Everything that touches the node goes through the thread's one queue of inputs
//! (proposals, peers' messages, how sends went), so the node needs no lock. After each
//! input, and each tick, the thread lets the node `advance`: it writes and syncs the
//! Raft log, sends, and calls the application (`Application`) with committed entries in
//! order. A storage failure stops the node for good (fail-stop), and says why.
//!
//! As leader it numbers what it proposes (`batch`): it takes up the numbering and the
//! clock where its log leaves them when it becomes leader. Each proposal carries the
//! application's tag (who is waiting for it), which comes back with the entry once
//! committed, or as `Unanswered` if another entry took its place, if the node did not
//! lead, or if it lost its leadership and heard nothing of the entry for
//! `UNKNOWN_AFTER`.

use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use std::collections::{BTreeSet, VecDeque};

use crossbeam_channel::{unbounded, Receiver, RecvTimeoutError, Sender};
use raft::eraftpb::{Entry, EntryType, Message, Snapshot};

use crate::batch::{
    decode_snapshot_data, encode_snapshot_data, Batch, BatchHeader, BatchWriter, LogClock,
};
use crate::disk::FsDisk;
use crate::log::{LogError, RaftLog};
use crate::node::{
    Applied, MembershipChange, Node, NodeConfig, NodeError, NodeId, NotLeader, Proposed, Status,
};
use crate::transport::{Inbound, PeerMap, Transport};

/// Wall-clock time now, in nanoseconds since the Unix epoch: a leader's batches' time.
fn now_ns() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |since| since.as_nanos() as u64)
}

/// What the node hands the application, on the node's thread, in order.
pub trait Application: Send + 'static {
    /// Who waits for a proposal (the engine: the commands' origins).
    type Tag: Send + 'static;
    /// The state becomes the leader's snapshot (entries after it follow): the clock
    /// there and the application's state as `Replica::compact` was given it.
    fn install(&mut self, clock: LogClock, state: &[u8]);
    /// A committed entry (conf changes included, already applied to the membership),
    /// with its batch if it carries one and the tag of this node's proposal if it is
    /// one. A note (`Noter`) comes as an entry without a batch, the note its `context`.
    fn apply(&mut self, entry: &Entry, batch: Option<Batch<'_>>, tag: Option<Self::Tag>);
    /// State of the application that is not numbered by batches (its notes' effects)
    /// holds the entries up to this index: after a restart, entries are handed over
    /// again from there at the latest. `None`: all its state is in its batches.
    fn applied_at_most(&self) -> Option<u64> {
        None
    }
    /// A proposal that will not be answered by `apply`.
    fn unanswered(&mut self, tag: Self::Tag, why: Unanswered);
    /// The node now knows `leader` (`None`: nobody) in `term`.
    fn leadership(&mut self, leader: Option<NodeId>, term: u64);
    /// The node has done a step's work (what `advance` asked), all of whose committed
    /// entries `apply` was given: time to act on them together.
    fn advanced(&mut self) {}
    /// A tick of the node's clock passed (`ReplicaConfig::tick`), whether or not anything
    /// was committed: time for work that must not wait for the next entry.
    fn tick(&mut self) {}
    /// The node's thread ends: `failure` says why if it failed (its storage), `None` on
    /// `Replica::stop`. Every tag was answered before.
    fn stopped(&mut self, failure: Option<&str>);
}

/// Work for the application's side of the node's thread (`Replica::after_proposals`).
pub type Call<A> = Box<dyn FnOnce(&mut A) + Send>;

/// Why a proposal's tag comes back without its entry.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Unanswered {
    /// Nothing was proposed: this node does not lead (`leader`: who does, if known).
    NotLeader(Option<NodeId>),
    /// Another entry was committed in its place: it will never be applied.
    Lost,
    /// The node lost its leadership and has not learned whether the entry was
    /// committed: it may or may not be applied.
    Unknown,
}

/// How long a node that lost its leadership keeps waiting to learn the fate of its
/// proposals before it answers them `Unknown`.
pub const UNKNOWN_AFTER: Duration = Duration::from_secs(3);

/// Where the application's state stands in the log after a restart: the entry whose
/// batch ends at or before `applied_seq` (the last item the state holds), as late as
/// possible. Entries after it are handed over again (items the state already holds,
/// from a batch it holds in part, included: the application skips them by number).
pub fn applied_index<D: crate::disk::Disk>(
    log: &RaftLog<D>,
    applied_seq: u64,
) -> Result<u64, NodeError> {
    for index in (log.first_kept()..=log.last_kept()).rev() {
        let entry = log.entry(index)?;
        let Some(header) = batch_of(&entry)? else { continue };
        if header.next_seq() <= applied_seq + 1 {
            return Ok(entry.index);
        }
    }
    let snapshot = log.snapshot_ref();
    let index = snapshot.get_metadata().index;
    let clock = if index == 0 {
        LogClock::START
    } else {
        decode_snapshot_data(&snapshot.data)
            .map_err(|error| LogError::Corrupt(format!("the compaction snapshot: {error}")))?
            .0
    };
    if clock.next_seq <= applied_seq + 1 {
        return Ok(index);
    }
    Err(NodeError::Log(LogError::Corrupt(format!(
        "the state holds items up to {applied_seq}, but the raft log starts at {}",
        clock.next_seq
    ))))
}

/// The batch header of a normal entry with data (`None`: an entry without a batch).
fn batch_of(entry: &Entry) -> Result<Option<BatchHeader>, LogError> {
    if entry.entry_type != EntryType::EntryNormal || entry.data.is_empty() {
        return Ok(None);
    }
    match Batch::decode(&entry.data) {
        Ok(batch) => Ok(Some(batch.header)),
        Err(error) => Err(LogError::Corrupt(format!("entry {}: {error}", entry.index))),
    }
}

/// The numbering and the clock after the whole log.
fn clock_at_end<D: crate::disk::Disk>(log: &RaftLog<D>) -> Result<LogClock, LogError> {
    for index in (log.first_kept()..=log.last_kept()).rev() {
        if let Some(header) = batch_of(&log.entry(index)?)? {
            return Ok(LogClock::after(&header));
        }
    }
    let snapshot = log.snapshot_ref();
    if snapshot.get_metadata().index == 0 {
        return Ok(LogClock::START);
    }
    decode_snapshot_data(&snapshot.data)
        .map(|(clock, _)| clock)
        .map_err(|error| LogError::Corrupt(format!("the compaction snapshot: {error}")))
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

enum Input<A: Application> {
    Inbound(Inbound),
    Propose { batch: BatchWriter, tag: A::Tag },
    Note(Vec<u8>),
    Membership(MembershipChange),
    Call(Call<A>),
    Compact { index: u64, clock: LogClock, state: Vec<u8> },
    Stop,
}

/// The handle the owner keeps.
pub struct Replica<A: Application> {
    inputs: Sender<Input<A>>,
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

impl<A: Application> Replica<A> {
    /// Opens the Raft log in `raft_dir` and starts the node and its transport. The
    /// application's state holds the items up to `applied_seq` (0: none): committed
    /// entries after that point are handed to it.
    pub fn start(
        config: ReplicaConfig,
        raft_dir: &std::path::Path,
        initial_voters: &[u64],
        applied_seq: u64,
        application: A,
    ) -> Result<Replica<A>, NodeError> {
        let mut disk = FsDisk::open(raft_dir).map_err(LogError::Io)?;
        let incarnation = incarnation(&mut disk).map_err(LogError::Io)?;
        let log = RaftLog::open(disk, initial_voters)?;
        let mut node_config = config.node.clone();
        node_config.applied = applied_index(&log, applied_seq)?;
        if let Some(at_most) = application.applied_at_most() {
            // Never below what the log no longer holds.
            let compacted = log.snapshot_ref().get_metadata().index;
            node_config.applied = node_config.applied.min(at_most.max(compacted));
        }
        let node = Node::new(&node_config, log)?;
        let (inputs, receiver) = unbounded();
        let (inbound, inbound_receiver) = unbounded();
        let transport =
            Transport::start(&config.peers, incarnation, inbound).map_err(LogError::Io)?;
        // Inbound traffic joins the node's one queue.
        let forward = inputs.clone();
        std::thread::Builder::new()
            .name("bourse-peer-in".into())
            .spawn(move || forward_inbound(inbound_receiver, forward))
            .map_err(LogError::Io)?;
        let status = Arc::new(Mutex::new(ReplicaStatus { status: node.status(), failure: None }));
        let running = Running {
            node,
            transport: Some(transport),
            application,
            tick: config.tick,
            status: Arc::clone(&status),
            unreachable: Vec::new(),
            clock: None,
            pending: VecDeque::new(),
            led_until: None,
            calls: VecDeque::new(),
            failure: None,
            members: BTreeSet::new(),
        };
        let thread = std::thread::Builder::new()
            .name("bourse-raft".into())
            .spawn(move || running.run(receiver))
            .map_err(LogError::Io)?;
        Ok(Replica { inputs, status, thread: Some(thread) })
    }

    /// Proposes `batch`; `tag` comes back with its entry once committed, or as
    /// `Unanswered`. `false` if the node has stopped (the tag is dropped).
    pub fn propose(&self, batch: BatchWriter, tag: A::Tag) -> bool {
        self.inputs.send(Input::Propose { batch, tag }).is_ok()
    }

    /// A handle that proposes notes (`Noter`), for another thread.
    pub fn noter(&self) -> Noter<A> {
        Noter(self.inputs.clone())
    }

    /// Runs `call` on the node's thread once every proposal made before it has been
    /// answered (applied or `Unanswered`), so that it sees their outcomes; at once on a
    /// node with none waiting. `false` if the node has stopped.
    pub fn after_proposals(&self, call: Call<A>) -> bool {
        self.inputs.send(Input::Call(call)).is_ok()
    }

    /// Reads the node's status whenever asked, from any thread.
    pub fn status_reader(&self) -> StatusReader {
        StatusReader(Arc::clone(&self.status))
    }

    /// Compacts the log at `index`, where the application's state is `state` and the
    /// log's clock `clock`.
    pub fn compact(&self, index: u64, clock: LogClock, state: Vec<u8>) {
        let _ = self.inputs.send(Input::Compact { index, clock, state });
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

impl<A: Application> Drop for Replica<A> {
    fn drop(&mut self) {
        self.stop_thread();
    }
}

/// Proposes notes: entries without a batch whose context every node gets with the
/// entry, at its place in the log (dropped when the node does not lead).
pub struct Noter<A: Application>(Sender<Input<A>>);

impl<A: Application> Clone for Noter<A> {
    fn clone(&self) -> Self {
        Noter(self.0.clone())
    }
}

impl<A: Application> Noter<A> {
    /// `false` if the node has stopped.
    pub fn propose_note(&self, note: Vec<u8>) -> bool {
        self.0.send(Input::Note(note)).is_ok()
    }

    /// Proposes a change of membership (dropped when the node does not lead or another
    /// change is in flight: the node's status shows whether it was made). `false` if
    /// the node has stopped.
    pub fn propose_membership(&self, change: MembershipChange) -> bool {
        self.0.send(Input::Membership(change)).is_ok()
    }
}

/// A node's status, readable after the node has stopped too.
#[derive(Clone)]
pub struct StatusReader(Arc<Mutex<ReplicaStatus>>);

impl StatusReader {
    pub fn read(&self) -> ReplicaStatus {
        self.0.lock().unwrap_or_else(|poisoned| poisoned.into_inner()).clone()
    }
}

/// The file in the Raft directory that holds this node's incarnation.
const INCARNATION_FILE: &str = "incarnation";

/// This node's incarnation (`wire::Hello`): drawn the first time its Raft directory is
/// used, and kept (a node whose directory was wiped draws another).
fn incarnation(disk: &mut FsDisk) -> std::io::Result<u64> {
    use crate::disk::Disk;
    if let Some(bytes) = disk.read(INCARNATION_FILE)? {
        let text = String::from_utf8_lossy(&bytes);
        return u64::from_str_radix(text.trim(), 16).map_err(|error| {
            std::io::Error::other(format!("the incarnation file {text:?} is damaged: {error}"))
        });
    }
    // std's hasher keys come from the operating system's random source.
    use std::hash::{BuildHasher, Hasher};
    let mut hasher = std::collections::hash_map::RandomState::new().build_hasher();
    hasher.write_u128(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap_or_default()
            .as_nanos(),
    );
    let drawn = hasher.finish().max(1);
    disk.replace(INCARNATION_FILE, format!("{drawn:016x}\n").as_bytes())?;
    Ok(drawn)
}

fn forward_inbound<A: Application>(inbound: Receiver<Inbound>, inputs: Sender<Input<A>>) {
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
    /// As leader: the numbering and the clock at the end of the log.
    clock: Option<LogClock>,
    /// This node's proposals not yet answered, in log order.
    pending: VecDeque<(Proposed, A::Tag)>,
    /// When the node last stopped leading while proposals were pending.
    led_until: Option<Instant>,
    /// Calls waiting for the proposals before them: each with the index of the last
    /// proposal made before it.
    calls: VecDeque<(u64, Call<A>)>,
    failure: Option<String>,
    /// The voters and learners as of the last step (`note_membership`).
    members: BTreeSet<NodeId>,
}

/// What `advance` calls, routed: messages to the transport, the rest to the application
/// (committed entries with their proposals' tags).
struct Route<'a, A: Application> {
    transport: &'a Transport,
    application: &'a mut A,
    pending: &'a mut VecDeque<(Proposed, A::Tag)>,
    /// The leadership `advance` told of, if it changed.
    leadership: Option<(Option<NodeId>, u64)>,
    failure: Option<String>,
}

impl<A: Application> Applied for Route<'_, A> {
    fn send(&mut self, message: Message) {
        self.transport.send(message);
    }

    fn install(&mut self, snapshot: &Snapshot) {
        match decode_snapshot_data(&snapshot.data) {
            Ok((clock, state)) => self.application.install(clock, state),
            Err(error) => {
                self.failure.get_or_insert(format!("a leader's snapshot does not read: {error}"));
            }
        }
        // Proposals the snapshot covers were committed or lost: which, the node cannot
        // tell.
        let covered = snapshot.get_metadata().index;
        while self.pending.front().is_some_and(|(proposed, _)| proposed.index <= covered) {
            if let Some((_, tag)) = self.pending.pop_front() {
                self.application.unanswered(tag, Unanswered::Unknown);
            }
        }
    }

    fn apply(&mut self, entry: &Entry) {
        let mut mine = None;
        while let Some((proposed, _)) = self.pending.front() {
            if proposed.index > entry.index {
                break;
            }
            let same = proposed.index == entry.index && proposed.term == entry.term;
            let Some((_, tag)) = self.pending.pop_front() else { break };
            if same {
                mine = Some(tag);
            } else {
                self.application.unanswered(tag, Unanswered::Lost);
            }
        }
        let batch = if entry.entry_type == EntryType::EntryNormal && !entry.data.is_empty() {
            match Batch::decode(&entry.data) {
                Ok(batch) => Some(batch),
                Err(error) => {
                    // Written by no node of ours: nothing after it can be applied.
                    self.failure.get_or_insert(format!("entry {}: {error}", entry.index));
                    return;
                }
            }
        } else {
            None
        };
        self.application.apply(entry, batch, mine);
    }

    fn leadership(&mut self, leader: Option<NodeId>, term: u64) {
        self.leadership = Some((leader, term));
        self.application.leadership(leader, term);
    }
}

impl<A: Application> Running<A> {
    fn run(mut self, inputs: Receiver<Input<A>>) {
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
            let mut ticked = false;
            while Instant::now() >= next_tick {
                self.node.tick();
                next_tick += self.tick;
                ticked = true;
            }
            if ticked {
                self.application.tick();
            }
            if let Err(error) = self.step() {
                self.fail(&error.to_string());
                break;
            }
        }
        if let Some(transport) = self.transport.take() {
            transport.stop();
        }
        for (_, tag) in self.pending.drain(..) {
            self.application.unanswered(tag, Unanswered::Unknown);
        }
        self.run_calls();
        self.application.stopped(self.failure.as_deref());
    }

    /// Runs the calls whose proposals have all been answered.
    fn run_calls(&mut self) {
        let answered_below = self.pending.front().map_or(u64::MAX, |(proposed, _)| proposed.index);
        while self.calls.front().is_some_and(|(after, _)| *after < answered_below) {
            if let Some((_, call)) = self.calls.pop_front() {
                call(&mut self.application);
            }
        }
    }

    /// Takes one input; `false` if the node must stop.
    fn take(&mut self, input: Input<A>) -> bool {
        match input {
            Input::Inbound(Inbound::Message(message)) => {
                // A stale or misdirected message is raft-rs's to ignore.
                let _ = self.node.receive(message);
            }
            Input::Inbound(Inbound::SnapshotSent { to, delivered }) => {
                self.node.report_snapshot(to, delivered)
            }
            Input::Inbound(Inbound::Unreachable(to)) => self.unreachable.push(to),
            Input::Propose { batch, tag } => self.propose(batch, tag),
            Input::Note(note) => {
                // A node that does not lead has nothing to say to the others.
                let _ = self.node.propose_note(note);
            }
            Input::Membership(change) => {
                let _ = self.node.propose_membership(change);
            }
            Input::Call(call) => {
                let after = self.pending.back().map_or(0, |(proposed, _)| proposed.index);
                self.calls.push_back((after, call));
                self.run_calls();
            }
            Input::Compact { index, clock, state } => {
                let data = bytes::Bytes::from(encode_snapshot_data(clock, &state));
                if let Err(error) = self.node.compact(index, data) {
                    self.fail(&error.to_string());
                    return false;
                }
            }
            Input::Stop => return false,
        }
        true
    }

    /// Numbers `batch` where the log ends and proposes it, if this node leads.
    fn propose(&mut self, batch: BatchWriter, tag: A::Tag) {
        let clock = match self.clock {
            Some(clock) if self.node.is_leader() => clock,
            _ => {
                let leader = self.node.leader().filter(|leader| *leader != self.node.id());
                self.application.unanswered(tag, Unanswered::NotLeader(leader));
                return;
            }
        };
        let (data, after) = batch.finish(clock, now_ns());
        match self.node.propose(data) {
            Ok(proposed) => {
                self.clock = Some(after);
                self.pending.push_back((proposed, tag));
            }
            Err(NotLeader { leader }) => {
                self.application.unanswered(tag, Unanswered::NotLeader(leader));
            }
        }
    }

    fn step(&mut self) -> Result<(), NodeError> {
        for to in self.unreachable.drain(..) {
            self.node.report_unreachable(to);
        }
        let Some(transport) = &self.transport else { return Ok(()) };
        let mut route = Route {
            transport,
            application: &mut self.application,
            pending: &mut self.pending,
            leadership: None,
            failure: None,
        };
        self.node.advance(&mut route)?;
        let (leadership, failure) = (route.leadership, route.failure);
        self.application.advanced();
        if let Some(failure) = failure {
            return Err(NodeError::Log(LogError::Corrupt(failure)));
        }
        if let Some((leader, _)) = leadership {
            if leader == Some(self.node.id()) {
                // Numbering resumes where the log ends (entries of earlier terms it
                // holds will be committed by this leader, numbers and all).
                self.clock = Some(clock_at_end(self.node.log())?);
                self.led_until = None;
            } else {
                self.clock = None;
                if !self.pending.is_empty() && self.led_until.is_none() {
                    self.led_until = Some(Instant::now());
                }
            }
        }
        // A deposed leader that has not heard what became of its proposals answers
        // them `Unknown` rather than keep their senders waiting.
        if self.led_until.is_some_and(|since| since.elapsed() >= UNKNOWN_AFTER) {
            self.led_until = None;
            for (_, tag) in self.pending.drain(..) {
                self.application.unanswered(tag, Unanswered::Unknown);
            }
        }
        self.run_calls();
        self.note_membership();
        self.publish(None);
        Ok(())
    }

    /// A node removed since the last step: the next incarnation it speaks with is taken
    /// as its own (`Transport::forget`), so a node whose data was lost rejoins once it
    /// has been removed and added back. (Not on an add: the node running then speaks
    /// before it is caught up, and a wiped one that came in between would be taken.)
    fn note_membership(&mut self) {
        let status = self.node.status();
        let members: BTreeSet<NodeId> =
            status.voters.iter().chain(status.learners.iter()).copied().collect();
        if members == self.members {
            return;
        }
        if let Some(transport) = &self.transport {
            for removed in self.members.difference(&members) {
                transport.forget(*removed);
            }
        }
        self.members = members;
    }

    fn fail(&mut self, reason: &str) {
        let reason = format!("the raft node stopped: {reason}");
        eprintln!("bourse: {reason}");
        self.failure = Some(reason.clone());
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
