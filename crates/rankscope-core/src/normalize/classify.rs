//! Classification from a rule table that is data.
//!
//! Frameworks name things differently (NCCL, RCCL, HCCL kernels; `nccl:*`, `gloo:*`,
//! `c10d::*` annotations; `record_param_comms`; CUDA, HIP and MTIA runtimes), and communication
//! libraries beyond NCCL name their kernels their own way (DeepEP, NVSHMEM, pplx-kernels, the
//! inference engines' custom all-reduce, MSCCL++, userbuffers, ...), so what an event *is* comes
//! from an ordered list of rules, not from code. The defaults are `default_rules.json` beside
//! this file; users prepend their own (`--rules FILE`), in the same JSON shape. The first
//! matching rule wins. A rule may name the library it recognises (`family`, reported per rank
//! with the device time it covers) and, for communication, its collective kind (`kind`: DeepEP's
//! dispatch and combine are `all_to_all`, whatever their names say).
//!
//! A rule with a name condition recognises an event **by name**; one with only a category (every
//! `kernel` is compute) classifies **by category**, what is left when no name was recognised:
//! the coverage report ([`super::coverage`]) shows the top names of each.
//!
//! Without a rule's `kind`, the collective kind of a communication event and the direction of a
//! memory event are read from its name (and from `Collective name` when the trace has it) by
//! code, since they are about spelling, not about policy.

use serde::Deserialize;

use crate::model::{Class, CollKind, FxHashMap, LaneKind, MemKind, StrId, StringTable};

/// One rule. Absent conditions always hold.
#[derive(Debug, Clone, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct Rule {
    #[serde(default)]
    pub cat: Vec<String>,
    #[serde(default)]
    pub name_exact: Vec<String>,
    #[serde(default)]
    pub name_prefix: Vec<String>,
    #[serde(default)]
    pub name_contains: Vec<String>,
    #[serde(default)]
    pub lane: Option<LaneSel>,
    pub class: Class,
    /// The library or framework the rule recognises (`nccl`, `deepep`, `custom_allreduce`, ...),
    /// reported per rank with the device time it covers.
    #[serde(default)]
    pub family: Option<String>,
    /// For communication: the collective kind of what it matches (DeepEP's dispatch and combine
    /// are `all_to_all`); without it the kind is read from the name ([`coll_kind_of`]).
    #[serde(default)]
    pub kind: Option<CollKind>,
    /// Free text for people reading the file.
    #[serde(default)]
    pub about: Option<String>,
}

impl Rule {
    /// Whether the rule recognises events by their name (not by their category alone).
    pub fn by_name(&self) -> bool {
        !(self.name_exact.is_empty() && self.name_prefix.is_empty() && self.name_contains.is_empty())
    }
}

/// Index of the rule that decided an event's class ([`Rules::rule`]); [`RuleIdx::NONE`] when no
/// rule matched (the class is then `other`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct RuleIdx(pub u16);

impl RuleIdx {
    pub const NONE: RuleIdx = RuleIdx(u16::MAX);
}

#[derive(Debug, Clone, Copy, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum LaneSel {
    Cpu,
    Gpu,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
struct RuleFile {
    #[allow(dead_code)]
    version: u32,
    #[serde(default)]
    #[allow(dead_code)]
    about: Option<String>,
    rules: Vec<Rule>,
}

/// An ordered rule table.
#[derive(Debug, Clone)]
pub struct Rules {
    rules: Vec<Rule>,
}

/// Error loading a user rule file.
#[derive(Debug, thiserror::Error)]
#[error("rule file is not valid: {0}")]
pub struct RulesError(String);

const DEFAULT_RULES: &str = include_str!("default_rules.json");

impl Default for Rules {
    fn default() -> Self {
        // The default table is part of the build and covered by tests; a parse failure here is
        // a programming error, reported as an empty table rather than a panic.
        let rules = serde_json::from_str::<RuleFile>(DEFAULT_RULES).map(|f| f.rules).unwrap_or_default();
        Rules { rules }
    }
}

impl Rules {
    /// The default rules with `user` rules (JSON text) in front of them.
    pub fn with_user_rules(user: &str) -> Result<Rules, RulesError> {
        let f: RuleFile = serde_json::from_str(user).map_err(|e| RulesError(e.to_string()))?;
        let mut rules = f.rules;
        rules.extend(Rules::default().rules);
        Ok(Rules { rules })
    }

    pub fn len(&self) -> usize {
        self.rules.len()
    }

    pub fn is_empty(&self) -> bool {
        self.rules.is_empty()
    }

    /// The class of an event with this name and category on this kind of lane.
    pub fn class_of(&self, name: &str, cat: &str, lane: LaneKind) -> Class {
        self.decide(name, cat, lane).0
    }

