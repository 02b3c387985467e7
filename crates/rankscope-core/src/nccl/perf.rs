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

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::fit::{fit_latency_bandwidth, FitError, LatencyBandwidthFit};
use super::text::{after_glued_prefix, finite, lines, strip_call_fragments};
use super::{sort_findings, Diagnostic, Evidence, Finding, Input, Severity, REPORT_VERSION};

/// A collective measured by nccl-tests.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Collective {
    AllReduce,
    AllGather,
    ReduceScatter,
    #[serde(rename = "alltoall")]
    AllToAll,
    #[serde(rename = "sendrecv")]
    SendRecv,
    Broadcast,
    Reduce,
    Gather,
    Scatter,
    Hypercube,
}

impl Collective {
    /// All collectives, in a fixed order.
    pub const ALL: [Collective; 10] = [
        Collective::AllReduce,
        Collective::AllGather,
        Collective::ReduceScatter,
        Collective::AllToAll,
        Collective::SendRecv,
        Collective::Broadcast,
        Collective::Reduce,
        Collective::Gather,
        Collective::Scatter,
        Collective::Hypercube,
    ];

    /// The nccl-tests name without `_perf` (`all_reduce`, `alltoall`, ...).
    pub fn name(self) -> &'static str {
        match self {
            Collective::AllReduce => "all_reduce",
            Collective::AllGather => "all_gather",
            Collective::ReduceScatter => "reduce_scatter",
            Collective::AllToAll => "alltoall",
            Collective::SendRecv => "sendrecv",
            Collective::Broadcast => "broadcast",
            Collective::Reduce => "reduce",
            Collective::Gather => "gather",
            Collective::Scatter => "scatter",
            Collective::Hypercube => "hypercube",
        }
    }

    /// From a binary or test name: `all_reduce_perf`, `./build/all_gather_perf`, `alltoall`,
    /// `sendrecv_perf_mpi`.
    pub fn from_name(s: &str) -> Option<Collective> {
        let base = s.rsplit('/').next().unwrap_or(s);
        let base = base.strip_suffix("_mpi").unwrap_or(base);
        let base = base.strip_suffix("_perf").unwrap_or(base);
        Collective::ALL.into_iter().find(|c| c.name() == base)
    }

    /// nccl-tests' bus bandwidth factor for `n` ranks: busbw = algbw × factor.
    ///
    /// As nccl-tests defines it (its `doc/PERFORMANCE.md` and the `getBw` function of each test):
    /// AllReduce `2(n−1)/n` (a ring moves each byte twice, minus the local share);
    /// AllGather, ReduceScatter, AllToAll, Gather, Scatter, Hypercube `(n−1)/n`;
    /// Broadcast, Reduce, SendRecv `1`. busbw is the figure comparable to a link's peak
    /// bandwidth, whatever the rank count. With `n = 1`, factors `(n−1)/n` are 0: a 1-rank
    /// run reports busbw 0 because nothing crosses a link.
    pub fn busbw_factor(self, n: u32) -> f64 {
        match self.kind() {
            Some(k) => k.busbw_factor(i64::from(n)),
            // Hypercube (nccl-tests only): an all_gather pattern.
            None => crate::model::CollKind::AllGather.busbw_factor(i64::from(n)),
        }
    }

    /// The trace-side kind of this test's collective (none for `hypercube`, a test pattern).
    pub fn kind(self) -> Option<crate::model::CollKind> {
        use crate::model::CollKind as K;
        Some(match self {
            Collective::AllReduce => K::AllReduce,
            Collective::AllGather => K::AllGather,
            Collective::ReduceScatter => K::ReduceScatter,
            Collective::AllToAll => K::AllToAll,
            Collective::SendRecv => K::SendRecv,
            Collective::Broadcast => K::Broadcast,
            Collective::Reduce => K::Reduce,
            Collective::Gather => K::Gather,
            Collective::Scatter => K::Scatter,
            Collective::Hypercube => return None,
        })
    }
}

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
    /// The peak compared against, if any.
    pub peak: Option<Peak>,
    /// `plateau / peak × 100`.
    pub plateau_pct_of_peak: Option<f64>,
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
    pub collective: Option<Collective>,
    pub collective_source: CollectiveSource,
    pub nccl_tests_version: Option<String>,
    /// `nccl-library=22902` from the 2.17 banner.
    pub nccl_library: Option<String>,
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
    pub failures: Vec<Evidence>,
    pub analysis: Option<CurveAnalysis>,
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
    pub fn model(&self, c: Collective) -> Option<&LatencyBandwidthFit> {
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

/// True when `line` looks like nccl-tests output (used by [`super::sniff`]).
pub(crate) fn is_tests_marker(line: &str) -> bool {
    let line = strip_call_fragments(line);
    let Some(h) = line.find('#').map(|i| &line[i + 1..]) else {
        return false;
    };
    let h = h.trim_start();
    h.starts_with("nccl-tests version")
        || h.starts_with("Collective test starting")
        || h.starts_with("nThread ")
        || h.starts_with("Avg bus bandwidth")
        || is_header_tokens(&h.split_whitespace().collect::<Vec<_>>())
}

fn is_header_tokens(toks: &[&str]) -> bool {
    matches!(toks.first(), Some(&"size") | Some(&"bytes"))
        && toks.contains(&"type")
        && toks.contains(&"time")
        && toks.contains(&"busbw")
}

/// Parse nccl-tests outputs and analyse them; `peak_gbps` is the user's link peak in GB/s.
pub fn analyze_tests(inputs: &[Input<'_>], peak_gbps: Option<f64>) -> TestsReport {
    let mut tests = Vec::new();
    let mut diagnostics = Vec::new();
    for inp in inputs {
        let (mut t, mut d) = parse_tests_file(inp.name, inp.bytes);
        tests.append(&mut t);
        diagnostics.append(&mut d);
    }
    let user_peak = peak_gbps.filter(|p| p.is_finite() && *p > 0.0).map(|gbps| Peak {
        gbps,
        source: "user".to_string(),
        user_given: true,
    });
    for t in &mut tests {
        if !t.rows.is_empty() {
            let peak = user_peak.clone().or_else(|| known_peak(t));
            t.analysis = Some(analyze_curve(t, peak));
        }
    }
    let mut findings = tests_findings(&tests);
    sort_findings(&mut findings);
    TestsReport {
        version: REPORT_VERSION,
        files: inputs.iter().map(|i| i.name.to_string()).collect(),
        tests,
        findings,
        diagnostics,
    }
}

/// Most tables receiving rows at once (interleaved output of that many processes is told apart;
/// the oldest is closed when another opens).
const MAX_OPEN_TABLES: usize = 16;

/// Per-run context built from banners before a table starts.
#[derive(Debug, Default, Clone)]
struct Ctx {
    version: Option<String>,
    library: Option<String>,
    collective: Option<(Collective, CollectiveSource)>,
    settings: Option<String>,
    devices: Vec<TestDevice>,
    first_line: u32,
    /// A table was opened in this context.
    has_table: bool,
    /// Something worth reporting was seen (banner, settings, devices).
    has_banner: bool,
    /// Failure lines seen before any table of this context.
    failures: Vec<Evidence>,
}

struct Parser<'a> {
    file: &'a str,
    ctx: Ctx,
    /// Tables in file order; `open` indexes the ones still receiving rows.
    tables: Vec<PerfTest>,
    open: Vec<usize>,
    last_table: Option<usize>,
    diagnostics: Vec<Diagnostic>,
}

/// Parse one file into its tests (file order) and diagnostics.
pub fn parse_tests_file(file: &str, bytes: &[u8]) -> (Vec<PerfTest>, Vec<Diagnostic>) {
    let mut p = Parser {
        file,
        ctx: Ctx::default(),
        tables: Vec::new(),
        open: Vec::new(),
        last_table: None,
        diagnostics: Vec::new(),
    };
    for (n, raw) in lines(bytes) {
        let line = strip_call_fragments(&raw);
        p.line(n, &line);
    }
    p.finish_ctx();
    let Parser { mut tables, mut diagnostics, .. } = p;
    for (i, t) in tables.iter_mut().enumerate() {
        t.index = u32::try_from(i).unwrap_or(u32::MAX);
        finalize(t);
        if t.interleaved {
            diagnostics.push(Diagnostic {
                severity: Severity::Warning,
                kind: "tests.interleaved-tables".into(),
                message: format!(
                    "test {} ({}): its rows alternate with another table's; rows were assigned by increasing size",
                    t.index,
                    t.collective.map_or("unknown collective", |c| c.name())
                ),
                file: file.to_string(),
                line: t.rows.first().map(|r| r.line),
            });
        }
    }
    (tables, diagnostics)
}

impl Parser<'_> {
    fn line(&mut self, n: u32, line: &str) {
        if let Some(hash) = line.find('#') {
            let body = &line[hash + 1..];
            if self.comment(n, line, body.trim()) {
                return;
            }
        }
        if let Some(row) = parse_row(n, line, self.current_layout()) {
            self.row(row);
            return;
        }
        let t = line.trim();
        if t == "..." || t == "…" || after_glued_prefix(t).trim() == "..." {
            if let Some(i) = self.last_table.filter(|i| self.open.contains(i) || self.open.is_empty()) {
                if let Some(tb) = self.tables.get_mut(i) {
                    tb.elided_lines += 1;
                }
            }
            return;
        }
        if t.contains("Test NCCL failure") || t.contains("Test CUDA failure") || t.contains("Test failure") {
            let ev = Evidence::new(self.file, n, t);
            let target = self.last_table.filter(|_| self.ctx.has_table).and_then(|i| self.tables.get_mut(i));
            match target {
                Some(tb) if tb.failures.len() < 8 => tb.failures.push(ev),
                Some(_) => {}
                None if self.ctx.failures.len() < 8 => {
                    self.touch(n);
                    self.ctx.failures.push(ev);
                }
                None => {}
            }
            return;
        }
        // A command line naming the benchmark binary.
        if let Some(c) = line
            .split(|c: char| c.is_whitespace() || c == '\'' || c == '"')
            .filter(|w| w.contains("_perf"))
            .find_map(Collective::from_name)
        {
            if self.ctx.has_table {
                self.new_ctx(n);
            }
            if self.ctx.collective.is_none_or(|(_, s)| s != CollectiveSource::Banner) {
                self.ctx.collective = Some((c, CollectiveSource::CommandLine));
            }
        }
    }

    /// Handle a `#` line; returns true when it was recognised.
    fn comment(&mut self, n: u32, line: &str, body: &str) -> bool {
        let toks: Vec<&str> = body.split_whitespace().collect();
        if let Some(rest) = body.strip_prefix("nccl-tests version") {
            if self.ctx.has_table {
                self.new_ctx(n);
            }
            self.touch(n);
            let mut it = rest.split_whitespace();
            self.ctx.version = it.next().map(str::to_string);
            for w in it {
                if let Some(v) = w.strip_prefix("nccl-library=") {
                    self.ctx.library = Some(v.to_string());
                }
            }
            return true;
        }
        if let Some(rest) = body.strip_prefix("Collective test starting:") {
            if self.ctx.has_table {
                self.new_ctx(n);
            }
            self.touch(n);
            if let Some(c) = Collective::from_name(rest.trim()) {
                self.ctx.collective = Some((c, CollectiveSource::Banner));
            }
            return true;
        }
        if body.starts_with("Collective test concluded") {
            self.close_all();
            return true;
        }
        if body.starts_with("nThread ") {
            // A repeated banner before any table is another process printing the same run
            // (interleaved output), not a new run.
            if self.ctx.has_table {
                self.new_ctx(n);
            }
            self.touch(n);
            self.ctx.settings = Some(body.to_string());
            return true;
        }
        if toks.first() == Some(&"Rank") {
            if let Some(d) = parse_device(n, &toks) {
                if self.ctx.has_table {
                    self.new_ctx(n);
                }
                self.touch(n);
                self.ctx.devices.push(d);
                return true;
            }
        }
        if is_header_tokens(&toks) {
            self.open_table(n, Some(Layout::from_header(&toks)));
            return true;
        }
        if let Some(rest) = body.strip_prefix("Out of bounds values") {
            let rest = rest.trim_start_matches([' ', ':']);
            let mut it = rest.split_whitespace();
            let count = it.next().and_then(|v| v.parse::<u64>().ok());
            let ok = it.next().map(|w| w == "OK");
            if let Some(i) = self.oldest_open(|t| t.out_of_bounds_line.is_none()) {
                if let Some(t) = self.tables.get_mut(i) {
                    t.out_of_bounds = count;
                    t.out_of_bounds_ok = ok;
                    t.out_of_bounds_line = Some(n);
                }
            }
            return true;
        }
        if let Some(rest) = body.strip_prefix("Avg bus bandwidth") {
            let v = rest.trim_start_matches([' ', ':']).split_whitespace().next().and_then(finite);
            if let Some(i) = self.oldest_open(|t| t.avg_busbw_line.is_none()) {
                if let Some(t) = self.tables.get_mut(i) {
                    t.avg_busbw_gbps = v;
                    t.avg_busbw_line = Some(n);
                }
                self.open.retain(|&j| j != i);
            } else {
                self.diagnostics.push(Diagnostic {
                    severity: Severity::Info,
                    kind: "tests.orphan-average".into(),
                    message: "an `Avg bus bandwidth` line with no table before it".into(),
                    file: self.file.to_string(),
                    line: Some(n),
                });
            }
            return true;
        }
        let _ = line;
        // `#`, `# Using devices`, the units line, `# Reducing maxBytes ...`: nothing to keep.
        body.is_empty()
            || body.starts_with("Using devices")
            || body.starts_with("(B)")
            || body.starts_with("out-of-place")
            || body.starts_with("Reducing")
    }

    fn touch(&mut self, n: u32) {
        if !self.ctx.has_banner {
            self.ctx.has_banner = true;
            self.ctx.first_line = n;
        }
    }

    fn current_layout(&self) -> Option<Layout> {
        self.open.last().or(self.last_table.as_ref()).and_then(|&i| self.tables.get(i)).and_then(|t| t.layout)
    }

    fn oldest_open(&self, pred: impl Fn(&PerfTest) -> bool) -> Option<usize> {
        // Prefer the oldest open table with rows; else any open table.
        let with_rows = self
            .open
            .iter()
            .copied()
            .find(|&i| self.tables.get(i).is_some_and(|t| !t.rows.is_empty() && pred(t)));
        with_rows.or_else(|| self.open.iter().copied().find(|&i| self.tables.get(i).is_some_and(&pred)))
    }

    fn open_table(&mut self, n: u32, layout: Option<Layout>) -> usize {
        let c = &self.ctx;
        let t = PerfTest {
            file: self.file.to_string(),
            index: 0,
            collective: c.collective.map(|x| x.0),
            collective_source: c.collective.map_or(CollectiveSource::Unknown, |x| x.1),
            nccl_tests_version: c.version.clone(),
            nccl_library: c.library.clone(),
            settings: c.settings.clone(),
            devices: c.devices.clone(),
            n_ranks: None,
            n_ranks_source: None,
            hosts: Vec::new(),
            first_line: if c.has_banner { c.first_line } else { n },
            header_line: layout.filter(|l| l.from_header).map(|_| n),
            layout,
            rows: Vec::new(),
            avg_busbw_gbps: None,
            avg_busbw_line: None,
            out_of_bounds: None,
            out_of_bounds_ok: None,
            out_of_bounds_line: None,
            elided_lines: 0,
            interleaved: false,
            failures: std::mem::take(&mut self.ctx.failures),
            analysis: None,
        };
        self.tables.push(t);
        let i = self.tables.len() - 1;
        // A row looks for its table among the open ones: keep that set small, so output whose
        // rows restart again and again (a rows-only file, a log of many runs) stays linear.
        if self.open.len() >= MAX_OPEN_TABLES {
            self.open.remove(0);
        }
        self.open.push(i);
        self.last_table = Some(i);
        self.ctx.has_table = true;
        i
    }

    fn row(&mut self, row: PerfRow) {
        let size = row.size_bytes;
        // Best fit: the open table whose last size is the largest one below `size`.
        let mut best: Option<(usize, Option<u64>)> = None;
        for &i in &self.open {
            let last = self.tables.get(i).and_then(|t| t.rows.last()).map(|r| r.size_bytes);
            let fits = last.is_none_or(|l| l < size);
            if fits && best.is_none_or(|(_, b)| last > b) {
                best = Some((i, last));
            }
        }
        let target = match best {
            Some((i, _)) => Some(i),
            None => self.open.iter().copied().find(|&i| {
                self.tables.get(i).and_then(|t| t.rows.last()).is_some_and(|r| r.size_bytes == size)
            }),
        };
        let target = match target {
            Some(i) => i,
            None => {
                // No header opened a table (or sizes restarted): an implicit table.
                if !self.open.is_empty() {
                    self.diagnostics.push(Diagnostic {
                        severity: Severity::Info,
                        kind: "tests.rows-restarted".into(),
                        message: "result rows restarted at a smaller size without a header: a new table was started".into(),
                        file: self.file.to_string(),
                        line: Some(row.line),
                    });
                }
                let layout = self.current_layout().map(|mut l| {
                    l.from_header = false;
                    l
                });
                self.open_table(row.line, layout.or(Some(guess_layout(&row))))
            }
        };
        if let Some(prev) = self.last_table {
            if prev != target && self.open.contains(&prev) {
                for i in [prev, target] {
                    if let Some(t) = self.tables.get_mut(i) {
                        t.interleaved = true;
                    }
                }
            }
        }
        if let Some(t) = self.tables.get_mut(target) {
            t.rows.push(row);
        }
        self.last_table = Some(target);
    }

    fn close_all(&mut self) {
        self.open.clear();
    }

    /// Start a new run context: close open tables, keep a failed run (banner, no table).
    fn new_ctx(&mut self, n: u32) {
        self.finish_ctx();
        self.ctx = Ctx { first_line: n, ..Ctx::default() };
    }

    fn finish_ctx(&mut self) {
        self.close_all();
        if !self.ctx.has_table
            && self.ctx.has_banner
            && (!self.ctx.devices.is_empty()
                || self.ctx.collective.is_some()
                || self.ctx.settings.is_some()
                || !self.ctx.failures.is_empty())
        {
            let n = self.ctx.first_line;
            self.open_table(n, None);
            self.close_all();
        }
    }
}

