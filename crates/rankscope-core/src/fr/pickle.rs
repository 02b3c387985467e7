//! A pickle reader for what PyTorch writes: no Python, no classes, no code.
//!
//! Flight Recorder dumps are written by libtorch's own pickler (`torch::jit::pickle_str`):
//! protocol 2, `EMPTY_DICT`/`EMPTY_LIST` + `MARK` … `SETITEMS`/`APPENDS`, `BINUNICODE`
//! strings, `BININT1`/`BININT2`/`BININT`/`LONG1` integers, `BINFLOAT`, `NEWTRUE`/`NEWFALSE`,
//! `NONE`, `TUPLE2`, and a memo (`BINPUT`/`BINGET`, the long forms past 255) that shares
//! repeated strings and stack frames. A dump re-saved from Python (`pickle.dump`, protocol
//! 2–5) adds `FRAME`, `SHORT_BINUNICODE`, `MEMOIZE` and the other tuple, bytes and set
//! opcodes; those are read too. Anything that builds objects (`GLOBAL`, `STACK_GLOBAL`,
//! `REDUCE`, `BUILD`, `NEWOBJ`, persistent ids, ...) and the text opcodes of protocol 0 are
//! refused with the opcode's name and byte offset: a dump never needs them.
//!
//! Values live in an arena ([`Pickle::node`]) and the stack and the memo hold indices into
//! it, so a container memoized before it is filled (Python's order) is the same container
//! when it is fetched later, as in Python. The reader never recurses and never allocates
//! from a declared length: every length is checked against the bytes that remain first, so
//! memory is linear in the input (at most one node per opcode) whatever the input claims.
//! Shared references and cycles are legal in the arena; whoever walks it bounds its own
//! depth and work (see `fr::decode`).

use std::collections::BTreeMap;

/// Index of a value in [`Pickle`]'s arena.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct NodeId(pub u32);

/// One value. Containers hold the indices of their items.
#[derive(Debug, Clone, PartialEq)]
pub enum Node {
    None,
    Bool(bool),
    Int(i64),
    /// An integer beyond 64 bits: its little-endian two's-complement bytes (`LONG1`/`LONG4`).
    BigInt(Vec<u8>),
    Float(f64),
    Str(String),
    Bytes(Vec<u8>),
    List(Vec<NodeId>),
    Tuple(Vec<NodeId>),
    /// Key/value pairs in the order they were set (a later equal key does not replace an
    /// earlier one here; lookups take the last).
    Dict(Vec<(NodeId, NodeId)>),
}

/// What went wrong, and where.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("pickle byte {offset}: {what}")]
pub struct PickleError {
    /// Byte offset of the opcode at fault (or of the end of the input when it is cut).
    pub offset: usize,
    pub what: String,
}

/// A parsed pickle: the arena and its root.
#[derive(Debug, Clone)]
pub struct Pickle {
    nodes: Vec<Node>,
    /// Byte offset of the opcode that made each node (for diagnostics).
    offsets: Vec<u32>,
    root: NodeId,
    /// Number of opcodes executed: a bound for the work of any walk over shared references.
    pub ops: u64,
    pub protocol: u8,
}

const NONE_NODE: Node = Node::None;

impl Pickle {
    pub fn root(&self) -> NodeId {
        self.root
    }

    /// The node `id`; `None` for an id from another pickle.
    pub fn node(&self, id: NodeId) -> &Node {
        self.nodes.get(id.0 as usize).unwrap_or(&NONE_NODE)
    }

    /// Byte offset of the opcode that created `id` (none for a tree built from JSON).
    pub fn offset(&self, id: NodeId) -> Option<u64> {
        self.offsets.get(id.0 as usize).map(|&o| o as u64)
    }

    pub fn len(&self) -> usize {
        self.nodes.len()
    }

    pub fn is_empty(&self) -> bool {
        self.nodes.is_empty()
    }

    pub fn as_str(&self, id: NodeId) -> Option<&str> {
        match self.node(id) {
            Node::Str(s) => Some(s),
            _ => None,
        }
    }

