//! Exports, built in this tab and saved through the browser (never uploaded): the analysis as
//! JSON (`rankscope analyze --json`), CSV (`--csv`) and Markdown (`--md`), and the merged, aligned
//! Chrome trace of every rank (`--merged-trace`). The job's export plan (`JobView::export`, the
//! CLI's `export::ExportPlan`) says which ranks, in which order, under which rank and offset;
//! each worker writes its own rank's piece as the plan says, and the pieces arrive as byte
//! arrays and become one `Blob` with the plan's head and tail: the file is never one JS string.
//!
//! The Perfetto archive (`--perfetto`) is made the same way, each worker writing its rank's
//! member; it is saved, or, on an explicit click after the page says where it goes, posted to a
//! Perfetto UI in a new tab ([`crate::perfetto`]).
//!
//! The tables of `rankscope export` ("Tables (Parquet)", "Tables (Arrow)") are one tar made the
//! same way: the analysis' tables here, the events rank by rank by the workers
//! ([`super::table_export`]).
//!
//! Both trace exports keep every event's source `args`, verbatim, as the CLI's do (the same
//! bytes for the same input): the workers parse without them and read a file again for them on
//! its first trace export (`worker::args`), so a load holds no args arena. A file a host page
//! streamed cannot be read again: its events are written with their ids and `args.rankscope`.

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::rc::Rc;

use js_sys::{Array, Uint8Array};
use rankscope_core::analyze::report;
use wasm_bindgen::JsCast;
use web_sys::HtmlInputElement;
use yew::prelude::*;

use super::table_export::{Redaction, TablesExport};
use super::Ctx;
use crate::download;
use crate::protocol::{Answer, Query, RankId};
use crate::state::JobView;
use rankscope_core::export::columnar::Format;

#[derive(Properties, PartialEq, Debug)]
pub struct Props {
    pub job: Rc<JobView>,
}

/// What a trace export becomes.
#[derive(Default)]
enum Kind {
    /// The merged Chrome trace: header, every rank's events, footer (`tail`).
    #[default]
    Merged,
    /// The Perfetto archive: every rank's member, then the manifest and the end (`tail`),
    /// saved or handed to a Perfetto tab.
    Perfetto { tail: Vec<u8>, to: Option<(web_sys::Window, String)> },
}

/// A merged-trace or Perfetto-archive export in progress.
#[derive(Default)]
struct TraceExport {
    req: u32,
    kind: Kind,
    /// Ranks in rank order (the worker holding each writes its piece).
    order: Vec<RankId>,
    pieces: BTreeMap<RankId, Vec<Uint8Array>>,
    done: usize,
    /// Ranks in the export (for the Perfetto tab's title).
    order_len: usize,
    header: Vec<u8>,
    /// The merged trace's footer.
    tail: Vec<u8>,
    failed: bool,
}

/// What the export bar says.
#[derive(Debug, Clone, PartialEq)]
enum Status {
    Idle,
    Writing {
        /// What is being written ("the merged trace", "the tables").
        what: &'static str,
        done: usize,
        of: usize,
    },
    /// Waiting for the Perfetto tab (its origin) to answer.
    Sending(String),
    Saved(String),
    /// Posted to a Perfetto UI (its origin).
    Sent(String),
    Failed(String),
}

/// Hands the archive's parts to the Perfetto tab once it answers.
fn send(parts: Array, win: web_sys::Window, origin: String, ranks: usize, status: UseStateHandle<Status>) {
    let blob = match web_sys::Blob::new_with_u8_array_sequence(&parts) {
        Ok(b) => b,
        Err(e) => return status.set(Status::Failed(crate::worker::js_text(&e))),
    };
    status.set(Status::Sending(origin.clone()));
    wasm_bindgen_futures::spawn_local(async move {
        let buffer = match wasm_bindgen_futures::JsFuture::from(blob.array_buffer()).await {
            Ok(b) => b.unchecked_into::<js_sys::ArrayBuffer>(),
            Err(e) => return status.set(Status::Failed(crate::worker::js_text(&e))),
        };
        let title = format!("rankscope job - {ranks} ranks");
        let o = origin.clone();
        crate::perfetto::deliver(win, origin, buffer, title, move |r| {
            status.set(match r {
                Ok(()) => Status::Sent(o.clone()),
                Err(e) => Status::Failed(e),
            })
        });
    });
}

