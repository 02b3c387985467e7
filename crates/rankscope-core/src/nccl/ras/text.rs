//! The text report of `ncclras` (every NCCL since 2.24), read from the `printf` formats of
//! `src/ras/client_support.cc` (`rasClientRunInit`, `rasClientRunComms`,
//! `rasClientBreakDownErrors`) and the samples of the RAS documentation; see the parent module.

use std::collections::BTreeMap;

use super::MAX_LISTED;
use super::{is_absence, merge_processes, Problem, Process, RankIssue, RasComm, RasFormat, RasStatus};

#[derive(Clone, Copy, PartialEq)]
enum Section {
    Top,
    Summary,
    Comms,
    Errors,
    Warnings,
}

#[derive(Clone, Copy, PartialEq)]
enum Block {
    None,
    /// `INCOMPLETE`: job processes that sent no data.
    Silent,
    /// `DEAD`: processes declared dead.
    Dead,
    /// `#g-c (hash) INCOMPLETE | ERROR | MISMATCH`, the communicator's index in `comms`.
    Incomplete(usize),
    Error(usize, Problem),
    Mismatch(usize),
    Other,
}

/// A row of the communicators' group table: its comms, ranks per comm, status, errors.
struct Group {
    comms: i64,
    size: i64,
    status: String,
}

