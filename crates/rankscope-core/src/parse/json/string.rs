//! JSON strings: the quote-or-backslash search, reading a string (raw, or decoded into the
//! caller's scratch buffer when it has escapes) and skipping one.

use super::{peek, Res, Stop};

/// A string as found in the buffer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Str<'a> {
    /// No escapes: the raw bytes between the quotes.
    Raw(&'a [u8]),
    /// Has escapes: the decoded bytes were written to the caller's scratch buffer.
    Escaped,
}

/// The first `"` or `\\` in `s`. Most strings of a trace are short (keys, `ph`, categories), and
/// for those a vector search costs more to set up than it saves: the first 16 bytes are tested
/// as two 8-byte words (SWAR), and only a longer string goes on to `memchr2`.
#[inline]
pub fn quote_or_backslash(s: &[u8]) -> Option<usize> {
    const ONES: u64 = 0x0101_0101_0101_0101;
    const HIGH: u64 = 0x8080_8080_8080_8080;
    // A high bit set in each byte of `x` equal to `b` (the lowest set bit is always exact:
    // borrows only run upward, past a byte that matched).
    let eq = |x: u64, b: u8| {
        let y = x ^ (ONES * u64::from(b));
        y.wrapping_sub(ONES) & !y & HIGH
    };
    let mut at = 0;
    while at < 16 {
        match s.get(at..at + 8) {
            Some(w) => {
                let mut word = [0u8; 8];
                word.copy_from_slice(w);
                let x = u64::from_le_bytes(word);
                let m = eq(x, b'"') | eq(x, b'\\');
                if m != 0 {
                    return Some(at + (m.trailing_zeros() / 8) as usize);
                }
                at += 8;
            }
            None => {
                return s.get(at..)?.iter().position(|&c| c == b'"' || c == b'\\').map(|i| at + i);
            }
        }
    }
    memchr::memchr2(b'"', b'\\', s.get(at..)?).map(|i| at + i)
}

/// Reads a string starting at the opening quote (whitespace allowed before it). Escaped strings
/// are decoded into `scratch` (cleared first).
#[inline]
pub fn string<'a>(buf: &'a [u8], pos: &mut usize, scratch: &mut Vec<u8>) -> Res<Str<'a>> {
    if peek(buf, pos)? != b'"' {
        return Err(Stop::Bad(*pos));
    }
    let start = *pos + 1;
    let rest = buf.get(start..).unwrap_or(&[]);
    match quote_or_backslash(rest) {
        None => Err(Stop::Incomplete),
        Some(i) if rest[i] == b'"' => {
            *pos = start + i + 1;
            Ok(Str::Raw(&rest[..i]))
        }
        Some(i) => {
            scratch.clear();
            scratch.extend_from_slice(&rest[..i]);
            let end = unescape(rest, i, scratch)?;
            *pos = start + end + 1;
            Ok(Str::Escaped)
        }
    }
}

/// Decodes escapes from `s[i..]` (where `s[i]` is a backslash) up to the closing quote, appending
/// to `out`. Returns the index of the closing quote in `s`.
fn unescape(s: &[u8], mut i: usize, out: &mut Vec<u8>) -> Res<usize> {
    loop {
        let b = *s.get(i).ok_or(Stop::Incomplete)?;
        match b {
            b'"' => return Ok(i),
            b'\\' => {
                let e = *s.get(i + 1).ok_or(Stop::Incomplete)?;
                i += 2;
                match e {
                    b'"' => out.push(b'"'),
                    b'\\' => out.push(b'\\'),
                    b'/' => out.push(b'/'),
                    b'b' => out.push(8),
                    b'f' => out.push(12),
                    b'n' => out.push(b'\n'),
                    b'r' => out.push(b'\r'),
                    b't' => out.push(b'\t'),
                    b'u' => {
                        let hi = hex4(s, i)?;
                        i += 4;
                        let cp = if (0xD800..0xDC00).contains(&hi)
                            && s.get(i) == Some(&b'\\')
                            && s.get(i + 1) == Some(&b'u')
                        {
                            let lo = hex4(s, i + 2)?;
                            if (0xDC00..0xE000).contains(&lo) {
                                i += 6;
                                0x10000 + ((hi - 0xD800) << 10) + (lo - 0xDC00)
                            } else {
                                0xFFFD
                            }
                        } else {
                            hi
                        };
                        let c = char::from_u32(cp).unwrap_or('\u{FFFD}');
                        let mut tmp = [0u8; 4];
                        out.extend_from_slice(c.encode_utf8(&mut tmp).as_bytes());
                    }
                    // An unknown escape: keep it as written rather than fail the event.
                    other => {
                        out.push(b'\\');
                        out.push(other);
                    }
                }
            }
            _ => {
                let rest = s.get(i..).unwrap_or(&[]);
                match memchr::memchr2(b'"', b'\\', rest) {
                    None => return Err(Stop::Incomplete),
                    Some(j) => {
                        out.extend_from_slice(&rest[..j]);
                        i += j;
                    }
                }
            }
        }
    }
}

fn hex4(s: &[u8], i: usize) -> Res<u32> {
    let h = s.get(i..i + 4).ok_or(Stop::Incomplete)?;
    let mut v = 0u32;
    for &c in h {
        let d = match c {
            b'0'..=b'9' => c - b'0',
            b'a'..=b'f' => c - b'a' + 10,
            b'A'..=b'F' => c - b'A' + 10,
            _ => return Err(Stop::Bad(i)),
        };
        v = v * 16 + u32::from(d);
    }
    Ok(v)
}

/// Skips a string whose opening quote is at `*pos`.
#[inline]
pub(super) fn skip_string(buf: &[u8], pos: &mut usize) -> Res<()> {
    let mut i = *pos + 1;
    loop {
        let rest = buf.get(i..).unwrap_or(&[]);
        match quote_or_backslash(rest) {
            None => return Err(Stop::Incomplete),
            Some(j) if rest[j] == b'"' => {
                *pos = i + j + 1;
                return Ok(());
            }
            Some(j) => {
                // Skip the backslash and the escaped byte.
                i += j + 2;
                if i > buf.len() {
                    return Err(Stop::Incomplete);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strings_and_escapes() {
        let mut s = Vec::new();
        let buf = br#" "a\"b\u00e9\ud83d\ude00" tail"#;
        let mut p = 0;
        assert_eq!(string(buf, &mut p, &mut s), Ok(Str::Escaped));
        assert_eq!(std::str::from_utf8(&s), Ok("a\"bé😀"));
        assert_eq!(&buf[p..], b" tail");
        let mut p = 0;
        assert_eq!(string(br#""abc"#, &mut p, &mut s), Err(Stop::Incomplete));
        let mut p = 0;
        assert_eq!(string(br#""ab\"#, &mut p, &mut s), Err(Stop::Incomplete));
    }
}