fn save(text: &str, mime: &str, name: &str) -> Status {
    match download::save_text(text, mime, name) {
        Ok(()) => Status::Saved(name.to_string()),
        Err(e) => Status::Failed(crate::worker::js_text(&e)),
    }
}

/// Pieces of an export: `(rank, req, Ok((bytes, last)) | Err(why))`.
type ExportSink = Rc<dyn Fn(RankId, u32, Result<(Uint8Array, bool), String>)>;

/// The pool's reply for one export request: its pieces, or why there are none, to the sink.
fn reply_to(sink: &Rc<RefCell<Option<ExportSink>>>, req: u32) -> crate::pool::Reply {
    let sink = sink.clone();
    Rc::new(move |id, answer, extra| {
        let Some(s) = sink.borrow().clone() else { return };
        match answer {
            Answer::Chunk { last } => match extra.dyn_into::<Uint8Array>() {
                Ok(bytes) => s(id, req, Ok((bytes, last))),
                Err(_) => s(id, req, Err("a piece of the export came without its bytes".into())),
            },
            Answer::Failed(e) => s(id, req, Err(e)),
            _ => {}
        }
    })
}

#[function_component(Exports)]
pub fn exports(p: &Props) -> Html {
    let ctx = use_context::<Ctx>();
    let status = use_state(|| Status::Idle);
    let trace: Rc<RefCell<TraceExport>> = use_mut_ref(TraceExport::default);
    let sink: Rc<RefCell<Option<ExportSink>>> = use_mut_ref(|| None);
    let tables: Rc<RefCell<TablesExport>> = use_mut_ref(TablesExport::default);

    // The pieces of the merged trace come back to this sink (see `reply_to`).
    {
        let trace = trace.clone();
        let status = status.clone();
        let cell = sink.clone();
        use_effect_with(p.job.clone(), move |_| {
            {
                let sink: ExportSink =
                    Rc::new(move |id, req, piece| on_piece(&mut trace.borrow_mut(), &status, id, req, piece));
                *cell.borrow_mut() = Some(sink);
            }
            move || {
                *cell.borrow_mut() = None;
            }
        });
    }

    let a = p.job.analysis.clone();
    let fr = p.job.flight_recorder.clone();
    let on_json = {
        let (a, status, fr) = (a.clone(), status.clone(), fr.clone());
        Callback::from(move |_| {
            let text = report::json(&a, fr.as_deref().map(crate::state::FlightRecorder::as_input));
            status.set(save(&text, "application/json", "rankscope-analysis.json"))
        })
    };
    let on_csv = {
        let (a, status) = (a.clone(), status.clone());
        Callback::from(move |_| status.set(save(&report::csv(&a), "text/csv", "rankscope-steps.csv")))
    };
    let on_md = {
        let (a, status, fr) = (a.clone(), status.clone(), fr.clone());
        Callback::from(move |_| {
            let text = rankscope_core::diagnose::markdown::with_dumps(
                &a,
                fr.as_deref().map(crate::state::FlightRecorder::as_input),
            );
            status.set(save(&text, "text/markdown", "rankscope-report.md"))
        })
    };
    let on_trace = {
        let (job, status, trace, sink) = (p.job.clone(), status.clone(), trace.clone(), sink.clone());
        let pool = ctx.as_ref().and_then(Ctx::pool);
        Callback::from(move |_| {
            let Some(pool) = &pool else { return };
            start_merged(pool, &job, &trace, &sink, &status);
        })
    };
    // The Perfetto archive: every rank's member from its worker, then the manifest.
    let start_perfetto = {
        let (job, status, trace, sink) = (p.job.clone(), status.clone(), trace.clone(), sink.clone());
        let pool = ctx.as_ref().and_then(Ctx::pool);
        move |to: Option<(web_sys::Window, String)>| {
            let Some(pool) = &pool else { return };
            start_archive(pool, &job, (&trace, &sink), &status, to);
        }
    };
    let on_tar = {
        let start = start_perfetto.clone();
        Callback::from(move |_| start(None))
    };
    // "redact names": the tables' names replaced by tokens under the key typed, or one drawn
    // for this export (`rankscope export --redact-key` / `--redact`).
    let redact = use_state(|| false);
    let redact_key = use_state(String::new);
    let on_redact = {
        let redact = redact.clone();
        Callback::from(move |e: Event| {
            if let Some(el) = e.target_dyn_into::<HtmlInputElement>() {
                redact.set(el.checked());
            }
        })
    };
    let on_redact_key = {
        let redact_key = redact_key.clone();
        Callback::from(move |e: InputEvent| {
            if let Some(el) = e.target_dyn_into::<HtmlInputElement>() {
                redact_key.set(el.value());
            }
        })
    };
    let on_tables = |format: Format| {
        let (job, status, tables) = (p.job.clone(), status.clone(), tables.clone());
        let (redact, redact_key) = (redact.clone(), redact_key.clone());
        let pool = ctx.as_ref().and_then(Ctx::pool);
        Callback::from(move |_| {
            let key = (*redact).then(|| match redact_key.trim() {
                "" => Redaction { phrase: drawn_key(), drawn: true },
                k => Redaction { phrase: k.to_string(), drawn: false },
            });
            start_tables(pool.as_ref(), &job, format, key, &tables, &status)
        })
    };
    let confirm = use_state(|| false);
    let ui = use_state(|| crate::host::Page::current().perfetto_ui());
    let on_ask = {
        let confirm = confirm.clone();
        Callback::from(move |_| confirm.set(!*confirm))
    };
    let ui_origin = crate::host::origin_of(&ui);
    let on_send = {
        let (confirm, ui, status) = (confirm.clone(), ui.clone(), status.clone());
        let origin = ui_origin.clone();
        Callback::from(move |_| {
            let Some(origin) = origin.clone() else { return };
            // The tab must open inside the click's handler, before any waiting.
            match crate::perfetto::open(&ui) {
                Some(win) => {
                    crate::host::remember_perfetto_ui(&ui);
                    confirm.set(false);
                    start_perfetto(Some((win, origin)));
                }
                None => status
                    .set(Status::Failed("the browser did not open a new tab (a pop-up blocker?)".into())),
            }
        })
    };
    let busy = matches!(*status, Status::Writing { .. } | Status::Sending(_));
    let events = events_held(&p.job);
    let tables_title = |format: &str| {
        let what = format!(
            "rankscope export --format {format}: a tar of steps, collectives, collective_stats, groups, findings, operators and events (collectives measured again from the ranks' parts)"
        );
        match &events {
            EventsHeld::All => what,
            EventsHeld::Some(note) => format!("{what} {note}"),
            EventsHeld::None(reason) => format!("{what}. No events table: {reason}"),
        }
    };
    let off = busy || matches!(events, EventsHeld::None(_));
    let why = |title: &str| match &events {
        EventsHeld::All => title.to_string(),
        EventsHeld::Some(note) => format!("{title} {note}"),
        EventsHeld::None(reason) => reason.clone(),
    };
    html! {
        <div class="exports" data-testid="exports">
            <span class="muted">{"Export (made in this tab, nothing is uploaded):"}</span>
            <button class="small" data-testid="export-json" onclick={on_json} title="rankscope analyze --json">{"Analysis JSON"}</button>
            <button class="small" data-testid="export-csv" onclick={on_csv} title="rankscope analyze --csv: the rank × step table">{"CSV"}</button>
            <button class="small" data-testid="export-md" onclick={on_md} title="rankscope analyze --md">{"Markdown"}</button>
            <button class="small" data-testid="export-trace" onclick={on_trace} disabled={off}
                title={why("Every rank in one Chrome trace on the aligned clock, for chrome://tracing and older viewers")}>{"Merged Chrome trace"}</button>
            <button class="small" data-testid="export-perfetto" onclick={on_tar} disabled={off}
                title={why("rankscope analyze --perfetto: a tar of one trace per rank and a perfetto_manifest.json with our alignment")}>{"Perfetto archive"}</button>
            <button class="small" data-testid="export-parquet" onclick={on_tables(Format::Parquet)} disabled={busy}
                title={tables_title("parquet")}>{"Tables (Parquet)"}</button>
            <button class="small" data-testid="export-arrow" onclick={on_tables(Format::Arrow)} disabled={busy}
                title={tables_title("arrow")}>{"Tables (Arrow)"}</button>
            <label class="redact-switch" title="Replace the user's names, paths, hosts and groups in the tables by keyed tokens (rankscope export --redact); every number stays. With a key of yours, the tokens are those of rankscope export --redact-key KEY; without, a key is drawn for this export.">
                <input type="checkbox" data-testid="export-redact" checked={*redact} onchange={on_redact} />
                {" redact names"}
            </label>
            if *redact {
                <input class="redact-key" type="text" data-testid="export-redact-key" placeholder="key (optional)"
                    aria-label="redaction key" autocomplete="off" spellcheck="false"
                    value={(*redact_key).clone()} oninput={on_redact_key} />
            }
            <button class="small" data-testid="open-perfetto" onclick={on_ask} disabled={off}
                title={why("Send the Perfetto archive to a Perfetto UI in a new tab (asks first)")}>{"Open in Perfetto…"}</button>
            { status_html(&status) }
            if *confirm {
                { perfetto_confirm(&ui, ui_origin.as_deref(), &confirm, on_send) }
            }
        </div>
    }
}

