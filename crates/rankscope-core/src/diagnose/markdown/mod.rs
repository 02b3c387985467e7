//! The Markdown report (`rankscope analyze --md`, the app's Markdown export): written the way a
//! performance engineer writes a note on a slow job. The causes come first, most costly first,
//! each with where its time is and what to change; then where each rank's step goes (compute,
//! transfer, waiting for the others, input, host synchronization, idle), who waited for whom,
//! the late rank's regions against the others', the collectives with their transfer and wait,
//! where the communication is issued from, and the reference tables (totals, clocks, fabric,
//! critical path, input problems).

use std::collections::BTreeMap;
use std::fmt::Write;

use crate::analyze::attribution::{OriginRow, RegionRow};
use crate::analyze::Analysis;
use crate::escape::{md_code, md_prose, md_text};
use crate::finding::{EvidenceKey, Finding, FindingId};
use crate::sequence::DiagnosisKind;

mod beside;
mod capture;
mod memory;
mod reference;
use reference::{collectives, critical_path, input_problems, origins, pipeline, stragglers};

fn ms(ns: i64) -> String {
    format!("{:.3}", ns as f64 / 1e6)
}

fn ms_f(ns: f64) -> String {
    format!("{:.3}", ns / 1e6)
}

use crate::analyze::stats::median_f as median;

/// "2" / "2–5" / "2, 4, 7" for a sorted list of steps or ranks.
pub(super) fn list_of(v: &[u32]) -> String {
    list(v)
}

/// "2" / "2–5" / "2, 4, 7" for a sorted list of steps or ranks.
fn list(v: &[u32]) -> String {
    if v.is_empty() {
        return "-".into();
    }
    let contiguous = v.windows(2).all(|w| w[1] == w[0] + 1);
    if v.len() > 2 && contiguous {
        return format!("{}–{}", v[0], v[v.len() - 1]);
    }
    v.iter().map(|x| x.to_string()).collect::<Vec<_>>().join(", ")
}

/// The mean over a rank's steps of each figure the report shows.
#[derive(Default)]
struct Means {
    steps: usize,
    wall: f64,
    compute: f64,
    comm: f64,
    transfer: f64,
    wait: f64,
    exposed_transfer: f64,
    exposed_wait: f64,
    input: f64,
    host_sync: f64,
    idle: f64,
}

fn means(a: &Analysis) -> BTreeMap<u32, Means> {
    let mut m: BTreeMap<u32, Means> = BTreeMap::new();
    for st in &a.steps {
        for r in &st.per_rank {
            let e = m.entry(r.rank).or_default();
            e.steps += 1;
            e.wall += r.wall_ns as f64;
            e.compute += r.compute_ns as f64;
            e.comm += r.comm_ns as f64;
            e.transfer += r.comm_transfer_ns as f64;
            e.wait += r.comm_wait_ns as f64;
            e.exposed_transfer += r.exposed_transfer_ns as f64;
            e.exposed_wait += r.exposed_wait_ns as f64;
            e.input += r.input_ns as f64;
            e.host_sync += r.host_sync_ns as f64;
            // Input time is the host loading data, not the device idling for no reason.
            e.idle += (r.idle_ns - r.input_ns).max(0) as f64;
        }
    }
    for e in m.values_mut() {
        let n = e.steps.max(1) as f64;
        for v in [
            &mut e.wall,
            &mut e.compute,
            &mut e.comm,
            &mut e.transfer,
            &mut e.wait,
            &mut e.exposed_transfer,
            &mut e.exposed_wait,
            &mut e.input,
            &mut e.host_sync,
            &mut e.idle,
        ] {
            *v /= n;
        }
    }
    m
}

