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

/// The synth job `make.py --synth` wrote the join's Inspector logs for: `rankscope synth
/// --scenario baseline --steps 2`, measured as `rankscope nccl-inspector --traces` measures it.
fn synth_job() -> (rankscope_core::analyze::Measured, Value) {
    use rankscope_core::analyze;
    use rankscope_core::normalize::{assemble, Rules};
    let mut cfg = rankscope_synth::Scenario::Baseline.config();
    cfg.steps = 2;
    let traces = (0..cfg.ranks)
        .map(|r| {
            let mut b = Vec::new();
            rankscope_synth::write_rank(&cfg, r, &mut b).unwrap();
            rankscope_core::parse::ingest_bytes(&rankscope_synth::file_name(r, false), &b).unwrap()
        })
        .collect();
    let job = assemble(traces, &[], &Rules::default());
    let manifest = serde_json::to_value(rankscope_synth::manifest(&cfg)).unwrap();
    (analyze::measure(&job, &analyze::Options::default()), manifest)
}

#[test]
fn the_join_with_the_synth_traces_finds_the_generator_truth() {
    use rankscope_core::analyze::inspector_join;
    let join = dir().with_file_name("nccl_inspector_join");
    let want: Value = serde_json::from_slice(&std::fs::read(join.join("expected.json")).unwrap()).unwrap();
    let truth: Value = serde_json::from_slice(&std::fs::read(join.join("truth.json")).unwrap()).unwrap();
    let (m, manifest) = synth_job();
    // The logs were written from this job: its collectives are the committed truth (else rerun
    // `make.py --synth DIR` on `rankscope synth --scenario baseline --steps 2 --out DIR`).
    let now: Vec<(String, u64, Value, Value)> = manifest["collectives"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            (
                c["process_group"].as_str().unwrap().into(),
                c["seq"].as_u64().unwrap(),
                c["arrival_ns"].clone(),
                c["end_ns"].clone(),
            )
        })
        .collect();
    let then: Vec<(String, u64, Value, Value)> = truth["collectives"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            (
                c["process_group"].as_str().unwrap().into(),
                c["seq"].as_u64().unwrap(),
                c["arrival_ns"].clone(),
                c["end_ns"].clone(),
            )
        })
        .collect();
    assert_eq!(
        now, then,
        "the synth job changed: regenerate nccl_inspector_join/ with nccl_inspector/make.py --synth"
    );
    let mut records = Vec::new();
    for e in std::fs::read_dir(&join).unwrap() {
        let p = e.unwrap().path();
        if p.extension().is_some_and(|x| x == "log") {
            let r = inspector::read(&p.display().to_string(), &std::fs::read(&p).unwrap());
            assert!(r.diagnostics.is_empty(), "{:?}", r.diagnostics);
            records.extend(r.records);
        }
    }
    let j = inspector_join::join(&records, &m.ops, m.analysis.matching.method);
    let n = |k: &str| want[k].as_u64().unwrap() as usize;
    assert_eq!(
        (j.inspector_calls, j.trace_ops, j.matched),
        (n("inspector_calls"), n("trace_ops"), n("matched"))
    );
    let pairs: Vec<(String, String, String, Option<i64>, usize)> = j
        .pairings
        .iter()
        .map(|p| (p.comm.clone(), p.pg.clone(), p.method.as_str().to_string(), p.offset, p.matched))
        .collect();
    let want_pairs: Vec<(String, String, String, Option<i64>, usize)> = want["pairings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| {
            let s = |k: &str| p[k].as_str().unwrap().to_string();
            (s("comm"), s("pg"), s("method"), p["offset"].as_i64(), p["matched"].as_u64().unwrap() as usize)
        })
        .collect();
    assert_eq!(pairs, want_pairs);
    assert_eq!(j.unpaired_comms, ["0x7e570000000003"]);
    // Every call the generator wrote is matched to its (group, Seq), with each member's time.
    for c in want["calls"].as_array().unwrap() {
        let pg = c["pg"].as_str().unwrap();
        let seq = c["seq"].as_i64().unwrap();
        let got =
            j.calls.iter().find(|x| x.pg == pg && x.key == seq).unwrap_or_else(|| panic!("{pg} Seq {seq}"));
        assert_eq!(got.sn, c["sn"].as_u64().unwrap());
        let exec: Vec<i64> = got.members.iter().map(|m| m.exec_ns / 1000).collect();
        let want_exec: Vec<i64> =
            c["exec_us"].as_array().unwrap().iter().map(|x| x.as_i64().unwrap()).collect();
        assert_eq!(exec, want_exec, "{pg} Seq {seq}");
    }
    // The Inspector's times are the kernels' but for the one record timed on the CPU.
    let off: Vec<(String, i64, u32)> = j.times.worst.iter().map(|d| (d.pg.clone(), d.key, d.rank)).collect();
    let want_off: Vec<(String, i64, u32)> = want["disagree"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| {
            (d["pg"].as_str().unwrap().into(), d["seq"].as_i64().unwrap(), d["rank"].as_u64().unwrap() as u32)
        })
        .collect();
    assert_eq!((j.times.disagree, off), (want_off.len(), want_off));
    assert_eq!(j.times.compared, n("matched") * 4);
    let r = j.times.ratio_p50.unwrap();
    assert!((r - 1.0).abs() < 0.01, "{r}");
}

