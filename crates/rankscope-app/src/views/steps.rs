//! Ranks × steps: a heatmap of one per rank × step figure (rows ranks, columns steps) and a
//! stacked bar per rank of where its time went. A cell opens the timeline at that rank and step.
//!
//! Both are canvases of rows ([`super::rows`]): only the ranks in sight are drawn, so 1,024
//! ranks scroll and hover as 8 do (as SVG, 4,096 cells with titles cost 33–50 ms a frame).
//! Colours are the CSS custom properties `--heat-0` … `--heat-8` and the class colours of
//! `www/style.css`. The figure under the pointer shows in a tooltip; for jobs of up to
//! [`TABLE_MAX_RANKS`] ranks every figure is also in a visually hidden table (screen readers,
//! tests), which at 1,024 ranks would be the 4,096 DOM nodes the canvas exists to avoid.
//! With a group or role filter ([`crate::groups::Filter`]) both show only its members.

use rankscope_core::analyze::breakdown::StepRank;
use rankscope_core::analyze::RankTotals;
use yew::prelude::*;

use std::collections::BTreeSet;
use std::rc::Rc;

use web_sys::CanvasRenderingContext2d;

use super::group_filter::GroupFilter;
use super::rows::{Hit, RowCanvas, Rows};
use super::Ctx;
use crate::format;
use crate::groups::Filter;
use crate::protocol::RankId;
use crate::state::{Action, JobView};
use crate::tokens::{HEAT_BINS, HEAT_CELL_H, HEAT_LABEL_W, HEAT_WIDTH};

#[derive(Properties, PartialEq, Debug)]
pub struct Props {
    pub job: std::rc::Rc<JobView>,
    #[prop_or_default]
    pub filter: Option<Filter>,
}

/// A per rank × step figure (the Layout view colours ranks by the same figures, per step).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Metric {
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
    pub const ALL: [Metric; 7] = [
        Metric::Wait,
        Metric::Transfer,
        Metric::Exposed,
        Metric::Input,
        Metric::Idle,
        Metric::Wall,
        Metric::Compute,
    ];

    pub fn name(self) -> &'static str {
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

    pub fn title(self) -> &'static str {
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

    pub fn of(self, r: &StepRank) -> i64 {
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

    /// The figure's mean per step over a rank's steps (None without steps).
    pub fn per_step(self, t: &RankTotals) -> Option<i64> {
        let total = match self {
            Metric::Transfer => t.exposed_transfer_ns,
            Metric::Wait => t.exposed_wait_ns,
            Metric::Exposed => t.exposed_comm_ns,
            Metric::Input => t.input_ns,
            Metric::Idle => (t.idle_ns - t.input_ns).max(0),
            Metric::Wall => t.wall_ns,
            Metric::Compute => t.compute_ns,
        };
        (t.steps > 0).then(|| total / t.steps as i64)
    }
}

/// Jobs up to this many ranks also get their figures as a visually hidden table.
pub const TABLE_MAX_RANKS: usize = 64;

/// A segment of the per-rank bars: CSS class suffix, what it is, its length from the totals.
type Segment = (&'static str, &'static str, fn(&RankTotals) -> i64);

/// The colours the heatmap reads (foreground first: the hover outline), then the bins.
const HEAT_COLORS: [(&str, &str); 12] = [
    ("--fg", "#111111"),
    ("--muted", "#666666"),
    ("--bg", "#ffffff"),
    ("--heat-0", "#fde725"),
    ("--heat-1", "#b5de2b"),
    ("--heat-2", "#6ece58"),
    ("--heat-3", "#35b779"),
    ("--heat-4", "#1f9e89"),
    ("--heat-5", "#26828e"),
    ("--heat-6", "#31688e"),
    ("--heat-7", "#3e4989"),
    ("--heat-8", "#482878"),
];

/// The colours the bars read: foreground, muted, border, then one per [`SEGMENTS`] entry.
const BAR_COLORS: [(&str, &str); 10] = [
    ("--fg", "#111111"),
    ("--muted", "#666666"),
    ("--border", "#cccccc"),
    ("--class-compute", "#4c78a8"),
    ("--class-launch", "#9ecae9"),
    ("--class-communication", "#f58518"),
    ("--class-sync", "#e45756"),
    ("--class-memory", "#b279a2"),
    ("--class-data-loading", "#54a24b"),
    ("--ruler", "#eeeeee"),
];

