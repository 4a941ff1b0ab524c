//! One node of a cluster: raft-rs's `RawNode` over the node's `RaftLog`, driven one step
//! at a time by whoever owns it (the server's replication thread, or the simulation).
//!
//! The owner gives it what happens (`tick` as time passes, `receive` for a peer's
//! message, `propose` for a batch to replicate) and then calls `advance`, which does
//! what raft-rs asks in the order Raft needs: a leader's messages go out at once (its
//! followers write while it writes), the log's new entries and the vote are made durable
//! (`sync`), and only then do the messages that promise durability (a follower's "I hold
//! it", a vote) go out and committed entries reach the application. Conf changes are
//! applied here, as raft-rs requires, before the application sees them.
//!
//! It reads no clock and makes no thread: what it does depends only on what it was
//! given, so the simulation reproduces a run from its seed.

use bytes::Bytes;
use protobuf::Message as _;
use raft::eraftpb::{
    ConfChange, ConfChangeType, ConfChangeV2, Entry, EntryType, Message, Snapshot,
};
use raft::{RawNode, SnapshotStatus, StateRole};

use crate::disk::Disk;
use crate::log::{LogError, RaftLog};

/// A node's id in its cluster (never 0, raft-rs's "none").
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct NodeId(pub u64);

impl std::fmt::Display for NodeId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "node {}", self.0)
    }
}

#[derive(Clone, Debug)]
pub struct NodeConfig {
    pub id: NodeId,
    /// Ticks without a leader before a follower stands for election: each node draws
    /// its timeout between this and twice this, again at every term.
    pub election_ticks: usize,
    /// Ticks between a leader's heartbeats.
    pub heartbeat_ticks: usize,
    /// The last entry the application's state holds (after a restart: raft-rs hands
    /// over committed entries after it).
    pub applied: u64,
    /// The most bytes of entries in one append message.
    pub max_bytes_per_message: u64,
    /// Append messages a leader has in flight to one follower.
    pub max_inflight_messages: usize,
    /// The simulation fixes each node's election timeout (`[min, max)` ticks) so that a
    /// seed replays exactly; `None` draws it as Raft does.
    pub election_ticks_range: Option<(usize, usize)>,
}

impl NodeConfig {
    pub fn new(id: NodeId) -> NodeConfig {
        NodeConfig {
            id,
            election_ticks: 10,
            heartbeat_ticks: 2,
            applied: 0,
            max_bytes_per_message: 4 << 20,
            max_inflight_messages: 256,
            election_ticks_range: None,
        }
    }

    fn raft_config(&self) -> raft::Config {
        let (min_election_tick, max_election_tick) = self.election_ticks_range.unwrap_or((0, 0));
        raft::Config {
            id: self.id.0,
            election_tick: self.election_ticks,
            heartbeat_tick: self.heartbeat_ticks,
            min_election_tick,
            max_election_tick,
            applied: self.applied,
            max_size_per_msg: self.max_bytes_per_message,
            max_inflight_msgs: self.max_inflight_messages,
            // A leader that has not heard from a majority for an election timeout steps
            // down: a leader cut off from the majority stops acting as one.
            check_quorum: true,
            // A node cut off and back does not depose a working leader.
            pre_vote: true,
            ..Default::default()
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum NodeError {
    #[error(transparent)]
    Log(#[from] LogError),
    #[error("raft: {0}")]
    Raft(#[from] raft::Error),
}

/// Where a proposal went in the log: it is the application's once an entry at `index`
/// with this `term` is committed (an entry of another term there means it was lost).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Proposed {
    pub term: u64,
    pub index: u64,
}

/// A proposal refused: this node does not lead; `leader` is the one it knows of.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct NotLeader {
    pub leader: Option<NodeId>,
}

/// A change of membership, one node at a time.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MembershipChange {
    /// A voter (a learner is promoted).
    Add(NodeId),
    /// A learner: it gets the log but does not vote or count towards a majority, so a
    /// node can catch up before it is made a voter.
    AddLearner(NodeId),
    /// Out of the cluster, voter or learner.
    Remove(NodeId),
}

/// Node ids in ascending order (a configuration holds them in no particular order).
fn sorted(ids: &[u64]) -> Vec<NodeId> {
    let mut sorted: Vec<NodeId> = ids.iter().map(|id| NodeId(*id)).collect();
    sorted.sort();
    sorted
}

/// What `advance` hands the application, in the order it must act on it.
pub trait Applied {
    /// Sends a message to its node (a lost one is Raft's to resend).
    fn send(&mut self, message: Message);
    /// A leader's snapshot: the application's state becomes the one in `snapshot.data`
    /// (committed entries after it follow).
    fn install(&mut self, snapshot: &Snapshot);
    /// A committed entry, in index order. Conf changes come too (already applied).
    fn apply(&mut self, entry: &Entry);
    /// The node now knows `leader` (`None`: nobody) in `term`.
    fn leadership(&mut self, leader: Option<NodeId>, term: u64);
}

/// A node's view, for `cluster status` and `/metrics`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Status {
    pub id: NodeId,
    pub leader: Option<NodeId>,
    pub term: u64,
    pub is_leader: bool,
    pub commit: u64,
    pub last_index: u64,
    /// As leader: each node's last entry known to match the leader's log.
    pub matched: Vec<(NodeId, u64)>,
    pub voters: Vec<NodeId>,
    pub learners: Vec<NodeId>,
}

pub struct Node<D: Disk> {
    raw: RawNode<RaftLog<D>>,
    id: NodeId,
    /// The leadership last told to the application.
    told: (Option<NodeId>, u64),
}

fn known(id: u64) -> Option<NodeId> {
    (id != raft::INVALID_ID).then_some(NodeId(id))
}

impl<D: Disk> Node<D> {
    pub fn new(config: &NodeConfig, log: RaftLog<D>) -> Result<Node<D>, NodeError> {
        let mut log = log;
        log.raise_commit_to_applied(config.applied);
        let logger = slog::Logger::root(slog::Discard, slog::o!());
        let raw = RawNode::new(&config.raft_config(), log, &logger)?;
        Ok(Node { raw, id: config.id, told: (None, 0) })
    }

