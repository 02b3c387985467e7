//! rankscope's web app.
//!
//! Two binaries share this library: `rankscope-app` (the Yew UI on the main thread) and
//! `worker` (one per loading slot; each holds the ranks it read and answers questions about
//! them). [`protocol`] is what passes between them; [`pool`] runs the workers from the UI side;
//! [`state`] is the UI's reducer; [`views`] has one component per file. The core does every
//! computation; nothing here parses, normalizes or aggregates trace data.

pub mod baseline;
pub mod divergence;
pub mod download;
pub mod dropped;
pub mod embed;
pub mod format;
pub mod groups;
pub mod hash;
pub mod host;
pub mod perfetto;
pub mod pool;
pub mod protocol;
pub mod state;
pub mod tokens;
pub mod totals;
pub mod views;
pub mod warm;
pub mod worker;

/// Panics are reported on the console (with the message) instead of an opaque `unreachable`.
pub fn install_panic_hook() {
    std::panic::set_hook(Box::new(|info| {
        web_sys::console::error_1(&format!("rankscope panicked: {info}").into());
    }));
}
