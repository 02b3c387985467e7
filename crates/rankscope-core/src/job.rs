//! Job-level rules every shell (the CLI, the app, the wasm API) shares, so that a folder means
//! the same job wherever it is opened.
//!
//! This is the first piece of the job API of issue 10: which names in a folder are inputs.
//! What each input *is* is decided by content (`nccl::sniff_input`, `fr::sniff`, the trace
//! parser), never by name.

/// Names read when a folder is walked or dropped (files named one by one are all tried):
/// traces (`.json`, `.json.gz`), and the logs and text outputs NCCL_DEBUG and nccl-tests write
/// (`.log`, `.txt`, `.out`), case-insensitively. Flight Recorder dumps, which carry any name
/// (`fr_rank0`, `*.pkl`), are recognised by content on top of this.
pub fn is_folder_candidate(name: &str) -> bool {
    let n = name.to_ascii_lowercase();
    FOLDER_SUFFIXES.iter().any(|e| n.ends_with(e))
}

/// The suffixes [`is_folder_candidate`] accepts.
pub const FOLDER_SUFFIXES: [&str; 5] = [".json", ".json.gz", ".log", ".txt", ".out"];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn folder_candidates() {
        for n in ["rank0.json", "w.pt.trace.json.gz", "TESTS.TXT", "nccl.Log", "slurm-1.out"] {
            assert!(is_folder_candidate(n), "{n}");
        }
        for n in ["notes.md", "model.pt", "json", "a.json.bz2"] {
            assert!(!is_folder_candidate(n), "{n}");
        }
    }
}
