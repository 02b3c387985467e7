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

/// One column's values, typed; `None` is a null.
#[derive(Debug, Clone, PartialEq)]
pub enum ColumnData {
    I64(Vec<Option<i64>>),
    F64(Vec<Option<f64>>),
    Utf8(Vec<Option<String>>),
    Bool(Vec<Option<bool>>),
}

/// The type of a column.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
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
#[derive(Debug, Clone, PartialEq, Eq)]
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
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
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

/// A table being written in either format, piece by piece.
#[derive(Debug)]
pub enum Writer<W: Write> {
    Parquet(parquet::ParquetWriter<W>),
    Arrow(arrow::ArrowWriter<W>),
}

impl<W: Write> Writer<W> {
    pub fn new(format: Format, out: W, schema: Schema) -> Result<Self, ColumnarError> {
        Ok(match format {
            Format::Parquet => Writer::Parquet(parquet::ParquetWriter::new(out, schema)?),
            Format::Arrow => Writer::Arrow(arrow::ArrowWriter::new(out, schema)?),
        })
    }

    /// One piece: the schema's columns, one length.
    pub fn write(&mut self, cols: &[Column]) -> Result<(), ColumnarError> {
        match self {
            Writer::Parquet(w) => w.write(cols),
            Writer::Arrow(w) => w.write(cols),
        }
    }

    /// The footer; gives the output back.
    pub fn finish(self) -> Result<W, ColumnarError> {
        match self {
            Writer::Parquet(w) => w.finish(),
            Writer::Arrow(w) => w.finish(),
        }
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

/// Writes and counts.
#[derive(Debug)]
struct Counted<W: Write> {
    out: W,
    pos: u64,
}

impl<W: Write> Counted<W> {
    fn put(&mut self, b: &[u8]) -> io::Result<()> {
        self.out.write_all(b)?;
        self.pos += b.len() as u64;
        Ok(())
    }
}
