//! The workers, seen from the UI: start them, hand out loads, route their answers.
//!
//! Up to `navigator.hardwareConcurrency` workers (or the page's `?workers=N`); each reads one
//! file at a time and keeps every rank it read (a file may hold several), so a question about a
//! rank goes to the worker that read its file. Loads wait in a queue for a free worker. Answers about loads become reducer
//! [`Action`]s; the answers to questions about a loaded file ([`Query`]) go to the reply the
//! asker gave with it, found by the request id the pool gave the question (they are drawing
//! data and export bytes, not UI state). A question no live worker can answer, or whose worker
//! dies, is answered [`Answer::Failed`], never left waiting.
//!
//! A large file read alone is read on every worker: its reader is told how many helpers it has
//! and posts pieces of text, which the pool hands to the least busy other worker (started if
//! need be) and whose parsed columns it hands back (see `protocol.rs`). A piece whose helper
//! dies comes back as a doubt, and the reader reads the file again alone.

use std::cell::RefCell;
use std::collections::{BTreeMap, VecDeque};
use std::rc::Rc;

use js_sys::Array;
use wasm_bindgen::prelude::*;
use wasm_bindgen::JsCast;
use web_sys::{MessageEvent, Worker};
use yew::Callback;

use crate::protocol::*;
use crate::state::Action;

/// Least text size of a file read alone for it to be cut for other workers: below it, handing
/// pieces on saves less than a second.
pub const SPLIT_MIN_BYTES: f64 = 32.0 * 1024.0 * 1024.0;

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

