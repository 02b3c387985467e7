//! Numbers read exactly: decimals scaled to integers (Kineto's microseconds to nanoseconds with
//! no `f64` rounding), the plain fast paths and the general one, and integers.

use super::is_scalar_end;

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
    use super::super::{quote_or_backslash, scalar};
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
}
