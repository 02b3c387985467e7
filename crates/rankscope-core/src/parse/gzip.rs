//! Streaming gzip (RFC 1952) in front of the parser, written out rather than left to a generic
//! decoder so that damage is handled the way the rest of ingest handles it:
//! - every byte that inflates before a fault reaches the parser, whatever the read size (the
//!   writer decoder kept the output of the failing call, so the count depended on it);
//! - after a corrupt deflate stream, the input is searched for the next gzip member
//!   (`1f 8b 08`), and inflation resumes there (concatenated and parallel-gzip files recover
//!   every later member; the parser resynchronises on the text);
//! - a file cut inside its header says so, instead of "the file is empty";
//! - each member's CRC-32 and length are checked (a mismatch is reported, the text is kept).

use miniz_oxide::inflate::stream::{inflate, InflateState};
use miniz_oxide::{DataFormat, MZError, MZFlush, MZStatus};

/// Longest gzip header accepted (a header names a file and may carry a comment).
const MAX_HEADER: usize = 64 << 10;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum St {
    /// Reading a member header (bytes collected in `held`).
    Header,
    /// Inflating a member's deflate stream.
    Body,
    /// Reading a member's 8-byte trailer.
    Trailer,
    /// After damage: looking for the next member's magic bytes.
    Seek,
}

/// One gzip file being inflated as a stream.
pub struct Gunzip {
    st: St,
    held: Vec<u8>,
    inflater: Box<InflateState>,
    crc: crc32fast::Hasher,
    size: u32,
    /// Compressed bytes fed so far.
    pub input_bytes: u64,
    /// Bytes inflated so far.
    pub output_bytes: u64,
    /// Members begun.
    pub members: u32,
    /// The first problem: compressed offset and what happened.
    pub fault: Option<(u64, String)>,
    /// Faults in all.
    pub faults: u32,
    out: Vec<u8>,
}

impl std::fmt::Debug for Gunzip {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Gunzip")
            .field("st", &self.st)
            .field("input_bytes", &self.input_bytes)
            .field("output_bytes", &self.output_bytes)
            .field("fault", &self.fault)
            .finish()
    }
}

impl Default for Gunzip {
    fn default() -> Self {
        Gunzip {
            st: St::Header,
            held: Vec::new(),
            inflater: InflateState::new_boxed(DataFormat::Raw),
            crc: crc32fast::Hasher::new(),
            size: 0,
            input_bytes: 0,
            output_bytes: 0,
            members: 0,
            fault: None,
            faults: 0,
            out: vec![0; 64 << 10],
        }
    }
}

/// The length of a complete gzip header at the start of `h`: `Ok(None)` when more bytes are
/// needed, `Err` when it is not a gzip header.
fn header_len(h: &[u8]) -> Result<Option<usize>, &'static str> {
    if h.len() < 10 {
        if !h.is_empty() && ![0x1f, 0x8b, 8].starts_with(&h[..h.len().min(3)]) {
            return Err("not a gzip header");
        }
        return Ok(None);
    }
    if h[0] != 0x1f || h[1] != 0x8b || h[2] != 8 {
        return Err("not a gzip header (or an unknown compression method)");
    }
    let flags = h[3];
    let mut p = 10;
    if flags & 4 != 0 {
        let Some(x) = h.get(p..p + 2) else { return Ok(None) };
        p += 2 + usize::from(u16::from_le_bytes([x[0], x[1]]));
    }
    for bit in [8u8, 16] {
        if flags & bit != 0 {
            match h.get(p..).and_then(|r| memchr::memchr(0, r)) {
                Some(z) => p += z + 1,
                None => return Ok(None),
            }
        }
    }
    if flags & 2 != 0 {
        p += 2;
    }
    Ok((p <= h.len()).then_some(p))
}

impl Gunzip {
    fn fail(&mut self, at: u64, what: String) {
        self.faults += 1;
        if self.fault.is_none() {
            self.fault = Some((at, what));
        }
    }

