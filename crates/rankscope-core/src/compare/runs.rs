//! Many runs, one line each (`rankscope runs DIR...`, issue 36 item 2): a record table of jobs
//! from their analyses, schema `rankscope.runs/1` (docs/diff-schema.md, "Many runs").
//!
//! - `date`: the first profiled step's start, UTC, when the traces' clock is the wall clock
//!   (Kineto's `baseTimeNanoseconds` + ts is Unix time; a trace without it starts near 0 and
//!   gets no date).
//! - `step_p50_ns`, `step_p95_ns`: over the profiled steps of the job's step time (per step the
//!   longest wall of any rank, as `analysis.noise`); nearest-rank percentiles.
//! - `comm_share`, `exposed_comm_share`: the mean over ranks of `rank_totals[].comm_ratio` and
//!   `exposed_comm_ratio`.
//! - `lead`: the first finding (the judging layer's ranking), its ranks and message.
//!
//! Throughput, MFU and scaling efficiency need tokens / samples / FLOPs per step, which the
//! analysis does not carry yet: not given.

use serde::{Deserialize, Serialize};

use super::figures::step_times;
use crate::analyze::stats::percentile;
use crate::analyze::Analysis;
use crate::escape::{csv_field, md_text};
use crate::finding::FindingId;
use crate::words::{dur, pct};

crate::named_enum! {
    /// The schema name and version of the runs JSON.
    pub enum RunsSchema {
        V1 => "rankscope.runs/1",
    }
}

/// The record table.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Runs {
    pub schema: RunsSchema,
    pub runs: Vec<RunRecord>,
}

/// One run.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct RunRecord {
    /// What the shell calls it (its path).
    pub run: String,
    /// `2026-12-06 02:05 UTC`.
    pub date: Option<String>,
    pub ranks: u32,
    pub world_size: Option<i64>,
    pub backend: Option<String>,
    pub devices: Vec<String>,
    pub hosts: u32,
    /// The mesh (`tensor=2 × data=2`), else the groups' roles, else empty.
    pub layout: String,
    pub steps: u32,
    pub step_p50_ns: Option<i64>,
    pub step_p95_ns: Option<i64>,
    /// 1.4826 × MAD of the step time (`analysis.noise`).
    pub spread_ns: Option<i64>,
    pub comm_share: Option<f64>,
    pub exposed_comm_share: Option<f64>,
    pub lead: Option<Lead>,
    /// The analysis holds several jobs or none could be read: its figures are not a job's.
    pub errors: u32,
}

/// The run's first finding.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Lead {
    pub id: FindingId,
    pub ranks: Vec<u32>,
    pub message: String,
}

/// Days since 1970-01-01 → (year, month, day) (H. Hinnant's `civil_from_days`).
fn civil(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    (yoe + era * 400 + i64::from(m <= 2), m, d)
}

/// A Unix time in ns as `YYYY-MM-DD HH:MM UTC`; `None` before 2001 (not a wall clock).
pub fn utc(ns: i64) -> Option<String> {
    if ns < 1_000_000_000_000_000_000 {
        return None;
    }
    let secs = ns.div_euclid(1_000_000_000);
    let (y, m, d) = civil(secs.div_euclid(86_400));
    let s = secs.rem_euclid(86_400);
    Some(format!("{y:04}-{m:02}-{d:02} {:02}:{:02} UTC", s / 3600, (s % 3600) / 60))
}

/// One run's record from its analysis.
pub fn record(run: &str, a: &Analysis) -> RunRecord {
    let mut times = step_times(a);
    times.sort_unstable();
    let uniq = |mut v: Vec<String>| {
        v.sort();
        v.dedup();
        v
    };
    let mean = |f: &dyn Fn(&crate::analyze::RankTotals) -> f64| {
        (!a.rank_totals.is_empty())
            .then(|| a.rank_totals.iter().map(f).sum::<f64>() / a.rank_totals.len() as f64)
    };
    let layout = a.layout.as_ref().map_or(String::new(), |l| {
        if l.mesh.is_empty() {
            uniq(l.groups.iter().map(|g| g.role.as_str().to_string()).collect()).join(", ")
        } else {
            l.mesh.iter().map(|d| format!("{}={}", d.role.as_str(), d.size)).collect::<Vec<_>>().join(" × ")
        }
    });
    let start = a.steps.first().and_then(|s| s.per_rank.iter().map(|r| r.start_ns).min());
    RunRecord {
        run: run.to_string(),
        date: start.and_then(utc),
        ranks: u32::try_from(a.ranks.len()).unwrap_or(u32::MAX),
        world_size: a.ranks.iter().find_map(|r| r.world_size),
        backend: a.ranks.iter().find_map(|r| r.backend.clone()),
        devices: uniq(a.ranks.iter().flat_map(|r| r.devices.clone()).collect()),
        hosts: u32::try_from(uniq(a.ranks.iter().filter_map(|r| r.host.clone()).collect()).len())
            .unwrap_or(0),
        layout,
        steps: u32::try_from(times.len()).unwrap_or(u32::MAX),
        step_p50_ns: (!times.is_empty()).then(|| percentile(&times, 50.0)),
        step_p95_ns: (!times.is_empty()).then(|| percentile(&times, 95.0)),
        spread_ns: a.noise.as_ref().map(|n| n.spread_ns),
        comm_share: mean(&|t| t.comm_ratio),
        exposed_comm_share: mean(&|t| t.exposed_comm_ratio),
        lead: a.findings.first().map(|f| Lead {
            id: f.id,
            ranks: f.ranks.clone(),
            message: f.message.clone(),
        }),
        errors: u32::try_from(a.errors.len()).unwrap_or(u32::MAX),
    }
}

