//! The workers, seen from the UI: start them, hand out loads, route their answers.
//!
//! Up to `navigator.hardwareConcurrency` workers; each reads one file at a time and keeps every
//! rank it read, so a question about a rank goes to the worker that holds it. Loads wait in a
//! queue for a free worker. Answers about loads become reducer [`Action`]s; tiles and picks go to
//! the timeline's sinks (they are drawing data, not UI state).

use std::cell::RefCell;
use std::collections::{BTreeMap, VecDeque};
use std::rc::Rc;

use js_sys::Array;
use rankscope_core::view::{EventDetail, Found, Tile, TileKey};
use wasm_bindgen::prelude::*;
use wasm_bindgen::JsCast;
use web_sys::{MessageEvent, Worker};
use yew::Callback;

use crate::protocol::*;
use crate::state::Action;

/// A load waiting for a worker.
#[derive(Debug)]
pub enum Task {
    File(FileId, web_sys::File),
    /// A host page's stream (`embed`), with the file's name.
    Stream(FileId, String, web_sys::ReadableStream),
    Demo(FileId, u32),
}

impl Task {
    fn file(&self) -> FileId {
        match self {
            Task::File(f, _) | Task::Stream(f, _, _) | Task::Demo(f, _) => *f,
        }
    }

    /// The same load again (a `File` handle is a reference to the user's file, not its bytes);
    /// a host page's stream is read once and cannot be.
    fn again(&self) -> Option<Task> {
        match self {
            Task::File(f, file) => Some(Task::File(*f, file.clone())),
            Task::Stream(..) => None,
            Task::Demo(f, r) => Some(Task::Demo(*f, *r)),
        }
    }
}

pub type TileSink = Rc<dyn Fn(FileId, Tile)>;
pub type PickSink = Rc<dyn Fn(FileId, u32, Option<EventDetail>)>;
pub type FoundSink = Rc<dyn Fn(FileId, u32, Found)>;
/// Pieces of an export: `(file, req, Ok((bytes, last)) | Err(why))`.
pub type ExportSink = Rc<dyn Fn(FileId, u32, Result<(js_sys::Uint8Array, bool), String>)>;

struct Slot {
    worker: Worker,
    ready: bool,
    /// Messages posted before the worker said `Ready` (a worker drops messages that arrive
    /// before its handler is installed).
    outbox: Vec<Array>,
    busy: Option<FileId>,
    dead: bool,
    _on_message: Closure<dyn FnMut(MessageEvent)>,
    _on_error: Closure<dyn FnMut(web_sys::Event)>,
}

struct Inner {
    slots: Vec<Slot>,
    max: usize,
    queue: VecDeque<Task>,
    holder: BTreeMap<FileId, usize>,
    /// Every load started, to start it again when the worker holding its tables dies.
    loads: BTreeMap<FileId, Task>,
    /// Merged-trace pieces asked for and not yet fully received: `file → req`.
    exports: BTreeMap<FileId, u32>,
    /// Files whose worker died while reading them: not loaded again (they may be what killed it).
    fatal: std::collections::BTreeSet<FileId>,
    dispatch: Callback<Action>,
    tile_sink: Option<TileSink>,
    pick_sink: Option<PickSink>,
    export_sink: Option<ExportSink>,
    found_sink: Option<FoundSink>,
}

/// The worker pool of one job. Dropping it does not stop the workers: call [`Pool::terminate`].
#[derive(Clone)]
pub struct Pool {
    inner: Rc<RefCell<Inner>>,
}

impl PartialEq for Pool {
    fn eq(&self, other: &Self) -> bool {
        Rc::ptr_eq(&self.inner, &other.inner)
    }
}

impl std::fmt::Debug for Pool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Pool")
    }
}

fn now_ms() -> f64 {
    web_sys::window().and_then(|w| w.performance()).map_or(0.0, |p| p.now())
}

fn message(m: &ToWorker, extra: Option<&JsValue>) -> Array {
    let a = Array::of1(&JsValue::from_str(&encode(m)));
    if let Some(x) = extra {
        a.push(x);
    }
    a
}

impl Pool {
    pub fn new(dispatch: Callback<Action>) -> Pool {
        let cores = web_sys::window().map_or(2.0, |w| w.navigator().hardware_concurrency());
        let max = (cores as usize).clamp(1, 16);
        Pool {
            inner: Rc::new(RefCell::new(Inner {
                slots: Vec::new(),
                max,
                queue: VecDeque::new(),
                holder: BTreeMap::new(),
                loads: BTreeMap::new(),
                exports: BTreeMap::new(),
                fatal: Default::default(),
                dispatch,
                tile_sink: None,
                pick_sink: None,
                export_sink: None,
                found_sink: None,
            })),
        }
    }

