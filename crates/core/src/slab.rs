//! A pool of fixed-size slots addressed by `u32`, growing only in whole chunks.
//!
//! Slots never move once handed out (chunks are separate allocations), so growth never
//! copies existing entries and never stalls the hot path for a big reallocation. Freed
//! slots go on a free list that is reserved in step with the chunks, so insert and
//! remove never allocate except when a whole new chunk is added. Chunks are fixed-size
//! arrays filled with a vacant value when added, so finding a slot is a shift, a mask
//! and one bounds check (the offset is in range by construction).

/// Slots per chunk. A power of two, so that a slot splits into chunk and offset with a
/// shift and a mask.
pub const CHUNK_SLOTS: usize = 1024;
const CHUNK_SHIFT: u32 = CHUNK_SLOTS.trailing_zeros();

pub struct Slab<T> {
    chunks: Vec<Box<[T; CHUNK_SLOTS]>>,
    free_slots: Vec<u32>,
    /// Slots handed out at least once; the ones above are untouched.
    slots_used: usize,
    live_count: usize,
    /// What fills the slots of a new chunk.
    vacant: T,
}

impl<T: Clone> Slab<T> {
    /// A slab with room for at least `capacity` entries before it grows; new chunks are
    /// filled with `vacant`.
    pub fn with_capacity(capacity: usize, vacant: T) -> Slab<T> {
        let mut slab = Slab {
            chunks: Vec::new(),
            free_slots: Vec::new(),
            slots_used: 0,
            live_count: 0,
            vacant,
        };
        while slab.capacity() < capacity.max(1) {
            slab.add_chunk();
        }
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
        &self.chunks[(slot >> CHUNK_SHIFT) as usize][slot as usize & (CHUNK_SLOTS - 1)]
    }

    /// The entry at `slot`, or `None` for a slot beyond the slab (for cache hints, which
    /// may hold stale slots).
    #[inline]
    pub fn try_get(&self, slot: u32) -> Option<&T> {
        self.chunks
            .get((slot >> CHUNK_SHIFT) as usize)
            .map(|chunk| &chunk[slot as usize & (CHUNK_SLOTS - 1)])
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
}
