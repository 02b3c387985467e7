//! The synthetic trace generator: valid JSON, deterministic, and the structure and ground truth
//! it promises (launch ↔ kernel links, rendezvous, straggler, clocks, exposure, sizes).

#![allow(clippy::expect_used, clippy::unwrap_used)] // a failed expectation is the test failing

use std::collections::{BTreeMap, BTreeSet};

use rankscope_synth::{self as synth, Manifest, SynthConfig};
use serde_json::Value;

/// A small job that still has every feature: 4 ranks, 3 steps, 2 layers.
fn small() -> SynthConfig {
    SynthConfig {
        ranks: 4,
        steps: 3,
        kernels_per_step: 110,
        straggler_rank: Some(2),
        ..SynthConfig::default()
    }
}

fn bytes_of(cfg: &SynthConfig, rank: u32) -> Vec<u8> {
    let mut out = Vec::new();
    let n = synth::write_rank(cfg, rank, &mut out).expect("write_rank");
    assert_eq!(n, out.len() as u64, "reported byte count");
    out
}

struct Rank {
    doc: Value,
}

impl Rank {
    fn events(&self) -> &Vec<Value> {
        self.doc["traceEvents"].as_array().expect("traceEvents array")
    }
}

/// Parses every rank's document (the test may use serde_json; the generator writes text).
fn parse_all(cfg: &SynthConfig) -> Vec<Rank> {
    (0..cfg.ranks)
        .map(|r| {
            let text = bytes_of(cfg, r);
            let doc: Value =
                serde_json::from_slice(&text).unwrap_or_else(|e| panic!("rank {r}: not valid JSON: {e}"));
            Rank { doc }
        })
        .collect()
}

/// µs with three decimals → ns. f64 holds these 16-digit values to well under 1 ns.
fn ns(v: &Value) -> i64 {
    (v.as_f64().expect("number") * 1000.0).round() as i64
}

fn cat(e: &Value) -> &str {
    e["cat"].as_str().unwrap_or("")
}

fn name(e: &Value) -> &str {
    e["name"].as_str().unwrap_or("")
}

fn nccl_kernels(r: &Rank) -> Vec<&Value> {
    let mut v: Vec<&Value> =
        r.events().iter().filter(|e| cat(e) == "kernel" && name(e).starts_with("ncclDevKernel")).collect();
    v.sort_by_key(|e| {
        (
            e["args"]["Process Group Name"].as_str().unwrap_or("").to_string(),
            e["args"]["Seq"].as_u64().unwrap_or(0),
        )
    });
    v
}

