//! Multi-rank single files: one trace file that holds several ranks, read as its ranks.
//!
//! A job's timeline is often handed over as one Chrome JSON document: a Perfetto or Chrome
//! merge of the per-rank Kineto files, a cluster tool's export (a real 64-rank job: one array,
//! `pid` = rank), or rankscope's own merged export ([`crate::export`]: one process per rank,
//! named `rank N · file`). Read as one rank, such a file is one rank with a step as long as the
//! whole job and nothing compared across ranks. So before a file is normalized its processes
//! are looked at ([`ranks_in`]) and, when they are ranks, the file is cut into one
//! [`RankTrace`] per rank ([`split`]); the rank rule then decides each part like a file of its
//! own ([`super::job::decide`]: a part's claim is its rank in the file, [`InFile`]).
//!
//! **Which processes are ranks**, from the file's structure, in order of trust:
//! 1. **Named**: `process_name` / `process_labels` metadata saying `rank N` (any case, `rank3`,
//!    `Rank 3`, `rank_3`, `rank-3`, `rank 3 · file` as rankscope writes it) on processes of
//!    two ranks or more. Processes named for one rank are that rank together (a merge that
//!    keeps a rank's host and device processes apart names both). This is certain.
//! 2. **Structural**: two processes or more (integer `pid`s) each holding, on CPU threads
//!    (lanes without device work), either `ProfilerStep#N` spans or runtime calls that launch
//!    work onto GPU streams of the same process. A single Kineto file never looks like this:
//!    its GPU streams are processes of their own (the device index as `pid`) that launch
//!    nothing, its DataLoader workers have no steps, and its bookkeeping processes (`Spans`,
//!    `Traces`) have string ids. Which rank a process is is then
//!    assumed and said in a warning (`ranks_in_file_assumed`): `pid` = rank when the pids are
//!    `0..n` (or all below the world size the file states), else the ranks in pid order.
//!
//! Processes that fit neither (a device process no name gives to a rank, bookkeeping
//! processes) are left out, with a diagnostic counting their events when they held any work.
//!
//! **One clock.** A merged file's ranks are written on one time axis: rankscope's export is
//! aligned, and a merge tool writes every process on the file's clock. Each part carries the
//! file's name as its clock ([`InFile::file`]): the alignment puts the file's ranks on one
//! clock, as it does ranks that name one host, and checks that against the collectives (a
//! member whose collectives contradict one clock is aligned on its own, docs/metrics.md
//! "Clock alignment"), so no offset is invented between them.
//!
//! Not read as ranks (yet): a file whose ranks are told apart only by thread (`tid` per rank
//! inside one process) — no public trace seen writes that.

use std::collections::{BTreeMap, BTreeSet};

use crate::model::*;

pub use crate::model::InFile;

/// How the ranks of a file were told apart.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum How {
    /// Processes named `rank N`.
    Named,
    /// Processes shaped like ranks, `pid` = rank.
    PidIsRank,
    /// Processes shaped like ranks, numbered in pid order.
    PidOrder,
}

/// The ranks of a multi-rank file: each rank with its processes, and the processes left out.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileRanks {
    pub how: How,
    /// `(rank, pids, why)`, by rank; `why` names what told the rank (a process name).
    pub ranks: Vec<(u32, Vec<IdKey>, String)>,
    /// Processes given to no rank that held events: `(pid, events)`.
    pub left_out: Vec<(IdKey, u64)>,
}

/// Per process: what its lanes hold.
#[derive(Default)]
struct Proc {
    events: u64,
    /// Events on its CPU threads (lanes without device work).
    cpu_events: u64,
    /// Runtime calls on its CPU threads (`cudaLaunchKernel`, …: the process launches work).
    launches: u64,
    gpu_lanes: usize,
    /// `ProfilerStep#N` numbers on its CPU threads.
    steps: BTreeSet<u32>,
}

/// A rank number in a process name or label: the digits after the first `rank` (any case),
/// with at most one separator (` `, `_`, `-`, `:`, `#`, `=`) between.
pub fn rank_in_label(s: &str) -> Option<u32> {
    let lower = s.to_ascii_lowercase();
    let b = lower.as_bytes();
    let mut from = 0;
    while let Some(k) = lower[from..].find("rank") {
        let at = from + k;
        // Not the end of a longer word ("frank", "ranks").
        let before_ok = at == 0 || !b[at - 1].is_ascii_alphabetic();
        let mut i = at + 4;
        if matches!(b.get(i), Some(b' ' | b'_' | b'-' | b':' | b'#' | b'=')) {
            i += 1;
        }
        let start = i;
        while b.get(i).is_some_and(u8::is_ascii_digit) {
            i += 1;
        }
        if before_ok && i > start && i - start <= 9 {
            if let Ok(v) = lower[start..i].parse::<u32>() {
                return Some(v);
            }
        }
        from = at + 4;
    }
    None
}

