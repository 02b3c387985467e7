//! The counterfactual of communication hidden as its framework allows (docs/metrics.md,
//! "What-if"): the ranks' programs rewritten, each collective moved where the framework that
//! issues it lets it go, and nowhere else.
//!
//! - **Prefetched** ([`Hide::Prefetch`]): a parameter all-gather of a sharded job (FSDP,
//!   ZeRO-3, Megatron's distributed optimizer) issued one stretch of the rank's own work
//!   earlier, just after the collective or wait before it: the next unit's parameters gathered
//!   while the current unit computes (FSDP's forward and backward prefetch, ZeRO-3's prefetch
//!   bucket, Megatron's `--overlap-param-gather`). Never before the step's first meeting point:
//!   the first gather of a step waits for what the step starts with (the batch, the optimizer's
//!   last update).
//! - **Deferred** ([`Hide::Defer`]): a gradient reduction (an all_reduce or reduce_scatter of a
//!   data-parallel, sharded or replicate group) left in flight while backward goes on, waited
//!   for only where the step's last gradient reduction is (DDP's and FSDP's reductions waited
//!   for at the end of backward, ZeRO's `overlap_comm`, Megatron's `--overlap-grad-reduce`):
//!   the optimizer still waits for every gradient.
//!
//! Everything else stays where it was recorded: a tensor-parallel all_reduce's output is the
//! next layer's input, an expert all_to_all's tokens are the experts' input, a pipeline's
//! activations are the next stage's. The replay then says what the moves hide, ranks waiting
//! for each other included; a DDP gradient bucket that is ready only once backward is done
//! moves nowhere (its cost is the bucket size's, [`crate::diagnose`]'s small-collectives
//! and exposed-transfer findings).

use super::program::Item;
use super::replay::Slot;
use super::Model;

/// Where a collective may go to hide its transfer (module doc).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Hide {
    Prefetch,
    Defer,
}

/// What [`overlapped`] moved: issues prefetched and waits deferred, over every rank and step.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Moved {
    pub prefetched: u32,
    pub deferred: u32,
}

impl Moved {
    pub fn any(&self) -> bool {
        self.prefetched + self.deferred > 0
    }
}

/// The model with every collective `hide` names (by its index in the job's matched
/// collectives) moved as [`Hide`] says; the own times keep their slots, so a scenario that
/// brings ranks to their peers reads the same places in it.
pub fn overlapped(m: &Model, hide: &dyn Fn(usize) -> Option<Hide>) -> (Model, Moved) {
    let mut out = m.clone();
    let mut moved = Moved::default();
    let how = |rank: u32, item: &Item| -> Option<Hide> {
        let inst = match *item {
            Item::Issue(k) | Item::Wait { inst: k, .. } => k,
            Item::Own(_) => return None,
        };
        let op = m.op_of.get(&(rank, inst))?;
        hide(m.ops.get(*op)?.src?)
    };
    for ranks in out.steps.values_mut() {
        for (&rank, prog) in ranks.iter_mut() {
            let mut items: Vec<(Item, Slot)> =
                prog.items.iter().copied().zip(prog.slots.iter().copied()).collect();
            moved.prefetched += prefetch(&mut items, |x| how(rank, x));
            moved.deferred += defer(&mut items, |x| how(rank, x));
            (prog.items, prog.slots) = items.into_iter().unzip();
        }
    }
    (out, moved)
}

/// The model without the collectives `gone` names (by their index in the job's matched
/// collectives): their issues and waits taken out of every rank's program, so nobody meets
/// there, waits for them or pays their transfer; the ranks' own time around them stays (a
/// sharded job's parameters kept gathered from forward to backward: backward's re-gathers
/// gone, [`crate::diagnose`]'s exposed-transfer finding).
pub fn without(m: &Model, gone: &std::collections::BTreeSet<usize>) -> Model {
    let mut out = m.clone();
    for ranks in out.steps.values_mut() {
        for (&rank, prog) in ranks.iter_mut() {
            let keep = |item: &Item| match *item {
                Item::Issue(k) | Item::Wait { inst: k, .. } => !m
                    .op_of
                    .get(&(rank, k))
                    .and_then(|&o| m.ops.get(o)?.src)
                    .is_some_and(|src| gone.contains(&src)),
                Item::Own(_) => true,
            };
            (prog.items, prog.slots) =
                prog.items.iter().copied().zip(prog.slots.iter().copied()).filter(|(i, _)| keep(i)).unzip();
        }
    }
    out
}

/// Each issue of a prefetched collective moved before the own work just before it, unless
/// that work starts the step; returns how many moved.
fn prefetch(items: &mut [(Item, Slot)], how: impl Fn(&Item) -> Option<Hide>) -> u32 {
    let mut n = 0;
    for i in 0..items.len() {
        let (item, _) = items[i];
        if !matches!(item, Item::Issue(_)) || how(&item) != Some(Hide::Prefetch) {
            continue;
        }
        let mut j = i;
        while j > 0 && matches!(items[j - 1].0, Item::Own(_)) {
            j -= 1;
        }
        if j > 0 && j < i {
            items[j..=i].rotate_right(1);
            n += 1;
        }
    }
    n
}

