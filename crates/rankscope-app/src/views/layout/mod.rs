//! Layout: the job as its parallel layout (`analysis.layout`, `analysis.wait_chain`). The ranks
//! on a grid of the mesh's dimensions ([`grid`]), hosts marked, each rank coloured by a per-step
//! figure the user picks, the lead finding's ranks and the chain of waits drawn across the grid
//! ([`cells`]); the groups listed by role. Picking a group (or a role) sets the views' shared
//! filter ([`crate::groups::Filter`], in the URL hash): its members are highlighted and its
//! collectives and waits shown below, and Ranks × steps, Collectives and the Timeline follow it.
//! Clicking a rank lists its groups.
//!
//! Shown when the analysis has a layout; without a mesh (groups that form none) the ranks go in
//! order and the groups are listed.

pub mod cells;
pub mod grid;
pub mod info;
pub mod path;

use std::rc::Rc;

use rankscope_core::analyze::collectives::CollectiveStats;
use rankscope_core::analyze::layout::{Group, Layout, Role};
use yew::prelude::*;

use super::rows::{RowCanvas, Rows};
use super::steps::{Metric, TABLE_MAX_RANKS};
use super::Ctx;
use crate::format::{self, ranges};
use crate::groups::Filter;
use crate::state::{Action, JobView, View};
use cells::Cells;
use info::{role_order, Info};

#[derive(Properties, PartialEq, Debug)]
pub struct Props {
    pub job: Rc<JobView>,
    pub filter: Option<Filter>,
}

/// Roles with more groups than this list them in a `<select>` instead of one button each.
const CHIPS_MAX: usize = 16;

fn emit(ctx: &Option<Ctx>, a: Action) {
    if let Some(c) = ctx {
        c.dispatch.emit(a);
    }
}

