//! The price levels of one book side near the market: each level's queue held in place
//! in a direct array over a fixed window of 65,536 consecutive side keys (ticks), and a
//! two-level bitmap of the occupied keys.
//!
//! Finding a level is one indexed load, creating one is setting a bit (no allocation,
//! no tree), and neighbouring prices sit side by side in memory. The array is allocated
//! zeroed, and an all-zero queue is an empty level, so the operating system backs only
//! the pages actually touched. Finding the next occupied level at or after a key reads
//! at most one word and the 16-word summary, whatever the depth of the book.
//! Keys outside the window are the caller's business (the book keeps them in a treap),
//! so the window never limits which prices can rest. Pure bookkeeping: no I/O.

use crate::num::Qty;
use crate::prefetch::prefetch;

/// Keys covered by one window.
pub const WINDOW_KEYS: usize = 1 << 16;
const WORDS: usize = WINDOW_KEYS / 64;
const SUMMARY_WORDS: usize = WORDS / 64;

/// The orders resting at one price, in arrival order (the order records link to each
/// other), and their totals. `order_count == 0` is an empty level, whose `head` and
/// `tail` mean nothing.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LevelQueue {
    pub head: u32,
    pub tail: u32,
    pub total_qty: Qty,
    pub order_count: u32,
}

/// A `LevelQueue` as stored in the window: a tuple of integers, so that the array can
/// be allocated zeroed (and left untouched) by the allocator.
type StoredQueue = (u32, u32, i64, u32);

impl LevelQueue {
    #[inline]
    fn load(stored: StoredQueue) -> LevelQueue {
        LevelQueue {
            head: stored.0,
            tail: stored.1,
            total_qty: Qty(stored.2),
            order_count: stored.3,
        }
    }

    #[inline]
    fn store(self) -> StoredQueue {
        (self.head, self.tail, self.total_qty.0, self.order_count)
    }
}

pub struct PriceWindow {
    /// The key of offset 0.
    base: i64,
    /// The queue of the level at each offset; all zero where there is none.
    queues: Box<[StoredQueue]>,
    /// Bit `offset` set when a level with key `base + offset` exists.
    words: Box<[u64; WORDS]>,
    /// Bit `w` set when `words[w]` is not zero.
    summary: [u64; SUMMARY_WORDS],
    occupied: u32,
}

impl PriceWindow {
    /// An empty window with `key` in its middle.
    pub fn centered_on(key: i64) -> PriceWindow {
        PriceWindow {
            base: key.saturating_sub(WINDOW_KEYS as i64 / 2),
            queues: vec![(0, 0, 0, 0); WINDOW_KEYS].into_boxed_slice(),
            words: Box::new([0; WORDS]),
            summary: [0; SUMMARY_WORDS],
            occupied: 0,
        }
    }

    pub fn is_empty(&self) -> bool {
        self.occupied == 0
    }

    /// Occupied keys.
    pub fn len(&self) -> usize {
        self.occupied as usize
    }

    /// Moves an empty window so that `key` is in its middle.
    pub fn recenter(&mut self, key: i64) {
        debug_assert!(self.is_empty());
        self.base = key.saturating_sub(WINDOW_KEYS as i64 / 2);
    }

    /// The offset of `key`, if the window covers it.
    #[inline]
    pub fn offset(&self, key: i64) -> Option<u32> {
        let offset = key.checked_sub(self.base)?;
        (0..WINDOW_KEYS as i64).contains(&offset).then_some(offset as u32)
    }

    #[inline]
    pub fn covers(&self, key: i64) -> bool {
        self.offset(key).is_some()
    }

    /// The key at `offset`, which must be below `WINDOW_KEYS`.
    #[inline]
    pub fn key_at_offset(&self, offset: u32) -> i64 {
        debug_assert!((offset as usize) < WINDOW_KEYS);
        self.base + i64::from(offset)
    }

    #[inline]
    pub fn is_occupied(&self, offset: u32) -> bool {
        let offset = offset as usize;
        self.words[offset / 64] & (1 << (offset % 64)) != 0
    }

    /// The queue at `offset` (empty where no level is).
    #[inline]
    pub fn queue(&self, offset: u32) -> LevelQueue {
        LevelQueue::load(self.queues[offset as usize])
    }

    #[inline]
    pub fn set_queue(&mut self, offset: u32, queue: LevelQueue) {
        self.queues[offset as usize] = queue.store();
    }

    /// Hint: the queue at `offset`, if the offset is in the window. Never panics.
    #[inline]
    pub(crate) fn prefetch_queue(&self, offset: u32) {
        if let Some(queue) = self.queues.get(offset as usize) {
            prefetch(queue);
        }
    }

    /// Marks the level at `offset` present; it must be absent.
    #[inline]
    pub fn occupy(&mut self, offset: u32) {
        let offset = offset as usize;
        let word = offset / 64;
        debug_assert!(self.words[word] & (1 << (offset % 64)) == 0);
        self.words[word] |= 1 << (offset % 64);
        self.summary[word / 64] |= 1 << (word % 64);
        self.occupied += 1;
    }

    /// Marks the level at `offset` absent; it must be present, with an empty queue.
    #[inline]
    pub fn vacate(&mut self, offset: u32) {
        debug_assert!(self.queue(offset).order_count == 0);
        let offset = offset as usize;
        let word = offset / 64;
        debug_assert!(self.words[word] & (1 << (offset % 64)) != 0);
        self.words[word] &= !(1 << (offset % 64));
        if self.words[word] == 0 {
            self.summary[word / 64] &= !(1 << (word % 64));
        }
        self.occupied -= 1;
    }