/// Whose events the trace exports (merged trace, Perfetto archive) can be made of: they are
/// written from the events the workers hold, and a job digest holds none.
#[derive(Debug, Clone, PartialEq)]
enum EventsHeld {
    All,
    /// Some ranks' (a digest with some traces dropped on it): what the export leaves out.
    Some(String),
    /// None: why the exports are off.
    None(String),
}

fn events_held(job: &JobView) -> EventsHeld {
    let (held, of) = (job.export_ids.len(), job.ranks.len());
    let digest = job.digest.as_deref();
    match digest {
        _ if held >= of => EventsHeld::All,
        Some(name) if held > 0 => EventsHeld::Some(format!(
            "(only the {held} of {of} ranks whose trace is loaded: {name} is a job digest, it holds no events)"
        )),
        Some(name) => EventsHeld::None(format!(
            "{name} is a job digest: it holds every rank's figures but no events, so there are none to export. \
             Drop the ranks' trace files on the page to export theirs."
        )),
        None if held > 0 => EventsHeld::Some(format!("(the {held} of {of} ranks whose events are loaded)")),
        None => EventsHeld::None("No rank's events are loaded: nothing to export as a trace.".into()),
    }
}

/// One piece of a trace export (for the current request, unless it failed already): kept until
/// every rank's last piece is in, then the file is assembled and saved or sent.
fn on_piece(
    t: &mut TraceExport,
    status: &UseStateHandle<Status>,
    id: RankId,
    req: u32,
    piece: Result<(Uint8Array, bool), String>,
) {
    if req != t.req || t.failed {
        return;
    }
    match piece {
        Err(e) => {
            t.failed = true;
            status.set(Status::Failed(e));
        }
        Ok((bytes, last)) => {
            t.pieces.entry(id).or_default().push(bytes);
            if !last {
                return;
            }
            t.done += 1;
            if t.done < t.order.len() {
                status.set(Status::Writing { what: "the merged trace", done: t.done, of: t.order.len() });
                return;
            }
            finish(t, status);
        }
    }
}

