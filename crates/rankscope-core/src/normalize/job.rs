//! The job: every rank's trace, each with its rank decided, sharing one string table.
//!
//! Rank of a file, in order of trust: the user's explicit mapping (`--rank FILE=N`);
//! `distributedInfo.rank`; a number in the file name (`rank-3`, `rank3`, `rank_3`,
//! `worker3`, ...); the load order (the smallest ranks nobody claimed, in the order the files
//! came). Every fallback is a diagnostic on the file. Two files claiming one rank is an error
//! naming both, unless the user mapped ranks explicitly.

use serde::Serialize;

use super::{normalize_rank_with, Normalized, Rules};
use crate::model::*;

crate::named_enum! {
    /// Where a rank number came from (the one type of it: the analysis, the inspect report, the
    /// app's summaries and the job's rank decision all carry it).
    pub enum RankSource {
        /// `--rank FILE=N`.
        User => "user",
        /// `distributedInfo.rank`.
        DistributedInfo => "distributed_info",
        /// A number in the file name.
        FileName => "file_name",
        /// The smallest rank nobody claimed, in load order.
        LoadOrder => "load_order",
    }
}

/// A job-level error.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error, Serialize, serde::Deserialize)]
pub enum JobError {
    #[error("two files claim rank {rank}: {first} and {second} (map ranks explicitly with --rank FILE=N)")]
    DuplicateRank { rank: u32, first: String, second: String },
}

/// One rank of the job.
#[derive(Debug, Clone)]
pub struct RankEntry {
    pub rank: u32,
    pub source: RankSource,
    /// Tables; after assembly its string ids refer to [`Job::strings`] and its own table is
    /// empty.
    pub trace: RankTrace,
    pub norm: Normalized,
}

/// Every rank, sorted by rank, sharing [`Job::strings`].
#[derive(Debug, Clone, Default)]
pub struct Job {
    pub strings: StringTable,
    pub ranks: Vec<RankEntry>,
    pub errors: Vec<JobError>,
}

/// A rank number in a file name: the digits after `rank`, `worker`, `proc` or `process`
/// (separated by nothing, `-`, `_` or `.`), the last such match in the base name.
pub fn rank_from_name(path: &str) -> Option<u32> {
    let base = path.rsplit(['/', '\\']).next().unwrap_or(path).to_ascii_lowercase();
    let b = base.as_bytes();
    let mut found = None;
    for word in ["rank", "worker", "process", "proc"] {
        let mut from = 0;
        while let Some(k) = base[from..].find(word) {
            let mut i = from + k + word.len();
            // "worker" inside "workers" or "process" inside "processing" are not ranks.
            if matches!(b.get(i), Some(b'-' | b'_' | b'.')) {
                i += 1;
            }
            let start = i;
            while b.get(i).is_some_and(u8::is_ascii_digit) {
                i += 1;
            }
            if i > start && i - start <= 9 {
                if let Ok(v) = base[start..i].parse::<u32>() {
                    found = Some((from + k, v));
                }
            }
            from += k + word.len();
        }
        if found.is_some() {
            break;
        }
    }
    found.map(|(_, v)| v)
}

/// Builds the job: decides ranks, normalizes each trace and merges all strings into one
/// table. `explicit` maps a file's source name to the rank the user gave it.
pub fn assemble(traces: Vec<RankTrace>, explicit: &[(String, u32)], rules: &Rules) -> Job {
    assemble_with(traces, explicit, rules, &crate::join::Serial)
}

