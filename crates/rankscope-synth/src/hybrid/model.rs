//! What a hybrid job's GPUs run: the kernels (the DDP model's compute kernels, plus the NCCL
//! kernels of each collective, dtype and protocol, the mixture-of-experts and optimizer kernels)
//! and how long each takes on an H100 for the job's sizes.
//!
//! Durations are nominal: GEMMs and attention from their FLOPs at a sustained 450 TFLOP/s
//! (attention 300), elementwise kernels from the bytes they move at 2.5 TB/s, each at least
//! 3 µs; the simulator scales them by the rank's speed in that step and ±3 % noise per kernel.
//! A collective takes `α + f · S / busbw` once every member has arrived (f the core's
//! bus-bandwidth factor, S the larger of its input and output bytes; an all_to_all with uneven
//! splits: `α + max over members of the bytes it sends or receives to others / busbw`; a send or
//! receive `α + S / busbw`), busbw NVLink's inside a host and the network's across hosts.

use crate::model::{kernels, KernelId, KernelSpec, KERNELS as DDP};
use crate::model::{
    K_ADAMW, K_ADD, K_EMBED, K_EMBED_BWD, K_FLASH_BWD, K_FLASH_BWD_CONVERT, K_FLASH_BWD_DOT, K_FLASH_FWD,
    K_GELU, K_GELU_BWD, K_GEMM_DGRAD, K_GEMM_FC1, K_GEMM_FC2, K_GEMM_LM, K_GEMM_PROJ, K_GEMM_QKV,
    K_GEMM_WGRAD, K_GRAD_ADD_W, K_LN_BWD_GAMMA, K_LN_BWD_INPUT, K_LN_FWD, K_LOGSOFTMAX, K_LOGSOFTMAX_BWD,
    K_NCCL_SENDRECV, K_NLL_BWD, K_NLL_FWD,
};

use super::Hybrid;

