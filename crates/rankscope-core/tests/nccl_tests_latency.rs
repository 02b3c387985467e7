//! nccl-tests latency findings (docs/nccl.md, "Latency"): the small-message floor against the
//! transport, the multi-node floor against one node's, larger sizes that finish sooner, steps in
//! the curve. On the synthetic rccl-tests fixtures (what each models is in its header), on
//! tables generated here from a latency-bandwidth model, and on every real file in
//! `shared/nccl-tests` and `shared/nccl-logs`, which must give no latency finding but the one
//! their numbers support.

// Tests read the zoo and ../shared from disk; the core never does (its clippy.toml).
#![allow(clippy::disallowed_methods, clippy::disallowed_types)]
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::float_cmp)]

use rankscope_core::nccl::perf::{self, FloorTransport, TestSuite, TestsReport};
use rankscope_core::nccl::{self, Input, Severity};

const SHARED: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../../shared/");
const FIXTURES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/nccl/");
const ONE_NODE: &str = "tests_rccl-tests_mi300x-1node-8gpu_allreduce_SYNTHETIC.txt";
const TWO_NODES: &str = "tests_rccl-tests_mi300x-2node-16gpu_allreduce_latency-step-inversion_SYNTHETIC.txt";

const LATENCY_IDS: [&str; 4] =
    ["tests.latency-floor", "tests.internode-latency", "tests.non-monotonic", "tests.curve-step"];

fn read(path: &str) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{path}: {e}"))
}

fn analyze(files: &[(&str, &str)]) -> TestsReport {
    let inputs: Vec<Input<'_>> =
        files.iter().map(|(name, text)| Input { name, bytes: text.as_bytes() }).collect();
    nccl::analyze_tests(&inputs, None)
}

fn ids(r: &TestsReport) -> Vec<(&str, Severity)> {
    r.findings.iter().map(|f| (f.id.as_str(), f.severity)).collect()
}

fn finding<'a>(r: &'a TestsReport, id: &str) -> &'a nccl::Finding {
    r.findings.iter().find(|f| f.id == id).unwrap_or_else(|| panic!("no {id} in {:?}", ids(r)))
}

fn latency_ids(r: &TestsReport) -> Vec<&str> {
    r.findings.iter().map(|f| f.id.as_str()).filter(|id| LATENCY_IDS.contains(id)).collect()
}

/// An all_reduce_perf table of `hosts` × `gpus` ranks, 8 B to 64 MiB, whose out-of-place time
/// is `time(size)` µs and in-place time 1% more; `head` goes before it (NCCL lines).
fn table(hosts: usize, gpus: usize, head: &str, time: impl Fn(u64) -> f64) -> String {
    let n = hosts * gpus;
    let mut s = String::from(head);
    s.push_str("# Collective test starting: all_reduce_perf\n");
    s.push_str("# nThread 1 nGpus 1 minBytes 8 maxBytes 67108864 step: 2(factor) warmup iters: 5 iters: 20 agg iters: 1 validation: 1 graph: 0\n#\n# Using devices\n");
    for r in 0..n {
        s.push_str(&format!(
            "#  Rank {r:2} Group  0 Pid {:6} on node{} device {:2} [0x{:02x}] NVIDIA H100 80GB HBM3\n",
            1000 + r,
            r / gpus,
            r % gpus,
            r % gpus
        ));
    }
    s.push_str("#\n#                                                              out-of-place                       in-place\n");
    s.push_str("#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   busbw #wrong\n");
    s.push_str("#        (B)    (elements)                               (us)  (GB/s)  (GB/s)            (us)  (GB/s)  (GB/s)\n");
    let factor = 2.0 * (n as f64 - 1.0) / n as f64;
    for k in 3..=26 {
        let size = 1u64 << k;
        let mut cols = String::new();
        for t in [time(size), time(size) * 1.01] {
            let alg = size as f64 / t / 1e3;
            cols.push_str(&format!(" {t:8.2} {alg:7.2} {:7.2}      0", alg * factor));
        }
        s.push_str(&format!("{size:12} {:13}     float     sum      -1{cols}\n", size / 4));
    }
    s.push_str("# Out of bounds values : 0 OK\n# Avg bus bandwidth    : 1.0\n#\n");
    s
}

