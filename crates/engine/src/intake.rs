//! What producers hand the engine and what they get back.
//!
//! A producer (a gateway connection, a tool, a bench thread) opens a `Session` with a
//! `ResultSink`, submits commands each tagged with a request number of its own, and gets
//! every command's `Outcome` through the sink, in sequence order, once the command is
//! durable, with its `Correlation`: the session's number (which the engine never gives
//! twice) and the request number. The command is encoded to the journal's binary form
//! on the producer's thread, so the sequencer only copies bytes.

use std::cell::RefCell;
use std::ops::Range;
use std::sync::Arc;

use bourse_core::{BookNote, Command, Event, OrderId, Seq, TimestampNs};
use bourse_journal::record::PAYLOAD_LEN_MAX;
use bourse_journal::{encode_command, CodecError};

/// Payloads up to this many bytes travel inline (no allocation per command). With it a
/// `Submission` takes 136 bytes.
pub const INLINE_PAYLOAD_MAX: usize = 110;
// An inline payload's length is a `u8`; anything longer goes on the heap, and the
// journal takes every payload that fits inline.
const _: () = assert!(INLINE_PAYLOAD_MAX <= u8::MAX as usize);
const _: () = assert!(INLINE_PAYLOAD_MAX <= PAYLOAD_LEN_MAX);

/// A session's number: given by the engine when the session opens, never given again
/// for the engine's life (1, 2, 3, ...). The slot its sink occupies is another matter:
/// a closed session's slot is given to the next session opened, so a closed session's
/// late outcomes may reach the new session's sink, tagged with the closed session's
/// number (see `Session::open_sibling`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct SessionNumber(pub u64);

impl std::fmt::Display for SessionNumber {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        std::fmt::Display::fmt(&self.0, formatter)
    }
}

/// What an outcome is found by: the session that submitted the command and the
/// producer's own number for the request (`Session::submit`). Unique for the engine's
/// life as long as a session does not repeat its request numbers.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Correlation {
    pub session: SessionNumber,
    pub request: u64,
}

/// A command's journal payload.
pub(crate) enum Payload {
    Inline { len: u8, bytes: [u8; INLINE_PAYLOAD_MAX] },
    Heap(Box<[u8]>),
}

impl Payload {
    pub(crate) fn encode(command: &Command<'_>) -> Result<Payload, CodecError> {
        thread_local! {
            static SCRATCH: RefCell<Vec<u8>> = RefCell::new(Vec::with_capacity(256));
        }
        SCRATCH.with_borrow_mut(|buffer| {
            buffer.clear();
            encode_command(command, buffer)?;
            // Every command encodes to its tag at least; the journal refuses nothing
            // this returns.
            debug_assert!(!buffer.is_empty() && buffer.len() <= PAYLOAD_LEN_MAX);
            if buffer.len() <= INLINE_PAYLOAD_MAX {
                let mut bytes = [0u8; INLINE_PAYLOAD_MAX];
                bytes[..buffer.len()].copy_from_slice(buffer);
                Ok(Payload::Inline { len: buffer.len() as u8, bytes })
            } else {
                Ok(Payload::Heap(buffer.as_slice().into()))
            }
        })
    }

    pub(crate) fn bytes(&self) -> &[u8] {
        match self {
            Payload::Inline { len, bytes } => &bytes[..*len as usize],
            Payload::Heap(bytes) => {
                // Only what does not fit inline goes on the heap.
                debug_assert!(bytes.len() > INLINE_PAYLOAD_MAX);
                bytes
            }
        }
    }
}

/// One command waiting for the sequencer.
pub(crate) struct Submission {
    /// The slot of the session's sink (`Shared::sessions`).
    pub(crate) slot: u32,
    pub(crate) correlation: Correlation,
    pub(crate) payload: Payload,
}

/// A read of the state, run on the applier's thread after every command submitted
/// before it.
pub(crate) type Query = Box<dyn FnOnce(&bourse_core::venue::Venue) + Send>;

pub(crate) enum Intake {
    Command(Submission),
    Query(Query),
    /// Sequence everything before this, sync, apply, then stop.
    Shutdown,
}

/// What happened to one submitted command.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// Sequenced, durable (per the durability mode) and applied.
    Applied(CommandResult),
    /// Never released: the engine stopped (a storage failure) before the command was
    /// durable, or a node of a cluster lost its leadership (`failure` says which). It
    /// may or may not be in the journal; its outcome can be learned from the state (the
    /// order by its client id), after a restart or from the new leader.
    Failed { correlation: Correlation, reason: String, failure: Failure },
}

