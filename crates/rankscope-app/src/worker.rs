//! The worker side: reads files into the core and answers the UI's questions.
//!
//! One worker handles one load at a time (the pool sees to that) and keeps every rank it loaded,
//! so later questions about a rank go to the worker that holds it. The read loop awaits each
//! slice of the file (or chunk of a host page's stream), so cancel, tile and pick messages are
//! answered between them.

use std::cell::RefCell;
use std::collections::{BTreeMap, BTreeSet};
use std::rc::Rc;

use js_sys::{Array, Reflect, Uint8Array};
use rankscope_core::model::RankTrace;
use rankscope_core::normalize::Rules;
use rankscope_core::parse::{split, wire, CutSizes, Cutout, FileIngest, TraceParser};
use rankscope_core::view::RankView;
use rankscope_synth::{self as synth, SynthConfig};
use wasm_bindgen::prelude::*;
use wasm_bindgen::JsCast;
use wasm_bindgen_futures::{spawn_local, JsFuture};
use web_sys::{DedicatedWorkerGlobalScope, MessageEvent, ReadableStreamDefaultReader};

use crate::protocol::*;

#[derive(Default)]
struct State {
    ranks: BTreeMap<FileId, RankView>,
    cancelled: BTreeSet<FileId>,
    /// Files this worker reads with others parsing pieces of them.
    splits: BTreeMap<FileId, Split>,
}

/// A file read on several workers: its pieces are merged as they come back, in any order
/// ([`split::Merger`] appends each once the pieces before it are in, and drops it).
#[derive(Default)]
struct Split {
    /// Started from the frame's head once the frame is marked, before the first piece.
    merger: Option<split::Merger>,
    /// A piece could not be parsed alone, came back damaged, or came with no merger to take it:
    /// the file is read again alone.
    doubt: bool,
    /// Pieces handed on and not back yet.
    out: u32,
    /// Events of the pieces taken so far (for the progress shown while reading).
    events: u64,
    /// Resolves the reader's wait in [`gather`]: called when a piece comes back or the load is
    /// cancelled.
    wake: Option<js_sys::Function>,
}

impl Split {
    /// Takes piece `index`, parsed here or elsewhere (`None`: it could not be parsed alone).
    fn take(&mut self, index: u32, piece: Option<RankTrace>) {
        match (piece, self.merger.as_mut()) {
            (Some(p), Some(m)) if !self.doubt => {
                self.events += p.events.len() as u64;
                m.push(index as usize, p)
            }
            _ => self.doubt = true,
        }
    }

    fn wake(&mut self) {
        if let Some(w) = self.wake.take() {
            let _ = w.call0(&JsValue::NULL);
        }
    }
}

fn scope() -> DedicatedWorkerGlobalScope {
    js_sys::global().unchecked_into()
}

fn post(m: &FromWorker) {
    let msg = Array::of1(&JsValue::from_str(&encode(m)));
    if let Err(e) = scope().post_message(&msg) {
        web_sys::console::error_2(&"rankscope worker: cannot post".into(), &e);
    }
}

/// Posts `m` with `v` beside it (cloned: a `File` is a handle, its bytes are not copied).
fn post_with(m: &FromWorker, v: &JsValue) {
    let msg = Array::of2(&JsValue::from_str(&encode(m)), v);
    if let Err(e) = scope().post_message(&msg) {
        web_sys::console::error_2(&"rankscope worker: cannot post".into(), &e);
    }
}

/// Posts `m` with a copy of `bytes` beside it, transferred (not copied again).
fn post_with_bytes(m: &FromWorker, bytes: &[u8]) {
    let data = Uint8Array::from(bytes);
    let msg = Array::of2(&JsValue::from_str(&encode(m)), &data);
    if let Err(e) = scope().post_message_with_transfer(&msg, &Array::of1(&data.buffer())) {
        web_sys::console::error_2(&"rankscope worker: cannot post".into(), &e);
    }
}

fn now_ms() -> f64 {
    scope().performance().map_or(0.0, |p| p.now())
}

