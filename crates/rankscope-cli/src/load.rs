//! The CLI's side of reading inputs: `rankscope-host` reads them; this prints its notes and a
//! progress line on a terminal.

use std::io::IsTerminal;
use std::sync::atomic::{AtomicU64, Ordering};

pub use rankscope_host::*;

/// Prints the host's notes on stderr.
pub fn print_notes(notes: &[String]) {
    for n in notes {
        crate::out::say(&format!("note: {n}"));
    }
}

/// A `reading  42%  120 / 300 MB` line on stderr, only when stderr is a terminal and the input
/// is large enough to wait for.
#[derive(Debug, Default)]
pub struct ProgressLine {
    last: AtomicU64,
}

impl ProgressLine {
    pub fn new() -> Self {
        ProgressLine { last: AtomicU64::new(u64::MAX) }
    }

    pub fn update(&self, done: u64, total: u64) {
        if total <= 64 << 20 || !std::io::stderr().is_terminal() {
            return;
        }
        let pct = (done * 100).checked_div(total).unwrap_or(100);
        if self.last.swap(pct, Ordering::Relaxed) != pct {
            eprint!("\rreading {:>3}%  {:.0} / {:.0} MB", pct, done as f64 / 1e6, total as f64 / 1e6);
        }
    }

    pub fn end(&self) {
        if self.last.load(Ordering::Relaxed) != u64::MAX {
            eprint!("\r{:60}\r", "");
        }
    }
}
