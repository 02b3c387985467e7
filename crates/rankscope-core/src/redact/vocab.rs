//! What a string is to redaction, decided by vocabulary, never by the trace it came from: the
//! public names of PyTorch, CUDA / HIP, NCCL and the kernel libraries are kept (they say what
//! ran, not whose model it is); everything else is the user's and is hashed, typed by its shape.

use super::Kind;

/// The judgement on one string.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    Keep,
    Hash(Kind),
}

/// Prefixes of names the frameworks and libraries give their own operators, runtime calls,
/// kernels and markers. Kept: a name starting with one of them says what library code ran.
const PUBLIC_PREFIXES: &[&str] = &[
    "aten::",
    "c10d::",
    "c10::",
    "nccl:",
    "record_param_comms",
    "ProfilerStep#",
    "ProfilerStep",
    "Optimizer.step#",
    "Optimizer.zero_grad#",
    "enumerate(DataLoader)#",
    "DistributedDataParallel.",
    "FullyShardedDataParallel.",
    "FSDP::",
    "autograd::engine::evaluate_function: ",
    "torch::autograd::",
    "Memcpy ",
    "Memset ",
    "void at::",
    "void at_cuda_detail::",
    "void c10::",
    "void cub::",
    "void cutlass",
    "void cudnn",
    "void cublas",
    "void flash",
    "void nccl",
    "void gemv",
    "void gemmSN",
    "void splitKreduce",
    "cutlass",
    "sm80_",
    "sm90_",
    "sm90a_",
    "sm75_",
    "sm70_",
    "ampere_",
    "volta_",
    "turing_",
    "hopper_",
    "PyTorch Profiler",
    "Iteration Start: PyTorch Profiler",
    "Record Window End",
    "Torch-Compiled Region",
    "CompiledFunction",
    "Activity Buffer Request",
    "Runtime Triggered Module Loading",
    "Lazy Function Loading",
    "Command Buffer Full",
    "Graph Replay",
    "Graph Launch",
    "[memory]",
    "gpu_user_annotation",
];

/// Runtime and library calls named in camel case after their library (`cudaLaunchKernel`,
/// `cuLaunchKernelEx`, `hipMemcpyAsync`, `ncclDevKernel_…`): the prefix then a capital.
const CAMEL_PREFIXES: &[&str] = &["cuda", "cu", "hip", "nccl", "rccl", "cudnn", "cublas", "cufft", "curand"];

/// Inductor's generated Triton kernels (`triton_poi_fused_add_mul_0`): their names are made of
/// the ATen ops they fuse, public vocabulary. A Triton kernel the user wrote carries the name of
/// the user's Python function, and has no such prefix: hashed.
const INDUCTOR_TRITON: &[&str] =
    &["triton_poi_", "triton_red_", "triton_per_", "triton_tem_", "triton_for_", "triton_"];

/// Whole names kept: the categories of Kineto events, the phases and words rankscope itself
/// writes, and the threads PyTorch names itself. A user annotation that is one of these words
/// (`record_function("forward")`) says nothing of the model.
const PUBLIC_WORDS: &[&str] = &[
    "cpu_op",
    "cuda_runtime",
    "cuda_driver",
    "kernel",
    "gpu_memcpy",
    "gpu_memset",
    "user_annotation",
    "python_function",
    "ac2g",
    "fwdbwd",
    "Trace",
    "Runtime",
    "Kernel",
    "Memcpy",
    "Memset",
    "forward",
    "backward",
    "optimizer",
    "step",
    "loss",
    "zero_grad",
    "train",
    "eval",
    "data",
    "input",
    "dataloader",
    "python",
    "python3",
    "pt_main_thread",
    "pt_autograd_0",
    "pt_autograd_1",
    "rankscope",
    "unknown",
    "default_pg",
    "undefined",
    "gloo",
    "nccl",
    "mpi",
    "ucc",
    "compute",
    "communication",
    "memory",
    "sync",
    "other",
    "gpu",
    "cpu",
    "GPU",
    "CPU",
    "cuda",
    "float",
    "double",
    "int",
    "long",
    "bool",
    "half",
    "True",
    "False",
    "None",
];

/// Argument values (a Kineto event's `Input type` and the like) kept: the tensor types and
/// scalar kinds PyTorch writes.
const PUBLIC_ARG_VALUES: &[&str] = &[
    "float",
    "double",
    "int",
    "long int",
    "long",
    "short int",
    "bool",
    "unsigned char",
    "signed char",
    "c10::Half",
    "c10::BFloat16",
    "c10::complex<float>",
    "c10::Float8_e4m3fn",
    "c10::Float8_e5m2",
    "Scalar",
    "ScalarList",
    "TensorList",
    "GenericList",
    "Tensor",
    "Device",
    "Layout",
    "MemoryFormat",
    "ScalarType",
    "True",
    "False",
    "None",
    "PyTorch Profiler",
];

