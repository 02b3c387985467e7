//! The diagnoses, most important first, from the groups' reports (rule 9 of the parent module's
//! doc).

use super::*;

/// Rule 9.
pub(super) fn diagnose(rep: &SequenceReport) -> Vec<Diagnosis> {
    let mut out = Vec::new();
    let mut firsts: Vec<&Divergence> = rep.groups.iter().filter_map(|g| g.divergences.first()).collect();
    // Ranks whose windows merely end at different collectives, each of which completed quickly
    // (a profiler stopped at different times), are not a hang.
    firsts.retain(|d| {
        let waits: Vec<Option<i64>> =
            d.sides.iter().flat_map(|s| s.waits.iter().map(|w| w.waited_ns)).collect();
        let quick = !waits.is_empty() && waits.iter().all(|w| w.is_some_and(|w| w < 1_000_000_000));
        // Calls told apart only by where they were issued (no sizes) that all completed quickly
        // are the same call under annotations that differ between ranks, not a mismatch.
        let by_origin_only = d.fields.iter().all(|f| *f == Field::Origin);
        !quick || (d.class == DivergenceClass::Mismatch && !by_origin_only)
    });
    let start = |d: &Divergence| d.sides.iter().flat_map(|s| s.waits.iter().filter_map(|w| w.since_ns)).min();
    firsts.sort_by(|a, b| {
        start(a).unwrap_or(i64::MAX).cmp(&start(b).unwrap_or(i64::MAX)).then(a.pg.cmp(&b.pg))
    });
    let mut explained: BTreeSet<u32> = BTreeSet::new();
    for d in firsts {
        let (kind, ranks) = if d.class == DivergenceClass::Mismatch {
            let minority: Vec<u32> = d.sides.iter().skip(1).flat_map(|s| s.ranks.iter().copied()).collect();
            (DiagnosisKind::Mismatch, minority)
        } else {
            (DiagnosisKind::Hang, d.missing.iter().map(|m| m.rank).collect())
        };
        explained.extend(d.missing.iter().map(|m| m.rank));
        explained.extend(ranks.iter().copied());
        out.push(Diagnosis {
            kind,
            pg: Some(d.pg.clone()),
            position: Some(d.position),
            ranks,
            sentence: text::divergence(d, rep),
            steps: Vec::new(),
            waited_ns: None,
        });
    }
    let missing: Vec<u32> = rep.ranks.iter().filter(|r| r.no_input).map(|r| r.rank).collect();
    if missing.len() > text::MANY_MISSING {
        // One diagnosis for many: a world claimed by a `pg_config` of a million ranks is not a
        // million sentences.
        out.push(Diagnosis {
            kind: DiagnosisKind::NoInput,
            pg: None,
            position: None,
            sentence: text::no_input_many(&missing, &rep.sources),
            ranks: missing,
            steps: Vec::new(),
            waited_ns: None,
        });
    } else {
        for r in missing {
            out.push(Diagnosis {
                kind: DiagnosisKind::NoInput,
                pg: None,
                position: None,
                ranks: vec![r],
                sentence: text::no_input(r, &rep.sources),
                steps: Vec::new(),
                waited_ns: None,
            });
        }
    }
    for r in rep.ranks.iter().filter(|r| r.ends_early && !explained.contains(&r.rank)) {
        out.push(Diagnosis {
            kind: DiagnosisKind::EndsEarly,
            pg: None,
            position: None,
            ranks: vec![r.rank],
            sentence: text::ends_early(r, rep),
            steps: Vec::new(),
            waited_ns: None,
        });
    }
    for g in &rep.groups {
        if g.divergences.is_empty() && !g.silent.is_empty() {
            out.push(Diagnosis {
                kind: DiagnosisKind::Hang,
                pg: Some(g.pg.clone()),
                position: None,
                ranks: g.silent.clone(),
                sentence: text::silent(g),
                steps: Vec::new(),
                waited_ns: None,
            });
        }
        let Some(t) = g.timeout else { continue };
        // One per rank: the first such record.
        let mut seen = BTreeSet::new();
        for rec in &g.near_timeout {
            if seen.insert(rec.rank) {
                let w = rec.start_ns.zip(rec.end_ns).map_or(0, |(s, e)| e - s);
                out.push(Diagnosis {
                    kind: DiagnosisKind::NearTimeout,
                    pg: Some(g.pg.clone()),
                    position: Some(rec.position),
                    ranks: vec![rec.rank],
                    sentence: text::near_timeout(rec, w, t),
                    steps: Vec::new(),
                    waited_ns: None,
                });
            }
        }
    }
    out
}
