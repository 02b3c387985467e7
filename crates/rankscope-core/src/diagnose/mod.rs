//! The layer that judges: findings from the figures the analysis measured ([`crate::analyze`]),
//! worded as an expert would (DOMAIN.md, last section; docs/metrics.md, "Findings"), and the
//! outputs that carry judgement: the Markdown note ([`markdown`]) and the `--fail-on` gates
//! ([`gates`]).
//!
//! **A cause is a file** under [`causes`]: it measures one thing from the analysis and declares,
//! as data ([`Cause`]), its finding ids, its stage in the order of reasoning, the findings it
//! explains, the finding whose time its own is part of, and the causes it excludes. Adding a
//! cause is adding a file and one line in the registry ([`causes::CAUSES`]).
//!
//! **One arbitration** ([`arbitrate`]) reads those declarations; no cause knows another's
//! rules. In order:
//! 1. **A job that stopped** first: the stopped stage's causes run on every step; if one finds
//!    a divergence, the steps it stopped (and every step of a partial collective) leave the
//!    steady state, and the causes it excludes are not run.
//!    A step in which a rank captures a CUDA / HIP graph ([`crate::analyze::reading`]) is no
//!    steady state either; when every step is, nothing else is judged.
//! 2. **The others**, in the registry's order, each seeing what the causes before it found; a
//!    cause excluded by one already found is not run.
//! 3. **Explained findings** are dropped (a candidate whose id another cause's candidate
//!    explains).
//! 4. **Parts of a whole**: every part found takes its gain off the whole's (the parts' gains
//!    add up; a part too small to report still is not the whole's to claim: the whole's fix
//!    does not remove it), and a part names its whole among its symptoms; the whole may say so.
//! 5. **Worth acting on**: below the floor ([`Ctx::floor_ns`]: 1% of the step, at least
//!    20 µs) a finding is dropped; a gain is capped at the step; the rest are ranked by gain,
//!    then severity, then id, information (severity info) after all advice. A stopped job's first divergence comes before them all (the
//!    later ones are usually its consequences).
//!
//! Symptom rules of thumb (DOMAIN.md): data-parallel communication above ~10% of the step is not
//! hidden; well-tuned data parallel hides > 90% of it; per-rank spread above ~5% deserves a look;
//! eager kernel launch costs ~3–10 µs per kernel.
//!
//! **Layering**: `analyze` measures and never imports this module; findings read figures,
//! never recompute what the analysis measured. The shells reach it through one call
//! ([`combine`], which [`crate::job`] makes for them).

pub mod beside;
mod cause;
pub mod causes;
mod context;
pub mod gates;
pub mod markdown;
pub mod serving;
pub mod understood;

use std::collections::BTreeSet;

pub use cause::{Candidate, Cause, Found, Stage};
pub use causes::{CauseId, CAUSES};
pub use context::{severity_for, Ctx};

use crate::analyze::collectives::Op;
use crate::analyze::whatif::timeline::{Counterfactual, ReplayedFix};
use crate::analyze::whatif::{self, Model};
use crate::analyze::{self, Analysis, Options, RankPart};
use crate::finding::{EvidenceKey, Finding, FindingId, Severity, Thresholds};
use crate::normalize::{Job, JobError};

/// The job half with its findings: [`analyze::combine`] measures, [`findings`] judges. Every
/// shell's analysis is this call (through [`crate::job::combine`]).
pub fn combine(parts: Vec<RankPart>, errors: Vec<JobError>, opts: &Options) -> Analysis {
    combine_beside(parts, errors, opts, &analyze::beside::Inputs::default())
}

