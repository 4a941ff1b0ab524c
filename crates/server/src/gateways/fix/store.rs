//! A FIX session's store on disk, so that a session outlives its connections and the
//! server's restarts (`docs/fix.md`, "The store"): the next sequence number each way
//! and the application messages sent, under `DATA_DIR/fix/KEY_ID/`. `seqnums` holds
//! the two numbers (rewritten in place), `messages` the sent messages as they went out,
//! one after the other (each message frames itself). Messages appended are written
//! before the socket gets them (`flush`), so a message the client may have seen can
//! always be resent.
//!
//! It keeps at most `kept` messages (the oldest are dropped when the file is opened or
//! has grown to twice that): a ResendRequest for older ones is answered with a
//! GapFill. It never interprets a message beyond its MsgSeqNum and never decides what
//! to resend (the session does).

use std::fs::{File, OpenOptions};
use std::io::{self, Read, Write};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

use bourse_protocol::fix::{self, tag, Message};

/// Sequence numbers as FIX counts them (MsgSeqNum, from 1).
pub type SeqNum = u64;

/// `seqnums`' fixed layout: two 20-digit numbers, a space and a newline.
const SEQNUMS_BYTES: usize = 42;

/// Where a sent message lies in `messages`.
#[derive(Clone, Copy, Debug)]
struct Stored {
    seq: SeqNum,
    offset: u64,
    length: u32,
}

pub struct Store {
    directory: PathBuf,
    seqnums: File,
    messages: File,
    /// Every stored message, by increasing `seq`.
    index: Vec<Stored>,
    /// `messages`' length on disk.
    written: u64,
    /// Appended, not yet written (at `written` onwards).
    pending: Vec<u8>,
    /// The MsgSeqNum of the next message sent.
    pub next_out: SeqNum,
    /// The MsgSeqNum the next message received must carry.
    pub expected_in: SeqNum,
    saved: (SeqNum, SeqNum),
    kept: usize,
}

/// The directory of a session's store: the key id itself when it is plain (letters,
/// digits, `-`, `_`), else its hex.
pub fn session_directory(root: &Path, key_id: &str) -> PathBuf {
    let plain = !key_id.is_empty()
        && key_id.len() <= 128
        && key_id.bytes().all(|byte| byte.is_ascii_alphanumeric() || byte == b'-' || byte == b'_');
    match plain {
        true => root.join(key_id),
        false => root.join(format!("x{}", hex::encode(key_id))),
    }
}

impl Store {
    /// Opens (or makes) the store in `directory`, keeping at most `kept` messages.
    pub fn open(directory: &Path, kept: usize) -> io::Result<Store> {
        std::fs::create_dir_all(directory)?;
        let open = |name: &str| {
            OpenOptions::new()
                .read(true)
                .write(true)
                .create(true)
                .truncate(false)
                .open(directory.join(name))
        };
        let mut seqnums = open("seqnums")?;
        let mut text = String::new();
        seqnums.read_to_string(&mut text)?;
        let mut numbers = text.split_whitespace().map(|number| number.parse::<SeqNum>().ok());
        let (next_out, expected_in) = match (numbers.next(), numbers.next()) {
            (Some(Some(out)), Some(Some(expected))) if out > 0 && expected > 0 => (out, expected),
            _ => (1, 1),
        };
        let messages = open("messages")?;
        let mut store = Store {
            directory: directory.to_path_buf(),
            seqnums,
            messages,
            index: Vec::new(),
            written: 0,
            pending: Vec::new(),
            next_out,
            expected_in,
            saved: (0, 0),
            kept: kept.max(1),
        };
        store.load()?;
        if store.index.len() > store.kept {
            store.compact()?;
        }
        store.flush()?;
        Ok(store)
    }

