//! Escaping of text that comes from traces (names, process groups, backends, snippets of bad
//! events) for the formats rankscope writes: Markdown and CSV. A trace is untrusted input: a
//! name such as `<img src=x onerror=…>`, `a|b` or one holding a newline must come out as the
//! same characters, never as HTML, a table cell boundary or a new line of the report, and a CSV
//! cell must never start a spreadsheet formula.
//!
//! (JSON needs nothing here: serde escapes; the app renders names as text nodes.) What the CLI
//! prints for a person (text, Markdown, CSV, messages) passes [`terminal`] last.

/// Text for a Markdown paragraph, list item or table cell: the characters that Markdown or the
/// HTML it may contain would interpret are backslash-escaped (CommonMark lets any ASCII
/// punctuation be escaped so), line breaks and other control characters become spaces.
pub fn md_text(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 8);
    for c in s.chars() {
        match c {
            '\\' | '`' | '*' | '_' | '[' | ']' | '<' | '>' | '|' | '~' | '&' | '!' | '#' => {
                out.push('\\');
                out.push(c);
            }
            c if c.is_control() => out.push(' '),
            c => out.push(c),
        }
    }
    out
}

/// A Markdown code span holding `s` exactly: the fence is one backtick longer than the longest
/// run of backticks inside, padded with spaces when `s` starts or ends with one; `|` is escaped
/// (GitHub's tables split cells on it even inside code spans); line breaks become spaces.
pub fn md_code(s: &str) -> String {
    let body: String =
        s.chars().map(|c| if c.is_control() { ' ' } else { c }).collect::<String>().replace('|', "\\|");
    let longest = longest_backtick_run(&body);
    let fence = "`".repeat(longest + 1);
    let pad = if body.starts_with('`') || body.ends_with('`') || body.is_empty() { " " } else { "" };
    format!("{fence}{pad}{body}{pad}{fence}")
}

/// The longest run of backticks in `s`: a code span or fence around `s` needs one more.
pub fn longest_backtick_run(s: &str) -> usize {
    let mut longest = 0;
    let mut run = 0;
    for c in s.chars() {
        if c == '`' {
            run += 1;
            longest = longest.max(run);
        } else {
            run = 0;
        }
    }
    longest
}

/// Prose rankscope wrote around names from the trace, with the names in backticks (a finding's
/// message or fix): the text between backticks becomes a code span ([`md_code`]), the rest is
/// [`md_text`]. A name that itself holds a backtick only moves where a span ends; every piece
/// is still escaped, so nothing from the trace can become HTML or a table cell boundary.
pub fn md_prose(s: &str) -> String {
    let pieces: Vec<&str> = s.split('`').collect();
    // An unpaired backtick: the last piece is plain text with its backtick kept.
    let paired = pieces.len() % 2 == 1;
    let mut out = String::with_capacity(s.len() + 8);
    for (i, p) in pieces.iter().enumerate() {
        let last = i + 1 == pieces.len();
        if i % 2 == 1 && (paired || !last) {
            out.push_str(&md_code(p));
        } else {
            if i % 2 == 1 {
                out.push_str("\\`");
            }
            out.push_str(&md_text(p));
        }
    }
    out
}

/// Text for a terminal: every control character but the line feed and the tab (C0, DEL, the
/// C1 controls a terminal may take for `ESC [`, a carriage return that would overwrite the
/// line), and the Unicode bidirectional overrides that reorder what is shown, written as a
/// visible escape (`\x1b`, `\u{202e}`). A name holding `ESC ] 0 ; title BEL` (the window's
/// title), an OSC 8 hyperlink or an OSC 52 clipboard write then prints as the characters it is
/// made of, never as a command to the terminal. Borrowed when there is nothing to escape.
pub fn terminal(s: &str) -> std::borrow::Cow<'_, str> {
    let bad = |c: char| {
        (c.is_control() && c != '\n' && c != '\t')
            || matches!(c, '\u{200e}' | '\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}')
    };
    if !s.chars().any(bad) {
        return std::borrow::Cow::Borrowed(s);
    }
    let mut out = String::with_capacity(s.len() + 16);
    for c in s.chars() {
        if !bad(c) {
            out.push(c);
        } else if (c as u32) < 0x80 {
            out.push_str(&format!("\\x{:02x}", c as u32));
        } else {
            out.push_str(&format!("\\u{{{:x}}}", c as u32));
        }
    }
    std::borrow::Cow::Owned(out)
}

/// One CSV cell (RFC 4180): quoted when it holds a `,`, `"` or line break (quotes doubled);
/// a cell starting with `=`, `+`, `-`, `@`, a tab or a carriage return gets a leading `'` so a
/// spreadsheet reads it as text, not as a formula (OWASP's advice for CSV injection). For cells
/// of text only: numbers are written as they are.
pub fn csv_field(s: &str) -> String {
    let guarded =
        if s.starts_with(['=', '+', '-', '@', '\t', '\r']) { format!("'{s}") } else { s.to_string() };
    if guarded.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", guarded.replace('"', "\"\""))
    } else {
        guarded
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn markdown_text_is_inert() {
        assert_eq!(md_text("nccl"), "nccl");
        assert_eq!(md_text("<img src=x onerror=alert(1)>"), "\\<img src=x onerror=alert(1)\\>");
        assert_eq!(md_text("a|b"), "a\\|b");
        assert_eq!(md_text("line\nbreak\r\n"), "line break  ");
        assert_eq!(md_text("[x](javascript:y)"), "\\[x\\](javascript:y)");
        assert_eq!(
            md_text("**bold** `code` ~~s~~ &amp;"),
            "\\*\\*bold\\*\\* \\`code\\` \\~\\~s\\~\\~ \\&amp;"
        );
        assert_eq!(md_text("# title"), "\\# title");
    }

    #[test]
    fn prose_keeps_its_code_spans_and_escapes_the_rest() {
        assert_eq!(md_prose("in `forward` on rank 2"), "in `forward` on rank 2");
        assert_eq!(md_prose("a `<b>|c` d_e"), "a `<b>\\|c` d\\_e");
        assert_eq!(md_prose("odd ` tick <x>"), "odd \\` tick \\<x\\>");
        assert_eq!(md_prose("<img src=x>"), "\\<img src=x\\>");
    }

    #[test]
    fn code_spans_hold_anything() {
        assert_eq!(md_code("rank0.json"), "`rank0.json`");
        assert_eq!(md_code("a`b"), "``a`b``");
        assert_eq!(md_code("`x`"), "`` `x` ``");
        assert_eq!(md_code("a|b"), "`a\\|b`");
        assert_eq!(md_code("a\nb"), "`a b`");
        assert_eq!(md_code(""), "`  `");
    }

    #[test]
    fn csv_cells_are_quoted_and_never_formulas() {
        assert_eq!(csv_field("gpu"), "gpu");
        assert_eq!(csv_field("a,b"), "\"a,b\"");
        assert_eq!(csv_field("say \"hi\""), "\"say \"\"hi\"\"\"");
        assert_eq!(csv_field("=HYPERLINK(\"x\")"), "\"'=HYPERLINK(\"\"x\"\")\"");
        assert_eq!(csv_field("+1"), "'+1");
        assert_eq!(csv_field("-2"), "'-2");
        assert_eq!(csv_field("@SUM(A1)"), "'@SUM(A1)");
        assert_eq!(csv_field("two\nlines"), "\"two\nlines\"");
    }
}
