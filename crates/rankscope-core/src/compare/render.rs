//! A comparison as text, Markdown, CSV and JSON. The first line of the text and the Markdown
//! is the verdict; the JSON is the [`Comparison`] as it serializes (docs/diff-schema.md).

use super::figures::{FigureDiff, Presence, RegionDiff};
use super::shift::Shift;
use super::verdict::{cause_words, signed_dur, signed_pct};
use super::Comparison;
use crate::escape::{csv_field, md_code, md_text};
use crate::words::dur;

/// How tables are written.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Style {
    Text,
    Markdown,
}

/// Per-rank rows are all shown up to this many ranks; above it only the ones beyond noise.
const ALL_RANKS_UP_TO: usize = 8;
/// Rows of the region and collective tables shown (the JSON has them all).
const MAX_ROWS: usize = 40;
/// Operator rows shown unless every row is asked for (`--all`): the changed ones, largest first.
const MAX_OP_ROWS: usize = 12;

struct Table {
    head: Vec<&'static str>,
    rows: Vec<Vec<String>>,
}

impl Table {
    fn write(&self, out: &mut String, style: Style) {
        if self.rows.is_empty() {
            out.push_str("(none)\n\n");
            return;
        }
        match style {
            Style::Markdown => {
                out.push_str(&format!("| {} |\n", self.head.join(" | ")));
                out.push_str(&format!("|{}\n", "---|".repeat(self.head.len())));
                for r in &self.rows {
                    out.push_str(&format!("| {} |\n", r.join(" | ")));
                }
            }
            Style::Text => {
                let mut w: Vec<usize> = self.head.iter().map(|h| h.chars().count()).collect();
                for r in &self.rows {
                    for (k, c) in r.iter().enumerate() {
                        if let Some(x) = w.get_mut(k) {
                            *x = (*x).max(c.chars().count());
                        }
                    }
                }
                let line = |cells: Vec<&str>| {
                    let s: Vec<String> = cells
                        .iter()
                        .zip(&w)
                        .map(|(c, &n)| format!("{c}{}", " ".repeat(n - c.chars().count())))
                        .collect();
                    format!("  {}\n", s.join("  ").trim_end())
                };
                out.push_str(&line(self.head.clone()));
                for r in &self.rows {
                    out.push_str(&line(r.iter().map(String::as_str).collect()));
                }
            }
        }
        out.push('\n');
    }
}

fn heading(out: &mut String, style: Style, title: &str) {
    match style {
        Style::Markdown => out.push_str(&format!("## {title}\n\n")),
        Style::Text => out.push_str(&format!("{title}\n")),
    }
}

fn name(style: Style, s: &str) -> String {
    match style {
        Style::Markdown => md_code(s),
        Style::Text => s.to_string(),
    }
}

fn interval(s: &Shift) -> String {
    format!("{}…{}", signed_dur(s.lo_ns), signed_dur(s.hi_ns))
}

fn judged(beyond: bool) -> String {
    if beyond { "beyond noise" } else { "within noise" }.to_string()
}

fn figure_row(d: &FigureDiff) -> Vec<String> {
    vec![
        d.rank.map_or("job".into(), |r| format!("rank {r}")),
        d.figure.as_str().to_string(),
        dur(d.shift.base_ns as f64),
        dur(d.shift.new_ns as f64),
        signed_dur(d.shift.delta_ns),
        interval(&d.shift),
        judged(d.beyond_noise),
    ]
}

fn region_row(style: Style, r: &RegionDiff) -> Vec<String> {
    let presence = match r.presence {
        Presence::Both => String::new(),
        p => format!(" ({})", p.as_str()),
    };
    let parent = if r.parent.is_empty() { String::new() } else { format!("{} > ", name(style, &r.parent)) };
    vec![
        r.rank.map_or("mean".into(), |k| format!("rank {k}")),
        format!("{parent}{}{presence}", name(style, &r.name)),
        format!("{:.1} → {:.1}", r.count_base, r.count_new),
        dur(r.shift.base_ns as f64),
        dur(r.shift.new_ns as f64),
        signed_dur(r.shift.delta_ns),
        interval(&r.shift),
        judged(r.beyond_noise),
    ]
}

fn opt_dur(v: Option<i64>) -> String {
    v.map_or("-".into(), |x| dur(x as f64))
}

/// `s` in at most `n` characters: its head and its tail around `…` (two kernels' templates often
/// differ only at the end).
fn short(s: &str, n: usize) -> String {
    let len = s.chars().count();
    if len <= n {
        return s.to_string();
    }
    let tail = n / 3;
    let head = n.saturating_sub(tail + 1);
    let h: String = s.chars().take(head).collect();
    let t: String = s.chars().skip(len - tail).collect();
    format!("{h}…{t}")
}

