//! The findings of the analysis (ranked by impact): severity, what was found, the evidence
//! (ranks, steps, figures) and the fix.

use std::rc::Rc;

use rankscope_core::finding::{EvidenceKey, FindingId};
use yew::prelude::*;

use crate::format::{self, ranges};

#[derive(Properties, PartialEq, Debug)]
pub struct Props {
    pub job: Rc<crate::state::JobView>,
}

/// A finding's prose as the report writes it: the names between backticks as code, the rest as
/// text; an unpaired backtick stays a character (as `escape::md_prose` reads it).
fn prose(text: &str) -> Html {
    let pieces: Vec<&str> = text.split('`').collect();
    let paired = pieces.len() % 2 == 1;
    let last = pieces.len() - 1;
    html! {
        { for pieces.iter().enumerate().map(|(i, p)| {
            if i % 2 == 1 && (paired || i != last) {
                html! { <code>{*p}</code> }
            } else if i % 2 == 1 {
                html! { {format!("`{p}")} }
            } else {
                html! { {*p} }
            }
        }) }
    }
}

fn evidence_value(k: &str, v: f64) -> String {
    if k.ends_with("_ns") || k.contains("_ns_") {
        format::duration(v)
    } else if k.ends_with("ratio") || k.ends_with("coverage") || k.ends_with("consistency") || k == "jitter" {
        format!("{:.1}%", 100.0 * v)
    } else if k.ends_with("bytes") {
        format::bytes(v.max(0.0) as u64)
    } else if v.fract() == 0.0 && v.abs() < 1e15 {
        format!("{v:.0}")
    } else {
        format!("{v:.3}")
    }
}

/// "Where: ProfilerStep › forward › straggler_sleep (forward): 402 ms per step on rank 2
/// against 0 µs on the others; no operator running 402 ms".
fn location(l: &rankscope_core::finding::Location, ranks: &[u32], world: usize) -> String {
    let split: Vec<String> = l
        .excess_parts()
        .into_iter()
        .map(|(what, v)| format!("{what} {}", format::duration(v as f64)))
        .collect();
    let every = ranks.len() >= world;
    let against = if every {
        // A finding on every rank compares them with no one: say what each spends.
        String::new()
    } else {
        format!(" against {} on the others", format::duration(l.others_ns as f64))
    };
    format!(
        "Where: {} ({}): {} per step on rank{} {}{against}{}",
        l.regions.join(" › "),
        l.phase.name().replace('_', " "),
        format::duration(l.rank_ns as f64),
        if ranks.len() == 1 { "" } else { "s" },
        ranges(ranks),
        if split.is_empty() || every {
            String::new()
        } else {
            format!("; the excess is {}", split.join(", "))
        }
    )
}

/// "all_reduce #6 (step 4)", or "–".
fn record(r: &Option<rankscope_core::sequence::RecordRef>) -> String {
    r.as_ref().map_or("–".to_string(), |x| {
        format!(
            "{} #{}{}",
            x.kind.name(),
            x.position,
            x.step.map(|s| format!(" (step {s})")).unwrap_or_default()
        )
    })
}

/// For a hang or a mismatch: where each rank of the diverging group got to, the ranks the
/// diagnosis names marked.
fn stopped(seq: &rankscope_core::sequence::SequenceReport) -> Html {
    use rankscope_core::sequence::DiagnosisKind;
    let Some(d) =
        seq.diagnoses.iter().find(|d| matches!(d.kind, DiagnosisKind::Hang | DiagnosisKind::Mismatch))
    else {
        return html! {};
    };
    let Some(g) = seq.groups.iter().find(|g| Some(&g.pg) == d.pg.as_ref()) else { return html! {} };
    html! {
        <table class="stopped" data-testid="last-collectives">
            <caption class="muted">{if g.pg.is_empty() { "Where each rank got to".to_string() } else { format!("Where each rank of group {} got to", g.pg) }}</caption>
            <thead><tr><th class="num">{"Rank"}</th><th class="num">{"Collectives"}</th><th>{"Last completed"}</th><th>{"Last entered"}</th></tr></thead>
            <tbody>
            { for g.ranks.iter().map(|r| html! {
                <tr class={classes!(d.ranks.contains(&r.rank).then_some("named"))} data-testid="last-collective-row"
                    data-rank={r.rank.to_string()} data-named={d.ranks.contains(&r.rank).to_string()}>
                    <td class="num">{r.rank}</td>
                    <td class="num">{r.records}</td>
                    <td>{record(&r.last_completed)}</td>
                    <td>{record(&r.last_entered)}</td>
                </tr>
            }) }
            </tbody>
        </table>
    }
}

