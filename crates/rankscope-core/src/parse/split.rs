//! One file on every core: the `traceEvents` array cut at event starts, the pieces parsed apart,
//! the columns merged in file order so that the result is the serial parse's.
//!
//! A host with the file at hand (it reads at offsets; the core never does) proceeds so:
//! 1. **Seams**: near each cut point it looks for `}` `,` `{` (blanks allowed between) with
//!    [`find_seam`]. Such bytes can also sit inside a string; nothing here trusts them: the
//!    parses below prove each seam.
//! 2. **The frame**: one [`TraceParser`](super::TraceParser) reads the head of the file up to the first seam, gives a
//!    [`Mark`] ([`TraceParser::mark`](super::TraceParser::mark): every table's length at that point, and `None` unless the
//!    parser stands between two events with nothing carried and nothing to report), then reads
//!    the tail from the last seam. It sees every top-level member, the head's and the tail's
//!    events, and applies the base time.
//! 3. **Middle pieces**: each is parsed alone as `[` piece `]` (a bare array of events).
//! 4. [`merge`] interleaves the frame's head rows, the pieces' rows and the frame's tail rows,
//!    re-interning strings and lanes in that order, which is the order the serial parser
//!    meets them: the tables, string ids and lane ids come out as the serial parse's.
//!
//! **Doubt means serial.** [`merge`] returns `None`, and the host parses the file serially, when
//! any part reports a diagnostic (a false seam inside a string leaves the piece before it
//! ending inside that string, which every parse reports; damaged input keeps the serial path's
//! messages, offsets and recovery exactly), when any part holds `B`/`E` events (a pair may
//! straddle a seam), or when a middle piece holds `M` metadata (thread names are last-writer
//! wins across the file).

use std::collections::BTreeMap;

use super::kineto::Mark;
use crate::model::*;

/// Bytes that may separate two events (`,` and JSON blanks).
fn blank(b: u8) -> bool {
    matches!(b, b' ' | b'\n' | b'\r' | b'\t')
}

/// The first place in `window` where one element of an array ends and an object starts:
/// `(end, start)` with `window[end - 1] == b'}'`, `window[start] == b'{'` and only blanks and
/// one comma between. A candidate only (see the module doc).
pub fn find_seam(window: &[u8]) -> Option<(usize, usize)> {
    for c in memchr::memchr_iter(b',', window) {
        let before = window[..c].iter().rposition(|&b| !blank(b));
        let after = window[c + 1..].iter().position(|&b| !blank(b)).map(|k| c + 1 + k);
        if let (Some(b), Some(a)) = (before, after) {
            if window[b] == b'}' && window[a] == b'{' {
                return Some((b + 1, a));
            }
        }
    }
    None
}

/// Sizes a [`Cutter`] works with (text bytes).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CutSizes {
    /// Text handed straight to the frame before the first seam is looked for (the top-level
    /// members before `traceEvents` and its first events).
    pub head: usize,
    /// About how long a piece is.
    pub block: usize,
    /// Text always held back for the frame's tail: the end of `traceEvents` (where Kineto
    /// writes its `M` metadata, which a middle piece must not hold) and the members after it.
    pub keep: usize,
}

impl Default for CutSizes {
    fn default() -> Self {
        // 8 MiB pieces: a few thousand events each, few enough that merging is cheap and small
        // enough that a handful in flight cost little memory.
        CutSizes { head: 1 << 20, block: 8 << 20, keep: 1 << 20 }
    }
}

/// What a [`Cutter`] hands on, in text order.
#[derive(Debug, PartialEq, Eq)]
pub enum Cut<'a> {
    /// Text for the frame parser (the head, then at the end the tail).
    Frame(&'a [u8]),
    /// The frame has had the head: take its [`Mark`] now. The receiver answers whether it could;
    /// if not, the cutter tries the next seam, and when none within its window will do, hands
    /// everything on as frame text, so the frame parse is the serial parse.
    Mark,
    /// A middle piece: events from one event start to the end of another, to be parsed alone
    /// as `[` piece `]`.
    Piece(Vec<u8>),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    /// Before the first seam.
    Head,
    /// Cutting pieces.
    Middle,
    /// Not cutting: everything is frame text (no seam after the head, or no mark).
    Serial,
    /// A piece could not be ended (no seam within four blocks) after others were handed on: the
    /// text must be parsed serially from the start.
    Failed,
}

