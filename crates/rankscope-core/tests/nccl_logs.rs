//! NCCL_DEBUG=INFO logs: every real file in `shared/nccl-logs`, checked against facts read by
//! hand from the files; one fixture per format variant; the sniffer; and a fuzz test that feeds
//! mutated, truncated and random bytes through both parsers.

// Tests read the zoo and ../shared from disk; the core never does (its clippy.toml).
#![allow(clippy::disallowed_methods, clippy::disallowed_types)]
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::float_cmp)]

use std::collections::BTreeMap;

use rankscope_core::nccl::log::{LogReport, NcclProcess};
use rankscope_core::nccl::{self, Input, InputKind as Kind, Severity};

const SHARED: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../../shared/");
const FIXTURES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/nccl/");

fn read(path: &str) -> Vec<u8> {
    std::fs::read(path).unwrap_or_else(|e| panic!("{path}: {e}"))
}

fn report_at(path: &str) -> LogReport {
    let bytes = read(path);
    let name = path.rsplit('/').next().unwrap();
    nccl::analyze_logs(&[Input { name, bytes: &bytes }])
}

fn shared(name: &str) -> LogReport {
    report_at(&format!("{SHARED}nccl-logs/{name}"))
}

fn fixture(name: &str) -> LogReport {
    report_at(&format!("{FIXTURES}{name}"))
}

fn ids(r: &LogReport) -> Vec<(&str, Severity)> {
    r.findings.iter().map(|f| (f.id.as_str(), f.severity)).collect()
}

fn finding<'a>(r: &'a LogReport, id: &str) -> &'a nccl::Finding {
    r.findings.iter().find(|f| f.id == id).unwrap_or_else(|| panic!("no finding {id}: {:?}", ids(r)))
}

fn proc<'a>(r: &'a LogReport, host: &str, pid: u64) -> &'a NcclProcess {
    r.process(host, pid).unwrap_or_else(|| panic!("no process {host}:{pid}"))
}

#[test]
fn efa_16_ranks_two_nodes() {
    let r = shared("aws-efa-eks_2node-16rank-p4d_EFA-OFI_nccl2.9.9.log");
    assert_eq!(r.hosts, ["nccl-tests-efa-16-worker-0", "nccl-tests-efa-16-worker-1"]);
    assert_eq!((r.n_nodes, r.processes.len(), r.ranks.len()), (2, 16, 16));
    // `[1,0]<stdout>:NCCL version 2.9.9+cuda11.2` has no NCCL header: attributed through the
    // launcher tag to rank 0's host.
    assert_eq!(
        r.nccl_versions,
        BTreeMap::from([("2.9.9".to_string(), vec!["nccl-tests-efa-16-worker-0".to_string()])])
    );
    for p in &r.processes {
        assert_eq!(p.network.as_deref(), Some("AWS Libfabric"));
        assert_eq!(p.ofi_provider.as_deref(), Some("efa"));
        assert_eq!(p.gdr, Some(true), "{}:{}", p.host, p.pid);
        assert_eq!((p.coll_channels, p.p2p_channels, p.p2p_channels_per_peer), (Some(8), Some(8), Some(1)));
    }
    // Rank 13 is pid 38 on worker-1, device 5, bus 901d0.
    let k = r.ranks.iter().find(|k| k.rank == 13).unwrap();
    assert_eq!(
        (k.host.as_str(), k.pid, k.cuda_dev, k.bus_id.as_deref()),
        ("nccl-tests-efa-16-worker-1", 38, Some(5), Some("901d0"))
    );
    assert!(r.ranks.iter().all(|k| k.comm == "nranks=16" && k.init_complete));
    assert_eq!(proc(&r, "nccl-tests-efa-16-worker-1", 38).launcher_rank, Some(13));
    let p0 = proc(&r, "nccl-tests-efa-16-worker-0", 25);
    assert_eq!((p0.nccl_version.as_deref(), p0.nccl_cuda_version.as_deref()), (Some("2.9.9"), Some("11.2")));
    assert_eq!(r.rings.len(), 8);
    assert_eq!(r.rings[0].ranks, [0, 7, 6, 5, 4, 3, 2, 1, 8, 15, 14, 13, 12, 11, 10, 9]);
    assert!(r.rings.iter().all(|g| g.host_crossings == Some(2) && g.hosts == Some(2)));
    assert_eq!(r.trees.len(), 128);
    let t = r.trees.iter().find(|t| t.rank == 0 && t.channel == 0).unwrap();
    assert_eq!((t.up, t.down.as_slice()), (-1, [1, 8].as_slice()));
    assert_eq!(r.transports.get("P2P/IPC/read"), Some(&256));
    for d in 0..4 {
        assert_eq!(r.transports.get(&format!("NET/AWS Libfabric/{d}/GDRDMA")), Some(&16));
    }
    assert!(r.peers.iter().all(|p| p.same_host.is_some()));
    assert!(r.peers.iter().filter(|p| p.transports == ["P2P"]).all(|p| p.same_host == Some(true)));
    assert!(r.peers.iter().filter(|p| p.transports == ["NET"]).all(|p| p.same_host == Some(false)));
    assert!(r.files[0].has_perf_table);
    assert!(r.findings.is_empty(), "{:?}", ids(&r));
}

