//! The first line: what changed and why, as an expert says it.
//!
//! 1. **Can we tell?** Not when a run has no timed step, holds several jobs (`errors`), or has
//!    too few steps for an interval of [`super::MIN_CONFIDENCE`].
//! 2. **Did the step change?** Its shift beyond noise ([`super::figures::beyond`]), else
//!    "no change beyond noise", with the interval.
//! 3. **Who?** The rank whose own time (wall − exposed wait) moved most in the step's
//!    direction: the others' waits follow it, so they are not causes.
//! 4. **Where on it?** Its top-level region (below the step marker) that moved most, then down
//!    the region tree while one child holds at least [`DESCEND`] of its parent's move. A region
//!    is the cause when it holds at least [`REGION_SHARE`] of the rank's move and of the
//!    breakdown figure (compute, input, idle, exposed transfer, host synchronization) that moved
//!    most, [`DESCEND`] when the region's change is made of that figure's time
//!    (`RegionDiff::made_of`: a sleep is idle time, a DataLoader input), else [`FIGURE_SHARE`];
//!    otherwise that figure is.
//! 5. **Where else?** The same region or figure on other ranks that moved at least half as much
//!    (then "ranks 0, 1 and 3's …" or "every rank's …"); the ranks whose exposed wait moved the
//!    same way ("which ranks … wait for"); and every other change beyond noise that is not a
//!    part of these ("also …", else "everything else within noise").
//! 6. **What inside it?** The few operators whose work explains at least half the step's
//!    change are said first, the cause after them ([`super::inside`]).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::figures::{is_top, path, Figure, FigureDiff, Presence, RegionDiff};
use super::inside::{self, Beside, OperatorCause};
use super::tables::CollectiveDiff;
use super::Comparison;
use crate::analyze::Analysis;
use crate::words;

/// A child region is followed when it holds this share of its parent's move.
pub const DESCEND: f64 = 0.6;
/// A region explains the rank's move when it holds this share of it.
pub const REGION_SHARE: f64 = 0.5;
/// ... and at least this share of the rank's largest breakdown figure's move.
pub const FIGURE_SHARE: f64 = 0.9;
/// Another change is named in the first line when it is at least this share of the cause's.
pub const MENTION: f64 = 0.25;
/// Another rank shares the cause when its move is at least this share of the origin's.
pub const SHARE_RANK: f64 = 0.5;

crate::named_enum! {
    /// Which way the step time went.
    pub enum Change {
        Slower => "slower",
        Faster => "faster",
        NoChange => "no_change",
        CannotTell => "cannot_tell",
    }
}

/// The verdict.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Verdict {
    pub change: Change,
    /// The first line of every output.
    pub line: String,
    /// What explains the step's change (absent with no change, or when nothing does).
    pub cause: Option<Cause>,
    /// The ranks whose wait for the others moved with the cause, and by how much (median).
    pub waiting_ranks: Vec<u32>,
    pub waiting_delta_ns: i64,
    /// Other changes beyond noise, largest first.
    pub also: Vec<Cause>,
    /// The operators whose work explains most of the step's change ([`super::inside`]), said
    /// in the line; empty when none does (added to `rankscope.diff/1` without a bump).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub operators: Vec<OperatorCause>,
    /// Why the runs cannot be compared (`cannot_tell`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

impl Default for Verdict {
    fn default() -> Self {
        Verdict {
            change: Change::CannotTell,
            line: String::new(),
            cause: None,
            waiting_ranks: Vec::new(),
            waiting_delta_ns: 0,
            also: Vec::new(),
            operators: Vec::new(),
            reason: None,
        }
    }
}

/// One change: a region (its path below the step) or a figure, on some ranks.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Cause {
    pub ranks: Vec<u32>,
    /// The region's path from the top of the step; empty for a figure.
    pub region: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub figure: Option<Figure>,
    /// For a region: whether both runs have it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub presence: Option<Presence>,
    /// The change per step on each rank listed, in the order of `ranks`.
    pub deltas_ns: Vec<i64>,
    /// Every rank of the job is listed.
    pub every_rank: bool,
    /// Per step on the rank that moved most (the origin for the cause), and its interval.
    pub delta_ns: i64,
    pub lo_ns: i64,
    pub hi_ns: i64,
}

/// An item that can change: a region (parent, name) or a figure.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
enum Item {
    Region(String, String),
    Figure(Figure),
}

