//! A plain trace read on several workers by ranges of its `File`: each helper reads its own
//! ranges (as the native host reads at offsets), so no single read bounds the file.

use std::cell::RefCell;
use std::rc::Rc;

use rankscope_core::model::RankTrace;
use rankscope_core::parse::{split, TraceParser};

use super::ingest::{pieces_back, Outcome, Source, Split};
use super::{is_cancelled, now_ms, post, post_with, yield_task, State};
use crate::protocol::*;

/// Pieces of a plain file read by ranges are about this long.
const RANGE_PIECE_BYTES: u64 = 8 << 20;

/// Feeds bytes `[from, to)` of `f` to `feed`, slice by slice; false when they could not all be
/// read.
async fn feed_range(f: &web_sys::File, from: u64, to: u64, feed: &mut dyn FnMut(&[u8])) -> bool {
    let mut source = Source::range(f, from, to);
    let mut buf = Vec::new();
    let mut n = 0u64;
    loop {
        match source.next().await {
            Ok(Some(v)) => {
                buf.resize(v.length() as usize, 0);
                v.copy_to(&mut buf);
                n += buf.len() as u64;
                feed(&buf);
            }
            Ok(None) => return n == to.saturating_sub(from),
            Err(_) => return false,
        }
    }
}

/// Bytes `[from, to)` of `f`, whole.
async fn read_bytes(f: &web_sys::File, from: u64, to: u64) -> Option<Vec<u8>> {
    let mut out = Vec::new();
    feed_range(f, from, to, &mut |b| out.extend_from_slice(b)).await.then_some(out)
}

/// A middle piece read from its range and parsed as it arrives ([`split::PieceParser`]).
pub(super) async fn read_piece(f: &web_sys::File, from: u64, to: u64) -> Option<RankTrace> {
    let mut p = split::PieceParser::new("piece");
    feed_range(f, from, to, &mut |b| p.feed(b)).await.then_some(())?;
    p.finish()
}

/// The seam at or after byte `at` ([`split::seam_windows`]).
async fn seam_at(f: &web_sys::File, at: u64, len: u64) -> Option<(u64, u64)> {
    for (from, to) in split::seam_windows(at, len) {
        let window = read_bytes(f, from, to).await?;
        if let Some(seam) = split::seam_in(&window, from) {
            return Some(seam);
        }
    }
    None
}