    pub fn id(&self) -> NodeId {
        self.id
    }

    pub fn is_leader(&self) -> bool {
        self.raw.raft.state == StateRole::Leader
    }

    pub fn leader(&self) -> Option<NodeId> {
        known(self.raw.raft.leader_id)
    }

    pub fn term(&self) -> u64 {
        self.raw.raft.term
    }

    pub fn log(&self) -> &RaftLog<D> {
        self.raw.store()
    }

    pub fn into_log(self) -> RaftLog<D> {
        let RawNode { raft, .. } = self.raw;
        raft.r.raft_log.store
    }

    /// One tick of the node's clock (heartbeats and election timeouts count them).
    pub fn tick(&mut self) {
        self.raw.tick();
    }

    /// A peer's message. Messages for another node, from a node outside the cluster or
    /// of a local kind are refused (and counted by the caller); raft-rs ignores stale ones.
    pub fn receive(&mut self, message: Message) -> Result<(), raft::Error> {
        if message.to != self.id.0 {
            return Err(raft::Error::StepPeerNotFound);
        }
        self.raw.step(message)
    }

    /// Tells the node how sending a snapshot (`MsgSnapshot`) to `to` ended: until it
    /// knows, its leader sends that node nothing more.
    pub fn report_snapshot(&mut self, to: NodeId, delivered: bool) {
        let status = if delivered { SnapshotStatus::Finish } else { SnapshotStatus::Failure };
        self.raw.report_snapshot(to.0, status);
    }

    /// Tells the node a message to `to` could not be sent (its connection is down): its
    /// leader probes that node again rather than streaming appends it will not get.
    pub fn report_unreachable(&mut self, to: NodeId) {
        self.raw.report_unreachable(to.0);
    }

    /// Appends `data` to the log if this node leads.
    pub fn propose(&mut self, data: Vec<u8>) -> Result<Proposed, NotLeader> {
        if !self.is_leader() {
            return Err(NotLeader { leader: self.leader() });
        }
        let term = self.raw.raft.term;
        match self.raw.propose(Vec::new(), data) {
            Ok(()) => Ok(Proposed { term, index: self.raw.raft.raft_log.last_index() }),
            // Dropped: a leadership transfer is under way.
            Err(_) => Err(NotLeader { leader: self.leader() }),
        }
    }

    /// Appends a note (an entry without a batch, whose context is `note`) if this node
    /// leads: what every node should learn at that point of the log.
    pub fn propose_note(&mut self, note: Vec<u8>) -> Result<Proposed, NotLeader> {
        if !self.is_leader() {
            return Err(NotLeader { leader: self.leader() });
        }
        let term = self.raw.raft.term;
        match self.raw.propose(note, Vec::new()) {
            Ok(()) => Ok(Proposed { term, index: self.raw.raft.raft_log.last_index() }),
            Err(_) => Err(NotLeader { leader: self.leader() }),
        }
    }

