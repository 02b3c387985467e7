//! Cluster metrics beside the traces (issue 38 item 2, docs/cluster-metrics.md): GPU and NIC
//! counters from the cluster's monitoring, read by content, put per host × GPU and host × NIC
//! on Unix ns, joined with the job's ranks and steps.
//!
//! bytes → [`sniff`] (which format) → [`prom`] (Prometheus text exposition, one scrape or many
//! concatenated), [`dmon`] (`dcgmi dmon` tables), [`range`] (Prometheus `query_range` JSON and
//! CSV exports) → [`Read`] (samples as columns, each series' name and labels kept once) →
//! [`series::build`] ([`Series`] per entity and [`Signal`]; counters become rates) → [`crate::analyze::beside::places`] (each rank's host, GPU, clock offset and step windows from
//! the analysis) → [`join::join`] (per rank and NIC figures over the steps) → [`rules`] (the
//! findings that need both sources) → [`MetricsReport`].
//!
//! Only "this is not a metrics file" is an `Err` ([`ReadError`]: the file, the format, the byte
//! offset); a bad line, a NaN, a label too long are counted in [`Diagnostic`]s and skipped.

pub mod dmon;
pub mod join;
pub mod prom;
pub mod range;
pub mod render;
pub mod rules;
pub mod series;

use serde::{Deserialize, Serialize};

pub use series::{Entity, Series, Signal, ValueKind};

crate::named_enum! {
    /// The input formats, told apart by content ([`sniff`]).
    pub enum Format {
        /// Prometheus text exposition format (`curl host:9400/metrics` of dcgm-exporter, of
        /// node-exporter), one scrape or many concatenated.
        PromText => "prometheus_text",
        /// `dcgmi dmon -e ...` output: a `#Entity` header, a units line, rows `GPU 0 ...`.
        DcgmDmon => "dcgmi_dmon",
        /// Prometheus HTTP API `/api/v1/query_range` (or `/api/v1/query`) JSON.
        PromJson => "prometheus_json",
        /// A CSV export: a time column, then one column per series named by its selector
        /// (`name{label="v",...}`), or long rows `time,name,labels...,value`.
        PromCsv => "prometheus_csv",
    }
}

/// A series as the input names it: the metric name and its labels, sorted by name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SeriesKey {
    pub name: String,
    pub labels: Vec<(String, String)>,
}

/// One sample as read, borrowed from [`Read`].
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SampleRef<'a> {
    pub key: &'a SeriesKey,
    /// Unix ns, when the input says (else the scrape's time or the row's placement).
    pub ts_ns: Option<i64>,
    pub value: f64,
}

/// What a reader took from one file: the samples as columns (each series' name and labels kept
/// once, in [`Read::keys`]), the `# TYPE` it saw, and its diagnostics.
#[derive(Debug, Clone, Default)]
pub struct Read {
    pub keys: Vec<SeriesKey>,
    /// Per sample: its key's index in `keys`, its time, its value.
    pub key: Vec<u32>,
    pub ts_ns: Vec<Option<i64>>,
    pub value: Vec<f64>,
    /// `# TYPE name counter|gauge|...`, by metric name.
    pub types: Vec<(String, String)>,
    pub diagnostics: Vec<Diagnostic>,
}

impl Read {
    /// Samples read.
    pub fn len(&self) -> usize {
        self.value.len()
    }

    pub fn is_empty(&self) -> bool {
        self.value.is_empty()
    }

    /// Adds a series key; its index.
    pub(crate) fn add_key(&mut self, k: SeriesKey) -> u32 {
        self.keys.push(k);
        (self.keys.len() - 1) as u32
    }

    pub(crate) fn push(&mut self, key: u32, ts_ns: Option<i64>, value: f64) {
        self.key.push(key);
        self.ts_ns.push(ts_ns);
        self.value.push(value);
    }

    /// Every sample, in the order read.
    pub fn samples(&self) -> impl Iterator<Item = SampleRef<'_>> + '_ {
        (0..self.len()).filter_map(|i| {
            Some(SampleRef {
                key: self.keys.get(self.key[i] as usize)?,
                ts_ns: self.ts_ns[i],
                value: self.value[i],
            })
        })
    }
}

