//! What a test's GPUs and hosts are joined by: how many nodes it spans (the device lines'
//! hosts), the GPUs' own link inside a node (NVLink generation or PCIe generation, from the
//! device name), and the network across nodes (the file's NCCL lines: its name and its NICs'
//! speed). The assumed peak of a test comes from here, and so does the advice: one node gets
//! NVLink / PCIe / P2P advice, several nodes get network advice (docs/nccl.md, "Topology").
//!
//! Every figure is one direction, per GPU, in GB/s (the unit busbw is printed in), from the
//! vendor's datasheet named beside its row; datasheets print both directions together, so the
//! figure here is half of theirs.

use serde::{Deserialize, Serialize};

use super::{Peak, PerfTest};

crate::named_enum! {
    /// How many nodes a test spans.
    pub enum NodeScope {
        /// Every device line names the same host.
        OneNode => "one_node",
        /// The device lines name several hosts.
        MultiNode => "multi_node",
        /// No device lines: the output does not say.
        Unknown => "unknown",
    }
}

crate::named_enum! {
    /// The kind of link a figure is of.
    pub enum LinkKind {
        NvLink => "nvlink",
        Pcie => "pcie",
        Network => "network",
    }
}

/// One link's bandwidth and where the figure comes from.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LinkFigure {
    pub kind: LinkKind,
    /// NVLink 2..5 or PCIe 3..5; absent for a network.
    pub generation: Option<u8>,
    /// One direction, per GPU (NVLink, PCIe) or per node (network: every NIC together), GB/s.
    pub gbps: f64,
    /// The source of the figure: `NVIDIA H100 datasheet: NVLink 900 GB/s per GPU`.
    pub source: String,
}

/// A test's topology as far as its output tells it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Topology {
    pub scope: NodeScope,
    /// Distinct hosts of the device lines; absent without device lines.
    pub nodes: Option<u32>,
    /// The GPUs' link inside a node, when the device name is tabulated and every device has it.
    pub gpu_link: Option<LinkFigure>,
    /// The network across nodes, when the file's NCCL lines give the NICs' speed.
    pub network_link: Option<LinkFigure>,
}

impl Default for Topology {
    fn default() -> Self {
        Topology { scope: NodeScope::Unknown, nodes: None, gpu_link: None, network_link: None }
    }
}

/// One row of the device table: what the name must hold (uppercase) and must not, the link.
struct Row {
    has: &'static [&'static str],
    not: &'static [&'static str],
    kind: LinkKind,
    generation: u8,
    /// Both directions together, per GPU, as the datasheet prints it (GB/s).
    datasheet_gbps: f64,
    source: &'static str,
}

const fn nv(
    has: &'static [&'static str],
    not: &'static [&'static str],
    g: u8,
    gbps: f64,
    source: &'static str,
) -> Row {
    Row { has, not, kind: LinkKind::NvLink, generation: g, datasheet_gbps: gbps, source }
}

const fn pcie(
    has: &'static [&'static str],
    not: &'static [&'static str],
    g: u8,
    gbps: f64,
    source: &'static str,
) -> Row {
    Row { has, not, kind: LinkKind::Pcie, generation: g, datasheet_gbps: gbps, source }
}

