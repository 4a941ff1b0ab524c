//! The peer protocol: Raft's messages between the nodes of a cluster, as bytes.
//!
//! A connection carries frames `[len u32][body]`. Its first frame is a `Hello` (which
//! cluster, which node is speaking); every later one is one raft-rs `Message`, each field
//! in a fixed order, little-endian, lists and byte runs length-prefixed (layout in
//! `docs/cluster.md`). Our own codec rather than protobuf's: decoding whatever arrives
//! must never panic, recurse or allocate more than the frame holds, and this one is
//! small enough to check by fuzzing (`crates/server/fuzz`, target `peer_message`).

use bytes::Bytes;
use protobuf::ProtobufEnum;
use raft::eraftpb::{Message, MessageType, Snapshot, SnapshotMetadata};

use crate::codec::{put_bytes, put_conf_state, put_u32, put_u64, DecodeError, Reader};
use crate::log::{put_entry, read_entry, ENTRY_BYTES_MIN};

/// The largest frame a node accepts: a snapshot of the whole venue travels in one.
pub const FRAME_BYTES_MAX: usize = 1 << 30;
const HELLO_MAGIC: &[u8; 8] = b"BRSPEER2";
/// A hello's body: magic, cluster, node.
pub const HELLO_BYTES_MAX: usize = 8 + 8 + 8 + 8 + 8;

/// A connection's first frame: who is speaking, in which cluster.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Hello {
    /// The cluster's id (from the cluster file): a node of another cluster is refused.
    pub cluster: u64,
    /// The node that opened the connection.
    pub from: u64,
    /// The speaking node's incarnation: drawn when its Raft state was first written,
    /// so a node that lost its data comes back with another (`transport`).
    pub incarnation: u64,
    /// The listener's incarnation as the speaker knows it (0: not known): a listener
    /// that has another lost its data, and refuses the speaker's messages.
    pub expects: u64,
}

impl Hello {
    pub fn encode(&self, out: &mut Vec<u8>) {
        put_u32(out, HELLO_BYTES_MAX as u32);
        out.extend_from_slice(HELLO_MAGIC);
        put_u64(out, self.cluster);
        put_u64(out, self.from);
        put_u64(out, self.incarnation);
        put_u64(out, self.expects);
    }

    pub fn decode(body: &[u8]) -> Result<Hello, DecodeError> {
        let mut reader = Reader::new(body);
        if reader.take(8)? != HELLO_MAGIC {
            return Err(DecodeError::Invalid("not a Bourse peer"));
        }
        let hello = Hello {
            cluster: reader.u64()?,
            from: reader.u64()?,
            incarnation: reader.u64()?,
            expects: reader.u64()?,
        };
        if !reader.is_empty() {
            return Err(DecodeError::Invalid("bytes after the hello"));
        }
        Ok(hello)
    }
}

/// Appends `message` as one frame (length prefix included).
pub fn encode_message(message: &Message, out: &mut Vec<u8>) {
    let start = out.len();
    put_u32(out, 0);
    out.push(message.msg_type.value() as u8);
    put_u64(out, message.to);
    put_u64(out, message.from);
    put_u64(out, message.term);
    put_u64(out, message.log_term);
    put_u64(out, message.index);
    put_u32(out, message.entries.len() as u32);
    for entry in message.entries.iter() {
        put_entry(out, entry);
    }
    put_u64(out, message.commit);
    put_u64(out, message.commit_term);
    match message.snapshot.as_ref() {
        Some(snapshot) => {
            out.push(1);
            let metadata = snapshot.get_metadata();
            put_u64(out, metadata.index);
            put_u64(out, metadata.term);
            put_conf_state(out, metadata.get_conf_state());
            put_bytes(out, &snapshot.data);
        }
        None => out.push(0),
    }
    put_u64(out, message.request_snapshot);
    out.push(u8::from(message.reject));
    put_u64(out, message.reject_hint);
    put_bytes(out, &message.context);
    put_u64(out, message.priority as u64);
    let body_len = (out.len() - start - 4) as u32;
    out[start..start + 4].copy_from_slice(&body_len.to_le_bytes());
}

/// A message's frame body (after the length prefix). Only the kinds peers send are
/// accepted; raft-rs's local ones (a tick's `MsgHup`, `MsgBeat`, ...) never travel.
pub fn decode_message(body: &[u8]) -> Result<Message, DecodeError> {
    let mut reader = Reader::new(body);
    let msg_type = MessageType::from_i32(i32::from(reader.u8()?))
        .ok_or(DecodeError::Invalid("unknown message kind"))?;
    if is_local(msg_type) {
        return Err(DecodeError::Invalid("a node's local message kind"));
    }
    let mut message = Message {
        msg_type,
        to: reader.u64()?,
        from: reader.u64()?,
        term: reader.u64()?,
        log_term: reader.u64()?,
        index: reader.u64()?,
        ..Default::default()
    };
    let count = reader.count(ENTRY_BYTES_MIN)?;
    let mut entries = Vec::with_capacity(count);
    for _ in 0..count {
        entries.push(read_entry(&mut reader)?);
    }
    message.set_entries(entries.into());
    message.commit = reader.u64()?;
    message.commit_term = reader.u64()?;
    if reader.bool()? {
        let mut metadata =
            SnapshotMetadata { index: reader.u64()?, term: reader.u64()?, ..Default::default() };
        metadata.set_conf_state(reader.conf_state()?);
        let mut snapshot =
            Snapshot { data: Bytes::copy_from_slice(reader.bytes()?), ..Default::default() };
        snapshot.set_metadata(metadata);
        message.set_snapshot(snapshot);
    }
    message.request_snapshot = reader.u64()?;
    message.reject = reader.bool()?;
    message.reject_hint = reader.u64()?;
    message.context = Bytes::copy_from_slice(reader.bytes()?);
    message.priority = reader.u64()? as i64;
    if !reader.is_empty() {
        return Err(DecodeError::Invalid("bytes after the message"));
    }
    Ok(message)
}

