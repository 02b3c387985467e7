//! The host's threads: how many there are, the core's independent work run on them
//! ([`Threads`]), and how the cores are shared among the files of a job ([`core_shares`]).

use std::sync::atomic::{AtomicU64, Ordering};

use super::env_num;

/// Threads for the work on one host: every core, or `RANKSCOPE_PARSE_THREADS`.
pub(crate) fn parse_threads() -> usize {
    env_num("RANKSCOPE_PARSE_THREADS")
        .map(|n| n.max(1) as usize)
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()))
}

/// The core's independent work ([`rankscope_core::join::Join`]) on the host's threads: `b` on a
/// new scoped thread while this one runs `a`, as long as fewer joins' threads run than
/// [`parse_threads`] leaves spare; past that, `b` after `a` on this thread (so joins nested in
/// joins, a rank's passes inside the ranks' map, never start more threads than cores).
#[derive(Debug, Clone, Copy)]
pub struct Threads;

/// Threads started by [`Threads`]' joins and still running.
static JOIN_THREADS: AtomicU64 = AtomicU64::new(0);

impl rankscope_core::join::Join for Threads {
    fn join<A: Send, B: Send>(&self, a: impl FnOnce() -> A + Send, b: impl FnOnce() -> B + Send) -> (A, B) {
        static SPARE: std::sync::OnceLock<u64> = std::sync::OnceLock::new();
        let spare = *SPARE.get_or_init(|| parse_threads().saturating_sub(1) as u64);
        if JOIN_THREADS.fetch_add(1, Ordering::Relaxed) >= spare {
            JOIN_THREADS.fetch_sub(1, Ordering::Relaxed);
            return rankscope_core::join::Serial.join(a, b);
        }
        struct Started;
        impl Drop for Started {
            fn drop(&mut self) {
                JOIN_THREADS.fetch_sub(1, Ordering::Relaxed);
            }
        }
        let _started = Started;
        let r = std::thread::scope(|s| {
            let hb = s.spawn(b);
            let ra = a();
            hb.join().map(|rb| (ra, rb))
        });
        // A panic on the other thread is this call's panic, as with `Serial`.
        r.unwrap_or_else(|e| std::panic::resume_unwind(e))
    }
}

/// How many cores each file is read on, from the files' sizes: its share of the bytes, rounded,
/// between one and every core. One file alone gets every core, and so does one large trace next
/// to a few small files (a `config.json`, a manifest) that a count of files would have given
/// half; eight like files on two cores get one each.
pub fn core_shares(sizes: &[u64], cores: usize) -> Vec<usize> {
    let cores = cores.max(1);
    let total = sizes.iter().sum::<u64>().max(1) as f64;
    sizes.iter().map(|&len| ((len as f64 * cores as f64 / total).round() as usize).clamp(1, cores)).collect()
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    /// Cores go by bytes, not by files: one large trace beside a small manifest is split over
    /// every core, like files one core each, and a big file among smaller ones gets its share.
    #[test]
    fn cores_are_shared_by_bytes() {
        assert_eq!(core_shares(&[405 << 20], 2), vec![2]);
        assert_eq!(core_shares(&[405 << 20, 2 << 20], 2), vec![2, 1]);
        assert_eq!(core_shares(&[34 << 20; 8], 2), vec![1; 8]);
        assert_eq!(core_shares(&[300, 50, 50], 8), vec![6, 1, 1]);
        assert_eq!(core_shares(&[0, 0], 4), vec![1, 1]);
        assert_eq!(core_shares(&[], 4), Vec::<usize>::new());
    }
}
