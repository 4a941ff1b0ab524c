//! Three real `bourse serve --demo` processes as the nodes of one cluster on loopback
//! (`docs/cluster.md`): the demo is set up once, by whichever node leads, and every
//! node shows the same keys; a follower refuses orders with `not_leader` and names the
//! leader (status, header, body); the leader killed with SIGKILL while a client sends
//! orders is replaced, the client follows the new leader and retries an order whose
//! answer it lost with the same client order id (its outcome, or `duplicate_id`); the
//! killed node, started again, catches up; and then every acknowledged order is on
//! every node exactly once, with the same state everywhere. Beside that: a wiped node
//! removed and added back; the leader cut off from the majority by network namespaces
//! (root; `BOURSE_REQUIRE_FAULTS` makes their absence a failure, as in `.ci/run`).

mod support;

use std::collections::{BTreeMap, BTreeSet};
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

/// Ports that were free, each another (their listeners are held until all are
/// chosen).
struct FreePorts(Vec<TcpListener>);

impl FreePorts {
    fn next(&mut self) -> u16 {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        self.0.push(listener);
        port
    }
}

/// A request's status, headers (lowercase names) and JSON body; `None` when the node
/// does not answer (it is down).
struct Answer {
    status: u16,
    headers: BTreeMap<String, String>,
    body: Value,
    text: String,
}

fn request(
    address: &str,
    credentials: Option<&(String, String)>,
    method: &str,
    path: &str,
    body: &str,
) -> Option<Answer> {
    let mut stream = TcpStream::connect(address).ok()?;
    stream.set_read_timeout(Some(Duration::from_secs(10))).ok()?;
    let mut head = format!(
        "{method} {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\
         Content-Type: application/json\r\nContent-Length: {}\r\n",
        body.len()
    );
    if let Some((key, secret)) = credentials {
        // A timestamp of its own for every request (a retry is not a replay).
        static LAST: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        let now = bourse_protocol::signing::now_ms();
        let timestamp = LAST.fetch_max(now, std::sync::atomic::Ordering::SeqCst).max(now - 1) + 1;
        LAST.fetch_max(timestamp, std::sync::atomic::Ordering::SeqCst);
        let message = format!("{timestamp}\n{method}\n{path}\n{body}");
        let signature = bourse_protocol::signing::sign(secret, message.as_bytes());
        head.push_str(&format!(
            "X-Bourse-Key: {key}\r\nX-Bourse-Timestamp: {timestamp}\r\nX-Bourse-Signature: {signature}\r\n"
        ));
    }
    head.push_str("\r\n");
    stream.write_all(head.as_bytes()).ok()?;
    stream.write_all(body.as_bytes()).ok()?;
    let mut response = String::new();
    stream.read_to_string(&mut response).ok()?;
    let (head, body) = response.split_once("\r\n\r\n")?;
    let mut lines = head.lines();
    let status = lines.next()?.split(' ').nth(1)?.parse().ok()?;
    let headers = lines
        .filter_map(|line| line.split_once(':'))
        .map(|(name, value)| (name.trim().to_ascii_lowercase(), value.trim().to_string()))
        .collect();
    let text = body.to_string();
    Some(Answer { status, headers, body: serde_json::from_str(body).unwrap_or(Value::Null), text })
}

struct Node {
    id: u64,
    http: String,
    fix: String,
    /// Its feed's snapshot and retransmission services, when the feed is on.
    feed_services: Option<(String, String)>,
    child: Option<Child>,
}

/// A FIX Logon signed with `credentials` to `address`; the text of the Logout the
/// node answers with (`None`: it answered otherwise, or not at all).
fn fix_logon_refused(address: &str, credentials: &(String, String)) -> Option<String> {
    use bourse_protocol::fix::{self, tag, Message, Writer};
    use bourse_protocol::signing::{now_ms, sign, FIX_LOGIN_PATH, LOGIN_METHOD};
    let mut stream = TcpStream::connect(address).ok()?;
    stream.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
    let sent_ms = now_ms();
    let signature =
        sign(&credentials.1, format!("{sent_ms}\n{LOGIN_METHOD}\n{FIX_LOGIN_PATH}\n").as_bytes());
    let mut writer = Writer::default();
    writer
        .start("A")
        .str(tag::SENDER_COMP_ID, "CLIENT")
        .str(tag::TARGET_COMP_ID, "BOURSE")
        .number(tag::MSG_SEQ_NUM, 1)
        .timestamp(tag::SENDING_TIME, sent_ms)
        .str(tag::ENCRYPT_METHOD, "0")
        .str(tag::HEART_BT_INT, "30")
        .str(tag::USERNAME, &credentials.0)
        .str(tag::RAW_DATA_LENGTH, &signature.len().to_string())
        .str(tag::RAW_DATA, &signature);
    let mut out = Vec::new();
    writer.finish(&mut out);
    stream.write_all(&out).ok()?;
    let mut buffer = Vec::new();
    let mut chunk = [0u8; 4096];
    loop {
        if let Ok(Some(length)) = fix::frame(&buffer) {
            let mut fields = Vec::new();
            let message = Message::parse(&buffer[..length], &mut fields).ok()?;
            let mut msg_type = None;
            let mut text = None;
            for (field, value) in message.fields() {
                match field {
                    tag::MSG_TYPE => msg_type = Some(String::from_utf8_lossy(value).into_owned()),
                    tag::TEXT => text = Some(String::from_utf8_lossy(value).into_owned()),
                    _ => {}
                }
            }
            return (msg_type.as_deref() == Some("5")).then_some(text).flatten();
        }
        let count = stream.read(&mut chunk).ok()?;
        if count == 0 {
            return None;
        }
        buffer.extend_from_slice(&chunk[..count]);
    }
}

/// Network namespaces, one per node, on one bridge in the test's namespace (which
/// reaches every node's client ports): so that a node can be cut off from others
/// (blackhole routes both ways) while its clients still reach it. Needs root and
/// `ip`; removed on drop.
struct Network {
    prefix: String,
    subnet: u8,
    count: u64,
}

impl Network {
    /// `None` when this machine cannot make namespaces (not root): the test then does
    /// not run, unless `BOURSE_REQUIRE_FAULTS` is set (as `.ci/run` does), when it fails.
    fn create(count: u64) -> Option<Network> {
        let pid = std::process::id();
        let network = Network {
            prefix: format!("bn{}", pid % 10_000_000),
            subnet: (pid % 250 + 1) as u8,
            count,
        };
        let bridge = network.bridge();
        let mut steps = vec![
            format!("link add {bridge} type bridge"),
            format!("addr add 10.77.{}.254/24 dev {bridge}", network.subnet),
            format!("link set {bridge} up"),
        ];
        for id in 1..=count {
            let (namespace, host, inside) = (
                network.namespace(id),
                format!("{}h{id}", network.prefix),
                format!("{}n{id}", network.prefix),
            );
            steps.push(format!("netns add {namespace}"));
            steps.push(format!("link add {host} type veth peer name {inside}"));
            steps.push(format!("link set {inside} netns {namespace}"));
            steps.push(format!("link set {host} master {bridge} up"));
            steps.push(format!("-n {namespace} addr add {}/24 dev {inside}", network.address(id)));
            steps.push(format!("-n {namespace} link set {inside} up"));
            steps.push(format!("-n {namespace} link set lo up"));
        }
        for step in steps {
            if let Err(error) = ip(&step) {
                unavailable(&format!("network namespaces (ip {step}: {error})"));
                return None;
            }
        }
        Some(network)
    }

    fn bridge(&self) -> String {
        format!("{}br", self.prefix)
    }

    fn namespace(&self, id: u64) -> String {
        format!("{}-{id}", self.prefix)
    }

    fn address(&self, id: u64) -> String {
        format!("10.77.{}.{id}", self.subnet)
    }

    /// No packet between `a` and `b` either way, from now on.
    fn cut(&self, a: u64, b: u64) {
        for (from, to) in [(a, b), (b, a)] {
            ip(&format!("-n {} route add blackhole {}/32", self.namespace(from), self.address(to)))
                .unwrap();
        }
    }

    fn heal(&self, a: u64, b: u64) {
        for (from, to) in [(a, b), (b, a)] {
            ip(&format!("-n {} route del blackhole {}/32", self.namespace(from), self.address(to)))
                .unwrap();
        }
    }
}

impl Drop for Network {
    fn drop(&mut self) {
        for id in 1..=self.count {
            let _ = ip(&format!("netns del {}", self.namespace(id)));
            let _ = ip(&format!("link del {}h{id}", self.prefix));
        }
        let _ = ip(&format!("link del {}", self.bridge()));
    }
}

/// A fault this machine cannot make (it needs root): the test does not run, unless
/// `BOURSE_REQUIRE_FAULTS` is set (as `.ci/run` does), when it fails.
fn unavailable(what: &str) {
    let required = std::env::var_os("BOURSE_REQUIRE_FAULTS").is_some();
    assert!(!required, "{what} is required here, and unavailable");
    eprintln!("{what} unavailable: not run");
}

/// A node's data directory on a file system of its own (ext4 in an image file, on a
/// loop device), so that a test can fill it or freeze it (`fsfreeze`: every write and
/// sync blocks until it is thawed). Needs root; thawed, unmounted and removed on drop.
struct LoopDisk {
    image: PathBuf,
    mount: PathBuf,
}

