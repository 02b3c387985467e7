//! The evidence dropped beside the traces, in the one job path (docs/analysis-schema.md,
//! "beside"): cluster metrics, an NCCL Inspector log, an NCCL RAS status and a step log handed
//! to the job API with the traces, recognised by content, joined with them in the analysis,
//! and their findings ranked with the trace's; the same from parts, from a digest, and alone.

#![allow(clippy::disallowed_methods, clippy::disallowed_types)]
#![allow(clippy::expect_used, clippy::unwrap_used)] // a failed expectation is the test failing

mod common;

use rankscope_core::analyze::beside::profiled_steps;
use rankscope_core::analyze::{inspector_join, Options};
use rankscope_core::finding::FindingId;
use rankscope_core::job::{self, InputKind, JobOutput, Text, TextRef};
use rankscope_core::model::RankTrace;
use rankscope_core::nccl::inspector;
use rankscope_core::normalize::Rules;
use rankscope_synth::{self as synth, Hybrid, SynthConfig};

/// The traces of `rankscope synth --layout tp=8,pp=1,dp=2` (what the cluster metrics fixtures
/// were written for, tests/cluster_metrics.rs).
fn hybrid_traces() -> Vec<RankTrace> {
    let h = Hybrid { tp: 8, pp: 1, dp: 2, ..Hybrid::default() };
    let cfg = SynthConfig {
        steps: 3,
        straggler_rank: None,
        loss_allreduce: false,
        hybrid: Some(h),
        ..SynthConfig::default()
    };
    let n = synth::world_size(&cfg) as usize;
    synth::write_ranks(&cfg, vec![Vec::new(); n])
        .expect("write_ranks")
        .into_iter()
        .enumerate()
        .map(|(r, (b, _))| {
            common::ingest_chunked(&synth::file_name(r as u32, false), &b, 1 << 20).expect("a trace")
        })
        .collect()
}

/// The traces of `rankscope synth --scenario baseline --steps 2` (what the Inspector join
/// fixtures were written for, tests/nccl_inspector.rs).
fn baseline_traces() -> Vec<RankTrace> {
    let mut cfg = synth::Scenario::Baseline.config();
    cfg.steps = 2;
    (0..cfg.ranks)
        .map(|r| {
            let mut b = Vec::new();
            synth::write_rank(&cfg, r, &mut b).unwrap();
            rankscope_core::parse::ingest_bytes(&synth::file_name(r, false), &b).unwrap()
        })
        .collect()
}

/// A file as a shell hands it: its kinds by content ([`job::text_kinds`]).
fn text(name: &str, bytes: Vec<u8>) -> Text {
    let kinds = job::text_kinds(&bytes[..bytes.len().min(job::SNIFF_BYTES)]);
    Text { name: name.to_string(), kinds, bytes }
}

fn run(traces: Vec<RankTrace>, texts: &[Text]) -> JobOutput {
    let refs: Vec<TextRef<'_>> = texts.iter().map(Text::as_ref).collect();
    job::analyze_traces(traces, &[], &Rules::default(), &refs, &Options::default()).1
}

/// A Megatron log of 5,000 iterations: `usual_ms` each, but `slow_ms` over `slow` (first and
/// last iteration).
fn megatron_log(usual_ms: f64, slow_ms: f64, slow: (u64, u64)) -> Vec<u8> {
    (1..=5000u64)
        .map(|it| {
            let ms = if (slow.0..=slow.1).contains(&it) { slow_ms } else { usual_ms + (it % 7) as f64 * 0.01 * usual_ms };
            format!(" [2025-01-01 00:00:00] iteration {it:>8}/    5000 | consumed samples: {} | elapsed time per iteration (ms): {ms:.1} | global batch size:   128 |\n", it * 128)
        })
        .collect::<String>()
        .into_bytes()
}

