//! "Tables (Parquet)" and "Tables (Arrow)": the tables of `rankscope export` (docs/columnar.md)
//! built in this tab, saved as one tar (`export::tar`'s ustar, a member per table). The
//! analysis' tables (`steps`, `collective_stats`, `groups`, `findings`, `operators`) are made
//! here from the job's analysis; the `events` table is written rank by rank by the workers that
//! hold the events, as the merged trace is: each encodes its rank's piece (a row group / record
//! batch, `columnar::encode_piece`) under the job's rank and offset, the pieces come back as
//! byte arrays beside what the footer needs of them, and [`columnar::Assembly`] joins them with
//! the file's head and footer. The file is never one buffer: the tar is a `Blob` of its parts.
//!
//! **Redaction** ("redact names", docs/redaction.md): under a key phrase (the user's, or one
//! drawn for this export) every table is redacted as `rankscope export --redact-key` redacts
//! it: the analysis' tables here from the analysis redacted as the CLI redacts it, each rank's
//! events in its worker from its own names (a token is the keyed hash of its name, so one name
//! has one token on every rank and in every table). The tar's `redaction.json` is what all of
//! them kept, hashed and removed: each redactor's names ([`Ledger`]) merged, a name met on
//! several ranks counted once, as the CLI's one redactor counts it.
//!
//! The `collectives` table is measured again here from the parts the job was combined from
//! (the tab holds them: `JobView::measurable`), as `rankscope export` measures its job again;
//! a copy of the parts and the matched collectives live while it is written.
//!
//! Not here: the events and collectives of a job digest (it holds neither).

use std::collections::BTreeMap;
use std::rc::Rc;

use js_sys::{Array, Uint8Array};
use rankscope_core::analyze::Analysis;
use rankscope_core::export::columnar::{self, tables, Assembly, Format, PieceMeta, Schema, TableName};
use rankscope_core::export::tar;
use rankscope_core::redact::{self, Key, Ledger, Redactor};

use crate::protocol::{Answer, Query, RankId};
use crate::state::JobView;

/// The tables the tab makes itself (from the analysis, and `collectives` from the parts), in
/// the CLI's order.
const IN_TAB: [TableName; 6] = [
    TableName::Steps,
    TableName::Collectives,
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
    /// What each rank's redaction kept, hashed and removed (redacted only).
    ledgers: BTreeMap<RankId, Ledger>,
    failed: bool,
    /// The key phrase the tables are redacted under (none: plain).
    redact: Option<Redaction>,
    /// The job exported (its parts measure the collectives).
    job: Option<Rc<JobView>>,
}

/// A redaction's key phrase: the user's (`--redact-key`), or one drawn for this export
/// (`--redact`: the tokens agree within the export only, and `redaction.json` says so).
#[derive(Debug, Clone)]
pub struct Redaction {
    pub phrase: String,
    pub drawn: bool,
}

/// What a tables export gives back when it ends: the tar's parts and its name, or why not.
pub type Done = Result<(Array, String), String>;

impl TablesExport {
    /// A new export of `job`'s tables (request `req`): its questions, one per rank whose
    /// events a worker holds, `(rank id, query)`. With `redact`, every table is redacted
    /// under that key phrase.
    pub fn start(
        job: &Rc<JobView>,
        format: Format,
        req: u32,
        redact: Option<Redaction>,
    ) -> (TablesExport, Vec<(RankId, Query)>) {
        let order = job.export_ids.clone();
        let queries = order
            .iter()
            .zip(&job.export.ranks)
            .map(|(id, p)| {
                (
                    *id,
                    Query::Table {
                        format,
                        rank: p.rank,
                        offset_ns: p.offset_ns,
                        redact: redact.as_ref().map(|r| r.phrase.clone()),
                    },
                )
            })
            .collect();
        let t = TablesExport {
            req,
            format: Some(format),
            order,
            pieces: BTreeMap::new(),
            ledgers: BTreeMap::new(),
            failed: false,
            redact,
            job: Some(job.clone()),
        };
        (t, queries)
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
            (Answer::Piece { meta, schema, ledger }, Some(b)) => {
                self.pieces.insert(id, (b, *meta, *schema));
                if let Some(l) = ledger {
                    self.ledgers.insert(id, *l);
                }
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
        let mut red = self.redact.as_ref().map(|r| Redactor::new(Key::from_phrase(&r.phrase)));
        let redacted = match &mut red {
            Some(r) => Some(redacted_analysis(r, a)?),
            None => None,
        };
        let a = redacted.as_ref().unwrap_or(a);
        for name in IN_TAB {
            let t = match name {
                TableName::Collectives => self.job.as_ref().and_then(|j| j.measurable.collectives()),
                _ => tables::from_analysis(a, name),
            };
            if let Some(mut t) = t {
                if let Some(r) = &mut red {
                    redact::table::redact_table(r, &mut t);
                }
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
        if let Some(r) = &red {
            // The ranks' names first, as the CLI's one redactor gathers them before the
            // analysis': a string two redactors judged differently keeps the first kind.
            let mut all = Ledger::default();
            for id in &self.order {
                all.merge(self.ledgers.remove(id).unwrap_or_default());
            }
            all.merge(r.ledger());
            all.given = !self.redact.as_ref().is_some_and(|r| r.drawn);
            tar::write_file(&mut end, "redaction.json", all.statement().json().as_bytes())
                .map_err(|e| e.to_string())?;
        }
        tar::write_end(&mut end).map_err(|e| e.to_string())?;
        parts.push(&Uint8Array::from(&end[..]));
        Ok((parts, format!("rankscope-tables-{ext}.tar")))
    }
}

/// The analysis redacted as `rankscope export --redact` redacts the job's output
/// ([`redact::job::redact_output`]): its names gathered into `r`, then every string rewritten.
fn redacted_analysis(r: &mut Redactor, a: &Analysis) -> Result<Analysis, String> {
    let mut out = rankscope_core::job::JobOutput {
        analysis: a.clone(),
        fabric: None,
        flight_recorder: None,
        failed: Vec::new(),
    };
    redact::job::redact_output(r, &mut out).map_err(|e| e.to_string())?;
    Ok(out.analysis)
}
