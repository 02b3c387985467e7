//! Fuzz target: any bytes, split into chunks at a fuzzer-chosen size, through ingest,
//! normalization and the inspect report. Nothing may panic or hang.
#![no_main]

use libfuzzer_sys::fuzz_target;
use rankscope_core::normalize::{assemble, Rules};
use rankscope_core::parse::FileIngest;

fuzz_target!(|data: &[u8]| {
    let Some((&first, rest)) = data.split_first() else { return };
    let chunk = usize::from(first).max(1);
    let mut f = FileIngest::new("fuzz.json");
    for c in rest.chunks(chunk) {
        f.feed(c);
    }
    if let Ok(t) = f.finish() {
        let job = assemble(vec![t], &[], &Rules::default());
        let _ = rankscope_core::inspect::report(&job, vec![]);
    }
});
