//! The expert's sentences for the engine's findings.
//!
//! "Ranks 0, 2 and 3 waited 8.02 s in all_reduce #6 (step 4, the 2nd of the step, a scalar
//! float32, inside `loss_allreduce`); rank 1 never issued it: its last collective was
//! all_reduce #5 (step 4, 136 float32, inside `grad_allreduce`)."

use super::*;

/// "Rank 1", "Ranks 0 and 2", "Ranks 0, 2 and 3" (capitalised) or lower case.
pub fn ranks(r: &[u32], capital: bool) -> String {
    let word = match (r.len() == 1, capital) {
        (true, true) => "Rank",
        (true, false) => "rank",
        (false, true) => "Ranks",
        (false, false) => "ranks",
    };
    let n: Vec<String> = r.iter().map(|x| x.to_string()).collect();
    let list = match n.len() {
        0 => String::new(),
        1 => n[0].clone(),
        _ => format!("{} and {}", n[..n.len() - 1].join(", "), n[n.len() - 1]),
    };
    format!("{word} {list}")
}

/// 1st, 2nd, 3rd, 4th, 11th, 21st.
pub fn ordinal(n: u32) -> String {
    let suffix = match (n % 10, n % 100) {
        (_, 11..=13) => "th",
        (1, _) => "st",
        (2, _) => "nd",
        (3, _) => "rd",
        _ => "th",
    };
    format!("{n}{suffix}")
}

/// A duration for people: 350 µs, 12.5 ms, 8.02 s, 9.5 min.
pub fn duration(ns: i64) -> String {
    let s = ns as f64 / 1e9;
    if s >= 120.0 {
        format!("{:.1} min", s / 60.0)
    } else if s >= 1.0 {
        format!("{s:.2} s")
    } else if s >= 1e-3 {
        format!("{:.1} ms", s * 1e3)
    } else {
        format!("{:.0} µs", s * 1e6)
    }
}

/// "8.02 s", or "8.02–8.04 s" (the unit once when both ends share it).
pub fn span(lo: i64, hi: i64) -> String {
    let (a, b) = (duration(lo), duration(hi));
    if a == b {
        return b;
    }
    match (a.rsplit_once(' '), b.rsplit_once(' ')) {
        (Some((x, u)), Some((_, v))) if u == v => format!("{x}–{b}"),
        _ => format!("{a}–{b}"),
    }
}

/// A timeout: 5 s, 10 min, 1.5 s.
pub fn timeout(t: Timeout) -> String {
    let ms = t.ms;
    if ms >= 60_000 && ms % 60_000 == 0 {
        format!("{} min", ms / 60_000)
    } else if ms % 1000 == 0 {
        format!("{} s", ms / 1000)
    } else {
        format!("{:.1} s", ms as f64 / 1000.0)
    }
}

fn timeout_source(t: Timeout) -> &'static str {
    match t.source {
        TimeoutSource::Dump => "the dump's",
        TimeoutSource::Given => "the given",
        TimeoutSource::Observed => "the observed",
        TimeoutSource::BackendDefault => "the backend's default",
    }
}

/// "(the dump's timeout is 5 s)", "(ended alike, as by a timeout of 8 s)".
fn timeout_note(t: Timeout) -> String {
    match t.source {
        TimeoutSource::Observed => format!("ended alike, as by a timeout of {}", timeout(t)),
        _ => format!("{} timeout is {}", timeout_source(t), timeout(t)),
    }
}

/// Torch's dtype names (`Float` in a dump, `float` in a trace) as users write them.
pub fn dtype(d: &str) -> String {
    let l = d.trim().rsplit("::").next().unwrap_or(d).to_ascii_lowercase();
    match l.as_str() {
        "float" => "float32".into(),
        "double" => "float64".into(),
        "half" => "float16".into(),
        "long" => "int64".into(),
        "int" => "int32".into(),
        "short" => "int16".into(),
        "char" => "int8".into(),
        "byte" => "uint8".into(),
        _ => l,
    }
}

