//! Orders, cancels and amends may name their account by id (`AccountRef::Id`), as a
//! gateway does once its client has logged in. Doing so must change nothing: the same
//! stream with every known account turned into its id gives the same events, text for
//! text, and the same final state.

use std::borrow::Cow;

use bourse_core::format::{parse_line, state_digest, write_event};
use bourse_core::ids::AccountId;
use bourse_core::{AccountRef, Command, Event, Exchange, RejectReason, Seq};

mod random;

use random::Random;

/// A stream that exercises every way an account is named: accounts that exist, one
/// that never does (`zed`), reused and duplicate ids, crossing prices, self-trades.
fn random_stream(seed: u64, commands: usize) -> Vec<String> {
    let mut random = Random(seed);
    let mut lines = vec![
        r#"{"cmd":"asset","asset":"BTC","decimals":8}"#.to_string(),
        r#"{"cmd":"asset","asset":"USD","decimals":2}"#.to_string(),
        r#"{"cmd":"instrument","symbol":"BTC-USD","base":"BTC","quote":"USD","tick":"1","lot":"0.01","min_qty":"0.01","max_qty":"100","maker_fee_bps":5,"taker_fee_bps":10,"market_band_bps":1000}"#.to_string(),
    ];
    let accounts = ["alice", "bob", "carol", "dave", "zed"];
    for _ in 0..commands {
        let account = random.pick(&accounts);
        let id = format!("o{}", random.below(12));
        let price = 95 + random.below(11);
        let qty = format!("0.{:02}", 1 + random.below(99));
        let side = random.pick(&["buy", "sell"]);
        let line = match random.below(10) {
            0 if account != "zed" => {
                let asset = random.pick(&["BTC", "USD"]);
                format!(
                    r#"{{"cmd":"deposit","account":"{account}","asset":"{asset}","amount":"1000"}}"#
                )
            }
            0..=4 => {
                let tif = random.pick(&["gtc", "gtc", "ioc", "fok"]);
                let stp = random.pick(&["cancel_taker", "cancel_maker", "cancel_both", "none"]);
                let kind = if random.below(8) == 0 {
                    r#""type":"market""#.to_string()
                } else {
                    format!(r#""type":"limit","price":"{price}""#)
                };
                format!(
                    r#"{{"cmd":"order","account":"{account}","id":"{id}","symbol":"BTC-USD","side":"{side}",{kind},"qty":"{qty}","tif":"{tif}","stp":"{stp}"}}"#
                )
            }
            5..=6 => format!(r#"{{"cmd":"cancel","account":"{account}","id":"{id}"}}"#),
            _ => format!(
                r#"{{"cmd":"amend","account":"{account}","id":"{id}","price":"{price}","qty":"{qty}"}}"#
            ),
        };
        lines.push(line);
    }
    lines
}

/// Replays `lines`, naming accounts by id when `by_id` and the account exists (the way
/// a gateway resolves its client's account at login); returns the printed events and
/// the final state's digest.
fn run(lines: &[String], by_id: bool) -> (Vec<String>, String) {
    let mut exchange = Exchange::default();
    let mut events = Vec::new();
    let mut printed = Vec::new();
    for (index, line) in lines.iter().enumerate() {
        let mut command = parse_line(line).expect("a well-formed line").command;
        if by_id {
            if let Some(account) = command.account_mut() {
                let known = match account {
                    AccountRef::Name(name) => exchange.ledger().find_account(name),
                    AccountRef::Id(id) => Some(*id),
                };
                if let Some(id) = known {
                    *account = AccountRef::Id(id);
                }
            }
        }
        exchange.apply(Seq(index as u64 + 1), None, &command, &mut events);
        for event in events.drain(..) {
            let mut text = String::new();
            write_event(&mut text, &exchange, Some(&command), &event);
            printed.push(text);
        }
        exchange.check_invariants().expect("invariants hold");
    }
    (printed, state_digest(&exchange))
}

#[test]
fn naming_accounts_by_id_gives_the_same_events_and_state_as_by_name() {
    for seed in 1..=20 {
        let lines = random_stream(seed * 7919, 3_000);
        let (events_by_name, digest_by_name) = run(&lines, false);
        let (events_by_id, digest_by_id) = run(&lines, true);
        let trades = events_by_name.iter().filter(|event| event.contains(r#""trade""#)).count();
        let amended = events_by_name.iter().filter(|event| event.contains(r#""amended""#)).count();
        assert!(trades > 20 && amended > 20, "seed {seed}: {trades} trades, {amended} amends");
        assert_eq!(events_by_name, events_by_id, "seed {seed}");
        assert_eq!(digest_by_name, digest_by_id, "seed {seed}");
    }
}

#[test]
fn an_id_that_names_no_account_is_treated_like_an_unknown_name() {
    let lines = random_stream(42, 200);
    let mut exchange = Exchange::default();
    let mut events = Vec::new();
    for (index, line) in lines.iter().enumerate() {
        let command = parse_line(line).expect("a well-formed line").command;
        exchange.apply(Seq(index as u64 + 1), None, &command, &mut events);
    }
    let unknown = AccountRef::Id(AccountId(exchange.ledger().accounts().len() as u32 + 7));
    let order_line = r#"{"cmd":"order","account":"x","id":"n1","symbol":"BTC-USD","side":"buy","type":"limit","price":"100","qty":"0.01"}"#;
    let mut order = parse_line(order_line).expect("a well-formed line").command;
    let cancel = Command::Cancel { account: unknown.clone(), id: Cow::Borrowed("o1") };
    let amend_line = r#"{"cmd":"amend","account":"x","id":"o1","qty":"0.01"}"#;
    let mut amend = parse_line(amend_line).expect("a well-formed line").command;
    *order.account_mut().expect("an order names an account") = unknown.clone();
    *amend.account_mut().expect("an amend names an account") = unknown.clone();

    let expected_name = format!("#{}", exchange.ledger().accounts().len() + 7);
    for (command, reason) in [
        (order, RejectReason::InsufficientFunds),
        (cancel, RejectReason::UnknownOrder),
        (amend, RejectReason::UnknownOrder),
    ] {
        events.clear();
        exchange.apply(Seq(1_000), None, &command, &mut events);
        match events.as_slice() {
            [event @ Event::Rejected { reason: got, .. }] => {
                assert_eq!(*got, reason);
                // The printer echoes the id as `#` and its number.
                let mut printed = String::new();
                write_event(&mut printed, &exchange, Some(&command), event);
                let printed: serde_json::Value = serde_json::from_str(&printed).unwrap();
                assert_eq!(printed["account"], expected_name.as_str());
            }
            other => panic!("expected one rejection, got {other:?}"),
        }
    }
    exchange.check_invariants().expect("invariants hold");
}
