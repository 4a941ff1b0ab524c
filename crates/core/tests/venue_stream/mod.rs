//! The random command streams of the venue tests (`venue.rs`, `venue_commands.rs`):
//! three instruments, five accounts, every kind of order, cancels, amends, deposits
//! and withdrawals as replay-format lines, and, for the venue's own commands, halts,
//! resumes and cancel-alls mixed in, and in `random_venue_stream_with_limits`
//! set-limits too (as the lines `write_command` prints for them, which `command_of`
//! reads). `snapshot.rs` draws its own streams over the same
//! markets with `stream_of`, `random_terms` and `random_order_line`.
#![allow(dead_code)]

use std::borrow::Cow;

use bourse_core::format::parse_line;
use bourse_core::{AccountRef, Command, TimestampNs};
use serde_json::Value;

use crate::random::Random;

pub struct Market {
    pub symbol: &'static str,
    pub base: &'static str,
    pub quote: &'static str,
    pub tick_units: i64,
    pub price_decimals: u32,
    pub lot_units: i64,
    pub qty_decimals: u32,
    pub centre_ticks: i64,
}

pub const MARKETS: [Market; 3] = [
    Market {
        symbol: "BTC-USD",
        base: "BTC",
        quote: "USD",
        tick_units: 5,
        price_decimals: 1,
        lot_units: 1,
        qty_decimals: 3,
        centre_ticks: 200,
    },
    Market {
        symbol: "ETH-USD",
        base: "ETH",
        quote: "USD",
        tick_units: 1,
        price_decimals: 2,
        lot_units: 1,
        qty_decimals: 1,
        centre_ticks: 3_000,
    },
    Market {
        symbol: "X-BTC",
        base: "X",
        quote: "BTC",
        tick_units: 1,
        price_decimals: 5,
        lot_units: 5,
        qty_decimals: 0,
        centre_ticks: 150,
    },
];

/// USD has 6 decimals, so that every instrument's decimals fit (tick + lot <= quote).
pub const DEFINITIONS: [&str; 7] = [
    r#"{"cmd":"asset","asset":"USD","decimals":6}"#,
    r#"{"cmd":"asset","asset":"BTC","decimals":8}"#,
    r#"{"cmd":"asset","asset":"ETH","decimals":4}"#,
    r#"{"cmd":"asset","asset":"X","decimals":0}"#,
    r#"{"cmd":"instrument","symbol":"BTC-USD","base":"BTC","quote":"USD","tick":"0.5","lot":"0.001","min_qty":"0.001","max_qty":"100","maker_fee_bps":10,"taker_fee_bps":20,"market_band_bps":500}"#,
    r#"{"cmd":"instrument","symbol":"ETH-USD","base":"ETH","quote":"USD","tick":"0.01","lot":"0.1","min_qty":"0.2","max_qty":"1000","maker_fee_bps":0,"taker_fee_bps":5,"market_band_bps":1000}"#,
    r#"{"cmd":"instrument","symbol":"X-BTC","base":"X","quote":"BTC","tick":"0.00001","lot":"5","min_qty":"5","max_qty":"5000","maker_fee_bps":25,"taker_fee_bps":25,"market_band_bps":200}"#,
];

/// `zed` never deposits: its orders are rejected and it never gets an id. `alice`
/// sends about half the commands, so that she finishes more than
/// `FINISHED_ORDERS_KEPT` orders in a long stream and forgets some.
pub const ACCOUNTS: [&str; 9] =
    ["alice", "alice", "alice", "alice", "alice", "bob", "carol", "dave", "zed"];

pub fn decimal(units: i64, decimals: u32) -> String {
    let scale = 10i64.pow(decimals);
    if decimals == 0 {
        return units.to_string();
    }
    format!("{}.{:0width$}", units / scale, units % scale, width = decimals as usize)
}

