//! The report's reference tables: the collectives, where communication is issued from, the
//! pipeline's stages, the stragglers, the critical path and the input problems.

use std::fmt::Write;

use super::*;

pub(super) fn collectives(s: &mut String, a: &Analysis) {
    let _ = writeln!(s, "\n## Collectives\n");
    let _ = writeln!(s, "| kind | group | count | size p50 (MiB) | p50 (ms) | p99 (ms) | transfer mean (ms) | wait mean (ms) | skew max (ms) | busbw (GB/s) |");
    let _ = writeln!(s, "|---|---|---|---|---|---|---|---|---|---|");
    for c in &a.collectives {
        let _ = writeln!(
            s,
            "| {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |",
            c.kind.name(),
            if c.pg.is_empty() { "-".to_string() } else { md_text(&c.pg) },
            c.count,
            c.bytes_p50.map_or("-".into(), |b| format!("{:.2}", b as f64 / 1048576.0)),
            ms(c.dur_p50_ns),
            ms(c.dur_p99_ns),
            c.transfer_mean_ns.map_or("-".into(), ms),
            c.sync_wait_mean_ns.map_or("-".into(), ms),
            c.skew_max_ns.map_or("-".into(), ms),
            c.busbw_gbps.map_or("-".into(), |b| format!("{b:.1}")),
        );
    }
}

