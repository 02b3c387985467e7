//! The job's collectives, findings and configuration in two runs, matched.
//!
//! **Collectives** are matched by kind, the group's role (from `layout`, else the process
//! group's name) and a size bucket of the median message (powers of 4 from 1 KiB: a change of
//! DDP's `bucket_cap_mb` from 25 to 1 MB is an all_reduce of 16–64 MiB that vanished and one of
//! 1–4 MiB that is new). `calls_per_step` is the count over the run's steps. These figures are
//! the analysis' aggregates (no per-step samples), so a change is said with its size only.
//!
//! **Findings** are matched by id, ranks and location (region path): `appeared`,
//! `disappeared`, or `both` with the change of the saving each claims (`impact_ns`).
//!
//! **Configuration**: what the analyses say of the job (world size, backend, devices, hosts,
//! steps profiled, where the figures come from, the groups and the mesh), only what differs.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::analyze::collectives::CollectiveStats;
use crate::analyze::Analysis;
use crate::finding::{Finding, FindingId, Severity};
use crate::model::CollKind;

/// One collective class (kind × group × size) in both runs.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct CollectiveDiff {
    pub kind: CollKind,
    /// The group's role when the layout names one, else the process group's name.
    pub group: String,
    /// The median message's size bucket: `1-4 MiB`, `<1 KiB`, or `unknown`.
    pub size: String,
    pub base: Option<CollSide>,
    pub new: Option<CollSide>,
}

/// One side of a [`CollectiveDiff`].
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct CollSide {
    pub calls_per_step: f64,
    pub bytes_p50: Option<i64>,
    pub dur_p50_ns: i64,
    pub transfer_mean_ns: Option<i64>,
    pub wait_mean_ns: Option<i64>,
    pub busbw_gbps: Option<f64>,
}

pub use crate::words::size_bucket;

fn group_label(a: &Analysis, pg: &str) -> String {
    a.layout
        .as_ref()
        .and_then(|l| l.groups.iter().find(|g| g.name == pg))
        .map_or_else(|| format!("pg {pg}"), |g| g.role.as_str().to_string())
}

fn side(c: &CollectiveStats, steps: usize) -> CollSide {
    CollSide {
        calls_per_step: c.count as f64 / steps.max(1) as f64,
        bytes_p50: c.bytes_p50,
        dur_p50_ns: c.dur_p50_ns,
        transfer_mean_ns: c.transfer_mean_ns,
        wait_mean_ns: c.sync_wait_mean_ns,
        busbw_gbps: c.busbw_gbps,
    }
}

/// The collective classes of either run.
pub fn collectives(base: &Analysis, new: &Analysis) -> Vec<CollectiveDiff> {
    type Key = (CollKind, String, String);
    let mut m: BTreeMap<Key, (Option<CollSide>, Option<CollSide>)> = BTreeMap::new();
    for (k, a) in [base, new].into_iter().enumerate() {
        let steps = a.steps.len();
        for c in &a.collectives {
            let key = (c.kind, group_label(a, &c.pg), size_bucket(c.bytes_p50));
            let e = m.entry(key).or_default();
            let s = side(c, steps);
            let slot = if k == 0 { &mut e.0 } else { &mut e.1 };
            // Two process groups of one role and size: their calls add up, the rest is the
            // busier group's.
            *slot = Some(match slot.take() {
                Some(mut x) if x.calls_per_step >= s.calls_per_step => {
                    x.calls_per_step += s.calls_per_step;
                    x
                }
                Some(x) => CollSide { calls_per_step: x.calls_per_step + s.calls_per_step, ..s },
                None => s,
            });
        }
    }
    m.into_iter()
        .map(|((kind, group, size), (b, n))| CollectiveDiff { kind, group, size, base: b, new: n })
        .collect()
}

crate::named_enum! {
    /// Whether a finding is in one run, the other, or both.
    pub enum FindingChange {
        Appeared => "appeared",
        Disappeared => "disappeared",
        Both => "both",
    }
}

/// One finding of either run.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct FindingDiff {
    pub id: FindingId,
    pub ranks: Vec<u32>,
    /// The location's region path, when it has one.
    pub location: Vec<String>,
    pub change: FindingChange,
    pub severity_base: Option<Severity>,
    pub severity_new: Option<Severity>,
    /// The saving per step each run's finding claims.
    pub impact_base_ns: Option<i64>,
    pub impact_new_ns: Option<i64>,
    /// The new run's message, else the base's.
    pub message: String,
}

