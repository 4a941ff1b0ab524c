//! A deterministic simulation of a cluster, as FoundationDB and TigerBeetle test theirs:
//! three (or five) real `Node`s with their real `RaftLog`s, in one process, over a
//! simulated network (delays, loss, duplication, reordering, partitions) and simulated
//! disks (what was not synced is lost when a node crashes, and the last write may be
//! torn; a disk may fail its writes), under one seeded scheduler. Every choice comes from the
//! seed, so a failing seed replays exactly: `BOURSE_SIM_SEED=<seed> cargo test -p
//! bourse-cluster --test simulation`.
//!
//! The application on each node is a small state machine of its own (proposal ids and a
//! digest chain), snapshotted into the
//! log's compaction point, so lagging nodes catch up by snapshot too. After every run,
//! with the faults healed: every node applied the same entries at the same indexes,
//! there was at most one leader per term, every proposal a leader acknowledged is in
//! every node's state exactly once, and the states' digests are equal.

use std::cell::RefCell;
use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::io;
use std::rc::Rc;

use bourse_cluster::{
    Applied, Disk, Entry, EntryType, Message, MessageType, Node, NodeConfig, NodeId, Proposed,
    RaftLog, Snapshot,
};
use bytes::Bytes;
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

/// `BOURSE_SIM_TRACE=1` prints what happens in a run (with `BOURSE_SIM_SEED`).
fn tracing() -> bool {
    static TRACE: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *TRACE.get_or_init(|| std::env::var_os("BOURSE_SIM_TRACE").is_some())
}

macro_rules! trace {
    ($($arg:tt)*) => {
        if tracing() {
            eprintln!($($arg)*);
        }
    };
}

// ---------------------------------------------------------------------------------------
// The simulated disk.

/// A file as the node sees it (`current`) and as a crash would leave it (`durable`).
#[derive(Clone, Default)]
struct SimFile {
    current: Vec<u8>,
    durable: Vec<u8>,
}

#[derive(Default)]
struct SimFiles {
    files: BTreeMap<String, SimFile>,
    /// The disk fails every write and sync from now on (a full or failing disk): the
    /// node stops.
    failed: bool,
}

impl SimFiles {
    /// A crash: what was synced survives; of what was appended since, a prefix may have
    /// reached the disk, its last bytes perhaps damaged (a torn write).
    fn crash(&mut self, rng: &mut SmallRng) {
        for file in self.files.values_mut() {
            let extends =
                file.current.len() > file.durable.len() && file.current.starts_with(&file.durable);
            let mut survived = file.durable.clone();
            if extends && rng.gen_bool(0.5) {
                let extra = &file.current[file.durable.len()..];
                let kept = rng.gen_range(0..=extra.len());
                survived.extend_from_slice(&extra[..kept]);
                if kept > 0 && rng.gen_bool(0.3) {
                    let last = survived.len() - 1;
                    survived[last] ^= 0x5a;
                }
            }
            file.current = survived.clone();
            file.durable = survived;
        }
        self.failed = false;
    }
}

#[derive(Clone)]
struct SimDisk(Rc<RefCell<SimFiles>>);

impl SimDisk {
    /// The file `name`, made empty if missing.
    fn file(&self, name: &str) -> std::cell::RefMut<'_, SimFile> {
        std::cell::RefMut::map(self.0.borrow_mut(), |files| {
            files.files.entry(name.to_string()).or_default()
        })
    }

    fn check(&self) -> io::Result<()> {
        if self.0.borrow().failed {
            return Err(io::Error::other("the simulated disk failed"));
        }
        Ok(())
    }
}

impl Disk for SimDisk {
    fn list(&mut self) -> io::Result<Vec<String>> {
        Ok(self.0.borrow().files.keys().cloned().collect())
    }

    fn read(&mut self, name: &str) -> io::Result<Option<Vec<u8>>> {
        Ok(self.0.borrow().files.get(name).map(|file| file.current.clone()))
    }

