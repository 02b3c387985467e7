//! `rankscope runs` on real runs of one model at world sizes 1, 2 and 4 (`tests/zoo/scaling/`,
//! made by its make.py: DDP on gloo, an MLP, `record_shapes=True`): the samples per step are the
//! script's batches, the FLOPs per step equal a count made here from the layer sizes in each
//! run's scenario.json (not from the analysis), the runs form one model whose strong and weak
//! series are told apart by their samples, and the efficiencies follow from the step times.

// Tests read the zoo from disk; the core never does (its clippy.toml).
#![allow(clippy::disallowed_methods, clippy::disallowed_types)]

mod common;

use common::zoo::run;
use rankscope_core::analyze::Analysis;
use rankscope_core::compare::rate::{Given, Source};
use rankscope_core::compare::runs::{self, Runs};
use rankscope_core::compare::scaling::Mode;
use serde_json::Value;

const RUNS: [&str; 6] = ["strong_w1", "strong_w2", "strong_w4", "weak_w1", "weak_w2", "weak_w4"];

fn all() -> Vec<(String, Analysis, Value)> {
    RUNS.iter()
        .map(|n| {
            let (a, spec) = run(&format!("scaling/{n}"));
            (n.to_string(), a, spec)
        })
        .collect()
}

fn table(runs: &[(String, Analysis, Value)], given: &Given) -> Runs {
    runs::runs(runs.iter().map(|(n, a, _)| (n.as_str(), a)), given)
}

fn int(v: &Value) -> i64 {
    v.as_i64().unwrap_or_else(|| panic!("not an integer: {v}"))
}

/// FLOPs per step of one rank from the MLP's layers and its batch, counted as autograd runs
/// them: the forward's product per layer, the backward's weight-gradient product per layer and
/// input-gradient product per layer but the first (whose input needs no gradient). 2 FLOPs per
/// multiply-add.
fn mlp_flops(spec: &Value) -> f64 {
    let b = int(&spec["batch_per_rank"]) as f64;
    let layers: Vec<f64> = spec["model"]["layers"]
        .as_array()
        .unwrap_or_else(|| panic!("layers"))
        .iter()
        .map(|l| (int(&l["in"]) * int(&l["out"])) as f64)
        .collect();
    let all: f64 = layers.iter().sum();
    let forward = 2.0 * b * all;
    let weight_grads = 2.0 * b * all;
    let input_grads = 2.0 * b * layers.iter().skip(1).sum::<f64>();
    forward + weight_grads + input_grads
}

#[test]
fn samples_and_flops_per_step_are_the_scripts() {
    let runs = all();
    let t = table(&runs, &Given::default());
    for ((name, a, spec), r) in runs.iter().zip(&t.runs) {
        let world = int(&spec["world_size"]);
        assert_eq!(i64::from(r.ranks), world, "{name}");
        // Samples: the script's batch per rank, summed over the data-parallel ranks.
        assert_eq!(
            r.rate.samples_per_step.value,
            Some(int(&spec["samples_per_step"])),
            "{name}: {:?}",
            r.rate
        );
        assert_eq!(r.rate.samples_per_step.from, Some(Source::Trace), "{name}");
        for w in &a.work {
            assert_eq!(w.work.batch.samples, Some(int(&spec["batch_per_rank"])), "{name} rank {}", w.rank);
        }
        // An MLP's input has no sequence dimension: tokens are not known, and it says why.
        assert_eq!(r.rate.tokens_per_step.value, None, "{name}");
        assert!(r.rate.tokens_per_step.why_not.as_deref().is_some_and(|w| w.contains("sequence")), "{name}");
        // FLOPs: the independent count, per rank and for the job.
        let per_rank = mlp_flops(spec);
        for w in &a.work {
            assert_eq!(w.work.flops_per_step, Some(per_rank), "{name} rank {}: {:?}", w.rank, w.work.counted);
            let calls: Vec<(&str, f64)> =
                w.work.counted.iter().map(|o| (o.name.as_str(), o.calls_per_step)).collect();
            let layers = spec["model"]["layers"].as_array().map_or(0, Vec::len) as f64;
            // One linear per layer (its addmm not counted again), 2 backward products per layer
            // but the first.
            assert_eq!(calls, vec![("aten::linear", layers), ("aten::mm", 2.0 * layers - 1.0)], "{name}");
            assert!(
                w.work.counted_share.is_some_and(|s| s > 0.0 && s <= 1.0),
                "{name}: {:?}",
                w.work.counted_share
            );
        }
        assert_eq!(r.rate.flops_per_step, Some(per_rank * world as f64), "{name}");
        assert_eq!(r.rate.flops_ops, vec!["aten::linear", "aten::mm"]);
        // Throughput and achieved FLOP/s follow from the step time.
        let secs = r.step_p50_ns.unwrap_or(0) as f64 / 1e9;
        let close = |x: Option<f64>, y: f64| x.is_some_and(|x| (x - y).abs() <= 1e-9 * y.abs());
        assert!(close(r.rate.samples_per_s, int(&spec["samples_per_step"]) as f64 / secs), "{name}");
        assert!(close(r.rate.achieved_tflops, per_rank * world as f64 / secs / 1e12), "{name}");
        // A CPU run has no MFU, and says why; a stated peak gives one.
        assert_eq!(r.rate.mfu, None);
        assert!(r.rate.mfu_why_not.as_deref().is_some_and(|w| w.contains("CPU")), "{:?}", r.rate.mfu_why_not);
    }
    let given =
        table(&runs, &Given { peak_tflops: Some(0.5), samples_per_step: Some(7), tokens_per_step: None });
    for r in &given.runs {
        let x = r.rate.achieved_tflops.unwrap_or(0.0) / (0.5 * f64::from(r.ranks));
        assert!(r.rate.mfu.is_some_and(|m| (m - x).abs() < 1e-12), "{:?}", r.rate.mfu);
        assert_eq!(
            (r.rate.samples_per_step.value, r.rate.samples_per_step.from),
            (Some(7), Some(Source::Given))
        );
    }
}