struct Row<'a> {
    rank: u32,
    item: Item,
    delta: i64,
    lo: i64,
    hi: i64,
    beyond: bool,
    presence: Option<Presence>,
    region: Option<&'a RegionDiff>,
    /// For a region on a rank: the figure its change is made of.
    made_of: Option<Figure>,
}

fn rows<'a>(figs: &'a [FigureDiff], regs: &'a [RegionDiff]) -> Vec<Row<'a>> {
    let mut v: Vec<Row<'a>> = figs
        .iter()
        .filter_map(|f| {
            Some(Row {
                rank: f.rank?,
                item: Item::Figure(f.figure),
                delta: f.shift.delta_ns,
                lo: f.shift.lo_ns,
                hi: f.shift.hi_ns,
                beyond: f.beyond_noise,
                presence: None,
                region: None,
                made_of: None,
            })
        })
        .collect();
    v.extend(regs.iter().filter(|r| r.name != "ProfilerStep").filter_map(|r| {
        Some(Row {
            rank: r.rank?,
            item: Item::Region(r.parent.clone(), r.name.clone()),
            delta: r.shift.delta_ns,
            lo: r.shift.lo_ns,
            hi: r.shift.hi_ns,
            beyond: r.beyond_noise,
            presence: Some(r.presence),
            region: Some(r),
            made_of: r.made_of,
        })
    }));
    v
}

/// The verdict on a comparison whose tables are filled.
pub fn verdict(c: &Comparison, base: &Analysis, new: &Analysis) -> Verdict {
    let st = &c.step_time;
    let cannot = |reason: String| Verdict {
        line: format!("cannot compare: {reason}"),
        reason: Some(reason),
        ..Verdict::default()
    };
    for (which, a) in [("base", base), ("new", new)] {
        if !a.errors.is_empty() {
            return cannot(format!("the {which} input holds more than one job"));
        }
    }
    let Some(s) = st.shift else {
        return cannot("a run has no profiled step with a time".into());
    };
    if s.confidence + 1e-9 < super::MIN_CONFIDENCE {
        return cannot(format!(
            "too few steps to tell a change from noise ({} vs {} steps)",
            s.n_base, s.n_new
        ));
    }
    let head = step_words(c);
    let all = rows(&c.figures, &c.regions);
    let dir: i64 = if !st.beyond_noise {
        0
    } else if s.delta_ns > 0 {
        1
    } else {
        -1
    };
    if dir == 0 {
        let also = others(&all, None, &[], &c.regions);
        let mut line = format!("no change beyond noise: step time {head}");
        if let Some(a) = also.first() {
            line.push_str(&format!("; inside the step: {}", cause_words(a)));
        }
        line.push_str(&config_words(&c.config));
        line.push_str(&collective_words(&c.collectives));
        return Verdict { change: Change::NoChange, line, also, ..Verdict::default() };
    }
    let change = if dir > 0 { Change::Slower } else { Change::Faster };
    // 3. The origin: the rank whose own time moved most the step's way.
    let origin = all
        .iter()
        .filter(|r| r.item == Item::Figure(Figure::Active) && r.delta * dir > 0)
        .max_by_key(|r| (r.beyond, r.delta * dir, std::cmp::Reverse(r.rank)));
    let located = origin.and_then(|o| locate(&all, o, dir, &c.regions));
    let (cause, item) = match located {
        Some((c, i)) => (Some(c), Some(i)),
        None => (None, None),
    };
    // 6. Inside the step: the operators whose work explains it, said before their cause.
    let beside = match &cause {
        None => Beside::Nothing,
        Some(cz)
            if cz.figure == Some(Figure::Compute)
                || (cz.figure.is_none() && c_made_of(&all, cz, item.as_ref()) == Some(Figure::Compute)) =>
        {
            Beside::Compute
        }
        Some(cz) => Beside::Other(cz.delta_ns),
    };
    let ops = inside::named(c, base, new, beside);
    let mut v = Verdict { change, ..Verdict::default() };
    let mut line = format!("step time {head}");
    if let Some(cause) = &cause {
        match (ops.is_empty(), beside) {
            (true, _) => line.push_str(&format!(": {}", cause_words(cause))),
            (false, Beside::Compute) => {
                line.push_str(&format!(": {}, in {}", inside::words(&ops), cause_words(cause)))
            }
            (false, _) => line.push_str(&format!(": {}, with {}", inside::words(&ops), cause_words(cause))),
        }
        if cause.figure == Some(Figure::ExposedTransfer) {
            line.push_str(&bandwidth_words(&c.collectives));
        }
        let waits: Vec<&Row> = all
            .iter()
            .filter(|r| {
                r.item == Item::Figure(Figure::ExposedWait)
                    && r.beyond
                    && r.delta * dir > 0
                    && !cause.ranks.contains(&r.rank)
            })
            .collect();
        if !waits.is_empty() {
            v.waiting_ranks = waits.iter().map(|r| r.rank).collect();
            v.waiting_delta_ns = median(waits.iter().map(|r| r.delta).collect());
            let n = v.waiting_ranks.len();
            let every_other = n + cause.ranks.len() == rank_count(&all) && n > 1;
            let who = if every_other {
                "every other rank".to_string()
            } else if n == 1 {
                format!("rank {}", v.waiting_ranks[0])
            } else {
                format!("ranks {}", crate::words::rank_runs(&v.waiting_ranks))
            };
            // Slower: they wait for it now; faster: they waited for it before.
            let verb = match (dir > 0, n == 1 || every_other) {
                (true, true) => "waits",
                (true, false) => "wait",
                (false, _) => "waited",
            };
            line.push_str(&format!(", which {who} {verb} for ({} per step)", signed_dur(v.waiting_delta_ns)));
        }
        v.also = others(&all, Some((cause, item.as_ref())), &v.waiting_ranks, &c.regions);
    } else if !ops.is_empty() {
        line.push_str(&format!(": {}", inside::words(&ops)));
        v.also = others(&all, None, &[], &c.regions);
    } else {
        line.push_str(": no single rank, region or figure explains it");
        v.also = others(&all, None, &[], &c.regions);
    }
    // Another change is said in the line when it is at least [`MENTION`] of the cause's;
    // smaller ones are counted (every output lists them after the line).
    let scale = cause.as_ref().map_or(0, |c| c.delta_ns.abs());
    let big: Vec<&Cause> =
        v.also.iter().filter(|a| a.delta_ns.abs() as f64 >= MENTION * scale as f64).collect();
    match (big.first(), v.also.len()) {
        (None, 0) => line.push_str("; everything else within noise"),
        (None, n) => line
            .push_str(&format!("; {n} smaller {} beyond noise", if n == 1 { "change" } else { "changes" })),
        (Some(a), n) => {
            line.push_str(&format!("; also {}", cause_words(a)));
            if n > 1 {
                line.push_str(&format!(
                    " ({} more {} beyond noise)",
                    n - 1,
                    if n == 2 { "change" } else { "changes" }
                ));
            }
        }
    }
    line.push_str(&config_words(&c.config));
    line.push_str(&collective_words(&c.collectives));
    v.line = line;
    v.cause = cause;
    v.operators = ops;
    v
}

