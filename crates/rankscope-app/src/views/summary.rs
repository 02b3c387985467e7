//! Summary: the findings first (the cause leads), then the job facts, the exports, and one row
//! per rank with its headline figures.

use yew::prelude::*;

use super::exports::Exports;
use super::findings::Findings;
use crate::format;
use crate::protocol::RankId;
use crate::state::{held, JobView};

#[derive(Properties, PartialEq, Debug)]
pub struct Props {
    pub job: std::rc::Rc<JobView>,
    pub demo: bool,
}

#[function_component(Summary)]
pub fn summary(p: &Props) -> Html {
    let f = &p.job.facts;
    let world = if f.world_sizes.is_empty() {
        "not recorded".to_string()
    } else {
        f.world_sizes.iter().map(|w| w.to_string()).collect::<Vec<_>>().join(" / ")
    };
    let steps = match (f.steps.first(), f.steps.last()) {
        _ if f.steps_synthetic && f.steps.len() <= 1 => "none marked (whole trace as one step)".to_string(),
        (Some(a), Some(b)) if a != b => format!("{} (#{a} – #{b})", f.steps.len()),
        (Some(a), _) => format!("1 (#{a})"),
        _ => "none".to_string(),
    };
    // A digest's rank whose trace is not loaded has its figures, not its events: what is
    // counted from events (GPU ops, comm kernels, devices per file) is not in the digest.
    let from_digest = |id: RankId| p.job.digest.is_some() && !held(id);
    let counted = !p.job.ranks.iter().any(|(id, _)| from_digest(*id));
    let devices = if f.devices.is_empty() {
        "none recorded (CPU only)".to_string()
    } else if counted {
        f.devices.iter().map(|(n, k)| format!("{n} (up to {k} per file)")).collect::<Vec<_>>().join(", ")
    } else {
        let names: Vec<&str> = f.devices.iter().map(|(n, _)| n.as_str()).collect();
        format!("{} (how many per file is not in a job digest)", names.join(", "))
    };
    let a = &p.job.analysis;
    let fact = |k: &str, v: String, id: &str| {
        html! { <div class="fact"><dt>{k.to_string()}</dt><dd data-testid={id.to_string()}>{v}</dd></div> }
    };
    html! {
        <section class="summary" data-testid="summary">
            if p.demo {
                <p class="banner">{"Synthetic demo: 8 ranks generated in this tab by rankscope's trace generator (rank 5 is a straggler; part of the gradient communication is exposed)."}</p>
            }
            // Files of different jobs: said first (the analysis judges nothing over them).
            { for a.errors.iter().filter(|e| matches!(e, rankscope_core::normalize::JobError::MixedJobs { .. })).map(|e| html! {
                <p class="error" data-testid="mixed-jobs">{format!("{}. No finding is given over files of different jobs.", capitalized(&e.to_string()))}</p>
            }) }
            <Findings job={p.job.clone()} />
            <super::whatif::WhatIf job={p.job.clone()} />
            if let Some(fr) = &p.job.flight_recorder {
                <super::flight::FlightRecorder fr={fr.clone()} />
            }
            <super::beside::Beside job={p.job.clone()} />
            <dl class="facts">
                { fact("Ranks", format!("{}{}", f.ranks,
                    if f.missing_ranks.is_empty() { String::new() } else { format!(" ({} missing: {:?})", f.missing_ranks.len(), f.missing_ranks) }), "fact-ranks") }
                { fact("World size", world, "fact-world-size") }
                { fact("Backend", if f.backends.is_empty() { "not recorded".into() } else { f.backends.join(", ") }, "fact-backend") }
                { fact("Devices", devices, "fact-devices") }
                { fact("Steps", steps, "fact-steps") }
                if let Some(n) = &a.noise {
                    { fact("Step time", noise_line(n), "fact-noise") }
                }
                if !a.frameworks.is_empty() {
                    { fact("Frameworks", a.frameworks.iter().map(|f| format!("{} ({}, {} rank{})", f.framework.name(), f.evidence, f.ranks, if f.ranks == 1 { "" } else { "s" })).collect::<Vec<_>>().join(", "), "fact-frameworks") }
                }
                { fact("Span", format!("{} (raw clocks, not aligned)", format::duration((f.span_end_ns - f.span_start_ns) as f64)), "fact-span") }
                { fact("Events", format::thousands(f.events), "fact-events") }
                if let Some(name) = &p.job.digest {
                    { fact("Job digest", format!("{name}: every rank's figures, no events (drop ranks' trace files to add their timelines)"), "fact-digest") }
                } else {
                    { fact("Read", format::bytes(f.input_bytes), "fact-bytes") }
                }
            </dl>
            <Exports job={p.job.clone()} />
            <super::capture::CaptureGaps job={p.job.clone()} />
            if !f.duplicate_ranks.is_empty() {
                <p class="error">{format!("Several files claim rank(s) {:?}: see Diagnostics.", f.duplicate_ranks)}</p>
            }
            <table class="ranks" data-testid="rank-table">
                <thead><tr>
                    <th>{"Rank"}</th><th>{"File"}</th><th class="num">{"Events"}</th><th class="num">{"Steps"}</th>
                    <th class="num">{"GPU ops"}</th><th class="num">{"Comm kernels"}</th><th class="num">{"Span"}</th>
                    <th class="num" title="exposed communication / step time: communication not hidden under compute">{"Exposed comm"}</th>
                    <th class="num" title="share of communication overlapped by compute">{"Overlap"}</th>
                    <th class="num" title="idle / step time: neither compute, communication nor memory">{"Idle"}</th>
                    <th class="num" title="median step time">{"Step p50"}</th>
                    <th class="num">{"Diagnostics"}</th>
                </tr></thead>
                <tbody>
                { for p.job.ranks.iter().zip(analysed_rows(&p.job)).map(|((id, r), own)| {
                    let problems = r.problems();
                    let analysed = own.is_some();
                    let t = own.and_then(|i| a.rank_totals.get(i));
                    let pct = |v: Option<f64>| v.map_or("–".to_string(), |v| format!("{:.1}%", 100.0 * v));
                    let idle = t.and_then(|t| (t.wall_ns > 0).then(|| t.idle_ns as f64 / t.wall_ns as f64));
                    let p50 = t.and_then(|t| t.step_time.as_ref()).map(|s| s.p50_ns);
                    let counted = !from_digest(*id);
                    let (gpu_ops, comm_kernels) = (counted.then_some(r.gpu_ops), counted.then_some(r.comm_kernels));
                    html! {
                        <tr key={*id} data-testid="rank-row" data-rank={r.rank.to_string()} data-events={r.events.to_string()}
                            data-steps={r.steps.len().to_string()}
                            data-gpu-ops={gpu_ops.map(|n| n.to_string()).unwrap_or_default()}
                            data-comm-kernels={comm_kernels.map(|n| n.to_string()).unwrap_or_default()} data-diagnostics={r.diagnostics.len().to_string()} data-rows={r.rows.to_string()}
                            data-exposed-comm-ratio={t.map(|t| t.exposed_comm_ratio.to_string()).unwrap_or_default()}
                            data-overlap-coverage={t.map(|t| t.overlap_coverage.to_string()).unwrap_or_default()}
                            data-idle-ns={t.map(|t| t.idle_ns.to_string()).unwrap_or_default()}
                            data-wall-ns={t.map(|t| t.wall_ns.to_string()).unwrap_or_default()}
                            data-step-p50-ns={p50.map(|v| v.to_string()).unwrap_or_default()}>
                            <td class="num">{r.rank}</td>
                            <td class="name" title={format::inert(&r.file)}>{format::inert(&r.file)}</td>
                            <td class="num">{format::thousands(r.events)}</td>
                            <td class="num">{if r.steps_synthetic { "–".to_string() } else { r.steps.len().to_string() }}</td>
                            { counted_cell(gpu_ops, "gpu-ops") }
                            { counted_cell(comm_kernels, "comm-kernels") }
                            <td class="num">{format::duration((r.span_end_ns - r.span_start_ns) as f64)}</td>
                            <td class="num" data-testid="exposed-pct">{pct(t.map(|t| t.exposed_comm_ratio))}</td>
                            <td class="num">{pct(t.and_then(|t| (t.comm_ns > 0).then_some(t.overlap_coverage)))}</td>
                            <td class="num">{pct(idle)}</td>
                            <td class="num">{p50.map_or("–".to_string(), |v| format::duration(v as f64))}</td>
                            <td class="num">
                                {r.diagnostics.len()}
                                if problems > 0 { <span class="warn">{format!(" ({problems} problem{})", if problems == 1 { "" } else { "s" })}</span> }
                                if !analysed { <span class="error" data-testid="not-analysed">{format!(" (rank {} is claimed by another file too: not analysed)", r.rank)}</span> }
                            </td>
                        </tr>
                    }
                }) }
                </tbody>
            </table>
            if !counted {
                <p class="muted" data-testid="digest-counts-note">
                    {"GPU ops and comm kernels are counted from a rank's events: \u{2013} where the job digest alone gives the rank (it keeps figures, not events). Drop a rank's trace file to count them."}
                </p>
            }
        </section>
    }
}

