use super::timeline::{level_for, tiles_covering, MAX_DEPTH, NO_LABEL, TILE_PX};
use super::*;
use crate::model::Class;
use crate::parse::ingest_bytes;

fn view_of(name: &str, json: &str) -> RankView {
    let t = ingest_bytes(name, json.as_bytes()).unwrap_or_else(|e| panic!("{e}"));
    RankView::new(t, &Rules::default())
}

/// A CPU thread with nesting and a GPU stream with back-to-back kernels (times in µs).
const NESTED: &str = r#"{"traceEvents":[
 {"ph":"X","name":"ProfilerStep#1","cat":"user_annotation","pid":1,"tid":1,"ts":0,"dur":100},
 {"ph":"X","name":"forward","cat":"user_annotation","pid":1,"tid":1,"ts":10,"dur":50},
 {"ph":"X","name":"aten::mm","cat":"cpu_op","pid":1,"tid":1,"ts":20,"dur":10},
 {"ph":"X","name":"aten::add","cat":"cpu_op","pid":1,"tid":1,"ts":30,"dur":5},
 {"ph":"X","name":"backward","cat":"user_annotation","pid":1,"tid":1,"ts":60,"dur":30},
 {"ph":"X","name":"k1","cat":"kernel","pid":0,"tid":7,"ts":10,"dur":0.2},
 {"ph":"X","name":"k2","cat":"kernel","pid":0,"tid":7,"ts":10.3,"dur":0.2},
 {"ph":"X","name":"k3","cat":"kernel","pid":0,"tid":7,"ts":10.6,"dur":0.2},
 {"ph":"X","name":"ncclDevKernel_AllReduce_Sum_f32_RING_LL","cat":"kernel","pid":0,"tid":7,"ts":50,"dur":40},
 {"ph":"i","name":"mark","cat":"cpu_instant_event","pid":1,"tid":1,"ts":95,"s":"t"}
]}"#;

fn lane_of(v: &RankView, gpu: bool) -> u32 {
    let s = v.summary().unwrap_or_else(|| panic!("no summary"));
    s.lanes.iter().find(|l| l.gpu == gpu).map(|l| l.lane).unwrap_or_else(|| panic!("no lane"))
}

/// The boxes of a tile as readable lines: `depth start..end class count label`.
fn render(t: &Tile) -> Vec<String> {
    (0..t.len())
        .map(|k| {
            let label =
                if t.label[k] == NO_LABEL { "-".to_string() } else { t.labels[t.label[k] as usize].clone() };
            format!(
                "d{} {}..{} {} x{} {}",
                t.depth[k],
                t.start_ns[k],
                t.end_ns[k],
                Class::ALL[t.class[k] as usize].name(),
                t.count[k],
                label
            )
        })
        .collect()
}

#[test]
fn nesting_depths_and_fine_tiles() {
    let v = view_of("nested.json", NESTED);
    let cpu = lane_of(&v, false);
    let gpu = lane_of(&v, true);
    assert_eq!(v.index.depth(cpu), 3, "step > forward > mm/add; backward at depth 1");
    assert_eq!(v.index.depth(gpu), 1);
    // Level 7: 128 ns per pixel, one tile = 32.768 µs. The first tile of the CPU lane.
    let t = v.tile(TileKey { lane: cpu, level: 7, index: 0 });
    assert_eq!(
        render(&t),
        [
            "d0 0..100000 annotation x1 ProfilerStep#1",
            "d1 10000..60000 annotation x1 forward",
            "d2 20000..30000 compute x1 aten::mm",
            "d2 30000..35000 compute x1 aten::add",
        ]
    );
    // The kernels are 200 ns wide with 100 ns gaps: separate boxes at 64 ns/px ...
    let fine = v.tile(TileKey { lane: gpu, level: 6, index: 0 });
    assert_eq!(fine.count[..3], [1, 1, 1]);
    // ... one merged box of three at 256 ns/px, then the NCCL kernel on its own.
    let coarse = v.tile(TileKey { lane: gpu, level: 8, index: 0 });
    assert_eq!(
        render(&coarse),
        [
            "d0 10000..10800 compute x3 -",
            "d0 50000..90000 communication x1 ncclDevKernel_AllReduce_Sum_f32_RING_LL"
        ]
    );
    assert_eq!(coarse.event[0], NONE_U32);
    let d = v.detail(coarse.event[1]).unwrap_or_else(|| panic!("detail"));
    assert_eq!((d.class.as_str(), d.dur_ns, d.gpu), ("communication", 40_000, true));
}

