//! Hybrid-parallel GPU-shaped jobs (`rankscope-synth`'s `--layout`, NCCL kernels carrying their
//! groups, several hosts each on its own clock), one known cause each, against the generator's
//! truth: the groups and their roles, the mesh, every collective within its group, each host's
//! clock offset recovered within 50 µs, the origin of the chain of waits, and the first finding.

// Tests read the zoo and ../shared from disk; the core never does (its clippy.toml).
#![allow(clippy::disallowed_methods, clippy::disallowed_types)]

mod common;

use rankscope_core::analyze::{Analysis, Options};
use rankscope_core::diagnose::analyze;
use rankscope_core::normalize::{assemble, Rules};
use rankscope_synth::{self as synth, Hybrid, HybridCause, SynthConfig};
use serde_json::Value;

fn job(cause: HybridCause, tp: u32, pp: u32, dp: u32, ep: u32) -> (Analysis, Value) {
    // Small layers keep the files small; an expert's skew needs the default model's expert
    // compute to show above the schedule's own bubble.
    let full = matches!(cause, HybridCause::ExpertImbalance { .. });
    let d = Hybrid::default();
    let h = Hybrid {
        tp,
        pp,
        dp,
        ep,
        micro_batches: 4,
        layers_per_stage: 1,
        hidden: if full { d.hidden } else { 1024 },
        seq_len: if full { d.seq_len } else { 1024 },
        cause,
        ..d
    };
    let cfg = SynthConfig {
        steps: 3,
        straggler_rank: None,
        loss_allreduce: false,
        hybrid: Some(h),
        ..SynthConfig::default()
    };
    cfg.validate().unwrap_or_else(|e| panic!("{e}"));
    let n = synth::world_size(&cfg) as usize;
    let traces = synth::write_ranks(&cfg, vec![Vec::new(); n])
        .unwrap_or_else(|e| panic!("{e}"))
        .into_iter()
        .enumerate()
        .map(|(r, (b, _))| {
            common::ingest_chunked(&synth::file_name(r as u32, false), &b, 1 << 20)
                .unwrap_or_else(|e| panic!("{e}"))
        })
        .collect();
    let a = analyze(&assemble(traces, &[], &Rules::default()), &Options::default());
    (a, serde_json::to_value(synth::manifest(&cfg)).unwrap_or_default())
}

fn u32s(v: &Value) -> Vec<u32> {
    v.as_array().map(|a| a.iter().filter_map(|x| x.as_u64().map(|n| n as u32)).collect()).unwrap_or_default()
}

/// What every job must get right whatever its cause.
fn check_structure(name: &str, a: &Analysis, man: &Value) {
    let h = &man["hybrid"];
    let l = a.layout.as_ref().unwrap_or_else(|| panic!("{name}: no layout"));
    // Every group the generator made, with its ranks; the parallel dimensions with their role.
    // (Groups of one rank carry nothing and are left out.)
    for g in h["groups"].as_array().cloned().unwrap_or_default() {
        let ranks = u32s(&g["ranks"]);
        if ranks.len() < 2 {
            continue;
        }
        let ours = l
            .group(g["name"].as_str().unwrap_or(""))
            .unwrap_or_else(|| panic!("{name}: group {} missing", g["name"]));
        assert_eq!(ours.ranks, ranks, "{name}: group {}", g["name"]);
        let role = g["role"].as_str().unwrap_or("");
        if matches!(role, "tensor" | "pipeline" | "data" | "expert" | "context") && ranks.len() > 1 {
            assert_eq!(
                ours.role.as_str(),
                role,
                "{name}: group {} ({:?}): {}",
                ours.name,
                ours.desc,
                ours.role_evidence
            );
        }
    }
    assert!(l.placement.iter().all(|p| p.unplaced == 0), "{name}: {:?}", l.placement);
    for c in &a.collectives {
        assert!(l.group(&c.pg).is_some(), "{name}: a collective in group {:?}", c.pg);
    }
    // Each host's clock offset, against rank 0's host, within 50 µs; one host, one offset.
    let hosts: std::collections::BTreeMap<String, i64> = h["hosts"]
        .as_array()
        .cloned()
        .unwrap_or_default()
        .iter()
        .map(|x| (x["name"].as_str().unwrap_or("").to_string(), x["clock_offset_ns"].as_i64().unwrap_or(0)))
        .collect();
    let host_of: std::collections::BTreeMap<u32, String> = h["ranks"]
        .as_array()
        .cloned()
        .unwrap_or_default()
        .iter()
        .map(|x| (x["rank"].as_u64().unwrap_or(0) as u32, x["host"].as_str().unwrap_or("").to_string()))
        .collect();
    let reference = hosts[&host_of[&0]];
    for al in &a.alignment {
        let truth = hosts[&host_of[&al.rank]] - reference;
        assert!(
            (al.offset_ns - truth).abs() <= 50_000,
            "{name}: rank {} offset {} ns, its host's is {truth} ns ({:?})",
            al.rank,
            al.offset_ns,
            al.method
        );
    }
}

