//! `rankscope synth --scenario`: every preset's traces read cleanly with our own ingest and
//! contain what its manifest says was injected (and nothing else), deterministically.
//! The diagnosis of these traces is tested by the analysis' own tests, against the manifests.

#![allow(clippy::expect_used, clippy::unwrap_used)] // a failed expectation is the test failing

mod common;

use std::collections::BTreeMap;

use common::ingest_chunked;
use rankscope_core::model::Severity;
use rankscope_core::normalize::{assemble, Rules};
use rankscope_synth::{self as synth, Cause, Manifest, Scenario, SynthConfig};
use serde_json::Value;

/// A generated scenario: each rank's parsed document and the manifest.
struct Set {
    cfg: SynthConfig,
    docs: Vec<Value>,
    man: Manifest,
}

impl Set {
    fn events(&self, r: usize) -> &Vec<Value> {
        self.docs[r]["traceEvents"].as_array().expect("traceEvents")
    }

    /// Complete events of category `cat` named `name` on rank `r`.
    fn named<'a>(&'a self, r: usize, cat: &'a str, name: &'a str) -> impl Iterator<Item = &'a Value> + 'a {
        self.events(r).iter().filter(move |e| e["cat"] == cat && e["name"] == name)
    }
}

fn generate(cfg: &SynthConfig) -> Vec<Vec<u8>> {
    synth::write_ranks(cfg, vec![Vec::new(); cfg.ranks as usize])
        .expect("write_ranks")
        .into_iter()
        .map(|(b, n)| {
            assert_eq!(n, b.len() as u64);
            b
        })
        .collect()
}

/// Generates `cfg`, checks that our ingest reads every file without a problem and that the same
/// config gives the same bytes, and parses the documents for the content checks.
fn load(cfg: SynthConfig) -> Set {
    assert!(cfg.validate().is_ok(), "{:?}", cfg.validate());
    let bytes = generate(&cfg);
    let traces: Vec<_> = bytes
        .iter()
        .enumerate()
        .map(|(r, b)| ingest_chunked(&synth::file_name(r as u32, false), b, 1 << 20).expect("a trace"))
        .collect();
    let job = assemble(traces, &[], &Rules::default());
    assert!(job.errors.is_empty(), "{:?}", job.errors);
    assert_eq!(job.ranks.len(), cfg.ranks as usize);
    for (r, entry) in job.ranks.iter().enumerate() {
        assert_eq!(entry.rank, r as u32, "ranks from distributedInfo");
        let bad: Vec<_> = entry.trace.diagnostics.iter().filter(|d| d.severity > Severity::Info).collect();
        assert!(bad.is_empty(), "rank {r}: {bad:?}");
        let unlinked = entry.trace.diagnostics.iter().any(|d| format!("{:?}", d.kind) == "UnlinkedGpuEvent");
        assert!(!unlinked, "rank {r}: GPU work without its launch");
    }
    assert_eq!(bytes, generate(&cfg), "same config, same bytes");
    let docs = bytes
        .iter()
        .enumerate()
        .map(|(r, b)| serde_json::from_slice(b).unwrap_or_else(|e| panic!("rank {r}: not JSON: {e}")))
        .collect();
    let man = synth::manifest(&cfg);
    assert!(man.adjustments.is_empty(), "{:?}", man.adjustments);
    assert_eq!(
        serde_json::to_string(&man).expect("manifest"),
        serde_json::to_string(&synth::manifest(&cfg)).expect("manifest"),
        "deterministic manifest"
    );
    Set { cfg, docs, man }
}

/// A preset with fewer steps, to keep the tests quick.
fn preset(s: Scenario, steps: u32) -> SynthConfig {
    SynthConfig { steps, ..s.config() }
}

/// µs with three decimals → ns.
fn ns(v: &Value) -> i64 {
    (v.as_f64().expect("number") * 1000.0).round() as i64
}

fn end(e: &Value) -> i64 {
    ns(&e["ts"]) + ns(&e["dur"])
}

fn close(got: i64, want: i64, rel: f64, abs: i64) -> bool {
    (got - want).abs() as f64 <= rel * want.abs() as f64 + abs as f64
}

fn mean(v: &[i64]) -> i64 {
    v.iter().sum::<i64>() / v.len().max(1) as i64
}

const FWD: &str = "## forward ##";
const DATALOADER: &str = "enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__";

