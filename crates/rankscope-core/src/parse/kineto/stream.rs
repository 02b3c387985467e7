//! The document walk: the top-level object (or bare array) as a state machine over units, the
//! `traceEvents` elements handed to [`TraceParser::event`], oversized members skipped as a stream,
//! and damaged bytes skipped by resynchronisation at the next event start.

use super::*;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum State {
    /// Before the first value.
    Start,
    /// Inside the top-level object, before a member or the `,` before one (`first`: no member
    /// read yet).
    Member { first: bool },
    /// A member's key and `:` were read; its value comes next (its own unit, so whitespace
    /// before it is never carried).
    MemberValue { key: MemberKey },
    /// Junk where a member's key belongs: skipped up to the next `"` or `}`.
    MemberJunk,
    /// Inside `traceEvents`, before an element or the `,` before one (`need_comma`: an element
    /// was read, so a `,` is due).
    Events { need_comma: bool, in_object: bool },
    /// Inside `traceEvents`, skipping damaged bytes up to the next event start (see
    /// [`TraceParser::resync`]).
    Resync { in_object: bool },
    /// Skipping a top-level member value longer than [`Limits::unit_bytes`], as a stream.
    SkipMember { skip: StreamSkip },
    /// After the document.
    Done,
}

/// What a top-level key is to the parser.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum MemberKey {
    TraceEvents,
    /// A metadata member read into [`TraceMeta`] (the key's index in [`META_KEYS`]).
    Meta(usize),
    Other,
}

/// Top-level members read as metadata.
pub(super) const META_KEYS: &[&str] = &[
    "schemaVersion",
    "baseTimeNanoseconds",
    "displayTimeUnit",
    "traceName",
    "host_name",
    "hostname",
    "distributedInfo",
    "deviceProperties",
];

/// Keys that only ever appear at the top level of a Kineto file (never inside an event): where
/// one stands after damaged bytes, the event array is over and the document's members resume.
pub(super) const TOP_ONLY_KEYS: &[&[u8]] = &[
    b"traceName",
    b"baseTimeNanoseconds",
    b"displayTimeUnit",
    b"distributedInfo",
    b"deviceProperties",
    b"schemaVersion",
];

/// A streaming skip over one JSON value of any length: bracket matching for the first
/// [`json::MAX_DEPTH`] levels, plain counting beyond, string state across chunks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(super) struct StreamSkip {
    pub(super) nest: json::Nest,
    pub(super) deeper: u64,
    pub(super) begun: bool,
    pub(super) in_str: bool,
    pub(super) esc: bool,
    pub(super) scalar: bool,
    /// Text offset where the skip began.
    pub(super) start: u64,
}

impl StreamSkip {
    /// Runs over `buf`; returns the bytes consumed and, when the value ended inside `buf`,
    /// `Some(true)` (it ended well) or `Some(false)` (a bracket did not match its opener).
    fn run(&mut self, buf: &[u8]) -> (usize, Option<bool>) {
        let mut i = 0;
        while i < buf.len() {
            if self.in_str {
                if self.esc {
                    self.esc = false;
                    i += 1;
                    continue;
                }
                match memchr::memchr2(b'"', b'\\', &buf[i..]) {
                    None => return (buf.len(), None),
                    Some(k) => {
                        i += k;
                        if buf[i] == b'\\' {
                            self.esc = true;
                        } else {
                            self.in_str = false;
                            if self.nest.depth() == 0 && self.deeper == 0 {
                                return (i + 1, Some(true));
                            }
                        }
                        i += 1;
                        continue;
                    }
                }
            }
            let b = buf[i];
            if !self.begun {
                if json::is_ws(b) || b == b',' {
                    i += 1;
                    continue;
                }
                self.begun = true;
                self.scalar = !matches!(b, b'"' | b'{' | b'[');
            }
            if self.scalar {
                if matches!(b, b',' | b'}' | b']' | b':') || json::is_ws(b) {
                    return (i, Some(true));
                }
                i += 1;
                continue;
            }
            match b {
                b'"' => self.in_str = true,
                b'{' | b'[' if self.deeper > 0 || !self.nest.push(b == b'{') => self.deeper += 1,
                b'}' | b']' => {
                    if self.deeper > 0 {
                        self.deeper -= 1;
                    } else if !self.nest.pop(b == b'}') {
                        return (i, Some(false));
                    }
                    if self.nest.depth() == 0 && self.deeper == 0 {
                        return (i + 1, Some(true));
                    }
                }
                _ => {}
            }
            i += 1;
        }
        (buf.len(), None)
    }
}

