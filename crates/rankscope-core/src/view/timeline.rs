//! Timeline level of detail: which boxes to draw for one lane in one window of time.
//!
//! The app draws every rank's lanes on a canvas. A rank can hold millions of events and a screen
//! is a few thousand pixels wide, so the view never walks events per frame: it asks for **tiles**
//! and caches them. A tile is one lane over a fixed window of time at a fixed zoom level:
//!
//! - level `L` means `2^L` ns per pixel; a tile is [`TILE_PX`] pixels wide, so it covers
//!   `TILE_PX · 2^L` ns, and tile `k` starts at absolute time `k · TILE_PX · 2^L` ns. The grid is
//!   anchored at absolute time 0, so any two parties compute the same tiles without agreeing on
//!   an origin, and a tile, once computed, never changes.
//! - A lane's slices are stacked in **rows by nesting depth** ([`TimelineIndex`]): a slice goes
//!   one row below every slice still open when it starts. Within one row slices never overlap,
//!   so a row sorted by start is also sorted by end, and the first slice of a window is found by
//!   binary search.
//! - **Merging** ("what falls within a pixel"): a slice at least one pixel wide is its own box.
//!   Consecutive slices of one row that are each narrower than a pixel and separated by gaps
//!   narrower than a pixel become one box, coloured by the class holding most of its time (ties
//!   go to the lower class), with its event count. A tile therefore holds at most about
//!   `2 · TILE_PX` boxes per row however many events fall in it, which is what keeps millions
//!   of events fluid: the cost of a tile is paid once, by the worker that holds the rank.
//! - A box narrower than [`LABEL_MIN_PX`] has no label; wider single-event boxes carry the
//!   event's name (deduplicated per tile).
//!
//! Boxes are not clipped to the tile: a long slice appears, whole, in every tile it crosses,
//! and the renderer clips to its own viewport.

use serde::{Deserialize, Serialize};

use crate::model::{Class, EventKind, RankTrace, StringTable};

/// Width of a tile in pixels.
pub const TILE_PX: i64 = 256;
/// The coarsest level (`2^52` ns per pixel is about 52 days per pixel).
pub const MAX_LEVEL: u8 = 52;
/// Rows deeper than this are not indexed (a counted, reported loss: [`TimelineIndex::hidden`]).
pub const MAX_DEPTH: usize = 64;
/// Single-event boxes at least this many pixels wide carry their name.
pub const LABEL_MIN_PX: i64 = 24;
/// `label` value of a box without a label.
pub const NO_LABEL: u32 = u32::MAX;

/// Rows by nesting depth for every lane of one rank: `rows[lane][depth]` lists event rows
/// sorted by start (and so by end).
#[derive(Debug, Clone, Default)]
pub struct TimelineIndex {
    rows: Vec<Vec<Vec<u32>>>,
    /// Events deeper than [`MAX_DEPTH`], not drawn.
    pub hidden: u64,
}

impl TimelineIndex {
    /// Builds the index. `t` must be normalized (rows sorted by start, longer first on ties, so
    /// that a parent comes before the slices it contains).
    pub fn build(t: &RankTrace) -> TimelineIndex {
        let e = &t.events;
        let lanes = t.lanes.len();
        let mut rows: Vec<Vec<Vec<u32>>> = vec![Vec::new(); lanes];
        // Per lane: end times of the slices still open, innermost last.
        let mut open: Vec<Vec<i64>> = vec![Vec::new(); lanes];
        let mut hidden = 0;
        for i in 0..e.len() {
            let l = e.lane[i].0 as usize;
            let (Some(stack), Some(lane_rows)) = (open.get_mut(l), rows.get_mut(l)) else {
                continue;
            };
            let ts = e.ts_ns[i];
            // A slice that ended at or before this start is closed.
            while stack.last().is_some_and(|&end| end <= ts) {
                stack.pop();
            }
            let depth = stack.len();
            if depth >= MAX_DEPTH {
                hidden += 1;
                continue;
            }
            if e.kind[i] == EventKind::Slice {
                stack.push(e.end_ns(i).max(ts));
            }
            if lane_rows.len() <= depth {
                lane_rows.resize_with(depth + 1, Vec::new);
            }
            lane_rows[depth].push(i as u32);
        }
        TimelineIndex { rows, hidden }
    }

