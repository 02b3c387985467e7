//! The tables `rankscope export` writes, built from an [`Analysis`] (and, for two of them,
//! from what only the job held whole has: the matched collectives' members and the events).
//! Every time is in ns; times of day (`start_ns`, `end_ns`) are on the job's aligned clock
//! (a rank's own time − its offset, the analysis' `alignment`). docs/columnar.md lists every
//! column.

use super::{Column, ColumnData, Table, TableName};
use crate::analyze::collectives::Op;
use crate::analyze::Analysis;
use crate::model::{EventKind, StringTable, NONE_U32, NONE_U64};
use crate::normalize::job::RankEntry;

/// Builds the columns of a table row by row: one closure per column, each reading a row.
struct Builder<'a, R> {
    rows: &'a [R],
    columns: Vec<Column>,
}

impl<'a, R> Builder<'a, R> {
    fn new(rows: &'a [R]) -> Self {
        Builder { rows, columns: Vec::new() }
    }

    fn i64(mut self, name: &str, f: impl Fn(&R) -> Option<i64>) -> Self {
        self.columns.push(Column::new(name, ColumnData::I64(self.rows.iter().map(f).collect())));
        self
    }

    fn f64(mut self, name: &str, f: impl Fn(&R) -> Option<f64>) -> Self {
        self.columns.push(Column::new(name, ColumnData::F64(self.rows.iter().map(f).collect())));
        self
    }

    fn text(mut self, name: &str, f: impl Fn(&R) -> Option<String>) -> Self {
        self.columns.push(Column::new(name, ColumnData::Utf8(self.rows.iter().map(f).collect())));
        self
    }

    fn bool(mut self, name: &str, f: impl Fn(&R) -> Option<bool>) -> Self {
        self.columns.push(Column::new(name, ColumnData::Bool(self.rows.iter().map(f).collect())));
        self
    }

    fn table(self, name: TableName) -> Table {
        Table { name, columns: self.columns }
    }
}

fn n(v: usize) -> Option<i64> {
    i64::try_from(v).ok()
}

fn offset_of(a: &Analysis, rank: u32) -> i64 {
    crate::export::offset_of(&a.alignment, rank)
}

/// Rank × step: the step's window on the aligned clock and the breakdown of its time, as
/// `analyze --csv` and the analysis JSON's `steps[].per_rank[]` give it.
pub fn steps(a: &Analysis) -> Table {
    let rows: Vec<(u32, &crate::analyze::breakdown::StepRank)> =
        a.steps.iter().flat_map(|s| s.per_rank.iter().map(move |r| (s.step, r))).collect();
    Builder::new(&rows)
        .i64("step", |(s, _)| Some(i64::from(*s)))
        .i64("rank", |(_, r)| Some(i64::from(r.rank)))
        .text("source", |(_, r)| Some(r.source.to_string()))
        .i64("start_ns", |(_, r)| Some(r.start_ns.saturating_sub(offset_of(a, r.rank))))
        .i64("end_ns", |(_, r)| Some(r.end_ns.saturating_sub(offset_of(a, r.rank))))
        .i64("wall_ns", |(_, r)| Some(r.wall_ns))
        .i64("compute_ns", |(_, r)| Some(r.compute_ns))
        .i64("comm_ns", |(_, r)| Some(r.comm_ns))
        .i64("overlap_ns", |(_, r)| Some(r.overlap_ns))
        .i64("exposed_comm_ns", |(_, r)| Some(r.exposed_comm_ns))
        .i64("comm_transfer_ns", |(_, r)| Some(r.comm_transfer_ns))
        .i64("comm_wait_ns", |(_, r)| Some(r.comm_wait_ns))
        .i64("exposed_transfer_ns", |(_, r)| Some(r.exposed_transfer_ns))
        .i64("exposed_wait_ns", |(_, r)| Some(r.exposed_wait_ns))
        .i64("memory_ns", |(_, r)| Some(r.memory_ns))
        .i64("busy_ns", |(_, r)| Some(r.busy_ns))
        .i64("idle_ns", |(_, r)| Some(r.idle_ns))
        .i64("input_ns", |(_, r)| Some(r.input_ns))
        .i64("cpu_bound_ns", |(_, r)| Some(r.cpu_bound_ns))
        .i64("launch_overhead_ns", |(_, r)| Some(r.launch_overhead_ns))
        .i64("other_idle_ns", |(_, r)| Some(r.other_idle_ns))
        .i64("host_sync_ns", |(_, r)| Some(r.host_sync_ns))
        .i64("data_loading_ns", |(_, r)| Some(r.data_loading_ns))
        .i64("offset_ns", |(_, r)| Some(offset_of(a, r.rank)))
        .table(TableName::Steps)
}