kernels! {
    H_L2NORM = "void multi_tensor_apply_kernel<TensorListMetadata<1>, L2NormFunctor<float>, float*, float*, bool, int>(long, int volatile*, TensorListMetadata<1>, L2NormFunctor<float>, float*, float*, bool, int)",
        0, 40, 0, [320, 1, 1], [512, 1, 1], 62;
    H_ROUTER = "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize64x64x64_warpgroupsize1x1x1_execute_segment_k_off_kernel__5x_cublas",
        0, 154, 98_304, [64, 1, 1], [128, 1, 1], 19;
    H_TOPK = "void at::native::sbtopk::gatherTopK<float, unsigned int, 2, false>(at::cuda::detail::TensorInfo<float const, unsigned int>, unsigned int, unsigned int, bool, unsigned int, unsigned int, at::cuda::detail::TensorInfo<float, unsigned int>, unsigned int, at::cuda::detail::TensorInfo<long, unsigned int>, unsigned int, unsigned int*)",
        0, 32, 2_048, [4096, 1, 1], [128, 1, 1], 100;
    H_PERMUTE = "void at::native::(anonymous namespace)::indexSelectLargeIndex<c10::BFloat16, long, unsigned int, 2, 2, -2, true>(at::cuda::detail::TensorInfo<c10::BFloat16, unsigned int>, at::cuda::detail::TensorInfo<c10::BFloat16 const, unsigned int>, at::cuda::detail::TensorInfo<long const, unsigned int>, int, int, unsigned int, unsigned int, long)",
        0, 30, 0, [8192, 1, 1], [128, 1, 1], 100;
    H_EXPERT_GEMM = "void cutlass::Kernel2<cutlass_80_tensorop_bf16_s16816gemm_relu_bf16_256x128_32x3_tn_align8>(cutlass_80_tensorop_bf16_s16816gemm_relu_bf16_256x128_32x3_tn_align8::Params)",
        0, 230, 98_304, [32, 16, 1], [256, 1, 1], 12;
    H_UNPERMUTE = "void at::native::_scatter_gather_elementwise_kernel<128, 8, at::native::_cuda_scatter_gather_internal_kernel<true, c10::BFloat16>::operator()<at::native::ReduceAdd>(at::TensorIterator&, long, long, long, at::native::ReduceAdd const&)::{lambda(int)#1}>(int, at::native::_cuda_scatter_gather_internal_kernel<true, c10::BFloat16>::operator()<at::native::ReduceAdd>(at::TensorIterator&, long, long, long, at::native::ReduceAdd const&)::{lambda(int)#1})",
        0, 34, 0, [16384, 1, 1], [128, 1, 1], 100;
    H_AR_BF16_LL = "ncclDevKernel_AllReduce_Sum_bf16_RING_LL(ncclDevKernelArgsStorage<4096ul>)",
        0, 96, 103_808, [24, 1, 1], [640, 1, 1], 0;
    H_AR_BF16_LL128 = "ncclDevKernel_AllReduce_Sum_bf16_RING_LL128(ncclDevKernelArgsStorage<4096ul>)",
        0, 96, 103_808, [24, 1, 1], [640, 1, 1], 0;
    H_AR_BF16_SIMPLE = "ncclDevKernel_AllReduce_Sum_bf16_RING_SIMPLE(ncclDevKernelArgsStorage<4096ul>)",
        0, 96, 103_808, [24, 1, 1], [544, 1, 1], 0;
    H_AR_F32_LL = "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevKernelArgsStorage<4096ul>)",
        0, 96, 103_808, [24, 1, 1], [640, 1, 1], 0;
    H_AR_F32_LL128 = "ncclDevKernel_AllReduce_Sum_f32_RING_LL128(ncclDevKernelArgsStorage<4096ul>)",
        0, 96, 103_808, [24, 1, 1], [640, 1, 1], 0;
    H_AR_F32_SIMPLE = "ncclDevKernel_AllReduce_Sum_f32_RING_SIMPLE(ncclDevKernelArgsStorage<4096ul>)",
        0, 96, 103_808, [24, 1, 1], [544, 1, 1], 0;
    H_RS_F32_LL = "ncclDevKernel_ReduceScatter_Sum_f32_RING_LL(ncclDevKernelArgsStorage<4096ul>)",
        0, 96, 103_808, [24, 1, 1], [640, 1, 1], 0;
    H_RS_F32_LL128 = "ncclDevKernel_ReduceScatter_Sum_f32_RING_LL128(ncclDevKernelArgsStorage<4096ul>)",
        0, 96, 103_808, [24, 1, 1], [640, 1, 1], 0;
    H_RS_F32_SIMPLE = "ncclDevKernel_ReduceScatter_Sum_f32_RING_SIMPLE(ncclDevKernelArgsStorage<4096ul>)",
        0, 96, 103_808, [24, 1, 1], [544, 1, 1], 0;
    H_AG_LL = "ncclDevKernel_AllGather_RING_LL(ncclDevKernelArgsStorage<4096ul>)",
        0, 96, 103_808, [24, 1, 1], [640, 1, 1], 0;
    H_AG_LL128 = "ncclDevKernel_AllGather_RING_LL128(ncclDevKernelArgsStorage<4096ul>)",
        0, 96, 103_808, [24, 1, 1], [640, 1, 1], 0;
    H_AG_SIMPLE = "ncclDevKernel_AllGather_RING_SIMPLE(ncclDevKernelArgsStorage<4096ul>)",
        0, 96, 103_808, [24, 1, 1], [544, 1, 1], 0;
}

/// A kernel of either table: the DDP model's ([`crate::model::KERNELS`]) or this module's.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kern {
    Ddp(KernelId),
    Own(KernelId),
}

impl Kern {
    pub fn spec(self) -> Option<&'static KernelSpec> {
        match self {
            Kern::Ddp(k) => DDP.get(usize::from(k)),
            Kern::Own(k) => KERNELS.get(usize::from(k)),
        }
    }

    /// A dense index over both tables (for the writer's pre-rendered text).
    pub fn index(self) -> usize {
        match self {
            Kern::Ddp(k) => usize::from(k),
            Kern::Own(k) => DDP.len() + usize::from(k),
        }
    }

    /// Every kernel, in [`Kern::index`] order.
    pub fn all() -> impl Iterator<Item = Kern> {
        let n = |len: usize| KernelId::try_from(len).unwrap_or(KernelId::MAX);
        (0..n(DDP.len())).map(Kern::Ddp).chain((0..n(KERNELS.len())).map(Kern::Own))
    }
}

