//! The open-order index: finds a resting order by its key (account, client order id).
//!
//! An open-addressing table with linear probing, written for this one job. Each entry
//! is 12 bytes: a 32-bit hash tag and the order's handle (instrument, slot). The key
//! itself lives in the order record on the book, so a lookup confirms a candidate by
//! comparing the order it points at, which the caller reads next anyway: one probe of a
//! small table (usually one cache line), then the order. The tag alone places an entry
//! (its home slot is `tag & mask`), so growing and deleting (backward shift, no
//! tombstones) never rehash a key. The table is at most half full. The index owns no
//! order and never changes a book; keeping it equal to the books is the exchange's job
//! (checked by `Exchange::check_invariants`).

use crate::book::{OrderBook, RestingOrder};
use crate::ids::{seeded_name_hash, short_bytes_equal, AccountId, InstrumentId, OrderHandle};
use crate::prefetch::prefetch;

/// A slot of the table; `tag == 0` marks it empty.
#[derive(Clone, Copy, Default)]
struct Entry {
    tag: u32,
    instrument: u32,
    slot: u32,
}

impl Entry {
    fn handle(self) -> OrderHandle {
        OrderHandle { instrument: InstrumentId(self.instrument), slot: self.slot }
    }
}

pub struct OrderIndex {
    /// A power of two in length (or empty), at most half occupied.
    entries: Vec<Entry>,
    len: usize,
}

/// The tag of an order key: 32 bits of its hash, never 0.
#[inline]
fn key_tag(account: AccountId, id: &str) -> u32 {
    ((seeded_name_hash(u64::from(account.0), id.as_bytes()) >> 32) as u32).max(1)
}

#[inline]
fn order_at(books: &[OrderBook], handle: OrderHandle) -> &RestingOrder {
    books[handle.instrument.index()].order(handle.slot)
}

#[inline]
fn has_key(order: &RestingOrder, account: AccountId, id: &str) -> bool {
    order.account == account && short_bytes_equal(order.id.as_bytes(), id.as_bytes())
}

const MIN_ENTRIES: usize = 16;

