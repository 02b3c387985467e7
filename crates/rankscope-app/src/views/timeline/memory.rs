//! The memory track: under each rank's lanes, a row per device whose trace has the allocator's
//! `[memory]` samples (`profile_memory=True`; device -1 is the host's memory). Allocated is an
//! area, reserved a line (when the trace has the allocator's totals and they are not all zero),
//! on a y scale of the row's own most allocated or reserved, written in the gutter.
//!
//! Like the lanes, the row draws tiles the worker holding the rank computes
//! (`Query::Memory`, `rankscope_core::view::memory`): one bucket per pixel with the least and
//! most allocated in it, so a peak between two pixels is drawn at any zoom; a missing tile is
//! asked for and the nearest coarser one drawn meanwhile. The pointer over a row reads the value
//! at its time from the tile drawn there (no question to the worker); a click keeps the reading
//! until the next click on a memory row. The bar's Memory button hides the rows.

use rankscope_core::view::memory::{tiles_covering, MemoryBucket, MemoryTile, MemoryTileKey, MemoryTrack};

use super::*;

/// Height of a memory row, CSS px.
pub(super) const MEM_H: f64 = 38.0;

/// Memory tiles received, and the ones asked for.
#[derive(Default)]
pub(super) struct MemoryTiles {
    pub(super) cache: HashMap<(RankId, MemoryTileKey), Rc<MemoryTile>>,
    pub(super) inflight: HashSet<(RankId, MemoryTileKey)>,
}

/// The value read on a memory row: its rank and device, the time (own clock) and what the
/// pixel there holds.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Readout {
    pub(super) id: RankId,
    pub(super) rank: u32,
    pub(super) device: i32,
    pub(super) t_ns: i64,
    pub(super) bucket: MemoryBucket,
}

/// Bytes in binary units, as the allocator counts them: `512 B`, `3.0 KiB`, `1.39 MiB`, `2.10 GiB`.
pub(super) fn binary(n: i64) -> String {
    let f = n as f64;
    let a = f.abs();
    let k = 1024.0;
    if a < k {
        format!("{n} B")
    } else if a < k * k {
        format!("{:.1} KiB", f / k)
    } else if a < k * k * k {
        format!("{:.2} MiB", f / (k * k))
    } else {
        format!("{:.2} GiB", f / (k * k * k))
    }
}

/// The row's name: `host memory` or `GPU n memory`.
pub(super) fn name(device: i32) -> String {
    if device < 0 {
        "host memory".into()
    } else {
        format!("GPU {device} memory")
    }
}

/// The most the row's scale shows: allocated's most, or reserved's when larger.
fn scale(t: &MemoryTrack) -> i64 {
    t.max_allocated.max(t.max_reserved.unwrap_or(0)).max(1)
}

/// The label of the row's scale, in the gutter: `max 1.39 MiB` (allocated; `· res.` added
/// when reserved sets the scale).
pub(super) fn scale_label(t: &MemoryTrack) -> String {
    match t.max_reserved.filter(|&r| r > t.max_allocated) {
        Some(r) => format!("max {} · res. {}", binary(t.max_allocated), binary(r)),
        None => format!("max {}", binary(t.max_allocated)),
    }
}