const AXIS_FONT: &str = "11px system-ui, sans-serif";
/// Height of the heatmap's header (the step labels).
const HEAT_TOP: f64 = 20.0;

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

/// One cell of the heatmap: the figure, its step's wall time, the step's window on its rank.
#[derive(Debug, Clone, Copy)]
struct Cell {
    v: i64,
    wall: i64,
    start_ns: i64,
    end_ns: i64,
}

/// The heatmap as rows: ranks × steps, cells row-major.
struct Heat {
    ranks: Vec<u32>,
    ids: Vec<Option<RankId>>,
    steps: Vec<u32>,
    cells: Vec<Option<Cell>>,
    metric: Metric,
    lo: i64,
    hi: i64,
    cell_w: f64,
    ctx: Option<Ctx>,
}

impl Heat {
    /// Ranks × steps of the ranks `only` keeps (every rank without it).
    fn new(job: &JobView, metric: Metric, ctx: Option<Ctx>, only: Option<&BTreeSet<u32>>) -> Heat {
        let a = &job.analysis;
        let ranks: Vec<u32> =
            a.ranks.iter().map(|r| r.rank).filter(|r| only.is_none_or(|o| o.contains(r))).collect();
        let row_of: std::collections::BTreeMap<u32, usize> =
            ranks.iter().enumerate().map(|(i, &r)| (r, i)).collect();
        let steps: Vec<u32> = a.steps.iter().map(|s| s.step).collect();
        let cols = steps.len();
        let mut cells = vec![None; ranks.len() * cols];
        let (mut lo, mut hi) = (i64::MAX, i64::MIN);
        for (c, s) in a.steps.iter().enumerate() {
            for r in s.per_rank.iter().filter(|r| only.is_none_or(|o| o.contains(&r.rank))) {
                let v = metric.of(r);
                lo = lo.min(v);
                hi = hi.max(v);
                if let Some(cell) = row_of.get(&r.rank).and_then(|&row| cells.get_mut(row * cols + c)) {
                    *cell = Some(Cell { v, wall: r.wall_ns, start_ns: r.start_ns, end_ns: r.end_ns });
                }
            }
        }
        if lo > hi {
            (lo, hi) = (0, 0);
        }
        let cell_w = ((HEAT_WIDTH - HEAT_LABEL_W) / cols.max(1) as f64).clamp(3.0, 160.0);
        let ids = ranks.iter().map(|&r| job.id_of(r)).collect();
        Heat { ranks, ids, steps, cells, metric, lo, hi, cell_w, ctx }
    }

    fn bin(&self, v: i64) -> usize {
        if self.hi <= self.lo {
            0
        } else {
            ((((v - self.lo) as f64 / (self.hi - self.lo) as f64) * (HEAT_BINS - 1) as f64).round() as usize)
                .min(HEAT_BINS - 1)
        }
    }

    fn cell(&self, row: usize, col: usize) -> Option<Cell> {
        self.cells.get(row * self.steps.len() + col).copied().flatten()
    }

    fn tip(&self, row: usize, col: usize, c: Cell) -> String {
        let (m, v) = (self.metric, c.v);
        let pct = if c.wall > 0 { 100.0 * v as f64 / c.wall as f64 } else { 0.0 };
        format!(
            "rank {} · step {}\n{}: {}{}\nclick: open the timeline here",
            self.ranks.get(row).copied().unwrap_or_default(),
            self.steps.get(col).copied().unwrap_or_default(),
            m.title(),
            format::duration(v as f64),
            if m == Metric::Wall { String::new() } else { format!(" ({pct:.1}% of the step)") }
        )
    }
}

