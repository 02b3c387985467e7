//! The Layout view's grid as a drawing: every rank a cell on the arrangement of [`super::grid`],
//! coloured by the figure picked (the viridis bins of Ranks × steps, `--heat-*`), host
//! boundaries as thick lines, the lead finding's ranks outlined, the ranks where the delay
//! starts marked, and the chain of waits (`wait_chain.edges`) as arrows from the rank waited
//! for to the rank that waited, as thick as the wait: by default one arrow into each rank that
//! waited ([`super::path`]), every edge on request.
//!
//! It is a [`Rows`] of one CSS pixel each: the grid's lines of blocks have headers and gaps, so
//! its rows are not equal; [`RowCanvas`](super::super::rows::RowCanvas) hands the band of pixels
//! in sight and only the cells that meet it are painted (1,024 ranks cost what the ~100 in
//! sight do). The arrows (a few per origin) are all stroked; the canvas clips them.

use std::collections::{BTreeMap, BTreeSet};
use std::rc::Rc;

use rankscope_core::analyze::layout::Role;
use web_sys::CanvasRenderingContext2d;
use yew::Callback;

use super::super::rows::{Hit, Rows};
use super::super::steps::Metric;
use super::info::Info;
use crate::format;
use crate::groups::Filter;
use crate::state::JobView;
use crate::tokens::*;

/// One arrow of the chain, between two places.
#[derive(Debug, Clone)]
struct Edge {
    /// Its index in `wait_chain.edges`.
    k: usize,
    from: usize,
    to: usize,
    wait_ns: i64,
    /// Through a group the filter keeps (else drawn faint).
    kept: bool,
    /// How many edges its arrow stands for (0: not drawn; [`super::path::families`]).
    stands: u32,
}

/// The grid drawn with one figure, a filter and a clicked rank.
pub struct Cells {
    info: Rc<Info>,
    job: Rc<JobView>,
    metric: Metric,
    values: Vec<Option<i64>>,
    lo: i64,
    hi: i64,
    /// Place index by (block, col, row).
    at: Vec<Option<usize>>,
    lead: BTreeSet<usize>,
    origins: BTreeSet<usize>,
    edges: Vec<Edge>,
    max_wait: i64,
    /// The filter's members (None: no filter).
    members: Option<BTreeSet<u32>>,
    clicked: Option<usize>,
    on_click: Callback<u32>,
}

impl std::fmt::Debug for Cells {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Cells({} ranks, {})", self.info.grid.places.len(), self.metric.name())
    }
}

