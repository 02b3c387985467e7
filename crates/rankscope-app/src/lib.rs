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

/// The string tables' hash keys from the browser's `Math.random` (the core has no source of
/// randomness; an input author cannot know these bits). Called where each binary starts.
pub fn seed_table_keys() {
    let bits = |x: f64| (x * 9_007_199_254_740_992.0) as u64; // 53 random bits
    let entropy = bits(js_sys::Math::random()) ^ bits(js_sys::Math::random()).rotate_left(29);
    rankscope_core::model::strings::seed_table_keys(entropy);
}

/// Panics are reported on the console (with the message) instead of an opaque `unreachable`.
pub fn install_panic_hook() {
    std::panic::set_hook(Box::new(|info| {
        web_sys::console::error_1(&format!("rankscope panicked: {info}").into());
    }));
}
