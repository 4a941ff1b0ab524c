//! The server's settings: embedded defaults, then an optional TOML file, then
//! environment variables (`BOURSE_*`), then command-line flags, each overriding the one
//! before. Nothing here opens a file other than the TOML one, or binds a port.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use bourse_engine::Durability;
use serde::Deserialize;

#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ServeConfig {
    /// Journal, snapshots and the key store live here.
    pub data_dir: PathBuf,
    /// `sync` (an acknowledgement means the command is on disk), `async` or `none`.
    pub durability: String,
    pub http: HttpConfig,
    pub tcp: TcpConfig,
    pub fix: FixConfig,
    pub auth: AuthConfig,
    pub limits: LimitsConfig,
    pub marketdata: MarketDataConfig,
    pub history: HistoryConfig,
    pub futures: FuturesConfig,
    /// A node of a cluster (`docs/cluster.md`); absent: one process on one disk.
    pub cluster: Option<ClusterConfig>,
}

/// The cluster this server is a node of: every node, where its peers and its clients
/// reach it, and how soon a new leader is elected. The same table is given to every
/// node; each is told which one it is (`id`, or `--node`).
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ClusterConfig {
    /// This node's id, one of `nodes` (`--node` or `BOURSE_NODE_ID` say it instead).
    #[serde(default)]
    pub id: u64,
    /// The cluster's own number: a peer of another cluster is refused.
    #[serde(default = "ClusterConfig::default_cluster_id")]
    pub cluster_id: u64,
    /// A follower that hears nothing from a leader for this long (a draw between this
    /// and twice this, again at every term) stands for election; a leader sends
    /// heartbeats every fifth of it. At least 100.
    #[serde(default = "ClusterConfig::default_election_timeout_ms")]
    pub election_timeout_ms: u64,
    /// Every this many commands each node's state digest is compared with the
    /// leader's; 0: never.
    #[serde(default = "ClusterConfig::default_digest_every")]
    pub digest_every: u64,
    pub nodes: Vec<NodeEntry>,
}

impl ClusterConfig {
    fn default_cluster_id() -> u64 {
        1
    }

    fn default_election_timeout_ms() -> u64 {
        500
    }

    fn default_digest_every() -> u64 {
        bourse_engine::DIGEST_EVERY_DEFAULT
    }

    /// The shortest `election_timeout_ms` taken.
    pub const ELECTION_TIMEOUT_MS_MIN: u64 = 100;
    /// Ticks of a node's clock in an election timeout (heartbeats every
    /// `HEARTBEAT_TICKS`).
    pub const ELECTION_TICKS: u64 = 10;
    pub const HEARTBEAT_TICKS: u64 = 2;

    /// This node's entry.
    pub fn me(&self) -> Option<&NodeEntry> {
        self.nodes.iter().find(|node| node.id == self.id)
    }
}

/// One node of a cluster.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NodeEntry {
    /// 1 or more, different for each node.
    pub id: u64,
    /// Where the other nodes reach it (Raft's messages).
    pub peer: SocketAddr,
    /// Where its clients reach it: REST and WebSocket, binary TCP, FIX. A node that
    /// does not lead names the leader's in its `not_leader` answers.
    pub http: SocketAddr,
    pub tcp: SocketAddr,
    pub fix: SocketAddr,
    /// Its data directory, when not the configured one (nodes on one host need their own).
    #[serde(default)]
    pub data_dir: Option<PathBuf>,
    /// Its market-data recovery services, when not the configured ones.
    #[serde(default)]
    pub marketdata_snapshot: Option<SocketAddr>,
    #[serde(default)]
    pub marketdata_retransmit: Option<SocketAddr>,
    /// Not one of the cluster's first voters: a node added later (`bourse cluster add`),
    /// which waits, as a learner, until the leader adds it.
    #[serde(default)]
    pub joins: bool,
}

