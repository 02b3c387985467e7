//! The files of the job: per-file progress (bytes, MB/s), cancel, and errors.

use yew::prelude::*;

use super::Ctx;
use crate::format;
use crate::protocol::Phase;
use crate::state::{FileEntry, FileStatus};

#[derive(Properties, PartialEq, Debug)]
pub struct Props {
    pub files: Vec<FileEntry>,
}

#[function_component(Files)]
pub fn files(p: &Props) -> Html {
    let ctx = use_context::<Ctx>();
    let cancel = |id: u32| {
        let ctx = ctx.clone();
        Callback::from(move |_| {
            if let Some(pool) = ctx.as_ref().and_then(Ctx::pool) {
                pool.cancel(id);
            }
        })
    };
    let loading: Vec<u32> = p.files.iter().filter(|f| !f.status.is_done()).map(|f| f.id).collect();
    let cancel_all = {
        let ctx = ctx.clone();
        let ids = loading.clone();
        Callback::from(move |_| {
            if let Some(pool) = ctx.as_ref().and_then(Ctx::pool) {
                for &id in &ids {
                    pool.cancel(id);
                }
            }
        })
    };
    let ready = p.files.iter().filter(|f| f.status == FileStatus::Ready).count();
    html! {
        <section class="files" data-testid="files">
            <h2>
                {format!("Files · {ready} of {} read", p.files.len())}
                if !loading.is_empty() {
                    <button class="small" data-testid="cancel-all" onclick={cancel_all}>{"Cancel all"}</button>
                }
            </h2>
            <table class="file-table">
                <tbody>
                { for p.files.iter().map(|f| {
                    let status = match &f.status {
                        FileStatus::Queued => html! { <span class="muted">{"waiting for a worker"}</span> },
                        FileStatus::Loading { phase, input_bytes, events, mb_per_s } => {
                            let max = f.size.max(*input_bytes).max(1);
                            let what = match phase {
                                Phase::Reading => format!(
                                    "{} of {} · {:.0} MB/s · {} events{}",
                                    format::bytes(*input_bytes), format::bytes(f.size), mb_per_s, format::thousands(*events),
                                    on_workers(f.workers, "on")
                                ),
                                Phase::Normalizing if f.holds > 1 => format!(
                                    "normalizing {} events · {} of {} ranks",
                                    format::thousands(*events), f.ranks.len(), f.holds
                                ),
                                Phase::Normalizing => format!("normalizing {} events", format::thousands(*events)),
                            };
                            html! { <>
                                <progress max={max.to_string()} value={input_bytes.to_string()}></progress>
                                <span class="muted">{what}</span>
                            </> }
                        }
                        FileStatus::Ready if f.text.is_some() => {
                            let kinds = f.text.iter().flatten().map(|k| k.describe()).collect::<Vec<_>>().join(" + ");
                            // Dumps and the evidence beside the traces are on the Summary.
                            let summary = f.text.iter().flatten().any(|k| k.any_name());
                            html! { <span class="ok" data-testid="file-kind">{format!("{kinds} · see {}", if summary { "Summary" } else { "Fabric" })}</span> }
                        }
                        FileStatus::Ready => {
                            let mut ranks: Vec<u32> = f.ranks.iter().map(|r| r.summary.rank).collect();
                            ranks.sort_unstable();
                            let which = match ranks.len() {
                                1 => format!("rank {}", ranks[0]),
                                n => format!("{n} ranks ({})", format::ranges(&ranks)),
                            };
                            html! { <span class="ok" data-testid="file-ranks" data-ranks={f.ranks.len().to_string()}>{format!(
                                "{which} · {} events{}",
                                format::thousands(f.events()),
                                on_workers(f.workers, "read on")
                            )}</span> }
                        }
                        FileStatus::Failed(e) => html! { <span class="error" data-testid="file-error">{format::inert(e)}</span> },
                        FileStatus::Cancelled => html! { <span class="muted">{"cancelled"}</span> },
                    };
                    html! {
                        <tr key={f.id} data-testid="file-row">
                            <td class="name" title={format::inert(&f.name)}>{format::inert(&f.name)}</td>
                            <td class="num">{if f.size > 0 { format::bytes(f.size) } else { String::new() }}</td>
                            <td class="status">{status}</td>
                            <td>
                                if !f.status.is_done() {
                                    <button class="small" data-testid="cancel" onclick={cancel(f.id)}>{"Cancel"}</button>
                                }
                            </td>
                        </tr>
                    }
                }) }
                </tbody>
            </table>
        </section>
    }
}

/// ` · read on 2 workers` for a file parsed in pieces by several workers; nothing for one.
fn on_workers(workers: u32, verb: &str) -> String {
    if workers > 1 {
        format!(" · {verb} {workers} workers")
    } else {
        String::new()
    }
}
