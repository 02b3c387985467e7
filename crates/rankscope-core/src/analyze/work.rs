//! The model's work per step on one rank, from the operators' shapes (`record_shapes=True`:
//! Kineto's `Input Dims`): FLOPs, samples and tokens, and a signature of the model
//! (docs/metrics.md "Work per step"). Computed per rank in `rank_part`; `rankscope runs` turns it
//! into throughput, MFU and scaling efficiency.
//!
//! **FLOPs counted**: every *outermost* [`ShapedOp`] of a CPU thread inside a profiled step (an
//! op nested in another counted op is its implementation: `aten::linear` → `aten::addmm`,
//! `aten::matmul` → `aten::mm`, counted once as the outer one). The backward's ops are in the
//! trace too (`AddmmBackward0` → `aten::mm`, the fused attention backward): what ran is counted,
//! never the forward × 3 (the first layer's backward, whose input needs no gradient, runs one
//! product, not two). A multiply-add is 2 FLOPs:
//! - `mm` `[M, K] × [K, N]`, `addmm` (its 2nd and 3rd inputs): 2·M·K·N (the bias add is left out);
//! - `bmm`, `baddbmm`: 2·B·M·K·N;
//! - `linear(x [.., K], W [N, K])`: 2·(x's elements / K)·K·N;
//! - `matmul(a, b)`: 2·batch·M·K·N with the batch dims broadcast (a 1-D side gives M or N = 1);
//! - attention `q [.., L, E]`, `k [.., S, E]`, `v [.., S, Ev]`: 2·B·L·S·E + 2·B·L·S·Ev (B the
//!   leading dims; a causal mask is not subtracted: what most tools count); its fused backward
//!   (inputs `grad_out, q, k, v, ..`) 2× that, 2.5× for the flash kernels that recompute the
//!   scores (FlashAttention-2's count);
//! - convolutions are not counted (the output size needs stride and padding, which the shapes do
//!   not hold): they are named in `not_counted`, as is an op whose dims cannot be read.
//!
//! `flops_per_step` is the median over the rank's steps. `counted_share`: the counted ops' time
//! over the rank's compute time in its steps (`rank_totals[].compute_ns`): on a rank measured on
//! the device, the kernels launched from inside the counted ops (by `External id`); on a host-only
//! rank, the ops' own time.
//!
//! **Samples and tokens per step** (per rank): the batch dimension of the step's model input, read
//! on the *first* outermost `aten::linear`, `aten::matmul`, convolution (forward) or
//! `aten::embedding` of the step: the first dim of its input (of the indices for an embedding) is
//! the samples, and when that input has a sequence dim (≥ 3-D for a linear or matmul, 2-D indices
//! for an embedding) the first two dims' product is the tokens. It declines (says why, never
//! guesses) when the trace has no shapes, when the step's first such op is a bare `mm` / `addmm` /
//! `bmm` (its rows may be samples or tokens), when that input is 1-D, and when the steps disagree.
//!
//! **Forward passes** (gradient accumulation, pipeline micro-batches): that first op, with the
//! same dims, called again after a backward began (an `autograd::engine::evaluate_function:` on
//! any CPU thread of the rank, later than the previous call) starts another forward pass; the
//! samples (tokens) per step are the micro-batch's × the passes, and `batch.forward_passes` says
//! how many when more than one. Passes of unequal size (a 1F1B pipeline's warm-up forwards)
//! cannot be told apart: the samples are then not known, with that reason. A model that calls the same layer shape several times in one
//! forward (a transformer's blocks) has no backward between those calls: one pass.
//!
//! **Signature**: the model's identity across world sizes: the multiset of the weight shapes of
//! the outermost `linear`, convolution and `embedding` ops of the rank's first counted step
//! (`aten::linear [512,64]`), which data parallelism does not change and the batch does not enter.
//! Runs whose every rank has the same signature run the same model.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::model::{EventKind, LaneKind, ShapedOp, StringTable, NONE_U32, NONE_U64};
use crate::normalize::job::RankEntry;

/// One rank's work per step (module doc).
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct Work {
    /// Median over the rank's steps of the FLOPs counted; `None` when no op was counted.
    pub flops_per_step: Option<f64>,
    /// Per op name, what was counted: calls and FLOPs per step (medians over steps).
    pub counted: Vec<OpFlops>,
    /// The shaped ops seen whose FLOPs were not counted, with why.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub not_counted: Vec<NotCounted>,
    /// The counted ops' time over the rank's compute time in its steps.
    pub counted_share: Option<f64>,
    pub batch: Batch,
    pub signature: Option<Signature>,
}

