//! The engine on hand-made sequences (the real dumps are in tests/fr.rs).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::too_many_arguments)]

use super::*;

fn rec(
    pg: &str,
    kind: CollKind,
    seq: Option<i64>,
    shape: &[i64],
    start: i64,
    end: Option<i64>,
    step: u32,
    label: &str,
) -> CollRecord {
    CollRecord {
        in_sizes: vec![shape.to_vec()],
        in_dtypes: vec!["Float".into()],
        ..CollRecord::basic(pg, kind, seq, None, Some(start), end, Some(step), Some(label))
    }
}

/// A trace-like job: per step `grad` ([136]) then `loss` (scalar), 1 ms each; `skip` = (rank,
/// step) leaves `loss` out on that rank, which then stops; the others wait `wait_ns` in it.
fn job(world: u32, steps: u32, skip: Option<(u32, u32)>, wait_ns: i64, seq: bool) -> Vec<RankSeq> {
    let ms = 1_000_000;
    (0..world)
        .map(|rank| {
            let mut records = Vec::new();
            let mut n = 0;
            'steps: for step in 0..steps {
                for (k, (shape, label)) in
                    [(vec![136], "grad_allreduce"), (vec![], "loss_allreduce")].into_iter().enumerate()
                {
                    let t = (step as i64 * 10 + k as i64 * 2) * ms;
                    if skip == Some((rank, step)) && k == 1 {
                        break 'steps;
                    }
                    n += 1;
                    let stuck = skip.is_some_and(|(_, s)| s == step) && k == 1;
                    let end = if stuck { t + wait_ns } else { t + ms };
                    records.push(rec(
                        "0",
                        CollKind::AllReduce,
                        seq.then_some(n),
                        &shape,
                        t,
                        Some(end),
                        step,
                        label,
                    ));
                    if stuck {
                        break 'steps;
                    }
                }
            }
            RankSeq {
                rank,
                source: Source::Trace,
                backend: Backend::Gloo,
                file: format!("rank{rank}.json"),
                records,
            }
        })
        .collect()
}

#[test]
fn agreeing_sequences_have_no_diagnosis() {
    let r = analyze(&job(3, 4, None, 0, true), &SeqOptions::default());
    assert!(r.diagnoses.is_empty(), "{:#?}", r.diagnoses);
    assert_eq!(r.groups.len(), 1);
    assert_eq!(r.groups[0].aligned_by, Alignment::SeqId);
    assert_eq!(r.groups[0].positions, 8);
    // Inferred completion: every member issued #8 alike and it has an end.
    let g = &r.groups[0].ranks[0];
    assert_eq!(g.last_completed.as_ref().map(|x| x.position), Some(8));
    assert_eq!(g.completed_basis, CompletedBasis::Inferred);
}

#[test]
fn the_issue_example_sentence() {
    // Rank 1 skips loss_allreduce in step 4 (the job's 10th collective, #10 by ordinal); the
    // others wait 8.02 s in it.
    for seq in [true, false] {
        let r = analyze(&job(3, 6, Some((1, 4)), 8_020_000_000, seq), &SeqOptions::default());
        let d = r.first_divergence().expect("a divergence");
        assert_eq!(d.class, DivergenceClass::NotIssued);
        assert_eq!(d.position, 10);
        assert_eq!(d.sides[0].ranks, vec![0, 2]);
        assert_eq!(d.missing.iter().map(|m| m.rank).collect::<Vec<_>>(), vec![1]);
        assert_eq!((d.waiting.clone(), d.waited_for.clone()), (vec![0, 2], vec![1]));
        assert_eq!(d.timeout.map(|t| t.source), Some(TimeoutSource::Observed));
        let s = &r.diagnoses[0].sentence;
        assert_eq!(r.diagnoses[0].kind, DiagnosisKind::Hang);
        assert_eq!(
            s,
            "Ranks 0 and 2 waited 8.02 s (ended alike, as by a timeout of 8 s) in all_reduce #10 (step 4, the 2nd of \
             the step, a scalar float32, inside `loss_allreduce`); rank 1 never issued it: its last collective \
             was all_reduce #9 (step 4, the 1st of the step, 136 float32, inside `grad_allreduce`).",
        );
        assert!(r.ranks[1].ends_early);
        assert_eq!(r.diagnoses.len(), 1, "{:#?}", r.diagnoses);
    }
}

