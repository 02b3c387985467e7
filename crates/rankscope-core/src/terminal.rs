//! The reports as a terminal shows them (`rankscope analyze` without `--md`): the Markdown that
//! [`crate::diagnose::markdown`] writes, read back and laid out for a person at a terminal, so
//! that one writer says what the report holds and this module only how it looks.
//!
//! - Escapes are undone (`all\_reduce \#8` reads `all_reduce #8`), code spans print their text,
//!   `**bold**` is bold on a terminal that shows it ([`Style::bold`]) and plain otherwise.
//! - Headings print as their text, underlined.
//! - Tables print as aligned columns (numbers right-aligned); a table wider than the terminal is
//!   cut into column groups that each repeat the first column; a table longer than
//!   [`ROWS_SHOWN`] rows shows its first ones and says how many more `--all` would show.
//! - Control characters from the input are written as visible escapes
//!   ([`crate::escape::terminal`]) before anything else, so the only escape sequences in the
//!   output are the ones this module writes for bold.

use crate::escape;

/// A table longer than this shows this many rows unless every row is asked for.
pub const ROWS_SHOWN: usize = 24;

/// How the terminal shows text.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Style {
    /// Columns available; tables wider than this are cut into column groups (`None`: no limit,
    /// as when the output is a pipe).
    pub width: Option<usize>,
    /// Every row of every table (`--all`).
    pub all_rows: bool,
    /// `**bold**` as the terminal's bold (`ESC [1m`); plain text when false.
    pub bold: bool,
}

impl Style {
    /// Plain text with no width limit and every row: what a pipe or a file gets.
    pub const PLAIN: Style = Style { width: None, all_rows: true, bold: false };
}

/// The Markdown report `md` as a terminal shows it (module doc).
pub fn from_markdown(md: &str, style: &Style) -> String {
    let md = escape::terminal(md);
    let lines: Vec<&str> = md.lines().collect();
    let mut out = String::with_capacity(md.len());
    let mut i = 0;
    while i < lines.len() {
        let line = lines[i];
        if is_table_row(line) {
            let start = i;
            while i < lines.len() && is_table_row(lines[i]) {
                i += 1;
            }
            table(&lines[start..i], style, &mut out);
            continue;
        }
        i += 1;
        let trimmed = line.trim_end();
        if let Some((level, title)) = heading(trimmed) {
            let text = inline(title, style);
            let plain = inline(title, &Style { bold: false, ..*style });
            out.push_str(&text);
            out.push('\n');
            let rule = if level == 1 { '=' } else { '-' };
            out.extend(std::iter::repeat_n(rule, display_width(&plain)));
            out.push('\n');
        } else {
            out.push_str(&inline(trimmed, style));
            out.push('\n');
        }
    }
    out
}

fn is_table_row(line: &str) -> bool {
    let t = line.trim();
    t.starts_with('|') && t.ends_with('|') && t.len() >= 2
}

/// `## Title` → (2, "Title").
fn heading(line: &str) -> Option<(usize, &str)> {
    let level = line.bytes().take_while(|&b| b == b'#').count();
    (1..=6).contains(&level).then(|| line[level..].strip_prefix(' ')).flatten().map(|t| (level, t))
}

/// A line of Markdown inline text as plain (or bold) terminal text: escapes undone, code spans
/// as their text, `**` as bold or nothing.
fn inline(s: &str, style: &Style) -> String {
    let chars: Vec<char> = s.chars().collect();
    let mut out = String::with_capacity(s.len());
    let mut bold = false;
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        if c == '\\' && chars.get(i + 1).is_some_and(|n| n.is_ascii_punctuation()) {
            out.push(chars[i + 1]);
            i += 2;
        } else if c == '`' {
            let run = chars[i..].iter().take_while(|&&x| x == '`').count();
            match closing_fence(&chars, i + run, run) {
                Some(end) => {
                    let body: String = chars[i + run..end].iter().collect();
                    let body = match body.strip_prefix(' ').and_then(|b| b.strip_suffix(' ')) {
                        Some(inner) if !inner.is_empty() => inner.to_string(),
                        _ => body,
                    };
                    // A code span in a table escapes its pipes.
                    out.push_str(&body.replace("\\|", "|"));
                    i = end + run;
                }
                None => {
                    out.extend(std::iter::repeat_n('`', run));
                    i += run;
                }
            }
        } else if c == '*' && chars.get(i + 1) == Some(&'*') {
            bold = !bold;
            if style.bold {
                out.push_str(if bold { "\x1b[1m" } else { "\x1b[22m" });
            }
            i += 2;
        } else {
            out.push(c);
            i += 1;
        }
    }
    if bold && style.bold {
        out.push_str("\x1b[22m");
    }
    out
}

