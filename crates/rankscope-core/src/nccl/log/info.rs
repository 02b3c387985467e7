//! One `NCCL INFO` message into the [`State`]: versions, communicators, network, channels, rings,
//! trees, peer connections and the environment NCCL reports.

use super::*;

/// One `NCCL INFO` message into the log's facts. One long function on purpose: it is one
/// dispatch over the message formats NCCL prints (version, network, GDRDMA, rings, trees,
/// channels, peer connections, environment, init timings), each arm a few lines reading its
/// own fields, in the order a reader checks them against a log.
pub(super) fn info_line(st: &mut State, h: &Head<'_>, file: &str, n: u32, raw: &str) {
    let msg = h.msg;
    let key = (h.host.to_string(), h.pid);
    let ev = || EvidenceLine::new(file, n, raw);
    if msg.starts_with("NCCL version ") || msg.starts_with("RCCL version") {
        let Some(v) = super::read::parse_version_banner(msg) else { return };
        let ver = v.version;
        let label = match (&v.cuda, &v.rccl_build) {
            (Some(c), _) => Some(format!("+cuda{c}")),
            (None, Some(b)) if b.starts_with("hip") => Some(format!("+{b}")),
            (None, Some(b)) => Some(format!("-{b}")),
            (None, None) => None,
        };
        if let Some(l) = label {
            st.ev_build.entry((h.host.to_string(), ver.clone(), l)).or_insert_with(ev);
        }
        if let Some(p) = st.procs.get_mut(&key) {
            p.nccl_version = Some(ver.clone());
            p.nccl_cuda_version = v.cuda;
            p.library = Some(if v.rccl { "RCCL" } else { "NCCL" }.to_string());
            if v.rccl {
                p.rccl_build = v.rccl_build;
            }
        }
        st.versions.entry(ver.clone()).or_default().insert(h.host.to_string());
        st.ev_version.entry((h.host.to_string(), ver)).or_insert_with(ev);
        return;
    }
    // Lines only RCCL (on ROCm) prints: its runtime versions and banner fields.
    if ["ROCr version", "Hipruntime version", "HIP version", "ROCm version", "Librccl path"]
        .iter()
        .any(|x| msg.starts_with(x))
    {
        if let Some(p) = st.procs.get_mut(&key) {
            p.library.get_or_insert_with(|| "RCCL".to_string());
            if let Some((k, v)) = super::read::banner_field(msg) {
                match k {
                    "HIP version" => p.hip_version = Some(v),
                    "ROCm version" => p.rocm_version = Some(v),
                    _ => {}
                }
            }
        }
        return;
    }
    if msg.starts_with("Dmabuf feature disabled") {
        st.ev_dmabuf_off.push(ev());
        return;
    }
    // RCCL's peer-memory check (`transport/net_ib.cc`): no `memory_peers` directory, no
    // `ib_register_peer_memory_client` symbol.
    if msg.starts_with("GDRDMA not enabled") {
        if let Some(p) = st.procs.get_mut(&key) {
            if p.gdr != Some(true) {
                p.gdr = Some(false);
            }
        }
        st.ev_gdr_peermem.push(ev());
        return;
    }
    if let Some(v) = msg.strip_prefix("cudaDriverVersion ") {
        if let Ok(x) = v.trim().parse::<u32>() {
            let s = format!("{}.{}", x / 1000, (x % 1000) / 10);
            if let Some(p) = st.procs.get_mut(&key) {
                p.cuda_driver = Some(s.clone());
            }
            st.ev_driver.entry((h.host.to_string(), s)).or_insert_with(ev);
        }
        return;
    }
    if let Some(v) = msg.strip_prefix("Using network ") {
        let net = v.trim().to_string();
        if let Some(p) = st.procs.get_mut(&key) {
            p.network = Some(net.clone());
        }
        st.ev_network.entry(net).or_default().push(ev());
        return;
    }
    if msg.starts_with("Bootstrap") && msg.contains("Using ") {
        let v = msg.split("Using ").nth(1).unwrap_or("").trim().to_string();
        let iface = v.split(':').next().unwrap_or("").to_string();
        st.ev_bootstrap.entry((h.host.to_string(), iface)).or_insert_with(ev);
        if let Some(p) = st.procs.get_mut(&key) {
            p.bootstrap = Some(v);
        }
        return;
    }
    if let Some(rest) = msg.strip_prefix("Bootstrap timings total ") {
        if let Some(p) = st.procs.get_mut(&key) {
            p.bootstrap_total_s = rest.split_whitespace().next().and_then(crate::nccl::text::finite);
        }
        return;
    }
    if msg.starts_with("NET/Plugin") {
        let plugin = if msg.contains("No plugin found")
            || msg.contains("Could not find")
            || msg.contains("Plugin load returned")
            || msg.contains("internal")
        {
            Some("internal".to_string())
        } else if let Some(x) = msg.split("Loaded net plugin ").nth(1) {
            Some(x.trim().to_string())
        } else {
            msg.split("Using ").nth(1).filter(|_| msg.contains("plugin")).map(|x| x.trim().to_string())
        };
        if let (Some(pl), Some(p)) = (plugin, st.procs.get_mut(&key)) {
            if p.net_plugin.as_deref().is_none_or(|x| x == "internal") {
                p.net_plugin = Some(pl);
            }
        }
        return;
    }
    if let Some(x) = msg
        .strip_prefix("NET/OFI Initializing ")
        .or_else(|| msg.strip_prefix("NET/OFI Using ").filter(|x| x.starts_with("aws-ofi-nccl")))
    {
        if let Some(p) = st.procs.get_mut(&key) {
            p.net_plugin = Some(x.trim().to_string());
        }
        return;
    }
    if msg.starts_with("NET/OFI") {
        // The plugin's own reason for GDR being off: `NET/OFI Could not disable CUDA API usage
        // for HMEM, disabling GDR`, `Will not use GDR, requires Libfabric 1.18 or greater`.
        let gdr = msg.contains("GDR") || msg.contains("GPUDirect") || msg.contains("GPU Direct");
        let negative =
            ["disabl", "not ", "Not ", "requires", "unsupported", "without"].iter().any(|w| msg.contains(w));
        if gdr && negative {
            if let Some(p) = st.procs.get_mut(&key) {
                if p.gdr != Some(true) {
                    p.gdr = Some(false);
                }
            }
            st.ev_gdr_plugin.push(ev());
            return;
        }
        // `Running on p4d.24xlarge platform`, `EC2 platform type is g5.48xlarge`.
        if msg.contains("platform") {
            if let Some(t) = msg.split([' ', ',', '(', ')']).find(|t| is_instance_type(t)) {
                st.ev_platform.entry((h.host.to_string(), t.to_string())).or_insert_with(ev);
                if let Some(p) = st.procs.get_mut(&key) {
                    p.platform.get_or_insert_with(|| t.to_string());
                }
            }
        }
    }
    if let Some(x) = msg.strip_prefix("NET/OFI Selected Provider is ") {
        if let Some(p) = st.procs.get_mut(&key) {
            p.ofi_provider = Some(x.trim().to_string());
            if p.net_plugin.as_deref().is_none_or(|x| x == "internal") {
                p.net_plugin = Some("aws-ofi-nccl".to_string());
            }
        }
        return;
    }
    if msg.starts_with("Failed to open libibverbs") {
        st.ev_no_ibverbs.push(ev());
        return;
    }
    if msg.contains("GPU Direct RDMA Disabled") {
        if let Some(p) = st.procs.get_mut(&key) {
            if p.gdr != Some(true) {
                p.gdr = Some(false);
            }
        }
        st.ev_gdr_off.push(ev());
        return;
    }
    if msg.contains("GPU Direct RDMA Enabled") {
        if let Some(p) = st.procs.get_mut(&key) {
            p.gdr = Some(true);
        }
        return;
    }
    // 2.19+: `Connected all rings, use ring PXN 0 GDR 1`: whether GDR is used at all.
    if msg.starts_with("Connected all rings") {
        let toks: Vec<&str> = msg.split([' ', ',']).filter(|t| !t.is_empty()).collect();
        if let (Some(g), Some(p)) = (kv(&toks, "GDR"), st.procs.get_mut(&key)) {
            if p.gdr.is_none() && (g == "0" || g == "1") {
                p.gdr = Some(g == "1");
            }
        }
        return;
    }
    if let Some(rest) = msg.strip_prefix("NET/IB : Using ").or_else(|| msg.strip_prefix("NET/IB: Using ")) {
        let devs: Vec<String> = rest
            .split(';')
            .next()
            .unwrap_or("")
            .split_whitespace()
            .filter_map(|t| t.strip_prefix('[').and_then(|x| x.split_once(']')).map(|x| x.1.to_string()))
            .filter(|x| !x.is_empty())
            .collect();
        if let (false, Some(p)) = (devs.is_empty(), st.procs.get_mut(&key)) {
            p.ib_devices = devs;
        }
        return;
    }
    if let Some(rest) =
        msg.strip_prefix("NET/Socket : Using ").or_else(|| msg.strip_prefix("NET/Socket: Using "))
    {
        let ifs: Vec<String> = rest
            .split_whitespace()
            .filter_map(|t| t.strip_prefix('[').and_then(|x| x.split_once(']')).map(|x| x.1.to_string()))
            .collect();
        // `NET/Socket: Using 2 threads and 8 sockets per thread` lists no interface.
        if let (false, Some(p)) = (ifs.is_empty(), st.procs.get_mut(&key)) {
            p.socket_interfaces = ifs;
        }
        return;
    }
    if (msg.starts_with("NCCL_") || msg.starts_with("RCCL_")) && msg.contains(" set by environment to ") {
        if let Some((k, v)) = msg.split_once(" set by environment to ") {
            let k = k.trim().to_string();
            let v = v.trim().trim_end_matches('.').to_string();
            if k == "NCCL_NET_GDR_LEVEL" {
                st.ev_gdr_env.push(ev());
            }
            if k.starts_with("RCCL_") {
                if let Some(p) = st.procs.get_mut(&key) {
                    p.library.get_or_insert_with(|| "RCCL".to_string());
                }
            }
            if (k == "NCCL_IB_DISABLE" && v == "1") || (k == "NCCL_NET" && v.eq_ignore_ascii_case("socket")) {
                st.ev_env_net.push(ev());
            }
            let p2p_off = matches!(k.as_str(), "NCCL_P2P_DISABLE" | "NCCL_SHM_DISABLE") && v == "1";
            if p2p_off || k == "NCCL_P2P_LEVEL" {
                st.ev_env_p2p.push(ev());
            }
            if let Some(p) = st.procs.get_mut(&key) {
                p.env.insert(k, v);
            }
        }
        return;
    }
    if msg.contains(" coll channels") || msg.contains(" p2p channels") {
        let toks: Vec<&str> = msg.split([',', ' ']).filter(|t| !t.is_empty()).collect();
        let mut vals: BTreeMap<String, u32> = BTreeMap::new();
        for (i, t) in toks.iter().enumerate() {
            if let Ok(v) = t.parse::<u32>() {
                let words: Vec<&str> =
                    toks.iter().skip(i + 1).take_while(|w| w.parse::<u32>().is_err()).copied().collect();
                vals.insert(words.join(" "), v);
            }
        }
        if let Some(p) = st.procs.get_mut(&key) {
            p.coll_channels = vals.get("coll channels").copied().or(p.coll_channels);
            p.p2p_channels = vals.get("p2p channels").copied().or(p.p2p_channels);
            p.p2p_channels_per_peer = vals.get("p2p channels per peer").copied().or(p.p2p_channels_per_peer);
            p.nvls_channels = vals.get("nvls channels").copied().or(p.nvls_channels);
            p.collnet_channels = vals.get("collnet channels").copied().or(p.collnet_channels);
        }
        return;
    }
    if let Some(rest) = msg.strip_prefix("Trees") {
        for part in rest.split('[').skip(1) {
            let Some((ch, body)) = part.split_once(']') else {
                continue;
            };
            let Ok(ch) = ch.trim().parse::<u32>() else {
                continue;
            };
            if let Some(t) = parse_tree(body.trim(), h, ch) {
                st.trees.insert((t.host.clone(), t.pid, t.channel, t.rank), t);
            }
        }
        return;
    }
    if let Some(rest) = msg.strip_prefix("Init timings") {
        // `Init timings - ncclCommInitAll: rank 0 nranks 1 total 0.27 (kernels 0.19, ...)`.
        let toks: Vec<&str> = rest.split([' ', ',', '(', ')', ':']).filter(|t| !t.is_empty()).collect();
        let rank = kv(&toks, "rank").and_then(|v| v.parse::<u32>().ok());
        let total = kv(&toks, "total").and_then(crate::nccl::text::finite);
        let mut parts = BTreeMap::new();
        if let Some(inner) = rest.split_once('(').map(|x| x.1) {
            for kvp in inner.trim_end_matches(')').split(',') {
                let mut it = kvp.split_whitespace();
                if let (Some(k), Some(v)) = (it.next(), it.next().and_then(crate::nccl::text::finite)) {
                    parts.insert(k.to_string(), v);
                }
            }
        }
        if let Some(r) =
            st.ranks.values_mut().rev().find(|r| r.host == h.host && r.pid == h.pid && Some(r.rank) == rank)
        {
            r.init_total_s = total;
            r.init_parts = parts;
        }
        return;
    }
    if let Some((ch, tail)) = channel_prefix(msg) {
        if tail.contains("->") && tail.contains("via") {
            if let Some(c) = parse_conn(tail, h, ch, file, n, raw) {
                st.conns.push(c);
            }
        } else {
            let ranks: Option<Vec<u32>> = tail.split_whitespace().map(|t| t.parse().ok()).collect();
            if let Some(ranks) = ranks.filter(|r| !r.is_empty()) {
                let ring = NcclRing {
                    comm: None,
                    channel: ch,
                    ranks,
                    host_crossings: None,
                    hosts: None,
                    file: file.to_string(),
                    line: n,
                };
                st.rings.push((ring, (h.host.to_string(), h.pid, h.tid)));
            }
        }
        return;
    }
    // comm lines: `comm 0x.. rank R nranks N cudaDev D busId B - Init COMPLETE`,
    // `comm 0x.. rank R nRanks N nNodes M localRanks L localRank l MNNVL 0`,
    // `ncclCommInitRank comm 0x.. rank R nranks N cudaDev D nvmlDev X busId B commId 0x.. - Init START`.
    let toks: Vec<&str> = msg.split_whitespace().collect();
    if toks.contains(&"comm") && toks.contains(&"rank") {
        let rank = kv(&toks, "rank").and_then(|v| v.parse::<u32>().ok());
        let nranks = kv(&toks, "nranks").or_else(|| kv(&toks, "nRanks")).and_then(|v| v.parse::<u32>().ok());
        let Some(rank) = rank else { return };
        let ptr = kv(&toks, "comm").map(str::to_string);
        if let Some(p) = &ptr {
            st.comm_threads.entry((h.host.to_string(), h.pid, h.tid)).or_default().insert(p.clone());
        }
        let comm_id = kv(&toks, "commId").map(str::to_string);
        // Group under a commId seen for this pointer earlier, else by size.
        let existing_id = st
            .ranks
            .values()
            .find(|r| {
                r.host == h.host
                    && r.pid == h.pid
                    && r.comm_ptr.is_some()
                    && r.comm_ptr == ptr
                    && r.rank == rank
            })
            .map(|r| r.comm.clone());
        let comm = comm_id
            .or(existing_id)
            .or_else(|| nranks.map(|x| format!("nranks={x}")))
            .unwrap_or_else(|| "unknown".to_string());
        // A commId learnt late re-keys an entry made under `nranks=N`.
        let old_key = st
            .ranks
            .iter()
            .find(|(_, r)| {
                r.host == h.host
                    && r.pid == h.pid
                    && r.comm_ptr.is_some()
                    && r.comm_ptr == ptr
                    && r.rank == rank
                    && r.comm != comm
            })
            .map(|(k, _)| k.clone());
        let moved = old_key.and_then(|k| st.ranks.remove(&k));
        let entry = st.ranks.entry((comm.clone(), rank, h.host.to_string(), h.pid)).or_insert_with(|| {
            moved.unwrap_or_else(|| NcclRank {
                comm: comm.clone(),
                comm_ptr: ptr.clone(),
                rank,
                nranks,
                host: h.host.to_string(),
                pid: h.pid,
                source: "comm line".into(),
                file: file.to_string(),
                line: n,
                ..NcclRank::default()
            })
        });
        entry.comm = comm.clone();
        entry.comm_ptr = entry.comm_ptr.clone().or(ptr);
        entry.nranks = entry.nranks.or(nranks);
        let num = |k: &str| kv(&toks, k).and_then(|v| v.parse::<i64>().ok());
        entry.cuda_dev = entry.cuda_dev.or(num("cudaDev"));
        entry.nvml_dev = entry.nvml_dev.or(num("nvmlDev"));
        entry.bus_id = entry.bus_id.clone().or(kv(&toks, "busId").map(str::to_string));
        entry.n_nodes = entry.n_nodes.or(num("nNodes").and_then(|v| u32::try_from(v).ok()));
        entry.local_ranks = entry.local_ranks.or(num("localRanks").and_then(|v| u32::try_from(v).ok()));
        entry.local_rank = entry.local_rank.or(num("localRank").and_then(|v| u32::try_from(v).ok()));
        if msg.contains("Init START") {
            entry.init_started = true;
            st.ev_init_start.insert((h.host.to_string(), h.pid, format!("{comm}#{rank}")), ev());
        }
        if msg.contains("Init COMPLETE") {
            entry.init_complete = true;
        }
        let dev = entry.cuda_dev;
        let nodes = entry.n_nodes.unwrap_or(0);
        st.max_nodes = st.max_nodes.max(nodes);
        if let Some(p) = st.procs.get_mut(&key) {
            if p.cuda_dev.is_none() {
                p.cuda_dev = dev;
            }
        }
    }
}