/// Every rank's pieces are in: the header, the pieces in rank order and the tail become the
/// merged trace or the Perfetto archive, saved or sent to the Perfetto tab.
fn finish(t: &mut TraceExport, status: &UseStateHandle<Status>) {
    let parts = Array::new();
    parts.push(&Uint8Array::from(&t.header[..]));
    let order = std::mem::take(&mut t.order);
    for f in &order {
        for b in t.pieces.remove(f).unwrap_or_default() {
            parts.push(&b);
        }
    }
    match std::mem::take(&mut t.kind) {
        Kind::Merged => {
            parts.push(&Uint8Array::from(&t.tail[..]));
            status.set(save_parts(&parts, "application/json", "rankscope-merged-trace.json"));
        }
        Kind::Perfetto { tail, to } => {
            parts.push(&Uint8Array::from(&tail[..]));
            match to {
                None => status.set(save_parts(&parts, "application/x-tar", "rankscope-perfetto.tar")),
                Some((win, origin)) => send(parts, win, origin, t.order_len, status.clone()),
            }
        }
    }
}

/// Saves the assembled parts of an export under `name`.
fn save_parts(parts: &Array, mime: &str, name: &str) -> Status {
    match download::save_parts(parts, mime, name) {
        Ok(()) => Status::Saved(name.to_string()),
        Err(e) => Status::Failed(crate::worker::js_text(&e)),
    }
}

