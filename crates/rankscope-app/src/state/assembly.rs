//! The job made from the loaded ranks once every file is done: ranks decided across files
//! ([`Assembly`]), the core's job API run on their parts, and what the views need of it
//! ([`JobView`]); or, for a job digest, its stored analysis with the traces placed on its ranks.

use std::collections::BTreeMap;
use std::rc::Rc;

use rankscope_core::analyze::{self, Analysis, RankPart};
use rankscope_core::export::{self, ExportPlan};
use rankscope_core::job;
use rankscope_core::normalize::JobError;
use rankscope_core::view::{apply_decision, JobFacts, RankClaim, RankDecision, RankSummary};

use super::files::{rank_of, FileEntry, FileStatus};
use super::{State, View};
use crate::protocol::{FileId, RankId};

/// The NCCL side of the job (`rankscope nccl` over the NCCL_DEBUG logs, `rankscope nccl-tests`
/// over the nccl-tests outputs) and its Flight Recorder dumps, read by the core's job API.
pub use rankscope_core::job::{Fabric, FlightRecorder};

/// The ranks decided across files.
#[derive(Debug, Clone, PartialEq)]
pub struct Assembly {
    /// `(rank id, summary)` sorted by rank, then name.
    pub ranks: Vec<(RankId, Rc<RankSummary>)>,
    pub facts: JobFacts,
    pub errors: Vec<JobError>,
    /// Every loaded rank's decision: the key its summary and part are filed under.
    pub decisions: BTreeMap<RankId, RankDecision>,
}

/// The job, assembled once every file is done: ranks decided across files, facts computed,
/// analysis combined.
#[derive(Debug, Clone, PartialEq)]
pub struct JobView {
    /// `(rank id, summary)` sorted by rank, then name.
    pub ranks: Vec<(RankId, Rc<RankSummary>)>,
    pub facts: JobFacts,
    /// `rankscope analyze --json` of the same files.
    /// Shared with the digest it came from, if any (not copied).
    pub analysis: std::sync::Arc<Analysis>,
    /// Per collective (kind, process group): its earliest execution on any rank (aligned):
    /// `(rank id, start_ns, end_ns)` on that rank's own clock.
    pub first_op: BTreeMap<(String, String), (RankId, i64, i64)>,
    /// Per rank: the alignment's offset (aligned time = own time − offset).
    pub offsets: BTreeMap<RankId, i64>,
    /// Earliest aligned event start over all ranks: time 0 of the merged trace (the export
    /// plan's; without events, the job's earliest start).
    pub origin_ns: i64,
    /// What an export writes (the CLI's plan): the ranks whose trace is loaded, in rank order,
    /// each under its rank with its offset; the worker holding `export_ids[k]` writes the
    /// events of `export.ranks[k]`.
    pub export: ExportPlan,
    pub export_ids: Vec<RankId>,
    /// NCCL logs and nccl-tests output, when any were loaded (the tests are also the analysis'
    /// fabric: `analysis.fabric` places the trace's collectives against them).
    pub fabric: Option<Rc<Fabric>>,
    /// Flight Recorder dumps, when any were loaded: their sequence report, as
    /// `rankscope analyze` adds it under `flight_recorder`.
    pub flight_recorder: Option<Rc<FlightRecorder>>,
    /// The job came from a digest: its file's name (ranks without a loaded trace have no
    /// lanes, and their ids are [`digest_rank`]s, held by no worker).
    pub digest: Option<String>,
    /// Each collective's members across ranks ([`rankscope_core::view::members`]): the
    /// timeline's args panel lists them and jumps between them.
    pub members: Rc<rankscope_core::view::members::Members>,
    /// The cluster metrics beside the traces as the timeline's rows, placed where the metrics
    /// join put the ranks ([`rankscope_core::view::metrics`]); empty without a join.
    pub metrics: Rc<rankscope_core::view::metrics::MetricTracks>,
    /// What the job was combined from, to measure its collectives again for the `collectives`
    /// table (empty for a job digest, which holds no matched collectives).
    pub measurable: Measurable,
}

/// The parts a job was combined from, each under the job's decision for it, and the job's
/// errors: what [`job::measure_ranked`] takes to match the collectives again, as
/// `rankscope export` measures a job held whole. The parts are the ones the tab holds
/// (shared, not copied); compared by identity.
#[derive(Debug, Clone, Default)]
pub struct Measurable(Rc<(Vec<FiledPart>, Vec<JobError>)>);

