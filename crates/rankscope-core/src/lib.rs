//! rankscope-core: the whole rankscope pipeline except the view.
//!
//! bytes → [`parse`] (gzip sniffing, streaming inflate, tolerant streaming JSON, Chrome Trace
//! Event Format / Kineto) → [`model`] (columnar tables, one shared string table) →
//! [`normalize`] (ranks, steps, lanes, categories, launch → kernel links) → [`inspect`] reports.
//! [`nccl`] reads NCCL_DEBUG logs and nccl-tests output (the trace generator is the crate
//! `rankscope-synth`, outside the core: the core uses it only in its tests).
//! [`fr`] reads PyTorch Flight Recorder dumps; [`sequence`] compares the ranks' collective
//! sequences (hangs and mismatches) from dumps or traces. [`job`] is the API every shell calls
//! (its [`job::digest`] encodes one file's part, or a whole job, as bytes).
//!
//! The crate knows nothing of the browser or the operating system: it takes bytes in chunks of
//! any size and returns values. No file system, no clocks, no threads. It builds for the host
//! and for `wasm32-unknown-unknown`.

pub mod analyze;
pub mod compare;
pub mod diagnose;
pub mod escape;
pub mod export;
pub mod finding;
pub mod fr;
pub mod input;
pub mod inspect;
pub mod job;
pub mod join;
pub mod metrics;
pub mod model;
pub mod names;
pub mod nccl;
pub mod normalize;
pub mod parse;
pub mod redact;
pub mod sequence;
pub mod session;
pub mod steplog;
pub mod terminal;
pub mod view;
pub mod words;
