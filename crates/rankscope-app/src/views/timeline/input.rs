//! The timeline's input: the canvas' mouse handlers, the wheel and keyboard listeners, the
//! search box and the PNG export. Each builds a callback over the shared control.

use super::*;

/// Mouse down: starts a drag from where the view is now.
pub(super) fn on_down(ctl: &Shared) -> Callback<MouseEvent> {
    let ctl = ctl.clone();
    Callback::from(move |e: MouseEvent| {
        if e.button() != 0 {
            return;
        }
        let mut c = ctl.borrow_mut();
        if e.shift_key() {
            // Shift+drag: an area selection instead of a pan.
            area::start(&mut c, f64::from(e.offset_x()));
            return;
        }
        c.pointer.drag =
            Some((f64::from(e.offset_x()), f64::from(e.offset_y()), c.view.t0, c.view.scroll_y, false));
    })
}

/// Mouse move: pans while dragging, otherwise asks what is under the pointer.
pub(super) fn on_move(ctl: &Shared) -> Callback<MouseEvent> {
    let ctl = ctl.clone();
    Callback::from(move |e: MouseEvent| {
        let (x, y) = (f64::from(e.offset_x()), f64::from(e.offset_y()));
        if ctl.borrow().pointer.area_drag {
            area::extend(&mut ctl.borrow_mut(), x);
            request_frame(&ctl);
            return;
        }
        let dragging = {
            let mut c = ctl.borrow_mut();
            let npp = c.view.ns_per_px;
            match c.pointer.drag.as_mut() {
                Some((x0, y0, t0, s0, moved_any)) => {
                    if (x - *x0).abs() + (y - *y0).abs() > 3.0 {
                        *moved_any = true;
                    }
                    let (nt, ns) = (*t0 - (x - *x0) * npp, *s0 - (y - *y0));
                    c.view.t0 = nt;
                    c.view.scroll_y = ns;
                    c.pointer.at = Some((x, y));
                    true
                }
                None => false,
            }
        };
        if dragging {
            moved(&ctl);
        } else {
            pick_at(&ctl, x, y);
        }
    })
}

/// Mouse up: a click without a drag folds a rank's header, or selects the hovered event (and
/// tells the other views).
pub(super) fn on_up(
    ctl: &Shared,
    (selected, area_totals): (
        UseStateHandle<Option<panel::Selected>>,
        UseStateHandle<Option<area::AreaTotals>>,
    ),
    ctx: Option<Ctx>,
) -> Callback<MouseEvent> {
    let ctl = ctl.clone();
    Callback::from(move |_e: MouseEvent| {
        if ctl.borrow().pointer.area_drag {
            area::finish(&ctl, &area_totals);
            return;
        }
        let mut pin = None;
        let click = {
            let mut c = ctl.borrow_mut();
            let was = c.pointer.drag.take();
            match was {
                Some((x, y, _, _, false)) => match c.header_at(y) {
                    Some(id) if y > RULER_H => {
                        if pins::on_pin(x) {
                            pin = Some(id);
                        } else {
                            c.toggle(id);
                        }
                        false
                    }
                    _ => true,
                },
                _ => false,
            }
        };
        if let Some(id) = pin {
            pins::toggle(&ctl, id);
        }
        // A click on a memory or metric row keeps its reading (none there: forgets the kept
        // one of that kind).
        let on_memory = click && {
            let mut c = ctl.borrow_mut();
            let at = c.pointer.at.and_then(|(_, y)| c.row_at(y)).map(|r| match r.kind {
                RowKind::Memory { .. } => (true, false),
                RowKind::Metric { .. } => (false, true),
                _ => (false, false),
            });
            let (memory, metric) = at.unwrap_or_default();
            if memory {
                c.pointer.memory_kept = c.pointer.memory.clone();
            }
            if metric {
                c.pointer.metric_kept = c.pointer.metric.clone();
            }
            memory || metric
        };
        if click && !on_memory {
            let hover = ctl.borrow().pointer.hover.clone();
            members::select(&mut ctl.borrow_mut(), hover.clone());
            if let (Some((id, _, _, d)), Some(c)) = (&hover, &ctx) {
                c.dispatch.emit(Action::Select(crate::state::Selection {
                    id: *id,
                    start_ns: d.start_ns,
                    end_ns: d.start_ns + d.dur_ns,
                    name: Some(d.name.clone()),
                }));
            }
            open_panel(&ctl, &selected, hover.map(|(id, lane, _, d)| (id, lane, d)));
        }
        request_frame(&ctl);
    })
}

/// The area table's Clear: forgets the range and its totals.
pub(super) fn on_area_close(
    ctl: &Shared,
    out: UseStateHandle<Option<area::AreaTotals>>,
) -> Callback<MouseEvent> {
    let ctl = ctl.clone();
    Callback::from(move |_| {
        {
            let mut c = ctl.borrow_mut();
            c.pointer.area = None;
            c.pointer.area_req = c.pointer.area_req.wrapping_add(1);
        }
        out.set(None);
        request_frame(&ctl);
    })
}

