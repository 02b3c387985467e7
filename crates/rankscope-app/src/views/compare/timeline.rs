//! Both runs' timelines of one step, the baseline's rows above the job's on one time axis
//! (`compare::timeline`): a step picker (the typical step of each run, or the same position in
//! both), per run a row per rank or per ranks folded together (the label says which), each row
//! starting where its rank's step started on the job's aligned clock and laid out by kind; the
//! difference of the two steps beside. Hovering a span names it.

use std::rc::Rc;

use rankscope_core::compare::timeline::{self, Pick, Row, RunStep, Span, SpanKind, Timelines};
use web_sys::HtmlSelectElement;
use yew::prelude::*;

use crate::format;
use crate::state::Compared;

const W: f64 = 960.0;
const LABEL_W: f64 = 250.0;
const ROW_H: f64 = 14.0;
const BAR_H: f64 = 10.0;
const HEAD_H: f64 = 20.0;
const AXIS_H: f64 = 18.0;
/// Characters of a row label drawn in the gutter (the whole label is its title).
const LABEL_CHARS: usize = 38;

#[derive(Properties, PartialEq, Debug)]
pub struct Props {
    pub compared: Rc<Compared>,
}

#[function_component(StepTimelines)]
pub fn step_timelines(p: &Props) -> Html {
    let pick = use_state(Pick::default);
    let hover = use_state(|| None::<String>);
    let t = {
        let c = p.compared.clone();
        use_memo((c, *pick), |(c, pick)| timeline::timelines(&c.base, &c.new, &c.comparison.verdict, *pick))
    };
    let (nb, nn) = (timeline::step_numbers(&p.compared.base), timeline::step_numbers(&p.compared.new));
    let on_pick = {
        let pick = pick.clone();
        Callback::from(move |e: Event| {
            let s: HtmlSelectElement = e.target_unchecked_into();
            pick.set(s.value().parse::<usize>().map_or(Pick::Typical, Pick::Index));
        })
    };
    let selected = match *pick {
        Pick::Typical => "typical".to_string(),
        Pick::Index(i) => i.to_string(),
    };
    let (Some(b), Some(n)) = (&t.base, &t.new) else {
        return html! { <p class="muted" data-testid="cmp-tl-none">{"A run has no step with ranks in it: no timeline to align."}</p> };
    };
    let on_hover = {
        let hover = hover.clone();
        Callback::from(move |s: Option<String>| hover.set(s))
    };
    html! {
        <div class="cmp-tl" data-testid="cmp-tl">
            <div class="cmp-tl-bar">
                <label>{"Step "}
                    <select data-testid="cmp-tl-step" onchange={on_pick}>
                        <option value="typical" selected={selected == "typical"}>{"each run's typical step (nearest its median)"}</option>
                        { for (0..t.common).map(|i| {
                            let v = i.to_string();
                            html! { <option value={v.clone()} selected={selected == v}>
                                {format!("{} of {}: base #{} / new #{}", i + 1, t.common, nb[i], nn[i])}</option> }
                        }) }
                    </select>
                </label>
                { delta(&t) }
            </div>
            { chart(&t, b, n, &on_hover) }
            <p class="muted cmp-tl-hover" data-testid="cmp-tl-hover">
                { (*hover).clone().unwrap_or_else(|| "Hover a span to name it.".to_string()) }
            </p>
            <p class="muted cmp-tl-note">
                { for SpanKind::ALL.iter().map(|k| html! {
                    <span class="cmp-tl-key"><svg width="10" height="10"><rect class={classes!("tl-span", k.as_str())} width="10" height="10" /></svg>{format!(" {} ", k.words())}</span>
                }) }
                {"Each row starts where its rank's step started on the job's aligned clock; its time is laid out \
                  by kind in this order (the analyses keep each kind's time per rank and step, not the order of \
                  its events). Ranks alike within the tolerance share a row."}
            </p>
        </div>
    }
}

/// "new step #3 703 ms against base step #2 318 ms: +385 ms (+121%)".
fn delta(t: &Timelines) -> Html {
    let (Some(b), Some(n), Some(d)) = (&t.base, &t.new, t.delta_ns()) else { return html! {} };
    let pct = if b.step_ns > 0 {
        format!(" ({:+.0}%)", 100.0 * d as f64 / b.step_ns as f64)
    } else {
        String::new()
    };
    let sign = if d >= 0 { "+" } else { "−" };
    html! {
        <span class="cmp-tl-delta" data-testid="cmp-tl-delta" data-delta-ns={d.to_string()}>
            {format!("new step #{} {} against base step #{} {}: ", n.step, format::duration(n.step_ns as f64), b.step, format::duration(b.step_ns as f64))}
            <strong>{format!("{sign}{}{pct}", format::duration(d.unsigned_abs() as f64))}</strong>
        </span>
    }
}

