//! `collective_mismatch`: a hang or mismatch. The sequence engine ([`crate::sequence`]) compares
//! each rank's collectives per process group; a rank that did not issue what the others did, or
//! issued another shape, is the first divergence, and the waiters' time is waiting up to the
//! timeout, not bandwidth. The finding says it the way the engine words it
//! ([`crate::sequence::text`]); its figure is how long the ranks were stuck (`waited_ns`), not a
//! saving per step.
//!
//! A stopped job is judged first: the late-rank, arrival-jitter and step-jitter causes read
//! every step's waits and times, and a hang's last steps are its own waits, so they are not
//! run; the other causes read only the steps that ran to the end.

use super::prelude::*;

pub(super) static CAUSE: Cause = Cause {
    id: CauseId::CollectiveMismatch,
    finds: &[FindingId::CollectiveMismatch],
    stage: Stage::Stopped,
    explains: &[],
    part_of: None,
    excludes: &[CauseId::LateRank, CauseId::ArrivalJitter, CauseId::StepJitter],
    names_part: None,
    find,
};

/// Every hang or mismatch the sequence engine found: the first divergence of each group (the
/// arbitration reports the first).
fn find(cx: &Ctx<'_>, _: &Found) -> Vec<Finding> {
    use crate::sequence::{DiagnosisKind, DivergenceClass};
    let (a, ops) = (cx.a, cx.ops);
    let Some(seq) = &a.sequence else { return Vec::new() };
    let mut out = Vec::new();
    for d in seq.diagnoses.iter().filter(|d| matches!(d.kind, DiagnosisKind::Hang | DiagnosisKind::Mismatch))
    {
        let div = seq
            .groups
            .iter()
            .find(|g| Some(&g.pg) == d.pg.as_ref())
            .and_then(|g| g.divergences.iter().find(|v| Some(v.position) == d.position));
        let waited = div
            .map(|v| {
                v.sides.iter().flat_map(|s| s.waits.iter()).filter_map(|w| w.waited_ns).max().unwrap_or(0)
            })
            .or(d.waited_ns)
            .unwrap_or(0);
        let steps: Vec<u32> = {
            let mut v: Vec<u32> = div
                .map(|v| v.sides.iter().filter_map(|s| s.record.step).collect())
                .unwrap_or_else(|| d.steps.clone());
            v.sort_unstable();
            v.dedup();
            v
        };
        let label = div.and_then(|v| v.sides.iter().find_map(|s| s.record.label.clone()));
        let shape =
            div.is_some_and(|v| v.class == DivergenceClass::Mismatch && !v.shifts.iter().any(|_| true));
        let fix = if shape {
            "Make every rank pass the same shapes and dtypes to each collective: look for a rank-dependent tensor size (an uneven last batch, a padded or unpadded shard, a parameter only some ranks own). Run once with `TORCH_DISTRIBUTED_DEBUG=DETAIL`, which checks shapes before each collective and names the call.".to_string()
        } else {
            format!(
                "Make every rank issue the same collectives in the same order{}, on the same process group (a call that forgot `group=` goes to the default group): look on the rank(s) named for a collective inside a rank-dependent branch (`if rank == …`, a metric logged by some ranks only), an early `break`/`return`/`continue`, data-dependent control flow, or an exception caught on one rank. Run once with `TORCH_DISTRIBUTED_DEBUG=DETAIL` to fail fast at the first mismatch, and keep Flight Recorder on (`TORCH_FR_BUFFER_SIZE`, `TORCH_FR_DUMP_TEMP_FILE`) to get the stacks of a hang.",
                label.as_deref().map(|l| format!(" (the one that diverged was issued in `{l}`)")).unwrap_or_default()
            )
        };
        let mut evidence = Evidence::default();
        if waited > 0 {
            evidence.insert(K::WaitedNs, waited as f64);
        }
        if let Some(t) = div.and_then(|v| v.timeout) {
            evidence.insert(K::TimeoutMs, t.ms as f64);
        }
        evidence.insert(K::PartialCollectives, ops.iter().filter(|o| o.partial).count() as f64);
        out.push(Finding {
            id: FindingId::CollectiveMismatch,
            severity: Severity::High,
            message: d.sentence.clone(),
            fix,
            ranks: d.ranks.clone(),
            steps,
            evidence,
            quotes: Vec::new(),
            quotes_total: 0,
            symptoms: vec![FindingId::Hang],
            location: None,
            // The job stops: every step it does not run is lost.
            impact_ns: waited,
        });
    }
    out
}
