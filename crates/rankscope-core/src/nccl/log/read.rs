//! One log file, line by line: headers, continuation lines of a warning, the nccl-tests banner's
//! ranks and `NCCL_DEBUG_SUBSYS=...` trace steps, into the job-wide [`State`].

use super::*;

pub(super) fn proc_entry<'a>(st: &'a mut State, h: &Head<'_>, file: &str, n: u32) -> &'a mut NcclProcess {
    st.procs.entry((h.host.to_string(), h.pid)).or_insert_with(|| NcclProcess {
        host: h.host.to_string(),
        pid: h.pid,
        file: file.to_string(),
        first_line: n,
        ..NcclProcess::default()
    })
}

/// One log file into the log's facts, a line at a time: each line's header (process, rank,
/// device), then its kind (INFO, WARN and the trace lines continuing a warning, banners, a perf
/// table). One function because the lines share the state of the warning a continuation
/// belongs to.
pub(super) fn parse_file(st: &mut State, file: &str, bytes: &[u8]) {
    let mut lf =
        LogFile { name: file.to_string(), lines: 0, nccl_lines: 0, elided_lines: 0, has_perf_table: false };
    // The warning a following continuation/trace line may belong to: index into st.warnings,
    // the line it was last extended at.
    let mut open_warn: BTreeMap<(String, u64), (usize, u32)> = BTreeMap::new();
    let mut last_warn_for_continuation: Option<(usize, u32)> = None;
    // nccl-tests banner ranks seen in this file: (rank, host, pid, dev, line).
    let mut banner_ranks: Vec<(u32, String, u64, i64, u32)> = Vec::new();
    // NCCL lines whose `HOST:PID:TID [DEV]` header could not be found: (count, first line).
    let mut headless: (u32, u32) = (0, 0);
    for (n, raw) in lines(bytes) {
        lf.lines = n;
        let line = strip_call_fragments(&raw);
        let trimmed = line.trim();
        if trimmed == "..." || trimmed == "…" || trimmed.ends_with(": ...") {
            lf.elided_lines += 1;
            continue;
        }
        if !lf.has_perf_table && crate::nccl::perf::is_tests_marker(&line) {
            lf.has_perf_table = line.contains("busbw") || line.contains("Avg bus bandwidth");
        }
        let Some(h) = parse_head(&line) else {
            // `NCCL version 2.9.9+cuda11.2` printed without a header by older nccl-tests runs.
            if let Some(p) = line.find("NCCL version ") {
                let v = line.get(p + "NCCL version ".len()..).unwrap_or("");
                let (ver, cuda) = split_version(v);
                if !ver.is_empty() {
                    lf.nccl_lines += 1;
                    let ev = EvidenceLine::new(file, n, &raw);
                    st.loose_versions.push((launcher_rank(&line), ver, cuda, ev));
                }
                continue;
            }
            if line.contains("NCCL INFO") || line.contains("NCCL WARN") {
                if headless.0 == 0 {
                    headless.1 = n;
                }
                headless.0 += 1;
                continue;
            }
            if let Some(rest) = line.split_once('#').map(|x| x.1) {
                let toks: Vec<&str> = rest.split_whitespace().collect();
                if toks.first() == Some(&"Rank") {
                    if let Some(d) = parse_banner_rank(&toks) {
                        banner_ranks.push((d.0, d.1, d.2, d.3, n));
                    }
                }
            }
            // A wrapped WARN message continues on the next unprefixed line.
            if let Some((wi, wl)) = last_warn_for_continuation {
                if n == wl.saturating_add(1) && !trimmed.is_empty() {
                    if let Some(w) = st.warnings.get_mut(wi) {
                        w.continuation.push(trimmed.chars().take(crate::nccl::EVIDENCE_TEXT_MAX).collect());
                    }
                    last_warn_for_continuation = Some((wi, n));
                }
            }
            continue;
        };
        lf.nccl_lines += 1;
        last_warn_for_continuation = None;
        let key = (h.host.to_string(), h.pid);
        let lr = launcher_rank(&line);
        {
            let p = proc_entry(st, &h, file, n);
            p.nccl_lines += 1;
            if p.launcher_rank.is_none() {
                p.launcher_rank = lr;
            }
            if h.tid == h.pid && p.cuda_dev.is_none() {
                p.cuda_dev = h.dev;
            }
        }
        if h.level == Level::Warn {
            let w = NcclWarning {
                host: h.host.to_string(),
                pid: h.pid,
                tid: h.tid,
                file: file.to_string(),
                line: n,
                location: (!h.extra.is_empty()).then(|| h.extra.to_string()),
                message: h.msg.to_string(),
                continuation: Vec::new(),
                trace: Vec::new(),
            };
            st.warnings.push(w);
            let wi = st.warnings.len() - 1;
            open_warn.insert(key.clone(), (wi, n));
            last_warn_for_continuation = Some((wi, n));
            continue;
        }
        // Patched builds insert fields between `[dev]` and `NCCL INFO`.
        if h.extra.is_empty() {
            st.ev_stock.entry(h.host.to_string()).or_insert_with(|| EvidenceLine::new(file, n, &raw));
        } else {
            if let Some(p) = st.procs.get_mut(&key) {
                p.patched_format = true;
            }
            st.ev_patched.entry(h.host.to_string()).or_insert_with(|| EvidenceLine::new(file, n, &raw));
        }
        // Error-return trace: `file.cc:123 -> 6 [note]`.
        if let Some(step) = parse_trace_step(h.msg, n) {
            let recent = open_warn.get(&key).filter(|(_, wl)| n.saturating_sub(*wl) <= 200).map(|x| x.0);
            let wi = match recent {
                Some(wi) => wi,
                None => {
                    st.warnings.push(NcclWarning {
                        host: h.host.to_string(),
                        pid: h.pid,
                        tid: h.tid,
                        file: file.to_string(),
                        line: n,
                        location: None,
                        message: String::new(),
                        continuation: Vec::new(),
                        trace: Vec::new(),
                    });
                    st.warnings.len() - 1
                }
            };
            if let Some(w) = st.warnings.get_mut(wi) {
                w.trace.push(step);
            }
            open_warn.insert(key, (wi, n));
            continue;
        }
        info_line(st, &h, file, n, &raw);
    }
    // Ranks from the nccl-tests banner, where no comm line named them.
    for (rank, host, pid, dev, n) in banner_ranks {
        let exists = st.ranks.values().any(|r| r.rank == rank && r.host == host && r.pid == pid);
        if !exists {
            let comm = "nccl-tests".to_string();
            st.ranks.insert(
                (comm.clone(), rank, host.clone(), pid),
                NcclRank {
                    comm,
                    comm_ptr: None,
                    rank,
                    nranks: None,
                    host,
                    pid,
                    cuda_dev: Some(dev),
                    source: "nccl-tests banner".into(),
                    file: file.to_string(),
                    line: n,
                    ..NcclRank::default()
                },
            );
        }
    }
    if headless.0 > 0 {
        st.diagnostics.push(Diagnostic::in_text(
            DiagKind::LogHeadlessLines,
            format!(
                "{} NCCL line(s) without a `HOST:PID:TID [DEV]` header were skipped (cannot tell which process wrote them)",
                headless.0
            ),
            file,
            Some(headless.1),
        ));
    }
    st.files.push(lf);
}

