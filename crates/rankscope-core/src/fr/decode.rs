//! From bytes to [`FrDump`]: the pickle (or the JSON, built into the same arena) walked along
//! the dump's known shape only, never recursively, under a work budget.
//!
//! The walk follows fixed paths (top dict → `entries` list → entry dict → sizes list → shape
//! list → int), so cycles in the arena cannot loop it and nesting cannot overflow the stack.
//! Shared references can still multiply work (a list of the same big entry a million times),
//! so every value read costs one unit (and a string one more per 64 bytes) out of a budget of
//! four per opcode executed plus 64 Ki: a genuine dump reads each value about once (frames are
//! decoded once per distinct frame), a hostile one runs out and is refused.

use std::collections::BTreeMap;

use serde::de::{DeserializeSeed, Deserializer, MapAccess, SeqAccess, Visitor};

use super::pickle::{self, Builder, Node, NodeId, Pickle};
use super::*;

const MAX_WORLD_SIZE: i64 = MAX_RANK as i64;

/// The most a gzip-compressed dump may inflate to (a part's limit: real dumps are tens of MB).
const MAX_INFLATED: u64 = 1 << 30;

pub(super) fn read(file: &str, bytes: &[u8]) -> Result<FrDump, FrError> {
    if bytes.starts_with(&[0x1f, 0x8b]) {
        let mut out = Vec::new();
        let mut too_big = false;
        let mut z = crate::parse::gzip::Gunzip::default();
        // Fed 4 KiB at a time: once the first 64 KiB have inflated, they must look like a dump
        // ([`sniff`]) before the rest is inflated (a 2 MB gzip of something else inflated whole,
        // 2.1 GB, only to be told "not a dump").
        // As a part's: 256 times the file, 64 MiB at least (a dump's JSON or pickle shrinks far
        // less; deflate allows about 1,000 to 1).
        let cap = MAX_INFLATED.min((bytes.len() as u64).saturating_mul(256).max(64 << 20));
        let mut sniffed = false;
        for chunk in bytes.chunks(4 << 10) {
            z.feed(chunk, &mut |b| {
                if out.len() as u64 + b.len() as u64 > cap {
                    too_big = true;
                } else {
                    out.extend_from_slice(b);
                }
            });
            if !sniffed && out.len() >= 64 << 10 {
                sniffed = true;
                if !sniff(&out[..64 << 10]) {
                    return Err(FrError {
                        file: file.into(),
                        offset: Some(0),
                        what: "not a Flight Recorder dump (its first 64 KiB inflated are neither a dump's pickle nor its JSON)".into(),
                    });
                }
            }
            if too_big {
                break;
            }
        }
        let cut = z.finish();
        if let Some((at, what)) = z.fault.clone() {
            return Err(FrError { file: file.into(), offset: Some(at), what: format!("gzip: {what}") });
        }
        if let Some(what) = cut {
            return Err(FrError {
                file: file.into(),
                offset: Some(z.input_bytes),
                what: format!("gzip: {what}"),
            });
        }
        if too_big {
            return Err(FrError {
                file: file.into(),
                offset: None,
                what: format!(
                    "inflates beyond {cap} bytes (256 times the file, 64 MiB at least, 1 GiB at most)"
                ),
            });
        }
        return read(file, &out);
    }
    let err = |offset: Option<u64>, what: String| FrError { file: file.to_string(), offset, what };
    let (tree, format) = if pickle::looks_like_pickle(bytes) {
        (pickle::parse(bytes).map_err(|e| err(Some(e.offset as u64), e.what))?, DumpFormat::Pickle)
    } else {
        let first = bytes.iter().position(|b| !b.is_ascii_whitespace());
        if first.and_then(|i| bytes.get(i)) != Some(&b'{') && !bytes.starts_with(&[0xEF, 0xBB, 0xBF]) {
            return Err(err(
                Some(0),
                "not a Flight Recorder dump (neither a pickle nor a JSON object)".into(),
            ));
        }
        let text = bytes.strip_prefix(&[0xEF, 0xBB, 0xBF][..]).unwrap_or(bytes);
        match json_tree(text) {
            Ok(t) => (t, DumpFormat::Json),
            // Python's `json` writes NaN and Infinity, and a number beyond f64 (`1e400`) is
            // refused by serde_json: each such number is read as null (a field not seen), said
            // once, and the dump's entries are kept.
            Err(first) => match non_finite_as_null(text) {
                Some((clean, n, at)) => {
                    let tree = json_tree(&clean).map_err(|_| err(first.0, first.1))?;
                    let mut dec = Dec::new(&tree, bytes.len());
                    dec.diags.add_n(DiagKind::OutOfRange, n, Some(at), || {
                        "a number that is not finite (NaN, Infinity, beyond 1.8e308): read as null".into()
                    });
                    return dec.dump(file, DumpFormat::Json);
                }
                None => return Err(err(first.0, first.1)),
            },
        }
    };
    Dec::new(&tree, bytes.len()).dump(file, format)
}

