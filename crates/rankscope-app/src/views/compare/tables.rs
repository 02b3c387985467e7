//! The Compare view's tables: what explains the change (`comparison.attribution`), the figures
//! and regions that moved (sortable, the largest change first), and the findings that
//! appeared, disappeared or changed their saving. Each shows a bounded number of rows (a job of
//! 1,024 ranks has tens of thousands of figure rows) and says how many more there are; the
//! JSON download has them all.

use std::rc::Rc;

use rankscope_core::compare::verdict::signed_dur;
use rankscope_core::compare::{FigureDiff, FindingChange, Presence, RegionDiff, Shift};
use yew::prelude::*;

use crate::format;
use crate::state::Compared;

/// Rows of the delta table shown at first, and added by "Show more".
const PAGE_ROWS: usize = 100;
/// Rows of the findings table shown.
const MAX_FINDINGS: usize = 60;

#[derive(Properties, PartialEq, Debug)]
pub struct Props {
    pub compared: Rc<Compared>,
}

fn opt_dur(v: Option<i64>) -> String {
    v.map_or("–".into(), |x| format::duration(x as f64))
}

fn share(s: Option<f64>) -> String {
    s.map_or("–".into(), |s| format!("{:.0}%", 100.0 * s))
}

fn ranks_text(ranks: &[u32]) -> String {
    if ranks.is_empty() {
        "–".into()
    } else {
        format::ranges(ranks)
    }
}

/// "What explains it": each cause whose saving moved, and the job's distance from its ideal.
#[function_component(Explained)]
pub fn explained(p: &Props) -> Html {
    let c = &p.compared.comparison;
    let a = &c.attribution;
    let ideal_moved = a.behind_ideal.as_ref().is_some_and(|b| b.delta_ns.abs() > c.step_time.floor_ns);
    if a.causes.is_empty() && !ideal_moved {
        return html! {
            <p class="muted" data-testid="compare-explained-none">{"What explains it: no cause's saving moved beyond the floor between the runs."}</p>
        };
    }
    html! {
        <>
            <h2>{"What explains it"}<span class="muted">{"(the what-if answers of both runs)"}</span></h2>
            <table class="compare-explained" data-testid="compare-explained">
                <thead><tr>
                    <th>{"cause"}</th><th>{"ranks"}</th><th>{"where"}</th><th class="num">{"saving per step, base → new"}</th>
                    <th class="num">{"explains"}</th><th class="num">{"of the change"}</th><th>{"from"}</th>
                </tr></thead>
                <tbody>
                { for a.causes.iter().map(|x| html! {
                    <tr data-testid="attribution-row" data-id={x.id.as_str()} data-ranks={x.ranks.iter().map(|r| r.to_string()).collect::<Vec<_>>().join(",")}
                        data-explained-ns={x.explained_ns.to_string()}>
                        <td>{x.id.as_str().replace('_', " ")}</td>
                        <td>{ranks_text(&x.ranks)}</td>
                        <td class="name" title={x.location.join(" > ")}>{where_text(&x.location)}</td>
                        <td class="num">{format!("{} → {}", opt_dur(x.gain_base_ns), opt_dur(x.gain_new_ns))}</td>
                        <td class="num"><strong>{signed_dur(x.explained_ns)}</strong></td>
                        <td class="num">{share(x.share)}</td>
                        <td>{if x.replayed { "replay" } else { "estimate" }}</td>
                    </tr>
                }) }
                if let Some(b) = &a.behind_ideal {
                    <tr data-testid="behind-ideal-row" data-delta-ns={b.delta_ns.to_string()}>
                        <td>{"behind the ideal step"}</td><td>{"all"}</td><td></td>
                        <td class="num">{format!("{} → {}", format::duration(b.base_ns as f64), format::duration(b.new_ns as f64))}</td>
                        <td class="num"><strong>{signed_dur(b.delta_ns)}</strong></td>
                        <td class="num">{share(b.share)}</td>
                        <td>{"replay"}</td>
                    </tr>
                }
                </tbody>
            </table>
            <p class="muted">{"A cause explains the change by which its saving moved; the savings of two causes may overlap. \
                The ideal step is every rank at its peers' typical speed."}</p>
        </>
    }
}

/// A region path below the step, as the report writes it.
fn where_text(location: &[String]) -> String {
    let path: Vec<&str> = location.iter().map(String::as_str).filter(|n| *n != "ProfilerStep").collect();
    if path.is_empty() {
        "–".into()
    } else {
        path.join(" > ")
    }
}

