//! Writes events as Kineto does, byte for byte in layout: one event per `{ ... }` block with the
//! same line breaks, key order and odd spacing (`"External id": 12,      "queued": 0`), so file
//! sizes and parser behaviour match real traces. Text is written directly (no `serde_json`), with
//! hand-rolled integer formatting; timestamps are µs with exactly three decimals.

use std::io::{self, Write};

use super::model::{occupancy_text, KernelId, KERNELS, K_NCCL_ALLREDUCE, K_NCCL_SENDRECV};
use super::shapes;
use super::sim::pipe::{CommRec, PgInfo, PipeOp};
use super::sim::{Class, Ev, Kind, RankSim, Th, NCCL_STREAMS, STREAM_COMPUTE};
use super::Plan;

/// Buffered writer that counts bytes and separates events with `,\n`.
#[derive(Debug)]
pub(crate) struct Out<W: Write> {
    w: W,
    buf: Vec<u8>,
    written: u64,
    first: bool,
    /// Buffered bytes that make a flush (the bytes written never depend on it).
    flush_at: usize,
}

const FLUSH_AT: usize = 1 << 20;

impl<W: Write> Out<W> {
    pub(crate) fn new(w: W) -> Self {
        Self::with_flush_at(w, FLUSH_AT)
    }

    /// A writer that flushes every `flush_at` bytes: jobs of many ranks write them all at once,
    /// so each buffer is kept small.
    pub(crate) fn with_flush_at(w: W, flush_at: usize) -> Self {
        Out { w, buf: Vec::with_capacity(flush_at + (64 << 10)), written: 0, first: true, flush_at }
    }

    pub(crate) fn sep(&mut self) {
        if self.first {
            self.first = false;
        } else {
            self.buf.extend_from_slice(b",\n");
        }
    }

    pub(crate) fn flush_if_big(&mut self) -> io::Result<()> {
        if self.buf.len() >= self.flush_at {
            self.flush_buf()?;
        }
        Ok(())
    }

    fn flush_buf(&mut self) -> io::Result<()> {
        self.w.write_all(&self.buf)?;
        self.written += self.buf.len() as u64;
        self.buf.clear();
        Ok(())
    }

    pub(crate) fn finish(mut self) -> io::Result<(W, u64)> {
        self.flush_buf()?;
        self.w.flush()?;
        Ok((self.w, self.written))
    }

    pub(crate) fn s(&mut self, s: &str) {
        self.buf.extend_from_slice(s.as_bytes());
    }

    pub(crate) fn b(&mut self, b: &[u8]) {
        self.buf.extend_from_slice(b);
    }

    pub(crate) fn u(&mut self, v: u64) {
        push_u64(&mut self.buf, v);
    }

    pub(crate) fn i(&mut self, v: i64) {
        if v < 0 {
            self.buf.push(b'-');
        }
        push_u64(&mut self.buf, v.unsigned_abs());
    }

    /// ns → µs with exactly three decimals (`4458676524648.797`), as Kineto prints.
    pub(crate) fn us(&mut self, ns: i64) {
        if ns < 0 {
            self.buf.push(b'-');
        }
        let a = ns.unsigned_abs();
        push_u64(&mut self.buf, a / 1000);
        let f = a % 1000;
        self.buf.extend_from_slice(&[
            b'.',
            b'0' + (f / 100) as u8,
            b'0' + (f / 10 % 10) as u8,
            b'0' + (f % 10) as u8,
        ]);
    }
}

fn push_u64(buf: &mut Vec<u8>, mut v: u64) {
    let mut tmp = [0u8; 20];
    let mut i = tmp.len();
    loop {
        i -= 1;
        tmp[i] = b'0' + (v % 10) as u8;
        v /= 10;
        if v == 0 {
            break;
        }
    }
    buf.extend_from_slice(&tmp[i..]);
}

/// Per-rank constants and pre-rendered text.
#[derive(Debug)]
pub(crate) struct RankFmt {
    rank: u32,
    pid: u64,
    tids: [u64; 2],
    device: u64,
    offset: i64,
    /// Per kernel: everything from `  {` to `"ts": `.
    kernel_pre: Vec<Vec<u8>>,
    /// Per kernel: the launch-shape args after the correlation id.
    kernel_post: Vec<Vec<u8>>,
    /// Per stream kind (compute, NCCL pg 0, NCCL pg 1): `,      "queued": 0, ... "correlation": `.
    mid: [Vec<u8>; 3],
    /// Per process group: the NCCL kernel's collective args minus the sizes.
    pg_args: [String; 2],
    /// Sequences in this rank's batch (`Input Dims`).
    batch: u64,
}

