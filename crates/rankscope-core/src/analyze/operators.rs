//! The job's operators and kernels per step: what ran, how often and for how long (issue 36:
//! what `rankscope diff` matches across two runs, as HTA's TraceDiff does for one rank).
//!
//! **Per rank** ([`rank_ops`], in the rank's part): every slice of the rank's trace that is an
//! operator, keyed by **what it is** ([`OpKind`], from the classes the model already has), its
//! **name** and, for the operators whose `Input Dims` the parser keeps (those counted from
//! shapes: `aten::linear`, `mm`, `addmm`, `bmm`, `matmul`, convolutions, attention,
//! `embedding`; [`crate::model::ShapedOp`]), its **input shapes** as written. Other operators
//! are keyed by name alone: the parser keeps no shapes for them. GPU kernels are keyed by name.
//! Per profiled step: calls, **inclusive** time (the slice's duration) and **self** time (its
//! duration less the tabled slices nested in it on the same thread: what the operator itself
//! spent, a `time.sleep` in an annotation included; self times on one thread add up to at most
//! the thread's time). Python-function events are not operators and take no self time away.
//! The call site is not a key: traces rarely record stacks (`with_stack`), and a name with its
//! shapes already tells a layer's operator from another's in most models.
//!
//! **Bounded**: per rank and kind, the keys kept are those whose self time is at least
//! [`KEEP_SHARE`] of the rank's profiled time (a quarter of what `diff` needs to judge a count,
//! `compare::operators::NEGLIGIBLE`), the [`TOP_N`] longest by self time and by inclusive time
//! (the frames: an autograd node around its kernels' launches) and every communication op (its
//! count says a bucket size), at most [`MAX_KEYS`] besides the communication ops; the rest of
//! the kind is one `other` row with the number of keys it folds. A key below the cut on one
//! rank counts there in that rank's `other`.
//!
//! **Per job** ([`combine`]): the ranks' rows added up per key and step; the per-step columns
//! are sums over the ranks (divide by [`Operators::ranks`] for the mean per rank, as `diff`
//! does), `ranks` the number of ranks it ran on, `call_p50_ns` the median over those ranks of
//! each rank's median call, `top_rank` the rank whose median self time per step is the largest.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::model::*;
use crate::normalize::job::RankEntry;

crate::named_enum! {
    /// What an operator row is.
    pub enum OpKind {
        /// A framework operator on a CPU thread (`aten::*`, `c10d::*`, autograd nodes).
        CpuOp => "cpu_op",
        /// A user or library annotation on a CPU thread (`record_function`, the DataLoader's
        /// `enumerate(DataLoader)#…`, `Optimizer.step#…`); the step marker is not one.
        Annotation => "annotation",
        /// A CUDA / HIP runtime or driver call (launches, synchronizations, allocations).
        Runtime => "runtime",
        /// A GPU kernel (compute or communication).
        Kernel => "kernel",
        /// A GPU memory copy or set.
        GpuMemory => "gpu_memory",
    }
}

/// Keys whose self time is at least this share of the rank's profiled time are kept.
pub const KEEP_SHARE: f64 = 0.0025;
/// The longest keys by self time and by inclusive time kept besides.
pub const TOP_N: usize = 8;
/// At most this many keys per rank and kind, besides the communication ops.
pub const MAX_KEYS: usize = 128;

/// One operator key of one rank (in the part) or of the job (in the analysis): per-step columns
/// in the order of the table's `steps`.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct OpRow {
    pub kind: OpKind,
    pub name: String,
    /// `Input Dims` as written (`[[64,512],[256,512],[256]]`), for the operators whose shapes
    /// the parser keeps; absent otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shapes: Option<String>,
    /// The rest of the kind, below the cut: how many keys it folds (0 for a key's own row).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub folded: u32,
    /// A communication op (`c10d::*`, `gloo:*`, NCCL kernels): kept on every rank whatever its
    /// time, so its count is complete.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub comm: bool,
    /// Per step: calls, inclusive time, self time (a job's: sums over the ranks).
    pub count: Vec<u64>,
    pub dur_ns: Vec<i64>,
    pub self_ns: Vec<i64>,
    /// The median call's duration (a job's: the median over its ranks of theirs).
    pub call_p50_ns: i64,
    /// Ranks it ran on (1 in a part).
    #[serde(default)]
    pub ranks: u32,
    /// The rank with the largest median self time per step, and that time (a part: its own).
    #[serde(default)]
    pub top_rank: u32,
    #[serde(default)]
    pub top_rank_self_ns: i64,
}