/// A damaged region of `traceEvents` being skipped.
#[derive(Debug, Clone)]
pub(super) struct Damage {
    /// Text offset of the damaged element's first byte.
    pub(super) start: u64,
    /// Where the damage showed, and as what.
    pub(super) bad_at: u64,
    pub(super) what: String,
    /// The first bytes of the damaged element, as text.
    pub(super) snippet: String,
    /// `"ph"` keys met in the skipped bytes (each event has one).
    pub(super) events: u64,
    /// The damaged element began as an object (so it was at least one event).
    pub(super) object: bool,
}

/// Totals over every damaged region of a file.
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct DamageTotals {
    pub(super) places: u64,
    pub(super) bytes: u64,
    pub(super) events: u64,
}

/// Top-level keys that mark a file as Kineto output even when it holds no events.
pub(super) const KINETO_KEYS: &[&str] = &[
    "schemaVersion",
    "deviceProperties",
    "distributedInfo",
    "baseTimeNanoseconds",
    "displayTimeUnit",
    "traceName",
];

pub(super) fn describe_byte(b: Option<&u8>) -> String {
    match b {
        None => "the end of the input".to_string(),
        Some(&c) if c.is_ascii_graphic() => format!("`{}`", c as char),
        Some(&c) => format!("byte 0x{c:02x}"),
    }
}

/// Whether the `]` at `buf[at]` closes the event array: followed by the end of the document
/// (`}` in the object form, nothing in the array form) or by another member. `strict` (while
/// skipping damage, where `], "key":` is common inside an event's args) accepts only keys that
/// never appear inside an event.
pub(super) fn array_end_plausible(
    buf: &[u8],
    at: usize,
    at_eof: bool,
    strict: bool,
    in_object: bool,
) -> Res<bool> {
    let mut p = at + 1;
    let next = match json::peek(buf, &mut p) {
        Ok(b) => b,
        // Nothing follows: the end of the document, cut or not.
        Err(_) if at_eof => return Ok(true),
        Err(e) => return Err(e),
    };
    if !strict {
        // Between events a `]` is the array's end unless an event follows it (`], {` or `]{`:
        // a stray bracket); the array form ends there whatever comes after (trailing data).
        return match next {
            b'{' => Ok(false),
            b',' if !in_object => Ok(false),
            b',' => {
                // The object form goes on with a key: a string followed by `:`.
                p += 1;
                match json::peek(buf, &mut p) {
                    Ok(b'"') => {}
                    Ok(_) => return Ok(false),
                    Err(_) if at_eof => return Ok(true),
                    Err(e) => return Err(e),
                }
                let mut scratch = Vec::new();
                match json::string(buf, &mut p, &mut scratch) {
                    Ok(_) => match json::peek(buf, &mut p) {
                        Ok(b) => Ok(b == b':'),
                        Err(_) if at_eof => Ok(false),
                        Err(e) => Err(e),
                    },
                    Err(Stop::Incomplete) if !at_eof => Err(Stop::Incomplete),
                    Err(_) => Ok(false),
                }
            }
            _ => Ok(true),
        };
    }
    if !in_object {
        return Ok(false);
    }
    match next {
        b'}' => {
            p += 1;
            match json::peek(buf, &mut p) {
                Ok(_) => Ok(false),
                Err(_) if at_eof => Ok(true),
                Err(e) => Err(e),
            }
        }
        b',' => {
            p += 1;
            match json::peek(buf, &mut p) {
                Ok(b'"') => top_only_key_at(&buf[p..], at_eof),
                Ok(_) => Ok(false),
                Err(_) if at_eof => Ok(false),
                Err(e) => Err(e),
            }
        }
        _ => Ok(false),
    }
}