#[test]
fn tiles_partition_time_and_pick_finds_events() {
    let v = view_of("nested.json", NESTED);
    let cpu = lane_of(&v, false);
    // Tile 1 at level 7 starts at 32.768 µs: the open parents are repeated whole, mm is not there.
    let t = v.tile(TileKey { lane: cpu, level: 7, index: 1 });
    let r = render(&t);
    assert!(r.contains(&"d0 0..100000 annotation x1 ProfilerStep#1".to_string()), "{r:?}");
    assert!(r.iter().all(|l| !l.contains("aten::mm")), "{r:?}");
    assert!(r.iter().any(|l| l.contains("backward")), "{r:?}");
    // The instant sits in the first free row at 95 µs.
    let t3 = v.tile(TileKey { lane: cpu, level: 7, index: 2 });
    assert!(render(&t3).iter().any(|l| l.starts_with("d1 95000..95000")), "{:?}", render(&t3));
    let p = v.pick(cpu, 2, 25_000, 0).unwrap_or_else(|| panic!("pick"));
    assert_eq!(p.name, "aten::mm");
    assert!(v.pick(cpu, 2, 45_000, 1_000).is_none());
    assert_eq!(v.pick(cpu, 2, 45_000, 20_000).map(|d| d.name), Some("aten::add".to_string()));
    assert!(v.pick(99, 0, 0, 0).is_none());
    assert!(v.tile(TileKey { lane: 99, level: 3, index: 0 }).is_empty());
    assert!(v.tile(TileKey { lane: cpu, level: 40, index: i64::MAX }).is_empty());
}

#[test]
fn levels_and_covering_tiles() {
    assert_eq!(level_for(0.3), 0);
    assert_eq!(level_for(1.0), 0);
    assert_eq!(level_for(1000.0), 9);
    assert_eq!(level_for(1024.0), 10);
    assert_eq!(level_for(f64::NAN), 0);
    assert_eq!(level_for(1e30), timeline::MAX_LEVEL);
    let keys: Vec<i64> = tiles_covering(0, 0, -1, 2 * TILE_PX + 1).map(|k| k.index).collect();
    assert_eq!(keys, [-1, 0, 1, 2]);
    assert_eq!(TileKey { lane: 0, level: 1, index: 2 }.range_ns(), (4 * TILE_PX, 6 * TILE_PX));
}

/// Every indexed event lands in exactly one box of a tile that holds the whole rank, at every
/// zoom level; a row never has more than about two boxes per pixel column.
fn check_lod(v: &RankView) {
    let s = v.summary().unwrap_or_else(|| panic!("no summary"));
    for lane in &s.lanes {
        let mut level = 0u8;
        let span_tile = loop {
            let w = TILE_PX << level;
            if s.span_start_ns.div_euclid(w) == s.span_end_ns.div_euclid(w) {
                break s.span_start_ns.div_euclid(w);
            }
            level += 1;
        };
        for lv in [level, level + 3] {
            let t = v.tile(TileKey { lane: lane.lane, level: lv, index: span_tile >> (lv - level) });
            let total: u64 = t.count.iter().map(|&c| u64::from(c)).sum();
            assert_eq!(total + v.index.hidden, u64::from(lane.events), "{} level {lv}", lane.label);
            for d in 0..lane.depth.min(MAX_DEPTH as u32) {
                let n = t.depth.iter().filter(|&&x| u32::from(x) == d).count() as i64;
                assert!(n <= 2 * TILE_PX + 2, "{} depth {d}: {n} boxes", lane.label);
            }
        }
        // A finer level: boxes of one row never overlap and are in time order.
        let fine = v.tile(TileKey { lane: lane.lane, level: level.saturating_sub(6), index: span_tile << 6 });
        for d in 0..lane.depth {
            let mut last = i64::MIN;
            for k in (0..fine.len()).filter(|&k| u32::from(fine.depth[k]) == d) {
                assert!(fine.start_ns[k] >= last, "{} depth {d} overlaps", lane.label);
                last = fine.end_ns[k];
            }
        }
    }
}

#[test]
fn demo_rank_summary_matches_inspect_and_lod_holds() {
    let mut bytes = Vec::new();
    rankscope_synth::write_rank(&rankscope_synth::SynthConfig::default(), 5, &mut bytes)
        .unwrap_or_else(|e| panic!("{e}"));
    let v = view_of("rank5.pt.trace.json", std::str::from_utf8(&bytes).unwrap_or_else(|e| panic!("{e}")));
    let s = v.summary().unwrap_or_else(|| panic!("no summary"));
    let r = v.inspect().unwrap_or_else(|| panic!("no report"));
    assert_eq!((s.rank, s.rank_source.as_str(), s.world_size), (5, "distributed_info", Some(8)));
    assert_eq!(s.events, r.events.total);
    assert_eq!(s.steps.len(), 6);
    assert!(s.comm_kernels > 0 && s.gpu_ops > s.comm_kernels);
    assert!(s.lanes.iter().any(|l| l.gpu) && s.lanes.iter().any(|l| !l.gpu));
    assert!(!s.lanes[0].gpu, "CPU threads first");
    assert_eq!(v.index.hidden, 0);
    check_lod(&v);
    // The summary crosses the worker boundary as JSON and comes back equal.
    let json = serde_json::to_string(&s).unwrap_or_else(|e| panic!("{e}"));
    let back: RankSummary = serde_json::from_str(&json).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(back, s);
}