    /// Queues loads; they start as workers free up.
    pub fn load(&self, tasks: Vec<Task>) {
        self.inner.borrow_mut().queue.extend(tasks);
        pump(&self.inner);
    }

    pub fn cancel(&self, file: FileId) {
        let dispatch = {
            let mut inner = self.inner.borrow_mut();
            let queued = inner.queue.len();
            inner.queue.retain(|t| t.file() != file);
            if inner.queue.len() != queued {
                Some(inner.dispatch.clone())
            } else {
                if let Some(&s) = inner.holder.get(&file) {
                    if inner.slots.get(s).is_some_and(|x| x.busy == Some(file)) {
                        send(&mut inner.slots[s], message(&ToWorker::Cancel { file }, None));
                    }
                }
                None
            }
        };
        if let Some(d) = dispatch {
            d.emit(Action::Cancelled { file });
        }
    }

    pub fn tile(&self, file: FileId, key: TileKey) {
        self.ask(file, &ToWorker::Tile { file, key });
    }

    pub fn pick(&self, file: FileId, req: u32, lane: u32, depth: u32, t_ns: i64, slop_ns: i64) {
        self.ask(file, &ToWorker::Pick { file, req, lane, depth, t_ns, slop_ns });
    }

    /// Tells the worker holding `file` the job-level rank decision (for its exports); no answer.
    pub fn decide(&self, file: FileId, decision: rankscope_core::view::RankDecision) {
        let _ = self.ask(file, &ToWorker::Decide { file, decision: Box::new(decision) });
    }

    /// Asks for `file`'s piece of the merged Chrome trace; the pieces go to the export sink.
    /// A file no worker holds (its worker died) answers at once with the reason, so the export
    /// reports what is missing instead of waiting for it.
    pub fn export(&self, file: FileId, req: u32, offset_ns: i64, origin_ns: i64, first: bool) {
        let delivered = self.ask(file, &ToWorker::Export { file, req, offset_ns, origin_ns, first });
        let sink = {
            let mut inner = self.inner.borrow_mut();
            if delivered {
                inner.exports.insert(file, req);
                None
            } else {
                inner.export_sink.clone()
            }
        };
        if let Some(sink) = sink {
            sink(file, req, Err(format!("file {file} is not loaded (the worker that held it stopped; it is being read again): export again once it is back")));
        }
    }

    /// Asks for `file`'s member of the Perfetto archive; the pieces go to the export sink.
    pub fn perfetto(
        &self,
        file: FileId,
        req: u32,
        member: rankscope_core::export::perfetto::Member,
        shift_ns: i64,
    ) {
        self.ask(file, &ToWorker::Perfetto { file, req, member: Box::new(member), shift_ns });
    }

    /// Searches `file`'s events by name; the answer goes to the found sink.
    pub fn search(&self, file: FileId, req: u32, query: &str) {
        self.ask(file, &ToWorker::Search { file, req, query: query.to_string() });
    }

    pub fn set_found_sink(&self, sink: Option<FoundSink>) {
        self.inner.borrow_mut().found_sink = sink;
    }

    pub fn set_export_sink(&self, sink: Option<ExportSink>) {
        self.inner.borrow_mut().export_sink = sink;
    }

    /// Sends `m` to the worker holding `file`; `false` when no live worker holds it.
    fn ask(&self, file: FileId, m: &ToWorker) -> bool {
        let mut inner = self.inner.borrow_mut();
        if let Some(&s) = inner.holder.get(&file) {
            if let Some(slot) = inner.slots.get_mut(s).filter(|x| !x.dead) {
                send(slot, message(m, None));
                return true;
            }
        }
        false
    }

    pub fn set_sinks(&self, tile: Option<TileSink>, pick: Option<PickSink>) {
        let mut inner = self.inner.borrow_mut();
        inner.tile_sink = tile;
        inner.pick_sink = pick;
    }

    /// Stops every worker (their ranks are gone).
    pub fn terminate(&self) {
        let mut inner = self.inner.borrow_mut();
        for s in &mut inner.slots {
            s.worker.terminate();
            s.dead = true;
        }
        inner.queue.clear();
        inner.holder.clear();
        inner.loads.clear();
        inner.exports.clear();
    }

    /// Number of workers started so far.
    pub fn workers(&self) -> usize {
        self.inner.borrow().slots.len()
    }
}

fn send(slot: &mut Slot, msg: Array) {
    if slot.dead {
        return;
    }
    // A stream cannot be copied to a worker, only transferred.
    let transfer: Array = msg.iter().filter(|v| v.is_instance_of::<web_sys::ReadableStream>()).collect();
    if !slot.ready {
        slot.outbox.push(msg);
    } else if let Err(e) = slot.worker.post_message_with_transfer(&msg, &transfer) {
        web_sys::console::error_2(&"rankscope: cannot post to a worker".into(), &e);
    }
}

