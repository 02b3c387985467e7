//! A collective's members across ranks. When the selected event is a member of a collective the
//! analysis matched across ranks ([`rankscope_core::view::members`], held by the job view), or
//! the host op that issued one (a `c10d::` / `nccl:` op around its launch), the args panel lists
//! every member: its rank, its entry relative to the first member's (aligned
//! clock), its duration, its wait for the last member and its time after the last one entered.
//! A click on a member selects it (its worker says where it is drawn, `Query::Place`) and shows
//! the whole collective, scrolled to that rank; `[` and `]` step to the previous / next member.
//! Every member is outlined on its lane while the selection is one of them.

use super::*;
use rankscope_core::view::members::Collective;

/// The selection's collective, when it has one: the collective it is a member of, else (a
/// host communication op: `c10d::allreduce_`, `nccl:all_reduce`) the one it issued.
fn collective_of<'a>(job: &'a JobView, id: RankId, d: &EventDetail) -> Option<&'a Collective> {
    let rank = job.ranks.iter().find(|(k, _)| *k == id).map(|(_, r)| r.rank)?;
    if let Some((_, c)) = job.members.of(rank, d.event) {
        return Some(c);
    }
    let host_comm = !d.gpu && d.class == rankscope_core::model::Class::Communication.name();
    host_comm
        .then(|| job.members.issued_in(rank, d.start_ns, d.start_ns + d.dur_ns.max(1)).map(|(_, c)| c))
        .flatten()
}

/// Selects an event (None: nothing), and with it its collective's members for the outlines.
pub(super) fn select(c: &mut Ctl, sel: Option<(RankId, u32, u32, EventDetail)>) {
    c.members.clear();
    if let (Some((id, _, _, d)), Some(job)) = (&sel, c.job.clone()) {
        if let Some(coll) = collective_of(&job, *id, d) {
            c.members.extend(
                coll.members.iter().filter_map(|m| Some((job.id_of(m.rank)?, m.lane, m.start_ns, m.end_ns))),
            );
        }
    }
    c.pointer.selected = sel;
}

/// Outlines the members of the selected collective on lane `(id, lane)` (canvas top `y`,
/// height `h`): a dashed box over the lane's height, so a member shows at any nesting.
pub(super) fn outline(
    g: &CanvasRenderingContext2d,
    c: &Ctl,
    (id, lane): (&RankId, u32),
    y: f64,
    h: f64,
    offset_ns: i64,
    col: &Colors,
) {
    let mut any = false;
    for &(_, _, a, b) in c.members.iter().filter(|(f, l, _, _)| f == id && *l == lane) {
        let (x0, x1) = (c.view.x_of(a, offset_ns), c.view.x_of(b, offset_ns));
        if x1 < GUTTER_W || x0 > c.view.width {
            continue;
        }
        if !any {
            g.set_stroke_style_str(&col.highlight);
            g.set_line_width(2.0);
            let _ = g.set_line_dash(&js_sys::Array::of2(&4.0.into(), &2.0.into()));
            any = true;
        }
        g.stroke_rect(x0 - 2.0, y + 1.0, (x1 - x0).max(3.0) + 4.0, h - 2.0);
    }
    if any {
        let _ = g.set_line_dash(&js_sys::Array::new());
    }
}

/// A click on a member: selects event `event` of rank `rank`.
pub(super) fn on_pick(
    ctl: &Shared,
    selected: &UseStateHandle<Option<panel::Selected>>,
    ctx: Option<Ctx>,
) -> Callback<(u32, u32)> {
    let (ctl, selected) = (ctl.clone(), selected.clone());
    let dispatch = ctx.map(|c| c.dispatch);
    Callback::from(move |(rank, event): (u32, u32)| jump(&ctl, &selected, dispatch.clone(), rank, event))
}

/// Selects member `event` of `rank`: asks its worker where it is drawn, then selects it, shows
/// the whole collective and scrolls to its rank, opens its args and tells the other views.
pub(super) fn jump(
    ctl: &Shared,
    selected: &UseStateHandle<Option<panel::Selected>>,
    dispatch: Option<Callback<Action>>,
    rank: u32,
    event: u32,
) {
    let (pool, id) = {
        let c = ctl.borrow();
        (c.pool.clone(), c.job.as_ref().and_then(|j| j.id_of(rank)))
    };
    let (Some(pool), Some(id)) = (pool, id) else { return };
    let (weak, handle) = (Rc::downgrade(ctl), selected.clone());
    let reply: Reply = Rc::new(move |_, answer, _| {
        let Answer::Placed(Some(placed)) = answer else { return };
        let Some(c) = weak.upgrade() else { return };
        let (hit, detail) = *placed;
        {
            let mut cm = c.borrow_mut();
            select(&mut cm, Some((id, hit.lane, hit.depth, detail.clone())));
            show_collective(&mut cm, rank);
        }
        if let Some(d) = &dispatch {
            d.emit(Action::Select(crate::state::Selection {
                id,
                start_ns: detail.start_ns,
                end_ns: detail.start_ns + detail.dur_ns,
                name: Some(detail.name.clone()),
            }));
        }
        input::open_panel(&c, &handle, Some((id, hit.lane, detail)));
        moved(&c);
    });
    pool.ask(id, Query::Place { event }, Some(reply));
}

