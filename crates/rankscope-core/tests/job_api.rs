//! The job API (`rankscope_core::job`): parts computed one file at a time, anywhere, and
//! combined with the job's rank decision give exactly the analysis of the job normalized whole.

// Tests read the zoo and ../shared from disk; the core never does (its clippy.toml).
#![allow(clippy::disallowed_methods, clippy::disallowed_types)]

mod common;

use rankscope_core::analyze::{Options, RankPart};
use rankscope_core::job::{self, InputKind, Loaded, Reader, Text};
use rankscope_core::model::RankTrace;
use rankscope_core::normalize::Rules;

fn zoo(dir: &str) -> Vec<(String, Vec<u8>)> {
    let root = std::path::Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../../tests/zoo")).join(dir);
    let mut files: Vec<_> = std::fs::read_dir(&root)
        .unwrap_or_else(|e| panic!("{}: {e}", root.display()))
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| p.to_string_lossy().ends_with(".json.gz"))
        .collect();
    files.sort();
    files.iter().map(|p| (p.display().to_string(), common::read(p))).collect()
}

fn read_all(name: &str, bytes: &[u8]) -> Loaded {
    let mut r = Reader::new(name);
    for c in bytes.chunks(1 << 16) {
        r.feed(c);
    }
    r.finish().unwrap_or_else(|e| panic!("{e}"))
}

fn trace(name: &str, bytes: &[u8]) -> RankTrace {
    match read_all(name, bytes) {
        Loaded::Trace(t) => *t,
        Loaded::Text(t) => panic!("{name}: read as {:?}", t.kinds),
    }
}

/// Parts as a remote worker would send them: computed alone, as JSON there and back.
fn remote_parts(traces: Vec<RankTrace>, opts: &Options) -> Vec<(rankscope_core::view::RankClaim, RankPart)> {
    traces
        .into_iter()
        .rev()
        .map(|t| {
            let (c, p) = job::part_of(t, &Rules::default(), opts)
                .into_iter()
                .next()
                .unwrap_or_else(|| panic!("no part"));
            let p: RankPart = serde_json::from_str(&serde_json::to_string(&p).unwrap_or_default())
                .unwrap_or_else(|e| panic!("{e}"));
            (c, p)
        })
        .rev()
        .collect()
}

#[test]
fn parts_from_anywhere_equal_the_whole_job() {
    let opts = Options::default();
    for dir in ["host_stall", "pipeline_gpipe", "hang_skipped_allreduce"] {
        let files = zoo(dir);
        let whole = job::analyze_traces(
            files.iter().map(|(n, b)| trace(n, b)).collect(),
            &[],
            &Rules::default(),
            &[],
            &opts,
        )
        .1;
        let parts = remote_parts(files.iter().map(|(n, b)| trace(n, b)).collect(), &opts);
        let combined = job::combine(parts, &[], &[], &opts);
        assert_eq!(combined.json(), whole.json(), "{dir}");
        // The analysis reads back from its own JSON (a shell that gets text holds the value).
        let back: rankscope_core::analyze::Analysis =
            serde_json::from_str(&whole.json()).unwrap_or_else(|e| panic!("{dir}: {e}"));
        assert_eq!(back, whole.analysis, "{dir}");
    }
}