impl RankFmt {
    pub(crate) fn new(plan: &Plan, rank: u32) -> Self {
        let ids = plan.rank_ids(rank);
        let device = u64::from(ids.device);
        let mut kernel_pre = Vec::with_capacity(KERNELS.len());
        let mut kernel_post = Vec::with_capacity(KERNELS.len());
        for (i, k) in KERNELS.iter().enumerate() {
            let nccl = i == usize::from(K_NCCL_ALLREDUCE) || i == usize::from(K_NCCL_SENDRECV);
            let stream = if nccl { NCCL_STREAMS[0] } else { STREAM_COMPUTE };
            kernel_pre.push(
                format!(
                    "  {{\n    \"ph\": \"X\", \"cat\": \"kernel\", \"name\": \"{}\", \"pid\": {device}, \"tid\": {stream},\n    \"ts\": ",
                    k.name
                )
                .into_bytes(),
            );
            let (bps, wps) = occupancy_text(k);
            kernel_post.push(
                format!(
                    ",      \"registers per thread\": {},      \"shared memory\": {},      \"blocks per SM\": {bps},      \"warps per SM\": {wps},      \"grid\": [{}, {}, {}],      \"block\": [{}, {}, {}],      \"est. achieved occupancy %\": {}",
                    k.regs, k.smem, k.grid[0], k.grid[1], k.grid[2], k.block[0], k.block[1], k.block[2], k.occupancy
                )
                .into_bytes(),
            );
        }
        let mid = |stream: u32| {
            format!(",      \"queued\": 0, \"device\": {device}, \"context\": 1,      \"stream\": {stream}, \"correlation\": ")
                .into_bytes()
        };
        let pg_args = |pg: usize| {
            let (name, desc) = PG_NAMES.get(pg).copied().unwrap_or(PG_NAMES[0]);
            format!(
                ", \"Group size\": {}, \"dtype\": \"Float\", \"In split size\": \"[]\", \"Out split size\": \"[]\", \"Process Group Name\": \"{name}\", \"Process Group Description\": \"{desc}\", \"Process Group Ranks\": \"{}\"",
                plan.cfg.ranks,
                plan.pg_ranks_text()
            )
        };
        RankFmt {
            rank,
            pid: ids.pid,
            tids: [ids.main_tid, ids.autograd_tid],
            device,
            offset: plan.offsets.get(rank as usize).copied().unwrap_or(0),
            kernel_pre,
            kernel_post,
            mid: [mid(STREAM_COMPUTE), mid(NCCL_STREAMS[0]), mid(NCCL_STREAMS[1])],
            pg_args: [pg_args(0), pg_args(1)],
            batch: plan.batch_of(rank),
        }
    }
}

/// (`pg_name`, `pg_desc`) of each process group: DDP's default group and a group the training
/// script created for logging metrics.
pub(crate) const PG_NAMES: [(&str, &str); 2] = [("0", "default_pg"), ("1", "undefined")];

/// H100 SXM device properties as Kineto lists them (every GPU of the host, not only this rank's).
pub(crate) fn device_props<W: Write>(o: &mut Out<W>, id: u32) {
    o.s("    {\n      \"id\": ");
    o.u(u64::from(id));
    o.s(", \"name\": \"NVIDIA H100 80GB HBM3\", \"totalGlobalMem\": 84929347584,\n      \"computeMajor\": 9, \"computeMinor\": 0,\n      \"maxThreadsPerBlock\": 1024, \"maxThreadsPerMultiprocessor\": 2048,\n      \"regsPerBlock\": 65536, \"warpSize\": 32,\n      \"sharedMemPerBlock\": 49152, \"numSms\": 132\n    , \"regsPerMultiprocessor\": 65536, \"sharedMemPerBlockOptin\": 232448, \"sharedMemPerMultiprocessor\": 233472\n    }");
}

