//! The lead finding's path on the timeline. The path is the critical path the analysis found
//! for one step (`analysis.critical_path`, [`rankscope_core::analyze::critical_path`]): hop by
//! hop, the work of the rank that arrived last at each collective, the collective's transfer,
//! then the tail of the rank whose step ended last. The step is the lead finding's (its first
//! step that has a path), else the step whose path is longest. With the toggle on (the bar's
//! "Lead path", the Findings view's "Show its path", `path=1` in the URL hash) each hop is a
//! band over its rank's rows and an arrow goes from rank to rank where the path moves; only
//! what is in the window is drawn (a path has tens of hops, not events).

use rankscope_core::analyze::critical_path::StepPath;
use rankscope_core::analyze::Analysis;

use super::*;

/// The path to draw and why this step: the lead finding's step, else the longest path.
pub(crate) fn lead_path(a: &Analysis) -> Option<(&StepPath, &'static str)> {
    let lead = a.findings.first();
    let named = lead.and_then(|f| f.steps.iter().find_map(|s| a.critical_path.iter().find(|p| p.step == *s)));
    match named {
        Some(p) => Some((p, "the lead finding's step")),
        None => {
            a.critical_path.iter().max_by_key(|p| p.length_ns).map(|p| (p, "the longest path of any step"))
        }
    }
}

/// One hop as drawn: its rank, whether it is a collective's transfer, aligned start and end.
#[derive(Debug, Clone)]
struct Hop {
    id: RankId,
    transfer: bool,
    start_ns: i64,
    end_ns: i64,
}

/// The path as the timeline draws it.
#[derive(Debug, Clone)]
pub(super) struct Drawn {
    step: u32,
    hops: Vec<Hop>,
}

/// The path of `job` when `on`, in the control (None: off, or no path).
pub(super) fn follow(ctl: &Shared, job: &JobView, on: bool) {
    let drawn = on.then(|| lead_path(&job.analysis)).flatten().map(|(p, _)| Drawn {
        step: p.step,
        hops: if p.hops.is_empty() {
            // Level 1: the bounding rank's whole step.
            job.id_of(p.rank)
                .map(|id| Hop { id, transfer: false, start_ns: p.start_ns, end_ns: p.end_ns })
                .into_iter()
                .collect()
        } else {
            p.hops
                .iter()
                .filter_map(|h| {
                    Some(Hop {
                        id: job.id_of(h.rank)?,
                        transfer: h.what == "collective",
                        start_ns: h.start_ns,
                        end_ns: h.end_ns,
                    })
                })
                .collect()
        },
    });
    ctl.borrow_mut().path = drawn;
}

