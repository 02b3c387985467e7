//! Timeline: every rank's CPU threads and GPU streams on one canvas.
//!
//! The canvas never sees events: it draws level-of-detail tiles (see
//! `rankscope_core::view::timeline`) that the workers compute and this component caches. At each
//! frame it picks the level whose pixel is at most the screen's, draws the tiles it has, and for
//! a missing one asks the worker and meanwhile draws the nearest coarser tile it has, so zoom and
//! pan never wait. Interaction follows Perfetto: Ctrl+wheel zooms at the pointer, Shift+wheel
//! pans, wheel scrolls, drag pans, W/S zoom and A/D pan.
//!
//! Time runs on the aligned clock (each rank's time − the analysis' alignment offset of its
//! rank; a row's `offset_ns` is the shift added to its rank's times) or, with the toggle, on each
//! rank's own clock. Positions are computed as `i64` ns relative to the job's first
//! event before they become `f64` pixels, so a nanosecond stays a nanosecond at any zoom.
//!
//! **Layout.** This file holds the component and the control's state, grouped by concern
//! (`Viewport`, `Tiles`, `Pointer`, `Search`, `Frames`); `ctl` moves the view and lays out the
//! rows, `draw` paints a frame, `input` turns the mouse, the wheel, the keys and the search box
//! into moves and requests; `pins` keeps ranks at the top, `members` lists and selects a
//! collective's members across ranks, `path` draws the lead finding's critical path, `memory`
//! the memory track under each rank's lanes.

use std::cell::RefCell;
use std::collections::{HashMap, HashSet};
use std::rc::{Rc, Weak};

use rankscope_core::model::Class;
use rankscope_core::sequence::marks::{Mark, MarkKind};
use rankscope_core::view::timeline::{level_for, tiles_covering, MAX_LEVEL, NO_LABEL, TILE_PX};
use rankscope_core::view::{EventDetail, Found, Hit, Tile, TileKey};
use wasm_bindgen::prelude::*;
use wasm_bindgen::JsCast;
use web_sys::{CanvasRenderingContext2d, HtmlCanvasElement};
use yew::prelude::*;

use super::{Ctx, Listener};
use crate::format;
use crate::pool::{Pool, Reply};
use crate::protocol::{Answer, Query, RankId};
use crate::state::{Action, JobView};
use crate::tokens::*;

mod ctl;

/// The narrowest window the timeline shows: 1 µs. Kineto writes times in µs with three
/// decimals, and the shortest kernels last a few µs: a narrower window shows part of one
/// event's edge and no ruler a reader can use. A window asked for narrower (a URL hash's
/// `t0=0&t1=62`) is widened to it around its start, and the bar above the timeline says so.
const MIN_WINDOW_NS: f64 = 1_000.0;
mod area;
mod draw;
mod input;
mod members;
mod memory;
mod metrics;
mod panel;
mod path;
mod pins;

pub(crate) use path::lead_path;

use ctl::*;
use draw::*;

#[derive(Properties, PartialEq, Debug)]
pub struct Props {
    pub job: Rc<JobView>,
    /// The window from the URL hash (ns from the job's first event).
    pub window: Option<(i64, i64)>,
    /// The rank to scroll to.
    pub focus: Option<u32>,
    /// Aligned clocks (each rank's time − its alignment offset) or raw.
    pub aligned: bool,
    /// Counts the times another view opened the timeline: a new count shows `window` and
    /// `focus` again even when they are the same as before.
    #[prop_or_default]
    pub opened: u32,
    /// A group or role: the timeline folds to its members.
    #[prop_or_default]
    pub filter: Option<crate::groups::Filter>,
    /// Ranks pinned to the top (from the URL hash), in pin order.
    #[prop_or_default]
    pub pins: Vec<u32>,
    /// The lead finding's path drawn.
    #[prop_or_default]
    pub path: bool,
}

#[derive(Debug, Clone)]
enum RowKind {
    Rank {
        id: RankId,
        label: String,
        steps: Vec<(u32, i64, i64)>,
        offset_ns: i64,
    },
    Lane {
        id: RankId,
        lane: u32,
        label: String,
        depth: u32,
        offset_ns: i64,
    },
    /// One device's memory track of a rank ([`memory`]).
    Memory {
        id: RankId,
        rank: u32,
        track: rankscope_core::view::memory::MemoryTrack,
        offset_ns: i64,
    },
    /// One cluster metric row under a rank ([`metrics`]): its index in the job's tracks.
    Metric {
        id: RankId,
        row: u32,
        offset_ns: i64,
    },
}

