//! The replayed timeline of the What-if panel (`analyze::whatif::timeline`): the typical step,
//! per rank three bars on one time axis: as recorded, as the replay runs it, and with the lead
//! finding's cause taken away (or every rank at its peers' typical speed). Own time and waiting
//! in two colours; hovering a span names it.

use rankscope_core::analyze::whatif::timeline::{Span, SpanKind, Timeline};
use yew::prelude::*;

use crate::format;

const W: f64 = 960.0;
const LABEL_W: f64 = 130.0;
const BAR_H: f64 = 7.0;
const BAR_GAP: f64 = 2.0;
const RANK_GAP: f64 = 8.0;
const AXIS_H: f64 = 18.0;

/// The three versions of a rank's step, in the order drawn.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Version {
    Recorded,
    Replayed,
    Fixed,
}

impl Version {
    const ALL: [Version; 3] = [Version::Recorded, Version::Replayed, Version::Fixed];

    fn as_str(self) -> &'static str {
        match self {
            Version::Recorded => "recorded",
            Version::Replayed => "replayed",
            Version::Fixed => "fixed",
        }
    }

    fn spans(self, r: &rankscope_core::analyze::whatif::timeline::TimelineRow) -> &[Span] {
        match self {
            Version::Recorded => &r.recorded,
            Version::Replayed => &r.replayed,
            Version::Fixed => &r.fixed,
        }
    }
}

fn kind_words(k: SpanKind) -> &'static str {
    match k {
        SpanKind::Own => "own time",
        SpanKind::Wait => "waiting",
    }
}

fn kind_class(k: SpanKind) -> &'static str {
    match k {
        SpanKind::Own => "own",
        SpanKind::Wait => "wait",
    }
}

fn total(v: &[Span], k: SpanKind) -> i64 {
    v.iter().filter(|s| s.kind == k).map(|s| s.end_ns - s.start_ns).sum()
}

#[derive(Properties, PartialEq, Debug)]
pub struct Props {
    pub timeline: Timeline,
}

#[function_component(ReplayTimeline)]
pub fn replay_timeline(p: &Props) -> Html {
    let t = &p.timeline;
    let hover = use_state(|| None::<String>);
    let on_hover = {
        let hover = hover.clone();
        Callback::from(move |s: Option<String>| hover.set(s))
    };
    let fixed = match t.fixed_by {
        Some(id) => {
            format!("with the lead finding ({}) fixed: {}", id.as_str().replace('_', " "), t.fixed_how)
        }
        None => format!("with {}", t.fixed_how),
    };
    let shown = if t.rows.len() < t.ranks_total as usize {
        format!(
            " {} of its {} ranks are shown: the lead finding's, the late ones, then the first.",
            t.rows.len(),
            t.ranks_total
        )
    } else {
        String::new()
    };
    html! {
        <div class="whatif-tl" data-testid="whatif-timeline" data-step={t.step.to_string()}
            data-fixed-ns={t.fixed_ns.to_string()} data-replayed-ns={t.replayed_ns.to_string()}
            data-recorded-ns={t.recorded_ns.to_string()}>
            <p>{format!(
                "Step {}, the typical one, per rank: as recorded ({}), as replayed ({}), and {} ({}).{}",
                t.step,
                format::duration(t.recorded_ns as f64),
                format::duration(t.replayed_ns as f64),
                fixed,
                format::duration(t.fixed_ns as f64),
                shown
            )}</p>
            { chart(t, &on_hover) }
            <p class="muted whatif-tl-hover" data-testid="whatif-timeline-hover">
                { (*hover).clone().unwrap_or_else(|| "Hover a span to name it.".to_string()) }
            </p>
            <p class="muted whatif-tl-note">
                { for [SpanKind::Own, SpanKind::Wait].iter().map(|&k| html! {
                    <span class="cmp-tl-key"><svg width="10" height="10"><rect class={classes!("wi-span", kind_class(k))} width="10" height="10" /></svg>{format!(" {} ", kind_words(k))}</span>
                }) }
                {"Per rank, top to bottom: recorded, replayed, fixed. Own time is the rank's compute, host work \
                  and stalls; waiting is for a collective or an exchange to complete. Spans shorter than 0.2% of \
                  the step are joined to their neighbours."}
            </p>
        </div>
    }
}

