//! Hybrid-parallel jobs (`SynthConfig::hybrid`, `rankscope synth --layout`): the traces read
//! cleanly with our own ingest, every rank lists the manifest's groups in `pg_config`, every
//! group's members agree on each collective's `Seq`, each host has the clock the manifest says
//! (exactly, on every rank of it), and each cause is where the manifest says it is.

mod common;

use std::collections::BTreeMap;

use common::ingest_chunked;
use rankscope_core::model::{RankTrace, Severity};
use rankscope_synth::{
    self as synth, GroupNaming, Hybrid, HybridCause, Manifest, ManifestHybrid, Role, SynthConfig,
};

fn config(h: Hybrid, steps: u32) -> SynthConfig {
    SynthConfig {
        steps,
        straggler_rank: None,
        loss_allreduce: false,
        hybrid: Some(h),
        ..SynthConfig::default()
    }
}

fn small(tp: u32, pp: u32, dp: u32) -> Hybrid {
    // Small layers keep the files small; the shapes are what the tests look at.
    Hybrid {
        tp,
        pp,
        dp,
        micro_batches: 4,
        layers_per_stage: 1,
        hidden: 1024,
        seq_len: 1024,
        ..Hybrid::default()
    }
}

struct Job {
    man: Manifest,
    traces: Vec<RankTrace>,
}

impl Job {
    fn hybrid(&self) -> &ManifestHybrid {
        self.man.hybrid.as_ref().unwrap_or_else(|| panic!("no hybrid block: {:?}", self.man.adjustments))
    }
}

fn generate(cfg: &SynthConfig) -> Job {
    cfg.validate().unwrap_or_else(|e| panic!("{e}"));
    let n = synth::world_size(cfg) as usize;
    let outs = synth::write_ranks(cfg, vec![Vec::new(); n]).unwrap_or_else(|e| panic!("{e}"));
    let traces = outs
        .into_iter()
        .enumerate()
        .map(|(r, (bytes, len))| {
            assert_eq!(bytes.len() as u64, len);
            let t = ingest_chunked(&synth::file_name(r as u32, false), &bytes, 1 << 20)
                .unwrap_or_else(|e| panic!("{e}"));
            let bad: Vec<_> = t.diagnostics.iter().filter(|d| d.severity > Severity::Info).collect();
            assert!(bad.is_empty(), "rank {r}: {bad:?}");
            t
        })
        .collect();
    Job { man: synth::manifest(cfg), traces }
}

/// Each `record_param_comms` of a trace: (pg name, collective, Seq, group size).
fn comms(t: &RankTrace) -> Vec<(String, String, i64, i64)> {
    let c = &t.comm;
    (0..c.len())
        .filter(|&i| {
            c.event
                .get(i)
                .and_then(|e| t.events.name.get(e.0 as usize))
                .is_some_and(|n| t.strings.get(*n) == "record_param_comms")
        })
        .map(|i| {
            (
                t.strings.get(c.pg_name[i]).to_string(),
                t.strings.get(c.collective[i]).to_string(),
                c.seq[i],
                c.group_size[i],
            )
        })
        .collect()
}

#[test]
fn jobs_parse_and_every_rank_lists_the_manifests_groups() {
    let cases = [
        ("3-D megatron", small(2, 2, 2)),
        ("4-D with context", Hybrid { cp: 2, ..small(2, 2, 2) }),
        (
            "4-D with experts, torchtitan",
            Hybrid { ep: 2, dp: 4, naming: GroupNaming::Torchtitan, ..small(2, 2, 2) },
        ),
        (
            "gpipe, all_reduce",
            Hybrid {
                schedule: synth::Schedule::GPipe,
                dp_collective: synth::DpCollective::AllReduce,
                ..small(2, 4, 2)
            },
        ),
    ];
    for (what, h) in cases {
        let job = generate(&config(h, 2));
        let hy = job.hybrid();
        assert_eq!(job.traces.len() as u32, hy.layout.world, "{what}");
        for (r, t) in job.traces.iter().enumerate() {
            let d = t
                .meta
                .distributed
                .as_ref()
                .unwrap_or_else(|| panic!("{what}: rank {r} has no distributedInfo"));
            assert_eq!(d.rank, Some(r as i64), "{what}");
            assert_eq!(d.world_size, Some(i64::from(hy.layout.world)), "{what}");
            let want: Vec<(String, Option<String>, Vec<i64>)> = hy
                .groups
                .iter()
                .filter(|g| g.ranks.contains(&(r as u32)))
                .map(|g| {
                    (g.name.clone(), Some(g.desc.clone()), g.ranks.iter().map(|&x| i64::from(x)).collect())
                })
                .collect();
            let got: Vec<(String, Option<String>, Vec<i64>)> =
                d.pg_config.iter().map(|g| (g.name.clone(), g.desc.clone(), g.ranks.clone())).collect();
            assert_eq!(got, want, "{what}: rank {r}'s pg_config");
            assert_eq!(d.pg_count, Some(want.len() as i64), "{what}");
            let host = &hy.ranks[r].host;
            assert_eq!(t.meta.host_name.as_deref(), Some(host.as_str()), "{what}");
            // Every communication names a group of the rank, with the group's size.
            for (pg, coll, _, size) in comms(t) {
                let g = hy
                    .groups
                    .iter()
                    .find(|g| g.name == pg)
                    .unwrap_or_else(|| panic!("{what}: unknown group {pg}"));
                assert!(g.ranks.contains(&(r as u32)), "{what}: rank {r} is not in group {pg} ({coll})");
                assert_eq!(size, g.ranks.len() as i64, "{what}");
            }
        }
        // Names come from one counter: dense, in creation order.
        let names: Vec<String> = hy.groups.iter().map(|g| g.name.clone()).collect();
        assert_eq!(names, (0..names.len()).map(|i| i.to_string()).collect::<Vec<_>>(), "{what}");
    }
}

