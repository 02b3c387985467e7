//! A canvas of rows (one per rank) under a fixed header, in a scroll box: the Ranks × steps
//! heatmap and the per-rank bars. Only the rows in sight are drawn, at the device's pixel ratio,
//! on every scroll and when the hovered item changes, so 1,024 ranks cost what 30 do.
//!
//! The canvas sticks to the top of its box while a spacer as tall as every row scrolls under
//! it: the box scrolls natively (wheel, keys, scroll bar) and the canvas paints what the scroll
//! offset shows. What is drawn and what a point hits are a [`Rows`]; the tooltip (the figure
//! under the pointer) is a DOM element moved with the pointer, so a screen reader and a test
//! read the same text. Sizes are set through the CSSOM (the page's CSP forbids inline styles).

use std::cell::RefCell;
use std::rc::Rc;

use wasm_bindgen::JsCast;
use web_sys::{CanvasRenderingContext2d, HtmlCanvasElement, HtmlElement};
use yew::prelude::*;

/// One item under the pointer: where it is on the canvas' content (CSS px, before scrolling)
/// and what the tooltip says.
#[derive(Debug, Clone, PartialEq)]
pub struct Hit {
    pub row: usize,
    pub col: usize,
    pub x: f64,
    pub y: f64,
    pub w: f64,
    pub h: f64,
    pub tip: String,
}

/// What a [`RowCanvas`] draws. Coordinates are content CSS px: row `i` spans
/// `top() + i * row_h() ..` before the scroll offset.
pub trait Rows {
    fn rows(&self) -> usize;
    fn row_h(&self) -> f64;
    /// Height of the header drawn above the rows (it stays in place while they scroll).
    fn top(&self) -> f64;
    fn width(&self) -> f64;
    /// The CSS custom properties the drawing reads, in the order `draw` receives them.
    fn colors(&self) -> &'static [(&'static str, &'static str)];
    /// Draws rows `first..last` with the content shifted up by `scroll`, then the header.
    fn draw(&self, g: &CanvasRenderingContext2d, colors: &[String], first: usize, last: usize, scroll: f64);
    fn hit(&self, x: f64, y: f64) -> Option<Hit>;
    fn click(&self, _hit: &Hit) {}
    /// The layout as JSON (for tests and tools: where each row and column is).
    fn layout(&self) -> String;
}

#[derive(Properties, Clone)]
pub struct Props {
    pub rows: Rc<dyn Rows>,
    pub testid: &'static str,
    pub label: String,
    #[prop_or_default]
    pub metric: Option<&'static str>,
    #[prop_or_default]
    pub children: Html,
}

impl std::fmt::Debug for Props {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "RowCanvas({}, {} rows)", self.testid, self.rows.rows())
    }
}

impl PartialEq for Props {
    fn eq(&self, o: &Self) -> bool {
        Rc::ptr_eq(&self.rows, &o.rows)
            && self.testid == o.testid
            && self.label == o.label
            && self.metric == o.metric
            && self.children == o.children
    }
}

fn css_var(style: &web_sys::CssStyleDeclaration, name: &str, fallback: &str) -> String {
    let v = style.get_property_value(name).unwrap_or_default();
    let v = v.trim();
    if v.is_empty() { fallback } else { v }.to_string()
}

fn read_colors(rows: &dyn Rows) -> Vec<String> {
    let style = web_sys::window()
        .zip(web_sys::window().and_then(|w| w.document()).and_then(|d| d.document_element()))
        .and_then(|(w, el)| w.get_computed_style(&el).ok().flatten());
    rows.colors()
        .iter()
        .map(|(name, fallback)| style.as_ref().map_or(fallback.to_string(), |s| css_var(s, name, fallback)))
        .collect()
}

fn set_px(el: &HtmlElement, prop: &str, v: f64) {
    let _ = el.style().set_property(prop, &format!("{v:.0}px"));
}

#[derive(Default)]
struct State {
    colors: Vec<String>,
    hover: Option<Hit>,
}

/// Paints what the box shows now.
fn paint(rows: &dyn Rows, boxed: &NodeRef, canvas: &NodeRef, st: &RefCell<State>) {
    let (Some(b), Some(c)) = (boxed.cast::<HtmlElement>(), canvas.cast::<HtmlCanvasElement>()) else {
        return;
    };
    let scroll = f64::from(b.scroll_top());
    let w = rows.width();
    let full = rows.top() + rows.row_h() * rows.rows() as f64 + 4.0;
    let h = f64::from(b.client_height()).clamp(1.0, full);
    let dpr = web_sys::window().map_or(1.0, |w| w.device_pixel_ratio()).max(1.0);
    let (pw, ph) = ((w * dpr).round() as u32, (h * dpr).round() as u32);
    if c.width() != pw || c.height() != ph {
        c.set_width(pw);
        c.set_height(ph);
        set_px(&c, "width", w);
        set_px(&c, "height", h);
    }
    let Some(g) =
        c.get_context("2d").ok().flatten().and_then(|x| x.dyn_into::<CanvasRenderingContext2d>().ok())
    else {
        return;
    };
    let mut st = st.borrow_mut();
    if st.colors.is_empty() {
        st.colors = read_colors(rows);
    }
    let _ = g.set_transform(dpr, 0.0, 0.0, dpr, 0.0, 0.0);
    g.clear_rect(0.0, 0.0, w, h);
    let rh = rows.row_h().max(1.0);
    let first = ((scroll / rh).floor().max(0.0) as usize).min(rows.rows());
    let last = (((scroll + h - rows.top()) / rh).ceil().max(0.0) as usize + 1).min(rows.rows());
    rows.draw(&g, &st.colors, first, last, scroll);
    if let Some(hit) = &st.hover {
        // The hovered item's outline, in the foreground colour (the first colour by convention).
        g.set_stroke_style_str(st.colors.first().map_or("#111111", String::as_str));
        g.set_line_width(1.5);
        let y = hit.y - scroll;
        if y + hit.h > rows.top() {
            g.stroke_rect(hit.x + 0.75, y + 0.75, (hit.w - 1.5).max(1.0), (hit.h - 1.5).max(1.0));
        }
    }
}