    fn read_at(&self, name: &str, offset: u64, len: usize) -> io::Result<Vec<u8>> {
        // A failing disk here is a full one: reads still work. (A disk that cannot be
        // read at all stops raft-rs with a panic, a crash: the crashes cover it.)
        let files = self.0.borrow();
        let file = files.files.get(name).ok_or_else(|| io::Error::other("no such file"))?;
        let range = offset as usize..offset as usize + len;
        file.current.get(range).map(<[u8]>::to_vec).ok_or_else(|| io::Error::other("short read"))
    }

    fn append(&mut self, name: &str, bytes: &[u8]) -> io::Result<()> {
        self.check()?;
        self.file(name).current.extend_from_slice(bytes);
        Ok(())
    }

    fn truncate(&mut self, name: &str, len: u64) -> io::Result<()> {
        self.check()?;
        self.file(name).current.truncate(len as usize);
        Ok(())
    }

    fn sync(&mut self, name: &str) -> io::Result<()> {
        self.check()?;
        let mut file = self.file(name);
        file.durable = file.current.clone();
        Ok(())
    }

    fn replace(&mut self, name: &str, bytes: &[u8]) -> io::Result<()> {
        self.check()?;
        let file = SimFile { current: bytes.to_vec(), durable: bytes.to_vec() };
        self.0.borrow_mut().files.insert(name.to_string(), file);
        Ok(())
    }

    fn remove(&mut self, name: &str) -> io::Result<()> {
        self.check()?;
        self.0.borrow_mut().files.remove(name);
        Ok(())
    }
}

// ---------------------------------------------------------------------------------------
// The application: what each node's state machine holds.

#[derive(Clone, Default, PartialEq, Eq, Debug)]
struct App {
    applied: u64,
    /// Proposal ids taken, in order (each is proposed once: one taken twice would be an
    /// entry applied twice).
    ids: Vec<u64>,
    digest: u64,
}

impl App {
    fn encode(&self) -> Bytes {
        let mut out = Vec::new();
        out.extend_from_slice(&self.applied.to_le_bytes());
        out.extend_from_slice(&self.digest.to_le_bytes());
        for id in &self.ids {
            out.extend_from_slice(&id.to_le_bytes());
        }
        Bytes::from(out)
    }

    fn decode(bytes: &[u8]) -> App {
        let word = |at: usize| u64::from_le_bytes(bytes[at..at + 8].try_into().unwrap());
        let ids = (16..bytes.len()).step_by(8).map(word).collect();
        App { applied: word(0), digest: word(8), ids }
    }

    fn apply(&mut self, entry: &Entry) -> Option<u64> {
        assert_eq!(entry.index, self.applied + 1, "entries are applied in order, without a gap");
        self.applied = entry.index;
        self.digest = self.digest.rotate_left(7) ^ entry.index.wrapping_mul(0x9e37_79b9_7f4a_7c15);
        if entry.entry_type != EntryType::EntryNormal || entry.data.is_empty() {
            return None;
        }
        let id = u64::from_le_bytes(entry.data[..8].try_into().unwrap());
        self.digest ^= id.wrapping_mul(0xff51_afd7_ed55_8ccd);
        self.ids.push(id);
        Some(id)
    }
}

// ---------------------------------------------------------------------------------------
// The cluster under the scheduler.

const TICK_MS: u64 = 10;
/// Entries a node applies between compactions of its log.
const COMPACT_EVERY: u64 = 40;

struct Live {
    node: Node<SimDisk>,
    app: App,
    next_tick: u64,
    /// Proposals this node made as leader and not yet seen committed or lost.
    pending: VecDeque<(Proposed, u64)>,
}

struct SimNode {
    id: NodeId,
    files: Rc<RefCell<SimFiles>>,
    live: Option<Live>,
    /// When a stopped node starts again.
    restart_at: u64,
    election_ticks: (usize, usize),
}

struct InFlight {
    deliver_at: u64,
    order: u64,
    message: Message,
}

#[derive(Default)]
struct Faults {
    crash: f64,
    disk_failure: f64,
    partition: f64,
    loss: f64,
    duplicate: f64,
    max_delay_ms: u64,
}