#[test]
fn parts_filed_under_the_jobs_ranks_equal_recomputed_ones() {
    // Files that carry no rank at all: the job gives load-order ranks 0..n, while each file
    // alone is rank 0. Every part but the first is filed under another rank than it was
    // computed with.
    let opts = Options::default();
    let files = zoo("host_stall");
    let anonymous = |k: usize, (_, b): &(String, Vec<u8>)| {
        let mut t = trace(&format!("worker-{}.json", ["a", "b", "c", "d"][k]), b);
        if let Some(d) = t.meta.distributed.as_mut() {
            d.rank = None;
        }
        t
    };
    let whole = job::analyze_traces(
        files.iter().enumerate().map(|(k, f)| anonymous(k, f)).collect(),
        &[],
        &Rules::default(),
        &[],
        &opts,
    )
    .1;
    let ranks: Vec<u32> = whole.analysis.ranks.iter().map(|r| r.rank).collect();
    assert_eq!(ranks, vec![0, 1, 2, 3]);
    let parts = remote_parts(files.iter().enumerate().map(|(k, f)| anonymous(k, f)).collect(), &opts);
    assert!(parts.iter().all(|(_, p)| p.info.rank == 0), "each file alone is rank 0");
    let combined = job::combine(parts, &[], &[], &opts);
    assert_eq!(combined.json(), whole.json());
    // The finding names the rank the job decided: files in rank order get load-order ranks
    // equal to the ones the run had, so it is the injected one.
    let scenario: serde_json::Value = serde_json::from_slice(&common::read(std::path::Path::new(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../tests/zoo/host_stall/scenario.json"
    ))))
    .unwrap_or_else(|e| panic!("{e}"));
    let injected: Vec<u32> = scenario["injected"]["ranks"]
        .as_array()
        .map(|v| v.iter().filter_map(|x| x.as_u64()).map(|x| x as u32).collect())
        .unwrap_or_default();
    assert!(!injected.is_empty());
    let first = combined.analysis.findings.first().map(|f| (f.id, f.ranks.clone()));
    assert_eq!(first, Some((rankscope_core::finding::FindingId::HostStall, injected)));

    // Explicit ranks win, as `--rank FILE=N` does.
    let explicit = vec![("worker-a.json".to_string(), 3), ("worker-d.json".to_string(), 0)];
    let parts = remote_parts(files.iter().enumerate().map(|(k, f)| anonymous(k, f)).collect(), &opts);
    let combined = job::combine(parts, &explicit, &[], &opts);
    let whole = job::analyze_traces(
        files.iter().enumerate().map(|(k, f)| anonymous(k, f)).collect(),
        &explicit,
        &Rules::default(),
        &[],
        &opts,
    )
    .1;
    assert_eq!(combined.json(), whole.json());
    let of = |file: &str| combined.analysis.ranks.iter().find(|r| r.source == file).map(|r| r.rank);
    assert_eq!((of("worker-a.json"), of("worker-d.json")), (Some(3), Some(0)));
}

#[test]
fn texts_join_the_job() {
    let opts = Options::default();
    let tests_file = common::shared().join("nccl-tests");
    let mut perf: Vec<_> = std::fs::read_dir(&tests_file)
        .unwrap_or_else(|e| panic!("{e}"))
        .filter_map(Result::ok)
        .map(|e| e.path())
        .collect();
    perf.sort();
    let texts: Vec<Text> = perf
        .iter()
        .filter_map(|p| match read_all(&p.display().to_string(), &common::read(p)) {
            Loaded::Text(t) => Some(t),
            Loaded::Trace(_) => None,
        })
        .collect();
    assert!(texts.iter().any(|t| t.kinds.contains(&InputKind::NcclTests)), "no nccl-tests file recognised");
    let refs: Vec<_> = texts.iter().map(Text::as_ref).collect();
    let files = zoo("baseline");
    let out = job::analyze_traces(
        files.iter().map(|(n, b)| trace(n, b)).collect(),
        &[],
        &Rules::default(),
        &refs,
        &opts,
    )
    .1;
    let tests = out.fabric.as_ref().and_then(|f| f.tests.as_ref());
    assert!(tests.is_some_and(|t| !t.tests.is_empty()), "the nccl-tests report is read");
    // The same texts given to the analysis by hand give the same JSON (the job API only adds the
    // reading).
    let by_hand = Options { fabric: tests.cloned(), ..Options::default() };
    let direct = job::analyze_traces(
        files.iter().map(|(n, b)| trace(n, b)).collect(),
        &[],
        &Rules::default(),
        &[],
        &by_hand,
    )
    .1;
    assert_eq!(out.json(), direct.json());
}

