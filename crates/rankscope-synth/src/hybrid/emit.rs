//! A hybrid job's trace documents, in the DDP generator's Kineto layout ([`crate::emit`]):
//! `distributedInfo` with every group of the rank (`pg_count`, `pg_config`), `host_name`, and the
//! communication args recent PyTorch writes on `record_param_comms` and on NCCL kernels
//! (`Process Group Name` / `Description` / `Ranks`, `Group size`, `Seq`, message sizes,
//! `dtype`, split sizes, `Src Rank` / `Dst Rank`).

use std::io::{self, Write};

use super::layout::Group;
use super::model::Kern;
use super::rank::{CommKind, CommOp, Ev, EvKind, RankRun, AUTOGRAD, MAIN, STREAM_COMPUTE};
use super::run::HPlan;
use super::HybridCause;
use crate::emit::{closing, device_props, flow, meta, process_meta, x_head, Out};
use crate::model::occupancy_text;

/// Which events a pass writes (Kineto's order: one CPU thread's ops for the whole trace, then
/// the other's, then runtime calls and GPU activities).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Pass {
    Autograd,
    Main,
    Activity,
}

/// Text shared by every rank: each kernel's launch-shape args.
#[derive(Debug)]
pub(crate) struct Text {
    post: Vec<String>,
}

impl Text {
    pub fn new() -> Text {
        let post = Kern::all()
            .map(|k| match k.spec() {
                Some(k) => {
                    let (bps, wps) = occupancy_text(k);
                    format!(
                        ",      \"registers per thread\": {},      \"shared memory\": {},      \"blocks per SM\": {bps},      \"warps per SM\": {wps},      \"grid\": [{}, {}, {}],      \"block\": [{}, {}, {}],      \"est. achieved occupancy %\": {}",
                        k.regs, k.smem, k.grid[0], k.grid[1], k.grid[2], k.block[0], k.block[1], k.block[2], k.occupancy
                    )
                }
                None => String::new(),
            })
            .collect();
        Text { post }
    }

    fn post(&self, k: Kern) -> &str {
        self.post.get(k.index()).map_or("", String::as_str)
    }
}

fn offset(p: &HPlan, r: &RankRun) -> i64 {
    let host = p.lay.places.get(r.rank as usize).map_or(0, |x| x.host);
    p.lay.host_offsets.get(host as usize).copied().unwrap_or(0)
}

/// `[a, b, ...]` as torch's `format_list` writes it: at most 30 entries, then `, ...`.
fn list_arg(v: &[u64]) -> String {
    let items: Vec<String> = v.iter().take(30).map(u64::to_string).collect();
    if v.len() > 30 {
        format!("[{}, ...]", items.join(", "))
    } else {
        format!("[{}]", items.join(", "))
    }
}

pub(crate) fn header<W: Write>(o: &mut Out<W>, p: &HPlan, rank: u32) {
    o.s("\n{\n  \"schemaVersion\": 1,\n  \"deviceProperties\": [\n");
    for d in 0..p.cfg.gpus_per_node {
        if d > 0 {
            o.s(",\n");
        }
        device_props(o, d);
    }
    o.s("\n  ],\n  \"distributedInfo\": {\"backend\": \"nccl\", \"rank\": ");
    o.u(u64::from(rank));
    o.s(", \"world_size\": ");
    o.u(u64::from(p.lay.world));
    let groups: Vec<&Group> = p
        .lay
        .member_of
        .get(rank as usize)
        .map(|v| v.iter().filter_map(|&g| p.lay.group(g)).collect())
        .unwrap_or_default();
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
        o.s(if g.gloo {
            "\", \"backend_config\": \"cpu:gloo,cuda:gloo\", \"pg_size\": "
        } else {
            "\", \"backend_config\": \"cuda:nccl\", \"pg_size\": "
        });
        o.u(g.ranks.len() as u64);
        o.s(", \"ranks\": ");
        o.s(&g.ranks_json);
        o.s("}");
    }
    o.s("], \"nccl_version\": \"2.21.5\"},\n  \"host_name\": \"");
    let host = p.lay.places.get(rank as usize).map_or(0, |x| x.host);
    o.s(&p.lay.host_name(host));
    o.s("\",\n  \"traceEvents\": [\n");
}

