//! `ncclras` status reports (`nccl::ras`) against what they must say: the reports of
//! `fixtures/nccl_ras/` (its `make.py` writes them with NCCL's own printf layouts and computes
//! `expected.json` from the jobs it describes), and hostile input that must end in a report or
//! a message naming the file, the format and the byte offset, never a panic or an allocation
//! sized by a claimed count.

// Tests read fixtures from disk; the core never does (its clippy.toml).
#![allow(clippy::disallowed_methods, clippy::disallowed_types)]
#![allow(clippy::expect_used, clippy::unwrap_used)] // a failed expectation is the test failing

use std::path::PathBuf;

use rankscope_core::nccl::ras::{self, RasFormat, RasStatus};
use serde_json::Value;

fn dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/nccl_ras")
}

fn read(name: &str) -> RasStatus {
    let b = std::fs::read(dir().join(name)).unwrap();
    let head = &b[..b.len().min(64 << 10)];
    assert!(ras::sniff(head).is_some(), "{name} is recognised by content");
    ras::read(name, &b).unwrap_or_else(|e| panic!("{e}"))
}

#[test]
fn every_fixture_says_what_it_must() {
    let want: Value = serde_json::from_slice(&std::fs::read(dir().join("expected.json")).unwrap()).unwrap();
    let files = want.as_object().unwrap();
    assert_eq!(files.len(), 5);
    for (name, w) in files {
        let s = read(name);
        let ctx = format!("{name}: {:#?}", s.headline);
        assert_eq!(s.format.as_str(), w["format"].as_str().unwrap(), "{ctx}");
        assert_eq!(s.healthy(), w["healthy"].as_bool().unwrap(), "{ctx}");
        assert_eq!(s.comms_total, w["comms_total"].as_i64().unwrap(), "{ctx}");
        assert!(s.headline[0].starts_with(w["headline"].as_str().unwrap()), "{ctx}");
        if let Some(n) = w.get("nodes") {
            assert_eq!((s.nodes, s.gpus), (n.as_i64(), w["gpus"].as_i64()), "{ctx}");
        }
        let bad: Vec<&str> = s
            .comms
            .iter()
            .filter(|c| c.missing > 0 || !c.issues.is_empty())
            .map(|c| c.hash.as_str())
            .collect();
        let comms = w["comms"].as_object().unwrap();
        assert_eq!(bad.len(), comms.len(), "{ctx}");
        for (hash, wc) in comms {
            let c = s.comms.iter().find(|c| &c.hash == hash).unwrap_or_else(|| panic!("{ctx}: {hash}"));
            assert_eq!(c.size, wc["size"].as_i64(), "{ctx}: {hash}");
            assert_eq!(c.missing, wc["missing"].as_i64().unwrap(), "{ctx}: {hash}");
            let got: Vec<(i64, String, Option<String>, Option<i64>)> = c
                .issues
                .iter()
                .map(|i| (i.rank, i.problem.as_str().to_string(), i.host.clone(), i.gpu))
                .collect();
            let exp: Vec<(i64, String, Option<String>, Option<i64>)> = wc["issues"]
                .as_array()
                .unwrap()
                .iter()
                .map(|i| {
                    (
                        i[0].as_i64().unwrap(),
                        i[1].as_str().unwrap().to_string(),
                        i[2].as_str().map(str::to_string),
                        i[3].as_i64(),
                    )
                })
                .collect();
            assert_eq!(got, exp, "{ctx}: {hash}");
            assert_eq!(
                c.mismatches.len() as u64,
                wc.get("mismatches").and_then(Value::as_u64).unwrap_or(0),
                "{ctx}"
            );
        }
        if let Some(dead) = w.get("dead") {
            let procs = |v: &Value| -> Vec<(String, i64, Vec<i64>)> {
                v.as_array()
                    .unwrap()
                    .iter()
                    .map(|p| {
                        let gpus = p[2].as_array().unwrap().iter().map(|g| g.as_i64().unwrap()).collect();
                        (p[0].as_str().unwrap().to_string(), p[1].as_i64().unwrap(), gpus)
                    })
                    .collect()
            };
            let got = |ps: &[ras::Process]| -> Vec<(String, i64, Vec<i64>)> {
                ps.iter().map(|p| (p.host.clone(), p.pid.unwrap_or(-1), p.gpus.clone())).collect()
            };
            assert_eq!(got(&s.dead_processes), procs(dead), "{ctx}");
            assert_eq!(got(&s.not_responding_processes), procs(&w["not_responding"]), "{ctx}");
            assert_eq!(s.timeouts, w["timeouts"].as_i64().unwrap(), "{ctx}");
        }
        // The report reads back from its JSON.
        let back: RasStatus = serde_json::from_str(&serde_json::to_string(&s).unwrap()).unwrap();
        assert_eq!(back, s);
    }
}

#[test]
fn a_rank_never_named_is_counted_not_invented() {
    // The 2.24 report's second communicator misses 12 ranks RAS does not list (not outliers).
    let s = read("missing_224.txt");
    let c = s.comms.iter().find(|c| c.hash == "0x1234").unwrap();
    assert_eq!((c.missing, c.issues.len()), (12, 0));
    assert!(
        s.headline.iter().any(|h| h.contains("12 ranks missing that RAS did not name")),
        "{:?}",
        s.headline
    );
}

