//! NCCL and RCCL logs, what the findings say: warnings of a job's own teardown are information,
//! RCCL's banners give the library, version and build per host, and GPUDirect RDMA advice
//! follows the reasons the log states. On the synthetic fixtures (what each models is in its
//! header) and on logs written here.

// Tests read the zoo and ../shared from disk; the core never does (its clippy.toml).
#![allow(clippy::disallowed_methods, clippy::disallowed_types)]
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;

use rankscope_core::nccl::log::{LogReport, NcclProcess};
use rankscope_core::nccl::{self, Input, Severity};

const FIXTURES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/nccl/");
const TEARDOWN: &str = "log_efa-2node_successful-job_teardown-traces_SYNTHETIC.log";

fn read(path: &str) -> Vec<u8> {
    std::fs::read(path).unwrap_or_else(|e| panic!("{path}: {e}"))
}

fn fixture(name: &str) -> LogReport {
    let path = format!("{FIXTURES}{name}");
    nccl::analyze_logs(&[Input { name, bytes: &read(&path) }])
}

fn ids(r: &LogReport) -> Vec<(&str, Severity)> {
    r.findings.iter().map(|f| (f.id.as_str(), f.severity)).collect()
}

fn finding<'a>(r: &'a LogReport, id: &str) -> &'a nccl::Finding {
    r.findings.iter().find(|f| f.id == id).unwrap_or_else(|| panic!("no {id} in {:?}", ids(r)))
}

fn proc<'a>(r: &'a LogReport, host: &str, pid: u64) -> &'a NcclProcess {
    r.process(host, pid).unwrap_or_else(|| panic!("no process {host}:{pid}"))
}

/// The fixture with its lines changed by `edit` (a line → its replacement, `None` to drop it).
fn teardown_variant(edit: impl Fn(&str) -> Option<String>) -> LogReport {
    let text = String::from_utf8(read(&format!("{FIXTURES}{TEARDOWN}"))).unwrap();
    let out: String = text.lines().filter_map(&edit).map(|l| l + "\n").collect();
    nccl::analyze_logs(&[Input { name: TEARDOWN, bytes: out.as_bytes() }])
}

fn is_finish_line(l: &str) -> bool {
    l.contains("train_runtime") || l.contains("Training completed") || l.contains("Training job finished")
}

#[test]
fn teardown_traces_of_a_successful_efa_job_are_information() {
    let r = fixture(TEARDOWN);
    assert_eq!((r.n_nodes, r.processes.len()), (2, 2));
    // The job end is the first "finished" line after the last work (`Connected all trees`).
    let end = r.files[0].job_end.as_ref().expect("job end");
    assert!(end.text.starts_with("{'train_runtime'"), "{}", end.text);
    // Two traces (one per process), each of socket.cc / proxy steps, both teardown.
    assert_eq!(r.warnings.len(), 2);
    assert!(r.warnings.iter().all(|w| w.teardown && w.message.is_empty() && w.trace.len() == 4));
    assert_eq!(
        ids(&r),
        [("log.gdr-disabled", Severity::Info), ("log.teardown-warnings", Severity::Info)],
        "no error: `rankscope nccl` exits 0"
    );
    let t = finding(&r, "log.teardown-warnings");
    assert!(
        t.message.contains("2 NCCL warning(s)") && t.message.contains("misc/socket.cc:47 -> 3"),
        "{}",
        t.message
    );
    assert!(t.quotes.iter().any(|q| q.text.starts_with("{'train_runtime'")));
    // GPUDirect RDMA: the plugin's own reason, not "load nvidia-peermem".
    let g = finding(&r, "log.gdr-disabled");
    assert!(g.message.contains("Could not disable CUDA API usage for HMEM"), "{}", g.message);
    assert!(g.fix.contains("changes nothing") && !g.fix.starts_with("Load the peer-memory"), "{}", g.fix);
    assert!(g.quotes.iter().any(|q| q.text.contains("disabling GDR")));
}

