//! What the synthetic job runs: the GPU kernels of a GPT-style decoder trained with DDP on H100s,
//! with the names, launch shapes and typical durations seen in real PyTorch 2.x Kineto traces.
//!
//! Durations are "nominal" (one H100, bf16, a mid-sized layer); the simulator scales them by the
//! rank's speed in that step, a per-kernel noise and, on the straggler, its slowdown.

/// Index into [`KERNELS`].
pub(crate) type KernelId = u16;

/// One GPU kernel type: its demangled name as CUPTI reports it, a nominal duration, and the
/// launch shape Kineto copies into the event args.
#[derive(Debug)]
pub(crate) struct KernelSpec {
    pub name: &'static str,
    pub base_ns: i64,
    pub regs: u32,
    pub smem: u32,
    pub grid: [u32; 3],
    pub block: [u32; 3],
    pub occupancy: u32,
}

/// The SM count of the simulated GPU (H100 SXM); Kineto derives "blocks per SM" from it.
pub(crate) const NUM_SMS: u32 = 132;

macro_rules! kernels {
    ($($id:ident = $name:expr, $ns:expr, $regs:expr, $smem:expr, $grid:expr, $block:expr, $occ:expr;)*) => {
        kernels!(@ids 0u16, $($id,)*);
        pub(crate) const KERNELS: &[KernelSpec] = &[
            $(KernelSpec { name: $name, base_ns: $ns, regs: $regs, smem: $smem, grid: $grid, block: $block, occupancy: $occ },)*
        ];
    };
    (@ids $n:expr, $id:ident, $($rest:ident,)*) => {
        pub(crate) const $id: KernelId = $n;
        kernels!(@ids $n + 1u16, $($rest,)*);
    };
    (@ids $n:expr,) => {};
}
// The hybrid jobs' own kernels are declared with it too (`hybrid/model.rs`).
pub(crate) use kernels;

