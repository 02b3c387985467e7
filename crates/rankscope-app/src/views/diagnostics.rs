//! Diagnostics: per file, what was repaired or skipped, and what failed outright.

use yew::prelude::*;

use crate::format;
use crate::state::JobView;

#[derive(Properties, PartialEq, Debug)]
pub struct Props {
    pub job: std::rc::Rc<JobView>,
    /// Embedding-protocol messages ignored because their origin is not trusted, per origin.
    #[prop_or_default]
    pub untrusted: std::collections::BTreeMap<String, u32>,
}

#[function_component(Diagnostics)]
pub fn diagnostics(p: &Props) -> Html {
    html! {
        <section class="diagnostics" data-testid="diagnostics">
            if !p.untrusted.is_empty() {
                <article class="diag-file" data-testid="diag-untrusted">
                    <h3>{"Messages from untrusted origins, ignored"}</h3>
                    <p class="warn">{"These pages posted messages to rankscope; their origins are not trusted (add one with ?origin=… to the page's URL), so nothing they sent was read or answered."}</p>
                    <table class="diag-table"><tbody>
                    { for p.untrusted.iter().map(|(o, n)| html! {
                        <tr data-testid="untrusted-origin" data-origin={o.clone()} data-count={n.to_string()}>
                            <td><code>{o.clone()}</code></td><td class="num">{*n}</td>
                        </tr>
                    }) }
                    </tbody></table>
                </article>
            }
            <p class="muted">{"Broken input never aborts a load: what could be repaired was, what could not was skipped, and each is counted here with the byte offset of its first occurrence (in the decompressed text). Files that are not traces at all are listed under Files."}</p>
            { for p.job.ranks.iter().map(|(id, r)| html! {
                <article key={*id} class="diag-file" data-testid="diag-file">
                    <h3>{format!("rank {} · {}", r.rank, crate::format::inert(&r.file))}</h3>
                    if r.diagnostics.is_empty() {
                        <p class="ok">{"Read cleanly: nothing repaired or skipped."}</p>
                    } else {
                        <table class="diag-table">
                            <thead><tr><th>{"Severity"}</th><th>{"Kind"}</th><th class="num">{"Count"}</th><th class="num">{"First at byte"}</th><th>{"What happened"}</th></tr></thead>
                            <tbody>
                            { for r.diagnostics.iter().map(|d| html! {
                                <tr>
                                    <td><span class={classes!("sev", format!("sev-{}", d.severity.diagnostic_name()))}>{d.severity.diagnostic_name().replace('_', " ")}</span></td>
                                    <td><code>{d.kind.name()}</code></td>
                                    <td class="num">{format::thousands(d.count)}</td>
                                    <td class="num">{d.first_offset.map(format::thousands).unwrap_or_default()}</td>
                                    <td>{crate::format::inert(&d.message)}</td>
                                </tr>
                            }) }
                            </tbody>
                        </table>
                    }
                    if r.hidden_events > 0 {
                        <p class="warn">{format!("{} events nested deeper than the timeline draws are not shown there.", format::thousands(r.hidden_events))}</p>
                    }
                </article>
            }) }
        </section>
    }
}