    /// The rule at `i` ([`RuleIdx`]).
    pub fn rule(&self, i: RuleIdx) -> Option<&Rule> {
        self.rules.get(i.0 as usize)
    }

    /// The class of an event and the rule that decided it.
    pub fn decide(&self, name: &str, cat: &str, lane: LaneKind) -> (Class, RuleIdx) {
        for (k, r) in self.rules.iter().enumerate() {
            if !r.cat.is_empty() && !r.cat.iter().any(|c| c.eq_ignore_ascii_case(cat)) {
                continue;
            }
            if !r.name_exact.is_empty() && !r.name_exact.iter().any(|n| n == name) {
                continue;
            }
            if !r.name_prefix.is_empty() && !r.name_prefix.iter().any(|p| name.starts_with(p.as_str())) {
                continue;
            }
            if !r.name_contains.is_empty() && !r.name_contains.iter().any(|p| name.contains(p.as_str())) {
                continue;
            }
            match (r.lane, lane) {
                (Some(LaneSel::Cpu), LaneKind::Gpu) | (Some(LaneSel::Gpu), LaneKind::Cpu) => continue,
                _ => {}
            }
            return (r.class, RuleIdx(u16::try_from(k).unwrap_or(u16::MAX - 1)));
        }
        (Class::Other, RuleIdx::NONE)
    }
}

/// The collective kind spelled in `text` (an event name or a `Collective name` argument):
/// `ncclKernel_AllReduce_RING_LL_Sum_float`, `ncclDevKernel_AllGather_RING_LL`,
/// `nccl:all_reduce`, `gloo:all_reduce`, `c10d::allreduce_`, `_allgather_base`,
/// `reduce_scatter_tensor_coalesced`, `SendRecv`, ...
pub fn coll_kind_of(text: &str) -> CollKind {
    let mut t = String::with_capacity(text.len());
    for c in text.chars() {
        if c.is_ascii_alphanumeric() {
            t.push(c.to_ascii_lowercase());
        }
    }
    // Order matters: longer spellings that contain shorter ones come first.
    const TABLE: &[(&str, CollKind)] = &[
        ("reducescatter", CollKind::ReduceScatter),
        ("allreduce", CollKind::AllReduce),
        ("allgather", CollKind::AllGather),
        ("alltoall", CollKind::AllToAll),
        ("sendrecv", CollKind::SendRecv),
        ("broadcast", CollKind::Broadcast),
        ("bcast", CollKind::Broadcast),
        ("barrier", CollKind::Barrier),
        ("gather", CollKind::Gather),
        ("scatter", CollKind::Scatter),
        ("reduce", CollKind::Reduce),
        ("send", CollKind::Send),
        ("recv", CollKind::Recv),
    ];
    for (pat, kind) in TABLE {
        if t.contains(pat) {
            return *kind;
        }
    }
    CollKind::Unknown
}

/// The direction of a memory operation from its name (`Memcpy HtoD (Pageable -> Device)`,
/// `Memset (Device)`, `cudaMemcpyAsync`).
pub fn mem_kind_of(name: &str) -> MemKind {
    for (pat, kind) in [
        ("HtoD", MemKind::HtoD),
        ("DtoH", MemKind::DtoH),
        ("DtoD", MemKind::DtoD),
        ("PtoP", MemKind::PtoP),
        ("HtoH", MemKind::HtoH),
    ] {
        if name.contains(pat) {
            return kind;
        }
    }
    if name.contains("emset") {
        MemKind::Memset
    } else {
        MemKind::Unknown
    }
}

/// Memoized classification of (name, category, lane kind): events repeat few distinct names.
#[derive(Debug, Default)]
pub(crate) struct ClassCache {
    map: FxHashMap<(StrId, StrId, bool), (Class, u8, RuleIdx)>,
}

