//! Tolerant, resumable JSON scanning primitives over a byte slice.
//!
//! Every function takes the buffer and a position and either advances the position past what
//! it read, or stops with [`Stop::Incomplete`] (the buffer ends before the value does: wait for
//! more bytes and try again from the same place) or [`Stop::Bad`] (the bytes are not JSON here).
//! Callers parse whole units (one event, one top-level member) and retry a unit from its start
//! when it was incomplete, so none of these functions need to keep state between calls.
//!
//! Tolerance: bare words (`N/A`, `NaN`, `Infinity`, `...`) are accepted where a value belongs
//! and reported to the caller; strings are not UTF-8-checked here (only the strings that are
//! kept get checked, once, when interned); integers of any length scan fine.

/// Why scanning stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stop {
    /// The buffer ended inside the value.
    Incomplete,
    /// Not valid JSON at this byte offset (within the buffer).
    Bad(usize),
}

pub type Res<T> = Result<T, Stop>;

#[inline]
pub fn is_ws(b: u8) -> bool {
    matches!(b, b' ' | b'\n' | b'\r' | b'\t')
}

/// Skips whitespace; returns the next byte without consuming it.
#[inline]
pub fn peek(buf: &[u8], pos: &mut usize) -> Res<u8> {
    while let Some(&b) = buf.get(*pos) {
        if !is_ws(b) {
            return Ok(b);
        }
        *pos += 1;
    }
    Err(Stop::Incomplete)
}

/// Skips whitespace and consumes `want`.
#[inline]
pub fn expect(buf: &[u8], pos: &mut usize, want: u8) -> Res<()> {
    if peek(buf, pos)? == want {
        *pos += 1;
        Ok(())
    } else {
        Err(Stop::Bad(*pos))
    }
}

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

/// Steps to the next member of an object whose `{` was consumed: returns the member's key (its
/// raw bytes; empty for a key written with escapes, which no key rankscope reads has) with the
/// position after its `:`, or `None` after the closing `}` (a trailing comma is tolerated).
/// `first` tracks whether a `,` must come first.
#[inline]
pub fn next_key<'a>(
    buf: &'a [u8],
    pos: &mut usize,
    first: &mut bool,
    scratch: &mut Vec<u8>,
) -> Res<Option<&'a [u8]>> {
    let mut b = peek(buf, pos)?;
    if !*first && b == b',' {
        *pos += 1;
        b = peek(buf, pos)?;
    } else if !*first && b != b'}' {
        return Err(Stop::Bad(*pos));
    }
    if b == b'}' {
        *pos += 1;
        return Ok(None);
    }
    *first = false;
    let key: &[u8] = match string(buf, pos, scratch)? {
        Str::Raw(k) => k,
        Str::Escaped => &[],
    };
    expect(buf, pos, b':')?;
    Ok(Some(key))
}

/// Skips a string whose opening quote is at `*pos`.
#[inline]
fn skip_string(buf: &[u8], pos: &mut usize) -> Res<()> {
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

/// Ends a scalar: `,` `}` `]` `:` or whitespace.
#[inline]
fn is_scalar_end(b: u8) -> bool {
    matches!(b, b',' | b'}' | b']' | b':') || is_ws(b)
}

/// Reads the text of a scalar (number, `true`, `false`, `null`, or a bare word). A scalar that
/// reaches the end of the buffer is incomplete (more digits may follow).
#[inline]
pub fn scalar<'a>(buf: &'a [u8], pos: &mut usize) -> Res<&'a [u8]> {
    peek(buf, pos)?;
    let start = *pos;
    let rest = &buf[start..];
    match rest.iter().position(|&b| is_scalar_end(b)) {
        Some(0) => Err(Stop::Bad(start)),
        Some(n) => {
            *pos = start + n;
            Ok(&rest[..n])
        }
        None => Err(Stop::Incomplete),
    }
}

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

/// What a scalar's text is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ScalarKind {
    Number,
    True,
    False,
    Null,
    /// Not JSON: `N/A`, `NaN`, `...` and the like.
    BareWord,
}

