//! `rankscope nccl` (NCCL_DEBUG=INFO logs) and `rankscope nccl-tests` (`*_perf` output).
//!
//! Both read the files, hand the bytes to `rankscope_core::nccl`, and print either a readable
//! summary or the report as JSON (`--json`). Exit code: 0 when no finding has severity
//! `error`, 1 when one does or when no NCCL content was found, 2 on usage or I/O errors.

use std::fmt::Write as _;
use std::io::Read as _;
use std::path::{Path, PathBuf};

use anyhow::Context as _;
use rankscope_core::nccl::log::LogReport;
use rankscope_core::nccl::perf::{Check, PerfTest, TestsFile, TestsReader, TestsReport};
use rankscope_core::nccl::{self, Finding, Input, Severity};

#[derive(Debug, clap::Args)]
pub struct LogArgs {
    /// NCCL_DEBUG=INFO log files of one job (one file, or one per node/rank).
    #[arg(required = true, value_name = "LOG")]
    pub files: Vec<PathBuf>,
    /// Print the full report as JSON.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, clap::Args)]
pub struct TestsArgs {
    /// nccl-tests output files (`all_reduce_perf` etc.; logs with a perf table work too).
    #[arg(required = true, value_name = "FILE")]
    pub files: Vec<PathBuf>,
    /// Print the full report as JSON.
    #[arg(long)]
    pub json: bool,
    /// Link peak in GB/s (busbw terms) to compare the plateau against, e.g. 50 for a 400 Gb/s NIC.
    #[arg(long, value_name = "GBPS")]
    pub peak_gbps: Option<f64>,
    /// Do not print the result rows, only the summary per test.
    #[arg(long)]
    pub no_rows: bool,
}

fn read_all(files: &[PathBuf]) -> anyhow::Result<Vec<(String, Vec<u8>)>> {
    files
        .iter()
        .map(|p| {
            let bytes = std::fs::read(p).with_context(|| format!("reading {}", p.display()))?;
            Ok((p.display().to_string(), bytes))
        })
        .collect()
}

/// One nccl-tests output read in chunks, line by line ([`TestsReader`]): the file is never held
/// whole (a 1 GiB output read whole took 4.3 GB).
fn read_tests(path: &Path) -> anyhow::Result<TestsFile> {
    let name = path.display().to_string();
    let mut f = std::fs::File::open(path).with_context(|| format!("reading {name}"))?;
    let mut r = TestsReader::new(&name);
    let mut buf = vec![0u8; 1 << 20];
    loop {
        match f.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => r.feed(buf.get(..n).unwrap_or_default()),
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e).with_context(|| format!("reading {name}")),
        }
    }
    Ok(r.finish())
}

fn emit(text: &str) -> anyhow::Result<()> {
    crate::out::emit(text)
}

fn exit_code(findings: &[Finding]) -> u8 {
    u8::from(findings.iter().any(|f| f.severity == Severity::ERROR))
}

pub fn run_log(a: LogArgs) -> anyhow::Result<u8> {
    let data = read_all(&a.files)?;
    let inputs: Vec<Input<'_>> = data.iter().map(|(n, b)| Input { name: n, bytes: b }).collect();
    let report = nccl::analyze_logs(&inputs);
    let nccl_lines: u32 = report.files.iter().map(|f| f.nccl_lines).sum();
    if a.json {
        emit(&format!("{}\n", serde_json::to_string_pretty(&report)?))?;
    } else {
        crate::out::emit_text(&render_log(&report))?;
    }
    if nccl_lines == 0 {
        eprintln!("rankscope: no NCCL_DEBUG lines found (is NCCL_DEBUG=INFO set?)");
        return Ok(1);
    }
    Ok(exit_code(&report.findings))
}