/// The same cut as a host with the file at hand makes (see the module doc), for text that
/// arrives as a stream: gzip inflating, a pipe, a browser's `File.stream()`. It holds at most
/// about one block plus [`CutSizes::keep`] of text; pieces go to the caller as they are cut, so
/// they can be parsed while the rest still inflates.
#[derive(Debug)]
pub struct Cutter {
    sizes: CutSizes,
    /// Text bytes fed so far.
    seen: u64,
    pending: Vec<u8>,
    /// `pending[..searched]` holds no seam past the block (only while cutting).
    searched: usize,
    phase: Phase,
    pieces: u64,
}

impl Cutter {
    pub fn new(sizes: CutSizes) -> Self {
        let sizes = CutSizes { block: sizes.block.max(1), ..sizes };
        Cutter { sizes, seen: 0, pending: Vec::new(), searched: 0, phase: Phase::Head, pieces: 0 }
    }

    /// Text bytes fed so far.
    pub fn text_bytes(&self) -> u64 {
        self.seen
    }

    /// Pieces handed on so far.
    pub fn pieces(&self) -> u64 {
        self.pieces
    }

    /// Whether cutting failed after pieces were handed on (the caller must parse serially).
    pub fn failed(&self) -> bool {
        self.phase == Phase::Failed
    }

    /// Whether the frame parse is the whole parse (nothing was cut; taking a mark changes
    /// nothing in a parse).
    pub fn whole(&self) -> bool {
        self.pieces == 0 && self.phase != Phase::Failed
    }

