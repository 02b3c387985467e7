//! The job half ([`combine`]): every rank's part put together: groups and matching, clock
//! alignment, collectives, transfer and wait, who waits for whom, the chains through the groups,
//! noise, the what-if model, stragglers, critical paths, pipelines, the fabric join, and the
//! collective sequences against each other. It reads only the parts (no events), so every shell
//! runs it where the parts meet.

use super::*;

/// What the job half measured: the analysis (its `findings` empty) and the collectives
/// matched across ranks, which the judging layer reads beside it.
#[derive(Debug, Clone)]
pub struct Measured {
    pub analysis: Analysis,
    pub ops: Vec<collectives::Op>,
    /// The job's what-if model, for the judging layer's counterfactuals ([`whatif`]).
    pub model: whatif::Model,
}

/// The job half: matching, alignment, collectives, stragglers, balance, critical path and
/// fabric join, from every rank's part (sorted by rank). [`crate::diagnose::combine`] adds the
/// findings.
pub fn combine(mut parts: Vec<RankPart>, errors: Vec<JobError>, opts: &Options) -> Measured {
    parts.sort_by_key(|p| p.info.rank);
    let world = parts.iter().filter_map(|p| p.world_size).max().unwrap_or(parts.len() as i64);
    let ranks: Vec<u32> = parts.iter().map(|p| p.info.rank).collect();
    let steps_known = parts.iter().all(|p| !p.steps_synthetic);
    let mut insts: Vec<Vec<instances::Instance>> =
        parts.iter_mut().map(|p| std::mem::take(&mut p.instances)).collect();
    // Every collective in its process group before anything is matched across ranks.
    let layout = layout::build(&parts, &mut insts, opts.layout.as_ref());
    let insts = insts;
    let mut stuck: std::collections::BTreeSet<(u32, u32)> = Default::default();
    let sequence = sequence_report(&parts, &insts, world, &mut stuck);
    // Point-to-point exchanges pair two ranks ([`pipeline`]); only collectives are matched
    // across the group.
    let colls_only: Vec<Vec<instances::Instance>> =
        insts.iter().map(|v| v.iter().filter(|x| !x.p2p).cloned().collect()).collect();
    let (matched, matching) = instances::match_instances(&ranks, steps_known, &colls_only);

    // A collective that a loaded member of its group never joined (a hang, a rank that left,
    // a profiling window that closed earlier) is waiting, not a rendezvous: it anchors no
    // alignment and has no transfer.
    let members = instances::group_members(&insts);
    // So is one every member waited in until a timeout ended it ([`stuck_in_another_group`]).
    let stuck_in = |m: &instances::Matched| {
        m.ranks.iter().zip(&m.per_rank).any(|(&r, x)| stuck.contains(&(r, x.event.0)))
    };
    let (complete, partial): (Vec<instances::Matched>, Vec<instances::Matched>) =
        matched.into_iter().partition(|m| !instances::is_partial(m, &members) && !stuck_in(m));
    let alignment = align::align(&parts, &complete, &opts.offsets);
    let pipe_report = pipeline_report(&parts, &ranks, &insts, &alignment, &layout);
    let stage_of = stages(&layout, parts.len(), pipe_report.as_ref());
    let mut ops = job_ops(&complete, &partial, &alignment, world, &layout);
    let mut orphans = orphans(&ranks, &insts, &ops);
    let insts_ranked: Vec<(u32, Vec<instances::Instance>)> = ranks.iter().copied().zip(insts).collect();
    let colls_ranked: Vec<(u32, Vec<instances::Instance>)> = ranks.iter().copied().zip(colls_only).collect();
    let colls = collectives::stats(&ops, &colls_ranked, world);
    let (p2p_sets, pipe_sets) = exchange_sets(&insts_ranked, &layout);
    orphans.resize(parts.len(), Vec::new());
    for (o, s) in orphans.iter_mut().zip(&p2p_sets) {
        o.extend(s.intervals().iter().copied());
    }
    let waits = waits::rank_waits(&parts, &ops, &alignment, &orphans);
    for (p, w) in parts.iter_mut().zip(&waits) {
        fill_waits(p, w);
    }
    let mut layout = layout;
    {
        let n_steps = parts.iter().map(|p| p.steps.len()).max().unwrap_or(0);
        layout::fill_costs(&mut layout, &insts_ranked, &waits, n_steps);
    }
    let (per_step, per_step_colls) = step_rows(&parts, &waits, &pipe_sets, &stage_of);
    let step_waits = attribution::step_waits(&per_step_colls, WAIT_NOISE_NS);
    let wait_chain = wait_chain(&per_step, &insts_ranked, &ops, &alignment, &step_waits, &stage_of, &layout);
    let (region_rows, phase_rows) = attribution::host_rows(&parts, &waits);
    let (origins, origin_of) = attribution::comm_origins(
        &parts,
        &insts_ranked.iter().map(|x| x.1.clone()).collect::<Vec<_>>(),
        &waits,
    );
    for o in &mut ops {
        if let (Some(&r), Some(ev)) = (o.ranks.first(), o.events.first()) {
            o.origin = origin_of.get(&(r, ev.0)).cloned().unwrap_or_default();
        }
    }
    let imbalance: Vec<balance::Imbalance> = per_step
        .iter()
        .filter_map(|(&s, v)| balance::imbalance(s, v, opts.thresholds.compute_imbalance))
        .collect();
    let steps: Vec<StepEntry> =
        per_step.into_iter().map(|(step, per_rank)| StepEntry { step, per_rank }).collect();
    // One job or several ([`jobs`]): files of different jobs are said to be, first.
    let mut errors = errors;
    if let Some(mixed) = mixed_jobs(&parts, &steps) {
        errors.insert(0, mixed);
    }
    let noise = noise::measure(
        steps.iter().filter_map(|s| s.per_rank.iter().map(|r| r.wall_ns).max().map(|w| (s.step, w))),
    );
    let (stragglers, straggler) = balance::stragglers(&ops);
    let chains: Vec<Vec<critical_path::StepPath>> = parts.iter().map(|p| p.chains.clone()).collect();
    let segments: Vec<(u32, Vec<critical_path::Segment>)> =
        parts.iter().map(|p| (p.info.rank, p.segments.clone())).collect();
    let critical_path = critical_path::paths(&chains, &segments, &ops, &stragglers, &alignment, &steps);
    // An exchange lines up with the stage's replicas, a ring's with the ring ([`whatif::Line`]).
    let line = |rank: u32, x: &instances::Instance| match stage_of.get(&rank) {
        Some(&s) if !not_pipeline(&layout, x) => whatif::Line::Stage(s as u32),
        _ if not_pipeline(&layout, x) => whatif::Line::Ring,
        _ => whatif::Line::Alone(rank),
    };
    let model = whatif::model(&parts, &insts_ranked, &ops, &collectives::Offsets::new(&alignment), &line);
    let whatif = {
        let late: std::collections::BTreeSet<u32> =
            step_waits.iter().flat_map(|w| w.late.iter().copied()).collect();
        whatif::measure(&model, &late)
    };
    let mut a = Analysis {
        schema: AnalysisSchema::Analysis,
        schema_version: ANALYSIS_SCHEMA_VERSION,
        ranks: parts.iter().map(|p| p.info.clone()).collect(),
        coverage: parts
            .iter()
            .map(|p| RankCoverage { rank: p.info.rank, coverage: p.reading.coverage.clone() })
            .collect(),
        graphs: parts
            .iter()
            .filter(|p| p.reading.graphs.any())
            .map(|p| RankGraphs { rank: p.info.rank, graphs: p.reading.graphs.clone() })
            .collect(),
        serving: serving::summarize(&parts),
        work: parts
            .iter()
            .filter_map(|p| p.work.clone().map(|work| RankWork { rank: p.info.rank, work }))
            .collect(),
        steps,
        rank_totals: parts.iter().map(|p| p.totals.clone()).collect(),
        alignment,
        matching,
        layout: (!layout.groups.is_empty() || !layout.notes.is_empty()).then_some(layout),
        collectives: colls,
        stragglers,
        straggler,
        imbalance,
        gpu_idle: parts.iter().flat_map(|p| p.gpu_idle.iter().cloned()).collect(),
        launches: parts.iter().filter_map(|p| p.launch.clone()).collect(),
        allocations: parts.iter().flat_map(|p| p.allocations.iter().cloned()).collect(),
        memory: parts.iter().flat_map(|p| p.memory.iter().cloned()).collect(),
        critical_path,
        waits: step_waits,
        wait_chain,
        noise,
        whatif,
        frameworks: framework::seen(&region_rows, &origins),
        regions: region_rows,
        phases: phase_rows,
        comm_origins: origins,
        op_speed: attribution::op_speed(&parts),
        step_ops: attribution::step_ops(&parts),
        operators: operators::combine(&parts.iter().map(|p| (p.info.rank, &p.operators)).collect::<Vec<_>>()),
        sequence,
        pipeline: pipe_report,
        fabric: Vec::new(),
        beside: None,
        findings: Vec::new(),
        diagnostics: parts.iter().flat_map(|p| p.diagnostics.iter().cloned()).collect(),
        errors,
    };
    if let Some(t) = &opts.fabric {
        a.fabric = fabric_join(&a, t);
    }
    Measured { analysis: a, ops, model }
}