/// α + S/B: `alpha` µs, `gbps` GB/s of algbw.
fn model(alpha: f64, gbps: f64) -> impl Fn(u64) -> f64 {
    move |s| alpha + s as f64 / (gbps * 1e3)
}

#[test]
fn rccl_tests_one_node_is_read_and_gives_no_latency_finding() {
    let r = analyze(&[(ONE_NODE, &read(&format!("{FIXTURES}{ONE_NODE}")))]);
    let t = &r.tests[0];
    assert_eq!(t.suite, Some(TestSuite::RcclTests));
    assert_eq!(t.nccl_tests_version.as_deref(), Some("develop:0a1b2c3"));
    assert_eq!(t.library_version.as_deref(), Some("RCCL 2.20.5-HEAD:fd6a9e1"));
    assert_eq!((t.n_ranks, t.hosts.len(), t.rows.len()), (Some(8), 1, 24));
    let a = t.analysis.as_ref().unwrap();
    assert_eq!((a.floor_us, a.floor_size_bytes), (Some(15.56), Some(256)));
    let e = perf::expected_floor(t).unwrap();
    assert_eq!((e.transport, e.max_us), (FloorTransport::IntraNode, perf::INTRA_NODE_FLOOR_MAX_US));
    assert_eq!(ids(&r), []);
}

#[test]
fn rccl_tests_two_nodes_floor_inversion_and_step() {
    let r = analyze(&[(TWO_NODES, &read(&format!("{FIXTURES}{TWO_NODES}")))]);
    let t = &r.tests[0];
    assert_eq!((t.suite, t.n_ranks, t.hosts.len()), (Some(TestSuite::RcclTests), Some(16), 2));
    assert_eq!(t.analysis.as_ref().unwrap().floor_us, Some(218.0));
    assert_eq!(
        ids(&r),
        [
            ("tests.curve-step", Severity::WARNING),
            ("tests.latency-floor", Severity::WARNING),
            ("tests.non-monotonic", Severity::WARNING)
        ]
    );
    // No network named in the output: the widest bound of any fabric.
    let f = finding(&r, "tests.latency-floor");
    assert!(
        f.message.contains(
            "small messages take 218.0 µs (the 256 B row), more than the 200.0 µs a network fabric"
        ),
        "{}",
        f.message
    );
    assert!(f.fix.contains("GPUDirect RDMA") && f.fix.contains("NCCL_ALGO=Ring"), "{}", f.fix);
    assert!(f.fix.contains("RCCL_MSCCL_ENABLE=0") && f.fix.contains("HSA_NO_SCRATCH_RECLAIM=1"), "{}", f.fix);
    assert_eq!(f.quotes.iter().map(|q| q.line).collect::<Vec<_>>(), [43]);
    // 256 KiB in 427.4 µs, 512 KiB in 348.7 µs.
    let f = finding(&r, "tests.non-monotonic");
    assert!(f.message.contains("512 KiB in 348.7 µs after 256 KiB in 427.4 µs"), "{}", f.message);
    assert!(f.fix.contains("NCCL_DEBUG_SUBSYS=TUNING") && f.fix.contains("NCCL_PROTO"), "{}", f.fix);
    assert_eq!(f.quotes.iter().map(|q| q.line).collect::<Vec<_>>(), [53, 54]);
    // 16 KiB → 32 KiB: +115 µs where the curve is flat on both sides.
    let f = finding(&r, "tests.curve-step");
    assert!(f.message.contains("2 host(s)): 1 step(s) in the curve"), "{}", f.message);
    assert!(
        f.message.contains("from 16 KiB to 32 KiB the time grows 1.54× (219.3 µs → 338.1 µs)"),
        "{}",
        f.message
    );
    assert!(f.fix.contains("NCCL_NET_GDR_LEVEL"), "across nodes: {}", f.fix);
    assert_eq!(f.quotes.iter().map(|q| q.line).collect::<Vec<_>>(), [49, 50]);
}

