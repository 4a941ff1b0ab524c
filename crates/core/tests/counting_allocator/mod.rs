//! A counting global allocator for the no-allocation tests (`no_allocation_per_order.rs`,
//! `venue_no_allocation.rs`): every test binary that declares this module allocates
//! through it. It counts the allocations (and reallocations) of one thread only, inside
//! [`count_allocations`]: the test harness's own threads may allocate meanwhile.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::sync::atomic::{AtomicUsize, Ordering};

pub struct CountingAllocator;

#[global_allocator]
static GLOBAL: CountingAllocator = CountingAllocator;

static ALLOCATIONS: AtomicUsize = AtomicUsize::new(0);

thread_local! {
    /// Whether this thread's allocations are counted.
    static COUNTED: Cell<bool> = const { Cell::new(false) };
}

fn count() {
    if COUNTED.try_with(Cell::get).unwrap_or(false) {
        ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
    }
}

unsafe impl GlobalAlloc for CountingAllocator {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        count();
        unsafe { System.alloc(layout) }
    }

    unsafe fn dealloc(&self, pointer: *mut u8, layout: Layout) {
        unsafe { System.dealloc(pointer, layout) }
    }

    unsafe fn realloc(&self, pointer: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        count();
        unsafe { System.realloc(pointer, layout, new_size) }
    }
}

/// Runs `work` on this thread, counting the allocations it makes; returns what it
/// returns and that count.
pub fn count_allocations<T>(work: impl FnOnce() -> T) -> (T, usize) {
    let before = ALLOCATIONS.load(Ordering::Relaxed);
    COUNTED.with(|counted| counted.set(true));
    let result = work();
    COUNTED.with(|counted| counted.set(false));
    (result, ALLOCATIONS.load(Ordering::Relaxed) - before)
}
