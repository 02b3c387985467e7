//! What an input is: the one kind every shell routes by ([`InputKind`]), and the formats that are
//! not ours, named with what to give instead ([`Foreign`]).
//!
//! A file is a trace, NCCL text (an `NCCL_DEBUG=INFO` log, nccl-tests output, or a log holding a
//! perf table: both kinds), a PyTorch Flight Recorder dump, a rankscope job digest, or evidence
//! beside the traces (cluster metrics, an `ncclras` status, an NCCL Inspector log, a training
//! step log: [`crate::analyze::beside`]), whatever its name; [`crate::job::detect`] decides from its first bytes. A text can be of several kinds
//! at once ([`crate::job::Text::kinds`]); [`InputKind::of`] is the one kind a shell routes it by.
//!
//! **Refusals that say what the file is.** Profilers write many formats beside the Chrome /
//! Kineto JSON rankscope reads. A file that is not a trace is refused with the trace reader's
//! message (file and byte offset); when its first bytes (or its name, for binary formats that
//! have no magic of their own) say which format it is, the refusal names it and says what to
//! give instead ([`identify`]).

crate::named_enum! {
    /// What an input is, for a shell that routes it; a text's kinds
    /// ([`crate::job::Text::kinds`]) are the text kinds among these. The one input-kind enum of
    /// the job API, the NCCL sniffer, the CLI, the app and the npm and Python packages.
    pub enum InputKind {
        /// A trace, or something the trace reader will say is not one (with the byte offset).
        Trace => "trace",
        /// `NCCL_DEBUG=INFO` output (lines with `NCCL INFO` / `NCCL WARN`).
        NcclLog => "nccl_log",
        /// nccl-tests `*_perf` output (banner, column header or result rows).
        NcclTests => "nccl_tests",
        /// A PyTorch Flight Recorder dump (pickle or JSON, gzipped or not).
        FlightRecorder => "flight_recorder",
        /// A rankscope job digest (`RSDIGEST`, [`crate::job::digest`]): a whole job's parts and
        /// analysis, written by `rankscope combine --digest`.
        Digest => "digest",
        /// Cluster metrics: a dcgm-exporter / node-exporter scrape (Prometheus text), a
        /// `dcgmi dmon` table, a Prometheus `query_range` JSON or CSV export.
        Metrics => "metrics",
        /// An `ncclras` status report (text or `-f json`).
        NcclRas => "nccl_ras",
        /// An NCCL Inspector log (the profiler plugin's JSON line per collective).
        NcclInspector => "nccl_inspector",
        /// A training framework's step log (Megatron-LM's iteration lines and timer blocks).
        StepLog => "step_log",
    }
}

impl InputKind {
    /// The one kind of an input whose text kinds are `kinds` (none: a trace). A log that also
    /// holds a perf table counts as nccl-tests output (its table is what a trace analysis uses).
    pub fn of(kinds: &[InputKind]) -> InputKind {
        use InputKind::*;
        [Digest, FlightRecorder, NcclInspector, NcclRas, Metrics, StepLog, NcclTests, NcclLog]
            .into_iter()
            .find(|k| kinds.contains(k))
            .unwrap_or(InputKind::Trace)
    }

    /// Whether this is a kind of text (kept whole beside the traces).
    pub fn is_text(self) -> bool {
        self != InputKind::Trace
    }

