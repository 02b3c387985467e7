//! Clock alignment across ranks, estimated from the trace itself, one offset per clock.
//!
//! **Clocks.** Processes on one host read one system clock: Kineto writes CPU times from it
//! (and converts CUPTI's GPU times to it), so ranks on one host need no alignment between them
//! (on the zoo's one-host runs, trace step start − the rank's own `time.time_ns()` at it differs
//! across a step's ranks by a median of 8 µs). A rank's host is the trace's top-level
//! `host_name` (`hostname`), the only machine identity the traces carry; pids, device lists and
//! `distributedInfo` say nothing about the machine. Ranks that report the same host
//! (case-insensitive; `localhost` and the like tell machines apart no better than no name) form
//! one **clock group**; a rank without a host name is a group of its own, which is the
//! estimator of old for every rank when no trace names its host.
//!
//! The name is checked against the collectives before it is trusted: on one clock no rank can
//! leave a collective before another rank entered it (the collective cannot complete before
//! everybody arrived). A member whose collectives nearly all contradict that against the
//! group's lowest rank (its end more than [`CAUSALITY_SLACK_NS`] before the other's start, or
//! the other way round, in nine of ten of the collectives they share, three at least) and whose
//! ends differ from the lowest rank's by one amount that stands clear of their spread (ten
//! times their median absolute deviation: pairs that are not the same collective, as after a
//! rank skipped one or when collectives of two groups are paired, differ by anything) is taken
//! out of the group and aligned on its own, with a note: a host name that two machines share (a
//! container's default name) must not pin clocks that the data says differ, and a poor fit must
//! never move ranks that name one host apart. The check catches clocks that disagree by more
//! than a collective lasts; a smaller disagreement under one name goes unseen. Collectives are
//! matched within their process groups ([`super::layout`]) before any of this.
//!
//! **Offsets between clocks.** Every participant leaves a blocking collective at nearly the
//! same instant: the collective completes when the last rank arrives, plus the transfer. No
//! rank leaves before that instant, and some leave later (on gloo's CPU ring the last arriver
//! leaves 20–30 ms after the others), so a clock group's **first leaver** is its best reading
//! of the rendezvous. For a collective matched across groups, the difference of the first
//! leavers' ends in a group and in the reference group (the reference rank's) is the group's
//! clock offset plus noise (on the 8-rank DLRM set, ends agree within 1–7 µs while starts
//! differ by up to 7.6 ms). The estimate is the **median** of those differences over all
//! matched collectives (robust to outliers such as a mismatched pair); the residual is their
//! median absolute deviation after correction. In a hybrid-parallel job a host may share no
//! collective with the reference clock (its tensor groups inside it, its data-parallel peers on
//! another host): every pair of clocks that shared collectives gives a difference, and each
//! clock is placed through the chain of pairs with the most collectives from the reference (a
//! maximum spanning tree grown from it), its offset the sum along the chain; the note names the
//! clock it was placed through and the hops. Every rank of a group gets its group's offset:
//! the end skew between ranks of one host is the collective's, not their clocks'. A group of
//! one rank is the estimator rank by rank (its first leaver is itself).
//!
//! Methods, in order: `user` (`--offset RANK=NS`), `same_host` (the reference rank's clock
//! group: offset 0; `same_file` when the group is the ranks of one multi-rank file that no host
//! name places, [`crate::normalize::multirank`]), `collectives` (above), `step_starts` (median difference of the groups'
//! earliest `ProfilerStep#N` starts, which synchronous data parallel aligns closely),
//! `timestamps` (trust the file's clock: `baseTimeNanoseconds` / epoch µs). Pipeline stages
//! (ranks with point-to-point exchanges or stage annotations) never anchor step starts: they
//! start their steps apart by design. The reference rank (the lowest) has method `reference`. A
//! rank with a user offset is on a clock of its own (the user said so) and anchors nobody.
//!
//! Never correct what is right: an estimate within the noise (|estimate| ≤ max(3 × residual,
//! 10 µs)) is not applied; `offset_ns` is then 0 and the estimate is still reported.
//! Convention: aligned time = rank time − `offset_ns`.
//!
//! By concern: this module holds the alignment's figures, [`align`] and the notes; `clocks`
//! decides which ranks share a clock and chains the clocks to the reference through the
//! collectives they share.

