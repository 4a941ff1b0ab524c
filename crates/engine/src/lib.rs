//! Bourse's engine: the running pipeline around the deterministic core.
//!
//! It owns the bounded intake queue, the sequencer (sequence numbers, timestamps, group
//! commit to the journal), the applier thread that runs `bourse_core::Venue`, the
//! release of outcomes only once their commands are durable, recovery at start, and
//! snapshots. It holds no business rule (the core does) and no protocol (the gateways
//! do); on a storage failure it stops rather than release anything not durable.

mod applier;
pub mod config;
pub mod intake;
pub mod pipeline;
pub mod recovery;
pub mod retention;
mod sequencer;
mod snapshotter;

pub use bourse_core::BookNote;
pub use config::{Durability, EngineConfig};
pub use intake::{
    CommandResult, Correlation, Outcome, Released, ResultSink, SessionNumber, SubmitError,
};
pub use pipeline::{
    DurableWatermark, Engine, Session, SlowSync, StartError, StartReport, StatsSnapshot,
    ACTIVITY_MARKER, SLOW_SYNC_NS,
};
pub use recovery::{recover, recover_venue, Recovered, RecoveryError};
