//! "Open in Perfetto": hands the job's Perfetto archive (`export::perfetto`) to a Perfetto UI in a
//! new tab with the Perfetto UI's own protocol: `window.open(ui)`, `'PING'` every 100 ms until
//! the tab answers `'PONG'`, then `{perfetto: {buffer, title, fileName}}` with the buffer
//! transferred, addressed to the UI's origin only.
//!
//! This is the one way a trace leaves rankscope's page, and only on the user's explicit click
//! after being told where it goes (views/exports.rs). Opening a window and `postMessage` are not
//! connections: the Content-Security-Policy still forbids every fetch beyond the page's origin.

use std::cell::RefCell;
use std::rc::Rc;

use js_sys::{Array, ArrayBuffer, Object, Reflect};
use wasm_bindgen::prelude::*;
use wasm_bindgen::JsCast;
use web_sys::{MessageEvent, Window};

thread_local! {
    /// The Perfetto tabs we opened (their PONGs are not a host page's messages).
    static OPENED: RefCell<Vec<Window>> = const { RefCell::new(Vec::new()) };
}

/// Whether `w` is a Perfetto tab this page opened.
pub fn is_ours(w: &Window) -> bool {
    OPENED.with(|o| o.borrow().iter().any(|x| JsValue::from(x) == JsValue::from(w)))
}

/// Opens the Perfetto UI at `url` in a new tab; must run inside the click's handler (browsers
/// block later ones). None when the browser refused.
pub fn open(url: &str) -> Option<Window> {
    let w = web_sys::window()?.open_with_url_and_target(url, "_blank").ok().flatten()?;
    OPENED.with(|o| o.borrow_mut().push(w.clone()));
    Some(w)
}

/// How long to wait for the tab's `PONG`.
const PATIENCE_MS: f64 = 60_000.0;

struct Handshake {
    timer: i32,
    _ping: Closure<dyn FnMut()>,
    listener: Closure<dyn FnMut(MessageEvent)>,
}

/// Posts `buffer` to the Perfetto tab `win` (at `origin`) once it answers; `done` gets
/// `Ok(())` when posted or `Err(why)`.
pub fn deliver(
    win: Window,
    origin: String,
    buffer: ArrayBuffer,
    title: String,
    done: impl Fn(Result<(), String>) + 'static,
) {
    let Some(me) = web_sys::window() else { return done(Err("no window".into())) };
    let done = Rc::new(done);
    let slot: Rc<RefCell<Option<Handshake>>> = Rc::new(RefCell::new(None));
    let started = js_sys::Date::now();
    let stop = {
        let (slot, me) = (slot.clone(), me.clone());
        move || {
            let taken = slot.borrow_mut().take();
            if let Some(h) = taken {
                me.clear_interval_with_handle(h.timer);
                let _ =
                    me.remove_event_listener_with_callback("message", h.listener.as_ref().unchecked_ref());
                // `stop` runs inside one of these closures: they are dropped on the next turn.
                let later = Closure::once_into_js(move || drop(h));
                let _ = me.set_timeout_with_callback_and_timeout_and_arguments_0(later.unchecked_ref(), 0);
            }
        }
    };
    let ping = {
        let (win, origin, done, stop) = (win.clone(), origin.clone(), done.clone(), stop.clone());
        Closure::<dyn FnMut()>::new(move || {
            if win.closed().unwrap_or(true) {
                stop();
                return done(Err("the Perfetto tab was closed".into()));
            }
            if js_sys::Date::now() - started > PATIENCE_MS {
                stop();
                return done(Err(format!(
                    "{origin} did not answer PING within a minute: is it a Perfetto UI?"
                )));
            }
            let _ = win.post_message(&JsValue::from_str("PING"), &origin);
        })
    };
    let listener = {
        let (win, origin, stop) = (win.clone(), origin.clone(), stop.clone());
        let buffer = RefCell::new(Some(buffer));
        Closure::<dyn FnMut(MessageEvent)>::new(move |ev: MessageEvent| {
            let from_it = ev.source().is_some_and(|s| JsValue::from(s) == JsValue::from(&win));
            if !from_it || ev.origin() != origin || ev.data().as_string().as_deref() != Some("PONG") {
                return;
            }
            let Some(buffer) = buffer.borrow_mut().take() else { return };
            stop();
            let inner = Object::new();
            let _ = Reflect::set(&inner, &"buffer".into(), &buffer);
            let _ = Reflect::set(&inner, &"title".into(), &JsValue::from_str(&title));
            let _ = Reflect::set(&inner, &"fileName".into(), &JsValue::from_str("rankscope-perfetto.tar"));
            let msg = Object::new();
            let _ = Reflect::set(&msg, &"perfetto".into(), &inner);
            done(
                win.post_message_with_transfer(&msg, &origin, &Array::of1(&buffer))
                    .map_err(|e| crate::worker::js_text(&e)),
            );
        })
    };
    let timer = me
        .set_interval_with_callback_and_timeout_and_arguments_0(ping.as_ref().unchecked_ref(), 100)
        .unwrap_or(0);
    let _ = me.add_event_listener_with_callback("message", listener.as_ref().unchecked_ref());
    *slot.borrow_mut() = Some(Handshake { timer, _ping: ping, listener });
}