    /// Feeds the next text bytes.
    pub fn feed(&mut self, mut text: &[u8], out: &mut dyn FnMut(Cut<'_>) -> bool) {
        let before = self.seen;
        self.seen += text.len() as u64;
        match self.phase {
            Phase::Serial => {
                out(Cut::Frame(text));
            }
            Phase::Failed => {}
            Phase::Head => {
                // The first `head` bytes go straight through; what follows waits for a seam.
                let direct = (self.sizes.head as u64).saturating_sub(before).min(text.len() as u64) as usize;
                if direct > 0 {
                    out(Cut::Frame(&text[..direct]));
                    text = &text[direct..];
                }
                self.pending.extend_from_slice(text);
                if self.pending.len() >= self.search() {
                    self.first_seam(out);
                }
            }
            Phase::Middle => {
                self.pending.extend_from_slice(text);
                self.cut(out);
            }
        }
    }

    /// Ends the text: what is held is the frame's tail.
    pub fn finish(&mut self, out: &mut dyn FnMut(Cut<'_>) -> bool) {
        if matches!(self.phase, Phase::Head | Phase::Middle) && !self.pending.is_empty() {
            out(Cut::Frame(&self.pending));
        }
        self.pending = Vec::new();
    }

    /// The first seam after the head where the frame can be marked: a seam inside the
    /// metadata before `traceEvents` (`deviceProperties` is an array of objects) cannot be, so
    /// the next one is tried, within the search window.
    fn first_seam(&mut self, out: &mut dyn FnMut(Cut<'_>) -> bool) {
        let mut left = self.search();
        loop {
            let window = self.pending.len().min(left);
            let Some((_, start)) = find_seam(&self.pending[..window]) else {
                self.go_serial(out);
                return;
            };
            out(Cut::Frame(&self.pending[..start]));
            self.pending.drain(..start);
            left -= start;
            if out(Cut::Mark) {
                break;
            }
        }
        self.phase = Phase::Middle;
        self.searched = 0;
        self.cut(out);
    }

    /// How far after the head the first seam is looked for.
    fn search(&self) -> usize {
        SEAM_SEARCH.min(self.sizes.block)
    }

    fn go_serial(&mut self, out: &mut dyn FnMut(Cut<'_>) -> bool) {
        out(Cut::Frame(&self.pending));
        self.pending = Vec::new();
        self.phase = Phase::Serial;
    }

    /// Cuts pieces while more than a block and the kept tail are held.
    fn cut(&mut self, out: &mut dyn FnMut(Cut<'_>) -> bool) {
        let CutSizes { block, keep, .. } = self.sizes;
        while self.pending.len() >= block.saturating_add(keep) {
            // A seam may straddle the end of what was searched: look again from a little before.
            let from = block.max(self.searched.saturating_sub(SEAM_OVERLAP));
            let end_at = self.pending.len() - keep;
            let Some((end, start)) = find_seam(&self.pending[from..end_at]) else {
                self.searched = end_at;
                if self.pending.len() > block.saturating_mul(4).saturating_add(keep) {
                    if self.pieces == 0 {
                        // Nothing cut yet: the frame can still read it all.
                        self.go_serial(out);
                    } else {
                        self.phase = Phase::Failed;
                        self.pending = Vec::new();
                    }
                }
                return;
            };
            let piece = self.pending[..from + end].to_vec();
            self.pending.drain(..from + start);
            self.searched = 0;
            self.pieces += 1;
            out(Cut::Piece(piece));
        }
    }
}

/// The most text after the head searched for the first seam (as the host's [`find_seam`] window).
const SEAM_SEARCH: usize = 1 << 20;
/// How far back a new search starts from the end of the last one: more than a seam's blanks.
const SEAM_OVERLAP: usize = 4096;

fn clean(t: &RankTrace) -> bool {
    t.diagnostics.is_empty() && !t.counts.by_ph.contains_key("B") && !t.counts.by_ph.contains_key("E")
}

/// Whether [`merge`] takes `t` as a middle piece (no doubt, no `M` metadata).
pub(crate) fn mergeable_piece(t: &RankTrace) -> bool {
    clean(t) && !t.counts.by_ph.contains_key("M")
}

/// Re-interns `from`'s strings `range` into `into`; `map[id]` is the new id.
fn reintern(into: &mut StringTable, from: &StringTable, range: std::ops::Range<usize>, map: &mut [StrId]) {
    for i in range {
        if let Some(slot) = map.get_mut(i) {
            *slot = into.intern(from.get(StrId(i as u32)));
        }
    }
}

struct Part<'a> {
    t: &'a RankTrace,
    strings: Vec<StrId>,
    lanes: Vec<LaneId>,
    /// Added to times (the base time, for pieces parsed without it).
    shift: i64,
}

impl Part<'_> {
    fn s(&self, id: StrId) -> StrId {
        self.strings.get(id.0 as usize).copied().unwrap_or(StrId::EMPTY)
    }
    fn key(&self, k: IdKey) -> IdKey {
        match k {
            IdKey::Str(s) => IdKey::Str(self.s(s)),
            k => k,
        }
    }
}

#[derive(Default)]
struct Lanes {
    by_key: FxHashMap<(IdKey, IdKey), LaneId>,
    table: LaneTable,
}

impl Lanes {
    /// Lanes `range` of `p`, in order; new ones appended with `p`'s attributes.
    fn add(&mut self, p: &mut Part<'_>, range: std::ops::Range<usize>) {
        let l = &p.t.lanes;
        for i in range {
            let key = (p.key(l.pid[i]), p.key(l.tid[i]));
            let table = &mut self.table;
            let id = *self.by_key.entry(key).or_insert_with(|| {
                table.pid.push(key.0);
                table.tid.push(key.1);
                table.kind.push(l.kind[i]);
                table.name.push(StrId::EMPTY);
                table.sort_index.push(i64::MAX);
                table.device.push(-1);
                table.stream.push(-1);
                LaneId(table.pid.len() as u32 - 1)
            });
            if let Some(slot) = p.lanes.get_mut(i) {
                *slot = id;
            }
        }
    }
}

/// Appends rows `ev`, `comm`, `flows`, `counters` of `p` to `out`. `row_of` maps `p`'s event
/// rows to the merged ones; `comm_base` is where `p`'s first appended comm row lands minus its
/// index.
#[allow(clippy::too_many_arguments)]
fn append(
    out: &mut RankTrace,
    p: &Part<'_>,
    ev: std::ops::Range<usize>,
    comm: std::ops::Range<usize>,
    flows: std::ops::Range<usize>,
    counters: std::ops::Range<usize>,
    row_of: &dyn Fn(u32) -> u32,
    comm_of: &dyn Fn(u32) -> u32,
) {
    let t = p.t;
    let lane = |l: LaneId| p.lanes.get(l.0 as usize).copied().unwrap_or(l);
    let e = &t.events;
    let o = &mut out.events;
    for i in ev {
        o.kind.push(e.kind[i]);
        o.ts_ns.push(e.ts_ns[i].saturating_add(p.shift));
        o.dur_ns.push(e.dur_ns[i]);
        o.name.push(p.s(e.name[i]));
        o.cat.push(p.s(e.cat[i]));
        o.lane.push(lane(e.lane[i]));
        o.correlation.push(e.correlation[i]);
        o.external_id.push(e.external_id[i]);
        o.args.push(if e.args[i] == NONE_U32 { NONE_U32 } else { comm_of(e.args[i]) });
        // Filled by normalize: empty after a parse, copied only if present.
        if let Some(&c) = e.class.get(i) {
            o.class.push(c);
        }
        if let Some(&d) = e.detail.get(i) {
            o.detail.push(d);
        }
        if let Some(&st) = e.step.get(i) {
            o.step.push(st);
        }
    }
    let c = &t.comm;
    let oc = &mut out.comm;
    for i in comm {
        oc.event.push(EventIdx(row_of(c.event[i].0)));
        oc.collective.push(p.s(c.collective[i]));
        oc.in_nelems.push(c.in_nelems[i]);
        oc.out_nelems.push(c.out_nelems[i]);
        oc.in_bytes.push(c.in_bytes[i]);
        oc.out_bytes.push(c.out_bytes[i]);
        oc.dtype.push(p.s(c.dtype[i]));
        oc.group_size.push(c.group_size[i]);
        oc.pg_name.push(p.s(c.pg_name[i]));
        oc.pg_desc.push(p.s(c.pg_desc[i]));
        oc.pg_ranks.push(p.s(c.pg_ranks[i]));
        oc.seq.push(c.seq[i]);
        oc.src_rank.push(c.src_rank[i]);
        oc.dst_rank.push(c.dst_rank[i]);
        oc.tag.push(c.tag[i]);
        oc.input_elems.push(c.input_elems[i]);
    }
    let f = &t.flows;
    let of = &mut out.flows;
    for i in flows {
        of.id.push(f.id[i]);
        of.phase.push(f.phase[i]);
        of.cat.push(p.s(f.cat[i]));
        of.ts_ns.push(f.ts_ns[i].saturating_add(p.shift));
        of.lane.push(lane(f.lane[i]));
        of.bind_enclosing.push(f.bind_enclosing[i]);
    }
    let k = &t.counters;
    let ok = &mut out.counters;
    for i in counters {
        ok.name.push(p.s(k.name[i]));
        ok.series.push(p.s(k.series[i]));
        ok.ts_ns.push(k.ts_ns[i].saturating_add(p.shift));
        ok.value.push(k.value[i]);
        ok.pid.push(p.key(k.pid[i]));
    }
}

fn reserve(e: &mut EventTable, n: usize) {
    e.kind.reserve_exact(n);
    e.ts_ns.reserve_exact(n);
    e.dur_ns.reserve_exact(n);
    e.name.reserve_exact(n);
    e.cat.reserve_exact(n);
    e.lane.reserve_exact(n);
    e.correlation.reserve_exact(n);
    e.external_id.reserve_exact(n);
    e.args.reserve_exact(n);
}

fn add_counts(into: &mut BTreeMap<String, u64>, from: &BTreeMap<String, u64>) {
    for (k, &n) in from {
        *into.entry(k.clone()).or_default() += n;
    }
}

/// Parses one middle piece alone, as `[` piece `]` (a bare array of events); `None` when it
/// is not one.
pub fn parse_piece(source_name: &str, piece: &[u8]) -> Option<RankTrace> {
    let mut p = super::TraceParser::new(source_name);
    p.feed(b"[");
    p.feed(piece);
    p.feed(b"]");
    p.finish().ok()
}

/// Merges the frame (head and tail, marked between them) and the middle pieces (in file order)
/// into the trace the serial parser gives for the whole file, or `None` when any part leaves a
/// doubt (see the module doc). `text_bytes` is the file's length.
///
/// Each piece is dropped once its rows are copied, and the merged columns are reserved at their
/// final size, so the peak is the merged columns plus about one piece.
pub fn merge(frame: RankTrace, mark: &Mark, middle: Vec<RankTrace>, text_bytes: u64) -> Option<RankTrace> {
    if !clean(&frame) || !middle.iter().all(mergeable_piece) {
        return None;
    }
    let f = &frame;
    let sane = mark.events <= f.events.len()
        && mark.comm <= f.comm.len()
        && mark.flows <= f.flows.len()
        && mark.counters <= f.counters.len()
        && mark.strings <= f.strings.len()
        && mark.lanes <= f.lanes.len()
        && mark.device.len() == mark.lanes
        && mark.stream.len() == mark.lanes;
    if !sane {
        return None;
    }
    let base = f.meta.base_time_ns.unwrap_or(0);
    let mut out = RankTrace {
        source: f.source.clone(),
        meta: f.meta.clone(),
        diagnostics: f.diagnostics.clone(),
        text_bytes,
        input_bytes: text_bytes,
        ..RankTrace::default()
    };
    // Strings and lanes in the serial parser's order of first sight: the head, the pieces, the tail.
    let mut fp = Part {
        t: f,
        strings: vec![StrId::EMPTY; f.strings.len()],
        lanes: vec![LaneId(0); f.lanes.len()],
        shift: 0,
    };
    let mut mps: Vec<Part<'_>> = middle
        .iter()
        .map(|m| Part {
            t: m,
            strings: vec![StrId::EMPTY; m.strings.len()],
            lanes: vec![LaneId(0); m.lanes.len()],
            shift: base,
        })
        .collect();
    let mut strings = StringTable::new();
    let mut lanes = Lanes::default();
    reintern(&mut strings, &f.strings, 0..mark.strings, &mut fp.strings);
    lanes.add(&mut fp, 0..mark.lanes);
    for p in &mut mps {
        let t = p.t;
        reintern(&mut strings, &t.strings, 0..t.strings.len(), &mut p.strings);
        lanes.add(p, 0..t.lanes.len());
    }
    reintern(&mut strings, &f.strings, mark.strings..f.strings.len(), &mut fp.strings);
    lanes.add(&mut fp, mark.lanes..f.lanes.len());
    // Lane attributes: names and sort indexes come only from `M` events, which the pieces do not
    // hold, so the frame's are final; a device or stream is the first one seen in file order.
    for (i, &id) in fp.lanes.iter().enumerate() {
        let j = id.0 as usize;
        lanes.table.name[j] = fp.s(f.lanes.name[i]);
        lanes.table.sort_index[j] = f.lanes.sort_index[i];
        if i < mark.lanes {
            lanes.table.device[j] = mark.device[i];
            lanes.table.stream[j] = mark.stream[i];
        }
    }
    for p in &mps {
        for (i, &id) in p.lanes.iter().enumerate() {
            let j = id.0 as usize;
            if lanes.table.device[j] < 0 {
                lanes.table.device[j] = p.t.lanes.device[i];
            }
            if lanes.table.stream[j] < 0 {
                lanes.table.stream[j] = p.t.lanes.stream[i];
            }
        }
    }
    // The frame's final value for a head lane is the head's when the head set it, else the tail's.
    for (i, &id) in fp.lanes.iter().enumerate() {
        let j = id.0 as usize;
        if lanes.table.device[j] < 0 {
            lanes.table.device[j] = f.lanes.device[i];
        }
        if lanes.table.stream[j] < 0 {
            lanes.table.stream[j] = f.lanes.stream[i];
        }
    }
    out.strings = strings;
    out.counts = f.counts.clone();
    for m in &middle {
        out.counts.total += m.counts.total;
        add_counts(&mut out.counts.by_ph, &m.counts.by_ph);
        add_counts(&mut out.counts.by_cat, &m.counts.by_cat);
    }
    let maps: Vec<(Vec<StrId>, Vec<LaneId>)> = mps.into_iter().map(|p| (p.strings, p.lanes)).collect();
    // Rows: the head, each piece, the tail.
    let mid_events: usize = middle.iter().map(|m| m.events.len()).sum();
    let mid_comm: usize = middle.iter().map(|m| m.comm.len()).sum();
    let (me, mc) = (mark.events as u32, mark.comm as u32);
    let (de, dc) = (mid_events as u32, mid_comm as u32);
    let frame_row = move |r: u32| if r < me { r } else { r.saturating_add(de) };
    let frame_comm = move |r: u32| if r < mc { r } else { r.saturating_add(dc) };
    reserve(&mut out.events, f.events.len() + mid_events);
    append(
        &mut out,
        &fp,
        0..mark.events,
        0..mark.comm,
        0..mark.flows,
        0..mark.counters,
        &frame_row,
        &frame_comm,
    );
    let (mut eo, mut co) = (me, mc);
    for (m, (strings, lanes)) in middle.into_iter().zip(maps) {
        let p = &Part { t: &m, strings, lanes, shift: base };
        let t = p.t;
        let (e0, c0) = (eo, co);
        let row = move |r: u32| r.saturating_add(e0);
        let comm = move |r: u32| r.saturating_add(c0);
        append(
            &mut out,
            p,
            0..t.events.len(),
            0..t.comm.len(),
            0..t.flows.len(),
            0..t.counters.len(),
            &row,
            &comm,
        );
        eo += t.events.len() as u32;
        co += t.comm.len() as u32;
    }
    append(
        &mut out,
        &fp,
        mark.events..f.events.len(),
        mark.comm..f.comm.len(),
        mark.flows..f.flows.len(),
        mark.counters..f.counters.len(),
        &frame_row,
        &frame_comm,
    );
    lanes.table.events = vec![0; lanes.table.pid.len()];
    for l in &out.events.lane {
        if let Some(c) = lanes.table.events.get_mut(l.0 as usize) {
            *c += 1;
        }
    }
    out.lanes = lanes.table;
    Some(out)
}
