//! Bourse's replication: several nodes agree on one log, so that the venue survives the
//! loss of any minority of them.
//!
//! It owns the Raft log as each node keeps it (`log`: entries, the vote and the
//! compaction snapshot, durable before anything is acknowledged), the peer protocol
//! (`wire`: Raft's messages as bytes, decoded without a panic whatever arrives) and the
//! node (`node`: TiKV's raft-rs driven one step at a time, saying what to send, what to
//! apply and who leads). Election, log matching and membership are raft-rs's; nothing
//! here decides them. It numbers the items an entry carries (`batch`) but never
//! interprets them (the engine does), never
//! reads a clock (ticks are given to it) in the node itself: the same node runs in the
//! server (`replica`) and, under a seeded scheduler with a simulated disk and network,
//! in the tests (`tests/simulation.rs`).
//!
//! Modules, bottom up: `codec` (fields in bytes), `batch` (what an entry carries: items
//! numbered in the log's order, and the leader's time), `disk` (the files a node keeps, real
//! or simulated), `log`, `wire`, `node`; then what runs a node for real: `transport`
//! (TCP connections between nodes, a thread per connection) and `replica` (the node on
//! its own thread, ticked by the clock). The simulation uses everything below them.

pub mod batch;
pub mod codec;
pub mod disk;
pub mod log;
pub mod node;
pub mod replica;
pub mod transport;
pub mod wire;

pub use disk::{Disk, FsDisk};
pub use log::{LogError, RaftLog};
pub use node::{
    Applied, MembershipChange, Node, NodeConfig, NodeError, NodeId, NotLeader, Proposed, Status,
};
pub use raft::eraftpb::{Entry, EntryType, Message, MessageType, Snapshot};
pub use replica::{
    Application, Call, Noter, Replica, ReplicaConfig, ReplicaStatus, StatusReader, Unanswered,
};
pub use transport::PeerMap;