fn guess_layout(row: &PerfRow) -> Layout {
    Layout::new(
        row.redop.is_some(),
        row.root.is_some(),
        matches!(row.out_of_place.check, Check::Error(_)),
        false,
    )
}

/// `Rank 0 [Group 0] Pid 1465 on HOST device 0 [0x00] NAME...`
fn parse_device(n: u32, toks: &[&str]) -> Option<TestDevice> {
    let rank = toks.get(1)?.parse().ok()?;
    let mut i = 2;
    let mut group = None;
    if toks.get(i) == Some(&"Group") {
        group = toks.get(i + 1).and_then(|v| v.parse().ok());
        i += 2;
    }
    let mut pid = None;
    if toks.get(i) == Some(&"Pid") {
        pid = Some(toks.get(i + 1)?.parse().ok()?);
        i += 2;
    }
    if toks.get(i) != Some(&"on") {
        return None;
    }
    let host = toks.get(i + 1)?.to_string();
    if toks.get(i + 2) != Some(&"device") {
        return None;
    }
    let device = toks.get(i + 3)?.parse().ok()?;
    let bus = toks.get(i + 4).map(|b| b.trim_start_matches('[').trim_end_matches(']').to_string())?;
    let name = toks.get(i + 5..).map(|r| r.join(" ")).unwrap_or_default();
    Some(TestDevice { line: n, rank, group, pid, host, device, bus, name })
}

