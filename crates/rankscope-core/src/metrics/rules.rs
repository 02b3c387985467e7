//! The findings only the metrics and the traces together show. Each rule reads the joined
//! figures ([`super::join`]) and the series over the job's step windows; none fires without a
//! join. They are kept in this report's own typed list ([`MetricsFindingId`]) rather than the
//! trace findings' `FindingId`: they are judged on another input, after the analysis, and a
//! new `FindingId` would change every analysis snapshot's vocabulary.
//!
//! - **`comm_bound`** — on a host, the ranks' GPUs' mean `SM_ACTIVE` over the steps is below
//!   [`SM_LOW`] while one of its NICs moves at least [`NIC_SATURATED`] of its line rate
//!   (`node_network_speed_bytes` / `node_infiniband_rate_bytes_per_second`) in either direction.
//!   Without a line rate, saturation is not judged.
//! - **`throttled_gpu`** — a job GPU's SM clock over the steps is below [`CLOCK_DROP`] of the
//!   job GPUs' median, or its clock event reasons hold a throttle bit ([`THROTTLE_BITS`]) that
//!   most of its peers' do not; the rank's compute per step in the trace against the peers'
//!   median says whether the trace saw it slow.
//! - **`pfc_storm`** — a NIC (or host) of the job sends or receives at least [`PAUSE_STORM`]
//!   pause frames per second over the steps. The rate outside the profiled steps is evidence,
//!   not a condition: the job trains before and after its profile, so a storm that lasts the
//!   whole run is as much a storm (the evidence says whether it rose during the steps).
//! - **`idle_nic`** — on a job of two or more hosts, a NIC name that carries at least
//!   [`NIC_BUSY`] on the other hosts carries less than [`NIC_IDLE`] of their median on one:
//!   its traffic took another path (the busiest other NIC of that host is named).
//! - **`xid_error`** — a job GPU reported an XID (`DCGM_FI_DEV_XID_ERRORS` ≠ 0) in its window.

use serde::{Deserialize, Serialize};

use super::join::Joined;
use super::series::{EntityKind, Series, Signal};

/// SM active (0–1) below which the GPUs are idle for the most part: "SM < 20% with the NIC
/// pegged = communication bound" (shared/DOMAIN.md, "How practitioners diagnose").
pub const SM_LOW: f64 = 0.20;
/// Share of the line rate a saturated NIC moves (the ~80% of peak a large transfer reaches on a
/// healthy fabric, shared/DOMAIN.md "Collective cost model").
pub const NIC_SATURATED: f64 = 0.80;
/// Share of the peers' median SM clock below which a GPU is throttled.
pub const CLOCK_DROP: f64 = 0.90;
/// Pause frames per second that make a storm.
pub const PAUSE_STORM: f64 = 1000.0;
/// How many times the rate outside the steps makes a storm "rising during the steps".
pub const PAUSE_RISE: f64 = 10.0;
/// Bytes per second a busy NIC moves; and the share of it an idle one stays under.
pub const NIC_BUSY: f64 = 1e6;
pub const NIC_IDLE: f64 = 0.01;

/// The clock event reason bits (DCGM's `DCGM_CLOCKS_EVENT_REASON_*`, NVML's
/// `nvmlClocksEventReason*`): bit, name, whether it slows a busy GPU.
pub const REASONS: &[(u64, &str, bool)] = &[
    (0x1, "gpu_idle", false),
    (0x2, "clocks_setting", false),
    (0x4, "sw_power_cap", true),
    (0x8, "hw_slowdown", true),
    (0x10, "sync_boost", false),
    (0x20, "sw_thermal", true),
    (0x40, "hw_thermal", true),
    (0x80, "hw_power_brake", true),
    (0x100, "display_clocks", false),
];

/// The bits of [`REASONS`] that throttle.
pub const THROTTLE_BITS: u64 = 0x4 | 0x8 | 0x20 | 0x40 | 0x80;

/// The names of the bits set in `mask`.
pub fn reason_names(mask: u64) -> Vec<&'static str> {
    REASONS.iter().filter(|(b, _, _)| mask & b != 0).map(|(_, n, _)| *n).collect()
}

crate::named_enum! {
    /// The findings of the join.
    pub enum MetricsFindingId {
        CommBound => "comm_bound",
        ThrottledGpu => "throttled_gpu",
        PfcStorm => "pfc_storm",
        IdleNic => "idle_nic",
        XidError => "xid_error",
    }
}