#[test]
fn socket_fallback_on_two_nodes() {
    let r = shared("aws-hpc-tutorials_2node-a10g_NET-Socket_nccl2.11.4.log");
    assert_eq!((r.n_nodes, r.processes.len()), (2, 2));
    assert_eq!(r.nccl_versions.keys().collect::<Vec<_>>(), ["2.11.4"]);
    let p = proc(&r, "ip-10-0-139-244", 1465);
    assert_eq!(p.network.as_deref(), Some("Socket"));
    assert_eq!(p.net_plugin.as_deref(), Some("internal"));
    assert_eq!(p.socket_interfaces, ["eth0:10.0.139.244<0>"]);
    assert_eq!(r.transports, BTreeMap::from([("NET/Socket/0".to_string(), 8)]));
    assert_eq!(
        r.ranks.iter().map(|k| (k.rank, k.bus_id.as_deref().unwrap())).collect::<Vec<_>>(),
        [(0, "1e0"), (1, "1e0")]
    );
    assert_eq!(ids(&r), [("log.net-socket-multinode", Severity::ERROR)]);
    let f = finding(&r, "log.net-socket-multinode");
    let lines: Vec<u32> = f.quotes.iter().map(|e| e.line).collect();
    assert!(lines.contains(&10) && lines.contains(&12), "{lines:?}"); // libibverbs missing; Using network Socket
    assert!(f.message.contains("libibverbs"));
}

#[test]
fn training_log_with_srun_labels_and_elisions() {
    let r = shared("awsome-dt_fsdp-llama3-4node-p5_training-log-with-NCCL-lines_elided.log");
    assert_eq!(r.files[0].elided_lines, 3);
    assert_eq!(r.hosts, ["p5-dy-gpu-3", "p5-dy-gpu-4"]);
    let p = proc(&r, "p5-dy-gpu-3", 47930);
    assert_eq!(
        (p.nccl_version.as_deref(), p.nccl_cuda_version.as_deref(), p.launcher_rank),
        (Some("2.26.2"), Some("12.2"), Some(1))
    );
    let p = proc(&r, "p5-dy-gpu-3", 47936);
    assert_eq!((p.cuda_driver.as_deref(), p.cuda_dev), (Some("12.8"), Some(6)));
    let p = proc(&r, "p5-dy-gpu-4", 930643);
    assert_eq!((p.net_plugin.as_deref(), p.launcher_rank), (Some("aws-ofi-nccl 1.13.2-aws"), Some(2)));
    assert!(r.findings.is_empty());
}