struct Sim {
    seed: u64,
    rng: SmallRng,
    now: u64,
    nodes: Vec<SimNode>,
    voters: Vec<u64>,
    network: Vec<InFlight>,
    sent: u64,
    /// Nodes cut off from the others, until a time.
    isolated: BTreeMap<NodeId, u64>,
    faults: Faults,
    next_id: u64,
    /// Every committed entry seen applied anywhere: (term, data) by index.
    committed: BTreeMap<u64, (u64, Bytes)>,
    leaders: BTreeMap<u64, NodeId>,
    acknowledged: BTreeSet<u64>,
    lost: u64,
}

/// What `advance` hands back, gathered for the scheduler.
struct Out<'a> {
    id: NodeId,
    app: &'a mut App,
    pending: &'a mut VecDeque<(Proposed, u64)>,
    messages: Vec<Message>,
    committed: &'a mut BTreeMap<u64, (u64, Bytes)>,
    leaders: &'a mut BTreeMap<u64, NodeId>,
    acknowledged: &'a mut BTreeSet<u64>,
    lost: &'a mut u64,
    seed: u64,
}

impl Applied for Out<'_> {
    fn send(&mut self, message: Message) {
        self.messages.push(message);
    }

    fn install(&mut self, snapshot: &Snapshot) {
        trace!("  {} installs a snapshot at {}", self.id, snapshot.get_metadata().index);
        let app = App::decode(&snapshot.data);
        assert!(app.applied >= self.app.applied || app.applied == snapshot.get_metadata().index);
        *self.app = app;
    }

    fn apply(&mut self, entry: &Entry) {
        let seed = self.seed;
        match self.committed.get(&entry.index) {
            Some((term, data)) => assert!(
                *term == entry.term && *data == entry.data,
                "seed {seed}: {} applied a different entry at {} (term {} vs {term})",
                self.id,
                entry.index,
                entry.term
            ),
            None => {
                self.committed.insert(entry.index, (entry.term, entry.data.clone()));
            }
        }
        let id = self.app.apply(entry);
        // The leader answers its proposals: taken if its entry is the one committed.
        while let Some((proposed, proposal)) = self.pending.front().copied() {
            if proposed.index > entry.index {
                break;
            }
            self.pending.pop_front();
            if proposed.index == entry.index && proposed.term == entry.term {
                assert_eq!(id, Some(proposal), "seed {seed}: the entry is the proposal");
                trace!("  {} acknowledges {proposal} at {proposed:?}", self.id);
                self.acknowledged.insert(proposal);
            } else {
                *self.lost += 1;
            }
        }
    }

    fn leadership(&mut self, leader: Option<NodeId>, term: u64) {
        trace!("  {} sees leader {leader:?} in term {term}", self.id);
        if leader == Some(self.id) {
            if let Some(other) = self.leaders.insert(term, self.id) {
                assert_eq!(other, self.id, "seed {}: two leaders in term {term}", self.seed);
            }
        } else {
            // Proposals of a leader that lost its term stay pending: they are
            // answered if and when their entries commit (or another entry takes their place).
        }
    }
}

impl Sim {
    fn new(seed: u64, size: u64) -> Sim {
        let mut rng = SmallRng::seed_from_u64(seed);
        let voters: Vec<u64> = (1..=size).collect();
        let faults = Faults {
            crash: rng.gen_range(0.0..0.002),
            disk_failure: rng.gen_range(0.0..0.002),
            partition: rng.gen_range(0.0..0.002),
            loss: rng.gen_range(0.0..0.1),
            duplicate: rng.gen_range(0.0..0.05),
            max_delay_ms: rng.gen_range(1..30),
        };
        let mut sim = Sim {
            seed,
            rng,
            now: 0,
            nodes: Vec::new(),
            voters: voters.clone(),
            network: Vec::new(),
            sent: 0,
            isolated: BTreeMap::new(),
            faults,
            next_id: 1,
            committed: BTreeMap::new(),
            leaders: BTreeMap::new(),
            acknowledged: BTreeSet::new(),
            lost: 0,
        };
        for id in voters {
            // Each node's election timeout is fixed by the seed (raft-rs would draw it
            // from the thread's random numbers, which no seed replays).
            let min = sim.rng.gen_range(10..30);
            let node = SimNode {
                id: NodeId(id),
                files: Rc::new(RefCell::new(SimFiles::default())),
                live: None,
                restart_at: 0,
                election_ticks: (min, min + 1),
            };
            sim.nodes.push(node);
        }
        for at in 0..sim.nodes.len() {
            sim.start(at);
        }
        sim
    }