/// On the origin rank: the region down the tree that holds its move, else its figure.
fn locate(all: &[Row], origin: &Row, dir: i64, regs: &[RegionDiff]) -> Option<(Cause, Item)> {
    let rank = origin.rank;
    let on_rank = |r: &&Row| r.rank == rank && r.beyond && r.delta * dir > 0;
    let mut region: Option<&Row> = all
        .iter()
        .filter(on_rank)
        .filter(|r| matches!(&r.item, Item::Region(p, _) if is_top(p)))
        .max_by_key(|r| r.delta * dir);
    while let Some(cur) = region {
        let Item::Region(_, name) = &cur.item else { break };
        let child = all
            .iter()
            .filter(on_rank)
            .filter(|r| matches!(&r.item, Item::Region(p, _) if p == name))
            .filter(|r| (r.delta * dir) as f64 >= DESCEND * (cur.delta * dir) as f64)
            .max_by_key(|r| r.delta * dir);
        match child {
            Some(ch) => region = Some(ch),
            None => break,
        }
    }
    let own = (origin.delta * dir).max(1) as f64;
    let figure = all
        .iter()
        .filter(on_rank)
        .filter(|r| matches!(r.item, Item::Figure(f) if f.is_cause()))
        .max_by_key(|r| r.delta * dir);
    let fig_move = figure.map_or(0.0, |f| (f.delta * dir) as f64);
    // A region when it holds the rank's move and is where its largest figure's time went (its
    // change is made of that figure), or about as large: more work spread over forward and
    // backward is "compute", not the larger of the two; a DataLoader that grew beside more
    // compute is not the compute.
    let same_kind = |r: &Row| figure.is_some_and(|f| Some(f.item.clone()) == r.made_of.map(Item::Figure));
    let pick = match region {
        Some(r)
            if (r.delta * dir) as f64 >= REGION_SHARE * own
                && ((same_kind(r) && (r.delta * dir) as f64 >= DESCEND * fig_move)
                    || (r.delta * dir) as f64 >= FIGURE_SHARE * fig_move) =>
        {
            r
        }
        _ => figure.or(region)?,
    };
    // Where else the same item moved at least half as much.
    let mut ranks: Vec<u32> = all
        .iter()
        .filter(|r| {
            r.item == pick.item
                && r.beyond
                && (r.delta * dir) as f64 >= SHARE_RANK * (pick.delta * dir) as f64
        })
        .map(|r| r.rank)
        .collect();
    ranks.sort_unstable();
    let mut cause = to_cause(pick, ranks, regs, rank_count(all));
    cause.deltas_ns = all
        .iter()
        .filter(|r| r.item == pick.item && cause.ranks.contains(&r.rank))
        .map(|r| r.delta)
        .collect();
    Some((cause, pick.item.clone()))
}