    /// The nesting row event row `event` of `lane` is drawn in (None: too deep to draw).
    pub fn depth_of(&self, lane: u32, event: u32) -> Option<u32> {
        // Each row lists its events in table order (the loop in `build`).
        self.rows
            .get(lane as usize)?
            .iter()
            .position(|row| row.binary_search(&event).is_ok())
            .map(|d| d as u32)
    }

    /// Number of rows (nesting depths) of a lane.
    pub fn depth(&self, lane: u32) -> u32 {
        self.rows.get(lane as usize).map_or(0, |r| r.len() as u32)
    }

    /// The boxes of one tile.
    pub fn tile(&self, t: &RankTrace, strings: &StringTable, key: TileKey) -> Tile {
        let mut out = Tile { key, ..Tile::default() };
        let level = key.level.min(MAX_LEVEL);
        let px = 1i64 << level;
        let Some(t0) = key.index.checked_mul(TILE_PX << level) else {
            return out;
        };
        let t1 = t0.saturating_add(TILE_PX << level);
        let Some(lane_rows) = self.rows.get(key.lane as usize) else {
            return out;
        };
        let e = &t.events;
        let mut labels = crate::model::FxHashMap::<u32, u32>::default();
        for (depth, row) in lane_rows.iter().enumerate() {
            let end = |k: usize| e.end_ns(row[k] as usize);
            // First slice of the row that ends after the tile starts (instants at t0 count).
            let first = row.partition_point(|&i| {
                let i = i as usize;
                let en = e.end_ns(i);
                en < t0 || (en == t0 && e.dur_ns[i] > 0)
            });
            let mut cur: Option<Pending> = None;
            for k in first..row.len() {
                let i = row[k] as usize;
                let s = e.ts_ns[i];
                if s >= t1 {
                    break;
                }
                let en = end(k).max(s);
                let class = e.class[i] as usize;
                let narrow = en - s < px;
                if let Some(p) = cur.as_mut() {
                    if p.narrow && narrow && s - p.end < px {
                        p.end = p.end.max(en);
                        p.count += 1;
                        if let Some(d) = p.class_ns.get_mut(class) {
                            *d += (en - s).max(1);
                        }
                        continue;
                    }
                }
                if let Some(p) = cur.take() {
                    out.push(depth as u8, p, &mut labels, strings, t, px);
                }
                let mut class_ns = [0i64; Class::ALL.len()];
                if let Some(d) = class_ns.get_mut(class) {
                    *d = (en - s).max(1);
                }
                cur = Some(Pending { start: s, end: en, count: 1, narrow, class_ns, first: i as u32 });
            }
            if let Some(p) = cur.take() {
                out.push(depth as u8, p, &mut labels, strings, t, px);
            }
        }
        out
    }

    /// The event drawn at time `t_ns` in row `depth` of `lane`, within `slop_ns` either side (so
    /// a sub-pixel slice can be hovered).
    pub fn pick(&self, t: &RankTrace, lane: u32, depth: u32, t_ns: i64, slop_ns: i64) -> Option<u32> {
        let row = self.rows.get(lane as usize)?.get(depth as usize)?;
        let e = &t.events;
        let lo = t_ns.saturating_sub(slop_ns.max(0));
        let hi = t_ns.saturating_add(slop_ns.max(0));
        let first = row.partition_point(|&i| e.end_ns(i as usize) < lo);
        // Prefer the event that holds t_ns; otherwise the nearest within the slop.
        let mut best: Option<(i64, u32)> = None;
        for &i in row.get(first..)? {
            let s = e.ts_ns[i as usize];
            if s > hi {
                break;
            }
            let en = e.end_ns(i as usize);
            let dist = if t_ns < s {
                s - t_ns
            } else if t_ns > en {
                t_ns - en
            } else {
                0
            };
            if best.is_none_or(|(d, _)| dist < d) {
                best = Some((dist, i));
            }
            if dist == 0 {
                break;
            }
        }
        best.map(|(_, i)| i)
    }
}