pub(super) fn read(name: &str, bytes: &[u8]) -> RasStatus {
    let mut s = RasStatus::new(RasFormat::Text);
    let mut section = Section::Top;
    let mut block = Block::None;
    let mut groups: BTreeMap<i64, Group> = BTreeMap::new();
    let mut by_hash: BTreeMap<String, usize> = BTreeMap::new();
    let mut dead: Vec<Process> = Vec::new();
    let mut silent: Vec<Process> = Vec::new();
    // The error the following `Rank R -- …` lines have (`N ranks reported Remote process error`).
    let mut reported: Option<String> = None;
    for (n, line) in super::super::text::lines(bytes) {
        let indented = line.starts_with(' ') || line.starts_with('\t');
        let t = line.trim();
        if t.is_empty() || t.chars().all(|c| c == '=') {
            continue;
        }
        if !indented {
            match t {
                "Job summary" => (section, block) = (Section::Summary, Block::None),
                "Errors" => (section, block) = (Section::Errors, Block::None),
                "Warnings" => (section, block) = (Section::Warnings, Block::None),
                _ if t.starts_with("Communicators") || t.starts_with("Group     Comms") => {
                    (section, block) = (Section::Comms, Block::None)
                }
                _ if t.starts_with("NCCL version ") => {
                    s.nccl_version = t["NCCL version ".len()..].split_whitespace().next().map(str::to_string);
                }
                _ => {}
            }
        }
        match section {
            Section::Summary => {
                let ints: Vec<i64> = t.split_whitespace().map_while(|w| w.parse().ok()).collect();
                if ints.len() == 5 && t.split_whitespace().count() == 5 && s.nodes.is_none() {
                    (s.nodes, s.processes, s.gpus) =
                        (ints.first().copied(), ints.get(3).copied(), ints.get(4).copied());
                }
            }
            Section::Comms => {
                let w: Vec<&str> = t.split_whitespace().collect();
                let int = |k: usize| w.get(k).and_then(|x| x.parse::<i64>().ok());
                if let (8, Some(g), Some(comms), Some(size)) = (w.len(), int(0), int(1), int(4)) {
                    if int(2).is_some() && groups.len() < MAX_LISTED {
                        let status = w.get(6).map_or(String::new(), |x| x.to_string());
                        groups.insert(g, Group { comms, size, status });
                    }
                }
            }
            Section::Errors | Section::Warnings if !indented => {
                reported = None;
                block = match t {
                    "INCOMPLETE" => Block::Silent,
                    "DEAD" => Block::Dead,
                    _ => match comm_header(t) {
                        Some((label, hash, kind)) => {
                            let k = comm_index(&mut s, &mut by_hash, &groups, label, hash);
                            match kind {
                                "INCOMPLETE" => Block::Incomplete(k),
                                "ERROR" => Block::Error(k, Problem::InitError),
                                "MISMATCH" => Block::Mismatch(k),
                                _ => Block::Other,
                            }
                        }
                        None => Block::Other,
                    },
                };
            }
            Section::Errors | Section::Warnings => {
                if let Some(x) = count_after(t, "Encountered ") {
                    if t.contains("timeout") {
                        s.timeouts = s.timeouts.max(x);
                    }
                }
                match block {
                    Block::Silent | Block::Dead => {
                        let list = if block == Block::Dead { &mut dead } else { &mut silent };
                        if let Some(p) = process(t) {
                            if list.len() < MAX_LISTED {
                                list.push(p);
                            }
                        } else if let Some(x) = leading_count(t) {
                            if block == Block::Dead {
                                s.dead = s.dead.max(x);
                            } else if t.starts_with("Missing communicator data from") || t.contains("process")
                            {
                                s.not_responding = s.not_responding.max(x);
                            }
                        } else if let Some(x) = count_after(t, "Missing communicator data from ") {
                            s.not_responding = s.not_responding.max(x);
                        }
                    }
                    Block::Incomplete(k) => {
                        let Some(c) = s.comms.get_mut(k) else { continue };
                        if let Some(x) = count_after(t, "Missing communicator data from ") {
                            c.missing = c.missing.max(x);
                        } else if let Some(rest) = t.strip_prefix("The missing rank") {
                            // NCCL 2.24: `The missing rank: 21`, `The missing ranks: 3, 5-7`.
                            let rest = rest.trim_start_matches('s').trim_start_matches(':');
                            for r in ranks_of(rest, MAX_LISTED.saturating_sub(c.issues.len())) {
                                c.issues.push(RankIssue {
                                    rank: r,
                                    problem: Problem::Missing,
                                    host: None,
                                    pid: None,
                                    gpu: None,
                                    nvml_gpu: None,
                                    error: None,
                                });
                            }
                        } else if let Some(mut i) = rank_line(t) {
                            // Listed ranks are those whose process did not answer.
                            i.problem = Problem::NotResponding;
                            push(c, i);
                        }
                    }
                    Block::Error(k, problem) => {
                        let Some(c) = s.comms.get_mut(k) else { continue };
                        if t.starts_with("Initialization error") {
                            block = Block::Error(k, Problem::InitError);
                            reported = None;
                        } else if t.starts_with("Asynchronous error") {
                            block = Block::Error(k, Problem::AsyncError);
                            reported = None;
                        } else if let Some(e) = ranks_reported(t) {
                            reported = Some(e);
                        } else if let Some(mut i) = rank_line(t) {
                            i.problem = problem;
                            if i.error.is_none() {
                                i.error = reported.clone();
                            }
                            push(c, i);
                        }
                    }
                    Block::Mismatch(k) => {
                        let Some(c) = s.comms.get_mut(k) else { continue };
                        if t.starts_with("Communicator ranks have different") && c.mismatches.len() < 16 {
                            c.mismatches.push(t.trim_start_matches("Communicator ranks have ").to_string());
                        }
                    }
                    Block::None | Block::Other => {}
                }
            }
            Section::Top => {
                if t.len() > 4096 && s.diagnostics.len() < 64 {
                    s.note(format!(
                        "{name}: line {n}: {} bytes of text outside the report: ignored",
                        t.len()
                    ));
                }
            }
        }
    }
    s.comms_total =
        groups.values().map(|g| g.comms.max(0)).fold(0i64, i64::saturating_add).max(s.comms.len() as i64);
    s.dead_processes = merge_processes(dead);
    s.not_responding_processes = merge_processes(silent);
    s.dead = s.dead.max(s.dead_processes.len() as i64);
    s.not_responding = s.not_responding.max(s.not_responding_processes.len() as i64);
    // A listed rank whose process is declared dead is dead.
    let dead_at: Vec<(String, Option<i64>)> =
        s.dead_processes.iter().map(|p| (p.host.clone(), p.pid)).collect();
    for c in &mut s.comms {
        for i in &mut c.issues {
            if is_absence(i.problem) && i.host.as_ref().is_some_and(|h| dead_at.contains(&(h.clone(), i.pid)))
            {
                i.problem = Problem::Dead;
            }
        }
    }
    if s.comms_total == 0 && groups.is_empty() && s.comms.is_empty() {
        s.note(format!(
            "{name}: no communicator table (`Group  Comms  Nodes …`): RAS gathered no communicator data"
        ));
    }
    s
}

