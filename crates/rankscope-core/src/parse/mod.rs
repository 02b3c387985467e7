//! Bytes → tables: gzip sniffing and streaming inflate, then the tolerant streaming JSON parser.

pub mod gzip;
pub mod json;
pub mod kineto;
pub mod split;
pub mod value;
pub mod wire;

pub use kineto::{IngestError, Limits, Mark, TraceParser};
pub use split::{CutSizes, Cutter, Merger};

use crate::model::{DiagKind, RankTrace};

/// How far ingest of one file has come (for progress bars).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct Progress {
    /// Input bytes fed (compressed bytes for gzip).
    pub input_bytes: u64,
    /// JSON text bytes parsed.
    pub text_bytes: u64,
    /// Trace events parsed.
    pub events: u64,
}

enum Mode {
    /// Waiting for enough bytes to tell gzip from text.
    Sniff(Vec<u8>, Text),
    Plain(Text),
    Gzip(Box<gzip::Gunzip>, Text),
    Empty,
}

impl std::fmt::Debug for Mode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Mode::Sniff(..) => "Sniff",
            Mode::Plain(_) => "Plain",
            Mode::Gzip(..) => "Gzip",
            Mode::Empty => "Empty",
        })
    }
}

/// Where the text goes: one parser, or (cutting) the frame parser and the middle pieces.
#[derive(Debug)]
struct Text {
    parser: TraceParser,
    cut: Option<Box<Cutting>>,
    /// The text's first [`HEAD_BYTES`], for naming a format that is not a trace
    /// ([`crate::input::identify`]).
    head: Vec<u8>,
}

/// Bytes of a file's start (as read, and as text) that name a format that is not a trace.
const HEAD_BYTES: usize = 4 << 10;

#[derive(Debug)]
struct Cutting {
    cutter: split::Cutter,
    mark: Option<Mark>,
    /// Made from the frame's head at the mark, until taken ([`FileIngest::take_merger`]).
    merger: Option<split::Merger>,
    pieces: Vec<Vec<u8>>,
}

impl Text {
    fn new(parser: TraceParser) -> Self {
        Text { parser, cut: None, head: Vec::new() }
    }

    fn feed(&mut self, b: &[u8]) {
        if self.head.len() < HEAD_BYTES {
            let take = (HEAD_BYTES - self.head.len()).min(b.len());
            self.head.extend_from_slice(&b[..take]);
        }
        match &mut self.cut {
            None => self.parser.feed(b),
            Some(c) => {
                let Cutting { cutter, mark, merger, pieces } = &mut **c;
                let parser = &mut self.parser;
                cutter.feed(b, &mut |cut| take_cut(cut, parser, mark, merger, pieces));
            }
        }
    }

    /// The end of the text: the cutter's tail goes to the frame.
    fn end(&mut self) {
        if let Some(c) = &mut self.cut {
            let Cutting { cutter, mark, merger, pieces } = &mut **c;
            let parser = &mut self.parser;
            cutter.finish(&mut |cut| take_cut(cut, parser, mark, merger, pieces));
        }
    }

    fn text_bytes(&self) -> u64 {
        self.cut.as_ref().map_or_else(|| self.parser.text_bytes(), |c| c.cutter.text_bytes())
    }
}

fn take_cut(
    cut: split::Cut<'_>,
    parser: &mut TraceParser,
    mark: &mut Option<Mark>,
    merger: &mut Option<split::Merger>,
    pieces: &mut Vec<Vec<u8>>,
) -> bool {
    match cut {
        split::Cut::Frame(b) => parser.feed(b),
        split::Cut::Mark => {
            *mark = parser.mark();
            *merger = mark.clone().and_then(|m| split::Merger::new(parser.tables(), m));
            return mark.is_some();
        }
        split::Cut::Piece(v) => pieces.push(v),
    }
    true
}

/// How a cutting ingest ([`FileIngest::cutting`]) ended.
#[derive(Debug)]
pub enum Cutout {
    /// Nothing was cut: this is the serial parse's trace.
    Whole(RankTrace),
    /// Cut: [`split::merge`] the frame with the pieces (each parsed as `[` piece `]`, in the
    /// order they were taken) over `text_bytes` of text, then set `input_bytes`; or end the
    /// [`FileIngest::take_merger`] merger with the frame.
    Cut { frame: RankTrace, mark: Mark, text_bytes: u64, input_bytes: u64 },
    /// Cutting failed after pieces were handed on: parse the file serially.
    Doubt,
}