/// FLOPs of one op name.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct OpFlops {
    pub name: String,
    pub calls_per_step: f64,
    pub flops_per_step: f64,
}

/// A shaped op not counted, and why.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct NotCounted {
    pub name: String,
    pub calls_per_step: f64,
    pub why: String,
}

/// Samples and tokens per step on this rank (module doc).
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct Batch {
    pub samples: Option<i64>,
    pub tokens: Option<i64>,
    /// The op and dims read (`aten::linear [[128,64],[512,64],[512]]`).
    pub from: Option<String>,
    /// Why samples (or tokens) are not known.
    pub why_not: Option<String>,
    /// Forward passes per step when more than one (module doc): `samples` is the micro-batch's
    /// first dim × this.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub forward_passes: Option<u32>,
}

/// The model's identity (module doc).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct Signature {
    /// FNV-1a 64 of the sorted weight shapes, hex.
    pub hash: String,
    /// Weight tensors used per step (a shared weight counts each time).
    pub weights: u32,
    /// Their elements.
    pub params: i64,
}

/// `Input Dims` text as dims per input (`[[8,64],[],[256]]`); a TensorList or a non-number
/// makes that input `None`.
pub fn parse_dims(text: &str) -> Vec<Option<Vec<i64>>> {
    let inner = text.trim().strip_prefix('[').and_then(|s| s.strip_suffix(']')).unwrap_or("");
    let mut out = Vec::new();
    let (mut depth, mut cur, mut ok, mut num) = (0u32, Vec::new(), true, String::new());
    for c in inner.chars() {
        match c {
            '[' => {
                depth += 1;
                if depth == 1 {
                    cur.clear();
                    ok = true;
                    num.clear();
                } else {
                    ok = false;
                }
            }
            ']' | ',' if depth == 1 => {
                if !num.is_empty() {
                    match num.parse::<i64>() {
                        Ok(v) if v >= 0 => cur.push(v),
                        _ => ok = false,
                    }
                    num.clear();
                }
                if c == ']' {
                    depth = 0;
                    out.push(ok.then(|| cur.clone()));
                }
            }
            ']' => depth = depth.saturating_sub(1),
            _ if depth == 1 => num.push(c),
            _ => {}
        }
    }
    out
}

fn prod(d: &[i64]) -> f64 {
    d.iter().map(|&x| x as f64).product()
}

/// `2·M·K·N` of `[.., M, K] × [.., K, N]` with broadcast batch dims; `None` when the inner dims
/// disagree.
pub fn matmul_flops(a: &[i64], b: &[i64]) -> Option<f64> {
    let (a2, b2): (Vec<i64>, Vec<i64>) = (
        if a.len() == 1 { vec![1, a[0]] } else { a.to_vec() },
        if b.len() == 1 { vec![b[0], 1] } else { b.to_vec() },
    );
    let (&[m, k], &[k2, n]) = (a2.get(a2.len().checked_sub(2)?..)?, b2.get(b2.len().checked_sub(2)?..)?)
    else {
        return None;
    };
    if k != k2 {
        return None;
    }
    let (ba, bb) = (&a2[..a2.len() - 2], &b2[..b2.len() - 2]);
    let n_batch = ba.len().max(bb.len());
    let mut batch = 1.0;
    for i in 0..n_batch {
        let x = ba.len().checked_sub(n_batch - i).and_then(|j| ba.get(j)).copied().unwrap_or(1);
        let y = bb.len().checked_sub(n_batch - i).and_then(|j| bb.get(j)).copied().unwrap_or(1);
        batch *= x.max(y) as f64;
    }
    Some(2.0 * batch * m as f64 * k as f64 * n as f64)
}

/// `2·B·L·S·E + 2·B·L·S·Ev` of `q [.., L, E]`, `k [.., S, E]`, `v [.., S, Ev]`.
pub fn attention_flops(q: &[i64], k: &[i64], v: &[i64]) -> Option<f64> {
    let (&[l, e], &[s, e2], &[s2, ev]) = (
        q.get(q.len().checked_sub(2)?..)?,
        k.get(k.len().checked_sub(2)?..)?,
        v.get(v.len().checked_sub(2)?..)?,
    ) else {
        return None;
    };
    if e != e2 || s != s2 {
        return None;
    }
    let b = prod(&q[..q.len() - 2]);
    Some(2.0 * b * (l * s) as f64 * (e + ev) as f64)
}

