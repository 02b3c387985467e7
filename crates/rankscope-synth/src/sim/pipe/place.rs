//! The GPU work of every pipeline rank placed together, and the step's truth.

use super::*;

impl RankSim {
    /// Time this step's communication ops spent waiting for their partners: the union over the
    /// ops of [posted, partner posted), so waits on several NCCL streams at once count once.
    pub(super) fn pp_comm_wait(&self) -> i64 {
        self.pipe.as_ref().map_or(0, |ps| {
            let mut iv: Vec<(i64, i64)> = ps
                .items
                .iter()
                .filter(|it| it.rv.is_some())
                .map(|it| (it.start, it.end - rv_transfer(it)))
                .filter(|(a, b)| b > a)
                .collect();
            iv.sort_unstable();
            merge(&iv).iter().map(|(a, b)| b - a).sum()
        })
    }
}

pub(super) fn rv_transfer(it: &GpuItem) -> i64 {
    it.rv.map_or(0, |rv| rv.transfer + rv.skew)
}

/// Places every rank's GPU work of a step: each stream runs its items in order; an item starts
/// when its stream is free, its launch has happened and the items it waits for have ended; a
/// send/recv (or all_reduce) ends when all its members have started plus the transfer. Returns
/// false if some item could not be placed (a dependency cycle; never expected).
pub(super) fn place(ranks: &mut [RankSim]) -> bool {
    // Starts of each rendezvous' members, by key.
    let mut started: BTreeMap<RvKey, Vec<i64>> = BTreeMap::new();
    let n = ranks.len();
    let mut heads: Vec<BTreeMap<u32, usize>> = vec![BTreeMap::new(); n];
    // Per rank, per stream, the items in issue order.
    let lanes: Vec<BTreeMap<u32, Vec<usize>>> = ranks
        .iter()
        .map(|r| {
            let mut m: BTreeMap<u32, Vec<usize>> = BTreeMap::new();
            if let Some(ps) = &r.pipe {
                for (i, it) in ps.items.iter().enumerate() {
                    m.entry(it.stream).or_default().push(i);
                }
            }
            m
        })
        .collect();
    loop {
        let mut progress = false;
        let mut pending = false;
        for (ri, r) in ranks.iter_mut().enumerate() {
            let Some(ps) = r.pipe.as_deref_mut() else {
                continue;
            };
            let Some(lane_map) = lanes.get(ri) else {
                continue;
            };
            for (stream, lane) in lane_map {
                let head = heads.get_mut(ri).map(|h| h.entry(*stream).or_insert(0));
                let Some(head) = head else {
                    continue;
                };
                while let Some(&i) = lane.get(*head) {
                    let prev_end = head
                        .checked_sub(1)
                        .and_then(|h| lane.get(h))
                        .and_then(|&j| ps.items.get(j))
                        .map_or(i64::MIN, |it| it.end);
                    let Some(it) = ps.items.get(i) else {
                        break;
                    };
                    if !it.started {
                        let mut t = it.earliest.max(prev_end);
                        let mut ready = true;
                        for &a in &it.after {
                            match ps.items.get(a) {
                                Some(x) if x.ended => t = t.max(x.end),
                                Some(_) => ready = false,
                                None => {}
                            }
                        }
                        if !ready {
                            break;
                        }
                        let rv = it.rv;
                        if let Some(x) = ps.items.get_mut(i) {
                            x.start = t;
                            x.started = true;
                        }
                        if let Some(rv) = rv {
                            started.entry(rv.key).or_default().push(t);
                        }
                        progress = true;
                    }
                    let Some(it) = ps.items.get(i) else {
                        break;
                    };
                    let end = match it.rv {
                        None => Some(it.start + it.dur),
                        Some(rv) => started
                            .get(&rv.key)
                            .filter(|v| v.len() as u32 >= rv.members)
                            .and_then(|v| v.iter().max().copied())
                            .map(|latest| (latest + rv.transfer + rv.skew).max(it.start + 1_000)),
                    };
                    let Some(end) = end else {
                        break;
                    };
                    if let Some(x) = ps.items.get_mut(i) {
                        x.end = end;
                        x.ended = true;
                    }
                    *head += 1;
                    progress = true;
                }
                if *head < lane.len() {
                    pending = true;
                }
            }
        }
        if !pending {
            return true;
        }
        if !progress {
            // Never expected: end whatever is stuck where it stands, so the output stays valid.
            for r in ranks.iter_mut() {
                if let Some(ps) = r.pipe.as_deref_mut() {
                    for it in ps.items.iter_mut().filter(|it| !it.ended) {
                        if !it.started {
                            it.start = it.earliest;
                        }
                        it.end = it.start + it.dur.max(1_000);
                        it.started = true;
                        it.ended = true;
                    }
                }
            }
            return false;
        }
    }
}

