//! The join: each rank on a host and GPU of the metrics, each sample on the job's clock.
//!
//! **Clock.** A Kineto trace's times are `baseTimeNanoseconds + ts`: Unix ns on its host's
//! clock. dcgm-exporter and node-exporter samples with timestamps, a scrape loop's `date` and a
//! placed dmon table are Unix ns on the host that stamped them; a `query_range` export carries
//! the Prometheus server's scrape times (NTP apart from the hosts by ms at most, far below any
//! sample interval). So a rank's step windows are compared with its host's samples on that
//! host's clock as they are, and shown on the job's aligned clock as `t − offset_ns`, the
//! rank's alignment offset (`analysis.alignment`).
//!
//! **Mapping.** A rank's host is the trace's `host_name` (trimmed, compared case-insensitively,
//! domain ignored); its GPU is the device its kernels ran on (`analysis.gpu_idle`, the device
//! with most kernels). When the traces name no host and the GPU metrics hold exactly one, every
//! rank is on it (`sole_host`, said); when the GPU metrics name no host (a `dcgmi dmon` table
//! given none) and every trace names the same one, the job runs on one host and the metrics'
//! GPUs are its own (`one_host`, said). Anything else is a diagnostic (`unmapped`), never a
//! guess.
//!
//! **Residual.** A sample describes the interval since the previous one; a window's figure is
//! the mean of the samples weighted by how much of the window each describes
//! ([`Series::mean_over`]). When the sample interval exceeds the window (a 15 s scrape, a 0.5 s
//! profile), the figure is the sample's average over its whole interval: `coarse` is set and
//! the interval and window are both given.

use serde::{Deserialize, Serialize};

use super::series::{EntityKind, Series, Signal};
use super::{DiagKind, Diagnostic};

/// One profiled step of a rank, on its own clock (Unix ns).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StepSpan {
    pub step: u32,
    pub start_ns: i64,
    pub end_ns: i64,
    pub compute_ns: i64,
    pub comm_ns: i64,
}

/// What the join needs of one rank of the traces.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RankPlace {
    pub rank: u32,
    pub host: Option<String>,
    pub gpu: Option<u32>,
    /// Aligned time = rank time − offset.
    pub offset_ns: i64,
    pub align_residual_ns: i64,
    pub steps: Vec<StepSpan>,
}

crate::named_enum! {
    /// How a rank was put on a host of the metrics.
    pub enum MapMethod {
        /// The trace's host name and GPU device, both found in the metrics.
        HostAndGpu => "host_and_gpu",
        /// The traces name no host; the GPU metrics hold one: every rank on it, by GPU device.
        SoleHost => "sole_host",
        /// The GPU metrics name no host (a `dcgmi dmon` table given none) and every trace
        /// names the same one: the job runs on one host, the metrics' GPUs are its GPUs.
        OneHost => "one_host",
    }
}

/// One rank joined with its GPU's series.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RankJoin {
    pub rank: u32,
    pub host: String,
    pub gpu: u32,
    pub uuid: Option<String>,
    pub method: MapMethod,
    /// The rank's steps, first start to last end, on its own clock (Unix ns).
    pub start_ns: i64,
    pub end_ns: i64,
    /// The same on the job's aligned clock.
    pub aligned_start_ns: i64,
    pub aligned_end_ns: i64,
    pub offset_ns: i64,
    pub align_residual_ns: i64,
    /// The GPU series' sample interval, and the median step, ns.
    pub interval_ns: Option<i64>,
    pub step_ns: i64,
    /// The interval exceeds the window: the figures are averages over more than the steps.
    pub coarse: bool,
    pub sm_active: Option<f64>,
    pub tensor_active: Option<f64>,
    pub sm_clock_mhz: Option<f64>,
    pub power_w: Option<f64>,
    /// OR of the clock event reason masks that describe the window.
    pub clock_reasons: Option<u64>,
    /// From the trace: median compute per step and communication's share of the steps.
    pub compute_ns_per_step: i64,
    pub comm_share: f64,
}

/// A host's window: the hull of its ranks' windows, on its own clock.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HostWindow {
    pub host: String,
    pub start_ns: i64,
    pub end_ns: i64,
    pub ranks: Vec<u32>,
}

/// The join's answer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Joined {
    /// How the clocks and ranks were joined, in words.
    pub method: String,
    /// How far a figure can be from the steps' own, in words: the sample interval against the
    /// steps and windows, and the alignment's residual.
    pub residual: String,
    pub ranks: Vec<RankJoin>,
    pub hosts: Vec<HostWindow>,
    pub diagnostics: Vec<Diagnostic>,
}

impl Joined {
    /// The window of `host` (as the metrics name it).
    pub fn host_window(&self, host: &str) -> Option<(i64, i64)> {
        self.hosts.iter().find(|h| h.host == host).map(|h| (h.start_ns, h.end_ns))
    }
}

