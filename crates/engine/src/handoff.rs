//! What the stages hand each other: a sequenced batch with where each command came
//! from (`SequencedBatch`, `Origin`), and everything the applier is told
//! (`ToApplier`). Below the stages (`sequencer`, `replicated`, `applier`), which all
//! import it.

use bourse_core::Seq;
use bourse_journal::RecordBatch;

use crate::intake::{Correlation, Query, Submission};

/// Where a sequenced command came from: its session's slot (where its outcome goes) and
/// its correlation (what its outcome is found by).
#[derive(Clone, Copy)]
pub(crate) struct Origin {
    pub(crate) slot: u32,
    pub(crate) correlation: Correlation,
}

impl Origin {
    pub(crate) fn of(submission: &Submission) -> Origin {
        Origin { slot: submission.slot, correlation: submission.correlation }
    }
}

/// A batch on its way from the sequencer to the applier.
#[derive(Default)]
pub(crate) struct SequencedBatch {
    pub(crate) records: RecordBatch,
    pub(crate) origins: Vec<Origin>,
}

pub(crate) enum ToApplier {
    Batch(SequencedBatch),
    /// Commands that will never be released: the engine stopped before they were
    /// durable. Outcomes the applier holds (`sync` mode) fail with them.
    Fail {
        origins: Vec<Origin>,
        reason: String,
        failure: crate::intake::Failure,
    },
    Query(Query),
    /// `sync` mode: the records below `below` are durable; the applier releases the
    /// outcomes it holds for them.
    Durable {
        below: Seq,
    },
    Shutdown {
        last_crc: u32,
        journal_id: u64,
    },
}
