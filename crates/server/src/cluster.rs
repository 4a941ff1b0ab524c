//! The cluster this server is a node of (`docs/cluster.md`), as its clients see it:
//! where each node's gateways are, so that a node that does not lead can tell a client
//! where the leader is; and the engine's settings for the node. It never decides who
//! leads (the engine's Raft node does) and holds no state of the venue.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::time::Duration;

use bourse_engine::{ClusterSettings, NodeConfig, NodeId, PeerMap, ReplicaConfig};
use serde_json::{json, Value};

use crate::config::ClusterConfig;

/// Where clients reach one node.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct NodeAddresses {
    pub id: u64,
    /// REST and WebSocket (and the Binance surface, DIFF and the screen).
    pub http: SocketAddr,
    /// Binary order entry.
    pub tcp: SocketAddr,
    /// FIX order entry.
    pub fix: SocketAddr,
}

impl NodeAddresses {
    /// As the `leader` field of a `not_leader` error.
    pub fn to_json(self) -> Value {
        json!({
            "id": self.id,
            "http": self.http.to_string(),
            "tcp": self.tcp.to_string(),
            "fix": self.fix.to_string(),
        })
    }
}

/// Every node of the cluster (empty when this server is not in one).
#[derive(Clone, Debug, Default)]
pub struct NodeDirectory {
    nodes: BTreeMap<u64, NodeAddresses>,
}

/// What a client that asked a node that does not lead is told: the leader, if one is
/// known, and why the node did not take the request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NotLeader {
    pub leader: Option<NodeAddresses>,
    pub message: String,
}

impl NodeDirectory {
    pub fn new(config: &ClusterConfig) -> NodeDirectory {
        let nodes = config
            .nodes
            .iter()
            .map(|node| {
                let addresses =
                    NodeAddresses { id: node.id, http: node.http, tcp: node.tcp, fix: node.fix };
                (node.id, addresses)
            })
            .collect();
        NodeDirectory { nodes }
    }

    pub fn node(&self, id: u64) -> Option<NodeAddresses> {
        self.nodes.get(&id).copied()
    }

    pub fn nodes(&self) -> impl Iterator<Item = NodeAddresses> + '_ {
        self.nodes.values().copied()
    }

    /// `reason` (why the request was not taken), with where the leader is.
    pub fn not_leader(&self, leader: Option<u64>, reason: &str) -> NotLeader {
        let found = leader.and_then(|id| self.node(id));
        let message = match (leader, found) {
            (Some(_), Some(node)) => format!(
                "{reason}; the leader is node {} at {} (REST), {} (binary TCP), {} (FIX)",
                node.id, node.http, node.tcp, node.fix
            ),
            (Some(id), None) => format!("{reason}; the leader is node {id}"),
            (None, _) => format!("{reason}; no leader is known yet: try again shortly"),
        };
        NotLeader { leader: found, message }
    }
}

/// The engine's settings for this node of `config`'s cluster: its peers, and a clock
/// whose tick is a tenth of the election timeout.
pub fn engine_settings(config: &ClusterConfig) -> ClusterSettings {
    let tick = Duration::from_millis(config.election_timeout_ms / ClusterConfig::ELECTION_TICKS);
    let mut node = NodeConfig::new(NodeId(config.id));
    node.election_ticks = ClusterConfig::ELECTION_TICKS as usize;
    node.heartbeat_ticks = ClusterConfig::HEARTBEAT_TICKS as usize;
    let addresses = config.nodes.iter().map(|entry| (NodeId(entry.id), entry.peer)).collect();
    ClusterSettings {
        replica: ReplicaConfig {
            node,
            peers: PeerMap { cluster: config.cluster_id, me: NodeId(config.id), addresses },
            tick,
        },
        initial_voters: config
            .nodes
            .iter()
            .filter(|entry| !entry.joins)
            .map(|entry| entry.id)
            .collect(),
        digest_every: config.digest_every,
        records: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config() -> ClusterConfig {
        let text = r#"
            id = 2
            election_timeout_ms = 300
            [[nodes]]
            id = 1
            peer = "127.0.0.1:7001"
            http = "127.0.0.1:8001"
            tcp = "127.0.0.1:9001"
            fix = "127.0.0.1:9801"
            [[nodes]]
            id = 2
            peer = "127.0.0.1:7002"
            http = "127.0.0.1:8002"
            tcp = "127.0.0.1:9002"
            fix = "127.0.0.1:9802"
        "#;
        toml::from_str(text).unwrap()
    }

    #[test]
    fn a_node_that_does_not_lead_names_the_leaders_addresses() {
        let directory = NodeDirectory::new(&config());
        let told = directory.not_leader(Some(1), "not the leader");
        assert_eq!(told.leader.map(|node| node.http.port()), Some(8001));
        for address in ["127.0.0.1:8001", "127.0.0.1:9001", "127.0.0.1:9801"] {
            assert!(told.message.contains(address), "{}", told.message);
        }
        let unknown = directory.not_leader(None, "not the leader");
        assert_eq!(unknown.leader, None);
        assert!(unknown.message.contains("no leader is known"), "{}", unknown.message);
        let stranger = directory.not_leader(Some(9), "not the leader");
        assert!(stranger.message.contains("node 9"), "{}", stranger.message);
    }

    #[test]
    fn the_engine_gets_the_peers_and_a_tick_of_a_tenth_of_the_election_timeout() {
        let settings = engine_settings(&config());
        assert_eq!(settings.replica.tick, Duration::from_millis(30));
        assert_eq!(settings.replica.peers.me, NodeId(2));
        assert_eq!(settings.replica.peers.addresses.len(), 2);
        assert_eq!(settings.initial_voters, vec![1, 2]);
        // A node that joins later is a peer, not one of the first voters.
        let mut with_joiner = config();
        let mut joiner = with_joiner.nodes[1].clone();
        joiner.id = 3;
        joiner.joins = true;
        with_joiner.nodes.push(joiner);
        let settings = engine_settings(&with_joiner);
        assert_eq!(settings.replica.peers.addresses.len(), 3);
        assert_eq!(settings.initial_voters, vec![1, 2]);
    }
}
