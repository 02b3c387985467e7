//! An Arrow IPC file writer (the Arrow columnar format, "IPC File Format", metadata version
//! V5, little-endian): `ARROW1` and two bytes of padding; the schema message; one record batch
//! message per piece, each an encapsulated message (continuation `0xFFFFFFFF`, metadata
//! length, the `Message` flatbuffer padded to 8 bytes, then the body); the end-of-stream
//! marker; the `Footer` flatbuffer (the schema again and a `Block` per batch), its length
//! (4 bytes) and `ARROW1`. Per column the body holds a validity bitmap (LSB first, 1 = a
//! value) and the values: 8 bytes per Int64 / Float64 row (0 under a null), int32 offsets and
//! the UTF-8 bytes for Utf8, a bitmap for Bool; each buffer padded to 8 bytes.

use serde::{Deserialize, Serialize};

use super::flatbuf::{self, Obj, Val};
use super::{size32, Column, ColumnData, ColumnKind, ColumnarError, Schema};

const MAGIC: &[u8; 6] = b"ARROW1";
const CONTINUATION: [u8; 4] = [0xff; 4];
/// `MetadataVersion.V5`.
const V5: i16 = 4;
// `MessageHeader` and `Type` union members.
const HEADER_SCHEMA: u8 = 1;
const HEADER_RECORD_BATCH: u8 = 3;
const TYPE_INT: u8 = 2;
const TYPE_FLOATING_POINT: u8 = 3;
const TYPE_UTF8: u8 = 5;
const TYPE_BOOL: u8 = 6;
/// `Precision.DOUBLE`.
const DOUBLE: i16 = 2;

/// A record batch's place in the file, for the footer (its offset 0, the start of its piece,
/// until the piece is placed, [`Block::shifted`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Block {
    offset: i64,
    meta_len: i32,
    body_len: i64,
}

impl Block {
    /// The same batch once its piece starts at byte `base` of the file.
    pub fn shifted(self, base: i64) -> Block {
        Block { offset: self.offset + base, ..self }
    }
}

fn field_type(k: ColumnKind) -> (u8, Obj) {
    match k {
        ColumnKind::I64 => (TYPE_INT, Obj::Table(vec![(0, Val::I32(64)), (1, Val::Bool(true))])),
        ColumnKind::F64 => (TYPE_FLOATING_POINT, Obj::Table(vec![(0, Val::I16(DOUBLE))])),
        ColumnKind::Utf8 => (TYPE_UTF8, Obj::Table(Vec::new())),
        ColumnKind::Bool => (TYPE_BOOL, Obj::Table(Vec::new())),
    }
}

/// The `Schema` table.
fn schema_obj(s: &Schema) -> Obj {
    let fields = s
        .fields
        .iter()
        .map(|(name, k)| {
            let (ty, table) = field_type(*k);
            Obj::Table(vec![
                (0, Val::Off(Obj::Str(name.clone()))),
                (1, Val::Bool(true)),
                (2, Val::U8(ty)),
                (3, Val::Off(table)),
                (5, Val::Off(Obj::Tables(Vec::new()))),
            ])
        })
        .collect();
    Obj::Table(vec![(0, Val::I16(0)), (1, Val::Off(Obj::Tables(fields)))])
}

fn message(header_type: u8, header: Obj, body_len: i64) -> Vec<u8> {
    flatbuf::finish(&Obj::Table(vec![
        (0, Val::I16(V5)),
        (1, Val::U8(header_type)),
        (2, Val::Off(header)),
        (3, Val::I64(body_len)),
    ]))
}

/// Continuation, length, metadata (already a multiple of 8 bytes long).
fn encapsulated(out: &mut Vec<u8>, meta: &[u8]) -> Result<i32, ColumnarError> {
    out.extend_from_slice(&CONTINUATION);
    out.extend_from_slice(&size32(meta.len())?.to_le_bytes());
    out.extend_from_slice(meta);
    size32(meta.len() + 8)
}

/// The file's opening: the magic, its padding and the schema message.
pub fn head(schema: &Schema) -> Result<Vec<u8>, ColumnarError> {
    let mut out = MAGIC.to_vec();
    out.extend_from_slice(&[0, 0]);
    encapsulated(&mut out, &message(HEADER_SCHEMA, schema_obj(schema), 0))?;
    Ok(out)
}

