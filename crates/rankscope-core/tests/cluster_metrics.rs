//! Cluster metrics joined with a job's traces (docs/cluster-metrics.md): each synthetic case of
//! `tests/fixtures/cluster_metrics/` (written by its `gen.py` from the documented formats) read
//! beside the traces of `rankscope synth --layout tp=8,pp=1,dp=2`, and what its `expected.json`
//! says it must give; the healthy case gives nothing.

#![allow(clippy::disallowed_methods, clippy::disallowed_types)]
#![allow(clippy::expect_used, clippy::unwrap_used)] // a failed expectation is the test failing

mod common;

use std::sync::OnceLock;

use rankscope_core::analyze::beside::places;
use rankscope_core::analyze::{Analysis, Options};
use rankscope_core::diagnose::analyze;
use rankscope_core::metrics::join::{MapMethod, RankPlace, StepSpan};
use rankscope_core::metrics::{self, DiagKind, DmonPlace, MetricsReport, ReadOptions};
use rankscope_core::normalize::{assemble, Rules};
use rankscope_synth::{self as synth, Hybrid, SynthConfig};
use serde_json::Value;

fn dir() -> std::path::PathBuf {
    common::fixture("cluster_metrics")
}

/// The job the fixtures were written for: what `rankscope synth --layout tp=8,pp=1,dp=2` writes.
fn job() -> &'static Analysis {
    static JOB: OnceLock<Analysis> = OnceLock::new();
    JOB.get_or_init(|| {
        let h = Hybrid { tp: 8, pp: 1, dp: 2, ..Hybrid::default() };
        let cfg = SynthConfig {
            steps: 3,
            straggler_rank: None,
            loss_allreduce: false,
            hybrid: Some(h),
            ..SynthConfig::default()
        };
        let n = synth::world_size(&cfg) as usize;
        let traces = synth::write_ranks(&cfg, vec![Vec::new(); n])
            .expect("write_ranks")
            .into_iter()
            .enumerate()
            .map(|(r, (b, _))| {
                common::ingest_chunked(&synth::file_name(r as u32, false), &b, 1 << 20).expect("a trace")
            })
            .collect();
        analyze(&assemble(traces, &[], &Rules::default()), &Options::default())
    })
}

fn expected() -> Value {
    serde_json::from_slice(&common::read(&dir().join("expected.json"))).expect("expected.json")
}

fn run(case: &str, spec: &Value, with: Option<&[RankPlace]>) -> MetricsReport {
    let files: Vec<(String, Vec<u8>)> = spec["files"]
        .as_array()
        .expect("files")
        .iter()
        .map(|f| {
            let name = f.as_str().expect("a file name");
            (format!("{case}/{name}"), common::read(&dir().join(case).join(name)))
        })
        .collect();
    let d = &spec["dmon"];
    let opts = ReadOptions {
        dmon: DmonPlace {
            host: d["host"].as_str().map(str::to_string),
            start_ns: d["start_s"]
                .as_str()
                .and_then(|s| s.parse::<f64>().ok())
                .map(|s| (s * 1e9).round() as i64),
            delay_ns: d["delay_ms"].as_i64().map(|m| m * 1_000_000),
        },
        ..ReadOptions::default()
    };
    let (rep, errors) = metrics::report(&files, &opts, with);
    assert!(errors.is_empty(), "{case}: {errors:?}");
    rep
}

type Got = Vec<(String, Vec<String>, Vec<u32>)>;

fn got(rep: &MetricsReport) -> Got {
    rep.findings.iter().map(|f| (f.id.to_string(), f.entities.clone(), f.ranks.clone())).collect()
}

fn want(spec: &Value) -> Got {
    spec["findings"]
        .as_array()
        .expect("findings")
        .iter()
        .map(|f| {
            (
                f["id"].as_str().unwrap_or_default().to_string(),
                f["entities"].as_array().unwrap().iter().map(|e| e.as_str().unwrap().to_string()).collect(),
                f["ranks"].as_array().unwrap().iter().map(|r| r.as_u64().unwrap() as u32).collect(),
            )
        })
        .collect()
}

