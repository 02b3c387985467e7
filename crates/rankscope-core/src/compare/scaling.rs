//! Scaling efficiency of one model at several world sizes (`rankscope runs`, docs/metrics.md
//! "Work per step"), and where the loss comes from.
//!
//! **One model**: runs whose every rank has the same signature (`analysis.work[].signature`: the
//! weight shapes the forward uses, which data parallelism and the batch leave alone), read
//! cleanly (no `errors`), with a step time. A group is reported when it holds at least two world
//! sizes (`ranks`).
//!
//! **Base**: each run is compared with a run of the group's smallest world size N₁: the one with
//! the same global batch (samples per step), else the same batch per rank, else the first.
//! - same global batch → **strong** scaling: ideal step T₁·N₁/N, efficiency T₁·N₁ / (T_N·N);
//! - same batch per rank → **weak** scaling: ideal step T₁, efficiency T₁ / T_N;
//! - both batches known but neither equal → `neither`; a batch not known → `ambiguous`: no
//!   efficiency (which ideal applies is not known), the loss taken against T₁.
//!
//! T is the step time p50 (`step_p50_ns`).
//!
//! **Where the loss comes from**: loss = T_N − ideal, split with the per-step means over ranks
//! of `rank_totals[]` (each total ÷ its `steps`): compute (C_N − C₁·N₁/N for strong scaling, whose
//! ideal divides the work; C_N − C₁ otherwise), exposed transfer (`exposed_transfer_ns`: the
//! fabric), waits (`exposed_wait_ns`: late ranks), and other (the rest: host, input, idle, the
//! difference between the slowest rank's step and the mean rank's).

use serde::{Deserialize, Serialize};

use crate::analyze::Analysis;

crate::named_enum! {
    /// How a run relates to its base.
    pub enum Mode {
        /// A run of the smallest world size: the base of the others.
        Base => "base",
        Strong => "strong",
        Weak => "weak",
        /// Both batches known, neither the global nor the per-rank one equal.
        Neither => "neither",
        /// A batch not known.
        Ambiguous => "ambiguous",
    }
}

/// Per-step means over ranks of the breakdown (module doc).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Parts {
    pub compute_ns: f64,
    pub exposed_transfer_ns: f64,
    pub exposed_wait_ns: f64,
}

impl Parts {
    pub fn of(a: &Analysis) -> Parts {
        let n = a.rank_totals.len().max(1) as f64;
        let per = |f: fn(&crate::analyze::RankTotals) -> i64| {
            a.rank_totals.iter().map(|t| f(t) as f64 / t.steps.max(1) as f64).sum::<f64>() / n
        };
        Parts {
            compute_ns: per(|t| t.compute_ns),
            exposed_transfer_ns: per(|t| t.exposed_transfer_ns),
            exposed_wait_ns: per(|t| t.exposed_wait_ns),
        }
    }
}

/// One run of the model, against its base.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Point {
    pub run: String,
    pub ranks: u32,
    /// The run compared with (itself for a base).
    pub base: String,
    pub mode: Mode,
    pub step_p50_ns: i64,
    pub ideal_ns: i64,
    pub efficiency: Option<f64>,
    /// T_N − ideal, and its parts (they add up to it).
    pub loss_ns: i64,
    pub compute_ns: i64,
    pub exposed_transfer_ns: i64,
    pub exposed_wait_ns: i64,
    pub other_ns: i64,
}

/// The runs of one model.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Group {
    /// The signature's hash.
    pub model: String,
    pub params: i64,
    pub points: Vec<Point>,
}

/// What a run brings to the grouping.
#[derive(Debug)]
pub struct Run<'a> {
    pub name: &'a str,
    pub ranks: u32,
    pub model: Option<&'a str>,
    pub params: i64,
    pub samples: Option<i64>,
    pub step_p50_ns: Option<i64>,
    pub parts: Parts,
}

