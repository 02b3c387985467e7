//! The components, one per file. `app` is the root: it owns the reducer and the worker pool.

pub mod alignment;
pub mod app;
pub mod beside;
pub mod capture;
pub mod collectives;
pub mod compare;
pub mod diagnostics;
pub mod embedded;
pub mod exports;
pub mod fabric;
pub mod files;
pub mod findings;
pub mod flight;
pub mod group_filter;
pub mod help;
pub mod landing;
pub mod layout;
pub mod pipeline;
pub mod rows;
pub mod steps;
pub mod summary;
pub mod table_export;
pub mod timeline;
pub mod topbar;
pub mod whatif;
pub mod whatif_timeline;

use std::cell::RefCell;
use std::rc::Rc;

use wasm_bindgen::prelude::*;
use wasm_bindgen::JsCast;
use yew::Callback;

use crate::pool::Pool;
use crate::protocol::RankId;
use crate::state::{Action, View};

/// A rank's key in a list: its file and its place in the file.
impl From<RankId> for yew::virtual_dom::Key {
    fn from(id: RankId) -> Self {
        format!("{}.{}", id.file, id.index).into()
    }
}

/// The views the bar offers, in its order: Layout only when the analysis has a layout.
pub fn tabs(layout: bool) -> impl Iterator<Item = View> {
    View::ALL.into_iter().filter(move |&v| layout || v != View::Layout)
}

/// What every component may reach: the current job's worker pool and the reducer's dispatcher.
#[derive(Clone, Debug)]
pub struct Ctx {
    pub pool: Rc<RefCell<Option<Pool>>>,
    pub dispatch: Callback<Action>,
}

impl PartialEq for Ctx {
    fn eq(&self, other: &Self) -> bool {
        Rc::ptr_eq(&self.pool, &other.pool)
    }
}

impl Ctx {
    pub fn pool(&self) -> Option<Pool> {
        self.pool.borrow().clone()
    }
}

/// A DOM event listener that lives as long as this value: removed when dropped.
pub struct Listener {
    target: web_sys::EventTarget,
    kind: &'static str,
    closure: Closure<dyn FnMut(web_sys::Event)>,
}

impl std::fmt::Debug for Listener {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Listener({})", self.kind)
    }
}

impl Listener {
    /// A listener with the browser's default options (it may call `preventDefault`, except on
    /// the events browsers make passive by default: wheel and touch on the window/document).
    pub fn new(
        target: web_sys::EventTarget,
        kind: &'static str,
        f: impl FnMut(web_sys::Event) + 'static,
    ) -> Listener {
        let closure = Closure::<dyn FnMut(web_sys::Event)>::new(f);
        let _ = target.add_event_listener_with_callback(kind, closure.as_ref().unchecked_ref());
        Listener { target, kind, closure }
    }

    /// A listener that may call `preventDefault` even on events browsers treat as passive
    /// (wheel: so that Ctrl+wheel zooms the timeline, not the page).
    pub fn active(
        target: web_sys::EventTarget,
        kind: &'static str,
        f: impl FnMut(web_sys::Event) + 'static,
    ) -> Listener {
        let closure = Closure::<dyn FnMut(web_sys::Event)>::new(f);
        let opts = web_sys::AddEventListenerOptions::new();
        opts.set_passive(false);
        let _ = target.add_event_listener_with_callback_and_add_event_listener_options(
            kind,
            closure.as_ref().unchecked_ref(),
            &opts,
        );
        Listener { target, kind, closure }
    }
}

impl Drop for Listener {
    fn drop(&mut self) {
        let _ =
            self.target.remove_event_listener_with_callback(self.kind, self.closure.as_ref().unchecked_ref());
    }
}
