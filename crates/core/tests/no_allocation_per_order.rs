//! The hot path allocates nothing per order: once the pools are warm, placing, resting,
//! amending (keeping or losing priority), matching and cancelling orders makes no heap
//! allocation at all. A counting global allocator (this test binary's own, from
//! `counting_allocator`) checks it, counting only the measuring thread (the test
//! harness's own threads allocate too).

mod counting_allocator;
mod order_rounds;

use bourse_core::{Exchange, ExchangeConfig};
use counting_allocator::count_allocations;
use order_rounds::{definitions, stream, Feeder};

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
