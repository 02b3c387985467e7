//! Gradient accumulation on a real run (`tests/zoo/accum/accum_w2`, made by its make.py: the
//! scaling runs' MLP, DDP on gloo over 2 ranks, 4 micro-batches of 32 per step): the samples
//! per step are micro-batch × forward passes × ranks, the passes are said, and the FLOPs per
//! step are 4 micro-batches' worth (an independent count from scenario.json's layers).

// Tests read the zoo from disk; the core never does (its clippy.toml).
#![allow(clippy::disallowed_methods, clippy::disallowed_types)]

mod common;

use common::zoo::run;
use rankscope_core::compare::rate::{Given, Source};
use rankscope_core::compare::runs;
use serde_json::Value;

fn int(v: &Value) -> i64 {
    v.as_i64().unwrap_or_else(|| panic!("not an integer: {v}"))
}

#[test]
fn samples_per_step_count_every_forward_pass() {
    let (a, spec) = run("accum/accum_w2");
    let (micro, passes) = (int(&spec["micro_batch"]), int(&spec["forward_passes"]));
    assert_eq!(passes, 4);
    assert_eq!(a.work.len(), 2);
    for w in &a.work {
        let b = &w.work.batch;
        assert_eq!(b.forward_passes, Some(4), "rank {}: {b:?}", w.rank);
        assert_eq!(b.samples, Some(micro * passes), "rank {}: {b:?}", w.rank);
        assert!(b.from.as_deref().is_some_and(|f| f.ends_with("× 4 forward passes")), "{:?}", b.from);
        // FLOPs: forward, weight gradients and input gradients (not the first layer's) of every
        // micro-batch, 2 FLOPs per multiply-add.
        let layers: Vec<f64> = spec["model"]["layers"]
            .as_array()
            .unwrap_or_else(|| panic!("layers"))
            .iter()
            .map(|l| (int(&l["in"]) * int(&l["out"])) as f64)
            .collect();
        let all: f64 = layers.iter().sum();
        let per_pass = 2.0 * micro as f64 * (2.0 * all + layers.iter().skip(1).sum::<f64>());
        assert_eq!(w.work.flops_per_step, Some(per_pass * passes as f64), "rank {}", w.rank);
    }
    let t = runs::runs([("accum_w2", &a)], &Given::default());
    let r = &t.runs[0];
    assert_eq!(r.rate.samples_per_step.value, Some(int(&spec["samples_per_step"])));
    assert_eq!(r.rate.samples_per_step.from, Some(Source::Trace));
    assert_eq!(r.rate.forward_passes, Some(4));
    assert!(runs::text(&t).contains("4 forward passes per step"), "{}", runs::text(&t));
}

#[test]
fn one_pass_per_step_says_nothing_more() {
    let (a, _) = run("scaling/strong_w2");
    for w in &a.work {
        assert_eq!(w.work.batch.forward_passes, None, "rank {}", w.rank);
    }
    let t = runs::runs([("strong_w2", &a)], &Given::default());
    assert_eq!(t.runs[0].rate.forward_passes, None);
    assert!(!runs::text(&t).contains("forward passes"));
}