#[test]
fn dumps_alone_give_the_fr_report() {
    let dir =
        std::path::Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../../tests/zoo/hang_skipped_allreduce"));
    let mut names: Vec<_> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("{e}"))
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| p.to_string_lossy().ends_with(".pkl"))
        .collect();
    names.sort();
    assert_eq!(names.len(), 4, "the hang run's four pickled dumps");
    let texts: Vec<Text> = names
        .iter()
        .map(|p| match read_all(&p.display().to_string(), &common::read(p)) {
            Loaded::Text(t) => t,
            Loaded::Trace(_) => panic!("{}: a dump read as a trace", p.display()),
        })
        .collect();
    let refs: Vec<_> = texts.iter().map(Text::as_ref).collect();
    let out = job::combine(Vec::new(), &[], &refs, &Options::default());
    assert!(!out.has_traces());
    let json: serde_json::Value = serde_json::from_str(&out.json()).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(json["schema"], "rankscope.fr");
    assert!(out.flight_recorder.as_ref().is_some_and(|f| f.dumps.len() == 4));
}

#[test]
fn nccl_reports_read_back_from_their_json() {
    // A worker parses NCCL text and posts the reports as JSON: they must come back equal.
    let mut texts = Vec::new();
    for dir in ["nccl-logs", "nccl-tests"] {
        let mut paths: Vec<_> = std::fs::read_dir(common::shared().join(dir))
            .unwrap_or_else(|e| panic!("{dir}: {e}"))
            .filter_map(Result::ok)
            .map(|e| e.path())
            .filter(|p| p.is_file())
            .collect();
        paths.sort();
        for p in paths {
            if let Loaded::Text(t) = read_all(&p.display().to_string(), &common::read(&p)) {
                texts.push(t);
            }
        }
    }
    let refs: Vec<_> = texts.iter().map(Text::as_ref).collect();
    let fabric = job::fabric(&refs).unwrap_or_else(|| panic!("no NCCL text recognised"));
    let logs = fabric.logs.as_ref().unwrap_or_else(|| panic!("no NCCL_DEBUG log recognised"));
    let tests = fabric.tests.as_ref().unwrap_or_else(|| panic!("no nccl-tests output recognised"));
    let back: rankscope_core::nccl::LogReport =
        serde_json::from_str(&serde_json::to_string(logs).unwrap_or_default())
            .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(&back, logs);
    let back: rankscope_core::nccl::TestsReport =
        serde_json::from_str(&serde_json::to_string(tests).unwrap_or_default())
            .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(&back, tests);
}

/// Two threads, as a host runs the core's independent passes (`rankscope-host`'s `Threads`).
struct TwoThreads;

impl rankscope_core::join::Join for TwoThreads {
    fn join<A: Send, B: Send>(&self, a: impl FnOnce() -> A + Send, b: impl FnOnce() -> B + Send) -> (A, B) {
        std::thread::scope(|s| {
            let hb = s.spawn(b);
            let ra = a();
            (ra, hb.join().unwrap_or_else(|_| panic!("the other side panicked")))
        })
    }
}

/// The ranks normalized and their parts computed side by side (`join::map`), and a part with its
/// passes on two threads (of the job, or of one file alone), give the serial parts and the
/// serial job.
#[test]
fn parts_on_two_threads_equal_the_serial_parts() {
    let opts = Options::default();
    for dir in ["host_stall", "pipeline_1f1b", "hang_skipped_allreduce"] {
        let files = zoo(dir);
        if files.is_empty() {
            continue;
        }
        let traces: Vec<RankTrace> = files.iter().map(|(n, b)| trace(n, b)).collect();
        let (_, serial) = job::analyze_traces(traces.clone(), &[], &Rules::default(), &[], &opts);
        let (j, threaded) = job::analyze_traces_with(traces, &[], &Rules::default(), &[], &opts, &TwoThreads);
        assert_eq!(threaded.json(), serial.json(), "{dir}");
        for r in &j.ranks {
            let a = rankscope_core::analyze::rank_part(r, &j.strings, opts.kernel_wait_threshold_ns);
            let b = rankscope_core::analyze::rank_part_with(
                r,
                &j.strings,
                opts.kernel_wait_threshold_ns,
                &TwoThreads,
            );
            assert_eq!(a, b, "{dir}, rank {}", r.rank);
        }
        // One file's part (what the CLI computes on the thread that read the file).
        for (n, b) in &files {
            let alone = job::part_of(trace(n, b), &Rules::default(), &opts);
            let two = job::part_of_with(trace(n, b), &Rules::default(), &opts, &TwoThreads);
            assert_eq!(alone, two, "{dir}: {n}");
        }
    }
}