#[test]
fn the_multi_node_floor_is_compared_with_one_nodes() {
    let one = read(&format!("{FIXTURES}{ONE_NODE}"));
    let two = read(&format!("{FIXTURES}{TWO_NODES}"));
    let r = analyze(&[(ONE_NODE, &one), (TWO_NODES, &two)]);
    assert_eq!(
        latency_ids(&r),
        ["tests.curve-step", "tests.internode-latency", "tests.latency-floor", "tests.non-monotonic"]
    );
    let f = finding(&r, "tests.internode-latency");
    assert!(
        f.message.contains("across 2 hosts small messages take 218.0 µs, 14.0× the 15.6 µs of one node"),
        "{}",
        f.message
    );
    assert!(f.fix.contains("NCCL_ALGO=Tree") && f.fix.contains("NCCL_IB_HCA"), "{}", f.fix);
    let files: Vec<&str> = f.quotes.iter().map(|q| q.file.as_str()).collect();
    assert!(files.contains(&ONE_NODE) && files.contains(&TWO_NODES), "{files:?}");
    // A 2-node floor twice one node's is what a network step adds: no finding.
    let near = table(2, 8, "", model(31.0, 40.0));
    let r = analyze(&[(ONE_NODE, &one), ("near.txt", &near)]);
    assert_eq!(latency_ids(&r), [] as [&str; 0]);
}

#[test]
fn the_bound_follows_the_network_the_file_names() {
    // 150 µs: beyond IB/RoCE, within EFA and the unnamed-network bound.
    let slow = |head: &str| table(2, 8, head, model(150.0, 40.0));
    let ib = "node0:1:1 [0] NCCL INFO Using network IB\n";
    let r = analyze(&[("ib.txt", &slow(ib))]);
    assert_eq!(r.tests[0].network.as_deref(), Some("IB"));
    assert_eq!(latency_ids(&r), ["tests.latency-floor"]);
    let f = finding(&r, "tests.latency-floor");
    assert!(
        f.message.contains("more than the 100.0 µs an IB/RoCE fabric should stay under"),
        "{}",
        f.message
    );
    assert!(!f.fix.contains("RCCL"), "an NVIDIA table: {}", f.fix);
    // The environment forces a protocol: the fix says so first.
    let forced = format!("{ib}node0:1:1 [0] NCCL INFO NCCL_PROTO set by environment to Simple\n");
    let r = analyze(&[("forced.txt", &slow(&forced))]);
    let f = finding(&r, "tests.latency-floor");
    assert!(f.fix.starts_with("NCCL_PROTO=Simple is set by the environment: unset it first"), "{}", f.fix);
    // The connection lines name the network when `Using network` is absent.
    let efa = "node0:1:1 [0] NCCL INFO Channel 00/0 : 0[0] -> 8[0] [send] via NET/AWS Libfabric/0/GDRDMA\n";
    let r = analyze(&[("efa.txt", &slow(efa))]);
    assert_eq!(r.tests[0].network.as_deref(), Some("AWS Libfabric"));
    assert_eq!(perf::expected_floor(&r.tests[0]).unwrap().transport, FloorTransport::Efa);
    assert_eq!(latency_ids(&r), [] as [&str; 0]);
    let r = analyze(&[("unnamed.txt", &slow(""))]);
    assert_eq!(latency_ids(&r), [] as [&str; 0]);
    // TCP sockets are slow by nature: reported by the busbw and log findings, not here.
    let r = analyze(&[(
        "socket.txt",
        &table(2, 8, "node0:1:1 [0] NCCL INFO Using network Socket\n", model(400.0, 2.0)),
    )]);
    assert!(perf::expected_floor(&r.tests[0]).is_none());
    assert_eq!(latency_ids(&r), [] as [&str; 0]);
    // Inside one node 60 µs is beyond a few NVLink hops: P2P advice.
    let r = analyze(&[("one.txt", &table(1, 8, "", model(60.0, 150.0)))]);
    assert_eq!(latency_ids(&r), ["tests.latency-floor"]);
    let f = finding(&r, "tests.latency-floor");
    assert!(
        f.message.contains("more than the 50.0 µs one node's GPU links should stay under"),
        "{}",
        f.message
    );
    assert!(f.fix.contains("NCCL_P2P_DISABLE") && !f.fix.contains("GPUDirect"), "{}", f.fix);
}

