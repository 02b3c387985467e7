//! Samples → series: one per entity (host × GPU, host × NIC, host) and metric name, on Unix ns,
//! sorted; cumulative counters become rates per second.
//!
//! **What each name is** ([`signal_of`]): the DCGM field names are dcgm-exporter's (its
//! `etc/default-counters.csv` and `dcp-metrics-included.csv`) and DCGM's field identifiers
//! (docs.nvidia.com/datacenter/dcgm, "Field Identifiers"); the NIC names are node-exporter's
//! (`netdev`, `infiniband`, `ethtool`, `netstat` collectors). The `DCGM_FI_PROF_*_BYTES` fields
//! are rates already (bytes per second over DCGM's sample period) though dcgm-exporter types
//! some as `counter`: they are kept as values. Pause-frame and retransmit counts are
//! cumulative whatever their `# TYPE` (ethtool and netstat counters only grow).
//!
//! **Counter → rate**: between consecutive samples (t₀, v₀), (t₁, v₁) of a cumulative series,
//! rate = (v₁ − v₀) / (t₁ − t₀) at t₁, describing (t₀, t₁]; a decrease is a counter reset and
//! gives no rate (as Prometheus' `rate()` would extrapolate; here it is only skipped).

use serde::{Deserialize, Serialize};

use super::{DiagKind, Diagnostic, Read};

crate::named_enum! {
    /// What a series measures, whatever its source's name for it.
    pub enum Signal {
        /// `DCGM_FI_PROF_SM_ACTIVE` (1002): share of cycles an SM has a warp, 0–1.
        SmActive => "sm_active",
        /// `DCGM_FI_PROF_PIPE_TENSOR_ACTIVE` (1004), 0–1.
        TensorActive => "tensor_active",
        /// `DCGM_FI_PROF_DRAM_ACTIVE` (1005), 0–1.
        DramActive => "dram_active",
        /// `DCGM_FI_DEV_GPU_UTIL` (203), percent.
        GpuUtil => "gpu_util_pct",
        /// `DCGM_FI_DEV_SM_CLOCK` (100), MHz.
        SmClock => "sm_clock_mhz",
        /// `DCGM_FI_DEV_POWER_USAGE` (155), W.
        Power => "power_w",
        /// `DCGM_FI_DEV_CLOCK_THROTTLE_REASONS` / `DCGM_FI_DEV_CLOCKS_EVENT_REASONS` (112): a
        /// bit mask ([`super::rules::REASONS`]).
        ClockReasons => "clock_event_reasons",
        /// `DCGM_FI_DEV_XID_ERRORS` (230): the last XID error's number (a gauge).
        Xid => "xid",
        /// `DCGM_FI_PROF_NVLINK_TX_BYTES` / `_RX_BYTES` (1011 / 1012), bytes per second.
        NvlinkTx => "nvlink_tx_bytes_per_s",
        NvlinkRx => "nvlink_rx_bytes_per_s",
        /// `node_network_transmit_bytes_total`, `node_infiniband_port_data_transmitted_bytes_total`.
        NicTx => "nic_tx_bytes_per_s",
        /// `node_network_receive_bytes_total`, `node_infiniband_port_data_received_bytes_total`.
        NicRx => "nic_rx_bytes_per_s",
        /// `node_network_speed_bytes`, `node_infiniband_rate_bytes_per_second`.
        NicLineRate => "nic_line_rate_bytes_per_s",
        /// Any counter named `*pause*` or `*pfc*` (ethtool's `rx_pause_ctrl_phy`,
        /// `rx_prio3_pause`, ...), frames per second.
        Pause => "pause_frames_per_s",
        /// Any counter named `*retrans*` (`node_netstat_Tcp_RetransSegs`, RDMA counters).
        Retransmits => "retransmits_per_s",
        /// Anything else, kept under its own name.
        Other => "other",
    }
}

crate::named_enum! {
    /// Which kind of thing a series is about.
    pub enum EntityKind {
        Gpu => "gpu",
        Nic => "nic",
        Node => "node",
    }
}

