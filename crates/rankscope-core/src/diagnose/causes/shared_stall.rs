//! `host_stall` on every rank: each CPU rank spends more than
//! [`crate::finding::Thresholds::shared_stall_ratio`] of its step in one region with no operator
//! running and no collective to wait for, or more than
//! [`crate::finding::Thresholds::shared_stall_block_ratio`] in **one block** there (a sleep,
//! blocking I/O, a lock, a checkpoint or a log written inside the step on every rank). A late
//! rank's stall is found by comparing it with the others ([`super::late_rank`]); a stall every
//! rank has in the same place leaves nobody late and nothing to compare, yet every step pays
//! for it.
//!
//! **Where.** Per region (name and parent, [`crate::analyze::attribution::RegionRow`]): its
//! operator-free time (`free_ns`, the exposed collective wait already taken out) per step, the
//! median over the steps per rank, and the *least* over the ranks: what every rank spends there.
//! From the step marker down, the child that holds at least half of its parent's becomes the
//! place, as a late rank's excess is located. Time spread over the step (Python between
//! operators, no region holding half of it) stays unlocated: no finding. Data loading is
//! [`super::input_bound`]'s.
//!
//! **One block.** The Python between operators is many short gaps; on a CPU rank it adds up to a
//! tenth to a half of the step in `backward` or `forward` of healthy runs, so operator-free time
//! alone is judged only from a third of the step. A stall is one stretch: per occurrence the
//! longest operator-free gap with no collective of the rank in flight
//! (`RegionRow::longest_free_ns`: a host blocked on a transfer or on its peers is
//! communicating). Below the third, the place is found by descending on that block instead, and
//! a block every rank has of at least `shared_stall_block_ratio` of the step is a stall (on the
//! zoo's healthy runs the largest such block is 3% of the step).
//!
//! **Only CPU ranks.** On a GPU rank, host time with the device busy costs nothing, and the
//! device idle it causes is [`super::cpu_bound`]'s.
//!
//! **Gain.** Where the what-if replay holds, the replay's: the job replayed with every rank's
//! operator-free time in that region taken out of its own time
//! ([`crate::analyze::whatif::Scenario::without_region`]), against the replay as recorded.
//! Elsewhere, the least any rank spends there per step (the ranks meet at every collective, so
//! the step shortens by what the rank that loses least loses).

use super::prelude::*;

pub(super) static CAUSE: Cause = Cause {
    id: CauseId::SharedStall,
    finds: &[FindingId::HostStall],
    stage: Stage::SteadyState,
    explains: &[],
    part_of: None,
    excludes: &[],
    names_part: None,
    find,
};

/// Regions nested deeper than this are not descended into (real annotations nest a few levels).
const MAX_DEPTH: usize = 64;

fn find(cx: &Ctx<'_>, _found: &Found) -> Vec<Finding> {
    shared_stall(cx).into_iter().collect()
}

/// Per region (name, parent): per rank, a figure of the region in each judged step (0 in a step
/// it does not occur in).
type ByRegion<'a> = BTreeMap<(&'a str, &'a str), BTreeMap<u32, BTreeMap<u32, i64>>>;

