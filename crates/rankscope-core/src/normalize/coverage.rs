//! What the classification understood of one rank, and communication told by structure.
//!
//! **Coverage.** Before any finding, a reader must know how much of the trace rankscope
//! understood: a trace whose events it mostly could not classify gets no confident answer.
//! Per rank:
//! - **device time**: the sum of the durations of the rank's work on GPU lanes (kernels, memcpy,
//!   memset; GPU-side annotations left out), split by class, by the library each communication
//!   rule recognises (`family`, [`super::classify::Rule::family`]), with the top names left
//!   `other` and the top kernels counted as compute by their category alone (no rule knew their
//!   name: where a communication library the rules do not know would hide);
//! - **host time**: per CPU thread the union of its slices, summed over threads, and the part of
//!   it covered by classified slices (any class but `other`). Annotations (step markers,
//!   `python_function` frames, user regions) are left out: they hold work, they are none, and a
//!   step marker around events no rule knows would make them look understood.
//!
//! Shares are of sums over the same events, so none exceeds 1.
//!
//! **Communication by structure.** A kernel that no rule knew by name (compute by category)
//! is communication when the host launched it from inside a communication op (`record_param_comms`,
//! `c10d::*`, a backend span, an engine's all-reduce op) that launched no kernel known to be
//! communication: the op's own kernels are its transfer (PyTorch's intra-node all-reduce under
//! `record_param_comms`, a library the rules do not name yet). The op is the outermost
//! communication op open on the launching thread, so copies around an NCCL kernel of the same op
//! stay compute. Streams that run nothing but communication are listed
//! ([`Coverage::comm_streams`]): a communication library's own stream, beside the compute.

use serde::{Deserialize, Serialize};

use super::classify::{RuleIdx, Rules};
use super::Links;
use crate::model::*;

/// Names listed per list ([`Coverage::unclassified`], [`Coverage::by_category`]).
const TOP_NAMES: usize = 5;

/// Time of one class on the device.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ClassTime {
    pub class: Class,
    pub events: u64,
    pub ns: i64,
}

/// Device time a rule family recognised.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FamilyTime {
    /// The rules' `family` (`nccl`, `deepep`, ...); `structure` for kernels counted as
    /// communication by the op that launched them.
    pub family: String,
    pub class: Class,
    pub events: u64,
    pub ns: i64,
}

/// One name and its time.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NameTime {
    pub name: String,
    /// `gpu` or `cpu`.
    pub lane: LaneKind,
    pub events: u64,
    pub ns: i64,
}

/// A GPU stream on which only communication runs.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CommStream {
    pub device: i64,
    pub stream: i64,
    /// The families of its kernels, sorted.
    pub families: Vec<String>,
    pub events: u64,
    pub ns: i64,
}

/// What the classification understood of one rank (see the module doc).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Coverage {
    /// Sum of the durations of work on GPU lanes.
    pub device_ns: i64,
    /// `device_ns` by class (every class present, in the class order).
    pub device_by_class: Vec<ClassTime>,
    /// Device time by the family of the rule that recognised it, largest first.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub families: Vec<FamilyTime>,
    /// Per CPU thread the union of its slices (annotations left out), summed over threads.
    pub host_ns: i64,
    /// Of it, the union of classified slices (any class but `other`).
    pub host_classified_ns: i64,
    /// The largest names left `other`, device first, then host.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub unclassified: Vec<NameTime>,
    /// The largest kernels counted as compute by their category alone (no rule knew the name).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub by_category: Vec<NameTime>,
    /// Kernels counted as communication by the op that launched them (module doc).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub by_structure: Vec<NameTime>,
    /// GPU streams on which only communication runs.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub comm_streams: Vec<CommStream>,
}

impl Coverage {
    /// Device time of one class.
    pub fn device_of(&self, c: Class) -> i64 {
        self.device_by_class.iter().find(|x| x.class == c).map_or(0, |x| x.ns)
    }

    /// The share of device time classified (not `other`); none without device time.
    pub fn device_share(&self) -> Option<f64> {
        (self.device_ns > 0)
            .then(|| (1.0 - self.device_of(Class::Other) as f64 / self.device_ns as f64).clamp(0.0, 1.0))
    }

    /// The share of host time classified; none without host time.
    pub fn host_share(&self) -> Option<f64> {
        (self.host_ns > 0).then(|| (self.host_classified_ns as f64 / self.host_ns as f64).clamp(0.0, 1.0))
    }