#[test]
fn cpu_events_nest_and_every_kernel_starts_after_its_launch() {
    use rankscope_core::model::{EventKind, LaneKind};
    let job = generate(&config(
        Hybrid {
            cp: 2,
            ep: 2,
            cause: HybridCause::HostStall { rank: 1, ns: 9_000_000, name: "x".into() },
            ..small(2, 2, 2)
        },
        2,
    ));
    for (r, t) in job.traces.iter().enumerate() {
        let ev = &t.events;
        // On each CPU thread, slices either nest or are disjoint.
        let mut by_lane: BTreeMap<u32, Vec<(i64, i64)>> = BTreeMap::new();
        for e in 0..ev.len() {
            let lane = ev.lane[e].0;
            if ev.kind[e] == EventKind::Slice && t.lanes.kind.get(lane as usize) == Some(&LaneKind::Cpu) {
                by_lane.entry(lane).or_default().push((ev.ts_ns[e], ev.ts_ns[e] + ev.dur_ns[e]));
            }
        }
        for (lane, mut v) in by_lane {
            v.sort_by_key(|&(s, e)| (s, std::cmp::Reverse(e)));
            let mut open: Vec<i64> = Vec::new();
            for (s, e) in v {
                while open.last().is_some_and(|&end| end <= s) {
                    open.pop();
                }
                if let Some(&end) = open.last() {
                    assert!(e <= end, "rank {r} lane {lane}: [{s}, {e}) crosses its parent's end {end}");
                }
                open.push(e);
            }
        }
        // Every GPU event has its launch (the same correlation) and starts after it ends.
        let mut launch: BTreeMap<u64, i64> = BTreeMap::new();
        for e in 0..ev.len() {
            if t.strings.get(ev.cat[e]) == "cuda_runtime" && ev.correlation[e] != u64::MAX {
                launch.insert(ev.correlation[e], ev.ts_ns[e] + ev.dur_ns[e]);
            }
        }
        for e in 0..ev.len() {
            let cat = t.strings.get(ev.cat[e]);
            if matches!(cat, "kernel" | "gpu_memcpy" | "gpu_memset") {
                let l = launch
                    .get(&ev.correlation[e])
                    .unwrap_or_else(|| panic!("rank {r}: a {cat} without its launch"));
                assert!(
                    ev.ts_ns[e] >= *l,
                    "rank {r}: {} starts before its launch ends",
                    t.strings.get(ev.name[e])
                );
            }
        }
    }
}

