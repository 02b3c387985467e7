//! A global allocator that counts live bytes and remembers their peak, for tests that bound
//! the memory ingest may use whatever its input (see `tests/bombs.rs`), and counts every
//! allocation and the bytes it asked for, for tests that hold work to the input's size
//! (`tests/work.rs`).

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering};

/// [`System`], counting.
#[derive(Debug)]
pub struct Counting {
    live: AtomicUsize,
    peak: AtomicUsize,
    /// Allocations and reallocations since [`Counting::reset_work`].
    calls: AtomicUsize,
    /// Bytes they asked for (a reallocation counts its new size).
    asked: AtomicUsize,
}

/// Work the allocator saw between [`Counting::reset_work`] and [`Counting::work`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Work {
    /// Allocations and reallocations.
    pub calls: usize,
    /// Bytes asked for.
    pub bytes: usize,
}

impl Counting {
    pub const fn new() -> Self {
        Counting {
            live: AtomicUsize::new(0),
            peak: AtomicUsize::new(0),
            calls: AtomicUsize::new(0),
            asked: AtomicUsize::new(0),
        }
    }

    /// Starts counting allocations afresh.
    pub fn reset_work(&self) {
        self.calls.store(0, Ordering::Relaxed);
        self.asked.store(0, Ordering::Relaxed);
    }

    /// Allocations and bytes asked for since [`Counting::reset_work`].
    pub fn work(&self) -> Work {
        Work { calls: self.calls.load(Ordering::Relaxed), bytes: self.asked.load(Ordering::Relaxed) }
    }

    /// Bytes allocated and not yet freed.
    pub fn live(&self) -> usize {
        self.live.load(Ordering::Relaxed)
    }

    /// Starts a new measurement: the peak becomes the current live size.
    pub fn reset_peak(&self) {
        self.peak.store(self.live(), Ordering::Relaxed);
    }

    /// The most bytes live at once since [`Counting::reset_peak`].
    pub fn peak(&self) -> usize {
        self.peak.load(Ordering::Relaxed)
    }

    fn grew(&self, n: usize) {
        self.calls.fetch_add(1, Ordering::Relaxed);
        self.asked.fetch_add(n, Ordering::Relaxed);
        let now = self.live.fetch_add(n, Ordering::Relaxed) + n;
        self.peak.fetch_max(now, Ordering::Relaxed);
    }
}

impl Default for Counting {
    fn default() -> Self {
        Self::new()
    }
}

// SAFETY: every call is forwarded to `System` unchanged; only counters are updated around it.
#[allow(unsafe_code)]
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: the caller's contract for `alloc` is passed on as is.
        let p = unsafe { System.alloc(layout) };
        if !p.is_null() {
            self.grew(layout.size());
        }
        p
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: as for `alloc`.
        unsafe { System.dealloc(ptr, layout) };
        self.live.fetch_sub(layout.size(), Ordering::Relaxed);
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: as for `alloc`.
        let p = unsafe { System.realloc(ptr, layout, new_size) };
        if !p.is_null() {
            self.live.fetch_sub(layout.size(), Ordering::Relaxed);
            self.grew(new_size);
        }
        p
    }
}
