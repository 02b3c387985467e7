//! Timeline: every rank's CPU threads and GPU streams on one canvas.
//!
//! The canvas never sees events: it draws level-of-detail tiles (see
//! `rankscope_core::view::timeline`) that the workers compute and this component caches. At each
//! frame it picks the level whose pixel is at most the screen's, draws the tiles it has, and for
//! a missing one asks the worker and meanwhile draws the nearest coarser tile it has, so zoom and
//! pan never wait. Interaction follows Perfetto: Ctrl+wheel zooms at the pointer, Shift+wheel
//! pans, wheel scrolls, drag pans, W/S zoom and A/D pan.
//!
//! Time runs on the aligned clock (each rank's time − the analysis' alignment offset of its
//! rank; a row's `offset_ns` is the shift added to its rank's times) or, with the toggle, on each
//! rank's own clock. Positions are computed as `i64` ns relative to the job's first
//! event before they become `f64` pixels, so a nanosecond stays a nanosecond at any zoom.

use std::cell::RefCell;
use std::collections::{HashMap, HashSet};
use std::rc::{Rc, Weak};

use rankscope_core::model::Class;
use rankscope_core::sequence::marks::{Mark, MarkKind};
use rankscope_core::view::timeline::{level_for, tiles_covering, MAX_LEVEL, NO_LABEL};
use rankscope_core::view::{EventDetail, Found, Hit, Tile, TileKey};
use wasm_bindgen::prelude::*;
use wasm_bindgen::JsCast;
use web_sys::{CanvasRenderingContext2d, HtmlCanvasElement};
use yew::prelude::*;

use super::{Ctx, Listener};
use crate::format;
use crate::pool::Pool;
use crate::protocol::FileId;
use crate::state::{Action, JobView};
use crate::tokens::*;

#[derive(Properties, PartialEq, Debug)]
pub struct Props {
    pub job: Rc<JobView>,
    /// The window from the URL hash (ns from the job's first event).
    pub window: Option<(i64, i64)>,
    /// The rank to scroll to.
    pub focus: Option<u32>,
    /// Aligned clocks (each rank's time − its alignment offset) or raw.
    pub aligned: bool,
    /// Counts the times another view opened the timeline: a new count shows `window` and
    /// `focus` again even when they are the same as before.
    #[prop_or_default]
    pub opened: u32,
}

#[derive(Debug, Clone)]
enum RowKind {
    Rank { file: FileId, label: String, steps: Vec<(u32, i64, i64)>, offset_ns: i64 },
    Lane { file: FileId, lane: u32, label: String, depth: u32, offset_ns: i64 },
}

#[derive(Debug, Clone)]
struct Row {
    kind: RowKind,
    /// Top in content coordinates (before scrolling), CSS px.
    y: f64,
    h: f64,
    /// Bottom of the rank group this row belongs to (for step lines).
    group_end: f64,
}

#[derive(Debug, Default, Clone)]
struct Colors {
    class: Vec<String>,
    text_on: Vec<String>,
    bg: String,
    fg: String,
    muted: String,
    header: String,
    lane_alt: String,
    step: String,
    ruler: String,
    highlight: String,
    select: String,
}

fn css_var(style: &web_sys::CssStyleDeclaration, name: &str, fallback: &str) -> String {
    let v = style.get_property_value(name).unwrap_or_default();
    let v = v.trim();
    if v.is_empty() {
        fallback.to_string()
    } else {
        v.to_string()
    }
}

/// Black or white text, whichever reads better on `hex` (`#rrggbb`).
fn text_on(hex: &str) -> String {
    let h = hex.trim_start_matches('#');
    let c = |i: usize| {
        h.get(i..i + 2).and_then(|s| u8::from_str_radix(s, 16).ok()).map_or(0.5, |v| f64::from(v) / 255.0)
    };
    let lum = 0.2126 * c(0) + 0.7152 * c(2) + 0.0722 * c(4);
    if lum > 0.5 { "#000000" } else { "#ffffff" }.to_string()
}

fn read_colors() -> Colors {
    let Some(style) = web_sys::window()
        .zip(web_sys::window().and_then(|w| w.document()).and_then(|d| d.document_element()))
        .and_then(|(w, el)| w.get_computed_style(&el).ok().flatten())
    else {
        return Colors::default();
    };
    let class: Vec<String> = Class::ALL.iter().map(|&c| css_var(&style, &class_var(c), "#888888")).collect();
    Colors {
        text_on: class.iter().map(|c| text_on(c)).collect(),
        class,
        bg: css_var(&style, "--bg", "#ffffff"),
        fg: css_var(&style, "--fg", "#111111"),
        muted: css_var(&style, "--muted", "#666666"),
        header: css_var(&style, "--panel", "#f2f2f2"),
        lane_alt: css_var(&style, "--lane-alt", "#fafafa"),
        step: css_var(&style, "--step-line", "#444444"),
        ruler: css_var(&style, "--ruler", "#eeeeee"),
        highlight: css_var(&style, "--highlight", "#ffd400"),
        select: css_var(&style, "--select", "#d81b60"),
    }
}

struct Ctl {
    canvas: NodeRef,
    pool: Option<Pool>,
    dispatch: Option<Callback<Action>>,
    origin: i64,
    total_ns: f64,
    /// View start (ns from `origin`) and zoom.
    t0: f64,
    ns_per_px: f64,
    scroll_y: f64,
    width: f64,
    height: f64,
    rows: Vec<Row>,
    content_h: f64,
    cache: HashMap<(FileId, TileKey), Rc<Tile>>,
    inflight: HashSet<(FileId, TileKey)>,
    colors: Colors,
    pointer: Option<(f64, f64)>,
    /// The event under the pointer: file, lane, nesting row, details.
    hover: Option<(FileId, u32, u32, EventDetail)>,
    /// Where the pending pick asked (file, lane, row).
    pick_at: (FileId, u32, u32),
    /// The clicked event (file, lane, row, details): outlined, with its launch → kernel flow.
    selected: Option<(FileId, u32, u32, EventDetail)>,
    /// Search matches per file, for the current `search_req`.
    found: HashMap<FileId, Found>,
    search_req: u32,
    pick_req: u32,
    drag: Option<(f64, f64, f64, f64, bool)>,
    frame_pending: bool,
    /// The pending animation frame's id (cancelled when the timeline goes away: its closure is
    /// dropped with this value).
    frame_id: Option<i32>,
    frame: Option<Closure<dyn FnMut()>>,
    settle: Option<(i32, Closure<dyn FnMut()>)>,
    /// The window last written to the state (to tell our own updates from the hash's).
    published: Option<(i64, i64)>,
    /// Rank groups folded to their header (click the header to fold or unfold).
    collapsed: HashSet<FileId>,
    job: Option<Rc<JobView>>,
    aligned: bool,
    /// The rank opened from another view: its header is marked.
    focus: Option<u32>,
    /// The first hang / mismatch on each rank ([`crate::divergence`]), own clocks.
    marks: Vec<(FileId, Mark)>,
    /// The marks' places as last written to the canvas' `data-marks` (a test hook).
    marks_attr: String,
    /// The `opened` count last shown.
    opened_seen: u32,
}

