//! Small messages and the shape of the curve: the small-message floor against what the transport
//! should give, larger messages that finish sooner than smaller ones, and steps between adjacent
//! sizes (docs/nccl.md, "Latency"). The findings are made in `findings`.

use super::*;

/// Rows up to this size (8 KiB) measure the small-message floor: the latency-bound end of every
/// curve (NCCL's low-latency protocols carry them; the bandwidth term is below a microsecond
/// even at 10 GB/s).
pub const SMALL_MESSAGE_MAX_BYTES: u64 = 8 * 1024;

/// Inside one node (NVLink / NVSwitch, xGMI, PCIe) a floor above this (µs) is not what the
/// GPUs' links give. NCCL's tuning model (`src/graph/tuning.cc`) puts a collective's base
/// latency at 6.6–6.8 µs and adds 0.6 µs per NVLink hop (1.0 per PCIe hop) with the LL
/// protocol: about 15 µs for a ring over 8 GPUs; published one-node floors are 5–20 µs.
pub const INTRA_NODE_FLOOR_MAX_US: f64 = 50.0;

/// Across nodes over InfiniBand or RoCE: NCCL's model adds 2.7 µs (ring) to 5 µs (tree) per
/// network step with LL, which puts a 2-node floor near 25–30 µs; tens of µs is normal, this
/// (µs) is several times that.
pub const RDMA_FLOOR_MAX_US: f64 = 100.0;

/// Across nodes over AWS EFA (aws-ofi-nccl): the plugin itself tells NCCL to assume 150 µs per
/// inter-node step (`NET/OFI Internode latency set at 150.0 us`), and p4de floors of 160 µs are
/// measured; twice the plugin's figure (µs) is beyond it.
pub const EFA_FLOOR_MAX_US: f64 = 300.0;

/// Across nodes when the output does not name the network: above this (µs) no RDMA fabric
/// explains the floor (InfiniBand / RoCE give tens of µs, EFA 150-180); TCP sockets give
/// hundreds.
pub const UNKNOWN_NETWORK_FLOOR_MAX_US: f64 = 200.0;

/// A multi-node floor more than this many times the one-node floor of the same collective:
/// NCCL's model makes a 2-node floor about 2× one node's (one network step at 2.7–5 µs on top of
/// ~15 µs); 5× is what no single network hop explains.
pub const INTERNODE_RATIO_MAX: f64 = 5.0;

/// A larger message counts as faster than the smaller one before it when both of its
/// measurements (out-of-place and in-place) are at least this share faster than both of the
/// smaller one's: the two measurements of one row differ by up to ~13% in the shared tables.
pub const NON_MONOTONIC_TOLERANCE: f64 = 0.15;

/// A step: the time's growth between adjacent sizes, as a slope in log–log space (0 where
/// latency-bound, 1 where bandwidth-bound, never above 1 in the α + S/B model), exceeds both
/// neighbouring pairs' slopes by this much, in both measurements, and either...
pub const STEP_SLOPE_EXCESS: f64 = 0.5;
/// ...algbw drops by at least this share from the smaller size to the larger (time grows
/// faster than size: the larger size took a slower path), or...
pub const STEP_ALGBW_DROP: f64 = 0.10;
/// ...the curve is flat on both sides (neighbouring slopes at most this: the latency-bound
/// region) and the time jumps at least [`STEP_MIN_JUMP`]× between the two sizes: a protocol or
/// algorithm switch among small messages.
pub const STEP_FLAT_SLOPE: f64 = 0.3;
pub const STEP_MIN_JUMP: f64 = 1.3;
/// Pairs of sizes closer than this ratio (fixed `-i` increments) are not judged for steps:
/// noise dominates their slope.
const STEP_MIN_SIZE_RATIO: f64 = 1.5;

/// The path small messages take, as far as the output tells it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FloorTransport {
    /// One host: NVLink / NVSwitch, xGMI or PCIe between its GPUs.
    IntraNode,
    /// Several hosts over InfiniBand or RoCE (`Using network IB`, `via NET/IB/..`).
    Rdma,
    /// Several hosts over AWS EFA (the aws-ofi-nccl plugin: `AWS Libfabric`, `NET/OFI`).
    Efa,
    /// Several hosts, the network not named in the output.
    UnknownNetwork,
}

impl FloorTransport {
    /// Above this (µs) the floor is a finding.
    pub fn max_us(self) -> f64 {
        match self {
            Self::IntraNode => INTRA_NODE_FLOOR_MAX_US,
            Self::Rdma => RDMA_FLOOR_MAX_US,
            Self::Efa => EFA_FLOOR_MAX_US,
            Self::UnknownNetwork => UNKNOWN_NETWORK_FLOOR_MAX_US,
        }
    }

