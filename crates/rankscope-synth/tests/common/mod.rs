//! Helpers shared by the generator's integration tests.
#![allow(dead_code)]

use rankscope_core::model::RankTrace;
use rankscope_core::parse::{FileIngest, IngestError};

/// Ingests bytes fed in chunks of `chunk` bytes, with the core's own streaming ingest.
pub fn ingest_chunked(name: &str, bytes: &[u8], chunk: usize) -> Result<RankTrace, IngestError> {
    let mut f = FileIngest::new(name);
    for c in bytes.chunks(chunk.max(1)) {
        f.feed(c);
    }
    f.finish()
}