/// Findings matched by id, ranks and location; in the new run's order, then the vanished ones
/// in the base's.
pub fn findings(base: &Analysis, new: &Analysis) -> Vec<FindingDiff> {
    let key = |f: &Finding| {
        (f.id, f.ranks.clone(), f.location.as_ref().map(|l| l.regions.clone()).unwrap_or_default())
    };
    let mut out: Vec<FindingDiff> = Vec::new();
    for f in &new.findings {
        let k = key(f);
        let b = base.findings.iter().find(|g| key(g) == k);
        out.push(FindingDiff {
            id: f.id,
            ranks: k.1,
            location: k.2,
            change: if b.is_some() { FindingChange::Both } else { FindingChange::Appeared },
            severity_base: b.map(|g| g.severity),
            severity_new: Some(f.severity),
            impact_base_ns: b.map(|g| g.impact_ns),
            impact_new_ns: Some(f.impact_ns),
            message: f.message.clone(),
        });
    }
    for g in &base.findings {
        let k = key(g);
        if new.findings.iter().any(|f| key(f) == k) {
            continue;
        }
        out.push(FindingDiff {
            id: g.id,
            ranks: k.1,
            location: k.2,
            change: FindingChange::Disappeared,
            severity_base: Some(g.severity),
            severity_new: None,
            impact_base_ns: Some(g.impact_ns),
            impact_new_ns: None,
            message: g.message.clone(),
        });
    }
    out
}

/// One configuration fact that differs.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct ConfigDiff {
    pub key: String,
    pub base: String,
    pub new: String,
}

fn facts(a: &Analysis) -> BTreeMap<&'static str, String> {
    let mut m = BTreeMap::new();
    let join = |v: Vec<String>| if v.is_empty() { "-".to_string() } else { v.join(", ") };
    let uniq = |v: Vec<String>| {
        let mut v = v;
        v.sort();
        v.dedup();
        v
    };
    m.insert("ranks", a.ranks.len().to_string());
    m.insert(
        "world_size",
        join(uniq(a.ranks.iter().filter_map(|r| r.world_size).map(|w| w.to_string()).collect())),
    );
    m.insert("backend", join(uniq(a.ranks.iter().filter_map(|r| r.backend.clone()).collect())));
    m.insert("devices", join(uniq(a.ranks.iter().flat_map(|r| r.devices.clone()).collect())));
    m.insert("hosts", uniq(a.ranks.iter().filter_map(|r| r.host.clone()).collect()).len().to_string());
    m.insert(
        "metrics_from",
        join(uniq(a.ranks.iter().map(|r| r.metrics_from.as_str().to_string()).collect())),
    );
    m.insert("steps_profiled", a.steps.len().to_string());
    if let Some(l) = &a.layout {
        let groups: Vec<String> =
            uniq(l.groups.iter().map(|g| format!("{} ×{} ranks", g.role.as_str(), g.ranks.len())).collect());
        m.insert("groups", join(groups));
        let mesh: Vec<String> = l.mesh.iter().map(|d| format!("{}={}", d.role.as_str(), d.size)).collect();
        m.insert("mesh", join(mesh));
    } else {
        m.insert("groups", "-".into());
        m.insert("mesh", "-".into());
    }
    m.insert("pipeline_stages", a.pipeline.as_ref().map_or("-".into(), |p| p.stages.len().to_string()));
    m
}

/// The facts that differ, in key order.
pub fn config(base: &Analysis, new: &Analysis) -> Vec<ConfigDiff> {
    let (b, n) = (facts(base), facts(new));
    b.iter()
        .filter_map(|(k, v)| {
            let w = n.get(k)?;
            (v != w).then(|| ConfigDiff { key: (*k).to_string(), base: v.clone(), new: w.clone() })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn size_buckets_are_powers_of_four() {
        assert_eq!(size_bucket(Some(18_993_216)), "16-64 MiB");
        assert_eq!(size_bucket(Some(1_600_000)), "1-4 MiB");
        assert_eq!(size_bucket(Some(1024)), "1-4 KiB");
        assert_eq!(size_bucket(Some(512)), "<1 KiB");
        assert_eq!(size_bucket(Some(300 << 10)), "256-1024 KiB");
        assert_eq!(size_bucket(None), "unknown");
    }
}
