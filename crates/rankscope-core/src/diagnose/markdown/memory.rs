//! The report's memory section: per rank and device, from the allocator's `[memory]` instants
//! ([`crate::analyze::memory`]).

use std::collections::BTreeMap;
use std::fmt::Write;

use crate::analyze::memory::MemoryStep;
use crate::analyze::Analysis;

fn gib(bytes: i64) -> String {
    format!("{:.2}", bytes as f64 / (1u64 << 30) as f64)
}

/// "Memory" with one row per rank and device: the peak allocated and reserved over the steps,
/// allocated at the steps' start (first and last step), blocks allocated per step.
pub(super) fn section(s: &mut String, a: &Analysis) {
    if a.memory.is_empty() {
        return;
    }
    let mut by: BTreeMap<(u32, i32), Vec<&MemoryStep>> = BTreeMap::new();
    for m in &a.memory {
        by.entry((m.rank, m.device)).or_default().push(m);
    }
    let _ = writeln!(s, "\n## Memory (the allocator's `[memory]` events, GiB)\n");
    let _ = writeln!(
        s,
        "Allocated is what tensors hold; reserved is what the caching allocator holds from the device (allocated plus its cache). Growth is allocated at the last step's end against the first step's start."
    );
    let relative = a.memory.iter().any(|m| m.relative);
    if relative {
        let _ = writeln!(
            s,
            "\nThis trace records only each block's size, not the allocator's totals (older PyTorch): allocated is counted from the first event the profiler saw, so it leaves out what was allocated before."
        );
    }
    let _ = writeln!(s);
    let _ = writeln!(s, "| rank | device | steps | peak allocated | peak reserved | at first step's start | at last step's end | growth | blocks allocated per step |");
    let _ = writeln!(s, "|---|---|---|---|---|---|---|---|---|");
    for ((rank, device), v) in &by {
        let (Some(first), Some(last)) = (v.first(), v.last()) else { continue };
        let peak = v.iter().map(|m| m.peak_allocated).max().unwrap_or(0);
        let reserved = v.iter().filter_map(|m| m.peak_reserved).max();
        let mut allocs: Vec<f64> = v.iter().map(|m| f64::from(m.allocs)).collect();
        allocs.sort_by(f64::total_cmp);
        let _ = writeln!(
            s,
            "| {rank} | {} | {} | {} | {} | {} | {} | {:+.2} | {:.0} |",
            if *device < 0 { "host".to_string() } else { format!("cuda:{device}") },
            v.len(),
            gib(peak),
            reserved.map_or("-".into(), gib),
            gib(first.start_allocated),
            gib(last.end_allocated),
            (last.end_allocated - first.start_allocated) as f64 / (1u64 << 30) as f64,
            allocs.get(allocs.len() / 2).copied().unwrap_or(0.0),
        );
    }
}