#[test]
fn every_preset_is_valid_and_names_its_cause() {
    for s in Scenario::ALL {
        let cfg = s.config();
        assert_eq!(cfg.validate(), Ok(()), "{}", s.name());
        assert_eq!(Scenario::from_name(s.name()), Some(s));
        assert_eq!(cfg.scenario, Some(s));
    }
    let cause = |s: Scenario| synth::manifest(&preset(s, 2)).injected.cause;
    assert_eq!(cause(Scenario::Baseline), None);
    assert_eq!(cause(Scenario::GoodOverlap), None);
    assert_eq!(cause(Scenario::HostStall), Some(Cause::HostStall));
    assert_eq!(cause(Scenario::SlowDataloader), Some(Cause::InputBound));
    assert_eq!(cause(Scenario::SmallBuckets), Some(Cause::SmallCollectives));
    assert_eq!(cause(Scenario::UnevenBatch), Some(Cause::ComputeImbalance));
    assert_eq!(cause(Scenario::SlowGpu), Some(Cause::SlowDevice));
    assert_eq!(cause(Scenario::HostSync), Some(Cause::HostSync));
    assert_eq!(cause(Scenario::AllToAll), None);
    assert_eq!(synth::manifest(&Scenario::HangSkippedCollective.config()).injected.cause, Some(Cause::Hang));
    assert_eq!(synth::manifest(&Scenario::EarlyExit.config()).injected.cause, Some(Cause::Hang));
    for s in [
        Scenario::PipelineGpipe,
        Scenario::Pipeline1f1b,
        Scenario::PipelineInterleaved,
        Scenario::PipelineSlowStage,
    ] {
        assert_eq!(cause(s), Some(Cause::PipelineBubble), "{}", s.name());
    }
    // The demo's straggler is a slower GPU.
    assert_eq!(synth::manifest(&SynthConfig::default()).injected.cause, Some(Cause::SlowDevice));
}

#[test]
fn baseline_ranks_are_alike() {
    let set = load(preset(Scenario::Baseline, 2));
    let m = &set.man;
    assert!(m.injected.ranks.is_empty() && m.injected.amount_ns == 0);
    for r in &m.ranks {
        assert_eq!(r.batch, 8);
        assert!(r.host_stall_ns.iter().chain(&r.host_sync_ns).chain(&r.injected_idle_ns).all(|&x| x == 0));
        for (s, (&dur, &exp)) in r.step_dur_ns.iter().zip(&r.exposed_comm_ns).enumerate() {
            assert!(exp * 50 < dur, "rank {} step {s}: {exp} ns exposed of {dur}", r.rank);
        }
    }
    let busy: Vec<i64> = m.ranks.iter().map(|r| mean(&r.compute_busy_ns)).collect();
    let (lo, hi) = (busy.iter().min().unwrap(), busy.iter().max().unwrap());
    assert!((hi - lo) * 100 < *lo, "identical work: compute {busy:?}");
    // Shapes are recorded, the same on every rank.
    let dims = |r: usize| -> Vec<Value> {
        set.named(r, "cpu_op", "aten::linear").take(5).map(|e| e["args"]["Input Dims"].clone()).collect()
    };
    assert_eq!(dims(0)[0], serde_json::json!([[8, 4096, 1024], [3072, 1024], [3072]]));
    assert!((1..4).all(|r| dims(r) == dims(0)));
}

#[test]
fn host_stall_is_one_annotation_on_one_rank() {
    let set = load(preset(Scenario::HostStall, 2));
    let stall = set.cfg.host_stall.clone().expect("knob");
    assert_eq!(set.man.injected.ranks, [stall.rank]);
    assert_eq!(set.man.injected.amount_ns, stall.ns);
    for r in 0..set.cfg.ranks as usize {
        let got: Vec<&Value> = set.named(r, "user_annotation", &stall.name).collect();
        let truth = &set.man.ranks[r].host_stall_ns;
        if r as u32 != stall.rank {
            assert!(got.is_empty(), "rank {r} has no stall");
            assert!(truth.iter().all(|&x| x == 0));
            continue;
        }
        assert_eq!(got.len(), set.cfg.steps as usize, "one per step");
        let fwd: Vec<&Value> = set.named(r, "user_annotation", FWD).collect();
        let main_tid = got[0]["tid"].clone();
        for (s, e) in got.iter().enumerate() {
            let (a, b) = (ns(&e["ts"]), end(e));
            assert!(close(b - a, stall.ns, 0.0, 20_000), "stall {} ns", b - a);
            assert_eq!(b - a, truth[s], "manifest = the annotation's duration");
            assert!(fwd.iter().any(|f| ns(&f["ts"]) <= a && b <= end(f)), "inside ## forward ##");
            // No CPU op runs on the main thread during the sleep.
            let busy = set
                .events(r)
                .iter()
                .any(|o| o["cat"] == "cpu_op" && o["tid"] == main_tid && ns(&o["ts"]) < b && end(o) > a);
            assert!(!busy, "an op inside the sleep");
        }
        // The GPU drained and idled during most of the sleep.
        for &idle in &set.man.ranks[r].injected_idle_ns {
            assert!(idle > stall.ns / 2 && idle < stall.ns, "idle {idle}");
        }
    }
    // The others wait for the stalled rank in their collectives; it waits for nobody.
    let wait = |r: u32| mean(&set.man.ranks[r as usize].comm_wait_ns);
    for r in (0..set.cfg.ranks).filter(|&r| r != stall.rank) {
        assert!(wait(r) > wait(stall.rank) + stall.ns / 2, "rank {r} waits {}", wait(r));
    }
}