#[derive(Debug, Clone)]
struct Row {
    kind: RowKind,
    /// Top in content coordinates (before scrolling), CSS px.
    y: f64,
    h: f64,
    /// Bottom of the rank group this row belongs to (for step lines).
    group_end: f64,
    /// In the pinned band at the top: drawn at `y` whatever the scroll.
    pinned: bool,
}

#[derive(Debug, Default, Clone)]
struct Colors {
    class: Vec<String>,
    text_on: Vec<String>,
    bg: String,
    fg: String,
    muted: String,
    header: String,
    lane_alt: String,
    step: String,
    ruler: String,
    highlight: String,
    select: String,
    path: String,
    mem_alloc: String,
    mem_reserved: String,
    metric: String,
}

/// What is on screen: the time window, the vertical scroll and the canvas' size.
struct Viewport {
    /// The job's first event (ns): positions are computed relative to it.
    origin: i64,
    total_ns: f64,
    /// View start (ns from `origin`) and zoom.
    t0: f64,
    ns_per_px: f64,
    scroll_y: f64,
    width: f64,
    height: f64,
    /// Height of every row together.
    content_h: f64,
}

/// Level-of-detail tiles received, and the ones asked for.
#[derive(Default)]
struct Tiles {
    cache: HashMap<(RankId, TileKey), Rc<Tile>>,
    inflight: HashSet<(RankId, TileKey)>,
}

/// The pointer and what it found.
#[derive(Default)]
struct Pointer {
    /// Canvas position.
    at: Option<(f64, f64)>,
    /// The event under the pointer: rank, lane, nesting row, details.
    hover: Option<(RankId, u32, u32, EventDetail)>,
    /// Where the pending pick asked (rank, lane, row), and its request number.
    asked: (RankId, u32, u32),
    req: u32,
    /// The clicked event (rank, lane, row, details): outlined, with its launch → kernel flow.
    selected: Option<(RankId, u32, u32, EventDetail)>,
    /// The args panel's request: an answer for an older click is dropped.
    panel_req: u32,
    /// The area selection (Shift+drag): its two ends, ns from the job's first event; whether
    /// it is being dragged; its totals' request ([`area`]).
    area: Option<(f64, f64)>,
    area_drag: bool,
    area_req: u32,
    drag: Option<(f64, f64, f64, f64, bool)>,
    /// The memory track's reading under the pointer, and the one a click kept ([`memory`]).
    memory: Option<memory::Readout>,
    memory_kept: Option<memory::Readout>,
    /// The metric rows' reading under the pointer, and the one a click kept ([`metrics`]).
    metric: Option<metrics::Readout>,
    metric_kept: Option<metrics::Readout>,
}

/// Search matches per rank, for the current request.
#[derive(Default)]
struct Search {
    found: HashMap<RankId, Found>,
    req: u32,
}

/// The animation frame and the settle timer.
#[derive(Default)]
struct Frames {
    pending: bool,
    /// The pending animation frame's id (cancelled when the timeline goes away: its closure is
    /// dropped with this value).
    id: Option<i32>,
    frame: Option<Closure<dyn FnMut()>>,
    settle: Option<(i32, Closure<dyn FnMut()>)>,
    /// The window last written to the state (to tell our own updates from the hash's).
    published: Option<(i64, i64)>,
}

/// Where the workers' answers for this timeline go: a tile's straight to the cache; a pick's and
/// a search's with the request number they were asked under (a stale one is dropped).
struct Sinks {
    tile: Reply,
    pick: Sink,
    found: Sink,
    memory: Reply,
}

/// An answer with the timeline's own request number.
type Sink = Rc<dyn Fn(RankId, u32, Answer)>;