    /// What the finding names: `one node's GPU links`, `an IB/RoCE fabric`.
    pub fn described(self) -> &'static str {
        match self {
            Self::IntraNode => "one node's GPU links",
            Self::Rdma => "an IB/RoCE fabric",
            Self::Efa => "an EFA fabric",
            Self::UnknownNetwork => "a network fabric",
        }
    }

    /// Where the threshold comes from, in a few words.
    pub fn basis(self) -> &'static str {
        match self {
            Self::IntraNode => "NCCL's tuning model: ~7 µs base + 0.6 µs per NVLink hop, ~15 µs for 8 GPUs",
            Self::Rdma => "NCCL's tuning model: 2.7-5 µs per network step, ~25-30 µs for 2 nodes",
            Self::Efa => "aws-ofi-nccl assumes 150 µs per inter-node step",
            Self::UnknownNetwork => "InfiniBand/RoCE give tens of µs, EFA 150-180 µs, TCP sockets hundreds",
        }
    }
}

/// What a test's transport should give for its small-message floor.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ExpectedFloor {
    pub transport: FloorTransport,
    /// Above this (µs) the floor is a finding: [`FloorTransport::max_us`].
    pub max_us: f64,
}

/// Collectives whose floor does not grow with the rank count (AllToAll, Gather and Scatter send
/// to every peer: their floor grows with n and is left out).
pub(super) fn floor_comparable(c: Option<CollKind>) -> bool {
    matches!(
        c,
        Some(
            CollKind::AllReduce
                | CollKind::AllGather
                | CollKind::ReduceScatter
                | CollKind::Broadcast
                | CollKind::Reduce
                | CollKind::SendRecv
        )
    )
}

/// The floor a test's transport should stay under, when the output tells the transport: one
/// host (device lines) is intra-node; several hosts use the network the file's NCCL lines name
/// (none for TCP sockets: slow by nature, and reported as such by `log.net-socket-multinode` and
/// `tests.low-multinode-busbw`).
pub fn expected_floor(t: &PerfTest) -> Option<ExpectedFloor> {
    if !floor_comparable(t.collective) || t.n_ranks.is_some_and(|n| n < 2) {
        return None;
    }
    let transport = match t.hosts.len() {
        0 => return None,
        1 => FloorTransport::IntraNode,
        _ => {
            let net = t.network.as_deref().map(str::to_ascii_lowercase);
            match net.as_deref() {
                Some(n) if n.contains("socket") => return None,
                Some(n) if n.starts_with("ib") || n.contains("roce") => FloorTransport::Rdma,
                Some(n) if n.contains("libfabric") || n.contains("ofi") => FloorTransport::Efa,
                _ => FloorTransport::UnknownNetwork,
            }
        }
    };
    Some(ExpectedFloor { transport, max_us: transport.max_us() })
}

/// The shorter of a row's two measurements (either may be absent as 0 or negative).
pub(super) fn best_time(r: &PerfRow) -> Option<f64> {
    [r.out_of_place.time_us, r.in_place.time_us].into_iter().filter(|t| *t > 0.0).reduce(f64::min)
}

/// Rows with a size and two positive times, by size, one per size (the first printed).
pub(super) fn curve_rows(t: &PerfTest) -> Vec<&PerfRow> {
    let mut rows: Vec<&PerfRow> = t
        .rows
        .iter()
        .filter(|r| r.size_bytes > 0 && r.out_of_place.time_us > 0.0 && r.in_place.time_us > 0.0)
        .collect();
    rows.sort_by_key(|r| r.size_bytes);
    rows.dedup_by_key(|r| r.size_bytes);
    rows
}

/// The small-message floor: the shortest time (best of the two measurements) among the rows of
/// 1 B to [`SMALL_MESSAGE_MAX_BYTES`], with its row.
pub(super) fn floor(t: &PerfTest) -> Option<(f64, &PerfRow)> {
    t.rows
        .iter()
        .filter(|r| r.size_bytes > 0 && r.size_bytes <= SMALL_MESSAGE_MAX_BYTES)
        .filter_map(|r| best_time(r).map(|x| (x, r)))
        .min_by(|a, b| a.0.total_cmp(&b.0).then(a.1.size_bytes.cmp(&b.1.size_bytes)))
}

