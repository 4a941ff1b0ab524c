//! A cluster from the command line (`docs/cluster.md`): `bourse serve --cluster N`
//! starts N nodes on loopback, each a `bourse serve` process of its own with its own
//! data directory, so that a newcomer can kill one and watch; `bourse cluster status`
//! asks every node of a cluster file how it sees the cluster; `bourse cluster add` and
//! `remove` change who is in it, on the leader, signed with the cluster's admin key
//! (derived from the master key file the cluster file names).

use std::io::{BufRead, BufReader, Read};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use bourse_server::ServeConfig;
use clap::Subcommand;

#[derive(Subcommand)]
pub enum ClusterCommand {
    /// How each node of a cluster sees it: the leader, the term, the commit index, each
    /// node's applied command and, from the leader, each node's lag.
    Status {
        /// The cluster's settings file (its `[cluster]` table names the nodes).
        #[arg(long)]
        config: PathBuf,
    },
    /// Adds a node of the cluster file: first as a learner that catches up from the
    /// log, then as a voter. A node whose data was lost is removed, started again
    /// empty, and added.
    Add {
        #[arg(long)]
        config: PathBuf,
        /// The node's id (its entry in the file).
        node: u64,
    },
    /// Removes a node from the cluster (not the leader: stop it first).
    Remove {
        #[arg(long)]
        config: PathBuf,
        node: u64,
    },
}

pub fn run(command: ClusterCommand) -> Result<(), String> {
    match command {
        ClusterCommand::Status { config } => status(&config),
        ClusterCommand::Add { config, node } => change_membership(&config, "add", node),
        ClusterCommand::Remove { config, node } => change_membership(&config, "remove", node),
    }
}

/// `cluster add|remove`: finds the leader among the file's nodes and asks it.
fn change_membership(config: &Path, change: &str, node: u64) -> Result<(), String> {
    let settings = ServeConfig::from_file(config).map_err(|error| error.to_string())?;
    let master = settings.auth.master_key_file.clone().ok_or_else(|| {
        format!(
            "{} names no auth.master_key_file: the cluster's admin key comes from it",
            config.display()
        )
    })?;
    let (key, secret) =
        bourse_server::keys::cluster_admin_key(&master).map_err(|error| error.to_string())?;
    let credentials =
        bourse_bench::loadgen::admin::Credentials { key, secret: secret.expose().to_string() };
    let nodes = nodes_of(config)?;
    let body = format!("{{\"node\":{node}}}");
    let path = format!("/v1/admin/cluster/{change}");
    // Whoever leads; a follower's answer names the leader, asked next.
    let deadline = std::time::Instant::now() + Duration::from_secs(180);
    // Asked first: the leader a node names within 2 s (a node that is starting may
    // take connections and answer nothing for a while), else the file's first node.
    let named = nodes.iter().find_map(|(_, http)| {
        let (_, view) =
            bourse_bench::loadgen::admin::get_within(*http, "/v1/cluster", Duration::from_secs(2))
                .ok()?;
        let leader = view["leader"].as_u64()?;
        nodes.iter().find(|(id, _)| *id == leader).map(|(_, http)| *http)
    });
    let mut asked =
        named.or_else(|| nodes.first().map(|(_, http)| *http)).ok_or("the file names no nodes")?;
    let mut tried = 0usize;
    loop {
        let answer =
            bourse_bench::loadgen::admin::request(asked, &credentials, "POST", &path, &body);
        match answer {
            Ok((200, shown)) => {
                println!(
                    "node {node}: {} (voters {}, learners {})",
                    shown["done"].as_str().unwrap_or("done"),
                    shown["voters"],
                    shown["learners"]
                );
                return Ok(());
            }
            Ok((503, refused)) if refused["code"] == "not_leader" => {
                let leader = refused["leader"]["http"].as_str().and_then(|http| http.parse().ok());
                match leader {
                    Some(leader) => asked = leader,
                    None => std::thread::sleep(Duration::from_millis(500)),
                }
            }
            Ok((_, busy)) if busy["code"] == "busy" => {
                // A learner still catching up, or a change in flight: ask again.
                eprintln!("{}", busy["message"].as_str().unwrap_or("busy"));
                std::thread::sleep(Duration::from_secs(1));
            }
            Ok((status, answer)) => {
                return Err(format!(
                    "node {node} not changed ({status}): {}",
                    answer["message"].as_str().unwrap_or(&answer.to_string())
                ))
            }
            Err(_) => {
                // That node is down: the next of the file.
                tried += 1;
                asked = nodes[tried % nodes.len()].1;
            }
        }
        if std::time::Instant::now() >= deadline {
            return Err(format!("no leader answered within 3 minutes (last asked {asked})"));
        }
    }
}

/// The nodes of `config`'s cluster: (id, REST address).
fn nodes_of(config: &Path) -> Result<Vec<(u64, SocketAddr)>, String> {
    let settings = ServeConfig::from_file(config).map_err(|error| error.to_string())?;
    let cluster =
        settings.cluster.ok_or_else(|| format!("{} has no [cluster] table", config.display()))?;
    Ok(cluster.nodes.iter().map(|node| (node.id, node.http)).collect())
}