/// A Markdown report.
pub fn markdown(a: &Analysis) -> String {
    let mut s = String::new();
    let _ = writeln!(s, "# rankscope analysis\n");
    // Files of different jobs: said first, and nothing judged over them.
    for e in &a.errors {
        if let crate::normalize::JobError::MixedJobs { .. } = e {
            let said = e.to_string();
            let mut c = said.chars();
            let said: String = c.next().map(|f| f.to_uppercase().chain(c).collect()).unwrap_or_default();
            let _ =
                writeln!(s, "**{}.** No finding is given over files of different jobs.\n", md_text(&said));
        }
    }
    header(&mut s, a);
    super::understood::section(&mut s, a);
    capture::section(&mut s, a);
    findings(&mut s, a);
    sequences(&mut s, a);
    time_split(&mut s, a);
    who_waits(&mut s, a);
    wait_chain(&mut s, a);
    late_regions(&mut s, a);
    totals(&mut s, a);
    alignment(&mut s, a);
    layout(&mut s, a);
    collectives(&mut s, a);
    pipeline(&mut s, a);
    origins(&mut s, a);
    if !a.fabric.is_empty() {
        let _ = writeln!(s, "\n## Against the fabric (nccl-tests)\n");
        for c in &a.fabric {
            let _ = writeln!(s, "- {}", md_text(&c.message));
        }
    }
    memory::section(&mut s, a);
    beside::section(&mut s, a);
    stragglers(&mut s, a);
    critical_path(&mut s, a);
    input_problems(&mut s, a);
    s
}

/// `rankscope analyze --md`: the note, then the dumps' section when there are dumps.
pub fn with_dumps(
    a: &Analysis,
    dumps: Option<(&[crate::fr::RankedDump], &crate::sequence::SequenceReport)>,
) -> String {
    let mut s = markdown(a);
    if let Some((d, r)) = dumps {
        s.push_str(&crate::fr::output::markdown_section(d, r));
    }
    s
}

fn header(s: &mut String, a: &Analysis) {
    let world = a.ranks.iter().filter_map(|r| r.world_size).max();
    let backend =
        a.ranks.iter().find_map(|r| r.backend.as_deref().map(md_text)).unwrap_or_else(|| "?".into());
    let steps: Vec<u32> = a.steps.iter().map(|x| x.step).collect();
    let step = a.typical_step_ns();
    let _ = writeln!(
        s,
        "{} rank(s){}, backend {backend}, {} step(s){}{}; time figures from {} lanes.\n",
        a.ranks.len(),
        world.map(|w| format!(" of world size {w}")).unwrap_or_default(),
        a.steps.len(),
        if steps.is_empty() { String::new() } else { format!(" ({})", list(&steps)) },
        if step > 0.0 {
            format!(", a step takes {} ms (median over ranks and steps)", ms_f(step))
        } else {
            String::new()
        },
        a.ranks.first().map_or("?", |r| r.metrics_from.as_str())
    );
    if let Some(l) = a.layout.as_ref().filter(|l| !l.mesh.is_empty()) {
        let _ = writeln!(s, "Parallel layout: {} (see \"Parallel layout\").\n", l.mesh_words());
    }
    if let Some(line) = super::serving::summary_line(a) {
        // Our own words and names from the engines' table (`normalize::iterations`).
        let _ = writeln!(s, "{line}\n");
    }
    noise(s, a);
    whatif(s, a);
}

