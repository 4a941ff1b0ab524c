//! Who is in the cluster: adding a node (as a learner that catches up from the log,
//! then as a voter) and removing one, on the leader. The consensus library makes the
//! change (`bourse_engine::MembershipChange`, one node at a time); this waits until
//! the leader's view shows it, so the caller learns whether it was made.
//!
//! A node's data lost (a wiped disk) is a removal and an addition: removed, the node
//! counts in no majority and no vote it gives counts, so what it forgot can do no
//! harm; added back as a learner, it catches up from the log before it votes again
//! (`docs/cluster.md`, "Membership").

use std::sync::Arc;
use std::time::{Duration, Instant};

use bourse_engine::{MembershipChange, NodeId, NodeStatus, RecordProposer, ReplicaStatus};
use serde_json::{json, Value};

use crate::link::{EngineLink, LinkError};
use crate::port::error::{ApiError, ApiResult, ErrorCode};

/// How long a change may take to show in the leader's view once proposed.
const CHANGE_WAIT: Duration = Duration::from_secs(10);
/// How long one request waits for a new learner to catch up before it answers `busy`
/// (the learner stays; the next request promotes it once it has caught up).
const CATCH_UP_WAIT: Duration = Duration::from_secs(20);
/// How often the leader's view is looked at while waiting.
const POLL: Duration = Duration::from_millis(50);

pub struct Membership {
    proposer: RecordProposer,
    link: Arc<EngineLink>,
}

impl Membership {
    pub fn new(proposer: RecordProposer, link: Arc<EngineLink>) -> Membership {
        Membership { proposer, link }
    }

    /// Adds node `node` (one of the cluster file's) as a voter: first as a learner,
    /// which gets the log; once it holds what was committed when it was added, as a
    /// voter. Already a voter: nothing to do.
    pub async fn add(&self, node: u64) -> ApiResult<Value> {
        self.known(node)?;
        let status = self.leader_status()?;
        if status.status.voters.contains(&NodeId(node)) {
            return Ok(self.shown(node, "already a voter"));
        }
        if !status.status.learners.contains(&NodeId(node)) {
            self.propose(MembershipChange::AddLearner(NodeId(node)))?;
            self.wait_for(CHANGE_WAIT, |status| status.learners.contains(&NodeId(node)))
                .await
                .map_err(|_| self.not_made(node, "added as a learner"))?;
        }
        let target = self.leader_status()?.status.commit;
        let caught_up = |status: &NodeStatus| {
            status.matched.iter().any(|(id, matched)| *id == NodeId(node) && *matched >= target)
        };
        if self.wait_for(CATCH_UP_WAIT, caught_up).await.is_err() {
            let matched = self
                .leader_status()?
                .status
                .matched
                .iter()
                .find(|(id, _)| *id == NodeId(node))
                .map_or(0, |(_, matched)| *matched);
            return Err(ApiError::new(
                ErrorCode::Busy,
                format!(
                    "node {node} is a learner and has not caught up yet (it holds the log to \
                     {matched} of {target}): is it running? Add it again to make it a voter"
                ),
            )
            .retry_after(1));
        }
        self.propose(MembershipChange::Add(NodeId(node)))?;
        self.wait_for(CHANGE_WAIT, |status| status.voters.contains(&NodeId(node)))
            .await
            .map_err(|_| self.not_made(node, "made a voter"))?;
        Ok(self.shown(node, "added"))
    }

    /// Removes node `node` (voter or learner). Not in the cluster: nothing to do. The
    /// leader does not remove itself.
    pub async fn remove(&self, node: u64) -> ApiResult<Value> {
        let status = self.leader_status()?;
        if status.status.id == NodeId(node) {
            return Err(ApiError::malformed(format!(
                "node {node} leads: a leader does not remove itself; stop it, and remove it \
                 on the next leader"
            )));
        }
        let member = |status: &NodeStatus| {
            status.voters.contains(&NodeId(node)) || status.learners.contains(&NodeId(node))
        };
        if !member(&status.status) {
            return Ok(self.shown(node, "not a member"));
        }
        if status.status.voters.len() <= 2 && status.status.voters.contains(&NodeId(node)) {
            return Err(ApiError::malformed(format!(
                "removing node {node} would leave one voter: a cluster keeps at least two"
            )));
        }
        self.propose(MembershipChange::Remove(NodeId(node)))?;
        self.wait_for(CHANGE_WAIT, |status| !member(status))
            .await
            .map_err(|_| self.not_made(node, "removed"))?;
        Ok(self.shown(node, "removed"))
    }

    fn known(&self, node: u64) -> ApiResult<()> {
        match self.link.directory().node(node) {
            Some(_) => Ok(()),
            None => Err(ApiError::malformed(format!(
                "node {node} is not in the cluster's file: every node is listed there \
                 (its addresses), with `joins = true` if it was not one of the first voters"
            ))),
        }
    }

    /// The node's view, if it leads.
    fn leader_status(&self) -> ApiResult<ReplicaStatus> {
        self.link.leads().map_err(|not_leader| ApiError::from(LinkError::NotLeader(not_leader)))?;
        self.link
            .cluster_status()
            .ok_or_else(|| ApiError::malformed("this server is not a node of a cluster"))
    }

    fn propose(&self, change: MembershipChange) -> ApiResult<()> {
        self.proposer
            .propose_membership(change)
            .map_err(|error| ApiError::from(self.link.refused(error)))
    }

    /// Waits until the leader's view satisfies `done`; `Err` at `within`, or once this
    /// node no longer leads.
    async fn wait_for(
        &self,
        within: Duration,
        done: impl Fn(&NodeStatus) -> bool,
    ) -> ApiResult<()> {
        let deadline = Instant::now() + within;
        loop {
            let status = self.leader_status()?;
            if done(&status.status) {
                return Ok(());
            }
            if Instant::now() >= deadline {
                return Err(ApiError::internal("timed out"));
            }
            tokio::time::sleep(POLL).await;
        }
    }

    fn not_made(&self, node: u64, what: &str) -> ApiError {
        ApiError::new(
            ErrorCode::Busy,
            format!(
                "node {node} was not {what} in time (another change in flight, or the leader \
                 changed): look at GET /v1/cluster and try again"
            ),
        )
        .retry_after(1)
    }

    fn shown(&self, node: u64, done: &str) -> Value {
        let status = self.link.cluster_status().map(|status| status.status);
        json!({
            "node": node,
            "done": done,
            "voters": status.as_ref().map(|status| status.voters.iter().map(|id| id.0).collect::<Vec<_>>()),
            "learners": status.as_ref().map(|status| status.learners.iter().map(|id| id.0).collect::<Vec<_>>()),
        })
    }
}