/// [`combine`] with the evidence dropped beside the traces: read and joined with them
/// ([`analyze::beside::measure`]), its findings ranked among the trace's ([`beside::merge`]).
pub fn combine_beside(
    parts: Vec<RankPart>,
    errors: Vec<JobError>,
    opts: &Options,
    inputs: &analyze::beside::Inputs<'_>,
) -> Analysis {
    let m = analyze::combine(parts, errors, opts);
    let mut a = m.analysis;
    let (found, lead) = judge(&a, &m.ops, Some(&m.model), &opts.thresholds);
    a.findings = serving::for_serving(&a, found);
    // The typical step replayed with the lead finding's cause taken away; none for a job that
    // stopped (no steady state to replay).
    let lead = lead.filter(|l| a.findings.first().is_some_and(|f| f.id == l.finding && f.ranks == l.ranks));
    let stopped = a.findings.iter().any(|f| f.id == FindingId::CollectiveMismatch);
    if let Some(w) = a.whatif.as_mut().filter(|_| !stopped) {
        let late: Vec<u32> = w.ranks.iter().map(|g| g.rank).collect();
        w.timeline = whatif::timeline::build(&m.model, &late, lead.as_ref());
    }
    a.beside = analyze::beside::measure(&a, &m.ops, inputs);
    let found = beside::findings(&a);
    beside::merge(&mut a.findings, found);
    a
}

/// A whole job held in memory, measured and judged: every rank's part, then [`combine`].
pub fn analyze(job: &Job, opts: &Options) -> Analysis {
    let parts = job
        .ranks
        .iter()
        .map(|r| analyze::rank_part(r, &job.strings, opts.kernel_wait_threshold_ns))
        .collect();
    combine(parts, job.errors.clone(), opts)
}

/// Every finding of the analysis, ranked: the causes of the registry run in the order of
/// reasoning, and the arbitration settles what they found.
pub fn findings(a: &Analysis, ops: &[Op], model: Option<&Model>, th: &Thresholds) -> Vec<Finding> {
    judge(a, ops, model, th).0
}

/// [`findings`], and the change the lead finding's gain was replayed with, where it was
/// ([`whatif::timeline`]).
pub fn judge(
    a: &Analysis,
    ops: &[Op],
    model: Option<&Model>,
    th: &Thresholds,
) -> (Vec<Finding>, Option<ReplayedFix>) {
    // Files of different jobs ([`analyze::jobs`]) make no job to judge: the report says so first.
    if a.errors.iter().any(|e| matches!(e, JobError::MixedJobs { .. })) {
        return (Vec::new(), None);
    }
    let mut found = Found::default();
    let every_step = Ctx::new(a, ops, th, &BTreeSet::new());
    for c in CAUSES.iter().filter(|c| c.stage == Stage::Stopped) {
        run(c, &every_step, &mut found);
    }
    // A hang or a mismatch: the steps it stopped are no steady state, and neither are the
    // steps of a collective some rank never joined.
    let mut stopped: BTreeSet<u32> = if found.list.is_empty() {
        BTreeSet::new()
    } else {
        let partial = ops.iter().filter(|o| o.partial).map(|o| o.step);
        partial.chain(found.list.iter().flat_map(|c| c.finding.steps.iter().copied())).collect()
    };
    // A step in which a rank captures a CUDA / HIP graph is set-up (launches recorded, not
    // run), no step to judge; when every step is, nothing is judged.
    let capture = understood::capture_steps(a);
    if !capture.is_empty() && a.steps.iter().all(|s| capture.contains(&s.step)) {
        return (arbitrate(found, every_step.floor_ns(), every_step.step_ns), None);
    }
    stopped.extend(capture);
    let mut cx = Ctx::new(a, ops, th, &stopped);
    cx.model = model;
    for c in CAUSES.iter().filter(|c| c.stage != Stage::Stopped) {
        run(c, &cx, &mut found);
    }
    replayed(&cx, &mut found);
    let fixes: Vec<ReplayedFix> = found
        .list
        .iter()
        .filter_map(|c| {
            let (change, how) = c.replayed.clone()?;
            Some(ReplayedFix { finding: c.finding.id, ranks: c.finding.ranks.clone(), change, how })
        })
        .collect();
    let out = arbitrate(found, cx.floor_ns(), cx.step_ns);
    let lead = out.first().and_then(|f| fixes.into_iter().find(|l| l.finding == f.id && l.ranks == f.ranks));
    (out, lead)
}