/// One row of the delta table: a per-step figure or a region, of the job or of one rank.
#[derive(Clone, Copy)]
enum Delta<'a> {
    Figure(&'a FigureDiff),
    Region(&'a RegionDiff),
}

impl Delta<'_> {
    fn shift(&self) -> &Shift {
        match self {
            Delta::Figure(f) => &f.shift,
            Delta::Region(r) => &r.shift,
        }
    }

    fn beyond_noise(&self) -> bool {
        match self {
            Delta::Figure(f) => f.beyond_noise,
            Delta::Region(r) => r.beyond_noise,
        }
    }

    /// The rank, none for the job (a figure) or the mean per rank (a region).
    fn rank(&self) -> Option<u32> {
        match self {
            Delta::Figure(f) => f.rank,
            Delta::Region(r) => r.rank,
        }
    }

    fn who(&self) -> String {
        match (self, self.rank()) {
            (_, Some(r)) => format!("rank {r}"),
            (Delta::Figure(_), None) => "job".into(),
            (Delta::Region(_), None) => "mean".into(),
        }
    }

    fn what(&self) -> String {
        match self {
            Delta::Figure(f) => f.figure.words().to_string(),
            Delta::Region(r) => {
                let presence = match r.presence {
                    Presence::Both => String::new(),
                    p => format!(" ({})", p.as_str()),
                };
                let parent = if r.parent.is_empty() { String::new() } else { format!("{} > ", r.parent) };
                format!("{parent}{}{presence}", r.name)
            }
        }
    }
}

/// How the delta table is sorted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum SortBy {
    /// The largest change either way first.
    Impact,
    /// The largest slowdown first.
    Change,
    /// The job first, then by rank.
    Who,
}

/// The figures and regions of both runs, the largest change first.
#[function_component(Deltas)]
pub fn deltas(p: &Props) -> Html {
    let sort = use_state(|| SortBy::Impact);
    let beyond_only = use_state(|| false);
    let shown = use_state(|| PAGE_ROWS);
    let c = &p.compared.comparison;
    // The order, made once per comparison, sort and filter (tens of thousands of rows).
    let order = use_memo((p.compared.clone(), *sort, *beyond_only), |(compared, sort, beyond_only)| {
        let c = &compared.comparison;
        let rows: Vec<Delta> =
            c.figures.iter().map(Delta::Figure).chain(c.regions.iter().map(Delta::Region)).collect();
        let mut idx: Vec<usize> =
            (0..rows.len()).filter(|&i| !*beyond_only || rows[i].beyond_noise()).collect();
        let key = |i: &usize| {
            let d = rows[*i];
            let (delta, rank) = (d.shift().delta_ns, d.rank().map_or(-1, i64::from));
            match sort {
                SortBy::Impact => (delta.abs().saturating_neg(), rank),
                SortBy::Change => (delta.saturating_neg(), rank),
                SortBy::Who => (rank, delta.abs().saturating_neg()),
            }
        };
        idx.sort_by_key(key);
        idx
    });
    let rows: Vec<Delta> =
        c.figures.iter().map(Delta::Figure).chain(c.regions.iter().map(Delta::Region)).collect();
    let beyond = rows.iter().filter(|d| d.beyond_noise()).count();
    let set_sort = |s: SortBy| {
        let sort = sort.clone();
        Callback::from(move |_| sort.set(s))
    };
    let toggle = {
        let beyond_only = beyond_only.clone();
        Callback::from(move |_: Event| beyond_only.set(!*beyond_only))
    };
    let more = {
        let shown = shown.clone();
        Callback::from(move |_| shown.set(*shown + PAGE_ROWS * 5))
    };
    let left = order.len().saturating_sub(*shown);
    let arrow = |s: SortBy| if *sort == s { " ▾" } else { "" };
    html! {
        <>
            <h2>{"What moved"}<span class="muted">{format!("{} figures and regions per step, {beyond} beyond noise", rows.len())}</span></h2>
            <div class="toolbar">
                <label><input type="checkbox" checked={*beyond_only} onchange={toggle} data-testid="compare-beyond-only" />{" only the changes beyond noise"}</label>
            </div>
            <table class="compare-deltas" data-testid="compare-deltas" data-sort={format!("{:?}", *sort).to_lowercase()} data-rows={order.len().to_string()}>
                <thead><tr>
                    <th class="sortable" data-testid="sort-who" onclick={set_sort(SortBy::Who)}>{format!("who{}", arrow(SortBy::Who))}</th>
                    <th>{"figure or region"}</th>
                    <th class="num">{"base"}</th><th class="num">{"new"}</th>
                    <th class="num sortable" data-testid="sort-change" onclick={set_sort(SortBy::Change)}>{format!("change{}", arrow(SortBy::Change))}</th>
                    <th class="num sortable" data-testid="sort-impact" onclick={set_sort(SortBy::Impact)}>{format!("|change|{}", arrow(SortBy::Impact))}</th>
                    <th class="num">{"interval"}</th><th>{"judged"}</th>
                </tr></thead>
                <tbody>
                { for order.iter().take(*shown).filter_map(|&i| rows.get(i)).map(|d| {
                    let s = d.shift();
                    html! {
                        <tr data-testid="delta-row" data-delta-ns={s.delta_ns.to_string()} data-beyond-noise={d.beyond_noise().to_string()}
                            class={classes!(d.beyond_noise().then_some("beyond"))}>
                            <td>{d.who()}</td>
                            <td class="name" title={d.what()}>{d.what()}</td>
                            <td class="num">{format::duration(s.base_ns as f64)}</td>
                            <td class="num">{format::duration(s.new_ns as f64)}</td>
                            <td class="num">{signed_dur(s.delta_ns)}</td>
                            <td class="num">{format::duration(s.delta_ns.abs() as f64)}</td>
                            <td class="num">{format!("{}…{}", signed_dur(s.lo_ns), signed_dur(s.hi_ns))}</td>
                            <td>{if d.beyond_noise() { html! { <strong>{"beyond noise"}</strong> } } else { html! { <span class="muted">{"within noise"}</span> } }}</td>
                        </tr>
                    }
                }) }
                if order.is_empty() {
                    <tr><td colspan="8" class="muted">{if *beyond_only { "Nothing moved beyond noise." } else { "No figure or region in both runs." }}</td></tr>
                }
                if left > 0 {
                    <tr data-testid="compare-deltas-more"><td colspan="8" class="muted">
                        {format!("and {} more rows (the JSON download has them all) ", format::thousands(left as u64))}
                        <button class="small" onclick={more}>{"Show more"}</button>
                    </td></tr>
                }
                </tbody>
            </table>
        </>
    }
}