/// Whether `rest` starts with `"KEY"` and `:`, KEY one of [`TOP_ONLY_KEYS`].
pub(super) fn top_only_key_at(rest: &[u8], at_eof: bool) -> Res<bool> {
    for k in TOP_ONLY_KEYS {
        let n = k.len() + 2;
        if rest.len() < n {
            if !at_eof && rest.get(1..).is_some_and(|r| k.starts_with(r)) {
                return Err(Stop::Incomplete);
            }
            continue;
        }
        if rest.first() == Some(&b'"') && &rest[1..n - 1] == *k && rest[n - 1] == b'"' {
            let mut p = n;
            return match json::peek(rest, &mut p) {
                Ok(b) => Ok(b == b':'),
                Err(_) if at_eof => Ok(false),
                Err(e) => Err(e),
            };
        }
    }
    Ok(false)
}

impl TraceParser {
    /// Parses as many whole units of `buf` as possible; returns the bytes consumed.
    ///
    /// A unit never sees more than [`Limits::unit_bytes`] of the buffer: one that needs more is
    /// oversized whatever the chunking, so the decision (and every count) is the same for any
    /// chunk size.
    pub(super) fn process(&mut self, buf: &[u8], at_eof: bool) -> usize {
        let base = self.carry_offset;
        let mut pos = 0usize;
        loop {
            // Whitespace between units is consumed, never carried (a whitespace bomb costs
            // nothing).
            if !matches!(self.state, State::Done | State::SkipMember { .. }) {
                while buf.get(pos).is_some_and(|&b| json::is_ws(b)) {
                    pos += 1;
                }
            }
            let unit_start = pos;
            let windowed =
                matches!(self.state, State::Member { .. } | State::MemberValue { .. } | State::Events { .. });
            let end = if windowed {
                buf.len().min(unit_start.saturating_add(self.limits.unit_bytes))
            } else {
                buf.len()
            };
            let r = self.step(&buf[..end], &mut pos, base, at_eof && end == buf.len());
            match r {
                Ok(true) => self.flush_diags(),
                Ok(false) => {
                    self.flush_diags();
                    return pos;
                }
                Err(Stop::Incomplete) => {
                    self.pending.clear();
                    pos = unit_start;
                    if end == buf.len() {
                        // At the end of a file that ends the way a document does, an event that
                        // does not end is damaged (a broken string or bracket made it run on),
                        // not cut: skip it and resume at the next event after it.
                        if let (true, State::Events { in_object, .. }) = (at_eof, self.state) {
                            let last = buf.iter().rev().find(|&&b| !json::is_ws(b)).copied();
                            if matches!(last, Some(b'}' | b']')) && pos < buf.len() {
                                self.start_damage(
                                    buf,
                                    unit_start,
                                    buf.len(),
                                    base,
                                    "no end before the end of the file".to_string(),
                                    in_object,
                                );
                                pos = unit_start + 1;
                                continue;
                            }
                        }
                        return unit_start;
                    }
                    // The unit does not end within the limit.
                    let limit = self.limits.unit_bytes;
                    match self.state {
                        State::Events { in_object, .. } => {
                            self.start_damage(
                                buf,
                                unit_start,
                                end,
                                base,
                                format!("no end within the {limit}-byte limit of one event"),
                                in_object,
                            );
                            pos = unit_start + 1;
                        }
                        _ => {
                            let start = base + unit_start as u64;
                            self.diag(DiagKind::OversizedValue, Some(start), || {
                                format!(
                                    "a top-level member at byte {start} is longer than the {limit}-byte limit; skipped without being read"
                                )
                            });
                            self.flush_diags();
                            self.state =
                                State::SkipMember { skip: StreamSkip { start, ..StreamSkip::default() } };
                        }
                    }
                }
                Err(Stop::Bad(at)) => {
                    self.flush_diags();
                    // Only the top-level structure reaches here; events recover on their own.
                    let off = base + at as u64;
                    match self.state {
                        State::Start => {
                            self.fatal = Some(self.not_a_trace(
                                off,
                                &format!("expected `{{` or `[` but found {}", describe_byte(buf.get(at))),
                            ));
                            return buf.len();
                        }
                        _ => {
                            // Junk where a member belongs: skip up to the next key or the end.
                            self.diag(DiagKind::MalformedEvent, Some(off), || {
                                format!(
                                    "unexpected {} in the document structure at byte {off}; skipped up to the next key",
                                    describe_byte(buf.get(at))
                                )
                            });
                            self.flush_diags();
                            self.state = State::MemberJunk;
                            pos = at.max(unit_start) + 1;
                            if pos > buf.len() {
                                return buf.len();
                            }
                        }
                    }
                }
            }
        }
    }