/// Whether `x` is an exchange that is not a pipeline's: a context-parallel ring, expert
/// dispatch. Their waits are a late neighbour's, as at a collective, and they chain no stages.
fn not_pipeline(layout: &layout::Layout, x: &instances::Instance) -> bool {
    x.p2p
        && layout.group(&x.pg).is_some_and(|g| {
            !matches!(g.role, layout::Role::Pipeline | layout::Role::Unknown | layout::Role::World)
        })
}

/// The pipeline report from the exchanges that are a pipeline's ([`not_pipeline`]); none when
/// every exchange is a ring's.
fn pipeline_report(
    parts: &[RankPart],
    ranks: &[u32],
    insts: &[Vec<instances::Instance>],
    alignment: &[align::RankAlignment],
    layout: &layout::Layout,
) -> Option<pipeline::PipelineReport> {
    let pipes: Vec<&pipeline::RankPipe> = parts.iter().map(|p| &p.pipe).collect();
    let offsets: Vec<(u32, i64)> = alignment.iter().map(|a| (a.rank, a.offset_ns)).collect();
    let pipe_insts: Vec<Vec<instances::Instance>> =
        insts.iter().map(|v| v.iter().filter(|x| !not_pipeline(layout, x)).cloned().collect()).collect();
    let any_ring = insts.iter().flatten().any(|x| not_pipeline(layout, x));
    if any_ring && pipe_insts.iter().all(|v| v.iter().all(|x| !x.p2p)) {
        None
    } else {
        pipeline::report(ranks, &pipe_insts, &pipes, &offsets)
    }
}