pub(crate) fn header<W: Write>(o: &mut Out<W>, plan: &Plan, f: &RankFmt) {
    o.s("\n{\n  \"schemaVersion\": 1,\n  \"deviceProperties\": [\n");
    for d in 0..plan.cfg.gpus_per_node {
        if d > 0 {
            o.s(",\n");
        }
        device_props(o, d);
    }
    o.s("\n  ],\n  \"distributedInfo\": {\"backend\": \"nccl\", \"rank\": ");
    o.u(u64::from(f.rank));
    o.s(", \"world_size\": ");
    o.u(u64::from(plan.cfg.ranks));
    if let Some(pp) = &plan.pipe {
        // The process groups this rank is a member of.
        let groups: Vec<&PgInfo> = pp.groups_of(f.rank).collect();
        o.s(", \"pg_count\": ");
        o.u(groups.len() as u64);
        o.s(", \"pg_config\": [");
        for (i, g) in groups.iter().enumerate() {
            if i > 0 {
                o.s(", ");
            }
            o.s("{\"pg_name\": \"");
            o.s(&g.name);
            o.s("\", \"pg_desc\": \"");
            o.s(&g.desc);
            o.s("\", \"backend_config\": \"cuda:nccl\", \"pg_size\": ");
            o.u(g.ranks.len() as u64);
            o.s(", \"ranks\": ");
            o.s(&g.ranks_text);
            o.s("}");
        }
        o.s("], \"nccl_version\": \"2.21.5\"},\n  \"traceEvents\": [\n");
        return;
    }
    let pgs = if plan.cfg.loss_allreduce { 2 } else { 1 };
    o.s(", \"pg_count\": ");
    o.u(pgs);
    o.s(", \"pg_config\": [");
    for (i, (name, desc)) in PG_NAMES.iter().take(pgs as usize).enumerate() {
        if i > 0 {
            o.s(", ");
        }
        o.s("{\"pg_name\": \"");
        o.s(name);
        o.s("\", \"pg_desc\": \"");
        o.s(desc);
        o.s("\", \"backend_config\": \"cuda:nccl\", \"pg_size\": ");
        o.u(u64::from(plan.cfg.ranks));
        o.s(", \"ranks\": ");
        o.s(plan.pg_ranks_text());
        o.s("}");
    }
    o.s("], \"nccl_version\": \"2.21.5\"},\n  \"traceEvents\": [\n");
}

/// The head of an `X` event, up to its first arg: `"External id": ext` (Kineto's layout). A
/// step marker's name is followed by its number.
#[allow(clippy::too_many_arguments)]
pub(crate) fn x_head<W: Write>(
    o: &mut Out<W>,
    cat: &str,
    name: &str,
    step_no: Option<u32>,
    pid: u64,
    tid: u64,
    ts: i64,
    dur: i64,
    ext: u64,
) {
    o.sep();
    o.s("  {\n    \"ph\": \"X\", \"cat\": \"");
    o.s(cat);
    o.s("\", \"name\": \"");
    o.s(name);
    if let Some(n) = step_no {
        o.u(u64::from(n));
    }
    o.s("\", \"pid\": ");
    o.u(pid);
    o.s(", \"tid\": ");
    o.u(tid);
    o.s(",\n    \"ts\": ");
    o.us(ts);
    o.s(", \"dur\": ");
    o.us(dur);
    o.s(",\n    \"args\": {\n      \"External id\": ");
    o.u(ext);
}

fn cpu_x_head<W: Write>(
    o: &mut Out<W>,
    f: &RankFmt,
    e: &Ev,
    name: &str,
    cat: &str,
    step_no: u32,
    step: bool,
) {
    let tid = f.tids[e.th as usize];
    x_head(o, cat, name, step.then_some(step_no), f.pid, tid, e.ts + f.offset, e.dur, e.ext);
}

/// A flow event `ph` (`s`, or `f` with `bp: "e"` when `end`) of category `cat` at (pid, tid, ts).
pub(crate) fn flow<W: Write>(o: &mut Out<W>, ph: &str, id: u64, at: (u64, u64, i64), cat: &str, end: bool) {
    o.sep();
    o.s("  {\n    \"ph\": \"");
    o.s(ph);
    o.s("\", \"id\": ");
    o.u(id);
    let (pid, tid, ts) = at;
    o.s(", \"pid\": ");
    o.u(pid);
    o.s(", \"tid\": ");
    o.u(tid);
    o.s(", \"ts\": ");
    o.us(ts);
    o.s(",\n    \"cat\": \"");
    o.s(cat);
    o.s("\", \"name\": \"");
    o.s(cat);
    o.s(if end { "\", \"bp\": \"e\"\n  }" } else { "\"\n  }" });
}