    fn start(&mut self, at: usize) {
        let node = &mut self.nodes[at];
        let disk = SimDisk(Rc::clone(&node.files));
        let log = RaftLog::open(disk, &self.voters)
            .unwrap_or_else(|error| {
                panic!("seed {}: {} does not open: {error}", self.seed, node.id)
            })
            .with_segment_bytes(512)
            // A few entries whole in memory: a lagging node's are read back from disk.
            .with_cache_bytes(64);
        let app = match log.snapshot_ref().get_metadata().index {
            0 => App::default(),
            _ => App::decode(&log.snapshot_ref().data),
        };
        let mut config = NodeConfig::new(node.id);
        config.election_ticks = node.election_ticks.0;
        config.election_ticks_range = Some(node.election_ticks);
        config.heartbeat_ticks = 2;
        config.applied = app.applied;
        config.max_bytes_per_message = 1024;
        config.max_inflight_messages = 8;
        let raft_node = Node::new(&config, log).unwrap_or_else(|error| {
            panic!("seed {}: {} does not start: {error}", self.seed, node.id)
        });
        let phase = self.rng.gen_range(0..TICK_MS);
        trace!(
            "{} {} starts: {:?}, applied {}, torn {:?}",
            self.now,
            node.id,
            raft_node.status(),
            app.applied,
            raft_node.log().torn_tail()
        );
        node.live = Some(Live {
            node: raft_node,
            app,
            next_tick: self.now + phase,
            pending: VecDeque::new(),
        });
    }

    fn stop(&mut self, at: usize, down_for: u64) {
        let node = &mut self.nodes[at];
        if node.live.take().is_some() {
            trace!("{} {} stops for {down_for} ms", self.now, node.id);
            node.files.borrow_mut().crash(&mut self.rng);
            node.restart_at = self.now + down_for;
        }
    }

    fn connected(&self, from: NodeId, to: NodeId) -> bool {
        !self.isolated.contains_key(&from) && !self.isolated.contains_key(&to)
    }

    fn live_count(&self) -> usize {
        self.nodes.iter().filter(|node| node.live.is_some()).count()
    }

    /// One simulated millisecond.
    fn step(&mut self, with_faults: bool, propose: bool) {
        self.now += 1;
        let now = self.now;
        // Faults and recoveries.
        if with_faults {
            for at in 0..self.nodes.len() {
                let live = self.nodes[at].live.is_some();
                // At most a minority down at a time, so the cluster can make progress.
                let minority = self.live_count() > self.nodes.len() / 2 + 1;
                if live && minority && self.rng.gen_bool(self.faults.crash) {
                    let down_for = self.rng.gen_range(1..2000);
                    self.stop(at, down_for);
                } else if live && minority && self.rng.gen_bool(self.faults.disk_failure) {
                    trace!("{now} {}'s disk fails", self.nodes[at].id);
                    self.nodes[at].files.borrow_mut().failed = true;
                }
                let id = self.nodes[at].id;
                if self.isolated.is_empty() && self.rng.gen_bool(self.faults.partition) {
                    let until = now + self.rng.gen_range(1..3000);
                    trace!("{now} {id} is cut off until {until}");
                    self.isolated.insert(id, until);
                }
            }
        }
        self.isolated.retain(|_, until| *until > now);
        for at in 0..self.nodes.len() {
            if self.nodes[at].live.is_none() && self.nodes[at].restart_at <= now {
                self.start(at);
            }
        }
        // Messages due now, in the order they were sent.
        let mut due = Vec::new();
        let mut waiting = Vec::new();
        for flight in self.network.drain(..) {
            if flight.deliver_at <= now {
                due.push(flight);
            } else {
                waiting.push(flight);
            }
        }
        self.network = waiting;
        due.sort_by_key(|flight| (flight.deliver_at, flight.order));
        for flight in due {
            let (from, to) = (NodeId(flight.message.from), NodeId(flight.message.to));
            let is_snapshot = flight.message.msg_type == MessageType::MsgSnapshot;
            let delivered =
                self.connected(from, to) && self.nodes[(to.0 - 1) as usize].live.is_some();
            if delivered {
                if let Some(live) = &mut self.nodes[(to.0 - 1) as usize].live {
                    let _ = live.node.receive(flight.message);
                }
            }
            // The sender learns how a snapshot's sending ended (a transport does: the
            // connection took it, or broke).
            if is_snapshot {
                if let Some(live) = &mut self.nodes[(from.0 - 1) as usize].live {
                    live.node.report_snapshot(to, delivered);
                }
            }
        }
        // Ticks and proposals.
        for node in &mut self.nodes {
            if let Some(live) = &mut node.live {
                while live.next_tick <= now {
                    live.node.tick();
                    live.next_tick += TICK_MS;
                }
            }
        }
        if propose && self.rng.gen_bool(0.3) {
            let at = self.rng.gen_range(0..self.nodes.len());
            let id = self.next_id;
            if let Some(live) = &mut self.nodes[at].live {
                if let Ok(proposed) = live.node.propose(id.to_le_bytes().to_vec()) {
                    trace!("{now} {} proposes {id} at {proposed:?}", live.node.id());
                    live.pending.push_back((proposed, id));
                    self.next_id += 1;
                }
            }
        }
        // Each node does what it was given.
        for at in 0..self.nodes.len() {
            self.advance(at);
        }
    }

