//! Bourse's engine: the running pipeline around the deterministic core.
//!
//! It owns the bounded intake queue, the sequencer (sequence numbers, timestamps, group
//! commit to the journal), the applier thread that runs `bourse_core::Venue`, the
//! release of outcomes only once their commands are durable, recovery at start, and
//! snapshots. It holds no business rule (the core does) and no protocol (the gateways
//! do); on a storage failure it stops rather than release anything not durable.
//!
//! Modules, bottom up: `config`, `intake` (what producers hand in and get back),
//! `stats`, `digests` (a cluster's nodes' state digests, compared) and `shared` (what
//! the threads share), `priority` (how work off the order
//! path gives way to it), `recovery` and `retention`, `handoff` (what the stages
//! hand each other); the stages `sequencer`,
//! `applier` and `snapshotter`, and in a cluster `replicated` (committed entries to the
//! journal and the applier, on the Raft node's thread); `pipeline`, which starts them.

mod applier;
pub mod config;
mod digests;
mod handoff;
pub mod intake;
pub mod pipeline;
pub mod priority;
pub mod recovery;
mod replicated;
pub mod retention;
mod sequencer;
mod shared;
mod snapshotter;
mod stats;

pub use bourse_cluster::{
    MembershipChange, NodeConfig, NodeId, PeerMap, ReplicaConfig, ReplicaStatus,
    Status as NodeStatus, StatusReader,
};
pub use bourse_core::BookNote;
pub use config::{
    ClusterSettings, Durability, EngineConfig, Records, SharedRecords, DIGEST_EVERY_DEFAULT,
};
pub use intake::{
    CommandResult, Correlation, Failure, Outcome, Released, ResultSink, SessionNumber, SubmitError,
};
pub use pipeline::{
    DurableWatermark, Engine, RecordProposer, Session, StartError, StartReport, ACTIVITY_MARKER,
};
pub use priority::{run_in_background, run_when_idle, BACKGROUND_NICE};
pub use recovery::{recover, recover_venue, Recovered, RecoveryError};
pub use stats::{SlowSync, StatsSnapshot, SLOW_SYNC_NS};