#[test]
fn the_fixtures_cover_the_job() {
    // The cases hold their condition over `_job.window_s`: every rank's steps must fall in it, or
    // gen.py's window needs moving (the generator's clock changed).
    let w = &expected()["_job"]["window_s"];
    let (lo, hi) = ((w[0].as_f64().unwrap() * 1e9) as i64, (w[1].as_f64().unwrap() * 1e9) as i64);
    let p = places(job());
    assert_eq!(p.len(), 16);
    for r in &p {
        let (a, b) = (r.steps.first().unwrap().start_ns, r.steps.last().unwrap().end_ns);
        assert!(lo < a && b < hi, "rank {}: steps {a}..{b} outside the fixtures' window {lo}..{hi}", r.rank);
        assert_eq!(r.gpu, Some(r.rank % 8), "rank {}'s GPU", r.rank);
        assert_eq!(r.host.as_deref(), Some(if r.rank < 8 { "node00" } else { "node01" }));
    }
}

#[test]
fn every_case_says_what_it_must_and_the_healthy_one_nothing() {
    let exp = expected();
    let p = places(job());
    let mut bad = Vec::new();
    for (case, spec) in exp.as_object().unwrap().iter().filter(|(k, _)| !k.starts_with('_')) {
        let rep = run(case, spec, Some(&p));
        let j = rep.join.as_ref().expect("joined");
        assert_eq!(j.ranks.len(), 16, "{case}: every rank mapped: {:?}", rep.diagnostics);
        assert!(j.ranks.iter().all(|r| r.method == MapMethod::HostAndGpu && !r.coarse), "{case}");
        assert!(j.ranks.iter().all(|r| r.sm_active.is_some()), "{case}: SM active over every rank's steps");
        if got(&rep) != want(spec) {
            bad.push(format!(
                "{case}: got {:?}\n  want {:?}\n{}",
                got(&rep),
                want(spec),
                metrics::render::text(&rep)
            ));
        }
    }
    assert!(bad.is_empty(), "{}", bad.join("\n"));
}

#[test]
fn the_evidence_carries_the_numbers_of_the_inputs() {
    let exp = expected();
    let p = places(job());
    let rep = run("comm_bound", &exp["comm_bound"], Some(&p));
    let f = &rep.findings[0];
    // gen.py: 47.5 GB/s tx of a 50 GB/s line, SM active 0.12 ± 0.01.
    assert!(f.evidence.iter().any(|e| e.contains("tx 47.5 GB/s of 50.0 GB/s")), "{:?}", f.evidence);
    assert!(f.evidence[0].starts_with("SM active 0.1"), "{:?}", f.evidence);
    let rep = run("throttled", &exp["throttled"], Some(&p));
    let r11 = rep.join.as_ref().unwrap().ranks.iter().find(|r| r.rank == 11).unwrap();
    assert_eq!(r11.sm_clock_mhz, Some(1350.0));
    assert_eq!(r11.clock_reasons, Some(4));
    let t = rep.findings.iter().find(|f| f.id == "throttled_gpu").unwrap();
    assert!(t.evidence.iter().any(|e| e.contains("sw_power_cap")), "{:?}", t.evidence);
    assert!(
        t.evidence.iter().any(|e| e.contains("1350 MHz against the job GPUs' median 1980 MHz")),
        "{:?}",
        t.evidence
    );
    // Shown on the job's aligned clock: the rank's own window less its offset.
    assert_eq!(r11.aligned_start_ns, r11.start_ns - r11.offset_ns);
    let rep = run("pfc_storm", &exp["pfc_storm"], Some(&p));
    assert!(
        rep.findings[0].evidence[0].starts_with("60000 pause frames/s"),
        "{:?}",
        rep.findings[0].evidence
    );
}

#[test]
fn without_traces_there_are_series_and_no_findings() {
    let exp = expected();
    let rep = run("throttled", &exp["throttled"], None);
    assert!(rep.join.is_none() && rep.findings.is_empty());
    assert!(rep
        .series
        .iter()
        .any(|s| s.name == "DCGM_FI_DEV_SM_CLOCK" && s.entity.host == "node01" && s.min == 1350.0));
}