/// A host name as a key: trimmed, lower-case, without its domain.
pub fn host_key(h: &str) -> String {
    let h = h.trim().to_ascii_lowercase();
    h.split('.').next().unwrap_or_default().to_string()
}

fn median(v: &mut [i64]) -> i64 {
    v.sort_unstable();
    v.get(v.len().saturating_sub(1) / 2).copied().unwrap_or(0)
}

/// The residual of the join, in words.
fn residual(ranks: &[RankJoin]) -> String {
    let ms = |ns: i64| format!("{:.1} ms", ns as f64 / 1e6);
    let Some(interval) = ranks.iter().filter_map(|r| r.interval_ns).max() else {
        return "no GPU series with two samples: the sample interval is unknown".to_string();
    };
    let step = median(&mut ranks.iter().map(|r| r.step_ns).collect::<Vec<_>>());
    let window = ranks.iter().map(|r| r.end_ns.saturating_sub(r.start_ns)).min().unwrap_or(0);
    let align = ranks.iter().map(|r| r.align_residual_ns).max().unwrap_or(0);
    let coarse = ranks.iter().filter(|r| r.coarse).count();
    let verdict = if coarse > 0 {
        format!("{coarse} ranks' windows are shorter than one sample: their figures average the sample's whole interval, not the steps")
    } else if interval > step {
        "each window holds a few samples; a single step's figure cannot be told apart".to_string()
    } else {
        "several samples per step".to_string()
    };
    format!(
        "samples every {} (the longest GPU series' median spacing) against steps of {} and windows of at least {}: {verdict}; the clock alignment's residual is {}",
        ms(interval),
        ms(step),
        ms(window),
        ms(align)
    )
}

