//! Cache hints (`Lookahead`) must change nothing but speed: a stream applied with a
//! hint before every command gives the same events, text for text, and the same final
//! state as the stream applied cold, and hints laid for other commands than the ones
//! applied (stale trails) are just as harmless.

use bourse_core::format::{parse_line, state_digest, write_event};
use bourse_core::{AccountRef, Command, Exchange, Lookahead, Seq};

mod random;

use random::Random;

/// Three books of many resting orders (so that trails find real orders, levels and
/// makers), with cancels and amends of orders that the previous commands may just have
/// filled, moved or cancelled, reused ids, takers that sweep several levels, market
/// orders, self-trade prevention, an account that never exists (`zed`) and a few
/// commands the engine rejects.
fn random_stream(seed: u64, commands: usize) -> Vec<String> {
    let mut random = Random(seed);
    let symbols = ["A-USD", "B-USD", "C-USD"];
    let accounts = ["alice", "bob", "carol", "dave", "erin", "zed"];
    let mut lines = vec![r#"{"cmd":"asset","asset":"USD","decimals":2}"#.to_string()];
    for symbol in symbols {
        let base = &symbol[..1];
        lines.push(format!(r#"{{"cmd":"asset","asset":"{base}","decimals":4}}"#));
        lines.push(format!(
            r#"{{"cmd":"instrument","symbol":"{symbol}","base":"{base}","quote":"USD","tick":"1","lot":"0.01","min_qty":"0.01","max_qty":"1000","maker_fee_bps":5,"taker_fee_bps":10,"market_band_bps":1000}}"#
        ));
        for account in &accounts[..5] {
            for asset in [base, "USD"] {
                lines.push(format!(
                    r#"{{"cmd":"deposit","account":"{account}","asset":"{asset}","amount":"100000000"}}"#
                ));
            }
        }
    }
    for _ in 0..commands {
        let account = random.pick(&accounts);
        let id = format!("o{}", random.below(150));
        let symbol = random.pick(&symbols);
        let side = random.pick(&["buy", "sell"]);
        // Mostly resting prices either side of 1000, sometimes across it.
        let price = match side {
            "buy" => 1_003 - random.below(40),
            _ => 997 + random.below(40),
        };
        let qty = format!("{}.{:02}", random.below(3), 1 + random.below(99));
        let line = match random.below(20) {
            0..=7 => {
                let tif = random.pick(&["gtc", "gtc", "gtc", "gtc", "ioc", "fok"]);
                let stp =
                    random.pick(&["none", "none", "cancel_taker", "cancel_maker", "cancel_both"]);
                let kind = if random.below(15) == 0 {
                    r#""type":"market""#.to_string()
                } else {
                    format!(r#""type":"limit","price":"{price}""#)
                };
                format!(
                    r#"{{"cmd":"order","account":"{account}","id":"{id}","symbol":"{symbol}","side":"{side}",{kind},"qty":"{qty}","tif":"{tif}","stp":"{stp}"}}"#
                )
            }
            8..=10 => format!(r#"{{"cmd":"cancel","account":"{account}","id":"{id}"}}"#),
            11 => format!(r#"{{"cmd":"amend","account":"{account}","id":"{id}","qty":"{qty}"}}"#),
            12 => format!(r#"{{"cmd":"amend","account":"{account}","id":"{id}","price":"0.5"}}"#),
            _ => {
                format!(r#"{{"cmd":"amend","account":"{account}","id":"{id}","price":"{price}"}}"#)
            }
        };
        lines.push(line);
    }
    lines
}

/// How `run` gives hints.
#[derive(Clone, Copy, PartialEq)]
enum Hints {
    None,
    /// For the commands that really come next.
    Ahead,
    /// For commands taken from elsewhere in the stream: every trail is stale.
    Misplaced,
}

/// Applies `lines`, naming known accounts by id when `by_id`; returns the printed
/// events and the final state's digest.
fn run(lines: &[String], by_id: bool, hints: Hints) -> (Vec<String>, String) {
    let mut commands: Vec<Command<'_>> =
        lines.iter().map(|line| parse_line(line).expect("a well-formed line").command).collect();
    let mut exchange = Exchange::default();
    let mut lookahead = Lookahead::with_min_open_orders(0);
    let mut events = Vec::new();
    let mut printed = Vec::new();
    for index in 0..commands.len() {
        if by_id {
            if let Some(AccountRef::Name(name)) = commands[index].account_mut() {
                if let Some(id) = exchange.ledger().find_account(name) {
                    *commands[index].account_mut().expect("named an account") = AccountRef::Id(id);
                }
            }
        }
        match hints {
            Hints::None => {}
            Hints::Ahead => lookahead.hint(&exchange, &commands[index + 1..]),
            Hints::Misplaced => {
                let elsewhere = (index * 7_919 + 13) % commands.len();
                lookahead.hint(&exchange, &commands[elsewhere..]);
            }
        }
        exchange.apply(Seq(index as u64 + 1), None, &commands[index], &mut events);
        for event in events.drain(..) {
            let mut text = String::new();
            write_event(&mut text, &exchange, Some(&commands[index]), &event);
            printed.push(text);
        }
    }
    exchange.check_invariants().expect("invariants hold");
    (printed, state_digest(&exchange))
}

#[test]
fn hints_change_no_event_and_no_state() {
    for seed in 1..=12 {
        let lines = random_stream(seed * 104_729, 4_000);
        let by_id = seed % 2 == 0;
        let (cold_events, cold_digest) = run(&lines, by_id, Hints::None);
        let trades = cold_events.iter().filter(|event| event.contains(r#""trade""#)).count();
        let amended = cold_events.iter().filter(|event| event.contains(r#""amended""#)).count();
        let canceled = cold_events.iter().filter(|event| event.contains(r#""canceled""#)).count();
        assert!(
            trades > 300 && amended > 200 && canceled > 80,
            "seed {seed}: {trades} trades, {amended} amends, {canceled} cancels"
        );
        for hints in [Hints::Ahead, Hints::Misplaced] {
            let (events, digest) = run(&lines, by_id, hints);
            assert!(events == cold_events, "seed {seed}: events differ with hints");
            assert_eq!(digest, cold_digest, "seed {seed}");
        }
    }
}