/// Futures (`docs/futures.md`): the risk process and the daily settlement.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct FuturesConfig {
    /// Liquidate an account whose equity falls below this share of its positions'
    /// margin (a decimal string, more than 0, at most 10).
    pub maintenance_share: String,
    /// How often the risk process checks every account; 0 turns it off.
    pub risk_interval_ms: u64,
    /// The daily settlement's time, `HH:MM` at `settlement_utc_offset_minutes`; absent:
    /// settlement on demand only (the admin REST).
    pub settlement_time: Option<String>,
    /// The settlement time's offset from UTC, in minutes (480: China Standard Time).
    pub settlement_utc_offset_minutes: i32,
}

impl Default for FuturesConfig {
    fn default() -> Self {
        FuturesConfig {
            maintenance_share: "0.5".to_string(),
            risk_interval_ms: 250,
            settlement_time: None,
            settlement_utc_offset_minutes: 480,
        }
    }
}

/// The history (`docs/history.md`): Parquet files of every order, trade and balance
/// change under `data/history`, written from the journal by a thread of its own.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct HistoryConfig {
    /// Write the history at all (it needs the journal: not with durability `none`).
    pub enabled: bool,
    /// Commit (files, lookups, checkpoint) at least this often while commands arrive.
    pub commit_every_ms: u64,
    /// ... and as soon as this many rows wait.
    pub commit_rows: usize,
    /// While the engine takes more than 10,000 commands/s, the history follows at most
    /// this share of the time (and catches up once the load drops); 1.0 never gives way.
    pub busy_share: f64,
}

impl Default for HistoryConfig {
    fn default() -> Self {
        HistoryConfig {
            enabled: true,
            commit_every_ms: 2_000,
            commit_rows: 1_000_000,
            busy_share: 0.1,
        }
    }
}

/// The market-data feed (`docs/protocol-marketdata.md`): UDP multicast, and its
/// recovery services.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct MarketDataConfig {
    /// Publish the feed at all.
    pub enabled: bool,
    /// The multicast group and port the feed's packets go to.
    pub multicast: SocketAddr,
    /// The local interface (its IPv4 address) they leave by.
    pub interface: std::net::Ipv4Addr,
    /// Multicast TTL: 0 keeps the feed on this host, 1 on its network.
    pub ttl: u32,
    /// The TCP snapshot service: every book, at a covered sequence number.
    pub snapshot_listen: SocketAddr,
    /// The UDP retransmission service (MoldUDP64 requests).
    pub retransmit_listen: SocketAddr,
    /// Messages kept for retransmission, at most (older ranges are gone: snapshot).
    pub history_messages: usize,
    /// A heartbeat goes out after this long without a packet.
    pub heartbeat_ms: u64,
}

impl Default for MarketDataConfig {
    fn default() -> Self {
        MarketDataConfig {
            enabled: true,
            multicast: SocketAddr::from(([239, 255, 66, 1], 31_001)),
            interface: std::net::Ipv4Addr::LOCALHOST,
            ttl: 0,
            snapshot_listen: SocketAddr::from(([127, 0, 0, 1], 9091)),
            retransmit_listen: SocketAddr::from(([127, 0, 0, 1], 9092)),
            history_messages: 1_000_000,
            heartbeat_ms: 1_000,
        }
    }
}

#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct HttpConfig {
    /// REST and WebSocket.
    pub listen: SocketAddr,
}

#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct TcpConfig {
    /// Binary order entry (`docs/protocol-binary.md`).
    pub listen: SocketAddr,
}

impl Default for TcpConfig {
    fn default() -> Self {
        TcpConfig { listen: SocketAddr::from(([127, 0, 0, 1], 9090)) }
    }
}

/// FIX 4.4 order entry (`docs/fix.md`).
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct FixConfig {
    pub listen: SocketAddr,
    /// The venue's CompID: SenderCompID (49) of what it sends, the TargetCompID (56)
    /// it expects.
    pub comp_id: String,
    /// Sent application messages kept per session for resending, at most (older ones
    /// are answered with a GapFill).
    pub store_messages: usize,
    /// The HeartBtInt (108) a Logon may ask for, at most, in seconds.
    pub heartbeat_max_s: u64,
}

impl Default for FixConfig {
    fn default() -> Self {
        FixConfig {
            listen: SocketAddr::from(([127, 0, 0, 1], 9876)),
            comp_id: "BOURSE".to_string(),
            store_messages: 1_000_000,
            heartbeat_max_s: 300,
        }
    }
}