#[function_component(LayoutView)]
pub fn layout_view(p: &Props) -> Html {
    let ctx = use_context::<Ctx>();
    let metric = use_state(|| Metric::Wait);
    let clicked = use_state(|| None::<u32>);
    // Every edge of the chain drawn, not only the way the delay went.
    let every_wait = use_state(|| false);
    let key = Rc::as_ptr(&p.job) as usize;
    let info = {
        let job = p.job.clone();
        use_memo(key, move |_| Rc::new(Info::new(&job)))
    };
    let on_click = {
        let clicked = clicked.clone();
        Callback::from(move |r: u32| clicked.set(Some(r)))
    };
    let m = *metric;
    let cells = {
        let (job, info, filter, c, all) =
            (p.job.clone(), (*info).clone(), p.filter.clone(), *clicked, *every_wait);
        use_memo((key, m, p.filter.clone(), c, all), move |_| {
            Rc::new(Cells::new(info, job, m, filter.as_ref(), c, all, on_click)) as Rc<dyn Rows>
        })
    };
    let a = &p.job.analysis;
    let Some(layout) = &a.layout else {
        return html! {
            <section class="layout-view" data-testid="layout">
                <p>{"No process group is named in these inputs: every collective ran on one group, so there is no parallel layout to show."}</p>
            </section>
        };
    };
    let grid = &info.grid;
    let hosts = &info.hosts;
    let pick = |f: Option<Filter>| {
        let ctx = ctx.clone();
        Callback::from(move |_: MouseEvent| emit(&ctx, Action::SetFilter(f.clone())))
    };

    // The mesh and the hosts, then where the delay starts and the way it went.
    let host_words = match hosts.len() {
        0 => "the traces name no host".to_string(),
        1 => format!("one host ({})", hosts[0]),
        n => format!("{n} hosts (thick lines separate them)"),
    };
    let head = html! {
        <p class="layout-head" data-testid="layout-head">
            if grid.mesh {
                {"Mesh: "}<strong data-testid="layout-mesh">{layout.mesh_words()}</strong>
                {format!(" · {} ranks on {host_words} · columns: {}{}{}", a.ranks.len(), grid.cols.name,
                    if grid.rows.name.is_empty() { String::new() } else { format!(", rows: {}", grid.rows.name) },
                    if grid.blocks.is_empty() { String::new() } else {
                        format!(", blocks: {}", grid.blocks.iter().map(|b| b.name.as_str()).collect::<Vec<_>>().join(" × "))
                    })}
            } else {
                <strong data-testid="layout-mesh">{"No mesh"}</strong>
                {format!(": the groups form no grid of dimensions, so the {} ranks are in order ({host_words}); the groups are listed below.", a.ranks.len())}
            }
        </p>
    };
    let chain = chain_words(&p.job);

    // The figure's scale.
    let vals = a.rank_totals.iter().filter_map(|t| m.per_step(t));
    let (lo, hi) = (vals.clone().min().unwrap_or(0), vals.max().unwrap_or(0));
    let toolbar = html! {
        <div class="toolbar">
            <span class="muted">{"Colour by"}</span>
            { for Metric::ALL.iter().map(|&mm| {
                let metric = metric.clone();
                html! {
                    <button class={classes!("tab", (mm == m).then_some("active"))} data-testid={format!("layout-metric-{}", mm.name())}
                        onclick={Callback::from(move |_| metric.set(mm))}>{mm.title()}</button>
                }
            }) }
            <span class="muted">{format!("per step · {} (light) to {} (dark)", format::duration(lo as f64), format::duration(hi as f64))}</span>
        </div>
    };
    let legend = html! {
        <div class="legend layout-legend">
            if a.findings.first().is_some_and(|f| f.ranks.len() < a.ranks.len()) {
                <span class="legend-item"><span class="swatch sw-lead"></span>{"the lead finding's rank"}</span>
            }
            if let Some(c) = &a.wait_chain {
                <span class="legend-item"><span class="swatch sw-origin"></span>{"where the delay starts"}</span>
                <span class="legend-item"><span class="swatch sw-arrow"></span>{"waits: from the rank waited for to the one that waited, as thick as the wait"}</span>
                if c.edges.len() > c.inherited.len() {
                    <button class={classes!("small", (*every_wait).then_some("active"))} data-testid="layout-every-wait"
                        title="By default each rank that waited gets one arrow: its longest wait (a group of the mesh first)"
                        onclick={{ let every_wait = every_wait.clone(); Callback::from(move |_| every_wait.set(!*every_wait)) }}>
                        {format!("every wait ({})", c.edges.len())}
                    </button>
                }
            }
            if hosts.len() > 1 { <span class="legend-item"><span class="swatch sw-host"></span>{"host boundary"}</span> }
            if p.filter.is_some() { <span class="legend-item"><span class="swatch sw-picked"></span>{"the picked group's members"}</span> }
        </div>
    };
    let label = format!(
        "The {} ranks on {}, coloured by {} per step; {}",
        a.ranks.len(),
        grid.words(),
        m.title(),
        chain.clone().unwrap_or_else(|| "no chain of waits".to_string())
    );
    let table = (a.ranks.len() <= TABLE_MAX_RANKS).then(|| hidden_table(&p.job, &info, m));
    let rank_panel = (*clicked).map(|r| rank_panel(&p.job, &info, layout, r, &pick, &ctx));
    html! {
        <section class="layout-view" data-testid="layout">
            { head }
            if let Some(words) = &chain {
                <p class="layout-chain" data-testid="layout-chain">{words.clone()}</p>
            }
            { toolbar }
            { legend }
            <div class="layout-main">
                <RowCanvas rows={(*cells).clone()} testid="layout-grid" metric={Some(m.name())} {label}>
                    { for table }
                </RowCanvas>
                <div class="layout-side">
                    { for rank_panel }
                    { picked_panel(&p.job, layout, p.filter.as_ref(), &ctx) }
                </div>
            </div>
            <h2>{"Groups by role"}</h2>
            { groups_list(&p.job, layout, p.filter.as_ref(), &ctx) }
        </section>
    }
}

