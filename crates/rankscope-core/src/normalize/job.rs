//! The job: every rank's trace, each with its rank decided, sharing one string table.
//!
//! **The rank rule** ([`decide`]) works on what each file says about its rank (a [`RankClaim`]:
//! its name and `distributedInfo.rank`), so a job can be decided where its files are not (the
//! app's page, a combine of parts from other machines) by the same code that [`assemble`] runs.
//! Rank of a file, in order of trust: the user's explicit mapping (`--rank FILE=N`);
//! the rank a multi-rank file gives the part cut from it ([`super::multirank`]: a file of
//! several ranks is cut into one part per rank before anything else, and each part is
//! decided like a file of its own); `distributedInfo.rank`; a number in the file name (`rank-3`, `rank3`, `rank_3`,
//! `worker3`, ...); the load order (the smallest ranks nobody claimed, in the order the files
//! came). Every fallback is a diagnostic on the file. Two files claiming one rank is an error
//! naming both, unless the user mapped ranks explicitly.

use serde::{Deserialize, Serialize};

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
        /// The rank a file of several ranks gives this part of it (a process named `rank N`,
        /// or the assumption its diagnostics say).
        InFile => "in_file",
        /// A number in the file name.
        FileName => "file_name",
        /// The smallest rank nobody claimed, in load order.
        LoadOrder => "load_order",
    }
}

/// What one file says about its rank: the input of [`decide`].
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RankClaim {
    pub file: String,
    /// `distributedInfo.rank`, when the file has it.
    pub claimed_rank: Option<i64>,
    /// The rank a file of several ranks gives this part of it ([`super::multirank`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub in_file: Option<u32>,
}

/// A trace's claim on its rank.
pub fn claim_of(t: &RankTrace) -> RankClaim {
    RankClaim {
        file: t.source.clone(),
        claimed_rank: t.meta.distributed.as_ref().and_then(|d| d.rank),
        in_file: t.meta.in_file.as_ref().map(|f| f.rank),
    }
}

/// The rank decided for one file, with the diagnostics the decision adds to it: the key a
/// file's per-rank results are filed under.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RankDecision {
    pub rank: u32,
    pub rank_source: RankSource,
    /// The rank diagnostics of the decision ([`RANK_KINDS`], in that order).
    pub diagnostics: Vec<Diagnostic>,
}

/// The diagnostics a rank decision makes: where the rank came from, and two files claiming it.
pub const RANK_KINDS: [DiagKind; 4] = [
    DiagKind::RankFromFileName,
    DiagKind::RankFromLoadOrder,
    DiagKind::RankFromUser,
    DiagKind::DuplicateRank,
];

/// The rank rule (see the module doc) over every file's claim, in load order: `result[i]` is for
/// `claims[i]`. `explicit` maps a file (its whole name, or a trailing path part) to the rank the
/// user gave it; two files claiming one rank is a job error.
pub fn decide(claims: &[RankClaim], explicit: &[(String, u32)]) -> (Vec<RankDecision>, Vec<JobError>) {
    let mut decided: Vec<(Option<u32>, RankSource)> = claims
        .iter()
        .map(|c| {
            let user = explicit
                .iter()
                .find(|(f, _)| *f == c.file || c.file.ends_with(&format!("/{f}")))
                .map(|(_, r)| *r);
            if let Some(r) = user {
                (Some(r), RankSource::User)
            } else if let Some(r) = c.in_file {
                (Some(r), RankSource::InFile)
            } else if let Some(r) = c.claimed_rank.and_then(|r| u32::try_from(r).ok()) {
                (Some(r), RankSource::DistributedInfo)
            } else if let Some(r) = rank_from_name(&c.file) {
                (Some(r), RankSource::FileName)
            } else {
                (None, RankSource::LoadOrder)
            }
        })
        .collect();
    let mut taken: std::collections::BTreeSet<u32> = decided.iter().filter_map(|d| d.0).collect();
    let mut next = 0u32;
    for d in decided.iter_mut().filter(|d| d.0.is_none()) {
        while taken.contains(&next) {
            next += 1;
        }
        d.0 = Some(next);
        taken.insert(next);
    }
    let mut errors = Vec::new();
    let mut seen: std::collections::BTreeMap<u32, &str> = Default::default();
    let decisions = claims
        .iter()
        .zip(decided)
        .map(|(c, (rank, source))| {
            let rank = rank.unwrap_or(0);
            let mut d = Diagnostics::default();
            match source {
                RankSource::FileName => d.add(DiagKind::RankFromFileName, None, || {
                    format!("no `distributedInfo.rank`: rank {rank} taken from the file name")
                }),
                RankSource::LoadOrder => d.add(DiagKind::RankFromLoadOrder, None, || {
                    format!("neither `distributedInfo.rank` nor the file name tells the rank: rank {rank} given by load order")
                }),
                RankSource::User => d.add(DiagKind::RankFromUser, None, || format!("rank {rank} given by the user")),
                // A part of a multi-rank file says how its rank was told (its own diagnostic).
                RankSource::DistributedInfo | RankSource::InFile => {}
            }
            if let Some(first) = seen.get(&rank) {
                let err = JobError::DuplicateRank { rank, first: first.to_string(), second: c.file.clone() };
                d.add(DiagKind::DuplicateRank, None, || err.to_string());
                errors.push(err);
            } else {
                seen.insert(rank, &c.file);
            }
            let diagnostics = RANK_KINDS.iter().filter_map(|&k| d.get(k)).cloned().collect();
            RankDecision { rank, rank_source: source, diagnostics }
        })
        .collect();
    (decisions, errors)
}

