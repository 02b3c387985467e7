//! The invariants of a rank's tables ([`RankTrace::check`]): what every reader of a
//! [`RankTrace`] relies on without checking it again. The tests run it on every trace they
//! ingest and on every rank of every job they assemble, so a parser, a merge of pieces, a cut
//! of a multi-rank file or the normalizer that breaks one fails there, not later as a wrong
//! figure or an index out of bounds.
//!
//! - Every table's columns have one length (the normalizer's columns — class, detail, step —
//!   either none yet or one per event).
//! - Every reference stays inside its table: an event's lane and argument row, an argument row's
//!   event (which points back at it), a flow's lane, every string id (the rank's own table
//!   before assembly, the job's after: `strings`).
//! - Times: no event has a negative duration; after normalization the events are sorted by
//!   start, a longer slice before a shorter one at the same start.

use super::*;

impl RankTrace {
    /// The first broken invariant (module doc), with where it is; `strings` is the table the
    /// string ids refer to (the trace's own, or the job's once assembled).
    pub fn check(&self, strings: &StringTable) -> Result<(), String> {
        let e = &self.events;
        let n = e.len();
        let same = |what: &str, lens: &[usize], want: usize| -> Result<(), String> {
            match lens.iter().position(|&l| l != want) {
                Some(k) => Err(format!("{what}: column {k} has {} rows, not {want}", lens[k])),
                None => Ok(()),
            }
        };
        same(
            "events",
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
            n,
        )?;
        if let Some(r) = &self.raw_args {
            same("raw args", &[r.at.len(), r.len.len()], n)?;
            for i in 0..n {
                let (at, len) = (r.at[i], r.len[i]);
                if len != RawArgs::NOT_KEPT && at.saturating_add(u64::from(len)) > r.text.len() as u64 {
                    return Err(format!("raw args: row {i} ends beyond the arena"));
                }
            }
        }
        let normalized = !e.class.is_empty() || !e.step.is_empty() || !e.detail.is_empty();
        if normalized {
            same("events (normalized)", &[e.class.len(), e.detail.len(), e.step.len()], n)?;
        }
        let c = &self.comm;
        same(
            "comm",
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
            c.len(),
        )?;
        let l = &self.lanes;
        same(
            "lanes",
            &[l.tid.len(), l.kind.len(), l.name.len(), l.sort_index.len(), l.device.len(), l.stream.len()],
            l.len(),
        )?;
        let f = &self.flows;
        same(
            "flows",
            &[f.phase.len(), f.cat.len(), f.ts_ns.len(), f.lane.len(), f.bind_enclosing.len()],
            f.len(),
        )?;
        let k = &self.counters;
        same(
            "counters",
            &[k.series.len(), k.ts_ns.len(), k.value.len(), k.pid.len(), k.device.len()],
            k.len(),
        )?;
        let n_strings = strings.len();
        let string = |what: &str, i: usize, s: StrId| {
            if (s.0 as usize) < n_strings {
                Ok(())
            } else {
                Err(format!("{what} {i}: string id {} beyond the {n_strings} strings", s.0))
            }
        };
        for i in 0..n {
            if e.lane[i].0 as usize >= l.len() {
                return Err(format!("event {i}: lane {} beyond the {} lanes", e.lane[i].0, l.len()));
            }
            let a = e.args[i];
            if a != NONE_U32 {
                let Some(&back) = c.event.get(a as usize) else {
                    return Err(format!("event {i}: argument row {a} beyond the {} rows", c.len()));
                };
                if back.0 as usize != i {
                    return Err(format!("event {i}: its argument row {a} points at event {}", back.0));
                }
            }
            if e.dur_ns[i] < 0 {
                return Err(format!("event {i}: negative duration {}", e.dur_ns[i]));
            }
            string("event name", i, e.name[i])?;
            string("event category", i, e.cat[i])?;
            if normalized && i > 0 && (e.ts_ns[i - 1], -e.dur_ns[i - 1]) > (e.ts_ns[i], -e.dur_ns[i]) {
                return Err(format!("events {} and {i}: not sorted by start, longer first", i - 1));
            }
        }
        for (j, ev) in c.event.iter().enumerate() {
            if ev.0 as usize >= n {
                return Err(format!("argument row {j}: event {} beyond the {n} events", ev.0));
            }
            for s in [c.collective[j], c.dtype[j], c.pg_name[j], c.pg_desc[j], c.pg_ranks[j], c.input_dims[j]]
            {
                string("argument row", j, s)?;
            }
        }
        for (j, lane) in f.lane.iter().enumerate() {
            if lane.0 as usize >= l.len() {
                return Err(format!("flow {j}: lane {} beyond the {} lanes", lane.0, l.len()));
            }
        }
        for j in 0..l.len() {
            string("lane name", j, l.name[j])?;
        }
        for j in 0..k.len() {
            string("counter name", j, k.name[j])?;
            string("counter series", j, k.series[j])?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_broken_reference_is_named() {
        let mut t = RankTrace::default();
        let name = t.strings.intern("op");
        t.lanes.pid.push(IdKey::Int(1));
        t.lanes.tid.push(IdKey::Int(1));
        t.lanes.kind.push(LaneKind::Cpu);
        t.lanes.name.push(StrId::EMPTY);
        t.lanes.sort_index.push(0);
        t.lanes.device.push(-1);
        t.lanes.stream.push(-1);
        let e = &mut t.events;
        e.kind.push(EventKind::Slice);
        e.ts_ns.push(10);
        e.dur_ns.push(5);
        e.name.push(name);
        e.cat.push(StrId::EMPTY);
        e.lane.push(LaneId(0));
        e.correlation.push(NONE_U64);
        e.external_id.push(NONE_U64);
        e.args.push(NONE_U32);
        assert_eq!(t.check(&t.strings), Ok(()));
        let mut bad = t.clone();
        bad.events.lane[0] = LaneId(3);
        assert!(bad.check(&bad.strings).is_err_and(|m| m.contains("lane 3 beyond the 1 lanes")));
        let mut bad = t.clone();
        bad.events.args[0] = 0;
        assert!(bad.check(&bad.strings).is_err_and(|m| m.contains("argument row 0 beyond")));
        let mut bad = t.clone();
        bad.events.name[0] = StrId(99);
        assert!(bad.check(&bad.strings).is_err_and(|m| m.contains("string id 99")));
        let mut bad = t.clone();
        bad.events.dur_ns.pop();
        assert!(bad.check(&bad.strings).is_err_and(|m| m.starts_with("events: column 1")));
    }
}
