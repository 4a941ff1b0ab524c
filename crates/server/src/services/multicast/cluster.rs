//! The feed of a cluster (`docs/cluster.md`, "The feed across a change of leader").
//! Every node derives the feed's messages from the commands the log committed, as one
//! node does, numbers them alike and keeps them for retransmission; only the leader
//! sends them to the group. This module holds what a node needs for that beyond the
//! one-node publisher: which session and number its messages have (from an anchor of
//! the log), where each recent command ended in that numbering (to check an anchor
//! that comes late), and when it proposes anchors. It decides nothing about who leads
//! (the engine's Raft node does) and sends nothing itself.
//!
//! **Anchors.** A message's number is not in the log: it is a count of the messages
//! derived since the session began. The leader therefore proposes, about every
//! `ANCHOR_EVERY`, a record "after command S, the next message of session X is M"
//! (`FeedAnchor`). A node that derived command S compares (a different number is a bug
//! of the feed's making, and this node's feed stops, loudly); a node that does not know
//! the numbering (it restarted from a snapshot of the engine) takes it up from the
//! first anchor it derives past. A node that starts at the log's beginning knows the
//! numbering from its first message: the cluster's first session (`first_session`).
//! A leader that does not know the numbering sends nothing; after `NEW_SESSION_AFTER`
//! without an anchor it proposes a new session that starts after its last command (a
//! whole cluster restarted): subscribers see another session and take a snapshot.

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use bourse_core::Seq;
use bourse_marketdata::mold::{Session, SESSION_BYTES};
use serde::{Deserialize, Serialize};

/// How often the leader proposes an anchor while the feed moves.
pub const ANCHOR_EVERY: Duration = Duration::from_secs(1);
/// How often it proposes one while the feed is quiet (so that a node that restarted
/// learns the numbering).
pub const ANCHOR_QUIET_EVERY: Duration = Duration::from_secs(10);
/// How long a leader that does not know the numbering waits for an anchor before it
/// starts a new session.
pub const NEW_SESSION_AFTER: Duration = Duration::from_secs(2);
/// Messages a node re-sends when it starts sending (it became the leader): what the
/// old leader may have derived and not sent. A subscriber drops what it already has.
pub const RESEND_ON_TAKEOVER: u64 = 2_000;
/// Commands whose end in the numbering is kept, to check an anchor that reaches the
/// publisher after it derived the anchor's command.
const MARKS_KEPT: usize = 65_536;

/// "After command `after_seq`, the next message of `session` is `next_message`": a
/// record of the cluster's log.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct FeedAnchor {
    pub session: String,
    pub after_seq: u64,
    pub next_message: u64,
}

impl FeedAnchor {
    /// The session's name as the packets carry it (`None` if it is not one).
    pub fn session(&self) -> Option<Session> {
        let bytes = self.session.as_bytes();
        if bytes.len() != SESSION_BYTES || !bytes.iter().all(u8::is_ascii_alphanumeric) {
            return None;
        }
        let mut session = [0u8; SESSION_BYTES];
        session.copy_from_slice(bytes);
        Some(session)
    }
}

/// Proposes an anchor to the cluster's log; `false` if this node cannot (it no longer
/// leads, or it stopped).
pub type ProposeAnchor = Box<dyn Fn(&FeedAnchor) -> bool + Send>;

/// The first session of cluster `cluster_id`: `C` and the id in base 36, the same on
/// every node.
pub fn first_session(cluster_id: u64) -> Session {
    super::session_name(b'C', cluster_id)
}

/// What the publisher should do with an anchor it derived past.
#[derive(Debug, PartialEq, Eq)]
pub enum Anchoring {
    /// This node numbers the same: nothing to do.
    Agrees,
    /// Take up `session` and move every number by `delta`.
    Renumber { session: Session, delta: i64 },
    /// This node numbers differently in the same session: its feed is wrong.
    Differs { ours: u64 },
    /// The anchor's command is before what this node derived or remembers.
    Unknown,
}

