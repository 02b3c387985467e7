//! `host_stall` on every rank: each CPU rank spends more than
//! [`crate::finding::Thresholds::shared_stall_ratio`] of its step in one region with no operator
//! running and no collective to wait for (a sleep, blocking I/O, a lock, a checkpoint or a log
//! written inside the step on every rank). A late rank's stall is found by comparing it with the
//! others ([`super::late_rank`]); a stall every rank has in the same place leaves nobody late and
//! nothing to compare, yet every step pays for it.
//!
//! **Where.** Per region (name and parent, [`crate::analyze::attribution::RegionRow`]): its
//! operator-free time (`free_ns`, the exposed collective wait already taken out) per step, the
//! median over the steps per rank, and the *least* over the ranks: what every rank spends there.
//! From the step marker down, the child that holds at least half of its parent's becomes the
//! place, as a late rank's excess is located. Time spread over the step (Python between
//! operators, no region holding half of it) stays unlocated: no finding. Data loading is
//! [`super::input_bound`]'s.
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

/// Per region (name, parent): per rank, the region's operator-free time in each judged step
/// (0 in a step it does not occur in).
type FreeByRegion<'a> = BTreeMap<(&'a str, &'a str), BTreeMap<u32, BTreeMap<u32, i64>>>;

fn shared_stall(cx: &Ctx<'_>) -> Option<Finding> {
    if !cx.cpu_only || cx.ranks.is_empty() || cx.all_steps.is_empty() {
        return None;
    }
    let steps: BTreeSet<u32> = cx.all_steps.iter().copied().collect();
    let mut free: FreeByRegion<'_> = BTreeMap::new();
    let mut phase_of: BTreeMap<(&str, &str), Phase> = BTreeMap::new();
    let mut step_len: BTreeMap<u32, Vec<i64>> = BTreeMap::new();
    for r in cx.a.regions.iter().filter(|r| steps.contains(&r.step)) {
        let key = (r.name.as_str(), r.parent.as_str());
        *free.entry(key).or_default().entry(r.rank).or_default().entry(r.step).or_default() += r.free_ns;
        phase_of.entry(key).or_insert(r.phase);
        if r.name == "ProfilerStep" && r.parent.is_empty() {
            step_len.entry(r.rank).or_default().push(r.inclusive_ns);
        }
    }
    // What every rank spends in a region: the least over the ranks of its median over steps.
    let every_rank = |key: (&str, &str)| -> f64 {
        let Some(by_rank) = free.get(&key) else { return 0.0 };
        cx.ranks
            .iter()
            .map(|rank| {
                let per_step = by_rank.get(rank);
                let v: Vec<f64> = steps
                    .iter()
                    .map(|s| per_step.and_then(|m| m.get(s)).copied().unwrap_or(0) as f64)
                    .collect();
                median_f(v)
            })
            .fold(f64::INFINITY, f64::min)
    };
    let step_ns = median_f(step_len.values().map(|v| median_f(v.iter().map(|&x| x as f64).collect())).collect());
    if step_ns <= 0.0 {
        return None;
    }
    let mut path: Vec<(&str, &str)> = vec![("ProfilerStep", "")];
    let mut at = every_rank(path[0]);
    while path.len() < MAX_DEPTH {
        let parent = path.last().map_or("", |p| p.0);
        let best = free
            .keys()
            .filter(|k| k.1 == parent && k.0 != parent)
            .map(|&k| (k, every_rank(k)))
            .max_by(|a, b| a.1.total_cmp(&b.1));
        match best {
            Some((k, v)) if v >= 0.5 * at && v > 0.0 => {
                path.push(k);
                at = v;
            }
            _ => break,
        }
    }
    let place = *path.last()?;
    if path.len() < 2 || phase_of.get(&place) == Some(&Phase::DataLoading) {
        return None;
    }
    let share = at / step_ns;
    if share < cx.th.shared_stall_ratio {
        return None;
    }
    let per_rank: Vec<f64> = cx
        .ranks
        .iter()
        .map(|rank| {
            let m = free.get(&place).and_then(|x| x.get(rank));
            median_f(steps.iter().map(|s| m.and_then(|m| m.get(s)).copied().unwrap_or(0) as f64).collect())
        })
        .collect();
    let names: Vec<&str> = path.iter().skip(1).map(|p| p.0).collect();
    let where_words = match names.as_slice() {
        [.., parent, last] => format!("`{last}` inside `{parent}`"),
        [one] => format!("`{one}`"),
        [] => return None,
    };
    let phase = phase_of.get(&place).copied().unwrap_or(Phase::Other);
    Some(Finding {
        id: FindingId::HostStall,
        severity: severity_for(at, cx.step_ns),
        message: format!(
            "Every rank stalls on the host in the same place: {} per step in {where_words} with no operator running and no collective to wait for, on {} of {} ranks ({} of the step at least). Nobody is late (they all stall alike), so no rank is to blame and every step pays for it: without it the step would be about {} shorter (the least any rank spends there).",
            dur_range(per_rank.clone()),
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
            (K::Fraction, share),
            (K::Threshold, cx.th.shared_stall_ratio),
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