fn is_dtype(s: &str) -> bool {
    s.chars().next().is_some_and(|c| c.is_ascii_alphabetic())
        && s.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
        && s != "N" // not the first half of `N/A`
}

fn parse_check(s: &str, legacy: Option<bool>) -> Option<Check> {
    if s == "N/A" {
        return Some(Check::NotAvailable);
    }
    match legacy {
        Some(false) => s.parse::<u64>().ok().map(Check::Wrong),
        Some(true) => finite(s).map(Check::Error),
        None => s.parse::<u64>().ok().map(Check::Wrong).or_else(|| finite(s).map(Check::Error)),
    }
}

/// Find a result row in `line`: `size count type [redop] [root] time algbw busbw check time
/// algbw busbw check`, anywhere in the line.
fn parse_row(n: u32, line: &str, layout: Option<Layout>) -> Option<PerfRow> {
    let toks: Vec<&str> = line.split_whitespace().collect();
    if toks.len() < 11 {
        return None;
    }
    for i in 0..toks.len().saturating_sub(10) {
        let size_tok = toks.get(i).map(|t| after_glued_prefix(t))?;
        let Ok(size) = size_tok.parse::<u64>() else {
            continue;
        };
        let Some(Ok(count)) = toks.get(i + 1).map(|t| t.parse::<u64>()) else {
            continue;
        };
        let Some(dtype) = toks.get(i + 2).filter(|t| is_dtype(t)) else {
            continue;
        };
        let rest = toks.get(i + 3..).unwrap_or(&[]);
        if let Some(r) = parse_row_rest(rest, layout) {
            let (redop, root, out_of_place, in_place) = r;
            return Some(PerfRow {
                line: n,
                size_bytes: size,
                count,
                dtype: dtype.to_string(),
                redop,
                root,
                out_of_place,
                in_place,
            });
        }
    }
    None
}