/// Foreground first (the hover outline), then the marks, then the bins.
const COLORS: [(&str, &str); 15] = [
    ("--fg", "#1b1b1f"),
    ("--muted", "#5f6368"),
    ("--bg", "#ffffff"),
    ("--border", "#d6d9dc"),
    ("--select", "#d81b60"),
    ("--accent", "#0b57d0"),
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
const FG: usize = 0;
const MUTED: usize = 1;
const BG: usize = 2;
const BORDER: usize = 3;
const SELECT: usize = 4;
const ACCENT: usize = 5;
const HEAT0: usize = 6;
/// The opacity of a cell outside the filter.
const FADED: f64 = 0.22;
/// The characters of the widest label a cell usually has ("151 ms", "r1023").
const LABEL_CHARS: f64 = 7.0;
/// Above this many arrows, one per family ([`super::path`]).
const ARROWS_MAX: usize = 32;

impl Cells {
    pub fn new(
        info: Rc<Info>,
        job: Rc<JobView>,
        metric: Metric,
        filter: Option<&Filter>,
        clicked: Option<u32>,
        every_wait: bool,
        on_click: Callback<u32>,
    ) -> Cells {
        let a = &job.analysis;
        let totals: BTreeMap<u32, &rankscope_core::analyze::RankTotals> =
            a.rank_totals.iter().map(|t| (t.rank, t)).collect();
        let values: Vec<Option<i64>> =
            info.grid.places.iter().map(|p| totals.get(&p.rank).and_then(|t| metric.per_step(t))).collect();
        let (lo, hi) =
            values.iter().flatten().fold((i64::MAX, i64::MIN), |(lo, hi), &v| (lo.min(v), hi.max(v)));
        let (lo, hi) = if lo > hi { (0, 0) } else { (lo, hi) };
        let gr = &info.grid;
        let (cols, rows) = (gr.cols.size as usize, gr.rows.size as usize);
        let mut at = vec![None; (gr.block_cols * gr.block_rows) as usize * cols * rows];
        for (i, p) in gr.places.iter().enumerate() {
            if let Some(slot) = at.get_mut((p.block as usize * rows + p.row as usize) * cols + p.col as usize)
            {
                *slot = Some(i);
            }
        }
        let idx = |r: &u32| info.index_of.get(r).copied();
        let lead: BTreeSet<usize> = a
            .findings
            .first()
            .filter(|f| f.ranks.len() < a.ranks.len())
            .map(|f| f.ranks.iter().filter_map(idx).collect())
            .unwrap_or_default();
        let layout = a.layout.as_ref();
        let (origins, edges) = match &a.wait_chain {
            Some(c) => {
                let mesh: Vec<Role> =
                    layout.map(|l| l.mesh.iter().map(|d| d.role).collect()).unwrap_or_default();
                let pe: Vec<super::path::Edge> = c
                    .edges
                    .iter()
                    .map(|e| super::path::Edge {
                        from: e.from,
                        to: e.to,
                        wait_ns: e.wait_ns,
                        mesh: mesh.contains(&e.role),
                    })
                    .collect();
                let shown =
                    if every_wait { vec![true; pe.len()] } else { super::path::main_path(&pe, &c.origins) };
                // A family: one role, one direction on the grid (blocks across and down, columns,
                // rows: each -1, 0 or 1).
                let step = |e: &rankscope_core::analyze::chain::ChainEdge| {
                    let place = |r: &u32| idx(r).and_then(|i| info.grid.places.get(i)).copied();
                    let (Some(a), Some(b)) = (place(&e.from), place(&e.to)) else {
                        return (e.role, [0i64; 4], false);
                    };
                    let (ab, bb) = (info.grid.block_at(a.block), info.grid.block_at(b.block));
                    let d = |x: u32, y: u32| (i64::from(y) - i64::from(x)).signum();
                    (e.role, [d(ab.0, bb.0), d(ab.1, bb.1), d(a.col, b.col), d(a.row, b.row)], true)
                };
                let keys: Vec<_> = c.edges.iter().map(step).collect();
                let stands = super::path::families(&pe, &shown, &keys, &c.origins, ARROWS_MAX);
                let edges = c
                    .edges
                    .iter()
                    .enumerate()
                    .filter_map(|(k, e)| {
                        Some(Edge {
                            k,
                            from: idx(&e.from)?,
                            to: idx(&e.to)?,
                            wait_ns: e.wait_ns,
                            kept: filter.is_none_or(|f| f.keeps_pg(layout, &e.group)),
                            stands: stands.get(k).copied().unwrap_or(0),
                        })
                    })
                    .collect();
                (c.origins.iter().filter_map(idx).collect(), edges)
            }
            None => (BTreeSet::new(), Vec::new()),
        };
        let max_wait = edges.iter().map(|e: &Edge| e.wait_ns).max().unwrap_or(1).max(1);
        let members = filter.and_then(|f| f.members(layout));
        let clicked = clicked.and_then(|r| idx(&r));
        Cells {
            info,
            job,
            metric,
            values,
            lo,
            hi,
            at,
            lead,
            origins,
            edges,
            max_wait,
            members,
            clicked,
            on_click,
        }
    }

    fn bin(&self, v: i64) -> usize {
        if self.hi <= self.lo {
            0
        } else {
            ((((v - self.lo) as f64 / (self.hi - self.lo) as f64) * (HEAT_BINS - 1) as f64).round() as usize)
                .min(HEAT_BINS - 1)
        }
    }

    /// The place at (block, col, row), if a rank is there.
    fn place_at(&self, block: u32, col: u32, row: u32) -> Option<usize> {
        let gr = &self.info.grid;
        if col >= gr.cols.size || row >= gr.rows.size {
            return None;
        }
        let (cols, rows) = (gr.cols.size as usize, gr.rows.size as usize);
        self.at.get((block as usize * rows + row as usize) * cols + col as usize).copied().flatten()
    }

    fn member(&self, i: usize) -> bool {
        match (&self.members, self.info.grid.places.get(i)) {
            (Some(m), Some(p)) => m.contains(&p.rank),
            _ => true,
        }
    }

    fn centre(&self, i: usize) -> Option<(f64, f64)> {
        let p = self.info.grid.places.get(i)?;
        let (x, y) = self.info.xy(p);
        let c = self.info.geom.cell;
        Some((x + c / 2.0, y + c / 2.0))
    }

    fn edge_width(&self, wait_ns: i64) -> f64 {
        1.5 + 4.5 * wait_ns as f64 / self.max_wait as f64
    }

    /// The tooltip of place `i`.
    fn tip(&self, i: usize) -> String {
        let Some(p) = self.info.grid.places.get(i) else { return String::new() };
        let a = &self.job.analysis;
        let coords = self.info.coords(p);
        let host = self.info.host_of.get(i).copied().flatten().and_then(|h| self.info.hosts.get(h as usize));
        let mut s = format!(
            "rank {}{}{}",
            p.rank,
            if coords.is_empty() { String::new() } else { format!(" · {coords}") },
            host.map_or(String::new(), |h| format!(" · host {h}"))
        );
        let v = self.values.get(i).copied().flatten();
        s.push_str(&format!(
            "\n{}: {}",
            self.metric.title(),
            v.map_or("–".to_string(), |v| format!("{} per step", format::duration(v as f64)))
        ));
        if self.origins.contains(&i) {
            s.push_str("\nwhere the delay starts");
        }
        if self.lead.contains(&i) {
            if let Some(f) = a.findings.first() {
                s.push_str(&format!("\nthe lead finding: {}", f.id.as_str().replace('_', " ")));
            }
        }
        if let Some(c) = &a.wait_chain {
            let role = |g: &str| a.layout.as_ref().map_or(Role::Unknown, |l| l.role_of(g));
            let waited: Vec<String> = c
                .edges
                .iter()
                .filter(|e| e.to == p.rank)
                .map(|e| {
                    format!(
                        "rank {} ({} {}, {})",
                        e.from,
                        role(&e.group),
                        e.group,
                        format::duration(e.wait_ns as f64)
                    )
                })
                .collect();
            if !waited.is_empty() {
                s.push_str(&format!("\nwaited per step for {}", waited.join(", ")));
            }
            let mut made: Vec<u32> = c.edges.iter().filter(|e| e.from == p.rank).map(|e| e.to).collect();
            made.sort_unstable();
            made.dedup();
            match made.len() {
                0 => {}
                1..=6 => s.push_str(&format!(
                    "\nmade wait: rank{} {}",
                    if made.len() == 1 { "" } else { "s" },
                    format::ranges(&made)
                )),
                n => s.push_str(&format!("\nmade {n} ranks wait")),
            }
        }
        if let (Some(l), Some(gs)) = (&a.layout, self.info.groups_of.get(i)) {
            // Groups of one role and the same ranks (a gloo twin, Megatron's `_WITH_CP`) together.
            let mut same: Vec<(Role, &[u32], Vec<&str>)> = Vec::new();
            for g in gs.iter().filter_map(|&gi| l.groups.get(gi)) {
                match same.iter_mut().find(|(r, ranks, _)| *r == g.role && *ranks == &g.ranks[..]) {
                    Some((_, _, names)) => names.push(&g.name),
                    None => same.push((g.role, &g.ranks, vec![&g.name])),
                }
            }
            let names: Vec<String> = same
                .iter()
                .map(|(role, ranks, names)| format!("{role} {} ({})", names.join(", "), group_ranks(ranks)))
                .collect();
            if !names.is_empty() {
                s.push_str(&format!("\ngroups: {}", names.join(", ")));
            }
        }
        s.push_str("\nclick: its groups");
        s
    }
}

/// A group's ranks in a tooltip: ranges, shortened past a few.
fn group_ranks(r: &[u32]) -> String {
    let s = format::ranges(r);
    if s.len() > 40 {
        format!("{} ranks", r.len())
    } else {
        s
    }
}

/// An arrow from `a` to `b` (centres), shifted to its right by half its width so that a → b and
/// b → a are both seen, bent when it passes over other cells, ending short of the centres. An
/// arrow that runs more down (or up) than across is shifted further, past `clear` (the half
/// width of the labels centred at the cells' top and bottom), so that the labels do not hide
/// it. Returns the middle of the curve.
#[allow(clippy::too_many_arguments)]
fn arrow(
    g: &CanvasRenderingContext2d,
    a: (f64, f64),
    b: (f64, f64),
    w: f64,
    cell: f64,
    clear: f64,
    color: &str,
    halo: &str,
) -> Option<(f64, f64)> {
    let (dx, dy) = (b.0 - a.0, b.1 - a.1);
    let len = (dx * dx + dy * dy).sqrt();
    if len < 1.0 {
        return None;
    }
    let (ux, uy) = (dx / len, dy / len);
    let (nx, ny) = (-uy, ux);
    let off = if dy.abs() > dx.abs() && clear > 0.0 {
        (clear + w / 2.0 + 2.0).min(cell / 2.0 - w / 2.0 - 2.0).max(w / 2.0 + 2.0)
    } else {
        w / 2.0 + 2.0
    };
    let bend = if len > cell * 1.5 { (len * 0.2).min(64.0) } else { 0.0 };
    // Both ends stay clear of the cells' middle band, where no text is written.
    let s = (a.0 + ux * cell * 0.3 + nx * off, a.1 + uy * cell * 0.3 + ny * off);
    let e = (b.0 - ux * cell * 0.32 + nx * off, b.1 - uy * cell * 0.32 + ny * off);
    let c = ((s.0 + e.0) / 2.0 + nx * bend, (s.1 + e.1) / 2.0 + ny * bend);
    // The head points along the curve's last tangent.
    let (tx, ty) = (e.0 - c.0, e.1 - c.1);
    let tl = (tx * tx + ty * ty).sqrt().max(1e-6);
    let (hx, hy) = (tx / tl, ty / tl);
    let head = 5.0 + w * 1.4;
    let base = (e.0 - hx * head, e.1 - hy * head);
    for (color, extra) in [(halo, 3.0), (color, 0.0)] {
        g.set_stroke_style_str(color);
        g.set_line_width(w + extra);
        g.begin_path();
        g.move_to(s.0, s.1);
        g.quadratic_curve_to(c.0, c.1, base.0, base.1);
        g.stroke();
        g.set_fill_style_str(color);
        g.begin_path();
        let grow = extra / 2.0;
        g.move_to(e.0 + hx * grow, e.1 + hy * grow);
        g.line_to(base.0 - hy * (head * 0.55 + grow), base.1 + hx * (head * 0.55 + grow));
        g.line_to(base.0 + hy * (head * 0.55 + grow), base.1 - hx * (head * 0.55 + grow));
        g.close_path();
        g.fill();
    }
    Some((0.25 * s.0 + 0.5 * c.0 + 0.25 * base.0, 0.25 * s.1 + 0.5 * c.1 + 0.25 * base.1))
}

impl Cells {
    /// Block titles, column numbers, row labels and block borders of the lines of blocks in
    /// sight (drawn last: no arrow hides them).
    fn draw_axes(&self, g: &CanvasRenderingContext2d, col: &[String], y0: f64, y1: f64, scroll: f64) {
        let color = |i: usize| col.get(i).map_or("#888888", String::as_str);
        let (info, gm) = (&*self.info, self.info.geom);
        let gr = &info.grid;
        let c = gm.cell;
        let n_blocks: u32 = gr.blocks.iter().map(|a| a.size).product();
        for by in 0..gr.block_rows {
            let top = f64::from(by) * (gm.head + gm.block_h + LAYOUT_GAP);
            if top + gm.head + gm.block_h < y0 || top > y1 {
                continue;
            }
            for bx in 0..gr.block_cols {
                let block = by * gr.block_cols + bx;
                if block >= n_blocks.max(1) {
                    break;
                }
                let x = LAYOUT_LABEL_W + f64::from(bx) * (gm.block_w + LAYOUT_GAP);
                g.set_fill_style_str(color(MUTED));
                g.set_text_align("left");
                if !gr.blocks.is_empty() {
                    let _ = g.fill_text(&gr.block_title(block), x, top + 8.0 - scroll);
                }
                if c >= 16.0 {
                    g.set_text_align("center");
                    let every = if c >= 22.0 { 1 } else { 2 };
                    for k in (0..gr.cols.size).step_by(every) {
                        let _ = g.fill_text(
                            &k.to_string(),
                            x + (f64::from(k) + 0.5) * c,
                            top + gm.head - 8.0 - scroll,
                        );
                    }
                }
                g.set_stroke_style_str(color(BORDER));
                g.set_line_width(1.0);
                g.stroke_rect(x - 0.5, top + gm.head - 0.5 - scroll, gm.block_w + 1.0, gm.block_h + 1.0);
            }
            if c >= 12.0 && !gr.rows.name.is_empty() {
                g.set_fill_style_str(color(MUTED));
                g.set_text_align("end");
                let every = ((14.0 / c).ceil() as u32).max(1);
                for r in (0..gr.rows.size).step_by(every as usize) {
                    let y = top + gm.head + (f64::from(r) + 0.5) * c;
                    if y < y0 || y > y1 {
                        continue;
                    }
                    let label = if c >= 18.0 { format!("{} {r}", gr.rows.name) } else { r.to_string() };
                    let _ = g.fill_text(&label, LAYOUT_LABEL_W - 6.0, y - scroll);
                }
            }
        }
    }
}

/// A colour of [`COLORS`] as the canvas read it (grey when missing).
fn color_of(col: &[String], i: usize) -> &str {
    col.get(i).map_or("#888888", String::as_str)
}

/// The pieces of [`Cells`]' drawing, in the order `draw` paints them.
impl Cells {
    /// The cells in sight: those that meet the band `y0..=y1` (content px).
    fn visible(&self, y0: f64, y1: f64) -> Vec<usize> {
        let (info, c) = (&*self.info, self.info.geom.cell);
        let gr = &info.grid;
        (0..gr.places.len())
            .filter(|&i| {
                gr.places.get(i).is_some_and(|p| {
                    let y = info.xy(p).1;
                    y + c >= y0 && y <= y1
                })
            })
            .collect()
    }

    /// Each visible cell filled with its figure's bin (faded outside the filter).
    fn draw_fills(&self, g: &CanvasRenderingContext2d, col: &[String], visible: &[usize], scroll: f64) {
        let color = |i: usize| color_of(col, i);
        let (info, c) = (&*self.info, self.info.geom.cell);
        for &i in visible {
            let Some(p) = info.grid.places.get(i) else { continue };
            let (x, y) = info.xy(p);
            let y = y - scroll;
            let member = self.member(i);
            g.set_global_alpha(if member { 1.0 } else { FADED });
            let b = self.values.get(i).copied().flatten().map(|v| self.bin(v));
            g.set_fill_style_str(match b {
                Some(b) => color(HEAT0 + b),
                None => color(BORDER),
            });
            g.fill_rect(x + 0.5, y + 0.5, c - 1.0, c - 1.0);
            g.set_global_alpha(1.0);
        }
    }

    /// Host boundaries: a thick line where a neighbour in the block is on another host.
    fn draw_hosts(&self, g: &CanvasRenderingContext2d, col: &[String], visible: &[usize], scroll: f64) {
        let (info, c) = (&*self.info, self.info.geom.cell);
        g.set_stroke_style_str(color_of(col, FG));
        g.set_line_width(if c >= 20.0 { 3.0 } else { 2.0 });
        g.begin_path();
        for &i in visible {
            let (Some(p), Some(Some(h))) = (info.grid.places.get(i), info.host_of.get(i)) else { continue };
            let (x, y) = info.xy(p);
            let y = y - scroll;
            let other = |j: Option<usize>| {
                j.and_then(|j| info.host_of.get(j).copied().flatten()).is_some_and(|hj| hj != *h)
            };
            if other(self.place_at(p.block, p.col + 1, p.row)) {
                g.move_to(x + c, y);
                g.line_to(x + c, y + c);
            }
            if other(self.place_at(p.block, p.col, p.row + 1)) {
                g.move_to(x, y + c);
                g.line_to(x + c, y + c);
            }
        }
        g.stroke();
    }

    /// The filter's members, the clicked rank and the lead finding's ranks outlined; where the
    /// delay starts, a filled corner in the lead colour.
    fn draw_outlines(&self, g: &CanvasRenderingContext2d, col: &[String], visible: &[usize], scroll: f64) {
        let color = |i: usize| color_of(col, i);
        let (info, c) = (&*self.info, self.info.geom.cell);
        let gr = &info.grid;
        let outline = |i: usize, color: &str, w: f64, dash: bool| {
            let Some(p) = gr.places.get(i) else { return };
            let (x, y) = info.xy(p);
            g.set_stroke_style_str(color);
            g.set_line_width(w);
            let dashes = js_sys::Array::new();
            if dash {
                dashes.push(&4.0.into());
                dashes.push(&3.0.into());
            }
            let _ = g.set_line_dash(&dashes);
            g.stroke_rect(x + w / 2.0 + 0.5, y - scroll + w / 2.0 + 0.5, c - w - 1.0, c - w - 1.0);
            let _ = g.set_line_dash(&js_sys::Array::new());
        };
        let wide = if c >= 20.0 { 3.0 } else { 2.0 };
        if self.members.is_some() {
            for &i in visible.iter().filter(|&&i| self.member(i)) {
                outline(i, color(ACCENT), wide, false);
            }
        }
        for &i in visible.iter().filter(|i| self.lead.contains(i)) {
            outline(i, color(SELECT), wide, false);
        }
        if let Some(i) = self.clicked {
            outline(i, color(FG), 2.0, true);
        }
        // Where the delay starts: a filled corner in the lead colour.
        for &i in visible.iter().filter(|i| self.origins.contains(i)) {
            let Some(p) = gr.places.get(i) else { continue };
            let (x, y) = info.xy(p);
            let k = (c * 0.38).clamp(6.0, 18.0);
            g.set_fill_style_str(color(SELECT));
            g.begin_path();
            g.move_to(x + 0.5, y - scroll + 0.5);
            g.line_to(x + 0.5 + k, y - scroll + 0.5);
            g.line_to(x + 0.5, y - scroll + 0.5 + k);
            g.close_path();
            g.fill();
        }
    }

    /// The chain of waits that can meet the band `y0..y1`, the faint ones (other groups than
    /// the filter's) first; an arrow down or up passes beside the labels (below: the rank's,
    /// and its figure's from 56 px). Returns where each family's arrow has its count.
    fn draw_chain(
        &self,
        g: &CanvasRenderingContext2d,
        col: &[String],
        (y0, y1): (f64, f64),
        scroll: f64,
    ) -> Vec<((f64, f64), u32)> {
        let color = |i: usize| color_of(col, i);
        let c = self.info.geom.cell;
        let clear = if c >= 56.0 {
            (LABEL_CHARS * CHAR_W + 6.0).min(c - 4.0) / 2.0
        } else if c >= 26.0 {
            (5.0 * CHAR_W + 6.0).min(c - 4.0) / 2.0
        } else {
            0.0
        };
        let mut families: Vec<((f64, f64), u32)> = Vec::new();
        for kept in [false, true] {
            g.set_global_alpha(if kept { 0.92 } else { 0.25 });
            for e in self.edges.iter().filter(|e| e.stands > 0 && e.kept == kept) {
                let (Some(a), Some(b)) = (self.centre(e.from), self.centre(e.to)) else { continue };
                // Only arrows that can meet the band in sight (a bend is at most 64 px).
                if a.1.max(b.1) + 64.0 < y0 || a.1.min(b.1) - 64.0 > y1 {
                    continue;
                }
                let mid = arrow(
                    g,
                    (a.0, a.1 - scroll),
                    (b.0, b.1 - scroll),
                    self.edge_width(e.wait_ns),
                    c,
                    clear,
                    color(SELECT),
                    color(BG),
                );
                if let (Some(m), true) = (mid, e.stands > 1) {
                    families.push((m, e.stands));
                }
            }
        }
        families
    }

    /// Labels, on a patch of their cell's colour so that no arrow hides them: the rank at the
    /// top, its figure at the bottom (the middle band is the arrows').
    fn draw_labels(&self, g: &CanvasRenderingContext2d, col: &[String], visible: &[usize], scroll: f64) {
        let color = |i: usize| color_of(col, i);
        let (info, c) = (&*self.info, self.info.geom.cell);
        g.set_text_align("center");
        for &i in visible {
            let Some(p) = info.grid.places.get(i) else { continue };
            let (x, y) = info.xy(p);
            let y = y - scroll;
            let b = self.values.get(i).copied().flatten().map(|v| self.bin(v));
            let fill = b.map_or(color(BORDER), |b| color(HEAT0 + b));
            // A faded cell is light whatever its colour: dark text on it.
            let ink =
                if self.member(i) && b.is_some_and(|b| b >= HEAT_BINS / 2) { "#ffffff" } else { "#000000" };
            // Outside the filter, the patch is its faded cell again (the background, then the
            // colour as faint as the cell's), the text a little less faint.
            let member = self.member(i);
            let text = if member { 1.0 } else { 0.55 };
            let label = |t: &str, ty: f64| {
                let w = (t.chars().count() as f64 * CHAR_W + 6.0).min(c - 4.0);
                if !member {
                    g.set_global_alpha(1.0);
                    g.set_fill_style_str(color(BG));
                    g.fill_rect(x + (c - w) / 2.0, ty - 7.0, w, 14.0);
                }
                g.set_global_alpha(if member { 1.0 } else { FADED });
                g.set_fill_style_str(fill);
                g.fill_rect(x + (c - w) / 2.0, ty - 7.0, w, 14.0);
                g.set_global_alpha(text);
                g.set_fill_style_str(ink);
                let _ = g.fill_text(t, x + c / 2.0, ty);
            };
            label(&format!("r{}", p.rank), y + 11.0);
            if c >= 56.0 {
                let v = self.values.get(i).copied().flatten();
                label(&v.map_or("–".to_string(), |v| format::duration(v as f64)), y + c - 11.0);
            }
        }
    }
}

/// How many edges a family's arrow stands for, on the arrow (over the labels: a count is read
/// first).
fn draw_counts(g: &CanvasRenderingContext2d, col: &[String], families: Vec<((f64, f64), u32)>) {
    let color = |i: usize| color_of(col, i);
    g.set_text_align("center");
    for ((x, y), n) in families {
        let t = format!("×{n}");
        let w = t.chars().count() as f64 * CHAR_W + 8.0;
        g.set_fill_style_str(color(BG));
        g.fill_rect(x - w / 2.0, y - 7.5, w, 15.0);
        g.set_stroke_style_str(color(SELECT));
        g.set_line_width(1.0);
        g.stroke_rect(x - w / 2.0 + 0.5, y - 7.0, w - 1.0, 14.0);
        g.set_fill_style_str(color(FG));
        let _ = g.fill_text(&t, x, y);
    }
}

impl Rows for Cells {
    fn rows(&self) -> usize {
        self.info.geom.height.ceil() as usize
    }
    fn row_h(&self) -> f64 {
        1.0
    }
    fn top(&self) -> f64 {
        0.0
    }
    fn width(&self) -> f64 {
        self.info.geom.width
    }
    fn colors(&self) -> &'static [(&'static str, &'static str)] {
        &COLORS
    }

    /// Paints the cells in the band `first..last` (CSS px): fills, host boundaries, outlines and
    /// origins, the chain of waits, the axes, the labels and the arrows' counts, in that order.
    fn draw(&self, g: &CanvasRenderingContext2d, col: &[String], first: usize, last: usize, scroll: f64) {
        let c = self.info.geom.cell;
        let (y0, y1) = (first as f64 - c, last as f64 + c);
        g.set_font(FONT);
        g.set_text_baseline("middle");
        let visible = self.visible(y0, y1);
        g.set_text_align("center");
        self.draw_fills(g, col, &visible, scroll);
        self.draw_hosts(g, col, &visible, scroll);
        self.draw_outlines(g, col, &visible, scroll);
        let families = self.draw_chain(g, col, (y0, y1), scroll);
        self.draw_axes(g, col, y0, y1, scroll);
        if c >= 26.0 {
            self.draw_labels(g, col, &visible, scroll);
        }
        g.set_global_alpha(1.0);
        draw_counts(g, col, families);
    }

    fn hit(&self, x: f64, y: f64) -> Option<Hit> {
        let (info, gm) = (&*self.info, self.info.geom);
        let gr = &info.grid;
        let bx = ((x - LAYOUT_LABEL_W) / (gm.block_w + LAYOUT_GAP)).floor();
        let by = (y / (gm.head + gm.block_h + LAYOUT_GAP)).floor();
        if bx < 0.0 || by < 0.0 || bx >= f64::from(gr.block_cols) {
            return None;
        }
        let lx = x - LAYOUT_LABEL_W - bx * (gm.block_w + LAYOUT_GAP);
        let ly = y - by * (gm.head + gm.block_h + LAYOUT_GAP) - gm.head;
        if lx < 0.0 || ly < 0.0 || lx >= gm.block_w || ly >= gm.block_h {
            return None;
        }
        let block = by as u32 * gr.block_cols + bx as u32;
        let i = self.place_at(block, (lx / gm.cell) as u32, (ly / gm.cell) as u32)?;
        let (cx, cy) = info.xy(gr.places.get(i)?);
        Some(Hit { row: i, col: 0, x: cx, y: cy, w: gm.cell, h: gm.cell, tip: self.tip(i) })
    }

    fn click(&self, hit: &Hit) {
        if let Some(p) = self.info.grid.places.get(hit.row) {
            self.on_click.emit(p.rank);
        }
    }

    /// The test hook: the arrangement, every cell's place, the lead finding, the origins and
    /// the arrows (with the ranks and group they join), the filter's members.
    fn layout(&self) -> String {
        let (info, gm) = (&*self.info, self.info.geom);
        let gr = &info.grid;
        let a = &self.job.analysis;
        let axis = |ax: &super::grid::Axis| serde_json::json!({ "name": ax.name, "size": ax.size });
        let cells: Vec<serde_json::Value> = gr
            .places
            .iter()
            .enumerate()
            .map(|(i, p)| {
                let (x, y) = info.xy(p);
                serde_json::json!({
                    "rank": p.rank, "block": p.block, "col": p.col, "row": p.row, "x": x, "y": y,
                    "host": info.host_of.get(i).copied().flatten().and_then(|h| info.hosts.get(h as usize)),
                    "value": self.values.get(i).copied().flatten(),
                })
            })
            .collect();
        let rank = |i: usize| gr.places.get(i).map(|p| p.rank);
        let chain = a.wait_chain.as_ref().map_or(&[][..], |c| &c.edges[..]);
        let edges: Vec<serde_json::Value> = self
            .edges
            .iter()
            .filter_map(|x| {
                let e = chain.get(x.k)?;
                Some(serde_json::json!({
                    "from": e.from, "to": e.to, "group": e.group, "role": e.role, "wait_ns": e.wait_ns,
                    "width": self.edge_width(e.wait_ns), "kept": x.kept, "drawn": x.stands > 0,
                    "stands_for": x.stands,
                }))
            })
            .collect();
        serde_json::json!({
            "words": gr.words(), "mesh": gr.mesh, "metric": self.metric.name(),
            "cols": axis(&gr.cols), "rows": axis(&gr.rows), "blocks": gr.blocks.iter().map(axis).collect::<Vec<_>>(),
            "block_cols": gr.block_cols, "block_rows": gr.block_rows, "cell": gm.cell, "hosts": info.hosts,
            "cells": cells,
            "lead": a.findings.first().map(|f| serde_json::json!({ "id": f.id.as_str(), "ranks": f.ranks })),
            "marked": self.lead.iter().filter_map(|&i| rank(i)).collect::<Vec<_>>(),
            "origins": self.origins.iter().filter_map(|&i| rank(i)).collect::<Vec<_>>(),
            "edges": edges,
            "members": self.members,
            "clicked": self.clicked.and_then(rank),
        })
        .to_string()
    }
}