    /// Reads `messages`' index; a torn last message (a crash while writing) is cut off.
    fn load(&mut self) -> io::Result<()> {
        let mut bytes = Vec::new();
        self.messages.read_to_end(&mut bytes)?;
        let mut fields = Vec::new();
        let mut at = 0usize;
        while at < bytes.len() {
            let Ok(Some(length)) = fix::frame(&bytes[at..]) else { break };
            let seq = Message::parse(&bytes[at..at + length], &mut fields)
                .ok()
                .and_then(|message| message.number(tag::MSG_SEQ_NUM).ok().flatten());
            let Some(seq) = seq else { break };
            if self.index.last().is_some_and(|last| last.seq >= seq) {
                break;
            }
            self.index.push(Stored { seq, offset: at as u64, length: length as u32 });
            at += length;
        }
        self.written = at as u64;
        if at < bytes.len() {
            self.messages.set_len(self.written)?;
        }
        Ok(())
    }

    /// Rewrites `messages` with only the newest `kept` messages.
    fn compact(&mut self) -> io::Result<()> {
        self.flush()?;
        let drop = self.index.len().saturating_sub(self.kept);
        let kept = self.index.split_off(drop);
        let path = self.directory.join("messages.new");
        let mut file = File::create(&path)?;
        let mut offset = 0u64;
        let mut index = Vec::with_capacity(kept.len());
        for stored in kept {
            let bytes = self.read_stored(stored)?;
            file.write_all(&bytes)?;
            index.push(Stored { offset, ..stored });
            offset += u64::from(stored.length);
        }
        file.sync_all()?;
        std::fs::rename(&path, self.directory.join("messages"))?;
        self.messages =
            OpenOptions::new().read(true).write(true).open(self.directory.join("messages"))?;
        self.index = index;
        self.written = offset;
        Ok(())
    }

    fn read_stored(&self, stored: Stored) -> io::Result<Vec<u8>> {
        let mut bytes = vec![0; stored.length as usize];
        match stored.offset.checked_sub(self.written) {
            Some(in_pending) => {
                let start = in_pending as usize;
                let slice = self.pending.get(start..start + bytes.len());
                bytes.copy_from_slice(slice.ok_or_else(|| io::Error::other("torn store"))?);
            }
            None => self.messages.read_exact_at(&mut bytes, stored.offset)?,
        }
        Ok(bytes)
    }

    /// Records who the session is: its API key id and the client's CompID (the
    /// `session` file, rewritten when they change), so that a restarted server can
    /// follow the session before its next Logon (`fix::resume_sessions`).
    pub fn remember_identity(&self, key_id: &str, their_comp_id: &str) -> io::Result<()> {
        let text = format!("{key_id}\n{their_comp_id}\n");
        let path = self.directory.join("session");
        if std::fs::read_to_string(&path).is_ok_and(|known| known == text) {
            return Ok(());
        }
        let temporary = self.directory.join("session.new");
        std::fs::write(&temporary, text)?;
        std::fs::rename(temporary, path)
    }

    /// The identity `remember_identity` recorded in `directory`: (key id, the client's
    /// CompID).
    pub fn identity(directory: &Path) -> Option<(String, String)> {
        let text = std::fs::read_to_string(directory.join("session")).ok()?;
        let mut lines = text.lines();
        let (key_id, comp_id) = (lines.next()?, lines.next()?);
        (!key_id.is_empty() && !comp_id.is_empty())
            .then(|| (key_id.to_string(), comp_id.to_string()))
    }

    /// Keeps `message`, sent with MsgSeqNum `seq` (written by the next `flush`).
    pub fn append(&mut self, seq: SeqNum, message: &[u8]) {
        debug_assert!(self.index.last().is_none_or(|last| last.seq < seq));
        let offset = self.written + self.pending.len() as u64;
        self.index.push(Stored { seq, offset, length: message.len() as u32 });
        self.pending.extend_from_slice(message);
    }