/// The groups (module doc), in the order their first run is given.
pub fn groups(runs: &[Run<'_>]) -> Vec<Group> {
    let mut models: Vec<&str> = Vec::new();
    for r in runs {
        if let (Some(m), Some(_)) = (r.model, r.step_p50_ns) {
            if !models.contains(&m) {
                models.push(m);
            }
        }
    }
    let mut out = Vec::new();
    for m in models {
        let members: Vec<&Run<'_>> =
            runs.iter().filter(|r| r.model == Some(m) && r.step_p50_ns.is_some()).collect();
        let Some(n1) = members.iter().map(|r| r.ranks).min() else { continue };
        if members.iter().all(|r| r.ranks == n1) {
            continue;
        }
        let bases: Vec<&&Run<'_>> = members.iter().filter(|r| r.ranks == n1).collect();
        let points = members.iter().filter_map(|r| point(r, &bases, n1)).collect();
        out.push(Group { model: m.to_string(), params: members.first().map_or(0, |r| r.params), points });
    }
    out
}

fn point(r: &Run<'_>, bases: &[&&Run<'_>], n1: u32) -> Option<Point> {
    let t_n = r.step_p50_ns? as f64;
    let per_rank = |x: &Run<'_>| x.samples.map(|s| s as f64 / f64::from(x.ranks.max(1)));
    let (base, mode) = if r.ranks == n1 {
        (r, Mode::Base)
    } else if let Some(b) = bases.iter().find(|b| b.samples.is_some() && b.samples == r.samples) {
        (**b, Mode::Strong)
    } else if let Some(b) = bases.iter().find(|b| per_rank(b).is_some() && per_rank(b) == per_rank(r)) {
        (**b, Mode::Weak)
    } else {
        let b = **bases.first()?;
        (b, if b.samples.is_some() && r.samples.is_some() { Mode::Neither } else { Mode::Ambiguous })
    };
    let t1 = base.step_p50_ns? as f64;
    let scale = f64::from(n1) / f64::from(r.ranks.max(1));
    let (ideal, efficiency, work_scale) = match mode {
        Mode::Strong => (t1 * scale, Some(t1 * scale / t_n), scale),
        Mode::Weak | Mode::Base => (t1, Some(t1 / t_n), 1.0),
        Mode::Neither | Mode::Ambiguous => (t1, None, 1.0),
    };
    let loss = t_n - ideal;
    let (p, q) = (r.parts, base.parts);
    let compute = p.compute_ns - q.compute_ns * work_scale;
    let transfer = p.exposed_transfer_ns - q.exposed_transfer_ns;
    let wait = p.exposed_wait_ns - q.exposed_wait_ns;
    let ns = |x: f64| x.round() as i64;
    let loss_ns = ns(loss);
    let (c, x, w) = (ns(compute), ns(transfer), ns(wait));
    Some(Point {
        run: r.name.to_string(),
        ranks: r.ranks,
        base: base.name.to_string(),
        mode,
        step_p50_ns: ns(t_n),
        ideal_ns: ns(ideal),
        efficiency,
        loss_ns,
        compute_ns: c,
        exposed_transfer_ns: x,
        exposed_wait_ns: w,
        other_ns: loss_ns - c - x - w,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run<'a>(name: &'a str, ranks: u32, samples: Option<i64>, t: i64, compute: f64) -> Run<'a> {
        Run {
            name,
            ranks,
            model: Some("m"),
            params: 10,
            samples,
            step_p50_ns: Some(t),
            parts: Parts { compute_ns: compute, exposed_transfer_ns: 0.0, exposed_wait_ns: 0.0 },
        }
    }

    #[test]
    fn strong_weak_and_ambiguous() {
        let g = groups(&[
            run("s1", 1, Some(128), 100, 80.0),
            run("w1", 1, Some(32), 40, 20.0),
            run("s4", 4, Some(128), 50, 20.0),
            run("w4", 4, Some(128), 50, 20.0),
            run("u4", 4, None, 60, 20.0),
            run("n4", 4, Some(256), 60, 20.0),
        ]);
        assert_eq!(g.len(), 1);
        let p = |n: &str| g[0].points.iter().find(|p| p.run == n).cloned().unwrap_or_else(|| panic!("{n}"));
        // Strong: ideal 100·1/4 = 25; efficiency 25/50; compute loss 20 − 80/4 = 0.
        let s4 = p("s4");
        assert_eq!((s4.mode, s4.base.as_str(), s4.ideal_ns), (Mode::Strong, "s1", 25));
        assert_eq!(s4.efficiency, Some(0.5));
        assert_eq!((s4.loss_ns, s4.compute_ns, s4.other_ns), (25, 0, 25));
        // 128 on 4 ranks equals s1's global batch first: strong, not weak against w1.
        assert_eq!(p("w4").mode, Mode::Strong);
        assert_eq!((p("u4").mode, p("u4").efficiency), (Mode::Ambiguous, None));
        assert_eq!(p("n4").mode, Mode::Neither);
        assert_eq!(p("w1").mode, Mode::Base);
        let weak = groups(&[run("w1", 1, Some(32), 40, 20.0), run("w4", 4, Some(128), 50, 25.0)]);
        let w4 = weak[0].points.iter().find(|p| p.run == "w4").cloned().unwrap_or_else(|| panic!("w4"));
        assert_eq!((w4.mode, w4.efficiency, w4.loss_ns, w4.compute_ns), (Mode::Weak, Some(0.8), 10, 5));
    }
}