/// Entry point of the worker binary.
pub fn start() {
    crate::install_panic_hook();
    let state = Rc::new(RefCell::new(State::default()));
    let on_message = Closure::<dyn FnMut(MessageEvent)>::new(move |ev: MessageEvent| {
        let data: Array = ev.data().unchecked_into();
        let text = data.get(0).as_string().unwrap_or_default();
        match decode::<ToWorker>(&text) {
            Ok(m) => handle(&state, m, data.get(1)),
            Err(e) => web_sys::console::error_1(&e.into()),
        }
    });
    scope().set_onmessage(Some(on_message.as_ref().unchecked_ref()));
    // The worker lives as long as the page: its handler must too.
    on_message.forget();
    post(&FromWorker::Ready);
}

fn handle(state: &Rc<RefCell<State>>, m: ToWorker, extra: JsValue) {
    match m {
        ToWorker::Load { file, name, helpers } => {
            let st = state.clone();
            spawn_local(async move {
                // A `File` (chosen, dropped, or made from a host page's buffer), or a host page's
                // `ReadableStream` (transferred, read once: never cut, since a doubt could not
                // read it again).
                let (source, again) = match extra.dyn_into::<web_sys::File>() {
                    Ok(f) => (Some(Source::file(&f)), Some(f)),
                    Err(x) => (x.dyn_into::<web_sys::ReadableStream>().ok().map(Source::stream), None),
                };
                let helpers = if again.is_some() { helpers } else { 0 };
                // A plain trace on several workers: each reads its own ranges of the file.
                let ranged = match (&again, helpers) {
                    (Some(f), 1..) => read_ranges(&st, file, &name, f, helpers).await,
                    _ => Ok(None),
                };
                let mut result = match (ranged, source) {
                    (Ok(Some(outcome)), _) => Ok(outcome),
                    (Err(e), _) => Err(e),
                    (Ok(None), Some(s)) => read_file(&st, file, &name, s, helpers).await,
                    (Ok(None), None) => Err(format!("{name}: no file was sent")),
                };
                if let (Ok(Outcome::Again), Some(f)) = (&result, again) {
                    // The pieces left a doubt (damage, `B`/`E` pairs, a seam inside a string):
                    // the serial parse keeps its messages and offsets exactly.
                    st.borrow_mut().splits.remove(&file);
                    result = read_file(&st, file, &name, Source::file(&f), 0).await;
                }
                finish(&st, file, result);
            });
        }
        ToWorker::Parse { file, index, range } => {
            let reply = move |piece: Option<RankTrace>| {
                let columns = piece.and_then(|t| wire::encode_piece(&t));
                let ok = columns.is_some();
                post_with_bytes(&FromWorker::Parsed { file, index, ok }, columns.as_deref().unwrap_or(&[]));
            };
            match (range, extra.dyn_into::<web_sys::File>()) {
                // A range of a plain file: read here, so no one worker reads the whole file.
                (Some((from, to)), Ok(f)) => {
                    spawn_local(async move { reply(read_piece(&f, from, to).await) })
                }
                (_, Ok(_)) => reply(None),
                (_, Err(extra)) => reply(
                    extra
                        .dyn_into::<Uint8Array>()
                        .ok()
                        .and_then(|b| split::parse_piece("piece", &b.to_vec())),
                ),
            }
        }
        ToWorker::Parsed { file, index, ok } => {
            let piece = extra
                .dyn_into::<Uint8Array>()
                .ok()
                .filter(|_| ok)
                .and_then(|b| wire::decode_piece("piece", &b.to_vec()));
            if let Some(s) = state.borrow_mut().splits.get_mut(&file) {
                s.out = s.out.saturating_sub(1);
                s.take(index, piece);
                s.wake();
            }
        }
        ToWorker::Demo { file, rank } => {
            let st = state.clone();
            spawn_local(async move {
                let result = demo(&st, file, rank).await;
                finish(&st, file, result);
            });
        }
        ToWorker::Warm => spawn_local(warm()),
        ToWorker::Cancel { file } => {
            let mut st = state.borrow_mut();
            st.cancelled.insert(file);
            if let Some(s) = st.splits.get_mut(&file) {
                s.wake();
            }
        }
        ToWorker::Ask { file, req, query } => {
            if let Some(answer) = answer(state, file, req, query) {
                post(&FromWorker::Answer { file, req, answer });
            }
        }
    }
}