#[test]
fn slow_dataloader_is_slow_on_one_rank_only() {
    let set = load(preset(Scenario::SlowDataloader, 2));
    let knob = set.cfg.slow_dataloader.clone().expect("knob");
    let base = set.cfg.dataloader_ns.expect("base");
    for r in 0..set.cfg.ranks as usize {
        let got: Vec<i64> = set.named(r, "user_annotation", DATALOADER).map(|e| ns(&e["dur"])).collect();
        assert_eq!(got, set.man.ranks[r].data_loading_ns, "rank {r}: manifest = the annotations");
        let want = if r as u32 == knob.rank { (base as f64 * knob.factor) as i64 } else { base };
        for d in got {
            assert!(close(d, want, 0.06, 10_000), "rank {r}: {d} vs {want}");
        }
    }
    let inj = &set.man.injected;
    assert_eq!(inj.ranks, [knob.rank]);
    let extra = (base as f64 * (knob.factor - 1.0)) as i64;
    assert!(close(inj.amount_ns, extra, 0.08, 0), "{} vs {extra}", inj.amount_ns);
}

/// NCCL kernels of rank `r`: (process group, In msg nelems, start, end).
fn nccl(set: &Set, r: usize) -> Vec<(String, u64, i64, i64)> {
    set.events(r)
        .iter()
        .filter(|e| e["cat"] == "kernel" && e["name"].as_str().unwrap_or("").starts_with("ncclDevKernel"))
        .map(|e| {
            let a = &e["args"];
            (
                a["Process Group Name"].as_str().unwrap_or("").to_string(),
                a["In msg nelems"].as_u64().unwrap_or(0),
                ns(&e["ts"]),
                end(e),
            )
        })
        .collect()
}

#[test]
fn small_buckets_are_many_and_small() {
    let set = load(preset(Scenario::SmallBuckets, 2));
    let sizes = &set.man.bucket_bytes;
    assert_eq!(sizes.len(), 18);
    let total: u64 = sizes.iter().sum();
    assert!((38_000_000..42_000_000).contains(&total), "~40 MB of gradients: {total}");
    for r in 0..set.cfg.ranks as usize {
        let got: Vec<u64> = nccl(&set, r).iter().filter(|k| k.0 == "0").map(|k| k.1 * 4).collect();
        let want: Vec<u64> = (0..set.cfg.steps).flat_map(|_| sizes.iter().copied()).collect();
        assert_eq!(got, want, "rank {r}: bucket sizes in issue order");
        assert!(got.iter().all(|&b| (1 << 20..=4 << 20).contains(&b)));
    }
    assert_eq!(set.man.injected.amount_ns, 18 * set.cfg.collective_latency_ns);
}

#[test]
fn good_overlap_hides_every_bucket() {
    let set = load(preset(Scenario::GoodOverlap, 2));
    assert!(set.man.layers >= 12 && set.man.bucket_bytes.len() == 12);
    for r in &set.man.ranks {
        for (&exp, &dur) in r.exposed_comm_ns.iter().zip(&r.step_dur_ns) {
            assert!(exp * 50 < dur, "rank {}: exposed {exp} of {dur}", r.rank);
        }
    }
    // Every bucket all_reduce starts while the step's compute still runs (DDP overlaps them).
    for r in 0..set.cfg.ranks as usize {
        let gpu_step_end: Vec<i64> = set
            .events(r)
            .iter()
            .filter(|e| {
                e["cat"] == "gpu_user_annotation"
                    && e["name"].as_str().unwrap_or("").starts_with("ProfilerStep#")
            })
            .map(end)
            .collect();
        let buckets: Vec<_> = nccl(&set, r).into_iter().filter(|k| k.0 == "0").collect();
        assert_eq!(buckets.len(), 12 * gpu_step_end.len());
        for (i, b) in buckets.iter().enumerate() {
            assert!(b.2 < gpu_step_end[i / 12], "rank {r} bucket {i} starts after the step's compute");
        }
    }
}

/// `Input Dims` of the first `aten::linear` of rank `r`.
fn first_linear_dims(set: &Set, r: usize) -> Value {
    set.named(r, "cpu_op", "aten::linear").next().expect("linear")["args"]["Input Dims"].clone()
}

/// Mean duration of the kernels named like the QKV GEMM on rank `r`.
fn gemm_mean(set: &Set, r: usize) -> f64 {
    let k: Vec<i64> = set
        .events(r)
        .iter()
        .filter(|e| e["cat"] == "kernel" && e["name"].as_str().unwrap_or("").starts_with("sm90_xmma_gemm"))
        .map(|e| ns(&e["dur"]))
        .collect();
    k.iter().sum::<i64>() as f64 / k.len() as f64
}

#[test]
fn uneven_batch_is_more_work_not_a_slower_gpu() {
    let set = load(preset(Scenario::UnevenBatch, 2));
    let u = set.cfg.uneven_batch.clone().expect("knob");
    let heavy = u.rank as usize;
    assert_eq!(set.man.ranks[heavy].batch, 10);
    assert_eq!(first_linear_dims(&set, heavy), serde_json::json!([[10, 4096, 1024], [3072, 1024], [3072]]));
    for r in (0..4).filter(|&r| r != heavy) {
        assert_eq!(first_linear_dims(&set, r), serde_json::json!([[8, 4096, 1024], [3072, 1024], [3072]]));
        let ratio = gemm_mean(&set, heavy) / gemm_mean(&set, r);
        assert!((1.2..1.3).contains(&ratio), "GEMMs {ratio}× longer");
    }
    // The batch is 1.25× larger, the copied input too.
    let copy = |r: usize| {
        set.named(r, "gpu_memcpy", "Memcpy HtoD (Pinned -> Device)").next().unwrap()["args"]["bytes"]
            .as_u64()
            .unwrap()
    };
    assert_eq!(copy(heavy) * 4, copy(0) * 5);
    let inj = &set.man.injected;
    assert_eq!(inj.cause, Some(Cause::ComputeImbalance));
    let nominal = set.man.nominal_compute_ns as f64;
    assert!((inj.amount_ns as f64) > 0.15 * nominal && (inj.amount_ns as f64) < 0.27 * nominal);
}

