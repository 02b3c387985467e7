//! One event object's fields, read straight from the bytes into an [`Ev`] (and its `args` into
//! [`Args`]): strings interned, numbers and times range-checked, no tree built.

use super::*;

/// Arguments kept from one event's `args`.
#[derive(Debug, Default, Clone)]
pub(super) struct Args {
    pub(super) correlation: Option<i64>,
    pub(super) external_id: Option<i64>,
    pub(super) stream: Option<i64>,
    pub(super) device: Option<i64>,
    pub(super) collective: Option<StrId>,
    pub(super) in_nelems: Option<i64>,
    pub(super) out_nelems: Option<i64>,
    pub(super) in_bytes: Option<i64>,
    pub(super) out_bytes: Option<i64>,
    pub(super) dtype: Option<StrId>,
    pub(super) group_size: Option<i64>,
    pub(super) pg_name: Option<StrId>,
    pub(super) pg_desc: Option<StrId>,
    pub(super) pg_ranks: Option<StrId>,
    pub(super) seq: Option<i64>,
    /// `Src Rank` / `Dst Rank` of a point-to-point op (`record_param_comms`: global ranks), or
    /// the peer and tag from the `Concrete Inputs` of `c10d::send` / `c10d::recv_`.
    pub(super) src_rank: Option<i64>,
    pub(super) dst_rank: Option<i64>,
    pub(super) tag: Option<i64>,
    pub(super) input_elems: Option<i64>,
    pub(super) input_type: Option<StrId>,
    /// `Input Dims` as text, of a [`ShapedOp`] only.
    pub(super) input_dims: Option<StrId>,
    /// The event has `Input Dims` at all (whatever its operator).
    pub(super) has_input_dims: bool,
    /// The caching allocator's `[memory]` instants (`profile_memory=True`): the change
    /// (`Bytes`), the totals after it (`Total Allocated`, `Total Reserved`; newer PyTorch) and
    /// the device (`Device Type`: 0 the host, 1 CUDA; `Device Id`).
    pub(super) mem_bytes: Option<i64>,
    pub(super) mem_allocated: Option<i64>,
    pub(super) mem_reserved: Option<i64>,
    pub(super) mem_device_type: Option<i64>,
    pub(super) mem_device_id: Option<i64>,
    // Metadata (`M`) event arguments.
    pub(super) m_name: Option<StrId>,
    pub(super) m_labels: Option<StrId>,
    pub(super) m_sort_index: Option<i64>,
}

impl Args {
    pub(super) fn has_comm(&self) -> bool {
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
            || self.input_dims.is_some()
    }
}