/// "a scalar float32", "136 float32", "\[8, 16\] float32", "2 tensors \[8\], \[8\] float32".
pub fn shape(r: &RecordRef) -> Option<String> {
    let dt = r.in_dtypes.first().map(|d| format!(" {}", dtype(d))).unwrap_or_default();
    let one = |s: &Vec<i64>| match s.len() {
        0 => "a scalar".to_string(),
        // Without a dtype a bare number would not say what it counts.
        1 if dt.is_empty() => format!("{} elements", s[0]),
        1 => s[0].to_string(),
        _ => format!("[{}]", s.iter().map(|d| d.to_string()).collect::<Vec<_>>().join(", ")),
    };
    let text = match r.in_sizes.len() {
        0 => return r.bytes.map(bytes),
        1 => format!("{}{dt}", one(&r.in_sizes[0])),
        n => format!("{n} tensors {}{dt}", r.in_sizes.iter().map(|s| list(s)).collect::<Vec<_>>().join(", ")),
    };
    Some(text)
}

fn list(s: &[i64]) -> String {
    format!("[{}]", s.iter().map(|d| d.to_string()).collect::<Vec<_>>().join(", "))
}

/// "544 B", "64.0 KiB", "25.0 MiB".
pub fn bytes(b: i64) -> String {
    let f = b as f64;
    if f >= (1 << 30) as f64 {
        format!("{:.1} GiB", f / (1u64 << 30) as f64)
    } else if f >= (1 << 20) as f64 {
        format!("{:.1} MiB", f / (1u64 << 20) as f64)
    } else if f >= 1024.0 {
        format!("{:.1} KiB", f / 1024.0)
    } else {
        format!("{b} B")
    }
}

/// "all_reduce #6" (+ " of group `1`" when the report has several groups).
pub fn name(r: &RecordRef, rep: &SequenceReport) -> String {
    format!("{} #{}{}", r.kind.name(), r.position, group(&r.pg, &r.pg_desc, rep))
}

fn group(pg: &str, desc: &str, rep: &SequenceReport) -> String {
    if rep.groups.len() <= 1 {
        return String::new();
    }
    match desc {
        "" | "undefined" => format!(" of group `{pg}`"),
        d => format!(" of group `{pg}` ({d})"),
    }
}

/// "(step 4, the 2nd of the step, a scalar float32, inside `loss_allreduce` at train.py:97)".
pub fn context(r: &RecordRef) -> String {
    let mut parts = Vec::new();
    if let Some(s) = r.step {
        parts.push(format!("step {s}"));
        if let Some(o) = r.step_ordinal {
            parts.push(format!("the {} of the step", ordinal(o)));
        }
    }
    parts.extend(shape(r));
    if let Some(l) = &r.label {
        let at = user_frame(&r.frames)
            .map(|f| {
                format!(" at {}:{}", f.filename.rsplit(['/', '\\']).next().unwrap_or(&f.filename), f.line)
            })
            .unwrap_or_default();
        parts.push(format!("inside `{l}`{at}"));
    }
    if parts.is_empty() {
        String::new()
    } else {
        format!(" ({})", parts.join(", "))
    }
}

/// "waited 8.02 s in", "waited 7.9–8.02 s in", or "are stuck in" when the ends are unknown.
fn waited(side: &Side, t: Option<Timeout>) -> String {
    let w: Vec<i64> = side.waits.iter().filter_map(|w| w.waited_ns).collect();
    if w.is_empty() || w.len() < side.waits.len() {
        return format!("{} stuck in", if side.ranks.len() > 1 { "are" } else { "is" });
    }
    let (lo, hi) = (w.iter().copied().min().unwrap_or(0), w.iter().copied().max().unwrap_or(0));
    let span = span(lo, hi);
    let near = match t {
        Some(t) if side.waits.iter().all(|w| w.near_timeout) => {
            format!(" ({})", timeout_note(t))
        }
        _ => String::new(),
    };
    format!("waited {span}{near} in")
}

/// Where a rank that did not issue `d` went instead: its last record overall when that is in
/// another group, and whether it waits there (a side of that group's first divergence).
fn elsewhere<'r>(rank: u32, d: &Divergence, rep: &'r SequenceReport) -> Option<(&'r RecordRef, bool)> {
    let last = rep.ranks.iter().find(|r| r.rank == rank)?.last_entered.as_ref()?;
    if last.pg == d.pg {
        return None;
    }
    let stuck = rep
        .groups
        .iter()
        .find(|g| g.pg == last.pg)
        .and_then(|g| g.divergences.first())
        .is_some_and(|x| x.position == last.position && x.waiting.contains(&rank));
    Some((last, stuck))
}