kernels! {
    K_FILL = "void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>, at::detail::Array<char*, 1> >(int, at::native::FillFunctor<float>, at::detail::Array<char*, 1>)",
        2_600, 16, 0, [1, 1, 1], [128, 1, 1], 0;
    K_EMBED = "void at::native::(anonymous namespace)::indexSelectLargeIndex<c10::BFloat16, long, unsigned int, 2, 2, -2, true>(at::cuda::detail::TensorInfo<c10::BFloat16, unsigned int>, at::cuda::detail::TensorInfo<c10::BFloat16 const, unsigned int>, at::cuda::detail::TensorInfo<long const, unsigned int>, int, int, unsigned int, unsigned int, long)",
        48_000, 30, 0, [4096, 1, 1], [128, 1, 1], 100;
    K_LN_FWD = "void at::native::(anonymous namespace)::vectorized_layer_norm_kernel<c10::BFloat16, float>(int, float, c10::BFloat16 const*, c10::BFloat16 const*, c10::BFloat16 const*, float*, float*, c10::BFloat16*)",
        36_000, 40, 0, [8192, 1, 1], [128, 1, 1], 100;
    K_GEMM_QKV = "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x256x64_warpgroupsize2x1x1_execute_segment_k_off_kernel__5x_cublas",
        410_000, 168, 213_248, [8, 24, 1], [384, 1, 1], 38;
    K_FLASH_FWD = "void pytorch_flash::flash_fwd_kernel<pytorch_flash::Flash_fwd_kernel_traits<128, 128, 64, 4, false, false, cutlass::bfloat16_t, pytorch_flash::Flash_kernel_traits<128, 128, 64, 4, cutlass::bfloat16_t> >, false, true, false, false, true, true, false, false>(pytorch_flash::Flash_fwd_params)",
        520_000, 255, 49_152, [16, 8, 16], [128, 1, 1], 13;
    K_GEMM_PROJ = "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64_warpgroupsize1x1x1_execute_segment_k_off_kernel__5x_cublas",
        150_000, 168, 164_864, [16, 16, 1], [128, 1, 1], 25;
    K_ADD = "void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<c10::BFloat16>, at::detail::Array<char*, 3> >(int, at::native::CUDAFunctor_add<c10::BFloat16>, at::detail::Array<char*, 3>)",
        27_000, 24, 0, [16384, 1, 1], [128, 1, 1], 100;
    K_GEMM_FC1 = "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x256x64_warpgroupsize2x1x1_execute_segment_k_off_kernel__5x_cublas",
        560_000, 168, 213_248, [8, 32, 1], [384, 1, 1], 38;
    K_GELU = "void at::native::vectorized_elementwise_kernel<4, at::native::GeluCUDAKernelImpl(at::TensorIteratorBase&, at::native::GeluType)::{lambda()#2}::operator()() const::{lambda()#4}::operator()() const::{lambda(c10::BFloat16)#1}, at::detail::Array<char*, 2> >(int, at::native::GeluCUDAKernelImpl(at::TensorIteratorBase&, at::native::GeluType)::{lambda()#2}::operator()() const::{lambda()#4}::operator()() const::{lambda(c10::BFloat16)#1}, at::detail::Array<char*, 2>)",
        68_000, 28, 0, [65536, 1, 1], [128, 1, 1], 100;
    K_GEMM_FC2 = "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64_warpgroupsize1x1x1_execute_segment_k_off_kernel__5x_cublas",
        550_000, 168, 164_864, [16, 16, 1], [128, 1, 1], 25;
    K_GEMM_LM = "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x256x64_warpgroupsize2x1x1_execute_segment_k_off_kernel__5x_cublas",
        880_000, 168, 213_248, [8, 132, 1], [384, 1, 1], 38;
    K_LOGSOFTMAX = "void at::native::(anonymous namespace)::cunn_SoftMaxForward<4, c10::BFloat16, float, c10::BFloat16, at::native::(anonymous namespace)::LogSoftMaxForwardEpilogue>(c10::BFloat16*, c10::BFloat16 const*, int)",
        175_000, 37, 64, [8192, 1, 1], [1024, 1, 1], 94;
    K_NLL_FWD = "void at::native::(anonymous namespace)::nll_loss_forward_reduce_cuda_kernel_2d<c10::BFloat16, float, long>(c10::BFloat16*, c10::BFloat16*, c10::BFloat16 const*, long const*, c10::BFloat16 const*, bool, long, long, long, long)",
        11_000, 32, 64, [1, 1, 1], [1024, 1, 1], 0;
    K_NLL_BWD = "void at::native::(anonymous namespace)::nll_loss_backward_reduce_cuda_kernel_2d<c10::BFloat16, long>(c10::BFloat16*, c10::BFloat16 const*, long const*, c10::BFloat16 const*, c10::BFloat16 const*, bool, int, int, long, long)",
        9_000, 26, 0, [1, 1, 1], [1024, 1, 1], 0;
    K_LOGSOFTMAX_BWD = "void at::native::(anonymous namespace)::cunn_SoftMaxBackward<4, c10::BFloat16, float, c10::BFloat16, at::native::(anonymous namespace)::LogSoftMaxBackwardEpilogue>(c10::BFloat16*, c10::BFloat16 const*, c10::BFloat16 const*, int)",
        190_000, 32, 64, [8192, 1, 1], [1024, 1, 1], 94;
    K_GEMM_DGRAD = "sm90_xmma_gemm_bf16bf16_bf16f32_f32_nn_n_tilesize128x256x64_warpgroupsize2x1x1_execute_segment_k_off_kernel__5x_cublas",
        470_000, 168, 213_248, [8, 24, 1], [384, 1, 1], 38;
    K_GEMM_WGRAD = "sm90_xmma_gemm_bf16bf16_bf16f32_f32_nt_n_tilesize128x128x64_warpgroupsize1x1x1_execute_segment_k_off_kernel__5x_cublas",
        490_000, 168, 164_864, [16, 16, 1], [128, 1, 1], 25;
    K_BIAS_SUM = "void at::native::reduce_kernel<512, 1, at::native::ReduceOp<c10::BFloat16, at::native::func_wrapper_t<c10::BFloat16, at::native::sum_functor<c10::BFloat16, float, c10::BFloat16>::operator()(at::TensorIterator&)::{lambda(float, float)#1}>, unsigned int, c10::BFloat16, 4> >(at::native::ReduceOp<c10::BFloat16, at::native::func_wrapper_t<c10::BFloat16, at::native::sum_functor<c10::BFloat16, float, c10::BFloat16>::operator()(at::TensorIterator&)::{lambda(float, float)#1}>, unsigned int, c10::BFloat16, 4>)",
        38_000, 40, 16, [64, 16, 1], [32, 16, 1], 50;
    K_GELU_BWD = "void at::native::vectorized_elementwise_kernel<4, at::native::GeluBackwardCUDAKernelImpl(at::TensorIteratorBase&, at::native::GeluType)::{lambda()#2}::operator()() const::{lambda()#4}::operator()() const::{lambda(c10::BFloat16, c10::BFloat16)#1}, at::detail::Array<char*, 3> >(int, at::native::GeluBackwardCUDAKernelImpl(at::TensorIteratorBase&, at::native::GeluType)::{lambda()#2}::operator()() const::{lambda()#4}::operator()() const::{lambda(c10::BFloat16, c10::BFloat16)#1}, at::detail::Array<char*, 3>)",
        92_000, 30, 0, [65536, 1, 1], [128, 1, 1], 100;
    K_LN_BWD_INPUT = "void at::native::(anonymous namespace)::layer_norm_grad_input_kernel_vectorized<c10::BFloat16, float>(c10::BFloat16 const*, c10::BFloat16 const*, float const*, float const*, c10::BFloat16 const*, c10::BFloat16*, int)",
        58_000, 40, 1_024, [8192, 1, 1], [128, 1, 1], 100;
    K_LN_BWD_GAMMA = "void at::native::(anonymous namespace)::GammaBetaBackwardCUDAKernel<c10::BFloat16, float>(long, long, c10::BFloat16 const*, c10::BFloat16 const*, float const*, float const*, c10::BFloat16*, c10::BFloat16*)",
        44_000, 64, 8_448, [32, 1, 1], [32, 32, 1], 25;
    K_FLASH_BWD_DOT = "void pytorch_flash::flash_bwd_dot_do_o_kernel<true, pytorch_flash::Flash_bwd_kernel_traits<128, 64, 128, 8, 2, 4, 2, false, false, cutlass::bfloat16_t, pytorch_flash::Flash_kernel_traits<128, 64, 128, 8, cutlass::bfloat16_t> > >(pytorch_flash::Flash_bwd_params)",
        29_000, 40, 0, [32, 8, 16], [256, 1, 1], 75;
    K_FLASH_BWD = "void pytorch_flash::flash_bwd_dq_dk_dv_loop_seqk_parallel_kernel<pytorch_flash::Flash_bwd_kernel_traits<128, 64, 128, 8, 2, 4, 2, false, false, cutlass::bfloat16_t, pytorch_flash::Flash_kernel_traits<128, 64, 128, 8, cutlass::bfloat16_t> >, true, false, false, false, false, false, false>(pytorch_flash::Flash_bwd_params)",
        1_280_000, 255, 147_456, [32, 8, 16], [256, 1, 1], 13;
    K_FLASH_BWD_CONVERT = "void pytorch_flash::flash_bwd_convert_dq_kernel<pytorch_flash::Flash_bwd_kernel_traits<128, 64, 128, 8, 2, 4, 2, false, false, cutlass::bfloat16_t, pytorch_flash::Flash_kernel_traits<128, 64, 128, 8, cutlass::bfloat16_t> > >(pytorch_flash::Flash_bwd_params, int)",
        24_000, 56, 32_768, [32, 8, 16], [256, 1, 1], 50;
    K_MUL_OUT_W = "void at::native::vectorized_elementwise_kernel<4, at::native::BinaryFunctor<float, float, float, at::native::binary_internal::MulFunctor<float> >, at::detail::Array<char*, 3> >(int, at::native::BinaryFunctor<float, float, float, at::native::binary_internal::MulFunctor<float> >, at::detail::Array<char*, 3>)",
        52_000, 20, 0, [32768, 1, 1], [128, 1, 1], 100;
    K_MUL_OUT_B = "void at::native::vectorized_elementwise_kernel<4, at::native::BinaryFunctor<float, float, float, at::native::binary_internal::MulFunctor<float> >, at::detail::Array<char*, 3> >(int, at::native::BinaryFunctor<float, float, float, at::native::binary_internal::MulFunctor<float> >, at::detail::Array<char*, 3>)",
        3_200, 20, 0, [8, 1, 1], [128, 1, 1], 6;
    K_EMBED_BWD = "void at::native::(anonymous namespace)::embedding_backward_feature_kernel<c10::BFloat16, float, long>(long const*, c10::BFloat16 const*, float*, int, long, int, int)",
        260_000, 38, 4_352, [2048, 1, 1], [32, 32, 1], 50;
    K_ADAMW = "void at::native::(anonymous namespace)::multi_tensor_apply_kernel<at::native::(anonymous namespace)::FusedOptimizerTensorListMetadata<4>, at::native::(anonymous namespace)::FusedAdamMathFunctor<float, 4, (at::native::ADAM_MODE)1, false>, double*, double, double, double, double, double, bool, double*, double*>(at::native::(anonymous namespace)::FusedOptimizerTensorListMetadata<4>, at::native::(anonymous namespace)::FusedAdamMathFunctor<float, 4, (at::native::ADAM_MODE)1, false>, double*, double, double, double, double, double, bool, double*, double*)",
        118_000, 64, 0, [320, 1, 1], [512, 1, 1], 88;
    K_NCCL_ALLREDUCE = "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevKernelArgsStorage<4096ul>)",
        0, 96, 103_808, [24, 1, 1], [640, 1, 1], 0;
    // Gradient accumulation over micro-batches (`AccumulateGrad` > `aten::add_`, fp32).
    K_GRAD_ADD_W = "void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<float>, at::detail::Array<char*, 3> >(int, at::native::CUDAFunctor_add<float>, at::detail::Array<char*, 3>)",
        24_000, 24, 0, [8192, 1, 1], [128, 1, 1], 100;
    K_GRAD_ADD_B = "void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<float>, at::detail::Array<char*, 3> >(int, at::native::CUDAFunctor_add<float>, at::detail::Array<char*, 3>)",
        2_900, 24, 0, [8, 1, 1], [128, 1, 1], 6;
    // NCCL ≥ 2.19 runs every point-to-point transfer, and so all_to_all (grouped sends and
    // receives), as this one kernel (older NCCL: `ncclKernel_SendRecv_RING_SIMPLE_Sum_int8_t`).
    K_NCCL_SENDRECV = "ncclDevKernel_SendRecv(ncclDevKernelArgsStorage<4096ul>)",
        0, 96, 41_760, [8, 1, 1], [640, 1, 1], 0;
}

