//! What-if (issue 35): the job replayed from its traces (docs/metrics.md, "What-if"): how well
//! the replay reproduces the recorded steps, the ideal step (every rank at its peers' typical
//! speed), and the findings' gains as toggles: the step projected with the chosen fixes made,
//! in the order the findings are ranked; the typical step recorded, replayed and with the lead
//! finding's cause taken away ([`super::whatif_timeline`]).

use yew::prelude::*;

use crate::format;
use crate::state::JobView;

#[derive(Properties, PartialEq, Debug)]
pub struct Props {
    pub job: std::rc::Rc<JobView>,
}

#[function_component(WhatIf)]
pub fn whatif(p: &Props) -> Html {
    let a = &p.job.analysis;
    // A job that stopped has no steady state to project (a hang's figure is how long it waited).
    let stopped = a.findings.iter().any(|f| f.id == rankscope_core::finding::FindingId::CollectiveMismatch);
    let fixes: Vec<(usize, &rankscope_core::finding::Finding)> = a
        .findings
        .iter()
        .enumerate()
        .filter(|(_, f)| !stopped && f.impact_ns > 0 && f.severity != rankscope_core::finding::Severity::Info)
        .collect();
    // Which fixes are on (all, at first).
    let on = use_state(|| vec![true; fixes.len()]);
    let Some(w) = a.whatif.as_ref() else { return html! {} };
    if w.steps.is_empty() {
        return html! {};
    }
    let n = w.steps.len() as f64;
    let recorded = w.steps.iter().map(|s| s.recorded_ns as f64).sum::<f64>() / n;
    let holds = w.holds();
    let accuracy = format!(
        "Replayed from its traces with the recorded durations, the job gives its {} steps within {:.1}% of the recorded on average ({:.1}% at most): {}",
        w.steps.len(),
        100.0 * w.mean_error,
        100.0 * w.max_error,
        if holds && w.p2p {
            "its point-to-point exchanges are replayed as pairs; the late ranks', the expert imbalance's and the small collectives' gains below are the replay's (a rank alone in its place, such as a pipeline stage without replicas, has no peers to be brought to and keeps its own estimate)."
        } else if holds {
            "the late ranks', the expert imbalance's and the small collectives' gains below are the replay's."
        } else {
            "too far from the record for its gains to be used; the findings keep their own estimates."
        }
    );
    let saved: f64 = fixes
        .iter()
        .enumerate()
        .filter(|(k, _)| on.get(*k).copied().unwrap_or(true))
        .map(|(_, (_, f))| f.impact_ns as f64)
        .sum();
    let projected = (recorded - saved).max(0.0);
    let toggle = |k: usize| {
        let on = on.clone();
        Callback::from(move |_: Event| {
            let mut v = (*on).clone();
            if let Some(x) = v.get_mut(k) {
                *x = !*x;
            }
            on.set(v);
        })
    };
    html! {
        <section class="whatif" data-testid="whatif">
            <h2>{"What if"}</h2>
            <p data-testid="whatif-accuracy" data-mean-error={w.mean_error.to_string()} data-holds={holds.to_string()}>{accuracy}</p>
            <p data-testid="whatif-ideal" data-ideal-ns={w.ideal_ns.to_string()} data-replayed-ns={w.replayed_ns.to_string()}>{format!(
                "With every rank at its peers' typical speed (no rank slower than the others anywhere), a step would take {} against {} replayed: {:.0}% less.",
                format::duration(w.ideal_ns as f64),
                format::duration(w.replayed_ns as f64),
                if w.replayed_ns > 0 { 100.0 * (1.0 - w.ideal_ns as f64 / w.replayed_ns as f64) } else { 0.0 }
            )}</p>
            if !fixes.is_empty() {
                <p class="muted">{"Fixes, in the order the findings rank them (each gain as its finding says; a secondary cause's gain is the one left once the causes before it are fixed):"}</p>
                <ul class="whatif-fixes">
                { for fixes.iter().enumerate().map(|(k, (i, f))| html! {
                    <li data-testid="whatif-fix" data-id={f.id.as_str()} data-impact-ns={f.impact_ns.to_string()}>
                        <label>
                            <input type="checkbox" checked={on.get(k).copied().unwrap_or(true)} onchange={toggle(k)} data-testid="whatif-toggle" />
                            {format!(" {}. {} — {} per step", i + 1, f.id.as_str().replace('_', " "), format::duration(f.impact_ns as f64))}
                            if !f.ranks.is_empty() && f.ranks.len() < a.ranks.len() { {format!(" (rank{} {})", if f.ranks.len() == 1 { "" } else { "s" }, f.ranks.iter().map(|r| r.to_string()).collect::<Vec<_>>().join(", "))} }
                        </label>
                    </li>
                }) }
                </ul>
                <p data-testid="whatif-projected" data-projected-ns={(projected as i64).to_string()}><strong>{format!(
                    "With the chosen fixes: about {} a step against {} recorded ({:.0}% less).",
                    format::duration(projected),
                    format::duration(recorded),
                    if recorded > 0.0 { 100.0 * saved.min(recorded) / recorded } else { 0.0 }
                )}</strong></p>
            }
            if let Some(t) = w.timeline.clone() {
                <super::whatif_timeline::ReplayTimeline timeline={t} />
            }
            <details>
                <summary>{"The replay, step by step"}</summary>
                <table class="whatif-steps" data-testid="whatif-steps">
                    <thead><tr><th class="num">{"Step"}</th><th class="num">{"Recorded"}</th><th class="num">{"Replayed"}</th><th class="num">{"Error"}</th></tr></thead>
                    <tbody>
                    { for w.steps.iter().map(|s| html! {
                        <tr>
                            <td class="num">{s.step}</td>
                            <td class="num">{format::duration(s.recorded_ns as f64)}</td>
                            <td class="num">{format::duration(s.replayed_ns as f64)}</td>
                            <td class="num">{if s.recorded_ns > 0 { format!("{:+.1}%", 100.0 * (s.replayed_ns - s.recorded_ns) as f64 / s.recorded_ns as f64) } else { "–".into() }}</td>
                        </tr>
                    }) }
                    </tbody>
                </table>
            </details>
        </section>
    }
}
