//! The timeline's memory track: one rank's allocated (and reserved) bytes per device, asked for
//! in tiles on the grid of the event tiles ([`super::timeline`]: level `L` is `2^L` ns per
//! pixel, a tile [`TILE_PX`] pixels from absolute time `index · TILE_PX · 2^L`), one bucket per
//! pixel holding the least and most allocated in it ([`MemorySeries::buckets`]), so a peak
//! narrower than a pixel is still drawn at any zoom. The series are built once per rank, on its
//! own clock; the app adds the rank's alignment offset as it does to the event tiles.

use serde::{Deserialize, Serialize};

use super::timeline::{MAX_LEVEL, TILE_PX};
pub use crate::analyze::memory::{span, MemoryBucket, MemorySeries, MemorySpan, MemoryTrack};

/// Which memory tile: a device ([`crate::model::HOST_MEMORY`] for the host), a zoom level and a
/// tile number.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct MemoryTileKey {
    pub device: i32,
    pub level: u8,
    pub index: i64,
}

impl MemoryTileKey {
    /// Absolute start and end (exclusive) of the tile in ns (the event tile's range).
    pub fn range_ns(&self) -> (i64, i64) {
        let w = TILE_PX << self.level.min(MAX_LEVEL);
        let t0 = self.index.saturating_mul(w);
        (t0, t0.saturating_add(w))
    }
}

/// One memory tile: a bucket per pixel the series covers ([`MemoryBucket`], absolute ns).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct MemoryTile {
    pub key: MemoryTileKey,
    pub buckets: Vec<MemoryBucket>,
}

/// The tile of `key` from the rank's series (empty for a device without samples).
pub fn tile(series: &[MemorySeries], key: MemoryTileKey) -> MemoryTile {
    let (t0, t1) = key.range_ns();
    let buckets = series
        .iter()
        .find(|s| s.device == key.device)
        .map_or_else(Vec::new, |s| s.buckets(t0, t1, TILE_PX as usize));
    MemoryTile { key, buckets }
}

/// The memory tiles covering `[t0_ns, t1_ns)` at `level` for one device.
pub fn tiles_covering(device: i32, level: u8, t0_ns: i64, t1_ns: i64) -> impl Iterator<Item = MemoryTileKey> {
    super::timeline::tiles_covering(0, level, t0_ns, t1_ns).map(move |k| MemoryTileKey {
        device,
        level: k.level,
        index: k.index,
    })
}
