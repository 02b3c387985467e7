//! The walk over a rank's CPU lanes that finds its region occurrences ([`super::rank_regions`]):
//! slice by slice in start order with a stack of the open ones, each region an occurrence, each
//! operator directly under a region a cover of its time, each synchronization a blocked span.

use std::collections::BTreeMap;

use super::{is_region, phase_of, region_name, Occurrence, RankRegions, MAX_OCCURRENCES, MAX_REGION_DEPTH};
use crate::analyze::intervals::{Iv, Set};
use crate::model::*;

struct Open {
    end: i64,
    /// Slot in `occ` when the event is a region.
    slot: Option<usize>,
    /// Index in `covers` when the event is an operator covering its parent region's time.
    cover: Option<usize>,
    /// What the scans down the stack found, kept per entry so each slice asks its top in O(1)
    /// (a scan per slice was quadratic in the nesting depth: a 36 kB gzip of deeply nested
    /// slices took a minute). The nearest region's slot at or below this entry.
    enclosing: Option<usize>,
    /// Among the entries above the nearest region (this one included), the outermost cover.
    outer_cover: Option<usize>,
    /// Whether an entry from here down to the nearest cover or region (exclusive) is a kid.
    kid_run: bool,
    /// Kept regions at or below this entry.
    depth: u32,
}

impl Open {
    /// The entry for a slice opened on top of `stack`, its cached scans made from the top's:
    /// `region` when it is a region, counted or not (outside the steps, beyond the cap); `kid`
    /// when it is in a covering operator's `kids`, or inside a slice that is (the union of its
    /// kids is that of everything nested in it, so only the outermost are kept).
    fn on(
        stack: &[Open],
        end: i64,
        slot: Option<usize>,
        region: bool,
        cover: Option<usize>,
        kid: bool,
    ) -> Open {
        let below = stack.last();
        Open {
            end,
            slot,
            cover,
            enclosing: slot.or(below.and_then(|b| b.enclosing)),
            outer_cover: if region { None } else { below.and_then(|b| b.outer_cover).or(cover) },
            kid_run: cover.is_none() && !region && (kid || below.is_some_and(|b| b.kid_run)),
            depth: below.map_or(0, |b| b.depth) + u32::from(slot.is_some()),
        }
    }
}

/// An operator that covers its parent region's time, and where it does not: the regions opened
/// inside it (`holes`), whose time counts by what runs inside them.
struct Cover {
    iv: Iv,
    /// The region whose ops it counts for, if any.
    parent: Option<usize>,
    main: bool,
    /// On the main thread under a region: the instance it is (phase, name, ordinal in the step),
    /// and the step.
    instance: Option<((Phase, StrId, u32), u32)>,
    /// Its input shapes' hash ([`dims_hash`]).
    dims: u64,
    holes: Vec<Iv>,
    /// The slices nested in it (not in a region inside it): what it runs besides its own code.
    kids: Vec<Iv>,
    /// Every slice nested in it at any depth (not in a region inside it): how many operators
    /// it runs.
    nested: u32,
}

/// One operator instance's run in one step.
#[derive(Debug, Clone, Copy)]
pub(super) struct Run {
    pub(super) step: u32,
    pub(super) dur_ns: i64,
    /// Its time with nothing nested in it running.
    pub(super) own_ns: i64,
    /// Slices nested in it directly.
    pub(super) kids: usize,
    /// Its input shapes' hash ([`dims_hash`]), 0 when the trace has none for it.
    pub(super) dims: u64,
    /// Slices nested in it at any depth.
    pub(super) nested: u32,
}

/// Per operator instance, its runs over the steps.
pub(super) type Runs = Vec<Run>;

/// The hash of row `i`'s `Input Dims` as written (`record_shapes=True`; kept for the operators of
/// [`crate::model::ShapedOp`]), 0 without: one operator instance on two ranks ran on the same
/// inputs when the hashes are equal.
fn dims_hash(t: &RankTrace, strings: &StringTable, i: usize) -> u64 {
    let a = t.events.args[i];
    if a == crate::model::NONE_U32 {
        return 0;
    }
    t.comm
        .input_dims
        .get(a as usize)
        .map(|&d| strings.get(d))
        .filter(|s| !s.is_empty())
        .map_or(0, |s| crate::analyze::work::fnv(s).max(1))
}