/// The records of named analyses, in the order given.
pub fn runs<'a>(items: impl IntoIterator<Item = (&'a str, &'a Analysis)>) -> Runs {
    Runs { schema: RunsSchema::V1, runs: items.into_iter().map(|(n, a)| record(n, a)).collect() }
}

fn cells(r: &RunRecord) -> Vec<String> {
    let opt = |v: Option<i64>| v.map_or("-".into(), |x| dur(x as f64));
    let share = |v: Option<f64>| v.map_or("-".into(), pct);
    let ranks = match r.world_size {
        Some(w) if w != i64::from(r.ranks) => format!("{} of {w}", r.ranks),
        _ => r.ranks.to_string(),
    };
    let lead = r.lead.as_ref().map_or("none".into(), |l| match l.ranks.as_slice() {
        [] => l.id.as_str().to_string(),
        [one] => format!("{} (rank {one})", l.id),
        many => format!("{} (ranks {})", l.id, super::verdict::compact(many)),
    });
    vec![
        r.run.clone(),
        r.date.clone().unwrap_or_else(|| "-".into()),
        ranks,
        r.backend.clone().unwrap_or_else(|| "-".into()),
        if r.devices.is_empty() { "-".into() } else { r.devices.join(", ") },
        if r.layout.is_empty() { "-".into() } else { r.layout.clone() },
        r.steps.to_string(),
        opt(r.step_p50_ns),
        opt(r.step_p95_ns),
        opt(r.spread_ns),
        share(r.comm_share),
        share(r.exposed_comm_share),
        if r.errors > 0 { "several jobs".into() } else { lead },
    ]
}

const HEAD: [&str; 13] = [
    "run",
    "date",
    "ranks",
    "backend",
    "devices",
    "layout",
    "steps",
    "step p50",
    "step p95",
    "spread",
    "comm",
    "exposed comm",
    "lead finding",
];

/// One line per run, columns aligned.
pub fn text(r: &Runs) -> String {
    let rows: Vec<Vec<String>> = r.runs.iter().map(cells).collect();
    let mut w: Vec<usize> = HEAD.iter().map(|h| h.chars().count()).collect();
    for row in &rows {
        for (k, c) in row.iter().enumerate() {
            w[k] = w[k].max(c.chars().count());
        }
    }
    let line = |cells: &[String]| {
        let s: Vec<String> =
            cells.iter().zip(&w).map(|(c, &n)| format!("{c}{}", " ".repeat(n - c.chars().count()))).collect();
        format!("{}\n", s.join("  ").trim_end())
    };
    let mut out = line(&HEAD.map(String::from));
    for row in &rows {
        out.push_str(&line(row));
    }
    out
}

/// A Markdown table.
pub fn markdown(r: &Runs) -> String {
    let mut out = format!("| {} |\n|{}\n", HEAD.join(" | "), "---|".repeat(HEAD.len()));
    for row in r.runs.iter().map(cells) {
        let row: Vec<String> = row.iter().map(|c| md_text(c)).collect();
        out.push_str(&format!("| {} |\n", row.join(" | ")));
    }
    out
}

/// CSV: one row per run, times in ns, shares as fractions.
pub fn csv(r: &Runs) -> String {
    let mut out = String::from("run,date,ranks,world_size,backend,devices,hosts,layout,steps,step_p50_ns,step_p95_ns,spread_ns,comm_share,exposed_comm_share,lead,lead_ranks,errors\n");
    let o = |v: Option<i64>| v.map_or(String::new(), |x| x.to_string());
    let f = |v: Option<f64>| v.map_or(String::new(), |x| format!("{x:.4}"));
    for x in &r.runs {
        let lead = x.lead.as_ref();
        out.push_str(&format!(
            "{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{}\n",
            csv_field(&x.run),
            x.date.clone().unwrap_or_default(),
            x.ranks,
            o(x.world_size),
            csv_field(x.backend.as_deref().unwrap_or("")),
            csv_field(&x.devices.join("; ")),
            x.hosts,
            csv_field(&x.layout),
            x.steps,
            o(x.step_p50_ns),
            o(x.step_p95_ns),
            o(x.spread_ns),
            f(x.comm_share),
            f(x.exposed_comm_share),
            lead.map_or("", |l| l.id.as_str()),
            csv_field(&lead.map_or(String::new(), |l| {
                l.ranks.iter().map(|r| r.to_string()).collect::<Vec<_>>().join(" ")
            })),
            x.errors
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unix_times_are_dates() {
        assert_eq!(utc(0), None);
        assert_eq!(utc(1_733_450_700_000_000_000).as_deref(), Some("2024-12-06 02:05 UTC"));
        // 2000-02-29 is before the floor; 2024-02-29 12:00 is a leap day.
        assert_eq!(utc(1_709_208_000_000_000_000).as_deref(), Some("2024-02-29 12:00 UTC"));
    }
}
