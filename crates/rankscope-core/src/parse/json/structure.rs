//! Nested values: the nesting tracker ([`Nest`], [`MAX_DEPTH`]), skipping a value, and the
//! structural check a candidate event start must pass ([`validate_object`]).

use super::string::skip_string;
use super::{is_scalar_end, is_ws, peek, scalar, Res, Stop};

/// Deepest nesting the scanners follow; deeper input is malformed (a guard against nesting
/// bombs: the scanners keep their bracket stack in one `u128`, never on the call stack).
pub const MAX_DEPTH: u32 = 128;

/// The open brackets of a value being scanned: bit `i` is set when level `i` is an object.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Nest {
    bits: u128,
    depth: u32,
}

impl Nest {
    /// Opens a level; `false` when the value nests deeper than [`MAX_DEPTH`].
    #[inline]
    pub fn push(&mut self, object: bool) -> bool {
        if self.depth >= MAX_DEPTH {
            return false;
        }
        if object {
            self.bits |= 1 << self.depth;
        } else {
            self.bits &= !(1 << self.depth);
        }
        self.depth += 1;
        true
    }

    /// Closes a level with `}` (`object`) or `]`; `false` when it does not match the opener.
    #[inline]
    pub fn pop(&mut self, object: bool) -> bool {
        if self.depth == 0 || self.top_is_object() != object {
            return false;
        }
        self.depth -= 1;
        true
    }

    #[inline]
    pub fn depth(&self) -> u32 {
        self.depth
    }

    #[inline]
    pub fn top_is_object(&self) -> bool {
        self.depth > 0 && self.bits & (1 << (self.depth - 1)) != 0
    }
}

/// Skips any value. Containers are skipped by bracket matching without validating their
/// insides (an event we skip need not be perfect JSON for us to keep the one after it), but a
/// `]` closing a `{` (or the reverse) or nesting beyond [`MAX_DEPTH`] is malformed: damage is
/// reported where it shows instead of running on into the following events.
pub fn skip_value(buf: &[u8], pos: &mut usize) -> Res<()> {
    match peek(buf, pos)? {
        b'"' => skip_string(buf, pos),
        b'{' | b'[' => {
            let mut nest = Nest::default();
            let mut i = *pos;
            while i < buf.len() {
                match buf[i] {
                    b'"' => {
                        let mut p = i;
                        skip_string(buf, &mut p)?;
                        i = p;
                        continue;
                    }
                    c @ (b'{' | b'[') if !nest.push(c == b'{') => return Err(Stop::Bad(i)),
                    c @ (b'}' | b']') => {
                        if !nest.pop(c == b'}') {
                            return Err(Stop::Bad(i));
                        }
                        if nest.depth() == 0 {
                            *pos = i + 1;
                            return Ok(());
                        }
                    }
                    _ => {}
                }
                i += 1;
            }
            Err(Stop::Incomplete)
        }
        b'}' | b']' | b',' | b':' => Err(Stop::Bad(*pos)),
        _ => scalar(buf, pos).map(|_| ()),
    }
}

/// A byte that may appear in a scalar the validator accepts: numbers, `true`/`false`/`null`
/// and the bare words real traces hold (`N/A`, `NaN`, `-Infinity`, `...`).
#[inline]
fn is_scalar_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || matches!(b, b'.' | b'+' | b'-' | b'/' | b'_')
}