fn to_cause(r: &Row, ranks: Vec<u32>, regs: &[RegionDiff], n_ranks: usize) -> Cause {
    let (region, figure) = match &r.item {
        Item::Region(p, n) => (path(regs, p, n), None),
        Item::Figure(f) => (Vec::new(), Some(*f)),
    };
    let every_rank = n_ranks > 1 && ranks.len() == n_ranks;
    Cause {
        deltas_ns: vec![r.delta],
        ranks,
        region,
        figure,
        presence: r.presence,
        every_rank,
        delta_ns: r.delta,
        lo_ns: r.lo,
        hi_ns: r.hi,
    }
}

/// Every change beyond noise that is not the cause, a part of it, or the waits it causes;
/// each item once with the ranks it moved on, largest first.
fn others(
    all: &[Row],
    cause: Option<(&Cause, Option<&Item>)>,
    waiting: &[u32],
    regs: &[RegionDiff],
) -> Vec<Cause> {
    let cands: Vec<&Row> = all
        .iter()
        .filter(|r| r.beyond)
        .filter(|r| match &r.item {
            Item::Figure(f) => f.is_cause(),
            Item::Region(..) => true,
        })
        .filter(|r| !(waiting.contains(&r.rank) && inherited(all, r)))
        .collect();
    // A region whose child holds most of its move is said by the child.
    let deepest = |r: &Row| match (&r.item, r.region) {
        (Item::Region(_, name), Some(_)) => !cands.iter().any(|c| {
            c.rank == r.rank
                && matches!(&c.item, Item::Region(p, _) if p == name)
                && c.delta.signum() == r.delta.signum()
                && c.delta.abs() as f64 >= DESCEND * r.delta.abs() as f64
        }),
        _ => true,
    };
    // On the cause's ranks: the cause itself, the regions around or inside it, and the time it
    // is made of seen as the other kind of row (the sleep as idle time, the compute as the
    // region that ran it), up to a quarter larger.
    let part_of_cause = |r: &Row| {
        cause.is_some_and(|(c, item)| {
            let same_time = r.delta.signum() == c.delta_ns.signum()
                && r.delta.abs() as f64 <= 1.25 * c.delta_ns.abs() as f64;
            let nested = match &r.item {
                Item::Region(p, n) => c.region.contains(n) || c.region.last() == Some(p),
                Item::Figure(_) => false,
            };
            let kind = match (&r.item, item) {
                (Item::Figure(f), Some(Item::Region(..))) => c_made_of(all, c, item) == Some(*f),
                (Item::Region(..), Some(Item::Figure(f))) => r.made_of == Some(*f),
                _ => false,
            };
            c.ranks.contains(&r.rank) && (item == Some(&r.item) || (same_time && (nested || kind)))
        })
    };
    let mut kept: Vec<&Row> = cands.iter().copied().filter(|r| deepest(r) && !part_of_cause(r)).collect();
    // The same time as a region and as the figure it is made of on its rank: said once, by the
    // region.
    let regions: Vec<(u32, i64, Option<Figure>)> = kept
        .iter()
        .filter(|r| matches!(r.item, Item::Region(..)))
        .map(|r| (r.rank, r.delta, r.made_of))
        .collect();
    kept.retain(|r| {
        let Item::Figure(f) = r.item else { return true };
        !regions.iter().any(|&(rank, d, made)| {
            rank == r.rank && made == Some(f) && d.signum() == r.delta.signum() && {
                let q = r.delta as f64 / d as f64;
                (0.6..=1.67).contains(&q)
            }
        })
    });
    let mut by_item: BTreeMap<Item, Vec<&Row>> = BTreeMap::new();
    for r in kept {
        by_item.entry(r.item.clone()).or_default().push(r);
    }
    let mut out: Vec<Cause> = Vec::new();
    for (_, mut rs) in by_item {
        rs.sort_by_key(|r| (std::cmp::Reverse(r.delta.abs()), r.rank));
        let Some(first) = rs.first() else { continue };
        // One sign per line: the larger side.
        let sign = first.delta.signum();
        let mut ranks: Vec<u32> = rs.iter().filter(|r| r.delta.signum() == sign).map(|r| r.rank).collect();
        ranks.sort_unstable();
        let mut c = to_cause(first, ranks, regs, rank_count(all));
        c.deltas_ns = rs.iter().filter(|r| c.ranks.contains(&r.rank)).map(|r| r.delta).collect();
        out.push(c);
    }
    out.sort_by_key(|c| (std::cmp::Reverse(c.delta_ns.abs()), c.ranks.clone()));
    out
}

