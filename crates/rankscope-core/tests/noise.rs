//! Noise told from causes (docs/metrics.md, "Noise"): a burst in one step is said as a burst,
//! never as a slow device or more work; lateness with no work behind it is information; a
//! consistent slow rank stays a cause when a burst adds to it. Synthetic GPU jobs (the
//! generator's `burst`: one rank slower in one step, truth in the config) and a real gloo run
//! (`tests/zoo/noise_burst_2rank`: another process spinning on rank 1's core for 150 ms, once).

// Tests read the zoo and ../shared from disk; the core never does (its clippy.toml).
#![allow(clippy::disallowed_methods, clippy::disallowed_types)]
#![allow(clippy::expect_used, clippy::unwrap_used)] // a failed expectation is the test failing

mod common;

use common::ingest_chunked;
use rankscope_core::analyze::{Analysis, Options};
use rankscope_core::diagnose::analyze;
use rankscope_core::finding::Severity;
use rankscope_core::normalize::{assemble, Rules};
use rankscope_synth::{self as synth, Burst, SynthConfig};

fn run(cfg: &SynthConfig) -> Analysis {
    let traces: Vec<_> = synth::write_ranks(cfg, vec![Vec::new(); cfg.ranks as usize])
        .expect("write_ranks")
        .into_iter()
        .enumerate()
        .map(|(r, (b, _))| ingest_chunked(&synth::file_name(r as u32, false), &b, 1 << 20).expect("a trace"))
        .collect();
    analyze(&assemble(traces, &[], &Rules::default()), &Options::default())
}

fn said(a: &Analysis) -> Vec<String> {
    a.findings.iter().map(|f| format!("{} {:?} {:?} {}", f.id, f.severity, f.ranks, f.impact_ns)).collect()
}

/// A healthy job, every rank at one speed but for `burst`.
fn job(
    ranks: u32,
    steps: u32,
    seed: u64,
    burst: Option<Burst>,
    straggler: Option<(u32, i64)>,
) -> SynthConfig {
    SynthConfig {
        ranks,
        steps,
        seed,
        straggler_rank: straggler.map(|s| s.0),
        straggler_delay_ns: straggler.map_or(0, |s| s.1),
        compute_jitter: 0.005,
        burst,
        ..SynthConfig::default()
    }
}

const BLAME: [&str; 4] = ["slow_device", "compute_imbalance", "straggler", "host_stall"];

#[test]
fn one_slow_step_is_a_burst_on_its_rank_and_step() {
    // Rank 1 slower in the second of four steps, everything else even. Seeds vary the noise
    // around it; no seed may turn the burst into a cause.
    for seed in [1, 2, 3, 4, 5] {
        let a = run(&job(2, 4, seed, Some(Burst { rank: 1, step: 1, factor: 1.5 }), None));
        let noise = a.noise.as_ref().unwrap_or_else(|| panic!("seed {seed}: no noise measured"));
        let step = a.steps[1].step;
        assert_eq!(
            noise.outliers.iter().map(|o| o.step).collect::<Vec<_>>(),
            [step],
            "seed {seed}: {noise:?}"
        );
        for f in &a.findings {
            assert!(!BLAME.contains(&f.id.as_str()), "seed {seed}: {:?}", said(&a));
            if matches!(f.id.as_str(), "noise_burst" | "arrival_jitter") {
                assert!(f.severity <= Severity::Low, "seed {seed}: {:?}", said(&a));
            }
        }
        if let Some(b) = a.findings.iter().find(|f| f.id == "noise_burst") {
            assert_eq!((b.ranks.as_slice(), b.steps.as_slice()), (&[1u32][..], &[step][..]), "{}", b.message);
            assert_eq!(b.severity, Severity::Info);
            // Information comes after every finding that advises something.
            assert!(a
                .findings
                .iter()
                .skip_while(|f| f.severity > Severity::Info)
                .all(|f| f.severity == Severity::Info));
        }
    }
}

#[test]
fn a_slow_rank_with_a_burst_stays_a_slow_rank() {
    // Rank 1 slower by ~8% of the step in every step, and in one step much slower.
    let base = run(&job(4, 5, 7, None, None));
    let step = base.noise.as_ref().map_or(0, |n| n.step_ns);
    let a = run(&job(4, 5, 7, Some(Burst { rank: 1, step: 2, factor: 1.6 }), Some((1, step / 12))));
    let first = a.findings.first().unwrap_or_else(|| panic!("no finding"));
    assert_eq!((first.id.as_str(), first.ranks.as_slice()), ("slow_device", &[1u32][..]), "{:?}", said(&a));
}

#[test]
fn a_real_burst_of_host_noise_blames_no_rank() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/zoo/noise_burst_2rank");
    let traces: Vec<_> = ["rank0.pt.trace.json.gz", "rank1.pt.trace.json.gz"]
        .iter()
        .map(|f| {
            let b = std::fs::read(dir.join(f)).unwrap_or_else(|e| panic!("{f}: {e}"));
            ingest_chunked(f, &b, 1 << 20).expect("a trace")
        })
        .collect();
    let a = analyze(&assemble(traces, &[], &Rules::default()), &Options::default());
    let spec: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.join("scenario.json")).expect("scenario.json"))
            .expect("json");
    let i = spec["expected"]["burst"]["profiled_step_index"].as_u64().expect("index") as usize;
    let step = a.steps[i].step;
    let noise = a.noise.as_ref().expect("noise");
    assert!(noise.stands_out(step), "{noise:?}");
    for f in &a.findings {
        assert!(!BLAME.contains(&f.id.as_str()), "{:?}", said(&a));
        assert!(
            f.severity <= Severity::Low || !matches!(f.id.as_str(), "arrival_jitter" | "noise_burst"),
            "{:?}",
            said(&a)
        );
    }
}