/// Where the communication is issued from: per region and kind, over ranks and steps.
pub(super) fn origins(s: &mut String, a: &Analysis) {
    if a.comm_origins.is_empty() {
        return;
    }
    #[derive(Default)]
    struct Agg {
        ranks: std::collections::BTreeSet<u32>,
        rank_steps: std::collections::BTreeSet<(u32, u32)>,
        count: u64,
        bytes_max: i64,
        exposed_transfer: i64,
        exposed_wait: i64,
        blocked: i64,
    }
    let mut by: BTreeMap<(String, &'static str), Agg> = BTreeMap::new();
    for o in &a.comm_origins {
        let OriginRow { rank, step, .. } = *o;
        let e = by.entry((o.path.clone(), o.kind.name())).or_default();
        e.ranks.insert(rank);
        e.rank_steps.insert((rank, step));
        e.count += o.count as u64;
        e.bytes_max = e.bytes_max.max(o.bytes_max);
        e.exposed_transfer += o.exposed_transfer_ns;
        e.exposed_wait += o.exposed_wait_ns;
        e.blocked += o.blocked_ns;
    }
    let mut rows: Vec<_> = by.into_iter().collect();
    rows.sort_by(|x, y| {
        (y.1.exposed_transfer + y.1.exposed_wait)
            .cmp(&(x.1.exposed_transfer + x.1.exposed_wait))
            .then(x.0.cmp(&y.0))
    });
    let listed = rows.len().min(12);
    let _ = writeln!(s, "\n## Where the communication is issued from (per rank and step, ms)\n");
    let _ = writeln!(s, "| issued inside | kind | ranks | calls | largest (KiB) | exposed transfer | exposed wait | host blocked |");
    let _ = writeln!(s, "|---|---|---|---|---|---|---|---|");
    for ((path, kind), e) in rows.iter().take(listed) {
        let n = e.rank_steps.len().max(1) as f64;
        let ranks: Vec<u32> = e.ranks.iter().copied().collect();
        let _ = writeln!(
            s,
            "| {} | {kind} | {} | {:.1} | {:.1} | {} | {} | {} |",
            if path.is_empty() { "-".to_string() } else { md_text(path) },
            list(&ranks),
            e.count as f64 / n,
            e.bytes_max as f64 / 1024.0,
            ms_f(e.exposed_transfer as f64 / n),
            ms_f(e.exposed_wait as f64 / n),
            ms_f(e.blocked as f64 / n)
        );
    }
    if rows.len() > listed {
        let _ = writeln!(s, "\n({} more origin(s) in the JSON's `comm_origins`.)", rows.len() - listed);
    }
}

/// The pipeline table (nothing without a pipeline): per stage, the means over steps.
pub(super) fn pipeline(s: &mut String, a: &Analysis) {
    let Some(p) = &a.pipeline else { return };
    let _ = writeln!(
        s,
        "\n## Pipeline\n\n{} stages (ranks {}), schedule {}, {} micro-batches; theory (p − 1)/(m + p − 1) = {}.\n",
        p.stages.len(),
        p.stages.iter().map(|r| r.to_string()).collect::<Vec<_>>().join(" → "),
        p.schedule.name(),
        p.micro_batches.map_or("?".into(), |m| m.to_string()),
        p.theory_bubble_share.map_or("-".into(), |t| format!("{:.1}%", 100.0 * t)),
    );
    let _ =
        writeln!(s, "| stage | rank | span (ms) | compute (ms) | bubble (ms) | bubble % | recv wait (ms) |");
    let _ = writeln!(s, "|---|---|---|---|---|---|---|");
    for x in &p.per_stage {
        let slowest = if p.slowest_stage == Some(x.stage) { " (slowest)" } else { "" };
        let _ = writeln!(
            s,
            "| {}{slowest} | {} | {} | {} | {} | {:.1} | {} |",
            x.stage,
            x.rank,
            ms(x.span_ns),
            ms(x.compute_ns),
            ms(x.bubble_ns),
            100.0 * x.bubble_share,
            ms(x.recv_wait_ns),
        );
    }
    if !p.critical_path.is_empty() {
        let _ = writeln!(s);
    }
    for c in &p.critical_path {
        let stages: Vec<String> =
            c.hops.iter().rev().filter(|h| h.what == "work").map(|h| h.stage.to_string()).collect();
        let _ = writeln!(
            s,
            "- step {} critical path ({} ms): stages {}",
            c.step,
            ms(c.end_ns - c.start_ns),
            stages.join(" → ")
        );
    }
}

pub(super) fn stragglers(s: &mut String, a: &Analysis) {
    if a.stragglers.is_empty() {
        return;
    }
    let _ = writeln!(s, "\n## Last to arrive, per step\n");
    for x in &a.stragglers {
        let _ = writeln!(
            s,
            "- step {}: rank {} (last to arrive at {} collective(s), by {} ms at the latest; the sum of the others' waits is {} ms)",
            x.step,
            x.rank,
            x.collectives,
            ms(x.lateness_ns),
            ms(x.others_wait_ns)
        );
    }
}

pub(super) fn critical_path(s: &mut String, a: &Analysis) {
    if a.critical_path.is_empty() {
        return;
    }
    let _ = writeln!(s, "\n## Critical path\n");
    for p in &a.critical_path {
        let _ = writeln!(
            s,
            "- step {} ({}): rank {} ({}), {} ms = compute {} + exposed comm {} + memory {} + CPU-bound {} + launch overhead {} + idle {}",
            p.step,
            p.level,
            p.rank,
            p.chosen_as,
            ms(p.length_ns),
            ms(p.split.compute_ns),
            ms(p.split.communication_ns),
            ms(p.split.memory_ns),
            ms(p.split.cpu_bound_ns),
            ms(p.split.launch_overhead_ns),
            ms(p.split.idle_ns)
        );
        if !p.hops.is_empty() {
            let ranks: Vec<String> = p
                .hops
                .iter()
                .map(|h| match h.collective {
                    Some(k) => format!("{}@{}", k.name(), h.rank),
                    None => format!("r{}", h.rank),
                })
                .collect();
            let _ = writeln!(s, "  path: {}", ranks.join(" → "));
        }
    }
}

pub(super) fn input_problems(s: &mut String, a: &Analysis) {
    let diags: Vec<_> =
        a.diagnostics.iter().filter(|d| d.diagnostic.severity >= crate::model::Severity::REPAIRED).collect();
    if diags.is_empty() {
        return;
    }
    let _ = writeln!(s, "\n## Input problems\n");
    for d in diags {
        let _ = writeln!(
            s,
            "- rank {} {}: {:?} ×{}: {}",
            d.rank,
            md_code(&d.file),
            d.diagnostic.kind,
            d.diagnostic.count,
            md_text(&d.diagnostic.message)
        );
    }
}
