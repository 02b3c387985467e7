//! The timeline's metric tracks: the cluster metrics dropped beside the traces
//! ([`crate::metrics`]) as rows under the ranks' lanes, placed where the metrics join put them
//! ([`crate::metrics::join`]): a row per GPU series of a rank's device under that rank, and a row
//! per NIC series of a host once, under the host's first joined rank.
//!
//! **Time.** A sample's time is Unix ns on the host that stamped it, which is the clock the
//! host's ranks' traces are on: a row is drawn on its rank's own clock, moved to the aligned
//! clock by the rank's alignment offset as its lanes are (the join's `aligned = t − offset`).
//!
//! **Steps, not lines.** Samples are coarse (about a second) against ms kernels, so nothing is
//! interpolated: each sample holds a value over a span ([`Hold`]). A gauge holds from its time
//! until the next sample; a rate (a counter's difference, stamped at the end of the interval it
//! describes, [`crate::metrics::series`]) holds over the interval before its time. A hold never
//! lasts more than twice the series' sample interval (a gap in the scrapes stays a gap).
//!
//! **Tiles.** Asked on the event tiles' grid ([`super::timeline`]: level `L` is `2^L` ns per
//! pixel, [`TILE_PX`] pixels a tile), one [`MetricBucket`] per pixel with the least and most
//! value held in it, so a spike narrower than a pixel is drawn at any zoom, as the memory
//! track's are ([`super::memory`]).

use serde::{Deserialize, Serialize};

use super::timeline::{MAX_LEVEL, TILE_PX};
use crate::metrics::join::{host_key, Joined};
use crate::metrics::series::{self, EntityKind, Series, Signal, ValueKind};
use crate::metrics::{self, ReadOptions};

crate::named_enum! {
    /// How a row's values read.
    pub enum Unit {
        /// 0–1, shown as a percent (DCGM's `PROF_*_ACTIVE`); the scale is 0–100 %.
        Fraction => "fraction",
        /// Already a percent; the scale is 0–100 %.
        Percent => "percent",
        Mhz => "mhz",
        Watts => "watts",
        BytesPerSecond => "bytes_per_s",
        PerSecond => "per_s",
    }
}

impl Unit {
    fn of(signal: Signal) -> Option<Unit> {
        Some(match signal {
            Signal::SmActive | Signal::TensorActive | Signal::DramActive => Unit::Fraction,
            Signal::GpuUtil => Unit::Percent,
            Signal::SmClock => Unit::Mhz,
            Signal::Power => Unit::Watts,
            Signal::NvlinkTx | Signal::NvlinkRx | Signal::NicTx | Signal::NicRx => Unit::BytesPerSecond,
            Signal::Pause | Signal::Retransmits => Unit::PerSecond,
            // A bit mask, an error number, a constant line rate, an unknown name: not a level to
            // draw (the findings read them).
            Signal::ClockReasons | Signal::Xid | Signal::NicLineRate | Signal::Other => return None,
        })
    }

    /// A value in this unit, for the gutter and the reading: `42.5 %`, `1410 MHz`, `612 W`,
    /// `23.4 GB/s`, `12 /s`.
    pub fn format(self, v: f64) -> String {
        match self {
            Unit::Fraction => format!("{:.1} %", v * 100.0),
            Unit::Percent => format!("{v:.1} %"),
            Unit::Mhz => format!("{v:.0} MHz"),
            Unit::Watts => format!("{v:.0} W"),
            Unit::BytesPerSecond => {
                let a = v.abs();
                if a >= 1e9 {
                    format!("{:.2} GB/s", v / 1e9)
                } else if a >= 1e6 {
                    format!("{:.1} MB/s", v / 1e6)
                } else if a >= 1e3 {
                    format!("{:.1} kB/s", v / 1e3)
                } else {
                    format!("{v:.0} B/s")
                }
            }
            Unit::PerSecond => format!("{v:.1} /s"),
        }
    }

    /// The top of a row's scale: the unit's whole range for shares, else the row's most.
    fn scale(self, max: f64) -> f64 {
        match self {
            Unit::Fraction => 1.0,
            Unit::Percent => 100.0,
            _ if max > 0.0 => max,
            _ => 1.0,
        }
    }
}

/// A value held over `[start_ns, end_ns)` (the host's clock, Unix ns) by the sample taken at
/// `sample_ns`.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Hold {
    pub start_ns: i64,
    pub end_ns: i64,
    pub sample_ns: i64,
    pub value: f64,
}

