//! Prometheus range exports: the HTTP API's JSON and a CSV.
//!
//! **JSON** (prometheus.io/docs/prometheus/latest/querying/api, "Range queries"):
//! `curl 'prom:9090/api/v1/query_range?query=DCGM_FI_PROF_SM_ACTIVE&start=…&end=…&step=1s'`
//! answers `{"status":"success","data":{"resultType":"matrix","result":[{"metric":{…},
//! "values":[[1716400000.5,"0.42"],…]}]}}`: times are Unix seconds (a JSON number), values
//! strings. An instant query (`resultType` `vector`, one `"value"` per series) reads too.
//!
//! **CSV** (what a dashboard's "download CSV" or a short script writes): a header whose first
//! cell is `time` / `Time` / `timestamp` and whose other cells are series selectors
//! (`DCGM_FI_PROF_SM_ACTIVE{gpu="0",Hostname="node00"}`, quoted as CSV quotes: `""` inside
//! `"…"`); then one row per time, in Unix seconds (below 10^11) or ms, an empty cell for no
//! value.

use super::{DiagKind, Format, Limits, Read, ReadError, SeriesKey, Tally};

fn err(file: &str, format: Format, offset: u64, message: impl Into<String>) -> ReadError {
    ReadError { file: file.to_string(), format: Some(format), offset, message: message.into() }
}

/// Byte offset of a 1-based line and column.
fn offset_of(bytes: &[u8], line: usize, col: usize) -> u64 {
    let mut at = 0usize;
    for (k, l) in bytes.split(|b| *b == b'\n').enumerate() {
        if k + 1 == line {
            return (at + col.saturating_sub(1)) as u64;
        }
        at += l.len() + 1;
    }
    at as u64
}

/// A time the API wrote (seconds as a JSON number or string).
fn api_time(v: &serde_json::Value) -> Option<i64> {
    match v {
        serde_json::Value::Number(n) => super::seconds_to_ns(&n.to_string()),
        serde_json::Value::String(s) => super::seconds_to_ns(s),
        _ => None,
    }
}

/// Reads a `query_range` / `query` JSON answer.
pub fn read_json(file: &str, bytes: &[u8], lim: &Limits) -> Result<Read, ReadError> {
    let v: serde_json::Value = serde_json::from_slice(bytes).map_err(|e| {
        err(file, Format::PromJson, offset_of(bytes, e.line(), e.column()), format!("not JSON: {e}"))
    })?;
    if v["status"] != "success" {
        let why = v["error"].as_str().unwrap_or("no error given");
        return Err(err(
            file,
            Format::PromJson,
            0,
            format!("the API answered status {} ({why})", v["status"]),
        ));
    }
    let result = v["data"]["result"]
        .as_array()
        .ok_or_else(|| err(file, Format::PromJson, 0, "no `data.result` array"))?;
    let mut tally = Tally::new(file);
    let mut out = Read::default();
    for r in result {
        let Some(metric) = r["metric"].as_object() else {
            tally.add(DiagKind::BadLine, None, || "a result without `metric`".into());
            continue;
        };
        let name = metric.get("__name__").and_then(|n| n.as_str()).unwrap_or_default().to_string();
        let mut labels: Vec<(String, String)> = Vec::new();
        let mut long = false;
        for (k, val) in metric {
            let val = val.as_str().unwrap_or_default();
            if k.len() > lim.label_bytes || val.len() > lim.label_bytes {
                long = true;
            }
            if k != "__name__" {
                labels.push((k.clone(), val.to_string()));
            }
        }
        if long || labels.len() > lim.labels || name.is_empty() {
            tally.add(DiagKind::TooLong, None, || {
                "a series with a label over the limit, too many labels or no `__name__`".into()
            });
            continue;
        }
        labels.sort();
        let key = out.add_key(SeriesKey { name, labels });
        let points: Vec<&serde_json::Value> = match r["values"].as_array() {
            Some(a) => a.iter().collect(),
            None => r.get("value").into_iter().collect(),
        };
        for p in points {
            let (Some(t), Some(x)) = (p.get(0), p.get(1)) else {
                tally.add(DiagKind::BadLine, None, || "a point that is not [time, \"value\"]".into());
                continue;
            };
            let Some(ts) = api_time(t) else {
                tally.add(DiagKind::BadTime, None, || {
                    "a time that is not Unix seconds within ±4·10^18 ns".into()
                });
                continue;
            };
            let Some(x) = x.as_str().and_then(super::prom::float).filter(|x| x.is_finite()) else {
                tally.add(DiagKind::BadNumber, None, || "a value that is not a finite number".into());
                continue;
            };
            if out.len() >= lim.samples {
                tally.add(DiagKind::TooMany, None, || {
                    format!("more than {} samples; the rest skipped", lim.samples)
                });
                break;
            }
            out.push(key, Some(ts), x);
        }
    }
    out.diagnostics = tally.finish();
    Ok(out)
}