/// The gain of a late rank, where the what-if replay holds ([`Ctx::replay_usable`]): the
/// replay of the job with the rank's own time brought to its peers' median, against the replay
/// as recorded (docs/metrics.md, "What-if"). The cause's own estimate stays where the replay
/// does not hold (a pipeline's exchanges, a replay far from the record).
fn replayed(cx: &Ctx<'_>, found: &mut Found) {
    let Some(w) = cx.a.whatif.as_ref().filter(|_| cx.replay_usable()) else { return };
    let late = [
        FindingId::HostStall,
        FindingId::InputBound,
        FindingId::Straggler,
        FindingId::SlowDevice,
        FindingId::ComputeImbalance,
    ];
    for c in found.list.iter_mut().filter(|c| c.cause == CauseId::LateRank && late.contains(&c.finding.id)) {
        let f = &mut c.finding;
        let [rank] = f.ranks[..] else { continue };
        let Some(g) = w.ranks.iter().find(|g| g.rank == rank) else { continue };
        f.message.push_str(&format!(
            " Replayed from the traces with rank {rank}'s own time at its peers' median (everything else as recorded), the job's step is {} shorter.",
            crate::words::dur(g.gain_ns as f64)
        ));
        f.evidence.insert(crate::finding::EvidenceKey::ReplayedGainNs, g.gain_ns as f64);
        f.evidence.insert(crate::finding::EvidenceKey::ReplayError, w.max_error);
        f.impact_ns = g.gain_ns;
        f.severity = replayed_severity(f.severity, f.impact_ns, cx.step_ns);
        c.replayed = Some((
            Counterfactual::Peers(BTreeSet::from([rank])),
            format!("rank {rank}'s own time at its peers' median"),
        ));
    }
    let Some(m) = cx.model else { return };
    // The replay as recorded, made once for the scenarios below.
    let mut recorded: Option<f64> = None;
    for c in found.list.iter_mut() {
        let f = &mut c.finding;
        let (change, how) = match c.cause {
            CauseId::ExpertImbalance => match evenly_routed(cx, f) {
                Some(s) => (s, "the group's tokens routed evenly (each member's own time at the group's mean in every place, each all_to_all moving its members' mean)".to_string()),
                None => continue,
            },
            CauseId::SharedStall => match without_stall(f) {
                Some(s) => (s, format!("every rank's operator-free time in `{}` taken out", f.location.as_ref().and_then(|l| l.regions.last()).map_or("", String::as_str))),
                None => continue,
            },
            CauseId::PipelineBubble => match balanced_stages(cx, f) {
                Some(s) => (s, format!("the stages balanced (each stage's own time at the stages' mean compute, layers moved from stage {}'s rank to the others)", f.ranks[0])),
                None => continue,
            },
            _ => continue,
        };
        let Some(scenario) = change.scenario(m) else { continue };
        let before = *recorded.get_or_insert_with(|| {
            whatif::Scenario::new(m, &BTreeSet::new(), &Default::default()).mean_step_ns(m)
        });
        let gain = (before - scenario.mean_step_ns(m)).max(0.0);
        f.message.push_str(&format!(
            " Replayed from the traces with {how}, the job's step is {} shorter.",
            crate::words::dur(gain)
        ));
        f.evidence.insert(crate::finding::EvidenceKey::ReplayedGainNs, gain);
        f.evidence.insert(crate::finding::EvidenceKey::ReplayError, w.max_error);
        f.impact_ns = gain as i64;
        f.severity = replayed_severity(f.severity, f.impact_ns, cx.step_ns);
        c.replayed = Some((change, how));
    }
}

/// A finding's severity once its gain is the replay's: the gain's share of the step, as the
/// cause judged its own estimate ([`severity_for`]), so the severity and the gain tell one story
/// (a medium finding gains at least a twentieth of the step). Information stays information.
fn replayed_severity(was: Severity, gain_ns: i64, step_ns: f64) -> Severity {
    if was == Severity::Info {
        return was;
    }
    severity_for(gain_ns as f64, step_ns)
}

/// The scenario of a stall every rank has taken away ([`whatif::Scenario::without_region`]):
/// the located region's operator-free time out of every rank's own time.
fn without_stall(f: &Finding) -> Option<Counterfactual> {
    let path = &f.location.as_ref()?.regions;
    let name = path.last()?.clone();
    let parent = path.len().checked_sub(2).and_then(|k| path.get(k)).cloned().unwrap_or_default();
    Some(Counterfactual::WithoutRegion { name, parent })
}