impl OrderIndex {
    /// An index that holds `capacity` orders before it first grows.
    pub fn with_capacity(capacity: usize) -> OrderIndex {
        let entries = (capacity.saturating_mul(2)).max(MIN_ENTRIES).next_power_of_two();
        OrderIndex { entries: vec![Entry::default(); entries], len: 0 }
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    #[inline]
    fn mask(&self) -> usize {
        self.entries.len() - 1
    }

    /// The position of the entry for (`account`, `id`), if indexed.
    #[inline]
    fn position(&self, books: &[OrderBook], account: AccountId, id: &str) -> Option<usize> {
        let tag = key_tag(account, id);
        let mask = self.mask();
        let mut position = tag as usize & mask;
        loop {
            let entry = self.entries[position];
            if entry.tag == 0 {
                return None;
            }
            if entry.tag == tag && has_key(order_at(books, entry.handle()), account, id) {
                return Some(position);
            }
            position = (position + 1) & mask;
        }
    }

    /// The open order `id` of `account`.
    #[inline]
    pub fn find(&self, books: &[OrderBook], account: AccountId, id: &str) -> Option<OrderHandle> {
        self.position(books, account, id).map(|position| self.entries[position].handle())
    }

    /// Removes and returns the open order `id` of `account`.
    #[inline]
    pub fn take(
        &mut self,
        books: &[OrderBook],
        account: AccountId,
        id: &str,
    ) -> Option<OrderHandle> {
        let position = self.position(books, account, id)?;
        let handle = self.entries[position].handle();
        self.remove_at(position);
        Some(handle)
    }

    /// Indexes the order resting at `handle` under its own key, which must not be
    /// indexed yet.
    #[inline]
    pub fn insert(&mut self, books: &[OrderBook], handle: OrderHandle) {
        let order = order_at(books, handle);
        debug_assert!(self.find(books, order.account, &order.id).is_none(), "indexed twice");
        if (self.len + 1) * 2 > self.entries.len() {
            self.grow();
        }
        let entry = Entry {
            tag: key_tag(order.account, &order.id),
            instrument: handle.instrument.0,
            slot: handle.slot,
        };
        self.place(entry);
        self.len += 1;
    }

    /// Indexes the order resting at `handle` unless its key is indexed already (then
    /// `false`, and no entry is added). One probe does both, which is what rebuilding
    /// the index from untrusted snapshot bytes needs: a duplicate key is an error
    /// there, not a bug.
    pub fn insert_if_absent(&mut self, books: &[OrderBook], handle: OrderHandle) -> bool {
        if (self.len + 1) * 2 > self.entries.len() {
            self.grow();
        }
        let order = order_at(books, handle);
        let tag = key_tag(order.account, &order.id);
        let mask = self.mask();
        let mut position = tag as usize & mask;
        loop {
            let entry = self.entries[position];
            if entry.tag == 0 {
                break;
            }
            if entry.tag == tag
                && has_key(order_at(books, entry.handle()), order.account, &order.id)
            {
                return false;
            }
            position = (position + 1) & mask;
        }
        self.entries[position] = Entry { tag, instrument: handle.instrument.0, slot: handle.slot };
        self.len += 1;
        true
    }

    /// Makes room for `orders` open orders in all, so that adding them rehashes nothing
    /// (a restored exchange knows its order count up front).
    pub fn reserve(&mut self, orders: usize) {
        let entries = orders.saturating_mul(2).max(MIN_ENTRIES).checked_next_power_of_two();
        let Some(entries) = entries.filter(|&entries| entries > self.entries.len()) else {
            return;
        };
        let old = std::mem::replace(&mut self.entries, vec![Entry::default(); entries]);
        for entry in old.into_iter().filter(|entry| entry.tag != 0) {
            self.place(entry);
        }
    }

    /// Forgets the order at `handle`, whose key is (`account`, `id`). Compares handles
    /// only, so the order's record may already be gone from its book.
    #[inline]
    pub fn remove(&mut self, account: AccountId, id: &str, handle: OrderHandle) {
        let tag = key_tag(account, id);
        let mask = self.mask();
        let mut position = tag as usize & mask;
        loop {
            let entry = self.entries[position];
            if entry.tag == 0 {
                debug_assert!(false, "removing an order that is not indexed");
                return;
            }
            if entry.tag == tag && entry.handle() == handle {
                self.remove_at(position);
                return;
            }
            position = (position + 1) & mask;
        }
    }

    /// Hint: starts loading the entry where a probe for (`account`, `id`) begins, and
    /// returns the key's tag for `likely_handle`.
    #[inline]
    pub(crate) fn prefetch_home(&self, account: AccountId, id: &str) -> u32 {
        let tag = key_tag(account, id);
        if let Some(entry) = self.entries.get(tag as usize & self.mask()) {
            prefetch(entry);
        }
        tag
    }

    /// The handle of the first entry with `tag`, without confirming the key: where the
    /// order most likely is, for cache hints.
    #[inline]
    pub(crate) fn likely_handle(&self, tag: u32) -> Option<OrderHandle> {
        let mask = self.mask();
        let mut position = tag as usize & mask;
        loop {
            let entry = *self.entries.get(position)?;
            if entry.tag == tag {
                return Some(entry.handle());
            }
            if entry.tag == 0 {
                return None;
            }
            position = (position + 1) & mask;
        }
    }

    /// Puts `entry` in the first empty slot from its home on.
    #[inline]
    fn place(&mut self, entry: Entry) {
        let mask = self.mask();
        let mut position = entry.tag as usize & mask;
        while self.entries[position].tag != 0 {
            position = (position + 1) & mask;
        }
        self.entries[position] = entry;
    }

    /// Empties the slot at `hole`, then shifts back every later entry of the same run
    /// that may move closer to its home, so that no probe ever stops short.
    fn remove_at(&mut self, mut hole: usize) {
        let mask = self.mask();
        let mut next = (hole + 1) & mask;
        loop {
            let entry = self.entries[next];
            if entry.tag == 0 {
                break;
            }
            let home = entry.tag as usize & mask;
            // `entry` may fill the hole when the hole lies between its home and where it
            // is now (cyclically): its probe passes the hole.
            let distance_to_entry = next.wrapping_sub(home) & mask;
            let distance_to_hole = hole.wrapping_sub(home) & mask;
            if distance_to_hole < distance_to_entry {
                self.entries[hole] = entry;
                hole = next;
            }
            next = (next + 1) & mask;
        }
        self.entries[hole] = Entry::default();
        self.len -= 1;
    }

    /// Doubles the table. Entries move by their tags alone: no key is read.
    #[cold]
    fn grow(&mut self) {
        let doubled = (self.entries.len() * 2).max(MIN_ENTRIES);
        let old = std::mem::replace(&mut self.entries, vec![Entry::default(); doubled]);
        for entry in old.into_iter().filter(|entry| entry.tag != 0) {
            self.place(entry);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::book::{BookCapacity, NewRestingOrder};
    use crate::command::{Offset, Side, StpMode};
    use crate::ids::{ClientOrderId, InstrumentId};
    use crate::num::{Price, Qty};
    use crate::test_random::xorshift64;

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
            offset: Offset::Open,
            good_for_day: false,
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
            // The hint's guess, from the tag alone, is right but for tag collisions.
            let tag = index.prefetch_home(*account, id);
            assert_eq!(index.likely_handle(tag), Some(*handle));
        }
        assert_eq!(index.likely_handle(index.prefetch_home(AccountId(3), "order-0")), None);
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

    #[test]
    fn agrees_with_a_hash_map_over_random_inserts_and_removals() {
        let mut books = vec![OrderBook::new(BookCapacity::default())];
        let mut index = OrderIndex::with_capacity(0);
        let mut model = std::collections::HashMap::new();
        let mut state = 0x9e37_79b9_7f4a_7c15u64;
        let mut random = |bound: u64| xorshift64(&mut state) % bound;
        for step in 0..60_000 {
            let account = AccountId(random(7) as u32);
            let id = format!("c{}", random(400));
            let key = (account, id.clone());
            match random(3) {
                0 | 1 if !model.contains_key(&key) => {
                    let handle = rest(&mut books, 0, account.0, &id);
                    index.insert(&books, handle);
                    model.insert(key, handle);
                }
                0 => {
                    let taken = index.take(&books, account, &id);
                    assert_eq!(taken, model.remove(&key), "step {step}");
                    books[0].remove(taken.expect("indexed").slot);
                }
                _ => {
                    if let Some(handle) = model.remove(&key) {
                        books[0].remove(handle.slot);
                        index.remove(account, &id, handle);
                    }
                }
            }
            assert_eq!(index.len(), model.len(), "step {step}");
            if step % 1_000 == 0 {
                for ((account, id), handle) in &model {
                    assert_eq!(index.find(&books, *account, id), Some(*handle), "step {step}");
                }
            }
        }
        assert!(model.len() > 500, "the index held many orders at once: {}", model.len());
    }
}
