//! One file of nccl-tests output into its tables: banners, settings, device lines, the column
//! header's layout, result rows found by their shape, interleaved tables told apart by size.

use super::*;

/// True when `line` looks like nccl-tests output (used by [`crate::nccl::sniff`]).
pub(crate) fn is_tests_marker(line: &str) -> bool {
    let line = strip_call_fragments(line);
    if line.contains("rccl-tests: Version") {
        return true;
    }
    let Some(h) = line.find('#').map(|i| &line[i + 1..]) else {
        return false;
    };
    let h = h.trim_start();
    h.starts_with("nccl-tests version")
        || h.starts_with("Collective test starting")
        || h.starts_with("nThread ")
        || h.starts_with("nThread:")
        || h.starts_with("Avg bus bandwidth")
        || is_header_tokens(&h.split_whitespace().collect::<Vec<_>>())
}

/// True when `line` holds a result row (any layout, anywhere in the line).
pub(crate) fn is_result_row(line: &str) -> bool {
    line.split_whitespace().nth(10).is_some() && parse_row(0, line, None).is_some()
}

pub(super) fn is_header_tokens(toks: &[&str]) -> bool {
    matches!(toks.first(), Some(&"size") | Some(&"bytes"))
        && toks.contains(&"type")
        && toks.contains(&"time")
        && toks.contains(&"busbw")
}

/// Most tables receiving rows at once (interleaved output of that many processes is told apart;
/// the oldest is closed when another opens).
pub(super) const MAX_OPEN_TABLES: usize = 16;

/// Per-run context built from banners before a table starts.
#[derive(Debug, Default, Clone)]
pub(super) struct Ctx {
    version: Option<String>,
    library: Option<String>,
    suite: Option<TestSuite>,
    library_version: Option<String>,
    collective: Option<(CollKind, CollectiveSource)>,
    settings: Option<String>,
    devices: Vec<TestDevice>,
    first_line: u32,
    /// A table was opened in this context.
    has_table: bool,
    /// Something worth reporting was seen (banner, settings, devices).
    has_banner: bool,
    /// Failure lines seen before any table of this context.
    failures: Vec<EvidenceLine>,
}

#[derive(Debug)]
pub(super) struct Parser {
    file: String,
    ctx: Ctx,
    /// Tables in file order; `open` indexes the ones still receiving rows.
    tables: Vec<PerfTest>,
    open: Vec<usize>,
    last_table: Option<usize>,
    diagnostics: Vec<Diagnostic>,
    /// What NCCL_DEBUG lines in the same file say: the network, the environment.
    network: Option<String>,
    conn_network: Option<String>,
    env: BTreeMap<String, String>,
    /// NICs the NCCL lines list with their speed (`NET/IB : Made virtual device [0]
    /// name=mlx5_0 speed=25000`), by name, in Mb/s.
    nics: BTreeMap<String, f64>,
}

/// Parse one file into its tests (file order) and diagnostics ([`TestsReader`] fed the whole
/// file).
pub fn parse_tests_file(file: &str, bytes: &[u8]) -> (Vec<PerfTest>, Vec<Diagnostic>) {
    let mut r = TestsReader::new(file);
    r.feed(bytes);
    let t = r.finish();
    (t.tests, t.diagnostics)
}

/// One file of nccl-tests output read from chunks of any size, line by line as they arrive: it
/// holds the tables read and the line being read, never the file (a 1 GiB output read whole
/// took 4.3 GB). Whatever the chunks, the tests are those of [`parse_tests_file`] on the whole
/// file.
#[derive(Debug)]
pub struct TestsReader {
    lines: ChunkLines,
    parser: Parser,
}

/// One file's tests (file order) and diagnostics, as [`TestsReader::finish`] gives them.
#[derive(Debug, Clone, PartialEq)]
pub struct TestsFile {
    pub name: String,
    pub tests: Vec<PerfTest>,
    pub diagnostics: Vec<Diagnostic>,
}

impl TestsReader {
    /// `file` names the file in every test, evidence line and diagnostic.
    pub fn new(file: &str) -> TestsReader {
        TestsReader {
            lines: ChunkLines::default(),
            parser: Parser {
                file: file.to_string(),
                ctx: Ctx::default(),
                tables: Vec::new(),
                open: Vec::new(),
                last_table: None,
                diagnostics: Vec::new(),
                network: None,
                conn_network: None,
                env: BTreeMap::new(),
                nics: BTreeMap::new(),
            },
        }
    }

