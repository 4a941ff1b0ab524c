//! `bourse serve`: runs the exchange until SIGTERM or ctrl-c, then shuts it down
//! cleanly (stop intake, drain, snapshot).

use std::net::SocketAddr;
use std::path::PathBuf;

use bourse_server::{Overrides, ServeConfig, StartNotes};
use clap::Args;

#[derive(Args)]
pub struct ServeArgs {
    /// A TOML file of settings (see docs/operations.md); flags and BOURSE_* variables
    /// override it.
    #[arg(long)]
    config: Option<PathBuf>,
    /// Where the journal, snapshots and keys live [default: ./data].
    #[arg(long)]
    data_dir: Option<PathBuf>,
    /// The REST address [default: 127.0.0.1:8080].
    #[arg(long)]
    http: Option<SocketAddr>,
    /// The binary TCP order-entry address [default: 127.0.0.1:9090].
    #[arg(long)]
    tcp: Option<SocketAddr>,
    /// The FIX 4.4 order-entry address [default: 127.0.0.1:9876].
    #[arg(long)]
    fix: Option<SocketAddr>,
    /// sync (an acknowledgement means on disk), async or none [default: sync].
    #[arg(long)]
    durability: Option<String>,
    /// Also declare demo instruments and funded accounts (once) and print their keys.
    #[arg(long)]
    demo: bool,
    /// Do not publish the market-data feed.
    #[arg(long)]
    no_marketdata: bool,
    /// The feed's multicast group and port [default: 239.255.66.1:31001].
    #[arg(long)]
    md_multicast: Option<SocketAddr>,
    /// The feed's snapshot service (TCP) [default: 127.0.0.1:9091].
    #[arg(long)]
    md_snapshot: Option<SocketAddr>,
    /// The feed's retransmission service (UDP) [default: 127.0.0.1:9092].
    #[arg(long)]
    md_retransmit: Option<SocketAddr>,
    /// Do not write the history (data/history).
    #[arg(long)]
    no_history: bool,
    /// Which node of the cluster the settings file's `[cluster]` table names this is
    /// (docs/cluster.md).
    #[arg(long)]
    node: Option<u64>,
    /// Start a local cluster of this many nodes instead: each a `bourse serve` process
    /// on loopback with its own data directory under the data directory (node k's REST
    /// on port 8100 + 10k).
    #[arg(long, conflicts_with_all = ["config", "node", "http", "tcp", "fix"])]
    cluster: Option<u16>,
}

pub fn run(args: ServeArgs) -> Result<(), String> {
    let _ = tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("BOURSE_LOG")
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info")),
        )
        .try_init();
    let overrides = Overrides {
        data_dir: args.data_dir,
        http_listen: args.http,
        tcp_listen: args.tcp,
        fix_listen: args.fix,
        durability: args.durability.clone(),
        marketdata: args.no_marketdata.then_some(false),
        md_multicast: args.md_multicast,
        md_snapshot_listen: args.md_snapshot,
        md_retransmit_listen: args.md_retransmit,
        history: args.no_history.then_some(false),
        node: args.node,
    };
    if let Some(nodes) = args.cluster {
        return crate::cluster::launch(&crate::cluster::Local {
            nodes,
            data_dir: overrides.data_dir.clone().unwrap_or_else(|| PathBuf::from("./data")),
            demo: args.demo,
            durability: args.durability,
            no_history: args.no_history,
        });
    }
    let config = ServeConfig::load(args.config.as_deref(), std::env::vars(), &overrides)
        .map_err(|error| error.to_string())?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .thread_name("bourse-gateway")
        .build()
        .map_err(|error| format!("cannot start the async runtime: {error}"))?;
    runtime.block_on(async move {
        let signals = StopSignals::install()?;
        let mut server =
            bourse_server::start_with_sql(config, args.demo, crate::history::sql_factory())
                .await
                .map_err(|error| error.to_string())?;
        print_notes(&server.notes);
        let stop = server.take_stop();
        tokio::spawn(async move {
            signals.wait().await;
            eprintln!("bourse: stopping (finishing requests in progress, then a snapshot)");
            if let Some(stop) = stop {
                let _ = stop.send(());
            }
        });
        server.wait().await.map_err(|error| error.to_string())?;
        eprintln!("bourse: stopped");
        Ok(())
    })
}

/// Signal handlers installed before the banner is printed, so that a SIGTERM sent as soon
/// as the server says it serves is a clean stop, never the default (an abrupt end).
struct StopSignals {
    terminate: tokio::signal::unix::Signal,
    interrupt: tokio::signal::unix::Signal,
}

impl StopSignals {
    fn install() -> Result<StopSignals, String> {
        use tokio::signal::unix::{signal, SignalKind};
        let install =
            |kind| signal(kind).map_err(|error| format!("cannot handle signals: {error}"));
        Ok(StopSignals {
            terminate: install(SignalKind::terminate())?,
            interrupt: install(SignalKind::interrupt())?,
        })
    }

    async fn wait(mut self) {
        tokio::select! {
            _ = self.terminate.recv() => {}
            _ = self.interrupt.recv() => {}
        }
    }
}

fn print_notes(notes: &StartNotes) {
    println!(
        "bourse: serving REST and WebSocket on http://{} (ws://{}/v1/ws)",
        notes.http, notes.http
    );
    println!("bourse: serving binary order entry on tcp://{}", notes.tcp);
    println!(
        "bourse: serving FIX 4.4 order entry on tcp://{} (TargetCompID {})",
        notes.fix, notes.fix_comp_id
    );
    if let Some(feed) = &notes.market_data {
        println!(
            "bourse: market data (session {}) to udp://{} via {}; snapshots on tcp://{}, retransmissions on udp://{}",
            feed.session, feed.multicast, feed.interface, feed.snapshot, feed.retransmit
        );
    }
    println!(
        "bourse: data in {} (recovered up to command {})",
        notes.data_dir.display(),
        notes.recovered_seq
    );
    match &notes.first_start {
        Some(first) => println!(
            "bourse: first start: the admin API key {} was written to {}",
            first.admin_key.id,
            first.admin_key_file.display()
        ),
        None => println!("bourse: the admin API key is in {}", notes.admin_key_file.display()),
    }
    for (account, key, secret) in &notes.demo_keys {
        let password = notes
            .demo_passwords
            .iter()
            .find(|(demo_account, _)| demo_account == account)
            .map_or(String::new(), |(_, password)| format!(" password {password}"));
        println!("bourse: demo account {account}: key {key} secret {}{password}", secret.expose());
    }
    if !notes.demo_keys.is_empty() {
        println!(
            "bourse: the trading screen: http://{}/ (log in with a key and secret above)",
            notes.http
        );
        println!("bourse: try the examples in docs/api.md");
    }
}