fn rank_count(all: &[Row]) -> usize {
    let mut r: Vec<u32> = all.iter().map(|x| x.rank).collect();
    r.sort_unstable();
    r.dedup();
    r.len()
}

fn median(mut v: Vec<i64>) -> i64 {
    v.sort_unstable();
    v.get(v.len() / 2).copied().unwrap_or(0)
}

/// "; collectives: all_reduce 1-4 MiB ×19 per step new, all_reduce 16-64 MiB ×1 gone": the
/// collective classes (kind × group × size) only one run has, the most frequent two of each
/// side; empty when both runs have the same classes.
fn collective_words(colls: &[CollectiveDiff]) -> String {
    let mut said: Vec<(f64, String)> = Vec::new();
    for d in colls {
        let (side, tag) = match (&d.base, &d.new) {
            (None, Some(n)) => (n, "new"),
            (Some(b), None) => (b, "gone"),
            _ => continue,
        };
        said.push((
            side.calls_per_step,
            format!("{} {} ×{:.0} per step {tag}", d.kind.name(), d.size, side.calls_per_step),
        ));
    }
    if said.is_empty() {
        return String::new();
    }
    said.sort_by(|a, b| b.0.total_cmp(&a.0).then_with(|| a.1.cmp(&b.1)));
    let more = said.len().saturating_sub(3);
    let mut text = said.iter().take(3).map(|x| x.1.clone()).collect::<Vec<_>>().join(", ");
    if more > 0 {
        text.push_str(&format!(" and {more} more"));
    }
    format!("; collectives: {text}")
}

/// " (all_reduce 16-64 MiB at 78.1 → 19.6 GB/s bus bandwidth)": for a transfer that moved, the
/// collective class that takes the most time in both runs, when its bus bandwidth moved by more
/// than a tenth.
fn bandwidth_words(colls: &[CollectiveDiff]) -> String {
    let busiest = colls
        .iter()
        .filter_map(|d| {
            let (b, n) = (d.base.as_ref()?, d.new.as_ref()?);
            let (x, y) = (b.busbw_gbps?, n.busbw_gbps?);
            let weight = b.calls_per_step * b.dur_p50_ns as f64 + n.calls_per_step * n.dur_p50_ns as f64;
            (x > 0.0 && (y / x - 1.0).abs() > 0.1).then_some((weight, d, x, y))
        })
        .max_by(|a, b| a.0.total_cmp(&b.0));
    busiest.map_or(String::new(), |(_, d, x, y)| {
        format!(" ({} {} at {x:.1} → {y:.1} GB/s bus bandwidth)", d.kind.name(), d.size)
    })
}