crate::named_enum! {
    /// A value as read, or a rate computed from a cumulative counter.
    pub enum ValueKind {
        Gauge => "gauge",
        Rate => "rate",
    }
}

/// Host × GPU, host × NIC, or host.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct Entity {
    /// As the metrics name it (`Hostname`, else `hostname` / `nodename` / `node` / `host`,
    /// else `instance` without its port); empty when none does.
    pub host: String,
    pub kind: EntityKind,
    /// The `gpu` label (the NVML index on its host).
    pub gpu: Option<u32>,
    pub uuid: Option<String>,
    /// The NIC: `device` (netdev, ethtool), `device/port` (infiniband).
    pub nic: Option<String>,
}

impl Entity {
    /// `node00 GPU 3`, `node01 ib0`, `node01`.
    pub fn label(&self) -> String {
        let host = if self.host.is_empty() { "(no host)" } else { &self.host };
        match (self.kind, self.gpu, &self.nic) {
            (EntityKind::Gpu, Some(g), _) => format!("{host} GPU {g}"),
            (EntityKind::Nic, _, Some(n)) => format!("{host} {n}"),
            _ => host.to_string(),
        }
    }
}

/// One series on Unix ns, sorted by time.
#[derive(Debug, Clone, PartialEq)]
pub struct Series {
    pub entity: Entity,
    pub signal: Signal,
    /// The source's metric name (a dmon column is named by its field).
    pub name: String,
    pub kind: ValueKind,
    pub ts_ns: Vec<i64>,
    pub value: Vec<f64>,
    /// Median spacing of the samples, ns.
    pub interval_ns: Option<i64>,
}

/// Signal and whether the value is cumulative (to become a rate), from the name and `# TYPE`.
pub fn signal_of(name: &str, declared: Option<&str>) -> (Signal, bool) {
    let lower = name.to_ascii_lowercase();
    let counter = declared == Some("counter") || name.ends_with("_total");
    match name {
        "DCGM_FI_PROF_SM_ACTIVE" => (Signal::SmActive, false),
        "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE" => (Signal::TensorActive, false),
        "DCGM_FI_PROF_DRAM_ACTIVE" => (Signal::DramActive, false),
        "DCGM_FI_DEV_GPU_UTIL" => (Signal::GpuUtil, false),
        "DCGM_FI_DEV_SM_CLOCK" => (Signal::SmClock, false),
        "DCGM_FI_DEV_POWER_USAGE" => (Signal::Power, false),
        "DCGM_FI_DEV_CLOCK_THROTTLE_REASONS" | "DCGM_FI_DEV_CLOCKS_EVENT_REASONS" => {
            (Signal::ClockReasons, false)
        }
        "DCGM_FI_DEV_XID_ERRORS" => (Signal::Xid, false),
        "DCGM_FI_PROF_NVLINK_TX_BYTES" => (Signal::NvlinkTx, false),
        "DCGM_FI_PROF_NVLINK_RX_BYTES" => (Signal::NvlinkRx, false),
        "node_network_transmit_bytes_total" | "node_infiniband_port_data_transmitted_bytes_total" => {
            (Signal::NicTx, true)
        }
        "node_network_receive_bytes_total" | "node_infiniband_port_data_received_bytes_total" => {
            (Signal::NicRx, true)
        }
        "node_network_speed_bytes" | "node_infiniband_rate_bytes_per_second" => (Signal::NicLineRate, false),
        _ if lower.contains("pause") || lower.contains("pfc") => (Signal::Pause, true),
        _ if lower.contains("retrans") => (Signal::Retransmits, true),
        _ => (Signal::Other, counter),
    }
}

fn label<'a>(labels: &'a [(String, String)], names: &[&str]) -> Option<&'a str> {
    names.iter().find_map(|n| labels.iter().find(|(k, _)| k == n).map(|(_, v)| v.as_str()))
}