fn gpu_x_head<W: Write>(o: &mut Out<W>, f: &RankFmt, e: &Ev, cat: &str, stream: u32) {
    x_head(o, cat, e.name, None, f.device, u64::from(stream), e.ts + f.offset, e.dur, e.ext);
}

/// Writes the events of `class` from rank simulation `rs`'s current step.
pub(crate) fn step<W: Write>(
    o: &mut Out<W>,
    plan: &Plan,
    f: &RankFmt,
    rs: &RankSim,
    class: Class,
    step_no: u32,
) {
    for e in rs.ev.iter().filter(|e| e.class() == class) {
        match e.kind {
            Kind::CpuOp | Kind::Annot { .. } => cpu_event(o, plan, f, rs, e, step_no),
            Kind::Comms { coll } => comms_event(o, plan, f, rs, e, coll, step_no),
            Kind::Runtime { cbid, flow } => runtime_event(o, f, e, cbid, flow),
            Kind::Kernel { k } => kernel_event(o, f, e, k),
            Kind::Nccl { coll } => nccl_event(o, f, rs, e, coll),
            Kind::Memcpy { bytes, .. } | Kind::Memset { bytes } => memory_event(o, f, e, bytes),
            Kind::PipeComm { comm } => pipe_comm(o, plan, f, rs, e, comm, step_no),
            Kind::PipeKernel { comm } => pipe_kernel(o, plan, f, rs, e, comm),
            Kind::GpuAnnot { stream, step } => gpu_annotation(o, f, rs, e, stream, step, step_no),
        }
    }
}

/// A CPU op or annotation (`cpu_op`, `user_annotation`), with its `fwdbwd` flow end.
fn cpu_event<W: Write>(o: &mut Out<W>, plan: &Plan, f: &RankFmt, rs: &RankSim, e: &Ev, step_no: u32) {
    let (cat, step) = match e.kind {
        Kind::Annot { step } => ("user_annotation", step),
        _ => ("cpu_op", false),
    };
    cpu_x_head(o, f, e, rs.name_of(e), cat, step_no, step);
    o.s(",\"Record function id\": ");
    o.u(e.ext);
    if e.seq > 0 {
        o.s(", \"Sequence number\": ");
        o.u(u64::from(e.seq));
        o.s(if e.th == Th::Main { ", \"Fwd thread id\": 0" } else { ", \"Fwd thread id\": 1" });
    }
    o.s(", \"Ev Idx\": ");
    o.u(e.corr);
    if plan.cfg.record_shapes && cat == "cpu_op" {
        shapes::render(&mut o.buf, e.name, e.site, f.batch);
    }
    o.s("\n    }\n  }");
    if e.flow > 0 {
        let tid = f.tids[e.th as usize];
        flow(
            o,
            if e.th == Th::Main { "s" } else { "f" },
            u64::from(e.flow),
            (f.pid, tid, e.ts + f.offset),
            "fwdbwd",
            e.th != Th::Main,
        );
    }
}

/// `record_param_comms` of a DDP collective.
fn comms_event<W: Write>(
    o: &mut Out<W>,
    plan: &Plan,
    f: &RankFmt,
    rs: &RankSim,
    e: &Ev,
    coll: u32,
    step_no: u32,
) {
    let Some(c) = rs.colls.get(coll as usize) else {
        return;
    };
    let (pg_name, pg_desc) = PG_NAMES.get(c.pg).copied().unwrap_or(PG_NAMES[0]);
    let (elem, dtype) = c.kind.dtype();
    let nelems = c.bytes / elem;
    cpu_x_head(o, f, e, e.name, "cpu_op", step_no, false);
    o.s(",\"Record function id\": ");
    o.u(e.ext);
    o.s(", \"Process Group Name\": \"");
    o.s(pg_name);
    o.s("\", \"Global rank stride\": 1, \"Out msg nelems\": ");
    o.u(nelems);
    o.s(", \"Process Group Ranks\": \"");
    o.s(plan.pg_ranks_text());
    o.s("\", \"Group size\": ");
    o.u(u64::from(plan.cfg.ranks));
    o.s(", \"Global rank start\": 0, \"Ev Idx\": ");
    o.u(e.corr);
    o.s(", \"In msg nelems\": ");
    o.u(nelems);
    o.s(", \"In split size\": \"[]\", \"Out split size\": \"[]\", \"dtype\": \"");
    o.s(dtype);
    o.s("\", \"Process Group Description\": \"");
    o.s(pg_desc);
    o.s("\", \"Collective name\": \"");
    o.s(c.kind.collective_name());
    o.s("\", \"Rank\": ");
    o.u(u64::from(f.rank));
    o.s(", \"Seq\": ");
    o.u(c.seq);
    if plan.cfg.record_shapes {
        shapes::render(&mut o.buf, e.name, e.site, f.batch);
    }
    o.s("\n    }\n  }");
}

