//! Point-to-point matching across ranks: sends paired with recvs (peers read or inferred),
//! the links they make, and the stage chain (or ring) they form (see the parent module's doc).

use std::collections::{BTreeMap, BTreeSet};

use super::P2pLink;
use crate::analyze::instances::Instance;
use crate::model::*;

/// A point-to-point instance of one rank, for matching.
struct End<'a> {
    x: &'a Instance,
    peer: Option<u32>,
    taken: bool,
    inferred: bool,
}

/// Matched exchanges: `(src, dst, send, recv, inferred)`.
pub(crate) type Pair<'a> = (u32, u32, &'a Instance, &'a Instance, bool);

type Links = BTreeMap<(String, u32, u32), P2pLink>;

/// The link of (group, src, dst), created empty when new.
fn link<'l>(links: &'l mut Links, pg: &str, src: u32, dst: u32) -> &'l mut P2pLink {
    links.entry((pg.to_string(), src, dst)).or_insert_with(|| P2pLink {
        pg: pg.to_string(),
        src,
        dst,
        matched: 0,
        unmatched_sends: 0,
        unmatched_recvs: 0,
        size_mismatches: 0,
        bytes: None,
        peers_inferred: 0,
        batched: 0,
    })
}

/// Matches sends to recvs (see the module doc). `insts[k]` belongs to rank `ranks[k]` (owned
/// lists or borrowed slices: the what-if model lends its ranks' lists without copying them).
pub(crate) fn match_p2p<'a, V: AsRef<[Instance]>>(
    ranks: &[u32],
    insts: &'a [V],
) -> (Vec<Pair<'a>>, Vec<P2pLink>) {
    let slot = |rank: u32| ranks.iter().position(|&r| r == rank);
    let mut sends: Vec<Vec<End>> = Vec::new();
    let mut recvs: Vec<Vec<End>> = Vec::new();
    for v in insts {
        let mut s = Vec::new();
        let mut r = Vec::new();
        for x in v.as_ref().iter().filter(|x| x.p2p) {
            let end = End { x, peer: x.peer, taken: false, inferred: false };
            match x.kind {
                CollKind::Send => s.push(end),
                CollKind::Recv => r.push(end),
                // A batch is an exchange both ways: it pairs with the peer's batch, once, from
                // the lower rank's side.
                _ => {
                    let peer = x.peer.or_else(|| {
                        let mut p: Vec<u32> = x.batch.iter().filter_map(|b| b.1).collect();
                        p.sort_unstable();
                        p.dedup();
                        (p.len() == 1).then(|| p[0])
                    });
                    s.push(End { x, peer, taken: false, inferred: false });
                    r.push(End { x, peer, taken: false, inferred: false });
                }
            }
        }
        s.sort_by_key(|e| (e.x.start_ns, e.x.event));
        r.sort_by_key(|e| (e.x.start_ns, e.x.event));
        sends.push(s);
        recvs.push(r);
    }
    let mut pairs: Vec<Pair> = Vec::new();
    let mut links: Links = BTreeMap::new();
    // Known peers: by order within (group, src, dst).
    for (ks, &src) in ranks.iter().enumerate() {
        let mut dsts: BTreeSet<(String, u32)> = BTreeSet::new();
        for e in &sends[ks] {
            if let Some(p) = e.peer {
                dsts.insert((e.x.pg.clone(), p));
            }
        }
        for (pg, dst) in dsts {
            let Some(kd) = slot(dst) else { continue };
            if kd == ks {
                continue;
            }
            let batch = |x: &Instance| x.kind == CollKind::SendRecv;
            let si: Vec<usize> = (0..sends[ks].len())
                .filter(|&j| sends[ks][j].peer == Some(dst) && sends[ks][j].x.pg == pg)
                .collect();
            let ri: Vec<usize> = (0..recvs[kd].len())
                .filter(|&j| {
                    let r = &recvs[kd][j];
                    r.peer == Some(src) && r.x.pg == pg && !r.taken
                })
                .collect();
            // A batch pairs once per pair of ranks: from the lower rank.
            let si: Vec<usize> = si.into_iter().filter(|&j| !batch(sends[ks][j].x) || src < dst).collect();
            let ri: Vec<usize> = ri.into_iter().filter(|&j| !batch(recvs[kd][j].x) || src < dst).collect();
            for (&a, &b) in si.iter().zip(&ri) {
                sends[ks][a].taken = true;
                recvs[kd][b].taken = true;
                pairs.push((src, dst, sends[ks][a].x, recvs[kd][b].x, false));
            }
        }
    }
    // Unknown peers: the neighbours in rank order (see the module doc).
    for ks in 0..ranks.len() {
        let src = ranks[ks];
        for j in 0..sends[ks].len() {
            let e = &sends[ks][j];
            if e.taken || e.peer.is_some() || e.x.kind != CollKind::Send {
                continue;
            }
            let (t0, bytes, pg) = (e.x.start_ns, e.x.bytes, e.x.pg.clone());
            let mut best: Option<(i64, usize, usize)> = None;
            for kd in [ks.wrapping_sub(1), ks + 1] {
                let Some(rv) = recvs.get(kd) else { continue };
                if let Some(b) = rv.iter().position(|r| {
                    !r.taken
                        && r.peer.is_none()
                        && r.x.kind == CollKind::Recv
                        && r.x.pg == pg
                        && r.x.bytes == bytes
                        && r.x.end_ns >= t0
                }) {
                    let d = rv[b].x.end_ns - t0;
                    if best.is_none_or(|x| d < x.0) {
                        best = Some((d, kd, b));
                    }
                }
            }
            if let Some((_, kd, b)) = best {
                sends[ks][j].taken = true;
                sends[ks][j].inferred = true;
                recvs[kd][b].taken = true;
                recvs[kd][b].inferred = true;
                pairs.push((src, ranks[kd], sends[ks][j].x, recvs[kd][b].x, true));
            }
        }
    }
    for &(s, d, a, b, inferred) in &pairs {
        let l = link(&mut links, &a.pg, s, d);
        l.matched += 1;
        if inferred {
            l.peers_inferred += 1;
        }
        if a.kind == CollKind::SendRecv {
            l.batched += 1;
        }
        if let (Some(x), Some(y)) = (a.bytes, b.bytes) {
            if x != y {
                l.size_mismatches += 1;
            }
        }
    }
    for (k, &rank) in ranks.iter().enumerate() {
        for e in sends[k].iter().filter(|e| !e.taken && e.x.kind == CollKind::Send) {
            link(&mut links, &e.x.pg, rank, e.peer.unwrap_or(u32::MAX)).unmatched_sends += 1;
        }
        for e in recvs[k].iter().filter(|e| !e.taken && e.x.kind == CollKind::Recv) {
            link(&mut links, &e.x.pg, e.peer.unwrap_or(u32::MAX), rank).unmatched_recvs += 1;
        }
    }
    for l in links.values_mut() {
        let mut b: Vec<i64> = pairs
            .iter()
            .filter(|p| p.0 == l.src && p.1 == l.dst && p.2.pg == l.pg)
            .filter_map(|p| p.2.bytes.or(p.3.bytes))
            .collect();
        if !b.is_empty() {
            l.bytes = Some(crate::analyze::stats::lower_median(&mut b));
        }
    }
    pairs.sort_by_key(|p| (p.2.start_ns, p.0, p.1));
    (pairs, links.into_values().collect())
}