/// Draws a memory row at canvas y `y`: its tiles (the missing ones pushed to `wanted`), the
/// reading kept by a click, and its gutter label.
pub(super) fn draw_row(
    g: &CanvasRenderingContext2d,
    ctl: &Ctl,
    (row, y, w): (&Row, f64, f64),
    col: &Colors,
    wanted: &mut Vec<(RankId, MemoryTileKey)>,
) {
    let RowKind::Memory { id, track, offset_ns, .. } = &row.kind else { return };
    let (top, base) = (y + 3.0, y + row.h - LANE_GAP - 1.0);
    let hy = |v: i64| base - (base - top) * (v as f64 / scale(track) as f64).clamp(0.0, 1.0);
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
    // The allocated area as one path of columns, reserved as one stepped line.
    let mut area: Vec<(f64, f64, f64)> = Vec::new();
    let mut line: Vec<(f64, f64, f64)> = Vec::new();
    for key in tiles_covering(track.device, level, abs0, abs1) {
        let Some(tile) = tile_or_coarser(ctl, *id, key, wanted) else { continue };
        let px = 1i64 << tile.key.level.min(MAX_LEVEL);
        for b in &tile.buckets {
            let x0 = ctl.view.x_of(b.t_ns, *offset_ns);
            let x1 = ctl.view.x_of(b.t_ns.saturating_add(px), *offset_ns);
            if x1 < GUTTER_W || x0 > w {
                continue;
            }
            let (x0, x1) = (x0.max(GUTTER_W - 1.0), x1.min(w + 1.0).max(x0 + 1.0));
            match area.last_mut() {
                // A column that continues the last one at the same height widens it.
                Some(last) if (last.1 - hy(b.max)).abs() < 0.25 && (x0 - (last.0 + last.2)).abs() < 0.5 => {
                    last.2 = x1 - last.0;
                }
                _ => area.push((x0, hy(b.max), x1 - x0)),
            }
            if let Some(r) = b.reserved_max.filter(|_| track.max_reserved.is_some_and(|m| m > 0)) {
                line.push((x0, x1, hy(r).round()));
            }
        }
    }
    // The top of the scale, a hairline under the chart (reserved at its most runs along it).
    g.set_fill_style_str(&col.ruler);
    g.fill_rect(GUTTER_W, top, w - GUTTER_W, 1.0);
    g.set_fill_style_str(&col.mem_alloc);
    g.set_global_alpha(0.55);
    g.begin_path();
    for &(x, yy, bw) in &area {
        g.rect(x, yy, bw, (base - yy).max(1.0));
    }
    g.fill();
    g.set_global_alpha(1.0);
    if !line.is_empty() {
        g.set_stroke_style_str(&col.mem_reserved);
        g.set_line_width(2.0);
        g.begin_path();
        let mut last_x = f64::MIN;
        for &(x0, x1, yy) in &line {
            if (x0 - last_x).abs() < 0.5 {
                g.line_to(x0, yy);
            } else {
                g.move_to(x0, yy);
            }
            g.line_to(x1, yy);
            last_x = x1;
        }
        g.stroke();
    }
    if let Some(r) = ctl.pointer.memory_kept.as_ref().filter(|r| r.id == *id && r.device == track.device) {
        let x = ctl.view.x_of(r.t_ns, *offset_ns);
        g.set_fill_style_str(&col.select);
        g.fill_rect(x.floor(), y, 1.5, row.h - LANE_GAP);
    }
    g.restore();
    g.set_fill_style_str(&col.bg);
    g.fill_rect(0.0, y, GUTTER_W, row.h);
    g.set_fill_style_str(&col.muted);
    // Without the allocator's totals, allocated counts from the trace's first sample.
    let title =
        if track.relative { format!("{} (relative)", name(track.device)) } else { name(track.device) };
    if let Some(t) = fit_text(&title, GUTTER_W - 10.0) {
        g.fill_text(&t, 12.0, y + ROW_H / 2.0).ok();
    }
    g.set_fill_style_str(&col.fg);
    if let Some(t) = fit_text(&scale_label(track), GUTTER_W - 10.0) {
        g.fill_text(&t, 12.0, y + ROW_H * 1.5 + 2.0).ok();
    }
}

/// The tile of `key` when it is here, else (asked for) the nearest coarser one that is.
fn tile_or_coarser(
    ctl: &Ctl,
    id: RankId,
    key: MemoryTileKey,
    wanted: &mut Vec<(RankId, MemoryTileKey)>,
) -> Option<Rc<MemoryTile>> {
    if let Some(t) = ctl.memory.cache.get(&(id, key)) {
        return Some(t.clone());
    }
    wanted.push((id, key));
    (1..=8u8)
        .filter(|k| key.level + k <= MAX_LEVEL)
        .map(|k| MemoryTileKey { level: key.level + k, index: key.index.div_euclid(1 << k), ..key })
        .find_map(|k2| ctl.memory.cache.get(&(id, k2)).cloned())
}

/// What the memory row under canvas (x, y) holds at that time, from the tile drawn there.
pub(super) fn readout_at(ctl: &Ctl, x: f64, y: f64) -> Option<Readout> {
    if x <= GUTTER_W || y <= RULER_H {
        return None;
    }
    let row = ctl.row_at(y)?;
    let RowKind::Memory { id, rank, track, offset_ns } = &row.kind else { return None };
    let t = ctl.view.origin + (ctl.view.t0 + (x - GUTTER_W) * ctl.view.ns_per_px).round() as i64 - offset_ns;
    let level = level_for(ctl.view.ns_per_px);
    let key = MemoryTileKey { device: track.device, level, index: t.div_euclid(TILE_PX << level) };
    let tile = tile_or_coarser(ctl, *id, key, &mut Vec::new())?;
    let px = 1i64 << tile.key.level.min(MAX_LEVEL);
    let k = tile.buckets.partition_point(|b| b.t_ns <= t).checked_sub(1)?;
    let bucket = *tile.buckets.get(k).filter(|b| t < b.t_ns.saturating_add(px))?;
    Some(Readout { id: *id, rank: *rank, device: track.device, t_ns: t, bucket })
}

/// The reading's lines: where, when and how much.
fn lines(ctl: &Ctl, r: &Readout) -> Vec<String> {
    let b = &r.bucket;
    let at = (r.t_ns.saturating_add(ctl.offset_of(r.id)).saturating_sub(ctl.view.origin)) as f64;
    let mut out = vec![format!("rank {} · {} · at {}", r.rank, name(r.device), format::duration(at))];
    out.push(if b.min == b.max {
        format!("allocated {}", binary(b.max))
    } else {
        format!("allocated {} – {} in this pixel", binary(b.min), binary(b.max))
    });
    // A CPU trace writes reserved 0: nothing to say.
    if let Some(res) = b.reserved_max.filter(|&r| r > 0) {
        out.push(format!("reserved {}", binary(res)));
    }
    out
}

