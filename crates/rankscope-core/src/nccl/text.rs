//! Line handling shared by both parsers: lossy decoding, line numbers, and removal of the
//! fragments that patched NCCL / nccl-tests builds insert into their output.

use std::borrow::Cow;

/// Split `bytes` into lines (`\n`, with an optional `\r` before it), numbered from 1, each
/// decoded lossily (invalid UTF-8 becomes U+FFFD).
pub(crate) fn lines(bytes: &[u8]) -> impl Iterator<Item = (u32, Cow<'_, str>)> {
    // A final newline ends the last line; it does not start an empty one.
    let body = bytes.strip_suffix(b"\n").unwrap_or(bytes);
    body.split(|&b| b == b'\n').enumerate().map(|(i, raw)| {
        let raw = raw.strip_suffix(b"\r").unwrap_or(raw);
        let n = u32::try_from(i.saturating_add(1)).unwrap_or(u32::MAX);
        (n, String::from_utf8_lossy(raw))
    })
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
    fn lines_are_numbered_and_lossy() {
        let v: Vec<_> = lines(b"a\r\nb\xff\nc").collect();
        assert_eq!(v.len(), 3);
        assert_eq!(v[0], (1, Cow::Borrowed("a")));
        assert_eq!(v[1].0, 2);
        assert!(v[1].1.starts_with('b'));
    }
}
