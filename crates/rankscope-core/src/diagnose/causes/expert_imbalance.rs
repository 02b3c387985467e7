//! `expert_imbalance`: in a group the layout reads as expert parallelism (all_to_all dispatch
//! and combine, [`crate::analyze::layout`]), one rank moves more through the all_to_alls than
//! the group's others — its experts get more tokens — and it is the rank the others wait for
//! (the late rank of [`super::late_rank`], or the origin of the chain of waits): the slowest
//! expert's rank stalls its whole group in the next all_to_all. The late rank's own finding
//! (more compute, a slower device, or a late rank it could not locate) is what the router's
//! skew does to it: this finding takes its place and its gain, and names the skew.
//!
//! Volume per rank: the bytes of its all_to_all calls in the group per step (the larger of its
//! input and output buffers, which for the hot rank is what it receives: the tokens routed to
//! its experts). A rank moving at least [`MIN_RATIO`] × the median of the group's others is hot.

use super::prelude::*;
use crate::analyze::layout::Role;

pub(super) static CAUSE: Cause = Cause {
    id: CauseId::ExpertImbalance,
    finds: &[FindingId::ExpertImbalance],
    stage: Stage::Waiting,
    explains: &[FindingId::ComputeImbalance, FindingId::SlowDevice, FindingId::Straggler],
    // Its ranks arrive late at every stage boundary: that wait is in a pipeline's bubble.
    part_of: Some(FindingId::PipelineBubble),
    excludes: &[],
    names_part: None,
    find,
};

/// A rank's all_to_all volume must be at least this many times its group's others' median.
pub const MIN_RATIO: f64 = 1.25;

fn find(cx: &Ctx<'_>, found: &Found) -> Vec<Finding> {
    let Some(layout) = cx.a.layout.as_ref() else { return Vec::new() };
    // The ranks the others wait for: the late rank's finding, and the chain's origins.
    let late = found.of(CauseId::LateRank).find(|f| {
        matches!(f.id, FindingId::ComputeImbalance | FindingId::SlowDevice | FindingId::Straggler)
    });
    let mut waited_for: BTreeSet<u32> = late.map(|f| f.ranks.iter().copied().collect()).unwrap_or_default();
    if let Some(c) = cx.a.wait_chain.as_ref() {
        waited_for.extend(c.origins.iter().copied());
    }
    let n_steps = cx.all_steps.len().max(1) as f64;
    for g in layout.groups.iter().filter(|g| g.role == Role::Expert) {
        // Per rank: the group's all_to_all bytes per step.
        let mut volume: BTreeMap<u32, f64> = BTreeMap::new();
        for o in cx.ops.iter().filter(|o| o.pg == g.name && o.kind == CollKind::AllToAll && !o.partial) {
            if !cx.per_step.contains_key(&o.step) {
                continue;
            }
            for (k, &r) in o.ranks.iter().enumerate() {
                let b = o.per_rank_bytes.get(k).copied().flatten().unwrap_or(0);
                *volume.entry(r).or_default() += b as f64 / n_steps;
            }
        }
        // The group's hot rank: the most volume, clear of the others.
        let Some((&late_rank, &hot)) = volume.iter().max_by(|a, b| a.1.total_cmp(b.1)) else { continue };
        if !waited_for.contains(&late_rank) {
            continue;
        }
        let others: Vec<f64> = volume.iter().filter(|(&r, _)| r != late_rank).map(|(_, &v)| v).collect();
        let median = median_f(others.clone());
        if others.is_empty() || median <= 0.0 || hot < MIN_RATIO * median {
            continue;
        }
        let late = late.filter(|f| f.ranks.contains(&late_rank));
        let ratio = hot / median;
        // The gain: what the group's other members wait for it per step (the chain's edges out
        // of it through the group), else the late finding's own claim.
        let through: Vec<f64> = cx
            .a
            .wait_chain
            .iter()
            .flat_map(|c| c.edges.iter())
            .filter(|e| e.from == late_rank && e.group == g.name)
            .map(|e| e.wait_ns as f64)
            .collect();
        let cost = match (late, through.is_empty()) {
            (Some(f), _) if f.ranks.len() == 1 => f.impact_ns as f64,
            (_, false) => median_f(through.clone()),
            (Some(f), true) => f.impact_ns as f64,
            (None, true) => continue,
        };
        let mut evidence = late.map(|f| f.evidence.clone()).unwrap_or_default();
        evidence.insert(K::ExpertVolumeRatio, ratio);
        let share = hot / volume.values().sum::<f64>().max(1.0);
        let mb = |b: f64| format!("{:.1} MiB", b / 1024.0 / 1024.0);
        let waited = if through.is_empty() {
            late.and_then(|f| {
                let lo = f.evidence.get(K::OthersExposedWaitNsMin)?;
                let hi = f.evidence.get(K::OthersExposedWaitNsMax)?;
                Some(format!(", and the other ranks each wait {} per step for it", dur_range(vec![lo, hi])))
            })
            .unwrap_or_default()
        } else {
            format!(", and the group's other ranks each wait {} per step for it there", dur_range(through.clone()))
        };
        let message = format!(
            "Rank {late_rank}'s experts get more tokens than the others': its all_to_alls in expert-parallel group `{}` move {} per step, {ratio:.2}× the median of the group's other ranks ({}; {} of the group's all_to_all volume), so it computes longest and arrives last at the next all_to_all{waited}.",
            g.name,
            mb(hot),
            mb(median),
            pct(share)
        );
        let fix = "Balance the router: a load-balancing auxiliary loss (or a larger coefficient for it), an expert capacity factor that drops or reroutes tokens beyond capacity, auxiliary-loss-free bias balancing, or token dropping; check the routing of the data (a skewed batch sends most tokens to a few experts). Where the skew is inherent, place the hot experts on several ranks (expert replication) or give them smaller shards. The other ranks need no tuning: their time in the all_to_all is waiting for this rank.".to_string();
        return vec![Finding {
            id: FindingId::ExpertImbalance,
            severity: severity_for(cost, cx.step_ns),
            message,
            fix,
            ranks: vec![late_rank],
            steps: late.map(|f| f.steps.clone()).unwrap_or_else(|| cx.all_steps.clone()),
            evidence,
            symptoms: {
                let mut s = vec![FindingId::Straggler];
                if let Some(f) = late {
                    if f.id != FindingId::Straggler {
                        s.push(f.id);
                    }
                }
                s
            },
            location: late.and_then(|f| f.location.clone()),
            impact_ns: cost as i64,
            quotes: Vec::new(),
            quotes_total: 0,
        }];
    }
    Vec::new()
}
