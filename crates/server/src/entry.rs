//! Order entry on a connection's own lane, shared by the gateways that speak JSON (the
//! pipelined HTTP loop, `http`, and WebSocket, `ws`): the requests a connection has in
//! flight, in the order they came, each until its answer is known; the matching of the
//! lane's outcomes to them (oldest first); and the answers, made by the same code as
//! the REST handlers'. It renders nothing itself (each gateway writes its own framing)
//! and keeps nothing past a request's answer.

use std::collections::VecDeque;
use std::sync::Arc;

use bourse_core::command::OrderCommand;
use bourse_engine::{Outcome, Released};
use serde_json::Value;

use crate::link::{Lane, LinkError, OrderRead, Reply};
use crate::rest::error::{ApiError, ApiResult};
use crate::rest::trading::{placed_answer_fields, shown_record};
use crate::rest::Shared;

/// What a request's answer needs once the engine has answered its command.
pub enum Work {
    /// A new order: its answer is written from its events.
    Place { account: String, client_id: String, order: OrderCommand<'static> },
    /// A cancel or amend: the order as it stands right after it, read in its wake
    /// (`Lane::read_order`).
    Show { read: OrderRead },
}

/// A request's answer (the error, if any, is the `Err` beside it).
pub enum Answer {
    /// A new order's `"fills":[…],"order":{…}`, as text without the braces.
    Placed(String),
    /// The order after a cancel or amend.
    Order(Value),
}

impl Answer {
    /// The answer as REST's body: `{"fills":…,"order":…}` or the order.
    pub fn into_rest_body(self) -> Vec<u8> {
        match self {
            Answer::Placed(fields) => {
                let mut body = Vec::with_capacity(fields.len() + 2);
                body.push(b'{');
                body.extend_from_slice(fields.as_bytes());
                body.push(b'}');
                body
            }
            Answer::Order(order) => order.to_string().into_bytes(),
        }
    }
}

struct Slot<M> {
    meta: M,
    /// The engine's correlation while its command is out.
    correlation: Option<bourse_engine::Correlation>,
    work: Option<Work>,
    answer: Option<ApiResult<Answer>>,
}

/// A connection's requests in flight, in the order they came; `M` is what the
/// gateway keeps of each (its route or op, its request id, when it came).
pub struct InFlight<M> {
    slots: VecDeque<Slot<M>>,
}

impl<M> Default for InFlight<M> {
    fn default() -> Self {
        InFlight { slots: VecDeque::new() }
    }
}

impl<M> InFlight<M> {
    pub fn len(&self) -> usize {
        self.slots.len()
    }

    pub fn is_empty(&self) -> bool {
        self.slots.is_empty()
    }

    /// A request whose command went to the lane as `correlation`.
    pub fn submitted(&mut self, meta: M, correlation: bourse_engine::Correlation, work: Work) {
        self.slots.push_back(Slot {
            meta,
            correlation: Some(correlation),
            work: Some(work),
            answer: None,
        });
    }

    /// A request answered at once (an error found before the engine), kept in line.
    pub fn answered(&mut self, meta: M, answer: ApiResult<Answer>) {
        self.slots.push_back(Slot { meta, correlation: None, work: None, answer: Some(answer) });
    }

    /// The oldest request, once its answer is known.
    pub fn pop_answered(&mut self) -> Option<(M, ApiResult<Answer>)> {
        self.slots.front()?.answer.as_ref()?;
        let slot = self.slots.pop_front()?;
        Some((slot.meta, slot.answer?))
    }

    /// Answers the requests whose outcomes `released` carries (a lane's outcomes come
    /// in submission order, so these are the oldest waiting ones).
    pub async fn take_released(
        &mut self,
        state: &Shared,
        lane: &mut Lane,
        released: &Arc<Released>,
    ) {
        let mut taken = 0;
        // Where the next outcome's request is, at the earliest: just after the last one.
        let mut from = 0;
        for (index, outcome) in released.outcomes.iter().enumerate() {
            let correlation = Some(outcome.correlation());
            let found = self.slots.range(from..).position(|slot| slot.correlation == correlation);
            let Some(position) = found.map(|offset| from + offset) else { continue };
            from = position + 1;
            let slot = &mut self.slots[position];
            taken += 1;
            slot.correlation = None;
            let work = slot.work.take();
            slot.answer = Some(match (outcome, work) {
                (Outcome::Failed { reason, .. }, _) => {
                    Err(LinkError::Failed(reason.clone()).into())
                }
                (Outcome::Applied(_), Some(work)) => {
                    answer(state, work, Reply::of(Arc::clone(released), index)).await
                }
                (Outcome::Applied(_), None) => Err(ApiError::malformed("no request")),
            });
        }
        lane.taken(taken);
    }
}

/// The answer to a request whose command got `reply`, as the REST handler makes it.
async fn answer(state: &Shared, work: Work, reply: Reply) -> ApiResult<Answer> {
    match work {
        Work::Place { account, client_id, order } => {
            placed_answer_fields(state, &account, &client_id, &order, &reply)
                .await
                .map(Answer::Placed)
        }
        Work::Show { read } => {
            shown_record(state, &reply, read.wait().await?).await.map(Answer::Order)
        }
    }
}
