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
    latency_findings(tests, &mut out);
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
            let multi_host = t.topology.scope == NodeScope::MultiNode;
            let low_multinode = a.peak.as_ref().is_none_or(|p| !p.user_given)
                && multi_host
                && t.n_ranks.is_none_or(|n| n > 1)
                && a.plateau_busbw_gbps > 0.0
                && a.plateau_busbw_gbps < LOW_MULTINODE_BUSBW_GBPS;
            if low_multinode {
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
                // The socket-speed finding already says more than an assumed network peak.
                let said = low_multinode && !p.user_given;
                if pct < PEAK_SHARE_THRESHOLD * 100.0 && t.n_ranks.is_none_or(|n| n > 1) && !said {
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
                        below_peak_fix(t),
                        big.iter().map(|r| row_evidence(t, r)).collect(),
                    ));
                }
            }
        }
    }
    out
}

const INTRA_NODE_NVLINK_FIX: &str = "Inside one node busbw below the peak points at the GPU interconnect, not a network: check that every GPU pair has its NVLink/xGMI links (`nvidia-smi topo -m`, `nvidia-smi nvlink -s` / -e for errors; `rocm-smi --showtopo`), that NCCL uses P2P rather than SHM (NCCL_P2P_DISABLE, NCCL_P2P_LEVEL; an NCCL_DEBUG=INFO log read by `rankscope nccl`), and on NVSwitch systems that the Fabric Manager runs";
const INTRA_NODE_PCIE_FIX: &str = "Inside one node these GPUs meet over PCIe: check that NCCL uses P2P over PCIe rather than SHM through host memory (an NCCL_DEBUG=INFO log read by `rankscope nccl`: `via P2P/...` vs `via SHM`; NCCL_P2P_DISABLE, NCCL_P2P_LEVEL), that `nvidia-smi topo -m` shows the GPUs under one PCIe switch (PIX/PXB) rather than across CPU sockets (SYS), that PCIe ACS is off on bare metal (ACS routes P2P through the root complex) and that every GPU trained at its full width and generation (`nvidia-smi -q`: Link Width, PCIe Generation)";
const NETWORK_FIX: &str = "Busbw well below the link peak points at the network or topology: check that NCCL uses RDMA (NET/IB or the provider plugin, not NET/Socket) with GDRDMA, that every NIC is used (NCCL_DEBUG=INFO), PFC/ECN for RoCE, and the rail/topology layout";

/// The advice for busbw below the peak, for the links the test used: one node gets its GPUs'
/// link (NVLink / PCIe), several nodes the network; without device lines both, said as such.
fn below_peak_fix(t: &PerfTest) -> &'static str {
    match (t.topology.scope, t.topology.gpu_link.as_ref().map(|l| l.kind)) {
        (NodeScope::OneNode, Some(LinkKind::Pcie)) => INTRA_NODE_PCIE_FIX,
        (NodeScope::OneNode, _) => INTRA_NODE_NVLINK_FIX,
        (NodeScope::MultiNode, _) => NETWORK_FIX,
        (NodeScope::Unknown, _) => "The output names no hosts (no `# Rank ... on HOST` lines), so whether the run crossed a network is unknown. On one node: check the GPUs' NVLink / PCIe P2P path (`nvidia-smi topo -m`, NCCL_P2P_DISABLE / NCCL_P2P_LEVEL, `via P2P` vs `via SHM` in an NCCL_DEBUG=INFO log). Across nodes: check that NCCL uses RDMA (NET/IB or the provider plugin, not NET/Socket) with GDRDMA and that every NIC is used",
    }
}

/// The test is RCCL's (rccl-tests, an RCCL banner, AMD Instinct devices): RCCL-specific knobs
/// join the advice.
fn is_rccl(t: &PerfTest) -> bool {
    t.suite == Some(TestSuite::RcclTests)
        || t.library_version.as_deref().is_some_and(|v| v.starts_with("RCCL"))
        || t.devices.iter().any(|d| d.name.contains("AMD") || d.name.contains("Instinct"))
}

/// `NCCL_PROTO=Simple, NCCL_ALGO=Ring is set by the environment: unset it first ...` when the
/// file's NCCL lines report them (they decide small-message latency), else nothing.
fn forced_settings(t: &PerfTest) -> String {
    let set: Vec<String> = ["NCCL_PROTO", "NCCL_ALGO"]
        .iter()
        .filter_map(|k| t.env.get(*k).map(|v| format!("{k}={v}")))
        .collect();
    if set.is_empty() {
        String::new()
    } else {
        format!("{} is set by the environment: unset it first (NCCL_PROTO=Simple drops the low-latency LL and LL128 protocols). ", set.join(", "))
    }
}