    /// Proposes adding or removing a node, if this node leads and no other change is
    /// in flight.
    pub fn propose_membership(&mut self, change: MembershipChange) -> Result<Proposed, NotLeader> {
        if !self.is_leader() {
            return Err(NotLeader { leader: self.leader() });
        }
        let (change_type, node) = match change {
            MembershipChange::Add(node) => (ConfChangeType::AddNode, node),
            MembershipChange::AddLearner(node) => (ConfChangeType::AddLearnerNode, node),
            MembershipChange::Remove(node) => (ConfChangeType::RemoveNode, node),
        };
        let conf_change = ConfChange { change_type, node_id: node.0, ..Default::default() };
        let term = self.raw.raft.term;
        match self.raw.propose_conf_change(Vec::new(), conf_change) {
            Ok(()) => Ok(Proposed { term, index: self.raw.raft.raft_log.last_index() }),
            Err(_) => Err(NotLeader { leader: self.leader() }),
        }
    }

    /// Compacts the log at `index`, which the application has applied and whose state
    /// there is `state` (what a lagging or new node is sent).
    pub fn compact(&mut self, index: u64, state: Bytes) -> Result<(), NodeError> {
        Ok(self.raw.mut_store().compact(index, state)?)
    }

    pub fn status(&self) -> Status {
        let raft = &self.raw.raft;
        let conf = self.raw.store().conf_state();
        let mut matched: Vec<(NodeId, u64)> = if self.is_leader() {
            raft.prs().iter().map(|(id, progress)| (NodeId(*id), progress.matched)).collect()
        } else {
            Vec::new()
        };
        matched.sort();
        Status {
            id: self.id,
            leader: self.leader(),
            term: raft.term,
            is_leader: self.is_leader(),
            commit: raft.raft_log.committed,
            last_index: raft.raft_log.last_index(),
            matched,
            voters: sorted(&conf.voters),
            learners: sorted(&conf.learners),
        }
    }

    /// Does what raft-rs has for the node to do, in Raft's order (see the module's
    /// text). A storage failure is returned and the node must stop: nothing it did not
    /// make durable may be acknowledged.
    pub fn advance(&mut self, to: &mut impl Applied) -> Result<(), NodeError> {
        while self.raw.has_ready() {
            let mut ready = self.raw.ready();
            for message in ready.take_messages() {
                to.send(message);
            }
            if !ready.snapshot().is_empty() {
                let snapshot = ready.snapshot().clone();
                self.raw.mut_store().install_snapshot(&snapshot)?;
                to.install(&snapshot);
            }
            let committed = ready.take_committed_entries();
            self.apply_committed(&committed, to)?;
            self.raw.mut_store().append(ready.entries())?;
            if let Some(hard_state) = ready.hs() {
                self.raw.mut_store().set_hard_state(hard_state)?;
            }
            if ready.must_sync() {
                self.raw.mut_store().sync()?;
            }
            for message in ready.take_persisted_messages() {
                to.send(message);
            }
            let mut light = self.raw.advance(ready);
            if let Some(commit) = light.commit_index() {
                self.raw.mut_store().set_commit(commit);
            }
            for message in light.take_messages() {
                to.send(message);
            }
            let committed = light.take_committed_entries();
            self.apply_committed(&committed, to)?;
            self.raw.advance_apply();
            self.tell_leadership(to);
        }
        Ok(())
    }

    fn apply_committed(
        &mut self,
        entries: &[Entry],
        to: &mut impl Applied,
    ) -> Result<(), NodeError> {
        for entry in entries {
            match entry.entry_type {
                EntryType::EntryNormal => {}
                EntryType::EntryConfChange | EntryType::EntryConfChangeV2 => {
                    self.apply_conf_change(entry)?;
                }
            }
            to.apply(entry);
        }
        Ok(())
    }

    /// A committed conf change entry. An empty one is raft-rs's own (leaving a joint
    /// configuration); one that does not parse was written by no node of ours and stops
    /// the node.
    fn apply_conf_change(&mut self, entry: &Entry) -> Result<(), NodeError> {
        let conf_state = if entry.entry_type == EntryType::EntryConfChange {
            let change = ConfChange::parse_from_bytes(&entry.data).map_err(|error| {
                LogError::Corrupt(format!("conf change at {}: {error}", entry.index))
            })?;
            self.raw.apply_conf_change(&change)?
        } else {
            let change = ConfChangeV2::parse_from_bytes(&entry.data).map_err(|error| {
                LogError::Corrupt(format!("conf change at {}: {error}", entry.index))
            })?;
            self.raw.apply_conf_change(&change)?
        };
        self.raw.mut_store().set_conf_state(conf_state)?;
        Ok(())
    }

    fn tell_leadership(&mut self, to: &mut impl Applied) {
        let now = (self.leader(), self.term());
        if now != self.told {
            self.told = now;
            to.leadership(now.0, now.1);
        }
    }
}