impl LoopDisk {
    fn create(mount: &Path, megabytes: u64) -> Option<LoopDisk> {
        let image = mount.with_extension("img");
        std::fs::create_dir_all(mount).unwrap();
        let made = std::fs::File::create(&image)
            .and_then(|file| file.set_len(megabytes << 20))
            .map_err(|error| error.to_string())
            // No blocks reserved for root (the nodes run as root): full is full.
            .and_then(|()| run("mkfs.ext4", &["-q", "-F", "-m", "0", image.to_str().unwrap()]))
            .and_then(|()| {
                run("mount", &["-o", "loop", image.to_str().unwrap(), mount.to_str().unwrap()])
            });
        match made {
            Ok(()) => Some(LoopDisk { image, mount: mount.to_path_buf() }),
            Err(error) => {
                unavailable(&format!("a loop-mounted file system ({error})"));
                None
            }
        }
    }

    /// Every later write and sync blocks.
    fn freeze(&self) {
        run("fsfreeze", &["-f", self.mount.to_str().unwrap()]).unwrap();
    }

    fn thaw(&self) {
        let _ = run("fsfreeze", &["-u", self.mount.to_str().unwrap()]);
    }

    fn filler(&self) -> PathBuf {
        self.mount.join("filler")
    }

    /// Takes every free block: later writes that need one fail (`ENOSPC`).
    fn fill(&self) {
        let mut file = std::fs::File::create(self.filler()).unwrap();
        let chunk = vec![0u8; 1 << 20];
        while file.write_all(&chunk).is_ok() {}
        let _ = file.sync_all();
        while file.write_all(&chunk[..4096]).is_ok() {}
        let _ = file.sync_all();
    }

    fn unfill(&self) {
        std::fs::remove_file(self.filler()).unwrap();
    }
}

impl Drop for LoopDisk {
    fn drop(&mut self) {
        self.thaw();
        if run("umount", &[self.mount.to_str().unwrap()]).is_err() {
            let _ = run("umount", &["-l", self.mount.to_str().unwrap()]);
        }
        let _ = std::fs::remove_file(&self.image);
    }
}

/// Runs `program` with `arguments`; its error output when it fails.
fn run(program: &str, arguments: &[&str]) -> Result<(), String> {
    let output =
        Command::new(program).args(arguments).output().map_err(|error| error.to_string())?;
    match output.status.success() {
        true => Ok(()),
        false => Err(format!("{program}: {}", String::from_utf8_lossy(&output.stderr).trim())),
    }
}

/// `ip` with `arguments` (split on spaces); its error output when it fails.
fn ip(arguments: &str) -> Result<(), String> {
    let output = Command::new("ip")
        .args(arguments.split(' '))
        .output()
        .map_err(|error| error.to_string())?;
    match output.status.success() {
        true => Ok(()),
        false => Err(String::from_utf8_lossy(&output.stderr).trim().to_string()),
    }
}

struct Cluster {
    directory: tempfile::TempDir,
    config: PathBuf,
    nodes: Vec<Node>,
    /// account -> (key, secret), as every node shows them.
    keys: BTreeMap<String, (String, String)>,
    /// Each node in a namespace of its own, when the test cuts links (dropped after
    /// the nodes are stopped).
    network: Option<Network>,
    /// Each node's data on a file system of its own, when the test fills or freezes
    /// one (thawed before the nodes are stopped, unmounted after).
    disks: BTreeMap<u64, LoopDisk>,
}

impl Cluster {
    fn start(count: u64) -> Cluster {
        Cluster::start_on(count, None)
    }

    /// `count` nodes, on loopback, or each in a namespace of `network`.
    fn start_on(count: u64, network: Option<Network>) -> Cluster {
        Cluster::start_with(count, 0, network, false, None).unwrap()
    }

    /// `count` nodes, each with its data on a file system of its own; `None` when this
    /// machine cannot make them (not root).
    fn start_on_disks(count: u64) -> Option<Cluster> {
        Cluster::start_with(count, 0, None, true, None)
    }

    /// `count` first voters started, and `joining` more nodes in the file (`joins`),
    /// not started; with the market-data feed on, to `feed` (a multicast group and
    /// port), when given.
    fn start_with(
        count: u64,
        joining: u64,
        network: Option<Network>,
        on_disks: bool,
        feed: Option<&str>,
    ) -> Option<Cluster> {
        let directory = tempfile::tempdir().unwrap();
        let mut disks = BTreeMap::new();
        if on_disks {
            for id in 1..=count {
                disks.insert(
                    id,
                    LoopDisk::create(&directory.path().join(format!("node-{id}")), 400)?,
                );
            }
        }
        let master = directory.path().join("master.key");
        std::fs::write(&master, "ab".repeat(32)).unwrap();
        let marketdata = match feed {
            None => "enabled = false".to_string(),
            Some(group) => format!("enabled = true\nmulticast = \"{group}\"\nheartbeat_ms = 200"),
        };
        let mut text = format!(
            "[auth]\nmaster_key_file = {:?}\n[limits]\nrequests_per_second = 100000\nrequests_burst = 100000\n\
             [marketdata]\n{marketdata}\n[cluster]\nelection_timeout_ms = 300\n",
            master.display().to_string()
        );
        let mut nodes = Vec::new();
        let mut ports = FreePorts(Vec::new());
        for id in 1..=count + joining {
            // [peer, http, tcp, fix]
            let addresses: Vec<String> = match &network {
                None => (0..4).map(|_| format!("127.0.0.1:{}", ports.next())).collect(),
                Some(network) => [7001, 8080, 9090, 9876]
                    .iter()
                    .map(|port| format!("{}:{port}", network.address(id)))
                    .collect(),
            };
            let [peer, http, tcp, fix] = <[String; 4]>::try_from(addresses).unwrap();
            text.push_str(&format!(
                "[[cluster.nodes]]\nid = {id}\npeer = \"{peer}\"\nhttp = \"{http}\"\n\
                 tcp = \"{tcp}\"\nfix = \"{fix}\"\ndata_dir = {:?}\njoins = {}\n",
                directory.path().join(format!("node-{id}")).display().to_string(),
                id > count
            ));
            let feed_services = feed.map(|_| {
                let snapshot = format!("127.0.0.1:{}", ports.next());
                let retransmit = format!("127.0.0.1:{}", ports.next());
                text.push_str(&format!(
                    "marketdata_snapshot = \"{snapshot}\"\nmarketdata_retransmit = \"{retransmit}\"\n"
                ));
                (snapshot, retransmit)
            });
            nodes.push(Node { id, http, fix, feed_services, child: None });
        }
        drop(ports);
        let config = directory.path().join("cluster.toml");
        std::fs::write(&config, text).unwrap();
        let mut cluster =
            Cluster { directory, config, nodes, keys: BTreeMap::new(), network, disks };
        let starting: Vec<_> = (1..=count).map(|id| (id, cluster.spawn(id))).collect();
        let mut shown = Vec::new();
        for (id, stdout) in starting {
            shown.push((id, demo_keys(stdout, &cluster.log(id))));
        }
        for (id, keys) in &shown {
            assert_eq!(keys, &shown[0].1, "node {id} shows other demo keys than node 1");
        }
        cluster.keys = shown.remove(0).1;
        Some(cluster)
    }

    fn log(&self, id: u64) -> PathBuf {
        self.directory.path().join(format!("node-{id}.log"))
    }

    /// Starts node `id`; its standard output, to read the demo's keys from.
    fn spawn(&mut self, id: u64) -> std::process::ChildStdout {
        let log = std::fs::OpenOptions::new().create(true).append(true).open(self.log(id)).unwrap();
        let mut command = match &self.network {
            None => Command::new(env!("CARGO_BIN_EXE_bourse")),
            Some(network) => {
                // `ip netns exec` becomes the node's process (it execs).
                let mut command = Command::new("ip");
                command.args([
                    "netns",
                    "exec",
                    &network.namespace(id),
                    env!("CARGO_BIN_EXE_bourse"),
                ]);
                command
            }
        };
        let mut child = command
            .args(["serve", "--demo", "--node", &id.to_string(), "--config"])
            .arg(&self.config)
            .stdout(Stdio::piped())
            .stderr(log)
            .spawn()
            .unwrap();
        let stdout = child.stdout.take().unwrap();
        self.node_mut(id).child = Some(child);
        stdout
    }

    fn node_mut(&mut self, id: u64) -> &mut Node {
        self.nodes.iter_mut().find(|node| node.id == id).unwrap()
    }

    fn http(&self, id: u64) -> String {
        self.nodes.iter().find(|node| node.id == id).unwrap().http.clone()
    }

    fn kill(&mut self, id: u64) {
        let mut child = self.node_mut(id).child.take().unwrap();
        child.kill().unwrap(); // SIGKILL
        child.wait().unwrap();
    }

    fn live(&self) -> Vec<u64> {
        self.nodes.iter().filter(|node| node.child.is_some()).map(|node| node.id).collect()
    }