/// Matched collective × member rank: one row per rank that took part in each collective the
/// job matched across its ranks (`ops`, the measuring layer's [`crate::analyze::Measured`]).
/// `collective` numbers the collective (its members share it); `wait_ns` is the member's wait
/// for the last arrival, `transfer_ns` the collective's (last arrival to end).
pub fn collectives(ops: &[Op]) -> Table {
    let rows: Vec<(usize, &Op, usize)> =
        ops.iter().enumerate().flat_map(|(i, o)| (0..o.ranks.len()).map(move |k| (i, o, k))).collect();
    Builder::new(&rows)
        .i64("collective", |(i, _, _)| n(*i))
        .text("kind", |(_, o, _)| Some(o.kind.name().to_string()))
        .text("group", |(_, o, _)| Some(o.pg.clone()))
        .i64("key", |(_, o, _)| Some(o.key))
        .i64("step", |(_, o, _)| Some(i64::from(o.step)))
        .i64("rank", |(_, o, k)| o.ranks.get(*k).map(|&r| i64::from(r)))
        .i64("group_size", |(_, o, _)| Some(o.group_size))
        .i64("members", |(_, o, _)| n(o.ranks.len()))
        .i64("bytes", |(_, o, k)| o.per_rank_bytes.get(*k).copied().flatten().or(o.bytes))
        .i64("start_ns", |(_, o, k)| o.start_ns.get(*k).copied())
        .i64("end_ns", |(_, o, k)| Some(o.start_ns.get(*k)?.saturating_add(*o.dur_ns.get(*k)?)))
        .i64("dur_ns", |(_, o, k)| o.dur_ns.get(*k).copied())
        .i64("wait_ns", |(_, o, k)| o.sync_wait_ns.get(*k).copied())
        .i64("transfer_ns", |(_, o, _)| Some(o.transfer_ns))
        .i64("skew_ns", |(_, o, _)| Some(o.skew_ns))
        .bool("last_arriver", |(_, o, k)| Some(o.ranks.get(*k) == Some(&o.last_arriver)))
        .bool("partial", |(_, o, _)| Some(o.partial))
        .text("origin", |(_, o, _)| (!o.origin.is_empty()).then(|| o.origin.clone()))
        .table(TableName::Collectives)
}

/// Per collective kind and process group: the analysis JSON's `collectives`.
pub fn collective_stats(a: &Analysis) -> Table {
    Builder::new(&a.collectives)
        .text("kind", |c| Some(c.kind.name().to_string()))
        .text("group", |c| Some(c.pg.clone()))
        .i64("count", |c| n(c.count))
        .i64("instances", |c| n(c.instances))
        .i64("group_size", |c| Some(c.group_size))
        .i64("bytes_total", |c| Some(c.bytes_total))
        .i64("bytes_p50", |c| c.bytes_p50)
        .i64("dur_mean_ns", |c| Some(c.dur_mean_ns))
        .i64("dur_p50_ns", |c| Some(c.dur_p50_ns))
        .i64("dur_p95_ns", |c| Some(c.dur_p95_ns))
        .i64("dur_p99_ns", |c| Some(c.dur_p99_ns))
        .i64("dur_max_ns", |c| Some(c.dur_max_ns))
        .i64("transfer_mean_ns", |c| c.transfer_mean_ns)
        .i64("sync_wait_mean_ns", |c| c.sync_wait_mean_ns)
        .i64("skew_p50_ns", |c| c.skew_p50_ns)
        .i64("skew_max_ns", |c| c.skew_max_ns)
        .f64("algbw_gbps", |c| c.algbw_gbps)
        .f64("busbw_gbps", |c| c.busbw_gbps)
        .text("bw_basis", |c| Some(c.bw_basis.to_string()))
        .table(TableName::CollectiveStats)
}

