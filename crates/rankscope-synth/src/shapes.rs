//! `Input Dims` and `Input type` of CPU ops, as the profiler records them with
//! `record_shapes=True` (the `SynthConfig::record_shapes` knob).
//!
//! The simulated model is a GPT-style decoder: sequence length 4096, hidden size 1024, 16 heads
//! of 64, feed-forward 4096, vocabulary 50,304, bf16 activations; the batch (8 sequences per rank,
//! more on the `uneven_batch` rank) is the leading dimension of every activation. Each op records
//! the *site* it was called from (which linear layer, which norm...), and its dims follow from the
//! op name, the site and the rank's batch. Parameter-sized inputs (weights, gradients in DDP's
//! hooks, the optimizer's tensor lists) do not depend on the batch, so a rank doing more work
//! shows larger activation dims only, exactly as a real uneven batch would.

/// Where in the model an op was called (its inputs' shapes follow from it).
#[derive(Clone, Copy, PartialEq, Eq, Debug, Default)]
pub(crate) enum Site {
    #[default]
    None,
    /// The DataLoader's collate and the host-to-device copy of the token batch.
    Data,
    Embed,
    Norm,
    Qkv,
    Proj,
    Fc1,
    Fc2,
    Head,
    Attn,
    /// Residual adds (`[b, T, H]`).
    Resid,
    /// GELU on the feed-forward activation (`[b, T, 4H]`).
    Gelu,
    Loss,
    Optim,
    /// `.item()` on a scalar.
    Scalar,
    /// `c10d::*` and `record_param_comms` of a collective.
    Comms,
    /// `c10d::send` / `c10d::recv_` and their `record_param_comms`: one activation tensor.
    P2p,
}

const SEQ: u64 = 4096;
const HIDDEN: u64 = 1024;
const FFN: u64 = 4096;
const VOCAB: u64 = 50_304;
const HEADS: u64 = 16;
const HEAD_DIM: u64 = 64;

const BF16: &str = "c10::BFloat16";

/// (in features, out features) of a linear site.
fn linear(site: Site) -> Option<(u64, u64)> {
    match site {
        Site::Qkv => Some((HIDDEN, 3 * HIDDEN)),
        Site::Proj => Some((HIDDEN, HIDDEN)),
        Site::Fc1 => Some((HIDDEN, FFN)),
        Site::Fc2 => Some((FFN, HIDDEN)),
        Site::Head => Some((HIDDEN, VOCAB)),
        _ => None,
    }
}