/// Ingest of one file from chunks of any size. gzip is recognised by its magic bytes
/// (`1f 8b`), never by the file name, and inflated as a stream (concatenated members too; see
/// [`gzip`] for what happens to a damaged one).
#[derive(Debug)]
pub struct FileIngest {
    mode: Mode,
    input_bytes: u64,
    /// The file's first [`HEAD_BYTES`] as read (gzip or not).
    raw_head: Vec<u8>,
    /// A format that is not a trace, named from the head once it is known
    /// ([`crate::input::identify`]): a refusal says its name and what to give instead.
    foreign: Option<crate::input::Foreign>,
    /// Whether the head was looked at.
    identified: bool,
    /// The head is a JSON format that is not a trace: nothing more is read.
    stopped: bool,
}

impl FileIngest {
    pub fn new(source_name: &str) -> Self {
        Self::with_limits(source_name, Limits::default())
    }

    /// Ingest with other parser [`Limits`].
    pub fn with_limits(source_name: &str, limits: Limits) -> Self {
        FileIngest {
            mode: Mode::Sniff(Vec::new(), Text::new(TraceParser::with_limits(source_name, limits))),
            input_bytes: 0,
            raw_head: Vec::new(),
            foreign: None,
            identified: false,
            stopped: false,
        }
    }

    /// Keeps every event row's source `args` ([`TraceParser::keep_args`]), for the exports;
    /// call before the first byte. A cutting ingest then keeps its text whole.
    pub fn keep_args(&mut self) {
        match &mut self.mode {
            Mode::Sniff(_, t) | Mode::Plain(t) | Mode::Gzip(_, t) => {
                t.parser.keep_args();
                t.cut = None;
            }
            Mode::Empty => {}
        }
    }

    /// Ingest that cuts the text for parsing on several cores ([`split::Cutter`]): take the
    /// middle pieces with [`FileIngest::take_pieces`] as they come (after each feed) and end
    /// with [`FileIngest::finish_cut`]. Useful where the text cannot be read at offsets (gzip,
    /// a pipe, a stream); the frame keeps gzip's handling and messages.
    pub fn cutting(source_name: &str, sizes: split::CutSizes) -> Self {
        let mut t = Text::new(TraceParser::new(source_name));
        t.cut = Some(Box::new(Cutting {
            cutter: split::Cutter::new(sizes),
            mark: None,
            merger: None,
            pieces: Vec::new(),
        }));
        FileIngest {
            mode: Mode::Sniff(Vec::new(), t),
            input_bytes: 0,
            raw_head: Vec::new(),
            foreign: None,
            identified: false,
            stopped: false,
        }
    }

    /// The middle pieces cut since the last call (cutting ingest only).
    pub fn take_pieces(&mut self) -> Vec<Vec<u8>> {
        match &mut self.mode {
            Mode::Sniff(_, t) | Mode::Plain(t) | Mode::Gzip(_, t) => {
                t.cut.as_mut().map(|c| std::mem::take(&mut c.pieces)).unwrap_or_default()
            }
            Mode::Empty => Vec::new(),
        }
    }

    /// Once the frame is marked (before the first piece), a [`split::Merger`] started from its
    /// head, once (cutting ingest only): the pieces can be merged as they are parsed, and
    /// [`split::Merger::finish`] ends it with the frame of [`Cutout::Cut`].
    pub fn take_merger(&mut self) -> Option<split::Merger> {
        match &mut self.mode {
            Mode::Sniff(_, t) | Mode::Plain(t) | Mode::Gzip(_, t) => {
                t.cut.as_mut().and_then(|c| c.merger.take())
            }
            Mode::Empty => None,
        }
    }