pub fn classify_scalar(text: &[u8]) -> ScalarKind {
    match text {
        b"true" => ScalarKind::True,
        b"false" => ScalarKind::False,
        b"null" => ScalarKind::Null,
        _ => {
            let body = text.strip_prefix(b"-").unwrap_or(text);
            if body.first().is_some_and(u8::is_ascii_digit)
                && body.iter().all(|&c| c.is_ascii_digit() || matches!(c, b'.' | b'e' | b'E' | b'+' | b'-'))
            {
                ScalarKind::Number
            } else {
                ScalarKind::BareWord
            }
        }
    }
}

/// Why a number could not be read as asked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NumErr {
    NotANumber,
    Overflow,
}

/// Parses a decimal number exactly and returns it multiplied by `10^scale`, rounded half away
/// from zero, as `i64`. `scale = 3` turns Kineto's microseconds (`"1712195495519695.8"`,
/// `"63.813"`, `"1.6e3"`) into nanoseconds with no `f64` rounding: at 1e15 µs an `f64` has only
/// ~0.25 µs of resolution left, so float parsing would move events by hundreds of nanoseconds.
pub fn decimal_scaled(text: &[u8], scale: i32) -> Result<i64, NumErr> {
    if let Some(v) = decimal_plain(text, scale) {
        return Ok(v);
    }
    decimal_general(text, scale)
}

/// `decimal_scaled` for the numbers traces are made of: `-?digits[.digits]`, at most 18 digits,
/// no more fraction digits than `scale` and no exponent, so the result is exact in `u64` without
/// rounding. Anything else (and a result beyond `i64`) is `None`: the general path decides it.
#[inline]
fn decimal_plain(text: &[u8], scale: i32) -> Option<i64> {
    let scale = u32::try_from(scale).ok()?;
    match plain_prefix(text, scale)? {
        (v, n) if n == text.len() => Some(v),
        _ => None,
    }
}

/// The plain number (`-?digits[.digits]`, at most 18 digits, no more fraction digits than
/// `scale` ≤ 18) that `bytes` begins with, scaled by `10^scale`, and the bytes it takes; `None`
/// when `bytes` does not begin with one that fits these bounds and `i64`.
#[inline]
fn plain_prefix(bytes: &[u8], scale: u32) -> Option<(i64, usize)> {
    let neg = bytes.first() == Some(&b'-');
    let mut i = usize::from(neg);
    let (mut v, mut digits, mut frac): (u64, u32, Option<u32>) = (0, 0, None);
    while let Some(&c) = bytes.get(i) {
        match c {
            b'0'..=b'9' => {
                digits += 1;
                if digits > 18 {
                    return None;
                }
                v = v * 10 + u64::from(c - b'0');
                if let Some(f) = frac.as_mut() {
                    *f += 1;
                }
            }
            b'.' if frac.is_none() => frac = Some(0),
            _ => break,
        }
        i += 1;
    }
    let f = frac.unwrap_or(0);
    if digits == 0 || f > scale || scale > 18 {
        return None;
    }
    let m = i64::try_from(v.checked_mul(10u64.pow(scale - f))?).ok()?;
    Some((if neg { -m } else { m }, i))
}

/// A plain number (`-?digits[.digits]`, the form traces write) read straight from `buf` at
/// `*pos` and scaled by `10^scale`, in one pass: what [`scalar`] then [`decimal_scaled`] give
/// for it, without scanning it twice. `None`, with `*pos` unmoved, for anything else (an
/// exponent, more than 18 digits, more fraction digits than `scale`, a bare word, the end of
/// the buffer before the number's end): the two-pass path decides those.
#[inline]
pub fn plain_number(buf: &[u8], pos: &mut usize, scale: u32) -> Option<i64> {
    let rest = buf.get(*pos..)?;
    let (v, n) = plain_prefix(rest, scale)?;
    // The number must end where a scalar ends (not at the buffer's end: more may follow).
    if !is_scalar_end(*rest.get(n)?) {
        return None;
    }
    *pos += n;
    Some(v)
}