#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct AuthConfig {
    /// A signed request's timestamp may differ from the server's clock by this much.
    pub timestamp_window_ms: u64,
    /// A TCP connection must log in within this long.
    pub login_timeout_ms: u64,
    /// Where the master key (64 hex digits) is, when it is kept off the data directory;
    /// by default `DATA_DIR/server/master.key`, made on first start.
    pub master_key_file: Option<PathBuf>,
    /// Failed password logins of an account in a row that cost nothing; each one after
    /// them locks the account's password logins for twice as long as the one before
    /// (1 s, 2 s, 4 s, ...).
    pub login_failures_free: u32,
    /// Failed password logins in a row that lock the account's password logins for
    /// `login_lock_s` (logged, and counted in `/metrics`).
    pub login_failures_lock: u32,
    /// How long that lock lasts, in seconds (and how long a run of failures is
    /// remembered).
    pub login_lock_s: u64,
}

#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct LimitsConfig {
    /// Requests per API key per second, sustained (a token bucket).
    pub requests_per_second: u32,
    /// Requests per API key allowed at once above the sustained rate.
    pub requests_burst: u32,
    /// Largest request body, in bytes.
    pub body_bytes_max: usize,
    /// Open orders per account, at most (0: no limit); an order beyond it is rejected
    /// `too_many_open_orders` by the engine (a journaled venue setting, applied at start
    /// when it differs from the data directory's).
    pub open_orders_per_account: u64,
    /// Requests a client may have waiting for the engine, over all keys; beyond it the
    /// server answers `busy` (503).
    pub in_flight_max: usize,
    /// Logged-in WebSocket connections per API key.
    pub connections_per_key: usize,
    /// Messages waiting to be sent to one WebSocket client; a client that lets more
    /// pile up is disconnected (`slow_consumer`).
    pub ws_queue_messages: usize,
    /// The same for a binary TCP connection (its acknowledgements, fills and updates;
    /// larger, as an order-entry client at full rate gets several per order).
    pub tcp_queue_frames: usize,
    /// A TCP connection that sends nothing (not even a heartbeat) for this long is closed.
    pub idle_timeout_ms: u64,
}

impl Default for ServeConfig {
    fn default() -> Self {
        ServeConfig {
            data_dir: PathBuf::from("./data"),
            durability: "sync".to_string(),
            http: HttpConfig::default(),
            tcp: TcpConfig::default(),
            fix: FixConfig::default(),
            auth: AuthConfig::default(),
            limits: LimitsConfig::default(),
            marketdata: MarketDataConfig::default(),
            history: HistoryConfig::default(),
            futures: FuturesConfig::default(),
            cluster: None,
        }
    }
}

impl Default for HttpConfig {
    fn default() -> Self {
        HttpConfig { listen: SocketAddr::from(([127, 0, 0, 1], 8080)) }
    }
}

impl Default for AuthConfig {
    fn default() -> Self {
        AuthConfig {
            timestamp_window_ms: 5_000,
            login_timeout_ms: 10_000,
            master_key_file: None,
            login_failures_free: 3,
            login_failures_lock: 10,
            login_lock_s: 15 * 60,
        }
    }
}

impl Default for LimitsConfig {
    fn default() -> Self {
        LimitsConfig {
            requests_per_second: 100,
            requests_burst: 200,
            body_bytes_max: 64 * 1024,
            open_orders_per_account: 10_000,
            in_flight_max: 50_000,
            connections_per_key: 16,
            ws_queue_messages: 4_096,
            tcp_queue_frames: 65_536,
            idle_timeout_ms: 30_000,
        }
    }
}

/// Why the settings cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("cannot read the configuration file {path}: {source}")]
    Read { path: PathBuf, source: std::io::Error },
    #[error("the configuration file {path} is not valid: {message}")]
    Parse { path: PathBuf, message: String },
    #[error("{name}={value:?} is not valid: {expected}")]
    Variable { name: String, value: String, expected: &'static str },
    #[error("durability {0:?} is not one of sync, async, none")]
    Durability(String),
    #[error("history.busy_share {0} is not a share of the time: more than 0, at most 1")]
    BusyShare(f64),
    #[error("the cluster's settings are not usable: {0}")]
    Cluster(String),
}