#[test]
fn a_trace_without_sequence_numbers_is_joined_by_kind_size_and_order() {
    use rankscope_core::analyze::{inspector_join, instances::MatchMethod};
    let (m, _) = synth_job();
    let records: Vec<_> = std::fs::read_dir(dir().with_file_name("nccl_inspector_join"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "log"))
        .flat_map(|p| inspector::read("x", &std::fs::read(&p).unwrap()).records)
        .collect();
    // The same collectives keyed by their ordinal per group and kind, as the matching keys them
    // when the traces have no `Seq`.
    let mut ops = m.ops.clone();
    let mut next: std::collections::BTreeMap<(String, rankscope_core::model::CollKind), i64> =
        Default::default();
    ops.sort_by_key(|o| (o.pg.clone(), o.key));
    for o in &mut ops {
        let k = next.entry((o.pg.clone(), o.kind)).or_default();
        o.key = *k;
        *k += 1;
    }
    let j = inspector_join::join(&records, &ops, MatchMethod::OrdinalPerStep);
    assert_eq!(j.matched, ops.len());
    assert!(j.pairings.iter().all(|p| p.method.as_str() == "kind_size_order"));
    assert_eq!(j.times.disagree, 1);
}

#[test]
fn a_whole_run_before_the_profiled_window_is_told_apart_by_the_members_times() {
    use rankscope_core::analyze::inspector_join;
    let (m, _) = synth_job();
    let mut records: Vec<inspector::Record> = std::fs::read_dir(dir().with_file_name("nccl_inspector_join"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "log"))
        .flat_map(|p| inspector::read("x", &std::fs::read(&p).unwrap()).records)
        .collect();
    // 5,000 more calls of group 0's communicator before the window, the same kind and size as
    // every bucket of the traces (each member's time drawn anew): only the times tell the
    // window's calls from them.
    let comm = "0x5eed0000000a11";
    let model = records.iter().find(|r| r.comm == comm).unwrap().clone();
    for r in records.iter_mut().filter(|r| r.comm == comm) {
        r.sn += 5000;
    }
    let mut rng = rankscope_synth::Rng::new(5);
    for sn in 0..5000u64 {
        for rank in 0..4 {
            let exec_us = 500 + (rng.next_u64() % 400);
            records.push(inspector::Record { rank, sn, exec_us, ..model.clone() });
        }
    }
    let j = inspector_join::join(&records, &m.ops, m.analysis.matching.method);
    let p = j.pairings.iter().find(|p| p.comm == comm).unwrap();
    // The generator's offset (−1), moved by the 5,000 calls put before.
    assert_eq!((p.offset, p.matched), (Some(4999), 16));
    assert_eq!((j.matched, j.times.disagree), (18, 1));
}