impl ClassCache {
    pub(crate) fn get(
        &mut self,
        rules: &Rules,
        strings: &StringTable,
        name: StrId,
        cat: StrId,
        lane: LaneKind,
        collective_arg: Option<StrId>,
    ) -> (Class, u8, RuleIdx) {
        let key = (name, cat, lane == LaneKind::Gpu);
        let (class, detail, rule) = *self.map.entry(key).or_insert_with(|| {
            let n = strings.get(name);
            let (class, rule) = rules.decide(n, strings.get(cat), lane);
            let detail = match class {
                Class::Communication => {
                    rules.rule(rule).and_then(|r| r.kind).unwrap_or_else(|| coll_kind_of(n)) as u8
                }
                Class::Memory => mem_kind_of(n) as u8,
                _ => 0,
            };
            (class, detail, rule)
        });
        // `Collective name` beats the event name (`record_param_comms` says nothing itself).
        if class == Class::Communication {
            if let Some(c) = collective_arg {
                let k = coll_kind_of(strings.get(c));
                if k != CollKind::Unknown {
                    return (class, k as u8, rule);
                }
            }
        }
        (class, detail, rule)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_rules_load() {
        assert!(Rules::default().len() > 10);
    }

    #[test]
    fn classes_of_known_names() {
        let r = Rules::default();
        let g = LaneKind::Gpu;
        let c = LaneKind::Cpu;
        assert_eq!(
            r.class_of("ncclKernel_AllReduce_RING_LL_Sum_float(ncclDevComm*)", "kernel", g),
            Class::Communication
        );
        assert_eq!(r.class_of("ncclDevKernel_Generic", "kernel", g), Class::Communication);
        assert_eq!(r.class_of("volta_sgemm_128x64_nn", "kernel", g), Class::Compute);
        assert_eq!(r.class_of("Memcpy HtoD (Pageable -> Device)", "gpu_memcpy", g), Class::Memory);
        assert_eq!(r.class_of("Memset (Device)", "Memset", g), Class::Memory);
        assert_eq!(r.class_of("nccl:all_reduce", "user_annotation", c), Class::Communication);
        assert_eq!(r.class_of("gloo:all_reduce", "user_annotation", c), Class::Communication);
        assert_eq!(r.class_of("c10d::allreduce_", "cpu_op", c), Class::Communication);
        assert_eq!(r.class_of("record_param_comms", "cpu_op", c), Class::Communication);
        assert_eq!(r.class_of("cudaLaunchKernel", "cuda_runtime", c), Class::Launch);
        assert_eq!(r.class_of("cudaStreamSynchronize", "cuda_runtime", c), Class::Sync);
        assert_eq!(r.class_of("hipDeviceSynchronize", "cuda_runtime", c), Class::Sync);
        assert_eq!(r.class_of("cudaMalloc", "cuda_runtime", c), Class::Allocation);
        assert_eq!(r.class_of("ProfilerStep#5", "Operator", c), Class::Annotation);
        assert_eq!(r.class_of("ProfilerStep#5", "gpu_user_annotation", g), Class::Annotation);
        assert_eq!(
            r.class_of("enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__", "user_annotation", c),
            Class::DataLoading
        );
        assert_eq!(r.class_of("Optimizer.step#SGD.step", "user_annotation", c), Class::Optimizer);
        assert_eq!(r.class_of("aten::mm", "cpu_op", c), Class::Compute);
        assert_eq!(r.class_of("aten::mm", "Operator", c), Class::Compute);
        assert_eq!(r.class_of("whatever", "weird", c), Class::Other);
    }

    /// Communication libraries beyond NCCL's names, each with its family and, where its names
    /// say no kind, the kind its rule gives (DeepEP's dispatch / combine are all_to_all).
    #[test]
    fn communication_by_what_it_is() {
        let r = Rules::default();
        let g = LaneKind::Gpu;
        let family_kind = |name: &str| -> (Class, Option<String>, CollKind) {
            let (class, i) = r.decide(name, "kernel", g);
            let rule = r.rule(i);
            let kind = rule.and_then(|x| x.kind).unwrap_or_else(|| coll_kind_of(name));
            (class, rule.and_then(|x| x.family.clone()), kind)
        };
        for (name, family, kind) in [
            ("void deep_ep::intranode::dispatch<8, 768, 8192>(int4*, float*, int*)", "deepep", CollKind::AllToAll),
            ("void deep_ep::internode::combine<true, 4, 8>(int4*)", "deepep", CollKind::AllToAll),
            ("void deep_ep::intranode::notify_dispatch<8>(int const*, int*)", "deepep", CollKind::AllToAll),
            ("void deep_ep::internode_ll::dispatch<false, 3, 7168>(void*)", "deepep", CollKind::AllToAll),
            ("void dispatchKernel<10u, true, true>(int*, unsigned long)", "pplx", CollKind::AllToAll),
            ("void mori::moe::EpDispatchIntraNodeKernel<__hip_bfloat16>(mori::moe::EpDispatchCombineArgs)", "mori", CollKind::AllToAll),
            ("void vllm::cross_device_reduce_1stage<__nv_bfloat16, 8>(vllm::RankData*, vllm::RankSignals)", "custom_allreduce", CollKind::AllReduce),
            ("void vllm::cross_device_reduce_2stage<half, 4>(vllm::RankData*)", "custom_allreduce", CollKind::AllReduce),
            ("void flashinfer::trtllm_allreduce_fusion::allreduce_fusion_kernel_oneshot_lamport<(flashinfer::trtllm_allreduce_fusion::AllReduceFusionPattern)1, __nv_bfloat16, 8, false, false>(flashinfer::trtllm_allreduce_fusion::AllReduceFusionParams<__nv_bfloat16>)", "trtllm_allreduce", CollKind::AllReduce),
            ("void tensorrt_llm::kernels::oneShotAllReduceKernel<__nv_bfloat16, 8>(tensorrt_llm::kernels::AllReduceParams)", "trtllm_allreduce", CollKind::AllReduce),
            ("void (anonymous namespace)::multimem_all_reduce_kernel<c10::BFloat16, 16>(c10::BFloat16*, unsigned long)", "torch_symm_mem", CollKind::AllReduce),
            ("void mscclpp::executionKernel<__nv_bfloat16>(int, __nv_bfloat16*)", "mscclpp", CollKind::Unknown),
            ("void userbuffers_fp16_sum_inplace_gpu_rw_ag<2>(int, int, int, int, int, int, int, void**, int, unsigned long)", "userbuffers", CollKind::AllGather),
            ("void userbuffers_fp16_sum_inplace_gpu_rr_rs<2>(int, int, int, int, int, int, int, void**, int, unsigned long)", "userbuffers", CollKind::ReduceScatter),
            ("kuserbuffers_pushsend(int*, int*, int4*, int4*, int)", "userbuffers", CollKind::Send),
            ("void nvshmemi_proxy_rma_entrypoint<(nvshmemi_op_t)0, 1>(void*, void*)", "nvshmem", CollKind::Unknown),
            ("ncclDevKernel_AllGather_RING_LL(ncclDevKernelArgsStorage<4096ul>)", "nccl", CollKind::AllGather),
            ("mscclKernel_Sum_bf16_LL128", "msccl", CollKind::Unknown),
        ] {
            let (class, fam, k) = family_kind(name);
            assert_eq!((class, fam.as_deref(), k), (Class::Communication, Some(family), kind), "{name}");
        }
        // DeepEP's layout kernel computes locally; ordinary kernels stay compute by category.
        assert_eq!(
            r.class_of(
                "void deep_ep::layout::get_dispatch_layout<256, 32, 8>(long const*, int*)",
                "kernel",
                g
            ),
            Class::Compute
        );
        let (c, i) = r.decide("volta_sgemm_128x64_nn", "kernel", g);
        assert!(c == Class::Compute && r.rule(i).is_some_and(|x| !x.by_name() && x.family.is_none()));
        // The host ops of the engines' all-reduce.
        assert_eq!(r.class_of("_C_custom_ar::all_reduce", "cpu_op", LaneKind::Cpu), Class::Communication);
        assert_eq!(r.class_of("vllm::all_reduce", "cpu_op", LaneKind::Cpu), Class::Communication);
    }

    /// docs/metrics.md lists every family of the defaults (and how to add one).
    #[test]
    fn every_family_is_documented() {
        let doc = include_str!("../../../../docs/metrics.md");
        let r = Rules::default();
        let families: std::collections::BTreeSet<&str> =
            r.rules.iter().filter_map(|x| x.family.as_deref()).collect();
        assert!(families.len() >= 15, "{families:?}");
        for f in families {
            assert!(doc.contains(&format!("| `{f}` |")), "docs/metrics.md does not list the family `{f}`");
        }
    }

    #[test]
    fn collective_kinds() {
        assert_eq!(coll_kind_of("ncclKernel_AllReduce_RING_LL_Sum_float"), CollKind::AllReduce);
        assert_eq!(coll_kind_of("ncclDevKernel_AllGather_RING_LL"), CollKind::AllGather);
        assert_eq!(coll_kind_of("ncclDevKernel_ReduceScatter_Sum_f32_RING_LL"), CollKind::ReduceScatter);
        assert_eq!(coll_kind_of("ncclKernel_SendRecv_RING_SIMPLE_Sum_int8_t"), CollKind::SendRecv);
        assert_eq!(coll_kind_of("nccl:all_to_all"), CollKind::AllToAll);
        assert_eq!(coll_kind_of("_reduce_scatter_base"), CollKind::ReduceScatter);
        assert_eq!(coll_kind_of("allreduce"), CollKind::AllReduce);
        assert_eq!(coll_kind_of("c10d::broadcast_"), CollKind::Broadcast);
        assert_eq!(coll_kind_of("nccl:recv 0<-1"), CollKind::Recv);
        assert_eq!(coll_kind_of("ncclDevKernel_Generic"), CollKind::Unknown);
        assert_eq!(coll_kind_of("record_param_comms"), CollKind::Unknown);
    }

    #[test]
    fn user_rules_come_first_and_bad_ones_are_errors() {
        let r = Rules::with_user_rules(
            r#"{"version":1,"rules":[{"name_prefix":["my_comm"],"class":"communication"}]}"#,
        );
        let r = r.unwrap_or_default();
        assert_eq!(r.class_of("my_comm_kernel", "kernel", LaneKind::Gpu), Class::Communication);
        assert!(Rules::with_user_rules(r#"{"version":1,"rules":[{"nme":"x","class":"compute"}]}"#).is_err());
        assert!(Rules::with_user_rules("not json").is_err());
    }
}