/// The ranks a raw (not yet normalized) trace holds, when it holds several (see the module
/// doc); `None` for a file of one rank.
pub fn ranks_in(t: &RankTrace) -> Option<FileRanks> {
    let mut procs: BTreeMap<IdKey, Proc> = BTreeMap::new();
    let e = &t.events;
    // A lane is a GPU stream when it holds device work (as [`super::lane_kinds`] decides).
    let mut gpu_cat: FxHashMap<StrId, bool> = FxHashMap::default();
    let mut gpu_lane = vec![false; t.lanes.len()];
    for i in 0..e.len() {
        let is_gpu = *gpu_cat.entry(e.cat[i]).or_insert_with(|| super::is_gpu_cat(t.strings.get(e.cat[i])));
        if let Some(g) = gpu_lane.get_mut(e.lane[i].0 as usize) {
            *g |= is_gpu;
        }
    }
    let mut runtime_cat: FxHashMap<StrId, bool> = FxHashMap::default();
    for i in 0..e.len() {
        let l = e.lane[i].0 as usize;
        let Some(&pid) = t.lanes.pid.get(l) else { continue };
        let p = procs.entry(pid).or_default();
        p.events += 1;
        if gpu_lane.get(l).copied().unwrap_or(false) {
            continue;
        }
        p.cpu_events += 1;
        let c = e.cat[i];
        if *runtime_cat.entry(c).or_insert_with(|| super::is_runtime_cat(t.strings.get(c))) {
            p.launches += 1;
        }
        if let Some(n) = super::steps::step_number(t.strings.get(e.name[i])) {
            p.steps.insert(n);
        }
    }
    for (l, &g) in gpu_lane.iter().enumerate() {
        if g {
            if let Some(p) = t.lanes.pid.get(l).and_then(|pid| procs.get_mut(pid)) {
                p.gpu_lanes += 1;
            }
        }
    }
    // 1. Processes named for ranks.
    let mut named: BTreeMap<u32, (Vec<IdKey>, String)> = BTreeMap::new();
    let mut named_pids = BTreeSet::new();
    for (pid, label) in t.meta.process_names.iter().chain(&t.meta.process_labels) {
        if named_pids.contains(pid) {
            continue;
        }
        if let Some(r) = rank_in_label(label) {
            named_pids.insert(*pid);
            let entry = named.entry(r).or_insert_with(|| (Vec::new(), label.clone()));
            entry.0.push(*pid);
        }
    }
    let left_out = |taken: &BTreeSet<IdKey>| -> Vec<(IdKey, u64)> {
        procs
            .iter()
            .filter(|(p, x)| !taken.contains(p) && x.events > 0)
            .map(|(p, x)| (*p, x.events))
            .collect()
    };
    if named.len() >= 2 {
        let ranks: Vec<(u32, Vec<IdKey>, String)> = named
            .into_iter()
            .map(|(r, (mut pids, label))| {
                pids.sort();
                (r, pids, format!("its process is named `{label}`"))
            })
            .collect();
        return Some(FileRanks { how: How::Named, ranks, left_out: left_out(&named_pids) });
    }
    // 2. Processes shaped like ranks.
    let shaped: Vec<i64> = procs
        .iter()
        .filter_map(|(p, x)| match p {
            IdKey::Int(v) if !x.steps.is_empty() || (x.gpu_lanes > 0 && x.launches > 0) => Some(*v),
            _ => None,
        })
        .collect();
    // 3. Numbered like ranks: the integer pids that hold events are exactly 0..n, each with
    // host-side events and its share of them (a cluster tool's export writes `pid` = rank with
    // categories no rule knows, so neither steps nor launches show).
    let shaped = if shaped.len() >= 2 { shaped } else { numbered(&procs).unwrap_or_default() };
    if shaped.len() < 2 {
        return None;
    }
    let n = shaped.len() as i64;
    let world = t.meta.distributed.as_ref().and_then(|d| d.world_size).filter(|&w| w >= n);
    let pid_is_rank = shaped.iter().all(|&p| p >= 0 && p < world.unwrap_or(n) && p <= i64::from(u32::MAX));
    let how = if pid_is_rank { How::PidIsRank } else { How::PidOrder };
    let ranks: Vec<(u32, Vec<IdKey>, String)> = shaped
        .iter()
        .enumerate()
        .map(|(k, &p)| {
            let x = procs.get(&IdKey::Int(p));
            let what = match x {
                Some(x) if x.gpu_lanes > 0 && x.launches > 0 => {
                    format!("{} GPU stream(s) beside its CPU threads", x.gpu_lanes)
                }
                Some(x) if !x.steps.is_empty() => format!("`ProfilerStep#` spans {}", step_words(&x.steps)),
                Some(x) => format!("{} events, numbered among pids 0..{n}", x.events),
                None => String::new(),
            };
            let r = if pid_is_rank { p as u32 } else { k as u32 };
            (r, vec![IdKey::Int(p)], format!("process {p} holds {what}"))
        })
        .collect();
    let taken: BTreeSet<IdKey> = shaped.iter().map(|&p| IdKey::Int(p)).collect();
    Some(FileRanks { how, ranks, left_out: left_out(&taken) })
}