#[test]
fn ib_completion_error_with_trace() {
    let r = shared("ml-engineering_ib-completion-error_SNIPPET.log");
    assert_eq!(r.warnings.len(), 1);
    let w = &r.warnings[0];
    assert_eq!((w.host.as_str(), w.pid, w.tid, w.line), ("node-2", 5776, 5902, 1));
    assert_eq!(w.location.as_deref(), Some("transport/net_ib.cc:1296"));
    assert!(w.message.starts_with("NET/IB : Got completion from peer 10.2.0.5<33092> with error 12"));
    assert_eq!(w.continuation, ["0, vendor err 129 (Recv)"]);
    let steps: Vec<(&str, i64, u32)> =
        w.trace.iter().map(|t| (t.location.as_str(), t.code, t.line)).collect();
    assert_eq!(steps, [("transport/net.cc:1134", 6, 3), ("proxy.cc:679", 6, 4), ("proxy.cc:858", 6, 5)]);
    assert_eq!(w.trace[2].note, "[Proxy Thread]");
    let f = finding(&r, "log.nccl-warn");
    assert_eq!(f.severity, Severity::ERROR);
    assert!(f.message.contains("ncclRemoteError") && f.fix.contains("IBV_WC_RETRY_EXC_ERR"));
    assert_eq!(f.quotes_total, 4);
}

#[test]
fn patched_build_on_one_host() {
    let r = shared("ssbandjl_2node-4rank-v100-RoCE_nccl2.26.6-PATCHED-mixed-format.log");
    assert_eq!((r.n_nodes, r.processes.len()), (2, 4));
    assert_eq!(
        r.nccl_versions,
        BTreeMap::from([("2.26.6".to_string(), vec!["gdr114".to_string(), "gdr116".to_string()])])
    );
    for p in &r.processes {
        assert_eq!(p.patched_format, p.host == "gdr114", "{}:{}", p.host, p.pid);
        assert_eq!(p.gdr, Some(false));
        assert_eq!(p.network.as_deref(), Some("IB")); // from `via NET/IB/..` (no `Using network` line)
        assert_eq!(p.ib_devices, ["mlx5_0:1/RoCE", "mlx5_2:1/RoCE"]);
        assert_eq!(p.nccl_cuda_version, None); // `+cudaCUDA_MAJOR.CUDA_MINOR` placeholder
    }
    // NCCL_DEBUG_SUBSYS=NET hides the comm lines: ranks come from the nccl-tests banner.
    let ranks: Vec<(u32, &str, u64)> = r.ranks.iter().map(|k| (k.rank, k.host.as_str(), k.pid)).collect();
    assert_eq!(
        ranks,
        [(0, "gdr114", 1766944), (1, "gdr114", 1766945), (2, "gdr116", 98893), (3, "gdr116", 98894)]
    );
    assert_eq!(r.transports, BTreeMap::from([("NET/IB/2".to_string(), 8), ("NET/IB/3".to_string(), 8)]));
    assert_eq!(
        r.peers.iter().map(|p| (p.from_rank, p.to_rank, p.same_host)).collect::<Vec<_>>(),
        [(1, 2, Some(false)), (3, 0, Some(false))]
    );
    assert_eq!(ids(&r), [("log.gdr-disabled", Severity::WARNING), ("log.patched-nccl", Severity::WARNING)]);
    assert!(finding(&r, "log.patched-nccl").message.starts_with("gdr114 print(s) extra fields"));
}

#[test]
fn nccl_2_5_ring_lines_gdr_disabled() {
    let r = shared("ssbandjl_2node-v100-RoCE_NET-IB_nccl2.5.7_allgather.log");
    assert_eq!(r.hosts, ["s95", "s96"]);
    assert_eq!(r.nccl_versions.keys().collect::<Vec<_>>(), ["2.5.7"]);
    let p = proc(&r, "s95", 307265);
    assert_eq!(p.env.get("NCCL_IB_DISABLE").map(String::as_str), Some("0"));
    assert_eq!((p.network.as_deref(), p.gdr), (Some("IB"), Some(false)));
    assert_eq!(r.transports, BTreeMap::from([("NET/IB/0".to_string(), 8)]));
    let f = finding(&r, "log.gdr-disabled");
    assert!(f.message.contains("peer-memory kernel module") && f.message.contains("PCIe"), "{}", f.message);
    assert_eq!(f.quotes[0].line, 43);
    assert_eq!(ids(&r), [("log.gdr-disabled", Severity::WARNING)]);
}