#[test]
fn one_model_strong_and_weak_series_and_their_efficiencies() {
    let runs = all();
    let t = table(&runs, &Given::default());
    let models: Vec<Option<&str>> = t.runs.iter().map(|r| r.rate.model.as_deref()).collect();
    assert!(models.iter().all(|m| m.is_some() && *m == models[0]), "{models:?}");
    assert_eq!(t.scaling.len(), 1, "{:?}", t.scaling);
    let g = &t.scaling[0];
    // The weight shapes' elements: in·out of every layer.
    let spec = &runs[0].2;
    let params: i64 = spec["model"]["layers"]
        .as_array()
        .map_or(0, |l| l.iter().map(|l| int(&l["in"]) * int(&l["out"])).sum());
    assert_eq!(g.params, params);
    let step = |n: &str| t.runs.iter().find(|r| r.run == n).and_then(|r| r.step_p50_ns).unwrap_or(0) as f64;
    for (name, _, spec) in &runs {
        let p = g.points.iter().find(|p| &p.run == name).unwrap_or_else(|| panic!("{name}: {g:?}"));
        let series = spec["series"].as_str().unwrap_or("");
        let world = int(&spec["world_size"]) as f64;
        let base = format!("{series}_w1");
        assert_eq!(p.base, base, "{name}");
        let (t1, tn) = (step(&base), step(name));
        let want = if world == 1.0 {
            assert_eq!(p.mode, Mode::Base);
            1.0
        } else if series == "strong" {
            assert_eq!(p.mode, Mode::Strong, "{name}");
            t1 / (tn * world)
        } else {
            assert_eq!(p.mode, Mode::Weak, "{name}");
            t1 / tn
        };
        let eff = p.efficiency.unwrap_or(f64::NAN);
        assert!((eff - want).abs() < 1e-9, "{name}: {eff} vs {want}");
        // The loss is the step over the ideal, and its parts add up to it.
        let ideal = if series == "strong" { t1 / world } else { t1 };
        assert!((p.loss_ns as f64 - (tn - ideal)).abs() <= 1.0, "{name}: {p:?}");
        assert_eq!(
            p.compute_ns + p.exposed_transfer_ns + p.exposed_wait_ns + p.other_ns,
            p.loss_ns,
            "{name}"
        );
    }
    // Every output names the series.
    let text = runs::text(&t);
    assert!(text.contains("Scaling of model") && text.contains("strong") && text.contains("weak"), "{text}");
    let csv = runs::csv(&t);
    let head = csv.lines().next().unwrap_or("").split(',').count();
    assert!(csv.lines().all(|l| l.split(',').count() == head), "{csv}");
    let md = runs::markdown(&t);
    assert!(md.contains("| run | ranks | base | mode |"), "{md}");
    let back: Runs = serde_json::from_str(&serde_json::to_string(&t).unwrap_or_default())
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(back, t);
}

#[test]
fn without_shapes_nothing_is_guessed() {
    // An analysis without shapes (its work taken away): every figure that needs them says why.
    let (mut a, _) = run("scaling/weak_w2");
    a.work.clear();
    let t = runs::runs([("no shapes", &a)], &Given::default());
    let r = &t.runs[0];
    assert_eq!(
        (r.rate.samples_per_step.value, r.rate.flops_per_step, r.rate.model.as_deref()),
        (None, None, None)
    );
    assert!(r.rate.samples_per_step.why_not.as_deref().is_some_and(|w| w.contains("record_shapes")));
    assert!(r.rate.flops_why_not.as_deref().is_some_and(|w| w.contains("record_shapes")));
    assert!(t.scaling.is_empty());
}
