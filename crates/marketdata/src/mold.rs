//! MoldUDP64-style packets: a 20-byte header (the session, 10 ASCII bytes; the
//! sequence number of the packet's first message, u64; the message count, u16; all
//! big-endian) and that many messages, each preceded by its length (u16). A packet with
//! no message is a heartbeat (its sequence number is the next message's); a count of
//! `END_OF_SESSION` ends the session. A retransmission request is a header alone: the
//! first sequence number wanted and how many.

/// Bytes of the packet header.
pub const HEADER_BYTES: usize = 20;
/// Bytes of a session name.
pub const SESSION_BYTES: usize = 10;
/// The message count of the packet that ends a session.
pub const END_OF_SESSION: u16 = 0xFFFF;
/// The message count of a retransmission answer saying the range asked for is no
/// longer held; its sequence number is the oldest one held (take a snapshot).
pub const RANGE_GONE: u16 = 0xFFFE;
/// Payload of a packet at most, header included: fits an Ethernet frame with IP and
/// UDP headers.
pub const PACKET_BYTES_MAX: usize = 1_400;

pub type Session = [u8; SESSION_BYTES];

/// A session name from text: ASCII, padded with spaces, cut at 10 bytes.
pub fn session(name: &str) -> Session {
    let mut session = [b' '; SESSION_BYTES];
    for (slot, byte) in session.iter_mut().zip(name.bytes().filter(u8::is_ascii)) {
        *slot = byte;
    }
    session
}

/// Why bytes are not a packet.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PacketError {
    Short(usize),
    /// A message's length runs past the packet's end, or bytes are left over.
    Framing {
        message: u16,
    },
}

impl std::fmt::Display for PacketError {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            PacketError::Short(length) => {
                write!(formatter, "{length} bytes is shorter than a header")
            }
            PacketError::Framing { message } => {
                write!(formatter, "message {message} is framed wrongly")
            }
        }
    }
}

impl std::error::Error for PacketError {}

/// A packet read from bytes: its header and its messages' bytes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Packet<'a> {
    pub session: Session,
    /// The first message's sequence number (a heartbeat's: the next one's).
    pub sequence: u64,
    /// Messages, or `END_OF_SESSION`.
    pub count: u16,
    pub messages: Vec<&'a [u8]>,
}

impl<'a> Packet<'a> {
    pub fn parse(bytes: &'a [u8]) -> Result<Packet<'a>, PacketError> {
        let header = bytes.get(..HEADER_BYTES).ok_or(PacketError::Short(bytes.len()))?;
        let mut session = [0u8; SESSION_BYTES];
        session.copy_from_slice(&header[..SESSION_BYTES]);
        let mut sequence = [0u8; 8];
        sequence.copy_from_slice(&header[10..18]);
        let count = u16::from_be_bytes([header[18], header[19]]);
        let mut messages = Vec::new();
        let mut at = HEADER_BYTES;
        let framed = if count >= RANGE_GONE { 0 } else { count };
        for index in 0..framed {
            let length = bytes
                .get(at..at + 2)
                .map(|length| usize::from(u16::from_be_bytes([length[0], length[1]])))
                .ok_or(PacketError::Framing { message: index })?;
            let message = bytes
                .get(at + 2..at + 2 + length)
                .ok_or(PacketError::Framing { message: index })?;
            messages.push(message);
            at += 2 + length;
        }
        if at != bytes.len() {
            return Err(PacketError::Framing { message: framed });
        }
        Ok(Packet { session, sequence: u64::from_be_bytes(sequence), count, messages })
    }

    pub fn is_heartbeat(&self) -> bool {
        self.count == 0
    }

    pub fn is_end_of_session(&self) -> bool {
        self.count == END_OF_SESSION
    }

    pub fn is_range_gone(&self) -> bool {
        self.count == RANGE_GONE
    }
}

/// A header alone: a heartbeat (`count` 0), the end of a session (`END_OF_SESSION`),
/// or a retransmission request (the first sequence number wanted and how many).
pub fn header(session: &Session, sequence: u64, count: u16) -> [u8; HEADER_BYTES] {
    let mut bytes = [0u8; HEADER_BYTES];
    bytes[..SESSION_BYTES].copy_from_slice(session);
    bytes[10..18].copy_from_slice(&sequence.to_be_bytes());
    bytes[18..20].copy_from_slice(&count.to_be_bytes());
    bytes
}

/// A retransmission request (a header alone, `count` messages from `sequence`):
/// `None` if `bytes` is not exactly a header.
pub fn parse_request(bytes: &[u8]) -> Option<(Session, u64, u16)> {
    if bytes.len() != HEADER_BYTES {
        return None;
    }
    let mut session = [0u8; SESSION_BYTES];
    session.copy_from_slice(&bytes[..SESSION_BYTES]);
    let mut sequence = [0u8; 8];
    sequence.copy_from_slice(&bytes[10..18]);
    Some((session, u64::from_be_bytes(sequence), u16::from_be_bytes([bytes[18], bytes[19]])))
}

/// Packs messages, in sequence, into packets of at most `PACKET_BYTES_MAX`.
pub struct PacketWriter {
    session: Session,
    /// The sequence number the next message gets.
    next: u64,
    packet: Vec<u8>,
    count: u16,
}

impl PacketWriter {
    /// A session whose first message will be `first`.
    pub fn new(session: Session, first: u64) -> PacketWriter {
        let mut writer = PacketWriter {
            session,
            next: first,
            packet: Vec::with_capacity(PACKET_BYTES_MAX),
            count: 0,
        };
        writer.start();
        writer
    }