/// The state of the walk over a rank's CPU lanes, slice by slice in start order: the region
/// occurrences found so far and the intervals their operators and synchronizations cover.
pub(super) struct Walk<'a> {
    t: &'a RankTrace,
    strings: &'a StringTable,
    blocked: &'a [(LaneId, Iv)],
    /// The main thread's lane (see [`super::main_lane`]).
    main: Option<usize>,
    pub(super) out: RankRegions,
    name_ids: FxHashMap<StrId, u32>,
    /// Per occurrence: the intervals of its direct non-region children (operators) and syncs.
    pub(super) occ_ops: Vec<Vec<Iv>>,
    pub(super) occ_sync: Vec<Vec<Iv>>,
    /// The covering operators still open (a stack: one opens inside another only under a region
    /// inside it), each finished when it closes ([`Walk::finish`]), so only the open ones are held.
    covers: Vec<Cover>,
    /// Each covering operator, less the regions opened inside it; the main thread's, per
    /// instance (phase, name, ordinal in the step), with their durations over the steps.
    instance_of: BTreeMap<(u32, Phase, StrId), u32>,
    pub(super) durations: BTreeMap<(Phase, StrId, u32), Runs>,
    /// Per occurrence, the phase its own name gives.
    pub(super) own_phase: Vec<Option<Phase>>,
    pub(super) main_ops: Vec<Iv>,
    pub(super) main_sync: Vec<Iv>,
    /// Region occurrences per lane, sorted by start, for attributing GPU launches.
    pub(super) lane_occ: Vec<Vec<usize>>,
}

impl<'a> Walk<'a> {
    /// An empty walk over `t`'s lanes.
    pub(super) fn new(
        t: &'a RankTrace,
        strings: &'a StringTable,
        blocked: &'a [(LaneId, Iv)],
        main: Option<usize>,
    ) -> Self {
        Walk {
            t,
            strings,
            blocked,
            main,
            out: RankRegions::default(),
            name_ids: FxHashMap::default(),
            occ_ops: Vec::new(),
            occ_sync: Vec::new(),
            covers: Vec::new(),
            instance_of: BTreeMap::new(),
            durations: BTreeMap::new(),
            own_phase: Vec::new(),
            main_ops: Vec::new(),
            main_sync: Vec::new(),
            lane_occ: vec![Vec::new(); t.lanes.len()],
        }
    }

    /// Walks lane `l`'s slices `rows` (in start order) with a stack of the open ones: each
    /// region becomes an occurrence, each operator directly under a region (or at the top) a
    /// cover of its time, each synchronization a blocked span of the nearest region.
    pub(super) fn lane(&mut self, l: usize, rows: &[usize]) {
        let e = &self.t.events;
        let mut stack: Vec<Open> = Vec::new();
        for &i in rows.iter().chain(std::iter::once(&usize::MAX)) {
            // (A last turn past the lane's rows closes what is still open.)
            let (ts, end) = if i == usize::MAX { (i64::MAX, i64::MAX) } else { (e.ts_ns[i], e.end_ns(i)) };
            while stack.last().is_some_and(|o| o.end <= ts || i == usize::MAX) {
                if let Some(Open { cover: Some(_), .. }) = stack.pop() {
                    if let Some(c) = self.covers.pop() {
                        self.finish(l, c);
                    }
                }
            }
            if i == usize::MAX {
                break;
            }
            let parent_end = stack.last().map_or(i64::MAX, |o| o.end);
            let end = end.min(parent_end);
            if is_region(self.t, self.strings, i) {
                self.open_region(l, &mut stack, i, (ts, end));
            } else {
                self.open_slice(l, &mut stack, i, (ts, end));
            }
        }
    }

    /// Counts a closed covering operator: the pieces of its interval outside the regions opened
    /// in it (and outside its own blocked collective waits) go to its parent region's ops, to the
    /// main thread's, and to its instance's runs.
    fn finish(&mut self, l: usize, mut c: Cover) {
        // Blocked on a collective it issued: the operator does not cover that time either
        // ([`crate::analyze::roles::blocked_waits`]); the thread waits there with no operator running.
        let mut one = [(c.iv, std::mem::take(&mut c.holes))];
        crate::analyze::breakdown::add_blocked(&mut one, self.blocked, LaneId(l as u32));
        let [(_, holes)] = one;
        c.holes = holes;
        let pieces = if c.holes.is_empty() {
            vec![c.iv]
        } else {
            Set::from_sorted(vec![c.iv]).subtract(&Set::from_unsorted(c.holes)).intervals().to_vec()
        };
        if let Some((k, step)) = c.instance {
            let own = Set::from_sorted(pieces.iter().copied()).subtract(&Set::from_unsorted(c.kids.clone()));
            self.durations.entry(k).or_default().push(Run {
                step,
                dur_ns: pieces.iter().map(|x| x.1 - x.0).sum(),
                own_ns: own.len_ns(),
                kids: c.kids.len(),
                dims: c.dims,
                nested: c.nested,
            });
        }
        if let Some(p) = c.parent {
            if let Some(o) = self.occ_ops.get_mut(p) {
                o.extend_from_slice(&pieces);
            }
        }
        if c.main {
            self.main_ops.extend(pieces);
        }
    }

