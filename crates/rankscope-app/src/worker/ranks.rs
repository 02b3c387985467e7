//! The ranks a worker holds: the trace a load read, cut into the ranks it holds and normalized
//! into a [`RankView`] each ([`finish`]), and the answers to the page's questions about them
//! ([`answer`]).

use std::cell::RefCell;
use std::rc::Rc;

use rankscope_core::job::claim_of;
use rankscope_core::model::RankTrace;
use rankscope_core::normalize::{multirank, Rules};
use rankscope_core::view::{RankClaim, RankView};

use super::ingest::Outcome;
use super::{post, post_with_bytes, State};
use crate::protocol::*;

/// The answer to one question about rank `id`; none when it was posted already (an export's
/// pieces are posted as they are written, the last one ending the request).
pub(super) fn answer(state: &Rc<RefCell<State>>, id: RankId, req: u32, query: Query) -> Option<Answer> {
    let st = state.borrow();
    let Some(v) = st.ranks.get(&id) else {
        return Some(Answer::Failed("this rank is not loaded".into()));
    };
    Some(match query {
        Query::Tile { key } => Answer::Tile(Box::new(v.tile(key))),
        Query::Memory { key } => Answer::Memory(Box::new(v.memory_tile(key))),
        Query::MemorySpan { from_ns, to_ns } => Answer::MemorySpan(v.memory_span(from_ns, to_ns)),
        Query::Pick { lane, depth, t_ns, slop_ns } => {
            Answer::Picked(v.pick(lane, depth, t_ns, slop_ns).map(Box::new))
        }
        Query::Totals { from_ns, to_ns, lanes } => {
            Answer::Totals(Box::new(totals(v, from_ns, to_ns, &lanes)))
        }
        Query::Args { event } => Answer::Picked(v.detail(event).map(Box::new)),
        Query::Place { event } => Answer::Placed(v.place_of(event).zip(v.detail(event)).map(Box::new)),
        Query::Search { query } => Answer::Found(Box::new(v.search(&query, SEARCH_LIMIT))),
        Query::Export { planned, origin_ns, first } => {
            let mut out = ChunkPoster { id, req, buf: Vec::with_capacity(CHUNK_BYTES) };
            match v.write_trace(&mut out, &planned, origin_ns, first) {
                Ok(_) => return out.last(),
                Err(e) => Answer::Failed(e.to_string()),
            }
        }
        Query::Table { format, rank, offset_ns, redact } => {
            use rankscope_core::export::columnar::encode_piece;
            use rankscope_core::redact::{self, Key, Redactor};
            let (t, ledger) = match redact {
                None => (v.events_table(rank, offset_ns), None),
                // This rank's names gathered and renamed as `rankscope export --redact-key`
                // does (a token is its name's keyed hash: the same on every rank).
                Some(phrase) => v
                    .entry()
                    .map(|e| {
                        let mut r = Redactor::new(Key::from_phrase(&phrase));
                        redact::job::gather_job(&mut r, v.job());
                        let t = redact::table::redacted_events(&mut r, e, &v.job().strings, rank, offset_ns);
                        (Some(t), Some(Box::new(r.ledger())))
                    })
                    .unwrap_or((None, None)),
            };
            let Some(t) = t else {
                return Some(Answer::Failed("this rank holds no events".into()));
            };
            let schema = t.schema();
            match encode_piece(format, &schema, &t.columns) {
                Ok(p) => {
                    let answer = Answer::Piece { meta: Box::new(p.meta), schema: Box::new(schema), ledger };
                    super::post_with_bytes(&FromWorker::Answer { id, req, answer }, &p.bytes);
                    return None;
                }
                Err(e) => Answer::Failed(e.to_string()),
            }
        }
        Query::Perfetto { member, shift_ns } => {
            let mut out = ChunkPoster { id, req, buf: Vec::with_capacity(CHUNK_BYTES) };
            match v.write_perfetto_member(&mut out, &member, shift_ns) {
                Ok(_) => return out.last(),
                Err(e) => Answer::Failed(e.to_string()),
            }
        }
    })
}

/// The totals of the events of `lanes` over `[from_ns, to_ns)` (the timeline's area selection).
fn totals(v: &RankView, from_ns: i64, to_ns: i64, lanes: &[u32]) -> crate::totals::Totals {
    let Some(e) = v.entry() else { return Default::default() };
    let (ev, strings) = (&e.trace.events, &v.job().strings);
    let events = (0..ev.len()).filter(|&k| lanes.contains(&ev.lane[k].0)).map(|k| crate::totals::Ev {
        name: strings.get(ev.name[k]),
        class: ev.class[k].name(),
        start_ns: ev.ts_ns[k],
        dur_ns: ev.dur_ns[k],
    });
    crate::totals::Totals::of_range(events, from_ns, to_ns)
}

