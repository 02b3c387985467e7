//! A diverging position: the records compared field by field, the sides and the missing ranks
//! (rule 4 of the parent module's doc), and the shift of a minority rank's sequence (rule 5).

use super::*;

/// How many records after a mismatch the shift test compares.
const SHIFT_WINDOW: usize = 8;

/// Fields that differ between two records (unknowns never differ).
fn differs(a: &CollRecord, b: &CollRecord) -> Vec<Field> {
    let mut f = Vec::new();
    if a.kind != b.kind {
        f.push(Field::Kind);
        return f;
    }
    let loose =
        matches!(a.kind, CollKind::AllToAll | CollKind::Gather | CollKind::Scatter | CollKind::Unknown);
    let known = |s: &Vec<Vec<i64>>| !s.is_empty();
    let mut shapes_compared = false;
    if known(&a.in_sizes) && known(&b.in_sizes) {
        shapes_compared = true;
        if a.in_sizes != b.in_sizes && !loose {
            f.push(Field::Shape);
        }
    }
    if !loose
        && known(&a.out_sizes)
        && known(&b.out_sizes)
        && a.out_sizes != b.out_sizes
        && !f.contains(&Field::Shape)
    {
        f.push(Field::Shape);
    }
    if !a.in_dtypes.is_empty() && !b.in_dtypes.is_empty() && a.in_dtypes != b.in_dtypes {
        f.push(Field::Dtype);
    }
    let mut sizes_compared = shapes_compared;
    if !shapes_compared && !loose {
        if let (Some(x), Some(y)) = (a.message_bytes(), b.message_bytes()) {
            sizes_compared = true;
            if x != y {
                f.push(Field::Size);
            }
        }
    }
    // A trace recorded without `record_shapes` (the profiler's default) sizes nothing: two
    // calls of one kind are then told apart by where the host issued them (the annotation open
    // at the call, `loss_allreduce` against `grad_allreduce`), when both say.
    if !sizes_compared && a.message_bytes().is_none() && b.message_bytes().is_none() {
        if let (Some(x), Some(y)) = (&a.label, &b.label) {
            if x != y {
                f.push(Field::Origin);
            }
        }
    }
    f
}

