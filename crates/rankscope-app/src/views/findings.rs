//! The findings of the analysis (ranked by impact): severity, what was found, the evidence
//! (ranks, steps, figures) and the fix.

use std::rc::Rc;

use rankscope_core::analyze::findings::Severity;
use yew::prelude::*;

use crate::format;

#[derive(Properties, PartialEq, Debug)]
pub struct Props {
    pub job: Rc<crate::state::JobView>,
}

fn severity_name(s: Severity) -> &'static str {
    match s {
        Severity::Info => "info",
        Severity::Low => "low",
        Severity::Medium => "medium",
        Severity::High => "high",
    }
}

/// `[0, 1, 2, 3, 7]` → `0–3, 7`.
fn ranges(v: &[u32]) -> String {
    let mut out: Vec<String> = Vec::new();
    let mut i = 0;
    while i < v.len() {
        let mut j = i;
        while j + 1 < v.len() && v[j + 1] == v[j] + 1 {
            j += 1;
        }
        out.push(if j > i { format!("{}–{}", v[i], v[j]) } else { v[i].to_string() });
        i = j + 1;
    }
    out.join(", ")
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

#[function_component(Findings)]
pub fn findings(p: &Props) -> Html {
    let findings = &p.job.analysis.findings;
    html! {
        <section class="findings-section">
            <h2>{"Findings"}</h2>
            <ol class="findings" data-testid="findings">
            { for findings.iter().map(|f| {
                let sev = severity_name(f.severity);
                html! {
                    <li class={classes!("finding", format!("finding-{sev}"))} data-testid="finding" data-id={f.id.clone()}
                        data-severity={sev} data-ranks={f.ranks.iter().map(|r| r.to_string()).collect::<Vec<_>>().join(",")}>
                        <div class="finding-head">
                            <span class={classes!("sev", format!("sev-{sev}"))}>{sev}</span>
                            <span class="finding-message">{f.message.clone()}</span>
                            if f.impact_ns > 0 { <span class="muted">{format!(" · impact {}", format::duration(f.impact_ns as f64))}</span> }
                        </div>
                        <div class="finding-evidence muted">
                            <code>{f.id.clone()}</code>
                            if !f.ranks.is_empty() { <span>{format!(" · rank{} {}", if f.ranks.len() == 1 { "" } else { "s" }, ranges(&f.ranks))}</span> }
                            if !f.steps.is_empty() { <span>{format!(" · step{} {}", if f.steps.len() == 1 { "" } else { "s" }, ranges(&f.steps))}</span> }
                            { for f.evidence.iter().map(|(k, v)| html! { <span>{format!(" · {}: {}", k.replace('_', " "), evidence_value(k, *v))}</span> }) }
                        </div>
                        <div class="finding-fix"><strong>{"Fix: "}</strong>{f.fix.clone()}</div>
                    </li>
                }
            }) }
            </ol>
            if findings.is_empty() {
                <p class="ok" data-testid="no-findings">{"No finding crossed its threshold."}</p>
            }
        </section>
    }
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