    fn start(&mut self) {
        self.packet.clear();
        self.packet.extend_from_slice(&header(&self.session, self.next, 0));
        self.count = 0;
    }

    pub fn session(&self) -> Session {
        self.session
    }

    /// The sequence number of the next message.
    pub fn next_sequence(&self) -> u64 {
        self.next
    }

    /// Adds one message (its bytes); a packet that would grow too large is finished
    /// first and handed to `sent`. Returns the message's sequence number.
    pub fn push(&mut self, message: &[u8], mut sent: impl FnMut(&[u8])) -> u64 {
        if self.count > 0 && self.packet.len() + 2 + message.len() > PACKET_BYTES_MAX {
            self.flush(&mut sent);
        }
        let length = u16::try_from(message.len()).unwrap_or(u16::MAX);
        self.packet.extend_from_slice(&length.to_be_bytes());
        self.packet.extend_from_slice(&message[..usize::from(length)]);
        self.count += 1;
        let sequence = self.next;
        self.next += 1;
        sequence
    }

    /// Hands the packet so far to `sent` (if it has messages) and starts the next.
    pub fn flush(&mut self, mut sent: impl FnMut(&[u8])) {
        if self.count == 0 {
            return;
        }
        self.packet[18..20].copy_from_slice(&self.count.to_be_bytes());
        sent(&self.packet);
        self.start();
    }

    /// Messages waiting in the packet not yet flushed.
    pub fn pending(&self) -> u16 {
        self.count
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn packets_number_their_messages_and_split_before_the_size_limit() {
        let mut packets: Vec<Vec<u8>> = Vec::new();
        let mut writer = PacketWriter::new(session("BOURSE1"), 1);
        let message = [7u8; 100];
        for _ in 0..30 {
            writer.push(&message, |packet| packets.push(packet.to_vec()));
        }
        writer.flush(|packet| packets.push(packet.to_vec()));
        assert!(packets.len() >= 3);
        let mut expected = 1;
        for bytes in &packets {
            assert!(bytes.len() <= PACKET_BYTES_MAX);
            let packet = Packet::parse(bytes).unwrap();
            assert_eq!(&packet.session, b"BOURSE1   ");
            assert_eq!(packet.sequence, expected);
            assert!(packet.messages.iter().all(|m| *m == message));
            expected += u64::from(packet.count);
        }
        assert_eq!(expected, 31);
        assert_eq!(writer.next_sequence(), 31);
    }

    #[test]
    fn heartbeats_ends_and_bad_framing() {
        let heartbeat = header(&session("S"), 42, 0);
        let packet = Packet::parse(&heartbeat).unwrap();
        assert!(packet.is_heartbeat() && packet.sequence == 42 && packet.messages.is_empty());
        assert_eq!(parse_request(&header(&session("S"), 7, 3)), Some((session("S"), 7, 3)));
        assert_eq!(parse_request(&heartbeat[..19]), None);
        let end = header(&session("S"), 42, END_OF_SESSION);
        assert!(Packet::parse(&end).unwrap().is_end_of_session());
        let gone = header(&session("S"), 9, RANGE_GONE);
        assert!(Packet::parse(&gone).unwrap().is_range_gone());
        assert_eq!(Packet::parse(&heartbeat[..19]), Err(PacketError::Short(19)));
        let mut claims_one = header(&session("S"), 1, 1).to_vec();
        assert!(Packet::parse(&claims_one).is_err());
        claims_one.extend_from_slice(&[0, 5, 1, 2]);
        assert!(Packet::parse(&claims_one).is_err());
        let mut extra = heartbeat.to_vec();
        extra.push(0);
        assert!(Packet::parse(&extra).is_err());
    }
}