type RowRest = (Option<String>, Option<i64>, Measurement, Measurement);

fn parse_row_rest(rest: &[&str], layout: Option<Layout>) -> Option<RowRest> {
    let mut j = 0;
    let mut redop = None;
    let first_alpha = rest.first().is_some_and(|t| is_dtype(t));
    let want_redop = layout.map_or(first_alpha, |l| l.has_redop);
    if want_redop {
        redop = Some(rest.first().filter(|t| is_dtype(t))?.to_string());
        j += 1;
    }
    let remaining = rest.len().saturating_sub(j);
    let want_root = match layout {
        Some(l) => l.has_root,
        None => remaining >= 9 && rest.get(j).is_some_and(|t| t.parse::<i64>().is_ok()),
    };
    let mut root = None;
    if want_root {
        root = Some(rest.get(j)?.parse::<i64>().ok()?);
        j += 1;
    }
    let legacy = layout.map(|l| l.legacy_error_column);
    // Where the header put the time columns (relative to `rest`, which starts after `type`).
    let (out_at, in_at) = match layout {
        Some(l) if l.from_header && usize::from(l.out_time_col) >= 3 + j => {
            (usize::from(l.out_time_col) - 3, usize::from(l.in_time_col).saturating_sub(3))
        }
        _ => (j, j + 4),
    };
    let m = |k: usize| -> Option<Measurement> {
        Some(Measurement {
            time_us: finite(rest.get(k)?)?,
            algbw_gbps: finite(rest.get(k + 1)?)?,
            busbw_gbps: finite(rest.get(k + 2)?)?,
            check: parse_check(rest.get(k + 3)?, legacy)?,
        })
    };
    let out = m(out_at)?;
    let inp = m(in_at)?;
    Some((redop, root, out, inp))
}

