//! Beside the traces: what the evidence dropped with them says (the analysis' `beside` member,
//! read and joined by the core's one job path): the cluster metrics' join with the ranks, the
//! NCCL RAS status, the NCCL Inspector's summary and join, and where a step log puts the
//! profiled steps. Their findings are in the findings list above; nothing is shown without them.

use yew::prelude::*;

use crate::format::inert;
use crate::state::JobView;

#[derive(Properties, PartialEq, Debug)]
pub struct Props {
    pub job: std::rc::Rc<JobView>,
}

fn ms(v: Option<f64>) -> String {
    v.map_or("–".to_string(), |x| format!("{x:.1} ms"))
}

#[function_component(Beside)]
pub fn beside(p: &Props) -> Html {
    let Some(b) = p.job.analysis.beside.as_ref() else { return html! {} };
    let metrics = b.metrics.as_ref().map(|m| {
        let files: Vec<String> = m.files.iter().map(|f| format!("{} ({}, {} series)", inert(&f.file), f.format.as_str(), f.series)).collect();
        html! {
            <div data-testid="beside-metrics">
                <h3>{"Cluster metrics"}</h3>
                <p class="muted">{files.join(", ")}</p>
                if let Some(j) = &m.join {
                    <p>{format!("Joined: {}", j.method)}</p>
                    <p class="muted">{format!("Residual: {}", j.residual)}</p>
                    <p data-testid="beside-metrics-findings" data-count={m.findings.len().to_string()}>
                        {format!("{} of {} ranks on a host and GPU; {} finding(s) from the join, in the findings list.", j.ranks.len(), p.job.analysis.ranks.len(), m.findings.len())}
                    </p>
                } else {
                    <p>{"Not joined: no trace came with them."}</p>
                }
            </div>
        }
    });
    let ras = (!b.ras.is_empty()).then(|| html! {
        <div data-testid="beside-ras">
            <h3>{"NCCL RAS status"}</h3>
            <ul>{ for b.ras.iter().map(|r| html! {
                <li class={if r.status.healthy() { "ok" } else { "error" }}>{format!("{}: {}", inert(&r.file), r.status.headline.join("; "))}</li>
            }) }</ul>
        </div>
    });
    let inspector = b.inspector.as_ref().map(|i| html! {
        <div data-testid="beside-inspector">
            <h3>{"NCCL Inspector"}</h3>
            <p>{format!("{} record(s) from {} file(s), {} communicator(s).", i.report.records, i.files.len(), i.report.comms.len())}</p>
            if let Some(j) = &i.join {
                <p data-testid="beside-inspector-join" data-matched={j.matched.to_string()}>{format!(
                    "Joined with the traces: {} of their {} collectives matched to the Inspector's {} calls; {} of {} member times disagree with the kernel times.",
                    j.matched, j.trace_ops, j.inspector_calls, j.times.disagree, j.times.compared)}</p>
                <ul>{ for j.pairings.iter().map(|x| html! {
                    <li>{format!("communicator {} ↔ process group {}: {} of {} matched", inert(&x.comm), inert(&x.pg), x.matched, x.trace_ops)}</li>
                }) }</ul>
            }
        </div>
    });
    let steplogs = (!b.steplogs.is_empty()).then(|| html! {
        <div data-testid="beside-steplogs">
            <h3>{"Step logs"}</h3>
            <ul>{ for b.steplogs.iter().map(|l| html! {
                <li>
                    {format!("{}: {} iteration line(s), median {}, max {}, {} spike(s).", inert(&l.file), l.iterations, ms(l.elapsed_p50_ms), ms(l.elapsed_max_ms), l.spikes)}
                    if let Some(pr) = &l.profile {
                        <p data-testid="beside-steplog-profile" data-representative={pr.representative.as_str()}>{pr.note.clone()}</p>
                    }
                </li>
            }) }</ul>
        </div>
    });
    html! {
        <section class="beside" data-testid="beside">
            <h2>{"Beside the traces"}</h2>
            { metrics.unwrap_or_default() }
            { ras.unwrap_or_default() }
            { inspector.unwrap_or_default() }
            { steplogs.unwrap_or_default() }
            { for b.problems.iter().map(|x| html! { <p class="error">{format!("Not read: {}", x.message)}</p> }) }
        </section>
    }
}