/// `0.01` µs figures as the tables print them: one decimal above 10, two below.
fn us(x: f64) -> String {
    if x >= 10.0 {
        format!("{x:.1} µs")
    } else {
        format!("{x:.2} µs")
    }
}

/// Small-message floor, inter- vs intra-node floor, non-monotonic rows, steps (docs/nccl.md,
/// "Latency").
fn latency_findings(tests: &[PerfTest], out: &mut Vec<Finding>) {
    use super::latency::*;
    const RCCL_KNOBS: &str = " RCCL: also compare RCCL_MSCCL_ENABLE=0 and RCCL_MSCCLPP_ENABLE=0 (MSCCL/MSCCL++ algorithms take small messages below a size threshold), and on MI300 with ROCm before 6.4 set HSA_NO_SCRATCH_RECLAIM=1 (rccl-tests' README).";
    for t in tests {
        let label = test_label(t);
        let rccl = is_rccl(t);
        let knobs = if rccl { RCCL_KNOBS } else { "" };
        // The floor against the transport.
        if let (Some((f, row)), Some(e)) = (floor(t), expected_floor(t)) {
            if f > e.max_us {
                let fix = match e.transport {
                    FloorTransport::IntraNode => {
                    format!("{}Inside one node small messages cross a few NVLink/xGMI hops: check that the GPUs reach each other by P2P, not SHM or the network (an NCCL_DEBUG=INFO log read by `rankscope nccl`: `via P2P/...`; NCCL_P2P_DISABLE, NCCL_P2P_LEVEL, NCCL_SHM_DISABLE), that NCCL_PROTO / NCCL_ALGO are not forced, and that each process is bound to the CPU socket of its GPU (--bind-to numa).{knobs}", forced_settings(t))
                    }
                    FloorTransport::Efa => format!("{}Over EFA check that the aws-ofi-nccl plugin and Libfabric come from the EFA installer (FI_PROVIDER=efa, not tcp), GPUDirect RDMA on instance types that have it (`via NET/AWS Libfabric/N/GDRDMA`), and that NCCL_PROTO / NCCL_ALGO are not forced.", forced_settings(t)),
                    FloorTransport::Rdma | FloorTransport::UnknownNetwork => format!("{}Read an NCCL_DEBUG=INFO log of the same run (`rankscope nccl`): NET/Socket is TCP (hundreds of µs a message); with NET/IB check GPUDirect RDMA (`/GDRDMA` on the `via NET/...` lines; off, every message is copied through host memory), the RoCE GID (NCCL_IB_GID_INDEX) and NICs (NCCL_IB_HCA), link state and pause counters (ibstat, PFC), and that NCCL_PROTO / NCCL_ALGO are not forced (NCCL_ALGO=Ring crosses the network 2(n-1) times where Tree crosses it 2·log2(nodes)).{knobs}", forced_settings(t))
                };
                out.push(Finding::quoting(
                    FindingId::TestsLatencyFloor,
                    Severity::WARNING,
                    format!(
                        "{label}: small messages take {} (the {} row), more than the {} {} should stay under ({})",
                        us(f),
                        size_h(row.size_bytes),
                        us(e.max_us),
                        e.transport.described(),
                        e.transport.basis()
                    ),
                    &fix,
                    vec![row_evidence(t, row)],
                ));
            }
        }
        // Larger messages that finish sooner.
        let inv = inversions(t);
        if let Some((a, b)) = inv.first() {
            let mut ev = Vec::new();
            for (x, y) in &inv {
                ev.push(row_evidence(t, x));
                ev.push(row_evidence(t, y));
            }
            out.push(Finding::quoting(
                FindingId::TestsNonMonotonic,
                Severity::WARNING,
                format!(
                    "{label}: {} larger size(s) finish sooner than the size before them, beyond noise (both measurements at least {:.0}% faster): {} in {} after {} in {}",
                    inv.len(),
                    NON_MONOTONIC_TOLERANCE * 100.0,
                    size_h(b.size_bytes),
                    us(b.out_of_place.time_us),
                    size_h(a.size_bytes),
                    us(a.out_of_place.time_us)
                ),
                &format!("NCCL's tuner picks an algorithm and protocol per size; a larger message finishing sooner means the choice at the smaller size is the slower one. Rerun that range with NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=TUNING to see the choice and with NCCL_ALGO (Ring, Tree) and NCCL_PROTO (LL, LL128, Simple) fixed to find the faster one; if the application sends such sizes, pin it for them or use a tuner plugin (NCCL_TUNER_PLUGIN). More iterations (-n 100 -w 20) rule out noise.{}", if rccl { " RCCL: also compare RCCL_MSCCL_ENABLE=0 and RCCL_MSCCLPP_ENABLE=0." } else { "" }),
                ev,
            ));
        }
        // Steps between adjacent sizes.
        let st = steps(t);
        if let Some(s) = st.iter().max_by(|a, b| (a.jump / a.neighbours).total_cmp(&(b.jump / b.neighbours)))
        {
            let mut ev = Vec::new();
            for x in &st {
                ev.push(row_evidence(t, x.from));
                ev.push(row_evidence(t, x.to));
            }
            let gdr = if t.hosts.len() > 1 {
                "; across nodes with GPUDirect RDMA off or limited, a step can be where NCCL starts staging through host memory (NCCL_NET_GDR_LEVEL, NCCL_NET_GDR_READ)"
            } else {
                ""
            };
            out.push(Finding::quoting(
                FindingId::TestsCurveStep,
                Severity::WARNING,
                format!(
                    "{label}: {} step(s) in the curve: from {} to {} the time grows {:.2}× ({} → {}) where the neighbouring sizes grow at most {:.2}×",
                    st.len(),
                    size_h(s.from.size_bytes),
                    size_h(s.to.size_bytes),
                    s.jump,
                    us(s.from.out_of_place.time_us),
                    us(s.to.out_of_place.time_us),
                    s.neighbours
                ),
                &format!("A jump between adjacent sizes is NCCL switching protocol (LL to LL128 to Simple, between a few KiB and a few MiB) or algorithm (Tree to Ring, NVLS, CollNet) there. Rerun the sizes around it with NCCL_PROTO and NCCL_ALGO fixed: if one setting gives a smooth curve, the tuner's switch point is wrong for this system (pin the setting for those sizes, or a tuner plugin){gdr}.{}", if rccl { " RCCL: also compare RCCL_MSCCL_ENABLE=0 and RCCL_MSCCLPP_ENABLE=0 (their size thresholds are steps of their own)." } else { "" }),
                ev,
            ));
        }
    }
    // The multi-node floor against the one-node floor of the same collective.
    for t in tests.iter().filter(|t| t.hosts.len() > 1) {
        let Some((fm, rm)) = floor(t) else { continue };
        if !floor_comparable(t.collective) {
            continue;
        }
        // The one-node test of the same collective with the most ranks.
        let single = tests
            .iter()
            .filter(|s| {
                s.hosts.len() == 1 && s.collective == t.collective && s.n_ranks.is_some_and(|n| n > 1)
            })
            .filter_map(|s| floor(s).map(|f| (s, f)))
            .max_by_key(|(s, _)| s.n_ranks);
        let Some((s, (fs, rs))) = single else { continue };
        let ratio = fm / fs;
        if ratio > INTERNODE_RATIO_MAX {
            out.push(Finding::quoting(
                FindingId::TestsInternodeLatency,
                Severity::WARNING,
                format!(
                    "{}: across {} hosts small messages take {}, {ratio:.1}× the {} of one node ({}); a network step should add a few µs (NCCL's tuning model: 2.7-5 µs per step, a 2-node floor about 2× one node's), not {ratio:.0}×",
                    test_label(t),
                    t.hosts.len(),
                    us(fm),
                    us(fs),
                    test_label(s)
                ),
                &format!("The time goes to the network path, not the GPUs: check the transport NCCL picked (NET/IB, not NET/Socket, in an NCCL_DEBUG=INFO log read by `rankscope nccl`), GPUDirect RDMA (`/GDRDMA` on the `via NET/...` lines), the NICs and RoCE settings (NCCL_IB_HCA naming the right NICs, NCCL_IB_GID_INDEX, NCCL_SOCKET_IFNAME), and compare NCCL_ALGO=Tree with NCCL_ALGO=Ring for small sizes (Ring crosses the network on every step).{}", if is_rccl(t) { RCCL_KNOBS } else { "" }),
                vec![row_evidence(t, rm), row_evidence(s, rs)],
            ));
        }
    }
}
