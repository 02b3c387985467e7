//! `rankscope nccl-ras`: an `ncclras` status report (`ncclras -f json > status.json`, or the
//! text of `ncclras` / `ncclras -v`; [`rankscope_core::nccl::ras`]) read back: what is wrong
//! first (which communicator, which ranks are dead, not responding, missing or in error, on
//! which host and GPU), or that every communicator is complete. Exit code 0 when the report
//! names nothing wrong, 1 when it does, 2 on usage or I/O errors or a file that is no report.

use std::fmt::Write as _;
use std::path::PathBuf;

use rankscope_core::nccl::ras::{self, RasStatus};

/// Decompressed files larger than this are refused (a status of 100,000 ranks is ~50 MB).
const MAX_INFLATED: u64 = 1 << 30;

#[derive(Debug, clap::Args)]
pub struct Args {
    /// The saved output of `ncclras -f json` (NCCL 2.28.7+) or of `ncclras` / `ncclras -v`
    /// (any NCCL since 2.24), gzipped or not.
    #[arg(value_name = "FILE")]
    pub file: PathBuf,
    /// Print the report as JSON (`version` 1; docs/nccl.md).
    #[arg(long)]
    pub json: bool,
}

fn render(s: &RasStatus) -> String {
    let mut head = vec![format!("format {}", s.format)];
    head.extend(s.nccl_version.as_ref().map(|v| format!("NCCL {v}")));
    head.extend(s.timestamp.clone());
    if let (Some(n), Some(g)) = (s.nodes, s.gpus) {
        head.push(format!("{n} nodes, {g} GPUs"));
    }
    let mut out = format!("NCCL RAS status ({}): {} communicators\n", head.join(", "), s.comms_total);
    for h in &s.headline {
        let _ = writeln!(out, "- {h}");
    }
    for c in s.comms.iter().filter(|c| c.missing > 0 || !c.issues.is_empty() || !c.mismatches.is_empty()) {
        let size = c.size.map_or("?".to_string(), |n| n.to_string());
        let reported = c.ranks_reported.map_or(String::new(), |r| format!(", {r} reported"));
        let _ = writeln!(
            out,
            "\n{}{}: {size} ranks{reported}, {} missing{}",
            c.hash,
            c.label.as_ref().map_or(String::new(), |l| format!(" {l}")),
            c.missing,
            c.status.as_ref().map_or(String::new(), |st| format!(", {st}"))
        );
        for i in &c.issues {
            let _ = writeln!(
                out,
                "  rank {:<6} {:<15} {:<16} pid {:<9} GPU {}{}",
                i.rank,
                i.problem.as_str(),
                i.host.as_deref().unwrap_or("-"),
                i.pid.map_or("-".to_string(), |p| p.to_string()),
                i.gpu.map_or("-".to_string(), |g| g.to_string()),
                i.error.as_ref().map_or(String::new(), |e| format!("  {e}"))
            );
        }
        for m in &c.mismatches {
            let _ = writeln!(out, "  mismatch: {m}");
        }
    }
    for d in &s.diagnostics {
        let _ = writeln!(out, "note: {d}");
    }
    out
}

pub fn run(a: Args) -> anyhow::Result<u8> {
    let b = crate::load::read_inflated(&a.file, MAX_INFLATED)?;
    let s = ras::read(&a.file.display().to_string(), &b)?;
    if a.json {
        crate::out::emit(&format!("{}\n", serde_json::to_string_pretty(&s)?))?;
    } else {
        crate::out::emit_text(&render(&s))?;
    }
    Ok(u8::from(!s.healthy()))
}