/// The findings that appeared, disappeared, or whose saving changed.
#[function_component(Findings)]
pub fn findings(p: &Props) -> Html {
    let c = &p.compared.comparison;
    let changed: Vec<_> = c
        .findings
        .iter()
        .filter(|f| f.change != FindingChange::Both || f.impact_base_ns != f.impact_new_ns)
        .collect();
    let same = c.findings.len() - changed.len();
    let left = changed.len().saturating_sub(MAX_FINDINGS);
    html! {
        <>
            <h2>{"Findings"}<span class="muted">{format!("{} appeared, disappeared or changed; {same} the same in both runs", changed.len())}</span></h2>
            if changed.is_empty() {
                <p class="muted" data-testid="compare-findings-none">{"No finding appeared, disappeared or changed its saving."}</p>
            } else {
            <table class="compare-findings" data-testid="compare-findings">
                <thead><tr><th>{"finding"}</th><th>{"ranks"}</th><th>{"where"}</th><th>{"change"}</th><th class="num">{"saving per step, base → new"}</th><th>{"message"}</th></tr></thead>
                <tbody>
                { for changed.iter().take(MAX_FINDINGS).map(|f| html! {
                    <tr data-testid="finding-change" data-id={f.id.as_str()} data-change={f.change.as_str()}>
                        <td>{f.id.as_str().replace('_', " ")}</td>
                        <td>{ranks_text(&f.ranks)}</td>
                        <td class="name" title={f.location.join(" > ")}>{where_text(&f.location)}</td>
                        <td class={classes!("change", f.change.as_str())}>{match f.change {
                            FindingChange::Appeared => "appeared",
                            FindingChange::Disappeared => "disappeared",
                            FindingChange::Both => "saving changed",
                        }}</td>
                        <td class="num">{format!("{} → {}", opt_dur(f.impact_base_ns), opt_dur(f.impact_new_ns))}</td>
                        <td class="note"><div class="clamp" title={f.message.clone()}>{f.message.clone()}</div></td>
                    </tr>
                }) }
                if left > 0 {
                    <tr data-testid="compare-findings-more"><td colspan="6" class="muted">{format!("and {left} more (the JSON download has them all)")}</td></tr>
                }
                </tbody>
            </table>
            }
        </>
    }
}
