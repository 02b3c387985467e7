//! Pipeline: the stages of a pipeline-parallel job, each stage's step split into compute, the
//! wait in its blocking receives and the rest of its bubble, against the schedule's formula;
//! the per stage × step table; the point-to-point links between stages. Above them, one step
//! (a picker, the median-length step first) drawn stages × time on the aligned clock: each
//! stage's compute (forward / backward when annotated), optimizer, bubbles hatched, blocking
//! receives as a strip under the row, and the step's bubble share against the formula.
//!
//! Bars are SVG with CSS classes (`seg-*`, `pipe-*` in `www/style.css`; the CSP allows no
//! inline style).

use rankscope_core::analyze::pipeline::{BlockKind, PipelineReport, StageStep};
use yew::prelude::*;

use crate::format;
use crate::state::JobView;
use crate::tokens::{HEAT_CELL_H, HEAT_LABEL_W, HEAT_WIDTH};

#[derive(Properties, PartialEq, Debug)]
pub struct Props {
    pub job: std::rc::Rc<JobView>,
}

fn pct(x: f64) -> String {
    format!("{:.1}%", 100.0 * x)
}

/// One bar per stage: compute, recv wait, the rest of the bubble; a mark at the formula's share.
fn bars(p: &PipelineReport) -> Html {
    let bar_w = HEAT_WIDTH - HEAT_LABEL_W - 10.0;
    let h = 8.0 + HEAT_CELL_H * p.per_stage.len() as f64;
    let theory = p.theory_bubble_share;
    let rows = p.per_stage.iter().enumerate().map(|(i, s)| {
        let y = 4.0 + i as f64 * HEAT_CELL_H;
        let span = s.span_ns.max(1) as f64;
        let other = (s.bubble_ns - s.recv_wait_ns).max(0);
        let parts: [(&str, &str, i64); 3] = [
            ("compute", "compute", s.compute_ns.min(s.span_ns)),
            ("wait", "waiting in receives", s.recv_wait_ns.min(s.bubble_ns).max(0)),
            ("idle", "the rest of the bubble (sends, bookkeeping, idle)", other),
        ];
        let mut x = HEAT_LABEL_W;
        let segs = parts
            .iter()
            .map(|(class, what, v)| {
                let w = bar_w * (*v).max(0) as f64 / span;
                let r = html! {
                    <rect class={classes!("seg", format!("seg-{class}"))} x={format!("{x:.1}")} y={format!("{y:.1}")}
                        width={format!("{:.1}", w.max(0.0))} height={format!("{:.1}", HEAT_CELL_H - 4.0)}>
                        <title>{format!("stage {} (rank {}) · {what}: {} per step ({:.1}%)", s.stage, s.rank, format::duration(*v as f64), 100.0 * *v as f64 / span)}</title>
                    </rect>
                };
                x += w;
                r
            })
            .collect::<Html>();
        // The formula's bubble, measured from the right end of the bar.
        let mark = theory.map(|t| {
            let mx = HEAT_LABEL_W + bar_w * (1.0 - t);
            html! { <line class="theory-mark" x1={format!("{mx:.1}")} x2={format!("{mx:.1}")} y1={format!("{:.1}", y - 1.0)} y2={format!("{:.1}", y + HEAT_CELL_H - 3.0)}>
                <title>{format!("the schedule's bubble (p − 1)/(m + p − 1) = {}", pct(t))}</title></line> }
        });
        html! {
            <g data-testid="stage-bar" data-stage={s.stage.to_string()} data-rank={s.rank.to_string()}
                data-bubble-share={format!("{:.4}", s.bubble_share)}>
                <text class="axis" x={format!("{:.1}", HEAT_LABEL_W - 6.0)} y={format!("{:.1}", y + (HEAT_CELL_H - 4.0) / 2.0)}
                    text-anchor="end" dominant-baseline="middle">{format!("stage {} · r{}", s.stage, s.rank)}</text>
                { segs }
                { for mark }
            </g>
        }
    });
    html! {
        <svg class="bars" data-testid="stage-bars" width={format!("{HEAT_WIDTH:.0}")} height={format!("{h:.0}")}
            viewBox={format!("0 0 {HEAT_WIDTH:.0} {h:.0}")} role="img" aria-label="Each stage's step: compute and bubble">
            { for rows }
        </svg>
    }
}