pub fn deposit_line(account: &str, asset: &str, whole: u64) -> String {
    format!(r#"{{"cmd":"deposit","account":"{account}","asset":"{asset}","amount":"{whole}"}}"#)
}

/// Definitions, deposits, then random orders (every time in force, post-only, every
/// stp mode, market orders), cancels, amends, deposits, withdrawals and timestamps.
/// Order ids come from a small pool (`p0`..`p29`, reused: finished ones are rejected
/// while remembered) or are fresh (`f1`, `f2`, ...; cancels and amends aim at recent
/// ones, for the account that placed them).
pub fn random_stream(seed: u64, commands: usize) -> Vec<String> {
    let mut random = Random(seed);
    let mut owners: Vec<&'static str> = Vec::new();
    let accounts = ["alice", "bob", "carol", "dave"];
    stream_of(&mut random, &DEFINITIONS, &accounts, commands, |random| {
        random_command(random, &mut owners)
    })
}

/// `lines` with every pool id (`p…`) made fresh (`u{index}-…`), so that no finished id
/// is ever reused.
pub fn with_fresh_ids(lines: Vec<String>) -> Vec<String> {
    lines
        .into_iter()
        .enumerate()
        .map(|(index, line)| line.replace(r#""id":"p"#, &format!(r#""id":"u{index}-"#)))
        .collect()
}

/// `definitions`, deposits for each of `accounts` (10,000,000 USD, 5,000 BTC, 50,000
/// ETH, 500,000 X), then `commands` lines of `command`, about one in five of them with
/// a timestamp later than the one before.
pub fn stream_of(
    random: &mut Random,
    definitions: &[&str],
    accounts: &[&str],
    commands: usize,
    mut command: impl FnMut(&mut Random) -> String,
) -> Vec<String> {
    let mut lines: Vec<String> = definitions.iter().map(|line| line.to_string()).collect();
    for account in accounts {
        for (asset, whole) in [("USD", 10_000_000), ("BTC", 5_000), ("ETH", 50_000), ("X", 500_000)]
        {
            lines.push(deposit_line(account, asset, whole));
        }
    }
    let mut ts = 1_700_000_000_000_000_000u64;
    for _ in 0..commands {
        let line = command(random);
        let line = match random.below(5) {
            0 => {
                ts += random.below(1_000_000);
                format!(r#"{},"ts":{ts}}}"#, &line[..line.len() - 1])
            }
            _ => line,
        };
        lines.push(line);
    }
    lines
}

/// What a random command is about: a market, a side, a price either side of the
/// market's centre (sometimes across it) and a quantity, in the market's units.
pub struct Terms {
    pub market: &'static Market,
    pub side: &'static str,
    pub price: String,
    pub qty: String,
    /// What `qty` costs at `price`, in the quote asset: a spend-amount buy's `quote_qty`.
    pub notional: String,
}

pub fn random_terms(random: &mut Random) -> Terms {
    let market = &MARKETS[random.below(MARKETS.len() as u64) as usize];
    let side = random.pick(&["buy", "sell"]);
    let ticks = match side {
        "buy" => market.centre_ticks + 3 - random.below(30) as i64,
        _ => market.centre_ticks - 3 + random.below(30) as i64,
    };
    let price = decimal(ticks * market.tick_units, market.price_decimals);
    let lots_max = if random.below(4) == 0 { 400 } else { 40 };
    let lots = 1 + random.below(lots_max) as i64;
    let qty = decimal(lots * market.lot_units, market.qty_decimals);
    let notional = decimal(
        ticks * market.tick_units * lots * market.lot_units,
        market.price_decimals + market.qty_decimals,
    );
    Terms { market, side, price, qty, notional }
}

/// An order of `account` with id `id` on `terms`: any time in force (mostly gtc), any
/// stp mode, now and then post-only, now and then a market order, half of those naming
/// what they spend (`quote_qty`: rejected on a sell or with `fok`).
pub fn random_order_line(random: &mut Random, account: &str, id: &str, terms: &Terms) -> String {
    let Terms { market, side, price, qty, notional } = terms;
    let symbol = market.symbol;
    let tif = random.pick(&["gtc", "gtc", "gtc", "gtc", "ioc", "fok"]);
    let stp = random.pick(&["none", "cancel_taker", "cancel_maker", "cancel_both"]);
    let post_only = random.below(6) == 0;
    let (kind, size) = if random.below(12) == 0 {
        let size = match random.below(2) {
            0 => format!(r#""quote_qty":"{notional}""#),
            _ => format!(r#""qty":"{qty}""#),
        };
        (r#""type":"market""#.to_string(), size)
    } else {
        (format!(r#""type":"limit","price":"{price}""#), format!(r#""qty":"{qty}""#))
    };
    format!(
        r#"{{"cmd":"order","account":"{account}","id":"{id}","symbol":"{symbol}","side":"{side}",{kind},{size},"tif":"{tif}","stp":"{stp}","post_only":{post_only}}}"#
    )
}

/// One random command; `owners[n]` is the account that placed fresh id `f{n}`.
pub fn random_command(random: &mut Random, owners: &mut Vec<&'static str>) -> String {
    let mut account = random.pick(&ACCOUNTS);
    let terms = random_terms(random);
    let Terms { market, price, qty, .. } = &terms;
    let pool_id = format!("p{}", random.below(30));
    let kind = random.below(40);
    let existing_id = if (20..=36).contains(&kind) && !owners.is_empty() && random.below(3) != 0 {
        let fresh = owners.len() - 1 - random.below(owners.len().min(20) as u64) as usize;
        account = owners[fresh];
        format!("f{fresh}")
    } else {
        pool_id.clone()
    };
    match kind {
        0..=19 => {
            let id = if random.below(3) == 0 {
                pool_id
            } else {
                owners.push(account);
                format!("f{}", owners.len() - 1)
            };
            random_order_line(random, account, &id, &terms)
        }
        20..=26 => format!(r#"{{"cmd":"cancel","account":"{account}","id":"{existing_id}"}}"#),
        27..=30 => {
            format!(r#"{{"cmd":"amend","account":"{account}","id":"{existing_id}","qty":"{qty}"}}"#)
        }
        31..=34 => format!(
            r#"{{"cmd":"amend","account":"{account}","id":"{existing_id}","price":"{price}"}}"#
        ),
        35 => format!(
            r#"{{"cmd":"amend","account":"{account}","id":"{existing_id}","price":"{price}","qty":"{qty}"}}"#
        ),
        36 => format!(
            r#"{{"cmd":"order","account":"{account}","id":"{existing_id}","symbol":"NOPE","side":"buy","type":"market","qty":"1"}}"#
        ),
        37 => deposit_line(account, market.quote, 1 + random.below(1_000)),
        38 => format!(
            r#"{{"cmd":"withdraw","account":"{account}","asset":"{}","amount":"{}"}}"#,
            market.base,
            1 + random.below(3)
        ),
        _ => r#"{"cmd":"asset","asset":"X","decimals":0}"#.to_string(),
    }
}

/// `random_stream`, with the venue's own commands mixed in: about one command in 60 is
/// a halt, one in 24 a resume (of a random instrument, now and then an unknown symbol)
/// and one in 50 a cancel-all (of a random account, `nobody` included, on all
/// instruments or one). Such lines do not parse as replay-format lines: read them with
/// `command_of`.
pub fn random_venue_stream(seed: u64, commands: usize) -> Vec<String> {
    let mut random = Random(seed ^ 0x7e57_ab1e);
    let mut lines = random_stream(seed, commands);
    let mut mixed = Vec::with_capacity(lines.len() + commands / 8);
    let definitions = DEFINITIONS.len() + 16;
    for (index, line) in lines.drain(..).enumerate() {
        if index >= definitions {
            if let Some(venue_line) = random_venue_command(&mut random) {
                mixed.push(venue_line);
            }
        }
        mixed.push(line);
    }
    mixed
}

/// `random_venue_stream`, with about one command in 250 a `set_limits` of a small limit
/// (0, no limit, now and then), so that accounts meet the limit often and leave it by
/// cancels, fills and cancel-alls.
pub fn random_venue_stream_with_limits(seed: u64, commands: usize) -> Vec<String> {
    let mut random = Random(seed ^ 0x0011_1175_eeed);
    let lines = random_venue_stream(seed, commands);
    let definitions = DEFINITIONS.len() + 16;
    let mut mixed = Vec::with_capacity(lines.len() + commands / 100);
    for (index, line) in lines.into_iter().enumerate() {
        if index >= definitions && random.below(250) == 0 {
            let limit = [0, 1, 2, 3, 3, 5, 8, 13][random.below(8) as usize];
            mixed.push(format!(r#"{{"cmd":"set_limits","open_orders_per_account":{limit}}}"#));
        }
        mixed.push(line);
    }
    mixed
}

fn random_symbol(random: &mut Random) -> &'static str {
    match random.below(12) {
        0 => "NOPE",
        _ => MARKETS[random.below(MARKETS.len() as u64) as usize].symbol,
    }
}

fn random_venue_command(random: &mut Random) -> Option<String> {
    let roll = random.below(600);
    let line = if roll < 10 {
        format!(r#"{{"cmd":"halt","symbol":"{}"}}"#, random_symbol(random))
    } else if roll < 35 {
        format!(r#"{{"cmd":"resume","symbol":"{}"}}"#, random_symbol(random))
    } else if roll < 47 {
        let account = random.pick(&["alice", "bob", "carol", "dave", "zed", "nobody"]);
        match random.below(2) {
            0 => format!(r#"{{"cmd":"cancel_all","account":"{account}"}}"#),
            _ => format!(
                r#"{{"cmd":"cancel_all","account":"{account}","symbol":"{}"}}"#,
                random_symbol(random)
            ),
        }
    } else {
        return None;
    };
    Some(line)
}

/// The command of a line: a replay-format line as `parse_line` reads it, or one of the
/// venue's own commands as `write_command` prints them.
pub fn command_of(line: &str) -> (Command<'_>, Option<TimestampNs>) {
    if let Ok(parsed) = parse_line(line) {
        return (parsed.command, parsed.ts);
    }
    let value: Value = serde_json::from_str(line).unwrap_or_else(|_| panic!("not JSON: {line}"));
    let text = |key: &str| value[key].as_str().map(|text| Cow::Owned(text.to_string()));
    let command: Command<'static> = match value["cmd"].as_str() {
        Some("halt") => Command::Halt { symbol: text("symbol").expect("a symbol") },
        Some("resume") => Command::Resume { symbol: text("symbol").expect("a symbol") },
        Some("cancel_all") => Command::CancelAll {
            account: AccountRef::Name(text("account").expect("an account")),
            symbol: text("symbol"),
        },
        Some("set_limits") => Command::SetLimits {
            open_orders_per_account: value["open_orders_per_account"].as_u64().expect("a limit"),
        },
        _ => panic!("neither a replay-format line nor a venue command: {line}"),
    };
    (command, value["ts"].as_u64().map(TimestampNs))
}