/// Where a run of exactly `run` backticks starts at or after `from`.
fn closing_fence(chars: &[char], from: usize, run: usize) -> Option<usize> {
    let mut j = from;
    while j < chars.len() {
        if chars[j] == '`' {
            let n = chars[j..].iter().take_while(|&&x| x == '`').count();
            if n == run {
                return Some(j);
            }
            j += n;
        } else {
            j += 1;
        }
    }
    None
}

/// The cells of a table row, split on the pipes that are not escaped.
fn cells(row: &str) -> Vec<&str> {
    let t = row.trim();
    let inner = &t[1..t.len() - 1];
    let mut out = Vec::new();
    let mut start = 0;
    let bytes = inner.as_bytes();
    let mut k = 0;
    while k < bytes.len() {
        match bytes[k] {
            b'\\' => k += 2,
            b'|' => {
                out.push(inner[start..k].trim());
                start = k + 1;
                k += 1;
            }
            _ => k += 1,
        }
    }
    out.push(inner[start.min(inner.len())..].trim());
    out
}

fn is_rule(cells: &[&str]) -> bool {
    cells.iter().all(|c| !c.is_empty() && c.chars().all(|x| matches!(x, '-' | ':')))
}

/// The columns a terminal gives `s`: one per character (the reports' text is Latin with a few
/// symbols; no double-width characters of their own).
fn display_width(s: &str) -> usize {
    // Bold codes take no column.
    s.replace("\x1b[1m", "").replace("\x1b[22m", "").chars().count()
}

fn numeric(s: &str) -> bool {
    let t = s.trim_end_matches(['%', '×', 'x']);
    !t.is_empty() && t.parse::<f64>().is_ok()
}

fn table(lines: &[&str], style: &Style, out: &mut String) {
    let mut rows: Vec<Vec<String>> = Vec::new();
    let mut header_rows = 0;
    for (k, line) in lines.iter().enumerate() {
        let c = cells(line);
        if k == 1 && is_rule(&c) {
            header_rows = 1;
            continue;
        }
        rows.push(c.iter().map(|x| inline(x, style)).collect());
    }
    let n_cols = rows.iter().map(Vec::len).max().unwrap_or(0);
    for r in &mut rows {
        r.resize(n_cols, String::new());
    }
    let body = rows.len().saturating_sub(header_rows);
    let hidden = if style.all_rows || body <= ROWS_SHOWN { 0 } else { body - ROWS_SHOWN };
    let shown = &rows[..rows.len() - hidden];
    let widths: Vec<usize> =
        (0..n_cols).map(|c| shown.iter().map(|r| display_width(&r[c])).max().unwrap_or(0)).collect();
    let right: Vec<bool> = (0..n_cols)
        .map(|c| {
            let v: Vec<&String> =
                shown[header_rows..].iter().map(|r| &r[c]).filter(|x| !x.is_empty()).collect();
            !v.is_empty() && v.iter().all(|x| numeric(x) || x.as_str() == "-")
        })
        .collect();
    for (g, group) in column_groups(&widths, style.width).into_iter().enumerate() {
        if g > 0 {
            out.push('\n');
        }
        for (k, r) in shown.iter().enumerate() {
            let mut line = String::new();
            for (j, &c) in group.iter().enumerate() {
                if j > 0 {
                    line.push_str("  ");
                }
                let pad = widths[c].saturating_sub(display_width(&r[c]));
                if right[c] {
                    line.extend(std::iter::repeat_n(' ', pad));
                    line.push_str(&r[c]);
                } else {
                    line.push_str(&r[c]);
                    line.extend(std::iter::repeat_n(' ', pad));
                }
            }
            out.push_str(line.trim_end());
            out.push('\n');
            if k + 1 == header_rows {
                let rule: Vec<String> = group.iter().map(|&c| "-".repeat(widths[c])).collect();
                out.push_str(&rule.join("  "));
                out.push('\n');
            }
        }
        if hidden > 0 {
            out.push_str(&format!("… {hidden} more rows (`--all` shows every row; `--md` the Markdown)\n"));
        }
    }
}