impl Rows for Heat {
    fn rows(&self) -> usize {
        self.ranks.len()
    }
    fn row_h(&self) -> f64 {
        HEAT_CELL_H
    }
    fn top(&self) -> f64 {
        HEAT_TOP
    }
    fn width(&self) -> f64 {
        HEAT_LABEL_W + self.cell_w * self.steps.len().max(1) as f64
    }
    fn colors(&self) -> &'static [(&'static str, &'static str)] {
        &HEAT_COLORS
    }

    fn draw(&self, g: &CanvasRenderingContext2d, col: &[String], first: usize, last: usize, scroll: f64) {
        let color = |i: usize| col.get(i).map_or("#888888", String::as_str);
        g.set_font(AXIS_FONT);
        g.set_text_baseline("middle");
        for row in first..last {
            let y = HEAT_TOP + row as f64 * HEAT_CELL_H - scroll;
            g.set_fill_style_str(color(1));
            g.set_text_align("end");
            let _ = g.fill_text(
                &format!("rank {}", self.ranks.get(row).copied().unwrap_or_default()),
                HEAT_LABEL_W - 6.0,
                y + HEAT_CELL_H / 2.0,
            );
            g.set_text_align("center");
            for c in 0..self.steps.len() {
                let Some(cell) = self.cell(row, c) else { continue };
                let x = HEAT_LABEL_W + c as f64 * self.cell_w;
                let b = self.bin(cell.v);
                g.set_fill_style_str(color(3 + b));
                g.fill_rect(x, y, (self.cell_w - 1.0).max(1.0), HEAT_CELL_H - 1.0);
                if self.cell_w >= 64.0 {
                    g.set_fill_style_str(if b >= HEAT_BINS / 2 { "#ffffff" } else { "#000000" });
                    let _ = g.fill_text(
                        &format::duration(cell.v as f64),
                        x + self.cell_w / 2.0,
                        y + HEAT_CELL_H / 2.0,
                    );
                }
            }
        }
        // The header over the rows that scrolled under it.
        g.set_fill_style_str(color(2));
        g.fill_rect(0.0, 0.0, self.width(), HEAT_TOP);
        g.set_fill_style_str(color(1));
        g.set_text_align("center");
        let label_every = ((28.0 / self.cell_w).ceil() as usize).max(1);
        for (i, s) in self.steps.iter().enumerate().filter(|(i, _)| i % label_every == 0) {
            let _ = g.fill_text(&format!("#{s}"), HEAT_LABEL_W + (i as f64 + 0.5) * self.cell_w, 11.0);
        }
    }

    fn hit(&self, x: f64, y: f64) -> Option<Hit> {
        if x < HEAT_LABEL_W || y < HEAT_TOP {
            return None;
        }
        let col = ((x - HEAT_LABEL_W) / self.cell_w).floor() as usize;
        let row = ((y - HEAT_TOP) / HEAT_CELL_H).floor() as usize;
        if col >= self.steps.len() || row >= self.ranks.len() {
            return None;
        }
        let c = self.cell(row, col)?;
        Some(Hit {
            row,
            col,
            x: HEAT_LABEL_W + col as f64 * self.cell_w,
            y: HEAT_TOP + row as f64 * HEAT_CELL_H,
            w: self.cell_w,
            h: HEAT_CELL_H,
            tip: self.tip(row, col, c),
        })
    }

    fn click(&self, hit: &Hit) {
        let (Some(c), Some(ctx), Some(Some(id)), Some(&step)) =
            (self.cell(hit.row, hit.col), &self.ctx, self.ids.get(hit.row), self.steps.get(hit.col))
        else {
            return;
        };
        ctx.dispatch.emit(Action::Open { id: *id, step: Some(step), start_ns: c.start_ns, end_ns: c.end_ns });
    }

    fn layout(&self) -> String {
        serde_json::json!({
            "top": HEAT_TOP, "row_h": HEAT_CELL_H, "label_w": HEAT_LABEL_W, "cell_w": self.cell_w,
            "ranks": self.ranks, "steps": self.steps,
        })
        .to_string()
    }
}

/// The per-rank bars as rows: each rank's segments over all steps.
struct Bars {
    ranks: Vec<u32>,
    segs: Vec<[i64; SEGMENTS.len()]>,
    walls: Vec<i64>,
}

const BAR_TOP: f64 = 4.0;
const BAR_W: f64 = HEAT_WIDTH - HEAT_LABEL_W - 10.0;

impl Bars {
    fn new<'a>(totals: impl Iterator<Item = &'a RankTotals>) -> Bars {
        let totals: Vec<&RankTotals> = totals.collect();
        Bars {
            ranks: totals.iter().map(|t| t.rank).collect(),
            segs: totals.iter().map(|t| SEGMENTS.map(|(_, _, f)| f(t).max(0))).collect(),
            walls: totals.iter().map(|t| t.wall_ns.max(1)).collect(),
        }
    }
}