#[test]
fn ranks_that_cannot_be_placed_are_said_never_guessed() {
    // Traces without host names against metrics of two hosts.
    let exp = expected();
    let p: Vec<RankPlace> = places(job()).into_iter().map(|r| RankPlace { host: None, ..r }).collect();
    let rep = run("throttled", &exp["throttled"], Some(&p));
    assert!(rep.join.as_ref().unwrap().ranks.is_empty());
    assert!(rep.findings.is_empty());
    let unmapped = rep.diagnostics.iter().filter(|d| d.kind == DiagKind::Unmapped).count();
    assert_eq!(unmapped, 16, "{:?}", rep.diagnostics);
}

#[test]
fn hostile_metrics_beside_a_job_never_panic() {
    let big = "9".repeat(400);
    let text = format!(
        "# HELP DCGM_FI_DEV_SM_CLOCK x\nDCGM_FI_DEV_SM_CLOCK{{gpu=\"1000000000\",Hostname=\"h\"}} 1 1720912093500\nDCGM_FI_DEV_SM_CLOCK{{gpu=\"0\",Hostname=\"h\"}} {big} 1720912093500\nDCGM_FI_DEV_SM_CLOCK{{gpu=\"0\",Hostname=\"h\"}} 1 -{big}\nDCGM_FI_DEV_XID_ERRORS{{gpu=\"0\",Hostname=\"h\"}} 1e300 1720912093500\n"
    );
    let p = vec![RankPlace {
        rank: 0,
        host: Some("h".into()),
        gpu: Some(0),
        offset_ns: i64::MAX,
        align_residual_ns: 0,
        steps: vec![StepSpan {
            step: 1,
            start_ns: i64::MIN,
            end_ns: i64::MAX,
            compute_ns: i64::MAX,
            comm_ns: i64::MAX,
        }],
    }];
    let (rep, errors) =
        metrics::report(&[("hostile.prom", text.into_bytes())], &ReadOptions::default(), Some(&p));
    assert!(errors.is_empty(), "{errors:?}");
    assert!(
        rep.diagnostics.iter().any(|d| d.kind == DiagKind::BadNumber || d.kind == DiagKind::BadTime),
        "{:?}",
        rep.diagnostics
    );
    let (_, errors) = metrics::report(&[("x.bin", vec![0xff; 1000])], &ReadOptions::default(), None);
    assert!(errors[0].to_string().starts_with("x.bin: not a cluster metrics file"), "{}", errors[0]);
}

/// Every file under `p`, recursively.
fn files_under(p: &std::path::Path, out: &mut Vec<std::path::PathBuf>) {
    for e in std::fs::read_dir(p).into_iter().flatten().flatten() {
        let q = e.path();
        if q.is_dir() {
            files_under(&q, out);
        } else {
            out.push(q);
        }
    }
}

#[test]
fn the_sniff_claims_no_other_input_and_every_case_file() {
    // What the input layer will call first must leave traces, NCCL logs, nccl-tests output,
    // Inspector logs, step logs and dumps to their own readers.
    let mut others = Vec::new();
    files_under(&common::fixture(""), &mut others);
    files_under(&common::shared().join("nccl-logs"), &mut others);
    files_under(&common::shared().join("nccl-tests"), &mut others);
    others.retain(|p| !p.components().any(|c| c.as_os_str() == "cluster_metrics"));
    assert!(others.len() > 50, "{} files", others.len());
    for p in &others {
        let mut head = vec![0u8; 64 << 10];
        let n = std::io::Read::read(&mut std::fs::File::open(p).expect("open"), &mut head).expect("read");
        assert_eq!(metrics::sniff(&head[..n]), None, "{} is claimed as metrics", p.display());
    }
    let exp = expected();
    for (case, spec) in exp.as_object().unwrap().iter().filter(|(k, _)| !k.starts_with('_')) {
        for f in spec["files"].as_array().unwrap() {
            let b = common::read(&dir().join(case).join(f.as_str().unwrap()));
            assert!(metrics::sniff(&b[..b.len().min(64 << 10)]).is_some(), "{case}/{f}");
        }
    }
}

