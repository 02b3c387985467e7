//! Pinned ranks: a rank pinned stays at the top of the timeline, under the ruler, while the
//! other ranks scroll under it (Perfetto's pinned tracks). A click on the pin at the right of a
//! rank's header pins or unpins it, `P` pins or unpins the selected event's rank, the args
//! panel has a button, and the bar above the canvas lists the pins (a click unpins). Pins are
//! ranks (their whole group: header and lanes), kept in the state and the URL hash
//! (`pins=3,5`), so they survive zoom, pan, a fold, a clock change and a reload.

use super::*;

/// Width of the pin's place at the right of a rank's header (CSS px).
pub(super) const PIN_W: f64 = 46.0;

/// Whether canvas x is on a header's pin.
pub(super) fn on_pin(x: f64) -> bool {
    (GUTTER_W - PIN_W..GUTTER_W).contains(&x)
}

/// Takes the pins from the state and lays the rows out again (the view keeps its window).
pub(super) fn follow(ctl: &Shared, pins: &[u32]) {
    let mut c = ctl.borrow_mut();
    if c.pins == pins {
        return;
    }
    c.pins = pins.to_vec();
    if let Some(job) = c.job.clone() {
        c.layout(&job);
        c.view.clamp();
    }
}

/// `pins` with `rank` added at the end, or taken out when it is in.
pub(super) fn toggled(pins: &[u32], rank: u32) -> Vec<u32> {
    if pins.contains(&rank) {
        pins.iter().copied().filter(|&p| p != rank).collect()
    } else {
        pins.iter().copied().chain(std::iter::once(rank)).collect()
    }
}

/// Pins or unpins rank `id` (through the state: the hash keeps it). The control must not be
/// borrowed: the state's change lays the rows out again.
pub(super) fn toggle(ctl: &Shared, id: RankId) {
    let (action, dispatch) = {
        let c = ctl.borrow();
        let rank = c.job.as_ref().and_then(|j| j.ranks.iter().find(|(k, _)| *k == id)).map(|(_, r)| r.rank);
        (rank.map(|r| Action::SetPins(toggled(&c.pins, r))), c.dispatch.clone())
    };
    if let (Some(a), Some(d)) = (action, dispatch) {
        d.emit(a);
    }
}

/// The pin on a header: a filled marker when pinned, an outline when not.
pub(super) fn draw_pin(g: &CanvasRenderingContext2d, pinned: bool, y: f64, h: f64, col: &Colors) {
    let (x, label) = (GUTTER_W - PIN_W + 4.0, if pinned { "unpin" } else { "pin" });
    if pinned {
        g.set_fill_style_str(&col.select);
        g.fill_rect(x - 2.0, y + 3.0, PIN_W - 6.0, h - 6.0);
        g.set_fill_style_str("#ffffff");
    } else {
        g.set_stroke_style_str(&col.muted);
        g.set_line_width(1.0);
        g.stroke_rect(x - 1.5, y + 3.5, PIN_W - 7.0, h - 7.0);
        g.set_fill_style_str(&col.muted);
    }
    g.fill_text(label, x + 1.0, y + h / 2.0).ok();
}

/// Each rank header's place on the canvas as JSON, for `data-headers` (a test hook): rank,
/// top, pinned, shown (not scrolled away or under the pinned band).
pub(super) fn headers_json(c: &Ctl) -> String {
    let rank_of = |id: RankId| {
        c.job.as_ref().and_then(|j| j.ranks.iter().find(|(k, _)| *k == id)).map_or(u32::MAX, |(_, r)| r.rank)
    };
    let places: Vec<String> = c
        .rows
        .iter()
        .filter_map(|r| match r.kind {
            RowKind::Rank { id, .. } => {
                let y = c.screen_y(r);
                let shown = y >= c.top_of(r) && y < c.view.height;
                Some(format!(
                    r#"{{"rank":{},"y":{},"h":{},"pinned":{},"shown":{shown}}}"#,
                    rank_of(id),
                    y.round(),
                    r.h,
                    r.pinned
                ))
            }
            RowKind::Lane { .. } | RowKind::Memory { .. } | RowKind::Metric { .. } => None,
        })
        .collect();
    format!("[{}]", places.join(","))
}

/// The bar's list of pins, each a button that unpins it.
pub(super) fn chips(job: &JobView, pins: &[u32], ctx: Option<&Ctx>) -> Html {
    let shown: Vec<u32> =
        pins.iter().copied().filter(|p| job.ranks.iter().any(|(_, r)| r.rank == *p)).collect();
    if shown.is_empty() {
        return html! {};
    }
    let unpin = |rank: u32| {
        let (ctx, pins) = (ctx.cloned(), pins.to_vec());
        Callback::from(move |_: MouseEvent| {
            if let Some(c) = &ctx {
                c.dispatch.emit(Action::SetPins(toggled(&pins, rank)));
            }
        })
    };
    html! {
        <div class="digest-bar pins-bar" data-testid="pins-bar">
            <span class="muted">{"Pinned on top: "}</span>
            { for shown.iter().map(|&r| html! {
                <button class="small" data-testid="pin-chip" data-rank={r.to_string()} onclick={unpin(r)}
                    title="Unpin: the rank goes back to its place">{format!("rank {r} ✕")}</button>
            }) }
        </div>
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn toggled_adds_at_the_end_and_takes_out() {
        assert_eq!(super::toggled(&[], 3), vec![3]);
        assert_eq!(super::toggled(&[3], 1), vec![3, 1]);
        assert_eq!(super::toggled(&[3, 1, 5], 1), vec![3, 5]);
    }
}
