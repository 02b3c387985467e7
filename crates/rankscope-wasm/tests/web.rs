//! The shapes of the JavaScript API, checked in headless Chromium (`./x test` runs these with
//! wasm-bindgen-test-runner). The core's own tests check the figures, and tests/npm checks the
//! package against the CLI byte for byte; these check that what JS receives is what
//! `rankscope_wasm.d.ts` declares.
#![cfg(target_arch = "wasm32")]

use js_sys::{Array, BigInt, Reflect};
use rankscope_synth::{self as synth, SynthConfig};
use rankscope_wasm::*;
use wasm_bindgen::prelude::*;
use wasm_bindgen_test::*;

wasm_bindgen_test_configure!(run_in_browser);

fn get(v: &JsValue, key: &str) -> JsValue {
    Reflect::get(v, &JsValue::from_str(key)).unwrap_or(JsValue::UNDEFINED)
}

/// Rank `rank` of the synthetic demo job (8 ranks), as Kineto JSON bytes.
fn demo_rank(rank: u32) -> Vec<u8> {
    let mut out = Vec::new();
    synth::write_rank(&SynthConfig::default(), rank, &mut out).unwrap_or_else(|e| panic!("{e}"));
    out
}

fn input(name: &str, bytes: &[u8], chunk: usize) -> JobInput {
    let mut i = JobInput::new(name);
    for c in bytes.chunks(chunk) {
        i.feed(c);
    }
    i
}

fn message(e: JsError) -> String {
    get(&JsValue::from(e), "message").as_string().unwrap_or_default()
}

#[wasm_bindgen_test]
fn an_input_reads_in_chunks_and_its_rank_answers_the_timelines_questions() {
    let bytes = demo_rank(2);
    let mut i = input(&synth::file_name(2, false), &bytes, 1 << 20);
    assert_eq!(i.kind().unwrap_or_else(|_| panic!("kind")).as_string().as_deref(), Some("trace"));
    let p = i.progress().unwrap_or_else(|_| panic!("progress"));
    assert!(get(&p, "input_bytes").is_bigint());
    assert_eq!(BigInt::from(bytes.len() as u64), get(&p, "input_bytes").unchecked_into::<BigInt>());
    assert!(get(&p, "events").is_bigint());
    let mut job = Job::new(true);
    let a = job.add(&mut i, false).unwrap_or_else(|_| panic!("add"));
    assert_eq!(get(&a, "kind").as_string().as_deref(), Some("trace"));
    assert!(get(&a, "error").is_null());
    assert!(job.add(&mut i, false).is_err(), "an input is added once");
    job.finish().unwrap_or_else(|_| panic!("finish"));
    let ranks: Array = job.ranks().unwrap_or_else(|_| panic!("ranks")).unchecked_into();
    assert_eq!(ranks.length(), 1);
    let s = ranks.get(0);
    assert_eq!(get(&s, "rank").as_f64(), Some(2.0));
    assert_eq!(get(&s, "rank_source").as_string().as_deref(), Some("distributed_info"));
    assert!(get(&s, "events").is_bigint());
    assert!(get(&s, "span_start_ns").is_bigint(), "absolute ns exceed 2^53: bigint");
    assert_eq!(get(&s, "steps").unchecked_into::<Array>().length(), 6);
    let lanes: Array = get(&s, "lanes").unchecked_into();
    assert!(lanes.length() >= 3);
    let gpu_lane =
        lanes.iter().find(|l| get(l, "gpu").as_bool() == Some(true)).unwrap_or_else(|| panic!("gpu lane"));
    let lane = get(&gpu_lane, "lane").as_f64().unwrap_or(0.0) as u32;

    // A tile over the whole trace at a coarse level, by key and by window.
    let start: i64 = get(&s, "span_start_ns").unchecked_into::<BigInt>().try_into().unwrap_or(0);
    let end: i64 = get(&s, "span_end_ns").unchecked_into::<BigInt>().try_into().unwrap_or(0);
    let level = 20u8;
    let t = job.tile(2, lane, level, start.div_euclid(256i64 << level)).unwrap_or_else(|_| panic!("tile"));
    assert!(get(&t, "depth").unchecked_into::<Array>().length() > 0);
    assert!(get(&t, "start_ns").unchecked_into::<Array>().get(0).is_bigint());
    assert!(get(&get(&t, "key"), "index").is_bigint());
    let tiles: Array =
        job.tiles(2, lane, start, end, 800).unwrap_or_else(|_| panic!("tiles")).unchecked_into();
    assert!(tiles.length() >= 1);
    assert!(job.tiles(5, lane, start, end, 800).is_err(), "no rank 5");
    let first_start: i64 = get(&t, "start_ns")
        .unchecked_into::<Array>()
        .get(0)
        .unchecked_into::<BigInt>()
        .try_into()
        .unwrap_or(0);
    let d = job.pick(2, lane, 0, first_start, 0).unwrap_or_else(|_| panic!("pick"));
    assert!(get(&d, "name").as_string().is_some_and(|n| !n.is_empty()));
    assert!(get(&d, "start_ns").is_bigint());
    assert!(job.pick(2, 999, 0, 0, 0).unwrap_or_else(|_| panic!("pick")).is_undefined());
    let found = job.search(2, "nccl", 5).unwrap_or_else(|_| panic!("search"));
    assert!(get(&found, "total").is_bigint());
    assert_eq!(get(&found, "hits").unchecked_into::<Array>().length(), 5);
}

