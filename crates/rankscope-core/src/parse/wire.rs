//! A parsed middle piece as bytes, for hosts whose threads share no memory: a browser worker
//! that parsed a piece of someone else's file ([`super::split::parse_piece`]) hands its columns
//! to the worker that merges them ([`super::split::merge`]) as one transferable byte array.
//!
//! Only what [`super::split::merge`] reads from a middle piece travels: the strings in id order,
//! the event, communication, lane, flow and counter columns, and the event counts. A piece the
//! merge would refuse anyway (diagnostics, `B`/`E` or `M` events) or one already normalized is
//! not encoded ([`encode_piece`] gives `None`), so the receiver falls back to the serial parse
//! as it would have after the merge.
//!
//! The layout is columnar and little-endian: a magic and version, then each column as a `u32`
//! row count and its values, strings as a `u32` byte length and their UTF-8. [`decode_piece`]
//! checks every length against what is left and that the columns of one table agree, so
//! damaged bytes give `None`, never a panic or a trace the merge could index out of bounds.

use std::collections::BTreeMap;

use crate::model::*;

const MAGIC: &[u8; 4] = b"RSPC";
const VERSION: u8 = 3;

/// A value of a column.
trait Wire: Sized + Copy {
    const BYTES: usize;
    fn put(self, out: &mut Vec<u8>);
    fn get(b: &[u8]) -> Option<Self>;
}

macro_rules! wire_num {
    ($($t:ty),*) => {$(
        impl Wire for $t {
            const BYTES: usize = std::mem::size_of::<$t>();
            fn put(self, out: &mut Vec<u8>) {
                out.extend_from_slice(&self.to_le_bytes());
            }
            fn get(b: &[u8]) -> Option<Self> {
                Some(<$t>::from_le_bytes(b.try_into().ok()?))
            }
        }
    )*};
}
wire_num!(u8, u32, u64, i32, i64, f64);

macro_rules! wire_id {
    ($($t:ident),*) => {$(
        impl Wire for $t {
            const BYTES: usize = 4;
            fn put(self, out: &mut Vec<u8>) {
                self.0.put(out);
            }
            fn get(b: &[u8]) -> Option<Self> {
                u32::get(b).map($t)
            }
        }
    )*};
}
wire_id!(StrId, LaneId, EventIdx);

impl Wire for bool {
    const BYTES: usize = 1;
    fn put(self, out: &mut Vec<u8>) {
        out.push(self as u8);
    }
    fn get(b: &[u8]) -> Option<Self> {
        match b {
            [0] => Some(false),
            [1] => Some(true),
            _ => None,
        }
    }
}

impl Wire for EventKind {
    const BYTES: usize = 1;
    fn put(self, out: &mut Vec<u8>) {
        out.push(self as u8);
    }
    fn get(b: &[u8]) -> Option<Self> {
        match b {
            [0] => Some(EventKind::Slice),
            [1] => Some(EventKind::Instant),
            _ => None,
        }
    }
}

impl Wire for LaneKind {
    const BYTES: usize = 1;
    fn put(self, out: &mut Vec<u8>) {
        out.push(match self {
            LaneKind::Cpu => 0,
            LaneKind::Gpu => 1,
        });
    }
    fn get(b: &[u8]) -> Option<Self> {
        match b {
            [0] => Some(LaneKind::Cpu),
            [1] => Some(LaneKind::Gpu),
            _ => None,
        }
    }
}

/// A tag byte and eight bytes of value.
impl Wire for IdKey {
    const BYTES: usize = 9;
    fn put(self, out: &mut Vec<u8>) {
        match self {
            IdKey::Int(v) => {
                out.push(0);
                v.put(out);
            }
            IdKey::Str(s) => {
                out.push(1);
                (s.0 as i64).put(out);
            }
        }
    }
    fn get(b: &[u8]) -> Option<Self> {
        let (&tag, v) = b.split_first()?;
        let v = i64::get(v)?;
        match tag {
            0 => Some(IdKey::Int(v)),
            1 => u32::try_from(v).ok().map(|s| IdKey::Str(StrId(s))),
            _ => None,
        }
    }
}

struct Writer(Vec<u8>);

impl Writer {
    fn col<T: Wire>(&mut self, v: &[T]) {
        (v.len() as u32).put(&mut self.0);
        self.0.reserve(v.len() * T::BYTES);
        for &x in v {
            x.put(&mut self.0);
        }
    }

