//! The source's own `args` of every event row, kept only on request (the exports' hand-off
//! without loss; the analysis never reads them).
//!
//! One arena of text per trace (`text`), and per row of [`super::EventTable`] where its args
//! object is in it (`at`, `len`): no allocation per event, 12 bytes per row beside the text.
//! Each object is the source's bytes verbatim (key order, nesting, number spelling), repaired
//! only where it could not be valid JSON text otherwise (invalid UTF-8 replaced by U+FFFD, raw
//! control characters inside strings escaped; `args_repaired`), and without a top-level
//! `rankscope` member (an export of ours read back: the export writes that member afresh).
//! A row whose args could not be kept (not an object) has [`RawArgs::NOT_KEPT`] as its length
//! and an `args_not_kept` diagnostic; a row whose event had no `args` an empty slice.

/// The arena and each row's place in it (see the module doc).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RawArgs {
    pub text: Vec<u8>,
    pub at: Vec<u64>,
    pub len: Vec<u32>,
}

impl RawArgs {
    /// The length of a row whose args were not kept.
    pub const NOT_KEPT: u32 = u32::MAX;

    /// Bytes held beside the event table (the text and the two columns).
    pub fn bytes(&self) -> usize {
        self.text.len() + self.at.len() * 12
    }

    /// Rows described.
    pub fn rows(&self) -> usize {
        self.at.len()
    }

    /// Row `i`'s args object text: `Some(b"")` when the event had none, `None` when they were
    /// not kept (or `i` is beyond the rows).
    pub fn get(&self, i: usize) -> Option<&[u8]> {
        let (&at, &len) = (self.at.get(i)?, self.len.get(i)?);
        if len == Self::NOT_KEPT {
            return None;
        }
        let at = usize::try_from(at).ok()?;
        self.text.get(at..at.checked_add(len as usize)?)
    }

    /// Appends a row whose args are `span` of the arena (`None`: not kept).
    pub fn push(&mut self, span: Option<(u64, u32)>) {
        let (at, len) = span.unwrap_or((0, Self::NOT_KEPT));
        self.at.push(at);
        self.len.push(len);
    }

    /// Appends a row with a copy of `args` (from another arena; `None`: not kept).
    pub fn push_copy(&mut self, args: Option<&[u8]>) {
        match args {
            Some(b) => {
                let at = self.text.len() as u64;
                self.text.extend_from_slice(b);
                self.push(Some((at, b.len() as u32)));
            }
            None => self.push(None),
        }
    }

    /// Reorders the rows as [`super::EventTable::permute_with`] does (the text stays).
    pub(crate) fn permute(&mut self, perm: &[u32]) {
        if self.at.len() == perm.len() && self.len.len() == perm.len() {
            self.at = perm.iter().map(|&i| self.at[i as usize]).collect();
            self.len = perm.iter().map(|&i| self.len[i as usize]).collect();
        }
    }
}

/// What [`capture`] did to an args value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Captured {
    /// Kept verbatim (maybe without a `rankscope` member).
    Kept,
    /// Kept, with invalid UTF-8 or raw control characters repaired.
    Repaired,
    /// Not an object: not kept.
    NotAnObject,
}

/// Appends the args value `v` (a whole JSON value, already scanned by the parser) to `text` as
/// the module doc says; returns its span (`None` when not kept) and what was done.
pub(crate) fn capture(text: &mut Vec<u8>, v: &[u8]) -> (Option<(u64, u32)>, Captured) {
    let v = v.trim_ascii();
    if v.first() != Some(&b'{') || v.last() != Some(&b'}') {
        return (None, Captured::NotAnObject);
    }
    let start = text.len();
    let mut how = Captured::Kept;
    match std::str::from_utf8(v) {
        Ok(_) => text.extend_from_slice(v),
        Err(_) => {
            text.extend_from_slice(String::from_utf8_lossy(v).as_bytes());
            how = Captured::Repaired;
        }
    }
    if text[start..].iter().any(|&b| b < 0x20 && !matches!(b, b' ' | b'\t' | b'\n' | b'\r'))
        || has_raw_whitespace_in_string(&text[start..])
    {
        let fixed = escape_controls(&text[start..]);
        text.truncate(start);
        text.extend_from_slice(&fixed);
        how = Captured::Repaired;
    }
    drop_member(text, start, b"rankscope");
    (Some((start as u64, (text.len() - start) as u32)), how)
}

/// Whether a tab, newline or carriage return stands raw inside a string (valid between
/// tokens, not inside one).
fn has_raw_whitespace_in_string(v: &[u8]) -> bool {
    if !v.iter().any(|&b| matches!(b, b'\t' | b'\n' | b'\r')) {
        return false;
    }
    let (mut in_str, mut esc) = (false, false);
    for &b in v {
        if in_str {
            match b {
                _ if esc => esc = false,
                b'\\' => esc = true,
                b'"' => in_str = false,
                b'\t' | b'\n' | b'\r' => return true,
                _ => {}
            }
        } else if b == b'"' {
            in_str = true;
        }
    }
    false
}

/// `v` with every control character inside a string written as `\u00XX`.
fn escape_controls(v: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(v.len() + 16);
    let (mut in_str, mut esc) = (false, false);
    for &b in v {
        if in_str {
            match b {
                _ if esc => esc = false,
                b'\\' => esc = true,
                b'"' => in_str = false,
                c if c < 0x20 => {
                    out.extend_from_slice(format!("\\u{c:04x}").as_bytes());
                    continue;
                }
                _ => {}
            }
        } else if b == b'"' {
            in_str = true;
        }
        out.push(b);
    }
    out
}

