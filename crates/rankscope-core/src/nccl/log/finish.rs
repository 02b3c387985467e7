//! From everything read to the [`LogReport`]: communicators resolved per thread, rings and trees
//! deduplicated, peer links classified, the per-rank table filled in.

use super::*;

/// The report from everything read: versions attributed, networks filled in, communicators
/// resolved, peers and rings with their hosts, the findings.
pub(super) fn finish(mut st: State) -> LogReport {
    attribute_loose_versions(&mut st);
    label_rocm_builds(&mut st);
    // Which warnings are teardown (docs/nccl.md, "Teardown").
    teardown(&mut st);
    fill_networks(&mut st);
    let (conns, mut rings) = resolve_comms(&mut st);
    let hosts_of = RankHosts::new(&st, &conns);
    let (peers, transports) = peer_links(&conns, &hosts_of);
    ring_crossings(&mut rings, &hosts_of);
    drop(hosts_of);
    st.conns = conns;
    let rings: Vec<NcclRing> = rings.into_values().collect();

    let mut hosts: BTreeSet<String> = st.procs.keys().map(|k| k.0.clone()).collect();
    hosts.extend(st.ranks.values().map(|r| r.host.clone()));
    let n_nodes = u32::try_from(hosts.len()).unwrap_or(u32::MAX).max(st.max_nodes);

    let peers: Vec<PeerLink> = peers.into_values().collect();
    let findings = {
        let mut f = log_findings(&st, &peers, &rings, &hosts, n_nodes);
        sort_findings(&mut f);
        f
    };
    let nccl_versions = st.versions.iter().map(|(v, hs)| (v.clone(), hs.iter().cloned().collect())).collect();
    let mut ranks: Vec<NcclRank> = st.ranks.into_values().collect();
    ranks.sort_by(|a, b| {
        a.comm.cmp(&b.comm).then(a.rank.cmp(&b.rank)).then(a.host.cmp(&b.host)).then(a.pid.cmp(&b.pid))
    });
    let mut rings = rings;
    rings.sort_by(|a, b| a.channel.cmp(&b.channel).then(a.comm.cmp(&b.comm)).then(a.ranks.cmp(&b.ranks)));
    LogReport {
        version: REPORT_VERSION,
        files: st.files,
        hosts: hosts.into_iter().collect(),
        n_nodes,
        nccl_versions,
        processes: st.procs.into_values().collect(),
        ranks,
        rings,
        trees: st.trees.into_values().collect(),
        peers,
        transports,
        warnings: st.warnings,
        findings,
        diagnostics: st.diagnostics,
    }
}

/// Attributes the versions printed without a header to their process: through RCCL's `Hostname`
/// line, else the launcher's rank tag (`[1,0]<stdout>:NCCL version 2.9.9+cuda11.2` → the
/// process tagged rank 0), else to `?`; and records each version's host and build label.
fn attribute_loose_versions(st: &mut State) {
    for lv in std::mem::take(&mut st.loose_versions) {
        let by_tag = |p: &NcclProcess| {
            lv.launcher_rank.is_some() && p.launcher_rank == lv.launcher_rank && p.file == lv.ev.file
        };
        let owner: Option<&mut NcclProcess> = match &lv.host {
            Some(hn) => st.procs.values_mut().find(|p| &p.host == hn && p.file == lv.ev.file),
            None => st.procs.values_mut().find(|p| by_tag(p)),
        };
        let host = match owner {
            Some(p) => {
                if p.nccl_version.is_none() {
                    p.nccl_version = Some(lv.version.clone());
                    p.nccl_cuda_version = lv.cuda.clone();
                }
                if lv.rccl {
                    p.library = Some("RCCL".into());
                    p.rccl_build = p.rccl_build.take().or(lv.rccl_build.clone());
                    p.hip_version = p.hip_version.take().or(lv.hip.clone());
                    p.rocm_version = p.rocm_version.take().or(lv.rocm.clone());
                } else {
                    p.library.get_or_insert_with(|| "NCCL".into());
                }
                p.host.clone()
            }
            None => lv.host.clone().unwrap_or_else(|| "?".to_string()),
        };
        let label = match (&lv.cuda, &lv.rccl_build) {
            (Some(c), _) => Some(format!("+cuda{c}")),
            (None, Some(b)) if b.starts_with("hip") => Some(format!("+{b}")),
            (None, Some(b)) => Some(format!("-{b}")),
            (None, None) => None,
        };
        if let Some(l) = label {
            st.ev_build.entry((host.clone(), lv.version.clone(), l)).or_insert_with(|| lv.ev.clone());
        }
        st.versions.entry(lv.version.clone()).or_default().insert(host.clone());
        st.ev_version.entry((host, lv.version)).or_insert(lv.ev);
    }
}