    /// Parses one unit. `Ok(false)` when there is nothing more to do in this buffer.
    // Long on purpose: one match over the tokenizer's states ([`State`]), each arm one unit of the format.
    pub(super) fn step(&mut self, buf: &[u8], pos: &mut usize, base: u64, at_eof: bool) -> Res<bool> {
        match self.state {
            State::Start => {
                // A UTF-8 byte-order mark is harmless.
                const BOM: &[u8] = &[0xEF, 0xBB, 0xBF];
                let head = &buf[*pos..];
                if head.starts_with(BOM) {
                    *pos += 3;
                } else if !head.is_empty() && BOM.starts_with(head) && !at_eof {
                    return Err(Stop::Incomplete);
                }
                match json::peek(buf, pos) {
                    Ok(b'{') => {
                        *pos += 1;
                        self.state = State::Member { first: true };
                    }
                    Ok(b'[') => {
                        *pos += 1;
                        self.out.meta.form = "array";
                        self.saw_trace_events = true;
                        self.state = State::Events { need_comma: false, in_object: false };
                    }
                    Ok(_) => return Err(Stop::Bad(*pos)),
                    Err(e) => return Err(e),
                }
                Ok(true)
            }
            State::Member { first } => {
                let b = json::peek(buf, pos)?;
                if b == b'}' {
                    *pos += 1;
                    self.state = State::Done;
                    return Ok(true);
                }
                if !first {
                    json::expect(buf, pos, b',')?;
                    if json::peek(buf, pos)? == b'}' {
                        *pos += 1;
                        self.state = State::Done;
                        return Ok(true);
                    }
                }
                let key = match json::string(buf, pos, &mut self.scratch)? {
                    Str::Raw(b) => b,
                    Str::Escaped => &self.scratch[..],
                };
                let kind = if key == b"traceEvents" {
                    MemberKey::TraceEvents
                } else {
                    let k = std::str::from_utf8(key).unwrap_or("");
                    if KINETO_KEYS.contains(&k) {
                        self.saw_kineto_key = true;
                    }
                    META_KEYS.iter().position(|m| *m == k).map_or(MemberKey::Other, MemberKey::Meta)
                };
                json::expect(buf, pos, b':')?;
                self.state = State::MemberValue { key: kind };
                Ok(true)
            }
            State::MemberValue { key } => {
                let at = *pos;
                // A member nested deeper than the scanners' bracket stack (128) is skipped as
                // a stream, which counts depth without bound, and the members after it (the
                // events) are read: it made the whole file "without `traceEvents`".
                let too_deep = |buf: &[u8], bad: usize| matches!(buf.get(bad), Some(b'{' | b'['));
                match key {
                    MemberKey::TraceEvents => {
                        if json::peek(buf, pos)? == b'[' {
                            *pos += 1;
                            self.saw_trace_events = true;
                            self.state = State::Events { need_comma: false, in_object: true };
                            return Ok(true);
                        }
                        json::skip_value(buf, pos)?;
                        self.diag(DiagKind::BadMetadata, Some(base + at as u64), || {
                            "`traceEvents` is not an array; ignored".to_string()
                        });
                    }
                    MemberKey::Meta(i) => {
                        let name = META_KEYS.get(i).copied().unwrap_or("");
                        match value::parse(buf, pos) {
                            Ok(v) => self.apply_meta(name, &v, base + at as u64),
                            Err(Stop::Incomplete) => return Err(Stop::Incomplete),
                            Err(Stop::Bad(_)) => {
                                *pos = at;
                                match json::skip_value(buf, pos) {
                                    Err(Stop::Bad(b)) if too_deep(buf, b) => {
                                        return Ok(self.skip_deep_member(base, at, pos));
                                    }
                                    r => r?,
                                }
                                self.diag(DiagKind::BadMetadata, Some(base + at as u64), || {
                                    format!("top-level `{name}` could not be read; ignored")
                                });
                            }
                        }
                    }
                    MemberKey::Other => match json::skip_value(buf, pos) {
                        Err(Stop::Bad(b)) if too_deep(buf, b) => {
                            return Ok(self.skip_deep_member(base, at, pos))
                        }
                        r => r?,
                    },
                }
                self.state = State::Member { first: false };
                Ok(true)
            }
            State::MemberJunk => {
                let rest = &buf[*pos..];
                match memchr::memchr2(b'"', b'}', rest) {
                    Some(k) => {
                        *pos += k;
                        self.state = State::Member { first: true };
                        Ok(true)
                    }
                    None => {
                        *pos = buf.len();
                        Ok(false)
                    }
                }
            }
            State::SkipMember { mut skip } => {
                let (used, done) = skip.run(&buf[*pos..]);
                *pos += used;
                match done {
                    None => {
                        self.state = State::SkipMember { skip };
                        Ok(false)
                    }
                    Some(_) => {
                        self.state = State::Member { first: false };
                        Ok(true)
                    }
                }
            }
            State::Events { need_comma, in_object } => {
                let start = *pos;
                let b = json::peek(buf, pos)?;
                match b {
                    b']' => {
                        if array_end_plausible(buf, start, at_eof, false, in_object)? {
                            *pos += 1;
                            self.state = if in_object { State::Member { first: false } } else { State::Done };
                        } else {
                            self.start_damage(
                                buf,
                                start,
                                start,
                                base,
                                "a `]` that does not end the event array".to_string(),
                                in_object,
                            );
                            *pos = start + 1;
                        }
                        return Ok(true);
                    }
                    b',' if need_comma => {
                        *pos += 1;
                        self.state = State::Events { need_comma: false, in_object };
                        return Ok(true);
                    }
                    b',' => {
                        // `[,` or `,,`: an empty element costs nothing.
                        *pos += 1;
                        self.non_object_elements += 1;
                        self.diag(DiagKind::MalformedEvent, Some(base + start as u64), || {
                            format!(
                                "an empty element (a stray `,`) in `traceEvents` at byte {}; skipped",
                                base + start as u64
                            )
                        });
                        return Ok(true);
                    }
                    _ => {}
                }
                if need_comma {
                    let off = base + start as u64;
                    self.diag(DiagKind::MalformedEvent, Some(off), || {
                        format!("missing `,` between events at byte {off}")
                    });
                }
                self.state = State::Events { need_comma: true, in_object };
                let restore = State::Events { need_comma, in_object };
                if b != b'{' {
                    // Not an object: skipped if it is a whole value followed by a separator;
                    // otherwise it is damage.
                    let bad_at = match json::skip_value(buf, pos) {
                        Ok(()) => match json::peek(buf, pos) {
                            Ok(b',' | b']') => {
                                self.non_object_elements += 1;
                                self.diag(DiagKind::MalformedEvent, Some(base + start as u64), || {
                                    "an element of `traceEvents` is not an object; skipped".to_string()
                                });
                                return Ok(true);
                            }
                            Ok(_) => *pos,
                            Err(_) if at_eof => *pos,
                            Err(e) => {
                                self.state = restore;
                                return Err(e);
                            }
                        },
                        Err(Stop::Incomplete) => {
                            self.state = restore;
                            return Err(Stop::Incomplete);
                        }
                        Err(Stop::Bad(at)) => at,
                    };
                    let what = format!("{} where an event belongs", describe_byte(buf.get(start)));
                    self.non_object_elements += 1;
                    self.start_damage(buf, start, bad_at, base, what, in_object);
                    *pos = start + 1;
                    return Ok(true);
                }
                match self.event(buf, pos, base) {
                    Ok(()) => Ok(true),
                    Err(Stop::Incomplete) => {
                        self.state = restore;
                        Err(Stop::Incomplete)
                    }
                    Err(Stop::Bad(at)) => {
                        let what = format!("unexpected {}", describe_byte(buf.get(at)));
                        self.start_damage(buf, start, at, base, what, in_object);
                        *pos = start + 1;
                        Ok(true)
                    }
                }
            }
            State::Resync { in_object } => self.resync(buf, pos, base, at_eof, in_object),
            State::Done => {
                // Anything after the document: counted to the end of the file.
                let rest = &buf[*pos..];
                match self.trailing.as_mut() {
                    Some((_, n)) => *n += rest.len() as u64,
                    None => {
                        if let Some(k) = rest.iter().position(|&b| !json::is_ws(b)) {
                            self.trailing = Some((base + (*pos + k) as u64, (rest.len() - k) as u64));
                        }
                    }
                }
                *pos = buf.len();
                Ok(false)
            }
        }
    }

