//! Diagnostics: partial failure is data.
//!
//! Every problem met while reading or normalizing a file becomes a counted diagnostic with a
//! kind, a severity and the byte offset of its first occurrence (offsets count bytes of the
//! decompressed JSON text, which is what a user can open and look at). Import never aborts on a
//! problem it can repair or skip; only "this is not a trace at all" is an error.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

pub use super::severity::Severity;

/// What went wrong. The `snake_case` names are part of the JSON schema.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DiagKind {
    /// The file ends inside the trace; everything complete before the cut was kept.
    Truncated,
    /// The gzip stream is corrupt or cut; what decompressed before the fault was kept.
    GzipCorrupt,
    /// An event could not be parsed as JSON and was skipped.
    MalformedEvent,
    /// A bare word such as `N/A`, `NaN` or `...` stood where a JSON value belongs; read as null.
    BareWord,
    /// An integer beyond 64 bits; saturated.
    IntOverflow,
    /// A string with invalid UTF-8; bad bytes became U+FFFD.
    InvalidUtf8,
    /// An event without `ph`; skipped.
    MissingPhase,
    /// A timed event without (a usable) `ts`; skipped.
    MissingTimestamp,
    /// A complete (`X`) event without `dur`; read as 0.
    MissingDuration,
    /// A negative duration; clamped to 0.
    NegativeDuration,
    /// An `E` event with no open `B` on its thread; skipped.
    UnmatchedEnd,
    /// A `B` event never closed; closed at the last timestamp of its thread.
    UnclosedBegin,
    /// An event phase rankscope does not model (async `b`/`e`/`n`, samples, objects); counted only.
    UnsupportedPhase,
    /// Bytes after the end of the JSON document; ignored.
    TrailingData,
    /// `displayTimeUnit` says `ns`, yet Kineto's `ts`/`dur` are microseconds regardless.
    DisplayTimeUnitIgnored,
    /// A top-level metadata value (distributedInfo, deviceProperties...) had an unexpected shape.
    BadMetadata,
    /// The trace has no `ProfilerStep#N` markers: it is treated as one whole-trace step.
    NoSteps,
    /// The rank was taken from the file name, not from `distributedInfo`.
    RankFromFileName,
    /// The rank was taken from the load order: neither `distributedInfo` nor the name told it.
    RankFromLoadOrder,
    /// The rank was given by the user (`--rank FILE=N`).
    RankFromUser,
    /// Two files claim the same rank.
    DuplicateRank,
    /// A GPU event whose launching runtime call could not be found.
    UnlinkedGpuEvent,
    /// A top-level member longer than the parser's unit limit; skipped without being read.
    OversizedValue,
    /// A string longer than the parser's string limit; cut.
    LongString,
    /// A number outside the range it can have (a time beyond ±146 years, a negative world size,
    /// a rank beyond `u32`); the value was not used.
    OutOfRange,
    /// An event far outside the rest of its trace's time span; kept, but left out of the span.
    TimeOutlier,
}

impl DiagKind {
    /// The default severity of this kind.
    pub fn severity(self) -> Severity {
        use DiagKind::*;
        match self {
            Truncated | GzipCorrupt | MalformedEvent | MissingPhase | MissingTimestamp | UnmatchedEnd
            | OversizedValue => Severity::DATA_LOSS,
            BareWord | IntOverflow | InvalidUtf8 | MissingDuration | NegativeDuration | UnclosedBegin
            | LongString | OutOfRange | TimeOutlier => Severity::REPAIRED,
            DuplicateRank => Severity::ERROR,
            UnsupportedPhase
            | TrailingData
            | DisplayTimeUnitIgnored
            | BadMetadata
            | NoSteps
            | RankFromFileName
            | RankFromLoadOrder
            | RankFromUser
            | UnlinkedGpuEvent => Severity::Info,
        }
    }
}

/// One kind of problem in one file: how often, where first, and an example.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Diagnostic {
    pub kind: DiagKind,
    /// Spelled `info`, `repaired`, `data_loss`, `error` ([`Severity`]).
    #[serde(with = "super::severity::diagnostic")]
    pub severity: Severity,
    pub count: u64,
    /// Byte offset of the first occurrence in the decompressed text, when it has one.
    pub first_offset: Option<u64>,
    /// A human-readable description of the first occurrence.
    pub message: String,
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