#[function_component(RowCanvas)]
pub fn row_canvas(p: &Props) -> Html {
    let boxed = use_node_ref();
    let space = use_node_ref();
    let canvas = use_node_ref();
    let tip = use_node_ref();
    let st = use_mut_ref(State::default);
    {
        let (rows, boxed, space, canvas, st) =
            (p.rows.clone(), boxed.clone(), space.clone(), canvas.clone(), st.clone());
        use_effect_with(PtrKey(p.rows.clone()), move |_| {
            if let Some(s) = space.cast::<HtmlElement>() {
                set_px(&s, "height", rows.top() + rows.row_h() * rows.rows() as f64 + 4.0);
                set_px(&s, "width", rows.width());
            }
            {
                let mut s = st.borrow_mut();
                s.colors.clear();
                s.hover = None;
            }
            paint(&*rows, &boxed, &canvas, &st);
        });
    }
    let onscroll = {
        let (rows, boxed, canvas, st) = (p.rows.clone(), boxed.clone(), canvas.clone(), st.clone());
        Callback::from(move |_: Event| paint(&*rows, &boxed, &canvas, &st))
    };
    // The item under the pointer: outline it and show its figure beside the pointer.
    let onmousemove = {
        let (rows, boxed, canvas, tip, st) =
            (p.rows.clone(), boxed.clone(), canvas.clone(), tip.clone(), st.clone());
        Callback::from(move |e: MouseEvent| {
            let scroll = boxed.cast::<HtmlElement>().map_or(0.0, |b| f64::from(b.scroll_top()));
            let (x, y) = (f64::from(e.offset_x()), f64::from(e.offset_y()));
            let hit = if y < rows.top() { None } else { rows.hit(x, y + scroll) };
            if let Some(t) = tip.cast::<HtmlElement>() {
                match &hit {
                    Some(h) => {
                        if st.borrow().hover.as_ref().map(|o| &o.tip) != Some(&h.tip) {
                            t.set_inner_text(&h.tip);
                        }
                        t.set_hidden(false);
                        // Below-right of the pointer, flipped left near the right edge.
                        let left = if x + 300.0 > rows.width() { (x - 300.0).max(0.0) } else { x + 14.0 };
                        set_px(&t, "left", left);
                        set_px(&t, "top", y + 16.0);
                    }
                    None => t.set_hidden(true),
                }
            }
            let changed =
                st.borrow().hover.as_ref().map(|h| (h.row, h.col)) != hit.as_ref().map(|h| (h.row, h.col));
            st.borrow_mut().hover = hit;
            if changed {
                paint(&*rows, &boxed, &canvas, &st);
            }
        })
    };
    let onmouseleave = {
        let (rows, boxed, canvas, tip, st) =
            (p.rows.clone(), boxed.clone(), canvas.clone(), tip.clone(), st.clone());
        Callback::from(move |_: MouseEvent| {
            if let Some(t) = tip.cast::<HtmlElement>() {
                t.set_hidden(true);
            }
            if st.borrow_mut().hover.take().is_some() {
                paint(&*rows, &boxed, &canvas, &st);
            }
        })
    };
    let onclick = {
        let (rows, boxed) = (p.rows.clone(), boxed.clone());
        Callback::from(move |e: MouseEvent| {
            let scroll = boxed.cast::<HtmlElement>().map_or(0.0, |b| f64::from(b.scroll_top()));
            let (x, y) = (f64::from(e.offset_x()), f64::from(e.offset_y()));
            if y >= rows.top() {
                if let Some(h) = rows.hit(x, y + scroll) {
                    rows.click(&h);
                }
            }
        })
    };
    html! {
        <div class="rows-wrap">
            <div class="rows-box" data-testid={p.testid} data-metric={p.metric} ref={boxed} {onscroll}>
                <div class="rows-space" ref={space}>
                    <canvas class="rows-canvas" ref={canvas} role="img" aria-label={p.label.clone()}
                        data-layout={p.rows.layout()} {onmousemove} {onmouseleave} {onclick}></canvas>
                </div>
                { p.children.clone() }
            </div>
            <div class="rows-tip" data-testid={format!("{}-tip", p.testid)} role="status" ref={tip} hidden=true></div>
        </div>
    }
}

/// An `Rc` compared by address (a new [`Rows`] is a new drawing).
#[derive(Clone)]
struct PtrKey(Rc<dyn Rows>);

impl PartialEq for PtrKey {
    fn eq(&self, o: &Self) -> bool {
        Rc::ptr_eq(&self.0, &o.0)
    }
}
