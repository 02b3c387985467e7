//! The embedding protocol: a host page (a dashboard, a job page) that shows rankscope in an
//! `<iframe>` (or opened it with `window.open`) hands it traces and steers it with
//! `postMessage`, modelled on the Perfetto UI's. docs/embedding.md is the reference; in short:
//!
//! ```text
//! host → frame  'PING'                                   until the frame answers 'PONG'
//! frame → host  'PONG'                                   once it can take files
//! host → frame  {rankscope: {files: [{name, buffer}], title?}}     buffers transferred
//!               {rankscope: {files: [{name, stream, size?}]}}       a ReadableStream, transferred
//!               {rankscope: {show: {view, rank?, step?, t0_ns?, t1_ns?}}}
//!               {rankscope: {baseline: {name, buffer}}}  a job digest or a saved analysis
//! frame → host  {rankscope: {event: 'progress', done, total, files}}
//!               {rankscope: {event: 'analysis', report, json}}      `rankscope analyze --json`
//!               {rankscope: {event: 'comparison', base, diff, json}}  `rankscope diff --json`
//!               {rankscope: {event: 'selection', rank, t0_ns, t1_ns, name?, file, start_ns, end_ns}}
//!               {rankscope: {event: 'error', file, message}}
//! ```
//!
//! **Origins.** A message is acted on only when its `origin` is trusted ([`Page::trusts`]: the
//! page's own origin and those named by `?origin=`); anything else is ignored and counted
//! (`Action::Untrusted`, shown in Diagnostics and on the waiting page). Replies and events go
//! to the window that last spoke to us from a trusted origin, addressed to exactly that origin,
//! never `'*'`.
//!
//! **Times** (`t0_ns`, `t1_ns`) are the timeline's: ns since the job's first event, on the
//! aligned clock (as `t0`/`t1` in the URL hash), sent as JS numbers (exact below 2^53 ns, 104
//! days); `start_ns`/`end_ns` of a selection are on the rank's own clock, as in the trace, and
//! sent as decimal strings (epoch nanoseconds do not fit a JS number). Numbers the host sends
//! may be JS numbers, BigInts or decimal strings. In a `comparison`'s `diff` every `*_ns`
//! integer is a decimal string ([`ns_as_strings`]); its `json` is the CLI's text.
//!
//! **A baseline** goes the Compare view's way: `baseline.rs` reads it in a worker of its own and
//! the reducer compares it with the job (`state/compared.rs`); each new comparison is posted.
//!
//! Nothing here reaches the network: the traces come in as bytes and stay in the tab.

use std::cell::RefCell;
use std::rc::Rc;

use js_sys::{Array, Reflect};
use serde_json::json;
use wasm_bindgen::prelude::*;
use wasm_bindgen::JsCast;
use web_sys::{MessageEvent, ReadableStream, Window};
use yew::prelude::*;

use crate::host::Page;
use crate::state::{Action, FileStatus, JobView, State, View};
use crate::views::Listener;

/// A file handed over by a host page.
#[derive(Debug, Clone)]
pub enum Source {
    File(web_sys::File),
    Stream { name: String, size: u64, stream: ReadableStream },
}

/// Where the protocol's answers go: the window that last spoke from a trusted origin.
#[derive(Debug, Clone)]
struct Peer {
    window: Window,
    origin: String,
}

/// What a host page asked to see.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Show {
    pub view: Option<View>,
    pub rank: Option<u32>,
    pub step: Option<u32>,
    pub t0_ns: Option<i64>,
    pub t1_ns: Option<i64>,
}

/// A field of a message, `None` when it is absent (`undefined` or `null`).
fn field(o: &JsValue, k: &str) -> Option<JsValue> {
    Reflect::get(o, &k.into()).ok().filter(|v| !v.is_undefined() && !v.is_null())
}

/// An integer as a message may give it: a JS number (whole), a BigInt or a decimal string.
fn int_of(v: &JsValue) -> Option<i64> {
    if let Some(f) = v.as_f64() {
        return (f.is_finite() && f.fract() == 0.0).then_some(f as i64);
    }
    if v.is_bigint() {
        return js_sys::BigInt::unchecked_from_js(v.clone())
            .to_string(10)
            .ok()
            .and_then(|s| String::from(s).parse().ok());
    }
    v.as_string().and_then(|s| s.trim().parse().ok())
}