/// The spans a series' samples hold ([`Hold`]; the module's rule), in time order, disjoint.
pub fn holds(s: &Series) -> Vec<Hold> {
    let n = s.ts_ns.len().min(s.value.len());
    let interval = s.interval_ns.filter(|&i| i > 0);
    // Without two samples the interval is unknown: a single sample is a 1 ms mark.
    let cap = interval.map_or(1_000_000, |i| i.saturating_mul(2));
    let mut out: Vec<Hold> = Vec::with_capacity(n);
    for i in 0..n {
        let (t, value) = (s.ts_ns[i], s.value[i]);
        if !value.is_finite() {
            continue;
        }
        let (start, end) = match s.kind {
            ValueKind::Gauge => {
                let next = s.ts_ns.get(i + 1).copied().filter(|_| i + 1 < n);
                let end = match next {
                    Some(nx) if nx.saturating_sub(t) <= cap => nx,
                    _ => t.saturating_add(interval.unwrap_or(cap)),
                };
                (t, end)
            }
            ValueKind::Rate => {
                let prev = i.checked_sub(1).map(|p| s.ts_ns[p]);
                let start = match prev {
                    Some(p) if t.saturating_sub(p) <= cap => p,
                    _ => t.saturating_sub(interval.unwrap_or(cap)),
                };
                (start, t)
            }
        };
        // Never overlapping the hold before (a rate after a gap starts where that one ends).
        let start = out.last().map_or(start, |h| start.max(h.end_ns));
        if end > start {
            out.push(Hold { start_ns: start, end_ns: end, sample_ns: t, value });
        }
    }
    out
}

/// One pixel of a metric tile: its start (absolute ns, the host's clock) and the least and most
/// value held in it.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct MetricBucket {
    pub t_ns: i64,
    pub min: f64,
    pub max: f64,
}

/// Per pixel of `[t0, t1)` cut into `n` pixels, the least and most value the holds give it
/// (pixels no hold covers are left out).
pub fn buckets(holds: &[Hold], t0: i64, t1: i64, n: usize) -> Vec<MetricBucket> {
    if n == 0 || t1 <= t0 {
        return Vec::new();
    }
    let px = ((t1 - t0) / n as i64).max(1);
    let mut out: Vec<MetricBucket> = Vec::new();
    let first = holds.partition_point(|h| h.end_ns <= t0);
    for h in holds[first..].iter().take_while(|h| h.start_ns < t1) {
        let a = (h.start_ns.max(t0) - t0) / px;
        let b = ((h.end_ns.min(t1) - t0 + px - 1) / px).min(n as i64);
        for k in a..b {
            let t_ns = t0 + k * px;
            match out.last_mut() {
                Some(last) if last.t_ns == t_ns => {
                    last.min = last.min.min(h.value);
                    last.max = last.max.max(h.value);
                }
                _ => out.push(MetricBucket { t_ns, min: h.value, max: h.value }),
            }
        }
    }
    out
}

/// One row of the track: what it measures, where it is drawn, its holds.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MetricRow {
    /// The rank under whose lanes it is drawn (a NIC's: its host's first joined rank).
    pub rank: u32,
    pub host: String,
    /// `GPU 0` or the NIC's name (`ib0`, `mlx5_0/1`).
    pub entity: String,
    pub kind: EntityKind,
    pub signal: Signal,
    /// The source's metric name.
    pub name: String,
    pub value_kind: ValueKind,
    pub unit: Unit,
    /// The series' sample interval, ns.
    pub interval_ns: Option<i64>,
    /// The rank's alignment offset (aligned = own − offset) and its residual, as the join took
    /// them.
    pub offset_ns: i64,
    pub align_residual_ns: i64,
    pub min: f64,
    pub max: f64,
    pub holds: Vec<Hold>,
}

impl MetricRow {
    /// The row's title: `GPU 0 sm_active`, `ib0 nic_rx_bytes_per_s`.
    pub fn title(&self) -> String {
        format!("{} {}", self.entity, self.signal.as_str())
    }

    /// The top of the row's y scale.
    pub fn scale(&self) -> f64 {
        self.unit.scale(self.max)
    }

    /// What the row's place on the clock rests on, for its gutter: `1 s samples · align ±0.2 ms`.
    pub fn residual(&self) -> String {
        let every = self.interval_ns.map_or("one sample".to_string(), |i| {
            if i >= 1_000_000_000 && i % 1_000_000_000 == 0 {
                format!("{} s samples", i / 1_000_000_000)
            } else {
                format!("{:.0} ms samples", i as f64 / 1e6)
            }
        });
        format!("{every} · align ±{:.1} ms", self.align_residual_ns as f64 / 1e6)
    }

