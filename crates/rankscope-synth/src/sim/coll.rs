//! Collectives: how a rank issues one (PyTorch's NCCL backend), and how the job resolves
//! them across ranks (the rendezvous, or a hang until the timeout).

use super::*;

impl RankSim {
    /// One all_reduce on process group `pg` as PyTorch's NCCL backend issues it; the NCCL kernel
    /// is left unresolved (see [`JobSim::resolve`]).
    pub(super) fn collective(&mut self, th: Th, pg: usize, bytes: u64, kind: CollKind) {
        let c = u32::try_from(self.colls.len()).unwrap_or(u32::MAX);
        let seq = match self.pg_seq.get_mut(pg) {
            Some(s) => {
                *s += 1;
                *s
            }
            None => 0,
        };
        if pg == 0 {
            self.runtime(th, "cudaEventRecord", 135, 1_500, 4_500);
        }
        let site = std::mem::replace(&mut self.site, Site::Comms);
        self.op(th, kind.op_name());
        self.begin_kind(th, "record_param_comms", Kind::Comms { coll: c });
        // Work, tensor checks and the ProcessGroupNCCL bookkeeping of the collective call.
        self.adv(th, 15_000, 40_000);
        self.runtime(th, "cudaStreamIsCapturing", 317, 800, 1_600);
        self.runtime(th, "cudaEventRecord", 135, 1_000, 2_600);
        self.runtime(th, "cudaStreamWaitEvent", 147, 1_000, 1_900);
        let ann = self.annot(th, kind.annotation());
        // ncclAllReduce's enqueue: plan the work, pick channels.
        self.adv(th, 25_000, 60_000);
        self.runtime(th, "cudaStreamGetCaptureInfo_v2", 409, 800, 1_300);
        self.runtime(th, "cudaEventRecord", 135, 900, 1_500);
        self.runtime(th, "cudaStreamWaitEvent", 147, 800, 1_300);
        let li = self.runtime(th, "cudaLaunchKernelExC", 430, 7_000, 14_000);
        let (corr, ext, launch_ready) = self.launched(li);
        let kernel_ev = self.push(Ev {
            ts: 0,
            dur: 0,
            name: KERNELS.get(usize::from(kind.kernel())).map_or("", |s| s.name),
            kind: Kind::Nccl { coll: c },
            th,
            ext,
            corr,
            seq: 0,
            flow: 0,
            site: Site::None,
            text: 0,
        });
        self.runtime(th, "cudaEventRecord", 135, 500, 900);
        self.runtime(th, "cudaStreamWaitEvent", 147, 600, 1_000);
        self.runtime(th, "cudaEventRecord", 135, 500, 900);
        self.end(th);
        self.runtime(th, "cudaEventRecord", 135, 500, 900);
        self.end(th);
        self.end(th);
        let ann_ext = self.ev.get(ann).map_or(0, |e| e.ext);
        let stream = NCCL_STREAMS.get(pg).copied().unwrap_or(NCCL_STREAMS[0]);
        let annot_ev = self.push(Ev {
            ts: 0,
            dur: 0,
            name: kind.annotation(),
            kind: Kind::GpuAnnot { stream, step: false },
            th,
            ext: ann_ext,
            corr: 0,
            seq: 0,
            flow: 0,
            site: Site::None,
            text: 0,
        });
        self.colls.push(CollRec {
            kind,
            pg,
            seq,
            bytes,
            kernel_ev,
            annot_ev,
            launch_ready,
            compute_ready: self.compute_free,
            start: 0,
            end: 0,
            wait: 0,
            resolved: false,
            hung: false,
        });
        self.kernels += 1;
        self.site = site;
    }

    /// This rank's arrival at collective `ci`.
    pub(super) fn arrival(&self, ci: usize) -> Option<i64> {
        let c = self.colls.get(ci)?;
        let free = self.nccl_free.get(c.pg).copied().unwrap_or(i64::MIN);
        Some(c.launch_ready.max(c.compute_ready).max(free))
    }

    /// Completes collective `ci` given the latest arrival over all ranks and the transfer time.
    pub(super) fn finish_coll(&mut self, ci: usize, latest: i64, transfer: i64) {
        let skew = self.rng.range(0, 2_500);
        let Some(start) = self.arrival(ci) else {
            return;
        };
        let Some(c) = self.colls.get_mut(ci) else {
            return;
        };
        c.start = start;
        c.end = (latest + transfer + skew).max(start + 1_000);
        c.wait = latest - start;
        c.resolved = true;
        let (end, pg, ke, ae) = (c.end, c.pg, c.kernel_ev, c.annot_ev);
        if let Some(f) = self.nccl_free.get_mut(pg) {
            *f = end;
        }
        for i in [ke, ae] {
            if let Some(e) = self.ev.get_mut(i) {
                e.ts = start;
                e.dur = end - start;
            }
        }
    }