    /// Feeds the next chunk.
    pub fn feed(&mut self, chunk: &[u8]) {
        let p = &mut self.parser;
        self.lines.feed(chunk, &mut |n, raw| p.line(n, &strip_call_fragments(&raw)));
    }

    /// Ends the file: its last line read, every table finalized.
    pub fn finish(self) -> TestsFile {
        let TestsReader { lines, mut parser } = self;
        lines.finish(&mut |n, raw| parser.line(n, &strip_call_fragments(&raw)));
        parser.finish()
    }
}

impl Parser {
    fn finish(mut self) -> TestsFile {
        self.finish_ctx();
        let Parser { file, mut tables, mut diagnostics, network, conn_network, env, nics, .. } = self;
        let network = network.or(conn_network);
        let nic_gbits = (!nics.is_empty())
            .then(|| (u32::try_from(nics.len()).unwrap_or(u32::MAX), nics.values().sum::<f64>() / 1000.0));
        for (i, t) in tables.iter_mut().enumerate() {
            t.index = u32::try_from(i).unwrap_or(u32::MAX);
            t.network = network.clone();
            t.env = env.clone();
            finalize(t);
            t.topology = super::topology::topology_of(t, nic_gbits);
            if t.interleaved {
                diagnostics.push(Diagnostic::in_text(
                    DiagKind::TestsInterleavedTables,
                    format!(
                        "test {} ({}): its rows alternate with another table's; rows were assigned by increasing size",
                        t.index,
                        t.collective_name()
                    ),
                    &file,
                    t.rows.first().map(|r| r.line),
                ));
            }
        }
        TestsFile { name: file, tests: tables, diagnostics }
    }

    fn line(&mut self, n: u32, line: &str) {
        if self.nccl_line(n, line) {
            return;
        }
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
            let ev = EvidenceLine::new(&self.file, n, t);
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
            .find_map(CollKind::from_nccl_tests)
        {
            if self.ctx.has_table {
                self.new_ctx(n);
            }
            if self.ctx.collective.is_none_or(|(_, s)| s != CollectiveSource::Banner) {
                self.ctx.collective = Some((c, CollectiveSource::CommandLine));
            }
        }
    }

