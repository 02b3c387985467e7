//! The one severity ladder of every report.

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// How much something matters: one ladder for the findings of the analysis, the diagnostics of
/// a file, the NCCL reports' findings and diagnostics, and the sequence engine's hangs (a hang or
/// mismatch is [`Severity::High`]). Each report keeps the words its JSON has always used:
///
/// | level    | findings (`rankscope.analysis`) | file diagnostics (`inspect`, `diagnostics[]`) | NCCL reports (`nccl`, `nccl-tests`) |
/// |----------|--------|-------------|-----------|
/// | `Info`   | `info`   | `info`      | `info`    |
/// | `Low`    | `low`    | `repaired`  | (none)    |
/// | `Medium` | `medium` | `data_loss` | `warning` |
/// | `High`   | `high`   | `error`     | `error`   |
///
/// The order is the ladder's in every report (sorting by it sorts each report as before), the
/// plain `Serialize` writes the findings' words, a field of a diagnostic or an NCCL report says
/// its own with `#[serde(with = …)]` ([`diagnostic`], [`nccl`]), and every spelling reads back
/// (no two reports use one word for different levels). The constants name a level in the words
/// of the place that sets it ([`Severity::REPAIRED`], [`Severity::WARNING`], …).
/// docs/analysis-schema.md ("Severity") has the same table.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Severity {
    /// Worth knowing; nothing to act on (a diagnostic: nothing was changed).
    Info,
    /// A small effect (a diagnostic: something was repaired, a value replaced or a duration
    /// clamped, and the event kept).
    Low,
    /// Worth acting on (a diagnostic: something was lost, an event skipped or a truncated tail
    /// dropped; an NCCL warning).
    Medium,
    /// The first thing to fix (a diagnostic: the input cannot be used as asked, two files
    /// claiming one rank; an NCCL error; a hang).
    High,
}

impl Severity {
    /// A diagnostic's "something was repaired".
    pub const REPAIRED: Severity = Severity::Low;
    /// A diagnostic's "something was lost".
    pub const DATA_LOSS: Severity = Severity::Medium;
    /// An NCCL report's warning.
    pub const WARNING: Severity = Severity::Medium;
    /// A diagnostic's or an NCCL report's error.
    pub const ERROR: Severity = Severity::High;

    /// The findings' word (`info`, `low`, `medium`, `high`).
    pub fn name(self) -> &'static str {
        match self {
            Severity::Info => "info",
            Severity::Low => "low",
            Severity::Medium => "medium",
            Severity::High => "high",
        }
    }

    /// A file diagnostic's word (`info`, `repaired`, `data_loss`, `error`).
    pub fn diagnostic_name(self) -> &'static str {
        match self {
            Severity::Info => "info",
            Severity::Low => "repaired",
            Severity::Medium => "data_loss",
            Severity::High => "error",
        }
    }

    /// An NCCL report's word (`info`, `warning`, `error`); the ladder's `Low`, which no NCCL
    /// report sets, reads as `info`.
    pub fn nccl_name(self) -> &'static str {
        match self {
            Severity::Info | Severity::Low => "info",
            Severity::Medium => "warning",
            Severity::High => "error",
        }
    }

    /// The level a word of any report names.
    pub fn parse(word: &str) -> Option<Severity> {
        Some(match word {
            "info" => Severity::Info,
            "low" | "repaired" => Severity::Low,
            "medium" | "data_loss" | "warning" => Severity::Medium,
            "high" | "error" => Severity::High,
            _ => return None,
        })
    }
}

impl std::fmt::Display for Severity {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

impl Serialize for Severity {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.name())
    }
}

impl<'de> Deserialize<'de> for Severity {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let w = <std::borrow::Cow<'de, str>>::deserialize(d)?;
        Severity::parse(&w).ok_or_else(|| {
            serde::de::Error::unknown_variant(
                &w,
                &["info", "low", "medium", "high", "repaired", "data_loss", "warning", "error"],
            )
        })
    }
}

/// `#[serde(with = "…::severity::diagnostic")]`: a file diagnostic's words.
pub mod diagnostic {
    use super::*;

    pub fn serialize<S: Serializer>(v: &Severity, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(v.diagnostic_name())
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Severity, D::Error> {
        Severity::deserialize(d)
    }
}

/// `#[serde(with = "…::severity::nccl")]`: an NCCL report's words.
pub mod nccl {
    use super::*;

    pub fn serialize<S: Serializer>(v: &Severity, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(v.nccl_name())
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Severity, D::Error> {
        Severity::deserialize(d)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_word_reads_back_as_its_level() {
        for s in [Severity::Info, Severity::Low, Severity::Medium, Severity::High] {
            for w in [s.name(), s.diagnostic_name()] {
                assert_eq!(Severity::parse(w), Some(s), "{w}");
            }
            if s != Severity::Low {
                assert_eq!(Severity::parse(s.nccl_name()), Some(s));
            }
            let json = serde_json::to_string(&s).unwrap_or_default();
            assert_eq!(json, format!("\"{}\"", s.name()));
            assert_eq!(serde_json::from_str::<Severity>(&json).ok(), Some(s));
        }
        assert!(serde_json::from_str::<Severity>("\"fatal\"").is_err());
    }

    #[test]
    fn the_ladder_keeps_each_report_order() {
        assert!(Severity::Info < Severity::REPAIRED && Severity::REPAIRED < Severity::DATA_LOSS);
        assert!(Severity::DATA_LOSS < Severity::ERROR && Severity::WARNING < Severity::ERROR);
    }
}