/// The answer to one question about `file`; none when it was posted already (an export's
/// pieces are posted as they are written, the last one ending the request).
fn answer(state: &Rc<RefCell<State>>, file: FileId, req: u32, query: Query) -> Option<Answer> {
    let st = state.borrow();
    let Some(v) = st.ranks.get(&file) else {
        return Some(Answer::Failed("this rank is not loaded".into()));
    };
    Some(match query {
        Query::Tile { key } => Answer::Tile(Box::new(v.tile(key))),
        Query::Pick { lane, depth, t_ns, slop_ns } => {
            Answer::Picked(v.pick(lane, depth, t_ns, slop_ns).map(Box::new))
        }
        Query::Search { query } => Answer::Found(Box::new(v.search(&query, SEARCH_LIMIT))),
        Query::Export { planned, origin_ns, first } => {
            let mut out = ChunkPoster { file, req, buf: Vec::with_capacity(CHUNK_BYTES) };
            match v.write_trace(&mut out, &planned, origin_ns, first) {
                Ok(_) => return out.last(),
                Err(e) => Answer::Failed(e.to_string()),
            }
        }
        Query::Perfetto { member, shift_ns } => {
            let mut out = ChunkPoster { file, req, buf: Vec::with_capacity(CHUNK_BYTES) };
            match v.write_perfetto_member(&mut out, &member, shift_ns) {
                Ok(_) => return out.last(),
                Err(e) => Answer::Failed(e.to_string()),
            }
        }
    })
}

/// What a load ends with: the finished ingest, or why there is none.
enum Outcome {
    Done(Box<FileIngest>),
    /// A file read on several workers (how many), merged.
    Trace(Box<RankTrace>, u32),
    /// The pieces of a file read on several workers left a doubt: read it again alone.
    Again,
    /// NCCL text, whole (such files are logs and tables: kB to a few MB).
    Text(Vec<InputKind>, Vec<u8>),
    /// A job digest, decoded: the seconds of inflating and parsing 1,024 parts are spent here,
    /// not on the page's thread; its analysis is left as the JSON it is stored as.
    Digest(Box<rankscope_core::job::digest::LeanDigest>),
    Cancelled,
}

fn finish(state: &Rc<RefCell<State>>, file: FileId, result: Result<Outcome, String>) {
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
        Ok(mut trace) => {
            // A file of several ranks is read as one here (a worker holds one rank's view);
            // the CLI, Python and the npm package read it as its ranks. Said on the file.
            rankscope_core::normalize::multirank::note_unsplit(&mut trace);
            let view = RankView::new(trace, &Rules::default());
            match (view.summary(), view.analysis_part()) {
                (Some(summary), Some(part)) => {
                    let first_ns = view.first_ns();
                    state.borrow_mut().ranks.insert(file, view);
                    post(&FromWorker::Loaded {
                        file,
                        summary: Box::new(summary),
                        part: Box::new(part),
                        first_ns,
                    });
                }
                _ => post(&FromWorker::Failed { file, error: "no rank could be built".into() }),
            }
        }
        Err(error) => post(&FromWorker::Failed { file, error }),
    }
}

/// A `Write` that posts what is written to the UI in pieces of [`CHUNK_BYTES`], each a
/// transferred `Uint8Array`: a rank's piece of the merged trace is never whole in memory.
struct ChunkPoster {
    file: FileId,
    req: u32,
    buf: Vec<u8>,
}

