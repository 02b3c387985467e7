//! The shapes of the JavaScript API, checked in headless Chromium (`./x test` runs these with
//! wasm-bindgen-test-runner). The core's own tests check the figures; these check that what JS
//! receives is what `rankscope_wasm.d.ts` declares.
#![cfg(target_arch = "wasm32")]

use js_sys::{Array, BigInt, Reflect};
use rankscope_wasm::*;
use wasm_bindgen::prelude::*;
use wasm_bindgen_test::*;

wasm_bindgen_test_configure!(run_in_browser);

fn get(v: &JsValue, key: &str) -> JsValue {
    Reflect::get(v, &JsValue::from_str(key)).unwrap_or(JsValue::UNDEFINED)
}

fn ingest(name: &str, bytes: &[u8], chunk: usize) -> Ingest {
    let mut i = Ingest::new(name);
    for c in bytes.chunks(chunk) {
        i.feed(c);
    }
    i
}

#[wasm_bindgen_test]
fn demo_rank_ingests_in_chunks_and_summarizes() {
    let bytes = demo_rank(2).unwrap_or_else(|_| panic!("demo"));
    let mut i = ingest(&demo_file_name(2), &bytes, 1 << 20);
    let p = i.progress().unwrap_or_else(|_| panic!("progress"));
    assert!(get(&p, "input_bytes").is_bigint());
    assert_eq!(BigInt::from(bytes.len() as u64), get(&p, "input_bytes").unchecked_into::<BigInt>());
    let rank = i.finish().unwrap_or_else(|_| panic!("finish"));
    let s = rank.summary().unwrap_or_else(|_| panic!("summary"));
    assert_eq!(get(&s, "rank").as_f64(), Some(2.0));
    assert_eq!(get(&s, "rank_source").as_string().as_deref(), Some("distributed_info"));
    assert!(get(&s, "events").is_bigint());
    assert!(get(&s, "span_start_ns").is_bigint(), "absolute ns exceed 2^53: bigint");
    let steps: Array = get(&s, "steps").unchecked_into();
    assert_eq!(steps.length(), 6);
    let lanes: Array = get(&s, "lanes").unchecked_into();
    assert!(lanes.length() >= 3);
    let gpu_lane =
        lanes.iter().find(|l| get(l, "gpu").as_bool() == Some(true)).unwrap_or_else(|| panic!("gpu lane"));
    assert!(get(&gpu_lane, "lane").as_f64().is_some());

    // A tile over the whole trace at a coarse level.
    let start: i64 = get(&s, "span_start_ns").unchecked_into::<BigInt>().try_into().unwrap_or(0);
    let level = 20u8;
    let index = start.div_euclid(256i64 << level);
    let lane = get(&gpu_lane, "lane").as_f64().unwrap_or(0.0) as u32;
    let t = rank.tile(lane, level, index).unwrap_or_else(|_| panic!("tile"));
    let depth: Array = get(&t, "depth").unchecked_into();
    assert!(depth.length() > 0);
    assert!(get(&t, "start_ns").unchecked_into::<Array>().get(0).is_bigint());
    assert!(get(&get(&t, "key"), "index").is_bigint());
    let first_start: i64 = get(&t, "start_ns")
        .unchecked_into::<Array>()
        .get(0)
        .unchecked_into::<BigInt>()
        .try_into()
        .unwrap_or(0);
    let d = rank.pick(lane, 0, first_start, 0).unwrap_or_else(|_| panic!("pick"));
    assert!(get(&d, "name").as_string().is_some_and(|n| !n.is_empty()));
    assert!(rank.pick(999, 0, 0, 0).unwrap_or_else(|_| panic!("pick")).is_undefined());

    let r = rank.inspect().unwrap_or_else(|_| panic!("inspect"));
    assert_eq!(get(&r, "rank").as_f64(), Some(2.0));
    assert!(get(&get(&r, "events"), "by_ph").is_object(), "maps are plain objects");
}

#[wasm_bindgen_test]
fn a_file_that_is_not_a_trace_throws_with_its_name() {
    let png = [0x89u8, b'P', b'N', b'G', 0x0d, 0x0a, 0x1a, 0x0a, 0, 0, 0, 13];
    let mut i = ingest("picture.png", &png, 5);
    assert!(i.failed());
    let err = i.finish().err().unwrap_or_else(|| panic!("should fail"));
    let msg = JsValue::from(err);
    let text = get(&msg, "message").as_string().unwrap_or_default();
    assert!(text.contains("picture.png"), "{text}");
    assert!(i.finish().is_err(), "finishing twice is an error, not a panic");
}

#[wasm_bindgen_test]
fn job_builder_reports_like_the_cli() {
    let mut b = JobBuilder::new();
    for r in [0, 1] {
        let bytes = demo_rank(r).unwrap_or_else(|_| panic!("demo"));
        b.add(&mut ingest(&demo_file_name(r), &bytes, 4 << 20));
    }
    b.add(&mut ingest("broken.json", b"hello", 5));
    let rep = b.inspect().unwrap_or_else(|_| panic!("inspect"));
    assert_eq!(get(&rep, "schema").as_string().as_deref(), Some("rankscope.inspect"));
    assert_eq!(get(&rep, "files").unchecked_into::<Array>().length(), 2);
    assert_eq!(get(&rep, "failed").unchecked_into::<Array>().length(), 1);
    assert_eq!(
        BigInt::from(2u32),
        get(&get(&rep, "job"), "ranks").unchecked_into::<BigInt>(),
        "usize is a bigint too"
    );
    assert_eq!(demo_ranks(), 8);
}

