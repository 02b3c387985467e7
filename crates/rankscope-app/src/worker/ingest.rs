//! A load's bytes into the core's reader: a `File` by slices or a host page's stream, copied
//! straight into wasm memory; with helpers, cut into pieces other workers parse and merged back
//! ([`Feeder::hand_on`], [`gather`]). What a load ends with is an [`Outcome`].

use std::cell::RefCell;
use std::rc::Rc;

use js_sys::{Reflect, Uint8Array};
use rankscope_core::model::RankTrace;
use rankscope_core::parse::{split, CutSizes, Cutout, FileIngest};
use rankscope_synth::{self as synth, SynthConfig};
use wasm_bindgen::prelude::*;
use wasm_bindgen::JsCast;
use wasm_bindgen_futures::JsFuture;
use web_sys::ReadableStreamDefaultReader;

use super::{is_cancelled, js_text, now_ms, post, post_with_bytes, yield_now, yield_task, State};
use crate::protocol::*;

/// A file read on several workers: its pieces are merged as they come back, in any order
/// ([`split::Merger`] appends each once the pieces before it are in, and drops it).
#[derive(Default)]
pub(super) struct Split {
    /// Started from the frame's head once the frame is marked, before the first piece.
    pub(super) merger: Option<split::Merger>,
    /// A piece could not be parsed alone, came back damaged, or came with no merger to take it:
    /// the file is read again alone.
    pub(super) doubt: bool,
    /// Pieces handed on and not back yet.
    pub(super) out: u32,
    /// Events of the pieces taken so far (for the progress shown while reading).
    pub(super) events: u64,
    /// Resolves the reader's wait in [`gather`]: called when a piece comes back or the load is
    /// cancelled.
    pub(super) wake: Option<js_sys::Function>,
}

impl Split {
    /// Takes piece `index`, parsed here or elsewhere (`None`: it could not be parsed alone).
    pub(super) fn take(&mut self, index: u32, piece: Option<RankTrace>) {
        match (piece, self.merger.as_mut()) {
            (Some(p), Some(m)) if !self.doubt => {
                self.events += p.events.len() as u64;
                m.push(index as usize, p)
            }
            _ => self.doubt = true,
        }
    }

    pub(super) fn wake(&mut self) {
        if let Some(w) = self.wake.take() {
            let _ = w.call0(&JsValue::NULL);
        }
    }
}

/// What a load ends with: the finished ingest, or why there is none.
pub(super) enum Outcome {
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
    /// A read again for the source args ([`read_again`]): no progress posted (the page shows
    /// the file loaded already).
    quiet: bool,
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
            quiet: false,
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
        if !self.quiet && t - self.last_post >= PROGRESS_MS {
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

/// Bytes of a `File` read in this many at a time by `File.slice().arrayBuffer()`: as fast as
/// `File.stream()` or up to twice as fast (BENCHMARKS.md), while 4 MiB slices are slower; and a
/// slice can start anywhere, so helpers read their own ranges ([`super::ranges::read_ranges`]).
const SLICE_BYTES: f64 = (16 << 20) as f64;

/// Where a load's bytes come from.
pub(super) enum Source {
    /// A `File`, in [`SLICE_BYTES`] slices; the next slice is asked for before the one just read
    /// is parsed, so reading overlaps parsing.
    File { file: web_sys::File, at: f64, end: f64, next: Option<JsFuture> },
    /// A host page's `ReadableStream`, chunk by chunk.
    Stream(ReadableStreamDefaultReader),
}

impl Source {
    pub(super) fn file(f: &web_sys::File) -> Source {
        Source::range(f, 0, f.size() as u64)
    }

    /// Bytes `[from, to)` of `f`.
    pub(super) fn range(f: &web_sys::File, from: u64, to: u64) -> Source {
        Source::File { file: f.clone(), at: from as f64, end: (to as f64).min(f.size()), next: None }
    }

    pub(super) fn stream(s: web_sys::ReadableStream) -> Source {
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
    pub(super) async fn next(&mut self) -> Result<Option<Uint8Array>, JsValue> {
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
pub(super) async fn read_file(
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
pub(super) async fn pieces_back(state: &Rc<RefCell<State>>, file: FileId) -> bool {
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

/// Reads a loaded file again, alone, keeping every event's source `args`
/// (`FileIngest::keep_args`): what the trace exports and the args panel need, read only when
/// asked ([`super::args`]), so a load holds no args arena and keeps its pieces on every worker.
/// A demo rank is generated again (the same bytes). Posts no progress.
pub(super) async fn read_again(
    state: &Rc<RefCell<State>>,
    file: FileId,
    from: &Reread,
) -> Result<RankTrace, String> {
    let (name, mut source, demo) = match from {
        Reread::File(f) => (f.name(), Some(Source::file(f)), None),
        Reread::Demo(rank) => (synth::file_name(*rank, false), None, Some(*rank)),
    };
    let mut feeder = Feeder::new(file, &name);
    feeder.quiet = true;
    feeder.ingest.keep_args();
    if let Some(rank) = demo {
        let mut bytes = Vec::new();
        synth::write_rank(&SynthConfig::default(), rank, &mut bytes)
            .map_err(|e| format!("demo rank {rank}: {e}"))?;
        for chunk in bytes.chunks(CHUNK_BYTES) {
            feeder.buf.extend_from_slice(chunk);
            feeder.flush();
            yield_now().await;
        }
    }
    while let Some(s) = source.as_mut() {
        match s.next().await {
            Ok(Some(v)) => {
                let start = feeder.buf.len();
                feeder.buf.resize(start + v.length() as usize, 0);
                v.copy_to(&mut feeder.buf[start..]);
                if feeder.buf.len() >= CHUNK_BYTES {
                    feeder.flush();
                }
                if is_cancelled(state, file) {
                    s.cancel();
                    return Err(format!("{name}: the load was cancelled"));
                }
            }
            Ok(None) => break,
            Err(e) => return Err(format!("{name}: cannot read the file again ({})", js_text(&e))),
        }
    }
    feeder.flush();
    feeder.ingest.finish().map_err(|e| e.to_string())
}

/// Where a loaded file's bytes can be had again ([`read_again`]): a host page's stream cannot.
#[derive(Clone)]
pub(super) enum Reread {
    File(web_sys::File),
    Demo(u32),
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
pub(super) async fn demo(state: &Rc<RefCell<State>>, file: FileId, rank: u32) -> Result<Outcome, String> {
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
