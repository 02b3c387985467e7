//! Bytes → tables: gzip sniffing and streaming inflate, then the tolerant streaming JSON parser.

pub mod gzip;
pub mod json;
pub mod kineto;
pub mod split;
pub mod value;

pub use kineto::{IngestError, Limits, Mark, TraceParser};

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
    Sniff(Vec<u8>, TraceParser),
    Plain(TraceParser),
    Gzip(Box<gzip::Gunzip>, TraceParser),
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

/// Ingest of one file from chunks of any size. gzip is recognised by its magic bytes
/// (`1f 8b`), never by the file name, and inflated as a stream (concatenated members too; see
/// [`gzip`] for what happens to a damaged one).
#[derive(Debug)]
pub struct FileIngest {
    mode: Mode,
    input_bytes: u64,
}

impl FileIngest {
    pub fn new(source_name: &str) -> Self {
        Self::with_limits(source_name, Limits::default())
    }

    /// Ingest with other parser [`Limits`].
    pub fn with_limits(source_name: &str, limits: Limits) -> Self {
        FileIngest {
            mode: Mode::Sniff(Vec::new(), TraceParser::with_limits(source_name, limits)),
            input_bytes: 0,
        }
    }

    /// Feeds the next chunk of the file's bytes.
    pub fn feed(&mut self, chunk: &[u8]) {
        self.input_bytes += chunk.len() as u64;
        let mode = std::mem::replace(&mut self.mode, Mode::Empty);
        self.mode = match mode {
            Mode::Sniff(mut head, mut parser) => {
                head.extend_from_slice(chunk);
                if head.len() < 2 {
                    Mode::Sniff(head, parser)
                } else if head.starts_with(&[0x1f, 0x8b]) {
                    let mut g = Box::<gzip::Gunzip>::default();
                    g.feed(&head, &mut |piece| parser.feed(piece));
                    Mode::Gzip(g, parser)
                } else {
                    parser.feed(&head);
                    Mode::Plain(parser)
                }
            }
            Mode::Plain(mut p) => {
                p.feed(chunk);
                Mode::Plain(p)
            }
            Mode::Gzip(mut g, mut p) => {
                // Once the text is found not to be a trace, inflating more is pointless.
                if p.failed().is_none() {
                    g.feed(chunk, &mut |piece| p.feed(piece));
                }
                Mode::Gzip(g, p)
            }
            Mode::Empty => Mode::Empty,
        };
    }

    pub fn progress(&self) -> Progress {
        let p = match &self.mode {
            Mode::Sniff(_, p) | Mode::Plain(p) | Mode::Gzip(_, p) => Some(p),
            Mode::Empty => None,
        };
        Progress {
            input_bytes: self.input_bytes,
            text_bytes: p.map_or(0, TraceParser::text_bytes),
            events: p.map_or(0, TraceParser::events_so_far),
        }
    }

    /// Whether the input was already found not to be a trace.
    pub fn failed(&self) -> bool {
        match &self.mode {
            Mode::Sniff(_, p) | Mode::Plain(p) | Mode::Gzip(_, p) => p.failed().is_some(),
            Mode::Empty => false,
        }
    }

    /// Ends the input: returns the raw (not yet normalized) trace.
    pub fn finish(mut self) -> Result<RankTrace, IngestError> {
        let input_bytes = self.input_bytes;
        let (parser, gz) = match std::mem::replace(&mut self.mode, Mode::Empty) {
            Mode::Sniff(head, mut p) => {
                if head.starts_with(&[0x1f]) && head.len() == 1 {
                    return Err(IngestError::NotATrace {
                        source_name: p.source().to_string(),
                        offset: 0,
                        reason: "one byte, the start of a gzip header: the file was cut".to_string(),
                    });
                }
                p.feed(&head);
                (p, None)
            }
            Mode::Plain(p) => (p, None),
            Mode::Gzip(mut g, p) => {
                let unfinished = g.finish();
                (p, Some((g, unfinished)))
            }
            Mode::Empty => (TraceParser::new(""), None),
        };
        let text_bytes = parser.text_bytes();
        if let Some((g, unfinished)) = &gz {
            if text_bytes == 0 && parser.failed().is_none() {
                // Nothing inflated: say why, rather than "the file is empty".
                let why = g
                    .fault
                    .as_ref()
                    .map(|(at, m)| format!("the gzip stream is corrupt at compressed byte {at} ({m})"))
                    .or(unfinished.clone())
                    .unwrap_or_else(|| "the gzip stream holds no text".to_string());
                return Err(IngestError::NotATrace {
                    source_name: parser.source().to_string(),
                    offset: 0,
                    reason: format!("{why}; nothing could be inflated"),
                });
            }
        }
        let mut trace = parser.finish()?;
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
        Ok(trace)
    }
}

/// Ingests a whole file held in memory, in one chunk.
pub fn ingest_bytes(source_name: &str, bytes: &[u8]) -> Result<RankTrace, IngestError> {
    let mut f = FileIngest::new(source_name);
    f.feed(bytes);
    f.finish()
}
