//! The harness of the venue tests (`venue.rs`, `venue_commands.rs`): a funded venue fed
//! lines one at a time with its invariants checked after each, its events as JSON, and
//! what both need to name accounts by id and to check venue snapshots.
//!
//! The funded venue: BTC-USD tick 1, lot 0.01, qty 0.1..=100, no fees; ETH-USD tick
//! 0.01, lot 1, qty 1..=1000, maker 10 bps, taker 25 bps; BTC has 8 decimals, USD 2,
//! ETH 3; alice, bob and carol each hold 10 BTC, 100,000 USD and 100 ETH.
#![allow(dead_code)]

use std::fmt;

use bourse_core::format::write_event;
use bourse_core::ids::{AccountId, InstrumentId};
use bourse_core::snapshot::{decode_venue, VENUE_FORMAT_VERSION, VENUE_MAGIC};
use bourse_core::venue::{Fill, OrderRecord};
use bourse_core::{
    AccountRef, Activity, Command, Event, Exchange, ExchangeConfig, Seq, TimestampNs, Venue,
};
use serde_json::Value;

use crate::snapshot_bytes::{tiny_config, varint, venue_bytes};
use crate::support::{deposit, standard_definitions, Fed};
use crate::venue_stream::command_of;

pub const BTC_USD: InstrumentId = InstrumentId(0);
pub const ETH_USD: InstrumentId = InstrumentId(1);

/// A venue fed lines (replay-format ones, and the venue's own commands as
/// `write_command` prints them) one at a time; checks the venue's invariants (money
/// conserved, holds equal to what open orders hold, records equal to open orders,
/// halts of existing instruments) after every line.
pub struct Harness {
    pub venue: Venue,
    pub seq: u64,
}

impl Harness {
    pub fn new(track_activity: bool) -> Harness {
        Harness { venue: Venue::new(Exchange::default(), track_activity), seq: 0 }
    }

    /// The funded venue (seq 1 to 14): the standard definitions of `support`, then
    /// alice, bob and carol each with 10 BTC, 100,000 USD and 100 ETH.
    pub fn funded(track_activity: bool) -> Harness {
        let mut harness = Harness::new(track_activity);
        for line in standard_definitions() {
            harness.ok(line);
        }
        for account in ["alice", "bob", "carol"] {
            harness.ok(deposit(account, "BTC", "10"));
            harness.ok(deposit(account, "USD", "100000"));
            harness.ok(deposit(account, "ETH", "100"));
        }
        harness
    }

    pub fn feed(&mut self, line: impl fmt::Display) -> Fed {
        let line = line.to_string();
        let (command, ts) = command_of(&line);
        let events = self.apply(&command, ts);
        Fed { seq: self.seq, line, events }
    }

    /// Applies a command at the next seq; returns its events as JSON.
    pub fn apply(&mut self, command: &Command<'_>, ts: Option<TimestampNs>) -> Vec<Value> {
        self.seq += 1;
        let mut events = Vec::new();
        self.venue.apply(Seq(self.seq), ts, command, &mut events);
        if let Err(problem) = self.venue.check_invariants() {
            panic!("invariants broken after seq {} ({command:?}): {problem}", self.seq);
        }
        events_json(self.venue.exchange(), command, &events)
    }

    /// Feeds one line and asserts that its first event is `accepted`.
    pub fn ok(&mut self, line: impl fmt::Display) -> Fed {
        let fed = self.feed(line);
        assert_eq!(
            fed.events[0]["ev"], "accepted",
            "seq {}: {}: {:?}",
            fed.seq, fed.line, fed.events
        );
        fed
    }

    pub fn account(&self, name: &str) -> AccountId {
        self.venue.exchange().ledger().find_account(name).expect("the account exists")
    }

    pub fn activity(&self) -> &Activity {
        self.venue.activity().expect("the venue tracks activity")
    }

    pub fn record(&self, account: &str, id: &str) -> OrderRecord {
        self.activity()
            .order_by_client(self.account(account), id)
            .unwrap_or_else(|| panic!("no record of {account}'s {id}"))
            .clone()
    }

    pub fn open_ids(&self, account: &str) -> Vec<String> {
        let activity = self.activity();
        activity.open_orders(self.account(account)).map(|r| r.client_id.to_string()).collect()
    }