    /// Collective `ci` does not complete. If this rank arrived (before its own abort), its kernel
    /// waits until the timeout and the watchdog aborts the process group: the trace ends there.
    /// Otherwise it never started.
    pub(super) fn hang_coll(&mut self, ci: usize, timeout: i64) {
        let arrived = self.arrival(ci).filter(|&a| self.abort.is_none_or(|ab| a < ab));
        let Some(c) = self.colls.get_mut(ci) else {
            return;
        };
        c.resolved = true;
        c.hung = true;
        let (start, end) = match arrived {
            Some(a) => (a, a.saturating_add(timeout)),
            None => (NEVER, NEVER),
        };
        c.start = start;
        c.end = end;
        c.wait = if start < NEVER { end - start } else { 0 };
        let (pg, ke, ae) = (c.pg, c.kernel_ev, c.annot_ev);
        if let Some(f) = self.nccl_free.get_mut(pg) {
            *f = end;
        }
        for i in [ke, ae] {
            if let Some(e) = self.ev.get_mut(i) {
                e.ts = start;
                e.dur = end - start;
            }
        }
        if start < NEVER {
            self.abort = Some(self.abort.map_or(end, |ab| ab.min(end)));
        }
    }

    /// The trace ends at `abort`: what had not begun is gone, what was running is cut there
    /// (Kineto writes what it recorded when the profiler is stopped), and flows lose the end
    /// that no longer exists.
    pub(crate) fn truncate(&mut self, abort: i64) {
        let mut gone_corr = Vec::new();
        let mut gone_flow = Vec::new();
        for e in &self.ev {
            if e.ts >= abort {
                if !matches!(
                    e.kind,
                    Kind::CpuOp | Kind::Annot { .. } | Kind::Comms { .. } | Kind::Runtime { .. }
                ) {
                    gone_corr.push(e.corr);
                }
                if e.flow > 0 {
                    gone_flow.push(e.flow);
                }
            }
        }
        gone_corr.sort_unstable();
        gone_flow.sort_unstable();
        // Events are removed; keep the indices the collectives refer to valid by mapping them.
        let mut map = vec![usize::MAX; self.ev.len()];
        let mut kept = Vec::with_capacity(self.ev.len());
        for (i, mut e) in self.ev.drain(..).enumerate() {
            if e.ts >= abort {
                continue;
            }
            e.dur = e.dur.min(abort - e.ts);
            if let Kind::Runtime { cbid, flow: true } = e.kind {
                if gone_corr.binary_search(&e.corr).is_ok() {
                    e.kind = Kind::Runtime { cbid, flow: false };
                }
            }
            if e.flow > 0 && gone_flow.binary_search(&e.flow).is_ok() {
                e.flow = 0;
            }
            if let Some(m) = map.get_mut(i) {
                *m = kept.len();
            }
            kept.push(e);
        }
        self.ev = kept;
        for c in &mut self.colls {
            c.kernel_ev = map.get(c.kernel_ev).copied().unwrap_or(usize::MAX);
            c.annot_ev = map.get(c.annot_ev).copied().unwrap_or(usize::MAX);
        }
        self.last_step_end = abort;
        self.finish_stats(abort);
    }
}

/// Truth about one collective across ranks (true time).
#[derive(Clone, Debug)]
pub(crate) struct CollTruth {
    pub kind: CollKind,
    pub step: u32,
    pub index: u32,
    pub pg: usize,
    pub seq: u64,
    pub bytes: u64,
    pub transfer_ns: i64,
    /// Per rank: arrival and end; `None` for a rank that never reached it.
    pub arrivals: Vec<Option<i64>>,
    pub ends: Vec<Option<i64>>,
    /// The rank that arrived last (among those that arrived).
    pub last_rank: u32,
    /// Some member never arrived: the others' kernels ran until the timeout.
    pub hung: bool,
}

/// All ranks of the job, advanced in lockstep one step at a time.
#[derive(Debug)]
pub(crate) struct JobSim<'a> {
    pub(super) plan: &'a Plan,
    pub ranks: Vec<RankSim>,
    /// Per rank, per step stats (when collecting truth).
    pub steps: Option<Vec<Vec<StepStats>>>,
    pub colls: Option<Vec<CollTruth>>,
    /// Pipeline truth (pipeline mode, when collecting truth).
    pub pipe: Option<pipe::PipeTruth>,
}

impl<'a> JobSim<'a> {
    pub(crate) fn new(plan: &'a Plan, collect: bool) -> Self {
        let ranks = (0..plan.cfg.ranks).map(|r| RankSim::new(plan, r)).collect();
        Self::with_ranks(plan, ranks, collect)
    }

    pub(crate) fn with_ranks(plan: &'a Plan, ranks: Vec<RankSim>, collect: bool) -> Self {
        let n = ranks.len();
        JobSim {
            plan,
            ranks,
            steps: collect.then(|| vec![Vec::new(); n]),
            colls: collect.then(Vec::new),
            pipe: (collect && plan.cfg.pipeline.is_some()).then(pipe::PipeTruth::default),
        }
    }