#[test]
fn a_given_timeout_and_near_timeout_elsewhere() {
    let mut j = job(2, 3, None, 0, true);
    // Rank 0's first collective took 9 s of a 10 s timeout but completed.
    j[0].records[0].end_ns = Some(9_000_000_000);
    let r = analyze(&j, &SeqOptions { timeout_ms: Some(10_000), ..Default::default() });
    assert_eq!(r.diagnoses.len(), 1, "{:#?}", r.diagnoses);
    assert_eq!(r.diagnoses[0].kind, DiagnosisKind::NearTimeout);
    assert!(
        r.diagnoses[0].sentence.contains("lasted 9.00 s, close to the given timeout of 10 s"),
        "{}",
        r.diagnoses[0].sentence
    );
}

#[test]
fn quick_tails_are_not_a_hang() {
    // Profilers stopped one collective apart: rank 1 has one record fewer, all quick.
    let mut j = job(2, 3, None, 0, true);
    j[1].records.pop();
    let r = analyze(&j, &SeqOptions::default());
    assert!(r.diagnoses.iter().all(|d| d.kind != DiagnosisKind::Hang), "{:#?}", r.diagnoses);
    assert_eq!(r.groups[0].diverging_positions, 1);
}

#[test]
fn shape_mismatch_names_both_shapes() {
    let mut j = job(3, 3, None, 0, true);
    j[2].records[2].in_sizes = vec![vec![139]];
    let r = analyze(&j, &SeqOptions::default());
    let d = &r.diagnoses[0];
    assert_eq!(d.kind, DiagnosisKind::Mismatch);
    assert_eq!(d.ranks, vec![2]);
    assert_eq!(
        d.sentence,
        "Collective #3 does not match across ranks (shape): ranks 0 and 1 issued all_reduce (step 1, the 1st \
         of the step, 136 float32, inside `grad_allreduce`), rank 2 issued all_reduce (step 1, the 1st of the \
         step, 139 float32, inside `grad_allreduce`).",
    );
}

#[test]
fn a_skip_that_went_on_is_a_shift() {
    // Rank 1 skips loss_allreduce in step 1 and carries on: by seq id its #4 is the others' #5.
    let mut j = job(3, 4, None, 0, true);
    let mut r1: Vec<CollRecord> = j[1].records.clone();
    r1.remove(3);
    for (i, r) in r1.iter_mut().enumerate() {
        r.seq = Some(i as i64 + 1);
    }
    j[1].records = r1;
    let r = analyze(&j, &SeqOptions::default());
    let d = r.first_divergence().expect("divergence");
    assert_eq!(d.position, 4);
    assert_eq!(d.class, DivergenceClass::Mismatch);
    assert_eq!(d.shifts.len(), 1);
    assert_eq!(d.shifts[0].rank, 1);
    assert_eq!(d.shifts[0].by, 1);
    assert!(
        r.diagnoses[0]
            .sentence
            .contains("rank 1's next collectives match the others' from #5: it skipped all_reduce #4"),
        "{}",
        r.diagnoses[0].sentence
    );
}