#[function_component(Findings)]
pub fn findings(p: &Props) -> Html {
    let findings = &p.job.analysis.findings;
    let few = rankscope_core::diagnose::understood::too_little(&p.job.analysis);
    let step = p.job.analysis.typical_step_ns();
    // The hang / mismatch on the timeline, when its ranks are loaded as traces.
    let ctx = use_context::<super::Ctx>();
    let open = crate::divergence::open(&p.job)
        .zip(ctx.clone())
        .map(|(action, ctx)| Callback::from(move |_: MouseEvent| ctx.dispatch.emit(action.clone())));
    let show_path = show_path(&p.job, ctx);
    html! {
        <section class="findings-section">
            <h2>{"What is wrong"}</h2>
            <ol class="findings" data-testid="findings">
            { for findings.iter().enumerate().map(|(i, f)| {
                let sev = f.severity.name();
                // A hang's figure is how long the ranks waited, not a saving per step.
                let gain = if f.id == FindingId::CollectiveMismatch {
                    f.evidence.get(EvidenceKey::WaitedNs).map(|w| format!(" · the waiting ranks were stuck {}", format::duration(w)))
                } else { (f.impact_ns > 0).then(|| {
                    let share = if step > 0.0 { format!(" ({:.0}% of a step)", 100.0 * f.impact_ns as f64 / step) } else { String::new() };
                    format!(" · about {} per step to gain{share}", format::duration(f.impact_ns as f64))
                }) };
                html! {
                    <li class={classes!("finding", format!("finding-{sev}"), (i == 0).then_some("finding-lead"))} data-testid="finding" data-id={f.id.as_str()}
                        data-severity={sev} data-ranks={f.ranks.iter().map(|r| r.to_string()).collect::<Vec<_>>().join(",")}
                        data-impact-ns={f.impact_ns.to_string()}>
                        <div class="finding-head">
                            <span class={classes!("sev", format!("sev-{sev}"))}>{sev}</span>
                            <span class="finding-message">{prose(&f.message)}</span>
                            if let Some(g) = gain { <span class="muted" data-testid="finding-gain">{g}</span> }
                        </div>
                        if let Some(l) = &f.location {
                            <div class="finding-where" data-testid="finding-where">{location(l, &f.ranks, p.job.analysis.ranks.len())}</div>
                        }
                        if !f.symptoms.is_empty() {
                            <div class="finding-explains muted">{format!("Explains: {}", f.symptoms.iter().map(|x| x.as_str().replace('_', " ")).collect::<Vec<_>>().join(", "))}</div>
                        }
                        <div class="finding-evidence muted">
                            <code>{f.id.as_str()}</code>
                            if !f.ranks.is_empty() { <span>{format!(" · rank{} {}", if f.ranks.len() == 1 { "" } else { "s" }, ranges(&f.ranks))}</span> }
                            if !f.steps.is_empty() { <span>{format!(" · step{} {}", if f.steps.len() == 1 { "" } else { "s" }, ranges(&f.steps))}</span> }
                            { for f.evidence.iter().map(|(k, v)| html! { <span>{format!(" · {}: {}", k.name().replace("_ns", "").replace('_', " "), evidence_value(&k.name(), v))}</span> }) }
                        </div>
                        <div class="finding-fix"><strong>{"Fix: "}</strong>{prose(&f.fix)}</div>
                        if i == 0 {
                            if let Some(show) = show_path.clone() {
                                <button class="small finding-open" data-testid="finding-show-path" onclick={show}
                                    title="Open the timeline at the step's critical path, drawn hop by hop over its ranks">{"Show its path on the timeline"}</button>
                            }
                        }
                        if f.id == FindingId::CollectiveMismatch {
                            if let Some(seq) = &p.job.analysis.sequence { { stopped(seq) } }
                            if let Some(open) = open.clone() {
                                <button class="small finding-open" data-testid="finding-open-timeline" onclick={open}
                                    title="Open the timeline at the divergent collective, marked on every rank">{"Show on the timeline"}</button>
                            }
                        }
                    </li>
                }
            }) }
            </ol>
            if findings.is_empty() && few.is_empty() {
                <p class="ok" data-testid="no-findings">{"No finding crossed its threshold."}</p>
            }
            if !few.is_empty() {
                <p class="warn" data-testid="too-little-understood">{format!(
                    "{} of rank(s) {} was understood to judge: most of their device time (without device work, their host time) is in events no rule classifies. Add rules for them (--rules, docs/metrics.md \"Which events\") before trusting any finding.",
                    if findings.is_empty() { "No finding, but this is no verdict: too little" } else { "Too little" },
                    ranges(&few)
                )}</p>
            }
        </section>
    }
}

/// The lead finding's "show its path": the timeline with the path drawn, at its step.
fn show_path(job: &crate::state::JobView, ctx: Option<super::Ctx>) -> Option<Callback<MouseEvent>> {
    let (p, _) = super::timeline::lead_path(&job.analysis)?;
    let id = job.id_of(p.rank)?;
    let off = job.offset(id);
    let open = crate::state::Action::Open {
        id,
        step: Some(p.step),
        start_ns: p.start_ns + off,
        end_ns: p.end_ns + off,
    };
    let ctx = ctx?;
    Some(Callback::from(move |_: MouseEvent| {
        ctx.dispatch.emit(crate::state::Action::ShowPath(true));
        ctx.dispatch.emit(open.clone());
    }))
}

#[cfg(test)]
mod tests {
    #[test]
    fn ranges() {
        assert_eq!(super::ranges(&[0, 1, 2, 3, 7]), "0–3, 7");
        assert_eq!(super::ranges(&[5]), "5");
        assert_eq!(super::ranges(&[]), "");
    }
}
