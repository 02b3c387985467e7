//! One plain file on every core: cut at verified seams into pieces parsed on several threads
//! and merged in file order into what the serial parse gives ([`read_trace_split`]).

use std::path::Path;
use std::sync::atomic::Ordering;

use rankscope_core::model::RankTrace;

use super::env_num;
use super::merge::MergeQueue;
use super::read::with_read_buf;

/// Files smaller than this are parsed on one core (the pieces would not pay for themselves).
/// `RANKSCOPE_SPLIT_MIN_BYTES` overrides it (tests), `RANKSCOPE_PARSE_THREADS=1` turns
/// splitting off.
pub(crate) const SPLIT_MIN_BYTES: u64 = 64 << 20;

/// Reads `[from, to)` of `f` in `chunk`-byte reads into `feed`.
fn read_range(
    f: &std::fs::File,
    from: u64,
    to: u64,
    chunk: usize,
    feed: &mut dyn FnMut(&[u8]),
) -> Option<()> {
    use std::os::unix::fs::FileExt;
    with_read_buf(chunk, |buf| {
        let mut at = from;
        while at < to {
            let want = ((to - at) as usize).min(buf.len());
            let n = match f.read_at(&mut buf[..want], at) {
                Ok(0) => return None,
                Ok(n) => n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(_) => return None,
            };
            feed(&buf[..n]);
            at += n as u64;
        }
        Some(())
    })
}

/// Pieces of about this many bytes: many more than cores, so that the threads stay busy to the
/// end, each piece is merged while later ones are parsed, and few are held at once.
/// `RANKSCOPE_CUT_BLOCK_BYTES` overrides it (tests), as for the gzip cut.
pub(crate) const PIECE_BYTES: u64 = 4 << 20;

/// Reads of the pieces (a buffer per piece): small enough to stay out of the way of the
/// allocator's reuse (a 4 MiB buffer per piece, freed on several threads, left the heap
/// fragmented: 20 MB more at the peak on a 400 MB file).
const PIECE_READ_BYTES: usize = 1 << 20;

/// The first seam at or after `at` in a `len`-byte file ([`split::seam_windows`]).
///
/// [`split::seam_windows`]: rankscope_core::parse::split::seam_windows
fn seam_at(f: &std::fs::File, at: u64, len: u64) -> Option<(u64, u64)> {
    use rankscope_core::parse::split;
    use std::os::unix::fs::FileExt;
    for (from, to) in split::seam_windows(at, len) {
        let mut window = vec![0u8; usize::try_from(to - from).ok()?];
        f.read_exact_at(&mut window, from).ok()?;
        if let Some(seam) = split::seam_in(&window, from) {
            return Some(seam);
        }
    }
    None
}

/// One file on every core (`rankscope_core::parse::split`): the head and tail of the file read
/// by one parser (the frame), the events between cut at verified seams into pieces of about
/// [`PIECE_BYTES`] that `threads` threads (this one included) parse, each merged as soon as the
/// pieces before it are ([`MergeQueue`]), into what the serial parse gives. `None` whenever that
/// is not certain (gzip, a small file, no seam, any diagnostic, `B`/`E` events, …): the caller
/// then parses serially, so damaged input keeps the serial messages.
pub fn read_trace_split(
    path: &Path,
    chunk: usize,
    threads: usize,
    progress: &(dyn Fn(u64) + Sync),
) -> Option<RankTrace> {
    use rankscope_core::parse::{split, TraceParser};
    use std::os::unix::fs::FileExt;
    let name = path.display().to_string();
    let f = std::fs::File::open(path).ok()?;
    let len = f.metadata().ok()?.len();
    let min = env_num("RANKSCOPE_SPLIT_MIN_BYTES").unwrap_or(SPLIT_MIN_BYTES);
    if threads < 2 || len < min.max(2) {
        return None;
    }
    // Plain JSON only: gzip inflates serially, and a BOM or anything else is the serial path's.
    let mut first = [0u8; 64];
    let n = f.read_at(&mut first, 0).ok()?;
    if !matches!(first[..n].iter().find(|b| !b.is_ascii_whitespace()), Some(b'{' | b'[')) {
        return None;
    }
    let block = env_num("RANKSCOPE_CUT_BLOCK_BYTES").unwrap_or(PIECE_BYTES).max(1);
    let mut seams: Vec<(u64, u64)> = Vec::new();
    for c in split::plan_cuts(len, threads as u64, block) {
        let seam = seam_at(&f, c, len)?;
        if seams.last().is_some_and(|&(_, s)| seam.0 <= s) {
            // Cuts closer than the events are long: fewer pieces.
            continue;
        }
        seams.push(seam);
    }
    if seams.len() < 3 {
        return None;
    }
    let (first_seam, last_seam) = (*seams.first()?, *seams.last()?);
    let n_pieces = seams.len() - 1;
    let piece = |i: usize| -> Option<RankTrace> {
        let (from, to) = (seams.get(i)?.1, seams.get(i + 1)?.0);
        let mut p = TraceParser::new(&name);
        p.feed(b"[");
        read_range(&f, from, to, chunk.min(PIECE_READ_BYTES), &mut |b| {
            p.feed(b);
            progress(b.len() as u64);
        })?;
        p.feed(b"]");
        p.finish().ok()
    };
    let queue = MergeQueue::new();
    queue.expected_text.store(len, Ordering::Relaxed);
    let next = std::sync::atomic::AtomicUsize::new(0);
    let work = || loop {
        let i = next.fetch_add(1, Ordering::Relaxed);
        if i >= n_pieces || queue.doubted() {
            break;
        }
        queue.offer(i, piece(i));
    };
    let frame = std::thread::scope(|s| {
        for _ in 1..threads {
            s.spawn(work);
        }
        // This thread: the frame's head first (the merge starts from it), then pieces with the
        // others, then the frame's tail.
        let mut p = TraceParser::new(&name);
        let head = read_range(&f, 0, first_seam.1, chunk, &mut |b| p.feed(b))
            .and_then(|()| p.mark())
            .and_then(|mark| split::Merger::new(p.tables(), mark));
        match head {
            Some(m) => queue.install(m),
            None => queue.doubt.store(true, Ordering::Relaxed),
        }
        work();
        read_range(&f, last_seam.1, len, chunk, &mut |b| p.feed(b))?;
        progress(first_seam.1 + (len - last_seam.1));
        p.finish().ok()
    })?;
    let mut t = queue.finish(frame, n_pieces, len)?;
    t.input_bytes = len;
    Some(t)
}
