//! The ledger's recorded moves (`Venue::record_balance_changes`), which the history
//! keeps as its balance ledger: over random venue streams (every kind of order,
//! cancels, amends, transfers, halts and cancel-alls), recording changes neither the
//! events nor the state; each command's changes, added up from zero, give every
//! balance the ledger holds after it (`after` is the balance right after each change);
//! per asset they sum to what the command moved in or out; and the changes of the k-th
//! fill are the moves between the two parties of the command's k-th `trade` event.

mod random;
mod venue_stream;

use std::collections::HashMap;

use bourse_core::ledger::{Balance, BalanceChange, BalanceMove};
use bourse_core::{Amount, Command, Event, Exchange, ExchangeConfig, Seq, Venue};
use venue_stream::{command_of, random_venue_stream};

fn venue(record: bool) -> Venue {
    let mut venue = Venue::new(Exchange::new(ExchangeConfig::default()), true);
    venue.record_balance_changes(record);
    venue
}

#[test]
fn recorded_changes_account_for_every_balance() {
    for seed in 1..=6u64 {
        let lines = random_venue_stream(seed, 3_000);
        let mut recording = venue(true);
        let mut plain = venue(false);
        let mut running: HashMap<(u32, u32), Balance> = HashMap::new();
        let (mut events, mut plain_events, mut changes) = (Vec::new(), Vec::new(), Vec::new());
        let mut fills_seen = 0usize;
        for (index, line) in lines.iter().enumerate() {
            let seq = index as u64 + 1;
            let (command, ts) = command_of(line);
            events.clear();
            plain_events.clear();
            changes.clear();
            recording.apply(Seq(seq), ts, &command, &mut events);
            plain.apply(Seq(seq), ts, &command, &mut plain_events);
            assert_eq!(events, plain_events, "recording changed the events of {line}");
            recording.take_balance_changes(&mut changes);
            check_sums(&recording, &command, &events, &changes, line);
            fills_seen += check_fills(&events, &changes, line);
            for change in &changes {
                let balance = running.entry((change.account.0, change.asset.0)).or_default();
                balance.available += change.available_delta;
                balance.held += change.held_delta;
                assert_eq!(*balance, change.after, "a change's balance after, at {line}");
            }
            for ((account, asset), balance) in &running {
                let ledger = recording.exchange().ledger();
                let actual = ledger.balance(
                    bourse_core::ids::AccountId(*account),
                    bourse_core::ids::AssetId(*asset),
                );
                assert_eq!(*balance, actual, "running balance after {line}");
            }
        }
        assert!(fills_seen > 50, "the stream of seed {seed} filled only {fills_seen} times");
        let mut none = Vec::new();
        plain.take_balance_changes(&mut none);
        assert!(none.is_empty(), "a ledger that does not record has no changes");
    }
}

/// Per asset, a command's changes move exactly its deposit in or its withdrawal out
/// (fees count as kept by the exchange); every other command moves nothing in or out.
fn check_sums(
    venue: &Venue,
    command: &Command<'_>,
    events: &[Event],
    changes: &[BalanceChange],
    line: &str,
) {
    let mut net: HashMap<u32, i64> = HashMap::new();
    for change in changes {
        *net.entry(change.asset.0).or_default() +=
            (change.available_delta + change.held_delta + change.fee).0;
        match change.movement {
            BalanceMove::Hold | BalanceMove::Release => {
                assert_eq!(change.available_delta + change.held_delta, Amount::ZERO, "{line}")
            }
            BalanceMove::Pay => assert_eq!(change.available_delta, Amount::ZERO, "{line}"),
            BalanceMove::Receive | BalanceMove::Deposit | BalanceMove::Withdrawal => {
                assert_eq!(change.held_delta, Amount::ZERO, "{line}")
            }
            // Futures moves; this test's streams are spot only.
            BalanceMove::Fee
            | BalanceMove::RealisedProfit
            | BalanceMove::Settlement
            | BalanceMove::Margin => panic!("a futures move on a spot stream: {line}"),
        }
        if change.movement != BalanceMove::Receive {
            assert_eq!(change.fee, Amount::ZERO, "{line}");
        }
    }
    let accepted = matches!(events.first(), Some(Event::Accepted { .. }));
    let moved_in = match command {
        Command::Deposit(transfer) | Command::Withdraw(transfer) if accepted => {
            let asset = venue
                .exchange()
                .assets()
                .iter()
                .position(|spec| spec.name == transfer.asset)
                .expect("an accepted transfer's asset exists") as u32;
            let change = changes.iter().find(|change| change.asset.0 == asset).expect("a change");
            assert!(matches!(change.movement, BalanceMove::Deposit | BalanceMove::Withdrawal));
            Some((asset, change.available_delta.0))
        }
        _ => None,
    };
    for (asset, sum) in net {
        let expected = match moved_in {
            Some((moved_asset, amount)) if moved_asset == asset => amount,
            _ => 0,
        };
        assert_eq!(sum, expected, "asset {asset} is not conserved by {line}");
    }
}

/// The changes tagged with fill k move money between the two parties of the k-th trade
/// event, one pay and one receive per asset; returns how many trades there were.
fn check_fills(events: &[Event], changes: &[BalanceChange], line: &str) -> usize {
    let trades: Vec<_> = events
        .iter()
        .filter_map(|event| match event {
            Event::Trade(trade) => Some(trade),
            _ => None,
        })
        .collect();
    for change in changes {
        assert!(change.trade as usize <= trades.len(), "fill {} of {line}", change.trade);
        if change.trade == 0 {
            assert!(!matches!(change.movement, BalanceMove::Pay | BalanceMove::Receive), "{line}");
            continue;
        }
        let trade = trades[change.trade as usize - 1];
        assert!(
            change.account == trade.maker_account || change.account == trade.taker_account,
            "fill {} of {line} moves a third account's money",
            change.trade
        );
    }
    for (index, _) in trades.iter().enumerate() {
        let of_fill = changes.iter().filter(|change| change.trade as usize == index + 1);
        let pays = of_fill.clone().filter(|change| change.movement == BalanceMove::Pay).count();
        let receives = of_fill.filter(|change| change.movement == BalanceMove::Receive).count();
        assert_eq!((pays, receives), (2, 2), "fill {} of {line}", index + 1);
    }
    trades.len()
}