    /// An integer (bools count as 0/1, as in Python).
    pub fn as_i64(&self, id: NodeId) -> Option<i64> {
        match self.node(id) {
            Node::Int(v) => Some(*v),
            Node::Bool(b) => Some(*b as i64),
            _ => None,
        }
    }

    pub fn as_f64(&self, id: NodeId) -> Option<f64> {
        match self.node(id) {
            Node::Float(v) => Some(*v),
            Node::Int(v) => Some(*v as f64),
            _ => None,
        }
    }

    pub fn as_bool(&self, id: NodeId) -> Option<bool> {
        match self.node(id) {
            Node::Bool(b) => Some(*b),
            Node::Int(v) => Some(*v != 0),
            _ => None,
        }
    }

    /// The items of a list or a tuple.
    pub fn as_seq(&self, id: NodeId) -> Option<&[NodeId]> {
        match self.node(id) {
            Node::List(v) | Node::Tuple(v) => Some(v),
            _ => None,
        }
    }

    pub fn as_dict(&self, id: NodeId) -> Option<&[(NodeId, NodeId)]> {
        match self.node(id) {
            Node::Dict(v) => Some(v),
            _ => None,
        }
    }

    /// The value under the string key `key` in dict `id` (the last one set, as in Python).
    pub fn get(&self, id: NodeId, key: &str) -> Option<NodeId> {
        self.as_dict(id)?.iter().rev().find(|(k, _)| self.as_str(*k) == Some(key)).map(|(_, v)| *v)
    }
}

/// Builds a [`Pickle`] arena from another source (the JSON form of a dump).
#[derive(Debug, Default)]
pub(crate) struct Builder {
    nodes: Vec<Node>,
}

impl Builder {
    pub(crate) fn push(&mut self, n: Node) -> NodeId {
        let id = NodeId(self.nodes.len() as u32);
        self.nodes.push(n);
        id
    }

    pub(crate) fn set(&mut self, id: NodeId, n: Node) {
        if let Some(slot) = self.nodes.get_mut(id.0 as usize) {
            *slot = n;
        }
    }

    pub(crate) fn finish(self, root: NodeId) -> Pickle {
        let n = self.nodes.len() as u64;
        Pickle { offsets: Vec::new(), nodes: self.nodes, root, ops: n, protocol: 0 }
    }
}

/// An entry of the value stack: a value or a `MARK`.
#[derive(Debug, Clone, Copy)]
enum Slot {
    Mark,
    Value(NodeId),
}

struct Reader<'a> {
    b: &'a [u8],
    pos: usize,
    /// Offset of the opcode being executed.
    at: usize,
    nodes: Vec<Node>,
    offsets: Vec<u32>,
    stack: Vec<Slot>,
    memo: BTreeMap<u32, NodeId>,
}

impl<'a> Reader<'a> {
    fn err(&self, what: impl Into<String>) -> PickleError {
        PickleError { offset: self.at, what: what.into() }
    }

