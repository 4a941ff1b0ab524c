//! A pool of fixed-size slots addressed by `u32`: one block reserved up front, then
//! whole chunks.
//!
//! Slots never move once handed out (the block and the chunks are separate
//! allocations), so growth never copies existing entries and never stalls the hot path
//! for a big reallocation. Freed slots go on a free list that is reserved in step with
//! the pool, so insert and remove never allocate except when a whole new chunk is added.
//! The block holds the capacity the pool was made with (what a venue configures), so a
//! slot there, the usual case, is found with one bounds check on one array; a slot in a
//! later chunk with a subtraction, a shift and a mask besides. The block and the chunks
//! are filled with a vacant value when allocated.

/// Slots per chunk, and the unit the first block is rounded up to. A power of two, so
/// that a slot beyond the block splits into chunk and offset with a shift and a mask.
pub const CHUNK_SLOTS: usize = 1024;
const CHUNK_SHIFT: u32 = CHUNK_SLOTS.trailing_zeros();

pub struct Slab<T> {
    /// Slots `0..first.len()`.
    first: Box<[T]>,
    /// Slot `first.len() + i * CHUNK_SLOTS + j` is `chunks[i][j]`.
    chunks: Vec<Box<[T; CHUNK_SLOTS]>>,
    free_slots: Vec<u32>,
    /// Slots handed out at least once; the ones above are untouched.
    slots_used: usize,
    live_count: usize,
    /// What fills the slots of a new chunk.
    vacant: T,
}

impl<T: Clone> Slab<T> {
    /// A slab with room for at least `capacity` entries before it grows; its slots are
    /// filled with `vacant`.
    pub fn with_capacity(capacity: usize, vacant: T) -> Slab<T> {
        let first_slots = capacity.max(1).next_multiple_of(CHUNK_SLOTS);
        let mut slab = Slab {
            first: vec![vacant.clone(); first_slots].into_boxed_slice(),
            chunks: Vec::new(),
            free_slots: Vec::new(),
            slots_used: 0,
            live_count: 0,
            vacant,
        };
        // Room for every slot on the free list, so `remove` never allocates.
        slab.free_slots.reserve(slab.capacity());
        slab
    }

    fn add_chunk(&mut self) {
        let chunk: Box<[T]> = vec![self.vacant.clone(); CHUNK_SLOTS].into_boxed_slice();
        match chunk.try_into() {
            Ok(chunk) => self.chunks.push(chunk),
            Err(_) => unreachable!("a chunk has CHUNK_SLOTS slots"),
        }
        // Room for every slot on the free list, so `remove` never allocates.
        self.free_slots.reserve(self.capacity().saturating_sub(self.free_slots.len()));
    }

    /// Stores `value` and returns its slot.
    pub fn insert(&mut self, value: T) -> u32 {
        self.live_count += 1;
        let slot = match self.free_slots.pop() {
            Some(slot) => slot,
            None => {
                if self.slots_used == self.capacity() {
                    self.add_chunk();
                }
                self.slots_used += 1;
                u32::try_from(self.slots_used - 1).expect("a slab holds fewer than 2^32 slots")
            }
        };
        *self.get_mut(slot) = value;
        slot
    }
}

impl<T> Slab<T> {
    /// Returns `slot` to the pool. The value stays in place (and readable through
    /// `get`) until the slot is reused; callers must not keep the slot.
    pub fn remove(&mut self, slot: u32) {
        debug_assert!(self.live_count > 0);
        self.live_count -= 1;
        self.free_slots.push(slot);
    }

    #[inline]
    pub fn get(&self, slot: u32) -> &T {
        match self.first.get(slot as usize) {
            Some(value) => value,
            None => self.in_chunk(slot),
        }
    }

    /// The entry at `slot`, or `None` for a slot beyond the slab (for cache hints, which
    /// may hold stale slots).
    #[inline]
    pub fn try_get(&self, slot: u32) -> Option<&T> {
        match self.first.get(slot as usize) {
            Some(value) => Some(value),
            None => {
                let (chunk, offset) = self.chunk_position(slot);
                self.chunks.get(chunk).map(|chunk| &chunk[offset])
            }
        }
    }

    /// A slot beyond the first block.
    fn in_chunk(&self, slot: u32) -> &T {
        let (chunk, offset) = self.chunk_position(slot);
        &self.chunks[chunk][offset]
    }

    /// The chunk and the offset in it of `slot`, which lies beyond the first block.
    #[inline]
    fn chunk_position(&self, slot: u32) -> (usize, usize) {
        let beyond = slot as usize - self.first.len();
        (beyond >> CHUNK_SHIFT, beyond & (CHUNK_SLOTS - 1))
    }

    /// The slot the next `insert` will use, if it needs no new chunk.
    #[inline]
    pub fn next_slot(&self) -> Option<u32> {
        match self.free_slots.last() {
            Some(&slot) => Some(slot),
            None => (self.slots_used < self.capacity()).then_some(self.slots_used as u32),
        }
    }

    #[inline]
    pub fn get_mut(&mut self, slot: u32) -> &mut T {
        if (slot as usize) < self.first.len() {
            return &mut self.first[slot as usize];
        }
        let (chunk, offset) = self.chunk_position(slot);
        &mut self.chunks[chunk][offset]
    }

    pub fn len(&self) -> usize {
        self.live_count
    }

    pub fn is_empty(&self) -> bool {
        self.live_count == 0
    }

    /// Slots allocated so far, live or free.
    pub fn capacity(&self) -> usize {
        self.first.len() + self.chunks.len() * CHUNK_SLOTS
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reuses_freed_slots_before_growing() {
        let mut slab = Slab::with_capacity(1, 0);
        let first = slab.insert(10);
        let second = slab.insert(20);
        slab.remove(first);
        assert_eq!(slab.insert(30), first);
        assert_eq!(*slab.get(first), 30);
        assert_eq!(*slab.get(second), 20);
        assert_eq!(slab.len(), 2);
    }

    #[test]
    fn grows_by_whole_chunks_without_moving_entries() {
        let mut slab = Slab::with_capacity(1, 0u64);
        let first = slab.insert(7u64);
        let address = slab.get(first) as *const u64;
        for value in 0..(CHUNK_SLOTS as u64 * 2) {
            slab.insert(value);
        }
        assert_eq!(slab.capacity(), CHUNK_SLOTS * 3);
        assert_eq!(address, slab.get(first) as *const u64);
    }

    #[test]
    fn slots_in_the_first_block_and_in_later_chunks_read_back_and_beyond_is_none() {
        let mut slab = Slab::with_capacity(1_500, 0u32);
        assert_eq!(slab.capacity(), 2 * CHUNK_SLOTS);
        let slots: Vec<u32> = (0..5_000u32).map(|value| slab.insert(value)).collect();
        assert_eq!(slab.capacity(), 5 * CHUNK_SLOTS);
        for (value, &slot) in (0u32..).zip(&slots) {
            assert_eq!(*slab.get(slot), value);
            assert_eq!(slab.try_get(slot), Some(&value));
        }
        assert_eq!(slab.try_get(5 * CHUNK_SLOTS as u32), None);
        assert_eq!(slab.try_get(u32::MAX), None);
        *slab.get_mut(slots[4_999]) = 7;
        *slab.get_mut(slots[0]) = 8;
        assert_eq!((*slab.get(slots[4_999]), *slab.get(slots[0])), (7, 8));
    }
}