/// Opens the args panel on a clicked event (none: closes it) and asks the worker holding its
/// rank for its source args (`Query::Args`); an answer for an older click is dropped.
pub(super) fn open_panel(
    ctl: &Shared,
    selected: &UseStateHandle<Option<panel::Selected>>,
    clicked: Option<(RankId, u32, EventDetail)>,
) {
    let (req, pool) = {
        let mut c = ctl.borrow_mut();
        c.pointer.panel_req = c.pointer.panel_req.wrapping_add(1);
        (c.pointer.panel_req, c.pool.clone())
    };
    let Some((id, lane, detail)) = clicked else {
        selected.set(None);
        return;
    };
    let base = panel::Selected { id, lane, detail: detail.clone(), full: None };
    let Some(pool) = pool else {
        selected.set(Some(panel::Selected { full: Some(Err("no worker holds this rank".into())), ..base }));
        return;
    };
    selected.set(Some(base.clone()));
    let (weak, handle) = (Rc::downgrade(ctl), selected.clone());
    let reply: Reply = Rc::new(move |_, answer, _| {
        let Some(c) = weak.upgrade() else { return };
        if c.borrow().pointer.panel_req != req {
            return;
        }
        let full = match answer {
            Answer::Picked(Some(d)) => Ok(*d),
            Answer::Picked(None) => Err("the event is not in this rank's table".into()),
            Answer::Failed(e) => Err(e),
            _ => return,
        };
        handle.set(Some(panel::Selected { full: Some(full), ..base.clone() }));
    });
    pool.ask(id, Query::Args { event: detail.event }, Some(reply));
}

/// The panel's links: shows `[start, end)` of rank `id`'s own clock (with a margin), and scrolls
/// to the rank.
pub(super) fn on_show(ctl: &Shared) -> Callback<(RankId, i64, i64)> {
    let ctl = ctl.clone();
    Callback::from(move |(id, a, b): (RankId, i64, i64)| {
        {
            let mut c = ctl.borrow_mut();
            let offset = c.offset_of(id);
            let span = (b as f64 - a as f64).max(MIN_WINDOW_NS);
            let rel = a.saturating_add(offset).saturating_sub(c.view.origin) as f64;
            c.view.ns_per_px = span * 1.2 / c.view.plot_w();
            c.view.clamp();
            c.view.t0 = rel - span * 0.1;
            let rank =
                c.job.as_ref().and_then(|j| j.ranks.iter().find(|(k, _)| *k == id).map(|(_, r)| r.rank));
            if let Some(r) = rank {
                c.scroll_to_rank(r);
            }
        }
        moved(&ctl);
    })
}

/// Mouse leave: ends a drag and forgets the pointer.
pub(super) fn on_leave(ctl: &Shared) -> Callback<MouseEvent> {
    let ctl = ctl.clone();
    Callback::from(move |_e: MouseEvent| {
        {
            let mut c = ctl.borrow_mut();
            c.pointer.drag = None;
            if c.pointer.area_drag {
                // An area dragged out of the canvas is dropped (its end is not known).
                c.pointer.area_drag = false;
                c.pointer.area = None;
            }
            c.pointer.at = None;
            c.pointer.hover = None;
            c.pointer.memory = None;
            c.pointer.metric = None;
        }
        request_frame(&ctl);
    })
}

/// The search box: a new request to every rank in `files`, whose answers go to the `found` sink
/// (an empty query clears the count).
pub(super) fn on_search(
    ctl: &Shared,
    matches: UseStateHandle<Option<u64>>,
    files: Vec<RankId>,
) -> Callback<InputEvent> {
    let ctl = ctl.clone();
    Callback::from(move |e: InputEvent| {
        let input: web_sys::HtmlInputElement = e.target_unchecked_into();
        let q = input.value();
        let pool = {
            let mut c = ctl.borrow_mut();
            c.search.req = c.search.req.wrapping_add(1);
            c.search.found.clear();
            c.pool.clone()
        };
        if q.trim().is_empty() {
            matches.set(None);
        } else if let Some(pool) = pool {
            let (req, sink) = {
                let c = ctl.borrow();
                (c.search.req, c.sinks.as_ref().map(|s| s.found.clone()))
            };
            for &f in &files {
                let reply: Option<Reply> =
                    sink.clone().map(|sink| -> Reply { Rc::new(move |id, answer, _| sink(id, req, answer)) });
                pool.ask(f, Query::Search { query: q.clone() }, reply);
            }
        }
        request_frame(&ctl);
    })
}

