//! Pipelines on GPU-shaped traces: the synth generator's pipeline presets (NCCL send/recv
//! kernels, `record_param_comms` with `Src Rank` / `Dst Rank`, per-edge process groups,
//! GPipe / 1F1B / interleaved schedules), whose manifest has the truth per rank × step.

// Tests read the zoo and ../shared from disk; the core never does (its clippy.toml).
#![allow(clippy::disallowed_methods, clippy::disallowed_types)]
#![allow(clippy::expect_used, clippy::unwrap_used)] // a failed expectation is the test failing

mod common;

use rankscope_core::analyze::{Analysis, Options};
use rankscope_core::diagnose::analyze;
use rankscope_core::normalize::{assemble, Rules};
use rankscope_synth::{self as synth, Manifest, Scenario, SynthConfig};

fn run(s: Scenario) -> (Analysis, Manifest) {
    let cfg = SynthConfig { steps: 3, ..s.config() };
    let traces = synth::write_ranks(&cfg, vec![Vec::new(); cfg.ranks as usize])
        .expect("write_ranks")
        .into_iter()
        .enumerate()
        .map(|(r, (b, _))| {
            common::ingest_chunked(&synth::file_name(r as u32, false), &b, 1 << 20).expect("a trace")
        })
        .collect();
    let job = assemble(traces, &[], &Rules::default());
    (analyze(&job, &Options::default()), synth::manifest(&cfg))
}

/// Stages, schedule, micro-batches and the formula as generated; per-stage bubble share within
/// 0.06 of the manifest's (whose window is the replica's first forward kernel to its last
/// backward kernel, ours the step minus the optimizer: the last stage's differ most); every
/// message matched; the bubble first, no straggler.
#[test]
fn synth_pipelines_match_their_manifest() {
    for s in [
        Scenario::PipelineGpipe,
        Scenario::Pipeline1f1b,
        Scenario::PipelineInterleaved,
        Scenario::PipelineSlowStage,
    ] {
        let name = s.name();
        let (a, m) = run(s);
        let mp = m.pipeline.as_ref().expect("truth");
        let p = a.pipeline.as_ref().unwrap_or_else(|| panic!("{name}: no pipeline"));
        assert_eq!(p.stages.len() as u32, mp.stages, "{name}");
        assert_eq!(
            serde_json::to_value(p.schedule).unwrap(),
            serde_json::to_value(mp.schedule).unwrap(),
            "{name}"
        );
        assert_eq!(a.findings.first().map(|f| f.id.as_str()), Some("pipeline_bubble"), "{name}");
        assert!(a.findings.iter().all(|f| f.id != "straggler" && f.id != "small_collectives"), "{name}");
        assert!(a.collectives.iter().all(|c| !c.kind.is_p2p()), "{name}");
        let matched: usize = p.links.iter().map(|l| l.matched).sum();
        assert_eq!(matched, mp.p2p.len(), "{name}: {:?}", p.links);
        if let Some(v) = p.virtual_stages.filter(|&v| v > 1) {
            assert_eq!(v, mp.virtual_stages, "{name}");
        }
        if let Some(t) = p.theory_bubble_share {
            assert_eq!(p.micro_batches, Some(mp.micro_batches), "{name}");
            assert!(
                (t - mp.formula_bubble_fraction).abs() < 1e-9,
                "{name}: {t} vs {}",
                mp.formula_bubble_fraction
            );
        }
        for st in &p.per_stage {
            let t = mp.ranks.iter().find(|r| r.rank == st.rank).unwrap();
            let want = t.bubble_fraction.iter().sum::<f64>() / t.bubble_fraction.len() as f64;
            eprintln!("{name}: stage {} bubble share {:.3} manifest {want:.3}", st.stage, st.bubble_share);
            assert!(
                (st.bubble_share - want).abs() <= 0.06,
                "{name}: stage {}: {} vs {want}",
                st.stage,
                st.bubble_share
            );
        }
        if let Some(slow) = mp.slow_stage {
            assert_eq!(p.slowest_stage, Some(slow), "{name}");
            assert_eq!(a.findings[0].ranks, [p.stages[slow as usize]], "{name}");
        }
    }
}

/// A stage 1.5× slower than the others (1F1B): balancing the stages (work moved from it to the
/// others, the total unchanged) gives about what the same pipeline takes healthy with every
/// stage carrying the mean compute: the healthy step plus the stages' mean compute gained.
/// The bubble's gain is that replay.
#[test]
fn a_slow_stage_takes_the_gain_of_the_stages_balanced() {
    let (slow, _) = run(Scenario::PipelineSlowStage);
    let (healthy, _) = run(Scenario::Pipeline1f1b);
    let mean_compute = |a: &Analysis| {
        let p = a.pipeline.as_ref().expect("a pipeline");
        p.per_stage.iter().map(|s| s.compute_ns as f64).sum::<f64>() / p.per_stage.len() as f64
    };
    let balanced = healthy.typical_step_ns() + (mean_compute(&slow) - mean_compute(&healthy));
    let truth = slow.typical_step_ns() - balanced;
    let f = slow.findings.first().expect("a finding");
    assert_eq!((f.id.as_str(), f.ranks.as_slice()), ("pipeline_bubble", &[2][..]), "{}", f.message);
    let gain = f
        .evidence
        .get(rankscope_core::finding::EvidenceKey::ReplayedGainNs)
        .unwrap_or_else(|| panic!("no replayed gain: {}", f.message));
    assert_eq!(f.impact_ns, gain as i64);
    assert!(
        truth > 10e6 && (gain - truth).abs() <= 0.25 * truth,
        "balanced: {:.1} ms replayed against {:.1} ms",
        gain / 1e6,
        truth / 1e6
    );
}