/// " and waited 8.03 s" when every rank of the side has an end and the longest wait is 1 s
/// or more.
fn long_wait(s: &Side) -> String {
    let w: Vec<i64> = s.waits.iter().filter_map(|w| w.waited_ns).collect();
    match (w.iter().min(), w.iter().max()) {
        (Some(&lo), Some(&hi)) if w.len() == s.waits.len() && hi >= 1_000_000_000 => {
            format!(" and waited {}", span(lo, hi))
        }
        _ => String::new(),
    }
}

fn missing_clause(d: &Divergence, rep: &SequenceReport) -> Vec<String> {
    // Ranks with the same reason, the same last and next records and the same elsewhere share
    // a clause.
    type Same = (MissingReason, Option<i64>, Option<i64>, Option<(String, i64)>);
    let mut groups: Vec<(Same, Vec<u32>, &Missing)> = Vec::new();
    for m in &d.missing {
        let away = elsewhere(m.rank, d, rep).map(|(r, _)| (r.pg.clone(), r.position));
        let key = (m.reason, m.last.as_ref().map(|r| r.position), m.next.as_ref().map(|r| r.position), away);
        match groups.iter_mut().find(|g| g.0 == key) {
            Some(g) => g.1.push(m.rank),
            None => groups.push((key, vec![m.rank], m)),
        }
    }
    groups
        .into_iter()
        .map(|((reason, _, _, _), who, m)| {
            let many = who.len() > 1;
            let its = if many { "their" } else { "its" };
            let away = elsewhere(m.rank, d, rep);
            let here = if away.is_some() { " in this group" } else { "" };
            let last = match &m.last {
                Some(l) => {
                    format!("{its} last collective{here} was {} #{}{}", l.kind.name(), l.position, context(l))
                }
                None => format!("{its} records start later"),
            };
            let away = match away {
                Some((r, stuck)) => {
                    let (they, verb) = match (many, stuck) {
                        (true, true) => ("they", "are stuck in"),
                        (false, true) => ("it", "is stuck in"),
                        (true, false) => ("they", "went on to"),
                        (false, false) => ("it", "went on to"),
                    };
                    // The same call (kind, size, place) as the one the others wait in here:
                    // issued on the wrong group.
                    // Said of the fewer side only: the ranks that issued it where the others did
                    // not are the odd ones, not those that kept to the group.
                    let issued: usize = d.sides.iter().map(|s| s.ranks.len()).sum();
                    let same = who.len() < issued
                        && d.sides.first().is_some_and(|s| {
                            let x = &s.record;
                            x.kind == r.kind && x.bytes == r.bytes && x.label == r.label && x.label.is_some()
                        });
                    let wrong = if same {
                        format!(
                            ": the call the others made here, issued on another process group (`{}`, not `{}`)",
                            r.pg, d.pg
                        )
                    } else {
                        String::new()
                    };
                    format!(
                        ", and {they} {verb} {} #{}{} of group `{}`{wrong}",
                        r.kind.name(),
                        r.position,
                        context(r),
                        r.pg
                    )
                }
                None => String::new(),
            };
            match reason {
                MissingReason::Ended => format!("{} never issued it: {last}{away}", ranks(&who, false)),
                MissingReason::Skipped => {
                    let next = m
                        .next
                        .as_ref()
                        .map(|n| format!(" and went on to {} #{}", n.kind.name(), n.position))
                        .unwrap_or_default();
                    format!("{} skipped it: {last}{next}", ranks(&who, false))
                }
            }
        })
        .collect()
}

fn no_input_clause(d: &Divergence, rep: &SequenceReport) -> Option<String> {
    let g = rep.groups.iter().find(|g| g.pg == d.pg)?;
    if g.no_input.is_empty() {
        return None;
    }
    let what = input_word(&rep.sources);
    Some(format!(
        "{} {} no {what}",
        ranks(&g.no_input, false),
        if g.no_input.len() > 1 { "have" } else { "has" }
    ))
}

fn input_word(sources: &[Source]) -> &'static str {
    match sources {
        [Source::FlightRecorder] => "dump",
        [Source::Trace] => "trace",
        _ => "dump or trace",
    }
}