    /// Lines of the library and of NCCL_DEBUG in the output: rccl-tests' `rccl-tests: Version
    /// develop:40b1b17`, the `RCCL version : ...` / `NCCL version ...` banners, `Using network
    /// X`, `via NET/X/..` connections and variables set by the environment. Returns true when
    /// the line is one of them (it holds no row).
    fn nccl_line(&mut self, n: u32, line: &str) -> bool {
        if let Some(rest) = line.split_once("rccl-tests: Version").map(|x| x.1) {
            if self.ctx.has_table {
                self.new_ctx(n);
            }
            self.touch(n);
            self.ctx.suite = Some(TestSuite::RcclTests);
            self.ctx.version = rest.split_whitespace().next().map(str::to_string);
            return true;
        }
        if let Some(rest) = line.split_once("RCCL version").map(|x| x.1) {
            let v = rest.trim_start().trim_start_matches(':').trim();
            if !v.is_empty() && self.ctx.library_version.is_none() {
                self.ctx.library_version = Some(format!("RCCL {}", v.chars().take(60).collect::<String>()));
            }
            return true;
        }
        if let Some(rest) = line.split_once("NCCL version ").map(|x| x.1) {
            let v = rest.split_whitespace().next().unwrap_or("");
            if !v.is_empty() && self.ctx.library_version.is_none() {
                let lib = if v.contains("+hip") { "RCCL" } else { "NCCL" };
                self.ctx.library_version = Some(format!("{lib} {}", v.chars().take(60).collect::<String>()));
            }
            return true;
        }
        let Some(msg) = line.split_once("NCCL INFO ").map(|x| x.1) else {
            return false;
        };
        if let Some(nic) = msg.strip_prefix("NET/").and_then(nic_speed) {
            self.nics.insert(nic.0, nic.1);
        } else if let Some(net) = msg.strip_prefix("Using network ") {
            self.network.get_or_insert_with(|| net.trim().to_string());
        } else if let Some((k, v)) = msg.split_once(" set by environment to ") {
            let k = k.trim();
            if k.starts_with("NCCL_") || k.starts_with("RCCL_") {
                self.env.entry(k.to_string()).or_insert_with(|| v.trim().trim_end_matches('.').to_string());
            }
        } else if let Some(via) = msg.split_once(" via NET/").map(|x| x.1) {
            // `NET/IB/0`, `NET/AWS Libfabric/0/GDRDMA`: the name is what precedes the device.
            let name: Vec<&str> =
                via.split('/').take_while(|seg| !seg.starts_with(|c: char| c.is_ascii_digit())).collect();
            if !name.is_empty() {
                self.conn_network.get_or_insert_with(|| name.join("/"));
            }
        }
        true
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
            self.ctx.suite = Some(TestSuite::NcclTests);
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
            if let Some(c) = CollKind::from_nccl_tests(rest.trim()) {
                self.ctx.collective = Some((c, CollectiveSource::Banner));
            }
            return true;
        }
        if body.starts_with("Collective test concluded") {
            self.close_all();
            return true;
        }
        if body.starts_with("nThread ") || body.starts_with("nThread:") {
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
                self.diagnostics.push(Diagnostic::in_text(
                    DiagKind::TestsOrphanAverage,
                    "an `Avg bus bandwidth` line with no table before it".into(),
                    &self.file,
                    Some(n),
                ));
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
            file: self.file.clone(),
            index: 0,
            collective: c.collective.map(|x| x.0),
            collective_source: c.collective.map_or(CollectiveSource::Unknown, |x| x.1),
            nccl_tests_version: c.version.clone(),
            nccl_library: c.library.clone(),
            suite: c.suite,
            library_version: c.library_version.clone(),
            network: None,
            env: BTreeMap::new(),
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
            topology: super::topology::Topology::default(),
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
                    self.diagnostics.push(Diagnostic::in_text(
                        DiagKind::TestsRowsRestarted,
                        "result rows restarted at a smaller size without a header: a new table was started"
                            .into(),
                        &self.file,
                        Some(row.line),
                    ));
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

pub(super) fn guess_layout(row: &PerfRow) -> Layout {
    Layout::new(
        row.redop.is_some(),
        row.root.is_some(),
        matches!(row.out_of_place.check, Check::Error(_)),
        false,
    )
}

/// `Rank 0 [Group 0] Pid 1465 on HOST device 0 [0x00] NAME...`
pub(super) fn parse_device(n: u32, toks: &[&str]) -> Option<TestDevice> {
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

pub(super) fn is_dtype(s: &str) -> bool {
    s.chars().next().is_some_and(|c| c.is_ascii_alphabetic())
        && s.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
        && s != "N" // not the first half of `N/A`
}

pub(super) fn parse_check(s: &str, legacy: Option<bool>) -> Option<Check> {
    // rccl-tests marks an error above its threshold with an asterisk: `2e-01*`.
    let s = s.strip_suffix('*').unwrap_or(s);
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
pub(super) fn parse_row(n: u32, line: &str, layout: Option<Layout>) -> Option<PerfRow> {
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

pub(super) type RowRest = (Option<String>, Option<i64>, Measurement, Measurement);

pub(super) fn parse_row_rest(rest: &[&str], layout: Option<Layout>) -> Option<RowRest> {
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

/// A NIC and its speed in Mb/s from an NCCL line after `NET/`: `IB : Made virtual device [0]
/// name=mlx5_0 speed=25000 ndevs=1` (NCCL 2.2x), `IB : [0] mlx5_0:uverbs0:1/IB provider=Mlx5
/// speed=400000` (newer). Virtual devices and ports repeat across lines and processes: the name
/// keys them.
fn nic_speed(msg: &str) -> Option<(String, f64)> {
    let toks: Vec<&str> = msg.split_whitespace().collect();
    let speed: f64 = toks.iter().find_map(|t| t.strip_prefix("speed="))?.parse().ok()?;
    let name = toks.iter().find_map(|t| t.strip_prefix("name=")).or_else(|| {
        let i = toks.iter().position(|t| t.starts_with('[') && t.ends_with(']'))?;
        toks.get(i + 1).map(|t| t.split(':').next().unwrap_or(t))
    })?;
    (speed.is_finite() && speed > 0.0 && !name.is_empty()).then(|| (name.to_string(), speed))
}