#[test]
fn teardown_needs_the_log_to_say_the_job_ended() {
    // Without the "finished" lines, traces before an abort are what a failing job writes too.
    let r = teardown_variant(|l| (!is_finish_line(l)).then(|| l.to_string()));
    assert!(r.files[0].job_end.is_none());
    assert!(r.warnings.iter().all(|w| !w.teardown));
    assert_eq!(finding(&r, "log.nccl-warn").severity, Severity::ERROR);
    assert!(r.findings.iter().all(|f| f.id != "log.teardown-warnings"));
    // Work after the "finished" line (a collective, a new communicator) means the job went on.
    let r = teardown_variant(|l| {
        Some(if l.starts_with("[Rank 1] Training job finished") {
            format!("{l}\ngpu-efa-1:4211:4211 [0] NCCL INFO AllReduce: opCount 9 sendbuff 0x7f01 recvbuff 0x7f01 count 1 datatype 7 op 0 root 0 comm 0x55d1c0a4e2f0 [nranks=2] stream 0x5601")
        } else {
            l.to_string()
        })
    });
    assert!(r.files[0].job_end.is_none());
    assert_eq!(finding(&r, "log.nccl-warn").severity, Severity::ERROR);
}

#[test]
fn socket_traces_right_before_an_orderly_destroy_are_teardown() {
    // No "finished" line, but each process destroys its communicator in order (ncclCommDestroy)
    // right after its socket traces: the traces are the destroy's.
    let r =
        teardown_variant(|l| (!is_finish_line(l)).then(|| l.replace("Abort COMPLETE", "Destroy COMPLETE")));
    assert!(r.files[0].job_end.is_none());
    assert!(r.warnings.iter().all(|w| w.teardown), "{:?}", r.warnings);
    let t = finding(&r, "log.teardown-warnings");
    assert!(t.message.contains("while its processes destroyed their communicators"), "{}", t.message);
    assert!(r.findings.iter().all(|f| f.severity != Severity::ERROR));
    // A WARN that is not about a closing connection stays an error even then.
    let r = teardown_variant(|l| {
        if is_finish_line(l) {
            return None;
        }
        let l = l.replace("Abort COMPLETE", "Destroy COMPLETE");
        Some(if l.starts_with("gpu-efa-1:4211:6154 [0] NCCL INFO misc/socket.cc:47") {
            format!("gpu-efa-1:4211:6154 [0] transport/net.cc:1134 NCCL WARN Cuda failure 'an illegal memory access was encountered'\n{l}")
        } else {
            l
        })
    });
    let w: Vec<bool> = r.warnings.iter().map(|w| w.teardown).collect();
    assert_eq!(w, [true, false], "{:?}", r.warnings);
    assert_eq!(finding(&r, "log.nccl-warn").severity, Severity::ERROR);
    // And an orderly destroy does not cover lines the process wrote before other work.
    let r = teardown_variant(|l| {
        if is_finish_line(l) {
            return None;
        }
        let l = l.replace("Abort COMPLETE", "Destroy COMPLETE");
        Some(if l.starts_with("gpu-efa-1:4211:6154 [0] NCCL INFO comm") {
            format!("gpu-efa-1:4211:6154 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[0] [send] via NET/AWS Libfabric/0\n{l}")
        } else {
            l
        })
    });
    let w: Vec<(&str, bool)> = r.warnings.iter().map(|w| (w.host.as_str(), w.teardown)).collect();
    assert_eq!(w, [("gpu-efa-2", true), ("gpu-efa-1", false)], "{:?}", r.warnings);
}

const RCCL: &str = "log_rccl-2node_banners_gdr-peermem_SYNTHETIC.log";

