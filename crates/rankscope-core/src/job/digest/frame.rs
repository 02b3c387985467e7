//! The envelope both digest formats share: magic bytes, a format version (u16 little-endian),
//! then one gzip member, read back as a stream that never holds the inflated content whole.

use std::io::{Read, Write};

/// Why framed bytes did not open (the caller names its format in the message).
pub(in crate::job) enum Unframed {
    /// Cut inside the header, or a gzip stream that does not inflate: at this byte of the input.
    Damaged { offset: u64, reason: String },
    /// Another format version.
    Version(u16),
    /// It inflates beyond this limit (the caller's, or [`ratio_cap`] of its size).
    TooLarge(u64),
}

/// The envelope of a part and of a job digest: `magic`, the format version (u16 little-endian),
/// then one gzip member written by `body` (buffered: serde_json writes token by token, and a
/// deflate call per token made encoding ~25× slower than compressing). Writing into a `Vec`
/// cannot fail. Level 3, not the default 6: on a 1,024-rank job of 100 steps (1.1 GB of JSON)
/// deflate took 15 s at 6, 5.8 s at 3 and 2.9 s at 1, for a digest of 114, 123 and 148 MB
/// (BENCHMARKS.md); readers take any level.
pub(in crate::job) fn frame(
    magic: &[u8],
    version: u16,
    capacity: usize,
    body: impl FnOnce(&mut dyn Write),
) -> Vec<u8> {
    let mut out = Vec::with_capacity(capacity);
    out.extend_from_slice(magic);
    out.extend_from_slice(&version.to_le_bytes());
    let mut gz = std::io::BufWriter::with_capacity(
        1 << 16,
        flate2::write::GzEncoder::new(out, flate2::Compression::new(3)),
    );
    body(&mut gz);
    gz.into_inner().ok().and_then(|g| g.finish().ok()).unwrap_or_default()
}

/// The framed content as a reader: the inflated content taken as it is needed, never held whole (a
/// 1,024-rank job of 100 steps inflates to 1.1 GB). Every read past the content's end checks the
/// gzip trailer, so [`Unframer::rest`] must end a reading.
pub(in crate::job) struct Unframer<'a> {
    gz: std::io::BufReader<std::io::Take<flate2::read::GzDecoder<Counted<'a>>>>,
    head: usize,
    limit: u64,
    /// Inflated bytes taken so far.
    pub(in crate::job) at: u64,
}

/// The most `n` framed bytes may inflate to, whatever the caller's limit: 256 times their size,
/// and 64 MiB at least. deflate can reach about 1,000 to 1; the JSON of parts and digests
/// shrinks about 10 to 1 (a trace part) and rarely 30, so a real input is far below, and a bomb
/// (a 1 MB part of 1 GB of blanks) costs at most 256 times its size.
pub(in crate::job) fn ratio_cap(n: usize) -> u64 {
    (n as u64).saturating_mul(256).max(64 << 20)
}

/// The [`Unframer`] of framed `bytes` whose magic (`magic_len` bytes) was checked.
pub(in crate::job) fn unframer(
    bytes: &[u8],
    magic_len: usize,
    version: u16,
    limit: u64,
) -> Result<Unframer<'_>, Unframed> {
    let head = magic_len + 2;
    let found = match bytes.get(magic_len..head) {
        Some(&[a, b]) => u16::from_le_bytes([a, b]),
        _ => {
            return Err(Unframed::Damaged {
                offset: bytes.len() as u64,
                reason: "ends inside the header".into(),
            })
        }
    };
    if found != version {
        return Err(Unframed::Version(found));
    }
    let limit = limit.min(ratio_cap(bytes.len()));
    let counted = Counted { inner: bytes.get(head..).unwrap_or_default(), read: 0 };
    let gz = flate2::read::GzDecoder::new(counted).take(limit.saturating_add(1));
    Ok(Unframer { gz: std::io::BufReader::with_capacity(1 << 16, gz), head, limit, at: 0 })
}

/// A line read by [`Unframer::line_led`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(in crate::job) enum Led {
    /// Begun as it should be and ended by a `\n` (not kept).
    Whole,
    /// The content ended before a `\n`.
    Cut,
    /// Its first bytes are not what the line must begin with; nothing more was read.
    Unlike,
}

