use super::*;

#[test]
fn heads() {
    let h = parse_head("[1,4]<stdout>:nccl-tests-efa-16-worker-0:29:29 [4] NCCL INFO Bootstrap : Using eth0")
        .expect("head");
    assert_eq!((h.host, h.pid, h.tid, h.dev), ("nccl-tests-efa-16-worker-0", 29, 29, Some(4)));
    assert_eq!(h.msg, "Bootstrap : Using eth0");
    let h = parse_head("gdr114:1766944:1766944 [0] showVersion, 544 NCCL INFO NCCL version 2.26.6")
        .expect("head");
    assert_eq!(h.extra, "showVersion, 544");
    let h = parse_head("node-2:5776:5902 [0] transport/net_ib.cc:1296 NCCL WARN NET/IB : Got").expect("head");
    assert_eq!((h.level, h.extra), (Level::Warn, "transport/net_ib.cc:1296"));
    let h =
        parse_head("1: p5-dy-gpu-3:47930:47930 [0] NCCL INFO NCCL version 2.26.2+cuda12.2").expect("head");
    assert_eq!(h.host, "p5-dy-gpu-3");
    assert!(parse_head("12:30:45 NCCL INFO x").is_none());
    assert_eq!(launcher_rank("[1,12]<stdout>:x"), Some(12));
    assert_eq!(launcher_rank("2: p5"), Some(2));
    assert_eq!(launcher_rank("[rank3]:host:1:1 [0] NCCL INFO x"), Some(3));
    assert_eq!(launcher_rank("[default1]:host:1:1 [0] NCCL INFO x"), Some(1));
    assert_eq!(launcher_rank("[2025-01-01 10:00:00] host:1:1 [0] NCCL INFO x"), None);
}

#[test]
fn nets_and_trees() {
    assert_eq!(net_of("NET/AWS Libfabric/0/GDRDMA"), Some(("AWS Libfabric".into(), true)));
    assert_eq!(net_of("NET/IB/0"), Some(("IB".into(), false)));
    assert_eq!(net_of("P2P/IPC/read"), None);
    assert_eq!(net_of("NET/IB/0(1)/GDRDMA"), Some(("IB".into(), true)));
    assert_eq!(split_version("2.5.7+cudaCUDA_MAJOR.CUDA_MINOR"), ("2.5.7".into(), None));
    assert_eq!(split_version("2.26.5+cuda12.9"), ("2.26.5".into(), Some("12.9".into())));
    let h = Head { host: "h", pid: 1, tid: 1, dev: Some(0), level: Level::Info, extra: "", msg: "" };
    let t = parse_tree("1/8/-1->0->-1", &h, 0).expect("tree");
    assert_eq!((t.rank, t.up, t.down), (0, -1, vec![1, 8]));
    let t = parse_tree("-1->0->1/-1/-1", &h, 0).expect("tree");
    assert_eq!((t.rank, t.up, t.down), (0, -1, vec![1]));
}