/// `1/8/-1->0->-1` (2.7+: down/down/down->rank->up) or `-1->0->1/-1/-1` (older: up->rank->down).
pub(super) fn parse_tree(body: &str, h: &Head<'_>, ch: u32) -> Option<NcclTree> {
    let parts: Vec<&str> = body.split("->").collect();
    let [a, r, b] = parts.as_slice() else {
        return None;
    };
    let rank = r.trim().parse().ok()?;
    let nums = |s: &str| -> Option<Vec<i64>> { s.trim().split('/').map(|x| x.trim().parse().ok()).collect() };
    let (down, up) = if a.contains('/') || !b.contains('/') {
        (nums(a)?, nums(b)?.first().copied()?)
    } else {
        (nums(b)?, nums(a)?.first().copied()?)
    };
    Some(NcclTree {
        host: h.host.to_string(),
        pid: h.pid,
        channel: ch,
        rank,
        up,
        down: down.into_iter().filter(|&d| d >= 0).collect(),
    })
}

pub(super) fn parse_conn(tail: &str, h: &Head<'_>, ch: u32, file: &str, n: u32, raw: &str) -> Option<Conn> {
    let (ends, via) = tail.split_once(" via ")?;
    let toks: Vec<&str> = ends.split_whitespace().collect();
    let arrow = toks.iter().position(|t| *t == "->")?;
    let (from, _) = bracket_rank(toks.get(arrow.checked_sub(1)?)?)?;
    let (to, _) = bracket_rank(toks.get(arrow + 1)?)?;
    let dir = if toks.contains(&"[send]") {
        Some(true)
    } else if toks.contains(&"[receive]") {
        Some(false)
    } else {
        None
    };
    Some(Conn {
        host: h.host.to_string(),
        pid: h.pid,
        tid: h.tid,
        comm: None,
        channel: ch,
        from,
        to,
        dir,
        via: via.trim().to_string(),
        file: file.to_string(),
        line: n,
        text: raw.to_string(),
    })
}