/// A number field of a message: a JS number, a BigInt or a decimal string.
fn int_field(o: &JsValue, k: &str) -> Option<i64> {
    field(o, k).as_ref().and_then(int_of)
}

fn str_field(o: &JsValue, k: &str) -> Option<String> {
    Reflect::get(o, &k.into()).ok().and_then(|v| v.as_string())
}

/// A value as the host wrote it, for an error message (`5`, `"x"`, `[1,2]`).
fn shown(v: &JsValue) -> String {
    js_sys::JSON::stringify(v)
        .ok()
        .and_then(|s| s.as_string())
        .unwrap_or_else(|| v.js_typeof().as_string().unwrap_or_default())
}

/// Reads a `show` request: an object whose fields, each when present, are what
/// docs/embedding.md says; anything else is an error the host is told about (a `show` that
/// silently did nothing would leave the host page guessing).
fn parse_show(o: &JsValue) -> Result<Show, String> {
    const WANT: &str = "{view?, rank?, step?, t0_ns?, t1_ns?}";
    if !o.is_object() || Array::is_array(o) {
        return Err(format!("show: expected an object {WANT}, got {}", shown(o)));
    }
    let view = match field(o, "view") {
        None => None,
        Some(v) => {
            let name = v.as_string().unwrap_or_else(|| shown(&v));
            Some(View::from_name(&name).ok_or_else(|| {
                let names: Vec<&str> = View::ALL.iter().map(|v| v.name()).collect();
                format!("show: unknown view `{name}` (one of {})", names.join(", "))
            })?)
        }
    };
    let int = |k: &str| -> Result<Option<i64>, String> {
        match field(o, k) {
            None => Ok(None),
            Some(v) => int_of(&v).map(Some).ok_or_else(|| {
                format!(
                    "show: `{k}` must be an integer (number, BigInt or decimal string), got {}",
                    shown(&v)
                )
            }),
        }
    };
    let index = |k: &str| -> Result<Option<u32>, String> {
        int(k)?
            .map(|v| {
                u32::try_from(v).map_err(|_| format!("show: `{k}` must be from 0 to {}, got {v}", u32::MAX))
            })
            .transpose()
    };
    let show =
        Show { view, rank: index("rank")?, step: index("step")?, t0_ns: int("t0_ns")?, t1_ns: int("t1_ns")? };
    match (show.t0_ns, show.t1_ns) {
        (Some(a), Some(b)) if b <= a => {
            return Err(format!("show: `t1_ns` ({b}) must be after `t0_ns` ({a})"))
        }
        (Some(_), None) | (None, Some(_)) => return Err("show: `t0_ns` and `t1_ns` go together".into()),
        _ => {}
    }
    if show.step.is_some() && show.rank.is_none() {
        return Err("show: `step` needs `rank` (a step is opened on one rank's timeline)".into());
    }
    if show == Show::default() {
        return Err(format!("show: nothing to show, expected {WANT}"));
    }
    Ok(show)
}

/// Reads a `files` request: every entry a `{name, buffer}` (an `ArrayBuffer` or a view of one) or
/// a `{name, stream, size?}`.
fn parse_files(list: &JsValue) -> Result<Vec<Source>, String> {
    let list: &Array = list.dyn_ref().ok_or("files: expected an array of {name, buffer | stream}")?;
    let mut out = Vec::new();
    for (k, f) in list.iter().enumerate() {
        let name = str_field(&f, "name").filter(|n| !n.is_empty()).unwrap_or_else(|| format!("file{k}.json"));
        let buffer = Reflect::get(&f, &"buffer".into()).unwrap_or(JsValue::UNDEFINED);
        let stream = Reflect::get(&f, &"stream".into()).unwrap_or(JsValue::UNDEFINED);
        if let Some(s) = stream.dyn_ref::<ReadableStream>() {
            let size = int_field(&f, "size").and_then(|v| u64::try_from(v).ok()).unwrap_or(0);
            out.push(Source::Stream { name, size, stream: s.clone() });
        } else if buffer.is_instance_of::<js_sys::ArrayBuffer>() || js_sys::ArrayBuffer::is_view(&buffer) {
            let file = web_sys::File::new_with_buffer_source_sequence(&Array::of1(&buffer), &name)
                .map_err(|e| format!("{name}: {}", crate::worker::js_text(&e)))?;
            out.push(Source::File(file));
        } else {
            return Err(format!("{name}: neither a buffer (ArrayBuffer) nor a stream (ReadableStream)"));
        }
    }
    if out.is_empty() {
        return Err("files: the list is empty".into());
    }
    Ok(out)
}