impl Ctl {
    fn new(canvas: NodeRef) -> Ctl {
        Ctl {
            canvas,
            pool: None,
            dispatch: None,
            origin: 0,
            total_ns: 1.0,
            t0: 0.0,
            ns_per_px: 1.0,
            scroll_y: 0.0,
            width: 800.0,
            height: 600.0,
            rows: Vec::new(),
            content_h: 0.0,
            cache: HashMap::new(),
            inflight: HashSet::new(),
            colors: Colors::default(),
            pointer: None,
            hover: None,
            pick_at: (0, 0, 0),
            selected: None,
            found: HashMap::new(),
            search_req: 0,
            pick_req: 0,
            drag: None,
            frame_pending: false,
            frame_id: None,
            frame: None,
            settle: None,
            published: None,
            collapsed: HashSet::new(),
            job: None,
            aligned: true,
            focus: None,
            marks: Vec::new(),
            marks_attr: String::new(),
            opened_seen: 0,
        }
    }

    fn plot_w(&self) -> f64 {
        (self.width - GUTTER_W).max(10.0)
    }

    fn layout(&mut self, job: &JobView) {
        self.origin = job.facts.span_start_ns;
        self.total_ns = ((job.facts.span_end_ns - job.facts.span_start_ns) as f64).max(1.0);
        let mut rows = Vec::new();
        let mut y = RULER_H;
        // The lanes' places, as a test hook on the canvas (`data-layout`): the e2e tests aim at
        // events with it.
        let mut places: Vec<String> = Vec::new();
        for (file, r) in &job.ranks {
            // A digest's rank without its trace has no events to draw (the bar above says so).
            if job.digest.is_some() && r.lanes.is_empty() {
                continue;
            }
            let start = rows.len();
            let offset_ns = if self.aligned { -job.offset(*file) } else { 0 };
            rows.push(Row {
                kind: RowKind::Rank {
                    file: *file,
                    label: format!(
                        "{} rank {} · {}",
                        if self.collapsed.contains(file) { "▸" } else { "▾" },
                        r.rank,
                        r.file
                    ),
                    steps: if r.steps_synthetic {
                        Vec::new()
                    } else {
                        r.steps.iter().map(|s| (s.step, s.start_ns, s.end_ns)).collect()
                    },
                    offset_ns,
                },
                y,
                h: RANK_H,
                group_end: 0.0,
            });
            y += RANK_H;
            let lanes = if self.collapsed.contains(file) { &r.lanes[..0] } else { &r.lanes[..] };
            for l in lanes.iter().filter(|l| l.events > 0) {
                let depth = l.depth.max(1);
                let h = f64::from(depth) * ROW_H + LANE_GAP;
                places.push(format!(
                    r#"{{"rank":{},"file":{},"lane":{},"gpu":{},"y":{y},"h":{h},"offset_ns":{offset_ns}}}"#,
                    r.rank, file, l.lane, l.gpu
                ));
                rows.push(Row {
                    kind: RowKind::Lane {
                        file: *file,
                        lane: l.lane,
                        label: l.label.clone(),
                        depth,
                        offset_ns,
                    },
                    y,
                    h,
                    group_end: 0.0,
                });
                y += h;
            }
            for row in &mut rows[start..] {
                row.group_end = y;
            }
        }
        self.rows = rows;
        self.content_h = y;
        self.marks = crate::divergence::placed(job);
        if let Some(c) = self.canvas.cast::<HtmlCanvasElement>() {
            let _ = c.set_attribute("data-layout", &format!("[{}]", places.join(",")));
        }
    }

    fn fit(&mut self) {
        self.ns_per_px = (self.total_ns * 1.02 / self.plot_w()).max(0.05);
        self.t0 = -self.total_ns * 0.01;
    }

    fn clamp(&mut self) {
        let max_npp = (self.total_ns * 1.5 / self.plot_w()).max(1.0);
        self.ns_per_px = self.ns_per_px.clamp(0.05, max_npp);
        let vis = self.plot_w() * self.ns_per_px;
        self.t0 = self.t0.clamp(-vis * 0.5, self.total_ns - vis * 0.5);
        let max_scroll = (self.content_h - self.height + 40.0).max(0.0);
        self.scroll_y = self.scroll_y.clamp(0.0, max_scroll);
    }

    /// Zooms by `factor` (< 1 zooms in) keeping the time under canvas x `x` in place.
    fn zoom_at(&mut self, factor: f64, x: f64) {
        let px = (x - GUTTER_W).clamp(0.0, self.plot_w());
        let t = self.t0 + px * self.ns_per_px;
        self.ns_per_px *= factor;
        self.clamp();
        self.t0 = t - px * self.ns_per_px;
        self.clamp();
    }

    fn x_of(&self, abs_ns: i64, offset_ns: i64) -> f64 {
        let rel = abs_ns.saturating_add(offset_ns).saturating_sub(self.origin) as f64;
        GUTTER_W + (rel - self.t0) / self.ns_per_px
    }

    /// The rank group whose header is at canvas y.
    fn header_at(&self, y: f64) -> Option<FileId> {
        let cy = y + self.scroll_y;
        self.rows.iter().find(|r| cy >= r.y && cy < r.y + r.h).and_then(|r| match r.kind {
            RowKind::Rank { file, .. } => Some(file),
            RowKind::Lane { .. } => None,
        })
    }

    /// Folds or unfolds a rank group.
    fn toggle(&mut self, file: FileId) {
        if !self.collapsed.remove(&file) {
            self.collapsed.insert(file);
        }
        if let Some(job) = self.job.clone() {
            self.layout(&job);
            self.clamp();
        }
    }

    /// The lane row and nesting depth under content y, with its file.
    fn lane_at(&self, y: f64) -> Option<(FileId, u32, u32, i64)> {
        let cy = y + self.scroll_y;
        let row = self.rows.iter().find(|r| cy >= r.y && cy < r.y + r.h)?;
        match &row.kind {
            RowKind::Lane { file, lane, depth, offset_ns, .. } => {
                let d = ((cy - row.y) / ROW_H).floor() as u32;
                (d < *depth).then_some((*file, *lane, d, *offset_ns))
            }
            RowKind::Rank { .. } => None,
        }
    }

    /// Canvas y of the middle of nesting row `depth` of `lane` of `file` (None: folded away).
    fn row_mid(&self, file: FileId, lane: u32, depth: u32) -> Option<f64> {
        self.rows.iter().find_map(|r| match r.kind {
            RowKind::Lane { file: f, lane: l, .. } if f == file && l == lane => {
                Some(r.y - self.scroll_y + f64::from(depth) * ROW_H + ROW_H / 2.0)
            }
            _ => None,
        })
    }