struct Ctl {
    canvas: NodeRef,
    pool: Option<Pool>,
    sinks: Option<Sinks>,
    dispatch: Option<Callback<Action>>,
    view: Viewport,
    rows: Vec<Row>,
    tiles: Tiles,
    colors: Colors,
    pointer: Pointer,
    search: Search,
    frames: Frames,
    /// Rank groups folded to their header (click the header to fold or unfold).
    collapsed: HashSet<RankId>,
    job: Option<Rc<JobView>>,
    aligned: bool,
    /// The rank opened from another view: its header is marked.
    focus: Option<u32>,
    /// The first hang / mismatch on each rank ([`crate::divergence`]), own clocks.
    marks: Vec<(RankId, Mark)>,
    /// The marks' places as last written to the canvas' `data-marks` (a test hook).
    marks_attr: String,
    /// The window's width in ns as last written to the canvas' `data-visible-ns` (a test hook).
    visible_attr: String,
    /// The `opened` count last shown.
    opened_seen: u32,
    /// The ranks the filter keeps (None: every rank).
    only: Option<std::collections::BTreeSet<u32>>,
    /// Ranks pinned to the top, in pin order; the bottom of their band (content y, where the
    /// scrolled rows start: `RULER_H` without pins).
    pins: Vec<u32>,
    pinned_h: f64,
    /// The selected collective's members, where the timeline outlines them: rank id, lane and
    /// own-clock times ([`members`]).
    members: Vec<(RankId, u32, i64, i64)>,
    /// The lead finding's path, when drawn ([`path`]).
    path: Option<path::Drawn>,
    /// The rank headers' places as last written to `data-headers` (a test hook).
    headers_attr: String,
    /// What the path drew, as last written to `data-path` (a test hook).
    path_attr: String,
    /// The selection's place, as last written to `data-selected` (a test hook).
    selected_attr: String,
    /// The memory rows shown (the bar's Memory button), their tiles, and what was last written
    /// to `data-memory` (a test hook).
    memory_shown: bool,
    memory: memory::MemoryTiles,
    memory_attr: String,
    /// The metric rows shown (the bar's Metrics button), and what was last written to
    /// `data-metrics` (a test hook).
    metrics_shown: bool,
    metrics_attr: String,
}

type Shared = Rc<RefCell<Ctl>>;

fn pick_at(c: &Shared, x: f64, y: f64) {
    let (pool, ask) = {
        let mut ctl = c.borrow_mut();
        ctl.pointer.at = Some((x, y));
        ctl.pointer.memory = memory::readout_at(&ctl, x, y);
        ctl.pointer.metric = metrics::readout_at(&ctl, x, y);
        let hit = if x > GUTTER_W && y > RULER_H { ctl.lane_at(y) } else { None };
        match hit {
            Some((id, lane, depth, offset_ns)) => {
                let t = ctl.view.origin + (ctl.view.t0 + (x - GUTTER_W) * ctl.view.ns_per_px).round() as i64
                    - offset_ns;
                let slop = (3.0 * ctl.view.ns_per_px).ceil() as i64;
                ctl.pointer.req = ctl.pointer.req.wrapping_add(1);
                ctl.pointer.asked = (id, lane, depth);
                (ctl.pool.clone(), Some((id, ctl.pointer.req, lane, depth, t, slop)))
            }
            None => {
                ctl.pointer.hover = None;
                (None, None)
            }
        }
    };
    let sink = c.borrow().sinks.as_ref().map(|s| s.pick.clone());
    if let (Some(p), Some((id, req, lane, depth, t, slop)), Some(sink)) = (pool, ask, sink) {
        let reply: Reply = Rc::new(move |id, answer, _| sink(id, req, answer));
        p.ask(id, Query::Pick { lane, depth, t_ns: t, slop_ns: slop }, Some(reply));
    }
    request_frame(c);
}

fn key_action(c: &Shared, key: &str) -> bool {
    {
        let mut ctl = c.borrow_mut();
        let x = ctl.pointer.at.map_or(GUTTER_W + ctl.view.plot_w() / 2.0, |p| p.0);
        let pan = ctl.view.plot_w() * ctl.view.ns_per_px * 0.15;
        match key {
            "w" | "W" => ctl.view.zoom_at(0.8, x),
            "s" | "S" => ctl.view.zoom_at(1.25, x),
            "a" | "A" => ctl.view.t0 -= pan,
            "d" | "D" => ctl.view.t0 += pan,
            "0" => ctl.view.fit(),
            _ => return false,
        }
    }
    moved(c);
    true
}

