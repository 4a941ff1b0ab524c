//! The price levels of one book side near the market: a direct array from side key
//! (tick) to level slot over a fixed window of 65,536 consecutive keys, and a two-level
//! bitmap of the occupied keys.
//!
//! Finding a level is one indexed load, and neighbouring prices sit side by side in
//! memory; the array is allocated zeroed, so the operating system backs only the pages
//! actually touched. Adding or removing a level flips a bit; finding the next occupied
//! level at or after a key reads at most one word and the 16-word summary, whatever the
//! depth of the book.
//! Keys outside the window are the caller's business (the book keeps them in a treap),
//! so the window never limits which prices can rest. Pure bookkeeping: no I/O.

/// Keys covered by one window.
pub const WINDOW_KEYS: usize = 1 << 16;
const WORDS: usize = WINDOW_KEYS / 64;
const SUMMARY_WORDS: usize = WORDS / 64;

pub struct PriceWindow {
    /// The key of offset 0.
    base: i64,
    /// Level slot + 1 per offset; 0 for none.
    slots: Box<[u32]>,
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
            slots: vec![0; WINDOW_KEYS].into_boxed_slice(),
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
    fn offset(&self, key: i64) -> Option<usize> {
        let offset = key.checked_sub(self.base)?;
        (0..WINDOW_KEYS as i64).contains(&offset).then_some(offset as usize)
    }

    #[inline]
    pub fn covers(&self, key: i64) -> bool {
        self.offset(key).is_some()
    }

    /// The level slot at `key`, if the window covers it and it is occupied.
    #[inline]
    pub fn get(&self, key: i64) -> Option<u32> {
        let slot_plus_one = self.slots[self.offset(key)?];
        slot_plus_one.checked_sub(1)
    }

    /// The entry for `key`, if covered: for cache hints.
    #[inline]
    pub(crate) fn entry(&self, key: i64) -> Option<&u32> {
        self.slots.get(self.offset(key)?)
    }

    /// Records level `slot` at `key`; `key` must be covered and not yet occupied.
    pub fn insert(&mut self, key: i64, slot: u32) {
        let offset = self.offset(key).expect("insert of a key the window covers");
        self.slots[offset] = slot.checked_add(1).expect("level slots stay below u32::MAX");
        let word = offset / 64;
        debug_assert!(self.words[word] & (1 << (offset % 64)) == 0);
        self.words[word] |= 1 << (offset % 64);
        self.summary[word / 64] |= 1 << (word % 64);
        self.occupied += 1;
    }

    /// Marks `key` free; it must be occupied.
    pub fn remove(&mut self, key: i64) {
        let offset = self.offset(key).expect("remove of a key the window covers");
        self.slots[offset] = 0;
        let word = offset / 64;
        debug_assert!(self.words[word] & (1 << (offset % 64)) != 0);
        self.words[word] &= !(1 << (offset % 64));
        if self.words[word] == 0 {
            self.summary[word / 64] &= !(1 << (word % 64));
        }
        self.occupied -= 1;
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

    #[test]
    fn finds_the_next_occupied_key_across_words_and_summary_words() {
        let mut window = PriceWindow::centered_on(100_000);
        let keys = [67_233, 70_000, 70_063, 70_064, 99_999, 100_000, 132_767];
        for key in keys {
            assert!(window.covers(key));
            window.insert(key, key as u32);
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
        assert_eq!(window.get(70_063), Some(70_063));
        window.remove(70_063);
        window.remove(70_064);
        assert_eq!(window.get(70_063), None);
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
                window.remove(key);
            } else {
                model.insert(key);
                window.insert(key, 7);
            }
            let probe = ((state >> 20) % WINDOW_KEYS as u64) as i64 - WINDOW_KEYS as i64 / 2;
            assert_eq!(window.first_at_or_after(probe), model.range(probe..).next().copied());
        }
    }

    #[test]
    fn windows_at_the_ends_of_the_key_range_do_not_overflow() {
        let mut low = PriceWindow::centered_on(-i64::MAX);
        low.insert(-i64::MAX, 0);
        assert_eq!(low.first_at_or_after(i64::MIN), Some(-i64::MAX));
        let mut high = PriceWindow::centered_on(i64::MAX);
        assert!(high.covers(i64::MAX) && !high.covers(i64::MAX - 40_000));
        high.insert(i64::MAX - 1, 1);
        assert_eq!(high.first_at_or_after(0), Some(i64::MAX - 1));
        assert_eq!(high.first_at_or_after(i64::MAX), None);
        assert_eq!(high.first_at_or_after(i64::MAX - 40_000), Some(i64::MAX - 1));
        high.insert(i64::MAX, 2);
        assert_eq!(high.first_at_or_after(i64::MAX), Some(i64::MAX));
    }
}