    /// Feeds the next chunk of the file's bytes.
    pub fn feed(&mut self, chunk: &[u8]) {
        self.input_bytes += chunk.len() as u64;
        if self.stopped {
            return;
        }
        if self.raw_head.len() < HEAD_BYTES {
            let take = (HEAD_BYTES - self.raw_head.len()).min(chunk.len());
            self.raw_head.extend_from_slice(&chunk[..take]);
        }
        let mode = std::mem::replace(&mut self.mode, Mode::Empty);
        self.mode = match mode {
            Mode::Sniff(mut head, mut parser) => {
                // The first two bytes decide; a first chunk that holds them is read where it
                // lies (not copied: it is usually a whole read buffer).
                let bytes = if head.is_empty() && chunk.len() >= 2 {
                    chunk
                } else {
                    head.extend_from_slice(chunk);
                    &head[..]
                };
                if bytes.len() < 2 {
                    Mode::Sniff(head, parser)
                } else if bytes.starts_with(&[0x1f, 0x8b]) {
                    let mut g = Box::<gzip::Gunzip>::default();
                    g.feed(bytes, &mut |piece| parser.feed(piece));
                    Mode::Gzip(g, parser)
                } else {
                    parser.feed(bytes);
                    Mode::Plain(parser)
                }
            }
            Mode::Plain(mut p) => {
                p.feed(chunk);
                Mode::Plain(p)
            }
            Mode::Gzip(mut g, mut p) => {
                // Once the text is found not to be a trace, inflating more is pointless.
                if p.parser.failed().is_none() {
                    g.feed(chunk, &mut |piece| p.feed(piece));
                }
                Mode::Gzip(g, p)
            }
            Mode::Empty => Mode::Empty,
        };
        if !self.identified && self.text_head().is_some_and(|h| h.len() >= HEAD_BYTES) {
            self.identify();
        }
    }

    /// The text's first bytes, once the mode is decided.
    fn text_head(&self) -> Option<&[u8]> {
        match &self.mode {
            Mode::Plain(t) | Mode::Gzip(_, t) => Some(&t.head),
            Mode::Sniff(..) | Mode::Empty => None,
        }
    }

    /// Looks at the head once: a JSON format that is not a trace (an Execution Trace, a
    /// rocprofv3 file: often gigabytes) stops the input at once; a binary one is named when the
    /// parser refuses it.
    fn identify(&mut self) {
        self.identified = true;
        let name = self.source_name().to_string();
        let text = self.text_head().map(<[u8]>::to_vec).unwrap_or_else(|| self.raw_head.clone());
        self.foreign = crate::input::identify(&name, &self.raw_head, &text);
        let json = text.iter().copied().find(|b| !b.is_ascii_whitespace()) == Some(b'{');
        self.stopped = json && self.foreign.is_some();
    }

    fn source_name(&self) -> &str {
        match &self.mode {
            Mode::Sniff(_, t) | Mode::Plain(t) | Mode::Gzip(_, t) => t.parser.source(),
            Mode::Empty => "",
        }
    }

    /// The refusal of a format that is not a trace: the file, and what it is.
    fn foreign_error(&self, f: crate::input::Foreign) -> IngestError {
        IngestError::NotATrace {
            source_name: self.source_name().to_string(),
            offset: 0,
            reason: f.to_string(),
        }
    }

    pub fn progress(&self) -> Progress {
        let p = match &self.mode {
            Mode::Sniff(_, p) | Mode::Plain(p) | Mode::Gzip(_, p) => Some(p),
            Mode::Empty => None,
        };
        Progress {
            input_bytes: self.input_bytes,
            text_bytes: p.map_or(0, Text::text_bytes),
            events: p.map_or(0, |t| t.parser.events_so_far()),
        }
    }

    /// Whether the input was already found not to be a trace.
    pub fn failed(&self) -> bool {
        if self.stopped {
            return true;
        }
        match &self.mode {
            Mode::Sniff(_, p) | Mode::Plain(p) | Mode::Gzip(_, p) => p.parser.failed().is_some(),
            Mode::Empty => false,
        }
    }

    /// Ends the input: returns the raw (not yet normalized) trace.
    pub fn finish(self) -> Result<RankTrace, IngestError> {
        self.end().0
    }

