//! Fuzz target: trace ingest with tiny parser limits (64-byte units, 16-byte strings), so the
//! fuzzer reaches the oversized-unit, resynchronisation and streaming-skip paths with small
//! inputs; the result must not depend on the chunk size.
#![no_main]

use libfuzzer_sys::fuzz_target;
use rankscope_core::parse::{FileIngest, Limits};

fn run(data: &[u8], chunk: usize) -> Option<(Vec<i64>, Vec<(String, u64, Option<u64>)>)> {
    let mut f = FileIngest::with_limits("fuzz.json", Limits { unit_bytes: 64, string_bytes: 16 });
    for c in data.chunks(chunk.max(1)) {
        f.feed(c);
    }
    let t = f.finish().ok()?;
    Some((
        t.events.ts_ns.clone(),
        t.diagnostics.iter().map(|d| (format!("{:?}", d.kind), d.count, d.first_offset)).collect(),
    ))
}

fuzz_target!(|data: &[u8]| {
    let Some((&first, rest)) = data.split_first() else { return };
    let whole = run(rest, rest.len());
    let chunked = run(rest, usize::from(first % 16) + 1);
    assert_eq!(whole, chunked, "the result depends on the chunk size");
});