/// An `instance` label without its port (`10.0.0.5:9100` → `10.0.0.5`).
fn without_port(i: &str) -> &str {
    match i.rsplit_once(':') {
        Some((h, port)) if port.bytes().all(|b| b.is_ascii_digit()) && !h.is_empty() => h,
        _ => i,
    }
}

/// `instance` (port dropped) → node name, from node-exporter's `node_uname_info{instance,
/// nodename}` in any of the reads: Prometheus' `instance` is often an address, the name the
/// traces and DCGM give is the node's.
pub fn aliases(reads: &[&Read]) -> Vec<(String, String)> {
    let mut out: Vec<(String, String)> = reads
        .iter()
        .flat_map(|r| r.keys.iter())
        .filter(|k| k.name == "node_uname_info")
        .filter_map(|k| {
            Some((
                without_port(label(&k.labels, &["instance"])?).to_string(),
                label(&k.labels, &["nodename"])?.to_string(),
            ))
        })
        .collect();
    out.sort();
    out.dedup();
    out
}

/// The entity a sample is about; `aliases` name the hosts `instance` labels give as addresses.
pub fn entity_of(
    name: &str,
    signal: Signal,
    labels: &[(String, String)],
    aliases: &[(String, String)],
) -> Entity {
    let host = label(labels, &["Hostname", "hostname", "nodename", "node", "host"])
        .map(str::to_string)
        .or_else(|| {
            label(labels, &["instance"]).map(|i| {
                let i = without_port(i);
                aliases.iter().find(|(a, _)| a == i).map_or(i, |(_, n)| n.as_str()).to_string()
            })
        })
        .unwrap_or_default();
    let gpu = label(labels, &["gpu"]).and_then(|g| g.trim().parse::<u32>().ok());
    let uuid = label(labels, &["UUID", "uuid"]).map(str::to_string);
    let dcgm = name.starts_with("DCGM_");
    let nic = if dcgm {
        None
    } else {
        label(labels, &["device", "interface"]).map(|d| match label(labels, &["port"]) {
            Some(p) if name.starts_with("node_infiniband") => format!("{d}/{p}"),
            _ => d.to_string(),
        })
    };
    let kind = match signal {
        Signal::NicTx | Signal::NicRx | Signal::NicLineRate => EntityKind::Nic,
        _ if dcgm || gpu.is_some() => EntityKind::Gpu,
        _ if nic.is_some() => EntityKind::Nic,
        _ => EntityKind::Node,
    };
    let keep_gpu = kind == EntityKind::Gpu;
    Entity {
        host,
        kind,
        gpu: gpu.filter(|_| keep_gpu),
        uuid: uuid.filter(|_| keep_gpu),
        nic: nic.filter(|_| kind == EntityKind::Nic),
    }
}

/// Median of sorted spacings.
fn median_spacing(ts: &[i64]) -> Option<i64> {
    let mut d: Vec<i64> = ts.windows(2).map(|w| w[1].saturating_sub(w[0])).filter(|d| *d > 0).collect();
    d.sort_unstable();
    d.get(d.len().checked_sub(1)? / 2).copied()
}