fn shared_stall<'a>(cx: &Ctx<'a>) -> Option<Finding> {
    if !cx.cpu_only || cx.ranks.is_empty() || cx.all_steps.is_empty() {
        return None;
    }
    let steps: BTreeSet<u32> = cx.all_steps.iter().copied().collect();
    let mut free: ByRegion<'a> = BTreeMap::new();
    let mut block: ByRegion<'a> = BTreeMap::new();
    let mut phase_of: BTreeMap<(&'a str, &'a str), Phase> = BTreeMap::new();
    let mut step_len: BTreeMap<u32, Vec<i64>> = BTreeMap::new();
    for r in cx.a.regions.iter().filter(|r| steps.contains(&r.step)) {
        let key = (r.name.as_str(), r.parent.as_str());
        *free.entry(key).or_default().entry(r.rank).or_default().entry(r.step).or_default() += r.free_ns;
        let b = block.entry(key).or_default().entry(r.rank).or_default().entry(r.step).or_default();
        *b = (*b).max(r.longest_free_ns);
        phase_of.entry(key).or_insert(r.phase);
        if r.name == "ProfilerStep" && r.parent.is_empty() {
            step_len.entry(r.rank).or_default().push(r.inclusive_ns);
        }
    }
    // Per rank, its median over the steps of a region's figure (0 in a step it is absent from).
    let per_rank_in = |table: &ByRegion<'_>, key: (&str, &str)| -> Vec<f64> {
        let by_rank = table.get(&key);
        cx.ranks
            .iter()
            .map(|rank| {
                let per_step = by_rank.and_then(|m| m.get(rank));
                median_f(steps.iter().map(|s| per_step.and_then(|m| m.get(s)).copied().unwrap_or(0) as f64).collect())
            })
            .collect()
    };
    // What every rank spends in a region: the least of those medians.
    let every_rank_in =
        |table: &ByRegion<'_>, key: (&str, &str)| -> f64 { per_rank_in(table, key).into_iter().fold(f64::INFINITY, f64::min) };
    let step_ns = median_f(step_len.values().map(|v| median_f(v.iter().map(|&x| x as f64).collect())).collect());
    if step_ns <= 0.0 {
        return None;
    }
    // From the step marker down, the child holding at least half of its parent's figure.
    let descend = |table: &ByRegion<'a>| -> (Vec<(&'a str, &'a str)>, f64) {
        let mut path: Vec<(&str, &str)> = vec![("ProfilerStep", "")];
        let mut at = every_rank_in(table, path[0]);
        while path.len() < MAX_DEPTH {
            let parent = path.last().map_or("", |p| p.0);
            let best = table
                .keys()
                .filter(|k| k.1 == parent && k.0 != parent)
                .map(|&k| (k, every_rank_in(table, k)))
                .max_by(|a, b| a.1.total_cmp(&b.1));
            match best {
                Some((k, v)) if v >= 0.5 * at && v > 0.0 => {
                    path.push(k);
                    at = v;
                }
                _ => break,
            }
        }
        (path, at)
    };
    let named = |path: &[(&str, &str)]| {
        path.len() >= 2 && path.last().and_then(|p| phase_of.get(p)) != Some(&Phase::DataLoading)
    };
    // Operator-free time in one place on every rank is a stall when it is most of the step, or
    // when it comes as one block with no collective in flight (a sleep, a blocking write): the
    // Python between operators is many short gaps, and a few tenths of a step of it is what a
    // CPU rank looks like. The block is looked for where it is, not where the most free time is.
    let (spread_path, spread_at) = descend(&free);
    let (path, at, one_block, is_block) = if named(&spread_path) && spread_at / step_ns >= cx.th.shared_stall_ratio {
        let one_block = every_rank_in(&block, *spread_path.last()?);
        (spread_path, spread_at, one_block, false)
    } else {
        let (block_path, one_block) = descend(&block);
        if !named(&block_path) || one_block / step_ns < cx.th.shared_stall_block_ratio {
            return None;
        }
        let free_there = every_rank_in(&free, *block_path.last()?);
        (block_path, free_there.max(one_block), one_block, true)
    };
    let place = *path.last()?;
    let share = at / step_ns;
    let per_rank = per_rank_in(&free, place);
    let names: Vec<&str> = path.iter().skip(1).map(|p| p.0).collect();
    let where_words = match names.as_slice() {
        [.., parent, last] => format!("`{last}` inside `{parent}`"),
        [one] => format!("`{one}`"),
        [] => return None,
    };
    let phase = phase_of.get(&place).copied().unwrap_or(Phase::Other);
    // Said when the block is what found it and is not all of it.
    let block_words = if is_block && one_block < 0.9 * at {
        format!(", {} of it in one stretch with nothing running", dur(one_block))
    } else {
        String::new()
    };
    Some(Finding {
        id: FindingId::HostStall,
        severity: severity_for(at, cx.step_ns),
        message: format!(
            "Every rank stalls on the host in the same place: {} per step in {where_words} with no operator running and no collective to wait for{block_words}, on {} of {} ranks ({} of the step at least). Nobody is late (they all stall alike), so no rank is to blame and every step pays for it: without it the step would be about {} shorter (the least any rank spends there).",
            dur_range(per_rank),
            cx.ranks.len(),
            cx.ranks.len(),
            pct(share),
            dur(at)
        ),
        fix: format!(
            "Find what every rank does in {where_words} between operators: a sleep, blocking I/O (logging, a checkpoint or metrics written each step, file or network reads), a lock, garbage collection, Python work; move it out of the step, do it every N steps, or make it asynchronous (a background thread or process, `torch.distributed.checkpoint.async_save`)."
        ),
        ranks: cx.ranks.clone(),
        steps: cx.all_steps.clone(),
        evidence: Evidence::from([
            (K::StallNs, at),
            (K::LongestStallNs, one_block),
            (K::Fraction, share),
            (K::Threshold, if is_block { cx.th.shared_stall_block_ratio } else { cx.th.shared_stall_ratio }),
        ]),
        quotes: Vec::new(),
        quotes_total: 0,
        symptoms: Vec::new(),
        location: Some(Location {
            regions: path.iter().map(|p| p.0.to_string()).collect(),
            phase,
            rank_ns: at as i64,
            others_ns: at as i64,
            free_excess_ns: 0,
            ops_excess_ns: 0,
            sync_excess_ns: 0,
            device_excess_ns: 0,
        }),
        impact_ns: at as i64,
    })
}
