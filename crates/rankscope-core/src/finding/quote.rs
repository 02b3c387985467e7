//! The lines of a text input that show a finding (NCCL_DEBUG logs, nccl-tests output): quoted,
//! not measured.

use serde::{Deserialize, Serialize};

/// Longest quoted text kept, in characters.
pub const EVIDENCE_TEXT_MAX: usize = 240;
/// Most lines quoted per finding; [`super::Finding::quotes_total`] says how many there were.
pub const EVIDENCE_MAX: usize = 6;

/// One line of an input that shows a finding (the NCCL reports' `evidence[]`).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct EvidenceLine {
    pub file: String,
    /// 1-based line number in `file`.
    pub line: u32,
    /// The line as written (trimmed, cut to [`EVIDENCE_TEXT_MAX`] characters).
    pub text: String,
}

impl EvidenceLine {
    pub fn new(file: &str, line: u32, text: &str) -> Self {
        let t = text.trim();
        let text = if t.chars().count() > EVIDENCE_TEXT_MAX {
            let mut s: String = t.chars().take(EVIDENCE_TEXT_MAX).collect();
            s.push('…');
            s
        } else {
            t.to_string()
        };
        EvidenceLine { file: file.to_string(), line, text }
    }
}
