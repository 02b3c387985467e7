//! The timeline's control: the viewport's zoom and pan, the rows' layout and hit testing, and
//! the animation frame and settle timer that follow every move.

use super::*;

impl Viewport {
    pub(super) fn plot_w(&self) -> f64 {
        (self.width - GUTTER_W).max(10.0)
    }

    /// The fewest ns a pixel may hold: [`MIN_WINDOW_NS`] across the plot.
    fn min_ns_per_px(&self) -> f64 {
        MIN_WINDOW_NS / self.plot_w()
    }

    pub(super) fn fit(&mut self) {
        self.ns_per_px = (self.total_ns * 1.02 / self.plot_w()).max(self.min_ns_per_px());
        self.t0 = -self.total_ns * 0.01;
    }

    pub(super) fn clamp(&mut self) {
        let min_npp = self.min_ns_per_px();
        let max_npp = (self.total_ns * 1.5 / self.plot_w()).max(1.0).max(min_npp);
        // A NaN (never expected) fits rather than poisoning every later move.
        let npp = if self.ns_per_px.is_nan() { max_npp } else { self.ns_per_px };
        self.ns_per_px = npp.clamp(min_npp, max_npp);
        let vis = self.plot_w() * self.ns_per_px;
        self.t0 = self.t0.clamp(-vis * 0.5, self.total_ns - vis * 0.5);
        let max_scroll = (self.content_h - self.height + 40.0).max(0.0);
        self.scroll_y = self.scroll_y.clamp(0.0, max_scroll);
    }

    /// Zooms by `factor` (< 1 zooms in) keeping the time under canvas x `x` in place.
    pub(super) fn zoom_at(&mut self, factor: f64, x: f64) {
        let px = (x - GUTTER_W).clamp(0.0, self.plot_w());
        let t = self.t0 + px * self.ns_per_px;
        self.ns_per_px *= factor;
        self.clamp();
        self.t0 = t - px * self.ns_per_px;
        self.clamp();
    }

    pub(super) fn x_of(&self, abs_ns: i64, offset_ns: i64) -> f64 {
        let rel = abs_ns.saturating_add(offset_ns).saturating_sub(self.origin) as f64;
        GUTTER_W + (rel - self.t0) / self.ns_per_px
    }

    pub(super) fn window_ns(&self) -> (i64, i64) {
        (self.t0.round() as i64, (self.t0 + self.plot_w() * self.ns_per_px).round() as i64)
    }
}

impl Ctl {
    pub(super) fn new(canvas: NodeRef) -> Ctl {
        Ctl {
            canvas,
            pool: None,
            sinks: None,
            dispatch: None,
            view: Viewport {
                origin: 0,
                total_ns: 1.0,
                t0: 0.0,
                ns_per_px: 1.0,
                scroll_y: 0.0,
                width: 800.0,
                height: 600.0,
                content_h: 0.0,
            },
            rows: Vec::new(),
            tiles: Tiles::default(),
            colors: Colors::default(),
            pointer: Pointer::default(),
            search: Search::default(),
            frames: Frames::default(),
            collapsed: HashSet::new(),
            job: None,
            aligned: true,
            focus: None,
            marks: Vec::new(),
            marks_attr: String::new(),
            visible_attr: String::new(),
            opened_seen: 0,
            only: None,
            pins: Vec::new(),
            pinned_h: RULER_H,
            members: Vec::new(),
            path: None,
            headers_attr: String::new(),
            path_attr: String::new(),
            selected_attr: String::new(),
            memory_shown: true,
            memory: memory::MemoryTiles::default(),
            memory_attr: String::new(),
            metrics_shown: true,
            metrics_attr: String::new(),
        }
    }

