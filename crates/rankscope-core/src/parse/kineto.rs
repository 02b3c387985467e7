//! Push parser for Chrome Trace Event Format files as PyTorch's profiler (Kineto) writes them.
//!
//! Bytes arrive in chunks of any size ([`TraceParser::feed`]); the parser keeps only the
//! unfinished tail of the last chunk. It walks the top-level object (or bare array) itself and
//! parses each element of `traceEvents` as one unit, straight into the columnar tables: no
//! document tree, no tree per event. A unit cut by the end of a chunk is retried from its start
//! once more bytes have come.
//!
//! Format facts this relies on (checked on the real traces in `shared/traces`, see
//! `tests/oracle/README.md`):
//! - `ts` and `dur` are microseconds, as decimal text with up to three fractional digits (ns
//!   resolution); with `baseTimeNanoseconds` present, absolute time is base + ts. Files that
//!   say `displayTimeUnit: "ns"` still write microseconds (`dur: 63.813` for a 64 µs op):
//!   `displayTimeUnit` only tells viewers how to label the axis, so it is ignored (and noted).
//! - `pid`/`tid` are integers in Kineto files, strings (`"stream 7"`) in the 2021 format.
//! - Flows (`s`/`f`, categories `ac2g`, `async_cpu_to_gpu`, `async`) carry the launch's
//!   correlation id as `id`; `f` binds to the enclosing slice (`bp: "e"`).

use super::json::{self, classify_scalar, NumErr, Res, ScalarKind, Stop, Str};
use super::value::{self, Value};
use crate::model::*;

/// Fatal ingest errors. Everything else is a diagnostic.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum IngestError {
    /// The bytes are not a Chrome/Kineto trace at all.
    #[error("{source_name}: not a trace file (at byte {offset}): {reason}")]
    NotATrace { source_name: String, offset: u64, reason: String },
}

/// Limits that keep memory bounded whatever the input: the parser never buffers more than
/// one unit, and a unit is at most `unit_bytes` long.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Most bytes one unit (an event, or a top-level member such as `deviceProperties`) may
    /// span. A longer event is treated as damaged (skipped by resynchronisation); a longer
    /// member is skipped as a stream. Either way it is never buffered whole.
    pub unit_bytes: usize,
    /// Longest string kept (names, categories, metadata); longer ones are cut, with a diagnostic.
    pub string_bytes: usize,
}

