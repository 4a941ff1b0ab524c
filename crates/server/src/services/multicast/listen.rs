//! The reference subscriber's networking (`bourse md listen`, and the tests): joins the
//! feed's multicast group, hands every packet to a `Rebuilder`, and recovers what is
//! missing: a gap by asking the retransmission service, a range it no longer holds (or
//! a late start) by a snapshot from the snapshot service. Blocking sockets with short
//! timeouts: one thread, no runtime.
//!
//! A cluster's nodes each serve retransmissions and snapshots of the same feed: given
//! several, the subscriber asks the next when one does not answer (it may be the leader
//! that died).

use std::io::Read;
use std::net::{Ipv4Addr, SocketAddr, TcpStream, UdpSocket};
use std::time::{Duration, Instant};

use bourse_marketdata::message::Message;
use bourse_marketdata::mold::{self, Packet};
use bourse_marketdata::rebuild::RebuildError;
use bourse_marketdata::Rebuilder;

use super::RANGE_GONE;

/// How long a retransmission answer is waited for before asking again.
const RETRANSMIT_WAIT: Duration = Duration::from_millis(200);
/// Retransmission requests for one gap before a snapshot is taken instead.
const RETRANSMIT_TRIES: u32 = 3;

/// Where the feed and its services are (one of each per node of a cluster).
#[derive(Clone, Debug)]
pub struct FeedAddresses {
    pub multicast: SocketAddr,
    pub interface: Ipv4Addr,
    pub snapshot: Vec<SocketAddr>,
    pub retransmit: Vec<SocketAddr>,
}

/// Why listening stopped.
#[derive(Debug, thiserror::Error)]
pub enum ListenError {
    #[error("network: {0}")]
    Io(#[from] std::io::Error),
    #[error("the feed: {0}")]
    Rebuild(#[from] RebuildError),
    #[error("the snapshot service sent bad data: {0}")]
    Snapshot(String),
}

/// What the subscriber did to recover, for its report.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Recoveries {
    pub retransmit_requests: u64,
    pub retransmitted_packets: u64,
    pub ranges_gone: u64,
    pub snapshots: u64,
}

pub struct Listener {
    feed: UdpSocket,
    control: UdpSocket,
    addresses: FeedAddresses,
    pub rebuilder: Rebuilder,
    pub recoveries: Recoveries,
    buffer: Vec<u8>,
    /// Drop this share of the feed's packets (0 to 100), to exercise recovery.
    pub drop_percent: u64,
    random: u64,
    /// The gap being recovered and how often it was asked for.
    asked: Option<((u64, u64), u32)>,
    /// The services asked last (indexes into `addresses`): the next are asked when
    /// these do not answer.
    retransmit_at: usize,
    snapshot_at: usize,
}

impl Listener {
    /// Joins the feed. Nothing is applied until the first snapshot (`poll` takes it).
    pub fn join(addresses: FeedAddresses) -> Result<Listener, ListenError> {
        if addresses.snapshot.is_empty() || addresses.retransmit.is_empty() {
            return Err(ListenError::Io(std::io::Error::other(
                "no snapshot or retransmission service named",
            )));
        }
        let SocketAddr::V4(group) = addresses.multicast else {
            return Err(ListenError::Io(std::io::Error::other("the feed's group is not IPv4")));
        };
        let socket = socket2::Socket::new(
            socket2::Domain::IPV4,
            socket2::Type::DGRAM,
            Some(socket2::Protocol::UDP),
        )?;
        socket.set_reuse_address(true)?;
        socket.set_recv_buffer_size(8 << 20)?;
        socket.bind(&SocketAddr::from((*group.ip(), group.port())).into())?;
        socket.join_multicast_v4(group.ip(), &addresses.interface)?;
        let feed: UdpSocket = socket.into();
        let control = UdpSocket::bind(SocketAddr::from((addresses.interface, 0)))?;
        Ok(Listener {
            feed,
            control,
            addresses,
            rebuilder: Rebuilder::starting_at(0),
            recoveries: Recoveries::default(),
            buffer: vec![0; 65_536],
            drop_percent: 0,
            random: 0x2545_F491_4F6C_DD1D,
            asked: None,
            retransmit_at: 0,
            snapshot_at: 0,
        })
    }

    /// Takes packets for `wait`, recovering gaps as they show.
    pub fn poll(&mut self, wait: Duration) -> Result<(), ListenError> {
        let until = Instant::now() + wait;
        loop {
            self.recover()?;
            let left = until.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Ok(());
            }
            self.feed.set_read_timeout(Some(left.min(Duration::from_millis(50))))?;
            match self.feed.recv_from(&mut self.buffer) {
                Ok((length, _)) => {
                    if self.drop_percent > 0 && self.roll() < self.drop_percent {
                        continue;
                    }
                    let packet = self.buffer[..length].to_vec();
                    self.take(&packet)?;
                }
                Err(error)
                    if matches!(
                        error.kind(),
                        std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                    ) => {}
                Err(error) => return Err(error.into()),
            }
        }
    }