/// One plain trace read on every worker, each reading its own ranges of the `File` (as the
/// native host reads at offsets), so no single read bounds the file: the cuts are planned from
/// the length ([`split::plan_cuts`]) and each is moved to its seam just before the range it
/// ends is handed on (so the first helper starts after a few small reads, not after a search
/// of every cut); this worker parses the frame's head, hands each middle range to another
/// worker while fewer than [`AWAY_PER_HELPER`] per helper are away (else parses it itself),
/// parses the frame's tail and closes the merge. `Ok(None)`: not a plain trace, or no seam
/// where one was due, before anything was handed on (the cutting read takes it); a doubt after
/// that is [`Outcome::Again`].
pub(super) async fn read_ranges(
    state: &Rc<RefCell<State>>,
    file: FileId,
    name: &str,
    f: &web_sys::File,
    helpers: u32,
) -> Result<Option<Outcome>, String> {
    let len = f.size() as u64;
    let Some(first) = read_bytes(f, 0, (SNIFF_BYTES as u64).min(len)).await else { return Ok(None) };
    let plain = matches!(first.iter().find(|b| !b.is_ascii_whitespace()), Some(b'{' | b'['));
    if !plain || !sniff(&first).is_empty() {
        return Ok(None);
    }
    let mut seams =
        Seams { f, len, cuts: split::plan_cuts(len, u64::from(helpers) + 1, RANGE_PIECE_BYTES).into_iter() };
    // The head's end and the next two seams before anything is handed on: at least two middle
    // pieces, or the file is read by the cutting reader instead.
    let Some(head) = seams.next(None).await.flatten() else { return Ok(None) };
    let Some(mut ahead) = seams.next(Some(head)).await.flatten() else { return Ok(None) };
    let Some(second) = seams.next(Some(ahead)).await.flatten() else { return Ok(None) };
    let mut after = Some(second);
    let mut p = TraceParser::new(name);
    if !feed_range(f, 0, head.1, &mut |b| p.feed(b)).await {
        return Ok(None);
    }
    let Some(mut merger) = p.mark().and_then(|m| split::Merger::new(p.tables(), m)) else { return Ok(None) };
    merger.expect_text_bytes(len);
    state.borrow_mut().splits.insert(file, Split { merger: Some(merger), ..Split::default() });
    let away = helpers.saturating_mul(AWAY_PER_HELPER);
    let (mut handed, mut done, mut last_post) = (0u32, head.1, 0.0);
    let (mut from, mut i) = (head.1, 0u32);
    let out = |st: &Rc<RefCell<State>>| st.borrow().splits.get(&file).map_or((0, true), |s| (s.out, s.doubt));
    // Each turn hands on (or parses) the range from `from` to the seam `ahead`; `after` is the
    // seam past it, `None` once `ahead` is the last: the tail's start.
    let tail = loop {
        let to = ahead.0;
        if out(state).0 >= away {
            yield_task().await;
        }
        if is_cancelled(state, file) {
            return Ok(Some(Outcome::Cancelled));
        }
        if out(state).1 {
            return Ok(Some(Outcome::Again));
        }
        if out(state).0 < away {
            if let Some(s) = state.borrow_mut().splits.get_mut(&file) {
                s.out += 1;
            }
            handed += 1;
            post_with(&FromWorker::Piece { file, index: i, range: Some((from, to)) }, f);
        } else {
            let piece = read_piece(f, from, to).await;
            if let Some(s) = state.borrow_mut().splits.get_mut(&file) {
                s.take(i, piece);
            }
        }
        done += to - from;
        i += 1;
        let t = now_ms();
        if t - last_post >= PROGRESS_MS {
            last_post = t;
            let workers = 1 + handed.min(helpers);
            let events = p.events_so_far() + state.borrow().splits.get(&file).map_or(0, |s| s.events);
            post(&FromWorker::Progress {
                file,
                phase: Phase::Reading,
                input_bytes: done,
                text_bytes: done,
                events,
                workers,
            });
        }
        let Some(next) = after else { break ahead };
        from = ahead.1;
        ahead = next;
        // A cut with no seam after pieces were handed on: read again alone.
        let Some(found) = seams.next(Some(ahead)).await else { return Ok(Some(Outcome::Again)) };
        after = found;
    };
    if !feed_range(f, tail.1, len, &mut |b| p.feed(b)).await {
        return Ok(Some(Outcome::Again));
    }
    let Ok(frame) = p.finish() else { return Ok(Some(Outcome::Again)) };
    if !pieces_back(state, file).await {
        return Ok(Some(Outcome::Cancelled));
    }
    let split = state.borrow_mut().splits.remove(&file).unwrap_or_default();
    let (Some(merger), false) = (split.merger, split.doubt) else { return Ok(Some(Outcome::Again)) };
    Ok(Some(match merger.finish(frame, i as usize, len) {
        Some(mut t) => {
            t.input_bytes = len;
            Outcome::Trace(Box::new(t), 1 + handed.min(helpers))
        }
        None => Outcome::Again,
    }))
}

/// Ranges handed on per helper at most: one being parsed and two waiting, each already being
/// read (a helper starts reading a range when it is handed one), so a helper does not run dry
/// while this worker is busy parsing a piece of its own and answers late.
const AWAY_PER_HELPER: u32 = 3;

/// The planned cuts of a file read by ranges, moved to their seams one at a time.
struct Seams<'a> {
    f: &'a web_sys::File,
    len: u64,
    cuts: std::vec::IntoIter<u64>,
}

impl Seams<'_> {
    /// The seam of the next cut whose seam lies past the seam `past` (a cut inside an event
    /// longer than a piece finds the seam of the cut before it, and is passed over):
    /// `Some(None)` when no cut is left, `None` when a cut has no seam.
    async fn next(&mut self, past: Option<(u64, u64)>) -> Option<Option<(u64, u64)>> {
        for c in self.cuts.by_ref() {
            let seam = seam_at(self.f, c, self.len).await?;
            if past.is_none_or(|(_, s)| seam.0 > s) {
                return Some(Some(seam));
            }
        }
        Some(None)
    }
}