    /// The offset of the smallest occupied key `>= key`.
    pub fn first_offset_at_or_after(&self, key: i64) -> Option<u32> {
        self.first_at_or_after(key).map(|key| (key - self.base) as u32)
    }

    /// The smallest occupied key `>= key`.
    pub fn first_at_or_after(&self, key: i64) -> Option<i64> {
        let start = match key.checked_sub(self.base) {
            Some(offset) if offset < 0 => 0,
            Some(offset) if offset < WINDOW_KEYS as i64 => offset as usize,
            Some(_) => return None,
            None if key < self.base => 0,
            None => return None,
        };
        let word = start / 64;
        let bits = self.words[word] & (u64::MAX << (start % 64));
        if bits != 0 {
            return Some(self.key_at(word, bits));
        }
        let next_word = word + 1;
        if next_word == WORDS {
            return None;
        }
        let mut summary_index = next_word / 64;
        let mut candidates = self.summary[summary_index] & (u64::MAX << (next_word % 64));
        loop {
            if candidates != 0 {
                let word = summary_index * 64 + candidates.trailing_zeros() as usize;
                return Some(self.key_at(word, self.words[word]));
            }
            summary_index += 1;
            if summary_index == SUMMARY_WORDS {
                return None;
            }
            candidates = self.summary[summary_index];
        }
    }

    #[inline]
    fn key_at(&self, word: usize, bits: u64) -> i64 {
        self.base + (word * 64 + bits.trailing_zeros() as usize) as i64
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_random::xorshift64;
    use std::collections::BTreeSet;

    fn occupy(window: &mut PriceWindow, key: i64) {
        let offset = window.offset(key).expect("a covered key");
        window.occupy(offset);
    }

    fn vacate(window: &mut PriceWindow, key: i64) {
        let offset = window.offset(key).expect("a covered key");
        window.vacate(offset);
    }

    fn is_occupied(window: &PriceWindow, key: i64) -> bool {
        window.offset(key).is_some_and(|offset| window.is_occupied(offset))
    }

    #[test]
    fn finds_the_next_occupied_key_across_words_and_summary_words() {
        let mut window = PriceWindow::centered_on(100_000);
        let keys = [67_233, 70_000, 70_063, 70_064, 99_999, 100_000, 132_767];
        for key in keys {
            assert!(window.covers(key));
            occupy(&mut window, key);
        }
        assert!(!window.covers(67_231) && !window.covers(132_768));
        let expected: BTreeSet<i64> = keys.into_iter().collect();
        for probe in [
            i64::MIN,
            0,
            67_233,
            67_234,
            70_001,
            70_064,
            70_065,
            100_001,
            132_767,
            132_768,
            i64::MAX,
        ] {
            assert_eq!(
                window.first_at_or_after(probe),
                expected.range(probe..).next().copied(),
                "{probe}"
            );
        }
        assert!(is_occupied(&window, 70_063));
        vacate(&mut window, 70_063);
        vacate(&mut window, 70_064);
        assert!(!is_occupied(&window, 70_063));
        assert_eq!(window.first_at_or_after(70_001), Some(99_999));
    }

    #[test]
    fn agrees_with_a_sorted_set_on_random_operations() {
        let mut window = PriceWindow::centered_on(0);
        let mut model = BTreeSet::new();
        let mut state = 0x1234_5678_9abc_def0u64;
        for _ in 0..20_000 {
            xorshift64(&mut state);
            let key = (state % WINDOW_KEYS as u64) as i64 - WINDOW_KEYS as i64 / 2;
            if model.remove(&key) {
                vacate(&mut window, key);
            } else {
                model.insert(key);
                occupy(&mut window, key);
            }
            let probe = ((state >> 20) % WINDOW_KEYS as u64) as i64 - WINDOW_KEYS as i64 / 2;
            assert_eq!(window.first_at_or_after(probe), model.range(probe..).next().copied());
        }
    }

    #[test]
    fn windows_at_the_ends_of_the_key_range_do_not_overflow() {
        let mut low = PriceWindow::centered_on(-i64::MAX);
        occupy(&mut low, -i64::MAX);
        assert_eq!(low.first_at_or_after(i64::MIN), Some(-i64::MAX));
        let mut high = PriceWindow::centered_on(i64::MAX);
        assert!(high.covers(i64::MAX) && !high.covers(i64::MAX - 40_000));
        occupy(&mut high, i64::MAX - 1);
        assert_eq!(high.first_at_or_after(0), Some(i64::MAX - 1));
        assert_eq!(high.first_at_or_after(i64::MAX), None);
        assert_eq!(high.first_at_or_after(i64::MAX - 40_000), Some(i64::MAX - 1));
        occupy(&mut high, i64::MAX);
        assert_eq!(high.first_at_or_after(i64::MAX), Some(i64::MAX));
    }

    #[test]
    fn queues_start_empty_and_keep_what_is_stored() {
        let mut window = PriceWindow::centered_on(1_000);
        let offset = window.offset(1_000).expect("the centre is covered");
        assert_eq!(window.queue(offset), LevelQueue::default());
        let queue = LevelQueue { head: 7, tail: u32::MAX - 1, total_qty: Qty(-5), order_count: 3 };
        window.set_queue(offset, queue);
        assert_eq!(window.queue(offset), queue);
        assert_eq!(window.key_at_offset(offset), 1_000);
        assert_eq!(window.queue(offset + 1), LevelQueue::default());
    }
}