/// Each rank's pipeline stage (its place in its pipeline group, else in the one chain the
/// exchanges make), to tell a stage's usual wait for its neighbour (the bubble) from a delay it
/// inherited: the stage's other replicas wait the usual amount.
fn stages(
    layout: &layout::Layout,
    n_parts: usize,
    pipe_report: Option<&pipeline::PipelineReport>,
) -> std::collections::BTreeMap<u32, usize> {
    // Pipeline groups that each hold one whole pipeline (every rank in one of them:
    // Megatron's); groups per pair of neighbours say no stage by themselves.
    let pipes: Vec<&layout::Group> = layout
        .groups
        .iter()
        .filter(|g| g.role == layout::Role::Pipeline && g.ranks.len() < n_parts)
        .collect();
    let mut m: std::collections::BTreeMap<u32, usize> = std::collections::BTreeMap::new();
    let mut once = true;
    for g in &pipes {
        for (k, &r) in g.ranks.iter().enumerate() {
            once &= m.insert(r, k).is_none();
        }
    }
    if !once || pipes.len() < 2 {
        m.clear();
    }
    if m.is_empty() {
        if let Some(p) = pipe_report {
            m = p.stages.iter().enumerate().map(|(k, &r)| (r, k)).collect();
        }
    }
    m
}

/// The job's collectives: the complete matches, then the partial ones (all their time a wait,
/// no transfer), sorted by end, each group's size from the layout where it lists the members.
fn job_ops(
    complete: &[instances::Matched],
    partial: &[instances::Matched],
    alignment: &[align::RankAlignment],
    world: i64,
    layout: &layout::Layout,
) -> Vec<collectives::Op> {
    let mut ops = collectives::ops(complete, alignment, world);
    for mut o in collectives::ops(partial, alignment, world) {
        o.partial = true;
        o.transfer_ns = 0;
        o.sync_wait_ns = o.dur_ns.clone();
        ops.push(o);
    }
    ops.sort_by_key(|o| {
        (o.start_ns.first().copied().unwrap_or(0) + o.dur_ns.first().copied().unwrap_or(0), o.kind, o.key)
    });
    // A group's size is its member count when the layout lists them (gloo's collectives say
    // none, and the world's size is not a tensor pair's).
    for o in &mut ops {
        if let Some(g) = layout.group(&o.pg).filter(|g| g.source != layout::GroupSource::Collectives) {
            o.group_size = g.ranks.len() as i64;
        }
    }
    ops
}

