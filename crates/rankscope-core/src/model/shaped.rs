//! The operators whose `Input Dims` the parser keeps (`record_shapes=True`): those whose FLOPs
//! are counted from shapes and those whose first input is the model's batch
//! (`crate::analyze::work`, docs/metrics.md "Work per step"). One list for the parser and the
//! analysis.

/// The convolution ops (after `aten::`), forward and backward.
const CONV_PREFIXES: &[&str] = &[
    "conv1d",
    "conv2d",
    "conv3d",
    "conv_transpose",
    "convolution",
    "_convolution",
    "cudnn_convolution",
    "mkldnn_convolution",
    "miopen_convolution",
    "slow_conv",
    "_slow_conv",
];

/// An operator counted from its shapes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ShapedOp {
    /// `aten::linear(input [.., K], weight [N, K], bias)`.
    Linear,
    /// `aten::matmul(a, b)`, any ranks (broadcast batch dims).
    Matmul,
    /// `aten::mm(a [M, K], b [K, N])`.
    Mm,
    /// `aten::addmm(bias, a [M, K], b [K, N])`.
    Addmm,
    /// `aten::bmm(a [B, M, K], b [B, K, N])`.
    Bmm,
    /// `aten::baddbmm(c, a [B, M, K], b [B, K, N])`.
    Baddbmm,
    /// `aten::conv*d` / `aten::convolution` / `aten::_convolution` and the backward: kept for
    /// the batch; their FLOPs need the output size (stride, padding), which shapes alone do not
    /// give, so they are named among the ops not counted.
    Conv,
    /// `aten::scaled_dot_product_attention(q [B, H, L, E], k [B, H, S, E], v [B, H, S, Ev])` and
    /// the fused forward kernels' ops.
    Attention,
    /// The fused attention backward ops (`aten::_scaled_dot_product_*_backward`); `flash` ones
    /// recompute the scores.
    AttentionBackward { flash: bool },
    /// `aten::embedding(weight [V, D], indices [..])`: no FLOPs, its indices are the batch.
    Embedding,
}

impl ShapedOp {
    /// The op an operator name stands for, if any.
    pub fn of(name: &str) -> Option<ShapedOp> {
        let op = name.strip_prefix("aten::")?;
        Some(match op {
            "linear" => ShapedOp::Linear,
            "matmul" => ShapedOp::Matmul,
            "mm" => ShapedOp::Mm,
            "addmm" => ShapedOp::Addmm,
            "bmm" => ShapedOp::Bmm,
            "baddbmm" => ShapedOp::Baddbmm,
            "embedding" => ShapedOp::Embedding,
            "scaled_dot_product_attention"
            | "_scaled_dot_product_flash_attention"
            | "_scaled_dot_product_flash_attention_for_cpu"
            | "_scaled_dot_product_efficient_attention"
            | "_scaled_dot_product_cudnn_attention"
            | "_flash_attention_forward"
            | "_efficient_attention_forward" => ShapedOp::Attention,
            "_scaled_dot_product_flash_attention_backward"
            | "_scaled_dot_product_flash_attention_for_cpu_backward"
            | "_flash_attention_backward" => ShapedOp::AttentionBackward { flash: true },
            "_scaled_dot_product_efficient_attention_backward"
            | "_scaled_dot_product_cudnn_attention_backward"
            | "_efficient_attention_backward" => ShapedOp::AttentionBackward { flash: false },
            _ if CONV_PREFIXES.iter().any(|p| op.starts_with(p)) => ShapedOp::Conv,
            _ => return None,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names() {
        assert_eq!(ShapedOp::of("aten::linear"), Some(ShapedOp::Linear));
        assert_eq!(ShapedOp::of("aten::conv2d"), Some(ShapedOp::Conv));
        assert_eq!(ShapedOp::of("aten::convolution_backward"), Some(ShapedOp::Conv));
        assert_eq!(ShapedOp::of("aten::t"), None);
        assert_eq!(ShapedOp::of("aten::contiguous"), None);
        assert_eq!(ShapedOp::of("mm"), None);
        assert_eq!(
            ShapedOp::of("aten::_scaled_dot_product_flash_attention_backward"),
            Some(ShapedOp::AttentionBackward { flash: true })
        );
    }
}