#[test]
fn misconfigured_single_rank_communicators_and_versions() {
    let r = shared("ssbandjl_2node-v100-RoCE_nccl2.26.5_MISCONFIG-nranks1.log");
    assert_eq!(r.processes.len(), 3);
    assert_eq!(
        r.nccl_versions,
        BTreeMap::from([
            ("2.26.2".to_string(), vec!["gdr116".to_string()]),
            ("2.26.5".to_string(), vec!["gdr114".to_string()])
        ])
    );
    let p = proc(&r, "gdr116", 6409);
    assert_eq!((p.nccl_cuda_version.as_deref(), p.cuda_driver.as_deref()), (Some("12.8"), Some("12.4")));
    assert_eq!(p.ib_devices, ["mlx5_0:1/RoCE", "mlx5_2:1/RoCE"]);
    assert_eq!(proc(&r, "gdr114", 29905).ib_devices, ["rocep4s0f0:1/RoCE", "rocep137s0f0:1/RoCE"]);
    assert_eq!(p.coll_channels, Some(64));
    let ranks: Vec<(&str, Option<u32>, Option<f64>, bool)> =
        r.ranks.iter().map(|k| (k.comm.as_str(), k.nranks, k.init_total_s, k.init_complete)).collect();
    assert_eq!(
        ranks,
        [
            ("0x300b8f570a7a539b", Some(1), Some(0.24), true),
            ("0x8bc2ef06035e5d2d", Some(1), Some(0.27), true),
            ("0xd536f97216ef37e8", Some(1), Some(0.35), true)
        ]
    );
    let k = &r.ranks[2];
    assert_eq!(k.init_parts.get("kernels"), Some(&0.23));
    assert_eq!((k.n_nodes, k.local_ranks, k.bus_id.as_deref()), (Some(1), Some(1), Some("8000")));
    assert_eq!(
        ids(&r),
        [
            ("log.nccl-version-mismatch", Severity::ERROR),
            ("log.single-rank-communicators", Severity::ERROR),
            ("log.cuda-driver-mismatch", Severity::WARNING)
        ]
    );
    let f = finding(&r, "log.nccl-version-mismatch");
    assert_eq!(f.quotes.iter().map(|e| e.line).collect::<Vec<_>>(), [22, 180]);
}

#[test]
fn fixture_channel_slash_format_with_shm_inside_a_node() {
    let r = fixture("log_2.19_channel-slash_shm-intra-node.log");
    assert_eq!(r.n_nodes, 2);
    assert!(r.ranks.iter().all(|k| k.comm == "0xabc" && k.nranks == Some(3) && k.init_complete));
    assert_eq!(r.ranks[0].init_total_s, Some(0.52));
    assert_eq!(r.ranks[0].n_nodes, Some(2));
    let p = proc(&r, "nodeA", 100);
    assert_eq!(
        (p.coll_channels, p.collnet_channels, p.nvls_channels, p.gdr),
        (Some(2), Some(2), Some(0), Some(true))
    );
    let shm = r.peers.iter().find(|p| p.from_rank == 0 && p.to_rank == 1).unwrap();
    assert_eq!(
        (shm.same_host, shm.via.as_slice(), shm.channels.as_slice()),
        (Some(true), ["SHM/direct/direct".to_string()].as_slice(), [0, 1].as_slice())
    );
    assert_eq!(ids(&r), [("log.intra-node-shm-or-net", Severity::WARNING)]);
    assert_eq!(
        finding(&r, "log.intra-node-shm-or-net").quotes.iter().map(|e| e.line).collect::<Vec<_>>(),
        [18, 19]
    );
}

#[test]
fn fixture_old_ring_format_crossing_nodes() {
    let r = fixture("log_2.5_ring-format_crosses-nodes.log");
    assert_eq!(r.rings.len(), 1);
    assert_eq!((r.rings[0].ranks.as_slice(), r.rings[0].host_crossings), ([0, 2, 1, 3].as_slice(), Some(4)));
    let t = &r.trees[0];
    assert_eq!((t.rank, t.up, t.down.as_slice()), (0, -1, [2].as_slice()));
    assert_eq!(r.nccl_versions.get("2.5.7"), Some(&vec!["?".to_string()]));
    assert_eq!(ids(&r), [("log.ring-crosses-nodes", Severity::WARNING)]);
}

