//! Alignment: how each rank's clock was put onto the job's (method, offset, estimate, residual,
//! anchors), as `rankscope analyze` decided it.

use yew::prelude::*;

use crate::format;
use crate::state::JobView;

#[derive(Properties, PartialEq, Debug)]
pub struct Props {
    pub job: std::rc::Rc<JobView>,
}

fn method_text(m: &str) -> &'static str {
    match m {
        "reference" => "reference clock (the lowest rank)",
        "same_host" => "the reference rank's host clock",
        "same_file" => "the reference rank's file's clock (one file, several ranks)",
        "user" => "given by the user",
        "collectives" => "matched collectives' end times",
        "step_starts" => "step starts",
        "timestamps" => "timestamps as written",
        _ => "other",
    }
}

#[function_component(Alignment)]
pub fn alignment(p: &Props) -> Html {
    let a = &p.job.analysis;
    let matching = &a.matching;
    html! {
        <section class="alignment" data-testid="alignment">
            <p class="muted">{"Ranks that report one host read one clock and share one offset (the clock column names the lowest of them). Matched collectives end at nearly the same instant on every rank; a clock's offset is the median of (its first leaver's end − the reference clock's) over them, and the residual their median absolute deviation. An estimate within the noise (|estimate| ≤ max(3 × residual, 10 µs)) is not applied. Aligned time = rank time − offset."}</p>
            <p>{format!("Collectives matched by {}.", matching.method.as_str().replace('_', " "))}</p>
            <table class="align-table" data-testid="alignment-table">
                <thead><tr>
                    <th class="num">{"Rank"}</th><th class="num">{"Clock"}</th><th>{"Method"}</th><th class="num">{"Offset applied"}</th>
                    <th class="num">{"Estimate"}</th><th class="num">{"Residual"}</th><th class="num">{"Max residual"}</th>
                    <th class="num">{"Anchors"}</th><th>{"Note"}</th>
                </tr></thead>
                <tbody>
                { for a.alignment.iter().map(|r| html! {
                    <tr data-testid="alignment-row" data-rank={r.rank.to_string()} data-method={r.method.as_str()}
                        data-clock={r.clock_group.to_string()} data-offset-ns={r.offset_ns.to_string()} data-estimate-ns={r.estimate_ns.to_string()}
                        data-residual-ns={r.residual_ns.to_string()} data-anchors={r.anchors.to_string()}>
                        <td class="num">{r.rank}</td>
                        <td class="num">{r.clock_group}</td>
                        <td title={r.method.as_str()}>{method_text(r.method.as_str())}</td>
                        <td class="num">{format::duration(r.offset_ns as f64)}</td>
                        <td class="num">{format::duration(r.estimate_ns as f64)}</td>
                        <td class="num">{format::duration(r.residual_ns as f64)}</td>
                        <td class="num">{format::duration(r.max_residual_ns as f64)}</td>
                        <td class="num">{format::thousands(r.anchors as u64)}</td>
                        <td class="note">{r.note.clone()}</td>
                    </tr>
                }) }
                </tbody>
            </table>
        </section>
    }
}