#[test]
fn slow_gpu_has_the_same_shapes_and_slower_kernels() {
    let set = load(preset(Scenario::SlowGpu, 2));
    let slow = set.cfg.straggler_rank.expect("straggler") as usize;
    let want = 1.0 + set.cfg.straggler_delay_ns as f64 / set.man.nominal_compute_ns as f64;
    for r in (0..4).filter(|&r| r != slow) {
        assert_eq!(first_linear_dims(&set, r), first_linear_dims(&set, slow));
        let ratio = gemm_mean(&set, slow) / gemm_mean(&set, r);
        assert!((ratio - want).abs() < 0.03, "{ratio} vs {want}");
    }
    assert_eq!(set.man.ranks[slow].batch, 8);
    assert_eq!(set.man.injected.amount_ns, set.cfg.straggler_delay_ns);
}

#[test]
fn host_sync_blocks_every_rank_mid_forward() {
    let set = load(preset(Scenario::HostSync, 2));
    let h = set.cfg.host_sync.clone().expect("knob");
    for r in 0..4 {
        let fwd: Vec<&Value> = set.named(r, "user_annotation", FWD).collect();
        let syncs: Vec<&Value> = set.named(r, "cuda_runtime", "cudaStreamSynchronize").collect();
        // Per step: the injected syncs inside forward plus the step's closing loss.item().
        assert_eq!(syncs.len() as u32, set.cfg.steps * (h.syncs_per_step + 1));
        for (s, f) in fwd.iter().enumerate() {
            let inside: Vec<i64> = syncs
                .iter()
                .filter(|e| ns(&e["ts"]) >= ns(&f["ts"]) && end(e) <= end(f))
                .map(|e| ns(&e["dur"]))
                .collect();
            assert_eq!(inside.len() as u32, h.syncs_per_step);
            assert_eq!(inside.iter().sum::<i64>(), set.man.ranks[r].host_sync_ns[s]);
        }
        for &idle in &set.man.ranks[r].injected_idle_ns {
            let want = i64::from(h.syncs_per_step) * h.host_work_ns;
            assert!(idle >= want && idle < want + 2_000_000, "rank {r}: GPU idle {idle}");
        }
    }
    assert_eq!(set.man.injected.ranks, [0, 1, 2, 3]);
}

#[test]
fn scenario_files_stay_small() {
    let mut sizes = BTreeMap::new();
    for s in [Scenario::Baseline, Scenario::GoodOverlap, Scenario::PipelineInterleaved] {
        let b = generate(&s.config());
        sizes.insert(s.name(), b.iter().map(Vec::len).max().unwrap_or(0));
    }
    for (name, n) in &sizes {
        assert!((1_000_000..6_000_000).contains(n), "{name}: {n} bytes per rank");
    }
}

#[test]
fn all_to_all_runs_as_sendrecv_kernels_and_says_all_to_all() {
    let set = load(preset(Scenario::AllToAll, 2));
    let bytes = set.cfg.all_to_all.clone().expect("knob").bytes;
    assert_eq!(set.man.injected.cause, None);
    assert_eq!(set.man.collectives_per_step, set.cfg.bucket_count + 2);
    let a2a: Vec<_> = set.man.collectives.iter().filter(|c| c.collective == "all_to_all").collect();
    assert_eq!(a2a.len() as u32, set.cfg.steps);
    let n = f64::from(set.cfg.ranks);
    let want =
        set.cfg.collective_latency_ns + ((n - 1.0) / n * bytes as f64 / set.cfg.busbw_gbps).round() as i64;
    assert!(a2a.iter().all(|c| c.bytes == bytes && c.transfer_ns == want), "(n−1)/n · S / busbw");
    for r in 0..set.cfg.ranks as usize {
        let ev = set.events(r);
        let kernels: Vec<&Value> = ev
            .iter()
            .filter(|e| {
                e["cat"] == "kernel"
                    && e["name"] == "ncclDevKernel_SendRecv(ncclDevKernelArgsStorage<4096ul>)"
            })
            .collect();
        assert_eq!(kernels.len() as u32, set.cfg.steps, "one all_to_all per step, as SendRecv");
        for k in &kernels {
            assert_eq!(k["args"]["Collective name"], "all_to_all");
            assert_eq!(k["args"]["In msg nelems"].as_u64(), Some(bytes / 2), "bf16");
            // The enclosing CPU op says all_to_all too, under `nccl:all_to_all`.
            let ext = &k["args"]["External id"];
            let op =
                ev.iter().find(|e| e["cat"] == "cpu_op" && e["args"]["External id"] == *ext).expect("its op");
            assert_eq!(op["name"], "record_param_comms");
            assert_eq!(op["args"]["Collective name"], "all_to_all");
            let outer = ev.iter().find(|e| {
                e["name"] == "c10d::alltoall_base_" && ns(&e["ts"]) <= ns(&op["ts"]) && end(op) <= end(e)
            });
            assert!(outer.is_some(), "inside c10d::alltoall_base_");
            let ann = ev.iter().find(|e| {
                e["cat"] == "user_annotation"
                    && e["name"] == "nccl:all_to_all"
                    && ns(&e["ts"]) >= ns(&op["ts"])
                    && end(e) <= end(op)
            });
            assert!(ann.is_some(), "nccl:all_to_all inside it");
            // The forward waits for the exchange: the next compute kernel starts after it ends.
            let next = ev
                .iter()
                .filter(|e| e["cat"] == "kernel" && e["tid"] == 7 && ns(&e["ts"]) > ns(&k["ts"]))
                .map(|e| ns(&e["ts"]))
                .min()
                .expect("compute after it");
            assert!(
                next >= end(k),
                "rank {r}: compute starts {} ns before the all_to_all ends",
                end(k) - next
            );
        }
    }
}

