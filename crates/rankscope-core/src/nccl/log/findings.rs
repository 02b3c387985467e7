//! What an NCCL log says is wrong, with the lines that show it: sockets instead of the fabric,
//! GPUDirect RDMA off, mixed versions, patched builds, init that took long, warnings and their fixes.

use super::*;

/// Known WARN patterns and what practitioners do about them.
pub(super) fn warn_fix(msg: &str) -> &'static str {
    if msg.contains("Got completion from peer") || msg.contains("with error 12") {
        "Error 12 is IBV_WC_RETRY_EXC_ERR: the peer's NIC stopped acknowledging (peer process died, link flap, congestion). Check the peer host first (was it killed? dmesg/Xid), then the fabric (ibstat, port error counters, switch logs); raising NCCL_IB_TIMEOUT only hides a flaky link"
    } else if msg.contains("Cuda failure") || msg.contains("CUDA failure") {
        "A CUDA call failed inside NCCL: check the GPU (nvidia-smi, dmesg Xid), driver/runtime versions, and out-of-memory conditions"
    } else if msg.contains("unhandled system error") || msg.contains("connect") || msg.contains("Connection")
    {
        "A socket/system call failed: check that NCCL_SOCKET_IFNAME picks an interface every host can reach, firewalls between hosts, and that all ranks started"
    } else if msg.contains("timeout") || msg.contains("Timeout") {
        "A timeout: one rank did not arrive (crashed, hung, or collectives mismatched across ranks); look at the other ranks' logs first"
    } else {
        "Read the WARN with the return-code trace below it (the last `-> N` is the ncclResult_t returned to the caller); NCCL_DEBUG_SUBSYS=ALL gives more context"
    }
}

/// What a log's facts say, for the rules below.
struct Log<'a> {
    st: &'a State,
    peers: &'a [PeerLink],
    rings: &'a [NcclRing],
    n_nodes: u32,
    procs: Vec<&'a NcclProcess>,
}

