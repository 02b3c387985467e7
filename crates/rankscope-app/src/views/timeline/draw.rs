//! One frame of the timeline on its canvas: tiles at the level the zoom asks for (or the nearest
//! coarser one meanwhile), the ruler, the divergence marks, the hovered and selected events.

use super::*;

pub(super) fn css_var(style: &web_sys::CssStyleDeclaration, name: &str, fallback: &str) -> String {
    let v = style.get_property_value(name).unwrap_or_default();
    let v = v.trim();
    if v.is_empty() {
        fallback.to_string()
    } else {
        v.to_string()
    }
}

/// Black or white text, whichever reads better on `hex` (`#rrggbb`).
pub(super) fn text_on(hex: &str) -> String {
    let h = hex.trim_start_matches('#');
    let c = |i: usize| {
        h.get(i..i + 2).and_then(|s| u8::from_str_radix(s, 16).ok()).map_or(0.5, |v| f64::from(v) / 255.0)
    };
    let lum = 0.2126 * c(0) + 0.7152 * c(2) + 0.0722 * c(4);
    if lum > 0.5 { "#000000" } else { "#ffffff" }.to_string()
}

pub(super) fn read_colors() -> Colors {
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
        path: css_var(&style, "--path", "#0097a7"),
        mem_alloc: css_var(&style, "--mem-alloc", "#5e35b1"),
        mem_reserved: css_var(&style, "--mem-reserved", "#e65100"),
        metric: css_var(&style, "--metric", "#00897b"),
    }
}

pub(super) fn fit_text(s: &str, width: f64) -> Option<String> {
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

/// One frame's drawing surface: the 2D context, the canvas' size in CSS px and the colours.
struct Paint<'a> {
    g: &'a CanvasRenderingContext2d,
    w: f64,
    h: f64,
    col: &'a Colors,
}

