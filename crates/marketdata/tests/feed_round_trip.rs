//! The feed end to end against the engine's own rules: random order flow (limits of
//! every time in force, market orders, post-only, every self-trade mode, cancels,
//! amends that keep and that lose priority, cancel-all, halts) through the core
//! `Venue`; its events and book notes through `FeedBuilder`, whose books must equal
//! the exchange's at every checkpoint; its messages packed into MoldUDP64 packets and
//! delivered to subscribers in order, with loss (recovered by retransmission),
//! duplication and reordering, and to one that joins late from a snapshot: each must
//! end with exactly the publisher's books, and match them at every checkpoint it
//! passes.

use std::borrow::Cow;

use bourse_core::command::{AmendCommand, AmendQtyKind, OrderCommand, OrderType};
use bourse_core::format::parse_line;
use bourse_core::ids::{InstrumentId, OrderId, Seq, TimestampNs};
use bourse_core::{
    AccountRef, Command, Decimal, Exchange, Offset, Price, Qty, Side, StpMode, TimeInForce, Venue,
};
use bourse_marketdata::message::Message;
use bourse_marketdata::mold::{session, Packet, PacketWriter};
use bourse_marketdata::{Books, FeedBuilder, Rebuilder};

const SYMBOLS: [&str; 2] = ["BTC-USD", "ETH-USD"];
const ACCOUNTS: [&str; 5] = ["a0", "a1", "a2", "a3", "a4"];

/// Books as lists: (instrument, side, orders as (id, price, remaining)).
type Canonical = Vec<(u32, Side, Vec<(OrderId, Price, Qty)>)>;

struct Random(u64);

impl Random {
    fn below(&mut self, bound: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % bound
    }

    fn chance(&mut self, percent: u64) -> bool {
        self.below(100) < percent
    }
}

/// The books as lists: instrument, side, orders in priority order (empty sides left
/// out), so books that hold the same orders compare equal however they were built.
fn canonical(books: &Books) -> Canonical {
    let mut out = Vec::new();
    for index in 0..books.instrument_count() as u32 {
        for side in [Side::Buy, Side::Sell] {
            let orders = books.orders(InstrumentId(index), side);
            if !orders.is_empty() {
                out.push((index, side, orders));
            }
        }
    }
    out
}

/// The exchange's books in the same form, its orders named by the feed's order ids.
fn exchange_books(exchange: &Exchange, builder: &FeedBuilder) -> Canonical {
    let mut out = Vec::new();
    for index in 0..exchange.instruments().len() as u32 {
        for side in [Side::Buy, Side::Sell] {
            let mut orders = Vec::new();
            exchange.book(InstrumentId(index)).for_each_order(side, |order| {
                let id = builder
                    .order_of(order.account, &order.id)
                    .expect("every resting order has a feed id");
                orders.push((id, order.price, order.remaining));
            });
            if !orders.is_empty() {
                out.push((index, side, orders));
            }
        }
    }
    out
}

struct Run {
    venue: Venue,
    seq: Seq,
    builder: FeedBuilder,
    messages: Vec<Message>,
    /// (feed sequence number of the last message so far, the books then), every so often.
    checkpoints: Vec<(u64, Canonical)>,
    /// A snapshot taken midway: its messages.
    snapshot: Option<Vec<Message>>,
}