/// One record batch of `cols` (the schema's columns) as bytes of its own: the encapsulated
/// message and its body (a multiple of 8 bytes, so the next piece stays aligned).
pub fn encode_piece(schema: &Schema, cols: &[Column]) -> Result<(Vec<u8>, Block), ColumnarError> {
    let rows = schema.check(cols)?;
    let mut body = Vec::new();
    let mut nodes = Vec::new();
    let mut buffers = Vec::new();
    let mut push = |body: &mut Vec<u8>, bytes: &[u8]| {
        buffers.extend_from_slice(&(body.len() as i64).to_le_bytes());
        buffers.extend_from_slice(&(bytes.len() as i64).to_le_bytes());
        body.extend_from_slice(bytes);
        while body.len() % 8 != 0 {
            body.push(0);
        }
    };
    for c in cols {
        let d = &c.data;
        nodes.extend_from_slice(&(rows as i64).to_le_bytes());
        nodes.extend_from_slice(&(d.null_count() as i64).to_le_bytes());
        push(&mut body, &bitmap((0..rows).map(|i| d.is_valid(i))));
        match d {
            ColumnData::I64(v) => {
                let b: Vec<u8> = v.iter().flat_map(|x| x.unwrap_or(0).to_le_bytes()).collect();
                push(&mut body, &b);
            }
            ColumnData::F64(v) => {
                let b: Vec<u8> = v.iter().flat_map(|x| x.unwrap_or(0.0).to_le_bytes()).collect();
                push(&mut body, &b);
            }
            ColumnData::Utf8(v) => {
                let mut offsets = Vec::with_capacity(4 * (rows + 1));
                let mut data = Vec::new();
                offsets.extend_from_slice(&0i32.to_le_bytes());
                for s in v {
                    data.extend_from_slice(s.as_deref().unwrap_or("").as_bytes());
                    offsets.extend_from_slice(&size32(data.len())?.to_le_bytes());
                }
                push(&mut body, &offsets);
                push(&mut body, &data);
            }
            ColumnData::Bool(v) => push(&mut body, &bitmap(v.iter().map(|x| x.unwrap_or(false)))),
        }
    }
    let n_cols = cols.len() as u32;
    let batch = Obj::Table(vec![
        (0, Val::I64(rows as i64)),
        (1, Val::Off(Obj::Structs { count: n_cols, bytes: nodes })),
        (2, Val::Off(Obj::Structs { count: buffers.len() as u32 / 16, bytes: buffers })),
    ]);
    let meta = message(HEADER_RECORD_BATCH, batch, body.len() as i64);
    let mut out = Vec::with_capacity(meta.len() + 8 + body.len());
    let meta_len = encapsulated(&mut out, &meta)?;
    out.extend_from_slice(&body);
    Ok((out, Block { offset: 0, meta_len, body_len: body.len() as i64 }))
}

/// The file's end after its batches (placed, [`Block::shifted`]): the end-of-stream marker,
/// the footer, its length and the magic.
pub fn tail(schema: &Schema, batches: &[Block]) -> Result<Vec<u8>, ColumnarError> {
    let mut out = CONTINUATION.to_vec();
    out.extend_from_slice(&[0; 4]);
    let mut blocks = Vec::with_capacity(24 * batches.len());
    for b in batches {
        blocks.extend_from_slice(&b.offset.to_le_bytes());
        blocks.extend_from_slice(&b.meta_len.to_le_bytes());
        blocks.extend_from_slice(&[0; 4]);
        blocks.extend_from_slice(&b.body_len.to_le_bytes());
    }
    let footer = flatbuf::finish(&Obj::Table(vec![
        (0, Val::I16(V5)),
        (1, Val::Off(schema_obj(schema))),
        (2, Val::Off(Obj::Structs { count: 0, bytes: Vec::new() })),
        (3, Val::Off(Obj::Structs { count: batches.len() as u32, bytes: blocks })),
    ]));
    out.extend_from_slice(&footer);
    out.extend_from_slice(&size32(footer.len())?.to_le_bytes());
    out.extend_from_slice(MAGIC);
    Ok(out)
}

/// Bits LSB first, padded to whole bytes.
fn bitmap(v: impl Iterator<Item = bool>) -> Vec<u8> {
    let mut out = Vec::new();
    for (i, b) in v.enumerate() {
        if i % 8 == 0 {
            out.push(0);
        }
        if let (true, Some(last)) = (b, out.last_mut()) {
            *last |= 1 << (i % 8);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::super::{to_bytes, Column, ColumnData, Format, Table, TableName};

    fn i32_at(b: &[u8], p: usize) -> i32 {
        i32::from_le_bytes([b[p], b[p + 1], b[p + 2], b[p + 3]])
    }

    #[test]
    fn magic_schema_message_and_footer_are_where_readers_look() {
        let t = Table {
            name: TableName::Findings,
            columns: vec![
                Column::new("kind", ColumnData::Utf8(vec![Some("late_rank".into()), None])),
                Column::new("gain_ns", ColumnData::I64(vec![Some(5), Some(-1)])),
            ],
        };
        let b = to_bytes(Format::Arrow, &t).unwrap_or_default();
        assert_eq!(&b[..8], b"ARROW1\0\0");
        assert_eq!(&b[b.len() - 6..], b"ARROW1");
        // The schema message: continuation, then a metadata length that keeps 8-alignment.
        assert_eq!(&b[8..12], &[0xff; 4]);
        let meta = i32_at(&b, 12) as usize;
        assert_eq!(meta % 8, 0);
        // The record batch message follows it, 8-aligned.
        let batch = 16 + meta;
        assert_eq!(batch % 8, 0);
        assert_eq!(&b[batch..batch + 4], &[0xff; 4]);
        // The footer's length points at a flatbuffer that names the columns again.
        let flen = i32_at(&b, b.len() - 10) as usize;
        let footer = &b[b.len() - 10 - flen..b.len() - 10];
        assert_eq!((b.len() - 10 - flen) % 8, 0);
        assert!(footer.windows(7).any(|w| w == b"gain_ns"));
        // The end-of-stream marker sits just before it.
        assert_eq!(&b[b.len() - 18 - flen..b.len() - 10 - flen], &[0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0]);
    }

    #[test]
    fn bitmaps_are_lsb_first() {
        assert_eq!(
            super::bitmap([true, false, true, true, false, false, false, false, true].into_iter()),
            vec![0b1101, 1]
        );
    }
}
