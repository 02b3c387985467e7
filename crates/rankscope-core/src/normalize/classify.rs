//! Classification from a rule table that is data.
//!
//! Frameworks name things differently (NCCL, RCCL, HCCL kernels; `nccl:*`, `gloo:*`,
//! `c10d::*` annotations; `record_param_comms`; CUDA, HIP and MTIA runtimes), so what an event
//! *is* comes from an ordered list of rules, not from code. The defaults are
//! `default_rules.json` beside this file; users prepend their own (`--rules FILE`), in the same
//! JSON shape. The first matching rule wins.
//!
//! The collective kind of a communication event and the direction of a memory event are read
//! from its name (and from `Collective name` when the trace has it) by code, since they are
//! about spelling, not about policy.

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
    /// Free text for people reading the file.
    #[serde(default)]
    pub about: Option<String>,
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
        for r in &self.rules {
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
            return r.class;
        }
        Class::Other
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
    map: FxHashMap<(StrId, StrId, bool), (Class, u8)>,
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
    ) -> (Class, u8) {
        let key = (name, cat, lane == LaneKind::Gpu);
        let (class, detail) = *self.map.entry(key).or_insert_with(|| {
            let n = strings.get(name);
            let class = rules.class_of(n, strings.get(cat), lane);
            let detail = match class {
                Class::Communication => coll_kind_of(n) as u8,
                Class::Memory => mem_kind_of(n) as u8,
                _ => 0,
            };
            (class, detail)
        });
        // `Collective name` beats the event name (`record_param_comms` says nothing itself).
        if class == Class::Communication {
            if let Some(c) = collective_arg {
                let k = coll_kind_of(strings.get(c));
                if k != CollKind::Unknown {
                    return (class, k as u8);
                }
            }
        }
        (class, detail)
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
