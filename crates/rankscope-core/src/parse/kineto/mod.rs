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
//!
//! Layout: this file holds the parser's state and its public face (feed, mark, finish);
//! `stream` walks the document (top-level members, `traceEvents` elements, skipping and
//! resynchronisation); `meta` reads the metadata members; `fields` reads one event's fields
//! into an `Ev`; `rows` turns an `Ev` into rows of the tables.

use super::json::{self, classify_scalar, NumErr, Res, ScalarKind, Stop, Str};
use super::value::{self, Value};
use crate::model::*;

mod fields;
mod meta;
mod rows;
mod stream;

use fields::*;
use rows::*;
use stream::*;

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
    /// Per string id: 0 not yet looked at, 1 a [`ShapedOp`]'s name, 2 not.
    shaped: Vec<u8>,
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
    /// The args of the event being committed, in `out.raw_args`'s arena, for the row it makes
    /// (only when [`TraceParser::keep_args`]).
    cur_args: Option<(u64, u32)>,
}

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
            shaped: Vec::new(),
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
            cur_args: None,
        }
    }

    /// Keeps every event row's source `args` ([`crate::model::raw_args`]), for the exports:
    /// off by default, since the analysis never reads them and they are most of a trace's
    /// bytes. A parser keeping args never marks a seam ([`TraceParser::mark`]): the file is
    /// read whole, not in pieces.
    pub fn keep_args(&mut self) {
        if self.out.raw_args.is_none() {
            let rows = self.out.events.len();
            let mut r = crate::model::RawArgs::default();
            // Rows made before (none, when called before the first byte) have no args kept.
            for _ in 0..rows {
                r.push(None);
            }
            self.out.raw_args = Some(r);
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
            self.retry_carry();
        }
        let between = matches!(self.state, State::Events { .. })
            && self.out.raw_args.is_none()
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

    /// The tables as parsed so far: what a [`Merger`](crate::parse::split::Merger) starts
    /// from at a [`Mark`]. Times are not yet shifted by the base time and the counts by phase
    /// and category are not yet written (both happen in [`TraceParser::finish`]).
    pub fn tables(&self) -> &RankTrace {
        &self.out
    }

    /// Feeds the next chunk of (decompressed) text.
    pub fn feed(&mut self, chunk: &[u8]) {
        if self.fatal.is_some() || chunk.is_empty() {
            return;
        }
        if self.carry.is_empty() {
            self.feed_direct(chunk);
            return;
        }
        let old = self.carry.len();
        if old + chunk.len() < self.retry_at {
            self.carry.extend_from_slice(chunk);
            return;
        }
        // The carried bytes end inside a unit (usually one event) that the chunk's first bytes
        // finish: only a head of the chunk joins them, and once the parse has gone past the
        // carried bytes the rest of the chunk is parsed where it lies (not copied; the
        // unfinished unit the head ends in is read again from the chunk).
        let head = chunk.len().min(old.max(CARRY_HEAD).max(self.retry_at.saturating_sub(old)));
        self.carry.extend_from_slice(&chunk[..head]);
        let start = self.carry_offset;
        self.retry_carry();
        let used = (self.carry_offset - start) as usize;
        if self.fatal.is_some() {
            return;
        }
        if used >= old {
            self.carry.clear();
            self.feed_direct(&chunk[used - old..]);
        } else if head < chunk.len() {
            // A unit longer than the head: the rest of the chunk joins it, as before.
            self.carry.extend_from_slice(&chunk[head..]);
            self.retry_carry();
        }
    }

    /// Parses a chunk in place when nothing is carried, and carries its unfinished end.
    fn feed_direct(&mut self, chunk: &[u8]) {
        let used = self.process(chunk, false);
        self.carry_offset += used as u64;
        self.carry.extend_from_slice(&chunk[used..]);
        self.retry_at = if used == chunk.len() { 0 } else { self.carry.len() * 2 };
    }

    /// Parses what it can of the carried bytes; the rest stays carried, and the next retry
    /// waits until it has doubled.
    fn retry_carry(&mut self) {
        let buf = std::mem::take(&mut self.carry);
        let used = self.process(&buf, false);
        self.carry = buf;
        self.carry.drain(..used);
        self.carry_offset += used as u64;
        self.retry_at = if self.carry.is_empty() { 0 } else { self.carry.len() * 2 };
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
        let lone_brace = matches!(self.state, State::Member { first: true });
        match self.state {
            State::Start => {
                // Whitespace is not nothing: say what the file holds.
                let what = if end == 0 { "the file is empty" } else { "the file holds only whitespace" };
                return Err(self.not_a_trace(end, what));
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
            if lone_brace {
                // A lone `{` (a file cut right after it opened) has no member to judge by.
                return Err(self
                    .not_a_trace(end, "the file ends right after its opening `{`: cut before any content"));
            }
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
}

/// How much of a chunk at least joins carried bytes to finish the unit they end in (see
/// [`TraceParser::feed`]): an event is rarely longer.
const CARRY_HEAD: usize = 64 << 10;

/// The largest magnitude a time may have, in ns (about 126 years: epoch times until 2096, and
/// any sum of two such values still fits in `i64`).
pub const MAX_TIME_NS: i64 = 4_000_000_000_000_000_000;

/// The largest world size believed (2^24 ranks).
pub const MAX_WORLD_SIZE: i64 = 1 << 24;
