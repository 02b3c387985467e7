//! The metric tracks: under each rank's lanes (after its memory rows), a row per cluster metric
//! of the rank's GPU (SM active, tensor active, power, clocks, whichever the file has) and,
//! under a host's first rank, a row per NIC counter of that host (rx / tx rates), as the
//! analysis' metrics join placed them ([`rankscope_core::view::metrics`]). A row is on its
//! rank's clock, moved by the rank's alignment offset as the lanes are; its gutter says the
//! sample interval and the alignment's residual.
//!
//! Samples are drawn as steps (each holds its value over its span, never interpolated); one
//! bucket per pixel with the least and most value in it, so a spike narrower than a pixel shows
//! at any zoom. The rows and their tiles are computed on the page from the job's
//! [`MetricTracks`](rankscope_core::view::metrics::MetricTracks) (a few samples a second per
//! series: no question to the workers). The pointer over a row reads the sample held there; a
//! click keeps the reading, as on the memory rows. The bar's Metrics button hides the rows.

use rankscope_core::view::metrics::{tile, tiles_covering, Hold, MetricBucket, MetricRow};

use super::*;

/// Height of a metric row, CSS px.
pub(super) const METRIC_H: f64 = 30.0;

/// The value read on a metric row: its rank, its row of the job's tracks, the time (the rank's
/// own clock), the sample held there and the pixel's least and most.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Readout {
    pub(super) id: RankId,
    pub(super) row: u32,
    pub(super) t_ns: i64,
    pub(super) hold: Option<Hold>,
    pub(super) pixel: Option<MetricBucket>,
}

fn row_of(ctl: &Ctl, row: u32) -> Option<&MetricRow> {
    ctl.job.as_ref()?.metrics.rows.get(row as usize)
}

/// Draws a metric row at canvas y `y`: its steps, the reading kept by a click, its gutter.
pub(super) fn draw_row(g: &CanvasRenderingContext2d, ctl: &Ctl, (row, y, w): (&Row, f64, f64), col: &Colors) {
    let RowKind::Metric { id, row: k, offset_ns, .. } = &row.kind else { return };
    let Some(m) = row_of(ctl, *k) else { return };
    let (top, base) = (y + 3.0, y + row.h - LANE_GAP - 1.0);
    let scale = m.scale();
    let hy = |v: f64| base - (base - top) * (v / scale).clamp(0.0, 1.0);
    g.set_fill_style_str(&col.lane_alt);
    g.fill_rect(GUTTER_W, y, w - GUTTER_W, row.h - LANE_GAP);
    g.save();
    g.begin_path();
    g.rect(GUTTER_W, y, w - GUTTER_W, row.h);
    g.clip();
    let level = level_for(ctl.view.ns_per_px);
    let (t0, t1) = (ctl.view.t0, ctl.view.t0 + ctl.view.plot_w() * ctl.view.ns_per_px);
    let abs0 = ctl.view.origin + t0.floor() as i64 - offset_ns;
    let abs1 = ctl.view.origin + t1.ceil() as i64 - offset_ns;
    let px = 1i64 << level.min(MAX_LEVEL);
    // Each pixel: a faint column up to its most, and a step from its least to its most.
    let mut area: Vec<(f64, f64, f64)> = Vec::new();
    let mut steps: Vec<(f64, f64, f64, f64)> = Vec::new();
    for key in tiles_covering(*k, level, abs0, abs1) {
        let job = ctl.job.as_ref();
        let Some(t) = job.map(|j| tile(&j.metrics, key)) else { continue };
        for b in &t.buckets {
            let x0 = ctl.view.x_of(b.t_ns, *offset_ns);
            let x1 = ctl.view.x_of(b.t_ns.saturating_add(px), *offset_ns);
            if x1 < GUTTER_W || x0 > w {
                continue;
            }
            let (x0, x1) = (x0.max(GUTTER_W - 1.0), x1.min(w + 1.0).max(x0 + 1.0));
            let (hi, lo) = (hy(b.max), hy(b.min));
            match area.last_mut() {
                Some((lx, ly, lw)) if (*ly - hi).abs() < 0.25 && (x0 - (*lx + *lw)).abs() < 0.5 => {
                    *lw = x1 - *lx
                }
                _ => area.push((x0, hi, x1 - x0)),
            }
            match steps.last_mut() {
                Some((lx, ly, lw, lh))
                    if (*ly - hi).abs() < 0.25
                        && (*lh - (lo - hi).max(1.5)).abs() < 0.25
                        && (x0 - (*lx + *lw)).abs() < 0.5 =>
                {
                    *lw = x1 - *lx
                }
                _ => steps.push((x0, hi, x1 - x0, (lo - hi).max(1.5))),
            }
        }
    }
    g.set_fill_style_str(&col.ruler);
    g.fill_rect(GUTTER_W, top, w - GUTTER_W, 1.0);
    g.set_fill_style_str(&col.metric);
    g.set_global_alpha(0.25);
    g.begin_path();
    for &(x, yy, bw) in &area {
        g.rect(x, yy, bw, (base - yy).max(1.0));
    }
    g.fill();
    g.set_global_alpha(1.0);
    g.begin_path();
    for &(x, yy, bw, bh) in &steps {
        g.rect(x, yy, bw, bh);
    }
    g.fill();
    if let Some(r) = ctl.pointer.metric_kept.as_ref().filter(|r| r.id == *id && r.row == *k) {
        let x = ctl.view.x_of(r.t_ns, *offset_ns);
        g.set_fill_style_str(&col.select);
        g.fill_rect(x.floor(), y, 1.5, row.h - LANE_GAP);
    }
    g.restore();
    g.set_fill_style_str(&col.bg);
    g.fill_rect(0.0, y, GUTTER_W, row.h);
    g.set_fill_style_str(&col.muted);
    if let Some(t) = fit_text(&m.title(), GUTTER_W - 10.0) {
        g.fill_text(&t, 12.0, y + ROW_H / 2.0).ok();
    }
    g.set_fill_style_str(&col.fg);
    if let Some(t) = fit_text(&gutter(m), GUTTER_W - 10.0) {
        g.fill_text(&t, 12.0, y + ROW_H * 1.5).ok();
    }
}