/// The reading under the pointer as a box beside it, else the kept one under its mark (inside
/// its rank's band).
pub(super) fn draw_readout(g: &CanvasRenderingContext2d, ctl: &Ctl, (w, h): (f64, f64), col: &Colors) {
    let (r, at, band) = match (&ctl.pointer.memory, ctl.pointer.at, &ctl.pointer.memory_kept) {
        (Some(r), Some(at), _) if ctl.pointer.drag.is_none() => (r, at, (0.0, h)),
        (None, _, Some(r)) => {
            let Some(row) = ctl.rows.iter().find(
                |row| matches!(&row.kind, RowKind::Memory { id, track, .. } if *id == r.id && track.device == r.device),
            ) else {
                return;
            };
            let Some((at, band)) = ctl.kept_reading(row, r.id, r.t_ns, (w, h)) else { return };
            (r, at, band)
        }
        _ => return,
    };
    draw_box(g, &lines(ctl, r), at, (w, band.0, band.1), &col.mem_alloc, col);
}

/// The memory rows and the reading as JSON, for the canvas' `data-memory` (a test hook): per
/// row its rank, device, canvas y, the scale's figures and label, the buckets drawn; then the
/// reading under the pointer or kept by a click, with its text.
pub(super) fn json(ctl: &Ctl) -> String {
    let rows: Vec<serde_json::Value> = ctl
        .rows
        .iter()
        .filter_map(|r| match &r.kind {
            RowKind::Memory { id, rank, track, .. } => Some(serde_json::json!({
                "rank": rank, "file": id.file, "index": id.index, "device": track.device,
                "y": ctl.screen_y(r).round(), "h": r.h, "pinned": r.pinned,
                "max_allocated": track.max_allocated, "max_reserved": track.max_reserved,
                "samples": track.samples, "label": scale_label(track),
                "tiles": ctl.memory.cache.keys().filter(|(f, k)| f == id && k.device == track.device).count(),
            })),
            _ => None,
        })
        .collect();
    let reading = |r: &Readout| {
        serde_json::json!({
            "rank": r.rank, "device": r.device, "t_ns": r.t_ns.to_string(), "min": r.bucket.min,
            "max": r.bucket.max, "reserved": r.bucket.reserved_max, "text": lines(ctl, r).join("\n"),
        })
    };
    serde_json::json!({
        "shown": ctl.memory_shown,
        "rows": rows,
        "hover": ctl.pointer.memory.as_ref().map(reading),
        "kept": ctl.pointer.memory_kept.as_ref().map(reading),
    })
    .to_string()
}

/// The bar's Memory button (only when some rank has memory samples): shows or hides the rows.
pub(super) fn toggle(ctl: &Shared, job: &JobView, shown: &UseStateHandle<bool>) -> Html {
    if !job.ranks.iter().any(|(_, r)| !r.memory.is_empty()) {
        return Html::default();
    }
    let onclick = {
        let (ctl, shown) = (ctl.clone(), shown.clone());
        Callback::from(move |_| {
            let on = !*shown;
            {
                let mut c = ctl.borrow_mut();
                c.memory_shown = on;
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
        <button class={classes!("small", (**shown).then_some("active"))} data-testid="memory-toggle"
            aria-pressed={if **shown { "true" } else { "false" }} {onclick}
            title="Each rank's allocated (area) and reserved (line) memory under its lanes, from the allocator's [memory] events">
            {if **shown { "Memory: on" } else { "Memory: off" }}
        </button>
    }
}

/// The answers' sink: a memory tile goes to the cache.
pub(super) fn sink(ctl: &Shared) -> Reply {
    let weak = Rc::downgrade(ctl);
    Rc::new(move |id, answer, _| {
        let Answer::Memory(tile) = answer else { return };
        if let Some(c) = weak.upgrade() {
            {
                let mut cm = c.borrow_mut();
                cm.memory.inflight.remove(&(id, tile.key));
                if cm.memory.cache.len() > 20_000 {
                    cm.memory.cache.clear();
                }
                cm.memory.cache.insert((id, tile.key), Rc::new(*tile));
            }
            request_frame(&c);
        }
    })
}

#[cfg(test)]
mod tests {
    #[test]
    fn bytes_read_in_binary_units() {
        assert_eq!(super::binary(512), "512 B");
        assert_eq!(super::binary(3 * 1024), "3.0 KiB");
        assert_eq!(super::binary(1_456_520), "1.39 MiB");
        assert_eq!(super::binary(5 << 30), "5.00 GiB");
        assert_eq!(super::binary(-2048), "-2.0 KiB");
    }
}