#[test]
fn fixture_timestamps_ibext_plugin_cumem() {
    let r = fixture("log_timestamps_ibext-plugin_p2p-cumem.log");
    assert_eq!(r.hosts, ["srv-a", "srv-b"]);
    let p = proc(&r, "srv-a", 500);
    assert_eq!(
        (p.network.as_deref(), p.net_plugin.as_deref()),
        (Some("IBext_v8"), Some("NCCL RDMA Plugin v8 (v8)"))
    );
    // GDRDMA is known only for the processes with a network connection.
    assert_eq!(
        (p.gdr, proc(&r, "srv-a", 501).gdr, proc(&r, "srv-b", 600).gdr),
        (None, Some(true), Some(true))
    );
    assert_eq!(
        r.peers.iter().map(|p| (p.from_rank, p.to_rank, p.via.join(","))).collect::<Vec<_>>(),
        [
            (0, 1, "P2P/CUMEM/read".to_string()),
            (1, 0, "P2P/direct pointer/read".to_string()),
            (1, 2, "NET/IBext_v8/0/GDRDMA".to_string())
        ]
    );
    assert!(r.findings.is_empty(), "{:?}", ids(&r));
}

#[test]
fn fixture_mixed_networks_init_incomplete_warn() {
    let r = fixture("log_mixed-networks_init-incomplete_warn.log");
    assert_eq!(
        ids(&r),
        [
            ("log.nccl-warn", Severity::ERROR),
            ("log.nccl-warn", Severity::ERROR),
            ("log.net-socket-multinode", Severity::ERROR),
            ("log.init-incomplete", Severity::WARNING),
            ("log.mixed-networks", Severity::WARNING)
        ]
    );
    assert_eq!(r.warnings.len(), 2);
    assert_eq!(r.warnings[0].trace.iter().map(|t| t.code).collect::<Vec<_>>(), [2, 2]);
    assert!(r.warnings[1].message.is_empty() && r.warnings[1].trace[0].code == 3);
    let socket = finding(&r, "log.net-socket-multinode");
    assert!(socket.quotes.iter().any(|e| e.text.contains("NCCL_IB_DISABLE set by environment to 1")));
    assert_eq!(proc(&r, "a2", 2).env.get("NCCL_IB_DISABLE").map(String::as_str), Some("1"));
}

#[test]
fn fixture_p2p_disabled_loopback_bootstrap_cuda_builds() {
    let r = fixture("log_p2p-disabled_loopback-bootstrap_cuda-builds.log");
    assert_eq!(
        ids(&r),
        [
            ("log.bootstrap-interface", Severity::ERROR),
            ("log.gdr-disabled", Severity::WARNING),
            ("log.intra-node-shm-or-net", Severity::WARNING),
            ("log.nccl-build-mismatch", Severity::WARNING)
        ]
    );
    assert!(finding(&r, "log.bootstrap-interface").message.contains("on n1:"));
    let f = finding(&r, "log.intra-node-shm-or-net");
    assert!(f.message.contains("NCCL_P2P_DISABLE set by environment to 1"));
    assert_eq!(f.quotes.iter().map(|e| e.line).collect::<Vec<_>>(), [6, 12]);
    // `Connected all rings, use ring PXN 0 GDR 1` says GDR is used on n2.
    assert_eq!(proc(&r, "n2", 20).gdr, Some(true));
    assert_eq!(proc(&r, "n1", 10).gdr, Some(false));
    assert!(r.nccl_versions.len() == 1);
}