crate::named_enum! {
    /// What went wrong with part of an input (the input was still read).
    pub enum DiagKind {
        /// A line or value that does not parse; skipped.
        BadLine => "bad_line",
        /// NaN or ±Inf, or a number beyond what a metric can be; skipped.
        BadNumber => "bad_number",
        /// A timestamp beyond ±4·10^18 ns; the sample skipped.
        BadTime => "bad_time",
        /// A label value or line longer than [`Limits`] allow; the sample skipped.
        TooLong => "too_long",
        /// More series or samples than [`Limits`] allow; the rest skipped.
        TooMany => "too_many",
        /// Samples with no time (a scrape without timestamps, a dmon table not placed).
        NoTime => "no_time",
        /// A rank that could not be put on a host and GPU of the metrics, and why.
        Unmapped => "unmapped",
        /// The join could not be made as asked (no steps, no samples in the window).
        NoJoin => "no_join",
        /// Said for information.
        Note => "note",
    }
}

/// A counted problem with its first place.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Diagnostic {
    pub file: String,
    pub kind: DiagKind,
    pub count: u64,
    /// Byte offset of the first occurrence in the file, when it is a place in a file.
    pub first_offset: Option<u64>,
    pub detail: String,
}

/// Counts diagnostics by kind, keeping the first offset and detail.
#[derive(Debug, Default)]
pub(crate) struct Tally {
    file: String,
    out: Vec<Diagnostic>,
}

impl Tally {
    pub(crate) fn new(file: &str) -> Tally {
        Tally { file: file.to_string(), out: Vec::new() }
    }

    pub(crate) fn add(&mut self, kind: DiagKind, offset: Option<u64>, detail: impl FnOnce() -> String) {
        if let Some(d) = self.out.iter_mut().find(|d| d.kind == kind) {
            d.count += 1;
        } else {
            self.out.push(Diagnostic {
                file: self.file.clone(),
                kind,
                count: 1,
                first_offset: offset,
                detail: detail(),
            });
        }
    }

    pub(crate) fn finish(self) -> Vec<Diagnostic> {
        self.out
    }
}

/// Bounds that keep hostile input from costing more than its size: nothing is ever allocated by
/// what a label claims (a `gpu="1000000000"` is a number in a string, not a length).
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// Longest label value or metric name kept, bytes.
    pub label_bytes: usize,
    /// Most labels on one sample.
    pub labels: usize,
    /// Most samples read from one file.
    pub samples: usize,
}

impl Default for Limits {
    fn default() -> Limits {
        Limits { label_bytes: 4096, labels: 64, samples: 20_000_000 }
    }
}

/// Where a `dcgmi dmon` table sits in time and on which host: dmon prints neither (its options
/// are fields, entities, `-d` delay and `-c` count, docs/cluster-metrics.md), so the caller says.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct DmonPlace {
    pub host: Option<String>,
    /// Unix ns of the first block of rows.
    pub start_ns: Option<i64>,
    /// The `-d` delay between blocks, ns.
    pub delay_ns: Option<i64>,
}

/// How to read the files.
#[derive(Debug, Clone, Default)]
pub struct ReadOptions {
    pub limits: Limits,
    pub dmon: DmonPlace,
}

/// "This is not a metrics file": the file, the format it was read as, the byte offset.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{file}: not a cluster metrics file ({}) at byte {offset}: {message}", format.map_or("no known format", Format::as_str))]
pub struct ReadError {
    pub file: String,
    pub format: Option<Format>,
    pub offset: u64,
    pub message: String,
}

/// Which metrics format `head` (the first bytes of a file, 64 KiB are plenty) is, if any; what
/// the input layer can call beside its trace and NCCL sniffs. Content only, never the name.
pub fn sniff(head: &[u8]) -> Option<Format> {
    let text = String::from_utf8_lossy(head);
    let t = text.trim_start_matches('\u{feff}').trim_start();
    if t.starts_with('{') {
        // The HTTP API's envelope; a trace never has these keys.
        // (At a character boundary: the head is any bytes, decoded lossily.)
        let end = (0..=t.len().min(4096)).rev().find(|&i| t.is_char_boundary(i)).unwrap_or(0);
        let probe = &t[..end];
        return (probe.contains("\"status\"")
            && probe.contains("\"data\"")
            && probe.contains("\"resultType\""))
        .then_some(Format::PromJson);
    }
    let lines: Vec<&str> = t.lines().take(200).map(str::trim).filter(|l| !l.is_empty()).collect();
    let first = lines.first()?;
    if lines.iter().take(20).any(|l| dmon::is_header(l)) {
        return Some(Format::DcgmDmon);
    }
    if first.starts_with("# HELP ") || first.starts_with("# TYPE ") {
        return Some(Format::PromText);
    }
    if range::csv_header(first).is_some() {
        return Some(Format::PromCsv);
    }
    // Samples without HELP / TYPE (a scrape loop's file): most lines parse as samples.
    let samples = lines.iter().filter(|l| !l.starts_with('#') && prom::looks_like_sample(l)).count();
    let data = lines.iter().filter(|l| !l.starts_with('#')).count();
    (data > 0 && samples * 10 >= data * 8 && lines.iter().any(|l| l.contains('{')))
        .then_some(Format::PromText)
}