fn push(c: &mut RasComm, i: RankIssue) {
    if let Some(h) = &i.host {
        if c.hosts.len() < MAX_LISTED {
            c.hosts.push(h.clone());
        }
    }
    if c.issues.len() < MAX_LISTED {
        c.issues.push(i);
    }
}

/// `#0-0 (cf264af53edbe986) INCOMPLETE` → (`#0-0`, `0xcf264af53edbe986`, `INCOMPLETE`).
fn comm_header(t: &str) -> Option<(&str, String, &str)> {
    let (label, rest) = t.split_once(' ')?;
    if !label.starts_with('#') {
        return None;
    }
    let rest = rest.trim_start().strip_prefix('(')?;
    let (hash, kind) = rest.split_once(')')?;
    let hash = hash.trim().trim_start_matches("0x");
    if hash.is_empty() || !hash.bytes().all(|b| b.is_ascii_hexdigit()) {
        return None;
    }
    // The JSON writes `0x%lx` (no leading zeros), the text `%016lx`: one spelling.
    let digits = hash.trim_start_matches('0');
    let hash = format!("0x{}", if digits.is_empty() { "0" } else { digits });
    Some((label, hash, kind.trim()))
}

fn comm_index(
    s: &mut RasStatus,
    by_hash: &mut BTreeMap<String, usize>,
    groups: &BTreeMap<i64, Group>,
    label: &str,
    hash: String,
) -> usize {
    if let Some(&k) = by_hash.get(&hash) {
        return k;
    }
    let group = label.trim_start_matches('#').split('-').next().and_then(|g| g.parse::<i64>().ok());
    let g = group.and_then(|g| groups.get(&g));
    s.comms.push(RasComm {
        hash: hash.clone(),
        label: Some(label.to_string()),
        size: g.map(|g| g.size),
        status: g.map(|g| g.status.clone()),
        ..RasComm::default()
    });
    let k = s.comms.len() - 1;
    by_hash.insert(hash, k);
    k
}

/// The number after `prefix` at the start of `t`.
fn count_after(t: &str, prefix: &str) -> Option<i64> {
    let rest = t.strip_prefix(prefix)?;
    rest.split_whitespace().next()?.parse().ok()
}

/// The number `t` starts with (`3 job processes are considered dead …`).
fn leading_count(t: &str) -> Option<i64> {
    t.split_whitespace().next()?.parse().ok()
}

/// `Process 3487984 on node 172.16.64.213 managing GPU 5` (`GPUs 0,1`, `GPU 5 (NVML 7)`).
fn process(t: &str) -> Option<Process> {
    let rest = t.strip_prefix("Process ")?;
    let (pid, rest) = rest.split_once(" on node ")?;
    let (host, gpus) = rest.split_once(" managing GPU")?;
    let gpus = gpus.trim_start_matches('s').trim();
    let cuda = gpus.split(" (").next().unwrap_or_default();
    Some(Process {
        host: host.trim().to_string(),
        pid: pid.trim().parse().ok(),
        gpus: cuda.split(',').filter_map(|g| g.trim().parse().ok()).take(64).collect(),
    })
}