#[test]
fn fixture_two_communicators_pxn_torchrun_prefix() {
    let r = fixture("log_2.21_pxn_two-communicators.log");
    assert_eq!(
        r.processes.iter().map(|p| p.launcher_rank).collect::<Vec<_>>(),
        [Some(0), Some(1), Some(2), Some(3)]
    );
    // Rank numbers are per communicator: rank 1 is node-a in 0x1111 but node-b in 0x2222.
    let peers: Vec<(Option<&str>, u32, u32, Option<bool>)> =
        r.peers.iter().map(|p| (p.comm.as_deref(), p.from_rank, p.to_rank, p.same_host)).collect();
    assert_eq!(
        peers,
        [
            (Some("0x1111"), 0, 1, Some(true)),
            (Some("0x1111"), 1, 2, Some(false)),
            (Some("0x1111"), 2, 3, Some(true)),
            (Some("0x1111"), 3, 0, Some(false)),
            (Some("0x2222"), 0, 1, Some(false))
        ]
    );
    // PXN connections (`NET/IB/0(0)/GDRDMA`) count as GPUDirect RDMA.
    assert!(r.processes.iter().all(|p| p.gdr == Some(true)));
    assert!(r.rings.iter().all(|g| g.comm.as_deref() == Some("0x1111") && g.host_crossings == Some(2)));
    assert_eq!(r.ranks.iter().filter(|k| k.comm == "0x2222").count(), 2);
    assert!(r.findings.is_empty(), "{:?}", ids(&r));
}

#[test]
fn several_files_of_one_job_merge() {
    let a = read(&format!("{SHARED}nccl-logs/ssbandjl_2node-v100-RoCE_nccl2.26.5_MISCONFIG-nranks1.log"));
    let b = read(&format!("{SHARED}nccl-logs/aws-hpc-tutorials_2node-a10g_NET-Socket_nccl2.11.4.log"));
    let r = nccl::analyze_logs(&[Input { name: "a.log", bytes: &a }, Input { name: "b.log", bytes: &b }]);
    assert_eq!(r.files.len(), 2);
    assert_eq!(r.processes.len(), 5);
    // Three NCCL versions now: the mismatch finding names all of them, with file names.
    let f = finding(&r, "log.nccl-version-mismatch");
    assert!(f.message.contains("2.11.4") && f.message.contains("2.26.2") && f.message.contains("2.26.5"));
    assert!(f.quotes.iter().any(|e| e.file == "b.log"));
}

#[test]
fn sniffer_recognises_every_real_file() {
    let expect: &[(&str, &[Kind])] = &[
        ("nccl-logs/aws-efa-eks_2node-16rank-p4d_EFA-OFI_nccl2.9.9.log", &[Kind::NcclLog, Kind::NcclTests]),
        (
            "nccl-logs/aws-hpc-tutorials_2node-a10g_NET-Socket_nccl2.11.4.log",
            &[Kind::NcclLog, Kind::NcclTests],
        ),
        (
            "nccl-logs/awsome-dt_fsdp-llama3-4node-p5_training-log-with-NCCL-lines_elided.log",
            &[Kind::NcclLog],
        ),
        ("nccl-logs/ml-engineering_ib-completion-error_SNIPPET.log", &[Kind::NcclLog]),
        (
            "nccl-logs/ssbandjl_2node-4rank-v100-RoCE_nccl2.26.6-PATCHED-mixed-format.log",
            &[Kind::NcclLog, Kind::NcclTests],
        ),
        (
            "nccl-logs/ssbandjl_2node-v100-RoCE_NET-IB_nccl2.5.7_allgather.log",
            &[Kind::NcclLog, Kind::NcclTests],
        ),
        (
            "nccl-logs/ssbandjl_2node-v100-RoCE_nccl2.26.5_MISCONFIG-nranks1.log",
            &[Kind::NcclLog, Kind::NcclTests],
        ),
        ("nccl-tests/aws-hpc-tutorials_a10g-1rank_allreduce_legacy-error-col.txt", &[Kind::NcclTests]),
        ("nccl-tests/awsome-dt_p4de-2node_allreduce_srun-label.txt", &[Kind::NcclTests]),
        ("nccl-tests/awsome-dt_p5-2node-awsbatch_allreduce_mpirun-tag_trailing-ws.txt", &[Kind::NcclTests]),
        ("nccl-tests/awsome-dt_p5-2node-eks_allreduce_mpirun-tag_elided.txt", &[Kind::NcclTests]),
        ("nccl-tests/awsome-dt_p5-2node_allreduce-16G_srun-label.txt", &[Kind::NcclTests]),
        ("nccl-tests/awsome-dt_p5en_allreduce_elided.txt", &[Kind::NcclTests]),
        ("nccl-tests/xxrjun_h100_10node-80rank_multi-collective.txt", &[Kind::NcclTests]),
        ("nccl-tests/xxrjun_h100_1node-8gpu_multi-collective.txt", &[Kind::NcclTests]),
        ("nccl-tests/xxrjun_h100_2node-2rank_smoke_allreduce-sendrecv.txt", &[Kind::NcclTests]),
        ("nccl-tests/xxrjun_h100_2node-8rank_alltoall_FAILED-truncated.txt", &[Kind::NcclTests]),
    ];
    for (rel, kinds) in expect {
        let b = read(&format!("{SHARED}{rel}"));
        assert_eq!(nccl::sniff_all(&b).as_slice(), *kinds, "{rel}");
        assert_eq!(nccl::sniff(&b), kinds.first().copied(), "{rel}");
    }
    // Every shared file is listed above.
    for sub in ["nccl-logs", "nccl-tests"] {
        for e in std::fs::read_dir(format!("{SHARED}{sub}")).unwrap() {
            let name = format!("{sub}/{}", e.unwrap().file_name().to_string_lossy());
            assert!(expect.iter().any(|(rel, _)| *rel == name), "untested shared file {name}");
        }
    }
    assert_eq!(nccl::sniff(b"{\"traceEvents\": []}"), None);
    assert_eq!(nccl::sniff(b""), None);
}

