//! Exports, built in this tab and saved through the browser (never uploaded): the analysis as
//! JSON (`rankscope analyze --json`), CSV (`--csv`) and Markdown (`--md`), and the merged, aligned
//! Chrome trace of every rank (`--merged-trace`). For the trace each worker writes its own rank's
//! piece with the job's offsets and origin; the pieces arrive as byte arrays and become one
//! `Blob` with the header and footer: the file is never one JS string.

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::rc::Rc;

use js_sys::{Array, Uint8Array};
use rankscope_core::analyze::report;
use rankscope_core::export;
use yew::prelude::*;

use super::Ctx;
use crate::download;
use crate::protocol::FileId;
use crate::state::JobView;

#[derive(Properties, PartialEq, Debug)]
pub struct Props {
    pub job: Rc<JobView>,
}

/// A merged-trace export in progress.
#[derive(Default)]
struct TraceExport {
    req: u32,
    /// Files in rank order.
    order: Vec<FileId>,
    pieces: BTreeMap<FileId, Vec<Uint8Array>>,
    done: usize,
    header: Vec<u8>,
    failed: bool,
}

/// What the export bar says.
#[derive(Debug, Clone, PartialEq)]
enum Status {
    Idle,
    Writing { done: usize, of: usize },
    Saved(String),
    Failed(String),
}

fn save(text: &str, mime: &str, name: &str) -> Status {
    match download::save_text(text, mime, name) {
        Ok(()) => Status::Saved(name.to_string()),
        Err(e) => Status::Failed(crate::worker::js_text(&e)),
    }
}

#[function_component(Exports)]
pub fn exports(p: &Props) -> Html {
    let ctx = use_context::<Ctx>();
    let status = use_state(|| Status::Idle);
    let trace: Rc<RefCell<TraceExport>> = use_mut_ref(TraceExport::default);

    // The pieces of the merged trace come back through the pool's export sink.
    {
        let trace = trace.clone();
        let status = status.clone();
        let pool = ctx.as_ref().and_then(Ctx::pool);
        use_effect_with(p.job.clone(), move |_| {
            if let Some(pool) = &pool {
                let sink: crate::pool::ExportSink = Rc::new(move |file, req, piece| {
                    let mut t = trace.borrow_mut();
                    if req != t.req || t.failed {
                        return;
                    }
                    match piece {
                        Err(e) => {
                            t.failed = true;
                            status.set(Status::Failed(e));
                        }
                        Ok((bytes, last)) => {
                            t.pieces.entry(file).or_default().push(bytes);
                            if !last {
                                return;
                            }
                            t.done += 1;
                            if t.done < t.order.len() {
                                status.set(Status::Writing { done: t.done, of: t.order.len() });
                                return;
                            }
                            let parts = Array::new();
                            parts.push(&Uint8Array::from(&t.header[..]));
                            let order = std::mem::take(&mut t.order);
                            for f in &order {
                                for b in t.pieces.remove(f).unwrap_or_default() {
                                    parts.push(&b);
                                }
                            }
                            let mut footer = Vec::new();
                            let _ = export::write_footer(&mut footer);
                            parts.push(&Uint8Array::from(&footer[..]));
                            let name = "rankscope-merged-trace.json";
                            status.set(match download::save_parts(&parts, "application/json", name) {
                                Ok(()) => Status::Saved(name.to_string()),
                                Err(e) => Status::Failed(crate::worker::js_text(&e)),
                            });
                        }
                    }
                });
                pool.set_export_sink(Some(sink));
            }
            move || {
                if let Some(pool) = pool {
                    pool.set_export_sink(None);
                }
            }
        });
    }

    let a = p.job.analysis.clone();
    let on_json = {
        let (a, status) = (a.clone(), status.clone());
        Callback::from(move |_| {
            status.set(match serde_json::to_string_pretty(&*a) {
                Ok(s) => save(&(s + "\n"), "application/json", "rankscope-analysis.json"),
                Err(e) => Status::Failed(e.to_string()),
            })
        })
    };
    let on_csv = {
        let (a, status) = (a.clone(), status.clone());
        Callback::from(move |_| status.set(save(&report::csv(&a), "text/csv", "rankscope-steps.csv")))
    };
    let on_md = {
        let (a, status) = (a.clone(), status.clone());
        Callback::from(move |_| {
            status.set(save(&report::markdown(&a), "text/markdown", "rankscope-report.md"))
        })
    };
    let on_trace = {
        let (job, status, trace) = (p.job.clone(), status.clone(), trace.clone());
        let pool = ctx.as_ref().and_then(Ctx::pool);
        Callback::from(move |_| {
            let Some(pool) = &pool else { return };
            let a = &job.analysis;
            let methods: Vec<(u32, i64, &str)> =
                a.alignment.iter().map(|x| (x.rank, x.offset_ns, x.method)).collect();
            let mut header = Vec::new();
            let _ = export::write_header(&mut header, job.origin_ns, &methods);
            let order: Vec<FileId> = job.ranks.iter().map(|(f, _)| *f).collect();
            let req = {
                let mut t = trace.borrow_mut();
                let req = t.req.wrapping_add(1);
                *t = TraceExport { req, order: order.clone(), header, ..TraceExport::default() };
                req
            };
            status.set(Status::Writing { done: 0, of: order.len() });
            for (k, f) in order.iter().enumerate() {
                pool.export(*f, req, job.offset(*f), job.origin_ns, k == 0);
            }
        })
    };
    let busy = matches!(*status, Status::Writing { .. });
    html! {
        <div class="exports" data-testid="exports">
            <span class="muted">{"Export (made in this tab, nothing is uploaded):"}</span>
            <button class="small" data-testid="export-json" onclick={on_json} title="rankscope analyze --json">{"Analysis JSON"}</button>
            <button class="small" data-testid="export-csv" onclick={on_csv} title="rankscope analyze --csv: the rank × step table">{"CSV"}</button>
            <button class="small" data-testid="export-md" onclick={on_md} title="rankscope analyze --md">{"Markdown"}</button>
            <button class="small" data-testid="export-trace" onclick={on_trace} disabled={busy}
                title="Every rank in one Chrome trace on the aligned clock, for Perfetto and chrome://tracing">{"Merged Chrome trace"}</button>
            { match &*status {
                Status::Idle => html! {},
                Status::Writing { done, of } => html! { <span class="muted" data-testid="export-status">{format!("writing the merged trace: {done} of {of} ranks…")}</span> },
                Status::Saved(n) => html! { <span class="ok" data-testid="export-status">{format!("saved {n}")}</span> },
                Status::Failed(e) => html! { <span class="error" data-testid="export-status">{format!("export failed: {e}")}</span> },
            } }
        </div>
    }
}