    /// What a file of this kind is, in words, as a list of files shows it.
    pub fn describe(self) -> &'static str {
        match self {
            InputKind::Trace => "trace",
            InputKind::NcclLog => "NCCL_DEBUG log",
            InputKind::NcclTests => "nccl-tests output",
            InputKind::FlightRecorder => "Flight Recorder dump",
            InputKind::Digest => "job digest",
            InputKind::Metrics => "cluster metrics",
            InputKind::NcclRas => "NCCL RAS status",
            InputKind::NcclInspector => "NCCL Inspector log",
            InputKind::StepLog => "step log",
        }
    }

    /// Whether a file of this kind is asked by content whatever its name when a folder is
    /// walked: Flight Recorder dumps (`fr_rank0`, `*.pkl`) and the evidence dropped beside the
    /// traces (`metrics.prom`, `*.csv`, `<host>-pid<pid>.jsonl`, a RAS status), whose tools
    /// give them no fixed suffix.
    pub fn any_name(self) -> bool {
        self == InputKind::FlightRecorder || self.is_beside()
    }

    /// Whether this is evidence beside the traces read with them into the analysis' `beside`
    /// member: cluster metrics, an NCCL RAS status, an NCCL Inspector log, a step log.
    pub fn is_beside(self) -> bool {
        matches!(
            self,
            InputKind::Metrics | InputKind::NcclRas | InputKind::NcclInspector | InputKind::StepLog
        )
    }
}

/// A format that is not a trace rankscope reads, as a refusal names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Foreign {
    /// What the file is, in words (`a PyTorch Execution Trace`).
    pub format: &'static str,
    /// What to give instead, and how to make it.
    pub instead: &'static str,
}

impl std::fmt::Display for Foreign {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "this is {}, not a Chrome / Kineto trace: {}", self.format, self.instead)
    }
}

const EXECUTION_TRACE: Foreign = Foreign {
    format: "a PyTorch Execution Trace (the operator graph `ExecutionTraceObserver` writes)",
    instead: "it has no timings of the device; pass the Kineto trace written beside it (the profiler's `*.pt.trace.json`, from `torch.profiler.profile(on_trace_ready=tensorboard_trace_handler(dir))` or `prof.export_chrome_trace(path)`)",
};
const CHAKRA: Foreign = Foreign {
    format: "a Chakra execution trace (protobuf `.et`)",
    instead: "it is converted from a PyTorch Execution Trace and holds no device timings; pass the Kineto trace (`*.pt.trace.json`) the same run's profiler wrote",
};
const XPLANE: Foreign = Foreign {
    format: "a JAX / TensorFlow profile (`xplane.pb`, protobuf)",
    instead: "have JAX write a Chrome / Perfetto trace too: `jax.profiler.trace(log_dir, create_perfetto_trace=True)` writes `perfetto_trace.json.gz` beside it (TensorBoard's profile plugin also keeps `*.trace.json.gz`), and pass that",
};
const NSYS: Foreign = Foreign {
    format: "an Nsight Systems report (`.nsys-rep` / `.qdrep`)",
    instead: "rankscope does not read Nsight reports; `nsys export --type=json` or `--type=sqlite` turns one into text other tools read, and `nsys stats` summarises it; for rankscope, record the run with the PyTorch profiler and pass its Kineto trace (`*.pt.trace.json`)",
};
const SQLITE: Foreign = Foreign {
    format: "an SQLite database (an `nsys export --type=sqlite` or rocprof database?)",
    instead: "rankscope reads Chrome / Kineto JSON traces; pass the PyTorch profiler's trace of the run (`*.pt.trace.json`)",
};
const ROCPROF: Foreign = Foreign {
    format: "a rocprofv3 JSON (`rocprofiler-sdk-tool`)",
    instead: "rocprofv3 writes its own schema; run it with `--output-format pftrace` and convert with Perfetto's `traceconv json in.pftrace out.json`, or (better) pass the PyTorch profiler's Kineto trace of the run, which has the host side too",
};
const PERFETTO: Foreign = Foreign {
    format: "a Perfetto protobuf trace (`.pftrace` / `.perfetto-trace`)",
    instead: "convert it to JSON with Perfetto's `traceconv json in.pftrace out.json` and pass that; from PyTorch, `prof.export_chrome_trace(path)` writes the Chrome / Kineto JSON directly",
};

