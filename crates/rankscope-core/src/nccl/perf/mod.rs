//! nccl-tests (`all_reduce_perf`, `all_gather_perf`, ...) output: tables, fit, findings.
//!
//! **What is read.** Per test: the `# nccl-tests version` / `# Collective test starting:` banners
//! (2.17+), the `# nThread ...` settings line, the `#  Rank N [Group G] Pid P on HOST device D
//! [BUS] NAME` device lines, the column header (which says whether `redop` and `root` columns
//! exist and whether the check column is `#wrong` or the legacy `error`), every result row
//! (size, count, type, redop, root, then time/algbw/busbw/check out-of-place and in-place), the
//! `# Out of bounds values` and `# Avg bus bandwidth` lines, and `...` elision marks.
//!
//! **How rows are found.** A row is recognised anywhere in a line by its shape: two integers
//! (size, count), a type name, then the columns the header announced. Launcher prefixes
//! (`[1,0]<stdout>:`, `0: `) and patched-build fragments are thereby skipped.
//!
//! **Interleaved tables.** When several processes print tables into one stream (a misconfigured
//! launch where every process runs its own 1-rank test), rows of different tables alternate.
//! Sizes grow within a table, so each row goes to the open table whose last size is the largest
//! one still smaller than the row's size (a duplicate size is accepted only when no table fits
//! better; sizes of 0 bytes repeat legitimately). The split is flagged with a diagnostic.
//!
//! **Which collective.** From the banner, else from a command line naming `*_perf`, else
//! inferred from the columns (redop, root, size/count ratio, busbw/algbw ratio, `N/A` in-place
//! checks); [`CollectiveSource`] says which.
//!
//! **Layout.** This file holds the report's types and [`analyze_tests`]; `table` reads a file
//! into tables, `curve` infers what a table measured and fits it, `findings` says what is wrong.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::fit::{fit_latency_bandwidth, FitError, LatencyBandwidthFit};
use super::text::{after_glued_prefix, finite, strip_call_fragments, ChunkLines};
use super::{
    sort_findings, DiagKind, Diagnostic, EvidenceLine, Finding, FindingId, Input, Severity, REPORT_VERSION,
};

mod curve;
mod findings;
mod latency;
mod table;
mod topology;

use curve::*;
pub use curve::{analyze_curve, infer_collective};
use findings::*;
pub use findings::{LOW_MULTINODE_BUSBW_GBPS, PEAK_SHARE_THRESHOLD};
pub use latency::{
    expected_floor, ExpectedFloor, FloorTransport, EFA_FLOOR_MAX_US, INTERNODE_RATIO_MAX,
    INTRA_NODE_FLOOR_MAX_US, NON_MONOTONIC_TOLERANCE, RDMA_FLOOR_MAX_US, SMALL_MESSAGE_MAX_BYTES,
    STEP_ALGBW_DROP, STEP_FLAT_SLOPE, STEP_MIN_JUMP, STEP_SLOPE_EXCESS, UNKNOWN_NETWORK_FLOOR_MAX_US,
};
pub(crate) use table::{is_result_row, is_tests_marker};
pub use table::{parse_tests_file, TestsFile, TestsReader};
pub use topology::{gpu_link_of, LinkFigure, LinkKind, NodeScope, PeakSetAside, Topology};

/// A collective measured by nccl-tests: the one collective kind ([`CollKind`]), spelled in this
/// report as nccl-tests names it.
pub use crate::model::CollKind;

/// Where the collective of a test was learnt.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CollectiveSource {
    /// `# Collective test starting: all_reduce_perf` (nccl-tests ≥ 2.17).
    Banner,
    /// A command line naming the `*_perf` binary before the table.
    CommandLine,
    /// Inferred from the columns (see [`infer_collective`]).
    Inferred,
    Unknown,
}

crate::named_enum! {
    /// The benchmark suite that printed a table, when its banner says so.
    pub enum TestSuite {
        /// NVIDIA's nccl-tests (`# nccl-tests version 2.17.8 ...`).
        NcclTests => "nccl-tests",
        /// AMD's fork for RCCL (`rccl-tests: Version develop:40b1b17`), read the same way.
        RcclTests => "rccl-tests",
    }
}