pub fn run_tests(a: TestsArgs) -> anyhow::Result<u8> {
    if let Some(p) = a.peak_gbps {
        anyhow::ensure!(p.is_finite() && p > 0.0, "--peak-gbps must be a positive number of GB/s");
    }
    let files = a.files.iter().map(|p| read_tests(p)).collect::<anyhow::Result<Vec<_>>>()?;
    let report = nccl::perf::tests_report(files, a.peak_gbps);
    if a.json {
        emit(&format!("{}\n", serde_json::to_string_pretty(&report)?))?;
    } else {
        // In pieces: the text of 600,000 tests (1 GiB of output) is never held whole.
        render_tests_to(&report, !a.no_rows, &mut |piece| crate::out::emit_text(piece))?;
    }
    if report.tests.is_empty() {
        eprintln!("rankscope: no nccl-tests output found");
        return Ok(1);
    }
    Ok(exit_code(&report.findings))
}

fn opt<T: std::fmt::Display>(v: &Option<T>) -> String {
    v.as_ref().map_or_else(|| "-".to_string(), |x| x.to_string())
}

fn bytes_h(b: f64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut v = b;
    let mut u = 0;
    while v >= 1024.0 && u + 1 < UNITS.len() {
        v /= 1024.0;
        u += 1;
    }
    if u == 0 {
        format!("{b:.0} B")
    } else {
        format!("{v:.1} {}", UNITS.get(u).copied().unwrap_or("B"))
    }
}

/// The findings, `flush` called after each (a shell that writes the text in pieces empties
/// `out` there).
fn render_findings(out: &mut String, findings: &[Finding], flush: &mut Flush<'_>) -> anyhow::Result<()> {
    if findings.is_empty() {
        let _ = writeln!(out, "\nFindings: none");
        return Ok(());
    }
    let _ = writeln!(out, "\nFindings ({}):", findings.len());
    for f in findings {
        let sev = match f.severity.nccl_name() {
            "error" => "ERROR",
            "warning" => "WARN ",
            _ => "INFO ",
        };
        let _ = writeln!(out, "  [{sev}] {}: {}", f.id, f.message);
        for e in &f.quotes {
            let _ = writeln!(out, "      {}:{}: {}", e.file, e.line, e.text);
        }
        if f.quotes_total as usize > f.quotes.len() {
            let _ = writeln!(out, "      ... {} more line(s)", f.quotes_total as usize - f.quotes.len());
        }
        let _ = writeln!(out, "      fix: {}", f.fix);
        flush(out)?;
    }
    Ok(())
}

/// What the text renderers call at the end of a test or a finding: a report written in pieces
/// hands `out` on and empties it there.
type Flush<'a> = dyn FnMut(&mut String) -> anyhow::Result<()> + 'a;

