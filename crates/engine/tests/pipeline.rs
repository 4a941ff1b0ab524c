//! The pipeline end to end: outcomes come back in order, once durable; the state
//! survives a restart exactly; a full queue says `busy`.

use std::sync::Arc;

use bourse_core::format::parse_line;
use bourse_core::{Replay, Seq};
use bourse_engine::{Durability, Engine, EngineConfig, Outcome, Released};
use crossbeam_channel::{unbounded, Receiver};

fn lines() -> Vec<String> {
    let mut lines = vec![
        r#"{"cmd":"asset","asset":"USD","decimals":2}"#.to_string(),
        r#"{"cmd":"asset","asset":"BTC","decimals":4}"#.to_string(),
        r#"{"cmd":"instrument","symbol":"BTC-USD","base":"BTC","quote":"USD","tick":"1","lot":"0.01","min_qty":"0.01","max_qty":"1000","maker_fee_bps":5,"taker_fee_bps":10,"market_band_bps":1000}"#.to_string(),
    ];
    for account in ["alice", "bob"] {
        for asset in ["USD", "BTC"] {
            lines.push(format!(
                r#"{{"cmd":"deposit","account":"{account}","asset":"{asset}","amount":"1000000"}}"#
            ));
        }
    }
    for index in 0..200 {
        let (account, side, price) = if index % 2 == 0 {
            ("alice", "buy", 100 + index % 7)
        } else {
            ("bob", "sell", 98 + index % 9)
        };
        lines.push(format!(r#"{{"cmd":"order","account":"{account}","id":"o{index}","symbol":"BTC-USD","side":"{side}","type":"limit","price":"{price}","qty":"1.5"}}"#));
        if index % 5 == 0 {
            lines
                .push(format!(r#"{{"cmd":"cancel","account":"{account}","id":"o{}"}}"#, index / 2));
        }
    }
    lines
}

fn config(dir: &std::path::Path) -> EngineConfig {
    let mut config = EngineConfig::new(dir);
    config.render_events = true;
    config
}

/// Submits every line and collects the outcomes' rendered events, in order.
fn run(engine: &Engine, lines: &[String]) -> Vec<String> {
    let (sink, receiver): (_, Receiver<Released>) = unbounded();
    let session = engine.open_session(Arc::new(sink));
    for (index, line) in lines.iter().enumerate() {
        let parsed = parse_line(line).unwrap();
        session.submit(&parsed.command, index as u64).unwrap();
    }
    let mut rendered = Vec::new();
    while rendered.len() < lines.len() {
        let released = receiver.recv().unwrap();
        for outcome in &released.outcomes {
            let Outcome::Applied(result) = outcome else { panic!("failed: {outcome:?}") };
            let request = result.correlation.request;
            assert_eq!(request, rendered.len() as u64, "outcomes in submission order");
            assert_eq!(result.correlation.session, session.number());
            // Released after it was sequenced (both on the wall clock).
            assert!(released.released_ns >= result.ts, "{} < {}", released.released_ns, result.ts);
            rendered.push(released.rendered_of(result).to_string());
        }
    }
    rendered
}

fn replay(lines: &[String]) -> (Vec<String>, String) {
    let mut replay = Replay::new();
    let mut events = Vec::new();
    for line in lines {
        let mut out = String::new();
        replay.feed_line(line, &mut out);
        events.push(out);
    }
    (events, replay.digest())
}

#[test]
fn outcomes_match_a_straight_replay_and_survive_restarts() {
    let dir = tempfile::tempdir().unwrap();
    let all = lines();
    let (expected_events, expected_digest) = replay(&all);
    let (first, second) = all.split_at(all.len() / 2);
    let engine = Engine::start(config(dir.path())).unwrap();
    let mut events = run(&engine, first);
    engine.shutdown().unwrap();
    // The second start begins from the shutdown snapshot.
    let engine = Engine::start(config(dir.path())).unwrap();
    assert_eq!(engine.start_report().snapshot_seq, Some(Seq(first.len() as u64)));
    events.extend(run(&engine, second));
    assert!(engine.stats().syncs > 0);
    let live_digest = engine.query(bourse_core::format::state_digest).unwrap();
    drop(engine);
    assert_eq!(events, expected_events);
    // Without snapshots, the journal alone rebuilds the same state.
    std::fs::remove_dir_all(dir.path().join("snapshots")).unwrap();
    let recovered = bourse_engine::recover(
        &dir.path().join("journal"),
        &dir.path().join("snapshots"),
        Default::default(),
        bourse_journal::TailPolicy::ReadOnly,
    )
    .unwrap();
    assert_eq!(recovered.replayed, all.len() as u64);
    assert_eq!(bourse_core::format::state_digest(recovered.venue.exchange()), live_digest);
    // The replay without timestamps differs from the live state only in its time.
    assert_ne!(live_digest, expected_digest);
}

#[test]
fn every_durability_mode_gives_the_same_outcomes() {
    let all = lines();
    let (expected_events, _) = replay(&all);
    for durability in ["sync", "async", "none"] {
        let dir = tempfile::tempdir().unwrap();
        let mut config = config(dir.path());
        config.durability = Durability::parse(durability).unwrap();
        let engine = Engine::start(config).unwrap();
        assert_eq!(run(&engine, &all), expected_events, "{durability}");
        engine.shutdown().unwrap();
    }
}

#[test]
fn a_full_queue_says_busy_and_every_accepted_command_still_gets_its_outcome() {
    let dir = tempfile::tempdir().unwrap();
    let mut config = config(dir.path());
    config.queue_capacity = 4;
    config.batch_commands_max = 2;
    config.segment_bytes = 1 << 16;
    let engine = Engine::start(config).unwrap();
    let all = lines();
    let (gate_open, gate) = crossbeam_channel::bounded::<()>(0);
    std::thread::scope(|scope| {
        // A read that holds the applier: batches pile up behind it, then the sequencer
        // waits, then the queue fills.
        scope.spawn(|| engine.query(move |_| gate.recv().ok()));
        let (sink, receiver): (_, Receiver<Released>) = unbounded();
        let session = engine.open_session(Arc::new(sink));
        let mut accepted = 0;
        let busy = loop {
            let parsed = parse_line(&all[accepted % all.len()]).unwrap();
            match session.submit(&parsed.command, accepted as u64) {
                Ok(_) => accepted += 1,
                Err(error) => break error,
            }
            assert!(accepted < 1_000, "the queue never filled");
        };
        assert_eq!(busy.code(), "busy", "{busy}");
        assert!(busy.to_string().contains("4 commands"), "{busy}");
        drop(gate_open);
        let mut outcomes = 0;
        while outcomes < accepted {
            outcomes += receiver.recv().unwrap().outcomes.len();
        }
        assert_eq!(outcomes, accepted);
    });
    engine.shutdown().unwrap();
}

#[test]
fn the_tap_sees_every_sessions_commands_in_sequence_with_their_events() {
    let dir = tempfile::tempdir().unwrap();
    let engine = Engine::start(config(dir.path())).unwrap();
    let (tap_sink, tapped): (_, Receiver<Released>) = unbounded();
    let tap = engine.open_tap(Arc::new(tap_sink)).expect("no tap open yet");
    let (other_sink, _) = unbounded::<Released>();
    assert!(engine.open_tap(Arc::new(other_sink)).is_none(), "one tap at a time");
    let lines = lines();
    let (first, second) = lines.split_at(lines.len() / 2);
    // Two sessions, one after the other.
    let mut expected = run(&engine, first);
    expected.extend(run(&engine, second));
    let mut seen = Vec::new();
    let mut last_seq = Seq::ZERO;
    while seen.len() < lines.len() {
        let released = tapped.recv().unwrap();
        for outcome in &released.outcomes {
            let Outcome::Applied(result) = outcome else { panic!("{outcome:?}") };
            assert!(result.seq > last_seq, "in sequence order");
            last_seq = result.seq;
            let events = released.events_of(result);
            assert!(matches!(
                events.first(),
                Some(bourse_core::Event::Accepted { .. } | bourse_core::Event::Rejected { .. })
            ));
            seen.push(events.len());
        }
    }
    let rendered_counts: Vec<usize> =
        expected.iter().map(|events| events.lines().count()).collect();
    assert_eq!(seen, rendered_counts, "the tap gets each command's events, all of them");
    drop(tap);
    let (again, _) = unbounded::<Released>();
    assert!(engine.open_tap(Arc::new(again)).is_some(), "closing the tap's session frees it");
}
