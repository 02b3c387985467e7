//! A tiny FlatBuffers writer, enough for Arrow's IPC metadata: tables of scalars and offsets,
//! strings, vectors of tables and vectors of structs (the FlatBuffers binary format).
//!
//! It lays the buffer out front to back: the root offset, then each table preceded by its
//! vtable, then the objects the table points to (an offset is unsigned: what it points to lies
//! after it). Every scalar is aligned to its size and every table to 8 bytes, counted from the
//! buffer's start, which the caller places on an 8-byte boundary.

/// A field's value.
#[derive(Debug, Clone)]
pub enum Val {
    U8(u8),
    Bool(bool),
    I16(i16),
    I32(i32),
    I64(i64),
    /// An offset to another object.
    Off(Obj),
}

impl Val {
    fn size(&self) -> usize {
        match self {
            Val::U8(_) | Val::Bool(_) => 1,
            Val::I16(_) => 2,
            Val::I32(_) | Val::Off(_) => 4,
            Val::I64(_) => 8,
        }
    }
}

/// An object of the buffer.
#[derive(Debug, Clone)]
pub enum Obj {
    /// `(field index, value)`; absent indices are absent fields.
    Table(Vec<(u16, Val)>),
    Str(String),
    Tables(Vec<Obj>),
    /// `count` structs of `bytes.len() / count` bytes each, aligned to 8.
    Structs {
        count: u32,
        bytes: Vec<u8>,
    },
}

/// The buffer with `root` as its root table, its length a multiple of 8.
pub fn finish(root: &Obj) -> Vec<u8> {
    let mut b = vec![0u8; 4];
    let at = write(&mut b, root);
    patch(&mut b, 0, at);
    pad_to(&mut b, 8);
    b
}

fn pad_to(b: &mut Vec<u8>, align: usize) {
    while b.len() % align != 0 {
        b.push(0);
    }
}

/// Writes at `at` the unsigned offset from `at` to `target`.
fn patch(b: &mut [u8], at: usize, target: usize) {
    let off = (target - at) as u32;
    b[at..at + 4].copy_from_slice(&off.to_le_bytes());
}

fn write(b: &mut Vec<u8>, o: &Obj) -> usize {
    match o {
        Obj::Table(fields) => write_table(b, fields),
        Obj::Str(s) => {
            pad_to(b, 4);
            let at = b.len();
            b.extend_from_slice(&(s.len() as u32).to_le_bytes());
            b.extend_from_slice(s.as_bytes());
            b.push(0);
            at
        }
        Obj::Tables(v) => {
            pad_to(b, 4);
            let at = b.len();
            b.extend_from_slice(&(v.len() as u32).to_le_bytes());
            let slots = b.len();
            b.resize(slots + 4 * v.len(), 0);
            for (k, t) in v.iter().enumerate() {
                let to = write(b, t);
                patch(b, slots + 4 * k, to);
            }
            at
        }
        Obj::Structs { count, bytes } => {
            // The length sits just before 8-aligned elements.
            pad_to(b, 4);
            if (b.len() + 4) % 8 != 0 {
                b.extend_from_slice(&[0; 4]);
            }
            let at = b.len();
            b.extend_from_slice(&count.to_le_bytes());
            b.extend_from_slice(bytes);
            at
        }
    }
}

