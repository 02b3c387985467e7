//! rankscope on a machine with files, for every shell that has a file system (the CLI, the
//! Python package): folders walked as the app walks a dropped folder, each input's kind decided
//! by content ([`rankscope_core::job::detect`]), traces read in chunks on every core, and the
//! job made by the core's job API ([`rankscope_core::job`]). Nothing here prints: notes come
//! back as values, progress through a callback.
//!
//! By concern: [`inputs`] turns paths into input files, explicit ranks and rules; [`read`] reads
//! one file serially; [`split`] and [`cut`] read one plain or gzip file on several cores, their
//! pieces merged by [`merge`]; [`threads`] holds the host's threads (the core's
//! [`rankscope_core::join::Join`]) and how cores are shared among files; [`load`] reads every
//! trace of a job; [`analyze`] runs a whole analysis from paths.

mod analyze;
mod cut;
mod inputs;
mod load;
mod merge;
mod read;
mod split;
mod threads;

pub use analyze::{analyze_paths, drop_eventless, Outcome, Request};
pub use cut::read_trace_cutting;
pub use inputs::{expand, inputs, load_rules, parse_rank_map, sniff_file, Input, RankMap};
pub use load::{load_job, load_traces, load_traces_keeping_args, load_traces_then, ProgressFn};
pub use rankscope_core::job::InputKind;
pub use read::{read_trace, ReadError};
pub use split::read_trace_split;
pub use threads::{core_shares, Threads};

/// A number from the environment variable `name` (sizes and thread counts that tests and
/// benchmarks set).
fn env_num(name: &str) -> Option<u64> {
    std::env::var(name).ok().and_then(|v| v.trim().parse().ok())
}