/// The steps of the report, and the one to show first: the median by length (the longest
/// stage window of each step's, on the aligned clock).
fn steps_and_default(p: &PipelineReport) -> (Vec<u32>, Option<u32>) {
    let mut steps: Vec<u32> = p.steps.iter().map(|s| s.step).collect();
    steps.sort_unstable();
    steps.dedup();
    let mut by_len: Vec<(i64, u32)> = steps
        .iter()
        .map(|&n| {
            let rows = p.steps.iter().filter(|s| s.step == n);
            let lo = rows.clone().map(|s| s.start_ns).min().unwrap_or(0);
            let hi = rows.map(|s| s.end_ns).max().unwrap_or(0);
            (hi - lo, n)
        })
        .collect();
    by_len.sort_unstable();
    let median = by_len.get(by_len.len().saturating_sub(1) / 2).map(|x| x.1);
    (steps, median)
}

/// The gaps of a stage's window that neither compute nor the optimizer covers: its bubbles.
fn bubbles(s: &StageStep) -> Vec<(i64, i64)> {
    let mut busy: Vec<(i64, i64)> = s
        .blocks
        .iter()
        .filter(|b| b.kind != BlockKind::RecvWait)
        .map(|b| (b.start_ns.max(s.start_ns), b.end_ns.min(s.end_ns)))
        .filter(|b| b.1 > b.0)
        .collect();
    busy.sort_unstable();
    let mut out = Vec::new();
    let mut t = s.start_ns;
    for (a, b) in busy {
        if a > t {
            out.push((t, a));
        }
        t = t.max(b);
    }
    if s.end_ns > t {
        out.push((t, s.end_ns));
    }
    out
}

fn kind_name(k: BlockKind) -> &'static str {
    match k {
        BlockKind::Forward => "forward",
        BlockKind::Backward => "backward",
        BlockKind::Compute => "compute",
        BlockKind::RecvWait => "recv_wait",
        BlockKind::Optimizer => "optimizer",
    }
}

/// A tick spacing of 1, 2 or 5 × 10^k ns giving about `target` ns between ticks.
fn nice_step(target: f64) -> f64 {
    let p = 10f64.powf(target.max(1.0).log10().floor());
    [1.0, 2.0, 5.0, 10.0].iter().map(|m| m * p).find(|&s| s >= target).unwrap_or(10.0 * p)
}

