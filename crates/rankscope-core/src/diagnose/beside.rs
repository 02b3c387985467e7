//! Findings from the evidence beside the traces ([`crate::analyze::beside`]), in the one
//! findings vocabulary, so that they rank with the trace's own ([`merge`]). Each reads what the
//! join measured; the two that need two sources at once are the point:
//! - `metrics.comm-bound`: the cluster metrics' SMs idle while a NIC runs at its line rate, and
//!   the trace's exposed communication on those ranks is what it costs (its gain);
//! - `steplog.slow-phase-profiled`: the step log's slow phase, across every logged iteration,
//!   pointed to the profiled steps that show it (their excess over the log's usual iteration is
//!   its gain).
//!
//! They are judged after the trace's causes have been arbitrated, because each either stands
//! alone (a dead rank, an XID, PFC pauses, an idle NIC: no trace cause measures those) or
//! measures a time a trace cause already claims, seen from another source: the cluster
//! metrics' communication-bound ranks are the trace's exposed transfer, a profiled stretch
//! slower than the log's usual iteration is what the trace's causes take apart. A gain counted
//! twice would make the fixes add up to more than the step ([`same_time`] says which is which;
//! [`merge`] counts such a time once, in the trace's finding, which quotes the second source).

use std::cmp::Reverse;

use crate::analyze::beside::{Beside, StepLogSummary};
use crate::analyze::stats::{self, median};
use crate::analyze::Analysis;
use crate::finding::{EvidenceKey, Finding, FindingId, Severity};
use crate::metrics::rules::{MetricsFinding, MetricsFindingId};
use crate::steplog::Representative;

/// Every finding of the evidence beside the traces (none without it).
pub fn findings(a: &Analysis) -> Vec<Finding> {
    let Some(b) = a.beside.as_ref() else { return Vec::new() };
    let mut out = Vec::new();
    if let Some(m) = &b.metrics {
        out.extend(m.findings.iter().map(|f| metrics_finding(a, b, f)));
    }
    for s in &b.steplogs {
        out.extend(steplog_finding(s));
    }
    for r in b.ras.iter().filter(|r| !r.status.healthy()) {
        out.push(plain(
            FindingId::RasJobIncomplete,
            Severity::High,
            format!("{}: NCCL RAS reports the job incomplete: {}", r.file, r.status.headline.join("; ")),
            "Find the dead or silent processes RAS names (their host's logs, `dmesg`, the scheduler's record); a collective waits for every member, so the job hangs or fails until they are back.",
        ));
    }
    if let Some(j) = b.inspector.as_ref().and_then(|i| i.join.as_ref()) {
        let t = &j.times;
        if t.disagree > 0 {
            let mut f = plain(
                FindingId::InspectorTimesDisagree,
                Severity::Low,
                format!(
                    "NCCL Inspector's execution times disagree with the traces' kernel times for {} of {} member times compared (median ratio {}): the Inspector timed something else than the kernel (`kernel_cpu` / `collective_cpu` timing includes launch and host time), or the join paired the wrong calls.",
                    t.disagree,
                    t.compared,
                    t.ratio_p50.map_or("-".to_string(), |r| format!("{r:.2}"))
                ),
                "Read the Inspector's `timing` per call in the join; trust the traces' kernel times for the device and the Inspector's for its own timing.",
            );
            f.ranks = sorted(t.worst.iter().map(|d| d.rank).collect());
            f.evidence.insert(EvidenceKey::Fraction, t.disagree as f64 / t.compared.max(1) as f64);
            out.push(f);
        }
    }
    out
}

/// The trace's causes whose time a finding beside the traces measures too (none: its time is
/// its own). For the step log's slow profiled stretch, every trace cause with a gain: the
/// stretch's excess over the usual iteration is what they take apart.
pub fn same_time(id: FindingId) -> Option<&'static [FindingId]> {
    use FindingId as F;
    match id {
        // SMs idle while the NIC is at its line rate: the communication the trace shows exposed.
        F::MetricsCommBound => Some(&[F::ExposedComm, F::SmallCollectives]),
        F::SteplogSlowPhaseProfiled => Some(&[]),
        _ => None,
    }
}