#[function_component(Timeline)]
pub fn timeline(p: &Props) -> Html {
    let canvas = use_node_ref();
    let ctx = use_context::<Ctx>();
    let ctl: Shared = {
        let canvas = canvas.clone();
        use_mut_ref(move || Ctl::new(canvas))
    };
    let selected = use_state(|| None::<panel::Selected>);
    let area_totals = use_state(|| None::<area::AreaTotals>);
    // Events matching the search, over every rank (None: no search).
    let matches = use_state(|| None::<u64>);
    let memory_shown = use_state(|| true);
    let metrics_shown = use_state(|| true);

    // Layout, pool and sinks follow the job.
    {
        let ctl = ctl.clone();
        let ctx = ctx.clone();
        let place = (p.focus, p.window.is_some());
        let matches = matches.clone();
        use_effect_with((p.job.clone(), p.aligned, p.filter.clone()), move |(job, aligned, filter)| {
            follow_job(&ctl, ctx.as_ref(), (job, *aligned, filter.as_ref()), place, matches);
            request_frame(&ctl);
            move || {
                ctl.borrow_mut().sinks = None;
            }
        });
    }

    // The pinned ranks and the path follow the state (the URL hash); the view stays where it is.
    {
        let ctl = ctl.clone();
        use_effect_with(
            (p.job.clone(), p.aligned, p.filter.clone(), p.pins.clone(), p.path),
            move |(job, _, _, pins, on)| {
                pins::follow(&ctl, pins);
                path::follow(&ctl, job, *on);
                request_frame(&ctl);
            },
        );
    }

    // A window from the URL hash or another view (not one we wrote ourselves), and the rank to
    // show first.
    {
        let ctl = ctl.clone();
        use_effect_with((p.window, p.focus, p.opened), move |(win, focus, opened)| {
            show_opened(&ctl, *win, *focus, *opened);
        });
    }

    // Wheel (not passive: it must not scroll or zoom the page), keys, resize, theme.
    {
        let ctl = ctl.clone();
        let canvas = canvas.clone();
        let selected = selected.clone();
        use_effect_with((), move |_| {
            let keep = input::listen(&ctl, &canvas, &selected);
            let ctl = ctl.clone();
            move || {
                drop(keep);
                input::stop_frames(&ctl);
            }
        });
    }

    let toggle_clock = {
        let ctx = ctx.clone();
        let aligned = p.aligned;
        Callback::from(move |_| {
            if let Some(c) = &ctx {
                c.dispatch.emit(Action::SetAligned(!aligned));
            }
        })
    };
    let focus_id = p.focus.and_then(|r| p.job.id_of(r));
    let on_search = input::on_search(&ctl, matches.clone(), p.job.ranks.iter().map(|(f, _)| *f).collect());
    let show_divergence = {
        let ctx = ctx.clone();
        let job = p.job.clone();
        Callback::from(move |_| {
            if let (Some(c), Some(a)) = (&ctx, crate::divergence::open(&job)) {
                c.dispatch.emit(a);
            }
        })
    };
    html! {
        <section class="timeline-view">
            <div class="timeline-bar">
                <span class="clock" role="group" aria-label="Clocks">
                    <button class={classes!("tab", p.aligned.then_some("active"))} data-testid="clock-aligned"
                        disabled={p.aligned} onclick={toggle_clock.clone()} title="each rank's time − its alignment offset">{"Aligned"}</button>
                    <button class={classes!("tab", (!p.aligned).then_some("active"))} data-testid="clock-raw"
                        disabled={!p.aligned} onclick={toggle_clock} title="each rank's own clock, as written">{"Raw clocks"}</button>
                </span>
                <input type="search" class="search" placeholder="Search names…" aria-label="Search events by name"
                    data-testid="timeline-search" oninput={on_search} />
                if let Some(n) = *matches {
                    <span class="muted" data-testid="search-count" data-count={n.to_string()}>
                        {format!("{} match{}", format::thousands(n), if n == 1 { "" } else { "es" })}
                    </span>
                }
                <span class="legend">{ legend() }</span>
                <span class="spacer"></span>
                { memory::toggle(&ctl, &p.job, &memory_shown) }
                { metrics::toggle(&ctl, &p.job, &metrics_shown) }
                { path::toggle(&p.job, p.path, ctx.as_ref()) }
                <span class="muted keys" title="Ctrl+wheel or W/S zoom · drag, Shift+wheel or A/D pan · 0 fits · click a rank's header to fold it, its pin to pin it on top (P pins the selection's rank) · click an event for its args panel; [ and ] step through a collective's members · Shift+drag selects a range and totals it">{"keys: ?"}</span>
                <button class="small" data-testid="export-png" onclick={input::on_png(&canvas)} title="Save what the timeline shows as a PNG">{"PNG"}</button>
            </div>
            { notice_bars(p, show_divergence) }
            { pins::chips(&p.job, &p.pins, ctx.as_ref()) }
            if p.path { { path::bar(&p.job, input::on_show(&ctl)) } }
            <div class="timeline" data-testid="timeline" data-clock={if p.aligned { "aligned" } else { "raw" }}
                data-focus-rank={p.focus.map(|r| r.to_string())} data-focus-file={focus_id.map(|id| id.file.to_string())}>
                <canvas ref={canvas} tabindex="0" aria-label="Timeline of every rank's threads and streams"
                    onmousedown={input::on_down(&ctl)} onmousemove={input::on_move(&ctl)}
                    onmouseup={input::on_up(&ctl, (selected.clone(), area_totals.clone()), ctx.clone())} onmouseleave={input::on_leave(&ctl)}></canvas>
            </div>
            if let Some(t) = &*area_totals {
                { area::table(t, input::on_area_close(&ctl, area_totals.clone())) }
            }
            if let Some(s) = &*selected {
                { panel::panel(&p.job, s, input::on_show(&ctl), members::list(&p.job, s, &p.pins, members::on_pick(&ctl, &selected, ctx.clone()), ctx.as_ref())) }
            }
        </section>
    }
}