/// Adds the ROCm release to the build labels of RCCL builds: RCCL builds carry the ROCm stack
/// they run on, so one version on different ROCm releases is a build difference too.
fn label_rocm_builds(st: &mut State) {
    let rocm: BTreeMap<String, String> = st
        .procs
        .values()
        .filter_map(|p| {
            p.rocm_version.as_ref().map(|r| (p.host.clone(), r.split('-').next().unwrap_or(r).to_string()))
        })
        .collect();
    st.ev_build = std::mem::take(&mut st.ev_build)
        .into_iter()
        .map(|((h, v, l), e)| match rocm.get(&h).filter(|_| !l.starts_with("+cuda")) {
            Some(r) => ((h, v, format!("{l} (ROCm {r})")), e),
            None => ((h, v, l), e),
        })
        .collect();
}

/// Each process's network for versions that do not print `Using network` (from the devices
/// NCCL listed or, failing that, from the process's own network connections), and its GDRDMA
/// as seen on network connections.
fn fill_networks(st: &mut State) {
    let mut conn_nets: BTreeMap<(String, u64), String> = BTreeMap::new();
    for c in &st.conns {
        if let Some((name, _)) = net_of(&c.via) {
            conn_nets.entry((c.host.clone(), c.pid)).or_insert(name);
        }
    }
    for (k, p) in st.procs.iter_mut() {
        if p.network.is_none() {
            p.network = conn_nets.get(k).cloned().or_else(|| {
                if !p.ib_devices.is_empty() {
                    Some("IB".to_string())
                } else if !p.socket_interfaces.is_empty() {
                    Some("Socket".to_string())
                } else {
                    None
                }
            });
        }
    }
    // GDRDMA as seen on network connections.
    for c in &st.conns {
        if let Some((name, gdr)) = net_of(&c.via) {
            if let Some(p) = st.procs.get_mut(&(c.host.clone(), c.pid)) {
                if gdr {
                    p.gdr = Some(true);
                } else if p.gdr.is_none() && !name.eq_ignore_ascii_case("Socket") {
                    p.gdr = Some(false);
                }
            }
        }
    }
}

/// Rings keyed by communicator, channel and ranks (the first of duplicates kept).
type RingMap = BTreeMap<(Option<String>, u32, Vec<u32>), NcclRing>;