/// The what-if replay: how well it reproduces the record, the ideal step, what each late rank
/// costs (docs/metrics.md, "What-if").
fn whatif(s: &mut String, a: &Analysis) {
    let Some(w) = a.whatif.as_ref() else { return };
    let mean_rec = if w.steps.is_empty() {
        0.0
    } else {
        w.steps.iter().map(|x| x.recorded_ns as f64).sum::<f64>() / w.steps.len() as f64
    };
    let held = if !w.holds() {
        " (too far from the record: its gains are not used)".to_string()
    } else {
        let pairs = if w.p2p {
            format!("{} point-to-point exchanges replayed as pairs", w.exchanges)
        } else {
            String::new()
        };
        let alone = if w.alone.is_empty() {
            String::new()
        } else {
            let it = if w.alone.len() == 1 { "it" } else { "them" };
            format!(
                "{} {} no peers doing the same work for most of {} own time (a pipeline stage without replicas, a rank whose program differs): no gain is said for {it} and the ideal step leaves {it} as recorded",
                crate::words::ranks_word(&w.alone).to_lowercase(),
                if w.alone.len() == 1 { "has" } else { "have" },
                if w.alone.len() == 1 { "its" } else { "their" },
            )
        };
        let both: Vec<String> = [pairs, alone].into_iter().filter(|x| !x.is_empty()).collect();
        if both.is_empty() {
            String::new()
        } else {
            format!(" ({})", both.join("; "))
        }
    };
    let ideal = if w.replayed_ns > 0 {
        format!(
            "; with every rank at its peers' typical speed the step would take {} ms against {} ms replayed ({:.0}% less)",
            ms_f(w.ideal_ns as f64),
            ms_f(w.replayed_ns as f64),
            100.0 * (1.0 - w.ideal_ns as f64 / w.replayed_ns as f64)
        )
    } else {
        String::new()
    };
    let ranks: Vec<String> = w
        .ranks
        .iter()
        .filter(|g| g.gain_ns > 0)
        .map(|g| format!("rank {} {} ms", g.rank, ms_f(g.gain_ns as f64)))
        .collect();
    let _ = writeln!(
        s,
        "What-if: the job replayed from its traces gives its {} steps within {:.1}% of the recorded on average, {:.1}% at most (mean {} ms){held}{ideal}{}.\n",
        w.steps.len(),
        100.0 * w.mean_error,
        100.0 * w.max_error,
        ms_f(mean_rec),
        if ranks.is_empty() { String::new() } else { format!("; bringing one rank to its peers gains {}", ranks.join(", ")) }
    );
    // The fixes in the order the findings rank them: each gain as its finding says (a secondary
    // cause's is the one left once the causes before it are fixed).
    // A job that stopped has no steady state to project (a hang's figure is how long it waited).
    let stopped = a.findings.iter().any(|f| f.id == FindingId::CollectiveMismatch);
    let fixes: Vec<&Finding> = a
        .findings
        .iter()
        .filter(|f| f.impact_ns > 0 && f.severity != crate::finding::Severity::Info)
        .collect();
    if !stopped && fixes.len() >= 2 && mean_rec > 0.0 {
        let saved: i64 = fixes.iter().map(|f| f.impact_ns).sum();
        let each: Vec<String> = fixes
            .iter()
            .map(|f| {
                let who = if f.ranks.len() == 1 { format!(" (rank {})", f.ranks[0]) } else { String::new() };
                format!("{}{who} {} ms", f.id, ms_f(f.impact_ns as f64))
            })
            .collect();
        let _ = writeln!(
            s,
            "In the order of fixing: {}: about {} ms a step against {} ms recorded.\n",
            each.join(", then "),
            ms_f((mean_rec - saved as f64).max(0.0)),
            ms_f(mean_rec)
        );
    }
}

/// The run's noise floor: how much its steps vary, and the steps that stand out.
fn noise(s: &mut String, a: &Analysis) {
    let Some(n) = a.noise.as_ref() else { return };
    let out: Vec<String> =
        n.outliers.iter().map(|o| format!("step {} (+{} ms)", o.step, ms_f(o.excess_ns as f64))).collect();
    let _ = writeln!(
        s,
        "Noise: the step (its slowest rank) takes {} ms, varying by {} ms from step to step over {} steps (1.4826 × the median absolute deviation){}.\n",
        ms_f(n.step_ns as f64),
        ms_f(n.spread_ns as f64),
        n.steps,
        if out.is_empty() {
            "; no step stands out".to_string()
        } else {
            format!("; standing out: {}", out.join(", "))
        }
    );
}

/// The groups by role: how many, their size, one of them, and why the role.
fn layout(s: &mut String, a: &Analysis) {
    let Some(l) = a.layout.as_ref() else { return };
    let _ = writeln!(s, "\n## Parallel layout\n");
    if !l.mesh.is_empty() {
        let _ =
            writeln!(s, "The groups form a mesh of {} (fastest-varying dimension first).\n", l.mesh_words());
    }
    for n in &l.notes {
        let _ = writeln!(s, "- {}", md_text(n));
    }
    let _ = writeln!(s, "| role | groups | ranks per group | for example | collectives | why |");
    let _ = writeln!(s, "|---|---|---|---|---|---|");
    let mut by_role: BTreeMap<String, Vec<&crate::analyze::layout::Group>> = BTreeMap::new();
    for g in &l.groups {
        by_role.entry(g.role.as_str().to_string()).or_default().push(g);
    }
    for (role, gs) in by_role {
        let mut sizes: Vec<usize> = gs.iter().map(|g| g.ranks.len()).collect();
        sizes.sort_unstable();
        sizes.dedup();
        let g = gs[0];
        let _ = writeln!(
            s,
            "| {role} | {} | {} | `{}`: {} | {} | {} |",
            gs.len(),
            sizes.iter().map(usize::to_string).collect::<Vec<_>>().join(", "),
            md_text(&g.name),
            list(&g.ranks),
            gs.iter().map(|g| g.instances).sum::<u64>(),
            md_text(&g.role_evidence)
        );
    }
    let unplaced: Vec<u32> = l.placement.iter().filter(|p| p.unplaced > 0).map(|p| p.rank).collect();
    if !unplaced.is_empty() {
        let _ = writeln!(
            s,
            "\nRanks {} have collectives no group fits: matched as one group of their own.",
            list(&unplaced)
        );
    }
}