    /// The hold at `t_ns` (the host's clock), if a sample covers it.
    pub fn value_at(&self, t_ns: i64) -> Option<Hold> {
        let k = self.holds.partition_point(|h| h.start_ns <= t_ns).checked_sub(1)?;
        self.holds.get(k).copied().filter(|h| t_ns < h.end_ns)
    }
}

/// Every metric row of a job, in rank order (each rank's GPU rows, then its host's NIC rows).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct MetricTracks {
    pub rows: Vec<MetricRow>,
}

/// The rows for the metrics files beside the traces (`(name, text)`, inflated) as `joined`
/// placed their ranks. Files that are not metrics give no rows (the analysis names them).
pub fn tracks(files: &[(&str, &[u8])], joined: &Joined) -> MetricTracks {
    let opts = ReadOptions::default();
    let reads: Vec<(&str, metrics::Read)> =
        files.iter().filter_map(|(n, b)| metrics::read(n, b, &opts).ok().map(|(_, r)| (*n, r))).collect();
    let aliases = series::aliases(&reads.iter().map(|(_, r)| r).collect::<Vec<_>>());
    let mut all: Vec<Series> = reads.iter().flat_map(|(n, r)| series::build(n, r, &aliases).0).collect();
    all.sort_by(|a, b| (&a.entity, a.signal, &a.name).cmp(&(&b.entity, b.signal, &b.name)));
    let row = |s: &Series, rank: u32, offset_ns: i64, align_residual_ns: i64| -> Option<MetricRow> {
        let unit = Unit::of(s.signal)?;
        let holds = holds(s);
        let (min, max) = holds
            .iter()
            .fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), h| (lo.min(h.value), hi.max(h.value)));
        (!holds.is_empty()).then(|| MetricRow {
            rank,
            host: s.entity.host.clone(),
            entity: match (s.entity.gpu, &s.entity.nic) {
                (Some(g), _) => format!("GPU {g}"),
                (None, Some(n)) => n.clone(),
                _ => s.entity.host.clone(),
            },
            kind: s.entity.kind,
            signal: s.signal,
            name: s.name.clone(),
            value_kind: s.kind,
            unit,
            interval_ns: s.interval_ns,
            offset_ns,
            align_residual_ns,
            min,
            max,
            holds,
        })
    };
    let mut ranks: Vec<&crate::metrics::join::RankJoin> = joined.ranks.iter().collect();
    ranks.sort_by_key(|r| r.rank);
    let mut rows = Vec::new();
    let mut hosts_done: Vec<String> = Vec::new();
    for r in ranks {
        let host = host_key(&r.host);
        for s in all.iter().filter(|s| {
            s.entity.kind == EntityKind::Gpu
                && s.entity.gpu == Some(r.gpu)
                && host_key(&s.entity.host) == host
        }) {
            rows.extend(row(s, r.rank, r.offset_ns, r.align_residual_ns));
        }
        if hosts_done.contains(&host) {
            continue;
        }
        hosts_done.push(host.clone());
        for s in all.iter().filter(|s| s.entity.kind == EntityKind::Nic && host_key(&s.entity.host) == host) {
            rows.extend(row(s, r.rank, r.offset_ns, r.align_residual_ns));
        }
    }
    MetricTracks { rows }
}

/// Which metric tile: a row of [`MetricTracks::rows`], a zoom level and a tile number.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct MetricTileKey {
    pub row: u32,
    pub level: u8,
    pub index: i64,
}

impl MetricTileKey {
    /// Absolute start and end (exclusive) of the tile in ns (the event tile's range).
    pub fn range_ns(&self) -> (i64, i64) {
        let w = TILE_PX << self.level.min(MAX_LEVEL);
        let t0 = self.index.saturating_mul(w);
        (t0, t0.saturating_add(w))
    }
}

/// One metric tile: a bucket per pixel a hold covers.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct MetricTile {
    pub key: MetricTileKey,
    pub buckets: Vec<MetricBucket>,
}

/// The tile of `key` (empty for a row that is not there).
pub fn tile(tracks: &MetricTracks, key: MetricTileKey) -> MetricTile {
    let (t0, t1) = key.range_ns();
    let buckets = tracks
        .rows
        .get(key.row as usize)
        .map_or_else(Vec::new, |r| buckets(&r.holds, t0, t1, TILE_PX as usize));
    MetricTile { key, buckets }
}