/// Writes `r`'s events of this step that belong to `pass`, flushing as the buffer fills (a
/// rank's step is about a megabyte; a thousand ranks are written at once).
pub(crate) fn step<W: Write>(
    o: &mut Out<W>,
    p: &HPlan,
    text: &Text,
    r: &RankRun,
    pass: Pass,
    step_no: u32,
) -> io::Result<()> {
    let off = offset(p, r);
    let th = match pass {
        Pass::Autograd => Some(AUTOGRAD),
        Pass::Main => Some(MAIN),
        Pass::Activity => None,
    };
    for e in &r.ev {
        match th {
            Some(t) if e.kind.is_cpu() && e.th == t => cpu_event(o, p, r, e, off, step_no),
            None if !e.kind.is_cpu() => activity(o, p, text, r, e, off, step_no),
            _ => continue,
        }
        o.flush_if_big()?;
    }
    Ok(())
}

fn cpu_event<W: Write>(o: &mut Out<W>, p: &HPlan, r: &RankRun, e: &Ev, off: i64, step_no: u32) {
    let tid = r.tids.get(usize::from(e.th)).copied().unwrap_or(r.pid);
    let head = |o: &mut Out<W>, cat: &str, name: &str, step: Option<u32>| {
        x_head(o, cat, name, step, r.pid, tid, e.ts + off, e.dur, e.ext);
    };
    match e.kind {
        EvKind::Op(name) => head(o, "cpu_op", name, None),
        EvKind::Step => head(o, "user_annotation", "ProfilerStep#", Some(step_no)),
        EvKind::Stall => {
            let name = match &p.h.cause {
                HybridCause::HostStall { name, .. } => name.as_str(),
                _ => "straggler_sleep",
            };
            head(o, "user_annotation", name, None);
        }
        EvKind::Annot(name) => head(o, "user_annotation", name, None),
        EvKind::NcclAnnot(op) => head(o, "user_annotation", &annotation(p, r, op), None),
        EvKind::Comms(op) => {
            head(o, "cpu_op", "record_param_comms", None);
            comms_args(o, p, r, e, op);
            o.s("\n    }\n  }");
            return;
        }
        _ => return,
    }
    o.s(",\"Record function id\": ");
    o.u(e.ext);
    o.s(", \"Ev Idx\": ");
    o.u(e.corr);
    o.s("\n    }\n  }");
}

/// `nccl:all_reduce`, `nccl:send 0->1` (group ranks), …: ProcessGroupNCCL's profiling title.
fn annotation(p: &HPlan, r: &RankRun, op: u32) -> String {
    let Some(c) = r.ops.get(op as usize) else { return String::new() };
    let g = p.lay.group(c.group);
    let local = |x: u32| g.and_then(|g| g.local(x)).unwrap_or(0);
    match c.kind {
        CommKind::Send => format!("nccl:send {}->{}", local(r.rank), local(c.peer)),
        CommKind::Recv => format!("nccl:recv {}<-{}", local(r.rank), local(c.peer)),
        k => k.annotation().to_string(),
    }
}

/// The group's ranks as an arithmetic sequence (`Global rank start`, `Global rank stride`), if
/// they are one (torch writes them only then).
fn start_stride(g: &Group) -> Option<(u32, u32)> {
    let first = *g.ranks.first()?;
    let stride = match g.ranks.as_slice() {
        [a, b, ..] => b.checked_sub(*a)?,
        _ => 1,
    };
    let even = g.ranks.windows(2).all(|w| w[1].checked_sub(w[0]) == Some(stride));
    (even && stride > 0).then_some((first, stride))
}