    /// Inflates `input`, handing every inflated piece to `sink`.
    pub fn feed(&mut self, input: &[u8], sink: &mut dyn FnMut(&[u8])) {
        let mut inp = input;
        while !inp.is_empty() {
            let at = self.input_bytes;
            match self.st {
                St::Header | St::Trailer => {
                    let want = if self.st == St::Trailer { 8 } else { MAX_HEADER };
                    let take = inp.len().min(want.saturating_sub(self.held.len()).max(1));
                    // Take only what the header or trailer needs, so that what follows it is
                    // inflated from the right place.
                    let before = self.held.len();
                    self.held.extend_from_slice(&inp[..take]);
                    let used = match self.st {
                        St::Trailer => {
                            if self.held.len() < 8 {
                                take
                            } else {
                                let t = std::mem::take(&mut self.held);
                                let crc = u32::from_le_bytes([t[0], t[1], t[2], t[3]]);
                                let size = u32::from_le_bytes([t[4], t[5], t[6], t[7]]);
                                let mine = std::mem::take(&mut self.crc).finalize();
                                if crc != mine || size != self.size {
                                    self.fail(
                                        at,
                                        format!("member {} fails its CRC-32 or length check", self.members),
                                    );
                                }
                                self.st = St::Header;
                                8 - before
                            }
                        }
                        _ => match header_len(&self.held) {
                            Ok(Some(n)) => {
                                self.held.clear();
                                self.members += 1;
                                self.inflater = InflateState::new_boxed(DataFormat::Raw);
                                self.crc = crc32fast::Hasher::new();
                                self.size = 0;
                                self.st = St::Body;
                                n - before
                            }
                            Ok(None) if self.held.len() >= MAX_HEADER => {
                                self.held.clear();
                                self.fail(at, "a gzip header longer than 64 KiB".into());
                                self.st = St::Seek;
                                take
                            }
                            Ok(None) => take,
                            Err(why) => {
                                // After a member: zero padding is common and harmless; anything
                                // else is damage.
                                let held = std::mem::take(&mut self.held);
                                if self.members > 0 && held.iter().all(|&b| b == 0) {
                                    take
                                } else {
                                    self.fail(at, format!("{why} at compressed byte {}", at - before as u64));
                                    self.st = St::Seek;
                                    take.min(1)
                                }
                            }
                        },
                    };
                    self.input_bytes += used as u64;
                    inp = &inp[used..];
                }
                St::Body => {
                    let r = inflate(&mut self.inflater, inp, &mut self.out, MZFlush::None);
                    if r.bytes_written > 0 {
                        let piece = &self.out[..r.bytes_written];
                        self.crc.update(piece);
                        self.size = self.size.wrapping_add(r.bytes_written as u32);
                        self.output_bytes += r.bytes_written as u64;
                        sink(piece);
                    }
                    self.input_bytes += r.bytes_consumed as u64;
                    inp = &inp[r.bytes_consumed..];
                    match r.status {
                        Ok(MZStatus::StreamEnd) => self.st = St::Trailer,
                        Ok(_) => {}
                        // No progress: it wants more input (or more output room, looped above).
                        Err(MZError::Buf) if r.bytes_consumed == 0 && r.bytes_written == 0 => {
                            if !inp.is_empty() {
                                self.fail(at, "the deflate stream stalls".into());
                                self.st = St::Seek;
                            }
                        }
                        Err(MZError::Buf) => {}
                        Err(e) => {
                            self.fail(
                                self.input_bytes,
                                format!(
                                    "corrupt deflate data ({e:?}) near compressed byte {}",
                                    self.input_bytes
                                ),
                            );
                            self.st = St::Seek;
                        }
                    }
                }
                St::Seek => {
                    // The next member starts with 1f 8b 08; a match cut by the chunk end is found
                    // again because the bytes before it are kept in `held`.
                    let mut joined = std::mem::take(&mut self.held);
                    let base = joined.len();
                    joined.extend_from_slice(inp);
                    let found = memchr::memmem::find(&joined, &[0x1f, 0x8b, 8]);
                    match found {
                        Some(k) if k >= base => {
                            let used = k - base;
                            self.input_bytes += used as u64;
                            inp = &inp[used..];
                            self.st = St::Header;
                        }
                        Some(k) => {
                            // The magic began in the held bytes: put them back in front.
                            self.held = joined[k..base].to_vec();
                            self.st = St::Header;
                        }
                        None => {
                            let keep = joined.len().min(2);
                            self.held = joined[joined.len() - keep..].to_vec();
                            self.input_bytes += inp.len() as u64;
                            inp = &[];
                        }
                    }
                }
            }
        }
    }

    /// Ends the input: what was left unfinished, if anything.
    pub fn finish(&mut self) -> Option<String> {
        match self.st {
            St::Header if self.held.is_empty() => None,
            St::Header if self.members == 0 => {
                Some(format!("the file ends inside its gzip header ({} bytes)", self.held.len()))
            }
            St::Header => {
                Some(format!("{} bytes after the last gzip member are not a gzip member", self.held.len()))
            }
            St::Body => Some(format!("the file ends inside gzip member {} (it was cut)", self.members)),
            St::Trailer => Some("the file ends inside a gzip trailer".to_string()),
            St::Seek => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    fn gz(data: &[u8]) -> Vec<u8> {
        let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
        let _ = e.write_all(data);
        e.finish().unwrap_or_default()
    }

    fn run(input: &[u8], chunk: usize) -> (Vec<u8>, Gunzip) {
        let mut g = Gunzip::default();
        let mut out = Vec::new();
        for c in input.chunks(chunk) {
            g.feed(c, &mut |p| out.extend_from_slice(p));
        }
        (out, g)
    }

    #[test]
    fn members_and_chunks() {
        let text: Vec<u8> = (0..50_000u32).flat_map(|i| format!("line {i}\n").into_bytes()).collect();
        let mut two = gz(&text);
        two.extend(gz(b"second member"));
        for chunk in [1, 3, 1000, 1 << 20] {
            let (out, mut g) = run(&two, chunk);
            assert_eq!(out.len(), text.len() + 13, "chunk {chunk}");
            assert!(out.ends_with(b"second member"));
            assert_eq!(g.fault, None);
            assert_eq!(g.finish(), None);
            assert_eq!(g.members, 2);
        }
    }

    #[test]
    fn damage_keeps_what_inflates_and_finds_the_next_member() {
        let text: Vec<u8> = (0..50_000u32).flat_map(|i| format!("line {i}\n").into_bytes()).collect();
        let mut first = gz(&text);
        let mid = first.len() / 2;
        first[mid] ^= 0xff;
        first.extend(gz(b"after the damage"));
        let results: Vec<(usize, bool)> = [1usize, 5, 4096, 1 << 20]
            .iter()
            .map(|&c| {
                let (out, g) = run(&first, c);
                (out.len(), out.ends_with(b"after the damage") && g.fault.is_some())
            })
            .collect();
        assert!(results.iter().all(|r| *r == results[0] && r.1), "{results:?}");
        let (_, mut g) = run(&first[..5], 2);
        assert!(g.finish().is_some_and(|m| m.contains("header")));
    }
}
