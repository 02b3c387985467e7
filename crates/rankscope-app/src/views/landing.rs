//! The landing page: what rankscope does, and the ways in (files, a folder, drop, the demo).

use web_sys::{File, HtmlInputElement};
use yew::prelude::*;

#[derive(Properties, PartialEq, Debug)]
pub struct Props {
    pub on_files: Callback<Vec<File>>,
    pub on_demo: Callback<()>,
}

/// The files of an `<input type=file>`. A folder brings every file in it: keep the traces.
fn picked(e: &Event, folder: bool) -> Vec<File> {
    let input: HtmlInputElement = e.target_unchecked_into();
    let mut out = Vec::new();
    if let Some(list) = input.files() {
        for i in 0..list.length() {
            if let Some(f) = list.get(i) {
                if !folder || is_trace_name(&f.name()) {
                    out.push(f);
                }
            }
        }
    }
    // Choosing the same files again must fire `change` again.
    input.set_value("");
    out
}

/// Names rankscope reads when a folder is chosen (explicitly chosen files are all tried):
/// traces, and the logs and text outputs NCCL_DEBUG and nccl-tests write.
/// The core's rule ([`rankscope_core::job::is_folder_candidate`]), the CLI's too.
pub fn is_trace_name(name: &str) -> bool {
    rankscope_core::job::is_folder_candidate(name)
}

#[function_component(Landing)]
pub fn landing(p: &Props) -> Html {
    let on_files = {
        let cb = p.on_files.clone();
        Callback::from(move |e: Event| cb.emit(picked(&e, false)))
    };
    let on_folder = {
        let cb = p.on_files.clone();
        Callback::from(move |e: Event| cb.emit(picked(&e, true)))
    };
    let on_demo = {
        let cb = p.on_demo.clone();
        Callback::from(move |_| cb.emit(()))
    };
    html! {
        <main class="landing">
            <h1>{"rankscope"}</h1>
            <p class="lede">
                {"Reconstructs a distributed training job from its per-rank PyTorch profiler traces \
                  and shows where each step's time goes on every rank; your files are read in this \
                  browser tab and nothing leaves your machine."}
            </p>
            <div class="actions">
                <label class="button primary">
                    {"Choose files"}
                    <input type="file" multiple=true class="hidden-input" data-testid="file-input"
                        accept=".json,.gz,.log,.txt,.out,application/json,application/gzip,text/plain" onchange={on_files} />
                </label>
                <label class="button">
                    {"Choose a folder"}
                    <input type="file" multiple=true class="hidden-input" data-testid="folder-input"
                        webkitdirectory=true onchange={on_folder} />
                </label>
                <button class="button" data-testid="open-demo" onclick={on_demo}>
                    {"Open demo"}
                    <span class="badge">{"synthetic"}</span>
                </button>
            </div>
            <p class="hint">{"…or drop the files anywhere on this page. One trace per rank: \
                `.json`, `.json.gz` or `.pt.trace.json` as the PyTorch profiler writes them, \
                and, if you have them, the run's NCCL_DEBUG=INFO logs and nccl-tests output (recognised by content)."}</p>
            <p class="hint">{"The demo is a synthetic 8-rank GPU training job made by rankscope's own \
                trace generator, with a straggler and partly exposed communication to find. \
                It is generated in this tab."}</p>
            <details class="capture" data-testid="capture-guide">
                <summary>{"How to capture traces rankscope reads best"}</summary>
                <super::capture::CaptureGuide />
            </details>
        </main>
    }
}