#[test]
fn a_host_stall_is_found_where_it_starts_and_traced_through_the_groups() {
    let (a, man) =
        job(HybridCause::HostStall { rank: 5, ns: 60_000_000, name: "straggler_sleep".into() }, 2, 2, 4, 1);
    check_structure("host_stall", &a, &man);
    let l = a.layout.as_ref().map(|l| l.mesh_words()).unwrap_or_default();
    assert_eq!(l, "tensor 2 × data 4 × pipeline 2");
    let c = a.wait_chain.as_ref().unwrap_or_else(|| panic!("no chain"));
    assert_eq!(c.origins, u32s(&man["hybrid"]["cause"]["origin_ranks"]));
    let first = &a.findings[0];
    assert_eq!((first.id.as_str(), first.ranks.as_slice()), ("host_stall", &[5u32][..]), "{}", first.message);
    // Nobody who only inherited the wait is named as a cause.
    let inherited = u32s(&man["hybrid"]["inherited_ranks"]);
    for f in a
        .findings
        .iter()
        .filter(|f| matches!(f.id.as_str(), "host_stall" | "straggler" | "compute_imbalance" | "slow_device"))
    {
        assert!(f.ranks.iter().all(|r| !inherited.contains(r)), "{}: {:?}", f.id, f.ranks);
    }
}

#[test]
fn each_cause_of_the_generator_comes_first() {
    type Case = (&'static str, HybridCause, (u32, u32, u32, u32));
    let cases: Vec<Case> = vec![
        ("slow_stage", HybridCause::SlowStage { stage: 1, extra_layers: 1 }, (2, 2, 4, 1)),
        ("tp_spans_hosts", HybridCause::TpSpansHosts { group: 0 }, (4, 2, 2, 1)),
        ("expert_imbalance", HybridCause::ExpertImbalance { rank: 3, share: 0.6 }, (2, 2, 4, 4)),
    ];
    for (name, cause, (tp, pp, dp, ep)) in cases {
        let (a, man) = job(cause, tp, pp, dp, ep);
        check_structure(name, &a, &man);
        let want = man["hybrid"]["cause"]["expected_first_finding"].as_str().unwrap_or("");
        let first = a.findings.first().unwrap_or_else(|| panic!("{name}: no finding"));
        let ids: Vec<(&str, i64)> = a.findings.iter().map(|f| (f.id.as_str(), f.impact_ns / 1000)).collect();
        assert_eq!(
            first.id.as_str(),
            want,
            "{name}: {ids:?} {:?} {}",
            a.wait_chain.as_ref().map(|c| &c.origins),
            first.message
        );
        if want != "pipeline_bubble" {
            let origin = u32s(&man["hybrid"]["cause"]["origin_ranks"]);
            assert!(
                first.ranks.iter().all(|r| origin.contains(r)),
                "{name}: {:?} not in {origin:?}",
                first.ranks
            );
        }
    }
}

#[test]
fn a_healthy_job_blames_no_rank() {
    let (a, man) = job(HybridCause::None, 2, 2, 4, 1);
    check_structure("none", &a, &man);
    assert!(a.wait_chain.is_none(), "{:?}", a.wait_chain);
    for f in &a.findings {
        assert!(
            !matches!(
                f.id.as_str(),
                "host_stall"
                    | "straggler"
                    | "compute_imbalance"
                    | "slow_device"
                    | "input_bound"
                    | "expert_imbalance"
            ),
            "{}: {}",
            f.id,
            f.message
        );
    }
}
