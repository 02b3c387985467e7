//! What rankscope parsed and measured, as columnar files that pandas, polars, DuckDB and
//! pyarrow open: Parquet ([`parquet`]) and the Arrow IPC file format ([`arrow`]), each table
//! of [`tables`] (docs/columnar.md gives every column, its type and unit).
//!
//! Both writers are written here, by hand, small: the `parquet` and `arrow` crates would
//! bring megabytes of code to a core that also runs in the page (its wasm budget,
//! docs/columnar.md). What they write is the plain subset every reader reads: Parquet with
//! PLAIN encoding, no compression, data pages v1, every column OPTIONAL with its definition
//! levels (a Thrift compact-protocol footer, [`thrift`]); Arrow IPC version 5, little-endian,
//! one schema message and one record batch per piece, buffers 8-byte aligned, flatbuffers laid
//! out by [`flatbuf`]. Types are four: 64-bit integers, 64-bit floats, UTF-8 strings, booleans;
//! every column is nullable. Times are integers of nanoseconds in columns named `…_ns`.
//!
//! A table is written in pieces ([`Writer::write`], the same columns each time): one Parquet
//! row group and one Arrow record batch per piece, so the events go out rank by rank without
//! a second copy of the whole job's.

pub mod arrow;
mod flatbuf;
pub mod parquet;
pub mod tables;
mod thrift;

use std::io::{self, Write};

use serde::{Deserialize, Serialize};

/// One column's values, typed; `None` is a null.
#[derive(Debug, Clone, PartialEq)]
pub enum ColumnData {
    I64(Vec<Option<i64>>),
    F64(Vec<Option<f64>>),
    Utf8(Vec<Option<String>>),
    Bool(Vec<Option<bool>>),
}

/// The type of a column.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum ColumnKind {
    I64,
    F64,
    Utf8,
    Bool,
}

impl ColumnKind {
    /// The name docs/columnar.md uses for it (Arrow's).
    pub fn as_str(self) -> &'static str {
        match self {
            ColumnKind::I64 => "int64",
            ColumnKind::F64 => "float64",
            ColumnKind::Utf8 => "string",
            ColumnKind::Bool => "bool",
        }
    }
}

impl ColumnData {
    pub fn kind(&self) -> ColumnKind {
        match self {
            ColumnData::I64(_) => ColumnKind::I64,
            ColumnData::F64(_) => ColumnKind::F64,
            ColumnData::Utf8(_) => ColumnKind::Utf8,
            ColumnData::Bool(_) => ColumnKind::Bool,
        }
    }

    pub fn len(&self) -> usize {
        match self {
            ColumnData::I64(v) => v.len(),
            ColumnData::F64(v) => v.len(),
            ColumnData::Utf8(v) => v.len(),
            ColumnData::Bool(v) => v.len(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Whether row `i` holds a value.
    pub fn is_valid(&self, i: usize) -> bool {
        match self {
            ColumnData::I64(v) => v.get(i).is_some_and(Option::is_some),
            ColumnData::F64(v) => v.get(i).is_some_and(Option::is_some),
            ColumnData::Utf8(v) => v.get(i).is_some_and(Option::is_some),
            ColumnData::Bool(v) => v.get(i).is_some_and(Option::is_some),
        }
    }

    pub fn null_count(&self) -> usize {
        (0..self.len()).filter(|&i| !self.is_valid(i)).count()
    }
}

/// A named column.
#[derive(Debug, Clone, PartialEq)]
pub struct Column {
    pub name: String,
    pub data: ColumnData,
}

impl Column {
    pub fn new(name: &str, data: ColumnData) -> Column {
        Column { name: name.to_string(), data }
    }
}

/// A named table: columns of one length.
#[derive(Debug, Clone, PartialEq)]
pub struct Table {
    pub name: TableName,
    pub columns: Vec<Column>,
}

impl Table {
    /// Its rows (the first column's length; every column has it, [`Table::check`]).
    pub fn rows(&self) -> usize {
        self.columns.first().map_or(0, |c| c.data.len())
    }

    pub fn schema(&self) -> Schema {
        Schema { fields: self.columns.iter().map(|c| (c.name.clone(), c.data.kind())).collect() }
    }
}

/// The names and types of a table's columns, in order.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Schema {
    pub fields: Vec<(String, ColumnKind)>,
}

impl Schema {
    /// Whether `cols` are this schema's columns (names and types in order, one length).
    fn check(&self, cols: &[Column]) -> Result<usize, ColumnarError> {
        let same = cols.len() == self.fields.len()
            && cols.iter().zip(&self.fields).all(|(c, (n, k))| &c.name == n && c.data.kind() == *k);
        if !same {
            return Err(ColumnarError::Schema);
        }
        let rows = cols.first().map_or(0, |c| c.data.len());
        if cols.iter().any(|c| c.data.len() != rows) {
            return Err(ColumnarError::Lengths);
        }
        Ok(rows)
    }
}

crate::named_enum! {
    /// The tables `rankscope export` writes (docs/columnar.md).
    pub enum TableName {
        /// Rank × step: the step's window and where its time went.
        Steps => "steps",
        /// Matched collective × member rank: aligned start and end, wait, transfer.
        Collectives => "collectives",
        /// Per collective kind and process group: counts, sizes, durations, bandwidth.
        CollectiveStats => "collective_stats",
        /// The process groups, their ranks and roles.
        Groups => "groups",
        /// The findings, ranked.
        Findings => "findings",
        /// Operators and kernels per step, added up over the ranks.
        Operators => "operators",
        /// Every event of every rank, on the aligned clock.
        Events => "events",
    }
}

/// Why a table could not be written.
#[derive(Debug, thiserror::Error)]
pub enum ColumnarError {
    #[error("the columns are not the table's (names or types differ)")]
    Schema,
    #[error("the columns differ in length")]
    Lengths,
    #[error("a piece or a value is beyond the format's 32-bit sizes")]
    TooLarge,
    #[error(transparent)]
    Io(#[from] io::Error),
}

/// The two formats.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Format {
    Parquet,
    Arrow,
}

impl Format {
    /// The file name extension (`steps.parquet`, `steps.arrow`).
    pub fn extension(self) -> &'static str {
        match self {
            Format::Parquet => "parquet",
            Format::Arrow => "arrow",
        }
    }
}

/// A piece of a table (a rank's events, say) encoded on its own, where its rows are (a worker
/// holding one rank): its bytes, and what the file's footer says of it ([`Assembly`] places
/// it). The same columns give the same bytes wherever they are encoded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Piece {
    pub bytes: Vec<u8>,
    pub meta: PieceMeta,
}