/// Removes the top-level member `key` from the object at `text[start..]` (valid JSON text),
/// with the comma that joined it to a neighbour.
fn drop_member(text: &mut Vec<u8>, start: usize, key: &[u8]) {
    let obj = &text[start..];
    // A cheap test first: the key's quoted text anywhere.
    let quoted: Vec<u8> = [&b"\""[..], key, b"\""].concat();
    if !obj.windows(quoted.len()).any(|w| w == quoted.as_slice()) {
        return;
    }
    // Top-level members: (start of key, end of value) at depth 1.
    let mut members: Vec<(usize, usize, bool)> = Vec::new();
    let (mut depth, mut in_str, mut esc) = (0usize, false, false);
    let mut key_start: Option<usize> = None;
    let mut is_key = true;
    let mut str_start = 0;
    for (i, &b) in obj.iter().enumerate() {
        if in_str {
            match b {
                _ if esc => esc = false,
                b'\\' => esc = true,
                b'"' => {
                    in_str = false;
                    if depth == 1 && is_key {
                        let name = &obj[str_start + 1..i];
                        members.push((str_start, usize::MAX, name == key));
                        key_start = Some(str_start);
                    }
                }
                _ => {}
            }
            continue;
        }
        match b {
            b'"' => {
                in_str = true;
                str_start = i;
            }
            b'{' | b'[' => {
                depth += 1;
                if depth == 1 {
                    is_key = true;
                }
            }
            b'}' | b']' => {
                if depth == 1 {
                    if let (Some(_), Some(m)) = (key_start.take(), members.last_mut()) {
                        m.1 = i;
                    }
                }
                depth = depth.saturating_sub(1);
            }
            b':' if depth == 1 => is_key = false,
            b',' if depth == 1 => {
                if let (Some(_), Some(m)) = (key_start.take(), members.last_mut()) {
                    m.1 = i;
                }
                is_key = true;
            }
            _ => {}
        }
    }
    let Some(k) = members.iter().position(|m| m.2) else { return };
    let (s, e) = (members[k].0, members[k].1);
    if e == usize::MAX {
        return;
    }
    // With the comma before it (not the first member), else with the comma after it.
    let cut = if k > 0 {
        let comma = obj[..s].iter().rposition(|&b| b == b',').unwrap_or(s);
        comma..e
    } else if k + 1 < members.len() {
        s..members[k + 1].0
    } else {
        s..e
    };
    let (a, b) = (start + cut.start, start + cut.end);
    text.drain(a..b);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kept(v: &str) -> (String, Captured) {
        let mut t = b"xx".to_vec();
        let (span, how) = capture(&mut t, v.as_bytes());
        let (at, len) = span.unwrap_or((0, 0));
        (String::from_utf8_lossy(&t[at as usize..at as usize + len as usize]).into_owned(), how)
    }

    #[test]
    fn args_are_kept_verbatim() {
        let v = r#"{"Input Dims": [[2, 3], []], "grid": [1, 2, 3], "x": {"y": 1.50}}"#;
        assert_eq!(kept(v), (v.to_string(), Captured::Kept));
        assert_eq!(kept("  {}  "), ("{}".to_string(), Captured::Kept));
        let mut t = Vec::new();
        assert_eq!(capture(&mut t, b"[1]"), (None, Captured::NotAnObject));
        assert!(t.is_empty());
    }

    #[test]
    fn our_own_member_is_dropped_wherever_it_stands() {
        let cases = [
            (r#"{"rankscope": {"step": 1}, "a": 1}"#, r#"{"a": 1}"#),
            (r#"{"a": 1, "rankscope": {"step": [1, {"b": "}"}]}, "c": 2}"#, r#"{"a": 1, "c": 2}"#),
            (r#"{"a": "rankscope", "rankscope": 3}"#, r#"{"a": "rankscope"}"#),
            (r#"{"rankscope": 3}"#, r#"{}"#),
            (r#"{"a": {"rankscope": 3}}"#, r#"{"a": {"rankscope": 3}}"#),
        ];
        for (v, want) in cases {
            let (got, _) = kept(v);
            assert_eq!(got, want, "{v}");
            assert!(serde_json::from_str::<serde_json::Value>(&got).is_ok(), "{got}");
        }
    }

    #[test]
    fn controls_and_bad_utf8_are_repaired() {
        let (got, how) = kept("{\"a\": \"x\ty\u{1}\"}");
        assert_eq!((got.as_str(), how), ("{\"a\": \"x\\u0009y\\u0001\"}", Captured::Repaired));
        let mut t = Vec::new();
        let (span, how) = capture(&mut t, b"{\"a\": \"\xff\"}");
        assert_eq!(how, Captured::Repaired);
        let v: serde_json::Value =
            serde_json::from_slice(&t[..span.map_or(0, |s| s.1 as usize)]).unwrap_or_default();
        assert_eq!(v["a"], "\u{fffd}");
        let mut r = RawArgs::default();
        r.push(Some((0, 2)));
        r.push(None);
        r.text = b"{}".to_vec();
        assert_eq!((r.get(0), r.get(1), r.get(2)), (Some(&b"{}"[..]), None, None));
    }
}
