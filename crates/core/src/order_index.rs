//! The open-order index: finds a resting order by its key (account, client order id).
//!
//! It stores only 8-byte handles (instrument, slot). The key itself lives in the order
//! record on the book, so a lookup confirms a candidate by comparing the order it points
//! at, which the caller reads next anyway: one probe of a small table, then the order.
//! Hashing and rehashing therefore need the books, which every method takes. The index
//! owns no order and never changes a book; keeping it equal to the books is the
//! exchange's job (checked by `Exchange::check_invariants`).

use std::hash::Hasher;

use hashbrown::HashTable;
use rustc_hash::FxHasher;

use crate::book::{OrderBook, RestingOrder};
use crate::ids::{short_bytes_equal, AccountId, OrderHandle};

pub struct OrderIndex {
    table: HashTable<OrderHandle>,
}

/// The hash of an order key.
#[inline]
pub fn key_hash(account: AccountId, id: &str) -> u64 {
    let mut hasher = FxHasher::default();
    hasher.write_u32(account.0);
    hasher.write(id.as_bytes());
    hasher.finish()
}

#[inline]
fn order_at(books: &[OrderBook], handle: OrderHandle) -> &RestingOrder {
    books[handle.instrument.index()].order(handle.slot)
}

#[inline]
fn has_key(order: &RestingOrder, account: AccountId, id: &str) -> bool {
    order.account == account && short_bytes_equal(order.id.as_bytes(), id.as_bytes())
}

impl OrderIndex {
    pub fn with_capacity(capacity: usize) -> OrderIndex {
        OrderIndex { table: HashTable::with_capacity(capacity) }
    }

    pub fn len(&self) -> usize {
        self.table.len()
    }

    pub fn is_empty(&self) -> bool {
        self.table.is_empty()
    }

    /// The open order `id` of `account`.
    #[inline]
    pub fn find(&self, books: &[OrderBook], account: AccountId, id: &str) -> Option<OrderHandle> {
        let hash = key_hash(account, id);
        self.table.find(hash, |&handle| has_key(order_at(books, handle), account, id)).copied()
    }

    /// Removes and returns the open order `id` of `account`.
    #[inline]
    pub fn take(
        &mut self,
        books: &[OrderBook],
        account: AccountId,
        id: &str,
    ) -> Option<OrderHandle> {
        let hash = key_hash(account, id);
        let entry =
            self.table.find_entry(hash, |&handle| has_key(order_at(books, handle), account, id));
        entry.ok().map(|entry| entry.remove().0)
    }

    /// Indexes the order resting at `handle` under its own key, which must not be
    /// indexed yet.
    #[inline]
    pub fn insert(&mut self, books: &[OrderBook], handle: OrderHandle) {
        let order = order_at(books, handle);
        let hash = key_hash(order.account, &order.id);
        self.table.insert_unique(hash, handle, |&other| {
            let other_order = order_at(books, other);
            key_hash(other_order.account, &other_order.id)
        });
    }

    /// Forgets the order at `handle`, whose key is (`account`, `id`). Compares handles
    /// only, so the order's record may already be gone from its book.
    #[inline]
    pub fn remove(&mut self, account: AccountId, id: &str, handle: OrderHandle) {
        let hash = key_hash(account, id);
        let removed = self.table.find_entry(hash, |&other| other == handle).map(|entry| {
            entry.remove();
        });
        debug_assert!(removed.is_ok(), "removing an order that is not indexed");
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::book::{BookCapacity, NewRestingOrder};
    use crate::command::{Side, StpMode};
    use crate::ids::{ClientOrderId, InstrumentId};
    use crate::num::{Price, Qty};

    fn rest(books: &mut [OrderBook], instrument: u32, account: u32, id: &str) -> OrderHandle {
        let slot = books[instrument as usize].insert(NewRestingOrder {
            account: AccountId(account),
            id: ClientOrderId::new(id),
            side: Side::Buy,
            price: Price(100),
            remaining: Qty(1),
            filled: Qty::ZERO,
            stp: StpMode::None,
            post_only: false,
        });
        OrderHandle { instrument: InstrumentId(instrument), slot }
    }

    #[test]
    fn finds_takes_and_removes_by_account_and_id_across_growth() {
        let mut books =
            vec![OrderBook::new(BookCapacity::default()), OrderBook::new(BookCapacity::default())];
        let mut index = OrderIndex::with_capacity(4);
        let mut handles = Vec::new();
        // The same ids under several accounts and instruments; the index grows many times.
        for number in 0..3_000u32 {
            let (instrument, account) = (number % 2, number % 3);
            let id = format!("order-{}", number / 3);
            let handle = rest(&mut books, instrument, account, &id);
            index.insert(&books, handle);
            handles.push((AccountId(account), id, handle));
        }
        assert_eq!(index.len(), 3_000);
        for (account, id, handle) in &handles {
            assert_eq!(index.find(&books, *account, id), Some(*handle));
        }
        assert_eq!(index.find(&books, AccountId(3), "order-0"), None);
        assert_eq!(index.find(&books, AccountId(0), "order-1000"), None);

        let (account, id, handle) = &handles[10];
        assert_eq!(index.take(&books, *account, id), Some(*handle));
        assert_eq!(index.take(&books, *account, id), None);
        let (account, id, handle) = &handles[11];
        index.remove(*account, id, *handle);
        assert_eq!(index.find(&books, *account, id), None);
        assert_eq!(index.len(), 2_998);
        for (account, id, handle) in handles.iter().skip(12) {
            assert_eq!(index.find(&books, *account, id), Some(*handle));
        }
    }
}
