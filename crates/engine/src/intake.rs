//! What producers hand the engine and what they get back.
//!
//! A producer (a gateway connection, a tool, a bench thread) opens a `Session` with a
//! `ResultSink`, submits commands tagged with its own correlation number, and gets
//! every command's `Outcome` through the sink, in sequence order, once the command is
//! durable. The command is encoded to the journal's binary form on the producer's
//! thread, so the sequencer only copies bytes.

use std::cell::RefCell;
use std::ops::Range;
use std::sync::Arc;

use bourse_core::{BookNote, Command, Event};
use bourse_journal::{encode_command, CodecError};

/// Payloads up to this many bytes travel inline (no allocation per command).
pub const INLINE_PAYLOAD_MAX: usize = 110;

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
            Payload::Heap(bytes) => bytes,
        }
    }
}

/// One command waiting for the sequencer.
pub(crate) struct Submission {
    pub(crate) session: u32,
    pub(crate) correlation: u64,
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
    /// durable. It may or may not be in the journal; after a restart its outcome can
    /// be learned from the state (the order by its client id).
    Failed { correlation: u64, reason: String },
}

impl Outcome {
    pub fn correlation(&self) -> u64 {
        match self {
            Outcome::Applied(result) => result.correlation,
            Outcome::Failed { correlation, .. } => *correlation,
        }
    }
}

/// A command's result; its events are in the `Released` it came with.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CommandResult {
    pub correlation: u64,
    pub seq: u64,
    pub ts: u64,
    /// The exchange's id of the order the command acted on, when the engine keeps the
    /// order activity: a new order's (its `seq`, if accepted), or the order a cancel or
    /// amend named (if remembered). `None` otherwise.
    pub order_id: Option<u64>,
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
    /// When the engine handed these outcomes to the sink, in ns since the Unix epoch
    /// (the clock of `CommandResult::ts`): the moment of their release.
    pub released_ns: u64,
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
}

impl SubmitError {
    pub fn code(&self) -> &'static str {
        match self {
            SubmitError::Busy { .. } => "busy",
            SubmitError::Stopped(_) => "engine_stopped",
            SubmitError::Invalid(_) => "invalid_command",
        }
    }
}

pub(crate) type SharedSink = Arc<dyn ResultSink>;
