//! Peak dense tensor FLOP/s of accelerators by device name, for MFU (`rankscope runs`,
//! docs/metrics.md "Work per step"). Dense (no 2:4 sparsity), per device, at the vendor's boost
//! clock, from the vendor's datasheet named beside each row. MFU uses the BF16/FP16 figure (the
//! precision models train in); a run in FP32/TF32 or FP8 gives its own with `--peak-tflops`.

use serde::{Deserialize, Serialize};

/// One device's peak.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Peak {
    /// The name shown (`H100 SXM`).
    pub device: &'static str,
    /// Dense BF16 (or FP16 where the device has no BF16) tensor TFLOP/s.
    pub bf16_tflops: f64,
    /// Dense TF32 tensor TFLOP/s; `None` where the device has no TF32.
    pub tf32_tflops: Option<f64>,
}

/// What a device name must hold (lowercase) and must not, in order: the first row that fits.
struct Row {
    has: &'static [&'static str],
    not: &'static [&'static str],
    peak: Peak,
}

const fn row(
    has: &'static [&'static str],
    not: &'static [&'static str],
    device: &'static str,
    bf16: f64,
    tf32: Option<f64>,
) -> Row {
    Row { has, not, peak: Peak { device, bf16_tflops: bf16, tf32_tflops: tf32 } }
}

const TABLE: &[Row] = &[
    // NVIDIA H100 Tensor Core GPU datasheet: SXM 1,979 / PCIe 1,513 BF16 TFLOPS "with sparsity",
    // dense half; TF32 989 / 756 with sparsity.
    row(&["h100", "pcie"], &[], "H100 PCIe", 756.5, Some(378.0)),
    row(&["h100"], &[], "H100 SXM", 989.4, Some(494.7)),
    // NVIDIA H200 datasheet (SXM): the H100 SXM's tensor figures.
    row(&["h200"], &[], "H200", 989.4, Some(494.7)),
    // NVIDIA HGX B200 datasheet, per GPU: FP16/BF16 4.5 PFLOPS and TF32 2.2 PFLOPS with sparsity.
    row(&["b200"], &[], "B200", 2250.0, Some(1100.0)),
    // NVIDIA A100 datasheet: BF16 312, TF32 156 dense (SXM and PCIe alike).
    row(&["a100", "pcie"], &[], "A100 PCIe", 312.0, Some(156.0)),
    row(&["a100"], &[], "A100 SXM", 312.0, Some(156.0)),
    // NVIDIA V100 datasheet: FP16 tensor 125 (SXM2) / 112 (PCIe); no BF16, no TF32.
    row(&["v100", "pcie"], &[], "V100 PCIe", 112.0, None),
    row(&["v100"], &[], "V100 SXM2", 125.0, None),
    // AMD Instinct MI300X datasheet: BF16 1,307.4 dense, TF32 653.7.
    row(&["mi300x"], &[], "MI300X", 1307.4, Some(653.7)),
    // AMD Instinct MI250X datasheet: BF16 383; no TF32 (FP32 matrix 95.7).
    row(&["mi250x"], &[], "MI250X", 383.0, None),
    // NVIDIA L40S datasheet: BF16 733 and TF32 366 with sparsity.
    row(&["l40s"], &[], "L40S", 362.05, Some(183.0)),
    // NVIDIA A10 datasheet: BF16 125 and TF32 62.5 dense. The A10G is AWS's variant with no
    // datasheet of its own: the A10's figures, an upper bound for it.
    row(&["a10g"], &[], "A10G", 125.0, Some(62.5)),
    row(&["a10"], &["a100"], "A10", 125.0, Some(62.5)),
    // NVIDIA L4 datasheet: BF16 242 and TF32 120 with sparsity.
    row(&["l4"], &["l40"], "L4", 121.0, Some(60.0)),
];

/// The peak of a device name as a trace writes it (`NVIDIA H100 80GB HBM3`,
/// `AMD Instinct MI300X`), if tabulated.
pub fn peak_of(name: &str) -> Option<Peak> {
    let n = name.to_ascii_lowercase();
    TABLE
        .iter()
        .find(|r| r.has.iter().all(|h| n.contains(h)) && !r.not.iter().any(|x| n.contains(x)))
        .map(|r| r.peak)
}

crate::named_enum! {
    /// Where a run's peak came from.
    pub enum PeakFrom {
        /// The table above, by device name.
        Table => "table",
        /// `--peak-tflops`.
        Given => "given",
    }
}

/// The peak used for a run, per device.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct PeakUsed {
    pub tflops: f64,
    pub from: PeakFrom,
    /// The table's device name, when from the table.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub device: Option<String>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_find_their_rows() {
        let d = |n: &str| peak_of(n).map(|p| p.device);
        assert_eq!(d("NVIDIA H100 80GB HBM3"), Some("H100 SXM"));
        assert_eq!(d("NVIDIA H100 PCIe"), Some("H100 PCIe"));
        assert_eq!(d("NVIDIA A100-SXM4-80GB"), Some("A100 SXM"));
        assert_eq!(d("NVIDIA A100-PCIE-40GB"), Some("A100 PCIe"));
        assert_eq!(d("NVIDIA A10G"), Some("A10G"));
        assert_eq!(d("NVIDIA A10"), Some("A10"));
        assert_eq!(d("NVIDIA L40S"), Some("L40S"));
        assert_eq!(d("NVIDIA L4"), Some("L4"));
        assert_eq!(d("AMD Instinct MI300X"), Some("MI300X"));
        assert_eq!(d("Tesla V100-SXM2-32GB"), Some("V100 SXM2"));
        assert_eq!(d("NVIDIA GeForce RTX 4090"), None);
    }
}
