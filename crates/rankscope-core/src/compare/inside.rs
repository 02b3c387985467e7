//! What changed inside the step: the operators the verdict names (issue 36).
//!
//! The verdict's cause is a rank's region or breakdown figure. When the step's change beyond
//! noise is mostly a few matched operators' work ([`super::operators`]), the first line says
//! which: "aten::mm +30 ms per step on every rank (shapes changed: … → …), in every rank's
//! forward +28–31 ms per step". The rule:
//!
//! - only with a step change beyond noise, and only operators whose own change of self time is
//!   beyond noise (the operator table's rule) the step's way;
//! - an operator's work, not a region or a wait: annotations are regions (the verdict already
//!   walks them), runtime calls are the host waiting on or feeding the device, communication
//!   ops are the transfer and the wait for other ranks (the figures say those);
//! - each operator's change **per rank where it ran** (the table's mean over every rank × the
//!   ranks ÷ the ranks it ran on: one rank's doubled batch is that rank's time, not a quarter
//!   of it), the largest first, at most [`MAX_NAMED`] of them, until they add up to
//!   [`EXPLAINS`] of the step's change; otherwise none is named;
//! - they never displace a cause that explains more: a cause made of compute (the compute
//!   figure, or a region whose change is compute) holds operators, so they are said as its
//!   detail; any other cause (input, idle, a transfer, host synchronization) stays first unless
//!   the operators explain more of the step than it does.

use serde::{Deserialize, Serialize};

use super::operators::{OpPresence, OperatorDiff};
use super::verdict::signed_dur;
use super::Comparison;
use crate::analyze::operators::OpKind;
use crate::analyze::Analysis;

/// The operators named must add up to this share of the step's change.
pub const EXPLAINS: f64 = 0.5;
/// At most this many operators are named.
pub const MAX_NAMED: usize = 3;
/// An operator is spread evenly when its heaviest rank holds at most this × its mean per rank.
pub const EVEN: f64 = 1.25;
/// Several shapes of a side are said by their first and how many more.
const SHAPES_SAID: usize = 1;

/// One operator the verdict names.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct OperatorCause {
    pub kind: OpKind,
    pub name: String,
    pub presence: OpPresence,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shapes_base: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shapes_new: Option<String>,
    /// The ranks it ran on (the larger count of the two runs) and whether that is every rank
    /// of the job.
    pub ranks: u32,
    pub every_rank: bool,
    /// Its time is about the same on each rank it ran on (the rank where it weighs most holds
    /// at most [`EVEN`] × the mean, in both runs; false when a side has several shapes).
    pub even: bool,
    /// The rank it ran on when one, else the rank where it weighs most when not `even` (absent
    /// when a side has several shapes: each has its own heaviest rank).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rank: Option<u32>,
    /// Its self time's change per step per rank it ran on (their mean), and the interval.
    pub delta_ns: i64,
    pub lo_ns: i64,
    pub hi_ns: i64,
}

/// How the operators stand to the verdict's cause.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Beside {
    /// No cause was found.
    Nothing,
    /// The cause is compute (the figure, or a region whose change is compute): it holds them.
    Compute,
    /// Another kind of time, explaining this much of the step per step on its origin rank.
    Other(i64),
}

/// Whether an operator is a framework operator's or kernel's work (see the module's rule).
fn is_work(o: &OperatorDiff, base: &Analysis, new: &Analysis) -> bool {
    let comm = base
        .operators
        .rows
        .iter()
        .chain(&new.operators.rows)
        .any(|r| r.comm && r.kind == o.kind && r.name == o.name);
    !o.other && !comm && matches!(o.kind, OpKind::CpuOp | OpKind::Kernel | OpKind::GpuMemory)
}

