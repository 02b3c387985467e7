//! Diagnostics: partial failure is data.
//!
//! Every problem met while reading or normalizing a file becomes a counted diagnostic with a
//! kind, a severity and the byte offset of its first occurrence (offsets count bytes of the
//! decompressed JSON text, which is what a user can open and look at). Import never aborts on a
//! problem it can repair or skip; only "this is not a trace at all" is an error. The NCCL
//! readers' diagnostics are the same type, placed by file and line instead
//! ([`Diagnostic::in_text`]).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

pub use super::severity::Severity;

crate::named_enum! {
    /// What went wrong. The names are part of the JSON schema.
    pub enum DiagKind {
        /// The file ends inside the trace; everything complete before the cut was kept.
        Truncated => "truncated",
        /// The gzip stream is corrupt or cut; what decompressed before the fault was kept.
        GzipCorrupt => "gzip_corrupt",
        /// An event could not be parsed as JSON and was skipped.
        MalformedEvent => "malformed_event",
        /// A bare word such as `N/A`, `NaN` or `...` stood where a JSON value belongs; read as null.
        BareWord => "bare_word",
        /// An integer beyond 64 bits; saturated.
        IntOverflow => "int_overflow",
        /// A string with invalid UTF-8; bad bytes became U+FFFD.
        InvalidUtf8 => "invalid_utf8",
        /// An event without `ph`; skipped.
        MissingPhase => "missing_phase",
        /// A timed event without (a usable) `ts`; skipped.
        MissingTimestamp => "missing_timestamp",
        /// A complete (`X`) event without `dur`; read as 0.
        MissingDuration => "missing_duration",
        /// A negative duration; clamped to 0.
        NegativeDuration => "negative_duration",
        /// An `E` event with no open `B` on its thread; skipped.
        UnmatchedEnd => "unmatched_end",
        /// A `B` event never closed; closed at the last timestamp of its thread.
        UnclosedBegin => "unclosed_begin",
        /// An event phase rankscope does not model (async `b`/`e`/`n`, samples, objects); counted only.
        UnsupportedPhase => "unsupported_phase",
        /// Bytes after the end of the JSON document; ignored.
        TrailingData => "trailing_data",
        /// `displayTimeUnit` says `ns`, yet Kineto's `ts`/`dur` are microseconds regardless.
        DisplayTimeUnitIgnored => "display_time_unit_ignored",
        /// A top-level metadata value (distributedInfo, deviceProperties...) had an unexpected shape.
        BadMetadata => "bad_metadata",
        /// The trace has no `ProfilerStep#N` markers: it is treated as one whole-trace step.
        NoSteps => "no_steps",
        /// The rank was taken from the file name, not from `distributedInfo`.
        RankFromFileName => "rank_from_file_name",
        /// The rank was taken from the load order: neither `distributedInfo` nor the name told it.
        RankFromLoadOrder => "rank_from_load_order",
        /// The rank was given by the user (`--rank FILE=N`).
        RankFromUser => "rank_from_user",
        /// Two files claim the same rank.
        DuplicateRank => "duplicate_rank",
        /// The file holds several ranks, told apart by processes named `rank N`; this is one.
        RanksInFile => "ranks_in_file",
        /// The file holds several ranks, told apart by the shape of its processes; which rank
        /// each is was assumed (pid = rank, or pid order).
        RanksInFileAssumed => "ranks_in_file_assumed",
        /// Events of a multi-rank file on processes that belong to no rank; left out.
        ProcessesLeftOut => "processes_left_out",
        /// A GPU event whose launching runtime call could not be found.
        UnlinkedGpuEvent => "unlinked_gpu_event",
        /// A top-level member longer than the parser's unit limit; skipped without being read.
        OversizedValue => "oversized_value",
        /// A string longer than the parser's string limit; cut.
        LongString => "long_string",
        /// A number outside the range it can have (a time beyond ±146 years, a negative world size,
        /// a rank beyond `u32`); the value was not used.
        OutOfRange => "out_of_range",
        /// An event far outside the rest of its trace's time span; kept, but left out of the span.
        TimeOutlier => "time_outlier",
        /// An event's `args` could not be kept for the exports (not an object; an `E` event's,
        /// whose slice keeps its `B`'s). Only when args are kept.
        ArgsNotKept => "args_not_kept",
        /// An event's `args` kept for the exports had invalid UTF-8 or raw control characters
        /// in a string; repaired in the copy. Only when args are kept.
        ArgsRepaired => "args_repaired",
        /// NCCL_DEBUG lines without a `HOST:PID:TID [DEV]` header, skipped (no process to give
        /// them to).
        LogHeadlessLines => "log.headless-lines",
        /// nccl-tests rows of two tables alternating in one stream; assigned by increasing size.
        TestsInterleavedTables => "tests.interleaved-tables",
        /// An `Avg bus bandwidth` line with no table before it.
        TestsOrphanAverage => "tests.orphan-average",
        /// nccl-tests rows restarting at a smaller size without a header: a new table.
        TestsRowsRestarted => "tests.rows-restarted",
    }
}