/// Where the answers to one question go: `(rank, answer, what travelled beside it)` (the bytes
/// of an export's `Chunk`, else `undefined`). Called once, or for an export once per piece.
pub type Reply = Rc<dyn Fn(RankId, Answer, JsValue)>;

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
    /// Questions asked and not fully answered: request id → (rank, reply).
    pending: BTreeMap<u32, (RankId, Reply)>,
    next_req: u32,
    /// Files whose worker died while reading them: not loaded again (they may be what killed it).
    fatal: std::collections::BTreeSet<FileId>,
    /// Pieces of a file being parsed by a helper: (file, piece) → the helper's slot.
    away: BTreeMap<(FileId, u32), usize>,
    dispatch: Callback<Action>,
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
        let max = crate::host::Page::current().max_workers();
        Pool {
            inner: Rc::new(RefCell::new(Inner {
                slots: Vec::new(),
                max,
                queue: VecDeque::new(),
                holder: BTreeMap::new(),
                loads: BTreeMap::new(),
                pending: BTreeMap::new(),
                next_req: 0,
                fatal: Default::default(),
                away: BTreeMap::new(),
                dispatch,
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

    /// Asks the worker holding rank `id` (the worker that read its file) a question; its
    /// answers go to `reply` (none: nobody waits for the answer). A rank no live worker holds is
    /// answered `Failed` at once (after the caller's turn, so the reply may borrow what the
    /// caller holds now).
    pub fn ask(&self, id: RankId, query: Query, reply: Option<Reply>) {
        let mut inner = self.inner.borrow_mut();
        inner.next_req = inner.next_req.wrapping_add(1);
        let req = inner.next_req;
        let slot =
            inner.holder.get(&id.file).copied().filter(|&s| inner.slots.get(s).is_some_and(|x| !x.dead));
        match slot {
            Some(s) => {
                if let Some(r) = reply {
                    inner.pending.insert(req, (id, r));
                }
                send(&mut inner.slots[s], message(&ToWorker::Ask { id, req, query }, None));
            }
            None => {
                if let Some(r) = reply {
                    let file = id.file;
                    wasm_bindgen_futures::spawn_local(async move {
                        r(id, Answer::Failed(format!("file {file} is not loaded (the worker that held it stopped; it is being read again): ask again once it is back")), JsValue::UNDEFINED);
                    });
                }
            }
        }
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
        inner.pending.clear();
        inner.away.clear();
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
    // A stream cannot be copied to a worker, only transferred; a piece's bytes are moved, not
    // copied (the page keeps nothing of them).
    let transfer: Array = msg
        .iter()
        .filter_map(|v| match v.dyn_ref::<js_sys::Uint8Array>() {
            Some(b) => Some(b.buffer().into()),
            None => v.is_instance_of::<web_sys::ReadableStream>().then_some(v),
        })
        .collect();
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
                Task::File(_, f) => {
                    // A large file with nothing else waiting: the other workers parse pieces of it.
                    // Gzip counted at the text it inflates to (traces compress about 8-10x).
                    let text = if f.name().ends_with(".gz") { f.size() * 8.0 } else { f.size() };
                    let alone = inner.queue.is_empty() && text >= SPLIT_MIN_BYTES;
                    let helpers = if alone { inner.max.saturating_sub(1) as u32 } else { 0 };
                    message(&ToWorker::Load { file, name: f.name(), helpers }, Some(f.as_ref()))
                }
                Task::Stream(_, name, s) => {
                    message(&ToWorker::Load { file, name: name.clone(), helpers: 0 }, Some(s.as_ref()))
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
    let dispatch = inner_rc.borrow().dispatch.clone();
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
        FromWorker::Progress { file, phase, input_bytes, events, workers, .. } => {
            dispatch.emit(Action::Progress { file, phase, input_bytes, events, workers, now_ms: now_ms() });
        }
        FromWorker::Loaded { id, of, claim, summary, part, first_ns } => {
            // The worker is free once the file's last rank is in.
            let last = id.index + 1 >= of;
            if last {
                done(id.file, true);
            }
            dispatch.emit(Action::Loaded { id, of, claim, summary, part, first_ns });
            if last {
                pump(inner_rc);
            }
        }
        FromWorker::Digest { file, mut digest } => {
            done(file, false);
            retire_if_idle(inner_rc, index);
            // The stored analysis, beside the message: parsed here, the one time it is. (Parsed
            // straight out of the transferred buffer a piece at a time, the page held 300 MB
            // less for 1,024 ranks × 100 steps but opened it 1 s later: BENCHMARKS.md.)
            digest.analysis_json =
                extra.dyn_into::<js_sys::Uint8Array>().map(|b| b.to_vec()).unwrap_or_default();
            match (*digest).with_analysis() {
                Ok(d) => dispatch.emit(Action::Digest { file, digest: Rc::new(d) }),
                Err(e) => dispatch.emit(Action::Failed { file, error: e.to_string() }),
            }
            pump(inner_rc);
        }
        FromWorker::Text { file, kinds } => {
            done(file, false);
            let bytes = extra.dyn_into::<js_sys::Uint8Array>().map(|b| b.to_vec()).unwrap_or_default();
            dispatch.emit(Action::Text { file, kinds, bytes: Rc::new(bytes) });
            pump(inner_rc);
        }
        FromWorker::Answer { id, req, answer } => {
            let reply = {
                let mut inner = inner_rc.borrow_mut();
                if answer.is_final() {
                    inner.pending.remove(&req)
                } else {
                    inner.pending.get(&req).cloned()
                }
            };
            if let Some((_, reply)) = reply.filter(|(r, _)| *r == id) {
                reply(id, answer, extra);
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
        FromWorker::Piece { file, index: piece, range } => {
            hand_piece(inner_rc, PieceFrom { owner: index, file, piece, range }, extra)
        }
        // Only the warm-up's and a baseline's own workers send them (`warm.rs`, `baseline.rs`).
        FromWorker::Warmed { .. } | FromWorker::Baseline { .. } => {}
        FromWorker::Parsed { file, index: piece, ok } => {
            let mut inner = inner_rc.borrow_mut();
            inner.away.remove(&(file, piece));
            let owner = inner.holder.get(&file).copied();
            if let Some(s) = owner.and_then(|o| inner.slots.get_mut(o)) {
                send(s, message(&ToWorker::Parsed { file, index: piece, ok }, Some(&extra)));
            }
        }
    }
}

/// Stops the worker in slot `index` when it holds no file and parses no piece: after a job
/// digest, whose whole analysis went to the page, its wasm memory still holds the peak of the
/// decode (the file, the inflated analysis line, the parts: ~1 GB for 1,024 ranks × 100 steps),
/// and wasm memory never shrinks. The next load starts a fresh worker.
fn retire_if_idle(inner_rc: &Rc<RefCell<Inner>>, index: usize) {
    let mut inner = inner_rc.borrow_mut();
    let holds = inner.holder.values().any(|&s| s == index) || inner.away.values().any(|&s| s == index);
    if let Some(s) = inner.slots.get_mut(index).filter(|s| !holds && s.busy.is_none() && !s.dead) {
        s.worker.terminate();
        s.dead = true;
    }
}

/// A piece `(file, piece)` posted by the worker in slot `owner`.
struct PieceFrom {
    owner: usize,
    file: FileId,
    piece: u32,
    /// Where the piece lies in the file sent beside it (none: its text is sent).
    range: Option<(u64, u64)>,
}

/// Hands a piece to the other worker with the fewest pieces away (an idle one first), starting
/// one while fewer than the most run; with no other worker, the owner parses it itself.
fn hand_piece(inner_rc: &Rc<RefCell<Inner>>, p: PieceFrom, bytes: JsValue) {
    let mut inner = inner_rc.borrow_mut();
    let load = |inner: &Inner, i: usize| {
        let away = inner.away.values().filter(|&&s| s == i).count();
        (inner.slots[i].busy.is_some(), away)
    };
    let live: Vec<usize> = (0..inner.slots.len()).filter(|&i| !inner.slots[i].dead).collect();
    let best = live.iter().copied().filter(|&i| i != p.owner).min_by_key(|&i| load(&inner, i));
    let idle = best.is_some_and(|i| load(&inner, i) == (false, 0));
    let helper = if !idle && live.len() < inner.max {
        let index = inner.slots.len();
        match spawn(inner_rc, index) {
            Ok(s) => {
                inner.slots.push(s);
                index
            }
            Err(_) => best.unwrap_or(p.owner),
        }
    } else {
        best.unwrap_or(p.owner)
    };
    inner.away.insert((p.file, p.piece), helper);
    let msg = message(&ToWorker::Parse { file: p.file, index: p.piece, range: p.range }, Some(&bytes));
    send(&mut inner.slots[helper], msg);
}

/// A worker died (a panic in its wasm, an allocation beyond the browser's memory, or it could
/// not load). The file it was reading fails with the reason and is not read again (it may be
/// what killed the worker); the files whose tables it held are read again by the other workers
/// (or a new one), so their rows, lanes and exports come back; an export waiting for one of
/// their pieces is told at once instead of waiting forever.
fn on_worker_error(inner_rc: &Rc<RefCell<Inner>>, index: usize, text: String) {
    let ((busy, unreadable), reload, orphans, dispatch) = {
        let mut inner = inner_rc.borrow_mut();
        let Some(s) = inner.slots.get_mut(index) else { return };
        s.worker.terminate();
        s.dead = true;
        let busy = s.busy.take();
        let held: Vec<FileId> = inner.holder.iter().filter(|(_, &v)| v == index).map(|(&f, _)| f).collect();
        inner.holder.retain(|_, &mut v| v != index);
        // Pieces it was parsing come back as doubts: their reader reads its file again alone.
        let lost: Vec<(FileId, u32)> =
            inner.away.iter().filter(|(_, &v)| v == index).map(|(&k, _)| k).collect();
        for (file, piece) in lost {
            inner.away.remove(&(file, piece));
            if let Some(o) = inner.holder.get(&file).copied() {
                let msg = message(&ToWorker::Parsed { file, index: piece, ok: false }, None);
                send(&mut inner.slots[o], msg);
            }
        }
        if let Some(b) = busy {
            inner.fatal.insert(b);
            inner.loads.remove(&b);
        }
        let mut reload = Vec::new();
        let mut unreadable = Vec::new();
        // Questions the dead worker will never answer.
        let orphan_reqs: Vec<u32> =
            inner.pending.iter().filter(|(_, (id, _))| held.contains(&id.file)).map(|(&r, _)| r).collect();
        let orphans: Vec<(RankId, Reply)> =
            orphan_reqs.iter().filter_map(|r| inner.pending.remove(r)).collect();
        for f in held.into_iter().filter(|f| Some(*f) != busy) {
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
            orphans,
            inner.dispatch.clone(),
        )
    };
    web_sys::console::error_1(&format!("rankscope worker {index} died: {text}").into());
    for file in reload {
        dispatch.emit(Action::Lost { file });
    }
    for (id, reply) in orphans {
        reply(id, Answer::Failed(format!("the worker holding file {} stopped ({text}); it is being read again: ask again once it is back", id.file)), JsValue::UNDEFINED);
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