    /// Starts skipping a damaged element of `traceEvents` that begins at `buf[start]`.
    /// Starts skipping a top-level member value at `at` that nests deeper than the scanners'
    /// bracket stack, as a stream ([`StreamSkip`]), and says so: the parse goes on after it.
    fn skip_deep_member(&mut self, base: u64, at: usize, pos: &mut usize) -> bool {
        let start = base + at as u64;
        self.diag(DiagKind::OversizedValue, Some(start), || {
            format!(
                "a top-level member at byte {start} nests deeper than {} levels; skipped without being read",
                json::MAX_DEPTH
            )
        });
        *pos = at;
        self.state = State::SkipMember { skip: StreamSkip { start, ..StreamSkip::default() } };
        true
    }

    pub(super) fn start_damage(
        &mut self,
        buf: &[u8],
        start: usize,
        bad_at: usize,
        base: u64,
        what: String,
        in_object: bool,
    ) {
        // The skipped event's own diagnostics go with it.
        self.pending.clear();
        // The snippet ends where the damage showed (at most 80 bytes): bytes beyond it may not
        // have arrived yet, and the message must not depend on how the file was read.
        let end = buf.len().min(start + 80).min(bad_at + 1).max(start);
        let snippet = String::from_utf8_lossy(buf.get(start..end).unwrap_or(&[])).into_owned();
        self.last_nonblank = buf.get(start).copied().unwrap_or(0);
        self.damage = Some(Damage {
            start: base + start as u64,
            bad_at: base + bad_at as u64,
            what,
            snippet,
            events: 0,
            object: buf.get(start) == Some(&b'{'),
        });
        self.state = State::Resync { in_object };
    }