/// Bytes per element of an nccl-tests type name.
fn dtype_size(t: &str) -> Option<u64> {
    Some(match t {
        "int8" | "uint8" | "char" | "f8e4m3" | "f8e5m2" | "fp8_e4m3" | "fp8_e5m2" => 1,
        "half" | "bfloat16" | "float16" | "bf16" | "fp16" => 2,
        "float" | "int32" | "uint32" | "int" | "float32" => 4,
        "double" | "int64" | "uint64" | "float64" => 8,
        _ => return None,
    })
}

/// Infer the collective from the columns when no banner or command line named it.
///
/// Rules (nccl-tests conventions): a root ≥ 0 means Broadcast (`redop none`) or Reduce; else
/// `size / (count × typesize)` is 1 for AllReduce and SendRecv and the rank count for
/// AllGather, ReduceScatter and AllToAll; `redop none` separates AllGather/AllToAll from
/// ReduceScatter; AllToAll and SendRecv print `N/A` for the in-place check; a busbw/algbw
/// ratio of 1 with a `sum` redop and size = count × typesize is SendRecv when the in-place
/// check is `N/A`, else AllReduce. Layouts without a redop column (nccl-tests 2.5) with
/// size > count × typesize are AllGather.
pub fn infer_collective(rows: &[PerfRow]) -> Option<Collective> {
    let r = rows.iter().rev().find(|r| r.count > 0)?;
    let ts = dtype_size(&r.dtype)?;
    let ratio = r.size_bytes as f64 / (r.count as f64 * ts as f64);
    let in_place_na = rows.iter().all(|r| r.in_place.check == Check::NotAvailable);
    let none = r.redop.as_deref().is_none_or(|o| o == "none");
    if r.root.is_some_and(|x| x >= 0) {
        return Some(if none { Collective::Broadcast } else { Collective::Reduce });
    }
    let per_rank = ratio > 1.5;
    Some(match (r.redop.is_some(), none, per_rank) {
        (false, _, true) => Collective::AllGather,
        (_, true, true) => {
            if in_place_na {
                Collective::AllToAll
            } else {
                Collective::AllGather
            }
        }
        (_, false, true) => Collective::ReduceScatter,
        (_, _, false) => {
            if in_place_na {
                Collective::SendRecv
            } else {
                Collective::AllReduce
            }
        }
    })
}