/// Reads a `baseline` request: `{name?, buffer}`, the bytes of a job digest (`rankscope combine
/// --digest`) or of a saved `rankscope analyze --json`, as a `File` for `baseline.rs`.
fn parse_baseline(b: &JsValue) -> Result<web_sys::File, String> {
    const WANT: &str = "{name?, buffer} (a job digest or a saved `rankscope analyze --json`)";
    if !b.is_object() || Array::is_array(b) {
        return Err(format!("baseline: expected an object {WANT}, got {}", shown(b)));
    }
    let name = str_field(b, "name").filter(|n| !n.is_empty()).unwrap_or_else(|| "baseline".into());
    let buffer = Reflect::get(b, &"buffer".into()).unwrap_or(JsValue::UNDEFINED);
    if !(buffer.is_instance_of::<js_sys::ArrayBuffer>() || js_sys::ArrayBuffer::is_view(&buffer)) {
        return Err(format!(
            "baseline: {name}: `buffer` must be an ArrayBuffer (or a view of one), expected {WANT}"
        ));
    }
    web_sys::File::new_with_buffer_source_sequence(&Array::of1(&buffer), &name)
        .map_err(|e| format!("baseline: {name}: {}", crate::worker::js_text(&e)))
}

/// Every integer under a key ending in `_ns` (and in an array under one) as a decimal string:
/// what the protocol sends 64-bit times as (a JS number rounds past 2^53).
pub fn ns_as_strings(v: &mut serde_json::Value, ns: bool) {
    use serde_json::Value;
    match v {
        Value::Number(n) if ns && (n.is_i64() || n.is_u64()) => *v = Value::String(n.to_string()),
        Value::Array(a) => a.iter_mut().for_each(|x| ns_as_strings(x, ns)),
        Value::Object(o) => o.iter_mut().for_each(|(k, x)| ns_as_strings(x, k.ends_with("_ns"))),
        _ => {}
    }
}

/// The `comparison` event: `rankscope diff --json` of the baseline (base) and the job (new), as
/// its text and as a value whose `*_ns` integers are decimal strings.
fn comparison_event(c: &crate::state::Compared) -> JsValue {
    let text = rankscope_core::compare::render::json(&c.comparison);
    let mut diff: serde_json::Value = serde_json::from_str(&text).unwrap_or_default();
    ns_as_strings(&mut diff, false);
    event(json!({ "event": "comparison", "base": c.base_name, "diff": diff, "json": text }))
}

/// `{rankscope: {event, …}}` as a JS value (the JSON text parsed, so numbers are JS numbers).
fn event(body: serde_json::Value) -> JsValue {
    let text = json!({ "rankscope": body }).to_string();
    js_sys::JSON::parse(&text).unwrap_or(JsValue::NULL)
}

fn post(peer: &Option<Peer>, msg: &JsValue) {
    if let Some(p) = peer {
        if let Err(e) = p.window.post_message(msg, &p.origin) {
            web_sys::console::error_2(&"rankscope: cannot post to the host page".into(), &e);
        }
    }
}

/// Applies a `show` to the state (a step needs the job: it is kept until the job is there).
fn apply_show(show: &Show, job: &JobView, dispatch: &Callback<Action>) {
    if let (Some(rank), Some(step)) = (show.rank, show.step) {
        let row = job
            .analysis
            .steps
            .iter()
            .find(|s| s.step == step)
            .and_then(|s| s.per_rank.iter().find(|r| r.rank == rank));
        if let (Some(r), Some(id)) = (row, job.id_of(rank)) {
            dispatch.emit(Action::Open { id, step: Some(step), start_ns: r.start_ns, end_ns: r.end_ns });
        }
    } else if show.rank.is_some() {
        dispatch.emit(Action::SetFocus(show.rank, None));
    }
    if let (Some(a), Some(b)) = (show.t0_ns, show.t1_ns) {
        if b > a {
            dispatch.emit(Action::SetAligned(true));
            dispatch.emit(Action::SetWindow(Some((a, b))));
        }
    }
    if let Some(v) = show.view {
        dispatch.emit(Action::SetView(v));
    }
}

