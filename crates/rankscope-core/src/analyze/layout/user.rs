//! A layout the user states instead of (or beside) what the traces say.

use std::collections::BTreeSet;

use super::Role;

/// A layout the user states: `tp=2,pp=4,dp=8` (Megatron-LM's rank order: tensor fastest, then
/// context, expert, data, pipeline), or `mesh:pp=2,dp=4,tp=2` (a DeviceMesh: the dimensions as
/// written, the last fastest).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UserLayout {
    /// Fastest first.
    pub dims: Vec<(Role, u32)>,
}

impl UserLayout {
    pub fn parse(text: &str) -> Result<UserLayout, String> {
        let (mesh, body) = match text.trim().strip_prefix("mesh:") {
            Some(rest) => (true, rest),
            None => (false, text.trim()),
        };
        let mut dims = Vec::new();
        for part in body.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let (k, v) = part.split_once('=').ok_or_else(|| format!("`{part}`: expected NAME=SIZE"))?;
            let role = match k.trim().to_ascii_lowercase().as_str() {
                "tp" | "tensor" => Role::Tensor,
                "cp" | "context" | "sp" => Role::Context,
                "pp" | "pipeline" => Role::Pipeline,
                "ep" | "expert" => Role::Expert,
                "dp" | "data" => Role::Data,
                "shard" | "dp_shard" | "fsdp" => Role::Shard,
                "replicate" | "dp_replicate" => Role::Replicate,
                other => {
                    return Err(format!("`{other}`: not a dimension (tp, cp, ep, dp, pp, shard, replicate)"))
                }
            };
            let size: u32 =
                v.trim().parse().map_err(|_| format!("`{part}`: the size must be a whole number"))?;
            if size == 0 || size > 1 << 20 {
                return Err(format!("`{part}`: the size must be between 1 and 1048576"));
            }
            if dims.iter().any(|d: &(Role, u32)| d.0 == role) {
                return Err(format!("`{k}` given twice"));
            }
            dims.push((role, size));
        }
        if dims.is_empty() {
            return Err("no dimension given (e.g. tp=2,dp=4)".into());
        }
        if mesh {
            dims.reverse();
        } else {
            let order = |r: Role| match r {
                Role::Tensor => 0,
                Role::Context => 1,
                Role::Expert => 2,
                Role::Shard => 3,
                Role::Data => 4,
                Role::Replicate => 5,
                _ => 6,
            };
            dims.sort_by_key(|d| order(d.0));
        }
        let product = dims.iter().try_fold(1u64, |p, d| p.checked_mul(u64::from(d.1)));
        if product.is_none_or(|p| p > 1 << 24) {
            return Err("the dimensions' product is too large".into());
        }
        Ok(UserLayout { dims })
    }

    /// The world size the layout describes.
    pub fn world(&self) -> u32 {
        self.dims.iter().map(|d| d.1).product()
    }

    /// The groups of every dimension, each named for its role and first rank (`tp:0`).
    pub fn groups(&self) -> Vec<(Role, Vec<u32>)> {
        let world = self.world();
        let mut out = Vec::new();
        let mut stride = 1u32;
        for &(role, size) in &self.dims {
            if size > 1 {
                let mut seen = BTreeSet::new();
                for r in 0..world {
                    let base = r - (r / stride % size) * stride;
                    if seen.insert(base) {
                        out.push((role, (0..size).map(|k| base + k * stride).collect()));
                    }
                }
            }
            stride *= size;
        }
        out
    }
}
