//! Ranks × steps: a heatmap of one per rank × step figure (rows ranks, columns steps) and a
//! stacked bar per rank of where its time went. A cell opens the timeline at that rank and step.
//!
//! Drawn as SVG with colours from CSS classes (`heat-0` … `heat-8`, `seg-*` in `www/style.css`):
//! the page's CSP allows no inline style, and a few thousand cells are cheap as SVG rects.

use rankscope_core::analyze::breakdown::StepRank;
use rankscope_core::analyze::RankTotals;
use yew::prelude::*;

use super::Ctx;
use crate::format;
use crate::state::{Action, JobView};
use crate::tokens::{HEAT_BINS, HEAT_CELL_H, HEAT_LABEL_W, HEAT_WIDTH};

#[derive(Properties, PartialEq, Debug)]
pub struct Props {
    pub job: std::rc::Rc<JobView>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Metric {
    /// Exposed communication where every rank was communicating: what overlap could hide.
    Transfer,
    /// Exposed communication while another rank was still busy: waiting for it.
    Wait,
    Exposed,
    Input,
    Idle,
    Wall,
    Compute,
}

impl Metric {
    const ALL: [Metric; 7] = [
        Metric::Wait,
        Metric::Transfer,
        Metric::Exposed,
        Metric::Input,
        Metric::Idle,
        Metric::Wall,
        Metric::Compute,
    ];

    fn name(self) -> &'static str {
        match self {
            Metric::Transfer => "exposed_transfer",
            Metric::Wait => "exposed_wait",
            Metric::Exposed => "exposed_comm",
            Metric::Input => "input",
            Metric::Idle => "idle",
            Metric::Wall => "wall",
            Metric::Compute => "compute",
        }
    }

    fn title(self) -> &'static str {
        match self {
            Metric::Transfer => "Exposed transfer",
            Metric::Wait => "Waiting for others",
            Metric::Exposed => "Exposed communication",
            Metric::Input => "Input (data loading)",
            Metric::Idle => "Idle",
            Metric::Wall => "Step time (wall)",
            Metric::Compute => "Compute",
        }
    }

    fn of(self, r: &StepRank) -> i64 {
        match self {
            Metric::Transfer => r.exposed_transfer_ns,
            Metric::Wait => r.exposed_wait_ns,
            Metric::Exposed => r.exposed_comm_ns,
            Metric::Input => r.input_ns,
            Metric::Idle => (r.idle_ns - r.input_ns).max(0),
            Metric::Wall => r.wall_ns,
            Metric::Compute => r.compute_ns,
        }
    }
}

/// A segment of the per-rank bars: CSS class suffix, what it is, its length from the totals.
type Segment = (&'static str, &'static str, fn(&RankTotals) -> i64);

const SEGMENTS: [Segment; 7] = [
    ("compute", "compute only", |t| t.compute_ns - t.overlap_ns),
    ("overlap", "compute overlapping communication", |t| t.overlap_ns),
    ("transfer", "exposed transfer (all ranks communicating)", |t| t.exposed_transfer_ns),
    ("wait", "waiting for other ranks", |t| t.exposed_wait_ns),
    ("other", "memory and other busy time", |t| {
        (t.wall_ns - t.compute_ns - t.exposed_comm_ns - t.idle_ns).max(0)
    }),
    ("input", "input (data loading)", |t| t.input_ns),
    ("idle", "idle", |t| (t.idle_ns - t.input_ns).max(0)),
];