#[test]
fn rccl_banners_versions_per_host_and_rocm_gdr_advice() {
    let r = fixture(RCCL);
    assert_eq!(r.hosts, ["mi300-n1", "mi300-n2"]);
    assert!(r.processes.iter().all(|p| p.library.as_deref() == Some("RCCL")), "{:?}", r.processes);
    // The INFO banner, continued on unprefixed lines.
    let p = proc(&r, "mi300-n1", 3101);
    assert_eq!(
        (
            p.nccl_version.as_deref(),
            p.rccl_build.as_deref(),
            p.hip_version.as_deref(),
            p.rocm_version.as_deref()
        ),
        (Some("2.20.5"), Some("HEAD:fd6a9e1"), Some("6.2.41133-dd7f95766"), Some("6.2.0.0-66-4b2c2a8"))
    );
    assert_eq!(p.env.get("RCCL_MSCCL_ENABLE").map(String::as_str), Some("0"));
    // The stdout banner has no header: its `Hostname` line names the host (short name).
    let q = proc(&r, "mi300-n2", 4471);
    assert_eq!(
        (q.nccl_version.as_deref(), q.rccl_build.as_deref(), q.rocm_version.as_deref()),
        (Some("2.20.5"), Some("HEAD:b4c1e07"), Some("6.2.1.0-112-8f29e0a"))
    );
    assert_eq!(
        r.nccl_versions,
        BTreeMap::from([("2.20.5".to_string(), vec!["mi300-n1".to_string(), "mi300-n2".to_string()])])
    );
    assert_eq!(
        ids(&r),
        [("log.gdr-disabled", Severity::WARNING), ("log.nccl-build-mismatch", Severity::WARNING)]
    );
    let b = finding(&r, "log.nccl-build-mismatch");
    assert!(b.message.starts_with("the same RCCL version comes from different builds"), "{}", b.message);
    assert!(b.message.contains("2.20.5-HEAD:fd6a9e1 (ROCm 6.2.0.0) on mi300-n1"), "{}", b.message);
    assert_eq!(b.quotes.iter().map(|q| q.line).collect::<Vec<_>>(), [10, 21]);
    // ROCm advice: amdgpu peer memory or DMA-BUF, quoting RCCL's own lines; not nvidia-peermem.
    let g = finding(&r, "log.gdr-disabled");
    assert!(g.message.contains("RCCL found no peer-memory support"), "{}", g.message);
    assert!(g.fix.contains("amdkfd") && g.fix.contains("NCCL_DMABUF_ENABLE=1"), "{}", g.fix);
    assert!(!g.fix.contains("Load the peer-memory module (nvidia-peermem"), "{}", g.fix);
    assert!(g.quotes.iter().any(|q| q.text.contains("GDRDMA not enabled")));
    // Another RCCL version on one host: an error that names RCCL.
    let text = String::from_utf8(read(&format!("{FIXTURES}{RCCL}"))).unwrap();
    let other = text.replace("RCCL version : 2.20.5-HEAD:b4c1e07", "RCCL version : 2.18.3-HEAD:b4c1e07");
    let r = nccl::analyze_logs(&[Input { name: RCCL, bytes: other.as_bytes() }]);
    let v = finding(&r, "log.nccl-version-mismatch");
    assert!(
        v.message.starts_with("different RCCL versions in one job: 2.18.3 on mi300-n2; 2.20.5 on mi300-n1"),
        "{}",
        v.message
    );
}

#[test]
fn older_rccl_banners_are_read() {
    let log = "h1:10:10 [0] NCCL INFO RCCL version 2.13.4+hip5.4 HEAD:6e8e4d1\n\
               h2:20:20 [0] NCCL INFO NCCL version 2.8.4+hip\n\
               h1:10:10 [0] NCCL INFO comm 0x1 rank 0 nranks 2 cudaDev 0 busId 1000 - Init COMPLETE\n\
               h2:20:20 [0] NCCL INFO comm 0x2 rank 1 nranks 2 cudaDev 0 busId 1000 - Init COMPLETE\n";
    let r = nccl::analyze_logs(&[Input { name: "old.log", bytes: log.as_bytes() }]);
    let p = proc(&r, "h1", 10);
    assert_eq!((p.library.as_deref(), p.nccl_version.as_deref()), (Some("RCCL"), Some("2.13.4")));
    assert_eq!(p.rccl_build.as_deref(), Some("hip5.4 HEAD:6e8e4d1"));
    let q = proc(&r, "h2", 20);
    assert_eq!(
        (q.library.as_deref(), q.nccl_version.as_deref(), q.rccl_build.as_deref()),
        (Some("RCCL"), Some("2.8.4"), Some("hip"))
    );
    assert!(nccl::sniff(b"RCCL version : 2.27.7-HEAD:0d2c4fd\n").is_some());
}

/// A 2-node IB job whose GPUDirect RDMA is off, with `extra` NCCL lines on both hosts.
fn gdr_job(extra: &[&str], net_between_nodes: bool) -> LogReport {
    let mut log = String::new();
    for (h, pid, rank) in [("n1", 100, 0), ("n2", 200, 1)] {
        log.push_str(&format!("{h}:{pid}:{pid} [0] NCCL INFO NCCL version 2.21.5+cuda12.4\n"));
        for e in extra {
            log.push_str(&format!("{h}:{pid}:{pid} [0] NCCL INFO {e}\n"));
        }
        log.push_str(&format!(
            "{h}:{pid}:{pid} [0] NCCL INFO comm 0x{pid} rank {rank} nRanks 2 nNodes 2 localRanks 1 localRank 0 MNNVL 0\n"
        ));
    }
    if net_between_nodes {
        log.push_str("n1:100:100 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[0] [send] via NET/IB/0\n");
        log.push_str("n2:200:200 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[0] [receive] via NET/IB/0\n");
    }
    nccl::analyze_logs(&[Input { name: "gdr.log", bytes: log.as_bytes() }])
}

