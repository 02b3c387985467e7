//! Bad input never panics or hangs: deterministic mutations of real and fixture traces (cuts,
//! flipped bytes, inserted garbage, deleted ranges), fed in random chunk sizes.

// Tests read the zoo and ../shared from disk; the core never does (its clippy.toml).
#![allow(clippy::disallowed_methods, clippy::disallowed_types)]

mod common;

use common::*;
use rankscope_core::normalize::{assemble, Rules};
use rankscope_synth::Rng;

fn mutate(rng: &mut Rng, src: &[u8]) -> Vec<u8> {
    let mut v = src.to_vec();
    for _ in 0..1 + rng.below(4) {
        let at = rng.below(v.len());
        match rng.below(6) {
            0 => v.truncate(at),
            1 => {
                if let Some(b) = v.get_mut(at) {
                    *b = rng.next_u64() as u8;
                }
            }
            2 => {
                let junk: &[&[u8]] = &[
                    b"N/A",
                    b"...",
                    b"\xff\xfe",
                    b"{",
                    b"}",
                    b"]",
                    b"\"",
                    b"\\",
                    b"99999999999999999999999",
                    b"-",
                    b"[[[[",
                    b",",
                ];
                let j = junk[rng.below(junk.len())];
                v.splice(at..at, j.iter().copied());
            }
            3 => {
                let end = (at + rng.below(200)).min(v.len());
                v.drain(at..end);
            }
            4 => {
                let end = (at + rng.below(50)).min(v.len());
                let copy: Vec<u8> = v[at..end].to_vec();
                let to = rng.below(v.len());
                v.splice(to..to, copy);
            }
            _ => {
                if let Some(b) = v.get_mut(at) {
                    *b ^= 1 << rng.below(8);
                }
            }
        }
    }
    v
}

#[test]
fn mutated_inputs_never_panic() {
    let mut sources: Vec<Vec<u8>> = Vec::new();
    for e in std::fs::read_dir(fixture("edge")).unwrap_or_else(|e| panic!("{e}")).filter_map(Result::ok) {
        sources.push(read(&e.path()));
    }
    // The head of a real multi-rank trace (metadata, flows, NCCL kernels).
    let dlrm = read(&shared().join("traces/param-dlrm-8rank/worker3_step_12.1694128201557.pt.trace.json"));
    sources.push(dlrm[..dlrm.len().min(60_000)].to_vec());
    sources.push(read(&shared().join("traces/hta/cpu_only/rank-34.Jul_15_10_52_41.1074.pt.trace.json.gz")));
    let mut rng = Rng::from_state(0x5eed);
    let mut traces = 0;
    for case in 0..3000 {
        let src = &sources[case % sources.len()];
        let input = mutate(&mut rng, src);
        let chunk = 1 + rng.below(4096);
        if let Ok(t) = ingest_chunked("mutated.json", &input, chunk) {
            traces += 1;
            let job = assemble(vec![t], &[], &Rules::default());
            let report = rankscope_core::inspect::report(&job, vec![]);
            assert!(serde_json::to_string(&report).is_ok());
        }
    }
    // Most mutations leave something readable.
    assert!(traces > 1500, "only {traces} of 3000 mutated inputs were read as traces");
}

#[test]
fn every_prefix_of_a_trace_keeps_exactly_the_complete_events() {
    let text = br#"{"traceEvents": [{"ph": "X", "cat": "cpu_op", "name": "a", "pid": 1, "tid": 1, "ts": 1, "dur": 1}, {"ph": "X", "cat": "cpu_op", "name": "b\"}", "pid": 1, "tid": 1, "ts": 2.5, "dur": 1}, {"ph": "i", "name": "c", "pid": 1, "tid": 1, "ts": 3}]}"#;
    let ends: Vec<usize> = {
        // Byte offsets just after each event's closing brace.
        let s = std::str::from_utf8(text).unwrap_or("");
        let mut v = Vec::new();
        let mut from = 0;
        while let Some(k) = s[from..].find("}, {").or_else(|| s[from..].find("}]}")) {
            v.push(from + k + 1);
            from += k + 2;
            if v.len() == 3 {
                break;
            }
        }
        v
    };
    assert_eq!(ends.len(), 3);
    for cut in 1..=text.len() {
        let r = ingest_chunked("prefix.json", &text[..cut], 5);
        let Ok(t) = r else { continue };
        let complete = ends.iter().filter(|&&e| e <= cut).count();
        assert_eq!(t.events.len(), complete, "cut at {cut}");
    }
}
