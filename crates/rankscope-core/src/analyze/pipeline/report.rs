//! The job half of the pipeline analysis: the stages, the schedule, the theory and the
//! figures per stage × step from every rank's exchanges and figures, and the critical path of
//! each step across stages (see the parent module's doc).

use super::p2p::{chain, match_p2p, Pair};
use super::{
    PipeBlock, PipeHop, PipePath, PipeSource, PipelineReport, RankPipe, Schedule, StageStep, StageSummary,
};
use crate::analyze::instances::Instance;
use crate::analyze::intervals::Iv;

/// The job half: the pipeline from every rank's instances and figures (`None` without one).
pub fn report(
    ranks: &[u32],
    insts: &[Vec<Instance>],
    pipes: &[&RankPipe],
    offsets: &[(u32, i64)],
) -> Option<PipelineReport> {
    let (pairs, links) = match_p2p(ranks, insts);
    let (stages, detected_from, ring) = stages_of(ranks, insts, pipes, &pairs)?;
    let p = stages.len() as u32;
    let slot = |rank: u32| ranks.iter().position(|&r| r == rank);
    let mut vs: Vec<i64> = stages
        .iter()
        .filter_map(|&r| slot(r))
        .flat_map(|k| pipes[k].steps.iter().map(|s| i64::from(s.virtual_stages)))
        .filter(|&v| v > 0)
        .collect();
    let v = (!vs.is_empty()).then(|| crate::analyze::stats::lower_median(&mut vs) as u32).filter(|&v| v > 0);
    let per_v = v.unwrap_or(1);
    let walk = StageWalk { ranks, pipes, offsets, pairs: &pairs, stages: &stages, per_v, ring };
    let (mut steps, votes) = walk.stage_steps();
    // A stage whose steps saw no exchange (outside the profiled window) has nothing to say.
    steps.retain(|s| s.span_ns > 0);
    steps.sort_by_key(|s| (s.step, s.stage));
    let schedule = if ring || v.is_some_and(|v| v > 1) {
        Schedule::Interleaved1f1b
    } else if votes.one_f > 0 && votes.one_f >= votes.gpipe / 4 {
        Schedule::OneFOneB
    } else if votes.gpipe > 0 {
        Schedule::Gpipe
    } else {
        Schedule::Unknown
    };
    let mut ms: Vec<i64> = steps.iter().filter_map(|s| s.micro_batches.map(i64::from)).collect();
    let micro_batches = (!ms.is_empty()).then(|| crate::analyze::stats::lower_median(&mut ms) as u32);
    let theory = |m: u32| {
        let (p, m, v) = (f64::from(p), f64::from(m), f64::from(per_v));
        (p - 1.0) / (m * v + p - 1.0)
    };
    let per_stage = stage_summaries(&stages, &steps);
    let slowest = per_stage.iter().max_by_key(|s| (s.compute_ns, std::cmp::Reverse(s.stage)));
    let mean_compute =
        per_stage.iter().map(|s| s.compute_ns as f64).sum::<f64>() / per_stage.len().max(1) as f64;
    let slowest_excess = match slowest {
        Some(s) if mean_compute > 0.0 => s.compute_ns as f64 / mean_compute - 1.0,
        _ => 0.0,
    };
    let critical_path = critical_paths(&stages, ranks, pipes, &pairs, offsets);
    Some(PipelineReport {
        critical_path,
        detected_from,
        schedule,
        micro_batches,
        virtual_stages: v,
        theory_bubble_share: micro_batches.filter(|&m| m > 0 && (!ring || v.is_some())).map(theory),
        theory_bubble_share_2m: micro_batches
            .filter(|&m| m > 0 && (!ring || v.is_some()))
            .map(|m| theory(2 * m)),
        slowest_stage: slowest.map(|s| s.stage),
        slowest_excess,
        per_stage,
        steps,
        links,
        stages,
    })
}