#[wasm_bindgen_test]
fn an_input_that_is_not_ours_is_listed_never_thrown() {
    // A picture larger than the head that decides what an input is: known not to be ours as
    // soon as the head is seen (the reading loop stops feeding it).
    let mut png = vec![0u8; (sniff_bytes() as usize) + 4096];
    png[..12].copy_from_slice(&[0x89u8, b'P', b'N', b'G', 0x0d, 0x0a, 0x1a, 0x0a, 0, 0, 0, 13]);
    let mut i = input("picture.png", &png, 4096);
    assert!(i.failed(), "stop reading");
    let mut job = Job::new(false);
    let a = job.add(&mut i, false).unwrap_or_else(|_| panic!("add"));
    assert!(get(&a, "kind").is_null());
    assert!(get(&a, "error")
        .as_string()
        .is_some_and(|e| e.starts_with("picture.png: not a trace file (at byte")));
    let e = job.finish().err().map(message).unwrap_or_default();
    assert!(e.starts_with("no input could be read as a trace or a Flight Recorder dump"), "{e}");
    assert!(job.finish().is_err(), "finishing twice is an error, not a panic");
}

#[wasm_bindgen_test]
fn a_job_decides_ranks_across_inputs_and_answers_like_the_cli() {
    let mut job = Job::new(true);
    assert!(job.set_threshold("no_such", 1.0).is_err());
    assert!(job.json().is_err(), "outputs come after finish");
    // Rank 1's trace named as rank 0's file, and rank 0's given rank 1 explicitly: the job's
    // decision is what every output names.
    job.set_rank("renamed.json", 1).unwrap_or_else(|_| panic!("set_rank"));
    for (name, r) in [("renamed.json", 0), ("other.json", 1)] {
        let mut i = input(name, &demo_rank(r), 4 << 20);
        job.add(&mut i, false).unwrap_or_else(|_| panic!("add"));
    }
    let mut png = JobInput::new("picture.png");
    png.feed(&[0x89, b'P', b'N', b'G', 0x0d, 0x0a, 0x1a, 0x0a]);
    job.add(&mut png, false).unwrap_or_else(|_| panic!("add"));
    job.finish().unwrap_or_else(|_| panic!("finish"));
    let json = job.json().unwrap_or_default();
    assert!(json.starts_with("{\n  \"schema\": \"rankscope.analysis\""), "{}", &json[..60.min(json.len())]);
    assert!(job.csv().unwrap_or_default().starts_with("step,rank,source,"));
    assert!(job.markdown().unwrap_or_default().starts_with("# rankscope analysis"));
    assert_eq!(job.failed().unwrap_or_else(|_| panic!("failed")).unchecked_into::<Array>().length(), 1);
    assert_eq!(job.clean().ok(), Some(false));
    let ranks: Array = job.ranks().unwrap_or_else(|_| panic!("ranks")).unchecked_into();
    let got: Vec<(Option<f64>, Option<String>)> =
        ranks.iter().map(|s| (get(&s, "rank").as_f64(), get(&s, "rank_source").as_string())).collect();
    assert_eq!(got, [(Some(1.0), Some("user".into())), (Some(1.0), Some("distributed_info".into()))]);
    assert!(json.contains("\"duplicate_rank\""), "two files claim rank 1: a job error");
    assert!(is_folder_candidate("RANK0.JSON.GZ") && !is_folder_candidate("notes.md"));
    assert_eq!(
        detect_kind(b"{\"traceEvents\": []}").ok().and_then(|k| k.as_string()).as_deref(),
        Some("trace")
    );
    assert_eq!(sniff_bytes(), 64 << 10);
}

#[wasm_bindgen_test]
fn a_job_digest_opens_as_the_whole_job() {
    use rankscope_core::job;
    // Two ranks' parts and their digest, as `rankscope combine --digest` writes it.
    let parts: Vec<_> = (0..2)
        .map(|r| {
            let t = rankscope_core::parse::ingest_bytes(&synth::file_name(r, false), &demo_rank(r))
                .unwrap_or_else(|e| panic!("{e}"));
            job::part_of(t, &Default::default(), &Default::default())
                .into_iter()
                .next()
                .unwrap_or_else(|| panic!("part"))
        })
        .collect();
    let (files, errors) = job::decided(parts, &[]);
    let out = job::combine_decided(
        files.iter().map(|(_, p)| p.clone()).collect(),
        errors,
        &[],
        &Default::default(),
    );
    let digest = job::digest::encode(&files, &[], &out.analysis);
    let mut job = Job::new(true);
    let a = job.add(&mut input("job.rsdigest", &digest, 1 << 16), false).unwrap_or_else(|_| panic!("add"));
    assert_eq!(get(&a, "kind").as_string().as_deref(), Some("digest"));
    job.finish().unwrap_or_else(|e| panic!("{}", message(e)));
    assert_eq!(job.json().unwrap_or_default(), out.json(), "the stored analysis, byte for byte");
    let ranks: Array = job.ranks().unwrap_or_else(|_| panic!("ranks")).unchecked_into();
    assert_eq!(ranks.length(), 2);
    assert!(ranks.iter().all(|r| get(&r, "lanes").unchecked_into::<Array>().length() == 0), "no events");
    assert!(job.tiles(0, 0, 0, 1_000, 100).is_err(), "no tables");
}