mod clocks;

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::instances::{Instance, Matched};
use super::stats::lower_median;
use super::RankPart;

use clocks::{chain_clocks, clock_leads, clock_words, clocks_of, Clock, Doubt, Link};

/// The noise floor below which an estimated offset is not applied.
pub const MIN_APPLIED_OFFSET_NS: i64 = 10_000;

/// How far one rank's end of a collective may precede another rank's start of it before the
/// two are taken to read different clocks. Above the profiler's own conversion error between
/// processes of one host (tens of µs) and CUPTI's GPU-to-CPU time conversion.
pub const CAUSALITY_SLACK_NS: i64 = 1_000_000;

crate::named_enum! {
    /// How a rank's clock offset was found.
    pub enum AlignMethod {
        /// Given with `--offset`.
        User => "user",
        /// The reference rank (offset 0 by definition).
        Reference => "reference",
        /// On the reference rank's host, so on its clock (offset 0).
        SameHost => "same_host",
        /// In the reference rank's multi-rank file, which writes its ranks on one clock, and
        /// no host name says otherwise (offset 0).
        SameFile => "same_file",
        /// Collective end times matched with the reference rank's clock group.
        Collectives => "collectives",
        /// `ProfilerStep#N` starts matched with the reference rank's clock group.
        StepStarts => "step_starts",
        /// Nothing to match: the raw timestamps are taken as they are.
        Timestamps => "timestamps",
    }
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct RankAlignment {
    pub rank: u32,
    /// `reference`, `user`, `same_host`, `collectives`, `step_starts` or `timestamps`.
    pub method: AlignMethod,
    /// Applied offset: aligned time = rank time − offset.
    pub offset_ns: i64,
    /// The estimate before the noise test (equal to `offset_ns` when applied); of the rank's
    /// clock group, which every rank of the group shares.
    pub estimate_ns: i64,
    /// Median absolute deviation of the per-anchor differences around the estimate.
    pub residual_ns: i64,
    /// Largest absolute deviation.
    pub max_residual_ns: i64,
    /// Anchors used (matched collectives or common steps).
    pub anchors: usize,
    /// The lowest rank on this rank's clock: the ranks that report its host and agree with it
    /// (its own number when no other rank is known to share its clock).
    #[serde(default)]
    pub clock_group: u32,
    /// For a rank that shares its clock with others: the median difference of its own
    /// collective ends from the reference rank's, the estimator rank by rank. Not applied: on
    /// one clock it is the collective's end skew, not an offset. Null otherwise.
    #[serde(default)]
    pub rank_estimate_ns: Option<i64>,
    /// Why this method, in words.
    pub note: String,
}

/// A host name that tells machines apart, as a key: trimmed and lower-cased (host names are
/// case-insensitive); none for an empty name or one every machine has.
pub fn host_key(name: &str) -> Option<String> {
    let key = name.trim().to_ascii_lowercase();
    const GENERIC: [&str; 7] =
        ["", "localhost", "localhost.localdomain", "localhost6", "127.0.0.1", "::1", "(none)"];
    (!GENERIC.contains(&key.as_str()) && key != "unknown").then_some(key)
}

/// Aligns every rank to the reference (the lowest rank), one offset per clock (see the module
/// doc).
pub fn align(parts: &[RankPart], matched: &[Matched], user: &[(u32, i64)]) -> Vec<RankAlignment> {
    if parts.is_empty() {
        return Vec::new();
    }
    // The reference is the first part (the lowest rank): part index 0 below.
    // Parts by rank (the first part of a rank counts), and the first offset the user gave a rank.
    let mut index: BTreeMap<u32, usize> = BTreeMap::new();
    for (i, p) in parts.iter().enumerate() {
        index.entry(p.info.rank).or_insert(i);
    }
    let mut given: BTreeMap<u32, i64> = BTreeMap::new();
    for &(k, off) in user {
        given.entry(k).or_insert(off);
    }
    let places = places(matched, &index);

    let (lead, doubts) = clock_leads(parts, &places, &given);
    let clocks = clocks_of(parts, &lead);
    let rank_diffs = rank_diffs(parts.len(), &places);
    let chained = chain_clocks(&pair_diffs(&places, &lead));
    let step_firsts = step_firsts(parts, &lead);

    let ref_clock = clocks.iter().find(|c| c.members.first() == Some(&0));
    let estimates = clock_estimates(parts, &clocks, ref_clock, &chained, &step_firsts);

    let size: BTreeMap<usize, usize> =
        clocks.iter().filter_map(|c| Some((*c.members.first()?, c.members.len()))).collect();
    let doubt_of: BTreeMap<usize, Doubt> = doubts.iter().map(|d| (d.0, *d)).collect();
    parts
        .iter()
        .enumerate()
        .map(|(i, p)| {
            let rank = p.info.rank;
            let g = lead[i];
            let group = parts[g].info.rank;
            let shared = size.get(&g).is_some_and(|&n| n > 1);
            let own = (shared && i != 0 && !rank_diffs[i].is_empty())
                .then(|| lower_median(&mut rank_diffs[i].clone()));
            let mut row = if let Some(&off) = given.get(&rank) {
                fixed(rank, AlignMethod::User, off, "offset given by the user".into())
            } else if i == 0 {
                let note = match ref_clock.filter(|_| shared) {
                    Some(c) => format!("the reference clock (lowest rank), {}", clock_words(parts, c)),
                    None => "the reference clock (lowest rank)".into(),
                };
                fixed(rank, AlignMethod::Reference, 0, note)
            } else if g == 0 {
                let c_words = ref_clock.map(|c| clock_words(parts, c)).unwrap_or_default();
                let by_file = ref_clock.is_some_and(|c| c.host.as_deref().and_then(host_key).is_none());
                let method = if by_file { AlignMethod::SameFile } else { AlignMethod::SameHost };
                fixed(rank, method, 0, same_host_note(&c_words, own, &rank_diffs[i]))
            } else {
                let mut row = estimates.get(&g).cloned().unwrap_or_else(|| {
                    fixed(rank, AlignMethod::Timestamps, 0, "timestamps trusted as written".into())
                });
                row.rank = rank;
                row
            };
            row.clock_group = group;
            row.rank_estimate_ns = own;
            if let Some(&(_, l, bad, n)) = doubt_of.get(&i) {
                let host = p.info.host.as_deref().unwrap_or("?");
                row.note = format!(
                    "{}; host `{host}` is also rank {}'s, but in {bad} of the {n} collectives they share one leaves before the other enters (by more than {}): not one clock, aligned on its own",
                    row.note,
                    parts[l].info.rank,
                    human_ns(CAUSALITY_SLACK_NS)
                );
            }
            row
        })
        .collect()
}

/// Each collective on each of its ranks, by part index (`index`: part by rank; the first place
/// of a part counts). Every lookup is then by key, never by a scan of the collective's ranks:
/// alignment stays linear in the ranks.
fn places<'a>(matched: &'a [Matched], index: &BTreeMap<u32, usize>) -> Vec<BTreeMap<usize, &'a Instance>> {
    matched
        .iter()
        .map(|m| {
            let mut at = BTreeMap::new();
            for (r, x) in m.ranks.iter().zip(&m.per_rank) {
                if let Some(&i) = index.get(r) {
                    at.entry(i).or_insert(x);
                }
            }
            at
        })
        .collect()
}