/// Whether `trace` is a cause of the trace claiming the time `beside` measures, on ranks they
/// share (a finding without ranks is the job's).
fn claims_same_time(beside: &Finding, trace: &Finding) -> bool {
    let Some(ids) = same_time(beside.id) else { return false };
    let shared = beside.ranks.is_empty()
        || trace.ranks.is_empty()
        || trace.ranks.iter().any(|r| beside.ranks.contains(r));
    let cause = trace.id.kind() == crate::finding::IdKind::Cause
        && trace.severity != Severity::Info
        && trace.impact_ns > 0;
    cause && shared && (ids.is_empty() || ids.contains(&trace.id))
}

/// A second source for a trace cause: the sentence its finding gains.
fn second_source(beside: &Finding) -> Option<String> {
    let ranks = match beside.ranks.len() {
        0 => String::new(),
        1 => format!(" on rank {}", beside.ranks[0]),
        _ => format!(" on ranks {}", crate::words::rank_runs(&beside.ranks)),
    };
    (beside.id == FindingId::MetricsCommBound).then(|| {
        format!(
            " The cluster metrics agree{ranks} (`{}`): SMs mostly idle while a NIC ran at its line rate.",
            beside.id
        )
    })
}

/// `found` merged into `list` (ranked by [`super::arbitrate`]'s order: advice before
/// information, gain, severity, id): each finds its place; a stopped job's divergence stays
/// first. A finding that measures a time a trace cause of `list` claims ([`same_time`]) keeps
/// no gain of its own: it names that cause among its symptoms, and the cause quotes it.
pub fn merge(list: &mut Vec<Finding>, found: Vec<Finding>) {
    let key = |f: &Finding| {
        (f.severity == Severity::Info, Reverse(f.impact_ns), Reverse(f.severity), f.id.as_str())
    };
    for mut f in found {
        let claimed: Vec<usize> = (0..list.len()).filter(|&k| claims_same_time(&f, &list[k])).collect();
        if let Some(&first) = claimed.first() {
            let host = list[first].id;
            if let Some(say) = second_source(&f) {
                list[first].message.push_str(&say);
                if let Some(sm) = f.evidence.get(EvidenceKey::SmActive) {
                    list[first].evidence.insert(EvidenceKey::SmActive, sm);
                }
            }
            f.symptoms.extend(claimed.iter().map(|&k| list[k].id).filter(|id| *id != f.id));
            f.symptoms.dedup();
            f.message.push_str(&format!(
                " Its time is counted once, in `{host}` (the same time, measured from the traces), not again here."
            ));
            f.impact_ns = 0;
        }
        let at = list
            .iter()
            .position(|x| x.id != FindingId::CollectiveMismatch && key(x) > key(&f))
            .unwrap_or(list.len());
        list.insert(at, f);
    }
}

fn plain(id: FindingId, severity: Severity, message: String, fix: &str) -> Finding {
    let mut f = Finding::quoting(id, severity, message, fix, Vec::new());
    f.quotes_total = 0;
    f
}

fn sorted(mut v: Vec<u32>) -> Vec<u32> {
    v.sort_unstable();
    v.dedup();
    v
}

/// A rank's exposed communication per step: its median over the steps (none without steps).
fn exposed_comm_ns(a: &Analysis, rank: u32) -> Option<i64> {
    let v: Vec<i64> = a
        .steps
        .iter()
        .filter_map(|s| s.per_rank.iter().find(|r| r.rank == rank))
        .map(|r| r.exposed_comm_ns)
        .collect();
    (!v.is_empty()).then(|| median(v))
}