#[test]
fn gpudirect_advice_follows_the_reason_the_log_states() {
    // The user's NCCL_NET_GDR_LEVEL, then the distance it decides.
    let r = gdr_job(
        &[
            "NCCL_NET_GDR_LEVEL set by environment to LOC",
            "NET/IB : GPU Direct RDMA Disabled for GPU 84000 / HCA 0 (distance 4 > 0)",
        ],
        true,
    );
    let g = finding(&r, "log.gdr-disabled");
    assert_eq!(g.severity, Severity::WARNING);
    assert!(g.message.contains("NCCL_NET_GDR_LEVEL=LOC is set by the environment"), "{}", g.message);
    assert!(g.message.contains("farther apart than NCCL_NET_GDR_LEVEL allows"), "{}", g.message);
    assert!(g.fix.starts_with("NCCL_NET_GDR_LEVEL caps") && !g.fix.contains("nvidia-peermem"), "{}", g.fix);
    // The plugin warns that a GPUDirect instance type runs without it: a warning, install advice.
    let r = gdr_job(&["NET/OFI Will not use GDR, requires Libfabric 1.18 or greater."], true);
    let g = finding(&r, "log.gdr-disabled");
    assert_eq!(g.severity, Severity::Info, "the plugin decided");
    assert!(
        g.message.contains("`NET/OFI Will not use GDR, requires Libfabric 1.18 or greater.`"),
        "{}",
        g.message
    );
    // An instance type without GPUDirect over EFA, named by the plugin.
    let r = gdr_job(
        &[
            "NET/OFI Running on g5.48xlarge platform, Setting NCCL_TOPO_FILE environment variable to /opt/g5.48xl-topo.xml",
            "NET/IB : GPU Direct RDMA Disabled for HCA 0 'efa_0'",
        ],
        true,
    );
    assert_eq!(proc(&r, "n1", 100).platform.as_deref(), Some("g5.48xlarge"));
    let g = finding(&r, "log.gdr-disabled");
    assert_eq!(g.severity, Severity::Info);
    assert!(g.message.contains("g5.48xlarge has no GPUDirect RDMA over EFA"), "{}", g.message);
    // NCCL's `no module`: the peer-memory module.
    let r = gdr_job(&["NET/IB : GPU Direct RDMA Disabled for HCA 0 'mlx5_0' (no module)"], true);
    let g = finding(&r, "log.gdr-disabled");
    assert!(g.fix.starts_with("Load the peer-memory module (nvidia-peermem"), "{}", g.fix);
}

#[test]
fn no_gpudirect_advice_for_traffic_inside_nodes() {
    // One node: the `Disabled` lines NCCL prints for every HCA at init are no finding.
    let log = "n1:1:1 [0] NCCL INFO NET/IB : GPU Direct RDMA Disabled for HCA 0 'mlx5_0' (no module)\n\
               n1:1:1 [0] NCCL INFO comm 0x1 rank 0 nRanks 2 nNodes 1 localRanks 2 localRank 0 MNNVL 0\n\
               n1:2:2 [1] NCCL INFO comm 0x2 rank 1 nRanks 2 nNodes 1 localRanks 2 localRank 1 MNNVL 0\n\
               n1:1:1 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[1] via NET/IB/0\n";
    let r = nccl::analyze_logs(&[Input { name: "one.log", bytes: log.as_bytes() }]);
    assert_eq!(ids(&r), [("log.intra-node-shm-or-net", Severity::WARNING)]);
    // Two nodes whose network only connects GPUs of one node: the intra-node finding, no RDMA advice.
    let log = "n1:1:1 [0] NCCL INFO NET/IB : GPU Direct RDMA Disabled for HCA 0 'mlx5_0' (no module)\n\
               n1:1:1 [0] NCCL INFO comm 0x1 rank 0 nRanks 3 nNodes 2 localRanks 2 localRank 0 MNNVL 0\n\
               n1:2:2 [1] NCCL INFO comm 0x2 rank 1 nRanks 3 nNodes 2 localRanks 2 localRank 1 MNNVL 0\n\
               n2:3:3 [0] NCCL INFO comm 0x3 rank 2 nRanks 3 nNodes 2 localRanks 1 localRank 0 MNNVL 0\n\
               n1:1:1 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[1] via NET/IB/0\n";
    let r = nccl::analyze_logs(&[Input { name: "two.log", bytes: log.as_bytes() }]);
    assert_eq!(ids(&r), [("log.intra-node-shm-or-net", Severity::WARNING)]);
}