/// Forms the series of one file's samples.
pub fn build(file: &str, r: &Read, aliases: &[(String, String)]) -> (Vec<Series>, Vec<Diagnostic>) {
    // Each key's entity once; then the samples into their series.
    let entities: Vec<Entity> = r
        .keys
        .iter()
        .map(|k| {
            let declared = r.types.iter().find(|(n, _)| *n == k.name).map(|(_, t)| t.as_str());
            entity_of(&k.name, signal_of(&k.name, declared).0, &k.labels, aliases)
        })
        .collect();
    let mut groups: std::collections::BTreeMap<(&Entity, &str), Vec<(i64, f64)>> = Default::default();
    for i in 0..r.len() {
        let Some(t) = r.ts_ns[i] else { continue };
        let k = r.key[i] as usize;
        let (Some(e), Some(key)) = (entities.get(k), r.keys.get(k)) else { continue };
        groups.entry((e, key.name.as_str())).or_default().push((t, r.value[i]));
    }
    let mut resets = 0u64;
    let mut out = Vec::new();
    for ((entity, name), mut pts) in groups {
        pts.sort_by_key(|p| p.0);
        // Several samples at one time (a scrape read twice): the last one read.
        pts.dedup_by(|b, a| {
            if a.0 == b.0 {
                a.1 = b.1;
                true
            } else {
                false
            }
        });
        let declared = r.types.iter().find(|(n, _)| n == name).map(|(_, k)| k.as_str());
        let (signal, cumulative) = signal_of(name, declared);
        let (ts, value, kind) = if cumulative {
            let mut ts = Vec::new();
            let mut v = Vec::new();
            for w in pts.windows(2) {
                let (dt, dv) = (w[1].0.saturating_sub(w[0].0), w[1].1 - w[0].1);
                if dv < 0.0 {
                    resets += 1;
                    continue;
                }
                let rate = dv / (dt as f64 / 1e9);
                if rate.is_finite() {
                    ts.push(w[1].0);
                    v.push(rate);
                }
            }
            (ts, v, ValueKind::Rate)
        } else {
            (pts.iter().map(|p| p.0).collect(), pts.iter().map(|p| p.1).collect(), ValueKind::Gauge)
        };
        let interval_ns = median_spacing(&pts.iter().map(|p| p.0).collect::<Vec<_>>());
        if ts.is_empty() {
            continue;
        }
        out.push(Series {
            entity: entity.clone(),
            signal,
            name: name.to_string(),
            kind,
            ts_ns: ts,
            value,
            interval_ns,
        });
    }
    let mut notes = Vec::new();
    if resets > 0 {
        notes.push(Diagnostic {
            file: file.to_string(),
            kind: DiagKind::Note,
            count: resets,
            first_offset: None,
            detail: "a counter went down (a reset): no rate over that interval".into(),
        });
    }
    (out, notes)
}

impl Series {
    /// The part of (lo, hi] sample `i` describes: (previous sample, this one], the first one
    /// the series' interval back.
    fn span(&self, i: usize) -> (i64, i64) {
        let t = self.ts_ns[i];
        let back = if i > 0 { t.saturating_sub(self.ts_ns[i - 1]) } else { self.interval_ns.unwrap_or(0) };
        (t.saturating_sub(back), t)
    }

    /// Mean over [lo, hi], each sample weighted by how much of the window the interval it
    /// describes covers; a window inside one sample's interval gets that sample. `None` when no
    /// sample describes any of it. Also the covered ns.
    pub fn mean_over(&self, lo: i64, hi: i64) -> Option<(f64, i64)> {
        let mut w = 0i64;
        let mut sum = 0.0;
        for i in 0..self.ts_ns.len() {
            let (a, b) = self.span(i);
            let ov = b.min(hi).saturating_sub(a.max(lo));
            // A window of zero length inside a sample's interval still reads that sample.
            let ov = if ov == 0 && a < hi && b >= lo { 1 } else { ov };
            if ov > 0 {
                w = w.saturating_add(ov);
                sum += self.value[i] * ov as f64;
            }
        }
        (w > 0).then(|| (sum / w as f64, w))
    }

    /// Values of the samples that describe part of [lo, hi].
    pub fn values_over(&self, lo: i64, hi: i64) -> impl Iterator<Item = f64> + '_ {
        (0..self.ts_ns.len())
            .filter(move |&i| {
                let (a, b) = self.span(i);
                b >= lo && a < hi
            })
            .map(|i| self.value[i])
    }

    /// Mean of the samples entirely outside every window in `windows` (`None` if there are none).
    pub fn mean_outside(&self, windows: &[(i64, i64)]) -> Option<f64> {
        let v: Vec<f64> = (0..self.ts_ns.len())
            .filter(|&i| {
                let (a, b) = self.span(i);
                windows.iter().all(|&(lo, hi)| b < lo || a >= hi)
            })
            .map(|i| self.value[i])
            .collect();
        (!v.is_empty()).then(|| v.iter().sum::<f64>() / v.len() as f64)
    }
}