/// The end of a load: the trace (a file read on several workers merged first, so the cut sees
/// the whole file) kept as the ranks it holds ([`keep_ranks`]), or what the load ended with
/// instead posted.
pub(super) fn finish(state: &Rc<RefCell<State>>, file: FileId, result: Result<Outcome, String>) {
    {
        let mut st = state.borrow_mut();
        st.cancelled.remove(&file);
        st.splits.remove(&file);
    }
    let normalizing = |input_bytes, text_bytes, events, workers| {
        post(&FromWorker::Progress {
            file,
            phase: Phase::Normalizing,
            input_bytes,
            text_bytes,
            events,
            workers,
        })
    };
    let trace = match result {
        Ok(Outcome::Done(ingest)) => {
            let p = ingest.progress();
            normalizing(p.input_bytes, p.text_bytes, p.events, 1);
            ingest.finish().map_err(|e| e.to_string())
        }
        Ok(Outcome::Trace(t, workers)) => {
            normalizing(t.input_bytes, t.text_bytes, t.events.len() as u64, workers);
            Ok(*t)
        }
        Ok(Outcome::Again) => Err("the pieces of this file could not be merged".into()),
        Ok(Outcome::Cancelled) => return post(&FromWorker::Cancelled { file }),
        Ok(Outcome::Digest(mut digest)) => {
            let json = std::mem::take(&mut digest.analysis_json);
            return post_with_bytes(&FromWorker::Digest { file, digest }, &json);
        }
        Ok(Outcome::Text(kinds, bytes)) => return post_with_bytes(&FromWorker::Text { file, kinds }, &bytes),
        Err(error) => return post(&FromWorker::Failed { file, error }),
    };
    match trace {
        Ok(trace) => keep_ranks(state, file, trace),
        Err(error) => post(&FromWorker::Failed { file, error }),
    }
}

/// The ranks `trace` holds, as `rankscope analyze` cuts them (`multirank::split`: a file of one
/// rank is one), each with its claim on its number and normalized into a [`RankView`], one at a
/// time in the file's order: how many, and the ranks.
///
/// Memory: the cut holds the file's trace and its parts, and drops the trace as it returns; each
/// part is then consumed by its view as the iterator is drawn, so what sits beside the views
/// made so far is the parts not yet normalized, never the whole trace (nor a copy per rank).
pub fn rank_views(
    trace: RankTrace,
    rules: &Rules,
) -> (u32, impl Iterator<Item = (RankClaim, RankView)> + '_) {
    let parts = multirank::split(trace);
    (parts.len() as u32, parts.into_iter().map(move |part| (claim_of(&part), RankView::new(part, rules))))
}

/// Keeps the ranks `trace` holds ([`rank_views`]), each under its [`RankId`], and posts each
/// one's claim, summary and analysis part as it is made (`Loaded`, saying how many the file
/// holds). A rank that cannot be built fails the file: the ranks kept so far are dropped, and
/// the page drops those it was sent.
fn keep_ranks(state: &Rc<RefCell<State>>, file: FileId, trace: RankTrace) {
    let rules = Rules::default();
    let (of, views) = rank_views(trace, &rules);
    for (index, (claim, view)) in (0u32..).zip(views) {
        let id = RankId { file, index };
        let (Some(summary), Some(part)) = (view.summary(), view.analysis_part()) else {
            state.borrow_mut().ranks.retain(|k, _| k.file != file);
            let which =
                if of > 1 { format!("{} (one of the {of} ranks it holds)", claim.file) } else { claim.file };
            return post(&FromWorker::Failed { file, error: format!("{which}: no rank could be built") });
        };
        let first_ns = view.first_ns();
        state.borrow_mut().ranks.insert(id, view);
        post(&FromWorker::Loaded {
            id,
            of,
            claim,
            summary: Box::new(summary),
            part: Box::new(part),
            first_ns,
        });
    }
}

/// A `Write` that posts what is written to the UI in pieces of [`CHUNK_BYTES`], each a
/// transferred `Uint8Array`: a rank's piece of the merged trace is never whole in memory.
struct ChunkPoster {
    id: RankId,
    req: u32,
    buf: Vec<u8>,
}

impl ChunkPoster {
    fn send(&mut self, last: bool) {
        let answer = Answer::Chunk { last };
        post_with_bytes(&FromWorker::Answer { id: self.id, req: self.req, answer }, &self.buf);
        self.buf.clear();
    }
}

impl ChunkPoster {
    /// Posts what is left as the last piece: the answer that ends the request, so none is left.
    fn last(mut self) -> Option<Answer> {
        self.send(true);
        None
    }
}

impl std::io::Write for ChunkPoster {
    fn write(&mut self, data: &[u8]) -> std::io::Result<usize> {
        self.buf.extend_from_slice(data);
        if self.buf.len() >= CHUNK_BYTES {
            self.send(false);
        }
        Ok(data.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}