/// Per part, its collective ends against the reference rank's (the estimator rank by rank).
fn rank_diffs(n_parts: usize, places: &[BTreeMap<usize, &Instance>]) -> Vec<Vec<i64>> {
    let mut rank_diffs: Vec<Vec<i64>> = vec![Vec::new(); n_parts];
    for at in places {
        let Some(a) = at.get(&0) else { continue };
        for (&i, x) in at {
            if i != 0 {
                rank_diffs[i].push(x.end_ns - a.end_ns);
            }
        }
    }
    rank_diffs
}

/// Per pair of clocks (by lead part, `lead`) that shared a collective, the first leavers' end
/// differences: a star from the lowest clock of each collective to the others (the reference
/// clock's when it is in it).
fn pair_diffs(places: &[BTreeMap<usize, &Instance>], lead: &[usize]) -> BTreeMap<(usize, usize), Vec<i64>> {
    // What a group of ranks on several hosts can tell; [`chain_clocks`] then makes a tree of the
    // best-anchored pairs from the reference clock: a host that shares collectives with the
    // reference only through another host (its tensor group on one host, its data-parallel
    // peers on a second, the reference on a third) is placed through it.
    let mut pair_diffs: BTreeMap<(usize, usize), Vec<i64>> = BTreeMap::new();
    for at in places {
        let mut first: BTreeMap<usize, i64> = BTreeMap::new();
        for (&i, x) in at {
            let end = x.end_ns;
            first.entry(lead[i]).and_modify(|e| *e = (*e).min(end)).or_insert(end);
        }
        // The reference clock's first leaver anchors every collective it is in.
        let Some((&a, &ea)) = first.get_key_value(&0).or_else(|| first.iter().next()) else { continue };
        for (&g, &end) in &first {
            if g != a {
                pair_diffs.entry((a, g)).or_default().push(end - ea);
            }
        }
    }
    pair_diffs
}