/// The judgement on a name (an event's name or category, a lane's, a process's, a group's).
pub fn judge(s: &str) -> Verdict {
    if !s.chars().any(char::is_alphabetic) {
        // Numbers, shapes (`[[16,13],[256]]`), separators: figures, not names.
        return Verdict::Keep;
    }
    if PUBLIC_WORDS.contains(&s)
        || PUBLIC_ARG_VALUES.contains(&s)
        || PUBLIC_PREFIXES.iter().any(|p| s.starts_with(p))
        || CAMEL_PREFIXES
            .iter()
            .any(|p| s.strip_prefix(p).is_some_and(|r| r.starts_with(|c: char| c.is_ascii_uppercase())))
        || INDUCTOR_TRITON.iter().any(|p| s.starts_with(p) && inductor_name(s))
        || stream_or_thread_number(s)
    {
        return Verdict::Keep;
    }
    Verdict::Hash(shape_of(s))
}

/// The judgement on an argument's string value under a kept key.
pub fn judge_arg(key: &str, s: &str) -> Verdict {
    if PUBLIC_ARG_VALUES.contains(&s) {
        return Verdict::Keep;
    }
    // The collective's own name as PyTorch writes it (`allreduce`, `_allgather_base`).
    if key == "Collective name" && s.bytes().all(|b| b == b'_' || b.is_ascii_lowercase()) {
        return Verdict::Keep;
    }
    match judge(s) {
        Verdict::Keep => Verdict::Keep,
        Verdict::Hash(Kind::Name) => Verdict::Hash(Kind::Arg),
        v => v,
    }
}

/// What a hashed string replaces, by its shape: a Python frame, a path, or a name.
pub fn shape_of(s: &str) -> Kind {
    if s.contains(".py(") || s.contains(".py:") || s.contains(".py\"") {
        Kind::Frame
    } else if looks_like_path(s) {
        Kind::Path
    } else {
        Kind::Name
    }
}

fn looks_like_path(s: &str) -> bool {
    let b = s.as_bytes();
    s.starts_with('/')
        || s.starts_with("~/")
        || s.starts_with("./")
        || s.starts_with("../")
        || (b.len() > 2 && b[0].is_ascii_alphabetic() && b[1] == b':' && (b[2] == b'\\' || b[2] == b'/'))
        || (!s.contains(' ') && s.matches('/').count() >= 2)
}

/// `triton_poi_fused_add_mul_0`: Inductor's pattern (lowercase, digits, underscores).
fn inductor_name(s: &str) -> bool {
    s.bytes().all(|b| b == b'_' || b.is_ascii_lowercase() || b.is_ascii_digit()) && s.contains("_fused_")
}

/// Kineto's thread, stream and device labels: `thread 1234`, `thread 1234 (python)`,
/// `stream 7 7`, `stream 84 ` (DLRM's, with a space), `GPU 0`.
fn stream_or_thread_number(s: &str) -> bool {
    let Some(rest) =
        ["thread ", "stream ", "Stream ", "GPU ", "CPU ", "device "].iter().find_map(|p| s.strip_prefix(p))
    else {
        return false;
    };
    let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
    let tail = rest[digits..].trim();
    let word = tail.strip_prefix('(').and_then(|t| t.strip_suffix(')'));
    digits > 0
        && (tail.bytes().all(|b| b.is_ascii_digit() || b == b' ')
            || word.is_some_and(|w| PUBLIC_WORDS.contains(&w)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn public_names_are_kept_and_the_users_hashed() {
        for kept in [
            "aten::mm",
            "nccl:all_reduce",
            "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevComm*, unsigned long, ncclWork*)",
            "cudaLaunchKernel",
            "ProfilerStep#12",
            "Optimizer.step#Adagrad.step",
            "triton_poi_fused_add_mul_0",
            "[[16,13],[256,13],[256]]",
            "thread 17 (python)",
            "stream 84 ",
            "GPU 0",
            "forward",
        ] {
            assert_eq!(judge(kept), Verdict::Keep, "{kept}");
        }
        assert_eq!(judge("## sparse_data_dist ##"), Verdict::Hash(Kind::Name));
        assert_eq!(judge("nn.Module: MySecretBlock_0"), Verdict::Hash(Kind::Name));
        assert_eq!(judge("my_triton_kernel"), Verdict::Hash(Kind::Name));
        assert_eq!(judge("triton_my_attention"), Verdict::Hash(Kind::Name));
        assert_eq!(judge("/home/alice/proj/train.py(41): step"), Verdict::Hash(Kind::Frame));
        assert_eq!(judge("/home/alice/run/rank0.json"), Verdict::Hash(Kind::Path));
        assert_eq!(judge_arg("Input type", "c10::BFloat16"), Verdict::Keep);
        assert_eq!(judge_arg("Collective name", "allreduce"), Verdict::Keep);
        assert_eq!(judge_arg("Process Group Description", "tp_secret"), Verdict::Hash(Kind::Arg));
    }
}