/// The scenario of a pipeline's stages balanced ([`whatif::Scenario::scaled`]): each stage's own
/// time (and its data-parallel replicas') scaled to the stages' mean compute per step (layers
/// moved from the longest stage to the others, the total unchanged), its gain taken against the
/// replay as recorded. For a bubble with one stage far slower than the rest (the finding names it alone),
/// every exchange of the pipeline paired (else the finding keeps its own estimate).
fn balanced_stages(cx: &Ctx<'_>, f: &Finding) -> Option<Counterfactual> {
    let p = cx.a.pipeline.as_ref()?;
    if f.ranks.len() != 1 || p.per_stage.len() < 2 || p.per_stage.iter().any(|s| s.compute_ns <= 0) {
        return None;
    }
    // An exchange left unpaired keeps its wait as its rank's own time in the model, which
    // scaling a stage's own time would scale too: every exchange must be paired.
    if p.links.iter().any(|l| l.unmatched_sends > 0 || l.unmatched_recvs > 0) {
        return None;
    }
    let mean = p.per_stage.iter().map(|s| s.compute_ns as f64).sum::<f64>() / p.per_stage.len() as f64;
    let mut factors = std::collections::BTreeMap::new();
    for s in &p.per_stage {
        let k = mean / s.compute_ns as f64;
        factors.insert(s.rank, k);
        // Its replicas (the data-parallel groups it is in) hold the same layers.
        let replicas =
            cx.a.layout
                .iter()
                .flat_map(|l| l.groups.iter())
                .filter(|g| g.role == crate::analyze::layout::Role::Data && g.ranks.contains(&s.rank));
        for r in replicas.flat_map(|g| g.ranks.iter()) {
            factors.entry(*r).or_insert(k);
        }
    }
    Some(Counterfactual::Scaled(factors))
}

/// The scenario of an expert-parallel group's tokens routed evenly ([`whatif::Scenario::even`]):
/// the replay with the work of the finding's rank's expert group spread over its members and
/// each of the group's all_to_alls taking the transfer of its members' mean bytes (its
/// recorded transfer was set by the largest), against the replay as recorded.
fn evenly_routed(cx: &Ctx<'_>, f: &Finding) -> Option<Counterfactual> {
    let [rank] = f.ranks[..] else { return None };
    let layout = cx.a.layout.as_ref()?;
    let g = layout
        .groups
        .iter()
        .find(|g| g.role == crate::analyze::layout::Role::Expert && g.ranks.contains(&rank))?;
    let members: BTreeSet<u32> = g.ranks.iter().copied().collect();
    let mut transfer = std::collections::BTreeMap::new();
    for (k, o) in cx.ops.iter().enumerate() {
        if o.pg != g.name || o.kind != crate::model::CollKind::AllToAll || o.partial {
            continue;
        }
        let bytes: Vec<f64> = o.per_rank_bytes.iter().map(|b| b.unwrap_or(0).max(0) as f64).collect();
        let max = bytes.iter().copied().fold(0.0, f64::max);
        if max > 0.0 {
            let mean = bytes.iter().sum::<f64>() / bytes.len() as f64;
            transfer.insert(k, (o.transfer_ns as f64 * mean / max) as i64);
        }
    }
    Some(Counterfactual::Even { group: members, transfer })
}

/// Runs a cause unless one already found excludes it.
fn run(c: &Cause, cx: &Ctx<'_>, found: &mut Found) {
    let excluded = found.list.iter().any(|x| cause(x.cause).excludes.contains(&c.id));
    if excluded {
        return;
    }
    let new = (c.find)(cx, found);
    found.list.extend(new.into_iter().map(|finding| {
        let replayed = cx.take_replayed(&finding);
        Candidate { cause: c.id, finding, replayed }
    }));
}

/// The declaration of a cause of the registry.
fn cause(id: CauseId) -> &'static Cause {
    // The registry lists every id once (its test says so), in the enum's order.
    CAUSES[id as usize]
}

