//! The row builder: a parsed [`Ev`] becomes rows of the columnar tables (slices, `B`/`E` pairs
//! matched per lane, flows, counters, lanes and their metadata).

use super::*;

#[derive(Debug, Clone, Copy)]
pub(super) struct OpenSlice {
    pub(super) ts: i64,
    pub(super) name: StrId,
    pub(super) cat: StrId,
    pub(super) correlation: u64,
    pub(super) external_id: u64,
    pub(super) args: u32,
    pub(super) offset: u64,
    /// Its source args in the arena, when kept ([`TraceParser::keep_args`]).
    pub(super) raw: Option<(u64, u32)>,
}

impl TraceParser {
    pub(super) fn lane(&mut self, pid: IdKey, tid: IdKey) -> LaneId {
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

    pub(super) fn push_args(&mut self, ev_row: u32, a: &Args, name: StrId) -> u32 {
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
            && a.dst_rank.is_none()
            && a.input_dims.is_none();
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
        c.input_dims.push(a.input_dims.unwrap_or(StrId::EMPTY));
        row
    }

    #[allow(clippy::too_many_arguments)]
    pub(super) fn push_row(
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
        if let Some(r) = &mut self.out.raw_args {
            r.push(self.cur_args.take());
        }
        if let Some(t) = self.lane_last_ts.get_mut(lane.0 as usize) {
            *t = (*t).max(ts.saturating_add(dur));
        }
        row
    }

    /// Turns a parsed event into rows, by phase.
    pub(super) fn commit(&mut self, ev: Ev, offset: u64) {
        self.out.counts.total += 1;
        self.out.counts.with_input_dims += u64::from(ev.args.has_input_dims);
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
                if ev.args.mem_bytes.is_some() && self.out.strings.get(name) == MEMORY_EVENT {
                    self.memory_sample(name, ts.unwrap_or(0), pid, &ev.args);
                }
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
                    raw: self.cur_args.take(),
                });
                if let Some(t) = self.lane_last_ts.get_mut(lane.0 as usize) {
                    *t = (*t).max(ts.unwrap_or(0));
                }
            }
            b'E' => {
                let lane = self.lane(pid, tid);
                // The slice keeps its `B`'s args; an `E`'s own are said to be lost.
                if let (Some((from, _)), Some(r)) = (self.cur_args.take(), &mut self.out.raw_args) {
                    let from = from as usize;
                    let empty = r.text.get(from..).is_none_or(|t| t.iter().all(|b| b"{} \t\r\n".contains(b)));
                    r.text.truncate(from);
                    if !empty {
                        self.diag(DiagKind::ArgsNotKept, Some(offset), || {
                            "the args of an `E` event are not kept (its `B`'s are)".to_string()
                        });
                    }
                }
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
                    c.device.push(HOST_MEMORY);
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

    /// A `[memory]` instant as counter samples of its device: `Bytes`, and the totals after it
    /// where the trace has them.
    fn memory_sample(&mut self, name: StrId, ts: i64, pid: IdKey, a: &Args) {
        // Device Type 0 is the host; any other type with an index is that device.
        let device = match (a.mem_device_type, a.mem_device_id) {
            (Some(t), Some(d)) if t != 0 && d >= 0 => i32::try_from(d).unwrap_or(HOST_MEMORY),
            _ => HOST_MEMORY,
        };
        let series = [
            ("Bytes", a.mem_bytes),
            ("Total Allocated", a.mem_allocated),
            ("Total Reserved", a.mem_reserved),
        ];
        for (key, v) in series {
            let Some(v) = v else { continue };
            let series = self.out.strings.intern(key);
            let c = &mut self.out.counters;
            c.name.push(name);
            c.series.push(series);
            c.ts_ns.push(ts);
            c.value.push(v as f64);
            c.pid.push(pid);
            c.device.push(device);
        }
    }

    pub(super) fn note_lane_args(&mut self, lane: LaneId, a: &Args) {
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

    pub(super) fn close_slice(&mut self, o: OpenSlice, dur: i64, lane: LaneId) {
        self.cur_args = o.raw;
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
    pub(super) fn close_open_slices(&mut self) {
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

    pub(super) fn metadata(&mut self, ev: &Ev, pid: IdKey, tid: IdKey) {
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
