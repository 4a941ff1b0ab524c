//! An amend that names the order's new whole quantity (`AmendQtyKind::Total`, FIX's
//! OrderCancelReplaceRequest): what it leaves open is the total less what has filled
//! when it applies, so a fill between the client's last report and the amend is
//! counted. The replay format has no such command, so these tests build it by hand;
//! the same amend by remaining quantity is the reference.
//!
//! BTC-USD: tick 1, lot 0.01, qty 0.1..=100, no fees.

use std::borrow::Cow;

use bourse_core::command::{AmendCommand, AmendQtyKind};
use bourse_core::format::parse::parse_line;
use bourse_core::ids::AccountId;
use bourse_core::{
    Command, Decimal, Event, Exchange, ExchangeConfig, Price, Qty, RejectReason, Seq,
};

struct Venue {
    exchange: Exchange,
    seq: u64,
}

impl Venue {
    /// alice and bob each have 10 BTC and 10,000 USD.
    fn funded() -> Venue {
        let mut venue = Venue { exchange: Exchange::new(ExchangeConfig::default()), seq: 0 };
        for line in [
            r#"{"cmd":"asset","asset":"BTC","decimals":8}"#,
            r#"{"cmd":"asset","asset":"USD","decimals":2}"#,
            r#"{"cmd":"instrument","symbol":"BTC-USD","base":"BTC","quote":"USD","tick":"1","lot":"0.01","min_qty":"0.1","max_qty":"100","maker_fee_bps":0,"taker_fee_bps":0,"market_band_bps":1000}"#,
            r#"{"cmd":"deposit","account":"alice","asset":"BTC","amount":"10"}"#,
            r#"{"cmd":"deposit","account":"bob","asset":"USD","amount":"10000"}"#,
        ] {
            venue.accepted(line);
        }
        venue
    }

    fn apply(&mut self, command: &Command<'_>) -> Vec<Event> {
        self.seq += 1;
        let mut events = Vec::new();
        self.exchange.apply(Seq(self.seq), None, command, &mut events);
        self.exchange.check_invariants().expect("the invariants hold");
        events
    }

    fn accepted(&mut self, line: &str) -> Vec<Event> {
        let command = parse_line(line).expect(line).command;
        let events = self.apply(&command);
        assert!(matches!(events.first(), Some(Event::Accepted { .. })), "{line}: {events:?}");
        events
    }

    /// alice's amend of `id`, its quantity read as `kind` says.
    fn amend(
        &mut self,
        id: &str,
        price: Option<&str>,
        qty: &str,
        kind: AmendQtyKind,
    ) -> Vec<Event> {
        let command = Command::Amend(AmendCommand {
            account: "alice".into(),
            id: Cow::Borrowed(id),
            price: price.map(decimal),
            qty: Some(decimal(qty)),
            qty_kind: kind,
        });
        self.apply(&command)
    }

    /// alice's open order `id`: its price and what is left of it.
    fn open(&self, id: &str) -> Option<(Price, Qty)> {
        let (_, order) = self.exchange.open_order(AccountId(0), id)?;
        Some((order.price, order.remaining))
    }
}

fn decimal(text: &str) -> Decimal {
    Decimal::parse(text).expect(text)
}

/// alice sells 3 at 100; bob buys 1 of it: 2 left.
fn partly_filled() -> Venue {
    let mut venue = Venue::funded();
    venue.accepted(
        r#"{"cmd":"order","account":"alice","id":"a1","symbol":"BTC-USD","side":"sell","type":"limit","price":"100","qty":"3"}"#,
    );
    venue.accepted(
        r#"{"cmd":"order","account":"bob","id":"b1","symbol":"BTC-USD","side":"buy","type":"limit","price":"100","qty":"1"}"#,
    );
    assert_eq!(venue.open("a1"), Some((Price(100), Qty(200))));
    venue
}

fn amended_qty(events: &[Event]) -> Option<Qty> {
    events.iter().find_map(|event| match event {
        Event::Amended { qty, .. } => Some(*qty),
        _ => None,
    })
}

fn rejection(events: &[Event]) -> Option<RejectReason> {
    match events.first() {
        Some(Event::Rejected { reason, .. }) => Some(*reason),
        _ => None,
    }
}

#[test]
fn a_new_whole_quantity_leaves_it_less_what_has_filled_open() {
    let mut venue = partly_filled();
    // 2.5 in all, 1 filled: 1.5 open, as an amend to a remaining 1.5 would leave.
    let events = venue.amend("a1", None, "2.5", AmendQtyKind::Total);
    assert_eq!(amended_qty(&events), Some(Qty(150)), "{events:?}");
    assert_eq!(venue.open("a1"), Some((Price(100), Qty(150))));

    let mut reference = partly_filled();
    let by_remaining = reference.amend("a1", None, "1.5", AmendQtyKind::Remaining);
    assert_eq!(events, by_remaining, "the same events as the amend by remaining quantity");
}

#[test]
fn a_whole_quantity_counts_a_fill_the_client_has_not_heard_of() {
    let mut venue = partly_filled();
    // A second fill lands before the replace: 2 filled, so a total of 2.5 leaves 0.5.
    venue.accepted(
        r#"{"cmd":"order","account":"bob","id":"b2","symbol":"BTC-USD","side":"buy","type":"limit","price":"100","qty":"1"}"#,
    );
    let events = venue.amend("a1", Some("101"), "2.5", AmendQtyKind::Total);
    assert_eq!(amended_qty(&events), Some(Qty(50)), "{events:?}");
    assert_eq!(venue.open("a1"), Some((Price(101), Qty(50))));
}

#[test]
fn a_whole_quantity_no_more_than_what_has_filled_is_invalid_qty() {
    for total in ["1", "0.5"] {
        let mut venue = partly_filled();
        let events = venue.amend("a1", None, total, AmendQtyKind::Total);
        assert_eq!(rejection(&events), Some(RejectReason::InvalidQty), "{total}: {events:?}");
        assert_eq!(venue.open("a1"), Some((Price(100), Qty(200))), "nothing changed");
    }
}

#[test]
fn a_whole_quantity_is_checked_as_any_quantity() {
    for total in ["2.555", "100.01", "0"] {
        let mut venue = partly_filled();
        let events = venue.amend("a1", None, total, AmendQtyKind::Total);
        assert_eq!(rejection(&events), Some(RejectReason::InvalidQty), "{total}: {events:?}");
    }
}

#[test]
fn a_whole_quantity_above_the_order_loses_its_priority_as_a_larger_amend_does() {
    let mut venue = partly_filled();
    // 3.5 in all: 2.5 open, more than the 2 left.
    let events = venue.amend("a1", None, "3.5", AmendQtyKind::Total);
    let mut reference = partly_filled();
    assert_eq!(events, reference.amend("a1", None, "2.5", AmendQtyKind::Remaining));
    assert_eq!(venue.open("a1"), Some((Price(100), Qty(250))));
}