/// "The delay starts at rank 3 (host stall, the lead finding) and travels 3 → 2 (tensor group 2,
/// 150 ms per step), …; ranks 0–2 only inherited it.": the way the grid draws by default
/// ([`path`]), nearest the origins first, and how many other waits are left out.
fn chain_words(job: &JobView) -> Option<String> {
    let a = &job.analysis;
    let c = a.wait_chain.as_ref()?;
    let mesh: Vec<Role> =
        a.layout.as_ref().map(|l| l.mesh.iter().map(|d| d.role).collect()).unwrap_or_default();
    let edges: Vec<path::Edge> = c
        .edges
        .iter()
        .map(|e| path::Edge { from: e.from, to: e.to, wait_ns: e.wait_ns, mesh: mesh.contains(&e.role) })
        .collect();
    let drawn = path::main_path(&edges, &c.origins);
    // Nearest the origins first, then the longest.
    let hops = path::hops(&edges, &c.origins);
    let mut way: Vec<_> = c.edges.iter().zip(&drawn).filter(|(_, d)| **d).map(|(e, _)| e).collect();
    way.sort_by_key(|e| (hops.get(&e.from).copied().unwrap_or(u32::MAX), -e.wait_ns));
    let lead =
        a.findings.first().filter(|f| !f.ranks.is_empty() && f.ranks.iter().all(|r| c.origins.contains(r)));
    let shown = way.iter().take(6).map(|e| {
        format!(
            "{} → {} ({} group {}, {} per step)",
            e.from,
            e.to,
            e.role,
            e.group,
            format::duration(e.wait_ns as f64)
        )
    });
    let more = way.len().saturating_sub(6);
    let smaller = c.edges.len() - way.len();
    let plural = |n: usize| if n == 1 { "" } else { "s" };
    Some(format!(
        "The delay starts at rank{} {}{} and travels {}{}{}{}.",
        plural(c.origins.len()),
        ranges(&c.origins),
        lead.map_or(String::new(), |f| format!(" ({}, the lead finding)", f.id.as_str().replace('_', " "))),
        shown.collect::<Vec<_>>().join(", "),
        if more > 0 { format!(" and {more} more way{}", plural(more)) } else { String::new() },
        if c.inherited.is_empty() {
            String::new()
        } else {
            format!("; rank{} {} only inherited it", plural(c.inherited.len()), ranges(&c.inherited))
        },
        if smaller > 0 {
            format!(" ({smaller} other, shorter or parallel wait{} under “every wait”)", plural(smaller))
        } else {
            String::new()
        },
    ))
}

/// Every rank's place, host, figure and groups as a visually hidden table (small jobs).
fn hidden_table(job: &JobView, info: &Info, m: Metric) -> Html {
    let a = &job.analysis;
    let layout = a.layout.as_ref();
    html! {
        <table class="visually-hidden" data-testid="layout-table">
            <caption>{format!("Ranks on the layout, {} per step", m.title())}</caption>
            <tr><th>{"rank"}</th><th>{"place"}</th><th>{"host"}</th><th>{m.title()}</th><th>{"groups"}</th><th>{"waits"}</th></tr>
            { for info.grid.places.iter().enumerate().map(|(i, p)| {
                let v = a.rank_totals.iter().find(|t| t.rank == p.rank).and_then(|t| m.per_step(t));
                let host = info.host_of.get(i).copied().flatten().and_then(|h| info.hosts.get(h as usize)).cloned();
                let groups: Vec<String> = info.groups_of.get(i).into_iter().flatten()
                    .filter_map(|&gi| layout.and_then(|l| l.groups.get(gi)))
                    .map(|g| format!("{} {}", g.role, g.name)).collect();
                let role = a.wait_chain.as_ref().map_or("", |c| {
                    if c.origins.contains(&p.rank) { "where the delay starts" } else if c.inherited.contains(&p.rank) { "inherited" } else { "" }
                });
                html! {
                    <tr data-testid="layout-rank" data-rank={p.rank.to_string()} data-value={v.map(|v| v.to_string())}>
                        <th>{format!("rank {}", p.rank)}</th><td>{info.coords(p)}</td><td>{host.unwrap_or_default()}</td>
                        <td>{v.map_or("–".to_string(), |v| format::duration(v as f64))}</td><td>{groups.join(", ")}</td><td>{role}</td>
                    </tr>
                }
            }) }
        </table>
    }
}