/// A series in a few numbers.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct SeriesSummary {
    pub entity: Entity,
    pub signal: Signal,
    pub name: String,
    pub kind: ValueKind,
    pub samples: usize,
    pub interval_ns: Option<i64>,
    pub min: f64,
    pub mean: f64,
    pub max: f64,
    /// The mean over the job's steps on this host (joined), `None` without a join.
    pub steps_mean: Option<f64>,
}

/// Summarizes `s`, and its mean over the job's steps on its host when joined.
pub fn summary(s: &Series, j: Option<&super::join::Joined>) -> SeriesSummary {
    let n = s.value.len();
    let (mut lo, mut hi, mut sum) = (f64::INFINITY, f64::NEG_INFINITY, 0.0);
    for &v in &s.value {
        lo = lo.min(v);
        hi = hi.max(v);
        sum += v;
    }
    let steps_mean =
        j.and_then(|j| j.host_window(&s.entity.host)).and_then(|(a, b)| s.mean_over(a, b)).map(|m| m.0);
    SeriesSummary {
        entity: s.entity.clone(),
        signal: s.signal,
        name: s.name.clone(),
        kind: s.kind,
        samples: n,
        interval_ns: s.interval_ns,
        min: if n > 0 { lo } else { 0.0 },
        mean: if n > 0 { sum / n as f64 } else { 0.0 },
        max: if n > 0 { hi } else { 0.0 },
        steps_mean,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ser(ts: &[i64], v: &[f64]) -> Series {
        Series {
            entity: Entity { host: "h".into(), kind: EntityKind::Node, gpu: None, uuid: None, nic: None },
            signal: Signal::Other,
            name: "x".into(),
            kind: ValueKind::Gauge,
            ts_ns: ts.to_vec(),
            value: v.to_vec(),
            interval_ns: median_spacing(ts),
        }
    }

    #[test]
    fn a_window_is_weighted_by_what_each_sample_describes() {
        let s = ser(&[100, 200, 300], &[1.0, 3.0, 5.0]);
        // (100, 200] holds 3.0, (200, 300] holds 5.0: [150, 250] is half and half.
        assert_eq!(s.mean_over(150, 250), Some((4.0, 100)));
        // A window inside one interval gets that sample.
        assert_eq!(s.mean_over(210, 220).map(|m| m.0), Some(5.0));
        assert_eq!(s.mean_over(400, 500), None);
    }

    #[test]
    fn counters_become_rates_and_resets_are_said() {
        let mut r = Read::default();
        let k = r.add_key(super::super::SeriesKey {
            name: "node_network_transmit_bytes_total".into(),
            labels: vec![("device".into(), "ib0".into()), ("instance".into(), "node-1:9100".into())],
        });
        for (t, v) in [(0, 0.0), (1_000_000_000, 100.0), (2_000_000_000, 300.0), (3_000_000_000, 5.0)] {
            r.push(k, Some(t), v);
        }
        let (s, notes) = build("f", &r, &[]);
        assert_eq!(s.len(), 1);
        assert_eq!((s[0].signal, s[0].kind), (Signal::NicTx, ValueKind::Rate));
        assert_eq!(s[0].value, [100.0, 200.0]);
        assert_eq!(s[0].entity.label(), "node-1 ib0");
        assert_eq!(notes.len(), 1);
        // An address in `instance` named by node_uname_info.
        let mut u = Read::default();
        u.add_key(super::super::SeriesKey {
            name: "node_uname_info".into(),
            labels: vec![("instance".into(), "node-1:9100".into()), ("nodename".into(), "gpu-node-1".into())],
        });
        let (s, _) = build("f", &r, &aliases(&[&u]));
        assert_eq!(s[0].entity.host, "gpu-node-1");
    }
}