    pub fn finished_ids(&self, account: &str) -> Vec<String> {
        let activity = self.activity();
        activity.finished_orders(self.account(account)).map(|r| r.client_id.to_string()).collect()
    }

    pub fn fills(&self, account: &str) -> Vec<Fill> {
        self.activity().fills(self.account(account)).cloned().collect()
    }

    /// (available, held) of `account` in `asset`, in the asset's smallest units.
    pub fn balance(&self, account: &str, asset: &str) -> (i64, i64) {
        let exchange = self.venue.exchange();
        let asset = exchange.find_asset(asset).expect("the asset exists");
        let balance = exchange.ledger().balance(self.account(account), asset);
        (balance.available.0, balance.held.0)
    }

    pub fn halted(&self) -> Vec<&str> {
        self.venue.halted_symbols().collect()
    }

    /// Feeds each line to this harness and to `restored` (a venue decoded from one of its
    /// snapshots): the same events each time, and the same bytes at the end.
    pub fn go_on_in_step<L: fmt::Display>(
        &mut self,
        restored: &mut Venue,
        lines: impl IntoIterator<Item = L>,
    ) {
        for line in lines {
            let (command, ts) = owned_command(&line);
            let mut events = Vec::new();
            restored.apply(Seq(self.seq + 1), ts, &command, &mut events);
            let fed = self.feed(line);
            assert_eq!(
                events_json(restored.exchange(), &command, &events),
                fed.events,
                "{}",
                fed.line
            );
        }
        assert!(venue_bytes(restored) == self.encoded());
    }

    pub fn encoded(&self) -> Vec<u8> {
        venue_bytes(&self.venue)
    }
}

/// Events as the JSON objects `write_event` prints for them.
/// A venue that applied `lines` (replay-format commands, seqs 1, 2, ...) and then
/// `last`.
pub fn venue_after(lines: &[String], last: &Command<'_>, track_activity: bool) -> Venue {
    let mut venue = Venue::new(Exchange::default(), track_activity);
    let mut events = Vec::new();
    for (index, line) in lines.iter().enumerate() {
        let (command, ts) = command_of(line);
        venue.apply(Seq(index as u64 + 1), ts, &command, &mut events);
    }
    venue.apply(Seq(lines.len() as u64 + 1), None, last, &mut events);
    venue
}

/// Every proper prefix of a venue snapshot is an error.
pub fn assert_every_truncation_fails(bytes: &[u8], track_activity: bool) {
    for length in 0..bytes.len() {
        assert!(
            decode_venue(&bytes[..length], tiny_config(), track_activity).is_err(),
            "cut to {length} of {}",
            bytes.len()
        );
    }
}

pub fn events_json(exchange: &Exchange, command: &Command<'_>, events: &[Event]) -> Vec<Value> {
    events
        .iter()
        .map(|event| {
            let mut text = String::new();
            write_event(&mut text, exchange, Some(command), event);
            serde_json::from_str(&text).expect("an event is JSON")
        })
        .collect()
}

/// The command of a line, owning its strings.
pub fn owned_command(line: impl fmt::Display) -> (Command<'static>, Option<TimestampNs>) {
    let line = line.to_string();
    let (command, ts) = command_of(&line);
    (command.into_owned(), ts)
}

/// The command of `line`, naming its account by id when `by_id` and the account exists.
pub fn command_for<'line>(
    line: &'line str,
    exchange: &Exchange,
    by_id: bool,
) -> (Command<'line>, Option<TimestampNs>) {
    let (mut command, ts) = command_of(line);
    if by_id {
        if let Some(account) = command.account_mut() {
            if let AccountRef::Name(name) = account {
                if let Some(id) = exchange.ledger().find_account(name) {
                    *account = AccountRef::Id(id);
                }
            }
        }
    }
    (command, ts)
}

/// A venue container: magic, version, the state's length and bytes, then `rest`.
pub fn container(state: &[u8], rest: &[u8]) -> Vec<u8> {
    let mut bytes = VENUE_MAGIC.to_vec();
    bytes.extend_from_slice(&VENUE_FORMAT_VERSION.to_le_bytes());
    bytes.extend_from_slice(&varint(state.len() as u64));
    bytes.extend_from_slice(state);
    bytes.extend_from_slice(rest);
    bytes
}