/// Adjacent sizes where the larger one finishes sooner, beyond noise: both of its measurements
/// are at least [`NON_MONOTONIC_TOLERANCE`] faster than both of the smaller one's.
pub(super) fn inversions(t: &PerfTest) -> Vec<(&PerfRow, &PerfRow)> {
    let rows = curve_rows(t);
    rows.windows(2)
        .filter_map(|w| match w {
            [a, b] => {
                let slow_b = b.out_of_place.time_us.max(b.in_place.time_us);
                let fast_a = a.out_of_place.time_us.min(a.in_place.time_us);
                (slow_b < (1.0 - NON_MONOTONIC_TOLERANCE) * fast_a).then_some((*a, *b))
            }
            _ => None,
        })
        .collect()
}

/// A step between two adjacent sizes: how much the time grew (× in the out-of-place
/// measurement), and how much the neighbouring pairs grew at most (×, out-of-place).
#[derive(Debug, Clone, Copy)]
pub(super) struct Step<'a> {
    pub from: &'a PerfRow,
    pub to: &'a PerfRow,
    pub jump: f64,
    pub neighbours: f64,
}

/// Steps in the curve, between adjacent sizes at least 1.5× apart, seen alike in the
/// out-of-place and the in-place measurement: the pair's log–log slope exceeds both neighbouring
/// pairs' slopes by [`STEP_SLOPE_EXCESS`], and either algbw drops by [`STEP_ALGBW_DROP`] (a
/// slower path for the larger size) or the curve is flat on both sides
/// ([`STEP_FLAT_SLOPE`]) and the time jumps [`STEP_MIN_JUMP`]× (a switch among small messages).
/// A sharp knee, where the curve turns from flat to bandwidth-bound and stays there, is neither.
/// Rows that take part in an inversion are left out (the inversion is the finding there).
pub(super) fn steps(t: &PerfTest) -> Vec<Step<'_>> {
    let inv: Vec<u64> = inversions(t).iter().flat_map(|(a, b)| [a.size_bytes, b.size_bytes]).collect();
    let rows: Vec<&PerfRow> = curve_rows(t).into_iter().filter(|r| !inv.contains(&r.size_bytes)).collect();
    // Eligible pairs, in size order: (from, to, size ratio).
    let pairs: Vec<(&PerfRow, &PerfRow, f64)> = rows
        .windows(2)
        .filter_map(|w| match w {
            [a, b] => {
                let sr = b.size_bytes as f64 / a.size_bytes as f64;
                (sr >= STEP_MIN_SIZE_RATIO).then_some((*a, *b, sr))
            }
            _ => None,
        })
        .collect();
    let time =
        |r: &PerfRow, in_place: bool| if in_place { r.in_place.time_us } else { r.out_of_place.time_us };
    let slope = |p: &(&PerfRow, &PerfRow, f64), ip: bool| (time(p.1, ip) / time(p.0, ip)).ln() / p.2.ln();
    let mut out = Vec::new();
    for (i, p) in pairs.iter().enumerate() {
        let (a, b, sr) = *p;
        // Neighbours: the pairs that share a row with this one.
        let before = i.checked_sub(1).and_then(|j| pairs.get(j)).filter(|q| std::ptr::eq(q.1, a));
        let after = pairs.get(i + 1).filter(|q| std::ptr::eq(q.0, b));
        if before.is_none() && after.is_none() {
            continue;
        }
        let is_step = |ip: bool| {
            let s = slope(p, ip);
            let nb: Vec<f64> = before.iter().chain(after.iter()).map(|q| slope(q, ip)).collect();
            let max_nb = nb.iter().copied().fold(f64::NEG_INFINITY, f64::max);
            let jump = time(b, ip) / time(a, ip);
            let drop = 1.0 - sr / jump;
            let flat = before.is_some() && after.is_some() && max_nb <= STEP_FLAT_SLOPE;
            s - max_nb >= STEP_SLOPE_EXCESS && (drop >= STEP_ALGBW_DROP || (flat && jump >= STEP_MIN_JUMP))
        };
        if is_step(false) && is_step(true) {
            let neighbours = before
                .iter()
                .chain(after.iter())
                .map(|q| time(q.1, false) / time(q.0, false))
                .fold(f64::NEG_INFINITY, f64::max);
            out.push(Step { from: a, to: b, jump: time(b, false) / time(a, false), neighbours });
        }
    }
    out
}

/// `8`, `512 B`, `64 KiB`, `16 GiB`: sizes as the findings print them.
pub(super) fn size_h(b: u64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut v = b as f64;
    let mut u = 0;
    while v >= 1024.0 && u + 1 < UNITS.len() {
        v /= 1024.0;
        u += 1;
    }
    let unit = UNITS.get(u).copied().unwrap_or("B");
    if (v - v.round()).abs() < 1e-9 {
        format!("{v:.0} {unit}")
    } else {
        format!("{v:.1} {unit}")
    }
}