/// The cells of one CSV line (RFC 4180 quoting).
fn cells(line: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut cur = String::new();
    let mut quoted = false;
    let mut chars = line.chars().peekable();
    while let Some(c) = chars.next() {
        match (c, quoted) {
            ('"', true) if chars.peek() == Some(&'"') => {
                cur.push('"');
                chars.next();
            }
            ('"', _) => quoted = !quoted,
            (',', false) => out.push(std::mem::take(&mut cur)),
            _ => cur.push(c),
        }
    }
    out.push(cur);
    out
}

/// The header's series cells, if `line` is a CSV export's header.
pub(crate) fn csv_header(line: &str) -> Option<Vec<String>> {
    let c = cells(line.trim());
    let first = c.first()?.trim().to_ascii_lowercase();
    (c.len() >= 2 && matches!(first.as_str(), "time" | "timestamp" | "ts")).then(|| c[1..].to_vec())
}

/// Reads a wide CSV export.
pub fn read_csv(file: &str, bytes: &[u8], lim: &Limits) -> Result<Read, ReadError> {
    let mut tally = Tally::new(file);
    let mut out = Read::default();
    // Per column after the time: the series' key (`None`: a column not read).
    let mut series: Vec<Option<u32>> = Vec::new();
    let mut offset = 0u64;
    let mut header = false;
    for raw in bytes.split(|b| *b == b'\n') {
        let at = offset;
        offset += raw.len() as u64 + 1;
        let line = String::from_utf8_lossy(raw);
        let line = line.trim();
        if line.is_empty() {
            continue;
        }
        if !header {
            let Some(h) = csv_header(line) else {
                return Err(err(file, Format::PromCsv, at, "no `time,<series>...` header"));
            };
            for sel in h {
                let s = sel.trim();
                let n = s.find('{').unwrap_or(s.len());
                let name = s[..n].to_string();
                let labels = if n < s.len() {
                    match super::prom::labels(&s.as_bytes()[n..], lim) {
                        Ok((mut l, _)) => {
                            l.sort();
                            l
                        }
                        Err(_) => {
                            tally.add(DiagKind::BadLine, Some(at), || {
                                "a header cell that is not a series selector".into()
                            });
                            series.push(None);
                            continue;
                        }
                    }
                } else {
                    Vec::new()
                };
                let ok = !name.is_empty() && name.len() <= lim.label_bytes;
                series.push(ok.then(|| out.add_key(SeriesKey { name, labels })));
            }
            header = true;
            continue;
        }
        let c = cells(line);
        let Some(t) = c.first().map(|t| t.trim()) else { continue };
        // Seconds below 10^11 (year 5138), else ms.
        let secs = t.split('.').next().is_some_and(|i| i.len() <= 11);
        let ts = if secs { super::seconds_to_ns(t) } else { super::millis_to_ns(t) };
        let Some(ts) = ts else {
            tally.add(DiagKind::BadTime, Some(at), || "a time that is not Unix seconds or ms".into());
            continue;
        };
        for (k, v) in c.iter().skip(1).enumerate() {
            let Some(&Some(key)) = series.get(k) else { continue };
            let v = v.trim();
            if v.is_empty() {
                continue;
            }
            let Some(x) = super::prom::float(v).filter(|x| x.is_finite()) else {
                tally.add(DiagKind::BadNumber, Some(at), || "a cell that is not a finite number".into());
                continue;
            };
            if out.len() >= lim.samples {
                tally.add(DiagKind::TooMany, Some(at), || {
                    format!("more than {} samples; the rest skipped", lim.samples)
                });
                break;
            }
            out.push(key, Some(ts), x);
        }
    }
    out.diagnostics = tally.finish();
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_query_range_answer_reads() {
        let j = br#"{"status":"success","data":{"resultType":"matrix","result":[{"metric":{"__name__":"DCGM_FI_PROF_SM_ACTIVE","gpu":"0","Hostname":"node00"},"values":[[1716400000.5,"0.42"],[1716400001,"NaN"]]}]}}"#;
        let r = read_json("q.json", j, &Limits::default()).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(r.len(), 1);
        assert_eq!(r.ts_ns[0], Some(1_716_400_000_500_000_000));
        assert_eq!(r.diagnostics[0].kind, DiagKind::BadNumber);
        let bad = read_json("q.json", b"{\"status\":\"success\",\n \"data\": [}", &Limits::default());
        assert_eq!(bad.err().map(|e| e.offset), Some(31));
    }

    #[test]
    fn a_csv_export_reads_with_quoted_selectors() {
        let c = "time,\"DCGM_FI_DEV_SM_CLOCK{gpu=\"\"3\"\",Hostname=\"\"node00\"\"}\",other\n1716400000,1410,\n1716400001000,,2\n";
        let r = read_csv("c.csv", c.as_bytes(), &Limits::default()).unwrap_or_else(|e| panic!("{e}"));
        let got: Vec<_> = r.samples().map(|s| (s.key.name.as_str(), s.ts_ns, s.value)).collect();
        assert_eq!(
            got,
            [
                ("DCGM_FI_DEV_SM_CLOCK", Some(1_716_400_000_000_000_000), 1410.0),
                ("other", Some(1_716_400_001_000_000_000), 2.0)
            ]
        );
        assert!(r.keys[0].labels.contains(&("gpu".into(), "3".into())));
    }
}