    fn offset_of(&self, file: FileId) -> i64 {
        self.rows
            .iter()
            .find_map(|r| match r.kind {
                RowKind::Rank { file: f, offset_ns, .. } if f == file => Some(offset_ns),
                _ => None,
            })
            .unwrap_or(0)
    }

    /// Scrolls so that `rank`'s group is at the top.
    fn scroll_to_rank(&mut self, rank: u32) {
        let Some(file) = self.job.as_ref().and_then(|j| j.file_of(rank)) else { return };
        if let Some(r) =
            self.rows.iter().find(|r| matches!(r.kind, RowKind::Rank { file: f, .. } if f == file))
        {
            self.scroll_y = r.y - RULER_H;
            self.clamp();
        }
    }

    fn window_ns(&self) -> (i64, i64) {
        (self.t0.round() as i64, (self.t0 + self.plot_w() * self.ns_per_px).round() as i64)
    }
}

type Shared = Rc<RefCell<Ctl>>;

fn request_frame(c: &Shared) {
    let mut ctl = c.borrow_mut();
    if ctl.frame_pending {
        return;
    }
    if ctl.frame.is_none() {
        let weak = Rc::downgrade(c);
        ctl.frame = Some(Closure::new(move || {
            if let Some(c) = weak.upgrade() {
                c.borrow_mut().frame_pending = false;
                draw(&c);
            }
        }));
    }
    if let (Some(w), Some(f)) = (web_sys::window(), ctl.frame.as_ref()) {
        if let Ok(id) = w.request_animation_frame(f.as_ref().unchecked_ref()) {
            ctl.frame_pending = true;
            ctl.frame_id = Some(id);
        }
    }
}

/// After the view stops moving, the window goes to the state (and so to the URL hash).
fn settle_later(c: &Shared) {
    let Some(w) = web_sys::window() else { return };
    let mut ctl = c.borrow_mut();
    if let Some((id, _)) = ctl.settle.take() {
        w.clear_timeout_with_handle(id);
    }
    let weak: Weak<RefCell<Ctl>> = Rc::downgrade(c);
    let cb = Closure::<dyn FnMut()>::new(move || {
        if let Some(c) = weak.upgrade() {
            let (win, dispatch) = {
                let mut ctl = c.borrow_mut();
                let win = ctl.window_ns();
                ctl.published = Some(win);
                (win, ctl.dispatch.clone())
            };
            if let Some(d) = dispatch {
                d.emit(Action::SetWindow(Some(win)));
            }
        }
    });
    if let Ok(id) = w.set_timeout_with_callback_and_timeout_and_arguments_0(cb.as_ref().unchecked_ref(), 300)
    {
        ctl.settle = Some((id, cb));
    }
}

fn moved(c: &Shared) {
    c.borrow_mut().clamp();
    request_frame(c);
    settle_later(c);
}

fn fit_text(s: &str, width: f64) -> Option<String> {
    let n = ((width - 6.0) / CHAR_W).floor();
    if n < 3.0 {
        return None;
    }
    let n = n as usize;
    if s.chars().count() <= n {
        Some(s.to_string())
    } else {
        Some(s.chars().take(n.saturating_sub(1)).chain(std::iter::once('…')).collect())
    }
}