#[test]
fn missing_inputs_and_subgroups() {
    let mut j = job(4, 2, None, 0, true);
    j.remove(3);
    // A pair group {0, 1} where rank 1 issued nothing.
    j[0].records.push(rec(
        "pair",
        CollKind::Broadcast,
        Some(1),
        &[4],
        100_000_000,
        Some(101_000_000),
        1,
        "tp",
    ));
    let opts = SeqOptions {
        world: vec![0, 1, 2, 3],
        world_group: Some("0".into()),
        groups: BTreeMap::from([("pair".to_string(), vec![0, 1])]),
        timeout_ms: None,
    };
    let r = analyze(&j, &opts);
    let kinds: Vec<DiagnosisKind> = r.diagnoses.iter().map(|d| d.kind).collect();
    assert_eq!(kinds, vec![DiagnosisKind::NoInput, DiagnosisKind::Hang], "{:#?}", r.diagnoses);
    assert_eq!(r.diagnoses[0].sentence, "Rank 3 has no trace.");
    assert_eq!(
        r.diagnoses[1].sentence,
        "Rank 1 issued no collective in group `pair`, where rank 0 issued 1."
    );
    assert!(r.ranks[3].no_input);
    assert_eq!(r.groups[0].no_input, vec![3]);
}

#[test]
fn state_is_trusted_on_nccl_only() {
    let mut j = job(2, 2, None, 0, true);
    for s in &mut j {
        s.backend = Backend::Nccl;
        for (i, r) in s.records.iter_mut().enumerate() {
            r.state = if i < 2 { State::Completed } else { State::Started };
        }
    }
    let r = analyze(&j, &SeqOptions::default());
    let g = &r.groups[0].ranks[0];
    assert_eq!(g.completed_basis, CompletedBasis::State);
    assert_eq!(g.last_completed.as_ref().map(|x| x.position), Some(2));
    assert_eq!(g.last_entered.as_ref().map(|x| x.position), Some(4));
}

#[test]
fn text_helpers() {
    assert_eq!(text::ranks(&[0, 2, 3], true), "Ranks 0, 2 and 3");
    assert_eq!(text::ranks(&[1], false), "rank 1");
    assert_eq!(text::ordinal(2), "2nd");
    assert_eq!(text::ordinal(12), "12th");
    assert_eq!(text::ordinal(23), "23rd");
    assert_eq!(text::duration(8_020_000_000), "8.02 s");
    assert_eq!(text::duration(540_000_000_000), "9.0 min");
    assert_eq!(text::timeout(Timeout { ms: 600_000, source: TimeoutSource::BackendDefault }), "10 min");
    assert_eq!(text::dtype("c10::BFloat16"), "bfloat16");
}

/// The marks of the issue's example: the waiting ranks at their record, with the wait; the rank
/// that never issued it at the end of its last collective.
#[test]
fn marks_place_the_divergence_on_every_rank() {
    use marks::{marks, MarkKind};
    let r = analyze(&job(3, 6, Some((1, 4)), 8_020_000_000, true), &SeqOptions::default());
    let m = marks(&r);
    let got: Vec<(u32, MarkKind, bool, &str)> =
        m.iter().map(|m| (m.rank, m.kind, m.named, m.label.as_str())).collect();
    assert_eq!(
        got,
        [
            (0, MarkKind::Issued, false, "all_reduce #10 (step 4) — waited 8.02 s"),
            (1, MarkKind::NotIssued, true, "never issued all_reduce #10; last: all_reduce #9 (step 4)"),
            (2, MarkKind::Issued, false, "all_reduce #10 (step 4) — waited 8.02 s"),
        ]
    );
    let d = r.first_divergence().expect("a divergence");
    let w = &d.sides[0].waits[0];
    assert_eq!((m[0].start_ns, m[0].end_ns), (w.since_ns, w.since_ns.zip(w.waited_ns).map(|(a, b)| a + b)));
    let last = d.missing[0].last.as_ref().and_then(|l| l.end_ns);
    assert!(last.is_some());
    assert_eq!((m[1].start_ns, m[1].end_ns), (last, last));
    // Sequences that agree have no marks.
    assert!(marks(&analyze(&job(3, 6, None, 0, true), &SeqOptions::default())).is_empty());
}