/// Starts the merged Chrome trace: a new request, and each rank's worker asked for its piece as
/// the job's export plan says.
fn start_merged(
    pool: &crate::pool::Pool,
    job: &JobView,
    trace: &RefCell<TraceExport>,
    sink: &Rc<RefCell<Option<ExportSink>>>,
    status: &UseStateHandle<Status>,
) {
    let plan = &job.export;
    let order: Vec<RankId> = job.export_ids.clone();
    let req = {
        let mut t = trace.borrow_mut();
        let req = t.req.wrapping_add(1);
        *t = TraceExport {
            req,
            order: order.clone(),
            order_len: order.len(),
            header: plan.merged_head(),
            tail: plan.merged_tail(),
            ..TraceExport::default()
        };
        req
    };
    status.set(Status::Writing { what: "the merged trace", done: 0, of: order.len() });
    for (k, (f, p)) in order.iter().zip(&plan.ranks).enumerate() {
        let query = Query::Export { planned: Box::new(p.clone()), origin_ns: plan.origin_ns, first: k == 0 };
        pool.ask(*f, query, Some(reply_to(sink, req)));
    }
}

/// Starts the Perfetto archive: a new request, and each rank's worker asked for its member; the
/// archive is saved (`to` None) or sent to the Perfetto tab `to`.
fn start_archive(
    pool: &crate::pool::Pool,
    job: &JobView,
    (trace, sink): (&RefCell<TraceExport>, &Rc<RefCell<Option<ExportSink>>>),
    status: &UseStateHandle<Status>,
    to: Option<(web_sys::Window, String)>,
) {
    let plan = job.export.perfetto();
    let tail = job.export.perfetto_tail();
    let order: Vec<RankId> = job.export_ids.clone();
    let req = {
        let mut t = trace.borrow_mut();
        let req = t.req.wrapping_add(1);
        *t = TraceExport {
            req,
            kind: Kind::Perfetto { tail, to },
            order: order.clone(),
            order_len: order.len(),
            ..TraceExport::default()
        };
        req
    };
    status.set(Status::Writing { what: "the Perfetto archive", done: 0, of: order.len() });
    for (f, m) in order.iter().zip(plan.members) {
        let query = Query::Perfetto { member: Box::new(m), shift_ns: plan.shift_ns };
        pool.ask(*f, query, Some(reply_to(sink, req)));
    }
}

