//! Compare (issue 36): the job on screen (the new run) against a baseline (the base run: a job
//! digest or a saved `rankscope analyze --json`, chosen or dropped here), as `rankscope diff BASE
//! NEW` compares them (`compare::compare`, made by the reducer: `state/compared.rs`). The verdict
//! first, as the report's first line; the step time of both runs with its spread; the change and
//! whether it is beyond noise; one step of each run, the baseline's ranks above the job's on one
//! time axis ([`timeline`]); what explains it; the figures and regions that moved, sortable
//! ([`tables`]); the findings that appeared, disappeared or changed; the comparison to download
//! as the CLI's `--json` and `--md`.

mod bars;
mod tables;
mod timeline;

use std::rc::Rc;

use rankscope_core::compare::{render, Change, Comparison};
use web_sys::{File, HtmlInputElement};
use yew::prelude::*;

use super::Ctx;
use crate::state::{Action, Baseline, Compared};

#[derive(Properties, PartialEq, Debug)]
pub struct Props {
    pub baseline: Option<Baseline>,
    pub compared: Option<Rc<Compared>>,
}

/// The first file of a drop (a baseline is one file).
fn dropped(e: &DragEvent) -> Option<File> {
    e.data_transfer()?.files()?.get(0)
}

#[function_component(Compare)]
pub fn compare(p: &Props) -> Html {
    let ctx = use_context::<Ctx>();
    let open = {
        let ctx = ctx.clone();
        Callback::from(move |f: File| {
            if let Some(c) = &ctx {
                crate::baseline::open(f, c.dispatch.clone());
            }
        })
    };
    let on_pick = {
        let open = open.clone();
        Callback::from(move |e: Event| {
            let input: HtmlInputElement = e.target_unchecked_into();
            if let Some(f) = input.files().and_then(|l| l.get(0)) {
                open.emit(f);
            }
            // Choosing the same file again must fire `change` again.
            input.set_value("");
        })
    };
    // A drop here is the baseline, not a new job: the page's own drop handler never hears of it.
    let on_drop = Callback::from(move |e: DragEvent| {
        e.prevent_default();
        e.stop_propagation();
        if let Some(f) = dropped(&e) {
            open.emit(f);
        }
    });
    let on_over = Callback::from(|e: DragEvent| e.prevent_default());
    let clear = {
        let ctx = ctx.clone();
        Callback::from(move |_| {
            crate::baseline::stop();
            if let Some(c) = &ctx {
                c.dispatch.emit(Action::ClearBaseline);
            }
        })
    };
    let status = match &p.baseline {
        None => html! {
            <span class="muted">{"The job on screen is the new run; the baseline is the base run: a job digest \
                (`rankscope combine --digest`) or a saved `rankscope analyze --json` of another run. \
                Choose it, or drop it here."}</span>
        },
        Some(Baseline::Reading { name }) => {
            html! { <span data-testid="baseline-reading">{format!("Reading the baseline {name}…")}</span> }
        }
        Some(Baseline::Failed { error, .. }) => {
            html! { <span class="error" data-testid="baseline-error">{error.clone()}</span> }
        }
        Some(Baseline::Ready { name, .. }) => html! {
            <span>{"Baseline: "}<strong data-testid="baseline-name">{name.clone()}</strong>
                {" "}<button class="small" data-testid="baseline-clear" onclick={clear}>{"Remove"}</button></span>
        },
    };
    let label = if matches!(p.baseline, Some(Baseline::Ready { .. })) {
        "Another baseline…"
    } else {
        "Compare with a baseline…"
    };
    html! {
        <section class="compare-view" data-testid="compare">
            <div class="compare-pick" data-testid="baseline-drop" ondrop={on_drop} ondragover={on_over}>
                <label class="button primary">
                    {label}
                    <input type="file" class="hidden-input" data-testid="baseline-input"
                        accept=".rsdigest,.json,application/json" onchange={on_pick} />
                </label>
                { status }
            </div>
            if let Some(c) = &p.compared { <Report compared={c.clone()} /> }
        </section>
    }
}

#[derive(Properties, PartialEq, Debug)]
struct ReportProps {
    compared: Rc<Compared>,
}