/// Per clock (by lead part), its earliest start of each step, from the ranks whose step starts
/// are anchors: pipeline stages start their steps apart by design (a stage waits for its
/// neighbour's activations; the optimizer runs when its own backward ends), synthetic steps are
/// ours.
fn step_firsts(parts: &[RankPart], lead: &[usize]) -> BTreeMap<usize, BTreeMap<u32, i64>> {
    let mut step_firsts: BTreeMap<usize, BTreeMap<u32, i64>> = BTreeMap::new();
    for (i, p) in parts.iter().enumerate() {
        if p.steps_synthetic || !p.pipe.steps.is_empty() {
            continue;
        }
        let at = step_firsts.entry(lead[i]).or_default();
        for &(n, start) in &p.step_starts {
            at.entry(n).and_modify(|s| *s = (*s).min(start)).or_insert(start);
        }
    }
    step_firsts
}

/// One estimate per clock other than the reference's (by lead part): from the chained
/// collective ends, else from common step starts, else none (timestamps trusted as written).
fn clock_estimates(
    parts: &[RankPart],
    clocks: &[Clock],
    ref_clock: Option<&Clock>,
    chained: &BTreeMap<usize, Link>,
    step_firsts: &BTreeMap<usize, BTreeMap<u32, i64>>,
) -> BTreeMap<usize, RankAlignment> {
    let ref_steps = step_firsts.get(&0).cloned().unwrap_or_default();
    let (ref_name, ref_end) = if ref_clock.is_some_and(|c| c.members.len() > 1) {
        ("the reference clock", "the reference clock's first leaver")
    } else {
        ("the reference rank", "the reference rank")
    };
    let mut estimates: BTreeMap<usize, RankAlignment> = BTreeMap::new();
    for c in clocks {
        let Some(&g) = c.members.first().filter(|&&g| g != 0) else { continue };
        let rank = parts[g].info.rank;
        // A clock of several ranks is named with its host; one rank alone reads as before.
        let whose = |what: &str| {
            if c.members.len() > 1 {
                format!("{}: {what}", clock_words(parts, c))
            } else {
                what.to_string()
            }
        };
        if let Some(link) = chained.get(&g) {
            let via = via_words(parts, clocks, link);
            let why = if c.members.len() > 1 {
                whose(&format!("its first leaver's collective end times matched with {ref_end}'s{via}"))
            } else {
                format!("collective end times matched with {ref_end}{via}")
            };
            let mut row = estimate(rank, AlignMethod::Collectives, link.diffs.clone(), &why);
            if link.base_ns != 0 {
                row.estimate_ns += link.base_ns;
                let noise = (3 * row.residual_ns).max(MIN_APPLIED_OFFSET_NS);
                row.offset_ns = if row.estimate_ns.abs() > noise { row.estimate_ns } else { 0 };
            }
            estimates.insert(g, row);
            continue;
        }
        let d: Vec<i64> = step_firsts
            .get(&g)
            .map(|s| s.iter().filter_map(|(n, &start)| Some(start - ref_steps.get(n)?)).collect())
            .unwrap_or_default();
        if !d.is_empty() {
            let why = whose(&format!("no collective matched with {}: step starts used as anchors", ref_name));
            estimates.insert(g, estimate(rank, AlignMethod::StepStarts, d, &why));
            continue;
        }
        let why = whose(&format!(
            "no collective or step in common with {}: timestamps trusted as written",
            ref_name
        ));
        estimates.insert(g, fixed(rank, AlignMethod::Timestamps, 0, why));
    }
    estimates
}