/// Reads one file's bytes as the format [`sniff`] finds.
pub fn read(file: &str, bytes: &[u8], opts: &ReadOptions) -> Result<(Format, Read), ReadError> {
    let head = &bytes[..bytes.len().min(64 << 10)];
    let Some(format) = sniff(head) else {
        return Err(ReadError {
            file: file.to_string(),
            format: None,
            offset: 0,
            message: "neither Prometheus text (`# HELP` / `# TYPE` / `name{labels} value`), nor a `dcgmi dmon` table (`#Entity ...`), nor a Prometheus query_range JSON or CSV export".into(),
        });
    };
    let r = match format {
        Format::PromText => prom::read(file, bytes, &opts.limits),
        Format::DcgmDmon => dmon::read(file, bytes, &opts.limits, &opts.dmon),
        Format::PromJson => range::read_json(file, bytes, &opts.limits),
        Format::PromCsv => range::read_csv(file, bytes, &opts.limits),
    }?;
    Ok((format, r))
}

/// Unix seconds (decimal text) to ns, exactly for up to 9 decimals; `None` beyond ±4·10^18 ns.
pub(crate) fn seconds_to_ns(text: &str) -> Option<i64> {
    scaled(text, 9)
}

/// Unix ms (decimal text) to ns.
pub(crate) fn millis_to_ns(text: &str) -> Option<i64> {
    scaled(text, 6)
}

/// Decimal text × 10^digits as i64, within ±4·10^18 (the core's bound on a time).
fn scaled(text: &str, digits: u32) -> Option<i64> {
    let t = text.trim();
    let (neg, t) = match t.strip_prefix('-') {
        Some(r) => (true, r),
        None => (false, t.strip_prefix('+').unwrap_or(t)),
    };
    let (int, frac) = t.split_once('.').unwrap_or((t, ""));
    if int.is_empty() && frac.is_empty() || int.len() > 19 {
        return None;
    }
    if !int.bytes().chain(frac.bytes()).all(|b| b.is_ascii_digit()) {
        return None;
    }
    let mut v: i128 = if int.is_empty() { 0 } else { int.parse().ok()? };
    for k in 0..digits as usize {
        let d = frac.as_bytes().get(k).map_or(0, |b| i128::from(b - b'0'));
        v = v * 10 + d;
    }
    let v = if neg { -v } else { v };
    (v.abs() <= 4_000_000_000_000_000_000).then_some(v as i64)
}

/// The schema name of the JSON report.
pub const SCHEMA: &str = "rankscope.metrics";
/// Its version; bumped on any change of meaning (docs/cluster-metrics.md, "JSON").
pub const SCHEMA_VERSION: u32 = 1;

/// One input file as read.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct FileSummary {
    pub file: String,
    pub format: Format,
    pub samples: u64,
    pub series: u64,
    pub hosts: Vec<String>,
    /// First and last sample time, Unix ns.
    pub first_ns: Option<i64>,
    pub last_ns: Option<i64>,
}

/// The whole answer: `rankscope metrics --json`.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct MetricsReport {
    pub schema: String,
    pub schema_version: u32,
    pub files: Vec<FileSummary>,
    /// Every series, summarized over the export (and over the job's steps when joined).
    pub series: Vec<series::SeriesSummary>,
    /// The join with the traces; absent without traces.
    pub join: Option<join::Joined>,
    /// Findings that need the metrics and the traces together (`rules`).
    pub findings: Vec<rules::MetricsFinding>,
    pub diagnostics: Vec<Diagnostic>,
}

