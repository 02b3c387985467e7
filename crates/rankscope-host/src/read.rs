//! One file read serially in chunks through the core's streaming ingest, and the thread's kept
//! read buffer every reader shares.

use std::io::Read;
use std::path::Path;

use rankscope_core::model::RankTrace;
use rankscope_core::parse::FileIngest;

/// Why a file could not be read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReadError {
    pub message: String,
    /// The bytes were read, and they are not a trace (rather than an I/O failure).
    pub not_a_trace: bool,
}

impl ReadError {
    fn io(message: String) -> Self {
        ReadError { message, not_a_trace: false }
    }
}

/// Reads one file in chunks through the core's streaming ingest.
pub fn read_trace(path: &Path, chunk: usize, progress: &dyn Fn(u64)) -> Result<RankTrace, ReadError> {
    read_trace_with(path, chunk, false, progress)
}

/// [`read_trace`], keeping every event's source `args` when `keep_args` (for the exports:
/// `FileIngest::keep_args`).
pub fn read_trace_with(
    path: &Path,
    chunk: usize,
    keep_args: bool,
    progress: &dyn Fn(u64),
) -> Result<RankTrace, ReadError> {
    let name = path.display().to_string();
    let mut ingest = FileIngest::new(&name);
    if keep_args {
        ingest.keep_args();
    }
    read_chunks(path, &name, chunk, &mut |b| {
        ingest.feed(b);
        progress(b.len() as u64);
        !ingest.failed()
    })?;
    ingest.finish().map_err(|e| ReadError { message: e.to_string(), not_a_trace: true })
}

/// Reads `path` from the start in `chunk`-byte reads into `each`, until the end or until `each`
/// answers `false`.
pub(crate) fn read_chunks(
    path: &Path,
    name: &str,
    chunk: usize,
    each: &mut dyn FnMut(&[u8]) -> bool,
) -> Result<(), ReadError> {
    let f = std::fs::File::open(path).map_err(|e| ReadError::io(format!("{name}: cannot open: {e}")))?;
    // A regular file is read to the length it had when it was opened: one appended to faster
    // than it is read (a profiler still writing) never ended. A pipe is read to its end.
    let len = f.metadata().ok().filter(std::fs::Metadata::is_file).map_or(u64::MAX, |m| m.len());
    let mut f = f.take(len);
    with_read_buf(chunk, |buf| loop {
        let n = match f.read(buf) {
            Ok(0) => return Ok(()),
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(ReadError::io(format!("{name}: read error: {e}"))),
        };
        if !each(&buf[..n]) {
            return Ok(());
        }
    })
}

thread_local! {
    /// The thread's read buffer, kept between files and pieces: a fresh one per file cost a page
    /// fault per 4 KiB on its first read (a quarter of `analyze`'s page faults on 8 files).
    static READ_BUF: std::cell::Cell<Vec<u8>> = const { std::cell::Cell::new(Vec::new()) };
}

/// Runs `f` with a `len`-byte buffer (at least one byte), the thread's kept one when it is free.
pub(crate) fn with_read_buf<R>(len: usize, f: impl FnOnce(&mut [u8]) -> R) -> R {
    let len = len.max(1);
    // Taken out while in use, so a nested read gets a buffer of its own.
    let mut buf = READ_BUF.with(std::cell::Cell::take);
    if buf.len() < len {
        buf = vec![0u8; len];
    }
    let r = f(&mut buf[..len]);
    READ_BUF.with(|c| {
        let kept = c.take();
        c.set(if kept.len() > buf.len() { kept } else { buf });
    });
    r
}

pub(crate) fn is_gzip(path: &Path) -> bool {
    let mut magic = [0u8; 2];
    std::fs::File::open(path).and_then(|mut f| f.read_exact(&mut magic)).is_ok() && magic == [0x1f, 0x8b]
}