fn draw(c: &Shared) {
    let mut guard = c.borrow_mut();
    let ctl = &mut *guard;
    let Some(canvas) = ctl.canvas.cast::<HtmlCanvasElement>() else { return };
    let Some(parent) = canvas.parent_element() else { return };
    let (w, h) = (f64::from(parent.client_width()).max(200.0), f64::from(parent.client_height()).max(200.0));
    let dpr = web_sys::window().map_or(1.0, |w| w.device_pixel_ratio()).max(1.0);
    if (w - ctl.width).abs() > 0.5 || (h - ctl.height).abs() > 0.5 || canvas.width() != (w * dpr) as u32 {
        ctl.width = w;
        ctl.height = h;
        canvas.set_width((w * dpr) as u32);
        canvas.set_height((h * dpr) as u32);
        ctl.clamp();
    }
    let Some(g) =
        canvas.get_context("2d").ok().flatten().and_then(|x| x.dyn_into::<CanvasRenderingContext2d>().ok())
    else {
        return;
    };
    if ctl.colors.class.is_empty() {
        ctl.colors = read_colors();
    }
    let col = ctl.colors.clone();
    let _ = g.set_transform(dpr, 0.0, 0.0, dpr, 0.0, 0.0);
    g.set_fill_style_str(&col.bg);
    g.fill_rect(0.0, 0.0, w, h);
    g.set_font(FONT);
    g.set_text_baseline("middle");

    let level = level_for(ctl.ns_per_px);
    let (t0, t1) = (ctl.t0, ctl.t0 + ctl.plot_w() * ctl.ns_per_px);
    let mut wanted: Vec<(FileId, TileKey)> = Vec::new();
    let rows = ctl.rows.clone();
    for (i, row) in rows.iter().enumerate() {
        let y = row.y - ctl.scroll_y;
        if y + row.h < RULER_H || y > h {
            continue;
        }
        match &row.kind {
            RowKind::Rank { label, file, .. } => {
                g.set_fill_style_str(&col.header);
                g.fill_rect(0.0, y, w, row.h);
                if ctl.focus.is_some()
                    && ctl.focus
                        == ctl
                            .job
                            .as_ref()
                            .and_then(|j| j.ranks.iter().find(|(f, _)| f == file))
                            .map(|(_, r)| r.rank)
                {
                    g.set_fill_style_str(&col.select);
                    g.fill_rect(0.0, y, 4.0, row.h);
                }
                g.set_fill_style_str(&col.fg);
                if let Some(t) = fit_text(label, GUTTER_W - 4.0) {
                    g.fill_text(&t, 6.0, y + row.h / 2.0).ok();
                }
            }
            RowKind::Lane { file, lane, depth, offset_ns, label } => {
                if i % 2 == 0 {
                    g.set_fill_style_str(&col.lane_alt);
                    g.fill_rect(GUTTER_W, y, w - GUTTER_W, row.h - LANE_GAP);
                }
                g.save();
                g.begin_path();
                g.rect(GUTTER_W, y, w - GUTTER_W, row.h);
                g.clip();
                let abs0 = ctl.origin + t0.floor() as i64 - offset_ns;
                let abs1 = ctl.origin + t1.ceil() as i64 - offset_ns;
                for key in tiles_covering(*lane, level, abs0, abs1) {
                    let tile = match ctl.cache.get(&(*file, key)) {
                        Some(t) => Some(t.clone()),
                        None => {
                            wanted.push((*file, key));
                            (1..=8u8)
                                .filter(|k| level + k <= MAX_LEVEL)
                                .map(|k| TileKey {
                                    lane: *lane,
                                    level: level + k,
                                    index: key.index.div_euclid(1 << k),
                                })
                                .find_map(|k2| ctl.cache.get(&(*file, k2)).cloned())
                        }
                    };
                    if let Some(t) = tile {
                        draw_tile(&g, ctl, &t, y, *offset_ns, &col);
                    }
                }
                if let Some(found) = ctl.found.get(file) {
                    g.set_stroke_style_str(&col.highlight);
                    g.set_line_width(2.0);
                    for hit in found.hits.iter().filter(|h| h.lane == *lane) {
                        outline(&g, ctl, hit, y, *offset_ns);
                    }
                }
                if let Some((f, l, d, sel)) = &ctl.selected {
                    if f == file && l == lane {
                        g.set_stroke_style_str(&col.select);
                        g.set_line_width(2.0);
                        let hit = Hit {
                            lane: *l,
                            depth: *d,
                            start_ns: sel.start_ns,
                            end_ns: sel.start_ns + sel.dur_ns,
                        };
                        outline(&g, ctl, &hit, y, *offset_ns);
                    }
                }
                g.restore();
                // Gutter label.
                g.set_fill_style_str(&col.bg);
                g.fill_rect(0.0, y, GUTTER_W, row.h);
                g.set_fill_style_str(&col.muted);
                if let Some(t) = fit_text(label, GUTTER_W - 10.0) {
                    g.fill_text(&t, 12.0, y + ROW_H / 2.0).ok();
                }
                if *depth > 1 {
                    g.set_fill_style_str(&col.ruler);
                    g.fill_rect(0.0, y + row.h - 1.0, GUTTER_W, 1.0);
                }
            }
        }
    }
    // Step boundaries: a line at each step start (and the last end) across the rank's lanes.
    g.set_stroke_style_str(&col.step);
    g.set_line_width(1.0);
    for row in &rows {
        let RowKind::Rank { steps, offset_ns, .. } = &row.kind else { continue };
        let y0 = (row.y - ctl.scroll_y).max(RULER_H);
        let y1 = (row.group_end - ctl.scroll_y).min(h);
        if y1 <= y0 {
            continue;
        }
        let mut marks: Vec<(f64, Option<u32>)> =
            steps.iter().map(|&(n, s, _)| (ctl.x_of(s, *offset_ns), Some(n))).collect();
        if let Some(&(_, _, e)) = steps.last() {
            marks.push((ctl.x_of(e, *offset_ns), None));
        }
        let _ = g.set_line_dash(&js_sys::Array::of2(&4.0.into(), &3.0.into()));
        // Hundreds of steps at full zoom-out: a line only where it stands apart from the last,
        // a label only where it fits.
        let (mut last_line, mut last_label) = (f64::MIN, f64::MIN);
        for (x, n) in marks {
            if x < GUTTER_W || x > w || x - last_line < 6.0 {
                continue;
            }
            last_line = x;
            g.begin_path();
            g.move_to(x.floor() + 0.5, y0);
            g.line_to(x.floor() + 0.5, y1);
            g.stroke();
            if let Some(n) = n {
                let hy = row.y - ctl.scroll_y + RANK_H / 2.0;
                let text = format!("step {n}");
                if hy > RULER_H && x > GUTTER_W + 2.0 && x - last_label > text.len() as f64 * CHAR_W + 10.0 {
                    last_label = x;
                    g.set_fill_style_str(&col.fg);
                    g.fill_text(&text, x + 4.0, hy).ok();
                }
            }
        }
        let _ = g.set_line_dash(&js_sys::Array::new());
    }
    let places = draw_marks(&g, ctl, w, h, &col);
    if places != ctl.marks_attr {
        let _ = canvas.set_attribute("data-marks", &places);
        ctl.marks_attr = places;
    }
    draw_flow(&g, ctl, &col);
    draw_ruler(&g, ctl, w, &col);
    draw_hover(&g, ctl, w, h, &col);

    // Ask for the tiles this frame lacked (nearest to the centre first is not needed: a worker
    // answers a tile in well under a frame).
    let pool = ctl.pool.clone();
    let mut asks = Vec::new();
    for k in wanted {
        if ctl.inflight.insert(k) {
            asks.push(k);
        }
    }
    drop(guard);
    if let Some(p) = pool {
        for (file, key) in asks {
            p.tile(file, key);
        }
    }
}

/// The divergence on every rank: the collective a rank waited in as a band over its lanes, the
/// instant a rank stopped short of it (its last collective's end) as a dashed line; a label on
/// the rank's header (pinned to the edge, with an arrow, when the mark is off screen). Returns
/// the marks' places as JSON for the canvas' `data-marks`.
fn draw_marks(g: &CanvasRenderingContext2d, ctl: &Ctl, w: f64, h: f64, col: &Colors) -> String {
    let mut places: Vec<serde_json::Value> = Vec::new();
    for row in &ctl.rows {
        let RowKind::Rank { file, offset_ns, .. } = &row.kind else { continue };
        for (_, m) in ctl.marks.iter().filter(|(f, _)| f == file) {
            let (Some(a), Some(b)) = (m.start_ns, m.end_ns) else { continue };
            let x0 = ctl.x_of(a, *offset_ns);
            let x1 = ctl.x_of(b, *offset_ns).max(x0);
            let head = row.y - ctl.scroll_y;
            let y0 = head.max(RULER_H);
            let y1 = (row.group_end - ctl.scroll_y).min(h);
            let point = matches!(m.kind, MarkKind::NotIssued | MarkKind::Skipped);
            g.save();
            g.begin_path();
            g.rect(GUTTER_W, RULER_H, w - GUTTER_W, h - RULER_H);
            g.clip();
            g.set_stroke_style_str(&col.select);
            g.set_fill_style_str(&col.select);
            if y1 > y0 {
                if point {
                    g.set_line_width(2.0);
                    let _ = g.set_line_dash(&js_sys::Array::of2(&5.0.into(), &3.0.into()));
                    g.begin_path();
                    g.move_to(x0.floor() + 0.5, y0);
                    g.line_to(x0.floor() + 0.5, y1);
                    g.stroke();
                    let _ = g.set_line_dash(&js_sys::Array::new());
                } else {
                    let bw = (x1 - x0).max(3.0);
                    g.set_global_alpha(0.12);
                    g.fill_rect(x0, y0, bw, y1 - y0);
                    g.set_global_alpha(1.0);
                    g.set_line_width(2.0);
                    g.stroke_rect(x0, y0 + 1.0, bw, y1 - y0 - 2.0);
                }
            }
            // The label, on the rank's header row.
            let text = format!("{}{}", if m.named { "⚠ " } else { "" }, m.label);
            let (lo, hi) = (GUTTER_W + 2.0, w - 2.0);
            let (text, tx) = if x1 < lo {
                let t = format!("◀ {text}");
                (t, lo + 2.0)
            } else if x0 > hi {
                let t = format!("{text} ▶");
                let tw = t.chars().count() as f64 * CHAR_W + 8.0;
                (t, (hi - tw).max(lo))
            } else {
                let tw = text.chars().count() as f64 * CHAR_W + 8.0;
                (text, (x0.max(lo) + 4.0).min(hi - tw).max(lo))
            };
            let shown = fit_text(&text, hi - tx).unwrap_or_default();
            let tw = shown.chars().count() as f64 * CHAR_W + 8.0;
            let ly = head + 2.0;
            if head + RANK_H > RULER_H && head < h && !shown.is_empty() {
                g.set_fill_style_str(&col.select);
                g.fill_rect(tx, ly, tw, RANK_H - 4.0);
                g.set_fill_style_str("#ffffff");
                g.fill_text(&shown, tx + 4.0, head + RANK_H / 2.0).ok();
            }
            g.restore();
            places.push(serde_json::json!({
                "rank": m.rank, "kind": m.kind, "named": m.named, "label": m.label, "shown": shown,
                "x0": x0.round(), "x1": x1.round(), "y0": y0.round(), "y1": y1.round(),
                "in_x": x1 >= GUTTER_W && x0 <= w,
                "visible": x1 >= GUTTER_W && x0 <= w && y1 > y0,
            }));
        }
    }
    serde_json::Value::Array(places).to_string()
}