/// The stages in pipeline order, how they were found, and whether the exchanges make a ring:
/// the chain the exchanges make, else (with no exchange at all) the ranks whose steps count
/// forward passes; `None` when neither gives two stages.
fn stages_of(
    ranks: &[u32],
    insts: &[Vec<Instance>],
    pipes: &[&RankPipe],
    pairs: &[Pair<'_>],
) -> Option<(Vec<u32>, PipeSource, bool)> {
    match chain(ranks, pairs, insts) {
        Some((c, ring)) => Some((c, PipeSource::P2pChain, ring)),
        None if pairs.is_empty() => {
            let annotated: Vec<u32> = ranks
                .iter()
                .zip(pipes)
                .filter(|(_, p)| p.steps.iter().any(|s| s.forwards > 0))
                .map(|(&r, _)| r)
                .collect();
            if annotated.len() < 2 {
                return None;
            }
            Some((annotated, PipeSource::Annotations, false))
        }
        None => None,
    }
}

/// Steps whose order of work reads as GPipe (every forward before the first backward) or as
/// 1F1B.
#[derive(Default)]
struct Votes {
    gpipe: usize,
    one_f: usize,
}

/// What the per stage × step figures are read from.
struct StageWalk<'a> {
    ranks: &'a [u32],
    pipes: &'a [&'a RankPipe],
    /// Aligned = rank clock − offset.
    offsets: &'a [(u32, i64)],
    pairs: &'a [Pair<'a>],
    stages: &'a [u32],
    /// Virtual stages per rank (1 when not interleaved).
    per_v: u32,
    ring: bool,
}

impl StageWalk<'_> {
    /// Per stage × step: micro-batches and the order of forward / backward work, with the
    /// schedule votes of the steps.
    fn stage_steps(&self) -> (Vec<StageStep>, Votes) {
        let (pairs, stages) = (self.pairs, self.stages);
        let p = stages.len() as u32;
        let mut steps: Vec<StageStep> = Vec::new();
        let mut votes = Votes::default();
        for (stage, &rank) in stages.iter().enumerate() {
            let Some(k) = self.ranks.iter().position(|&r| r == rank) else { continue };
            let next = stages.get(stage + 1).copied();
            let prev = stage.checked_sub(1).and_then(|s| stages.get(s).copied());
            for row in &self.pipes[k].steps {
                let (fwd, bwd) = self.exchange_instants(rank, row.step, next, prev);
                // Stage 0 sends its outputs forward; the last stage receives its inputs.
                let dir_count = if next.is_some() {
                    pairs.iter().filter(|q| q.0 == rank && Some(q.1) == next && q.2.step == row.step).count()
                } else {
                    pairs.iter().filter(|q| q.1 == rank && Some(q.0) == prev && q.3.step == row.step).count()
                } as u32;
                // Interleaved: each micro-batch passes a rank once per virtual stage.
                let m = if row.forwards > 0 {
                    Some(row.forwards / self.per_v).filter(|&m| m > 0)
                } else {
                    (dir_count > 0 && !self.ring).then_some(dir_count / self.per_v).filter(|&m| m > 0)
                };
                if row.forwards > 0 && row.backwards > 0 {
                    let last_f = row.order.rfind('F');
                    let first_b = row.order.find('B');
                    match (last_f, first_b) {
                        (Some(f), Some(b)) if f < b => votes.gpipe += 1,
                        (Some(_), Some(_)) => votes.one_f += 1,
                        _ => {}
                    }
                } else if let (Some(&first_b), Some(m)) = (bwd.iter().min(), m) {
                    let before = fwd.iter().filter(|&&t| t < first_b).count() as u32;
                    if before >= m {
                        votes.gpipe += 1;
                    } else if p > 1 {
                        votes.one_f += 1;
                    }
                }
                steps.push(self.stage_step(stage, rank, row, m));
            }
        }
        (steps, votes)
    }

    /// Exchanges of `rank` in `step`, forward and backward direction (by its `next` and `prev`
    /// stages), with the instant each tells about (a send when posted, a recv when its data
    /// arrived).
    fn exchange_instants(
        &self,
        rank: u32,
        step: u32,
        next: Option<u32>,
        prev: Option<u32>,
    ) -> (Vec<i64>, Vec<i64>) {
        let mut fwd: Vec<i64> = Vec::new();
        let mut bwd: Vec<i64> = Vec::new();
        for q in self.pairs.iter().filter(|q| q.0 == rank || q.1 == rank) {
            let (mine, other, send) = if q.0 == rank { (q.2, q.1, true) } else { (q.3, q.0, false) };
            if mine.step != step {
                continue;
            }
            let t = if send { mine.start_ns } else { mine.end_ns };
            let forward = (send && Some(other) == next) || (!send && Some(other) == prev);
            let backward = (send && Some(other) == prev) || (!send && Some(other) == next);
            if forward {
                fwd.push(t);
            } else if backward {
                bwd.push(t);
            }
        }
        (fwd, bwd)
    }

    /// The figures of `rank` (stage `stage`) in one step `row`, with its micro-batches `m`, on
    /// the aligned clock.
    fn stage_step(&self, stage: usize, rank: u32, row: &super::StageStepPart, m: Option<u32>) -> StageStep {
        let off = self.offsets.iter().find(|o| o.0 == rank).map_or(0, |o| o.1);
        let bubble = (row.span_ns - row.compute_ns).max(0);
        StageStep {
            stage: stage as u32,
            rank,
            step: row.step,
            span_ns: row.span_ns,
            compute_ns: row.compute_ns,
            bubble_ns: bubble,
            bubble_share: if row.span_ns > 0 { bubble as f64 / row.span_ns as f64 } else { 0.0 },
            recv_wait_ns: row.recv_wait_ns,
            host_free_ns: row.host_free_ns,
            micro_batches: m,
            start_ns: row.start_ns - off,
            end_ns: row.end_ns - off,
            blocks: row
                .blocks
                .iter()
                .map(|b| PipeBlock { start_ns: b.start_ns - off, end_ns: b.end_ns - off, ..*b })
                .collect(),
        }
    }
}

