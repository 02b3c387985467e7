//! What a set of dumps looks like in rankscope's outputs, shared by the CLI (`rankscope fr`,
//! `rankscope analyze` with dumps) and the app: the `flight_recorder` member of the analysis
//! JSON, and the text block of the report.

use serde::Serialize;

use super::{DumpFormat, RankFrom, RankedDump};
use crate::sequence::{text, Backend, SequenceReport};

/// One dump as the JSON output lists it (its entries are in the report's records).
#[derive(Debug, Serialize)]
pub struct DumpInfo<'a> {
    pub file: &'a str,
    pub rank: u32,
    pub rank_from: RankFrom,
    pub format: DumpFormat,
    pub version: &'a str,
    pub backend: Backend,
    pub comm_lib_version: &'a str,
    pub entries: usize,
    pub diagnostics: &'a [crate::model::Diagnostic],
}

pub fn dump_infos(dumps: &[RankedDump]) -> Vec<DumpInfo<'_>> {
    dumps
        .iter()
        .map(|d| DumpInfo {
            file: &d.dump.file,
            rank: d.rank,
            rank_from: d.rank_from,
            format: d.dump.format,
            version: &d.dump.version,
            backend: d.dump.backend(),
            comm_lib_version: &d.dump.comm_lib_version,
            entries: d.dump.entries.len(),
            diagnostics: &d.dump.diagnostics,
        })
        .collect()
}

/// The `flight_recorder` member of the analysis JSON: the dumps and their report.
#[derive(Debug, Serialize)]
pub struct Member<'a> {
    pub dumps: Vec<DumpInfo<'a>>,
    pub report: &'a SequenceReport,
}

pub fn member<'a>(dumps: &'a [RankedDump], report: &'a SequenceReport) -> Member<'a> {
    Member { dumps: dump_infos(dumps), report }
}

/// The `rankscope.fr` JSON: the dumps, the files that could not be read, the dumps left out,
/// and the report (docs/flight-recorder.md).
pub fn json(
    dumps: &[RankedDump],
    failed: &[crate::inspect::FailedFile],
    skipped: &[super::SkippedDump],
    report: &SequenceReport,
) -> String {
    #[derive(Serialize)]
    struct Output<'a> {
        schema: &'static str,
        version: u32,
        dumps: Vec<DumpInfo<'a>>,
        failed: &'a [crate::inspect::FailedFile],
        skipped: &'a [super::SkippedDump],
        report: &'a SequenceReport,
    }
    let out =
        Output { schema: "rankscope.fr", version: 1, dumps: dump_infos(dumps), failed, skipped, report };
    // Plain values into a string: cannot fail.
    serde_json::to_string_pretty(&out).unwrap_or_default() + "\n"
}

/// The text block for a set of dumps: one line per dump, then the report.
pub fn render(dumps: &[RankedDump], report: &SequenceReport) -> String {
    let mut out = String::new();
    for d in dumps {
        let backend = format!("{:?}", d.dump.backend()).to_lowercase();
        out.push_str(&format!(
            "rank {:<3} {} ({:?}, version {}, {backend}, {} entries)\n",
            d.rank,
            d.dump.file,
            d.dump.format,
            d.dump.version,
            d.dump.entries.len()
        ));
        for x in &d.dump.diagnostics {
            out.push_str(&format!("    {:?} ×{}: {}\n", x.kind, x.count, x.message));
        }
    }
    out.push('\n');
    out.push_str(&text::report(report));
    out
}

/// The Markdown section for the dumps: the text block in a fence longer than any run of
/// backticks inside it (names in a dump are untrusted: none can close the fence).
pub fn markdown_section(dumps: &[RankedDump], report: &SequenceReport) -> String {
    let body = render(dumps, report);
    let longest = crate::escape::longest_backtick_run(&body);
    let fence = "`".repeat((longest + 1).max(3));
    format!("\n## Flight Recorder\n\n{fence}\n{body}{fence}\n")
}
