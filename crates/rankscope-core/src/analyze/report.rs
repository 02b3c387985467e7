//! Renderings of an [`Analysis`] as data: the JSON (`--json`) and the rank × step table as CSV
//! (`--csv`). The renderings that judge (the Markdown note, the `--fail-on` gates) are the
//! judging layer's (`crate::diagnose`).

use std::fmt::Write;

use super::Analysis;
use crate::escape::csv_field;

/// The per rank × step table as CSV (times in ns). The last column, `groups`, is the rank's
/// process groups by role (`data=5;tensor=2`, the layout's, by role's name; empty without one), so a sheet can
/// group the rows by tensor, pipeline or data group.
pub fn csv(a: &Analysis) -> String {
    let mut s = String::from(
        "step,rank,source,start_ns,wall_ns,compute_ns,comm_ns,overlap_ns,exposed_comm_ns,memory_ns,busy_ns,idle_ns,host_sync_ns,data_loading_ns,offset_ns,input_ns,comm_transfer_ns,comm_wait_ns,exposed_transfer_ns,exposed_wait_ns,cpu_bound_ns,launch_overhead_ns,groups\n",
    );
    // Per rank, its groups with a role below the whole world, in the layout's order.
    let mut groups: std::collections::BTreeMap<u32, Vec<String>> = std::collections::BTreeMap::new();
    if let Some(l) = a.layout.as_ref() {
        for g in l
            .groups
            .iter()
            .filter(|g| !matches!(g.role, super::layout::Role::World | super::layout::Role::Unknown))
        {
            for &r in &g.ranks {
                groups.entry(r).or_default().push(format!("{}={}", g.role.as_str(), g.name));
            }
        }
    }
    // Each rank's cell once, its groups by role's name: one order on every row.
    let cells: std::collections::BTreeMap<u32, String> = groups
        .into_iter()
        .map(|(r, mut v)| {
            v.sort();
            (r, v.join(";"))
        })
        .collect();
    for st in &a.steps {
        for r in &st.per_rank {
            let gs = cells.get(&r.rank).map_or("", String::as_str);
            let off = a.alignment.iter().find(|x| x.rank == r.rank).map_or(0, |x| x.offset_ns);
            let _ = writeln!(
                s,
                "{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{}",
                st.step,
                r.rank,
                csv_field(&r.source.to_string()),
                r.start_ns - off,
                r.wall_ns,
                r.compute_ns,
                r.comm_ns,
                r.overlap_ns,
                r.exposed_comm_ns,
                r.memory_ns,
                r.busy_ns,
                r.idle_ns,
                r.host_sync_ns,
                r.data_loading_ns,
                off,
                r.input_ns,
                r.comm_transfer_ns,
                r.comm_wait_ns,
                r.exposed_transfer_ns,
                r.exposed_wait_ns,
                r.cpu_bound_ns,
                r.launch_overhead_ns,
                csv_field(gs)
            );
        }
    }
    s
}

/// `rankscope analyze --json`: the analysis's fields in their declared order, then, with Flight
/// Recorder dumps among the inputs, their report under `flight_recorder`. The CLI and the app
/// both write it with this function, so their bytes are the same.
pub fn json(
    a: &Analysis,
    dumps: Option<(&[crate::fr::RankedDump], &crate::sequence::SequenceReport)>,
) -> String {
    #[derive(serde::Serialize)]
    struct WithDumps<'a> {
        #[serde(flatten)]
        analysis: &'a Analysis,
        #[serde(skip_serializing_if = "Option::is_none")]
        flight_recorder: Option<crate::fr::output::Member<'a>>,
    }
    let out = WithDumps { analysis: a, flight_recorder: dumps.map(|(d, r)| crate::fr::output::member(d, r)) };
    // Serializing plain values into a string cannot fail (no I/O, string keys only).
    serde_json::to_string_pretty(&out).unwrap_or_default() + "\n"
}