/// The JSON text with every non-finite number outside strings (`NaN`, `Infinity`, `-Infinity`,
/// a literal beyond f64 such as `1e400`) replaced by `null`, with how many there were and the
/// byte offset of the first; `None` when there is none.
fn non_finite_as_null(text: &[u8]) -> Option<(Vec<u8>, u64, u64)> {
    let mut out = Vec::with_capacity(text.len());
    let (mut n, mut first) = (0u64, 0u64);
    let mut i = 0;
    while i < text.len() {
        let c = text[i];
        if c == b'"' {
            // Copy the string whole, escapes included.
            let start = i;
            i += 1;
            while i < text.len() && text[i] != b'"' {
                i += if text[i] == b'\\' { 2 } else { 1 };
            }
            i = (i + 1).min(text.len());
            out.extend_from_slice(&text[start..i]);
            continue;
        }
        let word = |w: &[u8]| text[i..].starts_with(w);
        let len = if word(b"-Infinity") {
            9
        } else if word(b"Infinity") {
            8
        } else if word(b"NaN") || word(b"-NaN") {
            if word(b"-") {
                4
            } else {
                3
            }
        } else if c == b'-' || c.is_ascii_digit() {
            let end = text[i..]
                .iter()
                .position(|b| !(b.is_ascii_digit() || matches!(b, b'-' | b'+' | b'.' | b'e' | b'E')))
                .map_or(text.len(), |k| i + k);
            let num = std::str::from_utf8(&text[i..end]).ok().and_then(|t| t.parse::<f64>().ok());
            if num.is_some_and(|v| !v.is_finite()) {
                end - i
            } else {
                out.extend_from_slice(&text[i..end]);
                i = end;
                continue;
            }
        } else {
            out.push(c);
            i += 1;
            continue;
        };
        if n == 0 {
            first = i as u64;
        }
        n += 1;
        out.extend_from_slice(b"null");
        i += len;
    }
    (n > 0).then_some((out, n, first))
}

/// Builds the arena from JSON text (serde_json's parser: its depth limit of 128 applies).
fn json_tree(text: &[u8]) -> Result<Pickle, (Option<u64>, String)> {
    let mut b = Builder::default();
    let mut de = serde_json::Deserializer::from_slice(text);
    let root = Seed(&mut b)
        .deserialize(&mut de)
        .map_err(|e| (line_col_offset(text, e.line(), e.column()), e.to_string()))?;
    de.end().map_err(|e| (line_col_offset(text, e.line(), e.column()), e.to_string()))?;
    Ok(b.finish(root))
}

/// Byte offset of a 1-based (line, column) position.
fn line_col_offset(text: &[u8], line: usize, col: usize) -> Option<u64> {
    let mut l = 1;
    for (i, &c) in text.iter().enumerate() {
        if l == line {
            return Some((i + col.saturating_sub(1)).min(text.len()) as u64);
        }
        if c == b'\n' {
            l += 1;
        }
    }
    None
}

struct Seed<'b>(&'b mut Builder);