/// Rank count from busbw/algbw: invert the collective's factor on the row with the largest
/// algbw (small rows print 0.00 and say nothing).
fn infer_ranks(c: Collective, rows: &[PerfRow]) -> Option<u32> {
    let r = rows.iter().max_by(|a, b| a.out_of_place.algbw_gbps.total_cmp(&b.out_of_place.algbw_gbps))?;
    let (a, b) = (r.out_of_place.algbw_gbps, r.out_of_place.busbw_gbps);
    if a < 0.5 {
        return None;
    }
    let f = b / a;
    // The table prints bandwidths with two decimals: propagate ±0.005 on both to n and accept
    // the inference only while n is known to better than ±1.
    let f_err = f * (0.005 / a + 0.005 / b.max(0.005));
    let (n, dn_df) = match c {
        Collective::AllReduce => (2.0 / (2.0 - f), 2.0 / ((2.0 - f) * (2.0 - f))),
        Collective::AllGather
        | Collective::ReduceScatter
        | Collective::AllToAll
        | Collective::Gather
        | Collective::Scatter
        | Collective::Hypercube => (1.0 / (1.0 - f), 1.0 / ((1.0 - f) * (1.0 - f))),
        _ => return None,
    };
    let ok = n.is_finite() && (0.5..100_000.0).contains(&n) && (f_err * dn_df) < 1.0;
    ok.then(|| n.round() as u32)
}

fn finalize(t: &mut PerfTest) {
    if t.collective.is_none() {
        // nccl-tests names its source file in failures: `Test NCCL failure all_reduce.cu:44`.
        let from_failure = t.failures.iter().find_map(|f| {
            f.text
                .split_whitespace()
                .find_map(|w| w.split_once(".cu:").and_then(|(name, _)| Collective::from_name(name)))
        });
        if let Some(c) = infer_collective(&t.rows).or(from_failure) {
            t.collective = Some(c);
            t.collective_source = CollectiveSource::Inferred;
        }
    }
    let mut hosts: Vec<String> = t.devices.iter().map(|d| d.host.clone()).collect();
    hosts.sort();
    hosts.dedup();
    t.hosts = hosts;
    if let Some(max) = t.devices.iter().map(|d| d.rank).max() {
        t.n_ranks = Some(max.saturating_add(1));
        t.n_ranks_source = Some("device lines".into());
    } else if let Some(n) = t.collective.and_then(|c| infer_ranks(c, &t.rows)) {
        t.n_ranks = Some(n);
        t.n_ranks_source = Some("busbw/algbw ratio".into());
    }
}

/// Assumed per-GPU NVLink bandwidth (one direction, GB/s) for single-node runs on known GPUs.
///
/// Figures are the vendors' NVLink per-GPU totals divided by two (one direction): V100 SXM2
/// 300 → 150, A100 SXM 600 → 300, A800 400 → 200, H100/H200 SXM 900 → 450, H800 400 → 200,
/// B200 1800 → 900. Multi-node runs are bound by the network, which the output does not name:
/// give `--peak-gbps` for those. NVLink SHARP (NVLS) lets H100-class AllReduce busbw exceed
/// this figure; that is reported as > 100%, not as a problem.
fn known_peak(t: &PerfTest) -> Option<Peak> {
    if t.hosts.len() != 1 || t.devices.len() < 2 {
        return None;
    }
    let name = t.devices.first()?.name.to_ascii_uppercase();
    if t.devices.iter().any(|d| d.name.to_ascii_uppercase() != name) || name.contains("PCIE") {
        return None;
    }
    let (gbps, what) = if name.contains("GB200") || name.contains("B200") {
        (900.0, "B200 NVLink 5: 1800 GB/s per GPU, 900 one way")
    } else if name.contains("H800") {
        (200.0, "H800 NVLink: 400 GB/s per GPU, 200 one way")
    } else if name.contains("H100") || name.contains("H200") {
        (450.0, "H100/H200 SXM NVLink 4: 900 GB/s per GPU, 450 one way")
    } else if name.contains("A800") {
        (200.0, "A800 NVLink: 400 GB/s per GPU, 200 one way")
    } else if name.contains("A100") && name.contains("SXM") {
        (300.0, "A100 SXM NVLink 3: 600 GB/s per GPU, 300 one way")
    } else if name.contains("V100") && name.contains("SXM2") {
        (150.0, "V100 SXM2 NVLink 2: 300 GB/s per GPU, 150 one way")
    } else {
        return None;
    };
    Some(Peak { gbps, source: format!("assumed: {what} (single node)"), user_given: false })
}