    /// Opens region row `i` over `[ts, end)` on lane `l`: a hole in the operator covering it, and
    /// a new occurrence unless it is outside the steps or beyond the caps.
    fn open_region(&mut self, l: usize, stack: &mut Vec<Open>, i: usize, (ts, end): Iv) {
        let e = &self.t.events;
        let enclosing_region = stack.last().and_then(|o| o.enclosing);
        // A region opened inside an operator (an autograd node running a hook that is
        // annotated, as FSDP's `FSDP::pre_backward` > `FSDP::all_gather` inside
        // `autograd::engine::evaluate_function: …`): the operator does not cover it. Its
        // time counts by what runs inside the region, so a hook blocked on a collective
        // is a thread with no operator running, as it is at the top of a step.
        let covering = stack.last().and_then(|o| o.outer_cover);
        if let Some(c) = covering.and_then(|c| self.covers.get_mut(c)) {
            c.holes.push((ts, end));
        }
        if e.step[i] == NONE_U32 {
            stack.push(Open::on(stack, end, None, true, None, false));
            return;
        }
        let out = &mut self.out;
        if out.occurrences.len() >= MAX_OCCURRENCES
            || stack.last().is_some_and(|o| o.depth >= MAX_REGION_DEPTH)
        {
            out.dropped += 1;
            stack.push(Open::on(stack, end, None, true, None, false));
            return;
        }
        let raw = self.strings.get(e.name[i]);
        let next = self.name_ids.len() as u32;
        let id = *self.name_ids.entry(e.name[i]).or_insert_with(|| {
            out.names.push(region_name(raw).to_string());
            next
        });
        let own = phase_of(raw, e.class[i]);
        self.own_phase.push(own);
        let inherited = enclosing_region.and_then(|p| out.occurrences.get(p)).map(|o| o.phase);
        let phase = own.or(inherited).unwrap_or(Phase::Other);
        let slot = out.occurrences.len();
        out.occurrences.push(Occurrence {
            name: id,
            parent: enclosing_region.map(|p| p as u32),
            phase,
            step: e.step[i],
            main: Some(l) == self.main,
            start_ns: ts,
            end_ns: end,
            ops_ns: 0,
            sync_ns: 0,
            free_ns: 0,
            device_ns: 0,
        });
        self.occ_ops.push(Vec::new());
        self.occ_sync.push(Vec::new());
        self.lane_occ[l].push(slot);
        stack.push(Open::on(stack, end, Some(slot), true, None, false));
    }

    /// Opens non-region row `i` over `[ts, end)` on lane `l`: a synchronization, a covering
    /// operator (directly under a region or at the top), or a slice nested in an operator.
    fn open_slice(&mut self, l: usize, stack: &mut Vec<Open>, i: usize, (ts, end): Iv) {
        let e = &self.t.events;
        let enclosing_region = stack.last().and_then(|o| o.enclosing);
        let direct_region_parent = stack.last().and_then(|o| o.slot);
        // A synchronization blocks the thread wherever it is nested (`aten::item` >
        // `cudaStreamSynchronize`): it counts for the nearest region. Any other slice
        // directly under a region (or at the top) is an operator covering its time,
        // whatever it contains.
        let is_sync = e.class[i] == Class::Sync;
        let mut cover = None;
        let mut kid = false;
        if is_sync {
            if let Some(p) = enclosing_region {
                self.occ_sync[p].push((ts, end));
            }
            if Some(l) == self.main {
                self.main_sync.push((ts, end));
            }
        } else if stack.last().is_none_or(|o| o.slot.is_some()) {
            cover = Some(self.covers.len());
            let is_main = Some(l) == self.main;
            // Its ordinal among the same operators of its step and phase, in start order.
            let instance_of = &mut self.instance_of;
            let instance =
                direct_region_parent.and_then(|p| self.out.occurrences.get(p)).filter(|_| is_main).map(|o| {
                    let k = instance_of.entry((o.step, o.phase, e.name[i])).or_insert(0);
                    *k += 1;
                    ((o.phase, e.name[i], *k - 1), o.step)
                });
            self.covers.push(Cover {
                iv: (ts, end),
                parent: direct_region_parent,
                main: is_main,
                instance,
                dims: if instance.is_some() { dims_hash(self.t, self.strings, i) } else { 0 },
                holes: Vec::new(),
                kids: Vec::new(),
                nested: 0,
            });
        } else if let Some(c) = stack.last().and_then(|o| o.outer_cover).and_then(|c| self.covers.get_mut(c))
        {
            // Between it and its operator only slices that are neither regions nor
            // operators covering a region (one opens only under a region).
            let inside_kid = stack.last().is_some_and(|o| o.kid_run);
            if !inside_kid {
                c.kids.push((ts, end));
            }
            c.nested = c.nested.saturating_add(1);
            kid = true;
        }
        stack.push(Open::on(stack, end, None, false, cover, kid));
    }
}