/// A CUDA runtime call, with the `s` end of its `ac2g` flow when it launched GPU work.
fn runtime_event<W: Write>(o: &mut Out<W>, f: &RankFmt, e: &Ev, cbid: u16, launched: bool) {
    let tid = f.tids[e.th as usize];
    o.sep();
    o.s("  {\n    \"ph\": \"X\", \"cat\": \"cuda_runtime\", \"name\": \"");
    o.s(e.name);
    o.s("\", \"pid\": ");
    o.u(f.pid);
    o.s(", \"tid\": ");
    o.u(tid);
    o.s(",\n    \"ts\": ");
    o.us(e.ts + f.offset);
    o.s(", \"dur\": ");
    o.us(e.dur);
    o.s(",\n    \"args\": {\n      \"External id\": ");
    o.u(e.ext);
    o.s(",      \"cbid\": ");
    o.u(u64::from(cbid));
    o.s(", \"correlation\": ");
    o.u(e.corr);
    o.s("\n    }\n  }");
    if launched {
        flow(o, "s", e.corr, (f.pid, tid, e.ts + f.offset), "ac2g", false);
    }
}

/// A compute kernel on the compute stream.
fn kernel_event<W: Write>(o: &mut Out<W>, f: &RankFmt, e: &Ev, k: KernelId) {
    let k = usize::from(k);
    let (Some(pre), Some(post)) = (f.kernel_pre.get(k), f.kernel_post.get(k)) else {
        return;
    };
    o.sep();
    o.b(pre);
    o.us(e.ts + f.offset);
    o.s(", \"dur\": ");
    o.us(e.dur);
    o.s(",\n    \"args\": {\n      \"External id\": ");
    o.u(e.ext);
    o.b(&f.mid[0]);
    o.u(e.corr);
    o.b(post);
    o.s("\n    }\n  }");
    flow(o, "f", e.corr, (f.device, u64::from(STREAM_COMPUTE), e.ts + f.offset), "ac2g", true);
}

/// The NCCL kernel of a DDP collective, with its collective args.
fn nccl_event<W: Write>(o: &mut Out<W>, f: &RankFmt, rs: &RankSim, e: &Ev, coll: u32) {
    let Some(c) = rs.colls.get(coll as usize) else {
        return;
    };
    let stream = NCCL_STREAMS.get(c.pg).copied().unwrap_or(NCCL_STREAMS[0]);
    let k = usize::from(c.kind.kernel());
    let Some(post) = f.kernel_post.get(k) else {
        return;
    };
    let (elem, dtype) = c.kind.dtype();
    let nelems = c.bytes / elem;
    gpu_x_head(o, f, e, "kernel", stream);
    o.b(&f.mid[1 + c.pg.min(1)]);
    o.u(e.corr);
    o.b(post);
    o.s(", \"Collective name\": \"");
    o.s(c.kind.collective_name());
    o.s("\", \"In msg nelems\": ");
    o.u(nelems);
    o.s(", \"Out msg nelems\": ");
    o.u(nelems);
    let args = f.pg_args.get(c.pg.min(1)).map_or("", String::as_str);
    if dtype == "Float" {
        o.s(args);
    } else {
        o.s(&args.replacen("\"dtype\": \"Float\"", &format!("\"dtype\": \"{dtype}\""), 1));
    }
    o.s(", \"Seq\": ");
    o.u(c.seq);
    o.s("\n    }\n  }");
    flow(o, "f", e.corr, (f.device, u64::from(stream), e.ts + f.offset), "ac2g", true);
}

