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

/// `f` of every item, in order, with the items split in halves over `j` (so a host with threads
/// runs them side by side, each thread a run of neighbours); the same result over [`Serial`].
pub fn map<T: Send, R: Send>(j: &impl Join, mut items: Vec<T>, f: &(impl Fn(T) -> R + Sync)) -> Vec<R> {
    match items.len() {
        0 => Vec::new(),
        1 => items.into_iter().map(f).collect(),
        n => {
            let right = items.split_off(n / 2);
            let (mut a, b) = j.join(|| map(j, items, f), || map(j, right, f));
            a.extend(b);
            a
        }
    }
}

/// A join that runs its sides in the opposite order (tests): a result must not depend on which
/// runs first.
#[cfg(test)]
pub(crate) struct Backwards;

#[cfg(test)]
impl Join for Backwards {
    fn join<A: Send, B: Send>(&self, a: impl FnOnce() -> A + Send, b: impl FnOnce() -> B + Send) -> (A, B) {
        let b = b();
        (a(), b)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn map_keeps_the_order_of_the_items() {
        for n in [0usize, 1, 2, 3, 7, 8, 33] {
            let want: Vec<usize> = (0..n).map(|i| i * i).collect();
            assert_eq!(map(&Serial, (0..n).collect(), &|i| i * i), want, "{n} items");
            assert_eq!(map(&Backwards, (0..n).collect(), &|i| i * i), want, "{n} items, backwards");
        }
    }
}
