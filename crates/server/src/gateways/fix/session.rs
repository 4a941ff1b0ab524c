//! A FIX session's sending side: every message it sends gets the standard header
//! (SenderCompID, TargetCompID, the next MsgSeqNum, SendingTime), goes to the
//! connection's output when there is one, and, when it is an application message, to
//! the store first, so that a ResendRequest (even after a restart) is answered with
//! the very same message. The session-level messages (Logon, Heartbeat, TestRequest,
//! ResendRequest, Reject, SequenceReset-GapFill, Logout) and the answer to a
//! ResendRequest are written here, one function each.
//!
//! It decides nothing about what comes in (the connection's loop does, `fix`); it
//! never blocks on the socket (the connection writes its output).

use std::io;
use std::sync::Arc;

use bourse_protocol::fix::{tag, Message, Writer};
use bourse_protocol::signing::now_ms;

use super::store::{SeqNum, Store};
use crate::gateways::shared::connection::Output;

/// SessionRejectReason (373) values Bourse sends.
pub mod reject_reason {
    pub const INVALID_TAG_NUMBER: u64 = 0;
    pub const REQUIRED_TAG_MISSING: u64 = 1;
    pub const TAG_WITHOUT_VALUE: u64 = 4;
    pub const VALUE_INCORRECT: u64 = 5;
    pub const INCORRECT_DATA_FORMAT: u64 = 6;
    pub const COMP_ID_PROBLEM: u64 = 9;
    pub const SENDING_TIME_ACCURACY: u64 = 10;
    pub const INVALID_MSG_TYPE: u64 = 11;
    pub const OTHER: u64 = 99;
}

/// Whether a message is kept for resending (application messages) or not (the
/// session's own, which a resend replaces with a GapFill).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Admin,
    Application,
}

/// What a session sends with, and where: kept by the session across its connections.
pub struct Outgoing {
    writer: Writer,
    pub store: Store,
    our_comp_id: Arc<str>,
    pub their_comp_id: String,
    /// Milliseconds since the epoch when something was last sent.
    pub last_sent_ms: u64,
}

impl Outgoing {
    pub fn new(store: Store, our_comp_id: Arc<str>, their_comp_id: String) -> Outgoing {
        Outgoing { writer: Writer::default(), store, our_comp_id, their_comp_id, last_sent_ms: 0 }
    }

    /// Starts a message of `msg_type` with its header; add the body's fields to the
    /// writer, then `send` it.
    pub fn begin(&mut self, msg_type: &str) -> &mut Writer {
        self.begin_numbered(msg_type, self.store.next_out)
    }

    fn begin_numbered(&mut self, msg_type: &str, seq: SeqNum) -> &mut Writer {
        self.writer
            .start(msg_type)
            .str(tag::SENDER_COMP_ID, &self.our_comp_id)
            .str(tag::TARGET_COMP_ID, &self.their_comp_id)
            .number(tag::MSG_SEQ_NUM, seq)
            .timestamp(tag::SENDING_TIME, now_ms())
    }

    /// The MsgSeqNum the message being written gets.
    pub fn seq(&self) -> SeqNum {
        self.store.next_out
    }

    /// Sends the message `begin` started: to `output` when connected, to the store when
    /// it is an application message. It takes the next MsgSeqNum either way.
    pub fn send(&mut self, kind: Kind, output: Option<&mut Output>) {
        let seq = self.store.next_out;
        self.store.next_out += 1;
        self.last_sent_ms = now_ms();
        match output {
            Some(output) => {
                let mut bytes = output.take_bytes();
                let start = self.writer.finish(&mut bytes);
                if kind == Kind::Application {
                    self.store.append(seq, &bytes[start..]);
                }
                output.finish_push(bytes);
            }
            None if kind == Kind::Application => {
                let mut bytes = Vec::new();
                self.writer.finish(&mut bytes);
                self.store.append(seq, &bytes);
            }
            None => {}
        }
    }

    /// Writes what the store holds unwritten: before the output goes to the socket.
    pub fn flush(&mut self) -> io::Result<()> {
        self.store.flush()
    }

    pub fn logon(&mut self, heartbeat_s: u64, reset: bool, output: &mut Output) {
        let writer = self.begin("A");
        writer.number(tag::ENCRYPT_METHOD, 0).number(tag::HEART_BT_INT, heartbeat_s);
        if reset {
            writer.str(tag::RESET_SEQ_NUM_FLAG, "Y");
        }
        self.send(Kind::Admin, Some(output));
    }

    pub fn heartbeat(&mut self, test_request_id: Option<&[u8]>, output: &mut Output) {
        let writer = self.begin("0");
        if let Some(id) = test_request_id {
            writer.bytes(tag::TEST_REQ_ID, id);
        }
        self.send(Kind::Admin, Some(output));
    }

    pub fn test_request(&mut self, output: &mut Output) {
        let id = now_ms();
        self.begin("1").number(tag::TEST_REQ_ID, id);
        self.send(Kind::Admin, Some(output));
    }