/// `Rank 5 -- GPU 3 managed by process 4242 on node 10.0.0.2`, `Rank 5 reported Remote process
/// error -- GPU …`, `Rank 5 has status INIT -- …`, `Rank 5 -- [process information not found]`.
fn rank_line(t: &str) -> Option<RankIssue> {
    let rest = t.strip_prefix("Rank ")?;
    let (head, tail) = rest.split_once(" -- ")?;
    let (rank, middle) = head.split_once(' ').unwrap_or((head, ""));
    let rank: i64 = rank.trim().parse().ok()?;
    let error = middle.trim().strip_prefix("reported ").map(|e| e.trim().to_string());
    let mut i = RankIssue {
        rank,
        problem: Problem::Missing,
        host: None,
        pid: None,
        gpu: None,
        nvml_gpu: None,
        error,
    };
    if let Some(g) = tail.strip_prefix("GPU ") {
        let (gpu, rest) = g.split_once(" managed by process ").unwrap_or((g, ""));
        let mut gw = gpu.split(" (NVML ");
        i.gpu = gw.next().and_then(|x| x.trim().parse().ok());
        i.nvml_gpu = gw.next().and_then(|x| x.trim_end_matches(')').trim().parse().ok());
        if let Some((pid, host)) = rest.split_once(" on node ") {
            i.pid = pid.trim().parse().ok();
            i.host = Some(host.trim().to_string()).filter(|h| !h.is_empty());
        }
    }
    Some(i)
}

/// `2 ranks reported Remote process error` → `Remote process error`.
fn ranks_reported(t: &str) -> Option<String> {
    let (n, rest) = t.split_once(' ')?;
    n.parse::<i64>().ok()?;
    let rest = rest.strip_prefix("ranks reported ").or_else(|| rest.strip_prefix("rank reported "))?;
    Some(rest.trim().to_string())
}

/// `3, 5-7 9` → 3, 5, 6, 7, 9: at most `cap` ranks (a range is never expanded beyond it).
fn ranks_of(list: &str, cap: usize) -> Vec<i64> {
    let mut out = Vec::new();
    for item in list.split([',', ' ']).map(str::trim).filter(|x| !x.is_empty()) {
        let (a, b) = item.split_once('-').unwrap_or((item, item));
        let (Ok(a), Ok(b)) = (a.trim().parse::<i64>(), b.trim().parse::<i64>()) else { continue };
        let mut r = a;
        while r <= b && out.len() < cap {
            out.push(r);
            r += 1;
        }
        if out.len() >= cap {
            break;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::super::plural;
    use super::*;

    #[test]
    fn lines_of_the_report_are_read_as_printed() {
        let p = process("Process 3487984 on node 172.16.64.213 managing GPUs 0,1 (NVML 2,3)");
        assert_eq!(p, Some(Process { host: "172.16.64.213".into(), pid: Some(3487984), gpus: vec![0, 1] }));
        let r = rank_line("Rank 21 -- GPU 5 (NVML 7) managed by process 3487984 on node 172.16.64.213");
        let r = r.as_ref();
        assert_eq!(
            r.map(|r| (r.rank, r.gpu, r.nvml_gpu, r.pid)),
            Some((21, Some(5), Some(7), Some(3487984)))
        );
        let e = rank_line("Rank 3 reported Remote process error -- [process information not found]");
        assert_eq!(e.and_then(|e| e.error), Some("Remote process error".to_string()));
        assert_eq!(
            comm_header("#0-0 (00cf264af53edbe9) INCOMPLETE").map(|h| h.1),
            Some("0xcf264af53edbe9".into())
        );
        assert_eq!(ranks_of("3, 5-7 9", 100), [3, 5, 6, 7, 9]);
        assert_eq!(ranks_of("0-999999999", 4).len(), 4);
        assert_eq!(plural(2, "rank"), "2 ranks");
    }
}