    /// Too little understood to judge: more than half of the device time unclassified, or,
    /// without device time, more than half of the host time.
    pub fn too_little(&self) -> bool {
        match (self.device_share(), self.host_share()) {
            (Some(d), _) => d < 0.5,
            (None, Some(h)) => h < 0.5,
            (None, None) => true,
        }
    }
}

/// Kernels known by no name rule, launched from inside a communication op that launched no
/// known communication kernel, become communication of that op's kind (module doc). Returns
/// how many were.
pub(super) fn comm_by_structure(
    t: &mut RankTrace,
    links: &Links,
    rule: &[RuleIdx],
    rules: &Rules,
) -> Vec<usize> {
    let e = &t.events;
    let by_name = |i: usize| rule.get(i).and_then(|&r| rules.rule(r)).is_some_and(|r| r.by_name());
    // Launch row → the GPU rows it launched.
    let mut launched: Vec<(u32, u32)> =
        links.gpu.iter().zip(&links.launch).map(|(g, l)| (l.0, g.0)).collect();
    if launched.is_empty() {
        return Vec::new();
    }
    launched.sort_unstable();
    // One sweep in time order: per CPU lane the communication ops open, outermost first.
    let mut open: FxHashMap<LaneId, Vec<(i64, usize)>> = FxHashMap::default();
    // Outermost op → (named communication launched inside?, the unknown kernels it launched).
    let mut groups: std::collections::BTreeMap<usize, (bool, Vec<usize>)> = Default::default();
    let cpu = |i: usize| t.lanes.kind.get(e.lane[i].0 as usize) == Some(&LaneKind::Cpu);
    let mut k = 0;
    for i in 0..e.len() {
        if e.kind[i] != EventKind::Slice || !cpu(i) {
            continue;
        }
        let stack = open.entry(e.lane[i]).or_default();
        while stack.last().is_some_and(|o| o.0 <= e.ts_ns[i]) {
            stack.pop();
        }
        if e.class[i] == Class::Communication {
            stack.push((e.end_ns(i), i));
            continue;
        }
        while launched.get(k).is_some_and(|x| (x.0 as usize) < i) {
            k += 1;
        }
        let Some(&(_, outer)) = stack.first() else { continue };
        let mut j = k;
        while let Some(&(l, g)) = launched.get(j).filter(|x| x.0 as usize == i) {
            let _ = l;
            let g = g as usize;
            let entry = groups.entry(outer).or_default();
            match e.class.get(g) {
                Some(Class::Communication) => entry.0 = true,
                Some(Class::Compute) if !by_name(g) => entry.1.push(g),
                _ => {}
            }
            j += 1;
        }
    }
    let mut out = Vec::new();
    for (op, (named, kernels)) in groups {
        if named || kernels.is_empty() {
            continue;
        }
        let kind = t.events.detail.get(op).copied().unwrap_or(0);
        for g in kernels {
            t.events.class[g] = Class::Communication;
            t.events.detail[g] = kind;
            out.push(g);
        }
    }
    out.sort_unstable();
    out
}