/// The clicked rank: its place, host and groups (each one a button that picks it).
fn rank_panel(
    job: &JobView,
    info: &Info,
    layout: &Layout,
    rank: u32,
    pick: &dyn Fn(Option<Filter>) -> Callback<MouseEvent>,
    ctx: &Option<Ctx>,
) -> Html {
    let Some(&i) = info.index_of.get(&rank) else { return html! {} };
    let Some(place) = info.grid.places.get(i) else { return html! {} };
    let host = info.host_of.get(i).copied().flatten().and_then(|h| info.hosts.get(h as usize)).cloned();
    let open = {
        let (ctx, id) = (ctx.clone(), job.id_of(rank));
        let step =
            job.analysis.steps.first().and_then(|s| {
                s.per_rank.iter().find(|r| r.rank == rank).map(|r| (s.step, r.start_ns, r.end_ns))
            });
        Callback::from(move |_: MouseEvent| {
            if let (Some(id), Some((step, start_ns, end_ns))) = (id, step) {
                emit(&ctx, Action::Open { id, step: Some(step), start_ns, end_ns });
            }
        })
    };
    html! {
        <div class="layout-rank panel" data-testid="layout-clicked" data-rank={rank.to_string()}>
            <h3>{format!("Rank {rank}")}</h3>
            <p class="muted">{format!("{}{}", info.coords(place), host.map_or(String::new(), |h| format!(" · host {h}")))}</p>
            <div class="chips">
                { for info.groups_of.get(i).into_iter().flatten().filter_map(|&gi| layout.groups.get(gi)).map(|g| html! {
                    <button class="small" data-testid="layout-rank-group" data-group={g.name.clone()} data-role={g.role.as_str()}
                        onclick={pick(Some(Filter::Group(g.name.clone())))}>
                        {format!("{} group {} ({} ranks)", g.role, g.name, g.ranks.len())}
                    </button>
                }) }
            </div>
            if job.id_of(rank).is_some_and(crate::state::held) {
                <button class="small" data-testid="layout-rank-timeline" onclick={open}>{"Its first step in the timeline"}</button>
            }
        </div>
    }
}

/// The groups a filter picks.
fn picked_groups<'a>(layout: &'a Layout, f: &Filter) -> Vec<&'a Group> {
    match f {
        Filter::Group(name) => layout.group(name).into_iter().collect(),
        Filter::Role(role) => layout.groups.iter().filter(|g| g.role == *role).collect(),
    }
}