    fn text(&mut self, s: &str) {
        (s.len() as u32).put(&mut self.0);
        self.0.extend_from_slice(s.as_bytes());
    }

    fn counts(&mut self, m: &BTreeMap<String, u64>) {
        (m.len() as u32).put(&mut self.0);
        for (k, &n) in m {
            self.text(k);
            n.put(&mut self.0);
        }
    }
}

struct Reader<'a>(&'a [u8]);

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        if n > self.0.len() {
            return None;
        }
        let (a, b) = self.0.split_at(n);
        self.0 = b;
        Some(a)
    }

    fn one<T: Wire>(&mut self) -> Option<T> {
        T::get(self.take(T::BYTES)?)
    }

    fn col<T: Wire>(&mut self) -> Option<Vec<T>> {
        let n = self.one::<u32>()? as usize;
        let bytes = self.take(n.checked_mul(T::BYTES)?)?;
        bytes.chunks_exact(T::BYTES).map(T::get).collect()
    }

    fn text(&mut self) -> Option<&'a str> {
        let n = self.one::<u32>()? as usize;
        std::str::from_utf8(self.take(n)?).ok()
    }

    fn counts(&mut self) -> Option<BTreeMap<String, u64>> {
        let n = self.one::<u32>()?;
        let mut m = BTreeMap::new();
        for _ in 0..n {
            let k = self.text()?.to_string();
            m.insert(k, self.one::<u64>()?);
        }
        Some(m)
    }
}

/// A parsed middle piece as bytes, or `None` when [`super::split::merge`] would refuse it (see
/// the module doc) or it is not a fresh parse (normalized columns are not carried).
pub fn encode_piece(t: &RankTrace) -> Option<Vec<u8>> {
    if !super::split::mergeable_piece(t) {
        return None;
    }
    let e = &t.events;
    if !(e.class.is_empty() && e.detail.is_empty() && e.step.is_empty()) {
        return None;
    }
    let mut w = Writer(Vec::with_capacity(64 + t.table_bytes()));
    w.0.extend_from_slice(MAGIC);
    w.0.push(VERSION);
    (t.strings.len() as u32).put(&mut w.0);
    for i in 1..t.strings.len() {
        w.text(t.strings.get(StrId(i as u32)));
    }
    w.col(&e.kind);
    w.col(&e.ts_ns);
    w.col(&e.dur_ns);
    w.col(&e.name);
    w.col(&e.cat);
    w.col(&e.lane);
    w.col(&e.correlation);
    w.col(&e.external_id);
    w.col(&e.args);
    let c = &t.comm;
    w.col(&c.event);
    w.col(&c.collective);
    w.col(&c.in_nelems);
    w.col(&c.out_nelems);
    w.col(&c.in_bytes);
    w.col(&c.out_bytes);
    w.col(&c.dtype);
    w.col(&c.group_size);
    w.col(&c.pg_name);
    w.col(&c.pg_desc);
    w.col(&c.pg_ranks);
    w.col(&c.seq);
    w.col(&c.src_rank);
    w.col(&c.dst_rank);
    w.col(&c.tag);
    w.col(&c.input_elems);
    w.col(&c.input_dims);
    let l = &t.lanes;
    w.col(&l.pid);
    w.col(&l.tid);
    w.col(&l.kind);
    w.col(&l.name);
    w.col(&l.sort_index);
    w.col(&l.device);
    w.col(&l.stream);
    w.col(&l.events);
    let f = &t.flows;
    w.col(&f.id);
    w.col(&f.phase);
    w.col(&f.cat);
    w.col(&f.ts_ns);
    w.col(&f.lane);
    w.col(&f.bind_enclosing);
    let k = &t.counters;
    w.col(&k.name);
    w.col(&k.series);
    w.col(&k.ts_ns);
    w.col(&k.value);
    w.col(&k.pid);
    w.col(&k.device);
    t.counts.total.put(&mut w.0);
    w.counts(&t.counts.by_ph);
    w.counts(&t.counts.by_cat);
    t.counts.with_input_dims.put(&mut w.0);
    t.text_bytes.put(&mut w.0);
    Some(w.0)
}

/// Whether every column of a table has `n` rows.
fn all(n: usize, lens: &[usize]) -> bool {
    lens.iter().all(|&l| l == n)
}