/// Why a command was never answered with a result.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Failure {
    /// The engine stopped (a storage failure, or a shutdown) first.
    Stopped,
    /// A node of a cluster that did not lead (any more) took it, and it is not applied:
    /// `leader` leads, if known.
    NotLeader { leader: Option<u64> },
    /// Taken by a leader that lost its leadership before it was committed, and another
    /// entry took its place: it is not applied.
    Lost,
    /// Taken by a leader that lost its leadership before it learned the outcome: it may
    /// or may not be applied (retry with the same client order id).
    Unknown,
}

impl Outcome {
    pub fn correlation(&self) -> Correlation {
        match self {
            Outcome::Applied(result) => result.correlation,
            Outcome::Failed { correlation, .. } => *correlation,
        }
    }
}

/// A command's result; its events are in the `Released` it came with.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CommandResult {
    pub correlation: Correlation,
    pub seq: Seq,
    pub ts: TimestampNs,
    /// The exchange's id of the order the command acted on, when the engine keeps the
    /// order activity: a new order's (`OrderId::of(seq)`, if accepted), or the order a
    /// cancel or amend named (if accepted). `None` otherwise (`bourse_core::Applied`).
    pub order_id: Option<OrderId>,
    /// `accepted` or `rejected` first, then trades, dones, amends: `Released::events`.
    pub events: Range<usize>,
    /// The events as replay-format lines (when the engine renders them):
    /// `Released::rendered`.
    pub rendered: Range<usize>,
}

/// Outcomes released together to one session, in sequence order, with their events in
/// two shared buffers (so the engine allocates per release, not per command).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Released {
    pub outcomes: Vec<Outcome>,
    pub events: Vec<Event>,
    pub rendered: String,
    /// For the tap only: the book changes of these commands that their events do not
    /// spell out, in sequence order (at most one per command).
    pub notes: Vec<BookNote>,
    /// When the engine handed these outcomes to the sink (the clock of
    /// `CommandResult::ts`): the moment of their release.
    pub released_ns: TimestampNs,
}

impl Released {
    pub fn events_of(&self, result: &CommandResult) -> &[Event] {
        &self.events[result.events.clone()]
    }

    pub fn rendered_of(&self, result: &CommandResult) -> &str {
        &self.rendered[result.rendered.clone()]
    }

    pub fn is_empty(&self) -> bool {
        self.outcomes.is_empty() && self.notes.is_empty()
    }
}

/// Where a session's outcomes go. Called from the engine thread with each release of
/// the session's outcomes, in sequence order; it must not block for long (a gateway
/// queues them for its connection).
pub trait ResultSink: Send + Sync {
    fn deliver(&self, released: Released);
}

impl ResultSink for crossbeam_channel::Sender<Released> {
    fn deliver(&self, released: Released) {
        // A receiver that is gone has disconnected: its outcomes have nowhere to go.
        let _ = self.send(released);
    }
}

/// Why a submission was refused. Nothing was sequenced.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum SubmitError {
    #[error("busy: {capacity} commands are already waiting to be sequenced; retry later")]
    Busy { capacity: usize },
    #[error("the engine has stopped: {0}")]
    Stopped(String),
    #[error("invalid command: {0}")]
    Invalid(#[from] CodecError),
    /// A node of a cluster that does not lead takes no command: `leader` is the node that
    /// does, if known (the gateways name its address).
    #[error("not the leader{}", match .leader { Some(leader) => format!(": node {leader} leads"), None => ": no leader is known".to_string() })]
    NotLeader { leader: Option<u64> },
}

impl SubmitError {
    pub fn code(&self) -> &'static str {
        match self {
            SubmitError::Busy { .. } => "busy",
            SubmitError::Stopped(_) => "engine_stopped",
            SubmitError::Invalid(_) => "invalid_command",
            SubmitError::NotLeader { .. } => "not_leader",
        }
    }
}

pub(crate) type SharedSink = Arc<dyn ResultSink>;

#[cfg(test)]
mod tests {
    use super::*;

    /// A submission is copied into the intake queue's slot and out again: its size is
    /// the inline payload's plus its routing (the slot, the correlation).
    #[test]
    fn a_submission_stays_within_its_budget() {
        assert!(std::mem::size_of::<Submission>() <= 136, "{}", std::mem::size_of::<Submission>());
        assert!(std::mem::size_of::<Intake>() <= 136, "{}", std::mem::size_of::<Intake>());
    }
}
