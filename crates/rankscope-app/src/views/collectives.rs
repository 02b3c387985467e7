//! Collectives: one row per kind and process group (`analysis.collectives`), sortable by any
//! column; a row opens the timeline at the collective's first execution. With a layout, each
//! row says its group's role, and the rows can be filtered to a group or a role
//! ([`crate::groups::Filter`]).

use yew::prelude::*;

use super::group_filter::GroupFilter;
use super::Ctx;
use crate::format;
use crate::groups::Filter;
use crate::state::{Action, JobView};
use rankscope_core::analyze::collectives::CollectiveStats;

#[derive(Properties, PartialEq, Debug)]
pub struct Props {
    pub job: std::rc::Rc<JobView>,
    #[prop_or_default]
    pub filter: Option<Filter>,
}

/// The sortable columns: title, tooltip, and the key (None sorts last).
type Key = fn(&CollectiveStats) -> Option<f64>;
const COLUMNS: &[(&str, &str, Key)] = &[
    ("Count", "collectives matched across ranks", |c| Some(c.count as f64)),
    ("Size p50", "median message size, as nccl-tests counts it", |c| c.bytes_p50.map(|b| b as f64)),
    ("Duration p50", "median duration over every rank's execution", |c| Some(c.dur_p50_ns as f64)),
    ("Duration p99", "99th percentile of the duration", |c| Some(c.dur_p99_ns as f64)),
    ("Bus bandwidth", "busbw (GB/s) = algbw × nccl-tests' factor, from the transfer time", |c| c.busbw_gbps),
    (
        "Transfer",
        "mean transfer time: the shortest duration over the ranks of one collective (moving data)",
        |c| c.transfer_mean_ns.map(|v| v as f64),
    ),
    ("Sync wait", "mean time a rank waited for the others (duration − transfer)", |c| {
        c.sync_wait_mean_ns.map(|v| v as f64)
    }),
    ("Skew p50", "median arrival skew: latest − earliest aligned start", |c| {
        c.skew_p50_ns.map(|v| v as f64)
    }),
];

#[function_component(Collectives)]
pub fn collectives(p: &Props) -> Html {
    let ctx = use_context::<Ctx>();
    // (column, descending); column usize::MAX sorts by kind then group (the analysis' order).
    let sort = use_state(|| (4usize, true));
    let (col, desc) = *sort;
    let a = &p.job.analysis;
    let layout = a.layout.as_ref();
    // A filter naming nothing in this job (a hash from another one) filters nothing.
    let filter = p.filter.as_ref().filter(|f| f.members(layout).is_some());
    let mut rows: Vec<&CollectiveStats> =
        a.collectives.iter().filter(|c| filter.is_none_or(|f| f.keeps_pg(layout, &c.pg))).collect();
    if let Some((_, _, key)) = COLUMNS.get(col) {
        rows.sort_by(|x, y| {
            let (kx, ky) = (key(x), key(y));
            match (kx, ky) {
                (Some(u), Some(v)) => {
                    let o = u.total_cmp(&v);
                    if desc {
                        o.reverse()
                    } else {
                        o
                    }
                }
                (Some(_), None) => std::cmp::Ordering::Less,
                (None, Some(_)) => std::cmp::Ordering::Greater,
                (None, None) => std::cmp::Ordering::Equal,
            }
        });
    }
    let header = |i: usize, title: &str, tip: &str| {
        let sort = sort.clone();
        let onclick = Callback::from(move |_| {
            let (c, d) = *sort;
            sort.set(if c == i { (i, !d) } else { (i, true) });
        });
        let mark = if i == col {
            if desc {
                " ▼"
            } else {
                " ▲"
            }
        } else {
            ""
        };
        html! { <th class="num sortable" title={tip.to_string()} {onclick} data-testid={format!("sort-{i}")}>{format!("{title}{mark}")}</th> }
    };
    html! {
        <section class="collectives" data-testid="collectives">
            <p class="muted">{"Per kind and process group. Transfer = the shortest duration over the ranks of one collective; sync wait = a rank's duration − transfer; skew = latest − earliest aligned start. Click a column to sort, a row to see its first execution in the timeline."}</p>
            <div class="toolbar">
                <GroupFilter job={p.job.clone()} filter={p.filter.clone()} what="collectives" shown={Some((rows.len(), a.collectives.len()))} />
            </div>
            if a.collectives.is_empty() {
                <p>{"No collective was found in these traces."}</p>
            } else if rows.is_empty() {
                <p>{"No collective of this filter was matched."}</p>
            }
            <table class="coll-table" data-testid="collectives-table">
                <thead><tr>
                    <th>{"Kind"}</th><th>{"Group"}</th>
                    if layout.is_some() { <th title="what the group is for (the layout's role)">{"Role"}</th> }
                    { for COLUMNS.iter().enumerate().map(|(i, (t, tip, _))| header(i, t, tip)) }
                </tr></thead>
                <tbody>
                { for rows.iter().map(|c| {
                    let kind = c.kind.name();
                    let first = p.job.first_op.get(&(kind.to_string(), c.pg.clone())).copied();
                    let onclick = {
                        let ctx = ctx.clone();
                        Callback::from(move |_| {
                            if let (Some(ctx), Some((id, start_ns, end_ns))) = (&ctx, first) {
                                ctx.dispatch.emit(Action::Open { id, step: None, start_ns, end_ns });
                            }
                        })
                    };
                    let role = layout.map(|l| l.role_of(&c.pg).as_str());
                    html! {
                        <tr class={classes!(first.is_some().then_some("link"))} {onclick} data-testid="collective-row"
                            data-kind={kind} data-pg={c.pg.clone()} data-count={c.count.to_string()}
                            data-instances={c.instances.to_string()} data-role={role}>
                            <td>{kind.replace('_', " ")}</td>
                            <td class="name" title={c.pg.clone()}>{if c.pg.is_empty() { "–".to_string() } else { c.pg.clone() }}</td>
                            if let Some(r) = role { <td data-testid="role">{r}</td> }
                            <td class="num">{format::thousands(c.count as u64)}</td>
                            <td class="num">{c.bytes_p50.map(|b| format::bytes(b.max(0) as u64)).unwrap_or_else(|| "–".into())}</td>
                            <td class="num">{format::duration(c.dur_p50_ns as f64)}</td>
                            <td class="num">{format::duration(c.dur_p99_ns as f64)}</td>
                            <td class="num" title={format!("basis: {}", c.bw_basis)}>{c.busbw_gbps.map(|b| if b >= 0.01 { format!("{b:.2} GB/s") } else { format!("{:.2} MB/s", b * 1e3) }).unwrap_or_else(|| "–".into())}</td>
                            <td class="num" data-testid="transfer">{c.transfer_mean_ns.map(|v| format::duration(v as f64)).unwrap_or_else(|| "–".into())}</td>
                            <td class="num" data-testid="sync-wait">{c.sync_wait_mean_ns.map(|v| format::duration(v as f64)).unwrap_or_else(|| "–".into())}</td>
                            <td class="num">{c.skew_p50_ns.map(|v| format::duration(v as f64)).unwrap_or_else(|| "–".into())}</td>
                        </tr>
                    }
                }) }
                </tbody>
            </table>
        </section>
    }
}