/// One finding with its evidence.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MetricsFinding {
    pub id: MetricsFindingId,
    pub title: String,
    pub hosts: Vec<String>,
    /// `host GPU n` / `host nic`.
    pub entities: Vec<String>,
    pub ranks: Vec<u32>,
    /// The window on the job's aligned clock (Unix ns of the reference rank's clock).
    pub aligned_start_ns: i64,
    pub aligned_end_ns: i64,
    pub evidence: Vec<String>,
}

fn median(mut v: Vec<f64>) -> Option<f64> {
    v.sort_by(f64::total_cmp);
    v.get(v.len().checked_sub(1)? / 2).copied()
}

fn gbs(bps: f64) -> String {
    format!("{:.1} GB/s", bps / 1e9)
}

/// Mean over the window of the summed series of `sig` on `entity` (by label).
fn sum_over(all: &[Series], pick: &dyn Fn(&Series) -> bool, lo: i64, hi: i64) -> Option<f64> {
    let v: Vec<f64> =
        all.iter().filter(|s| pick(s)).filter_map(|s| s.mean_over(lo, hi).map(|m| m.0)).collect();
    (!v.is_empty()).then(|| v.iter().sum())
}

/// Every finding, sorted by id then first entity.
pub fn findings(all: &[Series], j: &Joined) -> Vec<MetricsFinding> {
    let mut out = Vec::new();
    let window = |ranks: &[u32]| -> (i64, i64) {
        let rs = j.ranks.iter().filter(|r| ranks.contains(&r.rank));
        let lo = rs.clone().map(|r| r.aligned_start_ns).min().unwrap_or(0);
        (lo, rs.map(|r| r.aligned_end_ns).max().unwrap_or(0))
    };
    let nics_of = |host: &str| -> Vec<String> {
        let mut v: Vec<String> = all
            .iter()
            .filter(|s| s.entity.kind == EntityKind::Nic && s.entity.host == host)
            .filter_map(|s| s.entity.nic.clone())
            .collect();
        v.sort();
        v.dedup();
        v
    };
    let nic_rate = |host: &str, nic: &str, sig: Signal, lo: i64, hi: i64| {
        sum_over(
            all,
            &|s| s.signal == sig && s.entity.host == host && s.entity.nic.as_deref() == Some(nic),
            lo,
            hi,
        )
    };

    // comm_bound
    for h in &j.hosts {
        let rs: Vec<_> = j.ranks.iter().filter(|r| r.host == h.host).collect();
        let Some(sm) = median(rs.iter().filter_map(|r| r.sm_active).collect()) else { continue };
        if sm >= SM_LOW {
            continue;
        }
        for nic in nics_of(&h.host) {
            let Some(line) =
                nic_rate(&h.host, &nic, Signal::NicLineRate, h.start_ns, h.end_ns).filter(|l| *l > 0.0)
            else {
                continue;
            };
            let tx = nic_rate(&h.host, &nic, Signal::NicTx, h.start_ns, h.end_ns).unwrap_or(0.0);
            let rx = nic_rate(&h.host, &nic, Signal::NicRx, h.start_ns, h.end_ns).unwrap_or(0.0);
            let (dir, rate) = if tx >= rx { ("tx", tx) } else { ("rx", rx) };
            if rate < NIC_SATURATED * line {
                continue;
            }
            let comm = rs.iter().map(|r| r.comm_share).sum::<f64>() / rs.len().max(1) as f64;
            let (lo, hi) = window(&h.ranks);
            out.push(MetricsFinding {
                id: MetricsFindingId::CommBound,
                title: format!("{}: SMs idle while {nic} runs at its line rate", h.host),
                hosts: vec![h.host.clone()],
                entities: vec![format!("{} {nic}", h.host)],
                ranks: h.ranks.clone(),
                aligned_start_ns: lo,
                aligned_end_ns: hi,
                evidence: vec![
                    format!(
                        "SM active {:.2} (median of {} GPUs, below {SM_LOW:.2}) during the steps",
                        sm,
                        rs.len()
                    ),
                    format!(
                        "{nic} {dir} {} of {} line rate ({:.0}%)",
                        gbs(rate),
                        gbs(line),
                        100.0 * rate / line
                    ),
                    format!("the trace: communication {:.0}% of the steps on these ranks", 100.0 * comm),
                ],
            });
        }
    }

    // throttled_gpu
    let clocks: Vec<f64> = j.ranks.iter().filter_map(|r| r.sm_clock_mhz).collect();
    let throttling = |r: &super::join::RankJoin| r.clock_reasons.is_some_and(|m| m & THROTTLE_BITS != 0);
    let throttled_peers = j.ranks.iter().filter(|r| throttling(r)).count();
    if j.ranks.len() >= 3 {
        let med_clock = median(clocks);
        let med_power = median(j.ranks.iter().filter_map(|r| r.power_w).collect());
        let med_compute = median(j.ranks.iter().map(|r| r.compute_ns_per_step as f64).collect());
        for r in &j.ranks {
            let low = matches!((r.sm_clock_mhz, med_clock), (Some(c), Some(m)) if c < CLOCK_DROP * m);
            let flagged = throttling(r) && throttled_peers * 2 < j.ranks.len();
            if !low && !flagged {
                continue;
            }
            let mut ev = Vec::new();
            if let (Some(c), Some(m)) = (r.sm_clock_mhz, med_clock) {
                ev.push(format!(
                    "SM clock {c:.0} MHz against the job GPUs' median {m:.0} MHz ({:+.0}%)",
                    100.0 * (c / m - 1.0)
                ));
            }
            if let (Some(p), Some(m)) = (r.power_w, med_power) {
                ev.push(format!("power {p:.0} W against a median {m:.0} W"));
            }
            if let Some(mask) = r.clock_reasons {
                ev.push(format!("clock event reasons 0x{mask:x}: {}", reason_names(mask).join(", ")));
            }
            if let Some(m) = med_compute.filter(|m| *m > 0.0) {
                let d = r.compute_ns_per_step as f64 / m - 1.0;
                ev.push(format!(
                    "the trace: rank {} computes {:.1} ms per step against the median {:.1} ms ({:+.1}%){}",
                    r.rank,
                    r.compute_ns_per_step as f64 / 1e6,
                    m / 1e6,
                    100.0 * d,
                    if d >= 0.03 {
                        ": slow in the trace too"
                    } else {
                        ": not slower in the trace over these steps"
                    }
                ));
            }
            out.push(MetricsFinding {
                id: MetricsFindingId::ThrottledGpu,
                title: format!("{} GPU {} (rank {}) runs throttled", r.host, r.gpu, r.rank),
                hosts: vec![r.host.clone()],
                entities: vec![format!("{} GPU {}", r.host, r.gpu)],
                ranks: vec![r.rank],
                aligned_start_ns: r.aligned_start_ns,
                aligned_end_ns: r.aligned_end_ns,
                evidence: ev,
            });
        }
    }

    // pfc_storm
    for h in &j.hosts {
        let mut targets: Vec<Option<String>> = nics_of(&h.host).into_iter().map(Some).collect();
        targets.push(None);
        for nic in targets {
            let pick = |s: &Series| {
                s.signal == Signal::Pause
                    && s.entity.host == h.host
                    && s.entity.nic == nic
                    && s.entity.kind != EntityKind::Gpu
            };
            let Some(rate) = sum_over(all, &pick, h.start_ns, h.end_ns) else { continue };
            let outside: Vec<f64> = all
                .iter()
                .filter(|s| pick(s))
                .filter_map(|s| s.mean_outside(&[(h.start_ns, h.end_ns)]))
                .collect();
            let before = (!outside.is_empty()).then(|| outside.iter().sum::<f64>());
            if rate < PAUSE_STORM {
                continue;
            }
            let names: Vec<String> = all.iter().filter(|s| pick(s)).map(|s| s.name.clone()).collect();
            let what = nic.clone().unwrap_or_else(|| "host".to_string());
            let (lo, hi) = window(&h.ranks);
            out.push(MetricsFinding {
                id: MetricsFindingId::PfcStorm,
                title: format!("{} {what}: a pause-frame storm during the steps", h.host),
                hosts: vec![h.host.clone()],
                entities: vec![format!("{} {what}", h.host)],
                ranks: h.ranks.clone(),
                aligned_start_ns: lo,
                aligned_end_ns: hi,
                evidence: vec![
                    format!("{rate:.0} pause frames/s during the steps ({})", names.join(" + ")),
                    match before {
                        Some(b) if rate >= PAUSE_RISE * b.max(1.0) => {
                            format!("{b:.0} frames/s outside the profiled steps: it rose during them")
                        }
                        Some(b) => {
                            format!("{b:.0} frames/s outside the profiled steps: as high before and after")
                        }
                        None => "no sample outside the steps to compare with".to_string(),
                    },
                ],
            });
        }
    }

    // idle_nic
    if j.hosts.len() >= 2 {
        let mut names: Vec<String> = j.hosts.iter().flat_map(|h| nics_of(&h.host)).collect();
        names.sort();
        names.dedup();
        names.retain(|n| {
            !(n == "lo" || n.starts_with("docker") || n.starts_with("veth") || n.starts_with("virbr"))
        });
        let traffic = |host: &str, nic: &str, lo: i64, hi: i64| -> Option<f64> {
            let tx = nic_rate(host, nic, Signal::NicTx, lo, hi);
            let rx = nic_rate(host, nic, Signal::NicRx, lo, hi);
            (tx.is_some() || rx.is_some()).then(|| tx.unwrap_or(0.0) + rx.unwrap_or(0.0))
        };
        for n in &names {
            let per: Vec<(&super::join::HostWindow, f64)> = j
                .hosts
                .iter()
                .filter_map(|h| Some((h, traffic(&h.host, n, h.start_ns, h.end_ns)?)))
                .collect();
            if per.len() < 2 {
                continue;
            }
            for (h, t) in &per {
                let others = median(per.iter().filter(|(o, _)| o.host != h.host).map(|(_, t)| *t).collect());
                let Some(m) = others.filter(|m| *m >= NIC_BUSY) else { continue };
                if *t >= NIC_IDLE * m {
                    continue;
                }
                let other = nics_of(&h.host)
                    .into_iter()
                    .filter(|o| o != n)
                    .filter_map(|o| Some((traffic(&h.host, &o, h.start_ns, h.end_ns)?, o)))
                    .max_by(|a, b| a.0.total_cmp(&b.0));
                let (lo, hi) = window(&h.ranks);
                out.push(MetricsFinding {
                    id: MetricsFindingId::IdleNic,
                    title: format!("{} {n} carried nothing during the steps", h.host),
                    hosts: vec![h.host.clone()],
                    entities: vec![format!("{} {n}", h.host)],
                    ranks: h.ranks.clone(),
                    aligned_start_ns: lo,
                    aligned_end_ns: hi,
                    evidence: vec![
                        format!(
                            "{n}: {} tx + rx during the steps, against a median {} on the other hosts",
                            gbs(*t),
                            gbs(m)
                        ),
                        match other {
                            Some((r, o)) => format!("the traffic went elsewhere: {o} carried {}", gbs(r)),
                            None => "no other NIC of the host is in the metrics".to_string(),
                        },
                    ],
                });
            }
        }
    }

    // xid_error
    for r in &j.ranks {
        let mut xids: Vec<u64> = all
            .iter()
            .filter(|s| s.signal == Signal::Xid && s.entity.host == r.host && s.entity.gpu == Some(r.gpu))
            .flat_map(|s| s.values_over(r.start_ns, r.end_ns))
            .filter(|v| *v >= 1.0 && *v < 1e9)
            .map(|v| v as u64)
            .collect();
        xids.sort_unstable();
        xids.dedup();
        if xids.is_empty() {
            continue;
        }
        out.push(MetricsFinding {
            id: MetricsFindingId::XidError,
            title: format!(
                "{} GPU {} (rank {}) reported XID {}",
                r.host,
                r.gpu,
                r.rank,
                xids.iter().map(u64::to_string).collect::<Vec<_>>().join(", ")
            ),
            hosts: vec![r.host.clone()],
            entities: vec![format!("{} GPU {}", r.host, r.gpu)],
            ranks: vec![r.rank],
            aligned_start_ns: r.aligned_start_ns,
            aligned_end_ns: r.aligned_end_ns,
            evidence: vec![format!(
                "DCGM_FI_DEV_XID_ERRORS = {} during the rank's steps",
                xids.iter().map(u64::to_string).collect::<Vec<_>>().join(", ")
            )],
        });
    }
    out.sort_by(|a, b| (a.id, &a.entities, &a.ranks).cmp(&(b.id, &b.entities, &b.ranks)));
    out
}
