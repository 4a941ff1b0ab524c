//! A pool of fixed-size slots addressed by `u32`, growing only in whole chunks.
//!
//! Slots never move once handed out (chunks are separate allocations), so growth never
//! copies existing entries and never stalls the hot path for a big reallocation. Freed
//! slots go on a free list that is reserved in step with the chunks, so insert and
//! remove never allocate except when a whole new chunk is added.

/// Slots per chunk. A power of two, so that a slot splits into chunk and offset with a
/// shift and a mask.
pub const CHUNK_SLOTS: usize = 4096;
const CHUNK_SHIFT: u32 = CHUNK_SLOTS.trailing_zeros();

pub struct Slab<T> {
    chunks: Vec<Vec<T>>,
    free_slots: Vec<u32>,
    live_count: usize,
}

impl<T> Slab<T> {
    /// A slab with room for at least `capacity` entries before it grows.
    pub fn with_capacity(capacity: usize) -> Slab<T> {
        let mut slab = Slab { chunks: Vec::new(), free_slots: Vec::new(), live_count: 0 };
        while slab.chunks.len() * CHUNK_SLOTS < capacity.max(1) {
            slab.add_chunk();
        }
        slab
    }

    fn add_chunk(&mut self) {
        self.chunks.push(Vec::with_capacity(CHUNK_SLOTS));
        // Room for every slot on the free list, so `remove` never allocates.
        let slots_total = self.chunks.len() * CHUNK_SLOTS;
        self.free_slots.reserve(slots_total.saturating_sub(self.free_slots.len()));
    }

    /// Stores `value` and returns its slot.
    pub fn insert(&mut self, value: T) -> u32 {
        self.live_count += 1;
        if let Some(slot) = self.free_slots.pop() {
            *self.get_mut(slot) = value;
            return slot;
        }
        if self.chunks.last().is_none_or(|chunk| chunk.len() == CHUNK_SLOTS) {
            self.add_chunk();
        }
        let chunk_index = self.chunks.len() - 1;
        let chunk = &mut self.chunks[chunk_index];
        let slot = (chunk_index << CHUNK_SHIFT) | chunk.len();
        chunk.push(value);
        u32::try_from(slot).expect("a slab holds fewer than 2^32 slots")
    }

    /// Returns `slot` to the pool. The value stays in place (and readable through
    /// `get`) until the slot is reused; callers must not keep the slot.
    pub fn remove(&mut self, slot: u32) {
        debug_assert!(self.live_count > 0);
        self.live_count -= 1;
        self.free_slots.push(slot);
    }

    #[inline]
    pub fn get(&self, slot: u32) -> &T {
        &self.chunks[(slot >> CHUNK_SHIFT) as usize][slot as usize & (CHUNK_SLOTS - 1)]
    }

    #[inline]
    pub fn get_mut(&mut self, slot: u32) -> &mut T {
        &mut self.chunks[(slot >> CHUNK_SHIFT) as usize][slot as usize & (CHUNK_SLOTS - 1)]
    }

    pub fn len(&self) -> usize {
        self.live_count
    }

    pub fn is_empty(&self) -> bool {
        self.live_count == 0
    }

    /// Slots allocated so far, live or free.
    pub fn capacity(&self) -> usize {
        self.chunks.len() * CHUNK_SLOTS
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reuses_freed_slots_before_growing() {
        let mut slab = Slab::with_capacity(1);
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
        let mut slab = Slab::with_capacity(1);
        let first = slab.insert(7u64);
        let address = slab.get(first) as *const u64;
        for value in 0..(CHUNK_SLOTS as u64 * 2) {
            slab.insert(value);
        }
        assert_eq!(slab.capacity(), CHUNK_SLOTS * 3);
        assert_eq!(address, slab.get(first) as *const u64);
    }
}