/// The first row that fits wins: PCIe cards before the SXM parts of the same name. A PCIe card
/// with an NVLink bridge (A100 PCIe, H100 NVL, H200 NVL) joins only 2 or 4 GPUs by the bridge;
/// across a node its GPUs meet over PCIe, the figure here.
const TABLE: &[Row] = &[
    // NVIDIA H100 datasheet: H100 PCIe and H100 NVL "PCIe Gen5: 128GB/s".
    pcie(&["H100", "PCIE"], &[], 5, 128.0, "NVIDIA H100 datasheet: PCIe Gen5 128 GB/s"),
    pcie(
        &["H100", "NVL"],
        &[],
        5,
        128.0,
        "NVIDIA H100 datasheet: H100 NVL, PCIe Gen5 128 GB/s (the NVLink bridge joins pairs only)",
    ),
    pcie(
        &["H200", "NVL"],
        &[],
        5,
        128.0,
        "NVIDIA H200 datasheet: H200 NVL, PCIe Gen5 128 GB/s (the NVLink bridge joins 2 or 4 GPUs only)",
    ),
    // NVIDIA H800 (SXM5) datasheet: NVLink 400 GB/s.
    nv(&["H800"], &["PCIE"], 4, 400.0, "NVIDIA H800 datasheet: NVLink 400 GB/s"),
    // NVIDIA H100 / H200 datasheets (SXM): NVLink 900 GB/s (NVLink 4, 18 links).
    nv(&["H100"], &[], 4, 900.0, "NVIDIA H100 datasheet: SXM NVLink 900 GB/s"),
    nv(&["H200"], &[], 4, 900.0, "NVIDIA H200 datasheet: SXM NVLink 900 GB/s"),
    // NVIDIA HGX B200 / GB200 NVL72 datasheets: NVLink 5, 1.8 TB/s per GPU.
    nv(&["B200"], &[], 5, 1800.0, "NVIDIA HGX B200 / GB200 datasheets: NVLink 5, 1.8 TB/s per GPU"),
    // NVIDIA A100 datasheet: A100 PCIe "PCIe Gen4: 64GB/s"; SXM "NVLink: 600GB/s".
    pcie(
        &["A100", "PCIE"],
        &[],
        4,
        64.0,
        "NVIDIA A100 datasheet: PCIe Gen4 64 GB/s (the NVLink bridge joins pairs only)",
    ),
    nv(&["A100"], &[], 3, 600.0, "NVIDIA A100 datasheet: SXM NVLink 600 GB/s"),
    // NVIDIA A800 datasheet: NVLink 400 GB/s (SXM).
    pcie(&["A800", "PCIE"], &[], 4, 64.0, "NVIDIA A800 datasheet: PCIe Gen4 64 GB/s"),
    nv(&["A800"], &[], 3, 400.0, "NVIDIA A800 datasheet: SXM NVLink 400 GB/s"),
    // NVIDIA V100 datasheet: SXM2 "NVLink 300 GB/s"; PCIe "Interconnect bandwidth 32 GB/s".
    pcie(&["V100", "PCIE"], &[], 3, 32.0, "NVIDIA V100 datasheet: PCIe Gen3 32 GB/s"),
    nv(&["V100", "SXM2"], &[], 2, 300.0, "NVIDIA V100 datasheet: SXM2 NVLink 300 GB/s"),
    // NVIDIA L40S / L4 / A10 datasheets: PCIe Gen4 x16 64 GB/s; the A10G (AWS) has the A10's.
    pcie(&["L40S"], &[], 4, 64.0, "NVIDIA L40S datasheet: PCIe Gen4 x16 64 GB/s"),
    pcie(&["L4"], &["L40"], 4, 64.0, "NVIDIA L4 datasheet: PCIe Gen4 x16 64 GB/s"),
    pcie(&["A10"], &["A100"], 4, 64.0, "NVIDIA A10 datasheet: PCIe Gen4 64 GB/s (A10G: the A10's)"),
    // NVIDIA T4 datasheet: PCIe Gen3 x16 32 GB/s.
    pcie(&["T4"], &[], 3, 32.0, "NVIDIA T4 datasheet: PCIe Gen3 x16 32 GB/s"),
];

/// The GPU link of a device name as nccl-tests prints it (`NVIDIA H100 80GB HBM3`), if
/// tabulated.
pub fn gpu_link_of(name: &str) -> Option<LinkFigure> {
    let n = name.to_ascii_uppercase();
    let words: Vec<&str> = n.split(|c: char| !c.is_ascii_alphanumeric()).collect();
    // A word holds `s` when no digit follows it there: `A10G` holds `A10`, `A100` does not;
    // `L40S` does not hold `L4`; `GB200` holds `B200`.
    let holds = |s: &str| {
        words.iter().any(|w| {
            w.match_indices(s).any(|(i, _)| !w[i + s.len()..].starts_with(|c: char| c.is_ascii_digit()))
        })
    };
    let row =
        TABLE.iter().find(|r| r.has.iter().all(|s| holds(s)) && !r.not.iter().any(|s| n.contains(s)))?;
    Some(LinkFigure {
        kind: row.kind,
        generation: Some(row.generation),
        gbps: row.datasheet_gbps / 2.0,
        source: format!("{}, {} one way", row.source, row.datasheet_gbps / 2.0),
    })
}

