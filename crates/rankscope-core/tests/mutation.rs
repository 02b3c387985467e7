//! Collateral loss under single-byte damage: a damaged event costs that event and no other.
//!
//! For a slice of every real trace in `shared/traces` (its first ~32 kB of events, closed
//! properly), deterministic single-byte mutations (a byte replaced, inserted or deleted, with
//! the bytes that matter most to JSON structure over-represented) are parsed in odd chunk sizes.
//! The *collateral loss* of a mutation is the number of events lost beyond the one it damaged
//! (`events(clean) − events(mutated) − 1`, when positive). The file never ends early, so no
//! mutation may be reported as a truncation, and every lost event must be accounted for by a
//! data-loss diagnostic that starts at or before the damage.

// Tests read the zoo and ../shared from disk; the core never does (its clippy.toml).
#![allow(clippy::disallowed_methods, clippy::disallowed_types)]

mod common;

use common::*;
use rankscope_core::model::{DiagKind, RankTrace, Severity};
use rankscope_synth::Rng;

/// The document cut after the event that ends past `want` bytes into `traceEvents`, closed
/// with `]}`; returns it with the byte range of its events.
fn slice_of(text: &[u8], want: usize) -> Option<(Vec<u8>, std::ops::Range<usize>)> {
    let key = memchr::memmem::find(text, b"\"traceEvents\"")?;
    let open = key + memchr::memchr(b'[', &text[key..])? + 1;
    // An event boundary: `}` then `,` then `{` (whitespace between).
    let mut i = open + want.min(text.len().saturating_sub(open + 1));
    while i < text.len() {
        if text[i] == b'}' {
            let mut j = i + 1;
            while text.get(j).is_some_and(|b| b.is_ascii_whitespace()) {
                j += 1;
            }
            if text.get(j) == Some(&b',') {
                let mut v = text[..=i].to_vec();
                v.extend_from_slice(b"\n]}\n");
                return Some((v, open..i + 1));
            }
        }
        i += 1;
    }
    None
}

fn parse(bytes: &[u8], chunk: usize) -> Option<RankTrace> {
    ingest_chunked("mutated.json", bytes, chunk).ok()
}

/// Totals of a campaign.
#[derive(Debug, Default)]
struct Campaign {
    mutations: u64,
    lost_events: u64,
    with_collateral: u64,
    collateral_events: u64,
    worst: u64,
    truncated: u64,
    unexplained: u64,
}

fn campaign(seed: u64, per_file: usize, slice_bytes: usize) -> (Campaign, Vec<String>) {
    let mut files: Vec<_> = walk(&shared().join("traces"));
    files.sort();
    let mut rng = Rng::from_state(seed);
    let mut c = Campaign::default();
    let mut examples = Vec::new();
    const HOT: &[u8] = b"\"{}[],:\\\x00\xff0aN";
    for f in &files {
        let text = text_of(f);
        let Some((clean, events)) = slice_of(&text, slice_bytes) else { continue };
        let Some(base) = parse(&clean, 1 << 20) else { continue };
        let base_n = base.counts.total;
        for _ in 0..per_file {
            let at = events.start + rng.below(events.len());
            let byte = if rng.below(2) == 0 { HOT[rng.below(HOT.len())] } else { rng.next_u64() as u8 };
            let mut m = clean.clone();
            match rng.below(4) {
                0 => m.insert(at, byte),
                1 => {
                    m.remove(at);
                }
                _ => {
                    if m[at] == byte {
                        continue;
                    }
                    m[at] = byte;
                }
            }
            let chunk = [1 << 20, 4096, 257][rng.below(3)];
            let Some(t) = parse(&m, chunk) else {
                c.unexplained += 1;
                examples.push(format!("{}: byte {at} -> {byte:#04x}: no longer a trace", f.display()));
                continue;
            };
            c.mutations += 1;
            let n = t.counts.total;
            let lost = base_n.saturating_sub(n);
            c.lost_events += lost;
            if lost > 1 {
                c.with_collateral += 1;
                c.collateral_events += lost - 1;
                c.worst = c.worst.max(lost - 1);
                if examples.len() < 20 {
                    let d: Vec<String> =
                        t.diagnostics.iter().map(|d| format!("{:?}: {}", d.kind, d.message)).collect();
                    examples.push(format!("{}: byte {at} -> {byte:#04x}: lost {lost}: {d:?}", f.display()));
                }
            }
            if t.diagnostics.get(DiagKind::Truncated).is_some() {
                c.truncated += 1;
                if examples.len() < 20 {
                    examples.push(format!("{}: byte {at} -> {byte:#04x}: called truncated", f.display()));
                }
            }
            // A lost event is explained by a data-loss diagnostic at or before the damage.
            if lost > 0 {
                // (A deleted `{` shows at the next non-blank byte.)
                let mut shows = at + 1;
                while m.get(shows).is_some_and(|b| b.is_ascii_whitespace()) {
                    shows += 1;
                }
                let explained = t.diagnostics.iter().any(|d| {
                    d.severity == Severity::DATA_LOSS && d.first_offset.is_some_and(|o| o <= shows as u64)
                });
                if !explained {
                    c.unexplained += 1;
                    if examples.len() < 20 {
                        let d: Vec<String> = t
                            .diagnostics
                            .iter()
                            .map(|d| format!("{:?}@{:?}", d.kind, d.first_offset))
                            .collect();
                        let ctx = String::from_utf8_lossy(
                            &clean[at.saturating_sub(60)..(at + 60).min(clean.len())],
                        )
                        .into_owned();
                        examples.push(format!(
                            "{}: byte {at} -> {byte:#04x}: lost {lost}, unexplained: {d:?} near {ctx:?}",
                            f.display()
                        ));
                    }
                }
            }
        }
    }
    (c, examples)
}

fn walk(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display())).flatten() {
        let p = e.path();
        if p.is_dir() {
            out.extend(walk(&p));
        } else {
            out.push(p);
        }
    }
    out
}

#[test]
fn a_damaged_event_costs_only_itself() {
    let per_file: usize =
        std::env::var("RANKSCOPE_MUTATIONS").ok().and_then(|v| v.parse().ok()).unwrap_or(30);
    let seed: u64 = std::env::var("RANKSCOPE_SEED").ok().and_then(|v| v.parse().ok()).unwrap_or(0x14);
    let (c, examples) = campaign(seed, per_file, 32_000);
    eprintln!("{c:?}");
    for e in &examples {
        eprintln!("  {e}");
    }
    assert!(c.mutations > 900 || per_file < 30, "{c:?}");
    let clean = c.mutations - c.with_collateral;
    assert!(
        clean * 100 >= c.mutations * 99,
        "collateral loss in {} of {} mutations",
        c.with_collateral,
        c.mutations
    );
    assert_eq!(c.truncated, 0, "mutations reported as truncation");
    assert_eq!(c.unexplained, 0, "lost events without a diagnostic");
}