/// A memcpy or memset on the compute stream.
fn memory_event<W: Write>(o: &mut Out<W>, f: &RankFmt, e: &Ev, bytes: u64) {
    let cat = if matches!(e.kind, Kind::Memset { .. }) { "gpu_memset" } else { "gpu_memcpy" };
    gpu_x_head(o, f, e, cat, STREAM_COMPUTE);
    o.s(",      \"device\": ");
    o.u(f.device);
    o.s(", \"context\": 1,      \"stream\": ");
    o.u(u64::from(STREAM_COMPUTE));
    o.s(", \"correlation\": ");
    o.u(e.corr);
    o.s(",      \"bytes\": ");
    o.u(bytes);
    // bytes per ns = GB/s; Rust's float formatting is the same on every platform.
    let gbps = bytes as f64 / e.dur.max(1) as f64;
    o.s(", \"memory bandwidth (GB/s)\": ");
    o.s(&format!("{gbps:?}"));
    o.s("\n    }\n  }");
    flow(o, "f", e.corr, (f.device, u64::from(STREAM_COMPUTE), e.ts + f.offset), "ac2g", true);
}

/// A `gpu_user_annotation` (the step's, or a collective's twin on its NCCL stream).
fn gpu_annotation<W: Write>(
    o: &mut Out<W>,
    f: &RankFmt,
    rs: &RankSim,
    e: &Ev,
    stream: u32,
    step: bool,
    step_no: u32,
) {
    o.sep();
    o.s("  {\n    \"ph\": \"X\", \"cat\": \"gpu_user_annotation\", \"name\": \"");
    o.s(rs.name_of(e));
    if step {
        o.u(u64::from(step_no));
    }
    o.s("\", \"pid\": ");
    o.u(f.device);
    o.s(", \"tid\": ");
    o.u(u64::from(stream));
    o.s(",\n    \"ts\": ");
    o.us(e.ts + f.offset);
    o.s(", \"dur\": ");
    o.us(e.dur);
    o.s(",\n    \"args\": {\n      \"External id\": ");
    o.u(e.ext);
    o.s("\n    }\n  }");
}

/// The group of pipeline op `c`, its rank list's start and stride, and the element size and
/// dtype of its message.
fn pipe_group<'a>(plan: &'a Plan, c: &CommRec) -> Option<(&'a PgInfo, u32, u32, u64, &'static str)> {
    let g = plan.pipe.as_ref()?.groups.get(c.group)?;
    let start = g.ranks.first().copied().unwrap_or(0);
    let stride = match g.ranks.as_slice() {
        [a, b, ..] => b - a,
        _ => 1,
    };
    let (elem, dtype) = if c.op == PipeOp::AllReduce { (4, "Float") } else { (2, "BFloat16") };
    Some((g, start, stride, elem, dtype))
}

/// `"Dst Rank"` of a send, `"Src Rank"` of a recv (global ranks, as the profiler writes them).
fn peer_arg<W: Write>(o: &mut Out<W>, c: &CommRec) {
    match c.op {
        PipeOp::Send => o.s(", \"Dst Rank\": "),
        PipeOp::Recv => o.s(", \"Src Rank\": "),
        PipeOp::AllReduce => return,
    }
    o.u(u64::from(c.peer));
}

/// `record_param_comms` of a pipeline send, recv or data-parallel all_reduce.
fn pipe_comm<W: Write>(
    o: &mut Out<W>,
    plan: &Plan,
    f: &RankFmt,
    rs: &RankSim,
    e: &Ev,
    comm: u32,
    step_no: u32,
) {
    let Some(c) = rs.pipe.as_ref().and_then(|p| p.comms.get(comm as usize)) else {
        return;
    };
    let Some((g, start, stride, elem, dtype)) = pipe_group(plan, c) else {
        return;
    };
    let nelems = c.bytes / elem;
    let local = |r: u32| g.ranks.iter().position(|&x| x == r).unwrap_or(0) as u64;
    cpu_x_head(o, f, e, e.name, "cpu_op", step_no, false);
    o.s(",\"Record function id\": ");
    o.u(e.ext);
    o.s(", \"Process Group Name\": \"");
    o.s(&g.name);
    o.s("\", \"Global rank stride\": ");
    o.u(u64::from(stride));
    o.s(", \"Out msg nelems\": ");
    o.u(nelems);
    o.s(", \"Process Group Ranks\": \"");
    o.s(&g.ranks_text);
    o.s("\", \"Group size\": ");
    o.u(g.ranks.len() as u64);
    o.s(", \"Global rank start\": ");
    o.u(u64::from(start));
    o.s(", \"Ev Idx\": ");
    o.u(e.corr);
    o.s(", \"In msg nelems\": ");
    o.u(nelems);
    o.s(", \"In split size\": \"[]\", \"Out split size\": \"[]\", \"dtype\": \"");
    o.s(dtype);
    o.s("\", \"Process Group Description\": \"");
    o.s(&g.desc);
    o.s("\", \"Collective name\": \"");
    o.s(c.op.collective_name());
    // For a send or recv, `Rank` is the peer's rank in the group (RECORD_PARAM_COMMS gets
    // `dstRank` / `srcRank`); for a collective, the caller's.
    o.s("\", \"Rank\": ");
    o.u(if c.op == PipeOp::AllReduce { local(f.rank) } else { local(c.peer) });
    peer_arg(o, c);
    o.s(", \"Seq\": ");
    o.u(c.seq);
    if plan.cfg.record_shapes {
        shapes::render(&mut o.buf, e.name, e.site, f.batch);
    }
    o.s("\n    }\n  }");
}