#[test]
fn documents_are_valid_kineto_json() {
    let cfg = small();
    let ranks = parse_all(&cfg);
    for (r, rank) in ranks.iter().enumerate() {
        let d = &rank.doc;
        assert_eq!(d["schemaVersion"], 1);
        assert_eq!(d["displayTimeUnit"], "ms");
        assert_eq!(d["baseTimeNanoseconds"].as_i64(), Some(synth::BASE_TIME_NS));
        let di = &d["distributedInfo"];
        assert_eq!(di["backend"], "nccl");
        assert_eq!(di["rank"].as_u64(), Some(r as u64));
        assert_eq!(di["world_size"].as_u64(), Some(4));
        assert_eq!(di["pg_count"].as_u64(), Some(2));
        assert_eq!(di["pg_config"][0]["ranks"], serde_json::json!([0, 1, 2, 3]));
        assert_eq!(d["deviceProperties"].as_array().map(Vec::len), Some(8));

        let ev = rank.events();
        // Metadata: the CPU process, 8 GPU processes with labels, named streams and threads.
        let labels: BTreeSet<&str> = ev
            .iter()
            .filter(|e| e["ph"] == "M" && name(e) == "process_labels")
            .filter_map(|e| e["args"]["labels"].as_str())
            .collect();
        assert!(labels.contains("CPU") && labels.contains("GPU 0") && labels.contains("GPU 7"));
        let threads: BTreeSet<&str> = ev
            .iter()
            .filter(|e| e["ph"] == "M" && name(e) == "thread_name")
            .filter_map(|e| e["args"]["name"].as_str())
            .collect();
        assert!(threads.contains("stream 7 ") && threads.contains("stream 40 "));
        assert!(threads.iter().any(|t| t.ends_with("(pt_autograd_0)")));

        // Steps: ProfilerStep#10..#12 on the CPU and as GPU user annotations.
        for c in ["user_annotation", "gpu_user_annotation"] {
            let steps: Vec<&str> =
                ev.iter().filter(|e| cat(e) == c && name(e).starts_with("ProfilerStep#")).map(name).collect();
            assert_eq!(steps, ["ProfilerStep#10", "ProfilerStep#11", "ProfilerStep#12"], "{c}");
        }
        for n in [
            "## forward ##",
            "## backward ##",
            "Optimizer.step#AdamW.step",
            "enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__",
            "nccl:all_reduce",
        ] {
            assert!(ev.iter().any(|e| cat(e) == "user_annotation" && name(e) == n), "{n}");
        }
        for n in ["cudaStreamSynchronize", "cudaMemcpyAsync", "cudaMemsetAsync", "cudaLaunchKernelExC"] {
            assert!(ev.iter().any(|e| cat(e) == "cuda_runtime" && name(e) == n), "{n}");
        }
        // Timestamps are written with exactly three decimals.
        let text = String::from_utf8(bytes_of(&cfg, r as u32)).expect("utf-8");
        for line in text.lines().filter(|l| l.trim_start().starts_with("\"ts\": ")).take(200) {
            let ts = line.trim_start().trim_start_matches("\"ts\": ");
            let ts = ts.split(',').next().unwrap_or("");
            let frac = ts.split('.').nth(1).unwrap_or("");
            assert_eq!(frac.len(), 3, "ts {ts}");
        }
    }
}

#[test]
fn deterministic_bytes() {
    let cfg = small();
    let a = bytes_of(&cfg, 1);
    assert_eq!(a, bytes_of(&cfg, 1), "same config, same bytes");
    let other = SynthConfig { seed: cfg.seed + 1, ..cfg.clone() };
    assert_ne!(a, bytes_of(&other, 1), "another seed, other bytes");
    // Writing all ranks in one pass gives the same files as writing them one by one.
    let outs = synth::write_ranks(&cfg, vec![Vec::new(); 4]).expect("write_ranks");
    for (r, (bytes, n)) in outs.iter().enumerate() {
        assert_eq!(*n, bytes.len() as u64);
        assert_eq!(*bytes, bytes_of(&cfg, r as u32), "rank {r}");
    }
    // The manifest is deterministic too.
    let m1 = serde_json::to_string(&synth::manifest(&cfg)).expect("manifest json");
    let m2 = serde_json::to_string(&synth::manifest(&cfg)).expect("manifest json");
    assert_eq!(m1, m2);
}

#[test]
fn every_gpu_event_has_its_launch_and_flow_pair() {
    let ranks = parse_all(&small());
    for rank in &ranks {
        let ev = rank.events();
        let runtime: BTreeMap<u64, &Value> = ev
            .iter()
            .filter(|e| cat(e) == "cuda_runtime")
            .filter_map(|e| Some((e["args"]["correlation"].as_u64()?, e)))
            .collect();
        let flows = |ph: &str| -> BTreeMap<u64, &Value> {
            ev.iter()
                .filter(|e| cat(e) == "ac2g" && e["ph"] == ph)
                .filter_map(|e| Some((e["id"].as_u64()?, e)))
                .collect()
        };
        let (fs, ff) = (flows("s"), flows("f"));
        let gpu: Vec<&Value> =
            ev.iter().filter(|e| matches!(cat(e), "kernel" | "gpu_memcpy" | "gpu_memset")).collect();
        assert!(gpu.len() > 100);
        assert_eq!(fs.len(), gpu.len(), "one s flow per GPU event");
        assert_eq!(ff.len(), gpu.len(), "one f flow per GPU event");
        for g in gpu {
            let c = g["args"]["correlation"].as_u64().expect("correlation");
            let l = runtime.get(&c).unwrap_or_else(|| panic!("no launch for correlation {c}"));
            assert!(name(l).starts_with("cuda"), "{}", name(l));
            assert_eq!(l["args"]["External id"], g["args"]["External id"]);
            assert!(ns(&g["ts"]) >= ns(&l["ts"]) + ns(&l["dur"]), "GPU work starts after its launch returns");
            let (s, f) = (fs[&c], ff[&c]);
            assert_eq!(
                (s["ts"].clone(), s["pid"].clone(), s["tid"].clone()),
                (l["ts"].clone(), l["pid"].clone(), l["tid"].clone())
            );
            assert_eq!(
                (f["ts"].clone(), f["pid"].clone(), f["tid"].clone()),
                (g["ts"].clone(), g["pid"].clone(), g["tid"].clone())
            );
            assert_eq!(f["bp"], "e");
            assert_eq!(g["args"]["stream"], g["tid"]);
        }
        // Kernels on one stream never overlap.
        let mut by_stream: BTreeMap<u64, Vec<(i64, i64)>> = BTreeMap::new();
        for e in ev.iter().filter(|e| matches!(cat(e), "kernel" | "gpu_memcpy" | "gpu_memset")) {
            let t = ns(&e["ts"]);
            by_stream.entry(e["tid"].as_u64().unwrap_or(0)).or_default().push((t, t + ns(&e["dur"])));
        }
        for iv in by_stream.values_mut() {
            iv.sort_unstable();
            assert!(iv.windows(2).all(|w| w[0].1 <= w[1].0), "stream work overlaps");
        }
    }
}