    fn advance(&mut self, at: usize) {
        let seed = self.seed;
        let node = &mut self.nodes[at];
        let Some(live) = &mut node.live else { return };
        let mut out = Out {
            id: node.id,
            app: &mut live.app,
            pending: &mut live.pending,
            messages: Vec::new(),
            committed: &mut self.committed,
            leaders: &mut self.leaders,
            acknowledged: &mut self.acknowledged,
            lost: &mut self.lost,
            seed,
        };
        let result = live.node.advance(&mut out);
        let messages = std::mem::take(&mut out.messages);
        let compact = result.is_ok()
            && live.app.applied
                >= live.node.log().snapshot_ref().get_metadata().index + COMPACT_EVERY;
        let compacted = if compact {
            live.node
                .compact(live.app.applied, live.app.encode())
                .map_err(|error| error.to_string())
        } else {
            Ok(())
        };
        // What the node handed over before a failure has left it.
        for message in messages {
            self.send(message);
        }
        if result.is_err() || compacted.is_err() {
            // A storage failure stops the node (fail-stop); it comes back later.
            let down_for = self.rng.gen_range(1..2000);
            self.stop(at, down_for);
        }
    }

    fn send(&mut self, message: Message) {
        // A snapshot is never lost silently: its sender hears of a failure.
        if message.msg_type != MessageType::MsgSnapshot && self.rng.gen_bool(self.faults.loss) {
            return;
        }
        let copies = if self.rng.gen_bool(self.faults.duplicate) { 2 } else { 1 };
        for _ in 0..copies {
            let deliver_at = self.now + self.rng.gen_range(1..=self.faults.max_delay_ms);
            self.sent += 1;
            self.network.push(InFlight { deliver_at, order: self.sent, message: message.clone() });
        }
    }