/// Where the delay starts and the way it travelled.
fn wait_chain(s: &mut String, a: &Analysis) {
    let Some(c) = a.wait_chain.as_ref() else { return };
    let _ = writeln!(
        s,
        "\nThe delay starts on {} {}; {} {} only inherited it. Who waited for whom, through which group (mean per step over every step):\n",
        if c.origins.len() == 1 { "rank" } else { "ranks" },
        list(&c.origins),
        if c.inherited.len() == 1 { "rank" } else { "ranks" },
        list(&c.inherited)
    );
    let _ = writeln!(s, "| waited for | waiter | group | role | wait (ms) | steps |");
    let _ = writeln!(s, "|---|---|---|---|---|---|");
    for e in &c.edges {
        let _ = writeln!(
            s,
            "| {} | {} | `{}` | {} | {} | {} |",
            e.from,
            e.to,
            md_text(&e.group),
            e.role,
            ms(e.wait_ns),
            e.steps
        );
    }
}

fn findings(s: &mut String, a: &Analysis) {
    let _ = writeln!(s, "## Findings (the cause first, then by time saved per step, low ones after)\n");
    if a.findings.is_empty() {
        if super::understood::only_capture(a) {
            let _ = writeln!(
                s,
                "Nothing judged: every step of these traces captures CUDA / HIP graphs (launches recorded into a graph, not run; see \"What was understood\"). Capture is set-up, not a training or inference step: profile the steps that replay the graphs.\n"
            );
            return;
        }
        let few = super::understood::too_little(a);
        if !few.is_empty() {
            let _ = writeln!(
                s,
                "No finding, but this is no verdict: too little of rank(s) {} was understood to judge (see \"What was understood\").\n",
                list(&few)
            );
            return;
        }
        let _ = writeln!(
            s,
            "No finding crossed its threshold: no rank is late beyond the noise, and neither communication, input, the host nor the fabric costs a measurable share of the step.\n"
        );
        return;
    }
    let step = a.typical_step_ns();
    for (i, f) in a.findings.iter().enumerate() {
        finding(s, i + 1, f, step, a.ranks.len());
    }
}

fn finding(s: &mut String, n: usize, f: &Finding, step: f64, world: usize) {
    let saving = if f.id == FindingId::CollectiveMismatch {
        // A hang's figure is how long the ranks waited, not a saving per step.
        f.evidence
            .get(EvidenceKey::WaitedNs)
            .map(|w| format!(" — the waiting ranks were stuck {} ms", ms_f(w)))
            .unwrap_or_default()
    } else if f.impact_ns > 0 {
        let share = if step > 0.0 {
            // A gain is capped at the mean step; against the median step it could read above 100%.
            format!(", {:.0}% of the step", (100.0 * f.impact_ns as f64 / step).min(100.0))
        } else {
            String::new()
        };
        format!(" — about {} ms per step to gain{share}", ms(f.impact_ns))
    } else {
        String::new()
    };
    let _ = writeln!(s, "{n}. **{}** `{}`{saving}  ", f.severity.name(), f.id);
    let _ = writeln!(s, "   {}  ", md_prose(&f.message));
    if let Some(l) = &f.location {
        let path = l.regions.iter().map(|r| md_code(r)).collect::<Vec<_>>().join(" > ");
        let split: Vec<String> =
            l.excess_parts().into_iter().map(|(what, v)| format!("{what} {} ms", ms(v))).collect();
        // Against the others unless the finding is on every rank (then there are none).
        if f.ranks.len() < world {
            let _ = writeln!(
                s,
                "   Where: {path} ({}), {} ms per step on rank{} {} against {} ms on the others{}.  ",
                l.phase.name(),
                ms(l.rank_ns),
                if f.ranks.len() == 1 { "" } else { "s" },
                list(&f.ranks),
                ms(l.others_ns),
                if split.is_empty() {
                    String::new()
                } else {
                    format!("; the excess is {}", split.join(", "))
                }
            );
        } else {
            // A finding on every rank compares them with no one: what each spends there.
            let _ = writeln!(
                s,
                "   Where: {path} ({}), {} ms per step on ranks {}.  ",
                l.phase.name(),
                ms(l.rank_ns),
                list(&f.ranks)
            );
        }
    }
    if !f.ranks.is_empty() || !f.steps.is_empty() {
        let _ = writeln!(s, "   Ranks {}; steps {}.  ", list(&f.ranks), list(&f.steps));
    }
    if !f.symptoms.is_empty() {
        let sym: Vec<String> = f.symptoms.iter().map(|x| md_code(x.as_str())).collect();
        let _ = writeln!(s, "   Explains: {}.  ", sym.join(", "));
    }
    let _ = writeln!(s, "   Fix: {}", md_prose(&f.fix));
}

