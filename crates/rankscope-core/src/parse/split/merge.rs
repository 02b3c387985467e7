//! The merge: the frame's and the pieces' columns re-interned and appended in file order into
//! the tables the serial parse gives ([`merge`], [`Merger`] piece by piece).

use std::collections::BTreeMap;

use crate::model::*;
use crate::parse::kineto::Mark;

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

#[derive(Debug, Default)]
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
        oc.input_dims.push(p.s(c.input_dims[i]));
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
        ok.device.push(k.device.get(i).copied().unwrap_or(HOST_MEMORY));
        ok.pid.push(p.key(k.pid[i]));
    }
}

fn add_counts(into: &mut BTreeMap<String, u64>, from: &BTreeMap<String, u64>) {
    for (k, &n) in from {
        *into.entry(k.clone()).or_default() += n;
    }
}

/// Merges the frame (head and tail, marked between them) and the middle pieces (in file order)
/// into the trace the serial parser gives for the whole file, or `None` when any part leaves a
/// doubt (see the module doc). `text_bytes` is the file's length. A [`Merger`] made from the
/// frame, fed every piece.
pub fn merge(frame: RankTrace, mark: &Mark, middle: Vec<RankTrace>, text_bytes: u64) -> Option<RankTrace> {
    let mut m = Merger::new(&frame, mark.clone())?;
    m.expect_text_bytes(text_bytes);
    let n = middle.len();
    for (i, piece) in middle.into_iter().enumerate() {
        m.push(i, piece);
    }
    m.finish(frame, n, text_bytes)
}

/// [`merge`] piece by piece, so that merging overlaps the parsing of the pieces after it and
/// each piece is dropped as soon as its rows are copied (the peak is the merged columns plus the
/// pieces in flight, as in the serial parse plus a few blocks).
///
/// Made from the frame's head at its [`Mark`] ([`Merger::new`]: the head's strings, lanes and
/// rows go first, as the serial parser meets them), it takes the middle pieces by index in any
/// order ([`Merger::push`]): a piece is appended when every piece before it is in, one that comes
/// early waits. [`Merger::finish`] takes the whole frame (the tail's rows and strings go last;
/// the base time, lane names and sort indexes are only known then) and gives what [`merge`]
/// gives. The order of arrival changes nothing in the result (`tests/split.rs` checks random
/// orders against [`merge`]).
#[derive(Debug)]
pub struct Merger {
    mark: Mark,
    /// Strings, rows and the middle's counts so far; times of the middle not yet shifted.
    out: RankTrace,
    lanes: Lanes,
    /// The head's strings and lanes: their ids in `out`.
    head_strings: Vec<StrId>,
    head_lanes: Vec<LaneId>,
    /// The next piece to append.
    next: usize,
    waiting: BTreeMap<usize, RankTrace>,
    doubt: bool,
    /// The text the whole file is expected to hold ([`Merger::expect_text_bytes`]), and the
    /// text of the pieces appended so far: the merged columns are reserved for the rows that
    /// many bytes are expected to give, so they grow about once rather than by doubling (two
    /// copies of a column coexist while it moves).
    expected_text: u64,
    merged_text: u64,
}

impl Merger {
    /// Starts the merge with the frame's head: `head` holds the frame's tables at `mark` (the
    /// live frame parser's, [`TraceParser::tables`](crate::parse::TraceParser::tables)) or later (the
    /// finished frame). `None` when `mark` does not fit `head`.
    pub fn new(head: &RankTrace, mark: Mark) -> Option<Merger> {
        let sane = mark.events <= head.events.len()
            && mark.comm <= head.comm.len()
            && mark.flows <= head.flows.len()
            && mark.counters <= head.counters.len()
            && mark.strings <= head.strings.len()
            && mark.lanes <= head.lanes.len()
            && mark.device.len() == mark.lanes
            && mark.stream.len() == mark.lanes;
        if !sane {
            return None;
        }
        let mut fp = Part {
            t: head,
            strings: vec![StrId::EMPTY; mark.strings],
            lanes: vec![LaneId(0); mark.lanes],
            shift: 0,
        };
        let mut out = RankTrace::default();
        let mut lanes = Lanes::default();
        reintern(&mut out.strings, &head.strings, 0..mark.strings, &mut fp.strings);
        lanes.add(&mut fp, 0..mark.lanes);
        // A head lane's device or stream is the head's (at the mark), else the first piece's
        // that sets it, else the tail's.
        for (i, &id) in fp.lanes.iter().enumerate() {
            let j = id.0 as usize;
            lanes.table.device[j] = mark.device[i];
            lanes.table.stream[j] = mark.stream[i];
        }
        // The head's rows point only at the head's (a comm row and its event are written
        // together; `B`/`E` pairs, which could point later, leave the merge in doubt).
        append(&mut out, &fp, 0..mark.events, 0..mark.comm, 0..mark.flows, 0..mark.counters, &|r| r, &|r| r);
        let Part { strings: head_strings, lanes: head_lanes, .. } = fp;
        Some(Merger {
            mark,
            out,
            lanes,
            head_strings,
            head_lanes,
            next: 0,
            waiting: BTreeMap::new(),
            doubt: false,
            expected_text: 0,
            merged_text: 0,
        })
    }

