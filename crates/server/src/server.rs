//! Starting and stopping the whole server: the key store, the engine (recovered from the
//! data directory), the listeners, and the order of things on shutdown: stop taking
//! requests, let those in progress finish, stop the engine (which syncs and writes its
//! snapshot), exit.

use crate::services::clearing::risk::{MaintenanceShare, RiskProcess};
use crate::services::clearing::settings::FuturesSettings;
use crate::services::clearing::settlement::DailyTime;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;

use bourse_engine::{Engine, EngineConfig};
use tokio::net::TcpListener;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

use crate::cluster::NodeDirectory;
use crate::config::{ConfigError, ServeConfig};
use crate::directory::Directory;
use crate::gateways::router;
use crate::keys::{FirstStart, KeyError, KeyStore, Secret};
use crate::link::EngineLink;
use crate::metrics::{EngineFigures, FeedFigures, Metrics};
use crate::port::auth::Authenticator;
use crate::port::membership::Membership;
use crate::port::operator::Operator;
use crate::port::orders::OrderEntry;
use crate::port::passwords::Passwords;
use crate::port::policy::{LoginLimits, Policy, PolicyEvents, Rate};
use crate::port::queries::Queries;
use crate::port::records::{KeyChanges, ReplicatedRecords, SettingsChanges};
use crate::port::state::AppState;
use crate::port::tokens::Tokens;
use crate::services::candles::CandleService;
use crate::services::feed::hub::{Hub, HubServices};
use crate::services::feed::market::Market;
use crate::services::feed::tap::tap_channel;