/// "; configuration: world size 4 → 2": the facts of the job that say it is not the same
/// setup (world size, backend, devices, mesh); the rest is in the table.
fn config_words(config: &[super::ConfigDiff]) -> String {
    let said: Vec<String> = config
        .iter()
        .filter(|d| matches!(d.key.as_str(), "world_size" | "backend" | "devices" | "mesh"))
        .map(|d| format!("{} {} → {}", d.key.replace('_', " "), d.base, d.new))
        .collect();
    if said.is_empty() {
        String::new()
    } else {
        format!("; configuration: {}", said.join(", "))
    }
}

/// The figure the cause region's change is made of, on its first rank.
fn c_made_of(all: &[Row], c: &Cause, item: Option<&Item>) -> Option<Figure> {
    let first = c.ranks.first()?;
    all.iter().find(|r| r.rank == *first && Some(&r.item) == item).and_then(|r| r.made_of)
}

/// On a rank that waits for the cause, a figure that is its wait: idle time or host
/// synchronization (a GPU rank's host blocked on the collective) that moved the wait's way by
/// no more than its wait did.
fn inherited(all: &[Row], r: &Row) -> bool {
    let Item::Figure(f) = r.item else { return false };
    if f == Figure::ExposedWait {
        return true;
    }
    let wait = all
        .iter()
        .find(|x| x.rank == r.rank && x.item == Item::Figure(Figure::ExposedWait))
        .map_or(0, |x| x.delta);
    matches!(f, Figure::Idle | Figure::HostSync)
        && r.delta.signum() == wait.signum()
        && r.delta.abs() as f64 <= 1.25 * wait.abs() as f64
}

/// "+402 ms", "−12 ms".
pub fn signed_dur(ns: i64) -> String {
    let d = words::dur(ns.abs() as f64);
    if ns < 0 {
        format!("−{d}")
    } else {
        format!("+{d}")
    }
}

/// "+34%", "+2.1%", "−5%".
pub fn signed_pct(x: f64) -> String {
    let p = 100.0 * x;
    let body = if p.abs() >= 9.95 { format!("{:.0}%", p.abs()) } else { format!("{:.1}%", p.abs()) };
    if p < 0.0 {
        format!("−{body}")
    } else {
        format!("+{body}")
    }
}

/// "+34% (+303 ms per step; 97% CI +25…+42%; 4 vs 4 steps)".
fn step_words(c: &Comparison) -> String {
    let st = &c.step_time;
    let Some(s) = st.shift else { return String::new() };
    let (r, lo, hi) = (st.ratio.unwrap_or(0.0), st.ratio_lo.unwrap_or(0.0), st.ratio_hi.unwrap_or(0.0));
    format!(
        "{} ({} per step; {:.0}% CI {}…{}; {} vs {} steps)",
        signed_pct(r),
        signed_dur(s.delta_ns),
        (100.0 * s.confidence).floor(),
        signed_pct(lo),
        signed_pct(hi),
        s.n_base,
        s.n_new
    )
}

/// A region's name as a sentence says it: a DataLoader iteration as `DataLoader`.
fn short(name: &str) -> &str {
    if name.starts_with("enumerate(DataLoader)") {
        "DataLoader"
    } else {
        name
    }
}

/// "rank 2's forward > straggler_sleep +402 ms per step (new)".
pub fn cause_words(c: &Cause) -> String {
    let who = if c.every_rank {
        "every rank's".to_string()
    } else if c.ranks.len() == 1 {
        format!("rank {}'s", c.ranks[0])
    } else {
        format!("ranks {}'s", crate::words::rank_runs(&c.ranks))
    };
    let what = match c.figure {
        Some(f) => f.words().to_string(),
        None => c.region.iter().map(|n| short(n)).collect::<Vec<_>>().join(" > "),
    };
    let tag = match c.presence {
        Some(Presence::New) => " (new)",
        Some(Presence::Vanished) => " (gone)",
        _ => "",
    };
    let amount = if c.deltas_ns.len() > 1 {
        let sign = if c.delta_ns < 0 { "−" } else { "+" };
        format!("{sign}{}", words::dur_range(c.deltas_ns.iter().map(|d| d.abs() as f64).collect()))
    } else {
        signed_dur(c.delta_ns)
    };
    format!("{who} {what} {amount} per step{tag}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn signed_figures() {
        assert_eq!(signed_pct(0.341), "+34%");
        assert_eq!(signed_pct(-0.021), "−2.1%");
        assert_eq!(signed_dur(-12_000_000), "−12 ms");
    }
}