    pub(crate) fn step(&mut self, s: u32) {
        let plan = self.plan;
        if plan.cfg.pipeline.is_some() {
            self.pipe_step(s);
            return;
        }
        if let Some(h) = plan.cfg.hang.as_ref().filter(|h| h.kind == HangKind::EarlyExit) {
            if s == h.step.saturating_add(1) {
                if let Some(r) = self.ranks.get_mut(h.rank as usize) {
                    r.ended = true;
                }
            }
        }
        for r in &mut self.ranks {
            r.active = !r.ended;
        }
        for r in self.ranks.iter_mut().filter(|r| r.active) {
            r.phase_a(plan, s);
        }
        if plan.cfg.all_to_all.is_some() {
            self.resolve(0, s);
        }
        for r in self.ranks.iter_mut().filter(|r| r.active) {
            r.phase_a2(plan);
        }
        self.resolve(0, s);
        for r in self.ranks.iter_mut().filter(|r| r.active) {
            r.phase_b(plan);
        }
        if plan.cfg.loss_allreduce {
            self.resolve(1, s);
        }
        for r in self.ranks.iter_mut().filter(|r| r.active) {
            r.phase_c(plan);
            // A rank whose collective hung: its trace ends when the watchdog aborts.
            if let Some(abort) = r.abort {
                r.truncate(abort);
                r.ended = true;
            }
        }
        if let Some(steps) = &mut self.steps {
            for (acc, r) in steps.iter_mut().zip(&self.ranks).filter(|(_, r)| r.active) {
                acc.push(r.stats);
            }
        }
    }

    /// Resolves the pending collectives of process group `pg`, in issue order. NCCL matches a
    /// communicator's collectives by their order on each rank, so the i-th pending collective of
    /// every rank is one collective: it ends when the last rank has arrived plus the transfer
    /// time. If a member never arrives (it skipped one, exited, or is stuck before it), the
    /// others' kernels run until the process-group timeout (`hang`).
    fn resolve(&mut self, pg: usize, s: u32) {
        let lists: Vec<Vec<usize>> = self
            .ranks
            .iter()
            .map(|r| {
                if !r.active {
                    return Vec::new();
                }
                r.colls
                    .iter()
                    .enumerate()
                    .filter(|(_, c)| c.pg == pg && !c.resolved)
                    .map(|(i, _)| i)
                    .collect()
            })
            .collect();
        let positions = lists.iter().map(Vec::len).max().unwrap_or(0);
        let timeout = self.plan.cfg.hang.as_ref().map_or(i64::MAX / 8, |h| h.timeout_ns);
        for pos in 0..positions {
            // A rank arrives if it issued this collective and got there before its own abort.
            let arrivals: Vec<Option<i64>> = self
                .ranks
                .iter()
                .zip(&lists)
                .map(|(r, l)| {
                    let a = r.arrival(*l.get(pos)?)?;
                    r.abort.is_none_or(|ab| a < ab).then_some(a)
                })
                .collect();
            let first = self
                .ranks
                .iter()
                .zip(&lists)
                .find_map(|(r, l)| Some((*l.get(pos)?, r.colls.get(*l.get(pos)?)?)));
            let Some((index, &c0)) = first else {
                continue;
            };
            let transfer = self.plan.transfer_ns(c0.kind, c0.bytes);
            let complete = arrivals.iter().all(Option::is_some);
            let mut latest = i64::MIN;
            let mut last_rank = 0;
            for (r, a) in self.ranks.iter().zip(&arrivals) {
                if let Some(a) = *a {
                    if a > latest {
                        latest = a;
                        last_rank = r.rank;
                    }
                }
            }
            for (r, l) in self.ranks.iter_mut().zip(&lists) {
                let Some(&ci) = l.get(pos) else {
                    continue;
                };
                if complete {
                    r.finish_coll(ci, latest, transfer);
                } else {
                    r.hang_coll(ci, timeout);
                }
            }
            // Collectives that no rank reached (issued by CPUs already stuck) leave no truth.
            let reached = arrivals.iter().any(Option::is_some);
            if let Some(colls) = self.colls.as_mut().filter(|_| reached) {
                colls.push(CollTruth {
                    kind: c0.kind,
                    step: s,
                    index: u32::try_from(index).unwrap_or(u32::MAX),
                    pg,
                    seq: c0.seq,
                    bytes: c0.bytes,
                    transfer_ns: transfer,
                    ends: self
                        .ranks
                        .iter()
                        .zip(&lists)
                        .map(|(r, l)| {
                            let c = r.colls.get(*l.get(pos)?)?;
                            (c.start < NEVER).then_some(c.end)
                        })
                        .collect(),
                    arrivals,
                    last_rank,
                    hung: !complete,
                });
            }
        }
    }
}