fn render_log(r: &LogReport) -> String {
    let mut out = String::new();
    let lines: u32 = r.files.iter().map(|f| f.lines).sum();
    let nccl: u32 = r.files.iter().map(|f| f.nccl_lines).sum();
    let _ = writeln!(out, "NCCL logs: {} file(s), {lines} lines, {nccl} NCCL lines", r.files.len());
    for f in &r.files {
        let mut notes = Vec::new();
        if f.elided_lines > 0 {
            notes.push(format!("{} elided `...` line(s)", f.elided_lines));
        }
        if f.has_perf_table {
            notes.push("also holds an nccl-tests table (see `rankscope nccl-tests`)".to_string());
        }
        if !notes.is_empty() {
            let _ = writeln!(out, "  {}: {}", f.name, notes.join("; "));
        }
    }
    let versions: Vec<String> =
        r.nccl_versions.iter().map(|(v, h)| format!("{v} ({})", h.join(", "))).collect();
    let _ = writeln!(
        out,
        "Job: {} node(s) [{}], {} process(es), {} rank record(s); {} {}",
        r.n_nodes,
        r.hosts.join(", "),
        r.processes.len(),
        r.ranks.len(),
        if r.processes.iter().any(|p| p.library.as_deref() == Some("RCCL")) { "RCCL" } else { "NCCL" },
        if versions.is_empty() { "version not printed".to_string() } else { versions.join(", ") }
    );
    if !r.processes.is_empty() {
        let _ = writeln!(out, "\nProcesses:");
        let _ = writeln!(
            out,
            "  {:<28} {:>8} {:>4} {:>4} {:<8} {:<6} {:<6} {:<14} {:<24} {:<5} channels coll/p2p",
            "host", "pid", "tag", "dev", "nccl", "cuda", "driver", "network", "plugin", "gdr"
        );
        for p in &r.processes {
            let gdr = match p.gdr {
                Some(true) => "on",
                Some(false) => "off",
                None => "-",
            };
            let _ = writeln!(
                out,
                "  {:<28} {:>8} {:>4} {:>4} {:<8} {:<6} {:<6} {:<14} {:<24} {:<5} {}/{}{}",
                p.host,
                p.pid,
                opt(&p.launcher_rank),
                opt(&p.cuda_dev),
                opt(&p.nccl_version),
                opt(&p.nccl_cuda_version),
                opt(&p.cuda_driver),
                opt(&p.network),
                opt(&p.net_plugin),
                gdr,
                opt(&p.coll_channels),
                opt(&p.p2p_channels),
                if p.patched_format { "  (patched line format)" } else { "" }
            );
        }
    }
    if !r.ranks.is_empty() {
        let _ = writeln!(out, "\nRanks:");
        let _ = writeln!(
            out,
            "  {:<20} {:>5} {:>6} {:<28} {:>8} {:>4} {:<8} {:>5} {:<8} init s",
            "communicator", "rank", "nranks", "host", "pid", "dev", "busId", "nodes", "init"
        );
        for k in &r.ranks {
            let init = if k.init_complete {
                "complete"
            } else if k.init_started {
                "started"
            } else {
                "-"
            };
            let _ = writeln!(
                out,
                "  {:<20} {:>5} {:>6} {:<28} {:>8} {:>4} {:<8} {:>5} {:<8} {}",
                k.comm,
                k.rank,
                opt(&k.nranks),
                k.host,
                k.pid,
                opt(&k.cuda_dev),
                opt(&k.bus_id),
                opt(&k.n_nodes),
                init,
                opt(&k.init_total_s)
            );
        }
    }
    if !r.rings.is_empty() {
        let _ = writeln!(out, "\nRings ({}):", r.rings.len());
        for g in r.rings.iter().take(8) {
            let cross = match (g.host_crossings, g.hosts) {
                (Some(c), Some(h)) => format!("  [{c} node crossings, {h} nodes]"),
                _ => String::new(),
            };
            let ranks: Vec<String> = g.ranks.iter().map(u32::to_string).collect();
            let _ = writeln!(out, "  channel {:>2}: {}{cross}", g.channel, ranks.join(" "));
        }
        if r.rings.len() > 8 {
            let _ = writeln!(out, "  ... {} more", r.rings.len() - 8);
        }
    }
    if !r.trees.is_empty() {
        let _ = writeln!(out, "\nTrees: {} (rank, channel) entries", r.trees.len());
    }
    if !r.transports.is_empty() {
        let _ = writeln!(out, "\nPeer transports (connection lines):");
        for (via, n) in &r.transports {
            let _ = writeln!(out, "  {via:<36} {n}");
        }
        let same = r.peers.iter().filter(|p| p.same_host == Some(true)).count();
        let cross = r.peers.iter().filter(|p| p.same_host == Some(false)).count();
        let _ = writeln!(out, "  {} rank pairs: {same} within a node, {cross} across nodes", r.peers.len());
    }
    if !r.warnings.is_empty() {
        let _ = writeln!(out, "\nWarnings and error traces ({}):", r.warnings.len());
        for w in &r.warnings {
            let msg =
                if w.message.is_empty() { "(error-return trace without WARN)" } else { w.message.as_str() };
            let _ = writeln!(
                out,
                "  {}:{} {}:{}: {} {}",
                w.file,
                w.line,
                w.host,
                w.pid,
                msg,
                w.continuation.join(" ")
            );
            for t in &w.trace {
                let _ = writeln!(
                    out,
                    "      line {}: {} -> {} ({}) {}",
                    t.line,
                    t.location,
                    t.code,
                    nccl::log::nccl_result_name(t.code),
                    t.note
                );
            }
        }
    }
    let _ = render_findings(&mut out, &r.findings, &mut |_| Ok(()));
    out
}

fn check_str(c: Check) -> String {
    match c {
        Check::Wrong(w) => w.to_string(),
        Check::Error(e) => format!("{e:e}"),
        Check::NotAvailable => "N/A".to_string(),
    }
}

