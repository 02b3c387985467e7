//! Bytes → tables: gzip sniffing and streaming inflate, then the tolerant streaming JSON parser.

pub mod json;
pub mod kineto;
pub mod value;

use std::io::Write;

pub use kineto::{IngestError, TraceParser};

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

/// Receives inflated bytes and hands them to the parser.
#[derive(Debug)]
struct Sink {
    parser: Option<TraceParser>,
}

impl Write for Sink {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        if let Some(p) = self.parser.as_mut() {
            p.feed(buf);
        }
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

enum Mode {
    /// Waiting for enough bytes to tell gzip from text.
    Sniff(Vec<u8>, TraceParser),
    Plain(TraceParser),
    Gzip(Box<flate2::write::MultiGzDecoder<Sink>>),
    /// The gzip stream failed; the parser keeps what it had.
    Broken(TraceParser),
    Empty,
}

impl std::fmt::Debug for Mode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Mode::Sniff(..) => "Sniff",
            Mode::Plain(_) => "Plain",
            Mode::Gzip(_) => "Gzip",
            Mode::Broken(_) => "Broken",
            Mode::Empty => "Empty",
        })
    }
}

/// Ingest of one file from chunks of any size. gzip is recognised by its magic bytes
/// (`1f 8b`), never by the file name, and inflated as a stream (concatenated gzip members too).
#[derive(Debug)]
pub struct FileIngest {
    mode: Mode,
    input_bytes: u64,
    gzip_error: Option<(u64, String)>,
}

impl FileIngest {
    pub fn new(source_name: &str) -> Self {
        FileIngest {
            mode: Mode::Sniff(Vec::new(), TraceParser::new(source_name)),
            input_bytes: 0,
            gzip_error: None,
        }
    }

    /// Feeds the next chunk of the file's bytes.
    pub fn feed(&mut self, chunk: &[u8]) {
        self.input_bytes += chunk.len() as u64;
        let mode = std::mem::replace(&mut self.mode, Mode::Empty);
        self.mode = match mode {
            Mode::Sniff(mut head, parser) => {
                head.extend_from_slice(chunk);
                if head.len() < 2 {
                    Mode::Sniff(head, parser)
                } else {
                    self.start(head, parser)
                }
            }
            Mode::Plain(mut p) => {
                p.feed(chunk);
                Mode::Plain(p)
            }
            Mode::Gzip(dec) => self.inflate(dec, chunk),
            other => other,
        };
    }

    fn start(&mut self, head: Vec<u8>, mut parser: TraceParser) -> Mode {
        if head.starts_with(&[0x1f, 0x8b]) {
            let dec = Box::new(flate2::write::MultiGzDecoder::new(Sink { parser: Some(parser) }));
            self.inflate(dec, &head)
        } else {
            parser.feed(&head);
            Mode::Plain(parser)
        }
    }

    fn inflate(&mut self, mut dec: Box<flate2::write::MultiGzDecoder<Sink>>, chunk: &[u8]) -> Mode {
        if let Err(e) = dec.write_all(chunk) {
            self.gzip_error = Some((self.input_bytes, e.to_string()));
            return match dec.get_mut().parser.take() {
                Some(p) => Mode::Broken(p),
                None => Mode::Empty,
            };
        }
        // The parser found the text is not a trace: stop inflating.
        if dec.get_ref().parser.as_ref().is_some_and(|p| p.failed().is_some()) {
            return match dec.get_mut().parser.take() {
                Some(p) => Mode::Plain(p),
                None => Mode::Empty,
            };
        }
        Mode::Gzip(dec)
    }

    pub fn progress(&self) -> Progress {
        let p = match &self.mode {
            Mode::Sniff(_, p) | Mode::Plain(p) | Mode::Broken(p) => Some(p),
            Mode::Gzip(d) => d.get_ref().parser.as_ref(),
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
            Mode::Sniff(_, p) | Mode::Plain(p) | Mode::Broken(p) => p.failed().is_some(),
            Mode::Gzip(d) => d.get_ref().parser.as_ref().is_some_and(|p| p.failed().is_some()),
            Mode::Empty => false,
        }
    }

    /// Ends the input: returns the raw (not yet normalized) trace.
    pub fn finish(mut self) -> Result<RankTrace, IngestError> {
        let input_bytes = self.input_bytes;
        let mut gzip = false;
        let parser = match std::mem::replace(&mut self.mode, Mode::Empty) {
            Mode::Sniff(head, mut p) => {
                p.feed(&head);
                p
            }
            Mode::Plain(p) => p,
            Mode::Broken(p) => {
                gzip = true;
                p
            }
            Mode::Gzip(mut dec) => {
                gzip = true;
                if let Err(e) = dec.try_finish() {
                    self.gzip_error = Some((input_bytes, e.to_string()));
                }
                match dec.get_mut().parser.take() {
                    Some(p) => p,
                    None => TraceParser::new(""),
                }
            }
            Mode::Empty => TraceParser::new(""),
        };
        let text_bytes = parser.text_bytes();
        let mut trace = parser.finish()?;
        trace.meta.gzip = gzip;
        trace.input_bytes = input_bytes;
        if let Some((at, msg)) = self.gzip_error {
            trace.diagnostics.add(DiagKind::GzipCorrupt, Some(text_bytes), || {
                format!(
                    "the gzip stream is corrupt or cut near compressed byte {at} ({msg}); the {text_bytes} bytes inflated before it were read"
                )
            });
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