/// Analyse one test's curve.
///
/// - **Plateau busbw**: the median out-of-place busbw of the (up to) 3 largest sizes, counting
///   only sizes ≥ 1/8 of the largest (so an elided table with rows 8 B, 16 B and 16 GiB uses
///   the 16 GiB row alone): the large-message bandwidth, robust to one noisy row, and not
///   inflated by a lucky mid-size row.
/// - **50% / 80% sizes**: the smallest measured size with busbw ≥ that share of the plateau
///   (no interpolation between rows; see the fit's `n½` for a model-based figure).
/// - **Fit**: [`fit_latency_bandwidth`] on `(size, out-of-place time)` of every row with size > 0.
pub fn analyze_curve(t: &PerfTest, peak: Option<Peak>) -> CurveAnalysis {
    let mut rows: Vec<&PerfRow> = t.rows.iter().collect();
    rows.sort_by_key(|r| r.size_bytes);
    let max_size = rows.last().map_or(0, |r| r.size_bytes);
    let mut top: Vec<f64> = rows
        .iter()
        .rev()
        .take(3)
        .filter(|r| r.size_bytes >= max_size / 8)
        .map(|r| r.out_of_place.busbw_gbps)
        .collect();
    top.sort_by(f64::total_cmp);
    let plateau = top.get(top.len() / 2).copied().unwrap_or(0.0);
    let (max_busbw, max_size) = rows
        .iter()
        .map(|r| (r.out_of_place.busbw_gbps, r.size_bytes))
        .fold((0.0_f64, 0_u64), |acc, x| if x.0 > acc.0 { x } else { acc });
    let at = |frac: f64| {
        (plateau > 0.0)
            .then(|| rows.iter().find(|r| r.out_of_place.busbw_gbps >= frac * plateau).map(|r| r.size_bytes))
            .flatten()
    };
    let factor = match (t.collective, t.n_ranks) {
        (Some(c), Some(n)) => Some(c.busbw_factor(n)),
        (Some(c @ (Collective::Broadcast | Collective::Reduce | Collective::SendRecv)), None) => {
            Some(c.busbw_factor(1))
        }
        _ => None,
    };
    let pts: Vec<(f64, f64)> = rows
        .iter()
        .filter(|r| r.size_bytes > 0)
        .map(|r| (r.size_bytes as f64, r.out_of_place.time_us))
        .collect();
    let (fit, fit_error) = match fit_latency_bandwidth(&pts, factor) {
        Ok(f) => (Some(f), None),
        Err(e) => (None, Some(e)),
    };
    let pct = peak.as_ref().map(|p| plateau / p.gbps * 100.0);
    CurveAnalysis {
        fit,
        fit_error,
        plateau_busbw_gbps: plateau,
        max_busbw_gbps: max_busbw,
        max_busbw_size_bytes: max_size,
        size_at_50pct_plateau_bytes: at(0.5),
        size_at_80pct_plateau_bytes: at(0.8),
        peak,
        plateau_pct_of_peak: pct,
    }
}

/// Below this share of the peak, large-message busbw points at the network or topology
/// (rule of thumb, see `docs/nccl.md`).
pub const PEAK_SHARE_THRESHOLD: f64 = 0.8;

/// Without a peak, a multi-host plateau below this busbw (GB/s) is slower than a 40 Gb/s link
/// and far below any RDMA fabric (100 Gb/s ≈ 12.5 GB/s): typical of a TCP fallback.
pub const LOW_MULTINODE_BUSBW_GBPS: f64 = 5.0;

fn test_label(t: &PerfTest) -> String {
    let c = t.collective.map_or("unknown collective", |c| c.name());
    let ranks = t.n_ranks.map(|n| format!(", {n} ranks")).unwrap_or_default();
    let hosts = if t.hosts.is_empty() { String::new() } else { format!(", {} host(s)", t.hosts.len()) };
    format!("{c} (test {} of {}{ranks}{hosts})", t.index, t.file)
}

fn row_evidence(t: &PerfTest, r: &PerfRow) -> Evidence {
    Evidence::new(
        &t.file,
        r.line,
        &format!(
            "size {} count {} {}: time {} us, algbw {} GB/s, busbw {} GB/s",
            r.size_bytes,
            r.count,
            r.dtype,
            r.out_of_place.time_us,
            r.out_of_place.algbw_gbps,
            r.out_of_place.busbw_gbps
        ),
    )
}

