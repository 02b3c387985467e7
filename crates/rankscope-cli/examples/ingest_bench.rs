//! Ingest benchmark: times each stage on one file, and a bare JSON parse of the same bytes
//! (serde_json skipping everything, `IgnoredAny`) as the yardstick.
//!
//! `cargo run --release -p rankscope-cli --example ingest_bench -- FILE`
//!
//! Then the same file through the host's read (`rankscope_host::load_traces`: on every core
//! unless `RANKSCOPE_PARSE_THREADS=1`) and each stage of `rankscope analyze --json` after it.
//!
//! Each figure is also printed as a `bench key=value` line for `tests/bench/run.py`
//! (`./x bench`), which writes the tables of BENCHMARKS.md from them.

use std::io::Read;
use std::time::Instant;

use serde::Deserialize;

use rankscope_core::analyze;
use rankscope_core::normalize::{assemble, Rules};
use rankscope_core::parse::FileIngest;

fn main() -> anyhow::Result<()> {
    let path = std::env::args().nth(1).ok_or_else(|| anyhow::anyhow!("usage: ingest_bench FILE"))?;
    let size = std::fs::metadata(&path)?.len() as f64;
    let mb = |s: f64| size / 1e6 / s;

    let t0 = Instant::now();
    let mut f = std::fs::File::open(&path)?;
    let mut ingest = FileIngest::new(&path);
    let mut buf = vec![0u8; 4 << 20];
    loop {
        let n = f.read(&mut buf)?;
        if n == 0 {
            break;
        }
        ingest.feed(&buf[..n]);
    }
    let trace = ingest.finish()?;
    let parse = t0.elapsed().as_secs_f64();
    let events = trace.counts.total;
    let t1 = Instant::now();
    let job = assemble(vec![trace], &[], &Rules::default());
    let norm = t1.elapsed().as_secs_f64();
    let t2 = Instant::now();
    let report = rankscope_core::inspect::report(&job, vec![]);
    let rep = t2.elapsed().as_secs_f64();
    println!("file {path}: {:.1} MB, {events} events", size / 1e6);
    println!("parse (read + inflate + parse into columns): {parse:.3} s = {:.0} MB/s", mb(parse));
    println!("normalize (sort, classify, link, steps, strings): {norm:.3} s");
    println!("report: {rep:.3} s; total {:.3} s = {:.0} MB/s", parse + norm + rep, mb(parse + norm + rep));
    println!("table bytes per event: {:.1}", report.files[0].table_bytes_per_event);
    println!("bench parse_s={parse:.4} normalize_s={norm:.4} report_s={rep:.4} events={events} bytes={size}");
    // What a browser worker does after these (view::RankView::new, analysis_part).
    if let Some(e) = job.ranks.first() {
        let t = Instant::now();
        let index = rankscope_core::view::TimelineIndex::build(&e.trace);
        let idx = t.elapsed().as_secs_f64();
        let t = Instant::now();
        let part = analyze::rank_part(e, &job.strings, analyze::idle::DEFAULT_KERNEL_WAIT_THRESHOLD_NS);
        let ana = t.elapsed().as_secs_f64();
        std::hint::black_box((&index, &part));
        println!(
            "timeline index (the app's worker): {idx:.3} s; rank_part (its half of the analysis): {ana:.3} s"
        );
        println!("bench index_s={idx:.4} rank_part_s={ana:.4}");
    }

    host_stages(&path)?;

    let t3 = Instant::now();
    let r = std::io::BufReader::with_capacity(4 << 20, std::fs::File::open(&path)?);
    let mut de = serde_json::Deserializer::from_reader(r);
    serde::de::IgnoredAny::deserialize(&mut de)?;
    let bare = t3.elapsed().as_secs_f64();
    println!("bench serde_skip_s={bare:.4}");
    println!(
        "bare serde_json parse (IgnoredAny, from a 4 MiB BufReader): {bare:.3} s = {:.0} MB/s",
        mb(bare)
    );
    Ok(())
}

/// The stages of `rankscope analyze --json FILE` as the CLI runs them: the host's read (split
/// over every core unless `RANKSCOPE_PARSE_THREADS=1`), normalize, the per-rank analysis, the
/// job's combine and the JSON text.
fn host_stages(path: &str) -> anyhow::Result<()> {
    use rankscope_core::{analyze, job};
    let input = rankscope_host::Input { path: path.into(), walked: false };
    let t0 = Instant::now();
    let (traces, failed, _) = rankscope_host::load_traces(&[input], 4 << 20, &|_, _| {});
    let read = t0.elapsed().as_secs_f64();
    anyhow::ensure!(failed.is_empty(), "{failed:?}");
    // The host's threads (in line on one when `RANKSCOPE_PARSE_THREADS=1`), as the CLI.
    let j = &rankscope_host::Threads;
    let t1 = Instant::now();
    let job = rankscope_core::normalize::assemble_with(traces, &[], &Rules::default(), j);
    let norm = t1.elapsed().as_secs_f64();
    let t2 = Instant::now();
    let opts = analyze::Options::default();
    let thr = opts.kernel_wait_threshold_ns;
    let parts: Vec<_> = job.ranks.iter().map(|r| analyze::rank_part_with(r, &job.strings, thr, j)).collect();
    let part = t2.elapsed().as_secs_f64();
    let t3 = Instant::now();
    let out = job::combine_decided(parts, job.errors.clone(), &[], &opts);
    let comb = t3.elapsed().as_secs_f64();
    let t4 = Instant::now();
    let text = out.json();
    let json = t4.elapsed().as_secs_f64();
    let threads = std::env::var("RANKSCOPE_PARSE_THREADS").unwrap_or_else(|_| "every core".into());
    println!(
        "host ({threads}): read {read:.3} s, normalize {norm:.3} s, rank_part {part:.3} s, combine {comb:.3} s, json {json:.3} s ({} bytes); total {:.3} s",
        text.len(),
        read + norm + part + comb + json
    );
    println!("bench host_read_s={read:.4} host_normalize_s={norm:.4} host_rank_part_s={part:.4} host_combine_s={comb:.4} host_json_s={json:.4}");
    Ok(())
}