/// Per stage with figures, the mean of its steps' figures (the lower median of their
/// micro-batches).
fn stage_summaries(stages: &[u32], steps: &[StageStep]) -> Vec<StageSummary> {
    stages
        .iter()
        .enumerate()
        .filter_map(|(stage, &rank)| {
            let v: Vec<&StageStep> = steps.iter().filter(|s| s.rank == rank).collect();
            if v.is_empty() {
                return None;
            }
            let n = v.len() as i64;
            let mean = |f: fn(&StageStep) -> i64| v.iter().copied().map(f).sum::<i64>() / n;
            let mut m: Vec<i64> = v.iter().filter_map(|s| s.micro_batches.map(i64::from)).collect();
            Some(StageSummary {
                stage: stage as u32,
                rank,
                steps: v.len(),
                span_ns: mean(|s| s.span_ns),
                compute_ns: mean(|s| s.compute_ns),
                bubble_ns: mean(|s| s.bubble_ns),
                bubble_share: v.iter().map(|s| s.bubble_share).sum::<f64>() / v.len() as f64,
                recv_wait_ns: mean(|s| s.recv_wait_ns),
                host_free_ns: mean(|s| s.host_free_ns),
                micro_batches: (!m.is_empty()).then(|| crate::analyze::stats::lower_median(&mut m) as u32),
            })
        })
        .collect()
}