#[test]
#[allow(clippy::disallowed_methods)] // a test reads ../shared from disk; the core never does
fn real_trace_lod_holds() {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../../shared/traces/param-dlrm-8rank/worker3_step_12.1694128201557.pt.trace.json");
    let Ok(bytes) = std::fs::read(&path) else {
        panic!("missing {}: the real-data tests read ../shared beside the repository", path.display());
    };
    let t = crate::parse::ingest_bytes("worker3_step_12.1694128201557.pt.trace.json", &bytes)
        .unwrap_or_else(|e| panic!("{e}"));
    let v = RankView::new(t, &Rules::default());
    let s = v.summary().unwrap_or_else(|| panic!("no summary"));
    assert_eq!(s.rank, 3);
    assert_eq!(s.events, v.inspect().map_or(0, |r| r.events.total));
    check_lod(&v);
}

#[test]
fn ranks_are_decided_as_the_cli_decides_them() {
    let c = |f: &str, r: Option<i64>| RankClaim { file: f.to_string(), claimed_rank: r, in_file: None };
    let d = crate::normalize::decide(
        &[c("a.json", Some(3)), c("foo.json", None), c("dir/worker1.json", None), c("bar.json", None)],
        &[],
    )
    .0;
    let got: Vec<(u32, &str)> = d.iter().map(|x| (x.rank, x.rank_source.as_str())).collect();
    assert_eq!(got, [(3, "distributed_info"), (0, "load_order"), (1, "file_name"), (2, "load_order")]);
    assert!(d[0].diagnostics.is_empty());
    assert_eq!(d[3].diagnostics[0].kind, "rank_from_load_order");
    assert!(d[3].diagnostics[0].message.contains("rank 2"));
    let dup = crate::normalize::decide(&[c("x.json", Some(1)), c("y.json", Some(1))], &[]).0;
    assert_eq!(dup[1].diagnostics[0].kind, "duplicate_rank");
    assert_eq!(dup[1].diagnostics[0].severity.diagnostic_name(), "error");

    // A worker that saw only `bar.json` said rank 0; the decision makes it 2.
    let mut s = view_of("bar.json", NESTED).summary().unwrap_or_else(|| panic!("summary"));
    assert_eq!(s.rank, 0);
    apply_decision(&mut s, &d[3]);
    assert_eq!(s.rank, 2);
    let kinds: Vec<&str> = s.diagnostics.iter().map(|x| x.kind.as_str()).collect();
    assert_eq!(kinds.iter().filter(|k| **k == "rank_from_load_order").count(), 1);
    assert!(s.diagnostics.iter().any(|x| x.message.contains("rank 2 given by load order")));
}

#[test]
fn job_facts_from_summaries() {
    let mut bytes = Vec::new();
    let cfg = rankscope_synth::SynthConfig {
        ranks: 4,
        steps: 2,
        kernels_per_step: 40,
        straggler_rank: Some(1),
        ..Default::default()
    };
    let mut sums = Vec::new();
    for r in [0, 1, 3] {
        bytes.clear();
        rankscope_synth::write_rank(&cfg, r, &mut bytes).unwrap_or_else(|e| panic!("{e}"));
        let v =
            view_of(&format!("rank{r}.json"), std::str::from_utf8(&bytes).unwrap_or_else(|e| panic!("{e}")));
        sums.push(v.summary().unwrap_or_else(|| panic!("summary")));
    }
    let f = JobFacts::from_ranks(&sums);
    assert_eq!((f.ranks, f.world_sizes.clone(), f.missing_ranks.clone()), (3, vec![4], vec![2]));
    assert_eq!(f.backends, ["nccl"]);
    assert_eq!(f.steps.len(), 2);
    assert_eq!(f.devices.len(), 1);
    assert!(f.span_end_ns > f.span_start_ns);
    assert_eq!(f.events, sums.iter().map(|s| s.events).sum::<u64>());
}

/// A launch and its kernel, linked by correlation id.
const LAUNCHED: &str = r#"{"traceEvents":[
 {"ph":"X","name":"ProfilerStep#1","cat":"user_annotation","pid":1,"tid":1,"ts":0,"dur":100},
 {"ph":"X","name":"cudaLaunchKernel","cat":"cuda_runtime","pid":1,"tid":1,"ts":10,"dur":5,"args":{"correlation":7}},
 {"ph":"X","name":"volta_sgemm","cat":"kernel","pid":0,"tid":7,"ts":20,"dur":30,"args":{"correlation":7,"device":0,"stream":7}}
]}"#;

