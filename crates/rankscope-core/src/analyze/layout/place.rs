//! Which group ran each collective that does not carry its group's name ([`super`]'s module
//! doc, "Which group ran each collective").

use std::collections::{BTreeMap, BTreeSet};

use super::{Group, Placement, RankPlacement};
use crate::analyze::instances::Instance;
use crate::analyze::RankPart;
use crate::model::CollKind;

/// One rank's channels: the lanes of one group, and the instances on each. Two lanes are one
/// channel when the backend made their threads together (their thread ids within
/// [`SIBLING_TIDS`], or the trace gives none) and their most frequent kinds of call (kind and
/// size) meet: gloo runs a group's work on two threads created one after the other, each with
/// its share of the group's calls, while another group's threads came later (another group
/// created, other ranks' threads between) or run other calls. One stray call of another
/// group's size on a lane does not join the lanes.
fn channels(v: &[Instance], world: usize) -> Vec<Vec<usize>> {
    let free = |x: &&Instance| !x.p2p && x.pg.is_empty();
    type Mix = BTreeMap<(CollKind, Option<i64>), usize>;
    let mut mix: BTreeMap<u32, (Mix, Option<i64>)> = BTreeMap::new();
    for x in v.iter().filter(free) {
        let m = mix.entry(x.lane).or_insert_with(|| (Mix::new(), x.tid));
        *m.0.entry((x.kind, x.bytes)).or_default() += 1;
    }
    let lanes: Vec<u32> = mix.keys().copied().collect();
    let mut parent: Vec<usize> = (0..lanes.len()).collect();
    fn find(p: &mut [usize], mut i: usize) -> usize {
        while p[i] != i {
            p[i] = p[p[i]];
            i = p[i];
        }
        i
    }
    let top = |m: &Mix| -> BTreeSet<(CollKind, Option<i64>)> {
        let most = m.values().copied().max().unwrap_or(0);
        m.iter().filter(|(_, &n)| n == most).map(|(k, _)| *k).collect()
    };
    let near = SIBLING_TIDS.max(2 * world as i64);
    let mixes: Vec<&(Mix, Option<i64>)> = mix.values().collect();
    for a in 0..lanes.len() {
        for b in a + 1..lanes.len() {
            let ((ma, ta), (mb, tb)) = (mixes[a], mixes[b]);
            let siblings = match (ta, tb) {
                (Some(x), Some(y)) => (x - y).abs() <= near,
                _ => true,
            };
            if siblings && !top(ma).is_disjoint(&top(mb)) {
                let (x, y) = (find(&mut parent, a), find(&mut parent, b));
                if x != y {
                    parent[x.max(y)] = x.min(y);
                }
            }
        }
    }
    let mut out: BTreeMap<usize, Vec<usize>> = BTreeMap::new();
    for (i, x) in v.iter().enumerate() {
        if !free(&x) {
            continue;
        }
        if let Ok(l) = lanes.binary_search(&x.lane) {
            out.entry(find(&mut parent, l)).or_default().push(i);
        }
    }
    out.into_values().collect()
}

/// Thread ids at most this far apart (or twice the ranks, when more: every process of a host
/// creates its threads at the same time) can be one group's threads.
pub const SIBLING_TIDS: i64 = 8;

/// The order in which a rank's channels and its groups were made. gloo makes a group's worker
/// threads when torch makes the group, thread ids grow with creation, and torch names groups by
/// a counter in creation order: so the rank's channels by thread id map onto its groups by name
/// in order, each channel to a group of at least its own position that leaves room for the
/// channels after it (a group may have no profiled collective, so not one to one). The rank
/// already placed channels hold their groups' order too.
struct Order {
    /// Per channel, its position among the rank's channels by first thread id.
    channel_pos: Vec<usize>,
    /// The rank's groups (of two ranks or more), in creation order.
    groups: Vec<usize>,
}

impl Order {
    /// Known when every channel has a thread id, every group a counter name, and the rank has
    /// no more channels than groups.
    fn of(chans: &[Vec<usize>], insts: &[Instance], cand: &[usize], groups: &[Group]) -> Option<Order> {
        let mut tids: Vec<(i64, usize)> = Vec::with_capacity(chans.len());
        for (c, ch) in chans.iter().enumerate() {
            tids.push((ch.iter().filter_map(|&i| insts.get(i).and_then(|x| x.tid)).min()?, c));
        }
        tids.sort_unstable();
        let mut channel_pos = vec![0; chans.len()];
        for (p, &(_, c)) in tids.iter().enumerate() {
            channel_pos[c] = p;
        }
        let mut named: Vec<(u64, usize)> = Vec::with_capacity(cand.len());
        for &g in cand {
            named.push((groups.get(g)?.name.parse::<u64>().ok()?, g));
        }
        named.sort_unstable();
        (chans.len() <= named.len() && !chans.is_empty())
            .then(|| Order { channel_pos, groups: named.into_iter().map(|x| x.1).collect() })
    }