/// The words for the clock a chained estimate went through (`, through host `b` (2 hops)`);
/// empty for a clock linked to the reference directly.
fn via_words(parts: &[RankPart], clocks: &[Clock], link: &Link) -> String {
    match link.via {
        None => String::new(),
        Some(v) => format!(
            ", through {} ({} hop{})",
            clocks.iter().find(|c| c.members.first() == Some(&v)).map_or_else(
                || format!("rank {}", parts[v].info.rank),
                |c| if c.members.len() > 1 {
                    format!("host `{}`", c.host.as_deref().unwrap_or("?"))
                } else {
                    format!("rank {}", parts[v].info.rank)
                }
            ),
            link.hops,
            if link.hops == 1 { "" } else { "s" }
        ),
    }
}

fn same_host_note(clock: &str, own: Option<i64>, diffs: &[i64]) -> String {
    match own {
        Some(e) => format!(
            "{clock}, no offset applied; its collective ends differ from the reference rank's by {} (median of {}): the collective's end skew, not a clock offset",
            human_ns(e),
            diffs.len()
        ),
        None => format!("{clock}, no offset applied"),
    }
}

fn fixed(rank: u32, method: AlignMethod, off: i64, note: String) -> RankAlignment {
    RankAlignment {
        rank,
        method,
        offset_ns: off,
        estimate_ns: off,
        residual_ns: 0,
        max_residual_ns: 0,
        anchors: 0,
        clock_group: rank,
        rank_estimate_ns: None,
        note,
    }
}

fn estimate(rank: u32, method: AlignMethod, mut diffs: Vec<i64>, why: &str) -> RankAlignment {
    let est = lower_median(&mut diffs);
    let mut dev: Vec<i64> = diffs.iter().map(|d| (d - est).abs()).collect();
    let max_dev = dev.iter().copied().max().unwrap_or(0);
    let mad = lower_median(&mut dev);
    let noise = (3 * mad).max(MIN_APPLIED_OFFSET_NS);
    let applied = est.abs() > noise;
    RankAlignment {
        rank,
        method,
        offset_ns: if applied { est } else { 0 },
        estimate_ns: est,
        residual_ns: mad,
        max_residual_ns: max_dev,
        anchors: diffs.len(),
        clock_group: rank,
        rank_estimate_ns: None,
        note: if applied {
            format!("{why}; median of {} differences", diffs.len())
        } else {
            format!(
                "{why}; the estimate ({}) is within the noise (±{}): clocks taken as shared, not corrected",
                human_ns(est),
                human_ns(noise)
            )
        },
    }
}