/// `decimal_scaled` for any number: exponents, long fractions (rounded), many digits.
fn decimal_general(text: &[u8], scale: i32) -> Result<i64, NumErr> {
    let (neg, body) = match text.first() {
        Some(b'-') => (true, &text[1..]),
        Some(b'+') => (false, &text[1..]),
        _ => (false, text),
    };
    let mut mant: i128 = 0;
    let mut exp10: i32 = scale;
    let mut digits = 0usize;
    let mut seen_dot = false;
    let mut i = 0;
    // Digits beyond ~36 significant ones cannot change an i64 result; drop them but keep the
    // exponent right.
    let mut sticky = false;
    while i < body.len() {
        let c = body[i];
        match c {
            b'0'..=b'9' => {
                if mant < 10i128.pow(36) {
                    mant = mant * 10 + i128::from(c - b'0');
                    if seen_dot {
                        exp10 -= 1;
                    }
                } else {
                    if !seen_dot {
                        exp10 += 1;
                    }
                    sticky |= c != b'0';
                }
                digits += 1;
            }
            b'.' if !seen_dot => seen_dot = true,
            b'e' | b'E' => break,
            _ => return Err(NumErr::NotANumber),
        }
        i += 1;
    }
    if digits == 0 {
        return Err(NumErr::NotANumber);
    }
    if i < body.len() {
        let e = std::str::from_utf8(&body[i + 1..]).map_err(|_| NumErr::NotANumber)?;
        let e: i32 = e.parse().map_err(|_| NumErr::NotANumber)?;
        exp10 = exp10.checked_add(e).ok_or(NumErr::Overflow)?;
    }
    let _ = sticky;
    let value: i128 = if exp10 >= 0 {
        if exp10 > 38 {
            if mant == 0 {
                0
            } else {
                return Err(NumErr::Overflow);
            }
        } else {
            mant.checked_mul(10i128.pow(exp10 as u32)).ok_or(NumErr::Overflow)?
        }
    } else {
        let d = -exp10;
        if d > 38 {
            0
        } else {
            let p = 10i128.pow(d as u32);
            let q = mant / p;
            let r = mant % p;
            // Half away from zero (on the magnitude; the sign is applied below).
            if r * 2 >= p {
                q + 1
            } else {
                q
            }
        }
    };
    let value = if neg { -value } else { value };
    i64::try_from(value).map_err(|_| NumErr::Overflow)
}

