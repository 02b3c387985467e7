//! The root component: the reducer, the worker pool, the URL hash, global keys, drop anywhere.

use std::cell::RefCell;
use std::rc::Rc;

use wasm_bindgen::prelude::*;
use wasm_bindgen::JsCast;
use web_sys::File;
use yew::prelude::*;

use super::alignment::Alignment;
use super::collectives::Collectives;
use super::diagnostics::Diagnostics;
use super::embedded::{EmbedBar, Waiting};
use super::fabric::Fabric;
use super::files::Files;
use super::help::Help;
use super::landing::Landing;
use super::layout::LayoutView;
use super::steps::Steps;
use super::summary::Summary;
use super::timeline::Timeline;
use super::topbar::TopBar;
use super::{Ctx, Listener};
use crate::hash::{self, HashState};
use crate::pool::{Pool, Task};
use crate::state::{Action, State, View};

/// What starts a job.
#[derive(Debug)]
enum Load {
    Files(Vec<File>),
    /// Files and streams a host page handed over (`embed`), with its title.
    Host(Vec<crate::embed::Source>, Option<String>),
    Demo,
}

fn window() -> Option<web_sys::Window> {
    web_sys::window()
}

/// Whether a key event was typed into a text field (then it is not a shortcut).
fn in_text_field(e: &web_sys::KeyboardEvent) -> bool {
    e.target()
        .and_then(|t| t.dyn_into::<web_sys::Element>().ok())
        .is_some_and(|el| matches!(el.tag_name().as_str(), "INPUT" | "TEXTAREA" | "SELECT"))
}

#[function_component(App)]
pub fn app() -> Html {
    let state = use_reducer(State::default);
    let pool: Rc<RefCell<Option<Pool>>> = use_mut_ref(|| None);
    let dispatch = {
        let d = state.dispatcher();
        Callback::from(move |a: Action| d.dispatch(a))
    };
    let ctx = Ctx { pool: pool.clone(), dispatch: dispatch.clone() };
    // With a job digest open (and nothing loading), files dropped or picked are added to it
    // (ranks' traces for the timeline) instead of replacing the job: the number of files so far.
    let adding: Rc<RefCell<Option<usize>>> = use_mut_ref(|| None);
    *adding.borrow_mut() = (state.digest.is_some() && !state.loading()).then_some(state.files.len());

    let start = {
        let pool = pool.clone();
        let dispatch = dispatch.clone();
        let adding = adding.clone();
        Callback::from(move |load: Load| start_load(&pool, &dispatch, *adding.borrow(), load))
    };

    // Where the page runs, and the embedding protocol with a host page.
    let page = use_memo((), |_| crate::host::Page::current());
    {
        let start = start.clone();
        let open = Callback::from(move |(sources, title)| start.emit(Load::Host(sources, title)));
        crate::embed::use_embed(page.clone(), &state, dispatch.clone(), open);
    }

    // Back on the landing page: the workers and their ranks go, and a baseline still being read.
    {
        let pool = pool.clone();
        use_effect_with(state.files.is_empty(), move |empty| {
            if *empty {
                if let Some(old) = pool.borrow_mut().take() {
                    old.terminate();
                }
                crate::baseline::stop();
            }
        });
    }

    // The engine's warm-up (`warm.rs`), once the page has drawn itself.
    use_effect_with((), move |_| {
        let go = Closure::once_into_js(crate::warm::start);
        if let Some(w) = window() {
            let _ = w.set_timeout_with_callback_and_timeout_and_arguments_0(go.unchecked_ref(), 100);
        }
    });

    // The URL hash: read once at start and on every hashchange; written on every change of
    // view or window.
    {
        let dispatch = dispatch.clone();
        use_effect_with((), move |_| {
            let apply = move || apply_hash(&dispatch);
            apply();
            let l = window().map(|w| Listener::new(w.into(), "hashchange", move |_| apply()));
            move || drop(l)
        });
    }
    {
        use_effect_with(
            (
                state.view,
                state.window,
                state.focus,
                state.step,
                state.aligned,
                page.embed,
                state.filter.clone(),
                (state.pins.clone(), state.path),
            ),
            move |(view, win, rank, step, aligned, embed, filter, (pins, path))| {
                // Embedded, the host page owns the view: the frame's URL is left alone.
                if *embed {
                    return;
                }
                write_hash(&HashState {
                    view: Some(*view),
                    window: *win,
                    rank: *rank,
                    step: *step,
                    aligned: *aligned,
                    filter: filter.clone(),
                    pins: pins.clone(),
                    path: *path,
                });
            },
        );
    }

    // Global keys: help and view switching (the timeline handles its own).
    let has_layout = state.job.as_ref().is_some_and(|j| j.analysis.layout.is_some());
    {
        let dispatch = dispatch.clone();
        let ready = state.ready();
        use_effect_with((ready, has_layout), move |&(ready, has_layout)| {
            let l = window().map(|w| {
                Listener::new(w.into(), "keydown", move |e| global_key(&dispatch, ready, has_layout, &e))
            });
            move || drop(l)
        });
    }

    // Drop files anywhere on the page.
    {
        let start = start.clone();
        use_effect_with((), move |_| {
            let ls = window().map(|w| {
                let over = Listener::new(w.clone().into(), "dragover", |e| e.prevent_default());
                let drop_l = Listener::new(w.into(), "drop", move |e| on_drop(&start, &e));
                (over, drop_l)
            });
            move || drop(ls)
        });
    }

    let on_files = {
        let start = start.clone();
        Callback::from(move |files: Vec<File>| start.emit(Load::Files(files)))
    };
    let on_demo = {
        let start = start.clone();
        Callback::from(move |_| start.emit(Load::Demo))
    };

    let body = if state.files.is_empty() && page.embed {
        html! { <Waiting untrusted={state.untrusted.clone()} /> }
    } else if state.files.is_empty() {
        html! { <Landing {on_files} {on_demo} /> }
    } else {
        job_page(&state, page.embed, has_layout)
    };
    html! {
        <ContextProvider<Ctx> context={ctx}>
            { body }
            if state.help { <Help /> }
        </ContextProvider<Ctx>>
    }
}

