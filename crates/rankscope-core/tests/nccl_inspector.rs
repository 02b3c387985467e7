//! NCCL Inspector logs (`nccl::inspector`) against what they must say: the fixture job of
//! `fixtures/nccl_inspector/` (its `make.py` writes the logs in the plugin's documented output
//! format and computes `expected.json` on its own).

// Tests read fixtures from disk; the core never does (its clippy.toml).
#![allow(clippy::disallowed_methods, clippy::disallowed_types)]
#![allow(clippy::expect_used, clippy::unwrap_used)] // a failed expectation is the test failing

use std::path::PathBuf;

use rankscope_core::nccl::inspector::{self, Read};
use serde_json::Value;

fn dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/nccl_inspector")
}

fn reads() -> Vec<Read> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir())
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "log"))
        .collect();
    files.sort();
    assert_eq!(files.len(), 4);
    files
        .iter()
        .map(|p| {
            let b = std::fs::read(p).unwrap();
            assert!(inspector::looks_like(&b), "{}", p.display());
            inspector::read(&p.display().to_string(), &b)
        })
        .collect()
}

#[test]
fn the_fixture_job_says_what_it_must() {
    let want: Value = serde_json::from_slice(&std::fs::read(dir().join("expected.json")).unwrap()).unwrap();
    let reads = reads();
    let r = inspector::summarize(&reads);
    assert_eq!(r.records as u64, want["records"].as_u64().unwrap());
    assert_eq!(r.versions, ["v4.0"]);
    // The line cut in the middle is said, with its file, line and byte; the rest is read.
    assert_eq!(r.diagnostics.len() as u64, want["bad_lines"].as_u64().unwrap(), "{:?}", r.diagnostics);
    let cut = std::fs::read(dir().join("node-b-pid5202.log")).unwrap();
    let body = &cut[..cut.len() - 1];
    let at = body.iter().rposition(|&b| b == b'\n').unwrap() + 1;
    let line = body[..at].iter().filter(|&&b| b == b'\n').count() + 1;
    let said = format!("node-b-pid5202.log: line {line} (byte {at}): not JSON");
    assert!(r.diagnostics[0].contains(&said), "{} / {said}", r.diagnostics[0]);
    let dp = r.comms.iter().find(|c| c.name.as_deref() == Some("DP Group 0")).unwrap();
    assert_eq!((dp.n_ranks, dp.nnodes, dp.ranks_seen.as_slice()), (4, 2, &[0, 1, 2, 3][..]));
    assert_eq!(dp.hosts, ["node-a", "node-b"]);
    let l = dp.last_arriver.as_ref().expect("a last arriver in the DP group");
    let w = &want["dp"]["last_arriver"];
    assert_eq!(l.rank, w["rank"].as_i64().unwrap());
    assert_eq!(l.host, w["host"].as_str().unwrap());
    assert_eq!((l.calls as u64, l.last as u64), (w["calls"].as_u64().unwrap(), w["last"].as_u64().unwrap()));
    assert_eq!(l.wait_p50_us, w["wait_p50_us"].as_f64().unwrap());
    assert_eq!(l.wait_total_us, w["wait_total_us"].as_u64().unwrap());
    let ar = dp.bands.iter().find(|b| b.func == "AllReduce").unwrap();
    assert_eq!(
        (ar.size.as_str(), ar.calls as u64),
        ("64-256 MiB", want["dp"]["allreduce_calls"].as_u64().unwrap())
    );
    assert_eq!(ar.exec_p50_us, want["dp"]["allreduce_exec_p50_us"].as_f64().unwrap());
    // The best bandwidth of a call is its last arriver's (it waited least): the band's best is
    // at least its median.
    assert!(ar.busbw_max_gbs.unwrap() >= ar.busbw_p50_gbs.unwrap());
    let tp = r.comms.iter().find(|c| c.name.as_deref() == Some("TP Group 0")).unwrap();
    assert_eq!(tp.last_arriver.as_ref().map(|l| l.rank), want["tp_last_arriver"].as_i64());
    // Point-to-point records are read (peer kept), never counted as collectives' arrivals.
    let pp = r.comms.iter().find(|c| c.name.as_deref() == Some("PP Group 0")).unwrap();
    assert!(pp.last_arriver.is_none());
    assert_eq!(pp.bands.iter().map(|b| b.func.as_str()).collect::<Vec<_>>(), ["Recv", "Send"]);
    let p2p: Vec<_> = reads.iter().flat_map(|x| &x.records).filter(|x| x.peer.is_some()).collect();
    assert_eq!(p2p.len(), 4);
    // The verbose record's start, the "nan" bandwidth left out.
    let all: Vec<_> = reads.iter().flat_map(|x| &x.records).collect();
    assert_eq!(all.iter().filter(|x| x.start_us.is_some()).count(), 1);
    assert_eq!(all.iter().filter(|x| x.peer.is_none() && x.busbw_gbs.is_none()).count(), 1);
    // The note names the rank, its host and the others' wait, the most costly communicator first.
    assert!(r.notes[0].contains("rank 2 on node-b arrives last at 18 of the 24"), "{}", r.notes[0]);
    assert_eq!(r.notes.len(), 1);
}

#[test]
fn what_is_not_an_inspector_log_is_said_so() {
    assert!(!inspector::looks_like(b"{\"traceEvents\": []}"));
    assert!(!inspector::looks_like(b"NCCL INFO Bootstrap : Using eth0"));
    let r = inspector::read("x.log", b"{\"header\": {\"rank\": 0}}\nnot json\n\n{\"a\": 1}\n");
    assert!(r.records.is_empty());
    assert_eq!(r.diagnostics.len(), 3, "{:?}", r.diagnostics);
    // Line 2 starts after the first line's 23 bytes and its newline.
    assert!(r.diagnostics[1].starts_with("x.log: line 2 (byte 24): not JSON"), "{}", r.diagnostics[1]);
    // An Inspector log given to `analyze` is named and sent to `nccl-inspector`.
    let b = std::fs::read(dir().join("node-a-pid4101.log")).unwrap();
    let f = rankscope_core::input::identify("node-a-pid4101.log", &b, &b).expect("identified");
    assert!(f.instead.contains("rankscope nccl-inspector"), "{}", f.instead);
}