fn top_words(t: Option<super::OpTop>) -> String {
    t.map_or("-".into(), |t| format!("rank {} {}", t.rank, dur(t.self_ns as f64)))
}

/// The operators and kernels matched ([`super::operators`]): the ones that changed (time or
/// count beyond noise, or in one run only) unless `all`, largest change first.
fn operators(out: &mut String, style: Style, c: &Comparison, all: bool) {
    if c.operators.is_empty() {
        return;
    }
    heading(out, style, "Operators and kernels (per step per rank; self time)");
    let changed: Vec<&super::OperatorDiff> = c.operators.iter().filter(|o| all || o.changed()).collect();
    let shown = if all { changed.len() } else { MAX_OP_ROWS };
    let rows: Vec<Vec<String>> = changed
        .iter()
        .take(shown)
        .map(|o| {
            let mut label = name(style, &short(&o.name, 60));
            if o.other {
                label = format!("other {}", o.kind.as_str());
            }
            let shapes = match (&o.shapes_base, &o.shapes_new) {
                (Some(b), Some(n)) if b != n => format!(" {} → {}", short(b, 40), short(n, 40)),
                (Some(x), _) | (_, Some(x)) => format!(" {}", short(x, 40)),
                _ => String::new(),
            };
            let presence = match o.presence {
                super::OpPresence::Both => String::new(),
                p => format!(" ({})", p.as_str()),
            };
            vec![
                o.kind.as_str().to_string(),
                format!(
                    "{label}{}{presence}",
                    if style == Style::Markdown { md_text(&shapes) } else { shapes }
                ),
                format!(
                    "{:.1} → {:.1}{}",
                    o.count_base,
                    o.count_new,
                    if o.count_beyond_noise { " *" } else { "" }
                ),
                dur(o.shift.base_ns as f64),
                dur(o.shift.new_ns as f64),
                signed_dur(o.shift.delta_ns),
                format!("{:.1}% → {:.1}%", 100.0 * o.share_base, 100.0 * o.share_new),
                format!("{} → {}", top_words(o.top_base), top_words(o.top_new)),
                judged(o.beyond_noise),
            ]
        })
        .collect();
    let more = changed.len().saturating_sub(shown);
    if rows.is_empty() {
        out.push_str(&format!(
            "No operator changed beyond noise ({} matched; `--all` lists them).\n\n",
            c.operators.len()
        ));
        return;
    }
    Table {
        head: vec!["kind", "operator", "calls", "base", "new", "change", "share", "most on", "judged"],
        rows,
    }
    .write(out, style);
    let mut note = String::from("`*`: the count changed beyond noise.");
    if more > 0 {
        note.push_str(&format!(" {more} more changed; `--all` lists every operator."));
    }
    out.push_str(&format!("{note}\n\n"));
}