#[test]
fn search_finds_names_and_where_they_are_drawn() {
    let v = view_of("nested.json", NESTED);
    let cpu = lane_of(&v, false);
    let f = v.search("ATEN::", 10);
    assert_eq!(f.total, 2);
    let hits: Vec<(u32, u32, i64)> = f.hits.iter().map(|h| (h.lane, h.depth, h.start_ns)).collect();
    assert_eq!(hits, [(cpu, 2, 20_000), (cpu, 2, 30_000)]);
    assert_eq!(v.search("aten", 1).hits.len(), 1, "at most `limit` places");
    assert_eq!(v.search("  ", 10), Found::default());
    assert_eq!(v.search("nothing-like-this", 10).total, 0);
}

#[test]
fn a_launch_and_its_kernel_link_to_each_other() {
    let v = view_of("launched.json", LAUNCHED);
    let (cpu, gpu) = (lane_of(&v, false), lane_of(&v, true));
    let k = v.pick(gpu, 0, 30_000, 0).unwrap_or_else(|| panic!("kernel"));
    let l = k.link.unwrap_or_else(|| panic!("the kernel links to its launch"));
    assert_eq!(
        (l.name.as_str(), l.place.lane, l.place.depth, l.place.start_ns),
        ("cudaLaunchKernel", cpu, 1, 10_000)
    );
    let launch = v.pick(cpu, 1, 12_000, 0).unwrap_or_else(|| panic!("launch"));
    let l = launch.link.unwrap_or_else(|| panic!("the launch links to its kernel"));
    assert_eq!((l.name.as_str(), l.place.lane, l.place.end_ns), ("volta_sgemm", gpu, 50_000));
}

/// One rank's step with two all_reduce kernels (the second `late_us` later on this rank).
fn coll_rank(late_us: u32) -> String {
    format!(
        r#"{{"traceEvents":[
 {{"ph":"X","name":"ProfilerStep#1","cat":"user_annotation","pid":1,"tid":1,"ts":0,"dur":400}},
 {{"ph":"X","name":"k1","cat":"kernel","pid":0,"tid":7,"ts":10,"dur":20}},
 {{"ph":"X","name":"ncclDevKernel_AllReduce_Sum_f32_RING_LL","cat":"kernel","pid":0,"tid":7,"ts":50,"dur":40}},
 {{"ph":"X","name":"ncclDevKernel_AllReduce_Sum_f32_RING_LL","cat":"kernel","pid":0,"tid":7,"ts":{},"dur":40}}
]}}"#,
        150 + late_us
    )
}

#[test]
fn members_pair_each_collective_across_ranks() {
    let views = [view_of("r0.json", &coll_rank(0)), view_of("r1.json", &coll_rank(30))];
    let parts: Vec<RankPart> = views
        .iter()
        .enumerate()
        .map(|(r, v)| {
            let mut p = v.analysis_part().unwrap_or_else(|| panic!("a part"));
            p.info.rank = r as u32;
            p
        })
        .collect();
    let m = members::members(parts, &Default::default());
    assert_eq!(m.collectives.len(), 2, "{m:?}");
    // The second all_reduce: rank 0 entered 30 µs before rank 1 and waited for it.
    let second = m.collectives.iter().find(|c| c.members.iter().any(|x| x.aligned_ns == 180_000));
    let second = second.unwrap_or_else(|| panic!("the late one: {m:?}"));
    let ranks: Vec<u32> = second.members.iter().map(|x| x.rank).collect();
    assert_eq!(ranks, vec![0, 1]);
    assert_eq!(second.members[0].wait_ns, 30_000);
    assert_eq!(second.members[0].after_last_ns, 10_000);
    assert_eq!(second.members[1].wait_ns, 0);
    // Each member finds its collective again, and its event is where the timeline draws it.
    for x in &second.members {
        let (_, c) = m.of(x.rank, x.event).unwrap_or_else(|| panic!("indexed"));
        assert_eq!(c, second);
        let hit = views[x.rank as usize].place_of(x.event).unwrap_or_else(|| panic!("placed"));
        assert_eq!((hit.lane, hit.start_ns, hit.end_ns), (x.lane, x.start_ns, x.end_ns));
    }
    assert!(m.of(0, 0).is_none());
    // A host op around the second one's issue finds it; one around nothing finds none.
    let issued = second.members[0].issued_ns;
    assert_eq!(m.issued_in(0, issued, issued + 1).map(|(_, c)| c), Some(second));
    assert!(m.issued_in(0, -10, -5).is_none());
}