fn write_table(b: &mut Vec<u8>, fields: &[(u16, Val)]) -> usize {
    // Inline layout after the 4-byte vtable offset: largest fields first, each aligned.
    let mut order: Vec<&(u16, Val)> = fields.iter().collect();
    order.sort_by_key(|(_, v)| std::cmp::Reverse(v.size()));
    let mut at_in = Vec::with_capacity(order.len());
    let mut size = 4usize;
    for (_, v) in &order {
        let s = v.size();
        size = size.div_ceil(s) * s;
        at_in.push(size);
        size += s;
    }
    let slots = fields.iter().map(|(i, _)| usize::from(*i) + 1).max().unwrap_or(0);
    let mut vtable = vec![0u16; 2 + slots];
    vtable[0] = (4 + 2 * slots) as u16;
    vtable[1] = size as u16;
    for ((i, _), &off) in order.iter().zip(&at_in) {
        vtable[2 + usize::from(*i)] = off as u16;
    }
    pad_to(b, 2);
    let vt = b.len();
    for x in &vtable {
        b.extend_from_slice(&x.to_le_bytes());
    }
    pad_to(b, 8);
    let table = b.len();
    b.extend_from_slice(&((table - vt) as i32).to_le_bytes());
    b.resize(table + size, 0);
    let mut children = Vec::new();
    for ((_, v), &off) in order.iter().zip(&at_in) {
        let p = table + off;
        match v {
            Val::U8(x) => b[p] = *x,
            Val::Bool(x) => b[p] = u8::from(*x),
            Val::I16(x) => b[p..p + 2].copy_from_slice(&x.to_le_bytes()),
            Val::I32(x) => b[p..p + 4].copy_from_slice(&x.to_le_bytes()),
            Val::I64(x) => b[p..p + 8].copy_from_slice(&x.to_le_bytes()),
            Val::Off(o) => children.push((p, o)),
        }
    }
    for (p, o) in children {
        let to = write(b, o);
        patch(b, p, to);
    }
    table
}

#[cfg(test)]
mod tests {
    use super::*;

    fn u32_at(b: &[u8], p: usize) -> usize {
        u32::from_le_bytes([b[p], b[p + 1], b[p + 2], b[p + 3]]) as usize
    }

    /// Reads field `i` of the table at `t` the way a FlatBuffers reader does: its offset in
    /// the table from the vtable, 0 when absent.
    fn field(b: &[u8], t: usize, i: usize) -> usize {
        let so = i32::from_le_bytes([b[t], b[t + 1], b[t + 2], b[t + 3]]) as isize;
        let vt = (t as isize - so) as usize;
        let vsize = u16::from_le_bytes([b[vt], b[vt + 1]]) as usize;
        if 4 + 2 * i >= vsize {
            return 0;
        }
        u16::from_le_bytes([b[vt + 4 + 2 * i], b[vt + 5 + 2 * i]]) as usize
    }

    #[test]
    fn a_reader_finds_every_field_where_it_was_put() {
        let root = Obj::Table(vec![
            (0, Val::I16(4)),
            (2, Val::Off(Obj::Str("name".into()))),
            (3, Val::I64(-7)),
            (4, Val::Off(Obj::Tables(vec![Obj::Table(vec![(1, Val::Bool(true))])]))),
        ]);
        let b = finish(&root);
        assert_eq!(b.len() % 8, 0);
        let t = u32_at(&b, 0);
        assert_eq!(t % 8, 0);
        let f0 = field(&b, t, 0);
        assert_eq!(i16::from_le_bytes([b[t + f0], b[t + f0 + 1]]), 4);
        assert_eq!(field(&b, t, 1), 0, "an absent field reads 0");
        let f3 = t + field(&b, t, 3);
        assert_eq!(f3 % 8, 0);
        assert_eq!(i64::from_le_bytes(b[f3..f3 + 8].try_into().unwrap_or([0; 8])), -7);
        let s = t + field(&b, t, 2);
        let s = s + u32_at(&b, s);
        assert_eq!(&b[s + 4..s + 4 + u32_at(&b, s)], b"name");
        assert_eq!(b[s + 8], 0, "strings end with a zero byte");
        let v = t + field(&b, t, 4);
        let v = v + u32_at(&b, v);
        assert_eq!(u32_at(&b, v), 1);
        let inner = v + 4 + u32_at(&b, v + 4);
        assert_eq!(b[inner + field(&b, inner, 1)], 1);
    }

    #[test]
    fn struct_vectors_are_8_aligned() {
        let root = Obj::Table(vec![(0, Val::Off(Obj::Structs { count: 1, bytes: vec![9; 16] }))]);
        let b = finish(&root);
        let t = u32_at(&b, 0);
        let v = t + field(&b, t, 0);
        let v = v + u32_at(&b, v);
        assert_eq!((v + 4) % 8, 0);
        assert_eq!(&b[v + 4..v + 20], &[9; 16]);
    }
}