    /// The messages kept with MsgSeqNum in `from..=to`, oldest first.
    pub fn sent(&self, from: SeqNum, to: SeqNum) -> io::Result<Vec<(SeqNum, Vec<u8>)>> {
        let start = self.index.partition_point(|stored| stored.seq < from);
        self.index[start..]
            .iter()
            .take_while(|stored| stored.seq <= to)
            .map(|stored| Ok((stored.seq, self.read_stored(*stored)?)))
            .collect()
    }

    /// Writes what was appended and the sequence numbers if they changed.
    pub fn flush(&mut self) -> io::Result<()> {
        if !self.pending.is_empty() {
            self.messages.write_all_at(&self.pending, self.written)?;
            self.written += self.pending.len() as u64;
            self.pending.clear();
            if self.index.len() >= self.kept.saturating_mul(2) {
                self.compact()?;
            }
        }
        if self.saved != (self.next_out, self.expected_in) {
            let text = format!("{:020} {:020}\n", self.next_out, self.expected_in);
            debug_assert_eq!(text.len(), SEQNUMS_BYTES);
            self.seqnums.write_all_at(text.as_bytes(), 0)?;
            self.saved = (self.next_out, self.expected_in);
        }
        Ok(())
    }

    /// Both sequence numbers back to 1 and every message forgotten (a Logon with
    /// ResetSeqNumFlag).
    pub fn reset(&mut self) -> io::Result<()> {
        self.pending.clear();
        self.index.clear();
        self.messages.set_len(0)?;
        self.written = 0;
        self.next_out = 1;
        self.expected_in = 1;
        self.flush()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bourse_protocol::fix::Writer;

    fn sent(seq: SeqNum) -> Vec<u8> {
        let mut writer = Writer::default();
        writer.start("8").number(tag::MSG_SEQ_NUM, seq).str(tag::TEXT, "report");
        let mut out = Vec::new();
        writer.finish(&mut out);
        out
    }

    #[test]
    fn numbers_and_messages_survive_a_reopen_and_only_the_newest_are_kept() {
        let directory = tempfile::tempdir().unwrap();
        let path = session_directory(directory.path(), "key-1");
        let mut store = Store::open(&path, 3).unwrap();
        assert_eq!((store.next_out, store.expected_in), (1, 1));
        for seq in [2, 3, 5, 6] {
            store.append(seq, &sent(seq));
        }
        assert_eq!(store.sent(3, 5).unwrap().len(), 2, "read before they are written");
        store.next_out = 7;
        store.expected_in = 4;
        store.flush().unwrap();
        drop(store);
        let store = Store::open(&path, 3).unwrap();
        assert_eq!((store.next_out, store.expected_in), (7, 4));
        let kept: Vec<SeqNum> =
            store.sent(1, 100).unwrap().into_iter().map(|(seq, _)| seq).collect();
        assert_eq!(kept, [3, 5, 6], "the oldest went beyond 3 kept");
        assert_eq!(store.sent(5, 5).unwrap()[0].1, sent(5));
    }

    #[test]
    fn a_torn_last_message_is_cut_off_and_a_reset_forgets_everything() {
        let directory = tempfile::tempdir().unwrap();
        let path = session_directory(directory.path(), "odd/key");
        assert!(path.ends_with(format!("x{}", hex::encode("odd/key"))));
        let mut store = Store::open(&path, 10).unwrap();
        store.append(1, &sent(1));
        store.flush().unwrap();
        drop(store);
        let torn = sent(2);
        let mut file = OpenOptions::new().append(true).open(path.join("messages")).unwrap();
        file.write_all(&torn[..torn.len() / 2]).unwrap();
        let mut store = Store::open(&path, 10).unwrap();
        assert_eq!(store.sent(1, 10).unwrap().len(), 1);
        store.append(2, &sent(2));
        store.flush().unwrap();
        assert_eq!(store.sent(2, 2).unwrap()[0].1, sent(2), "written after the cut");
        store.reset().unwrap();
        assert!(store.sent(1, 10).unwrap().is_empty());
        assert_eq!((store.next_out, store.expected_in), (1, 1));
    }
}