impl DiagKind {
    /// The default severity of this kind.
    pub fn severity(self) -> Severity {
        use DiagKind::*;
        match self {
            Truncated | GzipCorrupt | MalformedEvent | MissingPhase | MissingTimestamp | UnmatchedEnd
            | OversizedValue | ArgsNotKept => Severity::DATA_LOSS,
            BareWord | IntOverflow | InvalidUtf8 | MissingDuration | NegativeDuration | UnclosedBegin
            | LongString | OutOfRange | TimeOutlier | ArgsRepaired => Severity::REPAIRED,
            DuplicateRank => Severity::ERROR,
            TestsInterleavedTables | RanksInFileAssumed | ProcessesLeftOut => Severity::WARNING,
            LogHeadlessLines | TestsOrphanAverage | TestsRowsRestarted => Severity::Info,
            UnsupportedPhase
            | TrailingData
            | DisplayTimeUnitIgnored
            | BadMetadata
            | NoSteps
            | RankFromFileName
            | RankFromLoadOrder
            | RankFromUser
            | RanksInFile
            | UnlinkedGpuEvent => Severity::Info,
        }
    }
}

impl DiagKind {
    /// The name the outputs use (`malformed_event`, `tests.rows-restarted`).
    pub fn name(self) -> &'static str {
        self.as_str()
    }

    /// A problem of a text input (the NCCL readers'), placed by file and line.
    pub fn of_text(self) -> bool {
        matches!(
            self,
            DiagKind::LogHeadlessLines
                | DiagKind::TestsInterleavedTables
                | DiagKind::TestsOrphanAverage
                | DiagKind::TestsRowsRestarted
        )
    }
}

/// One kind of problem in one file: how often, where first, and an example. One type for the
/// traces and the NCCL readers, which write it in two JSON shapes (chosen by the kind,
/// [`DiagKind::of_text`]): a trace's `{kind, severity, count, first_offset, message}` (its file
/// is the record around it: `FileDiagnostic`, the inspect report's file), a text's
/// `{severity, kind, message, file, line}` with the NCCL reports' severity words.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Diagnostic {
    pub kind: DiagKind,
    /// Spelled `info`, `repaired`, `data_loss`, `error` for a trace ([`Severity`]).
    pub severity: Severity,
    pub count: u64,
    /// Byte offset of the first occurrence in the decompressed text, when it has one.
    pub first_offset: Option<u64>,
    /// A human-readable description of the first occurrence.
    pub message: String,
    /// A text input's file (empty for a trace's diagnostic).
    pub file: String,
    /// A text input's first line concerned, if any.
    pub line: Option<u32>,
}

impl Diagnostic {
    /// One problem of a text input, at its file and line, with its kind's severity.
    pub fn in_text(kind: DiagKind, message: String, file: &str, line: Option<u32>) -> Diagnostic {
        Diagnostic {
            kind,
            severity: kind.severity(),
            count: 1,
            first_offset: None,
            message,
            file: file.to_string(),
            line,
        }
    }
}

/// A trace's diagnostic as JSON.
#[derive(Serialize)]
struct InTrace<'a> {
    kind: DiagKind,
    #[serde(with = "super::severity::diagnostic")]
    severity: Severity,
    count: u64,
    first_offset: Option<u64>,
    message: &'a str,
}

/// A text input's diagnostic as JSON (the NCCL reports').
#[derive(Serialize)]
struct InText<'a> {
    #[serde(with = "super::severity::nccl")]
    severity: Severity,
    kind: DiagKind,
    message: &'a str,
    file: &'a str,
    line: Option<u32>,
}

impl Serialize for Diagnostic {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let (kind, severity, message) = (self.kind, self.severity, self.message.as_str());
        if kind.of_text() {
            InText { severity, kind, message, file: &self.file, line: self.line }.serialize(s)
        } else {
            InTrace { kind, severity, count: self.count, first_offset: self.first_offset, message }
                .serialize(s)
        }
    }
}

