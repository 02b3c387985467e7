//! Helpers shared by the integration tests.
#![allow(dead_code)]

pub mod gloo_job;
pub mod zoo;

use std::path::PathBuf;

use rankscope_core::model::RankTrace;
use rankscope_core::normalize::{assemble, Job, Rules};
use rankscope_core::parse::{FileIngest, IngestError};

/// `shared/` sits beside the repository (CI clones the repo next to a copy of it).
pub fn shared() -> PathBuf {
    PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../../../shared"))
}

pub fn fixture(name: &str) -> PathBuf {
    PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures")).join(name)
}

/// Ingests bytes fed in chunks of `chunk` bytes; a trace read is held to its tables'
/// invariants ([`RankTrace::check`]).
pub fn ingest_chunked(name: &str, bytes: &[u8], chunk: usize) -> Result<RankTrace, IngestError> {
    let mut f = FileIngest::new(name);
    for c in bytes.chunks(chunk.max(1)) {
        f.feed(c);
    }
    let t = f.finish()?;
    t.check(&t.strings).unwrap_or_else(|e| panic!("{name}: {e}"));
    Ok(t)
}

/// Every rank of an assembled job held to its tables' invariants against the job's strings.
pub fn checked(job: Job) -> Job {
    for r in &job.ranks {
        r.trace.check(&job.strings).unwrap_or_else(|e| panic!("rank {} ({}): {e}", r.rank, r.trace.source));
    }
    job
}

pub fn read(path: &std::path::Path) -> Vec<u8> {
    std::fs::read(path).unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()))
}

/// The decompressed text of a trace file.
pub fn text_of(path: &std::path::Path) -> Vec<u8> {
    let raw = read(path);
    if raw.starts_with(&[0x1f, 0x8b]) {
        use std::io::Read;
        let mut out = Vec::new();
        flate2::read::MultiGzDecoder::new(&raw[..])
            .read_to_end(&mut out)
            .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        out
    } else {
        raw
    }
}

/// One file as a one-rank job.
pub fn job_of(name: &str, bytes: &[u8], chunk: usize) -> Job {
    let t = ingest_chunked(name, bytes, chunk).unwrap_or_else(|e| panic!("{e}"));
    checked(assemble(vec![t], &[], &Rules::default()))
}

/// Every file of a folder under `shared/`, sorted, ingested in 1 MiB chunks.
pub fn load_dir(dir: &str) -> Vec<RankTrace> {
    let mut files: Vec<_> = std::fs::read_dir(shared().join(dir))
        .unwrap_or_else(|e| panic!("{dir}: {e}"))
        .filter_map(Result::ok)
        .map(|e| e.path())
        .collect();
    files.sort();
    files
        .iter()
        .map(|p| {
            ingest_chunked(&p.display().to_string(), &read(p), 1 << 20).unwrap_or_else(|e| panic!("{e}"))
        })
        .collect()
}

/// Every rank's part as the app's workers post it (JSON there and back), in reverse rank order
/// (the job half must not depend on the order parts arrive in).
pub fn posted_parts(
    job: &Job,
    opts: &rankscope_core::analyze::Options,
) -> Vec<rankscope_core::analyze::RankPart> {
    job.ranks
        .iter()
        .rev()
        .map(|r| {
            let p = rankscope_core::analyze::rank_part(r, &job.strings, opts.kernel_wait_threshold_ns);
            let text = serde_json::to_string(&p).unwrap_or_else(|e| panic!("{e}"));
            serde_json::from_str(&text).unwrap_or_else(|e| panic!("{e}"))
        })
        .collect()
}