fn write(c: &Comparison, style: Style, all: bool) -> String {
    let mut out = String::new();
    out.push_str(&c.verdict.line);
    out.push_str("\n\n");
    if !c.verdict.also.is_empty() {
        heading(&mut out, style, "Also beyond noise");
        for a in c.verdict.also.iter().take(MAX_ROWS) {
            let text = cause_words(a);
            out.push_str(&format!("- {}\n", if style == Style::Markdown { md_text(&text) } else { text }));
        }
        out.push('\n');
    }
    heading(&mut out, style, "Step time");
    let st = &c.step_time;
    let mut t = Table {
        head: vec!["run", "steps", "median step", "spread (1.4826 × MAD)", "steps that stand out"],
        rows: vec![],
    };
    for (which, n, s) in [
        ("base", &st.noise_base, st.shift.map(|s| (s.n_base, s.base_ns))),
        ("new", &st.noise_new, st.shift.map(|s| (s.n_new, s.new_ns))),
    ] {
        let Some((steps, med)) = s else { continue };
        t.rows.push(vec![
            which.into(),
            steps.to_string(),
            dur(med as f64),
            n.as_ref().map_or("-".into(), |n| dur(n.spread_ns as f64)),
            n.as_ref().map_or("-".into(), |n| {
                n.outliers.iter().map(|o| o.step.to_string()).collect::<Vec<_>>().join(", ")
            }),
        ]);
    }
    t.write(&mut out, style);
    if let Some(words) = change_words(st) {
        out.push_str(&format!("{words}: {}.\n\n", judged(st.beyond_noise)));
    }
    explained(&mut out, style, c);
    heading(&mut out, style, "Configuration");
    if c.config.is_empty() {
        out.push_str("Same world size, backend, devices, hosts, steps profiled and groups.\n\n");
    } else {
        let rows = c.config.iter().map(|d| vec![d.key.clone(), d.base.clone(), d.new.clone()]).collect();
        Table { head: vec!["fact", "base", "new"], rows }.write(&mut out, style);
    }
    heading(&mut out, style, "Per step: the job and each rank");
    let ranks = c.figures.iter().filter_map(|d| d.rank).max().map_or(0, |r| r as usize + 1);
    let rows = c
        .figures
        .iter()
        .filter(|d| {
            d.rank.is_none()
                || d.beyond_noise
                || (ranks <= ALL_RANKS_UP_TO && !d.figure.as_str().starts_with("phase_"))
        })
        .map(figure_row)
        .collect();
    Table { head: vec!["who", "figure", "base", "new", "change", "interval", "judged"], rows }
        .write(&mut out, style);
    heading(&mut out, style, "Regions (per step; `mean` is per rank on average)");
    let mut regs: Vec<&RegionDiff> =
        c.regions.iter().filter(|r| r.rank.is_none() || r.beyond_noise).collect();
    regs.sort_by_key(|r| (r.rank.is_some(), std::cmp::Reverse(r.shift.delta_ns.abs())));
    let rows = regs.iter().take(MAX_ROWS).map(|r| region_row(style, r)).collect();
    Table { head: vec!["who", "region", "count", "base", "new", "change", "interval", "judged"], rows }
        .write(&mut out, style);
    heading(&mut out, style, "Collectives (kind × group × median size)");
    let rows = c
        .collectives
        .iter()
        .take(MAX_ROWS)
        .map(|d| {
            let f = |s: &Option<super::tables::CollSide>, g: &dyn Fn(&super::tables::CollSide) -> String| {
                s.as_ref().map_or("-".into(), g)
            };
            let pair = |g: &dyn Fn(&super::tables::CollSide) -> String| {
                format!("{} → {}", f(&d.base, g), f(&d.new, g))
            };
            vec![
                d.kind.name().to_string(),
                d.group.clone(),
                d.size.clone(),
                pair(&|s| format!("{:.1}", s.calls_per_step)),
                pair(&|s| dur(s.dur_p50_ns as f64)),
                pair(&|s| opt_dur(s.transfer_mean_ns)),
                pair(&|s| opt_dur(s.wait_mean_ns)),
                pair(&|s| s.busbw_gbps.map_or("-".into(), |b| format!("{b:.2}"))),
            ]
        })
        .collect();
    Table {
        head: vec!["kind", "group", "size", "calls/step", "p50", "transfer", "wait", "busbw GB/s"],
        rows,
    }
    .write(&mut out, style);
    operators(&mut out, style, c, all);
    heading(&mut out, style, "Findings");
    let rows = c
        .findings
        .iter()
        .map(|f| {
            let ranks = f.ranks.iter().map(|r| r.to_string()).collect::<Vec<_>>().join(",");
            let loc =
                f.location.iter().filter(|n| *n != "ProfilerStep").cloned().collect::<Vec<_>>().join(" > ");
            vec![
                f.id.as_str().to_string(),
                ranks,
                if loc.is_empty() { "-".into() } else { name(style, &loc) },
                f.change.as_str().to_string(),
                format!("{} → {}", opt_dur(f.impact_base_ns), opt_dur(f.impact_new_ns)),
            ]
        })
        .collect();
    Table { head: vec!["finding", "ranks", "where", "change", "saving per step"], rows }
        .write(&mut out, style);
    out
}

/// What explains the change ([`super::attribution`]): each cause whose saving moved, and the
/// job's distance from its ideal step; nothing when neither says anything.
fn explained(out: &mut String, style: Style, c: &Comparison) {
    let a = &c.attribution;
    if a.causes.is_empty() && a.behind_ideal.as_ref().is_none_or(|b| b.delta_ns.abs() <= c.step_time.floor_ns)
    {
        return;
    }
    heading(out, style, "What explains it (the what-if answers of both runs)");
    let pct = |s: Option<f64>| s.map_or("-".into(), |s| format!("{:.0}%", 100.0 * s));
    let mut rows: Vec<Vec<String>> = a
        .causes
        .iter()
        .take(MAX_ROWS)
        .map(|x| {
            let ranks = x.ranks.iter().map(|r| r.to_string()).collect::<Vec<_>>().join(",");
            vec![
                x.id.as_str().to_string(),
                if ranks.is_empty() { "-".into() } else { ranks },
                format!("{} → {}", opt_dur(x.gain_base_ns), opt_dur(x.gain_new_ns)),
                signed_dur(x.explained_ns),
                pct(x.share),
                if x.replayed { "replay" } else { "estimate" }.into(),
            ]
        })
        .collect();
    if let Some(b) = &a.behind_ideal {
        rows.push(vec![
            "behind the ideal step".into(),
            "all".into(),
            format!("{} → {}", dur(b.base_ns as f64), dur(b.new_ns as f64)),
            signed_dur(b.delta_ns),
            pct(b.share),
            "replay".into(),
        ]);
    }
    Table { head: vec!["cause", "ranks", "saving per step", "explains", "of the change", "from"], rows }
        .write(out, style);
    out.push_str(
        "A cause explains the change by which its saving moved; savings of two causes may overlap. The ideal step is every rank at its peers' typical speed.\n\n",
    );
}