#[test]
fn kineto_event_order_autograd_then_main_then_activities() {
    let ranks = parse_all(&small());
    let ev = ranks[0].events();
    let pid = ev.iter().find(|e| cat(e) == "cpu_op").map(|e| e["pid"].clone()).expect("cpu op");
    let main_tid = pid.clone();
    let phase = |e: &Value| -> u8 {
        match cat(e) {
            "cpu_op" | "user_annotation" | "fwdbwd" if e["tid"] != main_tid => 0,
            "cpu_op" | "user_annotation" | "fwdbwd" => 1,
            "" if e["ph"] == "M" => 3,
            "Trace" => 3,
            "" => 3,
            _ => 2,
        }
    };
    let phases: Vec<u8> = ev.iter().map(phase).collect();
    assert!(phases.windows(2).all(|w| w[0] <= w[1]), "events grouped as Kineto writes them");
    assert_eq!(phases.first(), Some(&0));
}

/// The known offset of each rank, from the manifest.
fn offsets(m: &Manifest) -> Vec<i64> {
    m.ranks.iter().map(|r| r.clock_offset_ns).collect()
}

#[test]
fn collectives_end_together_and_the_straggler_arrives_last() {
    let cfg = small();
    let man = synth::manifest(&cfg);
    let off = offsets(&man);
    assert_eq!(off[0], 0);
    assert!(off.iter().skip(1).all(|o| o.abs() <= 900_000) && off.iter().any(|o| o.abs() >= 100_000));
    let ranks = parse_all(&cfg);
    let per_rank: Vec<Vec<&Value>> = ranks.iter().map(nccl_kernels).collect();
    let n = per_rank[0].len();
    assert_eq!(n as u32, man.collectives_per_step * cfg.steps);
    assert!(per_rank.iter().all(|k| k.len() == n), "every rank issues the same collectives");

    let straggler = cfg.straggler_rank.expect("straggler") as usize;
    let mut raw_end_spread = 0;
    let mut strictly_last = 0;
    for i in 0..n {
        let k: Vec<&Value> = per_rank.iter().map(|v| v[i]).collect();
        // Same collective everywhere: name, sizes, group and Seq agree.
        for e in &k {
            for key in ["Collective name", "In msg nelems", "Process Group Name", "Seq", "Group size"] {
                assert_eq!(e["args"][key], k[0]["args"][key], "{key}");
            }
        }
        let start: Vec<i64> = k.iter().zip(&off).map(|(e, o)| ns(&e["ts"]) - o).collect();
        let end: Vec<i64> = k.iter().zip(&off).map(|(e, o)| ns(&e["ts"]) + ns(&e["dur"]) - o).collect();
        let raw_end: Vec<i64> = k.iter().map(|e| ns(&e["ts"]) + ns(&e["dur"])).collect();
        let spread = |v: &[i64]| v.iter().max().unwrap_or(&0) - v.iter().min().unwrap_or(&0);
        assert!(spread(&end) <= 3_000, "collective {i}: ends spread {} ns after alignment", spread(&end));
        raw_end_spread = raw_end_spread.max(spread(&raw_end));
        // The straggler is the last to arrive (up to the ±2.5 µs completion skew when every
        // rank queues behind the previous collective).
        let latest = *start.iter().max().unwrap_or(&0);
        assert!(
            start[straggler] >= latest - 3_000,
            "collective {i}: straggler {} ns early",
            latest - start[straggler]
        );
        if start.iter().enumerate().all(|(r, s)| r == straggler || *s + 100_000 < start[straggler]) {
            strictly_last += 1;
        }
    }
    assert!(raw_end_spread > 100_000, "without removing offsets the ends disagree");
    assert!(strictly_last >= cfg.steps as usize * 2, "straggler clearly last at {strictly_last} collectives");

    // The manifest says the same.
    for c in man.collectives.iter().filter(|c| c.process_group == "0") {
        let latest = c.arrival_ns.iter().max().copied().unwrap_or(0);
        assert!(c.arrival_ns[straggler] >= latest - 3_000);
        let ends = &c.end_ns;
        assert!(ends.iter().max().unwrap_or(&0) - ends.iter().min().unwrap_or(&0) <= 2_500);
    }
}