fn spawn(inner_rc: &Rc<RefCell<Inner>>, index: usize) -> Result<Slot, JsValue> {
    let worker = crate::host::new_worker()?;
    let weak = Rc::downgrade(inner_rc);
    let on_message = Closure::<dyn FnMut(MessageEvent)>::new(move |ev: MessageEvent| {
        if let Some(inner) = weak.upgrade() {
            let data: Array = ev.data().unchecked_into();
            match decode::<FromWorker>(&data.get(0).as_string().unwrap_or_default()) {
                Ok(m) => on_message(&inner, index, m, data.get(1)),
                Err(e) => web_sys::console::error_1(&e.into()),
            }
        }
    });
    let weak = Rc::downgrade(inner_rc);
    let on_error = Closure::<dyn FnMut(web_sys::Event)>::new(move |ev: web_sys::Event| {
        ev.prevent_default();
        let text = ev
            .dyn_ref::<web_sys::ErrorEvent>()
            .map(|e| e.message())
            .unwrap_or_else(|| "the worker could not start".to_string());
        if let Some(inner) = weak.upgrade() {
            on_worker_error(&inner, index, text);
        }
    });
    worker.set_onmessage(Some(on_message.as_ref().unchecked_ref()));
    worker.set_onerror(Some(on_error.as_ref().unchecked_ref()));
    Ok(Slot {
        worker,
        ready: false,
        outbox: Vec::new(),
        busy: None,
        dead: false,
        _on_message: on_message,
        _on_error: on_error,
    })
}

/// Starts queued loads on idle workers, starting workers up to the limit.
fn pump(inner_rc: &Rc<RefCell<Inner>>) {
    let mut started = Vec::new();
    let mut failed = Vec::new();
    {
        let mut inner = inner_rc.borrow_mut();
        while !inner.queue.is_empty() {
            let idle = inner.slots.iter().position(|s| !s.dead && s.busy.is_none());
            let slot = match idle {
                Some(i) => i,
                None if inner.slots.iter().filter(|s| !s.dead).count() < inner.max => {
                    let index = inner.slots.len();
                    match spawn(inner_rc, index) {
                        Ok(s) => {
                            inner.slots.push(s);
                            index
                        }
                        Err(e) => {
                            // No worker at all: every queued file fails with the reason.
                            let why = crate::worker::js_text(&e);
                            while let Some(t) = inner.queue.pop_front() {
                                failed.push((t.file(), format!("cannot start a worker: {why}")));
                            }
                            break;
                        }
                    }
                }
                None => break,
            };
            let Some(task) = inner.queue.pop_front() else { break };
            let file = task.file();
            let msg = match &task {
                Task::File(_, f) => message(&ToWorker::Load { file, name: f.name() }, Some(f.as_ref())),
                Task::Stream(_, name, s) => {
                    message(&ToWorker::Load { file, name: name.clone() }, Some(s.as_ref()))
                }
                Task::Demo(_, rank) => message(&ToWorker::Demo { file, rank: *rank }, None),
            };
            inner.holder.insert(file, slot);
            if let Some(t) = task.again() {
                inner.loads.insert(file, t);
            }
            inner.slots[slot].busy = Some(file);
            send(&mut inner.slots[slot], msg);
            started.push(file);
        }
    }
    let dispatch = inner_rc.borrow().dispatch.clone();
    let now = now_ms();
    for file in started {
        dispatch.emit(Action::Started { file, now_ms: now });
    }
    for (file, error) in failed {
        dispatch.emit(Action::Failed { file, error });
    }
}

