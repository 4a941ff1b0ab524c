//! Sample trading for tests, examples and benchmarks: deterministic command streams as
//! replay-format lines (random spot trading, two days of a futures contract), and
//! writing them into a journal the way the engine does, so that a history can be made
//! without running a server.

use std::path::Path;

use bourse_core::format::parse_line;
use bourse_core::{Seq, TimestampNs};
use bourse_journal::{
    encode_command, scan_journal, JournalWriter, RecordBatch as Records, TailPolicy, WriterOptions,
};

/// 2026-11-24T00:00:00Z in ns: the sample's clock starts there.
pub const DAY_START: u64 = 1_795_478_400_000_000_000; // 2026-11-24T00:00:00Z

/// xorshift64: the same sequence on every machine.
struct Random(u64);

impl Random {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn below(&mut self, bound: u64) -> u64 {
        self.next() % bound
    }
}

/// The sample's accounts.
pub const ACCOUNTS: [&str; 5] = ["alice", "bob", "carol", "dave", "erin"];

/// Random trading as replay-format lines with their timestamps: USD, BTC and ETH,
/// BTC-USD and ETH-USD with fees, five funded accounts, then limit orders (GTC, IOC,
/// FOK), market orders, cancels, amends, deposits, withdrawals and orders on an
/// unknown symbol, 61 s apart on the engine's clock (so minutes close and days turn).
pub fn trading(seed: u64, commands: usize) -> Vec<(String, u64)> {
    let mut lines = vec![
        r#"{"cmd":"asset","asset":"USD","decimals":6}"#.to_string(),
        r#"{"cmd":"asset","asset":"BTC","decimals":8}"#.to_string(),
        r#"{"cmd":"asset","asset":"ETH","decimals":6}"#.to_string(),
        r#"{"cmd":"instrument","symbol":"BTC-USD","base":"BTC","quote":"USD","tick":"0.5","lot":"0.001","min_qty":"0.001","max_qty":"100","maker_fee_bps":2,"taker_fee_bps":7,"market_band_bps":500}"#.to_string(),
        r#"{"cmd":"instrument","symbol":"ETH-USD","base":"ETH","quote":"USD","tick":"0.01","lot":"0.01","min_qty":"0.01","max_qty":"1000","maker_fee_bps":0,"taker_fee_bps":5,"market_band_bps":500}"#.to_string(),
    ];
    for account in ACCOUNTS {
        for (asset, amount) in [("USD", "5000000"), ("BTC", "100"), ("ETH", "2000")] {
            lines.push(format!(
                r#"{{"cmd":"deposit","account":"{account}","asset":"{asset}","amount":"{amount}"}}"#
            ));
        }
    }
    let mut random = Random(seed);
    let mut placed: Vec<(usize, String)> = Vec::new();
    while lines.len() < commands {
        let account = random.below(5) as usize;
        let name = ACCOUNTS[account];
        let roll = random.below(100);
        let (symbol, centre, tick) = if random.below(2) == 0 {
            ("BTC-USD", 50_000.0, 0.5)
        } else {
            ("ETH-USD", 3_000.0, 0.01)
        };
        let side = if random.below(2) == 0 { "buy" } else { "sell" };
        if roll < 60 {
            let offset = random.below(40) as f64 - 20.0;
            let price = centre + offset * tick * 10.0;
            let qty = (1 + random.below(200)) as f64 / 100.0;
            let id = format!("o{}", lines.len());
            let tif = ["gtc", "gtc", "gtc", "ioc", "fok"][random.below(5) as usize];
            lines.push(format!(r#"{{"cmd":"order","account":"{name}","id":"{id}","symbol":"{symbol}","side":"{side}","type":"limit","price":"{price}","qty":"{qty}","tif":"{tif}"}}"#));
            placed.push((account, id));
        } else if roll < 67 {
            let qty = (1 + random.below(100)) as f64 / 100.0;
            let id = format!("m{}", lines.len());
            lines.push(format!(r#"{{"cmd":"order","account":"{name}","id":"{id}","symbol":"{symbol}","side":"{side}","type":"market","qty":"{qty}"}}"#));
        } else if roll < 85 && !placed.is_empty() {
            let (owner, id) = placed.swap_remove(random.below(placed.len() as u64) as usize);
            lines
                .push(format!(r#"{{"cmd":"cancel","account":"{}","id":"{id}"}}"#, ACCOUNTS[owner]));
        } else if roll < 93 && !placed.is_empty() {
            let (owner, id) = &placed[random.below(placed.len() as u64) as usize];
            let qty = (1 + random.below(100)) as f64 / 100.0;
            lines.push(format!(
                r#"{{"cmd":"amend","account":"{}","id":"{id}","qty":"{qty}"}}"#,
                ACCOUNTS[*owner]
            ));
        } else if roll < 96 {
            lines.push(format!(
                r#"{{"cmd":"deposit","account":"{name}","asset":"USD","amount":"{}"}}"#,
                1 + random.below(1000)
            ));
        } else if roll < 98 {
            lines.push(format!(
                r#"{{"cmd":"withdraw","account":"{name}","asset":"ETH","amount":"{}"}}"#,
                1 + random.below(10)
            ));
        } else {
            // Rejected: an unknown symbol, and an order too large to fund.
            lines.push(format!(r#"{{"cmd":"order","account":"{name}","id":"x{}","symbol":"NOPE","side":"buy","type":"limit","price":"1","qty":"1"}}"#, lines.len()));
        }
    }
    // 61 s apart, so minutes close and the days turn twice.
    lines
        .into_iter()
        .enumerate()
        .map(|(index, line)| (line, DAY_START + index as u64 * 61_000_000_000))
        .collect()
}

/// Appends `lines` (replay-format commands with their timestamps) to the journal in
/// `dir` (made if needed), in synced batches of 100.
pub fn write_journal(dir: &Path, lines: &[(String, u64)]) -> Result<(), String> {
    std::fs::create_dir_all(dir).map_err(|error| format!("{}: {error}", dir.display()))?;
    let report =
        scan_journal(dir, TailPolicy::Repair, |_, _| Ok(())).map_err(|error| error.to_string())?;
    let options = WriterOptions { segment_bytes: 1 << 20, ..WriterOptions::default() };
    let mut writer =
        JournalWriter::open(dir, &report, options, report.next_seq.max(Seq(1)), report.last_crc)
            .map_err(|error| error.to_string())?;
    for chunk in lines.chunks(100) {
        let mut batch = Records::default();
        for (line, ts) in chunk {
            let command = parse_line(line).map_err(|error| format!("{line}: {error:?}"))?.command;
            batch
                .push(TimestampNs(*ts), |out| encode_command(&command, out))
                .map_err(|error| error.to_string())?;
        }
        writer.write(&mut batch).map_err(|error| error.to_string())?;
        writer.sync().map_err(|error| error.to_string())?;
    }
    Ok(())
}

/// `DAY_START` plus `day` days, `hour` hours and `minute` minutes, in ns.
fn at(day: u64, hour: u64, minute: u64) -> u64 {
    DAY_START + ((day * 24 + hour) * 60 + minute) * 60_000_000_000
}

/// Two days of one futures contract, as replay-format lines with their timestamps, for
/// tests and the worked examples of `docs/history.md`: `CU` settled in CNY (2
/// decimals), tick 10, lot 1, multiplier 5, margin 10000 (12000 from the second day
/// on), fees 1.5 (maker) and 3 (taker) per lot; alice, bob, carol and dave with
/// 500000 CNY each.
///
/// On 2026-11-24 alice sells 2 to open at 75000 and bob buys them, carol offers 3 at
/// 75100, alice buys 1 of them back to close (a loss of 500) and dave's `gfd` bid
/// rests; at 15:00 the contract settles at 75200 (dave's bid expires; alice's short
/// 1, bob's long 2 and carol's short 1 are marked). On 2026-11-25 the margin goes up
/// to 12000; bob offers 1 at 75300 to close and dave buys 3 (carol's 2 at 75100 open,
/// bob's 1 closes at a profit of 500); alice offers 5 at 75400 and carol bids 1 at
/// 74000; carol is liquidated (her bid is canceled, her short 3 is bought back from
/// alice's offer for a loss of 4000); at 15:00 the contract expires at 75500 (the rest
/// of alice's offer expires, every position is marked and closed).
pub fn futures_trading() -> Vec<(String, u64)> {
    let order = |account: &str, id: &str, side: &str, price: &str, qty: &str, extra: &str| {
        format!(
            r#"{{"cmd":"order","account":"{account}","id":"{id}","symbol":"CU","side":"{side}","type":"limit","price":"{price}","qty":"{qty}"{extra}}}"#
        )
    };
    let close = r#","offset":"close""#;
    let mut lines = vec![
        (r#"{"cmd":"asset","asset":"CNY","decimals":2}"#.to_string(), at(0, 8, 0)),
        (r#"{"cmd":"future","symbol":"CU","settle":"CNY","tick":"10","lot":"1","min_qty":"1","max_qty":"100","multiplier":"5","margin":"10000","maker_fee":"1.5","taker_fee":"3","market_band_bps":500}"#.to_string(), at(0, 8, 1)),
    ];
    for (index, account) in ["alice", "bob", "carol", "dave"].into_iter().enumerate() {
        let deposit =
            format!(r#"{{"cmd":"deposit","account":"{account}","asset":"CNY","amount":"500000"}}"#);
        lines.push((deposit, at(0, 8, 2 + index as u64)));
    }
    lines.extend([
        (order("alice", "a1", "sell", "75000", "2", ""), at(0, 9, 0)),
        (order("bob", "b1", "buy", "75000", "2", ""), at(0, 9, 1)),
        (order("carol", "c1", "sell", "75100", "3", ""), at(0, 9, 30)),
        (order("alice", "a2", "buy", "75100", "1", close), at(0, 10, 0)),
        (order("dave", "d1", "buy", "74800", "1", r#","tif":"gfd""#), at(0, 11, 0)),
        (r#"{"cmd":"settle","symbol":"CU","price":"75200"}"#.to_string(), at(0, 15, 0)),
        (r#"{"cmd":"margin","symbol":"CU","margin":"12000"}"#.to_string(), at(1, 8, 30)),
        (order("bob", "b2", "sell", "75300", "1", close), at(1, 9, 0)),
        (order("dave", "d2", "buy", "75300", "3", ""), at(1, 9, 5)),
        (order("alice", "a3", "sell", "75400", "5", ""), at(1, 10, 0)),
        (order("carol", "c2", "buy", "74000", "1", ""), at(1, 10, 30)),
        (r#"{"cmd":"liquidate","account":"carol","symbol":"CU"}"#.to_string(), at(1, 11, 0)),
        (
            r#"{"cmd":"settle","symbol":"CU","price":"75500","final":true}"#.to_string(),
            at(1, 15, 0),
        ),
    ]);
    lines
}