/// One input: its dims (empty for scalars and lists) and its type text.
struct In(Vec<u64>, &'static str);

fn t(dims: &[u64]) -> In {
    In(dims.to_vec(), BF16)
}

fn s(ty: &'static str) -> In {
    In(Vec::new(), ty)
}

/// The inputs of op `name` called at `site` on a rank whose batch is `b` sequences.
fn inputs(name: &str, site: Site, b: u64) -> Vec<In> {
    let tokens = b * SEQ;
    let act = [b, SEQ, HIDDEN];
    let heads = [b, HEADS, SEQ, HEAD_DIM];
    if let Some((i, o)) = linear(site) {
        let x = [b, SEQ, i];
        return match name {
            "aten::linear" => vec![t(&x), t(&[o, i]), if site == Site::Head { s("") } else { t(&[o]) }],
            "aten::t" | "detach" | "aten::detach" => vec![t(&[o, i])],
            "aten::transpose" => vec![t(&[o, i]), s("Scalar"), s("Scalar")],
            "aten::as_strided" => vec![t(&[o, i]), s("ScalarList"), s("ScalarList"), s("")],
            "aten::addmm" => vec![t(&[o]), t(&[tokens, i]), t(&[i, o]), s("Scalar"), s("Scalar")],
            "aten::matmul" => vec![t(&x), t(&[i, o])],
            "aten::mm" => vec![t(&[tokens, i]), t(&[i, o])],
            "aten::sum" => vec![t(&[tokens, o]), s("ScalarList"), s("Scalar"), s("")],
            "aten::mul" => vec![In(vec![o, i], "float"), s("Scalar")],
            "torch::autograd::AccumulateGrad"
            | "autograd::engine::evaluate_function: torch::autograd::AccumulateGrad" => {
                vec![In(vec![o, i], "float")]
            }
            "torch::distributed::reducer::mul_out" => vec![In(vec![o, i], "float"), s("Scalar")],
            _ => vec![t(&[tokens, o])],
        };
    }
    match (site, name) {
        (_, "aten::empty" | "aten::empty_strided" | "aten::zeros" | "aten::empty_like") => {
            vec![s("ScalarList"), s("Scalar"), s("Scalar"), s("Scalar"), s(""), s("")]
        }
        (Site::Data, "aten::stack" | "aten::cat") => vec![s("TensorList"), s("Scalar")],
        (Site::Data, _) => vec![In(vec![b, SEQ], "long int"), s("Scalar"), s("Scalar"), s("Scalar")],
        (Site::Embed, "aten::embedding") => {
            vec![t(&[VOCAB, HIDDEN]), In(vec![b, SEQ], "long int"), s("Scalar"), s("Scalar"), s("Scalar")]
        }
        (Site::Embed, "aten::reshape") => vec![In(vec![b, SEQ], "long int"), s("ScalarList")],
        (Site::Embed, "aten::index_select") => {
            vec![t(&[VOCAB, HIDDEN]), s("Scalar"), In(vec![tokens], "long int")]
        }
        (Site::Embed, "aten::zero_" | "aten::fill_") => vec![In(vec![VOCAB, HIDDEN], "float"), s("Scalar")],
        (Site::Embed, _) => {
            vec![t(&act), In(vec![b, SEQ], "long int"), s("Scalar"), s("Scalar"), s("Scalar")]
        }
        (Site::Norm, "torch::autograd::AccumulateGrad" | "aten::mul" | "detach" | "aten::detach") => {
            vec![In(vec![HIDDEN], "float")]
        }
        (Site::Norm, _) => vec![t(&act), s("ScalarList"), t(&[HIDDEN]), t(&[HIDDEN]), s("Scalar")],
        (Site::Attn, _) => vec![t(&heads), t(&heads), t(&heads), s("Scalar"), s("Scalar"), s("Scalar")],
        (Site::Resid, _) => vec![t(&act), t(&act), s("Scalar")],
        (Site::Gelu, _) => vec![t(&[b, SEQ, FFN]), s("")],
        (Site::Loss, "aten::fill_" | "aten::ones_like") => vec![t(&[]), s("Scalar")],
        (Site::Loss, _) => {
            vec![t(&[tokens, VOCAB]), In(vec![tokens], "long int"), s(""), s("Scalar"), s("Scalar")]
        }
        (Site::Optim, _) => vec![s("TensorList"), s("TensorList"), s("TensorList"), s("TensorList"), s("")],
        (Site::Scalar, _) => vec![t(&[])],
        (Site::P2p, _) => vec![t(&act), s("Scalar"), s("Scalar"), s("Scalar")],
        (Site::Comms, _) => {
            vec![s("TensorList"), s("Scalar"), s("Scalar"), s("Scalar"), s(""), s(""), s("")]
        }
        (Site::None, _) => Vec::new(),
        _ => Vec::new(),
    }
}

/// `, "Input Dims": [...], "Input type": [...]` for op `name` at `site` with batch `b`.
pub(crate) fn render(out: &mut Vec<u8>, name: &str, site: Site, b: u64) {
    let ins = inputs(name, site, b);
    out.extend_from_slice(b", \"Input Dims\": [");
    for (i, x) in ins.iter().enumerate() {
        if i > 0 {
            out.extend_from_slice(b", ");
        }
        out.push(b'[');
        for (j, d) in x.0.iter().enumerate() {
            if j > 0 {
                out.extend_from_slice(b", ");
            }
            out.extend_from_slice(d.to_string().as_bytes());
        }
        out.push(b']');
    }
    out.extend_from_slice(b"], \"Input type\": [");
    for (i, x) in ins.iter().enumerate() {
        if i > 0 {
            out.extend_from_slice(b", ");
        }
        out.push(b'"');
        out.extend_from_slice(x.1.as_bytes());
        out.push(b'"');
    }
    out.push(b']');
}

#[cfg(test)]
mod tests {
    use super::*;

    fn text(name: &str, site: Site, b: u64) -> String {
        let mut v = Vec::new();
        render(&mut v, name, site, b);
        String::from_utf8_lossy(&v).into_owned()
    }

    #[test]
    fn activations_follow_the_batch_weights_do_not() {
        assert_eq!(
            text("aten::linear", Site::Qkv, 8),
            ", \"Input Dims\": [[8, 4096, 1024], [3072, 1024], [3072]], \"Input type\": [\"c10::BFloat16\", \"c10::BFloat16\", \"c10::BFloat16\"]"
        );
        assert!(text("aten::addmm", Site::Fc1, 12).contains("[49152, 1024]"));
        assert_eq!(text("aten::t", Site::Fc2, 8), text("aten::t", Site::Fc2, 12));
        assert_eq!(
            text("aten::cat", Site::Data, 8),
            ", \"Input Dims\": [[], []], \"Input type\": [\"TensorList\", \"Scalar\"]"
        );
        assert_eq!(text("whatever", Site::None, 8), ", \"Input Dims\": [], \"Input type\": []");
    }
}