pub(super) fn divergence_at(
    pg: &str,
    desc: &str,
    key: Key,
    lanes: &[Lane<'_>],
    ctx: &Ctx<'_>,
) -> Option<Divergence> {
    let mut sides: Vec<(Vec<u32>, &Lane<'_>, usize)> = Vec::new(); // (ranks, representative lane, record)
    let mut members_present: Vec<(&Lane<'_>, usize)> = Vec::new();
    let mut missing = Vec::new();
    let mut unknown = Vec::new();
    for l in lanes {
        let (Some(first), Some(last)) = (l.first(), l.last()) else { continue };
        if let Some(&i) = l.by_key.get(&key) {
            members_present.push((l, i));
            continue;
        }
        if key < first {
            unknown.push(l.rank);
            continue;
        }
        let before = l.by_key.range(..key).next_back().and_then(|(&k, &i)| ctx.record_ref(l, k, i));
        if key > last {
            missing.push(Missing { rank: l.rank, reason: MissingReason::Ended, last: before, next: None });
        } else {
            let next = l.by_key.range(key..).next().and_then(|(&k, &i)| ctx.record_ref(l, k, i));
            missing.push(Missing { rank: l.rank, reason: MissingReason::Skipped, last: before, next });
        }
    }
    // Sides: each rank joins the first side whose record it does not differ from.
    let mut fields: BTreeSet<Field> = BTreeSet::new();
    for &(l, i) in &members_present {
        let rec = &l.seq.records[i];
        let mut joined = false;
        for side in sides.iter_mut() {
            let rep = &side.1.seq.records[side.2];
            if differs(rep, rec).is_empty() {
                side.0.push(l.rank);
                joined = true;
                break;
            }
        }
        if !joined {
            if let Some(side) = sides.first() {
                fields.extend(differs(&side.1.seq.records[side.2], rec));
            }
            sides.push((vec![l.rank], l, i));
        }
    }
    if sides.len() <= 1 && missing.is_empty() {
        return None;
    }
    let class = if sides.len() > 1 {
        DivergenceClass::Mismatch
    } else if missing.iter().any(|m| m.reason == MissingReason::Skipped) {
        DivergenceClass::Skipped
    } else {
        DivergenceClass::NotIssued
    };
    // Largest side first, then by lowest rank.
    sides.sort_by(|a, b| b.0.len().cmp(&a.0.len()).then(a.0.first().cmp(&b.0.first())));
    let sides: Vec<Side> = sides
        .into_iter()
        .filter_map(|(ranks, rep, i)| {
            let record = ctx.record_ref(rep, key, i)?;
            let waits = ranks
                .iter()
                .filter_map(|&r| {
                    let l = lanes.iter().find(|l| l.rank == r)?;
                    let rec = l.rec(*l.by_key.get(&key)?)?;
                    Some(Wait {
                        rank: r,
                        since_ns: rec.start_ns,
                        waited_ns: match (rec.start_ns, rec.end_ns) {
                            (Some(s), Some(e)) => Some(e - s),
                            _ => None,
                        },
                        near_timeout: false,
                    })
                })
                .collect();
            Some(Side { ranks, record, waits })
        })
        .collect();
    let waiting: Vec<u32> = sides.first().map(|s| s.ranks.clone()).unwrap_or_default();
    let mut waited_for: Vec<u32> = missing
        .iter()
        .map(|m| m.rank)
        .chain(sides.iter().skip(1).flat_map(|s| s.ranks.iter().copied()))
        .collect();
    waited_for.sort_unstable();
    Some(Divergence {
        waiting,
        waited_for,
        pg: pg.to_string(),
        pg_desc: desc.to_string(),
        position: key.0,
        class,
        fields: fields.into_iter().collect(),
        sides,
        missing,
        unknown,
        shifts: Vec::new(),
        timeout: None,
    })
}

/// Rule 5: minority ranks whose sequence is shifted against the majority's.
pub(super) fn shifts(d: &Divergence, lanes: &[Lane<'_>], ctx: &Ctx<'_>) -> Vec<Shift> {
    let mut out = Vec::new();
    if d.class == DivergenceClass::NotIssued {
        return steps_ahead(d, lanes, ctx);
    }
    if d.class != DivergenceClass::Mismatch {
        return out;
    }
    let Some(major) = d.sides.first() else { return out };
    let lane = |r: u32| lanes.iter().find(|l| l.rank == r);
    let Some(m) = major.ranks.first().and_then(|&r| lane(r)) else { return out };
    let from = |l: &Lane<'_>| -> Vec<(Key, usize)> {
        l.recs.iter().copied().filter(|(k, _)| k.0 >= d.position).collect()
    };
    let mrecs = from(m);
    for side in d.sides.iter().skip(1) {
        for &r in &side.ranks {
            let Some(l) = lane(r) else { continue };
            let rrecs = from(l);
            // (compared, differing) over the first SHIFT_WINDOW records of the overlap.
            let compare = |a: &[(Key, usize)], b: &[(Key, usize)]| {
                let n = a.len().min(b.len()).min(SHIFT_WINDOW);
                let bad = a
                    .iter()
                    .zip(b)
                    .take(n)
                    .filter(|(x, y)| !differs(&l.seq.records[x.1], &m.seq.records[y.1]).is_empty())
                    .count();
                (n, bad)
            };
            let agree = |a: &[(Key, usize)], b: &[(Key, usize)]| {
                let (n, bad) = compare(a, b);
                n >= 1 && bad == 0
            };
            // A mismatch the next records do not repeat is local (one odd shape), not a shift:
            // periodic sequences (grad, loss, grad, loss) match themselves shifted by a period.
            let before = out.len();
            if compare(&rrecs, &mrecs).1 >= 2 {
                for by in 1..=4usize {
                    if mrecs.len() > by && agree(&rrecs, &mrecs[by..]) {
                        let records =
                            mrecs[..by].iter().filter_map(|&(k, i)| ctx.record_ref(m, k, i)).collect();
                        out.push(Shift { rank: r, by: by as i64, records, basis: ShiftBasis::Records });
                        break;
                    }
                    if rrecs.len() > by && agree(&rrecs[by..], &mrecs) {
                        let records =
                            rrecs[..by].iter().filter_map(|&(k, i)| ctx.record_ref(l, k, i)).collect();
                        out.push(Shift { rank: r, by: -(by as i64), records, basis: ShiftBasis::Records });
                        break;
                    }
                }
            }
            // No records to compare (the job stopped here): the steps tell. A rank already in a
            // later step skipped what the others still had to issue in theirs.
            let step = |l: &Lane<'_>, v: &[(Key, usize)]| v.first().and_then(|&(_, i)| l.seq.records[i].step);
            if out.len() == before {
                if let (Some(ms), Some(rs)) = (step(m, &mrecs), step(l, &rrecs)) {
                    let (who, recs, sign) = if rs > ms { (m, &mrecs, 1) } else { (l, &rrecs, -1) };
                    let s = rs.min(ms);
                    if rs != ms {
                        let records: Vec<RecordRef> = recs
                            .iter()
                            .take_while(|&&(_, i)| who.seq.records[i].step == Some(s))
                            .filter_map(|&(k, i)| ctx.record_ref(who, k, i))
                            .collect();
                        out.push(Shift {
                            rank: r,
                            by: sign * records.len() as i64,
                            records,
                            basis: ShiftBasis::Step,
                        });
                    }
                }
            }
        }
    }
    out
}

/// A rank that never issued the others' last collective, though it issued as many before it
/// of the same kinds and sizes, may have skipped one long before: its records then run a step
/// ahead of the others' from that position on (steps are the global iteration numbers, the
/// same on every rank). The first position before the divergence where its record is in a
/// later step than the majority's is where it skipped the rest of their step
/// ([`ShiftBasis::Step`]); nothing when the steps agree up to the divergence (a rank that left
/// or stopped there).
fn steps_ahead(d: &Divergence, lanes: &[Lane<'_>], ctx: &Ctx<'_>) -> Vec<Shift> {
    let mut out = Vec::new();
    let lane = |r: u32| lanes.iter().find(|l| l.rank == r);
    let Some(m) = d.sides.first().and_then(|s| s.ranks.first()).and_then(|&r| lane(r)) else {
        return out;
    };
    for miss in &d.missing {
        let Some(l) = lane(miss.rank) else { continue };
        let ahead = m.recs.iter().filter(|(k, _)| k.0 < d.position).find_map(|&(k, i)| {
            let j = *l.by_key.get(&k)?;
            let (ms, rs) = (m.seq.records[i].step?, l.seq.records[j].step?);
            (rs > ms).then_some((k, ms))
        });
        if let Some((k, ms)) = ahead {
            let records: Vec<RecordRef> = m
                .recs
                .iter()
                .filter(|(kk, i)| *kk >= k && m.seq.records[*i].step == Some(ms))
                .filter_map(|&(kk, i)| ctx.record_ref(m, kk, i))
                .collect();
            out.push(Shift { rank: miss.rank, by: records.len() as i64, records, basis: ShiftBasis::Step });
        }
    }
    out
}