    /// Whether channel `c` of rank `k` can be group `g`'s, given the groups already `chosen`.
    fn admits(&self, c: usize, g: usize, k: usize, chosen: &BTreeMap<usize, BTreeMap<usize, usize>>) -> bool {
        let (Some(&i), Some(j)) = (self.channel_pos.get(c), self.groups.iter().position(|&h| h == g)) else {
            return true;
        };
        let (nc, ng) = (self.channel_pos.len(), self.groups.len());
        let room = i <= j && nc - 1 - i <= ng - 1 - j;
        room && chosen.iter().all(|(&h, pick)| {
            let (Some(&c2), Some(j2)) = (pick.get(&k), self.groups.iter().position(|&x| x == h)) else {
                return true;
            };
            let Some(&i2) = self.channel_pos.get(c2) else { return true };
            (j2 < j) == (i2 < i) && (j2 == j) == (i2 == i)
        })
    }
}

/// How well two channels (on ranks whose clocks are `same_clock` or not) are one group's
/// collectives, in [0, 1]: none is 0.
///
/// Instances are paired by step, kind and ordinal in issue order. A pair **agrees** when the
/// sizes agree (or one is unknown) and, on one clock, neither member left before the other
/// entered (beyond [`crate::analyze::align::CAUSALITY_SLACK_NS`]): a collective completes only once
/// every member arrived. `agree` is the share of the longer channel's instances in agreeing
/// pairs. Then **closeness**: the members of one collective leave it together, within the
/// transfer and the host's scheduling (on gloo's CPU ring the ranks' ends differ by up to
/// several ms on a busy host), while two groups that merely run alike end wherever their own
/// last members arrive: each agreeing pair scores 1 / (1 + |Δend| / scale), the scale the
/// larger of 2 ms and a tenth of the pairs' median duration (across clocks Δend is taken
/// about its median: one constant offset). The fit is `agree × (1 + closeness) / 2`, so the
/// count and sizes decide whether channels can be one group at all and the ends which of
/// several candidates is.
fn fit(a: &[&Instance], b: &[&Instance], same_clock: bool) -> (f64, f64) {
    let (ma, mb) = (by_step_kind(a), by_step_kind(b));
    let mut pairs: Vec<(&Instance, &Instance)> = Vec::new();
    for (k, va) in &ma {
        if let Some(vb) = mb.get(k) {
            pairs.extend(va.iter().zip(vb).map(|(x, y)| (*x, *y)));
        }
    }
    let longer = a.len().max(b.len());
    if pairs.is_empty() || longer == 0 {
        return (0.0, 0.0);
    }
    let slack = crate::analyze::align::CAUSALITY_SLACK_NS;
    let agreeing: Vec<&(&Instance, &Instance)> = pairs
        .iter()
        .filter(|(x, y)| {
            let sizes = match (x.bytes, y.bytes) {
                (Some(p), Some(q)) => p == q,
                _ => true,
            };
            let causal = !same_clock || (x.end_ns + slack >= y.start_ns && y.end_ns + slack >= x.start_ns);
            sizes && causal
        })
        .collect();
    if agreeing.is_empty() {
        return (0.0, 0.0);
    }
    let agree = agreeing.len() as f64 / longer as f64;
    let mut diffs: Vec<i64> = agreeing.iter().map(|(x, y)| x.end_ns - y.end_ns).collect();
    let center = if same_clock { 0 } else { crate::analyze::stats::lower_median(&mut diffs) };
    let mut durs: Vec<i64> =
        agreeing.iter().flat_map(|(x, y)| [x.end_ns - x.start_ns, y.end_ns - y.start_ns]).collect();
    let scale = (crate::analyze::stats::lower_median(&mut durs) / 10).max(2_000_000) as f64;
    let close = agreeing
        .iter()
        .map(|(x, y)| 1.0 / (1.0 + ((x.end_ns - y.end_ns - center).abs() as f64 / scale)))
        .sum::<f64>()
        / agreeing.len() as f64;
    (agree * (1.0 + close) / 2.0, agree)
}

