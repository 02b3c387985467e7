//! The CLI's side of reading inputs: `rankscope-host` reads them; this prints its notes and a
//! progress line on a terminal.

use std::io::IsTerminal;
use std::sync::atomic::{AtomicU64, Ordering};

pub use rankscope_host::*;

/// A file's bytes, inflated when gzipped; refused when they inflate beyond `cap` bytes (a whole
/// number of GiB).
pub fn read_inflated(p: &std::path::Path, cap: u64) -> anyhow::Result<Vec<u8>> {
    use anyhow::Context as _;
    use std::io::Read as _;
    let raw = std::fs::read(p).with_context(|| format!("reading {}", p.display()))?;
    if !raw.starts_with(&[0x1f, 0x8b]) {
        return Ok(raw);
    }
    let mut out = Vec::new();
    flate2::read::MultiGzDecoder::new(raw.as_slice())
        .take(cap + 1)
        .read_to_end(&mut out)
        .with_context(|| format!("{}: gzip", p.display()))?;
    anyhow::ensure!(out.len() as u64 <= cap, "{}: inflates beyond {} GiB", p.display(), cap >> 30);
    Ok(out)
}

/// The job of the traces under `paths` (`--traces` of the commands that read something beside
/// them), read with no other flag; an error when no file could be read as a trace.
pub fn traces_output(paths: &[std::path::PathBuf]) -> anyhow::Result<rankscope_core::job::JobOutput> {
    let out = analyze_paths(&Request { paths: paths.to_vec(), ..Default::default() }, &|_, _| {})?.out;
    anyhow::ensure!(out.has_traces(), "--traces: no file could be read as a trace");
    Ok(out)
}

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
