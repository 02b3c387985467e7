//! The plan of a hybrid job and the job run step by step: every rank's CPU phase, then the GPU
//! work of all ranks placed together, three times per step; then the written events or the truth.

use std::io::{self, Write};

use super::emit::{self, Pass};
use super::layout::Layout;
use super::model::Costs;
use super::place::{place, Registry};
use super::rank::{CommKind, EvKind, RankRun, StepStats, NONE};
use super::truth::{step_stats, ManifestHybrid, TruthAcc};
use super::{Hybrid, HybridCause};
use crate::emit::Out;
use crate::{Rng, SynthConfig, BASE_TIME_NS, TRACE_START_NS};

const RNG_ROUTE: u64 = 31;

/// Everything derived from a sanitized configuration with `hybrid` set.
#[derive(Debug, Clone)]
pub(crate) struct HPlan {
    pub cfg: SynthConfig,
    pub h: Hybrid,
    pub lay: Layout,
    pub costs: Costs,
    pub steps: u32,
    pub trace_start_ns: i64,
    pub base_time_ns: i64,
    pub jitter_ppm: i64,
    /// Per group: collectives issued before the first profiled step (warm-up steps and setup).
    seq_bases: Vec<u64>,
    /// Per group: (collectives, point-to-point ops) per step of its first member.
    per_step: Vec<(u32, u32)>,
}

impl HPlan {
    pub fn new(cfg: &SynthConfig) -> HPlan {
        let h = cfg.hybrid.clone().unwrap_or_default();
        let lay = Layout::new(&h, cfg.gpus_per_node, cfg.seed);
        let mut plan = HPlan {
            costs: Costs::new(&h),
            steps: cfg.steps,
            trace_start_ns: TRACE_START_NS,
            base_time_ns: BASE_TIME_NS,
            jitter_ppm: (cfg.compute_jitter * 1e6).round() as i64,
            seq_bases: vec![0; lay.groups.len()],
            per_step: vec![(0, 0); lay.groups.len()],
            cfg: cfg.clone(),
            h,
            lay,
        };
        plan.count_ops();
        plan
    }

    /// Runs one step's CPU program of every rank on a scratch registry and counts, per group,
    /// what its first member issues on it: every member issues the same, every step.
    fn count_ops(&mut self) {
        let mut first_member = vec![NONE; self.lay.groups.len()];
        for (g, x) in self.lay.groups.iter().enumerate() {
            if let Some(f) = first_member.get_mut(g) {
                *f = x.ranks.first().copied().unwrap_or(NONE);
            }
        }
        let mut needed: Vec<u32> = first_member.iter().copied().filter(|&r| r != NONE).collect();
        needed.sort_unstable();
        needed.dedup();
        // Per rank: (group, collectives, sends) of its step.
        type Counts = Vec<(usize, u32, u32)>;
        let mut counts: Vec<(u32, Counts)> = Vec::new();
        for r in needed {
            let mut reg = Registry::new(false);
            let mut run = RankRun::new(self, r);
            run.body(self, &mut reg, 0);
            run.tail(self, &mut reg);
            let mut per: Counts = Vec::new();
            for op in &run.ops {
                let slot = match per.iter().position(|x| x.0 == op.group) {
                    Some(i) => i,
                    None => {
                        per.push((op.group, 0, 0));
                        per.len() - 1
                    }
                };
                if let Some(x) = per.get_mut(slot) {
                    if op.kind.is_p2p() {
                        x.2 += u32::from(op.kind == CommKind::Send);
                    } else {
                        x.1 += 1;
                    }
                }
            }
            counts.push((r, per));
        }
        for (g, &r) in first_member.iter().enumerate() {
            let c = counts
                .iter()
                .find(|x| x.0 == r)
                .and_then(|x| x.1.iter().find(|y| y.0 == g))
                .map_or((0, 0), |y| (y.1, y.2));
            if let Some(x) = self.per_step.get_mut(g) {
                *x = c;
            }
            // Setup collectives: the default group's barriers, the gradient groups' parameter
            // broadcast; then the unprofiled steps.
            let role = self.lay.group(g).map(|x| x.role);
            let setup = match role {
                Some(super::Role::World) => 3,
                Some(super::Role::Data | super::Role::DataContext) => 1,
                _ => 0,
            };
            if let Some(b) = self.seq_bases.get_mut(g) {
                *b = setup + u64::from(self.cfg.first_step) * u64::from(c.0);
            }
        }
    }

    pub fn seq_base(&self, g: usize) -> u64 {
        self.seq_bases.get(g).copied().unwrap_or(0)
    }

    pub fn per_step(&self, g: usize) -> (u32, u32) {
        self.per_step.get(g).copied().unwrap_or((0, 0))
    }

