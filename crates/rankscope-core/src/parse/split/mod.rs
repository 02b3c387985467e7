//! One file on every core: the `traceEvents` array cut at event starts, the pieces parsed apart,
//! the columns merged in file order so that the result is the serial parse's.
//!
//! A host with the file at hand (it reads at offsets; the core never does) proceeds so:
//! 1. **Seams**: near each cut point it looks for `}` `,` `{` (blanks allowed between) with
//!    [`find_seam`]. Such bytes can also sit inside a string; nothing here trusts them: the
//!    parses below prove each seam.
//! 2. **The frame**: one [`TraceParser`](super::TraceParser) reads the head of the file up to the first seam, gives a
//!    [`Mark`](super::kineto::Mark) ([`TraceParser::mark`](super::TraceParser::mark): every table's length at that point, and `None` unless the
//!    parser stands between two events with nothing carried and nothing to report), then reads
//!    the tail from the last seam. It sees every top-level member, the head's and the tail's
//!    events, and applies the base time.
//! 3. **Middle pieces**: each is parsed alone as `[` piece `]` (a bare array of events).
//! 4. [`merge`] interleaves the frame's head rows, the pieces' rows and the frame's tail rows,
//!    re-interning strings and lanes in that order, which is the order the serial parser
//!    meets them: the tables, string ids and lane ids come out as the serial parse's.
//!    [`Merger`] does the same piece by piece, in file order whatever order the pieces come in,
//!    while the later pieces are still being parsed.
//!
//! **Doubt means serial.** [`merge`] returns `None`, and the host parses the file serially, when
//! any part reports a diagnostic (a false seam inside a string leaves the piece before it
//! ending inside that string, which every parse reports; damaged input keeps the serial path's
//! messages, offsets and recovery exactly), when any part holds `B`/`E` events (a pair may
//! straddle a seam), or when a middle piece holds `M` metadata (thread names are last-writer
//! wins across the file).
//!
//! By concern: this module finds seams and plans cuts, and parses a middle piece; [`Cutter`]
//! (`cutter`) cuts a stream of text (inflated gzip) into the frame and pieces as it arrives;
//! `merge` re-interns and appends the pieces' columns into the serial parse's tables.

mod cutter;
mod merge;

use crate::model::*;

pub use cutter::{Cut, CutSizes, Cutter};
pub(crate) use merge::mergeable_piece;
pub use merge::{merge, Merger};

/// Bytes that may separate two events (`,` and JSON blanks).
fn blank(b: u8) -> bool {
    matches!(b, b' ' | b'\n' | b'\r' | b'\t')
}

/// The first place in `window` where one element of an array ends and an object starts:
/// `(end, start)` with `window[end - 1] == b'}'`, `window[start] == b'{'` and only blanks and
/// one comma between. A candidate only (see the module doc).
pub fn find_seam(window: &[u8]) -> Option<(usize, usize)> {
    for c in memchr::memchr_iter(b',', window) {
        let before = window[..c].iter().rposition(|&b| !blank(b));
        let after = window[c + 1..].iter().position(|&b| !blank(b)).map(|k| c + 1 + k);
        if let (Some(b), Some(a)) = (before, after) {
            if window[b] == b'}' && window[a] == b'{' {
                return Some((b + 1, a));
            }
        }
    }
    None
}

/// The windows a host that reads a file at offsets searches, in turn, for the seam at or after
/// byte `at` of a `len`-byte file: 64 KiB first (events are a few hundred bytes), then
/// [`SEAM_SEARCH`] (an event's stack or arguments can be long), each clipped at the end of the
/// file. Look in each with [`seam_in`]; when none has a seam, there is no cut there.
pub fn seam_windows(at: u64, len: u64) -> impl Iterator<Item = (u64, u64)> {
    let mut last = false;
    [64 << 10, SEAM_SEARCH as u64].into_iter().map_while(move |w| {
        let to = at.saturating_add(w).min(len);
        (!last && at < to).then(|| {
            last = to == len;
            (at, to)
        })
    })
}

/// [`find_seam`] in `window`, the file's bytes from `from` on, as offsets in the file.
pub fn seam_in(window: &[u8], from: u64) -> Option<(u64, u64)> {
    find_seam(window).map(|(end, start)| (from + end as u64, from + start as u64))
}

/// Where a host that can read a file at offsets cuts it (before each cut is moved to the seam
/// [`find_seam`] finds at or after it): a short head for the frame (at most 1 MiB, so its `M`
/// metadata and the start of `traceEvents` are in it), `max(threads, len / block)` pieces of
/// the body, and as long a tail. The first and last cuts bound the frame's head and tail.
pub fn plan_cuts(len: u64, threads: u64, block: u64) -> Vec<u64> {
    let pieces = threads.max(len / block.max(1)).max(1);
    let head = (len / (8 * pieces)).min(1 << 20);
    let body = len.saturating_sub(2 * head);
    let mut cuts = vec![head];
    cuts.extend((1..pieces).map(|i| head + body / pieces * i));
    cuts.push(len - head);
    cuts
}

/// The most text searched for a seam: after the head for the first one, and by
/// [`seam_windows`]' second window.
const SEAM_SEARCH: usize = 1 << 20;
/// How far back a new search starts from the end of the last one: more than a seam's blanks.
const SEAM_OVERLAP: usize = 4096;

/// Parses one middle piece alone, as `[` piece `]` (a bare array of events); `None` when it
/// is not one. [`PieceParser`] at once.
pub fn parse_piece(source_name: &str, piece: &[u8]) -> Option<RankTrace> {
    let mut p = PieceParser::new(source_name);
    p.feed(piece);
    p.finish()
}

/// A middle piece parsed as its bytes arrive, for a host that reads the piece itself (from its
/// range of the file) rather than being handed it whole: what [`parse_piece`] gives for all
/// the bytes fed.
#[derive(Debug)]
pub struct PieceParser(crate::parse::TraceParser);

impl PieceParser {
    pub fn new(source_name: &str) -> Self {
        let mut p = crate::parse::TraceParser::new(source_name);
        p.feed(b"[");
        PieceParser(p)
    }

    pub fn feed(&mut self, bytes: &[u8]) {
        self.0.feed(bytes);
    }

    /// The piece's columns; `None` when the bytes were not a run of whole events.
    pub fn finish(mut self) -> Option<RankTrace> {
        self.0.feed(b"]");
        self.0.finish().ok()
    }
}
