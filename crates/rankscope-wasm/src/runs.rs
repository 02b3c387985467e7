//! Many runs, one line each (`rankscope runs`, [`rankscope_core::compare::runs`]): the npm
//! package's `runs`.
//!
//! ```js
//! const r = new Runs();                        // then, for each finished `Job`:
//! r.add("strong_w1", job);                     // its name in the table
//! r.finish(samples, tokens, peak);             // `--samples-per-step`, `--tokens-per-step`, `--peak-tflops` (or undefined)
//! r.json(); r.markdown(); r.text(); r.csv();   // `rankscope runs --json / --md / (text) / --csv`
//! ```

use rankscope_core::analyze::Analysis;
use rankscope_core::compare::rate::Given;
use rankscope_core::compare::runs;
use wasm_bindgen::prelude::*;

use crate::Job;

/// The record table of several runs.
#[wasm_bindgen]
#[derive(Debug, Default)]
pub struct Runs {
    added: Vec<(String, Analysis)>,
    table: Option<runs::Runs>,
}

#[wasm_bindgen]
impl Runs {
    #[wasm_bindgen(constructor)]
    pub fn new() -> Runs {
        Runs::default()
    }

    /// Adds a finished job under a name. Throws when the job is not finished or has no trace,
    /// or the table is already made.
    pub fn add(&mut self, name: &str, job: &Job) -> Result<(), JsError> {
        if self.table.is_some() {
            return Err(JsError::new("runs: the table is already made"));
        }
        self.added.push((name.to_string(), job.traces(name)?.clone()));
        Ok(())
    }

    /// Makes the table, with what is stated for every run. Throws for a count < 1 or a peak that
    /// is not a number > 0.
    pub fn finish(
        &mut self,
        samples_per_step: Option<i64>,
        tokens_per_step: Option<i64>,
        peak_tflops: Option<f64>,
    ) -> Result<(), JsError> {
        if samples_per_step.is_some_and(|n| n < 1) || tokens_per_step.is_some_and(|n| n < 1) {
            return Err(JsError::new("samplesPerStep and tokensPerStep must be ≥ 1"));
        }
        if peak_tflops.is_some_and(|p| !(p.is_finite() && p > 0.0)) {
            return Err(JsError::new("peakTflops must be a number > 0"));
        }
        let given = Given { samples_per_step, tokens_per_step, peak_tflops };
        let added = std::mem::take(&mut self.added);
        self.table = Some(runs::runs(added.iter().map(|(n, a)| (n.as_str(), a)), &given));
        Ok(())
    }

    fn made(&self) -> Result<&runs::Runs, JsError> {
        self.table.as_ref().ok_or_else(|| JsError::new("runs: call finish() first"))
    }

    /// `rankscope runs --json` (schema `rankscope.runs/1`).
    pub fn json(&self) -> Result<String, JsError> {
        Ok(runs::json(self.made()?))
    }

    /// `rankscope runs --md`.
    pub fn markdown(&self) -> Result<String, JsError> {
        Ok(runs::markdown(self.made()?))
    }

    /// `rankscope runs` (the text).
    pub fn text(&self) -> Result<String, JsError> {
        Ok(runs::text(self.made()?))
    }

    /// `rankscope runs --csv`.
    pub fn csv(&self) -> Result<String, JsError> {
        Ok(runs::csv(self.made()?))
    }
}