/// Each wait for a deferred collective moved to where the program's last such wait is (just
/// before it, in their order): the rank waits for every gradient there; returns how many moved.
fn defer(items: &mut Vec<(Item, Slot)>, how: impl Fn(&Item) -> Option<Hide>) -> u32 {
    let deferred = |x: &(Item, Slot)| matches!(x.0, Item::Wait { .. }) && how(&x.0) == Some(Hide::Defer);
    let Some(last) = items.iter().rposition(deferred) else { return 0 };
    // Those already just before the last one (nothing of the rank's own between) gain nothing.
    let mut stay = last;
    while stay > 0 && deferred(&items[stay - 1]) {
        stay -= 1;
    }
    let inst = |x: &(Item, Slot)| match x.0 {
        Item::Wait { inst, .. } => Some(inst),
        _ => None,
    };
    let anchor = inst(&items[last]);
    let mut later: Vec<(Item, Slot)> = Vec::new();
    let mut kept: Vec<(Item, Slot)> = Vec::with_capacity(items.len());
    for (i, x) in items.drain(..).enumerate() {
        if i < stay && deferred(&x) {
            later.push(x);
        } else {
            if i == stay {
                kept.extend_from_slice(&later);
            }
            kept.push(x);
        }
    }
    // A second wait for the collective the last wait is for (the lane idle twice before its
    // completion) moves nothing the rank waits for.
    let n = later.iter().filter(|x| inst(x) != anchor).count() as u32;
    *items = kept;
    n
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::super::replay::{replay, AsRecorded};
    use super::super::{ModelOp, Prog};
    use super::*;

    /// Two ranks running `items` in one step, collectives `0..ops` of both with transfer 5
    /// (each the job's collective of the same index), instance k being collective k.
    fn model(items: &[Item], ops: usize) -> Model {
        let mut m = Model::default();
        for k in 0..ops {
            m.ops.push(ModelOp { ranks: vec![0, 1], transfer_ns: 5, src: Some(k), eager_ns: None });
            for r in 0..2 {
                m.op_of.insert((r, k as u32), k);
            }
        }
        let prog =
            Prog { start_ns: 0, end_ns: 0, items: items.to_vec(), slots: vec![Slot::Tail; items.len()] };
        m.steps.insert(0, BTreeMap::from([(0, prog.clone()), (1, prog)]));
        m
    }

    fn wait(k: u32) -> Item {
        Item::Wait { inst: k, recorded_ns: 5, wake_ns: 0 }
    }

    fn items_of(m: &Model) -> Vec<Item> {
        m.steps.get(&0).and_then(|s| s.get(&0)).map(|p| p.items.clone()).unwrap_or_default()
    }

    #[test]
    fn a_prefetched_gather_is_issued_before_the_compute_before_it_and_hides_behind_it() {
        let m = model(&[Item::Issue(0), wait(0), Item::Own(10), Item::Issue(1), wait(1), Item::Own(10)], 2);
        assert_eq!(replay(&m, &AsRecorded).steps, vec![(0, 30)]);
        let (moved, n) = overlapped(&m, &|_| Some(Hide::Prefetch));
        // The first gather has nothing before it to move past; the second goes before unit 0's
        // compute, on each of the two ranks.
        assert_eq!(n, Moved { prefetched: 2, deferred: 0 });
        assert_eq!(
            items_of(&moved),
            vec![Item::Issue(0), wait(0), Item::Issue(1), Item::Own(10), wait(1), Item::Own(10)]
        );
        // Gathered from 5 to 10 while the rank computes until 15: the step is 25.
        assert_eq!(replay(&moved, &AsRecorded).steps, vec![(0, 25)]);
    }

    #[test]
    fn a_collective_taken_out_is_neither_met_nor_waited_for() {
        let w = |k: u32| Item::Wait { inst: k, recorded_ns: 5, wake_ns: 0 };
        let m = model(
            &[Item::Own(10), Item::Issue(0), w(0), Item::Own(10), Item::Issue(1), w(1), Item::Own(3)],
            2,
        );
        assert_eq!(replay(&m, &AsRecorded).steps, vec![(0, 33)]);
        let gone = without(&m, &std::collections::BTreeSet::from([1]));
        assert_eq!(items_of(&gone), vec![Item::Own(10), Item::Issue(0), w(0), Item::Own(10), Item::Own(3)]);
        assert_eq!(replay(&gone, &AsRecorded).steps, vec![(0, 28)]);
    }

    #[test]
    fn a_gather_at_the_start_of_the_step_stays_there() {
        let m = model(&[Item::Own(10), Item::Issue(0), wait(0), Item::Own(10)], 1);
        let (moved, n) = overlapped(&m, &|_| Some(Hide::Prefetch));
        assert!(!n.any());
        assert_eq!(items_of(&moved), items_of(&m));
    }

    #[test]
    fn deferred_reductions_are_waited_for_where_the_last_one_is() {
        let m = model(
            &[Item::Own(10), Item::Issue(0), wait(0), Item::Own(10), Item::Issue(1), wait(1), Item::Own(3)],
            2,
        );
        assert_eq!(replay(&m, &AsRecorded).steps, vec![(0, 33)]);
        let (moved, n) = overlapped(&m, &|_| Some(Hide::Defer));
        assert_eq!(n, Moved { prefetched: 0, deferred: 2 });
        assert_eq!(
            items_of(&moved),
            vec![
                Item::Own(10),
                Item::Issue(0),
                Item::Own(10),
                Item::Issue(1),
                wait(0),
                wait(1),
                Item::Own(3)
            ]
        );
        // The first reduction runs beside the second half of backward: 5 shorter.
        assert_eq!(replay(&moved, &AsRecorded).steps, vec![(0, 28)]);
    }

    #[test]
    fn collectives_the_framework_cannot_move_stay() {
        // A tensor-parallel all_reduce (nothing to hide it as) in the middle, a reduction at the end.
        let items = [Item::Own(10), Item::Issue(0), wait(0), Item::Own(10), Item::Issue(1), wait(1)];
        let m = model(&items, 2);
        let (moved, n) = overlapped(&m, &|k| (k == 1).then_some(Hide::Defer));
        assert!(!n.any());
        assert_eq!(items_of(&moved), items.to_vec());
    }
}