pub struct ClusterFeed {
    propose: ProposeAnchor,
    /// Whether this node knows its messages' numbers (the session's and theirs).
    pub anchored: bool,
    /// Whether this node sends to the group: it leads and is anchored.
    pub sending: bool,
    /// After each recent command derived: the number of the next message.
    marks: VecDeque<(Seq, u64)>,
    /// Anchors of commands this node has not derived yet, in log order.
    pending: VecDeque<FeedAnchor>,
    /// Since when this node leads (as the publisher last saw).
    leading_since: Option<Instant>,
    /// The last anchor this node proposed: when, and the number it named.
    last_proposed: Option<(Instant, u64)>,
    /// When this node last proposed a new session.
    new_session_proposed: Option<Instant>,
    /// Why this node's feed stopped (an anchor it disagrees with).
    pub broken: Option<String>,
}

impl ClusterFeed {
    pub fn new(propose: ProposeAnchor) -> ClusterFeed {
        ClusterFeed {
            propose,
            anchored: false,
            sending: false,
            marks: VecDeque::new(),
            pending: VecDeque::new(),
            leading_since: None,
            last_proposed: None,
            new_session_proposed: None,
            broken: None,
        }
    }

    /// After command `seq` (derived), the next message's number is `next`.
    pub fn mark(&mut self, seq: Seq, next: u64) {
        debug_assert!(self.marks.back().is_none_or(|(last, _)| *last < seq));
        if self.marks.len() == MARKS_KEPT {
            self.marks.pop_front();
        }
        self.marks.push_back((seq, next));
    }

    /// Keeps an anchor of a command not derived yet.
    pub fn wait_for(&mut self, anchor: FeedAnchor) {
        self.pending.push_back(anchor);
    }

    /// The first waiting anchor whose command is derived (`seq` is the last derived).
    pub fn due(&mut self, seq: Seq) -> Option<FeedAnchor> {
        match self.pending.front() {
            Some(anchor) if anchor.after_seq <= seq.0 => self.pending.pop_front(),
            _ => None,
        }
    }

    /// What an anchor of a command already derived means here, with `current` the
    /// session this node numbers in.
    pub fn check(&self, anchor: &FeedAnchor, session: Session, current: Session) -> Anchoring {
        let at = self.marks.binary_search_by_key(&anchor.after_seq, |(seq, _)| seq.0);
        let Ok(at) = at else { return Anchoring::Unknown };
        let ours = self.marks[at].1;
        if self.anchored && session == current {
            return match ours == anchor.next_message {
                true => Anchoring::Agrees,
                false => Anchoring::Differs { ours },
            };
        }
        let delta = anchor.next_message as i128 - ours as i128;
        Anchoring::Renumber { session, delta: delta.clamp(i64::MIN.into(), i64::MAX.into()) as i64 }
    }

    /// Moves the remembered numbers by `delta` (the numbering was taken up).
    pub fn renumber(&mut self, delta: i64) {
        for (_, next) in &mut self.marks {
            *next = next.saturating_add_signed(delta);
        }
        self.anchored = true;
    }