/// Settings given on the command line; `None` leaves the file's or the environment's.
#[derive(Clone, Debug, Default)]
pub struct Overrides {
    pub data_dir: Option<PathBuf>,
    pub http_listen: Option<SocketAddr>,
    pub tcp_listen: Option<SocketAddr>,
    pub fix_listen: Option<SocketAddr>,
    pub durability: Option<String>,
    /// `Some(false)` turns the market-data feed off.
    pub marketdata: Option<bool>,
    pub md_multicast: Option<SocketAddr>,
    pub md_snapshot_listen: Option<SocketAddr>,
    pub md_retransmit_listen: Option<SocketAddr>,
    /// `Some(false)` turns the history off.
    pub history: Option<bool>,
    /// Which node of the configured cluster this server is (`--node`).
    pub node: Option<u64>,
}

impl ServeConfig {
    /// Defaults, then `file` (if any), then `environment` (name, value pairs: pass
    /// `std::env::vars()`), then `overrides`.
    pub fn load(
        file: Option<&Path>,
        environment: impl IntoIterator<Item = (String, String)>,
        overrides: &Overrides,
    ) -> Result<ServeConfig, ConfigError> {
        let mut config = match file {
            Some(path) => ServeConfig::from_file(path)?,
            None => ServeConfig::default(),
        };
        for (name, value) in environment {
            config.apply_variable(&name, value)?;
        }
        if let Some(data_dir) = &overrides.data_dir {
            config.data_dir = data_dir.clone();
        }
        if let Some(listen) = overrides.http_listen {
            config.http.listen = listen;
        }
        if let Some(listen) = overrides.tcp_listen {
            config.tcp.listen = listen;
        }
        if let Some(listen) = overrides.fix_listen {
            config.fix.listen = listen;
        }
        if let Some(durability) = &overrides.durability {
            config.durability = durability.clone();
        }
        if let Some(enabled) = overrides.marketdata {
            config.marketdata.enabled = enabled;
        }
        if let Some(multicast) = overrides.md_multicast {
            config.marketdata.multicast = multicast;
        }
        if let Some(listen) = overrides.md_snapshot_listen {
            config.marketdata.snapshot_listen = listen;
        }
        if let Some(listen) = overrides.md_retransmit_listen {
            config.marketdata.retransmit_listen = listen;
        }
        if let Some(enabled) = overrides.history {
            config.history.enabled = enabled;
        }
        if let Some(cluster) = &mut config.cluster {
            if let Some(node) = overrides.node {
                cluster.id = node;
            }
        }
        config.take_node_addresses()?;
        config.durability()?;
        let share = config.history.busy_share;
        if !(share > 0.0 && share <= 1.0) {
            return Err(ConfigError::BusyShare(share));
        }
        Ok(config)
    }

    /// In a cluster, the table is checked, and this node listens where the table says
    /// (its addresses there are what other nodes tell clients): its listeners, and its
    /// data directory and market-data services when the table gives them.
    fn take_node_addresses(&mut self) -> Result<(), ConfigError> {
        let Some(cluster) = &self.cluster else { return Ok(()) };
        let invalid = |message: String| Err(ConfigError::Cluster(message));
        if cluster.nodes.is_empty() {
            return invalid("[cluster] names no nodes ([[cluster.nodes]])".to_string());
        }
        let mut ids = std::collections::BTreeSet::new();
        for node in &cluster.nodes {
            if node.id == 0 || !ids.insert(node.id) {
                return invalid(format!("node id {} is 0 or given twice", node.id));
            }
        }
        if cluster.nodes.iter().all(|node| node.joins) {
            return invalid(
                "every node `joins`: the first voters are the nodes that do not".into(),
            );
        }
        if cluster.election_timeout_ms < ClusterConfig::ELECTION_TIMEOUT_MS_MIN {
            return invalid(format!(
                "election_timeout_ms {} is under {}",
                cluster.election_timeout_ms,
                ClusterConfig::ELECTION_TIMEOUT_MS_MIN
            ));
        }
        let Some(me) = cluster.me().cloned() else {
            return invalid(format!(
                "this node's id {} is not one of the nodes {ids:?} (say which with --node)",
                cluster.id
            ));
        };
        self.http.listen = me.http;
        self.tcp.listen = me.tcp;
        self.fix.listen = me.fix;
        if let Some(data_dir) = me.data_dir {
            self.data_dir = data_dir;
        }
        if let Some(listen) = me.marketdata_snapshot {
            self.marketdata.snapshot_listen = listen;
        }
        if let Some(listen) = me.marketdata_retransmit {
            self.marketdata.retransmit_listen = listen;
        }
        Ok(())
    }