/// The check column of one measurement.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", content = "value", rename_all = "snake_case")]
pub enum Check {
    /// `#wrong`: number of wrong elements (nccl-tests ≥ 2.13 layout).
    Wrong(u64),
    /// `error`: maximum error (legacy layout), e.g. `5e-07`.
    Error(f64),
    /// `N/A`: not checked (e.g. in-place alltoall / sendrecv).
    NotAvailable,
}

/// One measurement (out-of-place or in-place) of a row, as printed.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Measurement {
    pub time_us: f64,
    pub algbw_gbps: f64,
    pub busbw_gbps: f64,
    pub check: Check,
}

/// One result row, as printed.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PerfRow {
    pub line: u32,
    pub size_bytes: u64,
    pub count: u64,
    pub dtype: String,
    /// `sum`, `none`, ...; absent in layouts without the column (nccl-tests 2.5 all_gather).
    pub redop: Option<String>,
    /// `-1` for rootless collectives; absent in legacy layouts.
    pub root: Option<i64>,
    pub out_of_place: Measurement,
    pub in_place: Measurement,
}

/// One `#  Rank ...` device line.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TestDevice {
    pub line: u32,
    pub rank: u32,
    pub group: Option<u32>,
    /// Absent in the oldest layout (`#   Rank  0 on HOST device 0 ...`).
    pub pid: Option<u64>,
    pub host: String,
    pub device: u32,
    /// Bus id as printed without brackets: `0x84` (old) or `0000:1b:00` (2.17).
    pub bus: String,
    pub name: String,
}

/// The columns announced by the header line.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Layout {
    pub has_redop: bool,
    pub has_root: bool,
    /// True for the legacy `error` check column, false for `#wrong`.
    pub legacy_error_column: bool,
    /// False when no header was seen and the layout was guessed from the row.
    pub from_header: bool,
    /// Column of the out-of-place and in-place `time`, counting `size` as column 0 (taken from
    /// the header, so extra columns a newer nccl-tests may print are skipped).
    pub out_time_col: u8,
    pub in_time_col: u8,
}

impl Layout {
    fn new(has_redop: bool, has_root: bool, legacy_error_column: bool, from_header: bool) -> Self {
        let out = 3 + u8::from(has_redop) + u8::from(has_root);
        Layout {
            has_redop,
            has_root,
            legacy_error_column,
            from_header,
            out_time_col: out,
            in_time_col: out + 4,
        }
    }

    /// From the header's tokens (after `#`): `size count type [redop] [root] time algbw busbw
    /// #wrong time ...`; the oldest nccl-tests print `bytes N type op time algbw busbw res ...`.
    fn from_header(toks: &[&str]) -> Self {
        let mut l = Layout::new(
            toks.contains(&"redop") || toks.contains(&"op"),
            toks.contains(&"root"),
            toks.contains(&"error") || toks.contains(&"res"),
            true,
        );
        let times: Vec<usize> = toks
            .iter()
            .enumerate()
            .filter(|(i, t)| {
                **t == "time" && toks.get(i + 1) == Some(&"algbw") && toks.get(i + 2) == Some(&"busbw")
            })
            .map(|(i, _)| i)
            .collect();
        if let Some(&o) = times.first() {
            l.out_time_col = u8::try_from(o).unwrap_or(l.out_time_col);
            l.in_time_col =
                times.get(1).and_then(|&i| u8::try_from(i).ok()).unwrap_or(l.out_time_col.saturating_add(4));
        }
        l
    }
}

