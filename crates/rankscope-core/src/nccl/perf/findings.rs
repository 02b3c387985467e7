//! What nccl-tests output says is wrong: busbw far below the link's peak, a multi-node run at
//! socket speed, wrong results, failed or cut runs.

use super::*;

/// Below this share of the peak, large-message busbw points at the network or topology
/// (rule of thumb, see `docs/nccl.md`).
pub const PEAK_SHARE_THRESHOLD: f64 = 0.8;

/// Without a peak, a multi-host plateau below this busbw (GB/s) is slower than a 40 Gb/s link
/// and far below any RDMA fabric (100 Gb/s ≈ 12.5 GB/s): typical of a TCP fallback.
pub const LOW_MULTINODE_BUSBW_GBPS: f64 = 5.0;

pub(super) fn test_label(t: &PerfTest) -> String {
    let c = t.collective_name();
    let ranks = t.n_ranks.map(|n| format!(", {n} ranks")).unwrap_or_default();
    let hosts = if t.hosts.is_empty() { String::new() } else { format!(", {} host(s)", t.hosts.len()) };
    format!("{c} (test {} of {}{ranks}{hosts})", t.index, t.file)
}

pub(super) fn row_evidence(t: &PerfTest, r: &PerfRow) -> EvidenceLine {
    EvidenceLine::new(
        &t.file,
        r.line,
        &format!(
            "size {} count {} {}: time {} us, algbw {} GB/s, busbw {} GB/s",
            r.size_bytes,
            r.count,
            r.dtype,
            r.out_of_place.time_us,
            r.out_of_place.algbw_gbps,
            r.out_of_place.busbw_gbps
        ),
    )
}

