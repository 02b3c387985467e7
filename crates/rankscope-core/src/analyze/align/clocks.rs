//! Which ranks share a clock (a host's name or a multi-rank file, unless the collectives
//! contradict it), and how the clocks chain to the reference clock through the collectives they
//! share (see the parent module's doc).

use std::collections::BTreeMap;

use super::{host_key, rank_list, CAUSALITY_SLACK_NS, MIN_APPLIED_OFFSET_NS};
use crate::analyze::instances::Instance;
use crate::analyze::stats::lower_median;
use crate::analyze::RankPart;

/// What puts a rank on a clock shared with others: its host's name, else the multi-rank file
/// it was cut from (a merged file writes its ranks on one time axis; the collectives check it
/// like a host's name).
fn clock_key(p: &RankPart) -> Option<String> {
    match (p.info.host.as_deref().and_then(host_key), &p.info.clock) {
        (Some(h), _) => Some(h),
        (None, Some(f)) => Some(format!("file:{f}")),
        (None, None) => None,
    }
}

/// One clock: the parts (indices into the sorted parts) that share it, lowest rank first.
pub(super) struct Clock {
    pub(super) members: Vec<usize>,
    pub(super) host: Option<String>,
    /// The multi-rank file its ranks were cut from, when no host names it.
    pub(super) file: Option<String>,
}

/// Ranks the host name put on a clock that the collectives then took off it: (part, the
/// group's lead part, collectives contradicting a shared clock, collectives shared).
pub(super) type Doubt = (usize, usize, usize, usize);

/// How a clock is placed against the reference clock.
pub(super) struct Link {
    /// End differences against the clock it is placed through (`via`, else the reference).
    pub(super) diffs: Vec<i64>,
    /// That clock's own estimate (0 for the reference).
    pub(super) base_ns: i64,
    pub(super) via: Option<usize>,
    pub(super) hops: usize,
}

/// The clocks reachable from the reference clock (0) through pairs that shared collectives,
/// each through the pair with the most anchors on the way (a maximum spanning tree grown from
/// the reference, Prim's order: the best-anchored pair first). `pairs[(a, b)]` are b's end
/// differences against a.
pub(super) fn chain_clocks(pairs: &BTreeMap<(usize, usize), Vec<i64>>) -> BTreeMap<usize, Link> {
    let mut out: BTreeMap<usize, Link> = BTreeMap::new();
    let mut placed: BTreeMap<usize, (i64, usize)> = BTreeMap::from([(0, (0, 0))]);
    loop {
        // The pair from a placed clock to an unplaced one with the most anchors.
        let mut best: Option<(usize, usize, usize, bool)> = None;
        for (&(a, b), d) in pairs {
            let (from, to, flip) = match (placed.contains_key(&a), placed.contains_key(&b)) {
                (true, false) => (a, b, false),
                (false, true) => (b, a, true),
                _ => continue,
            };
            if d.is_empty() {
                continue;
            }
            let key = (d.len(), std::cmp::Reverse(to));
            if best.is_none_or(|(n, _, t, _)| key > (n, std::cmp::Reverse(t))) {
                best = Some((d.len(), from, to, flip));
            }
        }
        let Some((_, from, to, flip)) = best else { break };
        let key = if flip { (to, from) } else { (from, to) };
        let diffs: Vec<i64> = pairs.get(&key).map_or_else(Vec::new, |d| {
            if flip {
                d.iter().map(|x| -x).collect()
            } else {
                d.clone()
            }
        });
        let (base, hops) = placed.get(&from).copied().unwrap_or((0, 0));
        let own = lower_median(&mut diffs.clone());
        placed.insert(to, (base + own, hops + 1));
        out.insert(to, Link { diffs, base_ns: base, via: (from != 0).then_some(from), hops: hops + 1 });
    }
    out
}