const UTF16: Foreign = Foreign {
    format: "UTF-16 text (a byte-order mark or every other byte NUL: PowerShell's `>` and Notepad's \"Unicode\" write it)",
    instead: "convert it to UTF-8 and pass that: `iconv -f UTF-16 -t UTF-8 in.json > out.json`, or in PowerShell `Get-Content in.json | Set-Content -Encoding utf8 out.json`",
};
const PART: Foreign = Foreign {
    format: "a rankscope part (`rankscope part` wrote it)",
    instead: "parts are combined, not analysed: `rankscope combine *.part` gives the job's analysis",
};
const STEP_LOG: Foreign = Foreign {
    format: "a training framework's step log (Megatron-LM's `iteration N/M | ... elapsed time per iteration (ms)` lines and timer blocks)",
    instead: "`analyze` reads a step log beside the traces (gzipped or not); `rankscope steplog FILE` reads it alone",
};
const NCCL_INSPECTOR: Foreign = Foreign {
    format: "an NCCL Inspector log (the profiler plugin's JSON line per collective: `header`, `coll_perf`)",
    instead: "`analyze` reads an Inspector log beside the traces (gzipped or not); `rankscope nccl-inspector FILE_OR_DIR` reads it alone",
};
const DIGEST_IN_TRACE_PATH: Foreign =
    Foreign { format: "a rankscope job digest", instead: "pass it alone to `rankscope analyze`" };

/// Whether `text` (a file's first bytes) is an NCCL Inspector log ([`crate::nccl::inspector`]):
/// a JSON object per line with a `header` and a `coll_perf` or `p2p_perf`.
pub fn is_nccl_inspector(text: &[u8]) -> bool {
    let line = text.split(|&b| b == b'\n').find(|l| l.iter().any(|b| !b.is_ascii_whitespace()));
    line.is_some_and(|l| {
        let has = |k: &[u8]| memchr::memmem::find(l, k).is_some();
        l.trim_ascii_start().starts_with(b"{")
            && has(b"\"header\"")
            && (has(b"\"coll_perf\"") || has(b"\"p2p_perf\""))
    })
}