/// Last moment of any timed event of rank `r` (ns of its own clock).
fn last_event_end(set: &Set, r: usize) -> i64 {
    set.events(r).iter().filter(|e| e["ph"] == "X" && e["ts"].is_number()).map(end).max().expect("events")
}

/// (process group, Seq, start, end) of rank `r`'s NCCL kernels, in time order.
fn nccl_seq(set: &Set, r: usize) -> Vec<(String, u64, i64, i64)> {
    let mut v: Vec<_> = set
        .events(r)
        .iter()
        .filter(|e| e["cat"] == "kernel" && e["name"].as_str().unwrap_or("").starts_with("ncclDevKernel"))
        .map(|e| {
            let a = &e["args"];
            (
                a["Process Group Name"].as_str().unwrap_or("").to_string(),
                a["Seq"].as_u64().unwrap_or(0),
                ns(&e["ts"]),
                end(e),
            )
        })
        .collect();
    v.sort_by_key(|k| k.2);
    v
}

fn steps_of(set: &Set, r: usize) -> Vec<String> {
    set.events(r)
        .iter()
        .filter(|e| {
            e["cat"] == "user_annotation" && e["name"].as_str().unwrap_or("").starts_with("ProfilerStep#")
        })
        .map(|e| e["name"].as_str().unwrap_or("").to_string())
        .collect()
}

#[test]
fn skipped_collective_hangs_everyone_until_the_timeout() {
    let mut cfg = preset(Scenario::HangSkippedCollective, 3);
    cfg.hang.as_mut().expect("knob").step = 1;
    let set = load(cfg);
    let h = set.cfg.hang.clone().expect("knob");
    let m = &set.man;
    assert_eq!(m.injected.cause, Some(Cause::Hang));
    assert_eq!((m.injected.ranks.clone(), m.injected.amount_ns), (vec![h.rank], h.timeout_ns));
    let per_step = m.bucket_bytes.len();
    let hung_step = set.cfg.first_step + h.step;
    for r in 0..set.cfg.ranks as usize {
        let mr = &m.ranks[r];
        let off = mr.clock_offset_ns;
        // Every trace ends in step `h.step`, 8 s after its stuck kernel started.
        assert_eq!(mr.completed_steps, h.step);
        assert_eq!(
            steps_of(&set, r).last().map(String::as_str),
            Some(format!("ProfilerStep#{hung_step}").as_str())
        );
        let k = nccl_seq(&set, r);
        let stuck = k.last().expect("a stuck kernel");
        assert_eq!(stuck.3 - stuck.2, h.timeout_ns, "rank {r}: the stuck kernel runs until the timeout");
        assert_eq!(last_event_end(&set, r), stuck.3, "rank {r}: the trace ends with it");
        assert_eq!(mr.trace_end_ns + off, stuck.3);
        let hung = mr.hung_in.as_ref().expect("hung_in");
        assert_eq!((hung.start_ns + off, hung.end_ns + off), (stuck.2, stuck.3));
        // Bucket all_reduces on process group 0: the skipping rank issued one fewer.
        let pg0 = k.iter().filter(|x| x.0 == "0").count();
        let want = per_step * h.step as usize + per_step - usize::from(r as u32 == h.rank);
        assert_eq!(pg0, want, "rank {r}");
        if r as u32 == h.rank {
            // Its next collective (the loss all_reduce on the other group) is stuck too.
            assert_eq!((stuck.0.as_str(), hung.process_group.as_str()), ("1", "1"));
        } else {
            assert_eq!((stuck.0.as_str(), hung.step), ("0", hung_step));
        }
        // Steps before the hang are normal (well under a second).
        assert!(mr.step_dur_ns[..h.step as usize].iter().all(|&d| d < 200_000_000));
        assert!(*mr.comm_wait_ns.last().unwrap() >= h.timeout_ns);
    }
    // The manifest's hung collective: the others arrived, the skipping rank did not.
    let hung: Vec<_> = m.collectives.iter().filter(|c| c.hung).collect();
    assert_eq!(hung.len(), 2);
    assert_eq!((hung[0].process_group.as_str(), hung[0].absent.clone()), ("0", vec![h.rank]));
    let others: Vec<u32> = (0..set.cfg.ranks).filter(|&r| r != h.rank).collect();
    assert_eq!((hung[1].process_group.as_str(), hung[1].absent.clone()), ("1", others));
}