/// Takes the connection and ring lines out of `st`, each with the communicator it belongs to,
/// the rings deduplicated.
fn resolve_comms(st: &mut State) -> (Vec<Conn>, RingMap) {
    // Which communicator a connection or ring line belongs to: rank numbers are per
    // communicator, and a training job has many (DP, TP, PP groups). NCCL prints connection and
    // ring lines from the thread that initialises the communicator, so the writing thread names
    // it when that thread printed `comm` lines for exactly one communicator; failing that, the
    // process does when it holds the line's local rank in exactly one communicator.
    let ptr_comm: BTreeMap<(&str, u64, &str), &str> = st
        .ranks
        .values()
        .filter_map(|r| r.comm_ptr.as_deref().map(|p| ((r.host.as_str(), r.pid, p), r.comm.as_str())))
        .collect();
    let thread_comm: BTreeMap<(String, u64, u64), String> = st
        .comm_threads
        .iter()
        .filter_map(|((h, pid, tid), ptrs)| {
            let comms: BTreeSet<&str> =
                ptrs.iter().filter_map(|p| ptr_comm.get(&(h.as_str(), *pid, p.as_str())).copied()).collect();
            (comms.len() == 1)
                .then(|| ((h.clone(), *pid, *tid), comms.first().map(|c| c.to_string()).unwrap_or_default()))
        })
        .collect();
    let mut proc_comms: BTreeMap<(&str, u64), Vec<(u32, &str)>> = BTreeMap::new();
    for r in st.ranks.values() {
        proc_comms.entry((r.host.as_str(), r.pid)).or_default().push((r.rank, r.comm.as_str()));
    }
    let resolve = |host: &str, pid: u64, tid: u64, local: Option<u32>| -> Option<String> {
        if let Some(c) = thread_comm.get(&(host.to_string(), pid, tid)) {
            return Some(c.clone());
        }
        let cands: BTreeSet<&str> = proc_comms
            .get(&(host, pid))
            .map(|v| v.iter().filter(|(r, _)| local.is_none_or(|l| *r == l)).map(|(_, c)| *c).collect())
            .unwrap_or_default();
        (cands.len() == 1).then(|| cands.first().map(|c| c.to_string())).flatten()
    };
    let mut conns = std::mem::take(&mut st.conns);
    for c in &mut conns {
        let local = match c.dir {
            Some(false) => c.to,
            _ => c.from,
        };
        c.comm = resolve(&c.host, c.pid, c.tid, Some(local));
    }
    let mut rings: RingMap = BTreeMap::new();
    for (mut ring, (h, pid, tid)) in std::mem::take(&mut st.rings) {
        ring.comm = resolve(&h, pid, tid, None);
        rings.entry((ring.comm.clone(), ring.channel, ring.ranks.clone())).or_insert(ring);
    }
    (conns, rings)
}

/// Rank → host, per communicator (from comm lines and banners), with a job-wide fallback
/// (ranks of multi-rank communicators and the local end of connection lines; a rank number
/// claimed by two hosts is left out).
struct RankHosts<'a> {
    by_comm: BTreeMap<(&'a str, u32), &'a str>,
    job: BTreeMap<u32, BTreeSet<String>>,
}

impl<'a> RankHosts<'a> {
    /// The hosts of `st`'s ranks and of the local ends of `conns`.
    fn new(st: &'a State, conns: &[Conn]) -> Self {
        let by_comm: BTreeMap<(&str, u32), &str> =
            st.ranks.values().map(|r| ((r.comm.as_str(), r.rank), r.host.as_str())).collect();
        let mut rank_host: BTreeMap<u32, BTreeSet<String>> = BTreeMap::new();
        for r in st.ranks.values().filter(|r| r.nranks.is_none_or(|n| n > 1)) {
            rank_host.entry(r.rank).or_default().insert(r.host.clone());
        }
        let mut from_conns: BTreeMap<u32, BTreeSet<String>> = BTreeMap::new();
        for c in conns {
            let local = match c.dir {
                Some(false) => c.to,
                _ => c.from,
            };
            from_conns.entry(local).or_default().insert(c.host.clone());
        }
        for (r, hs) in from_conns {
            rank_host.entry(r).or_insert(hs);
        }
        RankHosts { by_comm, job: rank_host }
    }

    /// The host of rank `r` of communicator `comm`, else of rank number `r` job-wide when one
    /// host claims it.
    fn host_of(&self, comm: Option<&str>, r: u32) -> Option<String> {
        if let Some(h) = comm.and_then(|c| self.by_comm.get(&(c, r))) {
            return Some(h.to_string());
        }
        self.job.get(&r).filter(|s| s.len() == 1).and_then(|s| s.iter().next().cloned())
    }
}