/// The collective sequences when they diverge (a hang, a mismatch, a rank that ended early):
/// where each rank of the group got to.
fn sequences(s: &mut String, a: &Analysis) {
    let Some(seq) = &a.sequence else { return };
    if seq.diagnoses.is_empty() {
        return;
    }
    let _ = writeln!(s, "\n## Collective sequences\n");
    for d in &seq.diagnoses {
        let _ = writeln!(s, "- {}", md_prose(&d.sentence));
    }
    let stuck = seq.diagnoses.iter().any(|d| matches!(d.kind, DiagnosisKind::Hang | DiagnosisKind::Mismatch));
    for g in seq.groups.iter().filter(|g| stuck && !g.divergences.is_empty()) {
        let _ = writeln!(
            s,
            "\nGroup {} ({} member(s), {} position(s)): where each rank got to.\n",
            if g.pg.is_empty() { "-".to_string() } else { md_code(&g.pg) },
            g.members.len(),
            g.positions
        );
        let _ = writeln!(s, "| rank | collectives | last completed | last entered |");
        let _ = writeln!(s, "|---|---|---|---|");
        for r in &g.ranks {
            let show = |x: &Option<crate::sequence::RecordRef>| {
                x.as_ref().map_or("-".to_string(), |x| {
                    format!(
                        "{} #{}{}",
                        x.kind.name(),
                        x.position,
                        x.step.map(|st| format!(" (step {st})")).unwrap_or_default()
                    )
                })
            };
            let _ = writeln!(
                s,
                "| {} | {} | {} | {} |",
                r.rank,
                r.records,
                show(&r.last_completed),
                show(&r.last_entered)
            );
        }
    }
}

fn time_split(s: &mut String, a: &Analysis) {
    let m = means(a);
    if m.is_empty() {
        return;
    }
    let _ = writeln!(s, "\n## Where the time goes (mean per step, ms)\n");
    let _ = writeln!(
        s,
        "Communication splits into transfer (the shortest any member spent in the collective: moving data) and wait (the rest: waiting for the other ranks); the exposed part of each is not under compute. Input is the host loading data; idle is the rest of the time the device (or, on CPU runs, the main thread) had nothing to do.\n"
    );
    let _ = writeln!(
        s,
        "| rank | step | compute | comm | transfer | wait | exposed transfer | exposed wait | input | host sync | idle |"
    );
    let _ = writeln!(s, "|---|---|---|---|---|---|---|---|---|---|---|");
    for (r, x) in &m {
        let _ = writeln!(
            s,
            "| {r} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |",
            ms_f(x.wall),
            ms_f(x.compute),
            ms_f(x.comm),
            ms_f(x.transfer),
            ms_f(x.wait),
            ms_f(x.exposed_transfer),
            ms_f(x.exposed_wait),
            ms_f(x.input),
            ms_f(x.host_sync),
            ms_f(x.idle)
        );
    }
}