#[test]
fn a_scrape_coarser_than_the_profile_is_said() {
    // Two dcgm-exporter scrapes 15 s apart around the job: one sample describes the whole
    // profile; the figure is its value and the join says it is coarse.
    let p = places(job());
    let (lo, hi) = (p[0].steps[0].start_ns / 1_000_000, p[0].steps.last().unwrap().end_ns / 1_000_000);
    let mut text = String::from("# TYPE DCGM_FI_PROF_SM_ACTIVE gauge\n");
    for (t, v) in [(lo - 10_000, 0.5), (hi + 5_000, 0.7)] {
        for g in 0..8 {
            for h in ["node00", "node01"] {
                text.push_str(&format!("DCGM_FI_PROF_SM_ACTIVE{{gpu=\"{g}\",Hostname=\"{h}\"}} {v} {t}\n"));
            }
        }
    }
    let (rep, _) = metrics::report(&[("coarse.prom", text.into_bytes())], &ReadOptions::default(), Some(&p));
    let j = rep.join.unwrap();
    assert!(j.ranks.iter().all(|r| r.coarse
        && r.sm_active == Some(0.7)
        && r.interval_ns == Some(15_000_000_000 + (hi - lo) * 1_000_000)));
    assert!(j.residual.contains("16 ranks' windows are shorter than one sample"), "{}", j.residual);
}

/// `dcgmi dmon … | ts '%.s'`: each line after its Unix seconds, no host given. On a job whose
/// traces all name one host the table's GPUs are that host's (`one_host`): node01's ranks
/// alone, its throttled GPU 3 found on rank 11 from the stamps with no start or delay given.
/// On a job of two hosts the table's host cannot be told, and nothing is guessed.
#[test]
fn a_stamped_dmon_table_without_a_host_joins_a_one_host_job() {
    let exp = &expected()["throttled"];
    let text = String::from_utf8(common::read(&dir().join("throttled/dmon_node01.txt"))).unwrap();
    let start_ns: i64 = 1_720_912_092_000_000_000;
    let delay_ns = exp["dmon"]["delay_ms"].as_i64().unwrap() * 1_000_000;
    // Blocks as the reader makes them: a block ends when one of its GPUs comes again.
    let (mut block, mut k, mut stamped) = (Vec::<String>::new(), 0i64, String::new());
    for line in text.lines() {
        if line.starts_with("GPU") {
            let gpu = line.split_whitespace().take(2).collect::<Vec<_>>().join(" ");
            if block.contains(&gpu) {
                block.clear();
                k += 1;
            }
            block.push(gpu);
        }
        let t = start_ns + k * delay_ns + 1_000;
        stamped.push_str(&format!("{}.{:09} {line}\n", t / 1_000_000_000, t % 1_000_000_000));
    }
    let file = [("dmon.txt".to_string(), stamped.into_bytes())];
    let node01: Vec<RankPlace> =
        places(job()).into_iter().filter(|p| p.host.as_deref() == Some("node01")).collect();
    assert_eq!(node01.len(), 8);
    let (rep, errors) = metrics::report(&file, &ReadOptions::default(), Some(&node01));
    assert!(errors.is_empty(), "{errors:?}");
    assert!(rep.diagnostics.iter().all(|d| d.kind != DiagKind::NoTime), "{:?}", rep.diagnostics);
    let j = rep.join.as_ref().unwrap();
    assert_eq!(j.ranks.len(), 8, "{:?}", rep.diagnostics);
    assert!(j.ranks.iter().all(|r| r.method == MapMethod::OneHost));
    assert!(j.method.contains("every trace names the same one"), "{}", j.method);
    let throttled: Vec<&Vec<u32>> =
        rep.findings.iter().filter(|f| f.id == "throttled_gpu").map(|f| &f.ranks).collect();
    assert_eq!(throttled, [&vec![11]], "{:?}", got(&rep));
    // Both hosts' ranks: whose GPUs these are cannot be told.
    let (rep, _) = metrics::report(&file, &ReadOptions::default(), Some(&places(job())));
    assert!(rep.join.as_ref().unwrap().ranks.is_empty());
    assert_eq!(rep.diagnostics.iter().filter(|d| d.kind == DiagKind::Unmapped).count(), 16);
}
