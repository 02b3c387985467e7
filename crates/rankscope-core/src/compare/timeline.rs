//! Both runs' timelines of one step, one above the other (issue 36, the app's Compare view).
//!
//! A baseline is an analysis, never events: what both runs carry per rank and step is the step's
//! window (`StepEntry`, rank clock, placed on the job's clock by the rank's alignment offset), its
//! time by kind (the breakdown: compute, memory, exposed transfer, exposed wait for a peer, idle
//! while loading data, other idle; they add up to the step's wall time) and the collectives it
//! issued by origin (`comm_origins`: kind, count, bytes, region, exposed transfer and wait). So a
//! rank's row here starts where the rank's step started on the job's aligned clock, relative to
//! the job's step start (a late rank starts late), and lays its time out **by kind in a fixed
//! order** ([`SpanKind::ALL`]): the lengths are measured, the order within the step is not (no
//! event is kept). Exposed transfer and wait are split by the collectives they were spent in.
//!
//! **Many ranks fold.** Ranks whose rows agree (start and each kind's time within a tolerance)
//! share one row, drawn as its median member; the tolerance starts at 1/64 of the scale and
//! doubles until a run has at most [`MAX_ROWS`] rows. The ranks the comparison names (the
//! verdict's cause and waiting ranks, the step's late ranks) keep rows of their own.

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};

use crate::analyze::attribution::OriginRow;
use crate::analyze::breakdown::StepRank;
use crate::analyze::layout::{Group, Layout, Role};
use crate::analyze::Analysis;
use crate::model::CollKind;

use super::Verdict;

/// Most rows drawn per run (named ranks included).
pub const MAX_ROWS: usize = 24;
/// Most named ranks given rows of their own per run.
pub const MAX_NAMED: usize = 8;
/// Most collectives named per kind of span (exposed transfer, wait) in a row; the rest is one
/// span without a collective.
pub const MAX_COLLECTIVES: usize = 3;

crate::named_enum! {
    /// What a rank did during a span of its step; the declaration order is the drawing order.
    pub enum SpanKind {
        /// Idle while the host loaded data (the breakdown's `input_ns`).
        DataLoading => "data_loading",
        Compute => "compute",
        /// Copies and sets not under compute or communication.
        Memory => "memory",
        /// Communication moving data, not under compute.
        Transfer => "exposed_transfer",
        /// Communication waiting for a peer, not under compute.
        Wait => "wait",
        /// Idle for any other reason (launches, the host, the rest).
        Idle => "idle",
    }
}

impl SpanKind {
    /// In words, for a label.
    pub fn words(self) -> &'static str {
        match self {
            SpanKind::DataLoading => "data loading",
            SpanKind::Compute => "compute",
            SpanKind::Memory => "memory",
            SpanKind::Transfer => "exposed transfer",
            SpanKind::Wait => "wait for a peer",
            SpanKind::Idle => "idle",
        }
    }
}

/// The collectives a transfer or wait span was spent in (one origin row of the rank's step).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct SpanCollective {
    pub kind: CollKind,
    pub count: u32,
    pub bytes: i64,
    /// The region they were issued from (empty outside any annotation).
    pub region: String,
    /// The process group they ran on, from the run's parallel layout ([`group_of`]); absent
    /// when the analysis cannot say which.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub group: Option<SpanGroup>,
}

/// A process group of the run's layout, as a span names it.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct SpanGroup {
    /// The group's name in the traces (`"0"`, `"mesh_tp"`).
    pub name: String,
    pub role: Role,
    /// Its members.
    pub size: u32,
}

impl SpanGroup {
    /// "tensor-parallel group mesh_tp (2 ranks)".
    pub fn words(&self) -> String {
        format!(
            "{} group {} ({} rank{})",
            self.role.adjective(),
            self.name,
            self.size,
            if self.size == 1 { "" } else { "s" }
        )
    }
}