impl ChunkPoster {
    fn send(&mut self, last: bool) {
        let answer = Answer::Chunk { last };
        post_with_bytes(&FromWorker::Answer { file: self.file, req: self.req, answer }, &self.buf);
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

/// Feeds gathered bytes and reports progress (throttled).
struct Feeder {
    file: FileId,
    ingest: Box<FileIngest>,
    buf: Vec<u8>,
    last_post: f64,
    /// Cutting for other workers: at most this many pieces away at once (0: not cutting).
    away: u32,
    /// Pieces cut so far.
    pieces: u32,
    /// Of them, handed to other workers.
    handed: u32,
    /// The file's length when known (a `File`): the merged columns are reserved from it.
    file_bytes: u64,
}

impl Feeder {
    fn new(file: FileId, name: &str) -> Feeder {
        Feeder::cutting(file, name, 0)
    }

    /// A feeder that cuts the text into pieces for `helpers` other workers (none: reads alone).
    fn cutting(file: FileId, name: &str, helpers: u32) -> Feeder {
        let ingest =
            if helpers > 0 { FileIngest::cutting(name, CutSizes::default()) } else { FileIngest::new(name) };
        Feeder {
            file,
            ingest: Box::new(ingest),
            buf: Vec::with_capacity(CHUNK_BYTES),
            last_post: 0.0,
            // Two each: one being parsed, one waiting, so no helper idles between pieces.
            away: helpers.saturating_mul(2),
            pieces: 0,
            handed: 0,
            file_bytes: 0,
        }
    }

    /// Workers parsing this file so far: this one and at most one per piece handed on.
    fn workers(&self) -> u32 {
        1 + self.handed.min(self.away / 2)
    }

    /// Hands the pieces cut so far on: to the other workers while fewer than `away` are out,
    /// else parsed here (so this worker parses too when the others are behind). Before parsing
    /// one here it lets the messages waiting for it in (a stream's reads resolve one after the
    /// other without them), so pieces that came back free their slot first.
    async fn hand_on(&mut self, state: &Rc<RefCell<State>>) {
        if self.away == 0 {
            return;
        }
        let pieces = self.ingest.take_pieces();
        if pieces.is_empty() {
            return;
        }
        {
            let mut st = state.borrow_mut();
            let s = st.splits.entry(self.file).or_default();
            if s.merger.is_none() {
                // Made when the frame was marked, before its first piece.
                s.merger = self.ingest.take_merger();
            }
            if let Some(m) = s.merger.as_mut() {
                // The text the file holds: its length, or for gzip its length at the ratio so far.
                let p = self.ingest.progress();
                let ratio = p.text_bytes as f64 / p.input_bytes.max(1) as f64;
                m.expect_text_bytes((self.file_bytes as f64 * ratio.max(1.0)) as u64);
            }
        }
        for piece in pieces {
            let index = self.pieces;
            self.pieces += 1;
            let out = |st: &Rc<RefCell<State>>| st.borrow().splits.get(&self.file).map_or(0, |s| s.out);
            if out(state) >= self.away {
                yield_task().await;
            }
            if out(state) < self.away {
                state.borrow_mut().splits.entry(self.file).or_default().out += 1;
                self.handed += 1;
                post_with_bytes(&FromWorker::Piece { file: self.file, index, range: None }, &piece);
            } else {
                let parsed = split::parse_piece("piece", &piece);
                drop(piece);
                state.borrow_mut().splits.entry(self.file).or_default().take(index, parsed);
            }
        }
    }

    fn flush(&mut self) {
        if !self.buf.is_empty() {
            self.ingest.feed(&self.buf);
            self.buf.clear();
        }
        let t = now_ms();
        if t - self.last_post >= PROGRESS_MS {
            self.last_post = t;
            let p = self.ingest.progress();
            post(&FromWorker::Progress {
                file: self.file,
                phase: Phase::Reading,
                input_bytes: p.input_bytes,
                text_bytes: p.text_bytes,
                events: p.events,
                workers: self.workers(),
            });
        }
    }
}

fn is_cancelled(state: &Rc<RefCell<State>>, file: FileId) -> bool {
    state.borrow().cancelled.contains(&file)
}

/// Bytes of a `File` read in this many at a time by `File.slice().arrayBuffer()`: as fast as
/// `File.stream()` or up to twice as fast (BENCHMARKS.md), while 4 MiB slices are slower; and a
/// slice can start anywhere, so helpers read their own ranges ([`read_ranges`]).
const SLICE_BYTES: f64 = (16 << 20) as f64;

/// Where a load's bytes come from.
enum Source {
    /// A `File`, in [`SLICE_BYTES`] slices; the next slice is asked for before the one just read
    /// is parsed, so reading overlaps parsing.
    File { file: web_sys::File, at: f64, end: f64, next: Option<JsFuture> },
    /// A host page's `ReadableStream`, chunk by chunk.
    Stream(ReadableStreamDefaultReader),
}

impl Source {
    fn file(f: &web_sys::File) -> Source {
        Source::range(f, 0, f.size() as u64)
    }

    /// Bytes `[from, to)` of `f`.
    fn range(f: &web_sys::File, from: u64, to: u64) -> Source {
        Source::File { file: f.clone(), at: from as f64, end: (to as f64).min(f.size()), next: None }
    }

    fn stream(s: web_sys::ReadableStream) -> Source {
        Source::Stream(s.get_reader().unchecked_into())
    }

    /// The file's length, when it is a `File`.
    fn len(&self) -> u64 {
        match self {
            Source::File { at, end, .. } => (*end - *at).max(0.0) as u64,
            Source::Stream(_) => 0,
        }
    }

    /// The next bytes, or `None` at the end.
    async fn next(&mut self) -> Result<Option<Uint8Array>, JsValue> {
        match self {
            Source::File { file, at, end, next } => {
                let size = *end;
                let ask = |from: f64| -> Result<Option<JsFuture>, JsValue> {
                    if from >= size {
                        return Ok(None);
                    }
                    let slice = file.slice_with_f64_and_f64(from, (from + SLICE_BYTES).min(size))?;
                    Ok(Some(JsFuture::from(slice.array_buffer())))
                };
                let current = match next.take() {
                    Some(f) => f,
                    None => match ask(*at)? {
                        Some(f) => f,
                        None => return Ok(None),
                    },
                };
                *at += SLICE_BYTES;
                *next = ask(*at)?;
                let buffer = current.await?;
                Ok(Some(Uint8Array::new(&buffer)))
            }
            Source::Stream(reader) => {
                let r = JsFuture::from(reader.read()).await?;
                if Reflect::get(&r, &"done".into()).ok().and_then(|d| d.as_bool()).unwrap_or(true) {
                    return Ok(None);
                }
                bytes_of(Reflect::get(&r, &"value".into())?)
                    .map(Some)
                    .ok_or_else(|| JsValue::from_str("the stream gave something other than bytes"))
            }
        }
    }

    /// Stops reading: a stream is cancelled, a slice still being read is dropped.
    fn cancel(&mut self) {
        match self {
            Source::File { next, .. } => *next = None,
            Source::Stream(reader) => {
                let _ = reader.cancel();
            }
        }
    }
}

/// Reads a file (a `File` by slices, or a host page's stream), copying each slice or chunk
/// straight into wasm memory and feeding it on: the file is never one JS string or one buffer.
///
/// With `helpers`, the text is cut into pieces as it arrives ([`Feeder::hand_on`]) and merged as
/// they are parsed; at the end the frame closes the merge ([`gather`]).
async fn read_file(
    state: &Rc<RefCell<State>>,
    file: FileId,
    name: &str,
    mut source: Source,
    helpers: u32,
) -> Result<Outcome, String> {
    let mut feeder = Feeder::cutting(file, name, helpers);
    feeder.file_bytes = source.len();
    // None until the first SNIFF_BYTES (or the whole file) said what the file is; then the NCCL
    // kinds it holds (empty: a trace).
    let mut text: Option<Vec<InputKind>> = None;
    loop {
        let value = match source.next().await {
            Ok(Some(v)) => v,
            Ok(None) => break,
            Err(e) => return Err(format!("{name}: cannot read the file ({})", js_text(&e))),
        };
        let start = feeder.buf.len();
        feeder.buf.resize(start + value.length() as usize, 0);
        value.copy_to(&mut feeder.buf[start..]);
        if text.is_none() && feeder.buf.len() >= SNIFF_BYTES {
            text = Some(sniff(&feeder.buf[..SNIFF_BYTES]));
        }
        let is_text = text.as_ref().is_some_and(|k| !k.is_empty());
        if feeder.buf.len() >= CHUNK_BYTES && !is_text {
            feeder.flush();
            feeder.hand_on(state).await;
            if state.borrow().splits.get(&file).is_some_and(|s| s.doubt) {
                // A piece cannot be merged: the file is read again alone, so stop here.
                source.cancel();
                return Ok(Outcome::Again);
            }
        }
        if is_cancelled(state, file) {
            source.cancel();
            return Ok(Outcome::Cancelled);
        }
        if feeder.ingest.failed() {
            // Not a trace: stop reading, `finish` names the file and the offset.
            source.cancel();
            break;
        }
    }
    let kinds = text.unwrap_or_else(|| sniff(&feeder.buf));
    if kinds.contains(&InputKind::Digest) {
        // Each part made lean as it is read, the inflated content never held whole (1,024 ranks
        // of 100 steps inflate to 1.1 GB, and wasm memory never shrinks), and the analysis left
        // as its JSON for the page to parse: parsing and writing it again here cost seconds and
        // hundreds of MB for nothing.
        let digest = rankscope_core::job::digest::decode_lean_raw(name, &feeder.buf);
        feeder.buf = Vec::new();
        return digest.map(|d| Outcome::Digest(Box::new(d))).map_err(|e| e.to_string());
    }
    if !kinds.is_empty() {
        return Ok(Outcome::Text(kinds, std::mem::take(&mut feeder.buf)));
    }
    feeder.flush();
    if feeder.away == 0 {
        return Ok(Outcome::Done(feeder.ingest));
    }
    feeder.hand_on(state).await;
    gather(state, file, feeder).await
}

/// The end of a cut read: waits for the pieces still away, then closes the merge with the
/// frame; a doubt anywhere is [`Outcome::Again`].
async fn gather(state: &Rc<RefCell<State>>, file: FileId, feeder: Feeder) -> Result<Outcome, String> {
    let (pieces, workers) = (feeder.pieces, feeder.workers());
    let (frame, text_bytes, input_bytes) = match feeder.ingest.finish_cut() {
        Err(e) => return Err(e.to_string()),
        Ok(Cutout::Whole(t)) => return Ok(Outcome::Trace(Box::new(t), 1)),
        Ok(Cutout::Doubt) => return Ok(Outcome::Again),
        Ok(Cutout::Cut { frame, text_bytes, input_bytes, .. }) => (frame, text_bytes, input_bytes),
    };
    if !pieces_back(state, file).await {
        return Ok(Outcome::Cancelled);
    }
    let split = state.borrow_mut().splits.remove(&file).unwrap_or_default();
    let (Some(merger), false) = (split.merger, split.doubt) else {
        return Ok(Outcome::Again);
    };
    Ok(match merger.finish(frame, pieces as usize, text_bytes) {
        Some(mut t) => {
            t.input_bytes = input_bytes;
            Outcome::Trace(Box::new(t), workers)
        }
        None => Outcome::Again,
    })
}

/// Waits until no piece of `file` is away (or one doubts); false when the load was cancelled.
async fn pieces_back(state: &Rc<RefCell<State>>, file: FileId) -> bool {
    loop {
        if is_cancelled(state, file) {
            return false;
        }
        // Woken by the `Parsed` handler (or a cancel) rather than polling.
        let mut wait = None;
        if let Some(s) = state.borrow_mut().splits.get_mut(&file).filter(|s| s.out > 0 && !s.doubt) {
            wait = Some(js_sys::Promise::new(&mut |resolve, _| s.wake = Some(resolve)));
        }
        match wait {
            Some(p) => {
                let _ = JsFuture::from(p).await;
            }
            None => return true,
        }
    }
}

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
async fn read_piece(f: &web_sys::File, from: u64, to: u64) -> Option<RankTrace> {
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
async fn read_ranges(
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

/// Resolves in a new task (after the messages already queued are handled): a message to itself
/// over a `MessageChannel`, which unlike a zero timeout is never clamped to 4 ms.
async fn yield_task() {
    let Ok(channel) = web_sys::MessageChannel::new() else { return };
    let promise = js_sys::Promise::new(&mut |resolve, _| {
        channel.port2().set_onmessage(Some(&resolve));
    });
    if channel.port1().post_message(&JsValue::UNDEFINED).is_err() {
        return;
    }
    let _ = JsFuture::from(promise).await;
    channel.port2().set_onmessage(None);
}

/// A stream chunk as bytes: a host page's stream may give any `ArrayBuffer` or view of one.
fn bytes_of(v: JsValue) -> Option<Uint8Array> {
    if v.is_instance_of::<Uint8Array>() {
        return Some(v.unchecked_into());
    }
    if let Some(b) = v.dyn_ref::<js_sys::ArrayBuffer>() {
        return Some(Uint8Array::new(b));
    }
    let buffer = Reflect::get(&v, &"buffer".into()).ok()?.dyn_into::<js_sys::ArrayBuffer>().ok()?;
    let offset = Reflect::get(&v, &"byteOffset".into()).ok()?.as_f64()? as u32;
    let len = Reflect::get(&v, &"byteLength".into()).ok()?.as_f64()? as u32;
    Some(Uint8Array::new_with_byte_offset_and_length(&buffer, offset, len))
}

/// Generates demo rank `rank` and ingests it through the same chunked path as a file.
async fn demo(state: &Rc<RefCell<State>>, file: FileId, rank: u32) -> Result<Outcome, String> {
    let mut bytes = Vec::new();
    synth::write_rank(&SynthConfig::default(), rank, &mut bytes)
        .map_err(|e| format!("demo rank {rank}: {e}"))?;
    let mut feeder = Feeder::new(file, &synth::file_name(rank, false));
    for chunk in bytes.chunks(CHUNK_BYTES) {
        feeder.buf.extend_from_slice(chunk);
        feeder.flush();
        // Let cancel and other messages in between chunks.
        yield_now().await;
        if is_cancelled(state, file) {
            return Ok(Outcome::Cancelled);
        }
    }
    Ok(Outcome::Done(feeder.ingest))
}

/// Text of each synthetic rank of the warm-up: about 90,000 events, enough for V8 to optimise
/// most functions a load spends its time in (a function is compiled again with the optimising
/// tier once it has run for a while), and about 0.4 s for both ranks on one core of the bench
/// machine (8 × 34 MB chosen after it: ready in 0.71-0.78 s; with 12 MiB ranks 0.80-0.82 s).
const WARM_BYTES: u64 = 24 << 20;

/// The warm-up (`warm.rs`): a load's whole path run on two small synthetic ranks: each made a
/// `File` and read as a chosen file is (`read_file`: slices, the chunked parse, progress), a
/// middle piece parsed alone and sent through the wire as a helper's is, then `finish` (the
/// normalization, the summary, the analysis part, the `Loaded` message: the page's warm-up
/// combines the parts, for its own module). Then `Warmed`. The worker yields between slices, and
/// the page closes it when a real load starts.
async fn warm() {
    let t0 = now_ms();
    let cfg = SynthConfig {
        ranks: 2,
        straggler_rank: Some(1),
        target_bytes: Some(WARM_BYTES),
        ..SynthConfig::default()
    };
    let state = Rc::new(RefCell::new(State::default()));
    for rank in 0..cfg.ranks {
        let mut bytes = Vec::new();
        if synth::write_rank(&cfg, rank, &mut bytes).is_err() {
            break;
        }
        let len = bytes.len() as u64;
        let seam = |at: u64| bytes.get(at as usize..).and_then(|w| split::seam_in(w, at));
        if let (Some(a), Some(b)) = (seam(len / 3), seam(2 * len / 3)) {
            let piece = bytes.get(a.1 as usize..b.0 as usize).and_then(|p| split::parse_piece("warm-up", p));
            if let Some(w) = piece.as_ref().and_then(wire::encode_piece) {
                drop(wire::decode_piece("warm-up", &w));
            }
        }
        let name = synth::file_name(rank, false);
        let parts = Array::of1(&Uint8Array::from(&bytes[..]));
        drop(bytes);
        let Ok(file) = web_sys::File::new_with_u8_array_sequence(&parts, &name) else { break };
        let result = read_file(&state, rank, &name, Source::file(&file), 0).await;
        finish(&state, rank, result);
        state.borrow_mut().ranks.clear();
    }
    post(&FromWorker::Warmed { ms: now_ms() - t0 });
}

async fn yield_now() {
    let _ = JsFuture::from(js_sys::Promise::resolve(&JsValue::UNDEFINED)).await;
}

pub fn js_text(v: &JsValue) -> String {
    v.as_string()
        .or_else(|| v.dyn_ref::<js_sys::Error>().map(|e| String::from(e.message())))
        .unwrap_or_else(|| format!("{v:?}"))
}
