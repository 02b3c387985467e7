//! The layout's unit tests.

use super::roles::role_from_name;
use super::*;

#[test]
fn megatron_order_puts_tensor_fastest() {
    let u = UserLayout::parse("dp=2, tp=2, pp=2").unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(u.dims, vec![(Role::Tensor, 2), (Role::Data, 2), (Role::Pipeline, 2)]);
    let g = u.groups();
    assert!(g.contains(&(Role::Tensor, vec![0, 1])));
    assert!(g.contains(&(Role::Data, vec![0, 2])));
    assert!(g.contains(&(Role::Data, vec![5, 7])));
    assert!(g.contains(&(Role::Pipeline, vec![3, 7])));
    assert_eq!(g.len(), 12);
}

#[test]
fn a_mesh_is_read_as_written_last_fastest() {
    let u = UserLayout::parse("mesh:replicate=2,shard=4").unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(u.dims, vec![(Role::Shard, 4), (Role::Replicate, 2)]);
    assert!(u.groups().contains(&(Role::Replicate, vec![1, 5])));
    assert!(UserLayout::parse("tp=2,tp=2").is_err());
    assert!(UserLayout::parse("xx=2").is_err());
    assert!(UserLayout::parse("tp=0").is_err());
    assert!(UserLayout::parse("").is_err());
}

#[test]
fn names_say_roles() {
    let g = |name: &str, desc: Option<&str>| Group {
        name: name.into(),
        desc: desc.map(str::to_string),
        ranks: vec![0, 1],
        source: GroupSource::PgConfig,
        role: Role::Unknown,
        role_from: RoleFrom::NotKnown,
        role_evidence: String::new(),
        instances: 0,
        hosts: 0,
        exposed_transfer_ns: 0,
        wait_ns: 0,
    };
    let role = |name: &str, desc: Option<&str>| role_from_name(&g(name, desc)).map(|x| x.0);
    assert_eq!(role("3", Some("TENSOR_MODEL_PARALLEL_GROUP")), Some(Role::Tensor));
    assert_eq!(role("3", Some("DATA_PARALLEL_GROUP_WITH_CP")), Some(Role::Data));
    assert_eq!(role("5", Some("mesh_dp_shard")), Some(Role::Shard));
    assert_eq!(role("5", Some("mesh_dp_replicate")), Some(Role::Replicate));
    assert_eq!(role("0", Some("default_pg")), None);
    assert_eq!(role("7", None), None);
    assert_eq!(role("7", Some("undefined")), None);
}