    /// This node's duties for the feed, given whether it leads now, after what it
    /// derived (`seq`, the next message `next` in `session`). Returns whether it has
    /// just started sending (it re-sends what the old leader may not have sent).
    pub fn lead(&mut self, leads: bool, seq: Seq, next: u64, session: Session) -> bool {
        if !leads {
            self.sending = false;
            self.leading_since = None;
            return false;
        }
        let since = *self.leading_since.get_or_insert_with(Instant::now);
        if self.broken.is_some() {
            self.sending = false;
            return false;
        }
        if !self.anchored {
            let due = self.new_session_proposed.is_none_or(|at| at.elapsed() >= NEW_SESSION_AFTER);
            if since.elapsed() >= NEW_SESSION_AFTER && due {
                let session = super::session_name(b'D', bourse_protocol::signing::now_ms());
                let anchor = FeedAnchor {
                    session: String::from_utf8_lossy(&session).into_owned(),
                    after_seq: seq.0,
                    next_message: 1,
                };
                tracing::warn!(session = %anchor.session, after_seq = seq.0, "this leader does not know the feed's numbering (no node told it): it starts a new session");
                (self.propose)(&anchor);
                self.new_session_proposed = Some(Instant::now());
            }
            return false;
        }
        let started = !self.sending;
        self.sending = true;
        let due = match self.last_proposed {
            None => true,
            Some((at, named)) => {
                started
                    || (at.elapsed() >= ANCHOR_EVERY && named != next)
                    || at.elapsed() >= ANCHOR_QUIET_EVERY
            }
        };
        if due {
            let anchor = FeedAnchor {
                session: String::from_utf8_lossy(&session).into_owned(),
                after_seq: seq.0,
                next_message: next,
            };
            if (self.propose)(&anchor) {
                self.last_proposed = Some((Instant::now(), next));
            }
        }
        started
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn feed() -> ClusterFeed {
        ClusterFeed::new(Box::new(|_| true))
    }

    fn anchor(session: &Session, after_seq: u64, next_message: u64) -> FeedAnchor {
        FeedAnchor {
            session: String::from_utf8_lossy(session).into_owned(),
            after_seq,
            next_message,
        }
    }

    #[test]
    fn a_node_that_does_not_know_the_numbering_takes_it_up_from_an_anchor() {
        let first = first_session(7);
        let mut feed = feed();
        // Restarted after command 100: its own count starts at 1.
        feed.mark(Seq(100), 1);
        feed.mark(Seq(101), 4);
        feed.mark(Seq(102), 9);
        let taken = anchor(&first, 101, 1_004);
        assert_eq!(
            feed.check(&taken, taken.session().unwrap(), first),
            Anchoring::Renumber { session: first, delta: 1_000 }
        );
        feed.renumber(1_000);
        assert!(feed.anchored);
        // The next anchor agrees, or is a bug.
        assert_eq!(feed.check(&anchor(&first, 102, 1_009), first, first), Anchoring::Agrees);
        assert_eq!(
            feed.check(&anchor(&first, 102, 1_010), first, first),
            Anchoring::Differs { ours: 1_009 }
        );
        // A command it never derived cannot be checked.
        assert_eq!(feed.check(&anchor(&first, 99, 1), first, first), Anchoring::Unknown);
    }

    #[test]
    fn an_anchored_node_takes_up_a_new_session() {
        let first = first_session(7);
        let mut feed = feed();
        feed.anchored = true;
        feed.mark(Seq(5), 40);
        let other = super::super::session_name(b'D', 123);
        assert_eq!(
            feed.check(&anchor(&other, 5, 1), other, first),
            Anchoring::Renumber { session: other, delta: -39 }
        );
    }

    #[test]
    fn anchors_wait_until_their_command_is_derived() {
        let first = first_session(1);
        let mut feed = feed();
        feed.wait_for(anchor(&first, 10, 3));
        assert_eq!(feed.due(Seq(9)), None);
        assert_eq!(feed.due(Seq(10)).map(|anchor| anchor.after_seq), Some(10));
    }

    #[test]
    fn the_leader_proposes_when_it_takes_over_and_then_every_so_often() {
        let proposed = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let seen = std::sync::Arc::clone(&proposed);
        let mut feed = ClusterFeed::new(Box::new(move |anchor| {
            seen.lock().unwrap().push(anchor.clone());
            true
        }));
        let first = first_session(1);
        // Not anchored: it does not send, and proposes nothing at once.
        assert!(!feed.lead(true, Seq(3), 5, first));
        assert!(proposed.lock().unwrap().is_empty());
        feed.anchored = true;
        assert!(feed.lead(true, Seq(3), 5, first), "it starts sending");
        assert!(feed.sending);
        assert_eq!(proposed.lock().unwrap().as_slice(), &[anchor(&first, 3, 5)]);
        // Not again before ANCHOR_EVERY.
        assert!(!feed.lead(true, Seq(4), 6, first));
        assert_eq!(proposed.lock().unwrap().len(), 1);
        // A follower does not send.
        assert!(!feed.lead(false, Seq(4), 6, first));
        assert!(!feed.sending);
    }
}