#[test]
fn early_exit_ends_one_trace_and_hangs_the_others() {
    let mut cfg = preset(Scenario::EarlyExit, 3);
    cfg.hang.as_mut().expect("knob").step = 0;
    let set = load(cfg);
    let h = set.cfg.hang.clone().expect("knob");
    let m = &set.man;
    let gone = h.rank as usize;
    let last_ok = format!("ProfilerStep#{}", set.cfg.first_step + h.step);
    assert_eq!(steps_of(&set, gone).last(), Some(&last_ok));
    assert_eq!(m.ranks[gone].completed_steps, h.step + 1);
    assert!(m.ranks[gone].hung_in.is_none());
    for r in (0..set.cfg.ranks as usize).filter(|&r| r != gone) {
        let mr = &m.ranks[r];
        assert_eq!(steps_of(&set, r).len() as u32, h.step + 2, "one more (cut) step");
        let stuck = nccl_seq(&set, r).last().cloned().expect("kernel");
        assert_eq!(stuck.3 - stuck.2, h.timeout_ns);
        assert_eq!(last_event_end(&set, r), stuck.3);
        let hung = mr.hung_in.as_ref().expect("hung_in");
        assert_eq!((hung.step, hung.process_group.as_str()), (set.cfg.first_step + h.step + 1, "0"));
        // The exited rank's trace ended long before: about the timeout earlier.
        let gap = (mr.trace_end_ns - m.ranks[gone].trace_end_ns) as f64;
        assert!(gap > 0.95 * h.timeout_ns as f64, "{gap}");
        // Everyone completed the same collectives before.
        let ids = |x: &synth::ManifestRank| -> Vec<(String, u32, u64)> {
            x.last_completed.values().map(|c| (c.process_group.clone(), c.step, c.seq)).collect()
        };
        assert_eq!(ids(mr), ids(&m.ranks[gone]), "rank {r}");
    }
    let hung: Vec<_> = m.collectives.iter().filter(|c| c.hung).collect();
    assert_eq!((hung.len(), hung[0].absent.clone()), (1, vec![h.rank]));
}

/// A pipeline message seen in a trace: (peer, Seq, nelems, micro-batch order) of one rank's
/// `record_param_comms` sends or recvs.
fn p2p_ops(set: &Set, r: usize, what: &str) -> Vec<(u64, u64, u64)> {
    let peer_key = if what == "send" { "Dst Rank" } else { "Src Rank" };
    set.named(r, "cpu_op", "record_param_comms")
        .filter(|e| e["args"]["Collective name"] == what)
        .map(|e| {
            let a = &e["args"];
            assert_eq!(a["Group size"], 2);
            assert_eq!(a["dtype"], "BFloat16");
            (
                a[peer_key].as_u64().expect("peer"),
                a["Seq"].as_u64().expect("seq"),
                a["In msg nelems"].as_u64().expect("n"),
            )
        })
        .collect()
}

/// Union of the compute-stream kernels of rank `r` inside [a, b) (its own clock).
fn compute_in(set: &Set, r: usize, a: i64, b: i64) -> i64 {
    let mut iv: Vec<(i64, i64)> = set
        .events(r)
        .iter()
        .filter(|e| {
            matches!(e["cat"].as_str(), Some("kernel" | "gpu_memcpy" | "gpu_memset")) && e["tid"] == 7
        })
        .map(|e| (ns(&e["ts"]).max(a), end(e).min(b)))
        .filter(|(s, e)| s < e)
        .collect();
    iv.sort_unstable();
    let mut total = 0;
    let mut cur: Option<(i64, i64)> = None;
    for (s, e) in iv {
        match cur {
            Some((cs, ce)) if s <= ce => cur = Some((cs, ce.max(e))),
            Some((cs, ce)) => {
                total += ce - cs;
                cur = Some((s, e));
            }
            None => cur = Some((s, e)),
        }
    }
    total + cur.map_or(0, |(s, e)| e - s)
}