pub(crate) const LN_FWD: Kern = Kern::Ddp(K_LN_FWD);
pub(crate) const QKV: Kern = Kern::Ddp(K_GEMM_QKV);
pub(crate) const FLASH_FWD: Kern = Kern::Ddp(K_FLASH_FWD);
pub(crate) const PROJ: Kern = Kern::Ddp(K_GEMM_PROJ);
pub(crate) const ADD: Kern = Kern::Ddp(K_ADD);
pub(crate) const FC1: Kern = Kern::Ddp(K_GEMM_FC1);
pub(crate) const GELU: Kern = Kern::Ddp(K_GELU);
pub(crate) const FC2: Kern = Kern::Ddp(K_GEMM_FC2);
pub(crate) const LM: Kern = Kern::Ddp(K_GEMM_LM);
pub(crate) const LOGSOFTMAX: Kern = Kern::Ddp(K_LOGSOFTMAX);
pub(crate) const NLL_FWD: Kern = Kern::Ddp(K_NLL_FWD);
pub(crate) const NLL_BWD: Kern = Kern::Ddp(K_NLL_BWD);
pub(crate) const LOGSOFTMAX_BWD: Kern = Kern::Ddp(K_LOGSOFTMAX_BWD);
pub(crate) const DGRAD: Kern = Kern::Ddp(K_GEMM_DGRAD);
pub(crate) const WGRAD: Kern = Kern::Ddp(K_GEMM_WGRAD);
pub(crate) const GELU_BWD: Kern = Kern::Ddp(K_GELU_BWD);
pub(crate) const LN_BWD_INPUT: Kern = Kern::Ddp(K_LN_BWD_INPUT);
pub(crate) const LN_BWD_GAMMA: Kern = Kern::Ddp(K_LN_BWD_GAMMA);
pub(crate) const FLASH_BWD_DOT: Kern = Kern::Ddp(K_FLASH_BWD_DOT);
pub(crate) const FLASH_BWD: Kern = Kern::Ddp(K_FLASH_BWD);
pub(crate) const FLASH_BWD_CONVERT: Kern = Kern::Ddp(K_FLASH_BWD_CONVERT);
pub(crate) const EMBED: Kern = Kern::Ddp(K_EMBED);
pub(crate) const EMBED_BWD: Kern = Kern::Ddp(K_EMBED_BWD);
pub(crate) const ADAM: Kern = Kern::Ddp(K_ADAMW);
/// The context-parallel attention's correction of partial results (fp32 add).
pub(crate) const ATTN_CORRECT: Kern = Kern::Ddp(K_GRAD_ADD_W);
pub(crate) const SENDRECV: Kern = Kern::Ddp(K_NCCL_SENDRECV);
pub(crate) const L2NORM: Kern = Kern::Own(H_L2NORM);
pub(crate) const ROUTER: Kern = Kern::Own(H_ROUTER);
pub(crate) const TOPK: Kern = Kern::Own(H_TOPK);
pub(crate) const PERMUTE: Kern = Kern::Own(H_PERMUTE);
pub(crate) const EXPERT_GEMM: Kern = Kern::Own(H_EXPERT_GEMM);
pub(crate) const UNPERMUTE: Kern = Kern::Own(H_UNPERMUTE);

/// NCCL's protocol for a message of `bytes` per rank (its tuner's choice, roughly): LL for small
/// messages, LL128 up to a few MB, SIMPLE beyond.
fn proto(bytes: u64) -> usize {
    if bytes <= 64 << 10 {
        0
    } else if bytes <= 4 << 20 {
        1
    } else {
        2
    }
}

/// The NCCL kernel of an all_reduce of `bytes` in bf16 (`f32` false) or fp32.
pub(crate) fn all_reduce_kernel(bytes: u64, f32: bool) -> Kern {
    let bf16 = [H_AR_BF16_LL, H_AR_BF16_LL128, H_AR_BF16_SIMPLE];
    let fp32 = [H_AR_F32_LL, H_AR_F32_LL128, H_AR_F32_SIMPLE];
    let t = if f32 { fp32 } else { bf16 };
    Kern::Own(t.get(proto(bytes)).copied().unwrap_or(H_AR_BF16_SIMPLE))
}

pub(crate) fn reduce_scatter_kernel(bytes: u64) -> Kern {
    Kern::Own(
        [H_RS_F32_LL, H_RS_F32_LL128, H_RS_F32_SIMPLE].get(proto(bytes)).copied().unwrap_or(H_RS_F32_SIMPLE),
    )
}