/// Follows a new job, clock or filter: lays out the rows, empties the tile cache, sizes the
/// canvas, fits the view (unless a window was given, `place.1`) or scrolls to the focused rank
/// (`place.0`), and with a pool installs the sinks the workers answer into.
fn follow_job(
    ctl: &Shared,
    ctx: Option<&Ctx>,
    (job, aligned, filter): (&Rc<JobView>, bool, Option<&crate::groups::Filter>),
    (focus, has_window): (Option<u32>, bool),
    matches: UseStateHandle<Option<u64>>,
) {
    let pool = ctx.and_then(Ctx::pool);
    {
        let mut c = ctl.borrow_mut();
        c.aligned = aligned;
        c.only = filter.and_then(|f| f.members(job.analysis.layout.as_ref()));
        c.pool = pool.clone();
        c.dispatch = ctx.map(|x| x.dispatch.clone());
        c.job = Some(job.clone());
        c.collapsed.clear();
        c.layout(job);
        c.tiles.cache.clear();
        c.tiles.inflight.clear();
        c.memory.cache.clear();
        c.memory.inflight.clear();
        if let Some(canvas) = c.canvas.cast::<HtmlCanvasElement>().and_then(|e| e.parent_element()) {
            c.view.width = f64::from(canvas.client_width()).max(200.0);
            c.view.height = f64::from(canvas.client_height()).max(200.0);
        }
        if !has_window {
            c.view.fit();
        }
        if let Some(r) = focus {
            c.scroll_to_rank(r);
        }
    }
    if pool.is_some() {
        let s = sinks(ctl, matches);
        ctl.borrow_mut().sinks = Some(s);
    }
}

/// The sinks for the workers' answers: a tile goes to the cache; a pick becomes the hover, and
/// a search's matches are counted into `matches`, each only if it answers the current request.
fn sinks(ctl: &Shared, matches: UseStateHandle<Option<u64>>) -> Sinks {
    let weak = Rc::downgrade(ctl);
    let tile: Reply = Rc::new(move |id, answer, _| {
        let Answer::Tile(tile) = answer else { return };
        if let Some(c) = weak.upgrade() {
            {
                let mut cm = c.borrow_mut();
                cm.tiles.inflight.remove(&(id, tile.key));
                if cm.tiles.cache.len() > 50_000 {
                    cm.tiles.cache.clear();
                }
                cm.tiles.cache.insert((id, tile.key), Rc::new(*tile));
            }
            request_frame(&c);
        }
    });
    let weak = Rc::downgrade(ctl);
    let pick: Sink = Rc::new(move |id, req, answer| {
        let Answer::Picked(detail) = answer else { return };
        if let Some(c) = weak.upgrade() {
            {
                let mut cm = c.borrow_mut();
                if req != cm.pointer.req {
                    return;
                }
                let (f, lane, depth) = cm.pointer.asked;
                cm.pointer.hover = detail.filter(|_| f == id).map(|d| (id, lane, depth, *d));
            }
            request_frame(&c);
        }
    });
    let weak = Rc::downgrade(ctl);
    let found: Sink = Rc::new(move |id, req, answer| {
        let Answer::Found(found) = answer else { return };
        if let Some(c) = weak.upgrade() {
            let total = {
                let mut cm = c.borrow_mut();
                if req != cm.search.req {
                    return;
                }
                cm.search.found.insert(id, *found);
                cm.search.found.values().map(|f| f.total).sum::<u64>()
            };
            matches.set(Some(total));
            request_frame(&c);
        }
    });
    Sinks { tile, pick, found, memory: memory::sink(ctl) }
}