    /// Ends a damaged region at text offset `end`; `next` says what resumes there (`None`: the
    /// end of the file).
    pub(super) fn end_damage(&mut self, end: u64, next: Option<&str>) {
        let Some(d) = self.damage.take() else { return };
        let bytes = end.saturating_sub(d.start);
        let events = if d.object { d.events.max(1) } else { d.events };
        self.damage_totals.places += 1;
        self.damage_totals.bytes += bytes;
        self.damage_totals.events += events;
        let Damage { start, bad_at, what, snippet, .. } = d;
        let resumed = match next {
            Some(n) => format!("up to {n} at byte {end}"),
            None => "to the end of the file (no event starts after it)".to_string(),
        };
        self.diag(DiagKind::MalformedEvent, Some(start), || {
            format!(
                "a damaged event at byte {start} ({what} at byte {bad_at}) was skipped {resumed}: {bytes} bytes, {events} event(s): {}",
                snippet.trim()
            )
        });
    }

    /// Skips damaged bytes inside `traceEvents` up to the next place parsing can resume: an
    /// object that passes [`json::validate_object`], has a `ph` key and is followed by `,`, `]`
    /// or `{` (the next event); a `]` that plausibly closes the array; or (in the object form) a
    /// key that only the top level has. Each byte is looked at once, and bytes are consumed as
    /// they are passed, so the damaged region is never buffered.
    pub(super) fn resync(
        &mut self,
        buf: &[u8],
        pos: &mut usize,
        base: u64,
        at_eof: bool,
        in_object: bool,
    ) -> Res<bool> {
        let from = *pos;
        let mut i = from;
        let limit = self.limits.unit_bytes;
        loop {
            let Some(k) = memchr::memchr3(b'{', b']', b'"', &buf[i..]) else {
                self.passed(buf, from, buf.len());
                *pos = buf.len();
                return Ok(false);
            };
            let c = i + k;
            // Decide at `c`; `None`: more bytes are needed first.
            let verdict: Option<bool> = match buf[c] {
                b'{' => {
                    let end = buf.len().min(c.saturating_add(limit));
                    let mut p = c;
                    match json::validate_object(&buf[..end], &mut p) {
                        Ok(true) => match json::peek(buf, &mut p) {
                            Ok(b',' | b']' | b'{') => Some(true),
                            Ok(_) => Some(false),
                            Err(_) => at_eof.then_some(true),
                        },
                        Ok(false) | Err(Stop::Bad(_)) => Some(false),
                        Err(Stop::Incomplete) if end < buf.len() => Some(false),
                        // The file ends inside what may be the next event: resume there, and
                        // the event reports the truncation.
                        Err(Stop::Incomplete) => at_eof.then_some(true),
                    }
                }
                b']' => array_end_plausible(buf, c, at_eof, true, in_object).ok(),
                _ => {
                    let rest = &buf[c..];
                    if rest.len() < 4 && !at_eof {
                        None
                    } else if rest.starts_with(b"\"ph\"") {
                        if let Some(d) = self.damage.as_mut() {
                            d.events += 1;
                        }
                        Some(false)
                    } else if in_object {
                        top_only_key_at(rest, at_eof).ok()
                    } else {
                        Some(false)
                    }
                }
            };
            match verdict {
                Some(true) => {
                    self.passed(buf, from, c);
                    let what = match buf[c] {
                        b'{' => "the next event",
                        b']' => "the end of the event array",
                        _ => "the next top-level member",
                    };
                    self.end_damage(base + c as u64, Some(what));
                    self.state = if buf[c] == b'"' {
                        State::Member { first: true }
                    } else {
                        State::Events { need_comma: false, in_object }
                    };
                    *pos = c;
                    return Ok(true);
                }
                Some(false) => i = c + 1,
                None => {
                    self.passed(buf, from, c);
                    *pos = c;
                    return if c > from { Ok(true) } else { Err(Stop::Incomplete) };
                }
            }
        }
    }

    /// Notes the last non-blank byte of `buf[from..to]`, skipped by resynchronisation.
    pub(super) fn passed(&mut self, buf: &[u8], from: usize, to: usize) {
        if let Some(&b) = buf.get(from..to).and_then(|s| s.iter().rev().find(|&&b| !json::is_ws(b))) {
            self.last_nonblank = b;
        }
    }
}