/// `Rank 3 [Group 0] Pid 98894 on gdr116 device 1 [0x82] ...` → (rank, host, pid, dev).
pub(super) fn parse_banner_rank(toks: &[&str]) -> Option<(u32, String, u64, i64)> {
    let rank = toks.get(1)?.parse().ok()?;
    let mut i = 2;
    if toks.get(i) == Some(&"Group") {
        i += 2;
    }
    if toks.get(i) != Some(&"Pid") || toks.get(i + 2) != Some(&"on") || toks.get(i + 4) != Some(&"device") {
        return None;
    }
    Some((rank, toks.get(i + 3)?.to_string(), toks.get(i + 1)?.parse().ok()?, toks.get(i + 5)?.parse().ok()?))
}

pub(super) fn parse_trace_step(msg: &str, n: u32) -> Option<TraceStep> {
    let (loc, rest) = msg.split_once(" -> ")?;
    let loc = loc.trim();
    let (file, line) = loc.rsplit_once(':')?;
    if file.is_empty()
        || file.contains(char::is_whitespace)
        || !line.chars().all(|c| c.is_ascii_digit())
        || line.is_empty()
    {
        return None;
    }
    let mut it = rest.split_whitespace();
    let code = it.next()?.parse().ok()?;
    let note = it.collect::<Vec<_>>().join(" ");
    Some(TraceStep { line: n, location: loc.to_string(), code, note })
}