/// Names of the communication ops whose `Input Dims` size their message.
pub(super) const COMM_NAME_PREFIXES: &[&str] = &[
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
pub(super) struct Ev {
    pub(super) ph: u8,
    pub(super) ph_other: Option<String>,
    pub(super) name: Option<StrId>,
    pub(super) cat: Option<StrId>,
    pub(super) pid: Option<IdKey>,
    pub(super) tid: Option<IdKey>,
    pub(super) ts: Option<i64>,
    pub(super) dur: Option<i64>,
    pub(super) ts_bad: bool,
    pub(super) id: Option<u64>,
    pub(super) bp_e: bool,
    pub(super) args: Args,
    /// Byte range of `args` when `ph` was not yet known there (re-read for counters).
    pub(super) args_span: Option<(usize, usize)>,
    /// Byte range of `args`, whatever `ph` (what [`TraceParser::keep_args`] copies).
    pub(super) raw_span: Option<(usize, usize)>,
}

impl TraceParser {
    pub(super) fn intern(&mut self, s: Str<'_>, at: u64) -> StrId {
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
    pub(super) fn read_str(&mut self, buf: &[u8], pos: &mut usize, base: u64) -> Res<Option<StrId>> {
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

    pub(super) fn bare_word(&mut self, t: &[u8], at: u64) {
        let w = String::from_utf8_lossy(&t[..t.len().min(40)]).into_owned();
        self.diag(DiagKind::BareWord, Some(at), || {
            format!("bare word `{w}` where a JSON value belongs; read as null")
        });
    }

    /// Reads a number scaled by `10^scale` (strings holding numbers are accepted too).
    pub(super) fn read_num(
        &mut self,
        buf: &[u8],
        pos: &mut usize,
        base: u64,
        scale: i32,
    ) -> Res<Option<i64>> {
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
            c => {
                // Most numbers are plain: read in one pass.
                if c == b'-' || c.is_ascii_digit() {
                    if let Some(v) = u32::try_from(scale).ok().and_then(|s| json::plain_number(buf, pos, s)) {
                        return Ok(Some(v));
                    }
                }
                (json::scalar(buf, pos)?, false)
            }
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
    pub(super) fn read_time(
        &mut self,
        buf: &[u8],
        pos: &mut usize,
        base: u64,
        key: &str,
    ) -> Res<Option<i64>> {
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

    pub(super) fn read_id_key(&mut self, buf: &[u8], pos: &mut usize, base: u64) -> Res<Option<IdKey>> {
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
    pub(super) fn read_flow_id(&mut self, buf: &[u8], pos: &mut usize, base: u64) -> Res<Option<u64>> {
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
    pub(super) fn event(&mut self, buf: &[u8], pos: &mut usize, base: u64) -> Res<()> {
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
                    let s = *pos;
                    if ev.ph == b'C' {
                        self.counter_args(buf, pos, base)?;
                    } else {
                        let s = *pos;
                        self.args(buf, pos, base, ev.name, &mut ev.args)?;
                        if ev.ph == 0 && ev.ph_other.is_none() {
                            ev.args_span = Some((s, *pos));
                        }
                    }
                    ev.raw_span = Some((s, *pos));
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
        let at = base + start as u64;
        if self.out.raw_args.is_some() {
            self.capture_args(&ev, buf, at);
        }
        self.commit(ev, at);
        // Args captured for an event that made no row (no `ts`, say) are given back.
        if let (Some((from, _)), Some(r)) = (self.cur_args.take(), &mut self.out.raw_args) {
            r.text.truncate(from as usize);
        }
        Ok(())
    }

    /// Copies the event's `args` into the trace's arena for the row it is about to make
    /// ([`crate::model::raw_args`]); counted when they cannot be kept or were repaired.
    fn capture_args(&mut self, ev: &Ev, buf: &[u8], at: u64) {
        use crate::model::raw_args::{capture, Captured};
        if ev.ph_other.is_some() || !matches!(ev.ph, b'X' | b'B' | b'E' | b'i' | b'I') {
            return;
        }
        let Some(r) = &mut self.out.raw_args else { return };
        let Some((s, e)) = ev.raw_span else {
            self.cur_args = Some((r.text.len() as u64, 0));
            return;
        };
        let (span, how) = capture(&mut r.text, buf.get(s..e).unwrap_or_default());
        self.cur_args = span;
        match how {
            Captured::Kept => {}
            Captured::Repaired => self.diag(DiagKind::ArgsRepaired, Some(at), || {
                "an event's args had invalid UTF-8 or raw control characters in a string; \
                 repaired in the kept copy"
                    .to_string()
            }),
            Captured::NotAnObject => self.diag(DiagKind::ArgsNotKept, Some(at), || {
                "an event's `args` is not an object; the exports write rankscope's args alone for it"
                    .to_string()
            }),
        }
    }

    /// Reads the kept keys of `args`; skips the rest.
    #[inline]
    pub(super) fn args(
        &mut self,
        buf: &[u8],
        pos: &mut usize,
        base: u64,
        name: Option<StrId>,
        a: &mut Args,
    ) -> Res<()> {
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
                b"Input Dims" if self.is_shaped_op(name) => {
                    a.has_input_dims = true;
                    a.input_dims = self.dims_text(buf, pos)?;
                }
                b"Input Dims" => {
                    a.has_input_dims = true;
                    a.input_elems = self.first_dims_product(buf, pos, base)?;
                }
                b"Input type" => a.input_type = self.first_string(buf, pos, base)?,
                b"Bytes" => a.mem_bytes = self.read_num(buf, pos, base, 0)?,
                b"Total Allocated" => a.mem_allocated = self.read_num(buf, pos, base, 0)?,
                b"Total Reserved" => a.mem_reserved = self.read_num(buf, pos, base, 0)?,
                b"Device Type" => a.mem_device_type = self.read_num(buf, pos, base, 0)?,
                b"Device Id" => a.mem_device_id = self.read_num(buf, pos, base, 0)?,
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
    pub(super) fn is_p2p_op(&self, name: Option<StrId>) -> bool {
        name.is_some_and(|n| matches!(self.out.strings.get(n), "c10d::send" | "c10d::recv_"))
    }

    /// Whether `name` is a [`ShapedOp`], remembered per string id (one lookup per name, not per
    /// event: `Input Dims` is on every operator recorded with shapes).
    pub(super) fn is_shaped_op(&mut self, name: Option<StrId>) -> bool {
        let Some(n) = name else { return false };
        let k = n.0 as usize;
        if self.shaped.len() <= k {
            self.shaped.resize(k + 1, 0);
        }
        if self.shaped[k] == 0 {
            self.shaped[k] = if ShapedOp::of(self.out.strings.get(n)).is_some() { 1 } else { 2 };
        }
        self.shaped[k] == 1
    }

    /// A value (`Input Dims`) as its text without blanks, interned; `None` when it is not a list
    /// or longer than a string may be (`Limits::string_bytes`: no shape of a product is).
    pub(super) fn dims_text(&mut self, buf: &[u8], pos: &mut usize) -> Res<Option<StrId>> {
        if json::peek(buf, pos)? != b'[' {
            return json::skip_value(buf, pos).map(|_| None);
        }
        let at = *pos;
        json::skip_value(buf, pos)?;
        if *pos - at > self.limits.string_bytes {
            return Ok(None);
        }
        self.scratch.clear();
        self.scratch.extend(buf[at..*pos].iter().copied().filter(|c| !json::is_ws(*c)));
        Ok(Some(self.out.strings.intern_bytes(&self.scratch).0))
    }

    /// The third and fourth elements of `Concrete Inputs` as integers (`["", "", "2", "0"]`):
    /// the peer's rank in the op's process group and the tag.
    pub(super) fn peer_and_tag(
        &mut self,
        buf: &[u8],
        pos: &mut usize,
        base: u64,
    ) -> Res<(Option<i64>, Option<i64>)> {
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
    pub(super) fn ranks_text(&mut self, buf: &[u8], pos: &mut usize, base: u64) -> Res<Option<StrId>> {
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

    /// The elements of the first input in `Input Dims` that has any (`[[394241]]`,
    /// `[[2, 3], []]`): the product of its dims, or for a TensorList (`c10d::allreduce_`:
    /// `[[[930832]], [], ...]`) the elements of all its tensors. Leading inputs with no dims
    /// are passed over when a later one has some: `c10d::allgather_` records its output list
    /// first, as `[]` (`[[], [[2]], [], [], []]`). `[[]]` alone is a 0-dim tensor, one element
    /// (the caller only sizes it with a tensor dtype).
    pub(super) fn first_dims_product(&mut self, buf: &[u8], pos: &mut usize, base: u64) -> Res<Option<i64>> {
        if json::peek(buf, pos)? != b'[' {
            return json::skip_value(buf, pos).map(|_| None);
        }
        let outer_start = *pos;
        *pos += 1;
        if json::peek(buf, pos)? != b'[' {
            *pos = outer_start;
            return json::skip_value(buf, pos).map(|_| None);
        }
        // The first input's figure, kept while it has no dims and no later input has any.
        let mut found: Option<(bool, Option<i64>)> = None;
        // After an element only `,` or `]` may come.
        let mut after_element = false;
        loop {
            match json::peek(buf, pos)? {
                b']' => {
                    *pos += 1;
                    break;
                }
                b',' => {
                    *pos += 1;
                    after_element = false;
                }
                _ if after_element => return Err(Stop::Bad(*pos)),
                b'[' if found.is_none_or(|(empty, _)| empty) => {
                    let (empty, v) = self.dims_elements(buf, pos, base)?;
                    if found.is_none() || !empty {
                        found = Some((empty, v));
                    }
                    after_element = true;
                }
                _ => {
                    json::skip_value(buf, pos)?;
                    after_element = true;
                }
            }
        }
        Ok(found.and_then(|(_, v)| v))
    }

    /// One input of `Input Dims` at `*pos` (a `[`): whether it has no dims at all (`[]`), and
    /// its elements: the product of its dims, or a TensorList's total; `None` when a dim is not
    /// a number.
    fn dims_elements(&mut self, buf: &[u8], pos: &mut usize, base: u64) -> Res<(bool, Option<i64>)> {
        *pos += 1;
        let mut product: i64 = 1;
        let mut empty = true;
        let mut list_total: Option<i64> = None;
        loop {
            match json::peek(buf, pos)? {
                b']' => {
                    *pos += 1;
                    break;
                }
                b',' => *pos += 1,
                b'[' => {
                    empty = false;
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
                _ => {
                    empty = false;
                    match self.read_num(buf, pos, base, 0)? {
                        Some(v) => product = product.saturating_mul(v.max(0)),
                        None => product = -1,
                    }
                }
            }
        }
        if let Some(t) = list_total {
            product = t;
        }
        Ok((empty, (product >= 0).then_some(product)))
    }

    /// The first string of a list such as `Input type: ["float", "Scalar"]`.
    pub(super) fn first_string(&mut self, buf: &[u8], pos: &mut usize, base: u64) -> Res<Option<StrId>> {
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
    pub(super) fn counter_args(&mut self, buf: &[u8], pos: &mut usize, base: u64) -> Res<()> {
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
}
