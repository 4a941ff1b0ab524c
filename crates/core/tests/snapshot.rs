//! Snapshots (`bourse_core::snapshot`) must restore the exact state: an exchange decoded
//! from a snapshot taken at any point of a command stream goes on to print exactly the
//! events the original prints, and ends with the same digest and the same snapshot
//! bytes. Encoding is canonical (decoding and encoding again gives the same bytes), and
//! no bytes, truncated, flipped or random, can make decoding panic: they give an error,
//! or an exchange whose invariants hold.

use std::borrow::Cow;

use bourse_core::command::{
    InstrumentCommand, OrderCommand, OrderSize, OrderType, TransferCommand,
};
use bourse_core::format::{parse_line, state_digest, state_document, write_event};
use bourse_core::ids::{AccountId, InstrumentId, Seq, TimestampNs};
use bourse_core::snapshot::{decode_state, encode_state, SnapshotError, FORMAT_VERSION, MAGIC};
use bourse_core::{
    AccountRef, Command, Decimal, Event, Exchange, ExchangeConfig, Offset, Side, StpMode,
    TimeInForce,
};

mod random;
mod snapshot_bytes;
mod support;
mod venue_stream;

use random::Random;
use snapshot_bytes::{state_bytes, tiny_config};
use venue_stream::{deposit_line, random_order_line, random_terms, stream_of, Terms, DEFINITIONS};

// ----------------------------------------------------------------------------------
// Random streams

/// `zed` never deposits: its orders are rejected and it never gets an id.
const ACCOUNTS: [&str; 6] = ["alice", "bob", "carol", "dave", "erin", "zed"];

/// Definitions, deposits, then `commands` random orders (every time in force,
/// post-only, every stp mode, market orders), cancels, amends of price and quantity
/// (up and down, so orders move and partly filled orders keep their fills), deposits,
/// withdrawals and timestamps, over a small pool of ids that get reused.
fn random_stream(seed: u64, commands: usize) -> Vec<String> {
    let mut random = Random(seed);
    stream_of(&mut random, &DEFINITIONS, &ACCOUNTS[..5], commands, random_command)
}