/// The group an origin row's collectives ran on, in the run's `layout`: the row's own group when
/// the analysis recorded one (`OriginRow::pg`, analyses since the field exists); else (an older
/// saved analysis or digest, or a row of several groups' collectives) the one group that holds
/// the rank and ran collectives of the row's kind by `ran` (the run's collectives table, kind and
/// group); none when several do (a Megatron rank all-reduces in its tensor and its
/// data-parallel group).
pub fn group_of(layout: &Layout, ran: &[(CollKind, &str)], o: &OriginRow) -> Option<SpanGroup> {
    let of = |g: &Group| SpanGroup { name: g.name.clone(), role: g.role, size: g.ranks.len() as u32 };
    if !o.pg.is_empty() {
        return layout.group(&o.pg).map(of);
    }
    let mut fits = layout
        .groups
        .iter()
        .filter(|g| g.ranks.contains(&o.rank) && ran.iter().any(|&(k, pg)| k == o.kind && pg == g.name));
    match (fits.next(), fits.next()) {
        (Some(g), None) => Some(of(g)),
        _ => None,
    }
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Span {
    pub kind: SpanKind,
    /// From the job's step start (aligned clock).
    pub start_ns: i64,
    pub dur_ns: i64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub collective: Option<SpanCollective>,
}

/// One drawn row: one rank, or ranks folded together and drawn as one of them.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Row {
    /// The ranks it stands for, ascending.
    pub ranks: Vec<u32>,
    /// The rank drawn.
    pub drawn: u32,
    /// Named by the comparison (the verdict, the step's late ranks).
    pub named: bool,
    /// "rank 3", "ranks 0–2, 4 (4 alike; rank 1 drawn)".
    pub label: String,
    /// The drawn rank's step start and end from the job's step start.
    pub start_ns: i64,
    pub end_ns: i64,
    pub spans: Vec<Span>,
}

/// One run's chosen step.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct RunStep {
    /// Its position among the run's steps, and its number.
    pub index: usize,
    pub step: u32,
    /// The job's step time (the longest rank's wall, as `figures::step_times`).
    pub step_ns: i64,
    /// The ranks in it.
    pub ranks: usize,
    /// The tolerance the rows were folded with (0: not folded).
    pub tolerance_ns: i64,
    pub rows: Vec<Row>,
}

/// Which step to show.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Pick {
    /// In each run the step whose time is nearest the run's median.
    #[default]
    Typical,
    /// The same position in both runs (0-based, of the steps both have).
    Index(usize),
}

/// Both runs' chosen step.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Timelines {
    /// The positions both runs have.
    pub common: usize,
    pub base: Option<RunStep>,
    pub new: Option<RunStep>,
    /// The one time scale of both: the latest row end.
    pub scale_ns: i64,
}

impl Timelines {
    /// The new step's time minus the base's.
    pub fn delta_ns(&self) -> Option<i64> {
        Some(self.new.as_ref()?.step_ns - self.base.as_ref()?.step_ns)
    }
}

/// The steps of a run with ranks in them, in step order.
fn steps(a: &Analysis) -> Vec<&crate::analyze::StepEntry> {
    let mut v: Vec<_> = a.steps.iter().filter(|s| !s.per_rank.is_empty()).collect();
    v.sort_by_key(|s| s.step);
    v
}

/// The numbers of a run's steps with ranks in them, in step order: position `i` of a
/// [`Pick::Index`] is the `i`-th of them.
pub fn step_numbers(a: &Analysis) -> Vec<u32> {
    steps(a).iter().map(|s| s.step).collect()
}

fn step_time(s: &crate::analyze::StepEntry) -> i64 {
    s.per_rank.iter().map(|r| r.wall_ns).max().unwrap_or(0)
}

/// The position of the step whose time is nearest the run's median (the earlier on a tie).
pub fn typical_index(times: &[i64]) -> Option<usize> {
    if times.is_empty() {
        return None;
    }
    let median = crate::analyze::stats::median(times.to_vec());
    (0..times.len()).min_by_key(|&i| (times[i] - median).unsigned_abs())
}

