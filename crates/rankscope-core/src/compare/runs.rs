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
//! - the work per step and its rate (samples, tokens, FLOPs, throughput, MFU): [`super::rate`];
//! - runs of one model at several world sizes: scaling efficiency and where the loss comes from,
//!   [`super::scaling`].

use serde::{Deserialize, Serialize};

use super::figures::step_times;
use super::rate::{rate, Given, Rate};
use super::scaling::{self, Group, Parts, Point};
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
    /// Runs of one model at several world sizes ([`scaling`]).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub scaling: Vec<Group>,
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
    /// Samples, tokens and FLOPs per step, throughput and MFU ([`super::rate`]).
    #[serde(flatten)]
    pub rate: Rate,
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
pub fn record(run: &str, a: &Analysis, given: &Given) -> RunRecord {
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
    let devices = uniq(a.ranks.iter().flat_map(|r| r.devices.clone()).collect());
    let step_p50_ns = (!times.is_empty()).then(|| percentile(&times, 50.0));
    RunRecord {
        rate: rate(a, &devices, step_p50_ns, given),
        run: run.to_string(),
        date: start.and_then(utc),
        ranks: u32::try_from(a.ranks.len()).unwrap_or(u32::MAX),
        world_size: a.ranks.iter().find_map(|r| r.world_size),
        backend: a.ranks.iter().find_map(|r| r.backend.clone()),
        devices,
        hosts: u32::try_from(uniq(a.ranks.iter().filter_map(|r| r.host.clone()).collect()).len())
            .unwrap_or(0),
        layout,
        steps: u32::try_from(times.len()).unwrap_or(u32::MAX),
        step_p50_ns,
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

/// The records of named analyses, in the order given, and the scaling of each model run at
/// several world sizes.
pub fn runs<'a>(items: impl IntoIterator<Item = (&'a str, &'a Analysis)>, given: &Given) -> Runs {
    let items: Vec<(&str, &Analysis)> = items.into_iter().collect();
    let records: Vec<RunRecord> = items.iter().map(|&(n, a)| record(n, a, given)).collect();
    let members: Vec<scaling::Run<'_>> = records
        .iter()
        .zip(&items)
        .map(|(r, (_, a))| scaling::Run {
            name: &r.run,
            ranks: r.ranks,
            model: r.rate.model.as_deref().filter(|_| r.errors == 0),
            params: a.work.first().and_then(|w| w.work.signature.as_ref()).map_or(0, |s| s.params),
            samples: r.rate.samples_per_step.value,
            step_p50_ns: r.step_p50_ns,
            parts: Parts::of(a),
        })
        .collect();
    let scaling = scaling::groups(&members);
    Runs { schema: RunsSchema::V1, runs: records, scaling }
}

/// The scaling point of a run, if any.
fn point_of<'a>(r: &'a Runs, run: &str) -> Option<&'a Point> {
    r.scaling.iter().flat_map(|g| &g.points).find(|p| p.run == run)
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
        many => format!("{} (ranks {})", l.id, crate::words::rank_runs(many)),
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
        r.rate.samples_per_s.map_or("-".into(), |x| format!("{x:.0}")),
        r.rate.achieved_tflops.map_or("-".into(), |t| si(t * 1e12)),
        share(r.rate.mfu),
        if r.errors > 0 { "several jobs".into() } else { lead },
    ]
}