/// For each row of the job's ranks, the index of its own rank in the analysis (whose `ranks` and
/// `rank_totals` are parallel), found by rank and file. Two files may claim one rank and the
/// analysis keeps both (as `rankscope analyze` does), so the rank alone would give each the
/// first one's figures; two files of one name are told apart by load order, which both lists
/// keep. None: the analysis left the row's file out.
fn analysed_rows(job: &JobView) -> Vec<Option<usize>> {
    let a = &job.analysis;
    let mut taken = vec![false; a.ranks.len()];
    job.ranks
        .iter()
        .map(|(_, r)| {
            let i =
                a.ranks.iter().zip(&taken).position(|(x, t)| !t && x.rank == r.rank && x.source == r.file)?;
            taken[i] = true;
            Some(i)
        })
        .collect()
}

/// A count made from a rank's events, or a dash that says why there is none: a job digest keeps
/// each rank's figures, not the events they would be counted from.
fn counted_cell(n: Option<u64>, id: &str) -> Html {
    if let Some(n) = n {
        html! { <td class="num" data-testid={id.to_string()}>{format::thousands(n)}</td> }
    } else {
        html! {
            <td class="num muted" data-testid={id.to_string()}
                title="Not in a job digest: it keeps each rank's figures, not the events this is counted from. Drop the rank's trace file to count them.">{"–"}</td>
        }
    }
}

/// The run's noise floor: the usual step, how much it varies, the steps that stand out.
fn noise_line(n: &rankscope_core::analyze::noise::Noise) -> String {
    let out = if n.outliers.is_empty() {
        "no step stands out".to_string()
    } else {
        let steps: Vec<String> = n
            .outliers
            .iter()
            .map(|o| format!("#{} (+{})", o.step, format::duration(o.excess_ns as f64)))
            .collect();
        format!("standing out: {}", steps.join(", "))
    };
    format!(
        "{} (slowest rank), varying by {} from step to step over {} steps; {out}. Differences below this are noise.",
        format::duration(n.step_ns as f64),
        format::duration(n.spread_ns as f64),
        n.steps
    )
}

/// `s` with its first letter in capitals.
fn capitalized(s: &str) -> String {
    let mut c = s.chars();
    c.next().map(|f| f.to_uppercase().chain(c).collect()).unwrap_or_default()
}