fn status(config: &Path) -> Result<(), String> {
    let nodes = nodes_of(config)?;
    println!(
        "{:<5} {:<22} {:<9} {:>6} {:>10} {:>12} {:>8}",
        "node", "REST", "role", "term", "commit", "applied", "lag"
    );
    let mut lags = std::collections::BTreeMap::new();
    // The membership as the leader sees it: (voters, learners).
    let mut members: Option<(Vec<u64>, Vec<u64>)> = None;
    let ids = |list: &serde_json::Value| -> Vec<u64> {
        list.as_array().into_iter().flatten().filter_map(serde_json::Value::as_u64).collect()
    };
    let mut rows = Vec::new();
    for (id, http) in nodes {
        match bourse_bench::loadgen::admin::get(http, "/v1/cluster") {
            Ok((200, view)) => {
                if view["is_leader"].as_bool() == Some(true) {
                    members = Some((ids(&view["voters"]), ids(&view["learners"])));
                    for matched in view["matched"].as_array().into_iter().flatten() {
                        if let (Some(node), Some(lag)) =
                            (matched["node"].as_u64(), matched["lag"].as_u64())
                        {
                            lags.insert(node, lag);
                        }
                    }
                }
                rows.push((id, http, Some(view)));
            }
            Ok((status, answer)) => {
                println!("{id:<5} {:<22} answered {status}: {answer}", http.to_string());
            }
            Err(_) => rows.push((id, http, None)),
        }
    }
    for (id, http, view) in rows {
        let Some(view) = view else {
            println!("{id:<5} {:<22} down (no answer)", http.to_string());
            continue;
        };
        let role = match (view["is_leader"].as_bool(), view["failure"].as_str(), &members) {
            (_, Some(_), _) => "stopped",
            (Some(true), None, _) => "leader",
            (_, None, Some((_, learners))) if learners.contains(&id) => "learner",
            (_, None, Some((voters, _))) if !voters.contains(&id) => "removed",
            _ => "follower",
        };
        let lag = lags.get(&id).map_or("-".to_string(), u64::to_string);
        let number = |field: &str| view[field].as_u64().map_or("?".to_string(), |n| n.to_string());
        println!(
            "{id:<5} {:<22} {role:<9} {:>6} {:>10} {:>12} {:>8}",
            http.to_string(),
            number("term"),
            number("commit"),
            number("applied_seq"),
            lag
        );
        if let Some(failure) = view["failure"].as_str() {
            println!("      stopped: {failure}");
        }
    }
    println!("(lag: entries of the leader's log a node is known not to hold yet)");
    Ok(())
}

/// `serve --cluster N`: the ports of node `id` (1-based) from `base`: REST, binary
/// TCP, FIX, peer, the feed's snapshot and retransmission services.
fn ports(base: u16, id: u16) -> [u16; 6] {
    let first = base + id * 10;
    [first, first + 1, first + 2, first + 3, first + 4, first + 5]
}

/// The first port of the local cluster's nodes: node k's REST is 8100 + 10k, its
/// binary TCP +1, FIX +2, its peer port +3, its feed's snapshot +4 and retransmission
/// +5 services.
pub const LOCAL_PORT_BASE: u16 = 8100;

/// What `bourse serve --cluster N` passes on to every node.
pub struct Local {
    pub nodes: u16,
    pub data_dir: PathBuf,
    pub demo: bool,
    pub durability: Option<String>,
    pub no_history: bool,
}