/// Which foreign format a file is, from its name and its first bytes (`raw`: as read, gzip or
/// not; `text`: the decompressed text's first bytes, when the file was gzip, else `raw` again).
/// `None` when nothing says: the trace reader's own message then stands.
///
/// JSON formats are told by their keys: an Execution Trace's top level has `"nodes"` and
/// `"schema"` and no `traceEvents`; rocprofv3's `"rocprofiler-sdk-tool"`. Binary formats by magic
/// (SQLite) or, since protobuf has none, by the names their tools give them (`.et`, `xplane.pb`,
/// `.nsys-rep`, `.pftrace`) when the bytes are not text.
pub fn identify(name: &str, raw: &[u8], text: &[u8]) -> Option<Foreign> {
    let lower = name.to_ascii_lowercase();
    let base = lower.rsplit(['/', '\\']).next().unwrap_or(&lower);
    let base = base.strip_suffix(".gz").unwrap_or(base);
    if raw.starts_with(b"SQLite format 3\0") {
        return Some(SQLITE);
    }
    if raw.starts_with(b"RSPART") {
        return Some(PART);
    }
    if raw.starts_with(b"RSDIGEST") {
        return Some(DIGEST_IN_TRACE_PATH);
    }
    // UTF-16: a byte-order mark, or ASCII with a NUL beside each byte (`{\0"\0` / `\0{\0"`).
    let utf16 = raw.starts_with(&[0xFF, 0xFE])
        || raw.starts_with(&[0xFE, 0xFF])
        || (raw.len() >= 8 && {
            let even_nul = raw.iter().take(64).step_by(2).all(|&b| b == 0);
            let odd_nul = raw.iter().skip(1).take(64).step_by(2).all(|&b| b == 0);
            let ascii =
                |skip: usize| raw.iter().skip(skip).take(64).step_by(2).all(|&b| b.is_ascii() && b != 0);
            (odd_nul && ascii(0)) || (even_nul && ascii(1))
        });
    if utf16 && !raw.starts_with(&[0x1f, 0x8b]) {
        return Some(UTF16);
    }
    let body = text.strip_prefix("\u{feff}".as_bytes()).unwrap_or(text);
    let first = body.iter().copied().find(|b| !b.is_ascii_whitespace());
    if first == Some(b'{') {
        let has = |k: &[u8]| memchr::memmem::find(body, k).is_some();
        if has(b"\"rocprofiler-sdk-tool\"") {
            return Some(ROCPROF);
        }
        if has(b"\"nodes\"") && has(b"\"schema\"") && !has(b"\"traceEvents\"") {
            return Some(EXECUTION_TRACE);
        }
        if is_nccl_inspector(body) {
            return Some(NCCL_INSPECTOR);
        }
        return None;
    }
    // What is not text is told by the name its tool gives it.
    let binary = body.iter().take(512).any(|&b| b == 0 || (b < 0x20 && !b.is_ascii_whitespace()));
    if !binary && crate::steplog::looks_like(&String::from_utf8_lossy(body)) {
        return Some(STEP_LOG);
    }
    let by_name = if base.ends_with(".nsys-rep") || base.ends_with(".qdrep") {
        Some(NSYS)
    } else if base.ends_with("xplane.pb") {
        Some(XPLANE)
    } else if base.ends_with(".pftrace") || base.ends_with(".perfetto-trace") || base.ends_with(".perfetto") {
        Some(PERFETTO)
    } else if base.ends_with(".et") {
        Some(CHAKRA)
    } else {
        None
    };
    // Other binary files keep the parser's message, which names the byte it stopped at.
    by_name.filter(|_| binary || body.is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_routing_kind() {
        use InputKind::*;
        assert_eq!(InputKind::of(&[]), Trace);
        assert_eq!(InputKind::of(&[NcclLog]), NcclLog);
        assert_eq!(InputKind::of(&[NcclLog, NcclTests]), NcclTests);
        assert_eq!(InputKind::of(&[FlightRecorder]), FlightRecorder);
        assert_eq!(InputKind::of(&[Digest, NcclLog]), Digest);
        assert!(!Trace.is_text() && NcclLog.is_text());
        for &k in InputKind::ALL {
            let json = serde_json::to_string(&k).unwrap_or_default();
            assert_eq!(json, format!("\"{}\"", k.as_str()));
        }
    }

    #[test]
    fn foreign_formats_are_named() {
        let et = br#"{"schema": "1.1.1-chakra.0.0.4", "pid": 7, "time": "2024-01-01", "start_ts": 1, "nodes": [{"name": "[pytorch|profiler|execution_trace|process]"}]}"#;
        assert_eq!(identify("rank0_et.json", et, et), Some(EXECUTION_TRACE));
        let roc = br#"{"rocprofiler-sdk-tool": [{"metadata": {}}]}"#;
        assert_eq!(identify("out_results.json", roc, roc), Some(ROCPROF));
        let pb = [0x0a_u8, 0x12, 0x08, 0x01, 0x12, 0x00, 0x1a, 0x03];
        assert_eq!(identify("host0.xplane.pb", &pb, &pb), Some(XPLANE));
        assert_eq!(identify("run.nsys-rep", &pb, &pb), Some(NSYS));
        assert_eq!(identify("trace.pftrace", &pb, &pb), Some(PERFETTO));
        assert_eq!(identify("rank0.et", &pb, &pb), Some(CHAKRA));
        assert_eq!(identify("whatever.bin", &pb, &pb), None);
        assert_eq!(identify("x.sqlite", b"SQLite format 3\0rest", b""), Some(SQLITE));
        // A Kineto trace, text and damaged JSON are not foreign.
        let kineto = br#"{"schemaVersion": 1, "traceEvents": [], "nodes": 3}"#;
        assert_eq!(identify("rank0.json", kineto, kineto), None);
        assert_eq!(identify("notes.json", b"hello", b"hello"), None);
        assert_eq!(identify("x.et", b"hello", b"hello"), None);
        let log = b" [2025-01-01 00:00:00] iteration       10/     500 | elapsed time per iteration (ms): 1001.0 |\n";
        assert_eq!(identify("train.log", log, log), Some(STEP_LOG));
        let msg = EXECUTION_TRACE.to_string();
        assert!(msg.contains("pass the Kineto trace written beside it"), "{msg}");
    }
}