/// What a file's footer says of a piece, its offsets counted from the piece's first byte
/// (small: it crosses to the thread that joins the pieces while the bytes are transferred).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum PieceMeta {
    /// A row group (`None`: the piece has no rows, and Parquet writes no row group for it).
    Parquet(Option<parquet::RowGroupMeta>),
    Arrow(arrow::Block),
}

/// One piece of a table: the schema's columns, one length.
pub fn encode_piece(format: Format, schema: &Schema, cols: &[Column]) -> Result<Piece, ColumnarError> {
    Ok(match format {
        Format::Parquet => match parquet::encode_piece(schema, cols)? {
            Some((bytes, g)) => Piece { bytes, meta: PieceMeta::Parquet(Some(g)) },
            None => Piece { bytes: Vec::new(), meta: PieceMeta::Parquet(None) },
        },
        Format::Arrow => {
            let (bytes, b) = arrow::encode_piece(schema, cols)?;
            Piece { bytes, meta: PieceMeta::Arrow(b) }
        }
    })
}

/// A file put together from its pieces: [`Assembly::head`], each piece's bytes in order (each
/// [`Assembly::place`]d as it goes), then [`Assembly::tail`]. [`Writer`] is this over an
/// output; the app joins pieces its workers encoded.
#[derive(Debug, Clone)]
pub struct Assembly {
    format: Format,
    schema: Schema,
    /// Bytes so far (the head's and the pieces placed).
    pos: u64,
    groups: Vec<parquet::RowGroupMeta>,
    blocks: Vec<arrow::Block>,
}

impl Assembly {
    /// An assembly and the file's opening bytes.
    pub fn new(format: Format, schema: Schema) -> Result<(Assembly, Vec<u8>), ColumnarError> {
        let head = match format {
            Format::Parquet => parquet::head(),
            Format::Arrow => arrow::head(&schema)?,
        };
        let a = Assembly { format, schema, pos: head.len() as u64, groups: Vec::new(), blocks: Vec::new() };
        Ok((a, head))
    }

    /// A piece of `len` bytes written next: where its footer entry points. A piece of the other
    /// format is refused.
    pub fn place(&mut self, meta: &PieceMeta, len: usize) -> Result<(), ColumnarError> {
        let base = i64::try_from(self.pos).map_err(|_| ColumnarError::TooLarge)?;
        match (self.format, meta) {
            (Format::Parquet, PieceMeta::Parquet(g)) => {
                self.groups.extend(g.clone().map(|g| g.shifted(base)))
            }
            (Format::Arrow, PieceMeta::Arrow(b)) => self.blocks.push(b.shifted(base)),
            _ => return Err(ColumnarError::Schema),
        }
        self.pos += len as u64;
        Ok(())
    }

    /// The file's end.
    pub fn tail(&self) -> Result<Vec<u8>, ColumnarError> {
        match self.format {
            Format::Parquet => parquet::tail(&self.schema, &self.groups),
            Format::Arrow => arrow::tail(&self.schema, &self.blocks),
        }
    }

    pub fn schema(&self) -> &Schema {
        &self.schema
    }
}

/// A table being written in either format, piece by piece (a row group / record batch each).
#[derive(Debug)]
pub struct Writer<W: Write> {
    out: W,
    assembly: Assembly,
}

impl<W: Write> Writer<W> {
    pub fn new(format: Format, mut out: W, schema: Schema) -> Result<Self, ColumnarError> {
        let (assembly, head) = Assembly::new(format, schema)?;
        out.write_all(&head)?;
        Ok(Writer { out, assembly })
    }

    /// One piece: the schema's columns, one length.
    pub fn write(&mut self, cols: &[Column]) -> Result<(), ColumnarError> {
        let piece = encode_piece(self.assembly.format, &self.assembly.schema, cols)?;
        self.write_piece(&piece)
    }

    /// A piece encoded elsewhere ([`encode_piece`] with this table's format and schema).
    pub fn write_piece(&mut self, piece: &Piece) -> Result<(), ColumnarError> {
        self.assembly.place(&piece.meta, piece.bytes.len())?;
        self.out.write_all(&piece.bytes)?;
        Ok(())
    }

    /// The footer; gives the output back.
    pub fn finish(mut self) -> Result<W, ColumnarError> {
        self.out.write_all(&self.assembly.tail()?)?;
        self.out.flush()?;
        Ok(self.out)
    }
}

/// A whole table as one file's bytes.
pub fn to_bytes(format: Format, t: &Table) -> Result<Vec<u8>, ColumnarError> {
    let mut w = Writer::new(format, Vec::new(), t.schema())?;
    w.write(&t.columns)?;
    w.finish()
}

/// A byte count as the formats' 32-bit size.
fn size32(n: usize) -> Result<i32, ColumnarError> {
    i32::try_from(n).map_err(|_| ColumnarError::TooLarge)
}
