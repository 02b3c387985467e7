//! The worker side: reads files into the core and answers the UI's questions.
//!
//! One worker handles one load at a time (the pool sees to that) and keeps every rank it loaded,
//! so later questions about a rank go to the worker that holds it. The read loop awaits each
//! slice of the file (or chunk of a host page's stream), so cancel, tile and pick messages are
//! answered between them.
//!
//! - [`ingest`]: a load's bytes (a `File` by slices, a host page's stream, the demo) into the
//!   core's reader, cut into pieces for other workers and merged back;
//! - [`ranges`]: a plain file read by ranges on every worker;
//! - [`ranks`]: the read trace cut into the ranks it holds, one [`RankView`] each, and the
//!   answers to the page's questions about them;
//! - [`warm`]: a load's whole path run once on a small synthetic job.

mod args;
mod ingest;
mod ranges;
mod ranks;
mod warm;

pub use ranks::rank_views;

use std::cell::RefCell;
use std::collections::{BTreeMap, BTreeSet};
use std::rc::Rc;

use js_sys::{Array, Uint8Array};
use rankscope_core::model::RankTrace;
use rankscope_core::parse::{split, wire};
use rankscope_core::view::RankView;
use wasm_bindgen::prelude::*;
use wasm_bindgen::JsCast;
use wasm_bindgen_futures::{spawn_local, JsFuture};
use web_sys::{DedicatedWorkerGlobalScope, MessageEvent};

use crate::protocol::*;
use ingest::{read_file, Outcome, Source, Split};

#[derive(Default)]
struct State {
    /// Every rank read here, by its file and its place in the file.
    ranks: BTreeMap<RankId, RankView>,
    cancelled: BTreeSet<FileId>,
    /// Files this worker reads with others parsing pieces of them.
    splits: BTreeMap<FileId, Split>,
    /// Where each loaded file can be read again for its source args ([`args`]).
    sources: BTreeMap<FileId, ingest::Reread>,
    /// Files being read again for their source args.
    rereading: BTreeSet<FileId>,
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
    crate::seed_table_keys();
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
                if let Some(f) = &again {
                    st.borrow_mut().sources.insert(file, ingest::Reread::File(f.clone()));
                }
                // A plain trace on several workers: each reads its own ranges of the file.
                let ranged = match (&again, helpers) {
                    (Some(f), 1..) => ranges::read_ranges(&st, file, &name, f, helpers).await,
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
                ranks::finish(&st, file, result);
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
                    spawn_local(async move { reply(ranges::read_piece(&f, from, to).await) })
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
            st.borrow_mut().sources.insert(file, ingest::Reread::Demo(rank));
            spawn_local(async move {
                let result = ingest::demo(&st, file, rank).await;
                ranks::finish(&st, file, result);
            });
        }
        ToWorker::Warm => spawn_local(warm::warm()),
        ToWorker::Baseline { name } => spawn_local(async move {
            let bytes = match extra.dyn_into::<web_sys::File>() {
                Ok(f) => read_whole(&f).await.map_err(|e| format!("{name}: cannot read the file ({e})")),
                Err(_) => Err(format!("{name}: no file was sent")),
            };
            match bytes.and_then(|b| crate::baseline::analysis_json(&name, b)) {
                Ok(json) => post_with_bytes(&FromWorker::Baseline { name, error: None }, &json),
                Err(e) => post(&FromWorker::Baseline { name, error: Some(e) }),
            }
        }),
        ToWorker::Cancel { file } => {
            let mut st = state.borrow_mut();
            st.cancelled.insert(file);
            if let Some(s) = st.splits.get_mut(&file) {
                s.wake();
            }
        }
        ToWorker::Ask { id, req, query } => {
            // A trace export (or a click's args) first reads the file again for its source args.
            let needs_args =
                matches!(query, Query::Export { .. } | Query::Perfetto { .. } | Query::Args { .. });
            if needs_args && args::wanted(state, id) {
                let st = state.clone();
                spawn_local(async move {
                    let answer = match args::ensure(&st, id.file).await {
                        Ok(()) => ranks::answer(&st, id, req, query),
                        Err(e) => Some(Answer::Failed(e)),
                    };
                    if let Some(answer) = answer {
                        post(&FromWorker::Answer { id, req, answer });
                    }
                });
            } else if let Some(answer) = ranks::answer(state, id, req, query) {
                post(&FromWorker::Answer { id, req, answer });
            }
        }
    }
}

/// A file's bytes, whole (a baseline: its analysis is what is read of it).
async fn read_whole(f: &web_sys::File) -> Result<Vec<u8>, String> {
    let buf = JsFuture::from(f.array_buffer()).await.map_err(|e| js_text(&e))?;
    Ok(Uint8Array::new(&buf).to_vec())
}

fn is_cancelled(state: &Rc<RefCell<State>>, file: FileId) -> bool {
    state.borrow().cancelled.contains(&file)
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

async fn yield_now() {
    let _ = JsFuture::from(js_sys::Promise::resolve(&JsValue::UNDEFINED)).await;
}

pub fn js_text(v: &JsValue) -> String {
    v.as_string()
        .or_else(|| v.dyn_ref::<js_sys::Error>().map(|e| String::from(e.message())))
        .unwrap_or_else(|| format!("{v:?}"))
}