fn random_command(random: &mut Random) -> String {
    let account = random.pick(&ACCOUNTS);
    let id = format!("o{}", random.below(40));
    let terms = random_terms(random);
    let Terms { market, price, qty, .. } = &terms;
    match random.below(40) {
        0..=17 => random_order_line(random, account, &id, &terms),
        18..=23 => format!(r#"{{"cmd":"cancel","account":"{account}","id":"{id}"}}"#),
        24..=28 => format!(r#"{{"cmd":"amend","account":"{account}","id":"{id}","qty":"{qty}"}}"#),
        29..=33 => {
            format!(r#"{{"cmd":"amend","account":"{account}","id":"{id}","price":"{price}"}}"#)
        }
        34..=35 => format!(
            r#"{{"cmd":"amend","account":"{account}","id":"{id}","price":"{price}","qty":"{qty}"}}"#
        ),
        36 => format!(r#"{{"cmd":"amend","account":"{account}","id":"{id}","price":"0.3"}}"#),
        37 => deposit_line(account, market.quote, 1 + random.below(1_000)),
        _ => format!(
            r#"{{"cmd":"withdraw","account":"{account}","asset":"{}","amount":"{}"}}"#,
            market.base,
            1 + random.below(3)
        ),
    }
}

/// The command of `line`, naming its account by id (as a gateway would) when the
/// account exists in `exchange` and `by_id`; sometimes by an id that names nobody.
fn command_for<'line>(
    line: &'line str,
    exchange: &Exchange,
    by_id: bool,
    random: &mut Random,
) -> (Command<'line>, Option<TimestampNs>) {
    let parsed = parse_line(line).expect("a well-formed line");
    let mut command = parsed.command;
    if by_id {
        if let Some(account) = command.account_mut() {
            if let AccountRef::Name(name) = account {
                if let Some(id) = exchange.ledger().find_account(name) {
                    *account = AccountRef::Id(id);
                } else if random.below(2) == 0 {
                    *account = AccountRef::Id(AccountId(77));
                }
            }
        }
    }
    (command, parsed.ts)
}

/// Applies one command and returns its events as printed lines.
fn apply(
    exchange: &mut Exchange,
    seq: u64,
    command: &Command<'_>,
    ts: Option<TimestampNs>,
) -> Vec<String> {
    let mut events: Vec<Event> = Vec::new();
    exchange.apply(Seq(seq), ts, command, &mut events);
    events
        .iter()
        .map(|event| {
            let mut text = String::new();
            write_event(&mut text, exchange, Some(command), event);
            text
        })
        .collect()
}

/// Decodes `bytes` and checks what a restored exchange must satisfy at once: the same
/// digest and state document as `original`, its invariants, and the same bytes again.
fn restore(original: &Exchange, bytes: &[u8], config: ExchangeConfig) -> Exchange {
    let restored = decode_state(bytes, config).unwrap_or_else(|error| panic!("decode: {error}"));
    restored.check_invariants().expect("a restored exchange keeps its invariants");
    assert_eq!(state_digest(&restored), state_digest(original));
    assert_eq!(state_document(&restored), state_document(original));
    assert!(state_bytes(&restored) == bytes, "encode(decode(bytes)) != bytes");
    restored
}

/// Resting orders with some fills behind them, over all books.
fn partly_filled_resting_orders(exchange: &Exchange) -> usize {
    let mut count = 0;
    for index in 0..exchange.instruments().len() {
        let book = exchange.book(InstrumentId(index as u32));
        for side in [Side::Buy, Side::Sell] {
            book.for_each_order(side, |order| count += usize::from(!order.filled.is_zero()));
        }
    }
    count
}

#[test]
fn a_restored_exchange_prints_exactly_the_events_of_the_original() {
    let mut partly_filled_at_cuts = 0;
    let mut done_events_after_cuts = 0;
    for seed in 1..=16u64 {
        let lines = random_stream(seed * 7_919, 2_500);
        let mut random = Random(seed * 31 + 1);
        // Cut 0 (nothing applied: the empty exchange), one in the definitions, random
        // cuts, and the end.
        let mut cuts = vec![0, 5, lines.len()];
        cuts.extend((0..4).map(|_| DEFINITIONS.len() + random.below(lines.len() as u64) as usize));
        cuts.sort_unstable();
        let by_id = seed % 2 == 0;

        let mut original = Exchange::default();
        let mut forks: Vec<(usize, Exchange)> = Vec::new();
        for index in 0..=lines.len() {
            if cuts.contains(&index) {
                let bytes = state_bytes(&original);
                let config = if forks.len().is_multiple_of(2) {
                    ExchangeConfig::default()
                } else {
                    tiny_config()
                };
                forks.push((index, restore(&original, &bytes, config)));
                partly_filled_at_cuts += partly_filled_resting_orders(&original);
            }
            let Some(line) = lines.get(index) else { break };
            // Ids are resolved in the original: the forks must know the same ids.
            let (command, ts) = command_for(line, &original, by_id, &mut random);
            let seq = index as u64 + 1;
            let expected = apply(&mut original, seq, &command, ts);
            for (cut, fork) in &mut forks {
                let actual = apply(fork, seq, &command, ts);
                assert!(
                    actual == expected,
                    "seed {seed}, cut {cut}, seq {seq}: {line}\n  original: {expected:?}\n  restored: {actual:?}"
                );
                if seq.is_multiple_of(250) {
                    fork.check_invariants().expect("invariants hold after the cut");
                }
                done_events_after_cuts +=
                    expected.iter().filter(|e| e.contains(r#""done""#)).count();
            }
        }
        original.check_invariants().expect("invariants hold");
        let final_bytes = state_bytes(&original);
        for (cut, fork) in &forks {
            fork.check_invariants().expect("invariants hold at the end");
            assert_eq!(state_digest(fork), state_digest(&original), "seed {seed}, cut {cut}");
            assert!(
                state_bytes(fork) == final_bytes,
                "seed {seed}, cut {cut}: final states differ"
            );
        }
    }
    assert!(partly_filled_at_cuts > 50, "{partly_filled_at_cuts} partly filled orders at cuts");
    assert!(done_events_after_cuts > 5_000, "{done_events_after_cuts} done events after cuts");
}

#[test]
fn an_amended_partly_filled_order_keeps_its_fills_and_its_account_id() {
    use support::{amend_price, asset, buy, cancel, deposit, instrument, sell};
    let setup = [
        asset("BTC", 8).to_string(),
        asset("USD", 2).to_string(),
        instrument("BTC-USD", "BTC", "USD").with("maker_fee_bps", 10).to_string(),
        deposit("alice", "BTC", "10").to_string(),
        deposit("bob", "USD", "100000").to_string(),
        deposit("carol", "USD", "100000").to_string(),
        sell("alice", "s1", "100", "5").to_string(),
        sell("alice", "s2", "100", "1").to_string(),
        buy("bob", "b1", "100", "2").to_string(),
        // Loses priority, keeps its 2 filled, now behind nothing at 101.
        amend_price("alice", "s1", "101").with("qty", "4").to_string(),
        buy("carol", "b2", "99", "1").post_only().stp("cancel_both").to_string(),
    ];
    let mut original = Exchange::default();
    for (index, line) in setup.iter().enumerate() {
        let parsed = parse_line(line).expect("well-formed");
        apply(&mut original, index as u64 + 1, &parsed.command, parsed.ts);
    }
    let bytes = state_bytes(&original);
    let mut restored = restore(&original, &bytes, tiny_config());
    let alice = original.ledger().find_account("alice").expect("alice exists");
    assert_eq!(restored.ledger().find_account("alice"), Some(alice));
    let (_, order) = restored.open_order(alice, "s1").expect("s1 rests");
    assert_eq!((order.filled.0, order.remaining.0, order.post_only), (200, 400, false));
    let (_, order) = restored.open_order(AccountId(2), "b2").expect("b2 rests");
    assert_eq!((order.stp, order.post_only), (StpMode::CancelBoth, true));

    let alice_by_id = AccountRef::Id(alice);
    let rest = [
        // Fills s2 (at 100), then 1 of s1 (at 101).
        buy("bob", "b3", "101", "2").to_string(),
        cancel("alice", "s1").to_string(),
        cancel("carol", "b2").to_string(),
    ];
    let mut done_filled = Vec::new();
    for (index, line) in rest.iter().enumerate() {
        let mut command = parse_line(line).expect("well-formed").command;
        if line.contains("alice") {
            *command.account_mut().expect("names an account") = alice_by_id.clone();
        }
        let seq = (setup.len() + index) as u64 + 1;
        let expected = apply(&mut original, seq, &command, None);
        assert_eq!(apply(&mut restored, seq, &command, None), expected);
        done_filled.extend(expected.into_iter().filter(|event| event.contains(r#""done""#)));
    }
    // s1: 2 before the amend, 1 after the snapshot.
    let s1 = done_filled.iter().find(|event| event.contains(r#""s1""#)).expect("s1 is done");
    let s1: serde_json::Value = serde_json::from_str(s1).expect("JSON");
    assert_eq!((s1["reason"].as_str(), s1["filled"].as_str()), (Some("canceled"), Some("3")));
    assert_eq!(state_bytes(&restored), state_bytes(&original));
}

#[test]
fn decoding_and_encoding_again_gives_the_same_bytes() {
    for seed in 1..=6u64 {
        let lines = random_stream(seed * 104_729, 1_500);
        let mut exchange = Exchange::default();
        let mut random = Random(seed);
        for (index, line) in lines.iter().enumerate() {
            let (command, ts) = command_for(line, &exchange, false, &mut random);
            apply(&mut exchange, index as u64 + 1, &command, ts);
        }
        let bytes = state_bytes(&exchange);
        let decoded = decode_state(&bytes, ExchangeConfig::default()).expect("decodes");
        assert!(state_bytes(&decoded) == bytes, "seed {seed}");
        // Appending leaves what `out` held before untouched.
        let mut out = b"prefix".to_vec();
        encode_state(&decoded, &mut out);
        assert!(out[..6] == *b"prefix" && out[6..] == bytes[..], "seed {seed}");
    }
}

// ----------------------------------------------------------------------------------
// Hostile bytes

/// A small state with every kind of content: a thousand commands of a stream.
fn small_snapshot(seed: u64) -> Vec<u8> {
    let lines = random_stream(seed, 1_000);
    let mut exchange = Exchange::default();
    let mut random = Random(seed);
    for (index, line) in lines.iter().enumerate() {
        let (command, ts) = command_for(line, &exchange, false, &mut random);
        apply(&mut exchange, index as u64 + 1, &command, ts);
    }
    assert!(exchange.open_order_count() > 15, "the state has resting orders");
    state_bytes(&exchange)
}

#[test]
fn every_truncation_of_a_snapshot_is_an_error() {
    let bytes = small_snapshot(3);
    for length in 0..bytes.len() {
        let result = decode_state(&bytes[..length], tiny_config());
        assert!(result.is_err(), "a snapshot cut to {length} of {} bytes decoded", bytes.len());
    }
    assert!(matches!(
        decode_state(&bytes[..bytes.len() - 1], tiny_config()),
        Err(SnapshotError::Truncated { .. })
    ));
}

/// Decoding must not panic; what it accepts must be a consistent exchange whose
/// snapshot is exactly the bytes it came from (the encoding is canonical).
fn decodes_sanely(bytes: &[u8]) -> bool {
    match decode_state(bytes, tiny_config()) {
        Err(error) => {
            assert!(!error.to_string().is_empty() && !error.code().is_empty());
            false
        }
        Ok(exchange) => {
            exchange.check_invariants().expect("an accepted snapshot is consistent");
            assert!(state_bytes(&exchange) == bytes, "an accepted snapshot re-encodes to itself");
            true
        }
    }
}

#[test]
fn flipped_bytes_give_an_error_or_a_consistent_exchange() {
    let mut random = Random(0x5eed_f11b);
    let mut accepted = 0;
    for seed in [5u64, 6, 7] {
        let bytes = small_snapshot(seed);
        for _ in 0..1_500 {
            let mut flipped = bytes.clone();
            let position = random.below(flipped.len() as u64) as usize;
            flipped[position] ^= 1 + random.below(255) as u8;
            accepted += usize::from(decodes_sanely(&flipped));
        }
    }
    // Flips inside names, ids and some balances pairs can stay valid; most cannot.
    assert!(accepted < 2_000, "{accepted} of 4,500 flipped snapshots accepted");
}

#[test]
fn random_bytes_are_not_a_snapshot() {
    let mut random = Random(0xbad_5eed);
    for round in 0..3_000 {
        let length = random.below(300) as usize;
        let mut bytes: Vec<u8> = (0..length).map(|_| random.below(256) as u8).collect();
        assert!(decode_state(&bytes, tiny_config()).is_err(), "round {round}");
        // Behind a valid header, garbage must still fail or be a consistent state.
        let mut framed = MAGIC.to_vec();
        framed.extend_from_slice(&FORMAT_VERSION.to_le_bytes());
        framed.append(&mut bytes);
        decodes_sanely(&framed);
    }
}

/// `bytes` with the first occurrence of `from` replaced by `to` (same length).
fn patched(bytes: &[u8], from: &[u8], to: &[u8]) -> Vec<u8> {
    let at = bytes.windows(from.len()).position(|window| window == from).expect("pattern found");
    let mut patched = bytes.to_vec();
    patched[at..at + to.len()].copy_from_slice(to);
    patched
}

#[test]
fn each_kind_of_bad_snapshot_has_its_error() {
    use support::{asset, buy, deposit, instrument, sell};
    let lines = [
        asset("BTC", 8).to_string(),
        asset("USD", 2).to_string(),
        instrument("BTC-USD", "BTC", "USD").to_string(),
        deposit("alice", "BTC", "10").to_string(),
        deposit("alice", "USD", "100000").to_string(),
        buy("alice", "bidA", "100", "1").to_string(),
        buy("alice", "bidB", "99", "1").to_string(),
        sell("alice", "askX", "101", "1").to_string(),
    ];
    let mut exchange = Exchange::default();
    for (index, line) in lines.iter().enumerate() {
        let parsed = parse_line(line).expect("well-formed");
        apply(&mut exchange, index as u64 + 1, &parsed.command, None);
    }
    let bytes = state_bytes(&exchange);
    assert!(decode_state(&bytes, ExchangeConfig::default()).is_ok());
    let decode = |bytes: &[u8]| decode_state(bytes, ExchangeConfig::default()).map(|_| ());

    assert_eq!(decode(b"not a snapshot at all"), Err(SnapshotError::BadMagic));
    assert_eq!(decode(&bytes[..5]), Err(SnapshotError::Truncated { offset: 5 }));
    let mut version = bytes.clone();
    version[8] = 3;
    assert_eq!(decode(&version), Err(SnapshotError::UnsupportedVersion(3)));
    let error = decode(&version).unwrap_err();
    assert_eq!(
        (error.code(), error.to_string().contains("version 3")),
        ("unsupported_version", true)
    );

    let mut trailing = bytes.clone();
    trailing.push(0);
    let error = decode(&trailing).unwrap_err();
    assert_eq!(error.code(), "invalid");
    assert_eq!(
        error,
        SnapshotError::Invalid {
            offset: bytes.len(),
            what: "bytes after the end of the snapshot".into()
        }
    );

    // Two open orders of alice named bidA.
    let error = decode(&patched(&bytes, b"bidB", b"bidA")).unwrap_err();
    assert!(error.to_string().contains("two open orders with one id"), "{error}");
    // The ask at 101 (one varint byte, 0x65) moved to 99: below the best bid.
    let error = decode(&patched(&bytes, b"\x65\x01\x00\x04askX", b"\x63")).unwrap_err();
    assert!(error.to_string().contains("crossed"), "{error}");
    // The second bid level above the first: out of priority order.
    let error = decode(&patched(&bytes, b"\x63\x01\x00\x04bidB", b"\x65")).unwrap_err();
    assert!(error.to_string().contains("priority order"), "{error}");
    // A name that is not UTF-8.
    let error = decode(&patched(&bytes, b"alice", b"\xffl")).unwrap_err();
    assert!(error.to_string().contains("UTF-8"), "{error}");
    // The time (one byte, 0, at offset 12) replaced by a varint beyond 64 bits.
    let mut huge_time = bytes[..12].to_vec();
    huge_time.extend_from_slice(&[0xff; 10]);
    huge_time.extend_from_slice(&bytes[13..]);
    assert_eq!(decode(&huge_time).unwrap_err().code(), "invalid");
}

// ----------------------------------------------------------------------------------
// Size

fn text(value: impl Into<String>) -> Cow<'static, str> {
    Cow::Owned(value.into())
}

fn units(value: i64) -> Decimal {
    Decimal::from_units(i128::from(value), 0)
}

/// An exchange with `orders` resting orders over `instruments` books (prices spread
/// over a few thousand levels a side, some far from the market) and 500 accounts.
fn exchange_with_resting_orders(orders: usize, instruments: usize) -> Exchange {
    let mut exchange = Exchange::default();
    let mut events = Vec::new();
    let mut seq = 0;
    let mut run = |exchange: &mut Exchange, command: Command<'_>| {
        seq += 1;
        exchange.apply(Seq(seq), None, &command, &mut events);
        assert!(matches!(events.first(), Some(Event::Accepted { .. })), "{command:?}: {events:?}");
        events.clear();
    };
    run(&mut exchange, Command::Asset { asset: text("USD"), decimals: 0 });
    for index in 0..instruments {
        run(&mut exchange, Command::Asset { asset: text(format!("C{index}")), decimals: 0 });
        run(
            &mut exchange,
            Command::Instrument(Box::new(InstrumentCommand {
                symbol: text(format!("C{index}-USD")),
                base: text(format!("C{index}")),
                quote: text("USD"),
                tick: units(1),
                lot: units(1),
                min_qty: units(1),
                max_qty: units(1_000_000),
                maker_fee_bps: 0,
                taker_fee_bps: 0,
                market_band_bps: 1_000,
            })),
        );
    }
    let accounts = 500;
    for account in 0..accounts {
        for index in 0..=instruments {
            let asset = if index == instruments { "USD".to_string() } else { format!("C{index}") };
            run(
                &mut exchange,
                Command::Deposit(TransferCommand {
                    account: text(format!("account{account}")),
                    asset: text(asset),
                    amount: units(1_000_000_000_000_000),
                }),
            );
        }
    }
    let mut random = Random(0x0dd_ba11);
    for number in 0..orders {
        let side = [Side::Buy, Side::Sell][number % 2];
        let behind = match random.below(10) {
            0 => 40_000 + random.below(500_000) as i64,
            _ => 1 + random.below(3_000) as i64,
        };
        let price = match side {
            Side::Buy => 1_000_000 - behind,
            Side::Sell => 1_000_000 + behind,
        };
        run(
            &mut exchange,
            Command::Order(OrderCommand {
                account: AccountRef::Id(AccountId(random.below(accounts) as u32)),
                id: text(format!("order-{number}")),
                symbol: text(format!("C{}-USD", random.below(instruments as u64))),
                side,
                order_type: OrderType::Limit { price: units(price) },
                size: OrderSize::of_qty(units(1 + random.below(100) as i64)),
                time_in_force: TimeInForce::GoodTillCancel,
                post_only: number % 7 == 0,
                stp: [StpMode::CancelTaker, StpMode::None][number % 3 / 2],
                offset: Offset::Open,
            }),
        );
    }
    exchange
}

#[test]
fn a_snapshot_of_100k_resting_orders_round_trips() {
    let exchange = exchange_with_resting_orders(100_000, 3);
    assert_eq!(exchange.open_order_count(), 100_000);
    let bytes = state_bytes(&exchange);
    let restored = restore(&exchange, &bytes, ExchangeConfig::default());
    assert_eq!(restored.open_order_count(), 100_000);
}
