//! Area selection: Shift+drag over the timeline selects a time range over every shown lane (of
//! the ranks not folded or filtered out); each worker sums its ranks' events in it
//! (`Query::Totals`, [`crate::totals`]) and the table under the canvas adds them up: by name
//! and by class, the count, the time inside the range, the mean and the share of the range.
//! The band is drawn from the range's times, so it stays put while the view zooms and pans.
//! With the memory rows on, each shown rank with memory samples is also asked for its memory
//! over the range (`Query::MemorySpan`): per rank and device the most allocated and reserved
//! in it (the value carried in from before the range included), in a third table.

use super::*;
use crate::totals::{Total, Totals};
use rankscope_core::view::memory::MemorySpan;

/// Rows of each table shown (the rest summed in a last row).
const TOP_ROWS: usize = 30;

/// The range's totals as they come back from the ranks.
#[derive(Clone, PartialEq, Default)]
pub(super) struct AreaTotals {
    /// The range, ns from the job's first event on the timeline's clock.
    pub from: i64,
    pub to: i64,
    pub totals: Totals,
    /// Ranks answered, of those asked.
    pub answered: usize,
    pub asked: usize,
    pub failed: Option<String>,
    /// Per rank asked: its number and the range on its own clock (a test hook, `data-ranges`).
    pub ranges: Vec<(u32, i64, i64)>,
    /// With the memory rows on: per rank and device, the memory over the range (rank order).
    pub memory: Vec<(u32, MemorySpan)>,
    /// Ranks asked for their memory, and those that answered.
    pub memory_asked: usize,
    pub memory_answered: usize,
}

/// The time (ns from the job's first event) under canvas x.
pub(super) fn t_at(view: &Viewport, x: f64) -> f64 {
    view.t0 + (x - GUTTER_W).max(0.0) * view.ns_per_px
}

/// Starts a range at canvas x (Shift+mouse down).
pub(super) fn start(c: &mut Ctl, x: f64) {
    let t = t_at(&c.view, x);
    c.pointer.area = Some((t, t));
    c.pointer.area_drag = true;
}

/// Moves the range's free end to canvas x.
pub(super) fn extend(c: &mut Ctl, x: f64) {
    let t = t_at(&c.view, x);
    if let Some((_, b)) = c.pointer.area.as_mut() {
        *b = t;
    }
}

