//! The step time of both runs side by side: per run a bar to its median step, a whisker over its
//! spread (median ± 1.4826 × MAD, the run's `noise`), and a dot per profiled step (the job's
//! step time, `compare::figures::step_times`, the samples the change is measured on).

use rankscope_core::compare::figures::step_times;
use yew::prelude::*;

use crate::format;
use crate::state::Compared;

const W: f64 = 640.0;
const LABEL_W: f64 = 56.0;
const ROW_H: f64 = 34.0;
const BAR_H: f64 = 16.0;
const AXIS_H: f64 = 18.0;
/// Most step dots drawn per run.
const MAX_DOTS: usize = 400;

#[derive(Properties, PartialEq, Debug)]
pub struct Props {
    pub compared: std::rc::Rc<Compared>,
}

/// One run's row.
struct Run {
    which: &'static str,
    median_ns: i64,
    spread_ns: Option<i64>,
    steps: Vec<i64>,
}

#[function_component(StepBars)]
pub fn step_bars(p: &Props) -> Html {
    let c = &p.compared.comparison;
    let Some(s) = c.step_time.shift else { return html! {} };
    let runs = [
        Run {
            which: "base",
            median_ns: s.base_ns,
            spread_ns: c.step_time.noise_base.as_ref().map(|n| n.spread_ns),
            steps: step_times(&p.compared.base),
        },
        Run {
            which: "new",
            median_ns: s.new_ns,
            spread_ns: c.step_time.noise_new.as_ref().map(|n| n.spread_ns),
            steps: step_times(&p.compared.new),
        },
    ];
    let top = runs
        .iter()
        .flat_map(|r| r.steps.iter().copied().chain([r.median_ns + r.spread_ns.unwrap_or(0)]))
        .max()
        .unwrap_or(1)
        .max(1) as f64
        * 1.05;
    let plot = W - LABEL_W - 8.0;
    let x = |ns: f64| LABEL_W + plot * (ns / top).clamp(0.0, 1.0);
    let h = ROW_H * runs.len() as f64 + AXIS_H;
    let ticks = (0..=4).map(|k| top / 1.05 * k as f64 / 4.0);
    html! {
        <figure class="chart compare-bars" data-testid="compare-bars">
            <svg width={W.to_string()} height={h.to_string()} viewBox={format!("0 0 {W} {h}")} role="img"
                aria-label="Step time of the base and the new run: median, spread and every step">
                { for ticks.map(|t| html! {
                    <>
                        <line class="grid" x1={x(t).to_string()} x2={x(t).to_string()} y1="0" y2={(h - AXIS_H).to_string()} />
                        <text class="axis" x={x(t).to_string()} y={(h - 4.0).to_string()} text-anchor="middle">{format::duration(t)}</text>
                    </>
                }) }
                { for runs.iter().enumerate().map(|(i, r)| row(r, i as f64 * ROW_H, &x)) }
            </svg>
            <figcaption>{runs.iter().map(caption).collect::<Vec<_>>().join("; ")}</figcaption>
        </figure>
    }
}

fn row(r: &Run, y0: f64, x: &dyn Fn(f64) -> f64) -> Html {
    let mid = y0 + ROW_H / 2.0;
    let m = r.median_ns as f64;
    let whisker = r.spread_ns.map(|s| (x(m - s as f64), x(m + s as f64)));
    html! {
        <g data-testid="compare-bar" data-run={r.which} data-median-ns={r.median_ns.to_string()}
            data-spread-ns={r.spread_ns.map(|s| s.to_string()).unwrap_or_default()} data-steps={r.steps.len().to_string()}>
            <text class="axis" x="4" y={(mid + 4.0).to_string()}>{r.which}</text>
            <rect class={classes!("compare-bar", r.which)} x={LABEL_W.to_string()} y={(mid - BAR_H / 2.0).to_string()}
                width={(x(m) - LABEL_W).max(0.0).to_string()} height={BAR_H.to_string()}>
                <title>{caption(r)}</title>
            </rect>
            if let Some((lo, hi)) = whisker {
                <line class="whisker" x1={lo.to_string()} x2={hi.to_string()} y1={mid.to_string()} y2={mid.to_string()} />
                <line class="whisker" x1={lo.to_string()} x2={lo.to_string()} y1={(mid - 6.0).to_string()} y2={(mid + 6.0).to_string()} />
                <line class="whisker" x1={hi.to_string()} x2={hi.to_string()} y1={(mid - 6.0).to_string()} y2={(mid + 6.0).to_string()} />
            }
            // At most MAX_DOTS dots, every k-th step of a long run.
            { for r.steps.iter().step_by(r.steps.len().div_ceil(MAX_DOTS).max(1)).map(|&t| html! {
                <circle class="step-dot" cx={x(t as f64).to_string()} cy={(mid + BAR_H / 2.0 + 4.0).to_string()} r="2.5" />
            }) }
        </g>
    }
}

/// "base: median 894 ms, spread ±21 ms, 4 steps".
fn caption(r: &Run) -> String {
    format!(
        "{}: median step {}, spread {}, {} step{}",
        r.which,
        format::duration(r.median_ns as f64),
        r.spread_ns.map_or("– (too few steps)".to_string(), |s| format!("±{}", format::duration(s as f64))),
        r.steps.len(),
        if r.steps.len() == 1 { "" } else { "s" }
    )
}