impl Run {
    fn new() -> Run {
        let mut run = Run {
            venue: Venue::new(Exchange::default(), true),
            seq: Seq::ZERO,
            builder: FeedBuilder::default(),
            messages: Vec::new(),
            checkpoints: Vec::new(),
            snapshot: None,
        };
        let mut lines = vec![
            r#"{"cmd":"asset","asset":"USD","decimals":2}"#.to_string(),
            r#"{"cmd":"asset","asset":"BTC","decimals":8}"#.to_string(),
            r#"{"cmd":"asset","asset":"ETH","decimals":8}"#.to_string(),
        ];
        for symbol in SYMBOLS {
            lines.push(format!(
                r#"{{"cmd":"instrument","symbol":"{symbol}","base":"{}","quote":"USD","tick":"1","lot":"0.01","min_qty":"0.01","max_qty":"100","maker_fee_bps":1,"taker_fee_bps":2,"market_band_bps":500}}"#,
                &symbol[..3]
            ));
        }
        for account in ACCOUNTS {
            for (asset, amount) in [("USD", "100000000"), ("BTC", "100000"), ("ETH", "100000")] {
                lines.push(format!(r#"{{"cmd":"deposit","account":"{account}","asset":"{asset}","amount":"{amount}"}}"#));
            }
        }
        for line in lines {
            let parsed = parse_line(&line).unwrap();
            run.apply(&parsed.command);
        }
        for (index, symbol) in SYMBOLS.iter().enumerate() {
            run.builder.announce(
                InstrumentId(index as u32),
                symbol,
                0,
                2,
                bourse_marketdata::message::KIND_SPOT,
                &mut run.messages,
            );
        }
        run
    }

    fn apply(&mut self, command: &Command<'_>) {
        self.seq += 1;
        let seq = self.seq;
        let ts = TimestampNs(1_700_000_000_000_000_000 + self.seq.0 * 1_000);
        let mut events = Vec::new();
        let applied = self.venue.apply(seq, Some(ts), command, &mut events);
        let note = self.venue.book_note(seq, &applied);
        self.builder.apply(seq, ts, &events, note.as_ref(), &mut self.messages);
    }

    fn open_orders(&self) -> Vec<(bourse_core::ids::AccountId, String)> {
        let exchange = self.venue.exchange();
        let mut open = Vec::new();
        for index in 0..exchange.instruments().len() as u32 {
            for side in [Side::Buy, Side::Sell] {
                exchange
                    .book(InstrumentId(index))
                    .for_each_order(side, |order| open.push((order.account, order.id.to_string())));
            }
        }
        open
    }

    fn random_command(&mut self, random: &mut Random, number: u64) -> Command<'static> {
        let roll = random.below(100);
        let open = self.open_orders();
        let pick_open = |random: &mut Random| -> Option<(bourse_core::ids::AccountId, String)> {
            (!open.is_empty()).then(|| open[random.below(open.len() as u64) as usize].clone())
        };
        let symbol = SYMBOLS[random.below(2) as usize];
        if roll < 66 {
            let market = random.chance(8);
            let side = if random.chance(50) { Side::Buy } else { Side::Sell };
            // Mostly on their own side of 100, crossing now and then.
            let offset = random.below(12) as i128 - 2;
            let price = if side == Side::Buy { 100 - offset } else { 100 + offset };
            let order = OrderCommand {
                account: AccountRef::Name(Cow::Borrowed(ACCOUNTS[random.below(5) as usize])),
                id: Cow::Owned(format!("o{number}")),
                symbol: Cow::Borrowed(symbol),
                side,
                order_type: if market {
                    OrderType::Market
                } else {
                    OrderType::Limit { price: Decimal::from_units(price, 0) }
                },
                size: bourse_core::OrderSize::of_qty(Decimal::from_units(
                    1 + random.below(150) as i128,
                    2,
                )),
                time_in_force: match random.below(10) {
                    0 => TimeInForce::ImmediateOrCancel,
                    1 => TimeInForce::FillOrKill,
                    _ => TimeInForce::GoodTillCancel,
                },
                post_only: !market && random.chance(10),
                stp: [
                    StpMode::CancelTaker,
                    StpMode::CancelMaker,
                    StpMode::CancelBoth,
                    StpMode::None,
                ][random.below(4) as usize],
                offset: Offset::Open,
            };
            return Command::Order(order);
        }
        if roll < 80 {
            if let Some((account, id)) = pick_open(random) {
                return Command::Cancel { account: AccountRef::Id(account), id: Cow::Owned(id) };
            }
        }
        if roll < 96 {
            if let Some((account, id)) = pick_open(random) {
                let price = random
                    .chance(60)
                    .then(|| Decimal::from_units(100 + random.below(15) as i128 - 7, 0));
                let qty = (price.is_none() || random.chance(50))
                    .then(|| Decimal::from_units(1 + random.below(150) as i128, 2));
                return Command::Amend(AmendCommand {
                    account: AccountRef::Id(account),
                    id: Cow::Owned(id),
                    price,
                    qty,
                    qty_kind: AmendQtyKind::Remaining,
                });
            }
        }
        if roll < 97 {
            let account = Cow::Borrowed(ACCOUNTS[random.below(5) as usize]);
            let symbol = random.chance(50).then_some(Cow::Borrowed(symbol));
            return Command::CancelAll { account: AccountRef::Name(account), symbol };
        }
        if random.chance(30) {
            Command::Halt { symbol: Cow::Borrowed(symbol) }
        } else {
            Command::Resume { symbol: Cow::Borrowed(symbol) }
        }
    }

    fn trade_randomly(&mut self, seed: u64, commands: u64) {
        let mut random = Random(seed);
        for number in 0..commands {
            let command = self.random_command(&mut random, number);
            self.apply(&command);
            if number % 97 == 0 || number + 1 == commands {
                let feed = canonical(self.builder.books());
                assert_eq!(
                    feed,
                    exchange_books(self.venue.exchange(), &self.builder),
                    "after command {}",
                    self.seq
                );
                self.builder.books().check().unwrap();
                self.checkpoints.push((self.messages.len() as u64, feed));
            }
            if number == commands / 2 {
                self.snapshot = Some(self.builder.snapshot(self.messages.len() as u64));
            }
        }
        assert_eq!(self.builder.inconsistencies(), 0);
    }

    fn packets(&self) -> Vec<Vec<u8>> {
        let mut packets = Vec::new();
        let mut writer = PacketWriter::new(session("TEST"), 1);
        for (index, message) in self.messages.iter().enumerate() {
            writer.push(&message.to_bytes(), |packet| packets.push(packet.to_vec()));
            if index % 7 == 0 {
                writer.flush(|packet| packets.push(packet.to_vec()));
            }
        }
        writer.flush(|packet| packets.push(packet.to_vec()));
        packets
    }
}

/// Delivers `packets` to `subscriber`, and whenever a gap shows, "retransmits" the
/// packets that cover it (the retransmission service's part).
fn retransmit(subscriber: &mut Rebuilder, packets: &[Vec<u8>]) {
    while let Some((first, count)) = subscriber.gap() {
        for packet in packets {
            let parsed = Packet::parse(packet).unwrap();
            let end = parsed.sequence + u64::from(parsed.count);
            if parsed.sequence < first + count && end > first {
                subscriber.on_packet(packet).unwrap();
            }
        }
    }
}

fn check_checkpoints(subscriber: &Rebuilder, checkpoints: &[(u64, Canonical)], seen: &mut usize) {
    let applied_through = subscriber.next().saturating_sub(1);
    while *seen < checkpoints.len() && checkpoints[*seen].0 <= applied_through {
        if checkpoints[*seen].0 == applied_through {
            assert_eq!(
                canonical(subscriber.books()),
                checkpoints[*seen].1,
                "at feed message {applied_through}"
            );
        }
        *seen += 1;
    }
}

#[test]
fn subscribers_rebuild_the_exchanges_books_through_loss_duplication_reordering_and_late_joins() {
    for seed in [1u64, 0x9E37_79B9, 42_424_242] {
        let mut run = Run::new();
        run.trade_randomly(seed, 20_000);
        // Every kind of book message was exercised.
        for kind in [b'A', b'E', b'X', b'D', b'U', b'P', b'Q', b'H', b'R'] {
            assert!(run.messages.iter().any(|m| m.kind() == kind), "no {:?} message", kind as char);
        }
        let packets = run.packets();
        let expected = canonical(run.builder.books());
        let resting: usize = expected.iter().map(|(_, _, orders)| orders.len()).sum();
        assert!(resting >= 8, "the books are not empty at the end: {expected:?}");

        // In order: equal at every checkpoint it passes.
        let mut in_order = Rebuilder::starting_at(1);
        let mut checked = 0;
        for packet in &packets {
            in_order.on_packet(packet).unwrap();
            check_checkpoints(&in_order, &run.checkpoints, &mut checked);
        }
        assert_eq!(canonical(in_order.books()), expected);
        assert!(checked > 20);

        // Lost, doubled and swapped packets; the lost ones come back by retransmission.
        let mut random = Random(seed ^ 0xABCD);
        let mut lossy = Rebuilder::starting_at(1);
        let mut held: Option<&Vec<u8>> = None;
        for packet in &packets {
            if random.chance(10) {
                continue; // lost
            }
            if random.chance(10) && held.is_none() {
                held = Some(packet); // sent after the next one
                continue;
            }
            lossy.on_packet(packet).unwrap();
            if random.chance(5) {
                lossy.on_packet(packet).unwrap();
            }
            if let Some(late) = held.take() {
                lossy.on_packet(late).unwrap();
            }
            if random.chance(3) {
                retransmit(&mut lossy, &packets);
            }
        }
        if let Some(late) = held.take() {
            lossy.on_packet(late).unwrap();
        }
        retransmit(&mut lossy, &packets);
        // The last packets may have been lost with no later one to show the gap: the
        // heartbeat (it carries the next sequence number) shows it.
        let heartbeat =
            bourse_marketdata::mold::header(&session("TEST"), run.messages.len() as u64 + 1, 0);
        lossy.on_packet(&heartbeat).unwrap();
        retransmit(&mut lossy, &packets);
        assert_eq!(lossy.next(), run.messages.len() as u64 + 1);
        assert_eq!(canonical(lossy.books()), expected);
        assert!(lossy.counters.duplicates > 0);

        // Late: joins at a third of the way, takes the midway snapshot, catches up.
        let snapshot = run.snapshot.clone().unwrap();
        let Some(Message::SnapshotStart { feed_seq, .. }) = snapshot.first().cloned() else {
            panic!()
        };
        let mut late = Rebuilder::starting_at(0);
        let mut snapshot_applied = false;
        let mut checked = 0;
        for (index, packet) in packets.iter().enumerate().skip(packets.len() / 3) {
            late.on_packet(packet).unwrap();
            let parsed = Packet::parse(packet).unwrap();
            if !snapshot_applied && parsed.sequence > feed_seq + 3 {
                assert!(late.needs_snapshot(), "packet {index}");
                late.apply_snapshot(&snapshot).unwrap();
                snapshot_applied = true;
            }
            if snapshot_applied {
                check_checkpoints(&late, &run.checkpoints, &mut checked);
            }
        }
        assert!(snapshot_applied);
        assert_eq!(canonical(late.books()), expected);
    }
}

#[test]
fn a_subscriber_held_at_a_command_shows_the_books_of_exactly_that_command() {
    let mut run = Run::new();
    run.trade_randomly(11, 3_000);
    let packets = run.packets();
    // The books after each command, as the publisher had them.
    let mut replay = Run::new();
    let mut random = Random(11);
    let mut books_at = std::collections::HashMap::new();
    for number in 0..3_000 {
        let command = replay.random_command(&mut random, number);
        replay.apply(&command);
        books_at.insert(replay.seq, canonical(replay.builder.books()));
    }
    for hold in [run.seq - 2_500, run.seq - 1_000, run.seq - 3] {
        let mut subscriber = Rebuilder::starting_at(1);
        subscriber.hold_after(Some(hold)).unwrap();
        for packet in &packets {
            subscriber.on_packet(packet).unwrap();
        }
        assert!(subscriber.held());
        assert_eq!(canonical(subscriber.books()), books_at[&hold], "held at {hold}");
        subscriber.hold_after(None).unwrap();
        assert!(!subscriber.held());
        assert_eq!(canonical(subscriber.books()), canonical(run.builder.books()));
    }
}

#[test]
fn a_snapshot_alone_is_the_books_and_bad_snapshots_are_refused() {
    let mut run = Run::new();
    run.trade_randomly(7, 2_000);
    let snapshot = run.builder.snapshot(run.messages.len() as u64);
    let mut subscriber = Rebuilder::starting_at(0);
    subscriber.apply_snapshot(&snapshot).unwrap();
    assert_eq!(canonical(subscriber.books()), canonical(run.builder.books()));
    assert_eq!(subscriber.seq(), run.seq);
    assert_eq!(subscriber.instrument_by_symbol("ETH-USD"), Some(InstrumentId(1)));
    let mut truncated = snapshot.clone();
    truncated.pop();
    assert!(Rebuilder::starting_at(0).apply_snapshot(&truncated).is_err());
    assert!(Rebuilder::starting_at(0).apply_snapshot(&snapshot[1..]).is_err());
    // A message naming an order's instrument wrongly is found, not applied.
    let mut misnamed = Rebuilder::starting_at(0);
    misnamed.apply_snapshot(&snapshot).unwrap();
    let (order, _, _) = canonical(misnamed.books())[0].2[0];
    let next = misnamed.next();
    let wrong =
        Message::Deleted { seq: Seq(1), ts: TimestampNs(1), order, instrument: InstrumentId(9) };
    assert!(misnamed.on_message(next, wrong).is_err());
    assert!(misnamed.books().order(order).is_some());
    // A wrong Bbo in the stream is found, not ignored.
    let mut checked = Rebuilder::starting_at(0);
    checked.apply_snapshot(&snapshot).unwrap();
    let next = checked.next();
    let wrong = Message::Bbo {
        seq: Seq(1),
        ts: TimestampNs(1),
        instrument: InstrumentId(0),
        bid_price: Price(1),
        bid_qty: Qty(1),
        ask_price: Price(0),
        ask_qty: Qty(0),
    };
    assert!(checked.on_message(next, wrong).is_err());
}
