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
//!
//! By concern: this module holds the stop reasons, whitespace, keys and scalars; [`string`]
//! reads and skips strings (escapes decoded); [`structure`] skips and validates nested values;
//! [`number`] reads numbers exactly as scaled integers.

mod number;
mod string;
mod structure;

pub use number::{decimal_scaled, integer, plain_number, NumErr};
pub use string::{quote_or_backslash, string, Str};
pub use structure::{skip_value, validate_object, Nest, MAX_DEPTH};

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