/// Outlines an event (a search match, the selection), at least 3 px wide so it shows at any zoom.
fn outline(g: &CanvasRenderingContext2d, ctl: &Ctl, hit: &Hit, y: f64, offset_ns: i64) {
    let x0 = ctl.x_of(hit.start_ns, offset_ns);
    let x1 = ctl.x_of(hit.end_ns, offset_ns);
    if x1 < GUTTER_W - 2.0 || x0 > ctl.width + 2.0 {
        return;
    }
    let w = (x1 - x0).max(3.0);
    let by = y + f64::from(hit.depth) * ROW_H;
    g.stroke_rect(x0 - 1.0, by, w + 1.0, ROW_H - 1.0);
}

/// The selected event's launch → kernel flow: an arrow from the launch to the GPU work.
fn draw_flow(g: &CanvasRenderingContext2d, ctl: &Ctl, col: &Colors) {
    let Some((file, lane, depth, d)) = &ctl.selected else { return };
    let Some(link) = &d.link else { return };
    let off = ctl.offset_of(*file);
    let (Some(ya), Some(yb)) =
        (ctl.row_mid(*file, *lane, *depth), ctl.row_mid(*file, link.place.lane, link.place.depth))
    else {
        return;
    };
    let xa = ctl.x_of(d.start_ns, off);
    let xb = ctl.x_of(link.place.start_ns, off);
    // From the launch (CPU) to the kernel (GPU).
    let ((x0, y0), (x1, y1)) = if d.gpu { ((xb, yb), (xa, ya)) } else { ((xa, ya), (xb, yb)) };
    g.save();
    g.begin_path();
    g.rect(GUTTER_W, RULER_H, ctl.width - GUTTER_W, ctl.height - RULER_H);
    g.clip();
    g.set_stroke_style_str(&col.select);
    g.set_fill_style_str(&col.select);
    g.set_line_width(1.5);
    g.begin_path();
    g.move_to(x0, y0);
    g.bezier_curve_to(x0 + 20.0, y0, x1 - 20.0, y1, x1, y1);
    g.stroke();
    g.begin_path();
    g.move_to(x1, y1);
    g.line_to(x1 - 7.0, y1 - 4.0);
    g.line_to(x1 - 7.0, y1 + 4.0);
    g.close_path();
    g.fill();
    g.restore();
}

fn draw_tile(g: &CanvasRenderingContext2d, ctl: &Ctl, t: &Tile, y: f64, offset_ns: i64, col: &Colors) {
    let w = ctl.width;
    for k in 0..t.len() {
        let x0 = ctl.x_of(t.start_ns[k], offset_ns);
        let x1 = ctl.x_of(t.end_ns[k], offset_ns);
        if x1 < GUTTER_W || x0 > w {
            continue;
        }
        let x0c = x0.max(GUTTER_W - 1.0);
        let x1c = x1.min(w + 1.0);
        let bw = (x1c - x0c).max(1.0);
        let by = y + f64::from(t.depth[k]) * ROW_H;
        let class = t.class[k] as usize;
        g.set_fill_style_str(col.class.get(class).map_or("#888", String::as_str));
        g.fill_rect(x0c, by, bw, ROW_H - 1.0);
        if t.label[k] != NO_LABEL && bw > 30.0 {
            if let Some(text) = t.labels.get(t.label[k] as usize).and_then(|s| fit_text(s, bw)) {
                g.set_fill_style_str(col.text_on.get(class).map_or("#000", String::as_str));
                g.fill_text(&text, x0c + 3.0, by + ROW_H / 2.0).ok();
            }
        }
    }
}

/// A tick spacing of 1, 2 or 5 × 10^k ns giving about `target` ns between ticks.
fn nice_step(target: f64) -> f64 {
    let p = 10f64.powf(target.max(1.0).log10().floor());
    [1.0, 2.0, 5.0, 10.0].iter().map(|m| m * p).find(|&s| s >= target).unwrap_or(10.0 * p)
}

fn draw_ruler(g: &CanvasRenderingContext2d, ctl: &Ctl, w: f64, col: &Colors) {
    g.set_fill_style_str(&col.ruler);
    g.fill_rect(0.0, 0.0, w, RULER_H);
    let step = nice_step(110.0 * ctl.ns_per_px);
    let first = (ctl.t0 / step).ceil() * step;
    g.set_fill_style_str(&col.fg);
    g.set_stroke_style_str(&col.muted);
    let mut t = first;
    let end = ctl.t0 + ctl.plot_w() * ctl.ns_per_px;
    while t <= end {
        let x = GUTTER_W + (t - ctl.t0) / ctl.ns_per_px;
        g.begin_path();
        g.move_to(x.floor() + 0.5, RULER_H - 6.0);
        g.line_to(x.floor() + 0.5, RULER_H);
        g.stroke();
        g.fill_text(&format::duration(t), x + 3.0, RULER_H / 2.0).ok();
        t += step;
    }
    g.set_fill_style_str(&col.ruler);
    g.fill_rect(0.0, 0.0, GUTTER_W, RULER_H);
    g.set_fill_style_str(&col.muted);
    let win = format!("{} visible", format::duration(ctl.plot_w() * ctl.ns_per_px));
    g.fill_text(&win, 6.0, RULER_H / 2.0).ok();
}