/// The metric tiles covering `[t0_ns, t1_ns)` at `level` for one row.
pub fn tiles_covering(row: u32, level: u8, t0_ns: i64, t1_ns: i64) -> impl Iterator<Item = MetricTileKey> {
    super::timeline::tiles_covering(0, level, t0_ns, t1_ns).map(move |k| MetricTileKey {
        row,
        level: k.level,
        index: k.index,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::metrics::series::Entity;

    const S: i64 = 1_000_000_000;

    fn series(kind: ValueKind, ts: &[i64], v: &[f64]) -> Series {
        Series {
            entity: Entity {
                host: "node00".into(),
                kind: EntityKind::Gpu,
                gpu: Some(0),
                uuid: None,
                nic: None,
            },
            signal: Signal::SmActive,
            name: "DCGM_FI_PROF_SM_ACTIVE".into(),
            kind,
            ts_ns: ts.to_vec(),
            value: v.to_vec(),
            interval_ns: Some(S),
        }
    }

    #[test]
    fn a_gauge_holds_until_the_next_sample_and_a_gap_stays_a_gap() {
        // Samples at 0, 1, 2 s, then 10 s (a scrape gap of 8 s).
        let s = series(ValueKind::Gauge, &[0, S, 2 * S, 10 * S], &[0.1, 0.5, 0.2, 0.9]);
        let h = holds(&s);
        let spans: Vec<(i64, i64, f64)> = h.iter().map(|h| (h.start_ns, h.end_ns, h.value)).collect();
        assert_eq!(spans, vec![(0, S, 0.1), (S, 2 * S, 0.5), (2 * S, 3 * S, 0.2), (10 * S, 11 * S, 0.9)]);
        let row = MetricRow {
            rank: 0,
            host: "node00".into(),
            entity: "GPU 0".into(),
            kind: EntityKind::Gpu,
            signal: Signal::SmActive,
            name: s.name.clone(),
            value_kind: s.kind,
            unit: Unit::Fraction,
            interval_ns: Some(S),
            offset_ns: 0,
            align_residual_ns: 250_000,
            min: 0.1,
            max: 0.9,
            holds: h,
        };
        // Between samples: the earlier one's value, exactly (no interpolation).
        assert_eq!(row.value_at(S + S / 2).map(|h| (h.value, h.sample_ns)), Some((0.5, S)));
        assert_eq!(row.value_at(5 * S), None, "inside the gap");
        assert_eq!(row.value_at(-1), None);
        assert_eq!(row.residual(), "1 s samples · align ±0.2 ms");
    }

    #[test]
    fn a_rate_holds_over_the_interval_it_describes() {
        let mut s = series(ValueKind::Rate, &[S, 2 * S, 3 * S], &[100.0, 300.0, 200.0]);
        s.signal = Signal::NicRx;
        let spans: Vec<(i64, i64, f64)> = holds(&s).iter().map(|h| (h.start_ns, h.end_ns, h.value)).collect();
        assert_eq!(spans, vec![(0, S, 100.0), (S, 2 * S, 300.0), (2 * S, 3 * S, 200.0)]);
    }

    #[test]
    fn zoomed_out_a_pixel_holds_the_least_and_most_value_in_it() {
        let s = series(ValueKind::Gauge, &[0, S, 2 * S, 3 * S], &[0.1, 0.5, 0.2, 0.3]);
        let h = holds(&s);
        // Four seconds on two pixels: each pixel spans two holds.
        let b = buckets(&h, 0, 4 * S, 2);
        assert_eq!(
            b,
            vec![
                MetricBucket { t_ns: 0, min: 0.1, max: 0.5 },
                MetricBucket { t_ns: 2 * S, min: 0.2, max: 0.3 }
            ]
        );
        // Zoomed in: a pixel inside one hold reads that sample alone; uncovered pixels are absent.
        let b = buckets(&h, S + 10, S + 20, 10);
        assert_eq!(b.len(), 10);
        assert!(b.iter().all(|x| x.min == 0.5 && x.max == 0.5));
        assert!(buckets(&h, 10 * S, 11 * S, 8).is_empty());
        // A hold narrower than a pixel is still in its pixel (a spike is never lost).
        let spike = series(ValueKind::Gauge, &[0, 10, 20], &[0.0, 1.0, 0.0]);
        let b = buckets(&holds(&spike), 0, S, 4);
        assert_eq!(b[0].max, 1.0);
    }

    #[test]
    fn tiles_sit_on_the_event_grid() {
        let tracks = MetricTracks {
            rows: vec![MetricRow {
                rank: 0,
                host: "h".into(),
                entity: "GPU 0".into(),
                kind: EntityKind::Gpu,
                signal: Signal::Power,
                name: "DCGM_FI_DEV_POWER_USAGE".into(),
                value_kind: ValueKind::Gauge,
                unit: Unit::Watts,
                interval_ns: Some(S),
                offset_ns: 0,
                align_residual_ns: 0,
                min: 300.0,
                max: 300.0,
                holds: vec![Hold { start_ns: 0, end_ns: S, sample_ns: 0, value: 300.0 }],
            }],
        };
        // Level 22: 2^22 ns a pixel, a tile ~1.07 s: the hold covers its first 239 pixels.
        let t = tile(&tracks, MetricTileKey { row: 0, level: 22, index: 0 });
        assert_eq!(t.buckets.len(), ((S + (1 << 22) - 1) >> 22) as usize);
        assert!(t.buckets.iter().all(|b| b.max == 300.0));
        assert!(tile(&tracks, MetricTileKey { row: 7, level: 22, index: 0 }).buckets.is_empty());
        let keys: Vec<MetricTileKey> = tiles_covering(0, 22, 0, 3 * S).collect();
        assert_eq!(keys.len(), 3);
        assert_eq!(Unit::BytesPerSecond.format(23.4e9), "23.40 GB/s");
        assert_eq!(Unit::Fraction.format(0.425), "42.5 %");
    }

    /// The zoo-style join fixture: the comm-bound export's GPU series land under their ranks.
    #[test]
    fn rows_go_under_the_ranks_the_join_placed() {
        use crate::metrics::join::{MapMethod, RankJoin};
        let text = br#"{"status":"success","data":{"resultType":"matrix","result":[
          {"metric":{"__name__":"DCGM_FI_PROF_SM_ACTIVE","gpu":"1","Hostname":"node00"},"values":[[1.0,"0.25"],[2.0,"0.75"]]},
          {"metric":{"__name__":"DCGM_FI_PROF_SM_ACTIVE","gpu":"0","Hostname":"node01"},"values":[[1.0,"0.5"],[2.0,"0.5"]]},
          {"metric":{"__name__":"node_network_receive_bytes_total","device":"ib0","instance":"node00:9100"},"values":[[1.0,"0"],[2.0,"1000"],[3.0,"3000"]]}
        ]}}"#;
        let rj = |rank: u32, host: &str, gpu: u32| RankJoin {
            rank,
            host: host.into(),
            gpu,
            uuid: None,
            method: MapMethod::HostAndGpu,
            start_ns: 0,
            end_ns: 0,
            aligned_start_ns: 0,
            aligned_end_ns: 0,
            offset_ns: 7,
            align_residual_ns: 0,
            interval_ns: Some(S),
            step_ns: 0,
            coarse: true,
            sm_active: None,
            tensor_active: None,
            sm_clock_mhz: None,
            power_w: None,
            clock_reasons: None,
            compute_ns_per_step: 0,
            comm_share: 0.0,
        };
        let joined = Joined {
            method: String::new(),
            residual: String::new(),
            ranks: vec![rj(1, "NODE00.cluster", 1), rj(0, "node00", 0)],
            hosts: Vec::new(),
            diagnostics: Vec::new(),
        };
        let t = tracks(&[("x.json", &text[..])], &joined);
        let got: Vec<(u32, String, Signal)> = t.rows.iter().map(|r| (r.rank, r.title(), r.signal)).collect();
        // Rank 0 (node00 GPU 0: none) takes the host's NIC; rank 1 its GPU 1; node01 has no rank.
        assert_eq!(
            got,
            vec![
                (0, "ib0 nic_rx_bytes_per_s".to_string(), Signal::NicRx),
                (1, "GPU 1 sm_active".to_string(), Signal::SmActive)
            ]
        );
        let sm = &t.rows[1];
        assert_eq!(sm.value_at(S + 1).map(|h| h.value), Some(0.25));
        assert_eq!(sm.value_at(2 * S + 1).map(|h| h.value), Some(0.75));
        // The NIC's rate over (1 s, 2 s] and (2 s, 3 s].
        assert_eq!(t.rows[0].value_at(S + S / 2).map(|h| h.value), Some(1000.0));
        assert_eq!(t.rows[0].value_at(2 * S + 1).map(|h| h.value), Some(2000.0));
        // Not metrics: no rows, no panic.
        assert!(tracks(&[("y", b"\x00\x01garbage")], &joined).rows.is_empty());
    }
}
