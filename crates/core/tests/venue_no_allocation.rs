//! A venue that tracks activity allocates nothing per order once warm: records reuse
//! the slots of forgotten ones, the indexes stay within their size, and each account's
//! finished orders and fills are bounded queues. A counting global allocator (this test
//! binary's own, from `counting_allocator`) checks it, over a stream whose accounts are
//! already at their limits of finished orders and fills. Only the allocations of the
//! thread that applies the commands are counted (the test harness's own threads may
//! allocate meanwhile).

mod counting_allocator;
mod order_rounds;

use bourse_core::ids::AccountId;
use bourse_core::venue::{FILLS_KEPT, FINISHED_ORDERS_KEPT};
use bourse_core::{Exchange, ExchangeConfig, Venue};
use counting_allocator::count_allocations;
use order_rounds::{definitions, stream, Feeder, ACCOUNTS};

/// `order_rounds::stream` with every order id new (a finished one would be rejected
/// while remembered).
fn fresh_ids(index: usize, round: usize) -> [String; 3] {
    [format!("o{index}-{round}"), format!("i{index}-{round}"), format!("f{index}-{round}")]
}

#[test]
fn a_tracking_venue_allocates_nothing_per_order_once_warm() {
    let mut venue = Venue::new(Exchange::new(ExchangeConfig::default()), true);
    let mut feeder = Feeder::default();
    // Warm means at full size: the records at their bounds, and the client-key tables
    // grown once more after that (a table more than half full doubles, once, when the
    // entries it deletes have used up its free room).
    let warm_up = stream(0..2_000, fresh_ids);
    let measured = stream(2_000..2_500, fresh_ids);
    feeder.feed(&mut venue, &definitions());
    feeder.feed(&mut venue, &warm_up);
    let activity = venue.activity().unwrap();
    for account in 0..ACCOUNTS.len() as u32 {
        let account = AccountId(account);
        assert_eq!(activity.finished_order_count(account), FINISHED_ORDERS_KEPT);
        assert_eq!(activity.fill_count(account), FILLS_KEPT);
    }

    let ((trades, rejections), allocations) =
        count_allocations(|| feeder.feed(&mut venue, &measured));

    assert!(trades > 1_000, "the stream must match a lot, not only rest: {trades} trades");
    assert!(rejections < measured.len() / 4, "{rejections} rejections");
    assert_eq!(allocations, 0, "{allocations} allocations in {} commands", measured.len());
    venue.check_invariants().unwrap();
}