fn is_zero(v: &u32) -> bool {
    *v == 0
}

impl OpRow {
    /// A row with nothing in it yet, over `n` steps.
    pub fn empty(kind: OpKind, name: &str, shapes: Option<String>, n: usize) -> OpRow {
        OpRow {
            kind,
            name: name.to_string(),
            shapes,
            folded: 0,
            comm: false,
            count: vec![0; n],
            dur_ns: vec![0; n],
            self_ns: vec![0; n],
            call_p50_ns: 0,
            ranks: 0,
            top_rank: 0,
            top_rank_self_ns: 0,
        }
    }

    /// The key rows are matched by: kind, name, shapes, and whether it is an `other` row.
    pub fn key(&self) -> (OpKind, &str, Option<&str>, bool) {
        (self.kind, self.name.as_str(), self.shapes.as_deref(), self.folded > 0)
    }

    fn total_self(&self) -> i64 {
        self.self_ns.iter().sum()
    }

    fn total_dur(&self) -> i64 {
        self.dur_ns.iter().sum()
    }
}

/// The operator table of a rank (in its part) or of the job (in the analysis).
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct Operators {
    /// The profiled steps, the order of every row's per-step columns.
    pub steps: Vec<u32>,
    /// The ranks the table adds up (1 in a part): the divisor of the mean per rank.
    pub ranks: u32,
    /// Whether any rank's operators carry shapes (`record_shapes=True`): without, every key
    /// is a name.
    pub shapes: bool,
    /// Longest self time first; each kind's `other` row among them.
    pub rows: Vec<OpRow>,
}

impl Operators {
    pub fn is_empty(&self) -> bool {
        self.rows.is_empty()
    }
}

/// The kind of row `i` of a rank's trace, if it is an operator.
fn kind_of(t: &RankTrace, strings: &StringTable, i: usize) -> Option<OpKind> {
    let e = &t.events;
    if e.kind[i] != EventKind::Slice || e.dur_ns[i] < 0 {
        return None;
    }
    match t.lanes.kind.get(e.lane[i].0 as usize)? {
        LaneKind::Gpu => match e.class[i] {
            Class::Compute | Class::Communication => Some(OpKind::Kernel),
            Class::Memory => Some(OpKind::GpuMemory),
            _ => None,
        },
        LaneKind::Cpu => match e.class[i] {
            Class::Launch | Class::Sync | Class::Allocation => Some(OpKind::Runtime),
            _ if super::regions::is_region(t, strings, i) => {
                (!strings.get(e.name[i]).starts_with("ProfilerStep#")).then_some(OpKind::Annotation)
            }
            Class::Compute | Class::Communication | Class::Memory | Class::Other => {
                (!strings.get(e.cat[i]).eq_ignore_ascii_case("python_function")).then_some(OpKind::CpuOp)
            }
            _ => None,
        },
    }
}

/// One key's figures while a rank is read.
#[derive(Default)]
struct Acc {
    count: Vec<u64>,
    dur: Vec<i64>,
    own: Vec<i64>,
    calls: Vec<i64>,
    comm: bool,
}