    fn roll(&mut self) -> u64 {
        self.random ^= self.random << 13;
        self.random ^= self.random >> 7;
        self.random ^= self.random << 17;
        self.random % 100
    }

    fn take(&mut self, packet: &[u8]) -> Result<(), ListenError> {
        match self.rebuilder.on_packet(packet) {
            // Another session: the exchange restarted. Start over from its snapshot.
            Err(RebuildError::OtherSession) => {
                self.rebuilder = Rebuilder::starting_at(0);
                self.rebuilder.on_packet(packet)?;
                Ok(())
            }
            other => Ok(other?),
        }
    }

    /// A snapshot when one is needed; a retransmission request for a gap, or a
    /// snapshot when the range is gone or the requests go unanswered.
    fn recover(&mut self) -> Result<(), ListenError> {
        if self.rebuilder.needs_snapshot() {
            return self.snapshot();
        }
        let Some(gap) = self.rebuilder.gap() else {
            self.asked = None;
            return Ok(());
        };
        let tries = match self.asked {
            Some((asked, tries)) if asked.0 == gap.0 => tries,
            _ => 0,
        };
        if tries >= RETRANSMIT_TRIES {
            self.asked = None;
            return self.snapshot();
        }
        self.asked = Some((gap, tries + 1));
        // A service that did not answer: ask the next.
        if tries > 0 {
            self.retransmit_at = (self.retransmit_at + 1) % self.addresses.retransmit.len();
        }
        let Some(session) = self.rebuilder.session() else { return Ok(()) };
        let count = u16::try_from(gap.1.min(super::RETRANSMIT_MESSAGES_MAX)).unwrap_or(u16::MAX);
        let service = self.addresses.retransmit[self.retransmit_at];
        // (A service that is down may refuse at once: that is no answer either.)
        let _ = self.control.send_to(&mold::header(&session, gap.0, count), service);
        self.recoveries.retransmit_requests += 1;
        let until = Instant::now() + RETRANSMIT_WAIT;
        while Instant::now() < until {
            self.control.set_read_timeout(Some(Duration::from_millis(20)))?;
            let length = match self.control.recv_from(&mut self.buffer) {
                Ok((length, _)) => length,
                Err(error)
                    if matches!(
                        error.kind(),
                        std::io::ErrorKind::WouldBlock
                            | std::io::ErrorKind::TimedOut
                            | std::io::ErrorKind::ConnectionRefused
                    ) =>
                {
                    if self.rebuilder.gap().is_none_or(|now| now.0 != gap.0) {
                        return Ok(());
                    }
                    continue;
                }
                Err(error) => return Err(error.into()),
            };
            let packet = self.buffer[..length].to_vec();
            if Packet::parse(&packet).is_ok_and(|parsed| parsed.count == RANGE_GONE) {
                self.recoveries.ranges_gone += 1;
                self.asked = None;
                return self.snapshot();
            }
            self.recoveries.retransmitted_packets += 1;
            self.take(&packet)?;
            if self.rebuilder.gap().is_none_or(|now| now.0 != gap.0) {
                return Ok(());
            }
        }
        Ok(())
    }

    /// Reads every book from a snapshot service and puts the rebuilder on it: the one
    /// that answered last, or the next that answers.
    pub fn snapshot(&mut self) -> Result<(), ListenError> {
        let services = self.addresses.snapshot.len();
        let mut failed = None;
        for _ in 0..services {
            let service = self.addresses.snapshot[self.snapshot_at];
            let taken = fetch_snapshot(service).and_then(|messages| {
                if messages.is_empty() {
                    // (A node of a cluster that does not know the feed's numbering.)
                    return Err(ListenError::Snapshot(format!("{service} sent none")));
                }
                Ok(self.rebuilder.apply_snapshot(&messages)?)
            });
            match taken {
                Ok(()) => {
                    self.recoveries.snapshots += 1;
                    return Ok(());
                }
                Err(error) => {
                    failed = Some(error);
                    self.snapshot_at = (self.snapshot_at + 1) % services;
                }
            }
        }
        Err(failed.unwrap_or_else(|| ListenError::Snapshot("no snapshot service".into())))
    }
}

/// The snapshot service's answer, as messages.
pub fn fetch_snapshot(address: SocketAddr) -> Result<Vec<Message>, ListenError> {
    let mut stream = TcpStream::connect_timeout(&address, Duration::from_secs(5))?;
    stream.set_read_timeout(Some(Duration::from_secs(30)))?;
    let mut bytes = Vec::new();
    stream.read_to_end(&mut bytes)?;
    let mut messages = Vec::new();
    let mut at = 0;
    while at < bytes.len() {
        let length = bytes
            .get(at..at + 2)
            .map(|length| usize::from(u16::from_be_bytes([length[0], length[1]])))
            .ok_or_else(|| ListenError::Snapshot("a cut length".into()))?;
        let message = bytes
            .get(at + 2..at + 2 + length)
            .ok_or_else(|| ListenError::Snapshot("a cut message".into()))?;
        messages.push(
            Message::decode(message).map_err(|error| ListenError::Snapshot(error.to_string()))?,
        );
        at += 2 + length;
    }
    Ok(messages)
}