fn who_waits(s: &mut String, a: &Analysis) {
    if a.waits.is_empty() || a.ranks.len() < 2 {
        return;
    }
    let _ = writeln!(s, "\n## Who waits for whom\n");
    let late: Vec<_> = a.waits.iter().filter(|w| !w.late.is_empty()).collect();
    if late.is_empty() {
        let _ = writeln!(s, "In no step did a rank arrive late beyond the noise: the ranks' collective waits are within a few tens of microseconds of one another.");
        return;
    }
    let _ = writeln!(
        s,
        "The cost to the step is what the other ranks waited for the late group once (the minimum over the waiting ranks, not a sum over ranks or collectives).\n"
    );
    let _ = writeln!(s, "| step | late rank(s) | cost to the step (ms) | exposed wait of the others (ms, median) | exposed wait of the late rank(s) (ms) |");
    let _ = writeln!(s, "|---|---|---|---|---|");
    for w in late {
        let mut others = Vec::new();
        let mut mine = Vec::new();
        for (r, v) in w.ranks.iter().zip(&w.exposed_wait_ns) {
            if w.late.contains(r) {
                mine.push(*v as f64);
            } else {
                others.push(*v as f64);
            }
        }
        let _ = writeln!(
            s,
            "| {} | {} | {} | {} | {} |",
            w.step,
            list(&w.late),
            ms(w.cost_ns),
            ms_f(median(others)),
            ms_f(median(mine))
        );
    }
}

/// The late rank's regions against the others', over the steps of the first finding that
/// names one rank and locates its excess.
fn late_regions(s: &mut String, a: &Analysis) {
    let Some(f) = a.findings.iter().find(|f| f.location.is_some() && f.ranks.len() == 1) else { return };
    let rank = f.ranks[0];
    let steps: Vec<u32> =
        if f.steps.is_empty() { a.steps.iter().map(|x| x.step).collect() } else { f.steps.clone() };
    let rows: Vec<&RegionRow> = a.regions.iter().filter(|r| steps.contains(&r.step)).collect();
    // (parent, name) → rank → mean active time per step.
    let mut by: BTreeMap<(String, String), BTreeMap<u32, f64>> = BTreeMap::new();
    for r in &rows {
        *by.entry((r.parent.clone(), r.name.clone())).or_default().entry(r.rank).or_default() +=
            r.active_ns as f64 / steps.len().max(1) as f64;
    }
    let others: Vec<u32> = a.ranks.iter().map(|r| r.rank).filter(|&r| r != rank).collect();
    if others.is_empty() {
        return;
    }
    let mut table: Vec<(String, String, f64, f64)> = by
        .into_iter()
        .map(|((parent, name), v)| {
            let mine = v.get(&rank).copied().unwrap_or(0.0);
            let theirs = median(others.iter().map(|r| v.get(r).copied().unwrap_or(0.0)).collect());
            (parent, name, mine, theirs)
        })
        .filter(|x| x.2 > 0.0 || x.3 > 0.0)
        .collect();
    table.sort_by(|x, y| (y.2 - y.3).abs().total_cmp(&(x.2 - x.3).abs()).then(x.1.cmp(&y.1)));
    table.truncate(12);
    if table.is_empty() {
        return;
    }
    let _ = writeln!(
        s,
        "\n## Rank {rank} against the others (active time per step, ms; steps {})\n",
        list(&steps)
    );
    let _ = writeln!(s, "Active time is a region's time minus the collective wait inside it. The regions that differ most come first.\n");
    let _ = writeln!(s, "| region | inside | rank {rank} | others (median) | difference |");
    let _ = writeln!(s, "|---|---|---|---|---|");
    for (parent, name, mine, theirs) in table {
        let _ = writeln!(
            s,
            "| {} | {} | {} | {} | {:+.3} |",
            md_code(&name),
            if parent.is_empty() { "-".to_string() } else { md_code(&parent) },
            ms_f(mine),
            ms_f(theirs),
            (mine - theirs) / 1e6
        );
    }
}