/// Ends the drag: asks every shown rank for its totals over the range (on its own clock, its
/// shown lanes), into `out`. A range under 1 ns (a Shift+click) clears it.
pub(super) fn finish(ctl: &Shared, out: &UseStateHandle<Option<AreaTotals>>) {
    let (range, asks, pool, req) = {
        let mut c = ctl.borrow_mut();
        c.pointer.area_drag = false;
        c.pointer.area_req = c.pointer.area_req.wrapping_add(1);
        let Some((a, b)) = c.pointer.area else { return };
        let (from, to) = (a.min(b).round() as i64, a.max(b).round() as i64);
        if to - from < 1 {
            c.pointer.area = None;
            out.set(None);
            return;
        }
        let mut asks: Vec<(RankId, i64, Vec<u32>)> = Vec::new();
        for row in &c.rows {
            if let RowKind::Lane { id, lane, offset_ns, .. } = &row.kind {
                match asks.last_mut() {
                    Some((k, _, lanes)) if k == id => lanes.push(*lane),
                    _ => asks.push((*id, *offset_ns, vec![*lane])),
                }
            }
        }
        // The ranks whose memory rows are shown (memory rows on, rank not folded).
        let mut memory_asks: Vec<(RankId, i64)> = Vec::new();
        for row in &c.rows {
            if let RowKind::Memory { id, offset_ns, .. } = &row.kind {
                if memory_asks.last().is_none_or(|(k, _)| k != id) {
                    memory_asks.push((*id, *offset_ns));
                }
            }
        }
        ((from, to), (asks, memory_asks), c.pool.clone(), c.pointer.area_req)
    };
    let (asks, memory_asks) = asks;
    let (from, to) = range;
    let (origin, job) = (ctl.borrow().view.origin, ctl.borrow().job.clone());
    // Relative time → a rank's own clock: abs = rel + origin − offset.
    let own = move |t: i64, offset_ns: i64| t.saturating_add(origin).saturating_sub(offset_ns);
    let rank_of =
        |id: RankId| job.as_ref().and_then(|j| j.ranks.iter().find(|(k, _)| *k == id).map(|(_, r)| r.rank));
    let ranges = asks
        .iter()
        .map(|(id, off, _)| (rank_of(*id).unwrap_or(u32::MAX), own(from, *off), own(to, *off)))
        .collect();
    let base = AreaTotals {
        from,
        to,
        asked: asks.len(),
        ranges,
        memory_asked: memory_asks.len(),
        ..AreaTotals::default()
    };
    out.set(Some(base.clone()));
    let Some(pool) = pool else { return };
    // The answers add up here; each new one sets the table.
    let sum = Rc::new(RefCell::new(base));
    for (id, offset_ns, lanes) in asks {
        let (weak, sum, out) = (Rc::downgrade(ctl), sum.clone(), out.clone());
        let reply: Reply = Rc::new(move |_, answer, _| {
            let Some(c) = weak.upgrade() else { return };
            if c.borrow().pointer.area_req != req {
                return;
            }
            let mut s = sum.borrow_mut();
            match answer {
                Answer::Totals(t) => s.totals.add(&t),
                Answer::Failed(e) => s.failed = Some(e),
                _ => return,
            }
            s.answered += 1;
            out.set(Some(s.clone()));
        });
        pool.ask(
            id,
            Query::Totals { from_ns: own(from, offset_ns), to_ns: own(to, offset_ns), lanes },
            Some(reply),
        );
    }
    for (id, offset_ns) in memory_asks {
        let (weak, sum, out) = (Rc::downgrade(ctl), sum.clone(), out.clone());
        let rank = rank_of(id).unwrap_or(u32::MAX);
        let reply: Reply = Rc::new(move |_, answer, _| {
            let Some(c) = weak.upgrade() else { return };
            if c.borrow().pointer.area_req != req {
                return;
            }
            let mut s = sum.borrow_mut();
            match answer {
                Answer::MemorySpan(spans) => s.memory.extend(spans.into_iter().map(|m| (rank, m))),
                Answer::Failed(e) => s.failed = Some(e),
                _ => return,
            }
            s.memory.sort_by_key(|(r, m)| (*r, m.device));
            s.memory_answered += 1;
            out.set(Some(s.clone()));
        });
        pool.ask(
            id,
            Query::MemorySpan { from_ns: own(from, offset_ns), to_ns: own(to, offset_ns) },
            Some(reply),
        );
    }
    request_frame(ctl);
}

/// The selected range's band, drawn over the rows.
pub(super) fn draw_band(g: &CanvasRenderingContext2d, ctl: &Ctl, h: f64, col: &Colors) {
    let Some((a, b)) = ctl.pointer.area else { return };
    let x = |t: f64| GUTTER_W + (t - ctl.view.t0) / ctl.view.ns_per_px;
    let (x0, x1) = (x(a.min(b)).max(GUTTER_W), x(a.max(b)));
    if x1 <= x0 {
        return;
    }
    g.set_global_alpha(0.18);
    g.set_fill_style_str(&col.select);
    g.fill_rect(x0, RULER_H, x1 - x0, h - RULER_H);
    g.set_global_alpha(1.0);
    g.set_fill_style_str(&col.select);
    g.fill_rect(x0, RULER_H, 1.0, h - RULER_H);
    g.fill_rect(x1 - 1.0, RULER_H, 1.0, h - RULER_H);
}