/// Events each process must hold for rule 3: a rank's timeline, not a stray event without a
/// `pid` (read as pid 0).
const NUMBERED_MIN_EVENTS: u64 = 100;

/// The pids of rule 3 (module doc), when they hold: every integer pid with events is one of
/// `0..n` (n ≥ 2, all present), each with events on its CPU threads, at least
/// [`NUMBERED_MIN_EVENTS`] of them and a quarter of the mean events per pid. A single Kineto file's device processes (`pid` = device) hold device
/// work only, and its host process has an OS pid: it never looks like this.
fn numbered(procs: &BTreeMap<IdKey, Proc>) -> Option<Vec<i64>> {
    let ints: Vec<(i64, &Proc)> = procs
        .iter()
        .filter(|(_, x)| x.events > 0)
        .filter_map(|(p, x)| match p {
            IdKey::Int(v) => Some((*v, x)),
            IdKey::Str(_) => None,
        })
        .collect();
    let n = ints.len();
    let total: u64 = ints.iter().map(|x| x.1.events).sum();
    let contiguous = n >= 2 && ints.iter().enumerate().all(|(k, (p, _))| *p == k as i64);
    let even = ints.iter().all(|(_, x)| {
        x.cpu_events > 0 && x.events >= NUMBERED_MIN_EVENTS && x.events * 4 * n as u64 >= total
    });
    (contiguous && even).then(|| ints.iter().map(|x| x.0).collect())
}

fn step_words(steps: &BTreeSet<u32>) -> String {
    match (steps.first(), steps.last()) {
        (Some(a), Some(b)) if a != b => format!("#{a}–#{b}"),
        (Some(a), _) => format!("#{a}"),
        _ => String::new(),
    }
}

/// The file cut into its ranks when it holds several ([`ranks_in`]), else the file as it is.
/// Each part keeps its processes' lanes, events, arguments, flows and counters, the file's
/// metadata (its own process names; `distributedInfo` without the file's rank), a share of the
/// file's bytes by events, the file's parse diagnostics (on the first part only: they are the
/// file's) and a diagnostic saying how its rank was told.
///
/// A part is never cut again: a shell that cuts a file and then reads each part as a job of its
/// own (the app's workers, [`crate::job::part_of`]) gets the ranks [`super::assemble`] gets.
pub fn split(t: RankTrace) -> Vec<RankTrace> {
    if t.meta.in_file.is_some() {
        return vec![t];
    }
    let Some(found) = ranks_in(&t) else { return vec![t] };
    let total_events = t.events.len().max(1) as u64;
    let n = found.ranks.len() as u32;
    let file_name = t.source.rsplit(['/', '\\']).next().unwrap_or(&t.source).to_string();
    let mut parts = Vec::with_capacity(found.ranks.len());
    for (k, (rank, pids, why)) in found.ranks.iter().enumerate() {
        let pids: BTreeSet<IdKey> = pids.iter().copied().collect();
        let mut p = take(&t, &pids);
        p.source = part_name(&t.source, *rank);
        p.text_bytes = t.text_bytes * p.events.len() as u64 / total_events;
        p.input_bytes = t.input_bytes * p.events.len() as u64 / total_events;
        if let Some(d) = p.meta.distributed.as_mut() {
            d.rank = None;
        }
        p.meta.in_file =
            Some(InFile { rank: *rank, file: t.source.clone(), ranks: n, named: found.how == How::Named });
        if k == 0 {
            p.diagnostics = t.diagnostics.clone();
        }
        let assumed = match found.how {
            How::Named => None,
            How::PidIsRank => Some("the process ids 0..n are taken for the ranks (no process is named `rank N`)"),
            How::PidOrder => {
                Some("the ranks are numbered in process id order (no process is named `rank N`, and the ids are not 0..n)")
            }
        };
        match assumed {
            None => p.diagnostics.add(DiagKind::RanksInFile, None, || {
                format!("`{file_name}` holds {n} ranks: this is rank {rank}, {why}")
            }),
            Some(a) => p.diagnostics.add(DiagKind::RanksInFileAssumed, None, || {
                format!("`{file_name}` holds {n} ranks, told apart by their processes: this is rank {rank}, {why}; {a}: map them with --rank if this is wrong")
            }),
        }
        if k == 0 && !found.left_out.is_empty() {
            let events: u64 = found.left_out.iter().map(|x| x.1).sum();
            let list: Vec<String> = found
                .left_out
                .iter()
                .take(5)
                .map(|(pid, n)| format!("{} ({n})", pid_words(&t, *pid)))
                .collect();
            let more = found.left_out.len().saturating_sub(5);
            p.diagnostics.add_n(DiagKind::ProcessesLeftOut, events, None, || {
                format!(
                    "{events} event(s) on {} process(es) of `{file_name}` that belong to no rank were left out: {}{}",
                    found.left_out.len(),
                    list.join(", "),
                    if more > 0 { format!(" and {more} more") } else { String::new() }
                )
            });
        }
        parts.push(p);
    }
    parts
}