#[test]
fn metrics_and_a_step_log_beside_the_traces_give_findings_that_need_both() {
    // The profiled steps as the traces alone measure them: what the log is written around.
    let alone = run(hybrid_traces(), &[]);
    let profiled = profiled_steps(&alone.analysis);
    assert_eq!(profiled.len(), 3, "{profiled:?}");
    let fastest = profiled.iter().map(|p| p.ms).fold(f64::INFINITY, f64::min);
    let (first, last) = (
        u64::from(profiled.iter().map(|p| p.step).min().unwrap()),
        u64::from(profiled.iter().map(|p| p.step).max().unwrap()),
    );
    // The run usually takes half the profiled step; a phase around the profiled steps as slow.
    let (lo, hi) = (first.saturating_sub(40).max(1), last + 60);
    let log = megatron_log(fastest / 2.0, fastest, (lo, hi));
    let metrics = common::read(&common::fixture("cluster_metrics").join("comm_bound/query_range.json"));
    let texts = vec![text("query_range.json", metrics), text("train.log", log)];
    assert_eq!(texts[0].kinds, [InputKind::Metrics]);
    assert_eq!(texts[1].kinds, [InputKind::StepLog]);
    let out = run(hybrid_traces(), &texts);
    let a = &out.analysis;
    let b = a.beside.as_ref().expect("the analysis has the evidence beside the traces");
    assert!(b.problems.is_empty(), "{:?}", b.problems);

    // The metrics: joined on the aligned clock, stated how and with the residual.
    let m = b.metrics.as_ref().expect("metrics");
    let j = m.join.as_ref().expect("joined with the traces");
    assert_eq!(j.ranks.len(), 16, "every rank on a host and GPU");
    assert!(!j.method.is_empty() && !j.residual.is_empty());
    assert_eq!(m.findings.len(), 2, "comm_bound on both nodes (expected.json)");

    // In the findings list, in the one vocabulary: SMs idle and NICs at line rate (metrics)
    // with the trace's exposed communication as its gain.
    let comm: Vec<_> = a.findings.iter().filter(|f| f.id == FindingId::MetricsCommBound).collect();
    assert_eq!(comm.len(), 2);
    let mut ranks: Vec<u32> = comm.iter().flat_map(|f| f.ranks.iter().copied()).collect();
    ranks.sort_unstable();
    assert_eq!(ranks, (0..16).collect::<Vec<u32>>());
    for f in &comm {
        let exposed = f
            .ranks
            .iter()
            .filter_map(|&r| {
                let mut v: Vec<i64> = a
                    .steps
                    .iter()
                    .filter_map(|s| s.per_rank.iter().find(|p| p.rank == r))
                    .map(|p| p.exposed_comm_ns)
                    .collect();
                v.sort_unstable();
                v.get((v.len() - 1) / 2).copied()
            })
            .max()
            .unwrap();
        assert!(f.message.contains("SM active") && f.message.contains("The trace:"), "{}", f.message);
        assert_eq!(
            f.evidence.get(rankscope_core::finding::EvidenceKey::ExposedCommNs),
            Some(exposed as f64),
            "the time it measures is the trace's exposed communication"
        );
        // The trace's exposed-transfer finding claims that time already: counted once, there,
        // quoting the metrics as its second source.
        let host = a
            .findings
            .iter()
            .find(|x| x.id == FindingId::ExposedComm && x.impact_ns > 0)
            .expect("the comm-bound job's exposed transfer");
        assert_eq!(f.impact_ns, 0, "not counted twice: {}", f.message);
        assert_eq!(f.symptoms, [FindingId::ExposedComm]);
        assert!(host.message.contains("(`metrics.comm-bound`)"), "{}", host.message);
    }
    // The fixes add up to no more than the step.
    let gains: i64 = a.findings.iter().map(|f| f.impact_ns).sum();
    assert!((gains as f64) < a.typical_step_ns(), "{gains} against {}", a.typical_step_ns());

    // The step log: 5,000 iterations, the slow phase pointed to the profiled steps.
    let s = &b.steplogs[0];
    assert_eq!((s.iterations, s.first_iteration, s.last_iteration), (5000, Some(1), Some(5000)));
    let p = s.profile.as_ref().expect("placed against the profiled steps");
    assert_eq!(p.slow_phases.first().map(|x| (x.0, x.1)), Some((lo, hi)), "{:?}", p.slow_phases);
    let f =
        a.findings.iter().find(|f| f.id == FindingId::SteplogSlowPhaseProfiled).expect("slow phase profiled");
    let steps: Vec<u32> = profiled.iter().map(|p| p.step).collect();
    assert_eq!(f.steps, steps);
    assert!(f.message.contains(&format!("iterations {lo}–{hi}")), "{}", f.message);
    let gain = ((profiled.iter().map(|p| p.ms).fold(0.0, f64::max).min(fastest * 10.0)
        - s.elapsed_p50_ms.unwrap())
        * 1e6) as i64;
    assert!(gain > 0);
    // The stretch's excess over the usual iteration is what the trace's causes take apart:
    // counted there, not again here.
    assert_eq!(f.impact_ns, 0, "{}", f.message);
    assert!(!f.symptoms.is_empty() && f.message.contains("counted once"), "{}", f.message);

    // The report has a section for what was given, and the JSON carries it.
    let md = out.markdown();
    assert!(
        md.contains("## Beside the traces")
            && md.contains("### Cluster metrics")
            && md.contains("### Step logs"),
        "{md}"
    );
    assert!(!md.contains("### NCCL Inspector"), "no section for what was not given");
    let v: serde_json::Value = serde_json::from_str(&out.json()).unwrap();
    assert_eq!(v["beside"]["metrics"]["findings"].as_array().map(Vec::len), Some(2));
    assert!(v["findings"].as_array().unwrap().iter().any(|f| f["id"] == "steplog.slow-phase-profiled"));

    // A run whose profiled steps are its usual ones: the slow phase elsewhere is missed.
    let log = megatron_log(fastest, fastest * 3.0, (2000, 2400));
    let out = run(hybrid_traces(), &[text("train.log", log)]);
    let f = out.analysis.findings.iter().find(|f| f.id == FindingId::SteplogSlowPhaseMissed).expect("missed");
    assert!(f.message.contains("iterations 2000–2400"), "{}", f.message);
    assert!(!out.analysis.findings.iter().any(|f| f.id == FindingId::SteplogSlowPhaseProfiled));
}