fn metrics_finding(a: &Analysis, b: &Beside, m: &MetricsFinding) -> Finding {
    let (id, severity, fix) = match m.id {
        MetricsFindingId::CommBound => (
            FindingId::MetricsCommBound,
            Severity::Medium,
            "The job waits on the network: overlap communication with compute (FSDP / DDP prefetch, bucket sizes), send less (gradient compression, a larger batch per step, fewer ranks across nodes), or give it more links (check every NIC carries traffic: NCCL_IB_HCA).",
        ),
        MetricsFindingId::ThrottledGpu => (
            FindingId::MetricsThrottledGpu,
            Severity::Medium,
            "Check the GPU's cooling, power cap (`nvidia-smi -q -d PERFORMANCE,POWER`) and clocks settings; the job runs at its slowest GPU's pace.",
        ),
        MetricsFindingId::PfcStorm => (
            FindingId::MetricsPfcStorm,
            Severity::Medium,
            "Pause frames mean congestion or a misconfigured lossless fabric: check the switch's PFC / ECN settings and the port's counters with the network team.",
        ),
        MetricsFindingId::IdleNic => (
            FindingId::MetricsIdleNic,
            Severity::Low,
            "NCCL's traffic took another path: check NCCL_IB_HCA / NCCL_SOCKET_IFNAME and the NCCL_DEBUG=INFO `NET/` lines for which devices it uses.",
        ),
        MetricsFindingId::XidError => (
            FindingId::MetricsXidError,
            Severity::High,
            "An XID is the driver reporting a GPU fault: look the code up in NVIDIA's XID table, check `dmesg` on the host, and drain the GPU if it repeats.",
        ),
    };
    let mut f = plain(id, severity, format!("{}: {}.", m.title, m.evidence.join("; ")), fix);
    f.ranks = sorted(m.ranks.clone());
    if m.id == MetricsFindingId::CommBound {
        // The second source: what the trace says the network costs on these ranks.
        let exposed = f.ranks.iter().filter_map(|&r| exposed_comm_ns(a, r)).max().unwrap_or(0);
        f.steps = a.steps.iter().map(|s| s.step).collect();
        f.impact_ns = exposed.max(0);
        f.evidence.insert(EvidenceKey::ExposedCommNs, exposed as f64);
        let sm: Vec<f64> = b
            .metrics
            .iter()
            .flat_map(|r| r.join.iter())
            .flat_map(|j| j.ranks.iter())
            .filter(|r| f.ranks.contains(&r.rank))
            .filter_map(|r| r.sm_active)
            .collect();
        if let Some(v) = median_f(sm) {
            f.evidence.insert(EvidenceKey::SmActive, v);
        }
        f.message.push_str(&format!(
            " The trace: {:.1} ms of communication per step exposed (not hidden under compute) on the worst of these ranks.",
            exposed as f64 / 1e6
        ));
    }
    f
}

/// The median of some values (the mean of the middle two: a typical value), none without any.
fn median_f(v: Vec<f64>) -> Option<f64> {
    (!v.is_empty()).then(|| stats::median_f(v))
}

fn phases_text(phases: &[(u64, u64, f64)]) -> String {
    let mut v: Vec<String> =
        phases.iter().take(3).map(|&(a, b, m)| crate::steplog::phase_words(a, b, m)).collect();
    if phases.len() > 3 {
        v.push(format!("{} more", phases.len() - 3));
    }
    v.join(", ")
}