/// Process group × member rank: the layout's groups (none without a layout).
pub fn groups(a: &Analysis) -> Table {
    let gs = a.layout.as_ref().map_or(&[][..], |l| &l.groups[..]);
    let rows: Vec<(&crate::analyze::layout::Group, u32)> =
        gs.iter().flat_map(|g| g.ranks.iter().map(move |&r| (g, r))).collect();
    Builder::new(&rows)
        .text("group", |(g, _)| Some(g.name.clone()))
        .text("desc", |(g, _)| g.desc.clone())
        .i64("rank", |(_, r)| Some(i64::from(*r)))
        .i64("size", |(g, _)| n(g.ranks.len()))
        .text("role", |(g, _)| Some(g.role.to_string()))
        .text("role_from", |(g, _)| Some(g.role_from.to_string()))
        .text("source", |(g, _)| Some(g.source.to_string()))
        .i64("instances", |(g, _)| i64::try_from(g.instances).ok())
        .i64("hosts", |(g, _)| Some(i64::from(g.hosts)))
        .i64("exposed_transfer_ns", |(g, _)| Some(g.exposed_transfer_ns))
        .i64("wait_ns", |(g, _)| Some(g.wait_ns))
        .table(TableName::Groups)
}

fn joined(v: &[u32]) -> Option<String> {
    (!v.is_empty()).then(|| v.iter().map(u32::to_string).collect::<Vec<_>>().join(","))
}

/// The findings in their ranked order (`position` 0 is the lead).
pub fn findings(a: &Analysis) -> Table {
    let rows: Vec<(usize, &crate::finding::Finding)> = a.findings.iter().enumerate().collect();
    Builder::new(&rows)
        .i64("position", |(i, _)| n(*i))
        .text("kind", |(_, f)| Some(f.id.to_string()))
        .text("severity", |(_, f)| Some(f.severity.name().to_string()))
        .i64("gain_ns", |(_, f)| Some(f.impact_ns))
        .text("ranks", |(_, f)| joined(&f.ranks))
        .i64("rank_count", |(_, f)| n(f.ranks.len()))
        .text("steps", |(_, f)| joined(&f.steps))
        .text("message", |(_, f)| Some(f.message.clone()))
        .text("fix", |(_, f)| Some(f.fix.clone()))
        .table(TableName::Findings)
}

/// Operator × step: the analysis' `operators` (the job's, added up over its ranks), one row per
/// operator and profiled step.
pub fn operators(a: &Analysis) -> Table {
    let o = &a.operators;
    let rows: Vec<(&crate::analyze::operators::OpRow, usize)> =
        o.rows.iter().flat_map(|r| (0..o.steps.len()).map(move |k| (r, k))).collect();
    Builder::new(&rows)
        .text("kind", |(r, _)| Some(r.kind.to_string()))
        .text("name", |(r, _)| Some(r.name.clone()))
        .text("shapes", |(r, _)| r.shapes.clone())
        .bool("comm", |(r, _)| Some(r.comm))
        .i64("folded", |(r, _)| Some(i64::from(r.folded)))
        .i64("step", |(_, k)| o.steps.get(*k).map(|&s| i64::from(s)))
        .i64("count", |(r, k)| r.count.get(*k).and_then(|&c| i64::try_from(c).ok()))
        .i64("dur_ns", |(r, k)| r.dur_ns.get(*k).copied())
        .i64("self_ns", |(r, k)| r.self_ns.get(*k).copied())
        .i64("call_p50_ns", |(r, _)| Some(r.call_p50_ns))
        .i64("ranks", |(r, _)| Some(i64::from(r.ranks)))
        .table(TableName::Operators)
}

