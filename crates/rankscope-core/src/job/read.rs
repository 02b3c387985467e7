//! What an input is, decided by content, and reading one input in chunks.
//!
//! A file is a trace, NCCL text (an `NCCL_DEBUG=INFO` log, nccl-tests output, or a log holding
//! a perf table: both) or a PyTorch Flight Recorder dump, whatever its name. The decision is
//! made on its first [`SNIFF_BYTES`], the same way in every shell.

use serde::{Deserialize, Serialize};

use crate::model::RankTrace;
use crate::parse::{FileIngest, IngestError, Progress};

/// Bytes of a file's start that decide what it is.
pub const SNIFF_BYTES: usize = 64 << 10;

crate::named_enum! {
    /// The kinds of text a job reads beside traces (kept whole: kB to a few MB).
    pub enum TextKind {
        NcclLog => "nccl_log",
        NcclTests => "nccl_tests",
        /// A PyTorch Flight Recorder dump (pickle or JSON, gzipped or not).
        FlightRecorder => "flight_recorder",
        /// A rankscope job digest (`RSDIGEST`, [`super::digest`]): a whole job's parts and
        /// analysis, written by `rankscope combine --digest`.
        Digest => "digest",
    }
}

/// What an input is, for a shell that routes it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum InputKind {
    /// A trace, or something the trace reader will say is not one (with the byte offset).
    Trace,
    NcclLog,
    NcclTests,
    FlightRecorder,
    /// A rankscope job digest ([`super::digest`]).
    Digest,
}

impl InputKind {
    /// The one kind of an input whose text kinds are `kinds` (none: a trace). A log that also
    /// holds a perf table counts as nccl-tests output (its table is what a trace analysis uses).
    pub fn of(kinds: &[TextKind]) -> InputKind {
        if kinds.contains(&TextKind::Digest) {
            InputKind::Digest
        } else if kinds.contains(&TextKind::FlightRecorder) {
            InputKind::FlightRecorder
        } else if kinds.contains(&TextKind::NcclTests) {
            InputKind::NcclTests
        } else if kinds.contains(&TextKind::NcclLog) {
            InputKind::NcclLog
        } else {
            InputKind::Trace
        }
    }
}

/// The text kinds `head` (a file's first [`SNIFF_BYTES`]) is: none for a trace. A job digest
/// is known by its magic bytes (and kept whole like a text). A gzip
/// stream, or text whose first non-blank byte is `{`, is a trace unless it is a Flight
/// Recorder dump; a `[` may open a bare-array trace or be mpirun's `[1,0]<stdout>:` tag, so
/// the NCCL sniffer decides ([`crate::nccl::sniff_input`]).
pub fn text_kinds(head: &[u8]) -> Vec<TextKind> {
    // A job digest by its magic bytes (before the gzip rule: its body is a gzip member, but
    // the file starts with `RSDIGEST`).
    if super::digest::is_digest(head) {
        return vec![TextKind::Digest];
    }
    if crate::fr::sniff(head) {
        return vec![TextKind::FlightRecorder];
    }
    crate::nccl::sniff_input(head)
        .into_iter()
        .map(|k| match k {
            crate::nccl::Kind::NcclLog => TextKind::NcclLog,
            crate::nccl::Kind::NcclTests => TextKind::NcclTests,
        })
        .collect()
}

/// The one kind a shell routes `head` by ([`InputKind::of`]).
pub fn detect(head: &[u8]) -> InputKind {
    InputKind::of(&text_kinds(head))
}

/// A text input, owned.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Text {
    pub name: String,
    pub kinds: Vec<TextKind>,
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
    pub kinds: &'a [TextKind],
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
    Text(Vec<TextKind>, Vec<u8>),
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
                    assert_eq!(t.kinds, vec![TextKind::NcclLog]);
                    assert_eq!(t.bytes, log.to_vec());
                }
                other => panic!("chunk {chunk}: {other:?}"),
            }
        }
        assert_eq!(detect(trace), InputKind::Trace);
        assert_eq!(detect(log), InputKind::NcclLog);
    }

    #[test]
    fn not_a_trace_names_the_file() {
        let e = read("notes.json", b"hello", 2).err().map(|e| e.to_string()).unwrap_or_default();
        assert!(e.starts_with("notes.json: not a trace file (at byte"), "{e}");
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