/// Both runs' step at `pick`, the ranks the verdict names given rows of their own.
pub fn timelines(base: &Analysis, new: &Analysis, verdict: &Verdict, pick: Pick) -> Timelines {
    let (sb, sn) = (steps(base), steps(new));
    let common = sb.len().min(sn.len());
    let index = |s: &[&crate::analyze::StepEntry]| match pick {
        Pick::Typical => typical_index(&s.iter().map(|e| step_time(e)).collect::<Vec<_>>()),
        Pick::Index(i) => (i < common).then_some(i),
    };
    // The ranks given rows of their own, in order: the cause's, then (per run) the step's late
    // ranks, then the ranks waiting for them (a 1,024-rank job's 1,023 waiting ranks must not
    // crowd out the one they wait for).
    let cause: Vec<u32> = verdict.cause.iter().flat_map(|c| c.ranks.iter().copied()).collect();
    let laid_b = index(&sb).map(|i| (i, lay_out(base, sb[i])));
    let laid_n = index(&sn).map(|i| (i, lay_out(new, sn[i])));
    let scale_ns =
        laid_b.iter().chain(&laid_n).flat_map(|(_, l)| l.iter().map(|r| r.end_ns)).max().unwrap_or(0).max(1);
    let run = |a: &Analysis, s: &[&crate::analyze::StepEntry], laid: Option<(usize, Vec<Laid>)>| {
        let (index, laid) = laid?;
        let e = s[index];
        let late = a.waits.iter().find(|w| w.step == e.step).map_or(&[][..], |w| w.late.as_slice());
        let mut seen = BTreeSet::new();
        let names: Vec<u32> = cause
            .iter()
            .chain(late)
            .chain(&verdict.waiting_ranks)
            .copied()
            .filter(|r| seen.insert(*r))
            .collect();
        let (rows, tolerance_ns) = fold(laid, &names, scale_ns);
        Some(RunStep {
            index,
            step: e.step,
            step_ns: step_time(e),
            ranks: e.per_rank.len(),
            tolerance_ns,
            rows,
        })
    };
    Timelines { common, base: run(base, &sb, laid_b), new: run(new, &sn, laid_n), scale_ns }
}

/// One rank's step laid out.
#[derive(Debug, Clone, PartialEq)]
pub struct Laid {
    pub rank: u32,
    pub start_ns: i64,
    pub end_ns: i64,
    pub spans: Vec<Span>,
}

impl Laid {
    /// The start and each kind's time: what folding compares.
    fn shape(&self) -> [i64; 1 + 6] {
        let mut v = [0; 7];
        v[0] = self.start_ns;
        for s in &self.spans {
            v[1 + s.kind as usize] += s.dur_ns;
        }
        v
    }
}

/// Every rank of a step laid out, from the job's step start (the earliest aligned start).
fn lay_out(a: &Analysis, e: &crate::analyze::StepEntry) -> Vec<Laid> {
    let offset: BTreeMap<u32, i64> = a.alignment.iter().map(|x| (x.rank, x.offset_ns)).collect();
    let aligned = |r: &StepRank| r.start_ns - offset.get(&r.rank).copied().unwrap_or(0);
    let t0 = e.per_rank.iter().map(aligned).min().unwrap_or(0);
    let mut origins: BTreeMap<u32, Vec<&OriginRow>> = BTreeMap::new();
    for o in a.comm_origins.iter().filter(|o| o.step == e.step) {
        origins.entry(o.rank).or_default().push(o);
    }
    let ran: Vec<(CollKind, &str)> = a.collectives.iter().map(|c| (c.kind, c.pg.as_str())).collect();
    let group = |o: &OriginRow| a.layout.as_ref().and_then(|l| group_of(l, &ran, o));
    let mut v: Vec<Laid> = e
        .per_rank
        .iter()
        .map(|r| {
            let start = aligned(r) - t0;
            let spans = spans(r, origins.get(&r.rank).map_or(&[][..], |v| &v[..]), start, &group);
            Laid { rank: r.rank, start_ns: start, end_ns: start + r.wall_ns.max(0), spans }
        })
        .collect();
    v.sort_by_key(|l| l.rank);
    v.dedup_by_key(|l| l.rank);
    v
}