fn chart(t: &Timeline, hover: &Callback<Option<String>>) -> Html {
    let plot = W - LABEL_W - 8.0;
    let scale = t.recorded_ns.max(t.replayed_ns).max(t.fixed_ns).max(1) as f64;
    let x = move |ns: i64| LABEL_W + plot * (ns as f64 / scale).clamp(0.0, 1.0);
    let block = 3.0 * BAR_H + 2.0 * BAR_GAP + RANK_GAP;
    let h = block * t.rows.len() as f64 + AXIS_H;
    let ticks: Vec<i64> = (0..=5).map(|k| (scale * k as f64 / 5.0) as i64).collect();
    html! {
        <figure class="chart whatif-tl-chart">
            <svg width={W.to_string()} height={h.to_string()} viewBox={format!("0 0 {W} {h}")} role="img"
                aria-label="The typical step per rank, recorded, replayed and with the fix, on one time axis"
                onmouseleave={{ let hover = hover.clone(); Callback::from(move |_| hover.emit(None)) }}>
                { for ticks.iter().enumerate().map(|(i, &tk)| html! {
                    <>
                        <line class="grid" x1={x(tk).to_string()} x2={x(tk).to_string()} y1="0" y2={(h - AXIS_H).to_string()} />
                        <text class="axis" x={x(tk).to_string()} y={(h - 4.0).to_string()}
                            text-anchor={if i + 1 == ticks.len() { "end" } else { "middle" }}>{format::duration(tk as f64)}</text>
                    </>
                }) }
                { for t.rows.iter().enumerate().map(|(k, r)| {
                    let top = block * k as f64;
                    html! {
                        <g data-testid="whatif-timeline-rank" data-rank={r.rank.to_string()}>
                            <text class="axis" x="4" y={(top + 1.5 * BAR_H + BAR_GAP + 4.0).to_string()}>{format!("rank {}", r.rank)}</text>
                            { for Version::ALL.iter().enumerate().map(|(j, &v)| {
                                let y = top + j as f64 * (BAR_H + BAR_GAP);
                                let spans = v.spans(r);
                                html! {
                                    <g data-testid="whatif-timeline-bar" data-version={v.as_str()}
                                        data-own-ns={total(spans, SpanKind::Own).to_string()}
                                        data-wait-ns={total(spans, SpanKind::Wait).to_string()}>
                                        <text class="whatif-tl-version" x={(LABEL_W - 6.0).to_string()} y={(y + BAR_H).to_string()} text-anchor="end">{v.as_str()}</text>
                                        { for spans.iter().map(|s| {
                                            let words = format!(
                                                "rank {}, {}: {} {} (from {} to {})",
                                                r.rank,
                                                v.as_str(),
                                                kind_words(s.kind),
                                                format::duration((s.end_ns - s.start_ns) as f64),
                                                format::duration(s.start_ns as f64),
                                                format::duration(s.end_ns as f64)
                                            );
                                            let enter = { let hover = hover.clone(); let w = words.clone(); Callback::from(move |_| hover.emit(Some(w.clone()))) };
                                            html! {
                                                <rect class={classes!("wi-span", kind_class(s.kind))}
                                                    x={x(s.start_ns).to_string()} y={y.to_string()}
                                                    width={(x(s.end_ns) - x(s.start_ns)).max(0.5).to_string()} height={BAR_H.to_string()}
                                                    onmouseenter={enter}>
                                                    <title>{words}</title>
                                                </rect>
                                            }
                                        }) }
                                    </g>
                                }
                            }) }
                        </g>
                    }
                }) }
            </svg>
        </figure>
    }
}