#[test]
fn an_inspector_log_and_a_ras_status_beside_the_traces_are_joined() {
    let dir = common::fixture("nccl_inspector_join");
    let mut logs: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "log"))
        .collect();
    logs.sort();
    let mut texts: Vec<Text> =
        logs.iter().map(|p| text(&p.file_name().unwrap().to_string_lossy(), common::read(p))).collect();
    assert!(texts.iter().all(|t| t.kinds == [InputKind::NcclInspector]));
    let ras = common::read(&common::fixture("nccl_ras").join("dead_rank.json"));
    texts.push(text("ras.json", ras));
    assert_eq!(texts.last().unwrap().kinds, [InputKind::NcclRas]);
    let out = run(baseline_traces(), &texts);
    let b = out.analysis.beside.as_ref().expect("beside");
    // The join is the one `rankscope nccl-inspector --traces` makes.
    let i = b.inspector.as_ref().expect("inspector");
    let j = i.join.as_ref().expect("joined");
    let reads: Vec<inspector::Read> = texts
        .iter()
        .filter(|t| t.kinds == [InputKind::NcclInspector])
        .map(|t| inspector::read(&t.name, &t.bytes))
        .collect();
    let records: Vec<inspector::Record> = reads.iter().flat_map(|r| r.records.iter().cloned()).collect();
    let job = rankscope_core::normalize::assemble(baseline_traces(), &[], &Rules::default());
    let m = rankscope_core::analyze::measure(&job, &Options::default());
    assert_eq!(j, &inspector_join::join(&records, &m.ops, m.analysis.matching.method));
    let want: serde_json::Value = serde_json::from_slice(&common::read(&dir.join("expected.json"))).unwrap();
    assert_eq!(j.matched as u64, want["matched"].as_u64().unwrap());
    assert_eq!(i.report.records, records.len());
    // The RAS status: dead rank named, a finding in the list.
    assert_eq!(b.ras.len(), 1);
    assert!(!b.ras[0].status.healthy());
    assert!(out
        .analysis
        .findings
        .iter()
        .any(|f| f.id == FindingId::RasJobIncomplete && f.message.contains("dead")));
    let md = out.markdown();
    assert!(md.contains("### NCCL Inspector") && md.contains("### NCCL RAS status"), "{md}");
}