#[wasm_bindgen_test]
fn ranks_are_decided_across_files() {
    let claims =
        js_sys::JSON::parse(r#"[{"file":"a.json","claimed_rank":1},{"file":"b.json","claimed_rank":null}]"#)
            .unwrap_or(JsValue::NULL);
    let d: Array = decide_ranks(claims).unwrap_or_else(|_| panic!("decide")).unchecked_into();
    assert_eq!(get(&d.get(0), "rank").as_f64(), Some(1.0));
    assert_eq!(get(&d.get(1), "rank").as_f64(), Some(0.0));
    assert_eq!(get(&d.get(1), "rank_source").as_string().as_deref(), Some("load_order"));
    assert!(decide_ranks(JsValue::from_str("nope")).is_err());
}

#[wasm_bindgen_test]
fn the_analysis_combines_parts_and_renders_like_the_cli() {
    let parts = Array::new();
    let mut ranks = Vec::new();
    for r in [0, 1] {
        let bytes = demo_rank(r).unwrap_or_else(|_| panic!("demo"));
        ranks.push(ingest(&demo_file_name(r), &bytes, 4 << 20).finish().unwrap_or_else(|_| panic!("finish")));
    }
    for rank in &ranks {
        let p = rank.analysis_part().unwrap_or_else(|_| panic!("part"));
        parts.push(&p);
    }
    // Search and the flow link cross too.
    let found = ranks[0].search("nccl", 5).unwrap_or_else(|_| panic!("search"));
    assert!(get(&found, "total").is_bigint());
    assert_eq!(get(&found, "hits").unchecked_into::<Array>().length(), 5);
    let job = analyze_parts(parts.into()).unwrap_or_else(|_| panic!("analyze"));
    let rep = job.report().unwrap_or_else(|_| panic!("report"));
    assert_eq!(get(&rep, "schema").as_string().as_deref(), Some("rankscope.analysis"));
    assert_eq!(get(&rep, "rank_totals").unchecked_into::<Array>().length(), 2);
    let json = job.json().unwrap_or_else(|_| panic!("json"));
    assert!(json.starts_with("{\n  \"schema\": \"rankscope.analysis\""), "{}", &json[..60.min(json.len())]);
    assert!(job.csv().starts_with("step,rank,source,"));
    assert!(job.markdown().starts_with("# rankscope analysis"));
    assert!(analyze_parts(JsValue::from_str("nope")).is_err());
}

#[wasm_bindgen_test]
fn a_job_reads_inputs_by_content_and_answers_like_the_cli() {
    let mut job = Job::new(true);
    assert!(job.set_threshold("no_such", 1.0).is_err());
    assert!(job.json().is_err(), "outputs come after finish");
    for r in [0, 1] {
        let bytes = demo_rank(r).unwrap_or_else(|_| panic!("demo"));
        let mut i = JobInput::new(&demo_file_name(r));
        for c in bytes.chunks(1 << 20) {
            i.feed(c);
        }
        assert_eq!(i.kind().unwrap_or_else(|_| panic!("kind")).as_string().as_deref(), Some("trace"));
        assert!(get(&i.progress().unwrap_or_else(|_| panic!("progress")), "events").is_bigint());
        let a = job.add(&mut i, false).unwrap_or_else(|_| panic!("add"));
        assert_eq!(get(&a, "kind").as_string().as_deref(), Some("trace"));
        assert!(get(&a, "error").is_null());
        assert!(job.add(&mut i, false).is_err(), "an input is added once");
    }
    let mut png = JobInput::new("picture.png");
    png.feed(&[0x89, b'P', b'N', b'G', 0x0d, 0x0a, 0x1a, 0x0a]);
    let a = job.add(&mut png, false).unwrap_or_else(|_| panic!("add"));
    assert!(get(&a, "kind").is_null());
    assert!(get(&a, "error")
        .as_string()
        .is_some_and(|e| e.starts_with("picture.png: not a trace file (at byte")));
    job.finish().unwrap_or_else(|_| panic!("finish"));
    assert!(job.finish().is_err(), "finishing twice is an error, not a panic");
    assert!(job.json().unwrap_or_default().starts_with("{\n  \"schema\": \"rankscope.analysis\""));
    assert_eq!(job.failed().unwrap_or_else(|_| panic!("failed")).unchecked_into::<Array>().length(), 1);
    assert_eq!(job.clean().ok(), Some(false));
    let ranks: Array = job.ranks().unwrap_or_else(|_| panic!("ranks")).unchecked_into();
    assert_eq!(ranks.length(), 2);
    let r1 = ranks.get(1);
    assert_eq!(get(&r1, "rank").as_f64(), Some(1.0));
    let t0: i64 = get(&r1, "span_start_ns").unchecked_into::<BigInt>().try_into().unwrap_or(0);
    let t1: i64 = get(&r1, "span_end_ns").unchecked_into::<BigInt>().try_into().unwrap_or(0);
    let tiles: Array = job.tiles(1, 0, t0, t1, 800).unwrap_or_else(|_| panic!("tiles")).unchecked_into();
    assert!(tiles.length() >= 1);
    assert!(get(&tiles.get(0), "start_ns").is_object(), "columns are arrays");
    assert!(job.tiles(5, 0, t0, t1, 800).is_err());
    assert!(get(&job.search(1, "nccl", 3).unwrap_or_else(|_| panic!("search")), "total").is_bigint());
    assert!(is_folder_candidate("RANK0.JSON.GZ") && !is_folder_candidate("notes.md"));
    assert_eq!(
        detect_kind(b"{\"traceEvents\": []}").ok().and_then(|k| k.as_string()).as_deref(),
        Some("trace")
    );
}