fn status_name(s: &FileStatus) -> &'static str {
    match s {
        FileStatus::Queued => "queued",
        FileStatus::Loading { .. } => "loading",
        FileStatus::Ready => "ready",
        FileStatus::Failed(_) => "failed",
        FileStatus::Cancelled => "cancelled",
    }
}

/// Least time between two `progress` events unless a file finished.
const PROGRESS_MS: f64 = 200.0;

fn now_ms() -> f64 {
    web_sys::window().and_then(|w| w.performance()).map_or(0.0, |p| p.now())
}

/// The app's memory of the protocol: the peer answers go to, the job a `show` applies to, and a
/// `show` that waits for the job.
type Memory<'a> = (&'a RefCell<Option<Peer>>, &'a RefCell<Option<Rc<JobView>>>, &'a RefCell<Option<Show>>);

/// Runs the protocol for the app: listens for host messages, opens what they hand over with
/// `open`, and tells the host page what happens.
#[hook]
pub fn use_embed(
    page: Rc<Page>,
    state: &State,
    dispatch: Callback<Action>,
    open: Callback<(Vec<Source>, Option<String>)>,
) {
    let peer: Rc<RefCell<Option<Peer>>> = use_mut_ref(|| None);
    let job: Rc<RefCell<Option<Rc<JobView>>>> = use_mut_ref(|| None);
    let pending: Rc<RefCell<Option<Show>>> = use_mut_ref(|| None);

    {
        let (peer, job, pending, dispatch) = (peer.clone(), job.clone(), pending.clone(), dispatch.clone());
        use_effect_with((), move |_| {
            let l = web_sys::window().map(|w| {
                Listener::new(w.into(), "message", move |e| {
                    on_message(&page, (&peer, &job, &pending), &dispatch, &open, &e)
                })
            });
            move || drop(l)
        });
    }

    // A new job: forget the old one (a `show` waits for the new one).
    {
        let job = job.clone();
        use_effect_with(state.assemblies, move |_| {
            *job.borrow_mut() = None;
        });
    }

    // Progress and errors, as files move.
    {
        let peer = peer.clone();
        let last: Rc<RefCell<Progress>> = use_mut_ref(|| (f64::NEG_INFINITY, usize::MAX, Vec::new()));
        use_effect_with(state.files.clone(), move |files| {
            post_progress(&peer.borrow(), &mut last.borrow_mut(), files);
        });
    }

    // The analysis, once per job; then a `show` that waited for it.
    {
        let (peer, job, pending, dispatch) = (peer.clone(), job.clone(), pending.clone(), dispatch.clone());
        let ready = state.ready().then(|| state.job.clone()).flatten();
        use_effect_with(ready, move |ready| {
            if let Some(j) = ready {
                *job.borrow_mut() = Some(j.clone());
                // The report is built only for a host page to post it to (it is the whole
                // analysis as JSON: on 8 ranks of 240 MB, 0.1 s of the page's main thread).
                if !j.ranks.is_empty() && peer.borrow().is_some() {
                    post(&peer.borrow(), &analysis_event(j));
                }
                if let Some(s) = pending.borrow_mut().take() {
                    apply_show(&s, j, &dispatch);
                }
            }
        });
    }

    // The job compared with a baseline: each new comparison; a baseline that could not be read.
    {
        let peer = peer.clone();
        use_effect_with(state.compared.clone(), move |c| {
            if let Some(c) = c {
                post(&peer.borrow(), &comparison_event(c));
            }
        });
    }
    {
        let peer = peer.clone();
        use_effect_with(state.baseline.clone(), move |b| {
            if let Some(crate::state::Baseline::Failed { name, error }) = b {
                // `file` names it: the message says the rest (the Compare view shows it whole).
                let message = error.strip_prefix(&format!("{name}: ")).unwrap_or(error);
                post(&peer.borrow(), &event(json!({ "event": "error", "file": name, "message": message })));
            }
        });
    }

    // Clicks.
    {
        let peer = peer.clone();
        let sel = state.selection.clone();
        let job = state.job.clone();
        use_effect_with(state.selections, move |_| {
            if let (Some(s), Some(j)) = (sel, job) {
                post(&peer.borrow(), &selection_event(s, &j));
            }
        });
    }
}

