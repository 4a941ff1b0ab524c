//! `bourse bench fanout`: many WebSocket subscribers to one instrument's trades on a
//! running server, and trades made at a steady rate by two accounts crossing through
//! REST. Every trade's delivery to every subscriber is timed from the trade's release
//! by the engine (`released_ns` in the message: the engine's clock is this host's) to
//! its arrival, into one HDR histogram. Subscribers that were disconnected or missed a
//! trade are counted, never hidden.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use clap::Args;
use futures_util::{SinkExt, StreamExt};
use hdrhistogram::Histogram;
use tokio_tungstenite::tungstenite::Message;

use crate::loadgen::admin::{self, Credentials};

#[derive(Args)]
pub struct FanoutArgs {
    /// The server's REST and WebSocket address.
    #[arg(long, default_value = "127.0.0.1:8080")]
    http: SocketAddr,
    /// The admin key file (`DATA_DIR/server/admin.key`).
    #[arg(long, default_value = "data/server/admin.key")]
    admin_key_file: PathBuf,
    /// WebSocket subscribers to the trades channel.
    #[arg(long, default_value_t = 10_000)]
    subscribers: usize,
    /// Trades made per second while measuring.
    #[arg(long, default_value_t = 20)]
    trades_per_sec: u64,
    /// Seconds of trading.
    #[arg(long, default_value_t = 10)]
    duration: u64,
    #[arg(long)]
    json: bool,
    /// Instead: the kernel's floor on this machine. Open `--subscribers` loopback TCP
    /// connections inside this process, write one 160-byte message to each and read it
    /// at the other end, with plain blocking sockets on one thread (no WebSocket, no
    /// server, no runtime), 100 rounds: what one delivery costs at least.
    #[arg(long)]
    raw: bool,
}

/// What the subscribers saw, shared by their tasks.
struct Seen {
    latency_ns: Mutex<Histogram<u64>>,
    deliveries: AtomicU64,
    closed: AtomicU64,
}

pub fn run(args: &FanoutArgs) -> Result<(), String> {
    if args.raw {
        return raw(args.subscribers);
    }
    let admin = Credentials::from_file(&args.admin_key_file)?;
    let symbol = format!("FO-BTC-USD-{}", std::process::id());
    let keys = admin::set_up(
        args.http,
        &admin,
        std::slice::from_ref(&symbol),
        &["fanout-seller".to_string(), "fanout-buyer".to_string()],
    )?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .map_err(|error| error.to_string())?;
    let seen = Arc::new(Seen {
        latency_ns: Mutex::new(
            Histogram::new_with_bounds(1_000, 60_000_000_000, 3)
                .map_err(|error| error.to_string())?,
        ),
        deliveries: AtomicU64::new(0),
        closed: AtomicU64::new(0),
    });
    let connected = runtime.block_on(connect_all(args, &symbol, Arc::clone(&seen)))?;
    eprintln!("bench fanout: {connected} subscribers to {symbol}'s trades; trading {} per second for {} s", args.trades_per_sec, args.duration);
    // Trades from a thread of their own: a sell, then a buy that takes it.
    let period = Duration::from_secs_f64(1.0 / args.trades_per_sec.max(1) as f64);
    let started = Instant::now();
    let mut trades = 0u64;
    let mut refused = 0u64;
    while started.elapsed() < Duration::from_secs(args.duration) {
        let due = started + period.mul_f64(trades as f64);
        if let Some(wait) = due.checked_duration_since(Instant::now()) {
            std::thread::sleep(wait);
        }
        let body = |side: &str| {
            format!(
                r#"{{"symbol":"{symbol}","side":"{side}","type":"limit","price":"60000","qty":"0.0001","stp":"none"}}"#
            )
        };
        let sold = admin::request(args.http, &keys[0], "POST", "/v1/orders", &body("sell"))?;
        let bought = admin::request(args.http, &keys[1], "POST", "/v1/orders", &body("buy"))?;
        if sold.0 != 200 || bought.0 != 200 {
            refused += 1;
        }
        trades += 1;
    }
    // The last deliveries.
    std::thread::sleep(Duration::from_secs(1));
    let latency = seen.latency_ns.lock().map_err(|_| "a subscriber task panicked")?.clone();
    let deliveries = seen.deliveries.load(Ordering::Relaxed);
    let closed = seen.closed.load(Ordering::Relaxed);
    let expected = trades * connected as u64;
    let us = |quantile: f64| latency.value_at_quantile(quantile) as f64 / 1_000.0;
    let result = serde_json::json!({
        "subscribers": connected,
        "trades": trades,
        "trades_refused": refused,
        "deliveries": deliveries,
        "deliveries_expected": expected,
        "subscribers_closed": closed,
        "p50_us": us(0.5), "p90_us": us(0.9), "p99_us": us(0.99), "p999_us": us(0.999),
        "max_us": latency.max() as f64 / 1_000.0,
    });
    if args.json {
        println!("{result}");
    } else {
        println!(
            "bench fanout: {trades} trades to {connected} subscribers: {deliveries} of {expected} deliveries, {closed} subscribers closed, {refused} trades refused"
        );
        println!(
            "bench fanout: delivery from release, µs: p50 {:.0} p90 {:.0} p99 {:.0} p99.9 {:.0} max {:.0}",
            us(0.5),
            us(0.9),
            us(0.99),
            us(0.999),
            latency.max() as f64 / 1_000.0
        );
    }
    runtime.shutdown_timeout(Duration::from_secs(1));
    Ok(())
}

