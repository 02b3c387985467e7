//! The baseline the job on screen is compared with (issue 36, the Compare view): a job digest
//! (`rankscope combine --digest`) or a saved `rankscope analyze --json`, as `rankscope diff` takes
//! either for its BASE.
//!
//! A worker of its own reads the file (a digest of 1,024 ranks takes seconds to inflate and
//! read: never on the page's thread) and sends the page the stored analysis as the JSON it is
//! ([`analysis_json`]); the page parses it once ([`parse`]) and files it in the state
//! ([`crate::state::Baseline`]), where the reducer compares it with the job
//! (`compare::compare`, the CLI's call). The worker is closed as soon as it has answered.

use std::cell::RefCell;
use std::sync::Arc;

use js_sys::{Array, Uint8Array};
use rankscope_core::analyze::Analysis;
use rankscope_core::job::digest;
use wasm_bindgen::prelude::*;
use wasm_bindgen::JsCast;
use web_sys::{MessageEvent, Worker};
use yew::Callback;

use crate::protocol::{decode, encode, FromWorker, ToWorker};
use crate::state::{Action, Baseline};

/// How much of a file's head says it is a saved analysis (its `schema` key comes first).
const HEAD_BYTES: usize = 256;

/// The stored analysis of a baseline file, as JSON: a digest's analysis line, or the file itself
/// when it is a saved `rankscope analyze --json` (told by its head, as `rankscope diff` tells it).
pub fn analysis_json(name: &str, bytes: Vec<u8>) -> Result<Vec<u8>, String> {
    if digest::is_digest(&bytes) {
        return digest::decode_lean_raw(name, &bytes).map(|d| d.analysis_json).map_err(|e| e.to_string());
    }
    let head = String::from_utf8_lossy(&bytes[..bytes.len().min(HEAD_BYTES)]);
    if head.trim_start().starts_with('{') && head.contains("\"rankscope.analysis\"") {
        return Ok(bytes);
    }
    Err(format!(
        "{name}: not a baseline (a job digest made by `rankscope combine --digest`, or a saved `rankscope analyze --json`)"
    ))
}

/// The analysis in a baseline's JSON.
pub fn parse(name: &str, json: &[u8]) -> Result<Analysis, String> {
    serde_json::from_slice(json)
        .map_err(|e| format!("{name}: not a rankscope analysis this version reads ({e})"))
}

/// The worker reading a baseline, and its handlers.
struct Reading {
    worker: Worker,
    _on_message: Closure<dyn FnMut(MessageEvent)>,
    _on_error: Closure<dyn FnMut(web_sys::Event)>,
}

thread_local! {
    static READING: RefCell<Option<Reading>> = const { RefCell::new(None) };
}

/// Reads `file` as the job's baseline, saying how far it is with [`Action::SetBaseline`]. A
/// baseline still being read is dropped for this one.
pub fn open(file: web_sys::File, dispatch: Callback<Action>) {
    stop();
    let name = file.name();
    let failed = {
        let dispatch = dispatch.clone();
        let name = name.clone();
        move |error: String| {
            dispatch.emit(Action::SetBaseline(Baseline::Failed { name: name.clone(), error }))
        }
    };
    let worker = match crate::host::new_worker() {
        Ok(w) => w,
        Err(e) => return failed(format!("cannot start a worker: {}", crate::worker::js_text(&e))),
    };
    dispatch.emit(Action::SetBaseline(Baseline::Reading { name: name.clone() }));
    let on_message = {
        let (worker, dispatch, failed) = (worker.clone(), dispatch.clone(), failed.clone());
        Closure::<dyn FnMut(MessageEvent)>::new(move |ev: MessageEvent| {
            let data: Array = ev.data().unchecked_into();
            match decode::<FromWorker>(&data.get(0).as_string().unwrap_or_default()) {
                Ok(FromWorker::Ready) => {
                    let msg = Array::of2(&encode(&ToWorker::Baseline { name: name.clone() }).into(), &file);
                    if let Err(e) = worker.post_message(&msg) {
                        failed(format!("cannot post to its worker: {}", crate::worker::js_text(&e)));
                    }
                }
                Ok(FromWorker::Baseline { name, error }) => {
                    stop();
                    let json = data.get(1).dyn_into::<Uint8Array>().map(|b| b.to_vec()).unwrap_or_default();
                    match error.map_or_else(|| parse(&name, &json), Err) {
                        Ok(a) => dispatch
                            .emit(Action::SetBaseline(Baseline::Ready { name, analysis: Arc::new(a) })),
                        Err(e) => failed(e),
                    }
                }
                _ => {}
            }
        })
    };
    let on_error = Closure::<dyn FnMut(web_sys::Event)>::new(move |ev: web_sys::Event| {
        ev.prevent_default();
        stop();
        let text = ev.dyn_ref::<web_sys::ErrorEvent>().map(|e| e.message()).unwrap_or_default();
        failed(format!("the worker reading it failed: {text} (too large for the browser's memory?)"));
    });
    worker.set_onmessage(Some(on_message.as_ref().unchecked_ref()));
    worker.set_onerror(Some(on_error.as_ref().unchecked_ref()));
    READING
        .with(|r| *r.borrow_mut() = Some(Reading { worker, _on_message: on_message, _on_error: on_error }));
}

/// Closes the worker reading a baseline, if one is.
pub fn stop() {
    if let Some(run) = READING.with(|r| r.borrow_mut().take()) {
        run.worker.set_onmessage(None);
        run.worker.set_onerror(None);
        run.worker.terminate();
        // Its handler may be the caller: dropped after this turn, not inside it.
        wasm_bindgen_futures::spawn_local(async move { drop(run) });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn error<T: std::fmt::Debug>(r: Result<T, String>) -> String {
        r.err().unwrap_or_else(|| panic!("an error expected"))
    }

    #[test]
    fn a_baseline_is_a_digest_or_a_saved_analysis() {
        let saved = br#"{"schema": "rankscope.analysis", "ranks": []}"#.to_vec();
        assert_eq!(analysis_json("a.json", saved.clone()), Ok(saved));
        let trace = br#"{"traceEvents": []}"#.to_vec();
        let e = error(analysis_json("rank0.json", trace));
        assert!(e.starts_with("rank0.json: not a baseline"), "{e}");
        let e = error(analysis_json("x.rsdigest", b"RSDIGEST\x01\x00broken".to_vec()));
        assert!(e.starts_with("x.rsdigest: damaged rankscope job digest"), "{e}");
        let e = error(parse("a.json", b"{\"schema\": \"rankscope.analysis\""));
        assert!(e.starts_with("a.json: not a rankscope analysis this version reads"), "{e}");
    }
}