    /// The settings of `path` over the defaults alone (no environment, no flags, not
    /// checked): for tools that read a cluster's table.
    pub fn from_file(path: &Path) -> Result<ServeConfig, ConfigError> {
        let text = std::fs::read_to_string(path)
            .map_err(|source| ConfigError::Read { path: path.to_path_buf(), source })?;
        toml::from_str(&text).map_err(|error| ConfigError::Parse {
            path: path.to_path_buf(),
            message: error.to_string(),
        })
    }

    fn apply_variable(&mut self, name: &str, value: String) -> Result<(), ConfigError> {
        let invalid = |expected| ConfigError::Variable {
            name: name.to_string(),
            value: value.clone(),
            expected,
        };
        match name {
            "BOURSE_DATA_DIR" => self.data_dir = PathBuf::from(&value),
            "BOURSE_HTTP_LISTEN" => {
                self.http.listen =
                    value.parse().map_err(|_| invalid("an address like 127.0.0.1:8080"))?
            }
            "BOURSE_TCP_LISTEN" => {
                self.tcp.listen =
                    value.parse().map_err(|_| invalid("an address like 127.0.0.1:9090"))?
            }
            "BOURSE_FIX_LISTEN" => {
                self.fix.listen =
                    value.parse().map_err(|_| invalid("an address like 127.0.0.1:9876"))?
            }
            "BOURSE_DURABILITY" => self.durability = value,
            "BOURSE_NODE_ID" => {
                if let Some(cluster) = &mut self.cluster {
                    cluster.id = value.parse().map_err(|_| invalid("a node id, 1 or more"))?
                }
            }
            "BOURSE_MASTER_KEY_FILE" => self.auth.master_key_file = Some(PathBuf::from(&value)),
            "BOURSE_REQUESTS_PER_SECOND" => {
                self.limits.requests_per_second =
                    value.parse().map_err(|_| invalid("a whole number"))?
            }
            _ => {}
        }
        Ok(())
    }

