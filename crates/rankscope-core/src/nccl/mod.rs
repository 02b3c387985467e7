//! NCCL_DEBUG logs and nccl-tests output: the layer beneath the trace.
//!
//! Field practice diagnoses a slow job bottom-up: first the fabric (nccl-tests: does the network
//! deliver its bandwidth?), then the communication library (`NCCL_DEBUG=INFO`: did NCCL take the
//! fast path?), then the trace. This module reads both kinds of text output:
//!
//! - [`log`]: `NCCL_DEBUG=INFO` logs → per-process and per-rank facts (host, pid, device, bus id,
//!   versions, network, GDRDMA, channels, rings, trees, peer transports, warnings, init timings)
//!   and [`Finding`]s with evidence lines.
//! - [`perf`]: nccl-tests (`*_perf`) output → tables of rows exactly as printed, a latency-bandwidth
//!   fit per test ([`fit`]), the busbw plateau and findings.
//! - [`inspector`]: NCCL Inspector logs (the profiler plugin's JSON line per operation) → per
//!   communicator the calls by kind and size and the member that arrives last.
//! - [`ras`]: `ncclras` status reports (JSON or text) → communicators, their missing, dead and
//!   failed ranks.
//!
//! Both parsers take `&[u8]` (any bytes: invalid UTF-8 is decoded lossily), never panic, and
//! tolerate line prefixes (`[1,0]<stdout>:`, srun `0: ` labels, timestamps, patched builds that
//! insert `func(), file.cc:123,` fragments), interleaved processes, unrelated output and elided
//! lines. A file may hold both kinds (an NCCL log with an `all_reduce_perf` table): run both
//! parsers on it; [`sniff_all`] says which apply.
//!
//! Everything returned is sorted deterministically and serializes with serde (stable field
//! names), so the CLI prints it as JSON and the app can consume the same values.

pub mod fit;
pub mod inspector;
pub mod log;
pub mod perf;
pub mod ras;
mod text;

pub use fit::{fit_latency_bandwidth, LatencyBandwidthFit};
pub use log::{analyze_logs, LogReport};
pub use perf::{analyze_tests, TestsReport};

/// Version of the JSON shape of [`LogReport`] and [`TestsReport`]; bump on incompatible changes.
pub const REPORT_VERSION: u32 = 1;

/// One input file: a display name (used in evidence) and its raw bytes.
#[derive(Debug, Clone, Copy)]
pub struct Input<'a> {
    pub name: &'a str,
    pub bytes: &'a [u8],
}

/// How serious a finding or diagnostic is: the one ladder, spelled `info`, `warning`, `error`
/// in these reports ([`crate::model::Severity`]).
pub use crate::model::Severity;

/// A finding of these reports: the one [`crate::finding::Finding`], quoting the lines that
/// show it (`evidence[]` in the JSON, [`EvidenceLine`]s).
pub use crate::finding::{EvidenceLine, Finding, FindingId, EVIDENCE_MAX, EVIDENCE_TEXT_MAX};

/// Sort findings: most severe first, then by id, then by first evidence.
pub(crate) fn sort_findings(f: &mut [Finding]) {
    f.sort_by(|a, b| {
        b.severity
            .cmp(&a.severity)
            .then_with(|| a.id.as_str().cmp(b.id.as_str()))
            .then_with(|| a.quotes.first().cmp(&b.quotes.first()))
            .then_with(|| a.message.cmp(&b.message))
    });
}

/// A parse problem that did not stop the parse (partial failure is data): the one
/// [`crate::model::Diagnostic`], placed by file and line ([`Diagnostic::in_text`]).
pub use crate::model::{DiagKind, Diagnostic};

/// What a file is, judged from its first bytes: the job's one input kind (its NCCL kinds here).
pub use crate::input::InputKind;

/// Cheap content sniffer: which kind of NCCL text `first_bytes` (say the first 64 KiB) is.
///
/// When a file holds both (an NCCL log with a perf table), the log wins: call [`sniff_all`] to
/// learn that both parsers apply.
pub fn sniff(first_bytes: &[u8]) -> Option<InputKind> {
    sniff_all(first_bytes).first().copied()
}

/// Every kind of NCCL text found in `first_bytes`, [`InputKind::NcclLog`] first.
pub fn sniff_all(first_bytes: &[u8]) -> Vec<InputKind> {
    let mut log = false;
    let mut tests = false;
    for (_, line) in text::lines(first_bytes) {
        let line = line.as_ref();
        if !log && log::is_nccl_line(line) {
            log = true;
        }
        if !tests && perf::is_tests_marker(line) {
            tests = true;
        }
        if log && tests {
            break;
        }
    }
    let mut kinds = Vec::new();
    if log {
        kinds.push(InputKind::NcclLog);
    }
    if tests {
        kinds.push(InputKind::NcclTests);
    }
    kinds
}

/// What an input file is, from its first bytes (say 64 KiB), the one rule the CLI and the app
/// share: the NCCL kinds found in it, or none for a trace. gzip is a trace; so is text whose
/// first non-blank byte (after a byte-order mark) is `{`. A `[` may open a bare-array trace or
/// be mpirun's `[1,0]<stdout>:` line tag, so the NCCL sniffer decides; anything else that is not
/// NCCL text is handed to the trace reader, which says precisely why it is not a trace.
pub fn sniff_input(head: &[u8]) -> Vec<InputKind> {
    if head.starts_with(&[0x1f, 0x8b]) {
        return Vec::new();
    }
    let body = head.strip_prefix("\u{feff}".as_bytes()).unwrap_or(head);
    if body.iter().copied().find(|b| !b.is_ascii_whitespace()) == Some(b'{') {
        return Vec::new();
    }
    sniff_all(body)
}