/// A rank's part under the job's decision for it.
type FiledPart = (RankDecision, Rc<RankPart>);

impl PartialEq for Measurable {
    fn eq(&self, other: &Self) -> bool {
        Rc::ptr_eq(&self.0, &other.0)
    }
}

impl Measurable {
    /// The `collectives` table (`rankscope export`'s, the same rows): the collectives matched
    /// again across the parts. A copy of the parts lives while it is made. None without parts.
    pub fn collectives(&self) -> Option<rankscope_core::export::columnar::Table> {
        let (parts, errors) = &*self.0;
        if parts.is_empty() {
            return None;
        }
        let owned = parts.iter().map(|(d, p)| (d.clone(), (**p).clone())).collect();
        let ops = job::measure_ranked(owned, errors.clone(), &analyze::Options::default()).ops;
        Some(rankscope_core::export::columnar::tables::collectives(&ops))
    }
}

/// The id of a digest rank that has no trace loaded: its file above every real file's.
pub fn digest_rank(index: usize) -> RankId {
    RankId::whole(DIGEST_FILES + index as FileId)
}

const DIGEST_FILES: FileId = 1 << 30;

/// Whether a worker holds rank `id` (its events): a digest rank without its trace has none.
pub fn held(id: RankId) -> bool {
    id.file < DIGEST_FILES
}

impl JobView {
    /// The id of a rank (the first one when several claim it).
    pub fn id_of(&self, rank: u32) -> Option<RankId> {
        self.ranks.iter().find(|(_, s)| s.rank == rank).map(|(id, _)| *id)
    }

    pub fn offset(&self, id: RankId) -> i64 {
        self.offsets.get(&id).copied().unwrap_or(0)
    }
}

impl State {
    /// Once every file is done: the ranks decided across files (once per job), then the job.
    pub(super) fn assemble_when_read(&mut self) {
        let s = self;
        if s.assembly.is_none() && !s.files.is_empty() && !s.loading() {
            s.assemblies = s.assemblies.wrapping_add(1);
            let a = match &s.digest {
                Some((_, d)) => assemble_digest(d, &mut s.files),
                None => assemble(&mut s.files),
            };
            s.assembly = Some(Rc::new(a));
        }
        if s.job.is_none() {
            if let Some(a) = &s.assembly {
                let job = match &s.digest {
                    Some((file, d)) => combine_digest(a, d, &s.files, *file),
                    None => combine(a, &s.files, &s.parts, &s.texts),
                };
                // NCCL text only: the Fabric view is all there is to see.
                if job.ranks.is_empty() && job.fabric.is_some() {
                    s.view = View::Fabric;
                }
                s.job = Some(Rc::new(job));
            }
        }
    }
}

/// Runs the job half of the analysis on the final parts (in rank order, as the CLI's job has
/// them), each keyed by the job's decision for it, and derives what the views need from it.
fn combine(
    a: &Assembly,
    files: &[FileEntry],
    parts: &BTreeMap<RankId, Rc<RankPart>>,
    texts: &BTreeMap<FileId, Rc<Vec<u8>>>,
) -> JobView {
    let keyed: Vec<(RankId, RankDecision, RankPart)> = a
        .ranks
        .iter()
        .filter_map(|(id, _)| Some((*id, a.decisions.get(id)?.clone(), (**parts.get(id)?).clone())))
        .collect();
    let measurable = Measurable(Rc::new((
        a.ranks
            .iter()
            .filter_map(|(id, _)| Some((a.decisions.get(id)?.clone(), parts.get(id)?.clone())))
            .collect(),
        a.errors.clone(),
    )));
    // NCCL text and dumps, in load order (as a folder lists them).
    let texts: Vec<job::TextRef<'_>> = files
        .iter()
        .filter_map(|f| {
            let kinds = f.text.as_deref()?;
            texts.get(&f.id).map(|b| job::TextRef { name: &f.name, kinds, bytes: &b[..] })
        })
        .collect();
    let out = job::combine_ranked(
        keyed.iter().map(|(_, d, p)| (d.clone(), p.clone())).collect(),
        a.errors.clone(),
        &texts,
        &analyze::Options::default(),
    );
    let parts: Vec<(RankId, u32, &RankPart)> = keyed.iter().map(|(id, d, p)| (*id, d.rank, p)).collect();
    let reports = (out.fabric, out.flight_recorder);
    let metrics = metric_tracks(&out.analysis, &texts);
    let mut view = job_view(a, files, &parts, std::sync::Arc::new(out.analysis), reports, None);
    view.metrics = Rc::new(metrics);
    view.measurable = measurable;
    view
}