/// Instances by (step, kind), each list in the order the host issued them.
fn by_step_kind<'a>(v: &[&'a Instance]) -> BTreeMap<(u32, CollKind), Vec<&'a Instance>> {
    let mut m: BTreeMap<(u32, CollKind), Vec<&Instance>> = BTreeMap::new();
    for x in v {
        m.entry((x.step, x.kind)).or_default().push(x);
    }
    for w in m.values_mut() {
        w.sort_by_key(|x| (x.issued_ns, x.start_ns, x.event));
    }
    m
}

/// Places every instance without a group name; returns how each rank was placed.
pub(super) fn place(parts: &[RankPart], insts: &mut [Vec<Instance>], groups: &[Group]) -> Vec<RankPlacement> {
    const MIN_AGREE: f64 = 0.5;
    let n = parts.len();
    let rank_of: Vec<u32> = parts.iter().map(|p| p.info.rank).collect();
    let slot: BTreeMap<u32, usize> = rank_of.iter().enumerate().map(|(k, &r)| (r, k)).rev().collect();
    // Candidate groups per rank (the groups listing it, of two ranks or more).
    let mut cand: Vec<Vec<usize>> = vec![Vec::new(); n];
    for (gi, g) in groups.iter().enumerate() {
        if g.ranks.len() < 2 {
            continue;
        }
        for r in &g.ranks {
            if let Some(&k) = slot.get(r) {
                cand[k].push(gi);
            }
        }
    }
    let mut how: Vec<Placement> = vec![Placement::ByName; n];
    let mut chans: Vec<Vec<Vec<usize>>> = vec![Vec::new(); n];
    // group → (rank slot → channel index)
    let mut chosen: BTreeMap<usize, BTreeMap<usize, usize>> = BTreeMap::new();
    for k in 0..n {
        if insts[k].iter().all(|x| !x.pg.is_empty()) {
            continue;
        }
        match cand[k].as_slice() {
            [] => how[k] = Placement::Unplaced,
            [g] => {
                let name = &groups[*g].name;
                for x in insts[k].iter_mut().filter(|x| x.pg.is_empty()) {
                    x.pg = name.clone();
                }
                how[k] = Placement::OnlyGroup;
            }
            _ => {
                chans[k] = channels(&insts[k], n);
                how[k] = Placement::ByLanes;
            }
        }
    }
    let order: Vec<Option<Order>> = (0..n)
        .map(|k| {
            let gloo = parts[k].info.backend.as_deref().is_some_and(|b| b.eq_ignore_ascii_case("gloo"));
            Order::of(&chans[k], &insts[k], &cand[k], groups).filter(|_| gloo && how[k] == Placement::ByLanes)
        })
        .collect();
    let host = |k: usize| parts[k].info.host.as_deref().and_then(crate::analyze::align::host_key);
    let same_clock = |a: usize, b: usize| host(a).is_some() && host(a) == host(b);
    let mut used: Vec<BTreeSet<usize>> = vec![BTreeSet::new(); n];
    let mut cache: BTreeMap<(usize, usize, usize, usize), (f64, f64)> = BTreeMap::new();
    let mut open: BTreeSet<usize> = (0..groups.len())
        .filter(|&g| groups[g].ranks.iter().filter(|r| slot.contains_key(r)).count() >= 2)
        .collect();
    // A member placed otherwise offers one fixed channel: its instances already in the group.
    const FIXED: usize = usize::MAX;
    // torch's default group carries what a job issues with no group (barriers, objects, the
    // start-up); a group the job made (a mesh dimension, `new_group`) was made to carry its
    // traffic. Collectives of the same ranks that run in step look alike to both (the
    // replicate groups' all-reduces of an HSDP job end together across the pairs, and fit the
    // world as well as their own pair), so the default group takes what the job's own groups
    // leave. A group of the default group's own ranks is decided with it, by creation
    // ([`alias_by_creation`]).
    let default = |g: usize| groups[g].desc.as_deref() == Some("default_pg");
    let default_ranks: Vec<&Vec<u32>> =
        (0..groups.len()).filter(|&g| default(g)).map(|g| &groups[g].ranks).collect();
    let deferred: Vec<bool> =
        (0..groups.len()).map(|g| default(g) || default_ranks.contains(&&groups[g].ranks)).collect();
    let mut defaults_now = false;
    loop {
        // For each open group: its best channel on the lowest member placed by lanes, each
        // other member's best channel against it, and the margin over the next best.
        let mut best: Option<(f64, f64, usize, BTreeMap<usize, usize>)> = None;
        for &g in open.iter().filter(|&&g| defaults_now || !deferred[g]) {
            let members: Vec<usize> = groups[g].ranks.iter().filter_map(|r| slot.get(r).copied()).collect();
            let Some(&r0) = members.iter().find(|&&k| how[k] == Placement::ByLanes) else { continue };
            let name = &groups[g].name;
            let admissible =
                |k: usize, c: usize, g: usize| order[k].as_ref().is_none_or(|o| o.admits(c, g, k, &chosen));
            let options = |s: usize| -> Vec<usize> {
                if how[s] == Placement::ByLanes {
                    (0..chans[s].len()).filter(|&d| !used[s].contains(&d) && admissible(s, d, g)).collect()
                } else if insts[s].iter().any(|x| !x.p2p && &x.pg == name) {
                    vec![FIXED]
                } else {
                    Vec::new()
                }
            };
            // Every loaded member runs the group's collectives: a member with no channel left
            // for it rules the group out (a subset of its ranks would look like it).
            let others: Vec<usize> = members.iter().copied().filter(|&s| s != r0).collect();
            if others.is_empty() || others.iter().any(|&s| options(s).is_empty()) {
                continue;
            }
            let mut scores: Vec<(f64, BTreeMap<usize, usize>, f64)> = Vec::new();
            for c0 in options(r0) {
                let a: Vec<&Instance> = chans[r0][c0].iter().map(|&i| &insts[r0][i]).collect();
                let mut pick = BTreeMap::from([(r0, c0)]);
                let mut total = 0.0;
                let mut least_agree = f64::INFINITY;
                for &s in &others {
                    let mut top = (0.0, None, 0.0);
                    for d in options(s) {
                        let (f, agree) = *cache.entry((r0, c0, s, d)).or_insert_with(|| {
                            let b: Vec<&Instance> = if d == FIXED {
                                insts[s].iter().filter(|x| !x.p2p && &x.pg == name).collect()
                            } else {
                                chans[s][d].iter().map(|&i| &insts[s][i]).collect()
                            };
                            fit(&a, &b, same_clock(r0, s))
                        });
                        if f > top.0 {
                            top = (f, Some(d), agree);
                        }
                    }
                    total += top.0;
                    least_agree = least_agree.min(top.2);
                    if let Some(d) = top.1.filter(|&d| d != FIXED) {
                        pick.insert(s, d);
                    }
                }
                scores.push((total / others.len() as f64, pick, least_agree));
            }
            scores.sort_by(|x, y| y.0.total_cmp(&x.0));
            let Some((top, pick, agree)) = scores.first().cloned() else { continue };
            let margin = top - scores.get(1).map_or(0.0, |s| s.0);
            // Every member's channel must hold most of the group's calls.
            if agree < MIN_AGREE {
                continue;
            }
            let better = match &best {
                None => true,
                Some((m, t, _, _)) => (margin, top) > (*m, *t),
            };
            if better {
                best = Some((margin, top, g, pick));
            }
        }
        let Some((_, _, g, pick)) = best else {
            if defaults_now {
                break;
            }
            defaults_now = true;
            continue;
        };
        open.remove(&g);
        for (&k, &c) in &pick {
            used[k].insert(c);
        }
        chosen.insert(g, pick);
    }
    alias_by_creation(&mut chosen, groups, &chans, insts);
    for (&g, pick) in &chosen {
        for (&k, &c) in pick {
            let idx = chans[k][c].clone();
            for i in idx {
                if let Some(x) = insts[k].get_mut(i) {
                    x.pg = groups[g].name.clone();
                }
            }
        }
    }
    place_p2p(parts, insts, groups, &cand);
    (0..n)
        .map(|k| {
            let unplaced = insts[k].iter().filter(|x| x.pg.is_empty()).count() as u32;
            let placement = if how[k] == Placement::ByLanes && unplaced as usize == insts[k].len() {
                Placement::Unplaced
            } else {
                how[k]
            };
            RankPlacement { rank: rank_of[k], placement, unplaced }
        })
        .collect()
}