fn comms_args<W: Write>(o: &mut Out<W>, p: &HPlan, r: &RankRun, e: &Ev, op: u32) {
    let Some(c) = r.ops.get(op as usize) else { return };
    let Some(g) = p.lay.group(c.group) else { return };
    let local = |x: u32| u64::from(g.local(x).unwrap_or(0));
    o.s(",\"Record function id\": ");
    o.u(e.ext);
    o.s(", \"Process Group Name\": \"");
    o.s(&g.name);
    o.s("\"");
    let ss = start_stride(g);
    if let Some((_, stride)) = ss {
        o.s(", \"Global rank stride\": ");
        o.u(u64::from(stride));
    }
    o.s(", \"Out msg nelems\": ");
    o.u(c.out_nelems);
    o.s(", \"Process Group Ranks\": \"");
    o.s(&g.ranks_arg);
    o.s("\", \"Group size\": ");
    o.u(g.ranks.len() as u64);
    if let Some((start, _)) = ss {
        o.s(", \"Global rank start\": ");
        o.u(u64::from(start));
    }
    o.s(", \"Ev Idx\": ");
    o.u(e.corr);
    o.s(", \"In msg nelems\": ");
    o.u(c.in_nelems);
    splits(o, c);
    o.s(", \"dtype\": \"");
    o.s(c.dtype);
    o.s("\", \"Process Group Description\": \"");
    o.s(&g.desc);
    o.s("\", \"Collective name\": \"");
    o.s(c.kind.collective_name());
    // A send's or receive's `Rank` is the peer's group rank (RECORD_PARAM_COMMS gets
    // `dstRank` / `srcRank`); a collective's, the caller's.
    o.s("\", \"Rank\": ");
    o.u(if c.kind.is_p2p() { local(c.peer) } else { local(r.rank) });
    peer(o, c);
    o.s(", \"Seq\": ");
    o.u(c.seq);
}

fn splits<W: Write>(o: &mut Out<W>, c: &CommOp) {
    match &c.splits {
        Some(s) => {
            o.s(", \"In split size\": \"");
            o.s(&list_arg(&s.0));
            o.s("\", \"Out split size\": \"");
            o.s(&list_arg(&s.1));
            o.s("\"");
        }
        None => o.s(", \"In split size\": \"[]\", \"Out split size\": \"[]\""),
    }
}

fn peer<W: Write>(o: &mut Out<W>, c: &CommOp) {
    match c.kind {
        CommKind::Send => o.s(", \"Dst Rank\": "),
        CommKind::Recv => o.s(", \"Src Rank\": "),
        _ => return,
    }
    o.u(u64::from(c.peer));
}

fn stream_of(r: &RankRun, item: u32) -> u32 {
    r.items
        .get(item as usize)
        .and_then(|it| r.streams.get(usize::from(it.stream)))
        .map_or(STREAM_COMPUTE, |s| s.cupti)
}

#[allow(clippy::too_many_arguments)]
fn activity<W: Write>(o: &mut Out<W>, p: &HPlan, text: &Text, r: &RankRun, e: &Ev, off: i64, step_no: u32) {
    let dev = u64::from(r.device);
    let ts = e.ts + off;
    match e.kind {
        EvKind::Runtime { name, cbid, flow: launched } => {
            let tid = r.tids.get(usize::from(e.th)).copied().unwrap_or(r.pid);
            o.sep();
            o.s("  {\n    \"ph\": \"X\", \"cat\": \"cuda_runtime\", \"name\": \"");
            o.s(name);
            o.s("\", \"pid\": ");
            o.u(r.pid);
            o.s(", \"tid\": ");
            o.u(tid);
            o.s(",\n    \"ts\": ");
            o.us(ts);
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
                flow(o, "s", e.corr, (r.pid, tid, ts), "ac2g", false);
            }
        }
        EvKind::Kernel(k) => {
            let Some(spec) = k.spec() else { return };
            x_head(o, "kernel", spec.name, None, dev, u64::from(STREAM_COMPUTE), ts, e.dur, e.ext);
            mid(o, dev, STREAM_COMPUTE, e.corr);
            o.s(text.post(k));
            o.s("\n    }\n  }");
            flow(o, "f", e.corr, (dev, u64::from(STREAM_COMPUTE), ts), "ac2g", true);
        }
        EvKind::Memcpy(bytes) | EvKind::Memset(bytes) => {
            let (cat, name) = match e.kind {
                EvKind::Memset(_) => ("gpu_memset", "Memset (Device)"),
                _ => ("gpu_memcpy", "Memcpy DtoH (Device -> Pageable)"),
            };
            x_head(o, cat, name, None, dev, u64::from(STREAM_COMPUTE), ts, e.dur, e.ext);
            o.s(",      \"device\": ");
            o.u(dev);
            o.s(", \"context\": 1,      \"stream\": ");
            o.u(u64::from(STREAM_COMPUTE));
            o.s(", \"correlation\": ");
            o.u(e.corr);
            o.s(",      \"bytes\": ");
            o.u(bytes);
            let gbps = bytes as f64 / e.dur.max(1) as f64;
            o.s(", \"memory bandwidth (GB/s)\": ");
            o.s(&format!("{gbps:?}"));
            o.s("\n    }\n  }");
            flow(o, "f", e.corr, (dev, u64::from(STREAM_COMPUTE), ts), "ac2g", true);
        }
        EvKind::NcclKernel(op) => nccl_kernel(o, p, text, r, e, op, ts),
        EvKind::NcclGpuAnnot(op) => {
            let stream = stream_of(r, e.item);
            x_head(
                o,
                "gpu_user_annotation",
                &annotation(p, r, op),
                None,
                dev,
                u64::from(stream),
                ts,
                e.dur,
                e.ext,
            );
            o.s("\n    }\n  }");
        }
        EvKind::StepGpu => {
            x_head(
                o,
                "gpu_user_annotation",
                "ProfilerStep#",
                Some(step_no),
                dev,
                u64::from(STREAM_COMPUTE),
                ts,
                e.dur,
                e.ext,
            );
            o.s("\n    }\n  }");
        }
        _ => {}
    }
}

