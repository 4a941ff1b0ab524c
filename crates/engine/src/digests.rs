//! In a cluster, each node's state digest at the same points, compared (`docs/cluster.md`,
//! "Digests compared"). The core is deterministic, so every node that applied the same
//! commands holds the same state: a different digest at the same sequence number is a
//! determinism bug, and the node that finds it stops, loudly.
//!
//! The points are every `ClusterSettings::digest_every` commands. Each node's
//! snapshotter computes its own digest there, off the order path (`record_own`); the
//! leader's also proposes it as a note in the log, which every node gets with the entry
//! (`record_leaders`, from `replicated`). Whichever of the two comes second compares.

use std::collections::BTreeMap;

use bourse_core::Seq;

/// Digests kept waiting for their other half, at most (the oldest go first).
const KEPT: usize = 64;
const NOTE_KIND_DIGEST: u8 = 1;
/// A note that is a record of the server above the engine (`Records`).
pub(crate) const NOTE_KIND_RECORD: u8 = 2;

/// The state digest at `seq`, as a note of the log.
pub(crate) fn encode_note(seq: Seq, digest: &str) -> Vec<u8> {
    let mut note = Vec::with_capacity(9 + digest.len());
    note.push(NOTE_KIND_DIGEST);
    note.extend_from_slice(&seq.0.to_le_bytes());
    note.extend_from_slice(digest.as_bytes());
    note
}

/// A digest note's sequence number and digest (`None`: not a note of this kind).
pub(crate) fn decode_note(note: &[u8]) -> Option<(Seq, String)> {
    let (&kind, rest) = note.split_first()?;
    if kind != NOTE_KIND_DIGEST || rest.len() < 8 {
        return None;
    }
    let (seq, digest) = rest.split_at(8);
    let seq = Seq(u64::from_le_bytes(seq.try_into().ok()?));
    Some((seq, String::from_utf8(digest.to_vec()).ok()?))
}

/// This node's digests and the leader's, by sequence number, until compared.
#[derive(Default)]
pub(crate) struct DigestBook {
    own: BTreeMap<Seq, String>,
    leaders: BTreeMap<Seq, String>,
    pub(crate) compared: u64,
    pub(crate) last_compared: Seq,
}

impl DigestBook {
    /// This node's digest at `seq`; `Err` says how it differs from the leader's.
    pub(crate) fn record_own(&mut self, seq: Seq, digest: String) -> Result<(), String> {
        match self.leaders.remove(&seq) {
            Some(leaders) => self.compare(seq, &digest, &leaders),
            None => {
                keep(&mut self.own, seq, digest);
                Ok(())
            }
        }
    }

    /// The leader's digest at `seq`, from the log.
    pub(crate) fn record_leaders(&mut self, seq: Seq, digest: String) -> Result<(), String> {
        match self.own.remove(&seq) {
            Some(own) => self.compare(seq, &own, &digest),
            None => {
                keep(&mut self.leaders, seq, digest);
                Ok(())
            }
        }
    }

    fn compare(&mut self, seq: Seq, own: &str, leaders: &str) -> Result<(), String> {
        if own != leaders {
            return Err(format!(
                "the state after command {seq} differs from the leader's (digest {own}, the \
                 leader's {leaders}): a determinism bug; this node stops"
            ));
        }
        self.compared += 1;
        self.last_compared = self.last_compared.max(seq);
        Ok(())
    }
}

fn keep(digests: &mut BTreeMap<Seq, String>, seq: Seq, digest: String) {
    digests.insert(seq, digest);
    while digests.len() > KEPT {
        digests.pop_first();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_note_reads_back_and_anything_else_is_not_one() {
        let note = encode_note(Seq(1_000_000), "ab12");
        assert_eq!(decode_note(&note), Some((Seq(1_000_000), "ab12".to_string())));
        assert_eq!(decode_note(&[]), None);
        assert_eq!(decode_note(&[2, 0, 0, 0, 0, 0, 0, 0, 0]), None);
        assert_eq!(decode_note(&note[..5]), None);
    }

    #[test]
    fn whichever_half_comes_second_compares_and_a_difference_is_an_error() {
        let mut book = DigestBook::default();
        book.record_own(Seq(100), "aa".into()).unwrap();
        book.record_leaders(Seq(100), "aa".into()).unwrap();
        book.record_leaders(Seq(200), "bb".into()).unwrap();
        book.record_own(Seq(200), "bb".into()).unwrap();
        assert_eq!((book.compared, book.last_compared), (2, Seq(200)));
        book.record_leaders(Seq(300), "cc".into()).unwrap();
        let differs = book.record_own(Seq(300), "cd".into()).unwrap_err();
        assert!(differs.contains("after command 300 differs"), "{differs}");
        // A half whose other never comes (a node that started after it) is forgotten.
        for seq in 1..=100 {
            book.record_own(Seq(1_000 + seq), "x".into()).unwrap();
        }
        assert_eq!(book.own.len(), KEPT);
    }
}