/// The picked group (or role): its members, what it costs them, the waits through it and its
/// collectives; buttons to the other views, filtered.
fn picked_panel(job: &JobView, layout: &Layout, filter: Option<&Filter>, ctx: &Option<Ctx>) -> Html {
    let Some(f) = filter else {
        return html! { <p class="muted layout-hint">{"Click a rank for its groups, or pick a group below: its members, collectives and waits show here."}</p> };
    };
    let groups = picked_groups(layout, f);
    if groups.is_empty() {
        return html! { <p class="muted">{format!("This job has no {}.", f.words(None))}</p> };
    }
    let a = &job.analysis;
    let names: Vec<&str> = groups.iter().map(|g| g.name.as_str()).collect();
    let members: Vec<u32> = f.members(Some(layout)).map(|m| m.into_iter().collect()).unwrap_or_default();
    let edges: Vec<_> =
        a.wait_chain.iter().flat_map(|c| &c.edges).filter(|e| names.contains(&e.group.as_str())).collect();
    let colls: Vec<&CollectiveStats> =
        a.collectives.iter().filter(|c| names.contains(&c.pg.as_str())).collect();
    let go = |v: View| {
        let ctx = ctx.clone();
        Callback::from(move |_: MouseEvent| emit(&ctx, Action::SetView(v)))
    };
    let clear = {
        let ctx = ctx.clone();
        Callback::from(move |_: MouseEvent| emit(&ctx, Action::SetFilter(None)))
    };
    let title = match (f, groups.first()) {
        (Filter::Group(_), Some(g)) => format!(
            "{} group {}{}",
            g.role,
            g.name,
            g.desc.as_ref().map_or(String::new(), |d| format!(" ({d})"))
        ),
        _ => format!("{} ({} groups)", f.words(Some(layout)), groups.len()),
    };
    html! {
        <div class="layout-picked panel" data-testid="layout-picked" data-filter={f.key()}
            data-members={members.iter().map(|r| r.to_string()).collect::<Vec<_>>().join(",")}>
            <h3>{title}<button class="small" data-testid="layout-clear" onclick={clear}>{"×"}</button></h3>
            <p><span data-testid="layout-picked-members">{format!("Ranks {}", ranges(&members))}</span>
                {if let [g] = groups[..] { format!(" · {} host{} · {} collectives and exchanges", g.hosts, if g.hosts == 1 { "" } else { "s" }, format::thousands(g.instances)) } else { String::new() }}</p>
            if let [g] = groups[..] {
                <p class="muted">{format!("Role from {}: {}", g.role_from.as_str().replace('_', " "), g.role_evidence)}</p>
            }
            <table class="layout-costs">
                <thead><tr><th>{"Group"}</th><th>{"Ranks"}</th>
                    <th class="num" title="per member and step: its time in the group's collectives that is exposed transfer">{"Exposed transfer"}</th>
                    <th class="num" title="per member and step: waiting in the group's collectives for its other members">{"Waiting"}</th></tr></thead>
                <tbody>
                { for groups.iter().take(32).map(|g| html! {
                    <tr data-testid="layout-picked-group" data-group={g.name.clone()}>
                        <td>{g.name.clone()}</td><td>{short_ranks(&g.ranks)}</td>
                        <td class="num">{format::duration(g.exposed_transfer_ns as f64)}</td>
                        <td class="num">{format::duration(g.wait_ns as f64)}</td>
                    </tr>
                }) }
                if groups.len() > 32 { <tr><td colspan="4" class="muted">{format!("and {} more groups", groups.len() - 32)}</td></tr> }
                </tbody>
            </table>
            <h3>{"Waits through it"}</h3>
            if edges.is_empty() {
                <p class="muted">{"None on the chain of waits."}</p>
            } else {
                <table class="layout-edges">
                    <thead><tr><th>{"Waited for → waited"}</th><th>{"Group"}</th><th class="num">{"Per step"}</th><th class="num">{"Steps"}</th></tr></thead>
                    <tbody>
                    { for edges.iter().take(24).map(|e| html! {
                        <tr data-testid="layout-picked-edge" data-from={e.from.to_string()} data-to={e.to.to_string()} data-group={e.group.clone()}>
                            <td>{format!("rank {} → rank {}", e.from, e.to)}</td><td>{format!("{} {}", e.role, e.group)}</td>
                            <td class="num">{format::duration(e.wait_ns as f64)}</td><td class="num">{e.steps}</td>
                        </tr>
                    }) }
                    </tbody>
                </table>
            }
            <h3>{"Its collectives"}</h3>
            if colls.is_empty() {
                <p class="muted">{"None matched in this group."}</p>
            } else {
                <table class="layout-colls">
                    <thead><tr><th>{"Kind"}</th><th>{"Group"}</th><th class="num">{"Count"}</th><th class="num">{"Size p50"}</th>
                        <th class="num">{"Transfer"}</th><th class="num">{"Sync wait"}</th></tr></thead>
                    <tbody>
                    { for colls.iter().take(32).map(|c| {
                        let kind = c.kind.name();
                        let first = job.first_op.get(&(kind.to_string(), c.pg.clone())).copied();
                        let onclick = {
                            let ctx = ctx.clone();
                            Callback::from(move |_: MouseEvent| {
                                if let Some((id, start_ns, end_ns)) = first {
                                    emit(&ctx, Action::Open { id, step: None, start_ns, end_ns });
                                }
                            })
                        };
                        html! {
                            <tr class={classes!(first.is_some().then_some("link"))} {onclick} data-testid="layout-picked-collective"
                                data-kind={kind} data-pg={c.pg.clone()} data-count={c.count.to_string()}>
                                <td>{kind.replace('_', " ")}</td><td>{c.pg.clone()}</td>
                                <td class="num">{format::thousands(c.count as u64)}</td>
                                <td class="num">{c.bytes_p50.map(|b| format::bytes(b.max(0) as u64)).unwrap_or_else(|| "–".into())}</td>
                                <td class="num">{c.transfer_mean_ns.map(|v| format::duration(v as f64)).unwrap_or_else(|| "–".into())}</td>
                                <td class="num">{c.sync_wait_mean_ns.map(|v| format::duration(v as f64)).unwrap_or_else(|| "–".into())}</td>
                            </tr>
                        }
                    }) }
                    </tbody>
                </table>
            }
            <div class="chips">
                <button class="small" data-testid="layout-go-steps" onclick={go(View::Steps)}>{"Ranks × steps of its members"}</button>
                <button class="small" data-testid="layout-go-collectives" onclick={go(View::Collectives)}>{"Its collectives"}</button>
                <button class="small" data-testid="layout-go-timeline" onclick={go(View::Timeline)}>{"The timeline of its members"}</button>
            </div>
        </div>
    }
}