/// The operator table of one rank, over its step windows (`steps`: the step numbers; `wall_ns`
/// the time they cover, which [`KEEP_SHARE`] is a share of).
pub fn rank_ops(r: &RankEntry, strings: &StringTable, steps: &[u32], wall_ns: i64) -> Operators {
    let t = &r.trace;
    let e = &t.events;
    let at: FxHashMap<u32, usize> = steps.iter().enumerate().map(|(k, &s)| (s, k)).collect();
    let n = steps.len();
    let mut keys: FxHashMap<(OpKind, StrId, StrId), usize> = FxHashMap::default();
    let mut accs: Vec<((OpKind, StrId, StrId), Acc)> = Vec::new();
    // Per CPU lane, the open tabled slices: (end, row in `slot` of its self time).
    let mut open: FxHashMap<LaneId, Vec<(i64, usize)>> = FxHashMap::default();
    // Per tabled row: its accumulator, step index and self time, settled when the rank is read.
    let mut slot: Vec<(usize, Option<usize>, i64)> = Vec::new();
    let mut shapes = false;
    for i in 0..e.len() {
        let Some(kind) = kind_of(t, strings, i) else { continue };
        let dims = match e.args[i] {
            a if a != NONE_U32 && kind == OpKind::CpuOp => {
                t.comm.input_dims.get(a as usize).copied().filter(|&d| !strings.get(d).is_empty())
            }
            _ => None,
        };
        shapes |= dims.is_some();
        let key = (kind, e.name[i], dims.unwrap_or(StrId(NONE_U32)));
        let k = *keys.entry(key).or_insert_with(|| {
            accs.push((
                key,
                Acc {
                    count: vec![0; n],
                    dur: vec![0; n],
                    own: vec![0; n],
                    calls: Vec::new(),
                    comm: e.class[i] == Class::Communication,
                },
            ));
            accs.len() - 1
        });
        let (ts, end) = (e.ts_ns[i], e.end_ns(i));
        if kind != OpKind::Kernel && kind != OpKind::GpuMemory {
            let stack = open.entry(e.lane[i]).or_default();
            while stack.last().is_some_and(|o| o.0 <= ts) {
                stack.pop();
            }
            if let Some(&(p_end, p)) = stack.last() {
                if let Some(s) = slot.get_mut(p) {
                    s.2 -= p_end.min(end) - ts;
                }
            }
            stack.push((end, slot.len()));
        }
        let step = at.get(&e.step[i]).copied();
        if let Some(st) = step {
            let a = &mut accs[k].1;
            a.count[st] += 1;
            a.dur[st] += e.dur_ns[i];
            a.calls.push(e.dur_ns[i]);
        }
        slot.push((k, step, e.dur_ns[i]));
    }
    for (k, step, own) in slot {
        if let (Some(st), Some((_, a))) = (step, accs.get_mut(k)) {
            a.own[st] += own.max(0);
        }
    }
    let mut rows: Vec<(OpRow, bool)> = accs
        .into_iter()
        .filter(|(_, a)| !a.calls.is_empty())
        .map(|((kind, name, dims), a)| {
            let p50 = super::stats::median(a.calls);
            let own: i64 = super::stats::median(a.own.clone());
            (
                OpRow {
                    kind,
                    name: strings.get(name).to_string(),
                    shapes: (dims.0 != NONE_U32).then(|| strings.get(dims).to_string()),
                    folded: 0,
                    comm: a.comm,
                    count: a.count,
                    dur_ns: a.dur,
                    self_ns: a.own,
                    call_p50_ns: p50,
                    ranks: 1,
                    top_rank: r.rank,
                    top_rank_self_ns: own,
                },
                a.comm,
            )
        })
        .collect();
    rows.sort_by(|a, b| {
        (b.0.total_self(), b.0.total_dur())
            .cmp(&(a.0.total_self(), a.0.total_dur()))
            .then(a.0.key().cmp(&b.0.key()))
    });
    let keep_ns = (KEEP_SHARE * wall_ns.max(0) as f64).round() as i64;
    Operators { steps: steps.to_vec(), ranks: 1, shapes, rows: bound(rows, n, keep_ns) }
}

/// Per kind, the keys kept (self time at least `keep_ns`, [`TOP_N`], communication, at most
/// [`MAX_KEYS`]) and one `other` row for the rest; `rows` sorted by self time, longest first.
fn bound(rows: Vec<(OpRow, bool)>, n: usize, keep_ns: i64) -> Vec<OpRow> {
    let mut out = Vec::new();
    for &kind in OpKind::ALL {
        let of: Vec<&(OpRow, bool)> = rows.iter().filter(|r| r.0.kind == kind).collect();
        let mut by_dur: Vec<usize> = (0..of.len()).collect();
        by_dur.sort_by_key(|&k| std::cmp::Reverse(of[k].0.total_dur()));
        let long: std::collections::BTreeSet<usize> = by_dur.into_iter().take(TOP_N).collect();
        let mut other = OpRow { ranks: 1, ..OpRow::empty(kind, "other", None, n) };
        let mut kept = 0usize;
        for (k, (row, comm)) in of.iter().enumerate() {
            let long_enough = row.total_self() >= keep_ns;
            if *comm || (kept < MAX_KEYS && (long_enough || k < TOP_N || long.contains(&k))) {
                out.push(row.clone());
                kept += usize::from(!*comm);
                continue;
            }
            other.folded += 1;
            for s in 0..n {
                other.count[s] += row.count.get(s).copied().unwrap_or(0);
                other.dur_ns[s] += row.dur_ns.get(s).copied().unwrap_or(0);
                other.self_ns[s] += row.self_ns.get(s).copied().unwrap_or(0);
            }
        }
        if other.folded > 0 {
            other.top_rank = of.first().map_or(0, |r| r.0.top_rank);
            other.top_rank_self_ns = super::stats::median(other.self_ns.clone());
            out.push(other);
        }
    }
    out.sort_by(|a, b| b.total_self().cmp(&a.total_self()).then(a.key().cmp(&b.key())));
    out
}