/// Per rank, the intervals of its collective instances that matched no other rank, in a job
/// whose collectives otherwise match (none when nothing matched).
fn orphans(
    ranks: &[u32],
    insts: &[Vec<instances::Instance>],
    ops: &[collectives::Op],
) -> Vec<Vec<intervals::Iv>> {
    let in_ops: std::collections::BTreeSet<(u32, u32)> =
        ops.iter().flat_map(|o| o.ranks.iter().copied().zip(o.events.iter().map(|e| e.0))).collect();
    ranks
        .iter()
        .zip(insts)
        .map(|(&r, v)| {
            if ops.is_empty() {
                return Vec::new();
            }
            v.iter()
                .filter(|x| !x.kind.is_p2p() && !in_ops.contains(&(r, x.event.0)))
                .map(|x| (x.start_ns, x.end_ns))
                .collect()
        })
        .collect()
}

/// Per rank, the intervals of its point-to-point exchanges, and of those the pipeline's (the
/// bubble's candidates, [`not_pipeline`]).
fn exchange_sets(
    insts_ranked: &[(u32, Vec<instances::Instance>)],
    layout: &layout::Layout,
) -> (Vec<intervals::Set>, Vec<intervals::Set>) {
    // A stage's time in its exchanges is waiting for its neighbour (the bubble), never a
    // transfer to overlap: it joins the wait like an orphan's.
    let p2p_sets: Vec<intervals::Set> =
        insts_ranked.iter().map(|(_, v)| intervals::Set::from_unsorted(pipeline::p2p_intervals(v))).collect();
    // Of those, the pipeline's exchanges (the bubble's candidates).
    let pipe_sets: Vec<intervals::Set> = insts_ranked
        .iter()
        .map(|(_, v)| {
            intervals::Set::from_unsorted(
                v.iter()
                    .filter(|x| x.p2p && !not_pipeline(layout, x))
                    .map(|x| (x.start_ns, x.end_ns))
                    .collect(),
            )
        })
        .collect();
    (p2p_sets, pipe_sets)
}

/// Per step, every rank's row as measured, and the same rows for who waited for whom at
/// collectives: less the stage's usual pipeline wait (the least over its replicas), which is
/// the pipeline's bubble, not a late rank's.
#[allow(clippy::type_complexity)]
fn step_rows(
    parts: &[RankPart],
    waits: &[waits::RankWait],
    pipe_sets: &[intervals::Set],
    stage_of: &std::collections::BTreeMap<u32, usize>,
) -> (
    std::collections::BTreeMap<u32, Vec<breakdown::StepRank>>,
    std::collections::BTreeMap<u32, Vec<breakdown::StepRank>>,
) {
    let mut per_step: std::collections::BTreeMap<u32, Vec<breakdown::StepRank>> = Default::default();
    // Who waited for whom at collectives: a pipeline stage's usual wait for its neighbour is the
    // pipeline's (the bubble), not a late rank's; what it waits beyond its replicas, a late
    // rank up the chain made it wait, as does a ring neighbour.
    let mut per_step_colls: std::collections::BTreeMap<u32, Vec<breakdown::StepRank>> = Default::default();
    // Per (step, rank): the pipeline exchanges' wait and exposed wait.
    let mut pipe_wait: std::collections::BTreeMap<(u32, u32), (i64, i64)> = Default::default();
    for ((p, w), s) in parts.iter().zip(waits).zip(pipe_sets) {
        let p2p_wait = w.wait.intersect(s);
        let p2p_exposed = w.exposed_wait.intersect(s);
        for (step, row) in &p.steps {
            let (lo, hi) = (row.start_ns, row.end_ns);
            pipe_wait
                .insert((*step, p.info.rank), (p2p_wait.len_within(lo, hi), p2p_exposed.len_within(lo, hi)));
        }
    }
    // The usual pipeline wait of a stage in a step: the least over its replicas (the stage's
    // ranks in the other pipelines), when it has any; else all of a rank's is the bubble's.
    let usual = |step: u32, rank: u32| -> (i64, i64) {
        let own = pipe_wait.get(&(step, rank)).copied().unwrap_or((0, 0));
        let Some(&stage) = stage_of.get(&rank) else { return own };
        let replicas: Vec<(i64, i64)> = stage_of
            .iter()
            .filter(|&(&r, &st)| st == stage && r != rank)
            .filter_map(|(&r, _)| pipe_wait.get(&(step, r)).copied())
            .collect();
        if replicas.is_empty() {
            return own;
        }
        let least = |f: fn(&(i64, i64)) -> i64| replicas.iter().map(f).min().unwrap_or(0);
        (own.0.min(least(|x| x.0)), own.1.min(least(|x| x.1)))
    };
    for p in parts {
        for (step, row) in &p.steps {
            per_step.entry(*step).or_default().push(row.clone());
            let mut r = row.clone();
            let (wait, exposed) = usual(*step, p.info.rank);
            r.comm_wait_ns = (r.comm_wait_ns - wait).max(0);
            r.exposed_wait_ns = (r.exposed_wait_ns - exposed).max(0);
            per_step_colls.entry(*step).or_default().push(r);
        }
    }
    (per_step, per_step_colls)
}