    /// The leader every live node names, once they agree and it says it leads.
    fn leader(&self, within: Duration) -> u64 {
        let deadline = Instant::now() + within;
        loop {
            let views: Vec<Value> = self
                .live()
                .iter()
                .filter_map(|id| request(&self.http(*id), None, "GET", "/v1/cluster", ""))
                .map(|answer| answer.body)
                .collect();
            let leaders: BTreeSet<Option<u64>> =
                views.iter().map(|view| view["leader"].as_u64()).collect();
            if views.len() == self.live().len() && leaders.len() == 1 {
                if let Some(Some(leader)) = leaders.into_iter().next() {
                    let leads = views
                        .iter()
                        .any(|view| view["node"] == leader && view["is_leader"] == true);
                    if leads {
                        return leader;
                    }
                }
            }
            assert!(Instant::now() < deadline, "no leader agreed within {within:?}: {views:?}");
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    fn applied_seq(&self, id: u64) -> Option<u64> {
        request(&self.http(id), None, "GET", "/v1/cluster", "")?.body["applied_seq"].as_u64()
    }

    fn logs(&self) -> String {
        let mut text = String::new();
        for node in &self.nodes {
            let log = std::fs::read_to_string(self.log(node.id)).unwrap_or_default();
            text.push_str(&format!("--- node {} ---\n{}\n", node.id, support::tail(&log, 30, 300)));
        }
        text
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        // A node blocked on a frozen disk cannot die until it is thawed.
        for disk in self.disks.values() {
            disk.thaw();
        }
        for node in &mut self.nodes {
            if let Some(mut child) = node.child.take() {
                let _ = child.kill();
                let _ = child.wait();
            }
        }
    }
}

/// The demo's keys a starting node prints (every node of a cluster prints the same).
fn demo_keys(stdout: std::process::ChildStdout, log: &Path) -> BTreeMap<String, (String, String)> {
    let banner = support::read_demo_banner(stdout);
    assert!(
        banner.keys.contains_key("alice") && banner.keys.contains_key("bob"),
        "the node did not start as expected: {:?}\n{}",
        banner.seen,
        std::fs::read_to_string(log).unwrap_or_default()
    );
    banner.keys.into_iter().collect()
}

/// alice's resting buy `client_order_id`, far under the market (it never trades).
/// Node `id`'s admin key: the cluster's (derived from the shared master key).
fn admin_of(cluster: &Cluster, id: u64) -> (String, String) {
    let file = cluster.directory.path().join(format!("node-{id}/server/admin.key"));
    let admin = bourse_bench::loadgen::admin::Credentials::from_file(&file).unwrap();
    (admin.key, admin.secret)
}

fn order_body(client_order_id: &str) -> String {
    format!(
        r#"{{"symbol":"BTC-USD","side":"buy","type":"limit","price":"1000","qty":"0.0001","client_order_id":"{client_order_id}"}}"#
    )
}

/// Places an order (`body`) until some node answers it, following `not_leader`'s
/// leader and retrying the same body (the same client order id): its outcome, or
/// `duplicate_id` when an earlier try whose answer was lost had placed it. Where it
/// went and when.
fn place_following(
    nodes: &[(u64, String)],
    credentials: &(String, String),
    body: &str,
    first: u64,
) -> (u64, Instant) {
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut target = first;
    loop {
        let http = &nodes.iter().find(|(id, _)| *id == target).unwrap().1;
        match request(http, Some(credentials), "POST", "/v1/orders", body) {
            Some(answer) if answer.status == 200 || answer.status == 201 => {
                return (target, Instant::now())
            }
            Some(answer) if answer.body["code"] == "duplicate_id" => {
                return (target, Instant::now())
            }
            Some(answer) if answer.body["code"] == "not_leader" => {
                if let Some(leader) = answer.body["leader"]["id"].as_u64() {
                    assert_eq!(
                        answer.headers.get("bourse-leader").map(String::as_str),
                        answer.body["leader"]["http"].as_str(),
                        "the header names the leader as the body does"
                    );
                    target = leader;
                }
                std::thread::sleep(Duration::from_millis(5));
            }
            Some(answer) if answer.body["code"] != "engine_stopped" => {
                panic!("{body}: {} {}", answer.status, answer.body)
            }
            _ => {
                // That node is down, or stopped (its disk failed): try the next one.
                let at = nodes.iter().position(|(id, _)| *id == target).unwrap_or(0);
                target = nodes[(at + 1) % nodes.len()].0;
                std::thread::sleep(Duration::from_millis(5));
            }
        }
        assert!(Instant::now() < deadline, "{body} got no answer within 30 s");
    }
}

fn place_until_answered(cluster: &Cluster, client_order_id: &str, first: u64) -> (u64, Instant) {
    let nodes: Vec<(u64, String)> =
        cluster.nodes.iter().map(|node| (node.id, node.http.clone())).collect();
    place_following(&nodes, &cluster.keys["alice"], &order_body(client_order_id), first)
}

/// Every live node has applied what the leader has.
fn caught_up(cluster: &Cluster, leader: u64) {
    let target = cluster.applied_seq(leader).unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    while cluster.live().iter().any(|id| cluster.applied_seq(*id).unwrap_or(0) < target) {
        assert!(Instant::now() < deadline, "the nodes did not catch up:\n{}", cluster.logs());
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// On every live node, each of an account's `acknowledged` orders is there once: its
/// open orders (of those ids' prefix) hold each once, and its history holds each as
/// one order (one exchange order id, whatever became of it), once the history has
/// caught up.
fn every_order_once_everywhere(
    cluster: &Cluster,
    credentials: &(String, String),
    acknowledged: &[String],
    prefix: &str,
) {
    let expected: BTreeSet<&String> = acknowledged.iter().collect();
    for id in cluster.live() {
        let open = request(&cluster.http(id), Some(credentials), "GET", "/v1/orders", "").unwrap();
        let mine: Vec<String> = open.body["orders"]
            .as_array()
            .unwrap_or_else(|| panic!("node {id}: {}", open.body))
            .iter()
            .filter_map(|order| order["client_order_id"].as_str())
            .filter(|client| client.starts_with(prefix))
            .map(str::to_string)
            .collect();
        let distinct: BTreeSet<&String> = mine.iter().collect();
        assert_eq!(distinct.len(), mine.len(), "node {id}: an order twice: {mine:?}");
        let missing: Vec<_> = expected.difference(&distinct).collect();
        assert!(missing.is_empty(), "node {id} lacks acknowledged orders {missing:?}");
    }
    let account = cluster
        .keys
        .iter()
        .find(|(_, keys)| *keys == credentials)
        .map(|(account, _)| account.clone())
        .unwrap();
    for id in cluster.live() {
        in_history_once(cluster, id, &account, acknowledged, prefix);
    }
}

/// Node `id`'s history holds each of `account`'s `acknowledged` orders as exactly one
/// order (one exchange order id), waiting up to 30 s for it to catch up.
fn in_history_once(
    cluster: &Cluster,
    id: u64,
    account: &str,
    acknowledged: &[String],
    prefix: &str,
) {
    let admin = admin_of(cluster, id);
    let sql = format!(
        "SELECT client_order_id, count(DISTINCT order_id) AS orders FROM order_events \
         WHERE account = '{account}' AND client_order_id LIKE '{prefix}%' \
         AND order_id IS NOT NULL GROUP BY client_order_id"
    );
    let body = serde_json::json!({ "sql": sql, "format": "json" }).to_string();
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let answer = request(&cluster.http(id), Some(&admin), "POST", "/v1/admin/sql", &body)
            .unwrap_or_else(|| panic!("node {id} did not answer SQL"));
        assert_eq!(answer.status, 200, "node {id}: {}", answer.text);
        let held: BTreeMap<String, u64> = answer
            .body
            .as_array()
            .map(|rows| {
                rows.iter()
                    .filter_map(|row| {
                        Some((
                            row["client_order_id"].as_str()?.to_string(),
                            row["orders"].as_u64()?,
                        ))
                    })
                    .collect()
            })
            .unwrap_or_default();
        let twice: Vec<_> = held.iter().filter(|(_, orders)| **orders > 1).collect();
        assert!(twice.is_empty(), "node {id}'s history holds orders twice: {twice:?}");
        let missing: Vec<&String> =
            acknowledged.iter().filter(|client| !held.contains_key(*client)).collect();
        if missing.is_empty() {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "node {id}'s history lacks acknowledged orders {missing:?} after 30 s"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// The leader killed (SIGKILL) again and again under a client's order load, each time
/// started again: no acknowledged order is lost or doubled, and how long each
/// failover took (from the kill to the first order the new leader answered).
/// `BOURSE_CLUSTER_KILLS` sets how many (3 here; the long run in `docs/benchmarks.md`).
#[test]
fn the_leader_killed_again_and_again_under_load_loses_no_acknowledged_order() {
    let kills: usize = std::env::var("BOURSE_CLUSTER_KILLS")
        .ok()
        .and_then(|kills| kills.parse().ok())
        .unwrap_or(3);
    let mut cluster = Cluster::start(3);
    let nodes: Vec<(u64, String)> =
        cluster.nodes.iter().map(|node| (node.id, node.http.clone())).collect();
    // bob sends orders one after another, following the leader, all along.
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let load = {
        let (nodes, bob, stop) = (nodes.clone(), cluster.keys["bob"].clone(), stop.clone());
        std::thread::spawn(move || {
            let mut acknowledged = Vec::new();
            let mut target = nodes[0].0;
            while !stop.load(std::sync::atomic::Ordering::SeqCst) {
                let id = format!("b{}", acknowledged.len());
                let body = format!(
                    r#"{{"symbol":"BTC-USD","side":"sell","type":"limit","price":"1000000","qty":"0.0001","client_order_id":"{id}"}}"#
                );
                target = place_following(&nodes, &bob, &body, target).0;
                acknowledged.push(id);
            }
            acknowledged
        })
    };
    let mut failovers = Vec::new();
    let mut acknowledged = Vec::new();
    for kill in 0..kills {
        let leader = cluster.leader(Duration::from_secs(10));
        for index in 0..5 {
            let id = format!("k{kill}-{index}");
            place_until_answered(&cluster, &id, leader);
            acknowledged.push(id);
        }
        let killed_at = Instant::now();
        cluster.kill(leader);
        let next = cluster.live()[0];
        let id = format!("k{kill}-after");
        let (new_leader, answered_at) = place_until_answered(&cluster, &id, next);
        acknowledged.push(id);
        assert_ne!(new_leader, leader);
        failovers.push(answered_at - killed_at);
        let stdout = cluster.spawn(leader);
        demo_keys(stdout, &cluster.log(leader));
        caught_up(&cluster, new_leader);
    }
    stop.store(true, std::sync::atomic::Ordering::SeqCst);
    let bobs = load.join().unwrap();
    let leader = cluster.leader(Duration::from_secs(10));
    caught_up(&cluster, leader);
    every_order_once_everywhere(&cluster, &cluster.keys["alice"].clone(), &acknowledged, "k");
    every_order_once_everywhere(&cluster, &cluster.keys["bob"].clone(), &bobs, "b");
    assert!(!cluster.logs().contains("STATE DIVERGED"), "{}", cluster.logs());
    failovers.sort();
    let at = |share: f64| failovers[((failovers.len() - 1) as f64 * share).round() as usize];
    eprintln!(
        "failover over {kills} kills (election timeout 300 ms): p50 {:?}, p99 {:?}, max {:?}; bob's orders acknowledged: {}",
        at(0.5),
        at(0.99),
        failovers[failovers.len() - 1],
        bobs.len()
    );
}

#[test]
fn a_cluster_of_three_serves_from_its_leader_and_loses_no_acknowledged_order_when_it_is_killed() {
    let mut cluster = Cluster::start(3);
    let leader = cluster.leader(Duration::from_secs(10));
    let alice = cluster.keys["alice"].clone();

    // A follower refuses order entry and names the leader; it serves reads.
    let follower = cluster.live().into_iter().find(|id| *id != leader).unwrap();
    let refused =
        request(&cluster.http(follower), Some(&alice), "POST", "/v1/orders", &order_body("f0"))
            .unwrap();
    assert_eq!(refused.status, 503, "{}", refused.body);
    assert_eq!(refused.body["code"], "not_leader");
    assert_eq!(refused.body["leader"]["id"], leader);
    assert_eq!(refused.headers.get("bourse-leader"), Some(&cluster.http(leader)));
    let message = refused.body["message"].as_str().unwrap();
    assert!(message.contains(&cluster.http(leader)), "{message}");
    let fix = cluster.nodes.iter().find(|node| node.id == follower).unwrap().fix.clone();
    let logout =
        fix_logon_refused(&fix, &alice).expect("a follower answers a FIX Logon with a Logout");
    assert!(logout.starts_with("not_leader") && logout.contains(&cluster.http(leader)), "{logout}");
    // /metrics says the same per node.
    let metrics = |id: u64| request(&cluster.http(id), None, "GET", "/metrics", "").unwrap().text;
    let (leaders, followers) = (metrics(leader), metrics(follower));
    assert!(leaders.contains("cluster_is_leader 1"), "{leaders}");
    assert!(followers.contains("cluster_is_leader 0"), "{followers}");
    assert!(followers.contains(&format!("cluster_leader {leader}")), "{followers}");
    assert!(leaders.contains("cluster_voters 3") && leaders.contains("cluster_learners 0"));
    assert!(followers.contains("cluster_applied_seq "), "{followers}");
    assert!(
        leaders.contains(&format!("cluster_node_lag_entries{{node=\"{follower}\"}}")),
        "{leaders}"
    );
    let depth = request(&cluster.http(follower), None, "GET", "/v1/depth/BTC-USD", "").unwrap();
    assert_eq!(depth.status, 200, "a follower serves market data: {}", depth.body);

    let admin = admin_of(&cluster, leader);
    // A settlement price posted on the leader: the futures settings are replicated, so
    // the next leader settles with it.
    let posted = request(
        &cluster.http(leader),
        Some(&admin),
        "POST",
        "/v1/admin/futures/SHFE.cu2501/settlement-price",
        r#"{"price":"75010"}"#,
    )
    .unwrap();
    assert_eq!(posted.status, 200, "{}", posted.body);

    // Orders on the leader, then the leader killed, then more: each is answered once.
    let mut acknowledged = Vec::new();
    for index in 0..20 {
        let id = format!("a{index}");
        place_until_answered(&cluster, &id, leader);
        acknowledged.push(id);
    }
    // An order in flight while the leader dies: its answer may be lost; it is sent
    // again, with the same id, to whoever leads.
    let in_flight = {
        let http = cluster.http(leader);
        let alice = alice.clone();
        std::thread::spawn(move || {
            request(&http, Some(&alice), "POST", "/v1/orders", &order_body("lost0"))
                .map(|answer| answer.status)
        })
    };
    let killed_at = Instant::now();
    cluster.kill(leader);
    let _ = in_flight.join();
    let others: Vec<u64> = cluster.live();
    let (new_leader, answered_at) = place_until_answered(&cluster, "lost0", others[0]);
    acknowledged.push("lost0".to_string());
    let failover = answered_at - killed_at;
    eprintln!("failover: node {leader} killed, node {new_leader} answered after {failover:?}");
    assert_ne!(new_leader, leader);
    assert!(failover < Duration::from_secs(10), "the new leader answered after {failover:?}");
    for index in 20..40 {
        let id = format!("a{index}");
        place_until_answered(&cluster, &id, new_leader);
        acknowledged.push(id);
    }
    // A key made on the new leader signs on every node (the key store is replicated).
    assert_eq!(admin_of(&cluster, new_leader), admin, "every node has the cluster's admin key");
    let made = request(
        &cluster.http(new_leader),
        Some(&admin),
        "POST",
        "/v1/admin/keys",
        r#"{"account":"bob","label":"after failover"}"#,
    )
    .unwrap();
    assert!(made.status == 200 || made.status == 201, "{}", made.body);
    let bob = (
        made.body["key"].as_str().unwrap().to_string(),
        made.body["secret"].as_str().unwrap().to_string(),
    );

    // The price posted on the old leader is the new leader's, and it settles with it.
    let futures =
        request(&cluster.http(new_leader), Some(&admin), "GET", "/v1/admin/futures", "").unwrap();
    let contract = &futures.body["futures"][0];
    assert_eq!(contract["posted_price"], "75010", "{}", futures.body);
    assert_eq!(contract["margin_ratio"], "0.1", "the demo's ratio: {}", futures.body);
    let settled = request(
        &cluster.http(new_leader),
        Some(&admin),
        "POST",
        "/v1/admin/futures/SHFE.cu2501/settle",
        "{}",
    )
    .unwrap();
    assert_eq!(settled.status, 200, "{}", settled.body);
    assert_eq!(settled.body["price"], "75010", "{}", settled.body);

    // The killed node comes back and catches up.
    let stdout = cluster.spawn(leader);
    let keys = demo_keys(stdout, &cluster.log(leader));
    assert_eq!(keys["alice"], alice, "the restarted node shows the same demo keys");
    caught_up(&cluster, new_leader);

    // Every acknowledged order, on every node, exactly once; the same state everywhere.
    let mut open_orders = BTreeMap::new();
    for id in cluster.live() {
        let http = cluster.http(id);
        for client_order_id in &acknowledged {
            let path = format!("/v1/orders?client_order_id={client_order_id}");
            let found = request(&http, Some(&alice), "GET", &path, "").unwrap();
            assert_eq!(found.status, 200, "node {id}: {client_order_id}: {}", found.body);
        }
        let open = request(&http, Some(&alice), "GET", "/v1/orders", "").unwrap();
        let mine: Vec<String> = open.body["orders"]
            .as_array()
            .unwrap_or_else(|| panic!("node {id}: {}", open.body))
            .iter()
            .filter_map(|order| order["client_order_id"].as_str())
            .filter(|client| client.starts_with('a') || client.starts_with("lost"))
            .map(str::to_string)
            .collect();
        let distinct: BTreeSet<&String> = mine.iter().collect();
        assert_eq!(distinct.len(), mine.len(), "node {id}: an order twice: {mine:?}");
        assert_eq!(mine.len(), acknowledged.len(), "node {id}: {mine:?}");
        let balances = request(&http, Some(&alice), "GET", "/v1/balances", "").unwrap();
        open_orders.insert(id, (mine.into_iter().collect::<BTreeSet<_>>(), balances.body));
        // bob's key, made on the new leader after the failover, signs here too.
        let bobs = request(&http, Some(&bob), "GET", "/v1/balances", "").unwrap();
        assert_eq!(bobs.status, 200, "node {id}: bob's new key: {}", bobs.body);
        // The posted price was used up by the settlement, on every node alike.
        let futures = request(&http, Some(&admin), "GET", "/v1/admin/futures", "").unwrap();
        let contract = &futures.body["futures"][0];
        assert_eq!(contract["symbol"], "SHFE.cu2501", "node {id}: {}", futures.body);
        assert_eq!(contract["posted_price"], Value::Null, "node {id}: {}", futures.body);
        assert_eq!(contract["settlement_price"], "75010", "node {id}: {}", futures.body);
    }
    let first = open_orders.values().next().unwrap().clone();
    for (id, state) in &open_orders {
        assert_eq!(state, &first, "node {id} holds another state");
    }
    assert!(!cluster.logs().contains("STATE DIVERGED"), "{}", cluster.logs());
}

/// A node's view of the cluster (`GET /v1/cluster`), if it answers.
/// A metric's value on node `id` (`None`: the node does not answer, or has no such
/// line).
fn metric(cluster: &Cluster, id: u64, name: &str) -> Option<f64> {
    let text = request(&cluster.http(id), None, "GET", "/metrics", "")?.text;
    text.lines().find_map(|line| line.strip_prefix(name)?.strip_prefix(' ')?.trim().parse().ok())
}

/// Waits until every live node checked a feed anchor of the log (each knows the
/// feed's numbering and agrees with the leader), while alice places orders so that
/// the feed moves.
fn feed_anchored_everywhere(cluster: &Cluster, prefix: &str) {
    let deadline = Instant::now() + Duration::from_secs(20);
    let mut placed = 0;
    loop {
        let unchecked: Vec<u64> = cluster
            .live()
            .into_iter()
            .filter(|id| {
                metric(cluster, *id, "bourse_md_anchors_checked_total").unwrap_or(0.0) < 1.0
            })
            .collect();
        if unchecked.is_empty() {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "nodes {unchecked:?} never checked a feed anchor:\n{}",
            cluster.logs()
        );
        let leader = cluster.leader(Duration::from_secs(10));
        place_until_answered(cluster, &format!("{prefix}{placed}"), leader);
        placed += 1;
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// `bourse loadgen --follow-leader` across a SIGKILL of the leader: every connection
/// finds the new leader and sends its unanswered orders again with the same client
/// order ids. Every order is answered, none twice: those the old leader had placed
/// come back `duplicate_id` and count as placed, and no order sent once is a
/// duplicate.
#[test]
fn loadgen_follows_the_leader_across_a_kill_and_every_order_is_answered() {
    let mut cluster = Cluster::start(3);
    let leader = cluster.leader(Duration::from_secs(10));
    let follower = cluster.live().into_iter().find(|id| *id != leader).unwrap();
    let admin_key = cluster.directory.path().join(format!("node-{follower}/server/admin.key"));
    let loadgen = Command::new(env!("CARGO_BIN_EXE_bourse"))
        .args(["loadgen", "--follow-leader", "--json", "--rate", "2000", "--duration", "6"])
        .args(["--connections", "2", "--http", &cluster.http(follower), "--admin-key-file"])
        .arg(&admin_key)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(3_000));
    cluster.kill(leader);
    let output = loadgen.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "loadgen failed: {stderr}\n{}", cluster.logs());
    let results: Value = serde_json::from_slice(&output.stdout).unwrap();
    let follow = &results["follow_leader"];
    eprintln!(
        "loadgen across the kill: {follow}, p99 {} µs, max {} µs",
        results["p99_us"], results["max_us"]
    );
    assert_eq!(results["errors"], 0, "{results}");
    let sent = results["sent"].as_u64().unwrap();
    assert!(sent >= 11_000, "{sent} orders sent");
    let answered = results["ok"].as_u64().unwrap() + results["rejected"].as_u64().unwrap();
    assert_eq!(answered, sent, "every order answered once: {results}");
    assert!(follow["reconnects"].as_u64().unwrap() >= 2, "each connection moved: {follow}");
    assert!(follow["resent"].as_u64().unwrap() >= 1, "{follow}");
    assert!(
        results["rejected_by_reason"].get("duplicate_id").is_none(),
        "an order sent once was a duplicate: {results}"
    );
    let leader = cluster.leader(Duration::from_secs(10));
    caught_up(&cluster, leader);
    assert!(!cluster.logs().contains("STATE DIVERGED"), "{}", cluster.logs());
}

/// The trading screen follows the leader in a real browser
/// (`tests/interop/ui/cluster.cjs`, headless Chromium): opened on a follower, it moves
/// to the leader at login; when the leader is killed with SIGKILL, it leaves the dead
/// node for one that answers and ends on the new leader, still logged in, where alice
/// places an order and sees it open beside the one from before the kill.
#[test]
fn the_trading_screen_moves_to_the_leader_and_follows_it_across_a_kill() {
    let mut cluster = Cluster::start(3);
    let leader = cluster.leader(Duration::from_secs(10));
    let follower = cluster.live().into_iter().find(|id| *id != leader).unwrap();
    let (key, secret) = cluster.keys["alice"].clone();
    let work = tempfile::tempdir().unwrap();
    let output = work.path().join("stdout");
    let mut script = Command::new("node");
    script
        .arg(support::interop_dir().join("ui/cluster.cjs"))
        .current_dir(work.path())
        .env("NODE_PATH", support::ui_node_modules())
        .env("CHROMIUM", support::chromium())
        .env("BOURSE_FOLLOWER", cluster.http(follower))
        .env("BOURSE_LEADER", cluster.http(leader))
        .env("BOURSE_ALICE_KEY", &key)
        .env("BOURSE_ALICE_SECRET", &secret)
        .env("HOME", work.path())
        .env("NO_PROXY", "127.0.0.1,localhost")
        .stdin(Stdio::null())
        .stdout(std::fs::File::create(&output).unwrap())
        .stderr(Stdio::piped());
    for variable in ["HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy"] {
        script.env_remove(variable);
    }
    let mut child = script.spawn().unwrap();
    let said = || std::fs::read_to_string(&output).unwrap_or_default();
    let deadline = Instant::now() + Duration::from_secs(90);
    while !said().contains("KILL THE LEADER") {
        if child.try_wait().unwrap().is_some() || Instant::now() > deadline {
            let _ = child.kill();
            let stderr = child.wait_with_output().map(|out| out.stderr).unwrap_or_default();
            panic!(
                "cluster.cjs stopped before the kill:\n{}\n{}",
                said(),
                String::from_utf8_lossy(&stderr)
            );
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    cluster.kill(leader);
    let finished = child.wait_with_output().unwrap();
    assert!(
        finished.status.success() && said().contains("PASSED: cluster.cjs"),
        "cluster.cjs failed:\n{}\n{}\n{}",
        said(),
        String::from_utf8_lossy(&finished.stderr),
        cluster.logs()
    );
    println!("{}", said());
}

/// The market-data feed across a change of leader (`docs/cluster.md`, "The feed"):
/// every node derives the same numbered messages from the log and the leader sends
/// them. A subscriber (`bourse md listen`, given every node's services) follows it
/// while orders trade and the leader is killed with SIGKILL: it stays in one session
/// (its only snapshot is its first), recovers every gap, and ends with the books a
/// surviving node shows at the same sequence number. The killed node, started again,
/// takes the numbering up from the log's next anchor and agrees with the leader's.
#[test]
fn the_feed_goes_on_from_the_new_leader_in_the_same_session_with_the_same_numbers() {
    let group = format!("239.255.66.1:{}", free_port());
    let mut cluster = Cluster::start_with(3, 0, None, false, Some(&group)).unwrap();
    feed_anchored_everywhere(&cluster, "w");
    let leader = cluster.leader(Duration::from_secs(10));
    assert_eq!(metric(&cluster, leader, "bourse_md_sending"), Some(1.0));
    let survivor = cluster.live().into_iter().find(|id| *id != leader).unwrap();
    assert_eq!(metric(&cluster, survivor, "bourse_md_sending"), Some(0.0), "a follower sends");

    let mut listen = Command::new(env!("CARGO_BIN_EXE_bourse"));
    listen.args(["md", "listen", "--multicast", &group, "--quiet", "--duration", "14"]);
    for node in &cluster.nodes {
        let (snapshot, retransmit) = node.feed_services.clone().unwrap();
        listen.args(["--snapshot", &snapshot, "--retransmit", &retransmit]);
    }
    let listener = listen
        .args(["--verify", &cluster.http(survivor)])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let started = Instant::now();
    std::thread::sleep(Duration::from_millis(1_000));

    // Orders that rest and orders that trade, the leader killed among them.
    let bob = cluster.keys["bob"].clone();
    let nodes: Vec<(u64, String)> =
        cluster.nodes.iter().map(|node| (node.id, node.http.clone())).collect();
    let trade = |cluster: &Cluster, prefix: &str, count: usize| {
        for index in 0..count {
            let leader = cluster.leader(Duration::from_secs(10));
            place_until_answered(cluster, &format!("{prefix}{index}"), leader);
            if index % 3 == 0 {
                let body = format!(
                    r#"{{"symbol":"BTC-USD","side":"sell","type":"limit","price":"1000","qty":"0.0001","client_order_id":"{prefix}s{index}"}}"#
                );
                place_following(&nodes, &bob, &body, leader);
            }
        }
    };
    trade(&cluster, "before", 30);
    cluster.kill(leader);
    trade(&cluster, "after", 30);
    let stdout = cluster.spawn(leader);
    demo_keys(stdout, &cluster.log(leader));
    trade(&cluster, "back", 15);
    feed_anchored_everywhere(&cluster, "again");
    assert!(started.elapsed() < Duration::from_secs(12), "the scenario outlasted the listener");

    let output = listener.wait_with_output().unwrap();
    let text = String::from_utf8_lossy(&output.stdout).to_string()
        + &String::from_utf8_lossy(&output.stderr);
    let feed_metrics: String = cluster
        .live()
        .iter()
        .map(|id| {
            let text = request(&cluster.http(*id), None, "GET", "/metrics", "").unwrap().text;
            let lines: Vec<&str> =
                text.lines().filter(|line| line.starts_with("bourse_md_")).collect();
            format!("node {id}: {}\n", lines.join(", "))
        })
        .collect();
    assert!(
        output.status.success(),
        "md listen failed:\n{text}\n{feed_metrics}\n{}",
        cluster.logs()
    );
    let summary = text.lines().find(|line| line.contains("snapshots,")).unwrap_or_default();
    assert!(summary.contains(", 1 snapshots,"), "the subscriber changed sessions: {summary}");
    assert!(summary.contains(" 0 ranges gone"), "{summary}");
    assert!(text.contains("orders equal") && !text.contains("DIFFERENT"), "{text}");
    for id in cluster.live() {
        assert_eq!(metric(&cluster, id, "bourse_md_anchor_mismatches_total"), Some(0.0));
    }
    let restarted = std::fs::read_to_string(cluster.log(leader)).unwrap();
    assert!(restarted.contains("the feed takes up the cluster's numbering"), "{restarted}");
    eprintln!("the subscriber across the failover: {summary}");
    every_node_numbers_the_feed_alike(&cluster, &group);
}

/// Every live node's retransmission service sends the same packets for the feed's
/// last messages: the same numbers, the same messages, in the session the group
/// carries.
fn every_node_numbers_the_feed_alike(cluster: &Cluster, group: &str) {
    use bourse_server::services::multicast::listen::{FeedAddresses, Listener};
    let services: Vec<(String, String)> =
        cluster.nodes.iter().filter_map(|node| node.feed_services.clone()).collect();
    let mut probe = Listener::join(FeedAddresses {
        multicast: group.parse().unwrap(),
        interface: std::net::Ipv4Addr::LOCALHOST,
        snapshot: services.iter().map(|(snapshot, _)| snapshot.parse().unwrap()).collect(),
        retransmit: services.iter().map(|(_, retransmit)| retransmit.parse().unwrap()).collect(),
    })
    .unwrap();
    probe.poll(Duration::from_millis(1_500)).unwrap();
    let session = probe.rebuilder.session().expect("the leader sends the feed");
    let end = probe.rebuilder.next();
    assert!(end > 40, "the feed has {end} messages");
    let mut numbered = Vec::new();
    for id in cluster.live() {
        let node = cluster.nodes.iter().find(|node| node.id == id).unwrap();
        let (_, retransmit) = node.feed_services.clone().unwrap();
        let mut messages = retransmitted(&retransmit, &session, end - 40, 40);
        // A node that restarted holds only what it made since: it says which is its
        // oldest, and is asked from there.
        if let Err(oldest) = messages {
            messages = retransmitted(&retransmit, &session, oldest, (end - oldest) as u16);
        }
        let messages = messages.unwrap_or_else(|_| panic!("node {id} keeps no message"));
        assert!(messages.len() >= 10, "node {id} sent {} messages", messages.len());
        numbered.push((id, messages));
    }
    for (id, messages) in &numbered[1..] {
        let (first_id, first) = (&numbered[0].0, &numbered[0].1);
        let shared: Vec<&u64> =
            messages.keys().filter(|number| first.contains_key(number)).collect();
        assert!(shared.len() >= 10, "nodes {id} and {first_id} share {} numbers", shared.len());
        for number in shared {
            assert_eq!(
                messages[number], first[number],
                "message {number} on node {id} is another than on node {first_id}"
            );
        }
    }
}

/// The messages a node's retransmission service sends for `first ..` (`count`), by
/// number; `Err(oldest)` when it no longer holds `first`.
fn retransmitted(
    service: &str,
    session: &[u8],
    first: u64,
    count: u16,
) -> Result<BTreeMap<u64, Vec<u8>>, u64> {
    // A MoldUDP64 request: the session (10 bytes), the first message wanted, how many.
    let mut request = session.to_vec();
    request.extend_from_slice(&first.to_be_bytes());
    request.extend_from_slice(&count.to_be_bytes());
    let socket = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    socket.set_read_timeout(Some(Duration::from_millis(500))).unwrap();
    socket.send_to(&request, service).unwrap();
    let mut messages = BTreeMap::new();
    let mut buffer = [0u8; 65_536];
    while let Ok((length, _)) = socket.recv_from(&mut buffer) {
        let packet = &buffer[..length];
        let sequence = u64::from_be_bytes(packet[10..18].try_into().unwrap());
        let count = u16::from_be_bytes(packet[18..20].try_into().unwrap());
        if count == bourse_server::services::multicast::RANGE_GONE {
            return Err(sequence);
        }
        let mut at = 20;
        for number in sequence..sequence + u64::from(count) {
            let length = usize::from(u16::from_be_bytes([packet[at], packet[at + 1]]));
            messages.insert(number, packet[at + 2..at + 2 + length].to_vec());
            at += 2 + length;
        }
    }
    Ok(messages)
}

fn view_of(cluster: &Cluster, id: u64) -> Option<Value> {
    request(&cluster.http(id), None, "GET", "/v1/cluster", "").map(|answer| answer.body)
}

/// The leader cut off from the majority (network namespaces, blackhole routes both
/// ways; its clients still reach it): it stops leading and never acknowledges another
/// order, the majority elects a leader that takes orders, and once the network heals
/// the old leader follows, catches up, and every node holds every acknowledged order
/// exactly once and none of those the cut-off leader was sent.
#[test]
fn a_leader_cut_off_from_the_majority_stops_answering_and_the_majority_elects() {
    let Some(network) = Network::create(3) else { return };
    let mut cluster = Cluster::start_on(3, Some(network));
    let leader = cluster.leader(Duration::from_secs(10));
    let term = view_of(&cluster, leader).unwrap()["term"].as_u64().unwrap();
    let mut acknowledged = Vec::new();
    for index in 0..10 {
        let id = format!("p{index}");
        place_until_answered(&cluster, &id, leader);
        acknowledged.push(id);
    }
    let others: Vec<u64> = cluster.live().into_iter().filter(|id| *id != leader).collect();
    let network = cluster.network.take().unwrap();
    for other in &others {
        network.cut(leader, *other);
    }
    let cut_at = Instant::now();

    // Orders sent to the cut-off leader, meanwhile: none is acknowledged (it cannot
    // commit, and once it has stepped down it refuses them).
    let alice = cluster.keys["alice"].clone();
    let minority = send_to(&cluster, leader, (0..5).map(|index| format!("m{index}")).collect());

    // The majority elects one of its own, in a later term, which takes orders.
    let new_leader = leader_among(&cluster, &others, cut_at);
    let elected_after = cut_at.elapsed();
    let (minority_acknowledged, refused) = minority.join().unwrap();
    assert!(
        minority_acknowledged.is_empty(),
        "acknowledged when cut off: {minority_acknowledged:?}"
    );
    let view = view_of(&cluster, leader).unwrap();
    assert_eq!(view["is_leader"], false, "the cut-off node still leads: {view}");
    let new_term = view_of(&cluster, new_leader).unwrap()["term"].as_u64().unwrap();
    assert!(new_term > term, "term {new_term} after {term}");
    let majority: Vec<(u64, String)> = others.iter().map(|id| (*id, cluster.http(*id))).collect();
    for index in 0..10 {
        let id = format!("q{index}");
        place_following(&majority, &alice, &order_body(&id), new_leader);
        acknowledged.push(id);
    }
    eprintln!("partition: node {leader} cut off; node {new_leader} led after {elected_after:?}");

    // Healed: the old leader follows the new one and catches up.
    for other in &others {
        network.heal(leader, *other);
    }
    cluster.network = Some(network);
    let agreed = cluster.leader(Duration::from_secs(10));
    assert_ne!(agreed, leader, "pre-vote: the returning node does not depose the leader");
    caught_up(&cluster, agreed);
    for prefix in ["p", "q"] {
        let ours: Vec<String> =
            acknowledged.iter().filter(|id| id.starts_with(prefix)).cloned().collect();
        every_order_once_everywhere(&cluster, &alice, &ours, prefix);
    }
    nowhere(&cluster, &refused);
    assert!(!cluster.logs().contains("STATE DIVERGED"), "{}", cluster.logs());
}

/// The first of `nodes` that says it leads, waiting up to 10 s from `since`.
fn leader_among(cluster: &Cluster, nodes: &[u64], since: Instant) -> u64 {
    let deadline = since + Duration::from_secs(10);
    loop {
        let leading = nodes
            .iter()
            .find(|id| view_of(cluster, **id).is_some_and(|view| view["is_leader"] == true));
        if let Some(leader) = leading {
            return *leader;
        }
        assert!(Instant::now() < deadline, "{nodes:?} elected no leader:\n{}", cluster.logs());
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Orders (`ids`) sent one after another to node `id` from a thread; the ids it
/// acknowledged (2xx) and those it did not (refused `not_leader` or `engine_stopped`,
/// or not answered).
fn send_to(
    cluster: &Cluster,
    id: u64,
    ids: Vec<String>,
) -> std::thread::JoinHandle<(Vec<String>, Vec<String>)> {
    let (http, alice) = (cluster.http(id), cluster.keys["alice"].clone());
    std::thread::spawn(move || {
        let (mut acknowledged, mut not) = (Vec::new(), Vec::new());
        for client_order_id in ids {
            let body = order_body(&client_order_id);
            match request(&http, Some(&alice), "POST", "/v1/orders", &body) {
                Some(answer) if answer.status == 200 || answer.status == 201 => {
                    acknowledged.push(client_order_id)
                }
                Some(answer) => {
                    let code = answer.body["code"].as_str().unwrap_or_default().to_string();
                    assert!(code == "not_leader" || code == "engine_stopped", "{}", answer.body);
                    not.push(client_order_id);
                }
                None => not.push(client_order_id),
            }
        }
        (acknowledged, not)
    })
}

/// None of `ids` is on any live node.
fn nowhere(cluster: &Cluster, ids: &[String]) {
    let alice = &cluster.keys["alice"];
    for id in cluster.live() {
        for client_order_id in ids {
            let path = format!("/v1/orders?client_order_id={client_order_id}");
            let found = request(&cluster.http(id), Some(alice), "GET", &path, "").unwrap();
            assert_eq!(found.status, 404, "node {id}: {client_order_id}: {}", found.body);
        }
    }
}

/// The leader's disk fills (a loop-mounted ext4 taken whole): its Raft log cannot
/// append, so it stops (fail-stop) and acknowledges nothing more; the others elect a
/// leader within about a second that takes orders; with space again and started
/// again, the node catches up, and every acknowledged order is everywhere once.
#[test]
fn a_leader_whose_disk_fills_stops_and_another_leads() {
    let Some(mut cluster) = Cluster::start_on_disks(3) else { return };
    let leader = cluster.leader(Duration::from_secs(10));
    let mut acknowledged = Vec::new();
    for index in 0..10 {
        let id = format!("d{index}");
        place_until_answered(&cluster, &id, leader);
        acknowledged.push(id);
    }
    cluster.disks[&leader].fill();
    let filled_at = Instant::now();
    // Orders go on, following the leader. The full node may still acknowledge a few
    // (appended into blocks it already has, synced: durable), then it stops.
    let mut index = 10;
    let (new_leader, answered_at) = loop {
        let id = format!("d{index}");
        let (answered_by, at) = place_until_answered(&cluster, &id, leader);
        acknowledged.push(id);
        index += 1;
        if answered_by != leader {
            break (answered_by, at);
        }
        assert!(index < 10_000, "node {leader} still acknowledges on a full disk");
    };
    let failover = answered_at - filled_at;
    eprintln!(
        "full disk: node {leader}'s disk filled; node {new_leader} answered after {failover:?}"
    );
    assert_ne!(new_leader, leader);
    for more in index..index + 10 {
        let id = format!("d{more}");
        place_until_answered(&cluster, &id, new_leader);
        acknowledged.push(id);
    }
    let view = view_of(&cluster, leader).unwrap();
    assert!(view["failure"].is_string(), "the node whose disk is full stopped: {view}");
    // Space again; the node started again catches up.
    cluster.disks[&leader].unfill();
    cluster.kill(leader);
    let stdout = cluster.spawn(leader);
    let keys = demo_keys(stdout, &cluster.log(leader));
    assert_eq!(keys["alice"], cluster.keys["alice"]);
    caught_up(&cluster, new_leader);
    every_order_once_everywhere(&cluster, &cluster.keys["alice"], &acknowledged, "d");
    assert!(!cluster.logs().contains("STATE DIVERGED"), "{}", cluster.logs());
}

/// The leader's disk stalls (`fsfreeze`: its writes and syncs block). Its thread of
/// Raft blocks, heartbeats stop, and the others elect a leader within about a second
/// that takes orders. (An order the frozen leader acknowledged before it blocked was
/// held durably by both followers, a majority: it is acknowledged like any other.)
/// Thawed, the old leader learns of the new term, steps down, answers what it held
/// `not_leader`, and follows; every acknowledged order is everywhere once.
#[test]
fn a_leader_whose_disk_stalls_is_replaced_and_follows_when_it_thaws() {
    let Some(cluster) = Cluster::start_on_disks(3) else { return };
    let leader = cluster.leader(Duration::from_secs(10));
    let mut acknowledged = Vec::new();
    for index in 0..10 {
        let id = format!("s{index}");
        place_until_answered(&cluster, &id, leader);
        acknowledged.push(id);
    }
    let others: Vec<u64> = cluster.live().into_iter().filter(|id| *id != leader).collect();
    cluster.disks[&leader].freeze();
    let frozen_at = Instant::now();
    let frozen: Vec<String> = (0..3).map(|index| format!("z{index}")).collect();
    let sent = send_to(&cluster, leader, frozen);
    let new_leader = leader_among(&cluster, &others, frozen_at);
    let majority: Vec<(u64, String)> = others.iter().map(|id| (*id, cluster.http(*id))).collect();
    let (_, answered_at) =
        place_following(&majority, &cluster.keys["alice"], &order_body("s-after"), new_leader);
    acknowledged.push("s-after".to_string());
    eprintln!(
        "stalled disk: node {leader} frozen; node {new_leader} answered after {:?}",
        answered_at - frozen_at
    );
    for index in 10..20 {
        let id = format!("s{index}");
        place_following(&majority, &cluster.keys["alice"], &order_body(&id), new_leader);
        acknowledged.push(id);
    }
    std::thread::sleep(Duration::from_secs(1));
    cluster.disks[&leader].thaw();
    // What the frozen leader acknowledged, its followers held durably (a majority):
    // it must be everywhere like any acknowledged order.
    let (frozen_acknowledged, frozen_not) = sent.join().unwrap();
    eprintln!(
        "stalled disk: acknowledged while frozen {frozen_acknowledged:?}, not {frozen_not:?}"
    );
    let agreed = cluster.leader(Duration::from_secs(10));
    assert_ne!(agreed, leader, "the thawed node does not lead again at once");
    caught_up(&cluster, agreed);
    every_order_once_everywhere(&cluster, &cluster.keys["alice"], &acknowledged, "s");
    every_order_once_everywhere(&cluster, &cluster.keys["alice"], &frozen_acknowledged, "z");
    assert!(!cluster.logs().contains("STATE DIVERGED"), "{}", cluster.logs());
}

/// Five nodes, and two killed at once (SIGKILL), the leader and a follower: the three
/// left are a majority, elect a leader and take orders; both killed nodes, started
/// again, catch up; every acknowledged order is on all five once.
#[test]
fn five_nodes_lose_the_leader_and_a_follower_at_once_and_go_on() {
    let mut cluster = Cluster::start(5);
    let leader = cluster.leader(Duration::from_secs(10));
    let mut acknowledged = Vec::new();
    for index in 0..10 {
        let id = format!("f{index}");
        place_until_answered(&cluster, &id, leader);
        acknowledged.push(id);
    }
    let follower = cluster.live().into_iter().find(|id| *id != leader).unwrap();
    let killed_at = Instant::now();
    cluster.kill(leader);
    cluster.kill(follower);
    let left = cluster.live();
    let (new_leader, answered_at) = place_until_answered(&cluster, "f-after", left[0]);
    acknowledged.push("f-after".to_string());
    eprintln!("two of five killed: node {new_leader} answered after {:?}", answered_at - killed_at);
    assert!(left.contains(&new_leader));
    for index in 10..20 {
        let id = format!("f{index}");
        place_until_answered(&cluster, &id, new_leader);
        acknowledged.push(id);
    }
    for id in [leader, follower] {
        let stdout = cluster.spawn(id);
        let keys = demo_keys(stdout, &cluster.log(id));
        assert_eq!(keys["alice"], cluster.keys["alice"]);
    }
    caught_up(&cluster, new_leader);
    every_order_once_everywhere(&cluster, &cluster.keys["alice"], &acknowledged, "f");
    assert!(!cluster.logs().contains("STATE DIVERGED"), "{}", cluster.logs());
}

/// A fourth node, in the file with `joins = true`, started while three run: it waits
/// (it is nobody's voter) until `bourse cluster add 4`, which makes it a learner, then
/// a voter once it holds the log. With four voters a majority is three: the leader
/// killed, the new node is one of the three that elect the next.
#[test]
fn a_new_node_joins_a_running_cluster_and_counts_in_its_majority() {
    let mut cluster = Cluster::start_with(3, 1, None, false, None).unwrap();
    let leader = cluster.leader(Duration::from_secs(10));
    let mut acknowledged = Vec::new();
    for index in 0..10 {
        let id = format!("j{index}");
        place_until_answered(&cluster, &id, leader);
        acknowledged.push(id);
    }
    let stdout = cluster.spawn(4);
    let added = cluster_command(&cluster, "add", 4);
    assert!(added.contains("added"), "{added}");
    let keys = demo_keys(stdout, &cluster.log(4));
    assert_eq!(keys["alice"], cluster.keys["alice"], "the new node shows the demo's keys");
    let view = view_of(&cluster, leader).unwrap();
    let voters: Vec<u64> =
        view["voters"].as_array().unwrap().iter().filter_map(Value::as_u64).collect();
    assert_eq!(voters, vec![1, 2, 3, 4], "{view}");
    caught_up(&cluster, leader);
    every_order_once_everywhere(&cluster, &cluster.keys["alice"], &acknowledged, "j");
    cluster.kill(leader);
    let (new_leader, _) = place_until_answered(&cluster, "j-after", 4);
    acknowledged.push("j-after".to_string());
    assert_ne!(new_leader, leader);
    caught_up(&cluster, new_leader);
    every_order_once_everywhere(&cluster, &cluster.keys["alice"], &acknowledged, "j");
    assert!(!cluster.logs().contains("STATE DIVERGED"), "{}", cluster.logs());
}

/// `bourse cluster add|remove N` (or `status`: `node` unused), run by the test.
fn cluster_command(cluster: &Cluster, change: &str, node: u64) -> String {
    let mut command = Command::new(env!("CARGO_BIN_EXE_bourse"));
    command.args(["cluster", change]);
    if change != "status" {
        command.arg(node.to_string());
    }
    let output = command.arg("--config").arg(&cluster.config).output().unwrap();
    let (stdout, stderr) = (
        String::from_utf8_lossy(&output.stdout).to_string(),
        String::from_utf8_lossy(&output.stderr).to_string(),
    );
    assert!(
        output.status.success(),
        "cluster {change} {node}: {stdout}{stderr}\n{}",
        cluster.logs()
    );
    stdout
}

/// A node whose data is lost: removed (`bourse cluster remove`), started again with an
/// empty data directory, added (`bourse cluster add`: a learner until it holds the log,
/// then a voter). It catches up from the log, holds every acknowledged order, and
/// then counts in a majority: with the old leader killed, it and the third node elect
/// a leader that takes orders.
#[test]
fn a_wiped_node_is_removed_added_back_and_catches_up_from_the_log() {
    let mut cluster = Cluster::start(3);
    let leader = cluster.leader(Duration::from_secs(10));
    let mut acknowledged = Vec::new();
    for index in 0..20 {
        let id = format!("w{index}");
        place_until_answered(&cluster, &id, leader);
        acknowledged.push(id);
    }
    let voters_of = |view: &Value| -> Vec<u64> {
        view["voters"].as_array().unwrap().iter().filter_map(Value::as_u64).collect()
    };
    // A node removed while it runs (`cluster status` calls it removed), and added back.
    let wiped = cluster.live().into_iter().find(|id| *id != leader).unwrap();
    let removed = cluster_command(&cluster, "remove", wiped);
    assert!(removed.contains("removed"), "{removed}");
    let table = cluster_command(&cluster, "status", 0);
    let row = table
        .lines()
        .find(|line| line.split_whitespace().next() == Some(wiped.to_string().as_str()))
        .unwrap_or_default();
    assert_eq!(row.split_whitespace().nth(2), Some("removed"), "{table}");
    let view = view_of(&cluster, leader).unwrap();
    assert!(!voters_of(&view).contains(&wiped) && voters_of(&view).len() == 2, "{view}");
    // The leader does not remove itself.
    let refused = Command::new(env!("CARGO_BIN_EXE_bourse"))
        .args(["cluster", "remove", &leader.to_string(), "--config"])
        .arg(&cluster.config)
        .output()
        .unwrap();
    assert!(!refused.status.success());
    assert!(String::from_utf8_lossy(&refused.stderr).contains("does not remove itself"));
    // Orders go on with two voters; then the node is added back.
    for index in 20..30 {
        let id = format!("w{index}");
        place_until_answered(&cluster, &id, leader);
        acknowledged.push(id);
    }
    let added = cluster_command(&cluster, "add", wiped);
    assert!(added.contains("added"), "{added}");
    assert_eq!(voters_of(&view_of(&cluster, leader).unwrap()).len(), 3);

    // Its data lost, and started again under its old id without the procedure: its
    // peers see another incarnation and refuse it (it neither votes nor counts).
    cluster.kill(wiped);
    let data = cluster.directory.path().join(format!("node-{wiped}"));
    std::fs::remove_dir_all(&data).unwrap();
    let stdout = cluster.spawn(wiped);
    let deadline = Instant::now() + Duration::from_secs(10);
    while !std::fs::read_to_string(cluster.log(leader))
        .unwrap_or_default()
        .contains("came back with other data")
    {
        assert!(Instant::now() < deadline, "the wiped voter was not refused:\n{}", cluster.logs());
        std::thread::sleep(Duration::from_millis(50));
    }
    // The procedure: removed, then added back; it catches up from the log.
    let removed = cluster_command(&cluster, "remove", wiped);
    assert!(removed.contains("removed"), "{removed}");
    let added = cluster_command(&cluster, "add", wiped);
    assert!(added.contains("added"), "{added}");
    let keys = demo_keys(stdout, &cluster.log(wiped));
    assert_eq!(keys["alice"], cluster.keys["alice"], "the wiped node shows the demo's keys");
    let view = view_of(&cluster, leader).unwrap();
    assert_eq!(voters_of(&view).len(), 3, "{view}");
    assert!(voters_of(&view).contains(&wiped), "{view}");
    caught_up(&cluster, leader);
    every_order_once_everywhere(&cluster, &cluster.keys["alice"], &acknowledged, "w");

    // The old leader killed: the wiped node is one of the two that elect the next.
    cluster.kill(leader);
    let others = cluster.live();
    let (new_leader, _) = place_until_answered(&cluster, "w-after", others[0]);
    acknowledged.push("w-after".to_string());
    assert_ne!(new_leader, leader);
    caught_up(&cluster, new_leader);
    every_order_once_everywhere(&cluster, &cluster.keys["alice"], &acknowledged, "w");
    assert!(!cluster.logs().contains("STATE DIVERGED"), "{}", cluster.logs());
}

/// The README's local cluster: `bourse serve --demo --cluster 3` starts three nodes that
/// agree on a leader and show the same demo keys, `bourse cluster status` shows one
/// leader and two followers, and SIGTERM stops them all cleanly.
#[test]
fn serve_cluster_3_starts_a_local_cluster_that_status_shows_and_sigterm_stops() {
    /// The launcher, stopped with its nodes (SIGTERM) if the test ends early: its
    /// fixed ports must be free for the next run.
    struct Launcher(Child);
    impl Drop for Launcher {
        fn drop(&mut self) {
            if let Ok(None) = self.0.try_wait() {
                // SAFETY: kill sends a signal to the child we started.
                unsafe { libc::kill(self.0.id() as i32, libc::SIGTERM) };
                let _ = self.0.wait();
            }
        }
    }
    let directory = tempfile::tempdir().unwrap();
    let mut launcher = Launcher(
        Command::new(env!("CARGO_BIN_EXE_bourse"))
            .args(["serve", "--demo", "--cluster", "3", "--no-history"])
            .current_dir(directory.path())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    let launcher = &mut launcher.0;
    let (lines, seen) = std::sync::mpsc::channel();
    let stdout = launcher.stdout.take().unwrap();
    std::thread::spawn(move || {
        use std::io::BufRead;
        for line in std::io::BufReader::new(stdout).lines().map_while(Result::ok) {
            if lines.send(line).is_err() {
                return;
            }
        }
    });
    let mut output = Vec::new();
    let mut keys = BTreeSet::new();
    let deadline = Instant::now() + Duration::from_secs(60);
    while (1..=3).any(|node| {
        !output.iter().any(|line: &String| {
            line.starts_with(&format!("node {node} | bourse: demo account alice"))
        })
    }) {
        let timeout = deadline.saturating_duration_since(Instant::now());
        let line = seen.recv_timeout(timeout).unwrap_or_else(|_| panic!("{output:#?}"));
        if let Some((_, shown)) = line.split_once("| bourse: demo account alice: ") {
            keys.insert(shown.to_string());
        }
        output.push(line);
    }
    assert_eq!(keys.len(), 1, "every node shows alice's one demo key: {keys:?}");
    let status = Command::new(env!("CARGO_BIN_EXE_bourse"))
        .args(["cluster", "status", "--config", "data/cluster/cluster.toml"])
        .current_dir(directory.path())
        .output()
        .unwrap();
    let table = String::from_utf8_lossy(&status.stdout);
    assert!(status.status.success(), "{table}");
    let roles: Vec<&str> =
        table.lines().filter_map(|line| line.split_whitespace().nth(2)).collect();
    assert_eq!(roles.iter().filter(|role| **role == "leader").count(), 1, "{table}");
    assert_eq!(roles.iter().filter(|role| **role == "follower").count(), 2, "{table}");
    // SAFETY: kill sends a signal to the child we started; no memory is involved.
    unsafe { libc::kill(launcher.id() as i32, libc::SIGTERM) };
    let deadline = Instant::now() + Duration::from_secs(30);
    let exited = loop {
        if let Some(status) = launcher.try_wait().unwrap() {
            break status;
        }
        assert!(Instant::now() < deadline, "the launcher did not stop: {output:#?}");
        std::thread::sleep(Duration::from_millis(50));
    };
    assert!(exited.success(), "{exited}");
    while let Ok(line) = seen.recv_timeout(Duration::from_secs(1)) {
        output.push(line);
    }
    for node in 1..=3 {
        let stopped = format!("bourse: node {node} stopped (exit status: 0)");
        assert!(output.iter().any(|line| line == &stopped), "{output:#?}");
    }
}