/// Shows a window and a rank opened from the URL hash or another view. Opened again (a new
/// `opened` count or focus, maybe the same place): shown again, even after the user moved; a
/// window we published ourselves moves nothing.
fn show_opened(ctl: &Shared, win: Option<(i64, i64)>, focus: Option<u32>, opened: u32) {
    let fresh = {
        let mut c = ctl.borrow_mut();
        let fresh = c.opened_seen != opened || c.focus != focus;
        c.opened_seen = opened;
        fresh
    };
    if let Some((a, b)) = win {
        let mine = ctl.borrow().frames.published == Some((a, b));
        if (fresh || !mine) && b > a {
            {
                let mut c = ctl.borrow_mut();
                // In f64: `b - a` of two extreme i64 (a hand-made hash) overflows.
                c.view.ns_per_px = (b as f64 - a as f64) / c.view.plot_w();
                c.view.clamp();
                c.view.t0 = a as f64;
                c.view.clamp();
            }
            request_frame(ctl);
        }
    }
    ctl.borrow_mut().focus = focus;
    if let (Some(r), true) = (focus, fresh) {
        ctl.borrow_mut().scroll_to_rank(r);
    }
    request_frame(ctl);
}

/// The legend: one swatch per event class (but `other`).
fn legend() -> Html {
    Class::ALL
        .iter()
        .filter(|c| !matches!(c, Class::Other))
        .map(|&c| {
            html! { <span class="legend-item"><span class={classes!("swatch", format!("c-{}", c.name().replace('_', "-")))}></span>{c.name().replace('_', " ")}</span> }
        })
        .collect()
}

/// The first hang / mismatch's sentence, when there is one and it is placed on the timeline.
fn divergence_sentence(job: &JobView) -> Option<String> {
    use rankscope_core::sequence::DiagnosisKind;
    let seq = job.analysis.sequence.as_ref()?;
    let d = seq.diagnoses.iter().find(|d| matches!(d.kind, DiagnosisKind::Hang | DiagnosisKind::Mismatch))?;
    (!crate::divergence::placed(job).is_empty()).then(|| d.sentence.clone())
}

/// The bars under the toolbar: the first divergence with a button to show it, the group filter,
/// and a digest's note that it has no events.
fn notice_bars(p: &Props, show_divergence: Callback<MouseEvent>) -> Html {
    html! {
        <>
            if let Some(sentence) = divergence_sentence(&p.job) {
                <div class="divergence-bar" data-testid="divergence-bar">
                    <span class="divergence-text" title={sentence.clone()}>{sentence}</span>
                    <button class="small" data-testid="divergence-show" onclick={show_divergence}
                        title="Zoom to the divergent collective on every rank">{"Show it"}</button>
                </div>
            }
            if let Some(asked) = p.window.map(|(a, b)| b as f64 - a as f64).filter(|&w| w < MIN_WINDOW_NS) {
                <div class="digest-bar" data-testid="window-widened">
                    {format!("The window asked for ({}) is narrower than the timeline shows: widened to {}.",
                        format::duration(asked), format::duration(MIN_WINDOW_NS))}
                </div>
            }
            if let Some(f) = &p.filter {
                <div class="digest-bar" data-testid="timeline-filter">
                    <super::group_filter::GroupFilter job={p.job.clone()} filter={Some(f.clone())} what="ranks"
                        shown={f.members(p.job.analysis.layout.as_ref()).map(|m| (m.len(), p.job.ranks.len()))} />
                    <span class="muted">{" · the timeline shows only these ranks"}</span>
                </div>
            }
            if let Some(name) = &p.job.digest {
                <div class="digest-bar" data-testid="digest-no-events">
                    {digest_sentence(name, &p.job)}
                </div>
            }
        </>
    }
}

/// What the timeline of a digest shows, and how to see more.
fn digest_sentence(name: &str, job: &JobView) -> String {
    let traced = job.ranks.iter().filter(|(_, r)| !r.lanes.is_empty()).count();
    let all = job.ranks.len();
    if traced == 0 {
        format!(
            "{name} is a job digest: it holds every rank's figures but no events. Drop ranks' trace files here \
             to see their timelines, aligned with the job's offsets."
        )
    } else {
        format!(
            "{name} is a job digest without events: {traced} of {all} ranks have their trace loaded and are drawn, \
             on the job's offsets. Drop more ranks' trace files here to add them."
        )
    }
}
