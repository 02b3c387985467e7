//! The per-rank half of the pipeline analysis: one rank's span, compute, bubble, recv wait and
//! drawing blocks per step window, from its own tables (see the parent module's doc).

use std::collections::{BTreeMap, BTreeSet};

use super::{BlockKind, PipeBlock, RankPipe, StageStepPart, MAX_BLOCKS};
use crate::analyze::instances::Instance;
use crate::analyze::intervals::{Iv, Set};
use crate::model::*;
use crate::normalize::job::RankEntry;

/// The blocks of `set`, each of `kind`.
fn blocks_of(set: &Set, kind: BlockKind) -> impl Iterator<Item = PipeBlock> + '_ {
    set.intervals().iter().map(move |&(start_ns, end_ns)| PipeBlock { kind, start_ns, end_ns })
}

/// Merges time-ordered blocks until at most `cap` remain: the closest neighbours of the same kind
/// first, then any neighbours (a merge of two kinds is `compute`).
fn coarsen(mut v: Vec<PipeBlock>, cap: usize) -> Vec<PipeBlock> {
    for same_kind in [true, false] {
        if v.len() <= cap {
            break;
        }
        let mut gaps: Vec<i64> = v
            .windows(2)
            .filter(|w| !same_kind || w[0].kind == w[1].kind)
            .map(|w| w[1].start_ns - w[0].end_ns)
            .collect();
        if gaps.is_empty() {
            continue;
        }
        gaps.sort_unstable();
        let excess = (v.len() - cap).min(gaps.len());
        let limit = gaps[excess - 1];
        let mut out: Vec<PipeBlock> = Vec::with_capacity(cap);
        for b in v {
            match out.last_mut() {
                Some(l) if (!same_kind || l.kind == b.kind) && b.start_ns - l.end_ns <= limit => {
                    if l.kind != b.kind {
                        l.kind = BlockKind::Compute;
                    }
                    l.end_ns = l.end_ns.max(b.end_ns);
                }
                _ => out.push(b),
            }
        }
        v = out;
    }
    v
}

/// Whether `name` is a stage annotation of torch.distributed.pipelining, which (`F` / `B`),
/// and the stage when it says: `Forward 3` / `Backward 3` (`ScheduleGPipe`), `PP:5F3` /
/// `PP:5B3` (`_PipelineScheduleRuntime`: stage 5, micro-batch 3; interleaved schedules).
fn fb_annotation(name: &str) -> Option<(char, Option<u32>)> {
    if let Some(rest) = name.strip_prefix("PP:") {
        let k = rest.find(|c: char| !c.is_ascii_digit())?;
        let stage: u32 = rest[..k].parse().ok()?;
        let (c, mb) = rest[k..].split_at(1);
        if mb.is_empty() || !mb.bytes().all(|b| b.is_ascii_digit()) {
            return None;
        }
        return match c {
            "F" => Some(('F', Some(stage))),
            "B" => Some(('B', Some(stage))),
            _ => None,
        };
    }
    fb_plain(name).map(|c| (c, None))
}

fn fb_plain(name: &str) -> Option<char> {
    let (word, n) = name.split_once(' ')?;
    if n.is_empty() || !n.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    match word {
        "Forward" => Some('F'),
        "Backward" => Some('B'),
        _ => None,
    }
}

fn is_optimizer(strings: &StringTable, e: &EventTable, i: usize) -> bool {
    if e.class[i] == Class::Optimizer {
        return true;
    }
    let n = strings.get(e.name[i]);
    n.starts_with("Optimizer.") || n.eq_ignore_ascii_case("optimizer")
}