    fn take(&mut self, n: u64, what: &str) -> Result<&'a [u8], PickleError> {
        let left = self.b.len() - self.pos;
        if n > left as u64 {
            return Err(PickleError {
                offset: self.at,
                what: format!("{what} needs {n} bytes but only {left} remain (input cut?)"),
            });
        }
        let s = &self.b[self.pos..self.pos + n as usize];
        self.pos += n as usize;
        Ok(s)
    }

    fn u8(&mut self, what: &str) -> Result<u8, PickleError> {
        Ok(self.take(1, what)?[0])
    }

    fn le<const N: usize>(&mut self, what: &str) -> Result<[u8; N], PickleError> {
        let s = self.take(N as u64, what)?;
        let mut a = [0u8; N];
        a.copy_from_slice(s);
        Ok(a)
    }

    fn push(&mut self, n: Node) {
        let id = NodeId(self.nodes.len() as u32);
        self.nodes.push(n);
        self.offsets.push(self.at.min(u32::MAX as usize) as u32);
        self.stack.push(Slot::Value(id));
    }

    fn pop(&mut self, what: &str) -> Result<NodeId, PickleError> {
        match self.stack.pop() {
            Some(Slot::Value(id)) => Ok(id),
            Some(Slot::Mark) => Err(self.err(format!("{what}: found a MARK where a value belongs"))),
            None => Err(self.err(format!("{what}: the stack is empty"))),
        }
    }

    fn top(&self, what: &str) -> Result<NodeId, PickleError> {
        match self.stack.last() {
            Some(Slot::Value(id)) => Ok(*id),
            _ => Err(self.err(format!("{what}: no value on the stack"))),
        }
    }

    /// Pops everything down to the last `MARK` (and the mark).
    fn pop_mark(&mut self, what: &str) -> Result<Vec<NodeId>, PickleError> {
        let Some(m) = self.stack.iter().rposition(|s| matches!(s, Slot::Mark)) else {
            return Err(self.err(format!("{what} without a MARK")));
        };
        let items = self.stack[m + 1..]
            .iter()
            .filter_map(|s| match s {
                Slot::Value(id) => Some(*id),
                Slot::Mark => None,
            })
            .collect();
        self.stack.truncate(m);
        Ok(items)
    }

    fn str_node(&mut self, n: u64, what: &str) -> Result<(), PickleError> {
        let s = self.take(n, what)?;
        let s = std::str::from_utf8(s).map_err(|e| self.err(format!("{what}: invalid UTF-8 ({e})")))?;
        self.push(Node::Str(s.to_string()));
        Ok(())
    }

    fn memo_put(&mut self, index: u32) -> Result<(), PickleError> {
        let id = self.top("memo put")?;
        self.memo.insert(index, id);
        Ok(())
    }

    fn memo_get(&mut self, index: u32) -> Result<(), PickleError> {
        let id = *self.memo.get(&index).ok_or_else(|| self.err(format!("memo get of {index}, never put")))?;
        self.stack.push(Slot::Value(id));
        Ok(())
    }

    fn extend_list(&mut self, list: NodeId, items: Vec<NodeId>, what: &str) -> Result<(), PickleError> {
        match self.nodes.get_mut(list.0 as usize) {
            Some(Node::List(v)) => {
                v.extend(items);
                Ok(())
            }
            _ => Err(self.err(format!("{what} on something that is not a list"))),
        }
    }

    fn set_items(&mut self, dict: NodeId, items: &[NodeId], what: &str) -> Result<(), PickleError> {
        if items.len() % 2 != 0 {
            return Err(self.err(format!("{what} with an odd number of items ({})", items.len())));
        }
        match self.nodes.get_mut(dict.0 as usize) {
            Some(Node::Dict(v)) => {
                v.extend(items.chunks_exact(2).map(|p| (p[0], p[1])));
                Ok(())
            }
            _ => Err(self.err(format!("{what} on something that is not a dict"))),
        }
    }

    // Long on purpose: one match over the pickle opcodes, each arm a few lines of one opcode's operands.
    fn run(mut self) -> Result<Pickle, PickleError> {
        let mut protocol = 0u8;
        let mut ops = 0u64;
        loop {
            self.at = self.pos;
            if self.pos >= self.b.len() {
                return Err(self.err("the input ends before STOP (cut?)"));
            }
            let op = self.u8("opcode")?;
            ops += 1;
            match op {
                0x80 => {
                    protocol = self.u8("PROTO")?;
                    if protocol > 5 {
                        return Err(self.err(format!("pickle protocol {protocol} is unknown (0-5)")));
                    }
                }
                0x95 => {
                    // FRAME: a length prefix for the bytes that follow; they must be there.
                    let n = u64::from_le_bytes(self.le::<8>("FRAME")?);
                    let left = (self.b.len() - self.pos) as u64;
                    if n > left {
                        return Err(
                            self.err(format!("FRAME of {n} bytes but only {left} remain (input cut?)"))
                        );
                    }
                }
                b'.' => {
                    let root = self.pop("STOP")?;
                    return Ok(Pickle { nodes: self.nodes, offsets: self.offsets, root, ops, protocol });
                }
                b'(' => self.stack.push(Slot::Mark),
                b'0' => match self.stack.pop() {
                    Some(_) => {}
                    None => return Err(self.err("POP: the stack is empty")),
                },
                b'1' => {
                    self.pop_mark("POP_MARK")?;
                }
                b'2' => {
                    let id = self.top("DUP")?;
                    self.stack.push(Slot::Value(id));
                }
                b'N' => self.push(Node::None),
                0x88 => self.push(Node::Bool(true)),
                0x89 => self.push(Node::Bool(false)),
                b'J' => {
                    let v = i32::from_le_bytes(self.le::<4>("BININT")?);
                    self.push(Node::Int(v as i64));
                }
                b'K' => {
                    let v = self.u8("BININT1")?;
                    self.push(Node::Int(v as i64));
                }
                b'M' => {
                    let v = u16::from_le_bytes(self.le::<2>("BININT2")?);
                    self.push(Node::Int(v as i64));
                }
                0x8a | 0x8b => {
                    let n = if op == 0x8a {
                        self.u8("LONG1")? as u64
                    } else {
                        let n = i32::from_le_bytes(self.le::<4>("LONG4")?);
                        if n < 0 {
                            return Err(self.err(format!("LONG4 with a negative length {n}")));
                        }
                        n as u64
                    };
                    let bytes = self.take(n, "LONG")?;
                    self.push(long(bytes));
                }
                b'G' => {
                    let v = f64::from_be_bytes(self.le::<8>("BINFLOAT")?);
                    self.push(Node::Float(v));
                }
                b'X' => {
                    let n = u32::from_le_bytes(self.le::<4>("BINUNICODE")?) as u64;
                    self.str_node(n, "BINUNICODE")?;
                }
                0x8c => {
                    let n = self.u8("SHORT_BINUNICODE")? as u64;
                    self.str_node(n, "SHORT_BINUNICODE")?;
                }
                0x8d => {
                    let n = u64::from_le_bytes(self.le::<8>("BINUNICODE8")?);
                    self.str_node(n, "BINUNICODE8")?;
                }
                b'T' | b'U' => {
                    // Python 2 byte strings; Python 3 reads them as text (ASCII by default):
                    // bytes map one to one to code points, as latin-1 does.
                    let n = if op == b'T' {
                        let n = i32::from_le_bytes(self.le::<4>("BINSTRING")?);
                        if n < 0 {
                            return Err(self.err(format!("BINSTRING with a negative length {n}")));
                        }
                        n as u64
                    } else {
                        self.u8("SHORT_BINSTRING")? as u64
                    };
                    let s = self.take(n, "BINSTRING")?;
                    self.push(Node::Str(s.iter().map(|&c| c as char).collect()));
                }
                b'B' | b'C' | 0x8e | 0x96 => {
                    let n = match op {
                        b'B' => u32::from_le_bytes(self.le::<4>("BINBYTES")?) as u64,
                        b'C' => self.u8("SHORT_BINBYTES")? as u64,
                        _ => u64::from_le_bytes(self.le::<8>("BINBYTES8")?),
                    };
                    let s = self.take(n, "BINBYTES")?;
                    self.push(Node::Bytes(s.to_vec()));
                }
                b'}' => self.push(Node::Dict(Vec::new())),
                b']' => self.push(Node::List(Vec::new())),
                b')' => self.push(Node::Tuple(Vec::new())),
                0x8f => self.push(Node::List(Vec::new())), // EMPTY_SET: read as a list
                b'd' => {
                    let items = self.pop_mark("DICT")?;
                    self.push(Node::Dict(Vec::new()));
                    let d = self.top("DICT")?;
                    self.set_items(d, &items, "DICT")?;
                }
                b'l' | 0x91 => {
                    let items = self.pop_mark("LIST")?;
                    self.push(Node::List(items));
                }
                b't' => {
                    let items = self.pop_mark("TUPLE")?;
                    self.push(Node::Tuple(items));
                }
                0x85..=0x87 => {
                    let n = (op - 0x84) as usize;
                    let mut items = Vec::with_capacity(n);
                    for _ in 0..n {
                        items.push(self.pop("TUPLE1/2/3")?);
                    }
                    items.reverse();
                    self.push(Node::Tuple(items));
                }
                b's' => {
                    let v = self.pop("SETITEM")?;
                    let k = self.pop("SETITEM")?;
                    let d = self.top("SETITEM")?;
                    self.set_items(d, &[k, v], "SETITEM")?;
                }
                b'u' => {
                    let items = self.pop_mark("SETITEMS")?;
                    let d = self.top("SETITEMS")?;
                    self.set_items(d, &items, "SETITEMS")?;
                }
                b'a' => {
                    let v = self.pop("APPEND")?;
                    let l = self.top("APPEND")?;
                    self.extend_list(l, vec![v], "APPEND")?;
                }
                b'e' | 0x90 => {
                    let items = self.pop_mark("APPENDS")?;
                    let l = self.top("APPENDS")?;
                    self.extend_list(l, items, "APPENDS")?;
                }
                b'q' => {
                    let i = self.u8("BINPUT")? as u32;
                    self.memo_put(i)?;
                }
                b'r' => {
                    let i = u32::from_le_bytes(self.le::<4>("LONG_BINPUT")?);
                    self.memo_put(i)?;
                }
                0x94 => {
                    let i = self.memo.len() as u32;
                    self.memo_put(i)?;
                }
                b'h' => {
                    let i = self.u8("BINGET")? as u32;
                    self.memo_get(i)?;
                }
                b'j' => {
                    let i = u32::from_le_bytes(self.le::<4>("LONG_BINGET")?);
                    self.memo_get(i)?;
                }
                _ => {
                    return Err(self.err(match opcode_name(op) {
                        Some(name) => format!("opcode {name} (0x{op:02x}) is not supported in a dump"),
                        None => format!("unknown opcode 0x{op:02x}"),
                    }))
                }
            }
        }
    }
}