/// A report, or an error naming the file, the format and a byte offset inside the input.
fn survives(name: &str, bytes: &[u8]) -> Result<RasStatus, String> {
    match ras::read(name, bytes) {
        Ok(s) => Ok(s),
        Err(e) => {
            let msg = e.to_string();
            assert!(msg.starts_with(&format!("{name}: not an NCCL RAS status (")), "{msg}");
            assert!(msg.contains(&format!("at byte {}", e.offset)), "{msg}");
            assert!(e.offset <= bytes.len(), "{msg}");
            Err(msg)
        }
    }
}

#[test]
fn hostile_input_never_panics_and_says_where() {
    // A count claiming 10^9 ranks is a number: nothing is sized by it.
    let huge = br#"{"nccl_version":"2.29.1","communicators_count":1000000000,"communicators":[{"hash":"0x1","size":1000000000,"ranks_count":1000000000,"missing_ranks_count":1000000000,"ranks":[],"missing_ranks":[]}]}"#;
    let s = survives("huge.json", huge).unwrap();
    assert_eq!(
        (s.comms[0].size, s.comms[0].missing, s.comms[0].issues.len()),
        (Some(1_000_000_000), 1_000_000_000, 0)
    );
    assert!(s.headline[0].contains("1000000000 ranks missing that RAS did not name"), "{:?}", s.headline);
    // The text forms of the same claims.
    let text = b"Job summary\n===========\n\nErrors\n======\n\n#0-0 (0000000000000001) INCOMPLETE\n  Missing communicator data from 1000000000 ranks\n  The missing ranks: 0-999999999\n";
    let s = survives("huge.txt", text).unwrap();
    assert_eq!(s.comms[0].missing, 1_000_000_000);
    assert_eq!(s.comms[0].issues.len(), ras::MAX_LISTED);
    // NaN is not JSON: the byte where it starts.
    let nan =
        b"{\n  \"nccl_version\": \"2.29.1\",\n  \"communicators\": [{\"hash\": \"0x1\", \"size\": NaN}]\n}\n";
    let e = survives("nan.json", nan).unwrap_err();
    let at = nan.windows(3).position(|w| w == b"NaN").unwrap();
    assert!(e.contains("(json) at byte") && e.contains(&format!("at byte {at}")), "{e} (NaN at {at})");
    // A 10 MB line: a JSON string, and text with no line end.
    let mut long = b"{\"nccl_version\":\"".to_vec();
    long.extend(std::iter::repeat_n(b'x', 10 << 20));
    long.extend(b"\",\"communicators\":[]}");
    let s = survives("long.json", &long).unwrap();
    assert!(s.healthy() && s.comms.is_empty());
    let mut long = b"Job summary\n".to_vec();
    long.extend(std::iter::repeat_n(b'7', 10 << 20));
    assert!(survives("long.txt", &long).is_ok());
    // Cut in the middle, nested too deep, binary, empty, CR-only: each a report or a message.
    let cut = &huge[..huge.len() / 2];
    let e = survives("cut.json", cut).unwrap_err();
    assert!(e.contains(&format!("at byte {}", cut.len())), "{e}");
    let mut deep = b"{\"communicators\":[], \"nccl_version\": ".to_vec();
    deep.extend(std::iter::repeat_n(b'[', 100_000));
    assert!(survives("deep.json", &deep).is_err());
    let e = survives("binary.bin", &[0u8, 159, 146, 150, 0xff, b'\n', 3]).unwrap_err();
    assert!(e.contains("(json or text) at byte 0"), "{e}");
    assert!(survives("empty", b"").is_err());
    let cr = b"Job summary\r\rGroup     Comms     Nodes     Ranks     Ranks     Ranks    Status  Errors\r    #  in group\r    0         2         1         1         4         8   RUNNING      OK\r";
    let s = survives("cr.txt", cr).unwrap();
    assert_eq!(s.comms_total, 2);
    assert_eq!(ras::sniff(cr), Some(RasFormat::Text));
}

#[test]
fn other_nccl_outputs_are_not_ras_reports() {
    let inspector = std::fs::read(
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/nccl_inspector/node-a-pid4101.log"),
    )
    .unwrap();
    assert_eq!(ras::sniff(&inspector), None);
    assert_eq!(ras::sniff(br#"{"traceEvents": [], "communicators": 1}"#), None);
    assert_eq!(ras::sniff(b"node-1:123:456 [0] NCCL INFO Bootstrap : Using eth0\n"), None);
}

#[test]
fn ranks_that_only_disagree_are_a_warning_after_the_verdict() {
    // Every rank reported, no error; rank 1 launched one AllReduce fewer than rank 0.
    let rank = |r: i64, n: u64| {
        format!(
            r#"{{"rank":{r},"host":"10.0.0.1","pid":{},"cuda_dev":{r},"nvml_dev":{r},"status":{{"init_state":0,"async_error":0,"finalize_called":false,"destroy_flag":false,"abort_flag":false}},"collective_counts":{{"AllReduce":{n}}}}}"#,
            100 + r
        )
    };
    let doc = format!(
        r#"{{"nccl_version":"2.29.1","communicators":[{{"hash":"0xabc","size":2,"ranks_count":2,"missing_ranks_count":0,"ranks":[{},{}],"missing_ranks":[]}}]}}"#,
        rank(0, 6650),
        rank(1, 6649)
    );
    let s = ras::read("mismatch.json", doc.as_bytes()).unwrap();
    assert!(s.healthy());
    assert!(s.headline[0].starts_with("every communicator is complete: 1 communicator"), "{:?}", s.headline);
    assert!(
        s.headline[1].starts_with("warning: communicator 0xabc (2 ranks): mismatch: AllReduce counts differ: the others at 6650, 1 rank at 6649 (1)"),
        "{:?}",
        s.headline
    );
}