/// A venue snapshot's exchange state and what follows it (flags, halts, activity).
pub fn split_venue_snapshot(bytes: &[u8]) -> (&[u8], &[u8]) {
    assert!(bytes.starts_with(&VENUE_MAGIC));
    let (mut length, mut shift, mut at) = (0usize, 0, 12);
    loop {
        let byte = bytes[at];
        length |= usize::from(byte & 0x7f) << shift;
        at += 1;
        shift += 7;
        if byte < 0x80 {
            break;
        }
    }
    (&bytes[at..at + length], &bytes[at + length..])
}

/// Decoding must not panic; what it accepts must be a consistent venue. Decoded as it
/// was made (`exact`: with activity as it had activity), its snapshot is exactly the
/// bytes it came from; decoded the other way (activity dropped, or rebuilt from the
/// books), its snapshot decodes to the same venue again.
pub fn decodes_sanely(bytes: &[u8], track_activity: bool, exact: bool) -> bool {
    match decode_venue(bytes, tiny_config(), track_activity) {
        Err(error) => {
            assert!(!error.to_string().is_empty() && !error.code().is_empty());
            false
        }
        Ok(venue) => {
            venue.check_invariants().expect("an accepted snapshot is consistent");
            let again = venue_bytes(&venue);
            if exact {
                assert!(again == bytes, "an accepted snapshot re-encodes to itself");
            } else {
                let twice = decode_venue(&again, tiny_config(), track_activity);
                assert!(venue_bytes(&twice.unwrap()) == again);
            }
            true
        }
    }
}

/// Venues restored from a venue's snapshots, taken at chosen points of a stream, that
/// must go on exactly like it: the same events for every later command, their
/// invariants, and the same snapshot at the end.
pub struct Forks<'cuts> {
    /// Line indexes before which a snapshot is taken.
    cuts: &'cuts [usize],
    track_activity: bool,
    /// Whether every other fork is decoded into tiny pools, which it must grow.
    tiny_every_other: bool,
    /// Each fork with the index of its cut.
    forks: Vec<(usize, Venue)>,
}

impl<'cuts> Forks<'cuts> {
    pub fn new(cuts: &'cuts [usize], track_activity: bool, tiny_every_other: bool) -> Self {
        Forks { cuts, track_activity, tiny_every_other, forks: Vec::new() }
    }

    /// Before line `index`: at a cut, restores a fork from `venue`'s snapshot, which must
    /// keep its invariants and encode to the same bytes again.
    pub fn cut(&mut self, index: usize, venue: &Venue) {
        if !self.cuts.contains(&index) {
            return;
        }
        let bytes = venue_bytes(venue);
        let config = if self.tiny_every_other && !self.forks.len().is_multiple_of(2) {
            tiny_config()
        } else {
            ExchangeConfig::default()
        };
        let fork = decode_venue(&bytes, config, self.track_activity)
            .unwrap_or_else(|error| panic!("cut {index}: {error}"));
        fork.check_invariants().expect("a restored venue keeps its invariants");
        assert!(venue_bytes(&fork) == bytes, "cut {index}: encode(decode(bytes)) != bytes");
        self.forks.push((index, fork));
    }

    /// Applies `line`'s command to every fork: each must give the original's events
    /// `got` (and keep its invariants, checked every 500 seqs).
    pub fn follow(
        &mut self,
        seq: Seq,
        ts: Option<TimestampNs>,
        command: &Command<'_>,
        got: &[Event],
        line: &str,
    ) {
        for (cut, fork) in &mut self.forks {
            let mut forked = Vec::new();
            fork.apply(seq, ts, command, &mut forked);
            assert_eq!(forked, got, "cut {cut}, seq {seq}: {line}");
            if seq.0.is_multiple_of(500) {
                fork.check_invariants()
                    .unwrap_or_else(|problem| panic!("cut {cut}, seq {seq}: {problem}"));
            }
        }
    }

    /// At the end of the stream: every fork keeps its invariants and is exactly `venue`.
    pub fn finish(&self, venue: &Venue) {
        let final_bytes = venue_bytes(venue);
        for (cut, fork) in &self.forks {
            fork.check_invariants().expect("invariants hold at the end");
            assert!(venue_bytes(fork) == final_bytes, "cut {cut}: the final venues differ");
        }
    }
}
