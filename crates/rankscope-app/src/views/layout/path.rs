//! Which waits of the chain the grid draws by default: the way the delay went, one arrow into
//! each rank that waited.
//!
//! `wait_chain.edges` holds every edge reachable from an origin, and a stall reaches a rank
//! through several groups at once (at 64 ranks, 159 edges for 63 waiting ranks, most of them the
//! full stall: the data-parallel all-gather, the model-parallel gradient norm, the pipeline
//! exchange). Drawn together they hide the path. So each waiting rank gets one incoming arrow:
//! the edge it waited on longest; among edges within 10% of that, one through a group of the
//! mesh (a dimension of the layout, whose groups the grid's rows, columns and blocks show) before
//! one through a group that is none, then the one whose waited-for rank is fewest hops from an
//! origin, then the longer wait, then the analysis' order. The others are drawn on request.
//!
//! **Families.** At 1,024 ranks that is still 1,023 arrows, and most of them repeat one move on
//! the mesh: every stage-0 rank's pipeline wait on its stage-1 neighbour is the same arrow moved
//! by a cell, a data group's 31 waits on its late member the same arrow down its column. Above a
//! budget, the edges of one role that move the delay in the same direction on the grid (the
//! caller's key: left or right, up or down, across blocks) are one family, drawn once, from the
//! rank fewest hops from an origin (then the longest wait), labelled with how many edges it
//! stands for: the picture is how the delay spread (along the tensor group, down the data
//! groups, across the pipeline stages), and the cells' colour shows who waited.

use std::collections::{BTreeMap, VecDeque};

/// One edge as the choice sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Edge {
    pub from: u32,
    pub to: u32,
    pub wait_ns: i64,
    /// Through a group whose role is a dimension of the mesh.
    pub mesh: bool,
}

/// Each rank's hops from the origins along the edges (ranks the edges do not reach are absent).
pub fn hops(edges: &[Edge], origins: &[u32]) -> BTreeMap<u32, u32> {
    let mut hops: BTreeMap<u32, u32> = origins.iter().map(|&o| (o, 0)).collect();
    let mut queue: VecDeque<u32> = origins.iter().copied().collect();
    while let Some(r) = queue.pop_front() {
        let h = hops.get(&r).copied().unwrap_or(0);
        for e in edges.iter().filter(|e| e.from == r) {
            if let std::collections::btree_map::Entry::Vacant(v) = hops.entry(e.to) {
                v.insert(h + 1);
                queue.push_back(e.to);
            }
        }
    }
    hops
}

/// For each edge (in the analysis' order), whether it is on the way the delay went.
pub fn main_path(edges: &[Edge], origins: &[u32]) -> Vec<bool> {
    let hops = hops(edges, origins);
    let far = u32::MAX;
    let mut best: BTreeMap<u32, usize> = BTreeMap::new();
    let mut longest: BTreeMap<u32, i64> = BTreeMap::new();
    for e in edges {
        let l = longest.entry(e.to).or_insert(e.wait_ns);
        *l = (*l).max(e.wait_ns);
    }
    for (k, e) in edges.iter().enumerate() {
        // Never an arrow into an origin: nobody made it wait.
        if origins.contains(&e.to) || e.wait_ns * 10 < longest.get(&e.to).copied().unwrap_or(0) * 9 {
            continue;
        }
        let rank = |i: usize| {
            edges.get(i).map(|x| (!x.mesh, hops.get(&x.from).copied().unwrap_or(far), -x.wait_ns, i))
        };
        let better = best.get(&e.to).is_none_or(|&b| rank(k) < rank(b));
        if better {
            best.insert(e.to, k);
        }
    }
    let mut out = vec![false; edges.len()];
    for k in best.into_values() {
        if let Some(x) = out.get_mut(k) {
            *x = true;
        }
    }
    out
}

/// For each edge, how many edges its arrow stands for (0: not drawn): every `shown` edge itself
/// when there are at most `budget`, else one per family of equal `keys` (module doc).
pub fn families<K: Ord>(
    edges: &[Edge],
    shown: &[bool],
    keys: &[K],
    origins: &[u32],
    budget: usize,
) -> Vec<u32> {
    let mut out: Vec<u32> = shown.iter().map(|&s| u32::from(s)).collect();
    if shown.iter().filter(|s| **s).count() <= budget {
        return out;
    }
    let hops = hops(edges, origins);
    let order =
        |k: usize| edges.get(k).map(|e| (hops.get(&e.from).copied().unwrap_or(u32::MAX), -e.wait_ns, k));
    let mut best: BTreeMap<&K, (usize, u32)> = BTreeMap::new();
    for (k, key) in keys.iter().enumerate().filter(|(k, _)| shown.get(*k).copied().unwrap_or(false)) {
        let slot = best.entry(key).or_insert((k, 0));
        slot.1 += 1;
        if order(k) < order(slot.0) {
            slot.0 = k;
        }
    }
    out.iter_mut().for_each(|x| *x = 0);
    for (k, n) in best.into_values() {
        if let Some(x) = out.get_mut(k) {
            *x = n;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn e(from: u32, to: u32, ms: i64, mesh: bool) -> Edge {
        Edge { from, to, wait_ns: ms * 1_000_000, mesh }
    }

    #[test]
    fn the_real_tensor_by_data_stall() {
        // tests/zoo/layout/tp2_dp2_stall: rank 3 stalls; its tensor partner 2 waits, then the
        // data peers of 2 and 3 (0 and 1); 0 and 1 also wait a little for each other.
        let edges =
            [e(3, 2, 150, true), e(2, 0, 144, true), e(3, 1, 144, true), e(1, 0, 5, true), e(0, 1, 4, true)];
        assert_eq!(main_path(&edges, &[3]), [true, true, true, false, false]);
    }

    #[test]
    fn a_mesh_group_before_another_and_the_shorter_way() {
        // Rank 9 waited the full stall both in a data group and in the model-parallel group
        // (no dimension): the data group's arrow. Rank 8 waited as long for 5 (one hop from the
        // origin 4) and for 7 (two hops): 5's.
        let edges = [
            e(4, 5, 100, true),
            e(5, 7, 100, true),
            e(4, 9, 100, false),
            e(5, 9, 97, true),
            e(7, 8, 99, true),
            e(5, 8, 98, true),
            e(9, 4, 1, true),
        ];
        assert_eq!(main_path(&edges, &[4]), [true, true, false, true, false, true, false]);
        // A much longer wait wins over the mesh.
        let edges = [e(4, 9, 100, false), e(5, 9, 50, true), e(4, 5, 100, true)];
        assert_eq!(main_path(&edges, &[4]), [true, false, true]);
        assert!(main_path(&[], &[]).is_empty());
    }

    #[test]
    fn families_above_the_budget() {
        // 4 → 5 (one hop), 5 → 6 and 4 → 7 (a step right on the grid, key 1), 5 → 9 (key 2).
        let edges = [e(4, 5, 100, true), e(5, 6, 90, true), e(4, 7, 80, true), e(5, 9, 99, true)];
        let keys = [1, 1, 1, 2];
        let shown = [true, true, true, true];
        assert_eq!(families(&edges, &shown, &keys, &[4], 4), [1, 1, 1, 1], "within the budget: each itself");
        // Above it: key 1's arrow is 4's (no hop, before 5's one), standing for three.
        assert_eq!(families(&edges, &shown, &keys, &[4], 2), [3, 0, 0, 1]);
        assert_eq!(families(&edges, &[true, true, false, true], &keys, &[4], 1), [2, 0, 0, 1]);
    }
}