/// The stage chain of the exchanges, head first, and whether it is a ring (see the module doc).
pub(super) fn chain(ranks: &[u32], pairs: &[Pair<'_>], insts: &[Vec<Instance>]) -> Option<(Vec<u32>, bool)> {
    let mut adj: BTreeMap<u32, BTreeSet<u32>> = BTreeMap::new();
    for p in pairs {
        adj.entry(p.0).or_default().insert(p.1);
        adj.entry(p.1).or_default().insert(p.0);
    }
    if adj.len() < 2 || adj.values().any(|n| n.len() > 2) {
        return None;
    }
    // The largest component that is a path.
    let mut seen: BTreeSet<u32> = BTreeSet::new();
    let mut best: Option<Vec<u32>> = None;
    for (&start, n) in &adj {
        if seen.contains(&start) || n.len() != 1 {
            continue;
        }
        let mut path = vec![start];
        seen.insert(start);
        let mut prev = None;
        let mut cur = start;
        loop {
            let next = adj[&cur].iter().copied().find(|&x| Some(x) != prev && !seen.contains(&x));
            let Some(nx) = next else { break };
            seen.insert(nx);
            path.push(nx);
            prev = Some(cur);
            cur = nx;
        }
        if best.as_ref().is_none_or(|b| path.len() > b.len()) {
            best = Some(path);
        }
    }
    // Every rank with two neighbours and no end: a ring, which interleaved schedules make (the
    // last stage of chunk c sends to the first rank for chunk c + 1). Stages in rank order from
    // the lowest rank towards its lower-numbered neighbour.
    if best.is_none() && adj.values().all(|n| n.len() == 2) {
        let start = *adj.keys().next()?;
        let mut path = vec![start];
        let mut prev = start;
        let mut cur = *adj[&start].iter().next()?;
        while cur != start && path.len() <= adj.len() {
            path.push(cur);
            let next = adj[&cur].iter().copied().find(|&x| x != prev)?;
            (prev, cur) = (cur, next);
        }
        return (path.len() == adj.len()).then_some((path, true));
    }
    let mut path = best?;
    // The head: the end whose first exchange is a send.
    let first_is_send = |rank: u32| -> Option<bool> {
        let k = ranks.iter().position(|&r| r == rank)?;
        let v = insts.get(k)?;
        let x = v.iter().filter(|x| x.p2p).min_by_key(|x| (x.step, x.start_ns))?;
        Some(x.kind == CollKind::Send)
    };
    let (a, b) = (path[0], path[path.len() - 1]);
    let flip = match (first_is_send(a), first_is_send(b)) {
        (Some(false), Some(true)) => true,
        (Some(true), Some(false)) => false,
        _ => a > b,
    };
    if flip {
        path.reverse();
    }
    Some((path, false))
}

#[cfg(test)]
mod tests {
    use super::super::{report, RankPipe, Schedule, StageStepPart};
    use super::*;

    fn inst(kind: CollKind, peer: Option<u32>, start: i64, end: i64) -> Instance {
        Instance {
            event: EventIdx(start as u32),
            kind,
            pg: String::new(),
            seq: None,
            start_ns: start,
            end_ns: end,
            step: 1,
            bytes: Some(64),
            group_size: None,
            issued_ns: start,
            lane: 0,
            tid: None,
            p2p: true,
            peer,
            peer_in_group: false,
            tag: None,
            batch: Vec::new(),
            from_autograd: false,
        }
    }

    /// Three stages without peers in the trace: the neighbours in rank order are inferred, the
    /// chain runs 0 → 1 → 2 (rank 0's first exchange is a send), two forwards before the
    /// backwards make GPipe.
    #[test]
    fn peers_are_inferred_along_rank_order() {
        use CollKind::{Recv, Send};
        let insts = vec![
            vec![
                inst(Send, None, 0, 50),
                inst(Send, None, 10, 60),
                inst(Recv, None, 100, 120),
                inst(Recv, None, 130, 150),
            ],
            vec![
                inst(Recv, None, 0, 5),
                inst(Send, None, 6, 40),
                inst(Recv, None, 10, 15),
                inst(Send, None, 16, 45),
                inst(Recv, None, 80, 90),
                inst(Send, None, 95, 100),
                inst(Recv, None, 110, 120),
                inst(Send, None, 125, 130),
            ],
            vec![
                inst(Recv, None, 7, 30),
                inst(Recv, None, 17, 35),
                inst(Send, None, 70, 80),
                inst(Send, None, 100, 110),
            ],
        ];
        let pipes: Vec<RankPipe> = (0..3)
            .map(|_| RankPipe {
                steps: vec![StageStepPart { step: 1, span_ns: 200, compute_ns: 50, ..Default::default() }],
            })
            .collect();
        let refs: Vec<&RankPipe> = pipes.iter().collect();
        let Some(r) = report(&[0, 1, 2], &insts, &refs, &[]) else { panic!("no pipeline") };
        assert_eq!(r.stages, [0, 1, 2]);
        assert_eq!(r.micro_batches, Some(2));
        assert_eq!(r.schedule, Schedule::Gpipe);
        let links: Vec<(u32, u32, usize, usize)> =
            r.links.iter().map(|l| (l.src, l.dst, l.matched, l.peers_inferred)).collect();
        assert_eq!(links, [(0, 1, 2, 2), (1, 0, 2, 2), (1, 2, 2, 2), (2, 1, 2, 2)]);
        assert!((r.theory_bubble_share.unwrap_or(f64::NAN) - 2.0 / 4.0).abs() < 1e-9);
        assert_eq!(r.per_stage[0].bubble_ns, 150);
    }

    /// `batch_isend_irecv` between two ranks (an NCCL group: one SendRecv kernel each side) is
    /// one exchange, counted once.
    #[test]
    fn a_batch_is_one_exchange() {
        let batch = |peer: u32, start: i64| Instance {
            kind: CollKind::SendRecv,
            batch: vec![(CollKind::Send, Some(peer)), (CollKind::Recv, Some(peer))],
            ..inst(CollKind::SendRecv, None, start, start + 10)
        };
        let insts = vec![vec![batch(1, 0), batch(1, 50)], vec![batch(0, 2), batch(0, 52)]];
        let (pairs, links) = match_p2p(&[0, 1], &insts);
        assert_eq!(pairs.len(), 2);
        let l: Vec<(u32, u32, usize, usize, usize, usize)> = links
            .iter()
            .map(|l| (l.src, l.dst, l.matched, l.batched, l.unmatched_sends, l.unmatched_recvs))
            .collect();
        assert_eq!(l, [(0, 1, 2, 2, 0, 0)]);
    }
}