    /// Runs `faulty_ms` with faults and proposals, then heals everything and runs until
    /// every node holds the same state; checks what a run must end with.
    fn run(mut self, faulty_ms: u64) -> Summary {
        for _ in 0..faulty_ms {
            self.step(true, true);
        }
        // Heal: every node up, no partition, no loss; a few more proposals.
        self.isolated.clear();
        self.faults.loss = 0.0;
        self.faults.duplicate = 0.0;
        for at in 0..self.nodes.len() {
            if self.nodes[at].live.is_none() {
                self.nodes[at].restart_at = self.now;
            }
        }
        for _ in 0..2_000 {
            self.step(false, true);
        }
        let mut settled = false;
        for _ in 0..60_000 {
            self.step(false, false);
            if self.settled() {
                settled = true;
                break;
            }
        }
        let seed = self.seed;
        assert!(
            settled,
            "seed {seed}: the cluster did not settle once healed: {}",
            self.describe()
        );
        let states: Vec<&App> =
            self.nodes.iter().filter_map(|node| node.live.as_ref()).map(|live| &live.app).collect();
        for app in &states {
            assert_eq!(app.digest, states[0].digest, "seed {seed}: digests differ");
            let mut seen = BTreeSet::new();
            for id in &app.ids {
                assert!(seen.insert(*id), "seed {seed}: proposal {id} taken twice");
            }
            for id in &self.acknowledged {
                assert!(
                    seen.contains(id),
                    "seed {seed}: acknowledged proposal {id} lost (a state applied to {}: {:?})",
                    app.applied,
                    app.ids
                );
            }
        }
        Summary {
            acknowledged: self.acknowledged.len() as u64,
            lost: self.lost,
            terms: self.leaders.len() as u64,
            applied: states[0].applied,
            simulated_ms: self.now,
        }
    }

    /// Every node up, one leader, and every node has applied everything in its log.
    fn settled(&self) -> bool {
        let lives: Vec<&Live> = self.nodes.iter().filter_map(|node| node.live.as_ref()).collect();
        if lives.len() != self.nodes.len() {
            return false;
        }
        let leaders: Vec<&&Live> = lives.iter().filter(|live| live.node.is_leader()).collect();
        let [leader] = leaders[..] else { return false };
        // Everything in the leader's log is committed (a new leader's first entry too)
        // and applied everywhere.
        let last = leader.node.status().last_index;
        lives.iter().all(|live| {
            let status = live.node.status();
            status.commit == last && live.app.applied == last && live.pending.is_empty()
        })
    }

    fn describe(&self) -> String {
        self.nodes
            .iter()
            .map(|node| match &node.live {
                Some(live) => format!("{:?} applied {}", live.node.status(), live.app.applied),
                None => format!("{} down", node.id),
            })
            .collect::<Vec<_>>()
            .join("; ")
    }
}

#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
struct Summary {
    acknowledged: u64,
    lost: u64,
    terms: u64,
    applied: u64,
    simulated_ms: u64,
}

fn seeds() -> Vec<u64> {
    if let Some(seed) = std::env::var("BOURSE_SIM_SEED").ok().and_then(|seed| seed.parse().ok()) {
        return vec![seed];
    }
    let count =
        std::env::var("BOURSE_SIM_SEEDS").ok().and_then(|count| count.parse().ok()).unwrap_or(300);
    let first = std::env::var("BOURSE_SIM_FIRST_SEED")
        .ok()
        .and_then(|first| first.parse().ok())
        .unwrap_or(0);
    (first..first + count).collect()
}

/// Runs `size` nodes under every seed, `faulty_ms` of faults each; their sums.
fn run_seeds(seeds: impl IntoIterator<Item = u64>, size: u64, faulty_ms: u64) -> Summary {
    let mut total = Summary::default();
    for seed in seeds {
        let summary = Sim::new(seed, size).run(faulty_ms);
        total.acknowledged += summary.acknowledged;
        total.lost += summary.lost;
        total.terms += summary.terms;
        total.applied += summary.applied;
        total.simulated_ms += summary.simulated_ms;
    }
    total
}

#[test]
fn three_nodes_under_crashes_partitions_loss_and_torn_writes_agree_and_lose_no_acknowledged_entry()
{
    let total = run_seeds(seeds(), 3, 8_000);
    eprintln!("three nodes: {total:?}");
    assert!(total.acknowledged > 0);
}

#[test]
fn five_nodes_agree_and_lose_no_acknowledged_entry() {
    let total = run_seeds(seeds().into_iter().take(30).map(|seed| seed ^ 0x5eed_0005), 5, 6_000);
    eprintln!("five nodes: {total:?}");
    assert!(total.acknowledged > 0);
}

#[test]
fn a_seed_replays_exactly() {
    assert_eq!(run_seeds([4242], 3, 4_000), run_seeds([4242], 3, 4_000));
}
