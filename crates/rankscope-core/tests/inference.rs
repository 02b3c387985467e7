//! Inference traces (issue 34, item 3; docs/metrics.md "Inference traces"): an engine's
//! iterations are the steps of a trace without `ProfilerStep#N`, prefill told from decode where
//! the names say it, serving figures, and findings worded for serving.

#![allow(clippy::disallowed_methods, clippy::disallowed_types)] // the tests read shared traces

mod common;

use rankscope_core::analyze::{Analysis, Options};
use rankscope_core::diagnose::{analyze, markdown::markdown};
use rankscope_core::finding::FindingId;
use rankscope_core::normalize::iterations::IterPhase;
use rankscope_core::normalize::{assemble, Rules};

/// A tensor-parallel rank of an engine, as its profiler writes it: per iteration a host span
/// named by `name(k)`, a few kernel launches (each kernel 300 µs) and an NCCL all-reduce
/// (100 µs), then `gap_us` of scheduler work on the host before the next.
fn engine_trace(names: &[String], gap_us: u64) -> Vec<u8> {
    let mut ev =
        vec![r#"{"ph":"M","name":"process_name","pid":10,"tid":0,"args":{"name":"python"}}"#.to_string()];
    let mut t = 1_000u64;
    let mut corr = 1u64;
    for name in names {
        let start = t;
        let mut gpu = t + 20;
        let mut host = t + 5;
        for k in 0..4 {
            let (kname, cat_dur) = if k == 3 {
                ("ncclDevKernel_AllReduce_Sum_bf16_RING_LL(ncclDevKernelArgsStorage<4096ul>)", 100)
            } else {
                ("ampere_bf16_s16816gemm_bf16_128x128_ldg8_f2f_stages_64x3_tn", 300)
            };
            ev.push(format!(
                r#"{{"ph":"X","cat":"cuda_runtime","name":"cudaLaunchKernel","pid":10,"tid":10,"ts":{host},"dur":4,"args":{{"correlation":{corr}}}}}"#
            ));
            gpu = gpu.max(host + 10);
            ev.push(format!(
                r#"{{"ph":"X","cat":"kernel","name":"{kname}","pid":0,"tid":7,"ts":{gpu},"dur":{cat_dur},"args":{{"device":0,"stream":7,"correlation":{corr}}}}}"#
            ));
            gpu += cat_dur;
            host += 10;
            corr += 1;
        }
        let end = gpu + 10;
        ev.push(format!(
            r#"{{"ph":"X","cat":"user_annotation","name":"{name}","pid":10,"tid":10,"ts":{start},"dur":{}}}"#,
            end - start
        ));
        t = end + gap_us;
    }
    format!(
        r#"{{"distributedInfo":{{"backend":"nccl","rank":0,"world_size":2}},"traceEvents":[{}]}}"#,
        ev.join(",\n")
    )
    .into_bytes()
}

fn analysed(bytes: &[u8]) -> Analysis {
    let t = common::ingest_chunked("engine.json", bytes, 1 << 12).unwrap_or_else(|e| panic!("{e}"));
    analyze(&assemble(vec![t], &[], &Rules::default()), &Options::default())
}

#[test]
fn vllm_iterations_are_the_steps_and_say_prefill_or_decode() {
    let mut names = vec!["execute_context_2(1024)_generation_0(0)".to_string()];
    names.extend((0..6).map(|_| "execute_context_0(0)_generation_2(2)".to_string()));
    names.push("execute_context_1(300)_generation_2(2)".to_string());
    let a = analysed(&engine_trace(&names, 2_000));
    assert_eq!(a.steps.len(), 8, "one step per iteration");
    let s = a.serving.first().unwrap_or_else(|| panic!("no serving figures"));
    assert_eq!((s.engine.as_str(), s.iterations), ("vllm", 8));
    assert_eq!((s.prefill, s.decode, s.mixed, s.unknown), (1, 6, 1, 0));
    // Each iteration: 3 × 300 µs of GEMMs and a 100 µs all-reduce on the device.
    let decode = s.decode_p50_ns.unwrap_or_default();
    assert!((1_000_000..1_100_000).contains(&decode), "{decode}");
    assert_eq!(s.decode_comm_p50_ns, Some(100_000));
    assert_eq!(s.gap_p50_ns, Some(2_000_000));
    let share = s.gap_share.unwrap_or_default();
    assert!((0.6..0.7).contains(&share), "{share}");
    let md = markdown(&a);
    assert!(
        md.contains("**Inference**: no `ProfilerStep#N`; the steps are 8 vLLM engine iteration(s)"),
        "{md}"
    );
    assert!(md.contains("1 prefill, 6 decode, 1 mixed"), "{md}");
    assert!(md.contains("A decode iteration (one token for each running request) takes 1.0"), "{md}");
    // The host between iterations leaves the GPU idle: said as serving, not training.
    let cpu = a.findings.iter().find(|f| f.id == FindingId::CpuBound);
    let cpu = cpu.unwrap_or_else(|| panic!("{:?}", a.findings.iter().map(|f| f.id).collect::<Vec<_>>()));
    assert!(cpu.fix.contains("CPU scheduling gaps between decode steps"), "{}", cpu.fix);
    for f in &a.findings {
        assert!(!matches!(f.id, FindingId::InputBound | FindingId::SmallCollectives), "{:?}", f.id);
        for text in [&f.message, &f.fix] {
            for training in ["DDP", "bucket", "backward", "DataLoader", "training loop"] {
                assert!(!text.contains(training), "{:?} says {training}: {text}", f.id);
            }
        }
    }
}

#[test]
fn sglang_frames_tell_extend_from_decode() {
    let frame = |f: &str| format!("sglang/srt/model_executor/model_runner.py(1700): {f}");
    let mut names = vec![frame("forward_extend")];
    names.extend((0..4).map(|_| frame("forward_decode")));
    let a = analysed(&engine_trace(&names, 500));
    let s = a.serving.first().unwrap_or_else(|| panic!("no serving figures"));
    assert_eq!((s.engine.as_str(), s.prefill, s.decode), ("sglang", 1, 4));
    let t = common::ingest_chunked("engine.json", &engine_trace(&names, 500), 1 << 20)
        .unwrap_or_else(|e| panic!("{e}"));
    let job = assemble(vec![t], &[], &Rules::default());
    let it = job.ranks[0].norm.steps.iterations.clone().unwrap_or_default();
    assert_eq!(it.phase.first(), Some(&IterPhase::Prefill));
    assert_eq!(job.ranks[0].norm.steps.number, vec![0, 1, 2, 3, 4]);
    assert!(!job.ranks[0].norm.steps.synthetic);
}

/// A trace with `ProfilerStep#N` keeps its steps whatever else it names, and a training job
/// has no serving figures.
#[test]
fn profiler_steps_win_and_training_is_not_serving() {
    let names: Vec<String> = (1..4).map(|k| format!("ProfilerStep#{k}")).collect();
    let a = analysed(&engine_trace(&names, 100));
    assert!(a.serving.is_empty());
    assert_eq!(a.steps.iter().map(|s| s.step).collect::<Vec<_>>(), vec![1, 2, 3]);
}

/// vLLM steps the profiler once per iteration: the `ProfilerStep#N` stay the steps, each with
/// the phase of the `execute_context_…` span in it, and the job is read as serving.
#[test]
fn profiler_steps_around_engine_iterations_are_iterations() {
    // Each iteration (1,030 µs, then 300 µs of host gap) in a `ProfilerStep#N` that starts 1 µs
    // before its `execute_context_…` span.
    let names: Vec<String> = [
        "execute_context_1(512)_generation_0(0)",
        "execute_context_0(0)_generation_1(1)",
        "execute_context_0(0)_generation_1(1)",
    ]
    .iter()
    .map(|n| n.to_string())
    .collect();
    let mut bytes = String::from_utf8(engine_trace(&names, 300)).unwrap_or_default();
    let mut t = 1_000u64;
    let mut steps = Vec::new();
    for k in 0..3 {
        steps.push(format!(
            r#"{{"ph":"X","cat":"user_annotation","name":"ProfilerStep#{}","pid":10,"tid":10,"ts":{},"dur":1320}}"#,
            k + 7,
            t - 1
        ));
        t += 1_330;
    }
    bytes = bytes.replacen("\"traceEvents\":[", &format!("\"traceEvents\":[{},", steps.join(",")), 1);
    let a = analysed(bytes.as_bytes());
    assert_eq!(a.steps.iter().map(|s| s.step).collect::<Vec<_>>(), vec![7, 8, 9]);
    let s = a.serving.first().unwrap_or_else(|| panic!("not read as serving"));
    assert!(s.profiler_steps);
    assert_eq!((s.prefill, s.decode), (1, 2));
    let md = markdown(&a);
    assert!(
        md.contains("the steps (`ProfilerStep#N`, one per iteration) are 3 vLLM engine iteration(s)"),
        "{md}"
    );
}

/// TraceLens' B200 vLLM trace: one `execute_context_1(888_788544)_generation_0(0)` span, a
/// prefill; the advice is a serving engine's.
#[test]
fn a_real_vllm_trace_is_read_as_an_engine() {
    let f = "traces/tracelens/b200_eager_trace.json.gz";
    let p = common::shared().join(f);
    if !p.exists() {
        return;
    }
    let t = common::ingest_chunked(f, &common::read(&p), 1 << 20).unwrap_or_else(|e| panic!("{e}"));
    let a = analyze(&assemble(vec![t], &[], &Rules::default()), &Options::default());
    let s = a.serving.first().unwrap_or_else(|| panic!("not read as an engine"));
    assert_eq!((s.engine.as_str(), s.iterations, s.prefill), ("vllm", 1, 1));
    let md = markdown(&a);
    assert!(!md.contains("training loop") && !md.contains("leave those to DDP"), "{md}");
}