#[test]
fn manifest_matches_the_traces() {
    let cfg = small();
    let man = synth::manifest(&cfg);
    assert!(man.adjustments.is_empty());
    assert_eq!(man.steps, 3);
    assert_eq!(man.step_numbers, [10, 11, 12]);
    assert_eq!(man.collectives_per_step, cfg.bucket_count + 1);
    assert_eq!(man.bucket_bytes, vec![cfg.bucket_bytes; cfg.bucket_count as usize]);
    assert_eq!(man.tail_buckets, 2);
    assert_eq!(man.collectives.len() as u32, man.collectives_per_step * man.steps);
    let ranks = parse_all(&cfg);
    for (rank, mr) in ranks.iter().zip(&man.ranks) {
        let ev = rank.events();
        let pid = ev.iter().find(|e| cat(e) == "cpu_op").map(|e| e["pid"].as_u64());
        assert_eq!(pid, Some(Some(mr.pid)));
        // CPU step starts, shifted by the rank's clock offset.
        let starts: Vec<i64> = ev
            .iter()
            .filter(|e| cat(e) == "user_annotation" && name(e).starts_with("ProfilerStep#"))
            .map(|e| ns(&e["ts"]) - mr.clock_offset_ns)
            .collect();
        for (a, b) in starts.iter().zip(&mr.step_start_ns) {
            assert!((a - b).abs() <= 1, "step start {a} vs {b}");
        }
        // Kernels per step as promised (compute and NCCL).
        let kernels = ev.iter().filter(|e| cat(e) == "kernel").count() as u32;
        assert_eq!(kernels, man.kernels_per_step * man.steps);
        // Bucket all_reduce sizes.
        let nelems: BTreeSet<u64> = nccl_kernels(rank)
            .iter()
            .filter(|e| e["args"]["Process Group Name"] == "0")
            .filter_map(|e| e["args"]["In msg nelems"].as_u64())
            .collect();
        assert_eq!(nelems, BTreeSet::from([cfg.bucket_bytes / 4]));
        // Exposure by construction: at least the tail buckets' transfer, on every rank.
        for x in &mr.exposed_comm_ns {
            assert!(
                *x >= man.designed_exposed_comm_ns,
                "exposed {x} < designed {}",
                man.designed_exposed_comm_ns
            );
        }
    }
    // Ranks that wait for the straggler see more exposed communication than the straggler.
    let s = cfg.straggler_rank.expect("straggler") as usize;
    let mean = |v: &[i64]| v.iter().sum::<i64>() / v.len().max(1) as i64;
    let straggler_exposed = mean(&man.ranks[s].exposed_comm_ns);
    for (r, mr) in man.ranks.iter().enumerate().filter(|(r, _)| *r != s) {
        assert!(mean(&mr.exposed_comm_ns) > straggler_exposed + 1_000_000, "rank {r}");
        assert!(mean(&mr.comm_wait_ns) > mean(&man.ranks[s].comm_wait_ns));
    }
    assert!(man.ranks[s].is_straggler);
}