    /// Asks for every message from `from` on.
    pub fn resend_request(&mut self, from: SeqNum, output: &mut Output) {
        self.begin("2").number(tag::BEGIN_SEQ_NO, from).number(tag::END_SEQ_NO, 0);
        self.send(Kind::Admin, Some(output));
    }

    /// A session-level Reject of the message `ref_seq`.
    pub fn reject(&mut self, refused: &Refused, output: &mut Output) {
        let writer = self.begin("3");
        writer.number(tag::REF_SEQ_NUM, refused.ref_seq);
        if let Some(tag_id) = refused.tag {
            writer.number(tag::REF_TAG_ID, u64::from(tag_id));
        }
        if let Some(msg_type) = &refused.msg_type {
            writer.str(tag::REF_MSG_TYPE, msg_type);
        }
        writer.number(tag::SESSION_REJECT_REASON, refused.reason).str(tag::TEXT, &refused.text);
        self.send(Kind::Admin, Some(output));
    }

    pub fn logout(&mut self, text: &str, output: &mut Output) {
        let writer = self.begin("5");
        if !text.is_empty() {
            writer.str(tag::TEXT, text);
        }
        self.send(Kind::Admin, Some(output));
    }

    /// Answers a ResendRequest for `from..=to` (`to` 0: everything sent): the stored
    /// messages again, marked PossDupFlag with their OrigSendingTime, and a
    /// SequenceReset-GapFill over each run of numbers not kept (session messages, or
    /// messages older than the store keeps).
    pub fn resend(&mut self, from: SeqNum, to: SeqNum, output: &mut Output) -> io::Result<()> {
        let last = self.store.next_out.saturating_sub(1);
        let to = if to == 0 || to > last { last } else { to };
        let from = from.max(1);
        if from > to {
            return Ok(());
        }
        let kept = self.store.sent(from, to)?;
        let mut next = from;
        let mut fields = Vec::new();
        for (seq, bytes) in kept {
            if seq > next {
                self.gap_fill(next, seq, output);
            }
            let Ok(message) = Message::parse(&bytes, &mut fields) else { continue };
            self.resend_one(&message, output);
            next = seq + 1;
        }
        if next <= to {
            self.gap_fill(next, to + 1, output);
        }
        Ok(())
    }

    /// One stored message again: the same fields, PossDupFlag, OrigSendingTime and a
    /// new SendingTime.
    fn resend_one(&mut self, message: &Message<'_>, output: &mut Output) {
        let writer = &mut self.writer;
        let mut fields = message.fields();
        let Some((_, msg_type)) = fields.find(|(tag, _)| *tag == tag::MSG_TYPE) else { return };
        writer.start(std::str::from_utf8(msg_type).unwrap_or("8"));
        for (tag, value) in message.fields() {
            match tag {
                tag::BEGIN_STRING | tag::BODY_LENGTH | tag::CHECK_SUM | tag::MSG_TYPE => {}
                tag::SENDING_TIME => {
                    writer
                        .str(tag::POSS_DUP_FLAG, "Y")
                        .timestamp(tag::SENDING_TIME, now_ms())
                        .bytes(tag::ORIG_SENDING_TIME, value);
                }
                _ => {
                    writer.bytes(tag, value);
                }
            }
        }
        let mut bytes = output.take_bytes();
        writer.finish(&mut bytes);
        output.finish_push(bytes);
        self.last_sent_ms = now_ms();
    }

    /// A SequenceReset-GapFill numbered `seq`: the next message is `new_seq`.
    fn gap_fill(&mut self, seq: SeqNum, new_seq: SeqNum, output: &mut Output) {
        let now = now_ms();
        self.begin_numbered("4", seq)
            .str(tag::POSS_DUP_FLAG, "Y")
            .timestamp(tag::ORIG_SENDING_TIME, now)
            .str(tag::GAP_FILL_FLAG, "Y")
            .number(tag::NEW_SEQ_NO, new_seq);
        let mut bytes = output.take_bytes();
        self.writer.finish(&mut bytes);
        output.finish_push(bytes);
        self.last_sent_ms = now;
    }
}

/// A message refused at the session level: what its Reject (35=3) says.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Refused {
    pub ref_seq: SeqNum,
    pub tag: Option<u32>,
    pub msg_type: Option<String>,
    pub reason: u64,
    pub text: String,
}

impl Refused {
    pub fn new(reason: u64, tag: Option<u32>, text: impl Into<String>) -> Refused {
        Refused { ref_seq: 0, tag, msg_type: None, reason, text: text.into() }
    }

    pub fn missing(tag: u32, name: &str) -> Refused {
        Refused::new(
            reject_reason::REQUIRED_TAG_MISSING,
            Some(tag),
            format!("required tag missing: {name} ({tag})"),
        )
    }

    pub fn incorrect(tag: u32, name: &str, expected: &str) -> Refused {
        Refused::new(
            reject_reason::VALUE_INCORRECT,
            Some(tag),
            format!(
                "value is incorrect (out of range) for this tag: {name} ({tag}) must be {expected}"
            ),
        )
    }
}