    /// Transformer layers on pipeline stage `stage`.
    pub fn layers_of(&self, stage: u32) -> u32 {
        match self.h.cause {
            HybridCause::SlowStage { stage: s, extra_layers } if s == stage => {
                self.h.layers_per_stage + extra_layers
            }
            _ => self.h.layers_per_stage,
        }
    }

    /// Parameters a rank of stage `stage` holds (its layers, and the embedding on the first and
    /// last stage).
    pub fn params_of(&self, stage: u32) -> u64 {
        let per_layer = self.costs.params / u64::from(self.h.layers_per_stage).max(1);
        let embed = self.costs.params_first - self.costs.params;
        let ends = u64::from(stage == 0) + u64::from(stage + 1 == self.h.pp && self.h.pp > 1);
        per_layer * u64::from(self.layers_of(stage)) + ends * embed
    }

    /// Bus bandwidth of group `g`: NVLink inside one host, the network across hosts.
    pub fn group_gbps(&self, g: usize) -> f64 {
        if self.lay.group(g).is_some_and(|x| x.spans_hosts) {
            self.h.net_busbw_gbps
        } else {
            self.h.nvlink_busbw_gbps
        }
    }

    /// Transfer time of an op of `kind` moving `bytes` in group `g` once every member arrived
    /// (`hybrid::model`'s cost model); a send or receive between `rank` and `peer`.
    pub fn transfer_ns(&self, g: usize, kind: CommKind, bytes: u64, rank: u32, peer: u32) -> i64 {
        let alpha = self.cfg.collective_latency_ns;
        if kind.is_p2p() {
            let host = |r: u32| self.lay.places.get(r as usize).map(|x| x.host);
            let gbps =
                if host(rank) == host(peer) { self.h.nvlink_busbw_gbps } else { self.h.net_busbw_gbps };
            return alpha + (bytes as f64 / gbps).round() as i64;
        }
        let n = self.lay.group(g).map_or(1, |x| x.ranks.len());
        let f = kind.core().busbw_factor(i64::try_from(n).unwrap_or(1));
        alpha + (f * bytes as f64 / self.group_gbps(g)).round() as i64
    }

    /// The extra time of one tensor all_reduce at the network's bandwidth instead of NVLink's.
    pub fn tp_net_penalty_ns(&self) -> i64 {
        let f = CommKind::AllReduce.core().busbw_factor(i64::from(self.h.tp));
        let b = self.costs.act_bytes as f64;
        (f * b / self.h.net_busbw_gbps).round() as i64 - (f * b / self.h.nvlink_busbw_gbps).round() as i64
    }

    /// Rows each member of expert group `g` routes to each member in step `s`, micro-batch
    /// `mb`, layer `l` (`rows[i][j]`: from member i to member j). Every member computes the same
    /// matrix. Balanced: ±8 % around an even split; with `expert_imbalance` on a member of `g`,
    /// `share` of every member's rows go to it.
    pub fn routing(&self, g: usize, s: u32, mb: u32, l: u32) -> Vec<Vec<u64>> {
        let Some(group) = self.lay.group(g) else { return Vec::new() };
        let n = group.ranks.len();
        let rows = self.costs.expert_rows;
        let hot = match self.h.cause {
            HybridCause::ExpertImbalance { rank, share } => group.local(rank).map(|i| (i as usize, share)),
            _ => None,
        };
        let key = (u64::from(s) << 40) ^ (u64::from(mb) << 20) ^ u64::from(l);
        (0..n)
            .map(|i| {
                let first = group.ranks.first().copied().unwrap_or(0);
                let mut rng = Rng::derive(
                    self.cfg.seed ^ key.wrapping_mul(0x9E37_79B9),
                    first.wrapping_add(i as u32 * 7919),
                    RNG_ROUTE,
                );
                let (hot_rows, spread) = match hot {
                    Some((_, share)) => {
                        let h = (rows as f64 * share).round() as u64;
                        (h.min(rows), rows - h.min(rows))
                    }
                    None => (0, rows),
                };
                let others = if hot.is_some() { n - 1 } else { n };
                let weights: Vec<u64> =
                    (0..others).map(|_| u64::try_from(1_000 + rng.range(-80, 80)).unwrap_or(1_000)).collect();
                let total: u64 = weights.iter().sum::<u64>().max(1);
                let mut out = Vec::with_capacity(n);
                let mut given = 0;
                let mut w = weights.iter();
                for j in 0..n {
                    if hot.is_some_and(|(h, _)| h == j) {
                        out.push(hot_rows);
                        continue;
                    }
                    let x = spread * w.next().copied().unwrap_or(0) / total;
                    given += x;
                    out.push(x);
                }
                // The rounding remainder to the last non-hot member.
                if let Some(j) = (0..n).rev().find(|&j| hot.is_none_or(|(h, _)| h != j)) {
                    if let Some(x) = out.get_mut(j) {
                        *x += spread - given;
                    }
                }
                out
            })
            .collect()
    }
}