/// A rank's step by kind, from `start`: the breakdown's figures, which add up to its wall time;
/// exposed transfer and wait split by the collectives of `origins` (the rank's rows of the step),
/// each named with its process group by `group`.
pub fn spans(
    r: &StepRank,
    origins: &[&OriginRow],
    start: i64,
    group: &dyn Fn(&OriginRow) -> Option<SpanGroup>,
) -> Vec<Span> {
    let exposed = r.exposed_transfer_ns.max(0) + r.exposed_wait_ns.max(0);
    // Exposed communication not split into transfer and wait (a job without matched
    // collectives) is all transfer.
    let transfer = r.exposed_transfer_ns.max(0) + (r.exposed_comm_ns.max(0) - exposed).max(0);
    let input = r.input_ns.clamp(0, r.idle_ns.max(0));
    let parts = [
        (SpanKind::DataLoading, input),
        (SpanKind::Compute, r.compute_ns.max(0)),
        (SpanKind::Memory, (r.busy_ns - r.compute_ns - r.exposed_comm_ns).max(0)),
        (SpanKind::Transfer, transfer),
        (SpanKind::Wait, r.exposed_wait_ns.max(0)),
        (SpanKind::Idle, (r.idle_ns - input).max(0)),
    ];
    let mut out = Vec::new();
    let mut t = start;
    for (kind, dur) in parts {
        if dur <= 0 {
            continue;
        }
        let of = |o: &OriginRow| match kind {
            SpanKind::Transfer => o.exposed_transfer_ns,
            SpanKind::Wait => o.exposed_wait_ns,
            _ => 0,
        };
        let mut named: Vec<(&OriginRow, i64)> =
            origins.iter().map(|o| (*o, of(o))).filter(|(_, d)| *d > 0).collect();
        named.sort_by_key(|(o, d)| (std::cmp::Reverse(*d), o.kind, o.region.clone()));
        named.truncate(MAX_COLLECTIVES);
        let mut left = dur;
        for (o, d) in named {
            let d = d.min(left);
            if d <= 0 {
                break;
            }
            let collective = SpanCollective {
                kind: o.kind,
                count: o.count,
                bytes: o.bytes_total,
                region: o.region.clone(),
                group: group(o),
            };
            out.push(Span { kind, start_ns: t, dur_ns: d, collective: Some(collective) });
            t += d;
            left -= d;
        }
        if left > 0 {
            out.push(Span { kind, start_ns: t, dur_ns: left, collective: None });
            t += left;
        }
    }
    out
}

/// Ranks in words: "rank 3", "ranks 0–2, 5".
pub fn rank_words(ranks: &[u32]) -> String {
    let mut runs: Vec<(u32, u32)> = Vec::new();
    for &r in ranks {
        match runs.last_mut() {
            Some((_, hi)) if r == *hi + 1 => *hi = r,
            _ => runs.push((r, r)),
        }
    }
    let list: Vec<String> =
        runs.iter().map(|&(a, b)| if a == b { a.to_string() } else { format!("{a}–{b}") }).collect();
    let shown = if list.len() > 4 { format!("{}, …", list[..4].join(", ")) } else { list.join(", ") };
    if ranks.len() == 1 {
        format!("rank {shown}")
    } else {
        format!("ranks {shown}")
    }
}

/// The rows of `laid`: the ranks of `named` alone (the first [`MAX_NAMED`] of them in `laid`, in
/// `named`'s order of priority), the others folded
/// where their shapes agree within a tolerance that doubles from `scale / 64` until at most
/// [`MAX_ROWS`] rows remain. Rows in the order of their first rank; the tolerance used (0 when
/// every rank has its row).
pub fn fold(laid: Vec<Laid>, named: &[u32], scale_ns: i64) -> (Vec<Row>, i64) {
    let present: BTreeSet<u32> = laid.iter().map(|l| l.rank).collect();
    let keep: BTreeSet<u32> = named.iter().copied().filter(|r| present.contains(r)).take(MAX_NAMED).collect();
    let (alone, rest): (Vec<Laid>, Vec<Laid>) = laid.into_iter().partition(|l| keep.contains(&l.rank));
    let rest: Vec<Laid> = {
        let mut r = rest;
        r.sort_by_key(|l| l.rank);
        r
    };
    let mut rows: Vec<Row> = alone.into_iter().map(|l| row(vec![l], true)).collect();
    let room = MAX_ROWS.saturating_sub(rows.len()).max(1);
    let tolerance = if rest.len() <= room {
        rows.extend(rest.into_iter().map(|l| row(vec![l], false)));
        0
    } else {
        let mut q = (scale_ns / 64).max(1);
        let groups = loop {
            let mut g: BTreeMap<[i64; 7], Vec<usize>> = BTreeMap::new();
            for (i, l) in rest.iter().enumerate() {
                g.entry(l.shape().map(|x| (x + q / 2).div_euclid(q))).or_default().push(i);
            }
            // Past twice the scale every shape rounds to the same key: one row.
            if g.len() <= room || q > scale_ns.saturating_mul(2) {
                break g;
            }
            q = q.saturating_mul(2);
        };
        let mut slots: Vec<Option<Laid>> = rest.into_iter().map(Some).collect();
        for (_, members) in groups {
            rows.push(row(members.iter().filter_map(|&i| slots[i].take()).collect(), false));
        }
        q
    };
    rows.sort_by_key(|r| r.ranks.first().copied());
    (rows, tolerance)
}