/// The metric rows of the timeline: the metrics texts (inflated when gzipped) on the ranks the
/// analysis' metrics join placed. The texts are on the page already and a few samples a second
/// per series: read here once, not in the workers (which hold the traces, not these texts).
fn metric_tracks(
    analysis: &Analysis,
    texts: &[job::TextRef<'_>],
) -> rankscope_core::view::metrics::MetricTracks {
    let Some(joined) =
        analysis.beside.as_ref().and_then(|b| b.metrics.as_ref()).and_then(|m| m.join.as_ref())
    else {
        return Default::default();
    };
    let inflated: Vec<(&str, Vec<u8>)> = job::beside_inputs(texts)
        .metrics
        .into_iter()
        .map(|(n, b)| (n, analyze::beside::inflated(b).0))
        .collect();
    let files: Vec<(&str, &[u8])> = inflated.iter().map(|(n, b)| (*n, b.as_slice())).collect();
    rankscope_core::view::metrics::tracks(&files, joined)
}

/// What the views need from the job's outputs and its parts (each with its id and the rank
/// the job filed it under).
fn job_view(
    a: &Assembly,
    files: &[FileEntry],
    parts: &[(RankId, u32, &RankPart)],
    analysis: std::sync::Arc<Analysis>,
    (fabric, flight_recorder): (Option<job::Fabric>, Option<job::FlightRecorder>),
    digest: Option<String>,
) -> JobView {
    let offsets: BTreeMap<RankId, i64> =
        parts.iter().map(|(id, rank, _)| (*id, export::offset_of(&analysis.alignment, *rank))).collect();
    let mut first_op: BTreeMap<(String, String), (RankId, i64, i64)> = BTreeMap::new();
    for (f, _, p) in parts {
        let off = offsets.get(f).copied().unwrap_or(0);
        for i in &p.instances {
            let key = (i.kind.name().to_string(), i.pg.clone());
            let better = first_op
                .get(&key)
                .is_none_or(|&(g, s, _)| i.start_ns - off < s - offsets.get(&g).copied().unwrap_or(0));
            if better {
                first_op.insert(key, (*f, i.start_ns, i.end_ns));
            }
        }
    }
    // The export plan (the CLI's): every rank whose trace a worker holds (a digest's ranks
    // without their trace have none), in the job's order, under the rank each is filed under.
    let first_ns = |id: RankId| rank_of(files, id).and_then(|r| r.first_ns);
    let export_ids: Vec<RankId> = a.ranks.iter().map(|(id, _)| *id).filter(|id| held(*id)).collect();
    let export = ExportPlan::of(
        &analysis,
        export_ids.iter().map(|id| (a.decisions.get(id).map_or(0, |d| d.rank), first_ns(*id))),
    );
    let members = {
        let by_rank: BTreeMap<u32, i64> =
            parts.iter().map(|(id, rank, _)| (*rank, offsets.get(id).copied().unwrap_or(0))).collect();
        let filed: Vec<RankPart> = parts
            .iter()
            .filter(|(id, _, _)| held(*id))
            .map(|(_, rank, p)| {
                let mut p = (*p).clone();
                p.info.rank = *rank;
                p
            })
            .collect();
        Rc::new(rankscope_core::view::members::members(filed, &by_rank))
    };
    let events = export_ids.iter().any(|id| first_ns(*id).is_some());
    let origin_ns = if events { export.origin_ns } else { a.facts.span_start_ns };
    JobView {
        ranks: a.ranks.clone(),
        facts: a.facts.clone(),
        analysis,
        first_op,
        offsets,
        origin_ns,
        export,
        export_ids,
        fabric: fabric.map(Rc::new),
        flight_recorder: flight_recorder.map(Rc::new),
        digest,
        members,
        metrics: Rc::default(),
        measurable: Measurable::default(),
    }
}

/// The job of a digest: its stored analysis (never recomputed) and its parts; each rank's
/// id is the trace placed on it, else a [`digest_rank`].
fn combine_digest(a: &Assembly, d: &job::JobDigest, files: &[FileEntry], digest: FileId) -> JobView {
    // The digest's parts are filed under its ranks already: their key is the rank they carry.
    let parts: Vec<(RankId, u32, &RankPart)> = d
        .files
        .iter()
        .enumerate()
        .map(|(i, (_, p))| {
            let rank = p.info.rank;
            let id = a.ranks.iter().find(|(_, s)| s.rank == rank).map_or(digest_rank(i), |(id, _)| *id);
            (id, rank, p)
        })
        .collect();
    let name = files.get(digest as usize).map(|f| f.name.clone()).unwrap_or_default();
    job_view(a, files, &parts, d.analysis.clone(), d.reports(), Some(name))
}

/// The ranks of a digest: every rank of the job, a trace placed on it by the core
/// ([`job::JobDigest::place`]) giving it its summary (lanes, for the timeline), the others the
/// summary the digest's part gives. A file with a rank of no rank of the job fails with the
/// reason (a digest is a whole job: such a file is another job's).
fn assemble_digest(d: &job::JobDigest, files: &mut [FileEntry]) -> Assembly {
    let (loaded, claims) = loaded_claims(files);
    let placed = d.place(&claims);
    let strays: Vec<RankId> =
        loaded.iter().zip(&placed).filter(|(_, p)| p.is_none()).map(|(id, _)| *id).collect();
    for id in &strays {
        if let Some(f) = files.get_mut(id.file as usize).filter(|f| !f.ranks.is_empty()) {
            let what = if f.holds > 1 { "holds ranks that are" } else { "is" };
            f.status = FileStatus::Failed(format!(
                "{}: {what} not a rank of this job's digest (by its name or its rank)",
                f.name
            ));
            f.ranks.clear();
        }
    }
    let mut by_index: BTreeMap<usize, (RankId, Rc<RankSummary>)> = BTreeMap::new();
    let mut decisions = BTreeMap::new();
    for (id, p) in loaded.into_iter().zip(placed) {
        let (Some(p), Some(r)) = (p, ranks_mut(files, id)) else { continue };
        let mut patched = (*r.summary).clone();
        apply_decision(&mut patched, &p.decision);
        // The rank is the digest's: named as the analysis names it (the file the part was
        // made from), so its row shows the digest's figures.
        if let Some((c, _)) = d.files.get(p.index) {
            patched.file = c.file.clone();
        }
        r.summary = Rc::new(patched);
        decisions.insert(id, p.decision);
        by_index.insert(p.index, (id, r.summary.clone()));
    }
    let mut ranks: Vec<(RankId, Rc<RankSummary>)> = (0..d.files.len())
        .filter_map(|i| by_index.remove(&i).or_else(|| Some((digest_rank(i), Rc::new(d.summary(i)?)))))
        .collect();
    ranks.sort_by(|a, b| (a.1.rank, &a.1.file).cmp(&(b.1.rank, &b.1.file)));
    Assembly {
        facts: JobFacts::from_ranks(ranks.iter().map(|(_, s)| &**s)),
        ranks,
        errors: d.analysis.errors.clone(),
        decisions,
    }
}

/// Rank `id` of `files`, to file it under its decision.
fn ranks_mut(files: &mut [FileEntry], id: RankId) -> Option<&mut super::FileRank> {
    files.get_mut(id.file as usize)?.ranks.get_mut(id.index as usize)
}

/// The loaded ranks and each one's claim on its number: in load order, each file's ranks in the
/// file's order (the order `rankscope analyze` cuts and decides them in).
fn loaded_claims(files: &[FileEntry]) -> (Vec<RankId>, Vec<RankClaim>) {
    files.iter().flat_map(|f| f.rank_ids().zip(f.ranks.iter().map(|r| r.claim.clone()))).unzip()
}

/// Decides ranks across the loaded ranks, once (as the CLI does: `job::decide` over their
/// claims), files each summary under its decision, and computes the job facts.
fn assemble(files: &mut [FileEntry]) -> Assembly {
    let (loaded, claims) = loaded_claims(files);
    let (decided, errors) = job::decide(&claims, &[]);
    let mut ranks = Vec::new();
    let mut decisions = BTreeMap::new();
    for (id, d) in loaded.into_iter().zip(decided) {
        let Some(r) = ranks_mut(files, id) else { continue };
        let mut patched = (*r.summary).clone();
        apply_decision(&mut patched, &d);
        r.summary = Rc::new(patched);
        ranks.push((id, r.summary.clone()));
        decisions.insert(id, d);
    }
    ranks.sort_by(|a, b| (a.1.rank, &a.1.file).cmp(&(b.1.rank, &b.1.file)));
    Assembly { facts: JobFacts::from_ranks(ranks.iter().map(|(_, s)| &**s)), ranks, errors, decisions }
}