#[test]
fn members_agree_on_every_collectives_seq() {
    let job = generate(&config(Hybrid { cp: 2, ep: 2, ..small(2, 2, 2) }, 2));
    let hy = job.hybrid();
    // Per group: each member's sequence of (collective, Seq), collectives only (a send's or a
    // receive's `Seq` is the group's next collective number and is not bumped).
    let mut per: BTreeMap<String, BTreeMap<usize, Vec<(String, i64)>>> = BTreeMap::new();
    for (r, t) in job.traces.iter().enumerate() {
        for (pg, coll, seq, _) in comms(t) {
            if coll != "send" && coll != "recv" {
                per.entry(pg).or_default().entry(r).or_default().push((coll, seq));
            }
        }
    }
    let mut checked = 0;
    for members in per.values_mut() {
        // The file lists one thread's ops, then the other's: order by Seq.
        for seqs in members.values_mut() {
            seqs.sort_by_key(|x| x.1);
        }
    }
    for (pg, members) in &per {
        let g = hy.groups.iter().find(|g| &g.name == pg).unwrap_or_else(|| panic!("group {pg}"));
        assert_eq!(
            members.len(),
            g.ranks.len(),
            "group {pg} ({}): every member issues its collectives",
            g.desc
        );
        let first = members.values().next().cloned().unwrap_or_default();
        for (r, seqs) in members {
            assert_eq!(seqs, &first, "group {pg}: rank {r}'s collectives");
        }
        // Seq counts up by one per collective.
        assert!(first.windows(2).all(|w| w[1].1 == w[0].1 + 1), "group {pg}: {first:?}");
        assert_eq!(first.len() as u32, g.collectives_per_step * 2, "group {pg}");
        checked += 1;
    }
    let roles: Vec<Role> =
        per.keys().filter_map(|pg| hy.groups.iter().find(|g| &g.name == pg)).map(|g| g.role).collect();
    for role in [Role::Tensor, Role::DataContext, Role::Model, Role::Expert] {
        assert!(roles.contains(&role), "{role:?} collectives: {roles:?}");
    }
    assert!(checked >= 4);
    // The manifest's instances agree with the traces: a collective's members are its group's.
    for c in hy.collectives.iter().filter(|c| c.collective != "send") {
        let g = hy.groups.iter().find(|g| g.name == c.group).unwrap_or_else(|| panic!("group {}", c.group));
        assert_eq!(c.members, g.ranks);
        let latest = c.arrival_ns.iter().max().copied().unwrap_or(0);
        // Every member ends at the rendezvous: the last arrival plus the transfer, within 3 µs.
        for &e in &c.end_ns {
            assert!((latest + c.transfer_ns..=latest + c.transfer_ns + 3_000).contains(&e), "{c:?}");
        }
    }
}

#[test]
fn every_host_has_the_clock_the_manifest_states() {
    // 32 ranks on 4 hosts; offsets up to 30 ms.
    let job = generate(&config(small(4, 2, 4), 1));
    let hy = job.hybrid();
    assert_eq!(hy.hosts.len(), 4);
    let base = job.man.base_time_ns;
    for host in &hy.hosts {
        let off = host.clock_offset_ns;
        assert!(off.abs() >= 1_000 && off.abs() <= 30_000_000, "{}: {off}", host.name);
        for &r in &host.ranks {
            assert_eq!(job.man.ranks[r as usize].clock_offset_ns, off, "rank {r}");
        }
    }
    assert!(hy.hosts.windows(2).any(|w| w[0].clock_offset_ns != w[1].clock_offset_ns));
    // Each NCCL kernel's end in the file is its true end plus the host's offset, exactly.
    let mut checked = 0;
    for c in hy.collectives.iter().filter(|c| c.collective != "send") {
        let g = hy.groups.iter().find(|g| g.name == c.group).unwrap_or_else(|| panic!("group {}", c.group));
        for (i, &r) in c.members.iter().enumerate() {
            let t = &job.traces[r as usize];
            let off = job.man.ranks[r as usize].clock_offset_ns;
            let k = (0..t.comm.len()).find(|&j| {
                let e = t.comm.event[j].0 as usize;
                t.strings.get(t.events.cat[e]) == "kernel"
                    && t.strings.get(t.comm.pg_name[j]) == g.name
                    && t.comm.seq[j] == c.seq as i64
            });
            let Some(j) = k else { panic!("rank {r}: no kernel of {} Seq {}", g.name, c.seq) };
            let e = t.comm.event[j].0 as usize;
            assert_eq!(t.events.ts_ns[e] - base, c.arrival_ns[i] + off, "rank {r} {} Seq {}", g.name, c.seq);
            assert_eq!(t.events.ts_ns[e] + t.events.dur_ns[e] - base, c.end_ns[i] + off);
            checked += 1;
        }
    }
    assert!(checked > 100, "{checked}");
}