/// One step, stages × time (see the module doc).
fn diagram(p: &PipelineReport, step: u32) -> Html {
    let rows: Vec<&StageStep> = {
        let mut v: Vec<&StageStep> = p.steps.iter().filter(|s| s.step == step).collect();
        v.sort_by_key(|s| s.stage);
        v
    };
    let (Some(t0), Some(t1)) = (rows.iter().map(|s| s.start_ns).min(), rows.iter().map(|s| s.end_ns).max())
    else {
        return html! {};
    };
    let total = (t1 - t0).max(1) as f64;
    const SHARE_W: f64 = 150.0;
    const ROW: f64 = 30.0;
    const BAR: f64 = 18.0;
    const TOP: f64 = 18.0;
    let plot_w = HEAT_WIDTH - HEAT_LABEL_W - SHARE_W - 90.0;
    let share_x = HEAT_LABEL_W + plot_w + 16.0;
    let h = TOP + ROW * rows.len() as f64 + 6.0;
    let x = |t: i64| HEAT_LABEL_W + plot_w * (t - t0) as f64 / total;
    let f1 = |v: f64| format!("{v:.1}");
    let tick = nice_step(total / 8.0);
    let ticks = (0..=((total / tick).floor() as i64).min(50)).map(|k| {
        let tx = HEAT_LABEL_W + plot_w * (k as f64 * tick) / total;
        html! { <>
            <line class="tick" x1={f1(tx)} x2={f1(tx)} y1={f1(TOP - 4.0)} y2={f1(h - 6.0)} />
            <text class="axis" x={f1(tx)} y="10" text-anchor="middle">{format::duration(k as f64 * tick)}</text>
        </> }
    });
    let theory = p.theory_bubble_share;
    let body = rows.iter().enumerate().map(|(i, s)| {
        let y = TOP + i as f64 * ROW;
        let who = format!("stage {} (rank {})", s.stage, s.rank);
        let window = html! { <rect class="pipe-window" x={f1(x(s.start_ns))} y={f1(y)} width={f1((x(s.end_ns) - x(s.start_ns)).max(0.5))} height={f1(BAR)} /> };
        let holes = bubbles(s);
        let bubble_rects = holes.iter().map(|&(a, b)| html! {
            <rect class="pipe-bubble" data-testid="pipe-bubble" x={f1(x(a))} y={f1(y)} width={f1((x(b) - x(a)).max(0.5))} height={f1(BAR)}>
                <title>{format!("{who} · bubble: idle {} (waiting for a neighbour, or the schedule's bookkeeping)", format::duration((b - a) as f64))}</title>
            </rect>
        });
        let blocks = s.blocks.iter().map(|b| {
            let k = kind_name(b.kind);
            let (by, bh) = if b.kind == BlockKind::RecvWait { (y + BAR + 1.0, 5.0) } else { (y, BAR) };
            html! {
                <rect class={format!("pipe-{k}")} data-kind={k} x={f1(x(b.start_ns))} y={f1(by)}
                    width={f1((x(b.end_ns) - x(b.start_ns)).max(0.5))} height={f1(bh)}>
                    <title>{format!("{who} · {}: {} at +{}", k.replace('_', " "), format::duration((b.end_ns - b.start_ns) as f64), format::duration((b.start_ns - t0) as f64))}</title>
                </rect>
            }
        });
        let share_w = SHARE_W * s.bubble_share.clamp(0.0, 1.0);
        let mark = theory.map(|t| {
            let mx = share_x + SHARE_W * t.clamp(0.0, 1.0);
            html! { <line class="theory-mark" x1={f1(mx)} x2={f1(mx)} y1={f1(y - 1.0)} y2={f1(y + BAR + 1.0)}>
                <title>{format!("the schedule's bubble (p − 1)/(m + p − 1) = {}", pct(t))}</title></line> }
        });
        html! {
            <g data-testid="pipe-row" data-stage={s.stage.to_string()} data-rank={s.rank.to_string()}
                data-bubble-share={format!("{:.4}", s.bubble_share)} data-bubbles={holes.len().to_string()}
                data-blocks={s.blocks.len().to_string()}>
                <text class="axis" x={f1(HEAT_LABEL_W - 6.0)} y={f1(y + BAR / 2.0)} text-anchor="end" dominant-baseline="middle">{format!("stage {} · r{}", s.stage, s.rank)}</text>
                { window }
                { for bubble_rects }
                { for blocks }
                <rect class="share-bg" x={f1(share_x)} y={f1(y)} width={f1(SHARE_W)} height={f1(BAR)} />
                <rect class="share-bar" data-testid="pipe-share" x={f1(share_x)} y={f1(y)} width={f1(share_w)} height={f1(BAR)}>
                    <title>{format!("{who} · bubble share of step {step}: {}{}", pct(s.bubble_share),
                        theory.map(|t| format!(" (the schedule's formula: {})", pct(t))).unwrap_or_default())}</title>
                </rect>
                { for mark }
                <text class="axis" x={f1(share_x + SHARE_W + 6.0)} y={f1(y + BAR / 2.0)} dominant-baseline="middle">{pct(s.bubble_share)}</text>
            </g>
        }
    });
    html! {
        <svg class="pipe-diagram" data-testid="pipeline-diagram" data-step={step.to_string()} width={format!("{HEAT_WIDTH:.0}")} height={format!("{h:.0}")}
            viewBox={format!("0 0 {HEAT_WIDTH:.0} {h:.0}")} role="img" aria-label={format!("Step {step}: each stage's compute and bubbles over time")}>
            <defs>
                <pattern id="pipe-hatch" width="6" height="6" patternUnits="userSpaceOnUse" patternTransform="rotate(45)">
                    <rect class="hatch-bg" width="6" height="6" />
                    <line class="hatch-line" x1="0" y1="0" x2="0" y2="6" />
                </pattern>
            </defs>
            { for ticks }
            <text class="axis" x={f1(share_x)} y="10">{"bubble share"}</text>
            { for body }
        </svg>
    }
}

