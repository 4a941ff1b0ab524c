//! The one way the core asks the processor to start loading memory early (see
//! `lookahead`). A hint has no effect on any value: it cannot fault, and an early, late
//! or wrong one only changes how fast the program runs.

/// Starts loading the cache lines that hold `value`.
#[inline(always)]
pub(crate) fn prefetch<T>(value: &T) {
    let first = value as *const T as *const i8;
    let last = first.wrapping_add(std::mem::size_of::<T>().saturating_sub(1));
    prefetch_line(first);
    if (first as usize) >> 6 != (last as usize) >> 6 {
        prefetch_line(last);
    }
}

#[inline(always)]
fn prefetch_line(address: *const i8) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: a prefetch never dereferences its address in the program's sense: it
    // cannot fault, and it reads or writes no memory the program can observe.
    unsafe {
        std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(address);
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = address;
}