/// Starts a load: files dropped on an open digest are added to it (`adding`: the number of its
/// files so far); anything else replaces the job with a new pool.
fn start_load(
    pool: &Rc<RefCell<Option<Pool>>>,
    dispatch: &Callback<Action>,
    adding: Option<usize>,
    load: Load,
) {
    if let (Load::Files(files), Some(base), Some(p)) = (&load, adding, pool.borrow().as_ref()) {
        if files.is_empty() {
            return;
        }
        let names = files.iter().map(|f| (f.name(), f.size() as u64)).collect();
        let tasks = files.iter().enumerate().map(|(i, f)| Task::File((base + i) as u32, f.clone())).collect();
        dispatch.emit(Action::Add { files: names });
        p.load(tasks);
        return;
    }
    if let Some(old) = pool.borrow_mut().take() {
        old.terminate();
    }
    // A real load never shares the cores with the warm-up.
    crate::warm::stop();
    let p = Pool::new(dispatch.clone());
    let Some((names, tasks, demo)) = plan_load(load, dispatch) else { return };
    dispatch.emit(Action::Start { files: names, demo });
    *pool.borrow_mut() = Some(p.clone());
    p.load(tasks);
}

/// A load's files (names and sizes), the pool's tasks, and whether it is the demo.
type Plan = (Vec<(String, u64)>, Vec<Task>, bool);