/// A message to the window: from a trusted origin (else counted), a `PING` is answered and
/// `{rankscope: …}` is read by [`on_request`]; the Perfetto UI's answers and other messages are
/// ignored.
fn on_message(
    page: &Page,
    (peer, job, pending): Memory,
    dispatch: &Callback<Action>,
    open: &Callback<(Vec<Source>, Option<String>)>,
    e: &web_sys::Event,
) {
    let Some(ev) = e.dyn_ref::<MessageEvent>() else { return };
    let origin = ev.origin();
    // A cross-origin window is no `instanceof Window` here: take it as one unchecked
    // (only `postMessage` is called on it, which any window allows).
    let source = ev.source().map(|s| s.unchecked_into::<Window>());
    // The Perfetto UI we opened answers our PINGs: that is not a host page.
    if source.as_ref().is_some_and(crate::perfetto::is_ours) {
        return;
    }
    if !page.trusts(&origin) {
        dispatch.emit(Action::Untrusted(origin));
        return;
    }
    let data = ev.data();
    let Some(source) = source else { return };
    let me = Some(Peer { window: source, origin });
    if data.as_string().as_deref() == Some("PING") {
        post(&me, &JsValue::from_str("PONG"));
        *peer.borrow_mut() = me;
        return;
    }
    let Ok(body) = Reflect::get(&data, &"rankscope".into()) else { return };
    if body.is_undefined() || body.is_null() {
        return; // someone else's message on the same channel
    }
    *peer.borrow_mut() = me.clone();
    on_request(&body, &me, (job, pending), dispatch, open);
}

/// A `{rankscope: {files?, show?, baseline?}}` from the peer `me`: files are opened, a `show`
/// applied (or kept until the job is there), a baseline read to compare the job with; what
/// cannot be read is answered with an `error` event.
fn on_request(
    body: &JsValue,
    me: &Option<Peer>,
    (job, pending): (&RefCell<Option<Rc<JobView>>>, &RefCell<Option<Show>>),
    dispatch: &Callback<Action>,
    open: &Callback<(Vec<Source>, Option<String>)>,
) {
    let files = Reflect::get(body, &"files".into()).unwrap_or(JsValue::UNDEFINED);
    let show = Reflect::get(body, &"show".into()).unwrap_or(JsValue::UNDEFINED);
    let baseline = Reflect::get(body, &"baseline".into()).unwrap_or(JsValue::UNDEFINED);
    let fail =
        |message: String| post(me, &event(json!({ "event": "error", "file": null, "message": message })));
    if !files.is_undefined() {
        match parse_files(&files) {
            Ok(sources) => open.emit((sources, str_field(body, "title"))),
            Err(m) => fail(m),
        }
    }
    if !show.is_undefined() {
        match parse_show(&show) {
            Ok(s) => match job.borrow().as_ref() {
                Some(j) if files.is_undefined() => apply_show(&s, j, dispatch),
                _ => *pending.borrow_mut() = Some(s),
            },
            Err(m) => fail(m),
        }
    }
    if !baseline.is_undefined() {
        match parse_baseline(&baseline) {
            Ok(file) => crate::baseline::open(file, dispatch.clone()),
            Err(m) => fail(m),
        }
    }
    if files.is_undefined() && show.is_undefined() && baseline.is_undefined() {
        fail("a rankscope message needs `files`, `show` or `baseline`".into());
    }
}

/// What the last `progress` event said: when (ms), how many files were done, and the files
/// whose failure was posted.
type Progress = (f64, usize, Vec<u32>);

