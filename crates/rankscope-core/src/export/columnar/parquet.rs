//! A Parquet file writer (the Apache Parquet format spec, `parquet.thrift`): `PAR1`, then one
//! row group per piece holding one column chunk per column, each a single data page v1 —
//! PLAIN values, no compression, the column OPTIONAL with its definition levels
//! (RLE / bit-packed hybrid, bit width 1, written as bit-packed runs) and no repetition levels —
//! then the footer: `FileMetaData` in the Thrift compact protocol, its length (4 bytes, little
//! endian) and `PAR1` again. Strings are BYTE_ARRAY with the STRING logical type (and the
//! UTF8 converted type older readers look for); integers INT64, floats DOUBLE, booleans
//! BOOLEAN. A table without rows has no row group.

use std::io::Write;

use super::thrift::{Compact, Ty};
use super::{size32, Column, ColumnData, ColumnKind, ColumnarError, Counted, Schema};

const MAGIC: &[u8; 4] = b"PAR1";

// parquet.thrift's enums.
const TYPE_BOOLEAN: i32 = 0;
const TYPE_INT64: i32 = 2;
const TYPE_DOUBLE: i32 = 5;
const TYPE_BYTE_ARRAY: i32 = 6;
const REPETITION_OPTIONAL: i32 = 1;
const CONVERTED_UTF8: i32 = 0;
const ENCODING_PLAIN: i32 = 0;
const ENCODING_RLE: i32 = 3;
const CODEC_UNCOMPRESSED: i32 = 0;
const PAGE_DATA: i32 = 0;

fn physical(k: ColumnKind) -> i32 {
    match k {
        ColumnKind::I64 => TYPE_INT64,
        ColumnKind::F64 => TYPE_DOUBLE,
        ColumnKind::Utf8 => TYPE_BYTE_ARRAY,
        ColumnKind::Bool => TYPE_BOOLEAN,
    }
}

/// Where a column chunk went, for the footer.
#[derive(Debug, Clone)]
struct ChunkMeta {
    offset: i64,
    size: i64,
    values: i64,
}

#[derive(Debug, Clone)]
struct RowGroupMeta {
    rows: i64,
    chunks: Vec<ChunkMeta>,
}

/// Writes a table to `W`, a row group per [`ParquetWriter::write`].
#[derive(Debug)]
pub struct ParquetWriter<W: Write> {
    out: Counted<W>,
    schema: Schema,
    groups: Vec<RowGroupMeta>,
}

impl<W: Write> ParquetWriter<W> {
    pub fn new(out: W, schema: Schema) -> Result<Self, ColumnarError> {
        let mut out = Counted { out, pos: 0 };
        out.put(MAGIC)?;
        Ok(ParquetWriter { out, schema, groups: Vec::new() })
    }

    /// One row group of `cols` (the schema's columns; none written when they have no rows).
    pub fn write(&mut self, cols: &[Column]) -> Result<(), ColumnarError> {
        let rows = self.schema.check(cols)?;
        if rows == 0 {
            return Ok(());
        }
        let mut chunks = Vec::with_capacity(cols.len());
        for c in cols {
            let data = page_data(&c.data)?;
            let mut h = Compact::new();
            h.i32(1, PAGE_DATA);
            h.i32(2, size32(data.len())?);
            h.i32(3, size32(data.len())?);
            h.begin(5);
            h.i32(1, size32(rows)?);
            h.i32(2, ENCODING_PLAIN);
            h.i32(3, ENCODING_RLE);
            h.i32(4, ENCODING_RLE);
            h.end();
            h.end();
            let offset = self.out.pos as i64;
            self.out.put(&h.buf)?;
            self.out.put(&data)?;
            chunks.push(ChunkMeta { offset, size: (h.buf.len() + data.len()) as i64, values: rows as i64 });
        }
        self.groups.push(RowGroupMeta { rows: rows as i64, chunks });
        Ok(())
    }

    /// The footer; gives the output back.
    pub fn finish(mut self) -> Result<W, ColumnarError> {
        let meta = self.file_metadata()?;
        self.out.put(&meta)?;
        self.out.put(&(size32(meta.len())? as u32).to_le_bytes())?;
        self.out.put(MAGIC)?;
        self.out.out.flush()?;
        Ok(self.out.out)
    }

    fn file_metadata(&self) -> Result<Vec<u8>, ColumnarError> {
        let mut c = Compact::new();
        c.i32(1, 1);
        c.list(2, Ty::Struct, self.schema.fields.len() + 1);
        c.begin_element();
        c.binary(4, b"schema");
        c.i32(5, size32(self.schema.fields.len())?);
        c.end();
        for (name, kind) in &self.schema.fields {
            c.begin_element();
            c.i32(1, physical(*kind));
            c.i32(3, REPETITION_OPTIONAL);
            c.binary(4, name.as_bytes());
            if *kind == ColumnKind::Utf8 {
                c.i32(6, CONVERTED_UTF8);
                // logicalType: the union's STRING member, an empty struct.
                c.begin(10);
                c.begin(1);
                c.end();
                c.end();
            }
            c.end();
        }
        c.i64(3, self.groups.iter().map(|g| g.rows).sum());
        c.list(4, Ty::Struct, self.groups.len());
        for g in &self.groups {
            c.begin_element();
            c.list(1, Ty::Struct, g.chunks.len());
            for (ch, (name, kind)) in g.chunks.iter().zip(&self.schema.fields) {
                c.begin_element();
                c.i64(2, ch.offset);
                c.begin(3);
                c.i32(1, physical(*kind));
                c.list(2, Ty::I32, 2);
                c.elem_i32(ENCODING_PLAIN);
                c.elem_i32(ENCODING_RLE);
                c.list(3, Ty::Binary, 1);
                c.elem_binary(name.as_bytes());
                c.i32(4, CODEC_UNCOMPRESSED);
                c.i64(5, ch.values);
                c.i64(6, ch.size);
                c.i64(7, ch.size);
                c.i64(9, ch.offset);
                c.end();
                c.end();
            }
            c.i64(2, g.chunks.iter().map(|ch| ch.size).sum());
            c.i64(3, g.rows);
            c.end();
        }
        c.binary(6, concat!("rankscope ", env!("CARGO_PKG_VERSION")).as_bytes());
        c.end();
        Ok(c.buf)
    }
}