pub(crate) fn all_gather_kernel(bytes: u64) -> Kern {
    Kern::Own([H_AG_LL, H_AG_LL128, H_AG_SIMPLE].get(proto(bytes)).copied().unwrap_or(H_AG_SIMPLE))
}

/// Nominal durations (ns) of one micro-batch's kernels on one rank, and the message sizes.
#[derive(Debug, Clone)]
pub(crate) struct Costs {
    /// Tokens per rank per micro-batch (sequence / cp × micro-batch size).
    pub tokens: u64,
    pub ln: i64,
    pub qkv: i64,
    /// The whole attention of one layer (split into cp chunks with context parallelism).
    pub attn: i64,
    pub proj: i64,
    pub add: i64,
    pub fc1: i64,
    pub gelu: i64,
    pub fc2: i64,
    pub embed: i64,
    pub lm: i64,
    pub softmax: i64,
    /// An activation: `[tokens, hidden]` in bf16 (tensor all_reduces, pipeline messages).
    pub act_bytes: u64,
    /// The keys and values of one context chunk (bf16, this rank's heads).
    pub kv_bytes: u64,
    /// Parameters held by a rank of a normal stage (and of the first stage: the embedding too).
    pub params: u64,
    pub params_first: u64,
    /// Rows of one expert all_to_all from one rank (tokens × top-k).
    pub expert_rows: u64,
    /// Experts' FFN GEMM time per routed row.
    pub expert_ns_per_row_x1000: i64,
}

const VOCAB: u64 = 50_304;
/// Routed experts per token.
pub(crate) const TOP_K: u64 = 2;

fn gemm(flops: u64, per_ns: u64) -> i64 {
    i64::try_from(flops / per_ns.max(1)).unwrap_or(i64::MAX).max(3_000)
}

fn mem(bytes: u64) -> i64 {
    i64::try_from(bytes / 2_500).unwrap_or(i64::MAX) + 3_000
}

impl Costs {
    pub fn new(h: &Hybrid) -> Costs {
        let (hid, tp, cp) = (h.hidden, u64::from(h.tp), u64::from(h.cp));
        let t = h.seq_len / cp * h.micro_batch_size;
        let g = |flops: u64| gemm(flops, 450_000);
        let layer_params = 12 * hid * hid / tp;
        let embed_params = VOCAB * hid / tp;
        let lp = u64::from(h.layers_per_stage);
        Costs {
            tokens: t,
            ln: mem(t * hid * 4),
            qkv: g(2 * t * hid * 3 * hid / tp),
            // Causal attention over the whole sequence: 4·T·S·H / tp FLOPs, half of them masked.
            attn: gemm(2 * t * h.seq_len * hid / tp, 300_000),
            proj: g(2 * t * hid * hid / tp),
            add: mem(t * hid * 6),
            fc1: g(2 * t * hid * 4 * hid / tp),
            gelu: mem(t * 4 * hid / tp * 4),
            fc2: g(2 * t * 4 * hid * hid / tp),
            embed: mem(t * hid * 2),
            lm: g(2 * t * hid * VOCAB / tp),
            softmax: mem(t * VOCAB / tp * 4),
            act_bytes: t * hid * 2,
            kv_bytes: 2 * t * hid / tp * 2,
            params: lp * layer_params,
            params_first: lp * layer_params + embed_params,
            expert_rows: t * TOP_K,
            // fc1 + fc2 of a 4·hidden FFN (one expert per rank), per row: 16·H² FLOPs / tp.
            expert_ns_per_row_x1000: i64::try_from(16 * hid * hid / tp * 1000 / 450_000).unwrap_or(i64::MAX),
        }
    }

    /// Expert FFN time for `rows` routed rows (both GEMMs).
    pub fn expert_ns(&self, rows: u64) -> i64 {
        let x = i128::from(self.expert_ns_per_row_x1000) * i128::from(rows) / 1000;
        i64::try_from(x).unwrap_or(i64::MAX).max(3_000)
    }

    /// Optimizer kernels over `params` parameters (fp32 master weights and two moments).
    pub fn adam_ns(params: u64) -> i64 {
        mem(params * 16 * 2)
    }

    pub fn l2norm_ns(params: u64) -> i64 {
        mem(params * 4)
    }

    pub fn memset_ns(bytes: u64) -> i64 {
        mem(bytes) / 2 + 1_500
    }
}