/// The per-rank half: figures per step window for a rank with point-to-point exchanges or
/// stage annotations (empty otherwise).
pub fn rank_pipe(
    r: &RankEntry,
    strings: &StringTable,
    windows: &[(u32, i64, i64)],
    insts: &[Instance],
    device_compute: Option<&Set>,
) -> RankPipe {
    let t = &r.trace;
    let e = &t.events;
    let p2p: Vec<&Instance> = insts.iter().filter(|x| x.p2p).collect();
    // The lane of the exchanges on the host: the most common lane of the p2p spans (CPU) or of
    // the stage annotations.
    let mut lanes: BTreeMap<LaneId, usize> = BTreeMap::new();
    for x in &p2p {
        let i = x.event.0 as usize;
        if i < e.len() && t.lanes.kind.get(e.lane[i].0 as usize) == Some(&LaneKind::Cpu) {
            *lanes.entry(e.lane[i]).or_default() += 1;
        }
    }
    // Each distinct name of the rank read once, not each row's (a string search per row was
    // 1.5% of `analyze`); by id, as `strings` may be the whole job's.
    let mut fb_of: FxHashMap<StrId, Option<(char, Option<u32>)>> = FxHashMap::default();
    let mut annotated = Vec::new();
    for i in 0..e.len() {
        if e.kind[i] == EventKind::Slice {
            let fb = *fb_of.entry(e.name[i]).or_insert_with(|| fb_annotation(strings.get(e.name[i])));
            if fb.is_some() {
                annotated.push(i);
            }
        }
    }
    if lanes.is_empty() {
        for &i in &annotated {
            *lanes.entry(e.lane[i]).or_default() += 1;
        }
    }
    if p2p.is_empty() && annotated.is_empty() {
        return RankPipe::default();
    }
    let lane = lanes.iter().max_by_key(|(l, n)| (**n, std::cmp::Reverse(**l))).map(|(l, _)| *l);
    let view = RankView { t, strings, fb_of: &fb_of, lane, p2p: &p2p, device_compute };
    RankPipe { steps: windows.iter().map(|&(step, lo, hi)| step_part(&view, step, lo, hi)).collect() }
}

/// What each step window of one rank reads: its trace, the lane of its exchanges, the stage
/// annotation of each name, its point-to-point instances and the device's compute.
struct RankView<'a> {
    t: &'a RankTrace,
    strings: &'a StringTable,
    fb_of: &'a FxHashMap<StrId, Option<(char, Option<u32>)>>,
    lane: Option<LaneId>,
    p2p: &'a [&'a Instance],
    device_compute: Option<&'a Set>,
}