/// The coverage of a normalized rank (module doc). `rule` is each row's deciding rule;
/// `structural` the rows [`comm_by_structure`] made communication.
pub(super) fn coverage(t: &RankTrace, rule: &[RuleIdx], rules: &Rules, structural: &[usize]) -> Coverage {
    let e = &t.events;
    let mut c = Coverage::default();
    let lane_kind = |i: usize| t.lanes.kind.get(e.lane[i].0 as usize).copied().unwrap_or(LaneKind::Cpu);
    let mut by_class: std::collections::BTreeMap<Class, (u64, i64)> = Default::default();
    let mut families: std::collections::BTreeMap<(String, Class), (u64, i64)> = Default::default();
    let mut other: FxHashMap<(StrId, bool), (u64, i64)> = FxHashMap::default();
    let mut by_cat: FxHashMap<StrId, (u64, i64)> = FxHashMap::default();
    let mut by_struct: FxHashMap<StrId, (u64, i64)> = FxHashMap::default();
    // Per GPU lane: (all, communication) time and the families seen.
    let mut lanes: std::collections::BTreeMap<LaneId, (i64, i64, u64, std::collections::BTreeSet<String>)> =
        Default::default();
    // Per CPU lane: the current merged interval of all slices and of classified ones.
    let mut host: FxHashMap<LaneId, [(i64, i64); 2]> = FxHashMap::default();
    let add = |acc: &mut i64, cur: &mut (i64, i64), s: i64, end: i64| {
        if s >= cur.1 {
            *acc += cur.1 - cur.0;
            *cur = (s, end);
        } else if end > cur.1 {
            cur.1 = end;
        }
    };
    let (mut host_all, mut host_cls) = (0i64, 0i64);
    for i in 0..e.len() {
        if e.kind[i] != EventKind::Slice {
            continue;
        }
        let cls = e.class[i];
        let d = e.dur_ns[i].max(0);
        match lane_kind(i) {
            LaneKind::Gpu => {
                if matches!(cls, Class::Annotation) {
                    continue;
                }
                let x = by_class.entry(cls).or_default();
                x.0 += 1;
                x.1 += d;
                c.device_ns += d;
                let is_struct = structural.binary_search(&i).is_ok();
                let r = rule.get(i).and_then(|&r| rules.rule(r));
                let family =
                    if is_struct { Some("structure".to_string()) } else { r.and_then(|r| r.family.clone()) };
                if let Some(f) = &family {
                    let x = families.entry((f.clone(), cls)).or_default();
                    x.0 += 1;
                    x.1 += d;
                }
                let key = e.name[i];
                if cls == Class::Other {
                    let x = other.entry((key, true)).or_default();
                    x.0 += 1;
                    x.1 += d;
                } else if is_struct {
                    let x = by_struct.entry(key).or_default();
                    x.0 += 1;
                    x.1 += d;
                } else if cls == Class::Compute && !r.is_some_and(|r| r.by_name()) {
                    let x = by_cat.entry(key).or_default();
                    x.0 += 1;
                    x.1 += d;
                }
                let l = lanes.entry(e.lane[i]).or_default();
                l.0 += d;
                l.2 += 1;
                if cls == Class::Communication {
                    l.1 += d;
                    l.3.insert(family.unwrap_or_else(|| "other".into()));
                }
            }
            // Annotations (step markers, Python frames, user regions) hold work; they are none.
            LaneKind::Cpu if cls == Class::Annotation => {}
            LaneKind::Cpu => {
                let (s, end) = (e.ts_ns[i], e.end_ns(i).max(e.ts_ns[i]));
                let cur = host.entry(e.lane[i]).or_insert([(s, s); 2]);
                add(&mut host_all, &mut cur[0], s, end);
                if cls != Class::Other {
                    add(&mut host_cls, &mut cur[1], s, end);
                } else {
                    let x = other.entry((e.name[i], false)).or_default();
                    x.0 += 1;
                    x.1 += d;
                }
            }
        }
    }
    for cur in host.values() {
        host_all += cur[0].1 - cur[0].0;
        host_cls += cur[1].1 - cur[1].0;
    }
    c.host_ns = host_all;
    c.host_classified_ns = host_cls.min(host_all);
    c.device_by_class =
        by_class.into_iter().map(|(class, (events, ns))| ClassTime { class, events, ns }).collect();
    c.families = families
        .into_iter()
        .map(|((family, class), (events, ns))| FamilyTime { family, class, events, ns })
        .collect();
    c.families.sort_by(|a, b| b.ns.cmp(&a.ns).then(a.family.cmp(&b.family)));
    let top = |m: FxHashMap<StrId, (u64, i64)>, lane: LaneKind| -> Vec<NameTime> {
        let mut v: Vec<NameTime> = m
            .into_iter()
            .map(|(k, (events, ns))| NameTime { name: t.strings.get(k).to_string(), lane, events, ns })
            .collect();
        v.sort_by(|a, b| b.ns.cmp(&a.ns).then(a.name.cmp(&b.name)));
        v.truncate(TOP_NAMES);
        v
    };
    let (mut dev_other, mut host_other) = (FxHashMap::default(), FxHashMap::default());
    for ((k, gpu), v) in other {
        if gpu {
            dev_other.insert(k, v);
        } else {
            host_other.insert(k, v);
        }
    }
    c.unclassified = top(dev_other, LaneKind::Gpu);
    c.unclassified.extend(top(host_other, LaneKind::Cpu));
    c.by_category = top(by_cat, LaneKind::Gpu);
    c.by_structure = top(by_struct, LaneKind::Gpu);
    for (lane, (all, comm, events, fams)) in lanes {
        if all > 0 && comm == all {
            let l = lane.0 as usize;
            c.comm_streams.push(CommStream {
                device: t.lanes.device.get(l).copied().unwrap_or(-1),
                stream: t.lanes.stream.get(l).copied().unwrap_or(-1),
                families: fams.into_iter().collect(),
                events,
                ns: all,
            });
        }
    }
    c
}