/// Kinds raft-rs makes for itself and never sends.
fn is_local(msg_type: MessageType) -> bool {
    matches!(
        msg_type,
        MessageType::MsgHup
            | MessageType::MsgBeat
            | MessageType::MsgUnreachable
            | MessageType::MsgSnapStatus
            | MessageType::MsgCheckQuorum
    )
}

/// The length of the frame at the start of `bytes`, once its prefix has arrived:
/// `Ok(None)` until then, an error if it claims more than `FRAME_BYTES_MAX`.
pub fn frame_len(bytes: &[u8]) -> Result<Option<usize>, DecodeError> {
    let Some(prefix) = bytes.get(..4) else { return Ok(None) };
    let len = u32::from_le_bytes([prefix[0], prefix[1], prefix[2], prefix[3]]) as usize;
    if len > FRAME_BYTES_MAX {
        return Err(DecodeError::Invalid("a frame longer than any peer sends"));
    }
    Ok(Some(len))
}

#[cfg(test)]
mod tests {
    use raft::eraftpb::{ConfState, Entry, EntryType};

    use super::*;

    fn sample() -> Message {
        let mut message = Message {
            msg_type: MessageType::MsgAppend,
            to: 2,
            from: 1,
            term: 7,
            log_term: 6,
            index: 41,
            commit: 40,
            commit_term: 6,
            request_snapshot: 3,
            reject: true,
            reject_hint: 9,
            context: Bytes::from_static(b"ctx"),
            priority: -4,
            ..Default::default()
        };
        let entries = vec![
            Entry { term: 7, index: 42, data: Bytes::from_static(b"batch"), ..Default::default() },
            Entry {
                term: 7,
                index: 43,
                entry_type: EntryType::EntryConfChangeV2,
                context: Bytes::from_static(b"c"),
                ..Default::default()
            },
        ];
        message.set_entries(entries.into());
        let mut snapshot = Snapshot { data: Bytes::from_static(b"state"), ..Default::default() };
        snapshot.mut_metadata().index = 30;
        snapshot.mut_metadata().term = 5;
        snapshot.mut_metadata().set_conf_state(ConfState {
            voters: vec![1, 2, 3],
            learners: vec![4],
            auto_leave: true,
            ..Default::default()
        });
        message.set_snapshot(snapshot);
        message
    }

    #[test]
    fn a_message_round_trips_every_field() {
        let message = sample();
        let mut frame = Vec::new();
        encode_message(&message, &mut frame);
        let len = frame_len(&frame).unwrap().unwrap();
        assert_eq!(len, frame.len() - 4);
        assert_eq!(decode_message(&frame[4..]).unwrap(), message);
        let plain =
            Message { msg_type: MessageType::MsgHeartbeat, to: 3, from: 1, ..Default::default() };
        frame.clear();
        encode_message(&plain, &mut frame);
        assert_eq!(decode_message(&frame[4..]).unwrap(), plain);
    }

    #[test]
    fn every_cut_of_a_message_is_refused_without_a_panic() {
        let mut frame = Vec::new();
        encode_message(&sample(), &mut frame);
        let body = &frame[4..];
        for len in 0..body.len() {
            assert!(decode_message(&body[..len]).is_err(), "cut at {len}");
        }
        let mut longer = body.to_vec();
        longer.push(0);
        assert_eq!(decode_message(&longer), Err(DecodeError::Invalid("bytes after the message")));
    }

    #[test]
    fn local_kinds_and_huge_counts_are_refused() {
        let local = Message { msg_type: MessageType::MsgHup, ..Default::default() };
        let mut frame = Vec::new();
        encode_message(&local, &mut frame);
        assert_eq!(
            decode_message(&frame[4..]),
            Err(DecodeError::Invalid("a node's local message kind"))
        );
        // An entry count far beyond what the frame holds fails before allocating.
        let mut body = vec![MessageType::MsgAppend.value() as u8];
        body.extend_from_slice(&[0u8; 40]);
        body.extend_from_slice(&u32::MAX.to_le_bytes());
        assert_eq!(decode_message(&body), Err(DecodeError::Truncated));
        assert!(frame_len(&(FRAME_BYTES_MAX as u32 + 1).to_le_bytes()).is_err());
        assert_eq!(frame_len(&[1, 0]), Ok(None));
    }

    #[test]
    fn a_hello_round_trips_and_a_stranger_is_refused() {
        let hello = Hello { cluster: 0xfeed, from: 3, incarnation: 0x1234_5678_9abc, expects: 7 };
        let mut frame = Vec::new();
        hello.encode(&mut frame);
        assert_eq!(Hello::decode(&frame[4..]), Ok(hello));
        assert!(Hello::decode(b"GET / HTTP/1.1\r\n\r\n").is_err());
    }
}