#[function_component(Steps)]
pub fn steps(p: &Props) -> Html {
    let ctx = use_context::<Ctx>();
    let metric = use_state(|| Metric::Wait);
    let a = &p.job.analysis;
    let ranks: Vec<u32> = a.ranks.iter().map(|r| r.rank).collect();
    let steps: Vec<u32> = a.steps.iter().map(|s| s.step).collect();
    let m = *metric;
    let values: Vec<i64> = a.steps.iter().flat_map(|s| s.per_rank.iter().map(|r| m.of(r))).collect();
    let (lo, hi) = (values.iter().copied().min().unwrap_or(0), values.iter().copied().max().unwrap_or(0));
    let bin = |v: i64| -> usize {
        if hi <= lo {
            0
        } else {
            ((((v - lo) as f64 / (hi - lo) as f64) * (HEAT_BINS - 1) as f64).round() as usize)
                .min(HEAT_BINS - 1)
        }
    };
    let cols = steps.len().max(1);
    let cell_w = ((HEAT_WIDTH - HEAT_LABEL_W) / cols as f64).clamp(3.0, 160.0);
    let grid_w = HEAT_LABEL_W + cell_w * cols as f64;
    let top = 20.0;
    let height = top + HEAT_CELL_H * ranks.len() as f64 + 4.0;
    let label_every = ((28.0 / cell_w).ceil() as usize).max(1);

    let cells = a.steps.iter().enumerate().flat_map(|(c, s)| {
        let ranks = &ranks;
        s.per_rank.iter().map(move |r| (c, s.step, ranks.iter().position(|&x| x == r.rank), r))
    });
    let cells = cells.filter_map(|(c, step, row, r)| {
        let row = row?;
        let v = m.of(r);
        let file = p.job.file_of(r.rank);
        let onclick = {
            let ctx = ctx.clone();
            let (start_ns, end_ns) = (r.start_ns, r.end_ns);
            Callback::from(move |_| {
                if let (Some(ctx), Some(file)) = (&ctx, file) {
                    ctx.dispatch.emit(Action::Open { file, step: Some(step), start_ns, end_ns });
                }
            })
        };
        let x = HEAT_LABEL_W + c as f64 * cell_w;
        let y = top + row as f64 * HEAT_CELL_H;
        let pct = if r.wall_ns > 0 { 100.0 * v as f64 / r.wall_ns as f64 } else { 0.0 };
        let tip = format!(
            "rank {} · step {step}\n{}: {}{}\nclick: open the timeline here",
            r.rank,
            m.title(),
            format::duration(v as f64),
            if m == Metric::Wall { String::new() } else { format!(" ({pct:.1}% of the step)") }
        );
        let b = bin(v);
        let text = (cell_w >= 64.0).then(|| {
            html! { <text class={classes!("cell-text", (b >= HEAT_BINS / 2).then_some("on-dark"))}
            x={format!("{:.1}", x + cell_w / 2.0)} y={format!("{:.1}", y + HEAT_CELL_H / 2.0)}
            text-anchor="middle" dominant-baseline="middle">{format::duration(v as f64)}</text> }
        });
        Some(html! {
            <>
            <rect class={classes!("heat", format!("heat-{b}"))} x={format!("{x:.1}")} y={format!("{y:.1}")}
                width={format!("{:.1}", (cell_w - 1.0).max(1.0))} height={format!("{:.1}", HEAT_CELL_H - 1.0)}
                data-testid="heat-cell" data-rank={r.rank.to_string()} data-step={step.to_string()}
                data-value={v.to_string()} {onclick}>
                <title>{tip}</title>
            </rect>
            { for text }
            </>
        })
    });
    let row_labels = ranks.iter().enumerate().map(|(i, r)| {
        html! { <text class="axis" x={format!("{:.1}", HEAT_LABEL_W - 6.0)} y={format!("{:.1}", top + i as f64 * HEAT_CELL_H + HEAT_CELL_H / 2.0)}
            text-anchor="end" dominant-baseline="middle">{format!("rank {r}")}</text> }
    });
    let col_labels = steps.iter().enumerate().filter(|(i, _)| i % label_every == 0).map(|(i, s)| {
        html! { <text class="axis" x={format!("{:.1}", HEAT_LABEL_W + (i as f64 + 0.5) * cell_w)} y="12" text-anchor="middle">{format!("#{s}")}</text> }
    });

    // Stacked bars: where each rank's time went over all steps.
    let segs = SEGMENTS;
    let bar_w = HEAT_WIDTH - HEAT_LABEL_W - 10.0;
    let bars_h = 8.0 + HEAT_CELL_H * a.rank_totals.len() as f64;
    let bars = a.rank_totals.iter().enumerate().map(|(i, t)| {
        let y = 4.0 + i as f64 * HEAT_CELL_H;
        let wall = t.wall_ns.max(1) as f64;
        let mut x = HEAT_LABEL_W;
        let parts = segs.iter().map(|(class, what, f)| {
            let v = f(t).max(0);
            let w = bar_w * v as f64 / wall;
            let r = html! {
                <rect class={classes!("seg", format!("seg-{class}"))} x={format!("{x:.1}")} y={format!("{y:.1}")}
                    width={format!("{:.1}", w.max(0.0))} height={format!("{:.1}", HEAT_CELL_H - 4.0)}>
                    <title>{format!("rank {} · {what}: {} ({:.1}%)", t.rank, format::duration(v as f64), 100.0 * v as f64 / wall)}</title>
                </rect>
            };
            x += w;
            r
        }).collect::<Html>();
        html! {
            <g data-testid="rank-bar" data-rank={t.rank.to_string()}>
                <text class="axis" x={format!("{:.1}", HEAT_LABEL_W - 6.0)} y={format!("{:.1}", y + (HEAT_CELL_H - 4.0) / 2.0)} text-anchor="end" dominant-baseline="middle">{format!("rank {}", t.rank)}</text>
                { parts }
            </g>
        }
    });
    let legend = segs.iter().map(|(class, what, _)| {
        html! { <span class="legend-item"><span class={classes!("swatch", format!("sw-{class}"))}></span>{*what}</span> }
    });
    let pick = |mm: Metric| {
        let metric = metric.clone();
        Callback::from(move |_| metric.set(mm))
    };
    html! {
        <section class="steps-view" data-testid="steps">
            <div class="toolbar">
                <span class="muted">{"Heatmap of"}</span>
                { for Metric::ALL.iter().map(|&mm| html! {
                    <button class={classes!("tab", (mm == m).then_some("active"))} data-testid={format!("metric-{}", mm.name())}
                        onclick={pick(mm)}>{mm.title()}</button>
                }) }
                <span class="muted">{format!("per rank × step · {} (light) to {} (dark) · click a cell to open the timeline there",
                    format::duration(lo as f64), format::duration(hi as f64))}</span>
            </div>
            <svg class="heatmap" data-testid="heatmap" data-metric={m.name()} width={format!("{grid_w:.0}")} height={format!("{height:.0}")}
                viewBox={format!("0 0 {grid_w:.0} {height:.0}")} role="img" aria-label="Heatmap of ranks by steps">
                { for col_labels }
                { for row_labels }
                { for cells }
            </svg>
            <h2>{"Where each rank's time went (all steps)"}</h2>
            <div class="legend">{ for legend }</div>
            <svg class="bars" data-testid="rank-bars" width={format!("{HEAT_WIDTH:.0}")} height={format!("{bars_h:.0}")}
                viewBox={format!("0 0 {HEAT_WIDTH:.0} {bars_h:.0}")} role="img" aria-label="Time breakdown per rank">
                { for bars }
            </svg>
        </section>
    }
}