    pub(super) fn layout(&mut self, job: &JobView) {
        self.view.origin = job.facts.span_start_ns;
        self.view.total_ns = ((job.facts.span_end_ns - job.facts.span_start_ns) as f64).max(1.0);
        let mut rows = Vec::new();
        let mut y = RULER_H;
        // The lanes' places, as a test hook on the canvas (`data-layout`): the e2e tests aim at
        // events with it.
        let mut places: Vec<String> = Vec::new();
        // The pinned ranks first (in pin order), then the others.
        let pinned: Vec<&(RankId, Rc<rankscope_core::view::RankSummary>)> =
            self.pins.iter().filter_map(|p| job.ranks.iter().find(|(_, r)| r.rank == *p)).collect();
        let rest = job.ranks.iter().filter(|(_, r)| !self.pins.contains(&r.rank));
        let n_pinned = pinned.len();
        self.pinned_h = RULER_H;
        for (k, (id, r)) in pinned.into_iter().chain(rest).enumerate() {
            let pin = k < n_pinned;
            // A digest's rank without its trace has no events to draw (the bar above says so).
            if job.digest.is_some() && r.lanes.is_empty() {
                continue;
            }
            // Folded to a group's members: the others are left out.
            if self.only.as_ref().is_some_and(|o| !o.contains(&r.rank)) {
                continue;
            }
            let start = rows.len();
            let offset_ns = if self.aligned { -job.offset(*id) } else { 0 };
            rows.push(Row {
                kind: RowKind::Rank {
                    id: *id,
                    label: format!(
                        "{} rank {} · {}",
                        if self.collapsed.contains(id) { "▸" } else { "▾" },
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
                pinned: pin,
            });
            y += RANK_H;
            let lanes = if self.collapsed.contains(id) { &r.lanes[..0] } else { &r.lanes[..] };
            for l in lanes.iter().filter(|l| l.events > 0) {
                let depth = l.depth.max(1);
                let h = f64::from(depth) * ROW_H + LANE_GAP;
                places.push(format!(
                    r#"{{"rank":{},"file":{},"index":{},"lane":{},"gpu":{},"y":{y},"h":{h},"offset_ns":{offset_ns},"pinned":{pin}}}"#,
                    r.rank, id.file, id.index, l.lane, l.gpu
                ));
                rows.push(Row {
                    kind: RowKind::Lane { id: *id, lane: l.lane, label: l.label.clone(), depth, offset_ns },
                    y,
                    h,
                    group_end: 0.0,
                    pinned: pin,
                });
                y += h;
            }
            if self.memory_shown && !self.collapsed.contains(id) {
                for m in &r.memory {
                    rows.push(Row {
                        kind: RowKind::Memory { id: *id, rank: r.rank, track: m.clone(), offset_ns },
                        y,
                        h: memory::MEM_H,
                        group_end: 0.0,
                        pinned: pin,
                    });
                    y += memory::MEM_H;
                }
            }
            if self.metrics_shown && !self.collapsed.contains(id) {
                let mine = job.metrics.rows.iter().enumerate().filter(|(_, m)| m.rank == r.rank);
                for (k, _) in mine {
                    rows.push(Row {
                        kind: RowKind::Metric { id: *id, row: k as u32, offset_ns },
                        y,
                        h: metrics::METRIC_H,
                        group_end: 0.0,
                        pinned: pin,
                    });
                    y += metrics::METRIC_H;
                }
            }
            for row in &mut rows[start..] {
                row.group_end = y;
            }
            if pin {
                self.pinned_h = y;
            }
        }
        self.rows = rows;
        self.view.content_h = y;
        self.marks = crate::divergence::placed(job);
        if let Some(c) = self.canvas.cast::<HtmlCanvasElement>() {
            let _ = c.set_attribute("data-layout", &format!("[{}]", places.join(",")));
        }
    }

    /// A row's top on the canvas: a pinned row stays put, the others scroll.
    pub(super) fn screen_y(&self, row: &Row) -> f64 {
        self.to_screen(row.y, row.pinned)
    }

    /// Content y on the canvas, pinned or scrolled.
    pub(super) fn to_screen(&self, y: f64, pinned: bool) -> f64 {
        if pinned {
            y
        } else {
            y - self.view.scroll_y
        }
    }

    /// The highest canvas y a row shows at: under the ruler when pinned, else under the
    /// pinned band.
    pub(super) fn top_of(&self, row: &Row) -> f64 {
        if row.pinned {
            RULER_H
        } else {
            self.pinned_h
        }
    }

    /// The row at canvas y (a scrolled row under the pinned band is hidden by it).
    pub(super) fn row_at(&self, y: f64) -> Option<&Row> {
        self.rows.iter().find(|r| {
            let top = self.screen_y(r);
            y >= top && y < top + r.h && y >= self.top_of(r)
        })
    }

    /// The canvas band of a row's rank group under its header (a kept reading's box stays in
    /// it, never over the next rank's header).
    pub(super) fn group_band(&self, row: &Row) -> (f64, f64) {
        let header = self
            .rows
            .iter()
            .find(|r| {
                r.group_end == row.group_end
                    && r.pinned == row.pinned
                    && matches!(r.kind, RowKind::Rank { .. })
            })
            .map_or(self.screen_y(row), |r| self.screen_y(r) + r.h);
        (header.max(self.top_of(row)), self.to_screen(row.group_end, row.pinned))
    }

    /// Where a reading kept by a click on `row` at `t_ns` (rank `id`'s clock) is drawn: its
    /// point near the row's foot and the band its box stays in ([`Ctl::group_band`]); none when
    /// the point is off the canvas (`w` × `h`) or under the pinned band.
    pub(super) fn kept_reading(
        &self,
        row: &Row,
        id: RankId,
        t_ns: i64,
        (w, h): (f64, f64),
    ) -> Option<((f64, f64), (f64, f64))> {
        let (x, y) = (self.view.x_of(t_ns, self.offset_of(id)), self.screen_y(row) + row.h - 16.0);
        if x < GUTTER_W || x > w || y < self.top_of(row) || y > h {
            return None;
        }
        let (top, bottom) = self.group_band(row);
        Some(((x, y), (top, bottom.min(h))))
    }

    /// The rank group whose header is at canvas y.
    pub(super) fn header_at(&self, y: f64) -> Option<RankId> {
        self.row_at(y).and_then(|r| match r.kind {
            RowKind::Rank { id, .. } => Some(id),
            RowKind::Lane { .. } | RowKind::Memory { .. } | RowKind::Metric { .. } => None,
        })
    }

    /// Folds or unfolds a rank group.
    pub(super) fn toggle(&mut self, id: RankId) {
        if !self.collapsed.remove(&id) {
            self.collapsed.insert(id);
        }
        if let Some(job) = self.job.clone() {
            self.layout(&job);
            self.view.clamp();
        }
    }

    /// The lane row and nesting depth under content y, with its rank.
    pub(super) fn lane_at(&self, y: f64) -> Option<(RankId, u32, u32, i64)> {
        let row = self.row_at(y)?;
        match &row.kind {
            RowKind::Lane { id, lane, depth, offset_ns, .. } => {
                let d = ((y - self.screen_y(row)) / ROW_H).floor() as u32;
                (d < *depth).then_some((*id, *lane, d, *offset_ns))
            }
            RowKind::Rank { .. } | RowKind::Memory { .. } | RowKind::Metric { .. } => None,
        }
    }

    /// Canvas y of the middle of nesting row `depth` of `lane` of rank `id` (None: folded away).
    pub(super) fn row_mid(&self, id: RankId, lane: u32, depth: u32) -> Option<f64> {
        self.rows.iter().find_map(|r| match r.kind {
            RowKind::Lane { id: f, lane: l, .. } if f == id && l == lane => {
                Some(self.screen_y(r) + f64::from(depth) * ROW_H + ROW_H / 2.0)
            }
            _ => None,
        })
    }

    pub(super) fn offset_of(&self, id: RankId) -> i64 {
        self.rows
            .iter()
            .find_map(|r| match r.kind {
                RowKind::Rank { id: f, offset_ns, .. } if f == id => Some(offset_ns),
                _ => None,
            })
            .unwrap_or(0)
    }

    /// Scrolls so that `rank`'s group is at the top.
    pub(super) fn scroll_to_rank(&mut self, rank: u32) {
        let Some(id) = self.job.as_ref().and_then(|j| j.id_of(rank)) else { return };
        if let Some(r) = self.rows.iter().find(|r| matches!(r.kind, RowKind::Rank { id: f, .. } if f == id)) {
            // A pinned rank is on screen already.
            if !r.pinned {
                self.view.scroll_y = r.y - self.pinned_h;
                self.view.clamp();
            }
        }
    }
}

pub(super) fn request_frame(c: &Shared) {
    let mut ctl = c.borrow_mut();
    if ctl.frames.pending {
        return;
    }
    if ctl.frames.frame.is_none() {
        let weak = Rc::downgrade(c);
        ctl.frames.frame = Some(Closure::new(move || {
            if let Some(c) = weak.upgrade() {
                c.borrow_mut().frames.pending = false;
                draw(&c);
            }
        }));
    }
    if let (Some(w), Some(f)) = (web_sys::window(), ctl.frames.frame.as_ref()) {
        if let Ok(id) = w.request_animation_frame(f.as_ref().unchecked_ref()) {
            ctl.frames.pending = true;
            ctl.frames.id = Some(id);
        }
    }
}

/// After the view stops moving, the window goes to the state (and so to the URL hash).
pub(super) fn settle_later(c: &Shared) {
    let Some(w) = web_sys::window() else { return };
    let mut ctl = c.borrow_mut();
    if let Some((id, _)) = ctl.frames.settle.take() {
        w.clear_timeout_with_handle(id);
    }
    let weak: Weak<RefCell<Ctl>> = Rc::downgrade(c);
    let cb = Closure::<dyn FnMut()>::new(move || {
        if let Some(c) = weak.upgrade() {
            let (win, dispatch) = {
                let mut ctl = c.borrow_mut();
                let win = ctl.view.window_ns();
                ctl.frames.published = Some(win);
                (win, ctl.dispatch.clone())
            };
            if let Some(d) = dispatch {
                d.emit(Action::SetWindow(Some(win)));
            }
        }
    });
    if let Ok(id) = w.set_timeout_with_callback_and_timeout_and_arguments_0(cb.as_ref().unchecked_ref(), 300)
    {
        ctl.frames.settle = Some((id, cb));
    }
}

pub(super) fn moved(c: &Shared) {
    c.borrow_mut().view.clamp();
    request_frame(c);
    settle_later(c);
}