/// A `LONG1`/`LONG4` integer: little-endian two's complement.
fn long(bytes: &[u8]) -> Node {
    if bytes.len() > 8 {
        // Fits in 64 bits anyway when the extra bytes only extend the sign.
        let neg = bytes.last().is_some_and(|b| b & 0x80 != 0);
        let fill = if neg { 0xff } else { 0 };
        let fits = bytes[8..].iter().all(|&b| b == fill) && ((bytes[7] & 0x80 != 0) == neg);
        if !fits {
            return Node::BigInt(bytes.to_vec());
        }
    }
    let n = bytes.len().min(8);
    let neg = n > 0 && bytes[n - 1] & 0x80 != 0;
    let mut a = if neg { [0xffu8; 8] } else { [0u8; 8] };
    a[..n].copy_from_slice(&bytes[..n]);
    Node::Int(i64::from_le_bytes(a))
}

/// Names of the opcodes this reader refuses, for the error message.
fn opcode_name(op: u8) -> Option<&'static str> {
    Some(match op {
        b'c' => "GLOBAL",
        0x93 => "STACK_GLOBAL",
        b'R' => "REDUCE",
        b'b' => "BUILD",
        b'i' => "INST",
        b'o' => "OBJ",
        0x81 => "NEWOBJ",
        0x92 => "NEWOBJ_EX",
        b'P' => "PERSID",
        b'Q' => "BINPERSID",
        0x82..=0x84 => "EXT",
        0x97 => "NEXT_BUFFER",
        0x98 => "READONLY_BUFFER",
        b'I' => "INT (protocol 0)",
        b'L' => "LONG (protocol 0)",
        b'F' => "FLOAT (protocol 0)",
        b'S' => "STRING (protocol 0)",
        b'V' => "UNICODE (protocol 0)",
        b'p' => "PUT (protocol 0)",
        b'g' => "GET (protocol 0)",
        _ => return None,
    })
}