/// Why the server could not start (or stopped badly). Each has a clear message; the
/// command line prints it and exits non-zero.
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    #[error(transparent)]
    Config(#[from] ConfigError),
    #[error("the data directory {path} is not usable: {source}")]
    DataDir { path: PathBuf, source: std::io::Error },
    #[error("the key store cannot be opened: {0}")]
    Keys(#[from] KeyError),
    #[error("the engine cannot start: {0}")]
    Engine(#[from] bourse_engine::StartError),
    #[error("cannot listen on {address}: {source}")]
    Listen { address: SocketAddr, source: std::io::Error },
    #[error("the demo setup failed: {0}")]
    Demo(String),
    #[error("futures settings: {0}")]
    Futures(String),
    #[error("the engine stopped with a failure: {0}")]
    EngineFailed(String),
    #[error("internal: {0}")]
    Internal(String),
}

/// How long a stopping server waits for the requests in progress to be answered.
const DRAIN_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(10);

/// What the operator should be told at start.
#[derive(Debug)]
pub struct StartNotes {
    pub http: SocketAddr,
    pub tcp: SocketAddr,
    /// FIX order entry's address, and the CompID it answers as.
    pub fix: SocketAddr,
    pub fix_comp_id: String,
    pub data_dir: PathBuf,
    /// Set on the first start: the admin key was made and written there.
    pub first_start: Option<FirstStart>,
    pub admin_key_file: PathBuf,
    /// `--demo`: the demo accounts' keys.
    pub demo_keys: Vec<(String, String, Secret)>,
    /// `--demo`: the demo accounts' passwords, (account, password), while they are the
    /// demo's (an operator's change is not shown).
    pub demo_passwords: Vec<(String, String)>,
    pub recovered_seq: bourse_core::Seq,
    /// Where the market-data feed goes and its recovery services listen, when it is on.
    pub market_data: Option<MarketDataNotes>,
}

#[derive(Clone, Debug)]
pub struct MarketDataNotes {
    pub multicast: SocketAddr,
    pub interface: std::net::Ipv4Addr,
    pub snapshot: SocketAddr,
    pub retransmit: SocketAddr,
    pub session: String,
}

/// Binds the feed's recovery services and starts the publisher thread.
async fn start_market_data(
    state: &Arc<AppState>,
    config: &crate::config::MarketDataConfig,
    (sender, receiver, figures): (
        std::sync::mpsc::Sender<crate::services::multicast::Input>,
        std::sync::mpsc::Receiver<crate::services::multicast::Input>,
        Arc<FeedFigures>,
    ),
    cluster: Option<(u64, Arc<ReplicatedRecords>)>,
    stopped: &tokio::sync::watch::Receiver<bool>,
) -> Result<(std::thread::JoinHandle<()>, MarketDataNotes), ServeError> {
    let listen_error =
        |address: SocketAddr| move |source: std::io::Error| ServeError::Listen { address, source };
    let snapshots = TcpListener::bind(config.snapshot_listen)
        .await
        .map_err(listen_error(config.snapshot_listen))?;
    let snapshot = snapshots.local_addr().map_err(listen_error(config.snapshot_listen))?;
    let retransmissions = tokio::net::UdpSocket::bind(config.retransmit_listen)
        .await
        .map_err(listen_error(config.retransmit_listen))?;
    let retransmit =
        retransmissions.local_addr().map_err(listen_error(config.retransmit_listen))?;
    // One node's session is its own; a cluster's is the cluster's, whose numbering the
    // log's anchors carry from node to node.
    let (session, cluster) = match cluster {
        None => {
            let now = bourse_protocol::signing::now_ms();
            (crate::services::multicast::session_name(b'B', now), None)
        }
        Some((cluster_id, replicated)) => {
            replicated.connect_feed(sender.clone());
            let propose: crate::services::multicast::cluster::ProposeAnchor =
                Box::new(move |anchor| replicated.propose_anchor(anchor));
            (
                crate::services::multicast::cluster::first_session(cluster_id),
                Some(crate::services::multicast::cluster::ClusterFeed::new(propose)),
            )
        }
    };
    let link = Arc::clone(&state.link);
    let reference = state.directory.reference();
    let thread = crate::services::multicast::spawn(
        link,
        reference,
        config,
        receiver,
        (session, figures, cluster),
    )
    .map_err(listen_error(config.multicast))?;
    tokio::spawn(crate::services::multicast::services::serve_snapshots(
        snapshots,
        sender.clone(),
        stopped.clone(),
    ));
    tokio::spawn(crate::services::multicast::services::serve_retransmissions(
        retransmissions,
        sender,
        stopped.clone(),
    ));
    let notes = MarketDataNotes {
        multicast: config.multicast,
        interface: config.interface,
        snapshot,
        retransmit,
        session: String::from_utf8_lossy(&session).trim_end().to_string(),
    };
    Ok((thread, notes))
}

pub struct RunningServer {
    pub notes: StartNotes,
    stop: Option<oneshot::Sender<()>>,
    task: JoinHandle<Result<(), ServeError>>,
}

impl RunningServer {
    pub fn http_address(&self) -> SocketAddr {
        self.notes.http
    }

    /// Stops taking requests, finishes those in progress, stops the engine.
    pub async fn shutdown(mut self) -> Result<(), ServeError> {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        self.wait().await
    }

    /// Waits until the server stops (after `shutdown`, or a failure).
    pub async fn wait(self) -> Result<(), ServeError> {
        self.task.await.map_err(|error| ServeError::Internal(error.to_string()))?
    }

    /// A handle that stops the server when fired (for signal handlers).
    pub fn take_stop(&mut self) -> Option<oneshot::Sender<()>> {
        self.stop.take()
    }
}

/// Starts the server: recovers the engine, binds the port, and serves until stopped.
pub async fn start(config: ServeConfig, demo: bool) -> Result<RunningServer, ServeError> {
    start_with_sql(config, demo, None).await
}

/// What clearing futures needs at start: the operator's contract settings, the
/// maintenance share the risk process applies and the daily settlement's time, read
/// from the configuration once (a bad value stops the start with its reason).
struct Clearing {
    settings: Arc<FuturesSettings>,
    maintenance_share: MaintenanceShare,
    settlement_time: Option<DailyTime>,
}

impl Clearing {
    fn read(config: &ServeConfig, server_dir: &std::path::Path) -> Result<Clearing, ServeError> {
        let settings = Arc::new(
            FuturesSettings::open(server_dir)
                .map_err(|error| ServeError::Futures(error.to_string()))?,
        );
        let futures = &config.futures;
        let maintenance_share =
            MaintenanceShare::parse(&futures.maintenance_share).ok_or_else(|| {
                ServeError::Futures(format!(
                    "maintenance_share {:?} is not a decimal share: more than 0, at most 10",
                    futures.maintenance_share
                ))
            })?;
        let settlement_time = match &futures.settlement_time {
            None => None,
            Some(text) => Some(
                DailyTime::parse(text, futures.settlement_utc_offset_minutes).ok_or_else(|| {
                    ServeError::Futures(format!(
                        "settlement_time {text:?} is not HH:MM (offset -720 to 840 minutes)"
                    ))
                })?,
            ),
        };
        Ok(Clearing { settings, maintenance_share, settlement_time })
    }

    /// Starts the risk process (every `risk_interval_ms`; none at 0) and the daily
    /// settlement, both until `stopped` (in a cluster, both act only while the node
    /// leads).
    fn start(
        self,
        link: &Arc<EngineLink>,
        changes: &Arc<SettingsChanges>,
        risk_interval_ms: u64,
        stopped: &tokio::sync::watch::Receiver<bool>,
    ) {
        if risk_interval_ms > 0 {
            let risk = RiskProcess::new(Arc::clone(link), self.maintenance_share);
            let interval = std::time::Duration::from_millis(risk_interval_ms);
            tokio::spawn(risk.run(interval, stopped.clone()));
        }
        if let Some(time) = self.settlement_time {
            tokio::spawn(crate::services::clearing::settlement::run_daily(
                Arc::clone(link),
                Arc::clone(changes),
                time,
                stopped.clone(),
            ));
        }
    }
}

/// A listener on `address`, and the address it got (the port, when 0 was asked).
async fn bind(address: SocketAddr) -> Result<(TcpListener, SocketAddr), ServeError> {
    let listener = TcpListener::bind(address)
        .await
        .map_err(|source| ServeError::Listen { address, source })?;
    let bound = listener.local_addr().map_err(|source| ServeError::Listen { address, source })?;
    Ok((listener, bound))
}

/// `start`, with SQL over the history (`/v1/admin/sql`) from `sql`.
pub async fn start_with_sql(
    config: ServeConfig,
    demo: bool,
    sql: Option<crate::services::history_access::SqlFactory>,
) -> Result<RunningServer, ServeError> {
    let durability = config.durability()?;
    // The history follows the journal: none without one.
    let history_stats = (config.history.enabled && durability != bourse_engine::Durability::None)
        .then(|| Arc::new(bourse_history::HistoryStats::default()));
    std::fs::create_dir_all(&config.data_dir)
        .and_then(|()| check_writable(&config.data_dir))
        .map_err(|source| ServeError::DataDir { path: config.data_dir.clone(), source })?;
    let server_dir = config.data_dir.join("server");
    let master_file = config.auth.master_key_file.as_deref();
    let (keys, first_start) = match config.cluster {
        Some(_) => KeyStore::open_for_cluster(&server_dir, master_file)?,
        None => KeyStore::open_with_master(
            &server_dir,
            master_file,
            bourse_protocol::signing::now_ms(),
        )?,
    };
    let keys = Arc::new(keys);
    let clearing = Clearing::read(&config, &server_dir)?;
    // In a cluster the changes of the key store and the futures settings are records
    // of the log.
    let replicated = config
        .cluster
        .as_ref()
        .map(|_| ReplicatedRecords::new(Arc::clone(&keys), Arc::clone(&clearing.settings)));
    let (key_changes, futures_settings) = match &replicated {
        Some(replicated) => (
            KeyChanges::replicated(Arc::clone(replicated)),
            SettingsChanges::replicated(Arc::clone(replicated)),
        ),
        None => (
            KeyChanges::local(Arc::clone(&keys)),
            SettingsChanges::local(Arc::clone(&clearing.settings)),
        ),
    };
    let (key_changes, futures_settings) = (Arc::new(key_changes), Arc::new(futures_settings));
    let mut engine_config = EngineConfig::new(&config.data_dir);
    engine_config.durability = durability;
    engine_config.track_activity = true;
    engine_config.journal_needed_from =
        history_stats.as_ref().map(|stats| Arc::clone(&stats.needed_from));
    engine_config.cluster = config.cluster.as_ref().map(|cluster| {
        let mut settings = crate::cluster::engine_settings(cluster);
        settings.records = replicated.clone().map(|replicated| {
            bourse_engine::SharedRecords(replicated as Arc<dyn bourse_engine::Records>)
        });
        settings
    });
    let directory = config.cluster.as_ref().map(NodeDirectory::new).unwrap_or_default();
    let engine = tokio::task::spawn_blocking(move || Engine::start(engine_config))
        .await
        .map_err(|error| ServeError::Internal(error.to_string()))??;
    let recovered_seq = engine.start_report().last_seq;
    let (listener, http) = bind(config.http.listen).await?;
    let (tcp_listener, tcp) = bind(config.tcp.listen).await?;
    let (fix_listener, fix) = bind(config.fix.listen).await?;
    let link = Arc::new(EngineLink::open(&engine, config.limits.in_flight_max, directory));
    if let (Some(replicated), Some(proposer)) = (&replicated, engine.record_proposer()) {
        replicated.connect(proposer, Arc::clone(&link));
    }
    let membership = engine
        .record_proposer()
        .map(|proposer| Arc::new(Membership::new(proposer, Arc::clone(&link))));
    let directory = Arc::new(Directory::new(Arc::clone(&link)));
    // Candles, whether or not the multicast feed runs.
    let (candles, candles_thread) = CandleService::start(Arc::clone(&directory))
        .map_err(|error| ServeError::Internal(format!("the candle service: {error}")))?;
    let market_data = &config.marketdata;
    let (md_sender, md_receiver) = match market_data.enabled {
        true => {
            let (sender, receiver) = std::sync::mpsc::channel();
            (Some(sender), Some(receiver))
        }
        false => (None, None),
    };
    // The tap's releases go to the hub, to the candle service, and to the feed when it
    // is on (unbounded: neither loses anything; a service that is gone is stopping).
    let md_releases = md_sender.clone().map(|publisher| -> crate::services::feed::tap::AlsoTo {
        Box::new(move |released| {
            let _ = publisher.send(crate::services::multicast::Input::Released(released));
        })
    });
    let also_to = std::iter::once(candles.releases()).chain(md_releases).collect();
    let (tap_sink, tap_receiver, tap_overflowed) = tap_channel(also_to);
    let feed_figures = Arc::new(FeedFigures::default());
    let tap = engine
        .open_tap(Arc::new(tap_sink))
        .ok_or_else(|| ServeError::Internal("the engine's tap is taken".to_string()))?;
    let (hub_sender, hub_receiver) = tokio::sync::mpsc::channel(1_024);
    let authenticator = Authenticator::new(config.auth.timestamp_window_ms);
    let metrics = Arc::new(Metrics::new(
        EngineFigures::new(Arc::clone(&link)),
        md_sender.is_some().then(|| Arc::clone(&feed_figures)),
        history_stats.clone(),
    ));
    let policy = Arc::new(Policy::new(
        Rate::new(config.limits.requests_per_second, config.limits.requests_burst),
        config.limits.connections_per_key,
        LoginLimits::new(
            config.auth.login_failures_free,
            config.auth.login_failures_lock,
            std::time::Duration::from_secs(config.auth.login_lock_s),
        ),
        Arc::clone(&metrics) as Arc<dyn PolicyEvents>,
    ));
    let state = Arc::new(AppState {
        entry: Arc::new(OrderEntry::new(
            Arc::clone(&link),
            Arc::clone(&directory),
            Arc::clone(&policy),
        )),
        operator: Arc::new(Operator::new(
            Arc::clone(&link),
            Arc::clone(&directory),
            Arc::clone(&futures_settings),
        )),
        queries: Arc::new(Queries::new(
            Arc::clone(&link),
            Arc::clone(&directory),
            Arc::clone(&policy),
        )),
        link,
        directory,
        market: Arc::new(std::sync::Mutex::new(Market::default())),
        metrics: Arc::clone(&metrics),
        hub: hub_sender,
        passwords: Arc::new(Passwords::with_changes(Arc::clone(&key_changes))),
        key_changes,
        tokens: Arc::new(Tokens::new(Arc::clone(&keys))),
        keys: Arc::clone(&keys),
        auth: authenticator,
        policy: Arc::clone(&policy),
        limits: config.limits.clone(),
        login_timeout: std::time::Duration::from_millis(config.auth.login_timeout_ms),
        ready: std::sync::atomic::AtomicBool::new(false),
        candles: candles.clone(),
        market_data: md_sender.clone(),
        history: std::sync::OnceLock::new(),
        futures: Arc::clone(&futures_settings),
        membership,
    });
    let (stop_duties, stopped_duties) = tokio::sync::watch::channel(false);
    let history_thread = match history_stats {
        Some(stats) => start_history(&config, &engine, &state, stats, sql).await,
        None => None,
    };
    let hub = Hub::new(hub_services(&state), tap_overflowed);
    tokio::spawn(hub.run(tap_receiver, hub_receiver));
    state
        .directory
        .refresh_reference()
        .await
        .map_err(|error| ServeError::Internal(error.message))?;
    let duties = LeaderDuties {
        open_orders_per_account: config.limits.open_orders_per_account,
        demo,
        futures: Arc::clone(&futures_settings),
    };
    let (demo_keys, demo_passwords) = match &config.cluster {
        None => {
            let shown = duties.take_up(&state).await?;
            shown.map_or((Vec::new(), Vec::new()), |shown| (shown.keys, shown.passwords))
        }
        Some(_) => {
            tokio::spawn(lead_when_leader(Arc::clone(&state), duties, stopped_duties.clone()));
            match demo {
                // Whichever node leads sets the demo up; every node shows it.
                true => {
                    let shown = wait_for_demo(&state).await?;
                    (shown.keys, shown.passwords)
                }
                false => (Vec::new(), Vec::new()),
            }
        }
    };
    state.ready.store(true, std::sync::atomic::Ordering::SeqCst);
    tracing::info!(%http, %tcp, data_dir = %config.data_dir.display(), recovered_seq = recovered_seq.0, "serving");
    let (stop_tcp, tcp_stopped) = tokio::sync::watch::channel(false);
    let (md_thread, md_notes) = match (md_sender, md_receiver) {
        (Some(sender), Some(receiver)) => {
            let (thread, notes) = start_market_data(
                &state,
                market_data,
                (sender.clone(), receiver, Arc::clone(&feed_figures)),
                config
                    .cluster
                    .as_ref()
                    .zip(replicated.clone())
                    .map(|(cluster, replicated)| (cluster.cluster_id, replicated)),
                &tcp_stopped,
            )
            .await?;
            (Some((thread, sender)), Some(notes))
        }
        _ => (None, None),
    };
    tokio::spawn(crate::gateways::tcp::serve(
        tcp_listener,
        Arc::clone(&state),
        tcp_stopped.clone(),
    ));
    let fix_gateway = crate::gateways::fix::Gateway::new(&config.fix, &config.data_dir);
    let (fix_state, fix_stopped) = (Arc::clone(&state), tcp_stopped.clone());
    tokio::spawn(async move {
        // The stored sessions follow their accounts before any Logon is taken.
        let resumed = Arc::clone(&fix_gateway);
        crate::gateways::fix::resume_sessions(resumed, Arc::clone(&fix_state), fix_stopped.clone())
            .await;
        crate::gateways::fix::serve(fix_listener, fix_gateway, fix_state, fix_stopped).await
    });
    clearing.start(&state.link, &state.futures, config.futures.risk_interval_ms, &tcp_stopped);
    let (stop, stopped) = oneshot::channel::<()>();
    let router = router::router(Arc::clone(&state));
    let (hand_off, http_drained) =
        crate::gateways::rest::pipelined::listen(listener, Arc::clone(&state), tcp_stopped.clone())
            .map_err(|source| ServeError::Listen { address: http, source })?;
    let task = tokio::spawn(async move {
        let served = axum::serve(hand_off, router)
            .with_graceful_shutdown(async move {
                let _ = stopped.await;
                let _ = stop_tcp.send(true);
                let _ = stop_duties.send(true);
                // Closing the tap ends the hub, which closes every WebSocket connection
                // (`shutting_down`), so that the drain below does not wait for them.
                drop(tap);
            })
            .await;
        // The pipelined order-entry loops finish the requests they took.
        let _ = tokio::time::timeout(DRAIN_TIMEOUT, http_drained.wait()).await;
        state.ready.store(false, std::sync::atomic::Ordering::SeqCst);
        tracing::info!("requests drained; stopping the engine");
        // (The last reference may own the history's SQL service, whose runtime must not
        // be dropped on an async worker.)
        let _ = tokio::task::spawn_blocking(move || drop(state)).await;
        let stopped_engine = tokio::task::spawn_blocking(move || engine.shutdown())
            .await
            .map_err(|error| ServeError::Internal(error.to_string()))?;
        served.map_err(|error| ServeError::Internal(error.to_string()))?;
        if let Some(history) = history_thread {
            // After the engine's last sync: the history commits everything journaled.
            let _ = tokio::task::spawn_blocking(move || history.stop()).await;
        }
        // After the engine's last release: the candle service and the feed end.
        candles.stop();
        let _ = tokio::task::spawn_blocking(move || candles_thread.join()).await;
        if let Some((thread, publisher)) = md_thread {
            // After the engine's last release: the feed ends its session.
            let _ = publisher.send(crate::services::multicast::Input::Stop);
            let _ = tokio::task::spawn_blocking(move || thread.join()).await;
        }
        match &stopped_engine {
            Ok(()) => tracing::info!("engine stopped cleanly"),
            Err(failure) => tracing::error!(%failure, "the engine had stopped on a failure"),
        }
        stopped_engine.map_err(ServeError::EngineFailed)
    });
    let notes = StartNotes {
        http,
        tcp,
        fix,
        fix_comp_id: config.fix.comp_id.clone(),
        data_dir: config.data_dir.clone(),
        first_start,
        admin_key_file: server_dir.join(crate::keys::ADMIN_KEY_FILE),
        demo_keys,
        demo_passwords,
        recovered_seq,
        market_data: md_notes,
    };
    Ok(RunningServer { notes, stop: Some(stop), task })
}

/// What the hub takes of the server's services: the `candles` channels' subscriptions go
/// to the candle service, the multicast feed's to its publisher when it is on.
fn hub_services(state: &AppState) -> HubServices {
    let market_data =
        state.market_data.clone().map(|publisher| -> crate::services::feed::channel::ForwardTo {
            Box::new(move |command| {
                let _ = publisher.send(crate::services::multicast::Input::Channels(command));
            })
        });
    HubServices {
        link: Arc::clone(&state.link),
        directory: Arc::clone(&state.directory),
        market: Arc::clone(&state.market),
        metrics: Arc::clone(&state.metrics),
        candles: state.candles.channels(),
        market_data,
    }
}

/// Opens the history and starts its thread. A history that does not open is reported
/// and left off: trading goes on, the journal keeps everything (and is not pruned
/// meanwhile), and the next start catches up.
async fn start_history(
    config: &ServeConfig,
    engine: &bourse_engine::Engine,
    state: &Arc<AppState>,
    stats: Arc<bourse_history::HistoryStats>,
    sql: Option<crate::services::history_access::SqlFactory>,
) -> Option<crate::services::history_access::HistoryThread> {
    let history_config = config.history.clone();
    let data_dir = config.data_dir.clone();
    let durable = engine.durable_watermark();
    let started = tokio::task::spawn_blocking(move || {
        crate::services::history_access::start(&history_config, &data_dir, stats, durable, sql)
    })
    .await;
    match started {
        Ok(Ok((thread, access))) => {
            let _ = state.history.set(Arc::new(access));
            Some(thread)
        }
        Ok(Err(error)) => {
            tracing::error!(%error, "the history is off until this is fixed");
            None
        }
        Err(error) => {
            tracing::error!(%error, "the history did not start");
            None
        }
    }
}

/// What the node that takes commands does when it starts (one node) or whenever it
/// becomes the leader (a cluster): the venue's limits, settling what a crash cut off
/// (a settlement's ratio margin), and the demo.
struct LeaderDuties {
    open_orders_per_account: u64,
    demo: bool,
    futures: Arc<SettingsChanges>,
}

impl LeaderDuties {
    /// Does them; with `demo`, what the demo shows.
    async fn take_up(&self, state: &AppState) -> Result<Option<crate::demo::Demo>, ServeError> {
        apply_limits(state, self.open_orders_per_account).await?;
        crate::services::clearing::settlement::reconcile_ratio_margins(
            &state.link,
            self.futures.settings(),
        )
        .await;
        match self.demo {
            true => crate::demo::set_up(state).await.map(Some).map_err(ServeError::Demo),
            false => Ok(None),
        }
    }
}

/// How often a node of a cluster looks whether it leads.
const LEADERSHIP_POLL: std::time::Duration = std::time::Duration::from_millis(50);

/// A node of a cluster: takes up the leader's duties each time it becomes the leader,
/// until `stopped`.
async fn lead_when_leader(
    state: Arc<AppState>,
    duties: LeaderDuties,
    mut stopped: tokio::sync::watch::Receiver<bool>,
) {
    let mut leading = false;
    loop {
        tokio::select! {
            _ = tokio::time::sleep(LEADERSHIP_POLL) => {}
            _ = stopped.changed() => {}
        }
        if *stopped.borrow() {
            return;
        }
        let leads = state.link.leads().is_ok();
        if leads && !leading {
            match duties.take_up(&state).await {
                Ok(_) => tracing::info!("this node leads the cluster: its duties are taken up"),
                Err(error) => {
                    // Tried again at the next look while it still leads.
                    tracing::warn!(%error, "the leader's duties failed");
                    continue;
                }
            }
        }
        leading = leads;
    }
}

/// How long a node of a cluster started with `--demo` waits for the demo to be set up.
const DEMO_WAIT: std::time::Duration = std::time::Duration::from_secs(60);

/// Waits until the demo is set up (by whichever node leads) and what it shows.
async fn wait_for_demo(state: &AppState) -> Result<crate::demo::Demo, ServeError> {
    let deadline = tokio::time::Instant::now() + DEMO_WAIT;
    loop {
        if let Some(shown) = crate::demo::shown(state).await {
            return Ok(shown);
        }
        if tokio::time::Instant::now() >= deadline {
            return Err(ServeError::Demo(format!(
                "the cluster did not set the demo up within {} s (is a majority of its nodes up?)",
                DEMO_WAIT.as_secs()
            )));
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
}

/// The venue's open-orders limit is a journaled setting (so that every replay rejects
/// the same orders); the configured one is set when it differs.
async fn apply_limits(state: &AppState, open_orders_per_account: u64) -> Result<(), ServeError> {
    let current = state
        .link
        .read(|venue| venue.open_orders_limit())
        .await
        .map_err(|error| ServeError::Internal(error.to_string()))?;
    if current == open_orders_per_account {
        return Ok(());
    }
    let command = bourse_core::Command::SetLimits { open_orders_per_account };
    let reply = state
        .link
        .submit(&command)
        .await
        .map_err(|error| ServeError::Internal(error.to_string()))?;
    match reply.events().first() {
        Some(bourse_core::Event::Accepted { .. }) => {
            tracing::info!(open_orders_per_account, previous = current, "venue limits set");
            Ok(())
        }
        other => Err(ServeError::Internal(format!("the venue refused its limits: {other:?}"))),
    }
}

/// A data directory we cannot write to fails now, with its reason, not at the first
/// order.
fn check_writable(directory: &std::path::Path) -> std::io::Result<()> {
    let probe = directory.join(".bourse-write-check");
    std::fs::write(&probe, b"")?;
    std::fs::remove_file(&probe)
}