fn render_test(out: &mut String, t: &PerfTest, rows: bool) {
    let coll = t.collective_name();
    let ranks = t
        .n_ranks
        .map(|n| format!("{n} ranks ({})", t.n_ranks_source.as_deref().unwrap_or("?")))
        .unwrap_or_else(|| "ranks unknown".into());
    let hosts = if t.hosts.is_empty() { String::new() } else { format!(" on {} host(s)", t.hosts.len()) };
    let suite = t.suite.map_or("nccl-tests", |s| s.as_str());
    let mut ver = t.nccl_tests_version.as_ref().map(|v| format!(", {suite} {v}")).unwrap_or_default();
    if let Some(l) = &t.library_version {
        ver.push_str(&format!(", {l}"));
    }
    let _ = writeln!(
        out,
        "\n{} test {} (line {}): {coll} [{:?}], {ranks}{hosts}{ver}, {} row(s){}{}",
        t.file,
        t.index,
        t.first_line,
        t.collective_source,
        t.rows.len(),
        t.avg_busbw_gbps.map(|v| format!(", avg busbw {v} GB/s")).unwrap_or_default(),
        if t.elided_lines > 0 { format!(", {} elided line(s)", t.elided_lines) } else { String::new() }
    );
    let link = |l: &rankscope_core::nccl::perf::LinkFigure| {
        let g = l.generation.map(|g| format!(" {g}")).unwrap_or_default();
        format!("{}{g} {} GB/s one way ({})", l.kind, l.gbps, l.source)
    };
    let mut topo = vec![t.topology.scope.to_string()];
    topo.extend(t.topology.gpu_link.as_ref().map(|l| format!("GPUs: {}", link(l))));
    topo.extend(t.topology.network_link.as_ref().map(|l| format!("network: {}", link(l))));
    let _ = writeln!(out, "  topology: {}", topo.join("; "));
    if rows && !t.rows.is_empty() {
        let _ = writeln!(
            out,
            "  {:>12} {:>12} {:>8} {:>6} {:>5} | {:>10} {:>8} {:>8} {:>7} | {:>10} {:>8} {:>8} {:>7}",
            "size(B)",
            "count",
            "type",
            "redop",
            "root",
            "time(us)",
            "algbw",
            "busbw",
            "check",
            "time(us)",
            "algbw",
            "busbw",
            "check"
        );
        for r in &t.rows {
            let _ = writeln!(
                out,
                "  {:>12} {:>12} {:>8} {:>6} {:>5} | {:>10} {:>8} {:>8} {:>7} | {:>10} {:>8} {:>8} {:>7}",
                r.size_bytes,
                r.count,
                r.dtype,
                r.redop.as_deref().unwrap_or("-"),
                opt(&r.root),
                r.out_of_place.time_us,
                format!("{:.2}", r.out_of_place.algbw_gbps),
                format!("{:.2}", r.out_of_place.busbw_gbps),
                check_str(r.out_of_place.check),
                r.in_place.time_us,
                format!("{:.2}", r.in_place.algbw_gbps),
                format!("{:.2}", r.in_place.busbw_gbps),
                check_str(r.in_place.check)
            );
        }
    }
    if let Some(a) = &t.analysis {
        match &a.fit {
            Some(f) => {
                let _ = writeln!(
                    out,
                    "  fit: T(S) = {:.2} us + S / {:.2} GB/s{}; n½ = {}; rms error {:.1}%, max {:.1}% over {} points{}",
                    f.alpha_us,
                    f.bw_alg_gbps,
                    f.bw_bus_gbps.map(|b| format!(" (busbw asymptote {b:.2} GB/s)")).unwrap_or_default(),
                    bytes_h(f.n_half_bytes),
                    f.rms_rel_err * 100.0,
                    f.max_rel_err * 100.0,
                    f.points,
                    if f.alpha_clamped { " (latency clamped at 0)" } else { "" }
                );
            }
            None => {
                let _ =
                    writeln!(out, "  fit: none ({})", a.fit_error.map(|e| e.to_string()).unwrap_or_default());
            }
        }
        let s = |v: Option<u64>| v.map_or_else(|| "-".to_string(), |b| bytes_h(b as f64));
        let peak = match (&a.peak, a.plateau_pct_of_peak) {
            (Some(p), Some(pct)) => format!("; {pct:.1}% of peak {} GB/s ({})", p.gbps, p.source),
            _ => match &a.peak_set_aside {
                Some(s) => {
                    format!("; peak unknown: {} GB/s ({}) set aside, {}", s.peak.gbps, s.peak.source, s.why)
                }
                None => "; no peak given (--peak-gbps)".to_string(),
            },
        };
        let _ = writeln!(
            out,
            "  busbw plateau {:.2} GB/s (max {:.2} at {}); reaches 50% at {}, 80% at {}{peak}",
            a.plateau_busbw_gbps,
            a.max_busbw_gbps,
            bytes_h(a.max_busbw_size_bytes as f64),
            s(a.size_at_50pct_plateau_bytes),
            s(a.size_at_80pct_plateau_bytes),
        );
        if let (Some(f), Some(at)) = (a.floor_us, a.floor_size_bytes) {
            let _ = writeln!(out, "  small-message floor {f} us (at {})", bytes_h(at as f64));
        }
    }
}