impl<'de> DeserializeSeed<'de> for Seed<'_> {
    type Value = NodeId;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<NodeId, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Seed<'_> {
    type Value = NodeId;
    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("a JSON value")
    }
    fn visit_unit<E>(self) -> Result<NodeId, E> {
        Ok(self.0.push(Node::None))
    }
    fn visit_bool<E>(self, v: bool) -> Result<NodeId, E> {
        Ok(self.0.push(Node::Bool(v)))
    }
    fn visit_i64<E>(self, v: i64) -> Result<NodeId, E> {
        Ok(self.0.push(Node::Int(v)))
    }
    fn visit_u64<E>(self, v: u64) -> Result<NodeId, E> {
        Ok(self.0.push(i64::try_from(v).map_or(Node::Float(v as f64), Node::Int)))
    }
    fn visit_f64<E>(self, v: f64) -> Result<NodeId, E> {
        Ok(self.0.push(Node::Float(v)))
    }
    fn visit_str<E>(self, v: &str) -> Result<NodeId, E> {
        Ok(self.0.push(Node::Str(v.to_string())))
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut a: A) -> Result<NodeId, A::Error> {
        let id = self.0.push(Node::None);
        let mut items = Vec::new();
        while let Some(v) = a.next_element_seed(Seed(&mut *self.0))? {
            items.push(v);
        }
        self.0.set(id, Node::List(items));
        Ok(id)
    }
    fn visit_map<A: MapAccess<'de>>(self, mut a: A) -> Result<NodeId, A::Error> {
        let id = self.0.push(Node::None);
        let mut items = Vec::new();
        while let Some(k) = a.next_key_seed(Seed(&mut *self.0))? {
            let v = a.next_value_seed(Seed(&mut *self.0))?;
            items.push((k, v));
        }
        self.0.set(id, Node::Dict(items));
        Ok(id)
    }
}

struct Dec<'t> {
    t: &'t Pickle,
    budget: u64,
    input_len: usize,
    diags: Diagnostics,
    frames: Vec<Frame>,
    frame_by_node: BTreeMap<NodeId, u32>,
    frame_by_value: BTreeMap<Frame, u32>,
}

/// The budget ran out.
struct Exhausted;

type R<T> = Result<T, Exhausted>;

impl<'t> Dec<'t> {
    /// The budget: four per opcode (per value in JSON), 64 Ki, and one per 16 input bytes (a
    /// string costs one per 64 of its bytes, and is in the input once: a 10 MB name is read,
    /// not taken for shared references).
    fn budget(t: &Pickle, input_len: usize) -> u64 {
        t.ops.saturating_mul(4).saturating_add(64 << 10).saturating_add(input_len as u64 / 16)
    }

    fn new(t: &'t Pickle, input_len: usize) -> Self {
        Dec {
            t,
            budget: Self::budget(t, input_len),
            input_len,
            diags: Diagnostics::default(),
            frames: Vec::new(),
            frame_by_node: BTreeMap::new(),
            frame_by_value: BTreeMap::new(),
        }
    }

    fn charge(&mut self, n: u64) -> R<()> {
        if self.budget < n {
            return Err(Exhausted);
        }
        self.budget -= n;
        Ok(())
    }