/// Checks that an object starts at `*pos` (no whitespace before it) and is well formed: string
/// keys, `:`, values, `,` (trailing commas and bare-word scalars tolerated, as the parser
/// tolerates them), brackets that match, strings without a raw newline. Advances past it and
/// says whether it has a top-level `"ph"` key. This is the structural check resynchronisation
/// applies to a candidate event start: text that a damaged string or bracket shifted out of
/// phase almost never passes it.
pub fn validate_object(buf: &[u8], pos: &mut usize) -> Res<bool> {
    #[derive(Clone, Copy, PartialEq)]
    enum Want {
        KeyOrClose,
        Colon,
        Value,
        ValueOrClose,
        CommaOrClose,
    }
    let mut i = *pos;
    if buf.get(i) != Some(&b'{') {
        return Err(Stop::Bad(i));
    }
    let mut nest = Nest::default();
    nest.push(true);
    i += 1;
    let mut want = Want::KeyOrClose;
    let mut has_ph = false;
    loop {
        let b = loop {
            match buf.get(i) {
                Some(&c) if is_ws(c) => i += 1,
                Some(&c) => break c,
                None => return Err(Stop::Incomplete),
            }
        };
        match (want, b) {
            (Want::KeyOrClose | Want::CommaOrClose, b'}')
            | (Want::ValueOrClose | Want::CommaOrClose, b']') => {
                if !nest.pop(b == b'}') {
                    return Err(Stop::Bad(i));
                }
                i += 1;
                if nest.depth() == 0 {
                    *pos = i;
                    return Ok(has_ph);
                }
                want = Want::CommaOrClose;
            }
            (Want::KeyOrClose, b'"') => {
                let start = i + 1;
                i = validated_string_end(buf, i)?;
                if nest.depth() == 1 && buf.get(start..i - 1) == Some(b"ph") {
                    has_ph = true;
                }
                want = Want::Colon;
            }
            (Want::Colon, b':') => {
                i += 1;
                want = Want::Value;
            }
            (Want::CommaOrClose, b',') => {
                i += 1;
                want = if nest.top_is_object() { Want::KeyOrClose } else { Want::ValueOrClose };
            }
            (Want::Value | Want::ValueOrClose, b'"') => {
                i = validated_string_end(buf, i)?;
                want = Want::CommaOrClose;
            }
            (Want::Value | Want::ValueOrClose, b'{' | b'[') => {
                if !nest.push(b == b'{') {
                    return Err(Stop::Bad(i));
                }
                i += 1;
                want = if b == b'{' { Want::KeyOrClose } else { Want::ValueOrClose };
            }
            (Want::Value | Want::ValueOrClose, c) if is_scalar_byte(c) => {
                loop {
                    match buf.get(i) {
                        Some(&c) if is_scalar_byte(c) => i += 1,
                        Some(&c) if is_scalar_end(c) => break,
                        Some(_) => return Err(Stop::Bad(i)),
                        None => return Err(Stop::Incomplete),
                    }
                }
                want = Want::CommaOrClose;
            }
            _ => return Err(Stop::Bad(i)),
        }
    }
}

/// The end (past the closing quote) of the string whose quote is at `i`; a raw newline inside
/// is malformed.
#[inline]
fn validated_string_end(buf: &[u8], i: usize) -> Res<usize> {
    let mut j = i + 1;
    loop {
        let rest = buf.get(j..).unwrap_or(&[]);
        match memchr::memchr3(b'"', b'\\', b'\n', rest) {
            None => return Err(Stop::Incomplete),
            Some(k) => match rest[k] {
                b'"' => return Ok(j + k + 1),
                b'\n' => return Err(Stop::Bad(j + k)),
                _ => {
                    j += k + 2;
                    if j > buf.len() {
                        return Err(Stop::Incomplete);
                    }
                }
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::{classify_scalar, ScalarKind};
    use super::*;

    #[test]
    fn skipping() {
        let buf = br#"{"a": [1, "]", {"b": "\"}"}], "c": N/A} ,"#;
        let mut p = 0;
        assert_eq!(skip_value(buf, &mut p), Ok(()));
        assert_eq!(&buf[p..], b" ,");
        let mut p = 0;
        assert_eq!(skip_value(br#"{"a": [1, 2"#, &mut p), Err(Stop::Incomplete));
        let mut p = 0;
        assert_eq!(skip_value(b"123", &mut p), Err(Stop::Incomplete));
        let mut p = 0;
        assert_eq!(skip_value(b"123,", &mut p), Ok(()));
        assert_eq!(classify_scalar(b"N/A"), ScalarKind::BareWord);
        assert_eq!(classify_scalar(b"-1.5e3"), ScalarKind::Number);
        assert_eq!(classify_scalar(b"..."), ScalarKind::BareWord);
        // Brackets must match: `[1, 2}` is damage, not the end of the value.
        let mut p = 0;
        assert_eq!(skip_value(br#"{"a": [1, 2}, "b": 3}"#, &mut p), Err(Stop::Bad(11)));
        // Nesting bombs stop at MAX_DEPTH.
        let bomb = vec![b'['; 1000];
        let mut p = 0;
        assert_eq!(skip_value(&bomb, &mut p), Err(Stop::Bad(MAX_DEPTH as usize)));
    }

    #[test]
    fn validating_candidates() {
        let ok = br#"{"ph": "X", "args": {"a": [1, N/A, {"b": null}], }, "ts": -1.5e3} ,"#;
        let mut p = 0;
        assert_eq!(validate_object(ok, &mut p), Ok(true));
        assert_eq!(&ok[p..], b" ,");
        let mut p = 0;
        assert_eq!(validate_object(br#"{"name": "a", "args": {"ph": 1}}"#, &mut p), Ok(false));
        for bad in [
            &br#"{"ph": "X", "name": "a}"#[..],
            br#"{"ph" "X"}"#,
            br#"{"ph": "X"]"#,
            br#"{"ph": x"y"}"#,
            b"{\"ph\": \"a\nb\"}",
            br#"{ph: 1}"#,
        ] {
            let mut p = 0;
            assert!(
                matches!(validate_object(bad, &mut p), Err(Stop::Bad(_)) | Err(Stop::Incomplete)),
                "{bad:?}"
            );
        }
        let mut p = 0;
        assert_eq!(validate_object(br#"{"ph": "X", "#, &mut p), Err(Stop::Incomplete));
    }
}