/// A count with an SI prefix and three significant digits (`112 M`, `1.23 T`).
fn si(x: f64) -> String {
    let (v, p) = [(1e15, "P"), (1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k")]
        .into_iter()
        .find(|(s, _)| x.abs() >= *s)
        .map_or((x, ""), |(s, p)| (x / s, p));
    let digits = if v.abs() >= 100.0 {
        0
    } else if v.abs() >= 10.0 {
        1
    } else {
        2
    };
    format!("{v:.digits$} {p}")
}

/// What each run's work figures rest on and why one is not known, one line per run.
fn notes(r: &Runs) -> Vec<String> {
    let mut out = Vec::new();
    for x in &r.runs {
        let q = &x.rate;
        let mut parts = Vec::new();
        let count = |what: &str, c: &super::rate::PerStep| match (c.value, c.from, &c.why_not) {
            (Some(v), Some(f), _) => format!("{what} per step {v} ({f})"),
            (_, _, Some(why)) => format!("{what} not known: {why}"),
            _ => format!("{what} not known"),
        };
        parts.push(count("samples", &q.samples_per_step));
        if let Some(n) = q.forward_passes {
            parts.push(format!("{n} forward passes per step (gradient accumulation or micro-batches)"));
        }
        parts.push(count("tokens", &q.tokens_per_step));
        match (q.flops_per_step, &q.flops_why_not) {
            (Some(f), _) => parts.push(format!(
                "{}FLOP per step from {}{}",
                si(f),
                q.flops_ops.join(", "),
                q.flops_share.map_or(String::new(), |s| format!(" ({} of compute time)", pct(s)))
            )),
            (None, Some(why)) => parts.push(format!("FLOPs not known: {why}")),
            (None, None) => {}
        }
        match (&q.peak, &q.mfu_why_not) {
            (Some(p), _) => parts.push(format!(
                "peak {} TFLOP/s per device ({})",
                p.tflops,
                p.device.as_ref().map_or("given".to_string(), |d| format!("{d}, dense BF16"))
            )),
            (None, Some(why)) => parts.push(format!("no MFU: {why}")),
            (None, None) => {}
        }
        out.push(format!("{}: {}", x.run, parts.join("; ")));
    }
    out
}

const SCALING_HEAD: [&str; 12] = [
    "run",
    "ranks",
    "base",
    "mode",
    "step p50",
    "ideal",
    "efficiency",
    "loss",
    "compute",
    "exposed transfer",
    "waits",
    "other",
];

fn scaling_rows(r: &Runs) -> Vec<(String, Vec<String>)> {
    r.scaling
        .iter()
        .map(|g| {
            let title = format!("Scaling of model {} ({} parameters)", g.model, g.params);
            let rows = g.points.iter().map(|p| {
                let d = |x: i64| dur(x as f64);
                vec![
                    p.run.clone(),
                    p.ranks.to_string(),
                    p.base.clone(),
                    p.mode.as_str().to_string(),
                    d(p.step_p50_ns),
                    d(p.ideal_ns),
                    p.efficiency.map_or("-".into(), pct),
                    d(p.loss_ns),
                    d(p.compute_ns),
                    d(p.exposed_transfer_ns),
                    d(p.exposed_wait_ns),
                    d(p.other_ns),
                ]
            });
            (title, rows.collect::<Vec<_>>())
        })
        .flat_map(|(t, rows)| {
            let mut v = vec![(t, Vec::new())];
            v.extend(rows.into_iter().map(|row| (String::new(), row)));
            v
        })
        .collect()
}

/// Columns aligned, with a header.
fn aligned(head: &[&str], rows: &[Vec<String>]) -> String {
    let mut w: Vec<usize> = head.iter().map(|h| h.chars().count()).collect();
    for row in rows {
        for (k, c) in row.iter().enumerate() {
            if let Some(x) = w.get_mut(k) {
                *x = (*x).max(c.chars().count());
            }
        }
    }
    let line = |cells: &[String]| {
        let s: Vec<String> =
            cells.iter().zip(&w).map(|(c, &n)| format!("{c}{}", " ".repeat(n - c.chars().count()))).collect();
        format!("{}\n", s.join("  ").trim_end())
    };
    let mut out = line(&head.iter().map(|h| h.to_string()).collect::<Vec<_>>());
    for row in rows {
        out.push_str(&line(row));
    }
    out
}

/// The scaling groups as tables (text or Markdown).
fn scaling_text(r: &Runs, md: bool) -> String {
    let mut out = String::new();
    let rows = scaling_rows(r);
    let mut k = 0;
    while k < rows.len() {
        let title = &rows[k].0;
        let body: Vec<Vec<String>> =
            rows[k + 1..].iter().take_while(|(t, _)| t.is_empty()).map(|(_, r)| r.clone()).collect();
        k += 1 + body.len();
        if md {
            out.push_str(&format!("\n**{}**\n\n{}", md_text(title), md_table(&SCALING_HEAD, &body)));
        } else {
            out.push_str(&format!("\n{title}\n{}", aligned(&SCALING_HEAD, &body)));
        }
    }
    out
}

fn md_table(head: &[&str], rows: &[Vec<String>]) -> String {
    let mut out = format!("| {} |\n|{}\n", head.join(" | "), "---|".repeat(head.len()));
    for row in rows {
        let row: Vec<String> = row.iter().map(|c| md_text(c)).collect();
        out.push_str(&format!("| {} |\n", row.join(" | ")));
    }
    out
}

const HEAD: [&str; 16] = [
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
    "samples/s",
    "FLOP/s",
    "MFU",
    "lead finding",
];

/// `rankscope runs --json`: the document, pretty-printed, with a final newline.
pub fn json(r: &Runs) -> String {
    let mut s = serde_json::to_string_pretty(r).unwrap_or_else(|e| format!("{{\"error\": \"{e}\"}}"));
    s.push('\n');
    s
}

/// One line per run, columns aligned; then what the work figures rest on, and the scaling.
pub fn text(r: &Runs) -> String {
    let rows: Vec<Vec<String>> = r.runs.iter().map(cells).collect();
    let mut out = aligned(&HEAD, &rows);
    out.push('\n');
    for n in notes(r) {
        out.push_str(&format!("{n}\n"));
    }
    out.push_str(&scaling_text(r, false));
    out
}

/// A Markdown table, the notes as a list, the scaling tables.
pub fn markdown(r: &Runs) -> String {
    let rows: Vec<Vec<String>> = r.runs.iter().map(cells).collect();
    let mut out = md_table(&HEAD, &rows);
    out.push('\n');
    for n in notes(r) {
        out.push_str(&format!("- {}\n", md_text(&n)));
    }
    out.push_str(&scaling_text(r, true));
    out
}

/// CSV: one row per run, times in ns, shares as fractions; the run's scaling point (when it is
/// in a group) in the last columns.
pub fn csv(r: &Runs) -> String {
    let mut out = String::from("run,date,ranks,world_size,backend,devices,hosts,layout,steps,step_p50_ns,step_p95_ns,spread_ns,comm_share,exposed_comm_share,lead,lead_ranks,errors,samples_per_step,samples_from,tokens_per_step,tokens_from,samples_per_s,tokens_per_s,flops_per_step,flops_share,achieved_tflops,peak_tflops,mfu,model,scaling_base,scaling_mode,scaling_efficiency,ideal_ns,loss_ns,loss_compute_ns,loss_exposed_transfer_ns,loss_exposed_wait_ns,loss_other_ns\n");
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
        let q = &x.rate;
        let from = |c: &super::rate::PerStep| c.from.map_or("", |s| s.as_str());
        let g = |v: Option<f64>| v.map_or(String::new(), |x| format!("{x:.6e}"));
        let p = point_of(r, &x.run);
        let pi = |k: fn(&Point) -> i64| p.map_or(String::new(), |p| k(p).to_string());
        out.pop();
        out.push_str(&format!(
            ",{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{}\n",
            o(q.samples_per_step.value),
            from(&q.samples_per_step),
            o(q.tokens_per_step.value),
            from(&q.tokens_per_step),
            f(q.samples_per_s),
            f(q.tokens_per_s),
            g(q.flops_per_step),
            f(q.flops_share),
            g(q.achieved_tflops),
            q.peak.as_ref().map_or(String::new(), |p| p.tflops.to_string()),
            f(q.mfu),
            q.model.clone().unwrap_or_default(),
            csv_field(p.map_or("", |p| p.base.as_str())),
            p.map_or("", |p| p.mode.as_str()),
            f(p.and_then(|p| p.efficiency)),
            pi(|p| p.ideal_ns),
            pi(|p| p.loss_ns),
            pi(|p| p.compute_ns),
            pi(|p| p.exposed_transfer_ns),
            pi(|p| p.exposed_wait_ns),
            pi(|p| p.other_ns),
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_have_prefixes() {
        assert_eq!(si(112_197_632.0), "112 M");
        assert_eq!(si(1.234e12), "1.23 T");
        assert_eq!(si(54.4e9), "54.4 G");
        assert_eq!(si(12.0), "12.0 ");
    }

    #[test]
    fn unix_times_are_dates() {
        assert_eq!(utc(0), None);
        assert_eq!(utc(1_733_450_700_000_000_000).as_deref(), Some("2024-12-06 02:05 UTC"));
        // 2000-02-29 is before the floor; 2024-02-29 12:00 is a leap day.
        assert_eq!(utc(1_709_208_000_000_000_000).as_deref(), Some("2024-02-29 12:00 UTC"));
    }
}