/// The sentence of a group's first divergence.
pub fn divergence(d: &Divergence, rep: &SequenceReport) -> String {
    let mut clauses = Vec::new();
    match d.class {
        DivergenceClass::NotIssued | DivergenceClass::Skipped => {
            if let Some(side) = d.sides.first() {
                let r = &side.record;
                clauses.push(format!(
                    "{} {} {} #{}{}{}",
                    ranks(&side.ranks, true),
                    waited(side, d.timeout),
                    r.kind.name(),
                    r.position,
                    context(r),
                    group(&d.pg, &d.pg_desc, rep)
                ));
            }
            clauses.extend(missing_clause(d, rep));
            for sh in d.shifts.iter().filter(|sh| sh.basis == ShiftBasis::Step && sh.by > 0) {
                let list: Vec<String> =
                    sh.records.iter().map(|r| format!("{}{}", name(r, rep), context(r))).collect();
                if let Some(first) = sh.records.first() {
                    clauses.push(format!(
                        "rank {} runs a step ahead of the others from #{} on: it skipped {}",
                        sh.rank,
                        first.position,
                        list.join(", ")
                    ));
                }
            }
            let stuck = d.sides.iter().any(|s| s.waits.iter().any(|w| w.waited_ns.is_none()));
            match d.timeout {
                Some(t) if stuck && matches!(t.source, TimeoutSource::Dump | TimeoutSource::Given) => {
                    clauses.push(format!("the group's timeout is {}", timeout(t)));
                }
                _ => {}
            }
        }
        DivergenceClass::Mismatch => {
            let what: Vec<&str> = d.fields.iter().map(|f| f.as_str()).collect();
            let head = format!(
                "Collective #{}{} does not match across ranks ({})",
                d.position,
                group(&d.pg, &d.pg_desc, rep),
                what.join(", ")
            );
            let sides: Vec<String> = d
                .sides
                .iter()
                .map(|s| {
                    let r = &s.record;
                    format!(
                        "{} issued {}{}{}",
                        ranks(&s.ranks, false),
                        r.kind.name(),
                        context(r),
                        long_wait(s)
                    )
                })
                .collect();
            clauses.push(format!("{head}: {}", sides.join(", ")));
            for sh in &d.shifts {
                let list: Vec<String> =
                    sh.records.iter().map(|r| format!("{}{}", name(r, rep), context(r))).collect();
                let minority_step =
                    d.sides.iter().find(|x| x.ranks.contains(&sh.rank)).and_then(|x| x.record.step);
                if sh.basis == ShiftBasis::Step {
                    match (sh.by > 0, minority_step) {
                        (true, Some(s)) => clauses.push(format!(
                            "rank {} is already in step {s}: it skipped {}",
                            sh.rank,
                            list.join(", ")
                        )),
                        (false, Some(s)) => clauses.push(format!(
                            "rank {} is still in step {s}: it issued {} the others did not",
                            sh.rank,
                            list.join(", ")
                        )),
                        _ => {}
                    }
                    continue;
                }
                if sh.by > 0 {
                    clauses.push(format!(
                        "rank {}'s next collectives match the others' from #{}: it skipped {}",
                        sh.rank,
                        d.position + sh.by,
                        list.join(", ")
                    ));
                } else {
                    clauses.push(format!(
                        "rank {}'s collectives from #{} match the others' from #{}: it issued {} extra ({})",
                        sh.rank,
                        d.position - sh.by,
                        d.position,
                        -sh.by,
                        list.join(", ")
                    ));
                }
            }
            clauses.extend(missing_clause(d, rep));
        }
    }
    clauses.extend(no_input_clause(d, rep));
    let mut s = clauses.join("; ");
    s.push('.');
    s
}

/// More ranks without input than this are said in one sentence, as runs.
pub const MANY_MISSING: usize = 8;

/// Sorted ranks as runs, `1–5, 9, 12–40`, the first 16 runs (then how many more).
pub fn runs(r: &[u32]) -> String {
    let mut spans: Vec<(u32, u32)> = Vec::new();
    for &x in r {
        match spans.last_mut() {
            Some((_, b)) if b.checked_add(1) == Some(x) => *b = x,
            _ => spans.push((x, x)),
        }
    }
    let shown: Vec<String> = spans
        .iter()
        .take(16)
        .map(|&(a, b)| if a == b { a.to_string() } else { format!("{a}–{b}") })
        .collect();
    let more = spans.len().saturating_sub(16);
    let mut s = shown.join(", ");
    if more > 0 {
        s.push_str(&format!(" and {more} more runs"));
    }
    s
}