/// The name a part cut from `file` goes by (its `source`, what `--rank NAME=N` names):
/// `FILE (rank N)`.
pub fn part_name(file: &str, rank: u32) -> String {
    format!("{file} (rank {rank})")
}

/// The file a name given to [`part_name`] came from (the name itself for a whole file).
pub fn file_of(name: &str) -> &str {
    name.strip_suffix(')')
        .and_then(|s| s.rsplit_once(" (rank "))
        .filter(|(_, n)| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
        .map_or(name, |(f, _)| f)
}

fn pid_words(t: &RankTrace, pid: IdKey) -> String {
    match pid {
        IdKey::Int(v) => format!("pid {v}"),
        IdKey::Str(s) => format!("pid `{}`", t.strings.get(s)),
    }
}

/// The part of `t` on the processes `pids`, with a string table of its own.
fn take(t: &RankTrace, pids: &BTreeSet<IdKey>) -> RankTrace {
    let mut out = RankTrace { meta: t.meta.clone(), ..RankTrace::default() };
    out.meta.process_names.retain(|(p, _)| pids.contains(p));
    out.meta.process_labels.retain(|(p, _)| pids.contains(p));
    // Lanes.
    let mut lane_map = vec![NONE_U32; t.lanes.len()];
    for l in 0..t.lanes.len() {
        if !pids.contains(&t.lanes.pid[l]) {
            continue;
        }
        lane_map[l] = out.lanes.pid.len() as u32;
        let (s, d) = (&t.lanes, &mut out.lanes);
        d.pid.push(s.pid[l]);
        d.tid.push(s.tid[l]);
        d.kind.push(s.kind.get(l).copied().unwrap_or(LaneKind::Cpu));
        d.name.push(s.name[l]);
        d.sort_index.push(s.sort_index.get(l).copied().unwrap_or(i64::MAX));
        d.device.push(s.device.get(l).copied().unwrap_or(-1));
        d.stream.push(s.stream.get(l).copied().unwrap_or(-1));
        d.events.push(s.events.get(l).copied().unwrap_or(0));
    }
    // Events.
    let (s, d) = (&t.events, &mut out.events);
    let mut raw = t.raw_args.as_ref().map(|_| crate::model::RawArgs::default());
    let mut row_map = vec![NONE_U32; s.len()];
    let filled = |v: usize| v == s.len();
    for i in 0..s.len() {
        let Some(&nl) = lane_map.get(s.lane[i].0 as usize) else { continue };
        if nl == NONE_U32 {
            continue;
        }
        row_map[i] = d.ts_ns.len() as u32;
        d.kind.push(s.kind[i]);
        d.ts_ns.push(s.ts_ns[i]);
        d.dur_ns.push(s.dur_ns[i]);
        d.name.push(s.name[i]);
        d.cat.push(s.cat[i]);
        d.lane.push(LaneId(nl));
        d.correlation.push(s.correlation[i]);
        d.external_id.push(s.external_id[i]);
        d.args.push(s.args[i]);
        if let (Some(r), Some(src)) = (&mut raw, &t.raw_args) {
            r.push_copy(src.get(i));
        }
        if filled(s.class.len()) {
            d.class.push(s.class[i]);
        }
        if filled(s.detail.len()) {
            d.detail.push(s.detail[i]);
        }
        if filled(s.step.len()) {
            d.step.push(s.step[i]);
        }
    }
    out.raw_args = raw;
    // Communication arguments (an event's `args` row is renumbered with them).
    let (s, d) = (&t.comm, &mut out.comm);
    for k in 0..s.len() {
        let Some(&row) = row_map.get(s.event[k].0 as usize) else { continue };
        if row == NONE_U32 {
            continue;
        }
        if let Some(a) = out.events.args.get_mut(row as usize) {
            *a = d.event.len() as u32;
        }
        d.event.push(EventIdx(row));
        d.collective.push(s.collective[k]);
        d.in_nelems.push(s.in_nelems[k]);
        d.out_nelems.push(s.out_nelems[k]);
        d.in_bytes.push(s.in_bytes[k]);
        d.out_bytes.push(s.out_bytes[k]);
        d.dtype.push(s.dtype[k]);
        d.group_size.push(s.group_size[k]);
        d.pg_name.push(s.pg_name[k]);
        d.pg_desc.push(s.pg_desc[k]);
        d.pg_ranks.push(s.pg_ranks[k]);
        d.seq.push(s.seq[k]);
        d.src_rank.push(s.src_rank[k]);
        d.dst_rank.push(s.dst_rank[k]);
        d.tag.push(s.tag[k]);
        d.input_elems.push(s.input_elems[k]);
        d.input_dims.push(s.input_dims[k]);
    }
    // Flows and counters.
    let (s, d) = (&t.flows, &mut out.flows);
    for k in 0..s.len() {
        let Some(&nl) = lane_map.get(s.lane[k].0 as usize) else { continue };
        if nl != NONE_U32 {
            d.id.push(s.id[k]);
            d.phase.push(s.phase[k]);
            d.cat.push(s.cat[k]);
            d.ts_ns.push(s.ts_ns[k]);
            d.lane.push(LaneId(nl));
            d.bind_enclosing.push(s.bind_enclosing[k]);
        }
    }
    let (s, d) = (&t.counters, &mut out.counters);
    for k in 0..s.len() {
        if pids.contains(&s.pid[k]) {
            d.name.push(s.name[k]);
            d.series.push(s.series[k]);
            d.ts_ns.push(s.ts_ns[k]);
            d.value.push(s.value[k]);
            d.device.push(s.device.get(k).copied().unwrap_or(crate::model::HOST_MEMORY));
            d.pid.push(s.pid[k]);
        }
    }
    // Counts of what the part holds.
    let e = &out.events;
    out.counts.total = e.len() as u64;
    for i in 0..e.len() {
        let ph = if e.kind[i] == EventKind::Slice { "X" } else { "i" };
        *out.counts.by_ph.entry(ph.to_string()).or_default() += 1;
        *out.counts.by_cat.entry(t.strings.get(e.cat[i]).to_string()).or_default() += 1;
    }
    // Its own strings: only those it uses, in order of first use.
    let mut map = vec![None::<StrId>; t.strings.len()];
    let mut strings = StringTable::default();
    super::job::map_str_ids(&mut out, &mut |s: &mut StrId| {
        if let Some(slot) = map.get_mut(s.0 as usize) {
            *s = *slot.get_or_insert_with(|| strings.intern(t.strings.get(*s)));
        }
    });
    out.strings = strings;
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn part_names_name_their_file() {
        assert_eq!(part_name("a/job.json", 3), "a/job.json (rank 3)");
        assert_eq!(file_of("a/job.json (rank 3)"), "a/job.json");
        assert_eq!(file_of("job.json (rank 3)"), "job.json");
        assert_eq!(file_of("job (rank x).json"), "job (rank x).json");
        assert_eq!(file_of("rank3.json"), "rank3.json");
    }

    #[test]
    fn ranks_in_labels() {
        assert_eq!(rank_in_label("rank 3 · rank3.json"), Some(3));
        assert_eq!(rank_in_label("Rank 12"), Some(12));
        assert_eq!(rank_in_label("node-7 rank_5"), Some(5));
        assert_eq!(rank_in_label("trainer (rank:4)"), Some(4));
        assert_eq!(rank_in_label("python"), None);
        assert_eq!(rank_in_label("GPU 0"), None);
        assert_eq!(rank_in_label("frank7"), None);
        assert_eq!(rank_in_label("ranks 8"), None);
    }
}