fn steplog_finding(s: &StepLogSummary) -> Option<Finding> {
    let p = s.profile.as_ref()?;
    let usual = s.elapsed_p50_ms?;
    let ms_ns = |ms: f64| (ms * 1e6).round() as i64;
    if p.representative == Representative::SlowerThanUsual && !s.slow_profiled.is_empty() {
        let slow_ms = median_f(s.slow_profiled.iter().map(|x| x.ms).collect())?;
        let steps: Vec<u32> = sorted(s.slow_profiled.iter().map(|x| x.step).collect());
        let phases = if p.slow_phases.is_empty() {
            "no iteration of the log is as slow: the slowdown is the profiled stretch's own (or the profiler's cost)".to_string()
        } else {
            format!("the log's slow phases: {}", phases_text(&p.slow_phases))
        };
        let mut f = plain(
            FindingId::SteplogSlowPhaseProfiled,
            Severity::Medium,
            format!(
                "{}: profiled step(s) {} take {slow_ms:.0} ms, against {usual:.0} ms for the usual iteration over the {} the log covers ({phases}); the profile shows a slow stretch of the run, and the trace's findings say why it is slow.",
                s.file,
                steps.iter().map(u32::to_string).collect::<Vec<_>>().join(", "),
                s.iterations
            ),
            "Fix what the profiled steps show (the trace's findings); then profile a usual stretch too, to see the run as it mostly goes.",
        );
        f.steps = steps;
        f.impact_ns = ms_ns(slow_ms - usual).max(0);
        f.evidence.insert(EvidenceKey::ProfiledMs, slow_ms);
        f.evidence.insert(EvidenceKey::LogMedianMs, usual);
        if let Some(m) = median_f(p.slow_phases.iter().map(|x| x.2).collect()) {
            f.evidence.insert(EvidenceKey::SlowPhaseMs, m);
        }
        return Some(f);
    }
    if p.representative != Representative::SlowerThanUsual && !p.slow_phases.is_empty() {
        // What the phases cost averaged over the run the log covers.
        let span = match (s.first_iteration, s.last_iteration) {
            (Some(a), Some(b)) if b >= a => (b - a + 1) as f64,
            _ => 1.0,
        };
        let cost: f64 = p
            .slow_phases
            .iter()
            .map(|(a, b, m)| (m - usual).max(0.0) * (b.saturating_sub(*a) + 1) as f64)
            .sum::<f64>()
            / span;
        let mut f = plain(
            FindingId::SteplogSlowPhaseMissed,
            Severity::Medium,
            format!(
                "{}: the log's slow phases ({}) are not in the profile: the profiled steps take {:.0} ms, a usual iteration of the {} logged ({usual:.0} ms).",
                s.file,
                phases_text(&p.slow_phases),
                p.profiled_p50_ms,
                s.iterations
            ),
            "Profile the slow phases: the profiler's schedule (`wait` / `warmup` / `active`, or `torch.profiler.profile(schedule=...)` started at the iteration) set to reach them.",
        );
        f.impact_ns = ms_ns(cost).max(0);
        f.evidence.insert(EvidenceKey::ProfiledMs, p.profiled_p50_ms);
        f.evidence.insert(EvidenceKey::LogMedianMs, usual);
        if let Some(m) = median_f(p.slow_phases.iter().map(|x| x.2).collect()) {
            f.evidence.insert(EvidenceKey::SlowPhaseMs, m);
        }
        return Some(f);
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn finding(id: FindingId, impact: i64, ranks: &[u32]) -> Finding {
        let mut f = plain(id, Severity::Medium, String::new(), "");
        f.impact_ns = impact;
        f.ranks = ranks.to_vec();
        f
    }

    fn ids(list: &[Finding]) -> Vec<FindingId> {
        list.iter().map(|f| f.id).collect()
    }

    #[test]
    fn merged_findings_take_their_rank() {
        let mut list =
            vec![finding(FindingId::HostStall, 50, &[3]), finding(FindingId::AllocatorChurn, 10, &[])];
        let mut ras = finding(FindingId::RasJobIncomplete, 0, &[]);
        ras.severity = Severity::High;
        merge(&mut list, vec![finding(FindingId::SteplogSlowPhaseMissed, 20, &[]), ras]);
        assert_eq!(
            ids(&list),
            [
                FindingId::HostStall,
                FindingId::SteplogSlowPhaseMissed,
                FindingId::AllocatorChurn,
                FindingId::RasJobIncomplete
            ]
        );
    }

    #[test]
    fn a_time_the_trace_claims_is_counted_once_in_the_traces_finding() {
        // SMs idle with the NIC at line rate on ranks 0-7: the exposed transfer the trace
        // measured there, not a second gain.
        let mut comm = finding(FindingId::MetricsCommBound, 40, &[0, 1, 2, 3, 4, 5, 6, 7]);
        comm.evidence.insert(EvidenceKey::SmActive, 0.12);
        let mut list =
            vec![finding(FindingId::HostStall, 50, &[3]), finding(FindingId::ExposedComm, 40, &[])];
        merge(&mut list, vec![comm.clone()]);
        assert_eq!(ids(&list), [FindingId::HostStall, FindingId::ExposedComm, FindingId::MetricsCommBound]);
        let total: i64 = list.iter().map(|f| f.impact_ns).sum();
        assert_eq!(total, 90, "the gains add up to what the trace's causes claim");
        assert_eq!(list[2].symptoms, [FindingId::ExposedComm]);
        assert!(list[1].message.contains("ranks 0–7 (`metrics.comm-bound`)"), "{}", list[1].message);
        assert_eq!(list[1].evidence.get(EvidenceKey::SmActive), Some(0.12));
        // Without the trace's finding the metrics' one keeps its gain.
        let mut alone = vec![finding(FindingId::HostStall, 50, &[3])];
        merge(&mut alone, vec![comm.clone()]);
        assert_eq!(alone[1].impact_ns, 40);
        // Nor does a trace cause on other ranks claim it.
        let mut other = vec![finding(FindingId::ExposedComm, 40, &[9])];
        merge(&mut other, vec![comm]);
        assert_eq!(other[0].impact_ns, 40);
        assert_eq!(other.iter().find(|f| f.id == FindingId::MetricsCommBound).map(|f| f.impact_ns), Some(40));
        // A slow profiled stretch is what the trace's causes take apart.
        let mut list = vec![finding(FindingId::HostStall, 50, &[3])];
        merge(&mut list, vec![finding(FindingId::SteplogSlowPhaseProfiled, 300, &[])]);
        assert_eq!(list[1].impact_ns, 0);
        assert_eq!(list[1].symptoms, [FindingId::HostStall]);
    }
}