/// What a load reads: its files' names and sizes, the pool's tasks, and whether it is the demo
/// (None: no file to read). A host page's title is dispatched here.
fn plan_load(load: Load, dispatch: &Callback<Action>) -> Option<Plan> {
    Some(match load {
        Load::Files(files) => {
            if files.is_empty() {
                return None;
            }
            let names = files.iter().map(|f| (f.name(), f.size() as u64)).collect();
            let tasks = files.into_iter().enumerate().map(|(i, f)| Task::File(i as u32, f)).collect();
            (names, tasks, false)
        }
        Load::Host(sources, title) => {
            use crate::embed::Source;
            let names = sources
                .iter()
                .map(|s| match s {
                    Source::File(f) => (f.name(), f.size() as u64),
                    Source::Stream { name, size, .. } => (name.clone(), *size),
                })
                .collect();
            let tasks = sources
                .into_iter()
                .enumerate()
                .map(|(i, s)| match s {
                    Source::File(f) => Task::File(i as u32, f),
                    Source::Stream { name, stream, .. } => Task::Stream(i as u32, name, stream),
                })
                .collect();
            dispatch.emit(Action::SetTitle(title));
            (names, tasks, false)
        }
        Load::Demo => {
            let n = rankscope_synth::SynthConfig::default().ranks;
            let names = (0..n).map(|r| (rankscope_synth::file_name(r, false), 0)).collect();
            let tasks = (0..n).map(|r| Task::Demo(r, r)).collect();
            (names, tasks, true)
        }
    })
}

/// Reads the URL hash into the state: view, window, focus, clocks and filter.
fn apply_hash(dispatch: &Callback<Action>) {
    let h = hash::parse(&window().and_then(|w| w.location().hash().ok()).unwrap_or_default());
    if let Some(v) = h.view {
        dispatch.emit(Action::SetView(v));
    }
    if h.window.is_some() {
        dispatch.emit(Action::SetWindow(h.window));
    }
    if h.rank.is_some() || h.step.is_some() {
        dispatch.emit(Action::SetFocus(h.rank, h.step));
    }
    dispatch.emit(Action::SetAligned(h.aligned));
    dispatch.emit(Action::SetFilter(h.filter));
    dispatch.emit(Action::SetPins(h.pins));
    dispatch.emit(Action::ShowPath(h.path));
}

/// Writes the state into the URL hash (replacing the history entry) when it differs.
fn write_hash(state: &HashState) {
    let h = hash::format(state);
    if let Some(w) = window() {
        if w.location().hash().ok().as_deref() != Some(h.as_str()) {
            if let Ok(hist) = w.history() {
                let _ = hist.replace_state_with_url(&JsValue::NULL, "", Some(&h));
            }
        }
    }
}

/// A global key (not typed into a field, no modifier): `?` toggles the help, Escape closes it,
/// 1–9 switch views once the job is ready.
fn global_key(dispatch: &Callback<Action>, ready: bool, has_layout: bool, e: &web_sys::Event) {
    let Some(k) = e.dyn_ref::<web_sys::KeyboardEvent>() else { return };
    if in_text_field(k) || k.ctrl_key() || k.meta_key() || k.alt_key() {
        return;
    }
    match k.key().as_str() {
        "?" => dispatch.emit(Action::ToggleHelp),
        "Escape" => dispatch.emit(Action::CloseHelp),
        "1" | "2" | "3" | "4" | "5" | "6" | "7" | "8" | "9" if ready => {
            let i = k.key().parse::<usize>().unwrap_or(1) - 1;
            if let Some(v) = super::tabs(has_layout).nth(i) {
                dispatch.emit(Action::SetView(v));
            }
        }
        _ => {}
    }
}

/// Files dropped anywhere on the page: a folder's entries are walked (asynchronously), plain
/// files are loaded as they are.
fn on_drop(start: &Callback<Load>, e: &web_sys::Event) {
    e.prevent_default();
    let Some(dt) = e.dyn_ref::<web_sys::DragEvent>().and_then(|d| d.data_transfer()) else {
        return;
    };
    let entries = crate::dropped::entries(&dt);
    let start = start.clone();
    if entries.is_empty() {
        let mut out = Vec::new();
        if let Some(list) = dt.files() {
            for i in 0..list.length() {
                out.extend(list.get(i));
            }
        }
        start.emit(Load::Files(out));
    } else {
        wasm_bindgen_futures::spawn_local(async move {
            start.emit(Load::Files(crate::dropped::files(entries).await));
        });
    }
}

