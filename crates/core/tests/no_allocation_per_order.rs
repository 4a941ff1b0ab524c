//! The hot path allocates nothing per order: once the pools are warm, placing, resting,
//! amending (keeping or losing priority), matching and cancelling orders makes no heap
//! allocation at all, on spot and on futures (opening and closing positions, whose
//! today entries come from a pool, and the daily settlement). A counting global allocator (this test binary's own, from
//! `counting_allocator`) checks it, counting only the measuring thread (the test
//! harness's own threads allocate too).

mod counting_allocator;
mod order_rounds;

use bourse_core::{Exchange, ExchangeConfig};
use counting_allocator::count_allocations;
use order_rounds::{definitions, futures_definitions, futures_stream, stream, Feeder};

/// `order_rounds::stream` over a fixed set of order ids (`o0`..`o7`, their takers `ioc`
/// and `fok`), so every path runs many times with the pools already warm.
fn fixed_ids(index: usize, _round: usize) -> [String; 3] {
    [format!("o{index}"), "ioc".to_string(), "fok".to_string()]
}

#[test]
fn orders_placed_amended_matched_and_cancelled_allocate_nothing_once_warm() {
    let mut exchange = Exchange::new(ExchangeConfig::default());
    let mut feeder = Feeder::default();
    let warm_up = stream(0..50, fixed_ids);
    let measured = stream(0..500, fixed_ids);
    feeder.feed(&mut exchange, &definitions());
    feeder.feed(&mut exchange, &warm_up);

    let ((trades, _), allocations) = count_allocations(|| feeder.feed(&mut exchange, &measured));

    assert!(trades > 1_000, "the stream must match a lot, not only rest: {trades} trades");
    assert_eq!(allocations, 0, "{allocations} allocations in {} commands", measured.len());
    exchange.check_invariants().unwrap();
}

#[test]
fn futures_orders_opening_and_closing_positions_allocate_nothing_once_warm() {
    let mut exchange = Exchange::new(ExchangeConfig::default());
    let mut feeder = Feeder::default();
    let warm_up = futures_stream(0..50, fixed_ids);
    let measured = futures_stream(0..500, fixed_ids);
    feeder.feed(&mut exchange, &futures_definitions());
    feeder.feed(&mut exchange, &warm_up);

    let entries = |exchange: &Exchange| {
        let positions = exchange.positions(bourse_core::ids::InstrumentId(0)).unwrap();
        positions
            .all()
            .iter()
            .map(|p| {
                positions.today_entries(&p.long).count() + positions.today_entries(&p.short).count()
            })
            .sum::<usize>()
    };
    eprintln!("DBG entries before {}", entries(&exchange));
    let ((trades, _), allocations) = count_allocations(|| feeder.feed(&mut exchange, &measured));

    assert!(trades > 1_000, "the stream must match a lot, not only rest: {trades} trades");
    assert_eq!(allocations, 0, "{allocations} allocations in {} commands", measured.len());
    exchange.check_invariants().unwrap();
    // Both kinds of fill ran: the positions moved away from the seeds' 40000 a side,
    // and the settlements made them history.
    let positions = exchange.positions(bourse_core::ids::InstrumentId(0)).unwrap();
    assert!(positions.all().iter().any(|position| position.long.qty().0 != 40_000));
    assert!(positions.all().iter().all(|position| position.long.today_qty.0 == 0));
}