/// [`no_input`] for more than [`MANY_MISSING`] ranks.
pub fn no_input_many(r: &[u32], sources: &[Source]) -> String {
    match input_word(sources) {
        "dump" => format!(
            "{} ranks ({}) have no Flight Recorder dump: they may have crashed before writing one, or the world is smaller than the dumps claim.",
            r.len(),
            runs(r)
        ),
        w => format!("{} ranks ({}) have no {w}.", r.len(), runs(r)),
    }
}

pub fn no_input(rank: u32, sources: &[Source]) -> String {
    match input_word(sources) {
        "dump" => format!("Rank {rank} has no Flight Recorder dump: it may have crashed before writing one."),
        w => format!("Rank {rank} has no {w}."),
    }
}

pub fn ends_early(r: &RankSummary, rep: &SequenceReport) -> String {
    let last =
        r.last_entered.as_ref().map(|l| format!(": its last collective is {}{}", name(l, rep), context(l)));
    let gap = match (r.last_ns, rep.ranks.iter().filter(|x| x.rank != r.rank).filter_map(|x| x.last_ns).max())
    {
        (Some(a), Some(b)) if b > a && r.source == Some(Source::Trace) => {
            format!("; its trace ends {} before the others'", duration(b - a))
        }
        _ => String::new(),
    };
    format!("Rank {}'s records end before the others'{}{gap}.", r.rank, last.unwrap_or_default())
}

pub fn silent(g: &GroupReport) -> String {
    let others: Vec<u32> = g.ranks.iter().filter(|r| r.records > 0).map(|r| r.rank).collect();
    format!(
        "{} issued no collective in group `{}`, where {} issued {}.",
        ranks(&g.silent, true),
        g.pg,
        ranks(&others, false),
        g.positions
    )
}

pub fn near_timeout(r: &RecordRef, waited_ns: i64, t: Timeout) -> String {
    format!(
        "Rank {}'s {} #{}{} lasted {}, close to {} timeout of {}.",
        r.rank,
        r.kind.name(),
        r.position,
        context(r),
        duration(waited_ns),
        timeout_source(t),
        timeout(t)
    )
}

/// The report as text: the diagnoses, then per group and rank the last collective entered and
/// completed, then the notes.
pub fn report(rep: &SequenceReport) -> String {
    use std::fmt::Write;
    let mut out = String::new();
    if rep.diagnoses.is_empty() {
        out.push_str("The ranks' collective sequences agree.\n");
    }
    for d in &rep.diagnoses {
        let _ = writeln!(out, "- {}", d.sentence);
    }
    for g in &rep.groups {
        let desc = if g.pg_desc.is_empty() { String::new() } else { format!(" ({})", g.pg_desc) };
        let by = match g.aligned_by {
            Alignment::SeqId => "by sequence number",
            Alignment::Ordinal => "by ordinal",
        };
        let _ = writeln!(
            out,
            "\ngroup `{}`{desc}: {} positions aligned {by}, {} diverging",
            g.pg, g.positions, g.diverging_positions
        );
        let _ = writeln!(out, "  {:<5} {:>7}  {:<32} last completed", "rank", "records", "last entered");
        for r in &g.ranks {
            let short = |x: &Option<RecordRef>| {
                x.as_ref().map_or("-".to_string(), |x| {
                    let label = x.label.as_ref().map(|l| format!(" `{l}`")).unwrap_or_default();
                    format!("{} #{}{label}", x.kind.name(), x.position)
                })
            };
            let basis = match (r.completed_basis, r.last_completed.is_some()) {
                (CompletedBasis::Inferred, true) => " (inferred)",
                _ => "",
            };
            let _ = writeln!(
                out,
                "  {:<5} {:>7}  {:<32} {}{basis}",
                r.rank,
                r.records,
                short(&r.last_entered),
                short(&r.last_completed)
            );
        }
        if g.no_input.len() > MANY_MISSING {
            let _ =
                writeln!(out, "  {} ranks {:>7}  (no {})", runs(&g.no_input), "-", input_word(&rep.sources));
        } else {
            for &r in &g.no_input {
                let _ = writeln!(out, "  {:<5} {:>7}  (no {})", r, "-", input_word(&rep.sources));
            }
        }
    }
    if !rep.notes.is_empty() {
        out.push('\n');
    }
    for n in &rep.notes {
        let _ = writeln!(out, "note: {n}");
    }
    out
}