/// Parses an integer (tolerating a fractional or exponent form such as `5.0` or `1e3`).
pub fn integer(text: &[u8]) -> Result<i64, NumErr> {
    // Fast path: plain digits that fit.
    if !text.is_empty() && text.len() <= 18 && text.iter().all(u8::is_ascii_digit) {
        let mut v: i64 = 0;
        for &c in text {
            v = v * 10 + i64::from(c - b'0');
        }
        return Ok(v);
    }
    decimal_scaled(text, 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decimal_is_exact_at_epoch_magnitude() {
        assert_eq!(decimal_scaled(b"1712195495519695.8", 3), Ok(1_712_195_495_519_695_800));
        assert_eq!(decimal_scaled(b"4458676524648.797", 3), Ok(4_458_676_524_648_797));
        assert_eq!(decimal_scaled(b"63.813", 3), Ok(63_813));
        assert_eq!(decimal_scaled(b"1694128201436255", 3), Ok(1_694_128_201_436_255_000));
        assert_eq!(decimal_scaled(b"0.0005", 3), Ok(1));
        assert_eq!(decimal_scaled(b"0.0004999", 3), Ok(0));
        assert_eq!(decimal_scaled(b"-0.0005", 3), Ok(-1));
        assert_eq!(decimal_scaled(b"-2.5", 0), Ok(-3));
        assert_eq!(decimal_scaled(b"1.5e3", 3), Ok(1_500_000));
        assert_eq!(decimal_scaled(b"15E-1", 3), Ok(1_500));
        assert_eq!(decimal_scaled(b"1e30", 0), Err(NumErr::Overflow));
        assert_eq!(decimal_scaled(b"99999999999999999999999", 0), Err(NumErr::Overflow));
        assert_eq!(decimal_scaled(b"N/A", 0), Err(NumErr::NotANumber));
        assert_eq!(decimal_scaled(b"", 0), Err(NumErr::NotANumber));
        assert_eq!(decimal_scaled(b"1e999999999999", 0), Err(NumErr::NotANumber));
    }

    /// The fast paths agree with the general ones on every form, including the edges where
    /// they hand over (19 digits, a fraction longer than the scale, exponents, signs).
    #[test]
    fn fast_paths_agree_with_the_general_ones() {
        let mut seed = 0x9E37_79B9_7F4A_7C15u64;
        let mut next = move || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed
        };
        // Number-like text of 1 to `most` bytes: mostly digits, a dot, sign or exponent now and then.
        fn number_like(next: &mut impl FnMut() -> u64, most: u64) -> Vec<u8> {
            let alphabet = b"0123456789.-+eE";
            let len = 1 + (next() % most) as usize;
            (0..len)
                .map(|k| {
                    let r = next();
                    if k > 0 && r % 5 != 0 {
                        b'0' + (r % 10) as u8
                    } else {
                        alphabet[(r % 15) as usize]
                    }
                })
                .collect()
        }
        for _ in 0..200_000 {
            let t = number_like(&mut next, 24);
            for scale in [0, 3, 6] {
                assert_eq!(
                    decimal_scaled(&t, scale),
                    decimal_general(&t, scale),
                    "{:?} at {scale}",
                    String::from_utf8_lossy(&t)
                );
            }
        }
        for t in [
            &b"9223372036854775807"[..],
            b"-9223372036854775808",
            b"999999999999999999",
            b"-999999999999999.999",
            b".5",
            b"5.",
            b"-",
            b".",
            b"-.",
            b"0",
            b"-0",
            b"00012.3400",
        ] {
            for scale in [0, 3, 18, 19] {
                assert_eq!(
                    decimal_scaled(t, scale),
                    decimal_general(t, scale),
                    "{:?} at {scale}",
                    String::from_utf8_lossy(t)
                );
            }
        }
        // The one-pass read of a number in a buffer agrees with the two-pass one, wherever it
        // answers, and never moves past a number it leaves to it.
        for _ in 0..200_000 {
            let mut t = number_like(&mut next, 22);
            let ends = b",}] \n:x";
            if next() % 8 != 0 {
                t.push(ends[(next() % ends.len() as u64) as usize]);
            }
            for scale in [0u32, 3] {
                let mut pos = 0;
                if let Some(v) = plain_number(&t, &mut pos, scale) {
                    let mut p2 = 0;
                    let text = scalar(&t, &mut p2);
                    assert!(text.is_ok(), "a number the one-pass read took is a scalar: {t:?}");
                    let text = text.unwrap_or_default();
                    assert_eq!(pos, p2, "{:?}", String::from_utf8_lossy(&t));
                    let want = if scale == 0 { integer(text) } else { decimal_scaled(text, 3) };
                    assert_eq!(Ok(v), want, "{:?} at {scale}", String::from_utf8_lossy(&t));
                } else {
                    assert_eq!(pos, 0);
                }
            }
        }
        let bytes = b"ab\\\"cd\"";
        for _ in 0..200_000 {
            let len = (next() % 40) as usize;
            let s: Vec<u8> = (0..len)
                .map(|_| {
                    let r = next();
                    if r % 9 == 0 {
                        bytes[(r % bytes.len() as u64) as usize]
                    } else {
                        b'a' + (r % 26) as u8
                    }
                })
                .collect();
            assert_eq!(
                quote_or_backslash(&s),
                memchr::memchr2(b'"', b'\\', &s),
                "{:?}",
                String::from_utf8_lossy(&s)
            );
        }
    }

    #[test]
    fn integer_paths() {
        assert_eq!(integer(b"123"), Ok(123));
        assert_eq!(integer(b"-123"), Ok(-123));
        assert_eq!(integer(b"5.0"), Ok(5));
        assert_eq!(integer(b"18446744073709551616"), Err(NumErr::Overflow));
    }

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