/// The chains of waits through the groups ([`chain::wait_chain`]), against the mean step wall
/// time over every rank and step.
fn wait_chain(
    per_step: &std::collections::BTreeMap<u32, Vec<breakdown::StepRank>>,
    insts_ranked: &[(u32, Vec<instances::Instance>)],
    ops: &[collectives::Op],
    alignment: &[align::RankAlignment],
    step_waits: &[attribution::StepWaits],
    stage_of: &std::collections::BTreeMap<u32, usize>,
    layout: &layout::Layout,
) -> Option<chain::WaitChain> {
    let walls: Vec<i64> = per_step.values().flatten().map(|r| r.wall_ns).collect();
    let step_ns = walls.iter().sum::<i64>() as f64 / walls.len().max(1) as f64;
    chain::wait_chain(
        insts_ranked,
        ops,
        &collectives::Offsets::new(alignment),
        step_waits,
        stage_of,
        layout,
        step_ns,
    )
}

/// The error that the files are of different jobs ([`jobs::split`]), judged from each rank's
/// identity and the window its steps span; `None` when they are one job.
fn mixed_jobs(parts: &[RankPart], steps: &[StepEntry]) -> Option<JobError> {
    let mut window: std::collections::BTreeMap<u32, (i64, i64)> = Default::default();
    for s in steps {
        for r in &s.per_rank {
            let w = window.entry(r.rank).or_insert((r.start_ns, r.end_ns));
            *w = (w.0.min(r.start_ns), w.1.max(r.end_ns));
        }
    }
    let claims: Vec<jobs::Claim<'_>> = parts
        .iter()
        .map(|p| jobs::Claim { info: &p.info, window: window.get(&p.info.rank).copied() })
        .collect();
    if let (split, Some(why)) = jobs::split(&claims) {
        return Some(JobError::MixedJobs { jobs: split, why });
    }
    None
}

/// The fabric join: the analysis's collectives against the fabric's test results `t`, with the
/// backends and devices the traces name.
fn fabric_join(a: &Analysis, t: &crate::nccl::TestsReport) -> Vec<fabric::FabricComparison> {
    let mut facts = fabric::TraceFacts {
        backends: a.ranks.iter().filter_map(|r| r.backend.clone()).collect(),
        devices: a.ranks.iter().flat_map(|r| r.devices.iter().cloned()).collect(),
        cpu_only: !a.ranks.is_empty()
            && a.ranks.iter().all(|r| r.metrics_from == breakdown::MetricsFrom::Cpu),
    };
    facts.backends.sort();
    facts.backends.dedup();
    facts.devices.sort();
    facts.devices.dedup();
    fabric::compare(&a.collectives, t, &facts)
}