fn totals(s: &mut String, a: &Analysis) {
    let _ = writeln!(s, "\n## Per rank (sums over steps, ms)\n");
    let _ = writeln!(s, "| rank | steps | wall | compute | comm | overlap | exposed comm | exposed transfer | exposed wait | idle | exposed % | overlap % (HTA) | step p50 | step max |");
    let _ = writeln!(s, "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|");
    for t in &a.rank_totals {
        let st = t.step_time.as_ref();
        let _ = writeln!(
            s,
            "| {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {:.1} | {} | {} | {} |",
            t.rank,
            t.steps,
            ms(t.wall_ns),
            ms(t.compute_ns),
            ms(t.comm_ns),
            ms(t.overlap_ns),
            ms(t.exposed_comm_ns),
            ms(t.exposed_transfer_ns),
            ms(t.exposed_wait_ns),
            ms(t.idle_ns),
            100.0 * t.exposed_comm_ratio,
            t.overlap_pct_hta.map_or("-".into(), |v| format!("{v:.1}")),
            st.map_or("-".into(), |x| ms(x.p50_ns)),
            st.map_or("-".into(), |x| ms(x.max_ns)),
        );
    }
}

fn alignment(s: &mut String, a: &Analysis) {
    let _ = writeln!(s, "\n## Clock alignment\n");
    let _ = writeln!(s, "{}\n", clocks_sentence(a));
    let _ = writeln!(s, "| rank | clock | method | offset (µs) | estimate (µs) | residual (µs) | anchors |");
    let _ = writeln!(s, "|---|---|---|---|---|---|---|");
    for x in &a.alignment {
        let _ = writeln!(
            s,
            "| {} | {} | {} | {:.1} | {:.1} | {:.1} | {} |",
            x.rank,
            x.clock_group,
            x.method,
            x.offset_ns as f64 / 1e3,
            x.estimate_ns as f64 / 1e3,
            x.residual_ns as f64 / 1e3,
            x.anchors
        );
    }
}

/// Which ranks share a clock (one host), and so one offset: the first thing a reader of the
/// alignment needs, and the reason an offset was not applied.
fn clocks_sentence(a: &Analysis) -> String {
    // What a shared clock is: a host's, else a multi-rank file's (`RankInfo::clock`).
    let place = |rank: u32| {
        let r = a.ranks.iter().find(|r| r.rank == rank)?;
        match (r.host.as_deref().and_then(crate::analyze::align::host_key), &r.clock) {
            (None, Some(f)) => {
                let base = f.rsplit(['/', '\\']).next().unwrap_or(f);
                Some((format!("come from one file, {}", md_code(base)), format!("file {}", md_code(base))))
            }
            _ => r
                .host
                .as_ref()
                .map(|h| (format!("report host {}", md_code(h)), format!("host {}", md_code(h)))),
        }
    };
    let mut clocks: BTreeMap<u32, Vec<u32>> = BTreeMap::new();
    for x in &a.alignment {
        clocks.entry(x.clock_group).or_default().push(x.rank);
    }
    let shared: Vec<(&u32, &Vec<u32>)> = clocks.iter().filter(|(_, v)| v.len() > 1).collect();
    if shared.is_empty() {
        return if a.ranks.iter().any(|r| r.host.is_some()) {
            "No two ranks are known to share a host: each rank's clock is aligned on its own.".into()
        } else {
            "The traces do not name their hosts: each rank's clock is aligned on its own.".into()
        };
    }
    if clocks.len() == 1 {
        let (what, _) = place(*clocks.keys().next().unwrap_or(&0))
            .unwrap_or_else(|| (format!("report host {}", md_code("")), String::new()));
        return format!(
            "All {} ranks {what}: one clock, so no offset is applied (differences between their collective end times are the collectives' end skew, not clock offsets).",
            a.alignment.len(),
        );
    }
    let parts: Vec<String> = clocks
        .iter()
        .map(|(g, v)| {
            let who = crate::analyze::align::rank_list(v);
            match place(*g).filter(|_| v.len() > 1) {
                Some((_, p)) => format!("{p} ({who})"),
                None => who,
            }
        })
        .collect();
    format!("{} clocks, one offset each: {}.", clocks.len(), parts.join("; "))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lists_read_as_ranges() {
        assert_eq!(list(&[]), "-");
        assert_eq!(list(&[3]), "3");
        assert_eq!(list(&[2, 3]), "2, 3");
        assert_eq!(list(&[2, 3, 4, 5]), "2–5");
        assert_eq!(list(&[1, 4, 7]), "1, 4, 7");
    }

    #[test]
    fn medians() {
        assert_eq!(median(vec![]), 0.0);
        assert_eq!(median(vec![3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(vec![4.0, 1.0, 2.0, 3.0]), 2.5);
    }
}
