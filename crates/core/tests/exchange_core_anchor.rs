//! Conformance with an independent engine: exchange-core's own 3-million-command
//! benchmark stream (`shared/anchors/exchange-core/`) must replay with every command
//! accepted and end in exactly the book exchange-core produced, per side and price:
//! volume and order count.

use std::fs::File;
use std::io::{BufRead, BufReader};
use std::path::PathBuf;

use bourse_core::book::LevelSummary;
use bourse_core::format::parse_line;
use bourse_core::ids::InstrumentId;
use bourse_core::{Event, Exchange, ExchangeConfig, Seq, Side};
use flate2::read::MultiGzDecoder;

/// (From the runtime `CARGO_MANIFEST_DIR` that `cargo test` sets: a test binary reused
/// from a build in another checkout, with a shared target dir, must not look there.)
fn anchor_dir() -> PathBuf {
    PathBuf::from(
        std::env::var("CARGO_MANIFEST_DIR")
            .unwrap_or_else(|_| env!("CARGO_MANIFEST_DIR").to_string()),
    )
    .join("../../../shared/anchors/exchange-core")
}

/// One price level: price, total volume, order count.
type Level = (i64, i64, u32);

/// `expected_l2.csv`: `side,price,volume,orders`, asks best first, then bids best first.
fn expected_levels() -> (Vec<Level>, Vec<Level>) {
    let path = anchor_dir().join("expected_l2.csv");
    let text = std::fs::read_to_string(&path)
        .unwrap_or_else(|error| panic!("cannot read {}: {error}", path.display()));
    let (mut asks, mut bids) = (Vec::new(), Vec::new());
    for row in text.lines().skip(1).filter(|row| !row.is_empty()) {
        let fields: Vec<&str> = row.split(',').collect();
        let level = (
            fields[1].parse().expect("price"),
            fields[2].parse().expect("volume"),
            fields[3].parse().expect("orders"),
        );
        match fields[0] {
            "ASK" => asks.push(level),
            "BID" => bids.push(level),
            other => panic!("unknown side {other}"),
        }
    }
    (asks, bids)
}

fn as_tuples(levels: &[LevelSummary]) -> Vec<Level> {
    levels.iter().map(|level| (level.price.0, level.total_qty.0, level.order_count)).collect()
}

#[test]
fn exchange_core_benchmark_stream_ends_in_exchange_cores_book() {
    let path = anchor_dir().join("workload.jsonl.gz");
    let file = File::open(&path).unwrap_or_else(|error| {
        panic!("the conformance stream {} is missing: {error}", path.display())
    });
    let reader = BufReader::with_capacity(1 << 20, MultiGzDecoder::new(file));
    let mut exchange = Exchange::new(ExchangeConfig::default());
    let mut events = Vec::new();
    let (mut commands, mut trades, mut traded_volume, mut self_trades) = (0u64, 0u64, 0i64, 0u64);
    for (index, line) in reader.lines().enumerate() {
        let line = line.expect("readable stream");
        let seq = index as u64 + 1;
        let parsed = parse_line(&line).unwrap_or_else(|error| panic!("line {seq}: {error}"));
        exchange.apply(Seq(seq), parsed.ts, &parsed.command, &mut events);
        for event in events.drain(..) {
            match event {
                Event::Rejected { reason, .. } => panic!("line {seq} rejected: {}", reason.code()),
                Event::Trade(trade) => {
                    trades += 1;
                    traded_volume += trade.qty.0;
                    self_trades += u64::from(trade.maker_account == trade.taker_account);
                }
                _ => {}
            }
        }
        commands += 1;
    }
    assert_eq!(commands, 3_003_003);
    let book = exchange.book(InstrumentId(0));
    let (expected_asks, expected_bids) = expected_levels();
    assert_eq!(as_tuples(&book.levels(Side::Sell)), expected_asks, "asks differ");
    assert_eq!(as_tuples(&book.levels(Side::Buy)), expected_bids, "bids differ");
    for side in [Side::Buy, Side::Sell] {
        let all = book.levels(side);
        for count in [0, 1, 7, all.len(), all.len() + 3] {
            let top = book.top_levels(side, count);
            assert_eq!(top, all[..count.min(all.len())], "the top {count} levels of {side:?}");
        }
    }
    assert_eq!((expected_asks.len(), expected_bids.len()), (265, 253));
    // An independent replay's figures (the anchor's README).
    assert_eq!((trades, traded_volume, self_trades), (122_607, 1_066_063, 132));
    exchange.check_invariants().expect("invariants hold at the end");
}