/// Whether kernel `k`'s work grows with the batch (activations: forward, backward, loss), as
/// opposed to parameter-sized work (DDP's gradient scaling, the optimizer) or scalars.
pub(crate) fn scales_with_batch(k: KernelId) -> bool {
    !matches!(
        k,
        K_FILL
            | K_NLL_FWD
            | K_NLL_BWD
            | K_MUL_OUT_W
            | K_MUL_OUT_B
            | K_ADAMW
            | K_NCCL_ALLREDUCE
            | K_NCCL_SENDRECV
    )
}

/// Kineto's "blocks per SM" and "warps per SM" for a launch shape, as the short decimal text it
/// prints (up to six decimals, trailing zeros trimmed).
pub(crate) fn occupancy_text(k: &KernelSpec) -> (String, String) {
    let blocks = u64::from(k.grid[0]) * u64::from(k.grid[1]) * u64::from(k.grid[2]);
    let threads = u64::from(k.block[0]) * u64::from(k.block[1]) * u64::from(k.block[2]);
    let warps_per_block = threads.div_ceil(32);
    // Fixed-point with six decimals, rounded half up, so the text is identical on every platform.
    let sms = u64::from(NUM_SMS);
    let bps_e6 = (blocks * 2_000_000 + sms) / (2 * sms);
    let wps_e6 = (blocks * warps_per_block * 2_000_000 + sms) / (2 * sms);
    (fixed6(bps_e6), fixed6(wps_e6))
}