/// Checks one pipeline scenario: messages pair up between neighbours, the annotations are the
/// schedule's, and the manifest's bubbles are what the traces show.
fn check_pipeline(set: &Set, annotation: fn(fwd: bool, stage: u32, mb: u32) -> Option<String>) {
    let m = &set.man;
    let p = m.pipeline.as_ref().expect("pipeline truth");
    let cfg = set.cfg.pipeline.clone().expect("knob");
    assert!(!p.deadlocked);
    assert_eq!(m.injected.cause, Some(Cause::PipelineBubble));
    let stages = cfg.stages * cfg.virtual_stages;
    let msgs = 2 * cfg.micro_batches * (stages - 1) * cfg.dp * set.cfg.steps;
    assert_eq!(p.p2p.len() as u32, msgs, "every activation and gradient, every step");
    let n = set.cfg.ranks as usize;
    let act_elems = cfg.activation_bytes / 2;
    for r in 0..n {
        // What r sends to q, q receives from r, in the same order and size.
        for q in 0..n {
            let sent: Vec<(u64, u64)> =
                p2p_ops(set, r, "send").iter().filter(|x| x.0 == q as u64).map(|x| (x.1, x.2)).collect();
            let got: Vec<(u64, u64)> =
                p2p_ops(set, q, "recv").iter().filter(|x| x.0 == r as u64).map(|x| (x.1, x.2)).collect();
            assert_eq!(sent, got, "{r} → {q}: sends and recvs pair up (Seq, size)");
            assert!(sent.iter().all(|x| x.1 == act_elems));
            let neighbours = (r as u32 / cfg.dp + 1) % cfg.stages == q as u32 / cfg.dp
                || (q as u32 / cfg.dp + 1) % cfg.stages == r as u32 / cfg.dp;
            if !sent.is_empty() {
                assert!(neighbours && r % cfg.dp as usize == q % cfg.dp as usize, "{r} → {q} are neighbours");
            }
        }
        // One SendRecv kernel per op, named as its op.
        let kernels: Vec<&Value> = set
            .events(r)
            .iter()
            .filter(|e| {
                e["cat"] == "kernel"
                    && e["name"] == "ncclDevKernel_SendRecv(ncclDevKernelArgsStorage<4096ul>)"
            })
            .collect();
        assert_eq!(kernels.len(), p2p_ops(set, r, "send").len() + p2p_ops(set, r, "recv").len());
        assert!(kernels
            .iter()
            .all(|k| matches!(k["args"]["Collective name"].as_str(), Some("send" | "recv"))));
        // Annotations per action, as the schedule class names them.
        let st = &p.ranks[r];
        let mut want: Vec<String> = Vec::new();
        for &k in &st.stages {
            for i in 0..cfg.micro_batches {
                want.extend(annotation(true, k, i));
                want.extend(annotation(false, k, i));
            }
        }
        want.sort();
        let mut got: Vec<String> = set
            .events(r)
            .iter()
            .filter(|e| e["cat"] == "user_annotation")
            .filter_map(|e| e["name"].as_str())
            .filter(|n| n.starts_with("Forward ") || n.starts_with("Backward ") || n.starts_with("PP:"))
            .map(str::to_string)
            .collect();
        got.sort();
        got.dedup();
        want.dedup();
        assert_eq!(got, want, "rank {r}: action annotations");
        // The bubble is what the trace shows: the window minus the compute inside it.
        let off = m.ranks[r].clock_offset_ns;
        for s in 0..set.cfg.steps as usize {
            let (w0, w) = (st.window_start_ns[s] + off, st.window_ns[s]);
            // Exact but for copies of the step's `.item()` and of the next step's input, which
            // an early-finishing last stage runs inside the window (a few µs).
            let seen = compute_in(set, r, w0, w0 + w);
            assert!(
                seen >= st.compute_ns[s] && seen < st.compute_ns[s] + 50_000,
                "rank {r} step {s}: {seen}"
            );
            assert_eq!(st.bubble_ns[s], w - st.compute_ns[s]);
            if cfg.slow_stage.is_none() {
                let f = st.bubble_fraction[s];
                assert!(f >= p.formula_bubble_fraction - 0.01 && f < p.formula_bubble_fraction + 0.12, "{f}");
            }
        }
    }
}

#[test]
fn pipeline_gpipe_fills_then_drains() {
    let set = load(preset(Scenario::PipelineGpipe, 2));
    check_pipeline(&set, |fwd, _, i| {
        Some(if fwd { format!("Forward {i}") } else { format!("Backward {i}") })
    });
    // GPipe: every forward of a stage runs before its first backward (on the GPU too).
    for r in 0..4 {
        let acts: Vec<(String, i64)> = set
            .events(r)
            .iter()
            .filter(|e| e["cat"] == "gpu_user_annotation" && e["tid"] == 7)
            .filter_map(|e| Some((e["name"].as_str()?.to_string(), ns(&e["ts"]))))
            .filter(|(n, _)| !n.starts_with("ProfilerStep"))
            .collect();
        let per_step = 16;
        for step in acts.chunks(per_step) {
            let last_f = step.iter().filter(|a| a.0.starts_with("Forward")).map(|a| a.1).max().unwrap();
            let first_b = step.iter().filter(|a| a.0.starts_with("Backward")).map(|a| a.1).min().unwrap();
            assert!(last_f < first_b);
        }
    }
}

#[test]
fn pipeline_1f1b_has_no_annotations_and_the_same_bubble_formula() {
    let set = load(preset(Scenario::Pipeline1f1b, 2));
    // Schedule1F1B records no per-micro-batch annotation.
    check_pipeline(&set, |_, _, _| None);
    let p = set.man.pipeline.as_ref().unwrap();
    assert!((p.formula_bubble_fraction - 3.0 / 11.0).abs() < 1e-9);
}

