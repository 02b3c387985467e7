//! Two finished jobs compared (`rankscope diff`, [`rankscope_core::compare`]): the npm
//! package's `diff`.
//!
//! ```js
//! const d = new Diff(baseJob, newJob, 0.03);   // two finished `Job`s; the floor (`--floor`)
//! d.json(); d.markdown(); d.text(); d.csv();   // `rankscope diff --json / --md / (text) / --csv`
//! d.failed(["step_time>+5%"]);                 // `--fail-on`: [{ gate, measured }]
//! ```

use rankscope_core::compare::{self, gates, render, Comparison};
use serde::Serialize;
use wasm_bindgen::prelude::*;

use crate::{to_js, Job};

#[wasm_bindgen(typescript_custom_section)]
const TS_DIFF_TYPES: &'static str = r#"
/** A `--fail-on` gate that failed: the measured change (a share of the base's median step, ns,
 * or a count). */
export interface FailedGate { gate: string; measured: number; }
"#;

/// A failed gate as JS sees it.
#[derive(Serialize)]
struct FailedGate {
    gate: String,
    measured: f64,
}

/// Two jobs compared.
#[wasm_bindgen]
#[derive(Debug)]
pub struct Diff {
    c: Comparison,
}

#[wasm_bindgen]
impl Diff {
    /// Compares two finished jobs; `floor` is the smallest change that counts, as a share of
    /// the base's median step (`--floor`, default 0.03). Throws when a job is not finished or
    /// has no trace, or the floor is not a share ≥ 0.
    #[wasm_bindgen(constructor)]
    pub fn new(base: &Job, new: &Job, floor: f64) -> Result<Diff, JsError> {
        if !(floor.is_finite() && floor >= 0.0) {
            return Err(JsError::new(&format!("floor must be a share ≥ 0, got {floor}")));
        }
        let (b, n) = (base.traces("base")?, new.traces("new")?);
        Ok(Diff { c: compare::compare(b, n, &compare::Options { floor }) })
    }

    /// `rankscope diff --json` (schema `rankscope.diff/1`).
    pub fn json(&self) -> String {
        render::json(&self.c)
    }

    /// `rankscope diff --md`.
    pub fn markdown(&self) -> String {
        render::markdown(&self.c)
    }

    /// `rankscope diff` (the text).
    pub fn text(&self) -> String {
        render::text(&self.c)
    }

    /// `rankscope diff --csv`.
    pub fn csv(&self) -> String {
        render::csv(&self.c)
    }

    /// `--fail-on`: the gates that fail (a change beyond noise that crosses its bound). Throws
    /// for a gate that does not parse.
    #[wasm_bindgen(unchecked_return_type = "FailedGate[]")]
    pub fn failed(&self, gates: Vec<String>) -> Result<JsValue, JsError> {
        let parsed: Vec<gates::Gate> = gates
            .iter()
            .map(|g| g.parse().map_err(|e| JsError::new(&format!("failOn {e}"))))
            .collect::<Result<_, _>>()?;
        let failed: Vec<FailedGate> = gates::failed(&self.c, &parsed)
            .into_iter()
            .map(|(g, measured)| FailedGate { gate: g.text, measured })
            .collect();
        to_js(&failed)
    }
}