/// Ranks for people: runs collapsed (`ranks 0-3, 6`), one rank as `rank 5`.
pub fn rank_list(ranks: &[u32]) -> String {
    let mut runs: Vec<(u32, u32)> = Vec::new();
    for &r in ranks {
        match runs.last_mut() {
            Some(last) if last.1.checked_add(1) == Some(r) => last.1 = r,
            _ => runs.push((r, r)),
        }
    }
    let text: Vec<String> =
        runs.iter().map(|&(a, b)| if a == b { a.to_string() } else { format!("{a}-{b}") }).collect();
    if ranks.len() == 1 {
        format!("rank {}", text.join(", "))
    } else {
        format!("ranks {}", text.join(", "))
    }
}

/// A duration for people: ns, µs or ms with three significant decimals.
fn human_ns(ns: i64) -> String {
    let a = ns.unsigned_abs();
    if a < 1_000 {
        format!("{ns} ns")
    } else if a < 1_000_000 {
        format!("{:.1} µs", ns as f64 / 1e3)
    } else {
        format!("{:.3} ms", ns as f64 / 1e6)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analyze::{breakdown::MetricsFrom, RankInfo, RankTotals};
    use crate::model::{CollKind, EventIdx};
    use crate::normalize::RankSource;

    fn part(rank: u32, host: Option<&str>) -> RankPart {
        RankPart {
            info: RankInfo {
                rank,
                source: format!("rank{rank}.json"),
                rank_source: RankSource::DistributedInfo,
                world_size: None,
                backend: None,
                events: 0,
                steps: Vec::new(),
                metrics_from: MetricsFrom::Cpu,
                devices: Vec::new(),
                host: host.map(str::to_string),
                clock: None,
                capture_gaps: Vec::new(),
            },
            world_size: None,
            instances: Vec::new(),
            steps: Vec::new(),
            step_starts: Vec::new(),
            steps_synthetic: false,
            totals: RankTotals::default(),
            gpu_idle: Vec::new(),
            launch: None,
            allocations: Vec::new(),
            memory: Vec::new(),
            chains: Vec::new(),
            segments: Vec::new(),
            comm_set: Vec::new(),
            overlap_set: Vec::new(),
            regions: Default::default(),
            issued: Vec::new(),
            pipe: Default::default(),
            operators: Default::default(),
            groups: Vec::new(),
            reading: Default::default(),
            programs: Vec::new(),
            work: None,
            diagnostics: Vec::new(),
        }
    }

    fn parts(hosts: &[Option<&str>]) -> Vec<RankPart> {
        hosts.iter().enumerate().map(|(r, h)| part(r as u32, *h)).collect()
    }

    /// One collective: (rank, start, end) on each rank's own clock.
    fn coll(key: i64, per: &[(u32, i64, i64)]) -> Matched {
        Matched {
            kind: CollKind::AllReduce,
            pg: String::new(),
            key,
            by_seq: false,
            ranks: per.iter().map(|x| x.0).collect(),
            per_rank: per
                .iter()
                .map(|&(_, start_ns, end_ns)| crate::analyze::instances::Instance {
                    event: EventIdx(key as u32),
                    kind: CollKind::AllReduce,
                    pg: String::new(),
                    seq: None,
                    start_ns,
                    end_ns,
                    step: 0,
                    bytes: None,
                    group_size: None,
                    issued_ns: start_ns,
                    lane: 0,
                    tid: None,
                    p2p: false,
                    peer: None,
                    peer_in_group: false,
                    tag: None,
                    batch: Vec::new(),
                    from_autograd: false,
                })
                .collect(),
        }
    }

    /// A data-parallel job on the true clock: 10 all_reduces 100 ms apart; rank r arrives
    /// (r + 1) ms before the rendezvous, `late` arrive last (50 µs before); everyone leaves 2 ms
    /// after it plus a few µs, the late ranks `skew` later (gloo's ring). Each rank reads its
    /// clock `clock[r]` ahead of the true one.
    fn job(clock: &[i64], late: &[u32], skew: i64) -> Vec<Matched> {
        (0..10)
            .map(|i| {
                let t = 1_000_000_000 + i * 100_000_000;
                let per: Vec<(u32, i64, i64)> = (0..clock.len() as u32)
                    .map(|r| {
                        let c = clock[r as usize];
                        let is_late = late.contains(&r);
                        let start = if is_late { t - 50_000 } else { t - (r as i64 + 1) * 1_000_000 };
                        let end =
                            t + 2_000_000 + (r as i64 * 7 + i) % 5 * 1_000 + if is_late { skew } else { 0 };
                        (r, start + c, end + c)
                    })
                    .collect();
                coll(i, &per)
            })
            .collect()
    }

    fn offsets(al: &[RankAlignment]) -> Vec<i64> {
        al.iter().map(|a| a.offset_ns).collect()
    }

    #[test]
    fn two_hosts_get_one_offset_each_whatever_the_end_skew_inside_them() {
        // Host b reads 5 ms ahead; rank 2 (on a) and rank 6 (on b) leave every collective 20 ms
        // after the others.
        let b = 5_000_000;
        let clock = [0, 0, 0, 0, b, b, b, b];
        let m = job(&clock, &[2, 6], 20_000_000);
        let p =
            parts(&[Some("a"), Some("a"), Some("a"), Some("a"), Some("b"), Some("B"), Some("b "), Some("b")]);
        let al = align(&p, &m, &[]);
        assert_eq!(al.iter().map(|a| a.clock_group).collect::<Vec<_>>(), [0, 0, 0, 0, 4, 4, 4, 4]);
        assert_eq!(al[0].method, AlignMethod::Reference);
        for a in &al[1..4] {
            assert_eq!((a.method, a.offset_ns), (AlignMethod::SameHost, 0), "{a:?}");
        }
        for a in &al[4..] {
            assert_eq!(a.method, AlignMethod::Collectives, "{a:?}");
            assert!((a.offset_ns - b).abs() <= 10_000, "{a:?}");
            assert_eq!((a.estimate_ns, a.anchors), (al[4].estimate_ns, 10), "{a:?}");
        }
        // The rank-by-rank estimate took the late ranks' end skew for clock offsets.
        let own: Vec<i64> =
            al.iter().map(|a| (a.rank_estimate_ns.unwrap_or(0) as f64 / 1e6).round() as i64).collect();
        assert_eq!(own, [0, 0, 20, 0, 5, 5, 25, 5]);
        assert!(al[2].note.contains("end skew, not a clock offset"), "{}", al[2].note);
        assert!(al[5].note.contains("host `b`: one clock for ranks 4-7"), "{}", al[5].note);
    }

    #[test]
    fn one_host_gets_no_offset_and_says_why() {
        // The zoo's case: rank 3 leaves every collective 16 ms after the others, on one clock.
        let m = job(&[0; 4], &[3], 16_000_000);
        let al = align(&parts(&[Some("vm"); 4]), &m, &[]);
        assert_eq!(offsets(&al), [0, 0, 0, 0]);
        assert_eq!(al[3].method, AlignMethod::SameHost);
        assert_eq!(al[3].rank_estimate_ns.map(|e| e / 1_000_000), Some(16));
        assert!(al[0].note.contains("host `vm`: one clock for ranks 0-3"), "{}", al[0].note);
        assert!(al[3].note.contains("no offset applied"), "{}", al[3].note);
        assert!(al.iter().all(|a| a.clock_group == 0));
    }

    #[test]
    fn unknown_hosts_are_aligned_rank_by_rank_as_before() {
        let m = job(&[0; 4], &[3], 16_000_000);
        for hosts in [[None; 4], [Some("localhost"); 4], [Some(" "); 4]] {
            let al = align(&parts(&hosts), &m, &[]);
            assert_eq!(al[3].method, AlignMethod::Collectives);
            assert_eq!(al[3].offset_ns / 1_000_000, 16, "{:?}", al[3]);
            assert_eq!(al.iter().map(|a| a.clock_group).collect::<Vec<_>>(), [0, 1, 2, 3]);
            assert!(al.iter().all(|a| a.rank_estimate_ns.is_none()));
            assert_eq!(
                al[3].note,
                "collective end times matched with the reference rank; median of 10 differences"
            );
        }
    }

    #[test]
    fn unknown_hosts_beside_known_ones_keep_their_own_clocks() {
        // Ranks 0 and 1 on host a; ranks 2 and 3 say nothing; rank 2 reads 3 ms ahead, and rank
        // 0 leaves 10 ms late: the reference clock's first leaver is rank 1.
        let m = job(&[0, 0, 3_000_000, 0], &[0], 10_000_000);
        let al = align(&parts(&[Some("a"), Some("a"), None, None]), &m, &[]);
        assert_eq!(al[1].method, AlignMethod::SameHost);
        assert_eq!(al.iter().map(|a| a.clock_group).collect::<Vec<_>>(), [0, 0, 2, 3]);
        assert!((al[2].offset_ns - 3_000_000).abs() <= 10_000, "{:?}", al[2]);
        assert_eq!(al[3].offset_ns, 0, "{:?}", al[3]);
        assert!(al[2].note.contains("the reference clock's first leaver"), "{}", al[2].note);
    }

    #[test]
    fn a_host_name_the_collectives_contradict_is_not_one_clock() {
        // Rank 3 says host vm too, but its clock is a second ahead: it would leave every
        // collective before the others entered it.
        let m = job(&[0, 0, 0, 1_000_000_000], &[], 0);
        let al = align(&parts(&[Some("vm"); 4]), &m, &[]);
        assert_eq!(al.iter().map(|a| a.clock_group).collect::<Vec<_>>(), [0, 0, 0, 3]);
        assert_eq!(al[3].method, AlignMethod::Collectives);
        assert!((al[3].offset_ns - 1_000_000_000).abs() <= 10_000, "{:?}", al[3]);
        assert!(al[3].note.contains("not one clock"), "{}", al[3].note);
        assert_eq!(offsets(&al[..3]), [0, 0, 0]);
    }

    #[test]
    fn a_user_offset_takes_a_rank_off_its_host_clock() {
        let m = job(&[0, 0, 0, 0], &[], 0);
        let al = align(&parts(&[Some("vm"); 4]), &m, &[(2, 7_000)]);
        assert_eq!((al[2].method, al[2].offset_ns, al[2].clock_group), (AlignMethod::User, 7_000, 2));
        assert_eq!(al[3].method, AlignMethod::SameHost);
    }

    #[test]
    fn step_starts_anchor_one_offset_per_host_without_collectives() {
        let b = 2_000_000;
        let mut p = parts(&[Some("a"), Some("a"), Some("b"), Some("b")]);
        for (r, x) in p.iter_mut().enumerate() {
            let c = if r >= 2 { b } else { 0 };
            // Each rank starts its steps a little apart; the first starter of each host counts.
            x.step_starts = (1..5u32).map(|n| (n, n as i64 * 500_000_000 + r as i64 * 300_000 + c)).collect();
        }
        let al = align(&p, &[], &[]);
        assert_eq!(al[1].method, AlignMethod::SameHost);
        for a in &al[2..] {
            assert_eq!(a.method, AlignMethod::StepStarts, "{a:?}");
            // Host b's first starter (rank 2) against host a's (rank 0).
            assert_eq!(a.offset_ns, b + 600_000, "{a:?}");
        }
    }

    #[test]
    fn rank_lists_collapse_runs() {
        assert_eq!(rank_list(&[0, 1, 2, 3]), "ranks 0-3");
        assert_eq!(rank_list(&[0, 2, 3, 7]), "ranks 0, 2-3, 7");
        assert_eq!(rank_list(&[5]), "rank 5");
    }
}