/// Deterministic xorshift64* generator (no dependency, same cases on every run).
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
}

/// Feed mutated, truncated, spliced and random inputs to both parsers: no panic, and the
/// output stays sane (serializes; rows have the sizes printed; evidence points inside the file).
#[test]
fn fuzz_both_parsers() {
    let mut seeds: Vec<Vec<u8>> = Vec::new();
    for sub in ["nccl-logs", "nccl-tests"] {
        let mut names: Vec<_> =
            std::fs::read_dir(format!("{SHARED}{sub}")).unwrap().map(|e| e.unwrap().path()).collect();
        names.sort();
        seeds.extend(names.iter().map(|p| std::fs::read(p).unwrap()));
    }
    let mut fx: Vec<_> = std::fs::read_dir(FIXTURES).unwrap().map(|e| e.unwrap().path()).collect();
    fx.sort();
    seeds.extend(fx.iter().map(|p| std::fs::read(p).unwrap()));
    let tokens: &[&[u8]] = &[
        b" NCCL INFO ",
        b" NCCL WARN ",
        b"h:1:2 [0]",
        b"->",
        b" via ",
        b"NET/",
        b"/GDRDMA",
        b"Channel 00/0 : ",
        b"Ring 00 : ",
        b"#",
        b"# Avg bus bandwidth : ",
        b"#  Rank ",
        b"comm 0x1 rank ",
        b"nranks ",
        b"[",
        b"]",
        b"(), a.cc:1,",
        b"\n",
        b"\r\n",
        b"\xff\xfe",
        b"...",
        b"N/A",
        b"-1",
        b"18446744073709551616",
        b"1e308",
        b"nan",
        b"inf",
        b"float",
        b"sum",
        b"Trees [0] ",
        b"1/-1/-1->0->-1",
        b"# Collective test starting: all_reduce_perf",
        b" -> 6",
        b"\xf0\x9f\x92",
        b"\0",
    ];
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
    let mut cases = 0;
    for i in 0..3000 {
        let base = &seeds[i % seeds.len()];
        // Work on a window so each case stays small and the test fast.
        let start = rng.below(base.len());
        let len = 64 + rng.below(3000);
        let mut b: Vec<u8> = base.get(start..(start + len).min(base.len())).unwrap_or(&[]).to_vec();
        match i % 5 {
            0 => {
                for _ in 0..1 + rng.below(20) {
                    if !b.is_empty() {
                        let j = rng.below(b.len());
                        b[j] = rng.next() as u8;
                    }
                }
            }
            1 => {
                for _ in 0..1 + rng.below(10) {
                    let t = tokens[rng.below(tokens.len())];
                    let j = rng.below(b.len() + 1);
                    b.splice(j..j, t.iter().copied());
                }
            }
            2 => {
                let cut = rng.below(b.len() + 1);
                b.truncate(cut);
                let other = &seeds[rng.below(seeds.len())];
                let s = rng.below(other.len());
                b.extend_from_slice(other.get(s..(s + 500).min(other.len())).unwrap_or(&[]));
            }
            3 => {
                b = (0..rng.below(2000)).map(|_| rng.next() as u8).collect();
            }
            _ => {
                // Drop random lines.
                let text: Vec<&[u8]> = b.split(|&c| c == b'\n').collect();
                b = text.into_iter().filter(|_| rng.below(3) != 0).collect::<Vec<_>>().join(&b'\n');
            }
        }
        let n_lines = b.split(|&c| c == b'\n').count() as u32;
        let inp = [Input { name: "fuzz", bytes: &b }];
        let log = nccl::analyze_logs(&inp);
        let tests = nccl::analyze_tests(&inp, Some(50.0));
        let _ = nccl::sniff_all(&b);
        serde_json::to_string(&log).unwrap();
        serde_json::to_string(&tests).unwrap();
        for f in log.findings.iter().chain(tests.findings.iter()) {
            assert!(f.quotes.len() <= nccl::EVIDENCE_MAX && f.quotes_total as usize >= f.quotes.len());
            assert!(f.quotes.iter().all(|e| e.line >= 1 && e.line <= n_lines), "evidence outside the input");
        }
        for t in &tests.tests {
            assert!(t.rows.iter().all(|r| r.line >= 1 && r.line <= n_lines));
            if let Some(fit) = t.analysis.as_ref().and_then(|a| a.fit.as_ref()) {
                assert!(fit.alpha_us >= 0.0 && fit.bw_alg_gbps > 0.0 && fit.bw_alg_gbps.is_finite());
            }
        }
        cases += 1;
    }
    assert_eq!(cases, 3000);
}

