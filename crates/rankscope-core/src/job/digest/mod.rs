//! The two digest formats, in one place: the **part** (`RSPART`, [`part`]) is one input's
//! contribution before the job exists (a trace's rank claim and per-rank analysis, or a text
//! whole); the **job digest** (`RSDIGEST`, [`job`], re-exported here) is the job after
//! `combine` (every part filed under its decided rank, every text, the analysis). Both are one
//! gzip member behind a magic and a format version ([`frame`]).
//!
//! **Layering.** These formats sit below the job API: they read the input vocabulary of
//! [`crate::job::read`] (`Text`, `InputKind`) and the layers below (`analyze`'s `RankPart`, the
//! view's `RankClaim` and `RankSummary`), never the job API itself (`combine`, `JobOutput`). What
//! a digest's texts say (`JobDigest::reports`) and what opening one gives (`JobDigest::into_output`)
//! are the job API's, in `job/mod.rs`; detection asks this module only for its magic
//! ([`is_digest`]). `tests/layers.rs` keeps it so.

pub(in crate::job) mod frame;
mod job;
pub mod part;

pub use job::{
    decode, decode_lean, decode_lean_raw, decode_with_limit, encode, is_digest, JobDigest, JobDigestError,
    LeanDigest, Placed, MAGIC, MAX_INFLATED, VERSION,
};

#[cfg(test)]
pub(crate) mod tests {
    use crate::analyze::{self, RankPart};
    use crate::normalize::{assemble, Rules};
    use crate::view::RankClaim;
    use rankscope_synth::{self as synth, SynthConfig};

    /// The claims and parts of a synthetic job of `ranks` ranks (2 steps, rank 1 straggling),
    /// each rank normalized alone, as a host computes them one file at a time.
    pub(crate) fn synth_parts(ranks: u32) -> Vec<(RankClaim, RankPart)> {
        let cfg = SynthConfig {
            ranks,
            steps: 2,
            kernels_per_step: 40,
            straggler_rank: Some(1),
            ..SynthConfig::default()
        };
        (0..ranks)
            .map(|rank| {
                let mut bytes = Vec::new();
                synth::write_rank(&cfg, rank, &mut bytes).unwrap_or_else(|e| panic!("{e}"));
                let t = crate::parse::ingest_bytes(&synth::file_name(rank, false), &bytes)
                    .unwrap_or_else(|e| panic!("{e}"));
                let claim = crate::normalize::claim_of(&t);
                let job = assemble(vec![t], &[], &Rules::default());
                let r = job.ranks.first().unwrap_or_else(|| panic!("no rank"));
                let part =
                    analyze::rank_part(r, &job.strings, analyze::idle::DEFAULT_KERNEL_WAIT_THRESHOLD_NS);
                (claim, part)
            })
            .collect()
    }
}
