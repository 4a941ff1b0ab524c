//! `bourse md listen`: the reference subscriber of the market-data feed. It joins the
//! multicast group, rebuilds every book from the messages (recovering gaps by
//! retransmission and by snapshot, `bourse_server::services::multicast::listen`), prints each
//! instrument's best bid and offer as they stand every second, and with `--verify`
//! checks its books against the server's own (`GET /v1/l3/{symbol}`) at the same
//! engine sequence number: exit status 1 on any difference.

use std::io::{Read, Write};
use std::net::{Ipv4Addr, SocketAddr, TcpStream};
use std::time::{Duration, Instant};

use bourse_core::ids::InstrumentId;
use bourse_core::{Decimal, Seq, Side};
use bourse_server::services::multicast::listen::{FeedAddresses, Listener};
use clap::{Args, Subcommand};
use serde_json::Value;

#[derive(Subcommand)]
pub enum MdCommand {
    /// Join the feed, rebuild the books, print them; `--verify` checks them.
    Listen(ListenArgs),
}

#[derive(Args)]
pub struct ListenArgs {
    /// The feed's multicast group and port.
    #[arg(long, default_value = "239.255.66.1:31001")]
    multicast: SocketAddr,
    /// The local interface to join on.
    #[arg(long, default_value = "127.0.0.1")]
    interface: Ipv4Addr,
    /// The snapshot service; repeat it for each node of a cluster (the next is asked
    /// when one does not answer).
    #[arg(long, default_value = "127.0.0.1:9091")]
    snapshot: Vec<SocketAddr>,
    /// The retransmission service; repeat it for each node of a cluster.
    #[arg(long, default_value = "127.0.0.1:9092")]
    retransmit: Vec<SocketAddr>,
    /// Stop after this many seconds (default: run until stopped).
    #[arg(long)]
    duration: Option<u64>,
    /// Before stopping, check the books against this server's REST L3
    /// (e.g. 127.0.0.1:8080).
    #[arg(long)]
    verify: Option<SocketAddr>,
    /// Drop this share of the feed's packets (0 to 100), to watch recovery work.
    #[arg(long, default_value_t = 0)]
    drop_percent: u64,
    /// Print nothing every second; only the summary.
    #[arg(long)]
    quiet: bool,
}

pub fn run(command: MdCommand) -> Result<(), String> {
    match command {
        MdCommand::Listen(args) => listen(&args),
    }
}

fn listen(args: &ListenArgs) -> Result<(), String> {
    let addresses = FeedAddresses {
        multicast: args.multicast,
        interface: args.interface,
        snapshot: args.snapshot.clone(),
        retransmit: args.retransmit.clone(),
    };
    let mut listener =
        Listener::join(addresses).map_err(|error| format!("cannot join the feed: {error}"))?;
    listener.drop_percent = args.drop_percent.min(100);
    let started = Instant::now();
    let deadline = args.duration.map(|seconds| started + Duration::from_secs(seconds));
    while deadline.is_none_or(|deadline| Instant::now() < deadline) && !listener.rebuilder.ended() {
        listener.poll(Duration::from_secs(1)).map_err(|error| format!("the feed: {error}"))?;
        if !args.quiet {
            print_books(&listener);
        }
    }
    listener.drop_percent = 0;
    let counters = listener.rebuilder.counters;
    let recoveries = listener.recoveries;
    println!(
        "md: {} messages applied ({} trades, {} duplicates), {} snapshots, {} retransmission requests ({} packets), {} ranges gone, at seq {}{}",
        counters.applied,
        counters.trades,
        counters.duplicates,
        recoveries.snapshots,
        recoveries.retransmit_requests,
        recoveries.retransmitted_packets,
        recoveries.ranges_gone,
        listener.rebuilder.seq(),
        if listener.rebuilder.ended() { " (the session ended)" } else { "" }
    );
    match args.verify {
        Some(http) => verify(&mut listener, http),
        None => Ok(()),
    }
}

fn print_books(listener: &Listener) {
    let books = listener.rebuilder.books();
    for (instrument, info) in listener.rebuilder.instruments() {
        let bbo = books.bbo(instrument);
        let side = |level: Option<(bourse_core::Price, bourse_core::Qty)>| match level {
            Some((price, qty)) => format!(
                "{} x {}",
                Decimal::from_units(i128::from(price.0), u32::from(info.price_decimals)),
                Decimal::from_units(i128::from(qty.0), u32::from(info.qty_decimals))
            ),
            None => "-".to_string(),
        };
        println!(
            "md: seq {} {}: bid {} / ask {} ({} bid levels, {} ask levels){}",
            listener.rebuilder.seq(),
            info.symbol,
            side(bbo.bid),
            side(bbo.ask),
            books.levels(instrument, Side::Buy).len(),
            books.levels(instrument, Side::Sell).len(),
            if info.halted { " halted" } else { "" }
        );
    }
}