/// Every rank's collectives as sequences for the mismatch engine, each labelled with the
/// main-thread region it was issued from (`loss_allreduce`). The executed collectives first
/// (their durations are the waits); when they agree but every rank also has the calls its host
/// issued (CPU ranks: `c10d::*` with shapes), those calls too: a call the backend never ran
/// (a cross-rank check that failed first) is only there.
fn sequence_report(
    parts: &[RankPart],
    insts: &[Vec<instances::Instance>],
    world: i64,
    stuck: &mut std::collections::BTreeSet<(u32, u32)>,
) -> Option<crate::sequence::SequenceReport> {
    use crate::sequence::{Backend, CollRecord, DiagnosisKind, RankSeq, SeqOptions, Source};
    if parts.len() < 2 || insts.iter().all(Vec::is_empty) {
        return None;
    }
    let label_at = |p: &RankPart, main: &[usize], ts: i64| {
        let rr = &p.regions;
        rr.region_at(main, ts).map(|k| rr.name_of(k).to_string()).filter(|l| l != "ProfilerStep")
    };
    let backend = |p: &RankPart| match p.info.backend.as_deref().map(str::to_ascii_lowercase) {
        Some(b) if b.contains("nccl") || b.contains("rccl") => Backend::Nccl,
        Some(b) if b.contains("gloo") => Backend::Gloo,
        Some(_) => Backend::Other,
        None => Backend::Unknown,
    };
    let seq_of = |p: &RankPart, records: Vec<CollRecord>| RankSeq {
        rank: p.info.rank,
        source: Source::Trace,
        backend: backend(p),
        file: p.info.source.clone(),
        records,
    };
    let executed: Vec<RankSeq> = parts
        .iter()
        .zip(insts)
        .map(|(p, v)| {
            let main = p.regions.main_occurrences();
            // In the order the host issued them (what must agree across ranks), not the order
            // the backend started them: two collectives enqueued back to back may start in
            // either order on a backend with several threads (gloo) or streams.
            let mut v: Vec<&instances::Instance> = v.iter().collect();
            v.sort_by_key(|i| (i.issued_ns, i.start_ns, i.event));
            let records = v
                .iter()
                .map(|i| {
                    let label = label_at(p, &main, i.issued_ns);
                    CollRecord::basic(
                        &i.pg,
                        i.kind,
                        i.seq,
                        i.bytes,
                        Some(i.start_ns),
                        Some(i.end_ns),
                        Some(i.step),
                        label.as_deref(),
                    )
                })
                .collect();
            seq_of(p, records)
        })
        .collect();
    let loaded: Vec<u32> = parts.iter().map(|p| p.info.rank).collect();
    // Expected ranks: the world when every rank of it is loaded, else the loaded ones (a
    // subset of the job's files is not a hang).
    // `loaded` is sorted by rank: every rank of the world is loaded when its distinct ranks
    // below the world number it (never a list as long as a claimed world is made to check).
    let mut distinct = loaded.clone();
    distinct.dedup();
    let whole = world >= 0 && distinct.iter().filter(|&&r| i64::from(r) < world).count() as i64 == world;
    let expected = if whole { (0..world as u32).collect() } else { loaded };
    let opts = SeqOptions { world: expected, ..SeqOptions::default() };
    let report = crate::sequence::analyze(&executed, &opts);
    let diverged = |r: &crate::sequence::SequenceReport| {
        r.diagnoses.iter().any(|d| matches!(d.kind, DiagnosisKind::Hang | DiagnosisKind::Mismatch))
    };
    let mut report = report;
    if !diverged(&report) {
        if let Some((d, events)) = stuck_in_another_group(parts, insts, &label_at) {
            stuck.extend(events);
            report.notes.push(
                "the sequences agree, but every rank waited in its last collective until it ended alike on all of them, as by a timeout: told from the backend threads that ran those collectives".to_string(),
            );
            report.diagnoses.insert(0, d);
            return Some(report);
        }
    }
    let use_issued =
        parts.iter().all(|p| !p.issued.is_empty() && p.info.metrics_from == breakdown::MetricsFrom::Cpu);
    if diverged(&report) || !use_issued {
        return Some(report);
    }
    // Each call in the group of the collective it enqueued (the instance issued at its start);
    // calls of a job with groups that cannot be placed make the comparison unsound: not made.
    // A call that ran nowhere (a check stopped it) is in the rank's only group, if it has one.
    let group_of: Vec<std::collections::BTreeMap<i64, &str>> =
        insts.iter().map(|v| v.iter().map(|x| (x.issued_ns, x.pg.as_str())).collect()).collect();
    let only: Vec<Option<&str>> = insts
        .iter()
        .map(|v| {
            let pgs: std::collections::BTreeSet<&str> = v.iter().map(|x| x.pg.as_str()).collect();
            (pgs.len() == 1).then(|| pgs.into_iter().next()).flatten()
        })
        .collect();
    let grouped = insts.iter().flatten().any(|x| !x.pg.is_empty());
    let place = |k: usize, ts: i64| group_of[k].get(&ts).copied().or(only[k]);
    if grouped
        && parts.iter().enumerate().any(|(k, p)| p.issued.iter().any(|i| place(k, i.start_ns).is_none()))
    {
        return Some(report);
    }
    let issued: Vec<RankSeq> = parts
        .iter()
        .enumerate()
        .map(|(k, p)| {
            let main = p.regions.main_occurrences();
            let records = p
                .issued
                .iter()
                .map(|i| {
                    let label = label_at(p, &main, i.start_ns);
                    let mut c = CollRecord::basic(
                        place(k, i.start_ns).unwrap_or(""),
                        i.kind,
                        None,
                        None,
                        Some(i.start_ns),
                        Some(i.end_ns),
                        Some(i.step),
                        label.as_deref(),
                    );
                    if let Some(n) = i.elements {
                        c.in_sizes = vec![vec![n]];
                    }
                    c
                })
                .collect();
            seq_of(p, records)
        })
        .collect();
    let mut calls = crate::sequence::analyze(&issued, &opts);
    if diverged(&calls) {
        calls.notes.push(
            "compared the collective calls the hosts issued (`c10d::*`): the executed collectives agree, so the backend never ran the call that diverged (a cross-rank check, such as TORCH_DISTRIBUTED_DEBUG=DETAIL's, stopped it first)".to_string(),
        );
        return Some(calls);
    }
    Some(report)
}

