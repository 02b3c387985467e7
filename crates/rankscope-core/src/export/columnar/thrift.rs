//! The Thrift compact protocol, the part Parquet's footer and page headers need: structs of
//! i32, i64, binary, bool, lists and nested structs (the Apache Thrift compact protocol spec).

/// The compact protocol's type codes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum Ty {
    I32 = 5,
    I64 = 6,
    Binary = 8,
    List = 9,
    Struct = 12,
}

/// Writes one value; fields of nested structs are delta-coded against their own struct.
#[derive(Debug, Default)]
pub struct Compact {
    pub buf: Vec<u8>,
    last: Vec<i16>,
    cur: i16,
}

impl Compact {
    pub fn new() -> Compact {
        Compact::default()
    }

    fn varint(&mut self, mut v: u64) {
        while v >= 0x80 {
            self.buf.push((v as u8) | 0x80);
            v >>= 7;
        }
        self.buf.push(v as u8);
    }

    fn zigzag(v: i64) -> u64 {
        ((v << 1) ^ (v >> 63)) as u64
    }

    fn header(&mut self, id: i16, ty: u8) {
        let delta = id - self.cur;
        if (1..=15).contains(&delta) {
            self.buf.push(((delta as u8) << 4) | ty);
        } else {
            self.buf.push(ty);
            self.varint(Self::zigzag(i64::from(id)));
        }
        self.cur = id;
    }

    pub fn i32(&mut self, id: i16, v: i32) {
        self.header(id, Ty::I32 as u8);
        self.varint(Self::zigzag(i64::from(v)));
    }

    pub fn i64(&mut self, id: i16, v: i64) {
        self.header(id, Ty::I64 as u8);
        self.varint(Self::zigzag(v));
    }

    pub fn binary(&mut self, id: i16, v: &[u8]) {
        self.header(id, Ty::Binary as u8);
        self.raw_binary(v);
    }

    fn raw_binary(&mut self, v: &[u8]) {
        self.varint(v.len() as u64);
        self.buf.extend_from_slice(v);
    }

    /// A field holding a struct: its fields follow, then [`Compact::end`].
    pub fn begin(&mut self, id: i16) {
        self.header(id, Ty::Struct as u8);
        self.begin_element();
    }

    /// A struct as a list's element: its fields follow, then [`Compact::end`].
    pub fn begin_element(&mut self) {
        self.last.push(self.cur);
        self.cur = 0;
    }

    /// The stop byte of a struct.
    pub fn end(&mut self) {
        self.buf.push(0);
        self.cur = self.last.pop().unwrap_or(0);
    }

    /// A list field's header: `n` elements of type `elem` follow.
    pub fn list(&mut self, id: i16, elem: Ty, n: usize) {
        self.header(id, Ty::List as u8);
        if n < 15 {
            self.buf.push(((n as u8) << 4) | elem as u8);
        } else {
            self.buf.push(0xf0 | elem as u8);
            self.varint(n as u64);
        }
    }

    /// A list element of type i32.
    pub fn elem_i32(&mut self, v: i32) {
        self.varint(Self::zigzag(i64::from(v)));
    }

    /// A list element of type binary.
    pub fn elem_binary(&mut self, v: &[u8]) {
        self.raw_binary(v);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fields_are_delta_coded_and_zigzagged() {
        let mut c = Compact::new();
        c.i32(1, 1);
        c.i64(3, -1);
        c.binary(4, b"ab");
        c.i32(20, 300);
        c.begin(21);
        c.i32(1, 0);
        c.end();
        c.i32(22, 2);
        c.end();
        assert_eq!(
            c.buf,
            vec![
                0x15, 0x02, // field 1 i32, zigzag(1) = 2
                0x26, 0x01, // delta 2, i64, zigzag(-1) = 1
                0x18, 0x02, b'a', b'b', // delta 1, binary
                0x05, 0x28, 0xd8, 0x04, // long form: type, zigzag(20) = 40, zigzag(300) = 600
                0x1c, // delta 1, struct
                0x15, 0x00, 0x00, // its field 1 = 0, stop
                0x15, 0x04, // back in the outer struct: delta 1 from 21
                0x00,
            ]
        );
    }

    #[test]
    fn long_lists_carry_their_size_apart() {
        let mut c = Compact::new();
        c.list(1, Ty::I32, 20);
        assert_eq!(c.buf, vec![0x19, 0xf5, 20]);
    }
}
