//! `tensor_group_spans_hosts`: a layout check. Tensor parallelism all-reduces activations in
//! every layer, forward and backward, and belongs inside one host's fast links (NVLink); a
//! tensor-parallel group (or a context-parallel group, which shares its traffic's pattern)
//! whose members are on more than one host sends that traffic over the network, several times
//! slower. Found from the layout ([`crate::analyze::layout`]: roles and hosts, the traces'
//! `host_name`) and measured against the same role's groups that sit within one host: the
//! spanning groups' collectives' transfer per step ([`crate::analyze::collectives`]: the
//! transfer of a collective is its last arriver's time in it) beyond the in-host groups'
//! median is what keeping them inside a host would save, per step, on each of their ranks.
//! Those ranks then arrive late at everything else: a late group made of them (a straggler,
//! "more compute", "a slower device") is this, and its finding is explained. Without in-host
//! groups to compare with, the cost cannot be measured and nothing is claimed.

use super::prelude::*;
use crate::analyze::layout::Role;

pub(super) static CAUSE: Cause = Cause {
    id: CauseId::TensorGroupSpansHosts,
    finds: &[FindingId::TensorGroupSpansHosts],
    stage: Stage::Waiting,
    explains: &[FindingId::Straggler, FindingId::ComputeImbalance, FindingId::SlowDevice],
    // Its ranks arrive late at every stage boundary: that wait is in a pipeline's bubble.
    part_of: Some(FindingId::PipelineBubble),
    excludes: &[],
    names_part: None,
    find,
};

fn find(cx: &Ctx<'_>, found: &Found) -> Vec<Finding> {
    let Some(layout) = cx.a.layout.as_ref() else { return Vec::new() };
    let n_steps = cx.all_steps.len().max(1) as f64;
    // Per group of these roles: its collectives' transfer per step.
    let mut transfer: BTreeMap<&str, f64> = BTreeMap::new();
    for o in cx.ops.iter().filter(|o| !o.partial && cx.per_step.contains_key(&o.step)) {
        *transfer.entry(o.pg.as_str()).or_default() += o.transfer_ns as f64 / n_steps;
    }
    let mut out = Vec::new();
    for role in [Role::Tensor, Role::Context] {
        let groups: Vec<_> = layout.groups.iter().filter(|g| g.role == role && g.hosts >= 1).collect();
        let (spanning, inside): (Vec<_>, Vec<_>) = groups.iter().partition(|g| g.hosts >= 2);
        if spanning.is_empty() {
            continue;
        }
        let t = |gs: &[&&crate::analyze::layout::Group]| {
            median_f(gs.iter().filter_map(|g| transfer.get(g.name.as_str()).copied()).collect())
        };
        let (span_t, in_t) = (t(&spanning), t(&inside));
        if inside.is_empty() || span_t <= in_t {
            continue;
        }
        let mut ranks: Vec<u32> = spanning.iter().flat_map(|g| g.ranks.iter().copied()).collect();
        ranks.sort_unstable();
        ranks.dedup();
        // A late group of these very ranks is this layout's doing: its cost is claimed here.
        let late = found
            .of(CauseId::LateRank)
            .find(|f| f.ranks.iter().all(|r| ranks.binary_search(r).is_ok()))
            .map_or(0.0, |f| f.impact_ns as f64);
        let saving = (span_t - in_t).max(late);
        let names: Vec<String> = spanning.iter().take(4).map(|g| format!("`{}`", g.name)).collect();
        let more = if spanning.len() > 4 { format!(" and {} more", spanning.len() - 4) } else { String::new() };
        let what = if role == Role::Tensor { "tensor-parallel" } else { "context-parallel" };
        out.push(Finding {
            id: FindingId::TensorGroupSpansHosts,
            severity: severity_for(saving, cx.step_ns),
            message: format!(
                "{} of the {} {what} groups span hosts ({}{more}): their collectives' transfer takes {} per step against {} in the groups that sit within one host, because their activations cross the network instead of the host's own links; their ranks ({}) then arrive late at everything else.",
                spanning.len(),
                groups.len(),
                names.join(", "),
                dur(span_t),
                dur(in_t),
                rank_list(&ranks)
            ),
            fix: format!(
                "Keep every {what} group inside one host: order the ranks so that the tensor dimension is the fastest-varying and no larger than the GPUs of a host (Megatron-LM's rank order does so when `--tensor-model-parallel-size` divides the GPUs per node and the launcher places consecutive ranks on one node; torchtitan: the `tp` dimension last in the DeviceMesh). Check the launcher's placement (`torchrun --nproc-per-node`, Slurm `--ntasks-per-node`, a hostfile's slots) so that consecutive ranks share a host."
            ),
            ranks,
            steps: cx.all_steps.clone(),
            evidence: Evidence::from([(K::SpanningTransferNs, span_t), (K::InHostTransferNs, in_t)]),
            quotes: Vec::new(),
            quotes_total: 0,
            symptoms: vec![FindingId::Straggler],
            location: None,
            impact_ns: saving as i64,
        });
    }
    out
}