/// The columns of each group printed one under the other: as many as fit in `width`, each
/// group after the first starting with the first column again.
fn column_groups(widths: &[usize], width: Option<usize>) -> Vec<Vec<usize>> {
    let Some(limit) = width else { return vec![(0..widths.len()).collect()] };
    let mut groups: Vec<Vec<usize>> = Vec::new();
    let mut cur: Vec<usize> = Vec::new();
    let mut used = 0;
    for c in 0..widths.len() {
        let w = widths[c] + if cur.is_empty() { 0 } else { 2 };
        if !cur.is_empty() && cur != [0] && used + w > limit {
            groups.push(std::mem::take(&mut cur));
            cur.push(0);
            used = widths[0];
        }
        used += if cur.is_empty() { widths[c] } else { widths[c] + 2 };
        cur.push(c);
    }
    if !cur.is_empty() {
        groups.push(cur);
    }
    groups
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes_code_spans_and_bold_are_undone() {
        let md = "1. **medium** `arrival_jitter` — 24 all\\_reduce calls of `a|b` in ``x`y`` \\#8  ";
        let plain = from_markdown(md, &Style::PLAIN);
        assert_eq!(plain, "1. medium arrival_jitter — 24 all_reduce calls of a|b in x`y #8\n");
        let bold = from_markdown(md, &Style { bold: true, ..Style::PLAIN });
        assert!(bold.starts_with("1. \x1b[1mmedium\x1b[22m arrival_jitter"), "{bold:?}");
    }

    #[test]
    fn headings_are_underlined() {
        assert_eq!(
            from_markdown("# rankscope analysis\n## Findings", &Style::PLAIN),
            "rankscope analysis\n==================\nFindings\n--------\n"
        );
    }

    #[test]
    fn tables_align_and_fit() {
        let md =
            "| rank | name | ms |\n|---|---|---|\n| 0 | `nccl:all_reduce` | 1.5 |\n| 12 | b\\|c | 10.25 |\n";
        let t = from_markdown(md, &Style::PLAIN);
        assert_eq!(
            t,
            "rank  name                ms\n----  ---------------  -----\n   0  nccl:all_reduce    1.5\n  12  b|c              10.25\n"
        );
        // Narrow: cut into groups that repeat the first column.
        let narrow = from_markdown(md, &Style { width: Some(22), ..Style::PLAIN });
        assert_eq!(
            narrow,
            "rank  name\n----  ---------------\n   0  nccl:all_reduce\n  12  b|c\n\nrank     ms\n----  -----\n   0    1.5\n  12  10.25\n"
        );
    }

    #[test]
    fn long_tables_say_what_they_leave_out() {
        let mut md = String::from("| step | ms |\n|---|---|\n");
        for k in 0..30 {
            md.push_str(&format!("| {k} | {k}.5 |\n"));
        }
        let short = from_markdown(&md, &Style { all_rows: false, ..Style::PLAIN });
        assert!(short.contains("… 6 more rows"), "{short}");
        assert!(short.contains("  23  23.5") && !short.contains("  24  24.5"), "{short}");
        let all = from_markdown(&md, &Style::PLAIN);
        assert!(all.contains("  29  29.5") && !all.contains("more rows"), "{all}");
    }

    #[test]
    fn control_characters_from_the_input_stay_visible() {
        let t = from_markdown("name `\x1b]0;pwned\x07`", &Style { bold: true, ..Style::PLAIN });
        assert!(!t.contains('\x07') && t.contains("\\x1b]0;pwned\\x07"), "{t:?}");
    }
}