/// One row of ranks folded together (ascending by rank), drawn as the one with the median end.
fn row(mut members: Vec<Laid>, named: bool) -> Row {
    let ranks: Vec<u32> = members.iter().map(|l| l.rank).collect();
    members.sort_by_key(|l| (l.end_ns, l.rank));
    let mid = members.swap_remove(members.len().saturating_sub(1) / 2);
    let label = if ranks.len() == 1 {
        rank_words(&ranks)
    } else {
        format!("{} ({} alike; rank {} drawn)", rank_words(&ranks), ranks.len(), mid.rank)
    };
    Row { ranks, drawn: mid.rank, named, label, start_ns: mid.start_ns, end_ns: mid.end_ns, spans: mid.spans }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analyze::breakdown::MetricsFrom;
    use crate::model::Phase;

    fn step(wall: i64, compute: i64, comm: i64, overlap: i64, idle: i64, input: i64) -> StepRank {
        StepRank {
            rank: 0,
            start_ns: 0,
            end_ns: wall,
            wall_ns: wall,
            compute_ns: compute,
            comm_ns: comm,
            overlap_ns: overlap,
            exposed_comm_ns: comm - overlap,
            memory_ns: 0,
            busy_ns: wall - idle,
            idle_ns: idle,
            input_ns: input,
            cpu_bound_ns: 0,
            launch_overhead_ns: 0,
            other_idle_ns: idle - input,
            host_sync_ns: 0,
            data_loading_ns: input,
            comm_transfer_ns: 0,
            comm_wait_ns: 0,
            exposed_transfer_ns: 0,
            exposed_wait_ns: 0,
            tb_computation_ns: 0,
            tb_communication_ns: 0,
            tb_other_ns: 0,
            source: MetricsFrom::Gpu,
        }
    }

    fn origin(kind: CollKind, bytes: i64, transfer: i64, wait: i64) -> OriginRow {
        OriginRow {
            rank: 0,
            step: 1,
            region: "backward".into(),
            path: "backward".into(),
            phase: Phase::Backward,
            kind,
            count: 2,
            bytes_total: bytes,
            bytes_max: bytes / 2,
            dur_ns: transfer + wait,
            span_ns: transfer + wait,
            blocked_ns: 0,
            exposed_transfer_ns: transfer,
            exposed_wait_ns: wait,
            from_autograd: false,
            pg: String::new(),
        }
    }

    #[test]
    fn spans_add_up_to_the_wall_and_name_their_collectives() {
        // 100 wall: 10 loading (idle), 5 other idle, 60 compute, 25 exposed comm (15 transfer,
        // 10 wait); the origins say 12 of the transfer was one all_reduce, 10 of the wait too.
        let mut r = step(100, 60, 30, 5, 15, 10);
        r.exposed_transfer_ns = 15;
        r.exposed_wait_ns = 10;
        let o = origin(CollKind::AllReduce, 1 << 20, 12, 10);
        let s = spans(&r, &[&o], 7, &|_| None);
        assert_eq!(s.iter().map(|x| x.dur_ns).sum::<i64>(), 100);
        assert_eq!(s[0].start_ns, 7);
        for w in s.windows(2) {
            assert_eq!(w[0].start_ns + w[0].dur_ns, w[1].start_ns, "{s:?}");
        }
        let kinds: Vec<(SpanKind, i64, bool)> =
            s.iter().map(|x| (x.kind, x.dur_ns, x.collective.is_some())).collect();
        assert_eq!(
            kinds,
            [
                (SpanKind::DataLoading, 10, false),
                (SpanKind::Compute, 60, false),
                (SpanKind::Transfer, 12, true),
                (SpanKind::Transfer, 3, false),
                (SpanKind::Wait, 10, true),
                (SpanKind::Idle, 5, false),
            ]
        );
        assert_eq!(s[2].collective.as_ref().map(|c| (c.kind, c.bytes)), Some((CollKind::AllReduce, 1 << 20)));
    }

    fn group(name: &str, role: Role, ranks: &[u32]) -> Group {
        Group {
            name: name.into(),
            desc: None,
            ranks: ranks.to_vec(),
            source: crate::analyze::layout::GroupSource::PgConfig,
            role,
            role_from: crate::analyze::layout::RoleFrom::Name,
            role_evidence: String::new(),
            instances: 0,
            hosts: 0,
            exposed_transfer_ns: 0,
            wait_ns: 0,
        }
    }

    #[test]
    fn a_span_names_its_group_by_the_row_else_by_the_only_group_that_fits() {
        // Rank 0 of tensor 2 × data 2: all_reduce in its tensor group "1" (0, 1) and its data
        // group "2" (0, 2); all_gather in the data group only.
        let layout = Layout {
            groups: vec![
                group("0", Role::World, &[0, 1, 2, 3]),
                group("1", Role::Tensor, &[1, 0]),
                group("2", Role::Data, &[0, 2]),
                group("3", Role::Data, &[1, 3]),
            ],
            ..Layout::default()
        };
        let ran = [(CollKind::AllReduce, "1"), (CollKind::AllReduce, "2"), (CollKind::AllGather, "2")];
        // The row's own group.
        let mut o = origin(CollKind::AllReduce, 64, 1, 0);
        o.pg = "2".into();
        let g = group_of(&layout, &ran, &o);
        assert_eq!(g, Some(SpanGroup { name: "2".into(), role: Role::Data, size: 2 }));
        assert_eq!(g.map(|g| g.words()).as_deref(), Some("data-parallel group 2 (2 ranks)"));
        // A group name the layout does not hold names nothing.
        o.pg = "9".into();
        assert_eq!(group_of(&layout, &ran, &o), None);
        // Without the row's group: all_reduce fits two of rank 0's groups, so none is named.
        o.pg.clear();
        assert_eq!(group_of(&layout, &ran, &o), None);
        // all_gather fits only its data group (the world group ran none).
        let o = origin(CollKind::AllGather, 64, 1, 0);
        assert_eq!(group_of(&layout, &ran, &o).map(|g| g.name), Some("2".into()));
        // Rank 1 is not in group 2: its all_gather fits no group.
        let mut o1 = origin(CollKind::AllGather, 64, 1, 0);
        o1.rank = 1;
        assert_eq!(group_of(&layout, &ran, &o1), None);
    }

    #[test]
    fn an_origin_larger_than_the_figure_is_cut_to_it() {
        let mut r = step(50, 40, 10, 0, 0, 0);
        r.exposed_wait_ns = 10;
        let o = origin(CollKind::AllGather, 64, 0, 30);
        let s = spans(&r, &[&o], 0, &|_| None);
        let wait: Vec<_> = s.iter().filter(|x| x.kind == SpanKind::Wait).collect();
        assert_eq!(wait.len(), 1);
        assert_eq!(wait[0].dur_ns, 10);
        assert_eq!(s.iter().map(|x| x.dur_ns).sum::<i64>(), 50);
    }

    fn laid(rank: u32, start: i64, compute: i64, wait: i64) -> Laid {
        let spans = vec![
            Span { kind: SpanKind::Compute, start_ns: start, dur_ns: compute, collective: None },
            Span { kind: SpanKind::Wait, start_ns: start + compute, dur_ns: wait, collective: None },
        ];
        Laid { rank, start_ns: start, end_ns: start + compute + wait, spans }
    }

    #[test]
    fn few_ranks_keep_a_row_each() {
        let v: Vec<Laid> = (0..4).map(|r| laid(r, 0, 100, r as i64)).collect();
        let (rows, tol) = fold(v, &[], 104);
        assert_eq!(tol, 0);
        assert_eq!(
            rows.iter().map(|r| r.label.as_str()).collect::<Vec<_>>(),
            ["rank 0", "rank 1", "rank 2", "rank 3"]
        );
    }

    #[test]
    fn many_ranks_fold_by_shape_and_named_ranks_stay_alone() {
        // 1,024 ranks: the even ones 100 compute + 10 wait, the odd ones 60 + 50, rank 77 late
        // and slow (named), every rank's time jittered by a little.
        let v: Vec<Laid> = (0..1024u32)
            .map(|r| {
                let j = (r % 7) as i64 * 100;
                if r == 77 {
                    laid(r, 40_000, 200_000, 0)
                } else if r % 2 == 0 {
                    laid(r, 0, 100_000 + j, 10_000)
                } else {
                    laid(r, 0, 60_000 + j, 50_000)
                }
            })
            .collect();
        let (rows, tol) = fold(v, &[77], 240_000);
        assert!(tol > 0);
        assert_eq!(rows.len(), 3, "{:?}", rows.iter().map(|r| &r.label).collect::<Vec<_>>());
        let alone = rows.iter().find(|r| r.named).unwrap_or_else(|| panic!("rank 77's row"));
        assert_eq!(
            (alone.ranks.as_slice(), alone.label.as_str(), alone.start_ns),
            (&[77][..], "rank 77", 40_000)
        );
        let even =
            rows.iter().find(|r| r.ranks.first() == Some(&0)).unwrap_or_else(|| panic!("the even ranks"));
        assert_eq!(even.ranks.len(), 512);
        assert!(even.ranks.iter().all(|r| r % 2 == 0));
        assert!(
            even.label.starts_with("ranks 0, 2, 4, 6, …") && even.label.contains("512 alike"),
            "{}",
            even.label
        );
        let odd =
            rows.iter().find(|r| r.ranks.first() == Some(&1)).unwrap_or_else(|| panic!("the odd ranks"));
        assert_eq!(odd.ranks.len(), 511);
        assert_eq!(rows.iter().map(|r| r.ranks.len()).sum::<usize>(), 1024);
    }

    #[test]
    fn distinct_shapes_coarsen_until_the_rows_are_bounded() {
        // Every rank different (a ramp): folding must still end at most MAX_ROWS rows.
        let v: Vec<Laid> = (0..1024u32).map(|r| laid(r, 0, 1_000 + r as i64 * 1_000, 0)).collect();
        let (rows, _) = fold(v, &[], 1_025_000);
        assert!(rows.len() <= MAX_ROWS && rows.len() > 1, "{}", rows.len());
        assert_eq!(rows.iter().map(|r| r.ranks.len()).sum::<usize>(), 1024);
    }

    #[test]
    fn typical_step_and_rank_words() {
        assert_eq!(typical_index(&[10, 50, 20, 21, 19]), Some(2));
        assert_eq!(typical_index(&[]), None);
        assert_eq!(rank_words(&[3]), "rank 3");
        assert_eq!(rank_words(&[0, 1, 2, 5, 7, 8]), "ranks 0–2, 5, 7–8");
    }

    #[test]
    fn the_cause_keeps_its_row_before_the_ranks_waiting_for_it() {
        // 1,024 ranks, rank 700 the cause, every other rank waiting for it: named in that order,
        // rank 700 has a row of its own, and only MAX_NAMED ranks do.
        let v: Vec<Laid> =
            (0..1024u32).map(|r| laid(r, 0, if r == 700 { 300_000 } else { 100_000 }, 0)).collect();
        let named: Vec<u32> = std::iter::once(700).chain((0..1024).filter(|&r| r != 700)).collect();
        let (rows, _) = fold(v, &named, 300_000);
        assert!(
            rows.iter().any(|r| r.named && r.ranks == [700]),
            "{:?}",
            rows.iter().map(|r| &r.label).collect::<Vec<_>>()
        );
        assert_eq!(rows.iter().filter(|r| r.named).count(), MAX_NAMED);
        assert_eq!(rows.iter().map(|r| r.ranks.len()).sum::<usize>(), 1024);
    }
}