impl Rows for Bars {
    fn rows(&self) -> usize {
        self.ranks.len()
    }
    fn row_h(&self) -> f64 {
        HEAT_CELL_H
    }
    fn top(&self) -> f64 {
        BAR_TOP
    }
    fn width(&self) -> f64 {
        HEAT_WIDTH
    }
    fn colors(&self) -> &'static [(&'static str, &'static str)] {
        &BAR_COLORS
    }

    fn draw(&self, g: &CanvasRenderingContext2d, col: &[String], first: usize, last: usize, scroll: f64) {
        let color = |i: usize| col.get(i).map_or("#888888", String::as_str);
        g.set_font(AXIS_FONT);
        g.set_text_baseline("middle");
        g.set_text_align("end");
        for row in first..last {
            let y = BAR_TOP + row as f64 * HEAT_CELL_H - scroll;
            let h = HEAT_CELL_H - 4.0;
            g.set_fill_style_str(color(1));
            let _ = g.fill_text(
                &format!("rank {}", self.ranks.get(row).copied().unwrap_or_default()),
                HEAT_LABEL_W - 6.0,
                y + h / 2.0,
            );
            let (Some(segs), Some(&wall)) = (self.segs.get(row), self.walls.get(row)) else { continue };
            let mut x = HEAT_LABEL_W;
            for (i, &v) in segs.iter().enumerate() {
                let w = BAR_W * v as f64 / wall as f64;
                g.set_fill_style_str(color(3 + i));
                g.fill_rect(x, y, w, h);
                if i + 1 == SEGMENTS.len() && w > 0.0 {
                    g.set_stroke_style_str(color(2));
                    g.set_line_width(1.0);
                    g.stroke_rect(x + 0.5, y + 0.5, (w - 1.0).max(0.0), h - 1.0);
                }
                x += w;
            }
        }
        g.clear_rect(0.0, 0.0, HEAT_WIDTH, BAR_TOP);
    }

    fn hit(&self, x: f64, y: f64) -> Option<Hit> {
        let row = ((y - BAR_TOP) / HEAT_CELL_H).floor();
        if row < 0.0 || x < HEAT_LABEL_W {
            return None;
        }
        let row = row as usize;
        let (segs, &wall) = (self.segs.get(row)?, self.walls.get(row)?);
        let mut at = HEAT_LABEL_W;
        for (col, (&v, (_, what, _))) in segs.iter().zip(SEGMENTS.iter()).enumerate() {
            let w = BAR_W * v as f64 / wall as f64;
            if x >= at && x < at + w {
                let tip = format!(
                    "rank {} · {what}: {} ({:.1}%)",
                    self.ranks.get(row).copied().unwrap_or_default(),
                    format::duration(v as f64),
                    100.0 * v as f64 / wall as f64
                );
                return Some(Hit {
                    row,
                    col,
                    x: at,
                    y: BAR_TOP + row as f64 * HEAT_CELL_H,
                    w,
                    h: HEAT_CELL_H - 4.0,
                    tip,
                });
            }
            at += w;
        }
        None
    }

    fn layout(&self) -> String {
        serde_json::json!({ "top": BAR_TOP, "row_h": HEAT_CELL_H, "label_w": HEAT_LABEL_W, "bar_w": BAR_W, "ranks": self.ranks })
            .to_string()
    }
}