fn tests_findings(tests: &[PerfTest]) -> Vec<Finding> {
    let mut out = Vec::new();
    for t in tests {
        let label = test_label(t);
        if t.rows.is_empty() {
            let mut ev: Vec<Evidence> = t
                .devices
                .iter()
                .map(|d| {
                    Evidence::new(
                        &t.file,
                        d.line,
                        &format!("Rank {} on {} device {} {}", d.rank, d.host, d.device, d.name),
                    )
                })
                .chain(std::iter::once(Evidence::new(&t.file, t.first_line, "start of the test")))
                .collect();
            ev.extend(t.failures.iter().cloned());
            let why = t.failures.first().map(|f| format!(": {}", f.text)).unwrap_or_default();
            out.push(Finding::new(
                "tests.no-results",
                Severity::Error,
                format!("{label}: the run printed its banner and devices but no result rows: it failed or was cut off{why}"),
                "Look at the launcher's stderr and rerun with NCCL_DEBUG=INFO: a failed NCCL init (network, version mismatch) or a killed job ends the output here",
                ev,
            ));
            continue;
        }
        let mut ranks_seen: BTreeMap<u32, Vec<&TestDevice>> = BTreeMap::new();
        for d in &t.devices {
            ranks_seen.entry(d.rank).or_default().push(d);
        }
        let dup: Vec<&TestDevice> = ranks_seen.values().filter(|v| v.len() > 1).flatten().copied().collect();
        if !dup.is_empty() {
            out.push(Finding::new(
                "tests.duplicate-ranks",
                Severity::Error,
                format!("{label}: the same rank number is listed by several processes: each process ran its own communicator instead of joining one job"),
                "Build nccl-tests with MPI=1 and launch with mpirun/srun so that every process gets its own rank; check that every host runs the same MPI-enabled binary",
                dup.iter().map(|d| Evidence::new(&t.file, d.line, &format!("Rank {} Pid {} on {}", d.rank, d.pid.map_or("?".to_string(), |p| p.to_string()), d.host))).collect(),
            ));
        } else if t.n_ranks == Some(1) {
            out.push(Finding::new(
                "tests.single-rank",
                Severity::Info,
                format!("{label}: one rank only: busbw is 0 by definition and nothing crossed a link; this measures local copies, not the fabric"),
                "Run with one rank per GPU across the GPUs/nodes you want to measure (mpirun -np N, or -g N for GPUs in one process)",
                t.devices.iter().map(|d| Evidence::new(&t.file, d.line, &format!("Rank {} on {}", d.rank, d.host))).collect(),
            ));
        }
        let wrong: Vec<&PerfRow> = t
            .rows
            .iter()
            .filter(|r| {
                [r.out_of_place.check, r.in_place.check]
                    .iter()
                    .any(|c| matches!(c, Check::Wrong(w) if *w > 0))
            })
            .collect();
        if !wrong.is_empty() || t.out_of_bounds_ok == Some(false) {
            let mut ev: Vec<Evidence> = wrong.iter().map(|r| row_evidence(t, r)).collect();
            if let Some(l) = t.out_of_bounds_line.filter(|_| t.out_of_bounds_ok == Some(false)) {
                ev.push(Evidence::new(
                    &t.file,
                    l,
                    &format!("Out of bounds values : {}", t.out_of_bounds.unwrap_or(0)),
                ));
            }
            out.push(Finding::new(
                "tests.wrong-results",
                Severity::Error,
                format!("{label}: {} row(s) report wrong elements: data was corrupted in transit", wrong.len()),
                "Treat the hardware path as faulty until shown otherwise: rerun on subsets of nodes to isolate the bad GPU/NIC/link, check dmesg/Xid errors and NIC counters",
                ev,
            ));
        }
        if let Some(first) = t.failures.first() {
            out.push(Finding::new(
                "tests.failure",
                Severity::Error,
                format!("{label}: nccl-tests reported a failure after {} row(s): {}", t.rows.len(), first.text),
                "The run stopped early: read the failure (file:line of nccl-tests, and NCCL's message), rerun with NCCL_DEBUG=INFO to see which rank and transport failed",
                t.failures.clone(),
            ));
        }
        if let Some(a) = &t.analysis {
            let multi_host = t.hosts.len() > 1;
            if a.peak.is_none()
                && multi_host
                && t.n_ranks.is_none_or(|n| n > 1)
                && a.plateau_busbw_gbps > 0.0
                && a.plateau_busbw_gbps < LOW_MULTINODE_BUSBW_GBPS
            {
                let last: Vec<Evidence> = t
                    .rows
                    .iter()
                    .max_by_key(|r| r.size_bytes)
                    .map(|r| row_evidence(t, r))
                    .into_iter()
                    .collect();
                out.push(Finding::new(
                    "tests.low-multinode-busbw",
                    Severity::Warning,
                    format!(
                        "{label}: across {} hosts the busbw plateau is only {:.2} GB/s, below {LOW_MULTINODE_BUSBW_GBPS} GB/s: slower than a 40 Gb/s link and far below any RDMA fabric; typical of NCCL falling back to TCP sockets or of a broken RDMA path",
                        t.hosts.len(),
                        a.plateau_busbw_gbps
                    ),
                    "Run the same test with NCCL_DEBUG=INFO and read `Using network` and the `via NET/...` lines (`rankscope nccl`): NET/Socket means RDMA is not used; with NET/IB check GDRDMA, PFC/ECN for RoCE and the NIC speed. Give --peak-gbps to compare against your link instead",
                    last,
                ));
            }
            if let (Some(p), Some(pct)) = (&a.peak, a.plateau_pct_of_peak) {
                if pct < PEAK_SHARE_THRESHOLD * 100.0 && t.n_ranks.is_none_or(|n| n > 1) {
                    let big: Vec<&PerfRow> = {
                        let mut v: Vec<&PerfRow> = t.rows.iter().collect();
                        v.sort_by_key(|r| std::cmp::Reverse(r.size_bytes));
                        v.into_iter().take(3).collect()
                    };
                    out.push(Finding::new(
                        "tests.below-peak",
                        if p.user_given { Severity::Warning } else { Severity::Info },
                        format!(
                            "{label}: large-message busbw plateau {:.1} GB/s is {:.1}% of the {} peak {:.0} GB/s (below {:.0}%)",
                            a.plateau_busbw_gbps,
                            pct,
                            if p.user_given { "given" } else { "assumed" },
                            p.gbps,
                            PEAK_SHARE_THRESHOLD * 100.0
                        ),
                        "Busbw well below the link peak points at the network or topology: check that NCCL uses RDMA (NET/IB or the provider plugin, not NET/Socket) with GDRDMA, that every NIC is used (NCCL_DEBUG=INFO), PFC/ECN for RoCE, and the rail/topology layout",
                        big.iter().map(|r| row_evidence(t, r)).collect(),
                    ));
                }
            }
        }
    }
    out
}