/// Paints one frame: sizes the canvas to its box, draws the rows, the step lines, the marks,
/// the flow, the ruler and the hover, then asks the workers for the tiles the frame lacked.
pub(super) fn draw(c: &Shared) {
    let mut guard = c.borrow_mut();
    let ctl = &mut *guard;
    let Some(canvas) = ctl.canvas.cast::<HtmlCanvasElement>() else { return };
    let Some(parent) = canvas.parent_element() else { return };
    let (w, h) = (f64::from(parent.client_width()).max(200.0), f64::from(parent.client_height()).max(200.0));
    let dpr = web_sys::window().map_or(1.0, |w| w.device_pixel_ratio()).max(1.0);
    if (w - ctl.view.width).abs() > 0.5
        || (h - ctl.view.height).abs() > 0.5
        || canvas.width() != (w * dpr) as u32
    {
        ctl.view.width = w;
        ctl.view.height = h;
        canvas.set_width((w * dpr) as u32);
        canvas.set_height((h * dpr) as u32);
        ctl.view.clamp();
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

    let p = Paint { g: &g, w, h, col: &col };
    // The scrolled rows, then the pinned band over them.
    let (mut wanted, mut mem_wanted) = draw_rows(&p, ctl, false);
    draw_steps(&p, ctl, false);
    if ctl.pinned_h > RULER_H {
        g.set_fill_style_str(&col.bg);
        g.fill_rect(0.0, RULER_H, w, ctl.pinned_h - RULER_H);
        let (more, more_mem) = draw_rows(&p, ctl, true);
        wanted.extend(more);
        mem_wanted.extend(more_mem);
        draw_steps(&p, ctl, true);
        g.set_fill_style_str(&col.fg);
        g.fill_rect(0.0, ctl.pinned_h - 2.0, w, 2.0);
    }
    let headers = super::pins::headers_json(ctl);
    if headers != ctl.headers_attr {
        let _ = canvas.set_attribute("data-headers", &headers);
        ctl.headers_attr = headers;
    }
    let selected = selected_json(ctl);
    if selected != ctl.selected_attr {
        let _ = canvas.set_attribute("data-selected", &selected);
        ctl.selected_attr = selected;
    }
    let drawn = super::path::draw(&g, ctl, &col);
    if drawn != ctl.path_attr {
        let _ = canvas.set_attribute("data-path", &drawn);
        ctl.path_attr = drawn;
    }
    let places = draw_marks(&g, ctl, w, h, &col);
    if places != ctl.marks_attr {
        let _ = canvas.set_attribute("data-marks", &places);
        ctl.marks_attr = places;
    }
    let visible = format!("{:.0}", ctl.view.plot_w() * ctl.view.ns_per_px);
    if visible != ctl.visible_attr {
        let _ = canvas.set_attribute("data-visible-ns", &visible);
        ctl.visible_attr = visible;
    }
    draw_flow(&g, ctl, &col);
    super::area::draw_band(&g, ctl, h, &col);
    draw_ruler(&g, ctl, w, &col);
    draw_hover(&g, ctl, w, h, &col);
    super::memory::draw_readout(&g, ctl, (w, h), &col);
    super::metrics::draw_readout(&g, ctl, (w, h), &col);
    let metrics = super::metrics::json(ctl);
    if metrics != ctl.metrics_attr {
        let _ = canvas.set_attribute("data-metrics", &metrics);
        ctl.metrics_attr = metrics;
    }
    let memory = super::memory::json(ctl);
    if memory != ctl.memory_attr {
        let _ = canvas.set_attribute("data-memory", &memory);
        ctl.memory_attr = memory;
    }

    // Ask for the tiles this frame lacked (nearest to the centre first is not needed: a worker
    // answers a tile in well under a frame).
    let pool = ctl.pool.clone();
    let tile_reply = ctl.sinks.as_ref().map(|s| (s.tile.clone(), s.memory.clone()));
    let mut asks = Vec::new();
    for k in wanted {
        if ctl.tiles.inflight.insert(k) {
            asks.push(k);
        }
    }
    let mut mem_asks = Vec::new();
    for k in mem_wanted {
        if ctl.memory.inflight.insert(k) {
            mem_asks.push(k);
        }
    }
    drop(guard);
    if let (Some(p), Some((reply, mem_reply))) = (pool, tile_reply) {
        for (id, key) in asks {
            p.ask(id, Query::Tile { key }, Some(reply.clone()));
        }
        for (id, key) in mem_asks {
            p.ask(id, Query::Memory { key }, Some(mem_reply.clone()));
        }
    }
}

/// The selected event's place as JSON for the canvas' `data-selected` (a test hook; empty with
/// none): its rank, lane, the canvas y of its row and whether that is in sight.
fn selected_json(ctl: &Ctl) -> String {
    let Some((id, lane, depth, d)) = &ctl.pointer.selected else { return String::new() };
    let rank = ctl
        .job
        .as_ref()
        .and_then(|j| j.ranks.iter().find(|(k, _)| k == id))
        .map_or(u32::MAX, |(_, r)| r.rank);
    let y = ctl.row_mid(*id, *lane, *depth);
    let shown = y.is_some_and(|y| {
        let top = ctl
            .rows
            .iter()
            .find(|r| matches!(r.kind, RowKind::Lane { id: f, lane: l, .. } if f == *id && l == *lane));
        top.is_some_and(|r| y >= ctl.top_of(r) && y < ctl.view.height)
    });
    format!(
        r#"{{"rank":{rank},"lane":{lane},"event":{},"y":{},"shown":{shown}}}"#,
        d.event,
        y.map_or(-1.0, f64::round)
    )
}

/// The tiles a frame lacked: the lanes' and the memory rows'.
type Wanted = (Vec<(RankId, TileKey)>, Vec<(RankId, rankscope_core::view::memory::MemoryTileKey)>);

/// Draws every row on screen of the pinned band or of the scrolled rows (a rank's header, a
/// lane with its tiles, a memory row) and returns the tiles it lacked.
fn draw_rows(p: &Paint, ctl: &Ctl, pinned: bool) -> Wanted {
    let mut wanted: Vec<(RankId, TileKey)> = Vec::new();
    let mut mem_wanted = Vec::new();
    for (i, row) in ctl.rows.iter().enumerate().filter(|(_, r)| r.pinned == pinned) {
        let y = ctl.screen_y(row);
        if y + row.h < ctl.top_of(row) || y > p.h {
            continue;
        }
        match &row.kind {
            RowKind::Rank { label, id, .. } => draw_header(p, ctl, row, (id, label), y),
            RowKind::Lane { .. } => draw_lane(p, ctl, (i, row), y, &mut wanted),
            RowKind::Memory { .. } => {
                super::memory::draw_row(p.g, ctl, (row, y, p.w), p.col, &mut mem_wanted)
            }
            RowKind::Metric { .. } => super::metrics::draw_row(p.g, ctl, (row, y, p.w), p.col),
        }
    }
    (wanted, mem_wanted)
}

/// A rank's header row: its label, marked on the left when it is the rank opened from another
/// view.
fn draw_header(p: &Paint, ctl: &Ctl, row: &Row, (id, label): (&RankId, &str), y: f64) {
    let (g, col) = (p.g, p.col);
    g.set_fill_style_str(&col.header);
    g.fill_rect(0.0, y, p.w, row.h);
    if ctl.focus.is_some()
        && ctl.focus
            == ctl.job.as_ref().and_then(|j| j.ranks.iter().find(|(f, _)| f == id)).map(|(_, r)| r.rank)
    {
        g.set_fill_style_str(&col.select);
        g.fill_rect(0.0, y, 4.0, row.h);
    }
    g.set_fill_style_str(&col.fg);
    if let Some(t) = fit_text(label, GUTTER_W - 4.0 - super::pins::PIN_W) {
        g.fill_text(&t, 6.0, y + row.h / 2.0).ok();
    }
    super::pins::draw_pin(g, row.pinned, y, row.h, col);
}

/// A lane row (the `i`th row): its tiles at the zoom's level (or the nearest coarser ones while
/// they come; the missing ones are pushed to `wanted`), the search's and the selection's
/// outlines, and its label in the gutter.
fn draw_lane(p: &Paint, ctl: &Ctl, (i, row): (usize, &Row), y: f64, wanted: &mut Vec<(RankId, TileKey)>) {
    let RowKind::Lane { id, lane, depth, offset_ns, label } = &row.kind else { return };
    let (g, col, w) = (p.g, p.col, p.w);
    if i % 2 == 0 {
        g.set_fill_style_str(&col.lane_alt);
        g.fill_rect(GUTTER_W, y, w - GUTTER_W, row.h - LANE_GAP);
    }
    g.save();
    g.begin_path();
    g.rect(GUTTER_W, y, w - GUTTER_W, row.h);
    g.clip();
    let level = level_for(ctl.view.ns_per_px);
    let (t0, t1) = (ctl.view.t0, ctl.view.t0 + ctl.view.plot_w() * ctl.view.ns_per_px);
    let abs0 = ctl.view.origin + t0.floor() as i64 - offset_ns;
    let abs1 = ctl.view.origin + t1.ceil() as i64 - offset_ns;
    for key in tiles_covering(*lane, level, abs0, abs1) {
        let tile = match ctl.tiles.cache.get(&(*id, key)) {
            Some(t) => Some(t.clone()),
            None => {
                wanted.push((*id, key));
                (1..=8u8)
                    .filter(|k| level + k <= MAX_LEVEL)
                    .map(|k| TileKey { lane: *lane, level: level + k, index: key.index.div_euclid(1 << k) })
                    .find_map(|k2| ctl.tiles.cache.get(&(*id, k2)).cloned())
            }
        };
        if let Some(t) = tile {
            draw_tile(g, ctl, &t, y, *offset_ns, col);
        }
    }
    if let Some(found) = ctl.search.found.get(id) {
        g.set_stroke_style_str(&col.highlight);
        g.set_line_width(2.0);
        for hit in found.hits.iter().filter(|h| h.lane == *lane) {
            outline(g, ctl, hit, y, *offset_ns);
        }
    }
    super::members::outline(g, ctl, (id, *lane), y, row.h - LANE_GAP, *offset_ns, col);
    if let Some((f, l, d, sel)) = &ctl.pointer.selected {
        if f == id && l == lane {
            g.set_stroke_style_str(&col.select);
            g.set_line_width(2.0);
            let hit = Hit { lane: *l, depth: *d, start_ns: sel.start_ns, end_ns: sel.start_ns + sel.dur_ns };
            outline(g, ctl, &hit, y, *offset_ns);
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

/// Step boundaries: a line at each step start (and the last end) across the rank's lanes, for
/// the pinned ranks or the scrolled ones.
fn draw_steps(p: &Paint, ctl: &Ctl, pinned: bool) {
    let (g, col, w, h) = (p.g, p.col, p.w, p.h);
    g.set_stroke_style_str(&col.step);
    g.set_line_width(1.0);
    for row in ctl.rows.iter().filter(|r| r.pinned == pinned) {
        let RowKind::Rank { steps, offset_ns, .. } = &row.kind else { continue };
        let y0 = ctl.screen_y(row).max(ctl.top_of(row));
        let y1 = ctl.to_screen(row.group_end, row.pinned).min(h);
        if y1 <= y0 {
            continue;
        }
        let mut marks: Vec<(f64, Option<u32>)> =
            steps.iter().map(|&(n, s, _)| (ctl.view.x_of(s, *offset_ns), Some(n))).collect();
        if let Some(&(_, _, e)) = steps.last() {
            marks.push((ctl.view.x_of(e, *offset_ns), None));
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
                let hy = ctl.screen_y(row) + RANK_H / 2.0;
                let text = format!("step {n}");
                if hy > ctl.top_of(row)
                    && x > GUTTER_W + 2.0
                    && x - last_label > text.len() as f64 * CHAR_W + 10.0
                {
                    last_label = x;
                    g.set_fill_style_str(&col.fg);
                    g.fill_text(&text, x + 4.0, hy).ok();
                }
            }
        }
        let _ = g.set_line_dash(&js_sys::Array::new());
    }
}

/// The divergence on every rank: the collective a rank waited in as a band over its lanes, the
/// instant a rank stopped short of it (its last collective's end) as a dashed line; a label on
/// the rank's header (pinned to the edge, with an arrow, when the mark is off screen). Returns
/// the marks' places as JSON for the canvas' `data-marks`.
pub(super) fn draw_marks(g: &CanvasRenderingContext2d, ctl: &Ctl, w: f64, h: f64, col: &Colors) -> String {
    let mut places: Vec<serde_json::Value> = Vec::new();
    for row in &ctl.rows {
        let RowKind::Rank { id, offset_ns, .. } = &row.kind else { continue };
        for (_, m) in ctl.marks.iter().filter(|(f, _)| f == id) {
            let (Some(a), Some(b)) = (m.start_ns, m.end_ns) else { continue };
            let x0 = ctl.view.x_of(a, *offset_ns);
            let x1 = ctl.view.x_of(b, *offset_ns).max(x0);
            let head = ctl.screen_y(row);
            let y0 = head.max(ctl.top_of(row));
            let y1 = ctl.to_screen(row.group_end, row.pinned).min(h);
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
            if head >= ctl.top_of(row) && head < h && !shown.is_empty() {
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
pub(super) fn outline(g: &CanvasRenderingContext2d, ctl: &Ctl, hit: &Hit, y: f64, offset_ns: i64) {
    let x0 = ctl.view.x_of(hit.start_ns, offset_ns);
    let x1 = ctl.view.x_of(hit.end_ns, offset_ns);
    if x1 < GUTTER_W - 2.0 || x0 > ctl.view.width + 2.0 {
        return;
    }
    let w = (x1 - x0).max(3.0);
    let by = y + f64::from(hit.depth) * ROW_H;
    g.stroke_rect(x0 - 1.0, by, w + 1.0, ROW_H - 1.0);
}

/// The selected event's launch → kernel flow: an arrow from the launch to the GPU work.
pub(super) fn draw_flow(g: &CanvasRenderingContext2d, ctl: &Ctl, col: &Colors) {
    let Some((id, lane, depth, d)) = &ctl.pointer.selected else { return };
    let Some(link) = &d.link else { return };
    let off = ctl.offset_of(*id);
    let (Some(ya), Some(yb)) =
        (ctl.row_mid(*id, *lane, *depth), ctl.row_mid(*id, link.place.lane, link.place.depth))
    else {
        return;
    };
    let xa = ctl.view.x_of(d.start_ns, off);
    let xb = ctl.view.x_of(link.place.start_ns, off);
    // From the launch (CPU) to the kernel (GPU).
    let ((x0, y0), (x1, y1)) = if d.gpu { ((xb, yb), (xa, ya)) } else { ((xa, ya), (xb, yb)) };
    g.save();
    g.begin_path();
    g.rect(GUTTER_W, RULER_H, ctl.view.width - GUTTER_W, ctl.view.height - RULER_H);
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

pub(super) fn draw_tile(
    g: &CanvasRenderingContext2d,
    ctl: &Ctl,
    t: &Tile,
    y: f64,
    offset_ns: i64,
    col: &Colors,
) {
    let w = ctl.view.width;
    // One path and one fill per class: a style set per box passes its colour's text from wasm
    // to JS each time (a UTF-8 decode), which at millions of events was the frame's largest cost.
    // Boxes of one tile do not overlap (one per depth and place), so the order does not show.
    let mut by_class: Vec<Vec<(f64, f64, f64)>> = vec![Vec::new(); col.class.len() + 1];
    let mut labels: Vec<(usize, f64, f64, f64)> = Vec::new();
    for k in 0..t.len() {
        let x0 = ctl.view.x_of(t.start_ns[k], offset_ns);
        let x1 = ctl.view.x_of(t.end_ns[k], offset_ns);
        if x1 < GUTTER_W || x0 > w {
            continue;
        }
        let x0c = x0.max(GUTTER_W - 1.0);
        let x1c = x1.min(w + 1.0);
        let bw = (x1c - x0c).max(1.0);
        let by = y + f64::from(t.depth[k]) * ROW_H;
        let class = (t.class[k] as usize).min(col.class.len());
        // A box that starts within half a pixel of the last one of its class and depth ends
        // extends it: zoomed out, thousands of sub-pixel boxes become a few rectangles.
        match by_class[class].last_mut() {
            Some(last) if last.1 == by && x0c >= last.0 && x0c <= last.0 + last.2 + 0.5 => {
                last.2 = last.2.max(x0c + bw - last.0);
            }
            _ => by_class[class].push((x0c, by, bw)),
        }
        if t.label[k] != NO_LABEL && bw > 30.0 {
            labels.push((k, x0c, by, bw));
        }
    }
    for (class, boxes) in by_class.iter().enumerate().filter(|(_, b)| !b.is_empty()) {
        g.set_fill_style_str(col.class.get(class).map_or("#888", String::as_str));
        g.begin_path();
        for &(x, by, bw) in boxes {
            g.rect(x, by, bw, ROW_H - 1.0);
        }
        g.fill();
    }
    let mut style = usize::MAX;
    for (k, x0c, by, bw) in labels {
        if let Some(text) = t.labels.get(t.label[k] as usize).and_then(|s| fit_text(s, bw)) {
            let class = t.class[k] as usize;
            if class != style {
                g.set_fill_style_str(col.text_on.get(class).map_or("#000", String::as_str));
                style = class;
            }
            g.fill_text(&text, x0c + 3.0, by + ROW_H / 2.0).ok();
        }
    }
}

/// A tick spacing of 1, 2 or 5 × 10^k ns giving about `target` ns between ticks.
pub(super) fn nice_step(target: f64) -> f64 {
    let p = 10f64.powf(target.max(1.0).log10().floor());
    [1.0, 2.0, 5.0, 10.0].iter().map(|m| m * p).find(|&s| s >= target).unwrap_or(10.0 * p)
}

/// A ruler tick's time, with the digits its step needs: zoomed to 1 µs 1 ms in, ticks 200 ns
/// apart read `1.0002 ms`, `1.0004 ms`, not `1.00 ms` each ([`format::duration`]'s digits).
fn tick_label(t: f64, step: f64) -> String {
    let shown = format::duration(t);
    let (scale, unit) = match t.abs() {
        a if a < 1e3 => return shown,
        a if a < 1e6 => (1e3, "µs"),
        a if a < 1e9 => (1e6, "ms"),
        _ => (1e9, "s"),
    };
    let digits = (-(step / scale).log10()).ceil().clamp(0.0, 9.0) as usize;
    // `format::duration` keeps three significant digits: `15.2 ms` has one decimal, fewer
    // than 50 µs ticks need.
    let have = shown.split(' ').next().and_then(|n| n.split_once('.')).map_or(0, |(_, d)| d.len());
    if digits <= have {
        shown
    } else {
        format!("{:.digits$} {unit}", t / scale)
    }
}

pub(super) fn draw_ruler(g: &CanvasRenderingContext2d, ctl: &Ctl, w: f64, col: &Colors) {
    g.set_fill_style_str(&col.ruler);
    g.fill_rect(0.0, 0.0, w, RULER_H);
    let step = nice_step(110.0 * ctl.view.ns_per_px);
    let first = (ctl.view.t0 / step).ceil() * step;
    g.set_fill_style_str(&col.fg);
    g.set_stroke_style_str(&col.muted);
    let mut t = first;
    let end = ctl.view.t0 + ctl.view.plot_w() * ctl.view.ns_per_px;
    while t <= end {
        let x = GUTTER_W + (t - ctl.view.t0) / ctl.view.ns_per_px;
        g.begin_path();
        g.move_to(x.floor() + 0.5, RULER_H - 6.0);
        g.line_to(x.floor() + 0.5, RULER_H);
        g.stroke();
        g.fill_text(&tick_label(t, step), x + 3.0, RULER_H / 2.0).ok();
        t += step;
    }
    g.set_fill_style_str(&col.ruler);
    g.fill_rect(0.0, 0.0, GUTTER_W, RULER_H);
    g.set_fill_style_str(&col.muted);
    let win = format!("{} visible", format::duration(ctl.view.plot_w() * ctl.view.ns_per_px));
    g.fill_text(&win, 6.0, RULER_H / 2.0).ok();
}

pub(super) fn draw_hover(g: &CanvasRenderingContext2d, ctl: &Ctl, w: f64, h: f64, col: &Colors) {
    let (Some((px, py)), Some((_, _, _, d))) = (ctl.pointer.at, ctl.pointer.hover.as_ref()) else { return };
    if ctl.pointer.drag.is_some() {
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
    draw_box(g, &lines, (px, py), (w, 0.0, h), &col.muted, col);
}

/// A box of text lines beside the point `(px, py)`: right of it and below, else left or above
/// where the canvas (width `w`) or the band `[top, bottom)` it must stay in ends; its border in
/// `border`. The event under the pointer, the memory and metric readings draw with it.
pub(super) fn draw_box(
    g: &CanvasRenderingContext2d,
    lines: &[String],
    (px, py): (f64, f64),
    (w, top, bottom): (f64, f64, f64),
    border: &str,
    col: &Colors,
) {
    let lines: Vec<String> = lines.iter().map(|l| fit_text(l, 460.0).unwrap_or_else(|| l.clone())).collect();
    let bw = lines.iter().map(|l| l.chars().count() as f64 * CHAR_W + 16.0).fold(120.0, f64::max).min(480.0);
    let bh = lines.len() as f64 * 15.0 + 10.0;
    let x = if px + 16.0 + bw > w { (px - 16.0 - bw).max(0.0) } else { px + 16.0 };
    let y = if py + 16.0 + bh > bottom { (py - 16.0 - bh).max(top) } else { (py + 16.0).max(top) };
    // A band lower than the box: its top (the box then covers the band's end).
    let y = y.min((bottom - bh).max(top));
    g.set_fill_style_str(&col.header);
    g.set_global_alpha(0.96);
    g.fill_rect(x, y, bw, bh);
    g.set_global_alpha(1.0);
    g.set_stroke_style_str(border);
    g.stroke_rect(x + 0.5, y + 0.5, bw, bh);
    g.set_fill_style_str(&col.fg);
    for (i, l) in lines.iter().enumerate() {
        g.fill_text(l, x + 8.0, y + 12.0 + i as f64 * 15.0).ok();
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn tick_labels_carry_the_digits_their_step_needs() {
        assert_eq!(super::tick_label(1_000_200.0, 200.0), "1.0002 ms");
        assert_eq!(super::tick_label(1_500_000.0, 500_000.0), "1.50 ms");
        assert_eq!(super::tick_label(620.0, 200.0), "620 ns");
        assert_eq!(super::tick_label(2_000_000_001.0, 1.0), "2.000000001 s");
        // Ticks 50 µs apart at 15 ms read apart (they read `15.2 ms` twice).
        assert_eq!(super::tick_label(15_200_000.0, 50_000.0), "15.20 ms");
        assert_eq!(super::tick_label(15_250_000.0, 50_000.0), "15.25 ms");
    }
}
