//! `dcgmi dmon -e 1002,1004,1005 -d 1000` output: a header naming each field by its short
//! column name, a units line, then one row per entity every `-d` milliseconds:
//!
//! ```text
//! #Entity   SMACT        TENSO        DRAMA
//! ID
//! GPU 0     0.512        0.201        0.300
//! GPU 1     0.498        0.197        0.291
//! GPU 0     0.515        0.203        0.302
//! ```
//!
//! **Time.** dmon prints no time and no host (its options are the fields `-e` / `-f`, the
//! entities `-i` / `-g`, the delay `-d` in ms and the count `-c`: docs.nvidia.com/datacenter/dcgm,
//! `dcgmi dmon`). Rows are grouped into blocks (a block ends when an entity of it comes again);
//! block k is placed at `start + k · delay` from [`DmonPlace`], which the caller knows (when the
//! command was started, the `-d` it was given, the host it ran on). Unplaced rows are read and
//! said (`no_time`), never guessed onto the job. A line may carry its own time: Unix seconds
//! before it, as moreutils' `ts '%.s'` or a shell loop (`while read l; do echo "$(date +%s.%N)
//! $l"; done`) writes them; a row so stamped is placed at its stamp (when dmon printed it, its
//! read a few ms before), whatever the start and delay say. The header may repeat; `N/A`
//! values are skipped.

use super::{DiagKind, DmonPlace, Format, Limits, Read, ReadError, SeriesKey, Tally};

/// The DCGM field each known short column name shows (`dcgmi dmon -l` lists them).
const COLUMNS: &[(&str, &str)] = &[
    ("SMACT", "DCGM_FI_PROF_SM_ACTIVE"),
    ("TENSO", "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE"),
    ("DRAMA", "DCGM_FI_PROF_DRAM_ACTIVE"),
    ("GRACT", "DCGM_FI_PROF_GR_ENGINE_ACTIVE"),
    ("SMOCC", "DCGM_FI_PROF_SM_OCCUPANCY"),
    ("SMCLK", "DCGM_FI_DEV_SM_CLOCK"),
    ("POWER", "DCGM_FI_DEV_POWER_USAGE"),
    ("GPUTL", "DCGM_FI_DEV_GPU_UTIL"),
    ("NVLTX", "DCGM_FI_PROF_NVLINK_TX_BYTES"),
    ("NVLRX", "DCGM_FI_PROF_NVLINK_RX_BYTES"),
];

/// Whether `line` is dmon's header (`#Entity  SMACT ...`, `# Entity ...`), stamped or not.
pub(crate) fn is_header(line: &str) -> bool {
    unstamped(line).1.strip_prefix('#').is_some_and(|r| r.trim_start().starts_with("Entity"))
}

/// A line's own time, where Unix seconds (2001 to 2096, `1733550000.123456`) and a space come
/// before it, in ns; and the rest of the line.
fn unstamped(line: &str) -> (Option<i64>, &str) {
    let Some((first, rest)) = line.split_once(char::is_whitespace) else { return (None, line) };
    let (secs, frac) = first.split_once('.').unwrap_or((first, ""));
    let digits = |t: &str| t.bytes().all(|b| b.is_ascii_digit());
    if secs.len() != 10 || frac.len() > 9 || !digits(secs) || !digits(frac) {
        return (None, line);
    }
    // Exact, in integers: ten digits of seconds fit, and nine of their fraction.
    let s: i64 = secs.parse().unwrap_or(0);
    let ns: i64 = format!("{frac:0<9}").parse().unwrap_or(0);
    if !(1_000_000_000..4_000_000_000).contains(&s) {
        return (None, line);
    }
    (Some(s * 1_000_000_000 + ns), rest.trim_start())
}

/// The metric name a column stands for.
fn metric(col: &str) -> String {
    COLUMNS.iter().find(|(c, _)| *c == col).map_or_else(|| format!("dmon_{col}"), |(_, m)| (*m).to_string())
}