/// Busbw plateau, knee sizes and the comparison with a peak; see [`analyze_curve`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CurveAnalysis {
    /// The latency-bandwidth fit of out-of-place times, if one could be made.
    pub fit: Option<LatencyBandwidthFit>,
    /// Why there is no fit.
    pub fit_error: Option<FitError>,
    /// Plateau busbw in GB/s: the median out-of-place busbw of the (up to) 3 largest sizes
    /// that are ≥ 1/8 of the largest size.
    pub plateau_busbw_gbps: f64,
    /// Highest out-of-place busbw of any row, and its size.
    pub max_busbw_gbps: f64,
    pub max_busbw_size_bytes: u64,
    /// Smallest measured size whose busbw is ≥ 50% / 80% of the plateau (no interpolation).
    pub size_at_50pct_plateau_bytes: Option<u64>,
    pub size_at_80pct_plateau_bytes: Option<u64>,
    /// The peak compared against, if any: never below `max_busbw_gbps`.
    pub peak: Option<Peak>,
    /// A peak that was set aside because the test measured more than it (then `peak` is
    /// absent: unknown).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub peak_set_aside: Option<PeakSetAside>,
    /// `plateau / peak × 100`.
    pub plateau_pct_of_peak: Option<f64>,
    /// Small-message floor: the shortest time (best of out-of-place and in-place) among rows of
    /// 1 B to [`SMALL_MESSAGE_MAX_BYTES`], and that row's size; absent without such rows.
    pub floor_us: Option<f64>,
    pub floor_size_bytes: Option<u64>,
}

/// A link peak bandwidth in GB/s (busbw terms) and where it came from.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Peak {
    pub gbps: f64,
    /// `"user"` or a description of the assumed hardware figure.
    pub source: String,
    /// True when the user gave it (`--peak-gbps`), false for an assumed known figure.
    pub user_given: bool,
}

/// One test (one table) as found in a file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PerfTest {
    pub file: String,
    /// Order of the test in its file, from 0.
    pub index: u32,
    #[serde(with = "crate::model::nccl_tests_kind")]
    pub collective: Option<CollKind>,
    pub collective_source: CollectiveSource,
    pub nccl_tests_version: Option<String>,
    /// `nccl-library=22902` from the 2.17 banner.
    pub nccl_library: Option<String>,
    /// The benchmark suite when its banner says it: `nccl-tests` (`# nccl-tests version`) or
    /// `rccl-tests` (`rccl-tests: Version develop:40b1b17`, AMD's fork, read the same way).
    pub suite: Option<TestSuite>,
    /// The communication library's own banner in the output: `RCCL 2.27.7-HEAD:0d2c4fd`
    /// (`RCCL version : ...`), `NCCL 2.9.9+cuda11.2` (`NCCL version ...`).
    pub library_version: Option<String>,
    /// The network NCCL chose, when the file also holds NCCL_DEBUG lines (`Using network IB`,
    /// else the `via NET/<name>/..` connections).
    pub network: Option<String>,
    /// `NCCL_*` / `RCCL_*` variables those lines report as set by the environment.
    pub env: BTreeMap<String, String>,
    /// The `# nThread ...` line, as printed.
    pub settings: Option<String>,
    pub devices: Vec<TestDevice>,
    /// Ranks in the run: max device rank + 1, else inferred from busbw/algbw.
    pub n_ranks: Option<u32>,
    /// `"device lines"` or `"busbw/algbw ratio"`.
    pub n_ranks_source: Option<String>,
    /// Distinct hosts of the device lines, sorted.
    pub hosts: Vec<String>,
    /// First line of the test (banner, header or first row).
    pub first_line: u32,
    pub header_line: Option<u32>,
    pub layout: Option<Layout>,
    pub rows: Vec<PerfRow>,
    pub avg_busbw_gbps: Option<f64>,
    pub avg_busbw_line: Option<u32>,
    pub out_of_bounds: Option<u64>,
    pub out_of_bounds_ok: Option<bool>,
    pub out_of_bounds_line: Option<u32>,
    /// Lines `...` inside or right after the table (rows left out by whoever copied it).
    pub elided_lines: u32,
    /// Rows of this table alternated with rows of another table in the same stream.
    pub interleaved: bool,
    /// nccl-tests' own failure lines (`Test NCCL failure all_reduce.cu:44 'unhandled cuda
    /// error'`, `Test failure common.cu:377`), at most 8.
    pub failures: Vec<EvidenceLine>,
    /// Nodes spanned, the GPUs' link and the network, as far as the output tells
    /// ([`Topology`]).
    #[serde(default)]
    pub topology: Topology,
    pub analysis: Option<CurveAnalysis>,
}

