//! Fuzz target: any bytes as nccl-tests (`*_perf`) output, through the table parser, the
//! latency-bandwidth fit and the findings; and the same bytes fed in chunks of a fuzzer-chosen
//! size to the streaming reader (what `rankscope nccl-tests` does), which must give the tests
//! of the whole file. Nothing may panic, and the time must stay linear.
#![no_main]

use libfuzzer_sys::fuzz_target;
use rankscope_core::nccl::perf::{parse_tests_file, TestsReader};
use rankscope_core::nccl::{analyze_tests, Input};

fuzz_target!(|data: &[u8]| {
    let Some((&first, rest)) = data.split_first() else { return };
    let r = analyze_tests(&[Input { name: "perf.txt", bytes: rest }], Some(50.0));
    let _ = serde_json::to_string(&r);
    let (tests, diagnostics) = parse_tests_file("perf.txt", rest);
    let mut reader = TestsReader::new("perf.txt");
    for c in rest.chunks(usize::from(first).max(1)) {
        reader.feed(c);
    }
    let chunked = reader.finish();
    assert!(
        chunked.tests == tests && chunked.diagnostics == diagnostics,
        "chunks of {first} bytes give other tests than the whole file"
    );
});