/// Draws the path over the rows (clipped to the plot) and returns what it drew as JSON for the
/// canvas' `data-path` (empty when off): the step, the hops, those in view, the rank changes
/// drawn as arrows.
pub(super) fn draw(g: &CanvasRenderingContext2d, c: &Ctl, col: &Colors) -> String {
    let Some(p) = &c.path else { return String::new() };
    let Some(job) = &c.job else { return String::new() };
    let (w, h) = (c.view.width, c.view.height);
    g.save();
    g.begin_path();
    g.rect(GUTTER_W, RULER_H, w - GUTTER_W, h - RULER_H);
    g.clip();
    g.set_fill_style_str(&col.path);
    g.set_stroke_style_str(&col.path);
    // Each hop's rank band (header top, group bottom, on screen) and x span.
    let place = |hop: &Hop| -> Option<(f64, f64, f64, f64, f64)> {
        let row = c.rows.iter().find(|r| matches!(r.kind, RowKind::Rank { id, .. } if id == hop.id))?;
        let off = c.offset_of(hop.id);
        let own = |t: i64| t.saturating_add(job.offset(hop.id));
        let (x0, x1) = (c.view.x_of(own(hop.start_ns), off), c.view.x_of(own(hop.end_ns), off));
        let head = c.screen_y(row);
        let (y0, y1) = (head.max(c.top_of(row)), c.to_screen(row.group_end, row.pinned).min(h));
        Some((x0, x1, y0, y1, head + RANK_H / 2.0))
    };
    let (mut shown, mut edges) = (0usize, 0usize);
    let mut last: Option<(RankId, f64, f64)> = None;
    for hop in &p.hops {
        let Some((x0, x1, y0, y1, mid)) = place(hop) else { continue };
        let in_x = x1 >= GUTTER_W && x0 <= w;
        if in_x && y1 > y0 {
            shown += 1;
            let bw = (x1 - x0).max(2.0);
            g.set_global_alpha(if hop.transfer { 0.45 } else { 0.16 });
            g.fill_rect(x0, y0, bw, y1 - y0);
            g.set_global_alpha(1.0);
            g.set_line_width(2.0);
            g.begin_path();
            g.move_to(x0, y0 + 1.0);
            g.line_to(x0 + bw, y0 + 1.0);
            g.move_to(x0, y1 - 1.0);
            g.line_to(x0 + bw, y1 - 1.0);
            g.stroke();
        }
        if let Some((from, xa, ya)) = last {
            let visible = (xa >= GUTTER_W || x0 >= GUTTER_W) && (xa <= w || x0 <= w);
            if from != hop.id && visible {
                edges += 1;
                arrow(g, (xa, ya), (x0, mid));
            }
        }
        last = Some((hop.id, x1, mid));
    }
    g.restore();
    format!(r#"{{"step":{},"hops":{},"shown":{shown},"edges":{edges}}}"#, p.step, p.hops.len())
}

/// An arrow from `a` to `b` (where the path moves to another rank).
fn arrow(g: &CanvasRenderingContext2d, (x0, y0): (f64, f64), (x1, y1): (f64, f64)) {
    g.set_line_width(2.0);
    g.begin_path();
    g.move_to(x0, y0);
    g.line_to(x1, y1);
    g.stroke();
    let (dx, dy) = (x1 - x0, y1 - y0);
    let len = (dx * dx + dy * dy).sqrt().max(1e-9);
    let (ux, uy) = (dx / len, dy / len);
    g.begin_path();
    g.move_to(x1, y1);
    g.line_to(x1 - 8.0 * ux - 4.0 * uy, y1 - 8.0 * uy + 4.0 * ux);
    g.line_to(x1 - 8.0 * ux + 4.0 * uy, y1 - 8.0 * uy - 4.0 * ux);
    g.close_path();
    g.fill();
}

/// The bar's toggle (disabled, with the reason, when the analysis has no path).
pub(super) fn toggle(job: &JobView, on: bool, ctx: Option<&Ctx>) -> Html {
    let has = lead_path(&job.analysis).is_some();
    let onclick = {
        let ctx = ctx.cloned();
        Callback::from(move |_: MouseEvent| {
            if let Some(c) = &ctx {
                c.dispatch.emit(Action::ShowPath(!on));
            }
        })
    };
    let title = if has {
        "Draw the lead finding's critical path: each hop over its rank, an arrow where it moves to another rank"
    } else {
        "No critical path: the analysis found no step to follow"
    };
    html! {
        <button class={classes!("small", on.then_some("active"))} data-testid="path-toggle" aria-pressed={on.to_string()}
            disabled={!has} {onclick} {title}>{"Lead path"}</button>
    }
}

/// The bar under the toolbar while the path is drawn: which step and why, its ranks in order,
/// its length and parts, and a button that zooms to it.
pub(super) fn bar(job: &JobView, on_show: Callback<(RankId, i64, i64)>) -> Html {
    let Some((p, why)) = lead_path(&job.analysis) else {
        return html! { <div class="digest-bar" data-testid="path-bar">{"No critical path to draw."}</div> };
    };
    let mut ranks: Vec<u32> = p.hops.iter().map(|h| h.rank).collect();
    ranks.dedup();
    if ranks.is_empty() {
        ranks.push(p.rank);
    }
    let order: Vec<String> = ranks.iter().map(u32::to_string).collect();
    let s = &p.split;
    let zoom = job.id_of(p.rank).map(|id| {
        let off = job.offset(id);
        let (a, b) = (p.start_ns + off, p.end_ns + off);
        Callback::from(move |_: MouseEvent| on_show.emit((id, a, b)))
    });
    html! {
        <div class="digest-bar path-bar" data-testid="path-bar" data-step={p.step.to_string()}
            data-ranks={order.join(",")} data-hops={p.hops.len().to_string()}>
            <span>{format!(
                "Critical path of step {} ({why}): {} hop{} through rank{} {}, {} long: compute {}, communication {}, CPU-bound {}, idle {}.",
                p.step, p.hops.len().max(1), if p.hops.len() == 1 { "" } else { "s" },
                if ranks.len() == 1 { "" } else { "s" }, order.join(" → "),
                format::duration(p.length_ns as f64), format::duration(s.compute_ns as f64),
                format::duration(s.communication_ns as f64), format::duration(s.cpu_bound_ns as f64),
                format::duration(s.idle_ns as f64)
            )}</span>
            if let Some(z) = zoom {
                <button class="small" data-testid="path-zoom" onclick={z} title="Show the path's step">{"Zoom to it"}</button>
            }
        </div>
    }
}