/// The critical path of each step, walked backwards from the stage whose step ends last: on
/// the current stage, the latest receive before the current time that it waited in (its
/// sender posted the data after the receive began) is where the path came from: the work after
/// it is on this stage, the exchange links it to the sender's post, and the walk continues on
/// the sender from that instant. A receive whose data was already there is no hop. The walk
/// ends at the current stage's step start. Only exchanges whose both ends are in the step count,
/// so a path never leaves the step's windows. Aligned clocks (`offsets`: aligned = rank − offset).
pub fn critical_paths(
    stages: &[u32],
    ranks: &[u32],
    pipes: &[&RankPipe],
    pairs: &[Pair<'_>],
    offsets: &[(u32, i64)],
) -> Vec<PipePath> {
    let off = |rank: u32| offsets.iter().find(|o| o.0 == rank).map_or(0, |o| o.1);
    let stage_of = |rank: u32| stages.iter().position(|&r| r == rank).map_or(u32::MAX, |s| s as u32);
    let window = |rank: u32, step: u32| -> Option<(i64, i64)> {
        let k = ranks.iter().position(|&r| r == rank)?;
        let row = pipes.get(k)?.steps.iter().find(|s| s.step == step)?;
        Some((row.start_ns - off(rank), row.end_ns - off(rank)))
    };
    let mut steps: Vec<u32> = pipes.iter().flat_map(|p| p.steps.iter().map(|s| s.step)).collect();
    steps.sort_unstable();
    steps.dedup();
    let mut out = Vec::new();
    for step in steps {
        let ends: Vec<(i64, u32)> =
            stages.iter().filter_map(|&r| window(r, step).map(|w| (w.1, r))).collect();
        let Some(&(end, last)) = ends.iter().max_by_key(|x| (x.0, std::cmp::Reverse(x.1))) else { continue };
        // Exchanges of the step into each rank: (recv start, recv end, send start, src), aligned.
        let into = |rank: u32| -> Vec<(i64, i64, i64, u32)> {
            let mut v: Vec<(i64, i64, i64, u32)> = pairs
                .iter()
                .filter(|q| q.1 == rank && q.3.step == step && q.2.step == step && stages.contains(&q.0))
                .map(|q| (q.3.start_ns - off(rank), q.3.end_ns - off(rank), q.2.start_ns - off(q.0), q.0))
                .collect();
            v.sort_unstable();
            v
        };
        let mut hops = Vec::new();
        let (mut rank, mut t) = (last, end);
        let mut start = end;
        for _ in 0..pairs.len() + stages.len() + 1 {
            let lo = window(rank, step).map_or(t, |w| w.0);
            let from = into(rank)
                .into_iter()
                .filter(|x| x.1 <= t && x.1 > lo && x.2 > x.0 && x.2 < x.1 && x.3 != rank)
                .max_by_key(|x| x.1);
            let stage = stage_of(rank);
            match from {
                Some((_, recv_end, send_start, src)) => {
                    hops.push(PipeHop { stage, rank, what: "work".into(), start_ns: recv_end, end_ns: t });
                    hops.push(PipeHop {
                        stage: stage_of(src),
                        rank: src,
                        what: "exchange".into(),
                        start_ns: send_start,
                        end_ns: recv_end,
                    });
                    (rank, t) = (src, send_start);
                }
                None => {
                    hops.push(PipeHop { stage, rank, what: "work".into(), start_ns: lo.min(t), end_ns: t });
                    start = lo.min(t);
                    break;
                }
            }
        }
        let mut work_ns = vec![0i64; stages.len()];
        for h in hops.iter().filter(|h| h.what == "work") {
            if let Some(w) = work_ns.get_mut(h.stage as usize) {
                *w += h.end_ns - h.start_ns;
            }
        }
        out.push(PipePath { step, start_ns: start, end_ns: end, hops, work_ns });
    }
    out
}

/// The intervals of every rank's point-to-point exchanges (rank clock): time a stage spends in
/// them is waiting for its neighbour, not a transfer to overlap.
pub fn p2p_intervals(insts: &[Instance]) -> Vec<Iv> {
    insts.iter().filter(|x| x.p2p).map(|x| (x.start_ns, x.end_ns)).collect()
}
