//! A Parquet file writer (the Apache Parquet format spec, `parquet.thrift`): `PAR1`, then one
//! row group per piece holding one column chunk per column, each a single data page v1 —
//! PLAIN values, no compression, the column OPTIONAL with its definition levels
//! (RLE / bit-packed hybrid, bit width 1, written as bit-packed runs) and no repetition levels —
//! then the footer: `FileMetaData` in the Thrift compact protocol, its length (4 bytes, little
//! endian) and `PAR1` again. Strings are BYTE_ARRAY with the STRING logical type (and the
//! UTF8 converted type older readers look for); integers INT64, floats DOUBLE, booleans
//! BOOLEAN. A table without rows has no row group.

use serde::{Deserialize, Serialize};

use super::thrift::{Compact, Ty};
use super::{size32, Column, ColumnData, ColumnKind, ColumnarError, Schema};

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

/// Where a column chunk went, for the footer (its offset from the start of its piece until
/// the piece is placed in the file, [`RowGroupMeta::shifted`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ChunkMeta {
    offset: i64,
    size: i64,
    values: i64,
}

/// A row group's place and chunks, for the footer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RowGroupMeta {
    rows: i64,
    chunks: Vec<ChunkMeta>,
}

impl RowGroupMeta {
    /// The same row group once its piece starts at byte `base` of the file.
    pub fn shifted(mut self, base: i64) -> RowGroupMeta {
        for c in &mut self.chunks {
            c.offset += base;
        }
        self
    }
}

/// The file's opening.
pub fn head() -> Vec<u8> {
    MAGIC.to_vec()
}

/// One row group of `cols` (the schema's columns) as bytes of its own, its chunks' offsets
/// counted from its first byte; `None` when they have no rows (no row group is written).
pub fn encode_piece(
    schema: &Schema,
    cols: &[Column],
) -> Result<Option<(Vec<u8>, RowGroupMeta)>, ColumnarError> {
    let rows = schema.check(cols)?;
    if rows == 0 {
        return Ok(None);
    }
    let mut out = Vec::new();
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
        let offset = out.len() as i64;
        out.extend_from_slice(&h.buf);
        out.extend_from_slice(&data);
        chunks.push(ChunkMeta { offset, size: (h.buf.len() + data.len()) as i64, values: rows as i64 });
    }
    Ok(Some((out, RowGroupMeta { rows: rows as i64, chunks })))
}

/// The file's end after its row groups (placed, [`RowGroupMeta::shifted`]): the footer, its
/// length and the magic.
pub fn tail(schema: &Schema, groups: &[RowGroupMeta]) -> Result<Vec<u8>, ColumnarError> {
    let mut out = file_metadata(schema, groups)?;
    let len = size32(out.len())? as u32;
    out.extend_from_slice(&len.to_le_bytes());
    out.extend_from_slice(MAGIC);
    Ok(out)
}

fn file_metadata(schema: &Schema, groups: &[RowGroupMeta]) -> Result<Vec<u8>, ColumnarError> {
    let mut c = Compact::new();
    c.i32(1, 1);
    c.list(2, Ty::Struct, schema.fields.len() + 1);
    c.begin_element();
    c.binary(4, b"schema");
    c.i32(5, size32(schema.fields.len())?);
    c.end();
    for (name, kind) in &schema.fields {
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
    c.i64(3, groups.iter().map(|g| g.rows).sum());
    c.list(4, Ty::Struct, groups.len());
    for g in groups {
        c.begin_element();
        c.list(1, Ty::Struct, g.chunks.len());
        for (ch, (name, kind)) in g.chunks.iter().zip(&schema.fields) {
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
        let schema = t.schema();
        let short = vec![Column::new("step", ColumnData::I64(vec![Some(1)]))];
        assert!(matches!(encode_piece(&schema, &short), Err(ColumnarError::Schema)));
        let mut cols = t.columns.clone();
        cols[0].data = ColumnData::I64(vec![Some(1)]);
        assert!(matches!(encode_piece(&schema, &cols), Err(ColumnarError::Lengths)));
    }
}