fn on_message(inner_rc: &Rc<RefCell<Inner>>, index: usize, m: FromWorker, extra: JsValue) {
    let (dispatch, tile_sink, pick_sink, export_sink, found_sink) = {
        let i = inner_rc.borrow();
        (
            i.dispatch.clone(),
            i.tile_sink.clone(),
            i.pick_sink.clone(),
            i.export_sink.clone(),
            i.found_sink.clone(),
        )
    };
    let done = |file: FileId, keep: bool| {
        let mut inner = inner_rc.borrow_mut();
        if let Some(s) = inner.slots.get_mut(index) {
            if s.busy == Some(file) {
                s.busy = None;
            }
        }
        if !keep {
            inner.holder.remove(&file);
        }
    };
    match m {
        FromWorker::Ready => {
            let mut inner = inner_rc.borrow_mut();
            if let Some(s) = inner.slots.get_mut(index) {
                s.ready = true;
                for msg in std::mem::take(&mut s.outbox) {
                    send(s, msg);
                }
            }
        }
        FromWorker::Progress { file, phase, input_bytes, events, .. } => {
            dispatch.emit(Action::Progress { file, phase, input_bytes, events, now_ms: now_ms() });
        }
        FromWorker::Loaded { file, summary, part, first_ns } => {
            done(file, true);
            dispatch.emit(Action::Loaded { file, summary, part, first_ns });
            pump(inner_rc);
        }
        FromWorker::Text { file, kinds } => {
            done(file, false);
            let bytes = extra.dyn_into::<js_sys::Uint8Array>().map(|b| b.to_vec()).unwrap_or_default();
            dispatch.emit(Action::Text { file, kinds, bytes: Rc::new(bytes) });
            pump(inner_rc);
        }
        FromWorker::Found { file, req, found } => {
            if let Some(sink) = found_sink {
                sink(file, req, *found);
            }
        }
        FromWorker::ExportChunk { file, req, last } => {
            if last {
                inner_rc.borrow_mut().exports.remove(&file);
            }
            if let Some(sink) = export_sink {
                match extra.dyn_into::<js_sys::Uint8Array>() {
                    Ok(bytes) => sink(file, req, Ok((bytes, last))),
                    Err(_) => sink(file, req, Err("a piece of the export came without its bytes".into())),
                }
            }
        }
        FromWorker::ExportFailed { file, req, error } => {
            inner_rc.borrow_mut().exports.remove(&file);
            if let Some(sink) = export_sink {
                sink(file, req, Err(error));
            }
        }
        FromWorker::Failed { file, error } => {
            done(file, false);
            dispatch.emit(Action::Failed { file, error });
            pump(inner_rc);
        }
        FromWorker::Cancelled { file } => {
            done(file, false);
            dispatch.emit(Action::Cancelled { file });
            pump(inner_rc);
        }
        FromWorker::Tile { file, tile } => {
            if let Some(sink) = tile_sink {
                sink(file, *tile);
            }
        }
        FromWorker::Picked { file, req, detail } => {
            if let Some(sink) = pick_sink {
                sink(file, req, detail.map(|d| *d));
            }
        }
    }
}

/// A worker died (a panic in its wasm, an allocation beyond the browser's memory, or it could
/// not load). The file it was reading fails with the reason and is not read again (it may be
/// what killed the worker); the files whose tables it held are read again by the other workers
/// (or a new one), so their rows, lanes and exports come back; an export waiting for one of
/// their pieces is told at once instead of waiting forever.
fn on_worker_error(inner_rc: &Rc<RefCell<Inner>>, index: usize, text: String) {
    let ((busy, unreadable), reload, exports, dispatch, sink) = {
        let mut inner = inner_rc.borrow_mut();
        let Some(s) = inner.slots.get_mut(index) else { return };
        s.worker.terminate();
        s.dead = true;
        let busy = s.busy.take();
        let held: Vec<FileId> = inner.holder.iter().filter(|(_, &v)| v == index).map(|(&f, _)| f).collect();
        inner.holder.retain(|_, &mut v| v != index);
        if let Some(b) = busy {
            inner.fatal.insert(b);
            inner.loads.remove(&b);
        }
        let mut reload = Vec::new();
        let mut exports = Vec::new();
        let mut unreadable = Vec::new();
        for f in held.into_iter().filter(|f| Some(*f) != busy) {
            if let Some(req) = inner.exports.remove(&f) {
                exports.push((f, req));
            }
            match inner.loads.get(&f).and_then(Task::again) {
                Some(t) => reload.push(t),
                None => unreadable.push(f),
            }
        }
        // Reloads go first: they were loaded before anything still queued.
        for t in reload.iter().rev() {
            if let Some(t) = t.again() {
                inner.queue.push_front(t);
            }
        }
        (
            (busy, unreadable),
            reload.iter().map(Task::file).collect::<Vec<_>>(),
            exports,
            inner.dispatch.clone(),
            inner.export_sink.clone(),
        )
    };
    web_sys::console::error_1(&format!("rankscope worker {index} died: {text}").into());
    for file in reload {
        dispatch.emit(Action::Lost { file });
    }
    if let Some(sink) = sink {
        for (file, req) in exports {
            sink(file, req, Err(format!("the worker holding file {file} stopped ({text}); it is being read again: export again once it is back")));
        }
    }
    if let Some(file) = busy {
        let why = if text.contains("unreachable") || text.to_lowercase().contains("memory") {
            format!("too large for the browser's memory, or the reader crashed on it ({text}); the other files go on")
        } else {
            format!("the worker reading this file failed: {text}")
        };
        dispatch.emit(Action::Failed { file, error: why });
    }
    for file in unreadable {
        dispatch.emit(Action::Failed {
            file,
            error: format!("the worker holding this file stopped ({text}) and a stream cannot be read twice: send the file again"),
        });
    }
    pump(inner_rc);
}