/// Bits LSB first, one per value, padded to whole bytes.
fn bits(v: impl Iterator<Item = bool>) -> Vec<u8> {
    let mut out = Vec::new();
    for (i, b) in v.enumerate() {
        if i % 8 == 0 {
            out.push(0);
        }
        if b {
            if let Some(last) = out.last_mut() {
                *last |= 1 << (i % 8);
            }
        }
    }
    out
}

/// A data page v1's body: the definition levels (length-prefixed), then the PLAIN values of
/// the rows that hold one.
fn page_data(d: &ColumnData) -> Result<Vec<u8>, ColumnarError> {
    let n = d.len();
    // One bit-packed run: its header is the count of 8-value groups, shifted, low bit set.
    let mut levels = Vec::new();
    let groups = n.div_ceil(8) as u64;
    let mut head = (groups << 1) | 1;
    while head >= 0x80 {
        levels.push((head as u8) | 0x80);
        head >>= 7;
    }
    levels.push(head as u8);
    levels.extend(bits((0..n).map(|i| d.is_valid(i))));
    let mut out = Vec::with_capacity(4 + levels.len() + n * 8);
    out.extend_from_slice(&(size32(levels.len())? as u32).to_le_bytes());
    out.extend_from_slice(&levels);
    match d {
        ColumnData::I64(v) => v.iter().flatten().for_each(|x| out.extend_from_slice(&x.to_le_bytes())),
        ColumnData::F64(v) => v.iter().flatten().for_each(|x| out.extend_from_slice(&x.to_le_bytes())),
        ColumnData::Utf8(v) => {
            for s in v.iter().flatten() {
                out.extend_from_slice(&(size32(s.len())? as u32).to_le_bytes());
                out.extend_from_slice(s.as_bytes());
            }
        }
        ColumnData::Bool(v) => out.extend(bits(v.iter().flatten().copied())),
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::super::{to_bytes, Column, ColumnData, Format, Table, TableName};
    use super::*;

    fn sample() -> Table {
        Table {
            name: TableName::Steps,
            columns: vec![
                Column::new("step", ColumnData::I64(vec![Some(1), None, Some(3)])),
                Column::new("name", ColumnData::Utf8(vec![Some("a".into()), Some("bé".into()), None])),
                Column::new("ok", ColumnData::Bool(vec![Some(true), Some(false), Some(true)])),
                Column::new("x", ColumnData::F64(vec![None, Some(0.5), None])),
            ],
        }
    }

    #[test]
    fn magic_at_both_ends_and_the_footer_length_points_at_the_footer() {
        let b = to_bytes(Format::Parquet, &sample()).unwrap_or_default();
        assert_eq!(&b[..4], b"PAR1");
        assert_eq!(&b[b.len() - 4..], b"PAR1");
        let len =
            u32::from_le_bytes([b[b.len() - 8], b[b.len() - 7], b[b.len() - 6], b[b.len() - 5]]) as usize;
        let footer = &b[b.len() - 8 - len..b.len() - 8];
        // FileMetaData starts with field 1 (version, i32 1) and ends with a stop byte.
        assert_eq!(&footer[..2], &[0x15, 0x02]);
        assert_eq!(footer.last(), Some(&0));
        // The created_by string and every column name are in it.
        for s in ["rankscope ", "step", "name", "ok", "x"] {
            assert!(footer.windows(s.len()).any(|w| w == s.as_bytes()), "{s}");
        }
    }

    #[test]
    fn a_page_holds_the_levels_then_only_the_present_values() {
        let d = ColumnData::I64(vec![Some(1), None, Some(3)]);
        let p = page_data(&d).unwrap_or_default();
        // 2 bytes of levels: run header (1 group << 1 | 1), then bits 0b101.
        assert_eq!(&p[..6], &[2, 0, 0, 0, 0x03, 0b101]);
        assert_eq!(p.len(), 6 + 16);
        assert_eq!(&p[6..14], &1i64.to_le_bytes());
        let b = page_data(&ColumnData::Bool(vec![Some(true), Some(false), Some(true)])).unwrap_or_default();
        assert_eq!(&b[6..], &[0b101]);
    }

    #[test]
    fn columns_that_are_not_the_schema_are_refused() {
        let t = sample();
        let mut w = ParquetWriter::new(Vec::new(), t.schema()).ok();
        let short = vec![Column::new("step", ColumnData::I64(vec![Some(1)]))];
        assert!(matches!(w.as_mut().map(|w| w.write(&short)), Some(Err(ColumnarError::Schema))));
        let mut cols = t.columns.clone();
        cols[0].data = ColumnData::I64(vec![Some(1)]);
        assert!(matches!(w.as_mut().map(|w| w.write(&cols)), Some(Err(ColumnarError::Lengths))));
    }
}