/// The whole text report as one string (the tests' view of [`render_tests_to`]).
#[cfg(test)]
fn render_tests(r: &TestsReport, rows: bool) -> String {
    let mut out = String::new();
    let _ = render_tests_to(r, rows, &mut |piece| {
        out.push_str(piece);
        Ok(())
    });
    out
}

/// Text pieces [`render_tests_to`] hands out are about this long.
const PIECE_BYTES: usize = 1 << 20;

/// The text report, handed to `put` in pieces of about [`PIECE_BYTES`], each ending at the end
/// of a line.
fn render_tests_to(
    r: &TestsReport,
    rows: bool,
    put: &mut dyn FnMut(&str) -> anyhow::Result<()>,
) -> anyhow::Result<()> {
    let mut flush = |out: &mut String| -> anyhow::Result<()> {
        if out.len() >= PIECE_BYTES {
            put(out)?;
            out.clear();
        }
        Ok(())
    };
    let mut out = String::new();
    let _ = writeln!(out, "nccl-tests: {} file(s), {} test(s)", r.files.len(), r.tests.len());
    for t in &r.tests {
        render_test(&mut out, t, rows);
        flush(&mut out)?;
    }
    if !r.diagnostics.is_empty() {
        let _ = writeln!(out, "\nDiagnostics:");
        for d in &r.diagnostics {
            let _ = writeln!(out, "  {}:{}: {} {}", d.file, opt(&d.line), d.kind, d.message);
            flush(&mut out)?;
        }
    }
    render_findings(&mut out, &r.findings, &mut flush)?;
    put(&out)
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    const SHARED: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../../shared/");

    fn input(rel: &str) -> (String, Vec<u8>) {
        (rel.to_string(), std::fs::read(format!("{SHARED}{rel}")).unwrap())
    }

    #[test]
    fn renders_logs_with_findings_and_exit_code() {
        let (n, b) = input("nccl-logs/aws-hpc-tutorials_2node-a10g_NET-Socket_nccl2.11.4.log");
        let r = nccl::analyze_logs(&[Input { name: &n, bytes: &b }]);
        let text = render_log(&r);
        assert!(text.contains("Job: 2 node(s) [ip-10-0-139-244, ip-10-0-142-242]"));
        assert!(text.contains("[ERROR] log.net-socket-multinode"));
        assert!(text.contains("NET/Socket/0                         8"));
        assert_eq!(exit_code(&r.findings), 1);
    }

    #[test]
    fn renders_tables_as_printed() {
        let (n, b) = input("nccl-tests/xxrjun_h100_10node-80rank_multi-collective.txt");
        let r = nccl::analyze_tests(&[Input { name: &n, bytes: &b }], None);
        let text = render_tests(&r, true);
        // The row of 64 MiB, bandwidths with the two decimals nccl-tests prints.
        assert!(
            text.contains(
                "67108864      8388608   double    sum    -1 |     939.84    71.40   141.02       0"
            ),
            "{text}"
        );
        assert!(text.contains("fit: T(S) = 547.10 us + S / 177.16 GB/s"));
        assert_eq!(exit_code(&r.findings), 0);
        assert!(!render_tests(&r, false).contains("939.84"));
    }
}
