//! Following a cluster's leader (`--follow-leader`, `docs/cluster.md`): where the
//! nodes are and which one leads, as any node's `GET /v1/cluster` says. The binary
//! protocol's loop that uses it (`tcp::run_following`) sends to the leader, and when
//! the leader dies or a node answers `not_leader`, it finds the new leader and sends
//! again, with the same client order ids, every request it has no answer to: the
//! venue's duplicate rule makes that exactly once (the original outcome, or
//! `duplicate_id` when the first try was applied and its answer lost).

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use serde_json::Value;

use super::admin;

/// One node's addresses, as `GET /v1/cluster` lists them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct NodeAddresses {
    pub id: u64,
    pub http: SocketAddr,
    pub tcp: SocketAddr,
}

/// A cluster's nodes.
#[derive(Clone, Debug)]
pub struct ClusterMap {
    nodes: Vec<NodeAddresses>,
}

/// How long a connection looks for a leader before it gives up.
pub const LEADER_WAIT: Duration = Duration::from_secs(30);

impl ClusterMap {
    /// The nodes, from node `http`'s `GET /v1/cluster`.
    pub fn discover(http: SocketAddr) -> Result<ClusterMap, String> {
        let (status, view) = admin::get(http, "/v1/cluster")?;
        if status != 200 || view["clustered"] != true {
            return Err(format!("{http} is not a node of a cluster (GET /v1/cluster: {view})"));
        }
        let address = |node: &Value, name: &str| -> Result<SocketAddr, String> {
            node[name]
                .as_str()
                .and_then(|text| text.parse().ok())
                .ok_or_else(|| format!("GET /v1/cluster on {http}: a node without `{name}`"))
        };
        let nodes = view["nodes"]
            .as_array()
            .ok_or_else(|| format!("GET /v1/cluster on {http}: no nodes"))?
            .iter()
            .map(|node| {
                Ok(NodeAddresses {
                    id: node["id"].as_u64().ok_or("a node without an id")?,
                    http: address(node, "http")?,
                    tcp: address(node, "tcp")?,
                })
            })
            .collect::<Result<Vec<_>, String>>()?;
        if nodes.is_empty() {
            return Err(format!("GET /v1/cluster on {http}: no nodes"));
        }
        Ok(ClusterMap { nodes })
    }

    /// The leader, as the first node that answers and knows one says (asking again
    /// every 20 ms during an election), for up to `LEADER_WAIT`.
    pub fn leader(&self) -> Result<NodeAddresses, String> {
        let deadline = Instant::now() + LEADER_WAIT;
        loop {
            for node in &self.nodes {
                let Ok((200, view)) = admin::get(node.http, "/v1/cluster") else { continue };
                let leader = view["leader"].as_u64();
                if let Some(found) = self.nodes.iter().find(|node| Some(node.id) == leader) {
                    return Ok(*found);
                }
            }
            if Instant::now() > deadline {
                return Err(format!("no node named a leader within {LEADER_WAIT:?}"));
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}