/// The PNG button: saves what the canvas shows.
pub(super) fn on_png(canvas: &NodeRef) -> Callback<MouseEvent> {
    let canvas = canvas.clone();
    Callback::from(move |_| {
        let Some(el) = canvas.cast::<HtmlCanvasElement>() else { return };
        let cb = Closure::once_into_js(move |blob: JsValue| {
            if let Ok(b) = blob.dyn_into::<web_sys::Blob>() {
                if let Err(e) = crate::download::save_blob(&b, "rankscope-timeline.png") {
                    web_sys::console::error_2(&"rankscope: cannot save the PNG".into(), &e);
                }
            }
        });
        if let Err(e) = el.to_blob(cb.unchecked_ref()) {
            web_sys::console::error_2(&"rankscope: cannot draw the PNG".into(), &e);
        }
    })
}

/// The wheel: Ctrl (or Meta) zooms at the pointer, Shift or a horizontal wheel pans, a vertical
/// one scrolls. It is not passive: it must not scroll or zoom the page.
fn on_wheel(c: &Shared, e: &web_sys::Event) {
    let Some(w) = e.dyn_ref::<web_sys::WheelEvent>() else { return };
    e.prevent_default();
    let scale = match w.delta_mode() {
        1 => 16.0,
        2 => 400.0,
        _ => 1.0,
    };
    let (dx, dy) = (w.delta_x() * scale, w.delta_y() * scale);
    {
        let mut cm = c.borrow_mut();
        if w.ctrl_key() || w.meta_key() {
            cm.view.zoom_at((dy * 0.002).exp(), f64::from(w.offset_x()));
        } else if w.shift_key() || dx.abs() > dy.abs() {
            let d = if dx.abs() > dy.abs() { dx } else { dy };
            cm.view.t0 += d * cm.view.ns_per_px;
        } else {
            cm.view.scroll_y += dy;
        }
    }
    moved(c);
}

/// A key anywhere on the page (but not while typing in a field, nor with a modifier): Escape
/// clears the selection, W/S/A/D/0 move the view.
fn on_key(c: &Shared, selected: &UseStateHandle<Option<panel::Selected>>, e: &web_sys::Event) {
    let Some(k) = e.dyn_ref::<web_sys::KeyboardEvent>() else { return };
    if k.ctrl_key() || k.meta_key() || k.alt_key() {
        return;
    }
    let typing = e
        .target()
        .and_then(|t| t.dyn_into::<web_sys::Element>().ok())
        .is_some_and(|el| matches!(el.tag_name().as_str(), "INPUT" | "TEXTAREA" | "SELECT"));
    if typing {
        return;
    }
    if k.key() == "Escape" {
        selected.set(None);
        members::select(&mut c.borrow_mut(), None);
        request_frame(c);
    }
    let done = match k.key().as_str() {
        "[" | "]" => members::step(c, selected, k.key() == "]"),
        "p" | "P" => {
            let id = c.borrow().pointer.selected.as_ref().map(|s| s.0);
            id.map(|id| pins::toggle(c, id)).is_some()
        }
        _ => false,
    };
    if done {
        e.prevent_default();
        return;
    }
    if key_action(c, &k.key()) {
        e.prevent_default();
    }
}

/// The listeners the timeline keeps while it is shown: the canvas' wheel, the window's keys and
/// resize, and the colour scheme's change. Dropping them removes them.
pub(super) fn listen(
    ctl: &Shared,
    canvas: &NodeRef,
    selected: &UseStateHandle<Option<panel::Selected>>,
) -> Vec<Listener> {
    let mut keep: Vec<Listener> = Vec::new();
    if let Some(el) = canvas.cast::<HtmlCanvasElement>() {
        let c = ctl.clone();
        keep.push(Listener::active(el.into(), "wheel", move |e: web_sys::Event| on_wheel(&c, &e)));
    }
    if let Some(win) = web_sys::window() {
        let c = ctl.clone();
        let selected = selected.clone();
        keep.push(Listener::active(win.clone().into(), "keydown", move |e: web_sys::Event| {
            on_key(&c, &selected, &e)
        }));
        let c = ctl.clone();
        keep.push(Listener::new(win.clone().into(), "resize", move |_| request_frame(&c)));
        if let Ok(Some(mq)) = win.match_media("(prefers-color-scheme: dark)") {
            let c = ctl.clone();
            keep.push(Listener::new(mq.into(), "change", move |_| {
                c.borrow_mut().colors = Colors::default();
                request_frame(&c);
            }));
        }
    }
    keep
}

/// Cancels the pending animation frame and settle timer: the frame and settle closures die with
/// the timeline, and nothing may call them after.
pub(super) fn stop_frames(ctl: &Shared) {
    let mut c = ctl.borrow_mut();
    if let Some(w) = web_sys::window() {
        if let (true, Some(id)) = (c.frames.pending, c.frames.id.take()) {
            let _ = w.cancel_animation_frame(id);
        }
        if let Some((id, _)) = c.frames.settle.take() {
            w.clear_timeout_with_handle(id);
        }
    }
    c.frames.pending = false;
}