/// Opens the subscribers (a few hundred handshakes at a time) and leaves each reading
/// in its own task; returns how many are subscribed.
async fn connect_all(args: &FanoutArgs, symbol: &str, seen: Arc<Seen>) -> Result<usize, String> {
    let url = format!("ws://{}/v1/ws", args.http);
    let subscribe =
        serde_json::json!({ "op": "subscribe", "channel": "trades", "symbol": symbol }).to_string();
    let open = |_| {
        let (url, subscribe) = (url.clone(), subscribe.clone());
        async move {
            let mut socket = open_websocket(&url, false).await?;
            socket
                .send(Message::Text(subscribe.into()))
                .await
                .map_err(|error| error.to_string())?;
            // The acknowledgement first.
            match socket.next().await {
                Some(Ok(Message::Text(text))) if text.contains("\"subscribed\"") => Ok(socket),
                other => Err(format!("no subscription: {other:?}")),
            }
        }
    };
    connect_many(args.subscribers, open, |socket| {
        tokio::spawn(read_trades(socket, Arc::clone(&seen)));
        Ok(())
    })
    .await
}

/// A WebSocket client as the benches open them: a small read buffer (tungstenite
/// zeroes all of it before each read), Nagle off when `nodelay`.
pub(super) async fn open_websocket(url: &str, nodelay: bool) -> Result<Socket, String> {
    let config = tokio_tungstenite::tungstenite::protocol::WebSocketConfig::default()
        .read_buffer_size(4_096);
    let (socket, _) = tokio_tungstenite::connect_async_with_config(url, Some(config), nodelay)
        .await
        .map_err(|error| error.to_string())?;
    Ok(socket)
}

/// Opens `count` connections with `open` (given each one's number), a few hundred
/// handshakes at a time, handing each to `opened` as it comes; returns how many.
pub(super) async fn connect_many<O, F>(
    count: usize,
    open: O,
    mut opened: impl FnMut(Socket) -> Result<(), String>,
) -> Result<usize, String>
where
    O: Fn(usize) -> F,
    F: std::future::Future<Output = Result<Socket, String>>,
{
    let mut connected = 0;
    let mut pending = futures_util::stream::FuturesUnordered::new();
    let mut started = 0;
    while connected < count {
        while started < count && pending.len() < 256 {
            pending.push(open(started));
            started += 1;
        }
        match pending.next().await {
            Some(Ok(socket)) => {
                connected += 1;
                opened(socket)?;
            }
            Some(Err(error)) => return Err(format!("connection {connected}: {error}")),
            None => break,
        }
    }
    Ok(connected)
}

pub(super) type Socket =
    tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>;

/// Times each trade message from its `released_ns` to now.
async fn read_trades(mut socket: Socket, seen: Arc<Seen>) {
    while let Some(message) = socket.next().await {
        let Ok(Message::Text(text)) = message else {
            seen.closed.fetch_add(1, Ordering::Relaxed);
            break;
        };
        let now_ns = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |elapsed| elapsed.as_nanos() as u64);
        if let Some(released) = field_u64(text.as_str(), "\"released_ns\":") {
            // (One runtime thread: the lock is never contended.)
            if let Ok(mut latency) = seen.latency_ns.lock() {
                let _ = latency.record(now_ns.saturating_sub(released).max(1_000));
            }
            seen.deliveries.fetch_add(1, Ordering::Relaxed);
        }
    }
}

/// The unsigned integer after `name` in `text` (a JSON field, without parsing it all).
fn field_u64(text: &str, name: &str) -> Option<u64> {
    let start = text.find(name)? + name.len();
    let digits: &str = &text[start..];
    let end = digits.find(|c: char| !c.is_ascii_digit()).unwrap_or(digits.len());
    digits[..end].parse().ok()
}

/// `--raw`: N loopback connections, one message written to each and read back, timed.
fn raw(connections: usize) -> Result<(), String> {
    use std::io::{Read, Write};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").map_err(|error| error.to_string())?;
    let address = listener.local_addr().map_err(|error| error.to_string())?;
    let mut writers = Vec::with_capacity(connections);
    let mut readers = Vec::with_capacity(connections);
    for _ in 0..connections {
        let reader = std::net::TcpStream::connect(address).map_err(|error| error.to_string())?;
        let (writer, _) = listener.accept().map_err(|error| error.to_string())?;
        writer.set_nodelay(true).map_err(|error| error.to_string())?;
        readers.push(reader);
        writers.push(writer);
    }
    let message = [b'x'; 160];
    let mut received = [0u8; 160];
    let (mut writing, mut reading) = (Vec::new(), Vec::new());
    for _ in 0..100 {
        let started = Instant::now();
        for writer in &mut writers {
            writer.write_all(&message).map_err(|error| error.to_string())?;
        }
        let written = Instant::now();
        for reader in &mut readers {
            reader.read_exact(&mut received).map_err(|error| error.to_string())?;
        }
        writing.push(written - started);
        reading.push(written.elapsed());
    }
    writing.sort();
    reading.sort();
    let per = |durations: &[Duration]| {
        durations[durations.len() / 2].as_secs_f64() * 1e9 / connections as f64
    };
    println!(
        "bench fanout --raw: {connections} loopback connections, one 160-byte message each, median of 100 rounds: writing all {:.2} ms ({:.0} ns each), reading all {:.2} ms ({:.0} ns each)",
        writing[50].as_secs_f64() * 1e3,
        per(&writing),
        reading[50].as_secs_f64() * 1e3,
        per(&reading)
    );
    Ok(())
}