#[test]
fn exposure_knob_moves_the_tail() {
    let base = SynthConfig { straggler_rank: None, ..small() };
    let none = synth::manifest(&SynthConfig { exposed_comm_fraction: 0.0, ..base.clone() });
    let half = synth::manifest(&SynthConfig { exposed_comm_fraction: 0.5, ..base });
    assert_eq!((none.tail_buckets, half.tail_buckets), (0, 4));
    let mean_exposed = |m: &Manifest| {
        let all: Vec<i64> = m.ranks.iter().flat_map(|r| r.exposed_comm_ns.iter().copied()).collect();
        all.iter().sum::<i64>() / all.len() as i64
    };
    assert!(mean_exposed(&half) > mean_exposed(&none) + 3 * half.bucket_transfer_ns[0] / 2);
    assert!(mean_exposed(&half) >= half.designed_exposed_comm_ns);
}

#[test]
fn target_bytes_is_honoured() {
    for target in [2_000_000u64, 6_000_000] {
        let cfg = SynthConfig { ranks: 2, straggler_rank: Some(1), target_bytes: Some(target), ..small() };
        for r in 0..2 {
            let n = bytes_of(&cfg, r).len() as f64;
            let err = (n - target as f64).abs() / target as f64;
            assert!(err <= 0.10, "rank {r}: {n} bytes for target {target}");
        }
        assert_eq!(synth::manifest(&cfg).steps, synth::resolved_steps(&cfg));
    }
}

#[test]
fn small_buckets_and_malloc_churn() {
    let cfg = SynthConfig { malloc_churn: true, ..small() }.with_small_buckets();
    assert_eq!(cfg.bucket_bytes, 1 << 20);
    assert_eq!(cfg.bucket_count, 200);
    let man = synth::manifest(&cfg);
    let ranks = parse_all(&cfg);
    let ev = ranks[0].events();
    assert_eq!(nccl_kernels(&ranks[0]).len() as u32, 201 * cfg.steps);
    let frees = ev.iter().filter(|e| name(e) == "cudaFree").count() as u32;
    let mallocs = ev.iter().filter(|e| name(e) == "cudaMalloc").count() as u32;
    let bursts: u32 = man.ranks[0].malloc_bursts.iter().sum();
    assert!(bursts >= cfg.steps);
    assert_eq!((frees, mallocs), (bursts, bursts));
}

#[test]
fn single_rank_and_bad_configs() {
    let one = SynthConfig { ranks: 1, straggler_rank: None, ..small() };
    let ranks = parse_all(&one);
    assert_eq!(nccl_kernels(&ranks[0])[0]["args"]["Group size"], 1);

    let bad = SynthConfig { straggler_rank: Some(9), ..small() };
    let err = synth::write_rank(&bad, 0, Vec::new()).expect_err("straggler outside the job");
    assert_eq!(err.kind(), std::io::ErrorKind::InvalidInput);
    assert!(err.to_string().contains("straggler_rank"));
    let fixed = synth::manifest(&bad);
    assert_eq!(fixed.straggler_rank, None);
    assert_eq!(fixed.adjustments.len(), 1);
    let err = synth::write_rank(&small(), 4, Vec::new()).expect_err("rank outside the job");
    assert_eq!(err.kind(), std::io::ErrorKind::InvalidInput);
    assert!(synth::write_ranks(&small(), vec![Vec::new(); 3]).is_err());
}

#[test]
fn demo_defaults() {
    let c = SynthConfig::default();
    assert_eq!(c.ranks, 8);
    assert!(c.straggler_rank.is_some() && c.clock_offset_max_ns >= 100_000);
    assert!(c.validate().is_ok());
    let man = synth::manifest(&c);
    assert!(man.tail_buckets >= 1);
    assert!(man.ranks.iter().filter(|r| r.clock_offset_ns.abs() >= 100_000).count() >= 4);
}