#[test]
fn pipeline_interleaved_has_a_smaller_bubble() {
    let set = load(preset(Scenario::PipelineInterleaved, 2));
    check_pipeline(&set, |fwd, k, i| Some(format!("PP:{k}{}{i}", if fwd { "F" } else { "B" })));
    let p = set.man.pipeline.as_ref().unwrap();
    assert!((p.formula_bubble_fraction - 3.0 / 19.0).abs() < 1e-9);
    assert_eq!(p.ranks[0].stages, [0, 4]);
    let gpipe = synth::manifest(&preset(Scenario::PipelineGpipe, 2));
    let mean_frac = |m: &synth::ManifestPipeline| {
        let v: Vec<f64> = m.ranks.iter().flat_map(|r| r.bubble_fraction.iter().copied()).collect();
        v.iter().sum::<f64>() / v.len() as f64
    };
    assert!(mean_frac(p) + 0.04 < mean_frac(gpipe.pipeline.as_ref().unwrap()));
}

#[test]
fn pipeline_slow_stage_makes_the_others_wait() {
    let set = load(preset(Scenario::PipelineSlowStage, 2));
    check_pipeline(&set, |fwd, k, i| Some(format!("PP:{k}{}{i}", if fwd { "F" } else { "B" })));
    let p = set.man.pipeline.as_ref().unwrap();
    let slow = p.slow_stage.expect("slow stage") as usize;
    assert_eq!(set.man.injected.ranks, [slow as u32]);
    let c = |r: usize| mean(&p.ranks[r].compute_ns) as f64;
    for r in (0..4).filter(|&r| r != slow) {
        let ratio = c(slow) / c(r);
        assert!((1.4..1.6).contains(&ratio), "stage {slow} computes {ratio}× stage {r}");
        assert!(mean(&p.ranks[r].bubble_ns) > 2 * mean(&p.ranks[slow].bubble_ns));
    }
    let others = (0..4).filter(|&r| r != slow).map(c).sum::<f64>() / 3.0;
    assert!((set.man.injected.amount_ns as f64 - (c(slow) - others)).abs() < 1e6);
}

#[test]
fn pipeline_shapes_never_deadlock() {
    use rankscope_synth::{Pipeline, Schedule};
    for schedule in [Schedule::GPipe, Schedule::OneFOneB, Schedule::Interleaved1F1B] {
        for (stages, v, m, dp) in
            [(2, 2, 2, 1), (3, 1, 3, 1), (4, 1, 16, 1), (2, 3, 4, 2), (8, 1, 8, 1), (4, 2, 4, 1)]
        {
            let v = if schedule == Schedule::Interleaved1F1B { v } else { 1 };
            let cfg = SynthConfig {
                ranks: stages * dp,
                steps: 1,
                pipeline: Some(Pipeline {
                    stages,
                    virtual_stages: v,
                    micro_batches: m,
                    dp,
                    schedule,
                    layers_per_stage: 2 * v,
                    ..Pipeline::default()
                }),
                ..Scenario::PipelineGpipe.config()
            };
            let man = synth::manifest(&cfg);
            assert!(man.adjustments.is_empty(), "{:?}", man.adjustments);
            let p = man.pipeline.expect("truth");
            assert!(!p.deadlocked, "{schedule:?} p={stages} v={v} m={m} dp={dp}");
            assert_eq!(p.p2p.len() as u32, 2 * m * (stages * v - 1) * dp);
            for x in &p.p2p {
                // Both ends end together, after both were posted plus the transfer.
                let both = x.send_start_ns.max(x.recv_start_ns) + x.transfer_ns;
                assert!(x.send_end_ns >= both && x.send_end_ns < both + 3_000);
                assert!((x.send_end_ns - x.recv_end_ns).abs() <= 2_500);
            }
        }
    }
}

#[test]
fn pipeline_with_data_parallel_replicas_all_reduces_each_stage() {
    use rankscope_synth::Pipeline;
    let base = Scenario::Pipeline1f1b.config();
    let cfg = SynthConfig {
        ranks: 8,
        steps: 1,
        pipeline: Some(Pipeline { dp: 2, micro_batches: 4, ..base.pipeline.clone().unwrap() }),
        ..base
    };
    let set = load(cfg);
    for r in 0..8usize {
        let groups: Vec<Value> = set.docs[r]["distributedInfo"]["pg_config"].as_array().unwrap().clone();
        let dp: Vec<&Value> =
            groups.iter().filter(|g| g["pg_desc"].as_str().unwrap().starts_with("dp_stage_")).collect();
        assert_eq!(dp.len(), 1, "rank {r} is in one data-parallel group");
        let stage = r / 2;
        assert_eq!(dp[0]["ranks"], serde_json::json!([stage * 2, stage * 2 + 1]));
        let ar: Vec<&Value> = set
            .events(r)
            .iter()
            .filter(|e| e["cat"] == "kernel" && e["args"]["Collective name"] == "allreduce")
            .collect();
        assert_eq!(ar.len(), 1, "one gradient all_reduce per step");
        assert_eq!(ar[0]["args"]["Process Group Name"], dp[0]["pg_name"]);
        assert_eq!(ar[0]["args"]["Group size"], 2);
    }
}