/// A job-level error.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error, Serialize, serde::Deserialize)]
pub enum JobError {
    #[error("two files claim rank {rank}: {first} and {second} (map ranks explicitly with --rank FILE=N)")]
    DuplicateRank { rank: u32, first: String, second: String },
    #[error("these files come from {} different jobs ({why}): {}; analyse each job's files on their own", jobs.len(), jobs.iter().map(|j| format!("ranks {}", crate::words::rank_list(j))).collect::<Vec<_>>().join("; "))]
    MixedJobs { jobs: Vec<Vec<u32>>, why: String },
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

/// Builds the job: normalizes each trace, decides ranks ([`decide`] over the traces' claims) and
/// merges all strings into one table. `explicit` maps a file's source name to the rank the user
/// gave it.
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
    // A file of several ranks is its ranks.
    let traces: Vec<RankTrace> = traces.into_iter().flat_map(super::multirank::split).collect();
    let traces = crate::join::map(j, traces, &|mut t: RankTrace| {
        let norm = normalize_rank_with(&mut t, rules, j);
        (t, norm)
    });
    let claims: Vec<RankClaim> = traces.iter().map(|(t, _)| claim_of(t)).collect();
    let (decisions, errors) = decide(&claims, explicit);
    let mut job = Job { errors, ..Job::default() };
    for ((mut t, norm), d) in traces.into_iter().zip(decisions) {
        for x in &d.diagnostics {
            t.diagnostics.add_n(x.kind, x.count, x.first_offset, || x.message.clone());
        }
        remap_strings(&mut t, &mut job.strings);
        job.ranks.push(RankEntry { rank: d.rank, source: d.rank_source, trace: t, norm });
    }
    job.ranks.sort_by(|a, b| a.rank.cmp(&b.rank).then(a.trace.source.cmp(&b.trace.source)));
    job
}

/// Moves a trace's strings into the job's table and rewrites every id column.
fn remap_strings(t: &mut RankTrace, global: &mut StringTable) {
    let local = std::mem::take(&mut t.strings);
    let map = global.merge(&local);
    map_str_ids(t, &mut |s: &mut StrId| {
        if let Some(&g) = map.get(s.0 as usize) {
            *s = g;
        }
    });
}

/// Calls `m` on every string id a trace's tables and metadata hold (the one list of them).
pub(crate) fn map_str_ids(t: &mut RankTrace, m: &mut impl FnMut(&mut StrId)) {
    let mut m = |s: &mut StrId| m(s);
    t.events.name.iter_mut().for_each(&mut m);
    t.events.cat.iter_mut().for_each(&mut m);
    for col in [
        &mut t.comm.collective,
        &mut t.comm.dtype,
        &mut t.comm.pg_name,
        &mut t.comm.pg_desc,
        &mut t.comm.pg_ranks,
        &mut t.comm.input_dims,
        &mut t.lanes.name,
        &mut t.flows.cat,
        &mut t.counters.name,
        &mut t.counters.series,
    ] {
        col.iter_mut().for_each(&mut m);
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

    /// The rule over claims is the rule [`assemble`] applies to the traces themselves: ranks,
    /// sources, the diagnostics each trace gets and the job's errors, with explicit ranks,
    /// claims that are no rank (negative, beyond `u32`), names and load order, and duplicates.
    #[test]
    fn the_rule_over_claims_is_the_rule_over_traces() {
        let c = |f: &str, r: Option<i64>| RankClaim { file: f.to_string(), claimed_rank: r, in_file: None };
        let claims = [
            c("a.json", Some(3)),
            c("run/foo.json", None),
            c("dir/worker1.json", None),
            c("bar.json", Some(-1)),
            c("x/rank3.json", None),
            c("big.json", Some(1 << 40)),
            c("given.json", Some(0)),
            c("again.json", Some(3)),
        ];
        let explicit = [("given.json".to_string(), 9), ("run/foo.json".to_string(), 3)];
        let (decisions, errors) = decide(&claims, &explicit);
        let traces: Vec<RankTrace> = claims
            .iter()
            .map(|c| {
                let mut t = RankTrace { source: c.file.clone(), ..RankTrace::default() };
                t.meta.distributed =
                    c.claimed_rank.map(|r| DistributedInfo { rank: Some(r), ..DistributedInfo::default() });
                t
            })
            .collect();
        let job = assemble(traces, &explicit, &Rules::default());
        assert_eq!(job.errors, errors);
        assert_eq!(errors.len(), 3, "{errors:?}");
        for (c, d) in claims.iter().zip(&decisions) {
            let e =
                job.ranks.iter().find(|e| e.trace.source == c.file).unwrap_or_else(|| panic!("{}", c.file));
            assert_eq!((e.rank, e.source), (d.rank, d.rank_source), "{}", c.file);
            let got: Vec<Diagnostic> =
                RANK_KINDS.iter().filter_map(|&k| e.trace.diagnostics.get(k)).cloned().collect();
            assert_eq!(got, d.diagnostics, "{}", c.file);
        }
        let ranks: Vec<(u32, &str)> = decisions.iter().map(|d| (d.rank, d.rank_source.as_str())).collect();
        assert_eq!(
            ranks,
            [
                (3, "distributed_info"),
                (3, "user"),
                (1, "file_name"),
                (0, "load_order"),
                (3, "file_name"),
                (2, "load_order"),
                (9, "user"),
                (3, "distributed_info")
            ]
        );
    }

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
