//! Fuzz target: any bytes as nccl-tests (`*_perf`) output, through the table parser, the
//! latency-bandwidth fit and the findings. Nothing may panic, and the time must stay linear.
#![no_main]

use libfuzzer_sys::fuzz_target;
use rankscope_core::nccl::{analyze_tests, Input};

fuzz_target!(|data: &[u8]| {
    let r = analyze_tests(&[Input { name: "perf.txt", bytes: data }], Some(50.0));
    let _ = serde_json::to_string(&r);
});