fn chart(t: &Timelines, b: &RunStep, n: &RunStep, hover: &Callback<Option<String>>) -> Html {
    let plot = W - LABEL_W - 8.0;
    let scale = t.scale_ns.max(1) as f64;
    let x = move |ns: i64| LABEL_W + plot * (ns as f64 / scale).clamp(0.0, 1.0);
    let block = |r: &RunStep| HEAD_H + ROW_H * r.rows.len() as f64;
    let h = block(b) + block(n) + AXIS_H + 6.0;
    let ticks: Vec<i64> = (0..=5).map(|k| (scale * k as f64 / 5.0) as i64).collect();
    let top = 0.0;
    let mid = block(b) + 6.0;
    html! {
        <figure class="chart cmp-tl-chart">
            <svg width={W.to_string()} height={h.to_string()} viewBox={format!("0 0 {W} {h}")} role="img"
                aria-label="The chosen step of the base run above the new run's, ranks on one time axis"
                onmouseleave={{ let hover = hover.clone(); Callback::from(move |_| hover.emit(None)) }}>
                { for ticks.iter().enumerate().map(|(i, &tk)| html! {
                    <>
                        <line class="grid" x1={x(tk).to_string()} x2={x(tk).to_string()} y1="0" y2={(h - AXIS_H).to_string()} />
                        <text class="axis" data-testid="cmp-tl-tick" x={x(tk).to_string()} y={(h - 4.0).to_string()}
                            text-anchor={tick_anchor(i, ticks.len())}>{format::duration(tk as f64)}</text>
                    </>
                }) }
                { run_block("base", b, top, &x, hover) }
                { run_block("new", n, mid, &x, hover) }
            </svg>
        </figure>
    }
}

/// A tick label centred on its tick, but the last one ends at the axis' end (centred, it ran
/// past the drawing's right edge and was cut).
fn tick_anchor(i: usize, n: usize) -> &'static str {
    if i + 1 == n {
        "end"
    } else {
        "middle"
    }
}

fn run_block(
    which: &'static str,
    r: &RunStep,
    y0: f64,
    x: &dyn Fn(i64) -> f64,
    hover: &Callback<Option<String>>,
) -> Html {
    let folded = if r.tolerance_ns > 0 {
        format!(", {} rows (alike within {})", r.rows.len(), format::duration(r.tolerance_ns as f64))
    } else {
        String::new()
    };
    let head = format!(
        "{which}: step #{} ({} of its steps), {}, {} rank{}{folded}",
        r.step,
        ordinal(r.index + 1),
        format::duration(r.step_ns as f64),
        r.ranks,
        if r.ranks == 1 { "" } else { "s" }
    );
    html! {
        <g data-testid="cmp-tl-run" data-run={which} data-step={r.step.to_string()} data-step-ns={r.step_ns.to_string()}
            data-rows={r.rows.len().to_string()} data-ranks={r.ranks.to_string()} data-tolerance-ns={r.tolerance_ns.to_string()}>
            <text class="cmp-tl-head" x="4" y={(y0 + 14.0).to_string()}>{head}</text>
            { for r.rows.iter().enumerate().map(|(i, row)| row_html(which, row, y0 + HEAD_H + i as f64 * ROW_H, x, hover)) }
        </g>
    }
}

fn ordinal(n: usize) -> String {
    let suffix = match (n % 10, n % 100) {
        (_, 11..=13) => "th",
        (1, _) => "st",
        (2, _) => "nd",
        (3, _) => "rd",
        _ => "th",
    };
    format!("{n}{suffix}")
}

fn row_html(
    which: &'static str,
    row: &Row,
    y: f64,
    x: &dyn Fn(i64) -> f64,
    hover: &Callback<Option<String>>,
) -> Html {
    let label: String = if row.label.chars().count() > LABEL_CHARS {
        format!("{}…", row.label.chars().take(LABEL_CHARS - 1).collect::<String>())
    } else {
        row.label.clone()
    };
    let ranks = format::ranges(&row.ranks);
    html! {
        <g data-testid="cmp-tl-row" data-run={which} data-ranks={ranks} data-count={row.ranks.len().to_string()}
            data-drawn={row.drawn.to_string()} data-named={row.named.to_string()}
            data-start-ns={row.start_ns.to_string()} data-end-ns={row.end_ns.to_string()}>
            <text class={classes!("axis", row.named.then_some("named"))} x="4" y={(y + BAR_H).to_string()}>
                {label}<title>{row.label.clone()}</title>
            </text>
            { for row.spans.iter().map(|s| span_html(which, row, s, y, x, hover)) }
        </g>
    }
}

fn span_html(
    which: &'static str,
    row: &Row,
    s: &Span,
    y: f64,
    x: &dyn Fn(i64) -> f64,
    hover: &Callback<Option<String>>,
) -> Html {
    let words = span_words(which, row, s);
    let x0 = x(s.start_ns);
    let w = (x(s.start_ns + s.dur_ns) - x0).max(0.5);
    let enter = {
        let hover = hover.clone();
        let words = words.clone();
        Callback::from(move |_: MouseEvent| hover.emit(Some(words.clone())))
    };
    html! {
        <rect class={classes!("tl-span", s.kind.as_str())} data-kind={s.kind.as_str()} data-dur-ns={s.dur_ns.to_string()}
            x={x0.to_string()} y={(y + 1.0).to_string()} width={w.to_string()} height={BAR_H.to_string()}
            onmouseenter={enter}>
            <title>{words}</title>
        </rect>
    }
}

/// "new, rank 3: data loading 416 ms (from 16 ms)"; with a collective, "… in 2 all_reduce, 4.2 MB
/// on the data-parallel group 0 (4 ranks), from backward" (the group when the analysis says it).
fn span_words(which: &str, row: &Row, s: &Span) -> String {
    let mut w = format!(
        "{which}, {}: {} {} (from {})",
        row.label,
        s.kind.words(),
        format::duration(s.dur_ns as f64),
        format::duration(s.start_ns as f64)
    );
    if let Some(c) = &s.collective {
        w.push_str(&format!(", in {} {}, {}", c.count, c.kind.name(), format::bytes(c.bytes.max(0) as u64)));
        if let Some(g) = &c.group {
            w.push_str(&format!(" on the {}", g.words()));
        }
        if !c.region.is_empty() {
            w.push_str(&format!(", from {}", c.region));
        }
    }
    w
}