/// The region a rank's call was issued from: `(part, main occurrences, issue time)`.
type LabelAt<'a> = dyn Fn(&RankPart, &[usize], i64) -> Option<String> + 'a;

/// Every rank's last collective, issued alike (same kind, size, place), waited in until it
/// ended alike on all of them after a second or more, as a timeout ends it, and none completed
/// it: the ranks were not in the same collective, though their sequences agree. Traces without
/// process-group names cannot say which group each call went to, but the backend can: it runs
/// each process group on lanes of its own (gloo's worker threads per group, NCCL's stream per
/// communicator). A rank whose stuck call ran on a lane that had run only other collectives
/// before (what the others ran their earlier such calls on is their lane for it) issued it on
/// another process group. Without that evidence the diagnosis still says that every rank was
/// stuck, and names them all.
fn stuck_in_another_group(
    parts: &[RankPart],
    insts: &[Vec<instances::Instance>],
    label_at: &LabelAt<'_>,
) -> Option<(crate::sequence::Diagnosis, Vec<(u32, u32)>)> {
    use crate::sequence::{Diagnosis, DiagnosisKind};
    const LONG_NS: i64 = 1_000_000_000;
    // Per rank: its collectives in issue order, the last one, and what identifies a call
    // (where it was issued, else its size).
    struct Last {
        rank: u32,
        event: u32,
        dur: i64,
        step: u32,
        kind: crate::model::CollKind,
        sig: String,
        /// Signatures of the earlier calls on the same lane.
        lane_history: std::collections::BTreeSet<String>,
        typical: i64,
    }
    let mut lasts = Vec::new();
    for (p, v) in parts.iter().zip(insts) {
        let main = p.regions.main_occurrences();
        let mut v: Vec<&instances::Instance> = v.iter().filter(|x| !x.p2p && !x.kind.is_p2p()).collect();
        v.sort_by_key(|i| (i.issued_ns, i.start_ns, i.event));
        let sig = |x: &instances::Instance| {
            label_at(p, &main, x.issued_ns).unwrap_or_else(|| {
                format!("{} B", x.bytes.map_or_else(|| "?".to_string(), |b| b.to_string()))
            })
        };
        let (last, before) = v.split_last()?;
        if before.is_empty() {
            return None;
        }
        let mut durs: Vec<i64> = before.iter().map(|x| x.end_ns - x.start_ns).collect();
        durs.sort_unstable();
        lasts.push(Last {
            rank: p.info.rank,
            event: last.event.0,
            dur: last.end_ns - last.start_ns,
            step: last.step,
            kind: last.kind,
            sig: sig(last),
            lane_history: before.iter().filter(|x| x.lane == last.lane).map(|x| sig(x)).collect(),
            typical: durs[(durs.len() - 1) / 2],
        });
    }
    let (min, max) = (lasts.iter().map(|l| l.dur).min()?, lasts.iter().map(|l| l.dur).max()?);
    // Alike: same kind and place everywhere; waited in by all, ending alike (within 5%), long
    // against anything the ranks did before.
    let alike = lasts.iter().all(|l| l.kind == lasts[0].kind && l.sig == lasts[0].sig);
    if lasts.len() < 2
        || !alike
        || min < LONG_NS
        || (max - min) as f64 > 0.05 * min as f64
        || lasts.iter().any(|l| l.dur < 20 * l.typical.max(1))
    {
        return None;
    }
    let odd: Vec<u32> = lasts
        .iter()
        .filter(|l| !l.lane_history.is_empty() && !l.lane_history.contains(&l.sig))
        .map(|l| l.rank)
        .collect();
    let usual: Vec<u32> = lasts.iter().filter(|l| l.lane_history.contains(&l.sig)).map(|l| l.rank).collect();
    let all: Vec<u32> = lasts.iter().map(|l| l.rank).collect();
    let kind = lasts[0].kind.name();
    let place = &lasts[0].sig;
    let mut steps: Vec<u32> = lasts.iter().map(|l| l.step).collect();
    steps.sort_unstable();
    steps.dedup();
    let step_words = steps.iter().map(u32::to_string).collect::<Vec<_>>().join(", ");
    let head = format!(
        "{} all waited {} (ended alike, as by a timeout) in the {kind} each issued last (step {step_words}, `{place}`), and none completed it: they were not in the same collective.",
        crate::words::ranks_word(&all),
        crate::words::dur(min as f64)
    );
    let (ranks, sentence) = if !odd.is_empty() && !usual.is_empty() && odd.len() < all.len() {
        let odd_last = lasts.iter().find(|l| odd.contains(&l.rank));
        let others: Vec<String> =
            odd_last.map(|l| l.lane_history.iter().map(|s| format!("`{s}`")).collect()).unwrap_or_default();
        (
            odd.clone(),
            format!(
                "{head} {}'s ran on the backend thread that had run only its {} collectives before (a backend runs each process group on threads of its own), {}'s on the thread of their earlier `{place}` ones: {} issued it on another process group.",
                crate::words::ranks_word(&odd),
                others.join(", "),
                crate::words::ranks_word(&usual).to_lowercase(),
                crate::words::ranks_word(&odd).to_lowercase()
            ),
        )
    } else {
        (all, head)
    };
    let events = lasts.iter().map(|l| (l.rank, l.event)).collect();
    Some((
        Diagnosis {
            kind: DiagnosisKind::Hang,
            pg: None,
            position: None,
            ranks,
            sentence,
            steps,
            waited_ns: Some(min),
        },
        events,
    ))
}