/// Either shape, as read.
#[derive(Deserialize)]
struct AnyShape {
    kind: DiagKind,
    severity: Severity,
    #[serde(default = "one")]
    count: u64,
    #[serde(default)]
    first_offset: Option<u64>,
    message: String,
    #[serde(default)]
    file: String,
    #[serde(default)]
    line: Option<u32>,
}

fn one() -> u64 {
    1
}

impl<'de> Deserialize<'de> for Diagnostic {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let a = AnyShape::deserialize(d)?;
        Ok(Diagnostic {
            kind: a.kind,
            severity: a.severity,
            count: a.count,
            first_offset: a.first_offset,
            message: a.message,
            file: a.file,
            line: a.line,
        })
    }
}

/// The diagnostics of one file, one entry per kind.
#[derive(Debug, Clone, Default)]
pub struct Diagnostics {
    by_kind: BTreeMap<DiagKind, Diagnostic>,
}

impl Diagnostics {
    /// Records one occurrence. The message is built only for the first one.
    pub fn add(&mut self, kind: DiagKind, offset: Option<u64>, message: impl FnOnce() -> String) {
        self.add_n(kind, 1, offset, message);
    }

    /// Records `n` occurrences at once.
    pub fn add_n(&mut self, kind: DiagKind, n: u64, offset: Option<u64>, message: impl FnOnce() -> String) {
        if n == 0 {
            return;
        }
        match self.by_kind.get_mut(&kind) {
            Some(d) => {
                d.count += n;
                if d.first_offset.is_none() {
                    d.first_offset = offset;
                }
            }
            None => {
                self.by_kind.insert(
                    kind,
                    Diagnostic {
                        kind,
                        severity: kind.severity(),
                        count: n,
                        first_offset: offset,
                        message: message(),
                        file: String::new(),
                        line: None,
                    },
                );
            }
        }
    }

    /// Appends `text` to the message of `kind` (a summary once the whole file is read).
    pub fn append_message(&mut self, kind: DiagKind, text: &str) {
        if let Some(d) = self.by_kind.get_mut(&kind) {
            d.message.push_str(text);
        }
    }

    pub fn get(&self, kind: DiagKind) -> Option<&Diagnostic> {
        self.by_kind.get(&kind)
    }

    pub fn count(&self, kind: DiagKind) -> u64 {
        self.by_kind.get(&kind).map_or(0, |d| d.count)
    }

    /// All diagnostics, most severe first, then by kind.
    pub fn sorted(&self) -> Vec<Diagnostic> {
        let mut v: Vec<Diagnostic> = self.by_kind.values().cloned().collect();
        v.sort_by(|a, b| b.severity.cmp(&a.severity).then(a.kind.cmp(&b.kind)));
        v
    }

    pub fn is_empty(&self) -> bool {
        self.by_kind.is_empty()
    }

    pub fn iter(&self) -> impl Iterator<Item = &Diagnostic> {
        self.by_kind.values()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kind_names_are_the_json_names() {
        // As `rename_all = "snake_case"` spelled them before the NCCL kinds joined.
        assert_eq!(DiagKind::InvalidUtf8.name(), "invalid_utf8");
        assert_eq!(DiagKind::DisplayTimeUnitIgnored.name(), "display_time_unit_ignored");
        for &k in DiagKind::ALL {
            assert_eq!(serde_json::to_string(&k).unwrap_or_default(), format!("\"{}\"", k.name()));
        }
    }

    #[test]
    fn each_shape_reads_back_as_written() {
        let mut d = Diagnostics::default();
        d.add(DiagKind::NegativeDuration, Some(7), || "clamped".into());
        let trace = d.sorted().remove(0);
        let json = serde_json::to_string(&trace).unwrap_or_default();
        assert_eq!(
            json,
            r#"{"kind":"negative_duration","severity":"repaired","count":1,"first_offset":7,"message":"clamped"}"#
        );
        assert_eq!(serde_json::from_str::<Diagnostic>(&json).ok(), Some(trace));
        let text = Diagnostic::in_text(DiagKind::TestsInterleavedTables, "m".into(), "t.txt", Some(4));
        let json = serde_json::to_string(&text).unwrap_or_default();
        assert_eq!(
            json,
            r#"{"severity":"warning","kind":"tests.interleaved-tables","message":"m","file":"t.txt","line":4}"#
        );
        assert_eq!(serde_json::from_str::<Diagnostic>(&json).ok(), Some(text));
    }
}