/// The comparison, once there is one.
#[function_component(Report)]
fn report(p: &ReportProps) -> Html {
    let c = &p.compared.comparison;
    let v = &c.verdict;
    let download = |json: bool| {
        let compared = p.compared.clone();
        Callback::from(move |_| {
            let c = &compared.comparison;
            let saved = if json {
                crate::download::save_text(&render::json(c), "application/json", "rankscope-diff.json")
            } else {
                crate::download::save_text(&render::markdown(c), "text/markdown", "rankscope-diff.md")
            };
            if let Err(e) = saved {
                web_sys::console::error_2(&"rankscope: cannot save the comparison".into(), &e);
            }
        })
    };
    let tone = match v.change {
        Change::Slower => "slower",
        Change::Faster => "faster",
        Change::NoChange => "same",
        Change::CannotTell => "unknown",
    };
    html! {
        <>
            <p class={classes!("verdict", tone)} data-testid="compare-verdict" data-change={v.change.as_str()}>{v.line.clone()}</p>
            if let Some(why) = &v.reason { <p class="muted" data-testid="compare-reason">{why.clone()}</p> }
            <div class="exports">
                <button class="small" data-testid="compare-json" onclick={download(true)}>{"Download JSON"}</button>
                <button class="small" data-testid="compare-md" onclick={download(false)}>{"Download Markdown"}</button>
                <span class="muted">{format!("{} (base) against the job on screen (new); the JSON is `rankscope diff --json` (schema {}).", p.compared.base_name, c.schema.as_str())}</span>
            </div>
            if !v.also.is_empty() {
                <p class="compare-also-head">{"Also beyond noise:"}</p>
                <ul class="compare-also" data-testid="compare-also">
                    { for v.also.iter().take(8).map(|a| html! { <li>{rankscope_core::compare::verdict::cause_words(a)}</li> }) }
                </ul>
            }
            <h2>{"Step time"}</h2>
            <bars::StepBars compared={p.compared.clone()} />
            { change_line(c) }
            <h2>{"One step of each run, aligned"}</h2>
            <timeline::StepTimelines compared={p.compared.clone()} />
            <tables::Explained compared={p.compared.clone()} />
            { config(c) }
            <tables::Deltas compared={p.compared.clone()} />
            <tables::Findings compared={p.compared.clone()} />
        </>
    }
}

/// "Change +303 ms (+34%), 97% interval … ; the floor is 27 ms: beyond noise." (the report's
/// line, in its words: `rankscope diff`'s text has it under "Step time").
fn change_line(c: &Comparison) -> Html {
    let st = &c.step_time;
    let Some(s) = st.shift else {
        return html! { <p class="muted" data-testid="compare-change">{"No step with a time in one of the runs: the step time cannot be compared."}</p> };
    };
    let judged = if st.beyond_noise { "beyond noise" } else { "within noise" };
    html! {
        <p data-testid="compare-change" data-beyond-noise={st.beyond_noise.to_string()} data-delta-ns={s.delta_ns.to_string()}>
            {format!("{}: ", rankscope_core::compare::render::change_words(st).unwrap_or_default())}
            <strong class={if st.beyond_noise { "beyond" } else { "muted" }}>{judged}</strong>{"."}
        </p>
    }
}

/// The configuration facts that differ (world size, devices, versions, groups…).
fn config(c: &Comparison) -> Html {
    if c.config.is_empty() {
        return html! { <p class="muted" data-testid="compare-config">{"Same world size, backend, devices, hosts, steps profiled and groups."}</p> };
    }
    html! {
        <>
            <h2>{"Configuration"}</h2>
            <table class="compare-config" data-testid="compare-config">
                <thead><tr><th>{"fact"}</th><th>{"base"}</th><th>{"new"}</th></tr></thead>
                <tbody>
                { for c.config.iter().map(|d| html! {
                    <tr><td>{d.key.clone()}</td><td class="name" title={d.base.clone()}>{d.base.clone()}</td><td class="name" title={d.new.clone()}>{d.new.clone()}</td></tr>
                }) }
                </tbody>
            </table>
        </>
    }
}
