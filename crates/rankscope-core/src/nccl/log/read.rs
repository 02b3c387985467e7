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
    let mut lf = LogFile {
        name: file.to_string(),
        lines: 0,
        nccl_lines: 0,
        elided_lines: 0,
        has_perf_table: false,
        job_end: None,
    };
    // The warning a following continuation/trace line may belong to: index into st.warnings,
    // the line it was last extended at.
    let mut open_warn: BTreeMap<(String, u64), (usize, u32)> = BTreeMap::new();
    let mut last_warn_for_continuation: Option<(usize, u32)> = None;
    // nccl-tests banner ranks seen in this file: (rank, host, pid, dev, line).
    let mut banner_ranks: Vec<(u32, String, u64, i64, u32)> = Vec::new();
    // NCCL lines whose `HOST:PID:TID [DEV]` header could not be found: (count, first line).
    let mut headless: (u32, u32) = (0, 0);
    // Teardown: the file's last line of work and the lines that say the job ended.
    let mut last_work: u32 = 0;
    let mut end_markers: Vec<EvidenceLine> = Vec::new();
    // RCCL's banner continues on unprefixed lines (`HIP version  : ..`): whose it is, and the
    // line it was last extended at.
    let mut banner: Option<(BannerOwner, u32)> = None;
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
            // `NCCL version 2.9.9+cuda11.2` printed without a header by older nccl-tests runs;
            // RCCL's banner on stdout (`RCCL version : 2.27.7-HEAD:0d2c4fd`).
            if let Some(v) = parse_version_banner(&line) {
                if !v.version.is_empty() {
                    lf.nccl_lines += 1;
                    st.loose_versions.push(LooseVersion {
                        launcher_rank: launcher_rank(&line),
                        version: v.version,
                        cuda: v.cuda,
                        rccl: v.rccl,
                        rccl_build: v.rccl_build,
                        hip: None,
                        rocm: None,
                        host: None,
                        ev: EvidenceLine::new(file, n, &raw),
                    });
                    if v.rccl {
                        banner = Some((BannerOwner::Loose(st.loose_versions.len() - 1), n));
                    }
                }
                continue;
            }
            if let Some((owner, at)) = banner.clone() {
                if n <= at.saturating_add(3) {
                    if let Some((key, value)) = banner_field(&line) {
                        banner_set(st, &owner, key, value);
                        banner = Some((owner, n));
                        continue;
                    }
                }
            }
            if is_work_text(&line) {
                last_work = n;
            } else if is_end_text(&line) {
                end_markers.push(EvidenceLine::new(file, n, &raw));
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
        let life_key = (file.to_string(), h.host.to_string(), h.pid);
        if h.level == Level::Warn {
            if h.msg.contains("GDR disabled on GDR-supported instance type") {
                st.ev_gdr_required.push(EvidenceLine::new(file, n, &raw));
            }
            open_warning(st, &life_key);
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
                teardown: false,
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
                    open_warning(st, &life_key);
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
                        teardown: false,
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
        match line_life(h.msg) {
            Life::Work => {
                last_work = n;
                let life = st.lives.entry(life_key).or_default();
                life.last_work = n;
                life.pending.clear();
            }
            Life::Destroy { orderly } => {
                let life = st.lives.entry(life_key).or_default();
                life.destroys.push((n, orderly, EvidenceLine::new(file, n, &raw)));
                for wi in std::mem::take(&mut life.pending) {
                    if let Some(m) = st.warn_meta.get_mut(wi) {
                        m.before_orderly_destroy = orderly;
                    }
                }
            }
            Life::Teardown => {}
            Life::Other => {
                if let Some(life) = st.lives.get_mut(&life_key) {
                    life.pending.clear();
                }
            }
        }
        if h.msg.starts_with("RCCL version") {
            banner = Some((BannerOwner::Process(key.0.clone(), key.1), n));
        }
        info_line(st, &h, file, n, &raw);
    }
    // The job's end: the first end marker after the last line of work.
    lf.job_end = end_markers.into_iter().find(|e| e.line > last_work);
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

/// Whose RCCL banner the unprefixed lines after it continue.
#[derive(Debug, Clone)]
pub(super) enum BannerOwner {
    Process(String, u64),
    Loose(usize),
}

/// A version banner: `NCCL version 2.26.5+cuda12.9`, `RCCL version : 2.27.7-HEAD:0d2c4fd`,
/// `RCCL version 2.13.4+hip5.4 HEAD:6e8e4d1`, or an RCCL built as `NCCL version 2.8.4+hip`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct VersionBanner {
    pub version: String,
    pub cuda: Option<String>,
    pub rccl: bool,
    pub rccl_build: Option<String>,
}

/// Finds a version banner anywhere in `text` (after an MPI tag, in an `NCCL INFO` message).
pub(super) fn parse_version_banner(text: &str) -> Option<VersionBanner> {
    if let Some(p) = text.find("RCCL version") {
        let rest = text.get(p + "RCCL version".len()..).unwrap_or("");
        let rest = rest.trim_start().trim_start_matches(':').trim();
        // `2.27.7-HEAD:0d2c4fd`, `2.13.4+hip5.4 HEAD:6e8e4d1`.
        let end = rest.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(rest.len());
        let version = rest.get(..end).unwrap_or("").trim_end_matches('.').to_string();
        let build = rest.get(end..).unwrap_or("").trim_start_matches(['-', '+']).trim();
        return Some(VersionBanner {
            version,
            cuda: None,
            rccl: true,
            rccl_build: (!build.is_empty()).then(|| build.chars().take(80).collect()),
        });
    }
    let p = text.find("NCCL version ")?;
    let v = text.get(p + "NCCL version ".len()..).unwrap_or("");
    let (version, cuda) = split_version(v);
    let hip = v
        .split_whitespace()
        .next()
        .and_then(|t| t.split_once('+'))
        .map(|x| x.1)
        .filter(|b| b.starts_with("hip"));
    Some(VersionBanner { version, cuda, rccl: hip.is_some(), rccl_build: hip.map(str::to_string) })
}

