//! The anatomy of one NCCL line: the `host:pid:tid [dev]` header found by its shape, the launcher's
//! rank tag in front of it, and the small token helpers every message parser uses.

use super::*;

/// True when `line` holds an NCCL message (used by [`crate::nccl::sniff`]).
pub(crate) fn is_nccl_line(line: &str) -> bool {
    line.contains("NCCL INFO")
        || line.contains("NCCL WARN")
        || line.contains("NCCL version ")
        || line.contains("RCCL version")
}

pub(super) fn split_hpt(tok: &str) -> Option<(&str, u64, u64)> {
    let mut it = tok.rsplitn(3, ':');
    let tid = it.next()?.parse().ok()?;
    let pid = it.next()?.parse().ok()?;
    let rest = it.next()?;
    let host = match rest.rfind([':', '>', ']']) {
        Some(i) => rest.get(i + 1..)?,
        None => rest,
    };
    (!host.is_empty()).then_some((host, pid, tid))
}

pub(super) fn parse_head(line: &str) -> Option<Head<'_>> {
    let (pos, level, marker) = if let Some(p) = line.find("NCCL INFO") {
        (p, Level::Info, "NCCL INFO")
    } else if let Some(p) = line.find("NCCL WARN") {
        (p, Level::Warn, "NCCL WARN")
    } else {
        return None;
    };
    let left = line.get(..pos)?;
    let msg = line.get(pos + marker.len()..)?.trim();
    // Find `host:pid:tid` followed by `[dev]`.
    let mut words = left.split_whitespace().peekable();
    let mut offset_after_dev = None;
    let mut found = None;
    let mut search_from = 0usize;
    while let Some(w) = words.next() {
        let w_pos = left.get(search_from..)?.find(w).map(|p| p + search_from)?;
        search_from = w_pos + w.len();
        if let Some((host, pid, tid)) = split_hpt(w) {
            if let Some(next) = words.peek() {
                if let Some(d) = next.strip_prefix('[').and_then(|x| x.strip_suffix(']')) {
                    if let Ok(dev) = d.parse::<i64>() {
                        let n_pos = left.get(search_from..)?.find(next).map(|p| p + search_from)?;
                        offset_after_dev = Some(n_pos + next.len());
                        found = Some((host, pid, tid, Some(dev)));
                        break;
                    }
                }
            }
        }
    }
    let (host, pid, tid, dev) = found?;
    let extra = left.get(offset_after_dev?..).unwrap_or("").trim();
    Some(Head { host, pid, tid, dev, level, extra, msg })
}

/// The launcher's rank tag in front of a line: MPI `[1,R]<stdout>:`, torchrun `[rankR]:` /
/// `[defaultR]:`, or srun `R: `.
pub(super) fn launcher_rank(line: &str) -> Option<u32> {
    let t = line.trim_start();
    if let Some(rest) = t.strip_prefix('[') {
        let inner = rest.split(']').next()?;
        if let Some(r) = inner.split(',').nth(1) {
            return r.trim().parse().ok();
        }
        let digits = inner.strip_prefix("rank").or_else(|| inner.strip_prefix("default"))?;
        return digits.parse().ok();
    }
    let first = t.split_whitespace().next()?;
    first.strip_suffix(':')?.parse().ok()
}

/// `2.26.5+cuda12.9` → (`2.26.5`, Some(`12.9`)).
pub(super) fn split_version(v: &str) -> (String, Option<String>) {
    let v = v.trim();
    match v.split_once('+') {
        Some((a, b)) => {
            let cuda = b
                .strip_prefix("cuda")
                .filter(|c| c.chars().all(|x| x.is_ascii_digit() || x == '.') && !c.is_empty());
            (a.to_string(), cuda.map(str::to_string))
        }
        None => (v.split_whitespace().next().unwrap_or("").to_string(), None),
    }
}

pub(super) fn bracket_rank(tok: &str) -> Option<(u32, &str)> {
    let (r, rest) = tok.split_once('[')?;
    Some((r.parse().ok()?, rest.strip_suffix(']')?))
}

/// `Channel NN[/MM] : ...` or `Ring NN : ...` → (channel, rest after ':').
pub(super) fn channel_prefix(msg: &str) -> Option<(u32, &str)> {
    let rest = msg.strip_prefix("Channel ").or_else(|| msg.strip_prefix("Ring "))?;
    let (head, tail) = rest.split_once(':')?;
    let ch = head.trim().split('/').next()?.trim().parse().ok()?;
    Some((ch, tail))
}

/// Numbers following `key` in whitespace tokens: `rank 0 nranks 16` → key "nranks" → 16.
pub(super) fn kv<'a>(toks: &[&'a str], key: &str) -> Option<&'a str> {
    toks.iter().position(|t| *t == key).and_then(|i| toks.get(i + 1)).copied()
}
