//! Line handling shared by both parsers: lossy decoding, line numbers, and removal of the
//! fragments that patched NCCL / nccl-tests builds insert into their output.

use std::borrow::Cow;

/// Split `bytes` into lines (`\n`, with an optional `\r` before it; a text with no `\n` at all
/// but `\r`s, as classic Mac OS and some capture tools write it, is split at each `\r`),
/// numbered from 1, each decoded lossily (invalid UTF-8 becomes U+FFFD) and [`clean`]ed of what
/// terminals and capture tools add.
pub(crate) fn lines(bytes: &[u8]) -> impl Iterator<Item = (u32, Cow<'_, str>)> {
    let sep = if memchr::memchr(b'\n', bytes).is_none() && memchr::memchr(b'\r', bytes).is_some() {
        b'\r'
    } else {
        b'\n'
    };
    // A final newline ends the last line; it does not start an empty one.
    let body = bytes.strip_suffix(&[sep]).unwrap_or(bytes);
    body.split(move |&b| b == sep).enumerate().map(|(i, raw)| {
        let raw = raw.strip_suffix(b"\r").unwrap_or(raw);
        let n = u32::try_from(i.saturating_add(1)).unwrap_or(u32::MAX);
        (n, clean(raw))
    })
}

/// [`lines`] for text that arrives in chunks of any size: each line is handed to `each` as soon
/// as its `\n` arrives, so only the line being read is held, not the text. The same lines as
/// [`lines`] of the whole text, numbered alike, whatever the chunks (a `\r\n` or a UTF-8
/// character may be cut between two chunks): the bytes are cut only at `\n`, and a text with no
/// `\n` at all (split at each `\r`) is known only at its end, so it is held until then.
#[derive(Debug, Default)]
pub(crate) struct ChunkLines {
    /// The line being read: the bytes since the last `\n`.
    carry: Vec<u8>,
    /// Lines handed out so far.
    n: u32,
    /// A `\n` was seen: the text is split at `\n`, never at a lone `\r`.
    newline: bool,
}