/// The NCCL kernel of a pipeline send, recv or data-parallel all_reduce.
fn pipe_kernel<W: Write>(o: &mut Out<W>, plan: &Plan, f: &RankFmt, rs: &RankSim, e: &Ev, comm: u32) {
    let Some(ps) = rs.pipe.as_ref() else {
        return;
    };
    let Some(c) = ps.comms.get(comm as usize) else {
        return;
    };
    let Some((g, _, _, elem, dtype)) = pipe_group(plan, c) else {
        return;
    };
    let stream = ps.items.get(c.item).map_or(NCCL_STREAMS[0], |it| it.stream);
    let k = if c.op == PipeOp::AllReduce { K_NCCL_ALLREDUCE } else { K_NCCL_SENDRECV };
    let Some(post) = f.kernel_post.get(usize::from(k)) else {
        return;
    };
    let nelems = c.bytes / elem;
    gpu_x_head(o, f, e, "kernel", stream);
    o.s(",      \"queued\": 0, \"device\": ");
    o.u(f.device);
    o.s(", \"context\": 1,      \"stream\": ");
    o.u(u64::from(stream));
    o.s(", \"correlation\": ");
    o.u(e.corr);
    o.b(post);
    o.s(", \"Collective name\": \"");
    o.s(c.op.collective_name());
    o.s("\", \"In msg nelems\": ");
    o.u(nelems);
    o.s(", \"Out msg nelems\": ");
    o.u(nelems);
    o.s(", \"Group size\": ");
    o.u(g.ranks.len() as u64);
    o.s(", \"dtype\": \"");
    o.s(dtype);
    o.s("\", \"In split size\": \"[]\", \"Out split size\": \"[]\", \"Process Group Name\": \"");
    o.s(&g.name);
    o.s("\", \"Process Group Description\": \"");
    o.s(&g.desc);
    o.s("\", \"Process Group Ranks\": \"");
    o.s(&g.ranks_text);
    o.s("\"");
    peer_arg(o, c);
    o.s(", \"Seq\": ");
    o.u(c.seq);
    o.s("\n    }\n  }");
    flow(o, "f", e.corr, (f.device, u64::from(stream), e.ts + f.offset), "ac2g", true);
}

pub(crate) fn meta<W: Write>(
    o: &mut Out<W>,
    name: &str,
    ts: i64,
    pid: u64,
    tid: u64,
    key: &str,
    value: Result<&str, u64>,
) {
    o.sep();
    o.s("  {\n    \"name\": \"");
    o.s(name);
    o.s("\", \"ph\": \"M\", \"ts\": ");
    o.us(ts);
    o.s(", \"pid\": ");
    o.u(pid);
    o.s(", \"tid\": ");
    o.u(tid);
    o.s(",\n    \"args\": {\n      \"");
    o.s(key);
    o.s("\": ");
    match value {
        Ok(s) => {
            o.s("\"");
            o.s(s);
            o.s("\"");
        }
        Err(n) => o.u(n),
    }
    o.s("\n    }\n  }");
}

