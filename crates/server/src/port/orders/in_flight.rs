//! A connection's order-entry requests in flight, in the order they came, each until
//! its answer is known; the matching of the connection's lane's outcomes to them; and
//! the limit on how many may wait. Every gateway that keeps a connection (the
//! pipelined HTTP loop, WebSocket, binary TCP) uses this, so outcomes are matched one
//! way. It renders nothing (each gateway writes its own protocol) and keeps nothing
//! past a request's answer.

use std::collections::VecDeque;
use std::sync::Arc;

use bourse_engine::{Correlation, Outcome, Released};

use super::answer::{Answer, Detail};
use super::request::Request;
use super::{OrderEntry, Work};
use crate::link::{Lane, LaneReleases, Reply};
use crate::port::error::{ApiError, ApiResult, ErrorCode};
use crate::port::session::Session;

/// Requests of one connection waiting for the engine, at most: at this many the
/// connection is not read until answers go out (TCP flow control holds the client
/// back).
pub const IN_FLIGHT_PER_CONNECTION_MAX: usize = 4_096;

/// A request's command on its way to the engine, to `push` in line.
#[must_use = "a submitted request is answered only once it is pushed in line"]
pub struct Submitted {
    correlation: Correlation,
    work: Work,
}

struct Slot<M> {
    meta: M,
    /// The engine's correlation number while its command is out.
    correlation: Option<Correlation>,
    work: Option<Work>,
    answer: Option<ApiResult<Answer>>,
}

/// A connection's requests in flight and its lane into the engine; `M` is what the
/// gateway keeps of each request (its route or op, its request id, when it came).
pub struct InFlight<M> {
    lane: Lane,
    slots: VecDeque<Slot<M>>,
}

impl<M> InFlight<M> {
    /// A connection's own lane into the engine, and the channel its outcomes come
    /// back on (the gateway's loop waits on it beside its socket).
    pub fn open(entry: &OrderEntry) -> (InFlight<M>, LaneReleases) {
        let (lane, releases) = entry.link().open_lane();
        (InFlight { lane, slots: VecDeque::new() }, releases)
    }

    pub fn len(&self) -> usize {
        self.slots.len()
    }

    pub fn is_empty(&self) -> bool {
        self.slots.is_empty()
    }

    /// At the limit: the connection reads no more requests until answers go out (TCP
    /// flow control then holds the client back).
    pub fn is_full(&self) -> bool {
        self.slots.len() >= IN_FLIGHT_PER_CONNECTION_MAX
    }

    /// Checks `request` and submits its command on the lane; `push` then keeps it in
    /// line with what the gateway keeps of it. A request refused before the engine is
    /// the error: the gateway answers it at once, or keeps it in line (`refused`).
    pub async fn submit(
        &mut self,
        entry: &OrderEntry,
        session: &Session,
        request: &Request<'_>,
        detail: Detail,
    ) -> ApiResult<Submitted> {
        let (correlation, work) = entry.submit(&mut self.lane, session, request, detail).await?;
        Ok(Submitted { correlation, work })
    }

    /// Keeps a request `submit` sent (on this lane) in line, until its answer.
    pub fn push(&mut self, meta: M, submitted: Submitted) {
        let Submitted { correlation, work } = submitted;
        debug_assert!(
            self.slots
                .iter()
                .rev()
                .find_map(|slot| slot.correlation)
                .is_none_or(|last| last != correlation),
            "a lane numbers its commands apart"
        );
        self.slots.push_back(Slot {
            meta,
            correlation: Some(correlation),
            work: Some(work),
            answer: None,
        });
    }

    /// A request answered at once (refused before the engine), kept in line so that
    /// answers go out in the order the requests came.
    pub fn refused(&mut self, meta: M, error: ApiError) {
        self.slots.push_back(Slot {
            meta,
            correlation: None,
            work: None,
            answer: Some(Err(error)),
        });
    }

    /// The busy answer to a request that came while `is_full` (read regardless).
    pub fn busy_error() -> ApiError {
        let mut busy = ApiError::new(ErrorCode::Busy,
            format!(
                "{IN_FLIGHT_PER_CONNECTION_MAX} requests of this connection wait for their answers; read them first"
            ),
        );
        busy.retry_after_s = Some(1);
        busy
    }

    /// The oldest request, once its answer is known.
    pub fn pop_answered(&mut self) -> Option<(M, ApiResult<Answer>)> {
        self.slots.front()?.answer.as_ref()?;
        let slot = self.slots.pop_front()?;
        Some((slot.meta, slot.answer?))
    }

    /// Answers the requests of `released` and of every release already waiting behind
    /// it on the lane (taken together, they go out in one write).
    pub async fn take_released_and_waiting(
        &mut self,
        entry: &OrderEntry,
        released: &Arc<Released>,
        releases: &mut LaneReleases,
    ) {
        self.take_released(entry, released).await;
        while let Ok(released) = releases.try_recv() {
            self.take_released(entry, &released).await;
        }
    }

    /// Answers the requests whose outcomes `released` carries. A lane's outcomes come
    /// in submission order, so each is at or after the one before it.
    pub async fn take_released(&mut self, entry: &OrderEntry, released: &Arc<Released>) {
        let mut taken = 0;
        // Where the next outcome's request is, at the earliest: just after the last one.
        let mut from = 0;
        for (index, outcome) in released.outcomes.iter().enumerate() {
            let correlation = Some(outcome.correlation());
            let found = self.slots.range(from..).position(|slot| slot.correlation == correlation);
            let Some(position) = found.map(|offset| from + offset) else { continue };
            debug_assert!(
                self.slots.range(..position).all(|slot| slot.correlation.is_none()),
                "a lane's outcomes come in the order its commands went"
            );
            from = position + 1;
            taken += 1;
            let slot = &mut self.slots[position];
            slot.correlation = None;
            let work = slot.work.take();
            let answer = match (outcome, work) {
                (Outcome::Failed { reason, failure, .. }, _) => {
                    Err(entry.link().outcome_failed(reason, *failure).into())
                }
                (Outcome::Applied(_), Some(work)) => {
                    entry.answer(work, Reply::of(Arc::clone(released), index)).await
                }
                (Outcome::Applied(_), None) => Err(ApiError::malformed("no request")),
            };
            self.slots[position].answer = Some(answer);
        }
        self.lane.taken(taken);
    }
}