#[test]
fn parts_a_digest_and_the_whole_give_one_answer() {
    let log = megatron_log(100.0, 400.0, (10, 20));
    let metrics = common::read(&common::fixture("cluster_metrics").join("comm_bound/query_range.json"));
    let texts = vec![text("query_range.json", metrics), text("train.log", log)];
    let refs: Vec<TextRef<'_>> = texts.iter().map(Text::as_ref).collect();
    let whole = run(hybrid_traces(), &texts);
    let opts = Options::default();
    let parts: Vec<_> =
        hybrid_traces().into_iter().flat_map(|t| job::part_of(t, &Rules::default(), &opts)).collect();
    let combined = job::combine(parts.clone(), &[], &refs, &opts);
    assert!(combined.analysis.beside.is_some());
    assert_eq!(combined.json(), whole.json());
    let (decided, _) = job::decided(parts, &[]);
    let d = job::digest::encode(&decided, &refs, &combined.analysis);
    let back = job::digest::decode("job.rsdigest", &d).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(back.into_output().json(), whole.json());
}

#[test]
fn alone_each_is_read_without_a_join() {
    let metrics = common::read(&common::fixture("cluster_metrics").join("comm_bound/query_range.json"));
    let texts =
        vec![text("query_range.json", metrics), text("train.log", megatron_log(100.0, 400.0, (10, 20)))];
    let out = run(Vec::new(), &texts);
    let b = out.analysis.beside.as_ref().expect("read alone");
    let m = b.metrics.as_ref().unwrap();
    assert!(m.join.is_none() && m.findings.is_empty() && !m.series.is_empty());
    assert!(b.steplogs[0].profile.is_none() && b.steplogs[0].iterations == 5000);
    assert!(out.analysis.findings.is_empty(), "nothing joined, nothing found");
    assert!(out.markdown().contains("Not joined: no trace came with them"));
}

#[test]
fn gzipped_they_are_read_the_same() {
    use std::io::Write;
    let gz = |b: &[u8]| {
        let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
        e.write_all(b).unwrap();
        e.finish().unwrap()
    };
    let log = megatron_log(100.0, 400.0, (10, 20));
    let metrics = common::read(&common::fixture("cluster_metrics").join("comm_bound/query_range.json"));
    let ras = common::read(&common::fixture("nccl_ras").join("dead_rank.json"));
    let plain = vec![
        text("query_range.json", metrics.clone()),
        text("train.log", log.clone()),
        text("ras.json", ras.clone()),
    ];
    let zipped =
        vec![text("query_range.json", gz(&metrics)), text("train.log", gz(&log)), text("ras.json", gz(&ras))];
    let kinds = |t: &[Text]| t.iter().map(|t| t.kinds.clone()).collect::<Vec<_>>();
    assert_eq!(kinds(&zipped), kinds(&plain));
    let (a, b) = (run(hybrid_traces(), &plain), run(hybrid_traces(), &zipped));
    assert!(b.analysis.beside.as_ref().is_some_and(|x| x.problems.is_empty()));
    assert_eq!(a.json(), b.json());
}