/// The job's table: every rank's rows added up per key and step (`ranks`: the parts' ranks'
/// tables, in rank order).
pub fn combine(tables: &[(u32, &Operators)]) -> Operators {
    let steps: Vec<u32> = {
        let mut v: Vec<u32> = tables.iter().flat_map(|t| t.1.steps.iter().copied()).collect();
        v.sort_unstable();
        v.dedup();
        v
    };
    let n = steps.len();
    let at: BTreeMap<u32, usize> = steps.iter().enumerate().map(|(k, &s)| (s, k)).collect();
    type Key = (OpKind, String, Option<String>, bool);
    // Per key: the job's row, each rank's median call, the top rank.
    let mut m: BTreeMap<Key, (OpRow, Vec<i64>)> = BTreeMap::new();
    for &(rank, t) in tables {
        for r in &t.rows {
            let key = (r.kind, r.name.clone(), r.shapes.clone(), r.folded > 0);
            let (row, calls) = m.entry(key).or_insert_with(|| {
                (
                    OpRow {
                        top_rank: rank,
                        top_rank_self_ns: i64::MIN,
                        ..OpRow::empty(r.kind, &r.name, r.shapes.clone(), n)
                    },
                    Vec::new(),
                )
            });
            for (k, s) in t.steps.iter().enumerate() {
                let Some(&j) = at.get(s) else { continue };
                row.count[j] += r.count.get(k).copied().unwrap_or(0);
                row.dur_ns[j] += r.dur_ns.get(k).copied().unwrap_or(0);
                row.self_ns[j] += r.self_ns.get(k).copied().unwrap_or(0);
            }
            row.ranks += 1;
            row.folded = row.folded.max(r.folded);
            row.comm |= r.comm;
            calls.push(r.call_p50_ns);
            let own = super::stats::median(r.self_ns.clone());
            if own > row.top_rank_self_ns {
                row.top_rank = rank;
                row.top_rank_self_ns = own;
            }
        }
    }
    let mut rows: Vec<OpRow> = m
        .into_values()
        .map(|(mut row, calls)| {
            row.call_p50_ns = super::stats::median(calls);
            row
        })
        .collect();
    rows.sort_by(|a, b| b.total_self().cmp(&a.total_self()).then(a.key().cmp(&b.key())));
    Operators { steps, ranks: tables.len() as u32, shapes: tables.iter().any(|t| t.1.shapes), rows }
}

#[cfg(test)]
#[allow(clippy::expect_used)]
mod tests {
    use super::*;
    use crate::normalize::{assemble, Rules};