/// Joins the series with the ranks.
pub fn join(all: &[Series], places: &[RankPlace]) -> Joined {
    let mut diags = Vec::new();
    let say = |diags: &mut Vec<Diagnostic>, kind: DiagKind, detail: String| {
        diags.push(Diagnostic { file: String::new(), kind, count: 1, first_offset: None, detail });
    };
    let mut gpu_hosts: Vec<&str> = all
        .iter()
        .filter(|s| s.entity.kind == EntityKind::Gpu && !s.entity.host.is_empty())
        .map(|s| s.entity.host.as_str())
        .collect();
    gpu_hosts.sort_unstable();
    gpu_hosts.dedup();
    let unnamed_gpus = all.iter().any(|s| s.entity.kind == EntityKind::Gpu && s.entity.host.is_empty());
    // One host named by every trace, and GPU metrics that name none: that host's.
    let traced_hosts: std::collections::BTreeSet<String> =
        places.iter().filter_map(|p| p.host.as_deref().map(host_key)).collect();
    let one_host = gpu_hosts.is_empty()
        && unnamed_gpus
        && traced_hosts.len() == 1
        && places.iter().all(|p| p.host.is_some());
    let mut ranks = Vec::new();
    for p in places {
        if p.steps.is_empty() {
            say(&mut diags, DiagKind::NoJoin, format!("rank {}: no profiled step to join with", p.rank));
            continue;
        }
        let (host, method) = match &p.host {
            Some(_) if one_host => (String::new(), MapMethod::OneHost),
            Some(h) => match gpu_hosts.iter().find(|m| host_key(m) == host_key(h)) {
                Some(m) => ((*m).to_string(), MapMethod::HostAndGpu),
                None => {
                    say(
                        &mut diags,
                        DiagKind::Unmapped,
                        format!(
                            "rank {}: its trace's host `{h}` is not among the GPU metrics' hosts ({})",
                            p.rank,
                            if gpu_hosts.is_empty() { "none".to_string() } else { gpu_hosts.join(", ") }
                        ),
                    );
                    continue;
                }
            },
            None if gpu_hosts.len() == 1 && !unnamed_gpus => (gpu_hosts[0].to_string(), MapMethod::SoleHost),
            None if gpu_hosts.is_empty() && unnamed_gpus => (String::new(), MapMethod::SoleHost),
            None => {
                say(&mut diags, DiagKind::Unmapped, format!(
                    "rank {}: its trace names no host and the GPU metrics hold {} hosts: which is its own cannot be told",
                    p.rank,
                    gpu_hosts.len()
                ));
                continue;
            }
        };
        let Some(gpu) = p.gpu else {
            say(&mut diags, DiagKind::Unmapped, format!("rank {}: its trace shows no GPU device", p.rank));
            continue;
        };
        let mine: Vec<&Series> = all
            .iter()
            .filter(|s| {
                s.entity.kind == EntityKind::Gpu && s.entity.host == host && s.entity.gpu == Some(gpu)
            })
            .collect();
        if mine.is_empty() {
            say(
                &mut diags,
                DiagKind::Unmapped,
                format!("rank {}: no series of GPU {gpu} on `{host}`", p.rank),
            );
            continue;
        }
        let start = p.steps.iter().map(|s| s.start_ns).min().unwrap_or(0);
        let end = p.steps.iter().map(|s| s.end_ns).max().unwrap_or(0);
        let mean = |sig: Signal| {
            mine.iter().filter(|s| s.signal == sig).find_map(|s| s.mean_over(start, end)).map(|m| m.0)
        };
        let reasons = mine
            .iter()
            .filter(|s| s.signal == Signal::ClockReasons)
            .flat_map(|s| s.values_over(start, end))
            .filter(|v| *v >= 0.0 && *v < 1e15)
            .fold(None, |acc: Option<u64>, v| Some(acc.unwrap_or(0) | v as u64));
        let interval_ns = mine.iter().filter_map(|s| s.interval_ns).max();
        let step_ns =
            median(&mut p.steps.iter().map(|s| s.end_ns.saturating_sub(s.start_ns)).collect::<Vec<_>>());
        let wall = p.steps.iter().fold(0i64, |a, s| a.saturating_add(s.end_ns.saturating_sub(s.start_ns)));
        let comm = p.steps.iter().fold(0i64, |a, s| a.saturating_add(s.comm_ns));
        if mean(Signal::SmActive).is_none() && mean(Signal::SmClock).is_none() {
            say(
                &mut diags,
                DiagKind::NoJoin,
                format!(
                    "rank {} ({host} GPU {gpu}): no sample describes its steps ({} to {} Unix ns)",
                    p.rank, start, end
                ),
            );
        }
        ranks.push(RankJoin {
            rank: p.rank,
            host: host.clone(),
            gpu,
            uuid: mine.iter().find_map(|s| s.entity.uuid.clone()),
            method,
            start_ns: start,
            end_ns: end,
            aligned_start_ns: start.saturating_sub(p.offset_ns),
            aligned_end_ns: end.saturating_sub(p.offset_ns),
            offset_ns: p.offset_ns,
            align_residual_ns: p.align_residual_ns,
            interval_ns,
            step_ns,
            coarse: interval_ns.is_some_and(|i| i > end.saturating_sub(start)),
            sm_active: mean(Signal::SmActive),
            tensor_active: mean(Signal::TensorActive),
            sm_clock_mhz: mean(Signal::SmClock),
            power_w: mean(Signal::Power),
            clock_reasons: reasons,
            compute_ns_per_step: median(&mut p.steps.iter().map(|s| s.compute_ns).collect::<Vec<_>>()),
            comm_share: if wall > 0 { comm as f64 / wall as f64 } else { 0.0 },
        });
    }
    let mut hosts: Vec<HostWindow> = Vec::new();
    for r in &ranks {
        match hosts.iter_mut().find(|h| h.host == r.host) {
            Some(h) => {
                h.start_ns = h.start_ns.min(r.start_ns);
                h.end_ns = h.end_ns.max(r.end_ns);
                h.ranks.push(r.rank);
            }
            None => hosts.push(HostWindow {
                host: r.host.clone(),
                start_ns: r.start_ns,
                end_ns: r.end_ns,
                ranks: vec![r.rank],
            }),
        }
    }
    hosts.sort_by(|a, b| a.host.cmp(&b.host));
    // NIC series whose host is none of the job's: an address in `instance`, most often.
    let mut strangers: Vec<&str> = all
        .iter()
        .filter(|s| s.entity.kind != EntityKind::Gpu && !s.entity.host.is_empty())
        .map(|s| s.entity.host.as_str())
        .filter(|h| !hosts.iter().any(|j| host_key(&j.host) == host_key(h)))
        .collect();
    strangers.sort_unstable();
    strangers.dedup();
    if !hosts.is_empty() && !strangers.is_empty() {
        say(&mut diags, DiagKind::NoJoin, format!(
            "NIC and host series of {} match no host of the job ({}): not joined. An `instance` label holding an address is named by node-exporter's `node_uname_info` in the same export",
            if strangers.len() > 5 {
                format!("{} and {} more hosts", strangers[..5].join(", "), strangers.len() - 5)
            } else {
                strangers.join(", ")
            },
            hosts.iter().map(|h| h.host.as_str()).collect::<Vec<_>>().join(", ")
        ));
    }
    let sole = ranks.iter().any(|r| r.method == MapMethod::SoleHost);
    let one = ranks.iter().any(|r| r.method == MapMethod::OneHost);
    let method = format!(
        "{} of {} ranks on a host and GPU of the metrics ({}); samples compared with each rank's steps on its host's clock (trace time = baseTimeNanoseconds + ts, metrics Unix time), shown on the job's aligned clock as t − the rank's offset",
        ranks.len(),
        places.len(),
        if sole {
            "the traces name no host: every rank on the one host of the GPU metrics, by its GPU device"
        } else if one {
            "the GPU metrics name no host and every trace names the same one: the metrics' GPUs are that host's, each rank on its GPU device"
        } else {
            "by the trace's host name and the GPU its kernels ran on"
        },
    );
    Joined { method, residual: residual(&ranks), ranks, hosts, diagnostics: diags }
}