impl PerfTest {
    /// Its collective as nccl-tests names it (`alltoall`, `sendrecv`), or `unknown collective`.
    pub fn collective_name(&self) -> &'static str {
        self.collective.and_then(CollKind::nccl_tests_name).unwrap_or("unknown collective")
    }
}

/// Everything read from nccl-tests outputs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TestsReport {
    pub version: u32,
    pub files: Vec<String>,
    pub tests: Vec<PerfTest>,
    pub findings: Vec<Finding>,
    pub diagnostics: Vec<Diagnostic>,
}

impl TestsReport {
    /// The fitted model for a collective: from the test of that collective with the most rows
    /// that has a fit (first in file order on ties). For the join with trace collectives.
    pub fn model(&self, c: CollKind) -> Option<&LatencyBandwidthFit> {
        let mut best: Option<(&PerfTest, &LatencyBandwidthFit)> = None;
        for t in self.tests.iter().filter(|t| t.collective == Some(c)) {
            if let Some(f) = t.analysis.as_ref().and_then(|a| a.fit.as_ref()) {
                if best.is_none_or(|(b, _)| t.rows.len() > b.rows.len()) {
                    best = Some((t, f));
                }
            }
        }
        best.map(|(_, f)| f)
    }
}

impl PerfTest {
    /// Measured out-of-place busbw at `bytes`, interpolated linearly in log(size) between the
    /// neighbouring rows (clamped to the first/last row). `None` without rows.
    pub fn measured_busbw_at(&self, bytes: f64) -> Option<f64> {
        let mut pts: Vec<(f64, f64)> = self
            .rows
            .iter()
            .filter(|r| r.size_bytes > 0)
            .map(|r| (r.size_bytes as f64, r.out_of_place.busbw_gbps))
            .collect();
        pts.sort_by(|a, b| a.0.total_cmp(&b.0));
        let first = *pts.first()?;
        let last = *pts.last()?;
        if bytes <= first.0 {
            return Some(first.1);
        }
        if bytes >= last.0 {
            return Some(last.1);
        }
        for w in pts.windows(2) {
            if let [a, b] = w {
                if bytes >= a.0 && bytes <= b.0 && b.0 > a.0 {
                    let u = (bytes.ln() - a.0.ln()) / (b.0.ln() - a.0.ln());
                    return Some(a.1 + u * (b.1 - a.1));
                }
            }
        }
        Some(last.1)
    }
}

/// Parse nccl-tests outputs and analyse them; `peak_gbps` is the user's link peak in GB/s.
pub fn analyze_tests(inputs: &[Input<'_>], peak_gbps: Option<f64>) -> TestsReport {
    let files = inputs
        .iter()
        .map(|inp| {
            let (tests, diagnostics) = parse_tests_file(inp.name, inp.bytes);
            TestsFile { name: inp.name.to_string(), tests, diagnostics }
        })
        .collect();
    tests_report(files, peak_gbps)
}

/// [`analyze_tests`] for files already read ([`TestsReader`]: a shell that streams a file
/// feeds it in chunks), in the order given.
pub fn tests_report(files: Vec<TestsFile>, peak_gbps: Option<f64>) -> TestsReport {
    let mut names = Vec::with_capacity(files.len());
    let mut tests = Vec::new();
    let mut diagnostics = Vec::new();
    for mut f in files {
        names.push(f.name);
        tests.append(&mut f.tests);
        diagnostics.append(&mut f.diagnostics);
    }
    let user_peak = peak_gbps.filter(|p| p.is_finite() && *p > 0.0).map(|gbps| Peak {
        gbps,
        source: "user".to_string(),
        user_given: true,
    });
    for t in &mut tests {
        if !t.rows.is_empty() {
            let peak = user_peak.clone().or_else(|| topology::assumed_peak(t));
            t.analysis = Some(analyze_curve(t, peak));
        }
    }
    let mut findings = tests_findings(&tests);
    sort_findings(&mut findings);
    TestsReport { version: REPORT_VERSION, files: names, tests, findings, diagnostics }
}