/// The gutter's second line: the scale's top and what the row's place rests on.
fn gutter(m: &MetricRow) -> String {
    format!("max {} · {}", m.unit.format(m.scale()), m.residual())
}

/// What the metric row under canvas (x, y) holds at that time.
pub(super) fn readout_at(ctl: &Ctl, x: f64, y: f64) -> Option<Readout> {
    if x <= GUTTER_W || y <= RULER_H {
        return None;
    }
    let row = ctl.row_at(y)?;
    let RowKind::Metric { id, row: k, offset_ns } = &row.kind else { return None };
    let m = row_of(ctl, *k)?;
    let t = ctl.view.origin + (ctl.view.t0 + (x - GUTTER_W) * ctl.view.ns_per_px).round() as i64 - offset_ns;
    let level = level_for(ctl.view.ns_per_px);
    let px = 1i64 << level.min(MAX_LEVEL);
    let start = t.div_euclid(px) * px;
    let pixel =
        rankscope_core::view::metrics::buckets(&m.holds, start, start.saturating_add(px), 1).first().copied();
    Some(Readout { id: *id, row: *k, t_ns: t, hold: m.value_at(t), pixel })
}

/// The reading's lines: where, when, the sample held there, what the pixel spans, and how the
/// row was placed.
fn lines(ctl: &Ctl, r: &Readout) -> Vec<String> {
    let Some(m) = row_of(ctl, r.row) else { return Vec::new() };
    let at = (r.t_ns.saturating_add(ctl.offset_of(r.id)).saturating_sub(ctl.view.origin)) as f64;
    let mut out = vec![format!("rank {} · {} {} · at {}", m.rank, m.host, m.title(), format::duration(at))];
    match &r.hold {
        Some(h) => {
            let ago = (r.t_ns - h.sample_ns) as f64;
            out.push(format!(
                "{} (sample at {}{})",
                m.unit.format(h.value),
                format::duration(
                    (h.sample_ns.saturating_add(ctl.offset_of(r.id)).saturating_sub(ctl.view.origin)) as f64
                ),
                if ago >= 0.0 {
                    format!(", {} before", format::duration(ago))
                } else {
                    format!(", {} after", format::duration(-ago))
                }
            ));
        }
        None => out.push("no sample here".into()),
    }
    if let Some(p) = r.pixel.filter(|p| p.min != p.max) {
        out.push(format!("{} – {} in this pixel", m.unit.format(p.min), m.unit.format(p.max)));
    }
    out.push(format!("{} ({}) · {}", m.name, m.value_kind.as_str(), m.residual()));
    out
}