/// Explained findings dropped, parts taken off their wholes, the floor (`floor_ns`), the cap
/// at the step (`step_ns`), the ranking (module doc, steps 3 to 5).
pub fn arbitrate(found: Found, floor_ns: f64, step_ns: f64) -> Vec<Finding> {
    let (stopped, rest): (Vec<Candidate>, Vec<Candidate>) =
        found.list.into_iter().partition(|c| cause(c.cause).stage == Stage::Stopped);
    // Explained: another cause's candidate explains this one's id.
    let explained = |c: &Candidate| {
        rest.iter().any(|x| x.cause != c.cause && cause(x.cause).explains.contains(&c.finding.id))
    };
    let keep: Vec<bool> = rest.iter().map(|c| !explained(c)).collect();
    let mut rest: Vec<Candidate> = rest.into_iter().zip(keep).filter_map(|(c, k)| k.then_some(c)).collect();
    // Parts of a whole: every part found takes its gain off the whole's.
    for w in 0..rest.len() {
        let (whole_id, names_part) = (rest[w].finding.id, cause(rest[w].cause).names_part);
        let parts: Vec<usize> =
            (0..rest.len()).filter(|&p| p != w && cause(rest[p].cause).part_of == Some(whole_id)).collect();
        for p in parts {
            let (gain, part) = (rest[p].finding.impact_ns, rest[p].finding.clone());
            let whole = &mut rest[w].finding;
            whole.impact_ns = (whole.impact_ns - gain).max(0);
            if let Some(say) = names_part {
                whole.message.push_str(&say(&part));
            }
            let part = &mut rest[p].finding;
            if !part.symptoms.contains(&whole_id) {
                part.symptoms.push(whole_id);
            }
        }
    }
    // A delay ranks before the waiting it is part of: who the others wait for is the question
    // before how the schedule waits (a stalled rank before the pipeline's bubble it deepens).
    let mut before: Vec<(FindingId, FindingId)> = Vec::new();
    for c in &rest {
        let d = cause(c.cause);
        if let Some(w) = d.part_of {
            let waiting = |id: FindingId| {
                rest.iter().any(|x| x.finding.id == id && cause(x.cause).stage == Stage::Waiting)
            };
            if d.stage == Stage::Waiting && waiting(w) && c.finding.impact_ns as f64 >= floor_ns {
                before.push((c.finding.id, w));
            }
        }
    }
    // Worth acting on, capped at the step, ranked.
    let cap = step_ns.max(0.0) as i64;
    let mut out: Vec<Finding> =
        rest.into_iter().map(|c| c.finding).filter(|f| f.impact_ns as f64 >= floor_ns).collect();
    for f in &mut out {
        f.impact_ns = f.impact_ns.min(cap);
    }
    // Information (severity info: noise, what was measured without advice) after all advice.
    let info = |f: &Finding| f.severity == Severity::Info;
    // A low finding is one the evidence does not carry further (noise, an undecided reading, a
    // trade the job made by design): the findings above it come first, whatever their gains.
    let low = |f: &Finding| f.severity <= Severity::Low;
    // Of one level: the job's own faults, then a trade it made by design (memory for time),
    // then the hosts' noise.
    let class = |f: &Finding| {
        if f.evidence.contains(EvidenceKey::Noise) {
            2
        } else {
            u8::from(f.evidence.contains(EvidenceKey::Trade))
        }
    };
    out.sort_by(|x, y| {
        info(x)
            .cmp(&info(y))
            .then(low(x).cmp(&low(y)))
            .then(class(x).cmp(&class(y)))
            .then(y.impact_ns.cmp(&x.impact_ns))
            .then(y.severity.cmp(&x.severity))
            .then(x.id.as_str().cmp(y.id.as_str()))
    });
    // Then each delay moves ahead of the whole it is part of.
    for (part, whole) in before {
        let (Some(p), Some(w)) =
            (out.iter().position(|f| f.id == part), out.iter().position(|f| f.id == whole))
        else {
            continue;
        };
        if p > w {
            let f = out.remove(p);
            out.insert(w, f);
        }
    }
    // The job stopped: nothing else matters until it runs. One divergence is the cause; the
    // later ones are usually its consequences.
    stopped.into_iter().take(1).map(|c| c.finding).chain(out).collect()
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests;