/// The status line: files read so far, analysing, or what the job holds.
fn status_line(state: &State) -> String {
    let done = state.files.iter().filter(|f| f.status.is_done()).count();
    if state.loading() {
        format!("reading {done} of {} files…", state.files.len())
    } else if state.job.is_none() && state.assembly.is_some() {
        "analyzing…".to_string()
    } else if let Some(job) = &state.job {
        if job.ranks.is_empty() && job.fabric.is_some() {
            "NCCL files read (no trace)".to_string()
        } else if job.ranks.is_empty() && job.flight_recorder.is_some() {
            "Flight Recorder dumps read (no trace)".to_string()
        } else if job.ranks.is_empty() {
            "no file could be read".to_string()
        } else {
            format!("{} ranks ready", job.ranks.len())
        }
    } else {
        String::new()
    }
}

/// The view the state shows for a ready job (nothing while it is not ready).
fn current_view(state: &State) -> Html {
    match (&state.job, state.ready()) {
        // NCCL files only: the Fabric view is all there is.
        // Flight Recorder dumps only: their report is all there is.
        (Some(job), true) if job.ranks.is_empty() && job.fabric.is_none() => match &job.flight_recorder {
            Some(fr) => html! { <super::flight::FlightRecorder fr={fr.clone()} /> },
            None => html! {},
        },
        (Some(job), true) if job.ranks.is_empty() => html! { <Fabric job={job.clone()} /> },
        (Some(job), true) => match state.view {
            View::Summary => html! { <Summary job={job.clone()} demo={state.demo} /> },
            View::Layout => html! { <LayoutView job={job.clone()} filter={state.filter.clone()} /> },
            View::Steps => html! { <Steps job={job.clone()} filter={state.filter.clone()} /> },
            View::Timeline => html! {
                <Timeline job={job.clone()} window={state.window} focus={state.focus} aligned={state.aligned} opened={state.opened} filter={state.filter.clone()}
                    pins={state.pins.clone()} path={state.path} />
            },
            View::Collectives => {
                html! { <Collectives job={job.clone()} filter={state.filter.clone()} /> }
            }
            View::Alignment => html! { <Alignment job={job.clone()} /> },
            View::Fabric => html! { <Fabric job={job.clone()} /> },
            View::Pipeline => html! { <super::pipeline::Pipeline job={job.clone()} /> },
            View::Compare => html! {
                <super::compare::Compare baseline={state.baseline.clone()} compared={state.compared.clone()} />
            },
            View::Diagnostics => {
                html! { <Diagnostics job={job.clone()} untrusted={state.untrusted.clone()} /> }
            }
        },
        _ => html! {},
    }
}

/// The page once files are open: the top bar (or the embedded bar), the current view and,
/// while loading or on the summary and diagnostics, the files' list.
fn job_page(state: &State, embed: bool, has_layout: bool) -> Html {
    let ready = state.ready();
    let loading = state.loading();
    let status = status_line(state);
    let show_files = loading || !ready || matches!(state.view, View::Summary | View::Diagnostics);
    let view = current_view(state);
    let bar = if embed {
        html! { <EmbedBar view={state.view} {ready} {status} title={state.title.clone()} layout={has_layout} /> }
    } else {
        html! { <TopBar view={state.view} {ready} demo={state.demo} {status} layout={has_layout} /> }
    };
    html! {
        <>
            { bar }
            <main class={classes!("content", (state.view == View::Timeline && ready).then_some("full"), embed.then_some("embedded"))}>
                { view }
                if show_files { <Files files={state.files.clone()} /> }
            </main>
        </>
    }
}
