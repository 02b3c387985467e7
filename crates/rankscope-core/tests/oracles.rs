//! rankscope against the incumbent tools on the same real traces: HTA 0.5.0 and the
//! TensorBoard profiler plugin 0.4.3, whose numbers `tests/oracle/hta_tb_oracle.py` committed to
//! `tests/data/{hta,tb}_expectations.json` (how: `tests/oracle/HTA_TB.md`). Where the
//! definitions are the same the numbers must agree; where they differ, docs/metrics.md says why
//! and the tests below pin the agreeing part.

// Tests read the zoo and ../shared from disk; the core never does (its clippy.toml).
#![allow(clippy::disallowed_methods, clippy::disallowed_types)]

mod common;

use common::*;
use rankscope_core::analyze::{Analysis, Options};
use rankscope_core::diagnose::analyze;
use rankscope_core::normalize::{assemble, Rules};
use serde_json::Value;

fn expectations(name: &str) -> Value {
    let p = format!("{}/tests/data/{name}", env!("CARGO_MANIFEST_DIR"));
    serde_json::from_str(&std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{p}: {e}")))
        .unwrap_or_else(|e| panic!("{p}: {e}"))
}

fn analyze_dir(dir: &str) -> Analysis {
    analyze(&assemble(load_dir(dir), &[], &Rules::default()), &Options::default())
}

fn f(v: &Value) -> f64 {
    v.as_f64().unwrap_or_else(|| panic!("not a number: {v}"))
}

#[test]
fn dlrm_overlap_and_compute_equal_hta() {
    let hta = expectations("hta_expectations.json");
    let set = &hta["sets"]["param-dlrm-8rank"];
    let a = analyze_dir("traces/param-dlrm-8rank");
    for t in &a.rank_totals {
        let r = t.rank.to_string();
        // HTA: 100 × |compute ∩ comm| / |comm| over the kept trace, rounded to 2 decimals.
        let want = f(&set["comm_comp_overlap"][&r]["comp_comm_overlap_pct"]);
        let got = t.overlap_pct_hta.unwrap_or(f64::NAN);
        assert!((got - want).abs() <= 0.006, "rank {r}: overlap {got} vs HTA {want}");
        // HTA's compute time is the union of compute kernels (integer µs in this trace).
        let want = f(&set["temporal_breakdown"][&r]["compute_time_us"]);
        assert!(
            (t.compute_ns as f64 / 1e3 - want).abs() <= 1.0,
            "rank {r}: compute {} vs HTA {want}",
            t.compute_ns
        );
    }
}

#[test]
fn dlrm_launch_delay_equals_hta() {
    let hta = expectations("hta_expectations.json");
    let set = &hta["sets"]["param-dlrm-8rank"];
    let a = analyze_dir("traces/param-dlrm-8rank");
    for l in &a.launches {
        let s = &set["cuda_kernel_launch_stats"][l.rank.to_string()];
        assert_eq!(l.launches as f64, f(&s["events_count"]), "rank {}", l.rank);
        assert_eq!(l.delay_p50_ns as f64 / 1e3, f(&s["launch_delay"]["p50_us"]), "rank {}", l.rank);
        assert_eq!(l.runtime_p50_ns as f64 / 1e3, f(&s["cpu_duration"]["p50_us"]), "rank {}", l.rank);
    }
}

#[test]
fn dlrm_steps_kernel_time_and_bytes_equal_the_tb_plugin() {
    let tb = expectations("tb_expectations.json");
    let set = &tb["sets"]["param-dlrm-8rank"];
    let a = analyze_dir("traces/param-dlrm-8rank");
    let workers = set["workers"].as_object().cloned().unwrap_or_default();
    assert_eq!(workers.len(), 8);
    for (name, w) in &workers {
        let info =
            a.ranks.iter().find(|r| r.source.contains(name.as_str())).unwrap_or_else(|| panic!("{name}"));
        let step =
            a.steps[0].per_rank.iter().find(|x| x.rank == info.rank).unwrap_or_else(|| panic!("{name}"));
        let ov = &w["overview_steps"][0];
        // The step: from the CPU marker's start to the end of the GPU work it launched.
        assert_eq!(step.wall_ns as f64 / 1e3, f(&ov["total_us"]), "{name}");
        // The plugin's "kernel" time is every kernel's union, NCCL included: |C ∪ M|.
        assert_eq!(
            (step.compute_ns + step.comm_ns - step.overlap_ns) as f64 / 1e3,
            f(&ov["kernel_us"]),
            "{name}"
        );
        // The all_reduce message sizes (Input Dims × dtype of `nccl:all_reduce`).
        let want = f(&set["distributed"]["comm_ops"][name]["nccl:all_reduce"]["total_size_bytes"]);
        let got = a.collectives.iter().find(|c| c.kind.name() == "all_reduce").map_or(0, |c| c.bytes_total);
        assert_eq!(got as f64, want, "{name}");
    }
}

#[test]
fn gloo_four_way_split_and_transfer_time_equal_the_tb_plugin() {
    let tb = expectations("tb_expectations.json");
    let dist = &tb["sets"]["ddp-gloo-cpu-4rank"]["distributed"];
    let a = analyze_dir("traces/ddp-gloo-cpu-4rank");
    for s in &a.steps {
        for r in &s.per_rank {
            let w = &dist["overlap_by_step"][s.step.to_string()][format!("rank{}", r.rank)];
            for (got, key) in [
                (r.tb_computation_ns, "computation_minus_overlap_us"),
                (r.overlap_ns, "overlap_us"),
                (r.tb_communication_ns, "communication_minus_overlap_us"),
                (r.tb_other_ns, "other_us"),
            ] {
                let want = f(&w[key]);
                // The plugin computes in float64 µs: agree within 0.05 µs.
                assert!(
                    (got as f64 / 1e3 - want).abs() < 0.05,
                    "step {} rank {} {key}: {} vs {want}",
                    s.step,
                    r.rank,
                    got
                );
            }
        }
    }
    // Data transfer time: per all_reduce the minimum duration over ranks, averaged.
    let c = &a.collectives[0];
    let want = f(&dist["comm_ops"]["rank0"]["gloo:all_reduce"]["data_transfer_us"]) / 6.0;
    assert!(
        (c.transfer_mean_ns.unwrap_or(0) as f64 / 1e3 - want).abs() < 1.0,
        "{:?} vs {want}",
        c.transfer_mean_ns
    );
    assert_eq!(c.bytes_p50, Some(f(&dist["comm_ops"]["rank0"]["gloo:all_reduce"]["avg_size_bytes"]) as i64));
}

#[test]
fn where_hta_fails_on_cpu_only_traces_rankscope_answers() {
    let hta = expectations("hta_expectations.json");
    let set = &hta["sets"]["ddp-gloo-cpu-4rank"];
    // HTA's overlap is null (NaN) for every rank of the gloo set...
    assert!(set["comm_comp_overlap"]
        .as_object()
        .is_some_and(|m| m.values().all(|v| v["comp_comm_overlap_pct"].is_null())));
    // ...while rankscope's is a number for every rank.
    let a = analyze_dir("traces/ddp-gloo-cpu-4rank");
    assert!(a.rank_totals.iter().all(|t| t.overlap_pct_hta.is_some_and(|v| v > 0.0 && v < 100.0)));
}

#[test]
fn dlrm_per_stream_idle_breakdown_equals_hta() {
    let hta = expectations("hta_expectations.json");
    let ranks = &hta["sets"]["param-dlrm-8rank"]["idle_time_breakdown"]["ranks"];
    let traces = load_dir("traces/param-dlrm-8rank");
    let job = assemble(traces, &[], &Rules::default());
    let a = analyze(&job, &Options::default());
    assert_eq!(a.gpu_idle.len(), 32);
    for s in &a.gpu_idle {
        let x = &ranks[s.rank.to_string()][s.stream.to_string()];
        let us = |k: &str| x[k]["idle_time_us"].as_f64().unwrap_or(0.0);
        let (hw, kw, ot) =
            (s.host_wait_ns as f64 / 1e3, s.kernel_wait_ns as f64 / 1e3, s.other_ns as f64 / 1e3);
        let what = format!(
            "rank {} stream {}: {hw}/{kw}/{ot} vs HTA {}/{}/{}",
            s.rank,
            s.stream,
            us("host_wait"),
            us("kernel_wait"),
            us("other")
        );
        assert_eq!(hw + kw + ot, us("host_wait") + us("kernel_wait") + us("other"), "{what}");
        assert_eq!(kw, us("kernel_wait"), "{what}");
        // HTA drops GPU events whose launch is not in the trace (64 on ranks 1 and 3); the gaps
        // around them then count as host wait, where rankscope keeps the events and books the
        // gap before an unlinked event as "other". Elsewhere the categories are equal.
        let unlinked = job.ranks.iter().find(|r| r.rank == s.rank).map_or(0, |r| r.norm.links.unlinked);
        if unlinked == 0 {
            assert_eq!((hw, ot), (us("host_wait"), us("other")), "{what}");
        } else {
            assert_eq!(hw + ot, us("host_wait") + us("other"), "{what}");
        }
    }
}