pub(super) fn tests_findings(tests: &[PerfTest]) -> Vec<Finding> {
    let mut out = Vec::new();
    for t in tests {
        let label = test_label(t);
        if t.rows.is_empty() {
            let mut ev: Vec<EvidenceLine> = t
                .devices
                .iter()
                .map(|d| {
                    EvidenceLine::new(
                        &t.file,
                        d.line,
                        &format!("Rank {} on {} device {} {}", d.rank, d.host, d.device, d.name),
                    )
                })
                .chain(std::iter::once(EvidenceLine::new(&t.file, t.first_line, "start of the test")))
                .collect();
            ev.extend(t.failures.iter().cloned());
            let why = t.failures.first().map(|f| format!(": {}", f.text)).unwrap_or_default();
            out.push(Finding::quoting(
                FindingId::TestsNoResults,
                Severity::ERROR,
                format!("{label}: the run printed its banner and devices but no result rows: it failed or was cut off{why}"),
                "Look at the launcher's stderr and rerun with NCCL_DEBUG=INFO: a failed NCCL init (network, version mismatch) or a killed job ends the output here",
                ev,
            ));
            continue;
        }
        let mut ranks_seen: BTreeMap<u32, Vec<&TestDevice>> = BTreeMap::new();
        for d in &t.devices {
            ranks_seen.entry(d.rank).or_default().push(d);
        }
        let dup: Vec<&TestDevice> = ranks_seen.values().filter(|v| v.len() > 1).flatten().copied().collect();
        if !dup.is_empty() {
            out.push(Finding::quoting(
                FindingId::TestsDuplicateRanks,
                Severity::ERROR,
                format!("{label}: the same rank number is listed by several processes: each process ran its own communicator instead of joining one job"),
                "Build nccl-tests with MPI=1 and launch with mpirun/srun so that every process gets its own rank; check that every host runs the same MPI-enabled binary",
                dup.iter().map(|d| EvidenceLine::new(&t.file, d.line, &format!("Rank {} Pid {} on {}", d.rank, d.pid.map_or("?".to_string(), |p| p.to_string()), d.host))).collect(),
            ));
        } else if t.n_ranks == Some(1) {
            out.push(Finding::quoting(
                FindingId::TestsSingleRank,
                Severity::Info,
                format!("{label}: one rank only: busbw is 0 by definition and nothing crossed a link; this measures local copies, not the fabric"),
                "Run with one rank per GPU across the GPUs/nodes you want to measure (mpirun -np N, or -g N for GPUs in one process)",
                t.devices.iter().map(|d| EvidenceLine::new(&t.file, d.line, &format!("Rank {} on {}", d.rank, d.host))).collect(),
            ));
        }
        let wrong: Vec<&PerfRow> = t
            .rows
            .iter()
            .filter(|r| {
                [r.out_of_place.check, r.in_place.check]
                    .iter()
                    .any(|c| matches!(c, Check::Wrong(w) if *w > 0))
            })
            .collect();
        if !wrong.is_empty() || t.out_of_bounds_ok == Some(false) {
            let mut ev: Vec<EvidenceLine> = wrong.iter().map(|r| row_evidence(t, r)).collect();
            if let Some(l) = t.out_of_bounds_line.filter(|_| t.out_of_bounds_ok == Some(false)) {
                ev.push(EvidenceLine::new(
                    &t.file,
                    l,
                    &format!("Out of bounds values : {}", t.out_of_bounds.unwrap_or(0)),
                ));
            }
            out.push(Finding::quoting(
                FindingId::TestsWrongResults,
                Severity::ERROR,
                format!("{label}: {} row(s) report wrong elements: data was corrupted in transit", wrong.len()),
                "Treat the hardware path as faulty until shown otherwise: rerun on subsets of nodes to isolate the bad GPU/NIC/link, check dmesg/Xid errors and NIC counters",
                ev,
            ));
        }
        if let Some(first) = t.failures.first() {
            out.push(Finding::quoting(
                FindingId::TestsFailure,
                Severity::ERROR,
                format!("{label}: nccl-tests reported a failure after {} row(s): {}", t.rows.len(), first.text),
                "The run stopped early: read the failure (file:line of nccl-tests, and NCCL's message), rerun with NCCL_DEBUG=INFO to see which rank and transport failed",
                t.failures.clone(),
            ));
        }
        if let Some(a) = &t.analysis {
            let multi_host = t.hosts.len() > 1;
            if a.peak.is_none()
                && multi_host
                && t.n_ranks.is_none_or(|n| n > 1)
                && a.plateau_busbw_gbps > 0.0
                && a.plateau_busbw_gbps < LOW_MULTINODE_BUSBW_GBPS
            {
                let last: Vec<EvidenceLine> = t
                    .rows
                    .iter()
                    .max_by_key(|r| r.size_bytes)
                    .map(|r| row_evidence(t, r))
                    .into_iter()
                    .collect();
                out.push(Finding::quoting(
                    FindingId::TestsLowMultinodeBusbw,
                    Severity::WARNING,
                    format!(
                        "{label}: across {} hosts the busbw plateau is only {:.2} GB/s, below {LOW_MULTINODE_BUSBW_GBPS} GB/s: slower than a 40 Gb/s link and far below any RDMA fabric; typical of NCCL falling back to TCP sockets or of a broken RDMA path",
                        t.hosts.len(),
                        a.plateau_busbw_gbps
                    ),
                    "Run the same test with NCCL_DEBUG=INFO and read `Using network` and the `via NET/...` lines (`rankscope nccl`): NET/Socket means RDMA is not used; with NET/IB check GDRDMA, PFC/ECN for RoCE and the NIC speed. Give --peak-gbps to compare against your link instead",
                    last,
                ));
            }
            if let (Some(p), Some(pct)) = (&a.peak, a.plateau_pct_of_peak) {
                if pct < PEAK_SHARE_THRESHOLD * 100.0 && t.n_ranks.is_none_or(|n| n > 1) {
                    let big: Vec<&PerfRow> = {
                        let mut v: Vec<&PerfRow> = t.rows.iter().collect();
                        v.sort_by_key(|r| std::cmp::Reverse(r.size_bytes));
                        v.into_iter().take(3).collect()
                    };
                    out.push(Finding::quoting(
                        FindingId::TestsBelowPeak,
                        if p.user_given { Severity::WARNING } else { Severity::Info },
                        format!(
                            "{label}: large-message busbw plateau {:.1} GB/s is {:.1}% of the {} peak {:.0} GB/s (below {:.0}%)",
                            a.plateau_busbw_gbps,
                            pct,
                            if p.user_given { "given" } else { "assumed" },
                            p.gbps,
                            PEAK_SHARE_THRESHOLD * 100.0
                        ),
                        "Busbw well below the link peak points at the network or topology: check that NCCL uses RDMA (NET/IB or the provider plugin, not NET/Socket) with GDRDMA, that every NIC is used (NCCL_DEBUG=INFO), PFC/ECN for RoCE, and the rail/topology layout",
                        big.iter().map(|r| row_evidence(t, r)).collect(),
                    ));
                }
            }
        }
    }
    out
}