/// One rank's events (a piece of the `events` table: every rank's have these columns), under
/// `rank` (the job's decision for its file, [`crate::export::Planned::rank`]), on the aligned
/// clock (`offset_ns`: the rank's offset).
pub fn events(r: &RankEntry, strings: &StringTable, rank: u32, offset_ns: i64) -> Table {
    let e = &r.trace.events;
    let lanes = &r.trace.lanes;
    let labels: Vec<String> = (0..lanes.len()).map(|l| lanes.label(l, strings)).collect();
    let idx: Vec<usize> = (0..e.len()).collect();
    let slice = |i: usize| e.kind[i] == EventKind::Slice;
    Builder::new(&idx)
        .i64("rank", |_| Some(i64::from(rank)))
        .text("name", |&i| Some(strings.get(e.name[i]).to_string()))
        .text("cat", |&i| Some(strings.get(e.cat[i]).to_string()))
        .text("class", |&i| Some(e.class[i].name().to_string()))
        .text("collective", |&i| {
            let c = e.coll_kind(i);
            (c != crate::model::CollKind::Unknown).then(|| c.name().to_string())
        })
        .bool("instant", |&i| Some(!slice(i)))
        .i64("start_ns", |&i| Some(e.ts_ns[i].saturating_sub(offset_ns)))
        .i64("dur_ns", |&i| slice(i).then_some(e.dur_ns[i]))
        .i64("lane_id", |&i| Some(i64::from(e.lane[i].0)))
        .text("lane", |&i| labels.get(e.lane[i].0 as usize).cloned())
        .i64("step", |&i| (e.step[i] != NONE_U32).then_some(i64::from(e.step[i])))
        .i64("correlation", |&i| {
            (e.correlation[i] != NONE_U64).then(|| i64::try_from(e.correlation[i]).ok()).flatten()
        })
        .i64("external_id", |&i| {
            (e.external_id[i] != NONE_U64).then(|| i64::try_from(e.external_id[i]).ok()).flatten()
        })
        .table(TableName::Events)
}

/// The tables an [`Analysis`] alone gives (every one but `collectives` and `events`).
pub fn from_analysis(a: &Analysis, name: TableName) -> Option<Table> {
    match name {
        TableName::Steps => Some(steps(a)),
        TableName::CollectiveStats => Some(collective_stats(a)),
        TableName::Groups => Some(groups(a)),
        TableName::Findings => Some(findings(a)),
        TableName::Operators => Some(operators(a)),
        TableName::Collectives | TableName::Events => None,
    }
}

/// Writes every rank's events to `out` as one table, a row group / record batch per rank
/// (one rank's columns in memory at a time), each on the aligned clock of `alignment`; gives
/// the output back and the rows written. A job without ranks writes nothing (`None`).
pub fn write_events<W: std::io::Write>(
    format: super::Format,
    out: W,
    job: &crate::normalize::Job,
    alignment: &[crate::analyze::align::RankAlignment],
) -> Result<Option<(W, usize)>, super::ColumnarError> {
    let piece = |r: &RankEntry| events(r, &job.strings, r.rank, crate::export::offset_of(alignment, r.rank));
    let Some(first) = job.ranks.first().map(piece) else { return Ok(None) };
    let mut w = super::Writer::new(format, out, first.schema())?;
    let mut rows = first.rows();
    w.write(&first.columns)?;
    drop(first);
    for r in job.ranks.iter().skip(1) {
        let t = piece(r);
        rows += t.rows();
        w.write(&t.columns)?;
    }
    Ok(Some((w.finish()?, rows)))
}
