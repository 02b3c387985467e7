//! A finding's two JSON shapes. The analysis (`rankscope.analysis` v2) writes
//! `{id, severity, message, fix, ranks, steps, evidence{}, symptoms, location, impact_ns}`; the
//! NCCL reports (v1) write `{id, severity, message, fix, evidence[], evidence_total}` with their
//! severity words (`warning`, `error`). Which one is the id's: a finding about text quotes its
//! lines ([`Finding::quotes_text`]). Either reads back.

use serde::{Deserialize, Deserializer, Serialize, Serializer};

use super::*;

/// The analysis' shape.
#[derive(Serialize)]
struct Figured<'a> {
    id: FindingId,
    severity: Severity,
    message: &'a str,
    fix: &'a str,
    ranks: &'a [u32],
    steps: &'a [u32],
    evidence: &'a Evidence,
    symptoms: &'a [FindingId],
    location: &'a Option<Location>,
    impact_ns: i64,
}

/// The NCCL reports' shape.
#[derive(Serialize)]
struct Quoted<'a> {
    id: FindingId,
    #[serde(with = "crate::model::severity::nccl")]
    severity: Severity,
    message: &'a str,
    fix: &'a str,
    evidence: &'a [EvidenceLine],
    evidence_total: u32,
}

impl Serialize for Finding {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let (message, fix) = (self.message.as_str(), self.fix.as_str());
        if self.quotes_text() {
            let (evidence, evidence_total) = (self.quotes.as_slice(), self.quotes_total);
            Quoted { id: self.id, severity: self.severity, message, fix, evidence, evidence_total }
                .serialize(s)
        } else {
            Figured {
                id: self.id,
                severity: self.severity,
                message,
                fix,
                ranks: &self.ranks,
                steps: &self.steps,
                evidence: &self.evidence,
                symptoms: &self.symptoms,
                location: &self.location,
                impact_ns: self.impact_ns,
            }
            .serialize(s)
        }
    }
}

/// `evidence` in either shape: figures by key, or quoted lines.
#[derive(Deserialize)]
#[serde(untagged)]
enum AnyEvidence {
    Figures(Evidence),
    Lines(Vec<EvidenceLine>),
}

/// Either shape, as read.
#[derive(Deserialize)]
struct Either {
    id: FindingId,
    severity: Severity,
    message: String,
    fix: String,
    #[serde(default)]
    ranks: Vec<u32>,
    #[serde(default)]
    steps: Vec<u32>,
    evidence: AnyEvidence,
    #[serde(default)]
    evidence_total: u32,
    #[serde(default)]
    symptoms: Vec<FindingId>,
    #[serde(default)]
    location: Option<Location>,
    #[serde(default)]
    impact_ns: i64,
}

impl<'de> Deserialize<'de> for Finding {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let e = Either::deserialize(d)?;
        let (evidence, quotes) = match e.evidence {
            AnyEvidence::Figures(f) => (f, Vec::new()),
            AnyEvidence::Lines(l) => (Evidence::default(), l),
        };
        Ok(Finding {
            id: e.id,
            severity: e.severity,
            message: e.message,
            fix: e.fix,
            ranks: e.ranks,
            steps: e.steps,
            evidence,
            quotes,
            quotes_total: e.evidence_total,
            symptoms: e.symptoms,
            location: e.location,
            impact_ns: e.impact_ns,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_shape_reads_back_as_written() {
        let mut trace = Finding::quoting(FindingId::HostStall, Severity::High, "m".into(), "f", Vec::new());
        trace.evidence = Evidence::from([(EvidenceKey::StallNs, 4e8)]);
        trace.ranks = vec![2];
        trace.impact_ns = 7;
        let json = serde_json::to_string(&trace).unwrap_or_default();
        assert_eq!(
            json,
            r#"{"id":"host_stall","severity":"high","message":"m","fix":"f","ranks":[2],"steps":[],"evidence":{"stall_ns":400000000.0},"symptoms":[],"location":null,"impact_ns":7}"#
        );
        assert_eq!(serde_json::from_str::<Finding>(&json).ok(), Some(trace));
        let lines = vec![EvidenceLine::new("a.log", 3, "  NCCL WARN x  "); 8];
        let text = Finding::quoting(FindingId::LogNcclWarn, Severity::WARNING, "m".into(), "f", lines);
        let json = serde_json::to_string(&text).unwrap_or_default();
        assert_eq!(
            json,
            r#"{"id":"log.nccl-warn","severity":"warning","message":"m","fix":"f","evidence":[{"file":"a.log","line":3,"text":"NCCL WARN x"}],"evidence_total":1}"#
        );
        assert_eq!(serde_json::from_str::<Finding>(&json).ok(), Some(text));
    }
}