/// Starts a tables export: the analysis' tables made at once, the events asked of each worker
/// holding a rank's (none: the tar is made now, without them).
fn start_tables(
    pool: Option<&crate::pool::Pool>,
    job: &Rc<JobView>,
    format: Format,
    redact: Option<Redaction>,
    tables: &Rc<RefCell<TablesExport>>,
    status: &UseStateHandle<Status>,
) {
    let req = tables.borrow().req.wrapping_add(1);
    let (t, queries) = TablesExport::start(job, format, req, redact);
    *tables.borrow_mut() = t;
    let pool = match pool {
        Some(pool) if !queries.is_empty() => pool,
        _ => {
            let done = tables.borrow_mut().finish(&job.analysis);
            return status.set(saved_tables(done));
        }
    };
    status.set(Status::Writing { what: "the tables", done: 0, of: queries.len() });
    for (id, query) in queries {
        let (tables, status, job) = (tables.clone(), status.clone(), job.clone());
        let reply: crate::pool::Reply = Rc::new(move |id, answer, extra| {
            let mut t = tables.borrow_mut();
            if t.req != req {
                return;
            }
            let done = t.on_answer(&job.analysis, id, answer, extra.dyn_into::<Uint8Array>().ok());
            match done {
                Some(done) => status.set(saved_tables(done)),
                None => status.set(Status::Writing { what: "the tables", done: t.done(), of: t.ranks() }),
            }
        });
        pool.ask(id, query, Some(reply));
    }
}

/// A key phrase for a redaction the user gave no key for: 128 bits from the browser's
/// cryptographic random source (the tokens agree within this export only).
fn drawn_key() -> String {
    let mut bytes = [0u8; 16];
    let crypto = web_sys::window().and_then(|w| w.crypto().ok());
    if crypto.is_none_or(|c| c.get_random_values_with_u8_array(&mut bytes).is_err()) {
        // No Web Crypto (not expected in a page): the engine's generator.
        for b in &mut bytes {
            *b = (js_sys::Math::random() * 256.0) as u8;
        }
    }
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn saved_tables(done: super::table_export::Done) -> Status {
    match done {
        Ok((parts, name)) => save_parts(&parts, "application/x-tar", &name),
        Err(e) => Status::Failed(e),
    }
}

/// What the export bar says about the last export.
fn status_html(status: &Status) -> Html {
    match status {
        Status::Idle => html! {},
        Status::Writing { what, done, of } => {
            html! { <span class="muted" data-testid="export-status">{format!("writing {what}: {done} of {of} ranks…")}</span> }
        }
        Status::Saved(n) => {
            html! { <span class="ok" data-testid="export-status">{format!("saved {n}")}</span> }
        }
        Status::Sending(o) => {
            html! { <span class="muted" data-testid="export-status">{format!("waiting for {o} to answer…")}</span> }
        }
        Status::Sent(o) => {
            html! { <span class="ok" data-testid="export-status">{format!("sent to {o}")}</span> }
        }
        Status::Failed(e) => {
            html! { <span class="error" data-testid="export-status">{format!("export failed: {e}")}</span> }
        }
    }
}

/// The question before the archive goes to a Perfetto UI: where it goes (the UI's address,
/// editable), what that means, and Send / Cancel.
fn perfetto_confirm(
    ui: &UseStateHandle<String>,
    ui_origin: Option<&str>,
    confirm: &UseStateHandle<bool>,
    on_send: Callback<MouseEvent>,
) -> Html {
    let on_ui = {
        let ui = ui.clone();
        Callback::from(move |e: InputEvent| ui.set(e.target_unchecked_into::<HtmlInputElement>().value()))
    };
    let on_ask_cancel = {
        let confirm = confirm.clone();
        Callback::from(move |_| confirm.set(false))
    };
    html! {
        <div class="perfetto-confirm" data-testid="perfetto-confirm">
            <p>
                {"This sends the Perfetto archive of this job (every rank's events, with rankscope's alignment) to "}
                <strong>{ui_origin.unwrap_or("—").to_string()}</strong>
                {" in a new tab. From then on that page holds your trace, outside rankscope: send it only to a Perfetto UI you trust (ui.perfetto.dev keeps traces in the browser; a self-hosted copy is yours)."}
            </p>
            <label>{"Perfetto UI "}
                <input type="url" data-testid="perfetto-url" value={(**ui).clone()} oninput={on_ui} size="40" />
            </label>
            <button class="small primary" data-testid="perfetto-send" onclick={on_send} disabled={ui_origin.is_none()}>
                {format!("Send to {}", ui_origin.unwrap_or("…"))}
            </button>
            <button class="small" onclick={on_ask_cancel}>{"Cancel"}</button>
        </div>
    }
}