/// The reading under the pointer as a box beside it, else the kept one under its mark (inside
/// its rank's band).
pub(super) fn draw_readout(g: &CanvasRenderingContext2d, ctl: &Ctl, (w, h): (f64, f64), col: &Colors) {
    let (r, at, band) = match (&ctl.pointer.metric, ctl.pointer.at, &ctl.pointer.metric_kept) {
        (Some(r), Some(at), _) if ctl.pointer.drag.is_none() => (r, at, (0.0, h)),
        (None, _, Some(r)) => {
            let Some(row) = ctl.rows.iter().find(
                |row| matches!(&row.kind, RowKind::Metric { id, row: k, .. } if *id == r.id && *k == r.row),
            ) else {
                return;
            };
            let Some((at, band)) = ctl.kept_reading(row, r.id, r.t_ns, (w, h)) else { return };
            (r, at, band)
        }
        _ => return,
    };
    draw_box(g, &lines(ctl, r), at, (w, band.0, band.1), &col.metric, col);
}

/// The metric rows and the reading as JSON, for the canvas' `data-metrics` (a test hook): per
/// row its rank, host, entity, signal, source name, canvas y, scale and gutter; then the reading
/// under the pointer or kept by a click, with its text.
pub(super) fn json(ctl: &Ctl) -> String {
    let rows: Vec<serde_json::Value> = ctl
        .rows
        .iter()
        .filter_map(|r| match &r.kind {
            RowKind::Metric { id, row, .. } => {
                let m = row_of(ctl, *row)?;
                Some(serde_json::json!({
                    "row": row, "rank": m.rank, "file": id.file, "index": id.index, "host": m.host,
                    "entity": m.entity, "signal": m.signal.as_str(), "name": m.name, "unit": m.unit.as_str(),
                    "y": ctl.screen_y(r).round(), "h": r.h, "pinned": r.pinned, "scale": m.scale(),
                    "min": m.min, "max": m.max, "samples": m.holds.len(), "gutter": gutter(m),
                }))
            }
            _ => None,
        })
        .collect();
    let reading = |r: &Readout| {
        serde_json::json!({
            "row": r.row, "t_ns": r.t_ns.to_string(), "value": r.hold.map(|h| h.value),
            "sample_ns": r.hold.map(|h| h.sample_ns.to_string()),
            "min": r.pixel.map(|p| p.min), "max": r.pixel.map(|p| p.max), "text": lines(ctl, r).join("\n"),
        })
    };
    serde_json::json!({
        "shown": ctl.metrics_shown,
        "rows": rows,
        "hover": ctl.pointer.metric.as_ref().map(reading),
        "kept": ctl.pointer.metric_kept.as_ref().map(reading),
    })
    .to_string()
}

/// The bar's Metrics button (only when the job has metric rows): shows or hides them.
pub(super) fn toggle(ctl: &Shared, job: &JobView, shown: &UseStateHandle<bool>) -> Html {
    if job.metrics.rows.is_empty() {
        return Html::default();
    }
    let onclick = {
        let (ctl, shown) = (ctl.clone(), shown.clone());
        Callback::from(move |_| {
            let on = !*shown;
            {
                let mut c = ctl.borrow_mut();
                c.metrics_shown = on;
                if !on {
                    c.pointer.metric = None;
                    c.pointer.metric_kept = None;
                }
                if let Some(job) = c.job.clone() {
                    c.layout(&job);
                    c.view.clamp();
                }
            }
            shown.set(on);
            request_frame(&ctl);
        })
    };
    html! {
        <button class={classes!("small", (**shown).then_some("active"))} data-testid="metrics-toggle"
            aria-pressed={if **shown { "true" } else { "false" }} {onclick}
            title="The cluster metrics dropped beside the traces, under each rank's lanes: its GPU's, and its host's NICs' under the host's first rank">
            {if **shown { "Metrics: on" } else { "Metrics: off" }}
        </button>
    }
}