#[function_component(Pipeline)]
pub fn pipeline(p: &Props) -> Html {
    let picked = use_state(|| None::<u32>);
    let Some(pl) = &p.job.analysis.pipeline else {
        return html! {
            <section class="pipeline" data-testid="pipeline">
                <p class="muted" data-testid="no-pipeline">{"No pipeline parallelism in these traces: no chain of ranks exchanging sends and receives, and no Forward i / Backward i stage annotations."}</p>
            </section>
        };
    };
    let chain = pl.stages.iter().map(|r| r.to_string()).collect::<Vec<_>>().join(" → ");
    let head = format!(
        "{} stages (ranks {chain}), schedule {}{}, {} micro-batches per step{}.",
        pl.stages.len(),
        pl.schedule.name(),
        pl.virtual_stages.map(|v| format!(" with {v} virtual stages per rank")).unwrap_or_default(),
        pl.micro_batches.map_or("?".into(), |m| m.to_string()),
        match (pl.theory_bubble_share, pl.theory_bubble_share_2m) {
            (Some(t), Some(t2)) => format!(
                "; the schedule's bubble (p − 1)/(m + p − 1) is {}, {} with twice the micro-batches",
                pct(t),
                pct(t2)
            ),
            (Some(t), None) => format!("; the schedule's bubble (p − 1)/(m + p − 1) is {}", pct(t)),
            _ => String::new(),
        }
    );
    let (steps, median) = steps_and_default(pl);
    let step = picked.filter(|s| steps.contains(s)).or(median);
    let on_pick = {
        let picked = picked.clone();
        Callback::from(move |e: Event| {
            let el: web_sys::HtmlSelectElement = e.target_unchecked_into();
            picked.set(el.value().parse().ok());
        })
    };
    let annotated = pl
        .steps
        .iter()
        .any(|s| s.blocks.iter().any(|b| matches!(b.kind, BlockKind::Forward | BlockKind::Backward)));
    let has_blocks = pl.steps.iter().any(|s| !s.blocks.is_empty());
    html! {
        <section class="pipeline" data-testid="pipeline">
            <p data-testid="pipeline-head">{head}</p>
            if let (Some(step), true) = (step, has_blocks) {
                <h2>
                    {"One step, stages × time (aligned clock)"}
                    <select data-testid="pipeline-step" aria-label="Step" onchange={on_pick}>
                        { for steps.iter().map(|&n| html! {
                            <option value={n.to_string()} selected={n == step}>
                                {format!("step {n}{}", if Some(n) == median { " (median length)" } else { "" })}
                            </option>
                        }) }
                    </select>
                </h2>
                <div class="legend">
                    if annotated {
                        <span class="legend-item"><span class="swatch sw-forward"></span>{"forward"}</span>
                        <span class="legend-item"><span class="swatch sw-backward"></span>{"backward"}</span>
                    }
                    <span class="legend-item"><span class="swatch sw-compute-unplaced"></span>{if annotated { "other compute" } else { "compute (forward / backward not annotated)" }}</span>
                    <span class="legend-item"><span class="swatch sw-optimizer"></span>{"optimizer"}</span>
                    <span class="legend-item"><span class="swatch sw-bubble"></span>{"bubble (idle)"}</span>
                    <span class="legend-item"><span class="swatch sw-recv-wait"></span>{"blocked in a receive (strip below)"}</span>
                    if pl.theory_bubble_share.is_some() { <span class="legend-item muted">{"| the schedule's bubble share"}</span> }
                </div>
                { diagram(pl, step) }
            }
            <h2>{"Each stage's step (mean over steps)"}</h2>
            <div class="legend">
                <span class="legend-item"><span class="swatch sw-compute"></span>{"compute"}</span>
                <span class="legend-item"><span class="swatch sw-wait"></span>{"waiting in receives"}</span>
                <span class="legend-item"><span class="swatch sw-idle"></span>{"the rest of the bubble"}</span>
                if pl.theory_bubble_share.is_some() { <span class="legend-item muted">{"| the schedule's bubble, from the right"}</span> }
            </div>
            { bars(pl) }
            <table class="stages" data-testid="stage-table">
                <thead><tr>
                    <th class="num">{"Stage"}</th><th class="num">{"Rank"}</th><th class="num">{"Span"}</th>
                    <th class="num">{"Compute"}</th><th class="num">{"Bubble"}</th><th class="num">{"Bubble share"}</th>
                    <th class="num">{"Recv wait"}</th><th class="num">{"Micro-batches"}</th>
                </tr></thead>
                <tbody>
                { for pl.per_stage.iter().map(|s| html! {
                    <tr data-testid="stage-row" data-stage={s.stage.to_string()}
                        class={classes!((pl.slowest_stage == Some(s.stage)).then_some("named"))}>
                        <td class="num">{s.stage}{if pl.slowest_stage == Some(s.stage) { " (slowest)" } else { "" }}</td>
                        <td class="num">{s.rank}</td>
                        <td class="num">{format::duration(s.span_ns as f64)}</td>
                        <td class="num">{format::duration(s.compute_ns as f64)}</td>
                        <td class="num">{format::duration(s.bubble_ns as f64)}</td>
                        <td class="num" data-testid="bubble-share">{pct(s.bubble_share)}</td>
                        <td class="num">{format::duration(s.recv_wait_ns as f64)}</td>
                        <td class="num">{s.micro_batches.map_or("–".into(), |m| m.to_string())}</td>
                    </tr>
                }) }
                </tbody>
            </table>
            if !pl.links.is_empty() {
                <h2>{"Point-to-point links"}</h2>
                <table class="links" data-testid="p2p-links">
                    <thead><tr>
                        <th>{"From → to"}</th><th class="num">{"Matched"}</th><th class="num">{"Unmatched sends"}</th>
                        <th class="num">{"Unmatched recvs"}</th><th class="num">{"Size mismatches"}</th>
                        <th class="num">{"Message"}</th><th class="num">{"Peers inferred"}</th>
                    </tr></thead>
                    <tbody>
                    { for pl.links.iter().map(|l| html! {
                        <tr data-testid="p2p-link">
                            <td>{format!("{} → {}", l.src, l.dst)}</td>
                            <td class="num">{l.matched}</td>
                            <td class="num">{l.unmatched_sends}</td>
                            <td class="num">{l.unmatched_recvs}</td>
                            <td class="num">{l.size_mismatches}</td>
                            <td class="num">{l.bytes.map_or("–".into(), |b| format::bytes(b.max(0) as u64))}</td>
                            <td class="num">{l.peers_inferred}</td>
                        </tr>
                    }) }
                    </tbody>
                </table>
            }
        </section>
    }
}