/// The whole job, one step at a time.
#[derive(Debug)]
pub(crate) struct HJob<'a> {
    p: &'a HPlan,
    pub ranks: Vec<RankRun>,
    reg: Registry,
    pub truth: Option<TruthAcc>,
}

impl<'a> HJob<'a> {
    pub fn new(p: &'a HPlan, collect: bool) -> HJob<'a> {
        HJob {
            p,
            ranks: (0..p.lay.world).map(|r| RankRun::new(p, r)).collect(),
            reg: Registry::new(collect),
            truth: collect.then(|| TruthAcc::new(p.lay.world as usize)),
        }
    }

    pub fn step(&mut self, s: u32) -> io::Result<()> {
        let p = self.p;
        let fail = |e: String| io::Error::other(format!("synth hybrid job, step {s}: {e}"));
        for r in &mut self.ranks {
            r.body(p, &mut self.reg, s);
        }
        place(&mut self.ranks, &mut self.reg).map_err(fail)?;
        for r in &mut self.ranks {
            r.tail(p, &mut self.reg);
        }
        place(&mut self.ranks, &mut self.reg).map_err(fail)?;
        for r in &mut self.ranks {
            r.close();
            fill_gpu_times(r);
        }
        if self.reg.incomplete() > 0 {
            return Err(fail(format!("{} collectives never completed", self.reg.incomplete())));
        }
        if let Some(t) = self.truth.as_mut() {
            let resolved = self.reg.resolved.replace(Vec::new()).unwrap_or_default();
            t.instances(p, s, resolved);
            for (acc, r) in t.stats.iter_mut().zip(&self.ranks) {
                acc.push(step_stats(r));
            }
        }
        self.reg.clear();
        Ok(())
    }
}

/// GPU events take their item's placed times; the step's `ProfilerStep#N` on the compute stream
/// spans its compute work.
fn fill_gpu_times(r: &mut RankRun) {
    for e in &mut r.ev {
        if let Some(it) = r.items.get(e.item as usize) {
            e.ts = it.start;
            e.dur = it.end - it.start;
        }
    }
    let compute =
        r.items.iter().filter(|it| it.stream == 0 && matches!(it.kind, super::rank::ItemKind::Work(_)));
    let (lo, hi) = compute.fold((i64::MAX, i64::MIN), |(lo, hi), it| (lo.min(it.start), hi.max(it.end)));
    if lo <= hi {
        let ext = r.ev.get(r.step_ev).map_or(0, |e| e.ext);
        r.ev.push(super::rank::Ev {
            ts: lo,
            dur: hi - lo,
            kind: EvKind::StepGpu,
            th: 0,
            ext,
            corr: 0,
            item: NONE,
        });
    }
}

/// Writes the listed ranks' documents: the job runs once per pass of Kineto's order (autograd
/// thread, main thread, then runtime calls and GPU activities). Memory: one step of every rank.
pub(crate) fn write<W: Write>(p: &HPlan, outs: Vec<(u32, W)>) -> io::Result<Vec<(W, u64)>> {
    let flush_at = if outs.len() > 16 { 64 << 10 } else { 1 << 20 };
    let mut outs: Vec<(u32, Out<W>)> =
        outs.into_iter().map(|(r, w)| (r, Out::with_flush_at(w, flush_at))).collect();
    let text = emit::Text::new();
    for (r, o) in &mut outs {
        emit::header(o, p, *r);
    }
    for pass in [Pass::Autograd, Pass::Main, Pass::Activity] {
        let mut job = HJob::new(p, false);
        for s in 0..p.steps {
            job.step(s)?;
            let step_no = p.cfg.first_step.saturating_add(s);
            for (r, o) in &mut outs {
                if let Some(rank) = job.ranks.get(*r as usize) {
                    emit::step(o, p, &text, rank, pass, step_no)?;
                }
            }
        }
        if pass == Pass::Activity {
            for (r, o) in &mut outs {
                if let Some(rank) = job.ranks.get(*r as usize) {
                    emit::trailer(o, p, rank);
                }
            }
        }
    }
    outs.into_iter().map(|(_, o)| o.finish()).collect()
}

/// The truth: the hybrid block, per rank × step the figures the manifest's `ranks[]` carry, and
/// the ranks as they ended (their ids and last step).
pub(crate) fn manifest_parts(p: &HPlan) -> io::Result<(ManifestHybrid, Vec<Vec<StepStats>>, Vec<RankRun>)> {
    let mut job = HJob::new(p, true);
    for s in 0..p.steps {
        job.step(s)?;
    }
    let mut truth = job.truth.take().unwrap_or_default();
    for g in 0..p.lay.groups.len() {
        truth.per_step.insert(g, p.per_step(g));
    }
    let stats = truth.stats.clone();
    Ok((truth.finish(p), stats, job.ranks))
}