impl Unframer<'_> {
    fn fault(&self, e: &std::io::Error) -> Unframed {
        let read = self.gz.get_ref().get_ref().get_ref().read;
        Unframed::Damaged { offset: self.head as u64 + read, reason: e.to_string() }
    }

    fn took(&mut self, n: usize) -> Result<(), Unframed> {
        self.at += n as u64;
        if self.at > self.limit {
            return Err(Unframed::TooLarge(self.limit));
        }
        Ok(())
    }

    /// The next line as [`Unframer::line`], judged by its first bytes before the rest is read:
    /// a line that does not begin with `lead` is [`Led::Unlike`] after `lead.len()` bytes, so
    /// a gigabyte of blanks where a line of JSON should be is refused from its head, not held.
    pub(in crate::job) fn line_led(&mut self, buf: &mut Vec<u8>, lead: &[u8]) -> Result<Led, Unframed> {
        use std::io::BufRead;
        buf.clear();
        let head = (&mut self.gz).take(lead.len() as u64).read_until(b'\n', buf);
        let n = head.map_err(|e| self.fault(&e))?;
        self.took(n)?;
        if n == 0 {
            return Ok(Led::Cut);
        }
        if buf.as_slice() != lead {
            return Ok(Led::Unlike);
        }
        let rest = self.gz.read_until(b'\n', buf);
        let n = rest.map_err(|e| self.fault(&e))?;
        self.took(n)?;
        if buf.last() == Some(&b'\n') {
            buf.pop();
            return Ok(Led::Whole);
        }
        Ok(Led::Cut)
    }

    /// The next line into `buf` (cleared first), without its `\n`: `false` when the content
    /// ended before a `\n` (`buf` holds what came before the end).
    pub(in crate::job) fn line(&mut self, buf: &mut Vec<u8>) -> Result<bool, Unframed> {
        use std::io::BufRead;
        buf.clear();
        let n = match self.gz.read_until(b'\n', buf) {
            Ok(n) => n,
            Err(e) => return Err(self.fault(&e)),
        };
        self.took(n)?;
        if buf.last() == Some(&b'\n') {
            buf.pop();
            return Ok(true);
        }
        Ok(false)
    }

    /// The next `n` bytes, or fewer where the content ends.
    pub(in crate::job) fn bytes(&mut self, n: u64) -> Result<Vec<u8>, Unframed> {
        let mut out = Vec::new();
        if let Err(e) = (&mut self.gz).take(n).read_to_end(&mut out) {
            return Err(self.fault(&e));
        }
        self.took(out.len())?;
        Ok(out)
    }

    /// Appends the next `n` bytes (or fewer where the content ends) to `out`, in place.
    pub(in crate::job) fn append(&mut self, out: &mut Vec<u8>, n: u64) -> Result<(), Unframed> {
        let got = match (&mut self.gz).take(n).read_to_end(out) {
            Ok(k) => k,
            Err(e) => return Err(self.fault(&e)),
        };
        self.took(got)
    }

    /// Appends the rest of the content to `out` (checking the gzip trailer), never beyond the
    /// limit: what it appended.
    pub(in crate::job) fn append_rest(&mut self, out: &mut Vec<u8>) -> Result<usize, Unframed> {
        let n = match self.gz.read_to_end(out) {
            Ok(n) => n,
            Err(e) => return Err(self.fault(&e)),
        };
        self.took(n)?;
        Ok(n)
    }

    /// Reads to the end of the content (checking the gzip trailer): the bytes that were left.
    pub(in crate::job) fn rest(&mut self) -> Result<u64, Unframed> {
        let n = match std::io::copy(&mut self.gz, &mut std::io::sink()) {
            Ok(n) => n,
            Err(e) => return Err(self.fault(&e)),
        };
        self.took(usize::try_from(n).unwrap_or(usize::MAX))?;
        Ok(n)
    }
}

/// A reader that counts the bytes taken from it (the offset of a gzip fault).
struct Counted<'a> {
    inner: &'a [u8],
    read: u64,
}

impl Read for Counted<'_> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.read += n as u64;
        Ok(n)
    }
}

/// `rankscope <version>`: who wrote a part or a digest (information; the format version decides).
pub(in crate::job) fn producer() -> String {
    format!("rankscope {}", env!("CARGO_PKG_VERSION"))
}