    /// One rank, two steps: an annotation around a shaped `aten::mm` (itself around a launch)
    /// and a sleep; the kernel it launched; a Python function that takes no self time.
    fn table() -> Operators {
        let json = br#"{"traceEvents":[
            {"ph":"X","cat":"user_annotation","name":"ProfilerStep#1","pid":1,"tid":1,"ts":0,"dur":1000},
            {"ph":"X","cat":"user_annotation","name":"block","pid":1,"tid":1,"ts":10,"dur":500},
            {"ph":"X","cat":"python_function","name":"model.py(12): forward","pid":1,"tid":1,"ts":20,"dur":400},
            {"ph":"X","cat":"cpu_op","name":"aten::mm","pid":1,"tid":1,"ts":100,"dur":200,"args":{"Input Dims":[[64,512],[512,512]],"External id":7}},
            {"ph":"X","cat":"cuda_runtime","name":"cudaLaunchKernel","pid":1,"tid":1,"ts":150,"dur":50,"args":{"correlation":9,"External id":7}},
            {"ph":"X","cat":"kernel","name":"gemm_kernel","pid":0,"tid":7,"ts":210,"dur":300,"args":{"correlation":9,"External id":7}},
            {"ph":"X","cat":"user_annotation","name":"ProfilerStep#2","pid":1,"tid":1,"ts":1000,"dur":1000},
            {"ph":"X","cat":"user_annotation","name":"block","pid":1,"tid":1,"ts":1010,"dur":700},
            {"ph":"X","cat":"cpu_op","name":"aten::mm","pid":1,"tid":1,"ts":1100,"dur":200,"args":{"Input Dims":[[64,512],[512,512]],"External id":8}},
            {"ph":"X","cat":"cpu_op","name":"aten::relu","pid":1,"tid":1,"ts":1400,"dur":100}
        ]}"#;
        let t = crate::parse::ingest_bytes("rank0.json", json).expect("trace");
        let job = assemble(vec![t], &[], &Rules::default());
        let r = job.ranks.first().expect("rank");
        rank_ops(r, &job.strings, &r.norm.steps.number, 2_000_000)
    }

    fn find<'a>(t: &'a Operators, kind: OpKind, name: &str) -> &'a OpRow {
        t.rows.iter().find(|r| r.kind == kind && r.name == name).unwrap_or_else(|| panic!("{name}: {t:?}"))
    }

    #[test]
    fn each_kind_is_counted_per_step_with_its_self_time() {
        let t = table();
        assert_eq!((t.steps.clone(), t.shapes), (vec![1, 2], true));
        // The step marker is no operator; the Python function neither.
        assert!(t
            .rows
            .iter()
            .all(|r| !r.name.starts_with("ProfilerStep") && !r.name.starts_with("model.py")));
        let block = find(&t, OpKind::Annotation, "block");
        assert_eq!(block.count, [1, 1]);
        assert_eq!(block.dur_ns, [500_000, 700_000]);
        // Less the mm nested in it (the Python frame between them takes nothing away).
        assert_eq!(block.self_ns, [300_000, 400_000]);
        let mm = find(&t, OpKind::CpuOp, "aten::mm");
        assert_eq!(mm.shapes.as_deref(), Some("[[64,512],[512,512]]"));
        assert_eq!((mm.count.clone(), mm.self_ns.clone()), (vec![1, 1], vec![150_000, 200_000]));
        let launch = find(&t, OpKind::Runtime, "cudaLaunchKernel");
        assert_eq!(launch.count, [1, 0]);
        // The kernel counts in the step that launched it.
        let k = find(&t, OpKind::Kernel, "gemm_kernel");
        assert_eq!((k.count.clone(), k.self_ns.clone()), (vec![1, 0], vec![300_000, 0]));
        let relu = find(&t, OpKind::CpuOp, "aten::relu");
        assert_eq!((relu.shapes.as_deref(), relu.count.clone()), (None, vec![0, 1]));
    }

    #[test]
    fn ranks_add_up_per_key_and_step() {
        let a = table();
        let mut b = table();
        b.steps = vec![2, 3];
        let job = combine(&[(0, &a), (1, &b)]);
        assert_eq!((job.steps.clone(), job.ranks), (vec![1, 2, 3], 2));
        let block = find(&job, OpKind::Annotation, "block");
        assert_eq!(block.count, [1, 2, 1]);
        assert_eq!(block.self_ns, [300_000, 700_000, 400_000]);
        assert_eq!(block.ranks, 2);
        // Rank 1's median self time per step is the same: the first rank seen keeps it.
        assert_eq!((block.top_rank, block.top_rank_self_ns), (0, 350_000));
    }

    #[test]
    fn a_kind_past_its_cut_is_one_other_row() {
        let n = 2;
        let rows: Vec<(OpRow, bool)> = (0..300)
            .map(|k| {
                let mut r = OpRow::empty(OpKind::Kernel, &format!("k{k}"), None, n);
                r.count = vec![1, 1];
                r.self_ns = vec![1_000_000 - k * 1000; 2];
                r.dur_ns = r.self_ns.clone();
                (r, k == 299)
            })
            .collect();
        let kept = bound(rows, n, 0);
        let other = kept.iter().find(|r| r.folded > 0).expect("other");
        // At most MAX_KEYS, the communication kernel among them however short.
        assert_eq!(kept.len() - 1 + other.folded as usize, 300);
        assert!(kept.len() - 1 <= MAX_KEYS + 1 && kept.iter().any(|r| r.name == "k299"));
        assert_eq!(other.count, [other.folded as u64; 2]);
    }
}