/// "Change +303 ms (+34%), 97% interval +133 ms…+364 ms (+15%…+41%); the floor is 27 ms": the
/// step's change with its interval and the floor it is judged against (the report's line and
/// the app's Compare view; "beyond noise" or "within noise" follows). None without a shift.
pub fn change_words(st: &super::StepTime) -> Option<String> {
    let s = st.shift?;
    Some(format!(
        "Change {} ({}), {:.0}% interval {}…{} ({}…{}); the floor is {}",
        signed_dur(s.delta_ns),
        signed_pct(st.ratio.unwrap_or(0.0)),
        (100.0 * s.confidence).floor(),
        signed_dur(s.lo_ns),
        signed_dur(s.hi_ns),
        signed_pct(st.ratio_lo.unwrap_or(0.0)),
        signed_pct(st.ratio_hi.unwrap_or(0.0)),
        dur(st.floor_ns as f64),
    ))
}

/// The comparison as plain text.
pub fn text(c: &Comparison) -> String {
    write(c, Style::Text, false)
}

/// The comparison as Markdown.
pub fn markdown(c: &Comparison) -> String {
    write(c, Style::Markdown, false)
}

/// [`text`] or (`markdown`) [`markdown`] with every matched operator listed, not only the
/// changed ones (`rankscope diff --all`).
pub fn with_all_operators(c: &Comparison, markdown: bool) -> String {
    write(c, if markdown { Style::Markdown } else { Style::Text }, true)
}

/// The comparison as JSON (schema `rankscope.diff/1`).
pub fn json(c: &Comparison) -> String {
    let mut s = serde_json::to_string_pretty(c).unwrap_or_else(|e| format!("{{\"error\": \"{e}\"}}"));
    s.push('\n');
    s
}

/// Every per-step figure and region as CSV rows: `section,rank,item,parent,presence,
/// base_ns,new_ns,delta_ns,lo_ns,hi_ns,confidence,beyond_noise` (`rank` empty for the job).
pub fn csv(c: &Comparison) -> String {
    let mut out = String::from(
        "section,rank,item,parent,presence,base_ns,new_ns,delta_ns,lo_ns,hi_ns,confidence,beyond_noise\n",
    );
    let mut row =
        |section: &str, rank: Option<u32>, item: &str, parent: &str, presence: &str, s: &Shift, b: bool| {
            out.push_str(&format!(
                "{section},{},{},{},{presence},{},{},{},{},{},{:.4},{b}\n",
                rank.map_or(String::new(), |r| r.to_string()),
                csv_field(item),
                csv_field(parent),
                s.base_ns,
                s.new_ns,
                s.delta_ns,
                s.lo_ns,
                s.hi_ns,
                s.confidence
            ));
        };
    if let Some(s) = &c.step_time.shift {
        row("step_time", None, "step_time", "", "", s, c.step_time.beyond_noise);
    }
    for d in &c.figures {
        row("figure", d.rank, d.figure.as_str(), "", "", &d.shift, d.beyond_noise);
    }
    for r in &c.regions {
        row("region", r.rank, &r.name, &r.parent, r.presence.as_str(), &r.shift, r.beyond_noise);
    }
    // Operators: `item` the name (with its shapes), `parent` the kind; self time per step per
    // rank.
    for o in &c.operators {
        let item = match (&o.shapes_base, &o.shapes_new) {
            _ if o.other => "other".to_string(),
            (Some(b), Some(n)) if b != n => format!("{} {b} -> {n}", o.name),
            (Some(x), _) | (_, Some(x)) => format!("{} {x}", o.name),
            _ => o.name.clone(),
        };
        row("operator", None, &item, o.kind.as_str(), o.presence.as_str(), &o.shift, o.beyond_noise);
    }
    out
}