fn draw_hover(g: &CanvasRenderingContext2d, ctl: &Ctl, w: f64, h: f64, col: &Colors) {
    let (Some((px, py)), Some((_, _, _, d))) = (ctl.pointer, ctl.hover.as_ref()) else { return };
    if ctl.drag.is_some() {
        return;
    }
    let mut lines = vec![d.name.clone()];
    lines.push(format!(
        "{} · {}{}",
        d.class.replace('_', " "),
        if d.instant { "instant".to_string() } else { format::duration(d.dur_ns as f64) },
        d.step.map(|s| format!(" · step {s}")).unwrap_or_default()
    ));
    if !d.cat.is_empty() {
        lines.push(format!("category {}", d.cat));
    }
    for (k, v) in d.args.iter().take(6) {
        lines.push(format!("{k}: {v}"));
    }
    if let Some(l) = &d.launch {
        lines.push(format!("launched by {l}"));
    }
    let lines: Vec<String> = lines.into_iter().map(|l| fit_text(&l, 460.0).unwrap_or(l)).collect();
    let bw = lines.iter().map(|l| l.chars().count() as f64 * CHAR_W + 16.0).fold(120.0, f64::max).min(480.0);
    let bh = lines.len() as f64 * 15.0 + 10.0;
    let x = if px + 16.0 + bw > w { (px - 16.0 - bw).max(0.0) } else { px + 16.0 };
    let y = if py + 16.0 + bh > h { (py - 16.0 - bh).max(0.0) } else { py + 16.0 };
    g.set_fill_style_str(&col.header);
    g.set_global_alpha(0.96);
    g.fill_rect(x, y, bw, bh);
    g.set_global_alpha(1.0);
    g.set_stroke_style_str(&col.muted);
    g.stroke_rect(x + 0.5, y + 0.5, bw, bh);
    g.set_fill_style_str(&col.fg);
    for (i, l) in lines.iter().enumerate() {
        g.fill_text(l, x + 8.0, y + 12.0 + i as f64 * 15.0).ok();
    }
}

fn pick_at(c: &Shared, x: f64, y: f64) {
    let (pool, ask) = {
        let mut ctl = c.borrow_mut();
        ctl.pointer = Some((x, y));
        let hit = if x > GUTTER_W && y > RULER_H { ctl.lane_at(y) } else { None };
        match hit {
            Some((file, lane, depth, offset_ns)) => {
                let t = ctl.origin + (ctl.t0 + (x - GUTTER_W) * ctl.ns_per_px).round() as i64 - offset_ns;
                let slop = (3.0 * ctl.ns_per_px).ceil() as i64;
                ctl.pick_req = ctl.pick_req.wrapping_add(1);
                ctl.pick_at = (file, lane, depth);
                (ctl.pool.clone(), Some((file, ctl.pick_req, lane, depth, t, slop)))
            }
            None => {
                ctl.hover = None;
                (None, None)
            }
        }
    };
    if let (Some(p), Some((file, req, lane, depth, t, slop))) = (pool, ask) {
        p.pick(file, req, lane, depth, t, slop);
    }
    request_frame(c);
}

fn key_action(c: &Shared, key: &str) -> bool {
    {
        let mut ctl = c.borrow_mut();
        let x = ctl.pointer.map_or(GUTTER_W + ctl.plot_w() / 2.0, |p| p.0);
        let pan = ctl.plot_w() * ctl.ns_per_px * 0.15;
        match key {
            "w" | "W" => ctl.zoom_at(0.8, x),
            "s" | "S" => ctl.zoom_at(1.25, x),
            "a" | "A" => ctl.t0 -= pan,
            "d" | "D" => ctl.t0 += pan,
            "0" => ctl.fit(),
            _ => return false,
        }
    }
    moved(c);
    true
}