/// `HIP version  : 7.2.26015-fc0010cf6a` → (`HIP version`, value): the lines of RCCL's banner.
pub(super) fn banner_field(line: &str) -> Option<(&'static str, String)> {
    let (k, v) = line.split_once(" : ").or_else(|| line.split_once(": "))?;
    let k = k.trim();
    let key =
        ["HIP version", "ROCm version", "Hostname", "Librccl path"].into_iter().find(|x| k.ends_with(x))?;
    let v = v.trim();
    (!v.is_empty()).then(|| (key, v.chars().take(120).collect()))
}

fn banner_set(st: &mut State, owner: &BannerOwner, key: &str, value: String) {
    match owner {
        BannerOwner::Process(host, pid) => {
            if let Some(p) = st.procs.get_mut(&(host.clone(), *pid)) {
                match key {
                    "HIP version" => p.hip_version = Some(value),
                    "ROCm version" => p.rocm_version = Some(value),
                    _ => {}
                }
            }
        }
        BannerOwner::Loose(i) => {
            if let Some(v) = st.loose_versions.get_mut(*i) {
                match key {
                    "HIP version" => v.hip = Some(value),
                    "ROCm version" => v.rocm = Some(value),
                    // The short name: `mi308-e06-01.prov.example.com` → `mi308-e06-01`, as NCCL
                    // prints hosts.
                    "Hostname" => v.host = value.split('.').next().map(str::to_string),
                    _ => {}
                }
            }
        }
    }
}

/// A new warning of a process: it waits for the process's next line (an orderly destroy next
/// makes it part of the destroy), and remembers a destroy the process already went through.
fn open_warning(st: &mut State, life_key: &(String, String, u64)) {
    let wi = st.warnings.len();
    let life = st.lives.entry(life_key.clone()).or_default();
    life.pending.push(wi);
    let after_destroy = life.destroys.last().map(|d| d.0);
    st.warn_meta.push(WarnMeta { before_orderly_destroy: false, after_destroy });
}

/// What an `NCCL INFO` message is to the teardown rules.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Life {
    /// Work: a collective (`opCount`), a communicator init, rings and trees being connected.
    Work,
    /// A communicator destroyed (`- Destroy COMPLETE`: orderly) or aborted (`- Abort START`,
    /// `- Abort COMPLETE`, `Revoke`).
    Destroy {
        orderly: bool,
    },
    /// Lines NCCL writes while shutting down (`[Service thread] Connection closed by localRank`,
    /// plugins closing or unloading, buffers cleaned up).
    Teardown,
    Other,
}

pub(super) fn line_life(msg: &str) -> Life {
    if msg.contains("Destroy COMPLETE") {
        Life::Destroy { orderly: true }
    } else if msg.contains("Abort START") || msg.contains("Abort COMPLETE") || msg.contains("Revoke") {
        Life::Destroy { orderly: false }
    } else if msg.contains("opCount")
        || msg.contains("Init START")
        || msg.contains("Init COMPLETE")
        || msg.starts_with("Connected all rings")
        || msg.starts_with("Connected all trees")
        || msg.starts_with("Connected binomial trees")
        || msg.starts_with("Connected NVLS")
    {
        Life::Work
    } else if msg.contains("Connection closed by localRank")
        || msg.contains("Closing")
        || msg.contains("Unloading")
        || msg.starts_with("Cleanup buffer")
        || msg.contains("still active at")
    {
        Life::Teardown
    } else {
        Life::Other
    }
}

/// Lines of a benchmark at work (a result row, a run's banner or device lines).
fn is_work_text(line: &str) -> bool {
    let body = line.split_once('#').map(|x| x.1.trim_start());
    if let Some(b) = body {
        if b.starts_with("nThread") || b.starts_with("Collective test starting") || b.starts_with("Rank ") {
            return true;
        }
    }
    crate::nccl::perf::is_result_row(line)
}

/// What training frameworks and benchmarks print when a job is over, lower case. Sources:
/// Hugging Face Trainer's final metrics (`{'train_runtime': ...}`), PyTorch Lightning
/// (`` `Trainer.fit` stopped``), Megatron-LM (`[after training is done]`), example and
/// tutorial scripts (`Training completed`, `training finished`), nccl-tests / rccl-tests
/// (`# Collective test concluded`, `# Avg bus bandwidth`, printed after the last result).
pub(super) const JOB_END_PHRASES: [&str; 11] = [
    "training finished",
    "training job finished",
    "finished training",
    "training completed",
    "training complete",
    "training is done",
    "training done",
    "done training",
    "after training is done",
    "'train_runtime'",
    "`trainer.fit` stopped",
];

fn is_end_text(line: &str) -> bool {
    if let Some(b) = line.split_once('#').map(|x| x.1.trim_start()) {
        if b.starts_with("Collective test concluded") || b.starts_with("Avg bus bandwidth") {
            return true;
        }
    }
    let lower = line.to_ascii_lowercase();
    JOB_END_PHRASES.iter().any(|p| lower.contains(p))
}