    fn node(&mut self, id: NodeId) -> R<&'t Node> {
        self.charge(1)?;
        Ok(self.t.node(id))
    }

    /// An integer; a string of digits too (the JSON form writes `pg_status` numbers as text).
    fn int(&mut self, id: NodeId) -> R<Option<i64>> {
        Ok(match self.node(id)? {
            Node::Int(v) => Some(*v),
            Node::Bool(b) => Some(*b as i64),
            Node::Float(f) if f.fract() == 0.0 && f.abs() < 9.0e18 => Some(*f as i64),
            Node::Str(s) => s.trim().parse().ok(),
            _ => None,
        })
    }

    fn float(&mut self, id: NodeId) -> R<Option<f64>> {
        Ok(match self.node(id)? {
            Node::Float(v) => Some(*v),
            Node::Int(v) => Some(*v as f64),
            _ => None,
        })
    }

    fn string(&mut self, id: NodeId) -> R<Option<String>> {
        let n = self.node(id)?;
        match n {
            Node::Str(s) => {
                self.charge(s.len() as u64 / 64)?;
                Ok(Some(s.clone()))
            }
            Node::Int(v) => Ok(Some(v.to_string())),
            _ => Ok(None),
        }
    }

    fn seq(&mut self, id: NodeId) -> R<Option<&'t [NodeId]>> {
        Ok(match self.node(id)? {
            Node::List(v) | Node::Tuple(v) => Some(v),
            _ => None,
        })
    }

    fn get(&mut self, dict: NodeId, key: &str) -> R<Option<NodeId>> {
        let Some(items) = self.t.as_dict(dict) else { return Ok(None) };
        self.charge(items.len() as u64 / 4 + 1)?;
        Ok(self.t.get(dict, key))
    }

    fn strings(&mut self, id: NodeId) -> R<Option<Vec<String>>> {
        let Some(items) = self.seq(id)? else { return Ok(None) };
        let mut out = Vec::new();
        for &i in items {
            match self.string(i)? {
                Some(s) => out.push(s),
                None => return Ok(None),
            }
        }
        Ok(Some(out))
    }

    /// A list of shapes: `[[8, 16], []]`.
    fn sizes(&mut self, id: NodeId) -> R<Option<Vec<Vec<i64>>>> {
        let Some(items) = self.seq(id)? else { return Ok(None) };
        let mut out = Vec::new();
        for &i in items {
            let Some(dims) = self.seq(i)? else { return Ok(None) };
            let mut shape = Vec::new();
            for &d in dims {
                match self.int(d)? {
                    Some(v) => shape.push(v),
                    None => return Ok(None),
                }
            }
            out.push(shape);
        }
        Ok(Some(out))
    }

    fn frame(&mut self, id: NodeId) -> R<Option<u32>> {
        if let Some(&k) = self.frame_by_node.get(&id) {
            self.charge(1)?;
            return Ok(Some(k));
        }
        if self.t.as_dict(id).is_none() {
            return Ok(None);
        }
        let mut f = Frame::default();
        if let Some(v) = self.get(id, "name")? {
            f.name = self.string(v)?.unwrap_or_default();
        }
        if let Some(v) = self.get(id, "filename")? {
            f.filename = self.string(v)?.unwrap_or_default();
        }
        if let Some(v) = self.get(id, "line")? {
            f.line = self.int(v)?.unwrap_or(0);
        }
        let next = self.frames.len() as u32;
        let k = *self.frame_by_value.entry(f.clone()).or_insert(next);
        if k == next {
            self.frames.push(f);
        }
        self.frame_by_node.insert(id, k);
        Ok(Some(k))
    }

    fn dump(mut self, file: &str, format: DumpFormat) -> Result<FrDump, FrError> {
        let over = |d: &Dec<'_>| FrError {
            file: file.to_string(),
            offset: None,
            what: format!(
                "the dump's shared references expand beyond {} values: not a dump torch wrote",
                Dec::budget(d.t, d.input_len)
            ),
        };
        match self.dump_inner(file, format) {
            Ok(r) => r,
            Err(Exhausted) => Err(over(&self)),
        }
    }

    fn dump_inner(&mut self, file: &str, format: DumpFormat) -> R<Result<FrDump, FrError>> {
        let root = self.t.root();
        let not_a_dump = |what: &str| FrError {
            file: file.to_string(),
            offset: Some(0),
            what: format!("not a Flight Recorder dump: {what}"),
        };
        if self.t.as_dict(root).is_none() {
            return Ok(Err(not_a_dump("the top level is not a dict")));
        }
        let version = match self.get(root, "version")? {
            Some(v) => match self.node(v)? {
                Node::Str(s) => s.clone(),
                Node::Int(i) => i.to_string(),
                Node::Float(f) => f.to_string(),
                _ => return Ok(Err(not_a_dump("`version` is not a string"))),
            },
            None => return Ok(Err(not_a_dump("no `version`"))),
        };
        let entries_id = self.get(root, "entries")?;
        let pg_config_id = self.get(root, "pg_config")?;
        let pg_status_id = self.get(root, "pg_status")?;
        if entries_id.is_none() && pg_config_id.is_none() && pg_status_id.is_none() {
            return Ok(Err(not_a_dump("none of `entries`, `pg_config`, `pg_status`")));
        }
        let comm_lib_version = match self.get(root, "comm_lib_version")? {
            Some(v) => self.string(v)?.unwrap_or_default(),
            None => String::new(),
        };
        let rank = match self.get(root, "rank")? {
            Some(v) => match self.int(v)? {
                Some(r) if (0..MAX_WORLD_SIZE).contains(&r) => u32::try_from(r).ok(),
                Some(r) => {
                    // A claim nothing else bears out sizes nothing: the rank is decided as if
                    // the dump had none.
                    self.diags.add(DiagKind::OutOfRange, self.t.offset(v), || {
                        format!("`rank` {r} is not a rank (0 to {}); ignored", MAX_WORLD_SIZE - 1)
                    });
                    None
                }
                None => None,
            },
            None => None,
        };
        let pg_config = match pg_config_id {
            Some(id) => self.pg_config(id)?,
            None => Vec::new(),
        };
        let pg_status = match pg_status_id {
            Some(id) => self.pg_status(id)?,
            None => Vec::new(),
        };
        let mut entries = Vec::new();
        if let Some(id) = entries_id {
            match self.seq(id)? {
                Some(items) => {
                    for &e in items {
                        if let Some(entry) = self.entry(e)? {
                            entries.push(entry);
                        }
                    }
                }
                None => self.diags.add(DiagKind::BadMetadata, self.t.offset(id), || {
                    "`entries` is not a list: no entries read".to_string()
                }),
            }
        }
        let frames = std::mem::take(&mut self.frames);
        let diagnostics = std::mem::take(&mut self.diags).sorted();
        Ok(Ok(FrDump {
            file: file.to_string(),
            format,
            version,
            rank,
            comm_lib_version,
            pg_config,
            pg_status,
            frames,
            entries,
            diagnostics,
        }))
    }

    fn pg_config(&mut self, id: NodeId) -> R<Vec<PgConfig>> {
        let mut out = Vec::new();
        let Some(items) = self.t.as_dict(id) else {
            self.diags.add(DiagKind::BadMetadata, self.t.offset(id), || "`pg_config` is not a dict".into());
            return Ok(out);
        };
        self.charge(items.len() as u64)?;
        for &(k, v) in items {
            let key = self.string(k)?.unwrap_or_default();
            let mut c = PgConfig { key: key.clone(), name: key, desc: String::new(), ranks: Vec::new() };
            if let Some(n) = self.get(v, "name")? {
                c.name = self.string(n)?.unwrap_or_default();
            }
            if let Some(d) = self.get(v, "desc")? {
                c.desc = self.string(d)?.unwrap_or_default();
            }
            if let Some(r) = self.get(v, "ranks")? {
                let listed = match self.node(r)? {
                    Node::Str(s) => {
                        self.charge(s.len() as u64 / 64)?;
                        parse_ranks(s)
                    }
                    Node::List(items) | Node::Tuple(items) => {
                        let mut v = Vec::new();
                        for &i in items {
                            v.extend(self.int(i)?);
                        }
                        v
                    }
                    _ => Vec::new(),
                };
                // A listed rank is a claim on the world's size: one beyond the limit is
                // dropped (said once per group), never filled up to.
                let n = listed.len();
                c.ranks = listed
                    .into_iter()
                    .filter_map(|x| u32::try_from(x).ok().filter(|&x| x < MAX_RANK))
                    .collect();
                let dropped = (n - c.ranks.len()) as u64;
                if dropped > 0 {
                    let name = c.key.clone();
                    self.diags.add_n(DiagKind::OutOfRange, dropped, self.t.offset(r), || {
                        format!(
                            "`pg_config` group `{name}` lists ranks that are not ranks (0 to {}): dropped",
                            MAX_RANK - 1
                        )
                    });
                }
            }
            out.push(c);
        }
        out.sort_by(|a, b| a.key.cmp(&b.key));
        Ok(out)
    }

    fn pg_status(&mut self, id: NodeId) -> R<Vec<PgStatus>> {
        let mut out = Vec::new();
        let Some(items) = self.t.as_dict(id) else {
            self.diags.add(DiagKind::BadMetadata, self.t.offset(id), || "`pg_status` is not a dict".into());
            return Ok(out);
        };
        self.charge(items.len() as u64)?;
        for &(k, v) in items {
            let pg_id = self.string(k)?.unwrap_or_default();
            let field = |d: &mut Self, name: &str| -> R<Option<i64>> {
                match d.get(v, name)? {
                    Some(x) => d.int(x),
                    None => Ok(None),
                }
            };
            let last_enqueued = field(self, "last_enqueued_collective")?;
            let last_started = field(self, "last_started_collective")?;
            let last_completed = field(self, "last_completed_collective")?;
            out.push(PgStatus { pg_id, last_enqueued, last_started, last_completed });
        }
        out.sort_by(|a, b| (a.pg_id.len(), &a.pg_id).cmp(&(b.pg_id.len(), &b.pg_id)));
        Ok(out)
    }

    /// One entry; `None` (counted) when it is not a dict or lacks its name or sequence number.
    fn entry(&mut self, id: NodeId) -> R<Option<Entry>> {
        let offset = self.t.offset(id);
        if self.t.as_dict(id).is_none() {
            self.diags.add(DiagKind::MalformedEvent, offset, || "an entry is not a dict: skipped".into());
            return Ok(None);
        }
        let name = match self.get(id, "profiling_name")? {
            Some(v) => self.string(v)?,
            None => None,
        };
        let seq = match self.get(id, "collective_seq_id")? {
            Some(v) => self.int(v)?,
            None => None,
        };
        let (Some(profiling_name), Some(collective_seq_id)) = (name, seq) else {
            self.diags.add(DiagKind::MalformedEvent, offset, || {
                "an entry without a readable `profiling_name` or `collective_seq_id`: skipped".into()
            });
            return Ok(None);
        };
        let mut bad: Vec<&'static str> = Vec::new();
        macro_rules! field {
            ($key:literal, $read:ident, $default:expr) => {
                match self.get(id, $key)? {
                    Some(v) => match self.$read(v)? {
                        Some(x) => Some(x),
                        None => {
                            // `None` is how the pickle says "not seen"; anything else is bad.
                            if !matches!(self.t.node(v), Node::None) {
                                bad.push($key);
                            }
                            $default
                        }
                    },
                    None => $default,
                }
            };
        }
        let record_id = field!("record_id", int, None).unwrap_or(-1);
        let pg_id = field!("pg_id", int, None).unwrap_or(-1);
        let (pg_name, pg_desc) = match self.get(id, "process_group")? {
            Some(v) => match self.seq(v)? {
                Some(items) => {
                    let a = match items.first() {
                        Some(&x) => self.string(x)?.unwrap_or_default(),
                        None => String::new(),
                    };
                    let b = match items.get(1) {
                        Some(&x) => self.string(x)?.unwrap_or_default(),
                        None => String::new(),
                    };
                    (a, b)
                }
                None => {
                    bad.push("process_group");
                    (String::new(), String::new())
                }
            },
            None => (String::new(), String::new()),
        };
        let p2p_seq_id = field!("p2p_seq_id", int, None).unwrap_or(0);
        let op_id = field!("op_id", int, None).unwrap_or(0);
        let time_created_ns = field!("time_created_ns", int, None).unwrap_or(0);
        // JSON writes 0 for "not seen", the pickle None.
        let time_discovered_started_ns = field!("time_discovered_started_ns", int, None).filter(|&t| t > 0);
        let time_discovered_completed_ns =
            field!("time_discovered_completed_ns", int, None).filter(|&t| t > 0);
        let duration_ms = field!("duration_ms", float, None);
        let input_sizes = field!("input_sizes", sizes, None).unwrap_or_default();
        let input_dtypes = field!("input_dtypes", strings, None).unwrap_or_default();
        let output_sizes = field!("output_sizes", sizes, None).unwrap_or_default();
        let output_dtypes = field!("output_dtypes", strings, None).unwrap_or_default();
        let state = match field!("state", string, None).as_deref() {
            Some("scheduled") => State::Scheduled,
            Some("started") => State::Started,
            Some("completed") => State::Completed,
            _ => State::Unknown,
        };
        let is_p2p = field!("is_p2p", int, None).is_some_and(|v| v != 0);
        let retired = field!("retired", int, None).is_some_and(|v| v != 0);
        let timeout_ms = field!("timeout_ms", int, None);
        let thread_name = field!("thread_name", string, None).unwrap_or_default();
        let thread_id = field!("thread_id", string, None).unwrap_or_default();
        let mut frames = Vec::new();
        if let Some(v) = self.get(id, "frames")? {
            match self.seq(v)? {
                Some(items) => {
                    for &f in items {
                        match self.frame(f)? {
                            Some(k) => frames.push(k),
                            None => bad.push("frames"),
                        }
                    }
                }
                None => bad.push("frames"),
            }
        }
        bad.dedup();
        for key in bad {
            self.diags.add(DiagKind::BadMetadata, offset, || {
                format!("entry {record_id}: `{key}` has an unexpected type; read as empty")
            });
        }
        Ok(Some(Entry {
            record_id,
            pg_id,
            pg_name,
            pg_desc,
            collective_seq_id,
            p2p_seq_id,
            op_id,
            profiling_name,
            time_created_ns,
            time_discovered_started_ns,
            time_discovered_completed_ns,
            duration_ms,
            input_sizes,
            input_dtypes,
            output_sizes,
            output_dtypes,
            state,
            is_p2p,
            retired,
            timeout_ms,
            thread_name,
            thread_id,
            frames,
            offset,
        }))
    }
}

/// `"[0, 1, 2]"` → `[0, 1, 2]` (every run of digits; one too long for `i64` as `i64::MAX`,
/// which the caller drops as out of range).
fn parse_ranks(s: &str) -> Vec<i64> {
    s.split(|c: char| !c.is_ascii_digit())
        .filter(|t| !t.is_empty())
        .map(|t| t.parse().unwrap_or(i64::MAX))
        .collect()
}
