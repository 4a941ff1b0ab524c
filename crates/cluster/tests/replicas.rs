//! Three replicas on loopback, each with its Raft log in a directory of its own and real
//! TCP between them: a leader is elected, what it proposes is applied by all three in
//! the same order, and when the leader stops another takes over and goes on; the
//! stopped node, started again from its directory, catches up.

use std::collections::BTreeMap;
use std::net::{SocketAddr, TcpListener};
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bourse_cluster::{
    Application, Entry, NodeConfig, NodeId, PeerMap, Replica, ReplicaConfig, Snapshot,
};

/// An applied entry: index, term, data.
type AppliedEntry = (u64, u64, Vec<u8>);

/// What one node applied: every normal entry with data.
#[derive(Clone, Default)]
struct Record(Arc<Mutex<Vec<AppliedEntry>>>);

impl Record {
    fn entries(&self) -> Vec<AppliedEntry> {
        self.0.lock().unwrap().clone()
    }
}

impl Application for Record {
    fn install(&mut self, _snapshot: &Snapshot) {
        panic!("no snapshot is taken in this test");
    }

    fn apply(&mut self, entry: &Entry) {
        if !entry.data.is_empty() && entry.entry_type == bourse_cluster::EntryType::EntryNormal {
            self.0.lock().unwrap().push((entry.index, entry.term, entry.data.to_vec()));
        }
    }

    fn leadership(&mut self, _leader: Option<NodeId>, _term: u64) {}
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
) -> Replica {
    Replica::start(
        config(me, addresses),
        &dir.join(format!("node-{me}")),
        &[1, 2, 3],
        record.clone(),
    )
    .unwrap()
}

fn wait_for(what: &str, within: Duration, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + within;
    while !done() {
        assert!(Instant::now() < deadline, "{what}: not within {within:?}");
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// The one replica (of those running) that leads, once there is one.
fn leader(replicas: &BTreeMap<u64, Replica>) -> Option<u64> {
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
    let mut replicas: BTreeMap<u64, Replica> =
        (1..=3).map(|id| (id, start(id, &addresses, dir.path(), &records[&id]))).collect();
    let mut first = 0;
    wait_for("a leader", Duration::from_secs(10), || {
        first = leader(&replicas).unwrap_or(0);
        first != 0
    });
    for n in 0..200u32 {
        replicas[&first].propose(format!("order {n}").into_bytes()).unwrap();
    }
    // A follower refuses, naming the leader.
    let follower = (1..=3).find(|id| *id != first).unwrap();
    let refused = replicas[&follower].propose(b"refused".to_vec()).unwrap_err();
    assert_eq!(refused.leader, Some(NodeId(first)));
    wait_for("200 entries on every node", Duration::from_secs(10), || {
        records.values().all(|record| record.entries().len() == 200)
    });
    let applied = records[&first].entries();
    assert!(records.values().all(|record| record.entries() == applied));
    assert_eq!(applied[0].2, b"order 0");

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
        replicas[&second].propose(format!("order {n}").into_bytes()).unwrap();
    }
    wait_for("300 entries on the two running nodes", Duration::from_secs(10), || {
        replicas.keys().all(|id| records[id].entries().len() == 300)
    });

    // The stopped node starts again from its directory and catches up: its record
    // starts empty, and raft-rs hands it every committed entry again (its state was
    // not kept), in the same order.
    let again = Record::default();
    replicas.insert(first, start(first, &addresses, dir.path(), &again));
    wait_for("the restarted node catches up", Duration::from_secs(10), || {
        again.entries().len() == 300
    });
    assert_eq!(again.entries(), records[&second].entries());
    eprintln!("failover (stop to a new leader): {failover:?}");
    for (_, replica) in replicas {
        replica.stop();
    }
}