/// Each part's clock: the index of the lowest part that reports the same host and agrees with
/// it (its own index for a rank alone on its clock), and the ranks the collectives took off
/// their host's clock.
pub(super) fn clock_leads(
    parts: &[RankPart],
    places: &[BTreeMap<usize, &Instance>],
    given: &BTreeMap<u32, i64>,
) -> (Vec<usize>, Vec<Doubt>) {
    let mut first_of: BTreeMap<String, usize> = BTreeMap::new();
    let mut lead: Vec<usize> = (0..parts.len()).collect();
    for (i, p) in parts.iter().enumerate() {
        // A rank the user put on a clock of its own stays there (the reference keeps its place:
        // every estimate reads its raw clock).
        if i != 0 && given.contains_key(&p.info.rank) {
            continue;
        }
        if let Some(key) = clock_key(p) {
            lead[i] = *first_of.entry(key).or_insert(i);
        }
    }
    // On one clock nobody leaves a collective before everybody entered it.
    let mut tally: BTreeMap<usize, (usize, usize)> = BTreeMap::new();
    let mut end_diffs: BTreeMap<usize, Vec<i64>> = BTreeMap::new();
    for at in places {
        for (&i, a) in at {
            let l = lead[i];
            if l == i {
                continue;
            }
            let Some(b) = at.get(&l) else { continue };
            let t = tally.entry(i).or_default();
            t.1 += 1;
            end_diffs.entry(i).or_default().push(a.end_ns - b.end_ns);
            if a.end_ns < b.start_ns.saturating_sub(CAUSALITY_SLACK_NS)
                || b.end_ns < a.start_ns.saturating_sub(CAUSALITY_SLACK_NS)
            {
                t.0 += 1;
            }
        }
    }
    // Another clock also makes the ends differ by one amount, pair after pair; pairs that are
    // not the same collective (a rank that skipped one is matched a collective off in every
    // later step) contradict each other by as much as they contradict causality. Only a
    // consistent difference (beyond the noise, as an offset must be to be applied) takes a
    // rank off its host's clock.
    let consistent = |i: usize| {
        let mut d = end_diffs.get(&i).cloned().unwrap_or_default();
        if d.is_empty() {
            return false;
        }
        let est = lower_median(&mut d);
        let mut dev: Vec<i64> = d.iter().map(|x| (x - est).abs()).collect();
        let mad = lower_median(&mut dev);
        est.abs() > (3 * mad).max(MIN_APPLIED_OFFSET_NS).max(10 * mad)
    };
    // A poor fit never moves a rank off the clock its host names: nearly every shared
    // collective (nine in ten, three at least) must contradict the shared clock, and the ends
    // must differ by one amount that stands clear of their spread (ten times it).
    let mut doubts = Vec::new();
    for (&i, &(bad, n)) in &tally {
        if n >= 3 && 10 * bad >= 9 * n && consistent(i) {
            doubts.push((i, lead[i], bad, n));
            lead[i] = i;
        }
    }
    (lead, doubts)
}

/// The clocks, in the order of their lowest rank.
pub(super) fn clocks_of(parts: &[RankPart], lead: &[usize]) -> Vec<Clock> {
    let mut by_lead: BTreeMap<usize, Vec<usize>> = BTreeMap::new();
    for (i, &l) in lead.iter().enumerate() {
        by_lead.entry(l).or_default().push(i);
    }
    by_lead
        .into_values()
        .map(|members| {
            let host = members.first().and_then(|&g| parts[g].info.host.clone());
            let file = members.first().and_then(|&g| parts[g].info.clock.clone());
            Clock { members, host, file }
        })
        .collect()
}

/// "host `vm`: one clock for ranks 0-3".
pub(super) fn clock_words(parts: &[RankPart], c: &Clock) -> String {
    let ranks: Vec<u32> = c.members.iter().map(|&i| parts[i].info.rank).collect();
    match (&c.host, &c.file) {
        (h, Some(f)) if h.as_deref().and_then(host_key).is_none() => {
            format!("file `{f}`: one clock for {}", rank_list(&ranks))
        }
        (h, _) => format!("host `{}`: one clock for {}", h.as_deref().unwrap_or("?"), rank_list(&ranks)),
    }
}