/// A group's ranks in a table cell: ranges, or the count past a few.
fn short_ranks(r: &[u32]) -> String {
    let s = ranges(r);
    if s.len() > 32 {
        format!(
            "{} ranks ({}…)",
            r.len(),
            r.iter().take(4).map(|x| x.to_string()).collect::<Vec<_>>().join(", ")
        )
    } else {
        s
    }
}

/// Every group by role: a button per role, and per group (a `<select>` for roles with many).
fn groups_list(job: &JobView, layout: &Layout, filter: Option<&Filter>, ctx: &Option<Ctx>) -> Html {
    let set = |f: Option<Filter>| {
        let ctx = ctx.clone();
        Callback::from(move |_: MouseEvent| emit(&ctx, Action::SetFilter(f.clone())))
    };
    let rows = role_order(job).into_iter().map(|role: Role| {
        let groups: Vec<&Group> = layout.groups.iter().filter(|g| g.role == role).collect();
        let role_f = Filter::Role(role);
        let on_select = {
            let ctx = ctx.clone();
            Callback::from(move |e: Event| {
                let el: web_sys::HtmlSelectElement = e.target_unchecked_into();
                emit(&ctx, Action::SetFilter(Filter::from_key(&el.value())));
            })
        };
        let evidence = groups.first().map(|g| g.role_evidence.clone()).unwrap_or_default();
        html! {
            <tr data-testid="layout-role-row" data-role={role.as_str()}>
                <th>
                    <button class={classes!("small", (filter == Some(&role_f)).then_some("active"))} data-testid="layout-role"
                        data-role={role.as_str()} title={evidence} onclick={set(Some(role_f.clone()))}>
                        {format!("{} ({})", role, groups.len())}
                    </button>
                </th>
                <td class="chips">
                if groups.len() <= CHIPS_MAX {
                    { for groups.iter().map(|g| {
                        let f = Filter::Group(g.name.clone());
                        html! {
                            <button class={classes!("small", (filter == Some(&f)).then_some("active"))} data-testid="layout-group"
                                data-group={g.name.clone()} data-role={role.as_str()} data-ranks={g.ranks.iter().map(|r| r.to_string()).collect::<Vec<_>>().join(",")}
                                title={g.desc.clone().unwrap_or_default()} onclick={set(Some(f.clone()))}>
                                {format!("{}: {}", g.name, short_ranks(&g.ranks))}
                            </button>
                        }
                    }) }
                } else {
                    <select data-testid="layout-group-select" data-role={role.as_str()} aria-label={format!("{role} groups")} onchange={on_select}>
                        <option value="" selected={!matches!(filter, Some(Filter::Group(n)) if groups.iter().any(|g| &g.name == n))}>
                            {format!("{} {role} groups…", groups.len())}
                        </option>
                        { for groups.iter().map(|g| {
                            let f = Filter::Group(g.name.clone());
                            html! { <option value={f.key()} selected={filter == Some(&f)}>{format!("{}: {}", g.name, short_ranks(&g.ranks))}</option> }
                        }) }
                    </select>
                }
                </td>
            </tr>
        }
    });
    html! {
        <table class="layout-groups" data-testid="layout-groups">
            <tbody>{ for rows }</tbody>
        </table>
    }
}