/// Reads a whole dmon table.
pub fn read(file: &str, bytes: &[u8], lim: &Limits, place: &DmonPlace) -> Result<Read, ReadError> {
    let mut tally = Tally::new(file);
    let mut out = Read::default();
    let mut cols: Vec<String> = Vec::new();
    let mut block: Vec<(String, u32)> = Vec::new();
    let mut k: i64 = 0;
    let mut offset = 0u64;
    let time_of = |k: i64| -> Option<i64> {
        let (s, d) = (place.start_ns?, place.delay_ns?);
        s.checked_add(d.checked_mul(k)?).filter(|t| t.abs() <= 4_000_000_000_000_000_000)
    };
    let mut rows = 0u64;
    let mut stamped = 0u64;
    // (column, entity id) → series key.
    let mut keys: std::collections::HashMap<(usize, u32), u32> = Default::default();
    for raw in bytes.split(|b| *b == b'\n') {
        let at = offset;
        offset += raw.len() as u64 + 1;
        let line = String::from_utf8_lossy(raw);
        let (stamp, line) = unstamped(line.trim());
        if line.is_empty() {
            continue;
        }
        if is_header(line) {
            cols = line.trim_start_matches('#').split_whitespace().skip(1).map(metric).collect();
            continue;
        }
        let mut w = line.split_whitespace();
        // The units line (`ID`, `Id  W  MHz`).
        if line.split_whitespace().next().is_some_and(|f| f.eq_ignore_ascii_case("id"))
            || line.starts_with('#')
        {
            continue;
        }
        let (Some(kind), Some(id)) = (w.next(), w.next()) else {
            tally.add(DiagKind::BadLine, Some(at), || "not a dmon row (`GPU 0 v ...`)".into());
            continue;
        };
        let Ok(id) = id.parse::<u32>() else {
            tally.add(DiagKind::BadLine, Some(at), || "an entity id that is not a number".into());
            continue;
        };
        if cols.is_empty() {
            tally.add(DiagKind::BadLine, Some(at), || "a row before any `#Entity` header".into());
            continue;
        }
        let key = (kind.to_string(), id);
        if block.contains(&key) {
            block.clear();
            k += 1;
        }
        block.push(key);
        rows += 1;
        if stamp.is_some() {
            stamped += 1;
        }
        let ts_ns = stamp.or_else(|| time_of(k));
        for (ci, (c, v)) in cols.iter().zip(w).enumerate() {
            if v == "N/A" {
                continue;
            }
            let Some(x) = super::prom::float(v).filter(|x| x.is_finite()) else {
                tally.add(DiagKind::BadNumber, Some(at), || {
                    format!("`{}` is not a number", v.chars().take(32).collect::<String>())
                });
                continue;
            };
            if out.len() >= lim.samples {
                tally.add(DiagKind::TooMany, Some(at), || {
                    format!("more than {} samples; the rest skipped", lim.samples)
                });
                break;
            }
            let k = match keys.get(&(ci, id)) {
                Some(&k) => k,
                None => {
                    let mut labels = vec![("gpu".to_string(), id.to_string())];
                    if let Some(h) = &place.host {
                        labels.push(("Hostname".to_string(), h.clone()));
                    }
                    labels.sort();
                    let k = out.add_key(SeriesKey { name: c.clone(), labels });
                    keys.insert((ci, id), k);
                    k
                }
            };
            out.push(k, ts_ns, x);
        }
    }
    if rows == 0 {
        return Err(ReadError {
            file: file.to_string(),
            format: Some(Format::DcgmDmon),
            offset: 0,
            message: "a `#Entity` header but no `GPU n ...` row".into(),
        });
    }
    if (place.start_ns.is_none() || place.delay_ns.is_none()) && stamped < rows {
        let unplaced = rows - stamped;
        tally.add(DiagKind::NoTime, None, || {
            format!("{unplaced} dmon rows of {rows} in {} blocks are not placed in time: dmon prints no time; give the start (Unix s) and the -d delay, or stamp each line (`dcgmi dmon ... | ts '%.s'`)", k + 1)
        });
    }
    if place.host.is_none() {
        tally.add(DiagKind::Note, None, || {
            "dmon prints no host name and none was given: its GPUs are on no named host".into()
        });
    }
    out.diagnostics = tally.finish();
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stamped_lines_are_placed_at_their_stamps() {
        // `dcgmi dmon -e 1002,100 -d 500 | ts '%.s'`: each line, header and units included,
        // after its Unix seconds.
        let text = "1733550000.100000 #Entity   SMACT  SMCLK\n1733550000.100100 ID\n1733550000.100200 GPU 0  0.5  1980\n1733550000.600300 GPU 0  0.6  1410\n";
        assert_eq!(super::super::sniff(text.as_bytes()), Some(Format::DcgmDmon));
        let r = read("d", text.as_bytes(), &Limits::default(), &DmonPlace::default())
            .unwrap_or_else(|e| panic!("{e}"));
        let ts: Vec<_> = r
            .samples()
            .filter(|s| s.key.name == "DCGM_FI_DEV_SM_CLOCK")
            .map(|s| (s.ts_ns, s.value))
            .collect();
        assert_eq!(
            ts,
            [(Some(1_733_550_000_100_200_000), 1980.0), (Some(1_733_550_000_600_300_000), 1410.0)]
        );
        // Placed: no `no_time`; the host is still unsaid.
        assert!(r.diagnostics.iter().all(|d| d.kind != DiagKind::NoTime), "{:?}", r.diagnostics);
        // A number that is no Unix time is not a stamp: `GPU 0` rows keep their place.
        assert_eq!(unstamped("GPU 0  0.5"), (None, "GPU 0  0.5"));
        assert_eq!(unstamped("12345 GPU 0").0, None);
        assert_eq!(unstamped("1733550000 GPU 0"), (Some(1_733_550_000_000_000_000), "GPU 0"));
    }

    #[test]
    fn blocks_are_placed_from_the_start_and_the_delay() {
        let text = "#Entity   SMACT  TENSO  SMCLK\nID\nGPU 0  0.5  0.1  1980\nGPU 1  0.4  N/A  1980\n#Entity   SMACT  TENSO  SMCLK\nID\nGPU 0  0.6  0.2  1410\nGPU 1  0.3  0.1  x\n";
        let place = DmonPlace { host: Some("node-1".into()), start_ns: Some(1_000), delay_ns: Some(100) };
        let r = read("d", text.as_bytes(), &Limits::default(), &place).unwrap_or_else(|e| panic!("{e}"));
        let ts: Vec<_> = r
            .samples()
            .filter(|s| s.key.name == "DCGM_FI_DEV_SM_CLOCK")
            .map(|s| (s.ts_ns, s.value))
            .collect();
        assert_eq!(ts, [(Some(1_000), 1980.0), (Some(1_000), 1980.0), (Some(1_100), 1410.0)]);
        assert_eq!(r.diagnostics.iter().map(|d| d.kind).collect::<Vec<_>>(), [DiagKind::BadNumber]);
        let unplaced = read("d", text.as_bytes(), &Limits::default(), &DmonPlace::default())
            .unwrap_or_else(|e| panic!("{e}"));
        assert!(unplaced.samples().all(|s| s.ts_ns.is_none()));
        assert!(unplaced.diagnostics.iter().any(|d| d.kind == DiagKind::NoTime));
    }
}
