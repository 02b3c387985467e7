//! Fuzz target: any bytes as a rankscope part and as a job digest (behind their magic, so the
//! fuzzer reaches the gzip member and the head), and a trace part that reads combined as a job
//! of one (issue 39: claims checked before anything is sized by them). Nothing may panic, hang
//! or allocate beyond the ratio cap.
#![no_main]

use libfuzzer_sys::fuzz_target;
use rankscope_core::analyze::Options;
use rankscope_core::job::{self, digest};

fuzz_target!(|data: &[u8]| {
    let mut part = digest::part::MAGIC.to_vec();
    part.extend_from_slice(&digest::part::VERSION.to_le_bytes());
    part.extend_from_slice(data);
    if let Ok(digest::part::Piece::Trace { claim, part }) = digest::part::decode("fuzz.part", &part) {
        let out = job::combine(vec![(claim, *part)], &[], &[], &Options::default());
        let _ = out.json();
        let _ = out.markdown();
    }
    let mut d = digest::MAGIC.to_vec();
    d.extend_from_slice(&digest::VERSION.to_le_bytes());
    d.extend_from_slice(data);
    if let Ok(j) = digest::decode_lean("fuzz.rsdigest", &d) {
        let _ = j.into_output().json();
    }
});