    /// Takes middle piece `index` (0 is the first after the head), parsed alone
    /// ([`parse_piece`]); appends it and every waiting piece after it once the pieces before
    /// it are in. A piece with a diagnostic, `B`/`E` or `M` events, or an index seen before
    /// leaves the merge in doubt ([`Merger::finish`] gives `None`).
    pub fn push(&mut self, index: usize, piece: RankTrace) {
        if self.doubt {
            return;
        }
        if index < self.next || self.waiting.contains_key(&index) || !mergeable_piece(&piece) {
            self.doubt = true;
            self.waiting = BTreeMap::new();
            return;
        }
        if index == self.next {
            self.append_piece(piece);
        } else {
            self.waiting.insert(index, piece);
        }
        while let Some(p) = self.waiting.remove(&self.next) {
            self.append_piece(p);
        }
    }

    /// The file's text length, exact or estimated (gzip: from the compression so far); the
    /// merged columns are reserved from it and the rows per byte of the pieces merged so far.
    /// Only memory depends on it.
    pub fn expect_text_bytes(&mut self, bytes: u64) {
        self.expected_text = bytes;
    }

    /// Makes room for `t`'s rows: when a table is full, it grows to the rows the expected text
    /// is estimated to give (at the rate of the pieces so far, `t` included, plus 5%). Without
    /// an expected length, the columns grow as vectors do.
    fn make_room(&mut self, t: &RankTrace) {
        if self.expected_text == 0 {
            return;
        }
        let text = self.merged_text.saturating_add(t.text_bytes).max(1);
        let o = &mut self.out;
        // Past the estimate, a quarter more at a time.
        let est = |now: usize, add: usize| -> usize {
            let rate = (now + add) as f64 / text as f64;
            let need = now + add;
            ((rate * self.expected_text as f64 * 1.05) as usize).max(need + need / 4) - now
        };
        let e = &mut o.events;
        if e.ts_ns.capacity() < e.len() + t.events.len() {
            let n = est(e.len(), t.events.len());
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
        let c = &mut o.comm;
        if c.event.capacity() < c.len() + t.comm.len() {
            let n = est(c.len(), t.comm.len());
            c.event.reserve_exact(n);
            c.collective.reserve_exact(n);
            c.in_nelems.reserve_exact(n);
            c.out_nelems.reserve_exact(n);
            c.in_bytes.reserve_exact(n);
            c.out_bytes.reserve_exact(n);
            c.dtype.reserve_exact(n);
            c.group_size.reserve_exact(n);
            c.pg_name.reserve_exact(n);
            c.pg_desc.reserve_exact(n);
            c.pg_ranks.reserve_exact(n);
            c.seq.reserve_exact(n);
            c.src_rank.reserve_exact(n);
            c.dst_rank.reserve_exact(n);
            c.tag.reserve_exact(n);
            c.input_elems.reserve_exact(n);
            c.input_dims.reserve_exact(n);
        }
        let f = &mut o.flows;
        if f.id.capacity() < f.len() + t.flows.len() {
            let n = est(f.len(), t.flows.len());
            f.id.reserve_exact(n);
            f.phase.reserve_exact(n);
            f.cat.reserve_exact(n);
            f.ts_ns.reserve_exact(n);
            f.lane.reserve_exact(n);
            f.bind_enclosing.reserve_exact(n);
        }
        let k = &mut o.counters;
        if k.name.capacity() < k.len() + t.counters.len() {
            let n = est(k.len(), t.counters.len());
            k.name.reserve_exact(n);
            k.series.reserve_exact(n);
            k.ts_ns.reserve_exact(n);
            k.value.reserve_exact(n);
            k.pid.reserve_exact(n);
            k.device.reserve_exact(n);
        }
    }

    /// Pieces appended so far (the next index due).
    pub fn merged(&self) -> usize {
        self.next
    }

    /// Pieces that came before their turn and wait.
    pub fn waiting(&self) -> usize {
        self.waiting.len()
    }

    /// Whether the merge is already known to fail.
    pub fn doubt(&self) -> bool {
        self.doubt
    }

    fn append_piece(&mut self, t: RankTrace) {
        self.make_room(&t);
        self.merged_text = self.merged_text.saturating_add(t.text_bytes);
        let mut p = Part {
            t: &t,
            strings: vec![StrId::EMPTY; t.strings.len()],
            lanes: vec![LaneId(0); t.lanes.len()],
            shift: 0,
        };
        reintern(&mut self.out.strings, &t.strings, 0..t.strings.len(), &mut p.strings);
        self.lanes.add(&mut p, 0..t.lanes.len());
        for (i, &id) in p.lanes.iter().enumerate() {
            let j = id.0 as usize;
            if self.lanes.table.device[j] < 0 {
                self.lanes.table.device[j] = t.lanes.device[i];
            }
            if self.lanes.table.stream[j] < 0 {
                self.lanes.table.stream[j] = t.lanes.stream[i];
            }
        }
        let (e0, c0) = (self.out.events.len() as u32, self.out.comm.len() as u32);
        append(
            &mut self.out,
            &p,
            0..t.events.len(),
            0..t.comm.len(),
            0..t.flows.len(),
            0..t.counters.len(),
            &|r| r.saturating_add(e0),
            &|r| r.saturating_add(c0),
        );
        let c = &mut self.out.counts;
        c.total += t.counts.total;
        c.with_input_dims += t.counts.with_input_dims;
        add_counts(&mut c.by_ph, &t.counts.by_ph);
        add_counts(&mut c.by_cat, &t.counts.by_cat);
        self.next += 1;
    }

    /// Ends the merge with the whole frame (head and tail) after `pieces` middle pieces over
    /// `text_bytes` of text: the trace [`merge`] gives, or `None` when in doubt, when a piece is
    /// missing, or when `frame` is not the frame the merge began with.
    pub fn finish(self, frame: RankTrace, pieces: usize, text_bytes: u64) -> Option<RankTrace> {
        let Merger { mark, mut out, mut lanes, head_strings, head_lanes, next, waiting, doubt, .. } = self;
        if doubt || next != pieces || !waiting.is_empty() || !clean(&frame) {
            return None;
        }
        let f = &frame;
        let fits = mark.events <= f.events.len()
            && mark.comm <= f.comm.len()
            && mark.flows <= f.flows.len()
            && mark.counters <= f.counters.len()
            && mark.strings <= f.strings.len()
            && mark.lanes <= f.lanes.len();
        if !fits {
            return None;
        }
        // Times: the head's as the frame ends them (the parser adds the base time at its end),
        // the middle's plus the base time (its pieces were parsed without it).
        let base = f.meta.base_time_ns.unwrap_or(0);
        let shift = |col: &mut [i64], head: usize, from: &[i64]| {
            let (h, m) = col.split_at_mut(head);
            h.copy_from_slice(&from[..head]);
            for t in m {
                *t = t.saturating_add(base);
            }
        };
        shift(&mut out.events.ts_ns, mark.events, &f.events.ts_ns);
        shift(&mut out.flows.ts_ns, mark.flows, &f.flows.ts_ns);
        shift(&mut out.counters.ts_ns, mark.counters, &f.counters.ts_ns);
        // The tail's strings and lanes, after the middle's.
        let mut fp = Part {
            t: f,
            strings: vec![StrId::EMPTY; f.strings.len()],
            lanes: vec![LaneId(0); f.lanes.len()],
            shift: 0,
        };
        fp.strings[..mark.strings].copy_from_slice(&head_strings);
        fp.lanes[..mark.lanes].copy_from_slice(&head_lanes);
        reintern(&mut out.strings, &f.strings, mark.strings..f.strings.len(), &mut fp.strings);
        lanes.add(&mut fp, mark.lanes..f.lanes.len());
        // Lane names and sort indexes come only from `M` events, which the pieces do not hold,
        // so the frame's are final; a device or stream still unset is the frame's.
        for (i, &id) in fp.lanes.iter().enumerate() {
            let j = id.0 as usize;
            lanes.table.name[j] = fp.s(f.lanes.name[i]);
            lanes.table.sort_index[j] = f.lanes.sort_index[i];
            if lanes.table.device[j] < 0 {
                lanes.table.device[j] = f.lanes.device[i];
            }
            if lanes.table.stream[j] < 0 {
                lanes.table.stream[j] = f.lanes.stream[i];
            }
        }
        // The tail's rows, after the middle's.
        let (me, mc) = (mark.events as u32, mark.comm as u32);
        let de = (out.events.len() - mark.events) as u32;
        let dc = (out.comm.len() - mark.comm) as u32;
        let frame_row = move |r: u32| if r < me { r } else { r.saturating_add(de) };
        let frame_comm = move |r: u32| if r < mc { r } else { r.saturating_add(dc) };
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
        let mut counts = f.counts.clone();
        counts.total += out.counts.total;
        counts.with_input_dims += out.counts.with_input_dims;
        add_counts(&mut counts.by_ph, &out.counts.by_ph);
        add_counts(&mut counts.by_cat, &out.counts.by_cat);
        out.counts = counts;
        lanes.table.events = vec![0; lanes.table.pid.len()];
        for l in &out.events.lane {
            if let Some(c) = lanes.table.events.get_mut(l.0 as usize) {
                *c += 1;
            }
        }
        out.lanes = lanes.table;
        out.source = f.source.clone();
        out.meta = f.meta.clone();
        out.diagnostics = f.diagnostics.clone();
        out.text_bytes = text_bytes;
        out.input_bytes = text_bytes;
        Some(out)
    }
}