#[function_component(Steps)]
pub fn steps(p: &Props) -> Html {
    let ctx = use_context::<Ctx>();
    let metric = use_state(|| Metric::Wait);
    let m = *metric;
    let key = Rc::as_ptr(&p.job) as usize;
    let only = {
        let (job, filter) = (p.job.clone(), p.filter.clone());
        use_memo((key, p.filter.clone()), move |_| {
            filter.and_then(|f| f.members(job.analysis.layout.as_ref()))
        })
    };
    let heat = {
        let (job, ctx, only) = (p.job.clone(), ctx.clone(), only.clone());
        use_memo((key, m, p.filter.clone()), move |_| {
            Rc::new(Heat::new(&job, m, ctx, only.as_ref().as_ref())) as Rc<dyn Rows>
        })
    };
    let bars = {
        let (job, only) = (p.job.clone(), only.clone());
        use_memo((key, p.filter.clone()), move |_| {
            let kept = job
                .analysis
                .rank_totals
                .iter()
                .filter(|t| only.as_ref().as_ref().is_none_or(|o| o.contains(&t.rank)));
            Rc::new(Bars::new(kept)) as Rc<dyn Rows>
        })
    };
    let a = &p.job.analysis;
    let keep = |r: u32| only.as_ref().as_ref().is_none_or(|o| o.contains(&r));
    let (lo, hi) = {
        let vals = a.steps.iter().flat_map(|s| s.per_rank.iter().filter(|r| keep(r.rank)).map(|r| m.of(r)));
        (vals.clone().min().unwrap_or(0), vals.max().unwrap_or(0))
    };
    let shown = a.ranks.iter().filter(|r| keep(r.rank)).count();
    let small = shown <= TABLE_MAX_RANKS;
    // Every figure as a table for small jobs (the canvas' text alternative).
    let heat_table = small.then(|| {
        html! {
            <table class="visually-hidden" data-testid="heat-table">
                <caption>{format!("{} per rank and step", m.title())}</caption>
                <tr><th>{"rank"}</th>{ for a.steps.iter().map(|s| html! { <th>{format!("step {}", s.step)}</th> }) }</tr>
                { for a.ranks.iter().filter(|rk| keep(rk.rank)).map(|rk| html! {
                    <tr><th>{format!("rank {}", rk.rank)}</th>
                    { for a.steps.iter().map(|s| match s.per_rank.iter().find(|r| r.rank == rk.rank) {
                        Some(r) => html! { <td data-testid="heat-cell" data-rank={r.rank.to_string()} data-step={s.step.to_string()}
                            data-value={m.of(r).to_string()}>{format::duration(m.of(r) as f64)}</td> },
                        None => html! { <td>{"–"}</td> },
                    }) }
                    </tr>
                }) }
            </table>
        }
    });
    let bars_table = small.then(|| {
        html! {
            <table class="visually-hidden" data-testid="rank-bars-table">
                <caption>{"Where each rank's time went (all steps)"}</caption>
                <tr><th>{"rank"}</th>{ for SEGMENTS.iter().map(|(_, what, _)| html! { <th>{*what}</th> }) }</tr>
                { for a.rank_totals.iter().filter(|t| keep(t.rank)).map(|t| html! {
                    <tr data-testid="rank-bar" data-rank={t.rank.to_string()}><th>{format!("rank {}", t.rank)}</th>
                    { for SEGMENTS.iter().map(|(class, _, f)| html! {
                        <td class={format!("seg-{class}")} data-ns={f(t).max(0).to_string()}>{format::duration(f(t).max(0) as f64)}</td>
                    }) }
                    </tr>
                }) }
            </table>
        }
    });
    let note = if small { "" } else { "; hover a cell for its figure" };
    let heat_label = format!(
        "Heatmap of {} by rank and step: {} ranks × {} steps, {} (light) to {} (dark){note}",
        m.title(),
        shown,
        a.steps.len(),
        format::duration(lo as f64),
        format::duration(hi as f64)
    );
    let legend = SEGMENTS.iter().map(|(class, what, _)| {
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
                <span class="muted">{format!("per rank × step · {} (light) to {} (dark) · hover a cell for its figure, click it to open the timeline there",
                    format::duration(lo as f64), format::duration(hi as f64))}</span>
            </div>
            <div class="toolbar">
                <GroupFilter job={p.job.clone()} filter={p.filter.clone()} what="ranks" shown={Some((shown, a.ranks.len()))} />
            </div>
            <RowCanvas rows={(*heat).clone()} testid="heatmap" metric={Some(m.name())} label={heat_label}>
                { for heat_table }
            </RowCanvas>
            <h2>{"Where each rank's time went (all steps)"}</h2>
            <div class="legend">{ for legend }</div>
            <RowCanvas rows={(*bars).clone()} testid="rank-bars" label={format!("Time breakdown of {shown} ranks; hover a bar for its figures")}>
                { for bars_table }
            </RowCanvas>
        </section>
    }
}