#[function_component(Timeline)]
pub fn timeline(p: &Props) -> Html {
    let canvas = use_node_ref();
    let ctx = use_context::<Ctx>();
    let ctl: Shared = {
        let canvas = canvas.clone();
        use_mut_ref(move || Ctl::new(canvas))
    };
    let selected = use_state(|| None::<EventDetail>);
    // Events matching the search, over every rank (None: no search).
    let matches = use_state(|| None::<u64>);

    // Layout, pool and sinks follow the job.
    {
        let ctl = ctl.clone();
        let ctx = ctx.clone();
        let focus = p.focus;
        let has_window = p.window.is_some();
        let matches = matches.clone();
        use_effect_with((p.job.clone(), p.aligned), move |(job, aligned)| {
            let pool = ctx.as_ref().and_then(Ctx::pool);
            {
                let mut c = ctl.borrow_mut();
                c.aligned = *aligned;
                c.pool = pool.clone();
                c.dispatch = ctx.as_ref().map(|x| x.dispatch.clone());
                c.job = Some(job.clone());
                c.collapsed.clear();
                c.layout(job);
                c.cache.clear();
                c.inflight.clear();
                if let Some(canvas) = c.canvas.cast::<HtmlCanvasElement>().and_then(|e| e.parent_element()) {
                    c.width = f64::from(canvas.client_width()).max(200.0);
                    c.height = f64::from(canvas.client_height()).max(200.0);
                }
                if !has_window {
                    c.fit();
                }
                if let Some(r) = focus {
                    c.scroll_to_rank(r);
                }
            }
            if let Some(pool) = &pool {
                let weak = Rc::downgrade(&ctl);
                let tile_sink: crate::pool::TileSink = Rc::new(move |file, tile: Tile| {
                    if let Some(c) = weak.upgrade() {
                        {
                            let mut cm = c.borrow_mut();
                            cm.inflight.remove(&(file, tile.key));
                            if cm.cache.len() > 50_000 {
                                cm.cache.clear();
                            }
                            cm.cache.insert((file, tile.key), Rc::new(tile));
                        }
                        request_frame(&c);
                    }
                });
                let weak = Rc::downgrade(&ctl);
                let pick_sink: crate::pool::PickSink = Rc::new(move |file, req, detail| {
                    if let Some(c) = weak.upgrade() {
                        {
                            let mut cm = c.borrow_mut();
                            if req != cm.pick_req {
                                return;
                            }
                            let (f, lane, depth) = cm.pick_at;
                            cm.hover = detail.filter(|_| f == file).map(|d| (file, lane, depth, d));
                        }
                        request_frame(&c);
                    }
                });
                pool.set_sinks(Some(tile_sink), Some(pick_sink));
                let weak = Rc::downgrade(&ctl);
                let matches = matches.clone();
                let found_sink: crate::pool::FoundSink = Rc::new(move |file, req, found: Found| {
                    if let Some(c) = weak.upgrade() {
                        let total = {
                            let mut cm = c.borrow_mut();
                            if req != cm.search_req {
                                return;
                            }
                            cm.found.insert(file, found);
                            cm.found.values().map(|f| f.total).sum::<u64>()
                        };
                        matches.set(Some(total));
                        request_frame(&c);
                    }
                });
                pool.set_found_sink(Some(found_sink));
            }
            request_frame(&ctl);
            move || {
                if let Some(p) = pool {
                    p.set_sinks(None, None);
                    p.set_found_sink(None);
                }
            }
        });
    }

    // A window from the URL hash or another view (not one we wrote ourselves), and the rank to
    // show first.
    {
        let ctl = ctl.clone();
        use_effect_with((p.window, p.focus, p.opened), move |(win, focus, opened)| {
            // Opened again from another view (maybe the same place): shown again, even after
            // the user moved; a window we published ourselves moves nothing.
            let fresh = {
                let mut c = ctl.borrow_mut();
                let fresh = c.opened_seen != *opened || c.focus != *focus;
                c.opened_seen = *opened;
                fresh
            };
            if let Some((a, b)) = *win {
                let mine = ctl.borrow().published == Some((a, b));
                if (fresh || !mine) && b > a {
                    {
                        let mut c = ctl.borrow_mut();
                        c.ns_per_px = (b - a) as f64 / c.plot_w();
                        c.clamp();
                        c.t0 = a as f64;
                        c.clamp();
                    }
                    request_frame(&ctl);
                }
            }
            ctl.borrow_mut().focus = *focus;
            if let (Some(r), true) = (*focus, fresh) {
                ctl.borrow_mut().scroll_to_rank(r);
            }
            request_frame(&ctl);
        });
    }

    // Wheel (not passive: it must not scroll or zoom the page), keys, resize, theme.
    {
        let ctl = ctl.clone();
        let canvas = canvas.clone();
        let selected = selected.clone();
        use_effect_with((), move |_| {
            let mut keep: Vec<Listener> = Vec::new();
            if let Some(el) = canvas.cast::<HtmlCanvasElement>() {
                let c = ctl.clone();
                keep.push(Listener::active(el.into(), "wheel", move |e: web_sys::Event| {
                    let Some(w) = e.dyn_ref::<web_sys::WheelEvent>() else { return };
                    e.prevent_default();
                    let scale = match w.delta_mode() {
                        1 => 16.0,
                        2 => 400.0,
                        _ => 1.0,
                    };
                    let (dx, dy) = (w.delta_x() * scale, w.delta_y() * scale);
                    {
                        let mut cm = c.borrow_mut();
                        if w.ctrl_key() || w.meta_key() {
                            cm.zoom_at((dy * 0.002).exp(), f64::from(w.offset_x()));
                        } else if w.shift_key() || dx.abs() > dy.abs() {
                            let d = if dx.abs() > dy.abs() { dx } else { dy };
                            cm.t0 += d * cm.ns_per_px;
                        } else {
                            cm.scroll_y += dy;
                        }
                    }
                    moved(&c);
                }));
            }
            if let Some(win) = web_sys::window() {
                let c = ctl.clone();
                let selected = selected.clone();
                keep.push(Listener::active(win.clone().into(), "keydown", move |e: web_sys::Event| {
                    let Some(k) = e.dyn_ref::<web_sys::KeyboardEvent>() else { return };
                    if k.ctrl_key() || k.meta_key() || k.alt_key() {
                        return;
                    }
                    let typing = e
                        .target()
                        .and_then(|t| t.dyn_into::<web_sys::Element>().ok())
                        .is_some_and(|el| matches!(el.tag_name().as_str(), "INPUT" | "TEXTAREA" | "SELECT"));
                    if typing {
                        return;
                    }
                    if k.key() == "Escape" {
                        selected.set(None);
                        c.borrow_mut().selected = None;
                        request_frame(&c);
                    }
                    if key_action(&c, &k.key()) {
                        e.prevent_default();
                    }
                }));
                let c = ctl.clone();
                keep.push(Listener::new(win.clone().into(), "resize", move |_| request_frame(&c)));
                if let Ok(Some(mq)) = win.match_media("(prefers-color-scheme: dark)") {
                    let c = ctl.clone();
                    keep.push(Listener::new(mq.into(), "change", move |_| {
                        c.borrow_mut().colors = Colors::default();
                        request_frame(&c);
                    }));
                }
            }
            let ctl = ctl.clone();
            move || {
                drop(keep);
                // The frame and settle closures die with the timeline: nothing may call them after.
                let mut c = ctl.borrow_mut();
                if let Some(w) = web_sys::window() {
                    if let (true, Some(id)) = (c.frame_pending, c.frame_id.take()) {
                        let _ = w.cancel_animation_frame(id);
                    }
                    if let Some((id, _)) = c.settle.take() {
                        w.clear_timeout_with_handle(id);
                    }
                }
                c.frame_pending = false;
            }
        });
    }

    let on_down = {
        let ctl = ctl.clone();
        Callback::from(move |e: MouseEvent| {
            if e.button() != 0 {
                return;
            }
            let mut c = ctl.borrow_mut();
            c.drag = Some((f64::from(e.offset_x()), f64::from(e.offset_y()), c.t0, c.scroll_y, false));
        })
    };
    let on_move = {
        let ctl = ctl.clone();
        Callback::from(move |e: MouseEvent| {
            let (x, y) = (f64::from(e.offset_x()), f64::from(e.offset_y()));
            let dragging = {
                let mut c = ctl.borrow_mut();
                let npp = c.ns_per_px;
                match c.drag.as_mut() {
                    Some((x0, y0, t0, s0, moved_any)) => {
                        if (x - *x0).abs() + (y - *y0).abs() > 3.0 {
                            *moved_any = true;
                        }
                        let (nt, ns) = (*t0 - (x - *x0) * npp, *s0 - (y - *y0));
                        c.t0 = nt;
                        c.scroll_y = ns;
                        c.pointer = Some((x, y));
                        true
                    }
                    None => false,
                }
            };
            if dragging {
                moved(&ctl);
            } else {
                pick_at(&ctl, x, y);
            }
        })
    };
    let on_up = {
        let ctl = ctl.clone();
        let selected = selected.clone();
        let ctx = ctx.clone();
        Callback::from(move |_e: MouseEvent| {
            let click = {
                let mut c = ctl.borrow_mut();
                let was = c.drag.take();
                match was {
                    Some((_, y, _, _, false)) => match c.header_at(y) {
                        Some(file) if y > RULER_H => {
                            c.toggle(file);
                            false
                        }
                        _ => true,
                    },
                    _ => false,
                }
            };
            if click {
                let hover = ctl.borrow().hover.clone();
                ctl.borrow_mut().selected = hover.clone();
                if let (Some((file, _, _, d)), Some(c)) = (&hover, &ctx) {
                    c.dispatch.emit(Action::Select(crate::state::Selection {
                        file: *file,
                        start_ns: d.start_ns,
                        end_ns: d.start_ns + d.dur_ns,
                        name: Some(d.name.clone()),
                    }));
                }
                selected.set(hover.map(|(_, _, _, d)| d));
            }
            request_frame(&ctl);
        })
    };
    let on_leave = {
        let ctl = ctl.clone();
        Callback::from(move |_e: MouseEvent| {
            {
                let mut c = ctl.borrow_mut();
                c.drag = None;
                c.pointer = None;
                c.hover = None;
            }
            request_frame(&ctl);
        })
    };

    let legend = Class::ALL.iter().filter(|c| !matches!(c, Class::Other)).map(|&c| {
        html! { <span class="legend-item"><span class={classes!("swatch", format!("c-{}", c.name().replace('_', "-")))}></span>{c.name().replace('_', " ")}</span> }
    });
    let toggle_clock = {
        let ctx = ctx.clone();
        let aligned = p.aligned;
        Callback::from(move |_| {
            if let Some(c) = &ctx {
                c.dispatch.emit(Action::SetAligned(!aligned));
            }
        })
    };
    let focus_file = p.focus.and_then(|r| p.job.file_of(r));
    let on_search = {
        let ctl = ctl.clone();
        let matches = matches.clone();
        let files: Vec<FileId> = p.job.ranks.iter().map(|(f, _)| *f).collect();
        Callback::from(move |e: InputEvent| {
            let input: web_sys::HtmlInputElement = e.target_unchecked_into();
            let q = input.value();
            let pool = {
                let mut c = ctl.borrow_mut();
                c.search_req = c.search_req.wrapping_add(1);
                c.found.clear();
                c.pool.clone()
            };
            if q.trim().is_empty() {
                matches.set(None);
            } else if let Some(pool) = pool {
                let req = ctl.borrow().search_req;
                for &f in &files {
                    pool.search(f, req, &q);
                }
            }
            request_frame(&ctl);
        })
    };
    let on_png = {
        let canvas = canvas.clone();
        Callback::from(move |_| {
            let Some(el) = canvas.cast::<HtmlCanvasElement>() else { return };
            let cb = Closure::once_into_js(move |blob: JsValue| {
                if let Ok(b) = blob.dyn_into::<web_sys::Blob>() {
                    if let Err(e) = crate::download::save_blob(&b, "rankscope-timeline.png") {
                        web_sys::console::error_2(&"rankscope: cannot save the PNG".into(), &e);
                    }
                }
            });
            if let Err(e) = el.to_blob(cb.unchecked_ref()) {
                web_sys::console::error_2(&"rankscope: cannot draw the PNG".into(), &e);
            }
        })
    };
    // The first hang / mismatch, when there is one: its sentence, and a button to show it.
    let diverged = p.job.analysis.sequence.as_ref().and_then(|seq| {
        use rankscope_core::sequence::DiagnosisKind;
        let d =
            seq.diagnoses.iter().find(|d| matches!(d.kind, DiagnosisKind::Hang | DiagnosisKind::Mismatch))?;
        (!crate::divergence::placed(&p.job).is_empty()).then(|| d.sentence.clone())
    });
    let show_divergence = {
        let ctx = ctx.clone();
        let job = p.job.clone();
        Callback::from(move |_| {
            if let (Some(c), Some(a)) = (&ctx, crate::divergence::open(&job)) {
                c.dispatch.emit(a);
            }
        })
    };
    html! {
        <section class="timeline-view">
            <div class="timeline-bar">
                <span class="clock" role="group" aria-label="Clocks">
                    <button class={classes!("tab", p.aligned.then_some("active"))} data-testid="clock-aligned"
                        disabled={p.aligned} onclick={toggle_clock.clone()} title="each rank's time − its alignment offset">{"Aligned"}</button>
                    <button class={classes!("tab", (!p.aligned).then_some("active"))} data-testid="clock-raw"
                        disabled={!p.aligned} onclick={toggle_clock} title="each rank's own clock, as written">{"Raw clocks"}</button>
                </span>
                <input type="search" class="search" placeholder="Search names…" aria-label="Search events by name"
                    data-testid="timeline-search" oninput={on_search} />
                if let Some(n) = *matches {
                    <span class="muted" data-testid="search-count" data-count={n.to_string()}>
                        {format!("{} match{}", format::thousands(n), if n == 1 { "" } else { "es" })}
                    </span>
                }
                <span class="legend">{ for legend }</span>
                <span class="spacer"></span>
                <span class="muted keys" title="Ctrl+wheel or W/S zoom · drag, Shift+wheel or A/D pan · 0 fits · click a rank's header to fold it · click an event for its details and flow">{"keys: ?"}</span>
                <button class="small" data-testid="export-png" onclick={on_png} title="Save what the timeline shows as a PNG">{"PNG"}</button>
            </div>
            if let Some(sentence) = diverged {
                <div class="divergence-bar" data-testid="divergence-bar">
                    <span class="divergence-text" title={sentence.clone()}>{sentence}</span>
                    <button class="small" data-testid="divergence-show" onclick={show_divergence}
                        title="Zoom to the divergent collective on every rank">{"Show it"}</button>
                </div>
            }
            if let Some(name) = &p.job.digest {
                <div class="digest-bar" data-testid="digest-no-events">
                    {digest_sentence(name, &p.job)}
                </div>
            }
            <div class="timeline" data-testid="timeline" data-clock={if p.aligned { "aligned" } else { "raw" }}
                data-focus-rank={p.focus.map(|r| r.to_string())} data-focus-file={focus_file.map(|f| f.to_string())}>
                <canvas ref={canvas} tabindex="0" aria-label="Timeline of every rank's threads and streams"
                    onmousedown={on_down} onmousemove={on_move} onmouseup={on_up} onmouseleave={on_leave}></canvas>
            </div>
            if let Some(d) = &*selected {
                <aside class="selection" data-testid="selection">
                    <strong>{d.name.clone()}</strong>
                    <span>{format!(" · {} · {} · starts at {} ns{}", d.class.replace('_', " "),
                        if d.instant { "instant".to_string() } else { format::duration(d.dur_ns as f64) },
                        d.start_ns, d.step.map(|s| format!(" · step {s}")).unwrap_or_default())}</span>
                    if let Some(l) = &d.launch { <span>{format!(" · launched by {l}")}</span> }
                    if let Some(l) = &d.link {
                        <span data-testid="selection-link">{
                            if d.gpu { format!(" · flow: {} → this kernel", l.name) } else { format!(" · flow: this launch → {}", l.name) }
                        }</span>
                    }
                    { for d.args.iter().map(|(k, v)| html! { <span class="arg">{format!(" · {k}: {v}")}</span> }) }
                </aside>
            }
        </section>
    }
}

/// What the timeline of a digest shows, and how to see more.
fn digest_sentence(name: &str, job: &JobView) -> String {
    let traced = job.ranks.iter().filter(|(_, r)| !r.lanes.is_empty()).count();
    let all = job.ranks.len();
    if traced == 0 {
        format!(
            "{name} is a job digest: it holds every rank's figures but no events. Drop ranks' trace files here \
             to see their timelines, aligned with the job's offsets."
        )
    } else {
        format!(
            "{name} is a job digest without events: {traced} of {all} ranks have their trace loaded and are drawn, \
             on the job's offsets. Drop more ranks' trace files here to add them."
        )
    }
}
