//! Fuzz target: any bytes as NCCL_DEBUG log text (one file, or split in two at a fuzzer-chosen
//! point as two files of one job), through the log parser and its findings. Nothing may panic,
//! and the time must stay linear.
#![no_main]

use libfuzzer_sys::fuzz_target;
use rankscope_core::nccl::{analyze_logs, sniff_input, Input};

fuzz_target!(|data: &[u8]| {
    let Some((&first, rest)) = data.split_first() else { return };
    let cut = (usize::from(first) * rest.len() / 256).min(rest.len());
    let (a, b) = rest.split_at(cut);
    let _ = sniff_input(rest);
    let r = analyze_logs(&[Input { name: "a.log", bytes: a }, Input { name: "b.log", bytes: b }]);
    let _ = serde_json::to_string(&r);
});
