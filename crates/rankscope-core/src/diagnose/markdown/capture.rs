//! The report's "What the traces lack" lines: each capture gap once, with its ranks and the
//! setting that fixes it ([`crate::analyze::capture`]).

use std::fmt::Write;

use crate::analyze::capture::job_gaps;
use crate::analyze::Analysis;

pub(super) fn section(s: &mut String, a: &Analysis) {
    let gaps = job_gaps(&a.ranks);
    if gaps.is_empty() {
        return;
    }
    if !s.ends_with("\n\n") {
        s.push('\n');
    }
    let _ = writeln!(s, "## What the traces lack\n");
    for (g, ranks) in gaps {
        let who = if ranks.len() == a.ranks.len() {
            "every rank".to_string()
        } else {
            format!("rank(s) {}", super::list_of(&ranks))
        };
        let _ = writeln!(s, "- {who}: {}; {}.", g.missing(), g.fix());
    }
    s.push('\n');
}