impl ChunkLines {
    pub(crate) fn feed(&mut self, chunk: &[u8], each: &mut impl FnMut(u32, Cow<'_, str>)) {
        let mut rest = chunk;
        while let Some(i) = memchr::memchr(b'\n', rest) {
            self.newline = true;
            let (line, after) = rest.split_at(i);
            if self.carry.is_empty() {
                self.emit(line, each);
            } else {
                let mut carry = std::mem::take(&mut self.carry);
                carry.extend_from_slice(line);
                self.emit(&carry, each);
                carry.clear();
                self.carry = carry;
            }
            rest = after.get(1..).unwrap_or_default();
        }
        self.carry.extend_from_slice(rest);
    }

    /// Ends the text: its last line (one not ended by `\n`), or every `\r`-separated line of a
    /// text that had no `\n`.
    pub(crate) fn finish(mut self, each: &mut impl FnMut(u32, Cow<'_, str>)) {
        let carry = std::mem::take(&mut self.carry);
        if !self.newline && memchr::memchr(b'\r', &carry).is_some() {
            let body = carry.strip_suffix(b"\r").unwrap_or(&carry);
            for line in body.split(|&b| b == b'\r') {
                self.emit(line, each);
            }
        } else if !carry.is_empty() {
            self.emit(&carry, each);
        }
    }

    fn emit(&mut self, raw: &[u8], each: &mut impl FnMut(u32, Cow<'_, str>)) {
        self.n = self.n.saturating_add(1);
        each(self.n, clean(raw.strip_suffix(b"\r").unwrap_or(raw)));
    }
}

const BOM: &[u8] = "\u{feff}".as_bytes();

/// One line as text, without what terminals and log collectors add to what NCCL printed: ANSI
/// escape sequences (colours from `kubectl logs` or a coloured terminal: `ESC [ … final byte`,
/// `ESC ] … BEL` and two-byte `ESC x`), NULs (a NUL at each line end is common in captured
/// output), other control bytes but the tab, and byte-order marks (a BOM at the start of a
/// file, or of each concatenated piece, would otherwise glue itself to the first word:
/// `\u{feff}node-2`). Lines with none of these are decoded without a copy beyond the lossy
/// UTF-8 check.
pub(crate) fn clean(raw: &[u8]) -> Cow<'_, str> {
    let dirty = raw.iter().any(|&b| b < 0x20 && b != b'\t') || memchr::memmem::find(raw, BOM).is_some();
    if !dirty {
        return String::from_utf8_lossy(raw);
    }
    let mut out = Vec::with_capacity(raw.len());
    let mut i = 0;
    while i < raw.len() {
        let b = raw[i];
        if b == 0x1b {
            i += 1;
            match raw.get(i) {
                // CSI: parameters and intermediates, then one final byte in @..~.
                Some(b'[') => {
                    i += 1;
                    while raw.get(i).is_some_and(|c| (0x20..0x40).contains(c)) {
                        i += 1;
                    }
                    if raw.get(i).is_some_and(|c| (0x40..0x7f).contains(c)) {
                        i += 1;
                    }
                }
                // OSC: up to BEL or ESC \.
                Some(b']') => {
                    i += 1;
                    while let Some(&c) = raw.get(i) {
                        i += 1;
                        if c == 0x07 {
                            break;
                        }
                        if c == 0x1b && raw.get(i) == Some(&b'\\') {
                            i += 1;
                            break;
                        }
                    }
                }
                Some(_) => i += 1,
                None => {}
            }
            continue;
        }
        if b < 0x20 && b != b'\t' {
            i += 1;
            continue;
        }
        if raw[i..].starts_with(BOM) {
            i += BOM.len();
            continue;
        }
        out.push(b);
        i += 1;
    }
    Cow::Owned(String::from_utf8_lossy(&out).into_owned())
}

/// Remove `function(), path/file.cc:123,` fragments (and the bare `func, 123` form is handled
/// by the log parser) that a patched build prints in front of, and in the middle of, its
/// output. Seen in `run(), common.cu:998, #  Rank ...` and in result rows such as
/// `TimeTest(), common.cu:610,  8  2  float  sum  -1BenchTime(), common.cu:561,  4.2 ...`.
/// Each fragment becomes one space, so the tokens on both sides stay apart.
pub(crate) fn strip_call_fragments(line: &str) -> Cow<'_, str> {
    if !line.contains("(), ") {
        return Cow::Borrowed(line);
    }
    let mut out = String::with_capacity(line.len());
    let mut rest = line;
    while let Some(p) = rest.find("(), ") {
        let (before, after_paren) = rest.split_at(p);
        // Walk back over the identifier; an identifier does not start with a digit, so
        // `-1BenchTime` keeps its `-1`.
        let ident_start = before
            .char_indices()
            .rev()
            .take_while(|(_, c)| c.is_ascii_alphanumeric() || *c == '_')
            .last()
            .map(|(i, _)| i)
            .unwrap_or(before.len());
        let ident_start = before[ident_start..]
            .char_indices()
            .find(|(_, c)| !c.is_ascii_digit())
            .map(|(i, _)| ident_start + i)
            .unwrap_or(before.len());
        let after = after_paren.get(4..).unwrap_or("");
        // `path:digits,` with no whitespace.
        let loc_end = after.find(',');
        let is_loc = match loc_end {
            Some(e) => {
                let loc = &after[..e];
                !loc.contains(char::is_whitespace)
                    && loc
                        .rsplit_once(':')
                        .is_some_and(|(_, n)| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
            }
            None => false,
        };
        match (ident_start < before.len(), is_loc, loc_end) {
            (true, true, Some(e)) => {
                out.push_str(&before[..ident_start]);
                out.push(' ');
                rest = after.get(e + 1..).unwrap_or("");
            }
            _ => {
                out.push_str(before);
                out.push_str("(), ");
                rest = after;
            }
        }
    }
    out.push_str(rest);
    Cow::Owned(out)
}

/// Parse a finite `f64` (nccl-tests prints `N/A` for some cells; `inf`/`nan` are rejected).
pub(crate) fn finite(s: &str) -> Option<f64> {
    s.parse::<f64>().ok().filter(|v| v.is_finite())
}

/// The part of `token` after any launcher prefix glued to it (`[1,0]<stdout>:8` → `8`).
pub(crate) fn after_glued_prefix(token: &str) -> &str {
    match token.rfind([':', '>', ']']) {
        Some(i) => token.get(i + 1..).unwrap_or(""),
        None => token,
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    #[test]
    fn strips_fragments() {
        assert_eq!(strip_call_fragments("run(), common.cu:998, #  Rank  0"), "  #  Rank  0");
        assert_eq!(
            strip_call_fragments("TimeTest(), common.cu:610,   8  sum  -1BenchTime(), common.cu:561,   0.63"),
            "    8  sum  -1    0.63"
        );
        assert_eq!(strip_call_fragments("no fragments here"), "no fragments here");
        assert_eq!(strip_call_fragments("f(), not a location, x"), "f(), not a location, x");
        assert_eq!(strip_call_fragments("(), a:1,"), "(), a:1,");
    }

    #[test]
    fn terminal_noise_is_removed() {
        assert_eq!(
            clean(b"\x1b[1;32mnode-2:123:456 [0] NCCL INFO x\x1b[0m"),
            "node-2:123:456 [0] NCCL INFO x"
        );
        assert_eq!(clean(b"a\0b\0"), "ab");
        assert_eq!(clean("\u{feff}node-2".as_bytes()), "node-2");
        assert_eq!(clean(b"\x1b]0;title\x07rest"), "rest");
        assert_eq!(clean(b"tab\tkept"), "tab\tkept");
        assert!(matches!(clean(b"plain"), Cow::Borrowed("plain")));
        let v: Vec<_> = lines(b"a\0\r\n\x1b[31mb\x1b[0m\n").map(|(_, l)| l.into_owned()).collect();
        assert_eq!(v, ["a", "b"]);
    }

    /// Lines read from chunks are the whole text's lines, wherever the chunks cut it (inside a
    /// `\r\n`, inside a UTF-8 character), for `\n`, `\r\n` and `\r`-only texts; an empty
    /// text, which [`lines`] gives as one empty line, gives none.
    #[test]
    fn chunked_lines_are_the_whole_texts() {
        let texts: [&[u8]; 9] = [
            b"a\r\nb\xff\nc",
            b"one\ntwo\n\nfour\n",
            b"cr\ronly\rtext\r",
            b"\r\r\n\r",
            "h\u{e9}llo\r\nw\u{f6}rld\r\n".as_bytes(),
            b"no end of line",
            b"\n\n",
            b"\x1b[31mred\x1b[0m\r\n\0tail\r",
            b"\r",
        ];
        for text in texts {
            let whole: Vec<(u32, String)> = lines(text).map(|(n, l)| (n, l.into_owned())).collect();
            for size in 1..=text.len() {
                let mut got = Vec::new();
                let mut each = |n: u32, l: Cow<'_, str>| got.push((n, l.into_owned()));
                let mut r = ChunkLines::default();
                for c in text.chunks(size) {
                    r.feed(c, &mut each);
                }
                r.finish(&mut each);
                assert_eq!(got, whole, "{text:?} in chunks of {size}");
            }
        }
        let mut got = 0;
        ChunkLines::default().finish(&mut |_, _| got += 1);
        assert_eq!(got, 0);
    }

    #[test]
    fn lines_are_numbered_and_lossy() {
        let v: Vec<_> = lines(b"a\r\nb\xff\nc").collect();
        assert_eq!(v.len(), 3);
        assert_eq!(v[0], (1, Cow::Borrowed("a")));
        assert_eq!(v[1].0, 2);
        assert!(v[1].1.starts_with('b'));
    }
}
