//! "Tables (Parquet)" and "Tables (Arrow)": the tables of `rankscope export` (docs/columnar.md)
//! built in this tab, saved as one tar (`export::tar`'s ustar, a member per table). The
//! analysis' tables (`steps`, `collective_stats`, `groups`, `findings`, `operators`) are made
//! here from the job's analysis; the `events` table is written rank by rank by the workers that
//! hold the events, as the merged trace is: each encodes its rank's piece (a row group / record
//! batch, `columnar::encode_piece`) under the job's rank and offset, the pieces come back as
//! byte arrays beside what the footer needs of them, and [`columnar::Assembly`] joins them with
//! the file's head and footer. The file is never one buffer: the tar is a `Blob` of its parts.
//!
//! Not here: `collectives` (the matched collectives' members are measured while the job is
//! combined and not kept by the tab; `rankscope export` and the npm package write it), and the
//! events of a job digest (it holds none).

use std::collections::BTreeMap;

use js_sys::{Array, Uint8Array};
use rankscope_core::analyze::Analysis;
use rankscope_core::export::columnar::{self, tables, Assembly, Format, PieceMeta, Schema, TableName};
use rankscope_core::export::tar;

use crate::protocol::{Answer, Query, RankId};
use crate::state::JobView;

/// The tables the tab makes from the analysis alone, in the CLI's order.
const FROM_ANALYSIS: [TableName; 5] = [
    TableName::Steps,
    TableName::CollectiveStats,
    TableName::Groups,
    TableName::Findings,
    TableName::Operators,
];

/// A tables export in progress: the ranks asked, the pieces in.
#[derive(Default, Debug)]
pub struct TablesExport {
    pub req: u32,
    format: Option<Format>,
    /// The ranks whose events are written, in the job's order.
    order: Vec<RankId>,
    pieces: BTreeMap<RankId, (Uint8Array, PieceMeta, Schema)>,
    failed: bool,
}

/// What a tables export gives back when it ends: the tar's parts and its name, or why not.
pub type Done = Result<(Array, String), String>;

impl TablesExport {
    /// A new export of `job`'s tables (request `req`): its questions, one per rank whose
    /// events a worker holds, `(rank id, query)`.
    pub fn start(job: &JobView, format: Format, req: u32) -> (TablesExport, Vec<(RankId, Query)>) {
        let order = job.export_ids.clone();
        let queries = order
            .iter()
            .zip(&job.export.ranks)
            .map(|(id, p)| (*id, Query::Table { format, rank: p.rank, offset_ns: p.offset_ns }))
            .collect();
        (TablesExport { req, format: Some(format), order, pieces: BTreeMap::new(), failed: false }, queries)
    }

    /// The ranks asked.
    pub fn ranks(&self) -> usize {
        self.order.len()
    }

    /// The pieces in so far.
    pub fn done(&self) -> usize {
        self.pieces.len()
    }

    /// One worker's answer: `Some` once the export ends (every piece in, or one failed).
    pub fn on_answer(
        &mut self,
        a: &Analysis,
        id: RankId,
        answer: Answer,
        bytes: Option<Uint8Array>,
    ) -> Option<Done> {
        if self.failed {
            return None;
        }
        match (answer, bytes) {
            (Answer::Piece { meta, schema }, Some(b)) => {
                self.pieces.insert(id, (b, *meta, *schema));
            }
            (Answer::Failed(e), _) => {
                self.failed = true;
                return Some(Err(e));
            }
            _ => {
                self.failed = true;
                return Some(Err("a piece of the events table came without its bytes".into()));
            }
        }
        (self.pieces.len() == self.order.len()).then(|| self.finish(a))
    }

    /// The tar: the analysis' tables, then the events (when any rank's are held), then the end.
    pub fn finish(&mut self, a: &Analysis) -> Done {
        let format = self.format.ok_or("no export started")?;
        let ext = format.extension();
        let bad = |e: columnar::ColumnarError| e.to_string();
        let parts = Array::new();
        let mut small = Vec::new();
        for name in FROM_ANALYSIS {
            if let Some(t) = tables::from_analysis(a, name) {
                let bytes = columnar::to_bytes(format, &t).map_err(bad)?;
                tar::write_file(&mut small, &format!("{name}.{ext}"), &bytes).map_err(|e| e.to_string())?;
            }
        }
        parts.push(&Uint8Array::from(&small[..]));
        let pieces: Vec<(Uint8Array, PieceMeta, Schema)> =
            self.order.iter().filter_map(|id| self.pieces.remove(id)).collect();
        if let Some((_, _, schema)) = pieces.first() {
            let (mut asm, head) = Assembly::new(format, schema.clone()).map_err(bad)?;
            let mut size = head.len() as u64;
            for (b, meta, s) in &pieces {
                if s != asm.schema() {
                    return Err("the ranks' events tables differ in their columns".into());
                }
                asm.place(meta, b.length() as usize).map_err(bad)?;
                size += u64::from(b.length());
            }
            let tail = asm.tail().map_err(bad)?;
            size += tail.len() as u64;
            let header = tar::header(&format!("events.{ext}"), size).map_err(|e| e.to_string())?;
            parts.push(&Uint8Array::from(&header[..]));
            parts.push(&Uint8Array::from(&head[..]));
            for (b, _, _) in &pieces {
                parts.push(b);
            }
            let mut end = tail;
            end.resize(end.len() + tar::padding(size), 0);
            parts.push(&Uint8Array::from(&end[..]));
        }
        let mut end = Vec::new();
        tar::write_end(&mut end).map_err(|e| e.to_string())?;
        parts.push(&Uint8Array::from(&end[..]));
        Ok((parts, format!("rankscope-tables-{ext}.tar")))
    }
}
