//! Fuzz target: a folder of mixed files, held in memory, made into one job as `rankscope
//! analyze` and `rankscope combine` make it: each file's kind sniffed from its head
//! ([`job::text_kinds`]), the folder walk's name rule ([`job::is_folder_candidate`], Flight
//! Recorder dumps by content), traces read in chunks by the [`Reader`], parts decoded, a job
//! digest taken alone ([`job::digest_among`]), files with no event left out ([`job::eventless`])
//! and the job combined ([`job::combine`], or normalized whole: [`job::analyze_traces`]), its
//! JSON, Markdown and CSV written. The walk itself is the host's, on a real file system
//! (`rankscope_host::expand`); this is the assembly after it, which is the core's.
//!
//! The input is files separated by `\0FILE`; each file's first byte chooses its name (low four
//! bits), whether the walk found it or it was named (bit 4: a walked file must pass the name
//! rule) and the read size (bits 5–6). The first file's bit 7 chooses the whole-job route.
#![no_main]

use std::sync::OnceLock;

use libfuzzer_sys::fuzz_target;
use rankscope_core::analyze::{Options, RankPart};
use rankscope_core::inspect::FailedFile;
use rankscope_core::job::digest::part::{self, Piece};
use rankscope_core::job::{self, InputKind, Loaded, RankClaim, Reader, Text, TextRef};
use rankscope_core::normalize::Rules;

const NAMES: [&str; 16] = [
    "rank0.json",
    "rank1.json.gz",
    "trace.json",
    "run/rank_3.pt.trace.json",
    "fr_trace_rank_2",
    "fr_rank1.pkl",
    "nccl.log",
    "all_reduce_perf.txt",
    "slurm-77.out",
    "notes.md",
    "r0.part",
    "r5.part",
    "job.rsdigest",
    "RANK2.JSON",
    "config.json",
    "empty.txt",
];
const CHUNKS: [usize; 4] = [3, 61, 4096, usize::MAX];
const SEPARATOR: &[u8] = b"\0FILE";

fn rules() -> &'static Rules {
    static RULES: OnceLock<Rules> = OnceLock::new();
    RULES.get_or_init(Rules::default)
}

/// The input cut at every [`SEPARATOR`].
fn files(data: &[u8]) -> Vec<&[u8]> {
    let mut out = Vec::new();
    let mut rest = data;
    while let Some(at) = rest.windows(SEPARATOR.len()).position(|w| w == SEPARATOR) {
        out.push(&rest[..at]);
        rest = &rest[at + SEPARATOR.len()..];
    }
    out.push(rest);
    out
}

fn read(name: &str, bytes: &[u8], chunk: usize) -> Result<Loaded, String> {
    let mut r = Reader::new(name);
    for c in bytes.chunks(chunk.clamp(1, bytes.len().max(1))) {
        r.feed(c);
        if r.failed() {
            break;
        }
    }
    r.finish().map_err(|e| e.to_string())
}

fuzz_target!(|data: &[u8]| {
    let opts = Options::default();
    let mut traces = Vec::new();
    let mut parts: Vec<(RankClaim, RankPart)> = Vec::new();
    let mut texts: Vec<Text> = Vec::new();
    let mut failed: Vec<FailedFile> = Vec::new();
    let mut whole = false;
    for (i, f) in files(data).into_iter().enumerate() {
        let Some((&head, bytes)) = f.split_first() else { continue };
        whole |= i == 0 && head & 0x80 != 0;
        let name = format!("job/{i}/{}", NAMES[usize::from(head & 15)]);
        let walked = head & 0x10 != 0;
        let sniffed = job::detect(&bytes[..bytes.len().min(job::SNIFF_BYTES)]);
        if walked && !job::is_folder_candidate(&name) && sniffed != InputKind::FlightRecorder {
            continue;
        }
        if name.ends_with(".part") {
            match part::decode(&name, bytes) {
                Ok(Piece::Trace { claim, part }) => parts.push((claim, *part)),
                Ok(Piece::Text(t)) => texts.push(t),
                Err(e) => failed.push(FailedFile { file: name, error: e.to_string() }),
            }
            continue;
        }
        match read(&name, bytes, CHUNKS[usize::from(head >> 5 & 3)]) {
            Ok(Loaded::Trace(t)) => traces.push(*t),
            Ok(Loaded::Text(t)) => texts.push(t),
            Err(error) => failed.push(FailedFile { file: name, error }),
        }
    }
    let refs: Vec<TextRef<'_>> = texts.iter().map(Text::as_ref).collect();
    if let Some(d) = job::digest_among(&refs, traces.len() + parts.len() + failed.len()) {
        if let Ok(d) = d {
            let out = d.into_output();
            let _ = (out.json(), out.markdown(), out.csv());
        }
        return;
    }
    let mut out = if whole && parts.is_empty() {
        job::analyze_traces(traces, &[], rules(), &refs, &opts).1
    } else {
        parts.extend(traces.into_iter().flat_map(|t| job::part_of(t, rules(), &opts)));
        let facts: Vec<_> = parts.iter().map(|(c, p)| (c, p.info.events, p.world_size)).collect();
        for i in job::eventless(&facts).into_iter().rev() {
            let _ = job::eventless_note(&parts.remove(i).0.file);
        }
        job::combine(parts, &[], &refs, &opts)
    };
    out.failed = failed;
    let _ = (out.json(), out.markdown(), out.csv(), out.clean());
});