/// Metadata events, the profiler's own span and instants, and the closing top-level keys.
pub(crate) fn trailer<W: Write>(o: &mut Out<W>, plan: &Plan, f: &RankFmt, rs: &RankSim) {
    let meta_ts = rs.first_step_start - 357_000 + f.offset;
    process_meta(o, meta_ts, f.pid, plan.cfg.gpus_per_node);
    let mut streams = vec![STREAM_COMPUTE, NCCL_STREAMS[0]];
    if plan.cfg.loss_allreduce {
        streams.push(NCCL_STREAMS[1]);
    }
    if let Some(pp) = &plan.pipe {
        streams = std::iter::once(STREAM_COMPUTE).chain(pp.streams_of(f.rank)).collect();
    }
    for s in streams {
        let s = u64::from(s);
        meta(o, "thread_name", meta_ts, f.device, s, "name", Ok(&format!("stream {s} ")));
        meta(o, "thread_sort_index", meta_ts, f.device, s, "sort_index", Err(s));
    }
    for (i, tid) in f.tids.iter().enumerate() {
        let label = if i == 0 { "pt_main_thread" } else { "pt_autograd_0" };
        meta(o, "thread_name", meta_ts, f.pid, *tid, "name", Ok(&format!("thread {tid} ({label})")));
        meta(o, "thread_sort_index", meta_ts, f.pid, *tid, "sort_index", Err(*tid));
    }
    let start = plan.trace_start_ns + f.offset;
    closing(o, start, rs.trace_end() + f.offset, f.pid, plan.base_time_ns);
}

/// The CPU and GPU processes' metadata events (names, labels, sort order), at `meta_ts`.
pub(crate) fn process_meta<W: Write>(o: &mut Out<W>, meta_ts: i64, pid: u64, gpus_per_node: u32) {
    meta(o, "process_name", meta_ts, pid, 0, "name", Ok("python3.10"));
    meta(o, "process_labels", meta_ts, pid, 0, "labels", Ok("CPU"));
    meta(o, "process_sort_index", meta_ts, pid, 0, "sort_index", Err(pid));
    for d in 0..u64::from(gpus_per_node) {
        meta(o, "process_name", meta_ts, d, 0, "name", Ok("python3.10"));
        meta(o, "process_labels", meta_ts, d, 0, "labels", Ok(&format!("GPU {d}")));
        meta(o, "process_sort_index", meta_ts, d, 0, "sort_index", Err(16_777_216 + d));
    }
}

/// The profiler's own span and instants from `start` to `end`, and the closing top-level keys.
pub(crate) fn closing<W: Write>(o: &mut Out<W>, start: i64, end: i64, pid: u64, base_time_ns: i64) {
    o.sep();
    o.s("  {\n    \"ph\": \"X\", \"cat\": \"Trace\", \"ts\": ");
    o.us(start);
    o.s(", \"dur\": ");
    o.us(end - start);
    o.s(",\n    \"pid\": \"Spans\", \"tid\": \"PyTorch Profiler\",\n    \"name\": \"PyTorch Profiler (0)\",\n    \"args\": {\n      \"Op count\": 0\n    }\n  }");
    o.sep();
    o.s("  {\n    \"name\": \"process_sort_index\", \"ph\": \"M\", \"ts\": ");
    o.us(start);
    o.s(",\n    \"pid\": \"Spans\", \"tid\": 0,\n    \"args\": {\n      \"sort_index\": 536870912\n    }\n  }");
    o.sep();
    o.s("  {\n    \"name\": \"Iteration Start: PyTorch Profiler\", \"ph\": \"i\", \"s\": \"g\",\n    \"pid\": \"Traces\", \"tid\": \"Trace PyTorch Profiler\", \"ts\": ");
    o.us(start);
    o.s("\n  }");
    o.sep();
    o.s("  {\n    \"name\": \"Record Window End\", \"ph\": \"i\", \"s\": \"g\",\n    \"pid\": \"\", \"tid\": \"\", \"ts\": ");
    o.us(end);
    o.s("\n  }\n  ],\n  \"traceName\": \"/tmp/libkineto_activities_");
    o.u(pid);
    o.s(".json\",\n  \"displayTimeUnit\": \"ms\",\n  \"baseTimeNanoseconds\": ");
    o.i(base_time_ns);
    o.s("\n}");
}

#[cfg(test)]
mod tests {
    use super::Out;

    #[test]
    fn number_formatting() {
        let mut o = Out::new(Vec::new());
        o.us(4_458_676_524_648_797);
        o.s(" ");
        o.us(5);
        o.s(" ");
        o.us(-1_500);
        o.s(" ");
        o.u(0);
        o.s(" ");
        o.i(-42);
        let (v, n) = o.finish().unwrap_or_default();
        assert_eq!(String::from_utf8_lossy(&v), "4458676524648.797 0.005 -1.500 0 -42");
        assert_eq!(n, v.len() as u64);
    }
}
