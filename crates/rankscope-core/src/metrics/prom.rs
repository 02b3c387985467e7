//! The Prometheus text exposition format (version 0.0.4), as dcgm-exporter and node-exporter
//! serve it on `/metrics`:
//!
//! ```text
//! # HELP DCGM_FI_PROF_SM_ACTIVE The ratio of cycles an SM has at least 1 warp assigned.
//! # TYPE DCGM_FI_PROF_SM_ACTIVE gauge
//! DCGM_FI_PROF_SM_ACTIVE{gpu="0",UUID="GPU-…",device="nvidia0",modelName="NVIDIA H100 80GB HBM3",Hostname="node-1"} 0.42
//! node_network_transmit_bytes_total{device="ib0"} 1.2e+12 1716400000123
//! ```
//!
//! A sample is `name{labels} value [timestamp]`: label values are double-quoted with `\\`, `\"`
//! and `\n` escapes; the value is a float (`NaN`, `+Inf`, `-Inf` allowed by the format, skipped
//! here as they say nothing of a rate); the optional timestamp is integer ms since the epoch.
//!
//! **Many scrapes in one file.** A scrape loop appends one scrape after another. A sample with
//! its own timestamp keeps it. Samples without one take the time of the scrape they belong to,
//! which the loop writes before each scrape as a line holding Unix seconds: `# 1716400000.25`,
//! `# scrape 1716400000.25` or a bare `1716400000.25` (`echo "# $(date +%s.%N)"; curl -s
//! node:9400/metrics`). Unix seconds are recognised from 10^9 to 4·10^9 (2001 to 2096), so a
//! comment that ends in another number is not taken for a time.

use super::{DiagKind, Limits, Read, ReadError, SeriesKey, Tally};

/// Whether `line` parses as a sample (for [`super::sniff`]).
pub(crate) fn looks_like_sample(line: &str) -> bool {
    split_sample(line).and_then(|(key, _, _)| parse_key(key, &Limits::default())).is_ok()
}