/// The totals table under the canvas: by class, then by name (the longest first), and a close
/// button.
pub(super) fn table(t: &AreaTotals, on_close: Callback<MouseEvent>) -> Html {
    let range = t.to - t.from;
    let section = |title: &str, by: &std::collections::BTreeMap<String, Total>, kind: &str| {
        let ranked = Totals::ranked(by);
        let rest = ranked.iter().skip(TOP_ROWS).fold(Total::default(), |mut acc, (_, x)| {
            acc.count += x.count;
            acc.total_ns += x.total_ns;
            acc
        });
        let row = |name: &str, x: &Total| {
            html! {
                <tr data-testid="area-row" data-kind={kind.to_string()} data-name={name.to_string()}
                    data-count={x.count.to_string()} data-total-ns={x.total_ns.to_string()}>
                    <td class="name">{name.to_string()}</td>
                    <td class="num">{format::thousands(x.count)}</td>
                    <td class="num">{format::duration(x.total_ns as f64)}</td>
                    <td class="num">{format::duration(x.mean_ns())}</td>
                    <td class="num">{format!("{:.1}%", x.share(range) * 100.0)}</td>
                </tr>
            }
        };
        html! {
            <table class="area-table" data-testid={format!("area-by-{kind}")}>
                <thead><tr><th>{title.to_string()}</th><th>{"count"}</th><th>{"total"}</th><th>{"mean"}</th><th>{"of range"}</th></tr></thead>
                <tbody>
                    { for ranked.iter().take(TOP_ROWS).map(|(n, x)| row(n, x)) }
                    if ranked.len() > TOP_ROWS {
                        { row(&format!("{} more", ranked.len() - TOP_ROWS), &rest) }
                    }
                </tbody>
            </table>
        }
    };
    let done = t.answered >= t.asked && t.memory_answered >= t.memory_asked;
    html! {
        <aside class="selection area-totals" data-testid="area-totals" data-from-ns={t.from.to_string()}
            data-to-ns={t.to.to_string()} data-done={done.to_string()}
            data-ranges={format!("[{}]", t.ranges.iter().map(|(r, a, b)| format!(r#"{{"rank":{r},"from_ns":"{a}","to_ns":"{b}"}}"#)).collect::<Vec<_>>().join(","))}>
            <div class="args-head">
                <strong>{format!("Selected range: {}", format::duration(range as f64))}</strong>
                <span class="muted">{format!(" · {} to {} from the job's first event · {} of {} ranks summed · share: time inside the range ÷ its length (lanes and nesting add up)",
                    format::duration(t.from as f64), format::duration(t.to as f64), t.answered, t.asked)}</span>
                <button class="small" data-testid="area-close" onclick={on_close}>{"Clear"}</button>
            </div>
            if let Some(e) = &t.failed { <p class="error">{e.clone()}</p> }
            <div class="area-tables">
                { section("class", &t.totals.by_class, "class") }
                { section("name", &t.totals.by_name, "name") }
                { memory_table(t) }
            </div>
        </aside>
    }
}

/// The memory over the range, per rank and device (only with memory rows shown): the most
/// allocated and reserved in it, and the least allocated.
fn memory_table(t: &AreaTotals) -> Html {
    if t.memory_asked == 0 {
        return Html::default();
    }
    let binary = super::memory::binary;
    html! {
        <table class="area-table" data-testid="area-memory">
            <thead><tr><th>{"memory"}</th><th>{"peak allocated"}</th><th>{"peak reserved"}</th><th>{"least allocated"}</th></tr></thead>
            <tbody>
                { for t.memory.iter().map(|(rank, m)| html! {
                    <tr data-testid="area-memory-row" data-rank={rank.to_string()} data-device={m.device.to_string()}
                        data-max={m.bucket.max.to_string()} data-min={m.bucket.min.to_string()}
                        data-reserved={m.bucket.reserved_max.map(|r| r.to_string()).unwrap_or_default()}>
                        <td class="name">{format!("rank {rank} · {}", super::memory::name(m.device))}</td>
                        <td class="num">{binary(m.bucket.max)}</td>
                        <td class="num">{m.bucket.reserved_max.filter(|&r| r > 0).map_or("–".to_string(), binary)}</td>
                        <td class="num">{binary(m.bucket.min)}</td>
                    </tr>
                }) }
            </tbody>
        </table>
    }
}