#[test]
fn smooth_curves_noise_and_knees_are_no_finding() {
    // The α + S/B model: a knee where bandwidth takes over, nothing else.
    let r = analyze(&[("smooth.txt", &table(2, 8, "", model(30.0, 40.0)))]);
    assert_eq!(latency_ids(&r), [] as [&str; 0]);
    // ±5% noise alternating between sizes: neither an inversion nor a step.
    let noisy = model(30.0, 40.0);
    let r = analyze(&[(
        "noisy.txt",
        &table(2, 8, "", |s| noisy(s) * if s.trailing_zeros() % 2 == 0 { 1.05 } else { 0.95 }),
    )]);
    assert_eq!(latency_ids(&r), [] as [&str; 0]);
    // A protocol switch at 64 KiB (+40 µs on a 30 µs floor): a step.
    let base = model(30.0, 40.0);
    let r = analyze(&[("step.txt", &table(2, 8, "", |s| base(s) + if s >= 65536 { 40.0 } else { 0.0 }))]);
    assert_eq!(latency_ids(&r), ["tests.curve-step"]);
    let f = finding(&r, "tests.curve-step");
    assert!(f.message.contains("from 32 KiB to 64 KiB"), "{}", f.message);
}

/// Every real file: the latency findings they give. Only the patched 2-node V100 RoCE
/// all_gather gives one: its small messages take 453-479 µs where the same two hosts' NCCL
/// 2.5.7 run takes 91 µs and IB/RoCE should stay under 100 µs; its log says GPUDirect RDMA is
/// off. The others stay under their bound (p4d over EFA 175 µs, bound 300; the socket job
/// 169 µs, no bound) or have no small rows, no hosts or one rank.
#[test]
fn real_files_give_no_false_latency_finding() {
    let mut seen = Vec::new();
    for dir in ["nccl-tests", "nccl-logs"] {
        let mut files: Vec<_> =
            std::fs::read_dir(format!("{SHARED}{dir}")).unwrap().map(|e| e.unwrap().path()).collect();
        files.sort();
        for p in files {
            let name = p.file_name().unwrap().to_str().unwrap().to_string();
            let text = String::from_utf8_lossy(&std::fs::read(&p).unwrap()).into_owned();
            let r = analyze(&[(&name, &text)]);
            for id in latency_ids(&r) {
                seen.push((name.clone(), id.to_string()));
            }
        }
    }
    let patched = "ssbandjl_2node-4rank-v100-RoCE_nccl2.26.6-PATCHED-mixed-format.log";
    assert_eq!(seen, [(patched.to_string(), "tests.latency-floor".to_string())]);
    let text = read(&format!("{SHARED}nccl-logs/{patched}"));
    let r = analyze(&[(patched, &text)]);
    assert_eq!(perf::expected_floor(&r.tests[0]).unwrap().transport, FloorTransport::Rdma);
    let f = finding(&r, "tests.latency-floor");
    assert!(
        f.message.contains(
            "small messages take 452.7 µs (the 1 KiB row), more than the 100.0 µs an IB/RoCE fabric"
        ),
        "{}",
        f.message
    );
    // Real floors the bounds must leave alone.
    let floor = |dir: &str, name: &str| {
        let text =
            String::from_utf8_lossy(&std::fs::read(format!("{SHARED}{dir}/{name}")).unwrap()).into_owned();
        let r = analyze(&[(name, &text)]);
        let t = &r.tests[0];
        (t.analysis.as_ref().unwrap().floor_us, perf::expected_floor(t).map(|e| e.transport))
    };
    assert_eq!(
        floor("nccl-logs", "aws-efa-eks_2node-16rank-p4d_EFA-OFI_nccl2.9.9.log"),
        (Some(175.0), Some(FloorTransport::Efa))
    );
    assert_eq!(
        floor("nccl-logs", "ssbandjl_2node-v100-RoCE_NET-IB_nccl2.5.7_allgather.log"),
        (Some(91.48), Some(FloorTransport::Rdma))
    );
    assert_eq!(
        floor("nccl-logs", "aws-hpc-tutorials_2node-a10g_NET-Socket_nccl2.11.4.log"),
        (Some(168.9), None)
    );
    assert_eq!(floor("nccl-tests", "awsome-dt_p4de-2node_allreduce_srun-label.txt"), (Some(160.6), None));
}
