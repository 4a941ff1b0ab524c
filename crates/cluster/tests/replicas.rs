//! Three replicas on loopback, each with its Raft log in a directory of its own and real
//! TCP between them: a leader is elected, what it proposes is applied by all three in
//! the same order, and when the leader stops another takes over and goes on; the
//! stopped node, started again from its directory, catches up.

use std::collections::BTreeMap;
use std::net::{SocketAddr, TcpListener};
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bourse_cluster::batch::{Batch, BatchWriter, LogClock};
use bourse_cluster::{
    Application, Entry, NodeConfig, NodeId, PeerMap, Replica, ReplicaConfig, Unanswered,
};

/// An applied item: its number, the entry's index, the item.
type AppliedItem = (u64, u64, Vec<u8>);

/// What one node applied (every item, numbered), and what came back of its proposals.
#[derive(Clone, Default)]
struct Record {
    items: Arc<Mutex<Vec<AppliedItem>>>,
    answered: Arc<Mutex<Vec<u32>>>,
    unanswered: Arc<Mutex<Vec<(u32, Unanswered)>>>,
}

impl Record {
    fn items(&self) -> Vec<AppliedItem> {
        self.items.lock().unwrap().clone()
    }
}

impl Application for Record {
    type Tag = u32;

    fn install(&mut self, _clock: LogClock, _state: &[u8]) {
        panic!("no snapshot is taken in this test");
    }

    fn apply(&mut self, entry: &Entry, batch: Option<Batch<'_>>, tag: Option<u32>) {
        if let Some(batch) = batch {
            let first = batch.header.first_seq;
            let mut items = self.items.lock().unwrap();
            for (at, item) in batch.enumerate() {
                items.push((first + at as u64, entry.index, item.to_vec()));
            }
        }
        if let Some(tag) = tag {
            self.answered.lock().unwrap().push(tag);
        }
    }

    fn unanswered(&mut self, tag: u32, why: Unanswered) {
        self.unanswered.lock().unwrap().push((tag, why));
    }

    fn leadership(&mut self, _leader: Option<NodeId>, _term: u64) {}

    fn stopped(&mut self, failure: Option<&str>) {
        assert_eq!(failure, None);
    }
}

/// A batch of two items for proposal `n`.
fn batch(n: u32) -> BatchWriter {
    let mut batch = BatchWriter::new();
    batch.push(format!("order {n}").as_bytes());
    batch.push(format!("cancel {n}").as_bytes());
    batch
}

fn free_address() -> SocketAddr {
    TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap()
}

fn config(me: u64, addresses: &BTreeMap<NodeId, SocketAddr>) -> ReplicaConfig {
    let mut node = NodeConfig::new(NodeId(me));
    node.election_ticks = 10;
    node.heartbeat_ticks = 2;
    ReplicaConfig {
        node,
        peers: PeerMap { cluster: 77, me: NodeId(me), addresses: addresses.clone() },
        tick: Duration::from_millis(50),
    }
}

fn start(
    me: u64,
    addresses: &BTreeMap<NodeId, SocketAddr>,
    dir: &Path,
    record: &Record,
) -> Replica<Record> {
    let raft_dir = dir.join(format!("node-{me}"));
    Replica::start(config(me, addresses), &raft_dir, &[1, 2, 3], 0, record.clone()).unwrap()
}

fn wait_for(what: &str, within: Duration, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + within;
    while !done() {
        assert!(Instant::now() < deadline, "{what}: not within {within:?}");
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// The one replica (of those running) that leads, once there is one.
fn leader(replicas: &BTreeMap<u64, Replica<Record>>) -> Option<u64> {
    let leaders: Vec<u64> = replicas
        .iter()
        .filter(|(_, replica)| replica.status().status.is_leader)
        .map(|(id, _)| *id)
        .collect();
    (leaders.len() == 1).then(|| leaders[0])
}

#[test]
fn three_replicas_elect_replicate_fail_over_and_catch_up() {
    let dir = tempfile::tempdir().unwrap();
    let addresses: BTreeMap<NodeId, SocketAddr> =
        (1..=3).map(|id| (NodeId(id), free_address())).collect();
    let records: BTreeMap<u64, Record> = (1..=3).map(|id| (id, Record::default())).collect();
    let mut replicas: BTreeMap<u64, Replica<Record>> =
        (1..=3).map(|id| (id, start(id, &addresses, dir.path(), &records[&id]))).collect();
    let mut first = 0;
    wait_for("a leader", Duration::from_secs(10), || {
        first = leader(&replicas).unwrap_or(0);
        first != 0
    });
    for n in 0..200u32 {
        assert!(replicas[&first].propose(batch(n), n));
    }
    // A call made after them runs once all 200 are answered.
    let (seen, answered_then) = std::sync::mpsc::channel();
    replicas[&first].after_proposals(Box::new(move |record: &mut Record| {
        let _ = seen.send(record.answered.lock().unwrap().len());
    }));
    assert_eq!(answered_then.recv_timeout(Duration::from_secs(10)), Ok(200));
    // A follower refuses, naming the leader (once it has heard from it).
    let follower = (1..=3).find(|id| *id != first).unwrap();
    wait_for("the follower hears from the leader", Duration::from_secs(5), || {
        replicas[&follower].status().status.leader == Some(NodeId(first))
    });
    replicas[&follower].propose(batch(999), 999);
    wait_for("the follower's refusal", Duration::from_secs(5), || {
        !records[&follower].unanswered.lock().unwrap().is_empty()
    });
    assert_eq!(
        records[&follower].unanswered.lock().unwrap()[..],
        [(999, Unanswered::NotLeader(Some(NodeId(first))))]
    );
    wait_for("400 items on every node", Duration::from_secs(10), || {
        records.values().all(|record| record.items().len() == 400)
    });
    let applied = records[&first].items();
    assert!(records.values().all(|record| record.items() == applied));
    // Numbered 1, 2, 3, ... in proposal order; every proposal answered to its leader.
    assert_eq!((applied[0].0, &applied[0].2[..]), (1, &b"order 0"[..]));
    assert_eq!((applied[399].0, &applied[399].2[..]), (400, &b"cancel 199"[..]));
    assert_eq!(*records[&first].answered.lock().unwrap(), (0..200).collect::<Vec<u32>>());

    // The leader stops; another takes over within a few election timeouts.
    let stopped_at = Instant::now();
    replicas.remove(&first).unwrap().stop();
    let mut second = 0;
    wait_for("a new leader", Duration::from_secs(10), || {
        second = leader(&replicas).unwrap_or(0);
        second != 0
    });
    let failover = stopped_at.elapsed();
    assert_ne!(second, first);
    for n in 200..300u32 {
        assert!(replicas[&second].propose(batch(n), n));
    }
    wait_for("600 items on the two running nodes", Duration::from_secs(10), || {
        replicas.keys().all(|id| records[id].items().len() == 600)
    });
    // The new leader numbers on from where the log ended.
    let items = records[&second].items();
    assert_eq!((items[400].0, &items[400].2[..]), (401, &b"order 200"[..]));

    // The stopped node starts again from its directory and catches up: its record
    // starts empty, and raft-rs hands it every committed entry again (its state was
    // not kept), in the same order.
    let again = Record::default();
    replicas.insert(first, start(first, &addresses, dir.path(), &again));
    wait_for("the restarted node catches up", Duration::from_secs(10), || {
        again.items().len() == 600
    });
    assert_eq!(again.items(), records[&second].items());
    eprintln!("failover (stop to a new leader): {failover:?}");
    for (_, replica) in replicas {
        replica.stop();
    }
}
