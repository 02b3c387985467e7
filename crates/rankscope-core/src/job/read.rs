//! What an input is, decided by content, and reading one input in chunks.
//!
//! A file is a trace, NCCL text (an `NCCL_DEBUG=INFO` log, nccl-tests output, or a log holding
//! a perf table: both), a PyTorch Flight Recorder dump, or evidence beside the traces (cluster
//! metrics, an `ncclras` status, an NCCL Inspector log, a step log), whatever its name. The decision is
//! made on its first [`SNIFF_BYTES`], the same way in every shell.

use serde::{Deserialize, Serialize};

use crate::model::RankTrace;
use crate::parse::{FileIngest, IngestError, Progress};

/// Bytes of a file's start that decide what it is.
pub const SNIFF_BYTES: usize = 64 << 10;

pub use crate::input::InputKind;

/// The text kinds `head` (a file's first [`SNIFF_BYTES`]) is: none for a trace. A job digest
/// is known by its magic bytes (and kept whole like a text). A gzip
/// stream, or text whose first non-blank byte is `{`, is a trace unless it is a Flight
/// Recorder dump; a `[` may open a bare-array trace or be mpirun's `[1,0]<stdout>:` tag, so
/// the NCCL sniffer decides ([`crate::nccl::sniff_input`]).
pub fn text_kinds(head: &[u8]) -> Vec<InputKind> {
    // A job digest by its magic bytes (before the gzip rule: its body is a gzip member, but
    // the file starts with `RSDIGEST`).
    if super::digest::is_digest(head) {
        return vec![InputKind::Digest];
    }
    if crate::fr::sniff(head) {
        return vec![InputKind::FlightRecorder];
    }
    if head.starts_with(&[0x1f, 0x8b]) {
        return gzipped_beside(head);
    }
    // The evidence beside the traces, each by its own sniff. A JSON head holding `traceEvents`
    // is a trace whatever else it names (a trace's `distributedInfo` has an `nccl_version`).
    let trace_json = memchr::memmem::find(head, b"\"traceEvents\"").is_some();
    let json = head.iter().copied().find(|b| !b.is_ascii_whitespace()) == Some(b'{');
    let mut kinds = Vec::new();
    if !trace_json && crate::nccl::inspector::looks_like(head) {
        kinds.push(InputKind::NcclInspector);
    } else if !trace_json && crate::nccl::ras::sniff(head).is_some() {
        kinds.push(InputKind::NcclRas);
    } else if !trace_json && crate::metrics::sniff(head).is_some() {
        kinds.push(InputKind::Metrics);
    }
    // A step log is text lines (a JSON document naming its timers is not one).
    if kinds.is_empty() && !json && crate::steplog::looks_like(&String::from_utf8_lossy(head)) {
        kinds.push(InputKind::StepLog);
    }
    // A step log run with NCCL_DEBUG=INFO is an NCCL log too.
    if kinds.is_empty() || kinds == [InputKind::StepLog] {
        kinds.extend(crate::nccl::sniff_input(head));
    }
    kinds
}

/// A gzip stream is a trace unless its head inflates to evidence beside the traces (a cluster
/// metrics export, an `ncclras` status, an NCCL Inspector log, a step log: their readers
/// inflate it, [`crate::analyze::beside::inflated`]); NCCL logs and nccl-tests output are read
/// uncompressed.
fn gzipped_beside(head: &[u8]) -> Vec<InputKind> {
    let mut out = Vec::new();
    let mut z = crate::parse::gzip::Gunzip::default();
    z.feed(head, &mut |b| {
        let room = SNIFF_BYTES.saturating_sub(out.len());
        out.extend_from_slice(&b[..b.len().min(room)]);
    });
    if out.is_empty() || out.starts_with(&[0x1f, 0x8b]) {
        return Vec::new();
    }
    let mut kinds = text_kinds(&out);
    kinds.retain(|k| k.is_beside());
    kinds
}

/// The one kind a shell routes `head` by ([`InputKind::of`]).
pub fn detect(head: &[u8]) -> InputKind {
    InputKind::of(&text_kinds(head))
}

/// A text input, owned.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Text {
    pub name: String,
    pub kinds: Vec<InputKind>,
    pub bytes: Vec<u8>,
}

impl Text {
    pub fn as_ref(&self) -> TextRef<'_> {
        TextRef { name: &self.name, kinds: &self.kinds, bytes: &self.bytes }
    }
}

/// A text input, borrowed (the app keeps its bytes in its own maps).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TextRef<'a> {
    pub name: &'a str,
    pub kinds: &'a [InputKind],
    pub bytes: &'a [u8],
}

/// One input read to its end.
#[derive(Debug)]
pub enum Loaded {
    Trace(Box<RankTrace>),
    Text(Text),
}

#[derive(Debug)]
enum State {
    /// The first bytes, until [`SNIFF_BYTES`] or the end decides.
    Head(Vec<u8>),
    Trace(Box<FileIngest>),
    Text(Vec<InputKind>, Vec<u8>),
}