/// Compares every instrument's books with the server's L3 at the same engine sequence
/// number: the subscriber is held at the L3's seq while it catches up to it.
fn verify(listener: &mut Listener, http: SocketAddr) -> Result<(), String> {
    let symbols: Vec<(InstrumentId, String, u8, u8)> = listener
        .rebuilder
        .instruments()
        .map(|(id, info)| (id, info.symbol.clone(), info.price_decimals, info.qty_decimals))
        .collect();
    if symbols.is_empty() {
        return Err("the feed announced no instrument yet: nothing to verify".into());
    }
    let mut differences = 0;
    for (instrument, symbol, price_decimals, qty_decimals) in symbols {
        let l3 = get_json(http, &format!("/v1/l3/{symbol}"))?;
        let seq = l3["seq"].as_u64().ok_or("the L3 has no seq")?;
        listener.rebuilder.hold_after(Some(Seq(seq))).map_err(|error| error.to_string())?;
        // Caught up: a later command's message waits, or the feed has been quiet
        // (nothing missing) for a while.
        let deadline = Instant::now() + Duration::from_secs(30);
        let mut quiet_since = Instant::now();
        let mut applied = listener.rebuilder.counters.applied;
        while !listener.rebuilder.held() {
            if Instant::now() > deadline {
                return Err(format!("could not catch up with seq {seq} in 30 s"));
            }
            listener.poll(Duration::from_millis(100)).map_err(|error| error.to_string())?;
            if listener.rebuilder.counters.applied != applied || listener.rebuilder.gap().is_some()
            {
                applied = listener.rebuilder.counters.applied;
                quiet_since = Instant::now();
            } else if quiet_since.elapsed() > Duration::from_millis(1_500) {
                break;
            }
        }
        let side = |name: &str, side: Side| -> Result<bool, String> {
            let theirs: Vec<(u64, i64, i64)> = l3[name]
                .as_array()
                .ok_or("the L3 has no sides")?
                .iter()
                .map(|order| {
                    let units = |value: &Value, decimals: u8| {
                        value
                            .as_str()
                            .and_then(Decimal::parse)
                            .and_then(|decimal| decimal.to_units(u32::from(decimals)))
                            .and_then(|units| i64::try_from(units).ok())
                    };
                    match (
                        order[0].as_u64(),
                        units(&order[1], price_decimals),
                        units(&order[2], qty_decimals),
                    ) {
                        (Some(id), Some(price), Some(qty)) => Ok((id, price, qty)),
                        _ => Err(format!("an L3 order does not read: {order}")),
                    }
                })
                .collect::<Result<_, String>>()?;
            let ours: Vec<(u64, i64, i64)> = listener
                .rebuilder
                .books()
                .orders(instrument, side)
                .into_iter()
                .map(|(id, price, qty)| (id.0, price.0, qty.0))
                .collect();
            if ours != theirs {
                let only = |these: &[(u64, i64, i64)], those: &[(u64, i64, i64)]| {
                    these
                        .iter()
                        .filter(|order| !those.contains(order))
                        .take(5)
                        .copied()
                        .collect::<Vec<_>>()
                };
                println!(
                    "md: verify {symbol} {name} at seq {seq}: DIFFERENT: ours {} orders, the server's {}; only ours (id, price, qty in units): {:?}; only the server's: {:?}",
                    ours.len(),
                    theirs.len(),
                    only(&ours, &theirs),
                    only(&theirs, &ours)
                );
                return Ok(false);
            }
            println!("md: verify {symbol} {name} at seq {seq}: {} orders equal", ours.len());
            Ok(true)
        };
        for (name, which) in [("bids", Side::Buy), ("asks", Side::Sell)] {
            if !side(name, which)? {
                differences += 1;
            }
        }
        listener.rebuilder.hold_after(None).map_err(|error| error.to_string())?;
    }
    if differences > 0 {
        return Err(format!("{differences} book sides differ from the server's"));
    }
    Ok(())
}

/// `GET path` on `http` (one request, `Connection: close`), as JSON.
fn get_json(http: SocketAddr, path: &str) -> Result<Value, String> {
    let mut stream = TcpStream::connect_timeout(&http, Duration::from_secs(5))
        .map_err(|error| format!("{http}: {error}"))?;
    stream.set_read_timeout(Some(Duration::from_secs(30))).map_err(|error| error.to_string())?;
    write!(stream, "GET {path} HTTP/1.1\r\nHost: bourse\r\nConnection: close\r\n\r\n")
        .map_err(|error| error.to_string())?;
    let mut response = Vec::new();
    stream.read_to_end(&mut response).map_err(|error| error.to_string())?;
    let head_end =
        response.windows(4).position(|window| window == b"\r\n\r\n").ok_or("no HTTP response")?;
    let head = String::from_utf8_lossy(&response[..head_end]);
    if !head.starts_with("HTTP/1.1 200") {
        return Err(format!("GET {path}: {}", head.lines().next().unwrap_or("")));
    }
    serde_json::from_slice(&response[head_end + 4..])
        .map_err(|error| format!("GET {path}: {error}"))
}