/// Writes the transfer / wait split into a part's step rows and totals.
fn fill_waits(p: &mut RankPart, w: &waits::RankWait) {
    let t = &mut p.totals;
    (t.comm_transfer_ns, t.comm_wait_ns, t.exposed_transfer_ns, t.exposed_wait_ns) = (0, 0, 0, 0);
    for (_, row) in p.steps.iter_mut() {
        let (lo, hi) = (row.start_ns, row.end_ns);
        row.comm_transfer_ns = w.transfer.len_within(lo, hi);
        row.comm_wait_ns = w.wait.len_within(lo, hi);
        row.exposed_transfer_ns = w.exposed_transfer.len_within(lo, hi);
        // By difference, so the two exposed parts add up to the exposed communication exactly.
        row.exposed_wait_ns = (row.exposed_comm_ns - row.exposed_transfer_ns).max(0);
        t.comm_transfer_ns += row.comm_transfer_ns;
        t.comm_wait_ns += row.comm_wait_ns;
        t.exposed_transfer_ns += row.exposed_transfer_ns;
        t.exposed_wait_ns += row.exposed_wait_ns;
    }
}

/// Measures a job held in memory: every rank's part, then the job level (no findings:
/// [`crate::diagnose::analyze`] judges too).
pub fn measure(job: &Job, opts: &Options) -> Measured {
    let parts = job.ranks.iter().map(|r| rank_part(r, &job.strings, opts.kernel_wait_threshold_ns)).collect();
    combine(parts, job.errors.clone(), opts)
}
