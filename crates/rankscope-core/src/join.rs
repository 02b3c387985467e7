//! Work that may run side by side. The core has no threads (it builds for `wasm32`); where two
//! computations are independent it hands them to a [`Join`]: a host with threads runs them on
//! two (`rankscope-host`'s `Threads`), everything else one after the other ([`Serial`]). The
//! result never depends on which: each side is a pure function of what it borrows.

/// Runs two independent computations and returns both results (as `rayon::join`).
pub trait Join: Sync {
    fn join<A: Send, B: Send>(&self, a: impl FnOnce() -> A + Send, b: impl FnOnce() -> B + Send) -> (A, B);
}

/// One after the other, on the calling thread.
#[derive(Debug, Clone, Copy, Default)]
pub struct Serial;

impl Join for Serial {
    fn join<A: Send, B: Send>(&self, a: impl FnOnce() -> A + Send, b: impl FnOnce() -> B + Send) -> (A, B) {
        let a = a();
        (a, b())
    }
}