#[test]
fn a_host_stall_starts_the_chain_and_everyone_else_inherits() {
    let h = Hybrid {
        cause: HybridCause::HostStall { rank: 5, ns: 60_000_000, name: "slow_io".into() },
        ..small(4, 2, 4)
    };
    let job = generate(&config(h, 2));
    let hy = job.hybrid();
    let c = &hy.cause;
    assert_eq!((c.kind, c.origin_ranks.as_slice(), c.amount_ns), ("host_stall", &[5u32][..], 60_000_000));
    assert_eq!(c.expected_first_finding, Some("host_stall"));
    assert_eq!(job.man.injected.ranks, vec![5]);
    // Only rank 5's trace has the annotation, once per step.
    for (r, t) in job.traces.iter().enumerate() {
        let n = (0..t.events.len()).filter(|&e| t.strings.get(t.events.name[e]) == "slow_io").count();
        assert_eq!(n, if r == 5 { 2 } else { 0 }, "rank {r}");
    }
    // Its tensor partners wait for it first, inside their all_reduces; the next stage through
    // its receives; its data-parallel peers in the gradient reduce-scatter.
    let hop = |r: u32| hy.chain.iter().find(|x| x.rank == r).map(|x| (x.hop, x.role, x.waited_for));
    for partner in [4, 6, 7] {
        assert_eq!(hop(partner), Some((1, Some(Role::Tensor), Some(5))), "rank {partner}");
    }
    let next_stage = 5 + 16;
    assert_eq!(hop(next_stage).map(|x| (x.0, x.1)), Some((1, Some(Role::Pipeline))));
    let dp_peer = 5 + 4;
    assert!(hop(dp_peer).is_some_and(|x| x.0 <= 2), "{:?}", hop(dp_peer));
    assert!(!hy.inherited_ranks.contains(&5));
    assert_eq!(hy.inherited_ranks.len(), 31, "everyone else only inherits: {:?}", hy.inherited_ranks);
    // The stall is in the step, and the others waited about as long as it.
    let waited: i64 = hy.waits.iter().filter(|w| w.waiter == 4 && w.waited_for == 5).map(|w| w.wait_ns).sum();
    assert!(waited > 2 * 50_000_000, "rank 4 waited {waited} ns for rank 5 over 2 steps");
    assert!(job.man.ranks[5].host_stall_ns.iter().all(|&s| s >= 60_000_000));
}

#[test]
fn a_slow_stage_computes_longer_and_the_other_stages_wait_for_it() {
    let h = Hybrid { cause: HybridCause::SlowStage { stage: 1, extra_layers: 2 }, ..small(2, 4, 2) };
    let job = generate(&config(h, 2));
    let hy = job.hybrid();
    assert_eq!(hy.layout.layers_per_stage, vec![1, 3, 1, 1]);
    assert_eq!(hy.cause.expected_first_finding, Some("pipeline_bubble"));
    let on: Vec<u32> = (0..16).filter(|r| hy.ranks[*r as usize].pp == 1).collect();
    assert_eq!(hy.cause.origin_ranks, on);
    assert!(hy.cause.amount_ns > 0);
    let mean = |rs: &[u32]| {
        rs.iter().map(|&r| job.man.ranks[r as usize].compute_busy_ns[1]).sum::<i64>() / rs.len() as i64
    };
    let off: Vec<u32> = (0..16).filter(|r| hy.ranks[*r as usize].pp != 1).collect();
    assert!(mean(&on) as f64 > 1.3 * mean(&off) as f64, "{} vs {}", mean(&on), mean(&off));
    // Stage 2 waits for stage 1 in its receives.
    assert!(hy
        .chain
        .iter()
        .any(|x| hy.ranks[x.rank as usize].pp == 2 && x.hop == 1 && x.role == Some(Role::Pipeline)));
}

#[test]
fn a_tensor_group_across_two_hosts_runs_its_all_reduces_at_network_speed() {
    let h = Hybrid { cause: HybridCause::TpSpansHosts { group: 1 }, ..small(4, 2, 4) };
    let job = generate(&config(h, 1));
    let hy = job.hybrid();
    let spanning: Vec<&str> = hy
        .groups
        .iter()
        .filter(|g| g.role == Role::Tensor && g.spans_hosts)
        .map(|g| g.name.as_str())
        .collect();
    assert_eq!(spanning.len(), 2, "group 1 and the one its swapped ranks joined");
    assert_eq!(hy.cause.groups, spanning);
    assert_eq!(hy.cause.expected_first_finding, Some("tensor_group_spans_hosts"));
    // Ranks 6, 7 (group 1's second half) run on node01, ranks 8, 9 on node00.
    assert_eq!((hy.ranks[6].host.as_str(), hy.ranks[8].host.as_str()), ("node01", "node00"));
    assert_eq!(job.traces[6].meta.host_name.as_deref(), Some("node01"));
    // Their all_reduces take far longer than an NVLink group's.
    let transfer = |pg: &str| {
        hy.collectives
            .iter()
            .filter(|c| c.group == pg && c.collective == "allreduce")
            .map(|c| c.transfer_ns)
            .max()
            .unwrap_or(0)
    };
    let inside =
        hy.groups.iter().find(|g| g.role == Role::Tensor && !g.spans_hosts).map_or("", |g| g.name.as_str());
    assert!(
        transfer(spanning[0]) > 2 * transfer(inside),
        "{} vs {}",
        transfer(spanning[0]),
        transfer(inside)
    );
    assert!(hy.cause.amount_ns > 0);
}