/// Reads one input from chunks of any size: buffers its first [`SNIFF_BYTES`], decides what it
/// is, then streams a trace into the parser (never holding the file) or keeps a text whole.
#[derive(Debug)]
pub struct Reader {
    name: String,
    state: State,
    input_bytes: u64,
}

impl Reader {
    /// `name` names the input in every message (and gives the rank when it holds a number).
    pub fn new(name: &str) -> Reader {
        Reader { name: name.to_string(), state: State::Head(Vec::new()), input_bytes: 0 }
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    /// Feeds the next chunk.
    pub fn feed(&mut self, chunk: &[u8]) {
        self.input_bytes += chunk.len() as u64;
        match &mut self.state {
            State::Head(h) => {
                h.extend_from_slice(chunk);
                if h.len() >= SNIFF_BYTES {
                    let head = std::mem::take(h);
                    self.decide(head);
                }
            }
            State::Trace(f) => f.feed(chunk),
            State::Text(_, b) => b.extend_from_slice(chunk),
        }
    }

    fn decide(&mut self, head: Vec<u8>) {
        let kinds = text_kinds(&head[..head.len().min(SNIFF_BYTES)]);
        self.state = if kinds.is_empty() {
            let mut f = Box::new(FileIngest::new(&self.name));
            f.feed(&head);
            State::Trace(f)
        } else {
            State::Text(kinds, head)
        };
    }

    /// What the input is, once its first [`SNIFF_BYTES`] (or its end) have been seen.
    pub fn kind(&self) -> Option<InputKind> {
        match &self.state {
            State::Head(_) => None,
            State::Trace(_) => Some(InputKind::Trace),
            State::Text(k, _) => Some(InputKind::of(k)),
        }
    }

    /// True once the input is known not to be a trace nor a text we read (stop feeding).
    pub fn failed(&self) -> bool {
        matches!(&self.state, State::Trace(f) if f.failed())
    }

    pub fn progress(&self) -> Progress {
        match &self.state {
            State::Trace(f) => f.progress(),
            _ => Progress { input_bytes: self.input_bytes, ..Progress::default() },
        }
    }

    /// Ends the input. A trace comes back raw (not normalized); an error names the file and
    /// the byte offset where it stopped being a trace.
    pub fn finish(mut self) -> Result<Loaded, IngestError> {
        if let State::Head(h) = &mut self.state {
            let head = std::mem::take(h);
            self.decide(head);
        }
        match self.state {
            State::Trace(f) => f.finish().map(|t| Loaded::Trace(Box::new(t))),
            State::Text(kinds, bytes) => Ok(Loaded::Text(Text { name: self.name, kinds, bytes })),
            State::Head(_) => unreachable_head(&self.name),
        }
    }
}

#[cold]
fn unreachable_head(name: &str) -> Result<Loaded, IngestError> {
    // `finish` decides a pending head above; this arm cannot be reached.
    Err(IngestError::NotATrace { source_name: name.to_string(), offset: 0, reason: "not read".into() })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(name: &str, bytes: &[u8], chunk: usize) -> Result<Loaded, IngestError> {
        let mut r = Reader::new(name);
        for c in bytes.chunks(chunk.max(1)) {
            r.feed(c);
        }
        r.finish()
    }

    #[test]
    fn kinds_by_content_not_name() {
        let trace = br#"{"traceEvents":[{"ph":"X","name":"a","pid":1,"tid":1,"ts":1,"dur":2}]}"#;
        let log = b"host:1:1 [0] NCCL INFO Bootstrap : Using eth0:10.0.0.1<0>\nhost:1:1 [0] NCCL INFO NET/Socket : Using [0]eth0:10.0.0.1<0>\n";
        for chunk in [1, 7, 1 << 20] {
            assert!(matches!(read("x.log", trace, chunk), Ok(Loaded::Trace(_))), "chunk {chunk}");
            match read("rank0.json", log, chunk) {
                Ok(Loaded::Text(t)) => {
                    assert_eq!(t.kinds, vec![InputKind::NcclLog]);
                    assert_eq!(t.bytes, log.to_vec());
                }
                other => panic!("chunk {chunk}: {other:?}"),
            }
        }
        assert_eq!(detect(trace), InputKind::Trace);
        assert_eq!(detect(log), InputKind::NcclLog);
    }

    /// The evidence beside the traces by content, whatever the name; a trace that names NCCL's
    /// version is still a trace.
    #[test]
    fn evidence_beside_the_traces_by_content() {
        let prom = b"# HELP DCGM_FI_PROF_SM_ACTIVE x\n# TYPE DCGM_FI_PROF_SM_ACTIVE gauge\nDCGM_FI_PROF_SM_ACTIVE{gpu=\"0\"} 0.1\n";
        assert_eq!(text_kinds(prom), [InputKind::Metrics]);
        let insp = br#"{"header":{"id":"0x1","rank":0,"n_ranks":2,"nnodes":1},"coll_perf":{"coll":"AllReduce","sn":1}}"#;
        assert_eq!(text_kinds(insp), [InputKind::NcclInspector]);
        let ras = br#"{"nccl_version": "2.27.3", "communicators": []}"#;
        assert_eq!(text_kinds(ras), [InputKind::NcclRas]);
        let log = b" iteration       10/     500 | elapsed time per iteration (ms): 1001.0 |\nhost:1:1 [0] NCCL INFO Bootstrap : Using eth0:10.0.0.1<0>\n";
        assert_eq!(text_kinds(log), [InputKind::StepLog, InputKind::NcclLog]);
        assert_eq!(detect(log), InputKind::StepLog);
        let trace =
            br#"{"distributedInfo": {"nccl_version": "2.21.5", "communicators": 1}, "traceEvents": []}"#;
        assert_eq!(detect(trace), InputKind::Trace);
        // Gzipped: the same, by what the head inflates to (an NCCL log is read uncompressed:
        // a step log that holds one is read as the step log).
        let gz = |b: &[u8]| {
            use std::io::Write;
            let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
            e.write_all(b).unwrap_or_else(|e| panic!("{e}"));
            e.finish().unwrap_or_else(|e| panic!("{e}"))
        };
        assert_eq!(text_kinds(&gz(prom)), [InputKind::Metrics]);
        assert_eq!(text_kinds(&gz(insp)), [InputKind::NcclInspector]);
        assert_eq!(text_kinds(&gz(ras)), [InputKind::NcclRas]);
        assert_eq!(text_kinds(&gz(log)), [InputKind::StepLog]);
        assert_eq!(detect(&gz(trace)), InputKind::Trace);
        assert_eq!(
            detect(&gz(&gz(prom))),
            InputKind::Trace,
            "gzip in gzip: the trace reader says what it is"
        );
        let nccl = b"host:1:1 [0] NCCL INFO Bootstrap : Using eth0:10.0.0.1<0>\n";
        assert_eq!(detect(&gz(nccl)), InputKind::Trace);
        for k in [InputKind::Metrics, InputKind::NcclRas, InputKind::NcclInspector, InputKind::StepLog] {
            assert!(k.is_text() && k.is_beside() && k.any_name());
        }
        assert!(!InputKind::NcclLog.any_name() && InputKind::FlightRecorder.any_name());
    }

    #[test]
    fn not_a_trace_names_the_file() {
        let e = read("notes.json", b"hello", 2).err().map(|e| e.to_string()).unwrap_or_default();
        assert!(e.starts_with("notes.json: not a trace file (at byte"), "{e}");
    }

    /// A format that is not a trace is refused with its name and what to give instead, and a
    /// JSON one stops being read at once (an Execution Trace may be gigabytes).
    #[test]
    fn foreign_formats_are_refused_by_name() {
        let mut et =
            br#"{"schema": "1.0.1", "pid": 7, "time": "2024-01-01 00:00:00", "start_ts": 1, "nodes": ["#
                .to_vec();
        while et.len() < 64 << 10 {
            et.extend_from_slice(
                br#"{"id": 1, "name": "aten::mm", "ctrl_deps": 0, "inputs": {"values": []}},"#,
            );
        }
        let mut r = Reader::new("rank0_et.json");
        r.feed(&et);
        assert!(r.failed(), "an Execution Trace stops at its head");
        let e = r.finish().err().map(|e| e.to_string()).unwrap_or_default();
        assert!(e.starts_with("rank0_et.json: not a trace file"), "{e}");
        assert!(
            e.contains("PyTorch Execution Trace") && e.contains("pass the Kineto trace written beside it"),
            "{e}"
        );
        let pb = [0x0a_u8, 0x07, 0x08, 0x96, 0x01, 0x12, 0x00, 0x1a, 0x00];
        for (name, says) in [
            ("host.xplane.pb", "create_perfetto_trace=True"),
            ("profile.nsys-rep", "nsys export --type=json"),
            ("trace.pftrace", "traceconv json"),
            ("rank0.et", "Chakra"),
        ] {
            for chunk in [1, 4, 1 << 20] {
                let e = read(name, &pb, chunk).err().map(|e| e.to_string()).unwrap_or_default();
                assert!(
                    e.starts_with(&format!("{name}: not a trace file")) && e.contains(says),
                    "{name}: {e}"
                );
            }
        }
        // A trace is not refused for a name.
        let trace = br#"{"traceEvents":[{"ph":"X","name":"a","pid":1,"tid":1,"ts":1,"dur":2}]}"#;
        assert!(matches!(read("odd.pftrace", trace, 3), Ok(Loaded::Trace(_))));
    }

    #[test]
    fn a_long_head_is_decided_before_the_end() {
        let mut r = Reader::new("big.json");
        r.feed(br#"{"traceEvents":["#);
        let pad = br#"{"ph":"X","name":"a","pid":1,"tid":1,"ts":1,"dur":2},"#;
        while r.kind().is_none() {
            r.feed(pad);
        }
        assert_eq!(r.kind(), Some(InputKind::Trace));
        r.feed(br#"{"ph":"X","name":"b","pid":1,"tid":1,"ts":5,"dur":2}]}"#);
        match r.finish() {
            Ok(Loaded::Trace(t)) => assert!(t.counts.total > 1000),
            other => panic!("{other:?}"),
        }
    }
}