/// Transport class of a `via` description: `NET`, `P2P`, `SHM`, `COLLNET`, `NVLS`, ...
pub(super) fn transport_class(via: &str) -> String {
    via.split('/').next().unwrap_or("").trim().to_ascii_uppercase()
}

/// For `NET/<name>/<dev>[(<proxy rank>)][/GDRDMA]`: (network name, GDRDMA used). The
/// parenthesised rank (2.12+, PXN) is the rank whose NIC and proxy carry the traffic.
pub(super) fn net_of(via: &str) -> Option<(String, bool)> {
    let rest = via.strip_prefix("NET/")?;
    let segs: Vec<&str> = rest.split('/').collect();
    let dev_idx = segs.iter().position(|s| s.chars().next().is_some_and(|c| c.is_ascii_digit()))?;
    let name = segs.get(..dev_idx)?.join("/");
    let gdr = segs.iter().skip(dev_idx + 1).any(|s| s.eq_ignore_ascii_case("GDRDMA"));
    Some((name, gdr))
}

/// An EC2 instance type as the network plugin prints it: `p4d.24xlarge`, `g5.48xlarge`,
/// `p5en.48xlarge`, `trn1.32xlarge`.
pub(super) fn is_instance_type(t: &str) -> bool {
    let Some((family, size)) = t.split_once('.') else { return false };
    family.len() >= 2
        && family.starts_with(|c: char| c.is_ascii_lowercase())
        && family.chars().any(|c| c.is_ascii_digit())
        && family.chars().all(|c| c.is_ascii_alphanumeric() || c == '-')
        && (size.ends_with("large") || size == "metal")
        && size.chars().all(|c| c.is_ascii_alphanumeric())
}
