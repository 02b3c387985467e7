//! The report's section on the evidence dropped beside the traces ([`crate::analyze::beside`]):
//! one part per kind given (cluster metrics, NCCL RAS status, NCCL Inspector logs, step logs),
//! none without it. Its findings are in the findings list; this says what was read and how it
//! was joined.

use std::fmt::Write;

use crate::analyze::beside::Beside;
use crate::analyze::Analysis;
use crate::escape::{md_code, md_prose, md_text};

fn opt_ms(v: Option<f64>) -> String {
    v.map_or("-".to_string(), |x| format!("{x:.1}"))
}

pub(super) fn section(s: &mut String, a: &Analysis) {
    let Some(b) = a.beside.as_ref() else { return };
    let _ = writeln!(s, "\n## Beside the traces\n");
    metrics(s, b);
    ras(s, b);
    inspector(s, b);
    steplogs(s, b);
    for p in &b.problems {
        let _ = writeln!(s, "- not read: {}", md_text(&p.message));
    }
}

fn metrics(s: &mut String, b: &Beside) {
    let Some(m) = &b.metrics else { return };
    let files: Vec<String> = m
        .files
        .iter()
        .map(|f| format!("{} ({}, {} series)", md_code(&f.file), f.format.as_str(), f.series))
        .collect();
    let _ = writeln!(s, "### Cluster metrics\n\n{}.\n", files.join(", "));
    let Some(j) = &m.join else {
        let _ = writeln!(s, "Not joined: no trace came with them (the ranks' hosts, GPUs, clocks and steps are the traces').\n");
        return;
    };
    let _ = writeln!(s, "Joined: {}\n\nResidual: {}\n", md_prose(&j.method), md_prose(&j.residual));
    if !j.ranks.is_empty() {
        let _ = writeln!(
            s,
            "| rank | host | GPU | SM active | tensor active | SM clock MHz | power W | comm share |"
        );
        let _ = writeln!(s, "|---:|---|---:|---:|---:|---:|---:|---:|");
        let f = |v: Option<f64>, d: usize| v.map_or("-".to_string(), |x| format!("{x:.d$}"));
        for r in &j.ranks {
            let _ = writeln!(
                s,
                "| {} | {} | {} | {} | {} | {} | {} | {:.0}% |",
                r.rank,
                md_code(&r.host),
                r.gpu,
                f(r.sm_active, 2),
                f(r.tensor_active, 2),
                f(r.sm_clock_mhz, 0),
                f(r.power_w, 0),
                100.0 * r.comm_share
            );
        }
    }
    let _ = writeln!(s, "\n{} finding(s) from the join (in the findings list above).\n", m.findings.len());
}

fn ras(s: &mut String, b: &Beside) {
    if b.ras.is_empty() {
        return;
    }
    let _ = writeln!(s, "### NCCL RAS status\n");
    for r in &b.ras {
        let st = &r.status;
        let _ = writeln!(
            s,
            "- {}: {} communicator(s), {} dead, {} not responding, {} timeout(s): {}",
            md_code(&r.file),
            st.comms_total,
            st.dead,
            st.not_responding,
            st.timeouts,
            md_text(&st.headline.join("; "))
        );
    }
    s.push('\n');
}

fn inspector(s: &mut String, b: &Beside) {
    let Some(i) = &b.inspector else { return };
    let r = &i.report;
    let _ = writeln!(
        s,
        "### NCCL Inspector\n\n{} record(s) from {} file(s), {} communicator(s).\n",
        r.records,
        i.files.len(),
        r.comms.len()
    );
    for n in &r.notes {
        let _ = writeln!(s, "- {}", md_prose(n));
    }
    let Some(j) = &i.join else {
        let _ = writeln!(s, "\nNot joined: no trace collective came with them.\n");
        return;
    };
    let _ = writeln!(
        s,
        "\nJoined with the traces: {} of their {} collectives matched to the Inspector's {} calls.\n",
        j.matched, j.trace_ops, j.inspector_calls
    );
    if !j.pairings.is_empty() {
        let _ = writeln!(
            s,
            "| communicator | process group | how | matched | group's collectives | Inspector calls |"
        );
        let _ = writeln!(s, "|---|---|---|---:|---:|---:|");
        for p in &j.pairings {
            let how = match p.offset {
                Some(d) => format!("sequence, sn = Seq {d:+}"),
                None => "kind, size and order".to_string(),
            };
            let _ = writeln!(
                s,
                "| {} | {} | {how} | {} | {} | {} |",
                md_code(&p.comm),
                md_code(&p.pg),
                p.matched,
                p.trace_ops,
                p.inspector_calls
            );
        }
    }
    let t = &j.times;
    let _ = writeln!(
        s,
        "\nExecution time against kernel time: {} member time(s) compared, {} disagree, median ratio {}.\n",
        t.compared,
        t.disagree,
        t.ratio_p50.map_or("-".to_string(), |r| format!("{r:.3}"))
    );
}

fn steplogs(s: &mut String, b: &Beside) {
    if b.steplogs.is_empty() {
        return;
    }
    let _ = writeln!(s, "### Step logs\n");
    for l in &b.steplogs {
        let range = match (l.first_iteration, l.last_iteration) {
            (Some(a), Some(z)) => format!("iterations {a}–{z}"),
            _ => "no iteration line".to_string(),
        };
        let _ = writeln!(
            s,
            "- {}: {} iteration line(s) ({range}), elapsed per iteration median {} ms, p95 {} ms, max {} ms; {} spike(s)",
            md_code(&l.file),
            l.iterations,
            opt_ms(l.elapsed_p50_ms),
            opt_ms(l.elapsed_p95_ms),
            opt_ms(l.elapsed_max_ms),
            l.spikes
        );
        match &l.profile {
            Some(p) => {
                let _ = writeln!(s, "  - the profiled steps: {}", md_prose(&p.note));
            }
            None => {
                let _ = writeln!(
                    s,
                    "  - no profiled step to place (no trace with `ProfilerStep#N`, or no iteration line)"
                );
            }
        }
    }
    s.push('\n');
}
