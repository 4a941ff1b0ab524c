//! Prometheus metrics at `/metrics`: what the gateways count as they go (requests by
//! route and status with their latency, connections by protocol, commands, rejects by
//! reason and trades as the feed sees them), and the engine's own counters read at
//! each scrape (journal syncs and their latency, batch sizes, the intake queue,
//! snapshots). Counting never blocks a request: the families are atomics.

use std::sync::Arc;

use axum::extract::{MatchedPath, Request, State};
use axum::middleware::Next;
use axum::response::Response;
use bourse_engine::StatsSnapshot;
use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeLabelSet, EncodeMetric, NoLabelSet};
use prometheus_client::metrics::counter::{ConstCounter, Counter};
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::{ConstGauge, Gauge};
use prometheus_client::metrics::histogram::{exponential_buckets, Histogram};
use prometheus_client::metrics::MetricType;
use prometheus_client::registry::Registry;

use crate::link::EngineLink;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct RequestLabels {
    pub protocol: &'static str,
    pub route: String,
    pub status: u16,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct RouteLabels {
    pub protocol: &'static str,
    pub route: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ProtocolLabels {
    pub protocol: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ResultLabels {
    pub result: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct NodeLabels {
    pub node: u64,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ReasonLabels {
    pub reason: &'static str,
}

/// What the market-data feed has done so far, for `/metrics` and the tests (the
/// publisher, `md`, counts; a scrape reads).
#[derive(Debug, Default)]
pub struct FeedFigures {
    pub messages: std::sync::atomic::AtomicU64,
    pub packets: std::sync::atomic::AtomicU64,
    pub send_errors: std::sync::atomic::AtomicU64,
    pub inconsistencies: std::sync::atomic::AtomicU64,
    pub retransmit_requests: std::sync::atomic::AtomicU64,
    pub snapshots: std::sync::atomic::AtomicU64,
    /// The last command the feed (and the WebSocket channels it serves) has applied.
    pub applied_seq: std::sync::atomic::AtomicU64,
    /// In a cluster: the leader's anchors this node's numbering agreed with, and those
    /// it did not (its feed stopped).
    pub anchors_checked: std::sync::atomic::AtomicU64,
    pub anchor_mismatches: std::sync::atomic::AtomicU64,
    /// 1 while this node sends the feed to the group (always alone; the leader in a
    /// cluster).
    pub sending: std::sync::atomic::AtomicU64,
}

fn latency_histogram() -> Histogram {
    // 50 µs to about 1.6 s.
    Histogram::new(exponential_buckets(0.000_05, 2.0, 16))
}

pub struct Metrics {
    registry: Registry,
    pub requests: Family<RequestLabels, Counter>,
    pub request_seconds: Family<RouteLabels, Histogram, fn() -> Histogram>,
    pub connections: Family<ProtocolLabels, Gauge>,
    pub commands: Family<ResultLabels, Counter>,
    pub rejects: Family<ReasonLabels, Counter>,
    pub trades: Counter,
    /// Accounts whose password logins were locked after failures in a row.
    pub login_locks: Counter,
}

impl std::fmt::Debug for Metrics {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter.write_str("Metrics")
    }
}

impl Metrics {
    /// The metrics of a server whose engine the session `engine` reaches.
    pub fn new(
        engine: EngineFigures,
        feed: Option<Arc<FeedFigures>>,
        history: Option<Arc<bourse_history::HistoryStats>>,
    ) -> Metrics {
        let mut registry = Registry::with_prefix("bourse");
        let requests = Family::<RequestLabels, Counter>::default();
        registry.register(
            "requests",
            "Requests answered, by protocol, route and status",
            requests.clone(),
        );
        let request_seconds =
            Family::<RouteLabels, Histogram, fn() -> Histogram>::new_with_constructor(
                latency_histogram,
            );
        registry.register(
            "request_seconds",
            "Time to answer a request, by protocol and route",
            request_seconds.clone(),
        );
        let connections = Family::<ProtocolLabels, Gauge>::default();
        registry.register(
            "connections",
            "Open connections by protocol (http: requests in progress)",
            connections.clone(),
        );
        let commands = Family::<ResultLabels, Counter>::default();
        registry.register(
            "commands",
            "Commands applied (all gateways), accepted or rejected",
            commands.clone(),
        );
        let rejects = Family::<ReasonLabels, Counter>::default();
        registry.register("rejects", "Rejected commands by reason", rejects.clone());
        let trades = Counter::default();
        registry.register("trades", "Trades", trades.clone());
        let login_locks = Counter::default();
        registry.register(
            "login_locks",
            "Accounts whose password logins were locked after too many failures in a row",
            login_locks.clone(),
        );
        registry.register_collector(Box::new(engine));
        if let Some(feed) = feed {
            registry.register_collector(Box::new(FeedCollector(feed)));
        }
        if let Some(history) = history {
            registry.register_collector(Box::new(HistoryCollector(history)));
        }
        Metrics {
            registry,
            requests,
            request_seconds,
            connections,
            commands,
            rejects,
            trades,
            login_locks,
        }
    }

    pub fn render(&self) -> String {
        let mut text = String::new();
        // Writing to a String cannot fail.
        let _ = prometheus_client::encoding::text::encode(&mut text, &self.registry);
        text
    }

    pub fn connection_opened(&self, protocol: &'static str) {
        self.connections.get_or_create(&ProtocolLabels { protocol }).inc();
    }

    pub fn connection_closed(&self, protocol: &'static str) {
        self.connections.get_or_create(&ProtocolLabels { protocol }).dec();
    }

    /// The counter and latency histogram of one protocol, route and status, looked up
    /// once: a connection that answers many requests keeps them (counting through
    /// them is two atomic additions, no label lookup).
    pub fn route(&self, protocol: &'static str, route: &str, status: u16) -> RouteMetrics {
        let labels = RequestLabels { protocol, route: route.to_string(), status };
        let requests = self.requests.get_or_create(&labels).clone();
        let seconds = self
            .request_seconds
            .get_or_create(&RouteLabels { protocol, route: route.to_string() })
            .clone();
        RouteMetrics { requests, seconds }
    }

    pub fn request(&self, protocol: &'static str, route: &str, status: u16, seconds: f64) {
        self.requests
            .get_or_create(&RequestLabels { protocol, route: route.to_string(), status })
            .inc();
        self.request_seconds
            .get_or_create(&RouteLabels { protocol, route: route.to_string() })
            .observe(seconds);
    }
}

/// A connection's `/metrics` handles by route and status, each looked up once (a
/// connection answers few distinct pairs, so a short list beats a map).
#[derive(Default)]
pub struct RouteCache {
    known: Vec<(&'static str, u16, RouteMetrics)>,
}

impl RouteCache {
    /// Counts one answered request of `protocol`'s `route` with `status`.
    pub fn observe(
        &mut self,
        metrics: &Metrics,
        (protocol, route): (&'static str, &'static str),
        status: u16,
        seconds: f64,
    ) {
        let known = self
            .known
            .iter()
            .find(|(known, known_status, _)| *known == route && *known_status == status);
        let handles = match known {
            Some((_, _, handles)) => handles,
            None => {
                self.known.push((route, status, metrics.route(protocol, route, status)));
                match self.known.last() {
                    Some((_, _, handles)) => handles,
                    None => return,
                }
            }
        };
        handles.observe(seconds);
    }
}

/// What `Metrics::route` returns: counts one answered request.
#[derive(Clone, Debug)]
pub struct RouteMetrics {
    requests: Counter,
    seconds: Histogram,
}

impl RouteMetrics {
    pub fn observe(&self, seconds: f64) {
        self.requests.inc();
        self.seconds.observe(seconds);
    }
}

/// The engine's counters, read at each scrape.
pub struct EngineFigures {
    link: Arc<EngineLink>,
}

impl EngineFigures {
    pub fn new(link: Arc<EngineLink>) -> EngineFigures {
        EngineFigures { link }
    }
}

impl std::fmt::Debug for EngineFigures {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter.write_str("EngineFigures")
    }
}

fn counter(
    encoder: &mut DescriptorEncoder,
    name: &str,
    help: &str,
    value: u64,
) -> Result<(), std::fmt::Error> {
    let metric = ConstCounter::new(value);
    metric.encode(encoder.encode_descriptor(name, help, None, metric.metric_type())?)
}

fn gauge(
    encoder: &mut DescriptorEncoder,
    name: &str,
    help: &str,
    value: i64,
) -> Result<(), std::fmt::Error> {
    let metric = ConstGauge::new(value);
    metric.encode(encoder.encode_descriptor(name, help, None, metric.metric_type())?)
}

/// The engine's power-of-two sync buckets as a Prometheus histogram in seconds: bucket
/// `i` holds syncs up to `2^i` ns; syncs under 1 µs are counted in the first. Counts
/// per bucket, not cumulative: the encoder sums them.
fn sync_histogram(stats: &StatsSnapshot) -> Vec<(f64, u64)> {
    let first = 10;
    let mut buckets = Vec::with_capacity(stats.sync_ns_buckets.len() - first + 1);
    let below: u64 = stats.sync_ns_buckets[..=first].iter().sum();
    buckets.push(((1u64 << first) as f64 / 1e9, below));
    for (index, count) in stats.sync_ns_buckets.iter().enumerate().skip(first + 1) {
        buckets.push(((1u64 << index) as f64 / 1e9, *count));
    }
    buckets.push((f64::INFINITY, 0));
    buckets
}

/// The engine's power-of-two batch-size buckets as a Prometheus histogram: bucket `i`
/// holds batches of up to `2^i` commands. Counts per bucket (the encoder sums them).
fn batch_histogram(stats: &StatsSnapshot) -> Vec<(f64, u64)> {
    let mut buckets: Vec<(f64, u64)> = stats
        .batch_commands_buckets
        .iter()
        .enumerate()
        .map(|(index, count)| ((1u64 << index) as f64, *count))
        .collect();
    buckets.push((f64::INFINITY, 0));
    buckets
}

/// The history follower's figures, read at each scrape.
#[derive(Debug)]
struct HistoryCollector(Arc<bourse_history::HistoryStats>);

impl Collector for HistoryCollector {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        use std::sync::atomic::Ordering::Relaxed;
        let history = &self.0;
        let seq = |value: &std::sync::atomic::AtomicU64| value.load(Relaxed) as i64;
        gauge(
            &mut encoder,
            "history_committed_seq",
            "The last command whose rows the history has committed",
            seq(&history.committed_seq),
        )?;
        gauge(
            &mut encoder,
            "history_applied_seq",
            "The last command the history's copy of the state has applied",
            seq(&history.applied_seq),
        )?;
        counter(
            &mut encoder,
            "history_rows",
            "Rows committed to the history",
            history.rows.load(Relaxed),
        )?;
        counter(
            &mut encoder,
            "history_files",
            "Parquet files written",
            history.files.load(Relaxed),
        )?;
        counter(
            &mut encoder,
            "history_bytes",
            "Bytes of Parquet written",
            history.bytes.load(Relaxed),
        )?;
        counter(&mut encoder, "history_commits", "History commits", history.commits.load(Relaxed))?;
        counter(
            &mut encoder,
            "history_merges",
            "Merges of small Parquet files into one",
            history.merges.load(Relaxed),
        )?;
        counter(
            &mut encoder,
            "history_files_merged",
            "Small Parquet files replaced by merges",
            history.files_merged.load(Relaxed),
        )?;
        counter(
            &mut encoder,
            "history_failures",
            "History steps that failed (retried from the last commit; the journal is intact)",
            history.failures.load(Relaxed),
        )?;
        gauge(
            &mut encoder,
            "history_last_commit_ns",
            "How long the last history commit took",
            seq(&history.last_commit_ns),
        )
    }
}

/// The market-data feed's counters, read at each scrape.
#[derive(Debug)]
struct FeedCollector(Arc<FeedFigures>);

impl Collector for FeedCollector {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        use std::sync::atomic::Ordering::Relaxed;
        let feed = &self.0;
        counter(
            &mut encoder,
            "md_messages",
            "Market-data messages published",
            feed.messages.load(Relaxed),
        )?;
        counter(
            &mut encoder,
            "md_packets",
            "Market-data packets sent (heartbeats included)",
            feed.packets.load(Relaxed),
        )?;
        counter(
            &mut encoder,
            "md_send_errors",
            "Market-data packets the socket refused",
            feed.send_errors.load(Relaxed),
        )?;
        counter(
            &mut encoder,
            "md_inconsistencies",
            "Events the feed's books could not follow (0 unless the feed and the engine disagree)",
            feed.inconsistencies.load(Relaxed),
        )?;
        counter(
            &mut encoder,
            "md_retransmit_requests",
            "Retransmission requests answered",
            feed.retransmit_requests.load(Relaxed),
        )?;
        counter(&mut encoder, "md_snapshots", "Snapshots served", feed.snapshots.load(Relaxed))?;
        gauge(
            &mut encoder,
            "md_applied_seq",
            "The last command the market-data feed and the WebSocket channels have applied",
            feed.applied_seq.load(Relaxed) as i64,
        )?;
        counter(
            &mut encoder,
            "md_anchors_checked",
            "In a cluster: the leader's feed anchors this node's numbering agreed with",
            feed.anchors_checked.load(Relaxed),
        )?;
        counter(
            &mut encoder,
            "md_anchor_mismatches",
            "In a cluster: feed anchors this node's numbering differed from (its feed stopped)",
            feed.anchor_mismatches.load(Relaxed),
        )?;
        gauge(
            &mut encoder,
            "md_sending",
            "1 while this node sends the feed to the multicast group",
            feed.sending.load(Relaxed) as i64,
        )
    }
}

impl Collector for EngineFigures {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let stats = self.link.stats();
        let (queue_len, queue_capacity) = self.link.queue();
        counter(
            &mut encoder,
            "journal_commands",
            "Commands sequenced and journaled",
            stats.commands,
        )?;
        counter(
            &mut encoder,
            "journal_batches",
            "Batches written (one write, one sync each)",
            stats.batches,
        )?;
        let sizes = batch_histogram(&stats);
        let mut metric = encoder.encode_descriptor(
            "journal_batch_commands",
            "Commands per journal batch (one write and one sync each)",
            None,
            MetricType::Histogram,
        )?;
        metric.encode_histogram::<NoLabelSet>(
            stats.commands as f64,
            stats.batches,
            &sizes,
            None,
        )?;
        let histogram = sync_histogram(&stats);
        let mut metric = encoder.encode_descriptor(
            "journal_sync_seconds",
            "Time in fdatasync per journal sync",
            None,
            MetricType::Histogram,
        )?;
        metric.encode_histogram::<NoLabelSet>(
            stats.sync_ns_total as f64 / 1e9,
            stats.syncs,
            &histogram,
            None,
        )?;
        gauge(
            &mut encoder,
            "journal_sync_max_microseconds",
            "The slowest sync since start",
            (stats.sync_ns_max / 1_000) as i64,
        )?;
        gauge(&mut encoder, "applied_seq", "The last command applied", stats.applied_seq.0 as i64)?;
        gauge(
            &mut encoder,
            "intake_queue_commands",
            "Commands waiting for the sequencer",
            queue_len as i64,
        )?;
        gauge(
            &mut encoder,
            "intake_queue_capacity",
            "The intake queue's capacity",
            queue_capacity as i64,
        )?;
        gauge(
            &mut encoder,
            "gateway_in_flight",
            "Gateway requests waiting for the engine",
            self.link.in_flight() as i64,
        )?;
        counter(&mut encoder, "snapshots", "Snapshots written", stats.snapshots)?;
        counter(
            &mut encoder,
            "snapshot_failures",
            "Snapshots that failed (the journal is intact)",
            stats.snapshot_failures,
        )?;
        gauge(
            &mut encoder,
            "engine_failed",
            "1 once the engine stopped on a storage failure",
            i64::from(self.link.failure().is_some()),
        )?;
        self.encode_cluster(&mut encoder)
    }
}

impl EngineFigures {
    /// In a cluster, the node's view of it (`docs/cluster.md`): what `GET /v1/cluster`
    /// says, as gauges.
    fn encode_cluster(&self, encoder: &mut DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let Some(view) = self.link.cluster_status() else { return Ok(()) };
        let status = &view.status;
        gauge(encoder, "cluster_node", "This node's id", status.id.0 as i64)?;
        let leader = status.leader.map_or(0, |leader| leader.0 as i64);
        gauge(encoder, "cluster_leader", "The node this node knows leads (0: none)", leader)?;
        gauge(
            encoder,
            "cluster_is_leader",
            "1 while this node leads",
            i64::from(status.is_leader),
        )?;
        gauge(encoder, "cluster_term", "The Raft term", status.term as i64)?;
        gauge(
            encoder,
            "cluster_commit_index",
            "The last entry known committed",
            status.commit as i64,
        )?;
        gauge(
            encoder,
            "cluster_last_index",
            "The last entry of this node's log",
            status.last_index as i64,
        )?;
        gauge(
            encoder,
            "cluster_applied_seq",
            "The last command this node has applied (every node numbers commands alike)",
            self.link.stats().applied_seq.0 as i64,
        )?;
        gauge(
            encoder,
            "cluster_voters",
            "The voters of the cluster as this node knows it",
            status.voters.len() as i64,
        )?;
        gauge(
            encoder,
            "cluster_learners",
            "Nodes that get the log but do not vote yet (being added)",
            status.learners.len() as i64,
        )?;
        gauge(
            encoder,
            "cluster_stopped",
            "1 once the node stopped (its storage, or a state digest that differs)",
            i64::from(view.failure.is_some()),
        )?;
        // On the leader: how many entries of its log each node is known not to hold.
        let mut lags = encoder.encode_descriptor(
            "cluster_node_lag_entries",
            "On the leader: entries of its log each node is not known to hold",
            None,
            MetricType::Gauge,
        )?;
        for (node, matched) in &status.matched {
            let lag = status.last_index.saturating_sub(*matched) as i64;
            ConstGauge::new(lag).encode(lags.encode_family(&NodeLabels { node: node.0 })?)?;
        }
        Ok(())
    }
}

/// Counts each REST request by its route (the pattern, never the concrete path) and
/// status, with its latency.
pub async fn count_requests(
    State(metrics): State<Arc<Metrics>>,
    request: Request,
    next: Next,
) -> Response {
    let route = request.extensions().get::<MatchedPath>().map_or_else(
        || "unmatched".to_string(),
        |path| format!("{} {}", request.method(), path.as_str()),
    );
    let started = std::time::Instant::now();
    metrics.connection_opened("http");
    let response = next.run(request).await;
    metrics.connection_closed("http");
    let status = response.status();
    if status.is_server_error() {
        tracing::warn!(%route, status = status.as_u16(), "request failed");
    } else {
        tracing::debug!(%route, status = status.as_u16(), "request");
    }
    metrics.request("http", &route, response.status().as_u16(), started.elapsed().as_secs_f64());
    response
}