/// The rules, in the order their findings are made (then sorted by severity and id).
const RULES: [fn(&Log<'_>, &mut Vec<Finding>); 13] = [
    net_socket_multinode,
    mixed_networks,
    intra_node_shm_or_net,
    gdr_disabled,
    versions_differ,
    build_mismatch,
    bootstrap_interface,
    patched_nccl,
    single_rank_communicators,
    ring_crosses_nodes,
    init_incomplete,
    warnings,
    teardown_warnings,
];

pub(super) fn log_findings(
    st: &State,
    peers: &[PeerLink],
    rings: &[NcclRing],
    _hosts: &BTreeSet<String>,
    n_nodes: u32,
) -> Vec<Finding> {
    let x = Log { st, peers, rings, n_nodes, procs: st.procs.values().collect() };
    let mut out = Vec::new();
    for rule in RULES {
        rule(&x, &mut out);
    }
    out
}

/// Multi-node job on NET/Socket.
fn net_socket_multinode(x: &Log<'_>, out: &mut Vec<Finding>) {
    let st = x.st;
    let procs = &x.procs;
    let n_nodes = x.n_nodes;
    let socket_conns: Vec<&Conn> = st
        .conns
        .iter()
        .filter(|c| net_of(&c.via).is_some_and(|(n, _)| n.eq_ignore_ascii_case("Socket")))
        .collect();
    let socket_net =
        st.ev_network.iter().filter(|(k, _)| k.eq_ignore_ascii_case("Socket")).flat_map(|x| x.1.iter());
    let socket_hosts: BTreeSet<&str> = procs
        .iter()
        .filter(|p| p.network.as_deref().is_some_and(|n| n.eq_ignore_ascii_case("Socket")))
        .map(|p| p.host.as_str())
        .chain(socket_conns.iter().map(|c| c.host.as_str()))
        .collect();
    if n_nodes > 1 && !socket_hosts.is_empty() {
        let mut ev: Vec<EvidenceLine> = socket_net.cloned().collect();
        ev.extend(st.ev_no_ibverbs.iter().cloned());
        ev.extend(st.ev_env_net.iter().cloned());
        ev.extend(socket_conns.iter().take(2).map(|c| EvidenceLine::new(&c.file, c.line, &c.text)));
        out.push(Finding::quoting(
            FindingId::LogNetSocketMultinode,
            Severity::ERROR,
            format!(
                "multi-node job ({n_nodes} nodes) communicates over NET/Socket (TCP) on {}: the RDMA NIC is not used{}",
                socket_hosts.iter().copied().collect::<Vec<_>>().join(", "),
                if st.ev_no_ibverbs.is_empty() { "" } else { " (libibverbs could not be opened)" }
            ),
            "Make RDMA available to NCCL: install rdma-core/libibverbs in the container (and, on AWS EFA, the aws-ofi-nccl plugin with libfabric), expose the /dev/infiniband devices, and do not set NCCL_IB_DISABLE=1 or NCCL_NET=Socket; the log should then say `Using network IB` (or the plugin's name)",
            ev,
        ));
    }
}

/// Different networks across processes.
fn mixed_networks(x: &Log<'_>, out: &mut Vec<Finding>) {
    let st = x.st;
    let procs = &x.procs;
    let nets: BTreeMap<&str, BTreeSet<&str>> = procs
        .iter()
        .filter_map(|p| p.network.as_deref().map(|n| (n, p.host.as_str())))
        .fold(BTreeMap::new(), |mut m, (n, h)| {
            m.entry(n).or_default().insert(h);
            m
        });
    if nets.len() > 1 {
        let ev = st.ev_network.values().filter_map(|v| v.first().cloned()).collect();
        out.push(Finding::quoting(
            FindingId::LogMixedNetworks,
            Severity::WARNING,
            format!(
                "processes chose different networks: {}",
                nets.iter().map(|(n, hs)| format!("{n} on {}", hs.iter().copied().collect::<Vec<_>>().join(", "))).collect::<Vec<_>>().join("; ")
            ),
            "Give every node the same network stack (drivers, plugin, NCCL_NET / NCCL_IB_* settings): NCCL falls back per host when a library or device is missing",
            ev,
        ));
    }
}

/// SHM or NET between GPUs of one node.
fn intra_node_shm_or_net(x: &Log<'_>, out: &mut Vec<Finding>) {
    let st = x.st;
    let peers = x.peers;
    let bad: Vec<&PeerLink> = peers
        .iter()
        .filter(|p| p.same_host == Some(true) && p.transports.iter().any(|t| t == "SHM" || t == "NET"))
        .collect();
    if !bad.is_empty() {
        let pairs: BTreeSet<(u32, u32)> =
            bad.iter().map(|p| (p.from_rank.min(p.to_rank), p.from_rank.max(p.to_rank))).collect();
        let ev: Vec<EvidenceLine> = st
            .conns
            .iter()
            .filter(|c| {
                let t = transport_class(&c.via);
                (t == "SHM" || t == "NET")
                    && bad.iter().any(|p| p.comm == c.comm && p.from_rank == c.from && p.to_rank == c.to)
            })
            .map(|c| EvidenceLine::new(&c.file, c.line, &c.text))
            .collect();
        let via: BTreeSet<&str> = bad
            .iter()
            .flat_map(|p| p.via.iter().map(String::as_str))
            .filter(|v| !v.starts_with("P2P"))
            .collect();
        let set: Vec<String> = st
            .ev_env_p2p
            .iter()
            .filter_map(|e| e.text.split("NCCL INFO ").nth(1).map(str::to_string))
            .collect::<BTreeSet<_>>()
            .into_iter()
            .collect();
        let mut ev = ev;
        ev.extend(st.ev_env_p2p.iter().cloned());
        out.push(Finding::quoting(
            FindingId::LogIntraNodeShmOrNet,
            Severity::WARNING,
            format!(
                "{} pair(s) of GPUs on the same node talk through {} instead of P2P (NVLink/PCIe): intra-node traffic goes through host memory or the NIC{}",
                pairs.len(),
                via.into_iter().collect::<Vec<_>>().join(", "),
                if set.is_empty() { String::new() } else { format!(" ({})", set.join("; ")) }
            ),
            "Check `nvidia-smi topo -m`, NCCL_P2P_DISABLE / NCCL_P2P_LEVEL / NCCL_SHM_DISABLE settings, PCIe ACS and IOMMU (they block P2P), and containers started without --ipc=host or with GPUs split across containers",
            ev,
        ));
    }
}

/// Instance-type families whose EFA has no RDMA read, so no GPUDirect RDMA: aws-ofi-nccl's
/// platform table (`src/platform-aws.cpp`) marks `p3dn.24xlarge`, `g5.48xlarge` and
/// `p5.4xlarge` as not requiring GDR, and G-family instances carry EFA without GPUDirect.
pub(super) fn platform_without_gdr(instance: &str) -> bool {
    let family = instance.split('.').next().unwrap_or("");
    instance == "p5.4xlarge" || family == "p3dn" || ["g4", "g5", "g6"].iter().any(|g| family.starts_with(g))
}

/// The value NCCL reports for a variable: `... NCCL INFO NCCL_NET_GDR_LEVEL set by environment
/// to LOC` → `LOC`.
fn env_value(e: &EvidenceLine) -> &str {
    e.text.rsplit(" set by environment to ").next().unwrap_or("").trim().trim_end_matches('.')
}

/// GDRDMA disabled on an RDMA network between nodes, with the reason the log gives for it.
fn gdr_disabled(x: &Log<'_>, out: &mut Vec<Finding>) {
    let st = x.st;
    if x.n_nodes <= 1 {
        return; // intra-node traffic needs no NIC: no GPUDirect RDMA advice
    }
    let same_host: BTreeSet<(Option<&str>, u32, u32)> = x
        .peers
        .iter()
        .filter(|p| p.same_host == Some(true))
        .map(|p| (p.comm.as_deref(), p.from_rank, p.to_rank))
        .collect();
    let net_conns: Vec<&Conn> = st
        .conns
        .iter()
        .filter(|c| net_of(&c.via).is_some_and(|(n, _)| !n.eq_ignore_ascii_case("Socket")))
        .collect();
    let crossing: Vec<&&Conn> =
        net_conns.iter().filter(|c| !same_host.contains(&(c.comm.as_deref(), c.from, c.to))).collect();
    if !net_conns.is_empty() && crossing.is_empty() {
        return; // the network only carries traffic inside nodes: `log.intra-node-shm-or-net`
    }
    let no_gdr_conns: Vec<&&&Conn> =
        crossing.iter().filter(|c| net_of(&c.via).is_some_and(|(_, gdr)| !gdr)).collect();
    let gdr_off_hosts: BTreeSet<&str> =
        x.procs.iter().filter(|p| p.gdr == Some(false)).map(|p| p.host.as_str()).collect();
    if gdr_off_hosts.is_empty() {
        return;
    }
    let rccl = library_name(x) == "RCCL";
    let mut ev: Vec<EvidenceLine> = Vec::new();
    let mut reasons: Vec<String> = Vec::new();
    let mut fixes: Vec<String> = Vec::new();
    // Reasons the platform or its plugin decided: nothing to load or fix on this machine.
    let mut platform_only = true;
    if let Some(e) = st.ev_gdr_env.first() {
        reasons.push(format!("NCCL_NET_GDR_LEVEL={} is set by the environment", env_value(e)));
        fixes.push("NCCL_NET_GDR_LEVEL caps the GPU-NIC distance at which NCCL uses GPUDirect RDMA (LOC turns it off): unset it unless it works around a platform problem".into());
        ev.extend(st.ev_gdr_env.iter().cloned());
        platform_only = false;
    }
    if let Some(e) = st.ev_gdr_required.first() {
        reasons.push(format!(
            "the network plugin warns that this instance type should have it (`{}`)",
            quote_msg(e)
        ));
        fixes.push("The plugin expected GPUDirect RDMA here: install the EFA driver, Libfabric (1.18 or later) and aws-ofi-nccl from one EFA installer release, and check that the NVIDIA driver exports dma-buf or nvidia-peermem is loaded".into());
        ev.extend(st.ev_gdr_required.iter().cloned());
        platform_only = false;
    }
    if let Some(e) = st.ev_gdr_plugin.first() {
        reasons.push(format!("the network plugin turned it off itself (`{}`)", quote_msg(e)));
        if st.ev_gdr_required.is_empty() {
            fixes.push("The network plugin decided this, not a missing kernel module: loading nvidia-peermem changes nothing. On instance types whose EFA has no RDMA read (g4dn, g5, g6, p3dn) GPUDirect RDMA is not available and nothing needs fixing; on GPUDirect instance types (p4d, p4de, p5 families) the plugin would say so in a WARN: then update Libfabric (1.18 or later) and aws-ofi-nccl".into());
        }
        ev.extend(st.ev_gdr_plugin.iter().cloned());
    }
    let platforms: BTreeSet<&str> = st
        .ev_platform
        .keys()
        .filter(|(h, t)| gdr_off_hosts.contains(h.as_str()) && platform_without_gdr(t))
        .map(|(_, t)| t.as_str())
        .collect();
    if !platforms.is_empty() {
        let list = platforms.iter().copied().collect::<Vec<_>>().join(", ");
        reasons.push(format!("{list} has no GPUDirect RDMA over EFA"));
        fixes.push(format!("{list} offers no GPUDirect RDMA: there is nothing to load; use a GPUDirect instance type (p4d, p4de, p5 families) where inter-node bandwidth matters"));
        ev.extend(
            st.ev_platform
                .iter()
                .filter(|((_, t), _)| platforms.contains(t.as_str()))
                .map(|(_, e)| e.clone()),
        );
    }
    let no_module = st.ev_gdr_off.iter().any(|e| e.text.contains("no module"));
    if no_module || !st.ev_gdr_peermem.is_empty() {
        platform_only = false;
        if rccl || !st.ev_gdr_peermem.is_empty() {
            reasons.push("RCCL found no peer-memory support for the NIC".into());
            let dmabuf = st
                .ev_dmabuf_off
                .first()
                .map(|e| format!(" (the log says `{}`)", quote_msg(e)))
                .unwrap_or_default();
            fixes.push(format!("On ROCm, GPUDirect RDMA needs the amdgpu driver's peer-memory support (RCCL looks for /sys/kernel/mm/memory_peers/amdkfd or the ib_register_peer_memory_client symbol: amdgpu-dkms with an OFED or kernel that provides ib_peer_mem) or DMA-BUF (NCCL_DMABUF_ENABLE=1 on Linux 5.12 or later){dmabuf}; nvidia-peermem is for NVIDIA GPUs"));
            ev.extend(st.ev_gdr_peermem.iter().cloned());
            ev.extend(st.ev_dmabuf_off.iter().take(1).cloned());
        } else {
            reasons.push("the peer-memory kernel module is not loaded".into());
            fixes.push("Load the peer-memory module (nvidia-peermem, or nv_peer_mem on old drivers) on every node, or use dma-buf (NCCL 2.13 or later on Linux 5.12 or later with an open-kernel-module driver)".into());
        }
        ev.extend(st.ev_gdr_off.iter().filter(|e| e.text.contains("no module")).cloned());
    }
    if st.ev_gdr_off.iter().any(|e| e.text.contains("distance")) {
        platform_only = false;
        reasons.push(if st.ev_gdr_env.is_empty() {
            "GPU and NIC are too far apart in PCIe".to_string()
        } else {
            "GPU and NIC are farther apart than NCCL_NET_GDR_LEVEL allows".to_string()
        });
        fixes.push("If NCCL reports `distance X >= Y`, the GPU and NIC sit under different PCIe switches or CPUs: use the NIC closest to each GPU (NCCL_IB_HCA, rail-aligned placement), give NCCL_TOPO_FILE where the PCI topology is virtualised, and raise NCCL_NET_GDR_LEVEL only if the platform supports peer-to-peer across that path".into());
        ev.extend(st.ev_gdr_off.iter().filter(|e| e.text.contains("distance")).cloned());
    }
    if reasons.is_empty() {
        platform_only = false;
        ev.extend(st.ev_gdr_off.iter().cloned());
        fixes.push(if rccl {
            "The log does not say why: on ROCm check the amdgpu driver's peer-memory support (/sys/kernel/mm/memory_peers/amdkfd) or enable DMA-BUF (NCCL_DMABUF_ENABLE=1); NCCL_DEBUG_SUBSYS=INIT,NET shows RCCL's reason".into()
        } else {
            "The log does not say why: check that the peer-memory module (nvidia-peermem) is loaded or dma-buf is available, and that NCCL_NET_GDR_LEVEL is not set; NCCL_DEBUG_SUBSYS=INIT,NET shows NCCL's reason".into()
        });
    }
    ev.extend(no_gdr_conns.iter().take(2).map(|c| EvidenceLine::new(&c.file, c.line, &c.text)));
    let why = if reasons.is_empty() { String::new() } else { format!(": {}", reasons.join("; ")) };
    out.push(Finding::quoting(
        FindingId::LogGdrDisabled,
        if platform_only { Severity::Info } else { Severity::WARNING },
        format!(
            "GPUDirect RDMA is off on {}{why}. Network transfers are staged through host memory, costing bandwidth and CPU{}",
            gdr_off_hosts.iter().copied().collect::<Vec<_>>().join(", "),
            if platform_only { " (expected here: the platform or its network plugin decided it)" } else { "" }
        ),
        &fixes.join(". "),
        ev,
    ));
}

/// The message of a quoted NCCL line: what follows `NCCL INFO ` / `NCCL WARN `.
fn quote_msg(e: &EvidenceLine) -> &str {
    e.text
        .split_once("NCCL INFO ")
        .or_else(|| e.text.split_once("NCCL WARN "))
        .map_or(e.text.as_str(), |x| x.1)
        .trim()
}

/// NCCL versions differ, or CUDA drivers do.
fn versions_differ(x: &Log<'_>, out: &mut Vec<Finding>) {
    let st = x.st;
    if st.versions.len() > 1 {
        let ev: Vec<EvidenceLine> = st.ev_version.values().cloned().collect();
        out.push(Finding::quoting(
            FindingId::LogNcclVersionMismatch,
            Severity::ERROR,
            format!(
                "different {} versions in one job: {}",
                library_name(x),
                st.versions
                    .iter()
                    .map(|(v, hs)| format!("{v} on {}", hs.iter().cloned().collect::<Vec<_>>().join(", ")))
                    .collect::<Vec<_>>()
                    .join("; ")
            ),
            &format!("Run one {} build everywhere (the same container image, or the same LD_LIBRARY_PATH on every host): mixed versions can hang or fail at init because their wire protocols differ", library_name(x)),
            ev,
        ));
    }
    let drivers: BTreeSet<&String> = st.ev_driver.keys().map(|k| &k.1).collect();
    if drivers.len() > 1 {
        out.push(Finding::quoting(
            FindingId::LogCudaDriverMismatch,
            Severity::WARNING,
            format!(
                "different CUDA driver versions across hosts: {}",
                st.ev_driver.keys().map(|(h, v)| format!("{v} on {h}")).collect::<Vec<_>>().join(", ")
            ),
            "Install the same GPU driver on every node of a job; mixed drivers are a common source of hard-to-reproduce failures",
            st.ev_driver.values().cloned().collect(),
        ));
    }
}

/// Same NCCL version built for different CUDA versions, or one RCCL version from different
/// builds (git hash, ROCm stack).
fn build_mismatch(x: &Log<'_>, out: &mut Vec<Finding>) {
    let st = x.st;
    let mut builds: BTreeMap<&str, BTreeSet<&str>> = BTreeMap::new();
    for (_, v, c) in st.ev_build.keys() {
        builds.entry(v.as_str()).or_default().insert(c.as_str());
    }
    if builds.values().any(|c| c.len() > 1) && st.versions.len() == 1 {
        let lib = library_name(x);
        out.push(Finding::quoting(
            FindingId::LogNcclBuildMismatch,
            Severity::WARNING,
            format!(
                "the same {lib} version comes from different builds: {}",
                st.ev_build.keys().map(|(h, v, c)| format!("{v}{c} on {h}")).collect::<Vec<_>>().join(", ")
            ),
            &format!("Use one {lib} package everywhere (same container image); different builds of one version are a sign of hosts set up differently"),
            st.ev_build.values().cloned().collect(),
        ));
    }
}

/// `RCCL` when any process runs RCCL, else `NCCL`.
fn library_name(x: &Log<'_>) -> &'static str {
    if x.procs.iter().any(|p| p.library.as_deref() == Some("RCCL")) {
        "RCCL"
    } else {
        "NCCL"
    }
}

/// Bootstrap over loopback or a container bridge in a multi-node job.
fn bootstrap_interface(x: &Log<'_>, out: &mut Vec<Finding>) {
    let st = x.st;
    let n_nodes = x.n_nodes;
    let bad_boot: Vec<(&String, &EvidenceLine)> = st
        .ev_bootstrap
        .iter()
        .filter(|((_, i), _)| i == "lo" || i.starts_with("docker") || i.starts_with("virbr"))
        .map(|((h, _), e)| (h, e))
        .collect();
    if n_nodes > 1 && !bad_boot.is_empty() {
        let hs: BTreeSet<&str> = bad_boot.iter().map(|(h, _)| h.as_str()).collect();
        out.push(Finding::quoting(
            FindingId::LogBootstrapInterface,
            Severity::ERROR,
            format!(
                "multi-node job bootstraps over a host-local interface (loopback or container bridge) on {}: other nodes cannot reach it",
                hs.into_iter().collect::<Vec<_>>().join(", ")
            ),
            "Set NCCL_SOCKET_IFNAME to the interface that connects the nodes (e.g. NCCL_SOCKET_IFNAME=eth0 or =^lo,docker)",
            bad_boot.into_iter().map(|(_, e)| e.clone()).collect(),
        ));
    }
}

/// Patched / differently built NCCL.
fn patched_nccl(x: &Log<'_>, out: &mut Vec<Finding>) {
    let st = x.st;
    if !st.ev_patched.is_empty() {
        let patched: Vec<&String> = st.ev_patched.keys().collect();
        let stock: Vec<&String> = st.ev_stock.keys().filter(|h| !st.ev_patched.contains_key(*h)).collect();
        let mixed = !stock.is_empty();
        let mut ev: Vec<EvidenceLine> = st.ev_patched.values().cloned().collect();
        ev.extend(stock.iter().filter_map(|h| st.ev_stock.get(*h).cloned()));
        out.push(Finding::quoting(
            FindingId::LogPatchedNccl,
            if mixed { Severity::WARNING } else { Severity::Info },
            if mixed {
                format!(
                    "{} print(s) extra fields in NCCL lines (a patched or debug build) while {} print(s) the stock format: the hosts run different NCCL builds even if the version strings match",
                    patched.iter().map(|s| s.as_str()).collect::<Vec<_>>().join(", "),
                    stock.iter().map(|s| s.as_str()).collect::<Vec<_>>().join(", ")
                )
            } else {
                format!(
                    "{} print(s) extra fields in NCCL lines: a patched or debug NCCL build",
                    patched.iter().map(|s| s.as_str()).collect::<Vec<_>>().join(", ")
                )
            },
            "Use the same NCCL build on every host; keep debug/patched builds out of production runs",
            ev,
        ));
    }
}

/// Processes that each formed a 1-rank communicator.
fn single_rank_communicators(x: &Log<'_>, out: &mut Vec<Finding>) {
    let st = x.st;
    let single: Vec<&NcclRank> = st.ranks.values().filter(|r| r.nranks == Some(1)).collect();
    let single_procs: BTreeSet<(&str, u64)> = single.iter().map(|r| (r.host.as_str(), r.pid)).collect();
    let multi_exists = st.ranks.values().any(|r| r.nranks.is_some_and(|n| n > 1));
    if single_procs.len() > 1 && !multi_exists {
        out.push(Finding::quoting(
            FindingId::LogSingleRankCommunicators,
            Severity::ERROR,
            format!(
                "{} processes on {} host(s) each formed their own 1-rank communicator: they never joined one job",
                single_procs.len(),
                single_procs.iter().map(|x| x.0).collect::<BTreeSet<_>>().len()
            ),
            "A launch misconfiguration: build nccl-tests (or the application) with MPI support (MPI=1) and start it with mpirun/srun/torchrun so every process learns its rank and the world size; check that every host runs the same MPI-enabled binary",
            single.iter().map(|r| EvidenceLine::new(&r.file, r.line, &format!("{}:{} comm {} rank {} nranks 1", r.host, r.pid, r.comm_ptr.as_deref().unwrap_or("?"), r.rank))).collect(),
        ));
    }
}

/// Rings that leave and re-enter nodes.
fn ring_crosses_nodes(x: &Log<'_>, out: &mut Vec<Finding>) {
    let rings = x.rings;
    let bad_rings: Vec<&NcclRing> = rings
        .iter()
        .filter(|r| matches!((r.host_crossings, r.hosts), (Some(c), Some(h)) if h > 1 && c > h))
        .collect();
    if !bad_rings.is_empty() {
        out.push(Finding::quoting(
            FindingId::LogRingCrossesNodes,
            Severity::WARNING,
            format!(
                "{} ring(s) leave and re-enter a node more often than needed (e.g. channel {}: {} node crossings for {} nodes): each extra crossing puts inter-node traffic on the ring",
                bad_rings.len(),
                bad_rings.first().map_or(0, |r| r.channel),
                bad_rings.first().and_then(|r| r.host_crossings).unwrap_or(0),
                bad_rings.first().and_then(|r| r.hosts).unwrap_or(0)
            ),
            "NCCL did not see the node topology correctly: provide NCCL_TOPO_FILE (or fix the virtualised PCI topology), and check that ranks are numbered node by node (rank = node × GPUs per node + local rank)",
            bad_rings.iter().map(|r| EvidenceLine::new(&r.file, r.line, &format!("Channel {:02} : {}", r.channel, r.ranks.iter().map(u32::to_string).collect::<Vec<_>>().join(" ")))).collect(),
        ));
    }
}

/// Init started but never completed.
fn init_incomplete(x: &Log<'_>, out: &mut Vec<Finding>) {
    let st = x.st;
    let stuck: Vec<&EvidenceLine> = st
        .ranks
        .values()
        .filter(|r| r.init_started && !r.init_complete)
        .filter_map(|r| st.ev_init_start.get(&(r.host.clone(), r.pid, format!("{}#{}", r.comm, r.rank))))
        .collect();
    if !stuck.is_empty() {
        out.push(Finding::quoting(
            FindingId::LogInitIncomplete,
            Severity::WARNING,
            format!("{} rank(s) started communicator init but the log shows no `Init COMPLETE`: init hung, failed, or the log was cut", stuck.len()),
            "Look for WARN lines and for ranks that never started; a hang at init usually means a rank is missing or the network between two hosts is blocked",
            stuck.into_iter().cloned().collect(),
        ));
    }
}

/// Warnings and error traces written during the job's own teardown: information.
fn teardown_warnings(x: &Log<'_>, out: &mut Vec<Finding>) {
    let st = x.st;
    let ws: Vec<&NcclWarning> = st.warnings.iter().filter(|w| w.teardown).collect();
    let Some(first) = ws.first() else { return };
    let ends: Vec<&EvidenceLine> = st
        .files
        .iter()
        .filter_map(|f| f.job_end.as_ref())
        .filter(|e| ws.iter().any(|w| w.file == e.file && w.line > e.line))
        .collect();
    let mut ev: Vec<EvidenceLine> = ends.iter().map(|e| (*e).clone()).collect();
    for w in &ws {
        ev.push(warning_line(w));
    }
    let destroyed: Vec<EvidenceLine> = st
        .lives
        .iter()
        .filter(|((f, h, pid), _)| ws.iter().any(|w| &w.file == f && &w.host == h && w.pid == *pid))
        .filter_map(|(_, l)| l.destroys.first().map(|d| d.2.clone()))
        .collect();
    let when = match ends.first() {
        Some(e) => {
            let t: String = e.text.chars().take(60).collect();
            let more = if e.text.chars().count() > 60 { "…" } else { "" };
            format!("after the job said it was over (line {}: `{t}{more}`)", e.line)
        }
        None => "while its processes destroyed their communicators".to_string(),
    };
    let procs: BTreeSet<(&str, u64)> = ws.iter().map(|w| (w.host.as_str(), w.pid)).collect();
    let code =
        first.trace.first().map(|t| format!(", e.g. `{} -> {}`", t.location, t.code)).unwrap_or_default();
    out.push(Finding::quoting(
        FindingId::LogTeardownWarnings,
        Severity::Info,
        format!(
            "{} NCCL warning(s) or error-return trace(s) from {} process(es) were written during teardown, {when}{code}: processes closing connections to peers that had already exited; information, not an error",
            ws.len(),
            procs.len()
        ),
        "Nothing failed. To keep teardown quiet, end every rank the same way: call torch.distributed.destroy_process_group() (ncclCommDestroy) on all ranks before they exit, so that no rank closes its sockets while a peer still talks to it",
        {
            ev.extend(destroyed);
            ev
        },
    ));
}

/// A warning's first line as evidence.
fn warning_line(w: &NcclWarning) -> EvidenceLine {
    let text = if w.message.is_empty() {
        w.trace.first().map(|t| format!("{} -> {}", t.location, t.code)).unwrap_or_default()
    } else {
        format!("NCCL WARN {}", w.message)
    };
    EvidenceLine::new(&w.file, w.line, &text)
}

/// Warnings and error traces.
fn warnings(x: &Log<'_>, out: &mut Vec<Finding>) {
    let st = x.st;
    let mut groups: BTreeMap<String, Vec<&NcclWarning>> = BTreeMap::new();
    for w in st.warnings.iter().filter(|w| !w.teardown) {
        let key: String = w.message.chars().map(|c| if c.is_ascii_digit() { '#' } else { c }).collect();
        groups.entry(key).or_default().push(w);
    }
    for ws in groups.values() {
        let Some(first) = ws.first() else { continue };
        let mut ev = Vec::new();
        for w in ws {
            ev.push(warning_line(w));
            for t in w.trace.iter().take(3) {
                ev.push(EvidenceLine::new(
                    &w.file,
                    t.line,
                    &format!("{} -> {} ({}) {}", t.location, t.code, nccl_result_name(t.code), t.note),
                ));
            }
        }
        let code = first
            .trace
            .last()
            .map(|t| format!(" ; returned {} ({})", t.code, nccl_result_name(t.code)))
            .unwrap_or_default();
        let mut message = if first.message.is_empty() {
            format!("an NCCL error-return trace without a WARN line on {}:{}{code}", first.host, first.pid)
        } else {
            let cont = first.continuation.join(" ");
            format!(
                "NCCL WARN on {}:{}: {}{}{}",
                first.host,
                first.pid,
                first.message,
                if cont.is_empty() { String::new() } else { format!(" {cont}") },
                code
            )
        };
        if ws.len() > 1 {
            message.push_str(&format!(" (and {} more like it)", ws.len() - 1));
        }
        out.push(Finding::quoting(
            FindingId::LogNcclWarn,
            Severity::ERROR,
            message,
            warn_fix(&first.message),
            ev,
        ));
    }
}