/// Reads every file, forms the series, and joins them with the job when `places` are given.
/// Files that are not metrics are returned apart (the caller names them; the others still
/// count).
pub fn report(
    files: &[(impl AsRef<str>, impl AsRef<[u8]>)],
    opts: &ReadOptions,
    places: Option<&[join::RankPlace]>,
) -> (MetricsReport, Vec<ReadError>) {
    let mut errors = Vec::new();
    let mut summaries = Vec::new();
    let mut diagnostics = Vec::new();
    let mut all: Vec<Series> = Vec::new();
    let mut reads = Vec::new();
    for (name, bytes) in files {
        let name = name.as_ref();
        match read(name, bytes.as_ref(), opts) {
            Err(e) => errors.push(e),
            Ok(r) => reads.push((name, r)),
        }
    }
    let aliases = series::aliases(&reads.iter().map(|(_, (_, r))| r).collect::<Vec<_>>());
    for (name, (format, r)) in &reads {
        diagnostics.extend(r.diagnostics.iter().cloned());
        let (s, notes) = series::build(name, r, &aliases);
        diagnostics.extend(notes);
        let mut hosts: Vec<String> =
            s.iter().map(|x| x.entity.host.clone()).filter(|h| !h.is_empty()).collect();
        hosts.sort();
        hosts.dedup();
        summaries.push(FileSummary {
            file: (*name).to_string(),
            format: *format,
            samples: r.len() as u64,
            series: s.len() as u64,
            hosts,
            first_ns: s.iter().filter_map(|x| x.ts_ns.first().copied()).min(),
            last_ns: s.iter().filter_map(|x| x.ts_ns.last().copied()).max(),
        });
        all.extend(s);
    }
    all.sort_by(|a, b| (&a.entity, a.signal, &a.name).cmp(&(&b.entity, b.signal, &b.name)));
    let joined = places.map(|p| join::join(&all, p));
    if let Some(j) = &joined {
        diagnostics.extend(j.diagnostics.iter().cloned());
    }
    let findings = joined.as_ref().map(|j| rules::findings(&all, j)).unwrap_or_default();
    let series = all.iter().map(|s| series::summary(s, joined.as_ref())).collect();
    let rep = MetricsReport {
        schema: SCHEMA.to_string(),
        schema_version: SCHEMA_VERSION,
        files: summaries,
        series,
        join: joined,
        findings,
        diagnostics,
    };
    (rep, errors)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_are_exact_and_bounded() {
        assert_eq!(seconds_to_ns("1716400000.123456789"), Some(1_716_400_000_123_456_789));
        assert_eq!(seconds_to_ns("1716400000"), Some(1_716_400_000_000_000_000));
        assert_eq!(millis_to_ns("1716400000123"), Some(1_716_400_000_123_000_000));
        assert_eq!(seconds_to_ns("99999999999999999999"), None);
        assert_eq!(seconds_to_ns("1e9"), None);
        assert_eq!(seconds_to_ns(""), None);
    }

    #[test]
    fn a_json_head_is_probed_at_a_character_boundary() {
        // Found by the `job` fuzz target: a character across the probe's 4,096th byte, or an
        // invalid byte there (decoded as the 3-byte U+FFFD), panicked.
        for pad in 4090..4100 {
            let mut head = b"{".to_vec();
            head.extend(std::iter::repeat_n(b'a', pad));
            head.extend("é\"status\"".as_bytes());
            assert_eq!(sniff(&head), None);
            head.truncate(pad);
            head.extend([0xff, 0xfe, b'a']);
            assert_eq!(sniff(&head), None);
        }
        let mut env = br#"{"status":"success","data":{"resultType":"matrix""#.to_vec();
        env.extend("é".repeat(3000).as_bytes());
        assert_eq!(sniff(&env), Some(Format::PromJson));
    }

    #[test]
    fn formats_are_told_by_content() {
        assert_eq!(
            sniff(b"# HELP DCGM_FI_PROF_SM_ACTIVE x\n# TYPE DCGM_FI_PROF_SM_ACTIVE gauge\n"),
            Some(Format::PromText)
        );
        assert_eq!(sniff(b"#Entity   SMACT  TENSO\nID\nGPU 0  0.5 0.1\n"), Some(Format::DcgmDmon));
        assert_eq!(
            sniff(br#"{"status":"success","data":{"resultType":"matrix","result":[]}}"#),
            Some(Format::PromJson)
        );
        assert_eq!(sniff(b"{\"traceEvents\": []}"), None);
        assert_eq!(sniff(b"NCCL INFO Bootstrap : Using eth0\n"), None);
        assert_eq!(sniff(b"time,DCGM_FI_PROF_SM_ACTIVE{gpu=\"0\"}\n1,0.5\n"), Some(Format::PromCsv));
        assert_eq!(
            sniff(b"node_network_transmit_bytes_total{device=\"ib0\"} 12 1716400000000\n"),
            Some(Format::PromText)
        );
    }
}