/// The peer links the connection lines describe (one per communicator and direction, with its
/// hosts, paths, transport classes and channels), and the count of lines per path.
#[allow(clippy::type_complexity)]
fn peer_links(
    conns: &[Conn],
    hosts: &RankHosts<'_>,
) -> (BTreeMap<(Option<String>, u32, u32), PeerLink>, BTreeMap<String, u32>) {
    let mut peers: BTreeMap<(Option<String>, u32, u32), PeerLink> = BTreeMap::new();
    let mut transports: BTreeMap<String, u32> = BTreeMap::new();
    for c in conns {
        *transports.entry(c.via.clone()).or_default() += 1;
        let e = peers.entry((c.comm.clone(), c.from, c.to)).or_insert_with(|| {
            let fh = hosts.host_of(c.comm.as_deref(), c.from);
            let th = hosts.host_of(c.comm.as_deref(), c.to);
            let same = match (&fh, &th) {
                (Some(a), Some(b)) => Some(a == b),
                _ => None,
            };
            PeerLink {
                comm: c.comm.clone(),
                from_rank: c.from,
                to_rank: c.to,
                from_host: fh,
                to_host: th,
                same_host: same,
                via: Vec::new(),
                transports: Vec::new(),
                lines: 0,
                channels: Vec::new(),
            }
        });
        e.lines += 1;
        if !e.via.contains(&c.via) {
            e.via.push(c.via.clone());
            e.via.sort();
        }
        let tc = transport_class(&c.via);
        if !e.transports.contains(&tc) {
            e.transports.push(tc);
            e.transports.sort();
        }
        if !e.channels.contains(&c.channel) {
            e.channels.push(c.channel);
            e.channels.sort_unstable();
        }
    }
    (peers, transports)
}

/// Each ring's host crossings and distinct hosts, when every rank's host is known.
fn ring_crossings(rings: &mut RingMap, hosts: &RankHosts<'_>) {
    for ring in rings.values_mut() {
        let hosts: Option<Vec<String>> =
            ring.ranks.iter().map(|&r| hosts.host_of(ring.comm.as_deref(), r)).collect();
        if let Some(hs) = hosts.filter(|h| h.len() > 1) {
            let distinct: BTreeSet<&String> = hs.iter().collect();
            let crossings = (0..hs.len()).filter(|&i| hs.get(i) != hs.get((i + 1) % hs.len())).count();
            ring.host_crossings = u32::try_from(crossings).ok();
            ring.hosts = u32::try_from(distinct.len()).ok();
        }
    }
}

/// Marks the warnings written during the job's own teardown:
/// 1. after the file's job end ([`LogFile::job_end`]: the framework said it finished, or the
///    last benchmark concluded, and no work followed), any warning;
/// 2. a warning about a connection closing (a socket, proxy or bootstrap error-return trace, a
///    `Connection closed` / `reset` WARN) that its process wrote right before destroying its
///    communicator in order (`Destroy COMPLETE` next, no other line between), or after it had
///    destroyed or aborted a communicator and did no more work.
///
/// An abort alone is no evidence: failing jobs abort too, so warnings before an `Abort` stay
/// errors unless the job said it had finished.
fn teardown(st: &mut State) {
    let ends: BTreeMap<&str, u32> =
        st.files.iter().filter_map(|f| f.job_end.as_ref().map(|e| (f.name.as_str(), e.line))).collect();
    for (i, w) in st.warnings.iter_mut().enumerate() {
        let after_end = ends.get(w.file.as_str()).is_some_and(|&e| w.line > e);
        let meta = st.warn_meta.get(i).cloned().unwrap_or_default();
        let life = st.lives.get(&(w.file.clone(), w.host.clone(), w.pid));
        let after_destroy = meta.after_destroy.is_some_and(|d| life.is_none_or(|l| l.last_work < d));
        let own_destroy = (meta.before_orderly_destroy || after_destroy) && is_connection_closing(w);
        w.teardown = after_end || own_destroy;
    }
}

/// A warning about a connection going away: what peers that exit first leave behind.
pub(super) fn is_connection_closing(w: &NcclWarning) -> bool {
    let m = w.message.to_ascii_lowercase();
    let closing = [
        "connection closed",
        "connection reset",
        "closed by",
        "broken pipe",
        "socketprogress",
        "socket closed",
    ];
    if !w.message.is_empty() {
        return closing.iter().any(|c| m.contains(c));
    }
    !w.trace.is_empty()
        && w.trace.iter().all(|t| {
            let l = t.location.as_str();
            l.starts_with("misc/socket")
                || l.starts_with("proxy.cc")
                || l.starts_with("bootstrap.cc")
                || l.starts_with("transport/net_socket")
        })
}