/// Why a sample line was refused.
#[derive(Debug, PartialEq)]
pub(crate) enum Refused {
    Syntax(&'static str),
    TooLong,
    Number,
    Time,
}

/// A metric or label name: `[a-zA-Z_:][a-zA-Z0-9_:]*`.
fn name_len(s: &[u8]) -> usize {
    let mut n = 0;
    for (k, &b) in s.iter().enumerate() {
        let ok = b.is_ascii_alphabetic() || b == b'_' || b == b':' || (k > 0 && b.is_ascii_digit());
        if !ok {
            break;
        }
        n += 1;
    }
    n
}

/// A float as the format writes it; `None` for text that is not one. NaN and ±Inf parse.
pub(crate) fn float(text: &str) -> Option<f64> {
    match text {
        "NaN" | "nan" => Some(f64::NAN),
        "+Inf" | "Inf" | "inf" => Some(f64::INFINITY),
        "-Inf" | "-inf" => Some(f64::NEG_INFINITY),
        t if t.len() <= 64 && t.bytes().all(|b| b.is_ascii_digit() || b"+-.eE".contains(&b)) => {
            t.parse().ok()
        }
        _ => None,
    }
}

/// `{a="x",b="y"}` starting at `s[0] == b'{'`: the labels and the bytes consumed.
pub(crate) fn labels(s: &[u8], lim: &Limits) -> Result<(Vec<(String, String)>, usize), Refused> {
    let mut out = Vec::new();
    let mut k = 1;
    loop {
        while s.get(k).is_some_and(|b| *b == b' ' || *b == b',') {
            k += 1;
        }
        match s.get(k) {
            Some(b'}') => return Ok((out, k + 1)),
            None => return Err(Refused::Syntax("unclosed `{`")),
            _ => {}
        }
        let n = name_len(&s[k..]);
        if n == 0 {
            return Err(Refused::Syntax("a label name expected"));
        }
        if n > lim.label_bytes {
            return Err(Refused::TooLong);
        }
        let name = String::from_utf8_lossy(&s[k..k + n]).into_owned();
        k += n;
        while s.get(k) == Some(&b' ') {
            k += 1;
        }
        if s.get(k) != Some(&b'=') || s.get(k + 1) != Some(&b'"') {
            return Err(Refused::Syntax("`=\"` expected after a label name"));
        }
        k += 2;
        let mut v: Vec<u8> = Vec::new();
        let mut long = false;
        loop {
            match s.get(k) {
                None => return Err(Refused::Syntax("unclosed label value")),
                Some(b'"') => break,
                Some(b'\\') => {
                    let c = match s.get(k + 1) {
                        Some(b'n') => b'\n',
                        Some(&c) => c,
                        None => return Err(Refused::Syntax("unclosed label value")),
                    };
                    if v.len() < lim.label_bytes {
                        v.push(c);
                    } else {
                        long = true;
                    }
                    k += 2;
                }
                Some(&c) => {
                    if v.len() < lim.label_bytes {
                        v.push(c);
                    } else {
                        long = true;
                    }
                    k += 1;
                }
            }
        }
        k += 1;
        if long {
            return Err(Refused::TooLong);
        }
        if out.len() >= lim.labels {
            return Err(Refused::TooLong);
        }
        out.push((name, String::from_utf8_lossy(&v).into_owned()));
    }
}

/// Where the `name{labels}` of a sample line ends: the name, then a `{...}` whose `}` is outside
/// quotes. Allocates nothing (the key is parsed once per distinct text, [`parse_key`]).
fn key_end(s: &[u8]) -> Result<usize, Refused> {
    let n = name_len(s);
    if n == 0 {
        return Err(Refused::Syntax("a metric name expected"));
    }
    if s.get(n) != Some(&b'{') {
        return Ok(n);
    }
    let (mut k, mut quoted) = (n + 1, false);
    while let Some(&b) = s.get(k) {
        match (b, quoted) {
            (b'\\', true) => k += 1,
            (b'"', _) => quoted = !quoted,
            (b'}', false) => return Ok(k + 1),
            _ => {}
        }
        k += 1;
    }
    Err(Refused::Syntax("unclosed `{`"))
}

/// One sample line (not a comment): its key text (`name{labels}`), value and timestamp.
pub(crate) fn split_sample(line: &str) -> Result<(&str, f64, Option<i64>), Refused> {
    let k = key_end(line.as_bytes())?;
    let rest = line.get(k..).unwrap_or_default();
    if !rest.starts_with([' ', '\t']) {
        return Err(Refused::Syntax("a space and a value expected after the name"));
    }
    let mut words = rest.split_whitespace();
    let value = words.next().ok_or(Refused::Syntax("no value"))?;
    let value = float(value).ok_or(Refused::Syntax("the value is not a number"))?;
    let ts_ns = match words.next() {
        None => None,
        Some(t) => Some(super::millis_to_ns(t).ok_or(Refused::Time)?),
    };
    if words.next().is_some() {
        return Err(Refused::Syntax("more than a value and a timestamp after the name"));
    }
    if !value.is_finite() {
        return Err(Refused::Number);
    }
    Ok((line.get(..k).unwrap_or_default(), value, ts_ns))
}

/// The name and labels of a key text.
pub(crate) fn parse_key(key: &str, lim: &Limits) -> Result<SeriesKey, Refused> {
    let s = key.as_bytes();
    let n = name_len(s);
    if n == 0 {
        return Err(Refused::Syntax("a metric name expected"));
    }
    if n > lim.label_bytes {
        return Err(Refused::TooLong);
    }
    let mut labels = Vec::new();
    if s.get(n) == Some(&b'{') {
        labels = self::labels(&s[n..], lim)?.0;
    }
    labels.sort();
    Ok(SeriesKey { name: key[..n].to_string(), labels })
}

/// Unix seconds a scrape loop wrote before a scrape (module docs), if `line` is one.
fn scrape_time(line: &str) -> Option<i64> {
    let body = line.strip_prefix('#').unwrap_or(line).trim();
    if body.starts_with("HELP ") || body.starts_with("TYPE ") || body.starts_with("EOF") {
        return None;
    }
    let last = body.split_whitespace().last()?;
    let ns = super::seconds_to_ns(last)?;
    (ns >= 1_000_000_000_000_000_000).then_some(ns)
}

/// Reads a whole file of Prometheus text.
pub fn read(file: &str, bytes: &[u8], lim: &Limits) -> Result<super::Read, ReadError> {
    let mut tally = Tally::new(file);
    let mut out = Read::default();
    let mut scrape: Option<i64> = None;
    let mut offset = 0u64;
    let mut good = 0u64;
    // A key's text → its index in `out.keys` (each distinct text parsed once).
    let mut seen: std::collections::HashMap<String, u32> = Default::default();
    let mut first_bad: Option<(u64, &'static str)> = None;
    for raw in bytes.split(|b| *b == b'\n') {
        let at = offset;
        offset += raw.len() as u64 + 1;
        let line = String::from_utf8_lossy(raw);
        let line = line.trim();
        if line.is_empty() {
            continue;
        }
        if let Some(t) = scrape_time(line) {
            scrape = Some(t);
            continue;
        }
        if let Some(c) = line.strip_prefix('#') {
            let c = c.trim_start();
            if let Some(t) = c.strip_prefix("TYPE ") {
                let mut w = t.split_whitespace();
                if let (Some(n), Some(k)) = (w.next(), w.next()) {
                    if !out.types.iter().any(|(m, _)| m == n) && n.len() <= lim.label_bytes {
                        out.types.push((n.to_string(), k.to_string()));
                    }
                }
            }
            continue;
        }
        if out.len() >= lim.samples {
            tally.add(DiagKind::TooMany, Some(at), || {
                format!("more than {} samples; the rest skipped", lim.samples)
            });
            break;
        }
        let parsed = split_sample(line).and_then(|(text, value, ts)| {
            let key = match seen.get(text) {
                Some(&k) => k,
                None => {
                    let k = out.add_key(parse_key(text, lim)?);
                    seen.insert(text.to_string(), k);
                    k
                }
            };
            Ok((key, value, ts))
        });
        match parsed {
            Ok((key, value, ts)) => {
                good += 1;
                out.push(key, ts.or(scrape), value);
            }
            Err(Refused::Number) => {
                tally.add(DiagKind::BadNumber, Some(at), || "NaN or ±Inf value skipped".into())
            }
            Err(Refused::Time) => tally.add(DiagKind::BadTime, Some(at), || {
                "a timestamp that is not integer ms within ±4·10^18 ns".into()
            }),
            Err(Refused::TooLong) => tally.add(DiagKind::TooLong, Some(at), || {
                format!("a name or label value over {} bytes, or over {} labels", lim.label_bytes, lim.labels)
            }),
            Err(Refused::Syntax(why)) => {
                first_bad.get_or_insert((at, why));
                tally.add(DiagKind::BadLine, Some(at), || format!("not a sample: {why}"));
            }
        }
    }
    if good == 0 {
        let (at, why) = first_bad.unwrap_or((0, "no sample line"));
        return Err(ReadError {
            file: file.to_string(),
            format: Some(super::Format::PromText),
            offset: at,
            message: why.to_string(),
        });
    }
    let untimed = out.ts_ns.iter().filter(|t| t.is_none()).count();
    if untimed > 0 {
        tally.add(DiagKind::NoTime, None, || {
            format!("{untimed} samples carry no timestamp and follow no scrape-time line (`# <unix seconds>`): they cannot be placed in time")
        });
    }
    out.diagnostics = tally.finish();
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_dcgm_exporter_sample_reads() {
        let line = r#"DCGM_FI_PROF_SM_ACTIVE{gpu="0",UUID="GPU-1",device="nvidia0",modelName="NVIDIA H100 80GB HBM3",Hostname="node-1",esc="a\"b}\\c"} 0.42 1716400000123"#;
        let (text, value, ts) = split_sample(line).unwrap_or_else(|e| panic!("{e:?}"));
        let s = parse_key(text, &Limits::default()).unwrap_or_else(|e| panic!("{e:?}"));
        assert_eq!(s.name, "DCGM_FI_PROF_SM_ACTIVE");
        assert_eq!(value, 0.42);
        assert_eq!(ts, Some(1_716_400_000_123_000_000));
        assert!(s.labels.contains(&("Hostname".into(), "node-1".into())));
        assert!(s.labels.contains(&("esc".into(), "a\"b}\\c".into())));
    }

    #[test]
    fn scrapes_take_the_loop_s_time_and_bad_lines_are_counted() {
        let text = "# 1716400000.5\nm{gpu=\"0\"} 1\nbroken{ 2\n# scrape 1716400001.5\nm{gpu=\"0\"} 2\nm{gpu=\"0\"} NaN\n";
        let r = read("f", text.as_bytes(), &Limits::default()).unwrap_or_else(|e| panic!("{e}"));
        let ts: Vec<_> = r.samples().map(|s| s.ts_ns).collect();
        assert_eq!(ts, [Some(1_716_400_000_500_000_000), Some(1_716_400_001_500_000_000)]);
        let kinds: Vec<_> = r.diagnostics.iter().map(|d| (d.kind, d.first_offset)).collect();
        assert_eq!(kinds, [(DiagKind::BadLine, Some(28)), (DiagKind::BadNumber, Some(73))]);
    }

    #[test]
    fn hostile_input_is_refused_by_its_size_not_by_its_claims() {
        let lim = Limits::default();
        let huge = format!("m{{gpu=\"0\",x=\"{}\"}} 1\n", "a".repeat(10 << 20));
        let billion = "m{gpu=\"1000000000\",Hostname=\"h\"} 1 1716400000000\n";
        let nums = "m{gpu=\"0\"} 1e400 1716400000000\nm{gpu=\"0\"} 1 99999999999999999999999\n";
        let text = format!("{huge}{billion}{nums}");
        let r = read("hostile.prom", text.as_bytes(), &lim).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(r.len(), 1, "only the billion-GPU sample is a sample");
        let kinds: Vec<_> = r.diagnostics.iter().map(|d| d.kind).collect();
        assert!(kinds.contains(&DiagKind::TooLong) && kinds.contains(&DiagKind::BadTime), "{kinds:?}");
        // 1e400 is +Inf as a float: a bad number.
        assert!(kinds.contains(&DiagKind::BadNumber), "{kinds:?}");
        let e = read("bin.prom", b"\x00\x01\x02 garbage\n", &lim).err().unwrap_or_else(|| panic!("read"));
        assert_eq!((e.offset, e.format), (0, Some(super::super::Format::PromText)));
        assert!(
            e.to_string().starts_with("bin.prom: not a cluster metrics file (prometheus_text) at byte 0"),
            "{e}"
        );
    }
}
