//! rankscope-core: the whole rankscope pipeline except the view.
//!
//! bytes → [`decode`] (gzip sniffing, streaming inflate) → [`parse`] (tolerant streaming JSON,
//! Chrome Trace Event Format / Kineto) → [`model`] (columnar tables, one shared string table) →
//! [`normalize`] (ranks, steps, lanes, categories, launch → kernel links) → reports.
//!
//! The crate knows nothing of the browser or the operating system: it takes bytes in chunks of
//! any size and returns values. No file system, no clocks, no threads. It builds for the host
//! and for `wasm32-unknown-unknown`.

pub mod nccl;
pub mod synth;