/// One rank × step window: span, compute, recv wait, own host time, annotations and the
/// drawing's blocks (see the parent module's doc).
fn step_part(view: &RankView<'_>, step: u32, lo: i64, hi: i64) -> StageStepPart {
    let RankView { t, strings, fb_of, lane, p2p, device_compute } = *view;
    let e = &t.events;
    let fb_at = |i: usize| fb_of.get(&e.name[i]).copied().flatten();
    let mut row = StageStepPart { step, start_ns: lo, end_ns: hi, ..Default::default() };
    let mut ops: Vec<Iv> = Vec::new();
    let mut barriers: Vec<Iv> = Vec::new();
    let mut backend: Vec<Iv> = Vec::new();
    let mut recvs: Vec<Iv> = Vec::new();
    let mut opt: Vec<Iv> = Vec::new();
    let mut fb: Vec<(i64, char)> = Vec::new();
    let (mut f_ivs, mut b_ivs): (Vec<Iv>, Vec<Iv>) = (Vec::new(), Vec::new());
    let mut vstages: BTreeSet<u32> = BTreeSet::new();
    let mut busy: Vec<Iv> = Vec::new();
    for i in 0..e.len() {
        if e.kind[i] != EventKind::Slice || Some(e.lane[i]) != lane {
            continue;
        }
        let (s, end) = (e.ts_ns[i], e.end_ns(i));
        if end <= lo || s >= hi {
            continue;
        }
        if matches!(e.class[i], Class::Communication | Class::Compute | Class::Memory) {
            busy.push((s, end));
        }
        if let Some((c, stage)) = fb_at(i) {
            if s >= lo {
                fb.push((s, c));
                vstages.extend(stage);
            }
            let ivs = if c == 'F' { &mut f_ivs } else { &mut b_ivs };
            ivs.push((s, end));
            continue;
        }
        if is_optimizer(strings, e, i) {
            opt.push((s, end));
            continue;
        }
        match e.class[i] {
            Class::Communication => {
                let recv = e.coll_kind(i) == CollKind::Recv;
                if crate::analyze::roles::is_backend_span(t, strings, i) {
                    backend.push((s, end));
                    if recv {
                        recvs.push((s, end));
                    }
                } else {
                    barriers.push((s, end));
                    if recv {
                        recvs.push((s, end));
                    }
                }
            }
            Class::Compute | Class::Memory => ops.push((s, end)),
            _ => {}
        }
    }
    let opt = Set::from_unsorted(opt);
    row.span_ns = (hi - lo) - opt.len_within(lo, hi);
    // Operators nested in a `c10d::*` op belong to it.
    let host_ops = Set::from_unsorted(barriers.clone());
    ops.retain(|&(s, end)| !host_ops.intervals().iter().any(|&(a, b)| a <= s && end <= b));
    ops.sort_unstable();
    // A backend span is blocking when no operator starts inside it.
    for &(a, b) in &backend {
        let k = ops.partition_point(|o| o.0 <= a);
        let inside = ops.get(k).is_some_and(|o| o.0 < b);
        if !inside {
            barriers.push((a, b));
        }
    }
    barriers.extend(opt.intervals().iter().copied());
    barriers.sort_unstable();
    let blocking = Set::from_unsorted(barriers.clone());
    ops.retain(|&(s, end)| !blocking.intervals().iter().any(|&(a, b)| a <= s && end <= b));
    let compute = match device_compute {
        Some(c) => c.clip(lo, hi).subtract(&opt),
        None => {
            // Runs of operators with no blocking exchange in between.
            let mut runs: Vec<Iv> = Vec::new();
            let mut j = 0;
            let mut max_end = i64::MIN;
            for &(s, end) in &ops {
                while j < barriers.len() && barriers[j].0 < s {
                    max_end = max_end.max(barriers[j].1);
                    j += 1;
                }
                match runs.last_mut() {
                    Some(cur) if max_end <= cur.1 => cur.1 = cur.1.max(end),
                    _ => runs.push((s, end)),
                }
            }
            Set::from_unsorted(runs).subtract(&opt).clip(lo, hi)
        }
    };
    row.compute_ns = compute.len_ns();
    row.host_free_ns =
        ((hi - lo) - Set::from_unsorted(busy).union(&compute).union(&opt).len_within(lo, hi)).max(0);
    let mut recv_set = Set::from_unsorted(recvs);
    if let Some(c) = device_compute {
        // Device recv kernels: the part not under compute is what the stage waited.
        let dev: Vec<Iv> = p2p
            .iter()
            .filter(|x| x.kind == CollKind::Recv && x.step == step)
            .map(|x| (x.start_ns, x.end_ns))
            .collect();
        recv_set = recv_set.union(&Set::from_unsorted(dev).subtract(c));
    }
    let recv_set = recv_set.subtract(&opt).clip(lo, hi);
    row.recv_wait_ns = recv_set.len_ns();
    // The drawing: compute placed by the annotations (host compute only), recv waits,
    // optimizer.
    let mut placed: Vec<PipeBlock> = if device_compute.is_some() {
        blocks_of(&compute, BlockKind::Compute).collect()
    } else {
        let f = Set::from_unsorted(f_ivs);
        let b = Set::from_unsorted(b_ivs).subtract(&f);
        let mut v: Vec<PipeBlock> = blocks_of(&compute.intersect(&f), BlockKind::Forward)
            .chain(blocks_of(&compute.intersect(&b), BlockKind::Backward))
            .chain(blocks_of(&compute.subtract(&f).subtract(&b), BlockKind::Compute))
            .collect();
        v.sort_by_key(|x| (x.start_ns, x.kind));
        v
    };
    placed = coarsen(placed, MAX_BLOCKS);
    placed.extend(coarsen(blocks_of(&recv_set, BlockKind::RecvWait).collect(), MAX_BLOCKS));
    placed.extend(coarsen(blocks_of(&opt.clip(lo, hi), BlockKind::Optimizer).collect(), MAX_BLOCKS));
    row.blocks = placed;
    fb.sort_unstable();
    row.forwards = fb.iter().filter(|x| x.1 == 'F').count() as u32;
    row.backwards = fb.iter().filter(|x| x.1 == 'B').count() as u32;
    row.order = fb.iter().map(|x| x.1).collect();
    row.virtual_stages = vstages.len() as u32;
    row
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Blocks beyond the cap merge with their closest neighbour of the same kind first; kinds
    /// mix (as `compute`) only when the same-kind merges cannot reach the cap.
    #[test]
    fn coarsen_merges_the_closest_neighbours() {
        let b = |kind, start_ns, end_ns| PipeBlock { kind, start_ns, end_ns };
        use BlockKind::{Backward as B, Compute as C, Forward as F};
        let v = vec![b(F, 0, 10), b(F, 11, 20), b(F, 30, 40), b(B, 41, 50), b(B, 60, 70)];
        assert_eq!(coarsen(v.clone(), 5), v);
        assert_eq!(coarsen(v.clone(), 4), [b(F, 0, 20), b(F, 30, 40), b(B, 41, 50), b(B, 60, 70)]);
        assert_eq!(coarsen(v.clone(), 2), [b(F, 0, 40), b(B, 41, 70)]);
        assert_eq!(coarsen(v, 1), [b(C, 0, 70)]);
        assert_eq!(coarsen(Vec::new(), 0), []);
    }
}