/// Places the point-to-point exchanges that carry no group: in the group (of those holding the
/// rank) in which the peer has the matching exchange: the opposite direction, naming this rank
/// back (as its index in that group when the peer's trace says group ranks), overlapping it on
/// one clock (a gloo send completes only once its recv is posted). Without such evidence: the
/// group of the collectives on the same lane, else the smallest group holding both ends. A
/// peer written as an index in an unnamed group becomes the global rank of the group placed.
fn place_p2p(parts: &[RankPart], insts: &mut [Vec<Instance>], groups: &[Group], cand: &[Vec<usize>]) {
    let rank_of: Vec<u32> = parts.iter().map(|p| p.info.rank).collect();
    let slot: BTreeMap<u32, usize> = rank_of.iter().enumerate().map(|(k, &r)| (r, k)).rev().collect();
    let host = |k: usize| parts[k].info.host.as_deref().and_then(crate::analyze::align::host_key);
    let index_in = |g: &Group, r: u32| g.ranks.iter().position(|&x| x == r);
    // Names looked up once (a job of 1,024 ranks has hundreds of groups and a few hundred
    // thousand instances: a scan of the groups per instance was most of the layout's time).
    let mut index: BTreeMap<&str, usize> = BTreeMap::new();
    for (i, g) in groups.iter().enumerate() {
        index.entry(g.name.as_str()).or_insert(i); // the first of a name, as a scan finds it
    }
    let group_of = |pg: &str| index.get(pg).copied();
    let mut carries = vec![false; groups.len()];
    for x in insts.iter().flatten().filter(|x| !x.p2p) {
        if let Some(i) = group_of(&x.pg) {
            carries[i] = true;
        }
    }
    // Where the peer of `x` (on slot k) is, if `x` is in group g.
    let global_peer = |x: &Instance, g: &Group| -> Option<u32> {
        let p = x.peer?;
        if x.peer_in_group {
            g.ranks.get(p as usize).copied()
        } else {
            g.ranks.binary_search(&p).is_ok().then_some(p)
        }
    };
    let opposite = |k: CollKind| match k {
        CollKind::Send => CollKind::Recv,
        CollKind::Recv => CollKind::Send,
        other => other,
    };
    let mut decided: Vec<(usize, usize, usize)> = Vec::new(); // (slot, instance, group)
    for k in 0..insts.len() {
        let me = rank_of[k];
        let lane_group: BTreeMap<u32, usize> = insts[k]
            .iter()
            .filter(|x| !x.p2p && !x.pg.is_empty())
            .filter_map(|x| Some((x.lane, group_of(&x.pg)?)))
            .collect();
        let mut votes = Vec::new();
        for (i, x) in
            insts[k].iter().enumerate().filter(|(_, x)| x.p2p && (x.pg.is_empty() || x.peer_in_group))
        {
            let options: Vec<usize> =
                if x.pg.is_empty() { cand[k].clone() } else { group_of(&x.pg).into_iter().collect() };
            // `strict`: the peer's exchange names this rank back; else one that names nobody
            // counts too.
            let evidence = |gi: usize, strict: bool| -> bool {
                let g = &groups[gi];
                let (Some(peer), Some(my_index)) = (global_peer(x, g), index_in(g, me)) else { return false };
                if peer == me {
                    return false;
                }
                let Some(&s) = slot.get(&peer) else { return false };
                let same_clock = host(k).is_some() && host(k) == host(s);
                insts[s].iter().any(|y| {
                    y.p2p
                        && y.kind == opposite(x.kind)
                        && (y.pg.is_empty() || y.pg == g.name)
                        && match y.peer {
                            Some(q) if y.peer_in_group => q as usize == my_index,
                            Some(q) => q == me,
                            None => !strict,
                        }
                        && (!same_clock || (y.start_ns <= x.end_ns && x.start_ns <= y.end_ns))
                })
            };
            let mut with: Vec<usize> = options.iter().copied().filter(|&gi| evidence(gi, true)).collect();
            if with.is_empty() {
                with = options.iter().copied().filter(|&gi| evidence(gi, false)).collect();
            }
            votes.push((i, (x.kind, x.peer, x.peer_in_group), with, options));
        }
        // One stream of exchanges (a direction to one peer) runs on one group: each takes the
        // group most of its stream's exchanges had evidence for, else its own fallback.
        let mut tally: BTreeMap<(CollKind, Option<u32>, bool), BTreeMap<usize, usize>> = BTreeMap::new();
        for (_, key, with, _) in &votes {
            for &g in with {
                *tally.entry(*key).or_default().entry(g).or_default() += 1;
            }
        }
        for (i, key, with, options) in votes {
            let Some(x) = insts[k].get(i) else { continue };
            // Between groups of the same ranks the evidence is alike: the one that carries no
            // collective was made for the exchanges (a context-parallel group beside the world).
            let stream = tally.get(&key).and_then(|t| {
                t.iter().max_by_key(|(g, n)| (**n, !carries[**g], std::cmp::Reverse(**g))).map(|(g, _)| *g)
            });
            let chosen = stream.or_else(|| {
                let pool = if with.is_empty() { &options } else { &with };
                lane_group.get(&x.lane).copied().filter(|g| pool.contains(g)).or_else(|| {
                    pool.iter()
                        .copied()
                        .filter(|&gi| global_peer(x, &groups[gi]).is_some_and(|p| p != me))
                        .min_by_key(|&gi| groups[gi].ranks.len())
                })
            });
            if let Some(gi) = chosen {
                decided.push((k, i, gi));
            }
        }
    }
    for (k, i, gi) in decided {
        let g = &groups[gi];
        if let Some(x) = insts[k].get_mut(i) {
            if x.peer_in_group {
                x.peer = global_peer(x, g);
                x.peer_in_group = false;
            }
            x.pg = g.name.clone();
        }
    }
}

