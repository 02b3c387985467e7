//! The group / role filter every view shares: one process group of the analysis' layout
//! (`layout.groups[].name`) or every group of one role (tensor, data, …). Ranks × steps shows
//! only the filter's members, Collectives only the rows of its groups, the Timeline folds to
//! its members, and the Layout view highlights them. The URL hash keeps it (`group=NAME` or
//! `role=ROLE`, [`crate::hash`]).

use std::collections::BTreeSet;

use rankscope_core::analyze::layout::{Layout, Role};

/// What the views are filtered to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Filter {
    /// One process group, by its name (torch's counter: `"2"`, or a DeviceMesh name).
    Group(String),
    /// Every group of one role.
    Role(Role),
}

impl Filter {
    /// The ranks it keeps, or `None` when the layout has no such group or role (a hash from
    /// another job): then nothing is filtered.
    pub fn members(&self, layout: Option<&Layout>) -> Option<BTreeSet<u32>> {
        let l = layout?;
        let out: BTreeSet<u32> = match self {
            Filter::Group(name) => l.group(name)?.ranks.iter().copied().collect(),
            Filter::Role(role) => {
                l.groups.iter().filter(|g| g.role == *role).flat_map(|g| g.ranks.iter().copied()).collect()
            }
        };
        (!out.is_empty()).then_some(out)
    }

    /// Whether a collective of process group `pg` belongs to it.
    pub fn keeps_pg(&self, layout: Option<&Layout>, pg: &str) -> bool {
        match self {
            Filter::Group(name) => pg == name,
            Filter::Role(role) => layout.is_some_and(|l| l.role_of(pg) == *role),
        }
    }

    /// Its words: "tensor group 2", "every data group".
    pub fn words(&self, layout: Option<&Layout>) -> String {
        match self {
            Filter::Group(name) => match layout.and_then(|l| l.group(name)) {
                Some(g) if g.role != Role::Unknown => format!("{} group {name}", g.role),
                _ => format!("group {name}"),
            },
            Filter::Role(role) => format!("every {role} group"),
        }
    }

    /// The value of a `<select>` option and of the URL hash: `group:NAME`, `role:ROLE`.
    pub fn key(&self) -> String {
        match self {
            Filter::Group(name) => format!("group:{name}"),
            Filter::Role(role) => format!("role:{role}"),
        }
    }

    /// The inverse of [`Filter::key`].
    pub fn from_key(s: &str) -> Option<Filter> {
        let (k, v) = s.split_once(':')?;
        match k {
            "group" if !v.is_empty() => Some(Filter::Group(v.to_string())),
            "role" => Role::ALL.iter().copied().find(|r| r.as_str() == v).map(Filter::Role),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rankscope_core::analyze::layout::{Group, GroupSource, RoleFrom};

    fn group(name: &str, ranks: &[u32], role: Role) -> Group {
        Group {
            name: name.into(),
            desc: None,
            ranks: ranks.to_vec(),
            source: GroupSource::PgConfig,
            role,
            role_from: RoleFrom::Use,
            role_evidence: String::new(),
            instances: 0,
            hosts: 1,
            exposed_transfer_ns: 0,
            wait_ns: 0,
        }
    }

    #[test]
    fn members_and_keys() {
        let l = Layout {
            groups: vec![
                group("1", &[0, 1], Role::Tensor),
                group("2", &[2, 3], Role::Tensor),
                group("3", &[0, 2], Role::Data),
            ],
            ..Layout::default()
        };
        let set = |v: &[u32]| Some(v.iter().copied().collect::<BTreeSet<u32>>());
        assert_eq!(Filter::Group("2".into()).members(Some(&l)), set(&[2, 3]));
        assert_eq!(Filter::Role(Role::Tensor).members(Some(&l)), set(&[0, 1, 2, 3]));
        assert_eq!(Filter::Group("9".into()).members(Some(&l)), None, "no such group: nothing filtered");
        assert_eq!(Filter::Role(Role::Expert).members(Some(&l)), None);
        assert_eq!(Filter::Group("2".into()).members(None), None);
        assert!(Filter::Role(Role::Data).keeps_pg(Some(&l), "3"));
        assert!(!Filter::Role(Role::Data).keeps_pg(Some(&l), "1"));
        assert!(Filter::Group("1".into()).keeps_pg(Some(&l), "1"));
        for f in [Filter::Group("mesh:tp".into()), Filter::Role(Role::Pipeline)] {
            assert_eq!(Filter::from_key(&f.key()), Some(f));
        }
        assert_eq!(Filter::from_key("role:nope"), None);
        assert_eq!(Filter::from_key("group:"), None);
        assert_eq!(Filter::Group("2".into()).words(Some(&l)), "tensor group 2");
        assert_eq!(Filter::Role(Role::Data).words(Some(&l)), "every data group");
    }
}