impl JobSim<'_> {
    /// One step of a pipeline job.
    pub(crate) fn pipe_step(&mut self, s: u32) {
        let plan = self.plan;
        let Some(pp) = plan.pipe.as_ref() else {
            return;
        };
        for r in &mut self.ranks {
            r.pp_step_cpu(plan, pp, s);
        }
        let ok = place(&mut self.ranks);
        if let Some(t) = self.pipe.as_mut() {
            t.deadlocked |= !ok;
            t.ranks.resize(self.ranks.len(), Vec::new());
            self.collect_truth(pp, s);
        }
        for r in &mut self.ranks {
            r.pp_step_finish(pp);
            r.stats.comm_wait = r.pp_comm_wait();
        }
        if let Some(steps) = &mut self.steps {
            for (acc, r) in steps.iter_mut().zip(&self.ranks) {
                acc.push(r.stats);
            }
        }
    }

    pub(super) fn collect_truth(&mut self, pp: &PipePlan, s: u32) {
        let Some(truth) = self.pipe.as_mut() else {
            return;
        };
        // Every message: the sender's and receiver's ops.
        let mut sends: BTreeMap<RvKey, (u32, CommRec, GpuItem)> = BTreeMap::new();
        let mut recvs: BTreeMap<RvKey, (u32, CommRec, GpuItem)> = BTreeMap::new();
        for r in &self.ranks {
            let Some(ps) = &r.pipe else {
                continue;
            };
            for c in &ps.comms {
                let Some(it) = ps.items.get(c.item) else {
                    continue;
                };
                let Some(rv) = it.rv else {
                    continue;
                };
                match c.op {
                    PipeOp::Send => {
                        sends.insert(rv.key, (r.rank, *c, it.clone()));
                    }
                    PipeOp::Recv => {
                        recvs.insert(rv.key, (r.rank, *c, it.clone()));
                    }
                    PipeOp::AllReduce => {}
                }
            }
        }
        let first_new = truth.p2p.len();
        let mut recv_wait = vec![0i64; self.ranks.len()];
        let mut send_wait = vec![0i64; self.ranks.len()];
        for (key, (src, sc, si)) in &sends {
            let Some((dst, rc, ri)) = recvs.get(key) else {
                continue;
            };
            if let Some(w) = recv_wait.get_mut(*dst as usize) {
                *w += (si.start - ri.start).max(0);
            }
            if let Some(w) = send_wait.get_mut(*src as usize) {
                *w += (ri.start - si.start).max(0);
            }
            truth.p2p.push(P2pTruth {
                step: s,
                src: *src,
                dst: *dst,
                stage_from: sc.stage_from,
                stage_to: sc.stage_to,
                mb: sc.mb,
                fwd: sc.fwd,
                bytes: sc.bytes,
                group: sc.group,
                send_seq: sc.seq,
                recv_seq: rc.seq,
                send_start: si.start,
                recv_start: ri.start,
                send_end: si.end,
                recv_end: ri.end,
                transfer: si.rv.map_or(0, |rv| rv.transfer),
            });
        }
        if let Some(step_msgs) = truth.p2p.get_mut(first_new..) {
            step_msgs.sort_by_key(|m| (m.send_start.min(m.recv_start), m.src, m.dst));
        }
        // The window of each replica: its first forward kernel to its last backward kernel;
        // and each rank's compute-stream busy intervals (all of them: the optimizer of an early
        // finishing stage is not idle).
        let span = |r: &RankSim| -> Option<Span> {
            let ps = r.pipe.as_ref()?;
            let acts = ps.acts.iter().flat_map(|a| a.items.iter()).filter_map(|&i| ps.items.get(i));
            let first = acts.clone().map(|it| it.start).min()?;
            let last = acts.map(|it| it.end).max()?;
            let mut iv: Vec<(i64, i64)> = ps
                .items
                .iter()
                .filter(|it| it.stream == STREAM_COMPUTE)
                .map(|it| (it.start, it.end))
                .collect();
            iv.sort_unstable();
            Some(Span { first, last, busy: merge(&iv) })
        };
        let spans: Vec<Option<Span>> = self.ranks.iter().map(span).collect();
        for (g, sp) in spans.iter().enumerate() {
            let (_, d) = pp.coords(g as u32);
            let replica: Vec<&Span> = spans
                .iter()
                .enumerate()
                .filter(|(h, _)| pp.coords(*h as u32).1 == d)
                .filter_map(|(_, x)| x.as_ref())
                .collect();
            let w0 = replica.iter().map(|x| x.first).min().unwrap_or(0);
            let w1 = replica.iter().map(|x| x.last).max().unwrap_or(0);
            let compute = sp
                .as_ref()
                .map_or(0, |x| x.busy.iter().map(|&(a, b)| b.min(w1) - a.max(w0)).filter(|&d| d > 0).sum());
            let st = StageStep {
                window_start: w0,
                compute,
                window: w1 - w0,
                bubble: (w1 - w0) - compute,
                recv_wait: recv_wait.get(g).copied().unwrap_or(0),
                send_wait: send_wait.get(g).copied().unwrap_or(0),
            };
            if let Some(v) = truth.ranks.get_mut(g) {
                v.push(st);
            }
        }
    }
}