/// The FLOPs of one op from its dims (module doc), or why not.
pub fn op_flops(op: ShapedOp, dims: &[Option<Vec<i64>>]) -> Result<f64, &'static str> {
    let get = |i: usize| dims.get(i).and_then(|d| d.as_deref());
    let need = |i: usize| get(i).ok_or("its dims could not be read");
    let r = match op {
        ShapedOp::Mm | ShapedOp::Matmul | ShapedOp::Bmm => matmul_flops(need(0)?, need(1)?),
        ShapedOp::Addmm | ShapedOp::Baddbmm => matmul_flops(need(1)?, need(2)?),
        ShapedOp::Linear => {
            let (x, w) = (need(0)?, need(1)?);
            match (x.last(), w) {
                (Some(&k), &[n, k2]) if k == k2 => Some(2.0 * prod(x) * n as f64),
                _ => None,
            }
        }
        ShapedOp::Attention => attention_flops(need(0)?, need(1)?, need(2)?),
        ShapedOp::AttentionBackward { flash } => {
            attention_flops(need(1)?, need(2)?, need(3)?).map(|f| f * if flash { 2.5 } else { 2.0 })
        }
        ShapedOp::Conv => return Err("the output size needs stride and padding, which shapes do not hold"),
        ShapedOp::Embedding => return Err("a lookup, no FLOPs"),
    };
    r.ok_or("its dims do not fit the op")
}

/// Where the batch is on an op that may be the model's input (module doc): the input index.
fn batch_input(op: ShapedOp, name: &str) -> Option<usize> {
    match op {
        ShapedOp::Linear | ShapedOp::Matmul => Some(0),
        ShapedOp::Conv if !name.ends_with("_backward") => Some(0),
        ShapedOp::Embedding => Some(1),
        ShapedOp::Mm | ShapedOp::Addmm | ShapedOp::Bmm | ShapedOp::Baddbmm => Some(usize::MAX),
        _ => None,
    }
}

/// Samples and tokens from the first model-input op of a step.
fn batch_of(
    op: ShapedOp,
    name: &str,
    text: &str,
    dims: &[Option<Vec<i64>>],
) -> Result<(i64, Option<i64>), String> {
    let i = batch_input(op, name).unwrap_or(usize::MAX);
    if i == usize::MAX {
        return Err(format!("the step's first product is a bare {name} (its rows may be samples or tokens)"));
    }
    let Some(x) = dims.get(i).and_then(|d| d.as_deref()) else {
        return Err(format!("{name}'s input dims could not be read ({text})"));
    };
    let seq = match op {
        ShapedOp::Embedding => x.len() >= 2,
        ShapedOp::Conv => false,
        _ => x.len() >= 3,
    };
    match x {
        [b, t, ..] if seq => Ok((*b, Some(b * t))),
        [b, _, ..] => Ok((*b, None)),
        _ => Err(format!("{name}'s input is 1-D ({text}): no batch dimension")),
    }
}

/// FNV-1a, 64 bits.
pub(crate) fn fnv(s: &str) -> u64 {
    s.bytes().fold(0xcbf2_9ce4_8422_2325, |h, b| (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3))
}

/// A step's first model-input op: samples, tokens and what was read, or why not.
type FirstInput = Result<(i64, Option<i64>, String), String>;

/// Where a backward of autograd runs (module doc, "Forward passes").
const BACKWARD: &str = "autograd::engine::evaluate_function:";

/// The calls of a step's first model-input op (times, sorted) in groups that a backward
/// separates: each group is a forward pass when they are all the same size.
fn pass_groups(calls: &[i64], backward: &[i64]) -> Vec<u32> {
    let mut groups: Vec<u32> = Vec::new();
    for (k, &t) in calls.iter().enumerate() {
        let new_pass = k == 0 || {
            let j = backward.partition_point(|&b| b <= calls[k - 1]);
            backward.get(j).is_some_and(|&b| b < t)
        };
        match groups.last_mut() {
            Some(n) if !new_pass => *n += 1,
            _ => groups.push(1),
        }
    }
    groups
}