/// Writes the local cluster's settings (once: a later start reuses them), then starts
/// its nodes and stays until ctrl-c or SIGTERM, which it passes on to them.
pub fn launch(local: &Local) -> Result<(), String> {
    if !(1..=9).contains(&local.nodes) {
        return Err(format!("--cluster {} : 1 to 9 nodes", local.nodes));
    }
    let base = local.data_dir.join("cluster");
    std::fs::create_dir_all(&base)
        .map_err(|error| format!("cannot make {}: {error}", base.display()))?;
    let master = base.join("master.key");
    bourse_server::keys::ensure_master_key_file(&master).map_err(|error| error.to_string())?;
    let config = base.join("cluster.toml");
    if !config.exists() {
        let text = local_settings(local, &master);
        std::fs::write(&config, text)
            .map_err(|error| format!("cannot write {}: {error}", config.display()))?;
    }
    let exe = std::env::current_exe().map_err(|error| format!("cannot find bourse: {error}"))?;
    let mut children = Vec::new();
    for id in 1..=local.nodes {
        let mut command = Command::new(&exe);
        command.arg("serve").arg("--config").arg(&config).arg("--node").arg(id.to_string());
        if local.demo {
            command.arg("--demo");
        }
        if let Some(durability) = &local.durability {
            command.arg("--durability").arg(durability);
        }
        if local.no_history {
            command.arg("--no-history");
        }
        let mut child = command
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|error| format!("cannot start node {id}: {error}"))?;
        prefix_lines(id, child.stdout.take());
        prefix_lines(id, child.stderr.take());
        children.push((id, child));
    }
    println!(
        "bourse: a cluster of {} nodes on loopback, settings in {}",
        local.nodes,
        config.display()
    );
    for (id, child) in &children {
        let [http, tcp, fix, ..] = ports(LOCAL_PORT_BASE, *id);
        println!(
            "bourse: node {id} (pid {}): REST http://127.0.0.1:{http}, binary tcp://127.0.0.1:{tcp}, FIX tcp://127.0.0.1:{fix}, data in {}",
            child.id(),
            local.data_dir.join(format!("node-{id}")).display()
        );
    }
    println!("bourse: see who leads: bourse cluster status --config {}", config.display());
    let services: Vec<String> = children
        .iter()
        .map(|(id, _)| {
            let [.., snapshot, retransmit] = ports(LOCAL_PORT_BASE, *id);
            format!("--snapshot 127.0.0.1:{snapshot} --retransmit 127.0.0.1:{retransmit}")
        })
        .collect();
    println!(
        "bourse: follow the feed (the leader sends it): bourse md listen {}",
        services.join(" ")
    );
    println!(
        "bourse: kill the leader (kill -9 its pid) and watch another take over; start a node again with: bourse serve --config {} --node N",
        config.display()
    );
    wait_and_stop(children)
}

fn local_settings(local: &Local, master: &Path) -> String {
    let mut text = format!(
        "# Written by `bourse serve --cluster {}` (docs/cluster.md). Every node reads this\n\
         # file and is told which one it is with --node.\n\
         [auth]\nmaster_key_file = {:?}\n\n\
         [cluster]\nelection_timeout_ms = 500\n",
        local.nodes,
        master.display().to_string()
    );
    for id in 1..=local.nodes {
        let [http, tcp, fix, peer, snapshot, retransmit] = ports(LOCAL_PORT_BASE, id);
        let data_dir = local.data_dir.join(format!("node-{id}"));
        text.push_str(&format!(
            "\n[[cluster.nodes]]\nid = {id}\npeer = \"127.0.0.1:{peer}\"\nhttp = \"127.0.0.1:{http}\"\n\
             tcp = \"127.0.0.1:{tcp}\"\nfix = \"127.0.0.1:{fix}\"\ndata_dir = {:?}\n\
             marketdata_snapshot = \"127.0.0.1:{snapshot}\"\nmarketdata_retransmit = \"127.0.0.1:{retransmit}\"\n",
            data_dir.display().to_string()
        ));
    }
    text
}

/// Copies a node's output to ours, each line marked with the node.
fn prefix_lines(id: u16, output: Option<impl Read + Send + 'static>) {
    let Some(output) = output else { return };
    std::thread::spawn(move || {
        for line in BufReader::new(output).lines() {
            let Ok(line) = line else { return };
            println!("node {id} | {line}");
        }
    });
}

/// Waits for ctrl-c or SIGTERM (then stops every node with SIGTERM and waits for it),
/// saying when a node ends on its own.
fn wait_and_stop(mut children: Vec<(u16, Child)>) -> Result<(), String> {
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|error| format!("cannot start the async runtime: {error}"))?;
    {
        let stop = std::sync::Arc::clone(&stop);
        let signals = runtime.block_on(async {
            use tokio::signal::unix::{signal, SignalKind};
            let terminate = signal(SignalKind::terminate());
            let interrupt = signal(SignalKind::interrupt());
            match (terminate, interrupt) {
                (Ok(terminate), Ok(interrupt)) => Ok((terminate, interrupt)),
                (Err(error), _) | (_, Err(error)) => Err(format!("cannot handle signals: {error}")),
            }
        })?;
        std::thread::spawn(move || {
            let (mut terminate, mut interrupt) = signals;
            runtime.block_on(async {
                tokio::select! {
                    _ = terminate.recv() => {}
                    _ = interrupt.recv() => {}
                }
            });
            stop.store(true, std::sync::atomic::Ordering::SeqCst);
        });
    }
    while !stop.load(std::sync::atomic::Ordering::SeqCst) && !children.is_empty() {
        std::thread::sleep(Duration::from_millis(100));
        children.retain_mut(|(id, child)| match child.try_wait() {
            Ok(Some(status)) => {
                println!("bourse: node {id} ended ({status})");
                false
            }
            _ => true,
        });
    }
    for (_, child) in &children {
        // SAFETY: `kill` only sends a signal to the process of that id (our child).
        unsafe { libc::kill(child.id() as libc::pid_t, libc::SIGTERM) };
    }
    for (id, mut child) in children {
        let status = child.wait().map_err(|error| format!("node {id}: {error}"))?;
        println!("bourse: node {id} stopped ({status})");
    }
    Ok(())
}