    /// Ends a cutting ingest ([`FileIngest::cutting`]).
    pub fn finish_cut(self) -> Result<Cutout, IngestError> {
        let input_bytes = self.input_bytes;
        let (trace, cut) = self.end();
        let trace = trace?;
        let Some(c) = cut else { return Ok(Cutout::Whole(trace)) };
        if c.cutter.failed() {
            return Ok(Cutout::Doubt);
        }
        match c.mark {
            Some(mark) if !c.cutter.whole() => {
                Ok(Cutout::Cut { frame: trace, mark, text_bytes: c.cutter.text_bytes(), input_bytes })
            }
            _ => Ok(Cutout::Whole(trace)),
        }
    }

    fn end(mut self) -> (Result<RankTrace, IngestError>, Option<Box<Cutting>>) {
        if !self.identified {
            if let Mode::Sniff(head, t) = &mut self.mode {
                // A file shorter than two bytes never left the sniff: its text is its bytes.
                t.head = head.clone();
            }
            self.identify();
        }
        match (self.foreign, self.stopped) {
            (Some(f), true) => return (Err(self.foreign_error(f)), None),
            (Some(f), false) => {
                let e = self.foreign_error(f);
                let (r, cut) = self.end_text();
                return (r.map_err(|_| e), cut);
            }
            (None, _) => {}
        }
        self.end_text()
    }

    fn end_text(mut self) -> (Result<RankTrace, IngestError>, Option<Box<Cutting>>) {
        let input_bytes = self.input_bytes;
        let (mut text, gz) = match std::mem::replace(&mut self.mode, Mode::Empty) {
            Mode::Sniff(head, mut p) => {
                if head.starts_with(&[0x1f]) && head.len() == 1 {
                    return (
                        Err(IngestError::NotATrace {
                            source_name: p.parser.source().to_string(),
                            offset: 0,
                            reason: "one byte, the start of a gzip header: the file was cut".to_string(),
                        }),
                        None,
                    );
                }
                p.feed(&head);
                (p, None)
            }
            Mode::Plain(p) => (p, None),
            Mode::Gzip(mut g, p) => {
                let unfinished = g.finish();
                (p, Some((g, unfinished)))
            }
            Mode::Empty => (Text::new(TraceParser::new("")), None),
        };
        text.end();
        let text_bytes = text.text_bytes();
        let Text { parser, cut, .. } = text;
        if let Some((g, unfinished)) = &gz {
            if text_bytes == 0 && parser.failed().is_none() {
                // Nothing inflated: say why, rather than "the file is empty".
                let why = g
                    .fault
                    .as_ref()
                    .map(|(at, m)| format!("the gzip stream is corrupt at compressed byte {at} ({m})"))
                    .or(unfinished.clone())
                    .unwrap_or_else(|| "the gzip stream holds no text".to_string());
                return (
                    Err(IngestError::NotATrace {
                        source_name: parser.source().to_string(),
                        offset: 0,
                        reason: format!("{why}; nothing could be inflated"),
                    }),
                    cut,
                );
            }
        }
        let mut trace = match parser.finish() {
            Ok(t) => t,
            Err(e) => return (Err(e), cut),
        };
        trace.input_bytes = input_bytes;
        if let Some((g, unfinished)) = gz {
            trace.meta.gzip = true;
            if let Some((at, msg)) = &g.fault {
                let n = g.faults;
                trace.diagnostics.add(DiagKind::GzipCorrupt, Some(text_bytes), || {
                    format!(
                        "the gzip stream is damaged: {msg} (first at compressed byte {at}; {n} fault(s) in all); every byte that inflated was read ({text_bytes} bytes of text), and inflation resumed at the next gzip member where there was one"
                    )
                });
            } else if let Some(m) = unfinished {
                trace.diagnostics.add(DiagKind::GzipCorrupt, Some(text_bytes), || {
                    format!("{m}; the {text_bytes} bytes inflated before the end were read")
                });
            }
        }
        (Ok(trace), cut)
    }
}

/// Ingests a whole file held in memory, in one chunk.
pub fn ingest_bytes(source_name: &str, bytes: &[u8]) -> Result<RankTrace, IngestError> {
    let mut f = FileIngest::new(source_name);
    f.feed(bytes);
    f.finish()
}