/// The operators that explain the step's change, or none (see the module's rule).
pub fn named(c: &Comparison, base: &Analysis, new: &Analysis, beside: Beside) -> Vec<OperatorCause> {
    let st = &c.step_time;
    let Some(step) = st.shift.filter(|_| st.beyond_noise) else { return Vec::new() };
    if step.delta_ns == 0 {
        return Vec::new();
    }
    let dir = step.delta_ns.signum();
    // Runs of one world size: a mean over every rank scales to the ranks it ran on.
    let world = base.operators.ranks;
    let same_world = world > 0 && world == new.operators.ranks;
    let mut cands: Vec<OperatorCause> = c
        .operators
        .iter()
        .filter(|o| o.beyond_noise && o.shift.delta_ns.signum() == dir && is_work(o, base, new))
        .map(|o| {
            let ran = o.ranks_base.max(o.ranks_new).max(1);
            let scale = if same_world && ran <= world { world as f64 / ran as f64 } else { 1.0 };
            let per = |x: i64| (x as f64 * scale).round() as i64;
            let top = if o.presence == OpPresence::Vanished || (dir < 0 && o.top_base.is_some()) {
                o.top_base
            } else {
                o.top_new.or(o.top_base)
            };
            // A side of several shapes has a top per shape, not per operator: unknown, not even.
            let several =
                [&o.shapes_base, &o.shapes_new].iter().any(|s| s.as_ref().is_some_and(|s| s.contains(" | ")));
            let even = !several
                && [(o.top_base, o.shift.base_ns), (o.top_new, o.shift.new_ns)].iter().all(|(t, mean)| {
                    t.is_none_or(|t| t.self_ns as f64 <= EVEN * (*mean as f64 * scale) + 1.0)
                });
            let top = top.filter(|_| !several || ran == 1);
            OperatorCause {
                kind: o.kind,
                name: o.name.clone(),
                presence: o.presence,
                shapes_base: o.shapes_base.clone(),
                shapes_new: o.shapes_new.clone(),
                ranks: ran,
                every_rank: same_world && world > 1 && ran == world,
                even,
                rank: if ran == 1 || !even { top.map(|t| t.rank) } else { None },
                delta_ns: per(o.shift.delta_ns),
                lo_ns: per(o.shift.lo_ns),
                hi_ns: per(o.shift.hi_ns),
            }
        })
        .collect();
    cands.sort_by_key(|o| std::cmp::Reverse(o.delta_ns.abs()));
    let want = EXPLAINS * step.delta_ns.abs() as f64;
    let mut sum = 0i64;
    let mut out = Vec::new();
    for o in cands.into_iter().take(MAX_NAMED) {
        sum += o.delta_ns.abs();
        out.push(o);
        if sum as f64 >= want {
            break;
        }
    }
    if (sum as f64) < want {
        return Vec::new();
    }
    match beside {
        Beside::Other(cause_ns) if cause_ns.abs() >= sum => Vec::new(),
        _ => out,
    }
}

/// One side's shapes as the line says them: the first and how many more.
fn shapes(s: &Option<String>) -> String {
    let Some(s) = s else { return "unknown".into() };
    let all: Vec<&str> = s.split(" | ").collect();
    let more = all.len().saturating_sub(SHAPES_SAID);
    let head = all[..all.len().min(SHAPES_SAID)].join(" | ");
    if more > 0 {
        format!("{head} and {more} more")
    } else {
        head
    }
}

/// "aten::mm +30 ms per step on every rank (shapes changed: [[1024,1024],[1024,1024]] →
/// [[2048,1024],[1024,1024]])", the operators joined with commas.
pub fn words(ops: &[OperatorCause]) -> String {
    ops.iter().map(one_words).collect::<Vec<_>>().join(", ")
}

fn one_words(o: &OperatorCause) -> String {
    let most = o.rank.map_or(String::new(), |r| format!(", most on rank {r}"));
    let where_ = match (o.ranks, o.rank) {
        (1, Some(r)) => format!("on rank {r}"),
        (1, None) => "on one rank".to_string(),
        _ if o.every_rank && o.even => "on every rank".to_string(),
        _ if o.every_rank => format!("per rank on average{most}"),
        (n, _) if o.even => format!("on {n} ranks"),
        (n, _) => format!("per rank on average over {n} ranks{most}"),
    };
    let tag = match o.presence {
        OpPresence::Both => String::new(),
        OpPresence::New => " (new)".into(),
        OpPresence::Vanished => " (gone)".into(),
        OpPresence::ShapesChanged => {
            format!(" (shapes changed: {} → {})", shapes(&o.shapes_base), shapes(&o.shapes_new))
        }
    };
    let name = match (&o.presence, &o.shapes_new) {
        (OpPresence::Both, Some(s)) => format!("{} {s}", o.name),
        _ => o.name.clone(),
    };
    format!("{name} {} per step {where_}{tag}", signed_dur(o.delta_ns))
}