/// The piece [`encode_piece`] wrote, named `source_name`; `None` for bytes it did not write
/// (damaged, truncated, another version).
pub fn decode_piece(source_name: &str, bytes: &[u8]) -> Option<RankTrace> {
    let mut r = Reader(bytes);
    if r.take(4)? != MAGIC || r.one::<u8>()? != VERSION {
        return None;
    }
    let n_strings = r.one::<u32>()?;
    let mut strings = StringTable::new();
    for i in 1..n_strings {
        // Ids must come out as they went in: a repeated string would shift every later id.
        if strings.intern(r.text()?) != StrId(i) {
            return None;
        }
    }
    let events = EventTable {
        kind: r.col()?,
        ts_ns: r.col()?,
        dur_ns: r.col()?,
        name: r.col()?,
        cat: r.col()?,
        lane: r.col()?,
        correlation: r.col()?,
        external_id: r.col()?,
        args: r.col()?,
        ..EventTable::default()
    };
    let comm = CommArgs {
        event: r.col()?,
        collective: r.col()?,
        in_nelems: r.col()?,
        out_nelems: r.col()?,
        in_bytes: r.col()?,
        out_bytes: r.col()?,
        dtype: r.col()?,
        group_size: r.col()?,
        pg_name: r.col()?,
        pg_desc: r.col()?,
        pg_ranks: r.col()?,
        seq: r.col()?,
        src_rank: r.col()?,
        dst_rank: r.col()?,
        tag: r.col()?,
        input_elems: r.col()?,
        input_dims: r.col()?,
    };
    let lanes = LaneTable {
        pid: r.col()?,
        tid: r.col()?,
        kind: r.col()?,
        name: r.col()?,
        sort_index: r.col()?,
        device: r.col()?,
        stream: r.col()?,
        events: r.col()?,
    };
    let flows = FlowTable {
        id: r.col()?,
        phase: r.col()?,
        cat: r.col()?,
        ts_ns: r.col()?,
        lane: r.col()?,
        bind_enclosing: r.col()?,
    };
    let counters = CounterTable {
        name: r.col()?,
        series: r.col()?,
        ts_ns: r.col()?,
        value: r.col()?,
        pid: r.col()?,
        device: r.col()?,
    };
    let counts =
        EventCounts { total: r.one()?, by_ph: r.counts()?, by_cat: r.counts()?, with_input_dims: r.one()? };
    let text_bytes = r.one::<u64>()?;
    if !r.0.is_empty() {
        return None;
    }
    let e = &events;
    let c = &comm;
    let l = &lanes;
    let f = &flows;
    let k = &counters;
    let agree =
        all(
            e.ts_ns.len(),
            &[
                e.kind.len(),
                e.dur_ns.len(),
                e.name.len(),
                e.cat.len(),
                e.lane.len(),
                e.correlation.len(),
                e.external_id.len(),
                e.args.len(),
            ],
        ) && all(
            c.event.len(),
            &[
                c.collective.len(),
                c.in_nelems.len(),
                c.out_nelems.len(),
                c.in_bytes.len(),
                c.out_bytes.len(),
                c.dtype.len(),
                c.group_size.len(),
                c.pg_name.len(),
                c.pg_desc.len(),
                c.pg_ranks.len(),
                c.seq.len(),
                c.src_rank.len(),
                c.dst_rank.len(),
                c.tag.len(),
                c.input_elems.len(),
                c.input_dims.len(),
            ],
        ) && all(
            l.pid.len(),
            &[
                l.tid.len(),
                l.kind.len(),
                l.name.len(),
                l.sort_index.len(),
                l.device.len(),
                l.stream.len(),
                l.events.len(),
            ],
        ) && all(
            f.id.len(),
            &[f.phase.len(), f.cat.len(), f.ts_ns.len(), f.lane.len(), f.bind_enclosing.len()],
        ) && all(k.name.len(), &[k.series.len(), k.ts_ns.len(), k.value.len(), k.pid.len(), k.device.len()]);
    if !agree {
        return None;
    }
    Some(RankTrace {
        source: source_name.to_string(),
        strings,
        events,
        comm,
        lanes,
        flows,
        counters,
        counts,
        text_bytes,
        input_bytes: text_bytes,
        ..RankTrace::default()
    })
}