fn mid<W: Write>(o: &mut Out<W>, dev: u64, stream: u32, corr: u64) {
    o.s(",      \"queued\": 0, \"device\": ");
    o.u(dev);
    o.s(", \"context\": 1,      \"stream\": ");
    o.u(u64::from(stream));
    o.s(", \"correlation\": ");
    o.u(corr);
}

fn nccl_kernel<W: Write>(o: &mut Out<W>, p: &HPlan, text: &Text, r: &RankRun, e: &Ev, op: u32, ts: i64) {
    let dev = u64::from(r.device);
    let Some(c) = r.ops.get(op as usize) else { return };
    let Some(g) = p.lay.group(c.group) else { return };
    let Some(spec) = c.kernel.spec() else { return };
    let stream = stream_of(r, e.item);
    x_head(o, "kernel", spec.name, None, dev, u64::from(stream), ts, e.dur, e.ext);
    mid(o, dev, stream, e.corr);
    o.s(text.post(c.kernel));
    o.s(", \"Collective name\": \"");
    o.s(c.kind.collective_name());
    o.s("\", \"In msg nelems\": ");
    o.u(c.in_nelems);
    o.s(", \"Out msg nelems\": ");
    o.u(c.out_nelems);
    o.s(", \"Group size\": ");
    o.u(g.ranks.len() as u64);
    o.s(", \"dtype\": \"");
    o.s(c.dtype);
    o.s("\"");
    splits(o, c);
    o.s(", \"Process Group Name\": \"");
    o.s(&g.name);
    o.s("\", \"Process Group Description\": \"");
    o.s(&g.desc);
    o.s("\", \"Process Group Ranks\": \"");
    o.s(&g.ranks_arg);
    o.s("\"");
    peer(o, c);
    o.s(", \"Seq\": ");
    o.u(c.seq);
    o.s("\n    }\n  }");
    flow(o, "f", e.corr, (dev, u64::from(stream), ts), "ac2g", true);
}

/// Metadata events, the profiler's own span and instants, and the closing top-level keys.
pub(crate) fn trailer<W: Write>(o: &mut Out<W>, p: &HPlan, r: &RankRun) {
    let off = offset(p, r);
    let meta_ts = r.first_step_start - 357_000 + off;
    process_meta(o, meta_ts, r.pid, p.cfg.gpus_per_node);
    let dev = u64::from(r.device);
    for s in &r.streams {
        let id = u64::from(s.cupti);
        meta(o, "thread_name", meta_ts, dev, id, "name", Ok(&format!("stream {id} ")));
        meta(o, "thread_sort_index", meta_ts, dev, id, "sort_index", Err(id));
    }
    for (i, tid) in r.tids.iter().enumerate() {
        let label = if i == 0 { "pt_main_thread" } else { "pt_autograd_0" };
        meta(o, "thread_name", meta_ts, r.pid, *tid, "name", Ok(&format!("thread {tid} ({label})")));
        meta(o, "thread_sort_index", meta_ts, r.pid, *tid, "sort_index", Err(*tid));
    }
    closing(o, p.trace_start_ns + off, r.last_step_end + 2_314_000 + off, r.pid, p.base_time_ns);
}