#[cfg(test)]
#[allow(clippy::expect_used)]
mod tests {
    use super::*;

    fn normalized(json: &str) -> (RankTrace, super::super::Normalized) {
        let mut t = crate::parse::ingest_bytes("t.json", json.as_bytes()).expect("trace");
        let n = super::super::normalize_rank(&mut t, &Rules::default());
        (t, n)
    }

    fn class_of(t: &RankTrace, name: &str) -> Class {
        let i = (0..t.events.len()).find(|&i| t.strings.get(t.events.name[i]) == name).expect(name);
        t.events.class[i]
    }

    /// A kernel no rule names, launched from inside `record_param_comms` with nothing else, is the
    /// op's transfer; a copy launched inside `c10d::allreduce_` beside its NCCL kernel stays
    /// compute; what is not understood is listed.
    #[test]
    fn communication_by_the_op_that_launched_it() {
        let (t, n) = normalized(
            r#"{"traceEvents":[
            {"ph":"X","cat":"cpu_op","name":"c10d::allreduce_","pid":1,"tid":1,"ts":10,"dur":30,"args":{}},
            {"ph":"X","cat":"cpu_op","name":"record_param_comms","pid":1,"tid":1,"ts":11,"dur":20,"args":{"Collective name":"allreduce"}},
            {"ph":"X","cat":"cuda_runtime","name":"cudaLaunchKernel","pid":1,"tid":1,"ts":12,"dur":2,"args":{"correlation":1}},
            {"ph":"X","cat":"kernel","name":"oneShotCustomReduce<8>","pid":0,"tid":20,"ts":15,"dur":10,"args":{"correlation":1}},
            {"ph":"X","cat":"cpu_op","name":"c10d::allreduce_","pid":1,"tid":1,"ts":50,"dur":30,"args":{}},
            {"ph":"X","cat":"cuda_runtime","name":"cudaLaunchKernel","pid":1,"tid":1,"ts":51,"dur":2,"args":{"correlation":2}},
            {"ph":"X","cat":"cuda_runtime","name":"cudaLaunchKernel","pid":1,"tid":1,"ts":54,"dur":2,"args":{"correlation":3}},
            {"ph":"X","cat":"kernel","name":"CatArrayBatchedCopy","pid":0,"tid":7,"ts":55,"dur":4,"args":{"correlation":2}},
            {"ph":"X","cat":"kernel","name":"ncclDevKernel_AllReduce_Sum_f32_RING_LL","pid":0,"tid":20,"ts":60,"dur":10,"args":{"correlation":3}},
            {"ph":"X","cat":"cuda_runtime","name":"cudaLaunchKernel","pid":1,"tid":1,"ts":90,"dur":2,"args":{"correlation":4}},
            {"ph":"X","cat":"kernel","name":"gemm","pid":0,"tid":7,"ts":93,"dur":20,"args":{"correlation":4}},
            {"ph":"X","cat":"mystery","name":"mystery_span","pid":1,"tid":1,"ts":120,"dur":10}
        ]}"#,
        );
        assert_eq!(class_of(&t, "oneShotCustomReduce<8>"), Class::Communication);
        assert_eq!(class_of(&t, "CatArrayBatchedCopy"), Class::Compute);
        let c = &n.coverage;
        assert_eq!(c.device_ns, 44_000);
        assert_eq!(c.device_of(Class::Communication), 20_000);
        assert_eq!(
            c.by_structure.iter().map(|x| x.name.as_str()).collect::<Vec<_>>(),
            ["oneShotCustomReduce<8>"]
        );
        let fams: Vec<(&str, i64)> = c.families.iter().map(|f| (f.family.as_str(), f.ns)).collect();
        assert_eq!(fams, [("nccl", 10_000), ("structure", 10_000)]);
        // Stream 20 runs only communication.
        assert_eq!(c.comm_streams.iter().map(|s| s.stream).collect::<Vec<_>>(), [20]);
        // Host: 10..40, 50..80, 90..92 and the unclassified 120..130.
        assert_eq!((c.host_ns, c.host_classified_ns), (72_000, 62_000));
        assert_eq!(c.unclassified.first().map(|x| x.name.as_str()), Some("mystery_span"));
        assert_eq!(c.device_share(), Some(1.0));
        assert!(!c.too_little());
    }
}