/// A slice or merged run being built.
struct Pending {
    start: i64,
    end: i64,
    count: u32,
    narrow: bool,
    class_ns: [i64; Class::ALL.len()],
    first: u32,
}

/// Which tile: a lane, a zoom level (`2^level` ns per pixel) and a tile number.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct TileKey {
    pub lane: u32,
    pub level: u8,
    pub index: i64,
}

impl TileKey {
    /// Absolute start and end (exclusive) of the tile in ns.
    pub fn range_ns(&self) -> (i64, i64) {
        let w = TILE_PX << self.level.min(MAX_LEVEL);
        let t0 = self.index.saturating_mul(w);
        (t0, t0.saturating_add(w))
    }
}

/// The boxes of one tile, as columns. Times are absolute ns.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Tile {
    pub key: TileKey,
    pub depth: Vec<u8>,
    pub start_ns: Vec<i64>,
    pub end_ns: Vec<i64>,
    /// [`Class`] as its `u8` value.
    pub class: Vec<u8>,
    /// Events in the box (1 for a single slice).
    pub count: Vec<u32>,
    /// Index into `labels`, or [`NO_LABEL`].
    pub label: Vec<u32>,
    /// For single-event boxes: the event's row in the rank's table (for details on click).
    pub event: Vec<u32>,
    pub labels: Vec<String>,
}

impl Tile {
    pub fn len(&self) -> usize {
        self.depth.len()
    }

    pub fn is_empty(&self) -> bool {
        self.depth.is_empty()
    }

    fn push(
        &mut self,
        depth: u8,
        p: Pending,
        labels: &mut crate::model::FxHashMap<u32, u32>,
        strings: &StringTable,
        t: &RankTrace,
        px: i64,
    ) {
        let mut class = 0usize;
        for (c, &ns) in p.class_ns.iter().enumerate() {
            if ns > p.class_ns[class] {
                class = c;
            }
        }
        let label = if p.count == 1 && (p.end - p.start) >= LABEL_MIN_PX * px {
            let name = t.events.name.get(p.first as usize).map_or(0, |n| n.0);
            let next = self.labels.len() as u32;
            let id = *labels.entry(name).or_insert(next);
            if id == next {
                self.labels.push(strings.get(crate::model::StrId(name)).to_string());
            }
            id
        } else {
            NO_LABEL
        };
        self.depth.push(depth);
        self.start_ns.push(p.start);
        self.end_ns.push(p.end);
        self.class.push(class as u8);
        self.count.push(p.count);
        self.label.push(label);
        self.event.push(if p.count == 1 { p.first } else { crate::model::NONE_U32 });
    }
}

/// The zoom level whose pixels are at most `ns_per_px` wide (the finer of the two neighbours,
/// so a tile is never magnified on screen).
pub fn level_for(ns_per_px: f64) -> u8 {
    if ns_per_px.is_nan() || ns_per_px <= 1.0 {
        return 0;
    }
    (ns_per_px.log2().floor() as i64).clamp(0, i64::from(MAX_LEVEL)) as u8
}

/// The tiles of `lane` at `level` that cover `[t0_ns, t1_ns)`.
pub fn tiles_covering(lane: u32, level: u8, t0_ns: i64, t1_ns: i64) -> impl Iterator<Item = TileKey> {
    let w = TILE_PX << level.min(MAX_LEVEL);
    let first = t0_ns.div_euclid(w);
    let last = t1_ns.saturating_sub(1).div_euclid(w);
    (first..=last.max(first)).map(move |index| TileKey { lane, level, index })
}