impl Default for Limits {
    fn default() -> Self {
        // No real Kineto event comes near 4 MiB (the largest in shared/traces is a few kB); a
        // kernel name of 64 KiB would already be absurd.
        Limits { unit_bytes: 4 << 20, string_bytes: 64 << 10 }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
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
enum MemberKey {
    TraceEvents,
    /// A metadata member read into [`TraceMeta`] (the key's index in [`META_KEYS`]).
    Meta(usize),
    Other,
}

/// Top-level members read as metadata.
const META_KEYS: &[&str] = &[
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
const TOP_ONLY_KEYS: &[&[u8]] = &[
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
struct StreamSkip {
    nest: json::Nest,
    deeper: u64,
    begun: bool,
    in_str: bool,
    esc: bool,
    scalar: bool,
    /// Text offset where the skip began.
    start: u64,
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
struct Damage {
    /// Text offset of the damaged element's first byte.
    start: u64,
    /// Where the damage showed, and as what.
    bad_at: u64,
    what: String,
    /// The first bytes of the damaged element, as text.
    snippet: String,
    /// `"ph"` keys met in the skipped bytes (each event has one).
    events: u64,
    /// The damaged element began as an object (so it was at least one event).
    object: bool,
}

/// Totals over every damaged region of a file.
#[derive(Debug, Clone, Copy, Default)]
struct DamageTotals {
    places: u64,
    bytes: u64,
    events: u64,
}

/// Arguments kept from one event's `args`.
#[derive(Debug, Default, Clone)]
struct Args {
    correlation: Option<i64>,
    external_id: Option<i64>,
    stream: Option<i64>,
    device: Option<i64>,
    collective: Option<StrId>,
    in_nelems: Option<i64>,
    out_nelems: Option<i64>,
    in_bytes: Option<i64>,
    out_bytes: Option<i64>,
    dtype: Option<StrId>,
    group_size: Option<i64>,
    pg_name: Option<StrId>,
    pg_desc: Option<StrId>,
    pg_ranks: Option<StrId>,
    seq: Option<i64>,
    /// `Src Rank` / `Dst Rank` of a point-to-point op (`record_param_comms`: global ranks), or
    /// the peer and tag from the `Concrete Inputs` of `c10d::send` / `c10d::recv_`.
    src_rank: Option<i64>,
    dst_rank: Option<i64>,
    tag: Option<i64>,
    input_elems: Option<i64>,
    input_type: Option<StrId>,
    // Metadata (`M`) event arguments.
    m_name: Option<StrId>,
    m_labels: Option<StrId>,
    m_sort_index: Option<i64>,
}

impl Args {
    fn has_comm(&self) -> bool {
        self.collective.is_some()
            || self.in_nelems.is_some()
            || self.out_nelems.is_some()
            || self.in_bytes.is_some()
            || self.out_bytes.is_some()
            || self.group_size.is_some()
            || self.pg_name.is_some()
            || self.seq.is_some()
            || self.src_rank.is_some()
            || self.dst_rank.is_some()
            || self.input_elems.is_some()
    }
}

/// Names of the communication ops whose `Input Dims` size their message.
const COMM_NAME_PREFIXES: &[&str] = &[
    "nccl:",
    "gloo:",
    "mpi:",
    "ucc:",
    "hccl:",
    "xccl:",
    "c10d::",
    "c10d_functional::",
    "_c10d_functional::",
    "record_param_comms",
];

/// One event as read, before it becomes a row.
#[derive(Debug, Default)]
struct Ev {
    ph: u8,
    ph_other: Option<String>,
    name: Option<StrId>,
    cat: Option<StrId>,
    pid: Option<IdKey>,
    tid: Option<IdKey>,
    ts: Option<i64>,
    dur: Option<i64>,
    ts_bad: bool,
    id: Option<u64>,
    bp_e: bool,
    args: Args,
    /// Byte range of `args` when `ph` was not yet known there (re-read for counters).
    args_span: Option<(usize, usize)>,
}

#[derive(Debug, Clone, Copy)]
struct OpenSlice {
    ts: i64,
    name: StrId,
    cat: StrId,
    correlation: u64,
    external_id: u64,
    args: u32,
    offset: u64,
}

/// Every table's length at a point between two events of `traceEvents` (see
/// [`super::split`]), and each lane's device and stream as they were there.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Mark {
    pub events: usize,
    pub comm: usize,
    pub flows: usize,
    pub counters: usize,
    pub strings: usize,
    pub lanes: usize,
    pub device: Vec<i64>,
    pub stream: Vec<i64>,
}

/// The streaming parser for one file. Feed it bytes, then call [`TraceParser::finish`].
#[derive(Debug)]
pub struct TraceParser {
    out: RankTrace,
    state: State,
    /// Unconsumed bytes carried over from earlier chunks.
    carry: Vec<u8>,
    /// Text offset of `carry[0]`.
    carry_offset: u64,
    /// Do not retry an incomplete unit before `carry` holds this many bytes (keeps tiny chunks
    /// from making the retries quadratic).
    retry_at: usize,
    scratch: Vec<u8>,
    key_scratch: Vec<u8>,
    counter_vals: Vec<(StrId, f64)>,
    lanes: FxHashMap<(IdKey, IdKey), LaneId>,
    last_lane: Option<((IdKey, IdKey), LaneId)>,
    open: FxHashMap<LaneId, Vec<OpenSlice>>,
    lane_last_ts: Vec<i64>,
    by_ph: [u64; 256],
    by_ph_other: std::collections::BTreeMap<String, u64>,
    by_cat: Vec<u64>,
    saw_trace_events: bool,
    saw_kineto_key: bool,
    non_object_elements: u64,
    fatal: Option<IngestError>,
    /// Diagnostics of the unit being parsed: kept when it completes, dropped when it turns out
    /// incomplete and will be parsed again (so counts do not depend on chunk boundaries).
    pending: Vec<(DiagKind, Option<u64>, Option<String>)>,
    limits: Limits,
    /// The damaged region being skipped, while in [`State::Resync`].
    damage: Option<Damage>,
    damage_totals: DamageTotals,
    /// Elements of `traceEvents` that had a `ph` key (a bare array with none is not a trace).
    ph_events: u64,
    /// Bytes after the end of the document: offset of the first non-blank one, and how many.
    trailing: Option<(u64, u64)>,
    /// The last non-blank byte resynchronisation passed (to tell a cut file from a damaged one).
    last_nonblank: u8,
}

/// Top-level keys that mark a file as Kineto output even when it holds no events.
const KINETO_KEYS: &[&str] = &[
    "schemaVersion",
    "deviceProperties",
    "distributedInfo",
    "baseTimeNanoseconds",
    "displayTimeUnit",
    "traceName",
];

impl TraceParser {
    /// A parser for one file; `source_name` is used in messages and for rank-from-name.
    pub fn new(source_name: &str) -> Self {
        Self::with_limits(source_name, Limits::default())
    }

    /// A parser with other [`Limits`] (tests use small ones).
    pub fn with_limits(source_name: &str, limits: Limits) -> Self {
        let out = RankTrace {
            source: source_name.to_string(),
            meta: TraceMeta { form: "object", ..TraceMeta::default() },
            ..RankTrace::default()
        };
        TraceParser {
            out,
            state: State::Start,
            carry: Vec::new(),
            carry_offset: 0,
            retry_at: 0,
            scratch: Vec::new(),
            key_scratch: Vec::new(),
            counter_vals: Vec::new(),
            lanes: FxHashMap::default(),
            last_lane: None,
            open: FxHashMap::default(),
            lane_last_ts: Vec::new(),
            by_ph: [0; 256],
            by_ph_other: Default::default(),
            by_cat: Vec::new(),
            saw_trace_events: false,
            saw_kineto_key: false,
            non_object_elements: 0,
            fatal: None,
            pending: Vec::new(),
            limits: Limits {
                unit_bytes: limits.unit_bytes.max(64),
                string_bytes: limits.string_bytes.max(16),
            },
            damage: None,
            damage_totals: DamageTotals::default(),
            ph_events: 0,
            trailing: None,
            last_nonblank: 0,
        }
    }

    /// The name the parser was given.
    pub fn source(&self) -> &str {
        &self.out.source
    }

    /// Bytes of text consumed so far.
    pub fn text_bytes(&self) -> u64 {
        self.carry_offset + self.carry.len() as u64
    }

    /// Events parsed so far.
    pub fn events_so_far(&self) -> u64 {
        self.out.counts.total
    }

    /// Whether the input was already found not to be a trace (feeding more is pointless).
    pub fn failed(&self) -> Option<&IngestError> {
        self.fatal.as_ref()
    }

    /// Where the parse stands, when it stands between two events of `traceEvents` with
    /// nothing carried, nothing pending, no diagnostic, no open `B` and no failure; else `None`.
    /// One file on every core ([`super::split`]) cuts the file only where this holds.
    pub fn mark(&mut self) -> Option<Mark> {
        // An early retry of the carried unit (feed waits for the tail to double); parsing does
        // not depend on where the bytes were cut, so this changes nothing but the timing.
        if self.fatal.is_none() && !self.carry.is_empty() {
            let buf = std::mem::take(&mut self.carry);
            let used = self.process(&buf, false);
            self.carry = buf;
            self.carry.drain(..used);
            self.carry_offset += used as u64;
            self.retry_at = if self.carry.is_empty() { 0 } else { self.carry.len() * 2 };
        }
        let between = matches!(self.state, State::Events { .. })
            && self.carry.is_empty()
            && self.pending.is_empty()
            && self.fatal.is_none()
            && self.damage.is_none()
            && self.out.diagnostics.is_empty()
            && self.open.values().all(Vec::is_empty);
        between.then(|| Mark {
            events: self.out.events.len(),
            comm: self.out.comm.len(),
            flows: self.out.flows.len(),
            counters: self.out.counters.len(),
            strings: self.out.strings.len(),
            lanes: self.out.lanes.len(),
            device: self.out.lanes.device.clone(),
            stream: self.out.lanes.stream.clone(),
        })
    }

    /// Feeds the next chunk of (decompressed) text.
    pub fn feed(&mut self, chunk: &[u8]) {
        if self.fatal.is_some() || chunk.is_empty() {
            return;
        }
        if self.carry.is_empty() {
            let used = self.process(chunk, false);
            self.carry_offset += used as u64;
            self.carry.extend_from_slice(&chunk[used..]);
            self.retry_at = if used == chunk.len() { 0 } else { self.carry.len() * 2 };
        } else {
            self.carry.extend_from_slice(chunk);
            if self.carry.len() < self.retry_at {
                return;
            }
            let buf = std::mem::take(&mut self.carry);
            let used = self.process(&buf, false);
            self.carry = buf;
            self.carry.drain(..used);
            self.carry_offset += used as u64;
            self.retry_at = if self.carry.is_empty() { 0 } else { self.carry.len() * 2 };
        }
    }

    /// Ends the input and returns the trace (not yet normalized).
    pub fn finish(mut self) -> Result<RankTrace, IngestError> {
        if self.fatal.is_none() && !self.carry.is_empty() {
            let buf = std::mem::take(&mut self.carry);
            let used = self.process(&buf, true);
            self.carry_offset += used as u64;
            let rest = &buf[used..];
            if !rest.is_empty() && self.fatal.is_none() && !rest.iter().all(|&b| json::is_ws(b)) {
                // Only an unfinished unit is left: the file ends inside it.
                let skip = rest.iter().position(|&b| !json::is_ws(b) && b != b',').unwrap_or(0);
                let off = self.carry_offset + skip as u64;
                let n = rest.len() - skip;
                self.diag(DiagKind::Truncated, Some(off), || {
                    format!(
                        "the file ends inside the trace: the last {n} bytes (an unfinished event) were dropped; every complete event before them was kept"
                    )
                });
            }
            self.carry_offset += rest.len() as u64;
        }
        if let Some(e) = self.fatal.take() {
            return Err(e);
        }
        let end = self.carry_offset;
        if let State::Resync { .. } = self.state {
            // The damage ran to the end of the file.
            self.end_damage(end, None);
        }
        if let State::SkipMember { skip } = self.state {
            let start = skip.start;
            self.diag(DiagKind::Truncated, Some(start), || {
                format!("the file ends inside the top-level member that starts at byte {start}")
            });
        }
        if let Some((off, n)) = self.trailing {
            self.diag(DiagKind::TrailingData, Some(off), || {
                format!("{n} bytes after the end of the JSON document ignored")
            });
        }
        match self.state {
            State::Start => {
                return Err(self.not_a_trace(end, "the file is empty"));
            }
            State::Done => {}
            State::Resync { .. } => {
                // Damage that ran to the end is a truncation only if the file does not end the
                // way a document does.
                if !matches!(self.last_nonblank, b'}' | b']') {
                    self.diag(DiagKind::Truncated, Some(end), || {
                        "the file ends before the JSON document is closed".to_string()
                    });
                }
            }
            State::Member { .. }
            | State::MemberValue { .. }
            | State::MemberJunk
            | State::Events { .. }
            | State::SkipMember { .. } => {
                if self.out.diagnostics.count(DiagKind::Truncated) == 0
                    && !self.pending.iter().any(|p| p.0 == DiagKind::Truncated)
                {
                    self.diag(DiagKind::Truncated, Some(end), || {
                        "the file ends before the JSON document is closed; every complete event was kept"
                            .to_string()
                    });
                }
            }
        }
        if self.out.meta.form == "object" && !self.saw_trace_events && !self.saw_kineto_key {
            return Err(self.not_a_trace(0, "a JSON object without `traceEvents` or any Kineto key"));
        }
        if self.out.meta.form == "array"
            && self.ph_events == 0
            && (self.out.counts.total > 0 || self.non_object_elements > 0 || self.damage_totals.places > 0)
        {
            return Err(
                self.not_a_trace(0, "a JSON array whose elements are not trace events (none has `ph`)")
            );
        }
        self.close_open_slices();
        self.flush_diags();
        if self.damage_totals.places > 1 {
            let t = self.damage_totals;
            self.out.diagnostics.append_message(
                DiagKind::MalformedEvent,
                &format!(
                    " (in all {} damaged places: {} bytes and about {} events skipped)",
                    t.places, t.bytes, t.events
                ),
            );
        }
        // Absolute time = baseTimeNanoseconds + ts. The base may come after `traceEvents` in
        // the file (several real traces write it last), so it is applied once at the end.
        if let Some(b) = self.out.meta.base_time_ns {
            for t in self
                .out
                .events
                .ts_ns
                .iter_mut()
                .chain(self.out.flows.ts_ns.iter_mut())
                .chain(self.out.counters.ts_ns.iter_mut())
            {
                *t = t.saturating_add(b);
            }
        }
        self.out.text_bytes = end;
        // Counts by phase and category, with names.
        let mut by_ph = std::mem::take(&mut self.by_ph_other);
        for (b, &n) in self.by_ph.iter().enumerate() {
            if n > 0 {
                let key = if b == 0 { String::new() } else { (b as u8 as char).to_string() };
                *by_ph.entry(key).or_default() += n;
            }
        }
        self.out.counts.by_ph = by_ph;
        for (i, &n) in self.by_cat.iter().enumerate() {
            if n > 0 {
                let name = self.out.strings.get(StrId(i as u32)).to_string();
                *self.out.counts.by_cat.entry(name).or_default() += n;
            }
        }
        let lanes = self.out.lanes.len();
        self.out.lanes.events = vec![0; lanes];
        for l in &self.out.events.lane {
            if let Some(c) = self.out.lanes.events.get_mut(l.0 as usize) {
                *c += 1;
            }
        }
        self.out.meta.process_names.sort();
        self.out.meta.process_labels.sort();
        Ok(self.out)
    }

    /// Records a diagnostic for the current unit (see `pending`).
    fn diag(&mut self, kind: DiagKind, offset: Option<u64>, message: impl FnOnce() -> String) {
        let first = self.out.diagnostics.get(kind).is_none() && !self.pending.iter().any(|p| p.0 == kind);
        self.pending.push((kind, offset, first.then(message)));
    }

    fn flush_diags(&mut self) {
        for (kind, offset, msg) in self.pending.drain(..) {
            self.out.diagnostics.add(kind, offset, || msg.unwrap_or_default());
        }
    }

    fn not_a_trace(&self, offset: u64, reason: &str) -> IngestError {
        IngestError::NotATrace { source_name: self.out.source.clone(), offset, reason: reason.to_string() }
    }

    /// Parses as many whole units of `buf` as possible; returns the bytes consumed.
    ///
    /// A unit never sees more than [`Limits::unit_bytes`] of the buffer: one that needs more is
    /// oversized whatever the chunking, so the decision (and every count) is the same for any
    /// chunk size.
    fn process(&mut self, buf: &[u8], at_eof: bool) -> usize {
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
    fn step(&mut self, buf: &[u8], pos: &mut usize, base: u64, at_eof: bool) -> Res<bool> {
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
                                json::skip_value(buf, pos)?;
                                self.diag(DiagKind::BadMetadata, Some(base + at as u64), || {
                                    format!("top-level `{name}` could not be read; ignored")
                                });
                            }
                        }
                    }
                    MemberKey::Other => json::skip_value(buf, pos)?,
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
    fn start_damage(
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
    fn end_damage(&mut self, end: u64, next: Option<&str>) {
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
    fn resync(&mut self, buf: &[u8], pos: &mut usize, base: u64, at_eof: bool, in_object: bool) -> Res<bool> {
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
    fn passed(&mut self, buf: &[u8], from: usize, to: usize) {
        if let Some(&b) = buf.get(from..to).and_then(|s| s.iter().rev().find(|&&b| !json::is_ws(b))) {
            self.last_nonblank = b;
        }
    }

    fn apply_meta(&mut self, key: &str, v: &Value, offset: u64) {
        if v.has_bare_word() {
            self.diag(DiagKind::BareWord, Some(offset), || {
                format!("a bare word (such as N/A or ...) inside top-level `{key}` was read as null")
            });
        }
        let meta = &mut self.out.meta;
        match key {
            "schemaVersion" => meta.schema_version = v.as_i64(),
            "baseTimeNanoseconds" => {
                meta.base_time_ns = v.as_i64();
                match meta.base_time_ns {
                    None => self.diag(DiagKind::BadMetadata, Some(offset), || {
                        "`baseTimeNanoseconds` is not an integer; times are taken as written".to_string()
                    }),
                    Some(b) if !(0..=MAX_TIME_NS).contains(&b) => {
                        meta.base_time_ns = None;
                        self.diag(DiagKind::OutOfRange, Some(offset), || {
                            format!("`baseTimeNanoseconds` {b} is outside 0..={MAX_TIME_NS} (it would push every event past the end of 64-bit time); times are taken as written")
                        });
                    }
                    Some(_) => {}
                }
            }
            "displayTimeUnit" => {
                meta.display_time_unit = v.as_text();
                if meta.display_time_unit.as_deref() == Some("ns") {
                    self.diag(DiagKind::DisplayTimeUnitIgnored, Some(offset), || {
                        "`displayTimeUnit` is \"ns\", but Kineto writes `ts` and `dur` in microseconds regardless (it only sets the viewer's axis labels); read as microseconds".to_string()
                    });
                }
            }
            "traceName" => meta.trace_name = v.as_text(),
            "host_name" | "hostname" => meta.host_name = v.as_text(),
            "distributedInfo" => {
                if let Value::Obj(_) = v {
                    let mut d = read_distributed(v);
                    let raw = |k: &str| v.get(k).filter(|x| **x != Value::Null).map(value_text);
                    if let Some(r) = raw("rank") {
                        if d.rank.is_none_or(|x| u32::try_from(x).is_err()) {
                            d.rank = None;
                            self.diag(DiagKind::OutOfRange, Some(offset), || {
                                format!(
                                    "`distributedInfo.rank` {r} is not a rank (0 to {}); ignored",
                                    u32::MAX
                                )
                            });
                        }
                    }
                    if let Some(w) = raw("world_size") {
                        if d.world_size.is_none_or(|x| !(1..=MAX_WORLD_SIZE).contains(&x)) {
                            d.world_size = None;
                            self.diag(DiagKind::OutOfRange, Some(offset), || {
                                format!("`distributedInfo.world_size` {w} is not a world size (1 to {MAX_WORLD_SIZE}); ignored")
                            });
                        }
                    }
                    if let (Some(r), Some(w)) = (d.rank, d.world_size) {
                        if r >= w {
                            self.diag(DiagKind::OutOfRange, Some(offset), || {
                                format!(
                                    "`distributedInfo.rank` {r} is not below its `world_size` {w}; both kept"
                                )
                            });
                        }
                    }
                    self.out.meta.distributed = Some(d);
                } else {
                    self.diag(DiagKind::BadMetadata, Some(offset), || {
                        "`distributedInfo` is not an object; ignored".to_string()
                    });
                }
            }
            "deviceProperties" => match v.as_array() {
                Some(items) => {
                    meta.devices = items.iter().map(read_device).collect();
                }
                None => self.diag(DiagKind::BadMetadata, Some(offset), || {
                    "`deviceProperties` is not an array; ignored".to_string()
                }),
            },
            _ => {}
        }
    }

    // ---- events ----------------------------------------------------------------------

    fn intern(&mut self, s: Str<'_>, at: u64) -> StrId {
        let bytes: &[u8] = match s {
            Str::Raw(b) => b,
            Str::Escaped => &self.scratch,
        };
        let cap = self.limits.string_bytes;
        let (bytes, long) = if bytes.len() > cap {
            // Cut at a character boundary.
            let mut n = cap;
            while n > 0 && bytes.get(n).is_some_and(|&b| b & 0xC0 == 0x80) {
                n -= 1;
            }
            (&bytes[..n], Some(bytes.len()))
        } else {
            (bytes, None)
        };
        let (id, invalid) = self.out.strings.intern_bytes(bytes);
        if let Some(len) = long {
            self.diag(DiagKind::LongString, Some(at), || {
                format!("a string of {len} bytes at byte {at} was cut to the {cap}-byte limit")
            });
        }
        if invalid {
            let text = self.out.strings.get(id).chars().take(60).collect::<String>();
            self.diag(DiagKind::InvalidUtf8, Some(at), || {
                format!("a string is not valid UTF-8; bad bytes replaced with U+FFFD: \"{text}\"")
            });
        }
        id
    }

    /// Reads a value that should be a string; numbers are kept as their text, bare words and
    /// null give `None`, containers are skipped.
    fn read_str(&mut self, buf: &[u8], pos: &mut usize, base: u64) -> Res<Option<StrId>> {
        let at = base + *pos as u64;
        match json::peek(buf, pos)? {
            b'"' => {
                let s = json::string(buf, pos, &mut self.scratch)?;
                Ok(Some(self.intern(s, at)))
            }
            b'{' | b'[' => {
                json::skip_value(buf, pos)?;
                Ok(None)
            }
            _ => {
                let t = json::scalar(buf, pos)?;
                match classify_scalar(t) {
                    ScalarKind::Number | ScalarKind::True | ScalarKind::False => {
                        Ok(Some(self.out.strings.intern_bytes(t).0))
                    }
                    ScalarKind::Null => Ok(None),
                    ScalarKind::BareWord => {
                        self.bare_word(t, at);
                        Ok(None)
                    }
                }
            }
        }
    }

    fn bare_word(&mut self, t: &[u8], at: u64) {
        let w = String::from_utf8_lossy(&t[..t.len().min(40)]).into_owned();
        self.diag(DiagKind::BareWord, Some(at), || {
            format!("bare word `{w}` where a JSON value belongs; read as null")
        });
    }

    /// Reads a number scaled by `10^scale` (strings holding numbers are accepted too).
    fn read_num(&mut self, buf: &[u8], pos: &mut usize, base: u64, scale: i32) -> Res<Option<i64>> {
        let at = base + *pos as u64;
        let (text, quoted): (&[u8], bool) = match json::peek(buf, pos)? {
            b'"' => match json::string(buf, pos, &mut self.scratch)? {
                Str::Raw(b) => (b, true),
                Str::Escaped => return Ok(None),
            },
            b'{' | b'[' => {
                json::skip_value(buf, pos)?;
                return Ok(None);
            }
            _ => (json::scalar(buf, pos)?, false),
        };
        let parsed = if scale == 0 { json::integer(text) } else { json::decimal_scaled(text, scale) };
        match parsed {
            Ok(v) => Ok(Some(v)),
            Err(NumErr::Overflow) => {
                let t = String::from_utf8_lossy(&text[..text.len().min(40)]).into_owned();
                self.diag(DiagKind::IntOverflow, Some(at), || {
                    format!("number `{t}` does not fit in 64 bits; saturated")
                });
                if scale != 0 {
                    // A time beyond ±292 years of nanoseconds is unusable, not saturable.
                    return Ok(None);
                }
                let neg = text.first() == Some(&b'-');
                Ok(Some(if neg { i64::MIN } else { i64::MAX }))
            }
            Err(NumErr::NotANumber) => {
                if !quoted && classify_scalar(text) == ScalarKind::BareWord {
                    self.bare_word(text, at);
                }
                Ok(None)
            }
        }
    }

    /// Reads a time (µs as written, ns returned) and checks its range: beyond ±[`MAX_TIME_NS`]
    /// it cannot be a time (and sums of such values would overflow), so it is not used.
    #[inline]
    fn read_time(&mut self, buf: &[u8], pos: &mut usize, base: u64, key: &str) -> Res<Option<i64>> {
        let at = base + *pos as u64;
        let v = self.read_num(buf, pos, base, 3)?;
        match v {
            Some(t) if !(-MAX_TIME_NS..=MAX_TIME_NS).contains(&t) => {
                self.diag(DiagKind::OutOfRange, Some(at), || {
                    format!(
                        "`{key}` of {t} ns at byte {at} is beyond ±{MAX_TIME_NS} ns (±126 years); not used"
                    )
                });
                Ok(None)
            }
            v => Ok(v),
        }
    }

    fn read_id_key(&mut self, buf: &[u8], pos: &mut usize, base: u64) -> Res<Option<IdKey>> {
        let at = base + *pos as u64;
        match json::peek(buf, pos)? {
            b'"' => {
                // The 2021 format writes a thread as the string "25738" on slices and as the
                // integer 25738 on flows: a string that is an integer is that integer.
                let s = json::string(buf, pos, &mut self.scratch)?;
                if let Str::Raw(b) = s {
                    if !b.is_empty() && b.len() <= 18 {
                        if let Ok(v) = json::integer(b) {
                            if b.iter().all(|c| c.is_ascii_digit() || *c == b'-') {
                                return Ok(Some(IdKey::Int(v)));
                            }
                        }
                    }
                }
                Ok(Some(IdKey::Str(self.intern(s, at))))
            }
            _ => Ok(self.read_num(buf, pos, base, 0)?.map(IdKey::Int)),
        }
    }

    /// Flow ids: integers, or strings (hex `"0x1a"` or anything else, hashed).
    fn read_flow_id(&mut self, buf: &[u8], pos: &mut usize, base: u64) -> Res<Option<u64>> {
        match json::peek(buf, pos)? {
            b'"' => {
                let s = json::string(buf, pos, &mut self.scratch)?;
                let bytes: &[u8] = match s {
                    Str::Raw(b) => b,
                    Str::Escaped => &self.scratch,
                };
                let txt = String::from_utf8_lossy(bytes);
                let v = if let Some(h) = txt.strip_prefix("0x") {
                    u64::from_str_radix(h, 16).ok()
                } else {
                    txt.parse::<u64>().ok()
                };
                Ok(Some(v.unwrap_or_else(|| {
                    use std::hash::Hasher;
                    let mut h = crate::model::strings::FxHasher::default();
                    h.write(bytes);
                    h.finish()
                })))
            }
            _ => Ok(self.read_num(buf, pos, base, 0)?.map(|v| v as u64)),
        }
    }

    /// Parses one event object at `*pos` and turns it into rows.
    fn event(&mut self, buf: &[u8], pos: &mut usize, base: u64) -> Res<()> {
        let start = *pos;
        json::expect(buf, pos, b'{')?;
        let mut ev = Ev::default();
        let mut first = true;
        while let Some(key) = json::next_key(buf, pos, &mut first, &mut self.key_scratch)? {
            match key {
                b"ph" => {
                    let at = base + *pos as u64;
                    match json::peek(buf, pos)? {
                        b'"' => match json::string(buf, pos, &mut self.scratch)? {
                            Str::Raw([c]) => ev.ph = *c,
                            Str::Raw(other) => {
                                ev.ph_other = Some(String::from_utf8_lossy(other).into_owned());
                            }
                            Str::Escaped => {
                                ev.ph_other = Some(String::from_utf8_lossy(&self.scratch).into_owned());
                            }
                        },
                        _ => {
                            let t = json::scalar(buf, pos)?;
                            if classify_scalar(t) == ScalarKind::BareWord {
                                self.bare_word(t, at);
                            }
                        }
                    }
                }
                b"name" => ev.name = self.read_str(buf, pos, base)?,
                b"cat" => ev.cat = self.read_str(buf, pos, base)?,
                b"pid" => ev.pid = self.read_id_key(buf, pos, base)?,
                b"tid" => ev.tid = self.read_id_key(buf, pos, base)?,
                b"ts" => {
                    ev.ts = self.read_time(buf, pos, base, "ts")?;
                    ev.ts_bad = ev.ts.is_none();
                }
                b"dur" => ev.dur = self.read_time(buf, pos, base, "dur")?,
                b"id" => ev.id = self.read_flow_id(buf, pos, base)?,
                b"bp" => {
                    // (An incomplete string must wait for more bytes, never read as "not e".)
                    if json::peek(buf, pos)? == b'"' {
                        ev.bp_e = matches!(json::string(buf, pos, &mut self.scratch)?, Str::Raw(b"e"));
                    } else {
                        json::skip_value(buf, pos)?;
                    }
                }
                b"args" => {
                    if ev.ph == b'C' {
                        self.counter_args(buf, pos, base)?;
                    } else {
                        let s = *pos;
                        self.args(buf, pos, base, ev.name, &mut ev.args)?;
                        if ev.ph == 0 && ev.ph_other.is_none() {
                            ev.args_span = Some((s, *pos));
                        }
                    }
                }
                _ => json::skip_value(buf, pos)?,
            }
        }
        if ev.ph == b'C' {
            if let Some((s, _)) = ev.args_span {
                let mut p = s;
                self.counter_args(buf, &mut p, base)?;
            }
        }
        self.commit(ev, base + start as u64);
        Ok(())
    }

    /// Reads the kept keys of `args`; skips the rest.
    #[inline]
    fn args(&mut self, buf: &[u8], pos: &mut usize, base: u64, name: Option<StrId>, a: &mut Args) -> Res<()> {
        if json::peek(buf, pos)? != b'{' {
            return json::skip_value(buf, pos);
        }
        *pos += 1;
        let mut first = true;
        while let Some(key) = json::next_key(buf, pos, &mut first, &mut self.key_scratch)? {
            match key {
                b"correlation" => a.correlation = self.read_num(buf, pos, base, 0)?,
                b"External id" | b"external id" => a.external_id = self.read_num(buf, pos, base, 0)?,
                b"stream" => a.stream = self.read_num(buf, pos, base, 0)?,
                b"device" => a.device = self.read_num(buf, pos, base, 0)?,
                b"Collective name" => a.collective = self.read_str(buf, pos, base)?,
                b"In msg nelems" => a.in_nelems = self.read_num(buf, pos, base, 0)?,
                b"Out msg nelems" => a.out_nelems = self.read_num(buf, pos, base, 0)?,
                b"In msg size" => a.in_bytes = self.read_num(buf, pos, base, 0)?,
                b"Out msg size" => a.out_bytes = self.read_num(buf, pos, base, 0)?,
                b"dtype" => a.dtype = self.read_str(buf, pos, base)?,
                b"Group size" => a.group_size = self.read_num(buf, pos, base, 0)?,
                b"Process Group Name" => a.pg_name = self.read_str(buf, pos, base)?,
                b"Process Group Description" => a.pg_desc = self.read_str(buf, pos, base)?,
                b"Process Group Ranks" => a.pg_ranks = self.ranks_text(buf, pos, base)?,
                b"Seq" | b"seq" | b"Sequence" => a.seq = self.read_num(buf, pos, base, 0)?,
                b"Src Rank" => a.src_rank = self.read_num(buf, pos, base, 0)?,
                b"Dst Rank" => a.dst_rank = self.read_num(buf, pos, base, 0)?,
                b"Concrete Inputs" if self.is_p2p_op(name) => {
                    let (peer, tag) = self.peer_and_tag(buf, pos, base)?;
                    let send = name.is_some_and(|n| self.out.strings.get(n) == "c10d::send");
                    if peer.is_some() {
                        if send {
                            a.dst_rank = peer;
                        } else {
                            a.src_rank = peer;
                        }
                    }
                    a.tag = tag;
                }
                b"Input Dims" => a.input_elems = self.first_dims_product(buf, pos, base)?,
                b"Input type" => a.input_type = self.first_string(buf, pos, base)?,
                b"name" => a.m_name = self.read_str(buf, pos, base)?,
                b"labels" => a.m_labels = self.read_str(buf, pos, base)?,
                b"sort_index" => a.m_sort_index = self.read_num(buf, pos, base, 0)?,
                _ => {
                    let at = *pos;
                    json::skip_value(buf, pos)?;
                    // Bare words in skipped values are still worth a note.
                    if let Some(&c) = buf.get(at) {
                        if c.is_ascii_alphabetic() || c == b'.' {
                            let t = &buf[at..*pos];
                            if classify_scalar(t) == ScalarKind::BareWord {
                                self.bare_word(t, base + at as u64);
                            }
                        }
                    }
                }
            }
        }
        Ok(())
    }

    /// Whether `name` is a point-to-point op whose `Concrete Inputs` are `[tensors, group,
    /// peer, tag]` (`c10d::send(Tensor[], ProcessGroup, int dstRank, int tag)`,
    /// `c10d::recv_(Tensor[], ProcessGroup, int srcRank, int tag)`). Only those are read: every
    /// operator recorded with shapes has `Concrete Inputs`.
    fn is_p2p_op(&self, name: Option<StrId>) -> bool {
        name.is_some_and(|n| matches!(self.out.strings.get(n), "c10d::send" | "c10d::recv_"))
    }

    /// The third and fourth elements of `Concrete Inputs` as integers (`["", "", "2", "0"]`):
    /// the peer's rank in the op's process group and the tag.
    fn peer_and_tag(&mut self, buf: &[u8], pos: &mut usize, base: u64) -> Res<(Option<i64>, Option<i64>)> {
        if json::peek(buf, pos)? != b'[' {
            return json::skip_value(buf, pos).map(|_| (None, None));
        }
        *pos += 1;
        let (mut peer, mut tag) = (None, None);
        let mut k = 0usize;
        loop {
            match json::peek(buf, pos)? {
                b']' => {
                    *pos += 1;
                    break;
                }
                b',' => *pos += 1,
                _ => {
                    match k {
                        2 => peer = self.read_num(buf, pos, base, 0)?,
                        3 => tag = self.read_num(buf, pos, base, 0)?,
                        _ => json::skip_value(buf, pos)?,
                    }
                    k += 1;
                }
            }
        }
        let ok = |v: Option<i64>| v.filter(|&x| (0..=i64::from(i32::MAX)).contains(&x));
        Ok((ok(peer), ok(tag)))
    }

    /// `Process Group Ranks` is usually a string (`"[0, 1]"`); an array (possibly cut with
    /// `...`) is kept as its text.
    fn ranks_text(&mut self, buf: &[u8], pos: &mut usize, base: u64) -> Res<Option<StrId>> {
        let at = *pos;
        if json::peek(buf, pos)? == b'[' {
            json::skip_value(buf, pos)?;
            let raw = &buf[at..*pos];
            if raw.windows(3).any(|w| w == b"...") {
                let off = base + at as u64;
                self.diag(DiagKind::BareWord, Some(off), || {
                    "a rank list is cut with `...`; kept as text".to_string()
                });
            }
            let text: Vec<u8> = raw.iter().copied().filter(|c| !json::is_ws(*c) || *c == b' ').collect();
            return Ok(Some(self.out.strings.intern_bytes(text.trim_ascii()).0));
        }
        self.read_str(buf, pos, base)
    }

    /// The product of the first inner list of `Input Dims` (`[[394241]]`, `[[2, 3], []]`).
    fn first_dims_product(&mut self, buf: &[u8], pos: &mut usize, base: u64) -> Res<Option<i64>> {
        if json::peek(buf, pos)? != b'[' {
            return json::skip_value(buf, pos).map(|_| None);
        }
        let outer_start = *pos;
        *pos += 1;
        if json::peek(buf, pos)? != b'[' {
            *pos = outer_start;
            return json::skip_value(buf, pos).map(|_| None);
        }
        *pos += 1;
        let mut product: i64 = 1;
        // A TensorList first input (`c10d::allreduce_`: `[[[930832]], [], ...]`): the elements
        // of all its tensors.
        let mut list_total: Option<i64> = None;
        loop {
            match json::peek(buf, pos)? {
                b']' => {
                    *pos += 1;
                    break;
                }
                b',' => *pos += 1,
                b'[' => {
                    *pos += 1;
                    let mut p: i64 = 1;
                    loop {
                        match json::peek(buf, pos)? {
                            b']' => {
                                *pos += 1;
                                break;
                            }
                            b',' => *pos += 1,
                            b'[' => {
                                json::skip_value(buf, pos)?;
                                p = -1;
                            }
                            _ => match self.read_num(buf, pos, base, 0)? {
                                Some(v) if p >= 0 => p = p.saturating_mul(v.max(0)),
                                _ => p = -1,
                            },
                        }
                    }
                    list_total = match (list_total, p) {
                        (_, p) if p < 0 => Some(-1),
                        (Some(t), _) if t < 0 => Some(-1),
                        (t, p) => Some(t.unwrap_or(0).saturating_add(p)),
                    };
                }
                _ => match self.read_num(buf, pos, base, 0)? {
                    Some(v) => product = product.saturating_mul(v.max(0)),
                    None => product = -1,
                },
            }
        }
        if let Some(t) = list_total {
            product = t;
        }
        // Skip the remaining elements of the outer list.
        loop {
            match json::peek(buf, pos)? {
                b']' => {
                    *pos += 1;
                    break;
                }
                b',' => {
                    *pos += 1;
                    if json::peek(buf, pos)? != b']' {
                        json::skip_value(buf, pos)?;
                    }
                }
                _ => return Err(Stop::Bad(*pos)),
            }
        }
        // `[[]]`: a 0-dim tensor, one element (the caller only sizes it with a tensor dtype).
        Ok(if product < 0 { None } else { Some(product) })
    }

    /// The first string of a list such as `Input type: ["float", "Scalar"]`.
    fn first_string(&mut self, buf: &[u8], pos: &mut usize, base: u64) -> Res<Option<StrId>> {
        if json::peek(buf, pos)? != b'[' {
            return self.read_str(buf, pos, base);
        }
        let s = *pos;
        *pos += 1;
        if json::peek(buf, pos)? == b'"' {
            let v = self.read_str(buf, pos, base)?;
            *pos = s;
            json::skip_value(buf, pos)?;
            return Ok(v);
        }
        *pos = s;
        json::skip_value(buf, pos).map(|_| None)
    }

    /// Counter (`C`) arguments: every numeric member is one series.
    fn counter_args(&mut self, buf: &[u8], pos: &mut usize, base: u64) -> Res<()> {
        self.counter_vals.clear();
        if json::peek(buf, pos)? != b'{' {
            return json::skip_value(buf, pos);
        }
        *pos += 1;
        loop {
            match json::peek(buf, pos)? {
                b'}' => {
                    *pos += 1;
                    return Ok(());
                }
                b',' => {
                    *pos += 1;
                    continue;
                }
                _ => {}
            }
            let at = base + *pos as u64;
            let k = json::string(buf, pos, &mut self.scratch)?;
            let key = self.intern(k, at);
            json::expect(buf, pos, b':')?;
            if matches!(json::peek(buf, pos)?, b'"' | b'{' | b'[') {
                json::skip_value(buf, pos)?;
                continue;
            }
            let t = json::scalar(buf, pos)?;
            if let Ok(v) = std::str::from_utf8(t).unwrap_or("").parse::<f64>() {
                if v.is_finite() {
                    self.counter_vals.push((key, v));
                }
            }
        }
    }

    fn lane(&mut self, pid: IdKey, tid: IdKey) -> LaneId {
        if let Some((k, l)) = self.last_lane {
            if k == (pid, tid) {
                return l;
            }
        }
        let lanes = &mut self.out.lanes;
        let id = *self.lanes.entry((pid, tid)).or_insert_with(|| {
            let id = LaneId(lanes.len() as u32);
            lanes.pid.push(pid);
            lanes.tid.push(tid);
            lanes.kind.push(LaneKind::Cpu);
            lanes.name.push(StrId::EMPTY);
            lanes.sort_index.push(i64::MAX);
            lanes.device.push(-1);
            lanes.stream.push(-1);
            id
        });
        if self.lane_last_ts.len() < self.out.lanes.len() {
            self.lane_last_ts.resize(self.out.lanes.len(), i64::MIN);
        }
        self.last_lane = Some(((pid, tid), id));
        id
    }

    fn push_args(&mut self, ev_row: u32, a: &Args, name: StrId) -> u32 {
        if !a.has_comm() {
            return NONE_U32;
        }
        // `Input Dims` alone is on every operator recorded with shapes; only a communication
        // op's (`gloo:all_reduce`, `c10d::allreduce_`, ...) sizes a message, so only those keep
        // a row for it.
        let only_dims = a.collective.is_none()
            && a.in_nelems.is_none()
            && a.out_nelems.is_none()
            && a.in_bytes.is_none()
            && a.out_bytes.is_none()
            && a.group_size.is_none()
            && a.pg_name.is_none()
            && a.seq.is_none()
            && a.src_rank.is_none()
            && a.dst_rank.is_none();
        if only_dims {
            let n = self.out.strings.get(name);
            if !COMM_NAME_PREFIXES.iter().any(|p| n.starts_with(p)) {
                return NONE_U32;
            }
        }
        let c = &mut self.out.comm;
        let row = c.len() as u32;
        c.event.push(EventIdx(ev_row));
        c.collective.push(a.collective.unwrap_or(StrId::EMPTY));
        c.in_nelems.push(a.in_nelems.unwrap_or(-1));
        c.out_nelems.push(a.out_nelems.unwrap_or(-1));
        c.in_bytes.push(a.in_bytes.unwrap_or(-1));
        c.out_bytes.push(a.out_bytes.unwrap_or(-1));
        c.dtype.push(a.dtype.or(a.input_type).unwrap_or(StrId::EMPTY));
        c.group_size.push(a.group_size.unwrap_or(-1));
        c.pg_name.push(a.pg_name.unwrap_or(StrId::EMPTY));
        c.pg_desc.push(a.pg_desc.unwrap_or(StrId::EMPTY));
        c.pg_ranks.push(a.pg_ranks.unwrap_or(StrId::EMPTY));
        c.seq.push(a.seq.unwrap_or(-1));
        let rank32 = |v: Option<i64>| v.and_then(|x| i32::try_from(x).ok()).filter(|&x| x >= 0).unwrap_or(-1);
        c.src_rank.push(rank32(a.src_rank));
        c.dst_rank.push(rank32(a.dst_rank));
        c.tag.push(rank32(a.tag));
        c.input_elems.push(a.input_elems.unwrap_or(-1));
        row
    }

    #[allow(clippy::too_many_arguments)]
    fn push_row(
        &mut self,
        kind: EventKind,
        ts: i64,
        dur: i64,
        name: StrId,
        cat: StrId,
        lane: LaneId,
        correlation: u64,
        external_id: u64,
        args: u32,
    ) -> u32 {
        let e = &mut self.out.events;
        let row = e.ts_ns.len() as u32;
        e.kind.push(kind);
        e.ts_ns.push(ts);
        e.dur_ns.push(dur);
        e.name.push(name);
        e.cat.push(cat);
        e.lane.push(lane);
        e.correlation.push(correlation);
        e.external_id.push(external_id);
        e.args.push(args);
        if let Some(t) = self.lane_last_ts.get_mut(lane.0 as usize) {
            *t = (*t).max(ts.saturating_add(dur));
        }
        row
    }

    /// Turns a parsed event into rows, by phase.
    fn commit(&mut self, ev: Ev, offset: u64) {
        self.out.counts.total += 1;
        if ev.ph != 0 || ev.ph_other.is_some() {
            self.ph_events += 1;
        }
        match &ev.ph_other {
            Some(p) => *self.by_ph_other.entry(p.clone()).or_default() += 1,
            None => self.by_ph[ev.ph as usize] += 1,
        }
        let ph = if ev.ph_other.is_some() { 0xFF } else { ev.ph };
        if matches!(ph, b'X' | b'B' | b'E' | b'i' | b'I') {
            let c = ev.cat.unwrap_or(StrId::EMPTY).0 as usize;
            if self.by_cat.len() <= c {
                self.by_cat.resize(c + 1, 0);
            }
            self.by_cat[c] += 1;
        }
        let pid = ev.pid.unwrap_or(IdKey::Int(0));
        let tid = ev.tid.unwrap_or(IdKey::Int(0));
        let name = ev.name.unwrap_or(StrId::EMPTY);
        let cat = ev.cat.unwrap_or(StrId::EMPTY);
        let ts = ev.ts;
        let corr = ev.args.correlation.map_or(NONE_U64, |v| v as u64);
        let ext = ev.args.external_id.map_or(NONE_U64, |v| v as u64);
        match ph {
            b'X' | b'B' | b'E' | b'i' | b'I' | b's' | b't' | b'f' | b'C' if ts.is_none() => {
                let why = if ev.ts_bad { "an unreadable" } else { "no" };
                let p = ph as char;
                self.diag(DiagKind::MissingTimestamp, Some(offset), || {
                    format!("a `{p}` event with {why} `ts` was skipped")
                });
            }
            b'X' => {
                let ts = ts.unwrap_or(0);
                let dur = match ev.dur {
                    Some(d) if d >= 0 => d,
                    Some(d) => {
                        self.diag(DiagKind::NegativeDuration, Some(offset), || {
                            format!("an event has a negative duration ({d} ns); clamped to 0")
                        });
                        0
                    }
                    None => {
                        self.diag(DiagKind::MissingDuration, Some(offset), || {
                            "an `X` event has no `dur`; read as 0".to_string()
                        });
                        0
                    }
                };
                let lane = self.lane(pid, tid);
                let row = self.out.events.len() as u32;
                let args = self.push_args(row, &ev.args, name);
                self.push_row(EventKind::Slice, ts, dur, name, cat, lane, corr, ext, args);
                self.note_lane_args(lane, &ev.args);
            }
            b'i' | b'I' => {
                let lane = self.lane(pid, tid);
                let row = self.out.events.len() as u32;
                let args = self.push_args(row, &ev.args, name);
                self.push_row(EventKind::Instant, ts.unwrap_or(0), 0, name, cat, lane, corr, ext, args);
            }
            b'B' => {
                let lane = self.lane(pid, tid);
                // The argument row is attached when the slice closes.
                let args =
                    if ev.args.has_comm() { self.push_args(u32::MAX, &ev.args, name) } else { NONE_U32 };
                self.open.entry(lane).or_default().push(OpenSlice {
                    ts: ts.unwrap_or(0),
                    name,
                    cat,
                    correlation: corr,
                    external_id: ext,
                    args,
                    offset,
                });
                if let Some(t) = self.lane_last_ts.get_mut(lane.0 as usize) {
                    *t = (*t).max(ts.unwrap_or(0));
                }
            }
            b'E' => {
                let lane = self.lane(pid, tid);
                match self.open.get_mut(&lane).and_then(Vec::pop) {
                    Some(o) => {
                        let end = ts.unwrap_or(o.ts);
                        let dur = if end < o.ts {
                            self.diag(DiagKind::NegativeDuration, Some(offset), || {
                                "an `E` event comes before its `B`; duration clamped to 0".to_string()
                            });
                            0
                        } else {
                            end - o.ts
                        };
                        self.close_slice(o, dur, lane);
                    }
                    None => self.diag(DiagKind::UnmatchedEnd, Some(offset), || {
                        "an `E` event with no open `B` on its thread was skipped".to_string()
                    }),
                }
            }
            b's' | b't' | b'f' => {
                let lane = self.lane(pid, tid);
                let f = &mut self.out.flows;
                f.id.push(ev.id.unwrap_or(NONE_U64));
                f.phase.push(ph);
                f.cat.push(cat);
                f.ts_ns.push(ts.unwrap_or(0));
                f.lane.push(lane);
                f.bind_enclosing.push(ev.bp_e);
            }
            b'C' => {
                let vals = std::mem::take(&mut self.counter_vals);
                for &(series, v) in &vals {
                    let c = &mut self.out.counters;
                    c.name.push(name);
                    c.series.push(series);
                    c.ts_ns.push(ts.unwrap_or(0));
                    c.value.push(v);
                    c.pid.push(pid);
                }
                self.counter_vals = vals;
                self.counter_vals.clear();
            }
            b'M' => self.metadata(&ev, pid, tid),
            0 => self.diag(DiagKind::MissingPhase, Some(offset), || {
                "an event without `ph` was skipped".to_string()
            }),
            other => {
                let p = if other == 0xFF {
                    ev.ph_other.clone().unwrap_or_default()
                } else {
                    (other as char).to_string()
                };
                self.diag(DiagKind::UnsupportedPhase, Some(offset), || {
                    format!("events of phase `{p}` are counted but not modelled")
                });
            }
        }
    }

    fn note_lane_args(&mut self, lane: LaneId, a: &Args) {
        let i = lane.0 as usize;
        if let (Some(d), Some(slot)) = (a.device, self.out.lanes.device.get_mut(i)) {
            if *slot < 0 {
                *slot = d;
            }
        }
        if let (Some(s), Some(slot)) = (a.stream, self.out.lanes.stream.get_mut(i)) {
            if *slot < 0 {
                *slot = s;
            }
        }
    }

    fn close_slice(&mut self, o: OpenSlice, dur: i64, lane: LaneId) {
        let row = self.push_row(
            EventKind::Slice,
            o.ts,
            dur,
            o.name,
            o.cat,
            lane,
            o.correlation,
            o.external_id,
            o.args,
        );
        if let Some(e) = self.out.comm.event.get_mut(o.args as usize) {
            *e = EventIdx(row);
        }
    }

    /// Closes `B` slices never ended, at the last time seen on their thread (as Perfetto does).
    fn close_open_slices(&mut self) {
        let mut open: Vec<(LaneId, Vec<OpenSlice>)> = std::mem::take(&mut self.open).into_iter().collect();
        open.sort_by_key(|(l, _)| *l);
        for (lane, stack) in open {
            let last = self.lane_last_ts.get(lane.0 as usize).copied().unwrap_or(i64::MIN);
            for o in stack.into_iter().rev() {
                let end = last.max(o.ts);
                let off = o.offset;
                self.diag(DiagKind::UnclosedBegin, Some(off), || {
                    "a `B` event was never closed; closed at the last timestamp of its thread".to_string()
                });
                self.close_slice(o, end - o.ts, lane);
            }
        }
    }

    fn metadata(&mut self, ev: &Ev, pid: IdKey, tid: IdKey) {
        let Some(name) = ev.name else { return };
        match self.out.strings.get(name) {
            "process_name" => {
                if let Some(n) = ev.args.m_name {
                    let s = self.out.strings.get(n).to_string();
                    self.out.meta.process_names.retain(|(p, _)| *p != pid);
                    self.out.meta.process_names.push((pid, s));
                }
            }
            "process_labels" => {
                if let Some(n) = ev.args.m_labels {
                    let s = self.out.strings.get(n).to_string();
                    self.out.meta.process_labels.retain(|(p, _)| *p != pid);
                    self.out.meta.process_labels.push((pid, s));
                }
            }
            "thread_name" => {
                if let Some(n) = ev.args.m_name {
                    let lane = self.lane(pid, tid);
                    if let Some(slot) = self.out.lanes.name.get_mut(lane.0 as usize) {
                        *slot = n;
                    }
                }
            }
            "thread_sort_index" => {
                if let Some(i) = ev.args.m_sort_index {
                    let lane = self.lane(pid, tid);
                    if let Some(slot) = self.out.lanes.sort_index.get_mut(lane.0 as usize) {
                        *slot = i;
                    }
                }
            }
            _ => {}
        }
    }
}

/// The largest magnitude a time may have, in ns (about 126 years: epoch times until 2096, and
/// any sum of two such values still fits in `i64`).
pub const MAX_TIME_NS: i64 = 4_000_000_000_000_000_000;

/// The largest world size believed (2^24 ranks).
pub const MAX_WORLD_SIZE: i64 = 1 << 24;

/// A metadata value as text, for messages.
fn value_text(v: &Value) -> String {
    match v {
        Value::Num(t) | Value::Str(t) | Value::Bare(t) => t.chars().take(40).collect(),
        Value::Bool(b) => b.to_string(),
        Value::Null => "null".to_string(),
        Value::Arr(_) => "an array".to_string(),
        Value::Obj(_) => "an object".to_string(),
    }
}

fn describe_byte(b: Option<&u8>) -> String {
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
fn array_end_plausible(buf: &[u8], at: usize, at_eof: bool, strict: bool, in_object: bool) -> Res<bool> {
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
fn top_only_key_at(rest: &[u8], at_eof: bool) -> Res<bool> {
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

fn read_distributed(v: &Value) -> DistributedInfo {
    let text = |k: &str| v.get(k).and_then(Value::as_text);
    let pg_config = v
        .get("pg_config")
        .and_then(Value::as_array)
        .map(|items| {
            items
                .iter()
                .map(|pg| ProcessGroup {
                    name: pg.get("pg_name").and_then(Value::as_text).unwrap_or_default(),
                    desc: pg.get("pg_desc").and_then(Value::as_text),
                    backend_config: pg.get("backend_config").and_then(Value::as_text),
                    size: pg.get("pg_size").and_then(Value::as_i64),
                    ranks: pg
                        .get("ranks")
                        .and_then(Value::as_array)
                        .map(|r| r.iter().filter_map(Value::as_i64).collect())
                        .unwrap_or_default(),
                })
                .collect()
        })
        .unwrap_or_default();
    DistributedInfo {
        rank: v.get("rank").and_then(Value::as_i64),
        world_size: v.get("world_size").and_then(Value::as_i64),
        backend: text("backend"),
        pg_count: v.get("pg_count").and_then(Value::as_i64),
        pg_config,
        nccl_version: text("nccl_version"),
    }
}

fn read_device(d: &Value) -> Device {
    let major = d.get("computeMajor").and_then(Value::as_i64);
    let minor = d.get("computeMinor").and_then(Value::as_i64);
    Device {
        id: d.get("id").and_then(Value::as_i64).unwrap_or(-1),
        name: d.get("name").and_then(Value::as_text).unwrap_or_default(),
        total_global_mem: d.get("totalGlobalMem").and_then(Value::as_i64),
        num_sms: d.get("numSms").and_then(Value::as_i64),
        compute_capability: match (major, minor) {
            (Some(a), Some(b)) => Some(format!("{a}.{b}")),
            _ => None,
        },
    }
}