#[test]
fn a_hot_expert_receives_most_tokens_in_uneven_all_to_alls() {
    let h = Hybrid {
        ep: 4,
        dp: 4,
        cause: HybridCause::ExpertImbalance { rank: 2, share: 0.7 },
        ..small(2, 2, 4)
    };
    let job = generate(&config(h, 1));
    let hy = job.hybrid();
    assert_eq!(hy.cause.expected_first_finding, Some("expert_imbalance"));
    let g = hy.groups.iter().find(|g| g.role == Role::Expert && g.ranks.contains(&2)).map(|g| g.name.clone());
    assert_eq!(hy.cause.groups, g.into_iter().collect::<Vec<_>>());
    // Rank 2's dispatch receives 70 % of every member's rows: its `Out split size` entries are
    // the largest, and so is its expert compute.
    let t = &job.traces[2];
    let split = (0..t.comm.len()).find(|&j| t.strings.get(t.comm.collective[j]) == "all_to_allv");
    assert!(split.is_some(), "an all_to_allv");
    assert!(job.man.ranks[2].compute_busy_ns[0] > job.man.ranks[0].compute_busy_ns[0]);
    assert!(hy.cause.amount_ns > 0);
}

#[test]
fn the_same_config_gives_the_same_bytes_whichever_ranks_are_written() {
    let cfg = config(
        Hybrid {
            cause: HybridCause::HostStall { rank: 3, ns: 5_000_000, name: "x".into() },
            ..small(2, 2, 2)
        },
        1,
    );
    let all = synth::write_ranks(&cfg, vec![Vec::new(); 8]).unwrap_or_else(|e| panic!("{e}"));
    let mut one = Vec::new();
    synth::write_rank(&cfg, 6, &mut one).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(all[6].0, one);
    // In batches of files (the CLI beyond 512 ranks), in any order.
    let some =
        synth::write_some(&cfg, vec![(7, Vec::new()), (2, Vec::new())]).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!((&some[0].0, &some[1].0), (&all[7].0, &all[2].0));
    let again = synth::write_ranks(&cfg, vec![Vec::new(); 8]).unwrap_or_else(|e| panic!("{e}"));
    assert!(all.iter().zip(&again).all(|(a, b)| a.0 == b.0));
}

#[test]
fn bad_layouts_are_refused_with_the_reason() {
    let bad = |h: Hybrid| config(h, 1).validate().err().map(|e| e.to_string()).unwrap_or_default();
    assert!(bad(Hybrid { ep: 3, ..small(2, 2, 2) }).contains("must divide cp·dp"));
    assert!(bad(Hybrid { cause: HybridCause::SlowStage { stage: 5, extra_layers: 1 }, ..small(2, 2, 2) })
        .contains("not a stage"));
    assert!(bad(Hybrid { cause: HybridCause::TpSpansHosts { group: 0 }, ..small(2, 2, 2) })
        .contains("more than one host"));
    assert!(bad(small(64, 64, 64)).contains("world size"));
}

/// A 1,024-rank tp=8 × pp=4 × dp=32 job: every rank written (to counters), every collective
/// completes. (Its time and memory are measured by `rankscope synth`, BENCHMARKS.md.)
#[test]
fn a_thousand_ranks_generate() {
    #[derive(Default)]
    struct Count(u64);
    impl std::io::Write for Count {
        fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
            self.0 += b.len() as u64;
            Ok(b.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let h = Hybrid { tp: 8, pp: 4, dp: 32, micro_batches: 4, layers_per_stage: 1, ..Hybrid::default() };
    let cfg = config(h, 1);
    assert_eq!(synth::world_size(&cfg), 1024);
    let outs = synth::write_ranks(&cfg, (0..1024).map(|_| Count::default()).collect())
        .unwrap_or_else(|e| panic!("{e}"));
    assert!(outs.iter().all(|(c, n)| c.0 == *n && *n > 100_000));
}