/// Groups of the same ranks cannot be told apart by their members' collectives (both sets fit
/// either): a backend creates each group's threads when the group is created, and torch names
/// groups by a counter in creation order, so on every rank the group created first takes the
/// channel whose threads came first. Applied only where every member has one channel per such
/// group and the thread ids are known.
fn alias_by_creation(
    chosen: &mut BTreeMap<usize, BTreeMap<usize, usize>>,
    groups: &[Group],
    chans: &[Vec<Vec<usize>>],
    insts: &[Vec<Instance>],
) {
    let creation = |g: usize| (groups[g].name.parse::<u64>().unwrap_or(u64::MAX), groups[g].name.clone());
    // A class where the default group took every channel: a group made with the default
    // group's ranks was made to carry something, its exchanges when the ranks have
    // point-to-point ones (placed later), else those collectives (torch's default group then
    // carries barriers and objects).
    let default = |g: usize| groups[g].desc.as_deref() == Some("default_pg");
    let exchanges = insts.iter().flatten().any(|x| x.p2p && x.pg.is_empty());
    let taken: Vec<usize> = chosen.keys().copied().collect();
    for g in taken {
        if !default(g) {
            continue;
        }
        let twins: Vec<usize> = (0..groups.len())
            .filter(|&h| {
                h != g && groups[h].ranks == groups[g].ranks && !chosen.contains_key(&h) && !default(h)
            })
            .collect();
        if let ([twin], false) = (twins.as_slice(), exchanges) {
            if let Some(pick) = chosen.remove(&g) {
                chosen.insert(*twin, pick);
            }
        }
    }
    let mut classes: BTreeMap<&[u32], Vec<usize>> = BTreeMap::new();
    for &g in chosen.keys() {
        classes.entry(groups[g].ranks.as_slice()).or_default().push(g);
    }
    for (_, mut class) in classes.into_iter().filter(|c| c.1.len() >= 2) {
        class.sort_by_key(|&g| creation(g));
        let members: BTreeSet<usize> = class.iter().flat_map(|g| chosen[g].keys().copied()).collect();
        let mut orders: BTreeMap<usize, Vec<usize>> = BTreeMap::new();
        let mut sound = true;
        for &k in &members {
            let mut cs: Vec<(i64, usize)> = Vec::new();
            for g in &class {
                let Some(&c) = chosen[g].get(&k) else {
                    sound = false;
                    break;
                };
                let tid = chans[k][c].iter().filter_map(|&i| insts[k].get(i).and_then(|x| x.tid)).min();
                match tid {
                    Some(t) => cs.push((t, c)),
                    None => sound = false,
                }
            }
            cs.sort_unstable();
            orders.insert(k, cs.into_iter().map(|x| x.1).collect());
        }
        if !sound {
            continue;
        }
        for (n, &g) in class.iter().enumerate() {
            if let Some(pick) = chosen.get_mut(&g) {
                for (&k, order) in &orders {
                    if let Some(&c) = order.get(n) {
                        pick.insert(k, c);
                    }
                }
            }
        }
    }
}