    pub fn durability(&self) -> Result<Durability, ConfigError> {
        Durability::parse(&self.durability)
            .ok_or_else(|| ConfigError::Durability(self.durability.clone()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_serve_on_localhost_with_sync_durability_under_data() {
        let config = ServeConfig::load(None, Vec::new(), &Overrides::default()).unwrap();
        assert_eq!(config.data_dir, PathBuf::from("./data"));
        assert_eq!(config.durability().unwrap(), Durability::Sync);
        assert_eq!(config.http.listen.port(), 8080);
    }

    #[test]
    fn file_then_environment_then_flags_each_override_the_one_before() {
        let directory = tempfile::tempdir().unwrap();
        let path = directory.path().join("bourse.toml");
        std::fs::write(
            &path,
            "data_dir = \"/from/file\"\ndurability = \"async\"\n[http]\nlisten = \"127.0.0.1:1\"\n\
             [limits]\nrequests_per_second = 7\n",
        )
        .unwrap();
        let environment = vec![
            ("BOURSE_HTTP_LISTEN".to_string(), "127.0.0.1:2".to_string()),
            ("BOURSE_DATA_DIR".to_string(), "/from/env".to_string()),
            ("UNRELATED".to_string(), "x".to_string()),
        ];
        let overrides =
            Overrides { data_dir: Some(PathBuf::from("/from/flag")), ..Overrides::default() };
        let config = ServeConfig::load(Some(&path), environment, &overrides).unwrap();
        assert_eq!(config.data_dir, PathBuf::from("/from/flag"));
        assert_eq!(config.http.listen.port(), 2);
        assert_eq!(config.durability, "async");
        assert_eq!(config.limits.requests_per_second, 7);
    }

    #[test]
    fn a_node_of_a_cluster_listens_where_the_table_says_and_a_bad_table_is_refused() {
        let directory = tempfile::tempdir().unwrap();
        let path = directory.path().join("cluster.toml");
        let node = |id: u64| {
            format!(
                "[[cluster.nodes]]\nid = {id}\npeer = \"127.0.0.1:70{id:02}\"\n\
                 http = \"127.0.0.1:80{id:02}\"\ntcp = \"127.0.0.1:90{id:02}\"\n\
                 fix = \"127.0.0.1:98{id:02}\"\ndata_dir = \"/data/node-{id}\"\n"
            )
        };
        let table = format!("[cluster]\nelection_timeout_ms = 300\n{}{}", node(1), node(2));
        std::fs::write(&path, &table).unwrap();
        let overrides = Overrides { node: Some(2), ..Overrides::default() };
        let config = ServeConfig::load(Some(&path), Vec::new(), &overrides).unwrap();
        assert_eq!(config.http.listen.port(), 8002);
        assert_eq!(config.tcp.listen.port(), 9002);
        assert_eq!(config.fix.listen.port(), 9802);
        assert_eq!(config.data_dir, PathBuf::from("/data/node-2"));
        let environment = vec![("BOURSE_NODE_ID".to_string(), "1".to_string())];
        let config = ServeConfig::load(Some(&path), environment, &Overrides::default()).unwrap();
        assert_eq!(config.http.listen.port(), 8001);
        for (text, expected) in [
            (table.clone(), "not one of the nodes"),
            (format!("[cluster]\n{}{}", node(1), node(1)), "given twice"),
            ("[cluster]\nnodes = []\n".to_string(), "names no nodes"),
            (format!("[cluster]\nid = 1\nelection_timeout_ms = 10\n{}", node(1)), "under 100"),
            (format!("[cluster]\nid = 1\n{}joins = true\n", node(1)), "every node `joins`"),
        ] {
            std::fs::write(&path, text).unwrap();
            let error =
                ServeConfig::load(Some(&path), Vec::new(), &Overrides::default()).unwrap_err();
            assert!(error.to_string().contains(expected), "{error}");
        }
    }

    #[test]
    fn unknown_keys_bad_values_and_missing_files_are_clear_errors() {
        let directory = tempfile::tempdir().unwrap();
        let path = directory.path().join("bourse.toml");
        std::fs::write(&path, "data_dri = \"typo\"\n").unwrap();
        let error = ServeConfig::load(Some(&path), Vec::new(), &Overrides::default()).unwrap_err();
        assert!(error.to_string().contains("data_dri"), "{error}");
        let missing = directory.path().join("missing.toml");
        let error =
            ServeConfig::load(Some(&missing), Vec::new(), &Overrides::default()).unwrap_err();
        assert!(matches!(error, ConfigError::Read { .. }), "{error}");
        let environment = vec![("BOURSE_HTTP_LISTEN".to_string(), "nowhere".to_string())];
        let error = ServeConfig::load(None, environment, &Overrides::default()).unwrap_err();
        assert!(error.to_string().contains("BOURSE_HTTP_LISTEN"), "{error}");
        let overrides = Overrides { durability: Some("maybe".into()), ..Overrides::default() };
        let error = ServeConfig::load(None, Vec::new(), &overrides).unwrap_err();
        assert!(matches!(error, ConfigError::Durability(_)), "{error}");
        let directory = tempfile::tempdir().unwrap();
        let path = directory.path().join("bourse.toml");
        for share in ["0.0", "1.5", "-0.1", "nan"] {
            std::fs::write(&path, format!("[history]\nbusy_share = {share}\n")).unwrap();
            let error = ServeConfig::load(Some(&path), Vec::new(), &Overrides::default());
            assert!(matches!(error, Err(ConfigError::BusyShare(_))), "{share}: {error:?}");
        }
        std::fs::write(&path, "[history]\nbusy_share = 1.0\n").unwrap();
        let config = ServeConfig::load(Some(&path), Vec::new(), &Overrides::default()).unwrap();
        assert_eq!(config.history.busy_share, 1.0);
    }
}