/// [`assemble`], the traces normalized side by side over `j` (each is normalized alone, before
/// its rank is decided; the string tables are merged after, in order): the same job.
pub fn assemble_with(
    traces: Vec<RankTrace>,
    explicit: &[(String, u32)],
    rules: &Rules,
    j: &impl crate::join::Join,
) -> Job {
    let traces = crate::join::map(j, traces, &|mut t: RankTrace| {
        let norm = normalize_rank_with(&mut t, rules, j);
        (t, norm)
    });
    let mut decided: Vec<(Option<u32>, RankSource)> = Vec::with_capacity(traces.len());
    for (t, _) in &traces {
        let user = explicit
            .iter()
            .find(|(f, _)| *f == t.source || t.source.ends_with(&format!("/{f}")))
            .map(|(_, r)| *r);
        let d = if let Some(r) = user {
            (Some(r), RankSource::User)
        } else if let Some(r) =
            t.meta.distributed.as_ref().and_then(|d| d.rank).and_then(|r| u32::try_from(r).ok())
        {
            (Some(r), RankSource::DistributedInfo)
        } else if let Some(r) = rank_from_name(&t.source) {
            (Some(r), RankSource::FileName)
        } else {
            (None, RankSource::LoadOrder)
        };
        decided.push(d);
    }
    let mut taken: std::collections::BTreeSet<u32> = decided.iter().filter_map(|d| d.0).collect();
    let mut next = 0u32;
    for d in decided.iter_mut().filter(|d| d.0.is_none()) {
        while taken.contains(&next) {
            next += 1;
        }
        d.0 = Some(next);
        taken.insert(next);
    }
    let mut job = Job::default();
    let mut seen: std::collections::BTreeMap<u32, String> = Default::default();
    for ((mut t, norm), (rank, source)) in traces.into_iter().zip(decided) {
        let rank = rank.unwrap_or(0);
        match source {
            RankSource::FileName => t.diagnostics.add(DiagKind::RankFromFileName, None, || {
                format!("no `distributedInfo.rank`: rank {rank} taken from the file name")
            }),
            RankSource::LoadOrder => t.diagnostics.add(DiagKind::RankFromLoadOrder, None, || {
                format!("neither `distributedInfo.rank` nor the file name tells the rank: rank {rank} given by load order")
            }),
            RankSource::User => t.diagnostics.add(DiagKind::RankFromUser, None, || format!("rank {rank} given by the user")),
            RankSource::DistributedInfo => {}
        }
        if let Some(first) = seen.get(&rank) {
            let err = JobError::DuplicateRank { rank, first: first.clone(), second: t.source.clone() };
            t.diagnostics.add(DiagKind::DuplicateRank, None, || err.to_string());
            job.errors.push(err);
        } else {
            seen.insert(rank, t.source.clone());
        }
        remap_strings(&mut t, &mut job.strings);
        job.ranks.push(RankEntry { rank, source, trace: t, norm });
    }
    job.ranks.sort_by(|a, b| a.rank.cmp(&b.rank).then(a.trace.source.cmp(&b.trace.source)));
    job
}

/// Moves a trace's strings into the job's table and rewrites every id column.
fn remap_strings(t: &mut RankTrace, global: &mut StringTable) {
    let local = std::mem::take(&mut t.strings);
    let map = global.merge(&local);
    let m = |s: &mut StrId| {
        if let Some(&g) = map.get(s.0 as usize) {
            *s = g;
        }
    };
    t.events.name.iter_mut().for_each(m);
    t.events.cat.iter_mut().for_each(m);
    for col in [
        &mut t.comm.collective,
        &mut t.comm.dtype,
        &mut t.comm.pg_name,
        &mut t.comm.pg_desc,
        &mut t.comm.pg_ranks,
        &mut t.lanes.name,
        &mut t.flows.cat,
        &mut t.counters.name,
        &mut t.counters.series,
    ] {
        col.iter_mut().for_each(m);
    }
    for k in t.lanes.pid.iter_mut().chain(t.lanes.tid.iter_mut()).chain(t.counters.pid.iter_mut()) {
        if let IdKey::Str(s) = k {
            m(s);
        }
    }
    for (k, _) in t.meta.process_names.iter_mut().chain(t.meta.process_labels.iter_mut()) {
        if let IdKey::Str(s) = k {
            m(s);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranks_from_names() {
        assert_eq!(rank_from_name("a/rank-3.json"), Some(3));
        assert_eq!(rank_from_name("rank3.pt.trace.json"), Some(3));
        assert_eq!(rank_from_name("x/rank_3.json.gz"), Some(3));
        assert_eq!(rank_from_name("worker7_step_12.1694128201553.pt.trace.json"), Some(7));
        assert_eq!(rank_from_name("rank0.1796009556630007025.pt.trace.json.gz"), Some(0));
        assert_eq!(rank_from_name("rank-34.Jul_15_10_52_41.1074.pt.trace.json.gz"), Some(34));
        assert_eq!(rank_from_name("sampled_rank-1.json.gz"), Some(1));
        assert_eq!(rank_from_name("/tmp/rank9/trace.json"), None);
        assert_eq!(rank_from_name("trace.json"), None);
        assert_eq!(rank_from_name("workers.json"), None);
    }
}