/// The topology of a test: its hosts, its devices' link, and the network its NCCL lines name
/// with the NICs' speed (`nic_gbits`: every NIC of a node together, Gb/s).
pub fn topology_of(t: &PerfTest, nic_gbits: Option<(u32, f64)>) -> Topology {
    let nodes = (!t.hosts.is_empty()).then(|| u32::try_from(t.hosts.len()).unwrap_or(u32::MAX));
    let scope = match nodes {
        None => NodeScope::Unknown,
        Some(1) => NodeScope::OneNode,
        Some(_) => NodeScope::MultiNode,
    };
    let first = t.devices.first().map(|d| d.name.to_ascii_uppercase());
    let same = first.as_ref().is_some_and(|f| t.devices.iter().all(|d| d.name.to_ascii_uppercase() == *f));
    let gpu_link = if same { t.devices.first().and_then(|d| gpu_link_of(&d.name)) } else { None };
    let network_link = nic_gbits.filter(|(_, g)| g.is_finite() && *g > 0.0).map(|(n, g)| LinkFigure {
        kind: LinkKind::Network,
        generation: None,
        gbps: g / 8.0,
        source: format!(
            "the file's NCCL lines: {n} NIC(s), {g} Gb/s together, {} GB/s per node one way",
            g / 8.0
        ),
    });
    Topology { scope, nodes, gpu_link, network_link }
}

/// The peak a test is compared with when the user gave none: inside one node the GPUs' link,
/// across nodes the NICs of a node together (a ring crosses each node's NICs with the whole
/// busbw), else none. Never for one rank.
pub(super) fn assumed_peak(t: &PerfTest) -> Option<Peak> {
    if t.devices.len() < 2 && t.topology.scope != NodeScope::MultiNode {
        return None;
    }
    let (l, where_) = match t.topology.scope {
        NodeScope::OneNode => (t.topology.gpu_link.as_ref()?, "one node"),
        NodeScope::MultiNode => (t.topology.network_link.as_ref()?, "across nodes"),
        NodeScope::Unknown => return None,
    };
    Some(Peak { gbps: l.gbps, source: format!("assumed: {} ({where_})", l.source), user_given: false })
}

/// Why a peak was set aside: the test measured more than it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PeakSetAside {
    /// The peak that was assumed or given.
    pub peak: Peak,
    /// The highest busbw the test measured, above it.
    pub measured_gbps: f64,
    pub why: String,
}

/// The peak stands only while nothing measured exceeds it: a measured busbw above the figure
/// means the figure is not this link's (an in-switch reduction, NVLS, lifts AllReduce and
/// ReduceScatter above the NVLink rate on NVSwitch systems; a mistyped `--peak-gbps`). Then the
/// peak is unknown and the figure is kept with the reason.
pub(super) fn checked_peak(
    t: &PerfTest,
    peak: Option<Peak>,
    max_busbw: f64,
) -> (Option<Peak>, Option<PeakSetAside>) {
    let Some(p) = peak else { return (None, None) };
    if max_busbw <= p.gbps {
        return (Some(p), None);
    }
    let nvswitch_reduce = t.topology.scope == NodeScope::OneNode
        && t.topology
            .gpu_link
            .as_ref()
            .is_some_and(|l| l.kind == LinkKind::NvLink && l.generation >= Some(4))
        && matches!(
            t.collective,
            Some(crate::model::CollKind::AllReduce | crate::model::CollKind::ReduceScatter)
        );
    let why = if p.user_given {
        "the given peak is below what the test measured: check --peak-gbps (GB/s, one direction)".to_string()
    } else if nvswitch_reduce {
        "the test measured more than the link carries: NVLink SHARP (NVLS) reduces inside the NVSwitch, so this collective's busbw is not bounded by the per-GPU NVLink rate".to_string()
    } else {
        "the test measured more than the assumed figure, so it is not this system's link (give --peak-gbps)"
            .to_string()
    };
    (None, Some(PeakSetAside { peak: p, measured_gbps: max_busbw, why }))
}