/// Parses one pickle from the start of `bytes` (bytes after `STOP` are ignored).
pub fn parse(bytes: &[u8]) -> Result<Pickle, PickleError> {
    Reader {
        b: bytes,
        pos: 0,
        at: 0,
        nodes: Vec::new(),
        offsets: Vec::new(),
        stack: Vec::new(),
        memo: BTreeMap::new(),
    }
    .run()
}

/// True when `bytes` start like a binary pickle (`PROTO 2..=5`).
pub fn looks_like_pickle(bytes: &[u8]) -> bool {
    matches!(bytes, [0x80, 2..=5, ..])
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    fn s(p: &Pickle, id: NodeId) -> String {
        p.as_str(id).unwrap_or("?").to_string()
    }

    #[test]
    fn reads_a_small_torch_like_dict() {
        // {'version': '2.10', 'n': [1, -1, 300, 2**40], 't': ('a', 'a'), 'f': 1.5, 'b': True}
        let mut b = vec![0x80, 2, b'}', b'('];
        let bu = |b: &mut Vec<u8>, t: &str| {
            b.push(b'X');
            b.extend((t.len() as u32).to_le_bytes());
            b.extend(t.as_bytes());
        };
        bu(&mut b, "version");
        bu(&mut b, "2.10");
        bu(&mut b, "n");
        b.extend([b']', b'(', b'K', 1, b'J', 0xff, 0xff, 0xff, 0xff, b'M', 0x2c, 0x01]);
        b.extend([0x8a, 6, 0, 0, 0, 0, 0, 1, b'e']);
        bu(&mut b, "t");
        bu(&mut b, "a");
        b.extend([b'q', 7, b'h', 7, 0x86]);
        bu(&mut b, "f");
        b.push(b'G');
        b.extend(1.5f64.to_be_bytes());
        bu(&mut b, "b");
        b.extend([0x88, b'u', b'.']);
        let p = parse(&b).unwrap();
        let r = p.root();
        assert_eq!(s(&p, p.get(r, "version").unwrap()), "2.10");
        let n: Vec<i64> =
            p.as_seq(p.get(r, "n").unwrap()).unwrap().iter().map(|&i| p.as_i64(i).unwrap()).collect();
        assert_eq!(n, vec![1, -1, 300, 1 << 40]);
        let t = p.as_seq(p.get(r, "t").unwrap()).unwrap();
        assert_eq!((s(&p, t[0]), s(&p, t[1])), ("a".into(), "a".into()));
        assert_eq!(p.as_f64(p.get(r, "f").unwrap()), Some(1.5));
        assert_eq!(p.as_bool(p.get(r, "b").unwrap()), Some(true));
    }

    #[test]
    fn memo_shares_containers_filled_after_put() {
        // Python's order: EMPTY_LIST, MEMOIZE, MARK, items, APPENDS; then the memo'd list again.
        let b = [0x80, 4, b']', 0x94, b'(', b'K', 1, b'K', 2, b'e', b'h', 0, 0x86, b'.'];
        let p = parse(&b).unwrap();
        let t = p.as_seq(p.root()).unwrap();
        assert_eq!(t.len(), 2);
        assert_eq!(p.as_seq(t[1]).unwrap().len(), 2);
    }

    #[test]
    fn longs() {
        assert_eq!(long(&[]), Node::Int(0));
        assert_eq!(long(&[0xff]), Node::Int(-1));
        assert_eq!(long(&[0x00, 0x80]), Node::Int(-32768));
        assert_eq!(long(&[0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f, 0x00]), Node::Int(i64::MAX));
        assert!(matches!(long(&[0, 0, 0, 0, 0, 0, 0, 0, 1]), Node::BigInt(_)));
    }

    #[test]
    fn errors_name_the_offset() {
        let e = parse(&[0x80, 2, b'X', 0xff, 0xff, 0xff, 0x7f]).unwrap_err();
        assert_eq!(e.offset, 2);
        assert!(e.what.contains("remain"), "{e}");
        let e = parse(&[0x80, 2, b'}', b'c', b'o', b's']).unwrap_err();
        assert_eq!(e.offset, 3);
        assert!(e.what.contains("GLOBAL"), "{e}");
        let e = parse(&[0x80, 2, b'}']).unwrap_err();
        assert!(e.what.contains("STOP"), "{e}");
        let e = parse(&[0x80, 2, b'h', 3, b'.']).unwrap_err();
        assert!(e.what.contains("never put"), "{e}");
        let e = parse(&[0x80, 9]).unwrap_err();
        assert!(e.what.contains("protocol 9"), "{e}");
        let e = parse(&[0x80, 2, b'K', 1, b'u', b'.']).unwrap_err();
        assert!(e.what.contains("MARK"), "{e}");
    }
}