/// Zooms to the selected collective's members (all of them in the window, with a margin) and
/// scrolls the selected member's lane into sight (a third down the scrolled rows), else to
/// `rank`.
fn show_collective(c: &mut Ctl, rank: u32) {
    let spans: Vec<(f64, f64)> = c
        .members
        .iter()
        .map(|&(id, _, a, b)| {
            let off = c.offset_of(id);
            let rel = |t: i64| t.saturating_add(off).saturating_sub(c.view.origin) as f64;
            (rel(a), rel(b))
        })
        .collect();
    let (lo, hi) = spans.iter().fold((f64::MAX, f64::MIN), |(lo, hi), &(a, b)| (lo.min(a), hi.max(b)));
    if lo <= hi {
        let span = (hi - lo).max(MIN_WINDOW_NS);
        c.view.ns_per_px = span * 1.3 / c.view.plot_w();
        c.view.clamp();
        c.view.t0 = lo - span * 0.15;
    }
    let lane = c.pointer.selected.as_ref().and_then(|(id, lane, _, _)| {
        c.rows
            .iter()
            .find(|r| matches!(r.kind, RowKind::Lane { id: f, lane: l, .. } if f == *id && l == *lane))
    });
    match lane.map(|r| (r.y, r.pinned)) {
        Some((_, true)) => {}
        Some((y, false)) => {
            c.view.scroll_y = y - c.pinned_h - (c.view.height - c.pinned_h) / 3.0;
            c.view.clamp();
        }
        None => c.scroll_to_rank(rank),
    }
}

/// `[` / `]`: the previous / next member (by rank, around) of the selected collective.
pub(super) fn step(ctl: &Shared, selected: &UseStateHandle<Option<panel::Selected>>, forward: bool) -> bool {
    let (job, sel, dispatch) = {
        let c = ctl.borrow();
        (c.job.clone(), c.pointer.selected.clone(), c.dispatch.clone())
    };
    let (Some(job), Some((id, _, _, d))) = (job, sel) else { return false };
    let Some(coll) = collective_of(&job, id, &d) else { return false };
    let Some(rank) = job.ranks.iter().find(|(k, _)| *k == id).map(|(_, r)| r.rank) else { return false };
    // From a host op, its rank's member is where the steps start.
    let Some(k) = coll.members.iter().position(|m| m.rank == rank) else {
        return false;
    };
    let n = coll.members.len();
    let next = if forward { (k + 1) % n } else { (k + n - 1) % n };
    let m = &coll.members[next];
    jump(ctl, selected, dispatch, m.rank, m.event);
    true
}

/// The panel's part for the selection: a button that pins its rank, and its collective's
/// members when it is one.
pub(super) fn list(
    job: &JobView,
    s: &panel::Selected,
    pins: &[u32],
    on_pick: Callback<(u32, u32)>,
    ctx: Option<&Ctx>,
) -> Html {
    let rank = job.ranks.iter().find(|(k, _)| *k == s.id).map(|(_, r)| r.rank);
    let pin = rank.zip(ctx.cloned()).map(|(r, ctx)| {
        let next = super::pins::toggled(pins, r);
        let label =
            if pins.contains(&r) { format!("Unpin rank {r}") } else { format!("Pin rank {r} on top") };
        let onclick = Callback::from(move |_: MouseEvent| ctx.dispatch.emit(Action::SetPins(next.clone())));
        html! { <button class="small" data-testid="args-pin" {onclick}>{label}</button> }
    });
    let coll = collective_of(job, s.id, &s.detail);
    html! {
        <>
            if let Some(b) = pin { <div class="args-links">{b}</div> }
            if let Some(c) = coll { { table(c, rank, s.detail.event, on_pick) } }
        </>
    }
}

/// The members' table: one row per rank, the selected one marked, each a button.
fn table(c: &Collective, rank: Option<u32>, event: u32, on_pick: Callback<(u32, u32)>) -> Html {
    // The selection is a member, or the host op that issued its rank's member.
    let member = c.members.iter().any(|m| Some(m.rank) == rank && m.event == event);
    let first = c.first_ns();
    let group = if c.pg.is_empty() { String::new() } else { format!(" in group {}", c.pg) };
    html! {
        <div class="members" data-testid="members" data-count={c.members.len().to_string()}>
            <p class="muted">{format!("{} of step {}{group}: its members on {} ranks (start from the first member's entry, aligned clocks; [ and ] step through them)",
                c.kind.name(), c.step, c.members.len())}</p>
            <table class="args-table">
                <thead><tr><th>{"rank"}</th><th>{"start"}</th><th>{"duration"}</th><th>{"waited"}</th><th>{"after the last entered"}</th></tr></thead>
                <tbody>
                { for c.members.iter().map(|m| {
                    let me = Some(m.rank) == rank && (m.event == event || !member);
                    let pick = { let on_pick = on_pick.clone(); let (r, e) = (m.rank, m.event); Callback::from(move |_: MouseEvent| on_pick.emit((r, e))) };
                    html! {
                        <tr data-testid="member" data-rank={m.rank.to_string()} data-event={m.event.to_string()} data-start-ns={m.start_ns.to_string()}
                            data-selected={me.to_string()} class={classes!(me.then_some("member-selected"))}>
                            <td><button class="small" data-testid="member-pick" onclick={pick} disabled={me && member}
                                title="Select this member and show the collective">{format!("rank {}", m.rank)}</button></td>
                            <td data-testid="member-start">{format!("+{}", format::duration((m.aligned_ns - first) as f64))}</td>
                            <td>{format::duration((m.end_ns - m.start_ns) as f64)}</td>
                            <td data-testid="member-wait">{format::duration(m.wait_ns as f64)}</td>
                            <td>{format::duration(m.after_last_ns as f64)}</td>
                        </tr>
                    }
                }) }
                </tbody>
            </table>
        </div>
    }
}