/// Posts the files' failures (each once) and their progress (when a file finished, or at most
/// every [`PROGRESS_MS`]); no files: a new start.
fn post_progress(peer: &Option<Peer>, l: &mut Progress, files: &[crate::state::FileEntry]) {
    if files.is_empty() {
        *l = (f64::NEG_INFINITY, usize::MAX, Vec::new());
        return;
    }
    let done = files.iter().filter(|f| f.status.is_done()).count();
    if done == 0 {
        // A new job (ids start again at 0): its failures are new.
        l.2.clear();
    }
    for f in files {
        if let FileStatus::Failed(m) = &f.status {
            if !l.2.contains(&f.id) {
                l.2.push(f.id);
                post(peer, &event(json!({ "event": "error", "file": f.name, "message": m })));
            }
        }
    }
    let t = now_ms();
    if done != l.1 || t - l.0 >= PROGRESS_MS {
        l.0 = t;
        l.1 = done;
        let list: Vec<serde_json::Value> = files
            .iter()
            .map(|f| {
                let (bytes, events) = match &f.status {
                    FileStatus::Loading { input_bytes, events, .. } => (*input_bytes, *events),
                    FileStatus::Ready => (f.size, f.events()),
                    _ => (0, 0),
                };
                json!({ "name": f.name, "status": status_name(&f.status), "size": f.size, "bytes": bytes, "events": events })
            })
            .collect();
        post(peer, &event(json!({ "event": "progress", "done": done, "total": files.len(), "files": list })));
    }
}

/// The `analysis` event: the report (`rankscope analyze --json`) as a value and as its text.
fn analysis_event(j: &JobView) -> JsValue {
    let dumps = j.flight_recorder.as_deref().map(crate::state::FlightRecorder::as_input);
    let text = rankscope_core::analyze::report::json(&j.analysis, dumps);
    let report = js_sys::JSON::parse(&text).unwrap_or(JsValue::NULL);
    let msg = event(json!({ "event": "analysis" }));
    if let Ok(body) = Reflect::get(&msg, &"rankscope".into()) {
        let _ = Reflect::set(&body, &"report".into(), &report);
        let _ = Reflect::set(&body, &"json".into(), &JsValue::from_str(&text));
    }
    msg
}

/// The `selection` event of a click: the rank and file, the window on the timeline's clock and
/// the event's times on the rank's own.
fn selection_event(s: crate::state::Selection, j: &JobView) -> JsValue {
    let rank = j.ranks.iter().find(|(id, _)| *id == s.id).map(|(_, r)| r.rank);
    let file = j.ranks.iter().find(|(id, _)| *id == s.id).map(|(_, r)| r.file.clone());
    let at = |t: i64| t - j.offset(s.id) - j.facts.span_start_ns;
    // `start_ns`/`end_ns` are epoch nanoseconds (past 2^53: a JS number would round them), so
    // they go as decimal strings; `t0_ns`/`t1_ns` count from the job's first event and stay exact
    // as numbers (2^53 ns is 104 days).
    let mut body = json!({
        "event": "selection", "rank": rank, "file": file,
        "t0_ns": at(s.start_ns), "t1_ns": at(s.end_ns),
        "start_ns": s.start_ns.to_string(), "end_ns": s.end_ns.to_string(),
    });
    if let Some(n) = s.name {
        body["name"] = json!(n);
    }
    event(body)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_go_as_decimal_strings_and_nothing_else_changes() {
        let mut v = json!({
            "schema": "rankscope.diff/1",
            "step_time": {"floor_ns": 1_000_000, "ratio": 0.5, "shift": {"delta_ns": 9_007_199_254_740_993_i64, "n_base": 5}},
            "verdict": {"deltas_ns": [-3, 4], "waiting_ranks": [1, 2], "line": "x"},
        });
        ns_as_strings(&mut v, false);
        assert_eq!(v["step_time"]["floor_ns"], "1000000");
        assert_eq!(v["step_time"]["shift"]["delta_ns"], "9007199254740993");
        assert_eq!(v["step_time"]["shift"]["n_base"], 5);
        assert_eq!(v["step_time"]["ratio"], 0.5);
        assert_eq!(v["verdict"]["deltas_ns"], json!(["-3", "4"]));
        assert_eq!(v["verdict"]["waiting_ranks"], json!([1, 2]));
    }
}
