//! Three engines as the nodes of a cluster, in one process, on loopback: the leader's
//! commands are applied by every node with the same numbers and the same state; a
//! follower refuses commands and names the leader; when the leader stops, another
//! takes over, and the stopped node, started again from its data directory, catches up
//! to the same state.

use std::collections::BTreeMap;
use std::net::{SocketAddr, TcpListener};
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bourse_cluster::{NodeConfig, NodeId, PeerMap, ReplicaConfig};
use bourse_core::format::{parse_line, state_digest};
use bourse_core::Seq;
use bourse_engine::{ClusterSettings, Engine, EngineConfig, Outcome, Released, SubmitError};
use crossbeam_channel::{unbounded, Receiver};

fn lines(from: usize, to: usize) -> Vec<String> {
    let mut lines = Vec::new();
    if from == 0 {
        lines.extend([
            r#"{"cmd":"asset","asset":"USD","decimals":2}"#.to_string(),
            r#"{"cmd":"asset","asset":"BTC","decimals":4}"#.to_string(),
            r#"{"cmd":"instrument","symbol":"BTC-USD","base":"BTC","quote":"USD","tick":"1","lot":"0.01","min_qty":"0.01","max_qty":"1000","maker_fee_bps":5,"taker_fee_bps":10,"market_band_bps":1000}"#.to_string(),
        ]);
        for account in ["alice", "bob"] {
            for asset in ["USD", "BTC"] {
                lines.push(format!(
                    r#"{{"cmd":"deposit","account":"{account}","asset":"{asset}","amount":"1000000"}}"#
                ));
            }
        }
    }
    for index in from..to {
        let (account, side, price) = if index % 2 == 0 {
            ("alice", "buy", 100 + index % 7)
        } else {
            ("bob", "sell", 98 + index % 9)
        };
        lines.push(format!(r#"{{"cmd":"order","account":"{account}","id":"o{index}","symbol":"BTC-USD","side":"{side}","type":"limit","price":"{price}","qty":"1.5"}}"#));
    }
    lines
}

fn free_address() -> SocketAddr {
    TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap()
}

fn start(me: u64, addresses: &BTreeMap<NodeId, SocketAddr>, dir: &Path) -> Engine {
    let mut config = EngineConfig::new(dir.join(format!("node-{me}")));
    let node = NodeConfig::new(NodeId(me));
    config.cluster = Some(ClusterSettings {
        replica: ReplicaConfig {
            node,
            peers: PeerMap { cluster: 7, me: NodeId(me), addresses: addresses.clone() },
            tick: Duration::from_millis(50),
        },
        initial_voters: vec![1, 2, 3],
        // Every node's digest is compared with the leader's every 50 commands.
        digest_every: 50,
        records: None,
    });
    Engine::start(config).unwrap()
}

fn wait_for(what: &str, within: Duration, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + within;
    while !done() {
        assert!(Instant::now() < deadline, "{what}: not within {within:?}");
        std::thread::sleep(Duration::from_millis(10));
    }
}

fn leader(engines: &BTreeMap<u64, Engine>) -> Option<u64> {
    let leaders: Vec<u64> = engines
        .iter()
        .filter(|(_, engine)| engine.cluster_status().is_some_and(|status| status.status.is_leader))
        .map(|(id, _)| *id)
        .collect();
    (leaders.len() == 1).then(|| leaders[0])
}

/// The leader, once the running engines have elected one.
fn wait_for_leader(engines: &BTreeMap<u64, Engine>) -> u64 {
    let mut found = 0;
    wait_for("a leader", Duration::from_secs(10), || {
        found = leader(engines).unwrap_or(0);
        found != 0
    });
    found
}

/// Submits every line on `engine` and returns the outcomes' seqs, in order.
fn run(engine: &Engine, lines: &[String]) -> Vec<Seq> {
    let (sink, receiver): (_, Receiver<Released>) = unbounded();
    let session = engine.open_session(Arc::new(sink));
    for (index, line) in lines.iter().enumerate() {
        session.submit(&parse_line(line).unwrap().command, index as u64).unwrap();
    }
    let mut seqs = Vec::new();
    while seqs.len() < lines.len() {
        let released = receiver.recv_timeout(Duration::from_secs(10)).expect("outcomes");
        for outcome in &released.outcomes {
            let Outcome::Applied(result) = outcome else { panic!("failed: {outcome:?}") };
            assert_eq!(result.correlation.request, seqs.len() as u64, "in submission order");
            seqs.push(result.seq);
        }
    }
    seqs
}

fn applied(engine: &Engine) -> Seq {
    engine.stats().applied_seq
}

fn digest(engine: &Engine) -> String {
    engine.query(state_digest).unwrap()
}

#[test]
fn three_engines_apply_the_same_commands_fail_over_and_catch_up() {
    let dir = tempfile::tempdir().unwrap();
    let addresses: BTreeMap<NodeId, SocketAddr> =
        (1..=3).map(|id| (NodeId(id), free_address())).collect();
    let mut engines: BTreeMap<u64, Engine> =
        (1..=3).map(|id| (id, start(id, &addresses, dir.path()))).collect();
    let first = wait_for_leader(&engines);
    let batch = lines(0, 300);
    let seqs = run(&engines[&first], &batch);
    assert_eq!(seqs, (1..=batch.len() as u64).map(Seq).collect::<Vec<_>>());
    // A follower takes no command and names the leader (once it has heard from it).
    let follower = (1..=3).find(|id| *id != first).unwrap();
    wait_for("the follower hears from the leader", Duration::from_secs(10), || {
        engines[&follower]
            .cluster_status()
            .is_some_and(|status| status.status.leader == Some(NodeId(first)))
    });
    let (sink, _receiver): (_, Receiver<Released>) = unbounded();
    let session = engines[&follower].open_session(Arc::new(sink));
    let refused = session.submit(&parse_line(&batch[0]).unwrap().command, 0).unwrap_err();
    assert_eq!(refused, SubmitError::NotLeader { leader: Some(first) });
    drop(session);
    // Every node applies the same commands to the same state.
    let last = Seq(batch.len() as u64);
    wait_for("every node applies them", Duration::from_secs(10), || {
        engines.values().all(|engine| applied(engine) == last)
    });
    let leader_digest = digest(&engines[&first]);
    for engine in engines.values() {
        assert_eq!(digest(engine), leader_digest);
    }

    // The leader stops; another takes over and goes on numbering.
    engines.remove(&first).unwrap().shutdown().unwrap();
    let second = wait_for_leader(&engines);
    let more = lines(300, 400);
    let seqs = run(&engines[&second], &more);
    assert_eq!(seqs.first(), Some(&Seq(last.0 + 1)));
    let last = Seq(last.0 + more.len() as u64);
    wait_for("both running nodes apply them", Duration::from_secs(10), || {
        engines.values().all(|engine| applied(engine) == last)
    });

    // The stopped node starts again from its directory (its journal and its Raft log)
    // and catches up to the same state.
    let again = start(first, &addresses, dir.path());
    assert_eq!(again.start_report().last_seq, Seq(batch.len() as u64));
    engines.insert(first, again);
    wait_for("the restarted node catches up", Duration::from_secs(10), || {
        applied(&engines[&first]) == last
    });
    let digests: Vec<String> = engines.values().map(digest).collect();
    assert!(digests.iter().all(|digest| *digest == digests[0]), "{digests:?}");
    // Each node compared its digests with the leader's as it went, at the points (every
    // 50 commands) whose digest a leader proposed: at least 350 and 400, which the
    // second leader proposed, on every node (the restarted one's first point is 350).
    wait_for("the digests compared", Duration::from_secs(10), || {
        engines.values().all(|engine| {
            let (compared, last) = engine.digests_compared();
            compared >= 2 && last == Seq(400)
        })
    });
    for engine in engines.values() {
        assert!(engine.failure().is_none(), "{:?}", engine.failure());
    }
    for (_, engine) in engines {
        engine.shutdown().unwrap();
    }
}