#[test]
fn output_is_deterministic() {
    let b = read(&format!("{SHARED}nccl-logs/aws-efa-eks_2node-16rank-p4d_EFA-OFI_nccl2.9.9.log"));
    let one = serde_json::to_string(&nccl::analyze_logs(&[Input { name: "x", bytes: &b }])).unwrap();
    let two = serde_json::to_string(&nccl::analyze_logs(&[Input { name: "x", bytes: &b }])).unwrap();
    assert_eq!(one, two);
    let v: serde_json::Value = serde_json::from_str(&one).unwrap();
    assert_eq!(v["version"], 1);
    assert_eq!(v["processes"][0]["host"], "nccl-tests-efa-16-worker-0");
    assert_eq!(v["ranks"][0]["comm"], "nranks=16");
}

/// Issue 14: colour codes, NULs and a BOM leave a log's facts unchanged (no lost rings, no
/// second host spelled `\u{feff}node`).
#[test]
fn terminal_noise_does_not_change_the_facts() {
    let clean = read(&format!("{SHARED}nccl-logs/aws-efa-eks_2node-16rank-p4d_EFA-OFI_nccl2.9.9.log"));
    let text = String::from_utf8_lossy(&clean);
    let coloured: String = text.lines().map(|l| format!("\x1b[1;36m{l}\x1b[0m\0\n")).collect();
    let mut bom = "\u{feff}".as_bytes().to_vec();
    bom.extend_from_slice(&clean);
    let facts = |b: &[u8]| {
        let r = rankscope_core::nccl::analyze_logs(&[rankscope_core::nccl::Input { name: "l", bytes: b }]);
        (r.hosts.clone(), r.rings.len(), r.ranks.len(), r.processes.len())
    };
    let want = facts(&clean);
    assert!(want.1 > 0, "{want:?}");
    assert_eq!(facts(coloured.as_bytes()), want);
    assert_eq!(facts(&bom), want);
}
