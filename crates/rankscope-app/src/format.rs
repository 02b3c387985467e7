//! Number formatting for display (display only: figures stay integers ns / bytes until here).

/// `1234567` → `1,234,567`.
pub fn thousands(n: u64) -> String {
    let s = n.to_string();
    let mut out = String::with_capacity(s.len() + s.len() / 3);
    for (i, c) in s.chars().enumerate() {
        if i > 0 && (s.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// A duration in ns with a unit that keeps 3 significant digits: `812 ns`, `12.5 µs`, `1.23 s`.
/// Text from the input (a file's name, an event's) as the page shows it: control characters but
/// `\n` and `\t`, and bidi overrides, written as `\x1b`, `\u{202e}` (the core's
/// `escape::terminal`, as the CLI prints them), so a name shows every character it holds and
/// none hides or reorders the text around it. Yew escapes HTML in text and attributes already.
pub fn inert(s: &str) -> String {
    rankscope_core::escape::terminal(s).into_owned()
}

pub fn duration(ns: f64) -> String {
    // No "-0 ns" from a rounding that lands just below zero.
    let ns = if ns.abs() < 0.5 { 0.0 } else { ns };
    let a = ns.abs();
    let (v, unit) = if a < 1e3 {
        (ns, "ns")
    } else if a < 1e6 {
        (ns / 1e3, "µs")
    } else if a < 1e9 {
        (ns / 1e6, "ms")
    } else {
        (ns / 1e9, "s")
    };
    let digits = if v.abs() >= 100.0 || unit == "ns" {
        0
    } else if v.abs() >= 10.0 {
        1
    } else {
        2
    };
    format!("{v:.digits$} {unit}")
}

/// Bytes as `12.3 MB` (decimal units, as file managers show them).
pub fn bytes(n: u64) -> String {
    let f = n as f64;
    if f < 1e3 {
        format!("{n} B")
    } else if f < 1e6 {
        format!("{:.1} kB", f / 1e3)
    } else if f < 1e9 {
        format!("{:.1} MB", f / 1e6)
    } else {
        format!("{:.2} GB", f / 1e9)
    }
}

/// Ranks as ranges: `[0, 1, 2, 3, 7]` → `0–3, 7`, `[2, 3]` → `2, 3` (sorted input; a run of
/// two is two ranks).
pub fn ranges(v: &[u32]) -> String {
    let mut out: Vec<String> = Vec::new();
    let mut i = 0;
    while i < v.len() {
        let mut j = i;
        while j + 1 < v.len() && v[j + 1] == v[j] + 1 {
            j += 1;
        }
        match j - i {
            0 => out.push(v[i].to_string()),
            1 => out.push(format!("{}, {}", v[i], v[j])),
            _ => out.push(format!("{}–{}", v[i], v[j])),
        }
        i = j + 1;
    }
    out.join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats() {
        assert_eq!(thousands(0), "0");
        assert_eq!(thousands(1234567), "1,234,567");
        assert_eq!(thousands(123), "123");
        assert_eq!(duration(812.0), "812 ns");
        assert_eq!(duration(12_500.0), "12.5 µs");
        assert_eq!(duration(1_234_000_000.0), "1.23 s");
        assert_eq!(duration(-2_000_000.0), "-2.00 ms");
        assert_eq!(duration(-0.2), "0 ns");
        assert_eq!(bytes(999), "999 B");
        assert_eq!(bytes(12_345_678), "12.3 MB");
        assert_eq!(ranges(&[0, 1, 2, 3, 7]), "0–3, 7");
        assert_eq!(ranges(&[]), "");
        assert_eq!(ranges(&[2, 3, 5, 6, 7]), "2, 3, 5–7");
    }
}
