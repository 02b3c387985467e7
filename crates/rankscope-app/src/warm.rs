//! The engine's warm-up, while the user is choosing files.
//!
//! V8 runs WebAssembly first in a baseline compiler and compiles a function again with its
//! optimising compiler once it has run for a while, on background threads. On a cold page the
//! first load pays for both: its early megabytes run in the slower baseline code, and the
//! background compiles take CPU from the workers (on two cores, a third of a second of a
//! one-second load: BENCHMARKS.md). So once the page is up, one worker of the page's compiled
//! module (the same `WebAssembly.Module` the pool's workers get, whose optimised code they
//! share) runs a load's whole path on a small synthetic job ([`crate::worker`]'s `warm`), and the
//! page combines that job's analysis parts once, for its own module. The page's root element
//! says where it is: `data-engine` is `warming`, then `warm` (with `data-engine-ms`, the
//! worker's time), `cold` when the synthetic job could not be made, or `stopped` when a load
//! started first and closed the warm-up's worker ([`stop`]): a real load never waits for it.
//! Measured on two cores: a first load of 8 × 34 MB ready in 0.71-0.78 s instead of 0.94-1.02 s
//! (BENCHMARKS.md).

use std::cell::RefCell;

use js_sys::Array;
use wasm_bindgen::prelude::*;
use wasm_bindgen::JsCast;
use web_sys::{MessageEvent, Worker};

use crate::protocol::*;
use rankscope_core::analyze::Options;
use rankscope_core::job;

struct Running {
    worker: Worker,
    /// The synthetic ranks' analysis parts, as they come.
    parts: Vec<(rankscope_core::view::RankClaim, rankscope_core::analyze::RankPart)>,
    _on_message: Closure<dyn FnMut(MessageEvent)>,
    _on_error: Closure<dyn FnMut(web_sys::Event)>,
}

thread_local! {
    static RUNNING: RefCell<Option<Running>> = const { RefCell::new(None) };
    /// Started or stopped once: a warm-up never starts twice, nor after a load began.
    static OVER: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

fn root() -> Option<web_sys::Element> {
    web_sys::window().and_then(|w| w.document()).and_then(|d| d.document_element())
}

fn mark(state: &str) {
    if let Some(root) = root() {
        let _ = root.set_attribute("data-engine", state);
    }
}

/// Starts the warm-up (once; nothing when no worker can start: the first load says why).
pub fn start() {
    if OVER.with(|o| o.replace(true)) {
        return;
    }
    let Ok(worker) = crate::host::new_worker() else { return };
    let on_message = Closure::<dyn FnMut(MessageEvent)>::new(move |ev: MessageEvent| {
        let data: Array = ev.data().unchecked_into();
        match decode::<FromWorker>(&data.get(0).as_string().unwrap_or_default()) {
            Ok(FromWorker::Ready) => {
                RUNNING.with(|r| {
                    if let Some(run) = r.borrow().as_ref() {
                        let msg = Array::of1(&JsValue::from_str(&encode(&ToWorker::Warm)));
                        let _ = run.worker.post_message(&msg);
                    }
                });
            }
            Ok(FromWorker::Loaded { claim, part, .. }) => {
                RUNNING.with(|r| r.borrow_mut().as_mut().map(|run| run.parts.push((claim, *part))));
            }
            Ok(FromWorker::Warmed { ms }) => {
                let parts =
                    RUNNING.with(|r| r.borrow_mut().as_mut().map(|run| std::mem::take(&mut run.parts)));
                let parts = parts.unwrap_or_default();
                // Closed a little later: the optimising compiles it started run on background
                // threads and may be dropped with it.
                let later = Closure::once_into_js(stop);
                if let Some(w) = web_sys::window() {
                    let _ =
                        w.set_timeout_with_callback_and_timeout_and_arguments_0(later.unchecked_ref(), 3000);
                }
                if parts.is_empty() {
                    // (It could not make its synthetic job: nothing is lost but the head start.)
                    return mark("cold");
                }
                // The page's half of a load: the job's analysis from its parts.
                drop(job::combine(parts, &[], &[], &Options::default()));
                if let Some(root) = root() {
                    let _ = root.set_attribute("data-engine-ms", &format!("{ms:.0}"));
                }
                mark("warm");
            }
            _ => {}
        }
    });
    // A worker that cannot start leaves the engine cold (the first load says why).
    let on_error = Closure::<dyn FnMut(web_sys::Event)>::new(move |_: web_sys::Event| {
        stop();
        mark("cold");
    });
    worker.set_onmessage(Some(on_message.as_ref().unchecked_ref()));
    worker.set_onerror(Some(on_error.as_ref().unchecked_ref()));
    mark("warming");
    let run = Running { worker, parts: Vec::new(), _on_message: on_message, _on_error: on_error };
    RUNNING.with(|r| *r.borrow_mut() = Some(run));
}

/// Closes the warm-up's worker, if it still runs (a load is starting, or it is done; the code
/// it had optimised stays with the module).
pub fn stop() {
    OVER.with(|o| o.set(true));
    if let Some(run) = RUNNING.with(|r| r.borrow_mut().take()) {
        // Its handlers go first: a message already queued for the page must not reach a
        // closure dropped below.
        run.worker.set_onmessage(None);
        run.worker.set_onerror(None);
        run.worker.terminate();
        if root().and_then(|r| r.get_attribute("data-engine")).as_deref() == Some("warming") {
            mark("stopped");
        }
        // Its handler may be the caller: dropped after this turn, not inside it.
        wasm_bindgen_futures::spawn_local(async move { drop(run) });
    }
}