fn fixed6(v_e6: u64) -> String {
    let int = v_e6 / 1_000_000;
    let frac = v_e6 % 1_000_000;
    if frac == 0 {
        return int.to_string();
    }
    let mut s = format!("{int}.{frac:06}");
    while s.ends_with('0') {
        s.pop();
    }
    s
}

/// Transformer layers whose forward, backward, gradient hooks and optimizer launch roughly
/// `kernels_per_step` kernels. Per layer: 10 forward kernels, 20 backward kernels and 12 DDP
/// gradient-hook kernels (one per parameter); about 19 more per step outside the layers.
pub(crate) fn layers_for(kernels_per_step: u32) -> u32 {
    // Optimizer: one fused AdamW launch per 8 parameters, i.e. 1.5 per layer: 43.5 per layer.
    let per_layer_x2 = 87u64;
    let body = u64::from(kernels_per_step.saturating_sub(19)) * 2;
    u32::try_from((body + per_layer_x2 / 2) / per_layer_x2).unwrap_or(u32::MAX).max(1)
}

/// Gradient-ready points in one backward pass: 12 parameters per layer, the LM head, the final
/// layer norm's weight and bias, and the token embedding (always last: its gradient is the final
/// one autograd produces, which is why DDP's last bucket cannot overlap compute).
pub(crate) fn grad_points(layers: u32) -> u32 {
    layers.saturating_mul(12).saturating_add(4)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kernel_table_and_occupancy_text() {
        assert_eq!(KERNELS.len(), usize::from(K_NCCL_SENDRECV) + 1);
        assert_eq!(fixed6(4_740_741), "4.740741");
        assert_eq!(fixed6(800_000), "0.8");
        assert_eq!(fixed6(16_000_000), "16");
        let (b, w) = occupancy_text(&KERNELS[usize::from(K_FILL)]);
        assert_eq!((b.as_str(), w.as_str()), ("0.007576", "0.030303"));
        assert_eq!(layers_for(400), 9);
        assert_eq!(layers_for(0), 1);
    }
}