/// Forward passes of a step (module doc), or why they cannot be told: groups of unequal size
/// (a pipeline schedule's warm-up runs several forwards before its first backward).
fn passes(calls: &[i64], backward: &[i64]) -> Result<u32, String> {
    let g = pass_groups(calls, backward);
    match g.first() {
        Some(&n) if g.iter().any(|&x| x != n) => Err(format!(
            "the step's forward passes cannot be told (calls of its first op between backwards: {g:?}; a pipeline schedule?)"
        )),
        _ => Ok(u32::try_from(g.len()).unwrap_or(u32::MAX).max(1)),
    }
}

#[derive(Default)]
struct Step {
    flops: f64,
    calls: BTreeMap<String, (u32, f64)>,
    skipped: BTreeMap<String, (u32, &'static str)>,
    batch: Option<FirstInput>,
    /// The first model-input op's name and dims text, and the times it was called.
    first_key: Option<(String, String)>,
    first_calls: Vec<i64>,
    /// Start times of the backward's evaluations.
    backward: Vec<i64>,
    weights: Vec<(String, i64)>,
    ops_ns: i64,
}

/// One rank's work per step (module doc); `compute_ns` is its compute time in its steps. `None`
/// when the trace records no shapes of a [`ShapedOp`].
pub fn of(r: &RankEntry, strings: &StringTable, compute_ns: i64) -> Option<Work> {
    let t = &r.trace;
    let e = &t.events;
    let steps_of_rank = &r.norm.steps.number;
    let mut steps: BTreeMap<u32, Step> = steps_of_rank.iter().map(|&s| (s, Step::default())).collect();
    let mut open_until = vec![i64::MIN; t.lanes.len()];
    let mut inside: crate::model::FxHashMap<u64, ()> = Default::default();
    let mut seen_dims = false;
    for i in 0..e.len() {
        let lane = e.lane[i].0 as usize;
        if t.lanes.kind.get(lane) != Some(&LaneKind::Cpu) || e.kind[i] != EventKind::Slice {
            continue;
        }
        let ts = e.ts_ns[i];
        if strings.get(e.name[i]).starts_with(BACKWARD) {
            if let Some(st) = steps.get_mut(&e.step[i]) {
                st.backward.push(ts);
            }
            continue;
        }
        let nested = open_until.get(lane).is_some_and(|&u| ts < u);
        if nested {
            if e.external_id[i] != NONE_U64 {
                inside.insert(e.external_id[i], ());
            }
            continue;
        }
        let a = e.args[i];
        if a == NONE_U32 {
            continue;
        }
        let Some(&text_id) = t.comm.input_dims.get(a as usize) else { continue };
        let text = strings.get(text_id);
        if text.is_empty() {
            continue;
        }
        let name = strings.get(e.name[i]);
        let Some(op) = ShapedOp::of(name) else { continue };
        seen_dims = true;
        let Some(st) = steps.get_mut(&e.step[i]) else { continue };
        if let Some(u) = open_until.get_mut(lane) {
            *u = ts.saturating_add(e.dur_ns[i]);
        }
        if e.external_id[i] != NONE_U64 {
            inside.insert(e.external_id[i], ());
        }
        let dims = parse_dims(text);
        match op_flops(op, &dims) {
            Ok(f) => {
                st.flops += f;
                let c = st.calls.entry(name.to_string()).or_default();
                c.0 += 1;
                c.1 += f;
                st.ops_ns += e.dur_ns[i];
            }
            Err(why) => st.skipped.entry(name.to_string()).or_insert((0, why)).0 += 1,
        }
        if st.batch.is_none() && batch_input(op, name).is_some() {
            st.batch = Some(batch_of(op, name, text, &dims).map(|(s, tk)| (s, tk, format!("{name} {text}"))));
            st.first_key = Some((name.to_string(), text.to_string()));
        }
        if st.first_key.as_ref().is_some_and(|(n, t)| n == name && t == text) {
            st.first_calls.push(ts);
        }
        let weight = match op {
            ShapedOp::Linear => dims.get(1),
            ShapedOp::Conv if !name.ends_with("_backward") => dims.get(1),
            ShapedOp::Embedding => dims.first(),
            _ => None,
        };
        if let Some(Some(w)) = weight {
            let shape: Vec<String> = w.iter().map(|x| x.to_string()).collect();
            st.weights.push((format!("{name} [{}]", shape.join(",")), w.iter().product()));
        }
    }
    if !seen_dims {
        return None;
    }
    // On a rank measured on the device, the counted ops' time is their kernels'.
    let device = t.lanes.kind.contains(&LaneKind::Gpu);
    let mut counted_ns: i64 = steps.values().map(|s| s.ops_ns).sum();
    if device {
        counted_ns = (0..e.len())
            .filter(|&k| {
                t.lanes.kind.get(e.lane[k].0 as usize) == Some(&LaneKind::Gpu)
                    && e.step[k] != NONE_U32
                    && e.class[k] == crate::model::Class::Compute
                    && inside.contains_key(&e.external_id[k])
            })
            .map(|k| e.dur_ns[k])
            .sum();
    }
    let n = steps.len().max(1) as f64;
    let median = |mut v: Vec<f64>| {
        v.sort_by(f64::total_cmp);
        v.get(v.len() / 2).copied()
    };
    let mut counted: BTreeMap<String, (f64, f64)> = BTreeMap::new();
    let mut not_counted: BTreeMap<String, (f64, &'static str)> = BTreeMap::new();
    for s in steps.values() {
        for (k, &(c, f)) in &s.calls {
            let x = counted.entry(k.clone()).or_default();
            x.0 += f64::from(c) / n;
            x.1 += f / n;
        }
        for (k, &(c, why)) in &s.skipped {
            not_counted.entry(k.clone()).or_insert((0.0, why)).0 += f64::from(c) / n;
        }
    }
    let any = !counted.is_empty();
    let batch = {
        let got: Vec<_> = steps
            .values_mut()
            .map(|s| {
                s.first_calls.sort_unstable();
                s.backward.sort_unstable();
                (s.batch.clone(), passes(&s.first_calls, &s.backward))
            })
            .collect();
        let not = |why: String| Batch { why_not: Some(why), ..Batch::default() };
        match got.first() {
            None => not("no profiled step".into()),
            Some((first, _)) if got.iter().any(|(g, _)| g != first) => {
                not("the steps' first inputs differ".into())
            }
            Some((None, _)) => not("no linear, matmul, convolution or embedding in the steps".into()),
            Some((Some(Err(why)), _)) => not(why.clone()),
            Some((Some(Ok(_)), _)) if got.iter().any(|(_, n)| n.is_err()) => {
                not(got.iter().find_map(|(_, n)| n.clone().err()).unwrap_or_default())
            }
            Some((Some(Ok(_)), first)) if got.iter().any(|(_, n)| n != first) => {
                not("the steps' numbers of forward passes differ".into())
            }
            Some((Some(Ok((s, tk, from))), n)) => {
                let n = n.clone().unwrap_or(1);
                Batch {
                    samples: Some(s * i64::from(n)),
                    tokens: tk.map(|t| t * i64::from(n)),
                    from: Some(if n > 1 { format!("{from} × {n} forward passes") } else { from.clone() }),
                    why_not: tk.is_none().then(|| "the model's input has no sequence dimension".into()),
                    forward_passes: (n > 1).then_some(n),
                }
            }
        }
    };
    let signature = steps.values().find(|s| !s.weights.is_empty()).map(|s| {
        let mut w: Vec<&str> = s.weights.iter().map(|(k, _)| k.as_str()).collect();
        w.sort_unstable();
        Signature {
            hash: format!("{:016x}", fnv(&w.join(";"))),
            weights: u32::try_from(w.len()).unwrap_or(u32::MAX),
            params: s.weights.iter().map(|(_, p)| p).sum(),
        }
    });
    Some(Work {
        flops_per_step: if any { median(steps.values().map(|s| s.flops).collect()) } else { None },
        counted: counted
            .into_iter()
            .map(|(name, (calls_per_step, flops_per_step))| OpFlops { name, calls_per_step, flops_per_step })
            .collect(),
        not_counted: not_counted
            .into_iter()
            .map(|(name, (calls_per_step, why))| NotCounted { name, calls_per_step, why: why.to_string() })
            .collect(),
        counted_share: (any && compute_ns > 0).then(|| counted_ns as f64 / compute_ns as f64),
        batch,
        signature,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dims_are_read_per_input() {
        assert_eq!(parse_dims("[[8,64],[],[256]]"), vec![Some(vec![8, 64]), Some(vec![]), Some(vec![256])]);
        assert_eq!(parse_dims("[[[2],[3]],[4]]"), vec![None, Some(vec![4])]);
        assert_eq!(parse_dims("[]"), Vec::<Option<Vec<i64>>>::new());
    }

    #[test]
    fn flop_formulas() {
        let d = |t: &str| parse_dims(t);
        // mm: 2·M·K·N.
        assert_eq!(op_flops(ShapedOp::Mm, &d("[[4,3],[3,5]]")), Ok(120.0));
        // addmm reads its 2nd and 3rd inputs.
        assert_eq!(op_flops(ShapedOp::Addmm, &d("[[5],[4,3],[3,5],[],[]]")), Ok(120.0));
        // bmm: 2·B·M·K·N.
        assert_eq!(op_flops(ShapedOp::Bmm, &d("[[2,4,3],[2,3,5]]")), Ok(240.0));
        assert_eq!(op_flops(ShapedOp::Baddbmm, &d("[[2,4,5],[2,4,3],[2,3,5],[],[]]")), Ok(240.0));
        // linear on [B, T, K] with W [N, K]: 2·B·T·K·N.
        assert_eq!(op_flops(ShapedOp::Linear, &d("[[2,7,3],[5,3],[5]]")), Ok(2.0 * 14.0 * 15.0));
        assert!(op_flops(ShapedOp::Linear, &d("[[2,7,3],[5,4],[5]]")).is_err());
        // matmul broadcasts: [2,1,4,3] × [6,3,5] → batch 2·6.
        assert_eq!(op_flops(ShapedOp::Matmul, &d("[[2,1,4,3],[6,3,5]]")), Ok(2.0 * 12.0 * 60.0));
        // a vector side: [3] × [3,5] = 2·1·3·5.
        assert_eq!(op_flops(ShapedOp::Matmul, &d("[[3],[3,5]]")), Ok(30.0));
        // attention: q [B,H,L,E], k/v [B,H,S,E]: 4·B·H·L·S·E; backward 2× (flash 2.5×).
        let q = "[[2,4,16,8],[2,4,32,8],[2,4,32,8],[],[]]";
        let fwd = 4.0 * 8.0 * 16.0 * 32.0 * 8.0;
        assert_eq!(op_flops(ShapedOp::Attention, &d(q)), Ok(fwd));
        let g = "[[2,4,16,8],[2,4,16,8],[2,4,32,8],[2,4,32,8]]";
        assert_eq!(op_flops(ShapedOp::AttentionBackward { flash: false }, &d(g)), Ok(2.0 * fwd));
        assert_eq!(op_flops(ShapedOp::AttentionBackward { flash: true }, &d(g)), Ok(2.5 * fwd));
        assert!(op_flops(ShapedOp::Conv, &d("[[8,3,32,32],[16,3,3,3]]")).is_err());
    }

    #[test]
    fn a_backward_between_calls_starts_a_pass() {
        // Four micro-batches: the first op at 0, 10, 20, 30, a backward after each.
        assert_eq!(passes(&[0, 10, 20, 30], &[5, 15, 25, 35]), Ok(4));
        // The same layer shape three times in one forward, then the backward: one pass.
        assert_eq!(passes(&[0, 1, 2], &[5, 6]), Ok(1));
        // Two passes of a model calling that shape twice each.
        assert_eq!(passes(&[0, 1, 10, 11], &[5, 15]), Ok(2));
        assert_eq!(passes(&[0], &[]), Ok(1));
        assert_eq!(passes(&[], &[3]), Ok(1));
        // A backward before the first call does not count.
        assert_eq!(passes(&[10, 20], &[1]), Ok(1));
        // 1F1B's warm-up: three forwards, then one forward per backward.
        assert!(passes(&[0, 1, 2, 10, 20], &[5, 15, 25]).is_err());
    }

    #[test]
    fn the_batch_is_the_first_inputs_first_dim() {
        let d = |t: &str| parse_dims(t);
        assert_eq!(
            batch_of(ShapedOp::Linear, "aten::linear", "", &d("[[128,64],[512,64],[512]]")),
            Ok((128, None))
        );
        assert_eq!(
            batch_of(ShapedOp::Linear, "aten::linear", "", &d("[[4,256,64],[512,64],[512]]")),
            Ok((4, Some(1024)))
        );
        assert_eq!(
            batch_of(ShapedOp::Embedding, "aten::embedding", "", &d("[[50000,64],[8,128],[],[],[]]")),
            Ok((8, Some(1024)))
        );
        assert!(batch_of(ShapedOp::Addmm, "aten::addmm", "", &d("[[5],[4,3],[3,5],[],[]]")).is_err());
        assert!(batch_of(ShapedOp::Linear, "aten::linear", "", &d("[[64],[512,64],[512]]")).is_err());
    }
}
