//! Fuzz target: any bytes through the Flight Recorder reader (sniff, pickle or JSON, decode)
//! and, when they read as a dump, the mismatch engine and its sentences. Nothing may panic,
//! hang or allocate beyond a small multiple of the input.
#![no_main]

use libfuzzer_sys::fuzz_target;
use rankscope_core::fr;

fuzz_target!(|data: &[u8]| {
    let _ = fr::sniff(data);
    let _ = fr::pickle::parse(data);
    if let Ok(d) = fr::read("fuzz_rank_0", data) {
        // Two ranks: the dump against itself with its last entry dropped.
        let mut other = d.clone();
        other.file = "fuzz_rank_1".into();
        other.entries.pop();
        let (dumps, _) = fr::decide_ranks(vec![d, other]);
        let r = fr::job_report(&dumps);
        let _ = rankscope_core::sequence::text::report(&r);
    }
});
